#include "verifier/smt/smt.hpp"

#include "spec/eval.hpp"
#include "verifier/smt/interrupt.hpp"

#include <z3++.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace pipecheck::verifier::smt {

namespace {

std::atomic<bool> g_interrupted{false};
std::mutex g_contexts_mutex;
std::set<z3::context *> &live_contexts() {
  static std::set<z3::context *> s;
  return s;
}

} // namespace

void interrupt_all() {
  g_interrupted = true;
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  for (z3::context *c : live_contexts())
    c->interrupt();
}

bool interrupted() { return g_interrupted; }

InterruptScope::InterruptScope(z3::context &c) : c_(c) {
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  live_contexts().insert(&c_);
  // Checked under the lock: interrupt_all() either sees this context or set
  // the flag before it was registered.
  if (g_interrupted) c_.interrupt();
}

InterruptScope::~InterruptScope() {
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  live_contexts().erase(&c_);
}

struct Context::Impl {
  z3::context c;
  InterruptScope interrupt{c};
  std::vector<z3::expr> terms;
  // Names the `//` and `%` auxiliaries: the same per check, so equal
  // queries are equal text (rules::QueryCache).
  unsigned long aux_counter = 0;
};

struct TermAccess {
  static const z3::expr &get(const Term &t) {
    assert(t.valid());
    return t.ctx_->impl().terms[static_cast<std::size_t>(t.id_)];
  }
  static Term make(Context *c, const z3::expr &e) {
    auto &ts = c->impl().terms;
    ts.push_back(e);
    return Term(c, static_cast<int>(ts.size() - 1));
  }
};

namespace {

const z3::expr &ex(const Term &t) { return TermAccess::get(t); }
Term mk(const Term &like, const z3::expr &e) { return TermAccess::make(like.context(), e); }
z3::context &zc(const Term &t) { return t.context()->impl().c; }
z3::expr lit(const Term &like, std::int64_t v) { return zc(like).int_val(static_cast<int64_t>(v)); }

} // namespace

namespace {

// `names` (when given) numbers the free constants by first occurrence.
void append_key(const z3::expr &e, std::string &out, std::unordered_map<unsigned, std::size_t> &seen,
                std::unordered_map<std::string, std::size_t> *names) {
  const unsigned id = Z3_get_ast_id(e.ctx(), e);
  if (auto it = seen.find(id); it != seen.end()) {
    out += '#';
    out += std::to_string(it->second);
    out += ' ';
    return;
  }
  Z3_context c = e.ctx();
  switch (e.kind()) {
  case Z3_NUMERAL_AST:
    out += e.is_int() ? 'i' : e.is_bool() ? 'b' : 'r';
    out += Z3_get_numeral_string(c, e);
    break;
  case Z3_VAR_AST:
    out += 'v';
    out += std::to_string(Z3_get_index_value(c, e));
    break;
  case Z3_QUANTIFIER_AST: {
    out += Z3_is_quantifier_forall(c, e) ? "(A" : Z3_is_quantifier_exists(c, e) ? "(E" : "(L";
    const unsigned n = Z3_get_quantifier_num_bound(c, e);
    // Bound variables by position and sort (de Bruijn): their names do not
    // change what the quantifier means.
    for (unsigned i = 0; i < n; ++i) {
      out += ' ';
      out += std::to_string(static_cast<int>(Z3_get_sort_kind(c, Z3_get_quantifier_bound_sort(c, e, i))));
    }
    out += " p" + std::to_string(Z3_get_quantifier_num_patterns(c, e));
    out += " n" + std::to_string(Z3_get_quantifier_num_no_patterns(c, e));
    out += ' ';
    append_key(e.body(), out, seen, names);
    out += ')';
    break;
  }
  case Z3_APP_AST: {
    z3::func_decl d = e.decl();
    if (names && e.num_args() == 0 && d.decl_kind() == Z3_OP_UNINTERPRETED) {
      const auto at = names->emplace(Z3_get_symbol_string(c, Z3_get_decl_name(c, d)), names->size()).first;
      out +=
          "c" + std::to_string(at->second) + ":" + std::to_string(static_cast<int>(e.get_sort().sort_kind()));
      break;
    }
    out += '(';
    out += std::to_string(static_cast<int>(d.decl_kind()));
    out += ':';
    out += Z3_get_symbol_string(c, Z3_get_decl_name(c, d));
    out += ':';
    out += std::to_string(static_cast<int>(e.get_sort().sort_kind()));
    if (const unsigned np = Z3_get_decl_num_parameters(c, d); np > 0) {
      for (unsigned i = 0; i < np; ++i)
        out += Z3_get_decl_parameter_kind(c, d, i) == Z3_PARAMETER_INT
                   ? "[" + std::to_string(Z3_get_decl_int_parameter(c, d, i)) + "]"
                   : "[" + d.to_string() + "]";
    }
    for (unsigned i = 0; i < e.num_args(); ++i) {
      out += ' ';
      append_key(e.arg(i), out, seen, names);
    }
    out += ')';
    break;
  }
  default:
    // Sorts and declarations never stand alone in a query; printed in full.
    out += "?" + e.to_string();
  }
  seen.emplace(id, seen.size());
}

} // namespace

