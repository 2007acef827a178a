// Properties 3 and 5 of issue 12 (properties/intent_property.hpp), and failing
// cases written out as corpus files (sweep/failure_file.hpp). 200 cases
// each in CI (RC_PARAMS="max_success=2000" for more); a failure prints
// RapidCheck's seed and reproduce string, and with PIPECHECK_PROPERTY_SAVE=DIR
// writes the case to DIR as a `.pk` file with its `# expect:`.
#include "properties/agreement.hpp"
#include "properties/intent_property.hpp"
#include "spec/parse.hpp"
#include "sweep/failure_file.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipecheck {
namespace {

struct BoundedIntentCounts {
  BoundedIntentCounts() { setenv("RC_PARAMS", "max_success=200", 0); }
} bounded_intent_counts;

std::string lines(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v)
    s += "  " + x + "\n";
  return s;
}

RC_GTEST_PROP(Intent, AVerifiedGeneratedKernelMatchesItsReferenceInEveryDmaModeOnGeneratedInputs, ()) {
  const std::string text = *properties::reference_kernel_text();
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1000);
  const auto o = properties::check_against_reference(text, seed);
  RC_TAG(o.verdict);
  RC_LOG() << text << "seed " << seed << "\n" << lines(o.failures);
  const bool ok = o.verdict == "verified" && o.failures.empty();
  if (!ok)
    sweep::save_failure("reference", text, {{1, "verified"}}, false,
                        "Property 3 (a verified kernel matches its reference), input seed " +
                            std::to_string(seed) + ":\n" + lines(o.failures));
  // Correct by construction: every one verifies, and every run passes.
  RC_ASSERT(o.verdict == std::string("verified"));
  RC_ASSERT(o.failures.empty());
}

RC_GTEST_PROP(Intent, AVerifiedPipelineSurvivesAdversarialDmaTimingForEveryNUpToEight, ()) {
  const std::string text =
      *rc::gen::oneOf(properties::agreement_pipeline_text(false), properties::agreement_pipeline_text(true));
  const auto o = properties::check_adversarial_timing(text);
  RC_PRE(o.verdict == std::string("verified"));
  RC_LOG() << text << lines(o.failures);
  if (!o.failures.empty())
    sweep::save_failure("timing", text, {{1, "verified"}}, false,
                        "Property 5 (a verified pipeline survives adversarial DMA timing):\n" +
                            lines(o.failures));
  RC_ASSERT(o.failures.empty());
  RC_ASSERT(o.runs == properties::kAdversarialMaxN * (2 + properties::kAdversarialSeeds));
}

TEST(Intent, AMatmulWithSwappedBlockIndicesFailsAgainstItsReferenceOnly) {
  // b's index map swaps its block indices: on square blocks of a square
  // array every spec rule holds and pipelining changes nothing; the product
  // is of the wrong blocks, which only the reference shows.
  const char *src = "kernel k:\n    grid = (2, 2, 2)\n"
                    "    in  a: f32[16, 16]  block=(8, 8)  index=(i, j, kk) -> (i, kk)\n"
                    "    in  b: f32[16, 16]  block=(8, 8)  index=(i, j, kk) -> (j, kk)\n"
                    "    out o: f32[16, 16]  block=(8, 8)  index=(i, j, kk) -> (i, j)\n"
                    "    scratch acc: f32[8, 8]\n"
                    "    body:\n        when program_id(2) == 0:\n            acc[...] = zeros\n"
                    "        acc[...] += dot(a[...], b[...])\n"
                    "        when program_id(2) == num_programs(2) - 1:\n            o[...] = acc[...]\n"
                    "    reference:\n        o = dot(a, b)\n";
  auto o = properties::check_against_reference(src, 1);
  EXPECT_EQ(o.verdict, "verified");
  EXPECT_EQ(o.runs, 20); // four kinds of input (it reduces: no special values), five modes
  int uniform = 0;       // one-hot inputs may miss the swapped blocks
  for (const auto &f : o.failures)
    uniform += f.rfind("uniform inputs, ", 0) == 0;
  EXPECT_EQ(uniform, 5) << lines(o.failures);
  EXPECT_EQ(properties::check_against_reference("kernel", 1).verdict, "skip");
}

TEST(Intent, ARacyPipelineIsNotJudgedAndACleanOneRunsEightyTimes) {
  const char *racy = "pipeline p:\n    param N >= 1\n    hbm  A: f32[N, 8]\n    hbm  B: f32[N, 8]\n"
                     "    sram X[1]: f32[8]\n    for i in range(N):\n"
                     "        copy_in_start(A[i], X[0])\n        X[0] = X[0] + 1\n"
                     "        copy_in_wait(X[0])\n        copy_out_start(X[0], B[i])\n"
                     "        copy_out_wait(X[0])\n";
  EXPECT_EQ(properties::check_adversarial_timing(racy).verdict, "violation");
  const char *clean = "pipeline p:\n    param N >= 1\n    hbm  A: f32[N, 8]\n    hbm  B: f32[N, 8]\n"
                      "    sram X[1]: f32[8]\n    for i in range(N):\n"
                      "        copy_in_start(A[i], X[0])\n        copy_in_wait(X[0])\n"
                      "        X[0] = X[0] + 1\n        copy_out_start(X[0], B[i])\n"
                      "        copy_out_wait(X[0])\n";
  auto o = properties::check_adversarial_timing(clean);
  EXPECT_EQ(o.verdict, "verified");
  EXPECT_EQ(o.runs, 80);
  EXPECT_TRUE(o.failures.empty()) << lines(o.failures);
}

TEST(FailureFile, AFailingCaseBecomesACorpusFileWithItsExpectations) {
  const std::string text = "kernel k:\n    grid = (4,)\n"
                           "    in  x: f32[32, 8]  block=(8, 8)  index=(i) -> (i + 1, 0)\n"
                           "    out o: f32[32, 8]  block=(8, 8)  index=(i) -> (i, 0)\n"
                           "    body:\n        o[...] = x[...]\n";
  const auto dir =
      std::filesystem::temp_directory_path() / ("pipecheck_failure_file_" + std::to_string(::getpid()));
  auto path = sweep::save_failure("spec-rules", text, {{3, "index-out-of-bounds"}}, true,
                                  "found by a test\nsecond line", dir.string());
  ASSERT_TRUE(path.has_value());
  std::ifstream in(*path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string saved = ss.str();
  EXPECT_EQ(saved.rfind("# found by a test\n# second line\nkernel k:\n    # expect-run: fail\n", 0), 0u)
      << saved;
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string(*path, saved));
  ASSERT_TRUE(parsed.file) << saved;
  ASSERT_EQ(parsed.file->expectations.size(), 1u);
  EXPECT_EQ(parsed.file->expectations[0].rule, "index-out-of-bounds");
  EXPECT_EQ(parsed.file->expectations[0].line, 6); // the `in x` line, below the header and expect-run
  // The same case again is the same file; without a directory nothing is written.
  EXPECT_EQ(sweep::save_failure("spec-rules", text, {{3, "index-out-of-bounds"}}, true, "", dir.string()),
            path);
  unsetenv("PIPECHECK_PROPERTY_SAVE");
  EXPECT_FALSE(sweep::save_failure("spec-rules", text, {}, false, "").has_value());
  setenv("PIPECHECK_PROPERTY_SAVE", dir.string().c_str(), 1);
  EXPECT_TRUE(sweep::save_failure("other", text, {{1, "verified"}}, false, "").has_value());
  unsetenv("PIPECHECK_PROPERTY_SAVE");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()),
            2);
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace pipecheck
