// `backend = triton`: every grid point a concurrent program whose stores
// reach the output array itself. Conflicts are stores of one element by two
// programs (not overlapping blocks), coverage is what some program stores,
// and a kernel right on Mosaic TPU's sequential axes can race here.
#include "testing.hpp"
#include "verifier/rules/model.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>

namespace pipecheck {
namespace {

using testing::check_text;
using testing::expect_enumerator_agrees;
using testing::Marks;
using testing::marks;
using testing::point_item;
using verifier::Rule;
using verifier::Status;

// A matmul with its k chunks in the grid, TPU style; `backend` is a line of
// the kernel or nothing.
std::string split_k(const std::string &backend) {
  return R"(kernel mm:
    grid = (2, 2, 4)
)" + backend +
         R"(    in  a: f32[64, 256]  block=(32, 64)  index=(i, j, c) -> (i, c)
    in  b: f32[256, 64]  block=(64, 32)  index=(i, j, c) -> (c, j)
    out o: f32[64, 64]  block=(32, 32)  index=(i, j, c) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += dot(a[...], b[...])
)";
}

TEST(Triton, ProgramsOfOneOutputBlockRaceWhereMosaicTpuRunsThemInOrder) {
  auto tpu = check_text(split_k(""), "mm");
  EXPECT_EQ(tpu.status, Status::verified) << (tpu.findings.empty() ? tpu.reason : tpu.findings[0].message);

  auto v = check_text(split_k("    backend = triton\n"), "mm");
  ASSERT_EQ(v.status, Status::violation);
  // The programs past k = 0 also read o before they store it: garbage, or
  // the init of the program k = 0 if it happened to land first.
  EXPECT_EQ(marks(v), (Marks{{Rule::parallel_write_conflict, 6}, {Rule::uninitialized_accumulator, 10}}));
  const verifier::Finding *race = nullptr, *garbage = nullptr;
  for (const auto &g : v.findings)
    (g.rule == Rule::parallel_write_conflict ? race : garbage) = &g;
  ASSERT_TRUE(race && garbage);
  EXPECT_EQ(point_item(*garbage, "grid_point"), (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(point_item(*garbage, "element"), (std::vector<std::int64_t>{0, 0}));
  const auto &f = *race;
  EXPECT_EQ(point_item(f, "element"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(f, "first_write"), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(point_item(f, "second_write"), (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_NE(f.message.find("concurrent programs"), std::string::npos) << f.message;
}

// Each program stores chunk ds(stride * i, 16) of one whole-array block.
std::string chunks(const std::string &stride, const std::string &grid = "4") {
  return R"(kernel chunks:
    grid = ()" +
         grid + R"(,)
    backend = triton
    in  x: f32[64]  block=(64,)  index=(i) -> (0,)
    out o: f32[64]  block=(64,)  index=(i) -> (0,)
    body:
        o[ds(program_id(0) * )" +
         stride + R"(, 16)] = x[ds(program_id(0) * )" + stride + R"(, 16)]
)";
}

// A Triton program's stores reach the array: an unmasked store of a block
// that passes the array's end writes past it; masked to the array, it does
// not. (The block padded to whole windows, as the JAX bridge pads a gather's
// block, does not hide it.)
TEST(Triton, AStorePastTheArraysEndIsOutOfBoundsUnlessItsMaskKeepsIt) {
  const std::string src = R"(kernel tail:
    grid = (4,)
    backend = triton
    in  x: f32[50]  block=(64,)  index=(i) -> (0,)
    out o: f32[50]  block=(64,)  index=(i) -> (0,)
    body:
        o[ds(program_id(0) * 16, 16)] = x[ds(program_id(0) * 16, 16)] + 1.0
)";
  auto v = check_text(src, "tail");
  EXPECT_EQ(marks(v), (Marks{{Rule::index_out_of_bounds, 7}}));
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{50}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{3}));
  std::string masked = src;
  const std::string store = "o[ds(program_id(0) * 16, 16)] = x[ds(program_id(0) * 16, 16)] + 1.0";
  masked.replace(masked.find(store), store.size(),
                 "o[ds(program_id(0) * 16, 16)] = where(program_id(0) * 16 + iota((16,), 0) < 50, "
                 "x[ds(program_id(0) * 16, 16)] + 1.0, o[ds(program_id(0) * 16, 16)])");
  EXPECT_EQ(check_text(masked, "tail").status, verifier::Status::verified);
}

// Past the element replay's limits (70000 programs) the solver finds the
// program whose block passes the end, and the first element past it.
TEST(Triton, AStorePastTheEndIsFoundByTheSolverOnAGridTooLargeToReplay) {
  const std::string src = R"(kernel big:
    grid = (70000,)
    backend = triton
    in  x: f32[279999]  block=(4,)  index=(i) -> (i,)
    out o: f32[279999]  block=(4,)  index=(i) -> (i,)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "big");
  EXPECT_EQ(marks(v), (Marks{{Rule::index_out_of_bounds, 7}})) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{279999}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{69999}));
  std::string exact = src;
  for (std::size_t at; (at = exact.find("279999")) != std::string::npos;)
    exact.replace(at, 6, "280000");
  EXPECT_EQ(check_text(exact, "big").status, verifier::Status::verified) << check_text(exact, "big").reason;
}

