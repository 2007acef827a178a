// The brute-force enumerator and the symbolic checker agree on the contract files.
#include "testing.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"

#include <gtest/gtest.h>

namespace pipecheck {
namespace {

void expect_agreement(const std::string &path) {
  std::string text = testing::read_file(path);
  ASSERT_FALSE(text.empty()) << path;
  spec::File f = testing::parse_text(text, path);
  int compared = 0;
  for (const auto &u : f.units) {
    const auto *k = std::get_if<spec::KernelSpec>(&u);
    if (!k)
      continue;
    auto m = verifier::rules::build_model(*k, {}, std::nullopt);
    ASSERT_TRUE(m.model) << k->name;
    if (m.model->num_points() > 4096)
      continue;
    auto s = verifier::rules::check_symbolic(*m.model, 10000);
    auto e = verifier::rules::check_enumerated(*m.model);
    EXPECT_TRUE(s.unknown.empty() && e.unknown.empty()) << k->name;
    ASSERT_EQ(s.findings.size(), e.findings.size()) << k->name;
    for (std::size_t i = 0; i < s.findings.size(); ++i) {
      EXPECT_EQ(s.findings[i].rule, e.findings[i].rule) << k->name;
      EXPECT_EQ(s.findings[i].loc.line, e.findings[i].loc.line) << k->name;
      EXPECT_EQ(s.findings[i].witness, e.findings[i].witness) << k->name << " " << s.findings[i].rule;
    }
    ++compared;
  }
  EXPECT_GT(compared, 3);
}

TEST(Enumerate, AgreesWithTheSymbolicCheckerOnGuideElementwise) {
  expect_agreement("/work/shared/examples/guide_elementwise.pk");
}

TEST(Enumerate, AgreesWithTheSymbolicCheckerOnGuideReductions) {
  expect_agreement("/work/shared/examples/guide_reductions.pk");
}

TEST(Enumerate, GivesUpOnAGridLargerThanItsBound) {
  auto f = testing::parse_text(R"(kernel big:
    grid = (1024, 1024)
    in  x: f32[1024, 1024]  block=(1, 1024)  index=(i, j) -> (i, 0)
    out o: f32[1024, 1024]  block=(1, 1024)  index=(i, j) -> (i, 0)
    body:
        o[...] = x[...]
)");
  auto m = verifier::rules::build_model(testing::kernel(f, "big"), {}, std::nullopt);
  ASSERT_TRUE(m.model);
  auto e = verifier::rules::check_enumerated(*m.model, 1000);
  EXPECT_FALSE(e.unknown.empty());
}

}  // namespace
}  // namespace pipecheck
