#pragma once
/// Scalar prefetch (PrefetchScalarGridSpec): the contents of `prefetch`
/// operands, the constraints on them, and the elaboration that turns a kernel
/// reading them into one that reads none, so that binding, lowering, the race
/// checker and the executor need not know about them.
///
/// Elaboration replaces every read `ids[e]` (in an index map, through its
/// trailing prefetch arguments, or in the body) by a balanced `where` tree on
/// `e` whose leaves are the contents: literals where the contents are known,
/// and the names prefetch_element(ids, k) where they are not (the spec rules
/// bind those to solver variables). An index outside `[0, n)` reads
/// kPrefetchPoison, the lowest i32 (the executor's poison for integers).

#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipecheck::spec {

/// What a read outside a prefetch array gives.
inline constexpr std::int64_t kPrefetchPoison = -2147483648LL;

/// Contents of prefetch operands, by name.
using PrefetchContents = std::map<std::string, std::vector<std::int64_t>>;

/// One prefetch operand with its length and constraints evaluated.
struct PrefetchArray {
  std::string name;
  std::int64_t length = 0;
  std::vector<std::int64_t> dims; ///< the extents: {length} for a 1-D array
  std::optional<std::vector<std::int64_t>> given;
  std::optional<std::int64_t> lo, hi; ///< `in [lo, hi)`
  bool nondecreasing = false;
  std::optional<std::int64_t> sum;
  Loc loc;
};

/// Every prefetch operand of a kernel under its params, or why not (`error`:
/// bad input such as contents that break their constraints; `unknown`: a
/// length or bound that depends on an unbound param).
struct PrefetchSpace {
  std::vector<PrefetchArray> arrays;
  std::vector<Diagnostic> errors;
  std::string unknown;
  /// True when no array's contents are left open.
  bool all_given() const;
  const PrefetchArray *array(const std::string &name) const;
};

/// Evaluates the prefetch declarations of `k` under `params`; given contents
/// are checked against their length and constraints (located errors).
PrefetchSpace prefetch_space(const KernelSpec &k, const Env &params);

/// Why `values` are not allowed contents of `a` (length, range, order, sum),
/// or nullopt when they are. `index` is set to the offending position, if one.
std::optional<std::string> prefetch_violation(const PrefetchArray &a, const std::vector<std::int64_t> &values,
                                              std::optional<std::size_t> *index = nullptr);

/// Why contents of `shape` (a file's) do not fit `a`'s declared extents:
/// "holds an array of shape (2, 8), but 'pt' is declared [4, 4]"; nullopt
/// when they do, when `shape` is empty (not known), or when both are 1-D
/// (prefetch_violation then counts the elements).
std::optional<std::string> prefetch_shape_mismatch(const PrefetchArray &a,
                                                   const std::vector<std::int64_t> &shape);

/// Every allowed assignment of contents to the arrays that are not given,
/// when there are at most `limit` (nullopt: more, or unbounded).
std::optional<std::vector<PrefetchContents>> enumerate_prefetch(const PrefetchSpace &, std::size_t limit);

/// One allowed contents per pattern of equal elements: for each open array,
/// every partition of its positions into classes of equal values that some
/// allowed contents has, realized as lo + class number (classes numbered in
/// order of first appearance). Only for arrays whose constraints are `in
/// [lo, hi)` and maybe `nondecreasing` (nullopt for a `sum`, or more than
/// `limit` patterns). Whatever depends on the contents only through which
/// elements are equal is decided on these.
std::optional<std::vector<PrefetchContents>> prefetch_patterns(const PrefetchSpace &, std::size_t limit);

/// Whether the lowered program of `k` depends on the prefetch contents only
/// through which elements are equal: the body reads no prefetch array, and
/// each index-map result that reads one is exactly `ids[e]` (e reading
/// none), of an unaliased operand, along a dim its block divides (so equal
/// indices name the same block and unequal ones disjoint whole blocks).
bool prefetch_equality_only(const KernelSpec &k, const Env &params);

/// The prefetch arrays of `k` that the lowered program reads only as
/// addresses to copy from: no index map reads them, and in the body every
/// read (directly, or through integer locals computed from one) is a
/// subscript of the source of a body DMA (`async_copy`, `sync_copy`) from an
/// unaliased `in` operand with memory_space=any that no DMA writes, or, under
/// Triton, an index (or a `ds` start) of a load from an unaliased `in`
/// operand that no statement stores into (a gather: GPU paged attention's
/// `k_pages_ref[block_tables]`). Nothing writes such a source, so which of
/// its elements a copy or a gather reads changes no race, wait, semaphore or
/// store of the program; only whether the subscript lies inside the array,
/// which the spec rules decide for every allowed contents (paged
/// attention's page table).
std::set<std::string> prefetch_address_only(const KernelSpec &k);

/// The prefetch arrays of `k` whose reads the lowered program takes only as
/// values: no index map reads them, and in the body every read (directly,
/// or through locals computed from one) flows into a store's value through
/// arithmetic, float casts, broadcasts and a `where`'s branches alone — no
/// condition, loop bound, subscript, mask or DMA (a per-group scale a
/// quantized matmul keeps in SMEM). No copy, wait, slot or mask of the
/// program depends on their contents, so its race check leaves them open;
/// the spec rules decide their reads' bounds for every allowed contents.
std::set<std::string> prefetch_value_only(const KernelSpec &k);

