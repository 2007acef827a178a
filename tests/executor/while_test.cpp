// `while COND, bound=N:` run for real: the pipelined run (the lowered
// program's while loop, on the stepper the checker shares) and the oracle
// (the body per grid point) both run the search, agree with the reference,
// and stop with an error naming the loop when a run needs more iterations
// than the bound.
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::parse_text;
using executor::testing::unit;

namespace {

// Each grid point scales its block by the index of the next sequence with
// a non-zero length (n when none): with [0, 2, 0, 3], 1, 3, 3 and 4.
std::string search(const std::string &lens, const std::string &bound) {
  return "kernel w:\n"
         "    param n = 4\n"
         "    grid = (n,)\n"
         "    prefetch lens: i32[n] = " +
         lens +
         "\n"
         "    in  x: f32[n * 8, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
         "    out o: f32[n * 8, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
         "    body:\n"
         "        k = program_id(0) + 1\n"
         "        while k < n and lens[k] == 0, bound=" +
         bound +
         ":\n"
         "            k = k + 1\n"
         "        o[...] = x[...] * k\n"
         "    reference:\n"
         "        r = iota((n * 8, 128), 0)\n"
         "        o = x * where(r < 8, 1.0, where(r < 24, 3.0, 4.0))\n";
}

} // namespace

TEST(RunWhile, TheSearchRunsAsWrittenInEveryModeAndMatchesTheReference) {
  const spec::File f = parse_text(search("[0, 2, 0, 3]", "n"));
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(f, "w"), {});
  EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
}

TEST(RunWhile, AWrongSearchResultFailsAgainstTheReference) {
  // With bound n but sequence 2 non-empty, point 1 stops at 2, not 3.
  const spec::File f = parse_text(search("[0, 2, 1, 3]", "n"));
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(f, "w"), {});
  EXPECT_EQ(r.status, RunStatus::fail) << format_report(r);
}

TEST(RunWhile, ARunThatNeedsMoreIterationsThanTheBoundStopsWithTheLoopAndItsBound) {
  // Grid point 0 passes two empty sequences: two iterations, bound 1.
  const spec::File f = parse_text(search("[0, 0, 0, 3]", "1"));
  const RunResult r = run(unit<spec::KernelSpec>(f, "w"), {});
  EXPECT_EQ(r.status, RunStatus::bad_input) << r.reason;
  EXPECT_NE(r.reason.find("the while loop at line 9 may run past its bound 1"), std::string::npos)
      << r.reason;
  EXPECT_EQ(r.loc.line, 9);
}
