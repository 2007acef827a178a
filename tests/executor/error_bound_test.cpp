// The reference's running error analysis: each operation on tracked values
// bounds its result by its own rule (executor/error_bound.hpp); a body's
// values carry nothing.
#include "executor/error_bound.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace pipecheck::executor;
using pipecheck::spec::DType;

namespace {

const double kEps = std::ldexp(1.0, -23);

using pipecheck::executor::testing::floats;

// An input of the reference: tracked, exact.
Value input(Shape shape, std::vector<float> v, DType t = DType::f32) {
  Value r = floats(std::move(shape), std::move(v), t);
  error_bound::track(r, DType::f32);
  return r;
}

// A tracked value whose every element is within `e` of its exact value.
Value inexact(Shape shape, std::vector<float> v, float e) {
  Value r = floats(std::move(shape), std::move(v));
  error_bound::track(r, DType::f32, FloatVec(r.f.size(), e));
  return r;
}

double bound(const Value &v, std::size_t k = 0) { return v.bound.e.empty() ? 0.0 : v.bound.e.at(k); }

} // namespace

TEST(ErrorBound, ABodysValuesCarryNoBound) {
  const Value x = floats({3}, {1000, -999, 1});
  const Value s = reduce(ReduceOp::sum, binary(BinOp::mul, x, x), std::nullopt);
  EXPECT_FALSE(s.bound.on);
  EXPECT_TRUE(s.bound.e.empty());
}

TEST(ErrorBound, ASumOfLargeCancellingTermsIsBoundedByItsPartialSumsNotItsResult) {
  // Partial sums 1000, 1, 2: the rounding of each is at most a unit
  // roundoff of it, on each side.
  const Value s = reduce(ReduceOp::sum, input({3}, {1000, -999, 1}), std::nullopt);
  ASSERT_TRUE(s.bound.on);
  EXPECT_EQ(s.f.at(0), 2.0f);
  EXPECT_NEAR(bound(s), 1003 * kEps, 1e-9);
  // The same terms in an order that keeps the partial sums small.
  EXPECT_NEAR(bound(reduce(ReduceOp::sum, input({3}, {1, -999, 1000}), std::nullopt)), (1 + 998 + 2) * kEps,
              1e-9);
}

TEST(ErrorBound, ADotAddsItsProductsToItsPartialSumsAndPropagatesItsOperandsErrors) {
  const Value a = input({1, 3}, {1000, -999, 1});
  const Value b = input({3, 1}, {1, 1, 1});
  const Value d = dot(a, b);
  EXPECT_EQ(d.f.at(0), 2.0f);
  EXPECT_NEAR(bound(d), (2000 + 1003) * kEps, 1e-9);
  // b within 0.5 of its values: |a|·0.5 more.
  const Value d2 = dot(a, inexact({3, 1}, {1, 1, 1}, 0.5f));
  EXPECT_NEAR(bound(d2), (2000 + 1003) * kEps + 0.5 * 2000, 1e-3);
}

TEST(ErrorBound, ADotGeneralBoundsEachBatchAsItsDot) {
  const Value a = input({2, 1, 3}, {1000, -999, 1, 1, 1, 1});
  const Value b = input({2, 3, 1}, {1, 1, 1, 1, 1, 1});
  const Value d = dot_general(a, b, {{2}, {1}, {0}, {0}});
  ASSERT_EQ(d.bound.e.size(), 2u);
  EXPECT_NEAR(bound(d, 0), (2000 + 1003) * kEps, 1e-9);
  EXPECT_NEAR(bound(d, 1), (3 + 6) * kEps, 1e-9);
}

TEST(ErrorBound, ExpMultipliesTheErrorOfItsArgumentByItsValue) {
  // exp(x ± e) - exp(x), and exp's own rounding.
  const double e3 = 1e-3f;
  const Value e = unary(UnOp::exp, inexact({2}, {0.0f, 10.0f}, 1e-3f));
  EXPECT_NEAR(bound(e, 0), std::expm1(e3) + kEps, 1e-9);
  EXPECT_NEAR(bound(e, 1), std::exp(10.0) * (std::expm1(e3) + kEps), 1e-4);
  // A log outside its domain within the bound: unbounded.
  EXPECT_TRUE(std::isinf(bound(unary(UnOp::log, inexact({1}, {1e-4f}, 1e-3f)))));
}

TEST(ErrorBound, AnExactValueCastsToTheSameNumberOnBothSidesAnInexactOneMayNot) {
  const Value exact = cast(input({1}, {1.0f + 0x1p-12f}), DType::bf16);
  EXPECT_TRUE(exact.bound.on);
  EXPECT_TRUE(exact.bound.e.empty());
  const Value rounded = cast(inexact({1}, {3.0f}, 1e-6f), DType::bf16);
  EXPECT_NEAR(bound(rounded), 1e-6 + 3 * std::ldexp(1.0, -7), 1e-9);
  // Widening adds nothing.
  EXPECT_FLOAT_EQ(static_cast<float>(bound(cast(inexact({1}, {3.0f}, 1e-6f), DType::f32))), 1e-6f);
}

