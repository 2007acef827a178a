#include "reports/report.hpp"

#include <cstdint>
#include <cstdio>
#include <sstream>

namespace pipecheck::reports {
namespace {

// The length of the valid UTF-8 sequence at s[i] of a character XML 1.0
// can hold, or 0: no overlong form, no surrogate, nothing past U+10FFFF,
// not U+FFFE or U+FFFF.
std::size_t utf8_length(const std::string &s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3fu);
  }
  static const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff || cp == 0xfffe || cp == 0xffff)
    return 0;
  return n;
}

} // namespace

std::string xml_text(const std::string &s) {
  std::string r;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = utf8_length(s, i);
    if (n == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      r += '?';
      ++i;
      continue;
    }
    switch (c) {
    case '&': r += "&amp;"; break;
    case '<': r += "&lt;"; break;
    case '>': r += "&gt;"; break;
    case '"': r += "&quot;"; break;
    case '\'': r += "&apos;"; break;
    default: r.append(s, i, n);
    }
    i += n;
  }
  return r;
}

namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

double unit_seconds(const FileResult &f) {
  double t = 0;
  for (const auto &u : f.units)
    t += u.verdict.seconds;
  return t;
}

} // namespace

std::string to_junit(const std::vector<FileResult> &files) {
  Counts total;
  double total_time = 0;
  std::ostringstream body;
  for (const auto &f : files) {
    Counts c;
    c.add(f);
    total.add(f);
    const double t = unit_seconds(f);
    total_time += t;
    const std::string path = xml_text(f.source.path);
    // A file's bad input is one more test case, one that errs.
    const int tests = c.units + c.error;
    const int errors = c.unknown + c.error;
    body << "  <testsuite name=\"" << path << "\" tests=\"" << tests << "\" failures=\"" << c.violation
         << "\" errors=\"" << errors << "\" skipped=\"0\" time=\"" << seconds(t) << "\">\n";
    if (!f.errors.empty()) {
      std::ostringstream text;
      for (const auto &e : f.errors)
        write_diagnostic(text, f.source, e, {});
      body << "    <testcase name=\"" << path << "\" classname=\"" << path << "\" file=\"" << path
           << "\" time=\"0\">\n"
           << "      <error type=\"bad-input\" message=\"" << xml_text(f.errors.front().message) << "\">"
           << xml_text(text.str()) << "</error>\n"
           << "    </testcase>\n";
    }
    for (const auto &u : f.units) {
      const auto &v = u.verdict;
      body << "    <testcase name=\"" << xml_text(u.name) << "\" classname=\"" << path << "\" file=\"" << path
           << "\" line=\"" << u.loc.line << "\" time=\"" << seconds(v.seconds) << "\"";
      switch (v.status) {
      case verifier::Status::verified: body << "/>\n"; break;
      case verifier::Status::unknown:
        body << ">\n      <error type=\"unknown\" message=\""
             << xml_text(std::string(u.kind()) + " '" + u.name + "' is not verified: " + v.reason)
             << "\"/>\n    </testcase>\n";
        break;
      case verifier::Status::violation: {
        std::string rules;
        std::ostringstream text;
        for (const auto &fd : v.findings) {
          const std::string id(verifier::id(fd.rule));
          if (rules.find(id) == std::string::npos) rules += (rules.empty() ? "" : " ") + id;
          write_diagnostic(text, f.source,
                           spec::Diagnostic{fd.severity, fd.loc, fd.message + " [" + id + "]", fd.notes}, {});
        }
        const std::size_t n = v.findings.size();
        body << ">\n      <failure type=\"" << xml_text(rules) << "\" message=\"" << n << " finding"
             << (n == 1 ? "" : "s") << ": " << xml_text(rules) << "\">" << xml_text(text.str())
             << "</failure>\n"
             << "    </testcase>\n";
        break;
      }
      }
    }
    body << "  </testsuite>\n";
  }
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<testsuites name=\"pipecheck\" tests=\"" << total.units + total.error << "\" failures=\""
     << total.violation << "\" errors=\"" << total.unknown + total.error << "\" time=\""
     << seconds(total_time) << "\">\n"
     << body.str() << "</testsuites>\n";
  return os.str();
}

} // namespace pipecheck::reports
