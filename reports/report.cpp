#include "reports/report.hpp"

#include <ostream>
#include <sstream>

namespace pipecheck::reports {

int exit_code(const std::vector<FileResult> &files) {
  bool bad = false, violation = false, unknown = false;
  for (const auto &f : files) {
    bad |= !f.errors.empty();
    for (const auto &u : f.units) {
      violation |= u.verdict.status == verifier::Status::violation;
      unknown |= u.verdict.status == verifier::Status::unknown;
    }
  }
  return bad ? 3 : violation ? 1 : unknown ? 2 : 0;
}

void Counts::add(const FileResult &f) {
  ++files;
  error += f.errors.empty() ? 0 : 1;
  for (const auto &u : f.units) {
    ++units;
    switch (u.verdict.status) {
    case verifier::Status::verified: ++verified; break;
    case verifier::Status::violation: ++violation; break;
    case verifier::Status::unknown: ++unknown; break;
    }
    findings += static_cast<int>(u.verdict.findings.size());
  }
}

std::optional<Format> parse_format(const std::string &s) {
  if (s == "text") return Format::text;
  if (s == "json") return Format::json;
  if (s == "sarif") return Format::sarif;
  if (s == "junit") return Format::junit;
  if (s == "html") return Format::html;
  return std::nullopt;
}

nlohmann::json to_json(const verifier::Witness &w) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto &it : w.items)
    std::visit([&](const auto &v) { j[it.key] = v; }, it.value);
  if (!w.trace.empty()) {
    nlohmann::json t = nlohmann::json::array();
    for (const auto &e : w.trace) {
      nlohmann::json ev = {
          {"index", e.index}, {"statement", e.statement}, {"line", e.loc.line}, {"iterations", e.iterations}};
      if (e.slot) ev["slot"] = *e.slot;
      if (!e.grid_point.empty()) ev["grid_point"] = e.grid_point;
      t.push_back(ev);
    }
    j["trace"] = t;
  }
  return j;
}

nlohmann::json to_json(const std::vector<FileResult> &files) {
  nlohmann::json results = nlohmann::json::array();
  Counts counts;
  for (const auto &f : files) {
    counts.add(f);
    for (const auto &e : f.errors) {
      results.push_back({{"file", f.source.path},
                         {"verdict", "error"},
                         {"line", e.loc.line},
                         {"column", e.loc.col},
                         {"message", e.message}});
    }
    for (const auto &u : f.units) {
      const auto &v = u.verdict;
      nlohmann::json r = {{"file", f.source.path}, {"unit", u.name},
                          {"kind", u.kind()},      {"line", u.loc.line},
                          {"column", u.loc.col},   {"verdict", verifier::to_string(v.status)},
                          {"seconds", v.seconds}};
      if (!v.reason.empty()) r["reason"] = v.reason;
      if (v.sram_bytes) r["sram_bytes"] = *v.sram_bytes;
      nlohmann::json fs = nlohmann::json::array();
      for (const auto &fd : v.findings) {
        nlohmann::json notes = nlohmann::json::array();
        for (const auto &n : fd.notes)
          notes.push_back({{"line", n.loc.line}, {"column", n.loc.col}, {"message", n.message}});
        const verifier::RuleInfo &rule = verifier::info(fd.rule);
        fs.push_back({{"rule", rule.id},
                      {"doc", rule.anchor},
                      {"severity", spec::to_string(fd.severity)},
                      {"line", fd.loc.line},
                      {"column", fd.loc.col},
                      {"message", fd.message},
                      {"witness", to_json(fd.witness)},
                      {"notes", notes}});
      }
      r["findings"] = fs;
      results.push_back(r);
    }
  }
  nlohmann::json summary = {{"files", counts.files},       {"units", counts.units},
                            {"verified", counts.verified}, {"violation", counts.violation},
                            {"unknown", counts.unknown},   {"error", counts.error},
                            {"findings", counts.findings}};
  return {{"tool", "pipecheck"}, {"version", kToolVersion}, {"results", results}, {"summary", summary}};
}

std::string render(Format format, const std::vector<FileResult> &files, const TextOptions &opts,
                   const std::string &cwd) {
  // Invalid UTF-8 in a message (a source excerpt) is replaced, never a throw.
  constexpr auto replace = nlohmann::json::error_handler_t::replace;
  switch (format) {
  case Format::json: return to_json(files).dump(2, ' ', false, replace) + "\n";
  case Format::sarif: return to_sarif(files, cwd).dump(2, ' ', false, replace) + "\n";
  case Format::junit: return to_junit(files);
  case Format::html: return to_html(files);
  case Format::text: break;
  }
  std::ostringstream os;
  write_text(os, files, opts);
  return os.str();
}

} // namespace pipecheck::reports