std::string Term::key() const {
  std::string out;
  std::unordered_map<unsigned, std::size_t> seen;
  append_key(ex(*this), out, seen, nullptr);
  return out;
}

std::vector<std::string> Term::keys(const std::vector<Term> &terms) {
  std::vector<std::string> out;
  std::unordered_map<std::string, std::size_t> names;
  for (const Term &t : terms) {
    std::unordered_map<unsigned, std::size_t> seen;
    append_key(ex(t), out.emplace_back(), seen, &names);
  }
  return out;
}

std::optional<std::int64_t> Term::numeral() const {
  z3::expr e = ex(*this).simplify();
  int64_t v = 0;
  if (e.is_int() && e.is_numeral_i64(v)) return v;
  return std::nullopt;
}
bool Term::is_true() const { return ex(*this).simplify().is_true(); }
bool Term::is_false() const { return ex(*this).simplify().is_false(); }
std::string Term::to_string() const { return ex(*this).to_string(); }

namespace {
// A Boolean where a number is wanted is 1 or 0, a number where a Boolean is
// wanted is its truth (`A[s or 1]`, `a[s < 1]` in a subscript): Python's
// meaning, and no sort mismatch for Z3 to assert on.
z3::expr num(const z3::expr &e) {
  return e.is_bool() ? z3::ite(e, e.ctx().int_val(1), e.ctx().int_val(0)) : e;
}
z3::expr truth(const z3::expr &e) { return e.is_bool() ? e : e != e.ctx().int_val(0); }
// Operands of == and != as they are where both are Booleans or both numbers.
std::pair<z3::expr, z3::expr> alike(const z3::expr &a, const z3::expr &b) {
  if (a.is_bool() == b.is_bool()) return {a, b};
  return {num(a), num(b)};
}
} // namespace

