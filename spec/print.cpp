#include "spec/print.hpp"

#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

namespace pipecheck::spec {

namespace {

// Binding strength, as the parser's grammar levels.
int prec(const Expr &e) {
  switch (e.op) {
  case Op::Or: return 1;
  case Op::And: return 2;
  case Op::Not: return 3;
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge: return 4;
  case Op::BitOr: return 5;
  case Op::BitAnd: return 6;
  case Op::Add:
  case Op::Sub: return 7;
  case Op::Mul:
  case Op::Div:
  case Op::FloorDiv:
  case Op::Mod: return 8;
  case Op::Neg:
  case Op::BitNot: return 9;
  case Op::Pow: return 10;
  case Op::Int: return e.int_value < 0 ? 9 : 11;
  case Op::Float: return (e.float_value < 0 || std::signbit(e.float_value)) ? 9 : 11;
  default: return 11;
  }
}

std::string float_text(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void emit(std::ostream &os, const Expr &e);

void emit_at(std::ostream &os, const Expr &e, int min_prec) {
  if (prec(e) < min_prec) {
    os << "(";
    emit(os, e);
    os << ")";
  } else {
    emit(os, e);
  }
}

void emit_list(std::ostream &os, const std::vector<Expr> &v, std::size_t from = 0,
               std::size_t to = std::string::npos) {
  if (to == std::string::npos) to = v.size();
  for (std::size_t i = from; i < to; ++i) {
    if (i > from) os << ", ";
    emit(os, v[i]);
  }
}

// The values of the hoisted locals (Let::hoisted) of the blocks being
// printed, by name: a ref of one prints as the subscripted expression it
// stands for (names are unique within a kernel).
thread_local std::map<std::string, Expr> *hoisted_values = nullptr;

void emit(std::ostream &os, const Expr &e) {
  switch (e.op) {
  case Op::Int: os << e.int_value; return;
  case Op::Float: os << float_text(e.float_value); return;
  case Op::Name: os << e.name; return;
  case Op::Ellipsis: os << "..."; return;
  case Op::None: os << "None"; return;
  case Op::Zeros: os << "zeros"; return;
  case Op::Undefined: os << "undefined"; return;
  case Op::Slice:
    if (e.args[0].op != Op::None) emit(os, e.args[0]);
    os << ":";
    if (e.args[1].op != Op::None) emit(os, e.args[1]);
    return;
  case Op::Ref:
    if (auto it = hoisted_values ? hoisted_values->find(e.name) : decltype(hoisted_values->end()){};
        hoisted_values && it != hoisted_values->end()) {
      const bool call = it->second.op == Op::Call;
      os << (call ? "" : "(");
      emit(os, it->second);
      os << (call ? "" : ")");
    } else {
      os << e.name;
    }
    os << "[";
    emit_list(os, e.args);
    os << "]";
    return;
  case Op::Call: {
    os << e.name << "(";
    std::size_t npos = e.num_positional();
    emit_list(os, e.args, 0, npos);
    for (std::size_t i = 0; i < e.kwarg_names.size(); ++i) {
      if (npos + i > 0) os << ", ";
      os << e.kwarg_names[i] << "=";
      emit(os, e.args[npos + i]);
    }
    os << ")";
    return;
  }
  case Op::Neg:
    os << "-";
    // `-1` reads back as the literal -1, not as a negation of 1: keep the negation
    // by putting a non-negative number in parentheses (`inf` is a name, `-inf` stays).
    if (prec(e.args[0]) == 11 &&
        (e.args[0].op == Op::Int || (e.args[0].op == Op::Float && std::isfinite(e.args[0].float_value)))) {
      os << "(";
      emit(os, e.args[0]);
      os << ")";
    } else {
      emit_at(os, e.args[0], 9);
    }
    return;
  case Op::BitNot:
    os << "~";
    emit_at(os, e.args[0], 9);
    return;
  case Op::Tuple:
    os << "(";
    emit_list(os, e.args);
    if (e.args.size() == 1) os << ",";
    os << ")";
    return;
  case Op::Not:
    os << "not ";
    emit_at(os, e.args[0], 3);
    return;
  case Op::Pow:
    emit_at(os, e.args[0], 11);
    os << " ** ";
    emit_at(os, e.args[1], 9);
    return;
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
    emit_at(os, e.args[0], 5);
    os << " " << to_string(e.op) << " ";
    emit_at(os, e.args[1], 5);
    return;
  default: {
    int p = prec(e);
    emit_at(os, e.args[0], p);
    os << " " << to_string(e.op) << " ";
    emit_at(os, e.args[1], p + 1);
    return;
  }
  }
}

std::string pad(int indent) { return std::string(static_cast<std::size_t>(indent) * 4, ' '); }

void leading(std::ostream &os, const Comments &c, int indent) {
  for (const auto &l : c.leading)
    os << pad(indent) << "#" << l << "\n";
}
void end_line(std::ostream &os, const Comments &c) {
  if (!c.trailing.empty()) os << "  #" << c.trailing;
  os << "\n";
}

void emit_block(std::ostream &os, const Block &b, int indent);
void emit_operand_options(std::ostream &os, const Operand &o);

void emit_dma(std::ostream &os, const Dma &d) {
  auto args = [&](std::initializer_list<const Expr *> es) {
    os << "(";
    bool first = true;
    for (const Expr *e : es) {
      os << (first ? "" : ", ");
      emit(os, *e);
      first = false;
    }
    os << ")";
  };
  switch (d.action) {
  case DmaAction::bind:
    os << d.descriptor << " = async_copy";
    args({&d.src, &d.dst, &d.sem});
    return;
  case DmaAction::start:
  case DmaAction::wait: {
    const char *m = d.action == DmaAction::start ? ".start()" : ".wait()";
    if (!d.descriptor.empty()) {
      os << d.descriptor << m;
    } else if (d.method) {
      os << "async_copy";
      args({&d.src, &d.dst, &d.sem});
      os << m;
    } else if (d.action == DmaAction::start) {
      os << "dma_start";
      args({&d.src, &d.dst, &d.sem});
    } else {
      os << "dma_wait";
      args({&d.dst, &d.sem});
    }
    return;
  }
  case DmaAction::sync_copy:
    os << "sync_copy";
    args({&d.src, &d.dst});
    return;
  case DmaAction::signal:
  case DmaAction::sem_wait:
    os << (d.action == DmaAction::signal ? "semaphore_signal" : "semaphore_wait");
    args({&d.sem, &d.n});
    return;
  }
}

void emit_stmt(std::ostream &os, const Stmt &s, int indent) {
  leading(os, s.comments, indent);
  os << pad(indent);
  std::visit(
      [&](const auto &k) {
        using T = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<T, Assign>) {
          emit(os, k.target);
          os << (k.accumulate ? " += " : " = ");
          emit(os, k.value);
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, Let>) {
          os << k.name << " = ";
          emit(os, k.value);
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, If>) {
          os << (k.is_when ? "when " : "if ");
          emit(os, k.cond);
          os << ":";
          end_line(os, s.comments);
          emit_block(os, k.then_body, indent + 1);
          const If *cur = &k;
          while (!cur->else_body.empty()) {
            const Block &eb = cur->else_body;
            const If *nested = eb.size() == 1 ? std::get_if<If>(&eb[0].kind) : nullptr;
            if (nested && !nested->is_when && eb[0].comments.leading.empty()) {
              os << pad(indent) << "elif ";
              emit(os, nested->cond);
              os << ":";
              end_line(os, eb[0].comments);
              emit_block(os, nested->then_body, indent + 1);
              cur = nested;
            } else {
              os << pad(indent) << "else:\n";
              emit_block(os, eb, indent + 1);
              break;
            }
          }
        } else if constexpr (std::is_same_v<T, For>) {
          if (k.is_while) {
            os << "while ";
            emit(os, while_cond(k));
            os << ", bound=";
            emit(os, k.hi);
            os << ":";
            end_line(os, s.comments);
            emit_block(os, while_body(k), indent + 1);
            return;
          }
          os << "for " << k.var << " in range(";
          if (!(k.lo.op == Op::Int && k.lo.int_value == 0)) {
            emit(os, k.lo);
            os << ", ";
          }
          emit(os, k.hi);
          os << "):";
          end_line(os, s.comments);
          emit_block(os, k.body, indent + 1);
        } else if constexpr (std::is_same_v<T, Copy>) {
          os << to_string(k.kind) << "(";
          switch (k.kind) {
          case CopyKind::in_start:
          case CopyKind::out_start:
            emit(os, k.src);
            os << ", ";
            emit(os, k.dst);
            if (k.offset.op != Op::None) {
              os << ", offset=";
              emit(os, k.offset);
            }
            if (k.zeros) os << ", zeros=True";
            break;
          case CopyKind::in_wait: emit(os, k.dst); break;
          case CopyKind::out_wait:
            emit(os, k.src);
            if (k.keep) os << ", keep=True";
            break;
          }
          os << ")";
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, Wgmma>) {
          os << "wgmma(";
          emit(os, k.acc);
          os << ", ";
          emit(os, k.a);
          os << ", ";
          emit(os, k.b);
          if (k.trans_a) os << ", trans_a=True";
          if (k.trans_b) os << ", trans_b=True";
          os << ")";
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, WgmmaWait>) {
          os << "wgmma_wait(";
          emit(os, k.n);
          os << ")";
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, Dma>) {
          emit_dma(os, k);
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, CommitSmem>) {
          os << "commit_smem()";
          end_line(os, s.comments);
        } else if constexpr (std::is_same_v<T, EmitPipeline>) {
          os << "emit_pipeline(grid=(";
          emit_list(os, k.grid);
          if (k.grid.size() == 1) os << ",";
          os << ")):";
          end_line(os, s.comments);
          for (const auto &o : k.specs) {
            leading(os, o.comments, indent + 1);
            os << pad(indent + 1) << to_string(o.role) << " " << o.name << ":";
            emit_operand_options(os, o);
            end_line(os, o.comments);
          }
          leading(os, k.body_comments, indent + 1);
          os << pad(indent + 1) << "body:";
          end_line(os, k.body_comments);
          emit_block(os, k.body, indent + 2);
        }
      },
      s.kind);
}

void emit_operand_options(std::ostream &os, const Operand &o) {
  if (o.block_shape) {
    os << " block=(";
    for (std::size_t i = 0; i < o.block_shape->size(); ++i) {
      if (i) os << ", ";
      const auto &b = (*o.block_shape)[i];
      if (b)
        emit(os, *b);
      else
        os << "None";
    }
    if (o.block_shape->size() == 1) os << ",";
    os << ")";
  }
  if (o.index_map) {
    os << " index=(";
    for (std::size_t i = 0; i < o.index_map->params.size(); ++i)
      os << (i ? ", " : "") << o.index_map->params[i];
    os << ") -> (";
    emit_list(os, o.index_map->results);
    os << ")";
  }
  if (o.pipeline_mode.buffer_count) {
    os << " buffered=";
    if (o.pipeline_mode.lookahead)
      os << "(" << print(*o.pipeline_mode.buffer_count) << ", lookahead)";
    else
      os << print(*o.pipeline_mode.buffer_count);
  } else if (o.pipeline_mode.lookahead) {
    os << " buffered=(2, lookahead)";
  }
  if (o.pipeline_mode.revisit == Revisit::any) os << " revisit=any";
  if (o.memory_space != MemorySpace::vmem) os << " memory_space=" << to_string(o.memory_space);
}

void emit_block(std::ostream &os, const Block &b, int indent) {
  const HoistedNames quoted(b); // (a hoisted local prints in place, never as a statement)
  for (const auto &s : b)
    if (const auto *l = std::get_if<Let>(&s.kind); !l || !l->hoisted) emit_stmt(os, s, indent);
}

void emit_param(std::ostream &os, const Param &p) {
  leading(os, p.comments, 1);
  os << pad(1) << "param " << p.name;
  if (p.value) {
    os << " = " << print(*p.value);
    if (!p.domain.empty()) {
      os << " in {";
      emit_list(os, p.domain);
      os << "}";
    }
  } else {
    // Bounds are read as arithmetic, so a comparison or `&` `|` inside one needs parentheses.
    os << " >= ";
    emit_at(os, p.lo ? *p.lo : Expr::integer(0), 7);
    if (p.hi) {
      os << " <= ";
      emit_at(os, *p.hi, 7);
    }
  }
  end_line(os, p.comments);
}

void emit_shape(std::ostream &os, DType d, const std::vector<Expr> &shape, SemKind sem) {
  if (sem != SemKind::none) {
    os << (sem == SemKind::dma ? "dma_sem" : "semaphore");
    if (shape.empty()) return;
    os << "[";
    emit_list(os, shape);
    os << "]";
    return;
  }
  os << to_string(d) << "[";
  emit_list(os, shape);
  os << "]";
}

void emit_kernel(std::ostream &os, const KernelSpec &k) {
  leading(os, k.comments, 0);
  os << "kernel " << k.name << ":";
  end_line(os, k.comments);
  for (const auto &p : k.params)
    emit_param(os, p);
  if (k.grid) {
    leading(os, k.grid_comments, 1);
    os << pad(1) << "grid = (";
    emit_list(os, *k.grid);
    if (k.grid->size() == 1) os << ",";
    os << ")";
    end_line(os, k.grid_comments);
  }
  if (k.dimension_semantics) {
    leading(os, k.dimension_semantics_comments, 1);
    os << pad(1) << "dimension_semantics = (";
    for (std::size_t i = 0; i < k.dimension_semantics->size(); ++i)
      os << (i ? ", " : "") << to_string((*k.dimension_semantics)[i]);
    if (k.dimension_semantics->size() == 1) os << ",";
    os << ")";
    end_line(os, k.dimension_semantics_comments);
  }
  for (const auto &s : k.settings) {
    leading(os, s.comments, 1);
    os << pad(1) << s.key << " = " << print(s.value);
    end_line(os, s.comments);
  }
  for (const auto &p : k.prefetches) {
    leading(os, p.comments, 1);
    os << pad(1) << "prefetch " << p.name << ": " << to_string(p.dtype) << "[";
    if (p.dims.empty()) {
      os << print(p.length);
    } else {
      emit_list(os, p.dims);
    }
    os << "]";
    if (p.file) {
      os << " from \"";
      for (char c : *p.file)
        os << (c == '"' || c == '\\' ? "\\" : "") << c;
      os << "\"";
    } else if (p.values) {
      os << " = [";
      emit_list(os, *p.values);
      os << "]";
    }
    if (p.lo && p.hi) os << " in [" << print(*p.lo) << ", " << print(*p.hi) << ")";
    if (p.nondecreasing) os << " nondecreasing";
    if (p.sum) os << " sum == " << print(*p.sum);
    end_line(os, p.comments);
  }
  for (const auto &o : k.operands) {
    leading(os, o.comments, 1);
    os << pad(1) << to_string(o.role) << " " << o.name << ": ";
    emit_shape(os, o.dtype, o.shape, o.sem);
    emit_operand_options(os, o);
    end_line(os, o.comments);
  }
  for (const auto &a : k.aliases) {
    leading(os, a.comments, 1);
    os << pad(1) << "alias " << a.input << " -> " << a.output;
    end_line(os, a.comments);
  }
  if (k.body_loc.line != 0 || !k.body.empty()) {
    leading(os, k.body_comments, 1);
    os << pad(1) << "body:";
    end_line(os, k.body_comments);
    emit_block(os, k.body, 2);
  }
  if (k.reference_loc.line != 0 || !k.reference.empty()) {
    leading(os, k.reference_comments, 1);
    os << pad(1) << "reference:";
    end_line(os, k.reference_comments);
    emit_block(os, k.reference, 2);
  }
}

void emit_program(std::ostream &os, const Program &p) {
  leading(os, p.comments, 0);
  os << "pipeline " << p.name << ":";
  end_line(os, p.comments);
  for (const auto &q : p.params)
    emit_param(os, q);
  for (const auto &b : p.buffers) {
    leading(os, b.comments, 1);
    os << pad(1) << to_string(b.kind) << " " << b.name;
    if (b.slots) os << "[" << print(*b.slots) << "]";
    os << ": ";
    emit_shape(os, b.dtype, b.shape, b.sem);
    end_line(os, b.comments);
  }
  emit_block(os, p.body, 1);
}

} // namespace

HoistedNames::HoistedNames(const Block &body, const Block &more) : outer_(hoisted_values) {
  if (outer_) values_ = *outer_;
  add(body);
  add(more);
  hoisted_values = &values_;
}

HoistedNames::~HoistedNames() { hoisted_values = outer_; }

void HoistedNames::add(const Block &b) {
  for (const auto &s : b) {
    if (const auto *l = std::get_if<Let>(&s.kind); l && l->hoisted) values_[l->name] = l->value;
    if (const auto *f = std::get_if<If>(&s.kind)) {
      add(f->then_body);
      add(f->else_body);
    } else if (const auto *f = std::get_if<For>(&s.kind)) {
      add(f->body);
    } else if (const auto *p = std::get_if<EmitPipeline>(&s.kind)) {
      add(p->body);
    }
  }
}

std::string print(const Expr &e) {
  std::ostringstream os;
  emit(os, e);
  return os.str();
}

std::string print(const Stmt &s, int indent) {
  std::ostringstream os;
  emit_stmt(os, s, indent);
  return os.str();
}

std::string print(const KernelSpec &k) {
  std::ostringstream os;
  emit_kernel(os, k);
  return os.str();
}

std::string print(const Program &p) {
  std::ostringstream os;
  emit_program(os, p);
  return os.str();
}

std::string print(const File &f) {
  std::ostringstream os;
  bool first = true;
  for (const auto &u : f.units) {
    if (!first) os << "\n";
    first = false;
    std::visit([&](const auto &x) { os << print(x); }, u);
  }
  if (!f.trailing.leading.empty()) {
    if (!first) os << "\n";
    for (const auto &l : f.trailing.leading)
      os << "#" << l << "\n";
  }
  return os.str();
}

} // namespace pipecheck::spec
