#include "executor/cuda/nvrtc.hpp"

#include <nvrtc.h>

#include <vector>

namespace pipecheck::executor::cuda {
namespace {

PtxResult compile(const std::string &source, const std::string &name, const std::string &arch, bool cubin) {
  PtxResult r;
  nvrtcProgram prog = nullptr;
  nvrtcResult e = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (e != NVRTC_SUCCESS) {
    r.error = std::string("NVRTC: nvrtcCreateProgram: ") + nvrtcGetErrorString(e);
    return r;
  }
  const std::string arch_flag = "--gpu-architecture=" + arch;
  // No fused multiply-adds: a * b + c rounds twice, as in the CPU interpreter.
  const char *opts[] = {arch_flag.c_str(), "--std=c++17", "--fmad=false"};
  e = nvrtcCompileProgram(prog, 3, opts);
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
  std::size_t size = 0;
  e = cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size);
  if (e == NVRTC_SUCCESS) {
    std::string out(size, '\0');
    e = cubin ? nvrtcGetCUBIN(prog, out.data()) : nvrtcGetPTX(prog, out.data());
    if (e == NVRTC_SUCCESS) {
      // The PTX text ends in a NUL that is not part of it.
      if (!cubin && !out.empty() && out.back() == '\0') out.pop_back();
      (cubin ? r.cubin : r.ptx) = std::move(out);
    }
  }
  nvrtcDestroyProgram(&prog);
  if (e != NVRTC_SUCCESS) {
    r.error = std::string(cubin ? "NVRTC: nvrtcGetCUBIN: " : "NVRTC: nvrtcGetPTX: ") + nvrtcGetErrorString(e);
    return r;
  }
  r.ok = true;
  return r;
}

} // namespace

PtxResult compile_to_ptx(const std::string &source, const std::string &name, const std::string &arch) {
  return compile(source, name, arch, false);
}

PtxResult compile_to_cubin(const std::string &source, const std::string &name, const std::string &arch) {
  return compile(source, name, arch, true);
}

} // namespace pipecheck::executor::cuda
