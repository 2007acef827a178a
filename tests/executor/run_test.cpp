#include "executor/run.hpp"

#include "executor/npy.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <unistd.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::load_corpus;
using executor::testing::parse_text;
using executor::testing::unit;

namespace {

const spec::File &pipelines() {
  static const spec::File f = load_corpus("corpus/examples/guide_pipelines.pk");
  return f;
}
const spec::File &wgmma() {
  static const spec::File f = load_corpus("corpus/examples/gpu_wgmma.pk");
  return f;
}
const spec::File &reductions() {
  static const spec::File f = load_corpus("corpus/examples/guide_reductions.pk");
  return f;
}
// Runs at N = 8: a symbolic param has no default, and 8 trips wrap every
// slot ring of these pipelines.
RunOptions with_n(std::int64_t n = 8) {
  RunOptions o;
  o.overrides["N"] = n;
  return o;
}

const spec::File &elementwise() {
  static const spec::File f = load_corpus("corpus/examples/guide_elementwise.pk");
  return f;
}

bool fails_in(const RunReport &r, DmaMode mode) {
  for (const auto &x : r.runs)
    if (x.mode == mode && x.status == RunStatus::fail) return true;
  return false;
}

} // namespace

TEST(RunPipeline, DoubleBufferedAddOnePassesInEveryMode) {
  const auto &p = unit<spec::Program>(pipelines(), "double_buffered_add_one");
  const RunReport rep = run_all_modes(p, with_n());
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
  ASSERT_EQ(rep.runs.size(), 5u);
  EXPECT_EQ(rep.runs[0].params.at("N"), 8);
  for (const auto &r : rep.runs) {
    EXPECT_EQ(r.copies, 16) << to_string(r.mode);
    EXPECT_EQ(r.bytes_copied, 16 * 512 * 4);
  }
}

TEST(RunPipeline, SinglSlotPrefetchFailsInSomeModeWithWrongNumbersNotACrash) {
  const auto &p = unit<spec::Program>(pipelines(), "single_slot_prefetch");
  const RunReport rep = run_all_modes(p, with_n());
  EXPECT_EQ(rep.status, RunStatus::fail) << format_report(rep);
  EXPECT_TRUE(fails_in(rep, DmaMode::on_wait)) << format_report(rep);
  for (const auto &r : rep.runs)
    if (r.status == RunStatus::fail) {
      ASSERT_TRUE(r.mismatch);
      EXPECT_EQ(r.mismatch->array, "A");
      EXPECT_FALSE(r.mismatch->expected_is_poison);
    }
}

TEST(RunPipeline, ComputeBeforeWaitReadsPoisonWhenTheCopyLandsAtItsWait) {
  const auto &p = unit<spec::Program>(pipelines(), "compute_before_wait");
  RunOptions o = with_n();
  o.mode = DmaMode::on_wait;
  const RunResult r = run(p, o);
  EXPECT_EQ(r.status, RunStatus::fail) << r.reason;
  ASSERT_TRUE(r.mismatch);
  EXPECT_TRUE(r.mismatch->is_poison);
  EXPECT_EQ(r.mismatch->element, (Shape{0, 0}));
  EXPECT_NE(r.reason.find("poison"), std::string::npos);
}

TEST(RunPipeline, ForgottenLastWritebackFailsInEveryModeAtTheLeakedCopy) {
  // A copy still in flight when the program ends is a fault whatever the
  // timing (on hardware its semaphore is never waited), located at its start.
  const auto &p = unit<spec::Program>(pipelines(), "forgets_last_writeback");
  for (DmaMode mode : {DmaMode::eager, DmaMode::on_wait, DmaMode::random}) {
    RunOptions o = with_n();
    o.mode = mode;
    const RunResult r = run(p, o);
    EXPECT_EQ(r.status, RunStatus::fail) << to_string(mode);
    EXPECT_EQ(r.loc.line, 65) << r.reason;
    EXPECT_NE(r.reason.find("never waited"), std::string::npos) << r.reason;
  }
}

TEST(RunPipeline, WgmmaWithDelayReleasePassesInEveryMode) {
  const auto &p = unit<spec::Program>(wgmma(), "wgmma_k_loop_with_delay_release");
  RunOptions o;
  o.overrides["K"] = 7;
  const RunReport rep = run_all_modes(p, o);
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
  EXPECT_EQ(rep.runs[0].params.at("K"), 7);
}

TEST(RunPipeline, WgmmaWithoutDelayReleaseGivesWrongNumbersWhenCopiesAreEager) {
  const auto &p = unit<spec::Program>(wgmma(), "wgmma_k_loop_without_delay_release");
  RunOptions o;
  o.overrides["K"] = 7;
  const RunReport rep = run_all_modes(p, o);
  EXPECT_EQ(rep.status, RunStatus::fail) << format_report(rep);
  EXPECT_TRUE(fails_in(rep, DmaMode::eager)) << format_report(rep);
  ASSERT_TRUE(rep.runs[0].mismatch);
  EXPECT_EQ(rep.runs[0].mismatch->array, "O");
  EXPECT_FALSE(rep.runs[0].mismatch->is_poison);
  ASSERT_TRUE(rep.runs[0].tolerance);
}

TEST(RunPipeline, RecordsATimelineWithTransfersOnWorkerThreads) {
  const auto &p = unit<spec::Program>(pipelines(), "double_buffered_add_one");
  RunOptions o;
  o.overrides["N"] = 16;
  const RunResult r = run(p, o);
  ASSERT_EQ(r.status, RunStatus::pass) << r.reason;
  int transfers = 0, starts = 0, waits = 0, computes = 0;
  for (const auto &e : r.events) {
    EXPECT_LE(e.t_start_ns, e.t_end_ns);
    EXPECT_GT(e.loc.line, 0);
    switch (e.kind) {
    case EventKind::transfer:
      ++transfers;
      EXPECT_GE(e.thread, 0);
      EXPECT_TRUE(e.buffer == "X" || e.buffer == "Y");
      EXPECT_GE(e.slot, 0);
      break;
    case EventKind::copy_start: ++starts; break;
    case EventKind::copy_wait: ++waits; break;
    case EventKind::compute:
      ++computes;
      EXPECT_EQ(e.buffer, "Y");
      break;
    default: break;
    }
  }
  EXPECT_EQ(transfers, 32);
  EXPECT_EQ(starts, 32);
  EXPECT_EQ(waits, 32);
  EXPECT_EQ(computes, 16);
}

