// A kernel's full check: the spec-level rules and the race checker on the
// program spec::lower emits for the same binding.
#include "spec/bind.hpp"
#include "spec/checked.hpp"
#include "spec/lower.hpp"
#include "spec/nested.hpp"
#include "spec/opaque.hpp"
#include "spec/prefetch.hpp"
#include "spec/print.hpp"
#include "spec/state.hpp"
#include "spec/step.hpp"
#include "spec/targets.hpp"
#include "verifier/check.hpp"
#include "verifier/races/cutoff.hpp"
#include "verifier/races/races.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/model.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <set>

namespace pipecheck::verifier {

namespace {

// The comma-separated parts of `s` outside brackets.
std::vector<std::string> top_level_parts(const std::string &s) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char c : s) {
    depth += (c == '(' || c == '[') - (c == ')' || c == ']');
    if (c == ',' && depth == 0) {
      out.emplace_back();
      continue;
    }
    out.back() += c;
  }
  for (auto &x : out)
    x.erase(0, x.find_first_not_of(' '));
  return out;
}

std::string joined(const std::vector<std::string> &parts, std::size_t from) {
  std::string out;
  for (std::size_t k = from; k < parts.size(); ++k)
    out += (k > from ? ", " : "") + parts[k];
  return out;
}

// A lowered index-out-of-bounds on an operand's window (`'x_vmem[slot, 1,
// ds(8, 8), :]': slice 16:24 is out of bounds for dim 2 (extent 16) of
// x_vmem[2, 2, 16, 128]`) in the kernel's terms: the operand's ref, its dim
// and its block (`'x[1, ds(8, 8), :]': ... for dim 1 (extent 16) of x[2, 16,
// 128]`), as `run` says it. Any other message stays as it is.
void in_kernel_terms(Finding &f, const spec::Lowered &low) {
  std::string &m = f.message;
  if (f.rule != Rule::index_out_of_bounds || m.size() < 4 || m[0] != '\'') return;
  const auto open = m.find('['), quote = m.find("]': ");
  if (open == std::string::npos || quote == std::string::npos || open > quote) return;
  const std::string window = m.substr(1, open - 1);
  const spec::BufferBinding *b = nullptr;
  for (const auto &x : low.bindings)
    if (x.window == window) b = &x;
  const spec::Buffer *buf = nullptr;
  for (const auto &x : low.program.buffers)
    if (x.name == window) buf = &x;
  if (!b || !buf) return;
  const std::size_t slot = buf->slots ? 1 : 0; // (a ring's first subscript is its slot)
  const auto subs = top_level_parts(m.substr(open + 1, quote - open - 1));
  const std::string dim_at = " is out of bounds for dim ", of = ") of " + window + "[";
  const auto d0 = m.find(dim_at, quote), o0 = m.find(of, quote);
  if (subs.size() < slot || d0 == std::string::npos || o0 == std::string::npos) return;
  const auto d1 = m.find(' ', d0 + dim_at.size());
  const auto close = m.find(']', o0 + of.size());
  if (d1 == std::string::npos || close == std::string::npos) return;
  const int dim = std::stoi(m.substr(d0 + dim_at.size(), d1 - d0 - dim_at.size()));
  if (dim < static_cast<int>(slot)) return; // (the slot itself: a program fault, kept as it is)
  const auto extents = top_level_parts(m.substr(o0 + of.size(), close - o0 - of.size()));
  if (extents.size() < slot) return;
  m = "'" + b->operand + "[" + joined(subs, slot) +
      "]': " + m.substr(quote + 4, d0 + dim_at.size() - quote - 4) +
      std::to_string(dim - static_cast<int>(slot)) + m.substr(d1, o0 - d1) + ") of " + b->operand + "[" +
      joined(extents, slot) + m.substr(close);
}

// Gives each event of a lowered program's finding the grid point of the step
// that issued it, and says so in the message, the witness and the notes.
// On a grid cut, the kernel's grid point of the cut program's (`cut`).
void locate_in_grid(Finding &f, const spec::Lowered &low, const spec::GridCut *cut = nullptr) {
  std::optional<std::vector<std::int64_t>> at, other;
  for (std::size_t i = 0; i < f.witness.trace.size(); ++i) {
    TraceEvent &t = f.witness.trace[i];
    if (t.top_level < 0) continue;
    t.grid_point = low.point(low.step(t.top_level, t.iterations));
    if (cut) t.grid_point = cut->kernel_point(t.grid_point);
    if (t.anchor)
      at = t.grid_point;
    else if (!other)
      other = t.grid_point;
    // One note per trace event, in the same order (races::check_concrete).
    if (f.notes.size() == f.witness.trace.size()) {
      std::string &m = f.notes[i].message;
      const std::string head = "event " + std::to_string(t.index);
      if (m.rfind(head + ": ", 0) == 0)
        m = head + " at grid point " + spec::format_tuple(t.grid_point) + m.substr(head.size());
      // The step loop's `(s = 3, ...)` says the grid point again: dropped.
      if (low.main_loop >= 0 && t.top_level == low.main_loop && !t.iterations.empty())
        if (const auto *f =
                std::get_if<spec::For>(&low.program.body[static_cast<std::size_t>(low.main_loop)].kind)) {
          const std::string step = f->var + " = " + std::to_string(t.iterations[0]);
          if (auto k = m.find("(" + step + ", "); k != std::string::npos)
            m.erase(k + 1, step.size() + 2); // "(s = 3, slot 0)": "(slot 0)"
          else if (auto j = m.find(" (" + step + ")"); j != std::string::npos)
            m.erase(j, step.size() + 3); // " (s = 3)": gone
        }
    }
  }
  if (at) f.witness.items.push_back({"grid_point", *at});
  if (other && other != at) f.witness.items.push_back({"other_grid_point", *other});
  in_kernel_terms(f, low);
  f.message += " (in the lowered program";
  if (at) f.message += ", at grid point " + spec::format_tuple(*at);
  f.message += ")";
}

// The kernel operands whose hbm array or window a lowered statement names
// (an aliased output's hbm array is its input's, so it names both).
std::set<std::string> operands_of(const TraceEvent &t, const spec::Lowered &low) {
  std::set<std::string> names(t.buffers.begin(), t.buffers.end()), out;
  for (const auto &b : low.bindings)
    if (names.count(b.window) || (!b.hbm.empty() && names.count(b.hbm))) out.insert(b.operand);
  return out;
}

// A lowered index-out-of-bounds on a copy of an operand's window names a
// slice ("slice 64:32 is out of bounds"); say which block of which operand
// the index map gave, and along which dim it leaves the array: the first
// step, from the anchored one on, whose block is outside.
void name_block(Finding &f, const spec::KernelSpec &k, const spec::Lowered &low,
                const std::set<std::string> &ops, const CheckOptions &o) {
  std::optional<std::int64_t> from;
  for (const auto &t : f.witness.trace)
    if (t.anchor && t.top_level >= 0) from = low.step(t.top_level, t.iterations);
  if (!from) return;
  spec::Env env = spec::param_env(k.params, o.overrides);
  spec::Binding b = spec::bind_kernel(k, env);
  if (!b.kernel) return;
  const std::int64_t steps = spec::num_points(low.grid);
  for (std::size_t i = 0; i < b.kernel->operands.size(); ++i) {
    const auto &op = b.kernel->operands[i];
    if (!op.windowed || !ops.count(op.name)) continue;
    for (std::int64_t s = *from; s < steps; ++s) {
      const auto p = low.point(s);
      auto bi = spec::block_index(*b.kernel, i, p);
      if (!bi.value) return;
      for (std::size_t d = 0; d < bi.value->size(); ++d) {
        const std::int64_t x = (*bi.value)[d];
        if (x >= 0 && x < op.num_blocks[d]) continue;
        f.message = "the index_map of '" + op.name + "' maps grid point " + spec::format_tuple(p) +
                    " to block " + spec::format_tuple(*bi.value) + ": block index " + std::to_string(x) +
                    " along dim " + std::to_string(d) + " is outside [0, " +
                    std::to_string(op.num_blocks[d]) + "), so its copy " + f.message;
        f.witness.items.push_back({"block", *bi.value});
        f.witness.items.push_back({"dim", static_cast<std::int64_t>(d)});
        return;
      }
    }
  }
}

