#pragma once
/// The pipelining guide's performance model (`pipecheck model`): a copy of b
/// bytes between HBM and SRAM costs alpha + b / beta, compute of f flops
/// costs f / F, and a pipeline overlaps the copies with the compute.
///
/// The model does not re-derive the schedule: it lowers the kernel
/// (spec/lower.hpp) and walks the lowered program with the one Program
/// stepper (spec/step.hpp), timing every event. So a block is copied exactly
/// where the lowered schedule copies it (only when it changes between
/// consecutive grid points), and deeper buffering, revisits and the GPU
/// pipeline shape the prediction as they shape the run. Timing rules:
/// - copies share the bandwidth: a copy issued at time t completes at
///   max(t + alpha, end of the previous transfer) + b / beta (latencies of
///   copies in flight overlap; their bytes do not);
/// - a compute statement starts when the program reaches it and the compute
///   unit is free, and takes its flops / F; a wgmma is issued asynchronously
///   onto the same unit;
/// - a wait blocks until the copies (or wgmmas) it retires are complete.
///
/// FLOPs are counted per body statement from the body's types
/// (spec/typecheck.hpp): dot is 2 x M x N x K; every other arithmetic
/// operation, comparison, select and transcendental is one per result
/// element; a reduction is one per input element; `+=` adds one per element
/// of the value; loads, stores, casts, reshapes, broadcasts, iota and
/// literals count nothing.

#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/lower.hpp"
#include "spec/step.hpp"
#include "spec/targets.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::perf {

/// The guide's three numbers.
struct Machine {
  double alpha_s = 0;          ///< latency of one copy
  double beta_bytes_per_s = 0; ///< HBM <-> SRAM bandwidth
  double flops_per_s = 0;      ///< F
};
/// The numbers of a target of the targets table.
Machine machine_of(const spec::Target &);

/// The flops of one execution of a compute statement (or wgmma), given the
/// buffer refs it reads and writes (empty for a wgmma). A kernel's counts
/// come from its body by statement location (the lowered program keeps the
/// body's locations); a pipeline's from the refs (pipeline_flops).
using FlopsOf = std::function<std::int64_t(const spec::Stmt &, const std::vector<spec::StepRef> &reads,
                                           const std::optional<spec::StepRef> &write)>;

/// A pipeline's compute statement: per element of the written box, one flop
/// per arithmetic node of the value (and one for `+=`); a dot 2 x K per
/// element, K the last extent of its first read.
std::int64_t pipeline_flops(const spec::Stmt &, const std::vector<spec::StepRef> &reads,
                            const std::optional<spec::StepRef> &write);

/// The flops of each statement of a kernel body (keyed by line and column),
/// counted as the header says. `overrides` bind the params as for lowering.
std::map<std::pair<int, int>, std::int64_t> body_flops(const spec::KernelSpec &, const spec::Env &overrides);

/// One step of the timeline: when its compute ran.
struct StepTime {
  double compute_start = 0, compute_end = 0;
};

/// What one buffer (a kernel operand's window) moved.
struct Traffic {
  std::string buffer;
  std::int64_t copies_in = 0, copies_out = 0;
  std::int64_t bytes_in = 0, bytes_out = 0;
};

/// The timed walk of a lowered program.
struct Timing {
  double seconds = 0;         ///< until the last copy or compute completes
  double compute_seconds = 0; ///< sum of compute time (the compute unit busy)
  double copy_seconds = 0;    ///< sum of bytes / beta over every copy
  double first_compute = 0;   ///< start of the first compute (the start-up bubble)
  double last_compute_end = 0;
  std::int64_t flops = 0;
  std::int64_t copies = 0;
  /// Per buffer that any copy touched, in buffer order: a copy counts for its
  /// SRAM side (the window) and, when the other side is an hbm buffer, for
  /// that buffer too (a body DMA's memory_space=any operand).
  std::vector<Traffic> traffic;
  /// Per grid step (the first kTimelineSteps): when its compute ran.
  std::vector<StepTime> steps;
  static constexpr std::size_t kTimelineSteps = 1024;
};

/// Walks `lowered.program` with the stepper and times it on `m`. Throws
/// spec::StepError where the program cannot be walked.
Timing simulate(const spec::Lowered &, const FlopsOf &, const Machine &);
/// The same for a pipeline, its params bound in `env`; its steps (for the
/// timeline) are its compute statements in execution order.
Timing simulate(const spec::Program &, const spec::Env &env, const FlopsOf &, const Machine &);

enum class Bound { compute, memory };
const char *to_string(Bound);

