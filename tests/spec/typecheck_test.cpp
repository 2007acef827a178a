// Body typing: every body expression has a shape and dtype by the executor's
// rules, and a body without one is a located error before anything runs.
#include "spec/parse.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

// A kernel `k` with one input x, one output o and a one-line body (line 5).
std::string kernel(const std::string &x, const std::string &o, const std::string &body) {
  return "kernel k:\n    in  x: " + x + "\n    out o: " + o + "\n    body:\n        " + body + "\n";
}

std::vector<Diagnostic> errors_of(const std::string &text) {
  SourceFile src = SourceFile::from_string("t.pk", text);
  return parse_and_validate(src).errors;
}

struct Err {
  int line = 0, col = 0;
  std::string message;
};

Err first_error(const std::string &text) {
  auto errs = errors_of(text);
  if (errs.empty()) {
    ADD_FAILURE() << "expected a type error for:\n" << text;
    return {};
  }
  return Err{errs.front().loc.line, errs.front().loc.col, errs.front().message};
}

void expect_well_typed(const std::string &text) {
  auto errs = errors_of(text);
  for (const auto &e : errs)
    ADD_FAILURE() << e.loc.line << ":" << e.loc.col << ": " << e.message << "\nin:\n" << text;
}

KernelSpec parse_kernel(const std::string &text) {
  auto r = parse(SourceFile::from_string("t.pk", text));
  EXPECT_TRUE(r.file.has_value());
  return std::get<KernelSpec>(r.file->units.at(0));
}

} // namespace

// ------------------------------------------------------------ the four repros

TEST(BodyTyping, AReductionAxisPastTheRankIsAnError) {
  Err e = first_error(kernel("f32[128, 64]", "f32[128, 64]", "o[...] = sum(x[...], axis=5)"));
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.col, 18);
  EXPECT_NE(e.message.find("axis 5 is out of range for shape [128, 64]"), std::string::npos) << e.message;
}

TEST(BodyTyping, ADotWhoseContractedDimsDifferIsAnError) {
  Err e = first_error(kernel("f32[128, 64]", "f32[128, 128]", "o[...] = dot(x[...], x[...])"));
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.col, 18);
  EXPECT_NE(e.message.find("contracted dims differ (64 vs 128)"), std::string::npos) << e.message;
}

TEST(BodyTyping, StoringAValueOfAnotherShapeIsAnError) {
  Err e = first_error(kernel("f32[128, 64]", "f32[64, 128]", "o[...] = x[...]"));
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.col, 9);
  EXPECT_NE(e.message.find("a value of shape [128, 64] does not fit a block of shape [64, 128]"),
            std::string::npos)
      << e.message;
}

TEST(BodyTyping, ASlicePastTheBlockNamesTheDimAndTheBlockExtent) {
  Err e = first_error("kernel k:\n    grid = (8,)\n"
                      "    in  x: f32[1024, 64]  block=(128, 64)  index=(i) -> (i, 0)\n"
                      "    out o: f32[2048, 64]  block=(256, 64)  index=(i) -> (i, 0)\n"
                      "    body:\n        o[...] = x[0:256, :]\n");
  EXPECT_EQ(e.line, 6);
  EXPECT_EQ(e.col, 18);
  EXPECT_NE(e.message.find("slice 0:256 is out of bounds for dim 0 (extent 128) of the block of 'x'"),
            std::string::npos)
      << e.message;
}

// --------------------------------------------------------- the other classes

TEST(BodyTyping, AFloatUsedAsAnIndexIsADtypeError) {
  Err e = first_error("kernel k:\n    in  x: f32[128, 64]\n    out o: f32[64]\n    body:\n"
                      "        t = 0.5\n        o[...] = x[t, :]\n");
  EXPECT_EQ(e.line, 6);
  EXPECT_NE(e.message.find("a subscript must be an integer, but 't' is a f32[] value"), std::string::npos)
      << e.message;
}

TEST(BodyTyping, ABlockValueAsAWhenConditionIsADtypeError) {
  Err e = first_error("kernel k:\n    in  x: f32[128, 64]\n    out o: f32[128, 64]\n    body:\n"
                      "        when x[0, 0] > 0:\n            o[...] = x[...]\n");
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.col, 22); // the operator
  EXPECT_NE(e.message.find("a 'when' condition must be an integer"), std::string::npos) << e.message;
}

