#pragma once
/// The report of `pipecheck run` in the formats that apply to it: text (the
/// executor's own), json, and JUnit XML (one test case per run).

#include "executor/run.hpp"
#include "reports/report.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace pipecheck::reports {

/// One executed unit: the file it came from and its runs.
struct RunFileResult {
  std::string path;
  bool is_pipeline = false;
  executor::RunReport report;
};

/// `{"tool", "version", "file", "unit", "kind", "verdict", "runs": [...],
/// "summary": {...}}`: a run per DMA mode with its status, timing, copies,
/// the first mismatch of a failed one and why a run could not run.
nlohmann::json to_json(const RunFileResult &);

/// JUnit XML: a testsuite for the unit, a testcase per run (`eager`,
/// `random seed=1`, ...), a `<failure>` for a failed run, an `<error>` for one
/// that could not run.
std::string to_junit(const RunFileResult &);

/// The report in a format (text, json or junit; nullopt for sarif, which has
/// nothing to say about a run).
std::optional<std::string> render(Format, const RunFileResult &);

} // namespace pipecheck::reports
