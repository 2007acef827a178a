// Every corpus kernel and pipeline the CUDA generator supports, compiled as
// host C++ at run time (host_module.hpp) and run on host threads with the
// same inputs as the CPU runner runs its Program: under the same schedule
// (cp.async eager, or on_wait as late as the waits allow) the generated
// kernel must compute what the CPU runner computes, fault (__trap) where it
// faults, and — in adversarial mode — go wrong where it goes wrong. This
// checks the generator's indexing, rings, waits and CTA split across the
// corpus without a GPU; a GPU's own timing is not emulated.
#include "executor/cuda/codegen.hpp"
#include "executor/program_runner.hpp"
#include "executor/tensor.hpp"
#include "spec/eval.hpp"
#include "tests/executor_cuda/corpus_cases.hpp"
#include "tests/executor_cuda/host_module.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

using Case = CorpusCase;

// Kernels small enough to emulate in a test: at most this many hbm bytes.
constexpr std::int64_t max_hbm_bytes = 8 << 20;

std::vector<Case> generated_cases(const CodegenOptions &o) { return generated_corpus(o, max_hbm_bytes); }

using Arrays = std::map<std::string, std::unique_ptr<HostArray>>;

// The program's buffers as the CUDA launch starts them: inputs seeded
// random, outputs (written, never read) and on-chip buffers poison, acc
// buffers zero; with
// `random_outputs` the outputs random too (a NaN in them then is poison the
// program wrote).
Arrays initial_buffers(const Case &c, std::uint64_t seed, bool random_outputs = false) {
  Arrays m;
  std::uint64_t k = 0;
  for (const auto &b : c.program.buffers) {
    auto a = std::make_unique<HostArray>(b.name, b.dtype, *buffer_array_shape(b, c.env));
    if (b.kind == spec::BufferKind::acc)
      a->fill_zero(); // as executor/run starts it (and the generated kernel)
    else
      a->fill_poison();
    if (b.kind == spec::BufferKind::hbm) {
      const auto &g = *std::find_if(c.kernel.arrays.begin(), c.kernel.arrays.end(),
                                    [&](const GlobalArray &x) { return x.name == b.name; });
      a->fill_random(seed * 7919 + ++k);
      if (g.poison() && !random_outputs) a->fill_poison();
    }
    m[b.name] = std::move(a);
  }
  return m;
}

// One run's hbm arrays as doubles (poison as NaN, whatever the dtype), or
// none when it faulted (CPU) or trapped (emulated).
using Outcome = std::optional<std::vector<std::vector<double>>>;

std::vector<double> values(const HostArray &a) {
  std::vector<double> v(static_cast<std::size_t>(a.size()));
  for (std::int64_t i = 0; i < a.size(); ++i)
    v[static_cast<std::size_t>(i)] = a.is_poison(i) ? std::nan("") : a.get(i);
  return v;
}

Outcome run_on_cpu(const Case &c, DmaMode mode, std::uint64_t seed, bool random_outputs = false) {
  Arrays arrays = initial_buffers(c, seed, random_outputs);
  BufferMap map;
  for (auto &[n, a] : arrays)
    map[n] = a.get();
  ProgramRunConfig cfg;
  cfg.mode = mode;
  cfg.dma_threads = 1;
  if (run_program(c.program, c.env, map, cfg).error) return std::nullopt;
  std::vector<std::vector<double>> out;
  for (const auto &g : c.kernel.arrays)
    out.push_back(values(*arrays.at(g.name)));
  return out;
}

// The kernel run on host threads on the same initial arrays (their bytes).
Outcome emulate(const HostModule &m, std::size_t i, const Case &c, bool on_wait, std::uint64_t seed) {
  Arrays init = initial_buffers(c, seed);
  std::vector<void *> args;
  for (const auto &g : c.kernel.arrays)
    args.push_back(init.at(g.name)->data());
  if (m.run(i, args, 4, on_wait)) return std::nullopt;
  std::vector<std::vector<double>> out;
  for (const auto &g : c.kernel.arrays)
    out.push_back(values(*init.at(g.name)));
  return out;
}

// Whether `o` holds NaN at an element where `written` (a run whose outputs
// started random) holds NaN: poison the program wrote, not an element left
// unwritten.
bool holds_written_poison(const Outcome &o, const Outcome &written) {
  if (!o || !written) return false;
  for (std::size_t k = 0; k < o->size(); ++k)
    for (std::size_t i = 0; i < (*o)[k].size(); ++i)
      if (std::isnan((*o)[k][i]) && std::isnan((*written)[k][i])) return true;
  return false;
}

