// The padding flow of the race machine: masks are evaluated element by
// element, so a `where` that keeps a partial block's padding out of a value
// leaves it defined, and a kernel whose masks do so verifies.
#include "verifier/races/padding.hpp"

#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

using namespace pipecheck;
using verifier::races::PaddingFlow;
using verifier::races::PadValue;
using verifier::races::RefPadding;
using Box = spec::StepBox;

namespace {

spec::KernelSpec kernel(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("t.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

/// The values of a kernel body's lets, by name (the last binding wins).
std::map<std::string, spec::Expr> lets_of(const std::string &body) {
  const spec::KernelSpec k = kernel("kernel t:\n"
                                    "    param n = 6\n"
                                    "    grid = (1,)\n"
                                    "    in  x: f32[8]  block=(8,)  index=(i) -> (0,)\n"
                                    "    in  y: f32[4, 8]  block=(4, 8)  index=(i) -> (0, 0)\n"
                                    "    out o: f32[8]  block=(8,)  index=(i) -> (0,)\n"
                                    "    body:\n" +
                                    body + "        o[...] = x[...]\n");
  std::map<std::string, spec::Expr> out;
  for (const auto &s : k.body)
    if (const auto *l = std::get_if<spec::Let>(&s.kind)) out.insert_or_assign(l->name, l->value);
  return out;
}

/// x: f32[8] whose elements 6 and 7 are padding; y: f32[4, 8] whose last
/// two columns are.
PaddingFlow flow() {
  return PaddingFlow([](const std::string &n) { return n == "x" || n == "y"; },
                     [](const spec::Expr &e) {
                       if (e.name == "x") return RefPadding{{8}, {Box{{6, 8}}}};
                       return RefPadding{{4, 8}, {Box{{0, 4}, {6, 8}}}};
                     });
}

std::vector<int> padded(const PadValue &v) {
  std::vector<int> out;
  if (!v.any) return out;
  if (v.bits.empty()) return {-1};
  for (std::size_t i = 0; i < v.bits.size(); ++i)
    if (v.bits[i]) out.push_back(static_cast<int>(i));
  return out;
}

const spec::Env kEnv{{"n", 6}};

} // namespace

TEST(PaddingFlow, AWhereWhoseIotaMaskSelectsOnlyDefinedElementsHoldsNoPadding) {
  auto lets = lets_of("        mask = iota((8,), 0) < n\n"
                      "        a = where(mask, x[...], 0.0)\n");
  PaddingFlow f = flow();
  f.bind("mask", lets.at("mask"), kEnv);
  const PadValue a = f.eval(lets.at("a"), kEnv);
  EXPECT_FALSE(a.any);
  ASSERT_TRUE(a.shape);
  EXPECT_EQ(*a.shape, (verifier::races::Shape{8}));
}

TEST(PaddingFlow, AMaskThatLetsOnePaddingElementThroughKeepsExactlyThatElement) {
  auto lets = lets_of("        a = where(iota((8,), 0) <= n, x[...], 0.0)\n");
  const PadValue a = flow().eval(lets.at("a"), kEnv);
  EXPECT_EQ(padded(a), (std::vector<int>{6}));
}

TEST(PaddingFlow, MasksCombineWithAndOrAndNotElementByElement) {
  auto lets = lets_of("        lo = iota((8,), 0) >= 2\n"
                      "        m = ~(lo & (iota((8,), 0) < n))\n"
                      "        a = where(m, 0.0, x[...])\n"
                      "        b = where((iota((8,), 0) < 1) | (iota((8,), 0) > 6), x[...], 0.0)\n");
  PaddingFlow f = flow();
  f.bind("lo", lets.at("lo"), kEnv);
  f.bind("m", lets.at("m"), kEnv);
  EXPECT_FALSE(f.eval(lets.at("a"), kEnv).any);
  EXPECT_EQ(padded(f.eval(lets.at("b"), kEnv)), (std::vector<int>{7}));
}

TEST(PaddingFlow, ABooleanAndWithAKnownMaskHoldsPaddingOnlyWhereTheMaskLetsItThrough) {
  // `(x > 0.5) & mask` is false wherever the mask is, whatever x holds.
  auto lets = lets_of("        a = (x[...] > 0.5) & (iota((8,), 0) < n)\n"
                      "        b = (iota((8,), 0) <= n) & (x[...] > 0.5)\n"
                      "        c = (x[...] > 0.5) & (x[...] < 2.0)\n");
  PaddingFlow f = flow();
  EXPECT_FALSE(f.eval(lets.at("a"), kEnv).any);
  EXPECT_EQ(padded(f.eval(lets.at("b"), kEnv)), (std::vector<int>{6}));
  EXPECT_EQ(padded(f.eval(lets.at("c"), kEnv)), (std::vector<int>{6, 7}));
}

TEST(PaddingFlow, AMaskOfAbsAndSignIsDecidedElementByElement) {
  // jnp's integer floor division of an iota as the export writes it
  // (masked_store's `iota // group` in ragged paged attention): r // 2 with
  // the sign correction, 3 for elements 6 and 7.
  auto lets = lets_of("        r = iota((8,), 0)\n"
                      "        q = where((r < 0) == (2 < 0), abs(r) // abs(2), -(abs(r) // abs(2)))\n"
                      "        neg = (sign(r) != 1) & (r != 0)\n"
                      "        a = where((q < 3) & ~neg, x[...], 0.0)\n"
                      "        b = where(q <= 3, x[...], 0.0)\n");
  PaddingFlow f = flow();
  for (const char *n : {"r", "q", "neg"})
    f.bind(n, lets.at(n), kEnv);
  EXPECT_FALSE(f.eval(lets.at("a"), kEnv).any);
  EXPECT_EQ(padded(f.eval(lets.at("b"), kEnv)), (std::vector<int>{6, 7}));
}

TEST(PaddingFlow, AMaskThatReadsDataIsNotDecidedAndKeepsThePaddingOfBothSides) {
  auto lets = lets_of("        a = where(x[...] > 0.0, x[...], 0.0)\n"
                      "        b = where(iota((8,), 0) < n, 0.0, x[...])\n");
  PaddingFlow f = flow();
  EXPECT_EQ(padded(f.eval(lets.at("a"), kEnv)), (std::vector<int>{6, 7}));
  EXPECT_EQ(padded(f.eval(lets.at("b"), kEnv)), (std::vector<int>{6, 7}));
}

TEST(PaddingFlow, CastsIndexingAndTwoDimensionalMasksKeepPaddingElementByElement) {
  auto lets = lets_of("        c = cast(where(iota((8,), 0) <= n, x[...], 0.0), bf16)\n"
                      "        cols = iota((4, 8), 1)\n"
                      "        w = where(cols < n, y[...], 0.0)\n"
                      "        v = where(cols[0:1, :] < 7, y[...], 0.0)\n"
                      "        r = sum(y[...], axis=1)\n"
                      "        t = r[:, None]\n");
  PaddingFlow f = flow();
  EXPECT_EQ(padded(f.eval(lets.at("c"), kEnv)), (std::vector<int>{6}));
  f.bind("cols", lets.at("cols"), kEnv);
  EXPECT_FALSE(f.eval(lets.at("w"), kEnv).any);
  EXPECT_EQ(padded(f.eval(lets.at("v"), kEnv)), (std::vector<int>{6, 14, 22, 30}));
  f.bind("r", lets.at("r"), kEnv);
  const PadValue t = f.eval(lets.at("t"), kEnv);
  ASSERT_TRUE(t.shape);
  EXPECT_EQ(*t.shape, (verifier::races::Shape{4, 1}));
  EXPECT_EQ(padded(t), (std::vector<int>{0, 1, 2, 3}));
}

TEST(PaddingFlow, AReductionSpreadsPaddingAlongItsAxisOnly) {
  auto lets = lets_of("        r = sum(y[...], axis=1)\n"
                      "        c = max(y[...], axis=0, keepdims=True)\n"
                      "        s = sum(x[...], axis=0)\n");
  PaddingFlow f = flow();
  EXPECT_EQ(padded(f.eval(lets.at("r"), kEnv)), (std::vector<int>{0, 1, 2, 3}));
  const PadValue c = f.eval(lets.at("c"), kEnv);
  ASSERT_TRUE(c.shape);
  EXPECT_EQ(*c.shape, (verifier::races::Shape{1, 8}));
  EXPECT_EQ(padded(c), (std::vector<int>{6, 7}));
  EXPECT_TRUE(f.eval(lets.at("s"), kEnv).any);
}

TEST(PaddingFlow, ADotSpreadsPaddingOnlyAlongTheRowsAndColumnsThatContractIt) {
  auto lets = lets_of("        d = dot(y[...], y[...], trans_b=True)\n"
                      "        e = dot(y[...], y[...], trans_a=True)\n");
  PaddingFlow f = flow();
  // y @ y^T contracts the padded columns: everything.
  EXPECT_EQ(padded(f.eval(lets.at("d"), kEnv)).size(), 16u);
  // y^T @ y: rows 6, 7 (from y^T) and columns 6, 7 (from y) of 8 x 8.
  const auto e = padded(f.eval(lets.at("e"), kEnv));
  EXPECT_EQ(e.size(), 8u * 8u - 6u * 6u);
}

TEST(PaddingFlow, PaddingLandsInTheStoreTargetWhereTheValueHoldsIt) {
  PadValue v{verifier::races::Shape{8}, true, {0, 0, 0, 0, 0, 0, 1, 1}};
  // A ref keeping dim 1 of a (1, 8) place at offset 16.
  auto boxes = verifier::races::padding_in_target(v, Box{{3, 4}, {16, 24}}, {1});
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0], (Box{{3, 4}, {22, 24}}));
  // Unknown shape: all of the target.
  PadValue u{std::nullopt, true, {}};
  EXPECT_EQ(verifier::races::padding_in_target(u, Box{{0, 4}}, {0}), (std::vector<Box>{Box{{0, 4}}}));
}

