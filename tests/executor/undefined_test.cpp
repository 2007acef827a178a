// `S[...] = undefined` run for real: the pipelined run (the stepper's
// on_discard) and the oracle (the body per grid point) both fill the target
// with poison, so a read of what no store of this entry wrote fails against
// the reference instead of reading what an earlier grid step left there.
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::parse_text;
using executor::testing::unit;

namespace {

// A pl.run_scoped buffer: undefined at each entry, written at grid point 0
// only unless `every_step`.
std::string scoped(bool every_step, const std::string &discard = "        tmp[...] = undefined\n") {
  return "kernel s:\n"
         "    grid = (4,)\n"
         "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    scratch tmp: f32[8, 128]\n"
         "    body:\n" +
         discard + "        when " + (every_step ? "program_id(0) >= 0" : "program_id(0) == 0") +
         ":\n"
         "            tmp[...] = x[...]\n"
         "        o[...] = tmp[...] + x[...]\n"
         "    reference:\n"
         "        o = 2.0 * x\n";
}

} // namespace

TEST(RunUndefined, AScratchWrittenAtEveryEntryRunsInEveryModeAndMatchesTheReference) {
  const spec::File f = parse_text(scoped(true));
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(f, "s"), {});
  EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
}

TEST(RunUndefined, AReadOfWhatOnlyAnEarlierEntryWroteIsPoisonAndFails) {
  const spec::File f = parse_text(scoped(false));
  const RunResult r = run(unit<spec::KernelSpec>(f, "s"), {});
  EXPECT_EQ(r.status, RunStatus::fail) << r.reason;
  ASSERT_TRUE(r.mismatch.has_value()) << r.reason;
  // grid point 0 wrote tmp; the first wrong row is grid point 1's, and it is poison
  EXPECT_GE(r.mismatch->element.at(0), 8) << r.reason;
  EXPECT_TRUE(r.mismatch->is_poison) << r.reason;
}

TEST(RunUndefined, WithoutTheDiscardTheScratchKeepsStepZerosDataAndTheSameBodyPasses) {
  // A scratch_shapes buffer lives across grid steps: x[0:8] + x[8:16] is
  // what the body computes at point 1, not 2 * x, so it fails — but by a
  // wrong value, not by poison: what tmp held is defined.
  const spec::File f = parse_text(scoped(false, ""));
  const RunResult r = run(unit<spec::KernelSpec>(f, "s"), {});
  EXPECT_EQ(r.status, RunStatus::fail) << r.reason;
  ASSERT_TRUE(r.mismatch.has_value()) << r.reason;
  EXPECT_FALSE(r.mismatch->is_poison) << r.reason;
}

TEST(RunUndefined, APartOfAScratchMadeUndefinedLeavesTheRestAsItWas) {
  const spec::File f = parse_text("kernel p:\n"
                                  "    grid = (1,)\n"
                                  "    in  x: f32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)\n"
                                  "    out o: f32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)\n"
                                  "    scratch tmp: f32[8, 128]\n"
                                  "    body:\n"
                                  "        tmp[...] = x[...]\n"
                                  "        tmp[0:4, :] = undefined\n"
                                  "        o[...] = where(iota((8, 128), 0) >= 4, tmp[...], 1.0)\n"
                                  "    reference:\n"
                                  "        o = where(iota((8, 128), 0) >= 4, x, 1.0)\n");
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(f, "p"), {});
  EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
}
