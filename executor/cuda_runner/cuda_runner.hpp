#pragma once
/// `pipecheck run --backend cuda`: a ProgramDevice (executor/run.hpp) that
/// generates the program's CUDA kernel (executor/cuda/codegen.hpp), compiles
/// it with NVRTC for the current GPU and launches it on the run's arrays.
/// The run's inputs, its intent (the oracle, or the synchronous run) and the
/// comparison stay the CPU runner's: only the execution moves to the GPU.
///
/// Each run regenerates the kernel: plain, or adversarial with the run's
/// seed (CodegenOptions::adversarial); compiled images are cached by their
/// source for the life of the device. A construct the generator lacks, a
/// layout over the shared-memory budget, or no usable GPU is `cannot_run`
/// (the run's status `error`, exit 4), never a pass.

#include "executor/cuda/codegen.hpp"
#include "executor/run.hpp"

#include <functional>
#include <vector>

namespace pipecheck::executor::cuda {

/// Runs a generated kernel on its arrays (one per kernel.arrays entry, its
/// elements' bytes, as the executor prepared them: no further poisoning),
/// leaving the written ones as the kernel ends.
using Launcher = std::function<ProgramDevice::Outcome(const CudaKernel &,
                                                      std::vector<std::vector<unsigned char>> &arrays)>;

/// The GPU launcher: NVRTC to machine code for the current device
/// (device_arch), cached by source, then launch_once; a __trap() is a fault.
Launcher gpu_launcher();

class CudaDevice : public ProgramDevice {
public:
  /// On the current GPU (gpu_launcher).
  CudaDevice();
  /// With another launcher (the tests' host emulation).
  explicit CudaDevice(Launcher launcher);
  std::string name(bool adversarial) const override;
  Outcome run(const spec::Program &program, const spec::Lowered *lowered, const spec::Env &env,
              const BufferMap &buffers, bool adversarial, std::uint64_t seed) const override;

private:
  Launcher launch_;
};

} // namespace pipecheck::executor::cuda