// A write-back of an aliased output's window that nothing stored: the
// window is not fetched from the input it aliases (Pallas copies an output
// block out, never in), so the block carries garbage over what the input
// held. Says so, in the kernel's words.
void explain_aliased_write_back(Finding &f, const spec::KernelSpec &k, const std::set<std::string> &ops) {
  const TraceEvent *at = nullptr;
  for (const auto &t : f.witness.trace)
    if (t.anchor) at = &t;
  if (!at || at->statement.rfind("copy_out_start(", 0) != 0) return;
  for (const auto &a : k.aliases) {
    if (!ops.count(a.output)) continue;
    const auto *g = f.witness.get<std::vector<std::int64_t>>("grid_point");
    const std::string where = g ? " at grid point " + spec::format_tuple(*g) : "";
    if (f.message.find(", which nothing has written") != std::string::npos)
      f.message = "writes back the block of output '" + a.output + "'" + where +
                  ", which no statement stored: an aliased output's window is not fetched from '" + a.input +
                  "', so the block's old contents are replaced by garbage (in the lowered program)";
    spec::Diagnostic n;
    n.loc = a.loc;
    n.severity = spec::Severity::note;
    n.message = "'" + a.output + "' is aliased to '" + a.input + "': store every block the grid visits (`" +
                a.output + "[...] = " + a.input +
                "[...]` where nothing else does), or give both memory_space=any and copy only what changes";
    f.notes.push_back(std::move(n));
    return;
  }
}

// The race checker walks a concrete program event by event; past this many
// steps that costs seconds and memory for a verdict the spec rules mostly
// decide already, so it is left undecided and says so.
constexpr std::int64_t kMaxCheckedSteps = 1 << 16;

// A Triton kernel of more programs is checked on its grid cut, spec rules
// and lowered program both (spec_rules_on_cut): each program's step is whole
// rows of elements that the rules and the padding flow follow lane by lane.
constexpr std::int64_t kTritonCutFromPoints = 256;

struct LoweredCheck {
  Status status = Status::unknown;
  std::vector<Finding> findings;
  /// Per finding: the operands its anchor statement touches.
  std::vector<std::set<std::string>> operands;
  std::string reason; ///< why unknown, or what was shown
};

// The lowered program's check through the kernel's grid cut, when it has one
// and the cut's states recur; nullopt (with `why`) otherwise. Findings on the
// cut are mapped to the kernel's grid points; within the concretely checked
// size the caller re-runs the whole program for their exact witnesses.
std::optional<LoweredCheck> check_on_cut(const spec::KernelSpec &k, const spec::Lowered &low,
                                         const CheckOptions &o, const LoweredCheck &base, std::string &why) {
  if (low.main_loop < 0) {
    why = "the lowered program is unrolled";
    return std::nullopt;
  }
  // Slots repeat with the ring sizes: a period every ring divides.
  std::int64_t period = 1;
  for (const auto &b : low.program.buffers)
    if (b.slots)
      if (auto n = spec::eval_int(*b.slots, {}); n && *n > 0) period = std::lcm(period, *n);
  // The smaller cut first (the state recurs from the stretch's first
  // value); then one with room for a pipeline's start-up to pass.
  const std::int64_t reach = spec::step_reach(low.program, low.main_loop);
  spec::CutPlan plan;
  std::optional<spec::Lowered> cut_low;
  races::CutCheck cc;
  for (std::int64_t window : {std::int64_t{0}, period}) {
    plan = spec::plan_cut(k, o.overrides, period, reach, window);
    if (!plan.cut) {
      why = plan.reason;
      return std::nullopt;
    }
    // Axes the body names in values are kept whole: the cut may still be
    // past what the race checker runs concretely.
    if (const std::int64_t n = spec::num_points(plan.cut->grid); n > kMaxCheckedSteps) {
      why = "its cut to " + spec::format_tuple(plan.cut->grid) + " still has " + std::to_string(n) +
            " steps" + (plan.reason.empty() ? std::string() : ": " + plan.reason);
      return std::nullopt;
    }
    spec::LowerOptions lo;
    lo.overrides = o.overrides;
    lo.target = o.target;
    lo.check_blocks = false;
    lo.cut = &*plan.cut;
    std::vector<spec::Diagnostic> errors;
    cut_low = spec::lower(k, lo, errors);
    if (!cut_low) {
      why = "the cut grid cannot be lowered";
      return std::nullopt;
    }
    try {
      cc = races::check_cut(*cut_low, *plan.cut);
    } catch (const races::Unsupported &u) {
      why = std::string("the cut program cannot run: ") + u.what();
      return std::nullopt;
    }
    if (cc.recurs) break;
  }
  const std::int64_t steps = spec::num_points(low.grid), cut_steps = spec::num_points(cut_low->grid);
  // Up to the first step at which a cut axis reaches the values the cut
  // moved down (`upper`), the cut program's steps are the kernel's: a
  // finding there is the kernel's, at the same grid point.
  std::int64_t same = 0;
  while (same < cut_steps) {
    const auto c = cut_low->point(same);
    bool moved = false;
    for (std::size_t e = 0; e < plan.cut->axes.size() && e < c.size(); ++e)
      moved = moved || (plan.cut->axes[e].drop > 0 && c[e] >= plan.cut->axes[e].upper);
    if (moved) break;
    ++same;
  }
  const auto step_of = [&](const Finding &f) {
    std::int64_t at = cut_steps;
    for (const auto &t : f.witness.trace)
      if (t.anchor && t.top_level >= 0) at = cut_low->step(t.top_level, t.iterations);
    return at;
  };
  // Every finding lies before that step, and either the run stopped at a
  // fault there or the cut's state recurs (so the steps it leaves out hold
  // no finding its moved steps do not): the kernel's run finds the same
  // findings at the same steps, first occurrences and all (a masked load
  // one lane too wide at the first of 8192 rows: not the whole grid again).
  const bool all_in_prefix =
      !cc.findings.empty() && std::all_of(cc.findings.begin(), cc.findings.end(),
                                          [&](const Finding &f) { return step_of(f) < same; });
  const bool exact_prefix = all_in_prefix && (cc.recurs || cc.last_step < same);
  if (exact_prefix || (!cc.recurs && !cc.findings.empty() && steps > (1 << 16))) {
    // (Past the concrete size, findings after the prefix are left: the
    // run stopped at a fault before its state could recur.)
    LoweredCheck out = base;
    for (auto &f : cc.findings) {
      if (step_of(f) >= same) continue;
      locate_in_grid(f, *cut_low);
      std::set<std::string> ops;
      for (const auto &t : f.witness.trace)
        if (t.anchor) ops = operands_of(t, *cut_low);
      out.operands.push_back(std::move(ops));
      out.findings.push_back(std::move(f));
    }
    if (!out.findings.empty()) {
      out.status = Status::violation;
      out.reason = "the lowered program (" + std::to_string(steps) + " grid steps), run on its grid cut to " +
                   spec::format_tuple(cut_low->grid) + " up to a fault before the cut's first moved value";
      return out;
    }
  }
  if (!cc.recurs) {
    why = cc.reason;
    return std::nullopt;
  }
  if (!cc.findings.empty() && steps <= (1 << 16)) {
    why = "its findings are re-run on the whole grid";
    return std::nullopt;
  }
  LoweredCheck out = base;
  out.status = cc.findings.empty() ? Status::verified : Status::violation;
  std::string axes;
  for (std::size_t e = 0; e < plan.cut->axes.size(); ++e)
    if (plan.cut->axes[e].drop > 0) axes += (axes.empty() ? "" : ", ") + std::to_string(e);
  std::string how = "checked on its grid cut to " + spec::format_tuple(cut_low->grid) + " (" +
                    std::to_string(cut_steps) + " steps), whose state recurs every " +
                    std::to_string(plan.cut->axes[0].period) + " values of axis " + axes;
  for (auto &f : cc.findings) {
    locate_in_grid(f, *cut_low, &*plan.cut);
    spec::Diagnostic note;
    note.severity = spec::Severity::note;
    note.loc = f.loc;
    note.message = "found on the grid cut to " + spec::format_tuple(cut_low->grid) +
                   "; the hbm coordinates above are the cut arrays'";
    f.notes.push_back(std::move(note));
    std::set<std::string> ops;
    for (const auto &t : f.witness.trace)
      if (t.anchor) ops = operands_of(t, *cut_low);
    out.operands.push_back(std::move(ops));
    out.findings.push_back(std::move(f));
  }
  out.reason = out.status == Status::verified
                   ? "the lowered program (" + std::to_string(steps) + " grid steps) is race-free: " + how
                   : "the lowered program, " + how;
  return out;
}

