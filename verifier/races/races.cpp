#include "verifier/races/races.hpp"

#include "spec/eval.hpp"
#include "spec/print.hpp"
#include "spec/validate.hpp"
#include "verifier/races/induction.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <type_traits>

namespace pipecheck::verifier {

namespace races {

namespace {

std::string one_line(const spec::Stmt &s) {
  spec::Stmt bare = s;
  bare.comments = {};
  if (std::holds_alternative<spec::If>(bare.kind) || std::holds_alternative<spec::For>(bare.kind)) {
    std::visit(
        [](auto &k) {
          if constexpr (requires { k.body; }) k.body.clear();
        },
        bare.kind);
  }
  std::string t = spec::print(bare, 0);
  auto nl = t.find('\n');
  if (nl != std::string::npos) t = t.substr(0, nl);
  while (!t.empty() && (t.back() == ':' || t.back() == ' '))
    t.pop_back();
  return t;
}

// A place as a ref: `buf[slot][lo:hi, ...]`.
std::string place_text(const spec::Program &p, const Place &at) {
  std::string t = at.buffer >= 0 && static_cast<std::size_t>(at.buffer) < p.buffers.size()
                      ? p.buffers[static_cast<std::size_t>(at.buffer)].name
                      : "?";
  if (at.slot >= 0) t += "[" + std::to_string(at.slot) + "]";
  t += "[";
  for (std::size_t d = 0; d < at.box.size(); ++d)
    t += (d ? ", " : "") + std::to_string(at.box[d].first) + ":" + std::to_string(at.box[d].second);
  return t + "]";
}

// An event's statement in a note: as written, or, for a copy start whose
// text is long (a page table's lookup elaborated into a select over the
// table), the regions it copies at that event.
std::string event_text(const spec::Program &p, const RunResult &run, int e) {
  std::string t = one_line(*run.events[static_cast<std::size_t>(e)].stmt);
  constexpr std::size_t kLong = 160;
  if (t.size() <= kLong) return t;
  for (const auto &op : run.ops)
    if (op.start_event == e && op.kind != OpKind::wgmma) {
      const auto paren = t.find('(');
      return t.substr(0, paren == std::string::npos ? 0 : paren) + "(" + place_text(p, op.src) + ", " +
             place_text(p, op.dst) + ")  # its regions at this step";
    }
  return t;
}

// The variables of the loops around `s` in `x`, outermost first (appended);
// whether `s` is in `x`.
bool loop_vars_to(const spec::Stmt &x, const spec::Stmt *s, std::vector<std::string> &out) {
  if (&x == s) return true;
  auto in = [&](const spec::Block &b) {
    return std::any_of(b.begin(), b.end(), [&](const spec::Stmt &y) { return loop_vars_to(y, s, out); });
  };
  if (auto *i = std::get_if<spec::If>(&x.kind)) return in(i->then_body) || in(i->else_body);
  if (auto *f = std::get_if<spec::For>(&x.kind)) {
    out.push_back(f->var);
    if (in(f->body)) return true;
    out.pop_back();
  }
  return false;
}

bool contains(const spec::Stmt &x, const spec::Stmt *s) {
  std::vector<std::string> vars;
  return loop_vars_to(x, s, vars);
}

// The buffers of `p` that an expression names, appended without repeats.
void buffers_in(const spec::Program &p, const spec::Expr &e, std::vector<std::string> &out) {
  if ((e.op == spec::Op::Ref || e.op == spec::Op::Name) && p.buffer(e.name) &&
      std::find(out.begin(), out.end(), e.name) == out.end())
    out.push_back(e.name);
  for (const auto &a : e.args)
    buffers_in(p, a, out);
}

// The buffers a statement names (of a compound statement: its own condition
// or bounds only, not its body's).
std::vector<std::string> buffers_of(const spec::Program &p, const spec::Stmt &s) {
  std::vector<std::string> out;
  std::visit(
      [&](const auto &k) {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, spec::Assign>) {
          buffers_in(p, k.target, out);
          buffers_in(p, k.value, out);
        } else if constexpr (std::is_same_v<K, spec::Let>) {
          if (p.buffer(k.name)) out.push_back(k.name);
          buffers_in(p, k.value, out);
        } else if constexpr (std::is_same_v<K, spec::Copy>) {
          buffers_in(p, k.src, out);
          buffers_in(p, k.dst, out);
        } else if constexpr (std::is_same_v<K, spec::Wgmma>) {
          buffers_in(p, k.acc, out);
          buffers_in(p, k.a, out);
          buffers_in(p, k.b, out);
        }
      },
      s.kind);
  return out;
}

// The top-level statement of `p` that `s` is or lies within (-1: none).
int top_level_of(const spec::Program &p, const spec::Stmt *s) {
  if (!p.body.empty() && s >= p.body.data() && s < p.body.data() + p.body.size())
    return static_cast<int>(s - p.body.data());
  for (std::size_t i = 0; i < p.body.size(); ++i)
    if (contains(p.body[i], s)) return static_cast<int>(i);
  return -1;
}

bool race_rule(Rule r) { return r == Rule::slot_race || r == Rule::async_operand_overwritten; }

/// A race pair is unordered on the recorded happens-before graph.
bool confirmed(const RunResult &run, const RawFinding &f) {
  if (!race_rule(f.rule)) return true;
  if (f.other_op < 0 || run.ops[f.other_op].node < 0 || run.events[f.anchor_event].node < 0) return false;
  return run.graph.unordered(run.ops[f.other_op].node, run.events[f.anchor_event].node);
}

Finding to_finding(const spec::Program &p, const RunResult &run, const RawFinding &f,
                   const std::string &param, std::int64_t value) {
  Finding out;
  out.rule = f.rule;
  const Event &anchor = run.events[f.anchor_event];
  out.loc = anchor.stmt->loc;
  out.message = f.message;
  out.unwritten_write_back = f.unwritten_write_back;
  if (!param.empty()) {
    out.witness.items.push_back({param, value});
    out.message += " (" + param + " = " + std::to_string(value) + ")";
  }
  std::vector<int> evs{f.anchor_event};
  if (f.other_event >= 0) evs.push_back(f.other_event);
  if (f.other_end >= 0) evs.push_back(f.other_end);
  std::sort(evs.begin(), evs.end());
  evs.erase(std::unique(evs.begin(), evs.end()), evs.end());
  std::vector<std::int64_t> ids;
  for (int e : evs) {
    const Event &ev = run.events[e];
    TraceEvent t;
    t.index = e + 1;
    t.statement = event_text(p, run, e);
    t.loc = ev.stmt->loc;
    t.iterations = ev.iterations;
    t.slot = ev.slot;
    t.top_level = top_level_of(p, ev.stmt);
    t.anchor = e == f.anchor_event;
    t.buffers = buffers_of(p, *ev.stmt);
    out.witness.trace.push_back(t);
    ids.push_back(e + 1);
    std::ostringstream os;
    os << "event " << t.index << ": " << t.statement;
    std::vector<std::string> vars;
    for (const auto &st : p.body)
      if (loop_vars_to(st, ev.stmt, vars)) break;
    if (!t.iterations.empty()) {
      // Each loop's variable and value (`i = 2`): the body's loops of a
      // lowered kernel are unrolled, so there the one is the grid step's.
      if (vars.size() == t.iterations.size()) {
        os << " (";
        for (std::size_t k = 0; k < vars.size(); ++k)
          os << (k ? ", " : "") << vars[k] << " = " << t.iterations[k];
      } else {
        os << " (iteration";
        for (auto v : t.iterations)
          os << ' ' << v;
      }
      if (t.slot) os << ", slot " << *t.slot;
      os << ')';
    } else if (t.slot) {
      os << " (slot " << *t.slot << ')';
    }
    if (e == f.anchor_event)
      os << (race_rule(f.rule) ? " <- second access" : " <- here");
    else if (e == f.other_end)
      os << " <- the earlier operation is certain to have completed only here";
    else if (race_rule(f.rule))
      os << " <- first access (in flight)";
    else if (f.rule == Rule::uninitialized_read)
      os << " <- the undefined data first stored here";
    spec::Diagnostic d;
    d.severity = spec::Severity::note;
    d.loc = t.loc;
    d.message = os.str();
    out.notes.push_back(d);
  }
  out.witness.items.push_back({"events", ids});
  return out;
}

} // namespace

bool witnesses_reproduce(const RunResult &run) {
  for (auto &f : run.findings)
    if (race_rule(f.rule) && !confirmed(run, f)) return false;
  return true;
}

std::vector<Finding> check_concrete(const spec::Program &p, const spec::Env &env, const std::string &param,
                                    const Machine::IterationHook &hook, std::size_t event_limit,
                                    const Machine::StepOf &step_of) {
  Machine m(p, env);
  if (hook) m.set_iteration_hook(hook);
  if (step_of) m.set_step_of(step_of);
  if (event_limit) m.set_event_limit(event_limit);
  RunResult run = m.run();
  std::vector<Finding> out;
  std::set<std::tuple<Rule, int, bool>> seen;
  std::int64_t value = 0;
  if (!param.empty()) value = env.at(param);
  for (auto &f : run.findings) {
    const spec::Stmt *s = run.events[f.anchor_event].stmt;
    if (!seen.insert({f.rule, s->loc.line, f.unwritten_write_back}).second) continue;
    out.push_back(to_finding(p, run, f, param, value));
  }
  return out;
}

} // namespace races

