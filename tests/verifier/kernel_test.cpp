// A kernel's check includes the race checker's verdict on its lowered program
// (verifier/kernel.cpp): findings on the kernel's own lines with grid points,
// one finding per root cause, and never `verified` for what was not lowered.
#include "reports/report.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "verifier/check.hpp"
#include "verifier/races/races.hpp"
#include "verifier/rules/findings.hpp"

#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck;
using verifier::Status;

namespace {

spec::KernelSpec kernel(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

/// The issue's Mosaic GPU matmul: grid (4, 4, 10), two slots per operand.
/// Line 7 is `in a`, line 8 `in b`, line 14 the dot.
std::string gpu_matmul(int delay_release, const std::string &target = "h100") {
  return R"(kernel mm:
    grid = (4, 4, 10)
    target = )" +
         target + R"(
    max_concurrent_steps = 2
    delay_release = )" +
         std::to_string(delay_release) + R"(
    dimension_semantics = (parallel, parallel, sequential)
    in  a: bf16[256, 640]  block=(64, 64)   index=(i, j, k) -> (i, k)
    in  b: bf16[640, 512]  block=(64, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 512]   block=(64, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(2) == num_programs(2) - 1:
            o[...] = acc[...]
)";
}

const verifier::Finding *find(const verifier::Verdict &v, verifier::Rule rule, int line) {
  for (const auto &f : v.findings)
    if (f.rule == rule && f.loc.line == line) return &f;
  return nullptr;
}

const verifier::WitnessItem *item(const verifier::Finding &f, const std::string &key) {
  for (const auto &it : f.witness.items)
    if (it.key == key) return &it;
  return nullptr;
}

const char *kClean = R"(kernel add:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] + 1
)";

} // namespace

TEST(KernelCheck, TheIssuesGpuMatmulWithoutDelayReleaseReportsTheOverwriteOnTheOperandLines) {
  auto k = kernel(gpu_matmul(0));
  // The spec rules alone see nothing wrong: the symptom is in the pipeline.
  EXPECT_EQ(find(verifier::check_spec_rules(k, {}), verifier::Rule::async_operand_overwritten, 7), nullptr);
  auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::violation);
  for (int line : {7, 8}) {
    const verifier::Finding *f = find(v, verifier::Rule::async_operand_overwritten, line);
    ASSERT_NE(f, nullptr) << "line " << line;
    EXPECT_NE(f->message.find("at grid point (0, 0, 0)"), std::string::npos) << f->message;
    const auto *at = item(*f, "grid_point");
    ASSERT_NE(at, nullptr);
    EXPECT_EQ(std::get<std::vector<std::int64_t>>(at->value), (std::vector<std::int64_t>{0, 0, 0}));
    // The event trace: the wgmma on the dot's line, the refill on the operand's.
    ASSERT_GE(f->witness.trace.size(), 2u);
    bool wgmma = false, refill = false;
    for (const auto &t : f->witness.trace) {
      EXPECT_EQ(t.grid_point.size(), 3u) << t.statement;
      if (t.statement.rfind("wgmma(", 0) == 0) wgmma = t.loc.line == 14;
      if (t.anchor) refill = t.loc.line == line && t.statement.rfind("copy_in_start(", 0) == 0;
    }
    EXPECT_TRUE(wgmma && refill);
    ASSERT_EQ(f->notes.size(), f->witness.trace.size());
    EXPECT_NE(f->notes[0].message.find(" at grid point ("), std::string::npos) << f->notes[0].message;
  }
}

TEST(KernelCheck, TheWitnessOfALoweredFindingCarriesGridPointsInJson) {
  reports::FileResult file;
  file.source = spec::SourceFile::from_string("k.pk", gpu_matmul(0));
  file.units.push_back({"mm", false, {1, 1}, verifier::check(kernel(gpu_matmul(0)), {})});
  auto j = reports::to_json(std::vector<reports::FileResult>{file});
  bool seen = false;
  for (const auto &f : j["results"][0]["findings"]) {
    if (f["rule"] != "async-operand-overwritten") continue;
    seen = true;
    EXPECT_EQ(f["witness"]["grid_point"], nlohmann::json({0, 0, 0}));
    for (const auto &ev : f["witness"]["trace"])
      EXPECT_EQ(ev["grid_point"].size(), 3u) << ev.dump();
  }
  EXPECT_TRUE(seen) << j.dump(2);
}