TEST(BodyTyping, OperandsThatDoNotBroadcastAreAnError) {
  Err e = first_error("kernel k:\n    in  x: f32[128, 64]\n    in  y: f32[128, 32]\n    out o: f32[128, 64]\n"
                      "    body:\n        o[...] = x[...] + y[...]\n");
  EXPECT_EQ(e.line, 6);
  EXPECT_EQ(e.col, 25); // the operator
  EXPECT_NE(e.message.find("shapes [128, 64] and [128, 32] do not broadcast"), std::string::npos)
      << e.message;
}

TEST(BodyTyping, StoringAHigherRankValueIsAnError) {
  Err e = first_error(kernel("f32[4, 128, 64]", "f32[128, 64]", "o[...] = x[...]"));
  EXPECT_EQ(e.line, 5);
  EXPECT_NE(e.message.find("cannot store f32[4, 128, 64] into o[...] (f32[128, 64])"), std::string::npos)
      << e.message;
}

TEST(BodyTyping, AnAccumulationThatGrowsTheTargetIsAnError) {
  Err e = first_error(kernel("f32[4, 64]", "f32[64]", "o[...] += x[...]"));
  EXPECT_EQ(e.line, 5);
  EXPECT_NE(e.message.find("does not fit a block of shape [64]"), std::string::npos) << e.message;
}

TEST(BodyTyping, ALocalCarriesItsTypeToWhereItIsUsed) {
  Err e = first_error("kernel k:\n    in  x: f32[128, 64]\n    out o: f32[128, 64]\n    body:\n"
                      "        s = sum(x[...], axis=1)\n        o[...] = dot(x[...], s)\n");
  EXPECT_EQ(e.line, 6);
  EXPECT_NE(e.message.find("dot of [128, 64] and [128]"), std::string::npos) << e.message;
}

// Comparisons of blocks are bool tensors (masks); `and` stays integer-only.
TEST(BodyTyping, ALogicalAndOfBlocksIsNotAValue) {
  Err e = first_error(kernel("f32[128, 64]", "f32[128, 64]", "o[...] = x[...] > 0 and x[...] < 1"));
  EXPECT_EQ(e.line, 5);
  EXPECT_NE(e.message.find("is not supported on tensors"), std::string::npos) << e.message;
}

TEST(BodyTyping, FullTakesAScalar) {
  Err e = first_error(kernel("f32[128, 64]", "f32[128, 64]", "o[...] = full(x[...])"));
  EXPECT_NE(e.message.find("full() takes a scalar, not f32[128, 64]"), std::string::npos) << e.message;
}

// ------------------------------------------------------------- good bodies

TEST(BodyTyping, WellTypedBodiesPass) {
  const std::string head = "kernel k:\n    grid = (4, 2)\n";
  // Squeezed dims, dot of blocks, accumulation, guards, locals, scalars.
  expect_well_typed(head + "    in  a: f32[2, 512, 256]  block=(None, 128, 256)  index=(i, j) -> (0, i, 0)\n"
                           "    in  b: f32[256, 256]  block=(256, 128)  index=(i, j) -> (0, j)\n"
                           "    out o: f32[512, 256]  block=(128, 128)  index=(i, j) -> (i, j)\n"
                           "    scratch acc: f32[128, 128]\n"
                           "    body:\n"
                           "        when program_id(1) == 0:\n"
                           "            acc[...] = zeros\n"
                           "        acc[...] += dot(a[...], b[...])\n"
                           "        s = sum(a[...], axis=1)\n"
                           "        r = max(acc[...], axis=-1)\n"
                           "        t = acc[...] * 2 + s - r\n"
                           "        row = program_id(0) * 2 + 1\n"
                           "        o[...] = maximum(t, full(0.5)) / num_programs(1)\n"
                           "        o[0, :] = exp(cast(acc[row, :], bf16))\n"
                           "        o[1:3, ...] = transpose(acc[0:128, 0:2])\n");
}

TEST(BodyTyping, ScalarsAndLowerRankValuesBroadcastIntoAStore) {
  expect_well_typed(kernel("f32[128, 64]", "f32[128, 64]", "o[...] = sum(x[...], axis=0)"));
  expect_well_typed(kernel("f32[128, 64]", "f32[128, 64]", "o[...] = 3"));
  expect_well_typed(kernel("f32[128, 64]", "f32[128, 64]", "o[...] = x[0:1, :] + x[:, 0:1]"));
  expect_well_typed(kernel("i32[128, 64]", "f32[128, 64]", "o[...] = x[...] / 2"));
  expect_well_typed(kernel("f32[128, 64]", "i32[128, 64]", "o[...] += x[...]"));
}

