// The executor runs the body language of real kernels: masks, math and
// integer types, dot options, broadcasting, with the typing rules' results.
#include "executor/interp.hpp"
#include "executor/run.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

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

class Arrays : public Memory {
public:
  std::map<std::string, HostArray *> m;
  HostArray *array(const std::string &n) override {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second;
  }
};

// Runs `stmts` as the body of a kernel over x: f32[2, 4] holding 0..7 and
// returns the local `v`.
Value run_body(const std::string &stmts) {
  const auto f = executor::testing::parse_text(
      "kernel k:\n    in x: f32[2, 4]\n    out o: f32[2, 4]\n    body:\n" + stmts);
  HostArray x("x", DType::f32, {2, 4});
  for (int k = 0; k < 8; ++k)
    x.set(k, k);
  Arrays mem;
  mem.m["x"] = &x;
  Interp in(mem);
  in.exec(std::get<spec::KernelSpec>(f.units.at(0)).body);
  return in.locals.at("v");
}

} // namespace

TEST(BodyLanguageValues, IotaCountsAlongItsDimension) {
  EXPECT_EQ(vec(iota(DType::i32, {2, 3}, 1).i), (std::vector<std::int32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(vec(iota(DType::i32, {2, 3}, 0).i), (std::vector<std::int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_THROW(iota(DType::f32, {2}, 0), ExecError);
}

TEST(BodyLanguageValues, ComparisonsGiveBoolsInThePromotedDtype) {
  const Value c = compare(spec::CompareOp::lt, ints({3}, {1, 2, 3}), floats({1}, {2.5f}));
  EXPECT_EQ(c.dtype, DType::boolean);
  EXPECT_EQ(vec(c.i), (std::vector<std::int32_t>{1, 1, 0}));
  const Value n = compare(spec::CompareOp::ne, floats({2}, {NAN, 1}), floats({2}, {NAN, 1}));
  EXPECT_EQ(vec(n.i), (std::vector<std::int32_t>{1, 0}));
}

TEST(BodyLanguageValues, WhereSelectsAndBroadcasts) {
  const Value c = ints({1, 3}, {1, 0, 1}, DType::boolean);
  const Value r = where(c, floats({2, 3}, {1, 2, 3, 4, 5, 6}), Value::scalar_float(-1));
  EXPECT_EQ(r.shape, (Shape{2, 3}));
  EXPECT_EQ(vec(r.f), (std::vector<float>{1, -1, 3, 4, -1, 6}));
}

TEST(BodyLanguageValues, BitwiseOpsAreLogicalOnBoolAndBitwiseOnInts) {
  const Value a = ints({2}, {1, 0}, DType::boolean), b = ints({2}, {1, 1}, DType::boolean);
  EXPECT_EQ(vec(binary(BinOp::bit_and, a, b).i), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(vec(unary(UnOp::bit_not, a).i), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(vec(unary(UnOp::bit_not, ints({1}, {5}, DType::u8)).i), (std::vector<std::int32_t>{250}));
  EXPECT_EQ(vec(binary(BinOp::bit_or, ints({1}, {5}), ints({1}, {2})).i), (std::vector<std::int32_t>{7}));
  EXPECT_THROW(unary(UnOp::bit_not, floats({1}, {1})), ExecError);
}

TEST(BodyLanguageValues, SmallIntegersWrapAndPromoteLikeJnp) {
  const Value a = ints({2}, {100, -128}, DType::i8);
  const Value s = binary(BinOp::add, a, a);
  EXPECT_EQ(s.dtype, DType::i8);
  EXPECT_EQ(vec(s.i), (std::vector<std::int32_t>{-56, 0}));
  const Value m = binary(BinOp::add, a, ints({2}, {200, 255}, DType::u8));
  EXPECT_EQ(m.dtype, DType::i16);
  EXPECT_EQ(vec(m.i), (std::vector<std::int32_t>{300, 127}));
  EXPECT_EQ(vec(binary(BinOp::pow, ints({2}, {3, 2}), ints({2}, {4, -1})).i),
            (std::vector<std::int32_t>{81, 0}));
  EXPECT_EQ(vec(unary(UnOp::abs, ints({1}, {-128}, DType::i8)).i), (std::vector<std::int32_t>{-128}));
}

TEST(BodyLanguageValues, MathFunctionsMatchTheirDefinitions) {
  const Value x = floats({2}, {4, 0.25f});
  EXPECT_EQ(vec(unary(UnOp::sqrt, x).f), (std::vector<float>{2, 0.5f}));
  EXPECT_EQ(vec(unary(UnOp::rsqrt, x).f), (std::vector<float>{0.5f, 2}));
  EXPECT_EQ(vec(unary(UnOp::log2, x).f), (std::vector<float>{2, -2}));
  EXPECT_EQ(vec(unary(UnOp::exp2, floats({1}, {3})).f), (std::vector<float>{8}));
  EXPECT_FLOAT_EQ(unary(UnOp::tanh, floats({1}, {0.5f})).f[0], std::tanh(0.5f));
  EXPECT_EQ(unary(UnOp::log, ints({1}, {1})).dtype, DType::f32);
}

TEST(BodyLanguageValues, DotTransposesAndCastsToThePreferredType) {
  const Value a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  const Value abt = dot(a, a, {}, spec::DotOptions{false, true, std::nullopt});
  EXPECT_EQ(abt.shape, (Shape{2, 2}));
  EXPECT_EQ(vec(abt.f), (std::vector<float>{14, 32, 32, 77}));
  const Value atb = dot(a, a, {}, spec::DotOptions{true, false, DType::bf16});
  EXPECT_EQ(atb.shape, (Shape{3, 3}));
  EXPECT_EQ(atb.dtype, DType::bf16);
  EXPECT_EQ(atb.f[0], 17);
}

TEST(BodyLanguageValues, ReductionsKeepDimsAndMinIsAReduction) {
  const Value a = floats({2, 3}, {1, 5, 3, 4, 2, 6});
  const Value m = reduce(ReduceOp::max, a, 1, {}, true);
  EXPECT_EQ(m.shape, (Shape{2, 1}));
  EXPECT_EQ(vec(m.f), (std::vector<float>{5, 6}));
  EXPECT_EQ(vec(reduce(ReduceOp::min, a, 0).f), (std::vector<float>{1, 2, 3}));
}

TEST(BodyLanguageValues, ValueSubscriptsAddAxesAndSlice) {
  const Value a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto sub = [](spec::Subscript::Kind k, std::optional<std::int64_t> lo = {},
                std::optional<std::int64_t> hi = {}) {
    spec::ValueSubscript s;
    s.sub.kind = k;
    s.sub.has_lo = lo.has_value() || k == spec::Subscript::Kind::index;
    s.sub.has_hi = hi.has_value();
    s.sub.lo = lo;
    s.sub.hi = hi;
    return s;
  };
  const spec::ValueSubscript axis{true, {}};
  const Value r =
      index(a, {sub(spec::Subscript::Kind::slice), axis, sub(spec::Subscript::Kind::slice, 1, 3)});
  EXPECT_EQ(r.shape, (Shape{2, 1, 2}));
  EXPECT_EQ(vec(r.f), (std::vector<float>{2, 3, 5, 6}));
  const Value row = index(a, {sub(spec::Subscript::Kind::index, 1)});
  EXPECT_EQ(vec(row.f), (std::vector<float>{4, 5, 6}));
  try {
    index(a, {sub(spec::Subscript::Kind::index, 2)});
    ADD_FAILURE() << "an index past the extent runs";
  } catch (const ExecError &e) {
    EXPECT_EQ(e.kind, ExecError::Kind::fault);
  }
}

TEST(BodyLanguageInterp, AColumnMaskedSoftmaxRunsAsJnpWouldCompute) {
  const Value v = run_body("        col = iota((2, 4), 1)\n"
                           "        mask = (col < 3) & ~(col == 1)\n"
                           "        xs = where(mask, x[...], -inf)\n"
                           "        e = exp(xs - max(xs, axis=1, keepdims=True))\n"
                           "        s = sum(e, axis=1)\n"
                           "        v = e / s[:, None]\n");
  ASSERT_EQ(v.shape, (Shape{2, 4}));
  const float a = 1.0f / (1.0f + std::exp(2.0f)), b = 1.0f - a;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(v.f[r * 4 + 0], a);
    EXPECT_EQ(v.f[r * 4 + 1], 0);
    EXPECT_FLOAT_EQ(v.f[r * 4 + 2], b);
    EXPECT_EQ(v.f[r * 4 + 3], 0);
  }
}

TEST(BodyLanguageInterp, ReshapeBroadcastToAndCastsRun) {
  const Value v = run_body("        m = reshape(x[...], (8,))\n"
                           "        c = cast(m, i8)\n"
                           "        r = broadcast_to(c[None, :], (2, 8))\n"
                           "        v = r * 40\n");
  EXPECT_EQ(v.dtype, DType::i8);
  EXPECT_EQ(v.shape, (Shape{2, 8}));
  EXPECT_EQ(v.i[7], static_cast<std::int8_t>(280));
}

TEST(BodyLanguageInterp, ALoopCarriesItsLocalsAcrossIterations) {
  // An online row max and sum of exp over two column chunks of two.
  const Value v = run_body("        m = broadcast_to(-inf, (2,))\n"
                           "        l = broadcast_to(0.0, (2,))\n"
                           "        for t in range(2):\n"
                           "            xt = x[:, ds(t * 2, 2)]\n"
                           "            m_new = maximum(m, max(xt, axis=1))\n"
                           "            l = l * exp(m - m_new) + sum(exp(xt - m_new[:, None]), axis=1)\n"
                           "            m = m_new\n"
                           "        v = m + log(l)\n");
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c)
      s += std::exp(4.0 * r + c);
    EXPECT_NEAR(v.f[r], std::log(s), 1e-4);
  }
}

TEST(BodyLanguageRun, TheMaskedTritonKernelsOfTheCorpusRunCorrectly) {
  // check verifies them by evaluating their masks (the corpus file says so);
  // the runs, which poison the padding, show the masks keep it out of the
  // result.
  const std::string path = std::string(PIPECHECK_SOURCE_DIR) + "/corpus/kernels/softmax_layer_norm_triton.pk";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const spec::File f = executor::testing::parse_text(ss.str());
  int ran = 0;
  for (const auto &u : f.units) {
    const auto *k = std::get_if<spec::KernelSpec>(&u);
    if (!k || (k->name != "softmax_rows" && k->name != "layer_norm_fwd")) continue;
    RunOptions o;
    const RunReport r = run_all_modes(*k, o);
    EXPECT_EQ(r.status, RunStatus::pass) << format_report(r);
    ++ran;
  }
  EXPECT_EQ(ran, 2);
}

TEST(BodyLanguage, TileRepeatsEachDimAsJnpTileDoes) {
  // x is [[0, 1, 2, 3], [4, 5, 6, 7]]; reps (1, 2) repeats the columns.
  Value v = run_body("        v = tile(x[...], (1, 2))\n");
  EXPECT_EQ(v.shape, (Shape{2, 8}));
  EXPECT_EQ(vec(v.f), (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7}));
  // More reps than dims: a leading dim of 2 copies of the whole block.
  Value w = run_body("        v = tile(x[0, :], (2, 1))\n");
  EXPECT_EQ(w.shape, (Shape{2, 4}));
  EXPECT_EQ(vec(w.f), (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}));
  // Fewer reps than dims: the reps apply to the trailing dims.
  Value u = run_body("        v = tile(x[...], (2,))\n");
  EXPECT_EQ(u.shape, (Shape{2, 8}));
}

TEST(BodyLanguage, TileIsTypedWithItsResultShape) {
  const auto t = spec::tile_type(spec::TensorType{DType::bf16, false, {8, 128}}, {2, 1, 3});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value.shape, (spec::Dims{2, 8, 384}));
  EXPECT_EQ(t.value.dtype, DType::bf16);
  EXPECT_FALSE(spec::tile_type(spec::TensorType{DType::f32, false, {8}}, {-1}).ok());
}

