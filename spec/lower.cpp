#include "spec/lower.hpp"
#include "spec/nested.hpp"
#include "spec/prefetch.hpp"
#include "spec/state.hpp"

#include "spec/bind.hpp"
#include "spec/checked.hpp"
#include "spec/print.hpp"
#include "spec/targets.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <cassert>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>

namespace pipecheck::spec {

namespace {

constexpr std::int64_t kMaxSteps = 1 << 16;

struct Fail {
  Loc loc;
  std::string message;
};

/// One kernel operand as the emitter sees it.
struct Opnd {
  const Operand *op = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<std::optional<std::int64_t>> block; // nullopt: squeezed
  std::int64_t buffers = 2;
  bool windowed = true; // false: memory_space=any/hbm (the body copies by hand)
  std::string hbm, window;
  std::vector<std::vector<std::int64_t>>
      blk;                          // per step: the window (spec::window_at: block index, then ds sizes)
  bool acc = false;                 // memory_space=acc: plgpu.ACC, wgmma accumulator registers
  bool invariant = true;            // GPU: the block never moves within a CTA's pipeline
  const BoundOperand *bo = nullptr; // its binding: the block index expressions
};

bool is_int(const Expr &e, std::int64_t v) { return e.op == Op::Int && e.int_value == v; }

/// Folds constant subexpressions and the identities x + 0, x * 1, x * 0,
/// x // 1, x % 1, so that the rolled program reads as it would be written.
// `~` of a truth value whose operand folded to 0 or 1 (`out`, `e` with its
// operands folded) is its `not`, not the bitwise ~ of that integer
// (spec::is_truth_value).
std::optional<Expr> folded_not(const Expr &e, const Expr &out) {
  if (e.op == Op::BitNot && is_truth_value(e) && out.args.size() == 1 && out.args[0].op == Op::Int)
    return Expr::integer(out.args[0].int_value == 0 ? 1 : 0, e.loc);
  return std::nullopt;
}

Expr fold(const Expr &e) {
  Expr out = e.map_args([](const Expr &a) { return fold(a); });
  if (auto n = folded_not(e, out)) return *n;
  // Every operand a literal: the value, where the operator is integer
  // arithmetic, a comparison, a logical one or min/max/cdiv/abs (eval_int
  // answers nothing for refs, slices and other calls).
  if (!out.args.empty() &&
      std::all_of(out.args.begin(), out.args.end(), [](const Expr &a) { return a.op == Op::Int; }))
    if (auto v = eval_int(out, {})) return Expr::integer(*v, e.loc);
  if (out.args.size() == 2 && (out.op == Op::Add || out.op == Op::Sub) && out.args[1].op == Op::Int &&
      (out.args[0].op == Op::Add || out.args[0].op == Op::Sub) && out.args[0].args[1].op == Op::Int) {
    // (x + c1) - c2 is x + (c1 - c2).
    const Expr &in = out.args[0];
    std::int64_t c = (in.op == Op::Add ? 1 : -1) * in.args[1].int_value;
    c += (out.op == Op::Add ? 1 : -1) * out.args[1].int_value;
    if (c == 0) return in.args[0];
    return Expr::binary(c > 0 ? Op::Add : Op::Sub, in.args[0], Expr::integer(c > 0 ? c : -c), e.loc);
  }
  if (out.op == Op::FloorDiv && out.args[0].op == Op::FloorDiv && out.args[1].op == Op::Int &&
      out.args[0].args[1].op == Op::Int && out.args[1].int_value > 0 && out.args[0].args[1].int_value > 0 &&
      out.args[1].int_value <= (std::int64_t{1} << 31) &&
      out.args[0].args[1].int_value <= (std::int64_t{1} << 31))
    // x // a // b is x // (a * b) for positive a and b.
    return Expr::binary(Op::FloorDiv, out.args[0].args[0],
                        Expr::integer(out.args[0].args[1].int_value * out.args[1].int_value), e.loc);
  if (out.args.size() == 2) {
    const Expr &a = out.args[0], &b = out.args[1];
    if ((out.op == Op::Add || out.op == Op::Sub) && is_int(b, 0)) return a;
    if (out.op == Op::Add && is_int(a, 0)) return b;
    if ((out.op == Op::Mul || out.op == Op::FloorDiv) && is_int(b, 1)) return a;
    if (out.op == Op::Mul && is_int(a, 1)) return b;
    if (out.op == Op::Mul && (is_int(a, 0) || is_int(b, 0))) return Expr::integer(0, e.loc);
    if (out.op == Op::Mod && is_int(b, 1)) return Expr::integer(0, e.loc);
    if (out.op == Op::Or && (is_int(a, 1) || is_int(b, 1))) return Expr::integer(1, e.loc);
    if (out.op == Op::Or && is_int(a, 0)) return b;
    if (out.op == Op::Or && is_int(b, 0)) return a;
    if (out.op == Op::And && (is_int(a, 0) || is_int(b, 0))) return Expr::integer(0, e.loc);
    if (out.op == Op::And && is_int(a, 1)) return b;
    if (out.op == Op::And && is_int(b, 1)) return a;
  }
  return out;
}

Expr bin(Op op, Expr a, Expr b) { return fold(Expr::binary(op, std::move(a), std::move(b))); }
Expr lit(std::int64_t v) { return Expr::integer(v); }

std::int64_t ev(const Expr &e, const Env &env) {
  auto v = eval_int(e, env);
  if (v) return *v;
  if (auto d = arithmetic_error(e, env, "'" + print(e) + "'")) throw Fail{d->loc, d->message};
  throw Fail{e.loc, "cannot evaluate '" + print(e) + "' (every param must be bound)"};
}

Stmt mk(decltype(Stmt::kind) k, Loc l) {
  Stmt s;
  s.kind = std::move(k);
  s.loc = l;
  return s;
}

class Emitter {
public:
  Emitter(const KernelSpec &k, const LowerOptions &o) : k_(k), o_(o) {}

  Lowered run() {
    env_ = param_env(k_.params, o_.overrides);
    for (auto &p : k_.params)
      if (!env_.count(p.name)) throw Fail{p.loc, "param '" + p.name + "' has no value: bind it with --set"};
    gpu_ = targets_gpu(k_, o_.target);
    triton_ = uses_triton(k_);
    Binding bound = bind_kernel(k_, env_);
    if (bound.error) throw Fail{bound.error->diag.loc, bound.error->diag.message};
    bound_ = std::move(*bound.kernel);
    if (o_.cut) apply_cut(*o_.cut);
    grid_ = bound_.grid;
    if (gpu_) cta_ = cta_axes(k_, grid_.size());
    steps_ = bound_.num_points();
    rolled_ = !o_.unroll && !needs_unroll();
    if (!rolled_) {
      if (steps_ > kMaxSteps)
        throw Fail{k_.grid_loc,
                   o_.unroll ? "grid too large to unroll (more than 65536 steps)"
                             : "grid too large to lower with " + unroll_reason_ + " (more than 65536 steps)"};
      // GPU: CTA by CTA, each CTA's pipeline steps in order.
      for (std::int64_t s = 0; s < steps_; ++s)
        coords_.push_back(grid_point(grid_, cta_, s));
    }
    setup_operands(bound_);
    std::string note;
    if (rolled_ && o_.check_blocks && steps_ > o_.check_blocks_max_steps) {
      note = "the block indices were not evaluated at each of the " + std::to_string(steps_) +
             " grid steps (more than " + std::to_string(o_.check_blocks_max_steps) +
             "): `pipecheck check` decides them for every grid point";
    } else if (rolled_ && o_.check_blocks) {
      // (One indexer an operand for every step: making one scans its map.)
      std::vector<std::unique_ptr<BlockIndexer>> indexers;
      // A map of literals alone has one value everywhere (whole arrays: no
      // map at all): bind_kernel evaluated it.
      const auto constant = [](const Expr &e) {
        std::set<std::string> names;
        collect_names(e, names);
        return names.empty();
      };
      for (auto &x : ops_)
        if (x.bo && x.op->role != Role::scratch &&
            !std::all_of(x.bo->window.begin(), x.bo->window.end(), constant))
          indexers.push_back(
              std::make_unique<BlockIndexer>(*x.bo, bound_.params, bound_.grid, bound_.grid.size()));
      for (std::int64_t s = 0; s < steps_ && !indexers.empty(); ++s) {
        auto point = grid_point(grid_, cta_, s);
        for (auto &ix : indexers)
          if (BlockIndex b = ix->at(point); b.error) throw Fail{b.error->diag.loc, b.error->diag.message};
      }
    }
    declare_buffers();
    discard_unaliased_any_outputs();
    if (rolled_) {
      if (gpu_)
        emit_gpu_rolled();
      else
        emit_tpu_rolled();
    } else {
      if (gpu_)
        emit_gpu();
      else
        emit_tpu();
      mark_step(std::max<std::int64_t>(steps_ - 1, 0));
    }
    Lowered out;
    out.program = std::move(prog_);
    out.grid = grid_;
    out.step_of = std::move(step_of_);
    out.main_loop = main_loop_;
    out.cta = cta_;
    out.note = std::move(note);
    for (auto &x : ops_)
      out.bindings.push_back({x.op->name, x.op->role, x.hbm, x.window});
    // A nested emit_pipeline's rings (no hbm of their own: the kernel's).
    for (auto &b : nested_bindings_)
      out.bindings.push_back(b);
    return out;
  }

private:
  // The cut grid (spec/cut.hpp): its extents, and each array dim that follows
  // a cut axis shorter by the values left out.
  void apply_cut(const GridCut &cut) {
    bound_.grid = cut.grid;
    for (auto &op : bound_.operands) {
      op.shape = cut.shape(op.name, op.shape);
      for (std::size_t i = 0; i < op.shape.size(); ++i)
        op.num_blocks[i] = (op.shape[i] + op.block[i] - 1) / op.block[i];
    }
  }

