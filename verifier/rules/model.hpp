#pragma once
/// The concrete model of a kernel spec that the spec-level rules query: every
/// param bound, extents and blocks as numbers, index maps and guards as
/// integer expressions over the grid, and the body's effect summary (which
/// statement reads, writes or accumulates which operand, under which guard).

#include "spec/bind.hpp"
#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::verifier::rules {

/// One `in`/`out`/`scratch` operand as spec::bind evaluates it, with what
/// the rules add: how Pallas buffers it.
struct OperandModel : spec::BoundOperand {
  bool trivial_window = false; ///< block == array and index all literal 0
  std::int64_t buffer_count = 2;
  bool revisit_any = false;
  /// A `memory_space=acc` scratch (plgpu.ACC): registers, zero at each CTA start.
  bool acc = false;
  /// Its `S[...] = undefined` statements (a scoped buffer's entry): program
  /// order and place.
  std::vector<std::pair<int, spec::Loc>> discards;
};

/// What a body statement does to an operand, under the conjunction of the
/// `when` guards around it.
struct Effect {
  enum Kind { read, write, accumulate };
  Kind kind = read;
  std::size_t operand = 0;        ///< index into KernelModel::operands
  std::vector<spec::Expr> guards; ///< conjunction; params and integer locals substituted
  int order = 0;                  ///< program order; a statement's reads precede its write
  bool partial = false;           ///< the ref is sliced
  /// The elements of the block the ref names, per array dim [lo, hi)
  /// relative to the block: a subscript's range where it is a constant, the
  /// whole block dim where it is not (or where the ref is not a plain
  /// subscript list).
  std::vector<std::pair<std::int64_t, std::int64_t>> box;
  /// A Triton load whose subscripts read open prefetch contents (a gather):
  /// whether it stays inside the array is CopyAddress's to decide, for
  /// every allowed contents.
  bool gather = false;
  /// false: some subscript is not static (it depends on the grid point, e.g.
  /// `ds(t * bs, bs)` with a loop starting at program_id), so `box` is an
  /// over-approximation: sound for reads and conflicts, but a store's box
  /// cannot count as covering an output (coverage says unknown instead).
  bool exact = true;
  spec::Loc loc; ///< the statement
  /// A read that is the kept branch of `T[s] = where(c, v, T[s])`: the store
  /// puts the elements it reads back where they were, so the read alone
  /// consumes nothing (kept_garbage_findings decides whether what it keeps
  /// is ever overwritten).
  bool keep = false;
  /// A store `T[s] = where(c, v, T[s])`: c with params and integer and mask
  /// locals substituted (program_id stays), and the array dims of the
  /// stored value in order; absent on any other store.
  std::optional<spec::Expr> keep_mask;
  /// The conjuncts of that mask (`c & d`, through the tensor locals it
  /// names) that read no data, substituted as keep_mask is: where they fail
  /// the store sets nothing (`in_bounds & (v > 0)`: in_bounds); absent
  /// where none does.
  std::optional<spec::Expr> keep_bound;
  std::vector<std::size_t> keep_dims;
  /// The mask locals keep_mask reads through a subscript (`m[4:32]`, which
  /// substitution leaves named): their values, substituted as keep_mask is.
  std::map<std::string, spec::Expr> keep_locals;
  /// A store or read whose box is not exact: its ref with params and
  /// integer locals substituted in the subscripts (program_id stays), so
  /// that box_at can decide the box at each grid point.
  std::optional<spec::Expr> target;
  /// A store: the read effects (indices into KernelModel::effects) whose
  /// values it stores, in its own statement or through the tensor locals its
  /// value names (`t = acc[...]` then `o[...] = t / l[...]`). Which output
  /// block a scratch accumulator's partial result reaches
  /// (accumulator-carried).
  std::vector<std::size_t> sources;
  /// Those of `sources` whose values are stored, not only the condition of
  /// a `where` that picks what is (`o = where(x > m[...], i, o)`: m's read
  /// picks, it is not stored).
  std::vector<std::size_t> data_sources;
  /// A read inside the condition of a `where`.
  bool selects = false;
  /// A store `T[s] = where(c, v, T[s])` whose v does not read T: it replaces
  /// the elements c selects and adds nothing to them (megablox's masked
  /// store of a tile's rows).
  bool masked_overwrite = false;
  /// A read that is the selected branch of `where(c, x[s], ...)` whose mask
  /// c reads no operand but depends on the grid point (`iota(...) + i * bm <
  /// m`): which of its elements reach the value is the lowered program's
  /// padding flow's to decide, element by element (partial-block-reduction
  /// leaves it to that check): the operand's array dims the mask reaches
  /// (all the read's dims, or a dot operand's uncontracted ones).
  std::vector<std::size_t> masked;
  /// A store whose statement reads its own operand only under conditions
  /// beyond the statement's guards (`acc[...] = where(k == 0, 0, acc[...]) +
  /// x`, or a lax.cond's branch local) is two effects: the update where one
  /// of those conditions holds, and this one, fresh, where none does: there
  /// it writes without reading its operand, an init.
  bool fresh = false;
  /// A store: the sources its value holds as a term of a sum (`o[...] +=
  /// acc[...]`, `o + dot(acc, w)`), not inside a nonlinear function, a
  /// denominator or a factor of its own operand's read (online softmax's
  /// `alpha * o + p @ v` rescales o by a running max, it adds no scratch).
  /// What accumulator-carried's re-added case counts as added.
  std::vector<std::size_t> added;
  /// `added` holds a source through a running `maximum`/`minimum` with the
  /// store's own operand: it folds the source's value in rather than adding
  /// it (the re-added finding says so).
  bool folds_by_extremum = false;
  /// A read by a body DMA's start (or sync_copy): the copy's on-chip source.
  bool copy_source = false;
  /// A store whose value names the grid point beyond the blocks it reads:
  /// program_id, directly or through the locals it reads, or a loop variable
  /// whose bounds do (`acc += x[...] * (program_id(0) + 1)`). Two rounds
  /// that read the same blocks need not store the same value
  /// (value_repeats).
  bool grid_value = false;
  /// A read inside a branch of a `where` in its own statement, reached
  /// through elementwise operations (`where(c, x[s] * w[s], v)`, not through
  /// a local or a dot's operand): a masked load (Triton's `load(x, mask=c,
  /// other=v)`), which touches only the lanes c selects. Any other read of a
  /// Triton block loads every element of its ref_box.
  bool masked_load = false;
  /// A masked load: the condition that selects its lanes (spec::load_masks,
  /// negated for the where's second branch), substituted as keep_mask is; the array dims its
  /// ref's value keeps, in order, which the mask broadcasts against as
  /// numpy does; and the mask locals it reads through a subscript. Absent
  /// where the ref is not a plain subscript list.
  std::optional<spec::Expr> load_mask;
  std::vector<std::size_t> load_dims;
  std::map<std::string, spec::Expr> load_locals;
  /// A read: the box its ref names, as `box` starts before a mask narrows it
  /// to the elements that reach the value (narrow_by_mask): what a load
  /// touches. Exact where `box` is.
  std::vector<std::pair<std::int64_t, std::int64_t>> ref_box;
};
const char *to_string(Effect::Kind);

