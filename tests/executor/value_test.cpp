#include "executor/value.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace pipecheck::executor;
using pipecheck::spec::DType;

namespace {
template <class A> std::vector<typename A::value_type> vec(const A &a) { return {a.begin(), a.end()}; }
using pipecheck::executor::testing::floats;
Value ints(Shape shape, std::vector<std::int32_t> v) {
  Value r;
  r.dtype = DType::i32;
  r.shape = std::move(shape);
  r.i.assign(v.begin(), v.end());
  return r;
}
} // namespace

TEST(Binary, BroadcastsARowAgainstAMatrix) {
  const Value m = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  const Value row = floats({3}, {10, 20, 30});
  const Value r = binary(BinOp::add, m, row);
  EXPECT_EQ(r.shape, (Shape{2, 3}));
  EXPECT_EQ(vec(r.f), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  const Value col = floats({2, 1}, {100, 200});
  EXPECT_EQ(vec(binary(BinOp::sub, m, col).f), (std::vector<float>{-99, -98, -97, -196, -195, -194}));
  EXPECT_THROW(binary(BinOp::add, m, floats({2}, {1, 2})), ExecError);
}

TEST(Binary, KeepsBf16UnderAWeakLiteralAndRoundsEveryResult) {
  const Value x = floats({1}, {1.0f}, DType::bf16);
  const Value r = binary(BinOp::add, x, Value::scalar_float(0x1p-8));
  EXPECT_EQ(r.dtype, DType::bf16);
  EXPECT_EQ(r.f[0], 1.0f); // 1 + 2^-8 rounds back to 1 in bf16
  const Value y = floats({1}, {1.0f}, DType::f32);
  EXPECT_EQ(binary(BinOp::add, x, y).dtype, DType::f32);
}

TEST(Binary, DividesIntegersTrulyAndFloorsLikePython) {
  const Value a = ints({2}, {7, -7});
  const Value b = Value::scalar_int(2);
  const Value q = binary(BinOp::div, a, b);
  EXPECT_EQ(q.dtype, DType::f32);
  EXPECT_EQ(vec(q.f), (std::vector<float>{3.5f, -3.5f}));
  EXPECT_EQ(vec(binary(BinOp::floordiv, a, b).i), (std::vector<std::int32_t>{3, -4}));
  EXPECT_EQ(vec(binary(BinOp::mod, a, b).i), (std::vector<std::int32_t>{1, 1}));
}

TEST(Binary, MaximumPropagatesNan) {
  const Value a = floats({2}, {std::nanf(""), 1});
  const Value b = floats({2}, {0, std::nanf("")});
  const Value r = binary(BinOp::maximum, a, b);
  EXPECT_TRUE(std::isnan(r.f[0]));
  EXPECT_TRUE(std::isnan(r.f[1]));
}

TEST(Binary, MaximumOfTwoZerosIsPlusZeroAndMinimumMinusZeroInEitherOrder) {
  const Value a = floats({2}, {-0.0f, 0.0f});
  const Value b = floats({2}, {0.0f, -0.0f});
  for (const Value *x : {&a, &b}) {
    const Value &y = x == &a ? b : a;
    const Value mx = binary(BinOp::maximum, *x, y), mn = binary(BinOp::minimum, *x, y);
    for (int k = 0; k < 2; ++k) {
      EXPECT_FALSE(std::signbit(mx.f[k]));
      EXPECT_TRUE(std::signbit(mn.f[k]));
    }
  }
}

TEST(Dot, MatchesANaiveProductAndAccumulatesBf16InF32) {
  const Value a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  const Value b = floats({3, 2}, {7, 8, 9, 10, 11, 12});
  const Value c = dot(a, b);
  EXPECT_EQ(c.shape, (Shape{2, 2}));
  EXPECT_EQ(vec(c.f), (std::vector<float>{58, 64, 139, 154}));
  // 256 products of 1 * 2^-8 sum to exactly 1 in f32; in bf16 the sum would stall.
  Value x = floats({1, 256}, std::vector<float>(256, 1.0f), DType::bf16);
  Value y = floats({256, 1}, std::vector<float>(256, 0x1p-8f), DType::bf16);
  const Value z = dot(x, y);
  EXPECT_EQ(z.dtype, DType::f32);
  EXPECT_EQ(z.f[0], 1.0f);
  EXPECT_THROW(dot(a, a), ExecError);
  EXPECT_EQ(vec(dot(ints({1, 2}, {2, 3}), ints({2, 1}, {4, 5})).i), (std::vector<std::int32_t>{23}));
}

TEST(Reduce, SumsAndMaxesAlongAnAxisDroppingIt) {
  const Value m = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  const Value s0 = reduce(ReduceOp::sum, m, 0);
  EXPECT_EQ(s0.shape, (Shape{3}));
  EXPECT_EQ(vec(s0.f), (std::vector<float>{5, 7, 9}));
  const Value s1 = reduce(ReduceOp::sum, m, -1);
  EXPECT_EQ(vec(s1.f), (std::vector<float>{6, 15}));
  EXPECT_EQ(vec(reduce(ReduceOp::max, m, 1).f), (std::vector<float>{3, 6}));
  EXPECT_EQ(vec(reduce(ReduceOp::sum, m, std::nullopt).f), (std::vector<float>{21}));
  EXPECT_THROW(reduce(ReduceOp::sum, m, 2), ExecError);
}

TEST(Transpose, SwapsTheAxesOfAMatrix) {
  const Value m = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  const Value t = transpose(m);
  EXPECT_EQ(t.shape, (Shape{3, 2}));
  EXPECT_EQ(vec(t.f), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Cast, TruncatesFloatsToIntegersAndRoundsToNarrowFloats) {
  const Value v = floats({3}, {1.9f, -1.9f, 1.0f + 0x1p-9f});
  EXPECT_EQ(vec(cast(v, DType::i32).i), (std::vector<std::int32_t>{1, -1, 1}));
  EXPECT_EQ(cast(v, DType::bf16).f[2], 1.0f);
}

TEST(Cast, FloatsToNarrowIntegersSaturateAtTheirRangeAsXlaConverts) {
  const Value v = floats({6}, {300.0f, -300.0f, 1e10f, -1.5f, 255.9f, 70000.0f});
  EXPECT_EQ(vec(cast(v, DType::i8).i), (std::vector<std::int32_t>{127, -128, 127, -1, 127, 127}));
  EXPECT_EQ(vec(cast(v, DType::u8).i), (std::vector<std::int32_t>{255, 0, 255, 0, 255, 255}));
  EXPECT_EQ(vec(cast(v, DType::i16).i), (std::vector<std::int32_t>{300, -300, 32767, -1, 255, 32767}));
  // Integers to a narrower integer keep their low bits.
  EXPECT_EQ(vec(cast(ints({2}, {300, -129}), DType::i8).i), (std::vector<std::int32_t>{44, 127}));
}

TEST(LoadStore, StoreBroadcastsAScalarAndCastsToTheTarget) {
  HostArray a("a", DType::bf16, {2, 2});
  store(Value::scalar_float(1.0 + 0x1p-9), View::whole(a));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(a.get(i), 1.0);
  const Value back = load(View::whole(a));
  EXPECT_EQ(back.dtype, DType::bf16);
  EXPECT_EQ(back.shape, (Shape{2, 2}));
  EXPECT_THROW(store(floats({3}, {1, 2, 3}), View::whole(a)), ExecError);
}
