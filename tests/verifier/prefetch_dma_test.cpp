// A page table read in the addresses of body DMAs (paged attention): the
// spec rules decide every address's bounds for every allowed table, the
// race check runs once (the table changes nothing else), and a kernel that
// uses the table any other way keeps the old, enumerating treatment.
#include "spec/parse.hpp"
#include "spec/prefetch.hpp"
#include "verifier/check.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck;
using verifier::Status;

namespace {

// One page per grid step, copied by hand from a pool of 16 pages: the page
// is pt[program_id(0)] unless `page` says otherwise.
std::string kernel(const std::string &prefetch, const std::string &page = "pt[program_id(0)]",
                   const std::string &extra = "") {
  return "kernel g:\n"
         "    grid = (8,)\n"
         "    " +
         prefetch +
         "\n"
         "    in  kp: f32[16, 8, 128]  memory_space=any\n"
         "    out o: f32[8, 8, 128]  block=(None, 8, 128)  index=(i) -> (i, 0, 0)\n"
         "    scratch buf: f32[8, 128]\n"
         "    scratch sem: dma_sem\n"
         "    body:\n"
         "        c = async_copy(kp[" +
         page +
         "], buf, sem)\n"
         "        c.start()\n"
         "        c.wait()\n" +
         extra + "        o[...] = buf[...]\n";
}

spec::KernelSpec parse(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

verifier::Verdict check(const std::string &text) { return verifier::check(parse(text), {}); }

} // namespace

TEST(PrefetchDma, APageTableInsideThePoolVerifiesWithOneRaceCheck) {
  // 16^8 tables: far too many to run each, and no index map reads them.
  auto v = check(kernel("prefetch pt: i32[8] in [0, 16)"));
  ASSERT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("pt = [0] * 8, and so with every allowed contents"), std::string::npos) << v.reason;
}

