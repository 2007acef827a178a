#pragma once
// Generated kernels compiled as host C++ at run time (host_emulation.hpp),
// with the C++ compiler that built the tests, into one shared library that
// is then loaded: the device of the corpus-wide emulation tests. One
// library for many kernels (each in its own namespace), since the
// emulation's headers dominate a compile.

#include "executor/cuda/codegen.hpp"

#include <string>
#include <vector>

namespace pipecheck::executor::cuda::testing {

/// Where the tests keep their host libraries (created): one folder under the
/// system's temporary directory, shared by the tests' processes.
std::string host_module_dir();

class HostModule {
public:
  /// Compiles every kernel's source into one library in `dir` (named by a
  /// hash of its source: one already there is reused) and loads it;
  /// error() says why not (the compiler's output).
  /// `defines`: lines before the emulation header (e.g. "#define PK_WGMMA 0").
  HostModule(const std::vector<const CudaKernel *> &kernels, const std::string &dir,
             const std::string &defines = "");
  ~HostModule();
  HostModule(const HostModule &) = delete;
  HostModule &operator=(const HostModule &) = delete;

  bool ok() const { return run_ != nullptr; }
  const std::string &error() const { return error_; }

  /// Runs kernel `i` (of the constructor's list) with its ctas, `threads`
  /// threads per block (a CudaKernel::wgmma kernel: its own threads), on `args` (one pointer per entry of its
  /// arrays), its cp.async copies on_wait or eager. True when it executed __trap().
  bool run(std::size_t i, const std::vector<void *> &args, unsigned threads, bool on_wait) const;

private:
  std::vector<std::int64_t> ctas_;
  std::vector<int> threads_; // a wgmma kernel's own threads, else 0
  void *handle_ = nullptr;
  bool (*run_)(int, void *const *, unsigned, unsigned, int) = nullptr;
  std::string error_;
};

} // namespace pipecheck::executor::cuda::testing
