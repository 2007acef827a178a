#pragma once
/// Findings of the spec-level rules, shared by the symbolic checker and the
/// brute-force enumerator so both speak with the same words and witnesses.

#include "verifier/rules/model.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace pipecheck::verifier::rules {

using Point = std::vector<std::int64_t>;

/// An element as the findings write it: `o[3, 17]`.
std::string element_str(const std::string &name, const Point &elem);
/// Per array dim [lo, hi), relative to a block (Effect::box).
using Box = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// output-not-covered decides coverage per element box: the boundaries of
/// every store's box of the output cut its block into cells, each either
/// inside or outside any store's box. Cells in row-major order.
struct CoverCells {
  std::vector<Box> cells;
};
/// `reads_too`: cut at the boxes of its reads as well (not a masked store's
/// kept branch), so each read's box is a union of cells.
CoverCells cover_cells(const KernelModel &, std::size_t op, bool reads_too = false);
/// Whether `outer` contains `inner` in every dim.
bool box_contains(const Box &outer, const Box &inner);
/// Whether `a` and `b` share an element: they meet in every dim both have.
bool overlaps(const Box &a, const Box &b);
/// Whether `b` holds no element (an access wholly outside its operand,
/// clamped to it).
bool is_empty(const Box &b);
/// Whether some element of the cell of block `b` lies inside the array
/// (the last block of a ragged dim is partly padding, which needs no write).
bool cell_in_array(const OperandModel &, const Point &b, const Box &cell);

/// The grid axes in run order, outermost first: grid points run in
/// lexicographic order of their coordinates taken in this order
/// (spec::grid_point). TPU: 0, 1, ...; Mosaic GPU: the CTA axes, then the
/// others, since each CTA runs its own pipeline over the non-CTA axes.
std::vector<std::size_t> run_axes(const KernelModel &);

/// The first run-order position k (run_axes) from which on the index map of
/// `op` names no axis: a step that advances position k or a later one (and
/// resets the ones after it) keeps the block. A syntactic criterion, so that
/// the Z3 encoding needs no block terms inside a quantifier
/// (ScratchUse::consume_store). The number of axes when none.
std::size_t keep_from(const KernelModel &, std::size_t op);

/// The block index of operand `op` at grid point `p` (concrete evaluation), or
/// nullopt when an index expression cannot be evaluated.
std::optional<Point> block_at(const KernelModel &, std::size_t op, const Point &p);
/// An output with Element or BoundedSlice dims (windows placed by element,
/// which may overlap or leave gaps; a BoundedSlice window writes back only
/// its ds size): output-not-covered per array element, replaying the
/// visits in run order (consecutive grid points with one window, as
/// spec::window_at names it; each writes back its window, what no store of
/// the visit wrote there undefined), reporting the first element never
/// written or left undefined by the last write-back; and
/// parallel-write-conflict when two grid points that differ along a
/// parallel axis both store and their windows overlap; both by evaluating
/// every grid point. Appends to `out`; a reason to `unknown` past 4096 grid
/// points (65536 with no parallel axis) or 2^22 elements, or when something
/// does not evaluate. Replaces the per-block coverage and conflict rules for it.
void element_output_findings(const KernelModel &, std::size_t op, std::vector<Finding> &out,
                             std::vector<std::string> &unknown);
/// parallel-write-conflict on a Triton output: grid point `store` stores
/// `element`, and `other` stores it too or (other_reads) reads it, through
/// the output or (`through`) the input aliased to it.
Finding triton_race_finding(const KernelModel &, std::size_t op, const Point &element, const Point &store,
                            const Point &other, bool other_reads, const OperandModel *through = nullptr);
/// uninitialized-accumulator on a Triton output: `read` (a load or `+=`)
/// at grid point p takes `element` before p's program stored it.
Finding triton_garbage_finding(const KernelModel &, const Effect &read, const Point &p, const Point &element);
/// Why element_output_findings cannot evaluate output `op` (too many grid
/// points, elements or block elements over the grid); nullopt when it can.
std::optional<std::string> element_pass_too_large(const KernelModel &, std::size_t op);
/// Whether every store and read of Triton output `op` has a static box (and
/// the output no Element or BoundedSlice dims), and no store a keep mask
/// (whose mask, not its box, says what it sets: the element replay's to
/// evaluate): where their programs' boxes meet is then a question for the
/// solver over any grid.
bool triton_boxes_static(const KernelModel &, std::size_t op);
/// Whether the races, garbage reads and coverage of output `op` are the
/// solver's (check_symbolic) rather than element_output_findings': a Triton
/// output too large to replay element by element whose boxes are static.
/// Enumerating the grid cannot decide such an output; check_symbolic can.
bool element_pass_by_solver(const KernelModel &, std::size_t op);
/// index-out-of-bounds of a Triton store that writes `element` of output
/// `op`, past the array, at grid point `p` (its stores reach the array).
Finding triton_past_end_finding(const KernelModel &, std::size_t op, const Effect &store, const Point &p,
                                const Point &element);