/// What the model says of one kernel operand.
struct OperandCost {
  std::string name;
  spec::Role role = spec::Role::in;
  std::int64_t block_bytes = 0; ///< one copy
  std::int64_t array_bytes = 0;
  std::int64_t copies = 0; ///< copies in plus copies out (a block copied when it changes)
  std::int64_t bytes = 0;  ///< bytes moved in and out
  double seconds = 0;      ///< bytes / beta
  /// A memory_space=any operand the body copies by hand (async_copy,
  /// sync_copy): copies and bytes are those copies' (block_bytes is 0).
  bool body_copies = false;
};

/// A variant of the kernel the model tried (a larger block, deeper buffering).
struct Alternative {
  std::string change; ///< "--set bm=512", "buffer_count=3 on x", "max_concurrent_steps=3"
  bool ok = false;    ///< false: it could not be modelled (`why` says why)
  std::string why;    ///< set when !ok
  double seconds = 0; ///< its predicted time
  std::int64_t sram_bytes = 0;
  bool fits = false; ///< sram_bytes within the target's budget
};

/// The model of one kernel on one target.
struct Model {
  std::string kernel;    ///< the unit's name
  bool pipeline = false; ///< a hand-written pipeline: steps are compute statements, no alternatives
  std::string target;
  Machine machine;
  std::int64_t steps = 0;
  std::int64_t flops = 0;      ///< all steps
  std::int64_t flops_step = 0; ///< flops / steps, rounded down
  std::int64_t bytes = 0;      ///< all copies
  double seconds = 0;          ///< predicted total
  double compute_seconds = 0;  ///< flops / F
  double copy_seconds = 0;     ///< bytes / beta
  double startup_seconds = 0;  ///< before the first compute
  double drain_seconds = 0;    ///< after the last compute
  double utilization = 0;      ///< compute_seconds / seconds
  double bubble_fraction = 0;  ///< (startup + drain) / seconds
  /// memory when copy_seconds > compute_seconds, or when latency_bound.
  Bound bound = Bound::compute;
  /// The steady state (between the bubbles) takes over 1.5x the larger of
  /// copy_seconds and compute_seconds: the copies' alpha is not hidden (the
  /// guide's latency-bound case, which more buffers fix).
  bool latency_bound = false;
  /// Windowed ins and outs, and memory_space=any ones the body copies, in declaration order.
  std::vector<OperandCost> operands;
  std::optional<std::size_t> dominant;   ///< the operand moving the most bytes (memory-bound only)
  std::int64_t sram_bytes = 0;           ///< the footprint (verifier/rules sram_bytes)
  std::int64_t sram_budget = 0;          ///< the target's budget
  std::vector<Alternative> alternatives; ///< memory-bound only
  std::vector<StepTime> timeline;        ///< the first steps' compute
};

struct ModelOptions {
  spec::Env overrides;               ///< --set
  std::optional<std::string> target; ///< --target; else the spec's `target =`; else tpu_v5e
  std::optional<Machine> machine;    ///< replaces the target's numbers (tests)
  bool alternatives = true;          ///< try larger blocks and deeper buffering when memory-bound
};

/// The target the model uses when neither --target nor `target =` names one.
inline constexpr const char *kDefaultTarget = "tpu_v5e";

struct ModelResult {
  std::optional<Model> model;
  std::vector<spec::Diagnostic> errors; ///< bad input (located), when no model
  std::string unknown;                  ///< why there is no model otherwise
};

/// A time as `pipecheck model` prints it ("12.5 us", "3.40 ms").
std::string format_seconds(double);
/// A fraction as a percentage, two significant digits below 1%.
std::string format_percent(double);
/// The model in one line: "12.5 us predicted on tpu_v5e (alpha 1.0 us,
/// beta 819 GB/s, F 197 TFLOP/s): memory-bound, x moves the most bytes;
/// utilization 4.1%, start-up and drain bubbles 9.0%".
std::string summary(const Model &);

/// Models a validated kernel: lowers it, walks the lowered program, and
/// reports time, bound, bubbles, utilization, the dominating operand and
/// what a larger block or deeper buffering would buy.
ModelResult model_kernel(const spec::KernelSpec &, const ModelOptions &);

/// Models a validated pipeline as written: every param bound (--set binds a
/// symbolic one), its sram/smem buffers as the operands, their bytes as the
/// SRAM footprint against the target's default budget. A pipeline has no
/// `target =`: --target, else kDefaultTarget. No alternatives are tried.
ModelResult model_program(const spec::Program &, const ModelOptions &);

} // namespace pipecheck::perf