  void setup_operands(const BoundKernel &bound) {
    // A window's ring is named after its operand, away from every name the
    // kernel has (a scratch `x_vmem` beside an input `x` stays the user's).
    for (auto &p : k_.params)
      used_.insert(p.name);
    for (const auto &o : k_.operands)
      used_.insert(o.name);
    collect_names(k_.body, used_);
    std::map<std::string, std::string> alias_of; // output -> input
    for (auto &a : k_.aliases)
      alias_of[a.output] = a.input;
    for (const auto &bo : bound.operands) {
      const Operand &o = *bo.decl;
      Opnd x;
      x.op = &o;
      x.shape = bo.shape;
      for (std::size_t d = 0; d < bo.block.size(); ++d)
        x.block.push_back(bo.squeezed[d] ? std::nullopt : std::optional(bo.block[d]));
      if (o.role == Role::scratch) {
        x.windowed = false;
        x.window = o.name;
        x.acc = o.memory_space == MemorySpace::acc;
        if (x.acc && !gpu_)
          throw Fail{o.loc, "memory_space=acc (plgpu.ACC) needs a Mosaic GPU target (h100 or h200)"};
        ops_.push_back(x);
        continue;
      }
      x.invariant = !moves_within_cta(o, cta_);
      x.windowed = o.memory_space == MemorySpace::vmem || o.memory_space == MemorySpace::smem;
      x.hbm = alias_of.count(o.name) ? alias_of[o.name] : o.name;
      // A nested pipeline stages the kernel's operand: its array, the one
      // the kernel's aliases give it (an output aliased to an input is that
      // input's array).
      if (parent_)
        for (const auto &po : parent_->ops_)
          if (po.op->name == o.name && po.op->role != Role::scratch) x.hbm = po.hbm;
      // (A Triton block is the program's view of the array: neither VMEM nor SMEM.)
      if (x.windowed) x.window = fresh(o.name + (triton_ ? "_block" : gpu_ ? "_smem" : "_vmem"));
      x.bo = &bo;
      if (gpu_ && bo.has_bounded_dims())
        throw Fail{o.loc, "'" + o.name +
                              "' has a BoundedSlice dim, a TPU block dim (pltpu.emit_pipeline): a Mosaic GPU "
                              "target has none"};
      if (!rolled_) {
        // The window moves when its start or its size does (spec::window_at:
        // the ds sizes of BoundedSlice dims follow the indices, where
        // region() reads them), by one indexer for every step.
        BlockIndexer window(bo, bound.params, bound.grid, bound.grid.size(),
                            bo.has_bounded_dims() ? &bo.window : nullptr);
        for (std::int64_t s = 0; s < steps_; ++s) {
          BlockIndex b = window.at(coords_[s]);
          if (b.error) throw Fail{b.error->diag.loc, b.error->diag.message};
          x.blk.push_back(std::move(*b.value));
        }
      }
      if (o.pipeline_mode.buffer_count)
        x.buffers = ev(*o.pipeline_mode.buffer_count, env_);
      else if (!gpu_) {
        // A trivial window (the whole array, its index map the literal zero
        // block) is single-buffered. Decided on the map's text, as Pallas
        // does, so that both forms of the lowering agree without evaluating
        // every step.
        bool trivial = true;
        for (std::size_t d = 0; d < x.shape.size(); ++d)
          if (!x.block[d] || *x.block[d] != x.shape[d]) trivial = false;
        for (auto &e : bo.index) {
          Expr f = fold(e);
          if (f.op != Op::Int || f.int_value != 0) trivial = false;
        }
        if (trivial) x.buffers = 1;
      }
      // revisit=any, and Triton's stores into the HBM array itself, read
      // each visit's block back first: one slot.
      if ((o.pipeline_mode.revisit == Revisit::any || triton_) && o.role == Role::out) x.buffers = 1;
      if (x.buffers < 1) throw Fail{o.loc, "buffer_count must be at least 1"};
      if (gpu_) {
        // M slots per operand, M clipped to one CTA's step count.
        std::int64_t m = 1;
        if (auto *s = k_.setting("max_concurrent_steps")) m = ev(s->value, env_);
        x.buffers = std::max<std::int64_t>(1, std::min(m, std::max<std::int64_t>(cta_steps(grid_, cta_), 1)));
      }
      ops_.push_back(x);
    }
  }

  static std::vector<Expr> ints(const std::vector<std::int64_t> &v) {
    std::vector<Expr> out;
    for (auto x : v)
      out.push_back(Expr::integer(x));
    return out;
  }

  void declare_buffers() {
    prog_.name = k_.name;
    prog_.loc = k_.loc;
    std::set<std::string> hbm_done;
    for (auto &x : ops_) {
      if (x.op->role == Role::scratch) continue;
      if (hbm_done.insert(x.hbm).second) {
        Buffer b;
        b.kind = BufferKind::hbm;
        b.name = x.hbm;
        b.dtype = x.op->dtype;
        b.shape = ints(x.shape);
        b.loc = x.op->loc;
        prog_.buffers.push_back(b);
      }
    }
    for (auto &x : ops_) {
      Buffer b;
      b.dtype = x.op->dtype;
      b.loc = x.op->loc;
      if (x.op->role == Role::scratch) {
        b.kind = x.acc ? BufferKind::acc : (gpu_ ? BufferKind::smem : BufferKind::sram);
        if (x.op->sem != SemKind::none) b.kind = BufferKind::sem;
        b.sem = x.op->sem;
        b.name = x.op->name;
        b.shape = ints(x.shape);
      } else if (x.windowed) {
        b.kind = gpu_ ? BufferKind::smem : BufferKind::sram;
        b.name = x.window;
        b.slots = Expr::integer(x.buffers);
        for (auto &d : x.block)
          if (d) b.shape.push_back(Expr::integer(*d));
      } else {
        continue;
      }
      prog_.buffers.push_back(b);
    }
  }

  /// TPU: an output in memory_space=any that no input aliases holds nothing
  /// until the body's copies write it (`o[...] = undefined` first), so a
  /// copy that reads it before is an uninitialized-read. (Not on a cut grid,
  /// whose left-out steps may write what a later one reads; not Triton, whose
  /// programs read their output blocks back, nor Mosaic GPU.)
  void discard_unaliased_any_outputs() {
    if (triton_ || gpu_ || o_.cut || parent_) return;
    // (Nor one a nested emit_pipeline stages: its program is the one the
    // same pipeline as a pallas_call, the output windowed, lowers to.)
    std::set<std::string> aliased;
    for (const auto &a : k_.aliases)
      aliased.insert(a.output);
    for_each_stmt(k_.body, [&](const Stmt &st) {
      if (const auto *e = std::get_if<EmitPipeline>(&st.kind))
        for (const auto &spec : e->specs)
          aliased.insert(spec.name);
    });
    for (const auto &x : ops_)
      if (x.op->role == Role::out && !x.windowed && !aliased.count(x.op->name))
        prog_.body.push_back(
            mk(Assign{Expr::ref(x.hbm, {Expr::leaf(Op::Ellipsis)}), false, Expr::leaf(Op::Undefined)},
               x.op->loc));
  }

  // ------------------------------------------------------------ statements

  /// An hbm region a copy moves and, where a pl.Element window starts in the
  /// array's low padding, the offset into the slot where it lands (`offset=`
  /// of the copy; Op::None: the slot's leading corner).
  struct HbmRegion {
    Expr ref;
    Expr offset = Expr::leaf(Op::None);
  };

  /// `offset=(o, ...)`, one per kept dim of the slot, or Op::None when every
  /// offset folds to 0.
  static Expr slot_offset(const Opnd &x, const std::vector<Expr> &per_dim) {
    Expr t = Expr::leaf(Op::Tuple);
    bool any = false;
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      if (!x.block[d]) continue;
      Expr o = d < per_dim.size() ? fold(per_dim[d]) : lit(0);
      any = any || !(o.op == Op::Int && o.int_value == 0);
      t.args.push_back(std::move(o));
    }
    return any ? t : Expr::leaf(Op::None);
  }

  /// Whether step s starts a visit of x's block: its block differs from the
  /// step before's; on Triton, every step of an output (each grid point is
  /// a program of its own, which reads its block and writes it back).
  bool changed(const Opnd &x, std::int64_t s) const {
    return s == 0 || x.blk[s] != x.blk[s - 1] || (triton_ && x.op->role == Role::out);
  }