TEST(Triton, AMaskThatSelectsAPastTheEndLaneAtOneGridPointOfManyIsFoundThereOnTheGridCut) {
  // 70000 programs load the ragged last row block (rows 16..23 of 17); the
  // mask keeps row 16 only, but at (2, 69999) it selects them all. The grid
  // cut keeps the values the body compares with (69999) and finds it there;
  // without the cut, the solver's first points are right, and past them a
  // mask naming that axis is undecided (it was verified). Its twin's mask
  // names axis 0 alone, whose one ragged value the first point covers.
  const std::string bad = R"(kernel k:
    grid = (3, 70000)
    backend = triton
    in  x: f32[17, 70000]  block=(8, 1)  index=(i, j) -> (i, j)
    out o: f32[24, 70000]  block=(8, 1)  index=(i, j) -> (i, j)
    body:
        v = where(reshape(((program_id(0) != 2) | (iota((8,), 0) < 1)) | (program_id(1) == 69999), (8, 1)), x[...], 0.0)
        o[...] = broadcast_to(v[0:1, :] * 2.0, (8, 1))
)";
  auto v = check_text(bad, "k");
  ASSERT_EQ(marks(v), (Marks{{Rule::index_out_of_bounds, 7}})) << v.reason;
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{2, 69999}));
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{17, 69999}));
  EXPECT_NE(
      v.findings[0].message.find("element (17, 69999) of 'x', outside its shape (17, 70000), at grid point "
                                 "(2, 69999)"),
      std::string::npos)
      << v.findings[0].message;
  verifier::CheckOptions whole;
  whole.grid_cut = false;
  auto solver = check_text(bad, "k", whole);
  EXPECT_EQ(solver.status, Status::unknown) << solver.reason;
  EXPECT_NE(solver.reason.find("the mask of the load of 'x' on line 7 depends on the grid point"),
            std::string::npos)
      << solver.reason;
  std::string good = bad;
  good.replace(good.find(" | (program_id(1) == 69999)"), std::string(" | (program_id(1) == 69999)").size(),
               "");
  EXPECT_EQ(check_text(good, "k").status, Status::verified) << check_text(good, "k").reason;
}

// A ragged BlockSpec block (256 over 1000, rows of 100 in blocks of 32):
// Triton's block is a view of the array, so a load with no mask reads past
// it at the last program, even where the store is masked; a masked load
// (the ref inside a where's branch) reads only the lanes its mask selects.
std::string ragged_rows(const std::string &value) {
  return R"(kernel rows:
    grid = (4, 2)
    backend = triton
    in  x: f32[100, 64]  block=(32, 32)  index=(i, j) -> (i, j)
    in  w: f32[32, 64]  block=(32, 32)  index=(i, j) -> (0, j)
    out o: f32[100, 64]  block=(32, 32)  index=(i, j) -> (i, j)
    body:
        m = program_id(0) * 32 + iota((32, 32), 0) < 100
)" + std::string("        ") +
         value + "\n";
}

