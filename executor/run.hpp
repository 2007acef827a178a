#pragma once
/// `pipecheck run`: execute a kernel or pipeline and compare it with its
/// intent.
///
/// - A KernelSpec's intent is the oracle (executor/oracle.hpp); what runs is
///   the Program spec::lower emits for it, on the CPU runner.
/// - A hand-written Program's intent is the same program run with ideal,
///   synchronous copies (DmaMode::synchronous: every copy and wgmma completes
///   where it starts); what runs is the program in the chosen DmaMode.
///
/// A run passes when every output equals its intent — exactly, or within a
/// stated relative tolerance when the unit accumulates floats (dot, sum,
/// `+=`, wgmma) — and holds no poison. A kernel with a `reference:` also
/// needs its oracle to match the reference (executor/reference.hpp), within
/// a tolerance by dtype and reduction length: a body wrong in itself gives
/// the same wrong answer pipelined and per grid point. Outputs and scratch start as poison,
/// inputs as seeded random data, slot buffers as poison, `acc` as zeros.

#include "executor/events.hpp"
#include "executor/inputs.hpp"
#include "executor/program_runner.hpp"
#include "executor/tensor.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/lower.hpp"

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::executor {

/// pass: equal to the intent; fail: a mismatch, poison, or a fault of the
/// program (e.g. a wait that would hang); bad_input: the unit cannot run as
/// written (unbound param, ill-typed body, over --max-memory; exit 3);
/// error: the environment cannot run it (e.g. a lowered program whose buffers
/// do not match its kernel's operands).
enum class RunStatus { pass, fail, bad_input, error };
const char *to_string(RunStatus);

/// A device that runs a Program in place of the CPU runner (`run --backend
/// cuda`: executor/cuda_runner). The run's inputs, intent and comparison are
/// the CPU runner's; only the execution moves.
class ProgramDevice {
public:
  virtual ~ProgramDevice() = default;
  struct Outcome {
    enum class Kind {
      ran,       ///< it ran; the hbm buffers hold its results
      fault,     ///< the program faulted on the device (a __trap: a wait with nothing outstanding, ...)
      cannot_run ///< the device cannot run it (a construct it lacks, a layout too large, no device)
    } kind = Kind::cannot_run;
    std::string message; ///< why, for fault and cannot_run
    double seconds = 0;  ///< the device run's wall time
  };
  /// The label of a run in reports ("cuda", "cuda adversarial").
  virtual std::string name(bool adversarial) const = 0;
  /// Runs `program` (for a kernel, `lowered` is its lowering, whose CTA
  /// axes the device may use) with every param bound in `env`. In
  /// `buffers` the hbm buffers hold the run's initial data (outputs
  /// poison) and are left as the run ends; the device keeps its on-chip
  /// buffers itself. `adversarial`, `seed`: the device's adversarial mode.
  virtual Outcome run(const spec::Program &program, const spec::Lowered *lowered, const spec::Env &env,
                      const BufferMap &buffers, bool adversarial, std::uint64_t seed) const = 0;
};

struct RunOptions {
  DmaMode mode = DmaMode::eager;
  std::uint64_t seed = 0; ///< input data, and the random mode's schedule
  std::int64_t scale = 1; ///< kernels: divides array and block dims (see oracle.hpp)
  /// Everything a run allocates (arrays, the lowered program, copy records,
  /// values, timelines), estimated up front: over it, the run is bad input.
  std::uint64_t max_memory_bytes = 4ull << 30;
  spec::Env overrides;                        ///< --set NAME=VALUE (also binds symbolic params)
  std::optional<std::string> target;          ///< --target, passed to spec::lower
  int dma_threads = 2;                        ///< DMA worker threads
  std::size_t max_events = 100000;            ///< the timeline keeps the first ones
  std::uint64_t max_event_bytes = 4ull << 20; ///< ... within this many heap bytes per run
  /// `--inputs DIR`: a kernel's every input operand NAME is read from
  /// DIR/NAME.npy (executor/npy.hpp), which must have the operand's dtype
  /// and (scaled) shape; a pipeline's HBM buffer NAME starts as DIR/NAME.npy
  /// where that file exists. A missing or mismatching file is bad input.
  std::optional<std::string> inputs_dir;
  /// `--save DIR` (created if missing): a kernel's inputs as DIR/NAME.npy,
  /// the first run's outputs as DIR/NAME.npy, the oracle's as
  /// DIR/NAME.oracle.npy and the reference's as DIR/NAME.reference.npy; a
  /// pipeline's HBM buffers as they start (DIR/NAME.npy) and after its first
  /// run (DIR/NAME.out.npy). `--inputs DIR` then repeats the run. A file
  /// that cannot be written is an error (exit 4).
  std::optional<std::string> save_dir;
  /// `--inputs-kind`: the data generated inputs hold (executor/inputs.hpp).
  /// With `special` (or `--inputs`, whose files may hold NaN) a NaN both
  /// sides agree on is a value, not poison: an output element is then
  /// reported unwritten from the oracle's record of the body's stores.
  InputKind input_kind = InputKind::uniform;
  /// A kernel's input operands' data by name, overriding generated or read
  /// inputs (same dtype and scaled shape; not owned). shrink_inputs' trials.
  const std::map<std::string, const HostArray *> *input_data = nullptr;
  /// Runs the program on this device instead of the CPU runner (not owned).
  /// `mode` then means: random, an adversarial device run with `seed`; any
  /// other, a plain one. run_all_modes makes one plain device run and
  /// adversarial ones with seeds seed and seed + 1.
  const ProgramDevice *device = nullptr;
};

/// Where an output first differs from its intent.
struct Mismatch {
  std::string array;               ///< the output operand (kernel) or hbm buffer (pipeline)
  Shape element;                   ///< the element's index
  std::optional<Shape> block;      ///< its block index (kernels)
  std::optional<Shape> grid_point; ///< the first grid point writing that block (kernels)
  double expected = 0;
  double actual = 0;
  bool is_poison = false;          ///< actual is poison
  bool expected_is_poison = false; ///< the intent itself is poison there
  std::int64_t count = 0;          ///< mismatching elements in this array
  /// What was compared: "oracle" vs "pipelined run" (a kernel's run),
  /// "reference" vs "oracle" (a kernel's body against its `reference:`),
  /// "synchronous run" vs "run" (a pipeline).
  std::string expected_from = "oracle", actual_from = "pipelined run";
  /// Where either side holds poison: what it means ("was never written",
  /// "reads memory nothing wrote: ..."); empty otherwise.
  std::string poison;
  /// The reference comparison's, element by element (reference.hpp's
  /// element_tolerance): the absolute tolerance at this element, and the
  /// reference's error bound there (nullopt where it has none: the relative
  /// tolerance applied).
  std::optional<double> tolerance;
  std::optional<double> bound;
  /// An integer output compared exactly where the reference's bound is not
  /// finite (an argmax within its error of a tie: either index may be right).
  bool unbounded_integer = false;
  /// The element that differs most for its tolerance, when it is not this
  /// one: by how many times its tolerance, and that tolerance.
  std::optional<Shape> worst;
  double worst_ratio = 0;
  double worst_tolerance = 0;
};

struct RunResult {
  RunStatus status = RunStatus::error;
  std::string unit;
  DmaMode mode = DmaMode::eager;
  std::uint64_t seed = 0;
  std::string reason; ///< one line: why it failed / could not run
  spec::Loc loc;      ///< for bad_input and faults: where (line 0: none)
  std::optional<Mismatch> mismatch;
  /// Relative, the same at every element; nullopt: compared exactly, or
  /// (against the reference) element by element: Mismatch::tolerance.
  std::optional<double> tolerance;
  spec::Env params;          ///< the param values it ran with
  std::vector<Event> events; ///< the pipelined run's timeline
  bool events_truncated = false;
  std::vector<std::string> notes;
  std::int64_t bytes_copied = 0;
  std::int64_t copies = 0;
  double seconds = 0; ///< the pipelined run's wall time
  /// The up-front estimate of the bytes this run allocates (compared with
  /// max_memory_bytes); 0 when it stopped before estimating.
  std::uint64_t memory_estimate = 0;
  /// A device run (RunOptions::device): its label, shown instead of the mode.
  std::string backend;
};

struct RunReport {
  RunStatus status = RunStatus::error; ///< the worst of the runs
  std::string unit;
  std::vector<RunResult> runs;
  std::uint64_t memory_estimate = 0; ///< the up-front estimate for all its runs
};

/// One run of a kernel (lowered) in options.mode against the oracle.
RunResult run(const spec::KernelSpec &, const RunOptions &);
/// One run of a pipeline in options.mode against its synchronous run.
RunResult run(const spec::Program &, const RunOptions &);
/// eager, on_wait, and random with seeds seed, seed+1, seed+2 (the oracle is
/// computed once); fails if any run fails. Stops early on bad_input/error.
RunReport run_all_modes(const spec::KernelSpec &, const RunOptions &);
RunReport run_all_modes(const spec::Program &, const RunOptions &);

/// `run --shrink`: a failing kernel run's inputs shrunk toward a minimal
/// failing input, ideally one non-zero element, which localizes the bug.
struct InputShrink {
  bool shrunk = false; ///< the failure reproduced on smaller inputs
  int runs = 0;        ///< kernel runs it took
  /// The input elements left non-zero, with their values (all of them when
  /// there are at most 8), and how many there are in all.
  std::vector<std::pair<std::string, Shape>> elements;
  std::vector<double> values;
  std::int64_t nonzero = 0;
  std::optional<Mismatch> mismatch; ///< the failure on the shrunk input
  /// "o[3, 200] is 0 (reference: 1) when only x[3, 1224] = 1"; or why it
  /// could not shrink.
  std::string message;
};

/// Shrinks the inputs of `failing` (a run of `k` with `opts`, in its mode and
/// seed, that failed with a mismatch) while a run still fails on the same
/// output and comparison: every input zero first, then each input zeroed
/// whole, then halves of the non-zero ranges zeroed, upper first (delta debugging: about
/// two runs per halving), and the last few elements set to 1. At most
/// `max_runs` runs; deterministic (no randomness beyond `opts.seed`).
InputShrink shrink_inputs(const spec::KernelSpec &k, const RunOptions &opts, const RunResult &failing,
                          int max_runs = 128);

/// A run's label in reports: its DMA mode ("random seed=3"), or its device
/// run's ("cuda adversarial seed=3").
std::string run_label(const RunResult &);

/// Human-readable report: one line per run, and for a failure where and why.
void print_report(std::ostream &, const RunReport &);
std::string format_report(const RunReport &);

} // namespace pipecheck::executor
