#pragma once
/// `pipecheck fuzz`: sweep a kernel's param domains (`param bk = 128 in {64,
/// 128, 200}`). Every combination when there are at most `max_configs`, else
/// a seeded sample of that many; for each, the full check and (unless turned
/// off) a run on the CPU against the kernel's intent. A configuration is ok
/// when it verifies and its run passes; a failure shrinks to the smallest
/// failing configuration (each param lowered, in domain order, while the
/// same outcome persists).

#include "executor/run.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "verifier/check.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::sweep {

struct SweepOptions {
  std::size_t max_configs = 64;      ///< all combinations up to this many, else a sample
  std::uint64_t seed = 0;            ///< the sample, and the runs' input data
  std::int64_t scale = 1;            ///< --scale for the runs
  std::optional<std::string> target; ///< --target
  spec::Env overrides;               ///< --set: fixes a param (its domain is not swept)
  bool run = true;                   ///< also run each configuration
  std::uint64_t max_memory_bytes = 4ull << 30;
  /// --shard K/N: only the configurations whose index in the sweep is K mod N.
  std::int64_t shard_index = 0, shard_count = 1;
  /// Configurations checked (and run) at once, each on its own thread; the
  /// result is the same for any count.
  unsigned jobs = 1;
  /// Decided spec-rule queries shared by the configurations' checks;
  /// sweep() makes one for its sweep when absent.
  std::shared_ptr<verifier::rules::QueryCache> query_cache;
  /// verifier::CheckOptions::enumerate_max_points: grids up to this many
  /// points have their spec rules evaluated, not solved (0: always solved).
  std::int64_t enumerate_max_points = 4096;
  /// Called after each configuration (done, total): a progress bar.
  std::function<void(std::size_t, std::size_t)> progress;
};

/// How one configuration came out.
enum class Outcome {
  ok,        ///< verified, and the run passed (or was not asked for)
  violation, ///< the check found a violation (whatever the run did)
  unknown,   ///< the check could not decide
  run_fails, ///< verified, but the run failed: pipecheck or the kernel's intent is wrong
  bad_input, ///< the configuration cannot be checked or run (e.g. a block that does not fit)
};
const char *to_string(Outcome);

struct ConfigResult {
  std::size_t index = 0; ///< its position in the full sweep (lexicographic over the domains)
  spec::Env params;      ///< the swept params' values
  Outcome outcome = Outcome::ok;
  verifier::Status verdict = verifier::Status::unknown;
  std::vector<std::string> rules; ///< the rules of its findings, in order, without repeats
  std::string reason;             ///< the check's reason, or the run's failure
  std::optional<executor::RunStatus> run;
  std::string first_mismatch; ///< the run's account of its first mismatching element, when it has one
  /// The smallest failure only: its failing run's inputs shrunk toward one
  /// non-zero element (executor::shrink_inputs), e.g. "seed 0, dma eager,
  /// 40 runs: o[0, 0] is 0 (reference: 1) when only a[0, 128] = 1 and
  /// b[128, 0] = 1 are non-zero"; empty when there was no mismatch.
  std::string shrunk_input;
  double check_ms = 0, run_ms = 0;
};

/// A configuration rejected before it was checked (it does not validate):
/// no check ran, and its reason is all there is.
bool rejected_unchecked(const ConfigResult &);

/// What makes shards one campaign: `pipecheck merge` combines only results
/// that agree on all of it but the shard.
struct Campaign {
  std::string file;        ///< the .pk file, as given (set by the caller)
  std::string source_hash; ///< FNV-1a 64 of the file's text, 16 hex digits (set by the caller)
  std::uint64_t seed = 0;
  std::size_t max_configs = 0;
  std::int64_t scale = 1;
  std::optional<std::string> target;
  spec::Env sets; ///< --set
  bool run = true;
  std::uint64_t max_memory_bytes = 0;
  std::int64_t shard_index = 0, shard_count = 1;
};

/// FNV-1a 64 of `text` as 16 lower-case hex digits (Campaign::source_hash).
std::string source_hash(const std::string &text);

struct SweepResult {
  std::string kernel;
  Campaign campaign;                 ///< sweep() fills all but file and source_hash
  std::vector<std::string> swept;    ///< the params swept, in declaration order
  std::size_t total_configs = 0;     ///< the size of the full sweep (2^62 when total_capped)
  bool total_capped = false;         ///< the sweep has more than 2^62 configurations
  bool sampled = false;              ///< fewer than all were tried
  std::vector<ConfigResult> configs; ///< those tried (this shard's), in sweep order
  /// The smallest failing configuration found by shrinking the first failure
  /// (absent when every configuration is ok).
  std::optional<ConfigResult> smallest_failure;
  bool all_ok() const;
};

/// A param's domain could not be evaluated, or a --set names no param.
struct SweepError {
  spec::Loc loc;
  std::string message;
};

/// Sweeps `k` (validated). Returns the error instead when a domain does not
/// evaluate to integers.
std::variant<SweepResult, SweepError> sweep(const spec::KernelSpec &k, const SweepOptions &);

/// One configuration, checked and run as sweep() does.
ConfigResult try_config(const spec::KernelSpec &k, const spec::Env &params, const SweepOptions &);

/// The result as one JSON object (the `--format json` of `pipecheck fuzz`).
std::string to_json(const SweepResult &);
/// A table, one line per configuration, and a summary line.
std::string to_text(const SweepResult &);

/// Reads a to_json() result back (to_json(from_json(t)) == t); on failure,
/// why, with the byte offset of a syntax error when there is one.
struct JsonError {
  std::string message;
  std::optional<std::size_t> byte;
};
std::variant<SweepResult, JsonError> from_json(const std::string &text);

/// `pipecheck merge`: the shards of one campaign (`--shard K/N`, in any
/// order, each named for errors) as the campaign run whole: configurations
/// in sweep order, the smallest failure of the shard holding the first
/// failing configuration, shard 0/1. An error says which shard or which
/// setting does not fit: a different campaign, a repeated or missing shard.
std::variant<SweepResult, std::string> merge(const std::vector<std::pair<std::string, SweepResult>> &shards);

} // namespace pipecheck::sweep
