#include "spec/lexer.hpp"

#include <cctype>

namespace pipecheck::spec {

namespace {

constexpr int kMaxIndentDepth = 64;

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
public:
  explicit Lexer(const SourceFile &src) : s_(src.text) {}

  LexResult run() {
    try {
      lines();
    } catch (const Diagnostic &d) {
      out_.errors.push_back(d);
    }
    return std::move(out_);
  }

private:
  const std::string &s_;
  std::size_t i_ = 0;
  int line_ = 1;
  std::size_t line_start_ = 0;
  int depth_ = 0;                          // bracket depth
  std::vector<std::pair<Loc, char>> open_; // the brackets open, innermost last

  // The end of the file inside brackets: said at the innermost one open, as
  // Python does (the line it is on, with a caret under it).
  [[noreturn]] void unclosed() {
    const auto &[l, c] = open_.back();
    fail(l, std::string("'") + c + "' is never closed: the file ends inside it");
  }
  std::vector<int> indents_{0};
  char indent_char_ = 0; // ' ' or '\t' once seen
  Loc indent_char_loc_;
  LexResult out_;

  Loc here() const { return Loc{line_, static_cast<int>(i_ - line_start_) + 1}; }
  [[noreturn]] void fail(Loc l, std::string msg) { throw Diagnostic{Severity::error, l, std::move(msg), {}}; }
  void push(Tok k, std::string text, Loc l) { out_.tokens.push_back(Token{k, std::move(text), l}); }

  void newline_char() {
    ++i_;
    ++line_;
    line_start_ = i_;
  }

  void lines() {
    while (i_ < s_.size()) {
      // Start of a logical line: measure indentation.
      int width = 0;
      std::size_t j = i_;
      while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t')) {
        ++width;
        ++j;
      }
      std::size_t k = j;
      while (k < s_.size() && s_[k] == '\r')
        ++k;
      if (k >= s_.size() || s_[k] == '\n' || s_[k] == '#') {
        // Blank or comment-only line: no indentation tokens.
        i_ = j;
        if (i_ < s_.size() && s_[i_] == '#') comment(true);
        while (i_ < s_.size() && s_[i_] == '\r')
          ++i_;
        if (i_ < s_.size() && s_[i_] == '\n') newline_char();
        continue;
      }
      for (std::size_t m = i_; m < j; ++m) {
        Loc at{line_, static_cast<int>(m - line_start_) + 1};
        if (indent_char_ == 0) {
          indent_char_ = s_[m];
          indent_char_loc_ = at;
        } else if (s_[m] != indent_char_) {
          fail(at, std::string("inconsistent indentation: this line indents with ") +
                       (s_[m] == '\t' ? "a tab" : "a space") + " but line " +
                       std::to_string(indent_char_loc_.line) + " indents with " +
                       (indent_char_ == '\t' ? "tabs" : "spaces"));
        }
      }
      i_ = j;
      Loc first = here();
      if (width > indents_.back()) {
        if (static_cast<int>(indents_.size()) > kMaxIndentDepth)
          fail(first,
               "blocks are nested too deeply (more than " + std::to_string(kMaxIndentDepth) + " levels)");
        indents_.push_back(width);
        push(Tok::Indent, "", first);
      } else {
        while (width < indents_.back()) {
          indents_.pop_back();
          push(Tok::Dedent, "", first);
        }
        if (width != indents_.back()) fail(first, "unindent does not match any outer indentation level");
      }
      logical_line();
    }
    Loc end = here();
    if (depth_ > 0) unclosed();
    while (indents_.size() > 1) {
      indents_.pop_back();
      push(Tok::Dedent, "", end);
    }
    push(Tok::End, "", end);
  }

  void comment(bool own_line) {
    Loc l = here();
    ++i_; // '#'
    std::size_t b = i_;
    while (i_ < s_.size() && s_[i_] != '\n')
      ++i_;
    std::string text = s_.substr(b, i_ - b);
    while (!text.empty() && text.back() == '\r')
      text.pop_back();
    out_.comments.push_back(Comment{l, text, own_line});
  }

