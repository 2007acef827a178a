// SMEM state run for real: the executor runs the kernel with its state
// elaborated as check proves it (spec/state.hpp), so a double buffer whose
// slot lives in SMEM passes in every DMA mode, and a slot read before any
// store fails the run at that statement, never running on garbage.
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::parse_text;
using executor::testing::unit;

namespace {

std::string ring(const std::string &init) {
  return "kernel r:\n"
         "    param n = 4\n"
         "    grid = (n,)\n"
         "    dimension_semantics = (arbitrary,)\n"
         "    scratch slot: i32[1] memory_space=smem\n"
         "    in  x: f32[n, 8, 128]  memory_space=any\n"
         "    out o: f32[n * 8, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    scratch buf: f32[2, 8, 128]\n"
         "    scratch sem: dma_sem[2]\n"
         "    body:\n"
         "        i = program_id(0)\n" +
         init +
         "        cur = slot[0]\n"
         "        nxt = 1 - cur\n"
         "        when i == 0:\n"
         "            async_copy(x[0], buf[cur], sem[cur]).start()\n"
         "        when i + 1 < n:\n"
         "            async_copy(x[i + 1], buf[nxt], sem[nxt]).start()\n"
         "        slot[0] = nxt\n"
         "        async_copy(x[i], buf[cur], sem[cur]).wait()\n"
         "        o[...] = buf[cur] * 2.0\n"
         "    reference:\n"
         "        o = reshape(x, (n * 8, 128)) * 2.0\n";
}

} // namespace

TEST(RunState, ADoubleBufferWhoseSlotLivesInSmemPassesInEveryMode) {
  const spec::File f = parse_text(ring("        when i == 0:\n            slot[0] = 0\n"));
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(f, "r"), {});
  EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
  EXPECT_GE(r.runs.size(), 3u);
}

TEST(RunState, ASlotReadBeforeAnyStoreFailsTheRunAtThatStatement) {
  const spec::File f = parse_text(ring(""));
  const RunResult r = run(unit<spec::KernelSpec>(f, "r"), {});
  EXPECT_EQ(r.status, RunStatus::fail);
  EXPECT_EQ(r.loc.line, 12);
  EXPECT_EQ(r.reason,
            "slot[0] is read at grid point (0,) before anything stores it (an SMEM scratch holds no value "
            "until the body stores one)");
}
