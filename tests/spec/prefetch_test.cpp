// Scalar prefetch (spec/prefetch.hpp): `prefetch` declarations parse, print
// back, validate with located errors, and elaborate into kernels that read
// no prefetch array.
#include "spec/eval.hpp"
#include "spec/parse.hpp"
#include "spec/prefetch.hpp"
#include "spec/print.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace pipecheck::spec;
using pipecheck::spec::testing::first_error;
using pipecheck::spec::testing::kernel_ok;

namespace {

std::string gather(const std::string &decl, const std::string &index = "(i, ids) -> (ids[i], 0)") {
  return "kernel g:\n"
         "    grid = (4,)\n"
         "    " +
         decl +
         "\n"
         "    in  x: f32[64, 128]  block=(8, 128)  index=" +
         index +
         "\n"
         "    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)\n"
         "    body:\n"
         "        o[...] = x[...]\n";
}

} // namespace

TEST(PrefetchParse, ReadsGivenContentsAndConstraints) {
  KernelSpec k = kernel_ok(gather("prefetch ids: i32[4] in [0, 8) nondecreasing sum == 12"));
  ASSERT_EQ(k.prefetches.size(), 1u);
  const Prefetch &p = k.prefetches[0];
  EXPECT_EQ(p.name, "ids");
  EXPECT_FALSE(p.is_given());
  ASSERT_TRUE(p.lo && p.hi && p.sum);
  EXPECT_EQ(p.hi->int_value, 8);
  EXPECT_TRUE(p.nondecreasing);
  EXPECT_EQ(p.sum->int_value, 12);
  KernelSpec given = kernel_ok(gather("prefetch ids: i32[4] = [0, 0, 1, 2]"));
  ASSERT_TRUE(given.prefetches.at(0).values);
  EXPECT_EQ(given.prefetches[0].values->size(), 4u);
}

TEST(PrefetchParse, PrintsBackToTheSameKernel) {
  for (const std::string decl : {"prefetch ids: i32[4] = [0, 0, 1, 2] in [0, 8) nondecreasing",
                                 "prefetch ids: i32[2 * 2] in [0, 8) sum == 6", "prefetch ids: i32[4]"}) {
    KernelSpec k = kernel_ok(gather(decl));
    const std::string printed = print(k);
    EXPECT_NE(printed.find(decl), std::string::npos) << printed;
    auto again = parse_and_validate(SourceFile::from_string("p.pk", printed));
    ASSERT_TRUE(again.file) << printed;
    EXPECT_EQ(std::get<KernelSpec>(again.file->units.at(0)), k) << printed;
  }
}

TEST(PrefetchValidate, RejectsContentsThatBreakTheirConstraintsAtTheElement) {
  EXPECT_EQ(first_error(gather("prefetch ids: i32[4] = [0, 0, 9, 2] in [0, 8)")),
            "3:35: ids[2] = 9 is outside the stated range [0, 8)");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[4] = [0, 2, 1, 2] nondecreasing")),
            "3:35: ids[2] = 1 is smaller than ids[1] = 2, but 'ids' is stated nondecreasing");
  // A table of rank 2 names the element as the body subscripts it.
  EXPECT_EQ(first_error(gather("prefetch ids: i32[2, 2] = [0, 0, 9, 2] in [0, 8)")).substr(6),
            "ids[1, 0] = 9 is outside the stated range [0, 8)");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[2, 2] = [0, 2, 1, 2] nondecreasing")).substr(6),
            "ids[1, 0] = 1 is smaller than ids[0, 1] = 2, but 'ids' is stated nondecreasing");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[4] = [0, 0, 1, 2] sum == 4")),
            "3:5: the elements of 'ids' sum to 3, but the stated sum is 4");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[4] = [0, 0, 1]")),
            "3:23: 'ids' has 4 elements but 3 are given");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[4] in [3, 3)")),
            "3:30: the range [3, 3) of prefetch 'ids' is empty");
  // No int8 holds 130 (JAX wraps it to -126: another block).
  EXPECT_EQ(first_error(gather("prefetch ids: i8[4] = [0, 1, 130, 3]")),
            "3:34: ids[2] = 130 is outside what i8 holds (-128..127)");
  EXPECT_EQ(first_error(gather("prefetch ids: u8[4] in [0, 300)")),
            "3:32: the range [0, 300) of prefetch 'ids' reaches past what u8 holds (0..255)");
}