/// The first element, in row-major order, of `box` (block-relative) in
/// op's window at block index `blk` that lies outside the array; nullopt
/// where the whole box is inside.
std::optional<Point> first_outside(const OperandModel &, const Point &blk, const Box &box);
/// Whether effect e's box may reach past op's array at some block inside
/// it: a dim whose blocks do not divide the array (a ragged last block), an
/// Element dim, or a box that leaves the block; never for a gather (its
/// CopyAddress decides that for every allowed prefetch contents).
bool may_pass_end(const OperandModel &, const Effect &e);
/// index-out-of-bounds of a Triton load with no mask (`load`, not a
/// branch of a `where`) that reads `element` of `op`, past the array, at
/// grid point p: a Triton block is a view of the array, with no padding.
Finding triton_load_past_end_finding(const KernelModel &, std::size_t op, const Effect &read, const Point &p,
                                     const Point &element);

/// A masked load (Effect::load_mask) of `op` at grid point p, its block at
/// `blk` and its ref's box `box` (ref_box_at): the first element past the
/// array that its mask selects; nullopt where none, or where the mask does
/// not evaluate at p (it reads data) or does not fit the ref's value.
std::optional<Point> masked_load_past_end(const KernelModel &, std::size_t op, const Effect &read,
                                          const Point &p, const Point &blk, const Box &box);
/// A Triton load of `op` at grid point p, its block at `blk` and its ref's
/// box `box`: index-out-of-bounds where it reads past the array (for a
/// masked load, the first lane past it its mask selects); nullopt where it
/// does not, or where its mask does not evaluate there.
std::optional<Finding> triton_load_past_end_at(const KernelModel &, std::size_t op, const Effect &read,
                                               const Point &p, const Point &blk, const Box &box);
/// Whether a masked load's mask evaluates at grid point p (it reads no
/// data: masked_load_past_end decides its lanes there).
bool load_mask_evaluates(const KernelModel &, const Effect &read, const Point &p);
/// index-out-of-bounds of a Triton masked load whose mask selects `element`
/// of `op`, past the array, at grid point p.
Finding triton_masked_load_past_end_finding(const KernelModel &, std::size_t op, const Effect &read,
                                            const Point &p, const Point &element);

/// Whether output `op` is checked per element (element_output_findings)
/// rather than per block: it has Element or BoundedSlice dims, or a store
/// whose box depends on the grid point (`o[ds(program_id(0) * 16, 16)]`,
/// each grid point filling its chunk of one revisited block), which the
/// per-block cells cannot place but each grid point's evaluation can.
bool needs_element_coverage(const KernelModel &, std::size_t op);
/// The window extents of `op` at `p` (spec::window_sizes), or nullopt when
/// they do not evaluate.
std::optional<Point> sizes_at(const KernelModel &, std::size_t op, const Point &p);
/// Why the window of `op` at `p` leaves a BoundedSlice dim: its first such
/// dim and the reason (a start or size below zero, a size over the bound, a
/// slice past the array's end); nullopt when every BoundedSlice dim fits or
/// `p` does not evaluate.
std::optional<std::pair<std::size_t, std::string>> bounded_slice_fault(const KernelModel &, std::size_t op,
                                                                       const Point &p);
/// Whether every guard of the effect holds at `p` (nullopt: not evaluable).
std::optional<bool> guard_at(const KernelModel &, const Effect &, const Point &p);

