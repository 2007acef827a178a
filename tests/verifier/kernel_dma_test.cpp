// A kernel whose body copies by hand (issue 11): its check runs the race
// checker over the lowered program with the body's DMAs and the pipeline's
// own copies together, across grid steps, with findings on the body's lines.
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck;
using verifier::Rule;
using verifier::Status;
using verifier::testing::has_finding;

namespace {

/// A copy started at one grid step and waited at the next: step i prefetches
/// row block i + 1 into the other buffer, on that buffer's semaphore.
/// Line 14 starts the prefetch, line 15 waits, line 16 reads.
std::string prefetching(const std::string &wait_sem, const std::string &guard = "i + 1 < n") {
  return R"(kernel k:
    param n = 6
    grid = (n,)
    target = tpu_v5e
    in  a: f32[n * 8, 128]  memory_space=any
    out o: f32[n * 8, 128]  block=(8, 128)  index=(i) -> (i, 0)
    scratch x: f32[2, 8, 128]
    scratch sem: dma_sem[2]
    body:
        i = program_id(0)
        when i == 0:
            async_copy(a[0:8, :], x[0], sem[0]).start()
        when )" +
         guard + R"(:
            async_copy(a[ds((i + 1) % n * 8, 8), :], x[(i + 1) % 2], sem[(i + 1) % 2]).start()
        async_copy(a[ds(i * 8, 8), :], x[i % 2], )" +
         wait_sem + R"().wait()
        o[...] = x[i % 2] * 2
)";
}

verifier::Verdict check(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return verifier::check(std::get<spec::KernelSpec>(r.file->units.at(0)), {});
}

} // namespace

TEST(KernelDma, APrefetchWaitedAtTheNextGridStepOnItsOwnSemaphoreIsVerified) {
  auto v = check(prefetching("sem[i % 2]"));
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(KernelDma, WaitingOnTheOtherBuffersSemaphoreLetsTheComputeReadACopyInFlight) {
  auto v = check(prefetching("sem[(i + 1) % 2]"));
  EXPECT_EQ(v.status, Status::violation);
  EXPECT_TRUE(has_finding(v, Rule::slot_race, 16));
}

TEST(KernelDma, APrefetchThatWrapsAroundIsNeverWaitedAtTheLastGridStep) {
  auto v = check(prefetching("sem[i % 2]", "i + 1 <= n"));
  EXPECT_EQ(v.status, Status::violation);
  EXPECT_TRUE(has_finding(v, Rule::copy_never_waited, 14));
}

TEST(KernelDma, AWaitWithNothingOnItsSemaphoreIsAHangWithItsGridPoint) {
  // The prefetch is dropped: from step 1 on, nothing is in flight on the wait's semaphore.
  auto v = check(prefetching("sem[i % 2]", "i + 1 < 0"));
  ASSERT_TRUE(has_finding(v, Rule::wait_without_copy, 15));
  for (const auto &f : v.findings)
    if (f.rule == Rule::wait_without_copy) {
      EXPECT_NE(f.message.find("this hangs"), std::string::npos) << f.message;
    }
}

TEST(KernelDma, ACopyPastAnHbmOutputIsItsOutOfBoundsAloneNotAGapInTheOutput) {
  // tpu-inference#1252: token blocks of 16 over 24 rows; the second block's
  // copies run past both arrays. The rows they aimed at are no coverage gap.
  auto v = check(R"(kernel k:
    target = tpu_v5e
    in  x: f32[24, 128]  memory_space=any
    out o: f32[24, 128]  memory_space=any
    scratch buf: f32[16, 128]
    scratch sem: dma_sem
    body:
        for t in range(2):
            async_copy(x[ds(t * 16, 16), :], buf[...], sem).start()
            async_copy(x[ds(t * 16, 16), :], buf[...], sem).wait()
            buf[...] = buf[...] * 2.0
            async_copy(buf[...], o[ds(t * 16, 16), :], sem).start()
            async_copy(buf[...], o[ds(t * 16, 16), :], sem).wait()
)");
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u) << v.findings[0].message;
  EXPECT_EQ(v.findings[0].rule, Rule::index_out_of_bounds);
  EXPECT_EQ(v.findings[0].loc.line, 9);
}