TEST(Triton, AnUnmaskedLoadOfARaggedBlockReadsPastTheArrayAndAMaskedOneDoesNot) {
  // (The load in a where's condition, a dot's operand, a reduction's: each
  // loads every lane, whatever the mask keeps of the result.)
  for (const std::string unmasked :
       {"o[...] = where(m & (x[...] > -1.0), x[...], o[...])",
        "o[...] = where(m, dot(x[...], w[...]), o[...])",
        "o[...] = where(m, x[...] - max(x[...], axis=1, keepdims=True), o[...])"}) {
    auto v = check_text(ragged_rows(unmasked), "rows");
    const auto oob = std::find_if(v.findings.begin(), v.findings.end(), [](const verifier::Finding &f) {
      return f.rule == Rule::index_out_of_bounds && f.loc.line == 9;
    });
    ASSERT_NE(oob, v.findings.end()) << unmasked << ": " << v.reason;
    EXPECT_EQ(point_item(*oob, "element"), (std::vector<std::int64_t>{100, 0})) << unmasked;
    EXPECT_EQ(point_item(*oob, "grid_point"), (std::vector<std::int64_t>{3, 0})) << unmasked;
    EXPECT_NE(oob->message.find("a load with no mask reads memory past the array"), std::string::npos);
  }
  // Through a local: `t = x[...]` loads every lane, whatever masks its use.
  auto local = check_text(ragged_rows("t = x[...]\n        o[...] = where(m, t * 2.0, o[...])"), "rows");
  EXPECT_EQ(marks(local), (Marks{{Rule::index_out_of_bounds, 9}})) << local.reason;
  for (const std::string masked :
       {"o[...] = where(m, x[...], o[...])", "o[...] = where(m, x[...] * 2.0 + 1.0, o[...])",
        "o[...] = where(m, where(m, x[...], 0.0) - 1.0, o[...])"}) {
    auto v = check_text(ragged_rows(masked), "rows");
    EXPECT_EQ(v.status, verifier::Status::verified) << masked << ": " << v.reason;
  }
  // The same kernels on Mosaic TPU read the block's padding, in bounds.
  std::string tpu = ragged_rows("o[...] = where(m, x[...], o[...]) + 0.0 * x[...]");
  tpu.erase(tpu.find("    backend = triton\n"), 21);
  EXPECT_NE(marks(check_text(tpu, "rows")), (Marks{{Rule::index_out_of_bounds, 8}}));
}

// A masked load reads the lanes its own mask selects at each grid point: one
// that mask lets past the array's end is index-out-of-bounds at the load,
// whatever an enclosing where or the store's mask does with the lane after
// (Triton issues the load with its mask alone); an inverted mask and a ref
// broadcast against it too.
TEST(Triton, AMaskedLoadWhoseMaskSelectsALanePastTheArrayReadsPastIt) {
  struct Case {
    const char *value;
    std::vector<std::int64_t> element; // empty: verified
  };
  const Case cases[] = {
      {"o[...] = where(m, where(program_id(0) * 32 + iota((32, 32), 0) <= 100, x[...], 0.0), o[...])",
       {100, 0}},
      {"o[...] = where(m, where(program_id(0) * 32 + iota((32, 32), 0) < 100, x[...], 0.0) * 2.0, o[...])",
       {}},
      {"o[...] = where(m, where(program_id(0) * 32 + iota((32, 32), 0) <= 100, 1.0, 0.0), o[...]) + "
       "where(program_id(0) * 32 + iota((32, 1), 0) <= 100, x[...], 0.0)",
       {100, 0}},
      {"o[...] = where(m, where(program_id(0) * 32 + iota((32, 32), 0) > 100, 0.0, x[...]), o[...])",
       {100, 0}},
      {"o[...] = where(m, where(program_id(0) * 32 + iota((32, 32), 0) > 99, 0.0, x[...]), o[...])", {}},
      {"o[...] = where(m, where(program_id(0) * 32 + iota((32, 32), 0) > 100, 0.0, x[...] * 2.0), o[...]) + "
       "0.0 * where(program_id(0) * 32 + iota((32, 1), 0) > 100, 0.0, x[...])",
       {100, 0}},
      // A mask that reads data is not decided here (the padding flow follows it).
      {"o[...] = where(m, where(w[...] > 0.0, x[...], 0.0), o[...])", {}},
  };
  for (const auto &c : cases) {
    auto v = check_text(ragged_rows(c.value), "rows");
    if (c.element.empty()) {
      EXPECT_TRUE(
          std::none_of(v.findings.begin(), v.findings.end(),
                       [](const verifier::Finding &f) { return f.rule == Rule::index_out_of_bounds; }))
          << c.value << ": " << (v.findings.empty() ? v.reason : v.findings[0].message);
      continue;
    }
    const auto oob = std::find_if(v.findings.begin(), v.findings.end(), [](const verifier::Finding &f) {
      return f.rule == Rule::index_out_of_bounds && f.loc.line == 9;
    });
    ASSERT_NE(oob, v.findings.end()) << c.value << ": " << v.reason;
    EXPECT_EQ(point_item(*oob, "element"), c.element) << c.value;
    EXPECT_EQ(point_item(*oob, "grid_point"), (std::vector<std::int64_t>{3, 0})) << c.value;
    EXPECT_NE(oob->message.find("this masked load reads"), std::string::npos) << oob->message;
  }
}

