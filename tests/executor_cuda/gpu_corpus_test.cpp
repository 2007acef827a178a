// On a GPU (skipped without one): every verified corpus kernel the generator
// supports, launched on the device plainly and adversarially, computes what
// the same source computes on host threads (host_module.hpp), which the
// emulated corpus test holds equal to the CPU runner; and a race the CPU
// runner's schedules miss goes wrong on the GPU in adversarial mode. This is
// the check scripts/device-check runs on a GPU machine (DEVICE_ONLY: no
// executor here, so the host emulation is the reference).
#include "executor/cuda/codegen.hpp"
#include "executor/cuda/device.hpp"
#include "executor/cuda/launch.hpp"
#include "executor/cuda/nvrtc.hpp"
#include "tests/executor_cuda/corpus_cases.hpp"
#include "tests/executor_cuda/host_module.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <unistd.h>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

using Bytes = std::vector<std::vector<unsigned char>>;

// Seeded inputs by dtype (floats in [-1, 1), integers in [-64, 64]), outputs poison.
Bytes initial_arrays(const CudaKernel &k, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> f(-1.0f, 1.0f);
  std::uniform_int_distribution<int> i(-64, 64);
  Bytes out;
  for (const auto &a : k.arrays) {
    const int b = element_bytes(a.dtype);
    std::vector<unsigned char> v(static_cast<std::size_t>(a.elements * b));
    for (std::int64_t e = 0; e < a.elements; ++e) {
      unsigned char *p = v.data() + e * b;
      if (a.dtype == spec::DType::i32) {
        const std::int32_t x = i(g);
        std::memcpy(p, &x, 4);
      } else if (a.dtype == spec::DType::f32) {
        const float x = f(g);
        std::memcpy(p, &x, 4);
      } else if (a.dtype == spec::DType::bf16) {
        const float x = f(g);
        std::uint32_t u;
        std::memcpy(&u, &x, 4);
        const auto h = static_cast<std::uint16_t>(u >> 16);
        std::memcpy(p, &h, 2);
      } else { // f16: a value in [-1, 1) by its bits (sign, exponent <= 14)
        const auto h = static_cast<std::uint16_t>((g() & 0x8000u) | (g() % 0x3c00u));
        std::memcpy(p, &h, 2);
      }
    }
    if (a.poison()) fill_poison(v.data(), a.dtype, a.elements);
    out.push_back(std::move(v));
  }
  return out;
}

double value(const GlobalArray &a, const std::vector<unsigned char> &v, std::int64_t e) {
  if (a.dtype == spec::DType::i32) {
    std::int32_t x;
    std::memcpy(&x, v.data() + e * 4, 4);
    return x == std::numeric_limits<std::int32_t>::min() ? std::nan("") : x;
  }
  if (a.dtype == spec::DType::f32) {
    float x;
    std::memcpy(&x, v.data() + e * 4, 4);
    return x;
  }
  std::uint16_t h;
  std::memcpy(&h, v.data() + e * 2, 2);
  if (a.dtype == spec::DType::bf16) {
    const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
  const int exp = (h >> 10) & 31, man = h & 1023;
  const double s = (h & 0x8000) ? -1 : 1;
  if (exp == 31) return man ? std::nan("") : s * INFINITY;
  return s * (exp ? std::ldexp(1024 + man, exp - 25) : std::ldexp(man, -24));
}

// Where `got` first differs from `want`; empty when equal (NaN where NaN).
std::string difference(const CudaKernel &k, const Bytes &got, const Bytes &want) {
  for (std::size_t i = 0; i < k.arrays.size(); ++i)
    for (std::int64_t e = 0; e < k.arrays[i].elements; ++e) {
      const double x = value(k.arrays[i], got[i], e), y = value(k.arrays[i], want[i], e);
      const bool same = std::isnan(x) || std::isnan(y)
                            ? std::isnan(x) && std::isnan(y)
                            : std::fabs(x - y) <= 1e-5 * std::max(1.0, std::fabs(y));
      if (!same)
        return k.arrays[i].name + "[" + std::to_string(e) + "] = " + std::to_string(x) +
               ", on host threads " + std::to_string(y);
    }
  return {};
}

// The kernel on the GPU; nullopt (with `why`) when it trapped or failed.
std::optional<Bytes> on_gpu(const CudaKernel &k, Bytes arrays, std::string &why) {
  const std::string arch = device_arch(&why);
  if (arch.empty()) return std::nullopt;
  const PtxResult p = compile_to_cubin(k.source, k.entry + ".cu", arch);
  if (!p.ok) {
    why = p.error;
    return std::nullopt;
  }
  const LaunchResult l = launch_once(k, p.cubin, arrays, /*poison_outputs=*/false);
  if (!l.ok) {
    why = l.error;
    return std::nullopt;
  }
  return arrays;
}

TEST(CudaGpuCorpus,
     EveryVerifiedGeneratedKernelComputesOnTheGpuWhatItComputesOnHostThreadsPlainAndAdversarial) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  constexpr std::int64_t max_bytes = 8 << 20;
  CodegenOptions adversarial;
  adversarial.adversarial = true;
  adversarial.adversarial_seed = 7;
  const auto plain = generated_corpus({}, max_bytes), adv = generated_corpus(adversarial, max_bytes);
  ASSERT_EQ(plain.size(), adv.size());
  std::vector<const CudaKernel *> ks;
  for (const auto &c : plain)
    ks.push_back(&c.kernel);
  const HostModule host(ks, host_module_dir());
  ASSERT_TRUE(host.ok()) << host.error();
  int checked = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    if (!plain[i].verified) continue;
    ++checked;
    const CudaKernel &k = plain[i].kernel;
    Bytes want = initial_arrays(k, static_cast<unsigned>(i + 1));
    std::vector<void *> args;
    for (auto &a : want)
      args.push_back(a.data());
    ASSERT_FALSE(host.run(i, args, 4, /*on_wait=*/false)) << plain[i].name << ": traps on host threads";
    for (const auto *c : {&plain[i], &adv[i]}) {
      std::string err;
      const auto got = on_gpu(c->kernel, initial_arrays(k, static_cast<unsigned>(i + 1)), err);
      ASSERT_TRUE(got) << c->name << (c == &plain[i] ? "" : " (adversarial)") << ": " << err;
      EXPECT_EQ(difference(k, *got, want), "") << c->name << (c == &plain[i] ? "" : " (adversarial)");
    }
  }
  std::cout << checked << " verified kernels of " << plain.size() << " generated ran right on the GPU\n";
  EXPECT_GE(checked, 10);
}

TEST(CudaGpuCorpus, AWriteBackThatTheNextPrefetchOverwritesGoesWrongOnTheGpuInAdversarialMode) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  const auto f = load_corpus("corpus/guide/generic_pipeline.pk");
  const auto &p = unit<spec::Program>(f, "generic_scale_1d_grid_in_input_slot");
  CodegenOptions o;
  const auto plain = generate_cuda(p, {}, o);
  o.adversarial = true;
  const auto adv = generate_cuda(p, {}, o);
  ASSERT_TRUE(plain && adv);
  std::string err;
  const auto right = on_gpu(*plain.kernel, initial_arrays(*plain.kernel, 3), err);
  ASSERT_TRUE(right) << err;
  const auto wrong = on_gpu(*adv.kernel, initial_arrays(*adv.kernel, 3), err);
  ASSERT_TRUE(wrong) << err;
  EXPECT_NE(difference(*plain.kernel, *wrong, *right), "");
}

} // namespace
} // namespace pipecheck::executor::cuda