/// guard_at() of one effect at many grid points of one rank (`rank`
/// coordinates each): its guards compiled once (spec::CompiledInts), with
/// program_id(a) read from the point and num_programs(a) from the grid, as
/// spec::bind_grid would write them in.
class GuardEvaluator {
public:
  GuardEvaluator(const KernelModel &, const Effect &, std::size_t rank);
  GuardEvaluator(const GuardEvaluator &) = delete;
  GuardEvaluator &operator=(const GuardEvaluator &) = delete;
  /// guard_at(model, effect, p); p.size() must be `rank`.
  std::optional<bool> at(const Point &p);

private:
  spec::Env env_;                   // the model's env: the guards' other names
  std::vector<std::int64_t> point_; // program_id(a) at the current point
  spec::CompiledInts ints_;
  std::vector<int> guards_;                // compiled, in order
  std::vector<const std::int64_t *> vars_; // each name's value (null: unbound)
};

/// The arithmetic error (an integer overflow, a division by zero) evaluating
/// the index map of `op` at grid point `p` hits, as bad input located at the
/// operator and naming the point; nullopt when it evaluates or is merely unknown.
std::optional<spec::Diagnostic> index_error_at(const KernelModel &, std::size_t op, const Point &p);
/// The same for the guards of an effect.
std::optional<spec::Diagnostic> guard_error_at(const KernelModel &, const Effect &, const Point &p);
/// The first such error of any windowed operand's index map at a grid point
/// the finding's witness names (Z3 integers are unbounded: a witness can lie
/// where int64 evaluation overflows).
std::optional<spec::Diagnostic> witness_error(const KernelModel &, const Finding &);

Finding revisit_finding(const KernelModel &, std::size_t op, bool accumulated, const Point &first,
                        const Point &revisit);
/// output-revisit of output `op` needs a store at the earlier visit: the
/// output is neither read nor aliased, so a visit that stores nothing writes
/// back only what the last visit's write-back replaces (a reduction over an
/// outer axis into scratch banks, stored on its last step).
bool revisit_needs_a_store(const KernelModel &, std::size_t op);
Finding uninitialized_finding(const KernelModel &, const Effect &read, const Point &p);
Finding reset_finding(const KernelModel &, const Effect &init, const Point &partial, const Point &reset);
Finding input_write_finding(const KernelModel &, const Effect &write, const Point &p);
/// input-write-lost's copy form: a body copy into an input in
/// memory_space=any that no output aliases writes the caller's array, which
/// XLA did not donate to the kernel. The copy as an effect (its operand,
/// guards and statement) for the guard evaluators, when it is one.
std::optional<Effect> unaliased_input_copy(const KernelModel &, const CopyAddress &);
Finding input_copy_write_finding(const KernelModel &, const Effect &copy, const Point &p);
/// Mosaic GPU: whether output `op` is copied out inside each CTA's pipeline,
/// once per visit (spec::moves_within_cta), rather than once after it.
bool copied_out_per_visit(const KernelModel &, std::size_t op);
/// Mosaic GPU with more than one slot: whether output `op` is copied out
/// once per CTA, after its loop, from the slot of its last step (its index
/// map names no non-CTA axis).
bool copied_out_after_loop(const KernelModel &, std::size_t op);
/// output-write-lost: store `w` of an output copied out per visit fires at
/// grid point `p`, which is neither the first step of its visit
/// (`previous`, the step before it in its CTA, has the same block) nor its
/// CTA's last step.
/// TPU: the windowed inputs whose blocks a whole store `o[s] = f(x[...],
/// ...)` into a windowed output takes its value from, where it takes it from
/// those alone (no scratch, output, SMEM or any-space read; no keep mask; o
/// never read in the body), so that the same store at the next step of the
/// visit, with one of them on another block, overwrites it before the block
/// is written back. Empty: the store is not such a store.
std::vector<std::size_t> overwritten_store_inputs(const KernelModel &, const Effect &w);
Finding overwritten_store_finding(const KernelModel &, const Effect &w, std::size_t input, const Point &p,
                                  const Point &next);
Finding output_write_lost_finding(const KernelModel &, const Effect &w, const Point &previous,
                                  const Point &p);
