#pragma once
/// The spec-level rules as satisfiability queries over all grid points at
/// once (Z3, through verifier/smt), each model a witness. The grid is never
/// enumerated: grid indices are bounded integer variables.

#include "verifier/rules/model.hpp"
#include "verifier/verdict.hpp"

#include <string>
#include <vector>

namespace pipecheck::verifier::rules {

/// What a rule pass found: findings (already finalized), and the reasons of
/// every query that could not be decided (timeout, unsupported construct).
struct RuleOutcome {
  std::vector<Finding> findings;
  std::vector<std::string> unknown;
  /// Bad input: an index map or guard that overflows (or divides by zero) at
  /// a grid point the rules evaluate, located at the operator. Non-empty:
  /// the findings are dropped (their witnesses could not be evaluated).
  std::vector<spec::Diagnostic> errors;
};

/// Runs every spec-level rule symbolically, `timeout_ms` per query.
RuleOutcome check_symbolic(const KernelModel &, unsigned timeout_ms);

} // namespace pipecheck::verifier::rules
