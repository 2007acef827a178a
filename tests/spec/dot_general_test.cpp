// dot_general(a, b, contract=((..), (..)), batch=((..), (..))): lax.dot_general
// in kernel bodies. It parses, prints back to itself, and has the type
// lax.dot_general gives (batch dims, a's free dims, b's free dims) or a
// located error.
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

// q: f32[2, 8, 16], k: bf16[2, 4, 16], m: f32[16, 8]; the body line is line 7.
std::string kernel(const std::string &o, const std::string &line) {
  return "kernel k:\n    in  q: f32[2, 8, 16]\n    in  kk: bf16[2, 4, 16]\n    in  m: f32[16, 8]\n"
         "    out o: " +
         o + "\n    body:\n        " + line + "\n";
}

std::vector<Diagnostic> errors_of(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("t.pk", text)).errors;
}

TensorType stored_type(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("t.pk", text));
  EXPECT_TRUE(r.file.has_value()) << (r.errors.empty() ? "" : r.errors[0].message);
  if (!r.file) return {};
  const auto &k = std::get<KernelSpec>(r.file->units.at(0));
  ExprTypes types;
  EXPECT_TRUE(typecheck(k, {}, &types).empty());
  const auto &a = std::get<Assign>(k.body.back().kind);
  auto it = types.find(&a.value);
  EXPECT_NE(it, types.end());
  return it == types.end() ? TensorType{} : it->second;
}

Diagnostic first_error(const std::string &text) {
  auto errs = errors_of(text);
  if (errs.empty()) {
    ADD_FAILURE() << "expected an error for:\n" << text;
    return {};
  }
  return errs.front();
}

} // namespace

TEST(DotGeneral, PrintsBackToWhatWasParsed) {
  const std::string text = kernel(
      "f32[2, 8, 4]", "o[...] = dot_general(q[...], kk[...], contract=((2,), (2,)), batch=((0,), (0,)), "
                      "preferred_element_type=f32)");
  auto r = parse(SourceFile::from_string("t.pk", text));
  ASSERT_TRUE(r.file.has_value());
  const std::string printed = print(*r.file);
  auto again = parse(SourceFile::from_string("t.pk", printed));
  ASSERT_TRUE(again.file.has_value()) << printed;
  EXPECT_EQ(print(*again.file), printed);
  EXPECT_NE(printed.find("contract=((2,), (2,)), batch=((0,), (0,))"), std::string::npos) << printed;
}

TEST(DotGeneral, ABatchedContractionGivesBatchThenLhsFreeThenRhsFree) {
  TensorType t = stored_type(kernel(
      "f32[2, 8, 4]", "o[...] = dot_general(q[...], kk[...], contract=((2,), (2,)), batch=((0,), (0,)))"));
  EXPECT_EQ(t.shape, (Dims{2, 8, 4}));
  EXPECT_EQ(t.dtype, DType::f32);
}

TEST(DotGeneral, ContractingTheFirstDimsIsATransposedProduct) {
  // m^T m: contract dim 0 of both, no batch: [8, 8].
  TensorType t =
      stored_type(kernel("f32[8, 8]", "o[...] = dot_general(m[...], m[...], contract=((0,), (0,)))"));
  EXPECT_EQ(t.shape, (Dims{8, 8}));
}

TEST(DotGeneral, PreferredElementTypeSetsTheResultDtype) {
  TensorType t = stored_type(
      kernel("bf16[16, 16]",
             "o[...] = dot_general(m[...], m[...], contract=((1,), (1,)), preferred_element_type=bf16)"));
  EXPECT_EQ(t.shape, (Dims{16, 16}));
  EXPECT_EQ(t.dtype, DType::bf16);
}

TEST(DotGeneral, ContractedExtentsThatDifferAreALocatedError) {
  Diagnostic d = first_error(kernel(
      "f32[2, 8, 4]", "o[...] = dot_general(q[...], kk[...], contract=((1,), (2,)), batch=((0,), (0,)))"));
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_NE(d.message.find("contracted dims 1 and 2 differ (8 vs 16)"), std::string::npos) << d.message;
}

TEST(DotGeneral, ADimOutOfRangeIsAnError) {
  Diagnostic d =
      first_error(kernel("f32[8, 8]", "o[...] = dot_general(m[...], m[...], contract=((2,), (0,)))"));
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_NE(d.message.find("dim 2 of a is out of range"), std::string::npos) << d.message;
}

TEST(DotGeneral, ADimNamedTwiceIsAnError) {
  Diagnostic d = first_error(kernel(
      "f32[2, 8]", "o[...] = dot_general(q[...], kk[...], contract=((0, 2), (0, 2)), batch=((0,), (0,)))"));
  EXPECT_NE(d.message.find("dim 0 of a is named twice"), std::string::npos) << d.message;
}

TEST(DotGeneral, AMissingContractOrAMalformedPairIsAnError) {
  Diagnostic d = first_error(kernel("f32[8, 8]", "o[...] = dot_general(m[...], m[...])"));
  EXPECT_NE(d.message.find("needs contract="), std::string::npos) << d.message;
  d = first_error(kernel("f32[8, 8]", "o[...] = dot_general(m[...], m[...], contract=(1, 0))"));
  EXPECT_NE(d.message.find("pair of dim tuples"), std::string::npos) << d.message;
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_EQ(d.loc.col, 55); // the tuple after contract=
  d = first_error(kernel("f32[8, 8]", "o[...] = dot_general(m[...], m[...], contract=((1,), (0, 1)))"));
  EXPECT_NE(d.message.find("as many dims"), std::string::npos) << d.message;
}

TEST(DotGeneral, DotsDimensionNumbersMatchItsTypes) {
  // dot is dot_general with a's last dim against b's first (flipped by the
  // transposes): both rules give the same type.
  const TensorType a{DType::f32, false, {8, 16}}, b{DType::f32, false, {16, 4}}, v{DType::f32, false, {16}};
  EXPECT_EQ(dot_general_type(a, b, dot_dims(2, 2)).value.shape, dot_type(a, b).value.shape);
  EXPECT_EQ(dot_general_type(v, b, dot_dims(1, 2)).value.shape, dot_type(v, b).value.shape);
  EXPECT_EQ(dot_general_type(v, v, dot_dims(1, 1)).value.shape, dot_type(v, v).value.shape);
  DotOptions o;
  o.trans_a = o.trans_b = true;
  const TensorType at{DType::f32, false, {16, 8}}, bt{DType::f32, false, {4, 16}};
  EXPECT_EQ(dot_general_type(at, bt, dot_dims(2, 2, true, true)).value.shape,
            dot_type(at, bt, o).value.shape);
}