/// A block dimension contracted by `dot` or reduced by `sum`/`max` in the body.
struct Contraction {
  std::size_t operand = 0;
  std::size_t array_dim = 0;
  spec::Loc loc;
  /// The reduction: "dot", "dot_general", "sum", "max" or "min". Zeros in
  /// the padding (Mosaic GPU's TMA fill) change only a max or a min.
  std::string fn;
};

/// The `memory_space=any` side of a body DMA (an HBM address: a copy's
/// source or destination), under the guards of the statement that starts
/// it. The race checker decides its bounds on the lowered program; where its
/// subscripts read open prefetch contents (a page table), the symbolic rules
/// decide them for every allowed contents.
struct CopyAddress {
  std::size_t operand = 0;         ///< index into KernelModel::operands
  const spec::Expr *ref = nullptr; ///< Op::Ref, as written (after prefetch elaboration); in the spec
  /// A Triton load of an input whose subscripts read open prefetch contents
  /// (upstream GPU paged attention's `k_pages_ref[block_tables]`): its
  /// subscripts are relative to the block at the grid point, and must lie
  /// inside the block's part within the array. `held` owns its ref (a
  /// gather's, or a bare name's `o[...]`: `sync_copy(x, o)`).
  bool gather = false;
  std::shared_ptr<const spec::Expr> held;
  /// The integer locals its subscripts may name, params and other locals
  /// substituted (kept apart: a prefetch read is a large `where` tree, and
  /// substituting into it at every unrolled copy would cost its size each).
  std::map<std::string, spec::Expr> locals;
  std::vector<spec::Expr> guards; ///< as Effect::guards
  bool source = true;             ///< the copy reads it (else writes it)
  spec::Loc loc;                  ///< the statement that starts the copy
};