TEST(KernelCheck, DelayReleaseOneRemovesTheOverwrite) {
  auto v = verifier::check(kernel(gpu_matmul(1)), {});
  for (const auto &f : v.findings)
    EXPECT_NE(f.rule, verifier::Rule::async_operand_overwritten) << f.loc.line << ": " << f.message;
}

TEST(KernelCheck, UndefinedDataAWgmmaReadsReachesItsAccumulatorAwaitedOrInFlight) {
  // A staged operand with half its columns written: every row of acc takes
  // the other half, and the store of acc writes it back (line 8, `out o`).
  for (const std::string update :
       {"acc[...] = acc[...] + dot(s[...], b[...])", "acc[...] += dot(s[...], b[...])"}) {
    const std::string text = R"(kernel staged:
    grid = (1,)
    target = h100
    dimension_semantics = (sequential,)
    max_concurrent_steps = 1
    in  a: f16[64, 32]  block=(64, 32)  index=(i) -> (0, 0)
    in  b: f16[32, 64]  block=(32, 64)  index=(i) -> (0, 0)
    out o: f32[64, 64]  block=(64, 64)  index=(i) -> (0, 0)
    scratch acc: f32[64, 64]  memory_space=acc
    scratch s: f16[64, 32]  memory_space=smem
    body:
        s[:, 0:16] = a[:, 0:16]
        commit_smem()
        )" + update + R"(
        o[...] = acc[...]
)";
    auto v = verifier::check(kernel(text), {});
    ASSERT_EQ(v.status, Status::violation) << update << ": " << v.reason;
    ASSERT_EQ(v.findings.size(), 1u) << update << ": " << v.findings[0].message;
    EXPECT_NE(find(v, verifier::Rule::uninitialized_read, 8), nullptr)
        << update << ": " << v.findings[0].message;
    // Written whole, nothing is undefined.
    std::string whole = text;
    whole.replace(whole.find("s[:, 0:16] = a[:, 0:16]"), 23, "s[...] = a[...]");
    EXPECT_EQ(verifier::check(kernel(whole), {}).status, Status::verified) << update;
  }
}

TEST(KernelCheck, TheTargetOverrideReachesTheLoweredProgram) {
  // Written without a target, checked for h200: the Mosaic GPU pipeline is
  // the one checked. Without a GPU target its acc scratch is bad input.
  std::string text = gpu_matmul(0, "h100");
  text.erase(text.find("    target = h100\n"), std::string("    target = h100\n").size());
  auto k = kernel(text);
  auto none = verifier::check(k, {});
  EXPECT_FALSE(none.errors.empty());
  EXPECT_EQ(find(none, verifier::Rule::async_operand_overwritten, 6), nullptr);
  verifier::CheckOptions o;
  o.target = "h200";
  EXPECT_NE(find(verifier::check(k, o), verifier::Rule::async_operand_overwritten, 6), nullptr);
}

TEST(KernelCheck, ACleanKernelIsVerifiedWithItsLoweredProgramNamedInTheReason) {
  auto v = verifier::check(kernel(kClean), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("the lowered program (8 grid steps"), std::string::npos) << v.reason;
}

