// Symbolic and enumerated spec-rule verdicts agree on random small kernels.
// 200 cases each in CI; raise them with RC_PARAMS="max_success=2000". A failure
// prints RapidCheck's seed and reproduce string (RC_PARAMS="reproduce=...").
#include "properties/spec_rules_property.hpp"
#include "sweep/failure_file.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>

namespace pipecheck {
namespace {

struct BoundedCounts {
  BoundedCounts() { setenv("RC_PARAMS", "max_success=200", 0); }
} bounded_counts;

RC_GTEST_PROP(SpecRules, SymbolicAndEnumeratedVerdictsAgreeAndEveryWitnessIsReal, ()) {
  std::string text = *properties::small_kernel_text();
  std::string diff = properties::compare_symbolic_with_enumeration(text);
  RC_PRE(diff != "skip");
  RC_LOG() << text << diff << "\n";
  RC_ASSERT(diff == std::string());
}

RC_GTEST_PROP(SpecRules, SymbolicRulesAgreeWithABruteForceEvaluatorThatHasItsOwnRuleGating, ()) {
  const properties::SmallKernel k = *properties::small_kernel();
  std::string diff = properties::compare_symbolic_with_brute_force(k);
  RC_PRE(diff != "skip");
  RC_LOG() << k.text() << diff << "\n";
  if (!diff.empty()) {
    // PIPECHECK_PROPERTY_SAVE=DIR: the case as a corpus file expecting what
    // the brute-force evaluator says (a revisit's rule is left to a person).
    std::vector<std::pair<int, std::string>> expect;
    for (const auto &r : properties::brute_force_rules(k)) {
      auto at = r.find('@');
      if (at != std::string::npos && r.compare(0, at, "revisit") != 0)
        expect.emplace_back(std::stoi(r.substr(at + 1)), r.substr(0, at));
    }
    sweep::save_failure("spec-rules", k.text(), expect, false,
                        "Property 2 (spec rules vs brute force): " + diff);
  }
  RC_ASSERT(diff == std::string());
}

RC_GTEST_PROP(SpecRules, TheSolversTritonRacesAgreeWithTheBruteForceEvaluator, ()) {
  // The path a Triton kernel past the element replay's limits takes, held
  // to the brute force on small kernels (generated Triton kernels only).
  properties::SmallKernel k = *properties::small_kernel();
  k.triton = true;
  k.semantics.clear();
  std::string diff = properties::compare_triton_races_with_brute_force(k);
  RC_PRE(diff != "skip");
  RC_LOG() << k.text() << diff << "\n";
  RC_ASSERT(diff == std::string());
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

TEST(SpecRules, TheBruteForceEvaluatorSeesAnOffsetInputAndAnUncoveredOutput) {
  properties::SmallKernel k;
  k.grid = {4};
  k.n0 = 4;
  k.x[0] = {properties::IndexTerm::next, 0, 4}; // i + 1: block 4 of 4 at i = 3
  k.o[0] = {properties::IndexTerm::half, 0, 4}; // i // 2: blocks 2 and 3 never written
  k.body = 0;
  EXPECT_EQ(properties::brute_force_rules(k),
            (std::vector<std::string>{"index-out-of-bounds@3", "output-not-covered@4"}));
  EXPECT_EQ(properties::compare_symbolic_with_brute_force(k), "");
  k.alias = true; // an aliased output keeps the input's data
  EXPECT_EQ(properties::brute_force_rules(k), (std::vector<std::string>{"index-out-of-bounds@3"}));
}

} // namespace
} // namespace pipecheck