Term operator+(const Term &a, const Term &b) { return mk(a, num(ex(a)) + num(ex(b))); }
Term operator-(const Term &a, const Term &b) { return mk(a, num(ex(a)) - num(ex(b))); }
Term operator*(const Term &a, const Term &b) { return mk(a, num(ex(a)) * num(ex(b))); }
Term operator-(const Term &a) { return mk(a, -num(ex(a))); }
Term operator==(const Term &a, const Term &b) {
  auto [x, y] = alike(ex(a), ex(b));
  return mk(a, x == y);
}
Term operator!=(const Term &a, const Term &b) {
  auto [x, y] = alike(ex(a), ex(b));
  return mk(a, x != y);
}
Term operator<(const Term &a, const Term &b) { return mk(a, num(ex(a)) < num(ex(b))); }
Term operator<=(const Term &a, const Term &b) { return mk(a, num(ex(a)) <= num(ex(b))); }
Term operator>(const Term &a, const Term &b) { return mk(a, num(ex(a)) > num(ex(b))); }
Term operator>=(const Term &a, const Term &b) { return mk(a, num(ex(a)) >= num(ex(b))); }
Term operator&&(const Term &a, const Term &b) { return mk(a, truth(ex(a)) && truth(ex(b))); }
Term operator||(const Term &a, const Term &b) { return mk(a, truth(ex(a)) || truth(ex(b))); }
Term operator!(const Term &a) { return mk(a, !truth(ex(a))); }
Term operator+(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) + lit(a, b)); }
Term operator-(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) - lit(a, b)); }
Term operator*(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) * lit(a, b)); }
Term operator==(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) == lit(a, b)); }
Term operator!=(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) != lit(a, b)); }
Term operator<(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) < lit(a, b)); }
Term operator<=(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) <= lit(a, b)); }
Term operator>(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) > lit(a, b)); }
Term operator>=(const Term &a, std::int64_t b) { return mk(a, num(ex(a)) >= lit(a, b)); }

Term floor_div(const Term &a, std::int64_t c) {
  assert(c != 0);
  // SMT-LIB `div` is Euclidean: it equals floor division for a positive
  // divisor, and floor(a / c) == floor(-a / -c) covers a negative one.
  if (c > 0) return mk(a, z3::expr(zc(a), Z3_mk_div(zc(a), num(ex(a)), lit(a, c))));
  z3::expr na = -num(ex(a));
  return mk(a, z3::expr(zc(a), Z3_mk_div(zc(a), na, lit(a, -c))));
}

Term floor_mod(const Term &a, std::int64_t c) { return a - floor_div(a, c) * c; }

Term ite(const Term &c, const Term &a, const Term &b) {
  auto [x, y] = alike(ex(a), ex(b));
  return mk(c, z3::ite(truth(ex(c)), x, y));
}

Term truthy(const Term &t) { return mk(t, truth(ex(t))); }

namespace {
Term quantify(bool universal, const std::vector<Term> &vars, const Term &body) {
  if (vars.empty()) return body;
  z3::expr_vector vs(zc(body));
  for (const Term &v : vars)
    vs.push_back(ex(v));
  return mk(body, universal ? z3::forall(vs, ex(body)) : z3::exists(vs, ex(body)));
}
} // namespace

Term forall(const std::vector<Term> &vars, const Term &body) { return quantify(true, vars, body); }
Term exists(const std::vector<Term> &vars, const Term &body) { return quantify(false, vars, body); }

Term substitute(const Term &t, const std::vector<Term> &from, const std::vector<Term> &to) {
  assert(from.size() == to.size());
  z3::expr_vector src(zc(t)), dst(zc(t));
  for (std::size_t i = 0; i < from.size(); ++i) {
    src.push_back(ex(from[i]));
    dst.push_back(ex(to[i]));
  }
  z3::expr e = ex(t);
  return mk(t, e.substitute(src, dst));
}

// Every Context is a fresh Z3 context (about 1.5 ms to make). Contexts used
// to be kept and reused by their thread, but a reused context keeps what
// earlier queries declared and learned, and MBQI's answer to a quantified
// query then depended on what the thread had checked before: the same
// kernel came out verified or unknown depending on the files before it.
Context::Context() : impl_(std::make_unique<Impl>()) {}

Context::~Context() = default;

