#include "verifier/races/races.hpp"

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
      got.insert({fi.rule, fi.loc.line});
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
    EXPECT_EQ(fi.rule, "async-operand-overwritten");
    EXPECT_EQ(std::get<std::int64_t>(fi.witness.items[0].value), 5);
  }
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
  EXPECT_EQ(v.findings[0].rule, "wait-without-copy");
  EXPECT_EQ(v.findings[0].loc.line, 8);
}

TEST(RaceChecker, ReportsAReadOfASlotNothingWrote) {
  auto f = parse_text("t.pk", R"(pipeline u:
    param N >= 1
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    sram Y[2]: f32[8]
    for i in range(N):
        Y[i % 2] = X[i % 2] + 1
        copy_out_start(Y[i % 2], A[i])
        copy_out_wait(Y[i % 2])
)");
  auto v = verifier::check_program(program(f, "u"), {});
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, "uninitialized-read");
  EXPECT_EQ(v.findings[0].loc.line, 7);
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
  EXPECT_EQ(v.findings[0].rule, "slot-race");
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
        "rules/uninitialized-read.pk"}) {
    std::string path = (std::filesystem::path(PIPECHECK_SOURCE_DIR) / "corpus" / "examples" / rel).string();
    std::ifstream in(path);
    if (!in) continue;
    SCOPED_TRACE(rel);
    std::stringstream ss;
    ss << in.rdbuf();
    expect_as_annotated(parse_text(path, ss.str()));
  }
}