TEST(PaddingFlow, PaddedBoxesMergeRowsWithTheSamePaddedColumns) {
  std::vector<std::uint8_t> bits(4 * 8, 0);
  for (int r = 0; r < 4; ++r)
    bits[r * 8 + 6] = bits[r * 8 + 7] = 1;
  bits[3 * 8 + 0] = 1;
  auto boxes = verifier::races::padded_boxes(PadValue{verifier::races::Shape{4, 8}, true, bits});
  EXPECT_EQ(boxes, (std::vector<Box>{Box{{0, 3}, {6, 8}}, Box{{3, 4}, {0, 1}}, Box{{3, 4}, {6, 8}}}));
}

namespace {

const char *kMaskedRows = R"(kernel masked_rows:
    param rows = 4
    param n = 100
    param bn = 128
    grid = (rows,)
    in  x: f32[rows, n]  block=(None, bn)  index=(r) -> (r, 0)
    out o: f32[rows, n]  block=(None, bn)  index=(r) -> (r, 0)
    body:
        mask = iota((bn,), 0) < n
        row = where(mask, x[...], -inf)
        o[...] = row - max(row, axis=0)
)";

verifier::Verdict check_text(const std::string &text) {
  return verifier::check(kernel(text), verifier::CheckOptions{});
}

