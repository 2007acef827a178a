#include "verifier/rules/targets.hpp"

#include <gtest/gtest.h>

namespace pipecheck::verifier::rules {
namespace {

TEST(Targets, KnowsEveryTargetOfTheIssueWithPositiveBudgets) {
  for (const char *n : {"tpu_v4", "tpu_v5e", "tpu_v5p", "tpu_v6e", "h100", "h200"}) {
    const Target *t = find_target(n);
    ASSERT_NE(t, nullptr) << n;
    EXPECT_GT(t->default_sram_bytes, 0);
    EXPECT_GE(t->physical_sram_bytes, t->default_sram_bytes);
  }
  EXPECT_EQ(find_target("tpu_v99"), nullptr);
}

TEST(Targets, VmemLimitRaisesTheScopedBudgetOnlyUpToPhysicalVmem) {
  const Target &t = *find_target("tpu_v5e");
  EXPECT_EQ(sram_budget(t, std::nullopt), t.default_sram_bytes);
  EXPECT_EQ(sram_budget(t, 64LL << 20), 64LL << 20);
  EXPECT_EQ(sram_budget(t, 1LL << 40), t.physical_sram_bytes);
  const Target &g = *find_target("h200");
  EXPECT_EQ(sram_budget(g, 1LL << 40), g.default_sram_bytes);
}

TEST(Targets, TpuTilingWantsEightBy128UnlessTheBlockIsTheWholeDim) {
  const Target &t = *find_target("tpu_v6e");
  EXPECT_TRUE(tiling_violations(t, {1024, 1024}, {8, 128}, {false, false}, spec::DType::f32).empty());
  EXPECT_TRUE(tiling_violations(t, {1000, 1000}, {1000, 1000}, {false, false}, spec::DType::f32).empty());
  auto v = tiling_violations(t, {1024, 1024}, {100, 64}, {false, false}, spec::DType::f32);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].dim, 1u);
  EXPECT_EQ(v[0].required, 128);
}

TEST(Targets, GpuTilingEnforcesTmaLimits) {
  const Target &g = *find_target("h100");
  EXPECT_TRUE(tiling_violations(g, {1024, 1024}, {128, 64}, {false, false}, spec::DType::bf16).empty());
  EXPECT_FALSE(tiling_violations(g, {1024, 1024}, {128, 4}, {false, false}, spec::DType::bf16).empty());
  EXPECT_FALSE(tiling_violations(g, {1024, 1024}, {512, 64}, {false, false}, spec::DType::bf16).empty());
}

} // namespace
} // namespace pipecheck::verifier::rules