// Equal up to rounding: relative to the element, and to the array's largest
// magnitude (`scale`), since a dot summed in another order differs by a few
// ulps of its terms, which may be far larger than a result near zero.
bool same(double a, double b, double scale) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::fabs(a - b) <= 1e-5 * std::fabs(b) + 1e-5 * scale;
}

// How `got` first differs from `want` (a fault, or an element); empty when equal.
std::string difference(const Case &c, const Outcome &got, const Outcome &want) {
  if (!got || !want) return got ? "the intent faults" : want ? "it faults" : "";
  for (std::size_t k = 0; k < c.kernel.arrays.size(); ++k) {
    double scale = 0;
    for (double w : (*want)[k])
      if (!std::isnan(w)) scale = std::max(scale, std::fabs(w));
    for (std::size_t i = 0; i < (*want)[k].size(); ++i)
      if (!same((*got)[k][i], (*want)[k][i], scale))
        return c.kernel.arrays[k].name + "[" + std::to_string(i) + "] = " + std::to_string((*got)[k][i]) +
               ", the intent " + std::to_string((*want)[k][i]);
  }
  return {};
}

class EmulatedCorpus : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    CodegenOptions adversarial;
    adversarial.adversarial = true;
    adversarial.adversarial_seed = 1;
    plain_ = new std::vector<Case>(generated_cases({}));
    adversarial_ = new std::vector<Case>(generated_cases(adversarial));
    std::vector<const CudaKernel *> ks;
    for (const auto *cs : {plain_, adversarial_})
      for (const auto &c : *cs)
        ks.push_back(&c.kernel);
    module_ = new HostModule(ks, host_module_dir());
  }
  static void TearDownTestSuite() {
    delete module_;
    delete plain_;
    delete adversarial_;
  }
  // Each generated kernel's runs: the intent (synchronous copies) and the
  // CPU runner's eager and on_wait runs, then the emulated kernel's eager and
  // on_wait runs (module index `first + i`).
  struct Runs {
    Outcome intent, written, cpu[2], emulated[2]; // written: the intent with outputs starting random
  };
  static Runs runs(const std::vector<Case> &cases, std::size_t first, std::size_t i,
                   const HostModule *m = nullptr) {
    const Case &c = cases[i];
    Runs r;
    r.intent = run_on_cpu(c, DmaMode::synchronous, i + 1);
    r.written = run_on_cpu(c, DmaMode::synchronous, i + 1, true);
    for (int on_wait : {0, 1}) {
      r.cpu[on_wait] = run_on_cpu(c, on_wait ? DmaMode::on_wait : DmaMode::eager, i + 1);
      r.emulated[on_wait] = emulate(m ? *m : *module_, first + i, c, on_wait, i + 1);
    }
    return r;
  }
  // Right: no fault, equal to the intent, and no poison (inputs hold none).
  static bool right(const Case &c, const Runs &r, const Outcome &o) {
    return o && r.intent && !holds_written_poison(o, r.written) && difference(c, o, r.intent).empty();
  }

  static std::vector<Case> *plain_, *adversarial_;
  static HostModule *module_;
};
std::vector<Case> *EmulatedCorpus::plain_ = nullptr;
std::vector<Case> *EmulatedCorpus::adversarial_ = nullptr;
HostModule *EmulatedCorpus::module_ = nullptr;

TEST_F(EmulatedCorpus, EveryGeneratedVerifiedKernelRunsRightUnderBothSchedulesPlainAndAdversarial) {
  ASSERT_TRUE(module_->ok()) << module_->error();
  ASSERT_GE(plain_->size(), 10u);
  for (const auto *cs : {plain_, adversarial_}) {
    const std::size_t first = cs == plain_ ? 0 : plain_->size();
    int checked = 0;
    for (std::size_t i = 0; i < cs->size(); ++i) {
      const Case &c = (*cs)[i];
      if (!c.verified) continue;
      ++checked;
      if (std::getenv("PIPECHECK_CUDA_REASONS")) std::cout << "verified, emulated: " << c.name << "\n";
      const Runs r = runs(*cs, first, i);
      ASSERT_TRUE(right(c, r, r.intent)) << c.name << ": its intent faults or holds poison";
      for (int on_wait : {0, 1})
        EXPECT_TRUE(right(c, r, r.emulated[on_wait]))
            << c.name << (cs == plain_ ? "" : " (adversarial)") << (on_wait ? " on_wait: " : " eager: ")
            << (holds_written_poison(r.emulated[on_wait], r.written) ? "poison in an output; " : "")
            << difference(c, r.emulated[on_wait], r.intent);
    }
    std::cout << (cs == plain_ ? "plain: " : "adversarial: ") << checked << " verified of " << cs->size()
              << " generated kernels run right emulated\n";
    EXPECT_GE(checked, 10);
  }
}

