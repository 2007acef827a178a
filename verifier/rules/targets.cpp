#include "verifier/rules/targets.hpp"

#include <algorithm>

namespace pipecheck::verifier::rules {

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
      {"tpu_v4", TargetKind::tpu, 16 * MiB, 16 * MiB},
      {"tpu_v5e", TargetKind::tpu, 16 * MiB, 128 * MiB},
      {"tpu_v5p", TargetKind::tpu, 16 * MiB, 64 * MiB},
      {"tpu_v6e", TargetKind::tpu, 32 * MiB, 128 * MiB},
      // Hopper (compute capability 9.0): at most 227 KiB of shared memory per
      // thread block (opt-in; 228 KiB per SM less 1 KiB the runtime reserves
      // per block) — CUDA C++ Programming Guide, "Technical Specifications per
      // Compute Capability"
      // (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#features-and-technical-specifications-technical-specifications-per-compute-capability),
      // https://docs.nvidia.com/cuda/hopper-tuning-guide/, and Mosaic GPU's
      // own default when no device can be queried (jax-ml/jax
      // jax/experimental/mosaic/gpu/core.py: `227 * 1024`). H200 has the same
      // GH100 SM, so the same limit.
      {"h100", TargetKind::gpu, 227 * KiB, 227 * KiB},
      {"h200", TargetKind::gpu, 227 * KiB, 227 * KiB},
  };
  return t;
}

const Target *find_target(const std::string &name) {
  for (const auto &t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

std::int64_t sram_budget(const Target &t, std::optional<std::int64_t> vmem_limit_bytes) {
  if (t.kind == TargetKind::tpu && vmem_limit_bytes)
    return std::min(*vmem_limit_bytes, t.physical_sram_bytes);
  return t.default_sram_bytes;
}

std::vector<TilingViolation> tiling_violations(const Target &t, const std::vector<std::int64_t> &shape,
                                               const std::vector<std::int64_t> &block,
                                               const std::vector<bool> &squeezed, spec::DType dt) {
  std::vector<TilingViolation> out;
  const std::size_t rank = shape.size();
  if (t.kind == TargetKind::tpu) {
    // Pallas TPU: the last two block dims divisible by (8, 128) or equal to
    // the array's (docs/pallas/grid_blockspec.md; pallas-facts.md §1).
    for (std::size_t k = 0; k < 2 && k < rank; ++k) {
      std::size_t d = rank - 1 - k;
      if (squeezed[d]) continue;
      std::int64_t need = k == 0 ? 128 : 8;
      if (block[d] % need != 0 && block[d] != shape[d])
        out.push_back({d, block[d], need,
                       "block dim " + std::to_string(d) + " is " + std::to_string(block[d]) +
                           ", neither a multiple of " + std::to_string(need) + " nor the array's extent " +
                           std::to_string(shape[d])});
    }
    return out;
  }
  // Mosaic GPU TMA (mosaic/gpu/launch_context.py): the minor dim spans a
  // multiple of 16 bytes and no dim exceeds 256 elements per copy.
  if (rank > 0 && !squeezed[rank - 1]) {
    std::int64_t bytes = block[rank - 1] * spec::dtype_bytes(dt);
    if (bytes % 16 != 0)
      out.push_back(
          {rank - 1, block[rank - 1], 16 / spec::dtype_bytes(dt),
           "the minor block dim spans " + std::to_string(bytes) + " bytes, not a multiple of 16 (TMA)"});
  }
  for (std::size_t d = 0; d < rank; ++d)
    if (!squeezed[d] && block[d] > 256)
      out.push_back({d, block[d], 256,
                     "block dim " + std::to_string(d) + " is " + std::to_string(block[d]) +
                         " elements, more than the 256 a TMA copy allows"});
  return out;
}

} // namespace pipecheck::verifier::rules
