#include "perf/model.hpp"

#include <cstdio>

#include <cmath>

#include "spec/checked.hpp"
#include "spec/state.hpp"
#include "spec/step.hpp"
#include "spec/typecheck.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/model.hpp"
#include "verifier/rules/targets.hpp"

#include <algorithm>
#include <unordered_map>

namespace pipecheck::perf {

namespace {

using spec::Expr;
using spec::Op;

// Nodes that name or shape data and compute nothing.
bool moves_data(Op op) {
  switch (op) {
  case Op::Int:
  case Op::Float:
  case Op::Name:
  case Op::Ref:
  case Op::Ellipsis:
  case Op::Slice:
  case Op::None:
  case Op::Zeros:
  case Op::Undefined:
  case Op::Tuple: return true;
  default: return false;
  }
}

std::int64_t elements(const spec::Dims &d) {
  std::int64_t n = 1;
  for (auto x : d)
    n = spec::saturating_mul(n, std::max<std::int64_t>(x, 0));
  return n;
}

std::int64_t expr_flops(const Expr &e, const spec::ExprTypes &types) {
  std::int64_t n = 0;
  for (const auto &a : e.args)
    n = spec::saturating_add(n, expr_flops(a, types));
  auto t = types.find(&e);
  if (t == types.end()) return n;
  const std::int64_t out = elements(t->second.shape);
  if (moves_data(e.op)) return n;
  switch (e.op) {
  case Op::Call: break;
  default: return spec::saturating_add(n, out);
  }
  static const char *const movement[] = {"cast", "reshape", "broadcast_to", "transpose",   "iota",
                                         "full", "zeros",   "program_id",   "num_programs"};
  for (const char *m : movement)
    if (e.name == m) return n;
  if (e.name == "dot" && e.num_positional() >= 2) {
    auto a = types.find(&e.args[0]);
    if (a == types.end() || a->second.shape.empty()) return n;
    bool trans_a = false;
    if (const Expr *k = e.kwarg("trans_a")) trans_a = spec::bool_literal(*k).value_or(false);
    const auto &s = a->second.shape;
    std::int64_t k = trans_a && s.size() == 2 ? s[0] : s.back();
    return spec::saturating_add(
        n, spec::saturating_mul(2, spec::saturating_mul(out, std::max<std::int64_t>(k, 0))));
  }
  if (e.name == "dot_general" && e.num_positional() >= 2) {
    // 2 flops per output element and contracted index.
    auto a = types.find(&e.args[0]);
    spec::Loc where;
    const auto d = spec::dot_general_dims(e, where);
    if (a == types.end() || !d.ok()) return n;
    std::int64_t k = 1;
    for (auto x : d.value.lhs_contract)
      if (x >= 0 && static_cast<std::size_t>(x) < a->second.shape.size())
        k = spec::saturating_mul(k, std::max<std::int64_t>(a->second.shape[static_cast<std::size_t>(x)], 0));
    return spec::saturating_add(n, spec::saturating_mul(2, spec::saturating_mul(out, k)));
  }
  if ((e.name == "sum" || e.name == "max" || e.name == "min") && !e.args.empty()) {
    auto a = types.find(&e.args[0]);
    if (a != types.end()) return spec::saturating_add(n, elements(a->second.shape));
  }
  return spec::saturating_add(n, out);
}

void block_flops(const spec::Block &b, const spec::ExprTypes &types,
                 std::map<std::pair<int, int>, std::int64_t> &out) {
  for (const auto &st : b) {
    std::int64_t f = 0;
    if (const auto *a = std::get_if<spec::Assign>(&st.kind)) {
      f = expr_flops(a->value, types);
      if (a->accumulate) {
        auto t = types.find(&a->value);
        f = spec::saturating_add(f, t == types.end() ? 1 : elements(t->second.shape));
      }
    } else if (const auto *l = std::get_if<spec::Let>(&st.kind)) {
      f = expr_flops(l->value, types);
    } else if (const auto *i = std::get_if<spec::If>(&st.kind)) {
      block_flops(i->then_body, types, out);
      block_flops(i->else_body, types, out);
    } else if (const auto *fo = std::get_if<spec::For>(&st.kind)) {
      block_flops(fo->body, types, out);
    }
    out[{st.loc.line, st.loc.col}] += f;
  }
}

// The program's timed walk: one issuing thread, one compute unit, one
// bandwidth shared by every copy.
class Timer : public spec::StepConsumer {
public:
  /// `l` absent: a pipeline, whose steps are its compute statements.
  Timer(const spec::Program &p, const spec::Lowered *l, const FlopsOf &flops, const Machine &m)
      : p_(p), l_(l), flops_(flops), m_(m) {
    t_.traffic.resize(p.buffers.size());
    for (std::size_t i = 0; i < p.buffers.size(); ++i)
      t_.traffic[i].buffer = p.buffers[i].name;
  }
  const spec::Stepper *stepper = nullptr;

