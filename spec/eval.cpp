#include "spec/eval.hpp"
#include "spec/bind.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <vector>

namespace pipecheck::spec {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  if (b == -1) return 0; // INT64_MIN % -1 is undefined in C++
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

namespace {

__extension__ typedef __int128 i128;

constexpr i128 kMin = std::numeric_limits<std::int64_t>::min();
constexpr i128 kMax = std::numeric_limits<std::int64_t>::max();

Evaluation value(i128 v, const Expr &at) {
  if (v > kMax || v < kMin) return Evaluation{std::nullopt, EvalFault::overflow, &at};
  return Evaluation{static_cast<std::int64_t>(v), EvalFault::none, nullptr};
}

Evaluation fault(EvalFault f, const Expr &at) { return Evaluation{std::nullopt, f, &at}; }

// Python's floor division of a by b != 0, exact (INT64_MIN // -1 included).
i128 floor_div_wide(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Evaluation power(std::int64_t x, std::int64_t y, const Expr &e) {
  if (y < 0) return fault(EvalFault::not_integer, e); // a float in Python
  if (x == 0 || x == 1) return value(y == 0 ? 1 : x, e);
  if (x == -1) return value(y % 2 == 0 ? 1 : -1, e);
  // |x| >= 2: the result leaves int64 within 64 steps.
  i128 r = 1;
  for (std::int64_t i = 0; i < y; ++i) {
    r *= x;
    if (r > kMax || r < kMin) return fault(EvalFault::overflow, e);
  }
  return value(r, e);
}

// The integer function a call applies, given its name and argument count
// (none: not one eval_int evaluates).
enum class IntFn { none, cdiv, min, max, where, abs };
IntFn int_function(const Expr &e) {
  if (!e.kwarg_names.empty()) return IntFn::none;
  const std::size_t n = e.args.size();
  if (e.name == "cdiv" && n == 2) return IntFn::cdiv;
  if ((e.name == "min" && n >= 2) || (e.name == "minimum" && n == 2)) return IntFn::min;
  if ((e.name == "max" && n >= 2) || (e.name == "maximum" && n == 2)) return IntFn::max;
  // where(c, a, b): lax.select on integers, as an index map clamps with it.
  if (e.name == "where" && n == 3) return IntFn::where;
  if (e.name == "abs" && n == 1) return IntFn::abs;
  return IntFn::none;
}

// `f` on the values of all of its arguments (cdiv: v[1] != 0).
Evaluation apply(IntFn f, const std::int64_t *v, std::size_t n, const Expr &e) {
  switch (f) {
  case IntFn::cdiv: return value(-floor_div_wide(-static_cast<i128>(v[0]), v[1]), e);
  case IntFn::min: return value(*std::min_element(v, v + n), e);
  case IntFn::max: return value(*std::max_element(v, v + n), e);
  case IntFn::where: return value(v[0] != 0 ? v[1] : v[2], e);
  case IntFn::abs: return value(v[0] < 0 ? -static_cast<i128>(v[0]) : v[0], e);
  case IntFn::none: break;
  }
  return fault(EvalFault::not_integer, e);
}

// A binary integer operator on two values (y != 0 for // and %).
Evaluation binary(Op op, std::int64_t a, std::int64_t b, const Expr &e) {
  const i128 x = a, y = b;
  switch (op) {
  case Op::Add: return value(x + y, e);
  case Op::Sub: return value(x - y, e);
  case Op::Mul: return value(x * y, e);
  case Op::FloorDiv: return value(floor_div_wide(x, y), e);
  case Op::Mod: return value(x - floor_div_wide(x, y) * y, e);
  case Op::Pow: return power(a, b, e);
  case Op::Eq: return value(x == y, e);
  case Op::Ne: return value(x != y, e);
  case Op::Lt: return value(x < y, e);
  case Op::Le: return value(x <= y, e);
  case Op::Gt: return value(x > y, e);
  case Op::Ge: return value(x >= y, e);
  default: break;
  }
  return fault(EvalFault::not_integer, e);
}

bool is_binary(Op op) {
  switch (op) {
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
  case Op::Ge: return true;
  default: return false;
  }
}

// `program_id(k)` or `num_programs(k)` with a literal axis.
bool grid_call(const Expr &e) {
  return e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1 &&
         e.args[0].op == Op::Int && e.kwarg_names.empty();
}
std::string grid_call_name(const Expr &e) {
  return e.name == "program_id" ? program_id_var(e.args[0].int_value) : num_programs_var(e.args[0].int_value);
}

Evaluation call(const Expr &e, const Env &env) {
  // A grid index bound by name (spec::bind_point_names): a grid point's
  // value without rewriting the expression
  // (bind_grid copies every node of a prefetch table's where-tree).
  if (grid_call(e)) {
    const auto it = env.find(grid_call_name(e));
    return it != env.end() ? Evaluation{it->second} : fault(EvalFault::unbound, e);
  }
  if (!is_int_function(e.name) || !e.kwarg_names.empty()) return fault(EvalFault::not_integer, e);
  // `where(c, a, b)` with c decided is the side it selects, whatever the
  // other holds (a prefetch table's balanced `where` tree is one path, not
  // every leaf; an unknown or faulting unselected side takes nothing).
  if (int_function(e) == IntFn::where) {
    Evaluation c = evaluate(e.args[0], env);
    if (c.is_error()) return c;
    if (c.value) return evaluate(e.args[*c.value != 0 ? 1 : 2], env);
    // Undecided: a side's fault is one only where that side is selected
    // (upstream's planar snake divides by a width that is zero exactly
    // where it is not used), so it is decided with the condition; both
    // sides faulting fault whatever it is.
    // (Each side once: a prefetch table's where-tree nests a where per
    // level, and evaluating a side twice per level doubled per level.)
    Evaluation a = evaluate(e.args[1], env);
    if (!a.is_error()) return c;
    Evaluation b = evaluate(e.args[2], env);
    return b.is_error() ? a : c;
  }
  std::vector<std::int64_t> v;
  std::optional<Evaluation> missing;
  for (const auto &a : e.args) {
    Evaluation x = evaluate(a, env);
    if (x.is_error()) return x;
    if (x.value)
      v.push_back(*x.value);
    else if (!missing)
      missing = x;
  }
  const IntFn f = int_function(e);
  if (f == IntFn::cdiv) {
    if (auto d = evaluate(e.args[1], env).value; d && *d == 0) return fault(EvalFault::div_by_zero, e);
    if (missing) return *missing;
    return apply(f, v.data(), v.size(), e);
  }
  if (missing) return *missing;
  return apply(f, v.data(), v.size(), e);
}

} // namespace

bool is_int_function(const std::string &name) {
  static const char *const int_fns[] = {"cdiv", "min", "max", "abs", "minimum", "maximum", "where"};
  return std::any_of(std::begin(int_fns), std::end(int_fns), [&](const char *f) { return name == f; });
}

bool is_truth_value(const Expr &e) {
  switch (e.op) {
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
  case Op::And:
  case Op::Or:
  case Op::Not: return true;
  case Op::BitAnd:
  case Op::BitOr:
    // (0 and 1 too: on them `&` and `|` are `and` and `or` whatever their
    // type, as where a comparison was folded to its value.)
    return e.args.size() == 2 && std::all_of(e.args.begin(), e.args.end(), [](const Expr &a) {
             return is_truth_value(a) || (a.op == Op::Int && (a.int_value == 0 || a.int_value == 1));
           });
  case Op::BitNot: return e.args.size() == 1 && is_truth_value(e.args[0]);
  default: return false;
  }
}

Evaluation evaluate(const Expr &e, const Env &env) {
  switch (e.op) {
  case Op::Int: return value(e.int_value, e);
  case Op::Name: {
    auto it = env.find(e.name);
    if (it == env.end()) return fault(EvalFault::unbound, e);
    return value(it->second, e);
  }
  case Op::Neg: {
    Evaluation a = evaluate(e.args[0], env);
    if (!a.value) return a;
    return value(-static_cast<i128>(*a.value), e);
  }
  case Op::Not: {
    Evaluation a = evaluate(e.args[0], env);
    if (!a.value) return a;
    return value(*a.value == 0 ? 1 : 0, e);
  }
  case Op::And:
  case Op::Or: {
    Evaluation a = evaluate(e.args[0], env);
    if (!a.value) return a;
    if (e.op == Op::And && *a.value == 0) return value(0, e);
    if (e.op == Op::Or && *a.value != 0) return value(1, e);
    Evaluation b = evaluate(e.args[1], env);
    if (!b.value) return b;
    return value(*b.value != 0 ? 1 : 0, e);
  }
  case Op::BitNot: {
    if (!is_truth_value(e)) return fault(EvalFault::not_integer, e);
    Evaluation a = evaluate(e.args[0], env);
    if (!a.value) return a;
    return value(*a.value == 0 ? 1 : 0, e);
  }
  case Op::BitAnd:
  case Op::BitOr: {
    if (!is_truth_value(e)) return fault(EvalFault::not_integer, e);
    Evaluation a = evaluate(e.args[0], env);
    Evaluation b = evaluate(e.args[1], env);
    if (a.is_error()) return a;
    if (b.is_error()) return b;
    if (!a.value) return a;
    if (!b.value) return b;
    const bool x = *a.value != 0, y = *b.value != 0;
    return value(e.op == Op::BitAnd ? (x && y) : (x || y), e);
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
  case Op::Ge: {
    Evaluation a = evaluate(e.args[0], env);
    Evaluation b = evaluate(e.args[1], env);
    if (a.is_error()) return a;
    if (b.is_error()) return b;
    if ((e.op == Op::FloorDiv || e.op == Op::Mod) && b.value && *b.value == 0)
      return fault(EvalFault::div_by_zero, e);
    if (!a.value) return a;
    if (!b.value) return b;
    return binary(e.op, *a.value, *b.value, e);
  }
  case Op::Call: return call(e, env);
  default: return fault(EvalFault::not_integer, e);
  }
}

std::optional<std::int64_t> eval_int(const Expr &e, const Env &env) { return evaluate(e, env).value; }

int CompiledInts::add(Node n, const std::vector<int> &kids) {
  n.first = static_cast<int>(kids_.size());
  n.count = static_cast<int>(kids.size());
  kids_.insert(kids_.end(), kids.begin(), kids.end());
  nodes_.push_back(n);
  return static_cast<int>(nodes_.size()) - 1;
}

int CompiledInts::compile_node(const Expr &e, const std::function<int(const std::string &)> &intern) {
  Node n;
  n.op = e.op;
  std::vector<int> kids;
  auto operands = [&](std::size_t count) {
    if (e.args.size() < count) {
      n.kind = Kind::no_value;
      return;
    }
    for (std::size_t k = 0; k < count; ++k)
      kids.push_back(compile_node(e.args[k], intern));
  };
  switch (e.op) {
  case Op::Int:
    n.kind = Kind::constant;
    n.value = e.int_value;
    break;
  case Op::Name:
    n.kind = Kind::variable;
    n.value = intern(e.name);
    break;
  case Op::Neg:
  case Op::Not:
    n.kind = Kind::unary;
    operands(1);
    break;
  case Op::BitNot:
    if (!is_truth_value(e)) break; // never a value
    n.kind = Kind::unary;
    operands(1);
    break;
  case Op::And:
  case Op::Or:
    n.kind = Kind::binary;
    operands(2);
    break;
  case Op::BitAnd:
  case Op::BitOr:
    if (!is_truth_value(e)) break; // never a value
    n.kind = Kind::binary;
    operands(2);
    break;
  case Op::Call: {
    if (grid_call(e)) { // (a variable by its name, as evaluate reads it)
      n.kind = Kind::variable;
      n.value = intern(grid_call_name(e));
      break;
    }
    const IntFn f = is_int_function(e.name) ? int_function(e) : IntFn::none;
    if (f == IntFn::none) break; // never a value
    n.kind = Kind::call;
    n.fn = static_cast<std::uint8_t>(f);
    // (evaluate takes the side a decided condition selects, whatever the
    // other holds: so does a select, for every `where`.)
    if (f == IntFn::where && e.args.size() == 3) n.kind = Kind::select;
    operands(e.args.size());
    break;
  }
  default:
    if (!is_binary(e.op)) break; // never a value
    n.kind = Kind::binary;
    operands(2);
    break;
  }
  return add(n, kids);
}

bool CompiledInts::eval(int node, const std::int64_t *const *vars, std::int64_t &out) const {
  static const Expr here; // the location of a fault, which value() never reports
  const Node &n = nodes_[static_cast<std::size_t>(node)];
  const int *k = kids_.data() + n.first;
  auto done = [&](const Evaluation &r) {
    if (!r.value) return false;
    out = *r.value;
    return true;
  };
  switch (n.kind) {
  case Kind::constant: out = n.value; return true;
  case Kind::variable: {
    const std::int64_t *v = vars[n.value];
    if (!v) return false;
    out = *v;
    return true;
  }
  case Kind::unary: {
    std::int64_t a = 0;
    if (!eval(k[0], vars, a)) return false;
    if (n.op == Op::Not || n.op == Op::BitNot) {
      out = a == 0 ? 1 : 0;
      return true;
    }
    return done(spec::value(-static_cast<i128>(a), here));
  }
  case Kind::binary: {
    std::int64_t a = 0, b = 0;
    if (!eval(k[0], vars, a)) return false;
    if (n.op == Op::And || n.op == Op::Or) {
      // Python's short circuit, as evaluate(): the right side only when needed.
      if (n.op == Op::And && a == 0) return out = 0, true;
      if (n.op == Op::Or && a != 0) return out = 1, true;
      if (!eval(k[1], vars, b)) return false;
      out = b != 0 ? 1 : 0;
      return true;
    }
    if (!eval(k[1], vars, b)) return false;
    if (n.op == Op::BitAnd || n.op == Op::BitOr) {
      out = n.op == Op::BitAnd ? (a != 0 && b != 0) : (a != 0 || b != 0);
      return true;
    }
    if ((n.op == Op::FloorDiv || n.op == Op::Mod) && b == 0) return false;
    return done(binary(n.op, a, b, here));
  }
  case Kind::call: {
    std::int64_t small[4];
    std::vector<std::int64_t> big;
    std::int64_t *v = small;
    if (n.count > 4) {
      big.resize(static_cast<std::size_t>(n.count));
      v = big.data();
    }
    for (int i = 0; i < n.count; ++i)
      if (!eval(k[i], vars, v[i])) return false;
    const auto f = static_cast<IntFn>(n.fn);
    if (f == IntFn::cdiv && v[1] == 0) return false;
    return done(apply(f, v, static_cast<std::size_t>(n.count), here));
  }
  case Kind::select: {
    std::int64_t c = 0;
    if (!eval(k[0], vars, c)) return false;
    return eval(k[c != 0 ? 1 : 2], vars, out);
  }
  case Kind::no_value: return false;
  }
  return false;
}

std::optional<std::int64_t> CompiledInts::value(int root, const std::int64_t *const *vars) const {
  std::int64_t v = 0;
  if (!eval(root, vars, v)) return std::nullopt;
  return v;
}

std::optional<Diagnostic> arithmetic_error(const Expr &e, const Env &env, const std::string &where) {
  Evaluation r = evaluate(e, env);
  if (!r.is_error()) return std::nullopt;
  const char *what = r.fault == EvalFault::div_by_zero ? "division by zero in " : "integer overflow in ";
  return Diagnostic{Severity::error, r.at->loc, what + where, {}};
}

namespace {

std::string expr_text(const Expr &e) {
  std::ostringstream os;
  os << e;
  return os.str();
}

std::size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

} // namespace

std::string nearest_name(const std::string &name, const std::vector<std::string> &candidates) {
  std::string best;
  std::size_t best_d = 0;
  for (const auto &c : candidates) {
    std::size_t dist = edit_distance(name, c);
    if (best.empty() || dist < best_d) {
      best = c;
      best_d = dist;
    }
  }
  // A plausible typo: a case slip, or at most a third of the name wrong.
  return !best.empty() && best_d <= std::max<std::size_t>(1, name.size() / 3) ? best : "";
}

ParamBinding bind_params(const std::vector<Param> &params, const Env &overrides, bool require_all) {
  ParamBinding b;
  for (const auto &p : params) {
    auto o = overrides.find(p.name);
    if (o == overrides.end()) {
      if (p.value) {
        if (auto v = eval_int(*p.value, b.env)) b.env[p.name] = *v;
      } else if (require_all) {
        b.errors.push_back({Severity::error,
                            p.loc,
                            "param " + p.name + " is symbolic: bind it with --set " + p.name + "=VALUE",
                            {}});
      }
      continue;
    }
    const std::int64_t v = o->second;
    std::optional<std::int64_t> lo = p.lo ? eval_int(*p.lo, b.env) : std::nullopt;
    std::optional<std::int64_t> hi = p.hi ? eval_int(*p.hi, b.env) : std::nullopt;
    if ((lo && v < *lo) || (hi && v > *hi)) {
      std::string domain = p.name + " >= " + expr_text(*p.lo);
      if (p.hi) domain += " <= " + expr_text(*p.hi);
      if (!p.lo) domain = p.name + " <= " + expr_text(*p.hi);
      b.errors.push_back(
          {Severity::error,
           p.loc,
           "param " + p.name + " = " + std::to_string(v) + " (from --set) is outside its domain " + domain,
           {}});
      continue;
    }
    b.env[p.name] = v;
  }
  return b;
}

std::map<std::string, std::string> unknown_params(const Env &overrides,
                                                  const std::set<std::string> &declared) {
  std::map<std::string, std::string> out;
  for (const auto &[name, value] : overrides) {
    if (declared.count(name)) continue;
    std::string best = nearest_name(name, std::vector<std::string>(declared.begin(), declared.end()));
    std::string msg = "no param named '" + name + "'";
    if (!best.empty())
      msg += "; did you mean `" + best + "`?";
    else if (declared.empty())
      msg += "; no unit declares any param";
    out[name] = msg;
  }
  return out;
}

Env param_env(const std::vector<Param> &params, const Env &overrides) {
  return bind_params(params, overrides, false).env;
}

Expr substitute(const Expr &e, const std::map<std::string, Expr> &m) {
  if (e.op == Op::Name) {
    auto it = m.find(e.name);
    if (it != m.end()) return it->second;
    return e;
  }
  return e.map_args([&](const Expr &a) { return substitute(a, m); });
}

bool mentions(const Expr &e, const std::string &name) {
  if (e.op == Op::Name) return e.name == name;
  if (e.op == Op::Ref && e.name == name) return true;
  for (const auto &a : e.args)
    if (mentions(a, name)) return true;
  return false;
}

} // namespace pipecheck::spec
