#include "spec/eval.hpp"

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

std::int64_t floor_mod(std::int64_t a, std::int64_t b) { return a - floor_div(a, b) * b; }

namespace {

__extension__ typedef __int128 i128;

std::optional<std::int64_t> checked(i128 v) {
  if (v > std::numeric_limits<std::int64_t>::max() || v < std::numeric_limits<std::int64_t>::min())
    return std::nullopt;
  return static_cast<std::int64_t>(v);
}

} // namespace

std::optional<std::int64_t> eval_int(const Expr &e, const Env &env) {
  switch (e.op) {
  case Op::Int: return e.int_value;
  case Op::Name: {
    auto it = env.find(e.name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  }
  case Op::Neg: {
    auto a = eval_int(e.args[0], env);
    if (!a) return std::nullopt;
    return checked(-static_cast<i128>(*a));
  }
  case Op::Not: {
    auto a = eval_int(e.args[0], env);
    if (!a) return std::nullopt;
    return *a == 0 ? 1 : 0;
  }
  case Op::And:
  case Op::Or: {
    auto a = eval_int(e.args[0], env);
    if (!a) return std::nullopt;
    if (e.op == Op::And && *a == 0) return 0;
    if (e.op == Op::Or && *a != 0) return 1;
    auto b = eval_int(e.args[1], env);
    if (!b) return std::nullopt;
    return *b != 0 ? 1 : 0;
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
    auto a = eval_int(e.args[0], env);
    auto b = eval_int(e.args[1], env);
    if (!a || !b) return std::nullopt;
    i128 x = *a, y = *b;
    switch (e.op) {
    case Op::Add: return checked(x + y);
    case Op::Sub: return checked(x - y);
    case Op::Mul: return checked(x * y);
    case Op::FloorDiv:
      if (y == 0) return std::nullopt;
      return floor_div(*a, *b);
    case Op::Mod:
      if (y == 0) return std::nullopt;
      return floor_mod(*a, *b);
    case Op::Pow: {
      if (y < 0 || y > 126) return std::nullopt;
      i128 r = 1;
      for (int i = 0; i < y; ++i) {
        r *= x;
        if (r > std::numeric_limits<std::int64_t>::max() || r < std::numeric_limits<std::int64_t>::min())
          return std::nullopt;
      }
      return checked(r);
    }
    case Op::Eq: return x == y;
    case Op::Ne: return x != y;
    case Op::Lt: return x < y;
    case Op::Le: return x <= y;
    case Op::Gt: return x > y;
    case Op::Ge: return x >= y;
    default: return std::nullopt;
    }
  }
  case Op::Call: {
    if (!e.kwarg_names.empty()) return std::nullopt;
    std::vector<std::int64_t> v;
    for (const auto &a : e.args) {
      auto x = eval_int(a, env);
      if (!x) return std::nullopt;
      v.push_back(*x);
    }
    if (e.name == "cdiv" && v.size() == 2) {
      if (v[1] == 0) return std::nullopt;
      return -floor_div(-v[0], v[1]);
    }
    if (e.name == "min" && v.size() >= 2) {
      std::int64_t m = v[0];
      for (auto x : v)
        m = std::min(m, x);
      return m;
    }
    if (e.name == "max" && v.size() >= 2) {
      std::int64_t m = v[0];
      for (auto x : v)
        m = std::max(m, x);
      return m;
    }
    if (e.name == "abs" && v.size() == 1) return checked(v[0] < 0 ? -static_cast<i128>(v[0]) : v[0]);
    return std::nullopt;
  }
  default: return std::nullopt;
  }
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
    std::string best;
    std::size_t best_d = 0;
    for (const auto &d : declared) {
      std::size_t dist = edit_distance(name, d);
      if (best.empty() || dist < best_d) {
        best = d;
        best_d = dist;
      }
    }
    std::string msg = "no param named '" + name + "'";
    // A plausible typo: a case slip, or at most a third of the name wrong.
    if (!best.empty() && best_d <= std::max<std::size_t>(1, name.size() / 3))
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
  Expr r = e;
  for (auto &a : r.args)
    a = substitute(a, m);
  return r;
}

bool mentions(const Expr &e, const std::string &name) {
  if (e.op == Op::Name) return e.name == name;
  if (e.op == Op::Ref && e.name == name) return true;
  for (const auto &a : e.args)
    if (mentions(a, name)) return true;
  return false;
}

} // namespace pipecheck::spec
