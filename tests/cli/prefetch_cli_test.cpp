// Scalar prefetch through the executable: located bad input, run with
// given, supplied (--prefetch NAME=FILE.npy) or seeded contents.
#include "tests/cli/cli_testing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using pipecheck::testing::Out;
using pipecheck::testing::run;
using pipecheck::testing::temp_dir;
using pipecheck::testing::temp_file;

// A version 1.0 .npy file holding an i32 array in C order: 1-D, or of `shape` as NumPy writes it ("(2, 2)").
std::string npy_i32(const std::vector<std::int32_t> &v, std::string shape = "") {
  if (shape.empty()) shape = "(" + std::to_string(v.size()) + ",)";
  std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  out += h;
  for (std::int32_t x : v)
    for (int b = 0; b < 4; ++b)
      out += static_cast<char>((static_cast<std::uint32_t>(x) >> (8 * b)) & 0xff);
  return out;
}

const std::string kGather = "kernel g:\n"
                            "    grid = (4,)\n"
                            "    prefetch ids: i32[4] in [0, 9)\n"
                            "    in  x: f32[64, 128]  block=(8, 128)  index=(i, ids) -> (ids[i], 0)\n"
                            "    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)\n"
                            "    body:\n"
                            "        o[...] = x[...]\n";

} // namespace

TEST(CliPrefetch, GivenContentsThatBreakTheirRangeAreBadInputAtTheElement) {
  std::string f =
      temp_file("bad.pk", "kernel g:\n    grid = (4,)\n    prefetch ids: i32[4] = [0, 9, 1, 2] in [0, 8)\n"
                          "    in  x: f32[64, 128]  block=(8, 128)  index=(i, ids) -> (ids[i], 0)\n"
                          "    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)\n"
                          "    body:\n        o[...] = x[...]\n");
  for (const char *cmd : {"fmt ", "check ", "lower ", "run "}) {
    Out o = run(cmd + f);
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_NE(o.text.find(f + ":3:32: error: ids[1] = 9 is outside the stated range [0, 8)"),
              std::string::npos)
        << cmd << o.text;
  }
}

TEST(CliPrefetch, CheckNamesTheContentsOfTheWitness) {
  Out o = run("check " + temp_file("g.pk", kGather));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("(prefetch contents: ids = [8, 0, 0, 0]) [index-out-of-bounds]"), std::string::npos)
      << o.text;
}

TEST(CliPrefetch, RunTakesContentsFromAFileAndHoldsThemToTheConstraints) {
  const std::string f = temp_file("g.pk", kGather);
  Out ok = run("run " + f + " --dma eager --prefetch ids=" + temp_file("ok.npy", npy_i32({7, 7, 0, 1})));
  EXPECT_EQ(ok.code, 0) << ok.text;
  EXPECT_NE(ok.text.find("prefetch contents from --prefetch: ids = [7, 7, 0, 1]"), std::string::npos)
      << ok.text;
  // 8 is allowed by the range and is past the last block: the run fails.
  Out past = run("run " + f + " --dma eager --prefetch ids=" + temp_file("past.npy", npy_i32({8, 0, 0, 0})));
  EXPECT_EQ(past.code, 1) << past.text;
  Out outside = run("run " + f + " --prefetch ids=" + temp_file("out.npy", npy_i32({1, 2, 3, 9})));
  EXPECT_EQ(outside.code, 3) << outside.text;
  EXPECT_NE(outside.text.find("error: --prefetch ids: ids[3] = 9 is outside the stated range [0, 9)"),
            std::string::npos)
      << outside.text;
  Out unknown = run("run " + f + " --prefetch idz=" + temp_file("ok2.npy", npy_i32({0, 0, 0, 0})));
  EXPECT_EQ(unknown.code, 3) << unknown.text;
  EXPECT_NE(unknown.text.find("kernel 'g' has no prefetch named 'idz'"), std::string::npos) << unknown.text;
}

TEST(CliPrefetch, RunPicksContentsWithTheSeedAndNamesThem) {
  const std::string f = temp_file("g.pk", kGather);
  Out a = run("run " + f + " --dma eager --seed 3");
  Out b = run("run " + f + " --dma eager --seed 3");
  EXPECT_NE(a.text.find("prefetch contents picked with seed 3: ids = ["), std::string::npos) << a.text;
  EXPECT_EQ(a.text.substr(a.text.find("prefetch contents")), b.text.substr(b.text.find("prefetch contents")));
}

