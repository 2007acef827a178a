// Every corpus file checks exactly as its `# expect:` comments say (clang -verify
// style). Expectations of rules this build does not decide yet are reported as
// pending, by name — never silently skipped, never counted as passes.
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

const std::set<std::string> kProgramRules = {
    "slot-race",  "async-operand-overwritten", "wait-without-copy",  "copy-never-waited",
    "stale-read", "uninitialized-read",        "index-out-of-bounds"};

class CorpusFile : public testing::TestWithParam<std::string> {};

} // namespace

TEST_P(CorpusFile, ChecksExactlyAsItsExpectationsSay) {
  const std::string rel = GetParam();
  spec::SourceFile src = spec::SourceFile::from_string(rel, read(fs::path(PIPECHECK_SOURCE_DIR) / rel));
  auto parsed = spec::parse_and_validate(src);
  ASSERT_TRUE(parsed.file) << spec::render(src, parsed.errors.at(0));
  const spec::File &file = *parsed.file;

  auto implemented_list = verifier::implemented_rules();
  std::set<std::string> implemented(implemented_list.begin(), implemented_list.end());
  const auto &all = verifier::all_rules();
  for (const auto &e : file.expectations)
    EXPECT_TRUE(e.rule == "verified" || std::find(all.begin(), all.end(), e.rule) != all.end())
        << rel << ":" << e.line << ": unknown rule '" << e.rule << "' in an expectation";

  std::vector<std::string> pending;
  for (std::size_t u = 0; u < file.units.size(); ++u) {
    const auto &unit = file.units[u];
    bool is_pipeline = std::holds_alternative<spec::Program>(unit);
    int first = spec::unit_loc(unit).line;
    int last = u + 1 < file.units.size() ? spec::unit_loc(file.units[u + 1]).line - 1 : 1 << 30;
    // The rules that can fire on this unit, and whether this build decides all of them.
    bool complete = true;
    for (const auto &r : all)
      if ((is_pipeline ? kProgramRules.count(r) > 0 : true) && !implemented.count(r)) complete = false;

    std::set<std::pair<int, std::string>> expected;
    bool expect_verified = false;
    for (const auto &e : file.expectations) {
      if (e.line < first || e.line > last) continue;
      if (e.rule == "verified")
        expect_verified = true;
      else
        expected.insert({e.line, e.rule});
    }
    const std::string &name = spec::unit_name(unit);
    EXPECT_TRUE(expect_verified || !expected.empty())
        << rel << ":" << first << ": '" << name << "' has no expectation";

    verifier::Verdict v = verifier::check(unit, verifier::CheckOptions{});
    std::set<std::pair<int, std::string>> found;
    for (const auto &f : v.findings)
      found.insert({f.loc.line, f.rule});

    for (const auto &[line, rule] : expected) {
      if (found.count({line, rule})) continue;
      if (!implemented.count(rule)) {
        pending.push_back(rel + ":" + std::to_string(line) + ": " + rule + " (rule not implemented yet)");
        continue;
      }
      ADD_FAILURE() << rel << ":" << line << ": expected " << rule << " in '" << name << "', not reported"
                    << (v.status == verifier::Status::unknown ? " (verdict unknown: " + v.reason + ")" : "");
    }
    for (const auto &f : v.findings)
      if (!expected.count({f.loc.line, f.rule}))
        ADD_FAILURE() << rel << ":" << f.loc.line << ": unexpected " << f.rule << " in '" << name
                      << "': " << f.message;
    if (expect_verified) {
      if (v.status == verifier::Status::verified) continue;
      if (v.status == verifier::Status::unknown && !complete) {
        pending.push_back(rel + ":" + std::to_string(first) + ": verified '" + name + "' (" + v.reason + ")");
        continue;
      }
      ADD_FAILURE() << rel << ":" << first << ": expected '" << name << "' to be verified, got "
                    << verifier::to_string(v.status) << (v.reason.empty() ? "" : ": " + v.reason);
    } else if (v.status == verifier::Status::verified) {
      ADD_FAILURE() << rel << ":" << first << ": '" << name << "' was verified but expects findings";
    }
  }
  for (const auto &p : pending)
    std::cout << "pending: " << p << "\n";
  if (!pending.empty()) RecordProperty("pending", static_cast<int>(pending.size()));
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusFile, testing::ValuesIn(corpus_files()), test_name);