// Past the element replay's limits the solver finds the load's program.
TEST(Triton, AnUnmaskedLoadPastTheEndIsFoundByTheSolverOnAGridTooLargeToReplay) {
  const std::string src = R"(kernel big:
    grid = (70000,)
    backend = triton
    in  x: f32[279999]  block=(4,)  index=(i) -> (i,)
    out o: f32[279999]  block=(4,)  index=(i) -> (i,)
    body:
        t = x[...]
        o[...] = where(program_id(0) * 4 + iota((4,), 0) < 279999, t * 2.0, o[...])
)";
  auto v = check_text(src, "big");
  ASSERT_FALSE(v.findings.empty()) << v.reason;
  EXPECT_EQ(marks(v), (Marks{{Rule::index_out_of_bounds, 7}})) << v.reason;
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{279999}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{69999}));
  // A masked load: the lanes its mask selects at the solver's point. One
  // that selects every lane reads past the end as the plain load does; one
  // that keeps to the array reads nothing past it.
  std::string every = src;
  every.replace(every.find("t = x[...]"), 10, "t = where(iota((4,), 0) >= 0, x[...], 0.0)");
  auto e = check_text(every, "big");
  EXPECT_EQ(marks(e), (Marks{{Rule::index_out_of_bounds, 7}})) << e.reason;
  ASSERT_FALSE(e.findings.empty());
  EXPECT_EQ(point_item(e.findings[0], "element"), (std::vector<std::int64_t>{279999}));
  EXPECT_NE(e.findings[0].message.find("masked load"), std::string::npos) << e.findings[0].message;
  std::string kept = src;
  kept.replace(kept.find("t = x[...]"), 10,
               "t = where(program_id(0) * 4 + iota((4,), 0) < 279999, x[...], 0.0)");
  EXPECT_TRUE(marks(check_text(kept, "big")).empty()) << check_text(kept, "big").reason;
}

// Past the replay, the masked load's mask is evaluated at the points the
// solver finds whose ref passes the end, in run order (up to 64 of them):
// one wrong only at the eleventh is found there.
TEST(Triton, PastTheReplayAMaskedLoadIsEvaluatedAtTheNextPointsPastTheEndToo) {
  const std::string src = R"(kernel k:
    grid = (4, 70000)
    backend = triton
    in  x: f32[25, 70000]  block=(8, 1)  index=(i, j) -> (i, j)
    out o: f32[32, 70000]  block=(8, 1)  index=(i, j) -> (i, j)
    body:
        v = where(reshape((program_id(0) * 8 + iota((8,), 0) < 25) | (program_id(1) == 10), (8, 1)), x[...], 0.0)
        o[...] = v * 2.0
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(marks(v), (Marks{{Rule::index_out_of_bounds, 7}})) << v.reason;
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{3, 10}));
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{25, 10}));
  std::string right = src;
  right.replace(right.find(" | (program_id(1) == 10)"), 24, "");
  EXPECT_TRUE(marks(check_text(right, "k")).empty()) << check_text(right, "k").reason;
}

// A store masked by a slice of a mask local (`mask=m[4:32]` in Pallas):
// the mask evaluates through the local's value, as `m` alone does.
TEST(Triton, AStoreMaskedByASliceOfAMaskLocalIsDecidedByItsValue) {
  const std::string src = R"(kernel k:
    grid = (4,)
    backend = triton
    in  x: f32[256]  block=(64,)  index=(i,) -> (i,)
    out o: f32[232]  block=(64,)  index=(i,) -> (i,)
    body:
        o[0:32] = x[0:32]
        m = ((program_id(0) * 64) + iota((64,), 0)) < 232
        o[32:64] = where(m[32:64], x[32:64], o[32:64])
)";
  auto v = check_text(src, "k");
  EXPECT_EQ(v.status, verifier::Status::verified)
      << v.reason << (v.findings.empty() ? "" : v.findings[0].message);
  // Misaligned by four: the last program's mask lets o[232:236] through.
  std::string bad = src;
  bad.replace(bad.find("m[32:64]"), 8, "m[28:60]");
  auto b = check_text(bad, "k");
  EXPECT_EQ(marks(b), (Marks{{Rule::index_out_of_bounds, 9}})) << b.reason;
  ASSERT_FALSE(b.findings.empty());
  EXPECT_EQ(point_item(b.findings[0], "element"), (std::vector<std::int64_t>{232}));
}

