#include "spec/parse.hpp"

#include "spec/lexer.hpp"
#include "spec/validate.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>

namespace pipecheck::spec {

namespace {

constexpr int kMaxExprDepth = 200;

const std::set<std::string> kReserved = {"kernel", "pipeline", "param", "in",    "out",  "scratch", "alias",
                                         "body",   "when",     "if",    "else",  "elif", "for",     "and",
                                         "or",     "not",      "None",  "zeros", "while"};

class Parser {
public:
  explicit Parser(LexResult lexed) : lx_(std::move(lexed)) {}

  ParseResult run() {
    ParseResult r;
    if (!lx_.errors.empty()) {
      r.errors = lx_.errors;
      return r;
    }
    try {
      File f = file();
      r.file = std::move(f);
    } catch (const Diagnostic &d) {
      r.errors.push_back(d);
    }
    return r;
  }

private:
  LexResult lx_;
  std::size_t p_ = 0;
  std::size_t next_comment_ = 0;
  int expr_depth_ = 0;

  // ------------------------------------------------------------ token helpers
  const Token &peek(std::size_t k = 0) const {
    std::size_t i = std::min(p_ + k, lx_.tokens.size() - 1);
    return lx_.tokens[i];
  }
  const Token &advance() {
    const Token &t = lx_.tokens[p_];
    if (p_ + 1 < lx_.tokens.size()) ++p_;
    return t;
  }
  bool is_punct(const char *s, std::size_t k = 0) const {
    return peek(k).kind == Tok::Punct && peek(k).text == s;
  }
  // Where a subscripted expression's local goes (Parser::subscripted):
  // before the statement being parsed; null where none may.
  std::vector<Stmt> *hoisted_ = nullptr;
  std::string unhoisted_ = "a declaration (an index map, a shape, a param)";
  int hoisted_count_ = 0; // per kernel: a printed kernel parses back to the same names
  // Within its scope, subscripted expressions are bad input (`what` says where).
  struct Unhoisted {
    Parser &p;
    std::vector<Stmt> *saved;
    std::string saved_what;
    Unhoisted(Parser &parser, std::string what)
        : p(parser), saved(parser.hoisted_), saved_what(std::move(parser.unhoisted_)) {
      p.hoisted_ = nullptr;
      p.unhoisted_ = std::move(what);
    }
    ~Unhoisted() {
      p.hoisted_ = saved;
      p.unhoisted_ = std::move(saved_what);
    }
  };
  // Within its scope, they are bound into `to`.
  struct Hoisting {
    Parser &p;
    std::vector<Stmt> *saved;
    Hoisting(Parser &parser, std::vector<Stmt> *to) : p(parser), saved(parser.hoisted_) { p.hoisted_ = to; }
    ~Hoisting() { p.hoisted_ = saved; }
  };

  bool is_name(const char *s, std::size_t k = 0) const {
    return peek(k).kind == Tok::Name && peek(k).text == s;
  }
  static std::string describe(const Token &t) {
    switch (t.kind) {
    case Tok::Name: return "'" + t.text + "'";
    case Tok::Int:
    case Tok::Float: return "number " + t.text;
    case Tok::String: return "string \"" + t.text + "\"";
    case Tok::Punct: return "'" + t.text + "'";
    case Tok::Newline: return "end of line";
    case Tok::Indent: return "an indented block";
    case Tok::Dedent: return "the end of a block";
    case Tok::End: return "end of file";
    }
    return "?";
  }
  [[noreturn]] void fail(Loc l, std::string msg) const {
    throw Diagnostic{Severity::error, l, std::move(msg), {}};
  }
  [[noreturn]] void expected(const std::string &what) const {
    fail(peek().loc, "expected " + what + ", found " + describe(peek()));
  }
  Loc expect_punct(const char *s) {
    if (!is_punct(s)) expected(std::string("'") + s + "'");
    return advance().loc;
  }
  Loc expect_name(const char *s) {
    if (!is_name(s)) expected(std::string("'") + s + "'");
    return advance().loc;
  }
  std::string identifier(const char *what) {
    if (peek().kind != Tok::Name) expected(what);
    if (kReserved.count(peek().text))
      fail(peek().loc, "'" + peek().text + "' is a keyword and cannot be used as " + what);
    return advance().text;
  }
  void expect_newline() {
    if (peek().kind != Tok::Newline) expected("end of line");
    advance();
  }

  // ---------------------------------------------------------------- comments
  std::vector<std::string> take_leading(int line) {
    std::vector<std::string> r;
    while (next_comment_ < lx_.comments.size() && lx_.comments[next_comment_].loc.line < line) {
      r.push_back(lx_.comments[next_comment_].text);
      ++next_comment_;
    }
    return r;
  }
  std::string take_trailing(int line) {
    if (next_comment_ < lx_.comments.size() && lx_.comments[next_comment_].loc.line == line &&
        !lx_.comments[next_comment_].own_line)
      return lx_.comments[next_comment_++].text;
    return {};
  }
  Comments comments_for(int line, int trailing_line) {
    Comments c;
    c.leading = take_leading(line);
    c.trailing = take_trailing(trailing_line);
    return c;
  }
  /// Comments for an item that starts at `start` and ended its first line at
  /// the current token (before the newline is consumed).
  Comments item_comments(Loc start) {
    Comments c;
    c.leading = take_leading(start.line);
    // Any comments inside a multi-line item are kept as trailing text.
    int end_line = peek().loc.line;
    std::string t;
    while (next_comment_ < lx_.comments.size() && lx_.comments[next_comment_].loc.line <= end_line) {
      if (!t.empty()) t += " #";
      t += lx_.comments[next_comment_].text;
      ++next_comment_;
    }
    c.trailing = t;
    return c;
  }

  // -------------------------------------------------------------------- file
  File file() {
    File f;
    while (peek().kind == Tok::Newline)
      advance();
    while (peek().kind != Tok::End) {
      if (peek().kind == Tok::Indent) fail(peek().loc, "unexpected indentation at top level");
      if (is_name("kernel")) {
        f.units.emplace_back(kernel());
      } else if (is_name("pipeline")) {
        f.units.emplace_back(pipeline());
      } else {
        expected("'kernel' or 'pipeline'");
      }
      while (peek().kind == Tok::Newline)
        advance();
    }
    f.trailing.leading = take_leading(std::numeric_limits<int>::max());
    for (const auto &c : lx_.comments)
      add_expectations(f, c);
    return f;
  }

