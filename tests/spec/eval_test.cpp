// Integer evaluation: Python semantics, and division by zero and int64
// overflow told apart from a name that is merely unbound.
#include "spec/checked.hpp"
#include "spec/eval.hpp"
#include "spec/parse.hpp"

#include <gtest/gtest.h>

#include <limits>

using namespace pipecheck::spec;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

// The grid extent of a one-line kernel, as an expression.
Expr expr(const std::string &text) {
  auto r = parse(SourceFile::from_string("e.pk", "kernel k:\n    grid = (" + text +
                                                     ",)\n    out o: f32[8]\n"
                                                     "    body:\n        o[...] = 0\n"));
  EXPECT_TRUE(r.file) << text;
  return (*std::get<KernelSpec>(r.file->units.at(0)).grid).at(0);
}

} // namespace

TEST(Evaluate, FloorDivisionAndModuloFollowPython) {
  EXPECT_EQ(eval_int(expr("-7 // 2"), {}), -4);
  EXPECT_EQ(eval_int(expr("-7 % 2"), {}), 1);
  EXPECT_EQ(eval_int(expr("7 % -2"), {}), -1);
  EXPECT_EQ(eval_int(expr("cdiv(7, 2)"), {}), 4);
}

TEST(Evaluate, WhereMinimumAndMaximumClampIntegersAsLaxSelectAndJnpDo) {
  EXPECT_EQ(eval_int(expr("where(i * 4 + 3 > j * 8, j, 0)"), {{"i", 0}, {"j", 1}}), 0);
  EXPECT_EQ(eval_int(expr("where(i * 4 + 3 > j * 8, j, 0)"), {{"i", 2}, {"j", 1}}), 1);
  EXPECT_EQ(eval_int(expr("minimum(j, 3)"), {{"j", 5}}), 3);
  EXPECT_EQ(eval_int(expr("maximum(j - 4, 0)"), {{"j", 1}}), 0);
  EXPECT_TRUE(is_int_function("where"));
  EXPECT_FALSE(is_int_function("exp"));
  // A decided select is the side it selects: the other side may be unbound
  // or fault (a prefetch table's `where` tree is followed down one path).
  EXPECT_EQ(eval_int(expr("where(1 > 0, 2, k)"), {}), 2);
  EXPECT_EQ(eval_int(expr("where(i > 0, 8 // i, 0)"), {{"i", 0}}), 0);
  // An undecided condition leaves it without a value.
  EXPECT_EQ(eval_int(expr("where(k > 0, 2, 3)"), {}), std::nullopt);
}

TEST(Evaluate, DivisionByZeroIsAnErrorAtTheOperatorEvenWithTheDividendUnbound) {
  for (const char *text : {"i // 0", "i % 0", "cdiv(i, 0)", "8 // (2 - 2)"}) {
    Expr e = expr(text);
    Evaluation v = evaluate(e, {});
    EXPECT_EQ(v.fault, EvalFault::div_by_zero) << text;
    ASSERT_NE(v.at, nullptr);
    EXPECT_TRUE(v.at->op == Op::FloorDiv || v.at->op == Op::Mod || v.at->op == Op::Call) << text;
  }
  EXPECT_EQ(evaluate(expr("i // N"), {{"N", 0}}).fault, EvalFault::div_by_zero);
  EXPECT_EQ(evaluate(expr("i // N"), {}).fault, EvalFault::unbound);
}

TEST(Evaluate, AFaultInOneSideOfAnUndecidedWhereWaitsForTheConditionThatSelectsIt) {
  // Upstream's planar snake: `t % (n - (n // w) * w)` is a remainder by
  // zero exactly where w divides n, where its side is never selected.
  const Expr e = expr("where(t < 4, t, t % (4 - (4 // 4) * 4))");
  EXPECT_EQ(evaluate(e, {}).fault, EvalFault::unbound);
  EXPECT_EQ(eval_int(e, {{"t", 3}}), 3);
  EXPECT_EQ(evaluate(e, {{"t", 4}}).fault, EvalFault::div_by_zero);
  // Both sides faulting fault whatever the condition.
  EXPECT_EQ(evaluate(expr("where(t < 4, t // 0, t % 0)"), {}).fault, EvalFault::div_by_zero);
  // A fault in the condition is one.
  EXPECT_EQ(evaluate(expr("where(t // 0 < 4, 1, 2)"), {}).fault, EvalFault::div_by_zero);
}

TEST(Evaluate, OverflowIsAnErrorNotAWrappedValue) {
  EXPECT_EQ(evaluate(expr("2**62 + 2**62"), {}).fault, EvalFault::overflow);
  EXPECT_EQ(evaluate(expr("2**63"), {}).fault, EvalFault::overflow);
  EXPECT_EQ(evaluate(expr("-(-2**62 * 2)"), {}).fault, EvalFault::overflow);
  EXPECT_EQ(evaluate(expr("abs(-2**62 * 2)"), {}).fault, EvalFault::overflow);
  EXPECT_EQ(evaluate(expr("(-2**62 * 2) // -1"), {}).fault, EvalFault::overflow);
  EXPECT_EQ(evaluate(expr("i * 2**40"), {{"i", 1 << 23}}).fault, EvalFault::overflow);
  // Where the overflow is decided, the unbound name elsewhere does not hide it.
  EXPECT_EQ(evaluate(expr("i + (2**62 + 2**62)"), {}).fault, EvalFault::overflow);
  EXPECT_EQ(eval_int(expr("2**62 + (2**62 - 1)"), {}), kMax);
}

TEST(Evaluate, ExtremeValuesThatFitAreExact) {
  EXPECT_EQ(eval_int(expr("-2**62 * 2"), {}), kMin);
  EXPECT_EQ(eval_int(expr("(-2**62 * 2) % -1"), {}), 0);
  EXPECT_EQ(eval_int(expr("(-2**62 * 2) % 3"), {}), 1);
  EXPECT_EQ(eval_int(expr("(-2**62 * 2) // 3"), {}), -3074457345618258603);
  EXPECT_EQ(eval_int(expr("cdiv(-2**62 * 2, -1)"), {}), std::nullopt);
  EXPECT_EQ(eval_int(expr("1 ** 1000"), {}), 1);
  EXPECT_EQ(eval_int(expr("(-1) ** 1001"), {}), -1);
}

TEST(ArithmeticError, SaysWhatAndWhere) {
  Expr e = expr("8 // 0");
  auto d = arithmetic_error(e, {}, "the grid");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "division by zero in the grid");
  EXPECT_EQ(d->loc.line, 2);
  EXPECT_EQ(d->loc.col, 15);
  EXPECT_FALSE(arithmetic_error(expr("i // 2"), {}, "x"));
}

TEST(Checked, ProductsAndBytesThatDoNotFitAreNullopt) {
  const std::int64_t big = std::int64_t{1} << 31;
  EXPECT_EQ(checked_product(std::vector<std::int64_t>{big, big}), std::int64_t{1} << 62);
  EXPECT_FALSE(checked_bytes(std::vector<std::int64_t>{big, big}, 4));
  EXPECT_FALSE(checked_product(std::vector<std::int64_t>{std::int64_t{1} << 62, std::int64_t{1} << 62}));
  // A zero extent does not hide a stride that overflows.
  EXPECT_FALSE(checked_product(std::vector<std::int64_t>{0, std::int64_t{1} << 40, std::int64_t{1} << 40}));
  EXPECT_EQ(saturating_mul(kMax, std::int64_t{2}), kMax);
  EXPECT_EQ(saturating_add(std::uint64_t{1} << 63, std::uint64_t{1} << 63), ~std::uint64_t{0});
}
