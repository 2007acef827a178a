// `run --shrink`: a run that fails against the kernel's intent shrinks its
// inputs toward one non-zero element, which names where the bug is.
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::load_corpus;
using executor::testing::unit;

namespace {

spec::KernelSpec kernel_text(const std::string &text) {
  const auto sf = spec::SourceFile::from_string("t.pk", text);
  auto r = spec::parse_and_validate(sf);
  if (!r.file) throw std::runtime_error(spec::render(sf, r.errors.at(0)));
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

std::string index_text(const Shape &s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A row sum that stores only the first k block's sum: the pipelined run
// equals the oracle; only the reference sees the columns it drops.
const char *kRowSumFirstBlock = R"(kernel row_sum_first_block:
    grid = (4, 8)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[512, 1024]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[512]        block=(128,)      index=(i, k) -> (i,)
    body:
        when program_id(1) == 0:
            o[...] = sum(x[...], axis=1)
    reference:
        o = sum(x, axis=1)
)";

} // namespace

TEST(ShrinkInputs, ARowSumDroppingColumnsShrinksToOneDroppedElementSetToOne) {
  const spec::KernelSpec k = kernel_text(kRowSumFirstBlock);
  const RunResult failing = run(k, RunOptions{});
  ASSERT_EQ(failing.status, RunStatus::fail) << failing.reason;
  const InputShrink s = shrink_inputs(k, RunOptions{}, failing);
  ASSERT_TRUE(s.shrunk) << s.message;
  ASSERT_EQ(s.elements.size(), 1u) << s.message;
  EXPECT_EQ(s.nonzero, 1);
  EXPECT_EQ(s.elements[0].first, "x");
  const Shape at = s.elements[0].second;
  EXPECT_GE(at[1], 128) << "only a column past the first block is dropped: " << s.message;
  EXPECT_EQ(s.values, (std::vector<double>{1}));
  ASSERT_TRUE(s.mismatch);
  EXPECT_EQ(s.mismatch->element, (Shape{at[0]}));
  EXPECT_EQ(s.message,
            "o[" + std::to_string(at[0]) + "] is 0 (reference: 1) when only x" + index_text(at) + " = 1");
  EXPECT_EQ(s.message, "o[0] is 0 (reference: 1) when only x[0, 128] = 1") << "the first dropped element";
  EXPECT_LE(s.runs, 2 * 19 + 4) << "about two runs per halving of 2^19 elements";
  // Deterministic: the same failure shrinks the same way.
  EXPECT_EQ(shrink_inputs(k, RunOptions{}, failing).message, s.message);
}

TEST(ShrinkInputs, TheMatmulCopyingItsAccumulatorAtTheFirstStepShrinksToOneProductPastTheFirstBlock) {
  static const spec::File f = load_corpus("corpus/examples/guide_reference.pk");
  const auto &k = unit<spec::KernelSpec>(f, "matmul_writes_at_first_step");
  RunOptions o;
  o.scale = 2;
  const RunResult failing = run(k, o);
  ASSERT_EQ(failing.status, RunStatus::fail) << failing.reason;
  const InputShrink s = shrink_inputs(k, o, failing);
  ASSERT_EQ(s.elements.size(), 2u) << s.message;
  const Shape a = s.elements[0].second, b = s.elements[1].second;
  EXPECT_EQ(s.elements[0].first, "a");
  EXPECT_EQ(s.elements[1].first, "b");
  EXPECT_EQ(a[1], b[0]) << "one product a[i, kk] * b[kk, j]: " << s.message;
  EXPECT_GE(a[1], 64) << "past the first k block (bk = 128 / 2): " << s.message;
  ASSERT_TRUE(s.mismatch);
  EXPECT_EQ(s.mismatch->element, (Shape{a[0], b[1]}));
  EXPECT_EQ(s.message, "o" + index_text({a[0], b[1]}) + " is 0 (reference: 1) when only a" + index_text(a) +
                           " = 1 and b" + index_text(b) + " = 1 are non-zero");
  EXPECT_EQ(s.message, "o[0, 0] is 0 (reference: 1) when only a[0, 64] = 1 and b[64, 0] = 1 are non-zero")
      << "the first product the output drops";
}

TEST(ShrinkInputs, APoisonFailureStaysWhenEveryInputIsZero) {
  const spec::KernelSpec k = kernel_text(R"(kernel masked:
    grid = (2,)
    in  x: f32[256, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    body:
        o[0:64, :] = x[0:64, :]
)");
  const RunResult failing = run(k, RunOptions{});
  ASSERT_EQ(failing.status, RunStatus::fail);
  const InputShrink s = shrink_inputs(k, RunOptions{}, failing);
  EXPECT_EQ(s.runs, 1);
  EXPECT_EQ(s.message, "o[64, 0] was never written even when every input is 0");
}

TEST(ShrinkInputs, StopsAtItsBudgetOfRuns) {
  const spec::KernelSpec k = kernel_text(kRowSumFirstBlock);
  const RunResult failing = run(k, RunOptions{});
  const InputShrink s = shrink_inputs(k, RunOptions{}, failing, 6);
  EXPECT_LE(s.runs, 6);
  EXPECT_TRUE(s.shrunk);
  EXPECT_NE(s.message.find("non-zero input elements ("), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("after 6 runs (the budget)"), std::string::npos) << s.message;
}