/// output-write-lost: store `w` of an output copied out after the loop
/// fires at grid point `p`, a step whose slot is not the last step's, and no
/// store that may overlap it fires later in the CTA (`last`, its last
/// point): its value is final but never copied out.
Finding output_last_slot_finding(const KernelModel &, const Effect &w, const Point &p, const Point &last);
/// The stores of `w`'s operand that may write an element `w` writes (boxes
/// that meet, or are not static): indices into KernelModel::effects.
std::vector<std::size_t> overlapping_stores(const KernelModel &, const Effect &w);
Finding out_of_bounds_finding(const KernelModel &, std::size_t op, const Point &p);
Finding parallel_conflict_finding(const KernelModel &, std::size_t op, const Point &p, const Point &q);
/// `cell` is the part of the block no store writes (block-relative); the
/// whole block gives the plain "no grid point writes block" message.
/// A scratch value written at `written` is read at `read`, which differs
/// from it along parallel axis `axis` (parallel-write-conflict on the scratch).
Finding scratch_carry_finding(const KernelModel &, std::size_t op, const Point &written, const Point &read);
/// A store of scratch `op`'s partial result into an output: `store` writes
/// output `output` and holds (Effect::sources) `consume`, a read of the
/// scratch in ScratchUse::consumes.
struct CarriedUse {
  std::size_t store = 0, consume = 0, output = 0;
};
std::vector<CarriedUse> carried_uses(const KernelModel &, std::size_t op);
/// accumulator-carried: the store `use` at grid point `stored` puts into the
/// output's block there what scratch `op` accumulated at `accumulated`, for
/// another block of that output.
Finding carried_finding(const KernelModel &, std::size_t op, const CarriedUse &use, const Point &accumulated,
                        const Point &stored);
/// carried_uses, and the indirect ones: a store into another scratch that
/// holds a read of `op` (a running argmax's index update reading its max),
/// once per output that scratch reaches (reached_outputs), the store
/// `store` and the output `output`. accumulator-carried's uses: a max not
/// reset per block of the index output picks the other block's indices.
/// carried_finding for a store in a visit of its block that neither
/// initializes nor accumulates the scratch (a note says so).
Finding empty_visit_finding(const KernelModel &, std::size_t op, const CarriedUse &use, const Point &written,
                            const Point &stored);
/// carried_finding for a store whose block's reset (at `own`) was
/// superseded by another block's (at `other`) before it stored.
Finding superseded_reset_finding(const KernelModel &, std::size_t op, const CarriedUse &use, const Point &own,
                                 const Point &other, const Point &stored);
/// accumulator-carried where the scratch's inits start one chain per index
/// of the chain axes (`chain`) and the read at `read` takes what `other`, a
/// point of another chain, stored, after `own` initialized its own chain:
/// the chains share the scratch.
Finding crossed_chain_finding(const KernelModel &, std::size_t op, const CarriedUse &use, const Point &own,
                              const Point &other, const Point &read, const std::vector<bool> &chain);
std::vector<CarriedUse> carried_and_indirect_uses(const KernelModel &, std::size_t op);
/// Whether carried use `c` adds the scratch into the output (`o[...] +=
/// acc[...]`, or a store that holds a read of its own block), the scratch's
/// read a term of the sum (Effect::added): a partial result it adds must
/// not reach it again (accumulator-carried, re-added).
bool adds_into_output(const KernelModel &, const CarriedUse &c);
/// The uses re-added counts: carried_and_indirect_uses' that add the scratch
/// into their target, an output (adds_into_output) or another scratch with
/// an explicit `+=` of it (W8A8's `acc[...] += group_acc[...]` at a group's
/// end; a store through locals into a scratch, Kahan's compensation, is no
/// such add).
std::vector<CarriedUse> adding_uses(const KernelModel &, std::size_t op);
/// accumulator-carried, re-added: the store of `use` at `stored` adds into
/// the output's block what scratch `op` accumulated at `accumulated`, which
/// a store adding it at `added` (accumulated <= added < stored, the same
/// block) already added.
Finding readded_finding(const KernelModel &, std::size_t op, const CarriedUse &use, const Point &accumulated,
                        const Point &added, const Point &stored);
/// accumulator-carried, re-added per round: the store of `use` at `stored`
/// adds what the scratch accumulated at `reaccumulated` from the same input
/// blocks as at `accumulated`, whose result it already added at `added`.
Finding readded_round_finding(const KernelModel &, std::size_t op, const CarriedUse &use,
                              const Point &accumulated, const Point &added, const Point &reaccumulated,
                              const Point &stored);
