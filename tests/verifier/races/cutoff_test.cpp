// The grid cut (spec/cut.hpp, verifier/races/cutoff.hpp) against the whole
// grid: on generated kernels — grid ranks 1 to 4, affine index maps (and
// `g // q`, `g % q` ones; guards on `program_id(e) % 2`, masks and guards on
// `a * program_id(e) + lane`), ragged
// and squeezed blocks, guards on every axis, ring sizes 1 to 3, outputs that
// revisit their blocks, wrong init axes, blocks out of bounds, and Mosaic GPU
// kernels (CTA axes anywhere, wgmma into a register accumulator) — whenever a
// cut applies and its states recur, the cut program's run finds exactly the
// rules (at the same lines and grid points) that the whole lowered program's
// run finds.
// PIPECHECK_CUT_CASES sets the number of kernels (CI default 400),
// PIPECHECK_CUT_SEED the seed (default 1).
#include "spec/bind.hpp"
#include "spec/cut.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "verifier/check.hpp"
#include "verifier/races/cutoff.hpp"
#include "verifier/races/races.hpp"

#include "verifier/testing.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>
#include <sstream>

using namespace pipecheck;

namespace {

using verifier::testing::env_int;
std::optional<spec::KernelSpec> kernel(const std::string &text) {
  return verifier::testing::first_kernel(text);
}

std::string sum_kernel(int g0, int g1, int g2) {
  std::ostringstream os;
  os << "kernel s:\n    grid = (" << g0 << ", " << g1 << ", " << g2 << ")\n"
     << "    dimension_semantics = (parallel, parallel, arbitrary)\n"
     << "    in  x: f32[" << g2 << ", " << 8 * g0 << ", " << 128 * g1
     << "]  block=(None, 8, 128)  index=(i, j, k) -> (k, i, j)\n"
     << "    out o: f32[" << 8 * g0 << ", " << 128 * g1 << "]  block=(8, 128)  index=(i, j, k) -> (i, j)\n"
     << "    body:\n        when program_id(2) == 0:\n            o[...] = zeros\n        o[...] += x[...]\n";
  return os.str();
}

// A random kernel whose lowered program the cut may apply to.
std::string random_kernel(std::mt19937_64 &rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int rank = pick(1, 4);
  std::vector<int> grid(rank);
  for (auto &n : grid)
    n = pick(0, 3) == 0 ? pick(1, 3) : pick(6, rank <= 2 ? 24 : 9);
  std::string params;
  for (int a = 0; a < rank; ++a)
    params += (a ? ", g" : "g") + std::to_string(a);
  // An operand of rank 2 (or 3 with a squeezed leading dim): each component
  // a constant or a * g + c; its shape covers the blocks, sometimes raggedly,
  // sometimes one block short.
  const bool gpu = pick(0, 2) == 0;
  auto operand = [&](const std::string &role, const std::string &name, std::string extra,
                     std::vector<int> block = {4, 8}) {
    const bool squeezed = pick(0, 2) == 0;
    std::string map, shape, blk;
    int dims = squeezed ? 3 : 2;
    for (int d = 0; d < dims; ++d) {
      const bool sq = squeezed && d == 0;
      const int bs = sq ? 1 : block[squeezed ? d - 1 : d];
      std::string comp;
      int blocks = 1;
      if (pick(0, 3) == 0) {
        int c = pick(0, 1);
        comp = std::to_string(c);
        blocks = c + 1;
      } else if (pick(0, 24) == 0) {
        // A select of two axes (a causal kv map): both kept whole by the cut.
        const int axis = pick(0, rank - 1), other = pick(0, rank - 1);
        comp = "where(g" + std::to_string(axis) + " <= g" + std::to_string(other) + ", g" +
               std::to_string(axis) + ", 0)";
        blocks = grid[axis];
      } else if (pick(0, 4) == 0) {
        // A block shared by q consecutive values, or cycling with period q.
        const int axis = pick(0, rank - 1), q = pick(2, 3);
        const bool div = pick(0, 1) == 0;
        comp = "g" + std::to_string(axis) + (div ? " // " : " % ") + std::to_string(q);
        blocks = div ? (grid[axis] - 1) / q + 1 : std::min(q, grid[axis]);
      } else {
        int axis = pick(0, rank - 1), a = pick(1, 2), c = pick(0, 1);
        comp = (a > 1 ? std::to_string(a) + " * " : "") + "g" + std::to_string(axis) +
               (c ? " + " + std::to_string(c) : "");
        blocks = a * (grid[axis] - 1) + c + 1;
      }
      int extent = blocks * bs;
      if (!sq && pick(0, 4) == 0) extent -= bs / 2;            // ragged last block
      if (pick(0, 30) == 0) extent = std::max(1, extent - bs); // one block short
      map += (d ? ", " : "") + comp;
      shape += (d ? ", " : "") + std::to_string(extent);
      blk += (d ? ", " : "") + (sq ? std::string("None") : std::to_string(bs));
    }
    return "    " + role + " " + name + ": f32[" + shape + "]  block=(" + blk + ")  index=(" + params +
           ") -> (" + map + ")" + extra + "\n";
  };
  std::string text = "kernel k:\n    grid = (";
  for (int a = 0; a < rank; ++a)
    text += (a ? ", " : "") + std::to_string(grid[a]);
  text += rank == 1 ? ",)\n" : ")\n";
  if (gpu) {
    // Mosaic GPU: some axes parallel (one CTA each), the rest one pipeline per CTA.
    text += "    target = h200\n    max_concurrent_steps = " + std::to_string(pick(1, 3)) +
            "\n    dimension_semantics = (";
    for (int a = 0; a < rank; ++a)
      text += std::string(a ? ", " : "") + (pick(0, 1) ? "parallel" : "arbitrary");
    text += ")\n";
    if (pick(0, 1)) {
      // A wgmma reduction into a register accumulator, stored at the last step.
      const int axis = pick(0, rank - 1);
      text += operand("in ", "x", "");
      text += operand("in ", "y", "", {8, 8});
      text += operand("out", "o", "");
      text += "    scratch acc: f32[4, 8] memory_space=acc\n    body:\n"
              "        acc[...] += dot(x[...], y[...])\n        when program_id(" +
              std::to_string(axis) + ") == num_programs(" + std::to_string(axis) +
              ") - 1:\n            o[...] = acc[...]\n";
      return text;
    }
    text += operand("in ", "x", "");
  } else {
    text += operand("in ", "x", pick(0, 2) == 0 ? "  buffered=" + std::to_string(pick(1, 3)) : "");
  }
  text += operand("out", "o", "");
  // The x and o views must agree in shape for the body's elementwise ops; a
  // squeezed operand's view is the same 4 x 8 block.
  text += "    body:\n";
  const int axis = pick(0, rank - 1);
  std::string guard = pick(0, 3) == 0 ? "program_id(" + std::to_string(axis) + ") % 2 == 0"
                      : pick(0, 1)
                          ? "program_id(" + std::to_string(axis) + ") == 0"
                          : "program_id(" + std::to_string(axis) + ") < " + std::to_string(pick(1, 3));
  // An axis the body names in a value (kept whole by the cut), or a guard
  // that compares two axes (both kept whole).
  const std::string other = std::to_string(pick(0, rank - 1));
  switch (pick(0, 6)) {
  case 0: text += "        o[...] = x[...] + 1\n"; break;
  case 6: {
    // A guard and a mask on `a * program_id(e) + r` compared with a constant:
    // they change at a few values of the axis, where the constant falls.
    const int n = grid[axis], b1 = pick(-2, 3 * n + 2), b2 = pick(0, 4 * n + 4);
    const std::string pid = "program_id(" + std::to_string(axis) + ")";
    // (Or both sides varying: `program_id * 3 >= b1 - program_id`.)
    const std::string guard = pick(0, 2) == 0
                                  ? pid + " * 3 >= " + std::to_string(b1) + " - " + pid
                                  : pid + " * 3 - 2 " + (pick(0, 1) ? ">= " : "< ") + std::to_string(b1);
    text += "        r = " + pid + " * 4 + iota((4, 8), 0)\n        when " + guard +
            ":\n            o[...] = zeros\n" + "        o[...] += where(r < " + std::to_string(b2) +
            ", x[...], 0.0)\n";
    break;
  }
  case 4: text += "        o[...] = x[...] + cast(program_id(" + other + "), f32)\n"; break;
  case 5:
    text += "        when program_id(" + std::to_string(axis) +
            ") == 0:\n            o[...] = zeros\n"
            "        when program_id(" +
            other + ") <= program_id(" + std::to_string(axis) + ") + 1:\n            o[...] += x[...]\n";
    break;
  case 1:
    text += "        when " + guard + ":\n            o[...] = zeros\n        o[...] += x[...]\n";
    break;
  case 2:
    text += "        when program_id(" + std::to_string(axis) + ") == num_programs(" + std::to_string(axis) +
            ") - 1:\n            o[...] = x[...]\n";
    break;
  default:
    text += "        when " + guard + ":\n            o[...] = x[...]\n        when program_id(" +
            std::to_string(axis) + ") >= num_programs(" + std::to_string(axis) + ") - " +
            std::to_string(pick(1, 2)) + ":\n            o[...] += x[...] * 2\n";
  }
  return text;
}

// Each finding's rule, line and the kernel grid point of its anchor event
// (mapped back from the cut when `cut` is set), sorted.
std::string describe(const std::vector<verifier::Finding> &fs, const spec::Lowered &low,
                     const spec::GridCut *cut) {
  std::set<std::string> out;
  for (const auto &f : fs) {
    std::string at;
    for (const auto &t : f.witness.trace)
      if (t.anchor && t.top_level >= 0) {
        auto p = low.point(low.step(t.top_level, t.iterations));
        at = spec::format_tuple(cut ? cut->kernel_point(p) : p);
      }
    out.insert(verifier::to_string(f.rule) + "@" + std::to_string(f.loc.line) + at);
  }
  std::string s;
  for (const auto &x : out)
    s += x + " ";
  return s.empty() ? "(none)" : s;
}

// A Mosaic GPU matmul on grid (m, n, k) of 128 x 128 output tiles and 64-wide
// k tiles, two slots per operand, with `body` over its register accumulator.
std::string mosaic_matmul(int m, int n, int k, int delay, const std::string &body) {
  const std::string rows = std::to_string(128 * m), cols = std::to_string(128 * n),
                    depth = std::to_string(64 * k);
  return "kernel mm:\n    target = h200\n    grid = (" + std::to_string(m) + ", " + std::to_string(n) + ", " +
         std::to_string(k) +
         ")\n    dimension_semantics = (parallel, parallel, sequential)\n"
         "    max_concurrent_steps = 2\n    delay_release = " +
         std::to_string(delay) + "\n    in  a: bf16[" + rows + ", " + depth +
         "]  block=(128, 64)  index=(i, j, k) -> (i, k)\n    in  b: bf16[" + depth + ", " + cols +
         "]  block=(64, 128)  index=(i, j, k) -> (k, j)\n    out o: f32[" + rows + ", " + cols +
         "]   block=(128, 128) index=(i, j, k) -> (i, j)\n"
         "    scratch acc: f32[128, 128] memory_space=acc\n    body:\n" +
         body;
}

} // namespace

