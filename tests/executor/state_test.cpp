// SMEM state run for real: the executor runs the kernel with its state
// elaborated as check proves it (spec/state.hpp), so the corpus's double
// buffer whose slot lives in SMEM passes in every DMA mode, its mutant that
// never stores the slot fails, and a slot read before any store fails the
// run at that statement, never running on garbage.
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::load_corpus;
using executor::testing::unit;

namespace {

const spec::File &ring() {
  static const spec::File f = load_corpus("corpus/kernels/smem_slot_ring_tpu.pk");
  return f;
}

} // namespace

TEST(RunState, ADoubleBufferWhoseSlotLivesInSmemPassesInEveryMode) {
  for (const char *name : {"smem_slot_ring", "smem_slot_ring_prefetched_start"}) {
    const RunReport r = run_all_modes(unit<spec::KernelSpec>(ring(), name), {});
    EXPECT_EQ(r.status, RunStatus::pass) << name << ": " << format_report(r);
    EXPECT_GE(r.runs.size(), 3u);
  }
}

TEST(RunState, ASlotNeverStoredFailsTheRun) {
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(ring(), "smem_slot_ring_slot_not_stored"), {});
  EXPECT_EQ(r.status, RunStatus::fail) << format_report(r);
}

TEST(RunState, ASlotReadBeforeAnyStoreFailsTheRunAtThatStatement) {
  const RunResult r = run(unit<spec::KernelSpec>(ring(), "smem_slot_ring_read_before_store"), {});
  EXPECT_EQ(r.status, RunStatus::fail);
  EXPECT_EQ(r.loc.line, 75); // the copy into buf[cur], which the garbage slot picks
  EXPECT_EQ(r.reason,
            "slot[0] is read at grid point (0,) before anything stores it, and this statement depends "
            "on its value (an SMEM scratch holds no value until the body stores one)");
}