TEST(RunPipeline, AnUnboundSymbolicParamIsBadInputNamingIt) {
  const auto &p = unit<spec::Program>(pipelines(), "double_buffered_add_one");
  const RunResult r = run(p, RunOptions{});
  EXPECT_EQ(r.status, RunStatus::bad_input);
  EXPECT_NE(r.reason.find("param N is symbolic: bind it with --set N=VALUE"), std::string::npos) << r.reason;
}

TEST(RunPipeline, RejectsAnOverrideOutsideTheParamBounds) {
  const auto &p = unit<spec::Program>(pipelines(), "double_buffered_add_one");
  RunOptions o;
  o.overrides["N"] = 0;
  const RunResult r = run(p, o);
  EXPECT_EQ(r.status, RunStatus::bad_input);
  EXPECT_NE(r.reason.find("N = 0"), std::string::npos) << r.reason;
}

TEST(RunPipeline, RefusesASizeOverMaxMemoryUpFront) {
  const auto &p = unit<spec::Program>(pipelines(), "double_buffered_add_one");
  RunOptions o;
  o.overrides["N"] = 1 << 20; // 2 GiB of A
  o.max_memory_bytes = 64ull << 20;
  const RunResult r = run(p, o);
  EXPECT_EQ(r.status, RunStatus::bad_input);
  EXPECT_NE(r.reason.find("--max-memory"), std::string::npos) << r.reason;
  // A limit under 0.1 MiB is said in KiB, not rounded to "0.0 MiB".
  o.max_memory_bytes = 1024;
  o.overrides["N"] = 8;
  const RunResult small = run(p, o);
  EXPECT_NE(small.reason.find("over --max-memory 1.0 KiB"), std::string::npos) << small.reason;
}

