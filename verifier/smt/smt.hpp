#pragma once
/// The Z3 wrapper: the only place in pipecheck that includes z3++.h.
///
/// A Context owns every term built in it; a Term is a cheap handle into its
/// context. Integer terms follow Python semantics for `//` and `%` by
/// constants (floor toward negative infinity). A Solver carries a timeout and
/// named assertions; check() answers sat, unsat or unknown with the reason.

#include "spec/ir.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier::smt {

class Context;
struct TermAccess;

/// A Z3 term (integer or Boolean) owned by a Context.
class Term {
public:
  Term() = default;
  Context *context() const { return ctx_; }
  bool valid() const { return ctx_ != nullptr; }
  /// The value when the term is an integer numeral (after simplification).
  std::optional<std::int64_t> numeral() const;
  /// True when the term is the Boolean literal `true` / `false`.
  bool is_true() const;
  bool is_false() const;
  std::string to_string() const;
  /// The term's structure as compact text — operators, names, numerals,
  /// quantifiers, bound variables, shared subterms as back references —
  /// equal exactly for equal terms, in any Context. Far cheaper than
  /// to_string(); for keys (rules::QueryCache), not for people.
  std::string key() const;
  /// Each term's key, the free constants (variables) named by their first
  /// occurrence across all of them: equal exactly for lists of terms equal
  /// up to a consistent renaming of their variables (one query asked with
  /// fresh names, as an earlier one: the same answer).
  static std::vector<std::string> keys(const std::vector<Term> &terms);

private:
  friend struct TermAccess;
  Term(Context *c, int id) : ctx_(c), id_(id) {}
  Context *ctx_ = nullptr;
  int id_ = -1;
};

Term operator+(const Term &, const Term &);
Term operator-(const Term &, const Term &);
Term operator*(const Term &, const Term &);
Term operator-(const Term &);
Term operator==(const Term &, const Term &);
Term operator!=(const Term &, const Term &);
Term operator<(const Term &, const Term &);
Term operator<=(const Term &, const Term &);
Term operator>(const Term &, const Term &);
Term operator>=(const Term &, const Term &);
Term operator&&(const Term &, const Term &);
Term operator||(const Term &, const Term &);
Term operator!(const Term &);
Term operator+(const Term &, std::int64_t);
Term operator-(const Term &, std::int64_t);
Term operator*(const Term &, std::int64_t);
Term operator==(const Term &, std::int64_t);
Term operator!=(const Term &, std::int64_t);
Term operator<(const Term &, std::int64_t);
Term operator<=(const Term &, std::int64_t);
Term operator>(const Term &, std::int64_t);
Term operator>=(const Term &, std::int64_t);
/// Python `a // c` for a constant c != 0.
Term floor_div(const Term &a, std::int64_t c);
/// Python `a % c` for a constant c != 0 (the result has the sign of c).
Term floor_mod(const Term &a, std::int64_t c);
Term ite(const Term &c, const Term &a, const Term &b);
/// A Boolean term as is; an integer term as `t != 0` (Python truthiness).
Term truthy(const Term &t);
/// `forall vars. body` / `exists vars. body`; vars are integer constants.
Term forall(const std::vector<Term> &vars, const Term &body);
Term exists(const std::vector<Term> &vars, const Term &body);
/// `t` with each of `from` (integer constants) replaced by the term at the
/// same position of `to`.
Term substitute(const Term &t, const std::vector<Term> &from, const std::vector<Term> &to);

/// Stops all solving in this process for good (Ctrl-C): every query running
/// in any Context stops, and every later query answers unknown
/// ("interrupted") without solving. Safe from any thread, not from a signal
/// handler.
void interrupt_all();
/// True once interrupt_all() has been called.
bool interrupted();

/// Owns a Z3 context and every term built in it. One per kernel check.
class Context {
public:
  Context();
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  /// A fresh integer constant. Names should be unique within a query.
  Term int_var(const std::string &name);
  Term num(std::int64_t v);
  Term boolean(bool b);
  Term all_of(const std::vector<Term> &); ///< true when empty
  Term any_of(const std::vector<Term> &); ///< false when empty

  struct Impl;
  Impl &impl() { return *impl_; }

private:
  std::unique_ptr<Impl> impl_;
};