// A body copy (dma_start) waited at a grid point that differs from the one
// that started it along a `parallel` axis: the cores that split the axis
// each run their own grid points with their own semaphores, so on a chip
// with two TensorCores one core waits for a copy it never started (a hang)
// and the other ends with its copy in flight. Decided on the lowered
// program's run, which retires each copy at the wait that takes it.
class CoreCrossing : public spec::StepConsumer {
public:
  CoreCrossing(const spec::KernelSpec &k, const spec::Lowered &low) : low_(low) {
    // Each statement's top-level statement (Lowered::step's index).
    for (std::size_t i = 0; i < low.program.body.size(); ++i)
      spec::for_each_stmt(low.program.body[i], [&](const spec::Stmt &s) {
        top_level_[&s] = static_cast<int>(i);
        body_copies_ = body_copies_ || std::holds_alternative<spec::Dma>(s.kind);
      });
    const auto &sem = k.dimension_semantics;
    for (std::size_t a = 0; sem && a < sem->size(); ++a)
      parallel_.push_back((*sem)[a] == spec::DimSemantics::parallel);
  }
  std::optional<Finding> run() {
    // (Only a program with body copies and a parallel axis is run again.)
    if (!body_copies_ || std::find(parallel_.begin(), parallel_.end(), true) == parallel_.end())
      return std::nullopt;
    spec::Env env;
    spec::Stepper st(low_.program, low_.program.body, env);
    stepper_ = &st;
    env_ = &env;
    try {
      st.run(*this);
    } catch (const std::exception &) {
      return std::nullopt; // the race checker reports what stops the run
    }
    return std::move(found_);
  }

  void on_compute(const spec::Stmt &, const std::vector<spec::StepRef> &,
                  const std::optional<spec::StepRef> &) override {}
  void on_start(const spec::Stmt &s, int op, const spec::AsyncStart &) override {
    if (std::holds_alternative<spec::Dma>(s.kind)) started_[op] = {step(s), s.loc};
  }
  void on_wait(const spec::Stmt &s, const std::optional<spec::StepRef> &,
               const std::vector<int> &retired) override {
    // A regular semaphore: the signals a wait takes, oldest first (each
    // core has its own semaphore, as its own DMA semaphores).
    if (const auto *d = std::get_if<spec::Dma>(&s.kind);
        d && (d->action == spec::DmaAction::signal || d->action == spec::DmaAction::sem_wait) && !found_) {
      const auto n = spec::eval_int(d->n, *env_);
      if (!n) return;
      const spec::StepRef r = stepper_->resolve(d->sem, s.loc);
      auto &q = signals_[{r.place.buffer, r.place.box}];
      const std::int64_t at = step(s);
      if (d->action == spec::DmaAction::signal) {
        if (*n > 0) q.push_back({at, *n, s.loc});
        return;
      }
      const auto here = low_.point(at);
      for (std::int64_t need = *n; need > 0 && !q.empty();) {
        Signal &g = q.front();
        const auto p = low_.point(g.step);
        for (std::size_t a = 0; a < parallel_.size() && a < p.size() && !found_; ++a)
          if (parallel_[a] && p[a] != here[a]) found_ = finding(s, g.loc, p, here, a, true);
        const std::int64_t take = std::min(need, g.count);
        need -= take;
        g.count -= take;
        if (g.count == 0) q.pop_front();
      }
      return;
    }
    for (int op : retired) {
      auto it = started_.find(op);
      if (it == started_.end() || found_) continue;
      const auto p = low_.point(it->second.first), q = low_.point(step(s));
      for (std::size_t a = 0; a < parallel_.size() && a < p.size(); ++a)
        if (parallel_[a] && p[a] != q[a]) {
          found_ = finding(s, it->second.second, p, q, a);
          break;
        }
    }
  }
  void on_undefined(const spec::Stmt &, const spec::StepPlace &) override {}
  void on_fault(const spec::Stmt &, spec::FaultKind, const std::string &) override {}
  void on_end(const std::vector<int> &) override {}

private:
  std::int64_t step(const spec::Stmt &s) const {
    auto it = top_level_.find(&s);
    return low_.step(it == top_level_.end() ? -1 : it->second, stepper_->loop_values());
  }
  // The wait at q that takes what a grid point p across parallel axis
  // `axis` began: a copy it started, or (`signal`) a semaphore signal.
  Finding finding(const spec::Stmt &wait, const spec::Loc &origin, const std::vector<std::int64_t> &p,
                  const std::vector<std::int64_t> &q, std::size_t axis, bool signal = false) const {
    Finding f;
    f.rule = Rule::wait_without_copy;
    f.loc = wait.loc;
    const std::string ax = std::to_string(axis), at = spec::format_tuple(p);
    const std::string crossing =
        ", which differs along parallel axis " + ax + ": the cores that split axis " + ax;
    f.message =
        signal ? "this semaphore wait at grid point " + spec::format_tuple(q) +
                     " takes a signal made at grid point " + at + crossing +
                     " each have their own semaphores, so on a chip with two TensorCores this wait never "
                     "gets that signal (a hang); mark axis " +
                     ax + " `arbitrary`, or wait for each index of axis " + ax + "'s own signals"
               : "this wait at grid point " + spec::format_tuple(q) +
                     " takes the copy started at grid point " + at + crossing +
                     " each run their own grid points with their own semaphores, so on a chip with two "
                     "TensorCores one core waits for a copy it never started (a hang) and the other ends "
                     "with its copy in flight; mark axis " +
                     ax + " `arbitrary`, or start and wait each copy at one grid point";
    f.witness.items.push_back({"grid_point", q});
    f.witness.items.push_back({signal ? "signalled" : "started", p});
    f.witness.items.push_back({"axis", static_cast<std::int64_t>(axis)});
    spec::Diagnostic n;
    n.loc = origin;
    n.severity = spec::Severity::note;
    n.message = (signal ? "signalled at grid point " : "the copy started at grid point ") + at;
    f.notes.push_back(std::move(n));
    return f;
  }

  struct Signal {
    std::int64_t step, count;
    spec::Loc loc;
  };
  const spec::Lowered &low_;
  spec::Env *env_ = nullptr;
  std::map<std::pair<int, std::vector<std::pair<std::int64_t, std::int64_t>>>, std::deque<Signal>> signals_;
  bool body_copies_ = false;
  std::vector<bool> parallel_;
  std::map<const spec::Stmt *, int> top_level_;
  std::map<int, std::pair<std::int64_t, spec::Loc>> started_;
  const spec::Stepper *stepper_ = nullptr;
  std::optional<Finding> found_;
};