/// The windowed outputs some store of which holds a read of scratch `op`
/// (carried_uses' outputs), each once, in operand order.
std::vector<std::size_t> fed_outputs(const KernelModel &, std::size_t op);
/// The windowed outputs scratch `op`'s values reach: the ones it feeds, and
/// those of every scratch a store of which holds a read of it, transitively
/// (a running argmax's max feeds its index, which feeds the output). Each
/// once, in operand order. A reset of the scratch discards work only within
/// a visit of one of these (accumulator-reset).
std::vector<std::size_t> reached_outputs(const KernelModel &, std::size_t op);
/// How accumulation-lost follows result scratch `op` into one output it
/// feeds: `clears` are its inits and the reads of it that some store into
/// `output` holds (a read feeding only the scratch's own update, or another
/// output, delivers nothing to this one); `delivering[k]`, per accumulation
/// ScratchUse::accumulates[k], the stores into `output` that hold a read the
/// accumulation's value holds too (`s = acc[...] + x; o[...] = s;
/// acc[...] = s`: the store takes the update's value, in whatever order).
struct LostUse {
  std::size_t output = 0;
  std::vector<std::size_t> clears;
  /// A clear that is a read into a local outside the `when` that stores it
  /// (`v = acc[...] * 2` every step, `when j == 0: o[...] = v`): it delivers
  /// at its place in the body, where that store fires too.
  std::map<std::size_t, std::size_t> also_needs;
  std::vector<std::vector<std::size_t>> delivering;
  /// Per accumulation (as delivering): whether its elements may meet what a
  /// read for the output, or a transfer, takes; false: another output's part.
  std::vector<bool> feeds;
};
std::vector<LostUse> lost_uses(const KernelModel &, std::size_t op);
/// accumulator-reset after the partial result reached an output: per output
/// the result scratch `op` feeds (fed_outputs), `overwrites`, its stores
/// that do not read it (the last of them in a visit decides its block), and
/// `delivering`, those of them that hold a read of the scratch.
struct OverwriteUse {
  std::size_t output = 0;
  std::vector<std::size_t> overwrites, delivering;
};
std::vector<OverwriteUse> overwrite_uses(const KernelModel &, std::size_t op);
/// The windowed inputs whose reads the value of accumulation `a` holds, each
/// once, in operand order: the blocks that make up its contribution.
std::vector<std::size_t> accumulated_inputs(const KernelModel &, const Effect &a);
/// A store into output `op` whose value holds an input block's read (`o[...]
/// = x[...]`, a select-init's fresh side `where(k == 0, 0, o[...]) + x[...]`)
/// where op is also accumulated into (a `+=` or an update): the seed of its
/// sum, a partial result as much as an accumulation is. Its inputs
/// (accumulated_inputs) on other blocks at a later init of the visit: that
/// init discards it (accumulator-reset).
bool seeds_output_sum(const KernelModel &, const Effect &w);
/// The sources of store `w` with each read of a scratch used as a
/// temporary replaced by what it carries: where the scratch's last store
/// before that read in the body is a plain store (no `+=`, no read of the
/// scratch) that covers the read's elements and fires wherever `w` does
/// (its guards among w's), the read's value is that store's (`t[...] =
/// x[...] * 2`, then `o[...] = t[...]` stores x's block), resolved again
/// through such stores (a few levels). Other sources stay as they are.
std::vector<std::size_t> sources_through_temporaries(const KernelModel &, const Effect &w);
/// Mosaic GPU: store `w` into an input's slot is read back later in its
/// step, by a read of the same operand overlapping it whose guards are
/// among w's (so it follows w wherever w fires): upstream's transposed
/// ragged dot masks its lhs slot in place, commit_smem()s and wgmmas it.
/// Every step fetches its own slot, so such a write reaches no other step
/// and is no input-write-lost.
bool input_masked_in_place(const KernelModel &, const Effect &w);
/// Whether accumulation `a`'s value is made of its input blocks alone
/// (accumulated_inputs), so that a round reading the same blocks adds the
/// same value again: it reads nothing but windowed inputs and its own
/// operand (a scratch temporary resolved to what it holds,
/// sources_through_temporaries), and names no grid point (Effect::grid_value:
/// a weight by round, a scratch staged per round).
bool value_repeats(const KernelModel &, const Effect &a);
/// Whether a round of accumulation `a` may be repeated whole: its value
/// repeats (value_repeats) and some two grid points may give every one of
/// its inputs the same window: false where, for each grid axis, some input's
/// index map returns that axis' index itself in some dim (`(i, k)`: every
/// point reads its own blocks). The round-repeated exemptions and the
/// re-added case of accumulator-carried need it; the queries that look for
/// such points are skipped without (they cost a quantifier each).
bool round_may_repeat(const KernelModel &, const Effect &a);
/// accumulator-reset: init `w` of result scratch `op` at grid point `reset`,
/// within the visit of block B of `output`, discards what was accumulated at
/// `partial` (in that visit, before the reset), and `store` at
/// `overwritten`, the last store into B that does not read it, puts there
/// only what accumulated after the reset.
Finding overwritten_after_reset_finding(const KernelModel &, const Effect &w, std::size_t output,
                                        const Point &partial, const Point &reset, const Effect &store,
                                        const Point &overwritten);
