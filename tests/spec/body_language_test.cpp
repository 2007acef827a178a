// The body language of real Pallas kernels: masks (iota, comparisons,
// where, & | ~), math and integer types, dot options, broadcasting. Each
// construct parses, prints back to itself, and has a type or a located error.
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

// A kernel with x: f32[8, 128], an i32 input n8: i32[8, 128], an output o
// and the body lines given (the first on line 6).
std::string kernel(const std::string &o, const std::vector<std::string> &body) {
  std::string s =
      "kernel k:\n    in  x: f32[8, 128]\n    in  n8: i8[8, 128]\n    out o: " + o + "\n    body:\n";
  for (const auto &b : body)
    s += "        " + b + "\n";
  return s;
}

std::vector<Diagnostic> errors_of(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("t.pk", text)).errors;
}

void expect_ok(const std::string &text) {
  for (const auto &e : errors_of(text))
    ADD_FAILURE() << e.loc.line << ":" << e.loc.col << ": " << e.message << "\nin:\n" << text;
}

Diagnostic first_error(const std::string &text) {
  auto errs = errors_of(text);
  if (errs.empty()) {
    ADD_FAILURE() << "expected an error for:\n" << text;
    return {};
  }
  return errs.front();
}

// The type of the value stored by the body's last statement.
TensorType stored_type(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("t.pk", text));
  EXPECT_TRUE(r.file.has_value()) << (r.errors.empty() ? "" : r.errors[0].message);
  if (!r.file) return {};
  const auto &k = std::get<KernelSpec>(r.file->units.at(0));
  ExprTypes types;
  EXPECT_TRUE(typecheck(k, {}, &types).empty());
  const Expr *v = nullptr;
  const Stmt *last = &k.body.back();
  while (const auto *f = std::get_if<For>(&last->kind))
    last = &f->body.back();
  if (const auto *a = std::get_if<Assign>(&last->kind)) v = &a->value;
  if (const auto *l = std::get_if<Let>(&last->kind)) v = &l->value;
  auto it = types.find(v);
  EXPECT_NE(it, types.end());
  return it == types.end() ? TensorType{} : it->second;
}

Expr parse_expr(const std::string &e) {
  auto r = parse(SourceFile::from_string("t.pk", kernel("f32[8, 128]", {"t = " + e})));
  EXPECT_TRUE(r.file.has_value()) << e << ": " << (r.errors.empty() ? "" : r.errors[0].message);
  if (!r.file) return {};
  return std::get<Let>(std::get<KernelSpec>(r.file->units.at(0)).body.at(0).kind).value;
}

} // namespace

// ------------------------------------------------------------------ syntax

TEST(BodyLanguageSyntax, BitwiseOperatorsBindLikePython) {
  // `&` binds tighter than `|`, both looser than `+` and tighter than `<`.
  const Expr e = parse_expr("a | b & c + 1 < d");
  ASSERT_EQ(e.op, Op::Lt);
  ASSERT_EQ(e.args[0].op, Op::BitOr);
  EXPECT_EQ(e.args[0].args[1].op, Op::BitAnd);
  EXPECT_EQ(e.args[0].args[1].args[1].op, Op::Add);
  EXPECT_EQ(parse_expr("~a & b").args[0].op, Op::BitNot);
}

TEST(BodyLanguageSyntax, EveryNewConstructPrintsBackToItself) {
  for (const char *e :
       {"(c < n) & ~(r >= 3)", "a | b | c", "~~a", "-~a", "~a ** 2", "(a | b) & c", "iota((8, 128), 1)",
        "iota((8,), 0, dtype=i16)", "reshape(x[...], (128, 8))", "broadcast_to(m[:, None], (8, 128))",
        "m[None, ...]", "m[:, None, 2:4]", "dot(x[...], x[...], trans_b=True, preferred_element_type=f32)",
        "sum(x[...], axis=1, keepdims=True)", "where(x[...] > 0, x[...], 0.0)",
        "pow(x[...], 2.0) + rsqrt(x[...]) * tanh(x[...])", "()", "(a,)"}) {
    const Expr parsed = parse_expr(e);
    EXPECT_EQ(print(parsed), e);
    EXPECT_EQ(parse_expr(print(parsed)), parsed) << e;
  }
}

