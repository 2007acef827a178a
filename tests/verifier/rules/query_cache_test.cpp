// The spec rules' query cache answers only what solving would: every corpus
// kernel checked with a cache, cold and then warm, finds exactly what it
// finds without one.
#include "testing.hpp"
#include "verifier/rules/symbolic.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace pipecheck {
namespace {

// The outcome as comparable text: rule, line, message and witness items of
// each finding, and the undecided queries.
std::string outcome_text(const verifier::rules::RuleOutcome &r) {
  std::string out;
  for (const auto &f : r.findings) {
    out += std::string(verifier::id(f.rule)) + " @" + std::to_string(f.loc.line) + ": " + f.message + " {";
    for (const auto &it : f.witness.items) {
      out += " " + it.key + "=";
      if (const auto *v = std::get_if<std::int64_t>(&it.value)) out += std::to_string(*v);
      if (const auto *v = std::get_if<std::vector<std::int64_t>>(&it.value))
        for (auto x : *v)
          out += std::to_string(x) + ",";
      if (const auto *v = std::get_if<std::string>(&it.value)) out += *v;
    }
    out += " }\n";
  }
  for (const auto &u : r.unknown)
    out += "unknown: " + u + "\n";
  for (const auto &e : r.errors)
    out += "error: " + e.message + "\n";
  return out;
}

// In shards of the corpus' rules and examples, run in parallel (a minute and
// a half under ASan in one), each with its own cache.
class QueryCacheShard : public ::testing::TestWithParam<int> {};
constexpr int kShards = 3;

TEST_P(QueryCacheShard, GivesEveryCorpusKernelTheSameFindingsColdAndWarmAsSolvingDoes) {
  auto cache = std::make_shared<verifier::rules::QueryCache>();
  std::vector<std::filesystem::path> files;
  for (const char *dir : {"corpus/rules", "corpus/examples"})
    for (const auto &entry :
         std::filesystem::directory_iterator(std::filesystem::path(PIPECHECK_SOURCE_DIR) / dir))
      if (entry.path().extension() == ".pk") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  int kernels = 0, with_findings = 0;
  for (std::size_t i = static_cast<std::size_t>(GetParam()); i < files.size(); i += kShards) {
    spec::File f = testing::parse_text(testing::read_file(files[i].string()), files[i].string());
    for (const auto &u : f.units) {
      const auto *k = std::get_if<spec::KernelSpec>(&u);
      if (!k) continue;
      auto m = verifier::rules::build_model(*k, {}, std::nullopt);
      if (!m.model) continue;
      const std::string plain = outcome_text(verifier::rules::check_symbolic(*m.model, 10000));
      const std::string cold = outcome_text(verifier::rules::check_symbolic(*m.model, 10000, cache.get()));
      const std::size_t stored = cache->size();
      const std::string warm = outcome_text(verifier::rules::check_symbolic(*m.model, 10000, cache.get()));
      EXPECT_EQ(cold, plain) << files[i] << " " << k->name;
      EXPECT_EQ(warm, plain) << files[i] << " " << k->name;
      EXPECT_EQ(cache->size(), stored) << "a warm check asks only cached queries: " << k->name;
      ++kernels;
      with_findings += plain.find(" @") != std::string::npos;
    }
  }
  // (Over 20 kernels, 10 with findings and 100 cached queries in all.)
  EXPECT_GT(kernels, 20 / kShards);
  EXPECT_GT(with_findings, 10 / kShards);
  EXPECT_GT(cache->size(), 100u / kShards);
}

INSTANTIATE_TEST_SUITE_P(Corpus, QueryCacheShard, ::testing::Range(0, kShards));

} // namespace
} // namespace pipecheck
