#pragma once
/// Whether a CUDA device can be used by this process.

#include <string>

namespace pipecheck::executor::cuda {

/// True when the CUDA runtime reports at least one device. Otherwise false,
/// with `why` set to a sentence naming CUDA and the runtime's error (no
/// driver, no device). Never throws; cheap enough to call before each run.
bool cuda_device_available(std::string *why = nullptr);

} // namespace pipecheck::executor::cuda
