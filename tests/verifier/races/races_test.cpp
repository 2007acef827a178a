#include "verifier/races/races.hpp"

#include "verifier/races/induction.hpp"

#include "spec/parse.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace pipecheck;
using verifier::Status;

namespace {

spec::File parse_text(const std::string &path, const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string(path, text));
  if (!r.file) {
    for (auto &e : r.errors)
      ADD_FAILURE() << path << ":" << e.loc.line << ": " << e.message;
    return {};
  }
  return *r.file;
}

spec::File parse_file(const std::string &rel) {
  std::string path = (std::filesystem::path(PIPECHECK_SOURCE_DIR) / "corpus" / "examples" / rel).string();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << rel;
  return parse_text(path, ss.str());
}

const spec::Program &program(const spec::File &f, const std::string &name) {
  for (auto &u : f.units)
    if (auto *p = std::get_if<spec::Program>(&u); p && p->name == name) return *p;
  throw std::runtime_error("no pipeline " + name);
}

/// Compares every pipeline of a file with its `# expect:` comments.
void expect_as_annotated(const spec::File &f) {
  verifier::CheckOptions o;
  for (auto &u : f.units) {
    auto *p = std::get_if<spec::Program>(&u);
    if (!p) continue;
    std::set<std::pair<std::string, int>> want, got;
    int first = p->loc.line, last = 1 << 30;
    for (auto &u2 : f.units)
      if (spec::unit_loc(u2).line > first) last = std::min(last, spec::unit_loc(u2).line);
    for (auto &e : f.expectations)
      if (e.line >= first && e.line < last) want.insert({e.rule, e.line});
    auto v = verifier::check_program(*p, o);
    if (v.status == Status::verified) got.insert({"verified", p->loc.line});
    for (auto &fi : v.findings)
      got.insert({to_string(fi.rule), fi.loc.line});
    EXPECT_EQ(want, got) << p->name << ": " << to_string(v.status) << " " << v.reason;
  }
}

} // namespace

TEST(GuidePipelines, CheckExactlyAsAnnotated) { expect_as_annotated(parse_file("guide_pipelines.pk")); }

TEST(GpuWgmma, CheckExactlyAsAnnotated) { expect_as_annotated(parse_file("gpu_wgmma.pk")); }

TEST(DoubleBufferedAddOne, IsProvenForEveryTripCount) {
  auto f = parse_file("guide_pipelines.pk");
  auto v = verifier::check_program(program(f, "double_buffered_add_one"), {});
  ASSERT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("every N >= 1"), std::string::npos) << v.reason;
}

