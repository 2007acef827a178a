// Spec-level rules on hand-written kernels: rank-1 and rank-4 grids,
// transposed index maps, squeezed dims, non-dividing shapes.
#include "testing.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/model.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

namespace pipecheck {
namespace {

using testing::check_text;
using testing::Marks;
using testing::marks;
using testing::point_item;
using testing::read_file;
using verifier::Status;

TEST(ReductionNotLastAxis, FlagsAFirstAxisReductionWithTheRevisitAsWitness) {
  const char *src = R"(kernel incorrect_sum:
    grid = (8, 4, 4)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (i, j, k)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (j, k)
    body:
        o[...] += x[...]
)";
  auto v = check_text(src, "incorrect_sum");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::reduction_not_last_axis, 4},
                             {verifier::Rule::uninitialized_accumulator, 6}}));
  const auto &f = v.findings[0];
  EXPECT_EQ(point_item(f, "first_visit"), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(point_item(f, "revisit"), (std::vector<std::int64_t>{1, 0, 0}));
  EXPECT_FALSE(f.notes.empty());
  EXPECT_EQ(point_item(v.findings[1], "grid_point"), (std::vector<std::int64_t>{0, 0, 0}));
}

TEST(OutputRevisit, FlagsANonConsecutiveRevisitOfAPlainWriteOnARank4Grid) {
  const char *src = R"(kernel revisit4:
    grid = (2, 2, 2, 2)
    in  x: f32[256, 256]  block=(128, 128)  index=(a, b, c, d) -> (b, d)
    out o: f32[256, 256]  block=(128, 128)  index=(a, b, c, d) -> (b, d)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "revisit4");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{0, 0, 1, 0}));
}

TEST(OutputRevisit, AcceptsARevisitConsecutiveInGridOrder) {
  const char *src = R"(kernel ok4:
    grid = (2, 2, 2, 2)
    in  x: f32[256, 256]  block=(128, 128)  index=(a, b, c, d) -> (a, b)
    out o: f32[256, 256]  block=(128, 128)  index=(a, b, c, d) -> (a, b)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "ok4");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(OutputRevisit, FlagsTheInterpretTestsFloorDivModIndexMap) {
  // tpu_pallas_interpret_test.py `revisiting_is_an_error`: (j // 2, i % 2).
  const char *src = R"(kernel floor_mod:
    grid = (4, 4)
    in  x: f32[256, 256]  block=(128, 128)  index=(i, j) -> (j // 2, i % 2)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j) -> (j // 2, i % 2)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "floor_mod");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}}));
  // (0, 0) and (0, 1) map to block (0, 0); so does (2, 0), after (1, *) mapped to (0, 1).
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{2, 0}));
}

TEST(UninitializedAccumulator, FlagsAnInitGuardedOnTheLastStep) {
  const char *src = R"(kernel late_init:
    grid = (4, 8)
    in  x: f32[8, 512]  block=(None, 512)  index=(i, k) -> (k, 0)
    out o: f32[4, 512]  block=(None, 512)  index=(i, k) -> (i, 0)
    body:
        when program_id(1) == num_programs(1) - 1:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(src, "late_init");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v),
            (Marks{{verifier::Rule::accumulator_reset, 7}, {verifier::Rule::uninitialized_accumulator, 8}}));
}

TEST(UninitializedAccumulator, FlagsScratchReadBeforeAnyWrite) {
  const char *src = R"(kernel scratch_uninit:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    scratch acc: f32[128, 128]
    body:
        acc[...] += x[...]
        o[...] = acc[...]
)";
  auto v = check_text(src, "scratch_uninit");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::uninitialized_accumulator, 7}}));
}

TEST(UninitializedAccumulator, AReductionOverTwoAxesIsAdvisedToInitOnTheFirstStepOfBoth) {
  // (i, k1, k2) into (i, 0): `when program_id(2) == 0` alone would reset
  // the sum at every step of k1. An axis of one step is no reduction.
  const char *src = R"(kernel two_axes:
    grid = (2, 3, 4, 1)
    in  x: f32[16, 1536]  block=(8, 128)  index=(i, k1, k2, u) -> (i, k1 * 4 + k2)
    out o: f32[16, 128]  block=(8, 128)  index=(i, k1, k2, u) -> (i, 0)
    body:
        o[...] += x[...]
)";
  auto v = check_text(src, "two_axes");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::uninitialized_accumulator, 6}}));
  EXPECT_NE(v.findings[0].message.find("initialize it under `when program_id(1) == 0 and program_id(2) == 0` "
                                       "(axes 1 and 2, which the index_map of 'o' does not name, are its "
                                       "reduction)"),
            std::string::npos)
      << v.findings[0].message;
}

TEST(UninitializedAccumulator, AnAliasedOutputIsAdvisedToBeSeededFromItsInput) {
  // An in-place bincount: its window is not fetched from counts_in, so
  // zeroing it, the usual advice, would drop the old counts.
  const char *src = R"(kernel bincount:
    grid = (8,)
    in  ids: i32[64, 128]  block=(8, 128)  index=(i) -> (i, 0)
    in  counts_in: i32[1, 128]  block=(1, 128)  index=(i) -> (0, 0)
    out o: i32[1, 128]  block=(1, 128)  index=(i) -> (0, 0)
    alias counts_in -> o
    body:
        o[...] += reshape(sum(ids[...], axis=0), (1, 128))
)";
  auto v = check_text(src, "bincount");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::uninitialized_accumulator, 8}}));
  EXPECT_NE(v.findings[0].message.find("seed it from that input there (`o[...] = counts_in[...]`)"),
            std::string::npos)
      << v.findings[0].message;
}

TEST(UninitializedAccumulator, AWriteBackStartedBeforeTheComputeIsAdvisedToStartAfterTheStore) {
  // The copy out of obuf starts before the store that fills it: the advice
  // is about the order, not a reduction axis (there is none).
  const char *src = R"(kernel early_write_back:
    grid = (5,)
    in  x: f32[40, 256]  block=(8, 256)  index=(i,) -> (i, 0)
    out o: f32[40, 256]  memory_space=any
    scratch obuf: f32[8, 256]
    scratch sem: dma_sem
    body:
        async_copy(obuf[...], o[ds(program_id(0) * 8, 8), :], sem).start()
        obuf[...] = tanh(x[...])
        async_copy(obuf[...], o[ds(program_id(0) * 8, 8), :], sem).wait()
)";
  auto v = check_text(src, "early_write_back");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::uninitialized_accumulator, 8}}));
  EXPECT_NE(
      v.findings[0].message.find("copies out scratch 'obuf' at grid point (0,) before anything wrote it: "
                                 "the copy starts before the statement that writes its source"),
      std::string::npos)
      << v.findings[0].message;
  ASSERT_EQ(v.findings[0].notes.size(), 2u);
  EXPECT_EQ(v.findings[0].notes[1].loc.line, 9);
}

TEST(AccumulatorReset, FlagsAnInitGuardedOnTheWrongAxis) {
  const char *src = R"(kernel wrong_axis:
    grid = (4, 4, 8)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (k, i, j)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (i, j)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(src, "wrong_axis");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v),
            (Marks{{verifier::Rule::accumulator_reset, 8}, {verifier::Rule::uninitialized_accumulator, 9}}));
  const auto &f = v.findings[0];
  EXPECT_EQ(point_item(f, "reset"), (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(point_item(f, "first_visit"), (std::vector<std::int64_t>{0, 0, 0}));
}

TEST(ReductionNotLastAxis, FlagsAnInitializedFirstAxisSumWithTheSmallestRevisit) {
  const char *src = R"(kernel sum_first_axis_with_init:
    grid = (8, 4, 4)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (i, j, k)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (j, k)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(src, "sum_first_axis_with_init");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::reduction_not_last_axis, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{1, 0, 0}));
}

TEST(ReductionNotLastAxis, LeavesASingleAxisModuloFoldToOutputRevisit) {
  // Blocks 0 1 2 3 0 1 2 3: accumulated, but no axis follows axis 0.
  const char *src = R"(kernel fold:
    grid = (8,)
    in  x: f32[1024, 256]  block=(128, 256)  index=(i) -> (i, 0)
    out o: f32[512, 256]   block=(128, 256)  index=(i) -> (i % 4, 0)
    body:
        when program_id(0) < 4:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(src, "fold");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{4}));
}

TEST(ReductionNotLastAxis, NeedsALaterAxisTheIndexMapDependsOn) {
  // (i % 2, 0): the revisit differs along axis 0 only and axis 1 is ignored
  // by the index_map, so it is a plain output-revisit...
  const char *ignored = R"(kernel k:
    grid = (4, 2)
    in  x: f32[1024, 256]  block=(128, 256)  index=(i, j) -> (2 * i + j, 0)
    out o: f32[256, 256]   block=(128, 256)  index=(i, j) -> (i % 2, 0)
    body:
        when program_id(0) < 2 and program_id(1) == 0:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(ignored, "k");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{2, 0}));
  // ...while (i % 2, j) depends on the later axis 1: the accumulation along
  // axis 0 is in front of it.
  const char *later = R"(kernel k:
    grid = (4, 2)
    in  x: f32[1024, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    out o: f32[256, 256]   block=(128, 128)  index=(i, j) -> (i % 2, j)
    body:
        when program_id(0) < 2:
            o[...] = zeros
        o[...] += x[...]
)";
  v = check_text(later, "k");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::reduction_not_last_axis, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{2, 0}));
  // A revisit that differs only along the last dependent axis (j % 2) is an
  // output-revisit even on a rank-2 grid.
  const char *last = R"(kernel k:
    grid = (2, 4)
    in  x: f32[256, 1024]  block=(128, 128)  index=(i, j) -> (i, j)
    out o: f32[256, 256]   block=(128, 128)  index=(i, j) -> (i, j % 2)
    body:
        when program_id(1) < 2:
            o[...] = zeros
        o[...] += x[...]
)";
  v = check_text(last, "k");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "revisit"), (std::vector<std::int64_t>{0, 2}));
}

TEST(AccumulatorReset, FlagsAScratchZeroedOnEvenStepsAtTheInit) {
  const char *src = R"(kernel even:
    grid = (2, 2, 2, 4)
    dimension_semantics = (parallel, parallel, parallel, arbitrary)
    in  a: f32[2, 256, 1024]  block=(None, 128, 256)  index=(b, i, j, kk) -> (b, i, kk)
    in  w: f32[2, 1024, 256]  block=(None, 256, 128)  index=(b, i, j, kk) -> (b, kk, j)
    out o: f32[2, 256, 256]   block=(None, 128, 128)  index=(b, i, j, kk) -> (b, i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(3) % 2 == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], w[...])
        when program_id(3) == num_programs(3) - 1:
            o[...] = acc[...]
)";
  auto v = check_text(src, "even");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 10}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{0, 0, 0, 2}));
  EXPECT_NE(v.findings[0].message.find("scratch 'acc'"), std::string::npos);
}

