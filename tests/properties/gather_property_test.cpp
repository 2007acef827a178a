// A Triton gather through an open prefetch table (`o[r, :] = x[t[k] + c, :]`)
// is decided once for every allowed table (the solver over the table's
// elements, verifier/rules/symbolic.cpp's copy addresses); the same kernel
// with each allowed table given is decided by the element pass alone. On
// small generated kernels (at most 64 tables) the two agree: violation
// exactly where some table is one, and the witness table is one of them.
// 200 cases in CI; RC_PARAMS="max_success=2000" for more.
#include "verifier/check.hpp"
#include "verifier/testing.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace pipecheck {
namespace {

struct BoundedGatherCounts {
  BoundedGatherCounts() { setenv("RC_PARAMS", "max_success=200", 0); }
} bounded_gather_counts;

struct GatherKernel {
  int programs = 1, rows = 4, block = 4, length = 2, lo = 0, hi = 4, offset = 0, rotate = 0;

  // The kernel with its table described by `in [lo, hi)`, or given.
  std::string text(const std::vector<int> *given = nullptr) const {
    std::string table = "in [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
    if (given) {
      table = "= [";
      for (std::size_t i = 0; i < given->size(); ++i)
        table += (i ? ", " : "") + std::to_string((*given)[i]);
      table += "]";
    }
    const std::string nb = "cdiv(" + std::to_string(rows) + ", " + std::to_string(block) + ")";
    return "kernel g:\n"
           "    grid = (" +
           std::to_string(programs) +
           ",)\n"
           "    backend = triton\n"
           "    prefetch t: i32[" +
           std::to_string(length) + "] " + table +
           "\n"
           "    in  x: f32[" +
           std::to_string(rows) + ", 8]  block=(" + std::to_string(block) + ", 8)  index=(i, tt) -> (i % " +
           nb +
           ", 0)\n"
           "    out o: f32[" +
           std::to_string(programs * length) + ", 8]  block=(" + std::to_string(length) +
           ", 8)  index=(i, tt) -> (i, 0)\n"
           "    body:\n"
           "        for r in range(" +
           std::to_string(length) +
           "):\n"
           "            o[r, :] = x[t[(r + " +
           std::to_string(rotate) + ") % " + std::to_string(length) + "] + " + std::to_string(offset) +
           ", :]\n";
  }
};

// (A kernel that does not validate is `unknown`, which the property refuses.)
verifier::Verdict check_text(const std::string &text) {
  const auto k = verifier::testing::first_kernel(text);
  if (k) return verifier::check(*k, {});
  verifier::Verdict v;
  v.status = verifier::Status::unknown;
  return v;
}

// Every table of `length` elements in [lo, hi), in order.
std::vector<std::vector<int>> tables(const GatherKernel &k) {
  std::vector<std::vector<int>> out{{}};
  for (int i = 0; i < k.length; ++i) {
    std::vector<std::vector<int>> next;
    for (const auto &t : out)
      for (int v = k.lo; v < k.hi; ++v) {
        auto u = t;
        u.push_back(v);
        next.push_back(std::move(u));
      }
    out = std::move(next);
  }
  return out;
}

RC_GTEST_PROP(GatherProperty, AnOpenTableIsDecidedAsEveryAllowedTableGivenIs, ()) {
  GatherKernel k;
  k.programs = *rc::gen::inRange(1, 4);
  k.rows = *rc::gen::inRange(2, 9);
  k.block = *rc::gen::inRange(1, k.rows + 1);
  k.length = *rc::gen::inRange(1, 4);
  k.lo = *rc::gen::inRange(-1, 2);
  k.hi = k.lo + *rc::gen::inRange(1, 5);
  k.offset = *rc::gen::inRange(-1, 2);
  k.rotate = *rc::gen::inRange(0, k.length);
  const std::string open = k.text();
  RC_LOG() << open;
  const verifier::Verdict v = check_text(open);
  RC_ASSERT(v.status != verifier::Status::unknown);
  bool some_violation = false;
  for (const auto &t : tables(k)) {
    const verifier::Verdict one = check_text(k.text(&t));
    RC_ASSERT(one.status != verifier::Status::unknown);
    some_violation = some_violation || one.status == verifier::Status::violation;
  }
  RC_ASSERT((v.status == verifier::Status::violation) == some_violation);
  if (v.status != verifier::Status::violation) return;
  // The gather's own finding, at its statement (line 9), not another rule's
  // consequence of it.
  bool at_load = false;
  for (const auto &f : v.findings)
    at_load = at_load || (f.rule == verifier::Rule::index_out_of_bounds && f.loc.line == 9);
  RC_ASSERT(at_load);
  // The witness table, given, is a violation too.
  for (const auto &f : v.findings)
    for (const auto &item : f.witness.items)
      if (item.key == "t") {
        const auto &vals = std::get<std::vector<std::int64_t>>(item.value);
        const std::vector<int> given(vals.begin(), vals.end());
        RC_ASSERT(check_text(k.text(&given)).status == verifier::Status::violation);
        return;
      }
}

TEST(GatherProperty, TheComparisonSeesATableThatReachesPastTheArray) {
  // Rows 0..3 of x, a table that may name row 4: found open and given.
  GatherKernel k;
  k.rows = 4;
  k.block = 4;
  k.length = 2;
  k.lo = 0;
  k.hi = 5;
  EXPECT_EQ(check_text(k.text()).status, verifier::Status::violation);
  const std::vector<int> bad = {0, 4}, good = {3, 0};
  EXPECT_EQ(check_text(k.text(&bad)).status, verifier::Status::violation);
  EXPECT_EQ(check_text(k.text(&good)).status, verifier::Status::verified);
}

} // namespace
} // namespace pipecheck
