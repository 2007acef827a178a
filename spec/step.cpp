#include "spec/step.hpp"

#include "spec/place.hpp"
#include "spec/prefetch.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

namespace pipecheck::spec {

Stepper::Stepper(const Program &p, const Block &body, Env &env) : program_(p), body_(body), env_(env) {
  for (auto &b : p.buffers) {
    std::vector<std::int64_t> shape;
    for (auto &e : b.shape)
      shape.push_back(eval(e, b.loc));
    block_shapes_.push_back(std::move(shape));
    slots_.push_back(b.slots ? eval(*b.slots, b.loc) : -1);
    if (b.slots && slots_.back() < 1) throw StepError("buffer '" + b.name + "' has no slots", b.loc);
    // A ring is indexed as an array whose first dim is the slot.
    std::vector<std::int64_t> dims;
    if (slots_.back() >= 0) dims.push_back(slots_.back());
    dims.insert(dims.end(), block_shapes_.back().begin(), block_shapes_.back().end());
    ref_dims_.push_back(std::move(dims));
  }
  discards_ = local_discards(body_);
  plan_block(body_);
}

int Stepper::var(const std::string &name) {
  auto [it, fresh] = var_of_.try_emplace(name, static_cast<int>(var_names_.size()));
  if (fresh) {
    var_names_.push_back(name);
    vars_.push_back(nullptr);
  }
  return it->second;
}

void Stepper::bind(int v, std::int64_t value) {
  auto &p = vars_[static_cast<std::size_t>(v)];
  if (!p) p = &env_[var_names_[static_cast<std::size_t>(v)]];
  *p = value;
}

int Stepper::plan_int(const Expr &e) {
  if (auto it = int_of_.find(&e); it != int_of_.end()) return it->second;
  const int h = ints_.compile(e, [this](const std::string &n) { return var(n); });
  int_of_.emplace(&e, h);
  return h;
}

void Stepper::plan_ref(const Expr &ref) {
  if (refs_.count(&ref)) return;
  RefPlan plan;
  plan.buffer = buffer_index(ref.name);
  // What subscripts_of evaluates, in its order: indices, slice bounds, ds(start, size).
  auto add = [&](const Expr &e) { plan.subs.push_back({&e, plan_int(e)}); };
  if (ref.op == Op::Ref)
    for (const auto &a : ref.args) {
      if (a.op == Op::Ellipsis) continue;
      if (a.op == Op::Slice) {
        if (!a.args.empty() && a.args[0].op != Op::None) add(a.args[0]);
        if (a.args.size() >= 2 && a.args[1].op != Op::None) add(a.args[1]);
        if (a.args.size() >= 2 && a.args[0].op != Op::None && a.args[1].op != Op::None)
          plan.sized = plan.sized || !static_slice_size(a.args[0], a.args[1]);
      } else if (a.op == Op::Call && a.name == "ds" && a.args.size() == 2 && a.kwarg_names.empty()) {
        add(a.args[0]);
        add(a.args[1]);
        plan.sized = plan.sized || !eval_int(a.args[1], {});
      } else {
        add(a);
      }
    }
  refs_.emplace(&ref, std::move(plan));
}

void Stepper::collect_read_refs(const Expr &e, std::vector<const Expr *> &out, ReadGuards guards) const {
  if (e.op == Op::Ref || e.op == Op::Name) {
    if (buffer_index(e.name) >= 0) {
      out.push_back(&e);
      if (!guards.empty()) read_guards_[&e] = std::move(guards);
      return;
    }
    if (e.op == Op::Name) return;
  }
  if (e.op == Op::Call && e.name == "where" && e.num_positional() == 3 && e.args.size() == 3) {
    collect_read_refs(e.args[0], out, guards);
    // A condition broadcast to the block guards the branches as the
    // condition itself does.
    const Expr *c = &unbroadcast(e.args[0]);
    for (int k = 1; k <= 2; ++k) {
      auto g = guards;
      g.emplace_back(c, k == 1);
      collect_read_refs(e.args[static_cast<std::size_t>(k)], out, std::move(g));
    }
    return;
  }
  for (auto &a : e.args)
    collect_read_refs(a, out, guards);
}

void Stepper::plan_reads(const Expr &value) {
  std::vector<const Expr *> refs;
  collect_read_refs(value, refs);
  for (const Expr *r : refs) {
    plan_ref(*r);
    if (auto g = read_guards_.find(r); g != read_guards_.end())
      for (const auto &c : g->second)
        plan_int(*c.first);
  }
  reads_of_.try_emplace(&value, std::move(refs));
}

void Stepper::plan_block(const Block &b) {
  for (const auto &s : b) {
    StmtPlan plan;
    if (auto d = discards_.find(&s); d != discards_.end()) {
      plan.discards = d->second;
      for (const auto &x : plan.discards)
        plan_int(*x.cond);
    }
    if (auto *f = std::get_if<For>(&s.kind)) {
      plan.ints[0] = plan_int(f->lo);
      plan.ints[1] = plan_int(f->hi);
      plan.var = var(f->var);
      plan_block(f->body);
    } else if (auto *i = std::get_if<If>(&s.kind)) {
      plan.ints[0] = plan_int(i->cond);
      plan_block(i->then_body);
      plan_block(i->else_body);
    } else if (auto *l = std::get_if<Let>(&s.kind)) {
      if (buffer_index(l->name) >= 0) {
        plan.let_store = &let_stores_.emplace_back(Expr::var(l->name, s.loc));
        plan_ref(*plan.let_store);
      } else {
        plan.ints[0] = plan_int(l->value);
        plan.var = var(l->name);
      }
      plan_reads(l->value);
    } else if (auto *a = std::get_if<Assign>(&s.kind)) {
      plan_ref(a->target);
      plan_reads(a->value);
    } else if (auto *c = std::get_if<Copy>(&s.kind)) {
      plan_ref(c->src);
      plan_ref(c->dst);
      for (const auto &o : c->offset.args)
        plan_int(o);
    } else if (auto *w = std::get_if<Wgmma>(&s.kind)) {
      plan_ref(w->acc);
      plan_ref(w->a);
      plan_ref(w->b);
    } else if (auto *ww = std::get_if<WgmmaWait>(&s.kind)) {
      plan.ints[0] = plan_int(ww->n);
    } else if (auto *d = std::get_if<Dma>(&s.kind)) {
      plan_ref(d->src);
      plan_ref(d->dst);
      plan_ref(d->sem);
      plan_int(d->n);
    }
    for_each_expr(s,
                  [&](const Expr &e) { plan.reads_tables = plan.reads_tables || has_elaborated_reads(e); });
    plans_.try_emplace(&s, plan);
  }
}

int Stepper::buffer_index(const std::string &name) const {
  for (std::size_t i = 0; i < program_.buffers.size(); ++i)
    if (program_.buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

std::optional<std::int64_t> Stepper::value_of(const Expr &e) const {
  if (auto it = int_of_.find(&e); it != int_of_.end())
    if (auto v = ints_.value(it->second, vars_.data())) return v;
  return eval_int(e, env_);
}

std::int64_t Stepper::eval(int handle, const Expr &e, const Loc &l) const {
  if (handle >= 0)
    if (auto v = ints_.value(handle, vars_.data())) return *v;
  return eval(e, l);
}

std::int64_t Stepper::eval(const Expr &e, const Loc &l) const {
  if (auto v = value_of(e)) return *v;
  if (auto d = arithmetic_error(e, env_, "'" + print(e) + "'"))
    throw StepError(d->message, d->loc.line ? d->loc : l); // (a generated expression: its statement)
  throw StepError("cannot evaluate '" + print(e) + "'", e.loc.line ? e.loc : l);
}

StepRef Stepper::resolve(const Expr &ref, const Loc &l) const {
  auto it = refs_.find(&ref);
  if (it == refs_.end()) return resolve_in(ref, buffer_index(ref.name), nullptr, l);
  return resolve_in(ref, it->second.buffer, &it->second, l);
}

StepRef Stepper::resolve_in(const Expr &ref, int bi, const RefPlan *plan, const Loc &l) const {
  const std::string &name = ref.name;
  if (bi < 0 || (ref.op != Op::Ref && ref.op != Op::Name))
    throw StepError("'" + print(ref) + "' is not a buffer", l);
  const bool ring = slots_[bi] >= 0;
  const Dims &dims = ref_dims_[bi];
  std::size_t next = 0; // the plan's next subscript expression
  const auto subs = subscripts_of(ref, [&](const Expr &e, bool) -> std::optional<std::int64_t> {
    if (plan && next < plan->subs.size() && plan->subs[next].first == &e)
      return eval(plan->subs[next++].second, e, l);
    return eval(e, l);
  });
  if (ring && (subs.empty() || subs[0].kind != Subscript::Kind::index))
    throw StepError("slot ring '" + name + "' used without a slot", l);
  const Subscripted r = subscript(dims, subs);
  if (!r.ok()) {
    // (A subscript that reads a prefetch table is a long `where` tree once
    // elaborated: the source line under the message shows it as written.)
    std::string text = print(ref);
    if (text.size() > 160) text = name + "[...]";
    std::string what = "'" + text + "': " + r.error + " of " + name + dims_string(dims);
    if (r.out_of_bounds) throw OutOfBounds(what);
    throw StepError(what, l);
  }
  StepRef out;
  out.place.buffer = bi;
  std::size_t d = 0;
  if (ring) out.place.slot = r.dims[d++].lo;
  const std::size_t first = d;
  out.place.box.reserve(r.dims.size() - first);
  for (; d < r.dims.size(); ++d) {
    out.place.box.push_back({r.dims[d].lo, r.dims[d].hi});
    if (r.dims[d].kept) out.kept.push_back(static_cast<int>(d - first));
  }
  return out;
}

void Stepper::same_sizes(const Expr &ref, const Loc &l) const {
  auto it = refs_.find(&ref);
  if (it == refs_.end() || !it->second.sized) return;
  std::vector<std::int64_t> sizes;
  for (const auto &a : ref.args)
    if (a.op == Op::Slice && a.args.size() >= 2 && a.args[0].op != Op::None && a.args[1].op != Op::None)
      sizes.push_back(eval(a.args[1], l) - eval(a.args[0], l));
    else if (a.op == Op::Call && a.name == "ds" && a.args.size() == 2 && a.kwarg_names.empty())
      sizes.push_back(eval(a.args[1], l));
  auto [at, first] = sizes_.try_emplace(&ref, sizes);
  if (first || at->second == sizes) return;
  auto str = [](const std::vector<std::int64_t> &v) {
    std::string t;
    for (auto x : v)
      t += (t.empty() ? "" : ", ") + std::to_string(x);
    return "(" + t + ")";
  };
  throw StepError("the slice sizes of '" + print(ref) + "' change from " + str(at->second) + " to " +
                      str(sizes) +
                      ": a block's shape is static, so a slice's size may not depend on a loop variable, "
                      "the grid point or data (its start may)",
                  l);
}

void Stepper::collect_reads(const Expr &e, std::vector<StepRef> &out, const Loc &l) const {
  std::vector<const Expr *> unplanned;
  auto it = reads_of_.find(&e);
  if (it == reads_of_.end()) collect_read_refs(e, unplanned);
  const auto &refs = it == reads_of_.end() ? unplanned : it->second;
  out.reserve(out.size() + refs.size() + 1);
  for (const Expr *r : refs) {
    bool selected = true;
    if (auto g = read_guards_.find(r); g != read_guards_.end())
      for (const auto &[cond, holds] : g->second)
        if (auto v = value_of(*cond); v && (*v != 0) != holds) selected = false;
    // A read in the branch a `where` does not select is still made (both
    // sides are evaluated, as jnp.where's are): out of bounds it faults as
    // in the executor; it reads nothing the value takes.
    StepRef ref = resolve(*r, l);
    same_sizes(*r, l);
    if (selected) out.push_back(std::move(ref));
  }
}

void Stepper::run(StepConsumer &c) {
  c_ = &c;
  for (std::size_t v = 0; v < vars_.size(); ++v) {
    auto it = env_.find(var_names_[v]);
    vars_[v] = it == env_.end() ? nullptr : &it->second;
  }
  try {
    exec_block(body_);
  } catch (const OutOfBounds &e) {
    // The access faults: the run ends at it, and what is still in flight
    // then is no leak of the program's.
    c.on_fault(*current_, FaultKind::index_out_of_bounds, e.what());
    return;
  }
  // Semaphores left non-zero, at the statement that left each (its loop
  // values as then, for the consumer's event). (Not one a wait hung on: the
  // kernel never gets to its end.)
  // (A DMA semaphore's bytes not yet waited belong to copies still in
  // flight: those are the consumer's, on_end.)
  for (auto &[key, sem] : sems_)
    if (sem.value > 0 && !sem.hung) {
      current_ = sem.left_by;
      loop_values_ = sem.left_at;
      c.on_fault(*sem.left_by, FaultKind::semaphore_nonzero,
                 sem.left_why + "the kernel ends with the semaphore at " + std::to_string(sem.value) +
                     ", not zero (Mosaic checks every semaphore is zero at exit)");
    }
  loop_values_.clear();
  c.on_end(in_flight_);
}

void Stepper::exec_block(const Block &b) {
  for (auto &s : b)
    exec(s);
}

void Stepper::exec(const Stmt &s) {
  current_ = &s;
  const StmtPlan &plan = plans_.at(&s);
  if (plan.reads_tables)
    for_each_expr(s, [&](const Expr &e) {
      if (auto r = prefetch_read_outside(e, [&](const Expr &x) { return value_of(x); }))
        throw OutOfBounds(read_outside_fault(*r));
    });
  if (auto *f = std::get_if<For>(&s.kind)) {
    const std::int64_t lo = eval(plan.ints[0], f->lo, s.loc), hi = eval(plan.ints[1], f->hi, s.loc);
    std::int64_t *&bound = vars_[static_cast<std::size_t>(plan.var)];
    if (!bound) // bound by a consumer, perhaps
      if (auto it = env_.find(f->var); it != env_.end()) bound = &it->second;
    // Two plain values, not an optional: GCC's -Wmaybe-uninitialized misfires
    // on an optional here under -fsanitize=thread.
    const bool had = bound != nullptr;
    const std::int64_t saved = had ? *bound : 0;
    for (std::int64_t v = lo; v < hi; ++v) {
      // A while loop's iterations past the first whose condition fails do
      // nothing (each is `if cond:` on a state that no longer changes).
      if (f->is_while) {
        const Stmt &guard = f->body.at(0);
        if (!eval(plans_.at(&guard).ints[0], while_cond(*f), guard.loc)) break;
      }
      bind(plan.var, v);
      loop_values_.push_back(v);
      c_->on_iteration(*f, v);
      exec_block(f->body);
      loop_values_.pop_back();
    }
    if (had) bind(plan.var, saved);
    // A while loop whose condition still holds after its bound needs more
    // iterations than the check covers (spec::For).
    if (f->is_while) {
      const Stmt &guard = f->body.at(0);
      if (eval(plans_.at(&guard).ints[0], while_cond(*f), guard.loc))
        throw StepError(while_bound_message(s.loc, std::max<std::int64_t>(hi - lo, 0)), s.loc);
    }
    return;
  }
  if (auto *i = std::get_if<If>(&s.kind)) {
    exec_block(eval(plan.ints[0], i->cond, s.loc) ? i->then_body : i->else_body);
    return;
  }
  if (auto *l = std::get_if<Let>(&s.kind)) {
    // `T = expr` on an unslotted buffer is a store into the whole buffer.
    if (plan.let_store) {
      exec_store(s, *plan.let_store, false, l->value);
      return;
    }
    std::optional<std::int64_t> v = ints_.value(plan.ints[0], vars_.data());
    if (!v) v = eval_int(l->value, env_);
    if (v) {
      bind(plan.var, *v);
      c_->on_int_let(s, l->name);
      return;
    }
    std::vector<StepRef> reads;
    collect_reads(l->value, reads, s.loc);
    // A value a later `when` replaces before any use (LocalDiscard) reads
    // nothing it keeps where that `when` runs: its reads, made, count not.
    for (const auto &[cond, holds] : plan.discards)
      if (auto v = value_of(*cond); v && (*v != 0) != holds) reads.clear();
    // The consumer may unbind the name (a tensor now), so nothing points at it.
    vars_[static_cast<std::size_t>(plan.var)] = nullptr;
    c_->on_compute(s, reads, std::nullopt);
    env_.erase(l->name);
    return;
  }
  if (auto *a = std::get_if<Assign>(&s.kind)) {
    exec_store(s, a->target, a->accumulate, a->value);
    return;
  }
  exec_async(s);
}

void Stepper::exec_store(const Stmt &s, const Expr &target_ref, bool accumulate, const Expr &value) {
  StepRef target = resolve(target_ref, s.loc);
  same_sizes(target_ref, s.loc);
  if (value.op == Op::Undefined) {
    c_->on_discard(s, target);
    return;
  }
  std::vector<StepRef> reads;
  collect_reads(value, reads, s.loc);
  if (accumulate) reads.push_back(target);
  ++writes_[{target.place.buffer, target.place.slot}];
  c_->on_compute(s, reads, target);
}

namespace {
Dims kept_shape(const StepRef &r) {
  Dims d;
  for (int k : r.kept)
    d.push_back(r.place.box[k].second - r.place.box[k].first);
  return d;
}
} // namespace

void Stepper::exec_async(const Stmt &s) {
  if (auto *d = std::get_if<Dma>(&s.kind)) {
    exec_dma(s, *d);
    return;
  }
  if (auto *c = std::get_if<Copy>(&s.kind)) {
    const bool in = c->kind == CopyKind::in_start || c->kind == CopyKind::in_wait;
    if (c->kind == CopyKind::in_start || c->kind == CopyKind::out_start) {
      AsyncStart a;
      a.kind = in ? AsyncKind::copy_in : AsyncKind::copy_out;
      a.src = resolve(c->src, s.loc);
      a.dst = resolve(c->dst, s.loc);
      Dims at;
      if (c->offset.op != Op::None)
        for (const auto &o : c->offset.args)
          at.push_back(eval(o, s.loc));
      hbm_side_fits(c->src, a.src, c->dst, a.dst);
      const CopyFit fit = fit_copy(kept_shape(a.src), kept_shape(a.dst), at);
      if (!fit.fits)
        throw OutOfBounds("offset=" + print(c->offset) + " " + dims_string(at) + " does not place " +
                          print(in ? c->src : c->dst) + " " + dims_string(kept_shape(in ? a.src : a.dst)) +
                          " inside " + print(in ? c->dst : c->src) + " " +
                          dims_string(kept_shape(in ? a.dst : a.src)));
      a.src_read = a.src.place;
      a.dst_filled = a.dst.place;
      a.zero_fill = c->zeros;
      for (std::size_t d = 0; d < a.src.kept.size() && d < fit.src.size(); ++d) {
        auto &iv = a.src_read.box[a.src.kept[d]];
        iv.first += fit.src_at[d];
        iv.second = iv.first + fit.src[d];
      }
      for (std::size_t d = 0; d < a.dst.kept.size() && d < fit.dst.size(); ++d) {
        auto &iv = a.dst_filled.box[a.dst.kept[d]];
        iv.first += fit.dst_at[d];
        iv.second = iv.first + fit.dst[d];
      }
      const StepPlace &slot = in ? a.dst.place : a.src.place;
      const SlotKey key{slot.buffer, slot.slot};
      const int op = next_op_++;
      in_flight_.push_back(op);
      (in ? in_ : out_)[key].push_back(op);
      if (in)
        ++writes_[key];
      else
        out_writes_[op] = writes_[key];
      c_->on_start(s, op, a);
      return;
    }
    const StepRef w = resolve(c->waited(), s.loc);
    const SlotKey key{w.place.buffer, w.place.slot};
    auto &q = (in ? in_ : out_)[key];
    if (q.empty()) {
      c_->on_fault(s, FaultKind::wait_without_copy,
                   std::string("waits for a copy ") + (in ? "into " : "out of ") +
                       program_.buffers[w.place.buffer].name +
                       (w.place.slot >= 0 ? "[" + std::to_string(w.place.slot) + "]" : "") +
                       " but none is in flight: this hangs");
      return;
    }
    const int op = q.front();
    q.pop_front();
    in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), op));
    bool undefined = false;
    if (!in) {
      const auto kind = program_.buffers[w.place.buffer].kind;
      undefined = !c->keep && q.empty() && writes_[key] == out_writes_[op] &&
                  (kind == BufferKind::sram || kind == BufferKind::smem);
      out_writes_.erase(op);
    }
    c_->on_wait(s, w, {op});
    if (undefined) c_->on_undefined(s, w.place);
    return;
  }
  if (auto *w = std::get_if<Wgmma>(&s.kind)) {
    AsyncStart a;
    a.kind = AsyncKind::wgmma;
    a.acc = resolve(w->acc, s.loc);
    a.a = resolve(w->a, s.loc);
    a.b = resolve(w->b, s.loc);
    a.trans_a = w->trans_a;
    a.trans_b = w->trans_b;
    const int op = next_op_++;
    in_flight_.push_back(op);
    wgmmas_.push_back(op);
    c_->on_start(s, op, a);
    return;
  }
  if (auto *w = std::get_if<WgmmaWait>(&s.kind)) {
    const std::int64_t n = eval(plans_.at(&s).ints[0], w->n, s.loc);
    if (n < 0) throw StepError("wgmma_wait takes n >= 0", s.loc);
    std::vector<int> retired;
    while (static_cast<std::int64_t>(wgmmas_.size()) > n) {
      retired.push_back(wgmmas_.front());
      wgmmas_.pop_front();
      in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), retired.back()));
    }
    c_->on_wait(s, std::nullopt, retired);
    return;
  }
}

