// SMEM state (spec/state.hpp): i32 SMEM scratch and prefetch arrays the body
// stores into are scalars carried across grid steps; elaboration binds each
// element at the top of the body to its value at the step's entry, computed
// by running the body's integers over the grid in order.
#include "spec/bind.hpp"
#include "spec/eval.hpp"
#include "spec/print.hpp"
#include "spec/state.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;
using pipecheck::spec::testing::first_error;
using pipecheck::spec::testing::kernel_ok;

namespace {

// A kernel over `grid` whose body is `body` (8-space indented lines), with
// the extra declarations `decls`.
std::string kernel(const std::string &decls, const std::string &body, const std::string &grid = "(4,)",
                   const std::string &index = "(i) -> (i, 0)") {
  return "kernel s:\n"
         "    grid = " +
         grid + "\n" + decls + "    in  x: f32[64, 128]  block=(8, 128)  index=" + index +
         "\n"
         "    out o: f32[64, 128]  block=(8, 128)  index=" +
         index +
         "\n"
         "    body:\n" +
         body;
}

// The value the elaborated body binds `local` to at the entry of the step
// at `point`, by evaluating its top-level bindings there.
std::optional<std::int64_t> entry(const KernelSpec &k, const std::string &local,
                                  const std::vector<std::int64_t> &point,
                                  const std::vector<std::int64_t> &grid) {
  Env env;
  for (const auto &s : k.body) {
    const auto *l = std::get_if<Let>(&s.kind);
    if (!l) break;
    auto v = eval_int(bind_grid(l->value, point, grid), env);
    if (!v) return std::nullopt;
    env[l->name] = *v;
    if (l->name == local) return v;
  }
  return std::nullopt;
}

StateElaboration elaborated(const std::string &text, const PrefetchContents &c = {}) {
  KernelSpec k = kernel_ok(text);
  return elaborate_state(k, param_env(k.params), c);
}

} // namespace

TEST(StateElaboration, AKernelWithoutStateComesBackAsItIs) {
  KernelSpec k = kernel_ok(kernel("", "        o[...] = x[...]\n"));
  EXPECT_FALSE(has_state(k));
  auto r = elaborate_state(k, {});
  ASSERT_TRUE(r.kernel);
  EXPECT_EQ(*r.kernel, k);
}

TEST(StateElaboration, APrefetchArrayTheBodyStoresIntoStartsWithItsContentsAndCarriesItsStores) {
  auto r = elaborated(kernel("    prefetch n: i32[1] = [5]\n",
                             "        o[...] = x[...] * n[0]\n"
                             "        n[0] = n[0] + 2\n",
                             "(4,)", "(i, n) -> (i, 0)"));
  ASSERT_TRUE(r.kernel) << r.unknown;
  EXPECT_TRUE(r.kernel->prefetches.empty());
  for (std::int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(entry(*r.kernel, "n_0", {i}, {4}), 5 + 2 * i) << "step " << i;
  // The index maps lose the dropped array's argument.
  EXPECT_EQ(r.kernel->operand("x")->index_map->params, std::vector<std::string>{"i"});
  // The store became a rebinding of the element's local.
  const auto *store = std::get_if<Let>(&r.kernel->body.back().kind);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->name, "n_0");
  EXPECT_EQ(print(store->value), "n_0 + 2");
}

TEST(StateElaboration, AnSmemScratchFollowsStoresInWhenBranchesAndLoopsOverARank2Grid) {
  // A counter of the steps with j == 1, and of all loop trips, over a (3, 2) grid.
  auto r = elaborated(kernel("    scratch st: i32[2, 2] memory_space=smem\n",
                             "        when program_id(0) == 0 and program_id(1) == 0:\n"
                             "            st[0, 0] = 0\n"
                             "            st[1, 1] = 0\n"
                             "        when program_id(1) == 1:\n"
                             "            st[0, 0] += 1\n"
                             "        for t in range(program_id(0) + 1):\n"
                             "            st[1, 1] = st[1, 1] + 1\n"
                             "        o[...] = x[...]\n",
                             "(3, 2)", "(i, j) -> (i, 0)"));
  ASSERT_TRUE(r.kernel) << r.unknown;
  EXPECT_EQ(r.kernel->operand("st"), nullptr);
  std::int64_t ones = 0, trips = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) {
      if (i + j > 0) {
        EXPECT_EQ(entry(*r.kernel, "st_0_0", {i, j}, {3, 2}), ones) << i << "," << j;
        EXPECT_EQ(entry(*r.kernel, "st_1_1", {i, j}, {3, 2}), trips) << i << "," << j;
      }
      ones += j == 1;
      trips += i + 1;
    }
}