// Block c of o is visited at (0, c, *) and again at (1, c, *): a reset on
// the first step of each visit is right, the revisit is the bug.
const char *kRevisitedRows = R"(kernel rows:
    grid = (2, 2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(r, c, k) -> (c, k)
    out o: f32[256, 128]  block=(128, 128)  index=(r, c, k) -> (c, 0)
    scratch acc: f32[128, 128]
    body:
        when RESET:
            acc[...] = zeros
        acc[...] += x[...]
        when program_id(2) == 3:
            o[...] = acc[...]
)";

TEST(AccumulatorReset, AResetWhereALaterVisitOfTheBlockBeginsIsTheRevisitsFindingOnly) {
  auto v = check_text(std::regex_replace(kRevisitedRows, std::regex("RESET"), "program_id(2) == 0"), "rows");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}}));
}

TEST(AccumulatorReset, AResetInTheMiddleOfALaterVisitIsStillFlagged) {
  auto v =
      check_text(std::regex_replace(kRevisitedRows, std::regex("RESET"), "program_id(2) % 2 == 0"), "rows");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_revisit, 4}, {verifier::Rule::accumulator_reset, 8}}));
  for (const auto &f : v.findings) {
    if (f.rule == verifier::Rule::accumulator_reset) {
      EXPECT_EQ(point_item(f, "reset")[2], 2);
    }
  }
}

TEST(AccumulatorReset, AcceptsAScratchInitOnTheFirstStepAfterTheLastStepStoredIt) {
  const char *src = R"(kernel mm:
    grid = (4, 4, 4)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  a: f32[512, 512]  block=(128, 128)  index=(i, j, kk) -> (i, kk)
    in  b: f32[512, 512]  block=(128, 128)  index=(i, j, kk) -> (kk, j)
    out o: f32[512, 512]  block=(128, 128)  index=(i, j, kk) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(2) == num_programs(2) - 1:
            r = acc[...] * 2
            o[...] = r
)";
  auto v = check_text(src, "mm");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(AccumulatorReset, FlagsAScratchStoredOnlyAtTheVeryEnd) {
  // The store fires once, at the last grid point: each new (i, j) re-zeroes
  // a sum nobody has read. A self-update (`acc = acc + ...`) accumulates too.
  const char *src = R"(kernel late_store:
    grid = (2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[128, 128]  block=(128, 128)  index=(i, k) -> (0, 0)
    scratch acc: f32[128, 128]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        acc[...] = acc[...] + x[...]
        when program_id(0) == 1 and program_id(1) == 3:
            o[...] = acc[...]
)";
  auto v = check_text(src, "late_store");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 8}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{1, 0}));
}

TEST(AccumulatorReset, AcceptsAMaskedStoreThatKeepsTheRowsItDoesNotSelect) {
  // megablox gmm's store: `o = where(mask, acc, o)` on consecutive visits of
  // a block reads the block it writes, so it carries the earlier visit's rows
  // instead of resetting them; both checkers must see it as an update.
  const char *src = R"(kernel masked_halves:
    grid = (2, 2)
    in  x: f32[256, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    out o: f32[256, 128]  block=(128, 128)  index=(i, j) -> (i, 0)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] = where(iota((128, 128), 0) // 64 == program_id(1), x[...], o[...])
)";
  EXPECT_EQ(check_text(src, "masked_halves").status, Status::verified);
  spec::File f = testing::parse_text(src);
  const spec::KernelSpec k = testing::kernel(f, "masked_halves"); // the model points into it
  auto m = verifier::rules::build_model(k, {}, std::nullopt);
  ASSERT_TRUE(m.model);
  EXPECT_TRUE(verifier::rules::check_enumerated(*m.model).findings.empty());
}

TEST(AccumulatorReset, FlagsAScratchResetInsideABlockWhoseStoreTheNextStepOverwrites) {
  const char *src = R"(kernel write_through:
    grid = (4, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[512, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[512, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[128, 128]
    body:
        when program_id(1) % 2 == 0:
            acc[...] = zeros
        acc[...] += x[...]
        o[...] = acc[...]
)";
  // The store at k = 1 is overwritten by the next step's store of the same
  // block, so it consumes nothing: the init at k = 2 discards the sum. The
  // block's last store, at k = 3, holds only what accumulated since, so
  // what k = 0 added is lost too (the earliest witness wins).
  auto v = check_text(src, "write_through");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 9}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(point_item(v.findings[0], "overwritten"), (std::vector<std::int64_t>{0, 3}));
}

TEST(AccumulatorReset, FlagsAnInitGuardedOnlyOnTheInnerOfTwoReductionAxes) {
  // The output block stays on over k1 and k2; the scratch is zeroed and
  // stored on every k1 round, so the last round's store keeps only x's
  // blocks 4..7 of the row.
  const std::string kernel = R"(kernel two_axes:
    grid = (2, 2, 4)
    dimension_semantics = (parallel, arbitrary, arbitrary)
    in  x: f32[256, 2048]  block=(128, 256)  index=(i, k1, k2) -> (i, k1 * 4 + k2)
    out o: f32[256, 256]   block=(128, 256)  index=(i, k1, k2) -> (i, 0)
    scratch acc: f32[128, 256]
    body:
        when INIT:
            acc[...] = zeros
        acc[...] += x[...]
        when STORE:
            o[...] = acc[...]
)";
  auto with = [&](const std::string &init, const std::string &store) {
    std::string t = kernel;
    t.replace(t.find("INIT"), 4, init);
    t.replace(t.find("STORE"), 5, store);
    return t;
  };
  const std::string last2 = "program_id(2) == num_programs(2) - 1";
  auto v = check_text(with("program_id(2) == 0", last2), "two_axes");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 9}}));
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(point_item(v.findings[0], "overwritten"), (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_NE(v.findings[0].message.find("within the visit of block (0, 0) of 'o'"), std::string::npos)
      << v.findings[0].message;
  // `or` zeroes it at every k1 round too.
  EXPECT_EQ(marks(check_text(with("program_id(1) == 0 or program_id(2) == 0",
                                  "program_id(1) == num_programs(1) - 1 and " + last2),
                             "two_axes")),
            (Marks{{verifier::Rule::accumulator_reset, 9}}));
  // The twin: both guards on both axes.
  EXPECT_EQ(check_text(with("program_id(1) == 0 and program_id(2) == 0",
                            "program_id(1) == num_programs(1) - 1 and " + last2),
                       "two_axes")
                .status,
            Status::verified);
}

TEST(AccumulatorReset, CountsASelectThatStartsTheSumAsAnInitWhereItsConditionHolds) {
  // Grid (i, k1, k2), the sum over (k1, k2) into o's block i. A select on a
  // grid condition writes without reading acc where the condition holds:
  // an init there, an update elsewhere (as pl.when would split it).
  const std::string head = R"(kernel sel:
    grid = (2, 2, 3)
    dimension_semantics = (parallel, arbitrary, arbitrary)
    in  x: f32[16, 768]  block=(8, 128)  index=(i, k1, k2) -> (i, k1 * 3 + k2)
    out o: f32[16, 128]  block=(8, 128)  index=(i, k1, k2) -> (i, 0)
)";
  const std::string store = "        when program_id(1) == 1 and program_id(2) == 2:\n"
                            "            o[...] = acc[...]\n";
  auto scratch = [&](const std::string &body) {
    return check_text(head + "    scratch acc: f32[8, 128]\n    body:\n" + body + store, "sel");
  };
  // jnp.where, zeroing on every step of the first k1 round.
  auto v = scratch(
      "        acc[...] = where(program_id(1) == 0, broadcast_to(0.0, (8, 128)), acc[...]) + x[...]\n");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 8}}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(
      scratch("        acc[...] = where(program_id(1) == 0 and program_id(2) == 0, broadcast_to(0.0, (8, "
              "128)), acc[...]) + x[...]\n")
          .status,
      Status::verified);
  // lax.cond as the bridge exports it: a local defined in each branch,
  // zeroing on each k1 round's first step; and the twin.
  auto cond = [&](const std::string &c, bool acc_in_then) {
    const std::string zero = "c1 = broadcast_to(0.0, (8, 128))", read = "c1 = acc[...]";
    return scratch("        c1 = broadcast_to(0.0, (8, 128))\n        when " + c + ":\n            " +
                   (acc_in_then ? read : zero) + "\n        when not (" + c + "):\n            " +
                   (acc_in_then ? zero : read) + "\n        acc[...] = c1 + x[...]\n");
  };
  EXPECT_EQ(marks(cond("program_id(2) == 0", false)), (Marks{{verifier::Rule::accumulator_reset, 13}}));
  EXPECT_EQ(cond("program_id(1) == 0 and program_id(2) == 0", false).status, Status::verified);
  // The read in the first branch: the local keeps what either branch read.
  EXPECT_EQ(cond("program_id(1) > 0 or program_id(2) > 0", true).status, Status::verified);
  EXPECT_EQ(marks(cond("program_id(2) > 0", true)), (Marks{{verifier::Rule::accumulator_reset, 13}}));
  // Straight into the output block.
  EXPECT_EQ(
      marks(check_text(
          head + "    body:\n        o[...] = where(program_id(2) == 0, x[...], o[...] + x[...])\n", "sel")),
      (Marks{{verifier::Rule::accumulator_reset, 7}}));
  EXPECT_EQ(check_text(
                head + "    body:\n        o[...] = where(program_id(1) == 0 and program_id(2) == 0, x[...], "
                       "o[...] + x[...])\n",
                "sel")
                .status,
            Status::verified);
}

TEST(AccumulatorReset, AcceptsAReductionRepeatedWholeOnEachStepOfAnOuterAxis) {
  // Row sums beside a matmul over (i, j, k): o_sum's block stays on over j
  // and k, and each j round sums x's row blocks again from zero, the same
  // result each time; the last round's store loses nothing.
  auto v = check_text(R"(kernel matmul_and_row_sums:
    grid = (2, 2, 4)
    dimension_semantics = (parallel, arbitrary, arbitrary)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, j, k) -> (i, k)
    in  y: f32[512, 256]  block=(128, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j, k) -> (i, j)
    out o_sum: f32[256, 128]  block=(128, 128)  index=(i, j, k) -> (i, 0)
    scratch acc: f32[128, 128]
    scratch rows: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
            rows[...] = zeros
        acc[...] += dot(x[...], y[...])
        rows[...] += x[...]
        when program_id(2) == num_programs(2) - 1:
            o[...] = acc[...]
            o_sum[...] = rows[...]
)",
                      "matmul_and_row_sums");
  EXPECT_EQ(v.status, Status::verified) << (v.findings.empty() ? "" : v.findings[0].message);
}

TEST(AccumulatorReset, FlagsAnOuterAxisResetOnMosaicGpuWhereTheBlockIsCopiedOutAfterTheLoop) {
  // One CTA per row block; k1 and k2 the pipeline. o's map names only the
  // CTA axis, so it is copied out once, after the loop: the last round's sum.
  auto v = check_text(R"(kernel gpu_two_axes:
    grid = (2, 2, 2)
    dimension_semantics = (parallel, sequential, sequential)
    target = h100
    max_concurrent_steps = 2
    delay_release = 1
    in  a: bf16[128, 512]  block=(64, 128)  index=(i, k1, k2) -> (i, k1 * 2 + k2)
    in  b: bf16[512, 128]  block=(128, 128)  index=(i, k1, k2) -> (k1 * 2 + k2, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k1, k2) -> (i, 0)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(2) == 1:
            o[...] = acc[...]
)",
                      "gpu_two_axes");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 13}}));
  EXPECT_EQ(point_item(v.findings[0], "overwritten"), (std::vector<std::int64_t>{0, 1, 1}));
}

