#pragma once
/// Validation of what the parser cannot see: names, ranks, extents, slots,
/// copy shapes and dtypes, writes to non-buffers. Each problem is a located
/// error. After validation the IR's invariants may be asserted.

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <string>
#include <vector>

namespace pipecheck::spec {

std::vector<Diagnostic> validate(const File &);

std::vector<Diagnostic> validate(const KernelSpec &);
std::vector<Diagnostic> validate(const Program &);

} // namespace pipecheck::spec
