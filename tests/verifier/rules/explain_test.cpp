#include "spec/parse.hpp"
#include "verifier/check.hpp"
#include "verifier/rules/explain.hpp"

#include <gtest/gtest.h>

#include <set>

namespace pipecheck {
namespace {

TEST(Explain, CoversEveryRuleOfTheCatalogWithAWrongAndARightExample) {
  std::set<verifier::Rule> documented;
  for (const auto &d : verifier::rules::rule_docs()) {
    EXPECT_TRUE(documented.insert(d.rule).second) << d.rule << " documented twice";
    EXPECT_FALSE(d.meaning.empty()) << d.rule;
    EXPECT_FALSE(d.wrong.empty()) << d.rule;
    EXPECT_FALSE(d.right.empty()) << d.rule;
    EXPECT_NE(d.wrong, d.right) << d.rule;
  }
  for (const auto &r : verifier::rule_table()) {
    EXPECT_TRUE(documented.count(r.rule)) << r.id;
    auto text = verifier::rules::explain(std::string(r.id));
    ASSERT_TRUE(text.has_value()) << r.id;
    EXPECT_EQ(text->rfind(std::string(r.id) + ": " + std::string(r.summary), 0), 0u) << *text;
    EXPECT_NE(text->find("Wrong:"), std::string::npos);
    EXPECT_NE(text->find("Right:"), std::string::npos);
    EXPECT_NE(text->find(std::string(r.anchor)), std::string::npos);
  }
  EXPECT_FALSE(verifier::rules::explain("no-such-rule").has_value());
}

TEST(Explain, KernelExamplesOfSpecRulesCheckAsTheySay) {
  // The wrong example is flagged by its rule (with its target where it names
  // one), and the right example is not flagged by it.
  for (const auto &d : verifier::rules::rule_docs()) {
    if (d.wrong.rfind("kernel", 0) != 0) continue;
    auto flags = [&](const std::string &text) {
      const std::string id(verifier::id(d.rule));
      auto r = spec::parse_and_validate(spec::SourceFile::from_string(id + ".pk", text));
      EXPECT_TRUE(r.file.has_value()) << id << "\n" << text;
      if (!r.file) return false;
      auto v = verifier::check(r.file->units.at(0), {});
      for (const auto &f : v.findings)
        if (f.rule == d.rule) return true;
      return false;
    };
    EXPECT_TRUE(flags(d.wrong)) << d.rule;
    EXPECT_FALSE(flags(d.right)) << d.rule;
  }
}

TEST(Explain, EveryWrongExampleTriggersExactlyItsRuleAndEveryRightExampleNothing) {
  for (const auto &d : verifier::rules::rule_docs()) {
    const std::string id(verifier::id(d.rule));
    // The rules each example triggers, or "bad input" when it does not parse.
    auto rules_of = [&](const std::string &text) {
      std::set<std::string> fired;
      auto r = spec::parse_and_validate(spec::SourceFile::from_string(id + ".pk", text));
      if (!r.file)
        return std::set<std::string>{"bad input: " + (r.errors.empty() ? "" : r.errors[0].message)};
      for (const auto &u : r.file->units) {
        auto v = verifier::check(u, {});
        for (const auto &f : v.findings)
          fired.insert(verifier::to_string(f.rule));
        if (v.status == verifier::Status::unknown) fired.insert("unknown: " + v.reason);
      }
      return fired;
    };
    EXPECT_EQ(rules_of(d.wrong), std::set<std::string>{id}) << "wrong example of " << id << ":\n" << d.wrong;
    EXPECT_EQ(rules_of(d.right), std::set<std::string>{}) << "right example of " << id << ":\n" << d.right;
  }
}

} // namespace
} // namespace pipecheck