std::string replaced(std::string s, const std::string &from, const std::string &to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

} // namespace

TEST(PaddingFlowKernels, AMaskedReductionOverAPartialBlockVerifies) {
  const auto v = check_text(kMaskedRows);
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
}

TEST(PaddingFlowKernels, AMaskOffByOneCopiesPaddingOutAsUninitializedRead) {
  const auto v = check_text(replaced(kMaskedRows, "< n", "<= n"));
  ASSERT_EQ(v.status, verifier::Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::uninitialized_read);
  EXPECT_EQ(v.findings[0].loc.line, 7);
}

TEST(PaddingFlowKernels, ACopyOutOfPaddingNamesTheStoreThatFirstPutItIntoABuffer) {
  // The padded columns reach a scratch at line 8, then the output at line 9.
  const auto v = check_text(R"(kernel through_scratch:
    param n = 100
    grid = (2,)
    in  x: f32[2, n]  block=(None, 128)  index=(r) -> (r, 0)
    out o: f32[2, 1]  block=(None, 1)  index=(r) -> (r, 0)
    scratch s: f32[128]
    body:
        s[...] = x[...] * 2.0
        o[...] = reshape(sum(s[...], axis=0), (1,))
)");
  ASSERT_EQ(v.status, verifier::Status::violation);
  ASSERT_EQ(v.findings.size(), 1u);
  const auto &f = v.findings[0];
  EXPECT_EQ(f.rule, verifier::Rule::uninitialized_read);
  const auto first = std::find_if(f.notes.begin(), f.notes.end(), [](const spec::Diagnostic &d) {
    return d.message.find("the undefined data first stored here") != std::string::npos;
  });
  ASSERT_NE(first, f.notes.end());
  EXPECT_EQ(first->loc.line, 8);
}