TEST(AccumulatorReset, AcceptsAScratchStoredOnEveryStepAndResetWhereTheOutputBlockChanges) {
  const char *src = R"(kernel write_through:
    grid = (4, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[512, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[512, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[128, 128]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        acc[...] += x[...]
        o[...] = acc[...]
)";
  EXPECT_EQ(check_text(src, "write_through").status, Status::verified);
}

TEST(ParallelWriteConflict, FlagsAScratchCarriedAcrossAParallelAxisWithItsAxis) {
  const char *src = R"(kernel carry:
    grid = (2, 4)
    dimension_semantics = (parallel, parallel)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[256, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[128, 128]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        acc[...] += x[...]
        when program_id(1) == num_programs(1) - 1:
            o[...] = acc[...]
)";
  auto v = check_text(src, "carry");
  ASSERT_EQ(v.status, Status::violation);
  // The scratch, and the output: the core that runs k = 0 writes block (0, 0)
  // back too, never having stored it.
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::parallel_write_conflict, 5},
                             {verifier::Rule::parallel_write_conflict, 6}}));
  ASSERT_EQ(v.findings.size(), 2u);
  EXPECT_EQ(point_item(v.findings[1], "first_write"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[1], "read"), (std::vector<std::int64_t>{0, 1}));
  EXPECT_NE(v.findings[1].message.find("parallel axis 1"), std::string::npos) << v.findings[1].message;
}

// A scratch carried along a sequential axis into the next index of a
// parallel one: the read takes the last update, which the message names
// beside the chain's first write.
TEST(ParallelWriteConflict, ACarriedScratchNamesTheLastUpdateTheReadTakes) {
  const char *src = R"(kernel carry:
    grid = (2, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[2, 4, 8, 128]  block=(None, None, 8, 128)  index=(j, k) -> (j, k, 0, 0)
    out o: f32[2, 4, 8, 128]  block=(None, None, 8, 128)  index=(j, k) -> (j, k, 0, 0)
    scratch acc: f32[8, 128]
    body:
        when (program_id(0) == 0) and (program_id(1) == 0):
            acc[...] = broadcast_to(0.0, (8, 128))
        acc[...] += x[...]
        o[...] = acc[...]
)";
  auto v = check_text(src, "carry");
  ASSERT_EQ(v.status, Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "first_write"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "read"), (std::vector<std::int64_t>{1, 0}));
  EXPECT_NE(
      v.findings[0].message.find("written at grid point (0, 0) and last updated at grid point (0, 3) into "
                                 "grid point (1, 0)"),
      std::string::npos)
      << v.findings[0].message;
}

// On a megacore TPU each core writes back the output windows it visited,
// stored or not: a block every point of a parallel axis visits but only the
// last stores gets the other core's garbage. Sequential (`arbitrary`), the
// block is written back once, after the store.
TEST(ParallelWriteConflict, FlagsABlockAParallelAxisVisitsWhereOnlyOnePointStores) {
  const std::string src = R"(kernel last_stores:
    grid = (4,)
    dimension_semantics = (parallel,)
    in  x: f32[128, 128]  block=(128, 128)  index=(j) -> (0, 0)
    out o: f32[128, 128]  block=(128, 128)  index=(j) -> (0, 0)
    body:
        when program_id(0) == num_programs(0) - 1:
            o[...] = x[...] * 2.0
)";
  auto v = check_text(src, "last_stores");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::parallel_write_conflict, 5}}));
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "first_write"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(v.findings[0], "second_write"), (std::vector<std::int64_t>{3}));
  std::string seq = src;
  seq.replace(seq.find("(parallel,)"), 11, "(arbitrary,)");
  EXPECT_EQ(check_text(seq, "last_stores").status, Status::verified);
}

TEST(InputWriteLost, FlagsAWriteToAnAliasedInputAndSaysToWriteTheOutput) {
  const char *src = R"(kernel k:
    grid = (2,)
    in  x: f32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)
    out o: f32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)
    alias x -> o
    body:
        x[...] = x[...] + 1
        o[...] = x[...]
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::input_write_lost, 7}}));
  EXPECT_EQ(v.findings[0].message.find("use `alias"), std::string::npos) << v.findings[0].message;
  EXPECT_NE(v.findings[0].message.find("write 'o' instead"), std::string::npos) << v.findings[0].message;
}

TEST(OutputNotCovered, AcceptsUnwrittenBlocksOfAnOutputAliasedToAnInput) {
  const char *src = R"(kernel k:
    grid = (2,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (2 * i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (2 * i, 0)
    alias x -> o
    body:
        o[...] = x[...] * 2
)";
  EXPECT_EQ(check_text(src, "k").status, Status::verified);
}

TEST(OutputNotCovered, FlagsTheHalfOfEveryBlockThatNoStoreWritesWithItsElements) {
  const char *src = R"(kernel k:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[0:64, :] = x[0:64, :]
        when program_id(0) != 2:
            o[64:, :] = x[64:, :]
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "block"), (std::vector<std::int64_t>{2, 0}));
  EXPECT_NE(v.findings[0].message.find("elements o[320:384, 0:128] of block (2, 0)"), std::string::npos)
      << v.findings[0].message;
}

TEST(OutputNotCovered, NeedsNoWriteOfThePaddingOfARaggedLastBlock) {
  const char *src = R"(kernel k:
    grid = (4,)
    in  x: f32[448, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[448, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[0:64, :] = x[0:64, :]
        when program_id(0) < 3:
            o[64:128, :] = x[64:128, :]
)";
  auto v = check_text(src, "k");
  for (const auto &f : v.findings)
    EXPECT_NE(f.rule, verifier::Rule::output_not_covered) << f.message;
}

TEST(PartialBlockReduction, AcceptsALastStepThatReadsOnlyTheValidPartOfTheBlock) {
  const char *src = R"(kernel k:
    grid = (cdiv(100, 64),)
    in  x: f32[128, 100]  block=(128, 64)  index=(k) -> (0, k)
    out o: f32[128]  block=(128,)  index=(k) -> (0,)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        when program_id(0) == 0:
            o[...] += sum(x[...], axis=1)
        when program_id(0) == 1:
            o[...] += sum(x[:, 0:36], axis=1)
)";
  auto v = check_text(src, "k");
  for (const auto &f : v.findings)
    EXPECT_NE(f.rule, verifier::Rule::partial_block_reduction) << f.message;
  // Reading one element more takes padding in.
  std::string more = src;
  more.replace(more.find("0:36"), 4, "0:37");
  auto w = check_text(more, "k");
  EXPECT_EQ(marks(w).count({verifier::Rule::partial_block_reduction, 3}), 1u);
}

TEST(AnySpaceAccess, FlagsEveryLoadOrStoreOfAnUnwindowedOperandAtItsStatement) {
  const char *src = R"(kernel k:
    grid = (2,)
    in  h: f32[256, 128]  memory_space=any
    in  x: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)
    scratch s: f32[128, 128]  memory_space=hbm
    body:
        o[...] = x[...]
        when program_id(0) == 5:
            o[...] = h[0:128, :]
        s[...] = x[...]
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(v.status, Status::violation);
  // Mosaic rejects the kernel at compile time: a guard that never holds does not help.
  EXPECT_EQ(marks(v),
            (Marks{{verifier::Rule::any_space_access, 10}, {verifier::Rule::any_space_access, 11}}));
  EXPECT_NE(v.findings[0].message.find("loads input 'h' (memory_space=any)"), std::string::npos)
      << v.findings[0].message;
  EXPECT_NE(v.findings[1].message.find("stores scratch 's' (memory_space=hbm)"), std::string::npos)
      << v.findings[1].message;
}

TEST(ParallelWriteConflict, NamesTheAxisTheIndexMapDrops) {
  const char *src = R"(kernel k:
    grid = (2, 4)
    dimension_semantics = (parallel, parallel)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[256, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::parallel_write_conflict, 5}}));
  EXPECT_NE(v.findings[0].message.find("differ along parallel axis 1, which the index_map of 'o' drops"),
            std::string::npos)
      << v.findings[0].message;
  // Each point overwrites the block: no reduction to mark arbitrary.
  EXPECT_EQ(v.findings[0].message.find("mark it `arbitrary`"), std::string::npos) << v.findings[0].message;
  EXPECT_NE(v.findings[0].message.find("name axis 1 in the index_map of 'o'"), std::string::npos)
      << v.findings[0].message;
}

TEST(ParallelWriteConflict, AReductionAlongTheParallelAxisIsToldToMarkItArbitrary) {
  const char *src = R"(kernel k:
    grid = (2, 4)
    dimension_semantics = (parallel, parallel)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[256, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(src, "k");
  ASSERT_FALSE(v.findings.empty());
  bool told = false;
  for (const auto &f : v.findings)
    told = told || (f.rule == verifier::Rule::parallel_write_conflict &&
                    f.message.find("axis 1 reduces into 'o', so mark it `arbitrary`") != std::string::npos);
  EXPECT_TRUE(told) << v.findings[0].message;
}

TEST(ParallelWriteConflict, AScratchCacheOfAnotherInputBlockIsNotToldThatArbitraryFixesIt) {
  // xn caches f(x's row block), refreshed on the wrong axis: carried across
  // the parallel axis, and stale on one core as well.
  const char *cache = R"(kernel k:
    grid = (3, 3)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[96, 256]  block=(32, 256)  index=(i, j) -> (i, 0)
    in  w: f32[256, 384]  block=(256, 128)  index=(i, j) -> (0, j)
    out o: f32[96, 384]  block=(32, 128)  index=(i, j) -> (i, j)
    scratch xn: f32[32, 256]
    body:
        when program_id(0) == 0:
            xn[...] = x[...] * 2.0
        o[...] = dot(xn[...], w[...])
)";
  auto v = check_text(cache, "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::parallel_write_conflict, 7}}));
  const std::string &msg = v.findings[0].message;
  EXPECT_NE(msg.find("computed from block (0, 0) of 'x' and the read sees block (1, 0)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("initialize it whenever the block of 'x' changes"), std::string::npos) << msg;
  // ... or a scan's running value that should restart for each row (marking
  // the axis arbitrary would make it one running value over the whole grid).
  EXPECT_NE(
      msg.find("if it is a running value of each index of axis 0 (a scan along a later axis), initialize it "
               "on the first step of each"),
      std::string::npos)
      << msg;
  // A carry of something no input block computed keeps the plain advice.
  const char *carry = R"(kernel k:
    grid = (3, 3)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[96, 384]  block=(32, 128)  index=(i, j) -> (i, j)
    out o: f32[96, 384]  block=(32, 128)  index=(i, j) -> (i, j)
    scratch c: f32[32, 128]
    body:
        when program_id(0) == 0:
            c[...] = zeros
        o[...] = x[...] + c[...]
)";
  auto w = check_text(carry, "k");
  ASSERT_EQ(marks(w), (Marks{{verifier::Rule::parallel_write_conflict, 6}}));
  EXPECT_NE(w.findings[0].message.find("mark axis 0 `arbitrary` or initialize 'c' at each of its steps"),
            std::string::npos)
      << w.findings[0].message;
}

TEST(IndexOutOfBounds, ALoweredOutOfBoundsCopyNamesTheBlockAndDim) {
  // i * i is beyond the Z3 encoding (nonlinear): the lowered program's copy
  // shows it, and the message names the block the index map gave.
  const char *src = R"(kernel k:
    grid = (3,)
    in  x: f32[32, 8]  block=(16, 8)  index=(i) -> (i * i, 0)
    out o: f32[48, 8]  block=(16, 8)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::index_out_of_bounds, 3}}));
  EXPECT_NE(v.findings[0].message.find("maps grid point (2,) to block (4, 0): block index 4 along dim 0 is "
                                       "outside [0, 2)"),
            std::string::npos)
      << v.findings[0].message;
  EXPECT_EQ(point_item(v.findings[0], "block"), (std::vector<std::int64_t>{4, 0}));
}