Term Context::int_var(const std::string &name) {
  return TermAccess::make(this, impl_->c.int_const(name.c_str()));
}
Term Context::num(std::int64_t v) {
  return TermAccess::make(this, impl_->c.int_val(static_cast<int64_t>(v)));
}
Term Context::boolean(bool b) { return TermAccess::make(this, impl_->c.bool_val(b)); }
Term Context::all_of(const std::vector<Term> &ts) {
  if (ts.empty()) return boolean(true);
  Term r = ts[0];
  for (std::size_t i = 1; i < ts.size(); ++i)
    r = r && ts[i];
  return r;
}
Term Context::any_of(const std::vector<Term> &ts) {
  if (ts.empty()) return boolean(false);
  Term r = ts[0];
  for (std::size_t i = 1; i < ts.size(); ++i)
    r = r || ts[i];
  return r;
}

const char *to_string(Result::Kind k) {
  switch (k) {
  case Result::sat: return "sat";
  case Result::unsat: return "unsat";
  case Result::unknown: return "unknown";
  }
  return "unknown";
}

struct Solver::Impl {
  z3::solver s;
  std::optional<z3::model> model;
  std::vector<std::string> core;
  unsigned counter = 0;
  unsigned rlimit = 0;
  // The plain incremental SMT kernel: every query runs inside push/pop, where
  // Z3's default solver hands over to this same kernel anyway, but the
  // default one first builds its tactic front end (~3 ms per solver, more
  // than all of a small kernel's queries together).
  explicit Impl(z3::context &c) : s(c, z3::solver::simple()) {}
  explicit Impl(const z3::tactic &t) : s(t.mk_solver()), tracked(false) {}
  bool tracked = true; // assertions carry their names (the plain kernel)
};

Solver::Solver(Context &c, unsigned timeout_ms, Mode mode)
    : ctx_(c),
      impl_(mode == Mode::plain
                ? std::make_unique<Impl>(c.impl().c)
                : std::make_unique<Impl>(z3::tactic(c.impl().c, "qe") & z3::tactic(c.impl().c, "smt"))) {
  z3::params p(c.impl().c);
  // The budget is Z3's resource count (its `rlimit`), not a clock: the same
  // query gets the same answer on a loaded CI machine, under a sanitizer and
  // on a laptop. Z3 4.8's own timer is also unsafe to lean on: a timer armed
  // for an earlier query can cancel a later one after a few milliseconds
  // (inside MBQI that surfaces as "incomplete quantifiers"), and one that
  // expires while a query is set up can be lost.
  const std::uint64_t units = std::uint64_t{timeout_ms == 0 ? 1u : timeout_ms} * kResourceUnitsPerMs;
  impl_->rlimit = static_cast<unsigned>(std::min<std::uint64_t>(units, std::numeric_limits<unsigned>::max()));
  p.set("rlimit", impl_->rlimit);
  // Z3 would otherwise install its own SIGINT handler around every check and
  // put the old one back after: putting back SIG_IGN discards a Ctrl-C that
  // is pending for the CLI's watcher thread. Interrupts reach Z3 only
  // through interrupt_all().
  p.set("ctrl_c", false);
  impl_->s.set(p);
}
Solver::~Solver() = default;

void Solver::add(const Term &t, const std::string &name) {
  if (!impl_->tracked) {
    impl_->s.add(ex(t));
    return;
  }
  std::string n = name + "#" + std::to_string(impl_->counter++);
  impl_->s.add(ex(t), n.c_str());
}
void Solver::push() { impl_->s.push(); }
void Solver::pop() { impl_->s.pop(); }

Result Solver::check() {
  Result r;
  if (interrupted()) {
    r.reason = "interrupted";
    return r;
  }
  z3::check_result c = z3::unknown;
  try {
    c = impl_->s.check();
  } catch (const z3::exception &e) {
    r.kind = Result::unknown;
    r.reason = e.msg();
    return r;
  }
  impl_->core.clear();
  if (c == z3::sat) {
    r.kind = Result::sat;
    impl_->model = impl_->s.get_model();
  } else if (c == z3::unsat) {
    r.kind = Result::unsat;
    z3::expr_vector core = impl_->s.unsat_core();
    for (unsigned i = 0; i < core.size(); ++i)
      impl_->core.push_back(core[static_cast<int>(i)].to_string());
  } else {
    r.kind = Result::unknown;
    r.reason = impl_->s.reason_unknown();
    if (interrupted())
      r.reason = "interrupted";
    else if (r.reason == "canceled" || r.reason == "timeout" ||
             r.reason.find("resource") != std::string::npos)
      r.reason = "solver budget exhausted";
  }
  return r;
}

