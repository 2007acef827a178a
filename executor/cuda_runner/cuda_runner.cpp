#include "executor/cuda_runner/cuda_runner.hpp"

#include "executor/cuda/device.hpp"
#include "executor/cuda/launch.hpp"
#include "executor/cuda/nvrtc.hpp"

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace pipecheck::executor::cuda {

namespace {

ProgramDevice::Outcome outcome(ProgramDevice::Outcome::Kind kind, std::string message) {
  ProgramDevice::Outcome o;
  o.kind = kind;
  o.message = std::move(message);
  return o;
}

} // namespace

Launcher gpu_launcher() {
  struct Cache {
    std::mutex mu;
    std::map<std::string, std::string> images; // arch + source -> cubin
  };
  auto cache = std::make_shared<Cache>();
  return [cache](const CudaKernel &k, std::vector<std::vector<unsigned char>> &arrays) {
    using Kind = ProgramDevice::Outcome::Kind;
    std::string why;
    const std::string arch = device_arch(&why);
    if (arch.empty()) return outcome(Kind::cannot_run, "--backend cuda: " + why);
    std::string image;
    {
      std::lock_guard<std::mutex> lock(cache->mu);
      const std::string key = arch + "\n" + k.source;
      if (auto it = cache->images.find(key); it != cache->images.end()) {
        image = it->second;
      } else {
        const PtxResult p = compile_to_cubin(k.source, k.entry + ".cu", arch);
        if (!p.ok) return outcome(Kind::cannot_run, p.error);
        image = cache->images[key] = p.cubin;
      }
    }
    const LaunchResult l = launch_once(k, image, arrays, /*poison_outputs=*/false);
    if (l.ok) return outcome(Kind::ran, "");
    return outcome(l.trapped ? Kind::fault : Kind::cannot_run, l.error);
  };
}

CudaDevice::CudaDevice() : launch_(gpu_launcher()) {}

CudaDevice::CudaDevice(Launcher launcher) : launch_(std::move(launcher)) {}

std::string CudaDevice::name(bool adversarial) const { return adversarial ? "cuda adversarial" : "cuda"; }

ProgramDevice::Outcome CudaDevice::run(const spec::Program &program, const spec::Lowered *lowered,
                                       const spec::Env &env, const BufferMap &buffers, bool adversarial,
                                       std::uint64_t seed) const {
  using Kind = Outcome::Kind;
  CodegenOptions o;
  o.adversarial = adversarial;
  o.adversarial_seed = seed;
  const CodegenResult g = lowered ? generate_cuda(*lowered, env, o) : generate_cuda(program, env, o);
  if (!g) return outcome(Kind::cannot_run, g.error);
  const CudaKernel &k = *g.kernel;
  std::vector<std::vector<unsigned char>> arrays;
  for (const auto &a : k.arrays) {
    const auto it = buffers.find(a.name);
    if (it == buffers.end() || it->second->size() != a.elements || it->second->dtype() != a.dtype)
      return outcome(Kind::cannot_run,
                     "the run's array for hbm buffer " + a.name + " does not match the kernel's");
    const HostArray &h = *it->second;
    arrays.emplace_back(reinterpret_cast<const unsigned char *>(h.data()),
                        reinterpret_cast<const unsigned char *>(h.data()) + h.bytes());
  }
  const auto t0 = std::chrono::steady_clock::now();
  Outcome r = launch_(k, arrays);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.kind != Kind::ran) return r;
  for (std::size_t i = 0; i < k.arrays.size(); ++i)
    if (k.arrays[i].written)
      std::memcpy(buffers.at(k.arrays[i].name)->data(), arrays[i].data(), arrays[i].size());
  return r;
}

} // namespace pipecheck::executor::cuda