TEST_F(EmulatedCorpus, EveryGeneratedKernelThatGoesWrongOnTheCpuRunnerGoesWrongEmulatedInAdversarialMode) {
  ASSERT_TRUE(module_->ok()) << module_->error();
  int wrong = 0;
  for (std::size_t i = 0; i < adversarial_->size(); ++i) {
    const Case &c = (*adversarial_)[i];
    const Runs r = runs(*adversarial_, plain_->size(), i);
    if (r.intent && right(c, r, r.cpu[0]) && right(c, r, r.cpu[1])) continue;
    ++wrong;
    EXPECT_FALSE(right(c, r, r.emulated[0]) && right(c, r, r.emulated[1]))
        << c.name << ": the CPU runner gives " << difference(c, r.cpu[0], r.intent) << " (eager), "
        << difference(c, r.cpu[1], r.intent) << " (on_wait); emulated, both runs are right";
  }
  std::cout << wrong << " generated kernels go wrong on the CPU runner, and emulated\n";
  EXPECT_GE(wrong, 5);
}

// Adversarial mode exposes more: a kernel with a race the checker finds may
// run right on the CPU runner's two schedules (eager, on_wait) and still go
// wrong emulated, since the emulation mixes them (copy-ins early, write-backs
// late, slots poisoned at each copy's start). Never the other way round
// for a verified kernel (the test above).
TEST_F(EmulatedCorpus, AdversarialModeExposesRacesTheCpuRunnersSchedulesMiss) {
  ASSERT_TRUE(module_->ok()) << module_->error();
  std::vector<std::string> more;
  for (std::size_t i = 0; i < adversarial_->size(); ++i) {
    const Case &c = (*adversarial_)[i];
    const Runs r = runs(*adversarial_, plain_->size(), i);
    if (c.verified || !right(c, r, r.cpu[0]) || !right(c, r, r.cpu[1])) continue;
    if (!right(c, r, r.emulated[0]) || !right(c, r, r.emulated[1])) more.push_back(c.name);
  }
  for (const auto &n : more)
    std::cout << "exposed only in adversarial mode: " << n << "\n";
  EXPECT_NE(std::find(more.begin(), more.end(),
                      "corpus/guide/generic_pipeline.pk::generic_scale_1d_grid_in_input_slot"),
            more.end());
}

// A kernel whose wgmmas fit the instruction (CudaKernel::wgmma) runs them
// as wgmma instructions on sm_90a (emulated as the PTX ISA defines them, by
// descriptors into the canonical layout) and as a loop over shared memory
// elsewhere: both compute what the CPU runner computes, and both go wrong
// where it goes wrong (delay_release missing: the refilled slot is read).
TEST_F(EmulatedCorpus, WgmmaKernelsAreRightAndWrongAsTheCpuRunnerIsByTheInstructionAndByTheLoop) {
  ASSERT_TRUE(module_->ok()) << module_->error();
  std::vector<std::pair<const std::vector<Case> *, std::size_t>> picked; // (cases, index)
  std::vector<const CudaKernel *> ks;
  for (const auto *cs : {plain_, adversarial_})
    for (std::size_t i = 0; i < cs->size(); ++i)
      if ((*cs)[i].kernel.wgmma) {
        picked.emplace_back(cs, i);
        ks.push_back(&(*cs)[i].kernel);
      }
  ASSERT_GE(picked.size(), 8u); // the guide's, the rule's and the corpus kernel's, each twin, both modes
  const HostModule loop(ks, host_module_dir(), "#define PK_WGMMA 0");
  ASSERT_TRUE(loop.ok()) << loop.error();
  bool twin_wrong = false;
  for (std::size_t j = 0; j < picked.size(); ++j) {
    const auto &[cs, i] = picked[j];
    const Case &c = (*cs)[i];
    const bool adversarial = cs == adversarial_;
    // Module indices: module_ holds plain_ then adversarial_; `loop` the picked ones.
    const Runs instr = runs(*cs, adversarial ? plain_->size() : 0, i);
    const Runs by_loop = runs(*cs, j - i, i, &loop);
    const bool cpu_right = right(c, instr, instr.cpu[0]) && right(c, instr, instr.cpu[1]);
    for (const Runs *r : {&instr, &by_loop}) {
      const char *how = r == &instr ? " (instruction)" : " (loop)";
      if (c.verified) {
        for (int on_wait : {0, 1})
          EXPECT_TRUE(right(c, *r, r->emulated[on_wait]))
              << c.name << how << (on_wait ? " on_wait: " : " eager: ")
              << difference(c, r->emulated[on_wait], r->intent);
      } else if (adversarial && !cpu_right) {
        EXPECT_FALSE(right(c, *r, r->emulated[1])) << c.name << how << ": right on_wait in adversarial mode";
      }
    }
    if (adversarial && c.name.find("wgmma_matmul_without_delay_release") != std::string::npos)
      twin_wrong = !right(c, instr, instr.emulated[1]);
  }
  EXPECT_TRUE(twin_wrong) << "the corpus' wgmma K loop without delay_release";
}