std::int64_t Solver::value(const Term &t) const {
  assert(impl_->model.has_value());
  z3::expr v = impl_->model->eval(ex(t), true);
  int64_t out = 0;
  bool ok = v.is_numeral_i64(out);
  assert(ok);
  (void)ok;
  return out;
}

std::optional<std::int64_t> Solver::try_value(const Term &t) const {
  if (!impl_->model) return std::nullopt;
  z3::expr v = impl_->model->eval(ex(t), true);
  int64_t out = 0;
  if (!v.is_numeral_i64(out)) return std::nullopt;
  return out;
}

std::vector<std::string> Solver::core() const { return impl_->core; }

std::vector<std::int64_t> Solver::minimize_lex(const std::vector<Term> &vars,
                                               const std::vector<std::int64_t> &lower, bool *complete,
                                               unsigned probe_divisor) {
  assert(vars.size() == lower.size());
  std::vector<std::int64_t> vals;
  for (const Term &v : vars)
    vals.push_back(value(v));
  auto budget = [&](unsigned units) {
    z3::params p(ctx_.impl().c);
    p.set("rlimit", units);
    impl_->s.set(p);
  };
  // Z3's resources spent so far (its statistics' cumulative "rlimit count").
  auto spent = [&]() -> std::uint64_t {
    const z3::stats st = impl_->s.statistics();
    for (unsigned i = 0; i < st.size(); ++i)
      if (st.key(i) == "rlimit count")
        return st.is_uint(i) ? st.uint_value(i) : static_cast<std::uint64_t>(st.double_value(i));
    return 0;
  };
  // Every probe together spends at most an eighth of one query's budget:
  // each is a query of its own, and two dozen of them at the full budget
  // took a minute where the solver wandered (a witness left where it is is
  // still a witness; probes that decide are usually quick).
  const std::uint64_t start = spent();
  const std::uint64_t total = std::max(1u, impl_->rlimit / 8);
  const unsigned per_probe = probe_divisor > 1 ? std::max(1u, impl_->rlimit / probe_divisor) : impl_->rlimit;
  push();
  bool stop = false;
  for (std::size_t k = 0; k < vars.size() && !stop; ++k) {
    std::int64_t lo = lower[k];
    std::int64_t hi = value(vars[k]);
    // Probe the lower bound first: witnesses are usually at the origin.
    bool first = true;
    while (lo < hi) {
      const std::uint64_t used = spent() - start;
      if (used >= total) {
        stop = true;
        break;
      }
      budget(static_cast<unsigned>(std::min<std::uint64_t>(per_probe, total - used)));
      std::int64_t mid = first ? lo : lo + (hi - lo) / 2;
      first = false;
      push();
      add(vars[k] <= mid, "minimize");
      Result r = check();
      pop();
      if (r.kind == Result::sat) {
        hi = value(vars[k]);
      } else if (r.kind == Result::unsat) {
        lo = mid + 1;
      } else {
        stop = true;
        break;
      }
    }
    add(vars[k] == hi, "minimize-fix");
    if (!stop) {
      budget(impl_->rlimit); // (the point found: a check that confirms it, with a query's budget)
      Result r = check();
      if (r.kind != Result::sat) stop = true;
    }
  }
  if (!stop)
    for (std::size_t k = 0; k < vars.size(); ++k)
      vals[k] = value(vars[k]);
  pop();
  budget(impl_->rlimit);
  if (complete) *complete = !stop;
  return vals;
}

