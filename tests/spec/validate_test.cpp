// One test per diagnostic: each bad input gets its own located message.
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/validate.hpp"

#include <gtest/gtest.h>

#include <limits>

using namespace pipecheck::spec;

namespace {

struct Err {
  int line = 0, col = 0;
  std::string message;
  std::string rendered;
};

Err first_error(const std::string &text) {
  SourceFile src = SourceFile::from_string("bad.pk", text);
  auto r = parse_and_validate(src);
  if (r.file || r.errors.empty()) {
    ADD_FAILURE() << "expected an error for:\n" << text;
    return {};
  }
  const Diagnostic &d = r.errors.front();
  return Err{d.loc.line, d.loc.col, d.message, render(src, d)};
}

const std::string kHead = "kernel k:\n    grid = (4,)\n";
const std::string kBody = "    body:\n        o[...] = x[...]\n";

} // namespace

// ------------------------------------------------------------------ syntax

TEST(SyntaxError, RendersFileLineColumnTheLineAndACaret) {
  Err e = first_error("kernel k:\n    grid = (4,\n    out o: f32[8]\n");
  EXPECT_EQ(e.rendered.rfind("bad.pk:", 0), 0u);
  EXPECT_NE(e.rendered.find(": error: "), std::string::npos);
  EXPECT_NE(e.rendered.find("^"), std::string::npos);
}

