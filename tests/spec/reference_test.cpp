// A kernel's `reference:` section: parsed after the body, printed back the
// same, its names checked (whole inputs and outputs, every output set) and
// its statements typed on whole arrays, each problem a located error.
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

// A matmul kernel with the given reference lines (line 11 is the first statement).
std::string matmul(const std::string &reference, const std::string &out = "f32[256, 256]") {
  return "kernel mm:\n"
         "    grid = (2, 2, 2)\n"
         "    in  a: f32[256, 256] block=(128, 128) index=(i, j, k) -> (i, k)\n"
         "    in  b: f32[256, 256] block=(128, 128) index=(i, j, k) -> (k, j)\n"
         "    out o: " +
         out +
         " block=(128, 128) index=(i, j, k) -> (i, j)\n"
         "    scratch acc: f32[128, 128]\n"
         "    body:\n"
         "        acc[...] = dot(a[...], b[...])\n"
         "        o[...] = acc[...]\n"
         "    reference:\n" +
         reference;
}

std::vector<Diagnostic> errors_of(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("t.pk", text)).errors;
}

const KernelSpec kernel_of(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("t.pk", text));
  EXPECT_TRUE(r.file.has_value()) << (r.errors.empty() ? "" : r.errors[0].message);
  return r.file ? std::get<KernelSpec>(r.file->units.at(0)) : KernelSpec{};
}

// The first error's line, column and message.
std::tuple<int, int, std::string> first_error(const std::string &text) {
  auto errs = errors_of(text);
  if (errs.empty()) {
    ADD_FAILURE() << "no error for:\n" << text;
    return {0, 0, ""};
  }
  return {errs[0].loc.line, errs[0].loc.col, errs[0].message};
}

} // namespace

TEST(Reference, ParsesAfterTheBodyAsBindingsOnWholeOperands) {
  const KernelSpec k = kernel_of(matmul("        t = dot(a, b)\n        o = t + 1\n"));
  ASSERT_EQ(k.reference.size(), 2u);
  EXPECT_EQ(k.reference_loc.line, 10);
  const auto &l = std::get<Let>(k.reference[1].kind);
  EXPECT_EQ(l.name, "o");
  EXPECT_EQ(print(l.value), "t + 1");
  EXPECT_EQ(k.body.size(), 2u);
}

TEST(Reference, PrintsBackToTheSameKernel) {
  const std::string text =
      matmul("        # the intent\n        o = sum(a, axis=1) + dot(a, b)  # broadcast\n");
  const KernelSpec k = kernel_of(text);
  const std::string printed = print(k);
  EXPECT_NE(
      printed.find(
          "    reference:\n        # the intent\n        o = sum(a, axis=1) + dot(a, b)  # broadcast\n"),
      std::string::npos)
      << printed;
  auto again = parse_and_validate(SourceFile::from_string("p.pk", printed));
  ASSERT_TRUE(again.file) << printed;
  EXPECT_EQ(std::get<KernelSpec>(again.file->units.at(0)), k);
  EXPECT_EQ(print(std::get<KernelSpec>(again.file->units.at(0))), printed);
}

TEST(Reference, AKernelWithoutOneComparesUnequalToOneWithIt) {
  const KernelSpec with = kernel_of(matmul("        o = dot(a, b)\n"));
  KernelSpec without = with;
  without.reference.clear();
  without.reference_loc = {};
  EXPECT_FALSE(with == without);
}

TEST(Reference, ASecondReferenceSectionIsAnError) {
  auto [line, col, msg] =
      first_error(matmul("        o = dot(a, b)\n    reference:\n        o = dot(a, b)\n"));
  EXPECT_EQ(line, 12);
  EXPECT_EQ(msg, "duplicate 'reference'");
}

TEST(Reference, ASubscriptedOperandIsAnErrorThatSaysToUseTheWholeOperand) {
  auto [line, col, msg] = first_error(matmul("        o = dot(a[...], b)\n"));
  EXPECT_EQ(line, 11);
  EXPECT_EQ(col, 17);
  EXPECT_EQ(msg, "a reference uses whole operands: write 'a', not 'a[...]'");
}

TEST(Reference, APartOfALocalOrOfAnInputIsTakenOnItsWholeArray) {
  // A crop or a shift states its intent by slicing (whole-array coordinates).
  const auto errs = errors_of(matmul("        t = dot(a, b)\n        o = t[0:256, :] + a[:, 0:256] * 0.0\n"));
  EXPECT_TRUE(errs.empty()) << errs[0].message;
  auto [line, col, msg] = first_error(matmul("        o = dot(a, b) + q[0:2]\n"));
  EXPECT_EQ(line, 11);
  EXPECT_EQ(msg, "unknown name 'q'");
}