// ----------------------------------------------------------------- translate

namespace {

struct Translator {
  Context &ctx;
  const Bindings &b;
  std::string error;

  std::optional<Term> fail(const std::string &msg) {
    if (error.empty()) error = msg;
    return std::nullopt;
  }
  bool is_bool(const Term &t) { return ex(t).is_bool(); }
  static Term as_int(const Term &t) { return mk(t, num(ex(t))); }
  static Term as_bool(const Term &t) { return truthy(t); }

  // `g * y` with g a grid index whose axis has few steps (`j * p` with a
  // two-phase axis p, the (i, j * p) index map of a kernel that parks an
  // output block in its first phase): one linear case per value of g.
  static constexpr std::int64_t kCaseSplitExtent = 16;
  std::optional<Term> cases_of(const Term &g, const Term &y) {
    for (std::size_t k = 0; k < b.program_ids.size() && k < b.num_programs.size(); ++k) {
      const std::int64_t n = b.num_programs[k];
      if (n < 1 || n > kCaseSplitExtent || !z3::eq(ex(g), ex(b.program_ids[k]))) continue;
      Term r = ctx.num(0);
      for (std::int64_t v = n - 1; v >= 1; --v)
        r = ite(g == ctx.num(v), y * ctx.num(v), r);
      return r;
    }
    return std::nullopt;
  }

  std::optional<std::int64_t> constant(const Term &t) {
    if (is_bool(t)) return std::nullopt;
    return t.numeral();
  }

