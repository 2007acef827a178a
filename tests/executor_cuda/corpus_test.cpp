// Every corpus kernel and pipeline through the CUDA code generator: each one
// either becomes a source that NVRTC compiles to PTX with its asynchronous
// ring (cp.async, or bulk copies on mbarriers),
// or is refused with its reason; nothing else, and never a crash.
#include "executor/cuda/codegen.hpp"
#include "executor/cuda/nvrtc.hpp"
#include "spec/eval.hpp"
#include "tests/executor_cuda/corpus_cases.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

bool refused_with_reason(const std::string &error) {
  return error.rfind("not supported by the CUDA backend: ", 0) == 0 ||
         error.rfind("does not fit shared memory: ", 0) == 0;
}

bool has_copy_in(const spec::Block &b) {
  for (const auto &s : b) {
    if (auto *c = std::get_if<spec::Copy>(&s.kind); c && c->kind == spec::CopyKind::in_start) return true;
    if (auto *i = std::get_if<spec::If>(&s.kind);
        i && (has_copy_in(i->then_body) || has_copy_in(i->else_body)))
      return true;
    if (auto *f = std::get_if<spec::For>(&s.kind); f && has_copy_in(f->body)) return true;
  }
  return false;
}

// In shards of the corpus, run in parallel (NVRTC takes two minutes over all of it).
class CudaCorpus : public ::testing::TestWithParam<int> {};
constexpr int kShards = 4;

TEST_P(CudaCorpus, EveryCorpusUnitIsGeneratedAndCompiledOrRefusedWithItsReason) {
  int generated = 0, refused = 0, not_lowered = 0;
  // Mutants often lower to the same program: compile each distinct source once.
  std::set<std::string> compiled;
  const auto &corpus = parsed_corpus();
  for (std::size_t i = static_cast<std::size_t>(GetParam()); i < corpus.size(); i += kShards) {
    const auto &[path, f] = corpus[i];
    for (const auto &u : f.units) {
      std::optional<CodegenResult> r;
      const spec::Program *program = nullptr;
      if (const auto *k = std::get_if<spec::KernelSpec>(&u)) {
        spec::LowerOptions o;
        std::vector<spec::Diagnostic> errors;
        auto l = spec::lower(*k, o, errors);
        if (!l) {
          ++not_lowered;
          continue;
        }
        r = generate_cuda(*l, {});
        if (*r && compiled.insert(r->kernel->source).second) {
          const PtxResult p = compile_to_ptx(r->kernel->source, r->kernel->entry + ".cu");
          ASSERT_TRUE(p.ok) << path << "::" << k->name << ": " << p.error;
          if (has_copy_in(l->program.body)) {
            const bool cp_async = p.ptx.find("cp.async.commit_group") != std::string::npos &&
                                  p.ptx.find("cp.async.wait_group") != std::string::npos;
            const bool bulk = p.ptx.find("cp.async.bulk.shared::cluster.global") != std::string::npos &&
                              p.ptx.find("mbarrier.try_wait.parity") != std::string::npos;
            EXPECT_TRUE(cp_async || bulk) << path << "::" << k->name;
          }
        }
      } else {
        program = &std::get<spec::Program>(u);
        r = generate_cuda(*program, pipeline_env(*program));
        if (*r && compiled.insert(r->kernel->source).second) {
          const PtxResult p = compile_to_ptx(r->kernel->source, r->kernel->entry + ".cu");
          ASSERT_TRUE(p.ok) << path << "::" << program->name << ": " << p.error;
        }
      }
      if (*r) {
        ++generated;
        if (std::getenv("PIPECHECK_CUDA_REASONS"))
          std::cout << "generated: " << path << "::" << spec::unit_name(u) << "\n";
      } else {
        ++refused;
        if (std::getenv("PIPECHECK_CUDA_REASONS"))
          std::cout << "refused: " << path << "::" << spec::unit_name(u) << ": " << r->error << "\n";
        EXPECT_TRUE(refused_with_reason(r->error)) << path << "::" << spec::unit_name(u) << ": " << r->error;
      }
    }
  }
  std::cout << "generated " << generated << " (" << compiled.size() << " distinct sources compiled)"
            << ", refused " << refused << ", not lowered " << not_lowered << "\n";
  EXPECT_GE(generated, 10 / kShards); // (over 10 in all)
}

INSTANTIATE_TEST_SUITE_P(Corpus, CudaCorpus, ::testing::Range(0, kShards));

} // namespace
} // namespace pipecheck::executor::cuda