TEST(SingleSlotPrefetch, WitnessIsTheSmallestNWithANumberedTrace) {
  auto f = parse_file("guide_pipelines.pk");
  auto v = verifier::check_program(program(f, "single_slot_prefetch"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  const auto &w = v.findings[0].witness;
  ASSERT_FALSE(w.items.empty());
  EXPECT_EQ(w.items[0].key, "N");
  EXPECT_EQ(std::get<std::int64_t>(w.items[0].value), 2); // N = 1 has no prefetch
  ASSERT_GE(w.trace.size(), 2u);
  EXPECT_EQ(w.trace.front().statement, "copy_in_start(A[i + 1], X[0])");
  EXPECT_EQ(w.trace.front().iterations, std::vector<std::int64_t>{0});
  EXPECT_EQ(w.trace[1].statement, "Y[0] = X[0] + 1");
  EXPECT_FALSE(v.findings[0].notes.empty());
}

TEST(WgmmaWithoutDelayRelease, FirstFailsWhenARefillHappensAtK5) {
  auto f = parse_file("gpu_wgmma.pk");
  auto v = verifier::check_program(program(f, "wgmma_k_loop_without_delay_release"), {});
  ASSERT_EQ(v.status, Status::violation);
  for (auto &fi : v.findings) {
    EXPECT_EQ(fi.rule, verifier::Rule::async_operand_overwritten);
    EXPECT_EQ(std::get<std::int64_t>(fi.witness.items[0].value), 5);
  }
}

TEST(RaceChecker, AParamBoundNearTheEndOfInt64IsUnknownAtOnceAndABooleanSubscriptIsOneOrZero) {
  // N >= 2^63 - 1 left the proof counting N up past int64 (a hang).
  auto far = parse_text("t.pk", R"(pipeline p:
    param N >= 9223372036854775807
    hbm  A: f32[8, 128]
    sram X[1]: f32[128]
    copy_in_start(A[0], X[0])
    copy_in_wait(X[0])
)");
  auto v = verifier::check_program(program(far, "p"), {});
  EXPECT_EQ(v.status, Status::unknown);
  EXPECT_NE(v.reason.find("the lower bound of N, 9223372036854775807, is past 2^53"), std::string::npos)
      << v.reason;
  // `A[s or 1]`: row 1 at every step (Z3 aborted on the Boolean in the induction).
  auto rows = parse_text("t.pk", R"(pipeline p:
    param K >= 2
    hbm  A: f32[K, 8, 128]
    sram a[1]: f32[8, 128]
    for s in range(K):
        copy_in_start(A[s or 1], a[0])
        copy_in_wait(a[0])
)");
  EXPECT_EQ(verifier::check_program(program(rows, "p"), {}).status, Status::verified);
}

TEST(RaceChecker, ReportsAWaitWithNothingInFlightAsAHang) {
  auto f = parse_text("t.pk", R"(pipeline w:
    param N >= 1
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    for i in range(N):
        copy_in_start(A[i], X[i % 2])
        copy_in_wait(X[i % 2])
        copy_in_wait(X[i % 2])
)");
  auto v = verifier::check_program(program(f, "w"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::wait_without_copy);
  EXPECT_EQ(v.findings[0].loc.line, 8);
}

TEST(RaceChecker, CopiesPilingUpOnASemaphoreNobodyWaitsGiveOneFindingPerPairOfStatements) {
  // Every wait names the idle semaphore: each copy stays in flight, and each
  // later copy into the slot races with all of them. One finding per pair of
  // statements, and the walk stops once the pile-up passes what any kernel
  // keeps in flight (it checked each access against every copy: quadratic).
  auto f = parse_text("t.pk", R"(pipeline pile:
    param N = 20000
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    sem S: dma_sem[2]
    for i in range(N):
        dma_start(A[i], X[i % 2], S[0])
        dma_wait(X[i % 2], S[1])
)");
  const spec::Program &p = program(f, "pile");
  verifier::races::Machine m(p, spec::param_env(p.params, {}));
  auto run = m.run();
  std::map<verifier::Rule, int> rules;
  for (const auto &x : run.findings)
    ++rules[x.rule];
  EXPECT_GE(rules[verifier::Rule::wait_without_copy], 1);
  EXPECT_EQ(rules[verifier::Rule::slot_race], 1);
  EXPECT_LT(run.ops.size(), 20000u) << "the walk went on past the pile-up";
  auto v = verifier::check_program(p, {});
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(v.findings.at(0).rule, verifier::Rule::wait_without_copy);
}

// Each step computes from a slot no copy wrote.
const char *kReadBeforeAnyCopy = R"(pipeline u:
    param N >= 1
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    sram Y[2]: f32[8]
    for i in range(N):
        Y[i % 2] = X[i % 2] + 1
        copy_out_start(Y[i % 2], A[i])
        copy_out_wait(Y[i % 2])
)";

TEST(RaceChecker, ReportsAReadOfASlotNothingWrote) {
  auto f = parse_text("t.pk", kReadBeforeAnyCopy);
  auto v = verifier::check_program(program(f, "u"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 7);
}

TEST(RaceChecker, ACopyOutOfAPartlyWrittenSlotNamesThePartNothingWrote) {
  auto f = parse_text("t.pk", R"(pipeline half:
    param N >= 1
    hbm  A: f32[N, 8]
    sram Y[2]: f32[8]
    for i in range(N):
        Y[i % 2, 0:4] = zeros
        copy_out_start(Y[i % 2], A[i])
        copy_out_wait(Y[i % 2])
)");
  auto v = verifier::check_program(program(f, "half"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 7);
  EXPECT_NE(v.findings[0].message.find("of which nothing has written [4:8]"), std::string::npos)
      << v.findings[0].message;
}

namespace {
// An hbm array made undefined, then written back block by block by a loop
// that stops `short` blocks before its end, into an array of `blocks` blocks.
std::string undefined_result(const std::string &blocks, const std::string &loop) {
  return "pipeline r:\n"
         "    param N >= 2\n"
         "    hbm  A: f32[128 * N]\n"
         "    hbm  B: f32[128 * " +
         blocks +
         "]\n"
         "    sram X[1]: f32[128]\n"
         "    B[...] = undefined\n"
         "    for i in range(N):\n"
         "        copy_in_start(A[128 * i:128 * (i + 1)], X[0])\n"
         "        copy_in_wait(X[0])\n"
         "        if " +
         loop +
         ":\n"
         "            copy_out_start(X[0], B[128 * i:128 * (i + 1)])\n"
         "            copy_out_wait(X[0])\n";
}
} // namespace

TEST(RaceChecker, AnHbmArrayLeftPartlyUndefinedAtTheEndIsNotCoveredAtItsUndefinedStatement) {
  verifier::CheckOptions four;
  four.overrides["N"] = 4;
  auto f = parse_text("t.pk", undefined_result("N", "i < N - 1"));
  auto v = verifier::check_program(program(f, "r"), four);
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::output_not_covered);
  EXPECT_EQ(v.findings[0].loc.line, 6);
  EXPECT_NE(v.findings[0].message.find("B[384:512] is still undefined when the pipeline ends"),
            std::string::npos)
      << v.findings[0].message;
  // Its twin writes every block: verified.
  auto whole = parse_text("t.pk", undefined_result("N", "i < N"));
  EXPECT_EQ(verifier::check_program(program(whole, "r"), four).status, Status::verified);
}

TEST(RaceChecker, APartOfAnHbmArrayNoUndefinedStatementNamedStillHoldsItsData) {
  // (Followed from `B[0:128] = undefined` on, the rest of B counted as never
  // written: its read and its end were findings while run passed.)
  auto reading = [](const std::string &part) {
    return "pipeline part:\n    hbm  B: f32[256]\n    sram X[1]: f32[128]\n    B[0:128] = undefined\n"
           "    copy_in_start(B[" +
           part +
           "], X[0])\n    copy_in_wait(X[0])\n    copy_out_start(X[0], B[0:128])\n"
           "    copy_out_wait(X[0])\n";
  };
  auto f = parse_text("t.pk", reading("128:256"));
  auto v = verifier::check_program(program(f, "part"), {});
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
  // Its twin reads the part made undefined before anything wrote it.
  auto g = parse_text("t.pk", reading("0:128"));
  auto w = verifier::check_program(program(g, "part"), {});
  ASSERT_EQ(w.status, Status::violation);
  EXPECT_EQ(w.findings.at(0).rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(w.findings.at(0).loc.line, 5);
}

TEST(RaceChecker, AnHbmResultOfFixedSizeIsCoveredForEveryNOrNotCoveredAtTheSmallest) {
  // Two blocks, written at iterations 0 and 1: every N >= 2, by induction.
  auto f = parse_text("t.pk", undefined_result("2", "i < 2"));
  auto v = verifier::check_program(program(f, "r"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("proven for every N"), std::string::npos) << v.reason;
  // Three blocks, the third written only when N > 2: N = 2 leaves it undefined.
  auto g = parse_text("t.pk", undefined_result("3", "i < 3"));
  auto w = verifier::check_program(program(g, "r"), {});
  ASSERT_EQ(w.status, Status::violation) << w.reason;
  ASSERT_EQ(w.findings.size(), 1u);
  EXPECT_EQ(w.findings[0].rule, verifier::Rule::output_not_covered);
  EXPECT_NE(w.findings[0].message.find("B[256:384]"), std::string::npos) << w.findings[0].message;
  EXPECT_NE(w.findings[0].message.find("(N = 2)"), std::string::npos) << w.findings[0].message;
}

namespace {
// A lowered program's text (clipped edge blocks, zeros=True), parsed without
// validation as the lowering's output is.
spec::File parse_lowered(const std::string &text) {
  auto r = spec::parse(spec::SourceFile::from_string("t.pk", text));
  EXPECT_TRUE(r.file);
  return r.file ? *r.file : spec::File{};
}
} // namespace

TEST(RaceChecker, ThePaddingOfAClippedCopyMayBeComputedOnButNotWrittenBack) {
  // A copy replaces its whole destination ref: rows 10..16 of X[0] are the
  // padding of a partial block after it, although a store wrote them before.
  // (Lowered programs clip edge blocks, as hand-written ones may: parsed
  // here without validation all the same.)
  const std::string head = R"(pipeline clipped:
    hbm A: f32[10, 128]
    hbm O: f32[16, 128]
    hbm P: f32[10, 128]
    sram X[1]: f32[16, 128]
    sram Y[1]: f32[16, 128]
    X[0] = zeros
    copy_in_start(A, X[0])
    copy_in_wait(X[0])
    Y[0] = X[0] * 2
)";
  auto bad = parse_lowered(head + "    copy_out_start(Y[0], O)\n    copy_out_wait(Y[0])\n");
  auto v = verifier::check_program(program(bad, "clipped"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 11);
  EXPECT_NE(v.findings[0].message.find("padding"), std::string::npos) << v.findings[0].message;
  // Written back clipped to the real rows, the same computation is clean.
  auto good = parse_lowered(head + "    copy_out_start(Y[0], P)\n    copy_out_wait(Y[0])\n");
  auto g = verifier::check_program(program(good, "clipped"), {});
  EXPECT_EQ(g.status, Status::verified) << g.reason;
  for (auto &f : g.findings)
    ADD_FAILURE() << f.rule << " at " << f.loc.line << ": " << f.message;
}

TEST(RaceChecker, ACopyThatFillsItsPaddingWithZerosWritesItButAnExpOfItIsUndefined) {
  // zeros=True (Mosaic GPU's TMA fetch): rows 10..16 of X[0] are zeros,
  // written: twice them is zero too and may be written back; exp(0) is no
  // zero of a row past the array.
  const std::string head = R"(pipeline zero_filled:
    hbm A: f32[10, 128]
    hbm O: f32[16, 128]
    hbm S: f32[1, 128]
    sram X[1]: f32[16, 128]
    sram Y[1]: f32[16, 128]
    sram T[1]: f32[1, 128]
    copy_in_start(A, X[0], zeros=True)
    copy_in_wait(X[0])
)";
  auto clean = [&](const std::string &body) {
    auto g = verifier::check_program(program(parse_lowered(head + body), "zero_filled"), {});
    EXPECT_EQ(g.status, Status::verified) << body << g.reason;
    for (auto &f : g.findings)
      ADD_FAILURE() << body << f.rule << " at " << f.loc.line << ": " << f.message;
  };
  clean("    Y[0] = X[0] * 2\n    copy_out_start(Y[0], O)\n    copy_out_wait(Y[0])\n");
  clean(
      "    T[0] = sum(X[0], axis=0, keepdims=True)\n    copy_out_start(T[0], S)\n    copy_out_wait(T[0])\n");
  auto v = verifier::check_program(
      program(parse_lowered(head + "    T[0] = sum(exp(X[0]), axis=0, keepdims=True)\n"
                                   "    copy_out_start(T[0], S)\n"
                                   "    copy_out_wait(T[0])\n"),
              "zero_filled"),
      {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 11);
  EXPECT_NE(v.findings[0].message.find("zero padding (zeros=True)"), std::string::npos)
      << v.findings[0].message;
}

TEST(RaceChecker, AccumulatingInASlotAfterItsWritebackWasWaitedIsAnUninitializedRead) {
  auto f = parse_text("t.pk", R"(pipeline continued:
    hbm  A: f32[2, 8]
    hbm  O: f32[8]
    sram X[1]: f32[8]
    sram Y[1]: f32[8]
    Y[0] = zeros
    for i in range(2):
        copy_in_start(A[i], X[0])
        copy_in_wait(X[0])
        Y[0] += X[0]
        copy_out_start(Y[0], O)
        copy_out_wait(Y[0])
)");
  auto v = verifier::check_program(program(f, "continued"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 10);
  EXPECT_NE(v.findings[0].message.find("write-back at line 12 left undefined"), std::string::npos)
      << v.findings[0].message;
}

TEST(RaceChecker, AWritebackWaitedAfterTheSlotWasRefilledLeavesTheNewContents) {
  // The copy into X[1] starts before the write-back out of X[1] is waited:
  // the wait does not undo it (that order is a slot-race, reported as one).
  auto f = parse_text("t.pk", R"(pipeline refill:
    hbm  A: f32[2, 8]
    hbm  O: f32[2, 8]
    sram X[1]: f32[8]
    copy_in_start(A[0], X[0])
    copy_in_wait(X[0])
    copy_out_start(X[0], O[0])
    copy_in_start(A[1], X[0])
    copy_out_wait(X[0])
    copy_in_wait(X[0])
    copy_out_start(X[0], O[1])
    copy_out_wait(X[0])
)");
  auto v = verifier::check_program(program(f, "refill"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  for (const auto &fi : v.findings)
    EXPECT_EQ(fi.rule, verifier::Rule::slot_race) << fi.loc.line << ": " << fi.message;
}

TEST(RaceChecker, FlagsAWritebackOverlappingAPrefetchOfTheSameRows) {
  // In place: the write-back of row block i overlaps the prefetch of rows
  // [4i+2, 4i+6) — an hbm region race.
  auto f = parse_text("t.pk", R"(pipeline h:
    param N >= 1
    hbm  A: f32[4 * N + 8, 8]
    sram X[2]: f32[4, 8]
    copy_in_start(A[0:4, :], X[0])
    for i in range(N):
        copy_in_wait(X[i % 2])
        copy_out_start(X[i % 2], A[4 * i:4 * i + 4, :])
        if i + 1 < N:
            copy_in_start(A[4 * i + 2:4 * i + 6, :], X[(i + 1) % 2])
        copy_out_wait(X[i % 2])
)");
  auto v = verifier::check_program(program(f, "h"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::slot_race);
  EXPECT_EQ(v.findings[0].loc.line, 10);
}

TEST(RaceChecker, ReturnsUnknownNotVerifiedWhenTheProofCannotClose) {
  // The slot index i*i % 2 is periodic, but the prefetch distance grows with i:
  // the loop's hbm accesses do not move uniformly.
  auto f = parse_text("t.pk", R"(pipeline q:
    param N >= 1
    hbm  A: f32[N * N + 1, 8]
    sram X[1]: f32[8]
    for i in range(N):
        copy_in_start(A[i * i], X[0])
        copy_in_wait(X[0])
)");
  auto v = verifier::check_program(program(f, "q"), {});
  EXPECT_EQ(v.status, Status::unknown) << v.reason;
  EXPECT_NE(v.reason.find("checked for N <= 8 only"), std::string::npos) << v.reason;
}

TEST(RaceChecker, ANegativeHbmIndexIsOutOfBoundsAtItsStatementNotAWrap) {
  // At i = 0, A[i - 1] is A[-1]: outside A, not its last row.
  auto f = parse_text("t.pk", R"(pipeline wrap_minus_one:
    hbm A: f32[4, 128]
    sram X[1]: f32[128]
    sram Y[1]: f32[128]
    for i in range(1):
        Y[0] = zeros
        copy_out_start(Y[0], A[i - 1])
        copy_in_start(A[3], X[0])
        copy_out_wait(Y[0])
        copy_in_wait(X[0])
        copy_out_start(X[0], A[1])
        copy_out_wait(X[0])
)");
  auto v = verifier::check_program(program(f, "wrap_minus_one"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u); // the run stops at the fault: no leak reported after it
  const auto &fi = v.findings[0];
  EXPECT_EQ(fi.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(fi.loc.line, 7);
  EXPECT_NE(fi.message.find("index -1 is out of bounds for dim 0 (extent 4) of A[4, 128]"), std::string::npos)
      << fi.message;
  ASSERT_EQ(fi.witness.trace.size(), 1u);
  EXPECT_EQ(fi.witness.trace[0].statement, "copy_out_start(Y[0], A[i - 1])");
  EXPECT_EQ(fi.witness.trace[0].iterations, std::vector<std::int64_t>{0});
  EXPECT_EQ(fi.witness.trace[0].index, 2);
  EXPECT_FALSE(fi.notes.empty());
}

TEST(RaceChecker, ASlotOutsideItsRingIsOutOfBoundsWithTheSmallestN) {
  auto f = parse_text("t.pk", R"(pipeline s:
    param N >= 1
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    for i in range(N):
        copy_in_start(A[i], X[i % 3])
        copy_in_wait(X[i % 3])
)");
  auto v = verifier::check_program(program(f, "s"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(v.findings[0].loc.line, 6);
  EXPECT_EQ(std::get<std::int64_t>(v.findings[0].witness.items.at(0).value), 3);
}

TEST(RaceChecker, AnIndexThatLeavesAFixedBufferOnlyAtALargeNIsNotVerified) {
  // Every N <= 64 stays inside A; the all-N proof must find N = 65 itself.
  // Copies rows of a 64-row table A; `bounds` is the line declaring N.
  auto table_copy = [](const std::string &name, const std::string &bounds) {
    return "pipeline " + name + ":\n    " + bounds + "\n" + R"(    hbm  A: f32[64, 8]
    hbm  B: f32[N, 8]
    sram X[2]: f32[8]
    copy_in_start(A[0], X[0])
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[i % 2])
        copy_out_start(X[i % 2], B[i])
        copy_out_wait(X[i % 2])
)";
  };
  auto f = parse_text("t.pk", table_copy("big", "param N >= 1"));
  auto v = verifier::check_program(program(f, "big"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(v.findings[0].loc.line, 9);
  EXPECT_EQ(std::get<std::int64_t>(v.findings[0].witness.items.at(0).value), 65);
  EXPECT_EQ(v.findings[0].witness.trace.at(0).iterations, std::vector<std::int64_t>{63});
  // Bounded by the table, the same copy is proven.
  auto g = parse_text("t.pk", table_copy("bounded", "param N >= 1 <= 64"));
  auto w = verifier::check_program(program(g, "bounded"), {});
  EXPECT_EQ(w.status, Status::verified) << w.reason;
}

TEST(RaceChecker, AnOutOfBoundsNTooLargeToRunLeavesTheVerdictUnknown) {
  // A leaves its 2**15 rows only at N = 2**15 + 1, which the machine cannot run
  // within an event limit of 100000 (the default's 4 million behave alike,
  // in a minute under ASan): unknown with the reason, never verified.
  auto f = parse_text("t.pk", R"(pipeline huge:
    param N >= 1
    hbm  A: f32[32768, 8]
    hbm  B: f32[N, 8]
    sram X[1]: f32[8]
    for i in range(N):
        copy_in_start(A[i], X[0])
        copy_in_wait(X[0])
        copy_out_start(X[0], B[i])
        copy_out_wait(X[0])
)");
  verifier::CheckOptions o;
  o.event_limit = 100'000;
  auto v = verifier::check_program(program(f, "huge"), o);
  EXPECT_EQ(v.status, Status::unknown) << v.reason;
  EXPECT_NE(v.reason.find("'A[i]' (line 7) leaves 'A' at N = 32769"), std::string::npos) << v.reason;
}

TEST(RaceChecker, ProofCostDoesNotGrowWithTheUpperBound) {
  auto f = parse_text("t.pk", R"(pipeline b:
    param N >= 1 <= 1000000
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    copy_in_start(A[0], X[0])
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[i % 2])
        X[i % 2] = X[i % 2] + 1
        copy_out_start(X[i % 2], A[i])
        copy_out_wait(X[i % 2])
)");
  auto v = verifier::check_program(program(f, "b"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_LT(v.seconds, 5.0);
}

TEST(CorpusPipelines, CheckExactlyAsAnnotated) {
  for (const char *rel :
       {"guide/generic_pipeline.pk", "guide/gpu_k_loops.pk", "guide/section4_rolled.pk",
        "guide/section4_unrolled.pk", "rules/copy-never-waited.pk", "rules/async-operand-overwritten.pk",
        "rules/slot-race.pk", "rules/wait-without-copy.pk", "rules/stale-read.pk",
        "rules/uninitialized-read.pk", "rules/index-out-of-bounds-pipeline.pk"}) {
    std::string path = (std::filesystem::path(PIPECHECK_SOURCE_DIR) / "corpus" / rel).string();
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    SCOPED_TRACE(rel);
    std::stringstream ss;
    ss << in.rdbuf();
    expect_as_annotated(parse_text(path, ss.str()));
  }
}

TEST(HappensBeforeGraph, OrdersNoRaceTheCheckerReportsAndIsBuiltOnlyOnDemand) {
  // Races come from the operations in flight; the graph, recorded on demand,
  // confirms every one of them (it decides nothing, docs/lowering.md).
  auto f = parse_file("guide_pipelines.pk");
  int races = 0;
  for (auto &u : f.units) {
    auto *p = std::get_if<spec::Program>(&u);
    if (!p) continue;
    for (std::int64_t n = 1; n <= 8; ++n) {
      spec::Env env = spec::param_env(p->params, {{"N", n}});
      verifier::races::Machine with(*p, env);
      with.set_record_graph(true);
      auto a = with.run();
      EXPECT_TRUE(verifier::races::witnesses_reproduce(a)) << p->name << " N = " << n;
      EXPECT_GT(a.graph.num_nodes(), 0u);
      verifier::races::Machine without(*p, env);
      auto b = without.run();
      EXPECT_EQ(b.graph.num_nodes(), 0u);
      ASSERT_EQ(a.findings.size(), b.findings.size()) << p->name << " N = " << n;
      for (std::size_t k = 0; k < a.findings.size(); ++k) {
        EXPECT_EQ(a.findings[k].rule, b.findings[k].rule);
        EXPECT_EQ(a.findings[k].anchor_event, b.findings[k].anchor_event);
        races += a.findings[k].rule == verifier::Rule::slot_race ||
                 a.findings[k].rule == verifier::Rule::async_operand_overwritten;
      }
    }
  }
  EXPECT_GT(races, 0);
}

TEST(Induction, PlansThePeriodAndShiftOfADoubleBufferedLoopWithTheRaceChecker) {
  // The all-N induction lives in verifier/races and reaches Z3 only through
  // the verifier/smt wrapper.
  auto f = parse_file("guide_pipelines.pk");
  const auto &p = program(f, "double_buffered_add_one");
  auto plan = verifier::races::plan_induction(p, "N", 1, std::nullopt, {}, 2000);
  ASSERT_EQ(plan.kind, verifier::races::InductionPlan::Kind::proven) << plan.reason;
  EXPECT_TRUE(plan.ok);
  EXPECT_EQ(plan.period, 2);
  EXPECT_GT(plan.queries, 0);
  EXPECT_FALSE(plan.out_of_bounds_at);
}

TEST(Induction, ADrainLoopOfAtMostDepthTripsIsNoSecondGrowingLoop) {
  // `range(max(N - 3, 0), N)` ends with N but runs min(N, 3) times: the
  // main loop is the only one whose trip count grows, and every N is proven.
  // Draining one write-back too few leaves a copy never waited, for every N.
  const std::string text = R"(pipeline drain:
    param N >= 1
    hbm  A: f32[N, 256]
    sram Y[3]: f32[256]
    for i in range(N):
        if i >= 3:
            copy_out_wait(Y[i % 3])
        Y[i % 3] = zeros
        copy_out_start(Y[i % 3], A[i])
    for j in range(max(N - 3, 0), N):
        copy_out_wait(Y[j % 3])
)";
  auto f = parse_text("t.pk", text);
  auto plan = verifier::races::plan_induction(program(f, "drain"), "N", 1, std::nullopt, {}, 2000);
  ASSERT_EQ(plan.kind, verifier::races::InductionPlan::Kind::proven) << plan.reason;
  EXPECT_TRUE(plan.ok);
  auto v = verifier::check_program(program(f, "drain"), {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;

  std::string short_text = text;
  short_text.replace(short_text.find("max(N - 3, 0)"), 13, "max(N - 2, 0)");
  auto g = parse_text("t.pk", short_text);
  auto w = verifier::check_program(program(g, "drain"), {});
  ASSERT_EQ(w.status, verifier::Status::violation) << w.reason;
  EXPECT_EQ(w.findings.at(0).rule, verifier::Rule::copy_never_waited);
}

TEST(Induction, AnUnprovenDeepRingIsCheckedUntilEverySlotIsReusedTwice) {
  // A 12-slot write-back ring waited one step late first rewrites a slot
  // whose copy is in flight at i = 12 (N = 13), past the default n_max of 8:
  // a violation, not "checked for N <= 8 only".
  auto f = parse_text("t.pk", R"(pipeline deep_ring:
    param N >= 1
    hbm  A: f32[N, 128]
    hbm  B: f32[N, 128]
    sram X[2]: f32[128]
    sram Y[12]: f32[128]
    copy_in_start(A[0], X[0])
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[i % 2])
        Y[i % 12] = X[i % 2] + 1
        copy_out_start(Y[i % 12], B[i])
        if i >= 12:
            copy_out_wait(Y[(i - 12) % 12])
    for k in range(12):
        if N - 12 + k >= 0:
            copy_out_wait(Y[(N - 12 + k) % 12])
)");
  auto v = verifier::check_program(program(f, "deep_ring"), {});
  ASSERT_EQ(v.status, verifier::Status::violation) << v.reason;
  EXPECT_EQ(v.findings.at(0).rule, verifier::Rule::slot_race);
}

TEST(Induction, AnUnprovenProgramIsCheckedPastTheIterationItsGuardNames) {
  // `if i == 11` waits a second time at iteration 11: it hangs at N = 12,
  // past the default n_max of 8, and the guard keeps the proof from holding.
  auto f = parse_text("t.pk", R"(pipeline late:
    param N >= 1
    hbm  A: f32[N, 128]
    sram Y[2]: f32[128]
    for i in range(N):
        Y[i % 2] = zeros
        copy_out_start(Y[i % 2], A[i])
        copy_out_wait(Y[i % 2])
        if i == 11:
            copy_out_wait(Y[i % 2])
)");
  auto v = verifier::check_program(program(f, "late"), {});
  ASSERT_EQ(v.status, verifier::Status::violation) << v.reason;
  EXPECT_EQ(v.findings.at(0).rule, verifier::Rule::wait_without_copy);
  EXPECT_NE(v.findings.at(0).message.find("(N = 12)"), std::string::npos) << v.findings.at(0).message;
}

TEST(Induction, AGuardThatRepeatsWithThePeriodIsProvenForEveryN) {
  // Two inputs summed per output row in one flat loop: `i % 2 == 0` starts a
  // row. Its twin waits for the write-back only after the next row's start
  // has overwritten the slot.
  const std::string text = R"(pipeline pairs:
    param N >= 1
    hbm  A: f32[2 * N, 128]
    hbm  B: f32[N, 128]
    sram X[1]: f32[128]
    sram S[1]: f32[128]
    for i in range(2 * N):
        copy_in_start(A[i], X[0])
        copy_in_wait(X[0])
        if i % 2 == 0:
            S[0] = X[0]
        else:
            S[0] = S[0] + X[0]
            copy_out_start(S[0], B[i // 2])
            copy_out_wait(S[0])
)";
  auto f = parse_text("t.pk", text);
  auto v = verifier::check_program(program(f, "pairs"), {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("proven for every N"), std::string::npos) << v.reason;

  std::string late = text;
  late.replace(late.find("            copy_out_wait(S[0])\n"), 32, "");
  late.replace(late.find("            S[0] = X[0]\n"), 24,
               "            S[0] = X[0]\n            if i > 0:\n                copy_out_wait(S[0])\n");
  auto g = parse_text("t.pk", late + "    copy_out_wait(S[0])\n");
  auto w = verifier::check_program(program(g, "pairs"), {});
  ASSERT_EQ(w.status, verifier::Status::violation) << w.reason;
  EXPECT_EQ(w.findings.at(0).rule, verifier::Rule::slot_race);
}

TEST(Induction, AGrowingLoopNestedInAnotherIsNamedNotCalledAbsent) {
  auto f = parse_text("t.pk", R"(pipeline rows_then_k:
    param K >= 1
    hbm  A: f32[2, K, 128]
    hbm  O: f32[2, 128]
    sram X[1]: f32[128]
    sram Y[1]: f32[128]
    for r in range(2):
        Y[0] = zeros
        for k in range(K):
            copy_in_start(A[r, k], X[0])
            copy_in_wait(X[0])
            Y[0] = Y[0] + X[0]
        copy_out_start(Y[0], O[r])
        copy_out_wait(Y[0])
)");
  auto plan = verifier::races::plan_induction(program(f, "rows_then_k"), "K", 1, std::nullopt, {}, 2000);
  EXPECT_NE(plan.kind, verifier::races::InductionPlan::Kind::proven);
  EXPECT_NE(plan.reason.find("the loop that grows with K (line 9) is nested"), std::string::npos)
      << plan.reason;
}

TEST(Induction, AnAccessLeavingAFixedBufferIsAnOutOfBoundsPlanWithTheSmallestN) {
  auto f = parse_text("t.pk", R"(pipeline big:
    param N >= 1
    hbm  A: f32[64, 8]
    hbm  B: f32[N, 8]
    sram X[2]: f32[8]
    copy_in_start(A[0], X[0])
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[i % 2])
        copy_out_start(X[i % 2], B[i])
        copy_out_wait(X[i % 2])
)");
  auto plan = verifier::races::plan_induction(program(f, "big"), "N", 1, std::nullopt, {}, 2000);
  EXPECT_EQ(plan.kind, verifier::races::InductionPlan::Kind::out_of_bounds) << plan.reason;
  EXPECT_FALSE(plan.ok);
  EXPECT_EQ(plan.out_of_bounds_at, std::optional<std::int64_t>(65));
}

// A fixed loop over the first rows of an array N sizes: no loop grows with N.
std::string fixed_rows_pipeline(const std::string &rows, const std::string &extra) {
  return R"(pipeline fixed:
    param N >= 1
    hbm  A: f32[)" +
         rows + R"(, 8]
    hbm  C: f32[12, 8]
    sram X[2]: f32[8]
    copy_in_start(A[0], X[0])
    for i in range(12):
        if i + 1 < 12:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
)" + extra +
         R"(        copy_in_wait(X[i % 2])
        copy_out_start(X[i % 2], C[i])
        copy_out_wait(X[i % 2])
)";
}

TEST(Induction, WithNoLoopThatGrowsWithNNothingElseMayMoveWithIt) {
  auto f = parse_text("t.pk", fixed_rows_pipeline("N + 12", ""));
  auto v = verifier::check_program(program(f, "fixed"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("no loop, slot, subscript or branch moves with N"), std::string::npos) << v.reason;
  // A row that leaves the array only past the trip counts run: found, at
  // the smallest such N.
  auto g = parse_text("t.pk", fixed_rows_pipeline("max(20 - N, 1)", ""));
  auto w = verifier::check_program(program(g, "fixed"), {});
  ASSERT_EQ(w.status, Status::violation) << w.reason;
  EXPECT_EQ(w.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(w.findings[0].message.find("(N = 9)"), std::string::npos) << w.findings[0].message;
  // A branch on N is no proof: the trip counts past its literal are run.
  auto h = parse_text(
      "t.pk",
      fixed_rows_pipeline("N + 12", "        if N > 10:\n            copy_in_start(A[i], X[i % 2])\n"));
  auto x = verifier::check_program(program(h, "fixed"), {});
  ASSERT_EQ(x.status, Status::violation) << x.reason;
  EXPECT_EQ(x.findings[0].rule, verifier::Rule::slot_race);
  EXPECT_NE(x.findings[0].message.find("(N = 11)"), std::string::npos) << x.findings[0].message;
  // A slot whose size N sets moves what every copy covers: unproven.
  auto k = parse_text("t.pk", R"(pipeline fixed:
    param N >= 1
    hbm  A: f32[4, N]
    sram X[1]: f32[N]
    for i in range(4):
        copy_in_start(A[i], X[0])
        copy_in_wait(X[0])
)");
  auto y = verifier::check_program(program(k, "fixed"), {});
  EXPECT_EQ(y.status, Status::unknown) << y.reason;
  EXPECT_NE(y.reason.find("the shape of 'X' does"), std::string::npos) << y.reason;
}

TEST(Induction, ASiteUnderABranchMattersOnlyWhereTheBranchIsTaken) {
  // The drain copy's end `4 * N` moves with N, but it is taken only at the
  // next-to-last iteration; the halo copies land at offset 1 of their slot.
  auto f = parse_text("t.pk", R"(pipeline halo:
    param N >= 2
    hbm  A: f32[4 * N]
    hbm  C: f32[4 * N]
    sram x[2]: f32[6]
    sram z[2]: f32[4]
    copy_in_start(A[0:5], x[0], offset=(1,))
    for i in range(N):
        if i + 2 < N:
            copy_in_start(A[4 * i + 3:4 * i + 9], x[(i + 1) % 2])
        if i + 2 == N:
            copy_in_start(A[4 * i + 3:4 * N], x[(i + 1) % 2])
        copy_in_wait(x[i % 2])
        z[i % 2] = x[i % 2, 1:5]
        copy_out_start(z[i % 2], C[4 * i:4 * i + 4])
        copy_out_wait(z[i % 2])
)");
  auto v = verifier::check_program(program(f, "halo"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("k-induction"), std::string::npos) << v.reason;
  // The same drain copy into the slot being read races, at the smallest N.
  auto g = parse_text("t.pk", R"(pipeline halo:
    param N >= 2
    hbm  A: f32[4 * N]
    hbm  C: f32[4 * N]
    sram x[2]: f32[6]
    sram z[2]: f32[4]
    copy_in_start(A[0:5], x[0], offset=(1,))
    for i in range(N):
        if i + 2 < N:
            copy_in_start(A[4 * i + 3:4 * i + 9], x[(i + 1) % 2])
        copy_in_wait(x[i % 2])
        if i + 2 == N:
            copy_in_start(A[4 * i + 3:4 * N], x[i % 2])
        z[i % 2] = x[i % 2, 1:5]
        copy_out_start(z[i % 2], C[4 * i:4 * i + 4])
        copy_out_wait(z[i % 2])
)");
  auto w = verifier::check_program(program(g, "halo"), {});
  ASSERT_EQ(w.status, Status::violation) << w.reason;
  EXPECT_EQ(w.findings[0].rule, verifier::Rule::slot_race);
  EXPECT_NE(w.findings[0].message.find("(N = 2)"), std::string::npos) << w.findings[0].message;
}

TEST(Induction, ALookaheadOfElevenBlocksIsProvenForEveryN) {
  // The window starts at the guard's constant (`i + 11 < N`), up to 16.
  auto f = parse_text("t.pk", R"(pipeline lookahead_11_on_12_slots:
    param N >= 1
    hbm  A: f32[N, 128]
    hbm  B: f32[N, 128]
    sram X[12]: f32[128]
    sram Y[2]: f32[128]
    if N > 0:
        copy_in_start(A[0], X[0])
    if N > 1:
        copy_in_start(A[1], X[1])
    if N > 2:
        copy_in_start(A[2], X[2])
    if N > 3:
        copy_in_start(A[3], X[3])
    if N > 4:
        copy_in_start(A[4], X[4])
    if N > 5:
        copy_in_start(A[5], X[5])
    if N > 6:
        copy_in_start(A[6], X[6])
    if N > 7:
        copy_in_start(A[7], X[7])
    if N > 8:
        copy_in_start(A[8], X[8])
    if N > 9:
        copy_in_start(A[9], X[9])
    if N > 10:
        copy_in_start(A[10], X[10])
    for i in range(N):
        cur = i % 12
        if i + 11 < N:
            copy_in_start(A[i + 11], X[(i + 11) % 12])
        copy_in_wait(X[cur])
        Y[i % 2] = X[cur] * 2
        copy_out_start(Y[i % 2], B[i])
        if i > 0:
            copy_out_wait(Y[(i + 1) % 2])
    copy_out_wait(Y[(N - 1) % 2])
)");
  auto v = verifier::check_program(program(f, "lookahead_11_on_12_slots"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("k-induction"), std::string::npos) << v.reason;
}

TEST(Induction, TheLastIterationsRowNamedThroughNUnderItsBranchIsProven) {
  auto f = parse_text("t.pk", R"(pipeline last_iteration_branch:
    param N >= 1
    hbm  A: f32[N, 128]
    hbm  B: f32[N, 128]
    sram X[2]: f32[128]
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[cur])
        if i == N - 1:
            copy_out_start(X[cur], B[N - 1])
        else:
            copy_out_start(X[cur], B[i])
        copy_out_wait(X[cur])
)");
  auto v = verifier::check_program(program(f, "last_iteration_branch"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("k-induction"), std::string::npos) << v.reason;
}

TEST(Induction, AnUnprovenProgramIsCheckedPastAConstantItsGuardNamesThroughALocal) {
  // `lim = 20`, `i != lim`: the prefetch skipped at i = 20 hangs from N = 22.
  auto f = parse_text("t.pk", R"(pipeline skip_local:
    param N >= 1
    hbm  A: f32[N, 128]
    hbm  B: f32[N, 128]
    sram X[2]: f32[128]
    lim = 20
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        if i + 1 < N and i != lim:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[cur])
        copy_out_start(X[cur], B[i])
        copy_out_wait(X[cur])
)");
  auto v = verifier::check_program(program(f, "skip_local"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::wait_without_copy);
  EXPECT_NE(v.findings[0].message.find("(N = 22)"), std::string::npos) << v.findings[0].message;
}

TEST(Induction, AnUnprovenProgramWithABoundedNOfFewValuesIsCheckedWhole) {
  // A[i + N] moves with N: no proof; N in [1, 9] is nine runs.
  auto f = parse_text("t.pk", R"(pipeline write_second_half_N_le_9:
    param N >= 1 <= 9
    hbm  A: f32[2 * N, 128]
    sram X[2]: f32[128]
    sram Y[2]: f32[128]
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        nxt = (i + 1) % 2
        if i + 1 < N:
            copy_in_start(A[i + 1], X[nxt])
        copy_in_wait(X[cur])
        Y[cur] = X[cur] + 1
        copy_out_start(Y[cur], A[i + N])
        if i > 0:
            copy_out_wait(Y[nxt])
    copy_out_wait(Y[(N - 1) % 2])
)");
  auto v = verifier::check_program(program(f, "write_second_half_N_le_9"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_EQ(v.reason, "checked every N in [1, 9] concretely");
}

TEST(Induction, EachTripCountRunIsValidatedAsSetValidatesIt) {
  // A store whose shapes differ at odd N, in the last iteration only.
  auto f = parse_text("t.pk", R"(pipeline tail_store_shape:
    param N >= 1
    hbm  A: f32[N, 128]
    sram X[1]: f32[128]
    for i in range(N):
        copy_in_start(A[i], X[0])
        copy_in_wait(X[0])
        if i + 1 == N:
            X[0, 0:120] = X[0, 0:120 + N % 2]
)");
  auto v = verifier::check_program(program(f, "tail_store_shape"), {});
  EXPECT_EQ(v.status, Status::unknown);
  ASSERT_FALSE(v.errors.empty()) << v.reason;
  EXPECT_EQ(v.errors[0].loc.line, 9);
  EXPECT_NE(v.errors[0].message.find("does not fit a block of shape [120]"), std::string::npos)
      << v.errors[0].message;
  EXPECT_NE(v.errors[0].message.find("(N = 1)"), std::string::npos) << v.errors[0].message;
  // An extent that reaches 0 past the trip counts run: the smallest such N.
  auto g = parse_text("t.pk", R"(pipeline extent_nonpositive:
    param N >= 1
    hbm  A: f32[N, 128]
    hbm  C: f32[40 - N, 128]
    sram X[2]: f32[128]
    for i in range(N):
        copy_in_start(A[i], X[i % 2])
        copy_in_wait(X[i % 2])
)");
  auto w = verifier::check_program(program(g, "extent_nonpositive"), {});
  ASSERT_FALSE(w.errors.empty()) << w.reason;
  EXPECT_NE(w.errors[0].message.find("must be positive, got 0 (N = 40)"), std::string::npos)
      << w.errors[0].message;
  // A slot whose size moves with N (at N = 11, 23, ...): no proof.
  auto h = parse_text("t.pk", R"(pipeline slot_shape_N:
    param N >= 1
    hbm  A: f32[N, 128]
    sram X[2]: f32[128 - 8 * ((N % 12 + 1) // 12)]
    copy_in_start(A[0], X[0])
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[i % 2])
)");
  auto x = verifier::check_program(program(h, "slot_shape_N"), {});
  EXPECT_NE(x.status, Status::verified) << x.reason;
}

TEST(Induction, WithNoLoopThatGrowsTheProofStartsPastTheConstantsNIsComparedWith) {
  auto f = parse_text("t.pk", R"(pipeline fixed_Ngt40:
    param N >= 1
    hbm  A: f32[20, 128]
    sram X[2]: f32[128]
    if N > 40:
        copy_in_start(A[19], X[0])
        copy_in_wait(X[0])
)");
  auto v = verifier::check_program(program(f, "fixed_Ngt40"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("from N = 41 on"), std::string::npos) << v.reason;
}

TEST(Induction, AnAccessLeavingItsBufferPastTheRunTripCountsIsReportedAtTheSmallestN) {
  auto f = parse_text("t.pk", R"(pipeline nonminimal_witness:
    param N >= 1
    hbm  A: f32[N, 128]
    hbm  B: f32[N, 128]
    sram X[1]: f32[128]
    for i in range(N):
        copy_in_start(A[i], X[0])
        copy_in_wait(X[0])
        if i + 1 == N and N > 20:
            copy_out_start(X[0], B[i + 1])
        else:
            copy_out_start(X[0], B[i])
        copy_out_wait(X[0])
)");
  auto v = verifier::check_program(program(f, "nonminimal_witness"), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(v.findings[0].message.find("(N = 21)"), std::string::npos) << v.findings[0].message;
}

// `Y[0] = where(m, x, Y[0])` keeps what nothing wrote of Y[0] where m fails:
// undefined data, like a partial block's padding, which a later store may
// overwrite and a write-back must not carry out.
std::string keep_store_pipeline(const std::string &second_mask) {
  return R"(pipeline keep:
    hbm  A: f32[8]
    hbm  B: f32[8]
    sram X[1]: f32[8]
    sram Y[1]: f32[8]
    copy_in_start(A[0:8], X[0])
    copy_in_wait(X[0])
    Y[0] = where(iota((8,), 0) < 4, X[0], Y[0])
    Y[0] = where()" +
         second_mask + R"(, X[0] * 2, Y[0])
    copy_out_start(Y[0], B[0:8])
    copy_out_wait(Y[0])
)";
}

TEST(RaceChecker, AMaskedStoreThatKeepsWhatALaterStoreWritesIsNoUninitializedRead) {
  auto f = parse_text("t.pk", keep_store_pipeline("iota((8,), 0) >= 4"));
  auto v = verifier::check_program(program(f, "keep"), {});
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(RaceChecker, AMaskedStoreWhoseKeptGarbageIsWrittenBackIsAnUninitializedRead) {
  auto f = parse_text("t.pk", keep_store_pipeline("iota((8,), 0) >= 5"));
  auto v = verifier::check_program(program(f, "keep"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 10);
}

TEST(HbmRace, NamesTheRegionTheCopyInFlightAndWhatItDoesToIt) {
  // A copy-in reads its hbm source, a copy-out writes its hbm destination.
  auto f = parse_text("hbm.pk", R"(pipeline write_during_copy_in:
    hbm  A: f32[2, 512]
    sram X[2]: f32[512]
    X[1] = zeros
    copy_in_start(A[0], X[0])
    copy_out_start(X[1], A[0])
    copy_in_wait(X[0])
    copy_out_wait(X[1])

pipeline read_during_copy_out:
    hbm  A: f32[2, 512]
    sram X[2]: f32[512]
    X[1] = zeros
    copy_out_start(X[1], A[0])
    copy_in_start(A[0], X[0])
    copy_in_wait(X[0])
    copy_out_wait(X[1])
)");
  auto w = verifier::check_program(program(f, "write_during_copy_in"), {});
  ASSERT_EQ(w.findings.size(), 1u);
  EXPECT_EQ(w.findings[0].message.rfind(
                "writes A[0, 0:512] while an asynchronous copy in reading it is still in flight", 0),
            0u)
      << w.findings[0].message;
  auto r = verifier::check_program(program(f, "read_during_copy_out"), {});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].message.rfind(
                "reads A[0, 0:512] while an asynchronous copy out writing it is still in flight", 0),
            0u)
      << r.findings[0].message;
}

TEST(RaceChecker, ATripCountSetPastTheEventLimitKeepsAFindingMadeOnTheWayAndAProofForEveryN) {
  const auto f = parse_text("big.pk", kReadBeforeAnyCopy);
  verifier::CheckOptions o;
  o.overrides["N"] = 100'000;
  o.event_limit = 30'000;
  auto bad = verifier::check_program(program(f, "u"), o);
  ASSERT_EQ(bad.status, verifier::Status::violation) << bad.reason;
  EXPECT_EQ(bad.findings.at(0).rule, verifier::Rule::uninitialized_read);
  const auto g = parse_file("guide_pipelines.pk");
  auto good = verifier::check_program(program(g, "double_buffered_add_one"), o);
  EXPECT_EQ(good.status, verifier::Status::verified) << good.reason;
  EXPECT_NE(good.reason.find("the one run at N = 100000 is past what is run (more than 30000 events)"),
            std::string::npos)
      << good.reason;
}

// A walk from the end of its arrays, double-buffered: `extent` sizes A, `a`
// and `b` are the rows the prologue and step i + 1 fetch and step i writes.
std::string reversed_pipeline(const std::string &extent, const std::string &first, const std::string &next,
                              const std::string &out, const std::string &copy_kw = "") {
  return R"(pipeline rev:
    param N >= 1
    hbm  A: f32[)" +
         extent + R"(, 8]
    hbm  B: f32[N, 8]
    sram X[2]: f32[8]
    copy_in_start(A[)" +
         first + "], X[0]" + copy_kw + R"()
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[)" +
         next + "], X[(i + 1) % 2]" + copy_kw + R"()
        copy_in_wait(X[i % 2])
        copy_out_start(X[i % 2], B[)" +
         out + R"(])
        copy_out_wait(X[i % 2])
)";
}

TEST(Induction, AWalkFromTheEndIsProvenReadFromTheEnd) {
  // A[N - 1] before the loop and A[N - 2 - i] in it move with N as written;
  // counted from the end they are rows 0 and i + 1.
  auto f = parse_text("t.pk", reversed_pipeline("N", "N - 1", "N - 2 - i", "N - 1 - i"));
  auto v = verifier::check_program(program(f, "rev"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("A's dimension 0, B's dimension 0 read from the end"), std::string::npos)
      << v.reason;
  // One array read from the end and the other from the start.
  auto g = parse_text("t.pk", reversed_pipeline("N", "N - 1", "N - 2 - i", "i"));
  auto w = verifier::check_program(program(g, "rev"), {});
  EXPECT_EQ(w.status, Status::verified) << w.reason;
  EXPECT_NE(w.reason.find("; A's dimension 0 read from the end"), std::string::npos) << w.reason;
  // Two rows a step from the end of an array of N + 8 rows leave it at
  // i = N - 1 from N = 10 on, past the trip counts run one by one: the
  // mirrored program's bounds find that N, and it is run.
  auto h = parse_text("t.pk", reversed_pipeline("N + 8", "N + 7", "N + 5 - 2 * i", "N - 1 - i"));
  auto x = verifier::check_program(program(h, "rev"), {});
  ASSERT_EQ(x.status, Status::violation) << x.reason;
  EXPECT_EQ(x.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(x.findings[0].message.find("(N = 10)"), std::string::npos) << x.findings[0].message;
  // With room for them (2 * N + 6 rows), the same walk is proven.
  auto k = parse_text("t.pk", reversed_pipeline("2 * N + 6", "2 * N + 5", "2 * N + 3 - 2 * i", "N - 1 - i"));
  auto y = verifier::check_program(program(k, "rev"), {});
  EXPECT_EQ(y.status, Status::verified) << y.reason;
}

TEST(Induction, ABufferIsReadFromTheEndOnlyWhereTheOrderOfItsElementsDecidesNothing) {
  // Read and written in place a row at a time: mirrored row for row.
  auto f = parse_text("t.pk", R"(pipeline rev:
    param N >= 1
    hbm  A: f32[N, 8]
    sram X[1]: f32[8]
    for i in range(N):
        copy_in_start(A[N - 1 - i], X[0])
        copy_in_wait(X[0])
        copy_out_start(X[0], A[N - 1 - i])
        copy_out_wait(X[0])
)");
  auto v = verifier::check_program(program(f, "rev"), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  // Read and written a region of rows at a time: the rows of each region
  // would land in the slot in the other order, so no proof read from the
  // end (the trip counts run are the verdict's bound).
  auto g = parse_text("t.pk", R"(pipeline rev:
    param N >= 1
    hbm  A: f32[2 * N, 8]
    sram X[1]: f32[2, 8]
    for i in range(N):
        copy_in_start(A[2 * N - 2 - 2 * i:2 * N - 2 * i], X[0])
        copy_in_wait(X[0])
        copy_out_start(X[0], A[2 * N - 2 - 2 * i:2 * N - 2 * i])
        copy_out_wait(X[0])
)");
  auto w = verifier::check_program(program(g, "rev"), {});
  EXPECT_EQ(w.status, Status::unknown) << w.reason;
  EXPECT_NE(w.reason.find("depends on the trip count"), std::string::npos) << w.reason;
  // A zero-filled fetch may reach past the end of the array: not mirrored.
  auto h = parse_text("t.pk", reversed_pipeline("N", "N - 1", "N - 2 - i", "i", ", zeros=True"));
  auto x = verifier::check_program(program(h, "rev"), {});
  EXPECT_EQ(x.status, Status::unknown) << x.reason;
  // A body statement naming the array (not a copy): not mirrored.
  auto k = parse_text("t.pk", R"(pipeline rev:
    param N >= 1
    hbm  A: f32[N, 8]
    hbm  B: f32[N, 8]
    sram X[1]: f32[8]
    for i in range(N):
        copy_in_start(A[N - 1 - i], X[0])
        copy_in_wait(X[0])
        X[0] = A[N - 1 - i]
        copy_out_start(X[0], B[i])
        copy_out_wait(X[0])
)");
  auto y = verifier::check_program(program(k, "rev"), {});
  EXPECT_NE(y.status, Status::verified) << y.reason;
}
