// spec/ir: the masked loads of a value (spec::masked_loads), which the
// checker's Triton rules and the executor both take from here, and the
// locals a later `when` discards (spec::local_discards), which the checker's
// model and the lowered program's stepper both take from here.
#include "spec/ir.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace pipecheck::spec;

namespace {

// The value of `o[...] = <text>` in a one-statement kernel.
Expr value(const std::string &text) {
  auto r = parse(SourceFile::from_string("e.pk", "kernel k:\n    grid = (1,)\n    in  x: f32[8]\n"
                                                 "    in  y: f32[8]\n    out o: f32[8]\n    body:\n"
                                                 "        o[...] = " +
                                                     text + "\n"));
  EXPECT_TRUE(r.file) << text;
  const auto &body = std::get<KernelSpec>(r.file->units.at(0)).body;
  return std::get<Assign>(body.at(0).kind).value;
}

// The names of the masked refs, in any order, sorted.
std::vector<std::string> masked(const std::string &text) {
  const Expr v = value(text);
  std::vector<std::string> out;
  for (const Expr *e : masked_loads(v))
    out.push_back(e->name);
  std::sort(out.begin(), out.end());
  return out;
}

using Names = std::vector<std::string>;

} // namespace

TEST(MaskedLoads, ARefInAWheresBranchIsMaskedThroughElementwiseOperations) {
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, x[...], 0.0)"), (Names{"x"}));
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, exp(x[...]) * y[...] + 1.0, 0.0)"), (Names{"x", "y"}));
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, 0.0, x[...])"), (Names{"x"}));
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, where(x[...] > 0.0, y[...], 0.0), 0.0)"), (Names{"x", "y"}));
}

TEST(MaskedLoads, TheConditionAndWhatIsOutsideAWhereLoadEveryLane) {
  EXPECT_EQ(masked("x[...] + 1.0"), Names{});
  EXPECT_EQ(masked("where(x[...] > 0.0, 1.0, 0.0)"), Names{});
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, x[...], 0.0) + y[...]"), (Names{"x"}));
}

TEST(MaskedLoads, ABranchWithANonElementwiseReadMasksNothingInIt) {
  // A reduction's lanes are not the mask's: Triton loads its operand whole.
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, x[...] + sum(y[...], axis=0), 0.0)"), Names{});
  EXPECT_EQ(masked("where(iota((8,), 0) < 5, x[...] + sum(iota((8,), 0), axis=0), 0.0)"), (Names{"x"}));
}

TEST(LoadMasks, EachMaskedRefCarriesTheConditionOfTheNearestWhereAboveItWithItsBranch) {
  const Expr v = value("where(iota((8,), 0) < 5, where(x[...] > 0.0, y[...], 0.0), x[...])");
  const auto masks = load_masks(v);
  ASSERT_EQ(masks.size(), 3u);
  std::vector<std::pair<std::string, std::vector<bool>>> got;
  for (const auto &[ref, mask] : masks)
    got.emplace_back(ref->name, std::vector<bool>{mask.holds});
  std::sort(got.begin(), got.end());
  // x in the inner condition: the outer where's first branch; y: the inner
  // where's (the nearest: the outer one selects among its lanes); the
  // second x: the outer where's second branch.
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::vector<bool>>>{
                     {"x", {false}}, {"x", {true}}, {"y", {true}}}));
}

