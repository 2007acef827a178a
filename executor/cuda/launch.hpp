#pragma once
/// One launch of a generated kernel on the current CUDA device: the smallest
/// host side of the CUDA runner (no timeline, no oracle; the caller compares).
/// Untested on a GPU so far: the tests that call it skip without a device.

#include "executor/cuda/codegen.hpp"

#include <string>
#include <vector>

namespace pipecheck::executor::cuda {

struct LaunchResult {
  bool ok = false;
  /// The kernel faulted (a __trap(): a fault of the program, as the CPU
  /// runner's); the device was reset, so later launches work.
  bool trapped = false;
  std::string error;  ///< names the CUDA call that failed and its error
  double seconds = 0; ///< launch_timed: the fastest timed launch
};

/// Loads `image` (PTX text or a cubin from executor/cuda/nvrtc.hpp), copies
/// `arrays` (one per kernel.arrays entry, in order, each its elements'
/// bytes) to the device — those with poison() as poison, whatever the host
/// holds — launches kernel.ctas blocks of kernel.threads threads with
/// kernel.smem_bytes of dynamic shared memory, waits, and copies every
/// written array back into `arrays`. A kernel that faults (`__trap()`) is an
/// error. Never throws; device memory and the module are always released.
LaunchResult launch_once(const CudaKernel &kernel, const std::string &image,
                         std::vector<std::vector<unsigned char>> &arrays, bool poison_outputs = true);

/// launch_once, then `reps` more launches on the same device arrays, each
/// timed with CUDA events; `seconds` is the fastest. The arrays copied back
/// are the last launch's (every launch writes the same outputs).
LaunchResult launch_timed(const CudaKernel &kernel, const std::string &image,
                          std::vector<std::vector<unsigned char>> &arrays, int reps,
                          bool poison_outputs = true);

} // namespace pipecheck::executor::cuda