  HbmRegion region(const Opnd &x, std::int64_t s) const {
    const auto &b = x.blk[s];
    bool whole = true;
    std::vector<Expr> subs;
    std::vector<Expr> at(x.shape.size(), lit(0));
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      if (!x.block[d]) {
        subs.push_back(Expr::integer(b[d]));
        whole = false;
        continue;
      }
      // Clipped where the dim is ragged (Pallas pads the last block); a block
      // past the end of a dividing dim stays out of bounds.
      std::int64_t lo = saturating_mul(b[d], *x.block[d]);
      std::int64_t hi = saturating_add(lo, *x.block[d]);
      if (x.shape[d] % *x.block[d] != 0) hi = std::min(hi, x.shape[d]);
      if (x.bo && x.bo->element[d]) {
        // pl.Element: the index is an element offset into the padded dim;
        // the window's padding is the slot's part the copy leaves: its low
        // padding the slot's leading part (the copy lands past it), its high
        // padding the trailing part.
        // A window past the padded dim keeps its slice out of bounds.
        // A window wholly in the padding copies nothing (an empty slice,
        // landing at the slot's end or start): the slot is all padding.
        lo = x.bo->window_start(d, b[d]);
        hi = saturating_add(lo, *x.block[d]);
        const std::int64_t hi0 = hi;
        if (lo < 0 && x.bo->pad_lo[d] > 0 && lo >= -x.bo->pad_lo[d]) {
          at[d] = lit(std::min(-lo, *x.block[d]));
          lo = 0;
          hi = std::max<std::int64_t>(hi, 0);
        }
        if (hi0 > x.shape[d] && x.bo->pad_hi[d] > 0 && hi0 <= saturating_add(x.shape[d], x.bo->pad_hi[d])) {
          hi = x.shape[d];
          lo = std::min(lo, x.shape[d]);
        }
      }
      if (x.bo && x.bo->bounded[d]) {
        // pl.BoundedSlice: ds(start, size) copies `size` elements into the
        // slot's leading part; the rest of the slot is left undefined.
        // The sizes follow the indices, one per BoundedSlice dim (window_at).
        const auto nth =
            std::count(x.bo->bounded.begin(), x.bo->bounded.begin() + static_cast<std::ptrdiff_t>(d), true);
        lo = b[d];
        hi = saturating_add(lo, b[x.shape.size() + static_cast<std::size_t>(nth)]);
      }
      if (lo != 0 || hi != x.shape[d]) {
        whole = false;
        subs.push_back(Expr::binary(Op::Slice, Expr::integer(lo), Expr::integer(hi)));
      } else {
        subs.push_back(Expr::binary(Op::Slice, Expr::leaf(Op::None), Expr::leaf(Op::None)));
      }
    }
    // The whole array may still land at an offset (a window padded at both ends).
    if (whole) return {Expr::var(x.hbm), slot_offset(x, at)};
    return {Expr::ref(x.hbm, subs), slot_offset(x, at)};
  }

  /// Every statement emitted since the last mark is issued by step s.
  void mark_step(std::int64_t s) { step_of_.resize(prog_.body.size(), s); }

  Expr slot(const Opnd &x, std::int64_t k) const { return Expr::ref(x.window, {Expr::integer(k)}); }

  void copy(CopyKind kind, Expr src, Expr dst, Loc l) {
    Copy c;
    c.kind = kind;
    c.src = std::move(src);
    c.dst = std::move(dst);
    out_->push_back(mk(c, l));
  }
  void copy(CopyKind kind, HbmRegion src, Expr dst, Loc l) {
    copy(kind, std::move(src.ref), std::move(dst), l);
    std::get<Copy>(out_->back().kind).offset = std::move(src.offset);
  }
  void copy(CopyKind kind, Expr src, HbmRegion dst, Loc l) {
    copy(kind, std::move(src), std::move(dst.ref), l);
    std::get<Copy>(out_->back().kind).offset = std::move(dst.offset);
  }
  void in_start(const Opnd &x, std::int64_t s, std::int64_t k) {
    copy(CopyKind::in_start, region(x, s), slot(x, k), x.op->loc);
    zero_fill(x);
  }
  /// Mosaic GPU fetches an input block by TMA (Pallas' copy_gmem_to_smem,
  /// OOBFillMode.ZEROS): the part of a ragged block past the array is zeros.
  /// Marked on the copy just emitted, for an operand with a ragged dim.
  void zero_fill(const Opnd &x) {
    if (!tma_zero_fills(gpu_, x.op->role, x.windowed)) return;
    bool ragged = false;
    for (std::size_t d = 0; d < x.shape.size(); ++d)
      ragged = ragged || (x.block[d] && x.shape[d] % *x.block[d] != 0);
    if (ragged) std::get<Copy>(out_->back().kind).zeros = true;
  }
  void in_wait(const Opnd &x, std::int64_t k) {
    copy(CopyKind::in_wait, Expr::leaf(Op::None), slot(x, k), x.op->loc);
  }
  void out_start(const Opnd &x, std::int64_t s, std::int64_t k) {
    copy(CopyKind::out_start, slot(x, k), region(x, s), x.op->loc);
  }
  void out_wait(const Opnd &x, std::int64_t k, bool keep = false) {
    copy(CopyKind::out_wait, slot(x, k), Expr::leaf(Op::None), x.op->loc);
    std::get<Copy>(out_->back().kind).keep = keep;
  }

  Opnd *find(const std::string &n) {
    for (auto &x : ops_)
      if (x.op->name == n) return &x;
    return nullptr;
  }