TEST(Triton, ChunksThatTileTheArrayAreNoConflictThoughTheyShareOneBlock) {
  // Mosaic would write the whole block back from every core: a conflict there.
  auto v = check_text(chunks("16"), "chunks");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(Triton, OverlappingChunksAreAConflictAtTheFirstSharedElement) {
  auto v = check_text(chunks("8", "7"), "chunks");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::parallel_write_conflict, 5}}));
  const auto &f = v.findings[0];
  EXPECT_EQ(point_item(f, "element"), (std::vector<std::int64_t>{8}));
  EXPECT_EQ(point_item(f, "first_write"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(f, "second_write"), (std::vector<std::int64_t>{1}));
}

TEST(Triton, AnElementNoProgramStoresIsNotCoveredWithThatReason) {
  auto v = check_text(chunks("16", "3"), "chunks");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::output_not_covered, 5}}));
  const auto &f = v.findings[0];
  EXPECT_EQ(point_item(f, "element"), (std::vector<std::int64_t>{48}));
  EXPECT_NE(f.message.find("no program stores it"), std::string::npos) << f.message;
}

// Program 1 stores p[0:16]; program 0 stores p[16:32], from `src`.
std::string halves(const std::string &src) {
  return R"(kernel halves:
    grid = (2,)
    backend = triton
    in  x: f32[32]  block=(16,)  index=(i) -> (i,)
    out p: f32[32]  block=(32,)  index=(i) -> (0,)
    body:
        when program_id(0) == 1:
            p[ds(0, 16)] = x[...]
        when program_id(0) == 0:
            p[ds(16, 16)] = )" +
         src + "\n";
}

TEST(Triton, ProgramsStoringDisjointHalvesOfOneBlockNeitherResetNorRevisitIt) {
  // Mosaic's block-level rules would see grid point 1 re-initialize the
  // block grid point 0 wrote (accumulator-reset): Triton has no such block.
  auto v = check_text(halves("x[...]"), "halves");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(Triton, AProgramReadingWhatAnotherStoresIsARace) {
  auto v = check_text(halves("p[ds(0, 16)]"), "halves");
  ASSERT_EQ(v.status, Status::violation);
  const verifier::Finding *race = nullptr;
  for (const auto &f : v.findings)
    if (f.rule == Rule::parallel_write_conflict && f.loc.line == 5) race = &f;
  ASSERT_TRUE(race) << v.findings[0].message;
  EXPECT_EQ(point_item(*race, "element"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(*race, "first_write"), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(point_item(*race, "read"), (std::vector<std::int64_t>{0}));
  EXPECT_NE(race->message.find("reads element (0,) of 'p', which grid point (1,) stores"), std::string::npos)
      << race->message;
}

TEST(Triton, TheEnumeratorAgreesWithTheSymbolicChecker) {
  expect_enumerator_agrees(halves("x[...]"), "halves", true);
  expect_enumerator_agrees(halves("p[ds(0, 16)]"), "halves", true);
  expect_enumerator_agrees(split_k("    backend = triton\n"), "mm", true);
  expect_enumerator_agrees(chunks("16"), "chunks", true);
  expect_enumerator_agrees(chunks("8", "7"), "chunks", true);
  expect_enumerator_agrees(chunks("16", "3"), "chunks", true);
}

TEST(Triton, WhatAStoreLeavesOfAnAliasedOutputKeepsTheInput) {
  // Half of each block stored: on Triton the rest is the input's, in place.
  const std::string text = R"(kernel half:
    grid = (4,)
    backend = triton
    in  x: f32[64]  block=(16,)  index=(i) -> (i,)
    out o: f32[64]  block=(16,)  index=(i) -> (i,)
    alias x -> o
    body:
        o[ds(0, 8)] = x[ds(0, 8)] * 2.0
)";
  auto v = check_text(text, "half");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(Triton, AProgramReadingWhatItHasNotStoredReadsGarbageThoughAnotherStoredTheBlock) {
  // Program 0 stores o[0:8], program 1 reads o[8:16] before storing it: on
  // Mosaic the block would be "written" by then; on Triton o[8:16] holds
  // what the array held.
  const std::string text = R"(kernel un:
    grid = (2,)
    backend = triton
    in  x: f32[16]  block=(16,)  index=(i) -> (0,)
    out o: f32[16]  block=(16,)  index=(i) -> (0,)
    body:
        when program_id(0) == 0:
            o[0:8] = x[0:8]
        when program_id(0) == 1:
            o[8:16] = o[8:16] + x[8:16]
)";
  auto v = check_text(text, "un");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::uninitialized_accumulator, 10}}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{8}));
  expect_enumerator_agrees(text, "un", true);
  // Aliased, the read takes the input's data: right.
  std::string aliased = text;
  aliased.insert(aliased.find("    body:"), "    alias x -> o\n");
  auto a = check_text(aliased, "un");
  EXPECT_EQ(a.status, Status::verified) << (a.findings.empty() ? a.reason : a.findings[0].message);
}