TEST(ReductionNotLastAxis, JudgesAMosaicGpuGridInItsRunOrderCtaByCta) {
  // k is sequential and comes first, i parallel (a CTA axis): each CTA runs
  // over k for its own i, so o's blocks are visited consecutively.
  const char *src = R"(kernel k:
    grid = (4, 2)
    target = h100
    dimension_semantics = (sequential, parallel)
    in  x: f32[512, 256]  block=(128, 128)  index=(k, i) -> (k, i)
    out o: f32[128, 256]  block=(128, 128)  index=(k, i) -> (0, i)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        o[...] += x[...]
)";
  auto v = check_text(src, "k");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  // An init on the wrong axis is found in run order too: (0, 0) accumulates,
  // the init fires again at (1, 0), the next step of the same CTA; the CTA
  // i = 1 never initializes.
  std::string wrong = src;
  wrong.replace(wrong.find("program_id(0) == 0"), 18, "program_id(1) == 0");
  auto w = check_text(wrong, "k");
  ASSERT_EQ(marks(w),
            (Marks{{verifier::Rule::accumulator_reset, 9}, {verifier::Rule::uninitialized_accumulator, 10}}));
  EXPECT_EQ(point_item(w.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(w.findings[0], "reset"), (std::vector<std::int64_t>{1, 0}));
}

TEST(InputWriteLost, NamesTheWindowsMemoryOnAGpuTarget) {
  // (A write nothing reads after it in its step: meant for HBM.)
  const char *src = R"(kernel k:
    grid = (2,)
    target = h100
    dimension_semantics = (sequential,)
    in  x: f32[128, 128]  block=(64, 128)  index=(i) -> (i, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
        x[...] = x[...] * 2.0
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::input_write_lost, 9}}));
  EXPECT_NE(v.findings[0].message.find("stays in the shared-memory (SMEM) window"), std::string::npos)
      << v.findings[0].message;
}

TEST(InputWriteLost, OnMosaicGpuASlotMaskedInPlaceAndReadBackWhereverTheWriteFiresIsNone) {
  // Every step fetches its own slot: the write is that step's copy.
  const char *src = R"(kernel k:
    grid = (2,)
    target = h100
    dimension_semantics = (sequential,)
    in  x: f32[128, 128]  block=(64, 128)  index=(i) -> (i, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i) -> (i, 0)
    body:
        x[...] = x[...] * 2.0
        o[...] = x[...]
)";
  EXPECT_EQ(marks(check_text(src, "k")), Marks{});
  // A read back only under a condition the write lacks leaves the write
  // unread where the condition fails.
  std::string guarded = src;
  guarded.replace(guarded.find("        o[...] = x[...]"), 24,
                  "        o[...] = zeros\n        when program_id(0) == 0:\n            o[...] = x[...]");
  EXPECT_EQ(marks(check_text(guarded, "k")), (Marks{{verifier::Rule::input_write_lost, 8}}));
  // On a TPU the contract holds: an input is read-only.
  std::string tpu = src;
  tpu.replace(tpu.find("target = h100"), 13, "target = tpu_v5e");
  tpu.replace(tpu.find("sequential"), 10, "arbitrary");
  EXPECT_EQ(marks(check_text(tpu, "k")), (Marks{{verifier::Rule::input_write_lost, 8}}));
}

TEST(InputWriteLost, IgnoresAWriteWhoseGuardNeverHolds) {
  const char *src = R"(kernel never:
    grid = (8,)
    in  x: f32[1024, 512]  block=(128, 512)  index=(i) -> (i, 0)
    out o: f32[1024, 512]  block=(128, 512)  index=(i) -> (i, 0)
    body:
        when program_id(0) == 8:
            x[...] = zeros
        o[...] = x[...]
)";
  EXPECT_EQ(check_text(src, "never").status, Status::verified);
}

TEST(IndexOutOfBounds, FlagsATransposedMapOnANonSquareArray) {
  // x has 4 x 2 blocks; the transposed map sends axis 0 (extent 4) to its
  // column blocks, of which there are only 2.
  const char *src = R"(kernel transposed:
    grid = (4, 2)
    in  x: f32[512, 256]  block=(128, 128)  index=(i, j) -> (j, i)
    out o: f32[512, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    body:
        o[...] = transpose(x[...])
)";
  auto v = check_text(src, "transposed");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::index_out_of_bounds, 3}}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ(point_item(v.findings[0], "block"), (std::vector<std::int64_t>{0, 2}));
}

TEST(IndexOutOfBounds, AcceptsANonDividingShapeWithAPartialLastBlock) {
  const char *src = R"(kernel ragged:
    grid = (3,)
    in  x: f32[300, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[300, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] + 1
)";
  EXPECT_EQ(check_text(src, "ragged").status, Status::verified);
}

TEST(IndexOutOfBounds, FlagsABlockPastTheRaggedEndWithItsGridPoint) {
  const char *src = R"(kernel ragged_over:
    grid = (4,)
    in  x: f32[300, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[300, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "ragged_over");
  EXPECT_EQ(marks(v),
            (Marks{{verifier::Rule::index_out_of_bounds, 3}, {verifier::Rule::index_out_of_bounds, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "grid_point"), (std::vector<std::int64_t>{3}));
}

TEST(PartialBlockReduction, FlagsARaggedSumAxisButNotARaggedParallelAxis) {
  const char *src = R"(kernel ragged_sum:
    grid = (3, 2)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[300, 200]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[300, 1]    block=(128, None)  index=(i, k) -> (i, 0)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += sum(x[...], axis=1)
)";
  auto v = check_text(src, "ragged_sum");
  ASSERT_EQ(v.status, Status::violation);
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::partial_block_reduction, 4}}));
  const auto *dim = testing::item(v.findings[0], "dim");
  ASSERT_NE(dim, nullptr);
  EXPECT_EQ(std::get<std::int64_t>(dim->value), 1);
}

TEST(ParallelWriteConflict, FlagsTwoParallelPointsWritingOneBlock) {
  const char *src = R"(kernel par:
    grid = (8,)
    dimension_semantics = (parallel,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[128, 128]   block=(128, 128)  index=(i) -> (0, 0)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "par");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::parallel_write_conflict, 5}}));
  EXPECT_EQ(point_item(v.findings[0], "first_write"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(point_item(v.findings[0], "second_write"), (std::vector<std::int64_t>{1}));
}

TEST(OutputNotCovered, FlagsTheFirstBlockNoGridPointWrites) {
  const char *src = R"(kernel half:
    grid = (2, 2)
    in  x: f32[512, 512]  block=(128, 128)  index=(i, j) -> (i, j)
    out o: f32[512, 512]  block=(128, 128)  index=(i, j) -> (2 * i, j)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "half");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_not_covered, 4}}));
  EXPECT_EQ(point_item(v.findings[0], "block"), (std::vector<std::int64_t>{0, 2}));
}

TEST(AliasHazard, FlagsReadingAnAliasedBlockAfterItsTwinWasWrittenBack) {
  const char *src = R"(kernel shifted_alias:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (3 - i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    alias x -> o
    body:
        o[...] = x[...] + 1
)";
  auto v = check_text(src, "shifted_alias");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::alias_hazard, 5}}));
  // Block 1 of o is written back once grid point 1 ends; x reads it at 2.
  EXPECT_EQ(point_item(v.findings[0], "written_back"), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(point_item(v.findings[0], "read"), (std::vector<std::int64_t>{2}));
}

TEST(AliasHazard, AnAliasedWindowFetchedWhereTheBodyNeverReadsItTakesNothingStale) {
  // Grid point 2 fetches x's block 0 after o's block 0 went back, but reads
  // no x there (a dummy block on an inactive step); the twin reading it is
  // the hazard. (The fetch itself still races the write-back in HBM: the
  // lowered program's slot-race, on the same line.)
  const std::string src = R"(kernel k:
    grid = (3,)
    in  x: f32[24, 128]  block=(8, 128)  index=(i) -> (where(i == 2, 0, i), 0)
    out o: f32[24, 128]  block=(8, 128)  index=(i) -> (i, 0)
    alias x -> o
    body:
        when program_id(0) < 2:
            o[...] = x[...] * 2.0
        when program_id(0) >= 2:
            o[...] = broadcast_to(GUARDED, (8, 128))
)";
  auto spec_rules = [](const std::string &text) {
    auto v = check_text(text, "k");
    std::set<verifier::Rule> rules;
    for (const auto &f : v.findings)
      rules.insert(f.rule);
    return rules;
  };
  EXPECT_EQ(
      spec_rules(std::regex_replace(src, std::regex("GUARDED"), "5.0")).count(verifier::Rule::alias_hazard),
      0u);
  EXPECT_EQ(spec_rules(std::regex_replace(src, std::regex("GUARDED"), "sum(x[...])"))
                .count(verifier::Rule::alias_hazard),
            1u);
}

TEST(SramCapacity, AppliesOnlyWithATargetAndHonoursVmemLimitBytes) {
  const char *src = R"(kernel big:
    grid = (2,)
    in  x: f32[8192, 2048]  block=(4096, 1024)  index=(i) -> (i, 0)
    out o: f32[8192, 2048]  block=(4096, 1024)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";
  auto none = check_text(src, "big");
  EXPECT_EQ(none.status, Status::violation); // only half the columns are covered
  EXPECT_EQ(marks(none).count({verifier::Rule::sram_capacity, 1}), 0u);
  verifier::CheckOptions o;
  o.target = "tpu_v5e";
  auto v = check_text(src, "big", o);
  EXPECT_EQ(marks(v).count({verifier::Rule::sram_capacity, 1}), 1u);
  ASSERT_TRUE(v.sram_bytes.has_value());
  EXPECT_EQ(*v.sram_bytes, 2 * 2 * 4096LL * 1024 * 4);
  for (const auto &f : v.findings)
    if (f.rule == verifier::Rule::sram_capacity) {
      EXPECT_NE(f.message.find("lower bound"), std::string::npos);
    }
}