TEST(StateElaboration, ARankFourGridTabulatesByTheStepsCOrderPosition) {
  auto r =
      elaborated(kernel("    scratch c: i32[1] memory_space=smem\n",
                        "        when program_id(0) + program_id(1) + program_id(2) + program_id(3) == 0:\n"
                        "            c[0] = 0\n"
                        "        o[...] = x[...] + c[0]\n"
                        "        c[0] += 1\n",
                        "(2, 1, 3, 2)", "(a, b, c2, d) -> (a, 0)"));
  ASSERT_TRUE(r.kernel) << r.unknown;
  std::int64_t step = 0;
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t d = 0; d < 2; ++d, ++step)
        if (step > 0) {
          EXPECT_EQ(entry(*r.kernel, "c_0", {a, 0, c, d}, {2, 1, 3, 2}), step);
        }
}

TEST(StateElaboration, AReadBeforeAnyStoreIsAnUndefinedReadAtItsFirstStep) {
  // The store is only at step 2; the read at steps 0 and 1 comes first.
  auto r = elaborated(kernel("    scratch st: i32[1] memory_space=smem\n",
                             "        when program_id(0) == 2:\n"
                             "            st[0] = 1\n"
                             "        when program_id(0) >= 1:\n"
                             "            o[...] = x[...] * st[0]\n"));
  EXPECT_TRUE(r.kernel); // for `lower` to show
  ASSERT_TRUE(r.undefined_read);
  EXPECT_EQ(r.undefined_read->element, "st[0]");
  EXPECT_EQ(r.undefined_read->grid_point, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(r.undefined_read->loc.line, 10);
  EXPECT_EQ(undefined_state_message(*r.undefined_read),
            "st[0] is read at grid point (1,) before anything stores it, and this statement depends on its "
            "value (an "
            "SMEM scratch holds no value until the body stores one)");
}

TEST(StateElaboration, AReadWhoseValueDecidesNothingIsNoUndefinedRead) {
  // `(k == 0) or (prev != x)`, jnp's `|` taking both sides: at step 0 the
  // garbage prev decides nothing, either way round; from step 1 it holds
  // what step 0 stored.
  for (const std::string cond : {"(program_id(0) == 0) or (p != 5)", "(p != 5) or (program_id(0) == 0)",
                                 "not ((program_id(0) != 0) and (p == 5))"}) {
    auto r =
        elaborated(kernel("    scratch st: i32[1] memory_space=smem\n", "        p = st[0]\n"
                                                                        "        when " +
                                                                            cond +
                                                                            ":\n"
                                                                            "            o[...] = x[...]\n"
                                                                            "        st[0] = 5\n"));
    EXPECT_TRUE(r.kernel) << cond;
    EXPECT_FALSE(r.undefined_read) << cond;
  }
  // The same read deciding the condition at step 0 is one.
  auto r = elaborated(kernel("    scratch st: i32[1] memory_space=smem\n",
                             "        p = st[0]\n"
                             "        when (program_id(0) == 1) or (p != 5):\n"
                             "            o[...] = x[...]\n"
                             "        st[0] = 5\n"));
  ASSERT_TRUE(r.undefined_read);
  EXPECT_EQ(r.undefined_read->grid_point, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(r.undefined_read->loc.line, 8); // the when
}

TEST(StateElaboration, AStoreBeforeTheReadInTheSameStepNeedsNoEarlierValue) {
  auto r = elaborated(kernel("    scratch st: i32[1] memory_space=smem\n",
                             "        st[0] = program_id(0) * 3\n"
                             "        o[...] = x[...] * st[0]\n",
                             "(1,)"));
  ASSERT_TRUE(r.kernel) << r.unknown;
}

TEST(StateElaboration, StateCarriedAcrossAParallelAxisIsRecordedWithBothStepsButAnAxisOfOneIsNot) {
  const std::string decls = "    dimension_semantics = (parallel, arbitrary)\n"
                            "    prefetch flag: i32[1] = [1]\n";
  const std::string body = "        when flag[0] == 1:\n"
                           "            o[...] = x[...]\n"
                           "        flag[0] = 0\n";
  auto r = elaborated(kernel(decls, body, "(2, 2)", "(i, j, f) -> (i, 0)"));
  // (the kernel is still given, with the value the grid's order carries, for lower)
  EXPECT_TRUE(r.kernel);
  EXPECT_TRUE(r.unknown.empty()) << r.unknown;
  ASSERT_TRUE(r.parallel_carry);
  EXPECT_NE(parallel_carry_message(*r.parallel_carry).find("across axis 0, which is parallel"),
            std::string::npos);
  EXPECT_EQ(r.parallel_carry->stored_at, (std::vector<std::int64_t>{0, 1})); // the last store before it
  EXPECT_EQ(r.parallel_carry->grid_point, (std::vector<std::int64_t>{1, 0}));
  EXPECT_EQ(r.parallel_carry->element, "flag[0]");
  auto one = elaborated(kernel(decls, body, "(1, 2)", "(i, j, f) -> (i, 0)"));
  ASSERT_TRUE(one.kernel) << one.unknown;
  EXPECT_FALSE(one.parallel_carry);
}

TEST(StateElaboration, StateSetAnewOnEachIndexOfTheParallelAxisIsCarriedOnlyWithinOneCore) {
  // A running offset reset where the arbitrary axis starts: each value the
  // body reads was stored at a step of the same index along axis 0, which
  // runs on the same core. Without the reset, (1, 0) reads what (0, 1) left.
  const std::string decls = "    dimension_semantics = (parallel, arbitrary)\n"
                            "    scratch off: i32[1] memory_space=smem\n";
  const std::string body = "        when program_id(1) == 0:\n"
                           "            off[0] = 0\n"
                           "        o[...] = x[...] * off[0]\n"
                           "        off[0] = off[0] + 1\n";
  auto r = elaborated(kernel(decls, body, "(3, 4)", "(i, j) -> (i, 0)"));
  ASSERT_TRUE(r.kernel) << r.unknown;
  EXPECT_FALSE(r.parallel_carry);
  std::string once = body;
  once.replace(once.find("program_id(1) == 0"), 18, "program_id(0) == 0 and program_id(1) == 0");
  auto u = elaborated(kernel(decls, once, "(3, 4)", "(i, j) -> (i, 0)"));
  ASSERT_TRUE(u.parallel_carry);
  const std::string m = parallel_carry_message(*u.parallel_carry);
  EXPECT_NE(m.find("carried from grid point (0, 3) into grid point (1, 0), across axis 0, which is parallel"),
            std::string::npos)
      << m;
}

TEST(StateElaboration, StateThatStartsWithOpenContentsNeedsThemAndIsDecidedWithThem) {
  const std::string text = kernel("    prefetch b: i32[1] in [0, 2)\n",
                                  "        o[...] = x[...] * b[0]\n"
                                  "        b[0] = 1 - b[0]\n",
                                  "(3,)", "(i, b) -> (i, 0)");
  auto open = elaborated(text);
  EXPECT_FALSE(open.kernel);
  EXPECT_TRUE(open.needs_contents);
  auto given = elaborated(text, {{"b", {1}}});
  ASSERT_TRUE(given.kernel) << given.unknown;
  EXPECT_EQ(entry(*given.kernel, "b_0", {0}, {3}), 1);
  EXPECT_EQ(entry(*given.kernel, "b_0", {1}, {3}), 0);
  EXPECT_EQ(entry(*given.kernel, "b_0", {2}, {3}), 1);
}

TEST(StateElaboration, StateThatDependsOnOpenContentsReadElsewhereNeedsThem) {
  auto r = elaborated(kernel("    prefetch lens: i32[4] in [0, 3)\n"
                             "    scratch st: i32[1] memory_space=smem\n",
                             "        when program_id(0) == 0:\n"
                             "            st[0] = 0\n"
                             "        st[0] = st[0] + lens[program_id(0)]\n"
                             "        o[...] = x[...] * st[0]\n",
                             "(4,)", "(i, l) -> (i, 0)"));
  EXPECT_FALSE(r.kernel);
  EXPECT_TRUE(r.needs_contents) << r.unknown;
}

TEST(StateElaboration, ASymbolicGridIsUnknownAndALongOneIsUnknownWithItsBound) {
  KernelSpec k = kernel_ok("kernel s:\n"
                           "    param n >= 1\n"
                           "    grid = (n,)\n"
                           "    scratch st: i32[1] memory_space=smem\n"
                           "    in  x: f32[n * 8, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    out o: f32[n * 8, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    body:\n"
                           "        st[0] = 1\n"
                           "        o[...] = x[...] * st[0]\n");
  auto r = elaborate_state(k, param_env(k.params));
  EXPECT_FALSE(r.kernel);
  EXPECT_NE(r.unknown.find("unbound param"), std::string::npos) << r.unknown;
  auto big = elaborate_state(k, param_env(k.params, {{"n", kMaxStateSteps + 1}}));
  EXPECT_FALSE(big.kernel);
  EXPECT_NE(big.unknown.find("more than 4096 steps"), std::string::npos) << big.unknown;
  auto fits = elaborate_state(k, param_env(k.params, {{"n", kMaxStateSteps}}));
  EXPECT_TRUE(fits.kernel) << fits.unknown;
}

TEST(StateElaboration, ASubscriptOutsideTheArrayIsALocatedError) {
  auto r = elaborated(kernel("    scratch st: i32[2] memory_space=smem\n", "        st[2] = 1\n"
                                                                           "        o[...] = x[...]\n"));
  EXPECT_FALSE(r.kernel);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors[0].loc.line, 7);
  EXPECT_EQ(r.errors[0].message, "'st[2]' is outside 'st', whose dim 0 has 2 elements");
}

TEST(StateElaboration, ElementLocalsDoNotCollideWithTheKernelsNames) {
  auto r = elaborated(kernel("    scratch st: i32[1] memory_space=smem\n",
                             "        st_0 = 3\n"
                             "        step = 1\n"
                             "        st[0] = st_0 + step\n"
                             "        o[...] = x[...] * st[0]\n",
                             "(1,)"));
  ASSERT_TRUE(r.kernel) << r.unknown;
  const auto *store = std::get_if<Let>(&r.kernel->body.back().kind);
  ASSERT_TRUE(store == nullptr); // the last statement is the store into o
  const auto *l = std::get_if<Let>(&r.kernel->body[r.kernel->body.size() - 2].kind);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->name, "st_0_");
  EXPECT_EQ(print(l->value), "st_0 + step");
}

