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
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return verifier::check(std::get<spec::KernelSpec>(r.file->units.at(0)), verifier::CheckOptions{});
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

TEST(PrefetchCheck, ACopyAddressReadingPastTheTableNamesTheBufferAndThePoisonNotTheElaboratedTree) {
  // The prefetch for the next step reads ids[i + 1], past the table at the
  // last step: the elaborated subscript is a `where` tree over the
  // contents, which the message does not print (the source line shows it).
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
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  ASSERT_TRUE(r.file);
  auto v = verifier::check(std::get<spec::KernelSpec>(r.file->units.at(0)), verifier::CheckOptions{});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  const auto &f = v.findings.at(0);
  EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(f.message.rfind("'x[...]': slice", 0), 0u) << f.message;
  EXPECT_EQ(f.message.find("where("), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("is also what a read outside a prefetch array gives"), std::string::npos)
      << f.message;
}
