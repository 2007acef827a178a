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

} // namespace
} // namespace pipecheck