TEST(ErrorBound, ACancellingDifferenceKeepsTheErrorsOfItsOperands) {
  const Value d = binary(BinOp::sub, inexact({1}, {10000.5f}, 0.01f), inexact({1}, {10000.0f}, 0.02f));
  EXPECT_EQ(d.f.at(0), 0.5f);
  EXPECT_NEAR(bound(d), 0.03 + 0.5 * kEps, 1e-7);
  const Value p = binary(BinOp::mul, inexact({1}, {4.0f}, 0.5f), inexact({1}, {2.0f}, 0.25f));
  EXPECT_NEAR(bound(p), 4 * 0.25 + 2 * 0.5 + 0.5 * 0.25 + 8 * kEps, 1e-6);
  // A divisor within its bound of 0: unbounded.
  EXPECT_TRUE(std::isinf(bound(binary(BinOp::div, input({1}, {1.0f}), inexact({1}, {0.1f}, 0.2f)))));
}

TEST(ErrorBound, AComparisonWithinTheBoundsMayFlipAndAWhereOnItTakesEitherBranch) {
  const Value s = inexact({2}, {0.001f, 5.0f}, 0.01f);
  const Value c = compare(pipecheck::spec::CompareOp::gt, s, Value::scalar_float(0));
  EXPECT_EQ(bound(c, 0), 1.0); // 0.001 may be below 0 on the other side
  EXPECT_EQ(bound(c, 1), 0.0);
  const Value w = where(c, input({2}, {1, 1}), input({2}, {-1, -1}));
  EXPECT_NEAR(bound(w, 0), 2.0, 1e-9);
  EXPECT_EQ(bound(w, 1), 0.0);
  // A comparison of exact values is exact.
  EXPECT_TRUE(
      compare(pipecheck::spec::CompareOp::gt, input({1}, {1}), Value::scalar_float(0)).bound.e.empty());
}

TEST(ErrorBound, AMaxMovesByItsWinnersBoundOrWhatALoserWithinReachCouldOvertakeItBy) {
  Value x = inexact({3}, {1, 3, 2}, 0.0f);
  x.bound.e = {0.1f, 0.2f, 0.4f};
  EXPECT_NEAR(bound(reduce(ReduceOp::max, x, std::nullopt)), 0.2, 1e-7); // 2 + 0.4 stays below 3 - 0.2
  x.f = {1, 3, 2.9f};
  EXPECT_NEAR(bound(reduce(ReduceOp::max, x, std::nullopt)), 0.3, 1e-6); // 2.9 + 0.4 overtakes 3 by 0.3
  EXPECT_NEAR(bound(reduce(ReduceOp::min, x, std::nullopt)), 0.1, 1e-7);
  // A masked score far below the others, with the large bound of its
  // rounding, moves nothing.
  const Value m =
      binary(BinOp::maximum, inexact({2}, {-2e38f, 1.0f}, 1e31f), inexact({2}, {0.5f, 0.5f}, 0.01f));
  EXPECT_NEAR(bound(m, 0), 0.01, 1e-7);
  EXPECT_NEAR(bound(m, 1), 1e31, 1e25); // the winner's own
}

TEST(ErrorBound, AModuloOfAnInexactValueIsUnboundedAndOfAnExactOneExact) {
  const Value m = binary(BinOp::mod, inexact({2}, {2.5f, 3.5f}, 1e-6f), Value::scalar_float(1));
  EXPECT_TRUE(std::isinf(bound(m, 0)));
  EXPECT_TRUE(binary(BinOp::mod, input({2}, {2.5f, 3.5f}), Value::scalar_float(1)).bound.e.empty());
}

TEST(ErrorBound, MovedElementsKeepTheirBounds) {
  Value x = inexact({2, 2}, {1, 2, 3, 4}, 0.0f);
  x.bound.e = {1, 2, 3, 4};
  const Value t = transpose(x);
  EXPECT_EQ(std::vector<float>(t.bound.e.begin(), t.bound.e.end()), (std::vector<float>{1, 3, 2, 4}));
  pipecheck::spec::ValueSubscript at1;
  at1.sub.lo = 1; // x[1]
  const Value row = index(x, {at1});
  EXPECT_EQ(std::vector<float>(row.bound.e.begin(), row.bound.e.end()), (std::vector<float>{3, 4}));
  const Value b = broadcast_to(reshape(row, {1, 2}), {3, 2});
  EXPECT_EQ(b.bound.e.size(), 6u);
  EXPECT_EQ(b.bound.e.at(5), 4.0f);
}

TEST(ErrorBound, AnIntegerArgmaxWhoseWinnerIsWithinErrorOfAnotherIsUnbounded) {
  const Value x = inexact({2, 3}, {1.0f, 1.001f, 0.0f, 1.0f, 2.0f, 0.0f}, 0.01f);
  const Value a = arg_reduce(true, x, 1);
  EXPECT_TRUE(std::isinf(bound(a, 0)));
  EXPECT_EQ(bound(a, 1), 0.0);
}
