// Symbolic and enumerated spec-rule verdicts agree on random small kernels.
// Counts are bounded for CI; raise them with RC_PARAMS="max_success=2000".
#include "properties/spec_rules_property.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>

namespace pipecheck {
namespace {

struct BoundedCounts {
  BoundedCounts() { setenv("RC_PARAMS", "max_success=60", 0); }
} bounded_counts;

RC_GTEST_PROP(SpecRules, SymbolicAndEnumeratedVerdictsAgreeAndEveryWitnessIsReal, ()) {
  std::string text = *properties::small_kernel_text();
  std::string diff = properties::compare_symbolic_with_enumeration(text);
  RC_PRE(diff != "skip");
  RC_ASSERT(diff == std::string());
  if (!diff.empty()) RC_LOG() << text;
}

TEST(SpecRules, TheComparisonFailsWhenTheVerdictsDiffer) {
  // A kernel that the property knows to be buggy yields findings on both sides;
  // the comparison itself must report agreement, not vacuously pass on "skip".
  const char *src = "kernel k:\n    grid = (4,)\n"
                    "    in  x: f32[32, 8]  block=(8, 8)  index=(i) -> (i + 1, 0)\n"
                    "    out o: f32[32, 8]  block=(8, 8)  index=(i) -> (i, 0)\n"
                    "    body:\n        o[...] = x[...]\n";
  EXPECT_EQ(properties::compare_symbolic_with_enumeration(src), "");
  EXPECT_EQ(properties::compare_symbolic_with_enumeration("kernel broken"), "skip");
}

} // namespace
} // namespace pipecheck