TEST(StateValidation, StateIsReadAndStoredOneElementAtATimeWithConstantSubscripts) {
  const std::string decl = "    scratch st: i32[2] memory_space=smem\n";
  EXPECT_EQ(first_error(kernel(decl, "        st[program_id(0) % 2] = 0\n        o[...] = x[...]\n")),
            "7:26: a subscript of SMEM state 'st' must be a constant of literals and params, not "
            "'program_id(0) % 2' (each element is a scalar the checker follows across grid steps)");
  EXPECT_EQ(first_error(kernel(decl, "        a = st[...]\n        o[...] = x[...]\n")),
            "7:13: 'st' holds SMEM scalars: read and store one element at a time (st[i]), with constant "
            "subscripts");
  EXPECT_EQ(
      first_error(kernel(decl, "        sync_copy(x, st)\n        o[...] = x[...]\n")),
      "7:22: 'st' holds SMEM scalars (an i32 SMEM scratch): the body stores them with '=' and reads them "
      "as integers; a DMA cannot copy it");
  EXPECT_EQ(first_error(
                kernel(decl, "        for t in range(2):\n            st[t] = t\n        o[...] = x[...]\n")),
            "8:16: a subscript of SMEM state 'st' must be a constant of literals and params, not 't' (each "
            "element is a scalar the checker follows across grid steps)");
  // A store of state is an integer expression (a store of data makes a data scratch, below).
  EXPECT_EQ(first_error(kernel(decl, "        st[0] = 1.5\n        o[...] = x[...]\n")),
            "7:17: a value stored into SMEM state 'st' must be an integer, but '1.5' is not an integer "
            "expression");
  // A condition may read it.
  EXPECT_EQ(
      first_error(kernel(decl, "        st[0] = 1\n        when st[0] == 1:\n            o[...] = x[...]\n")),
      "no error");
}

