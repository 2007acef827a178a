#include "executor/cuda/device.hpp"

#include <cuda_runtime_api.h>

namespace pipecheck::executor::cuda {

bool cuda_device_available(std::string *why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why) {
      *why = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
      if (e == cudaErrorInsufficientDriver)
        *why += "; no NVIDIA driver is loaded, or it is older than this CUDA runtime";
    }
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device (cudaGetDeviceCount found 0)";
    return false;
  }
  return true;
}

std::string device_arch(std::string *why) {
  if (!cuda_device_available(why)) return {};
  int device = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess) {
    if (why) *why = std::string("CUDA: the device's compute capability: ") + cudaGetErrorString(e);
    return {};
  }
  // sm_90a: Hopper with its architecture-specific instructions (wgmma, setmaxnreg).
  return "sm_" + std::to_string(major) + std::to_string(minor) + (major == 9 && minor == 0 ? "a" : "");
}

} // namespace pipecheck::executor::cuda