  /// The body's expression at step s with every operand bound to its slot.
  Expr rewrite(const Expr &e, std::int64_t s) {
    if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1) {
      std::int64_t a = ev(e.args[0], env_);
      if (a < 0 || a >= static_cast<std::int64_t>(grid_.size()))
        throw Fail{e.loc, "no grid axis " + std::to_string(a)};
      if (e.name == "num_programs") return Expr::integer(grid_[a], e.loc);
      if (rolled_) return Expr::var(pid_[a], e.loc);
      return Expr::integer(coords_[s][a], e.loc);
    }
    if (e.op == Op::Name && env_.count(e.name) && !find(e.name)) return Expr::integer(env_.at(e.name), e.loc);
    // An inner pipeline's body naming the kernel's operands (its scratch, a
    // windowed block): what they denote at the outer step, at the subscripts
    // the inner body gives (its program_id the inner grid's), rewritten here.
    if ((e.op == Op::Ref || e.op == Op::Name) && !find(e.name) && parent_ && parent_->find(e.name))
      return parent_->rewrite(e.op == Op::Ref ? e.map_args([&](const Expr &a) { return rewrite(a, s); }) : e,
                              parent_step_);
    if (e.op == Op::Ref || e.op == Op::Name) {
      if (Opnd *x = find(e.name)) {
        std::vector<Expr> subs;
        if (e.op == Op::Ref)
          for (auto &a : e.args)
            subs.push_back(rewrite(a, s));
        bool whole = subs.empty() || (subs.size() == 1 && subs[0].op == Op::Ellipsis);
        if (x->op->role == Role::scratch) {
          if (whole) return Expr::ref(x->op->name, {Expr::leaf(Op::Ellipsis)}, e.loc);
          return Expr::ref(x->op->name, subs, e.loc);
        }
        if (!x->windowed) {
          if (whole) return Expr::var(x->hbm, e.loc);
          return Expr::ref(x->hbm, subs, e.loc);
        }
        std::vector<Expr> args{cur_slot_.at(x->op->name)};
        if (!whole)
          for (auto &a : subs)
            args.push_back(a);
        return Expr::ref(x->window, args, e.loc);
      }
    }
    Expr out = e.map_args([&](const Expr &a) { return rewrite(a, s); });
    if (auto n = folded_not(e, out)) return *n;
    if (out.op != Op::Ref && out.op != Op::Slice && out.op != Op::Call)
      if (auto v = eval_int(out, {}); v && out.op != Op::Int && out.op != Op::Float && out.op != Op::Name)
        return Expr::integer(*v, e.loc);
    return out;
  }

  bool reads_acc(const Expr &e) {
    if ((e.op == Op::Ref || e.op == Op::Name))
      if (Opnd *x = find(e.name); x && x->acc) return true;
    for (auto &a : e.args)
      if (reads_acc(a)) return true;
    return false;
  }

  // A body loop (`for t in range(lo, hi):`, fori_loop / pl.loop) is
  // unrolled: its bounds are known at each grid point, and each iteration's
  // statements see t as a constant.
  void loop(const For &f, const Stmt &st, std::int64_t s) {
    if (f.is_while) {
      while_loop(f, st, s);
      return;
    }
    auto lo = eval_int(rewrite(f.lo, s), int_lets_), hi = eval_int(rewrite(f.hi, s), int_lets_);
    if ((!lo || !hi) && rolled_) {
      // Bounds that depend on the grid point: the rolled program keeps the
      // loop (its variable a name in its statements).
      For n;
      n.var = f.var;
      n.lo = fold(rewrite(f.lo, s));
      n.hi = fold(rewrite(f.hi, s));
      // The loop runs a number of times decided at run time.
      forget_int_lets(f.body);
      Block *saved = out_;
      const bool entry = in_flight_;
      out_ = &n.body;
      body(f.body, s);
      if (in_flight_ && !entry) {
        // A wgmma may be in flight from one iteration into the next.
        n.body.clear();
        in_flight_ = true;
        body(f.body, s);
      }
      in_flight_ = in_flight_ || entry;
      out_ = saved;
      out_->push_back(mk(std::move(n), st.loc));
      forget_int_lets(f.body);
      return;
    }
    if (!lo || !hi)
      throw Fail{st.loc, "cannot decide the bounds of the loop over '" + f.var + "' at a grid point"};
    constexpr std::int64_t kMaxTrips = 4096;
    std::int64_t trips = 0;
    if (__builtin_sub_overflow(*hi, *lo, &trips)) trips = *hi > *lo ? kMaxTrips + 1 : 0;
    if (trips > kMaxTrips)
      throw Fail{st.loc, "the loop over '" + f.var + "' runs more than " + std::to_string(kMaxTrips) +
                             " iterations at a grid point, the most the lowering unrolls"};
    const auto outer = env_.find(f.var);
    const bool shadows = outer != env_.end();
    const std::int64_t saved = shadows ? outer->second : 0;
    for (std::int64_t v = *lo; v < *hi; ++v) {
      env_[f.var] = v;
      body(f.body, s);
    }
    if (shadows)
      env_[f.var] = saved;
    else
      env_.erase(f.var);
  }

  // `while cond, bound=n:` stays a while loop in the rolled program (its
  // trip count is decided at run time, by the stepper that the checker and
  // the executor share). The unrolled form decides it at each grid point, as
  // it decides a `when`: the body once per iteration while cond holds, and a
  // run past the bound is the stepper's error.
  void while_loop(const For &f, const Stmt &st, std::int64_t s) {
    const auto bound = eval_int(rewrite(f.hi, s), int_lets_);
    if (!bound) throw Fail{f.hi.loc, "cannot decide the bound of the while loop at a grid point"};
    const Expr &cond = while_cond(f);
    const Block &b = while_body(f);
    if (rolled_) {
      forget_int_lets(b);
      Block inner;
      Block *saved = out_;
      const bool entry = in_flight_;
      out_ = &inner;
      body(b, s);
      if (in_flight_ && !entry) {
        // A wgmma may be in flight from one iteration into the next.
        inner.clear();
        in_flight_ = true;
        body(b, s);
      }
      in_flight_ = in_flight_ || entry;
      out_ = saved;
      out_->push_back(
          mk(make_while(fold(rewrite(cond, s)), Expr::integer(*bound, f.hi.loc), std::move(inner), st.loc),
             st.loc));
      forget_int_lets(b);
      return;
    }
    for (std::int64_t v = 0;; ++v) {
      const auto c = eval_int(fold(rewrite(cond, s)), int_lets_);
      if (!c) throw Fail{cond.loc, "cannot decide '" + print(cond) + "' at a grid point"};
      if (*c == 0) return;
      if (v >= *bound) throw Fail{st.loc, while_bound_message(st.loc, std::max<std::int64_t>(*bound, 0))};
      body(b, s);
    }
  }

  // A body DMA becomes the program's primitive on the same places: a
  // descriptor's refs are those of its binding, rewritten where it is used.
  void dma(const Dma &d, const Stmt &st, std::int64_t s) {
    if (gpu_) throw Fail{st.loc, "DMAs on semaphores in a kernel body need a TPU target"};
    if (d.action == DmaAction::bind) {
      descriptors_[d.descriptor] = d;
      return;
    }
    Dma n = d;
    if (!d.descriptor.empty()) {
      auto it = descriptors_.find(d.descriptor);
      if (it == descriptors_.end()) throw Fail{st.loc, "'" + d.descriptor + "' is no DMA descriptor"};
      n.src = it->second.src;
      n.dst = it->second.dst;
      n.sem = it->second.sem;
    }
    n.descriptor.clear();
    n.method = false;
    if (n.action == DmaAction::wait) n.src = Expr::leaf(Op::None, st.loc);
    // A program subscript is a slice, not ds(start, size): the same elements.
    std::function<Expr(const Expr &)> slices = [&](const Expr &in) {
      Expr e = in.map_args(slices);
      if (e.op == Op::Call && e.name == "ds" && e.args.size() == 2 && e.kwarg_names.empty())
        return Expr::binary(Op::Slice, e.args[0], fold(Expr::binary(Op::Add, e.args[0], e.args[1], e.loc)),
                            e.loc);
      return e;
    };
    for (Expr *e : {&n.src, &n.dst, &n.sem, &n.n})
      if (e->op != Op::None) *e = slices(fold(rewrite(*e, s)));
    // A whole semaphore array of rank 0 is named alone, not `sem[...]`.
    if (n.sem.op == Op::Ref && n.sem.args.size() == 1 && n.sem.args[0].op == Op::Ellipsis)
      n.sem = Expr::var(n.sem.name, n.sem.loc);
    out_->push_back(mk(n, st.loc));
  }

  void body(const Block &b, std::int64_t s) {
    std::set<std::string> lets; // the locals bound so far in b
    for (auto &st : b) {
      if (const auto *l = std::get_if<Let>(&st.kind)) lets.insert(l->name);
      if (auto *i = std::get_if<If>(&st.kind)) {
        Expr c = fold(rewrite(i->cond, s));
        auto v = eval_int(c, int_lets_);
        if (v) {
          const Block &taken = *v ? i->then_body : i->else_body;
          // A decided `when` that rebinds a local bound before it stays a
          // block, `if 1:`, so that it discards the old value as the rolled
          // program's does (spec::local_discards).
          const bool rebinds = std::any_of(taken.begin(), taken.end(), [&](const Stmt &t) {
            const auto *l = std::get_if<Let>(&t.kind);
            return l && lets.count(l->name);
          });
          if (!rebinds) {
            body(taken, s);
            continue;
          }
          If n{false, Expr::integer(*v ? 1 : 0, i->cond.loc), {}, {}};
          Block *saved = out_;
          out_ = *v ? &n.then_body : &n.else_body;
          body(taken, s);
          out_ = saved;
          out_->push_back(mk(n, st.loc));
          continue;
        }
        if (!rolled_) throw Fail{st.loc, "cannot decide '" + print(i->cond) + "' at a grid point"};
        // The rolled form decides at run time; a wgmma may be in flight after
        // the `if` when it may be after either branch.
        If n{false, c, {}, {}};
        Block *saved = out_;
        const bool entry = in_flight_;
        out_ = &n.then_body;
        body(i->then_body, s);
        const bool after_then = in_flight_;
        in_flight_ = entry;
        out_ = &n.else_body;
        body(i->else_body, s);
        in_flight_ = in_flight_ || after_then;
        out_ = saved;
        // (A `when` that held only what the program drops, a commit_smem(), is no statement.)
        if (!n.then_body.empty() || !n.else_body.empty()) out_->push_back(mk(n, st.loc));
        // Which branch ran is decided at run time: what they bound is unknown.
        forget_int_lets(i->then_body);
        forget_int_lets(i->else_body);
        continue;
      }
      if (auto *a = std::get_if<Assign>(&st.kind)) {
        Expr t = rewrite(a->target, s), v = rewrite(a->value, s);
        // A store names its target as a ref: a whole hbm array is `o[...]`.
        if (t.op == Op::Name) t = Expr::ref(t.name, {Expr::leaf(Op::Ellipsis)}, t.loc);
        if (gpu_ && a->accumulate && a->value.op == Op::Call && a->value.name == "dot" &&
            a->value.num_positional() == 2 && find(a->target.name) && find(a->target.name)->acc) {
          Wgmma w;
          w.acc = Expr::var(a->target.name, a->target.loc);
          w.a = v.args[0];
          w.b = v.args[1];
          auto flag = [&](const char *k) {
            const Expr *x = v.kwarg(k);
            return x && bool_literal(*x).value_or(false);
          };
          w.trans_a = flag("trans_a");
          w.trans_b = flag("trans_b");
          out_->push_back(mk(w, st.loc));
          out_->push_back(mk(WgmmaWait{Expr::integer(1)}, st.loc));
          in_flight_ = true;
          continue;
        }
        if (gpu_ && in_flight_ && (reads_acc(a->target) || reads_acc(a->value))) {
          out_->push_back(mk(WgmmaWait{Expr::integer(0)}, st.loc));
          in_flight_ = false;
        }
        Stmt n = st;
        n.kind = Assign{t, a->accumulate, v};
        n.comments = {};
        out_->push_back(n);
        continue;
      }
      if (auto *l = std::get_if<Let>(&st.kind)) {
        if (gpu_ && in_flight_ && reads_acc(l->value)) {
          out_->push_back(mk(WgmmaWait{Expr::integer(0)}, st.loc));
          in_flight_ = false;
        }
        Stmt n = st;
        n.kind = Let{l->name, rewrite(l->value, s)};
        n.comments = {};
        // An integer local the unrolled form decides (`chunks = n // bs`) may
        // bound a loop or guard a `when` below.
        if (auto v = rolled_ ? std::nullopt : eval_int(std::get<Let>(n.kind).value, int_lets_))
          int_lets_[l->name] = *v;
        else
          int_lets_.erase(l->name);
        out_->push_back(n);
        continue;
      }
      if (auto *f = std::get_if<For>(&st.kind)) {
        loop(*f, st, s);
        continue;
      }
      if (auto *d = std::get_if<Dma>(&st.kind)) {
        dma(*d, st, s);
        continue;
      }
      if (auto *e = std::get_if<EmitPipeline>(&st.kind)) {
        nested(*e, st, s);
        continue;
      }
      // plgpu.commit_smem: a fence, no value (the spec rules check it).
      if (std::holds_alternative<CommitSmem>(st.kind)) continue;
      throw Fail{st.loc, "unsupported statement in a kernel body"};
    }
  }

  // A nested emit_pipeline at outer step s: the inner pipeline as a kernel
  // of its own (its grid, its specs over the kernel's any operands, its
  // body; the outer params, loop variables and integer locals as fixed
  // params), lowered by this same emitter, its statements spliced here and
  // its VMEM rings declared once in the kernel's program.
  void nested(const EmitPipeline &e, const Stmt &st, std::int64_t s) {
    if (gpu_ || parent_)
      throw Fail{st.loc, "not supported: an emit_pipeline here (TPU kernels, one level of nesting)"};
    KernelSpec in;
    in.name = k_.name;
    in.loc = st.loc;
    std::set<std::string> seen;
    auto add_param = [&](const std::string &n, std::int64_t v) {
      if (!seen.insert(n).second) return;
      Param p;
      p.name = n;
      p.value = lit(v);
      p.loc = st.loc;
      in.params.push_back(p);
    };
    for (auto &[n, v] : env_)
      add_param(n, v);
    for (auto &[n, v] : int_lets_)
      add_param(n, v);
    in.grid = e.grid;
    in.grid_loc = st.loc;
    if (auto *t = k_.setting("target")) in.settings.push_back(*t);
    for (const auto &spec : e.specs) {
      const Operand *outer = k_.operand(spec.name);
      if (!outer) throw Fail{spec.loc, "'" + spec.name + "' is no operand of '" + k_.name + "'"};
      Operand o = spec;
      o.dtype = outer->dtype;
      o.shape = outer->shape;
      o.memory_space = MemorySpace::vmem;
      in.operands.push_back(std::move(o));
    }
    in.body = e.body;
    LowerOptions io;
    io.target = o_.target;
    io.check_blocks = o_.check_blocks;
    Emitter inner(in, io);
    inner.parent_ = this;
    inner.parent_step_ = s;
    // The inner program's state names avoid every name of the kernel's
    // (used_: setup_operands) and its buffers but the rings of the pipelines
    // at earlier outer steps, which this one names again.
    inner.used_ = used_;
    for (auto &b : prog_.buffers)
      if (std::none_of(nested_bindings_.begin(), nested_bindings_.end(),
                       [&](const BufferBinding &n) { return n.window == b.name; }))
        inner.used_.insert(b.name);
    Lowered l = inner.run();
    for (auto &b : l.program.buffers) {
      if (b.kind == BufferKind::hbm) continue; // the kernel's any operand
      if (const Buffer *have = prog_.buffer(b.name)) {
        if (!(*have == b))
          throw Fail{st.loc, "the emit_pipeline's buffer '" + b.name + "' has the name of another buffer"};
        continue;
      }
      prog_.buffers.push_back(b);
    }
    for (auto &x : l.bindings) {
      BufferBinding nb{x.operand, x.role, "", x.window};
      if (!x.window.empty() &&
          std::find(nested_bindings_.begin(), nested_bindings_.end(), nb) == nested_bindings_.end())
        nested_bindings_.push_back(nb);
    }
    for (auto &stmt : l.program.body)
      out_->push_back(std::move(stmt));
  }

  // ------------------------------------------------------------------ TPU

  /// emit_pipeline's Scheduler (pallas-facts.md section 1), one step at a time.
  void emit_tpu() {
    out_ = &prog_.body;
    struct InState {
      std::vector<std::int64_t> unit_start; // first step of each unit
      std::vector<std::int64_t> unit_of;    // unit of each step
      std::int64_t issued = 0;
    };
    std::map<std::string, InState> ins;
    std::map<std::string, std::int64_t> out_unit;
    std::map<std::string, std::set<std::vector<std::int64_t>>> visited;
    for (auto &x : ops_) {
      if (!x.windowed || x.op->role != Role::in) continue;
      InState st;
      for (std::int64_t s = 0; s < steps_; ++s) {
        if (changed(x, s)) st.unit_start.push_back(s);
        st.unit_of.push_back(static_cast<std::int64_t>(st.unit_start.size()) - 1);
      }
      ins[x.op->name] = st;
    }
    auto issue = [&](Opnd &x, InState &st) {
      std::int64_t u = st.issued++;
      in_start(x, st.unit_start[u], u % x.buffers);
    };
    if (steps_ == 0) return;
    // Prologue: the units of steps 0..B-2.
    for (auto &x : ops_) {
      if (!ins.count(x.op->name)) continue;
      auto &st = ins[x.op->name];
      for (std::int64_t t = 0; t <= x.buffers - 2 && t < steps_; ++t)
        if (changed(x, t)) issue(x, st);
    }
    for (std::int64_t s = 0; s < steps_; ++s) {
      // 1. copy_in: prefetch the block of step s + B - 1 (lookahead: every
      //    unit up to B - 1 ahead of the current one).
      for (auto &x : ops_) {
        if (!ins.count(x.op->name)) continue;
        auto &st = ins[x.op->name];
        if (x.op->pipeline_mode.lookahead) {
          std::int64_t limit = st.unit_of[s] + x.buffers - 1;
          while (st.issued <= limit && st.issued < static_cast<std::int64_t>(st.unit_start.size()))
            issue(x, st);
        } else {
          std::int64_t t = s + x.buffers - 1;
          if (t < steps_ && t > x.buffers - 2 && changed(x, t)) issue(x, st);
        }
        // The slot must have been issued by now (B = 1 issues it just above).
        assert(st.issued > st.unit_of[s]);
      }
      // 2. wait_in on a change.
      for (auto &x : ops_) {
        if (!ins.count(x.op->name)) continue;
        auto &st = ins[x.op->name];
        if (changed(x, s)) in_wait(x, st.unit_of[s] % x.buffers);
        cur_slot_[x.op->name] = lit(st.unit_of[s] % x.buffers);
      }
      // Outputs: the slot of the current unit; revisit=any copies a block
      // visited before back in, Triton every block (what its stores do not
      // reach keeps the array's contents).
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::out) continue;
        if (changed(x, s) && s > 0) ++out_unit[x.op->name];
        std::int64_t k = out_unit[x.op->name] % x.buffers;
        cur_slot_[x.op->name] = lit(k);
        if (changed(x, s)) {
          bool again = !visited[x.op->name].insert(x.blk[s]).second;
          if ((again && x.op->pipeline_mode.revisit == Revisit::any) || triton_) {
            copy(CopyKind::in_start, region(x, s), slot(x, k), x.op->loc);
            copy(CopyKind::in_wait, Expr::leaf(Op::None), slot(x, k), x.op->loc);
          }
        }
      }
      // 3. the body.
      int_lets_.clear();
      body(k_.body, s);
      // 4. copy_out when the next block differs or at the last step;
      // 5. wait for the previous block's write-back on a change.
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::out) continue;
        std::int64_t u = out_unit[x.op->name];
        if (s == steps_ - 1 || changed(x, s + 1)) {
          out_start(x, s, u % x.buffers);
          if (x.buffers == 1) out_wait(x, 0);
        }
        if (x.buffers > 1 && s > 0 && changed(x, s)) out_wait(x, (u - 1) % x.buffers);
      }
      mark_step(s);
    }
    // Epilogue: the final write-backs.
    for (auto &x : ops_)
      if (x.windowed && x.op->role == Role::out && x.buffers > 1)
        out_wait(x, out_unit[x.op->name] % x.buffers);
  }

  // ------------------------------------------------------------------ GPU

  /// A CTA after the first starts with shared memory of its own: every slot
  /// ring and every SMEM scratch but the scalar state is undefined again
  /// (the previous CTA's contents are no data of this one's), as the oracle
  /// makes them. Nothing is in flight then: the previous CTA drained.
  void discard_cta_memory(Loc l) {
    const std::set<std::string> state = state_scratches(k_);
    auto discard = [&](Expr target) {
      push(mk(Assign{std::move(target), false, Expr::leaf(Op::Undefined)}, l));
    };
    for (auto &x : ops_) {
      if (x.windowed && x.op->role != Role::scratch) {
        for (std::int64_t k = 0; k < x.buffers; ++k)
          discard(slot(x, k));
      } else if (x.op->role == Role::scratch && !x.acc && x.op->sem == SemKind::none &&
                 !state.count(x.op->name)) {
        discard(Expr::ref(x.op->name, {Expr::leaf(Op::Ellipsis)}));
      }
    }
  }

  /// Mosaic GPU: one emit_pipeline per CTA over the CTA's own steps, each
  /// with its own slot counters, SMEM and ACC (docs/lowering.md).
  void emit_gpu() {
    out_ = &prog_.body;
    if (steps_ == 0) return;
    const std::int64_t n = cta_steps(grid_, cta_);
    for (std::int64_t base = 0; base < steps_; base += n)
      emit_cta(base, n);
  }

  /// The CTA whose pipeline runs steps base..base+n-1 (pallas-facts.md section 2).
  void emit_cta(std::int64_t base, std::int64_t n) {
    std::int64_t d = 0;
    if (auto *s = k_.setting("delay_release")) d = ev(s->value, env_);
    // plgpu.ACC starts at zero in every CTA; stated here so that the checker
    // and the executor agree by construction.
    for (auto &x : ops_)
      if (x.acc) {
        Assign z{Expr::ref(x.op->name, {Expr::leaf(Op::Ellipsis)}), false, Expr::leaf(Op::Zeros)};
        out_->push_back(mk(z, x.op->loc));
      }
    if (base > 0) discard_cta_memory(k_.loc);
    // In-flight copy-outs: operand, slot, and the step that started it.
    struct Out {
      Opnd *x;
      std::int64_t slot, step;
    };
    std::deque<Out> outs;
    bool copies_out_in_loop = false;
    for (auto &x : ops_)
      if (x.windowed && x.op->role == Role::out && !x.invariant) copies_out_in_loop = true;
    for (auto &x : ops_)
      if (x.windowed && x.op->role == Role::in)
        for (std::int64_t t = 0; t < x.buffers && t < n; ++t)
          in_start(x, base + t, t % x.buffers);
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t s = base + t;
      for (auto &x : ops_) {
        if (!x.windowed) continue;
        std::int64_t k = t % x.buffers;
        cur_slot_[x.op->name] = lit(k);
        if (x.op->role == Role::in) in_wait(x, k);
      }
      // wait_smem_to_gmem(M - 1): every step commits one bulk async-group
      // (empty where it copies nothing out), and at most the M - 1 most
      // recent stay pending: the copy-outs of steps t - M and before are
      // done, so the slot about to be written is free.
      if (copies_out_in_loop) {
        for (auto it = outs.begin(); it != outs.end();) {
          if (it->step <= t - it->x->buffers) {
            // One slot, the block staying in it (copied out at its first
            // step, mid-visit): the TMA store leaves the slot as it was.
            const bool keep = it->x->buffers == 1 && t > 0 && it->x->blk[s] == it->x->blk[s - 1];
            out_wait(*it->x, it->slot, keep);
            it = outs.erase(it);
          } else {
            ++it;
          }
        }
      }
      int_lets_.clear();
      body(k_.body, s);
      // Outputs whose block moves: on the first visit of each block (the
      // block differs from step t-1's) and at the last step.
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::out || x.invariant) continue;
        if (t == 0 || x.blk[s] != x.blk[s - 1] || t == n - 1) {
          if (in_flight_) {
            out_->push_back(mk(WgmmaWait{Expr::integer(0)}, x.op->loc));
            in_flight_ = false;
          }
          out_start(x, s, t % x.buffers);
          outs.push_back({&x, t % x.buffers, t});
        }
      }
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::in) continue;
        std::int64_t fetch = t + x.buffers - d;
        if (t >= d && fetch < n && fetch >= x.buffers) in_start(x, base + fetch, fetch % x.buffers);
      }
      mark_step(s);
    }
    if (in_flight_) {
      out_->push_back(mk(WgmmaWait{Expr::integer(0)}, k_.loc));
      in_flight_ = false;
    }
    // Outputs fixed within the CTA: stored once, from the last step's slot.
    for (auto &x : ops_) {
      if (!x.windowed || x.op->role != Role::out || !x.invariant) continue;
      std::int64_t k = (n - 1) % x.buffers;
      out_start(x, base + n - 1, k);
      outs.push_back({&x, k, n - 1});
    }
    // Every write-back waited: each moving output's in start order, then the
    // outputs stored after the loop (the order the rolled form drains them).
    for (auto &x : ops_)
      for (auto &o : outs)
        if (o.x == &x && !x.invariant) out_wait(x, o.slot);
    for (auto &x : ops_)
      for (auto &o : outs)
        if (o.x == &x && x.invariant) out_wait(x, o.slot);
    mark_step(base + n - 1); // what follows the loop belongs to the CTA's last step
  }

  // ------------------------------------------------------------- rolled form

  /// Lookahead and revisit=any need the future or past of the whole grid
  /// (the next index changes, the set of visited blocks), which scalar state
  /// cannot carry: such kernels are lowered unrolled.
  bool needs_unroll() { return lowers_unrolled(k_, gpu_, &unroll_reason_); }

  /// A name for the program's own state that no buffer, param or body
  /// local already has.
  std::string fresh(std::string base) {
    while (used_.count(base))
      base += "_";
    used_.insert(base);
    return base;
  }

  /// The coordinate of grid axis `a` at the step `T` of the run order.
  Expr coord(std::size_t a, const Expr &T) const {
    const std::int64_t n = gpu_ ? cta_steps(grid_, cta_) : steps_;
    const bool is_cta = a < cta_.size() && cta_[a];
    // The CTA index and the step within the CTA (TPU: no CTA axes).
    Expr r = is_cta ? bin(Op::FloorDiv, T, lit(n)) : (n == steps_ ? T : bin(Op::Mod, T, lit(n)));
    std::int64_t stride = 1;
    bool first = true;
    for (std::size_t b = 0; b < grid_.size(); ++b) {
      if ((b < cta_.size() && cta_[b]) != is_cta) continue;
      if (b < a) first = false;
      if (b > a) stride = saturating_mul(stride, grid_[b]);
    }
    Expr c = bin(Op::FloorDiv, r, lit(stride));
    return first ? c : bin(Op::Mod, c, lit(grid_[a]));
  }

  /// The block index of `x` at the step whose coordinates are `coords`.
  std::vector<Expr> block_at(const Opnd &x, const std::vector<Expr> &coords) const {
    std::map<std::string, Expr> sub;
    for (std::size_t a = 0; a < x.bo->index_params.size() && a < coords.size(); ++a)
      sub[x.bo->index_params[a]] = coords[a];
    std::vector<Expr> out;
    for (auto &e : x.bo->index)
      out.push_back(fold(grid_calls(substitute(e, sub), coords)));
    return out;
  }
  Expr grid_calls(const Expr &e, const std::vector<Expr> &coords) const {
    if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1) {
      auto a = eval_int(e.args[0], env_);
      if (a && *a >= 0 && *a < static_cast<std::int64_t>(grid_.size()))
        return e.name == "program_id" ? coords[*a] : lit(grid_[*a]);
    }
    return e.map_args([&](const Expr &arg) { return grid_calls(arg, coords); });
  }
  std::vector<Expr> coords_at(const Expr &T) const {
    std::vector<Expr> c;
    for (std::size_t a = 0; a < grid_.size(); ++a)
      c.push_back(coord(a, T));
    return c;
  }
  std::vector<Expr> pid_coords() const {
    std::vector<Expr> c;
    for (auto &p : pid_)
      c.push_back(Expr::var(p));
    return c;
  }

  /// The hbm region of block `b` of `x` (a slice per blocked dim, clipped to
  /// the array where the dim is ragged; the whole array when it is one block).
  HbmRegion region_of(const Opnd &x, const std::vector<Expr> &b) const {
    bool whole = true;
    std::vector<Expr> subs;
    std::vector<Expr> at(x.shape.size(), lit(0));
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      if (!x.block[d]) {
        subs.push_back(b[d]);
        whole = false;
        continue;
      }
      const std::int64_t bs = *x.block[d];
      const bool element = x.bo && x.bo->element[d];
      if (bs == x.shape[d] && is_int(b[d], 0) && !element) {
        subs.push_back(Expr::binary(Op::Slice, Expr::leaf(Op::None), Expr::leaf(Op::None)));
        continue;
      }
      whole = false;
      Expr lo = bin(Op::Mul, b[d], lit(bs));
      Expr hi = bin(Op::Add, lo, lit(bs));
      if (x.shape[d] % bs != 0) hi = fold(Expr::call("min", {hi, lit(x.shape[d])}));
      if (element) {
        // pl.Element: an element offset into the padded dim (see region()):
        // a window that starts in the low padding copies from element 0,
        // landing `pad_lo - b` elements into the slot.
        // (A window past the padded dim keeps its slice out of bounds.)
        // (A window wholly in the padding copies nothing: region().)
        const std::int64_t pad_lo = x.bo->pad_lo[d], pad_hi = x.bo->pad_hi[d];
        lo = bin(Op::Sub, b[d], lit(pad_lo));
        hi = bin(Op::Add, lo, lit(bs));
        const Expr hi0 = hi;
        if (pad_lo > 0) {
          at[d] = fold(
              Expr::call("min", {Expr::call("max", {bin(Op::Sub, lit(pad_lo), b[d]), lit(0)}), lit(bs)}));
          const Expr in_padded = bin(Op::Ge, b[d], lit(0));
          lo = fold(Expr::call("where", {in_padded, Expr::call("max", {lo, lit(0)}), lo}));
          hi = fold(Expr::call("where", {in_padded, Expr::call("max", {hi, lit(0)}), hi}));
        }
        if (pad_hi > 0) {
          const Expr in_padded = bin(Op::Le, hi0, lit(x.shape[d] + pad_hi));
          hi = fold(Expr::call("where", {in_padded, Expr::call("min", {hi, lit(x.shape[d])}), hi}));
          lo = fold(Expr::call("where", {in_padded, Expr::call("min", {lo, lit(x.shape[d])}), lo}));
        }
      }
      subs.push_back(Expr::binary(Op::Slice, lo, hi));
    }
    if (whole) return {Expr::var(x.hbm)};
    return {Expr::ref(x.hbm, subs), slot_offset(x, at)};
  }

  Expr ring(const Opnd &x, Expr k) const { return Expr::ref(x.window, {fold(std::move(k))}); }
  void push(Stmt st) { out_->push_back(std::move(st)); }
  void let(const std::string &n, Expr v, Loc l = {}) { push(mk(Let{n, fold(std::move(v))}, l)); }
  /// Appends `if cond:` (inlined when cond folds to a constant) and returns
  /// the block to fill; restore out_ afterwards.
  Block *open_if(Expr cond, Loc l) {
    cond = fold(std::move(cond));
    if (cond.op == Op::Int) {
      if (cond.int_value) return out_;
      dead_.emplace_back();
      return &dead_.back();
    }
    push(mk(If{false, cond, {}, {}}, l));
    return &std::get<If>(out_->back().kind).then_body;
  }
  /// `a[0] != b[0] or a[1] != b[1] or ...` (0 when there are no dims).
  static Expr differs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    Expr c = lit(0);
    for (std::size_t d = 0; d < a.size(); ++d)
      c = bin(Op::Or, c, bin(Op::Ne, a[d], b[d]));
    return c;
  }
  std::vector<Expr> vars(const std::vector<std::string> &names) const {
    std::vector<Expr> v;
    for (auto &n : names)
      v.push_back(Expr::var(n));
    return v;
  }
  /// Per-operand state names, `<operand>_<what><dim>`.
  std::vector<std::string> fresh_dims(const Opnd &x, const std::string &what) {
    std::vector<std::string> v;
    for (std::size_t d = 0; d < x.shape.size(); ++d)
      v.push_back(fresh(x.op->name + "_" + what + std::to_string(d)));
    return v;
  }
  bool mentions_pid(const std::vector<Expr> &b) const {
    for (auto &e : b)
      for (auto &p : pid_)
        if (mentions(e, p)) return true;
    return false;
  }

  void start_rolled() {
    out_ = &prog_.body;
    // (The kernel's own names are taken since setup_operands.)
    for (auto &b : prog_.buffers)
      used_.insert(b.name);
    step_var_ = fresh("s");
    for (std::size_t a = 0; a < grid_.size(); ++a)
      pid_.push_back(fresh("pid" + std::to_string(a)));
  }

  /// Emits the loop body twice when a wgmma may be in flight from one step
  /// into the next: the second pass starts with it in flight.
  template <class F> void loop_body(Block &into, F emit_step) {
    Block first;
    out_ = &first;
    in_flight_ = false;
    emit_step();
    if (in_flight_) {
      Block second;
      out_ = &second;
      in_flight_ = true;
      emit_step();
      into = std::move(second);
    } else {
      into = std::move(first);
    }
  }

  void open_main_loop(Block *&loop_body_out) {
    For f;
    f.var = step_var_;
    f.lo = lit(0);
    f.hi = lit(steps_);
    main_loop_ = static_cast<int>(prog_.body.size());
    prog_.body.push_back(mk(std::move(f), k_.loc));
    loop_body_out = &std::get<For>(prog_.body.back().kind).body;
  }

  /// The rolled TPU Scheduler: the same schedule as emit_tpu, as a loop over
  /// the steps carrying each operand's previous block and slot counters.
  void emit_tpu_rolled() {
    start_rolled();
    if (steps_ == 0) return;
    const Expr s = Expr::var(step_var_);
    struct St {
      Opnd *x;
      std::string unit, issued;
      std::vector<std::string> cur, prev, ahead;
      std::string isnew;
    };
    std::vector<St> ins, outs;
    for (auto &x : ops_) {
      if (!x.windowed || x.op->role == Role::scratch) continue;
      St st{&x, fresh(x.op->name + "_unit"), "", {}, {}, {}, ""};
      if (x.op->role == Role::in) st.issued = fresh(x.op->name + "_issued");
      st.cur = fresh_dims(x, "b");
      st.prev = fresh_dims(x, "prev");
      if (x.op->role == Role::in) st.ahead = fresh_dims(x, "next");
      st.isnew = fresh(x.op->name + "_new");
      (x.op->role == Role::in ? ins : outs).push_back(st);
    }
    // State: each operand's unit counter and previous block index.
    for (auto *v : {&ins, &outs})
      for (auto &st : *v) {
        let(st.unit, lit(-1), st.x->op->loc);
        for (auto &p : st.prev)
          let(p, lit(0), st.x->op->loc);
      }
    // Prologue: each input issues the units that start at steps 0..B-2.
    for (auto &st : ins) {
      Opnd &x = *st.x;
      std::int64_t issued = 0;
      for (std::int64_t t = 0; t <= x.buffers - 2 && t < steps_; ++t) {
        auto b = block_at(x, coords_at(lit(t)));
        bool changed = t == 0 || fold(differs(b, block_at(x, coords_at(lit(t - 1))))).int_value != 0;
        if (changed) copy(CopyKind::in_start, region_of(x, b), ring(x, lit(issued++ % x.buffers)), x.op->loc);
      }
      let(st.issued, lit(issued), x.op->loc);
    }
    Block *body_block = nullptr;
    open_main_loop(body_block);
    loop_body(*body_block, [&] {
      for (std::size_t a = 0; a < grid_.size(); ++a)
        let(pid_[a], coord(a, s));
      // 1. prefetch the block of step s + B - 1 when it starts a unit.
      for (auto &st : ins) {
        Opnd &x = *st.x;
        const std::int64_t B = x.buffers;
        Expr t = bin(Op::Add, s, lit(B - 1));
        Block *saved = out_;
        out_ = open_if(bin(Op::Lt, t, lit(steps_)), x.op->loc);
        auto nb = block_at(x, coords_at(t));
        for (std::size_t d = 0; d < nb.size(); ++d)
          let(st.ahead[d], nb[d], x.op->loc);
        Expr starts = differs(vars(st.ahead), block_at(x, coords_at(bin(Op::Sub, t, lit(1)))));
        if (B == 1) starts = bin(Op::Or, bin(Op::Eq, s, lit(0)), starts);
        out_ = open_if(starts, x.op->loc);
        copy(CopyKind::in_start, region_of(x, vars(st.ahead)),
             ring(x, bin(Op::Mod, Expr::var(st.issued), lit(B))), x.op->loc);
        let(st.issued, bin(Op::Add, Expr::var(st.issued), lit(1)), x.op->loc);
        out_ = saved;
      }
      // 2. inputs wait when their block changes; then the outputs' units.
      for (auto *v : {&ins, &outs})
        for (auto &st : *v) {
          Opnd &x = *st.x;
          auto b = block_at(x, pid_coords());
          for (std::size_t d = 0; d < b.size(); ++d)
            let(st.cur[d], b[d], x.op->loc);
          Expr isnew = bin(Op::Eq, s, lit(0));
          if (mentions_pid(b)) isnew = bin(Op::Or, isnew, differs(vars(st.cur), vars(st.prev)));
          if (triton_ && x.op->role == Role::out) isnew = lit(1); // every program its own visit
          let(st.isnew, isnew, x.op->loc);
          Block *saved = out_;
          out_ = open_if(Expr::var(st.isnew), x.op->loc);
          let(st.unit, bin(Op::Add, Expr::var(st.unit), lit(1)), x.op->loc);
          if (x.op->role == Role::in) in_wait_at(x, bin(Op::Mod, Expr::var(st.unit), lit(x.buffers)));
          if (x.op->role == Role::out && triton_) { // Triton: the array's block, read back (one slot)
            copy(CopyKind::in_start, region_of(x, vars(st.cur)), ring(x, lit(0)), x.op->loc);
            in_wait_at(x, lit(0));
          }
          out_ = saved;
          cur_slot_[x.op->name] = fold(bin(Op::Mod, Expr::var(st.unit), lit(x.buffers)));
        }
      // 3. the body.
      body(k_.body, 0);
      // 4. write-back when the next step's block differs or at the last
      //    step; 5. wait for the previous block's write-back on a change.
      for (auto &st : outs) {
        Opnd &x = *st.x;
        Expr next = bin(Op::Add, s, lit(1));
        Expr last = bin(Op::Eq, s, lit(steps_ - 1));
        Block *saved = out_;
        Expr ends = bin(Op::Or, last, differs(block_at(x, coords_at(next)), vars(st.cur)));
        if (triton_) ends = lit(1);
        out_ = open_if(ends, x.op->loc);
        copy(CopyKind::out_start, ring(x, cur_slot_[x.op->name]), region_of(x, vars(st.cur)), x.op->loc);
        if (x.buffers == 1) out_wait(x, 0);
        out_ = saved;
        if (x.buffers > 1) {
          out_ = open_if(bin(Op::And, bin(Op::Gt, s, lit(0)), Expr::var(st.isnew)), x.op->loc);
          copy(CopyKind::out_wait,
               ring(x, bin(Op::Mod, bin(Op::Sub, Expr::var(st.unit), lit(1)), lit(x.buffers))),
               Expr::leaf(Op::None), x.op->loc);
          out_ = saved;
        }
      }
      // The previous block, for the next step.
      for (auto *v : {&ins, &outs})
        for (auto &st : *v)
          for (std::size_t d = 0; d < st.cur.size(); ++d)
            let(st.prev[d], Expr::var(st.cur[d]), st.x->op->loc);
    });
    out_ = &prog_.body;
    // Epilogue: the final write-backs.
    for (auto &st : outs)
      if (st.x->buffers > 1)
        copy(CopyKind::out_wait, ring(*st.x, bin(Op::Mod, Expr::var(st.unit), lit(st.x->buffers))),
             Expr::leaf(Op::None), st.x->op->loc);
  }

  void in_wait_at(const Opnd &x, Expr k) {
    copy(CopyKind::in_wait, Expr::leaf(Op::None), ring(x, std::move(k)), x.op->loc);
  }

  /// The rolled Mosaic GPU pipeline: the loop runs the steps CTA by CTA; a
  /// CTA's prologue is issued at its first step and its stores and drains at
  /// its last. Each moving output keeps its in-flight write-backs' slots in
  /// a queue of M scalars (oldest first).
  void emit_gpu_rolled() {
    start_rolled();
    if (steps_ == 0) return;
    const std::int64_t n = cta_steps(grid_, cta_);
    std::int64_t d = 0;
    if (auto *st = k_.setting("delay_release")) d = ev(st->value, env_);
    const Expr s = Expr::var(step_var_);
    const std::string tname = fresh("t");
    const Expr t = Expr::var(tname);
    struct Q {
      Opnd *x;
      std::string count;
      std::vector<std::string> q, at, cur, prev; // in-flight slots and the steps that started them
    };
    std::vector<Q> moving;
    bool any_moving = false;
    for (auto &x : ops_)
      if (x.windowed && x.op->role == Role::out && !x.invariant) {
        Q q{&x, fresh(x.op->name + "_pending"), {}, {}, fresh_dims(x, "b"), fresh_dims(x, "prev")};
        for (std::int64_t k = 0; k < x.buffers; ++k) {
          q.q.push_back(fresh(x.op->name + "_q" + std::to_string(k)));
          q.at.push_back(fresh(x.op->name + "_at" + std::to_string(k)));
        }
        moving.push_back(q);
        any_moving = true;
      }
    for (auto &q : moving) {
      let(q.count, lit(0), q.x->op->loc);
      for (auto &v : q.q)
        let(v, lit(0), q.x->op->loc);
      for (auto &v : q.at)
        let(v, lit(0), q.x->op->loc);
      for (auto &v : q.prev)
        let(v, lit(0), q.x->op->loc);
    }
    Block *body_block = nullptr;
    open_main_loop(body_block);
    loop_body(*body_block, [&] {
      let(tname, n == steps_ ? s : bin(Op::Mod, s, lit(n)));
      for (std::size_t a = 0; a < grid_.size(); ++a)
        let(pid_[a], coord(a, s));
      Block *saved = out_;
      // A CTA starts: its ACC at zero, its prologue.
      {
        const bool entry = in_flight_;
        out_ = open_if(bin(Op::Eq, t, lit(0)), k_.loc);
        for (auto &x : ops_)
          if (x.acc) {
            Assign z{Expr::ref(x.op->name, {Expr::leaf(Op::Ellipsis)}), false, Expr::leaf(Op::Zeros)};
            push(mk(z, x.op->loc));
          }
        if (steps_ > n) {
          Block *cta = out_;
          out_ = open_if(bin(Op::Gt, s, lit(0)), k_.loc);
          discard_cta_memory(k_.loc);
          out_ = cta;
        }
        for (auto &x : ops_)
          if (x.windowed && x.op->role == Role::in)
            for (std::int64_t k = 0; k < x.buffers && k < n; ++k) {
              copy(CopyKind::in_start, region_of(x, block_at(x, coords_at(bin(Op::Add, s, lit(k))))),
                   ring(x, lit(k)), x.op->loc);
              zero_fill(x);
            }
        in_flight_ = entry;
        out_ = saved;
      }
      for (auto &x : ops_) {
        if (!x.windowed) continue;
        cur_slot_[x.op->name] = bin(Op::Mod, t, lit(x.buffers));
        if (x.op->role == Role::in) in_wait_at(x, cur_slot_[x.op->name]);
      }
      // wait_smem_to_gmem(M - 1): the copy-outs of steps t - M and before
      // are done (one bulk async-group per step, empty where it copies
      // nothing out). The oldest pending one is at least step t - M, as the
      // previous step retired the rest: at most one to retire.
      if (any_moving)
        for (auto &q : moving) {
          out_ = open_if(bin(Op::And, bin(Op::Gt, Expr::var(q.count), lit(0)),
                             bin(Op::Le, Expr::var(q.at[0]), bin(Op::Sub, t, lit(q.x->buffers)))),
                         q.x->op->loc);
          auto wait = [&](bool keep) {
            copy(CopyKind::out_wait, ring(*q.x, Expr::var(q.q[0])), Expr::leaf(Op::None), q.x->op->loc);
            std::get<Copy>(out_->back().kind).keep = keep;
          };
          if (q.x->buffers == 1) {
            // One slot, the block staying in it (copied out at its first
            // step, mid-visit): the TMA store leaves the slot as it was.
            const Expr moved = differs(block_at(*q.x, pid_coords()), vars(q.prev));
            Block *w = out_;
            out_ = open_if(Expr::unary(Op::Not, moved), q.x->op->loc);
            wait(true);
            out_ = w;
            out_ = open_if(moved, q.x->op->loc);
            wait(false);
            out_ = w;
          } else {
            wait(false);
          }
          for (std::size_t k = 0; k + 1 < q.q.size(); ++k) {
            let(q.q[k], Expr::var(q.q[k + 1]), q.x->op->loc);
            let(q.at[k], Expr::var(q.at[k + 1]), q.x->op->loc);
          }
          let(q.count, bin(Op::Sub, Expr::var(q.count), lit(1)), q.x->op->loc);
          out_ = saved;
        }
      body(k_.body, 0);
      // Moving outputs: copied on the first visit of a block within the CTA
      // and at its last step.
      for (auto &q : moving) {
        Opnd &x = *q.x;
        auto b = block_at(x, pid_coords());
        for (std::size_t dd = 0; dd < b.size(); ++dd)
          let(q.cur[dd], b[dd], x.op->loc);
        Expr cond = bin(Op::Or, bin(Op::Eq, t, lit(0)), differs(vars(q.cur), vars(q.prev)));
        cond = bin(Op::Or, cond, bin(Op::Eq, t, lit(n - 1)));
        out_ = open_if(cond, x.op->loc);
        if (in_flight_) {
          push(mk(WgmmaWait{lit(0)}, x.op->loc));
        }
        copy(CopyKind::out_start, ring(x, cur_slot_[x.op->name]), region_of(x, vars(q.cur)), x.op->loc);
        for (std::int64_t k = 0; k < x.buffers; ++k) {
          Block *o2 = out_;
          out_ = open_if(bin(Op::Eq, Expr::var(q.count), lit(k)), x.op->loc);
          let(q.q[static_cast<std::size_t>(k)], cur_slot_[x.op->name], x.op->loc);
          let(q.at[static_cast<std::size_t>(k)], t, x.op->loc);
          out_ = o2;
        }
        let(q.count, bin(Op::Add, Expr::var(q.count), lit(1)), x.op->loc);
        out_ = saved;
        // (a wgmma is not in flight after the `if` only where it was waited
        // on both paths; keep the conservative answer)
        for (std::size_t dd = 0; dd < q.cur.size(); ++dd)
          let(q.prev[dd], Expr::var(q.cur[dd]), x.op->loc);
      }
      // Refill: each input fetches step t + M - d into its slot.
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::in) continue;
        const std::int64_t ahead = x.buffers - d;
        out_ = open_if(bin(Op::And, bin(Op::Ge, t, lit(d)), bin(Op::Lt, bin(Op::Add, t, lit(ahead)), lit(n))),
                       x.op->loc);
        copy(CopyKind::in_start, region_of(x, block_at(x, coords_at(bin(Op::Add, s, lit(ahead))))),
             ring(x, bin(Op::Mod, bin(Op::Add, t, lit(ahead)), lit(x.buffers))), x.op->loc);
        zero_fill(x);
        out_ = saved;
      }
      // The CTA's last step: its stores after the loop, every write-back waited.
      {
        const bool entry = in_flight_;
        out_ = open_if(bin(Op::Eq, t, lit(n - 1)), k_.loc);
        if (in_flight_) push(mk(WgmmaWait{lit(0)}, k_.loc));
        in_flight_ = false;
        for (auto &x : ops_)
          if (x.windowed && x.op->role == Role::out && x.invariant)
            copy(CopyKind::out_start, ring(x, lit((n - 1) % x.buffers)),
                 region_of(x, block_at(x, pid_coords())), x.op->loc);
        for (auto &q : moving) {
          for (std::int64_t k = 0; k < q.x->buffers; ++k) {
            Block *o2 = out_;
            out_ = open_if(bin(Op::Gt, Expr::var(q.count), lit(k)), q.x->op->loc);
            copy(CopyKind::out_wait, ring(*q.x, Expr::var(q.q[static_cast<std::size_t>(k)])),
                 Expr::leaf(Op::None), q.x->op->loc);
            out_ = o2;
          }
          let(q.count, lit(0), q.x->op->loc);
        }
        for (auto &x : ops_)
          if (x.windowed && x.op->role == Role::out && x.invariant)
            copy(CopyKind::out_wait, ring(x, lit((n - 1) % x.buffers)), Expr::leaf(Op::None), x.op->loc);
        out_ = saved;
        // A wgmma may still be in flight after the `if` only on the path
        // that is not the CTA's last step.
        in_flight_ = entry && n > 1;
      }
    });
    out_ = &prog_.body;
  }

  const KernelSpec &k_;
  const LowerOptions &o_;
  Env env_;
  Env int_lets_; // unrolled: the integer locals of the body bound so far at this grid step
  bool gpu_ = false;
  bool triton_ = false; ///< backend = triton: outputs read back at each visit
  std::vector<std::int64_t> grid_;
  std::vector<bool> cta_; // GPU: the CTA axes
  std::int64_t steps_ = 1;
  std::vector<std::vector<std::int64_t>> coords_;
  std::vector<Opnd> ops_;
  Program prog_;
  Block *out_ = nullptr;
  std::map<std::string, Expr> cur_slot_;
  bool in_flight_ = false;
  Emitter *parent_ = nullptr;    // set on an inner pipeline's emitter
  std::int64_t parent_step_ = 0; // the outer step it runs at
  std::vector<BufferBinding> nested_bindings_;
  std::map<std::string, Dma> descriptors_; // the body's DMA descriptors by name
  // A local bound in an undecided branch or a rolled loop has no one value.
  void forget_int_lets(const Block &b) {
    std::set<std::string> names;
    bound_names(b, names);
    for (const auto &n : names)
      int_lets_.erase(n);
  }
  std::vector<std::int64_t> step_of_;
  BoundKernel bound_;
  bool rolled_ = true;
  std::string unroll_reason_;
  std::set<std::string> used_; // names taken in the rolled program
  std::string step_var_;
  std::vector<std::string> pid_; // the rolled program's grid coordinates, one per axis
  int main_loop_ = -1;
  std::deque<Block> dead_; // where statements under a constant-false condition go
};

} // namespace

