#pragma once
/// Check results of whole files and their renderings: clang-style text and
/// the JSON of DESIGN.md's CLI contract.

#include "spec/diag.hpp"
#include "verifier/verdict.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace pipecheck::reports {

/// One kernel's or pipeline's verdict.
struct UnitResult {
  std::string name;
  bool is_pipeline = false;
  spec::Loc loc;
  verifier::Verdict verdict;
};

/// One checked file: its parse/validation errors, or one result per unit.
struct FileResult {
  spec::SourceFile source;
  std::vector<spec::Diagnostic> errors; ///< bad input: no units were checked
  std::vector<UnitResult> units;
};

/// The CLI contract's exit code: 3 bad input, else 1 any violation, else 2 any
/// unknown, else 0.
int exit_code(const std::vector<FileResult> &);

/// Clang-style text: each finding as `FILE:LINE:COL: error: message [rule]`
/// with the line, a caret and `note:` lines; a line per verified or unknown
/// unit; a closing summary line.
void write_text(std::ostream &, const std::vector<FileResult> &);

/// `{"tool": "pipecheck", "version": ..., "results": [...]}`.
nlohmann::json to_json(const std::vector<FileResult> &);

/// The JSON of one finding's witness.
nlohmann::json to_json(const verifier::Witness &);

} // namespace pipecheck::reports