TEST(SramCapacity, VmemLimitBytesRaisesTheScopedBudget) {
  const char *src = R"(kernel raised:
    grid = (4,)
    target = tpu_v5e
    vmem_limit_bytes = 100 * 2**20
    in  x: f32[8192, 1024]  block=(2048, 1024)  index=(i) -> (i, 0)
    out o: f32[8192, 1024]  block=(2048, 1024)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "raised");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_EQ(*v.sram_bytes, 4 * 2048LL * 1024 * 4);
}

TEST(BlockTiling, FlagsATpuBlockOffTheEightBy128Tile) {
  const char *src = R"(kernel tiles:
    grid = (8,)
    target = tpu_v4
    in  x: f32[1024, 1000]  block=(128, 1000)  index=(i) -> (i, 0)
    out o: f32[1024, 1000]  block=(100, 1000)  index=(i) -> (i, 0)
    body:
        o[...] = x[0:100, :]
)";
  auto v = check_text(src, "tiles");
  EXPECT_EQ(marks(v).count({verifier::Rule::block_tiling, 5}), 1u);
  EXPECT_EQ(marks(v).count({verifier::Rule::block_tiling, 4}), 0u);
}

TEST(Check, ReportsUnknownForAnUnboundSymbolicGrid) {
  const char *src = R"(kernel sym:
    param n >= 1
    grid = (n,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";
  auto v = check_text(src, "sym");
  EXPECT_EQ(v.status, Status::unknown);
  EXPECT_FALSE(v.reason.empty());
  verifier::CheckOptions o;
  o.overrides["n"] = 8;
  EXPECT_EQ(check_text(src, "sym", o).status, Status::verified);
}

std::string gpu_pallas_call() {
  return read_file(
      (std::filesystem::path(PIPECHECK_SOURCE_DIR) / "corpus" / "guide" / "gpu_pallas_call.pk").string());
}

TEST(SramCapacity, TheHopperMatmulCountsThreeSlotsPerWindowedOperandAndNoBytesForItsAccScratch) {
  // 3 x (a 16 KiB + b 32 KiB + o 64 KiB); the f32[128, 256] ACC (128 KiB) is
  // registers. Counting it as shared memory gave 475136 bytes.
  auto v = check_text(gpu_pallas_call(), "hopper_matmul_three_steps");
  ASSERT_TRUE(v.sram_bytes.has_value());
  EXPECT_EQ(*v.sram_bytes, 3 * (16384 + 32768 + 65536));
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::sram_capacity, 71}}));
  auto two = check_text(gpu_pallas_call(), "hopper_matmul_two_steps");
  EXPECT_EQ(two.status, Status::verified) << two.reason;
  EXPECT_EQ(*two.sram_bytes, 2 * (16384 + 32768 + 65536));
}

TEST(SramCapacity, ClipsMaxConcurrentStepsToTheStepsOfOneCta) {
  const char *src = R"(kernel ew:
    grid = (16, 2)
    dimension_semantics = (parallel, sequential)
    target = h100
    max_concurrent_steps = 8
    in  x: f32[1024, 256]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[1024, 256]  block=(64, 128)  index=(i, j) -> (i, j)
    scratch s: f32[64, 128]  memory_space=smem
    body:
        s[...] = x[...]
        o[...] = s[...]
)";
  auto v = check_text(src, "ew");
  ASSERT_TRUE(v.sram_bytes.has_value());
  // Two steps per CTA: 2 slots of 32 KiB per operand, plus the 32 KiB scratch.
  EXPECT_EQ(*v.sram_bytes, 2 * 2 * 32768 + 32768);
}

TEST(UninitializedAccumulator, AnAccScratchStartsAtZeroInEveryCtaButAPlainScratchDoesNot) {
  auto acc = check_text(gpu_pallas_call(), "gpu_matmul");
  EXPECT_EQ(acc.status, Status::verified) << acc.reason;
  auto smem = check_text(gpu_pallas_call(), "gpu_matmul_smem_scratch_without_init");
  EXPECT_EQ(marks(smem), (Marks{{verifier::Rule::uninitialized_accumulator, 43}}));
}

TEST(Check, AnAccScratchCheckedForATpuTargetIsBadInputOnItsLine) {
  verifier::CheckOptions o;
  o.target = "tpu_v5e";
  auto v = check_text(gpu_pallas_call(), "gpu_matmul", o);
  ASSERT_EQ(v.errors.size(), 1u);
  EXPECT_EQ(v.errors[0].loc.line, 24);
  EXPECT_NE(v.errors[0].message.find("memory_space=acc"), std::string::npos);
}

TEST(UninitializedAccumulator, AGpuScratchInitializedOnlyInTheFirstCtaIsUninitializedInTheNext) {
  const std::string src = R"(kernel first_cta_init:
    grid = (2, 4)
    dimension_semantics = (parallel, sequential)
    target = h100
    in  x: f32[128, 512]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[128, 128]  block=(64, 128)  index=(i, j) -> (i, 0)
    scratch s: f32[64, 128]
    body:
        when program_id(0) == 0 and program_id(1) == 0:
            s[...] = zeros
        s[...] += x[...]
        when program_id(1) == 3:
            o[...] = s[...]
)";
  auto gpu = check_text(src, "first_cta_init");
  EXPECT_EQ(marks(gpu), (Marks{{verifier::Rule::uninitialized_accumulator, 11}}));
  ASSERT_FALSE(gpu.findings.empty());
  EXPECT_EQ(point_item(gpu.findings[0], "grid_point"), (std::vector<std::int64_t>{1, 0}));
  // On TPU the scratch is one buffer for the whole grid: written at (0, 0).
  verifier::CheckOptions tpu;
  tpu.target = "tpu_v5e";
  EXPECT_EQ(
      marks(check_text(src, "first_cta_init", tpu)).count({verifier::Rule::uninitialized_accumulator, 11}),
      0u);
}

TEST(ParallelWriteConflict, OnMosaicGpuWithoutDimensionSemanticsEveryAxisIsParallel) {
  const std::string src = R"(kernel k_as_ctas:
    grid = (2, 4)
    target = h100
    in  x: f32[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += x[...]
        o[...] = acc[...]
)";
  // Pallas makes the k axis CTAs too: each writes block (i, 0).
  EXPECT_EQ(marks(check_text(src, "k_as_ctas")).count({verifier::Rule::parallel_write_conflict, 5}), 1u);
  std::string with = src;
  with.insert(with.find("    target"), "    dimension_semantics = (parallel, sequential)\n");
  EXPECT_EQ(check_text(with, "k_as_ctas").status, Status::verified);
}

// Each step n accumulates into its own column chunk of a block that stays
// across k and n, the chunk zeroed on its first k step: disjoint from what the
// other chunks took, so no reset. Zeroing the whole block there discards
// chunk 0 at (0, 0, 1). Symbolic (the chunks' boxes as terms) and enumerated
// agree.
TEST(AccumulatorReset, AcceptsAnInitOfAChunkDisjointFromWhatEarlierStepsAccumulated) {
  const std::string src = R"(kernel chunks:
    grid = (2, 4, 2)
    dimension_semantics = (parallel, arbitrary, arbitrary)
    in  x: f32[2, 32, 256]  block=(None, 8, 128)  index=(b, k, n) -> (b, k, n)
    out o: f32[2, 8, 256]   block=(None, 8, 256)  index=(b, k, n) -> (b, 0, 0)
    body:
        when program_id(1) == 0:
            o[:, ds(program_id(2) * 128, 128)] = zeros
        o[:, ds(program_id(2) * 128, 128)] += x[...]
)";
  std::string whole = src;
  const std::string chunk_init = "o[:, ds(program_id(2) * 128, 128)] = zeros";
  whole.replace(whole.find(chunk_init), chunk_init.size(), "o[...] = zeros");
  for (const std::string *text : {&src, static_cast<const std::string *>(&whole)}) {
    const spec::KernelSpec k = testing::kernel(testing::parse_text(*text), "chunks");
    auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
    ASSERT_TRUE(m.model);
    auto s = verifier::rules::check_symbolic(*m.model, 10000),
         e = verifier::rules::check_enumerated(*m.model);
    ASSERT_TRUE(s.unknown.empty()) << s.unknown[0];
    ASSERT_EQ(s.findings.size(), e.findings.size());
    for (std::size_t i = 0; i < s.findings.size(); ++i)
      EXPECT_EQ(s.findings[i].witness, e.findings[i].witness) << s.findings[i].rule;
  }
  EXPECT_EQ(check_text(src, "chunks").status, Status::verified);
  auto v = check_text(whole, "chunks");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_reset, 8}}));
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "first_visit"), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{0, 0, 1}));
}

// A scratch accumulator reset only at the first grid point, on a rank-4 grid
// with the reduction axis last: block (0, 0, 1) of o gets what the scratch
// accumulated for (0, 0, 0) as well. Symbolic and enumerated give one witness.
TEST(AccumulatorCarried, FlagsAScratchResetOnlyAtTheFirstPointOnARank4Grid) {
  const std::string src = R"(kernel carried4:
    grid = (2, 2, 2, 3)
    in  x: f32[2, 256, 384, 256]  block=(None, 128, 128, 128)  index=(b, i, j, k) -> (b, i, k, j)
    out o: f32[2, 256, 256]  block=(None, 128, 128)  index=(b, i, j, k) -> (b, i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(0) == 0 and program_id(1) == 0 and program_id(2) == 0 and program_id(3) == 0:
            acc[...] = zeros
        acc[...] += sum(x[...], axis=1)
        when program_id(3) == 2:
            o[...] = acc[...]
)";
  auto v = check_text(src, "carried4");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_carried, 11}})) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "accumulated"), (std::vector<std::int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "stored"), (std::vector<std::int64_t>{0, 0, 1, 2}));
  const spec::KernelSpec k = testing::kernel(testing::parse_text(src), "carried4");
  auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
  ASSERT_TRUE(m.model);
  auto s = verifier::rules::check_symbolic(*m.model, 10000), e = verifier::rules::check_enumerated(*m.model);
  ASSERT_EQ(s.findings.size(), 1u);
  ASSERT_EQ(e.findings.size(), 1u);
  EXPECT_EQ(s.findings[0].witness, e.findings[0].witness);
  // Reset on the first step of each (b, i, j) block: verified.
  std::string right = src;
  right.replace(right.find("program_id(0) == 0 and program_id(1) == 0 and program_id(2) == 0 and "), 69, "");
  EXPECT_EQ(check_text(right, "carried4").status, Status::verified);
}

// The value reaches the output through locals; a store every step of what
// accumulated so far into the step's own block is a running total.
TEST(AccumulatorCarried, FollowsTheScratchThroughLocalsAndLeavesARunningTotalAlone) {
  const std::string src = R"(kernel via_locals:
    grid = (6,)
    in  x: f32[768, 128]  block=(128, 128)  index=(g,) -> (g, 0)
    out o: f32[2, 128]  block=(None, 128)  index=(g,) -> (g // 3, 0)
    out r: f32[6, 128]  block=(None, 128)  index=(g,) -> (g, 0)
    scratch acc: f32[128]
    body:
        when program_id(0) == 0:
            acc[...] = zeros
        acc[...] += sum(x[...], axis=0)
        t = acc[...]
        u = t * 2.0
        r[...] = t
        when program_id(0) % 3 == 2:
            o[...] = u + 1.0
)";
  auto v = check_text(src, "via_locals");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_carried, 15}}));
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "stored"), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(point_item(v.findings[0], "accumulated"), (std::vector<std::int64_t>{0}));
}

