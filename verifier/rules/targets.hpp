#pragma once
/// The hardware targets the capacity and tiling rules know: SRAM budgets and
/// block tiling rules, each figure with its public source (targets.cpp).

#include "spec/ir.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier::rules {

enum class TargetKind { tpu, gpu };

struct Target {
  std::string name; ///< "tpu_v5e", "h200", ...
  TargetKind kind = TargetKind::tpu;
  /// TPU: the default scoped VMEM limit; GPU: shared memory per block (opt-in maximum).
  std::int64_t default_sram_bytes = 0;
  /// TPU: physical VMEM per TensorCore (vmem_limit_bytes may raise the scoped
  /// budget up to this); GPU: equal to default_sram_bytes.
  std::int64_t physical_sram_bytes = 0;
};

/// Every known target, in a stable order.
const std::vector<Target> &targets();
/// The target named `name`, or nullptr.
const Target *find_target(const std::string &name);

/// The SRAM budget on `t` given a kernel's `vmem_limit_bytes` (TPU only:
/// raises the scoped budget, clamped to the physical VMEM).
std::int64_t sram_budget(const Target &t, std::optional<std::int64_t> vmem_limit_bytes);

/// One violated tiling constraint of a block on a target.
struct TilingViolation {
  std::size_t dim = 0;       ///< the array dim
  std::int64_t block = 0;    ///< the block size along it
  std::int64_t required = 0; ///< the multiple (or maximum) it needed
  std::string message;
};

/// Checks a block against the target's tiling rule: TPU (8, 128) on the last
/// two dims unless equal to the array's; Mosaic GPU TMA: the minor dim a
/// multiple of 16 bytes, at most 256 elements per dim. Squeezed dims are exempt.
std::vector<TilingViolation> tiling_violations(const Target &, const std::vector<std::int64_t> &shape,
                                               const std::vector<std::int64_t> &block,
                                               const std::vector<bool> &squeezed, spec::DType);

} // namespace pipecheck::verifier::rules
