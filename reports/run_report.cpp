#include "reports/run_report.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace pipecheck::reports {
namespace {

using nlohmann::json;

// A value as a JSON number, or where JSON has none the string "inf",
// "-inf" or "nan" (nlohmann writes a non-finite double as null).
json value_json(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

json mismatch_json(const executor::Mismatch &m) {
  json j = {{"array", m.array},
            {"element", m.element},
            {"expected", value_json(m.expected)},
            {"actual", value_json(m.actual)},
            {"expected_from", m.expected_from},
            {"actual_from", m.actual_from},
            {"count", m.count},
            {"is_poison", m.is_poison},
            {"expected_is_poison", m.expected_is_poison}};
  if (m.block) j["block"] = *m.block;
  if (m.grid_point) j["grid_point"] = *m.grid_point;
  if (m.tolerance) j["tolerance"] = *m.tolerance;
  if (m.bound) j["bound"] = *m.bound;
  if (m.worst)
    j["worst"] = {{"element", *m.worst}, {"ratio", m.worst_ratio}, {"tolerance", m.worst_tolerance}};
  return j;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

} // namespace

json to_json(const RunFileResult &f) {
  const auto &rep = f.report;
  json runs = json::array();
  json counts = {{"runs", 0}, {"pass", 0}, {"fail", 0}, {"bad_input", 0}, {"error", 0}};
  for (const auto &r : rep.runs) {
    json j = {{"mode", executor::to_string(r.mode)},
              {"seed", r.seed},
              {"backend", r.backend.empty() ? "cpu" : r.backend},
              {"status", executor::to_string(r.status)},
              {"seconds", r.seconds},
              {"copies", r.copies},
              {"bytes_copied", r.bytes_copied},
              {"params", r.params},
              {"notes", r.notes}};
    if (r.memory_estimate) j["memory_estimate"] = r.memory_estimate;
    if (!r.reason.empty()) j["reason"] = r.reason;
    if (r.loc.line > 0) j["line"] = r.loc.line;
    if (r.mismatch) j["mismatch"] = mismatch_json(*r.mismatch);
    if (r.tolerance) j["tolerance"] = *r.tolerance;
    runs.push_back(j);
    counts["runs"] = counts["runs"].get<int>() + 1;
    counts[executor::to_string(r.status)] = counts[executor::to_string(r.status)].get<int>() + 1;
  }
  // A unit refused before any run (bad input, a size past --max-memory)
  // counts once under its verdict, as JUnit's one test case with its error.
  if (rep.runs.empty() && rep.status != executor::RunStatus::pass)
    counts[executor::to_string(rep.status)] = 1;
  json j = {{"tool", "pipecheck"},
            {"version", kToolVersion},
            {"file", f.path},
            {"unit", rep.unit},
            {"kind", f.is_pipeline ? "pipeline" : "kernel"},
            {"verdict", executor::to_string(rep.status)},
            {"memory_estimate", rep.memory_estimate},
            {"runs", runs},
            {"summary", counts}};
  if (!f.errors.empty()) j["errors"] = errors_json(f.errors);
  return j;
}

json bad_input_json(const std::string &file, const std::vector<spec::Diagnostic> &errors) {
  return {{"tool", "pipecheck"},
          {"version", kToolVersion},
          {"file", file},
          {"ok", false},
          {"errors", errors_json(errors)}};
}

json errors_json(const std::vector<spec::Diagnostic> &errors) {
  json out = json::array();
  for (const auto &e : errors) {
    json x = {{"message", e.message}};
    if (e.loc.line > 0) {
      x["line"] = e.loc.line;
      x["column"] = e.loc.col;
    }
    out.push_back(x);
  }
  return out;
}

std::string error_lines(const RunFileResult &f) {
  std::string s;
  for (const auto &e : f.errors)
    s += (e.loc.line > 0 ? f.path + ":" + std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col)
                         : f.path) +
         ": error: " + e.message + "\n";
  return s;
}

std::string to_junit(const RunFileResult &f) {
  const auto &rep = f.report;
  int failures = 0, errors = 0;
  double total = 0;
  std::ostringstream cases;
  const std::string path = xml_text(f.path);
  if (!f.errors.empty()) {
    ++errors;
    const std::string lines = error_lines(f);
    cases << "    <testcase name=\"" << xml_text((rep.unit.empty() ? f.path : rep.unit) + " [input]")
          << "\" classname=\"" << path << "\" file=\"" << path << "\" time=\"0.000000\">\n"
          << "      <error type=\"bad_input\" message=\"" << xml_text(lines.substr(0, lines.find('\n')))
          << "\">" << xml_text(lines) << "</error>\n    </testcase>\n";
  }
  for (const auto &r : rep.runs) {
    total += r.seconds;
    cases << "    <testcase name=\"" << xml_text(rep.unit + " [" + executor::run_label(r) + "]")
          << "\" classname=\"" << path << "\" file=\"" << path << "\" time=\"" << seconds(r.seconds) << "\"";
    std::string why = r.reason;
    if (r.loc.line > 0) why = "line " + std::to_string(r.loc.line) + ": " + why;
    switch (r.status) {
    case executor::RunStatus::pass: cases << "/>\n"; continue;
    case executor::RunStatus::fail:
      ++failures;
      cases << ">\n      <failure type=\"mismatch\" message=\"" << xml_text(why) << "\">";
      break;
    case executor::RunStatus::bad_input:
    case executor::RunStatus::error:
      ++errors;
      cases << ">\n      <error type=\"" << executor::to_string(r.status) << "\" message=\"" << xml_text(why)
            << "\">";
      break;
    }
    std::string body = why + "\n";
    for (const auto &n : r.notes)
      body += "note: " + n + "\n";
    cases << xml_text(body) << (r.status == executor::RunStatus::fail ? "</failure>" : "</error>")
          << "\n    </testcase>\n";
  }
  const std::size_t tests = rep.runs.size() + (f.errors.empty() ? 0 : 1);
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<testsuites name=\"pipecheck run\" tests=\"" << tests << "\" failures=\"" << failures
     << "\" errors=\"" << errors << "\" time=\"" << seconds(total) << "\">\n"
     << "  <testsuite name=\"" << path << "\" tests=\"" << tests << "\" failures=\"" << failures
     << "\" errors=\"" << errors << "\" skipped=\"0\" time=\"" << seconds(total) << "\">\n"
     << cases.str() << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

std::optional<std::string> render(Format format, const RunFileResult &f) {
  switch (format) {
  case Format::text: return executor::format_report(f.report);
  case Format::json: return to_json(f).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  case Format::junit: return to_junit(f);
  case Format::sarif: return std::nullopt;
  case Format::html: return to_html(f);
  }
  return std::nullopt;
}

} // namespace pipecheck::reports