  void on_compute(const spec::Stmt &s, const std::vector<spec::StepRef> &reads,
                  const std::optional<spec::StepRef> &write) override {
    std::int64_t f = flops_(s, reads, write);
    if (f <= 0) return;
    double start = std::max(now_, unit_free_);
    double end = start + static_cast<double>(f) / m_.flops_per_s;
    record_compute(start, end, f);
    now_ = end;
  }
  void on_start(const spec::Stmt &s, int op, const spec::AsyncStart &a) override {
    if (done_.size() <= static_cast<std::size_t>(op)) done_.resize(op + 1, 0);
    if (a.kind == spec::AsyncKind::wgmma) {
      std::int64_t f = flops_(s, {}, std::nullopt);
      double start = std::max(now_, unit_free_);
      double end = start + static_cast<double>(std::max<std::int64_t>(f, 0)) / m_.flops_per_s;
      record_compute(start, end, f);
      done_[op] = end;
      return;
    }
    const auto &place = a.src_read;
    std::int64_t n = 1;
    for (const auto &[lo, hi] : place.box)
      n = spec::saturating_mul(n, std::max<std::int64_t>(hi - lo, 0));
    const auto &buf = p_.buffers.at(place.buffer);
    std::int64_t bytes = spec::saturating_mul(n, spec::dtype_bytes(buf.dtype));
    double xfer = static_cast<double>(bytes) / m_.beta_bytes_per_s;
    double end = std::max(now_ + m_.alpha_s, link_free_) + xfer;
    link_free_ = end;
    done_[op] = end;
    last_ = std::max(last_, end);
    t_.copy_seconds += xfer;
    ++t_.copies;
    // The window is the traffic's name: the destination of a copy in, the
    // source of a copy out.
    bool in = a.kind == spec::AsyncKind::copy_in;
    auto &tr = t_.traffic.at((in ? a.dst_filled : a.src_read).buffer);
    (in ? tr.copies_in : tr.copies_out) += 1;
    (in ? tr.bytes_in : tr.bytes_out) += bytes;
    // The HBM side too: a body DMA's memory_space=any operand has no window.
    const int hbm = (in ? a.src_read : a.dst_filled).buffer;
    if (p_.buffers.at(hbm).kind == spec::BufferKind::hbm) {
      auto &h = t_.traffic.at(hbm);
      (in ? h.copies_in : h.copies_out) += 1;
      (in ? h.bytes_in : h.bytes_out) += bytes;
    }
  }
  void on_wait(const spec::Stmt &, const std::optional<spec::StepRef> &,
               const std::vector<int> &retired) override {
    for (int r : retired)
      if (r >= 0 && static_cast<std::size_t>(r) < done_.size()) now_ = std::max(now_, done_[r]);
  }
  void on_undefined(const spec::Stmt &, const spec::StepPlace &) override {}
  void on_fault(const spec::Stmt &s, spec::FaultKind, const std::string &message) override {
    throw spec::StepError(message, s.loc);
  }
  void on_end(const std::vector<int> &) override {}

