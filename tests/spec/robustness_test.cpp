// Bad input never crashes or hangs: a located diagnostic or a clean parse.
#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

using namespace pipecheck::spec;

namespace {

const char *kGood = R"(kernel matmul:
    param m = 1024
    param bm = 128 in {64, 128, 256}
    grid = (m // bm, m // bm, m // bm)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  a: f32[m, m]  block=(bm, bm)  index=(i, j, kk) -> (i, kk)
    in  b: f32[m, m]  block=(bm, bm)  index=(i, j, kk) -> (kk, j)
    out o: f32[m, m]  block=(bm, bm)  index=(i, j, kk) -> (i, j)
    scratch acc: f32[bm, bm]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(2) == num_programs(2) - 1:
            o[...] = acc[...]

pipeline p:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    copy_in_start(A[0], X[0])
    for i in range(N):
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        copy_in_wait(X[i % 2])
        X[i % 2] = X[i % 2] + 1
        copy_out_start(X[i % 2], A[i])
        copy_out_wait(X[i % 2])
)";

// Either a file, or at least one error with a line inside the text.
void expect_clean_outcome(const std::string &text) {
  SourceFile src = SourceFile::from_string("x.pk", text);
  ParseResult r = parse_and_validate(src);
  if (r.file) return;
  ASSERT_FALSE(r.errors.empty());
  const Diagnostic &d = r.errors.front();
  EXPECT_FALSE(d.message.empty());
  std::string shown = render(src, d);
  EXPECT_NE(shown.find("x.pk:"), std::string::npos);
  EXPECT_NE(shown.find("error:"), std::string::npos);
}

} // namespace

TEST(Robustness, TheReferenceTextParses) {
  auto r = parse_and_validate(SourceFile::from_string("x.pk", kGood));
  ASSERT_TRUE(r.file) << render(SourceFile::from_string("x.pk", kGood), r.errors.at(0));
}

TEST(Robustness, EveryTruncationGivesAFileOrALocatedError) {
  std::string good = kGood;
  for (std::size_t n = 0; n <= good.size(); ++n)
    expect_clean_outcome(good.substr(0, n));
}

TEST(Robustness, RandomBytesGiveALocatedError) {
  std::mt19937 rng(12345);
  for (int t = 0; t < 500; ++t) {
    std::string s(rng() % 300, '\0');
    for (auto &c : s)
      c = static_cast<char>(rng() % 256);
    expect_clean_outcome(s);
  }
}

TEST(Robustness, RandomByteMutationsOfAGoodFileGiveAFileOrALocatedError) {
  std::mt19937 rng(777);
  std::string good = kGood;
  const char alphabet[] = " \t\n()[]{}:,=+-*/%<>#.0123456789abcxyzN_";
  for (int t = 0; t < 2000; ++t) {
    std::string s = good;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      std::size_t pos = rng() % s.size();
      switch (rng() % 3) {
      case 0: s[pos] = alphabet[rng() % (sizeof alphabet - 1)]; break;
      case 1: s.erase(pos, 1 + rng() % 5); break;
      default: s.insert(pos, 1, alphabet[rng() % (sizeof alphabet - 1)]);
      }
      if (s.empty()) s = " ";
    }
    expect_clean_outcome(s);
  }
}

TEST(Robustness, DeepBracketNestingIsAnErrorNotAStackOverflow) {
  std::string s = "pipeline p:\n    x = " + std::string(100000, '(') + "\n";
  expect_clean_outcome(s);
  std::string t = "pipeline p:\n    x = " + std::string(100000, '-') + "1\n";
  expect_clean_outcome(t);
  std::string u = "pipeline p:\n    x = " + std::string(50000, 'n') + "\n";
  expect_clean_outcome(u);
  std::string v = "pipeline p:\n    x = 1";
  for (int i = 0; i < 20000; ++i)
    v += " + 1";
  expect_clean_outcome(v + "\n");
}

TEST(Robustness, DeepBlockNestingIsAnError) {
  std::string s = "pipeline p:\n";
  for (int d = 1; d < 5000; ++d)
    s += std::string(d, ' ') + "for i in range(2):\n";
  expect_clean_outcome(s);
}

TEST(Robustness, TabsMixedWithSpacesAreALocatedError) {
  SourceFile src = SourceFile::from_string("x.pk", "kernel k:\n    out o: f32[8]\n \tbody:\n");
  auto r = parse(src);
  ASSERT_FALSE(r.file);
  EXPECT_EQ(r.errors[0].loc.line, 3);
}

TEST(Robustness, ATenThousandLineFileParsesQuickly) {
  std::string s = "pipeline big:\n    param N >= 1\n    hbm A: f32[N, 8]\n    sram X[2]: f32[8]\n";
  for (int i = 0; i < 10000; ++i)
    s += "    copy_in_start(A[0], X[" + std::to_string(i % 2) + "])\n";
  auto t0 = std::chrono::steady_clock::now();
  auto r = parse_and_validate(SourceFile::from_string("big.pk", s));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.file);
  EXPECT_EQ(std::get<Program>(r.file->units[0]).body.size(), 10000u);
  // A generous bound: this guards against quadratic behaviour, not speed.
  EXPECT_LT(secs, 20.0);
}

TEST(Robustness, CrlfLineEndingsParse) {
  std::string s = kGood;
  std::string crlf;
  for (char c : s) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  auto r = parse_and_validate(SourceFile::from_string("x.pk", crlf));
  EXPECT_TRUE(r.file);
}

TEST(Robustness, TheCaretSitsUnderItsCharacterAfterMultiByteCharactersAndTabs) {
  // `$` is byte 16 of the line, after a tab and 12 characters (two of them a 2-byte é).
  SourceFile src = SourceFile::from_string("u.pk", "kernel k:\n\t\"\xc3\xa9\xc3\xa9\" in [0] $\n");
  ParseResult r = parse_and_validate(src);
  ASSERT_FALSE(r.file);
  const std::string shown = render(src, r.errors.at(0));
  EXPECT_NE(shown.find("u.pk:2:16: error:"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\n\t" + std::string(12, ' ') + "^\n"), std::string::npos) << shown;
  EXPECT_EQ(caret_pad("a\xc3\xa9"
                      "b",
                      5),
            "   ");
}
