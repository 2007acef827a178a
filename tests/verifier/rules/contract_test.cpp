// The contract examples check exactly as their `# expect:` comments say.
#include "testing.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace pipecheck {
namespace {

void expect_file_checks_as_annotated(const std::string &rel) {
  std::string path = (std::filesystem::path(PIPECHECK_SOURCE_DIR) / "corpus" / "examples" / rel).string();
  std::string text = testing::read_file(path);
  ASSERT_FALSE(text.empty()) << path;
  spec::File f = testing::parse_text(text, path);
  std::vector<int> starts;
  for (const auto &u : f.units)
    starts.push_back(spec::unit_loc(u).line);
  int kernels = 0;
  for (std::size_t i = 0; i < f.units.size(); ++i) {
    const auto *k = std::get_if<spec::KernelSpec>(&f.units[i]);
    if (!k) continue;
    ++kernels;
    int lo = starts[i], hi = i + 1 < starts.size() ? starts[i + 1] : 1 << 30;
    testing::Marks want;
    bool verified = false;
    for (const auto &e : f.expectations) {
      if (e.line < lo || e.line >= hi) continue;
      if (e.rule == "verified")
        verified = true;
      else if (auto rule = verifier::find_rule(e.rule))
        want.insert({*rule, e.line});
      else
        ADD_FAILURE() << "line " << e.line << ": unknown rule '" << e.rule << "'";
    }
    verifier::Verdict v = verifier::check(f.units[i], {});
    EXPECT_EQ(testing::marks(v), want) << k->name << ": " << v.reason;
    if (verified)
      EXPECT_EQ(v.status, verifier::Status::verified) << k->name << ": " << v.reason;
    else
      EXPECT_EQ(v.status, verifier::Status::violation) << k->name << ": " << v.reason;
  }
  EXPECT_GT(kernels, 0);
}

TEST(ContractExamples, GuideElementwiseChecksExactlyAsAnnotated) {
  expect_file_checks_as_annotated("guide_elementwise.pk");
}

TEST(ContractExamples, GuideReductionsChecksExactlyAsAnnotated) {
  expect_file_checks_as_annotated("guide_reductions.pk");
}

} // namespace
} // namespace pipecheck
