#pragma once
/// Whether a CUDA device can be used by this process.

#include <string>

namespace pipecheck::executor::cuda {

/// True when the CUDA runtime reports at least one device. Otherwise false,
/// with `why` set to a sentence naming CUDA and the runtime's error (no
/// driver, no device). Never throws; cheap enough to call before each run.
bool cuda_device_available(std::string *why = nullptr);

/// The real architecture NVRTC compiles for the current device ("sm_90a" on
/// an H100/H200, "sm_80", ...); empty, with `why`, without a usable device.
std::string device_arch(std::string *why = nullptr);

} // namespace pipecheck::executor::cuda