  Timing finish() {
    t_.seconds = std::max({now_, last_, unit_free_});
    std::erase_if(t_.traffic, [](const Traffic &x) { return x.copies_in == 0 && x.copies_out == 0; });
    return std::move(t_);
  }

private:
  void record_compute(double start, double end, std::int64_t f) {
    if (!any_compute_) t_.first_compute = start;
    any_compute_ = true;
    t_.last_compute_end = std::max(t_.last_compute_end, end);
    t_.compute_seconds += end - start;
    t_.flops = spec::saturating_add(t_.flops, f);
    unit_free_ = end;
    last_ = std::max(last_, end);
    std::int64_t step = l_ ? current_step() : computes_++;
    if (step >= 0 && static_cast<std::size_t>(step) < Timing::kTimelineSteps) {
      if (t_.steps.size() <= static_cast<std::size_t>(step)) t_.steps.resize(step + 1, {start, start});
      auto &st = t_.steps[step];
      if (st.compute_end <= st.compute_start) st.compute_start = start;
      st.compute_end = end;
    }
  }
  std::int64_t current_step() {
    if (!stepper || !stepper->current()) return -1;
    const spec::Stmt *s = stepper->current();
    auto it = top_.find(s);
    int top = -1;
    if (it != top_.end()) {
      top = it->second;
    } else {
      const auto &body = p_.body;
      for (std::size_t i = 0; i < body.size() && top < 0; ++i)
        if (contains(body[i], s)) top = static_cast<int>(i);
      top_.emplace(s, top);
    }
    return l_->step(top, stepper->loop_values());
  }
  static bool contains(const spec::Stmt &s, const spec::Stmt *p) {
    if (&s == p) return true;
    if (const auto *i = std::get_if<spec::If>(&s.kind))
      return std::any_of(i->then_body.begin(), i->then_body.end(), [&](auto &t) { return contains(t, p); }) ||
             std::any_of(i->else_body.begin(), i->else_body.end(), [&](auto &t) { return contains(t, p); });
    if (const auto *f = std::get_if<spec::For>(&s.kind))
      return std::any_of(f->body.begin(), f->body.end(), [&](auto &t) { return contains(t, p); });
    return false;
  }

