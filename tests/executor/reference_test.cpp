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
  EXPECT_EQ(accumulation_dtype(concretize(kernel("matmul_bf16"), {}, 1), "o"), spec::DType::f32);
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
  EXPECT_EQ(accumulation_dtype(concretize(bf16_acc, {}, 1), "o"), spec::DType::bf16);
  EXPECT_EQ(len(bf16_acc), 256 * 128);
}

TEST(ReferenceTolerance, AnOutputsAccumulationDtypeIsThatOfTheRefsItIsComputedFrom) {
  // An f32 accumulator stored to o, a bf16 step counter beside it: o's sums
  // are f32's (a bf16 `+=` anywhere loosened every output's bound 64-fold).
  spec::KernelSpec k = kernel_text(R"(kernel k:
    grid = (2,)
    dimension_semantics = (arbitrary,)
    in  x: f32[256, 128]  block=(128, 128)  index=(k,) -> (k, 0)
    out o: f32[128]       block=(128,)      index=(k,) -> (0,)
    out n: bf16[128]      block=(128,)      index=(k,) -> (0,)
    scratch acc: f32[128]
    scratch cnt: bf16[128]
    body:
        when program_id(0) == 0:
            acc[...] = zeros
            cnt[...] = zeros
        acc[...] += sum(x[...], axis=0)
        cnt[...] += 1.0
        s = acc[...]
        o[...] = s
        n[...] = cnt[...]
    reference:
        o = sum(x, axis=0)
        n = zeros + 2.0
)");
  const ConcreteKernel c = concretize(k, {}, 1);
  EXPECT_EQ(accumulation_dtype(c, "o"), spec::DType::f32);
  EXPECT_EQ(accumulation_dtype(c, "n"), spec::DType::bf16);
  // Spelled as a store that reads its own target, the same accumulation.
  std::string text = R"(kernel k:
    grid = (2,)
    dimension_semantics = (arbitrary,)
    in  x: f32[256, 128]  block=(128, 128)  index=(k,) -> (k, 0)
    out o: f32[128]       block=(128,)      index=(k,) -> (0,)
    scratch acc: bf16[128]
    body:
        when program_id(0) == 0:
            acc[...] = zeros
        acc[...] = acc[...] + sum(x[...], axis=0)
        o[...] = acc[...]
    reference:
        o = sum(x, axis=0)
)";
  EXPECT_EQ(accumulation_dtype(concretize(kernel_text(text), {}, 1), "o"), spec::DType::bf16);
}

namespace {

// A row variance by E[y^2] - E[y]^2 of y = x + 100: a result near 1/3 that
// is the difference of two terms near 10^4, each a sum of 1024 terms near
// 10^4 (catastrophic cancellation). The body accumulates both sums over
// four column blocks; SQUARES and DIVISOR are what its last step sums and
// divides by.
const char *kVariance = R"(kernel variance:
    grid = (4,)
    dimension_semantics = (arbitrary,)
    in  x: f32[64, 1024]  block=(64, 256)  index=(k,) -> (0, k)
    out o: f32[64]        block=(64,)      index=(k,) -> (0,)
    scratch s1: f32[64]
    scratch s2: f32[64]
    body:
        when program_id(0) == 0:
            s1[...] = zeros
            s2[...] = zeros
        y = x[...] + 100.0
        s1[...] += sum(y, axis=1)
        s2[...] += sum(SQUARES, axis=1)
        when program_id(0) == 3:
            m = s1[...] / 1024.0
            o[...] = s2[...] / DIVISOR - m * m
    reference:
        y = x + 100.0
        m = sum(y, axis=1) / 1024.0
        o = sum(y * y, axis=1) / 1024.0 - m * m
)";

spec::KernelSpec variance(const std::string &squares = "y * y", const std::string &divisor = "1024.0") {
  std::string t = kVariance;
  t.replace(t.find("SQUARES"), 7, squares);
  t.replace(t.find("DIVISOR"), 7, divisor);
  return kernel_text(t);
}

// The largest |oracle - reference| of a kernel's one float output over
// the tolerance `run` had before the error analysis (reference_tolerance,
// relative to max(1, |reference|)) and over the one it has (element_tolerance).
struct Excess {
  double relative = 0, bounded = 0;
};
Excess excess(const spec::KernelSpec &k, std::uint64_t seed) {
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap body = make_kernel_arrays(c, seed), ref = make_kernel_arrays(c, seed);
  run_oracle(c, body);
  const ArrayMap bounds = run_reference(c, ref);
  const double rel =
      *reference_tolerance(spec::DType::f32, accumulation_dtype(c, "o"), reference_reduction_length(c));
  const HostArray &o = *body.at("o"), &r = *ref.at("o"), &b = *bounds.at("o");
  Excess x;
  for (std::int64_t i = 0; i < o.size(); ++i) {
    const double d = std::fabs(o.get(i) - r.get(i));
    x.relative = std::max(x.relative, d / (rel * std::max(1.0, std::fabs(r.get(i)))));
    x.bounded = std::max(x.bounded, d / element_tolerance(spec::DType::f32, b.get(i), r.get(i), rel));
  }
  return x;
}

} // namespace

