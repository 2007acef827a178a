#pragma once
/// The `.pk` lexer and parser.

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <optional>
#include <vector>

namespace pipecheck::spec {

struct ParseResult {
  std::optional<File> file;       ///< set when there are no errors
  std::vector<Diagnostic> errors; ///< the first syntax error (parsing stops there)
};

/// Parses a whole file. Never throws; bad input yields a located error.
/// Nesting deeper than 64 blocks or 200 expression levels is an error.
ParseResult parse(const SourceFile &);

/// Parses and validates (spec/validate.hpp): a File only when both succeed.
ParseResult parse_and_validate(const SourceFile &);

} // namespace pipecheck::spec