TEST(StateValidation, AnIndexMapCannotReadAPrefetchArrayTheBodyStoresInto) {
  EXPECT_EQ(first_error(kernel("    prefetch b: i32[1] = [0]\n",
                               "        b[0] = 1\n"
                               "        o[...] = x[...]\n",
                               "(4,)", "(i, b) -> (b[0], 0)")),
            "4:59: an index map cannot read 'b': the body stores into it (SMEM state), and when the pipeline "
            "evaluates an index map against the body's stores is not modelled");
}

TEST(StateElaboration, StateInAnEmitPipelineBodyIsALocatedNotSupported) {
  KernelSpec k = kernel_ok("kernel s:\n"
                           "    grid = (2,)\n"
                           "    scratch st: i32[1] memory_space=smem\n"
                           "    in  x: f32[256, 128]  memory_space=any\n"
                           "    out o: f32[256, 128]  memory_space=any\n"
                           "    body:\n"
                           "        st[0] = 1\n"
                           "        emit_pipeline(grid=(2,)):\n"
                           "            in  x: block=(64, 128)  index=(t) -> (program_id(0) * 2 + t, 0)\n"
                           "            out o: block=(64, 128)  index=(t) -> (program_id(0) * 2 + t, 0)\n"
                           "            body:\n"
                           "                o[...] = x[...] * st[0]\n");
  auto r = elaborate_state(k, {});
  EXPECT_FALSE(r.kernel);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors[0].loc.line, 8);
  EXPECT_EQ(r.errors[0].message, "not supported: SMEM state ('st') in an emit_pipeline's body or specs");
}