namespace {

struct Acc {
  std::vector<Finding> findings;
  std::set<std::tuple<Rule, int, bool>> seen;
  void add(std::vector<Finding> fs) {
    for (auto &f : fs)
      if (seen.insert({f.rule, f.loc.line, f.unwritten_write_back}).second) findings.push_back(std::move(f));
  }
};

// The largest integer literal in the program's `if` conditions (a guard
// `i == 11` names the iteration where something happens).
std::int64_t largest_guard_literal(const spec::Block &b) {
  std::int64_t m = 0;
  std::function<void(const spec::Expr &)> lit = [&](const spec::Expr &e) {
    if (e.op == spec::Op::Int) m = std::max(m, e.int_value);
    for (const auto &a : e.args)
      lit(a);
  };
  for (const auto &s : b) {
    if (const auto *l = std::get_if<spec::Let>(&s.kind)) {
      // A constant a guard names through a local (`lim = 20`, `if i == lim`).
      if (auto v = spec::eval_int(l->value, {})) m = std::max(m, *v);
    } else if (const auto *i = std::get_if<spec::If>(&s.kind)) {
      lit(i->cond);
      m = std::max({m, largest_guard_literal(i->then_body), largest_guard_literal(i->else_body)});
    } else if (const auto *f = std::get_if<spec::For>(&s.kind)) {
      m = std::max(m, largest_guard_literal(f->body));
    }
  }
  return m;
}

/// A trip count at which the program does not validate (check_program).
struct InvalidAt {
  std::vector<spec::Diagnostic> errors;
};

Verdict finish(Verdict v, std::chrono::steady_clock::time_point t0) {
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return v;
}

} // namespace