TEST(RunPipeline, ANegativeHbmIndexFaultsAtItsStatementInEveryModeInsteadOfWrapping) {
  // Were A[i - 1] to wrap to A[3] at i = 0, the zeros would race with the
  // copy of A[3] and the run would fail only on the numbers, in some modes.
  const auto f = executor::testing::parse_text(R"(pipeline wrap_minus_one:
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
  const RunReport rep = run_all_modes(std::get<spec::Program>(f.units.at(0)), {});
  EXPECT_EQ(rep.status, RunStatus::fail) << format_report(rep);
  ASSERT_FALSE(rep.runs.empty());
  for (const auto &r : rep.runs) {
    EXPECT_EQ(r.status, RunStatus::fail) << to_string(r.mode);
    EXPECT_EQ(r.loc.line, 7) << to_string(r.mode);
    EXPECT_NE(r.reason.find("'A[i - 1]': index -1 is out of bounds for dim 0 (extent 4) of A[4, 128]"),
              std::string::npos)
        << r.reason;
  }
}

TEST(RunPipeline, AccumulatingInASlotAfterItsWritebackWasWaitedReadsPoisonInEveryMode) {
  // Strict slot contents: a waited write-back leaves its slot undefined, so
  // continuing a sum in it fails visibly instead of passing by luck.
  const spec::File f = load_corpus("corpus/rules/uninitialized-read.pk");
  const RunReport bad =
      run_all_modes(unit<spec::Program>(f, "running_sum_continued_after_writeback"), with_n(2));
  EXPECT_EQ(bad.status, RunStatus::fail) << format_report(bad);
  for (const auto &r : bad.runs) {
    EXPECT_EQ(r.status, RunStatus::fail) << to_string(r.mode);
    ASSERT_TRUE(r.mismatch) << r.reason;
    EXPECT_TRUE(r.mismatch->is_poison) << r.reason;
  }
  const RunReport good = run_all_modes(unit<spec::Program>(f, "running_sum_written_back_once"), with_n(2));
  EXPECT_EQ(good.status, RunStatus::pass) << format_report(good);
}

TEST(RunPipeline, ThePaddingOfAClippedCopyIsPoisonThatFailsOnlyWhenWrittenBack) {
  // A copy replaces its whole destination ref: rows 10..16 of X[0] held
  // zeros before the copy and are poison after it, whatever the mode; the
  // race checker reports the same write-back (races_test).
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
  const auto bad =
      executor::testing::parse_text(head + "    copy_out_start(Y[0], O)\n    copy_out_wait(Y[0])\n");
  const RunReport rep = run_all_modes(std::get<spec::Program>(bad.units.at(0)), {});
  ASSERT_FALSE(rep.runs.empty());
  for (const auto &r : rep.runs) {
    EXPECT_EQ(r.status, RunStatus::fail) << to_string(r.mode);
    ASSERT_TRUE(r.mismatch) << r.reason;
    EXPECT_EQ(r.mismatch->array, "O");
    EXPECT_EQ(r.mismatch->element, (Shape{10, 0}));
    EXPECT_TRUE(r.mismatch->is_poison);
  }
  const auto good =
      executor::testing::parse_text(head + "    copy_out_start(Y[0], P)\n    copy_out_wait(Y[0])\n");
  const RunReport ok = run_all_modes(std::get<spec::Program>(good.units.at(0)), {});
  EXPECT_EQ(ok.status, RunStatus::pass) << format_report(ok);
}

TEST(RunPipeline, ACopyWithZerosFillsThePaddingWithZerosThatMayBeWrittenBack) {
  // zeros=True (Mosaic GPU's TMA fetch): rows 10..16 of X[0] are zeros in
  // every mode, so the write-back of twice them is defined.
  const auto text = executor::testing::parse_text(R"(pipeline zero_filled:
    hbm A: f32[10, 128]
    hbm O: f32[16, 128]
    sram X[1]: f32[16, 128]
    sram Y[1]: f32[16, 128]
    copy_in_start(A, X[0], zeros=True)
    copy_in_wait(X[0])
    Y[0] = X[0] * 2
    copy_out_start(Y[0], O)
    copy_out_wait(Y[0])
)");
  const RunReport rep = run_all_modes(std::get<spec::Program>(text.units.at(0)), {});
  ASSERT_FALSE(rep.runs.empty());
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(RunPipeline, AnIntegerSentinelTheProgramComputesIsAValueAndOneNothingWroteIsPoison) {
  // INT32_MIN and int8's -128 (a saturating cast) are values a program may
  // store; the same bits copied out of a slot nothing wrote are poison.
  auto run_text = [](const std::string &text) {
    const auto f = executor::testing::parse_text(text);
    return run_all_modes(std::get<spec::Program>(f.units.at(0)), {});
  };
  const std::string head = "pipeline p:\n    hbm A: i32[2, 128]\n    hbm B: {dt}[2, 128]\n"
                           "    sram X[1]: i32[128]\n    sram Y[2]: {dt}[128]\n"
                           "    copy_in_start(A[0], X[0])\n    copy_in_wait(X[0])\n";
  auto with = [&](const std::string &dt, const std::string &rest) {
    std::string h = head;
    for (std::size_t at; (at = h.find("{dt}")) != std::string::npos;)
      h.replace(at, 4, dt);
    return h + rest;
  };
  const RunReport int_min =
      run_text(with("i32", "    Y[0] = X[0] * 0 - 2147483647 - 1\n"
                           "    copy_out_start(Y[0], B[0])\n    copy_out_wait(Y[0])\n"
                           "    Y[1] = X[0]\n"
                           "    copy_out_start(Y[1], B[1])\n    copy_out_wait(Y[1])\n"));
  EXPECT_EQ(int_min.status, RunStatus::pass) << format_report(int_min);
  const RunReport saturated =
      run_text(with("i8", "    Y[0] = cast(X[0] * 1000 - 100000, i8)\n"
                          "    copy_out_start(Y[0], B[0])\n    copy_out_wait(Y[0])\n"
                          "    Y[1] = cast(X[0], i8)\n"
                          "    copy_out_start(Y[1], B[1])\n    copy_out_wait(Y[1])\n"));
  EXPECT_EQ(saturated.status, RunStatus::pass) << format_report(saturated);
  // Slot 1 never written: its sentinel is poison, in every mode.
  const RunReport unwritten =
      run_text(with("i8", "    Y[0] = cast(X[0], i8)\n"
                          "    copy_out_start(Y[0], B[0])\n    copy_out_wait(Y[0])\n"
                          "    copy_out_start(Y[1], B[1])\n    copy_out_wait(Y[1])\n"));
  ASSERT_EQ(unwritten.status, RunStatus::fail) << format_report(unwritten);
  for (const auto &r : unwritten.runs) {
    ASSERT_TRUE(r.mismatch) << r.reason;
    EXPECT_EQ(r.mismatch->array, "B");
    EXPECT_EQ(r.mismatch->element, (Shape{1, 0}));
    EXPECT_TRUE(r.mismatch->is_poison);
  }
  // A slot a waited write-back left undefined, copied out again: poison too.
  const RunReport rewritten =
      run_text(with("i32", "    Y[0] = X[0] * 0 - 2147483647 - 1\n"
                           "    copy_out_start(Y[0], B[0])\n    copy_out_wait(Y[0])\n"
                           "    copy_out_start(Y[0], B[1])\n    copy_out_wait(Y[0])\n"));
  ASSERT_EQ(rewritten.status, RunStatus::fail) << format_report(rewritten);
  ASSERT_TRUE(rewritten.runs.at(0).mismatch);
  EXPECT_EQ(rewritten.runs.at(0).mismatch->element, (Shape{1, 0}));
}

TEST(RunPipeline, AWaitWithNothingOutstandingFailsAsAHang) {
  const auto f = executor::testing::parse_text(R"(pipeline extra_wait:
    param N >= 1
    hbm  A: f32[N, 8]
    sram X[2]: f32[8]
    copy_in_start(A[0], X[0])
    copy_in_wait(X[0])
    copy_in_wait(X[0])
)");
  const RunResult r = run(std::get<spec::Program>(f.units.at(0)), with_n());
  EXPECT_EQ(r.status, RunStatus::fail);
  EXPECT_EQ(r.loc.line, 7);
  EXPECT_NE(r.reason.find("hangs"), std::string::npos) << r.reason;
}

TEST(RunReportText, NamesTheModeTheElementAndPoison) {
  const auto &p = unit<spec::Program>(pipelines(), "compute_before_wait");
  const RunReport rep = run_all_modes(p, with_n());
  const std::string text = format_report(rep);
  EXPECT_NE(text.find("compute_before_wait: FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("on_wait"), std::string::npos);
  EXPECT_NE(text.find("A[0, 0]"), std::string::npos) << text;
  EXPECT_NE(text.find("A[0, 0] reads memory nothing wrote"), std::string::npos) << text;
}

TEST(RunReportText, AnArrayLeftUndefinedAndNeverWrittenIsNotSaidToHaveBeenCopiedInto) {
  // Nothing copies into o[4:8]: its poison is what `o[...] = undefined` left.
  auto f = parse_text(R"(pipeline p:
    hbm  x: f32[8, 128]
    hbm  o: f32[8, 128]
    sram buf: f32[8, 128]
    o[...] = undefined
    copy_in_start(x[...], buf[...])
    copy_in_wait(buf[...])
    copy_out_start(buf[0:4, :], o[0:4, :])
    copy_out_wait(buf[0:4, :])
)");
  const RunResult r = run(std::get<spec::Program>(f.units.at(0)), {});
  ASSERT_EQ(r.status, RunStatus::fail);
  EXPECT_NE(r.reason.find("o[4, 0] reads memory nothing wrote: poison: 'o[...] = undefined' left it so"),
            std::string::npos)
      << r.reason;
  EXPECT_EQ(r.reason.find("poison was copied there"), std::string::npos) << r.reason;
}

// ------------------------------------------------------------------ kernels

TEST(RunKernel, CorrectKernelsPassInEveryMode) {
  RunOptions o;
  o.scale = 8;
  for (const char *name : {"correct_sum", "matmul"}) {
    const auto &k = unit<spec::KernelSpec>(reductions(), name);
    const RunReport rep = run_all_modes(k, o);
    EXPECT_EQ(rep.status, RunStatus::pass) << name << "\n" << format_report(rep);
  }
  const auto &add = unit<spec::KernelSpec>(elementwise(), "add_matrices_pipelined");
  const RunReport rep = run_all_modes(add, o);
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
  EXPECT_FALSE(rep.runs.at(0).tolerance); // elementwise: exact
}

TEST(RunKernel, IncorrectSumGivesWrongNumbersNotACrash) {
  RunOptions o;
  o.scale = 8;
  const auto &k = unit<spec::KernelSpec>(reductions(), "sum_first_axis_with_init");
  const RunReport rep = run_all_modes(k, o);
  EXPECT_EQ(rep.status, RunStatus::fail) << format_report(rep);
  const auto &bad = unit<spec::KernelSpec>(reductions(), "incorrect_sum");
  const RunResult r = run(bad, o);
  EXPECT_EQ(r.status, RunStatus::fail) << r.reason;
  ASSERT_TRUE(r.mismatch);
  ASSERT_TRUE(r.mismatch->block);
  ASSERT_TRUE(r.mismatch->grid_point);
}

TEST(RunKernel, AnOutputRevisitedNonConsecutivelyFailsWithPoisonAndItsTwinPasses) {
  // A (8, 2) grid summing along the first axis revisits out block (0, j)
  // after its write-back; slot alternation used to keep the partial sum and
  // make the run pass by luck.
  const spec::File f = load_corpus("corpus/rules/reduction-not-last-axis.pk");
  const RunReport bad = run_all_modes(unit<spec::KernelSpec>(f, "sum_rows_first_axis_revisits_output"), {});
  EXPECT_EQ(bad.status, RunStatus::fail) << format_report(bad);
  for (const auto &r : bad.runs) {
    EXPECT_EQ(r.status, RunStatus::fail) << to_string(r.mode);
    ASSERT_TRUE(r.mismatch) << r.reason;
    EXPECT_TRUE(r.mismatch->is_poison) << r.reason;
  }
  const RunReport good = run_all_modes(unit<spec::KernelSpec>(f, "sum_rows_last_axis_keeps_output"), {});
  EXPECT_EQ(good.status, RunStatus::pass) << format_report(good);
}

TEST(RunKernel, TritonsAdversarialRunsLaunchEveryProgramAtOnceAndLoseARacingStore) {
  // The split-k matmul races under Triton: run in order (eager, on_wait) it
  // is right, launched at once (random) the programs past k = 0 read o
  // before the init landed.
  const spec::File f = load_corpus("corpus/kernels/triton_gpu.pk");
  const RunReport racy = run_all_modes(unit<spec::KernelSpec>(f, "matmul_k_in_grid_gpu"), {});
  for (const auto &r : racy.runs) {
    EXPECT_EQ(r.status, r.mode == DmaMode::random ? RunStatus::fail : RunStatus::pass) << format_report(racy);
    if (r.mode == DmaMode::random) {
      ASSERT_EQ(r.notes.size(), 1u) << format_report(racy);
      EXPECT_NE(r.notes[0].find("as they were at launch"), std::string::npos) << r.notes[0];
    }
  }
  // Programs sharing one block but storing disjoint chunks of it, and an
  // aliased output half-stored in place: each write-back carries only what
  // its program changed, so neither undoes another's stores.
  for (const char *name :
       {"matmul_k_in_loop_gpu", "column_sums_chunks_gpu", "scale_half_blocks_in_place_gpu"}) {
    const RunReport good = run_all_modes(unit<spec::KernelSpec>(f, name), {});
    EXPECT_EQ(good.status, RunStatus::pass) << name << "\n" << format_report(good);
  }
}

// ------------------------------------------------ sizes and integer arithmetic

namespace {

RunResult run_kernel_text(const std::string &text, RunOptions o = {}) {
  static std::vector<spec::File> keep; // the result refers to nothing in it, but keep the spec alive
  keep.push_back(executor::testing::parse_text(text));
  o.mode = DmaMode::eager;
  return run(std::get<spec::KernelSpec>(keep.back().units.at(0)), o);
}

std::string add_one(const std::string &shape) {
  return "kernel k:\n    in  x: " + shape + "\n    out o: " + shape +
         "\n    body:\n        o[...] = x[...] + 1\n";
}

} // namespace

TEST(RunKernel, ATritonMaskedStorePastItsArrayFaultsAtTheStoreAsCheckReportsIt) {
  // The mask lets lanes 200..255 of the last program through: found after
  // the body in what the block holds, reported at the masked store.
  const RunResult bad =
      run_kernel_text("kernel k:\n    grid = (1, 4)\n    backend = triton\n"
                      "    in  x: f32[32, 200]  block=(32, 64)  index=(i, j) -> (i, j)\n"
                      "    out o: f32[32, 200]  block=(32, 64)  index=(i, j) -> (i, j)\n"
                      "    body:\n"
                      "        c = (program_id(1) * 64) + reshape(iota((64,), 0), (1, 64))\n"
                      "        v = where(c < 200, x[...], 0.0)\n"
                      "        o[...] = where(c < 256, v * 2.0, o[...])\n");
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  EXPECT_EQ(bad.loc.line, 9) << bad.reason;
  EXPECT_NE(bad.reason.find("stores element (0, 200) of 'o'"), std::string::npos) << bad.reason;
}

TEST(RunKernel, AReadOfAScalarPrefetchArrayPastItsEndFaultsAtTheReadAsCheckReportsIt) {
  // seg[2] of an i32[2] table at grid point (1,): check's index-out-of-bounds;
  // on a TPU the SMEM load takes whatever lies next to the table.
  const std::string head = "kernel k:\n    grid = (2,)\n    dimension_semantics = (arbitrary,)\n"
                           "    prefetch seg: i32[2] = [0, 1]\n"
                           "    in  x: f32[16, 128]  block=(8, 128)  index=(t, seg) -> (t, 0)\n"
                           "    out o: f32[16, 128]  block=(8, 128)  index=(t, seg) -> (t, 0)\n"
                           "    body:\n        o[...] = x[...]\n";
  for (const std::string body :
       {"        when seg[program_id(0) + 1] > 100:\n            o[...] = x[...] * 2.0\n",
        "        o[...] = x[...] * cast(seg[program_id(0) + 1], f32)\n"}) {
    const RunResult bad = run_kernel_text(head + body);
    EXPECT_EQ(bad.status, RunStatus::fail) << body << bad.reason;
    EXPECT_EQ(bad.loc.line, 9) << bad.reason;
    EXPECT_NE(bad.reason.find("a read of a scalar-prefetch array outside it at grid point (1,): its "
                              "subscript 0 is 2, outside 0:2"),
              std::string::npos)
        << bad.reason;
  }
  // Its twin reads seg[program_id(0)]: in bounds at every grid point.
  const RunResult good = run_kernel_text(head + "        o[...] = x[...] * cast(seg[program_id(0)], f32)\n");
  EXPECT_EQ(good.status, RunStatus::pass) << good.reason;
}

TEST(RunKernel, AReadOfATablePastItsEndFaultsUnderASelectInAWhileConditionAndInAnIndexMap) {
  // Each reads tbl[6] of an i32[6] table at grid point (5,), as check reports it:
  // a select discards the value, not the load; a while condition reads at the
  // iteration that ends the loop; a clamp of the block index hides nothing.
  const std::string head = "kernel k:\n    grid = (6,)\n    prefetch tbl: i32[6] = [0, 3, 0, 0, 5, 0]\n"
                           "    in  x: f32[48, 128]  block=(8, 128)  index=(i, tbl) -> (i, 0)\n";
  const std::string out = "    out o: f32[48, 128]  block=(8, 128)  index=(i, tbl) -> (i, 0)\n    body:\n";
  const std::string w = "    in  w: f32[6, 8, 128]  block=(None, 8, 128)  index=(i, tbl) -> ";
  struct Case {
    std::string text, found;
    int line;
  };
  for (const Case &c : std::vector<Case>{
           {head + out +
                "        i = program_id(0)\n        o[...] = x[...] + cast(where(i + 1 < 6, tbl[i + 1], 0), "
                "f32)\n",
            "a read of a scalar-prefetch array outside it at grid point (5,): its subscript 0 is 6", 8},
           {head + out +
                "        c = program_id(0)\n        while tbl[c] == 0, bound=8:\n            c = c + 1\n"
                "        o[...] = x[...] + cast(c, f32)\n",
            "a read of a scalar-prefetch array outside it at grid point (5,): its subscript 0 is 6", 8},
           {head + w + "(max(tbl[i + 1], 0), 0, 0)\n" + out + "        o[...] = x[...] + w[...]\n",
            "the index map of 'w' reads a scalar-prefetch array outside it at grid point (5,): its subscript "
            "0 is 6",
            5}}) {
    const RunResult bad = run_kernel_text(c.text);
    EXPECT_EQ(bad.status, RunStatus::fail) << c.text << bad.reason;
    EXPECT_EQ(bad.loc.line, c.line) << bad.reason;
    EXPECT_NE(bad.reason.find(c.found), std::string::npos) << bad.reason;
  }
  // The twins keep every read inside the table.
  for (const std::string &good :
       {head + out +
            "        i = program_id(0)\n        o[...] = x[...] + cast(where(i + 1 < 6, tbl[min(i + 1, 5)], "
            "0), f32)\n",
        head + out +
            "        c = program_id(0)\n        while c < 6 and tbl[c] == 0, bound=8:\n            c = c + "
            "1\n"
            "        o[...] = x[...] + cast(c, f32)\n",
        head + w + "(tbl[min(i + 1, 5)], 0, 0)\n" + out + "        o[...] = x[...] + w[...]\n"}) {
    const RunResult r = run_kernel_text(good);
    EXPECT_EQ(r.status, RunStatus::pass) << good << r.reason;
  }
}

TEST(RunKernel, AFaultQuotesTheRefAsItsSourceWritesIt) {
  // program_id(0), not the name the oracle binds for it.
  const RunResult bad = run_kernel_text("kernel k:\n    grid = (4,)\n    in  x: f32[8, 128]\n"
                                        "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                                        "    body:\n"
                                        "        o[...] = broadcast_to(x[program_id(0) - 1, :], (8, 128))\n");
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  EXPECT_NE(bad.reason.find("'x[program_id(0) - 1, :]': index -1 is out of bounds for dim 0 (extent 8)"),
            std::string::npos)
      << bad.reason;
}

TEST(RunKernel, AFaultOfTheLoweredProgramNamesItsGridPoint) {
  // Block 3 of o is past its 24 rows: the write-back at the last step faults.
  const RunResult bad = run_kernel_text("kernel k:\n    grid = (4,)\n"
                                        "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                                        "    out o: f32[24, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                                        "    body:\n        o[...] = x[...]\n");
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  EXPECT_NE(bad.reason.find(
                "slice 24:32 is out of bounds for dim 0 (extent 24) of o[24, 128] (at grid point (3,))"),
            std::string::npos)
      << bad.reason;
}

TEST(RunKernel, ATritonLoadPastItsArrayIsAFaultAndAMaskedOneIsNot) {
  // 1000 elements in ragged blocks of 256: the last program's block passes
  // the array, and a Triton block is a view of it. The store is masked both
  // times; only the load differs.
  const std::string head = "kernel k:\n    grid = (4,)\n    backend = triton\n"
                           "    in  x: f32[1000]  block=(256,)  index=(i,) -> (i,)\n"
                           "    out o: f32[1000]  block=(256,)  index=(i,) -> (i,)\n    body:\n"
                           "        m = program_id(0) * 256 + iota((256,), 0) < 1000\n";
  for (const std::string body :
       {"        o[...] = where(m, x[...] * 2.0 + 0.0 * sum(x[...], axis=0), o[...])\n",
        "        t = x[...]\n        o[...] = where(m, t * 2.0, o[...])\n"}) {
    const RunResult bad = run_kernel_text(head + body);
    EXPECT_EQ(bad.status, RunStatus::fail) << body << bad.reason;
    EXPECT_EQ(bad.loc.line, 8) << bad.reason; // the load's statement, as check reports it
    EXPECT_NE(bad.reason.find("grid point (3,) loads element (1000,) of 'x', outside its shape (1000,)"),
              std::string::npos)
        << bad.reason;
  }
  const RunResult good = run_kernel_text(head + "        o[...] = where(m, x[...] * 2.0, o[...])\n");
  EXPECT_EQ(good.status, RunStatus::pass) << good.reason;
}

TEST(RunKernel, ATritonStorePastItsArrayIsAFaultAndAMaskedOneIsNot) {
  // 1000 elements in programs of 128 lanes: the last program's lanes past
  // 999 land in the block's padding, which on Triton is memory outside the
  // array. A store there is what check calls index-out-of-bounds; the
  // masked store (the bridge's keep-store) leaves the padding untouched.
  const std::string head = "kernel k:\n    grid = (8,)\n    backend = triton\n"
                           "    in  x: f32[1000]  block=(1024,)  index=(i,) -> (0,)\n"
                           "    out o: f32[1000]  block=(1024,)  index=(i,) -> (0,)\n    body:\n"
                           "        v = program_id(0) * 128 + iota((128,), 0)\n";
  const RunResult bad = run_kernel_text(
      head +
      "        o[ds(program_id(0) * 128, 128)] = where(v < 1000, x[ds(program_id(0) * 128, 128)], 0.0)\n");
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  EXPECT_EQ(bad.loc.line, 8) << bad.reason; // the store, as check reports it
  EXPECT_NE(bad.reason.find("grid point (7,) stores element (1000,) of 'o', outside its shape (1000,)"),
            std::string::npos)
      << bad.reason;
  const RunResult good =
      run_kernel_text(head + "        o[ds(program_id(0) * 128, 128)] = where(v < 1000, "
                             "x[ds(program_id(0) * 128, 128)], o[ds(program_id(0) * 128, 128)])\n");
  EXPECT_EQ(good.status, RunStatus::pass) << good.reason;
  // Unmasked, what is stored past the end is a scratch nothing wrote plus
  // one: poison, yet a store there all the same.
  const RunResult poison_stored = run_kernel_text("kernel k:\n    grid = (8,)\n    backend = triton\n"
                                                  "    in  x: f32[1000]  block=(128,)  index=(i) -> (i)\n"
                                                  "    out o: f32[1000]  block=(128,)  index=(i) -> (i)\n"
                                                  "    scratch s: f32[128]\n    body:\n"
                                                  "        o[...] = s[...] + 1\n");
  // A masked load whose mask takes every lane reads the input past its end
  // before anything is stored: that load is the fault.
  const RunResult every_lane =
      run_kernel_text("kernel k:\n    grid = (8,)\n    backend = triton\n"
                      "    in  x: f32[1000]  block=(128,)  index=(i) -> (i)\n"
                      "    out o: f32[1000]  block=(128,)  index=(i) -> (i)\n    body:\n"
                      "        o[...] = where(iota((128,), 0) >= 0, x[...], 0.0) + 1\n");
  EXPECT_EQ(every_lane.status, RunStatus::fail) << every_lane.reason;
  EXPECT_NE(every_lane.reason.find("grid point (7,) loads, masked, element (1000,) of 'x', outside its shape "
                                   "(1000,): its mask selects that lane"),
            std::string::npos)
      << every_lane.reason;
  EXPECT_EQ(poison_stored.status, RunStatus::fail) << poison_stored.reason;
  EXPECT_NE(
      poison_stored.reason.find("grid point (7,) stores element (1000,) of 'o', outside its shape (1000,)"),
      std::string::npos)
      << poison_stored.reason;
  // A block wholly past the array (grid point 3 of 40 elements in blocks of
  // 16) is all padding: its masked store keeps it, and the run stops at the
  // lowered program's copy of the block, where the index map runs out.
  const RunResult outside = run_kernel_text(
      "kernel k:\n    grid = (4,)\n    backend = triton\n    in  x: f32[40]  block=(16,)  index=(i,) -> "
      "(i,)\n"
      "    out o: f32[40]  block=(16,)  index=(i,) -> (i,)\n    body:\n"
      "        o[...] = where(iota((16,), 0) < 40 - program_id(0) * 16, x[...] + 1.0, o[...])\n");
  EXPECT_EQ(outside.status, RunStatus::fail) << outside.reason;
  EXPECT_NE(outside.reason.find("slice 48:40 is out of bounds"), std::string::npos) << outside.reason;
}

TEST(RunKernel, AResultThatDependsOnPaddingThroughAComparisonFailsAndItsMaskedTwinPasses) {
  // A histogram of 3000 ids in blocks of 1024: the last block's 72 padding
  // ids are the integer sentinel, which `ids == iota` drops like any id
  // outside the bins, so poison alone passes it. On a TPU they are stale
  // ids and are counted; the oracle's second pass, with stand-ins for the
  // padding, counts them and the run fails. The masked twin passes.
  const std::string head =
      "kernel hist:\n    grid = (3,)\n    dimension_semantics = (arbitrary,)\n"
      "    in  ids: i32[3000]  block=(1024,)  index=(i) -> (i)\n"
      "    out o: i32[1, 128]  block=(1, 128)  index=(i) -> (0, 0)\n    body:\n"
      "        when program_id(0) == 0:\n            o[...] = broadcast_to(0, (1, 128))\n";
  const std::string hit = "(reshape(ids[...], (1024, 1)) == iota((1024, 128), 1))";
  RunOptions opts;
  opts.input_kind = InputKind::integers;
  const RunResult bad = run_kernel_text(
      head + "        o[...] += reshape(sum(cast(" + hit + ", i32), axis=0), (1, 128))\n", opts);
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  EXPECT_NE(bad.reason.find("depends on undefined data"), std::string::npos) << bad.reason;
  ASSERT_TRUE(bad.mismatch) << bad.reason;
  EXPECT_EQ(bad.mismatch->array, "o");
  const RunResult good = run_kernel_text(
      head +
          "        valid = reshape(program_id(0) * 1024 + iota((1024,), 0) < 3000, (1024, 1))\n"
          "        o[...] += reshape(sum(cast(" +
          hit + " & valid, i32), axis=0), (1, 128))\n",
      opts);
  EXPECT_EQ(good.status, RunStatus::pass) << good.reason;
}

TEST(RunKernel, ANanTheBodyComputesIsAValueAndOneCarriedFromPaddingIsPoisonWhateverTheInputs) {
  // log of uniform [-1, 1) data: NaN for every negative input, computed, in
  // every mode. A row sum over a ragged last dim with no mask: NaN carried
  // from the padding, poison also when the data comes from the caller (the
  // bridge's --inputs), which holds no NaN.
  const RunResult logs = run_kernel_text("kernel logs:\n    grid = (4,)\n"
                                         "    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
                                         "    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
                                         "    body:\n        o[...] = log(x[...])\n");
  EXPECT_EQ(logs.status, RunStatus::pass) << logs.reason;
  const std::string rows = "kernel rows:\n    grid = (2,)\n"
                           "    in  x: f32[16, 200]  block=(8, 256)  index=(i) -> (i, 0)\n"
                           "    out o: f32[16, 1]  block=(8, 1)  index=(i) -> (i, 0)\n"
                           "    body:\n        o[...] = sum(x[...], axis=1, keepdims=True)\n";
  HostArray data("x", spec::DType::f32, {16, 200});
  data.fill_random(7);
  const std::map<std::string, const HostArray *> given{{"x", &data}};
  RunOptions with_data;
  with_data.input_data = &given;
  for (const RunOptions &o : {RunOptions{}, with_data}) {
    const RunResult r = run_kernel_text(rows, o);
    EXPECT_EQ(r.status, RunStatus::fail) << r.reason;
    ASSERT_TRUE(r.mismatch) << r.reason;
    EXPECT_TRUE(r.mismatch->is_poison) << r.reason;
  }
}

TEST(RunKernel, UndefinedDataACompareDropsFailsWithEitherSetOfStandIns) {
  // Counting negatives over a ragged row: NaN < 0 and 3.0 < 0 are both
  // false, -3.0 < 0 is true. An int32 scratch half written and copied out
  // whole: its sentinel changes with the stand-ins.
  const RunResult negatives = run_kernel_text(
      "kernel negatives:\n    grid = (2,)\n    in  x: f32[16, 200]  block=(8, 256)  index=(i) -> (i, 0)\n"
      "    out o: i32[16, 1]  block=(8, 1)  index=(i) -> (i, 0)\n    body:\n"
      "        o[...] = sum(cast(x[...] < 0.0, i32), axis=1, keepdims=True)\n");
  EXPECT_EQ(negatives.status, RunStatus::fail) << negatives.reason;
  EXPECT_NE(negatives.reason.find("with stand-ins for it (-3.0, 0, true)"), std::string::npos)
      << negatives.reason;
  const RunResult scratch = run_kernel_text(
      "kernel half:\n    grid = (1,)\n    in  x: i32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)\n"
      "    out o: i32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)\n    scratch t: i32[8, 128]\n    body:\n"
      "        t[0:4, :] = x[0:4, :]\n        o[...] = t[...]\n");
  EXPECT_EQ(scratch.status, RunStatus::fail) << scratch.reason;
  EXPECT_NE(scratch.reason.find("depends on undefined data"), std::string::npos) << scratch.reason;
  // (Integers whole, not -2.14748e+09.)
  EXPECT_NE(scratch.reason.find("is -2147483648 with undefined data as poison and 2147483647 with stand-ins"),
            std::string::npos)
      << scratch.reason;
  ASSERT_TRUE(scratch.mismatch);
  EXPECT_EQ(scratch.mismatch->element, (Shape{4, 0}));
}

TEST(RunKernel, AnAliasedOutputKeepsItsInputsSentinelAsAValue) {
  // An in-place update of block 0 of an int8 cache whose other rows hold
  // -128 (the dtype's poison value) as data: kept, not "never written".
  HostArray cache("c", spec::DType::i8, {16, 128});
  cache.fill_random(3);
  for (std::int64_t i = 8 * 128; i < 16 * 128; ++i)
    cache.set(i, -128);
  const std::map<std::string, const HostArray *> given{{"c", &cache}};
  RunOptions o;
  o.input_data = &given;
  const RunResult r = run_kernel_text("kernel update:\n    grid = (1,)\n"
                                      "    in  c: i8[16, 128]  block=(8, 128)  index=(i) -> (0, 0)\n"
                                      "    out o: i8[16, 128]  block=(8, 128)  index=(i) -> (0, 0)\n"
                                      "    alias c -> o\n    body:\n        o[...] = c[...] + 1\n",
                                      o);
  EXPECT_EQ(r.status, RunStatus::pass) << r.reason;
}

TEST(RunKernel, AnAliasedOutputReadBeforeItIsWrittenIsExplainedAsTheUnfetchedWindowItIs) {
  // The oracle's body reads the array (the input's values); the pipeline
  // never fetches an output's block, so the run holds poison there.
  const RunResult r = run_kernel_text("kernel add_one:\n    grid = (2,)\n    target = tpu_v5e\n"
                                      "    in  x: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
                                      "    out o: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
                                      "    alias x -> o\n    body:\n        o[...] = o[...] + 1.0\n");
  EXPECT_EQ(r.status, RunStatus::fail) << r.reason;
  EXPECT_NE(r.reason.find("'o' aliases input 'x', whose values the oracle's body reads where it reads 'o' "
                          "before writing it, but a pipeline never fetches an output's block"),
            std::string::npos)
      << r.reason;
}

TEST(RunKernel, AnUpdateCopiedBackThroughAnAliasedAnySpaceInputIsAppliedOnceInEveryMode) {
  // On a TPU the input and its output are one buffer: the oracle and the
  // lowered program both store into the output, once.
  const spec::File f = executor::testing::parse_text(executor::testing::sgd_through_aliased_input());
  const RunReport rep = run_all_modes(std::get<spec::KernelSpec>(f.units.at(0)), {});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(RunKernel, ASizeThatOverflowsInt64IsBadInputOnTheOperandNotACrash) {
  for (const char *shape : {"f32[2**31, 2**31]", "f32[2**62, 2**62]"}) {
    const RunResult r = run_kernel_text(add_one(shape));
    EXPECT_EQ(r.status, RunStatus::bad_input) << shape << ": " << r.reason;
    EXPECT_EQ(r.loc.line, 2) << shape;
    EXPECT_NE(r.reason.find("integer overflow in the size of operand 'x'"), std::string::npos) << r.reason;
  }
}

TEST(RunKernel, ArraysWhoseTotalOverflowsAreOverMaxMemoryBeforeAnythingIsAllocated) {
  // Each array is 2**62 bytes: their sum (and twice it) does not fit in 64 bits.
  const RunResult r = run_kernel_text(add_one("f32[2**30, 2**30]"));
  EXPECT_EQ(r.status, RunStatus::bad_input) << r.reason;
  EXPECT_NE(r.reason.find("--max-memory"), std::string::npos) << r.reason;
}

TEST(RunKernel, ADivisionByAParamSetToZeroIsBadInputAtTheOperator) {
  RunOptions o;
  o.overrides["N"] = 0;
  const RunResult r = run_kernel_text("kernel k:\n    param N = 4\n    grid = (8,)\n"
                                      "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i // N, 0)\n"
                                      "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                                      "    body:\n        o[...] = x[...] + 1\n",
                                      o);
  EXPECT_EQ(r.status, RunStatus::bad_input) << r.reason;
  EXPECT_EQ(r.loc.line, 4);
  EXPECT_EQ(r.loc.col, 56);
  EXPECT_NE(r.reason.find("division by zero"), std::string::npos) << r.reason;
}

TEST(RunKernel, AGridExtentThatOverflowsIsBadInput) {
  RunOptions o;
  o.overrides["G"] = std::int64_t{1} << 62;
  const RunResult r = run_kernel_text("kernel k:\n    param G = 8\n    grid = (G + G,)\n"
                                      "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (0, 0)\n"
                                      "    out o: f32[64, 128] block=(8, 128) index=(i) -> (0, 0)\n"
                                      "    body:\n        o[...] = x[...] + 1\n",
                                      o);
  EXPECT_EQ(r.status, RunStatus::bad_input) << r.reason;
  EXPECT_EQ(r.loc.line, 3);
  EXPECT_NE(r.reason.find("integer overflow in the grid"), std::string::npos) << r.reason;
}

namespace {
const spec::File &gpu_pallas_call() {
  static const spec::File f = load_corpus("corpus/guide/gpu_pallas_call.pk");
  return f;
}
} // namespace

TEST(RunKernel, AStandardMosaicGpuMatmulStoringItsOutputAfterTheKLoopPassesInEveryMode) {
  const auto &k = unit<spec::KernelSpec>(gpu_pallas_call(), "gpu_matmul");
  const RunReport rep = run_all_modes(k, RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(RunKernel, TheMosaicGpuMatmulWithoutDelayReleaseGivesWrongNumbers) {
  spec::KernelSpec k = unit<spec::KernelSpec>(gpu_pallas_call(), "gpu_matmul");
  for (auto &s : k.settings)
    if (s.key == "delay_release") s.value = spec::Expr::integer(0);
  const RunReport rep = run_all_modes(k, RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::fail) << format_report(rep);
}

TEST(RunKernel, AGpuColumnSumOverALeadingSequentialAxisPassesCtaByCta) {
  auto f = parse_text(R"(kernel colsum:
    grid = (4, 2)
    dimension_semantics = (sequential, parallel)
    target = h100
    max_concurrent_steps = 2
    in  x: f32[256, 256]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[64, 256]   block=(64, 128)  index=(i, j) -> (0, j)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += x[...]
        when program_id(0) == 3:
            o[...] = acc[...]
)");
  const RunReport rep = run_all_modes(unit<spec::KernelSpec>(f, "colsum"), RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(RunNpy, APipelineSavesItsHbmBuffersAndStartsFromThemAgain) {
  const auto &p = unit<spec::Program>(pipelines(), "double_buffered_add_one");
  const auto dir =
      std::filesystem::temp_directory_path() / ("pipecheck_run_npy_" + std::to_string(::getpid()));
  RunOptions o = with_n();
  o.seed = 5;
  o.save_dir = dir.string();
  ASSERT_EQ(run(p, o).status, RunStatus::pass);
  std::vector<std::string> files;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"A.npy", "A.out.npy"}));
  const auto start = read_npy((dir / "A.npy").string(), "A");
  const auto after = read_npy((dir / "A.out.npy").string(), "A");
  ASSERT_EQ(start->shape(), after->shape());
  EXPECT_EQ(after->get(0), static_cast<double>(static_cast<float>(start->get(0) + 1)));
  // Another seed reading the saved start: the same result.
  RunOptions again = with_n();
  again.seed = 6;
  again.inputs_dir = dir.string();
  again.save_dir = (dir / "again").string();
  ASSERT_EQ(run(p, again).status, RunStatus::pass);
  const auto after2 = read_npy((dir / "again" / "A.out.npy").string(), "A");
  EXPECT_EQ(std::memcmp(after->data(), after2->data(), static_cast<std::size_t>(after->bytes())), 0);
  std::filesystem::remove_all(dir);
}

// An integer's poison is its dtype's lowest value, which a body may well
// compute: an int8 quantization clamps to -128, a masked int max starts at
// iinfo.min, a bool mask is true. Where the body stored the element and
// both sides hold it, it is that value; an element no grid point stores
// still fails as poison.
TEST(RunKernel, AnIntegerOutputHoldingItsDtypesLowestValueWhereTheBodyStoredItPasses) {
  auto f = parse_text(R"(kernel quantize:
    grid = (2,)
    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out q: i8[16, 128]   block=(8, 128)  index=(i) -> (i, 0)
    out m: i32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out z: bool[16, 128] block=(8, 128)  index=(i) -> (i, 0)
    body:
        q[...] = cast(minimum(maximum(round(x[...] * 1000.0), -128.0), 127.0), i8)
        m[...] = where(x[...] > 2.0, 1, -2147483648)
        z[...] = x[...] < 2.0

kernel quantize_upper_rows_only:
    grid = (2,)
    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out q: i8[16, 128]   block=(8, 128)  index=(i) -> (i, 0)
    body:
        q[0:4, :] = cast(minimum(maximum(round(x[0:4, :] * 1000.0), -128.0), 127.0), i8)
)");
  const RunReport rep = run_all_modes(unit<spec::KernelSpec>(f, "quantize"), RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
  const RunResult bad = run(unit<spec::KernelSpec>(f, "quantize_upper_rows_only"), RunOptions{});
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  ASSERT_TRUE(bad.mismatch);
  EXPECT_TRUE(bad.mismatch->is_poison);
  EXPECT_EQ(bad.mismatch->element, (Shape{4, 0}));
}

// `--scale` divides array and block dims, not an integer index into one:
// `acc[program_id(0)]` picks a bank that a halved dim no longer has. The
// scaled run is bad input at the index (not an out-of-bounds fault of the
// kernel); unscaled it passes.
TEST(RunKernel, ScaleRefusesABodyIndexingADimByAnIntegerOtherThanZero) {
  auto f = parse_text(R"(kernel banks:
    grid = (2, 4)
    dimension_semantics = (arbitrary, arbitrary)
    in  x: f32[16, 512]  block=(8, 128)  index=(i, k) -> (i, k)
    out o: f32[16, 128]  block=(8, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[2, 8, 128]
    body:
        when program_id(0) == 0 and program_id(1) == 0:
            acc[...] = zeros
        acc[program_id(0)] += x[...]
        when program_id(1) == 3:
            o[...] = acc[program_id(0)]
)");
  RunOptions o;
  o.scale = 2;
  const RunResult scaled = run(unit<spec::KernelSpec>(f, "banks"), o);
  EXPECT_EQ(scaled.status, RunStatus::bad_input) << scaled.reason;
  EXPECT_NE(scaled.reason.find("integer indices"), std::string::npos) << scaled.reason;
  const RunReport rep = run_all_modes(unit<spec::KernelSpec>(f, "banks"), RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(RunKernel, ABodyCopyIntoAnUnaliasedAnyInputFailsWithTheElementItChanged) {
  // (The oracle's copy changed the input the pipelined run then read: the
  // run blamed pipelining, with 2x the oracle's value.)
  const std::string head = "kernel k:\n    grid = (4,)\n    target = tpu_v5e\n"
                           "    in  a: f32[32, 128]  memory_space=any\n";
  const std::string tail = "    scratch x: f32[8, 128]\n    body:\n"
                           "        sync_copy(a[ds(program_id(0) * 8, 8), :], x)\n"
                           "        x[...] = x[...] * 2.0\n";
  const RunResult bad =
      run_kernel_text(head + "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n" + tail +
                      "        sync_copy(x, a[ds(program_id(0) * 8, 8), :])\n"
                      "        o[...] = x[...]\n");
  EXPECT_EQ(bad.status, RunStatus::fail);
  EXPECT_EQ(bad.loc.line, 4);
  EXPECT_NE(
      bad.reason.find("the body wrote input 'a' (memory_space=any), which no output aliases: a[0, 0] was"),
      std::string::npos)
      << bad.reason;
  // Aliased to an output, the copy writes the donated buffer: it passes.
  const RunResult good = run_kernel_text(
      head +
      "    out ao: f32[32, 128]  memory_space=any\n"
      "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    alias a -> ao\n" +
      tail + "        sync_copy(x, ao[ds(program_id(0) * 8, 8), :])\n        o[...] = x[...]\n");
  EXPECT_EQ(good.status, RunStatus::pass) << good.reason;
}