TEST(PrefetchValidate, RejectsBadDeclarationsAndReads) {
  EXPECT_EQ(first_error(gather("prefetch ids: f32[4]")),
            "3:5: a prefetch array holds integers (i32), not f32");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[2, 2, 2, 2, 2]")),
            "3:22: a prefetch operand has rank 1 to 4 (`ids: i32[n]`, `ids: i32[b, n]`), not 5");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[]")),
            "3:22: a prefetch operand has rank 1 to 4 (`ids: i32[n]`, `ids: i32[b, n]`), not 0");
  // A 2-D array is read with two subscripts, in index maps and bodies alike.
  EXPECT_EQ(
      first_error(gather("prefetch ids: i32[4, 4]")),
      "4:61: a prefetch array is read one element at a time ('ids[i, j]') in the index map of operand 'x'");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[4, 0]", "(i, ids) -> (ids[i, 0], 0)")),
            "3:26: an extent of prefetch 'ids' must be at least 1, got 0");
  EXPECT_EQ(
      first_error(gather("prefetch ids: i32[4] in [0, 8) bounded")),
      "3:36: unknown prefetch constraint 'bounded'; expected `in [lo, hi)`, nondecreasing or `sum == s`");
  // The prefetch refs follow the grid indices: all or none.
  EXPECT_NE(first_error(gather("prefetch ids: i32[4]", "(i, ids, more) -> (ids[i], 0)"))
                .find("prefetch refs follow"),
            std::string::npos);
  EXPECT_EQ(
      first_error(gather("prefetch ids: i32[4]", "(i, ids) -> (ids[0:2], 0)")),
      "4:61: a prefetch array is read one element at a time ('ids[i]') in the index map of operand 'x'");
  // A store makes the array SMEM state (spec/state.hpp): one element at a time.
  EXPECT_EQ(first_error(
                "kernel g:\n    prefetch ids: i32[4]\n    out o: f32[8]\n    body:\n        ids[0:2] = 1\n"),
            "5:9: 'ids' holds SMEM scalars: read and store one element at a time (ids[i]), with constant "
            "subscripts");
}

TEST(PrefetchSpaceTest, EnumeratesOnlyAllowedContents) {
  KernelSpec k = kernel_ok(gather("prefetch ids: i32[3] in [0, 3) nondecreasing sum == 3"));
  PrefetchSpace s = prefetch_space(k, {});
  ASSERT_TRUE(s.errors.empty() && s.unknown.empty());
  auto all = enumerate_prefetch(s, 100);
  ASSERT_TRUE(all);
  std::set<std::vector<std::int64_t>> got;
  for (const auto &c : *all)
    got.insert(c.at("ids"));
  EXPECT_EQ(got, (std::set<std::vector<std::int64_t>>{{0, 1, 2}, {1, 1, 1}}));
  EXPECT_FALSE(
      enumerate_prefetch(prefetch_space(kernel_ok(gather("prefetch ids: i32[4] in [0, 8)")), {}), 100));
}

TEST(PrefetchSpaceTest, PatternsAreThePartitionsTheRangeAllows) {
  // Bell(4) = 15 partitions of 4 positions; with only 2 values, the 8 of at most 2 classes.
  auto wide = prefetch_patterns(prefetch_space(kernel_ok(gather("prefetch ids: i32[4] in [0, 8)")), {}), 100);
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->size(), 15u);
  auto narrow =
      prefetch_patterns(prefetch_space(kernel_ok(gather("prefetch ids: i32[4] in [5, 7)")), {}), 100);
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->size(), 8u);
  for (const auto &c : *narrow)
    for (auto v : c.at("ids"))
      EXPECT_TRUE(v == 5 || v == 6);
  // Nondecreasing: runs only, 2^3 of them.
  auto runs = prefetch_patterns(
      prefetch_space(kernel_ok(gather("prefetch ids: i32[4] in [0, 8) nondecreasing")), {}), 100);
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->size(), 8u);
}

TEST(PrefetchSpaceTest, PickedContentsSatisfyTheConstraintsForEverySeed) {
  KernelSpec k = kernel_ok(gather("prefetch ids: i32[4] in [0, 8) nondecreasing sum == 13"));
  PrefetchSpace s = prefetch_space(k, {});
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    std::string why;
    auto c = pick_prefetch(s, seed, why);
    ASSERT_TRUE(c) << why;
    EXPECT_FALSE(prefetch_violation(s.arrays.at(0), c->at("ids")));
  }
}

