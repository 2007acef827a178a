#pragma once
/// `opaque(args..., op=NAME, shape=(...), dtype=T)`: an operation the `.pk`
/// language has no form for (the JAX bridge writes one per such jaxpr
/// primitive). It reads its arguments and yields a value of the stated type
/// whose elements are unknown: the rules see its effects, `run` refuses it.

#include "spec/ir.hpp"

#include <string>
#include <vector>

namespace pipecheck::spec {

/// One opaque call: the operation it names and where it is.
struct OpaqueOp {
  std::string op;
  Loc loc;
};

/// Every opaque call of a kernel's body and reference, in source order.
std::vector<OpaqueOp> opaque_ops(const KernelSpec &);
/// Every opaque call of a pipeline's body, in source order.
std::vector<OpaqueOp> opaque_ops(const Program &);
/// "sinh at line 7, cumsum at line 9".
std::string describe(const std::vector<OpaqueOp> &);

} // namespace pipecheck::spec
