#pragma once
// The corpus as the CUDA tests see it: every kernel and pipeline with the
// kernel the generator makes of it, for the emulated and GPU corpus tests.

#include "executor/cuda/codegen.hpp"
#include "spec/eval.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::executor::cuda::testing {

struct CorpusCase {
  std::string name;      ///< file::unit
  bool verified = false; ///< its `# expect: verified`: proven race-free for every schedule
  spec::Program program; ///< the lowered program (kernels) or the pipeline
  spec::Env env;         ///< a pipeline's params: symbolic ones at their lower bound, at least 3
  CudaKernel kernel;
};

/// Every `.pk` file under corpus/ that parses (the others are the parser's
/// tests), by its path relative to the source tree, sorted.
inline std::vector<std::pair<std::string, spec::File>> parsed_corpus() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto &e : fs::recursive_directory_iterator(fs::path(PIPECHECK_SOURCE_DIR) / "corpus"))
    if (e.path().extension() == ".pk") files.push_back(fs::relative(e.path(), PIPECHECK_SOURCE_DIR).string());
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, spec::File>> out;
  for (const auto &path : files)
    try {
      out.emplace_back(path, load_corpus(path));
    } catch (const std::exception &) {
    }
  return out;
}

/// A pipeline's params bound: symbolic ones at their lower bound, at least
/// 3 (a full turn of a double-buffered ring).
inline spec::Env pipeline_env(const spec::Program &p) {
  spec::Env env = spec::param_env(p.params);
  for (const auto &q : p.params)
    if (q.is_symbolic()) {
      const auto lo = q.lo ? spec::eval_int(*q.lo, env) : std::nullopt;
      env[q.name] = std::max<std::int64_t>(lo.value_or(1), 3);
    }
  return env;
}

/// The corpus units the generator makes a kernel of with `o`, each distinct
/// source once, whose hbm arrays take at most `max_hbm_bytes`, in file order.
inline std::vector<CorpusCase> generated_corpus(const CodegenOptions &o, std::int64_t max_hbm_bytes) {
  std::vector<CorpusCase> out;
  std::set<std::string> sources;
  for (const auto &[path, f] : parsed_corpus()) {
    for (const auto &u : f.units) {
      CorpusCase c;
      c.name = path + "::" + spec::unit_name(u);
      const int line = std::visit([](const auto &x) { return x.loc.line; }, u);
      for (const auto &e : f.expectations)
        c.verified = c.verified || (e.line == line && e.rule == "verified");
      CodegenResult r;
      if (const auto *k = std::get_if<spec::KernelSpec>(&u)) {
        std::vector<spec::Diagnostic> errors;
        auto l = spec::lower(*k, spec::LowerOptions{}, errors);
        if (!l) continue;
        r = generate_cuda(*l, {}, o);
        c.program = l->program;
      } else {
        c.program = std::get<spec::Program>(u);
        c.env = pipeline_env(c.program);
        r = generate_cuda(c.program, c.env, o);
      }
      if (!r || !sources.insert(r.kernel->source).second) continue;
      std::int64_t bytes = 0;
      for (const auto &a : r.kernel->arrays)
        bytes += a.elements * element_bytes(a.dtype);
      if (bytes > max_hbm_bytes) continue;
      c.kernel = *r.kernel;
      out.push_back(std::move(c));
    }
  }
  return out;
}

} // namespace pipecheck::executor::cuda::testing