// On Mosaic GPU each CTA has its own scratch, and an acc scratch starts at
// zero in each: the rows as CTAs carry nothing into each other. The same
// rows as steps of one TPU grid, the scratch zeroed once, carry.
TEST(AccumulatorCarried, CountsOnlyThePointsOfOneCtaOnMosaicGpu) {
  const std::string gpu = R"(kernel rows:
    grid = (2, 4)
    dimension_semantics = (parallel, sequential)
    target = h100
    max_concurrent_steps = 2
    delay_release = 1
    in  a: bf16[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    in  b: bf16[512, 128]  block=(128, 128)  index=(i, k) -> (k, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += dot(a[...], b[...])
        when program_id(1) == 3:
            o[...] = acc[...]
)";
  auto v = check_text(gpu, "rows");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  const std::string tpu = R"(kernel rows:
    grid = (2, 4)
    dimension_semantics = (arbitrary, arbitrary)
    in  a: bf16[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    in  b: bf16[512, 128]  block=(128, 128)  index=(i, k) -> (k, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]
    body:
        when program_id(0) == 0 and program_id(1) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(1) == 3:
            o[...] = acc[...]
)";
  auto w = check_text(tpu, "rows");
  EXPECT_EQ(marks(w), (Marks{{verifier::Rule::accumulator_carried, 13}}));
  ASSERT_EQ(w.findings.size(), 1u);
  EXPECT_EQ(point_item(w.findings[0], "accumulated"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(w.findings[0], "stored"), (std::vector<std::int64_t>{1, 3}));
}

// The store of a matmul's scratch guarded on the first K step: each block's
// later products are accumulated, then re-initialized away at the next
// block. The init is right (no accumulator-reset); the store is not.
// Symbolic and enumerated give one witness.
TEST(AccumulationLost, FlagsAStoreOnTheFirstReductionStepAtTheStore) {
  const std::string src = R"(kernel first_step:
    grid = (2, 2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, j, k) -> (i, k)
    in  y: f32[512, 256]  block=(128, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(x[...], y[...])
        when program_id(2) == 0:
            o[...] = acc[...]
)";
  auto v = check_text(src, "first_step");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulation_lost, 12}})) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "accumulated"), (std::vector<std::int64_t>{0, 0, 0}));
  // (Every update after the store is lost; the finding names the last one.)
  EXPECT_EQ(point_item(v.findings[0], "lost"), (std::vector<std::int64_t>{0, 0, 3}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_NE(v.findings[0].message.find("'acc' is updated at grid point (0, 0, 3) and re-initialized at grid "
                                       "point (0, 1, 0)"),
            std::string::npos)
      << v.findings[0].message;
  testing::expect_enumerator_agrees(src, "first_step", true);
  std::string right = src;
  right.replace(right.rfind("program_id(2) == 0"), 18, "program_id(2) == 3");
  EXPECT_EQ(check_text(right, "first_step").status, Status::verified) << right;
}

// One output block reduced over the whole grid, stored before the last
// step's update: nothing re-initializes the scratch, the grid just ends.
TEST(AccumulationLost, FlagsAnUpdateAfterTheStoreOnTheLastStepOfTheGrid) {
  const std::string src = R"(kernel store_then_add:
    grid = (1, 4)
    in  x: f32[256, 1024]  block=(256, 256)  index=(i, k) -> (i, k)
    out o: f32[256, 256]   block=(256, 256)  index=(i, k) -> (i, 0)
    scratch acc: f32[256, 256]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        when program_id(1) == 3:
            o[...] = acc[...]
        acc[...] += x[...]
)";
  auto v = check_text(src, "store_then_add");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulation_lost, 10}})) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "lost"), (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(point_item(v.findings[0], "last_step"), (std::vector<std::int64_t>{0, 3}));
  testing::expect_enumerator_agrees(src, "store_then_add", true);
}

// The init folded into the first update (`where(k == 0, 0, acc[...]) + x`):
// k == 0 is an init that starts the sum with x there, and counts as the
// earlier accumulation. Two steps, stored at the first: the k == 1 update is
// re-initialized away at the next row (megablox's tile shared by two groups,
// stored at its first visit). Stored at the last step, verified; the same
// folded init in an exclusive scan (each step its own block) stays exempt.
TEST(AccumulationLost, CountsAFoldedInitAsTheEarlierAccumulation) {
  const std::string src = R"(kernel folded:
    grid = (4, 2)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[32, 256]  block=(8, 128)  index=(i, k) -> (i, k)
    out o: f32[32, 128]  block=(8, 128)  index=(i, k) -> (i, 0)
    scratch t: f32[8, 128]
    body:
        t[...] = where(program_id(1) == 0, zeros, t[...]) + x[...]
        when program_id(1) == 0:
            o[...] = t[...]
)";
  auto v = check_text(src, "folded");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulation_lost, 10}})) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "accumulated"), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(point_item(v.findings[0], "lost"), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(point_item(v.findings[0], "reset"), (std::vector<std::int64_t>{1, 0}));
  testing::expect_enumerator_agrees(src, "folded", true);
  std::string right = src;
  right.replace(right.rfind("program_id(1) == 0"), 18, "program_id(1) == 1");
  EXPECT_EQ(check_text(right, "folded").status, Status::verified) << right;
  testing::expect_enumerator_agrees(right, "folded", true);
  const std::string scan = R"(kernel folded_scan:
    grid = (4, 2)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[32, 256]  block=(8, 128)  index=(i, k) -> (i, k)
    out o: f32[32, 256]  block=(8, 128)  index=(i, k) -> (i, k)
    scratch t: f32[8, 128]
    body:
        o[...] = where(program_id(1) == 0, zeros, t[...])
        t[...] = where(program_id(1) == 0, zeros, t[...]) + x[...]
)";
  EXPECT_EQ(check_text(scan, "folded_scan").status, Status::verified);
  testing::expect_enumerator_agrees(scan, "folded_scan", true);
}

// An exclusive scan stores before each step's update into the step's own
// block, and its init per row throws the row's last update away by design:
// no block is reduced over several steps. (This was accumulator-reset.) An
// auxiliary scratch (a running max feeding only another scratch) may leave
// its last update unread too.
TEST(AccumulationLost, LeavesAnExclusiveScanAndAnAuxiliaryScratchAlone) {
  const std::string scan = R"(kernel row_scan:
    grid = (2, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[512, 1024]  block=(256, 256)  index=(i, k) -> (i, k)
    out o: f32[512, 1024]  block=(256, 256)  index=(i, k) -> (i, k)
    scratch acc: f32[256, 256]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        o[...] = acc[...]
        acc[...] += x[...]
)";
  auto v = check_text(scan, "row_scan");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  testing::expect_enumerator_agrees(scan, "row_scan", true);
  const std::string aux = R"(kernel row_max_count:
    grid = (2, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[512, 1024]  block=(256, 256)  index=(i, k) -> (i, k)
    out o: f32[512, 256]   block=(256, 256)  index=(i, k) -> (i, 0)
    scratch m: f32[256, 256]
    scratch n: f32[256, 256]
    body:
        when program_id(1) == 0:
            m[...] = x[...]
            n[...] = zeros
        n[...] = n[...] + where(x[...] > m[...], 1.0, 0.0)
        m[...] = maximum(m[...], x[...])
        when program_id(1) == 3:
            o[...] = n[...]
)";
  auto w = check_text(aux, "row_max_count");
  EXPECT_EQ(w.status, Status::verified) << w.reason;
}

// Mosaic GPU: each CTA (a row here) has its own register accumulator and runs
// k in sequence; a store one step early leaves the CTA's last product unread
// when the CTA ends. On time, verified.
TEST(AccumulationLost, CountsTheEndOfEachCtaOnMosaicGpu) {
  const std::string src = R"(kernel rows:
    grid = (2, 4)
    dimension_semantics = (parallel, sequential)
    target = h100
    max_concurrent_steps = 2
    delay_release = 1
    in  a: bf16[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    in  b: bf16[512, 128]  block=(128, 128)  index=(i, k) -> (k, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += dot(a[...], b[...])
        when program_id(1) == 2:
            o[...] = acc[...]
)";
  auto v = check_text(src, "rows");
  // (The lowered program's write-back of the slot the store did not fill is
  // the same root cause: dropped.)
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulation_lost, 14}})) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(point_item(v.findings[0], "lost"), (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(point_item(v.findings[0], "last_step"), (std::vector<std::int64_t>{0, 3}));
  testing::expect_enumerator_agrees(src, "rows", true);
  std::string right = src;
  right.replace(right.find("program_id(1) == 2"), 18, "program_id(1) == 3");
  EXPECT_EQ(check_text(right, "rows").status, Status::verified) << right;
}

// A grid too large to enumerate (2^30 points): the solver finds the first
// lost update, at the first block's second step.
TEST(AccumulationLost, DecidesAGridTooLargeToEnumerate) {
  const std::string src = R"(kernel big:
    grid = (1024, 1024, 1024)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  x: f32[131072, 131072]  block=(128, 128)  index=(i, j, k) -> (i, k)
    out o: f32[131072, 131072]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += x[...]
        when program_id(2) == 1:
            o[...] = acc[...]
)";
  const spec::KernelSpec k = testing::kernel(testing::parse_text(src), "big");
  auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
  ASSERT_TRUE(m.model);
  auto s = verifier::rules::check_symbolic(*m.model, 10000);
  EXPECT_TRUE(s.unknown.empty());
  ASSERT_EQ(s.findings.size(), 1u);
  EXPECT_EQ(s.findings[0].rule, verifier::Rule::accumulation_lost);
  EXPECT_EQ(point_item(s.findings[0], "accumulated"), (std::vector<std::int64_t>{0, 0, 0}));
  // (The solver's witness may be any lost update; the finding names the last.)
  EXPECT_EQ(point_item(s.findings[0], "lost"), (std::vector<std::int64_t>{0, 0, 1023}));
  EXPECT_EQ(point_item(s.findings[0], "reset"), (std::vector<std::int64_t>{0, 1, 0}));
}

