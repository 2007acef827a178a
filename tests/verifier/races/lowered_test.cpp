// The emitter's programs through the race checker: every lowered corpus
// kernel is race-free unless its spec has a spec-level bug.
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "verifier/check.hpp"
#include "verifier/races/races.hpp"

#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace pipecheck;

namespace {

/// Spec-level rules whose lowered programs are expected to show a symptom.
bool has_spec_level_expectation(const spec::File &f, const spec::KernelSpec &k, int next_line) {
  for (auto &e : f.expectations)
    if (e.line >= k.loc.line && e.line < next_line && e.rule != "verified") return true;
  return false;
}

// In shards of the corpus, run in parallel (minutes under ASan in one).
class LoweredCorpus : public ::testing::TestWithParam<int> {};
constexpr int kShards = 4;

} // namespace

TEST_P(LoweredCorpus, EveryCleanKernelLowersToARaceFreeProgramThatRoundTrips) {
  int lowered = 0;
  for (const auto &rel : testing_corpus::corpus_shard(GetParam(), kShards)) {
    const std::string path = std::string(PIPECHECK_SOURCE_DIR) + "/" + rel;
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = spec::parse_and_validate(spec::SourceFile::from_string(path, ss.str()));
    if (!r.file) continue;
    const auto &f = *r.file;
    for (std::size_t u = 0; u < f.units.size(); ++u) {
      auto *k = std::get_if<spec::KernelSpec>(&f.units[u]);
      if (!k) continue;
      int next = u + 1 < f.units.size() ? spec::unit_loc(f.units[u + 1]).line : 1 << 30;
      std::vector<spec::Diagnostic> errs;
      auto low = spec::lower(*k, {}, errs);
      if (!low) {
        ADD_FAILURE() << path << ": " << k->name << ": " << (errs.empty() ? "" : errs[0].message);
        continue;
      }
      ++lowered;
      std::string text = spec::print(low->program);
      auto back = spec::parse(spec::SourceFile::from_string("lowered.pk", text));
      ASSERT_TRUE(back.file) << k->name << ": " << back.errors[0].message << "\n" << text.substr(0, 2000);
      ASSERT_EQ(back.file->units.size(), 1u);
      EXPECT_TRUE(std::get<spec::Program>(back.file->units[0]) == low->program) << k->name;
      // (As the kernel's check runs it: a scratch's stale reads by grid step.)
      verifier::CheckOptions po;
      po.step_of = [&](int top, const std::vector<std::int64_t> &it) { return low->step(top, it); };
      auto v = verifier::check_program(low->program, po);
      if (has_spec_level_expectation(f, *k, next)) {
        EXPECT_NE(v.status, verifier::Status::unknown) << k->name << ": " << v.reason;
        continue;
      }
      // An output revisited only after visits that store nothing: those
      // visits write back undefined data (uninitialized-read in the program)
      // that the last visit replaces, which the kernel's check accepts.
      if (v.status == verifier::Status::violation &&
          !verifier::check_spec_rules(*k, {}).unstored_revisits.empty() &&
          std::all_of(v.findings.begin(), v.findings.end(),
                      [](const auto &x) { return x.rule == verifier::Rule::uninitialized_read; }))
        continue;
      EXPECT_EQ(v.status, verifier::Status::verified)
          << path << ": " << k->name << ": " << v.reason
          << (v.findings.empty() ? "" : " " + to_string(v.findings[0].rule) + ": " + v.findings[0].message);
    }
  }
  EXPECT_GT(lowered, 10 / kShards); // (over 10 in all)
}

INSTANTIATE_TEST_SUITE_P(Corpus, LoweredCorpus, ::testing::Range(0, kShards));

namespace {

verifier::Verdict check_lowered(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors[0].message;
    return {};
  }
  std::vector<spec::Diagnostic> errs;
  auto l = spec::lower(std::get<spec::KernelSpec>(r.file->units.at(0)), {}, errs);
  if (!l) {
    ADD_FAILURE() << errs[0].message;
    return {};
  }
  return verifier::check_program(l->program, {});
}

std::string gpu_matmul(int delay_release) {
  return R"(kernel mm:
    grid = (8,)
    target = h200
    max_concurrent_steps = 4
    delay_release = )" +
         std::to_string(delay_release) + R"(
    dimension_semantics = (sequential,)
    in  a: bf16[128, 512]  block=(128, 64)  index=(k) -> (0, k)
    in  b: bf16[512, 128]  block=(64, 128)  index=(k) -> (k, 0)
    out o: f32[128, 128]   block=(128, 128) index=(k) -> (0, 0)
    scratch acc: f32[128, 128]  memory_space=acc
    body:
        when program_id(0) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(0) == num_programs(0) - 1:
            o[...] = acc[...]
)";
}

} // namespace

