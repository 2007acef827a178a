#include "reports/report.hpp"

#include <filesystem>
#include <string_view>

namespace pipecheck::reports {
namespace {

using nlohmann::json;

std::string percent_encode(const std::string &s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string r;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      r += static_cast<char>(c);
    } else {
      r += '%';
      r += kHex[c >> 4];
      r += kHex[c & 15];
    }
  }
  return r;
}

// Code scanning resolves relative URIs against the checkout, so a path under
// the working directory is written relative to it; any other absolute path
// stays absolute as a file: URI.
std::string uri_of(const std::string &path, const std::string &cwd) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(path).lexically_normal();
  // (A relative path out of the working directory, `../x.pk`, resolves
  // nowhere in a checkout: made absolute, a file: URI too.)
  if (!p.is_absolute() && !p.empty() && *p.begin() == "..") p = (fs::path(cwd) / p).lexically_normal();
  if (p.is_absolute()) {
    fs::path rel = p.lexically_relative(fs::path(cwd).lexically_normal());
    if (rel.empty() || *rel.begin() == "..") return "file://" + percent_encode(p.generic_string());
    p = rel;
  }
  return percent_encode(p.generic_string());
}

// `loc`'s column counts bytes; SARIF's, the line's Unicode code points
// before it plus one (the run's columnKind): a non-ASCII character earlier
// on the line is one column.
json physical(const std::string &uri, spec::Loc loc, const spec::SourceFile &src) {
  json pl = {{"artifactLocation", {{"uri", uri}}}};
  if (loc.line > 0) {
    pl["region"] = {{"startLine", loc.line}};
    if (loc.col > 0) {
      const std::string line = src.line(loc.line);
      int col = 1;
      for (std::size_t b = 0; b + 1 < static_cast<std::size_t>(loc.col) && b < line.size(); ++b)
        col += (static_cast<unsigned char>(line[b]) & 0xC0) != 0x80;
      pl["region"]["startColumn"] = col;
    }
  }
  return pl;
}

std::string event_text(const verifier::TraceEvent &e) {
  std::string t = "event " + std::to_string(e.index) + ": " + e.statement;
  std::string ctx;
  auto list = [](const std::vector<std::int64_t> &v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s;
  };
  if (!e.iterations.empty()) ctx += "iteration " + list(e.iterations);
  if (e.slot) ctx += (ctx.empty() ? "" : ", ") + std::string("slot ") + std::to_string(*e.slot);
  if (!e.grid_point.empty())
    ctx += (ctx.empty() ? "" : ", ") + std::string("grid point (") + list(e.grid_point) + ")";
  return ctx.empty() ? t : t + " (" + ctx + ")";
}

const char *level(spec::Severity s) {
  switch (s) {
  case spec::Severity::error: return "error";
  case spec::Severity::warning: return "warning";
  case spec::Severity::note: return "note";
  }
  return "error";
}

std::string_view scope_words(verifier::RuleScope s) {
  switch (s) {
  case verifier::RuleScope::spec: return "Checked on kernel specs, at every grid point.";
  case verifier::RuleScope::program: return "Checked on pipelines and on the programs kernels lower to.";
  case verifier::RuleScope::both:
    return "Checked on kernel specs and on programs (pipelines and lowered kernels).";
  }
  return "";
}

json rules() {
  json rs = json::array();
  for (const auto &r : verifier::rule_table()) {
    std::string summary(r.summary);
    rs.push_back({{"id", r.id},
                  {"shortDescription", {{"text", summary}}},
                  {"fullDescription", {{"text", summary + ". " + std::string(scope_words(r.scope))}}},
                  // (SARIF's helpUri must be an absolute URI, and the rules'
                  // documentation is a file of the sources: said in help.)
                  {"help",
                   {{"text", "`pipecheck explain " + std::string(r.id) + "` prints it with an example; " +
                                 std::string(r.anchor) + " in pipecheck's sources documents it."}}},
                  {"defaultConfiguration", {{"level", "error"}}}});
  }
  return rs;
}

json result(const verifier::Finding &fd, const UnitResult &u, const std::string &uri,
            const spec::SourceFile &src) {
  json r = {{"ruleId", verifier::id(fd.rule)},
            {"ruleIndex", static_cast<int>(fd.rule)},
            {"level", level(fd.severity)},
            {"message", {{"text", fd.message}}},
            {"locations",
             json::array({{{"physicalLocation", physical(uri, fd.loc, src)},
                           {"logicalLocations", json::array({{{"name", u.name}, {"kind", "function"}}})}}})}};
  // The notes locate the rest of the witness: the other access of a race,
  // the first visit of a revisit, the wait that comes too late.
  json related = json::array();
  for (const auto &n : fd.notes) {
    if (n.loc.line <= 0) continue;
    related.push_back({{"id", static_cast<int>(related.size()) + 1},
                       {"physicalLocation", physical(uri, n.loc, src)},
                       {"message", {{"text", n.message}}}});
  }
  if (!related.empty()) r["relatedLocations"] = related;
  if (!fd.witness.trace.empty()) {
    json locs = json::array();
    for (const auto &e : fd.witness.trace)
      locs.push_back(
          {{"location",
            {{"physicalLocation", physical(uri, e.loc, src)}, {"message", {{"text", event_text(e)}}}}},
           {"executionOrder", e.index},
           {"importance", e.anchor ? "essential" : "important"}});
    r["codeFlows"] = json::array({{{"message", {{"text", "the trace of the witness"}}},
                                   {"threadFlows", json::array({{{"locations", locs}}})}}});
  }
  r["properties"] = {{"unit", u.name}, {"kind", u.kind()}, {"witness", to_json(fd.witness)}};
  return r;
}

} // namespace

json to_sarif(const std::vector<FileResult> &files, const std::string &cwd) {
  json results = json::array();
  json notifications = json::array();
  bool bad = false;
  for (const auto &f : files) {
    const std::string uri = uri_of(f.source.path, cwd);
    const spec::SourceFile &src = f.source;
    for (const auto &e : f.errors) {
      bad = true;
      notifications.push_back(
          {{"level", "error"},
           {"message", {{"text", e.message}}},
           {"locations", json::array({{{"physicalLocation", physical(uri, e.loc, src)}}})}});
    }
    for (const auto &u : f.units) {
      const auto &v = u.verdict;
      if (v.status == verifier::Status::unknown)
        notifications.push_back(
            {{"level", "warning"},
             {"message",
              {{"text", std::string(u.kind()) + " '" + u.name + "' is not verified: " + v.reason}}},
             {"locations", json::array({{{"physicalLocation", physical(uri, u.loc, src)}}})}});
      for (const auto &fd : v.findings)
        results.push_back(result(fd, u, uri, f.source));
    }
  }
  json invocation = {{"executionSuccessful", !bad}};
  if (!notifications.empty()) invocation["toolExecutionNotifications"] = notifications;
  json run = {{"tool", {{"driver", {{"name", "pipecheck"}, {"version", kToolVersion}, {"rules", rules()}}}}},
              {"invocations", json::array({invocation})},
              {"columnKind", "unicodeCodePoints"},
              {"results", results}};
  return {{"$schema",
           "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"},
          {"version", "2.1.0"},
          {"runs", json::array({run})}};
}

} // namespace pipecheck::reports
