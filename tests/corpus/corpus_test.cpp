// Every corpus file checks exactly as its `# expect:` comments say (clang -verify
// style). An expectation naming a rule the rule table does not know is an error.
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace pipecheck;
namespace fs = std::filesystem;
using testing_corpus::corpus_files;
using testing_corpus::read;
using testing_corpus::test_name;

namespace {

class CorpusFile : public testing::TestWithParam<std::string> {};

} // namespace

TEST_P(CorpusFile, ChecksExactlyAsItsExpectationsSay) {
  const std::string rel = GetParam();
  spec::SourceFile src = spec::SourceFile::from_string(rel, read(fs::path(PIPECHECK_SOURCE_DIR) / rel));
  auto parsed = spec::parse_and_validate(src);
  ASSERT_TRUE(parsed.file) << spec::render(src, parsed.errors.at(0));
  const spec::File &file = *parsed.file;

  for (const auto &e : file.expectations)
    EXPECT_TRUE(e.rule == "verified" || verifier::find_rule(e.rule))
        << rel << ":" << e.line << ": unknown rule '" << e.rule << "' in an expectation";

  for (std::size_t u = 0; u < file.units.size(); ++u) {
    const auto &unit = file.units[u];
    int first = spec::unit_loc(unit).line;
    int last = u + 1 < file.units.size() ? spec::unit_loc(file.units[u + 1]).line - 1 : 1 << 30;

    std::set<std::pair<int, verifier::Rule>> expected;
    bool expect_verified = false;
    for (const auto &e : file.expectations) {
      if (e.line < first || e.line > last) continue;
      if (e.rule == "verified") {
        expect_verified = true;
        continue;
      }
      auto rule = verifier::find_rule(e.rule);
      if (!rule) continue; // reported above
      expected.insert({e.line, *rule});
    }
    const std::string &name = spec::unit_name(unit);
    EXPECT_TRUE(expect_verified || !expected.empty())
        << rel << ":" << first << ": '" << name << "' has no expectation";

    verifier::Verdict v = verifier::check(unit, verifier::CheckOptions{});
    std::set<std::pair<int, verifier::Rule>> found;
    for (const auto &f : v.findings)
      found.insert({f.loc.line, f.rule});

    for (const auto &[line, rule] : expected) {
      if (found.count({line, rule})) continue;
      ADD_FAILURE() << rel << ":" << line << ": expected " << rule << " in '" << name << "', not reported"
                    << (v.status == verifier::Status::unknown ? " (verdict unknown: " + v.reason + ")" : "");
    }
    for (const auto &f : v.findings)
      if (!expected.count({f.loc.line, f.rule}))
        ADD_FAILURE() << rel << ":" << f.loc.line << ": unexpected " << f.rule << " in '" << name
                      << "': " << f.message;
    if (expect_verified) {
      if (v.status == verifier::Status::verified) continue;
      ADD_FAILURE() << rel << ":" << first << ": expected '" << name << "' to be verified, got "
                    << verifier::to_string(v.status) << (v.reason.empty() ? "" : ": " + v.reason);
    } else if (v.status == verifier::Status::verified) {
      ADD_FAILURE() << rel << ":" << first << ": '" << name << "' was verified but expects findings";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusFile, testing::ValuesIn(corpus_files()), test_name);