  const spec::Program &p_;
  const spec::Lowered *l_;
  const FlopsOf &flops_;
  std::int64_t computes_ = 0;
  Machine m_;
  Timing t_;
  double now_ = 0, unit_free_ = 0, link_free_ = 0, last_ = 0;
  bool any_compute_ = false;
  std::vector<double> done_;
  std::unordered_map<const spec::Stmt *, int> top_;
};

ModelResult model_one(const spec::KernelSpec &k, const ModelOptions &o);
void fill(Model &m, const Timing &tm);

// The alternatives a memory-bound kernel could take: a larger block of the
// dominating operand (each param its block names, one domain value up or
// doubled) and one more buffer (TPU: buffer_count on that operand; Mosaic
// GPU: max_concurrent_steps).
std::vector<Alternative> alternatives(const spec::KernelSpec &k, const ModelOptions &o, const Model &m,
                                      const verifier::rules::KernelModel &km) {
  std::vector<Alternative> out;
  const auto &dom = m.operands.at(*m.dominant);
  const spec::Operand *decl = k.operand(dom.name);
  auto try_one = [&](std::string change, const spec::KernelSpec &variant, const ModelOptions &vo) {
    Alternative a;
    a.change = std::move(change);
    ModelOptions v = vo;
    v.alternatives = false;
    auto r = model_one(variant, v);
    if (!r.model) {
      a.why = !r.errors.empty() ? r.errors[0].message : r.unknown;
    } else {
      a.ok = true;
      a.seconds = r.model->seconds;
      a.sram_bytes = r.model->sram_bytes;
      a.fits = r.model->sram_bytes <= r.model->sram_budget;
    }
    out.push_back(std::move(a));
  };
  if (decl && decl->block_shape) {
    int tried = 0;
    for (const auto &p : k.params) {
      if (tried == 2) break;
      bool named = false;
      for (const auto &b : *decl->block_shape)
        named = named || (b && spec::mentions(*b, p.name));
      auto cur = km.env.find(p.name);
      if (!named || cur == km.env.end()) continue;
      std::int64_t next = 0;
      if (!p.domain.empty()) {
        for (const auto &d : p.domain)
          if (auto v = spec::eval_int(d, {}); v && *v > cur->second && (next == 0 || *v < next)) next = *v;
        if (next == 0) continue;
      } else {
        next = spec::saturating_mul(cur->second, 2);
      }
      ++tried;
      ModelOptions vo = o;
      vo.overrides[p.name] = next;
      try_one("--set " + p.name + "=" + std::to_string(next), k, vo);
    }
  }
  const spec::Target *t = spec::find_target(m.target);
  if (t && t->kind == spec::TargetKind::gpu) {
    spec::KernelSpec v = k;
    std::int64_t depth = km.max_concurrent_steps + 1;
    std::erase_if(v.settings, [](const spec::Setting &s) { return s.key == "max_concurrent_steps"; });
    v.settings.push_back({"max_concurrent_steps", Expr::integer(depth), {}, {}});
    try_one("max_concurrent_steps=" + std::to_string(depth), v, o);
  } else if (decl && m.steps > 1) {
    spec::KernelSpec v = k;
    std::int64_t depth = 2;
    if (auto i = km.operand_index(dom.name)) depth = km.operands[*i].buffer_count + 1;
    for (auto &op : v.operands)
      if (op.name == dom.name) op.pipeline_mode.buffer_count = Expr::integer(depth);
    try_one("buffer_count=" + std::to_string(depth) + " on " + dom.name, v, o);
  }
  return out;
}

// The time, bound and bubbles of a timed walk.
void fill(Model &m, const Timing &tm) {
  m.flops = tm.flops;
  m.seconds = tm.seconds;
  m.compute_seconds = tm.compute_seconds;
  m.copy_seconds = tm.copy_seconds;
  m.startup_seconds = tm.compute_seconds > 0 ? tm.first_compute : tm.seconds;
  m.drain_seconds = tm.compute_seconds > 0 ? tm.seconds - tm.last_compute_end : 0;
  m.utilization = tm.seconds > 0 ? tm.compute_seconds / tm.seconds : 0;
  m.bubble_fraction = tm.seconds > 0 ? (m.startup_seconds + m.drain_seconds) / tm.seconds : 0;
  const double steady = tm.seconds - m.startup_seconds - m.drain_seconds;
  // (With no compute the whole time is start-up: the copies' latency shows
  // as the time beyond their bandwidth time.)
  m.latency_bound = tm.compute_seconds > 0 ? steady > 1.5 * std::max(tm.copy_seconds, tm.compute_seconds)
                                           : tm.seconds > 1.5 * tm.copy_seconds;
  m.bound = tm.copy_seconds > tm.compute_seconds || m.latency_bound ? Bound::memory : Bound::compute;
  m.timeline = tm.steps;
}

ModelResult model_one(const spec::KernelSpec &k, const ModelOptions &o) {
  ModelResult r;
  // Scalar prefetch and SMEM state: the kernel elaborated with its given
  // contents (the rest picked with seed 0), as `lower` and `run` see it.
  if (!k.prefetches.empty() || spec::has_state(k)) {
    spec::StateElaboration e = spec::elaborate_picked(k, o.overrides);
    if (!e.kernel) {
      r.errors = e.errors;
      r.unknown = e.unknown;
      return r;
    }
    return model_one(*e.kernel, o);
  }
  std::string target = o.target ? *o.target : spec::kernel_target(k, std::nullopt).value_or(kDefaultTarget);
  const spec::Target *t = spec::find_target(target);
  if (!t) {
    r.unknown = spec::unknown_target_message(target);
    return r;
  }
  const Machine mc = o.machine ? *o.machine : machine_of(*t);
  if (!(mc.alpha_s >= 0 && mc.beta_bytes_per_s > 0 && mc.flops_per_s > 0)) {
    r.unknown = "no alpha, beta and F for target '" + target + "'";
    return r;
  }
  auto built = verifier::rules::build_model(k, o.overrides, target);
  if (!built.model) {
    if (built.error) r.errors.push_back(*built.error);
    r.unknown = built.unknown_reason;
    return r;
  }
  const auto &km = *built.model;
  spec::LowerOptions lo;
  lo.overrides = o.overrides;
  lo.target = target;
  std::vector<spec::Diagnostic> lower_errors;
  auto lowered = spec::lower(k, lo, lower_errors);
  if (!lowered) {
    // A kernel the lowering cannot schedule has no pipeline to time.
    r.unknown = lower_errors.empty()
                    ? "it does not lower"
                    : "line " + std::to_string(lower_errors[0].loc.line) + ": " + lower_errors[0].message;
    return r;
  }
  // The simulation walks every step, in time linear in the grid.
  constexpr std::int64_t kMaxModeledSteps = std::int64_t{1} << 18;
  if (const std::int64_t n = spec::num_points(lowered->grid); n > kMaxModeledSteps) {
    r.unknown = "its grid has " + std::to_string(n) + " steps, more than the " +
                std::to_string(kMaxModeledSteps) +
                " the model simulates one by one (model it with smaller params: --set)";
    return r;
  }
  auto by_loc = body_flops(k, o.overrides);
  FlopsOf flops = [&](const spec::Stmt &s, const std::vector<spec::StepRef> &,
                      const std::optional<spec::StepRef> &) {
    auto it = by_loc.find({s.loc.line, s.loc.col});
    return it == by_loc.end() ? std::int64_t{0} : it->second;
  };
  Model m;
  m.kernel = k.name;
  m.target = target;
  m.machine = mc;
  Timing tm;
  try {
    tm = simulate(*lowered, flops, m.machine);
  } catch (const spec::StepError &e) {
    // A fault (an out-of-bounds block) is a bug `check` reports; the
    // schedule stops there, so there is no time to predict.
    // The message quotes the ref in the lowered program's own names; what
    // it resolved to follows the quote.
    std::string why = e.what();
    if (auto q = why.find("': "); !why.empty() && why[0] == '\'' && q != std::string::npos)
      why = why.substr(q + 3);
    r.unknown = "its schedule faults at line " + std::to_string(e.loc.line) + " (" + why +
                "); `pipecheck check` reports it";
    return r;
  }
  m.steps = spec::num_points(lowered->grid);
  fill(m, tm);
  m.flops_step = m.steps > 0 ? m.flops / m.steps : 0;
  for (const auto &b : lowered->bindings) {
    if (b.role == spec::Role::scratch) continue;
    auto i = km.operand_index(b.operand);
    if (!i) continue;
    const auto &x = km.operands[*i];
    // A memory_space=any operand moves what the body's DMAs copy of it.
    const bool by_hand = !x.windowed && !b.hbm.empty();
    if (!x.windowed && !by_hand) continue;
    OperandCost c;
    c.name = x.name;
    c.role = x.role;
    c.block_bytes = by_hand ? 0 : x.block_bytes();
    c.body_copies = by_hand;
    c.array_bytes = spec::saturating_mul(elements(x.shape), spec::dtype_bytes(x.dtype));
    for (const auto &tr : tm.traffic)
      if (tr.buffer == (by_hand ? b.hbm : b.window)) {
        c.copies = tr.copies_in + tr.copies_out;
        c.bytes = spec::saturating_add(tr.bytes_in, tr.bytes_out);
      }
    if (by_hand && c.copies == 0) continue;
    c.seconds = static_cast<double>(c.bytes) / m.machine.beta_bytes_per_s;
    m.bytes = spec::saturating_add(m.bytes, c.bytes);
    m.operands.push_back(std::move(c));
  }
  m.sram_bytes = verifier::rules::sram_bytes(km);
  m.sram_budget = verifier::rules::sram_budget(*t, km.vmem_limit_bytes);
  if (m.bound == Bound::memory && !m.operands.empty()) {
    std::size_t d = 0;
    for (std::size_t i = 1; i < m.operands.size(); ++i)
      if (m.operands[i].bytes > m.operands[d].bytes) d = i;
    m.dominant = d;
    // A larger block or another buffer means nothing for copies by hand.
    if (o.alternatives && !m.operands[d].body_copies) m.alternatives = alternatives(k, o, m, km);
  }
  r.model = std::move(m);
  return r;
}

} // namespace

Machine machine_of(const spec::Target &t) { return {t.alpha_s, t.hbm_bytes_per_s, t.flops_per_s}; }

const char *to_string(Bound b) { return b == Bound::memory ? "memory" : "compute"; }

std::map<std::pair<int, int>, std::int64_t> body_flops(const spec::KernelSpec &k,
                                                       const spec::Env &overrides) {
  spec::ExprTypes types;
  (void)spec::typecheck(k, overrides, &types);
  std::map<std::pair<int, int>, std::int64_t> out;
  block_flops(k.body, types, out);
  return out;
}

Timing simulate(const spec::Lowered &l, const FlopsOf &flops, const Machine &m) {
  spec::Env env;
  Timer timer(l.program, &l, flops, m);
  spec::Stepper st(l.program, l.program.body, env);
  timer.stepper = &st;
  st.run(timer);
  return timer.finish();
}

Timing simulate(const spec::Program &p, const spec::Env &params, const FlopsOf &flops, const Machine &m) {
  spec::Env env = params;
  Timer timer(p, nullptr, flops, m);
  spec::Stepper st(p, p.body, env);
  timer.stepper = &st;
  st.run(timer);
  return timer.finish();
}

namespace {

std::int64_t box_elements(const spec::StepBox &b) {
  std::int64_t n = 1;
  for (const auto &[lo, hi] : b)
    n = spec::saturating_mul(n, std::max<std::int64_t>(hi - lo, 0));
  return n;
}

// Flops per element of a pipeline value: its arithmetic nodes; a dot 2 x K.
std::int64_t per_element(const Expr &e, const std::vector<spec::StepRef> &reads) {
  std::int64_t n = 0;
  for (const auto &a : e.args)
    n = spec::saturating_add(n, per_element(a, reads));
  if (moves_data(e.op)) return n;
  switch (e.op) {
  case Op::Call:
    if (e.name == "dot" && !reads.empty() && !reads[0].place.box.empty()) {
      const auto &last = reads[0].place.box.back();
      return spec::saturating_add(
          n, spec::saturating_mul(2, std::max<std::int64_t>(last.second - last.first, 0)));
    }
    if (e.name == "cast" || e.name == "reshape" || e.name == "broadcast_to" || e.name == "transpose" ||
        e.name == "iota" || e.name == "full")
      return n;
    return spec::saturating_add(n, 1);
  default: return spec::saturating_add(n, 1);
  }
}

} // namespace

std::int64_t pipeline_flops(const spec::Stmt &s, const std::vector<spec::StepRef> &reads,
                            const std::optional<spec::StepRef> &write) {
  const auto *a = std::get_if<spec::Assign>(&s.kind);
  if (!a || !write) return 0;
  std::int64_t per = per_element(a->value, reads) + (a->accumulate ? 1 : 0);
  return spec::saturating_mul(per, box_elements(write->place.box));
}

ModelResult model_program(const spec::Program &p, const ModelOptions &o) {
  ModelResult r;
  std::string target = o.target.value_or(kDefaultTarget);
  const spec::Target *t = spec::find_target(target);
  if (!t) {
    r.unknown = spec::unknown_target_message(target);
    return r;
  }
  const Machine mc = o.machine ? *o.machine : machine_of(*t);
  if (!(mc.alpha_s >= 0 && mc.beta_bytes_per_s > 0 && mc.flops_per_s > 0)) {
    r.unknown = "no alpha, beta and F for target '" + target + "'";
    return r;
  }
  auto bound = spec::bind_params(p.params, o.overrides, true);
  if (!bound.errors.empty()) {
    r.unknown = bound.errors[0].message;
    return r;
  }
  Model m;
  m.kernel = p.name;
  m.pipeline = true;
  m.target = target;
  m.machine = mc;
  Timing tm;
  try {
    tm = simulate(p, bound.env, pipeline_flops, mc);
  } catch (const spec::StepError &e) {
    r.unknown = "it cannot be walked at line " + std::to_string(e.loc.line) + " (" + e.what() +
                "); `pipecheck check` reports it";
    return r;
  }
  fill(m, tm);
  for (const auto &b : p.buffers) {
    if (b.kind != spec::BufferKind::sram && b.kind != spec::BufferKind::smem) continue;
    std::int64_t elems = 1;
    for (const auto &d : b.shape)
      elems =
          spec::saturating_mul(elems, std::max<std::int64_t>(spec::eval_int(d, bound.env).value_or(0), 0));
    std::int64_t block = spec::saturating_mul(elems, spec::dtype_bytes(b.dtype));
    std::int64_t slots =
        b.slots ? std::max<std::int64_t>(spec::eval_int(*b.slots, bound.env).value_or(1), 1) : 1;
    m.sram_bytes = spec::saturating_add(m.sram_bytes, spec::saturating_mul(slots, block));
    for (const auto &tr : tm.traffic) {
      if (tr.buffer != b.name) continue;
      OperandCost c;
      c.name = b.name;
      c.role = tr.copies_in > 0 ? spec::Role::in : spec::Role::out;
      c.block_bytes = block;
      c.copies = tr.copies_in + tr.copies_out;
      c.bytes = spec::saturating_add(tr.bytes_in, tr.bytes_out);
      c.seconds = static_cast<double>(c.bytes) / mc.beta_bytes_per_s;
      m.bytes = spec::saturating_add(m.bytes, c.bytes);
      m.operands.push_back(std::move(c));
    }
  }
  m.steps = static_cast<std::int64_t>(tm.steps.size());
  m.flops_step = m.steps > 0 ? m.flops / m.steps : 0;
  m.sram_budget = t->default_sram_bytes;
  if (m.bound == Bound::memory && !m.operands.empty()) {
    std::size_t d = 0;
    for (std::size_t i = 1; i < m.operands.size(); ++i)
      if (m.operands[i].bytes > m.operands[d].bytes) d = i;
    m.dominant = d;
  }
  r.model = std::move(m);
  return r;
}

ModelResult model_kernel(const spec::KernelSpec &k, const ModelOptions &o) { return model_one(k, o); }

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

} // namespace