TEST(CliPrefetch, ContentsFromAFileNamedInTheKernelAreItsGivenContentsForEveryCommand) {
  // The .npy lies next to the .pk, and the commands run from another folder:
  // `from "FILE"` is relative to the .pk's folder.
  const std::string decl_ok =
      "kernel g:\n    grid = (4,)\n    prefetch ids: i32[4] from \"ids.npy\" in [0, 9)\n";
  const std::string rest = "    in  x: f32[64, 128]  block=(8, 128)  index=(i, ids) -> (ids[i], 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)\n"
                           "    body:\n        o[...] = x[...]\n";
  temp_file("ids.npy", npy_i32({7, 7, 0, 1}));
  const std::string f = temp_file("from.pk", decl_ok + rest);
  Out check = run("check " + f);
  EXPECT_EQ(check.code, 0) << check.text;
  EXPECT_NE(check.text.find("verified: kernel 'g'"), std::string::npos) << check.text;
  Out ran = run("run " + f + " --dma eager");
  EXPECT_EQ(ran.code, 0) << ran.text;
  EXPECT_EQ(ran.text.find("prefetch contents picked"), std::string::npos) << ran.text; // nothing drawn
  Out lowered = run("lower " + f);
  EXPECT_EQ(lowered.code, 0) << lowered.text;
  // One table whose first entry (8, allowed by the range) names a block past x's 8: only
  // that table is checked, so the finding needs no witness contents.
  temp_file("past.npy", npy_i32({8, 0, 0, 0}));
  const std::string past =
      temp_file("past.pk", "kernel g:\n    grid = (4,)\n    prefetch ids: i32[4] from \"past.npy\" "
                           "in [0, 9)\n" +
                               rest);
  Out bad = run("check " + past);
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_NE(bad.text.find("[index-out-of-bounds]"), std::string::npos) << bad.text;
  EXPECT_EQ(bad.text.find("prefetch contents:"), std::string::npos) << bad.text;
  EXPECT_EQ(run("run " + past + " --dma eager").code, 1);
  // --prefetch on run replaces the file's contents for that run.
  Out replaced =
      run("run " + past + " --dma eager --prefetch ids=" + temp_file("ok3.npy", npy_i32({1, 2, 3, 4})));
  EXPECT_EQ(replaced.code, 0) << replaced.text;
}

TEST(CliPrefetch, AFileThatCannotBeReadOrDoesNotFitIsBadInputAtItsNameButFmtStillFormats) {
  const std::string rest = "    in  x: f32[64, 128]  block=(8, 128)  index=(i, ids) -> (ids[i], 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)\n"
                           "    body:\n        o[...] = x[...]\n";
  temp_file("nine.npy", npy_i32({0, 9, 1, 2}));
  const std::string outside =
      temp_file("outside.pk",
                "kernel g:\n    grid = (4,)\n    prefetch ids: i32[4] from \"nine.npy\" in [0, 8)\n" + rest);
  const std::string missing =
      temp_file("missing.pk",
                "kernel g:\n    grid = (4,)\n    prefetch ids: i32[4] from \"none.npy\" in [0, 8)\n" + rest);
  for (const char *cmd : {"check ", "lower ", "run "}) {
    Out o = run(cmd + outside);
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_NE(o.text.find(outside +
                          ":3:31: error: the contents from \"nine.npy\" do not fit the declaration: "
                          "ids[1] = 9 is outside the stated range [0, 8)"),
              std::string::npos)
        << cmd << o.text;
    Out m = run(cmd + missing);
    EXPECT_EQ(m.code, 3) << cmd << m.text;
    EXPECT_NE(
        m.text.find(missing + ":3:31: error: cannot read the contents of prefetch 'ids' from \"none.npy\": "),
        std::string::npos)
        << cmd << m.text;
    EXPECT_NE(m.text.find("No such file or directory"), std::string::npos) << cmd << m.text;
  }
  // Formatting reads no data: the declaration prints back as written.
  Out fmt = run("fmt " + missing);
  EXPECT_EQ(fmt.code, 0) << fmt.text;
  EXPECT_NE(fmt.text.find("prefetch ids: i32[4] from \"none.npy\" in [0, 8)"), std::string::npos) << fmt.text;
}