// Before the error analysis `run` held this correct body to 1.2e-4 of the
// result and failed it on every seed: the two sums' rounding is ~10^-3 of
// 10^4, in another order than the reference's.
TEST(ReferenceBound, ASmallDifferenceOfLargeTermsIsComparedToItsTermsAndPassesOnDefaultInputs) {
  for (std::uint64_t seed : {0, 1, 2}) {
    const Excess x = excess(variance(), seed);
    EXPECT_GT(x.relative, 10) << seed; // the old tolerance: fails
    EXPECT_LT(x.bounded, 0.5) << seed; // the error bound: passes with room
  }
  const RunReport rep = run_all_modes(variance(), RunOptions{});
  EXPECT_EQ(rep.status, RunStatus::pass) << format_report(rep);
}

TEST(ReferenceBound, ABodyMissingOneTermOfSuchASumOrWithAWrongScaleStillFails) {
  // x[:, 0]'s square left out of the second sum; the second sum divided by 1023.
  for (const auto &k : {variance("where(iota((64, 256), 1) + program_id(0) * 256 == 0, 0.0, y * y)"),
                        variance("y * y", "1023.0")}) {
    const RunResult r = run(k, RunOptions{});
    ASSERT_EQ(r.status, RunStatus::fail) << r.reason;
    ASSERT_TRUE(r.mismatch);
    EXPECT_EQ(r.mismatch->expected_from, "reference");
    EXPECT_EQ(r.mismatch->count, 64); // every row
    EXPECT_GT(excess(k, 0).bounded, 2);
  }
}

TEST(ReferenceBound, AFailureNamesTheToleranceAndTheErrorBoundAtItsElementAndTheWorstElement) {
  const RunResult r = run(variance("y * y", "1023.0"), RunOptions{});
  ASSERT_TRUE(r.mismatch);
  const Mismatch &m = *r.mismatch;
  ASSERT_TRUE(m.tolerance);
  ASSERT_TRUE(m.bound);
  EXPECT_GT(*m.bound, 0.1); // the rounding of sums of 10^4s
  EXPECT_DOUBLE_EQ(*m.tolerance, element_tolerance(spec::DType::f32, *m.bound, m.expected, 1));
  EXPECT_GT(std::fabs(m.actual - m.expected), *m.tolerance);
  EXPECT_FALSE(r.tolerance); // no one relative tolerance
  EXPECT_NE(r.reason.find("64 elements differ from the reference (tolerance "), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find(" at o[0], from the reference's error bound "), std::string::npos) << r.reason;
  ASSERT_TRUE(m.worst);
  ASSERT_EQ(m.worst->size(), 1u);
  EXPECT_NE(r.reason.find("; the worst, o[" + std::to_string(m.worst->at(0)) + "], differs by "),
            std::string::npos)
      << r.reason;
  EXPECT_GT(m.worst_ratio, std::fabs(m.actual - m.expected) / *m.tolerance);
}

// `%` of an inexact value is beyond the analysis: the element is held to
// the relative tolerance, which a wrong body still exceeds.
TEST(ReferenceBound, AnElementTheAnalysisCannotBoundIsHeldToTheRelativeTolerance) {
  auto with = [&](const std::string &shift) {
    std::string t = R"(kernel frac:
    grid = (2,)
    in  x: f32[256, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out o: f32[256]       block=(128,)      index=(i,) -> (i,)
    body:
        o[...] = sum(x[...] * 4.0, axis=1) % 1.0 + SHIFT
    reference:
        o = sum(x * 4.0, axis=1) % 1.0
)";
    t.replace(t.find("SHIFT"), 5, shift);
    return kernel_text(t);
  };
  EXPECT_EQ(run(with("0.0"), RunOptions{}).status, RunStatus::pass);
  const RunResult r = run(with("0.001"), RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail) << r.reason;
  ASSERT_TRUE(r.mismatch);
  EXPECT_FALSE(r.mismatch->bound);
  ASSERT_TRUE(r.tolerance);
  EXPECT_DOUBLE_EQ(*r.tolerance, *reference_tolerance(spec::DType::f32, spec::DType::f32, 128));
  EXPECT_NE(r.reason.find(": the reference's error is not bounded there"), std::string::npos) << r.reason;
}

