#include "spec/targets.hpp"

namespace pipecheck::spec {

namespace {
constexpr std::int64_t MiB = 1024 * 1024;
constexpr std::int64_t KiB = 1024;
} // namespace

const std::vector<Target> &targets() {
  static const std::vector<Target> t = {
      // Physical VMEM per TensorCore: v4 16 MiB, v5e 128 MiB, v5p 64 MiB,
      // v6e 128 MiB — jax-ml/jax, jax/_src/tpu_info.py (`vmem_capacity_bytes`
      // per ChipVersion; checked at commit cec06d1). The Pallas TPU docs only
      // say "16MB+" (jax-ml/jax docs/pallas/tpu/details.rst).
      // Default scoped VMEM limit (XLA's --xla_tpu_scoped_vmem_limit_kib, which
      // vmem_limit_bytes overrides per kernel: jax-ml/jax
      // jax/_src/pallas/mosaic/core.py, CompilerParams docstring;
      // https://openxla.org/xla/errors/error_1001): 16 MiB on v4/v5e/v5p and
      // 32 MiB on v6e. No official page states these defaults; they match the
      // compiler's own "Scoped allocation ... limit 16.00M" (v5p) and
      // "limit 32.00M" (v6e) errors quoted in public reports, and v4's limit
      // equals its whole VMEM.
      //
      // The performance model's beta (HBM bandwidth) and F (peak bf16 FLOP/s
      // per chip) are the vendor's figures: Cloud TPU "System architecture"
      // pages (https://cloud.google.com/tpu/docs/v4, .../v5e, .../v5p,
      // .../v6e): v4 1200 GB/s, 275 TFLOP/s; v5e 819 GB/s, 197 TFLOP/s; v5p
      // 2765 GB/s, 459 TFLOP/s; v6e 1640 GB/s, 918 TFLOP/s. alpha (one DMA's
      // latency) has no published figure: 1 us is an order-of-magnitude
      // estimate (HBM access plus DMA issue); it only matters for small blocks.
      {"tpu_v4", TargetKind::tpu, 16 * MiB, 16 * MiB, 1e-6, 1200e9, 275e12},
      {"tpu_v5e", TargetKind::tpu, 16 * MiB, 128 * MiB, 1e-6, 819e9, 197e12},
      {"tpu_v5p", TargetKind::tpu, 16 * MiB, 64 * MiB, 1e-6, 2765e9, 459e12},
      {"tpu_v6e", TargetKind::tpu, 32 * MiB, 128 * MiB, 1e-6, 1640e9, 918e12},
      // Hopper (compute capability 9.0): at most 227 KiB of shared memory per
      // thread block (opt-in; 228 KiB per SM less 1 KiB the runtime reserves
      // per block) — CUDA C++ Programming Guide, "Technical Specifications per
      // Compute Capability"
      // (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#features-and-technical-specifications-technical-specifications-per-compute-capability),
      // https://docs.nvidia.com/cuda/hopper-tuning-guide/, and Mosaic GPU's
      // own default when no device can be queried (jax-ml/jax
      // jax/experimental/mosaic/gpu/core.py: `227 * 1024`). H200 has the same
      // GH100 SM, so the same limit.
      // beta and F: NVIDIA's H100 SXM and H200 SXM datasheets
      // (https://www.nvidia.com/en-us/data-center/h100/, .../h200/): 3.35 TB/s
      // and 4.8 TB/s of HBM bandwidth, 989 TFLOP/s dense bf16 tensor core
      // (the sheets' 1979 counts 2:4 sparsity). alpha: a global-memory access
      // takes several hundred ns on Hopper; 0.5 us per TMA copy is an estimate.
      {"h100", TargetKind::gpu, 227 * KiB, 227 * KiB, 0.5e-6, 3.35e12, 989e12},
      {"h200", TargetKind::gpu, 227 * KiB, 227 * KiB, 0.5e-6, 4.8e12, 989e12},
  };
  return t;
}

const Target *find_target(const std::string &name) {
  for (const auto &t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

std::string target_names() {
  std::string list;
  for (const auto &t : targets())
    list += (list.empty() ? "" : ", ") + t.name;
  return list;
}

std::string unknown_target_message(const std::string &name) {
  return "unknown target '" + name + "'; expected one of " + target_names();
}

bool uses_triton(const KernelSpec &k) {
  const auto *s = k.setting("backend");
  return s && s->value.op == Op::Name && s->value.name == "triton";
}

std::optional<std::string> kernel_target(const KernelSpec &k,
                                         const std::optional<std::string> &override_name) {
  if (uses_triton(k)) return std::nullopt;
  if (override_name) return override_name;
  if (const auto *s = k.setting("target"); s && s->value.op == Op::Name) return s->value.name;
  return std::nullopt;
}

bool is_gpu_target(const std::string &name) {
  const Target *t = find_target(name);
  return t && t->kind == TargetKind::gpu;
}

bool targets_gpu(const KernelSpec &k, const std::optional<std::string> &override_name) {
  auto name = kernel_target(k, override_name);
  return name && is_gpu_target(*name);
}

bool tma_zero_fills(bool mosaic_gpu, Role role, bool windowed) {
  return mosaic_gpu && role == Role::in && windowed;
}

} // namespace pipecheck::spec
