#pragma once
/// Source files and clang-style diagnostics: `FILE:LINE:COL: error: message`,
/// the source line, and a caret under the column.

#include "spec/ir.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace pipecheck::spec {

/// A source text with its path, split into lines for diagnostics.
struct SourceFile {
  std::string path;
  std::string text;
  /// Line `n` (1-based) without its newline; empty when out of range.
  std::string line(int n) const;
  static SourceFile from_string(std::string path, std::string text);
};

enum class Severity { error, warning, note };
const char *to_string(Severity);

struct Diagnostic {
  Severity severity = Severity::error;
  Loc loc;
  std::string message;
  /// Further located remarks, printed as `note:` lines.
  std::vector<Diagnostic> notes;
};

/// Renders `path:line:col: severity: message`, the line and a caret (no
/// source line when loc.line == 0), then each note the same way.
void render(std::ostream &, const SourceFile &, const Diagnostic &);
std::string render(const SourceFile &, const Diagnostic &);

/// A source line as a diagnostic shows it: control bytes (other than tab)
/// become '?', so no raw binary reaches a terminal.
std::string printable(const std::string &line);
/// What goes before the caret under column `col` (1-based, in bytes) of a
/// printable line: a tab for a tab, a space per character, nothing for the
/// continuation bytes of a UTF-8 character (one character, one column).
std::string caret_pad(const std::string &line, int col);

} // namespace pipecheck::spec
