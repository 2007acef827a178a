// Scalar prefetch in a kernel's check (verifier/kernel.cpp,
// verifier/rules/symbolic.cpp): rules hold for every allowed contents, a
// witness names the contents, and the race verdict is never `verified`
// without a proof for every contents.
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck;
using verifier::Status;

namespace {

verifier::Verdict check_text(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return verifier::check(std::get<spec::KernelSpec>(r.file->units.at(0)), verifier::CheckOptions{});
}

verifier::Verdict check(const std::string &decl, const std::string &index = "(i, ids) -> (ids[i], 0)",
                        const std::string &body = "o[...] = x[...]") {
  const std::string text = "kernel g:\n"
                           "    grid = (4,)\n"
                           "    " +
                           decl +
                           "\n"
                           "    in  x: f32[64, 128]  block=(8, 128)  index=" +
                           index +
                           "\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)\n"
                           "    body:\n"
                           "        " +
                           body + "\n";
  return check_text(text);
}

} // namespace

TEST(PrefetchCheck, AnIdTheRangeAllowsPastTheLastBlockIsFoundWithItsContents) {
  auto v = check("prefetch ids: i32[4] in [0, 9)");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(v.findings[0].loc.line, 4);
  EXPECT_NE(v.findings[0].message.find("prefetch contents: ids = [8, 0, 0, 0]"), std::string::npos)
      << v.findings[0].message;
  const auto *ids = v.findings[0].witness.get<std::vector<std::int64_t>>("ids");
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<std::int64_t>{8, 0, 0, 0}));
}

TEST(PrefetchCheck, TheConstraintsTogetherAreWhatTheRulesAssume) {
  // Alone, `in [0, 9)` allows 8; nondecreasing with sum == 4 over 4 elements does not.
  auto v = check("prefetch ids: i32[4] in [0, 9) nondecreasing sum == 4");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(PrefetchCheck, ARangeInsideTheArrayIsVerifiedOnEveryEqualityPattern) {
  auto v = check("prefetch ids: i32[4] in [0, 8)");
  ASSERT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("15 patterns of equal prefetch elements"), std::string::npos) << v.reason;
}

TEST(PrefetchCheck, GivenContentsAreConstants) {
  EXPECT_EQ(check("prefetch ids: i32[4] = [0, 0, 7, 7]").status, Status::verified);
  auto v = check("prefetch ids: i32[4] = [0, 0, 1, 2]", "(i, ids) -> (ids[i + 1], 0)");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_NE(v.findings.at(0).message.find("is also what a read outside a prefetch array gives"),
            std::string::npos)
      << v.findings.at(0).message;
}

TEST(PrefetchCheck, RacesThatDependOnValuesBeyondEqualityAreUnknownWhenTheContentsAreMany) {
  // The body reads the contents, so the lowered program may depend on more
  // than which elements are equal; 8^4 contents are too many to run each.
  auto v = check("prefetch ids: i32[4] in [0, 8)", "(i, ids) -> (ids[i], 0)",
                 "o[...] = x[...] + ids[program_id(0)]");
  ASSERT_EQ(v.status, Status::unknown) << v.reason;
  EXPECT_NE(v.reason.find("depends on the prefetch contents"), std::string::npos) << v.reason;
  // Few enough contents: each is checked.
  auto few = check("prefetch ids: i32[4] in [0, 2)", "(i, ids) -> (ids[i], 0)",
                   "o[...] = x[...] + ids[program_id(0)]");
  EXPECT_EQ(few.status, Status::verified) << few.reason;
  EXPECT_NE(few.reason.find("each of the 16 prefetch contents"), std::string::npos) << few.reason;
}

