// pl.BoundedSlice windows in the spec rules: a ds(start, size) that starts
// before the array, has a negative size, is longer than its bound, or ends
// past the array is index-out-of-bounds with the grid point and the slice;
// the enumerator and the solver agree on each; the undefined tail of a
// window reaching an output is the race check's uninitialized-read.
#include "testing.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"

#include <gtest/gtest.h>

namespace pipecheck {
namespace {

using testing::check_text;
using testing::Marks;
using testing::marks;

std::string
tail(const std::string &index, const std::string &n = "1000", const std::string &bs = "128",
     const std::string &body = "sum(where(iota((bs,), 0) + program_id(0) * bs < n, x[...], 0.0), axis=0)") {
  return R"(kernel k:
    param n = )" +
         n + R"(
    param bs = )" +
         bs + R"(
    grid = (cdiv(n, bs),)
    in  x: f32[n]  block=(BoundedSlice(bs),)  index=(i) -> ()" +
         index + R"(,)
    out o: f32[cdiv(n, bs)]  block=(None,)  index=(i) -> (i,)
    body:
        o[...] = )" +
         body + "\n";
}

// `in x` is line 5 of the kernel above, `out o` line 6.
constexpr int kIn = 5, kOut = 6;

TEST(BoundedSlice, ARaggedTailWithinItsBoundVerifies) {
  auto v = check_text(tail("ds(i * bs, min(bs, n - i * bs))"), "k");
  EXPECT_EQ(v.status, verifier::Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(BoundedSlice, EachWayOutOfItsBoundsNamesTheGridPointAndTheSlice) {
  struct Case {
    std::string index, message;
  };
  const Case cases[] = {
      {"ds(i * bs, bs)",
       "grid point (7,) to window start (896,): ds(896, 128) along dim 0 (BoundedSlice(128)) "
       "takes elements 896:1024, past the end of the dim (1000 elements)"},
      {"ds(i * bs, min(bs, n - i * bs) + 1)", "grid point (0,) to window start (0,): ds(0, 129) along dim 0 "
                                              "(BoundedSlice(128)) is longer than its bound"},
      {"ds(i * bs, i - 1)",
       "grid point (0,) to window start (0,): ds(0, -1) along dim 0 (BoundedSlice(128)) has "
       "a negative size"},
      {"ds(i * bs - 1, 1)",
       "grid point (0,) to window start (-1,): ds(-1, 1) along dim 0 (BoundedSlice(128)) "
       "starts before the array"},
  };
  for (const auto &c : cases) {
    auto v = check_text(tail(c.index), "k");
    ASSERT_EQ(marks(v), (Marks{{verifier::Rule::index_out_of_bounds, kIn}})) << c.index;
    EXPECT_NE(v.findings[0].message.find(c.message), std::string::npos) << v.findings[0].message;
  }
}

TEST(BoundedSlice, TheEnumeratorAndTheSolverAgree) {
  for (const char *index :
       {"ds(i * bs, min(bs, n - i * bs))", "ds(i * bs, bs)", "ds(i * bs, min(bs, n - i * bs) + 1)",
        "ds(i * bs, i - 1)", "ds(i * bs - 1, 1)", "ds(i, min(bs, n - i * bs))"}) {
    testing::expect_enumerator_agrees(tail(index), "k", true);
  }
}

TEST(BoundedSlice, APastTheEndSliceOnAGridTooLargeToEnumerateIsFoundBySolver) {
  // 5002 grid points: past the enumerator's 4096.
  auto v = check_text(tail("ds(i * bs, bs)", "40010", "8"), "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::index_out_of_bounds, kIn}}));
  EXPECT_NE(v.findings[0].message.find("grid point (5001,) to window start (40008,): ds(40008, 8)"),
            std::string::npos)
      << v.findings[0].message;
  auto ok = check_text(tail("ds(i * bs, min(bs, n - i * bs))", "40010", "8"), "k");
  EXPECT_EQ(ok.status, verifier::Status::verified)
      << (ok.findings.empty() ? ok.reason : ok.findings[0].message);
}

TEST(BoundedSlice, AMaskOnTheSizeWrittenWithMinKeepsTheTailOut) {
  // min of two scalars is a concrete mask bound, as minimum is.
  auto v =
      check_text(tail("ds(i * bs, min(bs, n - i * bs))", "1000", "128",
                      "sum(where(iota((bs,), 0) < min(bs, n - program_id(0) * bs), x[...], 0.0), axis=0)"),
                 "k");
  EXPECT_EQ(v.status, verifier::Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(BoundedSlice, ReadingPastTheSizeReachesTheOutputAsUndefinedData) {
  auto v = check_text(tail("ds(i * bs, min(bs, n - i * bs))", "1000", "128", "sum(x[...], axis=0)"), "k");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::uninitialized_read, kOut}}));
}

// An output with a BoundedSlice dim: chunk i of x scaled into the same
// slice of o; `out o` is line 7.
std::string scaled(const std::string &index, const std::string &semantics = "parallel",
                   const std::string &store = "o[...] = x[...] * 2.0") {
  return R"(kernel k:
    param n = 1000
    param bs = 128
    grid = (cdiv(n, bs),)
    dimension_semantics = ()" +
         semantics + R"(,)
    in  x: f32[n]  block=(BoundedSlice(bs),)  index=(i) -> (ds(i * bs, min(bs, n - i * bs)),)
    out o: f32[n]  block=(BoundedSlice(bs),)  index=(i) -> ()" +
         index + R"(,)
    body:
        )" +
         store + "\n";
}

