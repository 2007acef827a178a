#pragma once
/// The `.pk` lexer: Python-style tokens with INDENT/DEDENT, implicit line
/// joining inside brackets, comments collected on the side.

#include "spec/diag.hpp"

#include <string>
#include <vector>

namespace pipecheck::spec {

enum class Tok { Name, Int, Float, Punct, Newline, Indent, Dedent, End };

struct Token {
  Tok kind = Tok::End;
  std::string text; ///< the spelling (Name, Punct, Int, Float)
  Loc loc;
};

struct Comment {
  Loc loc;
  std::string text; ///< after '#', unchanged
  bool own_line = false;
};

struct LexResult {
  std::vector<Token> tokens;
  std::vector<Comment> comments;
  std::vector<Diagnostic> errors; ///< at most one: lexing stops at the first error
};

/// Tokenizes `src`. Never throws.
LexResult lex(const SourceFile &src);

} // namespace pipecheck::spec