// An output the reference has set keeps its bound where the reference reads
// it again; an input is exact.
TEST(ReferenceBound, AnOutputReadBackByTheReferenceKeepsItsBound) {
  const spec::KernelSpec k = kernel_text(R"(kernel two:
    grid = (2,)
    in  x: f32[256, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out s: f32[256]       block=(128,)      index=(i,) -> (i,)
    out d: f32[256]       block=(128,)      index=(i,) -> (i,)
    body:
        s[...] = sum(x[...], axis=1)
        d[...] = s[...] * 2.0
    reference:
        s = sum(x, axis=1)
        d = s * 2.0
)");
  const ConcreteKernel c = concretize(k, {}, 1);
  ArrayMap arrays = make_kernel_arrays(c, 0);
  const ArrayMap bounds = run_reference(c, arrays);
  const HostArray &bs = *bounds.at("s"), &bd = *bounds.at("d"), &d = *arrays.at("d");
  const double eps = std::ldexp(1.0, -23);
  for (std::int64_t i = 0; i < bs.size(); ++i) {
    ASSERT_GT(bs.get(i), 0); // a sum's rounding
    EXPECT_NEAR(bd.get(i), 2 * bs.get(i) + eps * std::fabs(d.get(i)), 1e-6 * bd.get(i)) << i;
  }
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

TEST(ReferenceBound, AnIntegerOutputMayDifferWhereARoundingOfAnInexactValueMayFlip) {
  // int8 quantization by the reciprocal of the scale against a reference that
  // divides by it: x · (127 / amax) and x / (amax / 127) differ by an ulp,
  // which moves round() across a .5 at about one element in 10^5 (seed 0:
  // q[387, 43], -54.5 exactly on one side). The reference's bound there is
  // that step; elsewhere the comparison stays exact.
  const char *text = R"(kernel quantize:
    param m = 1024
    param n = 256
    param bm = 64
    grid = (m // bm,)
    target = tpu_v5e
    in  x: f32[m, n]  block=(bm, n)  index=(i) -> (i, 0)
    out q: i8[m, n]  block=(bm, n)  index=(i) -> (i, 0)
    body:
        amax = max(abs(x[...]), axis=1, keepdims=True)
        q[...] = cast(round(x[...] * (SCALE / amax)), i8)
    reference:
        amax = max(abs(x), axis=1, keepdims=True)
        q = cast(round(x / (amax / 127.0)), i8)
)";
  auto with = [&](const std::string &scale) {
    std::string t = text;
    t.replace(t.find("SCALE"), 5, scale);
    return kernel_text(t);
  };
  RunOptions o;
  for (std::uint64_t seed : {0, 1, 2}) {
    o.seed = seed;
    const RunResult r = run(with("127.0"), o);
    EXPECT_EQ(r.status, RunStatus::pass) << seed << ": " << r.reason;
  }
  // Off by a step of the scale: far more than a flipped rounding, and failed
  // exactly where no rounding is in doubt.
  o.seed = 0;
  const RunResult bad = run(with("126.0"), o);
  ASSERT_EQ(bad.status, RunStatus::fail);
  ASSERT_TRUE(bad.mismatch);
  EXPECT_FALSE(bad.mismatch->tolerance) << *bad.mismatch->tolerance;
}

TEST(ReferenceBound, APassingRunNotesWhereTheReferencesOwnErrorIsALargeShareOfItsOutput) {
  // The variance above by E[y^2] - E[y]^2 of y = x + 100 cancels: its bound
  // is many times its values, which a pass alone would not say.
  const RunResult r = run(variance(), RunOptions{});
  ASSERT_EQ(r.status, RunStatus::pass) << r.reason;
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("% of the largest |o|"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("the reference cancels there"), std::string::npos) << r.notes[0];
  // A plain matmul's reference is held to a small share of its values.
  EXPECT_TRUE(run(kernel("matmul_bf16"), RunOptions{}).notes.empty());
}

TEST(ReferenceBound, AValueOfLiteralsAndIotaAloneIsExactAndWhatIsComputedFromItRounds) {
  // A decay table's running sum, blocked: the table is made of iota and
  // literals only, and its cumsum was held to a bound of 0 (untracked).
  spec::KernelSpec k = kernel_text(R"(kernel decay:
    param K = 8192
    param bk = 1024
    grid = (K // bk,)
    dimension_semantics = (arbitrary,)
    target = tpu_v5e
    in  x: f32[K]  block=(bk,)  index=(t) -> (t,)
    out o: f32[K]  block=(bk,)  index=(t) -> (t,)
    scratch carry: f32[1]
    body:
        t = program_id(0)
        w = exp(cast(iota((bk,), 0) + t * bk, f32) * -0.0005)
        when t == 0:
            carry[...] = zeros
        c = cumsum(w, axis=0) + carry[...]
        o[...] = c
        carry[...] = c[bk - 1:bk]
    reference:
        w = exp(cast(iota((K,), 0), f32) * -0.0005)
        o = cumsum(w, axis=0)
)");
  const RunResult r = run(k, RunOptions{});
  EXPECT_EQ(r.status, RunStatus::pass) << r.reason;
}

TEST(ReferenceBound, ABf16AccumulatorIsRoundedOncePerGridStepNotAtEveryTerm) {
  // A bf16 scratch accumulating a block's f32 dot per k step: 4 roundings to
  // bf16 per element, not 1024. Charged at every term, the bound allowed
  // about 6 times |o|, and a body that adds nothing passed.
  std::string text = R"(kernel mm:
    param m = 128
    param n = 128
    param k = 1024
    param bk = 256
    grid = (k // bk,)
    dimension_semantics = (arbitrary,)
    target = tpu_v5e
    in  a: bf16[m, k]  block=(m, bk)  index=(t) -> (0, t)
    in  b: bf16[k, n]  block=(bk, n)  index=(t) -> (t, 0)
    out o: bf16[m, n]  block=(m, n)  index=(t) -> (0, 0)
    scratch acc: bf16[m, n]
    body:
        when program_id(0) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...], preferred_element_type=f32) * SCALE
        when program_id(0) == k // bk - 1:
            o[...] = acc[...]
    reference:
        o = dot(a, b, preferred_element_type=f32)
)";
  auto with = [&](const std::string &scale) {
    std::string t = text;
    t.replace(t.find("SCALE"), 5, scale);
    return kernel_text(t);
  };
  const ConcreteKernel c = concretize(with("1.0"), {}, 1);
  EXPECT_EQ(accumulation_dtype(c, "o"), spec::DType::bf16);
  EXPECT_EQ(accumulation_steps(c, "o"), 4);
  for (std::uint64_t seed : {0, 1, 2}) {
    RunOptions o;
    o.seed = seed;
    EXPECT_EQ(run(with("1.0"), o).status, RunStatus::pass) << seed;
    EXPECT_EQ(run(with("0.0"), o).status, RunStatus::fail) << seed;
  }
}

TEST(ReferenceBound, ScaleRefusesAReferenceThatStatesItsOwnExtents) {
  spec::KernelSpec k = kernel_text(R"(kernel halves:
    param m = 32
    param n = 512
    grid = (2,)
    target = tpu_v5e
    in  x: f32[m, n]  block=(16, n)  index=(i) -> (i, 0)
    out o: f32[m, n]  block=(16, n)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] * 2.0
    reference:
        t = x * 2.0
        o = concatenate(t[:, 0:256], t[:, 256:n], axis=1)
)");
  RunOptions o;
  EXPECT_EQ(run(k, o).status, RunStatus::pass);
  o.scale = 2;
  const RunResult r = run(k, o);
  EXPECT_EQ(r.status, RunStatus::bad_input);
  EXPECT_NE(r.reason.find("not the extents this reference states"), std::string::npos) << r.reason;
  EXPECT_EQ(r.loc.line, 12);
}

