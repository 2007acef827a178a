// A kernel's check with `while COND, bound=N:` in its body: the spec rules
// (symbolic and enumerated) and the race checker over the lowered program
// are exact for runs within the bound, and where some grid point or allowed
// prefetch contents needs more iterations the verdict is unknown naming the
// loop and its bound, never verified.
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

// Line 9 holds the while loop: each grid point searches for the next
// sequence with a non-zero length.
std::string search(const std::string &lens, const std::string &bound) {
  return "kernel w:\n"
         "    param n = 4\n"
         "    grid = (n,)\n"
         "    prefetch lens: i32[n] " +
         lens +
         "\n"
         "    in  x: f32[n * 8, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
         "    out o: f32[n * 8, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
         "    body:\n"
         "        k = program_id(0) + 1\n"
         "        while k < n and lens[k] == 0, bound=" +
         bound +
         ":\n"
         "            k = k + 1\n"
         "        o[...] = x[...] * k\n";
}

spec::File parsed(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("w.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return *r.file;
}

verifier::Verdict check(const std::string &text, bool symbolic = true) {
  const spec::File f = parsed(text);
  if (f.units.empty()) return {};
  verifier::CheckOptions o;
  o.enumerate_max_points = symbolic ? 0 : 4096; // 0: the solver's symbolic rules
  return verifier::check(f.units.at(0), o);
}

} // namespace

TEST(WhileCheck, ASearchWithinItsBoundIsVerifiedSymbolicallyAndByEnumeration) {
  for (bool symbolic : {true, false}) {
    auto v = check(search("= [0, 2, 0, 3]", "n"), symbolic);
    EXPECT_EQ(v.status, Status::verified) << v.reason;
  }
}

TEST(WhileCheck, ABlockCarryStartedFromATensorLocalIsNotAnIntegerAndALongBoundStaysDecided) {
  // `c3 = v1` copies a block value: it is no integer local, so the loop is
  // still decided at each grid point (it used to be taken for an integer,
  // leaving the counter's terms to grow threefold per iteration: unknown).
  const std::string text = "kernel k:\n"
                           "    grid = (4,)\n"
                           "    in  x: f32[32, 128]  block=(8, 128)  index=(i,) -> (i, 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i,) -> (i, 0)\n"
                           "    body:\n"
                           "        v1 = broadcast_to(0.0, (8, 128))\n"
                           "        c2 = 0\n"
                           "        c3 = v1\n"
                           "        while c2 <= program_id(0), bound=64:\n"
                           "            c2 = c2 + 1\n"
                           "            c3 = c3 + x[...]\n"
                           "        o[...] = c3\n";
  for (bool symbolic : {true, false}) {
    auto v = check(text, symbolic);
    EXPECT_EQ(v.status, Status::verified) << v.reason;
  }
}

TEST(WhileCheck, ABlockComputedFromABlockLocalOfTheBodyIsNotAnIntegerAndALongBoundStaysDecided) {
  // `r = iota(...)` then `q = where(r < 0, ...)`: q is a block value too, so
  // the loop is decided at each grid point (q was taken for an integer with
  // no value, the loop unrolled symbolically, and `s`, carried through a
  // `where` of itself, grew threefold per iteration: upstream ragged paged
  // attention's check ran out of memory).
  const std::string text = "kernel k:\n"
                           "    grid = (4,)\n"
                           "    prefetch lens: i32[4] = [3, 1, 0, 2]\n"
                           "    in  x: f32[32, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
                           "    body:\n"
                           "        o[...] = x[...]\n"
                           "        s = 0\n"
                           "        k = 0\n"
                           "        while k < lens[program_id(0)], bound=64:\n"
                           "            r = iota((8, 128), 0)\n"
                           "            q = where(r < 0, -(abs(r) // 2), abs(r) // 2)\n"
                           "            s = where(lens[s % 4] > k, s + 1, s)\n"
                           "            o[...] = where(q < s, o[...], x[...])\n"
                           "            k = k + 1\n";
  for (bool symbolic : {true, false}) {
    auto v = check(text, symbolic);
    EXPECT_EQ(v.status, Status::verified) << v.reason;
  }
}

namespace {

// A copy in a while loop whose page is read through a chain of prefetch
// tables of 64 elements (ragged paged attention's page table read at an
// index that reads its sequence tables): t's subscript, then t, as the spec
// rules' terms, copy the tables' trees into every branch of the next, past
// 65536 terms. Each has a value at every grid point and iteration, and is
// kept as the table of those values. `pt` declares the page table's
// contents: "= [...]", or a range.
std::string table(std::int64_t mul, std::int64_t add, std::int64_t at = -1, std::int64_t value = 0) {
  std::string s = "[";
  for (std::int64_t i = 0; i < 64; ++i)
    s += (i ? ", " : "") + std::to_string(i == at ? value : (i * mul + add) % 64);
  return s + "]";
}

std::string chained(const std::string &pt) {
  return "kernel chain:\n"
         "    grid = (4,)\n"
         "    prefetch a: i32[64] = " +
         table(7, 3) +
         "\n"
         "    prefetch b: i32[64] = " +
         table(13, 5) +
         "\n"
         "    prefetch pt: i32[64] " +
         pt +
         "\n"
         "    in  x: f32[64, 8, 128]  memory_space=any\n"
         "    out o: f32[4, 8, 128]  block=(None, 8, 128)  index=(i, a, b, pt) -> (i, 0, 0)\n"
         "    scratch buf: f32[8, 128]\n"
         "    scratch sem: dma_sem[1]\n"
         "    body:\n"
         "        k = 0\n"
         "        while k < a[program_id(0)] % 4 + 1, bound=8:\n"
         "            t = pt[b[(a[program_id(0) * 4 + k] + k) % 64]]\n"
         "            async_copy(x[t], buf, sem[0]).start()\n"
         "            async_copy(x[t], buf, sem[0]).wait()\n"
         "            o[...] = buf[...]\n"
         "            k = k + 1\n";
}

} // namespace

