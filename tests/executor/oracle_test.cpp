#include "executor/oracle.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::load_corpus;
using executor::testing::parse_text;
using executor::testing::unit;

namespace {
const spec::File &reductions() {
  static const spec::File f = load_corpus("corpus/examples/guide_reductions.pk");
  return f;
}
} // namespace

TEST(Oracle, CorrectSumIsTheSumOverTheFirstAxis) {
  const auto &k = unit<spec::KernelSpec>(reductions(), "correct_sum");
  const ConcreteKernel c = concretize(k, {}, 8);
  EXPECT_EQ(c.grid, (Shape{4, 4, 8}));
  EXPECT_EQ(c.operand("x")->shape, (Shape{8, 128, 128}));
  EXPECT_EQ(c.operand("x")->block_view_shape(), (Shape{32, 32}));
  ArrayMap arrays = make_kernel_arrays(c, 5);
  run_oracle(c, arrays);
  const HostArray &x = *arrays.at("x"), &o = *arrays.at("o");
  for (std::int64_t e = 0; e < o.size(); e += 131) {
    float s = 0;
    for (int p = 0; p < 8; ++p)
      s += static_cast<float>(x.get(p * o.size() + e));
    EXPECT_FLOAT_EQ(static_cast<float>(o.get(e)), s) << e;
  }
}

TEST(Oracle, AMissingInitLeavesPoisonInTheIntent) {
  const auto &k = unit<spec::KernelSpec>(reductions(), "incorrect_sum");
  const ConcreteKernel c = concretize(k, {}, 16);
  ArrayMap arrays = make_kernel_arrays(c, 1);
  run_oracle(c, arrays);
  EXPECT_TRUE(arrays.at("o")->is_poison(0));
}

TEST(Oracle, MatmulWithScratchAccumulatorMatchesANaiveProduct) {
  const auto &k = unit<spec::KernelSpec>(reductions(), "matmul");
  spec::Env o{{"m", 64}, {"n", 64}, {"k", 128}, {"bm", 32}, {"bn", 32}, {"bk", 32}};
  const ConcreteKernel c = concretize(k, o, 1);
  EXPECT_EQ(c.grid, (Shape{2, 2, 4}));
  ArrayMap arrays = make_kernel_arrays(c, 2);
  run_oracle(c, arrays);
  const HostArray &a = *arrays.at("a"), &b = *arrays.at("b"), &out = *arrays.at("o");
  for (int i = 0; i < 64; i += 7)
    for (int j = 0; j < 64; j += 5) {
      double s = 0;
      for (int p = 0; p < 128; ++p)
        s += a.get(i * 128 + p) * b.get(p * 64 + j);
      EXPECT_NEAR(out.get(i * 64 + j), s, 1e-4);
    }
}

TEST(Oracle, ACopyIntoAnAliasedAnySpaceInputLandsInItsOutputAndLeavesTheInputData) {
  const spec::File f = parse_text(executor::testing::sgd_through_aliased_input());
  const ConcreteKernel c = concretize(std::get<spec::KernelSpec>(f.units.at(0)), {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 3);
  const auto before = arrays.at("p")->clone();
  run_oracle(c, arrays);
  const HostArray &g = *arrays.at("g"), &p = *arrays.at("p"), &o = *arrays.at("o");
  for (std::int64_t e = 0; e < o.size(); e += 97) {
    EXPECT_FLOAT_EQ(static_cast<float>(p.get(e)), static_cast<float>(before->get(e))) << e;
    EXPECT_FLOAT_EQ(static_cast<float>(o.get(e)), static_cast<float>(before->get(e) - 0.5 * g.get(e))) << e;
  }
}

TEST(Oracle, RunsEveryBodyOpOnBf16AndI32Blocks) {
  const auto f = parse_text(R"(kernel ops:
    grid = (2,)
    in  x: bf16[2, 8, 8]  block=(None, 8, 8)  index=(i) -> (i, 0, 0)
    in  n: i32[16, 8]     block=(8, 8)        index=(i) -> (i, 0)
    out o: f32[16, 8]     block=(8, 8)        index=(i) -> (i, 0)
    out m: i32[16, 8]     block=(8, 8)        index=(i) -> (i, 0)
    body:
        s = exp(cast(x[...], f32) * 0.5)
        t = transpose(dot(x[...], x[...]))
        r = sum(s, axis=1)
        o[...] = maximum(s, t) + r - max(s, axis=0) + full(2.0)
        when program_id(0) == 1:
            o[0:1, :] = zeros
        m[...] = n[...] * 3 + program_id(0)
)");
  const auto &k = std::get<spec::KernelSpec>(f.units.at(0));
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 4);
  run_oracle(c, arrays);
  const HostArray &x = *arrays.at("x"), &n = *arrays.at("n"), &o = *arrays.at("o"), &m = *arrays.at("m");
  // Check element (row 3, col 2) of the first block by hand.
  auto xs = [&](int r, int cc) { return static_cast<float>(x.get(r * 8 + cc)); };
  auto s = [&](int r, int cc) { return std::exp(xs(r, cc) * 0.5f); };
  float t = 0; // t[3,2] = dot(x,x)[2,3]
  for (int p = 0; p < 8; ++p)
    t += xs(2, p) * xs(p, 3);
  float r0 = 0; // r broadcasts along the last axis: column 2 gets r[2]
  for (int cc = 0; cc < 8; ++cc)
    r0 += s(2, cc);
  float m1 = -INFINITY;
  for (int rr = 0; rr < 8; ++rr)
    m1 = std::max(m1, s(rr, 2));
  EXPECT_NEAR(o.get(3 * 8 + 2), std::max(s(3, 2), t) + r0 - m1 + 2.0f, 1e-4);
  EXPECT_EQ(o.get(8 * 8 + 5), 0.0); // row 0 of block 1 zeroed
  EXPECT_NE(o.get(9 * 8 + 5), 0.0);
  EXPECT_EQ(m.get(9 * 8 + 1), n.get(9 * 8 + 1) * 3 + 1);
}