// Mosaic GPU, rank-4 grid (b parallel; h, q, k sequential), the output on
// (b, h, q) moving within each CTA: the store on the last k step is lost for
// every (h, q) but the CTA's last. Too many points to enumerate; the solver
// names the first lost store. With h and q parallel too the output stays
// for the whole CTA: verified.
TEST(OutputWriteLost, FlagsAStoreOnTheLastReductionStepOfAMovingOutputOnARank4Grid) {
  const std::string src = R"(kernel attn:
    grid = (8, 64, 64, 64)
    dimension_semantics = (parallel, sequential, sequential, sequential)
    target = h100
    in  x: f32[8, 64, 4096, 4096]  block=(None, None, 64, 64)  index=(b, h, q, k) -> (b, h, q, k)
    out o: f32[8, 64, 4096, 64]  block=(None, None, 64, 64)  index=(b, h, q, k) -> (b, h, q, 0)
    scratch acc: f32[64, 64]
    body:
        when program_id(3) == 0:
            acc[...] = zeros
        acc[...] += x[...]
        when program_id(3) == num_programs(3) - 1:
            o[...] = acc[...]
)";
  const spec::KernelSpec k = testing::kernel(testing::parse_text(src), "attn");
  auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
  ASSERT_TRUE(m.model);
  auto s = verifier::rules::check_symbolic(*m.model, 10000);
  EXPECT_TRUE(s.unknown.empty());
  ASSERT_EQ(s.findings.size(), 1u);
  EXPECT_EQ(s.findings[0].rule, verifier::Rule::output_write_lost);
  EXPECT_EQ(s.findings[0].loc.line, 13);
  EXPECT_EQ(point_item(s.findings[0], "grid_point"), (std::vector<std::int64_t>{0, 0, 0, 63}));
  EXPECT_EQ(point_item(s.findings[0], "previous"), (std::vector<std::int64_t>{0, 0, 0, 62}));
  std::string right = src;
  right.replace(right.find("(parallel, sequential, sequential, sequential)"), 46,
                "(parallel, parallel, parallel, sequential)");
  const spec::KernelSpec k2 = testing::kernel(testing::parse_text(right), "attn");
  auto m2 = verifier::rules::build_model(k2, {}, std::nullopt);
  ASSERT_TRUE(m2.model);
  auto s2 = verifier::rules::check_symbolic(*m2.model, 10000);
  EXPECT_TRUE(s2.unknown.empty());
  EXPECT_TRUE(s2.findings.empty()) << s2.findings[0].message;
}

// An output whose index map names only CTA axes is copied out after the
// loop from the last step's slot (n - 1) % M. A store on step 61 of 64 with
// M = 3 (slot 1; the last step's is slot 0) that nothing follows is lost;
// on step 63 it is the last step's. Too many points to enumerate.
TEST(OutputWriteLost, FlagsTheLastStoreOfAnOutputCopiedAfterTheLoopOnAnotherSlot) {
  auto src = [](int at) {
    return R"(kernel late:
    grid = (512, 8, 8)
    dimension_semantics = (parallel, sequential, sequential)
    target = h100
    max_concurrent_steps = 3
    in  x: f32[32768, 8192]  block=(64, 128)  index=(i, a, b) -> (i, 8 * a + b)
    out o: f32[32768, 128]  block=(64, 128)  index=(i, a, b) -> (i, 0)
    body:
        when 8 * program_id(1) + program_id(2) == )" +
           std::to_string(at) + R"(:
            o[...] = x[...]
)";
  };
  for (int at : {61, 63}) {
    const spec::KernelSpec k = testing::kernel(testing::parse_text(src(at)), "late");
    auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
    ASSERT_TRUE(m.model);
    auto s = verifier::rules::check_symbolic(*m.model, 10000);
    EXPECT_TRUE(s.unknown.empty());
    if (at == 63) {
      EXPECT_TRUE(s.findings.empty()) << s.findings[0].message;
      continue;
    }
    ASSERT_EQ(s.findings.size(), 1u);
    EXPECT_EQ(s.findings[0].rule, verifier::Rule::output_write_lost);
    EXPECT_EQ(point_item(s.findings[0], "grid_point"), (std::vector<std::int64_t>{0, 7, 5}));
    EXPECT_EQ(point_item(s.findings[0], "last_step"), (std::vector<std::int64_t>{0, 7, 7}));
  }
}

// The TPU keeps an output block in one VMEM buffer over its visit and writes
// it back when the visit ends: the same store is right there.
TEST(OutputWriteLost, LeavesTpuKernelsAlone) {
  const std::string src = R"(kernel rows:
    grid = (2, 4)
    dimension_semantics = (arbitrary, arbitrary)
    in  x: f32[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        acc[...] += x[...]
        when program_id(1) == 3:
            o[...] = acc[...]
)";
  EXPECT_EQ(check_text(src, "rows").status, Status::verified);
  std::string gpu = src;
  gpu.replace(gpu.find("    in  x"), 0, "    target = h100\n");
  auto v = check_text(gpu, "rows");
  EXPECT_EQ(marks(v), (Marks{{verifier::Rule::output_write_lost, 13}})) << v.reason;
}

// A running argmax's max m reaches the index output through idx; a second
// output on one block for the whole grid (a global max) does not hold m's
// values, so m's re-init on each row starts no visit of anything m reaches.
// Symbolic and enumerated agree.
TEST(AccumulatorReset, CountsOnlyTheVisitsOfOutputsTheScratchReaches) {
  const std::string src = R"(kernel argmax_and_global_max:
    grid = (2, 4)
    dimension_semantics = (arbitrary, arbitrary)
    in  x: f32[16, 512]  block=(8, 128)  index=(i, k) -> (i, k)
    out idx_o: i32[16, 128]  block=(8, 128)  index=(i, k) -> (i, 0)
    out g: f32[8, 128]  block=(8, 128)  index=(i, k) -> (0, 0)
    scratch m: f32[8, 1]
    scratch idx: i32[8, 1]
    body:
        when program_id(1) == 0:
            m[...] = full(-inf)
            idx[...] = zeros
        bm = max(x[...], axis=1, keepdims=True)
        bi = reshape(argmax(x[...], axis=1), (8, 1)) + program_id(1) * 128
        idx[...] = where(bm > m[...], bi, idx[...])
        m[...] = maximum(m[...], bm)
        when program_id(1) == 3:
            idx_o[...] = idx[...]
        when program_id(0) == 0 and program_id(1) == 0:
            g[...] = full(-inf)
        g[...] = maximum(g[...], max(x[...]))
)";
  auto v = check_text(src, "argmax_and_global_max");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  testing::expect_enumerator_agrees(src, "argmax_and_global_max", true);
  const auto m = testing::kernel(testing::parse_text(src), "argmax_and_global_max");
  auto model = verifier::rules::build_model(m, {}, std::nullopt);
  ASSERT_TRUE(model.model);
  EXPECT_EQ(verifier::rules::reached_outputs(*model.model, *model.model->operand_index("m")),
            (std::vector<std::size_t>{*model.model->operand_index("idx_o")}));
}

// A running argmax keeps the running max in m, which feeds idx, not the
// output: m's update at the last k step is dead, and the init at the next row
// block throws it away harmlessly. The same init also firing mid-visit (k ==
// 1) discards what k = 0 put into m, which k = 1 would have read. A result
// accumulator updated through a local (`a = acc[...]` then `acc[...] = a +
// s`) accumulates. Symbolic and enumerated witnesses agree.
TEST(AccumulatorReset, AnAuxiliaryScratchIsResetHarmfullyOnlyWithinAVisitOfAnOutputBlock) {
  const std::string aux = R"(kernel aux:
    grid = (2, 3)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[16, 384]  block=(8, 128)  index=(i, k) -> (i, k)
    out o: i32[16, 1]  block=(8, 1)  index=(i, k) -> (i, 0)
    scratch m: f32[8, 1]
    scratch idx: i32[8, 1]
    body:
        when program_id(1) == 0:
            m[...] = full(-inf)
            idx[...] = zeros
        bm = max(x[...], axis=1, keepdims=True)
        idx[...] = where(bm > m[...], program_id(1), idx[...])
        m[...] = maximum(m[...], bm)
        when program_id(1) == 2:
            o[...] = idx[...]
)";
  std::string mid = aux;
  mid.replace(mid.find("when program_id(1) == 0:"), 24, "when program_id(1) != 2:");
  std::string local = R"(kernel local:
    grid = (2, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[16, 512]  block=(8, 128)  index=(i, k) -> (i, k)
    out o: f32[16, 1]  block=(8, 1)  index=(i, k) -> (i, 0)
    scratch acc: f32[8, 1]
    scratch last: f32[8, 1]
    body:
        when program_id(1) == 0 or program_id(1) == 2:
            acc[...] = zeros
        a = acc[...]
        acc[...] = a + sum(x[...], axis=1, keepdims=True)
        last[...] = a
        when program_id(1) == 3:
            o[...] = acc[...]
)";
  for (const auto &[text, name] : std::vector<std::pair<const std::string *, const char *>>{
           {&aux, "aux"}, {&mid, "aux"}, {&local, "local"}}) {
    const spec::KernelSpec k = testing::kernel(testing::parse_text(*text), name);
    auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
    ASSERT_TRUE(m.model);
    auto s = verifier::rules::check_symbolic(*m.model, 10000),
         e = verifier::rules::check_enumerated(*m.model);
    ASSERT_TRUE(s.unknown.empty()) << s.unknown[0];
    ASSERT_EQ(s.findings.size(), e.findings.size()) << *text;
    for (std::size_t i = 0; i < s.findings.size(); ++i)
      EXPECT_EQ(s.findings[i].witness, e.findings[i].witness) << s.findings[i].rule;
  }
  EXPECT_EQ(check_text(aux, "aux").status, Status::verified);
  auto v = check_text(mid, "aux");
  EXPECT_EQ(marks(v).count({verifier::Rule::accumulator_reset, 10}), 1u) << v.reason;
  auto l = check_text(local, "local");
  EXPECT_EQ(marks(l), (Marks{{verifier::Rule::accumulator_reset, 10}}));
}

// grid (i, k): init and accumulation inside `when i != 1`, the store on the
// last k: row 1 stores row 0's sum.
std::string empty_row_kernel(int num_k) {
  return "kernel rows:\n"
         "    param num_rows = 3\n"
         "    param num_k = " +
         std::to_string(num_k) +
         "\n"
         "    grid = (num_rows, num_k)\n"
         "    dimension_semantics = (arbitrary, arbitrary)\n"
         "    in  x: f32[8 * num_rows, 128 * num_k]  block=(8, 128)  index=(i, k) -> (i, k)\n"
         "    out o: f32[8 * num_rows, 128]  block=(8, 128)  index=(i, k) -> (i, 0)\n"
         "    scratch acc: f32[8, 128]\n"
         "    body:\n"
         "        when program_id(0) != 1:\n"
         "            when program_id(1) == 0:\n"
         "                acc[...] = zeros\n"
         "            acc[...] += x[...]\n"
         "        when program_id(1) == num_programs(1) - 1:\n"
         "            o[...] = acc[...]\n";
}

