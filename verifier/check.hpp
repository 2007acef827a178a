#pragma once
/// The verifier's entry point: one verdict per kernel or pipeline.

#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/prefetch.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier {

namespace rules {
class QueryCache;
}

struct CheckOptions {
  std::optional<std::string> target; ///< --target: overrides a spec's `target =`
  spec::Env overrides;               ///< --set NAME=VALUE
  unsigned timeout_ms = 10000;       ///< per solver query
  std::int64_t n_max = 8;            ///< concrete trip counts checked on the HB graph
  /// Check a kernel of more than 4096 grid steps on its grid cut when it has
  /// one (docs/lowering.md, "Large grids: the grid cut"); off: walk every step.
  bool grid_cut = true;
  /// Decided spec-rule queries shared by several checks (fuzz: one per
  /// sweep); nullptr: every query is solved.
  std::shared_ptr<rules::QueryCache> query_cache;
  /// A kernel of at most this many grid points has its spec-level rules
  /// decided by evaluating them at every point (verifier/rules/enumerate.hpp:
  /// exact on a concrete grid, the same findings and witnesses) instead of
  /// by solver queries; 0: always the solver.
  std::int64_t enumerate_max_points = 4096;
  /// The events one concrete run of a pipeline may take (every param bound,
  /// or each trip count the all-N proof runs); past it the run is unknown,
  /// unless it found something on the way or the pipeline is proven for
  /// every value of the one param --set binds.
  std::size_t event_limit = 4'000'000;
  /// A lowered kernel's program: the grid step of a statement (its
  /// top-level index, its loop values; spec::Lowered::step), which the race
  /// checker's stale-read uses on scratch (races::Machine::set_step_of).
  std::function<std::int64_t(int top_level, const std::vector<std::int64_t> &iterations)> step_of;
};

/// A fresh, empty cache for CheckOptions::query_cache.
std::shared_ptr<rules::QueryCache> new_query_cache();

/// Checks one validated kernel spec fully (verifier/kernel.cpp): every
/// spec-level rule at every grid point, and the race checker on the program
/// spec::lower emits for the same binding (params, overrides, target). A
/// finding of the lowered program is anchored at the kernel's own line and
/// witnessed by grid points and events; it is dropped when a spec-level
/// finding explains it: one anchored at the same line, or naming an operand
/// the lowered statement touches (docs/rules.md). `verified` needs both; a
/// kernel that cannot be lowered is at best `unknown`, with the reason.
Verdict check(const spec::KernelSpec &, const CheckOptions &);
/// The spec-level rules alone (no lowering): every rule of the catalog that
/// is decided on the KernelSpec, at every grid point.
Verdict check_spec_rules(const spec::KernelSpec &, const CheckOptions &);
/// The same on a kernel elaborated with open prefetch contents
/// (spec::elaborate_prefetch): the rules are decided for every contents
/// `open` allows, each finding naming its witness's contents; `start` is
/// allowed contents (spec::pick_prefetch).
Verdict check_spec_rules(const spec::KernelSpec &, const CheckOptions &, const spec::PrefetchSpace &open,
                         const spec::PrefetchContents &start);
/// Checks one validated pipeline.
Verdict check(const spec::Program &, const CheckOptions &);
Verdict check(const std::variant<spec::KernelSpec, spec::Program> &, const CheckOptions &);

/// Ctrl-C: stops every check in progress and every later one, process-wide
/// and for good (solver queries answer unknown, "interrupted"). Callers poll
/// cancelled() between units. Safe from any thread, not a signal handler.
void cancel_all();
/// True once cancel_all() has been called.
bool cancelled();

} // namespace pipecheck::verifier