TEST(PaddingFlowKernels, ARaggedOutputWhoseLastBlockIsWrittenOnlyInBoundsVerifies) {
  const auto v = check_text(R"(kernel tail:
    param n = 100
    param bn = 32
    grid = (cdiv(n, bn),)
    in  x: f32[n]  block=(bn,)  index=(i) -> (i,)
    out o: f32[n]  block=(bn,)  index=(i) -> (i,)
    body:
        when program_id(0) < cdiv(n, bn) - 1:
            o[...] = x[...]
        when program_id(0) == cdiv(n, bn) - 1:
            o[0:4] = x[0:4]
)");
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
}

TEST(PaddingFlow, ADotGeneralSpreadsContractedPaddingAndKeepsBatchPaddingInItsBatch) {
  auto lets = lets_of("        d = dot_general(y[...], y[...], contract=((1,), (1,)))\n"
                      "        e = dot_general(y[...], y[...], contract=((0,), (0,)))\n"
                      "        b = dot_general(y[...], y[...], contract=((0,), (0,)), batch=((1,), (1,)))\n");
  PaddingFlow f = flow();
  // As dot with trans_b / trans_a: contracting the padded columns taints all.
  EXPECT_EQ(padded(f.eval(lets.at("d"), kEnv)).size(), 16u);
  EXPECT_EQ(padded(f.eval(lets.at("e"), kEnv)).size(), 8u * 8u - 6u * 6u);
  // Columns as the batch: only batch elements 6 and 7 are padded.
  const PadValue b = f.eval(lets.at("b"), kEnv);
  ASSERT_TRUE(b.shape);
  EXPECT_EQ(*b.shape, (verifier::races::Shape{8}));
  EXPECT_EQ(padded(b), (std::vector<int>{6, 7}));
}

TEST(PaddingFlow, AMaskKeepsTheValueOfItsBindWhenTheLocalsAndNamesItReadChangeLater) {
  // Mask values are computed when first asked for: `mask` must still be
  // `iota < 6` after `r0` is rebound and n changes, before padding meets it.
  auto lets = lets_of("        r0 = iota((8,), 0)\n"
                      "        r1 = iota((8,), 0) + 10\n"
                      "        mask = r0 < n\n"
                      "        a = where(mask, x[...], 0.0)\n");
  PaddingFlow f = flow();
  f.bind("r0", lets.at("r0"), kEnv);
  f.bind("mask", lets.at("mask"), kEnv);
  f.bind("r0", lets.at("r1"), kEnv);
  const spec::Env later{{"n", 18}}; // read now, r0 and n would let x's padding through
  const PadValue a = f.eval(lets.at("a"), later);
  EXPECT_FALSE(a.any) << "padding at " << ::testing::PrintToString(padded(a));
  // Bound again, it reads them as they are then: iota + 10 < 18 everywhere.
  f.bind("mask", lets.at("mask"), later);
  EXPECT_EQ(padded(f.eval(lets.at("a"), later)), (std::vector<int>{6, 7}));
}