TEST(StateScratches, AnI32SmemScratchThatAStoreGivesDataIsADataScratchAndSoIsOneCopiedFromIt) {
  const std::string decls = "    scratch c: i32[1] memory_space=smem\n"
                            "    scratch d: i32[1] memory_space=smem\n"
                            "    scratch st: i32[1] memory_space=smem\n";
  // A count of positive elements: through a local, then copied into d; st counts steps.
  KernelSpec k = kernel_ok(kernel(decls, "        when program_id(0) == 0:\n"
                                         "            c[0] = 0\n"
                                         "            st[0] = 0\n"
                                         "        n = sum(cast(x[...] > 0.0, i32))\n"
                                         "        c[0] += n\n"
                                         "        d[0] = c[0]\n"
                                         "        st[0] = st[0] + 1\n"
                                         "        o[...] = x[...]\n"));
  EXPECT_EQ(state_scratches(k), std::set<std::string>{"st"});
  // Its reads are data: no condition or subscript.
  EXPECT_EQ(first_error(kernel(decls, "        c[0] = sum(cast(x[...] > 0.0, i32))\n"
                                      "        when c[0] > 3:\n"
                                      "            o[...] = x[...]\n")),
            "10:19: a 'when' condition must be an integer, but 'c[0] > 3' is not an integer expression "
            "('c' is an i32 SMEM scratch that a store gives data, a value read from a block, so its reads "
            "are data, not integers)");
  // Elaboration leaves it as it is and follows st alone.
  auto r = elaborate_state(k, param_env(k.params));
  ASSERT_TRUE(r.kernel) << r.unknown;
  EXPECT_NE(r.kernel->operand("c"), nullptr);
  EXPECT_NE(r.kernel->operand("d"), nullptr);
  EXPECT_EQ(r.kernel->operand("st"), nullptr);
}
