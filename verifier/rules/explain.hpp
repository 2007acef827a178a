#pragma once
/// `pipecheck explain RULE`: what each rule means, a wrong and a right example.

#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier::rules {

struct RuleDoc {
  std::string id;
  std::string meaning; ///< one paragraph, plain words
  std::string wrong;   ///< a `.pk` snippet the rule flags
  std::string right;   ///< its corrected near-twin
};

/// One entry per rule of verifier::all_rules(), in catalog order.
const std::vector<RuleDoc> &rule_docs();

/// The text `pipecheck explain RULE` prints, or nullopt for an unknown rule id.
std::optional<std::string> explain(const std::string &rule);

} // namespace pipecheck::verifier::rules
