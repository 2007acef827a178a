#include "verifier/rules/targets.hpp"

#include <algorithm>

namespace pipecheck::verifier::rules {

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
    // Pallas TPU's check of every block (jax/_src/pallas/mosaic/lowering.py,
    // _check_block_mappings, jax 0.10.2), where a squeezed dim counts as a
    // block of 1. Rank >= 2: the last two block dims divisible by (8, 128) or
    // equal to the array's (docs/pallas/grid_blockspec.md). Rank 1: the whole
    // array, a multiple of 8 * 128 elements, or a power of 2 of at least one
    // lane tile (128 * (32 / bits) elements; a bool is 32 bits there).
    auto size = [&](std::size_t d) { return squeezed[d] ? std::int64_t{1} : block[d]; };
    auto why = [&](std::size_t d) {
      return "block dim " + std::to_string(d) +
             (squeezed[d] ? " is squeezed (a block of 1)" : " is " + std::to_string(block[d]));
    };
    if (rank == 1) {
      const std::int64_t b = size(0);
      const int bits = dt == spec::DType::boolean ? 32 : spec::dtype_bytes(dt) * 8;
      const std::int64_t min_tile = 128 * (32 / bits);
      if (b != shape[0] && b % 1024 != 0 && !(b >= min_tile && (b & (b - 1)) == 0))
        out.push_back({0, b, 1024,
                       why(0) + ": a 1-D block must be the whole array (" + std::to_string(shape[0]) +
                           "), a multiple of 1024, or a power of 2 of at least " + std::to_string(min_tile)});
      return out;
    }
    for (std::size_t k = 0; k < 2 && k < rank; ++k) {
      std::size_t d = rank - 1 - k;
      std::int64_t need = k == 0 ? 128 : 8;
      if (size(d) % need != 0 && size(d) != shape[d])
        out.push_back({d, size(d), need,
                       why(d) + ", neither a multiple of " + std::to_string(need) +
                           " nor the array's extent " + std::to_string(shape[d])});
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