/// The answer of a query: sat (a model exists), unsat, or unknown with why.
struct Result {
  enum Kind { sat, unsat, unknown } kind = unknown;
  std::string reason; ///< for unknown: why ("solver budget exhausted", "incomplete quantifiers", ...)
  friend bool operator==(const Result &a, const Result &b) { return a.kind == b.kind; }
};
const char *to_string(Result::Kind);

/// Z3 resource units (its `rlimit` count) a solver's budget grants per
/// millisecond: a little over what Z3 4.8 spends in a millisecond on one
/// core of this project's x86 CI machine (about 1,400, measured on the
/// spec-rules properties' slowest MBQI query).
inline constexpr std::uint64_t kResourceUnitsPerMs = 2000;

/// A solver with a per-query budget and named (tracked) assertions: Z3's
/// incremental SMT kernel (quantifiers by E-matching and MBQI), meant for
/// many small queries each in its own push/pop scope.
///
/// The budget, `timeout_ms`, is counted in Z3's resource units
/// (kResourceUnitsPerMs per millisecond), not by a clock: a query's answer
/// does not depend on the machine's load, so a verdict is the same in CI,
/// under a sanitizer and on a laptop. A query that exhausts it is unknown,
/// "solver budget exhausted".
class Solver {
public:
  /// How a check decides its assertions: Z3's plain incremental SMT kernel,
  /// or linear integer arithmetic's quantifiers eliminated first (Z3's `qe`
  /// tactic, then the SMT kernel): a decision procedure for the
  /// "nothing fires between p and q" facts the plain kernel's instantiation
  /// can give up on (`k % 8 == 0` resets on a grid too large to expand).
  /// Its assertions' names appear in no unsat core.
  enum class Mode { plain, eliminate_quantifiers };
  Solver(Context &, unsigned timeout_ms, Mode mode = Mode::plain);
  ~Solver();
  Solver(const Solver &) = delete;
  Solver &operator=(const Solver &) = delete;

  /// Asserts a Boolean term under a name ("uninitialized-accumulator/o/read");
  /// the name appears in unsat cores. Names are made unique automatically.
  void add(const Term &, const std::string &name);
  void push();
  void pop();
  Result check();
  /// The value of an integer term in the model of the last sat check.
  std::int64_t value(const Term &) const;
  /// The same, or nullopt when the value does not fit int64.
  std::optional<std::int64_t> try_value(const Term &) const;
  /// The names of the assertions in the unsat core of the last unsat check.
  std::vector<std::string> core() const;

  /// After a sat check: makes `vars` lexicographically smallest (each within
  /// [lower[k], current model value]) by bisection, fixing each in turn, and
  /// returns their values. Stops early (keeping a valid model) when a step
  /// is unknown. Leaves the solver with one extra scope pushed-and-popped.
  /// `complete`, when given, is set to false when a step was unknown (the
  /// values are then valid but maybe not the smallest). Each step gets the
  /// budget divided by `probe_divisor` (a caller with an exact way to the
  /// smallest values gives up here sooner).
  std::vector<std::int64_t> minimize_lex(const std::vector<Term> &vars,
                                         const std::vector<std::int64_t> &lower, bool *complete = nullptr,
                                         unsigned probe_divisor = 1);

private:
  Context &ctx_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// How the names of an integer spec::Expr translate: bound names, and the
/// grid for program_id(a) / num_programs(a).
struct Bindings {
  std::map<std::string, Term> names;
  std::vector<Term> program_ids;
  std::vector<std::int64_t> num_programs;
  /// When set, `//` and `%` introduce a fresh variable d with the side
  /// condition c*d <= x < c*d + c instead of Z3's `div`: pure linear
  /// arithmetic, which quantifier instantiation handles far better. The
  /// caller quantifies `aux_vars` with the other bound variables and takes
  /// `side` as a premise.
  struct Aux {
    std::vector<Term> aux_vars;
    std::vector<Term> side;
  } *aux = nullptr;
};

/// A translated expression, or why it could not be translated.
struct Translation {
  std::optional<Term> term;
  std::string error; ///< set when term is absent (names the construct)
};

/// Translates an integer or Boolean spec::Expr (literals, names, + - *, `//`
/// and `%` by constants with Python floor semantics, `**` of constants, cdiv,
/// min, max, abs, comparisons, and/or/not, program_id, num_programs).
Translation translate(Context &, const spec::Expr &, const Bindings &);

} // namespace pipecheck::verifier::smt