/// A body `while cond, bound=n:` (spec::For, is_while): the rules model its
/// n iterations exactly, each under `cond`; `cond` here is the condition
/// after the last of them (integer locals substituted), under the loop's
/// guards. Where it may hold, some run needs more iterations than were
/// modelled, and the rules are `unknown` (spec::while_bound_message).
struct WhileBound {
  std::vector<spec::Expr> guards;
  spec::Expr cond;
  std::int64_t bound = 0;
  spec::Loc loc;
};

/// A read of a scalar prefetch array (spec::elaborated_read_bounds), in a
/// body statement under its guards, or in an index map (no guards: Pallas
/// evaluates it at every grid point). index-out-of-bounds where `in_range`
/// may fail while the guards hold.
struct PrefetchRead {
  spec::Expr in_range;
  /// The integer locals `in_range` may name (as CopyAddress::locals).
  std::map<std::string, spec::Expr> locals;
  std::vector<spec::Expr> guards; ///< as Effect::guards
  spec::Loc loc;                  ///< the read as written
};

struct AliasModel {
  std::size_t input = 0, output = 0;
  spec::Loc loc;
};

struct KernelModel {
  const spec::KernelSpec *spec = nullptr;
  spec::Env env;
  std::vector<std::int64_t> grid;
  std::vector<spec::DimSemantics> semantics; ///< one per axis (omitted: arbitrary; on GPU parallel)
  std::vector<OperandModel> operands;
  std::vector<Effect> effects;
  std::vector<Contraction> contractions;
  std::vector<AliasModel> aliases;
  std::optional<std::string> target;
  std::optional<std::int64_t> vmem_limit_bytes;
  std::int64_t max_concurrent_steps = 1;
  /// Mosaic GPU: the CTA axes (spec::cta_axes); empty on TPU. Each CTA has
  /// its own scratch, so a scratch written in one CTA is not written in another.
  std::vector<bool> cta_axes;
  std::vector<CopyAddress> copy_addresses;
  std::vector<PrefetchRead> prefetch_reads;
  std::vector<WhileBound> while_bounds;
  /// `backend = triton`: every axis is parallel (the programs run
  /// concurrently), every grid point a CTA of its own (cta_axes all true:
  /// a scratch is program-local), and a program's stores reach the output
  /// array directly, element by element, with no write-back of its block.
  bool triton = false;

  std::optional<std::size_t> operand_index(const std::string &) const;
  bool is_aliased_input(std::size_t operand) const;
  /// True when an `alias IN -> operand` names it: its HBM buffer starts as the input's data.
  bool is_aliased_output(std::size_t operand) const;
  /// True when some effect on `operand` reads it (a load or `+=`).
  bool is_read(std::size_t operand) const;
  /// spec::tma_zero_fills of `operand`: a partial block of it holds zeros
  /// past its array (a Mosaic GPU input, fetched by TMA).
  bool zero_filled(std::size_t operand) const;
  /// True when the statement of store `w` also reads w's operand
  /// (`o[...] = where(mask, a, o[...])`, `acc[...] = acc[...] + x`): a
  /// read-modify-write like `+=`, not an init.
  bool reads_own_target(const Effect &w) const;
  /// True when store `w` holds a read of its own operand, in its statement
  /// or through tensor locals (`v = o[...]`, then `o[...] = v + c`, as the
  /// bridge exports `o_ref[...] += lax.cond(...)`): an update of an output.
  bool updates_through_locals(const Effect &w) const;
  std::int64_t num_points() const; ///< saturates at INT64_MAX

private:
  /// reads_own_target per effect (1: it does), computed at the first
  /// question: rules ask it of every pair of effects, and a body loop
  /// unrolled into a thousand column updates made each question a pass over
  /// all of them.
  mutable std::vector<signed char> reads_own_;
};