/// accumulation-lost: accumulation `a` of result scratch `op` at grid point
/// `lost`, with no read of the scratch after it before `next`, where an init
/// re-initializes it for another block (or, where no init fires at `next`
/// or `next` is `lost`, the scratch's CTA ends there: the last point of
/// `lost`'s CTA). `earlier` accumulated too, with some output the scratch
/// feeds (fed_outputs) on the same block as at `lost`: a reduction over
/// several steps whose last updates never reach it.
Finding lost_finding(const KernelModel &, std::size_t op, std::size_t output, const Effect &a,
                     const Point &earlier, const Point &lost, const Point &next);
/// The effects of scratch-carry: every store of the scratch, every read of it
/// (a load or `+=`), and the inits (ScratchUse::inits; the fresh ones only
/// with `fresh_cuts`) that cut the carry.
struct CarryUse {
  std::vector<std::size_t> stores, reads, inits;
  /// A store that fills one region of the scratch from another where its
  /// subscripts move with the grid point (`s[c % 2] = s[(c + 1) % 2] + x`,
  /// ping-pong slots): an init of its region at each grid point where its
  /// box and its own reads' boxes (`reads`) are decided and apart.
  struct Fill {
    std::size_t store = 0;
    std::vector<std::size_t> reads;
  };
  std::vector<Fill> fills;
};
/// `fresh_cuts`: a select's fresh init counts among the inits (no other
/// rule faults the scratch's inits).
CarryUse carry_use(const KernelModel &, std::size_t op, bool fresh_cuts);
/// Whether the kernel has a parallel axis whose grid points share one
/// scratch (TPU: the whole grid shares it; Mosaic GPU: each CTA has its own).
bool scratch_shared_across_parallel_axes(const KernelModel &);
/// The first parallel axis along which grid points p and q differ, or -1.
std::int64_t parallel_axis_apart(const KernelModel &, const Point &p, const Point &q);
Finding not_covered_finding(const KernelModel &, std::size_t op, const Point &block, const Box &cell);
/// No copy writes `element` of output `op` in `memory_space=any`.
Finding any_output_not_covered_finding(const KernelModel &, std::size_t op, const Point &element);
/// The unknown reason when the stores that are decided leave part of output
/// `op` unwritten and `store` (Effect::exact false) might write it.
std::string not_covered_unknown(const KernelModel &, std::size_t op, const Effect &store);
/// index-out-of-bounds of a body copy's HBM address at grid point `p`:
/// `detail` is spec::subscript's error, `dim` its array dim.
Finding copy_address_finding(const KernelModel &, const CopyAddress &, const Point &p,
                             const std::string &detail, int dim);
/// A read of a prefetch array outside it at grid point p; `detail` says which
/// subscript and where it lies.
Finding prefetch_read_finding(const KernelModel &, const PrefetchRead &, const Point &p,
                              const std::string &detail);
Finding alias_finding(const KernelModel &, const AliasModel &, const Point &written, const Point &read);
/// alias-hazard across cores: the input's block at `read` meets the output's
/// block at `written`, the two points apart along a parallel axis (TPU), so
/// the fetch and the write-back run on two cores in no order.
Finding alias_across_cores_finding(const KernelModel &, const AliasModel &, const Point &written,
                                   const Point &read);
/// The stores of an alias's output that take its input twin: (store, read)
/// of a store into the output that does not read it and holds a read of the
/// input twin (`o[...] = b[...] + x[...]`, `o[...] = b[...]`, b aliased to o).
std::vector<std::pair<std::size_t, std::size_t>> twin_stores(const KernelModel &, const AliasModel &);
/// The windowed inputs other than the twin whose reads store `w` holds: what
/// a later store of the block loses of w unless it reads them again, at the
/// same blocks.
std::vector<std::size_t> input_sources(const KernelModel &, const Effect &w, const AliasModel &);
/// alias-hazard, within a visit: the store `store` at `read` takes the input
/// twin's window, which still holds the output's block as it was before the
/// visit, and overwrites what a store at `stored`, earlier in the visit, put
/// there from other inputs: that store is lost.
Finding stale_twin_finding(const KernelModel &, const AliasModel &, const Effect &store, const Point &stored,
                           const Point &read);

