#pragma once
/// The one rule table: every rule the verifier decides, with its stable id,
/// where it applies, a one-line summary and its section in docs/rules.md.
/// Checkers create findings with a Rule; `explain`, reports and the corpus
/// tests read ids and summaries from here. No other code spells a rule id.

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace pipecheck::verifier {

enum class Rule : std::uint8_t {
  // Spec rules (kernels).
  reduction_not_last_axis,
  output_revisit,
  uninitialized_accumulator,
  accumulator_reset,
  accumulator_carried,
  accumulation_lost,
  input_write_lost,
  output_write_lost,
  index_out_of_bounds, ///< also a program rule
  partial_block_reduction,
  parallel_write_conflict,
  output_not_covered,
  alias_hazard,
  sram_capacity,
  block_tiling,
  any_space_access,
  // Program rules (pipelines and lowered kernels).
  slot_race,
  async_operand_overwritten,
  wait_without_copy,
  copy_never_waited,
  stale_read,
  uninitialized_read,
};

/// What a rule is checked on.
enum class RuleScope : std::uint8_t {
  spec,    ///< kernel specs, over every grid point
  program, ///< programs (pipelines, and the programs kernels lower to)
  both,
};

struct RuleInfo {
  Rule rule;
  std::string_view id; ///< stable, e.g. "slot-race"
  RuleScope scope;
  std::string_view summary; ///< one line, plain words
  std::string_view anchor;  ///< the section of docs/rules.md: "docs/rules.md#slot-race"
};

/// Every rule, in catalog order (the order of docs/rules.md).
std::span<const RuleInfo> rule_table();
/// The table entry of a rule.
const RuleInfo &info(Rule);
/// The stable id of a rule.
std::string_view id(Rule);
/// The rule with this id, or nullopt.
std::optional<Rule> find_rule(std::string_view id);
/// True when the rule is checked on kernel specs (spec or both).
bool checks_kernels(Rule);
/// True when the rule is checked on programs (program or both).
bool checks_programs(Rule);

/// The rule's id as a string.
std::string to_string(Rule);
/// Prints the rule's id.
std::ostream &operator<<(std::ostream &, Rule);

} // namespace pipecheck::verifier