  // Tokens until the end of a logical line (newlines inside brackets are joined).
  void logical_line() {
    Loc line_loc = here();
    while (true) {
      if (i_ >= s_.size()) {
        if (depth_ > 0) unclosed();
        push(Tok::Newline, "", here());
        return;
      }
      char c = s_[i_];
      if (c == '\n') {
        if (depth_ > 0) {
          newline_char();
          continue;
        }
        push(Tok::Newline, "", here());
        newline_char();
        return;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        ++i_;
        continue;
      }
      if (c == '#') {
        comment(false);
        continue;
      }
      if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        ++i_;
        newline_char();
        continue;
      }
      Loc l = here();
      if (name_start(c)) {
        std::size_t b = i_;
        while (i_ < s_.size() && name_char(s_[i_]))
          ++i_;
        push(Tok::Name, s_.substr(b, i_ - b), l);
        continue;
      }
      if (c == '"') {
        string(l);
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        number(l);
        continue;
      }
      static const char *puncts[] = {"...", "**", "//", "->", "==", "!=", "<=", ">=", "+=", "(",
                                     ")",   "[",  "]",  "{",  "}",  ",",  ":",  "=",  "<",  ">",
                                     "+",   "-",  "*",  "/",  "%",  "&",  "|",  "~",  "."};
      bool matched = false;
      for (const char *p : puncts) {
        std::size_t n = std::char_traits<char>::length(p);
        if (s_.compare(i_, n, p) == 0) {
          std::string t(p);
          if (t == "(" || t == "[" || t == "{") {
            if (++depth_ > 200) fail(l, "brackets are nested too deeply (more than 200 levels)");
            open_.emplace_back(l, t[0]);
          }
          if (t == ")" || t == "]" || t == "}") {
            if (depth_ == 0) fail(l, "unmatched '" + t + "'");
            const char want = open_.back().second == '(' ? ')' : open_.back().second == '[' ? ']' : '}';
            // (`[lo, hi)`: a half-open range, as prefetch constraints write it.)
            if (t[0] != want && !(open_.back().second == '[' && t[0] == ')'))
              fail(l, "'" + t + "' closes the '" + std::string(1, open_.back().second) + "' at line " +
                          std::to_string(open_.back().first.line) + ", column " +
                          std::to_string(open_.back().first.col) + ", which needs '" + std::string(1, want) +
                          "'");
            --depth_;
            open_.pop_back();
          }
          push(Tok::Punct, t, l);
          i_ += n;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      unsigned char u = static_cast<unsigned char>(c);
      std::string shown = (u >= 0x20 && u < 0x7f) ? std::string("'") + c + "'" : "byte 0x" + hex(u);
      fail(l, "unexpected character " + shown);
    }
    (void)line_loc;
  }

  static std::string hex(unsigned char u) {
    const char *d = "0123456789abcdef";
    return std::string{d[u >> 4], d[u & 15]};
  }

  // "...": one line; `\"` and `\\` are the only escapes.
  void string(Loc l) {
    ++i_; // '"'
    std::string t;
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n')
        fail(l, "unterminated string: a string ends with '\"' on its line");
      char c = s_[i_];
      if (c == '"') break;
      if (c == '\\') {
        if (i_ + 1 < s_.size() && (s_[i_ + 1] == '"' || s_[i_ + 1] == '\\')) {
          t += s_[i_ + 1];
          i_ += 2;
          continue;
        }
        fail(here(), "unknown escape in a string: only \\\" and \\\\ are escapes");
      }
      t += c;
      ++i_;
    }
    ++i_; // '"'
    push(Tok::String, t, l);
  }

  void number(Loc l) {
    std::size_t b = i_;
    bool is_float = false;
    auto digits = [&] {
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
        ++i_;
    };
    digits();
    if (i_ < s_.size() && s_[i_] == '.' && !(i_ + 1 < s_.size() && s_[i_ + 1] == '.')) {
      is_float = true;
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      std::size_t save = i_;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        is_float = true;
        digits();
      } else {
        i_ = save;
      }
    }
    if (i_ < s_.size() && name_char(s_[i_])) fail(here(), "invalid number literal");
    std::string t;
    for (std::size_t k = b; k < i_; ++k)
      if (s_[k] != '_') t += s_[k];
    push(is_float ? Tok::Float : Tok::Int, t, l);
  }
};

} // namespace

LexResult lex(const SourceFile &src) { return Lexer(src).run(); }

} // namespace pipecheck::spec
