// CompiledInts (the stepper's fast integer evaluation) has a value exactly
// when spec::evaluate has one, and the same one: over generated expressions
// with Python division, overflow, short circuits, integer functions of every
// arity, unbound names and operands that are no integers.
#include "spec/eval.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace pipecheck::spec;

namespace {

// ("program_id(0)" is the name a grid index is bound by: the call
// `program_id(0)` reads it; `num_programs(1)` is never bound.)
const std::vector<std::string> kNames = {"i", "j", "n", "program_id(0)", "unbound"};

rc::Gen<std::int64_t> leaf_value() {
  return rc::gen::weightedOneOf<std::int64_t>(
      {{6, rc::gen::inRange<std::int64_t>(-9, 10)},
       {1, rc::gen::element<std::int64_t>(0, 1, -1, std::numeric_limits<std::int64_t>::max(),
                                          std::numeric_limits<std::int64_t>::min(), std::int64_t{1} << 40)}});
}

Expr gen_expr(int depth) {
  const int kind = *rc::gen::inRange(0, depth <= 0 ? 3 : 10);
  switch (kind) {
  case 0: return Expr::integer(*leaf_value());
  case 1: {
    const std::string n = *rc::gen::elementOf(kNames);
    if (n == "program_id(0)" && *rc::gen::inRange(0, 2) == 0)
      return Expr::call("program_id", {Expr::integer(0)});
    if (n == "unbound" && *rc::gen::inRange(0, 2) == 0) return Expr::call("num_programs", {Expr::integer(1)});
    return Expr::var(n);
  }
  case 2: return *rc::gen::element(Expr::floating(1.5), Expr::ref("x", {}), Expr::leaf(Op::Zeros));
  case 3:
  case 4: {
    const Op op =
        *rc::gen::element(Op::Add, Op::Sub, Op::Mul, Op::FloorDiv, Op::Mod, Op::Pow, Op::Eq, Op::Ne, Op::Lt,
                          Op::Le, Op::Gt, Op::Ge, Op::And, Op::Or, Op::Div, Op::BitAnd, Op::BitOr);
    return Expr::binary(op, gen_expr(depth - 1), gen_expr(depth - 1));
  }
  case 5: return Expr::unary(*rc::gen::element(Op::Neg, Op::Not, Op::BitNot), gen_expr(depth - 1));
  case 6: {
    // A prefetch table's read, as spec/prefetch.cpp elaborates it: a tree
    // of `x < mid` selects with integer leaves (CompiledInts evaluates only
    // the branch each picks), or one whose leaves may fail.
    const Expr x = gen_expr(depth - 1);
    const int n = *rc::gen::inRange(1, 9);
    const bool total = *rc::gen::inRange(0, 4) > 0;
    std::vector<Expr> leaves;
    for (int k = 0; k < n; ++k)
      leaves.push_back(total ? Expr::integer(*leaf_value()) : gen_expr(depth - 1));
    std::function<Expr(int, int)> tree = [&](int lo, int hi) -> Expr {
      if (hi - lo == 1) return leaves[static_cast<std::size_t>(lo)];
      const int mid = lo + (hi - lo) / 2;
      return Expr::call("where", {Expr::binary(Op::Lt, x, Expr::integer(mid)), tree(lo, mid), tree(mid, hi)});
    };
    const Expr in = Expr::binary(Op::And, Expr::binary(Op::Ge, x, Expr::integer(0)),
                                 Expr::binary(Op::Lt, x, Expr::integer(n)));
    return Expr::call("where", {in, tree(0, n), Expr::integer(-1)});
  }
  default: {
    const std::string fn = *rc::gen::element<std::string>("cdiv", "min", "max", "minimum", "maximum", "where",
                                                          "abs", "exp", "ds");
    const int n = *rc::gen::inRange(0, 5);
    std::vector<Expr> args;
    for (int k = 0; k < n; ++k)
      args.push_back(gen_expr(depth - 1));
    Expr c = Expr::call(fn, std::move(args));
    if (n > 0 && *rc::gen::inRange(0, 10) == 0) c.kwarg_names.push_back("axis");
    return c;
  }
  }
}

} // namespace

RC_GTEST_PROP(CompiledIntsProperty, HaveAValueExactlyWhenEvaluateHasTheSameOne, ()) {
  const Expr e = gen_expr(*rc::gen::inRange(0, 5));
  Env env;
  for (std::size_t k = 0; k + 1 < kNames.size(); ++k)
    if (*rc::gen::inRange(0, 5) > 0) env[kNames[k]] = *leaf_value();
  CompiledInts c;
  std::map<std::string, int> ids;
  const int root =
      c.compile(e, [&](const std::string &n) { return ids.try_emplace(n, ids.size()).first->second; });
  std::vector<const std::int64_t *> vars(ids.size(), nullptr);
  for (auto &[n, id] : ids)
    if (auto it = env.find(n); it != env.end()) vars[static_cast<std::size_t>(id)] = &it->second;
  const auto expected = evaluate(e, env).value;
  RC_LOG() << e << "\n";
  RC_ASSERT(c.value(root, vars.data()) == expected);
}

// A grid point's index by name: program_id(k) reads "program_id(k)" from
// the environment (box_at binds a point so, not copying a table's where-tree
// per point), and is unbound without it.
TEST(Evaluate, AGridIndexIsReadByItsNameFromTheEnvironment) {
  const Expr e = Expr::binary(
      Op::Add, Expr::binary(Op::Mul, Expr::call("program_id", {Expr::integer(1)}), Expr::integer(4)),
      Expr::call("num_programs", {Expr::integer(0)}));
  EXPECT_EQ(evaluate(e, {{"program_id(1)", 3}, {"num_programs(0)", 7}}).value, 19);
  const Evaluation missing = evaluate(e, {{"program_id(1)", 3}});
  EXPECT_FALSE(missing.value);
  EXPECT_EQ(missing.fault, EvalFault::unbound);
}

TEST(CompiledInts, ReadTheirNamesThroughTheCallersPointersAtEachEvaluation) {
  CompiledInts c;
  const Expr e =
      Expr::binary(Op::FloorDiv, Expr::binary(Op::Add, Expr::var("s"), Expr::integer(1)), Expr::integer(4));
  const int root = c.compile(e, [](const std::string &) { return 0; });
  std::int64_t s = 6;
  const std::int64_t *vars[] = {&s};
  EXPECT_EQ(c.value(root, vars), 1);
  s = -6;
  EXPECT_EQ(c.value(root, vars), -2); // Python's floor division
  vars[0] = nullptr;
  EXPECT_EQ(c.value(root, vars), std::nullopt);
}
