#pragma once
/// The race checker over Programs: slot races, overwritten asynchronous
/// operands, hangs, leaks, stale and uninitialized reads — proven for every
/// trip count where the induction closes (verifier/races/induction.hpp),
/// otherwise checked for small trip counts and reported `unknown`.

#include "spec/ir.hpp"
#include "verifier/check.hpp"
#include "verifier/races/machine.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pipecheck::verifier {

/// The verdict for one validated pipeline: `violation` with one finding per
/// (rule, anchor line), each witnessed by the smallest failing trip count and
/// a numbered event trace; `verified` only when proven for every allowed
/// value of the symbolic param (or when every param is concrete); otherwise
/// `unknown` with the reason ("checked for N <= Nmax only: ...").
Verdict check_program(const spec::Program &, const CheckOptions &);

namespace races {

/// The findings of one concrete run (params bound by `env`), converted to
/// Findings with `param = value` in the witness (param may be empty). Throws
/// Unsupported. `hook`, when set, is the machine's iteration hook for the run;
/// `event_limit`, its Machine::set_event_limit (0: the machine's own);
/// `step_of`, its Machine::set_step_of (a lowered kernel's).
std::vector<Finding> check_concrete(const spec::Program &, const spec::Env &env,
                                    const std::string &param = "", const Machine::IterationHook &hook = {},
                                    std::size_t event_limit = 0, const Machine::StepOf &step_of = {});

/// True when every race finding's pair is unordered on the run's
/// happens-before graph (the witness reproduces on the graph). The run must
/// have recorded its graph (Machine::set_record_graph); false otherwise.
bool witnesses_reproduce(const RunResult &);

} // namespace races
} // namespace pipecheck::verifier
