#include "reports/report.hpp"

#include <ostream>

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

void write_text(std::ostream &os, const std::vector<FileResult> &files) {
  int verified = 0, violations = 0, unknown = 0, bad = 0;
  for (const auto &f : files) {
    for (const auto &e : f.errors)
      spec::render(os, f.source, e);
    bad += f.errors.empty() ? 0 : 1;
    for (const auto &u : f.units) {
      const char *kind = u.is_pipeline ? "pipeline" : "kernel";
      const auto &v = u.verdict;
      switch (v.status) {
      case verifier::Status::verified:
        ++verified;
        os << f.source.path << ":" << u.loc.line << ":" << u.loc.col << ": verified: " << kind << " '"
           << u.name << "'";
        if (!v.reason.empty()) os << " (" << v.reason << ")";
        os << "\n";
        break;
      case verifier::Status::unknown:
        ++unknown;
        os << f.source.path << ":" << u.loc.line << ":" << u.loc.col << ": unknown: " << kind << " '"
           << u.name << "' is not verified: " << v.reason << "\n";
        break;
      case verifier::Status::violation:
        ++violations;
        for (const auto &fd : v.findings) {
          spec::Diagnostic d{fd.severity, fd.loc,
                             fd.message + " [" + std::string(verifier::id(fd.rule)) + "]", fd.notes};
          spec::render(os, f.source, d);
        }
        break;
      }
    }
  }
  os << verified << " verified, " << violations << " with violations, " << unknown << " unknown";
  if (bad) os << ", " << bad << " file" << (bad == 1 ? "" : "s") << " with errors";
  os << "\n";
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
  for (const auto &f : files) {
    for (const auto &e : f.errors) {
      results.push_back({{"file", f.source.path},
                         {"verdict", "error"},
                         {"line", e.loc.line},
                         {"column", e.loc.col},
                         {"message", e.message}});
    }
    for (const auto &u : f.units) {
      const auto &v = u.verdict;
      nlohmann::json r = {
          {"file", f.source.path}, {u.is_pipeline ? "pipeline" : "kernel", u.name}, {"kernel", u.name},
          {"line", u.loc.line},    {"verdict", verifier::to_string(v.status)},      {"seconds", v.seconds}};
      if (!v.reason.empty()) r["reason"] = v.reason;
      if (v.sram_bytes) r["sram_bytes"] = *v.sram_bytes;
      nlohmann::json fs = nlohmann::json::array();
      for (const auto &fd : v.findings) {
        nlohmann::json notes = nlohmann::json::array();
        for (const auto &n : fd.notes)
          notes.push_back({{"line", n.loc.line}, {"message", n.message}});
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
  return {{"tool", "pipecheck"}, {"version", "0.1.0"}, {"results", results}};
}

} // namespace pipecheck::reports