TEST(SelectedLanes, MasksBroadcastAgainstTheValueAndABroadcastValueLaneIsReadWhereAnyIs) {
  // A (2, 1) mask and a (1, 3) mask against a (2, 3) value: where both hold.
  EXPECT_EQ(selected_lanes({{{2, 1}, {true, false}}, {{1, 3}, {false, true, true}}}, {2, 3}),
            (std::vector<bool>{false, true, true, false, false, false}));
  // A (3,) value broadcast against a (2, 3) mask: a lane is read where
  // either row selects it.
  EXPECT_EQ(selected_lanes({{{2, 3}, {true, false, false, false, false, true}}}, {3}),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(selected_lanes({{{4}, {true, true, true, true}}}, {3}), std::nullopt);
}

namespace {
// For each top-level let of the body, in order: "name:" and each discard
// as "!cond" (the value is used only where cond fails) or "cond".
std::vector<std::string> discards(const std::string &body) {
  auto r = parse(SourceFile::from_string("d.pk", "kernel k:\n    grid = (4,)\n    in  x: f32[8]\n"
                                                 "    out o: f32[8]  block=(8,)  index=(i) -> (0)\n"
                                                 "    body:\n" +
                                                     body));
  EXPECT_TRUE(r.file) << body;
  if (!r.file) return {};
  const auto &b = std::get<KernelSpec>(r.file->units.at(0)).body;
  const auto found = local_discards(b);
  std::vector<std::string> out;
  for (const auto &s : b)
    if (const auto *l = std::get_if<Let>(&s.kind)) {
      std::string line = l->name + ":";
      if (auto d = found.find(&s); d != found.end())
        for (const auto &x : d->second)
          line += std::string(" ") + (x.holds ? "" : "!") + print(*x.cond);
      out.push_back(line);
    }
  return out;
}
} // namespace

TEST(LocalDiscards, AWhenThatRebindsALocalBeforeAnyUseDiscardsItsValueWhereItRuns) {
  using Lines = std::vector<std::string>;
  // lax.cond's init through a local: the read is used only where k != 0.
  EXPECT_EQ(discards("        b = o[...]\n        when program_id(0) == 0:\n            b = zeros\n"
                     "        o[...] = b + x[...]\n"),
            (Lines{"b: !program_id(0) == 0"}));
  // Rebound in the else branch: used only where the condition holds.
  EXPECT_EQ(discards("        b = o[...]\n        if program_id(0) > 0:\n            o[...] = b + x[...]\n"
                     "        else:\n            b = zeros\n            o[...] = b + x[...]\n"),
            (Lines{"b: program_id(0) > 0"}));
  // Two whens, each rebinding: used only where neither runs; a statement
  // between that names neither b nor the conditions' names is passed over.
  EXPECT_EQ(discards("        b = o[...]\n        y = x[...] * 2.0\n        when program_id(0) == 0:\n"
                     "            b = zeros\n        when program_id(0) == 1:\n            b = y\n"
                     "        o[...] = b + y\n"),
            (Lines{"b: !program_id(0) == 0 !program_id(0) == 1", "y:"}));
  // A select rebinding b from b: used only where the select keeps it.
  EXPECT_EQ(
      discards(
          "        b = o[...]\n        b = where(program_id(0) == 0, 0.0, b)\n        o[...] = b + x[...]\n"),
      (Lines{"b: !program_id(0) == 0", "b:"}));
}

TEST(LocalDiscards, AUseOrAChangedConditionBeforeTheRebindingKeepsTheValue) {
  using Lines = std::vector<std::string>;
  // The branch rebinds b from b: the old value is used where it runs.
  EXPECT_EQ(discards("        b = o[...]\n        when program_id(0) == 0:\n            b = b * 0.0\n"
                     "        o[...] = b + x[...]\n"),
            (Lines{"b:"}));
  // b used before the when.
  EXPECT_EQ(discards("        b = o[...]\n        y = b * 2.0\n        when program_id(0) == 0:\n"
                     "            b = zeros\n        o[...] = b + y\n"),
            (Lines{"b:", "y:"}));
  // The condition's name rebound between: its value at the when is not the one at the let.
  EXPECT_EQ(discards("        k = 1\n        b = o[...]\n        k = program_id(0)\n        when k == 0:\n"
                     "            b = zeros\n        o[...] = b + x[...]\n"),
            (Lines{"k:", "b:", "k:"}));
  // The branch reads b before rebinding it.
  EXPECT_EQ(discards("        b = o[...]\n        when program_id(0) == 0:\n            o[...] = b\n"
                     "            b = zeros\n        o[...] = b + x[...]\n"),
            (Lines{"b:"}));
}