std::vector<std::int64_t> Lowered::point(std::int64_t step) const { return grid_point(grid, cta, step); }

bool lowers_unrolled(const KernelSpec &k, bool gpu, std::string *why) {
  if (has_emit_pipeline(k.body)) {
    // Each outer step lowers its inner pipeline with that step's values.
    if (why) *why = "an emit_pipeline in the body (unrolled)";
    return true;
  }
  if (gpu) return false;
  for (auto &o : k.operands) {
    const char *what = nullptr;
    if (o.role == Role::in && o.pipeline_mode.lookahead) what = "lookahead (unrolled)";
    if (o.role == Role::out && o.pipeline_mode.revisit == Revisit::any) what = "revisit=any (unrolled)";
    // A window whose size moves with the grid point: each step's copy is
    // its own slice.
    if (o.block_shape)
      for (const auto &b : *o.block_shape)
        if (b && bounded_slice_dim(*b)) what = "a BoundedSlice dim (unrolled)";
    if (what) {
      if (why) *why = what;
      return true;
    }
  }
  return false;
}

std::int64_t Lowered::step(int top_level, const std::vector<std::int64_t> &iterations) const {
  const std::int64_t last = std::max<std::int64_t>(num_points(grid) - 1, 0);
  if (main_loop < 0) {
    if (top_level < 0 || static_cast<std::size_t>(top_level) >= step_of.size()) return last;
    return step_of[static_cast<std::size_t>(top_level)];
  }
  if (top_level < main_loop) return 0;
  if (top_level > main_loop || iterations.empty()) return last;
  return iterations.front();
}

