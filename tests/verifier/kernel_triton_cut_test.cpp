// A Triton kernel's check on its grid cut (verifier/kernel.cpp,
// spec_rules_on_cut) against the whole grid: on generated Triton kernels of
// 257 to 3000 programs — grid ranks 1 to 3, affine index maps (and `g // q`,
// `g % q`, constant ones), ragged and short arrays, masked and unmasked
// loads and stores, stores that reach past the program's block into its
// neighbours', guards on program_id compared with constants, masks of a
// program's rows (`program_id(a) * 4 + iota(...) < n`, through locals too,
// `b - program_id(a) * 4 > iota(...)` with both sides varying),
// outputs read before they are stored — the cut finds exactly the rules, at the same
// lines, that the whole grid finds, with the same verdict, and at the same
// grid points where both keep a witness on the same operand.
// PIPECHECK_TRITON_CUT_CASES sets the number of kernels (CI default 300),
// PIPECHECK_TRITON_CUT_SEED the seed (default 1).
#include "spec/bind.hpp"
#include "verifier/check.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>
#include <sstream>

using namespace pipecheck;

namespace {

using verifier::testing::env_int;
std::optional<spec::KernelSpec> kernel(const std::string &text) {
  return verifier::testing::first_kernel(text);
}

verifier::Verdict check(const spec::KernelSpec &k, bool cut) {
  verifier::CheckOptions o;
  o.grid_cut = cut;
  return verifier::check(std::variant<spec::KernelSpec, spec::Program>(k), o);
}

// (rule, line) -> the operand and grid point of its witness (empty where
// none). Of several findings of one rule at one line the rules keep the one
// with the smallest witness, in the cut's coordinates there: one of the same
// faults, perhaps of another operand.
using Described = std::map<std::pair<std::string, int>, std::pair<std::string, std::vector<std::int64_t>>>;
Described described(const verifier::Verdict &v) {
  Described out;
  for (const auto &f : v.findings) {
    const auto *p = f.witness.get<std::vector<std::int64_t>>("grid_point");
    const auto *op = f.witness.get<std::string>("operand");
    out[{std::string(verifier::id(f.rule)), f.loc.line}] = {op ? *op : "",
                                                            p ? *p : std::vector<std::int64_t>{}};
  }
  return out;
}

// The (rule, line)s of `a` absent from `b`, or whose witness names the same
// operand at another grid point.
std::string differences(const Described &a, const Described &b) {
  std::string out;
  for (const auto &[key, w] : a) {
    auto it = b.find(key);
    if (it == b.end())
      out += key.first + " on line " + std::to_string(key.second) + " missing; ";
    else if (it->second.first == w.first && it->second.second != w.second)
      out += key.first + " on line " + std::to_string(key.second) + " at " + spec::format_tuple(w.second) +
             " and " + spec::format_tuple(it->second.second) + "; ";
  }
  return out;
}

bool on_cut(const verifier::Verdict &v) {
  if (v.reason.find("spec-level rule holds at every grid point (checked on its grid cut") !=
      std::string::npos)
    return true;
  for (const auto &f : v.findings)
    for (const auto &n : f.notes)
      if (n.message.rfind("found on its grid cut", 0) == 0) return true;
  return false;
}

// A random Triton kernel of more programs than the cut starts from.
std::string random_triton(std::mt19937_64 &rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int rank = pick(1, 3);
  std::vector<int> grid(rank);
  for (int a = 0; a < rank; ++a)
    grid[a] = rank == 1 ? pick(257, 600) : pick(0, 2) == 0 ? pick(1, 3) : pick(8, rank == 2 ? 60 : 14);
  std::string params;
  for (int a = 0; a < rank; ++a)
    params += (a ? ", g" : "g") + std::to_string(a);
  // A 2-D operand with blocks of 4 x 8: each component a constant, a * g +
  // c, g // q or g % q; its shape covers the blocks, sometimes raggedly,
  // sometimes one block short.
  auto operand = [&](const std::string &role, const std::string &name, bool tiling) {
    const int bs[2] = {4, 8};
    std::string map, shape;
    for (int d = 0; d < 2; ++d) {
      std::string comp;
      int blocks = 1;
      // (A tiling map: dim d follows axis d, or is one block.)
      const int kind = tiling ? (d < rank ? 2 : 0) : pick(0, 9);
      if (kind == 0) {
        const int c = tiling ? 0 : pick(0, 1);
        comp = std::to_string(c);
        blocks = c + 1;
      } else if (kind == 1) {
        const int axis = pick(0, rank - 1), q = pick(2, 3);
        const bool div = pick(0, 1) == 0;
        comp = "g" + std::to_string(axis) + (div ? " // " : " % ") + std::to_string(q);
        blocks = div ? (grid[axis] - 1) / q + 1 : std::min(q, grid[axis]);
      } else {
        const int axis = d < rank && (tiling || pick(0, 3) > 0) ? d : pick(0, rank - 1),
                  a = !tiling && pick(0, 4) == 0 ? 2 : 1, c = !tiling && pick(0, 5) == 0 ? 1 : 0;
        comp = (a > 1 ? std::to_string(a) + " * " : "") + "g" + std::to_string(axis) +
               (c ? " + " + std::to_string(c) : "");
        blocks = a * (grid[axis] - 1) + c + 1;
      }
      int extent = blocks * bs[d];
      if (pick(0, 4) == 0) extent -= bs[d] / 2;                   // ragged last block
      if (pick(0, 30) == 0) extent = std::max(1, extent - bs[d]); // one block short
      map += (d ? ", " : "") + comp;
      shape += (d ? ", " : "") + std::to_string(extent);
    }
    return "    " + role + " " + name + ": f32[" + shape + "]  block=(4, 8)  index=(" + params + ") -> (" +
           map + ")\n";
  };
  std::ostringstream os;
  os << "kernel k:\n    grid = (";
  for (int a = 0; a < rank; ++a)
    os << (a ? ", " : "") << grid[a];
  os << (rank == 1 ? ",)\n" : ")\n") << "    backend = triton\n"
     << operand("in ", "x", pick(0, 1) == 0) << operand("out", "o", pick(0, 1) == 0) << "    body:\n";
  // Masks of lanes that read no data: the same at every program, or, by
  // rows, a program's rows `program_id(a) * 4 + lane` (or `a * 2`, through
  // locals, backwards) compared with a bound near an array's extent: the
  // ragged last block's mask, or one a row off.
  const std::string rows = std::to_string(pick(1, 4)), cols = std::to_string(pick(1, 8));
  std::string row_mask = "(iota((4, 8), 0) < " + rows + ")";
  if (pick(0, 1) == 0) {
    const int axis = pick(0, rank - 1), bound = pick(0, 4 * grid[axis] + 4) + pick(-1, 1);
    const std::string pid = "program_id(" + std::to_string(axis) + ")", b = std::to_string(bound);
    switch (pick(0, 4)) {
    case 0: row_mask = "(" + pid + " * 4 + iota((4, 8), 0) < " + b + ")"; break;
    case 1:
      os << "        p = " << pid << "\n        r = p * 4 + iota((4, 8), 0)\n";
      row_mask = "(r <= " + b + ")";
      break;
    case 2: row_mask = "(" + b + " - " + pid + " * 4 > iota((4, 8), 0))"; break; // (both sides vary)
    case 3: row_mask = "(" + b + " > 2 * " + pid + " - iota((4, 8), 0))"; break;
    default: row_mask = "(" + b + " - 4 * " + pid + " - iota((4, 8), 0) >= 1)"; break;
    }
  }
  os << "        m = " << row_mask << " & (iota((4, 8), 1) < " << cols << ")\n";
  const int statements = pick(1, 2);
  for (int s = 0; s < statements; ++s) {
    std::string indent = "        ";
    if (pick(0, 4) == 0) {
      const int axis = pick(0, rank - 1);
      const int c = pick(0, 1) ? 0 : pick(0, 2) == 0 ? grid[axis] - 1 : pick(0, grid[axis] - 1);
      os << indent << "when program_id(" << axis << ")"
         << (pick(0, 3) == 0 ? " % 2 == " + std::to_string(c % 2) : " == " + std::to_string(c)) << ":\n";
      indent += "    ";
    }
    switch (pick(0, 5)) {
    case 0: os << indent << "o[...] = x[...] * 2.0\n"; break;
    case 1: os << indent << "o[...] = where(m, x[...], o[...])\n"; break;
    case 2: os << indent << "o[...] = where(m, x[...] + 1.0, 0.0)\n"; break;
    case 3: {
      // A store of rows [r, r + n) of the block: past it, into the next
      // program's rows (or past the array).
      const int r = pick(0, 6), n = pick(1, 4);
      os << indent << "o[ds(" << r << ", " << n << "), :] = broadcast_to(x[0:1, :], (" << n << ", 8))\n";
      break;
    }
    case 4: os << indent << "o[...] = o[...] + x[...]\n"; break;
    default: os << indent << "o[...] = where(m, 0.0, o[...])\n"; break;
    }
  }
  return os.str();
}

TEST(TritonCut, FindsExactlyTheRulesAndGridPointsTheWholeGridFindsOnGeneratedKernels) {
  const std::int64_t cases = env_int("PIPECHECK_TRITON_CUT_CASES", 300);
  std::mt19937_64 rng(static_cast<std::uint64_t>(env_int("PIPECHECK_TRITON_CUT_SEED", 1)));
  int checked = 0, cut = 0, pid_masks = 0, with_findings = 0, verified = 0, undecided = 0, decided = 0;
  for (std::int64_t c = 0; c < cases; ++c) {
    const std::string text = random_triton(rng);
    auto k = kernel(text);
    if (!k) continue; // a generated shape the validator rejects
    std::int64_t points = 1;
    for (const auto &g : *k->grid)
      points *= g.int_value;
    if (points <= 256 || points > 3000) continue;
    ++checked;
    const auto whole = check(*k, false), on = check(*k, true);
    cut += on_cut(on);
    // (A mask of rows through the program's id, either side or both.)
    pid_masks += on_cut(on) && (text.find("p = program_id") != std::string::npos ||
                                text.find("m = (program_id") != std::string::npos ||
                                text.find(" - iota((4, 8), 0)") != std::string::npos ||
                                text.find(" * 4 > iota((4, 8), 0)") != std::string::npos);
    with_findings += on_cut(on) && !on.findings.empty();
    verified += on_cut(on) && on.status == verifier::Status::verified;
    // Past the element pass's limits (a diagonal block map's array of 2^23
    // elements) the whole grid leaves rules undecided: the cut decides most
    // of them (those whose cut keeps many values for the guards may not).
    // (What it finds there may explain a lowered program's finding the whole
    // grid reports on its own: one root cause, one finding.)
    if (whole.status == verifier::Status::unknown || whole.reason.find("undecided") != std::string::npos) {
      ++undecided;
      decided += on.status != verifier::Status::unknown && on.reason.find("undecided") == std::string::npos;
      if (whole.status == verifier::Status::violation) {
        EXPECT_EQ(on.status, verifier::Status::violation) << text << on.reason;
      }
      continue;
    }
    EXPECT_EQ(on.status, whole.status) << text << on.reason << "\n" << whole.reason;
    EXPECT_EQ(differences(described(whole), described(on)) + differences(described(on), described(whole)), "")
        << text;
  }
  std::cout << cases << " kernels: " << checked << " checked, " << cut << " on the cut (" << pid_masks
            << " masked by program_id, " << with_findings << " with findings, " << verified << " verified); "
            << undecided << " undecided on the whole grid, " << decided << " of them decided on the cut\n";
  // Not vacuous: most kernels are cut, buggy and correct ones among them.
  EXPECT_GT(cut, checked / 3);
  EXPECT_GT(pid_masks, cut / 10);
  EXPECT_GT(with_findings, cut / 10);
  EXPECT_GT(verified, cut / 20);
  EXPECT_GT(decided, undecided / 2);
}

// A finding of the cut in the kernel's terms: its grid point, element,
// shape, extent and last block, in the witness and in the words.
TEST(TritonCut, FindingsNameTheKernelsGridPointsElementsShapesAndBlocks) {
  auto k = kernel(R"(kernel k:
    grid = (22, 53)
    backend = triton
    in  x: f32[170, 432]  block=(4, 8)  index=(g0, g1) -> (2 * g0, g1 + 1)
    out o: f32[212, 420]  block=(4, 8)  index=(g0, g1) -> (g1, g1)
    body:
        o[...] = x[...] * 2.0
)");
  ASSERT_TRUE(k);
  const auto v = check(*k, true);
  ASSERT_TRUE(on_cut(v)) << v.reason;
  const verifier::Finding *ragged = nullptr, *past = nullptr;
  for (const auto &f : v.findings) {
    if (f.rule == verifier::Rule::partial_block_reduction) ragged = &f;
    if (f.rule == verifier::Rule::index_out_of_bounds) past = &f;
  }
  ASSERT_TRUE(ragged && past);
  EXPECT_EQ(*ragged->witness.get<std::int64_t>("extent"), 170);
  EXPECT_EQ(*ragged->witness.get<std::int64_t>("last_block"), 42);
  EXPECT_NE(ragged->message.find("dim 0 of 'x' (170)"), std::string::npos) << ragged->message;
  ASSERT_FALSE(ragged->notes.empty());
  EXPECT_EQ(ragged->notes[0].message, "block 42 along dim 0 holds only 2 of 4 valid elements");
  EXPECT_EQ(*past->witness.get<std::vector<std::int64_t>>("grid_point"), (std::vector<std::int64_t>{0, 52}));
  EXPECT_EQ(*past->witness.get<std::vector<std::int64_t>>("element"), (std::vector<std::int64_t>{208, 420}));
  EXPECT_NE(
      past->message.find("element (208, 420) of 'o', outside its shape (212, 420), at grid point (0, 52)"),
      std::string::npos)
      << past->message;
  EXPECT_EQ(past->notes.back().message.rfind("found on its grid cut to (3, 3)", 0), 0u)
      << past->notes.back().message;
}

// An input aliased to the output is the output's array: a program reading
// through it the block another program stores races with that program,
// however far apart they are (the cut kept programs one block apart, so a
// shift of 3 was proved race-free on a cut of 3 programs).
TEST(TritonCut, AnAliasedInputsReachIntoTheOutputsBlocksIsKeptOnTheCut) {
  for (int shift : {0, 1, 3, 8, 100}) {
    const std::string src = "kernel k:\n    grid = (257,)\n    backend = triton\n"
                            "    in  x: f32[5760]  block=(16,)  index=(i) -> (i + " +
                            std::to_string(shift) +
                            ")\n    out o: f32[5760]  block=(16,)  index=(i) -> (i)\n    alias x -> o\n"
                            "    body:\n        o[...] = x[...] * 2.0\n";
    auto k = kernel(src);
    ASSERT_TRUE(k);
    const auto on = check(*k, true), whole = check(*k, false);
    EXPECT_EQ(on.status, whole.status) << "shift " << shift << ": " << on.reason;
    EXPECT_EQ(described(on), described(whole)) << "shift " << shift;
    const bool races = std::any_of(on.findings.begin(), on.findings.end(), [](const verifier::Finding &f) {
      return f.rule == verifier::Rule::parallel_write_conflict;
    });
    EXPECT_EQ(races, shift != 0) << "shift " << shift;
  }
}

} // namespace
