#pragma once
/// The race-checker property: on random small pipelines the all-N verdict
/// agrees with exhaustive concrete checking, and every witness reproduces on
/// the happens-before graph.

#include <rapidcheck.h>

#include <string>

namespace pipecheck::properties {

/// Random small pipelines as `.pk` text (pipeline name `p`, `param N >= 1`):
/// 1-3 input slots, prefetch distance 0-3, 1-2 output slots, write-back waited
/// at once or one iteration later, and mutations of the correct program
/// (a dropped, doubled or misplaced wait, a wrong slot, a missing drain).
rc::Gen<std::string> small_pipeline_text();

/// Checks `text` for all N and concretely for N = 1..8 (and 9..16 when the
/// all-N verdict is `verified`). Returns "" when they agree and every witness
/// reproduces on the graph at its N, "skip" when the text does not validate,
/// else what differs.
std::string compare_all_n_with_exhaustive(const std::string &text);

/// The all-N verdict of `text` ("verified", "violation", "unknown" or "skip").
std::string all_n_status(const std::string &text);

} // namespace pipecheck::properties
