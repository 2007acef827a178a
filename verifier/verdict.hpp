#pragma once
/// Verdicts and findings: what every checker returns. A verdict carries its
/// reason; `unknown` is never a pass.

#include "spec/diag.hpp"
#include "spec/ir.hpp"
#include "verifier/rule.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pipecheck::verifier {

enum class Status { verified, violation, unknown };
const char *to_string(Status);

/// One named value of a witness: `"revisit": [1, 0, 0]`, `"N": 3`, `"operand": "o"`.
struct WitnessItem {
  std::string key;
  std::variant<std::int64_t, std::vector<std::int64_t>, std::string> value;
  friend bool operator==(const WitnessItem &, const WitnessItem &) = default;
};

/// One event of a counterexample trace (pipelines): a numbered statement
/// instance with its loop iteration and slot.
struct TraceEvent {
  int index = 0;         ///< 1-based position in the trace
  std::string statement; ///< the statement as printed, e.g. "copy_in_start(A[1], X[1])"
  spec::Loc loc;
  std::vector<std::int64_t> iterations; ///< enclosing loop variables' values, outermost first
  std::optional<std::int64_t> slot;
  /// The index of the program's top-level statement it belongs to (-1: not known).
  int top_level = -1;
  bool anchor = false; ///< the event the finding is anchored at
  /// The program's buffers its statement names (refs and whole-buffer
  /// names), in order of appearance, without repeats.
  std::vector<std::string> buffers;
  /// A kernel's lowered program: the grid coordinates of the step that issued
  /// it (empty for pipelines).
  std::vector<std::int64_t> grid_point;
  friend bool operator==(const TraceEvent &, const TraceEvent &) = default;
};

struct Witness {
  std::vector<WitnessItem> items;
  std::vector<TraceEvent> trace;
  /// The value of item `key` when it holds a T, else nullptr.
  template <class T> const T *get(const std::string &key) const {
    for (const auto &it : items)
      if (it.key == key) return std::get_if<T>(&it.value);
    return nullptr;
  }
  friend bool operator==(const Witness &, const Witness &) = default;
};

/// A rule violation, anchored at a source location, with a concrete witness.
struct Finding {
  Rule rule = Rule::slot_race; ///< its id: verifier::id(rule)
  spec::Severity severity = spec::Severity::error;
  spec::Loc loc;
  std::string message;
  Witness witness;
  /// Located explanations printed as `note:` lines (witness in words).
  std::vector<spec::Diagnostic> notes;
  /// A lowered program's uninitialized-read that is the write-back of a
  /// slot box nothing wrote (a visit that stores nothing into its block),
  /// not undefined data a store put there: what output-revisit's exception
  /// excuses when a later visit replaces the block.
  bool unwritten_write_back = false;
};

/// The result of checking one kernel or pipeline.
struct Verdict {
  Status status = Status::unknown;
  std::vector<Finding> findings; ///< non-empty exactly when status == violation
  std::string reason;            ///< why unknown (or what was proven, for verified)
  double seconds = 0;
  std::optional<std::int64_t> sram_bytes; ///< a kernel's SRAM footprint (lower bound)
  /// The target's SRAM budget that footprint is held against (sram-capacity),
  /// when the kernel names a known target.
  std::optional<std::int64_t> sram_budget_bytes;
  /// Bad input the checker found (e.g. an index map that overflows at a grid
  /// point, a division by a param --set binds to 0): located errors, exit 3.
  /// Non-empty: status is unknown and there are no findings.
  std::vector<spec::Diagnostic> errors;
  /// The spec rules' RuleOutcome::unstored_revisits: outputs whose write-backs
  /// of undefined data a later visit replaces (the lowered program's
  /// uninitialized-read on them is expected).
  std::vector<std::string> unstored_revisits;
};

} // namespace pipecheck::verifier