TEST(BodyTyping, ANegativeIndexIsOutOfBoundsNotCountedFromTheEnd) {
  Err e = first_error(kernel("f32[128, 64]", "f32[64]", "o[...] = x[-1, :]"));
  EXPECT_EQ(e.line, 5);
  EXPECT_NE(e.message.find("index -1 is out of bounds for dim 0 (extent 128)"), std::string::npos)
      << e.message;
}

// -------------------------------------------------------------- params

TEST(BodyTyping, BlockShapesUseTheParamValuesAndTheirOverrides) {
  const std::string text = "kernel k:\n    param bm = 128\n    grid = (8,)\n"
                           "    in  x: f32[2048, 64]  block=(bm, 64)  index=(i) -> (i, 0)\n"
                           "    out o: f32[2048, 64]  block=(256, 64)  index=(i) -> (i, 0)\n"
                           "    body:\n        o[...] = x[0:256, :]\n";
  Err e = first_error(text);
  EXPECT_EQ(e.line, 7);
  EXPECT_NE(e.message.find("extent 128"), std::string::npos) << e.message;
  KernelSpec k = parse_kernel(text);
  EXPECT_TRUE(typecheck(k, {{"bm", 256}}).empty());
  EXPECT_FALSE(typecheck(k, {{"bm", 64}}).empty());
}

TEST(BodyTyping, SymbolicExtentsAreNotRejectedButBoundOnesAre) {
  const std::string text = "kernel k:\n    param N >= 1\n"
                           "    in  x: f32[N, 64]\n    out o: f32[256, 64]\n"
                           "    body:\n        o[...] = x[0:256, :] + sum(x[...], axis=0)\n";
  expect_well_typed(text);
  KernelSpec k = parse_kernel(text);
  EXPECT_TRUE(typecheck(k, {{"N", 512}}).empty());
  auto errs = typecheck(k, {{"N", 128}});
  ASSERT_FALSE(errs.empty());
  EXPECT_NE(errs[0].message.find("slice 0:256 is out of bounds for dim 0 (extent 128)"), std::string::npos);
  // Ranks are checked even where extents are unknown.
  Err e = first_error("kernel k:\n    param N >= 1\n    in  x: f32[N, 64]\n    out o: f32[64]\n"
                      "    body:\n        o[...] = sum(x[...], axis=2)\n");
  EXPECT_NE(e.message.find("axis 2 is out of range for shape [?, 64]"), std::string::npos) << e.message;
}

// ------------------------------------------------------------ the rules

TEST(TypingRules, BroadcastingFollowsNumpyWithUnknownExtentsAccepted) {
  EXPECT_EQ(broadcast_dims({128, 1}, {64}).value, (Dims{128, 64}));
  EXPECT_EQ(broadcast_dims({}, {4, 2}).value, (Dims{4, 2}));
  EXPECT_FALSE(broadcast_dims({128, 64}, {128, 32}).ok());
  EXPECT_EQ(broadcast_dims({kUnknownExtent, 64}, {128, 64}).value, (Dims{128, 64}));
}

TEST(TypingRules, PromotionIsJnps) {
  EXPECT_EQ(promote_dtype(DType::bf16, false, DType::f32, true), DType::bf16);
  EXPECT_EQ(promote_dtype(DType::i32, false, DType::f32, true), DType::f32);
  EXPECT_EQ(promote_dtype(DType::bf16, false, DType::f16, false), DType::f32);
  EXPECT_EQ(promote_dtype(DType::i8, false, DType::bf16, false), DType::bf16);
  TensorType i{DType::i32, false, {4}};
  EXPECT_EQ(elementwise_type(ElemOp::div, i, i).value.dtype, DType::f32);
  EXPECT_EQ(dot_type(TensorType{DType::bf16, false, {8, 4}}, TensorType{DType::bf16, false, {4}}).value.dtype,
            DType::f32);
}

