#pragma once
/// The oracle: a kernel's intent. The body runs for every grid point in grid
/// order (last axis fastest) directly on whole arrays — ideal memory, as
/// Pallas' `interpret=True`: each step slices every windowed operand's block
/// out of its array, runs the body on it and writes output blocks back. Parts
/// of a block outside its array read as poison and are dropped on write.

#include "executor/inputs.hpp"
#include "executor/tensor.hpp"
#include "executor/value.hpp"
#include "spec/bind.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::executor {

/// An operand with every size bound (spec::bind; not windowed: memory_space
/// any/hbm, or scratch, which the body sees whole).
using ConcreteOperand = spec::BoundOperand;

/// A kernel bound by spec::bind with every param required, and `--scale`
/// applied to its shapes and blocks.
struct ConcreteKernel : spec::BoundKernel {
  std::map<std::string, std::string> aliases; ///< output -> input
  spec::Block body;                           ///< with program_id/num_programs rewritten
  std::int64_t scale = 1;
  /// Mosaic GPU (h100/h200): grid points run CTA by CTA
  /// (spec::grid_point), `cta` marking the CTA axes (spec::cta_axes; empty on TPU).
  bool gpu = false;
  std::vector<bool> cta;
  /// A kernel with a nested emit_pipeline is bound as its flattened kernel
  /// (spec/nested.hpp), held here: `spec` and the operands point into it.
  std::shared_ptr<const spec::KernelSpec> flattened;
};

/// spec::bind_params with every param required (a run needs values, and
/// there is no default for a symbolic one); throws ExecError(bad_input) at
/// the first param it cannot bind.
spec::Env bind_params(const std::vector<spec::Param> &, const spec::Env &overrides);

/// Binds and evaluates a kernel. `scale` divides every array and block dim
/// (and scratch dim) except squeezed and unit ones, keeping the grid: each
/// such dim must be divisible by it. Throws ExecError(bad_input) otherwise.
/// `target` overrides the spec's `target =` (it decides the GPU grid order).
ConcreteKernel concretize(const spec::KernelSpec &, const spec::Env &overrides, std::int64_t scale,
                          const std::optional<std::string> &target = std::nullopt);

/// The spec with its shapes, blocks and grid replaced by the concrete
/// (scaled) integers, for lowering a scaled kernel.
spec::KernelSpec concrete_spec(const ConcreteKernel &);

/// The grid point at position `linear` of run order: lexicographic (last
/// axis fastest) on TPU, CTA by CTA on Mosaic GPU.
Shape grid_point(const ConcreteKernel &, std::int64_t linear);
/// True when the point at `linear` starts a new CTA (Mosaic GPU; false on TPU).
bool starts_cta(const ConcreteKernel &, std::int64_t linear);

/// Arrays by operand name (ins, outs, scratch).
using ArrayMap = std::map<std::string, std::unique_ptr<HostArray>>;

/// Fresh arrays for the kernel: inputs seeded data of `kind`, outputs poison
/// (or a copy of their aliased input), scratch poison.
ArrayMap make_kernel_arrays(const ConcreteKernel &, std::uint64_t seed, InputKind kind = InputKind::uniform);

/// Per output operand, one byte per element of its array: 1 where some
/// grid point's body stored into the element (poison there was computed),
/// 0 where none did (poison there was never written).
using WrittenMap = std::map<std::string, std::vector<std::uint8_t>>;

/// Runs the oracle in place on `arrays` (from make_kernel_arrays), recording
/// the body's stores into `written` when given.
/// Throws ExecError on an ill-typed body.
/// `stand_in` 1 or 2: a further pass whose undefined data (a partial
/// block's padding, scratch at a CTA's start; the caller's outputs likewise)
/// holds HostArray::poison_with_stand_in's values of that kind and whose
/// Triton store checks are off: where it and the first pass disagree, the
/// body's result depends on undefined data that dropped out of the poison
/// (`ids == iota` of an integer's sentinel, a comparison with NaN).
void run_oracle(const ConcreteKernel &, ArrayMap &arrays, WrittenMap *written = nullptr, int stand_in = 0);

} // namespace pipecheck::executor