constexpr int kSlicedOut = 7;

TEST(BoundedSliceOutput, ARaggedTailWrittenBackOnlyWhereItsSizeReachesVerifies) {
  // The last window holds 104 of its 128 elements: its tail, undefined in
  // x's window too, is not written back.
  auto v = check_text(scaled("ds(i * bs, min(bs, n - i * bs))"), "k");
  EXPECT_EQ(v.status, verifier::Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(BoundedSliceOutput, ASizePastTheBoundOrASlicePastTheEndIsIndexOutOfBoundsAtTheOutput) {
  struct Case {
    std::string index, message;
  };
  const Case cases[] = {
      {"ds(i * bs, bs)",
       "ds(896, 128) along dim 0 (BoundedSlice(128)) takes elements 896:1024, past the end"},
      {"ds(i * bs, min(bs, n - i * bs) + 1)",
       "ds(0, 129) along dim 0 (BoundedSlice(128)) is longer than its bound"},
  };
  for (const auto &c : cases) {
    auto v = check_text(scaled(c.index), "k");
    ASSERT_TRUE(marks(v).count({verifier::Rule::index_out_of_bounds, kSlicedOut})) << c.index;
    bool named = false;
    for (const auto &f : v.findings)
      named = named || (f.rule == verifier::Rule::index_out_of_bounds &&
                        f.message.find(c.message) != std::string::npos);
    EXPECT_TRUE(named) << c.index << ": " << v.findings[0].message;
  }
}

TEST(BoundedSliceOutput, WindowsShortOfTheNextStartLeaveTheGapUncoveredPerElement) {
  // Each window writes back 120 of the 128 elements its step is for.
  auto v = check_text(scaled("ds(i * bs, min(bs - 8, n - i * bs))"), "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, kSlicedOut}}));
  EXPECT_NE(
      v.findings[0].message.find("element (120,) of output 'o' is never written: no grid point's window "
                                 "reaches it"),
      std::string::npos)
      << v.findings[0].message;
}

TEST(BoundedSliceOutput, TwoParallelStepsWritingOverlappingSlicesConflict) {
  // Window i starts 8 elements early (from i = 1 on): windows 0 and 1 share 120:128.
  const std::string index = "ds(max(i * bs - 8, 0), min(bs, n - max(i * bs - 8, 0)))";
  auto v = check_text(scaled(index), "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::parallel_write_conflict, kSlicedOut}}));
  EXPECT_NE(
      v.findings[0].message.find("grid points (0,) and (1,) differ along parallel axis 0 and both write "
                                 "'o'[120:128] through overlapping windows"),
      std::string::npos)
      << v.findings[0].message;
  // On one core the later write-back wins: no conflict.
  auto a = check_text(scaled(index, "arbitrary"), "k");
  EXPECT_FALSE(marks(a).count({verifier::Rule::parallel_write_conflict, kSlicedOut}));
}

TEST(BoundedSliceOutput, AWriteBackOfElementsNoStoreWroteLeavesThemUndefined) {
  // Windows overlap by 8 on one core, and each step stores only from its
  // 8th element on: window 1 (120:248) writes back 120:128, which window 0
  // stored, from the part of its slot no store wrote.
  auto v = check_text(scaled("ds(max(i * bs - 8, 0), min(bs, n - max(i * bs - 8, 0)))", "arbitrary",
                             "o[8:bs] = x[8:bs] * 2.0"),
                      "k");
  bool found = false;
  for (const auto &f : v.findings)
    if (f.rule == verifier::Rule::output_not_covered) {
      found = true;
      EXPECT_NE(f.message.find("element (0,) of output 'o' is never written: the window written back after "
                               "grid point (0,) holds it, but no store of that visit wrote it"),
                std::string::npos)
          << f.message;
    }
  EXPECT_TRUE(found);
}

TEST(BoundedSliceOutput, TheEnumeratorAndTheSolversPathAgree) {
  for (const char *index :
       {"ds(i * bs, min(bs, n - i * bs))", "ds(i * bs, bs)", "ds(i * bs, min(bs - 8, n - i * bs))",
        "ds(max(i * bs - 8, 0), min(bs, n - max(i * bs - 8, 0)))"})
    testing::expect_enumerator_agrees(scaled(index), "k", false);
}

TEST(BoundedSliceOutput, APerElementCheckPastItsLimitIsUnknownWithTheReason) {
  // 5000 grid points with a parallel axis: past the 4096 the pairwise check evaluates.
  std::string text = scaled("ds(i * bs, min(bs, n - i * bs))");
  text.replace(text.find("param n = 1000"), 14, "param n = 640000");
  auto v = check_text(text, "k");
  EXPECT_EQ(v.status, verifier::Status::unknown);
  EXPECT_NE(v.reason.find("has BoundedSlice dims: its coverage and parallel writes are decided by evaluating "
                          "every grid point"),
            std::string::npos)
      << v.reason;
}

// An output window's start stays 0 while its size moves with i; `out o`
// is line 4.
std::string same_start(const std::string &sizes, const std::string &grid, const std::string &body) {
  return R"(kernel k:
    grid = ()" +
         grid + R"(,)
    in  x: f32[128]  block=(128,)  index=(i) -> (0,)
    out o: f32[128]  block=(BoundedSlice(128),)  index=(i) -> (ds(0, )" +
         sizes + R"(),)
    body:
)" + body;
}

// What both rule engines find on a kernel (the check's own first stage).
std::set<verifier::Rule> rule_findings(const std::string &text) {
  const spec::KernelSpec k = testing::kernel(testing::parse_text(text), "k");
  auto m = verifier::rules::build_model(k, {}, std::nullopt);
  EXPECT_TRUE(m.model);
  std::set<verifier::Rule> out;
  if (!m.model) return out;
  for (const auto &r :
       {verifier::rules::check_enumerated(*m.model), verifier::rules::check_symbolic(*m.model, 10000)}) {
    EXPECT_TRUE(r.unknown.empty()) << r.unknown[0];
    for (const auto &f : r.findings)
      out.insert(f.rule);
  }
  return out;
}

TEST(BoundedSliceOutput, AWindowWithTheSameStartButAnotherSizeIsAnotherWindowThatStartsUndefined) {
  // Step 1's window (0:128) is not step 0's (0:64): Pallas writes step 0's
  // back and gives step 1 a slot nothing copied in, so its += reads
  // undefined data.
  const std::string body = R"(        when program_id(0) == 0:
            o[...] = x[...]
        when program_id(0) == 1:
            o[...] += x[...]
)";
  EXPECT_TRUE(
      rule_findings(same_start("64 * (i + 1)", "2", body)).count(verifier::Rule::uninitialized_accumulator));
  // The same with one size throughout is one window accumulated in place.
  EXPECT_FALSE(
      rule_findings(same_start("128 + 0 * i", "2", body)).count(verifier::Rule::uninitialized_accumulator));
  testing::expect_enumerator_agrees(same_start("64 * (i + 1)", "2", body), "k", true);
}

TEST(BoundedSliceOutput, ASizeThatComesBackAfterAnotherIsANonConsecutiveRevisit) {
  // Windows 0:64, 0:128, 0:64: the third visits the first's window again
  // after another in between.
  const std::string body = "        o[...] = x[...]\n";
  EXPECT_TRUE(
      rule_findings(same_start("64 + 64 * (i % 2)", "3", body)).count(verifier::Rule::output_revisit));
  EXPECT_FALSE(
      rule_findings(same_start("64 + 64 * (i // 2)", "3", body)).count(verifier::Rule::output_revisit));
  testing::expect_enumerator_agrees(same_start("64 + 64 * (i % 2)", "3", body), "k", true);
}

} // namespace
} // namespace pipecheck