TEST(TypingRules, SubscriptsDropIndexedDimsAndCheckKnownBounds) {
  using K = Subscript::Kind;
  Subscripted s = subscript(
      {8, 128, 64}, {Subscript{K::index, true, true, 2, {}}, Subscript{K::ellipsis, true, true, {}, {}}});
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(s.shape, (Dims{128, 64}));
  EXPECT_FALSE(s.dims[0].kept);
  Subscripted bad = subscript({8, 128}, {Subscript{K::index, true, true, 8, {}}});
  EXPECT_TRUE(bad.out_of_bounds);
  Subscripted dyn = subscript({8, 128}, {Subscript{K::slice, true, true, std::nullopt, std::nullopt}});
  EXPECT_TRUE(dyn.ok());
  EXPECT_EQ(dyn.shape, (Dims{kUnknownExtent, 128}));
  EXPECT_FALSE(subscript({8}, {Subscript{}, Subscript{}}).ok());
}

// ------------------------------------------------------------ pipelines

namespace {
// A pipeline that copies A into slot 0 of X, then computes `stmt` (line 7)
// and writes Y[0] back to B.
std::string pipeline(const std::string &stmt, const std::string &y = "f32[8, 128]") {
  return "pipeline p:\n    hbm  A: f32[8, 128]\n    hbm  B: " + y +
         "\n    sram X[2]: f32[8, 128]\n    sram Y[1]: " + y +
         "\n    copy_in_start(A, X[0])\n    copy_in_wait(X[0])\n    " + stmt +
         "\n    copy_out_start(Y[0], B)\n    copy_out_wait(Y[0])\n";
}
} // namespace

TEST(PipelineTyping, AComputeStatementIsTypedAsAKernelBodysStatementIs) {
  expect_well_typed(pipeline("Y[0] = X[0] * 2.0 + reshape(sum(X[0], axis=1), (8, 1))"));
  expect_well_typed(pipeline("Y[0] = dot(X[0], transpose(X[0]))", "f32[8, 8]"));
  expect_well_typed(pipeline("Y[0, 0:4, :] = X[0, 4:8, :]"));
}

TEST(PipelineTyping, AStoreOfAnotherShapeADotOfUnequalDimsAndAnAxisPastTheRankAreLocatedErrors) {
  Err store = first_error(pipeline("Y[0] = X[0]", "f32[8, 64]"));
  EXPECT_EQ(store.line, 8);
  EXPECT_EQ(store.col, 5);
  EXPECT_NE(store.message.find("cannot store f32[8, 128] into Y[0] (f32[8, 64])"), std::string::npos)
      << store.message;
  Err dot = first_error(pipeline("Y[0] = dot(X[0], X[0])"));
  EXPECT_EQ(dot.line, 8);
  EXPECT_NE(dot.message.find("contracted dims differ (128 vs 8)"), std::string::npos) << dot.message;
  Err axis = first_error(pipeline("Y[0] = sum(X[0], axis=3)"));
  EXPECT_NE(axis.message.find("axis 3 is out of range for shape [8, 128]"), std::string::npos)
      << axis.message;
  Err slot = first_error(pipeline("Y[0] = X[0, 0:16, :]"));
  EXPECT_NE(slot.message.find("of 'X', f32[2, 8, 128]"), std::string::npos) << slot.message;
}

TEST(PipelineTyping, ABufferByBareNameIsItsWholeValueAndAWgmmasShapesMustAgree) {
  // `X[0] + T` of a [64, 64] T beside a [8, 128] slot does not broadcast
  // (the executor read it so; check took the bare name as untyped).
  const std::string bare = "pipeline p:\n    hbm  A: f32[8, 128]\n    sram X[1]: f32[8, 128]\n"
                           "    sram T: f32[64, 64]\n    copy_in_start(A, X[0])\n    copy_in_wait(X[0])\n"
                           "    T[...] = zeros\n    X[0] = X[0] + T\n    copy_out_start(X[0], A)\n"
                           "    copy_out_wait(X[0])\n";
  Err e = first_error(bare);
  EXPECT_EQ(e.line, 8);
  EXPECT_NE(e.message.find("shapes [8, 128] and [64, 64] do not broadcast"), std::string::npos) << e.message;
  auto wgmma = [](const std::string &a_shape) {
    return "pipeline w:\n    hbm  A: bf16[" + a_shape +
           "]\n    hbm  B: bf16[64, 128]\n"
           "    hbm  O: f32[128, 128]\n    smem a[1]: bf16[" +
           a_shape +
           "]\n    smem b[1]: bf16[64, 128]\n"
           "    smem o[1]: f32[128, 128]\n    acc  c: f32[128, 128]\n    copy_in_start(A, a[0])\n"
           "    copy_in_start(B, b[0])\n    copy_in_wait(a[0])\n    copy_in_wait(b[0])\n"
           "    wgmma(c, a[0], b[0])\n    wgmma_wait(0)\n    o[0] = c\n    copy_out_start(o[0], O)\n"
           "    copy_out_wait(o[0])\n";
  };
  expect_well_typed(wgmma("128, 64"));
  Err rows = first_error(wgmma("129, 64"));
  EXPECT_EQ(rows.line, 13);
  EXPECT_NE(rows.message.find("the product is f32[129, 128] but the accumulator c is f32[128, 128]"),
            std::string::npos)
      << rows.message;
  Err inner = first_error(wgmma("128, 65"));
  EXPECT_NE(inner.message.find("contracted dims differ"), std::string::npos) << inner.message;
}

