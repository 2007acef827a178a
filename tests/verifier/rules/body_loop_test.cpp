// Body loops under the spec rules: unrolled, so an effect guarded on the loop
// variable fires exactly at the iterations (and grid points) that run it.
#include "testing.hpp"

#include <gtest/gtest.h>

namespace pipecheck {
namespace {

using testing::check_text;
using testing::Marks;
using testing::marks;
using verifier::Status;

// Four chunks of a row are written by a loop; `when t == LAST` keeps one.
std::string chunked_copy(const std::string &guard, const std::string &range = "range(4)") {
  return "kernel chunks:\n"
         "    grid = (8,)\n"
         "    in  x: f32[64, 512]  block=(8, 512)  index=(i) -> (i, 0)\n"
         "    out o: f32[64, 512]  block=(8, 512)  index=(i) -> (i, 0)\n"
         "    body:\n"
         "        for t in " +
         range +
         ":\n"
         "            when " +
         guard +
         ":\n"
         "                o[...] = x[...]\n";
}

TEST(BodyLoops, AWriteGuardedOnAnIterationThatRunsCoversTheOutput) {
  auto v = check_text(chunked_copy("t == 3"), "chunks");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? "" : v.findings[0].message);
}

TEST(BodyLoops, AWriteGuardedOnAnIterationPastTheRangeNeverHappens) {
  auto v = check_text(chunked_copy("t == 4"), "chunks");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, 4}}));
}

TEST(BodyLoops, BoundsFromTheGridPointRunOnlyTheirIterations) {
  // Grid point i runs iterations 0 .. i - 1: only point 0 runs none, so its
  // block is the one never written.
  auto v = check_text(chunked_copy("t >= 0", "range(program_id(0))"), "chunks");
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, 4}}));
  EXPECT_NE(v.findings[0].message.find("block (0, 0)"), std::string::npos) << v.findings[0].message;
  v = check_text(chunked_copy("t >= 0", "range(program_id(0) + 1)"), "chunks");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? "" : v.findings[0].message);
}

TEST(BodyLoops, ADotWithTransBContractsTheLastDimOfItsRightOperand) {
  // k is [n, d]; dot(q, k, trans_b=True) contracts d, which is whole: no
  // partial-block reduction although n does not divide into blocks.
  const char *src = R"(kernel qk:
    grid = (4,)
    in  q: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    in  k: f32[1000, 128]  block=(256, 128)  index=(i) -> (i, 0)
    out o: f32[512, 256]  block=(128, 256)  index=(i) -> (i, 0)
    body:
        o[...] = dot(q[...], k[...], trans_b=True)
)";
  auto v = check_text(src, "qk");
  for (const auto &f : v.findings)
    EXPECT_NE(f.rule, verifier::Rule::partial_block_reduction) << f.message;
}

TEST(BodyLoops, ADotGeneralContractsExactlyItsContractDims) {
  // q and k are [1000, 128] in blocks of 256 rows: the last block is partial
  // along dim 0. Contracting dim 1 is whole; contracting dim 0 sums padding.
  auto src = [](const std::string &contract, const std::string &out) {
    return "kernel qk:\n    grid = (4,)\n"
           "    in  q: f32[1000, 128]  block=(256, 128)  index=(i) -> (i, 0)\n"
           "    in  k: f32[1000, 128]  block=(256, 128)  index=(i) -> (i, 0)\n"
           "    out o: " +
           out + "  index=(i) -> (i, 0)\n    body:\n        o[...] = dot_general(q[...], k[...], contract=" +
           contract + ")\n";
  };
  auto whole = check_text(src("((1,), (1,))", "f32[1024, 256]  block=(256, 256)"), "qk");
  for (const auto &f : whole.findings)
    EXPECT_NE(f.rule, verifier::Rule::partial_block_reduction) << f.message;
  auto padded = check_text(src("((0,), (0,))", "f32[512, 128]  block=(128, 128)"), "qk");
  bool found = false;
  for (const auto &f : padded.findings)
    found |= f.rule == verifier::Rule::partial_block_reduction;
  EXPECT_TRUE(found) << "contracting the partial dim 0 sums its padding";
}

} // namespace
} // namespace pipecheck

namespace pipecheck {
namespace {

TEST(BodyLoops, AHugeLoopIsUnknownNotAHang) {
  auto v = testing::check_text(chunked_copy("t == 3", "range(1000000000000)"), "chunks");
  EXPECT_EQ(v.status, verifier::Status::unknown);
  EXPECT_NE(v.reason.find("iterations"), std::string::npos) << v.reason;
}

// The spec rules unroll up to 1024 iterations (a causal attention's kv loop
// at 65536 tokens in blocks of 128 runs 512): one more is unknown with the
// reason, never verified, whether the bound is a constant or depends on the
// grid point (the most any point runs).
TEST(BodyLoops, ALoopOfAtMost1024IterationsIsModelledAndALongerOneIsUnknown) {
  for (const std::string &range : {std::string("range(1024)"), std::string("range(program_id(0) + 1017)")}) {
    auto v = check_text(chunked_copy("t == 0", range), "chunks");
    EXPECT_EQ(v.status, Status::verified) << range << ": " << v.reason;
  }
  for (const std::string &range : {std::string("range(1025)"), std::string("range(program_id(0) + 1018)")}) {
    auto v = check_text(chunked_copy("t == 0", range), "chunks");
    EXPECT_EQ(v.status, Status::unknown) << range;
    EXPECT_NE(v.reason.find("more than 1024 iterations"), std::string::npos) << range << ": " << v.reason;
  }
}

// A ragged row of n = 1000 in chunks of 128 through `ds`: range(n // bs)
// misses the tail 896:1000, range(cdiv(n, bs)) covers it.
std::string ds_chunks(const std::string &trips) {
  return "kernel ds_chunks:\n"
         "    param n = 1000\n"
         "    param bs = 128\n"
         "    grid = (8,)\n"
         "    in  x: f32[64, n]  block=(8, cdiv(n, bs) * bs)  index=(i) -> (i, 0)\n"
         "    out o: f32[64, n]  block=(8, cdiv(n, bs) * bs)  index=(i) -> (i, 0)\n"
         "    body:\n"
         "        for t in range(" +
         trips +
         "):\n"
         "            o[:, ds(t * bs, bs)] = x[:, ds(t * bs, bs)]\n";
}

TEST(BodyLoops, ADsStorePerChunkCoversOnlyItsChunkSoARoundedDownLoopLeavesTheTail) {
  auto v = check_text(ds_chunks("n // bs"), "ds_chunks");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, 6}}));
  EXPECT_EQ(testing::point_item(v.findings[0], "cell_lo"), (std::vector<std::int64_t>{0, 896}));
  EXPECT_EQ(testing::point_item(v.findings[0], "cell_hi"), (std::vector<std::int64_t>{8, 1024}));
}

