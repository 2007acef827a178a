// The all-N race verdict agrees with exhaustive concrete checking on random
// small pipelines. Counts are bounded for CI; raise with RC_PARAMS="max_success=2000".
#include "properties/races_property.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>

namespace pipecheck {
namespace {

struct BoundedRaceCounts {
  BoundedRaceCounts() { setenv("RC_PARAMS", "max_success=200", 0); }
} bounded_race_counts;

RC_GTEST_PROP(RaceChecker, AllNVerdictAgreesWithExhaustiveCheckingAndWitnessesReproduce, ()) {
  std::string text = *properties::small_pipeline_text();
  std::string diff = properties::compare_all_n_with_exhaustive(text);
  RC_PRE(diff != "skip");
  RC_TAG(properties::all_n_status(text));
  RC_LOG() << text;
  RC_ASSERT(diff == std::string());
}

TEST(RaceChecker, TheComparisonAgreesOnAKnownRaceAndAKnownProof) {
  const char *racy = "pipeline p:\n    param N >= 1\n    hbm  A: f32[N + 8, 8]\n"
                     "    sram X[1]: f32[8]\n    for i in range(N):\n"
                     "        copy_in_start(A[i], X[0])\n        X[0] = X[0] + 1\n"
                     "        copy_in_wait(X[0])\n";
  EXPECT_EQ(properties::compare_all_n_with_exhaustive(racy), "");
  const char *clean = "pipeline p:\n    param N >= 1\n    hbm  A: f32[N + 8, 8]\n"
                      "    sram X[1]: f32[8]\n    for i in range(N):\n"
                      "        copy_in_start(A[i], X[0])\n        copy_in_wait(X[0])\n"
                      "        X[0] = X[0] + 1\n        copy_out_start(X[0], A[i])\n"
                      "        copy_out_wait(X[0])\n";
  EXPECT_EQ(properties::compare_all_n_with_exhaustive(clean), "");
  EXPECT_EQ(properties::compare_all_n_with_exhaustive("pipeline"), "skip");
}

} // namespace
} // namespace pipecheck
