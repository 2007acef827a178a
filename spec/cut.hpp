#pragma once
/// A grid cut: the same kernel on a smaller grid, whose lowered program's race
/// verdict is the kernel's, when the middle of the grid repeats
/// (docs/lowering.md, "Large grids: the grid cut").
///
/// The cut shortens each long axis `e` by a multiple D of a period P: the
/// values [hi - D, hi) of the axis's longest stretch [lo, hi), on which every
/// guard of the body is constant, are left out, the values at and above `hi`
/// move down by D, and every array dim an operand's index map ties to the axis
/// shrinks by D blocks (times the map's coefficient), so the last blocks keep
/// their raggedness. It applies to kernels whose index-map components are each
/// a constant, `a * g + c`, `a * ((g + i) // q) + c` or `a * ((g + i) % q) + c`
/// of one grid variable g (a > 0; P is then a multiple of q). An axis whose
/// program_id the body uses other than in comparisons with constants
/// (`program_id(e) % q` compared with a constant too, and `a *
/// program_id(e) + r` with r bounded and free of program_id, through locals
/// defined once: a ragged block's mask `pid * B + iota((B,), 0) < n`; or
/// such on both sides, on one axis) — in a
/// value, a subscript, a comparison with another axis — or whose
/// num_programs it reads is kept whole; the others may be cut. The race checker
/// (verifier/races/cutoff.hpp) completes the argument: it runs the cut
/// program and checks that the machine's state recurs, shifted, after P
/// values of every cut axis.

#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::spec {

/// How one grid axis is cut.
struct AxisCut {
  std::int64_t drop = 0;  ///< D: values left out (0: the axis is kept whole)
  std::int64_t first = 0; ///< lo + reach: the first value a repeat may start at
  /// How far past `first` the recurrence may start (0 or P): w in
  /// [first, first + window].
  std::int64_t window = 0;
  /// w: where the state recurs (the race checker settles it; the start-up of
  /// a deep pipeline takes a few values to pass).
  std::int64_t recurs_from = 0;
  std::int64_t upper = 0;  ///< hi - D: values at or above it are the kernel's values + D
  std::int64_t period = 1; ///< P
};

/// An operand's array dim that a cut axis shrinks.
struct CutDim {
  std::string operand;
  int dim = 0;
  int axis = 0;
  std::int64_t step = 0; ///< elements per `per` axis values: the map's coefficient x the block dim
  std::int64_t per = 1;  ///< q of a map `(g + in) // q` (one block per q values), else 1
  /// How far the dim moves over `values` values of the axis, a multiple of `per`.
  std::int64_t shift(std::int64_t values) const { return values / per * step; }
};

struct GridCut {
  std::vector<std::int64_t> grid; ///< the cut grid
  std::vector<AxisCut> axes;      ///< per axis of the kernel's grid
  std::vector<CutDim> dims;       ///< the array dims that shrink
  /// The kernel's grid coordinates of a point of the cut grid: the kernel
  /// repeats the cut's values [w, w + P) of an axis D / P more times, so
  /// values from w + P on move up by D.
  std::vector<std::int64_t> kernel_point(std::vector<std::int64_t> cut_point) const;
  /// The shape of `operand` on the cut grid, from its shape `kernel_shape` in
  /// the kernel: each dim in `dims` shorter by its shift over the axis's drop.
  std::vector<std::int64_t> shape(const std::string &operand, std::vector<std::int64_t> kernel_shape) const;
};

/// A cut, or why the kernel has none (`cut` absent; `reason` says why, or is
/// empty when no axis is long enough to gain from one). With a cut, `reason`
/// names the use that keeps a long axis whole, if any.
struct CutPlan {
  std::optional<GridCut> cut;
  std::string reason;
};

/// Plans the cut of a validated kernel with its params bound by `overrides`
/// (and their defaults), for slot rings whose sizes divide `period`, and a
/// lowered program whose steps look at most `reach` steps ahead or behind
/// (`s + 2`, `t + 1 < n`): the repeated values keep that far from the
/// stretch's ends. Axes too short to gain are kept whole.
/// `window` (0 or P) leaves room for the recurrence to start up to that
/// many values late: try 0 first, the smaller cut.
CutPlan plan_cut(const KernelSpec &, const Env &overrides, std::int64_t period, std::int64_t reach,
                 std::int64_t window = 0);

/// How many steps ahead or behind the main loop of a rolled lowered program
/// looks: the largest k in `v + k` or `v - k` of its step variables (the
/// loop's and `t`).
std::int64_t step_reach(const Program &, int main_loop);

/// The kernel's body as the cut grid runs it: every comparison of `a *
/// program_id(e) + r` with a constant has the constant folded, and moved
/// down by a times the axis's drop where the values at which the comparison
/// changes lie above the left-out ones.
KernelSpec cut_body(const KernelSpec &, const Env &overrides, const GridCut &);

/// The kernel as its cut is: cut_body's body, and the cut grid and the
/// shrunk array dims (GridCut::shape) as literals, for the checks that take
/// a kernel rather than a lowering option (a Triton kernel's spec rules).
KernelSpec cut_kernel(const KernelSpec &, const Env &overrides, const GridCut &);

} // namespace pipecheck::spec
