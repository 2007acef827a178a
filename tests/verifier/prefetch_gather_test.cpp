// A Triton kernel that loads from an input at an index a table picks (GPU
// paged attention's `k_pages_ref[block_tables]`): the spec rules decide
// each such load's bounds for every allowed table, the element pass runs
// once (nothing else depends on the table), and a table used any other way
// keeps the enumerating treatment.
#include "spec/parse.hpp"
#include "spec/prefetch.hpp"
#include "verifier/check.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace pipecheck;
using verifier::Rule;
using verifier::Status;

namespace {

// Four rows gathered per program from x (100 rows, blocks of `bm`): row r
// of the program's output block is x's block row `row`.
std::string gather(const std::string &range, const std::string &row = "t[r]", const std::string &bm = "64",
                   const std::string &backend = "    backend = triton\n") {
  return "kernel g:\n"
         "    param n = 100\n"
         "    param bm = " +
         bm +
         "\n"
         "    grid = (cdiv(n, bm),)\n" +
         backend + "    prefetch t: i32[4] " + range +
         "\n"
         "    in  x: f32[n, 8]  block=(bm, 8)  index=(i, tt) -> (i, 0)\n"
         "    out o: f32[cdiv(n, bm) * 4, 8]  block=(4, 8)  index=(i, tt) -> (i, 0)\n"
         "    body:\n"
         "        for r in range(4):\n"
         "            o[r, :] = x[" +
         row + ", :]\n";
}

// A page pool of 64 pages, 16 pages per sequence split over two programs
// along axis 1, each program gathering its pages one at a time.
std::string pages(const std::string &range, const std::string &load = "kp[bt[s * 8 + p], :, :]") {
  return "kernel paged:\n"
         "    grid = (2, 2)\n"
         "    backend = triton\n"
         "    prefetch bt: i32[16] " +
         range +
         "\n"
         "    in  q: f32[16, 64]  block=(8, 64)  index=(h, s, bt) -> (h, 0)\n"
         "    in  kp: f32[64, 16, 64]  block=(64, 16, 64)  index=(h, s, bt) -> (0, 0, 0)\n"
         "    out o: f32[2, 16, 16]  block=(None, 8, 16)  index=(h, s, bt) -> (s, h, 0)\n"
         "    body:\n"
         "        s = program_id(1)\n"
         "        acc = broadcast_to(0.0, (8, 16))\n"
         "        for p in range(8):\n"
         "            acc = acc + dot(q[...], " +
         load +
         ", trans_b=True)\n"
         "        o[...] = acc\n";
}

spec::KernelSpec parse(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("gather.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message << "\n" << text;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

const verifier::WitnessItem *item(const verifier::Finding &f, const std::string &key) {
  for (const auto &i : f.witness.items)
    if (i.key == key) return &i;
  return nullptr;
}

} // namespace

TEST(PrefetchGather, ATritonGatherInsideThePoolVerifiesForEveryTableWithOneElementPass) {
  const auto k = parse(pages("in [0, 64)"));
  EXPECT_EQ(spec::prefetch_address_only(k).count("bt"), 1u);
  const auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("only as the indices of loads from inputs nothing writes"), std::string::npos)
      << v.reason;
}

TEST(PrefetchGather, APageTheRangeAllowsPastThePoolIsFoundWithItsTable) {
  for (const std::string range : {"in [0, 65)", "in [-1, 64)"}) {
    const auto v = verifier::check(parse(pages(range)), {});
    ASSERT_EQ(v.status, Status::violation) << range << ": " << v.reason;
    const auto &f = v.findings.at(0);
    EXPECT_EQ(f.rule, Rule::index_out_of_bounds);
    EXPECT_NE(f.message.find("a load from 'kp'"), std::string::npos) << f.message;
    // The witness table puts a page outside [0, 64) where a program reads it.
    const auto *bt = item(f, "bt");
    ASSERT_NE(bt, nullptr) << f.message;
    const auto &vals = std::get<std::vector<std::int64_t>>(bt->value);
    EXPECT_TRUE(std::any_of(vals.begin(), vals.end(), [](auto x) { return x < 0 || x >= 64; })) << f.message;
  }
}

TEST(PrefetchGather, AnIndexComputedFromThePageIsCheckedAsTheAddressItIs) {
  // One page past the table's: page 63 + 1 is outside the pool.
  const auto v = verifier::check(parse(pages("in [0, 64)", "kp[bt[s * 8 + p] + 1, :, :]")), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_NE(v.findings.at(0).message.find("index 64 is out of bounds for dim 0"), std::string::npos)
      << v.findings.at(0).message;
  // The same address through an integer local, with pages below 63: inside.
  auto text = pages("in [0, 63)", "kp[pg + 1, :, :]");
  text.replace(text.find("            acc = acc"), 0, "            pg = bt[s * 8 + p]\n");
  const auto ok = verifier::check(parse(text), {});
  EXPECT_EQ(ok.status, Status::verified) << text << ok.reason;
}

TEST(PrefetchGather, AGatherPastARaggedBlocksArrayEndIsFoundAndOneInsideVerifies) {
  // The second program's block holds rows 64..99 of x: 36 rows in the array.
  const auto bad = verifier::check(parse(gather("in [0, 64)")), {});
  ASSERT_EQ(bad.status, Status::violation) << bad.reason;
  const auto &f = bad.findings.at(0);
  EXPECT_EQ(f.rule, Rule::index_out_of_bounds);
  EXPECT_NE(
      f.message.find("at grid point (1,): index 36 is out of bounds for dim 0 (extent 36) of its block's "
                     "part inside the array"),
      std::string::npos)
      << f.message;
  const auto ok = verifier::check(parse(gather("in [0, 36)")), {});
  EXPECT_EQ(ok.status, Status::verified) << ok.reason;
}

TEST(PrefetchGather, AGatherThroughAnIntegerLocalIsStillAGather) {
  auto text = gather("in [0, 36)");
  text.replace(text.find("            o[r, :] = x[t[r], :]"),
               std::string("            o[r, :] = x[t[r], :]").size(),
               "            row = t[r]\n            v = x[row, :]\n            o[r, :] = v");
  const auto k = parse(text);
  EXPECT_EQ(spec::prefetch_address_only(k).count("t"), 1u);
  const auto v = verifier::check(k, {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(PrefetchGather, ATableReadPastItsEndIsThatReadsFindingNotTheGathers) {
  // t[r + 1] reads t[4] at r = 3: the poison it gives is no page of x.
  const auto v = verifier::check(parse(gather("in [0, 36)", "t[r + 1]")), {});
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u) << v.findings.at(1).message;
  EXPECT_NE(v.findings.at(0).message.find("the prefetch read 't[r + 1]'"), std::string::npos)
      << v.findings.at(0).message;
  EXPECT_NE(v.findings.at(0).message.find("on a GPU"), std::string::npos) << v.findings.at(0).message;
}

TEST(PrefetchGather, ATableUsedAnyOtherWayOrAMaskedGatherIsNotVerifiedAsAGather) {
  // A store's address, a value beside the gather, a masked gather (its
  // lanes are the load rules' to follow), and a Mosaic kernel's load from
  // its VMEM block, which the pipeline's copies fill.
  auto masked = gather("in [0, 36)", "t[r]");
  masked.replace(masked.find("x[t[r], :]"), std::string("x[t[r], :]").size(),
                 "where(iota((8,), 0) < 4, x[t[r], :], 0.0)");
  auto store = gather("in [0, 36)");
  store.replace(store.find("o[r, :] = x[t[r], :]"), std::string("o[r, :] = x[t[r], :]").size(),
                "o[t[r] % 4, :] = x[r, :]");
  auto value = gather("in [0, 36)");
  value.replace(value.find("x[t[r], :]"), std::string("x[t[r], :]").size(), "x[t[r], :] + cast(t[r], f32)");
  const auto mosaic = gather("in [0, 36)", "t[r]", "64", "    target = tpu_v5e\n");
  const std::vector<std::string> texts = {masked, store, value, mosaic};
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto k = parse(texts[i]);
    const auto v = verifier::check(k, {});
    EXPECT_NE(v.status, Status::verified) << texts[i] << v.reason;
    if (i > 0) {
      EXPECT_EQ(spec::prefetch_address_only(k).count("t"), 0u) << texts[i];
    }
  }
}