TEST(GridCut, AMillionStepReductionIsProvenOnACutOfSixValuesPerAxis) {
  auto k = kernel(sum_kernel(64, 128, 128));
  ASSERT_TRUE(k);
  verifier::Verdict v = verifier::check(*k, {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("1048576 grid steps) is race-free: checked on its grid cut to (6, 6, 6)"),
            std::string::npos)
      << v.reason;
}

TEST(GridCut, AMosaicGpuMatmulOfHalfAMillionStepsIsProvenAndItsMissingDelayReleaseFound) {
  auto text = [](int delay) {
    return mosaic_matmul(
        64, 64, 128, delay,
        "        acc[...] += dot(a[...], b[...])\n"
        "        when program_id(2) == num_programs(2) - 1:\n            o[...] = acc[...]\n");
  };
  auto good = kernel(text(1)), bad = kernel(text(0));
  ASSERT_TRUE(good && bad);
  verifier::Verdict v = verifier::check(*good, {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("(524288 grid steps) is race-free: checked on its grid cut to (6, 6, 6)"),
            std::string::npos)
      << v.reason;
  verifier::Verdict w = verifier::check(*bad, {});
  EXPECT_EQ(w.status, verifier::Status::violation) << w.reason;
  bool found = false;
  for (const auto &f : w.findings)
    if (f.rule == verifier::Rule::async_operand_overwritten) {
      found = true;
      EXPECT_NE(f.message.find("at grid point (0, 0, 0)"), std::string::npos) << f.message;
    }
  EXPECT_TRUE(found);
}

TEST(GridCut, ABodyThatReadsProgramIdOutsideAComparisonHasNoCutAndSaysWhy) {
  auto k = kernel(
      "kernel k:\n    grid = (5000,)\n    in  x: f32[40000, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
      "    out o: f32[40000, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
      "        t = program_id(0)\n        o[...] = x[...] + cast(t, f32)\n");
  ASSERT_TRUE(k);
  spec::CutPlan p = spec::plan_cut(*k, {}, 2, 1);
  EXPECT_FALSE(p.cut);
  EXPECT_NE(p.reason.find("'t', which holds program_id(0), is used at line 7 other than in a comparison"),
            std::string::npos)
      << p.reason;
  k = kernel(
      "kernel k:\n    grid = (5000,)\n    in  x: f32[40000, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
      "    out o: f32[40000, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
      "        o[...] = x[...] + cast(program_id(0), f32)\n");
  ASSERT_TRUE(k);
  p = spec::plan_cut(*k, {}, 2, 1);
  EXPECT_FALSE(p.cut);
  EXPECT_NE(p.reason.find("program_id(0) at line 6"), std::string::npos) << p.reason;
}

// A ragged last block's mask, `program_id(0) * B + lane < n` (through
// locals too): the comparison changes at one value of the axis, the last,
// and the cut moves n down with the programs it moves.
TEST(GridCut, AMaskOfAProgramsRowsAgainstTheArraysExtentIsCutAndMovedWithTheRows) {
  const std::string text = "kernel k:\n    param m = 39999\n    grid = (cdiv(m, 8),)\n"
                           "    in  x: f32[m, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    out o: f32[m, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
                           "        pid = program_id(0)\n"
                           "        rows = pid * 8 + iota((8, 128), 0)\n"
                           "        o[...] = where(rows < m, x[...], 0.0)\n";
  auto k = kernel(text);
  ASSERT_TRUE(k);
  spec::CutPlan p = spec::plan_cut(*k, {}, 2, 1);
  ASSERT_TRUE(p.cut) << p.reason;
  EXPECT_EQ(p.reason, "");
  const std::int64_t drop = p.cut->axes[0].drop;
  EXPECT_GT(drop, 4900);
  EXPECT_EQ(p.cut->grid[0], 5000 - drop);
  // The cut body compares with m - 8 * D: at the cut's last value, the
  // kernel's last, one row of eight is in.
  const spec::KernelSpec cut = spec::cut_body(*k, {}, *p.cut);
  std::ostringstream os;
  os << cut.body.back();
  EXPECT_NE(os.str().find("rows < " + std::to_string(39999 - 8 * drop)), std::string::npos) << os.str();
  verifier::Verdict v = verifier::check(*k, {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("checked on its grid cut"), std::string::npos) << v.reason;
  // Used in a value as well, the local keeps the axis whole.
  auto used = kernel(text + "        o[...] = x[...] + cast(rows, f32)\n");
  ASSERT_TRUE(used);
  p = spec::plan_cut(*used, {}, 2, 1);
  EXPECT_FALSE(p.cut);
  EXPECT_NE(p.reason.find("'rows', which holds program_id(0), is used at line 10"), std::string::npos)
      << p.reason;
}

TEST(GridCut, AnAxisTheBodyNamesInAValueIsKeptWholeWhileTheOthersAreCut) {
  // A causal mask names axes 0 and 2; axis 1 (the batch) repeats and is cut.
  auto k = kernel("kernel k:\n    grid = (8, 5000, 8)\n"
                  "    dimension_semantics = (parallel, parallel, arbitrary)\n"
                  "    in  x: f32[64, 40000, 1024]  block=(8, 8, 128)  index=(i, b, j) -> (i, b, j)\n"
                  "    out o: f32[64, 40000, 1024]  block=(8, 8, 128)  index=(i, b, j) -> (i, b, j)\n"
                  "    body:\n"
                  "        keep = iota((8, 8, 128), 0) + program_id(0) * 8 >= iota((8, 8, 128), 2) + "
                  "program_id(2) * 128\n"
                  "        o[...] = where(keep, x[...], 0.0)\n");
  ASSERT_TRUE(k);
  spec::CutPlan p = spec::plan_cut(*k, {}, 2, 1);
  ASSERT_TRUE(p.cut) << p.reason;
  EXPECT_EQ(p.cut->axes[0].drop, 0);
  EXPECT_GT(p.cut->axes[1].drop, 0);
  EXPECT_EQ(p.cut->axes[2].drop, 0);
  EXPECT_EQ(p.cut->grid[0], 8);
  EXPECT_EQ(p.cut->grid[2], 8);
  EXPECT_NE(p.reason.find("program_id(0) at line 7"), std::string::npos) << p.reason;
  verifier::Verdict v = verifier::check(*k, {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("(320000 grid steps) is race-free: checked on its grid cut to (8, 6, 8)"),
            std::string::npos)
      << v.reason;
}

TEST(GridCut, ACutThatKeepsLongAxesWholeAndStaysPastTheConcreteLimitIsUnknownAndSaysWhy) {
  auto k = kernel("kernel k:\n    grid = (300, 300, 300)\n"
                  "    in  x: f32[2400, 300, 38400]  block=(8, 1, 128)  index=(i, b, j) -> (i, b, j)\n"
                  "    out o: f32[2400, 300, 38400]  block=(8, 1, 128)  index=(i, b, j) -> (i, b, j)\n"
                  "    body:\n"
                  "        o[...] = x[...] + cast(program_id(0) + program_id(2), f32)\n");
  ASSERT_TRUE(k);
  verifier::Verdict v = verifier::check(*k, {});
  EXPECT_EQ(v.status, verifier::Status::unknown) << v.reason;
  EXPECT_NE(v.reason.find("its cut to (300, 6, 300) still has 540000 steps: program_id(0) at line 6"),
            std::string::npos)
      << v.reason;
}

TEST(GridCut, ACutThatKeepsNamedAxesWholeFindsWhatTheWholeGridFinds) {
  // Mosaic GPU matmuls whose body names the row axis in a value: the
  // column axis is cut, the row axis runs whole. One skips the k blocks past
  // the diagonal, so at the first skipped step no wgmma_wait retires the
  // previous step's wgmma and the refill overwrites its operand slot even
  // with delay_release = 1; the other scales its output by the row.
  auto text = [](int delay, bool skip) {
    return mosaic_matmul(
        2, 600, 8, delay,
        skip ? "        when program_id(2) * 64 < program_id(0) * 128 + 128:\n"
               "            acc[...] += dot(a[...], b[...])\n"
               "        when program_id(2) == num_programs(2) - 1:\n            o[...] = acc[...]\n"
             : "        acc[...] += dot(a[...], b[...])\n"
               "        when program_id(2) == num_programs(2) - 1:\n"
               "            o[...] = acc[...] * cast(program_id(0) + 1, f32)\n");
  };
  for (bool skip : {false, true})
    for (int delay : {0, 1}) {
      auto k = kernel(text(delay, skip));
      ASSERT_TRUE(k);
      verifier::CheckOptions whole;
      whole.grid_cut = false;
      verifier::Verdict on_cut = verifier::check(*k, {}), walked = verifier::check(*k, whole);
      const auto want = skip || delay == 0 ? verifier::Status::violation : verifier::Status::verified;
      EXPECT_EQ(on_cut.status, want) << skip << delay << on_cut.reason;
      EXPECT_EQ(walked.status, want) << skip << delay << walked.reason;
      std::set<std::string> a, b;
      for (const auto &f : on_cut.findings)
        a.insert(verifier::to_string(f.rule) + "@" + std::to_string(f.loc.line));
      for (const auto &f : walked.findings)
        b.insert(verifier::to_string(f.rule) + "@" + std::to_string(f.loc.line));
      EXPECT_EQ(a, b) << skip << delay;
      EXPECT_TRUE(a.count("async-operand-overwritten@7") || want == verifier::Status::verified);
      // (The k axis is cut too where the body compares it only with a
      // constant; a violation found on the cut is re-run on the whole grid,
      // which is within what the race checker walks.)
      if (want == verifier::Status::verified) {
        EXPECT_NE(on_cut.reason.find("checked on its grid cut to (2, 6, 6)"), std::string::npos)
            << on_cut.reason;
      }
    }
}

TEST(GridCut, IndexMapsThatMixAxesOrRunBackwardsKeepThoseAxesWhole) {
  // The axes such a map names are kept whole, and the reason says why; an
  // axis the maps follow plainly is still cut.
  for (const char *map :
       {"(i + j, 0)", "(i * j, 0)", "(9 - i, 0)", "((2 * i) // 2, 0)", "(where(i <= j, j, 0), 0)"}) {
    const bool names_j = std::string(map).find('j') != std::string::npos;
    auto k = kernel(std::string("kernel k:\n    grid = (10, 10, 5000)\n"
                                "    in  x: f32[800, 128, 5000]  block=(8, 128, None)  index=(i, j, b) -> ") +
                    std::string(map).insert(std::string(map).size() - 1, ", b") +
                    "\n    out o: f32[80, 1280, 5000]  block=(8, 128, None)  index=(i, j, b) -> (i, j, b)\n"
                    "    body:\n        o[...] = x[...] + 1\n");
    ASSERT_TRUE(k) << map;
    spec::CutPlan p = spec::plan_cut(*k, {}, 2, 1);
    ASSERT_TRUE(p.cut) << map << ": " << p.reason;
    EXPECT_EQ(p.cut->axes[0].drop, 0) << map;
    EXPECT_EQ(p.cut->axes[1].drop == 0, names_j) << map;
    EXPECT_GT(p.cut->axes[2].drop, 0) << map;
    EXPECT_NE(p.reason.find("the index map of 'x' names axis 0"), std::string::npos)
        << map << ": " << p.reason;
    verifier::Verdict v = verifier::check(*k, {});
    EXPECT_EQ(v.status, verifier::Status::verified) << map << v.reason;
    EXPECT_NE(v.reason.find(names_j ? "checked on its grid cut to (10, 10, 6)"
                                    : "checked on its grid cut to (10, 6, 6)"),
              std::string::npos)
        << map << v.reason;
  }
}

TEST(GridCut, MapsThatShareABlockOverQStepsOrCycleWithPeriodQAreCutByAMultipleOfQ) {
  // o's block i // 2 is visited on two consecutive steps, y's cycles i % 3,
  // and the init runs on even steps: a period of 6 values.
  const std::string src = "kernel pairs:\n    grid = (65538,)\n    dimension_semantics = (arbitrary,)\n"
                          "    in  x: f32[524304, 128]  block=(8, 128)  index=(i,) -> (i, 0)\n"
                          "    in  y: f32[24, 128]  block=(8, 128)  index=(i,) -> (i % 3, 0)\n"
                          "    out o: f32[262152, 128]  block=(8, 128)  index=(i,) -> (i // 2, 0)\n"
                          "    body:\n        when program_id(0) % 2 == 0:\n"
                          "            o[...] = broadcast_to(0.0, (8, 128))\n"
                          "        o[...] += x[...] * y[...]\n";
  auto k = kernel(src);
  ASSERT_TRUE(k);
  spec::CutPlan p = spec::plan_cut(*k, {}, 2, 1);
  ASSERT_TRUE(p.cut) << p.reason;
  EXPECT_EQ(p.cut->axes[0].period % 6, 0);
  EXPECT_EQ(p.cut->axes[0].drop % 6, 0);
  ASSERT_EQ(p.cut->dims.size(), 2u); // x and o shrink with the axis, y keeps its 3 blocks
  for (const auto &d : p.cut->dims)
    EXPECT_EQ(d.shift(p.cut->axes[0].drop), (d.operand == "o" ? 4 : 8) * p.cut->axes[0].drop) << d.operand;
  auto v = verifier::check(*k, {});
  EXPECT_EQ(v.status, verifier::Status::verified) << v.reason;
  // Its twin inits on odd steps: the even steps add into a block nothing wrote.
  std::string odd = src;
  odd.replace(odd.find("% 2 == 0"), 8, "% 2 == 1");
  auto w = verifier::check(*kernel(odd), {});
  EXPECT_EQ(w.status, verifier::Status::violation) << w.reason;
}

TEST(GridCut, AFaultBeforeTheStateCouldRecurIsTheKernelsWhereTheCutStillMatchesIt) {
  // The wgmma runs on k % 7 == 4 and nothing retires it before step 5's
  // refill of its slot: the cut's run stops there, before any recurrence,
  // at a step the cut has not moved: the kernel's finding, at (0, 0, 5).
  auto k = kernel("kernel cut_fault:\n    param n = 70000\n    grid = (1, 1, n)\n"
                  "    dimension_semantics = (parallel, parallel, sequential)\n    target = h100\n"
                  "    max_concurrent_steps = 2\n    delay_release = 1\n"
                  "    in  a: bf16[64, n * 32]  block=(64, 32)  index=(i, j, k) -> (0, k)\n"
                  "    in  b: bf16[n * 32, 64]  block=(32, 64)  index=(i, j, k) -> (k, 0)\n"
                  "    out o: f32[64, 64]   block=(64, 64)  index=(i, j, k) -> (0, 0)\n"
                  "    scratch acc: f32[64, 64]  memory_space=acc\n    body:\n"
                  "        when program_id(2) % 7 == 4:\n            acc[...] += dot(a[...], b[...])\n"
                  "        when program_id(2) == num_programs(2) - 1:\n            o[...] = acc[...]\n");
  ASSERT_TRUE(k);
  auto v = verifier::check(*k, {});
  ASSERT_EQ(v.status, verifier::Status::violation) << v.reason;
  bool found = false;
  for (const auto &f : v.findings)
    if (f.rule == verifier::Rule::async_operand_overwritten) {
      found = true;
      EXPECT_NE(f.message.find("at grid point (0, 0, 5)"), std::string::npos) << f.message;
    }
  EXPECT_TRUE(found) << v.reason;
}

TEST(GridCut, GuardsSplitTheAxisAndTheLongestStretchIsCutByAMultipleOfThePeriod) {
  // Guards at 0, 5 and the last value: the longest stretch is [6, 99).
  auto k =
      kernel("kernel k:\n    grid = (100,)\n    in  x: f32[800, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
             "    out o: f32[800, 128]  block=(8, 128)  index=(i) -> (i, 0)\n    body:\n"
             "        o[...] = x[...]\n        when program_id(0) == 5:\n            o[...] += x[...]\n"
             "        when program_id(0) == num_programs(0) - 1:\n            o[...] += x[...]\n");
  ASSERT_TRUE(k);
  spec::CutPlan p = spec::plan_cut(*k, {}, 2, 1);
  ASSERT_TRUE(p.cut) << p.reason;
  const spec::AxisCut &ax = p.cut->axes[0];
  EXPECT_EQ(ax.first, 7); // lo = 6, one step of reach
  EXPECT_EQ(ax.drop % 2, 0);
  EXPECT_EQ(p.cut->grid[0], 100 - ax.drop);
  EXPECT_GE(ax.upper - ax.first, 2);
  // The last value's guard moves with the axis; the one at 5 stays.
  spec::KernelSpec cut = spec::cut_body(*k, {}, *p.cut);
  std::ostringstream body;
  for (const auto &s : cut.body)
    if (auto *i = std::get_if<spec::If>(&s.kind)) body << i->cond << ";";
  EXPECT_EQ(body.str(), "program_id(0) == 5;program_id(0) == " + std::to_string(p.cut->grid[0] - 1) + ";");
  EXPECT_EQ(p.cut->kernel_point({ax.first + 2}), std::vector<std::int64_t>{ax.first + 2 + ax.drop});
  EXPECT_EQ(p.cut->kernel_point({ax.first + 1}), std::vector<std::int64_t>{ax.first + 1});
}

TEST(GridCut, FindsExactlyTheRulesTheWholeGridFindsOnGeneratedKernels) {
  const std::int64_t cases = env_int("PIPECHECK_CUT_CASES", 400);
  std::mt19937_64 rng(static_cast<std::uint64_t>(env_int("PIPECHECK_CUT_SEED", 1)));
  int cut = 0, recurred = 0, with_findings = 0, gpu_recurred = 0, pid_recurred = 0;
  for (std::int64_t c = 0; c < cases; ++c) {
    const std::string text = random_kernel(rng);
    auto k = kernel(text);
    if (!k) continue; // a generated shape the validator rejects
    std::vector<spec::Diagnostic> errs;
    spec::LowerOptions lo;
    lo.check_blocks = false;
    auto whole = spec::lower(*k, lo, errs);
    if (!whole || whole->main_loop < 0) continue;
    std::int64_t period = 1;
    for (const auto &b : whole->program.buffers)
      if (b.slots) period = std::lcm(period, *spec::eval_int(*b.slots, {}));
    // As the kernel check does: the smaller cut, then one with a window.
    spec::CutPlan plan;
    std::optional<spec::Lowered> low;
    verifier::races::CutCheck cc;
    for (std::int64_t window : {std::int64_t{0}, period}) {
      plan = spec::plan_cut(*k, {}, period, spec::step_reach(whole->program, whole->main_loop), window);
      if (!plan.cut) break;
      lo.cut = &*plan.cut;
      low = spec::lower(*k, lo, errs);
      ASSERT_TRUE(low) << text;
      cc = verifier::races::check_cut(*low, *plan.cut);
      if (cc.recurs) break;
    }
    if (!plan.cut) continue;
    ++cut;
    if (!cc.recurs) continue;
    ++recurred;
    gpu_recurred += text.find("target = h200") != std::string::npos;
    pid_recurred += text.find("iota((4, 8), 0)\n") != std::string::npos;
    auto whole_findings = verifier::races::check_concrete(whole->program, {});
    with_findings += !whole_findings.empty();
    EXPECT_EQ(describe(cc.findings, *low, &*plan.cut), describe(whole_findings, *whole, nullptr)) << text;
  }
  std::cout << cases << " kernels: " << cut << " cut, " << recurred << " recurred (" << gpu_recurred
            << " Mosaic GPU, " << pid_recurred << " with a guard and mask on a program's rows), "
            << with_findings << " of them with findings\n";
  // Not vacuous: most cuts close, and buggy kernels are among them.
  EXPECT_GT(recurred, cases / 4);
  EXPECT_GT(with_findings, 0);
  EXPECT_GT(gpu_recurred, cases / 20);
  EXPECT_GT(pid_recurred, cases / 50);
}
