#pragma once
/// The report of `pipecheck fuzz` for CI: its configurations as check results
/// (reports/report.hpp), so SARIF and JUnit render them as they render
/// `check`. One unit per configuration tried, named `KERNEL(p=v, ...)`:
/// - ok: verified;
/// - violation: a finding per rule, located at the kernel's header (the sweep
///   keeps rules, not locations; the message names the `check --set ...`
///   that shows where);
/// - unknown, a failed run of a verified configuration, bad input: unknown,
///   with the reason.
/// The smallest failing configuration is one more unit when the sweep did not
/// try it itself.

#include "reports/report.hpp"
#include "spec/diag.hpp"
#include "spec/ir.hpp"
#include "sweep/sweep.hpp"

#include <vector>

namespace pipecheck::reports {

/// The sweep of kernel `k` of `source` as one file's results.
FileResult sweep_file_result(const spec::SourceFile &source, const spec::KernelSpec &k,
                             const sweep::SweepResult &);

} // namespace pipecheck::reports
