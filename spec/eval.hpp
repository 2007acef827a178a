#pragma once
/// Evaluation of integer expressions under an environment of names, with
/// Python semantics (`//` and `%` floor toward negative infinity).

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
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

/// The outcome of binding a unit's params.
struct ParamBinding {
  Env env;                        ///< every bound param
  std::vector<Diagnostic> errors; ///< located at the param; empty when all is well
};

/// The one param binder (used by check, run, lower, the verifier and the
/// executor). Params bind in declaration order, each able to use the ones
/// before it: an override (`--set`) first, else the declared value. An
/// override outside a param's bounds (`m >= 1`, `K >= 1 <= 64`) is an error;
/// a symbolic param without an override stays unbound, or is an error when
/// `require_all` ("param m is symbolic: bind it with --set m=VALUE"): there
/// is no default. Overrides naming no param are ignored here (see
/// unknown_params).
ParamBinding bind_params(const std::vector<Param> &, const Env &overrides, bool require_all);

/// One message per override whose name is not in `declared`, with the
/// closest declared name when there is a plausible one:
/// "no param named 'M'; did you mean `m`?".
std::map<std::string, std::string> unknown_params(const Env &overrides,
                                                  const std::set<std::string> &declared);

/// bind_params(params, overrides, false).env: the environment of every param
/// that has a value or an in-bounds override.
Env param_env(const std::vector<Param> &, const Env &overrides = {});

/// Substitutes `name -> replacement` throughout an expression (leaf Names only).
Expr substitute(const Expr &, const std::map<std::string, Expr> &);

/// True when the expression mentions the variable `name`.
bool mentions(const Expr &, const std::string &name);

} // namespace pipecheck::spec
