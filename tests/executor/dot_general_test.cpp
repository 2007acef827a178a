// The executor's lax.dot_general: batch dims, then a's free dims, then b's
// free dims, against products computed by hand.
#include "executor/interp.hpp"
#include "executor/oracle.hpp"
#include "executor/reference.hpp"
#include "executor/value.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;
using spec::DType;

namespace {

template <class A> std::vector<typename A::value_type> vec(const A &a) { return {a.begin(), a.end()}; }

using pipecheck::executor::testing::floats;

Value ints(Shape shape, std::vector<std::int32_t> v, DType t = DType::i32) {
  Value r;
  r.dtype = t;
  r.shape = std::move(shape);
  r.i.assign(v.begin(), v.end());
  return r;
}

spec::DotDims dims(std::vector<std::int64_t> lc, std::vector<std::int64_t> rc,
                   std::vector<std::int64_t> lb = {}, std::vector<std::int64_t> rb = {}) {
  return spec::DotDims{std::move(lc), std::move(rc), std::move(lb), std::move(rb)};
}

class Arrays : public Memory {
public:
  std::map<std::string, HostArray *> m;
  HostArray *array(const std::string &n) override {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second;
  }
};

} // namespace

TEST(DotGeneralValues, ABatchedMatmulMultipliesEachBatchOnItsOwn) {
  // q[b] is 2x2, k[b] is 3x2 (rows are keys); q[b] @ k[b]^T by hand.
  const Value q = floats({2, 2, 2}, {1, 2, 3, 4, /**/ 0, 1, 1, 0});
  const Value k = floats({2, 3, 2}, {1, 0, 0, 1, 1, 1, /**/ 2, 3, 4, 5, 6, 7});
  const Value r = dot_general(q, k, dims({2}, {2}, {0}, {0}));
  EXPECT_EQ(r.shape, (Shape{2, 2, 3}));
  EXPECT_EQ(r.dtype, DType::f32);
  EXPECT_EQ(vec(r.f), (std::vector<float>{1, 2, 3, 3, 4, 7, /**/ 3, 5, 7, 2, 4, 6}));
}

TEST(DotGeneralValues, ContractingBothFirstDimsIsATransposedProduct) {
  // a^T b for a = [[1, 2], [3, 4], [5, 6]] and b = [[1], [1], [2]].
  const Value a = floats({3, 2}, {1, 2, 3, 4, 5, 6}), b = floats({3, 1}, {1, 1, 2});
  const Value r = dot_general(a, b, dims({0}, {0}));
  EXPECT_EQ(r.shape, (Shape{2, 1}));
  EXPECT_EQ(vec(r.f), (std::vector<float>{14, 18}));
  // The same as dot with trans_a.
  spec::DotOptions o;
  o.trans_a = true;
  EXPECT_EQ(vec(dot(a, b, {}, o).f), vec(r.f));
}

TEST(DotGeneralValues, TwoContractedDimsSumOverBoth) {
  const Value a = floats({2, 2}, {1, 2, 3, 4});
  const Value r = dot_general(a, a, dims({0, 1}, {0, 1}));
  EXPECT_EQ(r.shape, (Shape{}));
  EXPECT_EQ(vec(r.f), (std::vector<float>{30}));
}

TEST(DotGeneralValues, IntegersGiveI32AndBf16InputsAccumulateInF32) {
  const Value a = ints({2, 2}, {1, 2, 3, 4}, DType::i8);
  const Value r = dot_general(a, a, dims({1}, {1}));
  EXPECT_EQ(r.dtype, DType::i32);
  EXPECT_EQ(vec(r.i), (std::vector<std::int32_t>{5, 11, 11, 25}));
  // 256 + 1 is not a bf16, but the f32 accumulator holds it; preferred bf16
  // rounds only the result.
  const Value b = floats({1, 2}, {256, 1}, DType::bf16), one = floats({1, 2}, {1, 1}, DType::bf16);
  EXPECT_EQ(vec(dot_general(b, one, dims({1}, {1})).f), (std::vector<float>{257}));
  const Value p = dot_general(b, one, dims({1}, {1}), {}, DType::bf16);
  EXPECT_EQ(p.dtype, DType::bf16);
  EXPECT_EQ(vec(p.f), (std::vector<float>{256}));
}

TEST(DotGeneralValues, MismatchedDimensionNumbersAreBadInput) {
  EXPECT_THROW(
      dot_general(floats({2, 3}, {1, 2, 3, 4, 5, 6}), floats({2, 3}, {1, 2, 3, 4, 5, 6}), dims({1}, {0})),
      ExecError);
}

TEST(DotGeneralInterp, TheBodyCallRunsWithItsKeywords) {
  const auto f = executor::testing::parse_text("kernel k:\n    in x: f32[2, 2, 2]\n    out o: f32[2, 2, 2]\n"
                                               "    body:\n        v = dot_general(x[...], x[...], "
                                               "contract=((2,), (1,)), batch=((0,), (0,)))\n");
  HostArray x("x", DType::f32, {2, 2, 2});
  for (int k = 0; k < 8; ++k)
    x.set(k, k);
  Arrays mem;
  mem.m["x"] = &x;
  Interp in(mem);
  in.exec(std::get<spec::KernelSpec>(f.units.at(0)).body);
  // Each batch squared: [[0,1],[2,3]]^2 and [[4,5],[6,7]]^2.
  EXPECT_EQ(vec(in.locals.at("v").f), (std::vector<float>{2, 3, 6, 11, 46, 55, 66, 79}));
}

TEST(DotGeneralReference, TheToleranceGrowsWithEveryContractedExtent) {
  // Contracting two dims of 16 and 32 sums 512 products per element.
  const auto f = executor::testing::parse_text(
      "kernel k:\n    in x: bf16[8, 16, 32]\n    in y: bf16[16, 32, 8]\n"
      "    out o: f32[8, 8]\n    body:\n"
      "        o[...] = dot_general(x[...], y[...], contract=((1, 2), (0, 1)))\n"
      "    reference:\n"
      "        o = dot_general(x, y, contract=((1, 2), (0, 1)))\n");
  const ConcreteKernel c = concretize(std::get<spec::KernelSpec>(f.units.at(0)), {}, 1);
  EXPECT_EQ(reference_reduction_length(c), 512);
}
