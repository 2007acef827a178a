// `while COND, bound=N:` in kernel bodies and pipelines (spec::For with
// is_while): parsed as N iterations of `if COND:`, printed back as written,
// type-checked with located errors, and kept as a while loop by the lowering.
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck::spec;
using pipecheck::spec::testing::first_error;
using pipecheck::spec::testing::kernel_ok;

namespace {

std::string search(const std::string &cond = "k < n and lens[k] == 0", const std::string &bound = "bound=n") {
  return "kernel w:\n"
         "    param n = 4\n"
         "    grid = (n,)\n"
         "    prefetch lens: i32[n] = [0, 2, 0, 3]\n"
         "    in  x: f32[n * 8, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
         "    out o: f32[n * 8, 128]  block=(8, 128)  index=(i, l) -> (i, 0)\n"
         "    body:\n"
         "        k = program_id(0) + 1\n"
         "        while " +
         cond + ", " + bound +
         ":\n"
         "            k = k + 1\n"
         "        o[...] = x[...] * k\n";
}

const For *first_while(const Block &b) {
  for (const auto &s : b) {
    if (const auto *f = std::get_if<For>(&s.kind)) {
      if (f->is_while) return f;
      if (const For *in = first_while(f->body)) return in;
    }
    if (const auto *i = std::get_if<If>(&s.kind)) {
      if (const For *in = first_while(i->then_body)) return in;
      if (const For *in = first_while(i->else_body)) return in;
    }
  }
  return nullptr;
}

} // namespace

TEST(WhileLoop, ParsesAsItsBoundOfIterationsEachGuardedByItsCondition) {
  const KernelSpec k = kernel_ok(search());
  const For *f = first_while(k.body);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(print(f->lo), "0");
  EXPECT_EQ(print(f->hi), "n");
  ASSERT_EQ(f->body.size(), 1u);
  const auto *guard = std::get_if<If>(&f->body[0].kind);
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ(print(guard->cond), "k < n and lens[k] == 0");
  EXPECT_TRUE(guard->else_body.empty());
  EXPECT_EQ(print(while_body(*f).at(0)), "k = k + 1\n");
}

TEST(WhileLoop, PrintsBackAsWrittenAndReparsesToTheSameKernel) {
  const KernelSpec k = kernel_ok(search());
  const std::string text = print(k);
  EXPECT_NE(text.find("        while k < n and lens[k] == 0, bound=n:\n            k = k + 1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(kernel_ok(text), k);
}

TEST(WhileLoop, ADifferentBoundIsADifferentLoop) {
  EXPECT_FALSE(kernel_ok(search()) == kernel_ok(search("k < n and lens[k] == 0", "bound=3")));
}

TEST(WhileLoop, AWhileWithoutItsBoundIsALocatedError) {
  std::string t = search();
  t.replace(t.find(", bound=n"), 9, "");
  EXPECT_EQ(first_error(t),
            "9:37: a while loop states the bound its check uses: 'while COND, bound=N:', found ':'");
  EXPECT_EQ(first_error(search("k < n", "limit=4")),
            "9:22: expected 'bound=N' after the while condition, found 'limit'");
}

TEST(WhileLoop, WhileIsAKeywordNotAName) {
  std::string t = search();
  t.replace(t.find("k = program_id(0) + 1"), 1, "while");
  EXPECT_NE(first_error(t).find("8:"), std::string::npos) << first_error(t);
}

TEST(WhileLoop, AConditionOrBoundThatIsABlockValueIsALocatedError) {
  EXPECT_EQ(first_error(search("x[...] > 0")),
            "9:22: a 'while' condition must be an integer, but 'x[...] > 0' is not an integer expression");
  EXPECT_EQ(first_error(search("k < n", "bound=x[0, 0]")),
            "9:28: a buffer reference is not allowed in a while bound");
}

TEST(WhileLoop, AnIntegerConditionOnCarriedLocalsTypeChecks) {
  EXPECT_TRUE(typecheck(kernel_ok(search())).empty());
}

TEST(WhileLoop, TheRolledLoweringKeepsTheWhileLoopAndItsTextParsesBack) {
  const KernelSpec k = kernel_ok(search());
  std::vector<Diagnostic> errs;
  auto low = lower(k, LowerOptions{}, errs);
  ASSERT_TRUE(low) << (errs.empty() ? "" : errs[0].message);
  const For *f = first_while(low->program.body);
  ASSERT_NE(f, nullptr) << print(low->program);
  EXPECT_EQ(print(f->hi), "4");
  const std::string text = print(low->program);
  EXPECT_NE(text.find("while k < 4 and "), std::string::npos) << text;
  auto r = parse(SourceFile::from_string("low.pk", text));
  ASSERT_TRUE(r.file) << render(SourceFile::from_string("low.pk", text), r.errors.at(0));
  EXPECT_EQ(std::get<Program>(r.file->units.at(0)), low->program);
}

TEST(WhileLoop, TheUnrolledLoweringDecidesTheLoopAtEachGridPoint) {
  const KernelSpec k = kernel_ok(search());
  std::vector<Diagnostic> errs;
  LowerOptions o;
  o.unroll = true;
  auto low = lower(k, o, errs);
  ASSERT_TRUE(low) << (errs.empty() ? "" : errs[0].message);
  EXPECT_EQ(first_while(low->program.body), nullptr);
  // Grid point 1 searches past the empty sequence 2: k = 3 there.
  EXPECT_NE(print(low->program).find("k = 3"), std::string::npos) << print(low->program);
}

TEST(WhileLoop, TheUnrolledLoweringRefusesARunPastTheBound) {
  std::string t = search("k < n and lens[k] == 0", "bound=1");
  t.replace(t.find("[0, 2, 0, 3]"), 12, "[0, 0, 0, 3]");
  std::vector<Diagnostic> errs;
  LowerOptions o;
  o.unroll = true;
  EXPECT_FALSE(lower(kernel_ok(t), o, errs));
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs[0].loc.line, 9);
  EXPECT_NE(errs[0].message.find("the while loop at line 9 may run past its bound 1"), std::string::npos)
      << errs[0].message;
}

TEST(WhileLoop, APipelineMayUseTheSameForm) {
  const std::string text = "pipeline p:\n"
                           "    param N >= 1 <= 8\n"
                           "    hbm A: f32[8, 128]\n"
                           "    sram X: f32[128]\n"
                           "    k = 0\n"
                           "    while k < N and k != 3, bound=8:\n"
                           "        k = k + 1\n"
                           "    copy_in_start(A[k], X)\n"
                           "    copy_in_wait(X)\n";
  auto r = parse_and_validate(SourceFile::from_string("p.pk", text));
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  EXPECT_EQ(print(*r.file), text);
}