TEST(Concretize, RejectsAScaleThatSplitsABlock) {
  const auto &k = unit<spec::KernelSpec>(reductions(), "matmul");
  spec::Env o{{"bm", 64}};
  EXPECT_THROW(concretize(k, o, 128), ExecError);
  EXPECT_NO_THROW(concretize(k, o, 64));
}

TEST(Concretize, RequiresASymbolicParamToBeBoundAndHonoursAnOverride) {
  const auto f = parse_text(R"(kernel k:
    param N >= 1
    grid = (N,)
    in  x: f32[N, 128]  block=(1, 128)  index=(i) -> (i, 0)
    out o: f32[N, 128]  block=(1, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  const auto &k = std::get<spec::KernelSpec>(f.units.at(0));
  EXPECT_THROW(concretize(k, {}, 1), ExecError);
  EXPECT_EQ(concretize(k, {{"N", 3}}, 1).grid, (Shape{3}));
  EXPECT_THROW(concretize(k, {{"N", 0}}, 1), ExecError); // outside N >= 1
}

namespace {
const spec::File &gpu_pallas_call() {
  static const spec::File f = load_corpus("corpus/guide/gpu_pallas_call.pk");
  return f;
}
} // namespace

TEST(Oracle, AnAccScratchRestartsAtZeroInEveryCtaSoEachBlockIsItsOwnProduct) {
  const auto &k = unit<spec::KernelSpec>(gpu_pallas_call(), "gpu_matmul");
  const ConcreteKernel c = concretize(k, {}, 1);
  EXPECT_TRUE(c.gpu);
  ArrayMap arrays = make_kernel_arrays(c, 3);
  run_oracle(c, arrays);
  const HostArray &a = *arrays.at("a"), &b = *arrays.at("b"), &out = *arrays.at("o");
  // o is 256 x 256 over K = 320; without the reset every CTA after the first
  // would add the earlier CTAs' sums.
  for (int i = 0; i < 256; i += 37)
    for (int j = 0; j < 256; j += 41) {
      double s = 0;
      for (int p = 0; p < 320; ++p)
        s += a.get(i * 320 + p) * b.get(p * 256 + j);
      EXPECT_NEAR(out.get(i * 256 + j), s, 1e-3) << i << ", " << j;
    }
}

TEST(Oracle, RunsAGpuGridCtaByCtaWithTheParallelAxisOutermost) {
  auto f = parse_text(R"(kernel colsum:
    grid = (4, 2)
    dimension_semantics = (sequential, parallel)
    target = h100
    in  x: f32[256, 256]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[64, 256]   block=(64, 128)  index=(i, j) -> (0, j)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += x[...]
        when program_id(0) == 3:
            o[...] = acc[...]
)");
  const ConcreteKernel c = concretize(unit<spec::KernelSpec>(f, "colsum"), {}, 1);
  EXPECT_EQ(grid_point(c, 1), (Shape{1, 0}));
  EXPECT_EQ(grid_point(c, 4), (Shape{0, 1}));
  EXPECT_TRUE(starts_cta(c, 4));
  EXPECT_FALSE(starts_cta(c, 5));
  ArrayMap arrays = make_kernel_arrays(c, 4);
  run_oracle(c, arrays);
  const HostArray &x = *arrays.at("x"), &o = *arrays.at("o");
  for (int r = 0; r < 64; r += 13)
    for (int col = 0; col < 256; col += 29) {
      double s = 0;
      for (int i = 0; i < 4; ++i)
        s += x.get((i * 64 + r) * 256 + col);
      EXPECT_NEAR(o.get(r * 256 + col), s, 1e-4);
    }
}

TEST(Oracle, AGpuScratchIsUndefinedAgainInEveryNewCta) {
  const auto &k = unit<spec::KernelSpec>(gpu_pallas_call(), "gpu_scratch_init_only_in_the_first_cta");
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 6);
  run_oracle(c, arrays);
  const HostArray &o = *arrays.at("o");
  EXPECT_FALSE(o.is_poison(0));       // CTA 0 initialized it
  EXPECT_TRUE(o.is_poison(64 * 128)); // CTA 1 starts with its own, undefined
}
