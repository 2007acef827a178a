// Masks the spec rules evaluate element by element: a `where` whose mask the
// params decide narrows what a read takes in (partial-block-reduction), and
// a masked store `o[...] = where(c, v, o[...])` keeps what it does not write
// (uninitialized-accumulator only when a kept element stays garbage).
#include "testing.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/model.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pipecheck {
namespace {

using testing::check_text;
using testing::Marks;
using testing::marks;
using testing::point_item;
using verifier::Rule;
using verifier::Status;

std::string k_remainder(const std::string &cmp) {
  return R"(kernel krem:
    param k = 300
    grid = (2, cdiv(k, 128))
    in  x: f32[16, k]   block=(8, 128)  index=(i, j) -> (i, j)
    out o: f32[16, 128]  block=(8, 128)  index=(i, j) -> (i, 0)
    scratch acc: f32[8, 128]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        when program_id(1) < cdiv(k, 128) - 1:
            acc[...] += x[...]
        when program_id(1) == cdiv(k, 128) - 1:
            a = where(iota((8, 128), 1) )" +
         cmp + R"( k % 128, x[...], 0)
            acc[...] += a
            o[...] = sum(acc[...], axis=1, keepdims=True) + zeros
)";
}

TEST(MaskedRead, AKRemainderMaskedWithIotaTakesNoPaddingIn) {
  auto v = check_text(k_remainder("<"), "krem");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? "" : v.findings[0].message);
}

TEST(MaskedRead, AnOffByOneKRemainderMaskIsAPartialBlockReduction) {
  auto v = check_text(k_remainder("<="), "krem");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::partial_block_reduction, 4}}));
}

// Grid point i writes rows [8 i, 8 i + 8) of the one output block and keeps
// the others: what step 0 keeps, step 1 writes.
std::string halves(const std::string &rows) {
  return R"(kernel halves:
    grid = (2,)
    dimension_semantics = (arbitrary,)
    in  x: f32[16, 128]  block=(16, 128)  index=(i) -> (0, 0)
    out o: f32[16, 128]  block=(16, 128)  index=(i) -> (0, 0)
    body:
        row = iota((16, 128), 0)
        mine = )" +
         rows + R"(
        o[...] = where(mine, x[...], o[...])
)";
}

TEST(MaskedStore, KeptRowsThatALaterGridPointWritesAreNoUninitializedRead) {
  auto v = check_text(halves("row // 8 == program_id(0)"), "halves");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? "" : v.findings[0].message);
}

TEST(MaskedStore, KeptRowsThatNoGridPointWritesAreReportedWithTheElement) {
  auto v = check_text(halves("row // 8 == program_id(0) + 1"), "halves");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::uninitialized_accumulator, 9}}));
  const auto &f = v.findings[0];
  EXPECT_EQ(point_item(f, "grid_point"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(f, "element"), (std::vector<std::int64_t>{0, 0}));
}

TEST(MaskedStore, AMaskOnDataKeepsEverythingAndIsReported) {
  // A mask that reads data has no concrete value: the store defines nothing
  // for sure, so what it keeps is garbage as far as the rules can tell.
  auto v = check_text(halves("x[...] > 0"), "halves");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::uninitialized_accumulator, 9}}));
}

// Triton's idiom on one revisited block: grid point i stores its chunk
// ds(16 i, 16), masked by the chunk's columns below `limit`, keeping the rest.
std::string chunks(const std::string &limit) {
  return R"(kernel chunks:
    grid = (4,)
    dimension_semantics = (arbitrary,)
    in  x: f32[64]  block=(64,)  index=(i) -> (0,)
    out o: f32[64]  block=(64,)  index=(i) -> (0,)
    body:
        col = program_id(0) * 16 + iota((16,), 0)
        o[ds(program_id(0) * 16, 16)] = where(col < )" +
         limit + R"(, x[ds(program_id(0) * 16, 16)], o[ds(program_id(0) * 16, 16)])
)";
}

TEST(MaskedStore, ChunksStoredAtTheirGridPointsCoverTheBlockTogether) {
  // The store's box depends on the grid point: each point's chunk, not the
  // whole block (it was a false uninitialized-accumulator at o[0], which
  // grid point (0,) does write).
  auto v = check_text(chunks("64"), "chunks");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(MaskedStore, AChunkMaskThatDropsTheTailIsReportedAtTheLastChunk) {
  auto v = check_text(chunks("60"), "chunks");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::uninitialized_accumulator, 8}}));
  const auto &f = v.findings[0];
  EXPECT_EQ(point_item(f, "grid_point"), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(point_item(f, "element"), (std::vector<std::int64_t>{60}));
}

TEST(MaskedStore, TheEnumeratorAgreesWithTheSymbolicChecker) {
  const std::pair<std::string, std::string> cases[] = {{halves("row // 8 == program_id(0)"), "halves"},
                                                       {halves("row // 8 == program_id(0) + 1"), "halves"},
                                                       {chunks("64"), "chunks"},
                                                       {chunks("60"), "chunks"}};
  for (const auto &[rows, name] : cases) {
    spec::File file = testing::parse_text(rows);
    const spec::KernelSpec k = testing::kernel(file, name); // the model points into it
    auto m = verifier::rules::build_model(k, {}, std::nullopt);
    ASSERT_TRUE(m.model);
    auto s = verifier::rules::check_symbolic(*m.model, 10000);
    auto e = verifier::rules::check_enumerated(*m.model);
    ASSERT_EQ(s.findings.size(), e.findings.size()) << rows;
    for (std::size_t i = 0; i < s.findings.size(); ++i)
      EXPECT_EQ(s.findings[i].witness, e.findings[i].witness) << rows;
  }
}

} // namespace
} // namespace pipecheck
