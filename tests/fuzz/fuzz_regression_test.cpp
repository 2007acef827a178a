// Every input the parser fuzzer ever failed on (tests/fuzz/crashes/) and every corpus file
// hold the fuzzer's round-trip property, in every build, with no fuzzer needed.
#include "roundtrip.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_under(const fs::path &dir) {
  std::vector<fs::path> out;
  for (const auto &e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST(FuzzRegression, EveryInputThatEverFailedTheFuzzerNowHoldsItsProperty) {
  auto files = files_under(fs::path(PIPECHECK_SOURCE_DIR) / "tests" / "fuzz" / "crashes");
  ASSERT_FALSE(files.empty());
  for (const auto &p : files)
    EXPECT_EQ(pipecheck::fuzz::parse_print_roundtrip_failure(read(p)), "") << p;
}

TEST(FuzzRegression, EveryCorpusFileHoldsTheFuzzersProperty) {
  auto files = files_under(fs::path(PIPECHECK_SOURCE_DIR) / "corpus");
  ASSERT_FALSE(files.empty());
  for (const auto &p : files)
    EXPECT_EQ(pipecheck::fuzz::parse_print_roundtrip_failure(read(p)), "") << p;
}