TEST(PrefetchElaborate, ReadsBecomeWhereTreesAndReadsOutsideArePoison) {
  KernelSpec k = kernel_ok(gather("prefetch ids: i32[4] = [3, 1, 4, 1]"));
  PrefetchSpace s = prefetch_space(k, {});
  KernelSpec e = elaborate_prefetch(k, s, {});
  EXPECT_TRUE(e.prefetches.empty());
  const IndexMap &m = *e.operands.at(0).index_map;
  EXPECT_EQ(m.params, std::vector<std::string>{"i"});
  for (std::int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(eval_int(m.results.at(0), {{"i", i}}), (std::vector<std::int64_t>{3, 1, 4, 1})[i]);
  EXPECT_EQ(eval_int(m.results.at(0), {{"i", 4}}), kPrefetchPoison);
  EXPECT_EQ(eval_int(m.results.at(0), {{"i", -1}}), kPrefetchPoison);
  // Open contents read element names.
  KernelSpec open =
      elaborate_prefetch(kernel_ok(gather("prefetch ids: i32[4] in [0, 8)")),
                         prefetch_space(kernel_ok(gather("prefetch ids: i32[4] in [0, 8)")), {}), {});
  EXPECT_EQ(eval_int(open.operands.at(0).index_map->results.at(0),
                     {{"i", 2}, {"ids[0]", 5}, {"ids[1]", 6}, {"ids[2]", 7}, {"ids[3]", 1}}),
            7);
}

TEST(PrefetchValidate, BoundsTheLengthAndKeepsTheNameFromBeingShadowed) {
  EXPECT_EQ(first_error(gather("prefetch ids: i32[70000] in [0, 8)")),
            "3:23: the length of prefetch 'ids' must lie in [1, 65536], got 70000");
  EXPECT_EQ(first_error("kernel g:\n    prefetch ids: i32[4]\n    out o: f32[8]\n    body:\n"
                        "        for ids in range(2):\n            o[...] = zeros\n"),
            "5:9: loop variable 'ids' shadows a prefetch operand");
  // A huge open array is neither enumerated nor patterned (each walk recurses per element).
  auto big = prefetch_space(kernel_ok(gather("prefetch ids: i32[60000] in [0, 1)")), {});
  EXPECT_FALSE(enumerate_prefetch(big, 256));
  EXPECT_FALSE(prefetch_patterns(big, 256));
}

namespace {

// A loader that knows one file, the path as the .pk's folder resolves it.
PrefetchLoader one_file(std::string path, std::vector<std::int64_t> values, std::vector<std::string> *asked) {
  return [=](const std::string &p) {
    if (asked) asked->push_back(p);
    LoadedContents c;
    if (p == path) {
      c.values = values;
    } else {
      c.error = p + ": cannot be read: No such file or directory";
    }
    return c;
  };
}

} // namespace

TEST(PrefetchFromFile, ParsesAndPrintsTheFileNameWithItsEscapes) {
  auto r = parse(
      SourceFile::from_string("t.pk", gather(R"(prefetch ids: i32[4] from "tables/a \"b\".npy" in [0, 8))")));
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  const Prefetch &p = std::get<KernelSpec>(r.file->units.at(0)).prefetches.at(0);
  EXPECT_EQ(p.file, std::optional<std::string>(R"(tables/a "b".npy)"));
  EXPECT_EQ(p.file_loc.line, 3);
  EXPECT_EQ(p.file_loc.col, 31);
  EXPECT_FALSE(p.values); // not loaded by parse
  const std::string printed = print(*r.file);
  EXPECT_NE(printed.find(R"(prefetch ids: i32[4] from "tables/a \"b\".npy" in [0, 8))"), std::string::npos)
      << printed;
  auto again = parse(SourceFile::from_string("t.pk", printed));
  ASSERT_TRUE(again.file);
  EXPECT_EQ(std::get<KernelSpec>(again.file->units.at(0)).prefetches.at(0).file, p.file);
}

TEST(PrefetchFromFile, LoadsTheFileRelativeToTheKernelsFolderAsGivenContents) {
  std::vector<std::string> asked;
  auto r = parse_and_validate(
      SourceFile::from_string("kernels/g.pk", gather(R"(prefetch ids: i32[4] from "ids.npy")")),
      one_file("kernels/ids.npy", {3, 3, 0, 7}, &asked));
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  EXPECT_EQ(asked, std::vector<std::string>{"kernels/ids.npy"});
  const Prefetch &p = std::get<KernelSpec>(r.file->units.at(0)).prefetches.at(0);
  ASSERT_TRUE(p.is_given());
  std::vector<std::int64_t> got;
  for (const auto &e : *p.values)
    got.push_back(e.int_value);
  EXPECT_EQ(got, (std::vector<std::int64_t>{3, 3, 0, 7}));
  // An absolute name is taken as it is.
  asked.clear();
  auto abs = parse_and_validate(
      SourceFile::from_string("kernels/g.pk", gather(R"(prefetch ids: i32[4] from "/t/ids.npy")")),
      one_file("/t/ids.npy", {0, 0, 0, 0}, &asked));
  EXPECT_TRUE(abs.file);
  EXPECT_EQ(asked, std::vector<std::string>{"/t/ids.npy"});
}

TEST(PrefetchFromFile, ContentsThatDoNotFitTheDeclarationAreErrorsAtTheFileName) {
  auto check = [](std::vector<std::int64_t> values, const std::string &decl) {
    auto r = parse_and_validate(SourceFile::from_string("g.pk", gather(decl)),
                                one_file("ids.npy", values, nullptr));
    if (r.errors.empty()) return std::string("no error");
    const auto &e = r.errors.front();
    return std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col) + ": " + e.message;
  };
  EXPECT_EQ(
      check({0, 9, 1, 2}, R"(prefetch ids: i32[4] from "ids.npy" in [0, 8))"),
      R"(3:31: the contents from "ids.npy" do not fit the declaration: ids[1] = 9 is outside the stated range [0, 8))");
  EXPECT_EQ(
      check({0, 1, 2}, R"(prefetch ids: i32[4] from "ids.npy")"),
      R"(3:31: the contents from "ids.npy" do not fit the declaration: 'ids' has 4 elements but 3 are given)");
  EXPECT_EQ(
      check({2, 1, 1, 1}, R"(prefetch ids: i32[4] from "ids.npy" nondecreasing)"),
      R"(3:31: the contents from "ids.npy" do not fit the declaration: ids[1] = 1 is smaller than ids[0] = 2, but 'ids' is stated nondecreasing)");
  EXPECT_EQ(
      check({0, 0, 0, 0}, R"(prefetch ids: i32[4] from "other.npy")"),
      R"(3:31: cannot read the contents of prefetch 'ids' from "other.npy": other.npy: cannot be read: No such file or directory)");
}

TEST(PrefetchFromFile, WithoutALoaderTheContentsAreAnErrorNotOpenContents) {
  // Library readers that load no files must not check the kernel for every
  // table instead of the file's one.
  EXPECT_EQ(
      first_error(gather(R"(prefetch ids: i32[4] from "ids.npy" in [0, 8))")),
      R"(3:31: the contents of prefetch 'ids' from "ids.npy" are not loaded: this reader of .pk files reads no other files (the pipecheck command does))");
}

TEST(PrefetchFromFile, BadSpellingsAreLocatedErrors) {
  EXPECT_EQ(
      first_error(gather("prefetch ids: i32[4] from ids.npy")),
      "3:31: expected the file the contents of prefetch 'ids' come from, as a string (`from \"ids.npy\"`), "
      "found 'ids'");
  EXPECT_EQ(first_error(gather(R"(prefetch ids: i32[4] from "ids.npy)")),
            "3:31: unterminated string: a string ends with '\"' on its line");
  EXPECT_EQ(first_error(gather(R"(prefetch ids: i32[4] from "a\n.npy")")),
            "3:33: unknown escape in a string: only \\\" and \\\\ are escapes");
  EXPECT_EQ(first_error(gather(R"(prefetch ids: i32[4] from "")")),
            "3:31: the file name of prefetch 'ids' is empty");
  EXPECT_EQ(first_error(gather(R"(prefetch ids: i32[4] = [0, 0, 0, 0] from "ids.npy")")),
            "3:41: the contents of prefetch 'ids' are given twice: write `= [...]` or `from \"FILE\"`");
}

TEST(PrefetchFlatten, ReadsOfARank2ArrayAreItsCOrderContentsAndPoisonOutsideAnyDim) {
  // pt: i32[2, 3] given in C order; the index map reads pt[i // 3, i % 3 + d] for d in {0, 1}:
  // with d = 1 the last column reads one past its row, which is poison, not the next row's first.
  for (int d : {0, 1}) {
    KernelSpec k = kernel_ok("kernel g:\n"
                             "    grid = (6,)\n"
                             "    prefetch pt: i32[2, 3] = [5, 4, 3, 2, 1, 0]\n"
                             "    in  x: f32[64, 128]  block=(8, 128)  index=(i, t) -> (t[i // 3, i % 3 + " +
                             std::to_string(d) +
                             "], 0)\n"
                             "    out o: f32[48, 128]  block=(8, 128)  index=(i, t) -> (i, 0)\n"
                             "    body:\n"
                             "        o[...] = x[...]\n");
    ASSERT_EQ(k.prefetches.size(), 1u);
    EXPECT_EQ(k.prefetches[0].read_rank(), 2u);
    // The kernel as parsed prints as written.
    EXPECT_NE(print(k).find("prefetch pt: i32[2, 3] = [5, 4, 3, 2, 1, 0]"), std::string::npos) << print(k);
    EXPECT_NE(print(k).find("(t[i // 3, i % 3 + " + std::to_string(d) + "], 0)"), std::string::npos)
        << print(k);
    const KernelSpec flat = flatten_prefetch_reads(k);
    EXPECT_TRUE(flat.prefetches.at(0).flat);
    EXPECT_EQ(flat.prefetches[0].read_rank(), 1u);
    EXPECT_EQ(flatten_prefetch_reads(flat), flat);
    PrefetchSpace s = prefetch_space(k, {});
    ASSERT_TRUE(s.errors.empty());
    EXPECT_EQ(s.arrays.at(0).dims, (std::vector<std::int64_t>{2, 3}));
    KernelSpec e = elaborate_prefetch(k, s, {});
    const Expr &block_row = e.operands.at(0).index_map->results.at(0);
    for (std::int64_t i = 0; i < 6; ++i) {
      const std::int64_t col = i % 3 + d;
      const std::int64_t want = col < 3 ? 5 - (i / 3 * 3 + col) : kPrefetchPoison;
      EXPECT_EQ(eval_int(block_row, {{"i", i}}), std::optional<std::int64_t>(want))
          << "i=" << i << " d=" << d;
    }
  }
}

TEST(PrefetchFlatten, ABodyReadOfARank3ArrayBecomesItsCOrderIndexOrMinusOne) {
  for (const std::string mid : {"1", "2"}) {
    KernelSpec k = kernel_ok("kernel g:\n"
                             "    grid = (2,)\n"
                             "    prefetch m: i32[2, 2, 2] in [0, 2)\n"
                             "    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                             "    body:\n"
                             "        b = program_id(0)\n"
                             "        when m[b, " +
                             mid +
                             ", 0] != 0:\n"
                             "            o[...] = zeros\n");
    const KernelSpec flat = flatten_prefetch_reads(k);
    const auto &when = std::get<If>(flat.body.at(1).kind);
    const Expr &read = when.cond.args.at(0);
    ASSERT_EQ(read.op, Op::Ref);
    ASSERT_EQ(read.args.size(), 1u);
    // Element (b, 1, 0) is 4b + 2 in C order; (b, 2, 0) lies outside dim 1: index -1, poison.
    for (std::int64_t b : {0, 1})
      EXPECT_EQ(eval_int(read.args[0], {{"b", b}}), std::optional<std::int64_t>(mid == "1" ? 4 * b + 2 : -1))
          << print(read);
  }
}

namespace {

std::size_t nodes(const Expr &e) {
  std::size_t n = 1;
  for (const auto &a : e.args)
    n += nodes(a);
  return n;
}

std::string table(std::int64_t n, std::int64_t mul, std::int64_t add) {
  std::string s = "[";
  for (std::int64_t i = 0; i < n; ++i)
    s += (i ? ", " : "") + std::to_string((i * mul + add) % n);
  return s + "]";
}

} // namespace

TEST(PrefetchElaborate, ASubscriptThatReadsAnotherArrayIsBoundOnceBeforeItsStatement) {
  // b[(a[k] + 1) % 32]: the read of b is a tree over b's 32 elements whose
  // every branch names its subscript, itself a tree over a's; bound to a
  // local, it is written once (ragged paged attention's page table reads,
  // subscripted by reads of its sequence tables, were hundreds of kilobytes
  // of text per copy). A while's condition, evaluated at every iteration,
  // keeps its subscript in place.
  KernelSpec k = kernel_ok("kernel g:\n"
                           "    grid = (4,)\n"
                           "    prefetch a: i32[32] = " +
                           table(32, 7, 3) +
                           "\n"
                           "    prefetch b: i32[32] = " +
                           table(32, 13, 5) +
                           "\n"
                           "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                           "    body:\n"
                           "        k = program_id(0)\n"
                           "        when b[(a[k] + 1) % 32] > 4:\n"
                           "            o[...] = zeros\n"
                           "        while k < b[(a[k] + 2) % 32], bound=64:\n"
                           "            k = k + 1\n");
  KernelSpec e = elaborate_prefetch(k, prefetch_space(k, {}), {});
  ASSERT_EQ(e.body.size(), 4u) << print(e);
  const auto *let = std::get_if<Let>(&e.body.at(1).kind);
  ASSERT_TRUE(let) << print(e);
  EXPECT_EQ(let->name, "b_idx0");
  const auto &when = std::get<If>(e.body.at(2).kind);
  const auto &loop = std::get<For>(e.body.at(3).kind);
  EXPECT_EQ(loop.body.size(), 1u) << print(e); // the while's `if cond:` alone
  const std::vector<std::int64_t> a = [] {
    std::vector<std::int64_t> v;
    for (std::int64_t i = 0; i < 32; ++i)
      v.push_back((i * 7 + 3) % 32);
    return v;
  }();
  for (std::int64_t kk = 0; kk < 4; ++kk) {
    const auto sub = eval_int(let->value, {{"k", kk}});
    EXPECT_EQ(sub, (a[static_cast<std::size_t>(kk)] + 1) % 32);
    const std::int64_t b = (*sub * 13 + 5) % 32;
    EXPECT_EQ(eval_int(when.cond, {{"k", kk}, {"b_idx0", *sub}}), b > 4 ? 1 : 0);
    const std::int64_t b2 = ((a[static_cast<std::size_t>(kk)] + 2) % 32 * 13 + 5) % 32;
    EXPECT_EQ(eval_int(while_cond(loop), {{"k", kk}}), kk < b2 ? 1 : 0);
  }
  // The `when`'s tree names b_idx0 at each of its branches, where the
  // while's copies a's tree: some 32 times 32 times a few nodes.
  EXPECT_LT(nodes(when.cond) + nodes(let->value), 800u) << print(e);
  EXPECT_GT(nodes(while_cond(loop)), 4000u);
}

TEST(PrefetchSpaceTest, OpenContentsNoElementsOfTheirRangeCanSumToAreALocatedError) {
  // (check said unknown and run exited 3 at the kernel's header.)
  EXPECT_EQ(
      first_error(gather("prefetch ids: i32[2] in [0, 2) sum == 100")),
      "3:43: no contents of prefetch 'ids' satisfy its constraints: 2 elements in [0, 2) cannot sum to 100");
  // Nondecreasing and summing to 5 within [0, 2): at most 1 + 1 + 1.
  EXPECT_EQ(
      first_error(gather("prefetch ids: i32[3] in [0, 2) nondecreasing sum == 5")),
      "3:57: no contents of prefetch 'ids' satisfy its constraints: 3 elements in [0, 2), nondecreasing, "
      "cannot sum to 5");
  EXPECT_EQ(first_error(gather("prefetch ids: i32[3] in [0, 2) nondecreasing sum == 3")), "no error");
}

TEST(PrefetchSpaceTest, OpenContentsWithOnlyASumAreDrawnWhereTheSumIsReachable) {
  // Without a range any i32 is allowed: a negative sum or one past 15 per
  // element is still drawn (run's draw range once left them undrawable).
  for (const char *decl : {"prefetch ids: i32[2] sum == -5", "prefetch ids: i32[3] sum == 100",
                           "prefetch ids: i32[3] nondecreasing sum == -7"}) {
    PrefetchSpace s = prefetch_space(kernel_ok(gather(decl)), {});
    ASSERT_TRUE(s.errors.empty()) << decl;
    std::string why;
    const auto c = pick_prefetch(s, 3, why);
    ASSERT_TRUE(c) << decl << ": " << why;
    EXPECT_FALSE(prefetch_violation(s.arrays.at(0), c->at("ids"))) << decl;
  }
}
