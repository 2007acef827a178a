#pragma once
/// What the capacity and tiling rules make of a target of the targets table
/// (spec/targets.hpp): SRAM budgets and block tiling rules.

#include "spec/ir.hpp"
#include "spec/targets.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier::rules {

using spec::find_target;
using spec::Target;
using spec::TargetKind;
using spec::targets;

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