TEST(BodyLanguageSyntax, ANewAxisOnABlockIsAnErrorThatSaysToLoadItFirst) {
  Diagnostic d = first_error(kernel("f32[8, 128]", {"o[...] = x[:, None]"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_EQ(d.loc.col, 23);
  EXPECT_NE(d.message.find("load it first"), std::string::npos) << d.message;
}

TEST(BodyLanguageSyntax, LogicalOperatorsAreNotIntegerExpressions) {
  Diagnostic d =
      first_error("kernel k:\n    grid = (4,)\n    out o: f32[8]\n    body:\n"
                  "        when (program_id(0) == 0) & (program_id(0) < 2):\n            o[...] = 0\n");
  EXPECT_EQ(d.loc.line, 5);
  EXPECT_NE(d.message.find("use 'and', 'or', 'not'"), std::string::npos) << d.message;
}

// ------------------------------------------------------------------ typing

TEST(BodyLanguageTyping, AComparisonOfTensorsIsABoolTensorOfTheBroadcastShape) {
  TensorType t = stored_type(kernel("bool[8, 128]", {"c = iota((8, 128), 1)", "m = c < 100"}));
  EXPECT_EQ(t.dtype, DType::boolean);
  EXPECT_EQ(t.shape, (Dims{8, 128}));
  EXPECT_FALSE(t.weak);
}

TEST(BodyLanguageTyping, ALocalReboundInABranchHasAfterItWhatEitherWayLeaves) {
  // A literal's zeros (weak) rebound to x's values (strong) in one branch are
  // strong after it, as lax.cond's outputs are; weak where both ways are.
  TensorType t = stored_type(kernel("f32[8, 128]", {"n = 3", "a = broadcast_to(0.0, (8, 128))",
                                                    "when n > 2:", "    a = x[...] * 2.0", "b = a + 1.0"}));
  EXPECT_FALSE(t.weak);
  t = stored_type(kernel("f32[8, 128]", {"n = 3", "a = broadcast_to(0.0, (8, 128))", "when n > 2:",
                                         "    a = broadcast_to(1.0, (8, 128))", "b = a + 1.0"}));
  EXPECT_TRUE(t.weak);
  // Two shapes or dtypes after it are an error at the branch.
  const Diagnostic d = first_error(
      kernel("f32[8, 128]", {"n = 3", "a = x[...]", "when n > 2:", "    a = x[0:4, :]", "o[...] = x[...]"}));
  EXPECT_EQ(d.loc.line, 8);
  EXPECT_NE(d.message.find("'a' is f32[4, 128] after the 'when' body and f32[8, 128] where it does not run"),
            std::string::npos)
      << d.message;
}

TEST(BodyLanguageTyping, MasksCombineWithAndOrNot) {
  TensorType t = stored_type(
      kernel("bool[8, 128]", {"r = iota((8, 128), 0)", "c = iota((8, 128), 1)", "m = (r < c) | ~(c == 3)"}));
  EXPECT_EQ(t.dtype, DType::boolean);
  EXPECT_EQ(t.shape, (Dims{8, 128}));
}

TEST(BodyLanguageTyping, WhereBroadcastsItsThreeOperandsAndPromotesTheTwoValues) {
  TensorType t = stored_type(kernel("f32[8, 128]", {"c = iota((1, 128), 1) < 7", "v = where(c, x[...], 0)"}));
  EXPECT_EQ(t.dtype, DType::f32);
  EXPECT_EQ(t.shape, (Dims{8, 128}));
}

TEST(BodyLanguageTyping, AnAndOfFloatTensorsIsALocatedError) {
  Diagnostic d = first_error(kernel("f32[8, 128]", {"o[...] = x[...] & x[...]"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_EQ(d.loc.col, 25);
  EXPECT_NE(d.message.find("'&' takes bool or integer values"), std::string::npos) << d.message;
}

TEST(BodyLanguageTyping, AnIotaDimensionPastTheRankIsALocatedError) {
  Diagnostic d = first_error(kernel("f32[8, 128]", {"c = iota((8, 128), 2)"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_EQ(d.loc.col, 13);
  EXPECT_NE(d.message.find("iota dimension 2 is out of range for shape [8, 128]"), std::string::npos)
      << d.message;
}

TEST(BodyLanguageTyping, MathFunctionsOfIntegersAreF32AndAbsKeepsTheDtype) {
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = sqrt(n8[...])"})).dtype, DType::f32);
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = log2(x[...]) + exp2(x[...])"})).dtype, DType::f32);
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = abs(n8[...])"})).dtype, DType::i8);
}

TEST(BodyLanguageTyping, IntegersPromoteByJnpsLattice) {
  EXPECT_EQ(promote_dtype(DType::i8, false, DType::u8, false), DType::i16);
  EXPECT_EQ(promote_dtype(DType::i8, false, DType::i16, false), DType::i16);
  EXPECT_EQ(promote_dtype(DType::u8, false, DType::i32, false), DType::i32);
  EXPECT_EQ(promote_dtype(DType::boolean, false, DType::i8, false), DType::i8);
  EXPECT_EQ(promote_dtype(DType::boolean, false, DType::i32, true), DType::i32);
  EXPECT_EQ(stored_type(kernel("i8[8, 128]", {"v = n8[...] * 3 + 1"})).dtype, DType::i8);
}

TEST(BodyLanguageTyping, DotTransposesAndPreferredTypeChangeTheResult) {
  TensorType t = stored_type(kernel("f32[8, 8]", {"v = dot(x[...], x[...], trans_b=True)"}));
  EXPECT_EQ(t.shape, (Dims{8, 8}));
  t = stored_type(
      kernel("f32[8, 8]", {"v = dot(x[...], x[...], trans_a=True, preferred_element_type=bf16)"}));
  EXPECT_EQ(t.shape, (Dims{128, 128}));
  EXPECT_EQ(t.dtype, DType::bf16);
  Diagnostic d = first_error(kernel("f32[8, 8]", {"v = dot(x[...], x[...], trans_b=1)"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_NE(d.message.find("trans_b takes True or False"), std::string::npos) << d.message;
}

TEST(BodyLanguageTyping, KeepdimsKeepsTheReducedAxisWithExtentOne) {
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = max(x[...], axis=1, keepdims=True)"})).shape,
            (Dims{8, 1}));
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = sum(x[...], keepdims=True)"})).shape, (Dims{1, 1}));
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = min(x[...], axis=0)"})).shape, (Dims{128}));
}

TEST(BodyLanguageTyping, NewAxesGoWhereTheyAreWritten) {
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"m = sum(x[...], axis=1)", "v = m[:, None]"})).shape,
            (Dims{8, 1}));
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"m = sum(x[...], axis=1)", "v = m[None, :]"})).shape,
            (Dims{1, 8}));
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"m = x[...]", "v = m[..., None]"})).shape, (Dims{8, 128, 1}));
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"m = x[...]", "v = m[None, ..., 0:4]"})).shape,
            (Dims{1, 8, 4}));
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"m = x[...]", "v = m[2, None]"})).shape, (Dims{1, 128}));
}

