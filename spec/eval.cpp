#include "spec/eval.hpp"

#include <limits>

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

Env param_env(const std::vector<Param> &params, const Env &overrides) {
  Env env;
  for (const auto &p : params) {
    auto o = overrides.find(p.name);
    if (o != overrides.end()) {
      env[p.name] = o->second;
    } else if (p.value) {
      if (auto v = eval_int(*p.value, env)) env[p.name] = *v;
    }
  }
  return env;
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
