#include "spec/eval.hpp"
#include "verifier/smt/smt.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pipecheck::verifier::smt {
namespace {

// Solves x == a, then reads back the value of the translated expression.
std::int64_t eval_via_z3(const spec::Expr &e, std::int64_t a, bool aux) {
  Context c;
  Solver s(c, 2000);
  Bindings b;
  Term x = c.int_var("x");
  b.names.emplace("x", x);
  Bindings::Aux ax;
  if (aux) b.aux = &ax;
  auto t = translate(c, e, b);
  EXPECT_TRUE(t.term.has_value()) << t.error;
  s.add(x == a, "pin");
  for (const auto &side : ax.side)
    s.add(side, "side");
  Term r = c.int_var("r");
  s.add(r == *t.term, "result");
  EXPECT_EQ(s.check().kind, Result::sat);
  return s.value(r);
}

TEST(Translate, FloorDivisionAndModuloFollowPythonForEverySign) {
  using spec::Expr;
  using spec::Op;
  for (std::int64_t a : {-7, -6, -1, 0, 1, 5, 7})
    for (std::int64_t c : {-3, -2, 2, 3}) {
      Expr d = Expr::binary(Op::FloorDiv, Expr::var("x"), Expr::integer(c));
      Expr m = Expr::binary(Op::Mod, Expr::var("x"), Expr::integer(c));
      Expr cd = Expr::call("cdiv", {Expr::var("x"), Expr::integer(c)});
      for (bool aux : {false, true}) {
        EXPECT_EQ(eval_via_z3(d, a, aux), spec::floor_div(a, c)) << a << " // " << c;
        EXPECT_EQ(eval_via_z3(m, a, aux), spec::floor_mod(a, c)) << a << " % " << c;
        EXPECT_EQ(eval_via_z3(cd, a, aux), -spec::floor_div(-a, c)) << "cdiv " << a << " " << c;
      }
    }
}

TEST(Translate, WhereMinAndMaxArePiecewiseLinearAndAgreeWithTheEvaluator) {
  using spec::Expr;
  using spec::Op;
  const Expr cond =
      Expr::binary(Op::Gt, Expr::binary(Op::Mul, Expr::var("x"), Expr::integer(3)), Expr::integer(4));
  const Expr sel = Expr::call("where", {cond, Expr::var("x"), Expr::integer(0)});
  const Expr mn = Expr::call("minimum", {Expr::var("x"), Expr::integer(2)});
  const Expr mx3 = Expr::call("max", {Expr::var("x"), Expr::integer(-1), Expr::integer(1)});
  for (std::int64_t a : {-3, 0, 1, 2, 5}) {
    const spec::Env env{{"x", a}};
    EXPECT_EQ(eval_via_z3(sel, a, false), spec::eval_int(sel, env)) << a;
    EXPECT_EQ(eval_via_z3(mn, a, false), spec::eval_int(mn, env)) << a;
    EXPECT_EQ(eval_via_z3(mx3, a, false), spec::eval_int(mx3, env)) << a;
  }
}

TEST(Translate, ATruthUsedAsANumberIsOneOrZeroAsTheEvaluatorHasIt) {
  // `A[s or 1]`, `a[s < 1]`, `x + (x and 1)`: a Boolean term where a number
  // is wanted (this aborted in Z3 on the sort mismatch).
  using spec::Expr;
  using spec::Op;
  const Expr x = Expr::var("x");
  for (const Expr &e : {Expr::binary(Op::Or, x, Expr::integer(1)), Expr::binary(Op::Lt, x, Expr::integer(1)),
                        Expr::binary(Op::Add, x, Expr::binary(Op::And, x, Expr::integer(1))),
                        Expr::binary(Op::Mul, Expr::binary(Op::Ge, x, Expr::integer(2)), Expr::integer(5))})
    for (std::int64_t a : {-2, 0, 1, 3}) {
      const spec::Env env{{"x", a}};
      EXPECT_EQ(eval_via_z3(e, a, false), spec::eval_int(e, env)) << a;
    }
}

TEST(Translate, ReportsUnsupportedConstructsInsteadOfGuessing) {
  Context c;
  Bindings b;
  b.names.emplace("x", c.int_var("x"));
  auto t =
      translate(c, spec::Expr::binary(spec::Op::FloorDiv, spec::Expr::var("x"), spec::Expr::var("x")), b);
  EXPECT_FALSE(t.term.has_value());
  EXPECT_FALSE(t.error.empty());
  auto u = translate(c, spec::Expr::var("nope"), b);
  EXPECT_FALSE(u.term.has_value());
}

TEST(Translate, SplitsAProductWithTheIndexOfAShortGridAxisIntoOneCasePerStep) {
  // `j * p` with p the index of a 2-step axis (a two-phase kernel's index
  // map): linear per case; a long axis's product stays unsupported.
  Context c;
  Bindings b;
  Term p = c.int_var("p"), j = c.int_var("j");
  b.program_ids = {p, j};
  b.num_programs = {2, 4096};
  b.names.emplace("p", p);
  b.names.emplace("j", j);
  const auto prod = spec::Expr::binary(spec::Op::Mul, spec::Expr::var("j"), spec::Expr::var("p"));
  auto t = translate(c, prod, b);
  ASSERT_TRUE(t.term.has_value()) << t.error;
  Solver s(c, 2000);
  for (std::int64_t pv : {0, 1})
    for (std::int64_t jv : {0, 7, 4095}) {
      s.push();
      s.add(p == c.num(pv) && j == c.num(jv), "point");
      ASSERT_EQ(s.check().kind, Result::sat);
      EXPECT_EQ(s.value(*t.term), pv * jv);
      s.pop();
    }
  b.num_programs = {4096, 4096};
  auto u = translate(c, prod, b);
  EXPECT_FALSE(u.term.has_value());
  EXPECT_NE(u.error.find("nonlinear"), std::string::npos);
}

TEST(Solver, AnswersUnsatWithTheNamesOfTheCoreAndMinimizesWitnesses) {
  Context c;
  Solver s(c, 2000);
  Term x = c.int_var("x");
  s.push();
  s.add(x > 3, "rule/lower");
  s.add(x < 2, "rule/upper");
  EXPECT_EQ(s.check().kind, Result::unsat);
  auto core = s.core();
  EXPECT_EQ(core.size(), 2u);
  s.pop();
  Term y = c.int_var("y");
  s.add(x >= 5 && x < 100 && y >= 0 && y < 100 && x + y >= 10, "box");
  ASSERT_EQ(s.check().kind, Result::sat);
  auto v = s.minimize_lex({x, y}, {0, 0});
  EXPECT_EQ(v, (std::vector<std::int64_t>{5, 5}));
}

TEST(Solver, TryValueGivesNothingForAValueBeyondInt64InsteadOfAGuess) {
  Context c;
  Solver s(c, 2000);
  Term x = c.int_var("x"), y = c.int_var("y");
  s.add(x == 7 && y == c.num(std::int64_t{1} << 62) * 4, "vals");
  ASSERT_EQ(s.check().kind, Result::sat);
  EXPECT_EQ(s.try_value(x), std::optional<std::int64_t>(7));
  EXPECT_EQ(s.try_value(y), std::nullopt);
}

TEST(Solver, ReportsUnknownWithAReasonRatherThanAVerdict) {
  Context c;
  Solver s(c, 10);
  // Pigeonhole in linear integer arithmetic: 13 pigeons, 12 holes, pairwise
  // apart. Unsat, but only after an exponential search that the budget ends.
  const int pigeons = 13, holes = 12;
  std::vector<Term> p;
  for (int i = 0; i < pigeons; ++i) {
    p.push_back(c.int_var("p" + std::to_string(i)));
    s.add(p.back() >= 0 && p.back() < holes, "hole_" + std::to_string(i));
  }
  for (int i = 0; i < pigeons; ++i)
    for (int j = i + 1; j < pigeons; ++j)
      s.add(p[i] != p[j], "apart_" + std::to_string(i) + "_" + std::to_string(j));
  Result r = s.check();
  ASSERT_EQ(r.kind, Result::unknown);
  EXPECT_EQ(r.reason, "solver budget exhausted");
  // The same budget decides a query that fits in it.
  Solver small(c, 10);
  small.add(p[0] >= 0 && p[0] < holes && p[1] >= 0 && p[1] < holes && p[0] != p[1], "two_pigeons");
  EXPECT_EQ(small.check().kind, Result::sat);
}

} // namespace
} // namespace pipecheck::verifier::smt

