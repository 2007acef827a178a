// pl.Element windows on an output: coverage is decided per array element
// and parallel writes by window overlap (windows placed by element offset
// may overlap or leave gaps), the same by enumeration and by the solver's
// path; past the evaluation limits the answer is unknown with the reason.
#include "testing.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"

#include <gtest/gtest.h>

namespace pipecheck {
namespace {

using testing::check_text;
using testing::Marks;
using testing::marks;

// `out o` is line 6.
std::string scale(const std::string &index, const std::string &store = "o[...] = x[...] * 2.0",
                  const std::string &semantics = "parallel", const std::string &grid = "8",
                  const std::string &n = "1000") {
  return R"(kernel k:
    grid = ()" +
         grid + R"(,)
    dimension_semantics = ()" +
         semantics + R"(,)
    in  x: f32[)" +
         n + R"(]  block=(Element(128, (0, 24)),)  index=(i) -> (i * 128,)
    scratch unused: f32[8]
    out o: f32[)" +
         n + R"(]  block=(Element(128, (0, 24)),)  index=(i) -> ()" + index + R"(,)
    body:
        )" +
         store + "\n";
}

constexpr int kOut = 6;

TEST(ElementOutput, WindowsThatTileTheArrayWithHighPaddingVerify) {
  auto v = check_text(scale("i * 128"), "k");
  EXPECT_EQ(v.status, verifier::Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(ElementOutput, AGapIsNotCoveredAndAnOverlapOnAParallelAxisConflicts) {
  auto v = check_text(scale("i * 120"), "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, kOut},
                             {verifier::Rule::parallel_write_conflict, kOut}}));
  for (const auto &f : v.findings) {
    if (f.rule == verifier::Rule::output_not_covered)
      EXPECT_NE(f.message.find("element (968,) of output 'o' is never written"), std::string::npos)
          << f.message;
    else
      EXPECT_NE(f.message.find(
                    "grid points (0,) and (1,) differ along parallel axis 0 and both write 'o'[120:128]"),
                std::string::npos)
          << f.message;
  }
}

TEST(ElementOutput, AnOverlapOnAnArbitraryAxisIsNoParallelConflictButItsWriteBacksRace) {
  // Window 7 (872:1000) overlaps window 6 (768:896): one core, but window
  // 6's write-back may still be in flight when window 7's starts.
  auto v = check_text(scale("min(i * 128, 872)", "o[...] = x[...] * 2.0", "arbitrary"), "k");
  const auto m = marks(v);
  EXPECT_FALSE(m.count({verifier::Rule::parallel_write_conflict, kOut}));
  EXPECT_TRUE(m.count({verifier::Rule::slot_race, kOut}));
}

TEST(ElementOutput, AStoreOfHalfOfEachWindowLeavesTheOtherHalfUncovered) {
  auto v = check_text(scale("i * 128", "o[0:64] = x[0:64] * 2.0"), "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, kOut}}));
  EXPECT_NE(v.findings[0].message.find("element (64,)"), std::string::npos) << v.findings[0].message;
}

TEST(ElementOutput, TheEnumeratorAndTheSolversPathAgree) {
  for (const char *index : {"i * 128", "i * 120", "min(i * 128, 872)"}) {
    testing::expect_enumerator_agrees(scale(index), "k", false);
  }
}

TEST(ElementOutput, APairwiseCheckPastItsLimitIsUnknownWithTheReason) {
  auto v = check_text(scale("i * 128", "o[...] = x[...] * 2.0", "parallel", "5000", "640000"), "k");
  EXPECT_EQ(v.status, verifier::Status::unknown);
  EXPECT_NE(
      v.reason.find("has Element dims: its coverage and parallel writes are decided by evaluating every "
                    "grid point"),
      std::string::npos)
      << v.reason;
}

} // namespace
} // namespace pipecheck
