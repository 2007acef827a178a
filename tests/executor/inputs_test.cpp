// Generated inputs: each kind holds what it promises, from its seed alone,
// and `run` compares NaN as a value when the inputs may hold it.
#include "executor/inputs.hpp"
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace pipecheck;
using namespace pipecheck::executor;
using spec::DType;

namespace {

const DType kAll[] = {DType::f32, DType::f16, DType::bf16, DType::i32,
                      DType::i16, DType::i8,  DType::u8,   DType::boolean};
const InputKind kKinds[] = {InputKind::uniform, InputKind::normal, InputKind::integers, InputKind::one_hot,
                            InputKind::special};

std::unique_ptr<HostArray> filled(DType t, InputKind k, std::uint64_t seed, std::int64_t n = 4096) {
  auto a = std::make_unique<HostArray>("x", t, Shape{n});
  fill_inputs(*a, k, seed);
  return a;
}

bool same(const HostArray &a, const HostArray &b) {
  return std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.bytes())) == 0;
}

double max_finite(DType t) {
  return t == DType::f16 ? 65504.0 : t == DType::bf16 ? std::ldexp(255.0, 120) : 3.4028234663852886e38;
}
double min_normal(DType t) { return t == DType::f16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126); }

} // namespace

TEST(Inputs, KindsHaveTheirCommandLineNames) {
  for (InputKind k : kKinds)
    EXPECT_EQ(parse_input_kind(to_string(k)), k);
  EXPECT_EQ(parse_input_kind("one-hot"), InputKind::one_hot);
  EXPECT_FALSE(parse_input_kind("gaussian"));
}

TEST(Inputs, TheSameSeedGivesTheSameDataAndAnotherSeedOther) {
  for (InputKind k : kKinds)
    for (DType t : kAll) {
      EXPECT_TRUE(same(*filled(t, k, 11), *filled(t, k, 11))) << to_string(k) << " " << spec::to_string(t);
      if (t != DType::boolean || k != InputKind::one_hot) {
        EXPECT_FALSE(same(*filled(t, k, 11), *filled(t, k, 12))) << to_string(k) << " " << spec::to_string(t);
      }
    }
}

TEST(Inputs, UniformIsTheDefaultFill) {
  HostArray a("x", DType::f32, {64});
  a.fill_random(3);
  EXPECT_TRUE(same(a, *filled(DType::f32, InputKind::uniform, 3, 64)));
}

TEST(Inputs, IntegersAreSmallWholeNumbersWhoseFloatSumsAreExact) {
  for (DType t : kAll) {
    auto a = filled(t, InputKind::integers, 5);
    double sum = 0;
    float fsum = 0;
    for (std::int64_t i = 0; i < a->size(); ++i) {
      const double v = a->get(i);
      EXPECT_EQ(v, std::round(v));
      EXPECT_LE(std::fabs(v), 8);
      sum += v;
      fsum += static_cast<float>(v);
    }
    EXPECT_EQ(sum, static_cast<double>(fsum)) << spec::to_string(t);
  }
}

TEST(Inputs, OneHotHasExactlyOneOne) {
  for (DType t : kAll) {
    auto a = filled(t, InputKind::one_hot, 9);
    int ones = 0, zeros = 0;
    for (std::int64_t i = 0; i < a->size(); ++i) {
      ones += a->get(i) == 1;
      zeros += a->get(i) == 0;
    }
    EXPECT_EQ(ones, 1) << spec::to_string(t);
    EXPECT_EQ(zeros, a->size() - 1) << spec::to_string(t);
  }
}

TEST(Inputs, NormalHasMeanZeroAndVarianceOne) {
  auto a = filled(DType::f32, InputKind::normal, 1, 100000);
  double s = 0, s2 = 0;
  for (std::int64_t i = 0; i < a->size(); ++i) {
    s += a->get(i);
    s2 += a->get(i) * a->get(i);
  }
  const double mean = s / 100000, var = s2 / 100000 - mean * mean;
  EXPECT_NEAR(mean, 0, 0.02);
  EXPECT_NEAR(var, 1, 0.03);
}

