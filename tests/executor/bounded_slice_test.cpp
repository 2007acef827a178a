// pl.BoundedSlice in the executor: the oracle copies only the ds size of
// each window into its block buffer (the rest is poison), and the lowered
// program runs with each step's slice.
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

} // namespace
