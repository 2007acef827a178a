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

} // namespace pipecheck::executor::cuda
