// The elementwise math functions the JAX bridge maps jnp's onto (sin, cos,
// erf, floor, ceil, round, sign, sigmoid, expm1, log1p), and opaque ops,
// whose values no run may guess.
#include "executor/interp.hpp"
#include "executor/value.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

using namespace pipecheck;
using namespace pipecheck::executor;
using spec::DType;

namespace {

class Arrays : public Memory {
public:
  std::map<std::string, HostArray *> m;
  HostArray *array(const std::string &n) override {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second;
  }
};

// Runs `stmts` as the body of a kernel over x: f32[8] holding `xs` and
// returns the local `v`.
Value run_body(const std::string &stmts, const std::vector<float> &xs) {
  const auto f =
      executor::testing::parse_text("kernel k:\n    in x: f32[8]\n    out o: f32[8]\n    body:\n" + stmts);
  HostArray x("x", DType::f32, {8});
  for (std::size_t k = 0; k < xs.size(); ++k)
    x.set(static_cast<std::int64_t>(k), xs[k]);
  Arrays mem;
  mem.m["x"] = &x;
  Interp in(mem);
  in.exec(std::get<spec::KernelSpec>(f.units.at(0)).body);
  return in.locals.at("v");
}

const std::vector<float> kXs = {-2.5f, -1.5f, -0.5f, -0.0f, 0.5f, 1.5f, 2.5f, 3.25f};

std::vector<float> apply(float (*fn)(float)) {
  std::vector<float> r;
  for (float x : kXs)
    r.push_back(fn(x));
  return r;
}

void expect_floats(const Value &v, const std::vector<float> &want) {
  ASSERT_EQ(v.dtype, DType::f32);
  ASSERT_EQ(v.f.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(v.f[k])), std::bit_cast<std::uint32_t>(want[k]))
        << "element " << k << ": " << v.f[k] << " vs " << want[k];
}

} // namespace

TEST(Math, TheFloatFunctionsComputeInF32AsTheCLibraryDoes) {
  expect_floats(run_body("        v = sin(x[...])\n", kXs), apply([](float x) { return std::sin(x); }));
  expect_floats(run_body("        v = cos(x[...])\n", kXs), apply([](float x) { return std::cos(x); }));
  expect_floats(run_body("        v = erf(x[...])\n", kXs), apply([](float x) { return std::erf(x); }));
  expect_floats(run_body("        v = erfc(x[...])\n", kXs), apply([](float x) { return std::erfc(x); }));
  expect_floats(run_body("        v = expm1(x[...])\n", kXs), apply([](float x) { return std::expm1(x); }));
  expect_floats(run_body("        v = log1p(x[...] + 3)\n", kXs),
                apply([](float x) { return std::log1p(x + 3.0f); }));
  expect_floats(run_body("        v = sigmoid(x[...])\n", kXs),
                apply([](float x) { return 1.0f / (1.0f + std::exp(-x)); }));
}

TEST(Math, RoundingFunctionsFollowJnpWithRoundHalfToEven) {
  expect_floats(run_body("        v = floor(x[...])\n", kXs), {-3, -2, -1, -0.0f, 0, 1, 2, 3});
  expect_floats(run_body("        v = ceil(x[...])\n", kXs), {-2, -1, -0.0f, -0.0f, 1, 2, 3, 4});
  // jnp.round: half to even, so 2.5 -> 2 and -0.5 -> -0.
  expect_floats(run_body("        v = round(x[...])\n", kXs), {-2, -2, -0.0f, -0.0f, 0, 2, 2, 3});
  // lax.sign keeps the sign of zero.
  expect_floats(run_body("        v = sign(x[...])\n", kXs), {-1, -1, -1, -0.0f, 1, 1, 1, 1});
}

TEST(Math, IntegerArgumentsKeepTheirDtypeForRoundingAndSignAndBecomeF32Otherwise) {
  const Value r = run_body("        v = sign(cast(x[...], i8))\n", kXs);
  EXPECT_EQ(r.dtype, DType::i8);
  EXPECT_EQ(std::vector<std::int32_t>(r.i.begin(), r.i.end()),
            (std::vector<std::int32_t>{-1, -1, 0, 0, 0, 1, 1, 1}));
  const Value f = run_body("        v = floor(cast(x[...], i32))\n", kXs);
  EXPECT_EQ(f.dtype, DType::i32);
  EXPECT_EQ(std::vector<std::int32_t>(f.i.begin(), f.i.end()),
            (std::vector<std::int32_t>{-2, -1, 0, 0, 0, 1, 2, 3}));
  EXPECT_EQ(run_body("        v = sin(cast(x[...], i32))\n", kXs).dtype, DType::f32);
}

TEST(Math, ABf16ResultIsRoundedToBf16) {
  const Value v = run_body("        v = sin(cast(x[...], bf16))\n", kXs);
  EXPECT_EQ(v.dtype, DType::bf16);
  for (std::size_t k = 0; k < kXs.size(); ++k)
    EXPECT_NEAR(v.f[k], std::sin(kXs[k]), 1.0 / 128);
}

TEST(Math, AnOpaqueOpCannotBeEvaluated) {
  try {
    run_body("        v = opaque(x[...], op=sinh, shape=(8,), dtype=f32)\n", kXs);
    FAIL() << "an opaque op was evaluated";
  } catch (const ExecError &e) {
    EXPECT_EQ(e.loc.line, 5);
    EXPECT_NE(std::string(e.what()).find("cannot run: opaque op sinh at line 5"), std::string::npos)
        << e.what();
  }
}

TEST(Math, IntegerFloorDivisionByZeroIsJnps) {
  // jnp.floor_divide: XLA's x / 0 (-1), one less where x is not 0; unsigned
  // all ones. `%` by zero is 0.
  const Value v = run_body("        v = cast(x[...], i32) // (cast(x[...], i32) * 0)\n",
                           {-3.0f, 0.0f, 5.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f});
  ASSERT_EQ(v.dtype, DType::i32);
  EXPECT_EQ(std::vector<std::int32_t>(v.i.begin(), v.i.end()),
            (std::vector<std::int32_t>{-2, -1, -2, -2, -1, -1, -1, -1}));
  const Value u = run_body("        v = cast(x[...], u8) // cast(x[...] * 0.0, u8)\n",
                           {3.0f, 0.0f, 5.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_EQ(std::vector<std::int32_t>(u.i.begin(), u.i.end()), (std::vector<std::int32_t>(8, 255)));
  const Value m = run_body("        v = cast(x[...], i32) % (cast(x[...], i32) * 0)\n",
                           {-3.0f, 0.0f, 5.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_EQ(std::vector<std::int32_t>(m.i.begin(), m.i.end()), (std::vector<std::int32_t>(8, 0)));
}
