// `check` and `run` agree on generated pipelines and kernels (properties/agreement.hpp).
// PIPECHECK_AGREEMENT_CASES sets the cases per generator (CI default 2000; offline:
// PIPECHECK_AGREEMENT_CASES=100000), PIPECHECK_AGREEMENT_SEED the seed (default 1).
#include "properties/agreement.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

namespace pipecheck {
namespace {

std::int64_t env_int(const char *name, std::int64_t fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strtoll(v, nullptr, 10);
}

void expect_agreement(const char *what, const rc::Gen<std::string> &gen) {
  const std::int64_t cases = env_int("PIPECHECK_AGREEMENT_CASES", 2000);
  const auto seed = static_cast<std::uint64_t>(env_int("PIPECHECK_AGREEMENT_SEED", 1));
  auto t0 = std::chrono::steady_clock::now();
  properties::AgreementTally t = properties::run_agreement(gen, cases, seed);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << what << " (seed " << seed << "): " << t.summary() << "; " << s << " s\n";
  EXPECT_EQ(t.cases, cases);
  // Not vacuous: both verdicts occur, and the witnesses get checked.
  EXPECT_GT(t.verified, 0);
  EXPECT_GT(t.violation, 0);
  EXPECT_GT(t.reproduced, 0);
  std::size_t shown = 0;
  for (const auto &[text, a] : t.disagreements) {
    if (++shown > 5) break;
    ADD_FAILURE() << a.verdict << ": " << a.disagreements.front() << "\n" << text;
  }
  EXPECT_EQ(t.disagreements.size(), 0u) << t.summary();
}

TEST(Agreement, EveryPipelineFailureHasAFindingEveryVerifiedPipelinePassesAndWitnessesReproduce) {
  expect_agreement("pipelines", properties::agreement_pipeline_text());
}

TEST(Agreement, EveryKernelFailureHasAFindingEveryVerifiedKernelPassesAndWitnessesReproduce) {
  expect_agreement("kernels", properties::agreement_kernel_text());
}

TEST(Agreement, AKnownRaceIsAViolationWhoseWitnessReproducesAndACleanPipelineIsVerifiedAndPasses) {
  const char *racy = "pipeline p:\n    param N >= 1\n    hbm  A: f32[N, 8]\n    hbm  B: f32[N, 8]\n"
                     "    sram X[1]: f32[8]\n    for i in range(N):\n"
                     "        copy_in_start(A[i], X[0])\n        X[0] = X[0] + 1\n"
                     "        copy_in_wait(X[0])\n        copy_out_start(X[0], B[i])\n"
                     "        copy_out_wait(X[0])\n";
  auto r = properties::check_agreement(racy);
  EXPECT_EQ(r.verdict, "violation");
  EXPECT_TRUE(r.disagreements.empty()) << r.disagreements.front();
  EXPECT_GT(r.reproduced, 0);
  EXPECT_GT(r.failed_runs, 0);
  const char *clean = "pipeline p:\n    param N >= 1\n    hbm  A: f32[N, 8]\n    hbm  B: f32[N, 8]\n"
                      "    sram X[1]: f32[8]\n    for i in range(N):\n"
                      "        copy_in_start(A[i], X[0])\n        copy_in_wait(X[0])\n"
                      "        X[0] = X[0] + 1\n        copy_out_start(X[0], B[i])\n"
                      "        copy_out_wait(X[0])\n";
  auto c = properties::check_agreement(clean);
  EXPECT_EQ(c.verdict, "verified");
  EXPECT_TRUE(c.disagreements.empty()) << c.disagreements.front();
  EXPECT_EQ(c.failed_runs, 0);
  EXPECT_EQ(c.runs, 15); // N = 1..3, five modes each
  EXPECT_EQ(properties::check_agreement("pipeline").verdict, "skip");
}

TEST(Agreement, AKernelThatReadsTheWrongBlockIsAViolationThatRunShows) {
  const char *src = "kernel k:\n    grid = (4,)\n"
                    "    in  x: f32[32, 8]  block=(8, 8)  index=(i) -> (i // 2, 0)\n"
                    "    out o: f32[32, 8]  block=(8, 8)  index=(i) -> (i // 2, 0)\n"
                    "    body:\n        o[...] += x[...]\n";
  auto r = properties::check_agreement(src);
  EXPECT_EQ(r.verdict, "violation");
  EXPECT_TRUE(r.disagreements.empty()) << r.disagreements.front();
  EXPECT_GT(r.reproduced, 0);
}

} // namespace
} // namespace pipecheck
