#pragma once
/// Evaluation of integer expressions under an environment of names, with
/// Python semantics (`//` and `%` floor toward negative infinity).

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pipecheck::spec {

using Env = std::map<std::string, std::int64_t>;

/// The value of an integer expression, or nullopt when it names something
/// unbound, divides by zero, overflows, or is not an integer expression.
/// Booleans evaluate to 0/1. Calls: those is_int_function names.
std::optional<std::int64_t> eval_int(const Expr &, const Env &);

/// Whether `name` is a function eval_int evaluates on integers: cdiv, min,
/// max, minimum, maximum, abs and where (lax.select: `where(c, a, b)` is a
/// when c != 0, else b).
bool is_int_function(const std::string &name);

/// A truth value: a comparison, `and`/`or`/`not` of anything, or jnp's `&`,
/// `|`, `~` of truth values (a rank-0 mask in `.pk`, as `where((i == 0) & (k
/// == 0), ...)` writes one; `&` and `|` also of the literals 0 and 1, on
/// which they are `and` and `or` whatever the type). Those evaluate as
/// `and`, `or`, `not` do, to 0/1,
/// except that `&` and `|` take both sides, as jnp does; on other integers
/// `&`, `|`, `~` have no value (bitwise on an index is a mask's business).
bool is_truth_value(const Expr &);

/// Why an integer expression has no value.
enum class EvalFault {
  none,
  unbound,     ///< it names something the environment does not bind
  not_integer, ///< not an integer expression (a float, a ref, a tensor function, `2 ** -1`)
  div_by_zero, ///< `//`, `%` or `cdiv` by zero
  overflow,    ///< an intermediate result does not fit int64
};

/// The outcome of evaluate(): a value, or the fault and the node it arose at.
struct Evaluation {
  std::optional<std::int64_t> value;
  EvalFault fault = EvalFault::none; ///< none exactly when value is set
  const Expr *at = nullptr;          ///< the faulting node (an operator for the errors)
  /// A division by zero or an overflow: the expression is wrong, not merely unknown.
  bool is_error() const { return fault == EvalFault::div_by_zero || fault == EvalFault::overflow; }
};

/// eval_int, saying why there is no value. An error is reported whenever it
/// is decided, whatever else is unbound: `i // 0` divides by zero with `i`
/// unbound, and an error in either operand wins over the other's unbound
/// name. Only the right side of an `and`/`or` that its left side decides (or
/// leaves unknown) is not evaluated, as in Python. A `where` whose condition
/// is unknown is an error only where both sides are: one side's fault waits
/// for the condition that selects it.
Evaluation evaluate(const Expr &, const Env &);

/// Integer expressions compiled once for evaluation many times over (the
/// Program stepper evaluates the same index expressions at every step). A
/// name becomes a variable number, chosen by the caller's `intern`, read
/// through a pointer the caller keeps (null: unbound). value() has a value
/// exactly when spec::evaluate would under the same bindings, and the same
/// one: the same operators, the same overflow checks and the same Python
/// division; when it has none, spec::evaluate says why.
class CompiledInts {
public:
  /// Compiles `e`; returns its handle for value(). `intern` gives a name's
  /// variable number (>= 0).
  template <class Intern> int compile(const Expr &e, Intern &&intern);
  /// The value of the compiled expression `root` with variable k read
  /// through vars[k].
  std::optional<std::int64_t> value(int root, const std::int64_t *const *vars) const;

private:
  /// select: a where that evaluates only the branch its condition picks,
  /// where that equals evaluating both (a prefetch table's tree: compile_node).
  enum class Kind : std::uint8_t { constant, variable, unary, binary, call, select, no_value };
  struct Node {
    Kind kind = Kind::no_value;
    Op op = Op::Int;
    std::uint8_t fn = 0;      ///< call: which integer function (eval.cpp)
    std::int64_t value = 0;   ///< constant: the value; variable: its number
    int first = 0, count = 0; ///< operands: kids_[first, first + count)
  };
  int add(Node n, const std::vector<int> &kids);
  int compile_node(const Expr &, const std::function<int(const std::string &)> &intern);
  bool eval(int node, const std::int64_t *const *vars, std::int64_t &out) const;
  std::vector<Node> nodes_;
  std::vector<int> kids_;
};

template <class Intern> int CompiledInts::compile(const Expr &e, Intern &&intern) {
  return compile_node(e, std::function<int(const std::string &)>(std::forward<Intern>(intern)));
}

/// "division by zero in WHERE" or "integer overflow in WHERE", located at the
/// faulting operator, when evaluating the expression under `env` hits one.
std::optional<Diagnostic> arithmetic_error(const Expr &, const Env &env, const std::string &where);

/// Python floor division and modulo (b != 0; floor_div(INT64_MIN, -1) does
/// not fit and must not be asked for).
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

/// The candidate closest to `name` (edit distance, case-insensitive) when it
/// is a plausible typo of it (a case slip, or at most a third of the name
/// wrong); "" when none is. Used for every "did you mean".
std::string nearest_name(const std::string &name, const std::vector<std::string> &candidates);

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