std::string format_seconds(double s) {
  if (s == 0) return "0 s";
  if (s < 1e-9) return fixed(s * 1e12, 1) + " ps";
  if (s < 1e-6) return fixed(s * 1e9, 1) + " ns";
  if (s < 1e-3) return fixed(s * 1e6, 1) + " us";
  if (s < 1) return fixed(s * 1e3, 2) + " ms";
  return fixed(s, 2) + " s";
}

std::string format_percent(double f) {
  double p = f * 100;
  if (p > 0 && p < 1) return fixed(p, std::min(6, 1 - static_cast<int>(std::floor(std::log10(p))))) + "%";
  return fixed(p, 1) + "%";
}

std::string summary(const Model &m) {
  const auto &mc = m.machine;
  std::string out = format_seconds(m.seconds) + " predicted on " + m.target + " (alpha " +
                    format_seconds(mc.alpha_s) + ", beta " + fixed(mc.beta_bytes_per_s / 1e9, 0) +
                    " GB/s, F " + fixed(mc.flops_per_s / 1e12, 0) + " TFLOP/s): " + to_string(m.bound) +
                    "-bound";
  if (m.bound == Bound::memory && m.latency_bound) out += " (latency: more buffers hide it)";
  if (m.dominant && *m.dominant < m.operands.size())
    out += ", " + m.operands[*m.dominant].name + " moves the most bytes";
  out += "; utilization " + format_percent(m.utilization) + ", start-up and drain bubbles " +
         format_percent(m.bubble_fraction);
  return out;
}

} // namespace pipecheck::perf