TEST(BodyLanguageTyping, ReshapeAndBroadcastToCheckTheirShapes) {
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"v = reshape(x[...], (1024,))"})).shape, (Dims{1024}));
  EXPECT_EQ(stored_type(
                kernel("f32[8, 128]", {"m = sum(x[...], axis=1)", "v = broadcast_to(m[:, None], (8, 128))"}))
                .shape,
            (Dims{8, 128}));
  Diagnostic d = first_error(kernel("f32[8, 128]", {"v = reshape(x[...], (8, 100))"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_NE(d.message.find("cannot reshape [8, 128] (1024 elements) to [8, 100] (800)"), std::string::npos)
      << d.message;
  d = first_error(kernel("f32[8, 128]", {"v = broadcast_to(x[...], (8, 64))"}));
  EXPECT_NE(d.message.find("cannot broadcast [8, 128] to [8, 64]"), std::string::npos) << d.message;
  d = first_error(kernel("f32[8, 128]", {"v = reshape(x[...], 1024)"}));
  EXPECT_NE(d.message.find("takes a shape tuple"), std::string::npos) << d.message;
}

TEST(BodyLanguageTyping, AValueSubscriptPastItsExtentIsALocatedError) {
  Diagnostic d = first_error(kernel("f32[8, 128]", {"m = sum(x[...], axis=1)", "v = m[8]"}));
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_EQ(d.loc.col, 13);
  EXPECT_NE(d.message.find("index 8 is out of bounds for dim 0 (extent 8) of the value 'm'"),
            std::string::npos)
      << d.message;
}

TEST(BodyLanguageTyping, AParamTakesNoSubscriptsAsAnIntegerLocalTakesNone) {
  // (run's oracle rejected it; check took it for an array and verified.)
  Diagnostic d = first_error("kernel k:\n    param bs = 128\n    grid = (4,)\n"
                             "    in  x: f32[512]  block=(bs,)  index=(i) -> (i,)\n"
                             "    out o: f32[512]  block=(bs,)  index=(i) -> (i,)\n"
                             "    body:\n        o[...] = bs[0:bs]\n");
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_EQ(d.loc.col, 18);
  EXPECT_NE(d.message.find("'bs[0:bs]': 'bs' is a param, an integer, not an array"), std::string::npos)
      << d.message;
}

TEST(BodyLanguageTyping, IntegerFunctionsOfGridIdsStayIntegers) {
  expect_ok("kernel k:\n    grid = (4,)\n    in  x: f32[32, 8] block=(8, 8) index=(i) -> (i, 0)\n"
            "    out o: f32[32, 8] block=(8, 8) index=(i) -> (i, 0)\n    body:\n"
            "        r = abs(program_id(0) - 1)\n        when r < 2:\n            o[...] = x[...] * r\n");
}

// ------------------------------------------------------------------- loops

TEST(BodyLoopTyping, ACarriedLocalThatChangesShapeIsALocatedError) {
  Diagnostic d = first_error(
      kernel("f32[8, 128]", {"m = 0.0", "for t in range(4):", "    m = maximum(m, max(x[...], axis=1))"}));
  EXPECT_EQ(d.loc.line, 8);
  EXPECT_EQ(d.loc.col, 13);
  EXPECT_NE(
      d.message.find("'m' is carried across loop iterations: it is f32[] before the loop and f32[8] here"),
      std::string::npos)
      << d.message;
}

TEST(BodyLoopTyping, AWeakCarryBecomesStrongAsFori_loopPromotesIt) {
  TensorType t = stored_type(kernel("f32[8, 128]", {"acc = broadcast_to(0.0, (8, 32))", "for t in range(4):",
                                                    "    acc = acc + x[:, ds(t * 32, 32)]", "v = acc"}));
  EXPECT_EQ(t.shape, (Dims{8, 32}));
  EXPECT_FALSE(t.weak);
}

TEST(BodyLoopTyping, DsHasItsSizeAsExtentWhereItsStartIsNotKnown) {
  TensorType t = stored_type(kernel("f32[8, 128]", {"for t in range(4):", "    v = x[:, ds(t * 32, 32)]"}));
  EXPECT_EQ(t.shape, (Dims{8, 32}));
  Diagnostic d = first_error(kernel("f32[8, 128]", {"for t in range(4):", "    v = x[:, ds(t, 256)]"}));
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_NE(d.message.find("ds(?, 256) is out of bounds for dim 1 (extent 128)"), std::string::npos)
      << d.message;
}

TEST(BodyLoopTyping, ATritonDsWindowPastTheEndIsTypedAsItsSizeAndLeftToTheRules) {
  // Pallas does not check a Triton pl.ds window (its masked-off lanes touch
  // nothing): past the block it is its size, not a type error; a static
  // slice past the end still is one.
  std::string k = kernel("f32[8, 128]", {"v = x[:, ds(64, 128)]"});
  k.replace(k.find("kernel k:\n"), 10, "kernel k:\n    backend = triton\n");
  EXPECT_EQ(stored_type(k).shape, (Dims{8, 128}));
  std::string slice = kernel("f32[8, 128]", {"v = x[:, 64:192]"});
  slice.replace(slice.find("kernel k:\n"), 10, "kernel k:\n    backend = triton\n");
  EXPECT_NE(first_error(slice).message.find("slice 64:192 is out of bounds"), std::string::npos);
}

TEST(BodyLoopTyping, ALoopBoundMustBeAnInteger) {
  Diagnostic d =
      first_error(kernel("f32[8, 128]", {"s = sum(x[...])", "for t in range(s):", "    v = x[...]"}));
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_NE(d.message.find("a loop bound must be an integer"), std::string::npos) << d.message;
}

TEST(BodyLoopTyping, APrintedLoopWithDsReadsBackAsItself) {
  const std::string text =
      kernel("f32[8, 128]", {"for t in range(1, 4):", "    o[:, ds(t * 32, 32)] = x[:, ds(0, 32)]"});
  auto a = parse(SourceFile::from_string("t.pk", text));
  ASSERT_TRUE(a.file.has_value());
  auto b = parse(SourceFile::from_string("t.pk", print(*a.file)));
  ASSERT_TRUE(b.file.has_value()) << print(*a.file);
  EXPECT_EQ(*a.file, *b.file);
}

// An integer function of integers in a tensor expression is the integer
// every command evaluates (`x / cdiv(n, bs)` was "an integer function; a
// tensor value cannot use it" while `x / min(n, bs)` was typed as min's
// reduction of n over axis bs).
TEST(BodyLanguageTyping, AnIntegerFunctionOfIntegersInATensorExpressionIsAWeakInteger) {
  for (const std::string f : {"cdiv(9, 4)", "min(9, 4)", "max(9, 4)", "abs(0 - 3)", "where(1 < 2, 3, 4)"}) {
    expect_ok(kernel("f32[8, 128]", {"o[...] = x[...] / " + f}));
    const TensorType t = stored_type(kernel("f32[8, 128]", {"o[...] = x[...] / " + f}));
    EXPECT_EQ(t.dtype, DType::f32) << f;
    EXPECT_FALSE(t.weak) << f;
    EXPECT_EQ(t.shape, (Dims{8, 128})) << f;
  }
}

TEST(BodyLanguageTyping, AShapeTooLargeToHoldIsALocatedError) {
  Diagnostic d = first_error(kernel("f32[8, 128]", {"c = iota((65536, 65536), 0)"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_EQ(d.loc.col, 18);
  EXPECT_NE(d.message.find("has more than 2^31 elements"), std::string::npos) << d.message;
  // A shape with a zero extent has no elements: what is too large is the rest.
  Diagnostic z = first_error(kernel("f32[8, 128]", {"c = iota((2**32, 2**32, 0), 0)"}));
  EXPECT_NE(z.message.find("shape [4294967296, 4294967296, 0] has nonzero extents whose product passes 2^31"),
            std::string::npos)
      << z.message;
}

TEST(BodyLanguageSyntax, AMaskOperatorInAParamBoundKeepsItsParentheses) {
  const std::string text =
      "kernel k:\n    param N >= (1 | 2) <= (8 & 12)\n    out o: f32[N]\n    body:\n        o[...] = 0\n";
  auto a = parse(SourceFile::from_string("t.pk", text));
  ASSERT_TRUE(a.file.has_value());
  const std::string printed = print(*a.file);
  auto b = parse(SourceFile::from_string("t.pk", printed));
  ASSERT_TRUE(b.file.has_value()) << printed;
  EXPECT_EQ(*a.file, *b.file) << printed;
}

TEST(BodyTyping, TileHasTheRepeatedShapeAndAMismatchIsALocatedError) {
  const TensorType t = stored_type(kernel("f32[8, 256]", {"o[...] = tile(x[...], (1, 2))"}));
  EXPECT_EQ(t.shape, (Dims{8, 256}));
  EXPECT_EQ(print(parse_expr("tile(x[0, :], (8, 1))")), "tile(x[0, :], (8, 1))");
  Diagnostic d = first_error(kernel("f32[8, 128]", {"o[...] = tile(x[...], (2, 1)) + x[...]"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_NE(d.message.find("[16, 128]"), std::string::npos) << d.message;
}

TEST(BodyTyping, ConcatenateAddsUpItsAxisAndMismatchedPartsAreLocatedErrors) {
  EXPECT_EQ(stored_type(kernel("f32[8, 256]", {"o[...] = concatenate(x[...], x[...], axis=1)"})).shape,
            (Dims{8, 256}));
  EXPECT_EQ(stored_type(kernel("f32[16, 128]", {"o[...] = concatenate(x[...], x[...])"})).shape,
            (Dims{16, 128}));
  Diagnostic d =
      first_error(kernel("f32[8, 128]", {"v = concatenate(x[...], x[0:4, :], axis=1)", "o[...] = x[...]"}));
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_NE(d.message.find("equal extents except along axis 1"), std::string::npos) << d.message;
  d = first_error(kernel("f32[8, 128]", {"v = concatenate(x[...], n8[...], axis=0)", "o[...] = x[...]"}));
  EXPECT_NE(d.message.find("share a dtype"), std::string::npos) << d.message;
}

TEST(BodyTyping, AxisOperationsKeepOrDropTheirAxisAndNeedAConstantOne) {
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"s = 3", "o[...] = roll(x[...], s + 1, axis=1)"})).shape,
            (Dims{8, 128}));
  const TensorType a = stored_type(kernel("i32[8]", {"o[...] = argmax(x[...], axis=1)"}));
  EXPECT_EQ(a.shape, (Dims{8}));
  EXPECT_EQ(a.dtype, DType::i32);
  EXPECT_EQ(stored_type(kernel("f32[8, 128]", {"o[...] = cumsum(x[...], axis=0, reverse=True)"})).shape,
            (Dims{8, 128}));
  EXPECT_NE(first_error(kernel("f32[8, 128]", {"o[...] = flip(x[...])"})).message.find("flip takes axis="),
            std::string::npos);
  EXPECT_NE(
      first_error(kernel("f32[8, 128]", {"o[...] = flip(x[...], axis=2)"})).message.find("out of range"),
      std::string::npos);
  EXPECT_NE(first_error(kernel("f32[8, 128]", {"o[...] = roll(x[...], x[...], axis=0)"}))
                .message.find("roll's shift"),
            std::string::npos);
  EXPECT_NE(first_error(kernel("f32[8, 128]", {"o[...] = roll(x[...], 1, axis=0, stride=1)"}))
                .message.find("together"),
            std::string::npos);
  EXPECT_EQ(print(parse_expr("roll(x[...], 1, axis=1, stride=2, stride_axis=0)")),
            "roll(x[...], 1, axis=1, stride=2, stride_axis=0)");
}

TEST(BodyTyping, ShiftsTakeIntegers) {
  const TensorType t =
      stored_type(kernel("i32[8, 128]", {"o[...] = shift_right_logical(cast(x[...], i32), 4)"}));
  EXPECT_EQ(t.dtype, DType::i32);
  EXPECT_EQ(stored_type(kernel("i8[8, 128]", {"o[...] = shift_left(n8[...], 1)"})).dtype, DType::i8);
  EXPECT_NE(first_error(kernel("f32[8, 128]", {"o[...] = shift_left(x[...], 1)"}))
                .message.find("shifts take integers"),
            std::string::npos);
}