TEST(KernelCheck, AGridTooLargeToCheckConcretelyWithNoCutIsUnknownWithTheReasonNeverVerified) {
  auto k = kernel(R"(kernel big:
    grid = (1024, 1024)
    in  x: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    out o: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...] + 1
        when program_id(0) + program_id(1) == 0:
            o[...] = x[...]
)");
  EXPECT_EQ(verifier::check_spec_rules(k, {}).status, Status::verified);
  auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::unknown);
  EXPECT_NE(v.reason.find("the lowered program is not checked"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("1048576 grid steps are more than the 65536"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("no cut (program_id(0) at line 7 is used other than in a comparison"),
            std::string::npos)
      << v.reason;
}

TEST(KernelCheck, AGridPastTheConcreteLimitIsVerifiedOnItsCutAndSaysSo) {
  auto k = kernel(R"(kernel big:
    grid = (1024, 1024)
    in  x: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    out o: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...] + 1
)");
  auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find(
                "the lowered program (1048576 grid steps) is race-free: checked on its grid cut to (6, 6)"),
            std::string::npos)
      << v.reason;
  verifier::CheckOptions walk;
  walk.grid_cut = false;
  EXPECT_EQ(verifier::check(k, walk).status, Status::unknown);
}

TEST(KernelCheck, AFindingOnACutWithinTheConcreteLimitIsReRunWholeForItsExactWitness) {
  // The last block of x is one short of the array: its prefetch at the step
  // before the last leaves it (index-out-of-bounds); 8192 steps, cut to 6.
  auto k = kernel(R"(kernel short:
    grid = (8192,)
    in  x: f32[65528, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[65536, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] + 1
)");
  verifier::CheckOptions o;
  auto cut = verifier::check(k, o);
  o.grid_cut = false;
  auto whole = verifier::check(k, o);
  EXPECT_EQ(cut.status, Status::violation);
  ASSERT_EQ(cut.findings.size(), whole.findings.size());
  for (std::size_t i = 0; i < cut.findings.size(); ++i) {
    EXPECT_EQ(cut.findings[i].rule, whole.findings[i].rule);
    EXPECT_EQ(cut.findings[i].message, whole.findings[i].message);
  }
}

TEST(KernelCheck, ASymbolicGridExtentWithoutAValueIsUnknownAndVerifiedOnceBound) {
  auto k = kernel(R"(kernel n_rows:
    param n >= 1
    grid = (n,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i % 8, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i % 8, 0)
    body:
        o[...] = x[...] + 1
)");
  auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::unknown) << v.reason;
  EXPECT_NE(v.reason.find("'n' has no value"), std::string::npos) << v.reason;
  verifier::CheckOptions o;
  o.overrides["n"] = 8;
  EXPECT_EQ(verifier::check(k, o).status, Status::verified) << verifier::check(k, o).reason;
}

TEST(KernelCheck, ASpecFindingOnAnOperandExplainsTheLoweredProgramsSymptomOnIt) {
  // Reduction axis first: the lowered program accumulates into a slot holding
  // another block (stale-read on the body line); reduction-not-last-axis on
  // the `out` line is the root cause and the only finding.
  auto k = kernel(R"(kernel first_axis:
    grid = (4, 4)
    in  x: f32[4, 512, 1024]  block=(None, 512, 256)  index=(k, j) -> (k, 0, j)
    out o: f32[512, 1024]     block=(512, 256)        index=(k, j) -> (0, j)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        o[...] += x[...]
)");
  std::vector<spec::Diagnostic> errs;
  auto low = spec::lower(k, {}, errs);
  ASSERT_TRUE(low);
  auto p = verifier::check_program(low->program, {});
  ASSERT_EQ(p.status, Status::violation);
  EXPECT_EQ(p.findings.at(0).rule, verifier::Rule::stale_read);
  EXPECT_EQ(p.findings.at(0).loc.line, 8);

  auto v = verifier::check(k, {});
  ASSERT_EQ(v.findings.size(), 1u) << v.findings.back().rule << ": " << v.findings.back().message;
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::reduction_not_last_axis);
  EXPECT_EQ(v.findings[0].loc.line, 4);
}