LoweredCheck check_lowered(const spec::KernelSpec &k, const CheckOptions &o) {
  LoweredCheck out;
  spec::LowerOptions lo;
  lo.overrides = o.overrides;
  lo.target = o.target;
  lo.check_blocks = false; // the spec rules have evaluated every block index
  std::vector<spec::Diagnostic> errors;
  auto low = spec::lower(k, lo, errors);
  if (!low) {
    out.reason = "the lowered program is not checked: " +
                 (errors.empty() ? std::string("the kernel cannot be lowered") : errors.front().message);
    return out;
  }
  const std::int64_t grid_steps = spec::num_points(low->grid);
  // A long grid whose middle repeats is checked on its cut (spec/cut.hpp):
  // the same verdict, in a run whose length does not grow with the grid.
  const std::int64_t cut_from = spec::uses_triton(k) ? kTritonCutFromPoints : std::int64_t{1} << 12;
  std::string cut_why;
  if (o.grid_cut && grid_steps > cut_from) {
    if (auto cut = check_on_cut(k, *low, o, out, cut_why)) return *cut;
  }
  if (grid_steps > kMaxCheckedSteps) {
    out.reason = "the lowered program is not checked: its " + std::to_string(grid_steps) +
                 " grid steps are more than the " + std::to_string(kMaxCheckedSteps) +
                 " the race checker runs concretely, and its grid has no cut (" +
                 (cut_why.empty() ? std::string("no axis repeats") : cut_why) + ")";
    return out;
  }
  // The program is concrete: every param is bound in its statements.
  CheckOptions po;
  po.timeout_ms = o.timeout_ms;
  po.n_max = o.n_max;
  po.step_of = [&](int top, const std::vector<std::int64_t> &it) { return low->step(top, it); };
  Verdict v = check_program(low->program, po);
  out.status = v.status;
  out.findings = std::move(v.findings);
  for (auto &f : out.findings) {
    locate_in_grid(f, *low);
    std::set<std::string> ops;
    for (const auto &t : f.witness.trace)
      if (t.anchor) ops = operands_of(t, *low);
    if (f.rule == Rule::index_out_of_bounds) name_block(f, k, *low, ops, o);
    if (f.rule == Rule::uninitialized_read) explain_aliased_write_back(f, k, ops);
    out.operands.push_back(std::move(ops));
  }
  if (v.status == Status::verified)
    out.reason = "the lowered program (" + std::to_string(grid_steps) + " grid steps) is race-free";
  else
    out.reason = "the lowered program: " + v.reason;
  if (auto crossing = CoreCrossing(k, *low).run()) {
    // (Ahead of the run's own findings: the crossing is their root cause.)
    out.findings.insert(out.findings.begin(), std::move(*crossing));
    out.operands.insert(out.operands.begin(), std::set<std::string>{});
    if (out.status != Status::violation) out.reason = "the lowered program's body copies cross cores";
    out.status = Status::violation;
  }
  return out;
}

// Whether a lowered program's finding is at a grid point past the first
// index of some parallel axis (false where it names no grid point).
bool past_first_parallel_index(const spec::KernelSpec &k, const Finding &f) {
  const auto *g = f.witness.get<std::vector<std::int64_t>>("grid_point");
  if (!g || !k.dimension_semantics) return false;
  for (std::size_t a = 0; a < g->size() && a < k.dimension_semantics->size(); ++a)
    if ((*k.dimension_semantics)[a] == spec::DimSemantics::parallel && (*g)[a] > 0) return true;
  return false;
}

// A TPU kernel's operands whose `buffered=` asks for more than two slots or
// for lookahead, as "'y' (buffered=3)", and how many: Pallas' Mosaic TPU
// lowering of a pallas_call raises on them (emit_pipeline takes them).
std::pair<std::string, int> deep_buffered_operands(const spec::KernelSpec &k) {
  if (spec::uses_triton(k) || spec::targets_gpu(k, std::nullopt)) return {"", 0};
  const spec::Env params = spec::param_env(k.params, {});
  std::string out;
  int count = 0;
  for (const auto &o : k.operands) {
    std::optional<std::int64_t> n;
    if (o.pipeline_mode.buffer_count) n = spec::eval_int(*o.pipeline_mode.buffer_count, params);
    if (!o.pipeline_mode.lookahead && !(n && *n > 2)) continue;
    out += (out.empty() ? "'" : ", '") + o.name + "' (" +
           (o.pipeline_mode.lookahead
                ? "buffered=(" + (n ? std::to_string(*n) : std::string("2")) + ", lookahead)"
                : "buffered=" + std::to_string(*n)) +
           ")";
    ++count;
  }
  return {out, count};
}

// A Triton kernel's spec rules on its grid cut (spec/cut.hpp). Its programs
// are independent: each one's rules (its loads, masks, stores) depend on the
// grid point only through its windows when the body names no cut axis, so a
// program of the cut stretch is any program of the kernel's stretch, shifted;
// what programs do to each other (two storing one element, an element none
// stores) reaches as far as a program's loads and stores reach past its own
// block, in blocks: the cut keeps that many values either side of where it
// moves values down (plan_cut's `reach`), so every neighbourhood of programs
// in the kernel is one of the cut's, shifted, and the other way round. The
// cut grid from which values are the kernel's moved up (GridCut::kernel_point)
// keeps that correspondence. So the cut's rules are the kernel's: the same
// verdict, at a cost that does not grow with the grid.

// How many values of a cut axis a program's loads and stores reach past its
// own block, over every program of the cut model `m` (each is a class of the
// kernel's); nullopt where some effect's box is not decided at a point.
std::optional<std::int64_t> footprint_reach(const rules::KernelModel &m, const spec::GridCut &cut) {
  std::int64_t reach = 0;
  // An access [lo, hi) relative to a block of `block` values along cut dim
  // d: in values of the cut axis, the blocks it reaches past, times the
  // values a block spans, and one more group of them where q values share
  // a block.
  auto widen = [&](std::int64_t lo, std::int64_t hi, std::int64_t block, const spec::CutDim &d) {
    const std::int64_t past = std::max<std::int64_t>({0, -lo, hi - block});
    const std::int64_t blocks = (past + d.step - 1) / d.step;
    reach = std::max(reach, blocks * d.per + (d.per > 1 ? d.per : 0));
  };
  const std::int64_t points = m.num_points();
  for (std::int64_t i = 0; i < points; ++i) {
    const auto p = spec::grid_point(m.grid, m.cta_axes, i);
    for (const auto &e : m.effects) {
      const auto &op = m.operands[e.operand];
      if (std::none_of(cut.dims.begin(), cut.dims.end(),
                       [&](const spec::CutDim &d) { return d.operand == op.name; }))
        continue;
      const auto box = e.kind == rules::Effect::read ? rules::ref_box_at(m, e, p) : rules::box_at(m, e, p);
      if (!box) return std::nullopt;
      for (const auto &d : cut.dims) {
        if (d.operand != op.name || d.step <= 0) continue;
        const auto dim = static_cast<std::size_t>(d.dim);
        if (dim >= box->size() || dim >= op.block.size()) continue;
        const auto [lo, hi] = (*box)[dim];
        if (hi > lo) widen(lo, hi, op.block[dim], d);
      }
    }
    // An input aliased to an output is the output's array: its accesses
    // meet the output's stores of other programs, so they reach past the
    // output's block by where they lie in the array (`x: i -> i + 3` beside
    // `o: i -> i` reaches three blocks).
    for (const auto &a : m.aliases) {
      const auto &x = m.operands[a.input], &o = m.operands[a.output];
      if (std::none_of(cut.dims.begin(), cut.dims.end(),
                       [&](const spec::CutDim &d) { return d.operand == o.name; }))
        continue;
      const auto xb = rules::block_at(m, a.input, p), ob = rules::block_at(m, a.output, p);
      if (!xb || !ob) return std::nullopt;
      for (const auto &e : m.effects) {
        if (e.operand != a.input) continue;
        const auto box = e.kind == rules::Effect::read ? rules::ref_box_at(m, e, p) : rules::box_at(m, e, p);
        if (!box) return std::nullopt;
        for (const auto &d : cut.dims) {
          if (d.operand != o.name || d.step <= 0) continue;
          const auto dim = static_cast<std::size_t>(d.dim);
          if (dim >= box->size() || dim >= o.block.size() || dim >= x.block.size() || dim >= xb->size() ||
              dim >= ob->size())
            continue;
          // (A dim whose index is an element offset, not a block index: no
          // reach decided.)
          auto set = [&](const std::vector<bool> &v) { return dim < v.size() && v[dim]; };
          if (set(x.element) || set(o.element) || set(x.bounded) || set(o.bounded)) return std::nullopt;
          const auto [lo, hi] = (*box)[dim];
          if (hi <= lo) continue;
          // (Saturating: a block index far out of bounds is index-out-of-bounds', a reach past any cut.)
          const std::int64_t xs = spec::saturating_mul((*xb)[dim], x.block[dim]),
                             os = spec::saturating_mul((*ob)[dim], o.block[dim]);
          if (std::abs(xs) > (std::int64_t{1} << 61) || std::abs(os) > (std::int64_t{1} << 61))
            return std::nullopt;
          widen(xs - os + lo, xs - os + hi, o.block[dim], d);
        }
      }
    }
  }
  return reach;
}