TEST(Reference, AStoreIsAnErrorAtItsStatement) {
  auto [line, col, msg] = first_error(matmul("        o[...] = dot(a, b)\n"));
  EXPECT_EQ(line, 11);
  EXPECT_EQ(col, 9);
  EXPECT_NE(msg.find("a reference holds 'name = value' statements on whole operands"), std::string::npos)
      << msg;
}

TEST(Reference, AnOutputItDoesNotSetIsAnError) {
  auto [line, col, msg] = first_error(matmul("        t = dot(a, b)\n"));
  EXPECT_EQ(line, 10);
  EXPECT_EQ(msg, "the reference sets no value for output 'o' (add 'o = ...')");
}

TEST(Reference, ReadingAnOutputBeforeSettingItIsAnError) {
  auto [line, col, msg] = first_error(matmul("        o = o + dot(a, b)\n"));
  EXPECT_EQ(line, 11);
  EXPECT_EQ(col, 13);
  EXPECT_EQ(msg, "the reference reads output 'o' before it sets it");
}

TEST(Reference, APrefetchArrayIsNoneOfItsNames) {
  std::string text = matmul("        o = dot(a, b) * cast(ids[0], f32)\n");
  text.replace(text.find("    in  a:"), 0, "    prefetch ids: i32[2] = [0, 1]\n");
  for (const char *from : {"(i, k)", "(k, j)", "(i, j)"})
    text.replace(text.find(std::string("index=(i, j, k) -> ") + from), std::string("index=(i, j, k)").size(),
                 "index=(i, j, k, ids)");
  auto [line, col, msg] = first_error(text);
  EXPECT_EQ(line, 12);
  EXPECT_EQ(msg,
            "a reference reads no prefetch array ('ids'): it states whole arrays for any contents; state "
            "what it needs of them as params");
}

TEST(Reference, ScratchAndTheGridBelongToTheBody) {
  auto [l1, c1, m1] = first_error(matmul("        o = acc\n"));
  EXPECT_EQ(m1, "scratch 'acc' belongs to the body; a reference reads inputs and outputs");
  auto [l2, c2, m2] = first_error(matmul("        o = dot(a, b) * program_id(0)\n"));
  EXPECT_EQ(m2, "program_id belongs in the body: a reference states whole arrays, with no grid");
  auto [l3, c3, m3] = first_error(matmul("        a = dot(a, b)\n        o = a\n"));
  EXPECT_EQ(l3, 11);
  EXPECT_EQ(m3, "'a' is an input; a reference sets outputs and local names");
}

TEST(Reference, IsTypedOnWholeArrays) {
  // a and b are [256, 256] whole (their blocks are [128, 128]).
  auto [line, col, msg] = first_error(matmul("        o = dot(a, b)\n", "f32[128, 256]"));
  EXPECT_EQ(line, 11);
  EXPECT_EQ(
      msg, "cannot set output 'o' (f32[128, 256]) to a f32[256, 256] value: a value of shape [256, 256] does "
           "not fit a block of shape [128, 256]");
  auto [l2, c2, m2] = first_error(matmul("        o = dot(a, transpose(sum(b, axis=3)))\n"));
  EXPECT_EQ(l2, 11);
  EXPECT_NE(m2.find("axis 3 is out of range for shape [256, 256]"), std::string::npos) << m2;
}

TEST(Reference, AWellTypedReferenceHasNoErrors) {
  for (const char *ref : {"        o = dot(a, b)\n", "        o = a + 1\n", "        o = sum(a, axis=1)\n",
                          "        t = cast(a, bf16)\n        o = dot(t, b) * 0.5\n", "        o = 0\n"})
    EXPECT_TRUE(errors_of(matmul(ref)).empty()) << ref << errors_of(matmul(ref)).at(0).message;
}

TEST(Reference, AnUnknownWordAfterTheBodyIsStillAnError) {
  auto [line, col, msg] = first_error(matmul("        o = dot(a, b)\n    referense:\n        o = a\n"));
  EXPECT_EQ(line, 12);
  EXPECT_NE(msg.find("unknown kernel item 'referense'"), std::string::npos) << msg;
}
