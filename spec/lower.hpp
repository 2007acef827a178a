#pragma once
/// spec::lower: the one Pallas emitter. A KernelSpec becomes the Program that
/// Pallas' pipeline would run: prologue / loop / epilogue of copy_in_start,
/// copy_in_wait, compute, copy_out_start, copy_out_wait on slot rings
/// (TPU: the emit_pipeline Scheduler; h100/h200: the Mosaic GPU pipeline).
/// See docs/lowering.md for where the model deliberately differs from Pallas.

#include "spec/cut.hpp"
#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::spec {

struct LowerOptions {
  Env overrides;                     ///< --set NAME=VALUE
  std::optional<std::string> target; ///< --target; else the spec's `target =`
  /// Unroll the grid: one straight-line section per step with literal slots
  /// and regions (`lower --unroll`; at most 65536 steps). The default is the
  /// rolled form, a loop over the steps whose size does not depend on the
  /// grid. Both are the same schedule (a test holds their events equal).
  bool unroll = false;
  /// Evaluate every operand's block index at every grid point and report the
  /// first that cannot be (an overflow, a division by zero) as a located
  /// error, as the unrolled form must. The rolled form alone does not need
  /// to; the kernel check turns it off (its spec rules have decided that).
  bool check_blocks = true;
  /// Past this many grid steps the rolled form skips that walk (0.2 us a
  /// step: 2^30 steps took minutes for a program of 50 lines) and says so
  /// in Lowered::note; `check` decides those indices for every grid.
  std::int64_t check_blocks_max_steps = std::int64_t{1} << 22;
  /// Lower the kernel on this cut of its grid (spec/cut.hpp) instead: the
  /// cut grid, the arrays shrunk with it and the body's grid constants moved.
  const GridCut *cut = nullptr;
};

/// How a kernel operand appears in the lowered program.
struct BufferBinding {
  std::string operand; ///< the KernelSpec operand name
  Role role = Role::in;
  std::string hbm;    ///< the hbm buffer holding the whole array ("" for scratch)
  std::string window; ///< the sram/smem buffer (a slot ring, or a single buffer)
  friend bool operator==(const BufferBinding &, const BufferBinding &) = default;
};

struct Lowered {
  Program program;
  std::vector<BufferBinding> bindings;
  /// The concrete grid extents the program was lowered for.
  std::vector<std::int64_t> grid;
  /// Unrolled form: one entry per top-level statement of `program.body`, the
  /// grid step (in run order) whose iteration issues it. Empty in the rolled
  /// form. Not part of the program's text.
  std::vector<std::int64_t> step_of;
  /// Rolled form: the index of the top-level `for` over the steps (its
  /// variable is the step in run order); -1 when unrolled.
  int main_loop = -1;
  /// The grid step that issues an event of the program: the statement's
  /// top-level index and the values of its enclosing loops. The prologue
  /// belongs to step 0, the epilogue to the last step.
  std::int64_t step(int top_level, const std::vector<std::int64_t> &iterations) const;
  /// Mosaic GPU: the CTA axes (steps run CTA by CTA); empty on TPU.
  std::vector<bool> cta;
  /// The grid coordinates of a step of the program's order (grid_point).
  std::vector<std::int64_t> point(std::int64_t step) const;
  /// What the lowering left unchecked, for the reader ("" when nothing).
  std::string note;
};

/// True when `lower` gives `k` its unrolled form whatever the options: an
/// input with `buffered=(B, lookahead)` or an output with `revisit=any` on a
/// TPU target (their schedule needs the grid's future or past), or an
/// operand with a BoundedSlice dim (each step copies its own slice). `gpu`: the
/// kernel is lowered for h100/h200. Sets `why` to the construct.
bool lowers_unrolled(const KernelSpec &k, bool gpu, std::string *why = nullptr);

/// Lowers a validated kernel spec with every param bound (values, overrides).
/// Returns nullopt and appends located errors when it cannot (e.g. a symbolic
/// grid extent, or a construct the emitter does not support). A kernel with
/// scalar prefetch is lowered with its given contents and, for the rest,
/// spec::pick_prefetch's with seed 0 (spec/prefetch.hpp).
std::optional<Lowered> lower(const KernelSpec &, const LowerOptions &, std::vector<Diagnostic> &errors);

} // namespace pipecheck::spec