TEST(PrefetchDma, APageIndexTheRangeAllowsPastThePoolIsFoundWithItsTable) {
  auto v = check(kernel("prefetch pt: i32[8] in [0, 17)"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  const auto &f = v.findings[0];
  EXPECT_EQ(f.rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(f.loc.line, 10); // c.start()
  EXPECT_NE(
      f.message.find("a copy from 'kp' (memory_space=any) at grid point (7,): index 16 is out of bounds"),
      std::string::npos)
      << f.message;
  const auto *pt = f.witness.get<std::vector<std::int64_t>>("pt");
  ASSERT_TRUE(pt);
  EXPECT_EQ(*pt, (std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 0, 16}));
}

TEST(PrefetchDma, AReadPastTheTableIsOutOfBoundsForEveryTable) {
  auto v = check(kernel("prefetch pt: i32[8] in [0, 16)", "pt[program_id(0) + 1]"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  EXPECT_EQ(v.findings.at(0).rule, verifier::Rule::index_out_of_bounds);
  // The read past the table is the finding, not the copy its poison addresses.
  EXPECT_NE(v.findings.at(0).message.find("the prefetch read 'pt[program_id(0) + 1]' at grid point (7,): its "
                                          "subscript 0 is 8, outside 0:8"),
            std::string::npos)
      << v.findings.at(0).message;
}

TEST(PrefetchDma, AGuardedCopyIsBoundsCheckedOnlyWhereItRuns) {
  // pt[i + 1] past the table at i = 7, but the copy there does not run.
  const std::string text = "kernel g:\n"
                           "    grid = (8,)\n"
                           "    prefetch pt: i32[8] in [0, 16)\n"
                           "    in  kp: f32[16, 8, 128]  memory_space=any\n"
                           "    out o: f32[8, 8, 128]  block=(None, 8, 128)  index=(i) -> (i, 0, 0)\n"
                           "    scratch buf: f32[8, 128]\n"
                           "    scratch sem: dma_sem\n"
                           "    body:\n"
                           "        buf[...] = zeros\n"
                           "        when program_id(0) < 7:\n"
                           "            async_copy(kp[pt[program_id(0) + 1]], buf, sem).start()\n"
                           "            async_copy(kp[pt[program_id(0) + 1]], buf, sem).wait()\n"
                           "        o[...] = buf[...]\n";
  auto v = check(text);
  EXPECT_EQ(v.status, Status::verified) << v.reason;
}

TEST(PrefetchDma, ALocalComputedFromTheTableIsStillAnAddress) {
  // `page` bound from the table before the copy.
  std::string text = kernel("prefetch pt: i32[8] in [0, 16)", "page");
  text.replace(text.find("        c = async_copy"), 0, "        page = pt[program_id(0)]\n");
  EXPECT_EQ(spec::prefetch_address_only(parse(text)).count("pt"), 1u);
  EXPECT_EQ(check(text).status, Status::verified);
}

TEST(PrefetchDma, ALocalComputedFromTheTableIsBoundsCheckedAsTheAddressItIs) {
  // The twin of the above with a range past the pool: `kp[page]` names no
  // table element itself, its local does (this was verified).
  std::string text = kernel("prefetch pt: i32[8] in [0, 17)", "page + 0");
  text.replace(text.find("        c = async_copy"), 0, "        page = pt[program_id(0)]\n");
  auto v = check(text);
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_NE(v.findings[0].message.find("at grid point (7,): index 16 is out of bounds"), std::string::npos)
      << v.findings[0].message;
}

TEST(PrefetchDma, ATableReadOutsideAnAddressKeepsTheEnumeratingCheck) {
  // The table decides a `when`: which copies run depends on the contents,
  // and 16^8 tables are too many to run each.
  std::string text = kernel("prefetch pt: i32[8] in [0, 16)", "pt[program_id(0)]");
  text.replace(text.find("        c.start()"), 0, "        when pt[0] > 3:\n            buf[...] = zeros\n");
  auto k = parse(text);
  EXPECT_EQ(spec::prefetch_address_only(k).count("pt"), 0u);
  EXPECT_EQ(verifier::check(k, {}).status, Status::unknown);
}

TEST(PrefetchDma, ACopyIntoTheTablesSourceIsNotAnAddressOnlyUse) {
  // A source some DMA writes may race with the copies that read it.
  const std::string text = "kernel g:\n"
                           "    grid = (8,)\n"
                           "    prefetch pt: i32[8] in [0, 16)\n"
                           "    in  kp: f32[16, 8, 128]  memory_space=any\n"
                           "    out o: f32[8, 8, 128]  block=(None, 8, 128)  index=(i) -> (i, 0, 0)\n"
                           "    scratch buf: f32[8, 128]\n"
                           "    scratch sem: dma_sem\n"
                           "    body:\n"
                           "        async_copy(kp[pt[program_id(0)]], buf, sem).start()\n"
                           "        async_copy(kp[pt[program_id(0)]], buf, sem).wait()\n"
                           "        sync_copy(buf, kp[0])\n"
                           "        o[...] = buf[...]\n";
  EXPECT_EQ(spec::prefetch_address_only(parse(text)).count("pt"), 0u);
}

TEST(PrefetchDma, GivenTablesAreElaboratedInCopyAddresses) {
  auto v = check(kernel("prefetch pt: i32[8] = [15, 14, 13, 12, 11, 10, 9, 8]"));
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  auto bad = check(kernel("prefetch pt: i32[8] = [15, 14, 13, 12, 11, 10, 9, 16]"));
  ASSERT_EQ(bad.status, Status::violation) << bad.reason;
  EXPECT_EQ(bad.findings.at(0).rule, verifier::Rule::index_out_of_bounds);
}

TEST(PrefetchDma, ATableMayPickWhereACopyStartsButNotHowMuchItCopies) {
  // ds(start, 8) rows from the pool: start + 8 <= 16 for every table in [0, 9).
  const std::string start = kernel("prefetch pt: i32[8] in [0, 9)", "ds(pt[program_id(0)], 8), 0");
  EXPECT_EQ(spec::prefetch_address_only(parse(start)).count("pt"), 1u);
  EXPECT_EQ(check(start).status, Status::verified);
  auto past = check(kernel("prefetch pt: i32[8] in [0, 10)", "ds(pt[program_id(0)], 8), 0"));
  ASSERT_EQ(past.status, Status::violation) << past.reason;
  EXPECT_NE(past.findings.at(0).message.find("slice 9:17 is out of bounds for dim 0 (extent 16)"),
            std::string::npos)
      << past.findings.at(0).message;
  // A size read from the table is no static shape: bad input, located.
  auto sized = spec::parse_and_validate(
      spec::SourceFile::from_string("k.pk", kernel("prefetch pt: i32[8] in [0, 16)", "ds(pt[0], pt[1]), 0")));
  ASSERT_FALSE(sized.errors.empty());
  EXPECT_EQ(sized.errors[0].loc.line, 9);
}

namespace {

// A pool of 10 pages addressed by `pt` (rows of 4) for 3 sequences, `lens`
// in `lens_range`, two page buffers; `body` the kernel body after the first
// page's copy starts.
std::string page_pool(const std::string &name, const std::string &lens_range, const std::string &body) {
  return "kernel " + name +
         ":\n"
         "    grid = (3,)\n"
         "    prefetch pt: i32[3, 4] in [0, 10)\n"
         "    prefetch lens: i32[3] in " +
         lens_range +
         "\n"
         "    in  kp: f32[10, 16, 128]  memory_space=any\n"
         "    out o: f32[3, 16, 128]  block=(None, 16, 128)  index=(i) -> (i, 0, 0)\n"
         "    scratch buf: f32[2, 16, 128]\n"
         "    scratch sem: dma_sem[2]\n"
         "    body:\n"
         "        async_copy(kp[pt[program_id(0), 0]], buf[0], sem[0]).start()\n" +
         body;
}

// Pages of a sequence copied double-buffered, as many as its length needs:
// `lens` bounds the loop, `pt` only addresses the copies.
std::string paged(const std::string &fetch_next) {
  return page_pool(
      "paged", "[63, 65)",
      "        o[...] = zeros\n"
      "        for t in range((lens[program_id(0)] + 15) // 16):\n"
      "            when " +
          fetch_next +
          ":\n"
          "                async_copy(kp[pt[program_id(0), t + 1]], buf[1 - t % 2], sem[1 - t % 2]).start()\n"
          "            async_copy(kp[pt[program_id(0), t]], buf[t % 2], sem[t % 2]).wait()\n"
          "            o[...] += buf[t % 2]\n");
}

} // namespace

TEST(PrefetchDma, APageTableBesideTheLengthsThatBoundItsLoopIsLeftOpenWhileTheLengthsAreEnumerated) {
  // 10^12 tables times 8 length contents: only the lengths are enumerated.
  auto v = check(paged("t + 1 < (lens[program_id(0)] + 15) // 16"));
  ASSERT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(
      v.reason.find("each of the 8 prefetch contents the constraints allow of the arrays other than 'pt'"),
      std::string::npos)
      << v.reason;
}

TEST(PrefetchDma, APrefetchOfThePagePastTheLastIsFoundWithTheLengthsThatReachIt) {
  auto v = check(paged("t + 1 <= (lens[program_id(0)] + 15) // 16"));
  ASSERT_EQ(v.status, Status::violation) << v.reason;
  bool read_past = false;
  for (const auto &f : v.findings)
    read_past = read_past || (f.rule == verifier::Rule::index_out_of_bounds &&
                              f.message.find("its subscript 1 is 4, outside 0:4") != std::string::npos &&
                              f.message.find("lens = ") != std::string::npos);
  EXPECT_TRUE(read_past) << v.findings.at(0).message;
}

namespace {

// A second page copied only where the length asks for it: the spec rules
// hold over every table, the race check depends on the lengths.
std::string second_page(const std::string &use) {
  return page_pool("paged2", "[1, 3)",
                   "        when lens[program_id(0)] > 1:\n"
                   "            async_copy(kp[pt[program_id(0), 1]], buf[1], sem[1]).start()\n"
                   "        async_copy(kp[pt[program_id(0), 0]], buf[0], sem[0]).wait()\n"
                   "        o[...] = buf[0]\n"
                   "        when lens[program_id(0)] > 1:\n" +
                       use + "            o[...] += buf[1]\n");
}

} // namespace

TEST(PrefetchDma, ARaceCheckThatDependsOnTheLengthsRunsOncePerLengthsWithThePageTableOpen) {
  auto v = check(second_page("            async_copy(kp[pt[program_id(0), 1]], buf[1], sem[1]).wait()\n"));
  ASSERT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("of the arrays other than 'pt'"), std::string::npos) << v.reason;
  auto bad = check(second_page(""));
  ASSERT_EQ(bad.status, Status::violation) << bad.reason;
  EXPECT_EQ(bad.findings.at(0).rule, verifier::Rule::slot_race);
  EXPECT_NE(bad.findings.at(0).message.find("lens = [1, 1, 2]"), std::string::npos)
      << bad.findings.at(0).message;
}

namespace {

// A per-step scale kept in SMEM (625 allowed tables): `use` says how the body takes it.
std::string scaled(const std::string &use) {
  return "kernel s:\n"
         "    grid = (4,)\n"
         "    prefetch sc: i32[4] in [0, 5)\n"
         "    in  x: f32[32, 128]  block=(8, 128)  index=(i, sc) -> (i, 0)\n"
         "    out o: f32[32, 128]  block=(8, 128)  index=(i, sc) -> (i, 0)\n"
         "    body:\n" +
         use;
}

} // namespace

TEST(PrefetchValues, ATableReadOnlyAsAValueNeedsOneRaceCheckWithItsReadsLeftOpen) {
  for (const std::string use :
       {"        o[...] = x[...] * cast(sc[program_id(0)], f32)\n",
        "        s = sc[program_id(0)] + 1\n        o[...] = x[...] * cast(s, f32)\n",
        "        o[...] = where(x[...] > 0.0, x[...], cast(sc[3 - program_id(0)], f32))\n"}) {
    const auto k = parse(scaled(use));
    EXPECT_EQ(spec::prefetch_value_only(k).count("sc"), 1u) << use;
    const auto v = verifier::check(k, {});
    EXPECT_EQ(v.status, Status::verified) << use << v.reason;
    EXPECT_NE(v.reason.find("'sc'"), std::string::npos) << v.reason;
  }
}

TEST(PrefetchValues, ATableThatDecidesAMaskAConditionOrAnAddressIsNoValueOnly) {
  for (const std::string use :
       {"        o[...] = where(iota((8, 128), 1) < sc[program_id(0)], x[...], 0.0)\n",
        "        m = iota((8, 128), 1) < sc[program_id(0)]\n        o[...] = where(m, x[...], 0.0)\n",
        "        o[...] = x[...]\n        when sc[program_id(0)] > 2:\n            o[...] = zeros\n",
        "        o[...] = x[...] * cast(sc[program_id(0)] // 2, f32)\n",
        "        o[...] = x[ds(sc[program_id(0)], 8), :] * 0.0 + x[...]\n",
        // The table in a subscript of a local's value, the local then a value:
        // a gather through it, once and carried over a loop.
        "        v = x[ds(sc[program_id(0)], 8), :]\n        o[...] = v * 0.0 + x[...]\n",
        "        a = x[...]\n        for t in range(2):\n            a = a + x[ds(sc[t], 8), :]\n"
        "        o[...] = a\n"}) {
    const auto k = parse(scaled(use));
    EXPECT_EQ(spec::prefetch_value_only(k).count("sc"), 0u) << use;
    // (Its reads were left open in the race check, which then could not
    // evaluate the gather's address: `cannot evaluate 'where(...'`.)
    const auto v = verifier::check(k, {});
    EXPECT_EQ(v.reason.find("cannot evaluate"), std::string::npos) << use << v.reason;
  }
  // A mask from the table that keeps a part of the output nothing wrote is
  // found for the tables that leave it (sc < 128 keeps the rest).
  const auto keep = verifier::check(
      parse(scaled("        o[...] = where(iota((8, 128), 1) < sc[program_id(0)], x[...], o[...])\n")), {});
  EXPECT_NE(keep.status, Status::verified) << keep.reason;
}
