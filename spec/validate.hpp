#pragma once
/// Validation of what the parser cannot see: names, ranks, extents, slots,
/// copy shapes and dtypes, writes to non-buffers. Each problem is a located
/// error. After validation the IR's invariants may be asserted.

#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <string>
#include <vector>

namespace pipecheck::spec {

std::vector<Diagnostic> validate(const File &);
/// The file's unit names, and every unit but `except` (`fuzz` validates the
/// kernel it sweeps one configuration at a time).
std::vector<Diagnostic> validate(const File &, const std::variant<KernelSpec, Program> *except);

/// A unit validated with `overrides` (--set, a fuzz configuration) in place
/// of its params' written values: what an override makes invalid (a slice
/// past its block, a setting out of range) is an error as if written so.
std::vector<Diagnostic> validate(const KernelSpec &, const Env &overrides = {});
std::vector<Diagnostic> validate(const Program &, const Env &overrides = {});

} // namespace pipecheck::spec