std::optional<Lowered> lower(const KernelSpec &k, const LowerOptions &o, std::vector<Diagnostic> &errors) {
  // Scalar prefetch: the kernel with its given contents, the rest picked
  // with seed 0 (the verifier elaborates each contents it checks itself).
  // SMEM state (spec/state.hpp): the kernel with it elaborated, as every command runs it.
  if (!k.prefetches.empty() || has_state(k)) {
    StateElaboration e = elaborate_picked(k, o.overrides);
    if (!e.kernel) {
      errors.push_back(
          !e.errors.empty()
              ? e.errors.front()
              : Diagnostic{Severity::error, k.loc, "cannot lower '" + k.name + "': " + e.unknown, {}});
      return std::nullopt;
    }
    return lower(*e.kernel, o, errors);
  }
  try {
    if (o.cut) {
      KernelSpec cut = cut_body(k, o.overrides, *o.cut);
      Emitter e(cut, o);
      return e.run();
    }
    Emitter e(k, o);
    return e.run();
  } catch (const Fail &f) {
    Diagnostic d;
    d.loc = f.loc.line ? f.loc : k.loc;
    d.message = "cannot lower '" + k.name + "': " + f.message;
    errors.push_back(d);
    return std::nullopt;
  }
}

} // namespace pipecheck::spec
