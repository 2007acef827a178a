#include "spec/parse.hpp"
#include "verifier/check.hpp"
#include "verifier/rules/explain.hpp"

#include <gtest/gtest.h>

#include <set>

namespace pipecheck {
namespace {

TEST(Explain, CoversEveryRuleOfTheCatalogWithAWrongAndARightExample) {
  std::set<std::string> documented;
  for (const auto &d : verifier::rules::rule_docs()) {
    documented.insert(d.id);
    EXPECT_FALSE(d.meaning.empty()) << d.id;
    EXPECT_FALSE(d.wrong.empty()) << d.id;
    EXPECT_FALSE(d.right.empty()) << d.id;
    EXPECT_NE(d.wrong, d.right) << d.id;
  }
  for (const auto &r : verifier::all_rules()) {
    EXPECT_TRUE(documented.count(r)) << r;
    auto text = verifier::rules::explain(r);
    ASSERT_TRUE(text.has_value()) << r;
    EXPECT_NE(text->find("Wrong:"), std::string::npos);
    EXPECT_NE(text->find("Right:"), std::string::npos);
  }
  EXPECT_FALSE(verifier::rules::explain("no-such-rule").has_value());
}

TEST(Explain, KernelExamplesOfSpecRulesCheckAsTheySay) {
  // The wrong example is flagged by its rule (with its target where it names
  // one), and the right example is not flagged by it.
  for (const auto &d : verifier::rules::rule_docs()) {
    if (d.wrong.rfind("kernel", 0) != 0) continue;
    auto flags = [&](const std::string &text) {
      auto r = spec::parse_and_validate(spec::SourceFile::from_string(d.id + ".pk", text));
      EXPECT_TRUE(r.file.has_value()) << d.id << "\n" << text;
      if (!r.file) return false;
      auto v = verifier::check(r.file->units.at(0), {});
      for (const auto &f : v.findings)
        if (f.rule == d.id) return true;
      return false;
    };
    EXPECT_TRUE(flags(d.wrong)) << d.id;
    EXPECT_FALSE(flags(d.right)) << d.id;
  }
}

} // namespace
} // namespace pipecheck
