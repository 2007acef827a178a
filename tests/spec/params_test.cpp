// spec::bind_params and spec::unknown_params: the one param binder.
#include "spec/eval.hpp"
#include "spec/parse.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

std::vector<Param> params_of(const std::string &decls) {
  SourceFile src =
      SourceFile::from_string("p.pk", "pipeline p:\n" + decls +
                                          "    hbm A: f32[8]\n    sram X: f32[8]\n    copy_in_start(A, X)\n"
                                          "    copy_in_wait(X)\n");
  auto r = parse_and_validate(src);
  EXPECT_TRUE(r.file) << (r.errors.empty() ? "" : r.errors.front().message);
  if (!r.file) return {};
  return std::get<Program>(r.file->units.at(0)).params;
}

} // namespace

TEST(BindParams, BindsValuesAndOverridesInOrderAndLeavesASymbolicParamUnbound) {
  auto ps = params_of("    param a = 4\n    param b = a * 2\n    param n >= 1\n");
  ParamBinding b = bind_params(ps, {{"a", 5}}, false);
  EXPECT_TRUE(b.errors.empty());
  EXPECT_EQ(b.env, (Env{{"a", 5}, {"b", 10}}));
}

TEST(BindParams, AnOverrideOutsideTheBoundsIsALocatedError) {
  auto ps = params_of("    param n >= 1 <= 64\n");
  for (std::int64_t v : {0, 65}) {
    ParamBinding b = bind_params(ps, {{"n", v}}, false);
    ASSERT_EQ(b.errors.size(), 1u) << v;
    EXPECT_EQ(b.errors[0].loc.line, 2);
    EXPECT_EQ(b.errors[0].message,
              "param n = " + std::to_string(v) + " (from --set) is outside its domain n >= 1 <= 64");
    EXPECT_FALSE(b.env.count("n"));
  }
  EXPECT_TRUE(bind_params(ps, {{"n", 64}}, false).errors.empty());
}

TEST(BindParams, RequiringAllNamesTheSymbolicParamInsteadOfPickingADefault) {
  auto ps = params_of("    param m >= 1\n");
  ParamBinding b = bind_params(ps, {}, true);
  ASSERT_EQ(b.errors.size(), 1u);
  EXPECT_EQ(b.errors[0].message, "param m is symbolic: bind it with --set m=VALUE");
  EXPECT_TRUE(b.env.empty());
}

TEST(UnknownParams, NamesEachUnknownOverrideAndSuggestsACloseName) {
  auto u = unknown_params({{"M", 1024}, {"zz", 3}, {"m", 1}, {"blok", 2}}, {"m", "block"});
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u["M"], "no param named 'M'; did you mean `m`?");
  EXPECT_EQ(u["zz"], "no param named 'zz'");
  EXPECT_EQ(u["blok"], "no param named 'blok'; did you mean `block`?");
}
