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

TEST(Targets, TpuTilingCountsASqueezedDimAsABlockOfOneAsPallasChecksIt) {
  const Target &t = *find_target("tpu_v5e");
  // (None, 128) rows of a (4, 256) array: the second-minor block is 1 of 4.
  auto v = tiling_violations(t, {4, 256}, {1, 128}, {true, false}, spec::DType::f32);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].dim, 0u);
  EXPECT_NE(v[0].message.find("squeezed"), std::string::npos) << v[0].message;
  // A squeezed leading dim of a rank-3 array is not one of the last two.
  EXPECT_TRUE(tiling_violations(t, {4, 8, 128}, {1, 8, 128}, {true, false, false}, spec::DType::f32).empty());
  // An array whose second-minor extent is 1.
  EXPECT_TRUE(tiling_violations(t, {1, 256}, {1, 128}, {true, false}, spec::DType::f32).empty());
}

TEST(Targets, TpuTilingOfA1DBlockIsTheWholeArrayAMultipleOf1024OrAPowerOfTwoOfALaneTile) {
  const Target &t = *find_target("tpu_v5e");
  auto ok = [&](std::int64_t n, std::int64_t b, spec::DType dt) {
    return tiling_violations(t, {n}, {b}, {false}, dt).empty();
  };
  EXPECT_TRUE(ok(4096, 1024, spec::DType::f32));
  EXPECT_TRUE(ok(4096, 3072, spec::DType::f32)); // a multiple of 1024
  EXPECT_TRUE(ok(4096, 128, spec::DType::f32));  // a power of 2 of at least 128
  EXPECT_TRUE(ok(1000, 1000, spec::DType::f32)); // the whole array
  EXPECT_FALSE(ok(4096, 384, spec::DType::f32)); // a multiple of 128 only
  EXPECT_FALSE(ok(4096, 64, spec::DType::f32));
  EXPECT_FALSE(ok(4096, 256, spec::DType::i8)); // int8: at least 128 * 4
  EXPECT_TRUE(ok(4096, 512, spec::DType::i8));
  EXPECT_FALSE(ok(4096, 128, spec::DType::bf16));   // bf16: at least 256
  EXPECT_TRUE(ok(4096, 128, spec::DType::boolean)); // a bool is 32 bits there
}

TEST(Targets, GpuTilingEnforcesTmaLimits) {
  const Target &g = *find_target("h100");
  EXPECT_TRUE(tiling_violations(g, {1024, 1024}, {128, 64}, {false, false}, spec::DType::bf16).empty());
  EXPECT_FALSE(tiling_violations(g, {1024, 1024}, {128, 4}, {false, false}, spec::DType::bf16).empty());
  EXPECT_FALSE(tiling_violations(g, {1024, 1024}, {512, 64}, {false, false}, spec::DType::bf16).empty());
}

} // namespace
} // namespace pipecheck::verifier::rules
