// Integer arithmetic in the spec-level rules: footprints saturate instead of
// wrapping, and an index map that overflows or divides by zero at a grid
// point is located bad input, never a finding with a `?` for its block.
#include "testing.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/model.hpp"
#include "verifier/rules/symbolic.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace pipecheck {
namespace {

std::string kernel_text(const std::string &index, const std::string &grid = "8") {
  return "kernel k:\n    grid = (" + grid +
         ",)\n"
         "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (" +
         index +
         ", 0)\n"
         "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
         "    body:\n        o[...] = x[...] + 1\n";
}

bool mentions_question_mark(const verifier::Verdict &v) {
  for (const auto &f : v.findings)
    if (f.message.find('?') != std::string::npos) return true;
  return false;
}

} // namespace

TEST(SramCapacity, FiresWhenTheFootprintOverflowsInsteadOfWrapping) {
  // Each window is 2**62 bytes: their sum does not fit int64.
  auto v = testing::check_text("kernel k:\n    target = tpu_v5e\n    in  x: f32[2**30, 2**30]\n"
                               "    out o: f32[2**30, 2**30]\n    body:\n        o[...] = x[...] + 1\n",
                               "k");
  EXPECT_EQ(v.status, verifier::Status::violation) << v.reason;
  EXPECT_TRUE(testing::marks(v).count({verifier::Rule::sram_capacity, 1}));
  ASSERT_TRUE(v.sram_bytes);
  EXPECT_EQ(*v.sram_bytes, std::numeric_limits<std::int64_t>::max());
}

TEST(SramCapacity, BufferCountTimesAHugeBlockSaturates) {
  auto v = testing::check_text("kernel k:\n    target = tpu_v5e\n    grid = (2,)\n"
                               "    in  x: f32[2**31, 2**29] block=(2**30, 2**29) index=(i) -> (i, 0) "
                               "buffered=4\n    out o: f32[8]\n    body:\n        o[...] = zeros\n",
                               "k");
  EXPECT_TRUE(testing::marks(v).count({verifier::Rule::sram_capacity, 1})) << v.reason;
}

TEST(IndexMapArithmetic, OverflowAtAGridPointIsALocatedErrorNotABlockQuestionMark) {
  auto v = testing::check_text(kernel_text("i + 2**62 + 2**62"), "k");
  EXPECT_FALSE(mentions_question_mark(v));
  ASSERT_EQ(v.errors.size(), 1u) << v.reason;
  EXPECT_EQ(v.errors[0].loc.line, 3);
  EXPECT_EQ(v.errors[0].loc.col, 64); // the second `+`
  EXPECT_EQ(v.errors[0].message, "integer overflow in the index map of 'x' at grid point (0,)");
  EXPECT_TRUE(v.findings.empty());
}

TEST(IndexMapArithmetic, OverflowOnlyAtLateGridPointsNamesTheFirstOne) {
  // i * 2**60 fits for i < 8 and overflows from i = 8 on; the grid is symbolic-sized.
  auto v = testing::check_text(kernel_text("i * 2**60", "1000000"), "k");
  EXPECT_FALSE(mentions_question_mark(v));
  ASSERT_EQ(v.errors.size(), 1u) << v.reason;
  EXPECT_EQ(v.errors[0].message, "integer overflow in the index map of 'x' at grid point (8,)");
}

TEST(IndexMapArithmetic, TheEnumeratorReportsTheSameError) {
  spec::File f = testing::parse_text(kernel_text("i + 2**62 + 2**62"));
  // The model points into the kernel: keep it alive.
  const spec::KernelSpec kernel = testing::kernel(f, "k");
  auto m = verifier::rules::build_model(kernel, {}, std::nullopt);
  ASSERT_TRUE(m.model);
  auto e = verifier::rules::check_enumerated(*m.model);
  ASSERT_EQ(e.errors.size(), 1u);
  EXPECT_EQ(e.errors[0].message, "integer overflow in the index map of 'x' at grid point (0,)");
  EXPECT_TRUE(e.unknown.empty());
}

TEST(IndexMapArithmetic, ADivisorThatSetBindsToZeroIsAnError) {
  const std::string text = "kernel k:\n    param N = 4\n    grid = (8,)\n"
                           "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i // N, 0)\n"
                           "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                           "    body:\n        o[...] = x[...] + 1\n";
  verifier::CheckOptions o;
  o.overrides["N"] = 0;
  auto v = testing::check_text(text, "k", o);
  ASSERT_EQ(v.errors.size(), 1u) << v.reason;
  EXPECT_EQ(v.errors[0].loc.line, 4);
  EXPECT_NE(v.errors[0].message.find("division by zero"), std::string::npos) << v.errors[0].message;
  // A symbolic divisor stays unknown-free: the checker binds nothing itself.
  auto ok = testing::check_text(text, "k");
  EXPECT_TRUE(ok.errors.empty());
}

TEST(IndexMapArithmetic, AGridExtentSetToOverflowIsAnError) {
  const std::string text = "kernel k:\n    param G = 8\n    grid = (G * 2,)\n"
                           "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                           "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                           "    body:\n        o[...] = x[...] + 1\n";
  verifier::CheckOptions o;
  o.overrides["G"] = std::int64_t{1} << 62;
  auto v = testing::check_text(text, "k", o);
  ASSERT_EQ(v.errors.size(), 1u) << v.reason;
  EXPECT_EQ(v.errors[0].message, "integer overflow in the grid");
  EXPECT_EQ(v.errors[0].loc.line, 3);
}

} // namespace pipecheck