struct ModelResult {
  std::optional<KernelModel> model;
  std::string unknown_reason; ///< set when the model could not be built
  /// Bad input found while binding the params (e.g. a division by a param
  /// that --set binds to 0, a size that overflows): no model then.
  std::optional<spec::Diagnostic> error;
};

/// Builds the model of a validated kernel spec; `target` overrides the spec's
/// `target =` setting. The model points into the spec, which must outlive it.
ModelResult build_model(const spec::KernelSpec &, const spec::Env &overrides,
                        const std::optional<std::string> &target);
/// A temporary spec would be gone before its model is used.
ModelResult build_model(spec::KernelSpec &&, const spec::Env &, const std::optional<std::string> &) = delete;

/// The arithmetic of a box's bounds: integers (the model's static boxes,
/// box_at) or solver terms (the symbolic rules at a symbolic grid point).
template <class V> struct BoxArith {
  std::function<std::optional<V>(const spec::Expr &)> value; ///< a subscript bound's value, if known
  std::function<V(std::int64_t)> num;
  std::function<V(const V &, const V &)> add;
  std::function<V(const V &, std::int64_t)> clamp; ///< to [0, n]
  std::function<V(const V &, const V &)> max;
};

/// The box [lo, hi) per block dim that subscript `ref` of operand o names,
/// clamped to the block: `a:b` slices, `ds(start, size)`, integer indices
/// and `...`; where a bound is not known its dim is the whole block and `ok`
/// is cleared.
template <class V>
std::vector<std::pair<V, V>> subscript_box_of(const OperandModel &o, const spec::Expr &ref,
                                              const BoxArith<V> &a, bool &ok) {
  std::vector<std::pair<V, V>> full;
  std::vector<std::size_t> view;
  for (std::size_t d = 0; d < o.block.size(); ++d) {
    full.emplace_back(a.num(0), a.num(o.block[d]));
    if (!o.squeezed[d]) view.push_back(d);
  }
  std::vector<std::pair<V, V>> box = full;
  std::size_t explicit_n = 0;
  for (const auto &s : ref.args) {
    if (s.op == spec::Op::None) { // not a plain subscript list
      ok = false;
      return full;
    }
    if (s.op != spec::Op::Ellipsis) ++explicit_n;
  }
  if (explicit_n > view.size()) {
    ok = false;
    return full;
  }
  std::size_t v = 0;
  for (const auto &s : ref.args) {
    if (s.op == spec::Op::Ellipsis) {
      v += view.size() - explicit_n;
      continue;
    }
    if (v >= view.size()) {
      ok = false;
      return full;
    }
    const std::size_t d = view[v++];
    const std::int64_t n = o.block[d];
    auto range = [&](const V &lo, const V &hi) {
      const V l = a.clamp(lo, n);
      box[d] = {l, a.max(l, a.clamp(hi, n))};
    };
    if (s.op == spec::Op::Slice && s.args.size() == 2) {
      auto lo = s.args[0].op == spec::Op::None ? std::optional<V>(a.num(0)) : a.value(s.args[0]);
      auto hi = s.args[1].op == spec::Op::None ? std::optional<V>(a.num(n)) : a.value(s.args[1]);
      if (lo && hi)
        range(*lo, *hi);
      else
        ok = false;
    } else if (s.op == spec::Op::Call && s.name == "ds" && s.num_positional() == 2) {
      // pl.ds(start, size): static once a body loop's variable is bound
      // (the loop is unrolled), so a store per chunk covers only its chunk.
      auto lo = a.value(s.args[0]), size = a.value(s.args[1]);
      if (lo && size)
        range(*lo, a.add(*lo, *size));
      else
        ok = false;
    } else if (auto i = a.value(s)) {
      range(*i, a.add(*i, a.num(1)));
    } else {
      ok = false;
    }
  }
  return box;
}

/// The box of effect e at grid point p: e.box where it is exact, else the
/// box of its target with the grid point bound (a `ds(program_id(0) * 16,
/// 16)` is one 16-element chunk there); nullopt where that is not decided.
std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>> box_at(const KernelModel &, const Effect &e,
                                                                         const std::vector<std::int64_t> &p);
/// A read's ref_box at grid point p (box_at's, before masks narrow it).
std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>>
ref_box_at(const KernelModel &, const Effect &e, const std::vector<std::int64_t> &p);

using spec::bind_grid;
using spec::format_tuple;

} // namespace pipecheck::verifier::rules
