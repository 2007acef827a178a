#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace pipecheck::spec;

namespace {

File parse_text(const std::string &path, const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string(path, text));
  if (!r.file) {
    ADD_FAILURE() << render(SourceFile::from_string(path, text), r.errors.at(0));
    return {};
  }
  return *r.file;
}

std::vector<std::filesystem::path> pk_files() {
  std::vector<std::filesystem::path> out;
  for (const char *dir : {"corpus"}) {
    std::filesystem::path d = std::filesystem::path(PIPECHECK_SOURCE_DIR) / dir;
    if (!std::filesystem::exists(d)) continue;
    for (const auto &e : std::filesystem::recursive_directory_iterator(d))
      if (e.path().extension() == ".pk") out.push_back(e.path());
  }
  return out;
}

std::string read(const std::filesystem::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST(Print, PutsTheFewestParenthesesThatKeepTheTree) {
  Expr a = Expr::var("a"), b = Expr::var("b"), c = Expr::var("c");
  EXPECT_EQ(print(Expr::binary(Op::Mul, Expr::binary(Op::Add, a, b), c)), "(a + b) * c");
  EXPECT_EQ(print(Expr::binary(Op::Add, a, Expr::binary(Op::Mul, b, c))), "a + b * c");
  EXPECT_EQ(print(Expr::binary(Op::Sub, a, Expr::binary(Op::Sub, b, c))), "a - (b - c)");
  EXPECT_EQ(print(Expr::binary(Op::Sub, Expr::binary(Op::Sub, a, b), c)), "a - b - c");
  EXPECT_EQ(print(Expr::binary(Op::Pow, Expr::binary(Op::Pow, a, b), c)), "(a ** b) ** c");
  EXPECT_EQ(print(Expr::binary(Op::Pow, Expr::integer(-2), a)), "(-2) ** a");
  EXPECT_EQ(print(Expr::unary(Op::Neg, Expr::binary(Op::Add, a, b))), "-(a + b)");
  EXPECT_EQ(print(Expr::binary(Op::Eq, Expr::binary(Op::Lt, a, b), c)), "(a < b) == c");
}

TEST(Print, KeepsANegationOfALiteralApartFromANegativeLiteral) {
  // Found by the parser fuzzer: `i --+ 1` and `x[...] *---+ 1` printed as `i - -1` and
  // `x[...] * --1`, which read back with a literal -1 instead of a negation of 1.
  EXPECT_EQ(print(Expr::unary(Op::Neg, Expr::integer(1))), "-(1)");
  EXPECT_EQ(print(Expr::unary(Op::Neg, Expr::floating(1.5))), "-(1.5)");
  EXPECT_EQ(print(Expr::unary(Op::Neg, Expr::integer(-1))), "--1");
  for (const char *body : {"o[...] = x[...] * (i --+ 1)", "o[...] = x[...] *---+ 1",
                           "o[...] = x[...] * - - - 2.5", "o[...] = x[...] * -(-(+1))"}) {
    std::string text = std::string("kernel k:\n    grid = (8,)\n    in x: f32[8] block=(1,) "
                                   "index=(i) -> (i)\n    out o: f32[8] block=(1,) index=(i) -> (i)\n"
                                   "    body:\n        i = program_id(0)\n        ") +
                       body + "\n";
    File f = parse_text("t.pk", text);
    std::string once = print(f);
    File g = parse_text("t.pk (formatted)", once);
    EXPECT_EQ(f, g) << body << " printed as\n" << once;
    EXPECT_EQ(print(g), once) << body;
  }
}

TEST(Print, WritesFloatsSoTheyReadBackExactly) {
  for (double v : {0.1, 1.0, 1e-7, 3.0e20, 2.5}) {
    std::string s = print(Expr::floating(v));
    EXPECT_NE(s.find_first_of(".e"), std::string::npos) << s;
    EXPECT_EQ(std::stod(s), v);
  }
  EXPECT_EQ(print(Expr::floating(-std::numeric_limits<double>::infinity())), "-inf");
  // jnp.nan (jnp.var's guard): `nan`, which parses back to a NaN.
  EXPECT_EQ(print(Expr::floating(std::numeric_limits<double>::quiet_NaN())), "nan");
  File f = parse_text("t.pk", "kernel k:\n    in x: f32[8]\n    out o: f32[8]\n    body:\n"
                              "        o[...] = where(x[...] > 0.0, x[...], nan)\n");
  const Expr &v = std::get<Assign>(std::get<KernelSpec>(f.units.at(0)).body.at(0).kind).value;
  EXPECT_TRUE(std::isnan(v.args.at(2).float_value)) << print(v);
}

TEST(Print, WritesRankOneTuplesWithATrailingComma) {
  File f = parse_text("t.pk", "kernel k:\n    grid = (8)\n    in x: f32[8] block=(1) index=(i) -> (i)\n"
                              "    out o: f32[8]\n    body:\n        o[...] = x[...]\n");
  std::string out = print(f);
  EXPECT_NE(out.find("grid = (8,)"), std::string::npos) << out;
  EXPECT_NE(out.find("block=(1,)"), std::string::npos) << out;
}

TEST(Print, WritesAnElseIfChainAsElif) {
  File f = parse_text("t.pk", "pipeline p:\n    param N >= 1\n    sram T: f32[8]\n    if N > 2:\n"
                              "        T[...] = zeros\n    elif N > 1:\n        T[...] = full(1.0)\n"
                              "    else:\n        T[...] = full(2.0)\n");
  std::string out = print(f);
  EXPECT_NE(out.find("elif N > 1:"), std::string::npos) << out;
  EXPECT_NE(out.find("else:"), std::string::npos) << out;
}

TEST(Print, EveryCorpusAndExampleFileRoundTripsThroughFmt) {
  auto files = pk_files();
  ASSERT_FALSE(files.empty());
  for (const auto &p : files) {
    SCOPED_TRACE(p.string());
    File f = parse_text(p.string(), read(p));
    std::string once = print(f);
    File g = parse_text(p.string() + " (formatted)", once);
    EXPECT_EQ(f, g) << once;
    EXPECT_EQ(print(g), once) << "fmt is not idempotent";
    EXPECT_EQ(f.expectations.size(), g.expectations.size()) << "fmt lost an expectation comment";
  }
}

TEST(Print, WritesAnAccScratchBackAsMemorySpaceAcc) {
  const std::string text = "kernel k:\n    target = h100\n    out o: f32[64, 64]\n"
                           "    scratch acc: f32[64, 64]  memory_space=acc\n    body:\n"
                           "        o[...] = acc[...]\n";
  File f = parse_text("acc.pk", text);
  const auto &k = std::get<KernelSpec>(f.units.at(0));
  EXPECT_EQ(k.operands.at(1).memory_space, MemorySpace::acc);
  const std::string out = print(f);
  EXPECT_NE(out.find("scratch acc: f32[64, 64] memory_space=acc"), std::string::npos) << out;
  EXPECT_EQ(print(parse_text("acc2.pk", out)), out);
}
