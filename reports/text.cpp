#include "reports/report.hpp"

#include <ostream>
#include <set>

namespace pipecheck::reports {
namespace {

// clang's colours: a bold location and message, the severity in its colour,
// a green caret.
struct Style {
  bool on;
  const char *code(const char *c) const { return on ? c : ""; }
  const char *bold() const { return code("\033[1m"); }
  const char *reset() const { return code("\033[0m"); }
  const char *severity(spec::Severity s) const {
    switch (s) {
    case spec::Severity::error: return code("\033[1;31m");
    case spec::Severity::warning: return code("\033[1;35m");
    case spec::Severity::note: return code("\033[1;36m");
    }
    return "";
  }
  const char *caret() const { return code("\033[1;32m"); }
  const char *verified() const { return code("\033[1;32m"); }
  const char *unknown() const { return code("\033[1;33m"); }
};

void location(std::ostream &os, const Style &st, const std::string &path, spec::Loc loc) {
  os << st.bold() << path;
  if (loc.line > 0) os << ":" << loc.line << ":" << loc.col;
  os << ":" << st.reset() << " ";
}

// The excerpt is shown for the first diagnostic on a line: a note on a line
// the finding (or an earlier note) already showed repeats only its header.
void write_one(std::ostream &os, const spec::SourceFile &src, const spec::Diagnostic &d, const Style &st,
               std::set<int> &shown) {
  location(os, st, src.path, d.loc);
  os << st.severity(d.severity) << spec::to_string(d.severity) << ":" << st.reset() << " " << st.bold()
     << d.message << st.reset() << "\n";
  if (d.loc.line > 0 && shown.insert(d.loc.line).second) {
    std::string l = spec::printable(src.line(d.loc.line));
    os << l << "\n";
    os << spec::caret_pad(l, d.loc.col) << st.caret() << "^" << st.reset() << "\n";
  }
  for (const auto &n : d.notes)
    write_one(os, src, n, st, shown);
}

void write_counts(std::ostream &os, const Counts &c) {
  os << c.verified << " verified, " << c.violation << " with violations, " << c.unknown << " unknown";
  if (c.error) os << ", " << c.error << " file" << (c.error == 1 ? "" : "s") << " with errors";
  os << "\n";
}

} // namespace

void write_diagnostic(std::ostream &os, const spec::SourceFile &src, const spec::Diagnostic &d,
                      const TextOptions &opts) {
  std::set<int> shown;
  write_one(os, src, d, Style{opts.color}, shown);
}

void write_text(std::ostream &os, const std::vector<FileResult> &files, const TextOptions &opts) {
  const Style st{opts.color};
  Counts total;
  for (const auto &f : files) {
    for (const auto &e : f.errors)
      write_diagnostic(os, f.source, e, opts);
    for (const auto &u : f.units) {
      const auto &v = u.verdict;
      switch (v.status) {
      case verifier::Status::verified:
        if (opts.quiet) break;
        location(os, st, f.source.path, u.loc);
        os << st.verified() << "verified:" << st.reset() << " " << u.kind() << " '" << u.name << "'";
        if (!v.reason.empty()) os << " (" << v.reason << ")";
        os << "\n";
        break;
      case verifier::Status::unknown:
        if (opts.quiet) break;
        location(os, st, f.source.path, u.loc);
        os << st.unknown() << "unknown:" << st.reset() << " " << u.kind() << " '" << u.name
           << "' is not verified: " << v.reason << "\n";
        break;
      case verifier::Status::violation:
        for (const auto &fd : v.findings)
          write_diagnostic(os, f.source,
                           spec::Diagnostic{fd.severity, fd.loc,
                                            fd.message + " [" + std::string(verifier::id(fd.rule)) + "]",
                                            fd.notes},
                           opts);
        break;
      }
    }
    Counts c;
    c.add(f);
    if (files.size() > 1 && !opts.quiet) {
      os << f.source.path << ": ";
      write_counts(os, c);
    }
    total.add(f);
  }
  if (opts.quiet) return;
  if (files.size() > 1) os << "total: ";
  write_counts(os, total);
}

} // namespace pipecheck::reports
