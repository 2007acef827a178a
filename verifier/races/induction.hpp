#pragma once
/// The all-N proof's structural half (k-induction over a pipeline loop). It
/// talks to Z3 only through verifier/smt's wrapper (smt.hpp).
///
/// For a pipeline with one symbolic trip-count param N, plan_induction finds
/// the main loop (the top-level `for` whose bound grows with N) and proves
/// with Z3, for every N >= n_struct, that the program's behaviour is the same
/// up to a shift:
/// - prologue and the first `window` iterations do not depend on N;
/// - in the middle iterations (window <= i - lo <= hi(N) - 1 - window) every
///   guard is constant, every slot index is periodic in i with `period`, and
///   every hbm subscript moves by a constant `shift` per period, the same for
///   all accesses to one (buffer, dim);
/// - the last `window` iterations and the epilogue, as N grows by `period`,
///   keep their guards and slots and move their hbm subscripts by `shift`;
/// - every access stays inside its buffer (spec/place.hpp) for every such N.
/// A walk from the end, whose hbm subscripts move with N as written, is
/// planned on the program with those dimensions read from the end.
/// The race driver (verifier/races) completes the induction: it runs the
/// machine, finds an iteration i0 whose abstract state recurs (shifted) at
/// i0 + period, and checks every N up to the point from which all larger N
/// repeat a checked one.

#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::verifier::races {

struct InductionPlan {
  /// What the attempt established: every fact (proven); an access that may
  /// leave its buffer (out_of_bounds, with out_of_bounds_at where the solver
  /// found the smallest such N); or no closing window (not_proven, `reason`
  /// says which fact failed). Callers decide on this, never on `reason`'s text.
  enum class Kind { proven, out_of_bounds, not_proven };
  Kind kind = Kind::not_proven;
  bool ok = false;                 ///< kind == proven
  std::string reason;              ///< why no plan, when !ok
  const spec::For *loop = nullptr; ///< the main loop (a top-level statement of the program)
  std::int64_t loop_lo = 0;        ///< its constant lower bound
  spec::Expr loop_hi;              ///< its upper bound in terms of N (lets substituted)
  std::int64_t window = 0;         ///< W
  std::int64_t period = 1;         ///< P
  std::int64_t n_struct = 0;       ///< the facts hold for every N >= n_struct
  /// Growing N by n_step adds a whole number of periods to the loop.
  std::int64_t n_step = 1;
  /// hbm (buffer index, dim) -> coordinate shift per period (absent: 0).
  std::map<std::pair<int, int>, std::int64_t> shift;
  int queries = 0; ///< solver queries made
  /// When !ok because an access may leave its buffer: the smallest N >=
  /// n_struct at which one does, where the solver found one.
  std::optional<std::int64_t> out_of_bounds_at;
  /// The program the facts are about, where not the one planned: a walk
  /// from the end (`A[N - 1 - i]`) read from the end, each (hbm buffer,
  /// dimension) of `mirrored` counted from its last element. Its copies
  /// cover the mirrored elements of the same buffers, so its races and
  /// bounds are the planned program's; `loop` points into it.
  std::shared_ptr<const spec::Program> program;
  std::vector<std::pair<std::string, int>> mirrored;
};

/// Plans the induction for symbolic param `param` (N >= lo, N <= hi if set);
/// `fixed` binds the program's other params.
InductionPlan plan_induction(const spec::Program &, const std::string &param, std::int64_t lo,
                             std::optional<std::int64_t> hi, const spec::Env &fixed, unsigned timeout_ms);

} // namespace pipecheck::verifier::races
