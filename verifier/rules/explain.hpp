#pragma once
/// `pipecheck explain RULE`: what each rule means, a wrong and a right example.

#include "verifier/rule.hpp"

#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier::rules {

struct RuleDoc {
  Rule rule;
  std::string meaning; ///< one paragraph, plain words
  std::string wrong;   ///< a `.pk` snippet the rule flags
  std::string right;   ///< its corrected near-twin
};

/// One entry per rule of verifier::rule_table(), in catalog order.
const std::vector<RuleDoc> &rule_docs();
/// The entry of a rule.
const RuleDoc &rule_doc(Rule);

/// The text `pipecheck explain RULE` prints (its id and summary, meaning,
/// examples, and its section of docs/rules.md), or nullopt for an unknown id.
std::optional<std::string> explain(const std::string &rule);

} // namespace pipecheck::verifier::rules