TEST(BodyLoops, ADsStorePerChunkOverCdivChunksCoversTheRaggedRow) {
  auto v = check_text(ds_chunks("cdiv(n, bs)"), "ds_chunks");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

} // namespace
} // namespace pipecheck

namespace pipecheck {
namespace {

// A loop that starts at a grid-dependent chunk: odd grid points skip chunk
// 0, so `ds(t * bs, bs)`'s start is not static and its store's box is not
// the chunk it writes. Coverage must not take it as the whole block; it
// places the store at each grid point instead.
std::string ds_from_the_grid(const std::string &extra, const std::string &grid = "8") {
  return "kernel ds_skip:\n"
         "    param n = 1024\n"
         "    param bs = 128\n"
         "    grid = (" +
         grid +
         ",)\n"
         "    dimension_semantics = (parallel,)\n"
         "    in  x: f32[" +
         std::to_string(8 * std::stoll(grid)) +
         ", n]  block=(8, n)  index=(i) -> (i, 0)\n"
         "    out o: f32[" +
         std::to_string(8 * std::stoll(grid)) +
         ", n]  block=(8, n)  index=(i) -> (i, 0)\n"
         "    body:\n" +
         extra +
         "        for t in range(program_id(0) % 2, n // bs):\n"
         "            o[:, ds(t * bs, bs)] = x[:, ds(t * bs, bs)]\n";
}

bool says_not_covered(const verifier::rules::RuleOutcome &r) {
  for (const auto &f : r.findings)
    if (f.rule == verifier::Rule::output_not_covered) return true;
  return false;
}
bool unknown_on_coverage(const verifier::rules::RuleOutcome &r) {
  for (const auto &u : r.unknown)
    if (u.find("output 'o' is stored in parts that move with the grid point") != std::string::npos)
      return true;
  return false;
}

// The symbolic checker's and the enumerator's outcomes on text's ds_skip.
std::vector<verifier::rules::RuleOutcome> both_outcomes(const std::string &text) {
  const spec::KernelSpec k = testing::kernel(testing::parse_text(text), "ds_skip");
  auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
  if (!m.model) {
    ADD_FAILURE() << "no model: " << m.unknown_reason;
    return {};
  }
  return {verifier::rules::check_symbolic(*m.model, 10000), verifier::rules::check_enumerated(*m.model)};
}

TEST(BodyLoops, ADsStoreWhoseStartDependsOnTheGridPointIsPlacedAtEachGridPoint) {
  const std::string text = ds_from_the_grid("");
  for (const auto &r : both_outcomes(text)) {
    ASSERT_TRUE(says_not_covered(r)) << (r.unknown.empty() ? "no finding" : r.unknown[0]);
    // Grid point 1 skips chunk 0 of its block: element (8, 0) is written back undefined.
    const auto &f = r.findings.front();
    EXPECT_EQ(testing::point_item(f, "element"), (std::vector<std::int64_t>{8, 0}));
    EXPECT_EQ(testing::point_item(f, "grid_point"), (std::vector<std::int64_t>{1}));
  }
}

TEST(BodyLoops, ADsStoreFromTheGridPointOverEveryChunkIsVerified) {
  std::string text = ds_from_the_grid("");
  text.replace(text.find("program_id(0) % 2"), 17, "program_id(0) % 1");
  auto v = testing::check_text(text, "ds_skip");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(BodyLoops, ADsStoreFromTheGridPointOverAGridTooLargeToPlaceIsUnknown) {
  // Placed per grid point and element up to 4096 parallel points: past
  // that, undecided, not a guess either way.
  const std::string text = ds_from_the_grid("", "8192");
  for (const auto &r : both_outcomes(text)) {
    EXPECT_FALSE(says_not_covered(r));
    EXPECT_TRUE(unknown_on_coverage(r)) << (r.unknown.empty() ? "no unknown" : r.unknown[0]);
  }
}

TEST(BodyLoops, ADsStoreFromTheGridPointWithAStaticStoreCoveringTheRestIsDecided) {
  // The static store writes chunk 0 everywhere: the decided stores cover
  // the block, so the undecided one does not matter.
  const std::string text = ds_from_the_grid("        o[:, 0:bs] = x[:, 0:bs]\n");
  for (const auto &r : both_outcomes(text)) {
    EXPECT_FALSE(says_not_covered(r));
    EXPECT_FALSE(unknown_on_coverage(r));
  }
}

} // namespace
} // namespace pipecheck