TEST(CliPrefetch, ARank2PageTableFromAFileChecksAndRunsAndItsShapeMustMatch) {
  // Block (b, p) of x is the one pt[b, p] names; a read one column past its row is poison,
  // not the next row's first entry.
  const std::string rest = "    in  x: f32[32, 128]  block=(8, 128)  index=(b, p, t) -> (t[b, p + D], 0)\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(b, p, t) -> (b * 2 + p, 0)\n"
                           "    body:\n        o[...] = x[...]\n";
  temp_file("pt.npy", npy_i32({3, 1, 0, 2}, "(2, 2)"));
  temp_file("pt14.npy", npy_i32({3, 1, 0, 2}, "(1, 4)"));
  auto kernel = [&](const std::string &name, const std::string &decl, int d) {
    return temp_file(name, "kernel g:\n    param D = " + std::to_string(d) + "\n    grid = (2, 2)\n    " +
                               decl + "\n" + rest);
  };
  const std::string ok = kernel("pt_ok.pk", "prefetch pt: i32[2, 2] from \"pt.npy\" in [0, 4)", 0);
  Out check = run("check " + ok);
  EXPECT_EQ(check.code, 0) << check.text;
  EXPECT_EQ(run("run " + ok + " --dma eager").code, 0);
  const std::string past = kernel("pt_past.pk", "prefetch pt: i32[2, 2] from \"pt.npy\" in [0, 4)", 1);
  // The command's exit code, and a line its output must hold.
  auto expect = [](const std::string &args, int code, const std::string &says) {
    Out o = run(args);
    EXPECT_EQ(o.code, code) << args << "\n" << o.text;
    EXPECT_NE(o.text.find(says), std::string::npos) << args << "\n" << o.text;
  };
  expect("check " + past, 1,
         "(-2147483648 is also what a read outside a prefetch array gives) [index-out-of-bounds]");
  const std::string wrong = kernel("pt_wrong.pk", "prefetch pt: i32[2, 2] from \"pt14.npy\"", 0);
  expect("check " + wrong, 3,
         "error: \"pt14.npy\" holds an array of shape (1, 4), but 'pt' is declared [2, 2]");
  const std::string open = kernel("pt_open.pk", "prefetch pt: i32[2, 2] in [0, 4)", 0);
  expect("run " + open + " --prefetch pt=" + temp_dir().string() + "/pt14.npy", 3,
         "error: --prefetch pt: the file holds an array of shape (1, 4), but 'pt' is declared [2, 2]");
  EXPECT_EQ(run("run " + open + " --dma eager --prefetch pt=" + temp_dir().string() + "/pt.npy").code, 0);
}

TEST(CliPrefetch, ARunThatCopiesFromAPageReadPastItsRowNamesTheLineNotTheExpandedTable) {
  // pt[i, 1] lies outside pt's one column: the run faults at that read, as check reports it.
  const std::string f =
      temp_file("row.pk", "kernel g:\n"
                          "    grid = (2,)\n"
                          "    prefetch pt: i32[2, 1] = [1, 0]\n"
                          "    in  x: f32[2, 8, 128]  memory_space=any\n"
                          "    out o: f32[16, 128]  block=(8, 128)  index=(i, t) -> (i, 0)\n"
                          "    scratch buf: f32[8, 128]\n"
                          "    body:\n"
                          "        sync_copy(x[pt[program_id(0), 1]], buf)\n"
                          "        o[...] = buf[...]\n");
  Out o = run("run " + f + " --dma eager");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(
      o.text.find(
          "line 8: oracle: a read of a scalar-prefetch array outside it at grid point (0,): its subscript 1 "
          "is 1, outside "
          "0:1"),
      std::string::npos)
      << o.text;
  EXPECT_EQ(o.text.find("where("), std::string::npos) << o.text;
  Out c = run("check " + f);
  EXPECT_EQ(c.code, 1) << c.text;
  EXPECT_NE(c.text.find("[index-out-of-bounds]"), std::string::npos) << c.text;
}