TEST(PrefetchCheck, ALoopBoundReadFromAPrefetchArrayIsCheckedPerContentsUpToTheBound) {
  const std::string loop = "o[...] = x[...]\n        for t in range(ids[program_id(0)]):\n"
                           "            o[t * 4:t * 4 + 4, :] = x[t * 4:t * 4 + 4, :]";
  // At most 3 trips of 4 rows fit an 8-row block only up to 2: found, with the contents.
  auto v = check("prefetch ids: i32[4] in [0, 4)", "(i, ids) -> (i, 0)", loop);
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(v.findings.at(0).rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(v.findings.at(0).message.find("prefetch contents: ids = [0, 0, 0, 3]"), std::string::npos)
      << v.findings.at(0).message;
  auto ok = check("prefetch ids: i32[4] in [0, 3)", "(i, ids) -> (i, 0)", loop);
  EXPECT_EQ(ok.status, Status::verified) << ok.reason;
  EXPECT_NE(ok.reason.find("each of the 81 prefetch contents"), std::string::npos) << ok.reason;
  // Past 256 contents it is unknown, never verified.
  EXPECT_EQ(check("prefetch ids: i32[4] in [0, 5)", "(i, ids) -> (i, 0)", loop).status, Status::unknown);
}

TEST(PrefetchCheck, ACopyAddressReadingPastTheTableIsReportedAtTheReadAsWrittenNotTheElaboratedTree) {
  // The prefetch for the next step reads ids[i + 1], past the table at the
  // last step: the read itself is out of bounds, named as written (its
  // elaborated form is a `where` tree over the contents, not printed).
  const std::string text = R"(kernel g:
    grid = (4,)
    prefetch ids: i32[4] = [3, 0, 5, 1]
    in  x: f32[48, 128]  memory_space=any
    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)
    scratch buf: f32[2, 8, 128]
    scratch sem: dma_sem[2]
    body:
        when program_id(0) == 0:
            async_copy(x[ds(ids[0] * 8, 8), :], buf[0, :, :], sem[0]).start()
        async_copy(x[ds(ids[program_id(0) + 1] * 8, 8), :], buf[(program_id(0) + 1) % 2, :, :], sem[(program_id(0) + 1) % 2]).start()
        async_copy(x[0:8, :], buf[program_id(0) % 2, :, :], sem[program_id(0) % 2]).wait()
        o[...] = buf[program_id(0) % 2, :, :]
)";
  auto v = check_text(text);
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  const auto &f = v.findings.at(0);
  EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(
      f.message.rfind("the prefetch read 'ids[program_id(0) + 1]' at grid point (3,): its subscript 0 is 4, "
                      "outside 0:4",
                      0),
      0u)
      << f.message;
  EXPECT_EQ(f.message.find("where("), std::string::npos) << f.message;
  EXPECT_EQ(f.loc.line, 11) << "the read's line";
  EXPECT_EQ(f.loc.col, 25) << "the read's column";
}

namespace {

// A segment sum over grid (t,) that stores at each segment's end: `last` reads
// the next step's segment id, past the table at the last step unless guarded.
std::string segment_end_kernel(const std::string &prefetch, const std::string &last) {
  return "kernel seg_sum:\n"
         "    grid = (4,)\n"
         "    " +
         prefetch +
         "\n"
         "    in  x: f32[32, 128]  block=(8, 128)  index=(t, seg) -> (t, 0)\n"
         "    out o: f32[16, 128]  block=(8, 128)  index=(t, seg) -> (seg[t], 0)\n"
         "    scratch acc: f32[8, 128]\n"
         "    body:\n"
         "        when program_id(0) == 0 or seg[program_id(0)] != seg[max(program_id(0) - 1, 0)]:\n"
         "            acc[...] = zeros\n"
         "        acc[...] += x[...]\n"
         "        when " +
         last +
         ":\n"
         "            o[...] = acc[...]\n";
}

} // namespace