// Each program computes a 32-wide window with an 8-element halo on each side
// and stores only its 16 interior elements, by mask (`hi` ends them).
std::string halo(const std::string &hi) {
  return R"(kernel halo:
    grid = (4,)
    backend = triton
    in  x: f32[80]  block=(80,)  index=(i) -> (0,)
    out o: f32[80]  block=(80,)  index=(i) -> (0,)
    body:
        col = program_id(0) * 16 + iota((32,), 0)
        first = (col >= program_id(0) * 16 + 8) | (program_id(0) == 0)
        last = (col < program_id(0) * 16 + )" +
         hi + R"() | (program_id(0) == 3)
        o[ds(program_id(0) * 16, 32)] = where(first & last, x[ds(program_id(0) * 16, 32)], o[ds(program_id(0) * 16, 32)])
)";
}

TEST(Triton, OverlappingWindowsWhoseMasksKeepThemApartDoNotRace) {
  auto v = check_text(halo("24"), "halo");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(Triton, AMaskOneElementTooWideRacesAtThatElement) {
  auto v = check_text(halo("25"), "halo");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::parallel_write_conflict, 5}}));
  EXPECT_EQ(point_item(v.findings[0], "element"), (std::vector<std::int64_t>{24}));
  EXPECT_EQ(point_item(v.findings[0], "first_write"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(v.findings[0], "second_write"), (std::vector<std::int64_t>{1}));
  expect_enumerator_agrees(halo("25"), "halo", true);
}

TEST(Triton, AScratchIsEachProgramsOwn) {
  // Written by program 0 only, read by every program: garbage in the others.
  const std::string text = R"(kernel carry:
    grid = (4,)
    backend = triton
    in  x: f32[64]  block=(16,)  index=(i) -> (i,)
    out o: f32[64]  block=(16,)  index=(i) -> (i,)
    scratch t: f32[16]
    body:
        when program_id(0) == 0:
            t[...] = x[...]
        o[...] = t[...] + x[...]
)";
  auto v = check_text(text, "carry");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{Rule::uninitialized_accumulator, 10}}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{1}));
}

TEST(Triton, EveryAxisIsParallelAndNoTargetApplies) {
  const std::string text = R"(kernel k:
    grid = (3, 5)
    backend = triton
    in  x: f32[48, 80]  block=(16, 16)  index=(i, j) -> (i, j)
    out o: f32[48, 80]  block=(16, 16)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...]
)";
  const spec::File file = testing::parse_text(text);
  const spec::KernelSpec k = testing::kernel(file, "k");
  auto m = verifier::rules::build_model(k, {}, std::string("h200")); // --target h200
  ASSERT_TRUE(m.model);
  EXPECT_TRUE(m.model->triton);
  EXPECT_EQ(m.model->semantics,
            (std::vector<spec::DimSemantics>{spec::DimSemantics::parallel, spec::DimSemantics::parallel}));
  EXPECT_FALSE(m.model->target);
  EXPECT_EQ(m.model->cta_axes, (std::vector<bool>{true, true}));
}

