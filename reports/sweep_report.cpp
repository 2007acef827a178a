#include "reports/sweep_report.hpp"

#include "verifier/rule.hpp"

namespace pipecheck::reports {

namespace {

std::string params_text(const sweep::SweepResult &s, const spec::Env &params, const char *sep) {
  std::string out;
  for (const auto &name : s.swept) {
    auto it = params.find(name);
    if (it == params.end()) continue;
    out += (out.empty() ? "" : sep) + name + "=" + std::to_string(it->second);
  }
  return out;
}

// A word for a shell command line: as it is where it needs no quotes, else
// in single quotes.
std::string shell_word(const std::string &w) {
  if (!w.empty() &&
      w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=+:,@%") ==
          std::string::npos)
    return w;
  std::string out = "'";
  for (char ch : w)
    out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

UnitResult unit_of(const std::string &path, const spec::KernelSpec &k, const sweep::SweepResult &s,
                   const sweep::ConfigResult &c, const std::string &suffix) {
  UnitResult u;
  u.name = k.name + "(" + params_text(s, c.params, ", ") + ")" + suffix;
  u.loc = k.loc;
  auto &v = u.verdict;
  v.seconds = (c.check_ms + c.run_ms) / 1000;
  std::string sets;
  for (const auto &name : s.swept)
    if (auto it = c.params.find(name); it != c.params.end())
      sets += " --set " + name + "=" + std::to_string(it->second);
  switch (c.outcome) {
  case sweep::Outcome::ok:
    v.status = verifier::Status::verified;
    v.reason = c.run ? "verified, and its run passed" : "verified";
    break;
  case sweep::Outcome::violation:
    v.status = verifier::Status::violation;
    for (const auto &id : c.rules) {
      verifier::Finding f;
      auto rule = verifier::find_rule(id);
      if (!rule) continue;
      f.rule = *rule;
      f.loc = k.loc;
      const std::string with = params_text(s, c.params, ", ");
      f.message = (with.empty() ? "" : "with " + with + ", ") + "kernel '" + k.name + "' violates " + id +
                  " (`pipecheck check " + shell_word(path) + " --kernel " + shell_word(k.name) + sets +
                  "` shows where)";
      for (const auto &name : s.swept)
        if (auto it = c.params.find(name); it != c.params.end())
          f.witness.items.push_back({name, it->second});
      v.findings.push_back(std::move(f));
    }
    // A violation always names its rules; should none be known, it is not
    // a pass either.
    if (v.findings.empty()) {
      v.status = verifier::Status::unknown;
      v.reason = "a violation with no known rule: " + c.reason;
    }
    break;
  case sweep::Outcome::unknown:
    v.status = verifier::Status::unknown;
    v.reason = c.reason;
    break;
  case sweep::Outcome::run_fails:
    v.status = verifier::Status::unknown;
    v.reason = "verified, but its run failed (pipecheck or the kernel's intent is wrong): " + c.reason;
    break;
  case sweep::Outcome::bad_input:
    v.status = verifier::Status::unknown;
    v.reason = "cannot be checked or run: " + c.reason;
    break;
  }
  return u;
}

} // namespace

FileResult sweep_file_result(const spec::SourceFile &source, const spec::KernelSpec &k,
                             const sweep::SweepResult &s) {
  FileResult f;
  f.source = source;
  bool smallest_tried = false;
  for (const auto &c : s.configs) {
    f.units.push_back(unit_of(source.path, k, s, c, ""));
    smallest_tried = smallest_tried || (s.smallest_failure && s.smallest_failure->params == c.params);
  }
  if (s.smallest_failure && !smallest_tried)
    f.units.push_back(unit_of(source.path, k, s, *s.smallest_failure, " (smallest failure)"));
  return f;
}

} // namespace pipecheck::reports