Stepper::SlotKey Stepper::semaphore(const Expr &ref, const Loc &l) const {
  const int bi = buffer_index(ref.name);
  if (bi < 0 || program_.buffers[bi].kind != BufferKind::sem)
    throw StepError("'" + print(ref) + "' is not a semaphore", l);
  const StepRef r = resolve(ref, l);
  std::int64_t flat = 0;
  const auto &shape = block_shapes_[bi];
  for (std::size_t d = 0; d < r.place.box.size(); ++d) {
    if (r.place.box[d].second - r.place.box[d].first != 1)
      throw StepError("'" + print(ref) + "' names more than one semaphore", l);
    flat = flat * shape[d] + r.place.box[d].first;
  }
  return {bi, flat};
}

std::int64_t Stepper::bytes_of(const StepRef &r) const {
  std::int64_t n = dtype_bytes(program_.buffers[r.place.buffer].dtype);
  for (auto &[lo, hi] : r.place.box)
    n *= hi - lo;
  return n;
}

void Stepper::hbm_side_fits(const Expr &src_ref, const StepRef &src, const Expr &dst_ref,
                            const StepRef &dst) const {
  // A copy's HBM side is its block's window, clipped where the block passes
  // the array's end: never more than the on-chip side holds (a slice whose
  // size depends on a loop variable or the grid point can make it so).
  const bool src_hbm = program_.buffers[src.place.buffer].kind == BufferKind::hbm;
  if (src_hbm == (program_.buffers[dst.place.buffer].kind == BufferKind::hbm)) return;
  const Dims hbm = kept_shape(src_hbm ? src : dst), chip = kept_shape(src_hbm ? dst : src);
  // (Of different ranks, as a squeezed dim leaves them: by element count.)
  bool larger = false;
  if (hbm.size() != chip.size())
    larger = std::accumulate(hbm.begin(), hbm.end(), std::int64_t{1}, std::multiplies<>()) >
             std::accumulate(chip.begin(), chip.end(), std::int64_t{1}, std::multiplies<>());
  for (std::size_t d = 0; d < hbm.size() && hbm.size() == chip.size() && !larger; ++d)
    larger = hbm[d] > chip[d];
  // (Past the slot's end: an access out of bounds, as an offset= that does
  // not place the copy inside its slot.)
  if (larger)
    throw OutOfBounds("copy between different shapes: " + print(src_hbm ? src_ref : dst_ref) + " is " +
                      dims_string(hbm) + " here, more than " + print(src_hbm ? dst_ref : src_ref) + " " +
                      dims_string(chip) +
                      " holds (a copy moves a whole block; its slice sizes must not "
                      "depend on a loop variable or the grid point)");
}

