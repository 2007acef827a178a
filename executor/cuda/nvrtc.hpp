#pragma once
/// Run-time compilation of generated CUDA C++ with NVRTC (C++17, and
/// --fmad=false: no multiply-add is fused, so float arithmetic rounds as the
/// CPU interpreter's does).

#include <string>

namespace pipecheck::executor::cuda {

struct PtxResult {
  bool ok = false;
  std::string ptx;   ///< the module's PTX when ok (compile_to_ptx)
  std::string cubin; ///< the module's SASS as an ELF image when ok (compile_to_cubin)
  std::string log;   ///< NVRTC's log (errors and warnings), maybe empty
  /// When !ok: what failed ("NVRTC: compilation failed: <log>", or the API error).
  std::string error;
};

/// Compiles `source` (one translation unit, no #include of toolkit headers)
/// to PTX for the virtual architecture `arch` (e.g. "compute_90"). Never
/// throws; the NVRTC program is always destroyed.
PtxResult compile_to_ptx(const std::string &source, const std::string &name,
                         const std::string &arch = "compute_90");

/// Compiles `source` through PTX to machine code (NVRTC runs ptxas) for the
/// real architecture `arch` (e.g. "sm_90", "sm_90a"): register allocation and
/// the hardware's limits are checked as for a launch. Never throws.
PtxResult compile_to_cubin(const std::string &source, const std::string &name,
                           const std::string &arch = "sm_90a");

} // namespace pipecheck::executor::cuda