TEST(Triton, ALargeGridIsDecidedNotUnknown) {
  // 60000 programs, each its 4 x 4 tile: past the 4096 points of the
  // pairwise Mosaic check, within Triton's one pass over the elements.
  const std::string text = R"(kernel big:
    grid = (300, 200)
    backend = triton
    in  x: f32[1200, 800]  block=(4, 4)  index=(i, j) -> (i, j)
    out o: f32[1200, 800]  block=(4, 4)  index=(i, j) -> (i, j)
    body:
        o[ds(0, 4), :] = x[...]
)";
  auto v = check_text(text, "big");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

// The Triton tutorial's vector add at 2^20 elements: 4096 programs of 256
// lanes into whole-array blocks, each storing its own chunk (masked at the
// array's end, or `mask` false: not).
std::string vector_add(bool mask) {
  const std::string chunk = "ds(program_id(0) * 256, 256)";
  const std::string sum = "x[" + chunk + "] + y[" + chunk + "]";
  return R"(kernel add:
    grid = (4096,)
    backend = triton
    in  x: f32[1048570]  block=(1048576,)  index=(i) -> (0,)
    in  y: f32[1048570]  block=(1048576,)  index=(i) -> (0,)
    out o: f32[1048570]  block=(1048576,)  index=(i) -> (0,)
    body:
        cols = program_id(0) * 256 + iota((256,), 0)
        o[)" +
         chunk + "] = " + (mask ? "where(cols < 1048570, " + sum + ", o[" + chunk + "])" : sum) + "\n";
}

TEST(Triton, ProgramsStoringChunksOfWholeArrayBlocksAreDecidedByWhatTheyStoreNotTheirBlocks) {
  // 4096 whole-array blocks are 2^32 elements over the grid; the stores, 2^20.
  auto v = check_text(vector_add(true), "add");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
  auto bad = check_text(vector_add(false), "add");
  ASSERT_EQ(bad.status, Status::violation) << bad.reason;
  EXPECT_EQ(marks(bad), (Marks{{Rule::index_out_of_bounds, 9}}));
  EXPECT_EQ(point_item(bad.findings[0], "grid_point"), (std::vector<std::int64_t>{4095}));
}

// In place (aliased): zero the negative elements of 1000, 128 lanes per
// program, the store masked by `bound & (o < 0)`, a condition on the data.
std::string clamp_negatives(const std::string &bound, bool through_local) {
  const std::string chunk = "o[ds(program_id(0) * 128, 128)]";
  // (The data the condition reads comes through a masked load: an unmasked
  // one of the last chunk reads past the array.)
  const std::string mask = "(" + bound + ") & (where(cols < 1000, " + chunk + ", 0.0) < 0.0)";
  return R"(kernel clamp:
    grid = (8,)
    backend = triton
    in  x: f32[1000]  block=(1000,)  index=(i) -> (0,)
    out o: f32[1000]  block=(1024,)  index=(i) -> (0,)
    alias x -> o
    body:
        cols = program_id(0) * 128 + iota((128,), 0)
)" + (through_local ? "        m = " + mask + "\n" : "") +
         "        " + chunk + " = where(" + (through_local ? "m" : mask) + ", zeros, " + chunk + ")\n";
}

TEST(Triton, AStoreMaskedByTheArraysExtentAndADataConditionStaysWithinTheArray) {
  // The data condition only narrows what the extent lets through, in place or through a local.
  for (bool local : {false, true}) {
    auto v = check_text(clamp_negatives("cols < 1000", local), "clamp");
    EXPECT_EQ(v.status, Status::verified)
        << local << ": " << (v.findings.empty() ? v.reason : v.findings[0].message);
    // Eight lanes past the end may be stored, if the data says so: not decided.
    auto past = check_text(clamp_negatives("cols < 1008", local), "clamp");
    EXPECT_EQ(past.status, Status::unknown) << local;
    EXPECT_NE(past.reason.find("stays within the array (its mask is not evaluated)"), std::string::npos)
        << past.reason;
  }
}

// One row per program, 70000 programs: past the element replay's 65536, so
// the solver decides where static store boxes meet.
std::string rows(const std::string &index) {
  return R"(kernel rows:
    grid = (70000,)
    backend = triton
    in  x: f32[70000, 8]  block=(None, 8)  index=(r) -> (r, 0)
    out o: f32[70000, 8]  block=(None, 8)  index=(r) -> ()" +
         index + R"(, 0)
    body:
        o[...] = x[...] * 2.0
)";
}

