// A kernel body's DMAs run through the same asynchronous DMA engine and DMA
// modes as the pipeline's own copies (issue 11): a correct hand-written
// double buffer passes in every mode, and the mutants' wrong waits show up as
// wrong numbers or leaked copies, never as a crash.
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::load_corpus;
using executor::testing::unit;

namespace {

const spec::File &double_buffer() {
  static const spec::File f = load_corpus("corpus/kernels/manual_double_buffer_tpu.pk");
  return f;
}
const spec::File &paged() {
  static const spec::File f = load_corpus("corpus/kernels/paged_attention_tpu.pk");
  return f;
}

bool fails_in(const RunReport &r, DmaMode mode) {
  for (const auto &x : r.runs)
    if (x.mode == mode && x.status == RunStatus::fail) return true;
  return false;
}

} // namespace

TEST(RunBodyDma, TheManualDoubleBufferPassesInEveryModeAgainstItsReference) {
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(double_buffer(), "manual_double_buffer"), {});
  EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
  EXPECT_GE(r.runs.size(), 3u);
}

TEST(RunBodyDma, PagedAttentionWithBodyDmasPassesInEveryMode) {
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(paged(), "paged_attention"), {});
  EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
}

TEST(RunBodyDma, WaitingOnTheOtherSlotsSemaphoreReadsDataThatHasNotLandedWhenCopiesRunAtTheirWait) {
  const RunReport r =
      run_all_modes(unit<spec::KernelSpec>(double_buffer(), "manual_double_buffer_waits_other_slot"), {});
  EXPECT_EQ(r.status, RunStatus::fail) << format_report(r);
  EXPECT_TRUE(fails_in(r, DmaMode::on_wait)) << format_report(r);
}

TEST(RunBodyDma, ALastWriteBackNeverWaitedFailsAtTheLeakedCopy) {
  const RunReport r = run_all_modes(
      unit<spec::KernelSpec>(double_buffer(), "manual_double_buffer_last_write_back_not_waited"), {});
  EXPECT_EQ(r.status, RunStatus::fail);
  EXPECT_NE(format_report(r).find("never waited"), std::string::npos) << format_report(r);
}

TEST(RunBodyDma, UpstreamsSharedSemaphoreLayoutFailsWhenCopiesRunAtTheirWait) {
  // The K waits on the shared semaphore retire no K page: in on_wait mode the
  // pages land only when the last wait balances the semaphore.
  const RunReport r = run_all_modes(unit<spec::KernelSpec>(paged(), "paged_attention_shared_semaphore"), {});
  EXPECT_TRUE(fails_in(r, DmaMode::on_wait)) << format_report(r);
}