// Replaces every `from` in `s` by `to`.
void replace_all(std::string &s, const std::string &from, const std::string &to) {
  if (from == to || from.empty()) return;
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
}

// A finding of the cut kernel in the kernel's terms: its grid points
// (GridCut::kernel_point), the elements and blocks of a dim that follows a
// cut axis (moved up with the programs whose blocks hold them), and the
// shapes of the arrays the cut shrank, in its witness and its message.
void in_kernel_grid(Finding &f, const spec::GridCut &cut, const spec::BoundKernel &kernel) {
  const std::size_t rank = kernel.grid.size();
  const std::string *name = f.witness.get<std::string>("operand");
  if (!name) name = f.witness.get<std::string>("output");
  const spec::BoundOperand *op = name ? kernel.operand(*name) : nullptr;
  // Per dim of the finding's operand: where the moved blocks start, and by how much they move.
  std::map<std::size_t, std::pair<std::int64_t, std::int64_t>> moved; // dim -> (first element, shift)
  for (const auto &d : cut.dims) {
    if (!op || d.operand != op->name) continue;
    const auto &ax = cut.axes[static_cast<std::size_t>(d.axis)];
    std::vector<std::int64_t> p(rank, 0);
    p[static_cast<std::size_t>(d.axis)] = ax.recurs_from + ax.period;
    const spec::BlockIndex b =
        spec::block_index(kernel, static_cast<std::size_t>(*kernel.operand_index(op->name)), p);
    const auto dim = static_cast<std::size_t>(d.dim);
    if (!b.value || dim >= b.value->size()) continue;
    moved[dim] = {op->window_start(dim, (*b.value)[dim]), d.shift(ax.drop)};
  }
  std::vector<std::pair<std::string, std::string>> texts; // (the cut's, the kernel's)
  for (auto &item : f.witness.items) {
    auto *v = std::get_if<std::vector<std::int64_t>>(&item.value);
    if (!v) continue;
    std::vector<std::int64_t> to = *v;
    std::string word;
    if (item.key == "element" || item.key == "cell_lo" || item.key == "cell_hi") {
      for (const auto &[dim, m] : moved)
        if (dim < to.size() && to[dim] >= m.first) to[dim] += m.second;
      word = "element ";
    } else if (item.key == "block" || item.key == "last_block") {
      for (const auto &[dim, m] : moved)
        if (dim < to.size() && op && to[dim] * op->block[dim] >= m.first)
          to[dim] += m.second / op->block[dim];
      word = "block ";
    } else if (v->size() == rank) {
      to = cut.kernel_point(to);
      word = "point ";
    } else {
      continue;
    }
    texts.push_back({word + spec::format_tuple(*v), word + spec::format_tuple(to)});
    if (word == "element " && op) // (also written o[i, j])
      texts.push_back({rules::element_str(op->name, *v), rules::element_str(op->name, to)});
    *v = to;
  }
  // A finding on one dim of its operand (partial-block-reduction): that
  // dim's extent and last block, where the cut shrank it.
  if (const auto *dim = f.witness.get<std::int64_t>("dim");
      dim && op && *dim >= 0 && moved.count(static_cast<std::size_t>(*dim))) {
    const auto d = static_cast<std::size_t>(*dim);
    for (auto &item : f.witness.items) {
      auto *v = std::get_if<std::int64_t>(&item.value);
      if (!v) continue;
      if (item.key == "extent") {
        *v = op->shape[d];
      } else if (item.key == "last_block") {
        const std::int64_t to = op->num_blocks[d] - 1;
        texts.push_back({"block " + std::to_string(*v) + " along dim " + std::to_string(d),
                         "block " + std::to_string(to) + " along dim " + std::to_string(d)});
        *v = to;
      }
    }
  }
  // The arrays the cut shrank: their shapes, and the extents of those dims.
  for (const auto &b : kernel.operands) {
    const auto shape = cut.shape(b.name, b.shape);
    if (shape == b.shape) continue;
    texts.push_back({"shape " + spec::format_tuple(shape), "shape " + spec::format_tuple(b.shape)});
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != b.shape[d])
        texts.push_back(
            {"dim " + std::to_string(d) + " of '" + b.name + "' (" + std::to_string(shape[d]) + ")",
             "dim " + std::to_string(d) + " of '" + b.name + "' (" + std::to_string(b.shape[d]) + ")"});
  }
  for (const auto &[from, to] : texts) {
    replace_all(f.message, from, to);
    for (auto &n : f.notes)
      replace_all(n.message, from, to);
  }
}

// The spec rules of a Triton kernel of more than kTritonCutFromPoints
// programs on its grid cut, or nullopt (with `why`) where it has none; its
// findings in the kernel's grid points and elements, with a note that says
// which cut found them.
std::optional<Verdict> spec_rules_on_cut(const spec::KernelSpec &k, const CheckOptions &o, std::string &why,
                                         std::string &how) {
  if (!o.grid_cut || !spec::uses_triton(k) || spec::has_emit_pipeline(k.body)) return std::nullopt;
  const spec::Env params = spec::param_env(k.params, o.overrides);
  const spec::Binding bound = spec::bind_kernel(k, params);
  if (!bound.kernel || bound.kernel->num_points() <= kTritonCutFromPoints) return std::nullopt;
  std::int64_t reach = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const spec::CutPlan plan = spec::plan_cut(k, o.overrides, 1, reach);
    if (!plan.cut) {
      why = plan.reason.empty() ? "no axis repeats" : plan.reason;
      return std::nullopt;
    }
    const spec::KernelSpec cut = spec::cut_kernel(k, o.overrides, *plan.cut);
    const auto built = rules::build_model(cut, o.overrides, o.target);
    if (!built.model) {
      why = "the cut kernel has no model";
      return std::nullopt;
    }
    const auto need = footprint_reach(*built.model, *plan.cut);
    if (!need) {
      why = "a load or store of the cut has a box not decided at some program";
      return std::nullopt;
    }
    if (*need > reach) { // (a wider reach: a smaller drop, the same cut otherwise)
      reach = *need;
      continue;
    }
    Verdict v = check_spec_rules(cut, o);
    if (!v.errors.empty()) { // (bad input is the kernel's to report, at its own points)
      why = "the cut kernel is bad input";
      return std::nullopt;
    }
    std::string axes, moved;
    for (std::size_t e = 0; e < plan.cut->axes.size(); ++e) {
      const auto &ax = plan.cut->axes[e];
      if (ax.drop == 0) continue;
      axes += (axes.empty() ? "" : ", ") + std::to_string(e);
      moved += (moved.empty() ? "" : ", ") + std::string("axis ") + std::to_string(e) + " from " +
               std::to_string(ax.recurs_from + ax.period) + " on are the kernel's + " +
               std::to_string(ax.drop);
    }
    how = "on its grid cut to " + spec::format_tuple(plan.cut->grid) + ", whose programs are the kernel's " +
          spec::format_tuple(bound.kernel->grid) + " up to a shift along axis " + axes;
    for (auto &f : v.findings) {
      in_kernel_grid(f, *plan.cut, *bound.kernel);
      spec::Diagnostic note;
      note.severity = spec::Severity::note;
      note.loc = f.loc;
      note.message = "found " + how + " (its values of " + moved + ")";
      f.notes.push_back(std::move(note));
    }
    if (v.status == Status::unknown) v.reason += " (" + how + ")";
    return v;
  }
  why = "the reach of its loads and stores past their blocks does not settle";
  return std::nullopt;
}