TEST(LoweredPrograms, BufferedThreeLookaheadRevisitAnyAndAliasingAreRaceFree) {
  for (const char *text : {
           R"(kernel b3:
    grid = (6,)
    in  x: f32[768, 128]  block=(128, 128)  index=(i) -> (i, 0)  buffered=3
    out o: f32[768, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)",
           R"(kernel la:
    grid = (8,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i // 2, 0)  buffered=(3, lookahead)
    out o: f32[1024, 128] block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)",
           R"(kernel fold:
    grid = (8,)
    in  x: f32[1024, 256]  block=(128, 256)  index=(i) -> (i, 0)
    out o: f32[512, 256]   block=(128, 256)  index=(i) -> (i % 4, 0)  buffered=1  revisit=any
    body:
        when program_id(0) < 4:
            o[...] = zeros
        o[...] += x[...]
)",
           R"(kernel inplace:
    grid = (8,)
    in  x: f32[1024, 512]  block=(128, 512)  index=(i) -> (i, 0)
    out o: f32[1024, 512]  block=(128, 512)  index=(i) -> (i, 0)
    alias x -> o
    body:
        o[...] = x[...] + 1
)"}) {
    auto v = check_lowered(text);
    EXPECT_EQ(v.status, verifier::Status::verified)
        << text << v.reason
        << (v.findings.empty() ? "" : to_string(v.findings[0].rule) + " " + v.findings[0].message);
  }
}

TEST(LoweredPrograms, RevisitWithoutAnyIsAStaleReadInTheProgram) {
  auto v = check_lowered(R"(kernel fold:
    grid = (8,)
    in  x: f32[1024, 256]  block=(128, 256)  index=(i) -> (i, 0)
    out o: f32[512, 256]   block=(128, 256)  index=(i) -> (i % 4, 0)
    body:
        when program_id(0) < 4:
            o[...] = zeros
        o[...] += x[...]
)");
  ASSERT_EQ(v.status, verifier::Status::violation);
  bool stale = false;
  for (auto &f : v.findings)
    stale = stale || (f.rule == verifier::Rule::stale_read && f.loc.line == 8);
  EXPECT_TRUE(stale);
}

TEST(LoweredPrograms, GpuPipelineNeedsDelayReleaseForAsynchronousWgmma) {
  auto bad = check_lowered(gpu_matmul(0));
  ASSERT_EQ(bad.status, verifier::Status::violation) << bad.reason;
  EXPECT_EQ(bad.findings[0].rule, verifier::Rule::async_operand_overwritten);
  auto good = check_lowered(gpu_matmul(1));
  EXPECT_EQ(good.status, verifier::Status::verified)
      << good.reason
      << (good.findings.empty() ? "" : to_string(good.findings[0].rule) + " " + good.findings[0].message);
}

TEST(LoweredPrograms, TheStandardMosaicGpuMatmulIsRaceFreeWithDelayReleaseAndNotWithout) {
  const std::string path = std::string(PIPECHECK_SOURCE_DIR) + "/corpus/guide/gpu_pallas_call.pk";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = spec::parse_and_validate(spec::SourceFile::from_string(path, ss.str()));
  ASSERT_TRUE(r.file);
  spec::KernelSpec k;
  for (auto &u : r.file->units)
    if (auto *x = std::get_if<spec::KernelSpec>(&u); x && x->name == "gpu_matmul") k = *x;
  ASSERT_EQ(k.name, "gpu_matmul");
  auto check = [&](std::int64_t delay_release) {
    for (auto &s : k.settings)
      if (s.key == "delay_release") s.value = spec::Expr::integer(delay_release);
    std::vector<spec::Diagnostic> errs;
    auto l = spec::lower(k, {}, errs);
    EXPECT_TRUE(l) << (errs.empty() ? "" : errs[0].message);
    return l ? verifier::check_program(l->program, {}) : verifier::Verdict{};
  };
  auto good = check(1);
  EXPECT_EQ(good.status, verifier::Status::verified) << good.reason;
  auto bad = check(0);
  ASSERT_EQ(bad.status, verifier::Status::violation) << bad.reason;
  // The refills of a and b are the kernel's BlockSpec lines.
  std::set<std::pair<verifier::Rule, int>> found;
  for (auto &f : bad.findings)
    found.insert({f.rule, f.loc.line});
  EXPECT_EQ(found,
            (std::set<std::pair<verifier::Rule, int>>{{verifier::Rule::async_operand_overwritten, 21},
                                                      {verifier::Rule::async_operand_overwritten, 22}}));
}