/// uninitialized-accumulator on the kept reads (Effect::keep) of output
/// `op`: the grid runs in order with a defined bit per element of the
/// output; a store defines its box, a store `o[s] = where(c, v, o[s])` only
/// where c holds (c evaluated at each grid point; a c with no concrete value
/// defines nothing). An element such a store keeps while it is still
/// undefined, and that no later store defines, is a finding at the kept
/// read. Blocks that tile the output are followed one at a time. Empty when
/// every kept element is overwritten, or when the answer is not decided: a
/// reason appended to `unknown` (a mask with no concrete value, one that
/// reads data, may keep an element nothing else writes; past 2^22 elements
/// per block or 2^27 element stores). nullopt when an index map, guard or
/// box is beyond concrete evaluation (the caller then checks the kept reads
/// as plain reads).
std::optional<std::vector<Finding>> kept_garbage_findings(const KernelModel &, std::size_t op,
                                                          std::vector<std::string> &unknown);
/// kept_garbage_findings for every windowed output, appended to `out`; per
/// operand, whether it was decided (its kept reads then need no plain check).
/// A scratch's kept reads are always decided: what a masked store keeps of it
/// is followed element by element by the lowered program's checks.
std::vector<bool> kept_garbage(const KernelModel &, std::vector<Finding> &out,
                               std::vector<std::string> &unknown);

/// Whether a read effect (an index into KernelModel::effects) fires at some
/// grid point where its operand's block index along array dim `dim` is the
/// last one: asked by partial-block-reduction, answered by the symbolic
/// checker and the enumerator alike (true when undecided).
using ReadsLastBlock = std::function<bool(std::size_t effect, std::size_t dim)>;

/// The rules that need little grid reasoning: partial-block-reduction (a
/// reduced dim's last block is partial and some read that fires on that
/// block reaches past its valid elements), sram-capacity and block-tiling
/// (the last two only with a known target). Appends to `unknown` when the
/// target is named but not known.
std::vector<Finding> structural_findings(const KernelModel &, std::vector<std::string> &unknown,
                                         const ReadsLastBlock &);

/// How the body uses a scratch buffer, for accumulator-reset (indices into
/// KernelModel::effects, in program order). A statement whose store of the
/// scratch also reads it (`acc[...] += v`, `acc[...] = acc[...] * a + v`) is
/// an update; a plain `=` store that does not read it is an init; a read by
/// any other statement consumes the partial result (the effect summary does not
/// follow values through locals, so every such read counts, whatever it feeds).
///
/// A consuming read whose statement stores the whole block of a windowed
/// output unguarded (`o[...] = acc[...]`, o not read there) consumes nothing
/// at a grid point whose next point in run order keeps the block of o
/// (keep_from): that point's store overwrites it (ops/tpu/matmul.py's shape
/// with the output written at every step). `consume_store` holds that store
/// per consume (parallel to `consumes`), or nullopt.
struct ScratchUse {
  std::vector<std::size_t> inits;
  std::vector<std::size_t> accumulates;
  std::vector<std::size_t> consumes;
  std::vector<std::optional<std::size_t>> consume_store;
  std::vector<std::size_t> fresh_inits; ///< the inits that are Effect::fresh
  bool result = false;                  ///< feeds_output
};
ScratchUse scratch_use(const KernelModel &, std::size_t op);
/// The consumes of scratch `op` (scratch_use) made by a statement that
/// stores into `op` itself, at other elements than it reads (`acc[0:8] +=
/// acc[8:16]`, both exact): what they read moves on within the scratch, so
/// neither a reset nor a block boundary loses it there.
std::vector<std::size_t> scratch_transfers(const KernelModel &, const ScratchUse &, std::size_t op);
/// What adds to the partial result a reset can discard: the accumulations,
/// and the fresh inits whose value reads an input block (Effect::fresh:
/// `where(k == 0, 0, acc[...]) + x` where k == 0 starts the sum with x;
/// not `where(k == 0, 0, acc[...])`), in effect order.
std::vector<std::size_t> contributions(const KernelModel &, const ScratchUse &);