TEST(Inputs, SpecialHoldsNanInfinitiesNegativeZeroSubnormalsAndNearOverflow) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    auto a = filled(t, InputKind::special, 2);
    bool nan = false, pinf = false, ninf = false, nzero = false, sub = false, big = false, plain = false;
    for (std::int64_t i = 0; i < a->size(); ++i) {
      const double v = a->get(i);
      nan |= std::isnan(v);
      pinf |= v == INFINITY;
      ninf |= v == -INFINITY;
      nzero |= v == 0 && std::signbit(v);
      sub |= v != 0 && std::fabs(v) < min_normal(t);
      big |= std::isfinite(v) && std::fabs(v) >= 0.5 * max_finite(t);
      plain |= std::isfinite(v) && std::fabs(v) < 1 && std::fabs(v) > 1e-3;
    }
    EXPECT_TRUE(nan && pinf && ninf && nzero && sub && big && plain) << spec::to_string(t);
  }
  for (DType t : {DType::i32, DType::i16, DType::i8}) {
    auto a = filled(t, InputKind::special, 2);
    bool top = false;
    for (std::int64_t i = 0; i < a->size(); ++i) {
      EXPECT_FALSE(a->is_poison(i)) << "an integer special value is the dtype's poison";
      top |= a->get(i) == (t == DType::i32 ? 2147483647 : t == DType::i16 ? 32767 : 127);
    }
    EXPECT_TRUE(top) << spec::to_string(t);
  }
}

TEST(Inputs, SpecialInputsRunAnElementwiseKernelAndStillFindAnUnwrittenOutput) {
  const auto file = executor::testing::parse_text(R"(kernel scale:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    body:
        o[...] = x[...] * 2
    reference:
        o = x * 2

kernel half_written:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i,) -> (i, 0)
    body:
        when program_id(0) < 2:
            o[...] = x[...]
)");
  RunOptions o;
  o.input_kind = InputKind::special;
  const RunReport good = run_all_modes(std::get<spec::KernelSpec>(file.units[0]), o);
  EXPECT_EQ(good.status, RunStatus::pass) << format_report(good);
  const RunResult bad = run(std::get<spec::KernelSpec>(file.units[1]), o);
  ASSERT_EQ(bad.status, RunStatus::fail);
  EXPECT_NE(bad.reason.find("o[256, 0] was never written"), std::string::npos) << bad.reason;
  EXPECT_EQ(bad.mismatch->count, 2 * 128 * 128);
}

TEST(Inputs, SpecialInputsTellANanTheBodyComputesFromPoisonItRead) {
  // log of a negative input is a NaN the body makes (the same with stand-ins
  // for undefined data): "got nan", not a read of memory nothing wrote; a
  // scratch read before any store is still that.
  const auto file = executor::testing::parse_text(R"(kernel log_of_negatives:
    grid = (2,)
    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = log(x[...])
    reference:
        o = log(abs(x))

kernel scratch_never_stored:
    grid = (2,)
    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    scratch t: f32[8, 128]
    body:
        o[...] = x[...] + t[...]
    reference:
        o = x
)");
  RunOptions o;
  o.input_kind = InputKind::special;
  const RunResult computed = run(std::get<spec::KernelSpec>(file.units[0]), o);
  ASSERT_EQ(computed.status, RunStatus::fail);
  ASSERT_TRUE(computed.mismatch);
  EXPECT_FALSE(computed.mismatch->is_poison) << computed.reason;
  EXPECT_NE(computed.reason.find("got nan"), std::string::npos) << computed.reason;
  const RunResult poison = run(std::get<spec::KernelSpec>(file.units[1]), o);
  ASSERT_EQ(poison.status, RunStatus::fail);
  EXPECT_NE(poison.reason.find("reads memory nothing wrote"), std::string::npos) << poison.reason;
}