TEST(KernelCheck, ASpecViolationStaysAViolationWhenTheLoweredProgramIsNotChecked) {
  auto k = kernel(R"(kernel big_conflict:
    grid = (1024, 1024)
    dimension_semantics = (parallel, parallel)
    in  x: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    out o: f32[128, 1024]     block=(128, 1)  index=(i, j) -> (0, j)
    body:
        o[...] = x[...]
        when program_id(0) + program_id(1) == 0:
            o[...] = x[...] + 1
)");
  auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::violation);
  EXPECT_NE(v.reason.find("1048576 grid steps are more than the 65536"), std::string::npos) << v.reason;
}

TEST(KernelCheck, AnAliasedOutputsBlockWrittenBackUnstoredSaysTheWindowIsNotFetchedFromItsInput) {
  auto v = verifier::check(kernel(R"(kernel update_one:
    grid = (4,)
    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    in  new: f32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)
    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    alias x -> o
    body:
        when program_id(0) == 2:
            o[...] = new[...]
)"),
                           {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  const auto &f = v.findings[0];
  EXPECT_EQ(f.rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(f.message,
            "writes back the block of output 'o' at grid point (0,), which no statement stored: an "
            "aliased output's window is not fetched from 'x', so the block's old contents are "
            "replaced by garbage (in the lowered program)");
  ASSERT_FALSE(f.notes.empty());
  EXPECT_EQ(f.notes.back().loc.line, 6);
  EXPECT_NE(f.notes.back().message.find("store every block the grid visits (`o[...] = x[...]`"),
            std::string::npos)
      << f.notes.back().message;
}

// check_spec_rules evaluates a grid of at most enumerate_max_points points
// (fuzz speed); on every corpus kernel it must say what the solver says. In
// shards of the corpus (the solver takes minutes over all of it).
class KernelCheckShard : public ::testing::TestWithParam<int> {};
constexpr int kSmallGridShards = 6;

TEST_P(KernelCheckShard, SmallGridsAreDecidedByEvaluationWithTheSolversFindingsAndWitnesses) {
  auto describe = [](const verifier::Verdict &v) {
    std::string s = std::string(verifier::to_string(v.status)) + ":";
    for (const auto &f : v.findings) {
      s += " " + std::string(verifier::id(f.rule)) + "@" + std::to_string(f.loc.line) + "[";
      for (auto x : verifier::rules::witness_key(f.witness))
        s += std::to_string(x) + ",";
      s += "]";
    }
    return s;
  };
  int compared = 0;
  for (const auto &rel : testing_corpus::corpus_shard(GetParam(), kSmallGridShards)) {
    auto src = spec::SourceFile::from_string(
        rel, testing_corpus::read(std::filesystem::path(PIPECHECK_SOURCE_DIR) / rel));
    auto parsed = spec::parse_and_validate(src);
    if (!parsed.file) continue;
    for (const auto &unit : parsed.file->units) {
      const auto *k = std::get_if<spec::KernelSpec>(&unit);
      if (!k) continue;
      // (Grids over the enumerator's 4096 points go to the solver by default,
      // but for index maps that divide more than one variable or by a
      // non-constant, which are enumerated: the solver took minutes on the
      // corpus' such kernels, and under ASan libz3 reported a leak there.)
      if (testing_corpus::grid_points(*k) > 4096) continue;
      verifier::CheckOptions evaluated, solved;
      solved.enumerate_max_points = 0;
      auto a = verifier::check_spec_rules(*k, evaluated), b = verifier::check_spec_rules(*k, solved);
      if (b.status == Status::unknown) continue; // the evaluator may decide what the solver cannot
      ++compared;
      EXPECT_EQ(describe(a), describe(b)) << rel << ": kernel " << k->name;
    }
  }
  EXPECT_GT(compared, 30 / kSmallGridShards); // (over 30 in all)
}

INSTANTIATE_TEST_SUITE_P(Corpus, KernelCheckShard, ::testing::Range(0, kSmallGridShards));

// Mosaic GPU commits one bulk async-group per step, empty where the step
// copies nothing out, and `wait_smem_to_gmem(M - 1)` leaves at most the
// M - 1 most recent pending: at step t the copy-outs of steps t - M and
// before are done, whatever the steps between copied. An output visiting
// blocks for 1, M and 1 steps, stored on the first step of each visit, is
// race-free (counting the copies alone left the copy of step 1 in flight at
// step M + 1, which writes its slot: a false slot-race).
TEST(KernelCheck, AMosaicGpuOutputStoredOnTheFirstStepOfEachVisitIsRaceFreeThoughStepsBetweenCopyNothing) {
  for (int m : {2, 3}) {
    const std::string M = std::to_string(m);
    const std::string text = "kernel mv:\n    grid = (2, " + std::to_string(m + 2) +
                             ")\n    dimension_semantics = (parallel, sequential)\n    target = h100\n"
                             "    max_concurrent_steps = " +
                             M + "\n    in  x: f32[128, " + std::to_string(128 * (m + 2)) +
                             "]  block=(64, 128)  index=(i, j) -> (i, j)\n"
                             "    out o: f32[128, 384]  block=(64, 128)  index=(i, j) -> (i, (j + " +
                             std::to_string(m - 1) + ") // " + M +
                             ")\n    body:\n        when program_id(1) % " + M +
                             " == 1 or program_id(1) == 0:\n            o[...] = x[...]\n";
    auto v = verifier::check(kernel(text), {});
    EXPECT_EQ(v.status, Status::verified) << text << v.reason;
  }
}

TEST(KernelCheck, ALoweredIndexOutOfBoundsOnAWindowIsSaidInTheKernelsTermsAsRunSaysIt) {
  // A body loop whose last chunk passes the (2, 16, 128) block: the lowered
  // program faults on the slot ring `x_vmem[slot, 1, ds(.., 8), :]`; the
  // finding names x's ref, its dim 1 and its block, as `run` does.
  const auto k = kernel(R"(kernel k:
    grid = (2,)
    in  x: f32[4, 16, 128]  block=(2, 16, 128)  index=(i) -> (i, 0, 0)
    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[1, ds(8 + program_id(0) * 8, 8), :]
)");
  const auto v = verifier::check(k, {});
  const auto *f = find(v, verifier::Rule::index_out_of_bounds, 6);
  ASSERT_NE(f, nullptr) << v.reason;
  EXPECT_NE(f->message.find("'x[1, ds(8 + "), std::string::npos) << f->message;
  EXPECT_NE(
      f->message.find("slice 16:24 is out of bounds for dim 1 (extent 16) of x[2, 16, 128] (in the lowered "
                      "program, at grid point (1,))"),
      std::string::npos)
      << f->message;
}

TEST(KernelCheck, ATpuOperandBufferedPastTwoSlotsOrWithLookaheadIsVerifiedWithANoteThatPallasCallRefusesIt) {
  // jax's Mosaic TPU lowering of a pallas_call raises on both; emit_pipeline takes them.
  const std::string head = "kernel k:\n    grid = (8,)\n    target = tpu_v5e\n";
  const std::string out = "    out o: f32[64, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
                          "        o[...] = x[...]\n";
  for (const auto &[mode, said] : std::vector<std::pair<std::string, std::string>>{
           {"buffered=3", "'x' (buffered=3) is checked"},
           {"buffered=(2, lookahead)", "'x' (buffered=(2, lookahead)) is checked"}}) {
    const auto v = verifier::check(
        kernel(head + "    in  x: f32[64, 128]  block=(8, 128)  index=(i) -> (i, 0)  " + mode + "\n" + out),
        {});
    EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
    EXPECT_NE(v.reason.find(said + " with the slots buffered= asks for, which jax's TPU pallas_call does not "
                                   "compile"),
              std::string::npos)
        << v.reason;
  }
  const auto two = verifier::check(
      kernel(head + "    in  x: f32[64, 128]  block=(8, 128)  index=(i) -> (i, 0)  buffered=2\n" + out), {});
  EXPECT_EQ(two.reason.find("pallas_call does not compile"), std::string::npos) << two.reason;
}