int Stepper::start_copy(const Stmt &s, const Expr &src_ref, const Expr &dst_ref) {
  AsyncStart a;
  a.src = resolve(src_ref, s.loc);
  a.dst = resolve(dst_ref, s.loc);
  hbm_side_fits(src_ref, a.src, dst_ref, a.dst);
  // A DMA into on-chip memory reads like a copy in, one into HBM like a copy out.
  a.kind =
      program_.buffers[a.dst.place.buffer].kind == BufferKind::hbm ? AsyncKind::copy_out : AsyncKind::copy_in;
  a.src_read = a.src.place;
  a.dst_filled = a.dst.place;
  const int op = next_op_++;
  in_flight_.push_back(op);
  if (a.kind == AsyncKind::copy_in) ++writes_[{a.dst.place.buffer, a.dst.place.slot}];
  c_->on_start(s, op, a);
  return op;
}

void Stepper::leave(Semaphore &sem, const Stmt &s, std::string why) const {
  sem.left_by = &s;
  sem.left_at = loop_values_;
  sem.left_why = std::move(why);
}

void Stepper::exec_dma(const Stmt &s, const Dma &d) {
  if (d.action == DmaAction::bind || !d.descriptor.empty() || d.method)
    throw StepError("a program writes DMAs as dma_start / dma_wait (descriptors belong in kernel bodies)",
                    s.loc);
  auto retire = [&](int op) { in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), op)); };
  switch (d.action) {
  case DmaAction::sync_copy: {
    const int op = start_copy(s, d.src, d.dst);
    retire(op);
    c_->on_wait(s, resolve(d.dst, s.loc), {op});
    return;
  }
  case DmaAction::start: {
    const SlotKey key = semaphore(d.sem, s.loc);
    const std::int64_t bytes = bytes_of(resolve(d.dst, s.loc));
    const int op = start_copy(s, d.src, d.dst);
    auto &sem = sems_[key];
    sem.ops.push_back({op, bytes});
    sem.total += bytes;
    return;
  }
  case DmaAction::wait: {
    const SlotKey key = semaphore(d.sem, s.loc);
    const StepRef dst = resolve(d.dst, s.loc);
    const std::int64_t bytes = bytes_of(dst);
    auto &sem = sems_[key];
    if (sem.credit + bytes > sem.total) {
      sem.hung = true;
      c_->on_fault(s, FaultKind::wait_without_copy,
                   "waits for " + std::to_string(bytes) + " bytes on " + print(d.sem) + " but " +
                       (sem.total == 0            ? std::string("no copy on it is in flight")
                        : sem.total == sem.credit ? std::string("the copies on it are all waited for already")
                                                  : "the copies on it can bring only " +
                                                        std::to_string(sem.total - sem.credit) + " more") +
                       ": this hangs");
      return;
    }
    sem.credit += bytes;
    // A semaphore counts bytes as they land (docs/pallas/tpu/distributed.md:
    // "on DMA start, the local device will begin to increment the value"),
    // from every copy on it at once: the bytes waited may be any mix of
    // theirs, so no copy is known done until the waits cover them all.
    std::vector<int> retired;
    if (sem.credit >= sem.total)
      for (const auto &[op, b] : sem.ops) {
        sem.total -= b;
        sem.credit -= b;
        retired.push_back(op);
        retire(op);
      }
    if (!retired.empty()) sem.ops.clear();
    std::sort(retired.begin(), retired.end());
    c_->on_wait(s, dst, retired);
    return;
  }
  case DmaAction::signal:
  case DmaAction::sem_wait: {
    const SlotKey key = semaphore(d.sem, s.loc);
    const std::int64_t n = eval(d.n, s.loc);
    if (n < 0) throw StepError("a semaphore count must be >= 0, not " + std::to_string(n), s.loc);
    auto &sem = sems_[key];
    if (d.action == DmaAction::signal) {
      if (sem.value == 0 && n > 0)
        leave(sem, s, "signals " + print(d.sem) + " and nothing waits for the count: ");
      sem.value += n;
    } else if (sem.value < n) {
      // One issuing thread: nothing else can signal it.
      sem.hung = true;
      c_->on_fault(s, FaultKind::wait_without_copy,
                   "waits for " + std::to_string(n) + " on " + print(d.sem) + " but only " +
                       std::to_string(sem.value) + " was signalled and nothing else signals it: this hangs");
      return;
    } else {
      sem.value -= n;
    }
    c_->on_wait(s, std::nullopt, {});
    return;
  }
  case DmaAction::bind: return;
  }
}

} // namespace pipecheck::spec
