#include "executor/cuda/launch.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

namespace pipecheck::executor::cuda {
namespace {

struct Session {
  cudaLibrary_t lib = nullptr;
  std::vector<void *> device;
  ~Session() { release(); }
  void release() {
    for (void *p : device)
      if (p) cudaFree(p);
    device.clear();
    if (lib) cudaLibraryUnload(lib);
    lib = nullptr;
  }
};

bool check(cudaError_t e, const char *what, LaunchResult &r) {
  if (e == cudaSuccess) return true;
  r.error = std::string("CUDA: ") + what + ": " + cudaGetErrorString(e);
  return false;
}

} // namespace

LaunchResult launch_once(const CudaKernel &k, const std::string &image,
                         std::vector<std::vector<unsigned char>> &arrays, bool poison_outputs) {
  return launch_timed(k, image, arrays, 0, poison_outputs);
}

LaunchResult launch_timed(const CudaKernel &k, const std::string &image,
                          std::vector<std::vector<unsigned char>> &arrays, int reps, bool poison_outputs) {
  LaunchResult r;
  if (arrays.size() != k.arrays.size()) {
    r.error = "launch: " + std::to_string(arrays.size()) + " host arrays for " +
              std::to_string(k.arrays.size()) + " kernel arrays";
    return r;
  }
  for (std::size_t i = 0; i < arrays.size(); ++i)
    if (static_cast<std::int64_t>(arrays[i].size()) !=
        k.arrays[i].elements * element_bytes(k.arrays[i].dtype)) {
      r.error = "launch: host array " + k.arrays[i].name + " has the wrong size";
      return r;
    }
  if (k.ctas < 1 || k.ctas > std::numeric_limits<int>::max()) {
    r.error = "launch: " + std::to_string(k.ctas) + " CTAs do not fit one CUDA grid dimension";
    return r;
  }
  Session s;
  if (!check(cudaLibraryLoadData(&s.lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             "cudaLibraryLoadData", r))
    return r;
  cudaKernel_t kern = nullptr;
  if (!check(cudaLibraryGetKernel(&kern, s.lib, k.entry.c_str()), "cudaLibraryGetKernel", r)) return r;
  const void *fn = reinterpret_cast<const void *>(kern);
  if (!check(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(k.smem_bytes)),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", r))
    return r;
  s.device.assign(arrays.size(), nullptr);
  std::vector<void *> args(arrays.size());
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const std::size_t bytes = arrays[i].size();
    if (!check(cudaMalloc(&s.device[i], bytes), "cudaMalloc", r)) return r;
    std::vector<unsigned char> poison;
    const unsigned char *src = arrays[i].data();
    if (poison_outputs && k.arrays[i].poison()) {
      poison.resize(arrays[i].size());
      fill_poison(poison.data(), k.arrays[i].dtype, k.arrays[i].elements);
      src = poison.data();
    }
    if (!check(cudaMemcpy(s.device[i], src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device", r))
      return r;
    args[i] = &s.device[i];
  }
  auto launch = [&] {
    return check(cudaLaunchKernel(fn, dim3(static_cast<unsigned>(k.ctas)),
                                  dim3(static_cast<unsigned>(k.threads)), args.data(),
                                  static_cast<std::size_t>(k.smem_bytes), nullptr),
                 "cudaLaunchKernel", r);
  };
  if (!launch()) return r;
  if (reps > 0) {
    // The first launch warmed up; each timed one rewrites the outputs.
    cudaEvent_t start = nullptr, stop = nullptr;
    if (!check(cudaEventCreate(&start), "cudaEventCreate", r) ||
        !check(cudaEventCreate(&stop), "cudaEventCreate", r))
      return r;
    float best = 0;
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      if (!check(cudaEventRecord(start), "cudaEventRecord", r) || !launch() ||
          !check(cudaEventRecord(stop), "cudaEventRecord", r) ||
          !check(cudaEventSynchronize(stop), "the timed kernel", r) ||
          !check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime", r))
        break;
      best = i == 0 ? ms : std::min(best, ms);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (!r.error.empty()) return r;
    r.seconds = best * 1e-3;
  }
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    check(e, "the kernel (a __trap() is a fault of the program)", r);
    // A trap is sticky: the context is gone until the device is reset.
    r.trapped = e == cudaErrorLaunchFailure || e == cudaErrorIllegalInstruction || e == cudaErrorAssert;
    s.release();
    cudaDeviceReset();
    return r;
  }
  for (std::size_t i = 0; i < arrays.size(); ++i)
    if (k.arrays[i].written &&
        !check(cudaMemcpy(arrays[i].data(), s.device[i], arrays[i].size(), cudaMemcpyDeviceToHost),
               "cudaMemcpy to the host", r))
      return r;
  r.ok = true;
  return r;
}

} // namespace pipecheck::executor::cuda
