// `check` and `run` agree on generated pipelines and kernels (properties/agreement.hpp).
// PIPECHECK_AGREEMENT_CASES sets the cases per generator (CI default 2000; offline:
// PIPECHECK_AGREEMENT_CASES=100000), PIPECHECK_AGREEMENT_SEED the seed (default 1),
// PIPECHECK_AGREEMENT_DUMP=1 prints every generated unit with its verdict.
#include "properties/agreement.hpp"
#include "spec/parse.hpp"
#include "sweep/failure_file.hpp"

#include "tests/corpus/corpus_files.hpp"

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
  // PIPECHECK_AGREEMENT_DUMP=1 prints every unit with its verdict.
  const bool dump = env_int("PIPECHECK_AGREEMENT_DUMP", 0) != 0;
  properties::AgreementTally t = properties::run_agreement(
      gen, cases, seed, [&](const std::string &text, const properties::Agreement &a) {
        if (!dump) return;
        std::cout << "# " << a.verdict << " (" << a.failed_runs << "/" << a.runs << " runs failed)";
        for (const auto &d : a.disagreements)
          std::cout << " DISAGREES: " << d;
        std::cout << "\n" << text;
      });
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << what << " (seed " << seed << "): " << t.summary() << "; " << s << " s\n";
  EXPECT_EQ(t.cases, cases);
  // Not vacuous: both verdicts occur, and the witnesses get checked.
  EXPECT_GT(t.verified, 0);
  EXPECT_GT(t.violation, 0);
  EXPECT_GT(t.reproduced, 0);
  const std::string reproduce = "reproduce: PIPECHECK_AGREEMENT_SEED=" + std::to_string(seed) +
                                " PIPECHECK_AGREEMENT_CASES=" + std::to_string(cases) +
                                " build/tests/properties/properties_test --gtest_filter='Agreement.*'";
  std::size_t shown = 0;
  for (const auto &[text, a] : t.disagreements) {
    // PIPECHECK_PROPERTY_SAVE=DIR: each as a corpus file; a failing run is
    // what the unit must show (`# expect-run: fail`), the rest a person
    // decides from the header.
    sweep::save_failure(std::string("agreement-") + what, text, {}, a.failed_runs > 0,
                        "Property 4 / agreement (" + std::string(what) + ", seed " + std::to_string(seed) +
                            "): verdict " + a.verdict + "\n" + a.disagreements.front() +
                            "\nAdd the `# expect:` the unit should check as.");
    if (++shown > 5) continue;
    ADD_FAILURE() << a.verdict << ": " << a.disagreements.front() << "\n" << text << reproduce;
  }
  EXPECT_EQ(t.disagreements.size(), 0u) << t.summary() << "\n" << reproduce;
  // An unknown unit whose run fails is a finding missed: a pipeline is checked
  // concretely up to N = 8, past every N run uses, and a generated kernel's
  // grid is small enough to check whole.
  EXPECT_EQ(t.unknown_with_failing_run, 0) << t.summary() << "\n" << reproduce;
  // Property 4: every finding's witness reproduces in a directed run; those
  // that do not are counted and listed (goal 0).
  for (const auto &[text, why] : t.not_reproduced)
    ADD_FAILURE() << "not reproduced: " << why << "\n" << text;
  EXPECT_EQ(t.not_reproduced.size(), 0u) << reproduce;
}

TEST(Agreement, EveryPipelineFailureHasAFindingEveryVerifiedPipelinePassesAndWitnessesReproduce) {
  expect_agreement("pipelines", properties::agreement_pipeline_text());
}

TEST(Agreement, EveryKernelFailureHasAFindingEveryVerifiedKernelPassesAndWitnessesReproduce) {
  expect_agreement("kernels", properties::agreement_kernel_text());
}

TEST(Agreement, EveryUnmutatedGeneratedPipelineIsVerifiedAndPassesEveryMode) {
  // The generator's correct programs are correct: mutations are what breaks them.
  auto t = properties::run_agreement(properties::agreement_pipeline_text(false), 100, 3);
  EXPECT_EQ(t.verified, 100) << t.summary();
  EXPECT_EQ(t.failed_runs, 0) << t.summary();
  EXPECT_TRUE(t.disagreements.empty()) << t.summary();
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

TEST(Agreement, TheIssuesWrapAroundPipelineIsAViolationOfIndexOutOfBounds) {
  // issue 9: A[i - 1] at i = 0 was the box {-1} for the checker and A[3] for
  // the executor: `verified`, while run failed.
  const char *src = "pipeline wrap_minus_one:\n    hbm A: f32[4, 128]\n    sram X[1]: f32[128]\n"
                    "    sram Y[1]: f32[128]\n    for i in range(1):\n        Y[0] = zeros\n"
                    "        copy_out_start(Y[0], A[i - 1])\n        copy_in_start(A[3], X[0])\n"
                    "        copy_out_wait(Y[0])\n        copy_in_wait(X[0])\n"
                    "        copy_out_start(X[0], A[1])\n        copy_out_wait(X[0])\n";
  auto r = properties::check_agreement(src);
  EXPECT_EQ(r.verdict, "violation");
  EXPECT_TRUE(r.disagreements.empty()) << r.disagreements.front();
  EXPECT_GT(r.reproduced, 0);
}

TEST(Agreement, EveryCorpusPipelineAgrees) {
  int pipelines = 0;
  for (const auto &rel : testing_corpus::corpus_files()) {
    auto src = spec::SourceFile::from_string(
        rel, testing_corpus::read(std::filesystem::path(PIPECHECK_SOURCE_DIR) / rel));
    auto parsed = spec::parse_and_validate(src);
    if (!parsed.file) continue;
    for (const auto &unit : parsed.file->units) {
      const auto *p = std::get_if<spec::Program>(&unit);
      if (!p) continue;
      ++pipelines;
      auto a = properties::check_agreement(unit);
      for (const auto &d : a.disagreements)
        ADD_FAILURE() << rel << ": pipeline " << p->name << ": " << d;
    }
  }
  EXPECT_GT(pipelines, 20);
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
