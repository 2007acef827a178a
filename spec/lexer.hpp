#pragma once
/// The `.pk` lexer: Python-style tokens with INDENT/DEDENT, implicit line
/// joining inside brackets, comments collected on the side.

#include "spec/diag.hpp"

#include <string>
#include <vector>

namespace pipecheck::spec {

/// String: a double-quoted literal on one line (`"table.npy"`), its text the
/// contents with `\"` and `\\` unescaped; no other escapes.
enum class Tok { Name, Int, Float, String, Punct, Newline, Indent, Dedent, End };

struct Token {
  Tok kind = Tok::End;
  std::string text; ///< the spelling (Name, Punct, Int, Float); a String's contents
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
