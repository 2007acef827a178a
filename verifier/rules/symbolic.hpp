#pragma once
/// The spec-level rules as satisfiability queries over all grid points at
/// once (Z3, through verifier/smt), each model a witness. The grid is never
/// enumerated: grid indices are bounded integer variables.

#include "spec/prefetch.hpp"
#include "verifier/rules/model.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace pipecheck::verifier::rules {

/// What a rule pass found: findings (already finalized), and the reasons of
/// every query that could not be decided (timeout, unsupported construct).
struct RuleOutcome {
  std::vector<Finding> findings;
  std::vector<std::string> unknown;
  /// Bad input: an index map or guard that overflows (or divides by zero) at
  /// a grid point the rules evaluate, located at the operator. Non-empty:
  /// the findings are dropped (their witnesses could not be evaluated).
  std::vector<spec::Diagnostic> errors;
  /// Outputs, neither read nor aliased, revisited non-consecutively only
  /// after visits that store nothing into the block (output-revisit holds):
  /// those visits write back undefined data that a later visit's write-back
  /// replaces, which the lowered program's uninitialized-read would report.
  std::vector<std::string> unstored_revisits;
};

/// The decided answers of spec-rule queries (sat with its fully minimized
/// witness, or unsat), keyed by the query's name, its assertions' text and
/// the variables it minimizes: a query asked again, e.g. by another
/// configuration of the same kernel whose constants it does not mention, is
/// answered without solving. An undecided query is never stored. Thread-safe.
class QueryCache {
public:
  struct Answer {
    bool sat = false;
    std::vector<std::vector<std::int64_t>> witness; ///< the minimized points, in the query's order
  };
  std::optional<Answer> find(const std::string &key) const;
  void store(const std::string &key, Answer);
  std::size_t size() const;

private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Answer> answers_;
};

/// Runs every spec-level rule symbolically, `timeout_ms` per query; with a
/// cache, its answers are reused and its new ones stored.
RuleOutcome check_symbolic(const KernelModel &, unsigned timeout_ms, QueryCache *cache = nullptr);

/// The same for a kernel elaborated with open prefetch contents
/// (spec::elaborate_prefetch): every rule must hold for every contents the
/// constraints of `open` allow; a finding names the contents of its witness
/// (in its message and as one witness item per array). `start`: allowed
/// contents the model evaluates with before the first witness.
RuleOutcome check_symbolic(const KernelModel &, unsigned timeout_ms, const spec::PrefetchSpace &open,
                           const spec::PrefetchContents &start);

/// Of the rules above, only the races of a Triton kernel's outputs
/// (parallel-write-conflict) as the solver decides them past the element
/// replay's limits, for every output, whatever its grid: what the property
/// tests hold equal to the replay on small kernels.
RuleOutcome check_triton_races_symbolically(const KernelModel &, unsigned timeout_ms);

/// index-out-of-bounds of the kernel's reads of prefetch arrays
/// (KernelModel::prefetch_reads) at every grid point; with `open`, for every
/// contents its constraints allow (`start`: allowed contents, for the model's
/// env). Neither the enumerator nor the solver's other rules decide it.
RuleOutcome check_prefetch_reads(const KernelModel &, unsigned timeout_ms, const spec::PrefetchSpace *open,
                                 const spec::PrefetchContents *start);

/// output-not-covered of outputs in `memory_space=any` (written by the body's
/// copies alone), decided by enumerating the grid (given contents, up to 2^16
/// points and 2^24 elements, where every copy into one has a value at every
/// point); an aliased output is not checked.
RuleOutcome check_any_output_coverage(const KernelModel &, unsigned timeout_ms);

/// Of the rules above, only index-out-of-bounds of body copy addresses that
/// read open contents (a page table), for every allowed contents.
RuleOutcome check_copy_addresses(const KernelModel &, unsigned timeout_ms, const spec::PrefetchSpace &open,
                                 const spec::PrefetchContents &start);

/// Whether anything of the model but its copy addresses reads open prefetch
/// contents (an effect's guard or mask, an index map, a while loop). Where
/// nothing does, every other rule is the same for every contents, and may
/// be decided by evaluation (rules::check_enumerated).
bool reads_open_contents_outside_copy_addresses(const KernelModel &);

} // namespace pipecheck::verifier::rules