TEST(AccumulatorCarried, ARowWhoseVisitNeitherInitializesNorAccumulatesStoresTheRowBefore) {
  auto v = check_text(empty_row_kernel(2), "rows");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  const auto &f = v.findings.at(0);
  EXPECT_EQ(f.rule, verifier::Rule::accumulator_carried);
  EXPECT_EQ(point_item(f, "accumulated"), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(point_item(f, "stored"), (std::vector<std::int64_t>{1, 1}));
}

TEST(AccumulatorCarried, AnEmptyRowIsDecidedOnGridsPastTheEnumeratorsLimitAndUnknownPastItsOwn) {
  // 3 x 2000 points: past the 4096 the enumerator runs the other rules on.
  auto v = check_text(empty_row_kernel(2000), "rows");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(point_item(v.findings.at(0), "stored"), (std::vector<std::int64_t>{1, 1999}));
  // 3 x 30000 points: past what the other rules are enumerated on, still
  // decided point by point.
  v = check_text(empty_row_kernel(30000), "rows");
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(point_item(v.findings.at(0), "stored"), (std::vector<std::int64_t>{1, 29999}));
  // 3 x 400000 points: past the 2^20 it is decided on.
  v = check_text(empty_row_kernel(400000), "rows");
  EXPECT_NE(v.status, Status::verified);
  EXPECT_NE(v.reason.find("whether accumulator-carried holds (a visit that stores 'acc'"), std::string::npos)
      << v.reason;
}

// A cumulative sum down row tiles (axis 0) of each column tile (axis 1),
// the carry reset at i == 0: one carry for every column tile (`c[...]`), or
// one per column tile (`c[ds(program_id(1), 1), :]`, banked).
std::string column_scan_kernel(int rows, int cols, bool banked) {
  const std::string c = banked ? "c[ds(program_id(1), 1), :]" : "c[...]";
  return "kernel scan:\n"
         "    grid = (" +
         std::to_string(rows) + ", " + std::to_string(cols) +
         ")\n"
         "    dimension_semantics = (arbitrary, arbitrary)\n"
         "    in  x: f32[" +
         std::to_string(8 * rows) + ", " + std::to_string(128 * cols) +
         "]  block=(8, 128)  index=(i, j) -> (i, j)\n"
         "    out o: f32[" +
         std::to_string(8 * rows) + ", " + std::to_string(128 * cols) +
         "]  block=(8, 128)  index=(i, j) -> (i, j)\n"
         "    scratch c: f32[" +
         std::to_string(banked ? cols : 1) +
         ", 128]\n"
         "    body:\n"
         "        when program_id(0) == 0:\n"
         "            " +
         c +
         " = zeros\n"
         "        v = cumsum(x[...], axis=0) + " +
         c +
         "\n"
         "        o[...] = v\n"
         "        " +
         c + " = v[7:8, :]\n";
}

TEST(AccumulatorCarried, ACarryResetPerColumnTileButSharedByThemTakesTheLastColumnsValue) {
  // 64 x 128 points: past the 4096 the enumerator runs the other rules on.
  for (int cols : {2, 128}) {
    auto v = check_text(column_scan_kernel(64, cols, false), "scan");
    ASSERT_EQ(v.status, Status::violation) << v.reason;
    EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_carried, 10}}));
    const auto &f = v.findings.at(0);
    EXPECT_EQ(point_item(f, "initialized"), (std::vector<std::int64_t>{0, 0}));
    EXPECT_EQ(point_item(f, "stored"), (std::vector<std::int64_t>{0, cols - 1}));
    EXPECT_EQ(point_item(f, "read"), (std::vector<std::int64_t>{1, 0}));
    EXPECT_NE(f.message.find("its init fires for each index of axis 1"), std::string::npos) << f.message;
    EXPECT_EQ(check_text(column_scan_kernel(64, cols, true), "scan").status, Status::verified);
  }
  // One column tile, or the reset once for the whole grid (a running total): no chains.
  EXPECT_EQ(check_text(column_scan_kernel(64, 1, false), "scan").status, Status::verified);
  // 512 x 256 points: decided point by point; 2048 x 1024, past the 2^20
  // it is decided on, is not.
  auto mid = check_text(column_scan_kernel(512, 256, false), "scan");
  ASSERT_EQ(mid.status, Status::violation) << mid.reason;
  EXPECT_EQ(marks(mid), (Marks{{verifier::Rule::accumulator_carried, 10}}));
  auto big = check_text(column_scan_kernel(2048, 1024, false), "scan");
  EXPECT_NE(big.status, Status::verified);
  EXPECT_NE(big.reason.find("a read of 'c' that may take another chain's value"), std::string::npos)
      << big.reason;
}

TEST(AccumulatorCarried, ACarryResetAtEverySegmentStartButSharedByTheColumnTilesTakesAnotherColumnsValue) {
  // The scan along axis 0 restarts at i % 2 == 0, or where a prefetch table
  // of segment starts says: the inits differ on both axes, but fire on whole
  // rows, so axis 1 still indexes the chains.
  for (const char *reset : {"program_id(0) % 2 == 0", "seg[program_id(0)] == 1"}) {
    for (bool banked : {false, true}) {
      std::string src =
          std::regex_replace(column_scan_kernel(8, 4, banked), std::regex("program_id\\(0\\) == 0"), reset);
      src = std::regex_replace(src, std::regex("    in  x"),
                               "    prefetch seg: i32[8] = [1, 0, 0, 1, 1, 0, 1, 0]\n    in  x");
      auto v = check_text(src, "scan");
      if (banked) {
        EXPECT_EQ(v.status, Status::verified) << reset << "\n" << v.reason;
        continue;
      }
      ASSERT_EQ(v.status, Status::violation) << reset << "\n" << src;
      EXPECT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_carried, 11}})) << reset;
      const auto &f = v.findings.at(0);
      EXPECT_EQ(point_item(f, "initialized"), (std::vector<std::int64_t>{0, 0})) << reset;
      EXPECT_EQ(point_item(f, "stored"), (std::vector<std::int64_t>{0, 3})) << reset;
      EXPECT_EQ(point_item(f, "read"), (std::vector<std::int64_t>{1, 0})) << reset;
    }
  }
}

TEST(AccumulatorCarried, ASingleInitForTheWholeGridIsATotalEveryBlockMayStore) {
  // Only grid point (0, 0) initializes, and only row 0 accumulates: every row
  // stores the same total (a broadcast, or a scan with empty rows).
  const char *src = R"(kernel total:
    grid = (3, 2)
    dimension_semantics = (arbitrary, arbitrary)
    in  x: f32[24, 256]  block=(8, 128)  index=(i, k) -> (i, k)
    out o: f32[24, 128]  block=(8, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[8, 128]
    body:
        when program_id(0) == 0 and program_id(1) == 0:
            acc[...] = zeros
        when program_id(0) == 0:
            acc[...] += x[...]
        when program_id(1) == 1:
            o[...] = acc[...]
)";
  auto v = check_text(src, "total");
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

} // namespace

// A seed store (`o[...] = x[...]`, or a select-init's fresh side) of an output
// that is also accumulated into is a partial result: a seed firing again in
// the visit, on another block of x, discards it. Symbolic and enumerated
// agree; the seed guarded on the first step of the visit is right.
TEST(AccumulatorReset, ASeedStoreFiringAgainInTheVisitDiscardsTheSeededSum) {
  const struct {
    const char *name, *body;
    int line;
  } cases[] = {
      {"wrong_axis",
       "        when program_id(0) == 0:\n            o[...] = x[...]\n"
       "        when program_id(0) > 0:\n            o[...] += x[...]\n",
       8},
      {"two_steps",
       "        when program_id(1) < 2:\n            o[...] = x[...]\n"
       "        when program_id(1) >= 1:\n            o[...] += x[...]\n",
       8},
      {"select", "        o[...] = where(program_id(1) < 2, 0.0, o[...]) + x[...]\n", 7},
  };
  for (const auto &c : cases) {
    const std::string src = std::string("kernel k:\n    grid = (1, 3)\n") +
                            "    dimension_semantics = (parallel, arbitrary)\n"
                            "    in  x: f32[8, 384]  block=(8, 128)  index=(j, k) -> (j, k)\n"
                            "    out o: f32[8, 128]  block=(8, 128)  index=(j, k) -> (j, 0)\n"
                            "    body:\n" +
                            c.body;
    EXPECT_EQ(marks(check_text(src, "k")), (Marks{{verifier::Rule::accumulator_reset, c.line}})) << c.name;
    const spec::KernelSpec k = testing::kernel(testing::parse_text(src), "k");
    auto m = verifier::rules::build_model(k, {}, std::nullopt); // points into k
    ASSERT_TRUE(m.model);
    auto s = verifier::rules::check_symbolic(*m.model, 10000),
         e = verifier::rules::check_enumerated(*m.model);
    ASSERT_EQ(s.findings.size(), 1u) << c.name;
    ASSERT_EQ(e.findings.size(), 1u) << c.name;
    EXPECT_EQ(s.findings[0].witness, e.findings[0].witness) << c.name;
  }
  // Seeded on the reduction axis' first step: verified.
  const char *right = R"(kernel k:
    grid = (1, 3)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[8, 384]  block=(8, 128)  index=(j, k) -> (j, k)
    out o: f32[8, 128]  block=(8, 128)  index=(j, k) -> (j, 0)
    body:
        when program_id(1) == 0:
            o[...] = x[...]
        when program_id(1) > 0:
            o[...] += x[...]
)";
  EXPECT_EQ(check_text(right, "k").status, Status::verified);
  // A seed of an input that stays on its block writes the same values again:
  // nothing is discarded (`o = bias` at every step, then `o += x`, is a
  // reset of what `+=` added, found as such).
  const char *same_block = R"(kernel k:
    grid = (1, 3)
    dimension_semantics = (parallel, arbitrary)
    in  b: f32[8, 128]  block=(8, 128)  index=(j, k) -> (j, 0)
    out o: f32[8, 128]  block=(8, 128)  index=(j, k) -> (j, 0)
    body:
        o[...] = b[...]
        o[...] += b[...]
)";
  EXPECT_EQ(marks(check_text(same_block, "k")), (Marks{{verifier::Rule::accumulator_reset, 7}}));
}

// A reduction axis outside the axis the output follows splits each block's
// visits: the advice is the grid order (or a bank per block), not an init
// per visit, which the kernel already has.
TEST(AccumulatorCarried, AdvisesTheGridOrderWhereTheStoredBlocksVisitsAreSplit) {
  const char *src = R"(kernel k:
    grid = (2, 4)
    dimension_semantics = (arbitrary, arbitrary)
    in  x: f32[1024, 256]  block=(256, 128)  index=(k, i) -> (i, k)
    out o: f32[1024, 128]  block=(256, 128)  index=(k, i) -> (i, 0)
    scratch acc: f32[256, 128]
    body:
        when program_id(0) == 0:
            acc[...] = zeros
        acc[...] += x[...]
        when program_id(0) == 1:
            o[...] = acc[...]
)";
  auto v = check_text(src, "k");
  ASSERT_EQ(marks(v), (Marks{{verifier::Rule::accumulator_carried, 12}}));
  EXPECT_NE(
      v.findings[0].message.find("'o' visits block (0, 0) at grid point (0, 0) and again at (1, 0), after "
                                 "other blocks"),
      std::string::npos)
      << v.findings[0].message;
  EXPECT_NE(v.findings[0].message.find("order the grid"), std::string::npos) << v.findings[0].message;
  EXPECT_EQ(v.findings[0].message.find("re-initialize it on the first step"), std::string::npos)
      << v.findings[0].message;
}

} // namespace pipecheck
