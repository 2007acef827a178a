#pragma once
/// Evaluation of integer expressions under an environment of names, with
/// Python semantics (`//` and `%` floor toward negative infinity).

#include "spec/ir.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace pipecheck::spec {

using Env = std::map<std::string, std::int64_t>;

/// The value of an integer expression, or nullopt when it names something
/// unbound, divides by zero, overflows, or is not an integer expression.
/// Booleans evaluate to 0/1. Calls: cdiv, min, max, abs.
std::optional<std::int64_t> eval_int(const Expr &, const Env &);

/// Python floor division and modulo (b != 0).
std::int64_t floor_div(std::int64_t a, std::int64_t b);
std::int64_t floor_mod(std::int64_t a, std::int64_t b);

/// The environment of every param that has a value (in declaration order, each
/// may use the ones before it), with `overrides` (`--set`) taking precedence.
/// Symbolic params (`N >= 1`) are bound only when overridden.
Env param_env(const std::vector<Param> &, const Env &overrides = {});

/// Substitutes `name -> replacement` throughout an expression (leaf Names only).
Expr substitute(const Expr &, const std::map<std::string, Expr> &);

/// True when the expression mentions the variable `name`.
bool mentions(const Expr &, const std::string &name);

} // namespace pipecheck::spec
