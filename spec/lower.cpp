#include "spec/lower.hpp"

#include "spec/bind.hpp"
#include "spec/checked.hpp"
#include "spec/print.hpp"
#include "spec/targets.hpp"

#include <algorithm>
#include <cassert>
#include <deque>
#include <map>
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
  std::vector<std::vector<std::int64_t>> blk; // block index per step
  bool acc = false;                           // memory_space=acc: plgpu.ACC, wgmma accumulator registers
  bool invariant = true;                      // GPU: the block never moves within a CTA's pipeline
};

std::int64_t ev(const Expr &e, const Env &env) {
  auto v = eval_int(e, env);
  if (v) return *v;
  if (auto d = arithmetic_error(e, env, "'" + print(e) + "'")) throw Fail{d->loc, d->message};
  throw Fail{e.loc, "cannot evaluate '" + print(e) + "' (every param must be bound)"};
}

Stmt mk(std::variant<Assign, Let, If, For, Copy, Wgmma, WgmmaWait> k, Loc l) {
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
    Binding bound = bind_kernel(k_, env_);
    if (bound.error) throw Fail{bound.error->diag.loc, bound.error->diag.message};
    grid_ = bound.kernel->grid;
    if (gpu_) cta_ = cta_axes(k_, grid_.size());
    steps_ = bound.kernel->num_points();
    if (steps_ > kMaxSteps) throw Fail{k_.grid_loc, "grid too large to lower (more than 65536 steps)"};
    // GPU: CTA by CTA, each CTA's pipeline steps in order.
    for (std::int64_t s = 0; s < steps_; ++s)
      coords_.push_back(grid_point(grid_, cta_, s));
    setup_operands(*bound.kernel);
    declare_buffers();
    if (gpu_)
      emit_gpu();
    else
      emit_tpu();
    mark_step(std::max<std::int64_t>(steps_ - 1, 0));
    Lowered out;
    out.program = std::move(prog_);
    out.grid = grid_;
    out.step_of = std::move(step_of_);
    out.cta = cta_;
    for (auto &x : ops_)
      out.bindings.push_back({x.op->name, x.op->role, x.hbm, x.window});
    return out;
  }

