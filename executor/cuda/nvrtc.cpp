#include "executor/cuda/nvrtc.hpp"

#include <nvrtc.h>

#include <vector>

namespace pipecheck::executor::cuda {

PtxResult compile_to_ptx(const std::string &source, const std::string &name, const std::string &arch) {
  PtxResult r;
  nvrtcProgram prog = nullptr;
  nvrtcResult e = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (e != NVRTC_SUCCESS) {
    r.error = std::string("NVRTC: nvrtcCreateProgram: ") + nvrtcGetErrorString(e);
    return r;
  }
  const std::string arch_flag = "--gpu-architecture=" + arch;
  const char *opts[] = {arch_flag.c_str(), "--std=c++17"};
  e = nvrtcCompileProgram(prog, 2, opts);
  std::size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    std::vector<char> log(log_size);
    if (nvrtcGetProgramLog(prog, log.data()) == NVRTC_SUCCESS) r.log.assign(log.data());
  }
  if (e != NVRTC_SUCCESS) {
    r.error = std::string("NVRTC: compilation failed (") + nvrtcGetErrorString(e) + "): " + r.log;
    nvrtcDestroyProgram(&prog);
    return r;
  }
  std::size_t ptx_size = 0;
  e = nvrtcGetPTXSize(prog, &ptx_size);
  if (e == NVRTC_SUCCESS) {
    std::vector<char> ptx(ptx_size);
    e = nvrtcGetPTX(prog, ptx.data());
    if (e == NVRTC_SUCCESS) r.ptx.assign(ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  if (e != NVRTC_SUCCESS) {
    r.error = std::string("NVRTC: nvrtcGetPTX: ") + nvrtcGetErrorString(e);
    return r;
  }
  r.ok = true;
  return r;
}

} // namespace pipecheck::executor::cuda
