#pragma once
/// The one targets table: every hardware target pipecheck knows (TPU
/// generations, Hopper GPUs) and what it knows of each. The CLI's --target,
/// validation of `target =`, the lowering's GPU choice and the capacity and
/// tiling rules all read it; no other code spells a target name.

#include "spec/ir.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::spec {

enum class TargetKind { tpu, gpu };

struct Target {
  std::string name; ///< "tpu_v5e", "h200", ...
  TargetKind kind = TargetKind::tpu;
  /// TPU: the default scoped VMEM limit; GPU: shared memory per block (opt-in maximum).
  std::int64_t default_sram_bytes = 0;
  /// TPU: physical VMEM per TensorCore (vmem_limit_bytes may raise the scoped
  /// budget up to this); GPU: equal to default_sram_bytes.
  std::int64_t physical_sram_bytes = 0;
  /// The pipelining guide's performance model (pipecheck model): a copy of b
  /// bytes between HBM and SRAM costs alpha_s + b / hbm_bytes_per_s; compute
  /// of f flops costs f / flops_per_s (peak dense bf16 matrix FLOP/s).
  double alpha_s = 0;
  double hbm_bytes_per_s = 0;
  double flops_per_s = 0;
};

/// Every known target, in a stable order.
const std::vector<Target> &targets();
/// The target named `name`, or nullptr.
const Target *find_target(const std::string &name);
/// "tpu_v4, tpu_v5e, ...": the known names, for error messages.
std::string target_names();
/// "unknown target 'NAME'; expected one of tpu_v4, ...".
std::string unknown_target_message(const std::string &name);

/// True when the kernel says `backend = triton` (pallas_call's
/// compiler_params=pltriton.CompilerParams(...)): every grid point is its own
/// program, all of them concurrent, and a block is a view of the HBM array
/// that loads and stores reach directly, with no copy in or write-back
/// (docs/language.md, "The Triton backend").
bool uses_triton(const KernelSpec &);

/// The name of the target a kernel is checked, lowered or run for: the
/// override (--target) if any, else the spec's `target =` setting, else
/// none; none for a Triton kernel (the targets' rules are Mosaic's).
std::optional<std::string> kernel_target(const KernelSpec &, const std::optional<std::string> &override_name);
/// True for a known GPU target name (h100, h200).
bool is_gpu_target(const std::string &name);
/// True when that target is a known GPU (the kernel lowers to Mosaic GPU).
bool targets_gpu(const KernelSpec &, const std::optional<std::string> &override_name);
/// True when a partial block of an operand holds zeros past its array, not
/// undefined data: a pipelined input of a Mosaic GPU kernel (`mosaic_gpu`:
/// targets_gpu), which Pallas fetches by TMA (copy_gmem_to_smem,
/// OOBFillMode.ZEROS; spec::Copy::zeros). The lowering, the oracle and the
/// spec rules all ask this.
bool tma_zero_fills(bool mosaic_gpu, Role role, bool windowed);

} // namespace pipecheck::spec