TEST(Triton, PastTheReplayTheSolverProvesRowsDisjoint) {
  auto v = check_text(rows("r"), "rows");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
}

TEST(Triton, PastTheReplayTheSolverFindsTwoProgramsOnOneRow) {
  auto v = check_text(rows("r // 2"), "rows");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  const verifier::Finding *race = nullptr;
  for (const auto &f : v.findings)
    if (f.rule == Rule::parallel_write_conflict) race = &f;
  ASSERT_TRUE(race) << v.findings[0].message;
  EXPECT_EQ(race->loc.line, 5);
  EXPECT_EQ(point_item(*race, "element"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(*race, "first_write"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(*race, "second_write"), (std::vector<std::int64_t>{1}));
}

// 64 programs, each one row of 131072 elements: few enough programs to
// enumerate, but 2^23 elements of o, past the element replay's limit (a
// causal attention of 8 x 32 heads and 8192 tokens on its cut). The solver
// decides such an output over the programs' static boxes.
std::string long_rows(const std::string &index) {
  return R"(kernel long_rows:
    grid = (64,)
    backend = triton
    in  x: f32[64, 131072]  block=(None, 131072)  index=(r) -> (r, 0)
    out o: f32[64, 131072]  block=(None, 131072)  index=(r) -> ()" +
         index + R"(, 0)
    body:
        o[...] = x[...] * 2.0
)";
}

TEST(Triton, FewProgramsOfTooManyElementsToReplayAreDecidedByTheSolver) {
  auto v = check_text(long_rows("r"), "long_rows");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? v.reason : v.findings[0].message);
  auto bad = check_text(long_rows("r // 2"), "long_rows");
  ASSERT_EQ(bad.status, Status::violation) << bad.reason;
  const verifier::Finding *race = nullptr;
  for (const auto &f : bad.findings)
    if (f.rule == Rule::parallel_write_conflict) race = &f;
  ASSERT_TRUE(race) << bad.findings[0].message;
  EXPECT_EQ(race->loc.line, 5);
  EXPECT_EQ(point_item(*race, "element"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(*race, "first_write"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(*race, "second_write"), (std::vector<std::int64_t>{1}));
}

} // namespace
} // namespace pipecheck

namespace pipecheck {
namespace {

TEST(Triton, ARaggedBlockReducedUnmaskedSaysTheLoadReadsPastTheArray) {
  // 100 rows in blocks of 64, summed whole: no padding, memory past the array.
  const auto v = testing::check_text(R"(kernel s:
    grid = (2,)
    backend = triton
    in  x: f32[8, 100]  block=(8, 64)  index=(i) -> (0, i)
    out o: f32[8, 2]  block=(8, 1)  index=(i) -> (0, i)
    body:
        o[...] = sum(x[...], axis=1, keepdims=True)
)",
                                     "s");
  bool found = false;
  for (const auto &f : v.findings)
    if (f.rule == verifier::Rule::partial_block_reduction) {
      found = true;
      EXPECT_NE(f.message.find("a Triton block is a view of the array, not a padded copy"), std::string::npos)
          << f.message;
    }
  EXPECT_TRUE(found) << v.reason;
}

} // namespace
} // namespace pipecheck

namespace pipecheck {
namespace {

TEST(Triton, AMaskedStoreWhoseWindowPassesTheBlockIsItsFaultNotAKeptElement) {
  // seq 400 in windows of 32 over a block as long as the array: the last
  // window (384:416) passes the block. Its mask keeps rows past 400, so every
  // element of o is written; only the window is out of bounds.
  const auto v = testing::check_text(R"(kernel r:
    param seq = 400
    grid = (cdiv(seq, 32),)
    backend = triton
    in  k: f32[seq, 72]  block=(seq, 128)  index=(j) -> (0, 0)
    out o: f32[seq, 72]  block=(seq, 128)  index=(j) -> (0, 0)
    body:
        j = program_id(0)
        ok = (j * 32 + iota((32, 128), 0) < seq) & (iota((32, 128), 1) < 72)
        kb = where(ok, k[ds(j * 32, 32), :], 0.0)
        o[ds(j * 32, 32), :] = where(ok, kb + 1.0, o[ds(j * 32, 32), :])
)",
                                     "r");
  EXPECT_EQ(v.status, verifier::Status::violation) << v.reason;
  for (const auto &f : v.findings) {
    EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds) << f.message;
  }
}

} // namespace
} // namespace pipecheck
