// opaque(args..., op=NAME, shape=(...), dtype=T): an operation with no `.pk`
// form, kept with its reads (the JAX bridge writes one per such primitive).
#include "spec/opaque.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

const char *kKernel = "kernel k:\n"
                      "    in x: f32[8, 128]\n"
                      "    out o: bf16[8, 128]\n"
                      "    body:\n"
                      "        v = opaque(x[...], 2, op=sinh, shape=(8, 128), dtype=f32)\n"
                      "        o[...] = sin(v) + opaque(op=rng, shape=(128,), dtype=bf16)\n";

ParseResult parse_text(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("t.pk", text));
}

std::string first_error(const std::string &body) {
  auto r = parse_text("kernel k:\n    in x: f32[8, 128]\n    out o: f32[8, 128]\n    body:\n        " + body +
                      "\n");
  return r.errors.empty() ? std::string("(no error)") : r.errors.front().message;
}

} // namespace

TEST(Opaque, ParsesValidatesAndPrintsBackToTheSameKernel) {
  auto r = parse_text(kKernel);
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  const std::string printed = print(*r.file);
  EXPECT_NE(printed.find("opaque(x[...], 2, op=sinh, shape=(8, 128), dtype=f32)"), std::string::npos)
      << printed;
  auto again = parse_text(printed);
  ASSERT_TRUE(again.file) << again.errors.at(0).message;
  EXPECT_EQ(*again.file, *r.file);
  EXPECT_EQ(print(*again.file), printed);
}

TEST(Opaque, HasTheStatedShapeAndDtype) {
  auto r = parse_text(kKernel);
  ASSERT_TRUE(r.file);
  const auto &k = std::get<KernelSpec>(r.file->units.at(0));
  ExprTypes types;
  ASSERT_TRUE(typecheck(k, {}, &types).empty());
  const auto &let = std::get<Let>(k.body.at(0).kind);
  ASSERT_TRUE(types.count(&let.value));
  EXPECT_EQ(types.at(&let.value).dtype, DType::f32);
  EXPECT_FALSE(types.at(&let.value).weak);
  EXPECT_EQ(types.at(&let.value).shape, (Dims{8, 128}));
}

TEST(Opaque, ListsEveryOpaqueOpWithItsLine) {
  auto r = parse_text(kKernel);
  ASSERT_TRUE(r.file);
  const auto ops = opaque_ops(std::get<KernelSpec>(r.file->units.at(0)));
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op, "sinh");
  EXPECT_EQ(ops[0].loc.line, 5);
  EXPECT_EQ(ops[1].op, "rng");
  EXPECT_EQ(ops[1].loc.line, 6);
  EXPECT_EQ(describe(ops), "sinh at line 5, rng at line 6");
}

TEST(Opaque, NeedsItsOpShapeAndDtypeAndTypesItsArguments) {
  EXPECT_EQ(first_error("o[...] = opaque(x[...], shape=(8, 128), dtype=f32)"),
            "opaque needs op=NAME, the name of the operation it stands for");
  EXPECT_EQ(first_error("o[...] = opaque(x[...], op=sinh, dtype=f32)"),
            "opaque needs shape=(...), the shape of its result");
  EXPECT_EQ(first_error("o[...] = opaque(x[...], op=sinh, shape=(8, 128))"),
            "opaque needs dtype=T, the dtype of its result");
  EXPECT_NE(first_error("o[...] = opaque(x[...], op=sinh, shape=(8, 128), dtype=f33)").find("opaque's dtype"),
            std::string::npos);
  EXPECT_NE(first_error("o[...] = opaque(y[...], op=sinh, shape=(8, 128), dtype=f32)"), "(no error)");
  EXPECT_NE(first_error("o[...] = opaque(x[...], op=sinh, shape=(8, 64), dtype=f32)"), "(no error)");
  EXPECT_EQ(first_error("o[...] = opaque(x[...], op=sinh, shape=(8, 128), dtype=f32)"), "(no error)");
}

TEST(Opaque, TheNewMathFunctionsTypeAsJnp) {
  auto type_of_v = [](const std::string &expr) {
    auto r = parse_text("kernel k:\n    in x: i8[8]\n    out o: f32[8]\n    body:\n        v = " + expr +
                        "\n        o[...] = v\n");
    EXPECT_TRUE(r.file) << expr;
    ExprTypes types;
    const auto &k = std::get<KernelSpec>(r.file->units.at(0));
    typecheck(k, {}, &types);
    return types.at(&std::get<Let>(k.body.at(0).kind).value).dtype;
  };
  for (const char *f : {"floor", "ceil", "round", "sign"})
    EXPECT_EQ(type_of_v(std::string(f) + "(x[...])"), DType::i8) << f;
  for (const char *f : {"sin", "cos", "erf", "erfc", "sigmoid", "expm1", "log1p"})
    EXPECT_EQ(type_of_v(std::string(f) + "(x[...])"), DType::f32) << f;
}
