// A kernel's check with `S[...] = undefined`: what it leaves undefined is
// never written for the race checker over the lowered program, so a read of
// it before a store of this entry is an uninitialized-read naming the
// statement, whatever an earlier grid step wrote; a read of what a store of
// this entry wrote, or of the part it left alone, verifies.
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck;
using verifier::Rule;
using verifier::Status;

namespace {

verifier::Verdict check(const std::string &text, bool symbolic = true) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("u.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  verifier::CheckOptions o;
  o.enumerate_max_points = symbolic ? 0 : 4096; // 0: the solver's symbolic rules
  return verifier::check(r.file->units.at(0), o);
}

std::string dump(const verifier::Verdict &v) {
  std::string s = v.reason;
  for (const auto &f : v.findings)
    s += "\n" + std::string(verifier::to_string(f.rule)) + " at line " + std::to_string(f.loc.line) + ": " +
         f.message;
  return s;
}

bool reads_uninitialized_at(const verifier::Verdict &v, int line) {
  for (const auto &f : v.findings)
    if (f.rule == Rule::uninitialized_read && f.loc.line == line) return true;
  return false;
}

// Line 7 makes tmp undefined; line 9 writes it (at `when`); line 10 reads it.
std::string scoped(const std::string &when, const std::string &discard = "tmp[...] = undefined") {
  return "kernel s:\n"
         "    grid = (4,)\n"
         "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    scratch tmp: f32[8, 128]\n"
         "    body:\n"
         "        " +
         discard +
         "\n"
         "        when " +
         when +
         ":\n"
         "            tmp[...] = x[...]\n"
         "        o[...] = tmp[...] + x[...]\n";
}

} // namespace

TEST(UndefinedCheck, AScratchWrittenInEveryEntryBeforeItsReadIsVerified) {
  for (bool symbolic : {true, false}) {
    auto v = check(scoped("program_id(0) >= 0"), symbolic);
    EXPECT_EQ(v.status, Status::verified) << v.reason;
  }
}

TEST(UndefinedCheck, AReadOfWhatOnlyAnEarlierEntryWroteIsAnUninitializedReadNamingTheDiscard) {
  for (bool symbolic : {true, false}) {
    auto v = check(scoped("program_id(0) == 0"), symbolic);
    EXPECT_EQ(v.status, Status::violation);
    bool found = false;
    for (const auto &f : v.findings)
      if (f.rule == Rule::uninitialized_read && f.loc.line == 10) {
        found = true;
        EXPECT_NE(f.message.find("'tmp[...] = undefined' at line 7 left undefined"), std::string::npos)
            << f.message;
      }
    EXPECT_TRUE(found) << dump(v);
  }
}

TEST(UndefinedCheck, AReadBeforeAnyWriteAtTheFirstStepIsAnUninitializedReadNotAMissingAccumulatorInit) {
  // No reduction axis, and no first-step init would help: the scope's
  // buffer is undefined at every entry.
  for (bool symbolic : {true, false}) {
    auto v = check(scoped("program_id(0) < 0"), symbolic);
    ASSERT_EQ(v.status, Status::violation) << v.reason;
    EXPECT_TRUE(reads_uninitialized_at(v, 10)) << dump(v);
    for (const auto &f : v.findings) {
      EXPECT_NE(f.rule, Rule::uninitialized_accumulator) << dump(v);
      if (f.rule == Rule::uninitialized_read && f.loc.line == 10 &&
          f.message.find("at grid point (0,)") != std::string::npos) {
        EXPECT_NE(f.message.find("undefined at every entry of its scope"), std::string::npos) << f.message;
      }
    }
  }
}

TEST(UndefinedCheck, WithoutTheDiscardTheScratchKeepsWhatStepZeroWroteAndIsDefined) {
  // scratch_shapes buffers live across grid steps: no uninitialized-read.
  auto v = check(scoped("program_id(0) == 0", "o[...] = x[...]"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(UndefinedCheck, OnlyThePartMadeUndefinedIsUndefined) {
  const std::string head = "kernel p:\n"
                           "    grid = (2,)\n"
                           "    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    scratch tmp: f32[8, 128]\n"
                           "    body:\n"
                           "        tmp[...] = x[...]\n"
                           "        tmp[0:4, :] = undefined\n";
  auto ok = check(head + "        o[4:8, :] = tmp[4:8, :]\n        o[0:4, :] = x[0:4, :]\n");
  EXPECT_EQ(ok.status, Status::verified) << ok.reason;
  auto bad = check(head + "        o[...] = tmp[...]\n");
  EXPECT_EQ(bad.status, Status::violation);
}

TEST(UndefinedCheck, AnAccumulatorMadeUndefinedAfterItsInitIsReadUninitialized) {
  auto v = check("kernel a:\n"
                 "    grid = (4,)\n"
                 "    in  x: f32[8, 512]  block=(8, 128)  index=(k) -> (0, k)\n"
                 "    out o: f32[8, 128]  block=(8, 128)  index=(k) -> (0, 0)\n"
                 "    scratch acc: f32[8, 128]\n"
                 "    body:\n"
                 "        when program_id(0) == 0:\n"
                 "            acc[...] = zeros\n"
                 "        acc[...] = undefined\n"
                 "        acc[...] += x[...]\n"
                 "        when program_id(0) == 3:\n"
                 "            o[...] = acc[...]\n");
  EXPECT_EQ(v.status, Status::violation);
  EXPECT_TRUE(reads_uninitialized_at(v, 10)) << dump(v);
}

TEST(UndefinedCheck, InAPipelineASlotMadeUndefinedIsNotReadableUntilWrittenAgain) {
  auto v = check("pipeline p:\n"
                 "    hbm A: f32[8]\n"
                 "    hbm O: f32[8]\n"
                 "    sram X[1]: f32[8]\n"
                 "    copy_in_start(A, X[0])\n"
                 "    copy_in_wait(X[0])\n"
                 "    X[0] = undefined\n"
                 "    copy_out_start(X[0], O)\n"
                 "    copy_out_wait(X[0])\n");
  EXPECT_EQ(v.status, Status::violation);
  EXPECT_TRUE(reads_uninitialized_at(v, 8)) << dump(v);
}