TEST(BodyTyping, ATritonLoadOrStoreOfANonPowerOf2SizeIsALocatedError) {
  // Pallas' Triton lowering (_check_tensor_size) rejects it; a scalar is 2^0.
  auto triton = [](const std::string &window) {
    return "kernel k:\n    grid = (4,)\n    backend = triton\n    in  x: f32[128]  block=(128,)  index=(i) "
           "-> (0,)\n"
           "    out o: f32[128]  block=(128,)  index=(i) -> (0,)\n    body:\n        o[ds(program_id(0) * "
           "32, " +
           window + ")] = x[ds(program_id(0) * 32, " + window + ")] * 2.0\n";
  };
  expect_well_typed(triton("32"));
  expect_well_typed(triton("1"));
  Err e = first_error(triton("24"));
  EXPECT_EQ(e.line, 7);
  EXPECT_NE(
      e.message.find("accesses 24 elements (shape [24]): the Pallas Triton lowering loads and stores only "
                     "arrays whose size is a power of 2"),
      std::string::npos)
      << e.message;
  // Mosaic has no such rule: the same body on a TPU types.
  std::string tpu = triton("24");
  tpu.replace(tpu.find("    backend = triton\n"), 21, "");
  expect_well_typed(tpu);
}

TEST(BodyTyping, ASliceWhoseSizeComesFromALoopVariableIsTypedAtTheLoopsFirstAndLastIterations) {
  const std::string body = "for t in range(1, 3):\n            o[0:t, :] = x[0:2 * t, :] + 1";
  Err e = first_error(kernel("f32[8, 128]", "f32[8, 128]", body));
  EXPECT_EQ(e.line, 6);
  EXPECT_NE(e.message.find("a value of shape [2, 128] does not fit a block of shape [1, 128] (at t = 1)"),
            std::string::npos)
      << e.message;
  // Equal sizes at every iteration are well typed.
  expect_well_typed(
      kernel("f32[8, 128]", "f32[8, 128]", "for t in range(1, 3):\n            o[0:t, :] = x[0:t, :]"));
}

TEST(BodyTyping, ASubscriptOutOfBoundsAtALoopsBoundIterationIsLeftToTheRules) {
  // t = 0 reads rows -8:0, but only under `t > 0`: the rules decide that.
  expect_well_typed(kernel("f32[32, 128]", "f32[32, 128]",
                           "for t in range(0, 4):\n            when t > 0:\n"
                           "                o[ds((t - 1) * 8, 8), :] = x[ds((t - 1) * 8, 8), :]"));
}

TEST(BodyTyping, AShapeThatDependsOnTheGridPointIsAnError) {
  // Pallas' shapes are static: program_id in an extent, directly, through an
  // integer local or through a loop variable whose bounds name it.
  for (const std::string body : {"o[...] = broadcast_to(1.0, (program_id(0) + 7, 128))",
                                 "n = program_id(0) * 8\n        o[...] = iota((n, 128), 0)",
                                 "for t in range(program_id(0), 2):\n            o[...] = "
                                 "reshape(iota((1024,), 0), (t * 8, 128))"}) {
    const std::string text =
        "kernel k:\n    grid = (2,)\n    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> "
        "(i, 0)\n    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
        "        " +
        body + "\n";
    Err e = first_error(text);
    EXPECT_NE(e.message.find("depends on the grid point (program_id): a shape is static in Pallas"),
              std::string::npos)
        << e.message;
  }
  // A grid-dependent start with a static size is fine.
  expect_well_typed(
      "kernel k:\n    grid = (2,)\n    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
      "    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
      "        n = program_id(0) * 0 + 8\n        o[0:4, :] = broadcast_to(1.0, (4, 128))\n");
}