  std::optional<Term> run(const spec::Expr &e) {
    using spec::Op;
    switch (e.op) {
    case Op::Int: return ctx.num(e.int_value);
    case Op::Name: {
      auto it = b.names.find(e.name);
      if (it == b.names.end()) return fail("unbound name '" + e.name + "'");
      return it->second;
    }
    case Op::Neg: {
      auto a = run(e.args.at(0));
      if (!a) return a;
      return -as_int(*a);
    }
    case Op::Not: {
      auto a = run(e.args.at(0));
      if (!a) return a;
      return !as_bool(*a);
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::FloorDiv:
    case Op::Mod:
    case Op::Pow:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::And:
    case Op::Or: return binary(e);
    case Op::Call: return call(e);
    default:
      return fail(std::string("unsupported construct '") + spec::to_string(e.op) +
                  "' in an integer expression");
    }
  }

  std::optional<Term> binary(const spec::Expr &e) {
    using spec::Op;
    auto a = run(e.args.at(0));
    if (!a) return a;
    auto bb = run(e.args.at(1));
    if (!bb) return bb;
    switch (e.op) {
    case Op::And: return as_bool(*a) && as_bool(*bb);
    case Op::Or: return as_bool(*a) || as_bool(*bb);
    default: break;
    }
    Term x = as_int(*a), y = as_int(*bb);
    switch (e.op) {
    case Op::Add: return x + y;
    case Op::Sub: return x - y;
    case Op::Mul:
      if (!constant(x) && !constant(y)) {
        if (auto t = cases_of(x, y)) return t;
        if (auto t = cases_of(y, x)) return t;
        return fail(
            "nonlinear multiplication of two grid-dependent terms (one of them a grid index of an axis "
            "of at most " +
            std::to_string(kCaseSplitExtent) + " steps is split into cases)");
      }
      return x * y;
    case Op::FloorDiv:
    case Op::Mod: {
      auto c = constant(y);
      if (!c) return fail("'//' or '%' by a non-constant");
      if (*c == 0) return fail("division by zero");
      if (b.aux) {
        // Python floor division by c: floor(x / c) == floor(-x / -c).
        Term num = *c > 0 ? x : -x;
        std::int64_t den = *c > 0 ? *c : -*c;
        Term d = ctx.int_var("div!" + std::to_string(ctx.impl().aux_counter++));
        b.aux->aux_vars.push_back(d);
        b.aux->side.push_back(d * den <= num && num < d * den + den);
        return e.op == Op::FloorDiv ? d : x - d * *c;
      }
      return e.op == Op::FloorDiv ? floor_div(x, *c) : floor_mod(x, *c);
    }
    case Op::Pow: {
      auto cx = constant(x), cy = constant(y);
      if (!cx || !cy || *cy < 0) return fail("'**' of non-constants");
      spec::Expr folded = spec::Expr::binary(Op::Pow, spec::Expr::integer(*cx), spec::Expr::integer(*cy));
      auto v = spec::eval_int(folded, {});
      if (!v) return fail("'**' overflows");
      return ctx.num(*v);
    }
    case Op::Eq: return x == y;
    case Op::Ne: return x != y;
    case Op::Lt: return x < y;
    case Op::Le: return x <= y;
    case Op::Gt: return x > y;
    case Op::Ge: return x >= y;
    default: return fail("unsupported operator");
    }
  }

  std::optional<std::int64_t> axis_of(const spec::Expr &e) {
    if (e.num_positional() != 1 || e.args[0].op != spec::Op::Int) return std::nullopt;
    return e.args[0].int_value;
  }

  std::optional<Term> call(const spec::Expr &e) {
    if (e.name == "program_id" || e.name == "num_programs") {
      auto a = axis_of(e);
      if (!a) return fail(e.name + " needs a constant axis");
      auto n = static_cast<std::size_t>(*a);
      if (*a < 0 || n >= b.num_programs.size())
        return fail(e.name + "(" + std::to_string(*a) + ") names no grid axis");
      if (e.name == "num_programs") return ctx.num(b.num_programs[n]);
      if (n >= b.program_ids.size()) return fail("program_id outside a grid context");
      return b.program_ids[n];
    }
    std::vector<Term> args;
    std::optional<Term> cond; // where's first argument, as a bool
    for (const auto &a : e.args) {
      auto t = run(a);
      if (!t) return t;
      if (e.name == "where" && !cond)
        cond = as_bool(*t);
      else
        args.push_back(as_int(*t));
    }
    // Exactly, piecewise linear: an ite per select, min and max.
    if (e.name == "where" && cond && args.size() == 2) return ite(*cond, args[0], args[1]);
    if (e.name == "abs" && args.size() == 1) return ite(args[0] < 0, -args[0], args[0]);
    const bool is_min = e.name == "min" || e.name == "minimum",
               is_max = e.name == "max" || e.name == "maximum";
    if ((is_min || is_max) && args.size() >= 2) {
      Term r = args[0];
      for (std::size_t k = 1; k < args.size(); ++k)
        r = is_min ? ite(r <= args[k], r, args[k]) : ite(r >= args[k], r, args[k]);
      return r;
    }
    if (e.name == "cdiv" && args.size() == 2) {
      auto c = constant(args[1]);
      if (!c || *c == 0) return fail("cdiv by a non-constant or zero");
      if (b.aux) {
        Term num = -args[0];
        std::int64_t den = *c;
        if (den < 0) {
          num = -num;
          den = -den;
        }
        Term d = ctx.int_var("cdiv!" + std::to_string(ctx.impl().aux_counter++));
        b.aux->aux_vars.push_back(d);
        b.aux->side.push_back(d * den <= num && num < d * den + den);
        return -d;
      }
      return -floor_div(-args[0], *c);
    }
    return fail("unsupported call '" + e.name + "' in an integer expression");
  }
};

} // namespace

Translation translate(Context &ctx, const spec::Expr &e, const Bindings &b) {
  Translator t{ctx, b, {}};
  Translation out;
  out.term = t.run(e);
  if (!out.term) out.error = t.error.empty() ? "unsupported expression" : t.error;
  return out;
}

} // namespace pipecheck::verifier::smt