Verdict check_program(const spec::Program &p, const CheckOptions &opts) {
  auto t0 = std::chrono::steady_clock::now();
  Verdict v;
  spec::Env env = spec::param_env(p.params, opts.overrides);
  std::vector<const spec::Param *> symbolic;
  for (auto &prm : p.params)
    if (!env.count(prm.name)) symbolic.push_back(&prm);
  Acc acc;
  try {
    if (symbolic.empty()) {
      try {
        acc.add(races::check_concrete(p, env, "", {}, opts.event_limit, opts.step_of));
      } catch (const races::Unsupported &u) {
        // Too large to run at the values --set gives, with nothing found on
        // the way: a pipeline proven for every value of the one param --set
        // binds (whose domain that value is in) holds at that value too.
        std::vector<std::string> set;
        for (const auto &prm : p.params)
          if (opts.overrides.count(prm.name)) set.push_back(prm.name);
        if (set.size() != 1) throw;
        CheckOptions all = opts;
        all.overrides.erase(set[0]);
        Verdict every = check_program(p, all);
        if (every.status != Status::verified) throw;
        v.status = Status::verified;
        v.reason = "the one run at " + set[0] + " = " + std::to_string(opts.overrides.at(set[0])) +
                   " is past what is run (" + u.what() + "), and it holds for every " + set[0] + ": " +
                   every.reason;
        return finish(v, t0);
      }
      if (!acc.findings.empty()) {
        v.status = Status::violation;
        v.findings = std::move(acc.findings);
      } else {
        v.status = Status::verified;
        v.reason = "every parameter is concrete: the one run is race-free";
      }
      return finish(v, t0);
    }
    if (symbolic.size() > 1) {
      v.status = Status::unknown;
      v.reason = "more than one symbolic parameter (bind all but one with --set)";
      return finish(v, t0);
    }
    const spec::Param &sp = *symbolic[0];
    const std::string &N = sp.name;
    std::int64_t lo = 1;
    if (sp.lo) {
      auto l = spec::eval_int(*sp.lo, env);
      if (!l) throw races::Unsupported("cannot evaluate the lower bound of " + N, sp.loc);
      lo = *l;
    }
    std::optional<std::int64_t> hi;
    if (sp.hi) {
      hi = spec::eval_int(*sp.hi, env);
      if (!hi) throw races::Unsupported("cannot evaluate the upper bound of " + N, sp.loc);
    }
    if (hi && *hi < lo) {
      v.status = Status::verified;
      v.reason = "no value of " + N + " is allowed";
      return finish(v, t0);
    }
    // The proof runs N from its lower bound up and steps past it (k-induction
    // windows): a bound near int64's end leaves no room to count in.
    constexpr std::int64_t kMaxLowerBound = std::int64_t{1} << 53;
    if (lo > kMaxLowerBound) {
      v.status = Status::unknown;
      v.reason = "the lower bound of " + N + ", " + std::to_string(lo) + ", is past 2^53: the proof counts " +
                 N + " up from it (bind it with --set)";
      return finish(v, t0);
    }
    std::int64_t checked = lo - 1;
    // Each N run is first validated as `check --set N=n` validates it (a
    // store's shapes, an extent, an offset that depend on N): a program
    // invalid at some N is bad input there, whatever the others do.
    auto run_at = [&](std::int64_t n) {
      spec::Env e = env;
      e[N] = n;
      auto errors = spec::validate(p, e);
      if (!errors.empty()) {
        for (auto &d : errors)
          d.message += " (" + N + " = " + std::to_string(n) + ")";
        throw InvalidAt{std::move(errors)};
      }
      acc.add(races::check_concrete(p, e, N, {}, opts.event_limit, opts.step_of));
    };
    auto check_upto = [&](std::int64_t n_hi) {
      for (std::int64_t n = checked + 1; n <= n_hi && (!hi || n <= *hi); ++n) {
        run_at(n);
        checked = n;
      }
    };
    // A finding on the way is the verdict.
    auto violated = [&] {
      if (acc.findings.empty()) return false;
      v.status = Status::violation;
      v.findings = std::move(acc.findings);
      return true;
    };
    // How a proof's verdict begins.
    auto proven_for_every_n = [&] {
      std::string r = "proven for every " + N + " >= " + std::to_string(lo);
      if (hi) r += " and <= " + std::to_string(*hi);
      return r + ": " + N + " <= " + std::to_string(checked) + " checked concretely; ";
    };
    std::int64_t nmax = std::max(opts.n_max, lo);
    check_upto(nmax);
    if (violated()) return finish(v, t0);
    // Every allowed N run, none with a finding.
    auto checked_whole = [&] {
      v.status = Status::verified;
      v.reason =
          "checked every " + N + " in [" + std::to_string(lo) + ", " + std::to_string(*hi) + "] concretely";
    };
    if (hi && checked >= *hi) {
      checked_whole();
      return finish(v, t0);
    }
    std::string bounded = "checked for " + N + " <= " + std::to_string(checked) + " only";
    auto plan = races::plan_induction(p, N, lo, hi, env, opts.timeout_ms);
    if (plan.kind == races::InductionPlan::Kind::out_of_bounds && plan.out_of_bounds_at) {
      // An access may leave its buffer only at a larger N: run that N.
      try {
        run_at(*plan.out_of_bounds_at);
      } catch (const races::Unsupported &u) {
        // Too large to run: the verdict stays unknown, with the reason.
        plan.reason += std::string(" (not run: ") + u.what() + ")";
      }
      if (violated()) return finish(v, t0);
    }
    // Before giving up unproven: a deep ring first reuses its slots past
    // n_max (a 12-slot write-back ring waited one step late races at N =
    // 13), and a guard may name a later iteration (`if i == 11`, `if i % 10
    // != 8`), so the trip counts that wrap every ring twice and pass every
    // guard's literal are checked first. True where that found a violation.
    auto check_wrap = [&] {
      std::int64_t deepest = 0;
      for (const auto &b : p.buffers)
        if (b.slots)
          if (auto n = spec::eval_int(*b.slots, env)) deepest = std::max(deepest, *n);
      const std::int64_t wrap =
          std::min<std::int64_t>(std::max(2 * deepest + 2, largest_guard_literal(p.body) + 2), 64);
      if (wrap <= checked) return false;
      check_upto(wrap);
      if (violated()) return true;
      bounded = "checked for " + N + " <= " + std::to_string(checked) + " only";
      return false;
    };
    // With no proof, a bounded N of at most 64 values is checked whole.
    auto check_all_bounded = [&] {
      if (!hi || *hi - lo >= 64) return false;
      check_upto(*hi);
      if (!violated()) checked_whole();
      return true;
    };
    if (plan.kind != races::InductionPlan::Kind::proven) {
      if (check_wrap() || check_all_bounded()) return finish(v, t0);
      v.status = Status::unknown;
      v.reason = bounded + ": " + plan.reason;
      return finish(v, t0);
    }
    // The program the plan's facts are about (this one, or this one read
    // from the end along its mirrored dimensions: the same races and bounds).
    const spec::Program &planned = plan.program ? *plan.program : p;
    std::string read_from_end;
    for (const auto &[b, d] : plan.mirrored)
      read_from_end += (read_from_end.empty() ? "" : ", ") + b + "'s dimension " + std::to_string(d);
    if (!read_from_end.empty()) read_from_end = "; " + read_from_end + " read from the end";
    if (!plan.loop) {
      // No loop grows with N: every N >= n_struct runs as n_struct does.
      check_upto(plan.n_struct);
      if (violated()) return finish(v, t0);
      v.status = Status::verified;
      std::ostringstream os;
      os << proven_for_every_n() << "from " << N << " = " << plan.n_struct
         << " on, no loop, slot, subscript or branch moves with " << N
         << " and every access stays inside its buffer (" << plan.queries << " Z3 queries" << read_from_end
         << ")";
      v.reason = os.str();
      return finish(v, t0);
    }
    auto hi_of = [&](std::int64_t n) {
      auto h = spec::eval_int(plan.loop_hi, {{N, n}});
      return h ? *h : plan.loop_lo;
    };
    const std::int64_t W = plan.window, P = plan.period;
    auto in_middle = [&](std::int64_t i, std::int64_t n) {
      return i >= plan.loop_lo + W && i <= hi_of(n) - 1 - W;
    };
    // Probe: a trip count whose middle is long enough to see the loop state recur.
    std::int64_t probe = plan.n_struct;
    while (hi_of(probe) - 1 - W - (plan.loop_lo + W) < 4 * P + 16 && probe < plan.n_struct + 100000)
      ++probe;
    if (hi && probe > *hi) probe = *hi;
    std::map<std::int64_t, std::pair<std::string, std::string>> keys;
    {
      spec::Env e = env;
      e[N] = probe;
      races::Machine m(planned, e);
      m.set_iteration_hook([&](const spec::For &f, std::int64_t i, const races::Machine &mm) {
        if (&f != plan.loop || !in_middle(i, probe)) return;
        keys[i] = {mm.state_key({}), mm.state_key(plan.shift)};
      });
      auto run = m.run();
      (void)run;
    }
    std::optional<std::int64_t> i0;
    for (auto &[i, k] : keys) {
      auto it = keys.find(i + P);
      if (it != keys.end() && it->second.second == k.first) {
        i0 = i;
        break;
      }
    }
    if (!i0) {
      if (check_wrap() || check_all_bounded()) return finish(v, t0);
      v.status = Status::unknown;
      v.reason = bounded + ": the loop's slot state does not become periodic";
      return finish(v, t0);
    }
    std::int64_t base = plan.n_struct;
    while (hi_of(base) - 1 - W < *i0 + P)
      ++base;
    check_upto(base + plan.n_step - 1);
    if (violated()) return finish(v, t0);
    v.status = Status::verified;
    std::ostringstream os;
    os << proven_for_every_n() << "for larger " << N << " the loop state recurs every " << P
       << " iteration(s) from iteration " << *i0 << " (k-induction, window " << W << ", " << plan.queries
       << " Z3 queries" << read_from_end << ")";
    v.reason = os.str();
    return finish(v, t0);
  } catch (const races::Unsupported &e) {
    v = Verdict{};
    v.status = Status::unknown;
    v.reason = std::string(e.what()) + (e.loc.line ? " (line " + std::to_string(e.loc.line) + ")" : "");
    return finish(v, t0);
  } catch (InvalidAt &e) {
    v = Verdict{};
    v.status = Status::unknown;
    v.reason = "bad input: " + e.errors.front().message;
    v.errors = std::move(e.errors);
    return finish(v, t0);
  }
}

} // namespace pipecheck::verifier