// ---- Generated bodies ----
//
// The body evaluator (fusion, broadcasting, temporaries, locals) against the
// CPU interpreter on programs no one wrote: random expression trees over a
// (A, B) slot, a (B,) row, an (A, 1) column and a (B, C) matrix, with
// elementwise operations, where/iota/comparisons, reductions over an axis
// (keepdims or not) or all, dot (m square: also trans_b), integer // and %
// cast to f32, and tensor locals, each
// stored through a local into an output slot. Seeded; a failure prints the
// program. PIPECHECK_CUDA_BODY_CASES sets how many (CI: 24).
class BodyGen {
public:
  explicit BodyGen(std::uint32_t seed) : rng_(seed) {}

  // An expression of shape `s` ("full" (A, B), "row" (B,), "col" (A, 1),
  // "one" (): a literal, a scalar or a one-element ref), depth-bounded.
  std::string expr(const std::string &s, int depth) {
    const int pick = depth <= 0 ? 0 : static_cast<int>(rng_() % 9);
    switch (pick) {
    case 0: return leaf(s);
    case 1:
    case 2: {
      static const char *ops[] = {" + ", " - ", " * "};
      return "(" + expr(s, depth - 1) + ops[rng_() % 3] + expr(narrower(s), depth - 1) + ")";
    }
    case 3:
      return std::string(rng_() % 2 ? "maximum(" : "minimum(") + expr(s, depth - 1) + ", " +
             expr(narrower(s), depth - 1) + ")";
    case 4: {
      static const char *cmp[] = {" < ", " >= ", " != "};
      return "where(" + expr(s, depth - 1) + cmp[rng_() % 3] + expr(narrower(s), depth - 1) + ", " +
             expr(s, depth - 1) + ", " + expr(narrower(s), depth - 1) + ")";
    }
    case 5: return reduce_to(s, depth);
    case 6:
      if (s == "full")
        return "dot(" + expr("full", depth - 1) + ", m[0]" + (rng_() % 2 ? ", trans_b=True" : "") +
               ") * 0.25";
      return reduce_to(s, depth);
    case 7: return std::string(rng_() % 2 ? "exp(" : "abs(") + expr(s, depth - 1) + " * 0.125)";
    default: {
      const std::string name = "t" + std::to_string(names_++);
      const std::string value = expr(s, depth - 1); // may bind locals of its own first
      locals_.push_back(name + " = " + value);
      return name;
    }
    }
  }
  const std::vector<std::string> &locals() const { return locals_; }

private:
  // Something that broadcasts to shape s.
  std::string narrower(const std::string &s) {
    if (s == "full") {
      static const char *k[] = {"full", "row", "col", "one"};
      return k[rng_() % 4];
    }
    return rng_() % 2 ? s : "one";
  }
  std::string leaf(const std::string &s) {
    const unsigned r = rng_() % 3;
    if (s == "one" && r == 0)
      return std::to_string(static_cast<int>(rng_() % 7) - 3) + (rng_() % 2 ? ".5" : "");
    if (s == "full" && r == 1 && rng_() % 2)
      return "cast(iota((A, B), 1) // 3 - iota((A, B), 0) % 4, f32)"; // integer // and % first
    if (s == "full") return r == 1 ? "iota((A, B), " + std::to_string(rng_() % 2) + ") * 0.5" : "x[0]";
    if (s == "row") return r == 1 ? "iota((B,), 0) * 0.25" : "y[0]";
    if (s == "col") return r == 1 ? "x[0, :, 0:1]" : "z[0]";
    return r == 1 ? "x[0, 1, 2]" : "y[0, 3]";
  }
  std::string reduce_to(const std::string &s, int depth) {
    const char *f = rng_() % 2 ? "sum(" : "max(";
    if (s == "row") return f + expr("full", depth - 1) + ", axis=0)";
    if (s == "col") return f + expr("full", depth - 1) + ", axis=1, keepdims=True)";
    if (s == "one") return std::string(f) + expr(rng_() % 2 ? "full" : "row", depth - 1) + ")";
    return "(" + expr("full", depth - 1) + " - " + f + expr("full", depth - 1) +
           ", axis=" + std::to_string(rng_() % 2) + ", keepdims=True))";
  }
  std::mt19937 rng_;
  std::vector<std::string> locals_;
  int names_ = 0;
};