TEST(ReferenceBound, AnArgmaxWithinErrorOfATieFailsSayingSo) {
  // Two sums equal in exact arithmetic, summed in blocks by the body: the
  // index of the larger depends on rounding. Compared exactly still, and the
  // failure says why it may be neither side's bug.
  spec::KernelSpec k = kernel_text(R"(kernel tie:
    param K = 4096
    param bk = 1024
    grid = (K // bk,)
    dimension_semantics = (arbitrary,)
    target = tpu_v5e
    in  x: f32[8, 128]  block=(8, 128)  index=(t) -> (0, 0)
    out oi: i32[1]  block=(1,)  index=(t) -> (0,)
    scratch acc: f32[2]
    body:
        t = program_id(0)
        i = iota((bk,), 0) + t * bk
        z = x[0, 0] * 0.0
        when t == 0:
            acc[...] = zeros
        acc[0:1] += sum(z + cast((i * 7) % 101, f32) * 0.1, axis=0)
        acc[1:2] += sum(z + cast(((K - 1 - i) * 7) % 101, f32) * 0.1, axis=0)
        when t == K // bk - 1:
            oi[...] = argmax(acc[...], axis=0)
    reference:
        i = iota((K,), 0)
        z = x[0, 0] * 0.0
        a = sum(z + cast((i * 7) % 101, f32) * 0.1, axis=0, keepdims=True)
        b = sum(z + cast(((K - 1 - i) * 7) % 101, f32) * 0.1, axis=0, keepdims=True)
        oi = argmax(concatenate(a, b, axis=0), axis=0)
)");
  const RunResult r = run(k, RunOptions{});
  ASSERT_EQ(r.status, RunStatus::fail);
  ASSERT_TRUE(r.mismatch);
  EXPECT_TRUE(r.mismatch->unbounded_integer);
  EXPECT_NE(r.reason.find("within its error of a tie"), std::string::npos) << r.reason;
}