namespace {

/// The padding of `where(mask, x[...], 0.0)`, mask bound first.
std::vector<int> padding_through(const std::string &mask) {
  auto lets = lets_of("        mask = " + mask + "\n        a = where(mask, x[...], 0.0)\n");
  PaddingFlow f = flow();
  f.bind("mask", lets.at("mask"), kEnv);
  return padded(f.eval(lets.at("a"), kEnv));
}

} // namespace

TEST(PaddingFlow, AMaskComparedWithAConstantBetweenTwoIntegersIsEvaluated) {
  EXPECT_EQ(padding_through("cast(iota((8,), 0) < n, f32) > 0.5"), (std::vector<int>{}));
  EXPECT_EQ(padding_through("cast(iota((8,), 0) < n, f32) > -0.5"), (std::vector<int>{6, 7}));
  EXPECT_EQ(padding_through("cast(iota((8,), 0), f32) < n - 0.5"), (std::vector<int>{}));
  EXPECT_EQ(padding_through("cast(iota((8,), 0), f32) < n + 0.5"), (std::vector<int>{6}));
  EXPECT_EQ(padding_through("n - 0.5 > cast(iota((8,), 0), f32)"), (std::vector<int>{}));
  EXPECT_EQ(padding_through("5.5 <= cast(iota((8,), 0), f32)"), (std::vector<int>{6, 7}));
  EXPECT_EQ(padding_through("cast(iota((8,), 0), f32) != 6.5"), (std::vector<int>{6, 7}));
  EXPECT_EQ(padding_through("cast(iota((8,), 0), f32) == 6.5"), (std::vector<int>{}));
}

TEST(PaddingFlow, TiledAndConcatenatedMasksAreEvaluatedElementByElement) {
  EXPECT_EQ(padding_through("tile(iota((4,), 0) < 2, (2,))"), (std::vector<int>{}));
  EXPECT_EQ(padding_through("tile(iota((4,), 0) < 3, (2,))"), (std::vector<int>{6}));
  EXPECT_EQ(padding_through("concatenate(iota((4,), 0) < 4, iota((4,), 0) < 2, axis=0)"),
            (std::vector<int>{}));
  EXPECT_EQ(padding_through("concatenate(iota((4,), 0) < 4, iota((4,), 0) < 3)"), (std::vector<int>{6}));
}

TEST(PaddingFlow, AnIotaOfANarrowIntegerDtypeIsAMaskUntilItsArithmeticWouldWrap) {
  // lax.broadcasted_iota(jnp.int16 | jnp.uint8, ...) masks as an i32 one does.
  auto lets = lets_of("        a = where(iota((8,), 0, dtype=i16) < n, x[...], 0.0)\n"
                      "        b = where(iota((8,), 0, dtype=u8) + 1 <= n, x[...], 0.0)\n"
                      "        c = where(iota((8,), 0, dtype=i8) <= n, x[...], 0.0)\n"
                      // i8 120 + 7 = 127 fits; 120 + 8 wraps on hardware: not decided
                      "        d = where(iota((8,), 0, dtype=i8) + 120 < 126, x[...], 0.0)\n"
                      "        e = where(iota((8,), 0, dtype=i8) * 20 < 126, x[...], 0.0)\n");
  PaddingFlow f = flow();
  EXPECT_FALSE(f.eval(lets.at("a"), kEnv).any);
  EXPECT_FALSE(f.eval(lets.at("b"), kEnv).any);
  EXPECT_EQ(padded(f.eval(lets.at("c"), kEnv)), (std::vector<int>{6}));
  EXPECT_FALSE(f.eval(lets.at("d"), kEnv).any);
  // 7 * 20 = 140 is past i8: the mask is not decided, so both sides' padding stays.
  EXPECT_EQ(padded(f.eval(lets.at("e"), kEnv)), (std::vector<int>{6, 7}));
}

