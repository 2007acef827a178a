// A kernel's check with SMEM state (spec/state.hpp): the state is elaborated
// by running the body's integers over the grid, and the kernel is checked as
// any other, so a double buffer whose slot lives in SMEM is verified, and
// forgetting to flip it is the race it causes; a read before any store is an
// uninitialized-read at the step that makes it; state that starts with open
// prefetch contents is checked once per allowed contents.
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

// A body that double-buffers x's rows by hand: the slot to compute on is
// slot[0], the next row is prefetched into the other slot, and `flip` (a
// statement, or nothing) stores the other slot into slot[0].
std::string ring(const std::string &decl, const std::string &init, const std::string &flip,
                 const std::string &index = "(i) -> (i, 0)", const std::string &sem = "arbitrary") {
  return "kernel r:\n"
         "    param n = 4\n"
         "    grid = (n,)\n"
         "    dimension_semantics = (" +
         sem + ",)\n" + decl +
         "    in  x: f32[n, 8, 128]  memory_space=any\n"
         "    out o: f32[n * 8, 128]  block=(8, 128)  index=" +
         index +
         "\n"
         "    scratch buf: f32[2, 8, 128]\n"
         "    scratch sem: dma_sem[2]\n"
         "    body:\n"
         "        i = program_id(0)\n" +
         init +
         "        cur = slot[0]\n"
         "        nxt = 1 - cur\n"
         "        when i == 0:\n"
         "            async_copy(x[0], buf[cur], sem[cur]).start()\n"
         "        when i + 1 < n:\n"
         "            async_copy(x[i + 1], buf[nxt], sem[nxt]).start()\n" +
         flip +
         "        async_copy(x[i], buf[cur], sem[cur]).wait()\n"
         "        o[...] = buf[cur] * 2.0\n";
}

const std::string kScratch = "    scratch slot: i32[1] memory_space=smem\n";
const std::string kInit = "        when i == 0:\n            slot[0] = 0\n";
const std::string kFlip = "        slot[0] = nxt\n";

verifier::Verdict check(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("s.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return verifier::check(r.file->units.at(0), {});
}

} // namespace

TEST(StateCheck, ADoubleBufferWhoseSlotLivesInSmemScratchIsVerified) {
  auto v = check(ring(kScratch, kInit, kFlip));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(StateCheck, ASlotNeverFlippedPrefetchesOntoTheBufferInFlight) {
  auto v = check(ring(kScratch, kInit, ""));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_TRUE(has_finding(v, Rule::slot_race, 19));         // the prefetch into buf[nxt] at the second step
  EXPECT_TRUE(has_finding(v, Rule::wait_without_copy, 20)); // the wait on the slot nothing was copied into
}

TEST(StateCheck, ASlotReadBeforeAnyStoreIsAnUninitializedReadWithItsGridPoint) {
  auto v = check(ring(kScratch, "", kFlip));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  const auto &f = v.findings[0];
  EXPECT_EQ(f.rule, Rule::uninitialized_read);
  EXPECT_EQ(f.loc.line, 15); // the first copy into buf[cur]: the garbage slot picks the buffer
  EXPECT_EQ(f.witness.get<std::vector<std::int64_t>>("grid_point") != nullptr, true);
  EXPECT_EQ(*f.witness.get<std::vector<std::int64_t>>("grid_point"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(*f.witness.get<std::string>("element"), "slot[0]");
}

TEST(StateCheck, APrefetchedSlotIsCheckedWithEachContentsItsConstraintsAllow) {
  // Either starting slot is fine: the first step fills the one it reads.
  const std::string open = "    prefetch slot: i32[1] in [0, 2)\n";
  auto v = check(ring(open, "", kFlip, "(i, s) -> (i, 0)"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("each of the 2 prefetch contents"), std::string::npos) << v.reason;
  // Starting at 1 with the first copy hard-wired to buf[0] waits on the empty slot.
  std::string wrong = ring(open, "", kFlip, "(i, s) -> (i, 0)");
  wrong.replace(wrong.find("async_copy(x[0], buf[cur], sem[cur])"), 36,
                "async_copy(x[0], buf[0], sem[0])    ");
  auto w = check(wrong);
  ASSERT_EQ(w.status, Status::violation) << w.reason;
  EXPECT_NE(w.findings.at(0).message.find("slot = [1]"), std::string::npos) << w.findings.at(0).message;
}

TEST(StateCheck, StateCarriedAlongAParallelAxisIsAParallelWriteConflictWithBothSteps) {
  // Each core has its own SMEM: the core that runs step 1 need not have run
  // step 0, which stored the slot it reads (as a VMEM scratch carried there).
  auto v = check(ring(kScratch, kInit, kFlip, "(i) -> (i, 0)", "parallel"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  const auto &f = v.findings[0];
  EXPECT_EQ(f.rule, Rule::parallel_write_conflict);
  EXPECT_NE(f.message.find("across axis 0, which is parallel"), std::string::npos) << f.message;
  ASSERT_NE(f.witness.get<std::vector<std::int64_t>>("stored_at"), nullptr);
  EXPECT_EQ(*f.witness.get<std::vector<std::int64_t>>("stored_at"), (std::vector<std::int64_t>{0}));
  ASSERT_NE(f.witness.get<std::vector<std::int64_t>>("grid_point"), nullptr);
  EXPECT_EQ(*f.witness.get<std::vector<std::int64_t>>("grid_point"), (std::vector<std::int64_t>{1}));
}