TEST(BodyLanguage, ConcatenateJoinsAlongItsAxis) {
  // x is [[0, 1, 2, 3], [4, 5, 6, 7]].
  Value v = run_body("        v = concatenate(x[:, 2:4], x[:, 0:1], axis=1)\n");
  EXPECT_EQ(v.shape, (Shape{2, 3}));
  EXPECT_EQ(vec(v.f), (std::vector<float>{2, 3, 0, 6, 7, 4}));
  Value w = run_body("        v = concatenate(x[1:2, :], x[...], axis=0)\n");
  EXPECT_EQ(w.shape, (Shape{3, 4}));
  EXPECT_EQ(vec(w.f), (std::vector<float>{4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_THROW(concatenate({floats({2}, {1, 2}), ints({2}, {1, 2})}, 0), ExecError);
}

TEST(BodyLanguage, RollMovesElementsForwardAsJnpRollAndStridedRowsByTheirOwnShift) {
  Value v = run_body("        v = roll(x[...], 1, axis=1)\n");
  EXPECT_EQ(vec(v.f), (std::vector<float>{3, 0, 1, 2, 7, 4, 5, 6}));
  Value n = run_body("        v = roll(x[...], -5, axis=1)\n"); // -5 mod 4 = 3: left by one
  EXPECT_EQ(vec(n.f), (std::vector<float>{1, 2, 3, 0, 5, 6, 7, 4}));
  // pltpu.roll(x, 1, 1, stride=1, stride_axis=0): row r rolled by 1 + r.
  Value s = run_body("        v = roll(x[...], 1, axis=1, stride=1, stride_axis=0)\n");
  EXPECT_EQ(vec(s.f), (std::vector<float>{3, 0, 1, 2, 6, 7, 4, 5}));
}

TEST(BodyLanguage, FlipReversesOneAxis) {
  EXPECT_EQ(vec(run_body("        v = flip(x[...], axis=1)\n").f),
            (std::vector<float>{3, 2, 1, 0, 7, 6, 5, 4}));
  EXPECT_EQ(vec(run_body("        v = flip(x[...], axis=0)\n").f),
            (std::vector<float>{4, 5, 6, 7, 0, 1, 2, 3}));
}

TEST(BodyLanguageValues, ArgmaxTakesTheFirstExtremeAndANaNWins) {
  const Value a = floats({2, 3}, {1, 5, 5, NAN, 2, NAN});
  EXPECT_EQ(vec(arg_reduce(true, a, 1).i), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(vec(arg_reduce(false, a, 1).i), (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(arg_reduce(true, a, 1).dtype, DType::i32);
  EXPECT_EQ(vec(arg_reduce(false, ints({2, 2}, {3, 1, 2, 4}), 0).i), (std::vector<std::int32_t>{1, 0}));
  EXPECT_THROW(arg_reduce(true, floats({2, 0}, {}), 1), ExecError);
}

TEST(BodyLanguageValues, RunningReductionsScanTheirAxisEitherWay) {
  const Value a = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(vec(cumulative(ReduceOp::sum, a, 1, false).i), (std::vector<std::int32_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(vec(cumulative(ReduceOp::sum, a, 1, true).i), (std::vector<std::int32_t>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(vec(cumulative(ReduceOp::sum, a, 0, false).i), (std::vector<std::int32_t>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(vec(cumulative(ReduceOp::max, floats({4}, {2, 1, 3, 0}), 0, false).f),
            (std::vector<float>{2, 2, 3, 3}));
  EXPECT_EQ(vec(cumulative(ReduceOp::min, floats({4}, {2, 1, 3, 0}), 0, true).f),
            (std::vector<float>{0, 0, 0, 0}));
}

TEST(BodyLanguageValues, ShiftsWorkOnTheBitsOfTheirDtypeAndSaturatePastItsWidth) {
  const Value x = ints({4}, {-8, 1, 255, -1});
  auto by = [](std::int32_t n) { return ints({}, {n}); };
  EXPECT_EQ(vec(shift(Shift::left, x, by(1)).i), (std::vector<std::int32_t>{-16, 2, 510, -2}));
  EXPECT_EQ(vec(shift(Shift::right_arithmetic, x, by(2)).i), (std::vector<std::int32_t>{-2, 0, 63, -1}));
  EXPECT_EQ(vec(shift(Shift::right_logical, x, by(28)).i), (std::vector<std::int32_t>{15, 0, 0, 15}));
  EXPECT_EQ(vec(shift(Shift::left, x, by(32)).i), (std::vector<std::int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(vec(shift(Shift::right_arithmetic, x, by(40)).i), (std::vector<std::int32_t>{-1, 0, 0, -1}));
  EXPECT_EQ(vec(shift(Shift::right_logical, x, by(-1)).i), (std::vector<std::int32_t>{0, 0, 0, 0}));
  // i8: 8 bits. 0x40 << 1 wraps to -128; -128 >> 1 logically is 64.
  const Value b = ints({2}, {64, -128}, DType::i8);
  EXPECT_EQ(vec(shift(Shift::left, b, ints({}, {1}, DType::i8)).i), (std::vector<std::int32_t>{-128, 0}));
  EXPECT_EQ(vec(shift(Shift::right_logical, b, ints({}, {1}, DType::i8)).i),
            (std::vector<std::int32_t>{32, 64}));
  // u8: an arithmetic shift fills with the top bit all the same (XLA: 236 >> 2 is 251).
  const Value u = ints({3}, {236, 100, 255}, DType::u8);
  EXPECT_EQ(vec(shift(Shift::right_arithmetic, u, ints({}, {2}, DType::u8)).i),
            (std::vector<std::int32_t>{251, 25, 255}));
  EXPECT_EQ(vec(shift(Shift::right_arithmetic, u, ints({}, {9}, DType::u8)).i),
            (std::vector<std::int32_t>{255, 0, 255}));
  EXPECT_THROW(shift(Shift::left, floats({1}, {1}), by(1)), ExecError);
}