namespace pipecheck::verifier::smt {
namespace {

TEST(TermKey, IsEqualForEqualTermsInAnyContextAndDiffersOtherwise) {
  auto make = [](Context &c, int variant) {
    Term x = c.int_var("x"), y = c.int_var("y");
    Term shared = floor_div(x + 1, 3);
    switch (variant) {
    case 0: return forall({x}, shared + shared < y);
    case 1: return exists({x}, shared + shared < y);
    case 2: return forall({x}, shared + shared <= y);
    case 3: return forall({x}, floor_div(x + 2, 3) + shared < y);
    default: return forall({y}, shared + shared < x);
    }
  };
  std::vector<std::string> keys;
  for (int v = 0; v < 5; ++v) {
    Context a;
    const std::string k = make(a, v).key();
    {
      Context b; // another context, maybe a reused one
      EXPECT_EQ(make(b, v).key(), k) << v;
    }
    for (const auto &other : keys)
      EXPECT_NE(other, k) << v;
    keys.push_back(k);
  }
}

TEST(Context, SuccessiveContextsAnswerAlike) {
  for (int round = 0; round < 8; ++round) {
    Context c;
    Solver s(c, 2000);
    Term x = c.int_var("x");
    s.push();
    s.add(x * 2 == 2 * round + 1, "odd");
    EXPECT_EQ(s.check().kind, Result::unsat) << round;
    s.pop();
    s.add(x * 2 == 2 * round, "even");
    ASSERT_EQ(s.check().kind, Result::sat) << round;
    EXPECT_EQ(s.value(x), round);
  }
}

TEST(Substitute, ReplacesConstantsEverywhereInATermAndLeavesOthersAlone) {
  Context c;
  Term x = c.int_var("x"), y = c.int_var("y"), z = c.int_var("z");
  // forall-free instance of "x // 2 + y == z" at x = 7, y = -1.
  Term t = substitute(floor_div(x, 2) + y == z, {x, y}, {c.num(7), c.num(-1)});
  Solver s(c, 2000);
  s.add(t, "instance");
  ASSERT_EQ(s.check().kind, Result::sat);
  EXPECT_EQ(s.value(z), 2);
  s.add(z != 2, "other");
  EXPECT_EQ(s.check().kind, Result::unsat);
}

} // namespace
} // namespace pipecheck::verifier::smt