  static void add_expectations(File &f, const Comment &c) {
    std::size_t b = c.text.find_first_not_of(" \t");
    if (b == std::string::npos || c.text.compare(b, 7, "expect:") != 0) return;
    std::string rest = c.text.substr(b + 7);
    std::size_t pos = 0;
    while (pos <= rest.size()) {
      std::size_t comma = rest.find(',', pos);
      std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      std::size_t s = item.find_first_not_of(" \t");
      std::size_t e = item.find_last_not_of(" \t");
      if (s != std::string::npos) {
        std::string rule = item.substr(s, e - s + 1);
        // Text after the rule id (e.g. an explanation in parentheses) is not part of it.
        std::size_t sp = rule.find_first_of(" \t(");
        if (sp != std::string::npos) rule = rule.substr(0, sp);
        f.expectations.push_back(Expectation{c.loc.line, rule, c.loc});
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }

  // ------------------------------------------------------------------ kernel
  KernelSpec kernel() {
    KernelSpec k;
    hoisted_count_ = 0;
    Loc start = expect_name("kernel");
    k.loc = start;
    k.name = identifier("a kernel name");
    expect_punct(":");
    k.comments = item_comments(start);
    expect_newline();
    if (peek().kind != Tok::Indent) expected("an indented kernel body");
    advance();
    std::set<std::string> seen_settings;
    while (peek().kind != Tok::Dedent && peek().kind != Tok::End) {
      const Token &t = peek();
      if (t.kind != Tok::Name) expected("a kernel item (param, grid, in, out, scratch, alias, body, ...)");
      Loc l = t.loc;
      if (t.text == "param") {
        k.params.push_back(param());
      } else if (t.text == "grid") {
        if (k.grid) fail(l, "duplicate 'grid'");
        advance();
        expect_punct("=");
        k.grid = grid_tuple();
        k.grid_loc = l;
        k.grid_comments = item_comments(l);
        expect_newline();
      } else if (t.text == "dimension_semantics") {
        if (k.dimension_semantics) fail(l, "duplicate 'dimension_semantics'");
        advance();
        expect_punct("=");
        k.dimension_semantics = semantics_tuple();
        k.dimension_semantics_loc = l;
        k.dimension_semantics_comments = item_comments(l);
        expect_newline();
      } else if (t.text == "target" || t.text == "backend" || t.text == "vmem_limit_bytes" ||
                 t.text == "max_concurrent_steps" || t.text == "delay_release") {
        if (!seen_settings.insert(t.text).second) fail(l, "duplicate '" + t.text + "'");
        Setting s;
        s.key = advance().text;
        s.loc = l;
        expect_punct("=");
        if (s.key == "target" || s.key == "backend") {
          Loc vl = peek().loc;
          s.value = Expr::var(identifier(s.key == "target" ? "a target name" : "a backend name"), vl);
        } else {
          s.value = expr();
        }
        s.comments = item_comments(l);
        expect_newline();
        k.settings.push_back(std::move(s));
      } else if (t.text == "in" || t.text == "out" || t.text == "scratch") {
        k.operands.push_back(operand());
      } else if (t.text == "alias") {
        Alias a;
        a.loc = advance().loc;
        a.input = identifier("an input name");
        expect_punct("->");
        a.output = identifier("an output name");
        a.comments = item_comments(l);
        expect_newline();
        k.aliases.push_back(std::move(a));
      } else if (t.text == "body") {
        if (k.body_loc.line != 0) fail(l, "duplicate 'body'");
        advance();
        k.body_loc = l;
        expect_punct(":");
        k.body_comments = item_comments(l);
        expect_newline();
        k.body = block(0);
      } else if (t.text == "reference" && is_punct(":", 1)) {
        reference_section(k);
      } else if (t.text == "prefetch") {
        k.prefetches.push_back(prefetch());
      } else {
        fail(l,
             "unknown kernel item '" + t.text +
                 "'; expected param, grid, dimension_semantics, target, vmem_limit_bytes, "
                 "max_concurrent_steps, delay_release, in, out, scratch, prefetch, alias, body or reference");
      }
    }
    if (peek().kind == Tok::Dedent) advance();
    return k;
  }

  // `prefetch NAME: DTYPE[n]` (or `[b, n]`, up to rank 4), then given contents (`= [v, ...]` or
  // `from "FILE"`), constraints in any order (`in [lo, hi)`, `nondecreasing`,
  // `sum == s`), or both.
  Prefetch prefetch() {
    Prefetch p;
    p.loc = expect_name("prefetch");
    p.name = identifier("a prefetch name");
    expect_punct(":");
    p.dtype = dtype();
    Loc sl = peek().loc;
    auto sh = shape();
    if (sh.empty() || sh.size() > 4)
      fail(sl, "a prefetch operand has rank 1 to 4 (`" + p.name + ": i32[n]`, `" + p.name +
                   ": i32[b, n]`), not " + std::to_string(sh.size()));
    p.length = sh[0];
    for (std::size_t d = 1; d < sh.size(); ++d)
      p.length = Expr::binary(Op::Mul, std::move(p.length), sh[d], sh[d].loc);
    if (sh.size() > 1) p.dims = std::move(sh);
    if (is_punct("=")) {
      advance();
      expect_punct("[");
      std::vector<Expr> v;
      while (!is_punct("]")) {
        v.push_back(expr());
        if (!is_punct(",")) break;
        advance();
      }
      expect_punct("]");
      p.values = std::move(v);
    } else if (peek().kind == Tok::Name && peek().text == "from") {
      advance();
      if (peek().kind != Tok::String)
        fail(peek().loc, "expected the file the contents of prefetch '" + p.name +
                             "' come from, as a string (`from \"" + p.name + ".npy\"`), found " +
                             describe(peek()));
      p.file_loc = peek().loc;
      p.file = advance().text;
      if (p.file->empty()) fail(p.file_loc, "the file name of prefetch '" + p.name + "' is empty");
    }
    {
      std::set<std::string> seen;
      while (peek().kind == Tok::Name) {
        Loc l = peek().loc;
        std::string key = advance().text;
        if (key == "from" && p.values)
          fail(l, "the contents of prefetch '" + p.name +
                      "' are given twice: write `= [...]` or `from \"FILE\"`");
        if (!seen.insert(key).second) fail(l, "duplicate constraint '" + key + "'");
        if (key == "in") {
          expect_punct("[");
          p.lo = expr();
          expect_punct(",");
          p.hi = expr();
          expect_punct(")");
        } else if (key == "nondecreasing") {
          p.nondecreasing = true;
        } else if (key == "sum") {
          expect_punct("==");
          p.sum = expr();
        } else {
          fail(l, "unknown prefetch constraint '" + key +
                      "'; expected `in [lo, hi)`, nondecreasing or `sum == s`");
        }
      }
    }
    p.comments = item_comments(p.loc);
    expect_newline();
    return p;
  }

  // `reference:` and its statements; validate.cpp decides which statements
  // a reference may hold.
  void reference_section(KernelSpec &k) {
    Loc l = advance().loc;
    if (k.reference_loc.line != 0) fail(l, "duplicate 'reference'");
    k.reference_loc = l;
    expect_punct(":");
    k.reference_comments = item_comments(l);
    expect_newline();
    k.reference = block(0);
  }

  Param param() {
    Param p;
    p.loc = expect_name("param");
    p.name = identifier("a parameter name");
    if (is_punct("=")) {
      advance();
      p.value = expr();
      if (is_name("in")) {
        advance();
        expect_punct("{");
        if (!is_punct("}")) {
          p.domain.push_back(expr());
          while (is_punct(",")) {
            advance();
            if (is_punct("}")) break;
            p.domain.push_back(expr());
          }
        }
        expect_punct("}");
        if (p.domain.empty()) fail(p.loc, "empty fuzz domain for param '" + p.name + "'");
      }
    } else if (is_punct(">=")) {
      advance();
      // Bounds are arithmetic: `param N >= 1 <= 64` is not a comparison chain.
      p.lo = arith();
      if (is_punct("<=")) {
        advance();
        p.hi = arith();
      }
    } else {
      expected("'=' or '>=' after the parameter name");
    }
    p.comments = item_comments(p.loc);
    expect_newline();
    return p;
  }

  std::vector<Expr> grid_tuple() {
    std::vector<Expr> r;
    if (!is_punct("(")) {
      r.push_back(expr());
      return r;
    }
    // A parenthesized expression list; `(8)` and `(8,)` both mean rank 1.
    advance();
    if (is_punct(")")) {
      advance();
      return r;
    }
    r.push_back(expr());
    while (is_punct(",")) {
      advance();
      if (is_punct(")")) break;
      r.push_back(expr());
    }
    expect_punct(")");
    return r;
  }

  std::vector<DimSemantics> semantics_tuple() {
    std::vector<DimSemantics> r;
    expect_punct("(");
    while (!is_punct(")")) {
      Loc l = peek().loc;
      if (peek().kind != Tok::Name) expected("parallel, arbitrary or sequential");
      std::string s = advance().text;
      if (s == "parallel")
        r.push_back(DimSemantics::parallel);
      else if (s == "arbitrary")
        r.push_back(DimSemantics::arbitrary);
      else if (s == "sequential")
        r.push_back(DimSemantics::sequential);
      else
        fail(l, "unknown dimension semantics '" + s + "'; expected parallel, arbitrary or sequential");
      if (!is_punct(",")) break;
      advance();
    }
    expect_punct(")");
    return r;
  }

  DType dtype() {
    Loc l = peek().loc;
    if (peek().kind != Tok::Name) expected("a dtype (f32, f16, bf16, i32, i16, i8, u8, bool)");
    std::string s = advance().text;
    auto d = parse_dtype(s);
    if (!d) fail(l, "unknown dtype '" + s + "'; expected f32, f16, bf16, i32, i16, i8, u8 or bool");
    return *d;
  }

  std::vector<Expr> shape() {
    std::vector<Expr> r;
    expect_punct("[");
    if (!is_punct("]")) {
      r.push_back(expr());
      while (is_punct(",")) {
        advance();
        if (is_punct("]")) break;
        r.push_back(expr());
      }
    }
    expect_punct("]");
    return r;
  }

  // The options after an operand's shape (or after `in x:` in an
  // emit_pipeline): block=, index=, buffered=, revisit=, memory_space=.
  void operand_options(Operand &o) {
    std::set<std::string> seen;
    while (peek().kind == Tok::Name) {
      Loc l = peek().loc;
      std::string key = advance().text;
      if (!seen.insert(key).second) fail(l, "duplicate option '" + key + "'");
      expect_punct("=");
      if (key == "block") {
        std::vector<std::optional<Expr>> b;
        expect_punct("(");
        while (!is_punct(")")) {
          if (is_name("None")) {
            advance();
            b.push_back(std::nullopt);
          } else {
            b.push_back(expr());
          }
          if (!is_punct(",")) break;
          advance();
        }
        expect_punct(")");
        o.block_shape = std::move(b);
      } else if (key == "index") {
        IndexMap m;
        expect_punct("(");
        while (!is_punct(")")) {
          m.params.push_back(identifier("an index variable"));
          if (!is_punct(",")) break;
          advance();
        }
        expect_punct(")");
        expect_punct("->");
        expect_punct("(");
        while (!is_punct(")")) {
          m.results.push_back(expr());
          if (!is_punct(",")) break;
          advance();
        }
        expect_punct(")");
        o.index_map = std::move(m);
      } else if (key == "buffered") {
        if (is_punct("(")) {
          advance();
          o.pipeline_mode.buffer_count = expr();
          if (is_punct(",")) {
            advance();
            if (!is_punct(")")) {
              expect_name("lookahead");
              o.pipeline_mode.lookahead = true;
            }
          }
          expect_punct(")");
        } else {
          o.pipeline_mode.buffer_count = expr();
        }
      } else if (key == "revisit") {
        Loc vl = peek().loc;
        std::string v = peek().kind == Tok::Name ? advance().text : "";
        if (v == "any")
          o.pipeline_mode.revisit = Revisit::any;
        else if (v == "immediate")
          o.pipeline_mode.revisit = Revisit::immediate;
        else
          fail(vl, "expected 'any' or 'immediate' for revisit");
      } else if (key == "memory_space") {
        Loc vl = peek().loc;
        std::string v = peek().kind == Tok::Name ? advance().text : "";
        if (v == "vmem")
          o.memory_space = MemorySpace::vmem;
        else if (v == "any")
          o.memory_space = MemorySpace::any;
        else if (v == "smem")
          o.memory_space = MemorySpace::smem;
        else if (v == "hbm")
          o.memory_space = MemorySpace::hbm;
        else if (v == "acc")
          o.memory_space = MemorySpace::acc;
        else
          fail(vl, "expected vmem, any, smem, hbm or acc for memory_space");
      } else {
        fail(l, "unknown operand option '" + key +
                    "'; expected block, index, buffered, revisit or memory_space");
      }
    }
  }

  Operand operand() {
    Operand o;
    o.loc = peek().loc;
    std::string role = advance().text;
    o.role = role == "in" ? Role::in : role == "out" ? Role::out : Role::scratch;
    o.name = identifier("an operand name");
    expect_punct(":");
    if (is_name("dma_sem") || is_name("semaphore")) {
      // pltpu.SemaphoreType.DMA / REGULAR, optionally an array of them.
      Loc sl = peek().loc;
      o.sem = advance().text == "dma_sem" ? SemKind::dma : SemKind::regular;
      if (o.role != Role::scratch) fail(sl, "a semaphore is scratch: 'scratch " + o.name + ": dma_sem[n]'");
      o.dtype = DType::i32;
      if (is_punct("[")) o.shape = shape();
    } else {
      o.dtype = dtype();
      o.shape = shape();
    }
    operand_options(o);
    o.comments = item_comments(o.loc);
    expect_newline();
    return o;
  }

  // ---------------------------------------------------------------- pipeline
  Program pipeline() {
    Program p;
    hoisted_count_ = 0;
    Loc start = expect_name("pipeline");
    p.loc = start;
    p.name = identifier("a pipeline name");
    expect_punct(":");
    p.comments = item_comments(start);
    expect_newline();
    if (peek().kind != Tok::Indent) expected("an indented pipeline body");
    advance();
    while (peek().kind != Tok::Dedent && peek().kind != Tok::End) {
      if (is_name("param")) {
        p.params.push_back(param());
      } else if ((is_name("hbm") || is_name("sram") || is_name("smem") || is_name("acc") || is_name("sem")) &&
                 peek(1).kind == Tok::Name) {
        p.buffers.push_back(buffer());
      } else {
        append_statement(p.body, 0);
      }
    }
    if (peek().kind == Tok::Dedent) advance();
    return p;
  }

  Buffer buffer() {
    Buffer b;
    b.loc = peek().loc;
    std::string kind = advance().text;
    b.kind = kind == "hbm"    ? BufferKind::hbm
             : kind == "sram" ? BufferKind::sram
             : kind == "smem" ? BufferKind::smem
             : kind == "sem"  ? BufferKind::sem
                              : BufferKind::acc;
    b.name = identifier("a buffer name");
    if (is_punct("[")) {
      advance();
      b.slots = expr();
      expect_punct("]");
    }
    expect_punct(":");
    if (b.kind == BufferKind::sem) {
      Loc sl = peek().loc;
      if (!is_name("dma_sem") && !is_name("semaphore"))
        fail(sl, "expected 'dma_sem' or 'semaphore' after 'sem " + b.name + ":'");
      b.sem = advance().text == "dma_sem" ? SemKind::dma : SemKind::regular;
      b.dtype = DType::i32;
      if (b.slots)
        fail(b.loc, "a semaphore array takes its size after the type: 'sem " + b.name + ": dma_sem[n]'");
      if (is_punct("[")) b.shape = shape();
    } else {
      b.dtype = dtype();
      b.shape = shape();
    }
    b.comments = item_comments(b.loc);
    expect_newline();
    return b;
  }

  // -------------------------------------------------------------- statements
  Block block(int depth) {
    if (peek().kind != Tok::Indent) expected("an indented block");
    advance();
    Block b;
    while (peek().kind != Tok::Dedent && peek().kind != Tok::End) {
      append_statement(b, depth + 1);
    }
    if (peek().kind == Tok::Dedent) advance();
    return b;
  }

  // The next statement onto `b`, after the locals of its subscripted
  // expressions (Parser::subscripted).
  void append_statement(Block &b, int depth) {
    std::vector<Stmt> hoisted;
    Stmt st = statement(depth, hoisted);
    for (auto &h : hoisted)
      b.push_back(std::move(h));
    b.push_back(std::move(st));
  }

  // `hoisted` receives the locals of its subscripted expressions
  // (Parser::subscripted), which go just before it.
  Stmt statement(int depth, std::vector<Stmt> &hoisted) {
    Unhoisted none(*this, "this statement (only in a binding's or a store's value, a store's subscripts, a "
                          "'when'/'if' condition or loop bounds)");
    Stmt s;
    s.loc = peek().loc;
    const Token &t = peek();
    if (t.kind != Tok::Name) expected("a statement");
    if (t.text == "when" || t.text == "if") {
      s.kind = if_stmt(depth, s, &hoisted);
      return s;
    }
    if (t.text == "for") {
      For f;
      advance();
      f.var = identifier("a loop variable");
      expect_name("in");
      expect_name("range");
      expect_punct("(");
      {
        Hoisting bounds(*this, &hoisted);
        Expr a = expr();
        if (is_punct(",")) {
          advance();
          f.lo = std::move(a);
          f.hi = expr();
        } else {
          f.lo = Expr::integer(0, s.loc);
          f.hi = std::move(a);
        }
      }
      expect_punct(")");
      expect_punct(":");
      s.comments = item_comments(s.loc);
      expect_newline();
      f.body = block(depth);
      s.kind = std::move(f);
      return s;
    }
    if (t.text == "while") {
      // `while cond, bound=n:` (lax.while_loop): the bound the check uses is
      // part of the loop (spec::For, is_while).
      advance();
      Unhoisted each(*this, "a 'while' condition (it runs before every iteration)");
      Expr cond = expr();
      if (!is_punct(","))
        fail(peek().loc, "a while loop states the bound its check uses: 'while COND, bound=N:', found " +
                             describe(peek()));
      advance();
      if (!is_name("bound") || !is_punct("=", 1))
        fail(peek().loc, "expected 'bound=N' after the while condition, found " + describe(peek()));
      advance();
      advance();
      Expr bound = expr();
      expect_punct(":");
      s.comments = item_comments(s.loc);
      expect_newline();
      Block body = block(depth);
      s.kind = make_while(std::move(cond), std::move(bound), std::move(body), s.loc);
      return s;
    }
    if (t.text == "else" || t.text == "elif") fail(t.loc, "'" + t.text + "' without a matching 'if'");
    if (t.text == "emit_pipeline" && is_punct("(", 1)) {
      s.kind = emit_pipeline(depth, s);
      return s;
    }
    if ((t.text == "copy_in_start" || t.text == "copy_out_start") && is_punct("(", 1)) {
      Copy c;
      c.kind = t.text == "copy_in_start" ? CopyKind::in_start : CopyKind::out_start;
      advance();
      advance();
      c.src = ref_expr();
      expect_punct(",");
      c.dst = ref_expr();
      // `, offset=(...)` and, on a copy in, `, zeros=True`.
      bool seen_zeros = false;
      while (is_punct(",")) {
        advance();
        const Token &k = peek();
        if (is_name("zeros") && is_punct("=", 1)) {
          if (c.kind != CopyKind::in_start)
            fail(k.loc, "zeros= applies to copy_in_start (a fetch that fills the slot's part past the "
                        "array with zeros); a write-back writes only what is in bounds");
          if (seen_zeros) fail(k.loc, "zeros= given twice");
          advance();
          advance();
          if (!is_name("True") && !is_name("False"))
            fail(peek().loc, "expected True or False after 'zeros='");
          c.zeros = advance().text == "True";
          seen_zeros = true;
          continue;
        }
        if (is_name("offset") && is_punct("=", 1) && c.offset.op != Op::None)
          fail(k.loc, "offset= given twice");
        if (!is_name("offset") || !is_punct("=", 1))
          fail(k.loc, c.kind == CopyKind::in_start
                          ? "expected 'offset=(...)' or 'zeros=True' after the destination of " + t.text
                          : "expected 'offset=(...)' after the destination of " + t.text);
        advance();
        advance();
        c.offset = expr();
        if (c.offset.op != Op::Tuple)
          fail(c.offset.loc, "offset= takes a tuple of element offsets, one per kept dim of the slot: (1,)");
      }
      expect_punct(")");
      s.kind = std::move(c);
    } else if ((t.text == "copy_in_wait" || t.text == "copy_out_wait") && is_punct("(", 1)) {
      Copy c;
      c.kind = t.text == "copy_in_wait" ? CopyKind::in_wait : CopyKind::out_wait;
      advance();
      advance();
      Expr r = ref_expr();
      if (c.kind == CopyKind::in_wait) {
        c.dst = std::move(r);
        c.src = Expr::leaf(Op::None, c.dst.loc);
        if (is_punct(",") && is_name("keep", 1))
          fail(peek(1).loc,
               "keep= applies to copy_out_wait (a write-back that leaves its block in the slot); a "
               "copy in's slot holds its block after the wait anyway");
      } else {
        c.src = std::move(r);
        c.dst = Expr::leaf(Op::None, c.src.loc);
        if (is_punct(",")) {
          advance();
          if (!is_name("keep") || !is_punct("=", 1) || (!is_name("True", 2) && !is_name("False", 2)))
            fail(peek().loc, "expected 'keep=True' after the slot of copy_out_wait");
          advance();
          advance();
          c.keep = advance().text == "True";
        }
      }
      expect_punct(")");
      s.kind = std::move(c);
    } else if (t.text == "wgmma" && is_punct("(", 1)) {
      Wgmma w;
      advance();
      advance();
      w.acc = ref_expr();
      expect_punct(",");
      w.a = ref_expr();
      expect_punct(",");
      w.b = ref_expr();
      // `, trans_a=True` / `, trans_b=True`: the operand read transposed.
      while (is_punct(",")) {
        advance();
        const Token &k = peek();
        if (k.kind != Tok::Name || (k.text != "trans_a" && k.text != "trans_b"))
          expected("wgmma's trans_a=True or trans_b=True");
        const bool a_side = k.text == "trans_a";
        advance();
        expect_punct("=");
        if (!is_name("True") && !is_name("False")) expected("True or False");
        (a_side ? w.trans_a : w.trans_b) = advance().text == "True";
      }
      expect_punct(")");
      s.kind = std::move(w);
    } else if (auto d = dma_stmt()) {
      s.kind = std::move(*d);
    } else if (t.text == "commit_smem" && is_punct("(", 1) && is_punct(")", 2)) {
      advance();
      advance();
      advance();
      s.kind = CommitSmem{};
    } else if (t.text == "wgmma_wait" && is_punct("(", 1)) {
      WgmmaWait w;
      advance();
      advance();
      w.n = expr();
      expect_punct(")");
      s.kind = std::move(w);
    } else if (is_punct("=", 1)) {
      Let l;
      l.name = identifier("a variable name");
      advance();
      Hoisting value(*this, &hoisted);
      l.value = expr();
      s.kind = std::move(l);
    } else {
      Hoisting store(*this, &hoisted);
      Expr target = postfix();
      if (target.op != Op::Ref)
        fail(s.loc, "expected a store 'ref[...] = value', a binding 'name = value' or a statement");
      Assign a;
      a.target = std::move(target);
      if (is_punct("=")) {
        advance();
      } else if (is_punct("+=")) {
        advance();
        a.accumulate = true;
      } else {
        expected("'=' or '+='");
      }
      a.value = expr();
      s.kind = std::move(a);
    }
    s.comments = item_comments(s.loc);
    expect_newline();
    return s;
  }

  // `emit_pipeline(grid=(...)):` then indented `in x: OPTIONS` / `out o:
  // OPTIONS` lines and `body:` with the inner body (pltpu.emit_pipeline).
  EmitPipeline emit_pipeline(int depth, Stmt &s) {
    EmitPipeline e;
    advance();
    expect_punct("(");
    Loc gl = peek().loc;
    if (!is_name("grid")) fail(gl, "expected 'grid=(...)' in emit_pipeline(...)");
    advance();
    expect_punct("=");
    e.grid = grid_tuple();
    expect_punct(")");
    expect_punct(":");
    s.comments = item_comments(s.loc);
    expect_newline();
    if (peek().kind != Tok::Indent) expected("indented 'in'/'out' specs and a 'body:' of the emit_pipeline");
    advance();
    while (peek().kind != Tok::Dedent && peek().kind != Tok::End) {
      const Token &t = peek();
      Loc l = t.loc;
      if (t.kind == Tok::Name && (t.text == "in" || t.text == "out")) {
        if (e.body_loc.line != 0) fail(l, "the emit_pipeline's specs come before its 'body:'");
        Operand o;
        o.loc = l;
        o.role = advance().text == "in" ? Role::in : Role::out;
        o.name = identifier("the name of a memory_space=any operand");
        expect_punct(":");
        operand_options(o);
        o.comments = item_comments(l);
        expect_newline();
        e.specs.push_back(std::move(o));
      } else if (t.kind == Tok::Name && t.text == "body" && is_punct(":", 1)) {
        if (e.body_loc.line != 0) fail(l, "duplicate 'body'");
        advance();
        advance();
        e.body_loc = l;
        e.body_comments = item_comments(l);
        expect_newline();
        e.body = block(depth + 1);
      } else {
        fail(l, "expected 'in NAME: ...', 'out NAME: ...' or 'body:' in an emit_pipeline");
      }
    }
    if (peek().kind == Tok::Dedent) advance();
    if (e.body_loc.line == 0) fail(s.loc, "the emit_pipeline has no 'body:'");
    return e;
  }

  /// A DMA or semaphore statement (ir.hpp's Dma), or nullopt when the tokens
  /// ahead are none.
  std::optional<Dma> dma_stmt() {
    const Token &t = peek();
    Dma d;
    d.src = d.dst = d.sem = d.n = Expr::leaf(Op::None, t.loc);
    auto method = [&] {
      expect_punct(".");
      Loc ml = peek().loc;
      std::string m = identifier("'start' or 'wait'");
      if (m != "start" && m != "wait")
        fail(ml, "a DMA descriptor has the methods start() and wait(), not '" + m + "'");
      d.action = m == "start" ? DmaAction::start : DmaAction::wait;
      expect_punct("(");
      expect_punct(")");
    };
    auto three = [&] {
      expect_punct("(");
      d.src = ref_expr();
      expect_punct(",");
      d.dst = ref_expr();
      expect_punct(",");
      d.sem = ref_expr();
      expect_punct(")");
    };
    if (is_punct(".", 1) && (peek(2).text == "start" || peek(2).text == "wait")) {
      d.descriptor = advance().text;
      method();
      return d;
    }
    if (is_punct("=", 1) && peek(2).text == "async_copy" && is_punct("(", 3)) {
      d.action = DmaAction::bind;
      d.descriptor = identifier("a descriptor name");
      advance();
      advance();
      three();
      return d;
    }
    if (!is_punct("(", 1)) return std::nullopt;
    if (t.text == "async_copy") {
      advance();
      three();
      d.method = true;
      method();
    } else if (t.text == "dma_start") {
      advance();
      three();
      d.action = DmaAction::start;
    } else if (t.text == "dma_wait") {
      advance();
      expect_punct("(");
      d.dst = ref_expr();
      expect_punct(",");
      d.sem = ref_expr();
      expect_punct(")");
      d.action = DmaAction::wait;
    } else if (t.text == "sync_copy") {
      advance();
      expect_punct("(");
      d.src = ref_expr();
      expect_punct(",");
      d.dst = ref_expr();
      expect_punct(")");
      d.action = DmaAction::sync_copy;
    } else if (t.text == "semaphore_signal" || t.text == "semaphore_wait") {
      d.action = advance().text == "semaphore_signal" ? DmaAction::signal : DmaAction::sem_wait;
      expect_punct("(");
      d.sem = ref_expr();
      if (is_punct(",")) {
        advance();
        d.n = expr();
      } else {
        d.n = Expr::integer(1, d.sem.loc);
      }
      expect_punct(")");
    } else {
      return std::nullopt;
    }
    return d;
  }

  // `hoisted`: where the condition's subscripted expressions go (null for
  // an `elif`, whose condition runs only where the first does not hold).
  If if_stmt(int depth, Stmt &s, std::vector<Stmt> *hoisted) {
    If f;
    f.is_when = advance().text == "when";
    {
      Unhoisted elif (*this, "an 'elif' condition");
      Hoisting cond(*this, hoisted);
      f.cond = expr();
    }
    expect_punct(":");
    s.comments = item_comments(s.loc);
    expect_newline();
    f.then_body = block(depth);
    if (!f.is_when && is_name("elif")) {
      Stmt inner;
      inner.loc = peek().loc;
      inner.kind = if_stmt(depth, inner, nullptr);
      f.else_body.push_back(std::move(inner));
    } else if (!f.is_when && is_name("else")) {
      Loc el = advance().loc;
      expect_punct(":");
      // A comment on the else line is kept with the first statement of the else block.
      std::string trailing = item_comments(el).trailing;
      expect_newline();
      f.else_body = block(depth);
      if (!trailing.empty() && !f.else_body.empty())
        f.else_body.front().comments.leading.insert(f.else_body.front().comments.leading.begin(), trailing);
    }
    return f;
  }

  Expr ref_expr() {
    Loc l = peek().loc;
    std::string n = identifier("a buffer reference");
    if (is_punct("[")) return Expr::ref(n, subscripts(), l);
    return Expr::var(n, l);
  }

  std::vector<Expr> subscripts() {
    expect_punct("[");
    std::vector<Expr> r;
    while (!is_punct("]")) {
      r.push_back(subscript());
      if (!is_punct(",")) break;
      advance();
    }
    expect_punct("]");
    return r;
  }

  Expr subscript() {
    Loc l = peek().loc;
    if (is_punct("...")) {
      advance();
      return Expr::leaf(Op::Ellipsis, l);
    }
    // `x[:, None]`: a new axis of a value (validation rejects it on a buffer).
    if (is_name("None") && (is_punct(",", 1) || is_punct("]", 1))) {
      advance();
      return Expr::leaf(Op::None, l);
    }
    Expr lo = Expr::leaf(Op::None, l);
    if (!is_punct(":")) {
      lo = expr();
      if (!is_punct(":")) return lo;
    }
    advance(); // ':'
    Expr hi = Expr::leaf(Op::None, peek().loc);
    if (!is_punct(",") && !is_punct("]")) hi = expr();
    Expr s = Expr::binary(Op::Slice, std::move(lo), std::move(hi), l);
    return s;
  }

  // ------------------------------------------------------------- expressions
  static std::string too_deep() {
    return "expression is nested too deeply (more than " + std::to_string(kMaxExprDepth) +
           " levels; each operator of a chain such as a + b + c is one level: split a long sum into "
           "parenthesized parts, (a + b) + (c + d), or into locals)";
  }
  struct DepthGuard {
    Parser &p;
    explicit DepthGuard(Parser &q, Loc l) : p(q) {
      if (++p.expr_depth_ > kMaxExprDepth) p.fail(l, too_deep());
    }
    ~DepthGuard() { --p.expr_depth_; }
  };

  // Each operator of a chain (`1 + 1 + ...`) deepens the left-leaning tree by
  // one level, so chains count against the same depth limit as parentheses.
  struct ChainGuard {
    Parser &p;
    int saved;
    explicit ChainGuard(Parser &q) : p(q), saved(q.expr_depth_) {}
    void next(Loc l) {
      if (++p.expr_depth_ > kMaxExprDepth) p.fail(l, too_deep());
    }
    ~ChainGuard() { p.expr_depth_ = saved; }
  };

  Expr expr() {
    DepthGuard g(*this, peek().loc);
    Expr a = and_expr();
    ChainGuard chain(*this);
    while (is_name("or")) {
      Loc l = advance().loc;
      chain.next(l);
      Unhoisted right(*this, "the right side of 'or'");
      a = Expr::binary(Op::Or, std::move(a), and_expr(), l);
    }
    return a;
  }
  Expr and_expr() {
    Expr a = not_expr();
    ChainGuard chain(*this);
    while (is_name("and")) {
      Loc l = advance().loc;
      chain.next(l);
      Unhoisted right(*this, "the right side of 'and'");
      a = Expr::binary(Op::And, std::move(a), not_expr(), l);
    }
    return a;
  }
  // (A level is an expression inside brackets or a call's parentheses, an
  // operator of a chain, or a unary operator: what the message names.)
  Expr not_expr() {
    if (is_name("not")) {
      DepthGuard g(*this, peek().loc);
      Loc l = advance().loc;
      return Expr::unary(Op::Not, not_expr(), l);
    }
    return comparison();
  }
  Expr comparison() {
    Expr a = bit_or();
    static const std::pair<const char *, Op> ops[] = {{"==", Op::Eq}, {"!=", Op::Ne}, {"<", Op::Lt},
                                                      {"<=", Op::Le}, {">", Op::Gt},  {">=", Op::Ge}};
    for (auto [s, op] : ops) {
      if (is_punct(s)) {
        Loc l = advance().loc;
        Expr b = bit_or();
        for (auto [s2, op2] : ops) {
          (void)op2;
          if (is_punct(s2)) fail(peek().loc, "chained comparisons are not supported; use 'and'");
        }
        return Expr::binary(op, std::move(a), std::move(b), l);
      }
    }
    return a;
  }
  // Python's levels: comparisons < `|` < `&` < `+ -`, so `(a < b) & (c < d)`
  // needs its parentheses, as in jnp.
  Expr bit_or() {
    Expr a = bit_and();
    ChainGuard chain(*this);
    while (is_punct("|")) {
      Loc l = advance().loc;
      chain.next(l);
      a = Expr::binary(Op::BitOr, std::move(a), bit_and(), l);
    }
    return a;
  }
  Expr bit_and() {
    Expr a = arith();
    ChainGuard chain(*this);
    while (is_punct("&")) {
      Loc l = advance().loc;
      chain.next(l);
      a = Expr::binary(Op::BitAnd, std::move(a), arith(), l);
    }
    return a;
  }
  Expr arith() {
    Expr a = term();
    ChainGuard chain(*this);
    while (is_punct("+") || is_punct("-")) {
      Loc l = peek().loc;
      chain.next(l);
      Op op = advance().text == "+" ? Op::Add : Op::Sub;
      a = Expr::binary(op, std::move(a), term(), l);
    }
    return a;
  }
  Expr term() {
    Expr a = factor();
    ChainGuard chain(*this);
    while (is_punct("*") || is_punct("/") || is_punct("//") || is_punct("%")) {
      Loc l = peek().loc;
      chain.next(l);
      std::string t = advance().text;
      Op op = t == "*" ? Op::Mul : t == "/" ? Op::Div : t == "//" ? Op::FloorDiv : Op::Mod;
      a = Expr::binary(op, std::move(a), factor(), l);
    }
    return a;
  }
  Expr factor() {
    std::optional<DepthGuard> g;
    if (is_punct("-") || is_punct("+") || is_punct("~")) g.emplace(*this, peek().loc);
    if (is_punct("-")) {
      Loc l = advance().loc;
      // `-5` is a negative literal (so printing an Int(-5) reads back as itself);
      // `-5 ** 2` is still -(5 ** 2).
      if ((peek().kind == Tok::Int || peek().kind == Tok::Float) && !is_punct("**", 1)) {
        // -2**63 as a literal: the one negative value whose magnitude is no int64
        // (what the printer writes for it).
        if (peek().kind == Tok::Int && peek().text == "9223372036854775808") {
          advance();
          return Expr::integer(std::numeric_limits<std::int64_t>::min(), l);
        }
        Expr lit = postfix();
        if (lit.op == Op::Int) {
          lit.int_value = static_cast<std::int64_t>(0ULL - static_cast<unsigned long long>(lit.int_value));
        } else {
          lit.float_value = -lit.float_value;
        }
        lit.loc = l;
        return lit;
      }
      return Expr::unary(Op::Neg, factor(), l);
    }
    if (is_punct("+")) {
      advance();
      return factor();
    }
    if (is_punct("~")) {
      Loc l = advance().loc;
      return Expr::unary(Op::BitNot, factor(), l);
    }
    return power();
  }
  Expr power() {
    Expr a = postfix();
    if (is_punct("**")) {
      DepthGuard g(*this, peek().loc);
      Loc l = advance().loc;
      return Expr::binary(Op::Pow, std::move(a), factor(), l);
    }
    return a;
  }
  // `f(x)[:, None]`, `(a - b)[None, :]`: the value is bound to a local of
  // its own just before the statement (Let::hoisted: printed back in place),
  // the subscript then taken of that local, as of any. Only where the
  // statement evaluates the expression once, before it runs: a binding's or
  // a store's value, a store's subscripts, a `when`/`if` condition, loop
  // bounds; elsewhere (a `while` condition, an `elif`, the right side of
  // `and`/`or`, an index map) it is bad input naming the place.
  Expr subscripted(Expr e, Loc l) {
    if (!is_punct("[")) return e;
    if (!hoisted_)
      fail(peek().loc, "a subscript of an expression ('f(...)[...]', '(...)[...]') is not allowed in " +
                           unhoisted_ +
                           (unhoisted_.rfind("a declaration", 0) == 0
                                ? std::string()
                                : ": bind the expression to a local first ('t = ...', then 't[...]')"));
    Stmt bind;
    bind.loc = l;
    Let let;
    let.name = "__sub" + std::to_string(hoisted_count_++);
    let.value = std::move(e);
    let.hoisted = true;
    const std::string name = let.name;
    bind.kind = std::move(let);
    hoisted_->push_back(std::move(bind));
    Expr r = Expr::ref(name, subscripts(), l);
    if (is_punct("["))
      fail(peek().loc,
           "one subscript per expression: bind the first to a local ('t = ...[...]', then 't[...]')");
    return r;
  }

  Expr postfix() {
    const Token &t = peek();
    Loc l = t.loc;
    if (t.kind == Tok::Int) {
      std::string s = advance().text;
      errno = 0;
      unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
      if (errno == ERANGE || v > 9223372036854775807ULL) fail(l, "integer literal " + s + " is too large");
      return Expr::integer(static_cast<std::int64_t>(v), l);
    }
    if (t.kind == Tok::Float) {
      std::string s = advance().text;
      return Expr::floating(std::strtod(s.c_str(), nullptr), l);
    }
    if (is_punct("(")) {
      advance();
      if (is_punct(")")) {
        advance();
        Expr t = Expr::leaf(Op::Tuple, l);
        return t;
      }
      Expr e = expr();
      if (is_punct(",")) {
        // A tuple: `(a,)`, `(a, b)`; validation allows it only as a shape.
        Expr t = Expr::leaf(Op::Tuple, l);
        t.args.push_back(std::move(e));
        while (is_punct(",")) {
          advance();
          if (is_punct(")")) break;
          t.args.push_back(expr());
        }
        expect_punct(")");
        return t;
      }
      expect_punct(")");
      return subscripted(std::move(e), l);
    }
    if (t.kind != Tok::Name) expected("an expression");
    if (t.text == "zeros") {
      advance();
      return Expr::leaf(Op::Zeros, l);
    }
    if (t.text == "undefined") {
      advance();
      return Expr::leaf(Op::Undefined, l);
    }
    if (t.text == "inf") {
      advance();
      return Expr::floating(std::numeric_limits<double>::infinity(), l);
    }
    if (t.text == "nan") { // (a jnp.nan literal: jnp.var's empty-count guard, a `where(m, x, nan)`)
      advance();
      return Expr::floating(std::numeric_limits<double>::quiet_NaN(), l);
    }
    if (t.text == "None") fail(l, "'None' is only allowed in block shapes and slices");
    if (kReserved.count(t.text)) fail(l, "unexpected keyword '" + t.text + "' in an expression");
    std::string name = advance().text;
    if (is_punct("(")) {
      advance();
      Expr c = Expr::call(name, {}, l);
      std::vector<Expr> kwargs;
      while (!is_punct(")")) {
        if (peek().kind == Tok::Name && is_punct("=", 1)) {
          c.kwarg_names.push_back(advance().text);
          advance();
          kwargs.push_back(expr());
        } else {
          if (!kwargs.empty()) fail(peek().loc, "positional argument after a keyword argument");
          c.args.push_back(expr());
        }
        if (!is_punct(",")) break;
        advance();
      }
      expect_punct(")");
      for (auto &k : kwargs)
        c.args.push_back(std::move(k));
      return subscripted(std::move(c), l);
    }
    if (is_punct("[")) return Expr::ref(name, subscripts(), l);
    return Expr::var(name, l);
  }
};

} // namespace

ParseResult parse(const SourceFile &src) {
  LexResult lx = lex(src);
  return Parser(std::move(lx)).run();
}

std::vector<Diagnostic> load_prefetch_files(File &f, const std::string &pk_path, const PrefetchLoader &load) {
  std::vector<Diagnostic> errs;
  for (auto &u : f.units) {
    auto *k = std::get_if<KernelSpec>(&u);
    if (!k) continue;
    for (auto &p : k->prefetches) {
      if (!p.file) continue;
      const std::string what = "the contents of prefetch '" + p.name + "' from \"" + *p.file + "\"";
      if (!load) {
        errs.push_back({Severity::error,
                        p.file_loc,
                        what + " are not loaded: this reader of .pk files reads no other files (the "
                               "pipecheck command does)",
                        {}});
        continue;
      }
      std::filesystem::path path(*p.file);
      if (path.is_relative() && pk_path != "-" && pk_path != "<stdin>")
        path = std::filesystem::path(pk_path).parent_path() / path;
      LoadedContents c = load(path.string());
      if (!c.values) {
        errs.push_back({Severity::error, p.file_loc, "cannot read " + what + ": " + c.error, {}});
        continue;
      }
      std::vector<Expr> values;
      values.reserve(c.values->size());
      for (std::int64_t v : *c.values)
        values.push_back(Expr::integer(v, p.file_loc));
      p.values = std::move(values);
      p.file_shape = std::move(c.shape);
    }
  }
  return errs;
}

ParseResult parse_and_validate(const SourceFile &src, const PrefetchLoader &load) {
  ParseResult r = parse(src);
  if (!r.file) return r;
  auto errs = load_prefetch_files(*r.file, src.path, load);
  if (errs.empty()) errs = validate(*r.file);
  if (!errs.empty()) {
    r.errors = std::move(errs);
    r.file.reset();
  }
  return r;
}

} // namespace pipecheck::spec