// The spec rules' verdict `v` and the lowered program's `low`, as one.
// `spec_how`: how the spec rules were checked, where not on the whole grid.
Verdict combine(const spec::KernelSpec &k, Verdict v, LoweredCheck low, const std::string &spec_how = "") {
  // partial-block-reduction is the spec rules' reading of where a partial
  // block's padding goes, by the masks they see on each read; the lowered
  // program follows it element by element, through locals, scratch and
  // masks. Where that run is decided and finds nothing, no padding reached an
  // output or a copy: it was masked or dropped on the way (a row mask after a
  // row-wise sum, a label's logit picked into a scratch and masked there, a
  // last step that reads a static slice of the valid part), and the finding
  // is withdrawn.
  if (low.status == Status::verified)
    std::erase_if(v.findings, [](const Finding &f) { return f.rule == Rule::partial_block_reduction; });
  // One root cause, one finding: a spec-level finding explains what the
  // lowered program shows at its line or on its operand (docs/rules.md).
  // An access out of bounds is a fault of its own: only a spec-level
  // index-out-of-bounds explains one (a coverage gap or a collision on the
  // same operand does not).
  std::set<int> lines, oob_lines;
  std::set<std::string> operands, oob_operands;
  // A block that reaches outside its array (ragged along a reduced dim, or an
  // index map out of bounds) is copied in clipped: its padding is what the
  // lowered program then reads or writes back uninitialized.
  bool clipped_blocks = false;
  // A scratch carried across a parallel axis (parallel-write-conflict with a
  // read point) explains what the lowered program reads undefined of it only
  // past the first index of some parallel axis: where a core may start. A
  // read at the grid's first points along every parallel axis is undefined
  // on one core too (an init that writes the wrong slot), a fault of its own.
  std::set<std::string> carried, others;
  for (const auto &f : v.findings)
    if (auto *name = f.witness.get<std::string>("operand"))
      (f.rule == Rule::parallel_write_conflict && f.witness.get<std::vector<std::int64_t>>("read") ? carried
                                                                                                   : others)
          .insert(*name);
  // A wgmma still reading a slot the body stores into is a race of its own,
  // which the store's input-write-lost (a write that never reaches HBM)
  // does not explain.
  std::set<int> async_lines;
  std::set<std::string> async_operands;
  for (const auto &f : v.findings) {
    clipped_blocks |= f.rule == Rule::partial_block_reduction || f.rule == Rule::index_out_of_bounds;
    const bool oob = f.rule == Rule::index_out_of_bounds;
    const bool async = f.rule != Rule::input_write_lost;
    auto operand = [&](const std::string &name) {
      operands.insert(name);
      if (oob) oob_operands.insert(name);
      if (async) async_operands.insert(name);
    };
    lines.insert(f.loc.line);
    if (oob) oob_lines.insert(f.loc.line);
    if (async) async_lines.insert(f.loc.line);
    if (auto *name = f.witness.get<std::string>("operand")) operand(*name);
    if (auto *name = f.witness.get<std::string>("output")) operand(*name);
    for (const auto &op : k.operands)
      if (op.loc.line == f.loc.line) operand(op.name);
  }
  for (std::size_t i = 0; i < low.findings.size(); ++i) {
    const bool oob = low.findings[i].rule == Rule::index_out_of_bounds;
    const bool async = low.findings[i].rule == Rule::async_operand_overwritten;
    const auto &by_line = oob ? oob_lines : async ? async_lines : lines;
    const auto &by_operand = oob ? oob_operands : async ? async_operands : operands;
    bool explained = by_line.count(low.findings[i].loc.line) > 0 ||
                     (clipped_blocks && low.findings[i].rule == Rule::uninitialized_read);
    for (const auto &op : low.operands[i])
      explained |= by_operand.count(op) > 0 &&
                   !(low.findings[i].rule == Rule::uninitialized_read && carried.count(op) &&
                     !others.count(op) && !past_first_parallel_index(k, low.findings[i]));
    // A visit that stores nothing into a block revisited later writes back
    // undefined data the last visit replaces (output-revisit's exception):
    // the write-back of a slot nothing wrote, not undefined data a store
    // put into what a visit writes back.
    const bool unstored =
        low.findings[i].rule == Rule::uninitialized_read && low.findings[i].unwritten_write_back &&
        !low.operands[i].empty() &&
        std::all_of(low.operands[i].begin(), low.operands[i].end(), [&](const std::string &op) {
          return std::find(v.unstored_revisits.begin(), v.unstored_revisits.end(), op) !=
                 v.unstored_revisits.end();
        });
    explained |= unstored;
    if (!explained) v.findings.push_back(std::move(low.findings[i]));
  }

  std::string undecided;
  if (v.status == Status::unknown) undecided = v.reason;
  if (low.status == Status::unknown) undecided += (undecided.empty() ? "" : "; ") + low.reason;
  // A spec-level violation's reason already names its undecided rules.
  std::string spec_note = v.status == Status::violation ? v.reason : "";
  if (!v.findings.empty()) {
    v.status = Status::violation;
    v.reason = spec_note;
    if (!undecided.empty())
      v.reason += (v.reason.empty() ? "" : "; ") + ("some rules undecided: " + undecided);
  } else if (!undecided.empty()) {
    v.status = Status::unknown;
    v.reason = undecided;
  } else {
    v.status = Status::verified;
    const std::string spec_holds = "every spec-level rule holds at every grid point" +
                                   (spec_how.empty() ? "" : " (checked " + spec_how + ")");
    v.reason = spec_holds + "; " + low.reason;
    if (low.status == Status::violation) // (its findings all the expected undefined write-backs)
      v.reason = spec_holds +
                 "; the lowered program is race-free, and "
                 "the write-backs of undefined data by visits that store nothing into a block revisited "
                 "later are replaced by the last visit's";
  }
  if (auto ops = spec::opaque_ops(k); !ops.empty())
    v.reason +=
        (v.reason.empty() ? "" : "; ") + ("its opaque ops (" + spec::describe(ops) +
                                          ") are checked on their reads and writes, not their values");
  if (auto [deep, n] = deep_buffered_operands(k); n > 0)
    v.reason += (v.reason.empty() ? "" : "; ") +
                (deep + (n == 1 ? " is" : " are") +
                 " checked with the slots buffered= asks for, which jax's TPU pallas_call does not compile "
                 "(it takes buffered=1 or 2 and no lookahead; pltpu.emit_pipeline takes them)");
  return v;
}

Verdict check_prefetch(const spec::KernelSpec &k, const CheckOptions &o);
Verdict check_state(const spec::KernelSpec &k, const CheckOptions &o);

} // namespace

Verdict check(const spec::KernelSpec &k, const CheckOptions &o) {
  const spec::HoistedNames quoted(k.body);
  const bool state = spec::has_state(k);
  if (state || !k.prefetches.empty()) {
    try {
      return state ? check_state(k, o) : check_prefetch(k, o);
    } catch (const spec::ElaborationTooLarge &e) {
      Verdict v;
      v.status = Status::unknown;
      v.reason = std::string("not checked: ") + e.what();
      return v;
    }
  }
  std::string cut_why, cut_how;
  std::optional<Verdict> on_cut = spec_rules_on_cut(k, o, cut_why, cut_how);
  Verdict v = on_cut ? std::move(*on_cut) : check_spec_rules(k, o);
  if (!v.errors.empty()) return v;
  if (!on_cut && v.status == Status::unknown && !cut_why.empty())
    v.reason += "; its programs have no grid cut (" + cut_why + ")";
  LoweredCheck low;
  if (cancelled())
    low.reason = "interrupted";
  else
    low = check_lowered(k, o);
  // A nested emit_pipeline's specs are operands of its flattened kernel.
  return combine(spec::flatten_nested(k), std::move(v), std::move(low), cut_how);
}

