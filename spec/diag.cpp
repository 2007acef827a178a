#include "spec/diag.hpp"

#include <ostream>
#include <sstream>

namespace pipecheck::spec {

std::string SourceFile::line(int n) const {
  if (n <= 0) return {};
  std::size_t pos = 0;
  for (int i = 1; i < n; ++i) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return {};
    ++pos;
  }
  std::size_t end = text.find('\n', pos);
  std::string l = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  if (!l.empty() && l.back() == '\r') l.pop_back();
  return l;
}

SourceFile SourceFile::from_string(std::string path, std::string text) {
  return SourceFile{std::move(path), std::move(text)};
}

const char *to_string(Severity s) {
  switch (s) {
  case Severity::error: return "error";
  case Severity::warning: return "warning";
  case Severity::note: return "note";
  }
  return "?";
}

// Control bytes in a source line are shown as '?' so a diagnostic never
// writes raw binary to a terminal.
std::string printable(const std::string &s) {
  std::string r;
  for (unsigned char c : s)
    r += (c == '\t' || (c >= 0x20 && c != 0x7f)) ? static_cast<char>(c) : '?';
  return r;
}

std::string caret_pad(const std::string &line, int col) {
  std::string pad;
  for (int i = 1; i < col && i - 1 < static_cast<int>(line.size()); ++i) {
    const auto c = static_cast<unsigned char>(line[static_cast<std::size_t>(i - 1)]);
    if ((c & 0xc0) == 0x80) continue;
    pad += c == '\t' ? '\t' : ' ';
  }
  return pad;
}

void render(std::ostream &os, const SourceFile &src, const Diagnostic &d) {
  os << src.path;
  if (d.loc.line > 0) os << ":" << d.loc.line << ":" << d.loc.col;
  os << ": " << to_string(d.severity) << ": " << d.message << "\n";
  if (d.loc.line > 0) {
    std::string l = printable(src.line(d.loc.line));
    os << l << "\n";
    os << caret_pad(l, d.loc.col) << "^\n";
  }
  for (const auto &n : d.notes)
    render(os, src, n);
}

std::string render(const SourceFile &src, const Diagnostic &d) {
  std::ostringstream os;
  render(os, src, d);
  return os.str();
}

} // namespace pipecheck::spec