TEST(WhileCheck, APageReadThroughAChainOfLongTablesIsDecidedAtEveryPointAndIteration) {
  for (bool symbolic : {true, false}) {
    auto v = check(chained("= " + table(5, 1)), symbolic);
    EXPECT_EQ(v.status, Status::verified) << v.reason;
  }
}

TEST(WhileCheck, APageReadThroughAChainOfLongTablesThatLeavesThePoolIsOutOfBoundsAtItsCopy) {
  // Element 40 of pt, which grid point 1 reads at its third iteration.
  for (bool symbolic : {true, false}) {
    auto v = check(chained("= " + table(5, 1, 40, 64)), symbolic);
    EXPECT_EQ(v.status, Status::violation) << v.reason;
    EXPECT_TRUE(has_finding(v, Rule::index_out_of_bounds, 14)) << v.reason;
    ASSERT_FALSE(v.findings.empty());
    EXPECT_NE(v.findings[0].message.find("index 64 is out of bounds"), std::string::npos)
        << v.findings[0].message;
    EXPECT_NE(v.findings[0].message.find("at grid point (1,)"), std::string::npos) << v.findings[0].message;
  }
}

TEST(WhileCheck, APageOfAnOpenTableLeavesTheLoopDecidedAtEachPointAndItsAddressCheckedForEveryTable) {
  // t has no value at a point, and nothing the loop decides needs one: the
  // loop is still decided point by point (it was unrolled symbolically, and
  // k, carried through it, grew past the limit: unknown).
  auto v = check(chained("in [0, 64)"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  v = check(chained("in [0, 65)"));
  EXPECT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_TRUE(has_finding(v, Rule::index_out_of_bounds, 14)) << v.reason;
}

TEST(WhileCheck, ASearchThatNeedsMoreIterationsThanItsBoundIsUnknownNamingTheLoopAndTheBound) {
  // Grid point 0 passes two empty sequences: two iterations, bound 1.
  for (bool symbolic : {true, false}) {
    auto v = check(search("= [0, 0, 0, 3]", "1"), symbolic);
    EXPECT_EQ(v.status, Status::unknown);
    EXPECT_NE(v.reason.find("the while loop at line 9 may run past its bound 1"), std::string::npos)
        << v.reason;
  }
}

TEST(WhileCheck, OpenContentsAreDecidedForEveryAllowedContents) {
  // 16 contents; with bound n every search ends within it.
  auto v = check(search("in [0, 2)", "n"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(WhileCheck, OpenContentsOneOfWhichRunsPastTheBoundAreUnknownNamingThem) {
  auto v = check(search("in [0, 2)", "2"));
  EXPECT_EQ(v.status, Status::unknown);
  EXPECT_NE(v.reason.find("may run past its bound 2"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("lens = ["), std::string::npos) << v.reason;
}

TEST(WhileCheck, AnEffectInTheLoopHappensOnlyAtTheIterationsItsConditionAllows) {
  // The loop runs at grid point 2 only: the scratch is read before anything wrote it
  // at grid points 0 and 1 (line 12), which a loop read as running always
  // would miss.
  const std::string text = "kernel w:\n"
                           "    grid = (4,)\n"
                           "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    scratch acc: f32[8, 128]\n"
                           "    body:\n"
                           "        k = program_id(0)\n"
                           "        while k > 1 and k < 3, bound=4:\n"
                           "            acc[...] = x[...]\n"
                           "            k = k + 1\n"
                           "        o[...] = x[...]\n"
                           "        o[...] += acc[...]\n";
  for (bool symbolic : {true, false}) {
    auto v = check(text, symbolic);
    EXPECT_EQ(v.status, Status::violation) << v.reason;
    EXPECT_TRUE(has_finding(v, Rule::uninitialized_accumulator, 12));
  }
}

TEST(WhileCheck, ARebindingInAWhenHoldsOnlyWhereTheBranchRan) {
  // nb is 5 at grid point 0 only, so only block 0 of o is written.
  const std::string text = "kernel w:\n"
                           "    grid = (4,)\n"
                           "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    body:\n"
                           "        nb = program_id(0)\n"
                           "        when nb == 0:\n"
                           "            nb = 5\n"
                           "        when nb == 5:\n"
                           "            o[...] = x[...]\n";
  for (bool symbolic : {true, false}) {
    auto v = check(text, symbolic);
    EXPECT_EQ(v.status, Status::violation) << v.reason;
    EXPECT_TRUE(has_finding(v, Rule::output_not_covered, 4));
  }
}

TEST(WhileCheck, APipelineWhoseWhileRunsPastItsBoundIsUnknownInTheRaceCheck) {
  auto pipeline = [](const std::string &bound) {
    return "pipeline p:\n"
           "    hbm A: f32[8, 128]\n"
           "    sram X: f32[128]\n"
           "    k = 0\n"
           "    while k < 5, bound=" +
           bound +
           ":\n"
           "        k = k + 1\n"
           "    copy_in_start(A[k], X)\n"
           "    copy_in_wait(X)\n";
  };
  auto ok = check(pipeline("5"));
  EXPECT_EQ(ok.status, Status::verified) << ok.reason;
  auto over = check(pipeline("4"));
  EXPECT_EQ(over.status, Status::unknown);
  EXPECT_NE(over.reason.find("the while loop at line 5 may run past its bound 4"), std::string::npos)
      << over.reason;
}
