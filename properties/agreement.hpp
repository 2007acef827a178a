#pragma once
/// The agreement property: `check` and `run` tell one story. On generated
/// pipelines and kernels (correct ones and mutations of them):
///   (a) every executor failure, in any DMA mode (eager, on_wait, random with
///       three seeds), has a verifier finding;
///   (b) every unit the verifier calls `verified` passes `run` in every mode;
///   (c) every finding's witness reproduces: a directed concrete check at the
///       witness binding (a pipeline's trip count; a kernel's grid, through
///       the enumerated spec rules or the lowered program's concrete race
///       check at the same grid point) shows the same rule on the same line.
/// Units the verifier calls `unknown` are counted, not judged.

#include "spec/ir.hpp"

#include <rapidcheck.h>

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace pipecheck::properties {

/// Small pipelines as `.pk` text (pipeline `p`, `param N >= 1`, hbm arrays of
/// N rows): a slot ring of 1-3 input slots with prefetch distance 0-2, 1-2
/// output slots whose write-back is waited at once or one iteration later, a
/// plain or an accumulating compute; correct, or mutated: a wait dropped or
/// moved, a slot index changed, an hbm index shifted (also to -1 and past the
/// end), a ring made smaller, a delay changed, an accumulator not reset. A
/// third write their results back in place, into the array they read; a
/// third of the others start their result undefined (`B[...] = undefined`,
/// a kernel's unaliased output), mutated to leave a row of it unwritten
/// (not with `mutated = false`: such a result grows with N, which makes the
/// all-N verdict `unknown`).
/// `mutated = false`: only the correct programs.
rc::Gen<std::string> agreement_pipeline_text(bool mutated = true);

/// Small kernels as `.pk` text (kernel `k`): grids of rank 1-3, dividing and
/// ragged shapes, `buffered=` counts 1-3, index maps that revisit (`//`, `%`,
/// constants, reversed, offset), bodies that copy, accumulate, or init and
/// accumulate (guarded by `when`), optionally an input written and aliased.
rc::Gen<std::string> agreement_kernel_text();

/// The trip counts N at which a pipeline is run (every one, every mode).
inline constexpr std::int64_t kAgreementMaxN = 3;

/// What one unit showed.
struct Agreement {
  /// "verified", "violation", "unknown", or "skip" (the text does not
  /// validate, or the unit cannot run at all: bad input on every binding).
  std::string verdict;
  /// Empty when (a)-(c) hold; else one line per broken clause.
  std::vector<std::string> disagreements;
  int runs = 0;                          ///< executor runs made
  int failed_runs = 0;                   ///< of which failed
  int findings = 0;                      ///< verifier findings
  int reproduced = 0;                    ///< findings whose witness reproduced
  int shown_by_run = 0;                  ///< findings whose witness binding also fails `run`
  bool unknown_with_failing_run = false; ///< `unknown`, and some run failed
  /// Findings whose witness did not reproduce in the directed run (each
  /// also a disagreement), as "RULE@LINE: why": property 4's count, goal 0.
  std::vector<std::string> not_reproduced;
};

/// Checks, runs and compares one pipeline or kernel given as `.pk` text
/// (one unit; else "skip"). A pipeline with one symbolic param runs at
/// 1..kAgreementMaxN; one without runs once.
Agreement check_agreement(const std::string &text);
/// The same for a validated unit.
Agreement check_agreement(const std::variant<spec::KernelSpec, spec::Program> &unit);

/// Tallies of many units, and the texts that disagreed.
struct AgreementTally {
  std::int64_t cases = 0, verified = 0, violation = 0, unknown = 0, skipped = 0;
  std::int64_t runs = 0, failed_runs = 0, findings = 0, reproduced = 0, shown_by_run = 0;
  std::int64_t unknown_with_failing_run = 0;
  std::vector<std::pair<std::string, Agreement>> disagreements;
  /// Every finding not reproduced, with its unit's text.
  std::vector<std::pair<std::string, std::string>> not_reproduced;
  void add(const std::string &text, const Agreement &);
  /// One line of counts, e.g. "2000 cases: 900 verified, 1000 violation, ...".
  std::string summary() const;
};

/// Generates `cases` units from `gen` (deterministically from `seed`, sizes
/// cycling 0..99 as RapidCheck does) and tallies their agreement; `each`, if
/// given, sees every unit and its outcome.
AgreementTally run_agreement(const rc::Gen<std::string> &gen, std::int64_t cases, std::uint64_t seed,
                             const std::function<void(const std::string &, const Agreement &)> &each = {});

} // namespace pipecheck::properties