/// Allowed contents for the arrays that are not given, drawn with `seed`;
/// nullopt (with `why`) when none is found.
std::optional<PrefetchContents> pick_prefetch(const PrefetchSpace &, std::uint64_t seed, std::string &why);

/// The name element k of prefetch array `name` has in an elaborated kernel
/// whose contents are open: "name[k]" (no `.pk` name can collide with it).
std::string prefetch_element(const std::string &name, std::int64_t k);
/// Whether `name` is such an element's name.
bool is_prefetch_element(const std::string &name);

/// `k` without prefetch operands: each read of one becomes a `where` tree
/// over its contents (given, else from `contents`, else element names), and
/// index maps lose their prefetch arguments. Requires a space without errors
/// or unknown.
KernelSpec elaborate_prefetch(const KernelSpec &k, const PrefetchSpace &, const PrefetchContents &contents);

/// Thrown by elaborate_prefetch (and elaborate) where a read's tree would
/// pass kMaxElaboratedNodes: a read whose subscript reads a prefetch array
/// itself copies that subscript into each node of its own tree (an index
/// map `pt[b, lens[b] // 16]` over 512 rows is gigabytes). Its what() says
/// which read, for an `unknown` verdict or a refused run, never a crash.
struct ElaborationTooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};
inline constexpr std::size_t kMaxElaboratedNodes = 2'000'000;

/// Whether `e` is a read of a prefetch array as elaborate_prefetch leaves
/// it, `where(in, <contents>, kPrefetchPoison)`: its condition `in` (every
/// subscript inside its dim), else null. A read outside the array is
/// index-out-of-bounds (Pallas' interpreter raises on it; on a TPU the SMEM
/// load takes whatever lies next to the table).
const Expr *elaborated_read_bounds(const Expr &e);

/// The subscripts and extents such a condition tests, `(idx, n)` for each
/// `idx < n` in it, outermost first.
std::vector<std::pair<Expr, Expr>> elaborated_read_extents(const Expr &in);
/// Which subscript of such a condition lies outside its extent, as check and
/// run both say it: "its subscript 0 is 6, outside 0:6" (`value` evaluates a
/// subscript or an extent, nullopt where it cannot); nullopt when none is
/// seen outside.
std::optional<std::string>
elaborated_read_outside(const Expr &in,
                        const std::function<std::optional<std::int64_t>(const Expr &)> &value);

/// Whether `e` holds such a read (nested reads too).
bool has_elaborated_reads(const Expr &e);

/// The first such read in `e` that lies outside its array where `value`
/// gives the integers' values (nullopt where it cannot), in evaluation
/// order, and elaborated_read_outside's words for it. `a and b` reads `b`
/// only where `a` holds, `a or b` only where it fails (Python's short
/// circuit); every other operation reads all its operands, a `where` both
/// sides too: a select discards a load's value, not the load. check, the
/// oracle and the lowered program's run all say a read is made by this.
struct ReadOutside {
  const Expr *read = nullptr;
  std::string what;
};
std::optional<ReadOutside>
prefetch_read_outside(const Expr &e, const std::function<std::optional<std::int64_t>(const Expr &)> &value);
/// run's words for such a read, wherever it faults (a body, an index map, a
/// lowered program): "`who` a scalar-prefetch array outside it[ at grid
/// point P]: WHAT (on a TPU the SMEM load takes whatever lies next to the
/// table)"; `point` empty where the grid point is not known.
std::string read_outside_fault(const ReadOutside &r, const std::vector<std::int64_t> &point = {},
                               const std::string &who = "a read of");

/// `k` with every read of a prefetch array of rank > 1 flattened, in index
/// maps and the body: `pt[b, p]` (pt: i32[B, P]) becomes
/// `pt[where(0 <= b and b < B and 0 <= p and p < P, b * P + p, -1)]`, a read
/// of the C-order contents where every subscript lies in its dim, and of
/// poison (index -1) where one does not, as the read would be. Those arrays
/// are marked `flat`. elaborate_prefetch, prefetch_equality_only and
/// prefetch_address_only apply it first, so that every command sees the same
/// reads, and the kernel as parsed keeps its reads as written (`fmt`).
KernelSpec flatten_prefetch_reads(const KernelSpec &k);

/// `k` with the contents of each array that `contents` names given (as if
/// written `= [...]` in its declaration): what `run --prefetch` and the
/// picked contents of `run`, `lower` and `model` hand on, so that every
/// command elaborates the kernel itself (spec::elaborate).
KernelSpec with_contents(const KernelSpec &k, const PrefetchContents &contents);

/// "group_ids = [0, 0, 8, 1]" for each array, joined by ", "; an array of
/// more than 32 elements as its most common value and the few that differ
/// ("pt = [0] * 640 but at flat positions 15: 640"), or its ends and length.
std::string format_prefetch(const PrefetchContents &);

} // namespace pipecheck::spec