namespace {

/// x: f32[8] whose elements 6 and 7 are zero padding (a Mosaic GPU TMA
/// fill); y: f32[4, 8] whose last two columns are.
PaddingFlow zero_flow() {
  return PaddingFlow([](const std::string &n) { return n == "x" || n == "y"; },
                     [](const spec::Expr &e) {
                       if (e.name == "x") return RefPadding{{8}, {}, {Box{{6, 8}}}};
                       return RefPadding{{4, 8}, {}, {Box{{0, 4}, {6, 8}}}};
                     });
}

/// Each element's PadState; {-1} where garbage may be anywhere.
std::vector<int> states(const PadValue &v) {
  if (!v.any) return {};
  if (v.bits.empty()) return {-1};
  return std::vector<int>(v.bits.begin(), v.bits.end());
}

PadValue zero_eval(const std::string &let) {
  auto lets = lets_of("        a = " + let + "\n");
  return zero_flow().eval(lets.at("a"), kEnv);
}

} // namespace

TEST(PaddingFlow, ZeroPaddingReadFromARefIsZeroNotGarbage) {
  EXPECT_EQ(states(zero_eval("x[...]")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
}

TEST(PaddingFlow, ASumOrADotOverZeroPaddingTakesNothingOfItIn) {
  EXPECT_FALSE(zero_eval("sum(x[...])").any);
  EXPECT_FALSE(zero_eval("sum(y[...], axis=1)").any);
  EXPECT_FALSE(zero_eval("dot(y[...], reshape(x[...], (8, 1)))").any);
  EXPECT_FALSE(zero_eval("dot(y[...], y[...], trans_b=True)").any);
}

TEST(PaddingFlow, AMaxOverZeroPaddingIsGarbageWhereTheLineAlsoHoldsData) {
  EXPECT_EQ(states(zero_eval("max(x[...])")), (std::vector<int>{1}));
  EXPECT_EQ(states(zero_eval("max(y[...], axis=1)")), (std::vector<int>{1, 1, 1, 1}));
  // A column of zeros only stays zero padding.
  EXPECT_EQ(states(zero_eval("max(y[...], axis=0)")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
}

TEST(PaddingFlow, ProductsAndNegationsKeepZerosWhileExpAndAddedDataDoNot) {
  EXPECT_EQ(states(zero_eval("x[...] * 2.0")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(states(zero_eval("-cast(x[...], bf16)")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(states(zero_eval("x[...] / 3.0")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(states(zero_eval("3.0 / x[...]")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(states(zero_eval("exp(x[...])")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(states(zero_eval("x[...] + 1.0")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(states(zero_eval("x[...] == 0.0")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(states(zero_eval("sum(exp(x[...]))")), (std::vector<int>{1}));
}

TEST(PaddingFlow, AMaskThatSelectsDataOverZeroPaddingLeavesNone) {
  EXPECT_FALSE(zero_eval("where(iota((8,), 0) < n, exp(x[...]), 0.0)").any);
  EXPECT_FALSE(zero_eval("max(where(iota((8,), 0) < n, x[...], -inf))").any);
}

TEST(PaddingFlow, ARunningSumPastZeroPaddingIsGarbageThere) {
  // Elements 6 and 7 hold the sum of the data before them, not 0.
  EXPECT_EQ(states(zero_eval("cumsum(x[...], axis=0)")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  // Reversed, the data's running sum starts after the zeros.
  EXPECT_EQ(states(zero_eval("cumsum(x[...], axis=0, reverse=True)")),
            (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
}

TEST(PaddingFlow, ALiteralZeroBesideZeroPaddingKeepsItZero) {
  // relu, a square by pow, the positive part: 0 whichever way.
  EXPECT_EQ(states(zero_eval("maximum(x[...], 0.0)")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(states(zero_eval("x[...] ** 2")), (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(states(zero_eval("where(x[...] > 0.0, x[...], 0.0)")),
            (std::vector<int>{0, 0, 0, 0, 0, 0, 2, 2}));
  // A non-zero literal, or a power that is not positive, is no zero.
  EXPECT_EQ(states(zero_eval("maximum(x[...], 0.5)")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(states(zero_eval("x[...] ** -1")), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(states(zero_eval("where(x[...] > 0.0, x[...], 1.0)")),
            (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
}

TEST(PaddingFlow, ARunningSumOfZeroPaddingIntoALocalStaysData) {
  // `t = c + x; c = t`, as the bridge writes a fori_loop carry: adding the
  // zeros leaves c's data; adding a bias to them would not.
  auto lets =
      lets_of("        c = iota((8,), 0) * 1.0\n        t = c + x[...]\n        u = c + x[...] + 1.0\n");
  PaddingFlow f = zero_flow();
  f.bind("c", lets.at("c"), kEnv);
  f.bind("t", lets.at("t"), kEnv);
  f.bind("c", spec::Expr::var("t"), kEnv);
  EXPECT_FALSE(f.eval(spec::Expr::var("c"), kEnv).any);
  f.bind("u", lets.at("u"), kEnv);
  EXPECT_EQ(states(f.eval(spec::Expr::var("u"), kEnv)), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
}

TEST(PaddingFlow, AValueRebuiltFromItselfOverAHundredThousandBindsKeepsItsConcreteValue) {
  // `c = c + 1` at every step of a long run (a scratch carried and never
  // reset): each bind names the one before; the chain is computed as it
  // grows, so neither computing nor freeing it recurses through every step.
  auto lets = lets_of("        a = iota((8,), 0)\n        c = a\n        c = c + 1\n");
  PaddingFlow f = zero_flow();
  f.bind("c", lets.at("a"), kEnv);
  constexpr int kBinds = 100000;
  for (int i = 0; i < kBinds; ++i)
    f.bind("c", lets.at("c"), kEnv);
  auto v = f.concrete(spec::Expr::var("c"), kEnv);
  ASSERT_TRUE(v);
  for (std::int64_t k = 0; k < 8; ++k)
    EXPECT_EQ(v->v.at(static_cast<std::size_t>(k)), k + kBinds);
}

TEST(PaddingFlow, AScratchCarriedUnresetThroughEveryStepOfALongGridIsChecked) {
  // The running max is initialized once and carried through 4096 steps, its
  // binds computed as their chain grows: verified; without the init, its
  // first read is uninitialized.
  const std::string grid = "kernel carried:\n    grid = (4096,)\n    dimension_semantics = (arbitrary,)\n"
                           "    in  x: f32[32768, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    out o: f32[8, 128]  block=(8, 128)  index=(i) -> (0, 0)\n"
                           "    scratch m: f32[8, 128]\n    body:\n";
  const std::string carry = "        m[...] = maximum(m[...], x[...])\n        o[...] = m[...]\n";
  auto good = verifier::check(kernel(grid +
                                     "        when program_id(0) == 0:\n"
                                     "            m[...] = broadcast_to(-inf, (8, 128))\n" +
                                     carry),
                              {});
  EXPECT_EQ(good.status, verifier::Status::verified) << good.reason;
  auto bad = verifier::check(kernel(grid + carry), {});
  EXPECT_EQ(bad.status, verifier::Status::violation) << bad.reason;
}
