#pragma once
/// The brute-force reference: the same spec-level rules applied concretely to
/// every grid point in order. For small grids only (tests, properties, the
/// benchmark's baseline); the verifier itself never enumerates the grid.

#include "verifier/rules/model.hpp"
#include "verifier/rules/symbolic.hpp"

#include <cstdint>
#include <optional>

namespace pipecheck::verifier::rules {

/// Runs every spec-level rule by enumeration, with the same witnesses as the
/// symbolic checker (each the lexicographically smallest). Gives up with an
/// `unknown` entry when the grid or an output's block count exceeds max_points.
RuleOutcome check_enumerated(const KernelModel &, std::int64_t max_points = 1 << 22);

/// output-not-covered for output `op`, decided by evaluating every grid point
/// of a grid of at most `max_points`: the symbolic checker's first try, since
/// a map that flattens several axes into one block index (`(a * 16 + b) * 40
/// + c`) is a question the solver's quantifiers can take minutes on. nullopt
/// past the limit, or where a block index or guard has no value at a point
/// (open prefetch contents): the solver decides then.
std::optional<RuleOutcome> check_coverage_enumerated(const KernelModel &, std::size_t op,
                                                     std::int64_t max_points);

/// accumulator-carried's empty visits, decided by enumeration on every grid
/// of at most `max_points` (both checkers' verdicts include it): a store of
/// a scratch's value into an output block whose visit neither initializes
/// nor accumulates the scratch, which is reset per block elsewhere, so that
/// the block gets another block's partial result. `unknown` past the limit
/// where such a store exists.
RuleOutcome check_empty_visits(const KernelModel &, std::int64_t max_points);

} // namespace pipecheck::verifier::rules
