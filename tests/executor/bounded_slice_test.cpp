// pl.BoundedSlice in the executor: the oracle copies only the ds size of
// each window into its block buffer (the rest is poison) and, for an
// output, writes only that much back; the lowered program runs with each
// step's slice.
#include "executor/oracle.hpp"
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::parse_text;

namespace {

// Chunk i of x is x[i * 128 : min((i + 1) * 128, 1000)], copied whole into
// block i of o (1024 elements).
spec::KernelSpec copy_kernel(const std::string &index = "ds(i * 128, min(128, n - i * 128))") {
  spec::File f = parse_text(R"(kernel k:
    param n = 1000
    grid = (8,)
    in  x: f32[n]  block=(BoundedSlice(128),)  index=(i) -> ()" +
                            index + R"(,)
    out o: f32[1024]  block=(128,)  index=(i) -> (i,)
    body:
        o[...] = x[...]
)");
  return std::get<spec::KernelSpec>(f.units.at(0));
}

TEST(BoundedSlice, TheOracleCopiesOnlyTheSizeAndLeavesTheRestOfTheBlockPoison) {
  const spec::KernelSpec k = copy_kernel();
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 3);
  run_oracle(c, arrays);
  const HostArray &x = *arrays.at("x"), &o = *arrays.at("o");
  for (std::int64_t e = 0; e < 1000; ++e) {
    ASSERT_FALSE(o.is_poison(e)) << e;
    EXPECT_EQ(o.get(e), x.get(e)) << e;
  }
  for (std::int64_t e = 1000; e < 1024; ++e)
    EXPECT_TRUE(o.is_poison(e)) << e;
}

TEST(BoundedSlice, AWindowShorterThanItsBoundIsPoisonPastItsSizeAtEveryGridPoint) {
  // Every window takes 100 of its 128 elements.
  const spec::KernelSpec k = copy_kernel("ds(i * 125, 100)");
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 4);
  run_oracle(c, arrays);
  const HostArray &x = *arrays.at("x"), &o = *arrays.at("o");
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(o.get(i * 128), x.get(i * 125)) << i;
    EXPECT_EQ(o.get(i * 128 + 99), x.get(i * 125 + 99)) << i;
    EXPECT_TRUE(o.is_poison(i * 128 + 100)) << i;
    EXPECT_TRUE(o.is_poison(i * 128 + 127)) << i;
  }
}

TEST(BoundedSlice, ARunWritesBackTheUndefinedTailAndFails) {
  RunOptions o;
  RunReport r = run_all_modes(copy_kernel(), o);
  // o[1000:1024] is the tail of the last window: poison in the intent too.
  ASSERT_EQ(r.status, RunStatus::fail);
  ASSERT_TRUE(r.runs.at(0).mismatch);
  EXPECT_EQ(r.runs[0].mismatch->element, (Shape{1000}));
  EXPECT_FALSE(r.runs[0].mismatch->poison.empty());
}

TEST(BoundedSlice, ScaleIsALocatedRefusal) {
  RunOptions o;
  o.scale = 2;
  RunReport r = run_all_modes(copy_kernel(), o);
  ASSERT_EQ(r.status, RunStatus::bad_input);
  EXPECT_NE(r.runs.at(0).reason.find("cannot scale the BoundedSlice dim 0 of 'x'"), std::string::npos)
      << r.runs[0].reason;
  EXPECT_EQ(r.runs[0].loc.line, 4);
}

// Chunk i of x scaled into o's slice [starts(i), starts(i) + size(i)):
// an output with a BoundedSlice dim.
spec::KernelSpec scale_kernel(const std::string &out_index, const std::string &extra = "") {
  spec::File f = parse_text(R"(kernel k:
    param n = 1000
    grid = (8,)
    in  x: f32[n]  block=(BoundedSlice(128),)  index=(i) -> (ds(i * 128, min(128, n - i * 128)),)
    out o: f32[n]  block=(BoundedSlice(128),)  index=(i) -> ()" +
                            out_index + R"(,)
    body:
        o[...] = x[...] * 2.0
)" + extra);
  return std::get<spec::KernelSpec>(f.units.at(0));
}

TEST(BoundedSliceOutput, TheOracleWritesBackOnlyTheSizeAndLeavesTheRestOfTheArrayUntouched) {
  // Each window writes back 100 of its 128 elements.
  const spec::KernelSpec k = scale_kernel("ds(i * 125, 100)");
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 5);
  WrittenMap written;
  run_oracle(c, arrays, &written);
  const HostArray &x = *arrays.at("x"), &o = *arrays.at("o");
  for (std::int64_t i = 0; i < 8; ++i) {
    for (std::int64_t e : {i * 125, i * 125 + 99}) {
      ASSERT_FALSE(o.is_poison(e)) << e;
      EXPECT_EQ(o.get(e), 2.0 * x.get(i * 128 + (e - i * 125))) << e;
    }
    // 100:125 of each stride is no window's: never written.
    for (std::int64_t e : {i * 125 + 100, i * 125 + 124}) {
      EXPECT_TRUE(o.is_poison(e)) << e;
      EXPECT_EQ(written.at("o")[static_cast<std::size_t>(e)], 0) << e;
    }
  }
}

TEST(BoundedSliceOutput, ARaggedOutputRunsEqualToTheOracleAndItsReferenceInEveryMode) {
  RunOptions o;
  RunReport r = run_all_modes(
      scale_kernel("ds(i * 128, min(128, n - i * 128))", "    reference:\n        o = x * 2.0\n"), o);
  EXPECT_EQ(r.status, RunStatus::pass) << (r.runs.empty() ? "" : r.runs[0].reason);
  EXPECT_GE(r.runs.size(), 5u);
}

TEST(BoundedSliceOutput, AnElementNoWindowWritesBackFailsTheRunNamingIt) {
  // Windows of 120 from starts 128 apart: 120:128 of each stride is never written.
  RunOptions o;
  RunReport r = run_all_modes(
      scale_kernel("ds(i * 128, min(120, n - i * 128))", "    reference:\n        o = x * 2.0\n"), o);
  ASSERT_EQ(r.status, RunStatus::fail);
  ASSERT_TRUE(r.runs.at(0).mismatch);
  EXPECT_EQ(r.runs[0].mismatch->element, (Shape{120}));
}

} // namespace
