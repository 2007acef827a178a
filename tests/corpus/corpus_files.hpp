#pragma once
// The corpus files and how the corpus tests read and name them.

#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pipecheck::testing_corpus {

/// Every corpus/**/*.pk, relative to the source tree, sorted.
inline std::vector<std::string> corpus_files() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  fs::path root = fs::path(PIPECHECK_SOURCE_DIR) / "corpus";
  if (fs::exists(root))
    for (const auto &e : fs::recursive_directory_iterator(root))
      if (e.path().extension() == ".pk") out.push_back(fs::relative(e.path(), PIPECHECK_SOURCE_DIR).string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Shard `shard` of `shards` of corpus_files(): every shards-th file from
/// the shard-th. A test that checks the whole corpus several ways runs as
/// shards in parallel (ctest -j), none of them a long pole at the end of a
/// CI run (minutes under ASan), each with its own share of the work.
inline std::vector<std::string> corpus_shard(int shard, int shards) {
  std::vector<std::string> out;
  const auto all = corpus_files();
  for (std::size_t i = static_cast<std::size_t>(shard); i < all.size(); i += static_cast<std::size_t>(shards))
    out.push_back(all[i]);
  return out;
}

inline std::string read(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The grid points of a corpus kernel, from its grid and its params' values
/// (also for a kernel that does not bind: a prefetch-indexed one); an extent
/// without a value counts 1.
inline std::int64_t grid_points(const spec::KernelSpec &k) {
  std::int64_t points = 1;
  for (const auto &g : k.grid ? *k.grid : std::vector<spec::Expr>{})
    if (auto n = spec::eval_int(g, spec::param_env(k.params)); n && *n > 0) points *= *n;
  return points;
}

/// A test name from a path: corpus/rules/slot-race.pk -> corpus_rules_slot_race_pk.
inline std::string test_name(const testing::TestParamInfo<std::string> &info) {
  std::string n = info.param;
  for (auto &c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

} // namespace pipecheck::testing_corpus