namespace {

// Scalar prefetch: given contents are constants (the kernel is elaborated
// and checked as any other). Open contents: the spec rules decide every
// allowed contents at once; the lowered program's copy skipping depends on
// which consecutive block indices are equal, so its race check runs once
// per allowed contents when there are few, and is undecided otherwise.
// A read outside a prefetch array gives spec::kPrefetchPoison: say so where
// a finding's message shows that value (a block index, an address). (Not
// where only a statement of its trace does: an elaborated read holds the
// value as its out-of-range branch, taken or not; a read that is taken out
// of range is an index-out-of-bounds finding of its own.)
// A finding on a read of a prefetch array names the read as written in `k`.
Verdict explain_poison(const spec::KernelSpec &k, Verdict v) {
  const std::string poison = std::to_string(spec::kPrefetchPoison);
  const std::string generic = "a read of a prefetch array";
  for (auto &f : v.findings) {
    if (f.rule == Rule::index_out_of_bounds && f.message.rfind(generic, 0) == 0) {
      std::optional<std::string> read;
      std::function<void(const spec::Expr &)> find = [&](const spec::Expr &x) {
        if (!read && x.op == spec::Op::Ref && x.loc.line == f.loc.line && x.loc.col == f.loc.col &&
            k.prefetch(x.name))
          read = spec::print(x);
        for (const auto &a : x.args)
          find(a);
      };
      spec::for_each_stmt(k.body, [&](const spec::Stmt &st) { spec::for_each_expr(st, find); });
      for (const auto &o : k.operands)
        if (o.index_map)
          for (const auto &r : o.index_map->results)
            find(r);
      if (read) f.message.replace(0, generic.size(), "the prefetch read '" + *read + "'");
      continue;
    }
    // A lowered access out of bounds quotes its ref with each prefetch read
    // elaborated (a where tree over the contents): quote it as the kernel
    // writes it on that line, where one ref of that operand is there.
    if (f.rule == Rule::index_out_of_bounds && f.message.rfind("'", 0) == 0) {
      const auto open = f.message.find('['), close = f.message.find("]': ");
      if (open != std::string::npos && close != std::string::npos && open < close &&
          f.message.substr(0, close).find(poison) != std::string::npos) {
        const std::string name = f.message.substr(1, open - 1);
        std::vector<std::string> refs;
        std::function<void(const spec::Expr &)> find = [&](const spec::Expr &x) {
          if (x.op == spec::Op::Ref && x.name == name && x.loc.line == f.loc.line)
            refs.push_back(spec::print(x));
          for (const auto &a : x.args)
            find(a);
        };
        spec::for_each_stmt(k.body, [&](const spec::Stmt &st) { spec::for_each_expr(st, find); });
        if (refs.size() == 1) f.message = "'" + refs[0] + f.message.substr(close + 1);
      }
    }
    const std::string note = " (" + poison + " is also what a read outside a prefetch array gives)";
    if (f.message.find(poison) != std::string::npos && f.message.find(note) == std::string::npos)
      f.message += note;
  }
  return v;
}

Verdict check_prefetch_contents(const spec::KernelSpec &k, const CheckOptions &o);

/// The grid a kernel with given prefetch contents is enumerated on.
constexpr std::int64_t kGivenContentsPoints = std::int64_t{1} << 16;

Verdict check_prefetch(const spec::KernelSpec &k, const CheckOptions &o) {
  return explain_poison(k, check_prefetch_contents(k, o));
}

// Each finding names the prefetch contents it was found with (in its message
// and its witness); the contents as text.
std::string name_contents(std::vector<Finding> &findings, const spec::PrefetchContents &c) {
  if (c.empty()) return ""; // (every table left open: the finding holds for any contents)
  const std::string with = spec::format_prefetch(c);
  for (auto &f : findings) {
    f.message += " (prefetch contents: " + with + ")";
    for (const auto &[name, vals] : c)
      f.witness.items.push_back({name, vals});
  }
  return with;
}

// What a table read only as an address (spec::prefetch_address_only) picks:
// where a body copy reads, or under Triton where a load gathers from.
std::string address_reads(const spec::KernelSpec &k) {
  return spec::uses_triton(k) ? "the indices of loads from inputs nothing writes"
                              : "the addresses of copies from arrays nothing writes";
}

// The whole check once per allowed contents: the first violation (naming
// its contents), else unknown if one was, else verified for all of them.
// `left_open`: the arrays the contents leave open (each checked over all of
// its allowed contents).
Verdict check_each_contents(const spec::KernelSpec &k, const CheckOptions &o,
                            const std::vector<spec::PrefetchContents> &all, const std::string &why,
                            const std::vector<std::string> &left_open = {}) {
  std::optional<Verdict> undecided;
  for (const auto &c : all) {
    // The kernel with these contents given: elaborated (state and all) as it would be with them written.
    Verdict one = check(spec::with_contents(k, c), o);
    if (one.status == Status::verified) continue;
    const std::string with = name_contents(one.findings, c);
    one.reason += (one.reason.empty() ? "" : " ") + std::string("(with prefetch contents ") + with + ")";
    if (one.status == Status::violation) return one;
    if (!undecided) undecided = std::move(one);
  }
  if (undecided) return *undecided;
  Verdict v;
  v.status = Status::verified;
  std::string open;
  for (const auto &n : left_open)
    open += (open.empty() ? "" : ", ") + ("'" + n + "'");
  v.reason = "checked for each of the " + std::to_string(all.size()) +
             " prefetch contents the constraints allow" +
             (open.empty() ? std::string()
                           : " of the arrays other than " + open + " (read only as " + address_reads(k) +
                                 ", so left open in each)") +
             ", as the rules over all of them at once were undecided (" + why + ")";
  return v;
}

// Contents as text, an array of one value throughout as `ids = [v] * n`.
std::string describe(const spec::PrefetchContents &c) {
  std::string out;
  for (const auto &[name, v] : c) {
    const bool constant = !v.empty() && std::all_of(v.begin(), v.end(), [&](auto x) { return x == v[0]; });
    out += (out.empty() ? "" : ", ") +
           (constant ? name + " = [" + std::to_string(v[0]) + "] * " + std::to_string(v.size())
                     : spec::format_prefetch({{name, v}}));
  }
  return out;
}

// Open contents of one value throughout (each array's lowest allowed one),
// when the constraints allow them.
std::optional<spec::PrefetchContents> constant_contents(const spec::PrefetchSpace &space) {
  spec::PrefetchContents c;
  for (const auto &a : space.arrays) {
    if (a.given) continue;
    std::vector<std::int64_t> v(static_cast<std::size_t>(a.length), a.lo.value_or(0));
    if (spec::prefetch_violation(a, v)) return std::nullopt;
    c[a.name] = std::move(v);
  }
  return c;
}

// The arrays whose contents are open and that are read only as the address
// of a copy source nothing writes (spec::prefetch_address_only), or only as
// values (spec::prefetch_value_only): the lowered program depends on none.
std::vector<std::string> open_addresses(const spec::KernelSpec &k, const spec::PrefetchSpace &space) {
  std::set<std::string> addresses = spec::prefetch_address_only(k);
  addresses.merge(spec::prefetch_value_only(k));
  std::vector<std::string> out;
  for (const auto &a : space.arrays)
    if (!a.given && addresses.count(a.name)) out.push_back(a.name);
  return out;
}

// Whether every array whose contents are open is such an address.
bool every_open_array_is_an_address(const spec::KernelSpec &k, const spec::PrefetchSpace &space) {
  const auto open = std::count_if(space.arrays.begin(), space.arrays.end(),
                                  [](const spec::PrefetchArray &a) { return !a.given; });
  return static_cast<std::size_t>(open) == open_addresses(k, space).size();
}

// The allowed contents of the open arrays that are not read only as copy
// addresses, when some open arrays are and the others allow at most `limit`
// contents; `left_open` names the address arrays. Each such contents,
// checked with the address arrays still open, decides the kernel for all of
// them: nothing but the copy sources depends on an address.
std::optional<std::vector<spec::PrefetchContents>>
contents_but_addresses(const spec::KernelSpec &k, spec::PrefetchSpace space, std::size_t limit,
                       std::vector<std::string> &left_open) {
  left_open = open_addresses(k, space);
  std::erase_if(space.arrays, [&](const spec::PrefetchArray &a) {
    return std::find(left_open.begin(), left_open.end(), a.name) != left_open.end();
  });
  if (left_open.empty() || space.all_given()) return std::nullopt;
  return spec::enumerate_prefetch(space, limit);
}

// SMEM state (spec/state.hpp): the kernel is checked with its state
// elaborated, which runs the integer part of the body over the grid. A read
// of a state element before any store is an uninitialized-read at the step
// that makes it. Where the state depends on prefetch contents left open, the
// kernel is checked once per allowed contents, when they are few.
Verdict check_state(const spec::KernelSpec &k, const CheckOptions &o) {
  const spec::Env params = spec::param_env(k.params, o.overrides);
  spec::StateElaboration e = spec::elaborate_state(k, params);
  if (e.kernel && !e.undefined_read && !e.parallel_carry) return check(*e.kernel, o);
  Verdict v;
  v.status = Status::unknown;
  if (!e.errors.empty()) {
    v.reason = "bad input: " + e.errors.front().message;
    v.errors = std::move(e.errors);
    return v;
  }
  // A state finding is the verdict: the kernel is not checked further.
  const auto state_violation = [&](Rule rule, const spec::Loc &at, std::string message,
                                   std::vector<WitnessItem> items) {
    Finding f;
    f.rule = rule;
    f.loc = at;
    f.message = std::move(message);
    f.witness.items = std::move(items);
    v.status = Status::violation;
    v.findings.push_back(std::move(f));
    return v;
  };
  if (const auto &u = e.undefined_read)
    return state_violation(Rule::uninitialized_read, u->loc, spec::undefined_state_message(*u),
                           {{"grid_point", u->grid_point}, {"element", u->element}});
  // Each core keeps its own SMEM: the core that reads the value need not be
  // the one that stored it, as for a scratch accumulated across a parallel
  // axis.
  if (const auto &c = e.parallel_carry)
    return state_violation(
        Rule::parallel_write_conflict, c->loc, spec::parallel_carry_message(*c),
        {{"stored_at", c->stored_at}, {"grid_point", c->grid_point}, {"element", c->element}});
  if (e.needs_contents) {
    // Only the array the state needs is enumerated; each of its contents is
    // then checked as given, the other arrays as they are (open ones by the
    // usual route, or enumerated in turn if the state needs them too).
    spec::PrefetchSpace space = spec::prefetch_space(k, params);
    std::erase_if(space.arrays, [&](const spec::PrefetchArray &a) { return a.name != e.needs_array; });
    if (space.errors.empty() && space.unknown.empty() && !space.arrays.empty()) {
      constexpr std::size_t kMaxContents = 256;
      if (auto all = spec::enumerate_prefetch(space, kMaxContents))
        return check_each_contents(k, o, *all, e.unknown);
      v.reason = e.unknown + ", and the constraints of '" + e.needs_array + "' allow more than " +
                 std::to_string(kMaxContents) + " contents (give them, or narrow the constraints)";
      return v;
    }
  }
  v.reason = e.unknown;
  return v;
}

Verdict check_prefetch_contents(const spec::KernelSpec &k, const CheckOptions &o) {
  Verdict v;
  spec::PrefetchSpace space = spec::prefetch_space(k, spec::param_env(k.params, o.overrides));
  if (!space.errors.empty()) {
    v.status = Status::unknown;
    v.reason = "bad input: " + space.errors.front().message;
    v.errors = std::move(space.errors);
    return v;
  }
  if (!space.unknown.empty()) {
    v.status = Status::unknown;
    v.reason = "scalar prefetch: " + space.unknown;
    return v;
  }
  if (space.all_given()) {
    // Given contents are where-trees of one leaf per element in the
    // solver's terms (a table of a few hundred entries makes its queries
    // slow: minutes); evaluated point by point they are array reads. Such a
    // kernel is enumerated on a larger grid (unless enumeration is off: 0).
    CheckOptions given = o;
    if (given.enumerate_max_points > 0)
      given.enumerate_max_points = std::max<std::int64_t>(given.enumerate_max_points, kGivenContentsPoints);
    return check(spec::elaborate_prefetch(k, space, {}), given);
  }
  std::string why;
  auto start = spec::pick_prefetch(space, 0, why);
  if (!start) {
    v.status = Status::unknown;
    v.reason = "scalar prefetch: " + why;
    return v;
  }
  v = check_spec_rules(spec::elaborate_prefetch(k, space, {}), o, space, *start);
  if (!v.errors.empty()) return v;
  constexpr std::size_t kMaxContents = 256;
  auto all = spec::enumerate_prefetch(space, kMaxContents);
  // Rules the solver could not decide over open contents (a loop bound read
  // from a prefetch array): decided per contents when they are few.
  if (v.status == Status::unknown && all) return check_each_contents(k, o, *all, v.reason);
  // Too many, but some arrays are only copy addresses: the others' contents
  // are few (a page table with the lengths that bound its loop).
  std::vector<std::string> left_open;
  std::optional<std::vector<spec::PrefetchContents>> part;
  if (!all && v.status != Status::violation) part = contents_but_addresses(k, space, kMaxContents, left_open);
  if (v.status == Status::unknown && part) return check_each_contents(k, o, *part, v.reason, left_open);
  LoweredCheck low;
  std::string each = "prefetch contents the constraints allow";
  const bool addresses = !all && every_open_array_is_an_address(k, space);
  const std::set<std::string> values = addresses ? spec::prefetch_value_only(k) : std::set<std::string>{};
  if (addresses) {
    // The spec rules above decided whether each such address lies inside
    // its array, for every contents; nothing else depends on them, so one
    // contents does: one value throughout where allowed (each read is then
    // one leaf, not a tree over the table). An array read only as values is
    // left open (its reads are names, no value of which the program takes
    // for a mask or a zero).
    spec::PrefetchContents c = constant_contents(space).value_or(*start);
    for (const auto &n : values)
      c.erase(n);
    all = std::vector<spec::PrefetchContents>{std::move(c)};
  }
  if (!all && spec::prefetch_equality_only(k, spec::param_env(k.params, o.overrides))) {
    all = spec::prefetch_patterns(space, kMaxContents);
    each = "patterns of equal prefetch elements (the lowered program depends on the contents only through "
           "which block indices are equal)";
  }
  if (!cancelled() && !all && part)
    return check_each_contents(k, o, *part, "the race check of the lowered program depends on them",
                               left_open);
  if (cancelled()) {
    low.reason = "interrupted";
  } else if (!all) {
    // (Whether an index map reads a table: then the copies the pipeline
    // skips depend on it; else only the body's accesses do.)
    bool maps_read = false;
    for (const auto &op : k.operands)
      if (op.index_map)
        for (const auto &r : op.index_map->results)
          for (const auto &p : k.prefetches)
            maps_read = maps_read || spec::mentions(r, p.name);
    low.reason =
        std::string("the lowered program is not checked: ") +
        (maps_read
             ? "which copies it skips depends on the prefetch contents"
             : "what its body does depends on the prefetch contents it reads (in a subscript, a condition, a "
               "loop bound, a mask or integer arithmetic: not only as values)") +
        ", and their constraints allow more than " + std::to_string(kMaxContents) +
        " contents and patterns of equal elements (give the contents, or narrow the constraints, for a "
        "race check)";
  } else {
    low.status = Status::verified;
    for (const auto &c : *all) {
      LoweredCheck one = check_lowered(spec::elaborate_prefetch(k, space, c), o);
      if (one.status == Status::verified) continue;
      const std::string with = name_contents(one.findings, c);
      if (one.status == Status::unknown && !with.empty())
        one.reason += " (with prefetch contents " + with + ")";
      const bool found = one.status == Status::violation;
      if (found || low.status == Status::verified) low = std::move(one);
      if (found) break;
    }
    if (low.status == Status::verified && addresses) {
      std::string open;
      for (const auto &n : values)
        open += (open.empty() ? "'" : ", '") + n + "'";
      const bool fixed = !all->front().empty();
      if (open.empty())
        low.reason = "the lowered program is race-free with the prefetch contents " + describe(all->front()) +
                     ", and so with every allowed contents: it reads them only as " + address_reads(k);
      else
        low.reason = "the lowered program is race-free with the reads of " + open + " left open" +
                     (fixed ? " and the prefetch contents " + describe(all->front()) : std::string()) +
                     ", and so with every allowed contents: it takes " + open +
                     " only as values, which no copy, condition or mask depends on" +
                     (fixed ? ", and the others only as " + address_reads(k) : std::string());
    } else if (low.status == Status::verified)
      low.reason =
          "the lowered program is race-free for each of the " + std::to_string(all->size()) + " " + each;
  }
  return combine(k, std::move(v), std::move(low));
}

} // namespace

} // namespace pipecheck::verifier