std::string generated_body_program(std::uint32_t seed) {
  BodyGen g(seed);
  const std::string out = g.expr("full", 3);
  std::ostringstream p;
  p << "pipeline body_" << seed << ":\n"
    << "    param A = 6\n    param B = 8\n"
    << "    hbm X: f32[A, B]\n    hbm Y: f32[B]\n    hbm Z: f32[A, 1]\n    hbm M: f32[B, B]\n"
    << "    hbm O: f32[A, B]\n"
    << "    sram x[1]: f32[A, B]\n    sram y[1]: f32[B]\n    sram z[1]: f32[A, 1]\n    sram m[1]: f32[B, B]\n"
    << "    sram o[1]: f32[A, B]\n"
    << "    copy_in_start(X, x[0])\n    copy_in_start(Y, y[0])\n    copy_in_start(Z, z[0])\n"
    << "    copy_in_start(M, m[0])\n"
    << "    copy_in_wait(x[0])\n    copy_in_wait(y[0])\n    copy_in_wait(z[0])\n    copy_in_wait(m[0])\n";
  for (const auto &l : g.locals())
    p << "    " << l << "\n";
  p << "    o[0] = " << out << "\n"
    << "    o[0] += x[0] * 0.5\n"
    << "    copy_out_start(o[0], O)\n    copy_out_wait(o[0])\n";
  return p.str();
}

TEST(EmulatedBodies, GeneratedBodiesComputeWhatTheCpuInterpreterComputes) {
  int n = 24;
  if (const char *e = std::getenv("PIPECHECK_CUDA_BODY_CASES")) n = std::max(1, std::atoi(e));
  std::vector<Case> cases;
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    const std::string text = generated_body_program(static_cast<std::uint32_t>(1000 + i));
    const spec::File f = parse_text(text, "body.pk");
    ASSERT_EQ(f.units.size(), 1u) << text;
    Case c;
    c.name = "body_" + std::to_string(1000 + i);
    c.verified = true;
    c.program = std::get<spec::Program>(f.units[0]);
    c.env = pipeline_env(c.program);
    const CodegenResult r = generate_cuda(c.program, c.env);
    ASSERT_TRUE(r) << r.error << "\n" << text;
    c.kernel = *r.kernel;
    cases.push_back(std::move(c));
    texts.push_back(text);
  }
  std::vector<const CudaKernel *> ks;
  for (const auto &c : cases)
    ks.push_back(&c.kernel);
  const HostModule m(ks, host_module_dir());
  ASSERT_TRUE(m.ok()) << m.error();
  int compared = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    const Outcome want = run_on_cpu(c, DmaMode::synchronous, i + 1);
    ASSERT_TRUE(want) << "the CPU interpreter faults on\n" << texts[i];
    for (int on_wait : {0, 1}) {
      const Outcome got = emulate(m, i, c, on_wait, i + 1);
      EXPECT_EQ(difference(c, got, want), "") << texts[i];
    }
    ++compared;
  }
  EXPECT_EQ(compared, n);
}

} // namespace
} // namespace pipecheck::executor::cuda
