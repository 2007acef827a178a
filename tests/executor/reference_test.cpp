// `run` against a kernel's reference: a body wrong in itself (the same wrong
// answer pipelined and per grid point) fails at its first wrong element, with
// its block and grid point; tolerances grow with the dtype's epsilon and the
// reduction length; poison is named for what it means.
#include "executor/reference.hpp"
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace pipecheck;
using namespace pipecheck::executor;
using executor::testing::load_corpus;
using executor::testing::parse_text;
using executor::testing::unit;

namespace {

const spec::File &corpus() {
  static const spec::File f = load_corpus("corpus/examples/guide_reference.pk");
  return f;
}

const spec::KernelSpec &kernel(const std::string &name) { return unit<spec::KernelSpec>(corpus(), name); }

// A kernel parsed from text (validated: the reference must type-check).
spec::KernelSpec kernel_text(const std::string &text) {
  const auto sf = spec::SourceFile::from_string("t.pk", text);
  auto r = spec::parse_and_validate(sf);
  if (!r.file) throw std::runtime_error(spec::render(sf, r.errors.at(0)));
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

} // namespace

TEST(RunAgainstReference, ACorrectMatmulPassesInEveryMode) {
  const RunReport rep = run_all_modes(kernel("matmul_writes_at_last_step"), RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(RunAgainstReference, AMatmulWritingItsAccumulatorAtTheFirstStepFailsAtItsFirstElement) {
  // Without the reference the pipelined run equals the oracle and passes.
  spec::KernelSpec k = kernel("matmul_writes_at_first_step");
  spec::KernelSpec without = k;
  without.reference.clear();
  without.reference_loc = {};
  EXPECT_EQ(run(without, RunOptions{}).status, RunStatus::pass);

  const RunReport rep = run_all_modes(k, RunOptions{});
  ASSERT_EQ(rep.status, RunStatus::fail) << format_report(rep);
  for (const auto &r : rep.runs) {
    ASSERT_EQ(r.status, RunStatus::fail) << to_string(r.mode);
    ASSERT_TRUE(r.mismatch);
    const Mismatch &m = *r.mismatch;
    EXPECT_EQ(m.array, "o");
    EXPECT_EQ(m.element, (Shape{0, 0}));
    EXPECT_EQ(m.block, (Shape{0, 0}));
    EXPECT_EQ(m.grid_point, (Shape{0, 0, 0}));
    EXPECT_EQ(m.expected_from, "reference");
    EXPECT_FALSE(m.is_poison);
    EXPECT_NE(m.expected, m.actual);
    EXPECT_EQ(
        r.reason.rfind("the body disagrees with the reference: o[0, 0] (block [0, 0], grid point (0, 0, 0)): "
                       "expected ",
                       0),
        0u)
        << r.reason;
    EXPECT_NE(r.reason.find("(reference), got "), std::string::npos) << r.reason;
  }
}

TEST(RunAgainstReference, ASwappedIndexMapIsCaughtOnlyByTheReference) {
  const RunResult r = run(kernel("matmul_with_swapped_index_map"), RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail) << r.reason;
  EXPECT_EQ(r.mismatch->expected_from, "reference");
}

TEST(RunAgainstReference, ABf16MatmulWithAnF32AccumulatorPassesWithinItsTolerance) {
  const RunResult r = run(kernel("matmul_bf16"), RunOptions{});
  EXPECT_EQ(r.status, RunStatus::pass) << r.reason;
}

TEST(RunAgainstReference, ElementwiseAndRowSumKernelsPass) {
  for (const char *name : {"row_sum_bf16", "scale_and_shift"}) {
    const RunReport rep = run_all_modes(kernel(name), RunOptions{});
    EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
  }
}

// `v[:, None]` on an input in the reference is its whole array with a new
// axis, as the reference's typing reads it (it was a type-checked kernel
// that run refused: "'None' has no integer value here"); a wrong scale of
// the same kernel still fails.
TEST(RunAgainstReference, ANewAxisOnAnInputIsItsWholeArrayWithThatAxis) {
  const std::string text = R"(kernel row_scale:
    grid = (4,)
    in  v: f32[512]  block=(128,)  index=(i) -> (i,)
    in  w: f32[512, 8]  block=(128, 8)  index=(i) -> (i, 0)
    out o: f32[512, 8]  block=(128, 8)  index=(i) -> (i, 0)
    body:
        t = v[...]
        o[...] = w[...] * t[:, None] + 1.0
    reference:
        o = w * v[:, None] + SHIFT
)";
  auto with = [&](const std::string &shift) {
    std::string t = text;
    t.replace(t.find("SHIFT"), 5, shift);
    return kernel_text(t);
  };
  const RunReport good = run_all_modes(with("1.0"), RunOptions{});
  EXPECT_EQ(good.status, RunStatus::pass) << format_report(good);
  const RunResult bad = run(with("2.0"), RunOptions{});
  EXPECT_EQ(bad.status, RunStatus::fail) << bad.reason;
  ASSERT_TRUE(bad.mismatch);
  EXPECT_EQ(bad.mismatch->count, 512 * 8);
}

TEST(RunAgainstReference, AWrongElementwiseBodyNamesTheExpectedAndActualValues) {
  spec::KernelSpec k = kernel_text(R"(kernel off_by_one:
    grid = (4,)
    in  x: i32[512, 8]  block=(128, 8)  index=(i,) -> (i, 0)
    out o: i32[512, 8]  block=(128, 8)  index=(i,) -> (i, 0)
    body:
        o[...] = x[...] + 1
    reference:
        o = x + 2
)");
  const RunResult r = run(k, RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail);
  EXPECT_FALSE(r.tolerance); // integers compare exactly
  ASSERT_TRUE(r.mismatch);
  EXPECT_EQ(r.mismatch->expected - r.mismatch->actual, 1);
  EXPECT_EQ(r.mismatch->count, 512 * 8);
}

TEST(ReferenceTolerance, GrowsWithTheEpsilonAndTheReductionLength) {
  using spec::DType;
  EXPECT_FALSE(reference_tolerance(DType::i32, DType::f32, 1024));
  const double f32_8 = *reference_tolerance(DType::f32, DType::f32, 8);
  EXPECT_DOUBLE_EQ(f32_8, 10 * std::ldexp(1.0, -23));
  const double bf16_8192 = *reference_tolerance(DType::bf16, DType::f32, 8192);
  EXPECT_DOUBLE_EQ(bf16_8192, 2 * std::ldexp(1.0, -7) + 8192 * std::ldexp(1.0, -23));
  EXPECT_GT(bf16_8192, 1000 * f32_8);
  EXPECT_GT(*reference_tolerance(DType::f32, DType::bf16, 8192), 1.0); // accumulating in bf16
}

TEST(ReferenceTolerance, TheReductionLengthIsTheContractedOrReducedExtent) {
  auto len = [](const spec::KernelSpec &k, std::int64_t scale = 1) {
    return reference_reduction_length(concretize(k, {}, scale));
  };
  EXPECT_EQ(len(kernel("matmul_writes_at_last_step")), 512);
  EXPECT_EQ(len(kernel("matmul_writes_at_last_step"), 4), 128); // at the run's scale
  EXPECT_EQ(len(kernel("row_sum_bf16")), 1024);
  EXPECT_EQ(len(kernel("scale_and_shift")), 1);
  EXPECT_EQ(accumulation_dtype(concretize(kernel("matmul_bf16"), {}, 1)), spec::DType::f32);
  spec::KernelSpec bf16_acc = kernel_text(R"(kernel k:
    grid = (2,)
    dimension_semantics = (arbitrary,)
    in  x: f32[256, 128]  block=(128, 128)  index=(k,) -> (k, 0)
    out o: bf16[128]      block=(128,)      index=(k,) -> (0,)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        o[...] += sum(x[...], axis=0)
    reference:
        o = sum(x)
)");
  EXPECT_EQ(accumulation_dtype(concretize(bf16_acc, {}, 1)), spec::DType::bf16);
  EXPECT_EQ(len(bf16_acc), 256 * 128);
}

TEST(RunPoison, AnOutputNoGridPointStoresToWasNeverWritten) {
  spec::KernelSpec k = kernel_text(R"(kernel half_written:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    body:
        when program_id(0) < 2:
            o[...] = x[...]
)");
  const RunResult r = run(k, RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail);
  EXPECT_EQ(r.reason,
            "o[256, 0] was never written (block [2, 0], grid point (2,)): no grid point's body stores to "
            "it; 32768 elements differ from the oracle");
}

TEST(RunPoison, AMaskedStoreLeavesExactlyTheUnstoredElementsUnwritten) {
  spec::KernelSpec k = kernel_text(R"(kernel masked:
    grid = (2,)
    in  x: f32[256, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    body:
        o[0:64, :] = x[0:64, :]
)");
  const RunResult r = run(k, RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail);
  ASSERT_TRUE(r.mismatch);
  EXPECT_EQ(r.mismatch->element, (Shape{64, 0}));
  EXPECT_EQ(r.mismatch->count, 2 * 64 * 128);
  EXPECT_NE(r.reason.find("o[64, 0] was never written"), std::string::npos) << r.reason;
}

TEST(RunPoison, AnAccumulatorWithoutInitReadsMemoryNothingWrote) {
  spec::KernelSpec k = kernel_text(R"(kernel no_init:
    grid = (4, 2)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[512, 256]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[512, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[128, 128]
    body:
        acc[...] += x[...]
        o[...] = acc[...]
)");
  const RunResult r = run(k, RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail);
  EXPECT_NE(
      r.reason.find("o[0, 0] reads memory nothing wrote (block [0, 0], grid point (0, 0)): the body stored "
                    "poison there"),
      std::string::npos)
      << r.reason;
  EXPECT_EQ(r.reason.find("expected nan"), std::string::npos) << r.reason;
}

TEST(RunPoison, ANanTheBodyComputesIsAValueThatDiffersFromTheReferenceNotMemoryNothingWrote) {
  // (A row with no key in a causal attention: l = 0, and acc / l is 0 / 0.
  // Its twin above reads an accumulator nothing initialized.)
  spec::KernelSpec k = kernel_text(R"(kernel zero_over_zero:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        z = x[...] * 0.0
        o[...] = z / z
    reference:
        o = x
)");
  const RunResult r = run(k, RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail);
  ASSERT_TRUE(r.mismatch);
  EXPECT_FALSE(r.mismatch->is_poison);
  EXPECT_NE(r.reason.find("o[0, 0] (block [0, 0], grid point (0,)): expected "), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find(" (reference), got nan (oracle: the body run per grid point)"), std::string::npos)
      << r.reason;
  EXPECT_EQ(r.reason.find("nothing wrote"), std::string::npos) << r.reason;
}
