// `S[...] = undefined`: a store of no value that leaves a scratch (or a
// pipeline's on-chip buffer) undefined, as a pl.run_scoped allocation is at
// each entry of its scope. What it parses to, how it prints, and where it is
// refused with a located error.
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "tests/spec/testing.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace pipecheck::spec;
using pipecheck::spec::testing::first_error;
using pipecheck::spec::testing::kernel_ok;

namespace {

std::string kernel(const std::string &body, const std::string &decls = "") {
  return "kernel k:\n"
         "    grid = (4,)\n"
         "    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
         "    scratch tmp: f32[8, 128]\n"
         "    scratch sem: dma_sem\n" +
         decls + "    body:\n" + body;
}

} // namespace

TEST(Undefined, IsAStoreOfNoValueIntoItsTarget) {
  const KernelSpec k = kernel_ok(kernel("        tmp[0:4, :] = undefined\n        o[...] = x[...]\n"));
  const auto *a = std::get_if<Assign>(&k.body.at(0).kind);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->discards());
  EXPECT_FALSE(a->accumulate);
  EXPECT_EQ(a->target.name, "tmp");
  EXPECT_EQ(a->value.op, Op::Undefined);
  EXPECT_EQ(k.body.at(0).loc.line, 8);
  EXPECT_FALSE(std::get<Assign>(k.body.at(1).kind).discards());
}

TEST(Undefined, PrintsBackAsWrittenAndReparsesEqual) {
  const std::string text = kernel("        tmp[...] = undefined\n        o[...] = x[...]\n");
  const KernelSpec k = kernel_ok(text);
  const std::string printed = print(k);
  EXPECT_NE(printed.find("tmp[...] = undefined"), std::string::npos) << printed;
  EXPECT_EQ(print(kernel_ok(printed)), printed);
}

TEST(Undefined, OfAnInputOrAnOutputIsRefusedAtTheTarget) {
  EXPECT_EQ(first_error(kernel("        o[...] = undefined\n")),
            "8:9: only a scratch buffer can be made undefined; 'o' is an output");
  EXPECT_EQ(first_error(kernel("        x[...] = undefined\n        o[...] = x[...]\n")).substr(0, 4),
            "8:9:");
}

TEST(Undefined, OfASemaphoreIsRefused) {
  EXPECT_NE(first_error(kernel("        sem[...] = undefined\n        o[...] = x[...]\n"))
                .find("'sem' is a semaphore"),
            std::string::npos);
}

TEST(Undefined, InsideAnExpressionIsRefusedWhereItIsWritten) {
  EXPECT_EQ(first_error(kernel("        o[...] = x[...] + undefined\n")),
            "8:27: 'undefined' is only a whole store value: 'X[...] = undefined' makes what X[...] holds "
            "unspecified");
  EXPECT_EQ(first_error(kernel("        v = undefined\n        o[...] = x[...]\n")).substr(0, 5), "8:13:");
}

TEST(Undefined, AddedToATargetHasNoMeaning) {
  EXPECT_EQ(first_error(kernel("        tmp[...] += undefined\n        o[...] = x[...]\n")),
            "8:9: '+= undefined' has no meaning; write 'X[...] = undefined'");
}

TEST(Undefined, InAnIntegerPlaceIsRefused) {
  EXPECT_EQ(
      first_error(kernel("        for t in range(undefined):\n            o[...] = x[...]\n")).substr(0, 5),
      "8:24:");
}

TEST(Undefined, InAPipelineIsAllowedOnSramAndHbmWhereAStoreIsNot) {
  // (On hbm it is no store: the array holds nothing from there on, as a
  // kernel's output that no input aliases starts.)
  const std::string head = "pipeline p:\n"
                           "    hbm A: f32[8]\n"
                           "    sram X[2]: f32[8]\n";
  EXPECT_EQ(first_error(head + "    X[1] = undefined\n"), "no error");
  EXPECT_EQ(first_error(head + "    A[...] = undefined\n"), "no error");
  EXPECT_NE(first_error(head + "    A[...] = X[0]\n").find("cannot store into HBM array 'A'"),
            std::string::npos);
  EXPECT_EQ(first_error(head + "    X[0] += undefined\n"),
            "4:5: '+= undefined' has no meaning; write 'X[...] = undefined'");
}

TEST(Undefined, InAReferenceIsRefusedAtParseTime) {
  EXPECT_EQ(first_error(kernel("        o[...] = x[...]\n") + "    reference:\n        o = undefined\n"),
            "10:13: a reference states the values an output must hold; 'undefined' is none");
}