TEST(SyntaxError, UnknownKernelItemIsNamed) {
  Err e = first_error("kernel k:\n    grdi = (4,)\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.col, 5);
  EXPECT_NE(e.message.find("unknown kernel item 'grdi'"), std::string::npos);
}

TEST(SyntaxError, UnexpectedCharacterIsLocated) {
  Err e = first_error("kernel k:\n    grid = (4 $ 2,)\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.col, 15);
  EXPECT_NE(e.message.find("unexpected character '$'"), std::string::npos);
}

TEST(SyntaxError, BinaryBytesAreReportedAsBytes) {
  Err e = first_error(std::string("kernel k:\n    \x01\xff\n"));
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.message.find("byte 0x01"), std::string::npos);
}

TEST(SyntaxError, MixedTabsAndSpacesInIndentation) {
  Err e = first_error("kernel k:\n    out o: f32[8]\n\tbody:\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.message.find("inconsistent indentation"), std::string::npos);
}

TEST(SyntaxError, UnindentToAnUnknownLevel) {
  Err e =
      first_error("kernel k:\n    out o: f32[8]\n    body:\n        o[...] = zeros\n      o[...] = zeros\n");
  EXPECT_EQ(e.line, 5);
  EXPECT_NE(e.message.find("unindent"), std::string::npos);
}

TEST(SyntaxError, UnclosedBracketAtEndOfFileIsReportedAtTheBracket) {
  Err e = first_error("kernel k:\n    grid = (4,\n    in x: f32[8]\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.col, 12);
  EXPECT_NE(e.message.find("'(' is never closed: the file ends inside it"), std::string::npos) << e.message;
}

TEST(SyntaxError, AClosingBracketOfAnotherKindNamesTheOneItCloses) {
  Err e = first_error("kernel k:\n    grid = (4,]\n");
  EXPECT_EQ(e.col, 15);
  EXPECT_NE(e.message.find("']' closes the '(' at line 2, column 12, which needs ')'"), std::string::npos)
      << e.message;
}

TEST(SyntaxError, UnmatchedClosingBracket) {
  Err e = first_error("kernel k:\n    grid = 4)\n");
  EXPECT_NE(e.message.find("unmatched ')'"), std::string::npos);
}

TEST(SyntaxError, UnknownDtype) {
  Err e = first_error("kernel k:\n    out o: f33[8]\n");
  EXPECT_EQ(e.col, 12);
  EXPECT_NE(e.message.find("unknown dtype 'f33'"), std::string::npos);
}

TEST(SyntaxError, UnknownDimensionSemantics) {
  Err e = first_error("kernel k:\n    grid = (2,)\n    dimension_semantics = (paralel,)\n");
  EXPECT_NE(e.message.find("unknown dimension semantics 'paralel'"), std::string::npos);
}

TEST(SyntaxError, UnknownOperandOption) {
  Err e = first_error("kernel k:\n    out o: f32[8] blok=(8,)\n");
  EXPECT_NE(e.message.find("unknown operand option 'blok'"), std::string::npos);
}

TEST(SyntaxError, DuplicateOperandOption) {
  Err e = first_error("kernel k:\n    out o: f32[8] block=(8,) block=(8,)\n");
  EXPECT_NE(e.message.find("duplicate option 'block'"), std::string::npos);
}

TEST(SyntaxError, KeywordUsedAsAName) {
  Err e = first_error("kernel in:\n");
  EXPECT_NE(e.message.find("'in' is a keyword"), std::string::npos);
}

TEST(SyntaxError, ElseWithoutIf) {
  Err e = first_error("pipeline p:\n    else:\n        x = 1\n");
  EXPECT_NE(e.message.find("'else' without a matching 'if'"), std::string::npos);
}

TEST(SyntaxError, ChainedComparison) {
  Err e = first_error("pipeline p:\n    x = 1 < 2 < 3\n");
  EXPECT_NE(e.message.find("chained comparisons"), std::string::npos);
}

TEST(SyntaxError, IntegerLiteralTooLarge) {
  Err e = first_error("pipeline p:\n    x = 99999999999999999999\n");
  EXPECT_NE(e.message.find("too large"), std::string::npos);
}

TEST(SyntaxError, TwoToTheSixtyThreeIsALiteralOnlyNegated) {
  // -2**63 is the printer's text for the least int64 (a folded `(0 - 2**62) * 2`):
  // it reads back as that literal; without the minus it does not fit.
  Err e = first_error("pipeline p:\n    x = 9223372036854775808\n");
  EXPECT_NE(e.message.find("too large"), std::string::npos);
  auto r = parse(SourceFile::from_string("t.pk", "pipeline p:\n    x = -9223372036854775808\n"));
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  const auto &p = std::get<Program>(r.file->units.at(0));
  const auto &l = std::get<Let>(p.body.at(0).kind);
  EXPECT_EQ(l.value.op, Op::Int);
  EXPECT_EQ(l.value.int_value, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(print(l.value), "-9223372036854775808");
}

TEST(SyntaxError, ExpressionNestedTooDeeply) {
  std::string deep = "pipeline p:\n    x = " + std::string(500, '(') + "1" + std::string(500, ')') + "\n";
  Err e = first_error(deep);
  EXPECT_NE(e.message.find("nested too deeply"), std::string::npos);
}

TEST(SyntaxError, ExpressionNestingCountsWhatTheMessageNames) {
  // A level is a bracket, a chain's operator or a unary operator (not the
  // parser's own recursion, which took four per bracket): 190 brackets
  // parse, and so do 95 of them each under a minus.
  auto parses = [](const std::string &value) {
    return parse_and_validate(SourceFile::from_string("ok.pk", "pipeline p:\n    x = " + value + "\n"))
        .file.has_value();
  };
  EXPECT_TRUE(parses(std::string(190, '(') + "1" + std::string(190, ')')));
  std::string minus;
  for (int i = 0; i < 95; ++i)
    minus += "-(";
  EXPECT_TRUE(parses(minus + "1" + std::string(95, ')')));
  EXPECT_TRUE(parses(std::string(150, '-') + "1"));
  Err e = first_error("pipeline p:\n    x = " + std::string(150, '-') + "(" + std::string(60, '-') + "1)\n");
  EXPECT_NE(e.message.find("nested too deeply (more than 200 levels"), std::string::npos) << e.message;
}

TEST(SyntaxError, BlocksNestedTooDeeply) {
  std::string text = "pipeline p:\n    param N >= 1\n";
  for (int d = 1; d <= 80; ++d)
    text += std::string(4 * d, ' ') + "if N > 0:\n";
  text += std::string(4 * 81, ' ') + "x = 1\n";
  Err e = first_error(text);
  EXPECT_NE(e.message.find("nested too deeply"), std::string::npos);
}

TEST(SyntaxError, StoreIntoSomethingThatIsNotARef) {
  Err e = first_error("pipeline p:\n    1 + 2 = 3\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.message.find("expected a statement"), std::string::npos);
}

// ------------------------------------------------------------ validation

TEST(ValidationError, DuplicateOperandName) {
  Err e = first_error(kHead + "    in x: f32[8]\n    out x: f32[8]\n" + kBody);
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("duplicate name 'x'"), std::string::npos);
}

TEST(ValidationError, DuplicateUnitName) {
  Err e = first_error("kernel k:\n    out o: f32[8]\n    body:\n        o[...] = zeros\n"
                      "kernel k:\n    out o: f32[8]\n    body:\n        o[...] = zeros\n");
  EXPECT_EQ(e.line, 5);
  EXPECT_NE(e.message.find("duplicate unit name 'k'"), std::string::npos);
}

TEST(ValidationError, ParamUsedBeforeItIsDefined) {
  Err e = first_error("kernel k:\n    param a = b * 2\n    param b = 4\n    out o: f32[8]\n    body:\n       "
                      " o[...] = zeros\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.col, 15);
  EXPECT_NE(e.message.find("'b' is used in the value of param 'a' before it is defined"), std::string::npos);
}

TEST(ValidationError, EmptyParamRange) {
  Err e = first_error("pipeline p:\n    param N >= 4 <= 2\n");
  EXPECT_NE(e.message.find("empty range"), std::string::npos);
}

TEST(ValidationError, UnknownNameInShape) {
  Err e = first_error(kHead + "    in x: f32[m]\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("unknown name 'm'"), std::string::npos);
}

TEST(ValidationError, NonPositiveGridExtent) {
  Err e =
      first_error("kernel k:\n    grid = (4 - 4,)\n    out o: f32[8]\n    body:\n        o[...] = zeros\n");
  EXPECT_NE(e.message.find("a grid extent must be positive, got 0"), std::string::npos);
}

TEST(ValidationError, NonPositiveArrayExtent) {
  Err e = first_error(kHead + "    in x: f32[0]\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("must be positive"), std::string::npos);
}

TEST(ValidationError, NonPositiveBlockExtent) {
  Err e = first_error(kHead + "    in x: f32[8] block=(-2,) index=(i) -> (i)\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("a block extent of operand 'x' must be positive"), std::string::npos);
}

TEST(ValidationError, BlockRankDiffersFromArrayRank) {
  Err e =
      first_error(kHead + "    in x: f32[8, 8] block=(8,) index=(i) -> (i, 0)\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("the block of operand 'x' has rank 1 but the array has rank 2"),
            std::string::npos);
}

TEST(ValidationError, IndexLambdaArityDiffersFromGridRank) {
  Err e = first_error(kHead + "    in x: f32[8] block=(2,) index=(i, j) -> (i)\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("takes 2 grid indices but the grid has rank 1"), std::string::npos);
}

TEST(ValidationError, IndexResultRankDiffersFromArrayRank) {
  Err e =
      first_error(kHead + "    in x: f32[8, 8] block=(2, 8) index=(i) -> (i)\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("returns 1 block indices but the array has rank 2"), std::string::npos);
}

TEST(ValidationError, UnknownNameInIndexMap) {
  Err e = first_error(kHead + "    in x: f32[8] block=(2,) index=(i) -> (j)\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("unknown name 'j' in the index map of operand 'x'"), std::string::npos);
}

TEST(ValidationError, AnIndexMapMayClampWithWhereMinimumAndMaximumButNotCallTensorFunctions) {
  auto ok = parse_and_validate(SourceFile::from_string(
      "ok.pk",
      kHead + "    in x: f32[8] block=(2,) index=(i) -> (where(i > 2, minimum(i, 3), maximum(i - 1, 0)))\n" +
          "    out o: f32[8] block=(2,) index=(i) -> (i)\n" + kBody));
  EXPECT_TRUE(ok.file) << (ok.errors.empty() ? "" : ok.errors[0].message);
  Err e =
      first_error(kHead + "    in x: f32[8] block=(2,) index=(i) -> (exp(i))\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("'exp' is not an integer function (cdiv, min, max, minimum, maximum, abs, where) "
                           "in the index map of operand 'x'"),
            std::string::npos)
      << e.message;
}

TEST(ValidationError, DimensionSemanticsRankDiffersFromGrid) {
  Err e = first_error("kernel k:\n    grid = (2, 2)\n    dimension_semantics = (parallel,)\n    out o: "
                      "f32[8]\n    body:\n        o[...] = zeros\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.message.find("dimension_semantics has 1 entries but the grid has rank 2"), std::string::npos);
}

TEST(ValidationError, UnknownTarget) {
  Err e =
      first_error("kernel k:\n    target = tpu_v9\n    out o: f32[8]\n    body:\n        o[...] = zeros\n");
  EXPECT_NE(e.message.find("unknown target 'tpu_v9'"), std::string::npos);
}

TEST(ValidationError, DelayReleaseNotBelowMaxConcurrentSteps) {
  Err e = first_error("kernel k:\n    max_concurrent_steps = 2\n    delay_release = 2\n    out o: f32[8]\n   "
                      " body:\n        o[...] = zeros\n");
  EXPECT_NE(e.message.find("must be smaller than max_concurrent_steps"), std::string::npos);
}

TEST(ValidationError, KernelWithoutOutput) {
  Err e = first_error("kernel k:\n    in x: f32[8]\n    body:\n        x[...] = zeros\n");
  EXPECT_NE(e.message.find("has no 'out' operand"), std::string::npos);
}

TEST(ValidationError, KernelWithoutBody) {
  Err e = first_error("kernel k:\n    out o: f32[8]\n");
  EXPECT_NE(e.message.find("has no body"), std::string::npos);
}

TEST(ValidationError, ScratchWithABlock) {
  Err e = first_error(
      "kernel k:\n    out o: f32[8]\n    scratch s: f32[8] block=(8,)\n    body:\n        o[...] = zeros\n");
  EXPECT_NE(e.message.find("scratch 's' has no block"), std::string::npos);
}

TEST(ValidationError, AnyMemorySpaceWithABlock) {
  Err e = first_error(
      kHead + "    in x: f32[8] block=(2,) index=(i) -> (i) memory_space=any\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("gets no window"), std::string::npos);
}

TEST(ValidationError, LookaheadOnAnOutput) {
  Err e = first_error(kHead + "    in x: f32[8]\n    out o: f32[8] buffered=(2, lookahead)\n" + kBody);
  EXPECT_NE(e.message.find("lookahead applies to inputs only"), std::string::npos);
}

TEST(ValidationError, AliasOfAnUnknownInput) {
  Err e = first_error(kHead + "    in x: f32[8]\n    out o: f32[8]\n    alias y -> o\n" + kBody);
  EXPECT_NE(e.message.find("unknown input 'y' in alias"), std::string::npos);
}

TEST(ValidationError, AliasBetweenDifferentShapes) {
  Err e = first_error(kHead + "    in x: f32[16]\n    out o: f32[8]\n    alias x -> o\n" + kBody);
  EXPECT_NE(e.message.find("differ in shape"), std::string::npos);
}

TEST(ValidationError, AliasBetweenDifferentDtypes) {
  Err e = first_error(kHead + "    in x: bf16[8]\n    out o: f32[8]\n    alias x -> o\n" + kBody);
  EXPECT_NE(e.message.find("differ in dtype"), std::string::npos);
}

TEST(ValidationError, BodyUsesAnUnknownOperand) {
  Err e = first_error(kHead + "    out o: f32[8]\n    body:\n        o[...] = y[...]\n");
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.col, 18);
  EXPECT_NE(e.message.find("unknown operand 'y'"), std::string::npos);
}

TEST(ValidationError, BodyStoresIntoALocal) {
  Err e = first_error(
      kHead +
      "    out o: f32[8]\n    body:\n        t = zeros\n        t[...] = zeros\n        o[...] = t\n");
  EXPECT_NE(e.message.find("cannot store into 't': it is not a buffer"), std::string::npos);
}

TEST(ValidationError, BodyLoadsAnOperandWithoutSubscript) {
  Err e = first_error(kHead + "    in x: f32[8]\n    out o: f32[8]\n    body:\n        o[...] = x\n");
  EXPECT_NE(e.message.find("load the block with 'x[...]'"), std::string::npos);
}

TEST(ValidationError, ProgramIdOfAnAxisTheGridLacks) {
  Err e = first_error(
      kHead + "    out o: f32[8]\n    body:\n        when program_id(1) == 0:\n            o[...] = zeros\n");
  EXPECT_NE(e.message.find("program_id(1) names no axis of a grid of rank 1"), std::string::npos);
}

TEST(ValidationError, UnknownFunction) {
  Err e = first_error(kHead + "    out o: f32[8]\n    body:\n        o[...] = erfinv(o[...])\n");
  EXPECT_NE(e.message.find("unknown function 'erfinv'"), std::string::npos);
}

TEST(ValidationError, WrongArgumentCount) {
  Err e = first_error(kHead + "    out o: f32[8]\n    body:\n        o[...] = dot(o[...])\n");
  EXPECT_NE(e.message.find("'dot' takes 2 positional arguments, got 1"), std::string::npos);
}

TEST(ValidationError, CastToSomethingThatIsNotADtype) {
  Err e = first_error(kHead + "    out o: f32[8]\n    body:\n        o[...] = cast(o[...], float)\n");
  EXPECT_NE(e.message.find("is a dtype"), std::string::npos);
}

TEST(ValidationError, TooManySubscriptsForTheBlock) {
  Err e = first_error(kHead + "    in x: f32[8, 8] block=(None, 8) index=(i) -> (i, 0)\n    out o: f32[8]\n  "
                              "  body:\n        o[...] = x[0, 0]\n");
  EXPECT_NE(e.message.find("'x' has 2 subscripts but its block has rank 1"), std::string::npos);
}

TEST(ValidationError, SlotIndexOnABufferWithoutSlots) {
  Err e =
      first_error("pipeline p:\n    hbm A: f32[4, 8]\n    sram X: f32[8]\n    copy_in_start(A[0], X[0])\n");
  EXPECT_EQ(e.line, 4);
  EXPECT_EQ(e.col, 27);
  EXPECT_NE(e.message.find("'X' has no slots"), std::string::npos);
}

TEST(ValidationError, SlotRingUsedWithoutASlot) {
  Err e = first_error("pipeline p:\n    hbm A: f32[8]\n    sram X[2]: f32[8]\n    copy_in_start(A, X)\n");
  EXPECT_NE(e.message.find("'X' is a ring of slots; name a slot"), std::string::npos);
}

TEST(ValidationError, ConstantSlotOutsideTheRing) {
  Err e = first_error(
      "pipeline p:\n    hbm A: f32[4, 8]\n    sram X[2]: f32[8]\n    copy_in_start(A[0], X[2])\n");
  EXPECT_NE(e.message.find("slot 2 is outside 'X' (2 slots)"), std::string::npos);
}

TEST(ValidationError, CopyBetweenDifferentShapes) {
  Err e = first_error(
      "pipeline p:\n    hbm A: f32[4, 16]\n    sram X[2]: f32[8]\n    copy_in_start(A[0], X[0])\n");
  EXPECT_NE(e.message.find("copy between different shapes: [16] and [8]"), std::string::npos);
}

TEST(ValidationError, ACopyOfAPartialBlockIntoTheCornerOfItsSlotIsNoError) {
  // As `lower` prints a ragged last block: the slot's other rows are padding.
  auto r = parse_and_validate(
      SourceFile::from_string("t.pk", "pipeline p:\n    hbm A: f32[12, 8]\n    sram X[2]: f32[8, 8]\n"
                                      "    copy_in_start(A[8:12, :], X[0])\n    copy_in_wait(X[0])\n"));
  EXPECT_TRUE(r.errors.empty()) << r.errors.at(0).message;
}

TEST(ValidationError, CopyBetweenDifferentDtypes) {
  Err e = first_error(
      "pipeline p:\n    hbm A: f32[4, 8]\n    sram X[2]: bf16[8]\n    copy_in_start(A[0], X[0])\n");
  EXPECT_NE(e.message.find("copy between different dtypes: f32 and bf16"), std::string::npos);
}

TEST(ValidationError, CopyInFromSramIsTheWrongDirection) {
  Err e = first_error("pipeline p:\n    hbm A: f32[8]\n    sram X[2]: f32[8]\n    copy_in_start(X[0], A)\n");
  EXPECT_NE(e.message.find("the source of copy_in_start must be an HBM array"), std::string::npos);
}

TEST(ValidationError, StoreIntoHbmDirectly) {
  Err e = first_error("pipeline p:\n    hbm A: f32[4, 8]\n    A[0] = zeros\n");
  EXPECT_NE(e.message.find("cannot store into HBM array 'A' directly"), std::string::npos);
}

TEST(ValidationError, StoreIntoALoopVariable) {
  Err e = first_error("pipeline p:\n    hbm A: f32[8]\n    for i in range(2):\n        i[0] = zeros\n");
  EXPECT_NE(e.message.find("cannot store into 'i': it is not a buffer"), std::string::npos);
}

TEST(ValidationError, RebindingABuffer) {
  Err e = first_error("pipeline p:\n    sram T: f32[8]\n    T = zeros\n");
  EXPECT_NE(e.message.find("cannot rebind buffer 'T'"), std::string::npos);
}

TEST(ValidationError, UnknownNameInAPipeline) {
  Err e = first_error(
      "pipeline p:\n    hbm A: f32[4, 8]\n    sram X[2]: f32[8]\n    copy_in_start(A[j], X[0])\n");
  EXPECT_NE(e.message.find("unknown name 'j'"), std::string::npos);
}

TEST(ValidationError, WgmmaIntoSomethingThatIsNotAnAccumulator) {
  Err e = first_error("pipeline p:\n    smem a[2]: bf16[64, 64]\n    wgmma(a[0], a[0], a[1])\n");
  EXPECT_NE(e.message.find("the accumulator of wgmma must be an acc buffer"), std::string::npos);
}

TEST(ValidationError, NegativeWgmmaWait) {
  Err e = first_error("pipeline p:\n    wgmma_wait(-1)\n");
  EXPECT_NE(e.message.find("wgmma_wait takes a count >= 0"), std::string::npos);
}

TEST(ValidationError, WhenInAPipeline) {
  Err e = first_error("pipeline p:\n    param N >= 1\n    when N > 1:\n        x = 1\n");
  EXPECT_NE(e.message.find("'when' belongs in kernel bodies"), std::string::npos);
}

TEST(ValidationError, APipelineCopyInAKernelBody) {
  for (const char *stmt : {"copy_out_wait(o[...])", "copy_in_start(x[...], o[...])"}) {
    Err e = first_error(
        "kernel k:\n    grid = (2,)\n    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
        "    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n        " +
        std::string(stmt) + "\n        o[...] = x[...]\n");
    EXPECT_EQ(e.line, 6) << stmt;
    EXPECT_EQ(e.col, 9) << stmt;
    EXPECT_NE(e.message.find("belong in pipelines"), std::string::npos) << e.message;
  }
}

TEST(ValidationError, HbmArrayWithSlots) {
  Err e = first_error("pipeline p:\n    hbm A[2]: f32[8]\n");
  EXPECT_NE(e.message.find("an HBM array has no slots"), std::string::npos);
}

TEST(SyntaxError, KeepOnACopyInWaitSaysItAppliesToCopyOutWait) {
  Err e = first_error("pipeline p:\n    hbm A: f32[8]\n    sram X[1]: f32[8]\n"
                      "    copy_in_start(A, X[0])\n    copy_in_wait(X[0], keep=True)\n");
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.col, 24);
  EXPECT_NE(e.message.find("keep= applies to copy_out_wait"), std::string::npos) << e.message;
}

TEST(SyntaxError, LongOperatorChainCountsAsNesting) {
  std::string text = "pipeline p:\n    x = 1";
  for (int i = 0; i < 5000; ++i)
    text += " + 1";
  Err e = first_error(text + "\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.message.find("nested too deeply"), std::string::npos);
  // It says how to write a long sum so that it parses.
  EXPECT_NE(e.message.find("split a long sum into parenthesized parts"), std::string::npos) << e.message;
}

// ------------------------------------------- arithmetic: sizes, zero, overflow

TEST(ArithmeticValidation, ASizeThatOverflowsInt64IsAnErrorOnTheOperandLine) {
  Err e = first_error("kernel k:\n    in  x: f32[2**31, 2**31]\n    out o: f32[8]\n" + kBody);
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.col, 5);
  EXPECT_NE(e.message.find("integer overflow in the size of operand 'x'"), std::string::npos) << e.message;
  Err f = first_error("kernel k:\n    in  x: f32[8]\n    out o: f32[2**62, 2**62]\n" + kBody);
  EXPECT_EQ(f.line, 3);
  EXPECT_NE(f.message.find("integer overflow in the size of operand 'o'"), std::string::npos) << f.message;
}

TEST(ArithmeticValidation, ARingWhoseSlotsTimesShapeOverflowsIsAnError) {
  Err e = first_error("pipeline p:\n    sram X[2**8]: f32[2**30, 2**30]\n    X[0] = zeros\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.message.find("integer overflow in the size of 'X'"), std::string::npos) << e.message;
}

TEST(ArithmeticValidation, DivisionByZeroInTheGridIsLocatedAtTheOperator) {
  Err e = first_error("kernel k:\n    grid = (8 // 0,)\n    in  x: f32[64] block=(8,) index=(i) -> (i,)\n"
                      "    out o: f32[64] block=(8,) index=(i) -> (i,)\n" +
                      kBody);
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.col, 15);
  EXPECT_EQ(e.message, "division by zero in the grid");
}

TEST(ArithmeticValidation, DivisionByZeroInAnIndexMapIsLocatedAtTheOperator) {
  for (const std::string op : {"i // 0", "i % 0", "cdiv(i, 0)", "i // (N - 4)"}) {
    Err e = first_error("kernel k:\n    param N = 4\n    grid = (8,)\n"
                        "    in  x: f32[64] block=(8,) index=(i) -> (" +
                        op + ",)\n    out o: f32[64] block=(8,) index=(i) -> (i,)\n" + kBody);
    EXPECT_EQ(e.line, 4) << op;
    EXPECT_EQ(e.col, op.rfind("cdiv", 0) == 0 ? 45 : 47) << op;
    EXPECT_NE(e.message.find("division by zero in the index map of operand 'x'"), std::string::npos)
        << e.message;
  }
}

TEST(ArithmeticValidation, OverflowInAConstantGridOrShapeIsAnError) {
  Err g = first_error("kernel k:\n    grid = (2**62 + 2**62,)\n    out o: f32[8]\n" + kBody);
  EXPECT_EQ(g.line, 2);
  EXPECT_EQ(g.col, 19);
  EXPECT_EQ(g.message, "integer overflow in the grid");
  Err s = first_error("kernel k:\n    out o: f32[2**64]\n" + kBody);
  EXPECT_EQ(s.line, 2);
  EXPECT_NE(s.message.find("integer overflow in the shape of operand 'o'"), std::string::npos) << s.message;
  Err p = first_error("kernel k:\n    param N = 2**62 * 4\n    out o: f32[8]\n" + kBody);
  EXPECT_EQ(p.line, 2);
  EXPECT_EQ(p.message, "integer overflow in the value of param 'N'");
}

TEST(ArithmeticValidation, ADivisionBySymbolicParamStaysUnknownAndIsNoError) {
  SourceFile src = SourceFile::from_string("ok.pk", "kernel k:\n    param N >= 1\n    grid = (8,)\n"
                                                    "    in  x: f32[64] block=(8,) index=(i) -> (i // N,)\n"
                                                    "    out o: f32[64] block=(8,) index=(i) -> (i,)\n" +
                                                        kBody);
  auto r = parse_and_validate(src);
  EXPECT_TRUE(r.file) << (r.errors.empty() ? "" : render(src, r.errors.front()));
}

TEST(ValidationError, AnAccScratchNeedsAMosaicGpuTarget) {
  Err e = first_error("kernel k:\n    target = tpu_v5e\n    out o: f32[8, 8]\n"
                      "    scratch acc: f32[8, 8] memory_space=acc\n    body:\n        o[...] = acc[...]\n");
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("needs a Mosaic GPU target"), std::string::npos);
  // Without a `target =` line, --target decides at check/run/lower time
  // (tests/verifier/kernel_test.cpp).
}

TEST(ValidationError, AccMemorySpaceOnAnInputOrOutput) {
  Err e = first_error("kernel k:\n    target = h100\n    in x: f32[8, 8] memory_space=acc\n"
                      "    out o: f32[8, 8]\n    body:\n        o[...] = x[...]\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.message.find("applies to scratch only"), std::string::npos);
}

TEST(ValidationError, AnAccScratchIsATwoDimensionalF32F16OrI32Tile) {
  Err dtype =
      first_error("kernel k:\n    target = h100\n    out o: f32[8, 8]\n"
                  "    scratch acc: bf16[8, 8] memory_space=acc\n    body:\n        o[...] = acc[...]\n");
  EXPECT_NE(dtype.message.find("holds f32, f16 or i32"), std::string::npos);
  Err rank = first_error("kernel k:\n    target = h100\n    out o: f32[8]\n"
                         "    scratch acc: f32[8] memory_space=acc\n    body:\n        o[...] = acc[...]\n");
  EXPECT_NE(rank.message.find("is 2-D"), std::string::npos);
}

TEST(SyntaxError, AnUnknownMemorySpaceListsAcc) {
  Err e = first_error(kHead + "    in x: f32[8] memory_space=regs\n    out o: f32[8]\n" + kBody);
  EXPECT_NE(e.message.find("hbm or acc"), std::string::npos);
}

// ------------------------------------------------------------ backend = triton

namespace {
const std::string kTritonOps = "    in  x: f32[8]  block=(2,)  index=(i) -> (i,)\n"
                               "    out o: f32[8]  block=(2,)  index=(i) -> (i,)\n";
}

TEST(TritonBackend, AnUnknownBackendIsNamedWithTheOneThereIs) {
  Err e = first_error(kHead + "    backend = mosaic\n" + kTritonOps + kBody);
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.col, 15);
  EXPECT_NE(e.message.find("unknown backend 'mosaic'; expected triton"), std::string::npos) << e.message;
}

TEST(TritonBackend, DimensionSemanticsAreMosaicsAndRefused) {
  Err e = first_error(kHead + "    dimension_semantics = (arbitrary,)\n    backend = triton\n" + kTritonOps +
                      kBody);
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.message.find("dimension_semantics is Mosaic's"), std::string::npos) << e.message;
}

TEST(TritonBackend, MosaicSettingsAreRefused) {
  for (const std::string s : {"target = h200", "vmem_limit_bytes = 1024", "max_concurrent_steps = 2"}) {
    Err e = first_error(kHead + "    backend = triton\n    " + s + "\n" + kTritonOps + kBody);
    EXPECT_EQ(e.line, 4) << s;
    EXPECT_NE(e.message.find("is a Mosaic setting; a Triton kernel has none"), std::string::npos)
        << e.message;
  }
}

TEST(TritonBackend, AGridOfMoreThanThreeDimsIsAcceptedAsPallasFoldsItsLeadingDims) {
  // (jax.vmap of a 3-D Triton call prepends a fourth: Pallas' Triton lowering
  // folds the leading dims into the launch grid's first.)
  SourceFile src =
      SourceFile::from_string("t.pk", "kernel k:\n    grid = (1, 1, 1, 4)\n    backend = triton\n"
                                      "    in  x: f32[8]  block=(2,)  index=(a, b, c, i) -> (i,)\n"
                                      "    out o: f32[8]  block=(2,)  index=(a, b, c, i) -> (i,)\n" +
                                          kBody);
  auto errs = parse_and_validate(src).errors;
  EXPECT_TRUE(errs.empty()) << errs.front().message;
}

TEST(TritonBackend, ADuplicateBackendLineIsRefused) {
  Err e = first_error(kHead + "    backend = triton\n    backend = triton\n" + kTritonOps + kBody);
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("duplicate 'backend'"), std::string::npos) << e.message;
}

TEST(ValidationError, BufferedOnAMosaicGpuOperandIsRefusedAsPallasRefusesIt) {
  Err e = first_error("kernel k:\n    grid = (8,)\n    target = h100\n"
                      "    in  x: f32[256, 128]  block=(32, 128)  index=(i) -> (i, 0)  buffered=3\n"
                      "    out o: f32[256, 128]  block=(32, 128)  index=(i) -> (i, 0)\n"
                      "    body:\n        o[...] = x[...] + 1\n");
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("max_concurrent_steps"), std::string::npos) << e.message;
}

TEST(CommitSmem, IsAMosaicGpuKernelStatementAndPrintsBack) {
  const std::string gpu = "kernel k:\n    grid = (4,)\n    target = h100\n"
                          "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                          "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                          "    body:\n        o[...] = x[...]\n        commit_smem()\n";
  auto ok = parse_and_validate(SourceFile::from_string("ok.pk", gpu));
  ASSERT_TRUE(ok.file) << ok.errors.at(0).message;
  const auto &k = std::get<KernelSpec>(ok.file->units.at(0));
  EXPECT_TRUE(std::holds_alternative<CommitSmem>(k.body.at(1).kind));
  EXPECT_NE(print(*ok.file).find("        commit_smem()\n"), std::string::npos);
  std::string tpu = gpu;
  tpu.replace(tpu.find("h100"), 4, "tpu_v5e");
  Err e = first_error(tpu);
  EXPECT_EQ(e.line, 8);
  EXPECT_EQ(e.message,
            "commit_smem() is Mosaic GPU's (plgpu.commit_smem); target tpu_v5e has no async proxy");
  Err p = first_error("pipeline p:\n    smem X[1]: f32[8]\n    commit_smem()\n");
  EXPECT_EQ(p.line, 3);
  EXPECT_NE(p.message.find("commit_smem() belongs in a Mosaic GPU kernel body"), std::string::npos)
      << p.message;
}

TEST(ArithmeticValidation, OverflowInARollsShiftOrStrideIsAnError) {
  for (const std::string roll :
       {"roll(x[...], 2**63 - 1 + 1, axis=1)", "roll(x[...], 1, axis=1, stride=2**64, "
                                               "stride_axis=0)"}) {
    Err e = first_error(
        "kernel k:\n    in  x: f32[8, 128]\n    out o: f32[8, 128]\n    body:\n        o[...] = " + roll +
        "\n");
    EXPECT_EQ(e.line, 5) << roll;
    EXPECT_NE(e.message.find("integer overflow in roll's "), std::string::npos) << e.message;
  }
}
