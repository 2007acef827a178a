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
  /// HTML only: a kernel's schedule as lowered (kernel_timeline).
  std::optional<Timeline> schedule;
  /// Bad input (the report's status then bad_input, no runs): the errors
  /// printed, located where they are about a line of the file.
  std::vector<spec::Diagnostic> errors;
};

/// What a run's events say of its pipelining: transfer time (DMA workers),
/// the issuing thread's compute time, and the transfer time that ran while
/// the issuing thread computed.
struct MeasuredOverlap {
  std::int64_t span_ns = 0; ///< from the first event's start to the last one's end
  std::int64_t transfer_ns = 0;
  std::int64_t compute_ns = 0;
  std::int64_t overlapped_ns = 0;
};
MeasuredOverlap measured_overlap(const std::vector<executor::Event> &);

/// A run's measured timeline as an inline SVG: a lane per slot ring the
/// copies moved (copy-in / copy-out transfers on the DMA workers), a compute
/// lane and a lane for the issuing thread's waits, over wall time; the first
/// `max_bars` events with a duration.
std::string measured_svg(const std::vector<executor::Event> &, std::size_t max_bars = 400);

/// One self-contained HTML page: a table of the runs (status, copies, the
/// share of transfer time hidden behind compute, seconds), the kernel's
/// lowered schedule, and per run its mismatch, notes and measured timeline.
std::string to_html(const RunFileResult &);

/// `{"tool", "version", "file", "unit", "kind", "verdict", "runs": [...],
/// "summary": {...}}`: a run per DMA mode with its status, timing, copies,
/// the first mismatch of a failed one and why a run could not run; with
/// bad input, `"errors": [{"message", "line", "column"}]` (line and column
/// where the error has them).
nlohmann::json to_json(const RunFileResult &);

/// Bad input's errors as `[{"message", "line", "column"}]` (line and column
/// where an error has them): run's, fuzz's and model's json reports.
nlohmann::json errors_json(const std::vector<spec::Diagnostic> &);
/// The JSON report of a command stopped by bad input in `file` (fuzz,
/// model): `{"tool", "version", "file", "ok": false, "errors"}`, to which the
/// command adds its own empty fields.
nlohmann::json bad_input_json(const std::string &file, const std::vector<spec::Diagnostic> &);

/// The report's errors (bad input) one per line: `PATH:LINE:COL: error:
/// MESSAGE`, or `PATH: error: MESSAGE` where an error has no line.
std::string error_lines(const RunFileResult &);

/// JUnit XML: a testsuite for the unit, a testcase per run (`eager`,
/// `random seed=1`, ...), a `<failure>` for a failed run, an `<error>` for one
/// that could not run; bad input is one test case `UNIT [input]` (the file's
/// path when no unit was chosen) with an `<error type="bad_input">`.
std::string to_junit(const RunFileResult &);

/// The report in a format (text, json, junit or html; nullopt for sarif,
/// which has nothing to say about a run).
std::optional<std::string> render(Format, const RunFileResult &);

} // namespace pipecheck::reports
