// `run --backend cuda` end to end without a GPU: executor::run_all_modes
// with a CudaDevice whose launcher runs each generated kernel on host
// threads (tests/executor_cuda/host_module.hpp, eager cp.async), so the
// inputs, the intent, the comparison, the plain and adversarial runs and
// the fault and refusal paths are the product's own.
#include "executor/cuda/device.hpp"
#include "executor/cuda_runner/cuda_runner.hpp"
#include "tests/executor_cuda/host_module.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <unistd.h>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

// Each distinct source compiled for the host once.
class EmulatedLauncher {
public:
  EmulatedLauncher() = default;
  Launcher launcher() {
    return [this](const CudaKernel &k, std::vector<std::vector<unsigned char>> &arrays) {
      using Kind = ProgramDevice::Outcome::Kind;
      ProgramDevice::Outcome o;
      auto &m = modules_[k.source];
      if (!m) m = std::make_unique<HostModule>(std::vector<const CudaKernel *>{&k}, host_module_dir());
      if (!m->ok()) {
        o.message = m->error();
        return o;
      }
      ++launches;
      std::vector<void *> args;
      for (auto &a : arrays)
        args.push_back(a.data());
      o.kind = m->run(0, args, 4, /*on_wait=*/false) ? Kind::fault : Kind::ran;
      if (o.kind == Kind::fault) o.message = "__trap()";
      return o;
    };
  }
  int launches = 0;

private:
  std::map<std::string, std::unique_ptr<HostModule>> modules_;
};

RunReport run_on(const CudaDevice &device, const std::string &path, const std::string &name) {
  const auto f = load_corpus(path);
  RunOptions o;
  o.device = &device;
  for (const auto &u : f.units)
    if (spec::unit_name(u) == name) return std::visit([&](const auto &x) { return run_all_modes(x, o); }, u);
  throw std::runtime_error("no unit " + name);
}

TEST(CudaRunner, AVerifiedBf16KernelPassesItsPlainAndAdversarialRunsAgainstTheOracle) {
  EmulatedLauncher e;
  const CudaDevice device(e.launcher());
  const RunReport r = run_on(device, "corpus/kernels/typed_elementwise_gpu.pk", "bf16_scale_add_rows");
  ASSERT_EQ(r.status, RunStatus::pass) << format_report(r);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(run_label(r.runs[0]), "cuda");
  EXPECT_EQ(run_label(r.runs[1]), "cuda adversarial seed=0");
  EXPECT_EQ(run_label(r.runs[2]), "cuda adversarial seed=1");
  EXPECT_EQ(e.launches, 3);
  EXPECT_NE(format_report(r).find("  cuda adversarial seed=1"), std::string::npos) << format_report(r);
}

TEST(CudaRunner, AScratchInitializedOnlyInTheFirstCtaFailsOnTheDevice) {
  EmulatedLauncher e;
  const CudaDevice device(e.launcher());
  const RunReport r =
      run_on(device, "corpus/guide/gpu_pallas_call.pk", "gpu_scratch_init_only_in_the_first_cta");
  EXPECT_EQ(r.status, RunStatus::fail) << format_report(r);
  ASSERT_FALSE(r.runs.empty());
  ASSERT_TRUE(r.runs[0].mismatch.has_value()) << format_report(r);
  EXPECT_EQ(r.runs[0].mismatch->array, "o");
}

TEST(CudaRunner, AnUninitializedBf16AccumulatorReadsPoisonOnTheDevice) {
  EmulatedLauncher e;
  const CudaDevice device(e.launcher());
  const RunReport r = run_on(device, "corpus/kernels/typed_elementwise_gpu.pk", "bf16_row_sum_never_zeroed");
  ASSERT_EQ(r.status, RunStatus::fail) << format_report(r);
  ASSERT_TRUE(r.runs[0].mismatch.has_value());
  EXPECT_TRUE(r.runs[0].mismatch->is_poison) << format_report(r);
}

