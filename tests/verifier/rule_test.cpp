#include "verifier/rule.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace pipecheck::verifier {
namespace {

// The `### id` headings of docs/rules.md.
std::set<std::string> documented_sections() {
  std::ifstream in(std::filesystem::path(PIPECHECK_SOURCE_DIR) / "docs" / "rules.md");
  EXPECT_TRUE(in.good()) << "docs/rules.md not found";
  std::set<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("### ", 0) == 0) out.insert(line.substr(4));
  return out;
}

TEST(RuleTable, EveryRuleHasASectionInTheDocsAndEverySectionIsARule) {
  std::set<std::string> sections = documented_sections();
  std::set<std::string> ids;
  for (const auto &r : rule_table()) {
    ids.insert(std::string(r.id));
    EXPECT_TRUE(sections.count(std::string(r.id))) << "docs/rules.md has no section '### " << r.id << "'";
    EXPECT_EQ(r.anchor, "docs/rules.md#" + std::string(r.id)) << r.id;
  }
  for (const auto &s : sections)
    EXPECT_TRUE(ids.count(s)) << "docs/rules.md documents '" << s << "', which the rule table lacks";
}

TEST(RuleTable, IdsAreUniqueAndFindRuleInvertsThem) {
  std::set<std::string_view> seen;
  for (const auto &r : rule_table()) {
    EXPECT_TRUE(seen.insert(r.id).second) << "duplicate id " << r.id;
    EXPECT_EQ(find_rule(r.id), r.rule);
    EXPECT_EQ(id(r.rule), r.id);
    EXPECT_EQ(&info(r.rule), &r);
    EXPECT_FALSE(r.summary.empty()) << r.id;
    EXPECT_EQ(r.summary.find('\n'), std::string_view::npos) << r.id << ": a summary is one line";
  }
  EXPECT_FALSE(find_rule("no-such-rule").has_value());
  EXPECT_FALSE(find_rule("verified").has_value());
}

TEST(RuleTable, PrintsARuleAsItsId) {
  std::ostringstream os;
  os << Rule::async_operand_overwritten;
  EXPECT_EQ(os.str(), "async-operand-overwritten");
}

TEST(RuleTable, IndexOutOfBoundsIsCheckedOnKernelsAndPrograms) {
  EXPECT_TRUE(checks_kernels(Rule::index_out_of_bounds));
  EXPECT_TRUE(checks_programs(Rule::index_out_of_bounds));
  EXPECT_TRUE(checks_kernels(Rule::sram_capacity));
  EXPECT_FALSE(checks_programs(Rule::sram_capacity));
  EXPECT_FALSE(checks_kernels(Rule::slot_race));
}

} // namespace
} // namespace pipecheck::verifier