/// Whether a store into a windowed output holds a value read from scratch
/// `op`, in its statement or through tensor locals (Effect::sources): a
/// result accumulator (`o[...] = acc[...]`), as opposed to an auxiliary one
/// whose last update may well be dead (online softmax's m and l feed acc,
/// not o). accumulator-reset holds an auxiliary scratch's reset harmful only
/// where it splits a visit of some output block.
bool feeds_output(const KernelModel &, std::size_t op);
/// An output that is one block for the whole grid (block = array, index map
/// all zeros: one visit spans the grid) whose value a store into another
/// output takes (Effect::sources): a scratch by another name, as upstream's
/// splash attention keeps m, l, o and dq/dk/dv (from before scratch_shapes),
/// consumed at the last step of each row and reset for the next. Its
/// resets are judged as a scratch's (a reset after a consuming read
/// discards nothing); its own final contents are the caller's to discard.
bool output_as_scratch(const KernelModel &, std::size_t op);

/// The HBM array a `memory_space=any` (or `hbm`) operand names: an aliased
/// input's is its output's (they are one buffer).
std::size_t hbm_array(const KernelModel &, std::size_t op);

/// parallel-write-conflict of body copies' `memory_space=any` regions: on a
/// chip with two TensorCores, grid points that differ along a parallel axis
/// may run at once on different cores, so a copy writing a region that a
/// copy at such another grid point writes or reads races. The region of a
/// copy address at a grid point, per array dim [lo, hi), cut to the array
/// (a subscript outside it is index-out-of-bounds' own finding).
class CopyRegions {
public:
  explicit CopyRegions(const KernelModel &);
  struct At {
    bool decided = true; ///< false: a guard or a subscript has no value there
    bool fires = false;  ///< its guards hold
    Box box;             ///< where it fires: empty dims where it lies outside the array
  };
  At at(std::size_t address, const Point &p) const;
  /// Whether its ref, locals or guards read open prefetch contents (no
  /// value in the env: the solver's to decide, over every allowed contents).
  bool reads_open(std::size_t address) const;
  /// The pairs (a, b) of copy addresses (a <= b) on one HBM array, at least
  /// one of them a write (CopyAddress::source false): those that may race.
  /// Empty without a parallel axis, or under `backend = triton`.
  const std::vector<std::pair<std::size_t, std::size_t>> &pairs() const { return pairs_; }
  /// The first pair in pairs() order whose regions meet with a at p and b
  /// at q (either way round), as (address at p, address at q, the region
  /// both touch); nullopt where none does (or one has no value).
  std::optional<std::tuple<std::size_t, std::size_t, Box>> conflict_at(const Point &p, const Point &q) const;

private:
  const KernelModel &m_;
  mutable spec::Env env_; // the model's when built, with program_id bound at the point asked
  std::vector<std::vector<spec::Expr>> guards_; // per address, program_id as names
  std::vector<spec::Expr> refs_;                // per address, locals substituted, program_id as names
  std::vector<std::pair<std::size_t, std::size_t>> pairs_;
};

/// The region two boxes share; nullopt where they do not meet.
std::optional<Box> region_meet(const Box &, const Box &);

/// parallel-write-conflict of copy addresses `a` (at grid point p) and `b`
/// (at q, later in run order, differing from p along a parallel axis), which
/// both touch `region` of their HBM array; reported at b's statement.
Finding hbm_copy_conflict_finding(const KernelModel &, std::size_t a, std::size_t b, const Point &p,
                                  const Point &q, const Box &region);

/// The SRAM footprint as Pallas allocates it. TPU: per windowed operand
/// buffer_count x block bytes. Mosaic GPU (per CTA): per windowed operand,
/// outputs included, gpu_slots() x block bytes. Plus scratch in VMEM/SMEM; a
/// `memory_space=acc` scratch lives in registers and counts nothing. A lower
/// bound: the compiler adds intermediates and spills.
std::int64_t sram_bytes(const KernelModel &);

/// Mosaic GPU: the SMEM slots per windowed operand, max_concurrent_steps
/// clipped to one CTA's pipeline steps (as emit_pipeline clips it).
std::int64_t gpu_slots(const KernelModel &);

/// One root cause, one finding: drops output-revisit where
/// reduction-not-last-axis holds for the same operand, output-write-lost on
/// a store accumulation-lost reports, keeps one finding per
/// (rule, anchor line) — the one with the smallest witness — and sorts by line.
void finalize(std::vector<Finding> &);

/// The values of a witness concatenated (for "smallest witness" comparisons).
std::vector<std::int64_t> witness_key(const Witness &);

} // namespace pipecheck::verifier::rules
