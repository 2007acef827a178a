#pragma once
/// A nested `emit_pipeline` (pltpu.emit_pipeline) in a kernel body: where it
/// is, what the language accepts of it, and its meaning for the spec rules,
/// the type checker and the oracle, as one kernel (`flatten_nested`).
///
/// The lowering (spec/lower.hpp) runs the inner pipeline through the same
/// TPU Scheduler as a top-level kernel, once per outer step; this file gives
/// the same kernel as a pallas_call whose grid is the outer grid followed by
/// the inner one, which is the sequential meaning of the nested form: per
/// outer grid point, the body's statements before the emit_pipeline run at
/// the first inner point, the inner body at every inner point (its blocks
/// those of the inner BlockSpecs), the statements after it at the last.

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <vector>

namespace pipecheck::spec {

/// The most inner grid axes accepted.
constexpr std::size_t kMaxInnerGridRank = 4;

/// True when some statement of `b`, at any depth, is an emit_pipeline.
bool has_emit_pipeline(const Block &b);
/// The index in `k.body` of its top-level emit_pipeline, or -1.
int emit_pipeline_index(const KernelSpec &k);

/// What the language does not accept of a kernel's emit_pipeline, each
/// error located: one at the top level of the body only (not under `when`
/// or `for`, not inside another: at most two levels), TPU only, an inner
/// grid of rank at most 4 whose extents are params and constants, specs
/// that name the kernel's `memory_space=any|hbm` operands of the same role,
/// once each, with no memory_space of their own, and no other statement of
/// the body naming a staged operand. Empty for a kernel without one.
std::vector<Diagnostic> nested_errors(const KernelSpec &k);

/// The kernel with its emit_pipeline flattened into one grid (see above):
/// grid = outer ++ inner; each staged operand becomes a windowed operand
/// with the inner BlockSpec (its index map given the outer indices first);
/// the other operands keep their blocks (their maps ignore the inner
/// indices); `program_id(a)` in the inner body and maps is inner axis a,
/// i.e. axis `outer rank + a`; integer locals bound before the
/// emit_pipeline that the inner maps read are substituted. `k` itself when
/// it has no emit_pipeline. Needs nested_errors(k) empty.
KernelSpec flatten_nested(const KernelSpec &k);

} // namespace pipecheck::spec
