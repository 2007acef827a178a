#pragma once
/// The one indexing rule of `.pk` refs: which part of a buffer (or of a slot
/// ring, whose first dim is the slot) a ref `name[s0, s1, ...]` denotes.
///
/// The kernel body typing (spec/typecheck.hpp), the executor's views
/// (executor/interp.hpp) and the Program stepper's places (spec/step.hpp,
/// consumed by the race machine and the executor) all resolve subscripts
/// here, so a ref means the same thing to `check` and to `run`.
///
/// `ds(start, size)` (pl.ds) is the slice `start:start + size`.
/// The rule: `...` stands for the dims the other subscripts leave; an index
/// `i` drops its dim and must satisfy 0 <= i < extent; a slice `lo:hi` keeps
/// its dim, an absent bound is 0 (lo) or the extent (hi), and it must satisfy
/// 0 <= lo <= hi <= extent; dims after the last subscript are whole. Nothing
/// wraps: as with Pallas refs, a negative index is out of bounds, not a count
/// from the end.

#include "spec/ir.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::spec {

/// An extent that is not known statically.
inline constexpr std::int64_t kUnknownExtent = -1;
/// A shape; empty: a scalar. Extents are >= 0 or kUnknownExtent.
using Dims = std::vector<std::int64_t>;

/// One subscript of a ref: an index, a slice `lo:hi` or `...`. A value that
/// is not known statically is nullopt; an absent slice bound has has_lo /
/// has_hi false.
struct Subscript {
  enum class Kind { index, slice, ellipsis };
  Kind kind = Kind::index;
  bool has_lo = true, has_hi = true;
  std::optional<std::int64_t> lo, hi; ///< index: lo
  /// ds(start, size): the size, known even where start is not.
  std::optional<std::int64_t> size;
};
/// What a subscripted ref covers of each array dim: [lo, hi) (kUnknownExtent
/// where not known) and whether the dim is kept (an index drops it).
struct SubscriptedDim {
  std::int64_t lo = 0, hi = 0;
  bool kept = true;
};
struct Subscripted {
  std::vector<SubscriptedDim> dims; ///< per array dim
  Dims shape;                       ///< the kept dims' extents
  std::string error;
  bool out_of_bounds = false; ///< the error is an index or slice outside the array
  int error_dim = -1;         ///< the array dim an out-of-bounds subscript addresses
  bool ok() const { return error.empty(); }
};
/// Subscripts `subs` applied to an array of shape `array` by the rule above.
/// An error says which subscript is out of bounds for which dim ("index -1 is
/// out of bounds for dim 0 (extent 4)"), or that there are more subscripts
/// than dims. Unknown values and extents are checked as far as they are known.
Subscripted subscript(const Dims &array, const std::vector<Subscript> &subs);

/// The size of a slice `lo:hi` where its bounds show it whatever the names in
/// them: both constant, or `hi` written `lo + c` (`128*i : 128*i + 128`, as a
/// lowered kernel prints a window). nullopt otherwise (`0:8 * t`).
std::optional<std::int64_t> static_slice_size(const Expr &lo, const Expr &hi);

/// The array dim each of `n` subscripts addresses (-1 for `...`), given the
/// array's rank and which subscripts are `...`; nullopt when the subscripts
/// other than `...` outnumber the dims.
std::optional<std::vector<int>> subscript_dims(std::size_t rank, const std::vector<bool> &is_ellipsis);

/// The extents a copy moves of its source and destination (kept dims, in
/// order). The one rule for a partial edge block: when the two have the same
/// rank and one is no larger than the other in every dim, the larger side is
/// narrowed to the smaller one's extents (its leading corner); otherwise both
/// are their own shapes. What a copy's destination ref covers beyond its
/// narrowed part is undefined after the copy (strict slot contents,
/// docs/lowering.md). With `at` (a copy's `offset=`: one element offset
/// per dim; empty: all zero), the narrowed side is narrowed at that offset
/// instead of its leading corner (a pl.Element window whose leading part
/// lies in the array's low padding lands past it in the slot).
struct CopyFit {
  Dims src, dst;
  Dims src_at, dst_at; ///< where each side's moved part starts, per dim
  /// false: `at` is not one offset per dim, or puts the smaller side
  /// (partly) outside the larger (or moves a side that is not narrowed).
  bool fits = true;
};
CopyFit fit_copy(const Dims &src, const Dims &dst, const Dims &at = {});

/// The Subscripts of a ref's arguments (Op::Ref; a bare Name has none), with
/// `value(e, is_slice_bound)` giving each index and slice bound (nullopt:
/// not known).
using SubscriptValue = std::function<std::optional<std::int64_t>(const Expr &, bool is_slice_bound)>;
std::vector<Subscript> subscripts_of(const Expr &ref, const SubscriptValue &value);

} // namespace pipecheck::spec