private:
  void setup_operands(const BoundKernel &bound) {
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
      // Pallas' _is_index_invariant: the index map uses no pipeline (non-CTA) axis.
      if (o.index_map)
        for (std::size_t a = 0; a < o.index_map->params.size() && a < cta_.size(); ++a)
          if (!cta_[a])
            for (auto &r : o.index_map->results)
              if (mentions(r, o.index_map->params[a])) x.invariant = false;
      x.windowed = o.memory_space == MemorySpace::vmem || o.memory_space == MemorySpace::smem;
      x.hbm = alias_of.count(o.name) ? alias_of[o.name] : o.name;
      if (x.windowed) x.window = o.name + (gpu_ ? "_smem" : "_vmem");
      for (std::int64_t s = 0; s < steps_; ++s) {
        BlockIndex b = block_index(bo, bound.params, bound.grid, coords_[s]);
        if (b.error) throw Fail{b.error->diag.loc, b.error->diag.message};
        x.blk.push_back(std::move(*b.value));
      }
      if (o.pipeline_mode.buffer_count)
        x.buffers = ev(*o.pipeline_mode.buffer_count, env_);
      else if (!gpu_) {
        // A trivial window (the whole array, never moving) is single-buffered.
        bool trivial = true;
        for (std::size_t d = 0; d < x.shape.size(); ++d)
          if (!x.block[d] || *x.block[d] != x.shape[d]) trivial = false;
        for (auto &b : x.blk)
          for (auto v : b)
            if (v != 0) trivial = false;
        if (trivial) x.buffers = 1;
      }
      if (o.pipeline_mode.revisit == Revisit::any && o.role == Role::out) x.buffers = 1;
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

  // ------------------------------------------------------------ statements

  bool changed(const Opnd &x, std::int64_t s) const { return s == 0 || x.blk[s] != x.blk[s - 1]; }

  Expr region(const Opnd &x, std::int64_t s) const {
    const auto &b = x.blk[s];
    bool whole = true;
    std::vector<Expr> subs;
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      if (!x.block[d]) {
        subs.push_back(Expr::integer(b[d]));
        whole = false;
        continue;
      }
      const std::int64_t lo = saturating_mul(b[d], *x.block[d]);
      const std::int64_t hi = std::min(saturating_add(lo, *x.block[d]), x.shape[d]);
      if (lo != 0 || hi != x.shape[d]) {
        whole = false;
        subs.push_back(Expr::binary(Op::Slice, Expr::integer(lo), Expr::integer(hi)));
      } else {
        subs.push_back(Expr::binary(Op::Slice, Expr::leaf(Op::None), Expr::leaf(Op::None)));
      }
    }
    if (whole) return Expr::var(x.hbm);
    return Expr::ref(x.hbm, subs);
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
  void in_start(const Opnd &x, std::int64_t s, std::int64_t k) {
    copy(CopyKind::in_start, region(x, s), slot(x, k), x.op->loc);
  }
  void in_wait(const Opnd &x, std::int64_t k) {
    copy(CopyKind::in_wait, Expr::leaf(Op::None), slot(x, k), x.op->loc);
  }
  void out_start(const Opnd &x, std::int64_t s, std::int64_t k) {
    copy(CopyKind::out_start, slot(x, k), region(x, s), x.op->loc);
  }
  void out_wait(const Opnd &x, std::int64_t k) {
    copy(CopyKind::out_wait, slot(x, k), Expr::leaf(Op::None), x.op->loc);
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
      return Expr::integer(e.name == "program_id" ? coords_[s][a] : grid_[a], e.loc);
    }
    if (e.op == Op::Name && env_.count(e.name) && !find(e.name)) return Expr::integer(env_.at(e.name), e.loc);
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
        std::vector<Expr> args{Expr::integer(cur_slot_.at(x->op->name))};
        if (!whole)
          for (auto &a : subs)
            args.push_back(a);
        return Expr::ref(x->window, args, e.loc);
      }
    }
    Expr out = e;
    for (auto &a : out.args)
      a = rewrite(a, s);
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
    auto lo = eval_int(rewrite(f.lo, s), {}), hi = eval_int(rewrite(f.hi, s), {});
    if (!lo || !hi)
      throw Fail{st.loc, "cannot decide the bounds of the loop over '" + f.var + "' at a grid point"};
    constexpr std::int64_t kMaxTrips = 4096;
    std::int64_t trips = 0;
    if (__builtin_sub_overflow(*hi, *lo, &trips)) trips = *hi > *lo ? kMaxTrips + 1 : 0;
    if (trips > kMaxTrips)
      throw Fail{st.loc, "the loop over '" + f.var + "' runs more than " + std::to_string(kMaxTrips) +
                             " iterations at a grid point, the most the lowering unrolls"};
    const auto saved =
        env_.find(f.var) != env_.end() ? std::optional<std::int64_t>(env_.at(f.var)) : std::nullopt;
    for (std::int64_t v = *lo; v < *hi; ++v) {
      env_[f.var] = v;
      body(f.body, s);
    }
    if (saved)
      env_[f.var] = *saved;
    else
      env_.erase(f.var);
  }

  void body(const Block &b, std::int64_t s) {
    for (auto &st : b) {
      if (auto *i = std::get_if<If>(&st.kind)) {
        Expr c = rewrite(i->cond, s);
        auto v = eval_int(c, {});
        if (!v) throw Fail{st.loc, "cannot decide '" + print(i->cond) + "' at a grid point"};
        body(*v ? i->then_body : i->else_body, s);
        continue;
      }
      if (auto *a = std::get_if<Assign>(&st.kind)) {
        Expr t = rewrite(a->target, s), v = rewrite(a->value, s);
        if (gpu_ && a->accumulate && a->value.op == Op::Call && a->value.name == "dot" &&
            a->value.num_positional() == 2 && find(a->target.name) && find(a->target.name)->acc) {
          Wgmma w;
          w.acc = Expr::var(a->target.name, a->target.loc);
          w.a = v.args[0];
          w.b = v.args[1];
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
        out_->push_back(n);
        continue;
      }
      if (auto *f = std::get_if<For>(&st.kind)) {
        loop(*f, st, s);
        continue;
      }
      throw Fail{st.loc, "unsupported statement in a kernel body"};
    }
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
        cur_slot_[x.op->name] = st.unit_of[s] % x.buffers;
      }
      // Outputs: the slot of the current unit; revisit=any copies a block
      // visited before back in.
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::out) continue;
        if (changed(x, s) && s > 0) ++out_unit[x.op->name];
        std::int64_t k = out_unit[x.op->name] % x.buffers;
        cur_slot_[x.op->name] = k;
        if (changed(x, s)) {
          bool again = !visited[x.op->name].insert(x.blk[s]).second;
          if (again && x.op->pipeline_mode.revisit == Revisit::any) {
            copy(CopyKind::in_start, region(x, s), slot(x, k), x.op->loc);
            copy(CopyKind::in_wait, Expr::leaf(Op::None), slot(x, k), x.op->loc);
          }
        }
      }
      // 3. the body.
      body(k_.body, s);
      // 4. copy_out when the next block differs or at the last step;
      // 5. wait for the previous block's write-back on a change.
      for (auto &x : ops_) {
        if (!x.windowed || x.op->role != Role::out) continue;
        std::int64_t u = out_unit[x.op->name];
        if (s == steps_ - 1 || x.blk[s + 1] != x.blk[s]) {
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
    std::deque<std::pair<Opnd *, std::int64_t>> outs; // in-flight copy-outs (operand, slot)
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
        cur_slot_[x.op->name] = k;
        if (x.op->role == Role::in) in_wait(x, k);
      }
      // wait_smem_to_gmem(M - 1): the slot about to be written is free.
      if (copies_out_in_loop)
        for (auto &x : ops_) {
          if (!x.windowed || x.op->role != Role::out) continue;
          std::int64_t mine = 0;
          for (auto &o : outs)
            if (o.first == &x) ++mine;
          for (; mine > x.buffers - 1; --mine)
            for (auto it = outs.begin(); it != outs.end(); ++it)
              if (it->first == &x) {
                out_wait(x, it->second);
                outs.erase(it);
                break;
              }
        }
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
          outs.push_back({&x, t % x.buffers});
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
      outs.push_back({&x, k});
    }
    for (auto &o : outs)
      out_wait(*o.first, o.second);
  }

  const KernelSpec &k_;
  const LowerOptions &o_;
  Env env_;
  bool gpu_ = false;
  std::vector<std::int64_t> grid_;
  std::vector<bool> cta_; // GPU: the CTA axes
  std::int64_t steps_ = 1;
  std::vector<std::vector<std::int64_t>> coords_;
  std::vector<Opnd> ops_;
  Program prog_;
  Block *out_ = nullptr;
  std::map<std::string, std::int64_t> cur_slot_;
  bool in_flight_ = false;
  std::vector<std::int64_t> step_of_;
};

} // namespace

std::vector<std::int64_t> Lowered::point(std::int64_t step) const { return grid_point(grid, cta, step); }

std::optional<Lowered> lower(const KernelSpec &k, const LowerOptions &o, std::vector<Diagnostic> &errors) {
  try {
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