TEST(PrefetchReads, ABodyReadPastTheTableIsIndexOutOfBoundsAtTheStepThatMakesIt) {
  auto v = check_text(segment_end_kernel("prefetch seg: i32[4] = [0, 0, 1, 1]",
                                         "seg[program_id(0)] != seg[program_id(0) + 1]"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  const auto &f = v.findings.at(0);
  EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(
      f.message.rfind("the prefetch read 'seg[program_id(0) + 1]' at grid point (3,): its subscript 0 is "
                      "4, outside 0:4",
                      0),
      0u)
      << f.message;
}

TEST(PrefetchReads, TheSameReadUnderAGuardThatExcludesTheLastStepIsVerified) {
  auto v = check_text(
      segment_end_kernel("prefetch seg: i32[4] = [0, 0, 1, 1]",
                         "program_id(0) == 3 or seg[min(program_id(0) + 1, 3)] != seg[program_id(0)]"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(PrefetchReads, AReadWhoseValueASelectDiscardsIsStillAnAccessPastTheTable) {
  // where(t == 0, -1, seg[t - 1]) computes both branches, as jnp.where does.
  auto v = check_text(
      segment_end_kernel("prefetch seg: i32[4] = [0, 0, 1, 1]",
                         "program_id(0) == 3 or seg[min(program_id(0) + 1, 3)] != seg[program_id(0)] or "
                         "where(program_id(0) == 0, -1, seg[program_id(0) - 1]) > 5"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u) << v.findings.at(1).message;
  EXPECT_NE(v.findings.at(0).message.find("its subscript 0 is -1, outside 0:4"), std::string::npos)
      << v.findings.at(0).message;
}

std::string last_page_kernel(const std::string &last) {
  return "kernel pages:\n"
         "    grid = (2, 3)\n"
         "    prefetch pt: i32[2, 3] = [2, 0, -1, 1, 3, 3]\n"
         "    in  x: f32[32, 128]  block=(8, 128)  index=(b, p, pt) -> (max(pt[b, p], 0), 0)\n"
         "    out o: f32[16, 128]  block=(8, 128)  index=(b, p, pt) -> (b, 0)\n"
         "    scratch acc: f32[8, 128]\n"
         "    body:\n"
         "        when program_id(1) == 0:\n"
         "            acc[...] = zeros\n"
         "        acc[...] += x[...]\n"
         "        when " +
         last +
         ":\n"
         "            o[...] = acc[...]\n";
}

TEST(PrefetchReads, ARankTwoReadNamesTheDimThatLeavesTheTable) {
  auto v = check_text(last_page_kernel("pt[program_id(0), program_id(1) + 1] < 0"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_NE(v.findings.at(0).message.find("'pt[program_id(0), program_id(1) + 1]' at grid point (0, 2): its "
                                          "subscript 1 is 3, outside 0:3"),
            std::string::npos)
      << v.findings.at(0).message;
}

TEST(PrefetchReads, TheRightSideOfOrIsReadOnlyWhereTheLeftSideDoesNotHold) {
  // `.pk`'s `and` and `or` short-circuit, as Python's: at the last page the
  // next entry is never read.
  auto v = check_text(last_page_kernel("program_id(1) == 2 or pt[program_id(0), program_id(1) + 1] < 0"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(PrefetchReads, AnIndexMapReadPastTheTableIsFoundThoughAClampHidesItsBlock) {
  // max(ids[i + 1], 0) maps the poison of the read past the table to block 0.
  auto v = check("prefetch ids: i32[4] = [3, 0, 5, 1]", "(i, ids) -> (max(ids[i + 1], 0), 0)");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(v.findings.at(0).rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(v.findings.at(0).message.find("'ids[i + 1]' at grid point (3,): its subscript 0 is 4"),
            std::string::npos)
      << v.findings.at(0).message;
}

TEST(PrefetchReads, OpenContentsAreDecidedForEveryAllowedTableWithTheWitnessNamed) {
  // ids[ids[i]] stays inside the table only where every id is below 4.
  auto bad = check("prefetch ids: i32[4] in [0, 8)", "(i, ids) -> (ids[ids[i]], 0)");
  ASSERT_EQ(bad.status, Status::violation) << bad.reason;
  const auto &f = bad.findings.at(0);
  EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(f.message.find("prefetch contents: ids = ["), std::string::npos) << f.message;
  auto good = check("prefetch ids: i32[4] in [0, 4)", "(i, ids) -> (ids[ids[i]], 0)");
  EXPECT_NE(good.status, Status::violation) << good.findings.at(0).message;
}

namespace {
// x's block a[b[i]] on a grid of n points (both tables a permutation).
std::string nested_reads(int n) {
  std::string a, b;
  for (int i = 0; i < n; ++i) {
    a += (i ? ", " : "") + std::to_string((i * 7 + 3) % n);
    b += (i ? ", " : "") + std::to_string((n - 1 - i));
  }
  return "kernel nested:\n    grid = (" + std::to_string(n) + ",)\n    prefetch a: i32[" + std::to_string(n) +
         "] = [" + a + "]\n    prefetch b: i32[" + std::to_string(n) + "] = [" + b + "]\n    in  x: f32[" +
         std::to_string(8 * n) + ", 128]  block=(8, 128)  index=(i, a, b) -> (a[b[i]], 0)\n    out o: f32[" +
         std::to_string(8 * n) +
         ", 128]  block=(8, 128)  index=(i, a, b) -> (i, 0)\n    body:\n        o[...] = x[...]\n";
}
} // namespace

TEST(PrefetchReads, AReadIndexedByAnotherReadIsCheckedUntilItsElaborationGrowsPastItsLimitThenUnknown) {
  EXPECT_EQ(check_text(nested_reads(64)).status, Status::verified);
  // 1024 x (a 1024-entry tree as its subscript): past spec::kMaxElaboratedNodes,
  // an unknown that says why, not gigabytes and a crash.
  auto v = check_text(nested_reads(1024));
  EXPECT_EQ(v.status, Status::unknown);
  EXPECT_NE(v.reason.find("a read of prefetch array 'a' at line 5 whose subscript"), std::string::npos)
      << v.reason;
  EXPECT_NE(v.reason.find("read the inner value into a table of its own"), std::string::npos) << v.reason;
}

TEST(PrefetchReads, ALoweredSliceOutOfBoundsQuotesTheRefAsTheKernelWritesItNotItsElaboration) {
  // lens[2] = 24 makes ds(17, 8) past x's 24 rows: the message quotes the
  // source's ref (not a where tree over lens), and no read of lens is out of
  // range, so nothing says what one gives.
  auto v = check_text(R"(kernel tail:
    grid = (3,)
    target = tpu_v5e
    prefetch lens: i32[3] in [20, 25)
    in  x: f32[3, 24, 128]  block=(None, 24, 128)  index=(b, lens) -> (b, 0, 0)
    out o: f32[3, 8, 128]  block=(None, 8, 128)  index=(b, lens) -> (b, 0, 0)
    body:
        o[...] = x[ds(lens[program_id(0)] - 8 + 1, 8), :]
)");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_FALSE(v.findings.empty());
  const auto &f = v.findings[0];
  EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(f.message.rfind("'x[ds(lens[program_id(0)] - 8 + 1, 8), :]': slice ", 0), 0u) << f.message;
  EXPECT_EQ(f.message.find("-2147483648"), std::string::npos) << f.message;
}