TEST(CudaRunner, APipelineWhoseWriteBackOverlapsTheNextPrefetchFailsAdversariallyOnly) {
  EmulatedLauncher e;
  const CudaDevice device(e.launcher());
  const RunReport r =
      run_on(device, "corpus/guide/generic_pipeline.pk", "generic_scale_1d_grid_in_input_slot");
  ASSERT_EQ(r.runs.size(), 3u) << format_report(r);
  EXPECT_EQ(r.runs[0].status, RunStatus::pass) << format_report(r); // plain: the copy-out lands at its start
  EXPECT_EQ(r.runs[1].status, RunStatus::fail) << format_report(r);
  EXPECT_EQ(r.status, RunStatus::fail);
}

TEST(CudaRunner, AWgmmaKLoopIsRightWithDelayReleaseAndCorruptWithoutIt) {
  EmulatedLauncher e;
  const CudaDevice device(e.launcher());
  const RunReport right = run_on(device, "corpus/kernels/wgmma_matmul_gpu.pk", "wgmma_matmul_delay_release");
  EXPECT_EQ(right.status, RunStatus::pass) << format_report(right);
  const RunReport wrong =
      run_on(device, "corpus/kernels/wgmma_matmul_gpu.pk", "wgmma_matmul_without_delay_release");
  ASSERT_EQ(wrong.runs.size(), 3u) << format_report(wrong);
  // The wgmma reads a slot the next copy has refilled (or poisoned, in
  // adversarial mode, where the copy has not landed yet).
  EXPECT_EQ(wrong.runs[1].status, RunStatus::fail) << format_report(wrong);
  ASSERT_TRUE(wrong.runs[1].mismatch.has_value());
  EXPECT_EQ(wrong.runs[1].mismatch->array, "o");
}

// A program whose intent faults never reaches the device (the synchronous
// run reports it); a trap on the device itself is the run's failure.
TEST(CudaRunner, ATrapOnTheDeviceIsAFailureOfTheRunWithItsReason) {
  const CudaDevice device([](const CudaKernel &, std::vector<std::vector<unsigned char>> &) {
    ProgramDevice::Outcome o;
    o.kind = ProgramDevice::Outcome::Kind::fault;
    o.message = "CUDA: the kernel (a __trap() is a fault of the program): unspecified launch failure";
    return o;
  });
  const auto f = load_corpus("corpus/examples/guide_pipelines.pk");
  RunOptions o;
  o.device = &device;
  o.overrides = {{"N", 4}};
  const RunResult r = run(unit<spec::Program>(f, "double_buffered_add_one"), o);
  EXPECT_EQ(r.status, RunStatus::fail);
  EXPECT_EQ(r.reason,
            "the program faulted on the device: CUDA: the kernel (a __trap() is a fault of the program): "
            "unspecified launch failure");
}

TEST(CudaRunner, AConstructTheGeneratorLacksIsAnErrorNotAPass) {
  EmulatedLauncher e;
  const CudaDevice device(e.launcher());
  const auto f = parse_text("pipeline bytes:\n"
                            "    hbm A: i8[2, 256]\n"
                            "    hbm B: i8[2, 256]\n"
                            "    sram X[1]: i8[256]\n"
                            "    copy_in_start(A[0], X[0])\n"
                            "    copy_in_wait(X[0])\n"
                            "    copy_out_start(X[0], B[0])\n"
                            "    copy_out_wait(X[0])\n",
                            "bytes.pk");
  RunOptions o;
  o.device = &device;
  const RunReport r = run_all_modes(unit<spec::Program>(f, "bytes"), o);
  EXPECT_EQ(r.status, RunStatus::error);
  ASSERT_EQ(r.runs.size(), 1u);
  EXPECT_EQ(r.runs[0].reason.rfind("not supported by the CUDA backend: dtype i8", 0), 0u) << r.runs[0].reason;
  EXPECT_EQ(e.launches, 0);
}

TEST(CudaRunner, WithoutAGpuTheGpuLauncherCannotRunAndSaysCuda) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present; this checks the no-device path";
  const CudaDevice device;
  const RunReport r = run_on(device, "corpus/kernels/typed_elementwise_gpu.pk", "i32_floor_div_mod");
  EXPECT_EQ(r.status, RunStatus::error);
  ASSERT_EQ(r.runs.size(), 1u);
  EXPECT_NE(r.runs[0].reason.find("--backend cuda: no"), std::string::npos) << r.runs[0].reason;
}

} // namespace
} // namespace pipecheck::executor::cuda
