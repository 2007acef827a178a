#include "spec/ir.hpp"

#include "spec/print.hpp"

#include <algorithm>
#include <ostream>

namespace pipecheck::spec {

std::ostream &operator<<(std::ostream &os, const Loc &l) { return os << l.line << ":" << l.col; }

int dtype_bytes(DType d) {
  switch (d) {
  case DType::f32:
  case DType::i32: return 4;
  case DType::f16:
  case DType::bf16:
  case DType::i16: return 2;
  case DType::i8:
  case DType::u8:
  case DType::boolean: return 1;
  }
  return 4;
}

bool is_elementwise_fn(const std::string &f) {
  static const char *fns[] = {"exp",
                              "exp2",
                              "log",
                              "log2",
                              "sqrt",
                              "rsqrt",
                              "tanh",
                              "abs",
                              "neg",
                              "cast",
                              "maximum",
                              "minimum",
                              "pow",
                              "sin",
                              "cos",
                              "erf",
                              "erfc",
                              "floor",
                              "ceil",
                              "round",
                              "sign",
                              "sigmoid",
                              "expm1",
                              "log1p",
                              "tan",
                              "asin",
                              "acos",
                              "atan",
                              "sinh",
                              "cosh",
                              "asinh",
                              "acosh",
                              "atanh",
                              "cbrt",
                              "shift_left",
                              "shift_right_logical",
                              "shift_right_arithmetic"};
  for (const char *x : fns)
    if (f == x) return true;
  return false;
}

bool is_elementwise_op(Op op) {
  return op == Op::Neg || op == Op::Not || op == Op::BitNot || (op >= Op::Add && op <= Op::BitOr);
}

namespace {

bool reads_any_ref(const Expr &e) {
  if (e.op == Op::Ref) return true;
  for (const auto &a : e.args)
    if (reads_any_ref(a)) return true;
  return false;
}

// An operation whose element at a position comes from its arguments'
// elements there (a ref's subscripts aside).
bool elementwise_node(const Expr &e) {
  if (e.op == Op::Call) return (e.name == "where" && e.num_positional() == 3) || is_elementwise_fn(e.name);
  return is_elementwise_op(e.op);
}

bool elementwise_over_refs(const Expr &e) {
  if (e.op == Op::Ref || e.op == Op::Name || e.op == Op::Int || e.op == Op::Float) return true;
  if (!elementwise_node(e)) return !reads_any_ref(e);
  for (const auto &a : e.args)
    if (!elementwise_over_refs(a)) return false;
  return true;
}

// `mask`: the load mask of `e`'s refs, the condition of the nearest where
// whose branch holds `e` through elementwise operations (none: nothing
// masks them).
void collect_masked(const Expr &e, std::optional<LoadMask> mask, std::map<const Expr *, LoadMask> &out) {
  if (e.op == Op::Ref) {
    if (mask) out[&e] = *mask;
    for (const auto &a : e.args)
      collect_masked(a, std::nullopt, out);
    return;
  }
  const bool where = e.op == Op::Call && e.name == "where" && e.num_positional() == 3;
  const bool keeps = mask && elementwise_node(e);
  for (std::size_t k = 0; k < e.args.size(); ++k) {
    // (A where's branch: its condition alone is the load's mask, a Triton
    // `load(x, mask=)`; a where further out selects among the loaded
    // lanes, it does not narrow what the load reads.)
    const bool branch = where && (k == 1 || k == 2);
    const std::optional<LoadMask> down = branch && (keeps || elementwise_over_refs(e.args[k]))
                                             ? LoadMask{&e.args[0], k == 1}
                                         : keeps ? mask
                                                 : std::nullopt;
    collect_masked(e.args[k], down, out);
  }
}

} // namespace

std::map<const Expr *, LoadMask> load_masks(const Expr &value) {
  std::map<const Expr *, LoadMask> out;
  collect_masked(value, std::nullopt, out);
  return out;
}

namespace {
std::int64_t elements_of(const std::vector<std::int64_t> &shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}
} // namespace

std::optional<std::vector<bool>> selected_lanes(const std::vector<LaneMask> &masks,
                                                const std::vector<std::int64_t> &value) {
  // The common shape, right-aligned.
  std::size_t rank = value.size();
  for (const auto &m : masks)
    rank = std::max(rank, m.shape.size());
  std::vector<std::int64_t> common(rank, 1);
  auto join = [&](const std::vector<std::int64_t> &s) {
    for (std::size_t j = 0; j < s.size(); ++j) {
      std::int64_t &c = common[rank - s.size() + j];
      if (s[j] == c || s[j] == 1) continue;
      if (c != 1) return false;
      c = s[j];
    }
    return true;
  };
  if (!join(value)) return std::nullopt;
  for (const auto &m : masks)
    if (!join(m.shape) || m.on.size() != static_cast<std::size_t>(elements_of(m.shape))) return std::nullopt;
  std::vector<bool> out(static_cast<std::size_t>(elements_of(value)), false);
  // The flat index into a shape `s` (right-aligned, dims of 1 broadcast) of
  // the common index `at`.
  auto flat = [&](const std::vector<std::int64_t> &s, const std::vector<std::int64_t> &at) {
    std::int64_t f = 0;
    for (std::size_t j = 0; j < s.size(); ++j)
      f = f * s[j] + (s[j] == 1 ? 0 : at[rank - s.size() + j]);
    return static_cast<std::size_t>(f);
  };
  std::vector<std::int64_t> at(rank, 0);
  const std::int64_t n = elements_of(common);
  for (std::int64_t k = 0; k < n; ++k) {
    bool on = true;
    for (const auto &m : masks)
      on = on && m.on[flat(m.shape, at)];
    if (on) out[flat(value, at)] = true;
    for (std::size_t d = rank; d-- > 0;) // (next index, row-major)
      if (++at[d] < common[d])
        break;
      else
        at[d] = 0;
  }
  return out;
}

std::set<const Expr *> masked_loads(const Expr &value) {
  std::set<const Expr *> out;
  for (const auto &[ref, mask] : load_masks(value))
    out.insert(ref);
  return out;
}

namespace {
const Expr *uncast(const Expr *x) {
  while (x->op == Op::Call && x->name == "cast" && x->num_positional() >= 1)
    x = &x->args[0];
  return x;
}
} // namespace

const Expr *kept_ref(const Assign &a) {
  const Expr *w = keep_select(a);
  return w ? uncast(&w->args[2]) : nullptr;
}

const Expr *keep_select(const Assign &a) {
  if (a.accumulate) return nullptr;
  const Expr *v = uncast(&a.value);
  if (v->op == Op::Call && v->name == "where" && v->num_positional() == 3 && v->kwarg_names.empty() &&
      *uncast(&v->args[2]) == a.target)
    return v;
  return nullptr;
}

bool dtype_is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

const char *to_string(DType d) {
  switch (d) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i32: return "i32";
  case DType::i16: return "i16";
  case DType::i8: return "i8";
  case DType::u8: return "u8";
  case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string &s) {
  for (DType d :
       {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i16, DType::i8, DType::u8, DType::boolean})
    if (s == to_string(d)) return d;
  return std::nullopt;
}

const char *to_string(Op op) {
  switch (op) {
  case Op::Int: return "int";
  case Op::Float: return "float";
  case Op::Name: return "name";
  case Op::Ref: return "ref";
  case Op::Ellipsis: return "...";
  case Op::Slice: return ":";
  case Op::None: return "None";
  case Op::Zeros: return "zeros";
  case Op::Undefined: return "undefined";
  case Op::Call: return "call";
  case Op::Neg: return "-";
  case Op::Not: return "not";
  case Op::Add: return "+";
  case Op::Sub: return "-";
  case Op::Mul: return "*";
  case Op::Div: return "/";
  case Op::FloorDiv: return "//";
  case Op::Mod: return "%";
  case Op::Pow: return "**";
  case Op::Eq: return "==";
  case Op::Ne: return "!=";
  case Op::Lt: return "<";
  case Op::Le: return "<=";
  case Op::Gt: return ">";
  case Op::Ge: return ">=";
  case Op::And: return "and";
  case Op::Or: return "or";
  case Op::BitAnd: return "&";
  case Op::BitOr: return "|";
  case Op::BitNot: return "~";
  case Op::Tuple: return "tuple";
  }
  return "?";
}

Expr Expr::integer(std::int64_t v, Loc l) {
  Expr e;
  e.op = Op::Int;
  e.int_value = v;
  e.loc = l;
  return e;
}
Expr Expr::floating(double v, Loc l) {
  Expr e;
  e.op = Op::Float;
  e.float_value = v;
  e.loc = l;
  return e;
}
Expr Expr::var(std::string n, Loc l) {
  Expr e;
  e.op = Op::Name;
  e.name = std::move(n);
  e.loc = l;
  return e;
}
Expr Expr::unary(Op op, Expr a, Loc l) {
  Expr e;
  e.op = op;
  e.args.push_back(std::move(a));
  e.loc = l;
  return e;
}
Expr Expr::binary(Op op, Expr a, Expr b, Loc l) {
  Expr e;
  e.op = op;
  e.args.push_back(std::move(a));
  e.args.push_back(std::move(b));
  e.loc = l;
  return e;
}
Expr Expr::call(std::string fn, std::vector<Expr> args, Loc l) {
  Expr e;
  e.op = Op::Call;
  e.name = std::move(fn);
  e.args = std::move(args);
  e.loc = l;
  return e;
}
Expr Expr::ref(std::string n, std::vector<Expr> subscripts, Loc l) {
  Expr e;
  e.op = Op::Ref;
  e.name = std::move(n);
  e.args = std::move(subscripts);
  e.loc = l;
  return e;
}
Expr Expr::leaf(Op op, Loc l) {
  Expr e;
  e.op = op;
  e.loc = l;
  return e;
}

const Expr *Expr::kwarg(const std::string &k) const {
  std::size_t first = num_positional();
  for (std::size_t i = 0; i < kwarg_names.size(); ++i)
    if (kwarg_names[i] == k) return &args[first + i];
  return nullptr;
}

bool operator==(const Expr &a, const Expr &b) {
  if (a.op != b.op) return false;
  switch (a.op) {
  case Op::Int: return a.int_value == b.int_value;
  case Op::Float:
    return a.float_value == b.float_value ||
           (a.float_value != a.float_value && b.float_value != b.float_value);
  case Op::Name: return a.name == b.name;
  default: break;
  }
  return a.name == b.name && a.kwarg_names == b.kwarg_names && a.args == b.args;
}

bool operator==(const If &a, const If &b) {
  return a.is_when == b.is_when && a.cond == b.cond && a.then_body == b.then_body &&
         a.else_body == b.else_body;
}
bool operator==(const For &a, const For &b) {
  return a.var == b.var && a.lo == b.lo && a.hi == b.hi && a.body == b.body && a.is_while == b.is_while;
}

For make_while(Expr cond, Expr bound, Block body, Loc loc) {
  For f;
  f.is_while = true;
  f.lo = Expr::integer(0, loc);
  f.hi = std::move(bound);
  If i;
  i.cond = std::move(cond);
  i.then_body = std::move(body);
  Stmt s;
  s.loc = loc;
  s.kind = std::move(i);
  f.body.push_back(std::move(s));
  return f;
}
const Expr &while_cond(const For &f) { return std::get<If>(f.body.at(0).kind).cond; }
const Block &while_body(const For &f) { return std::get<If>(f.body.at(0).kind).then_body; }
std::string while_bound_message(const Loc &loop, std::int64_t bound) {
  return "the while loop at line " + std::to_string(loop.line) + " may run past its bound " +
         std::to_string(bound) + ": its condition still holds after " + std::to_string(bound) + " iterations";
}
bool operator==(const EmitPipeline &a, const EmitPipeline &b) {
  return a.grid == b.grid && a.specs == b.specs && a.body == b.body;
}

const char *to_string(CopyKind k) {
  switch (k) {
  case CopyKind::in_start: return "copy_in_start";
  case CopyKind::in_wait: return "copy_in_wait";
  case CopyKind::out_start: return "copy_out_start";
  case CopyKind::out_wait: return "copy_out_wait";
  }
  return "?";
}

const char *to_string(Role r) {
  switch (r) {
  case Role::in: return "in";
  case Role::out: return "out";
  case Role::scratch: return "scratch";
  }
  return "?";
}
const char *to_string(MemorySpace m) {
  switch (m) {
  case MemorySpace::vmem: return "vmem";
  case MemorySpace::any: return "any";
  case MemorySpace::smem: return "smem";
  case MemorySpace::hbm: return "hbm";
  case MemorySpace::acc: return "acc";
  }
  return "?";
}
const char *to_string(DimSemantics d) {
  switch (d) {
  case DimSemantics::parallel: return "parallel";
  case DimSemantics::arbitrary: return "arbitrary";
  case DimSemantics::sequential: return "sequential";
  }
  return "?";
}
const char *to_string(BufferKind k) {
  switch (k) {
  case BufferKind::hbm: return "hbm";
  case BufferKind::sram: return "sram";
  case BufferKind::smem: return "smem";
  case BufferKind::acc: return "acc";
  case BufferKind::sem: return "sem";
  }
  return "?";
}

const Operand *KernelSpec::operand(const std::string &n) const {
  for (const auto &o : operands)
    if (o.name == n) return &o;
  return nullptr;
}
const Prefetch *KernelSpec::prefetch(const std::string &n) const {
  for (const auto &p : prefetches)
    if (p.name == n) return &p;
  return nullptr;
}
const Setting *KernelSpec::setting(const std::string &key) const {
  for (const auto &s : settings)
    if (s.key == key) return &s;
  return nullptr;
}
const Param *KernelSpec::param(const std::string &n) const {
  for (const auto &p : params)
    if (p.name == n) return &p;
  return nullptr;
}
const Buffer *Program::buffer(const std::string &n) const {
  for (const auto &b : buffers)
    if (b.name == n) return &b;
  return nullptr;
}
const Param *Program::param(const std::string &n) const {
  for (const auto &p : params)
    if (p.name == n) return &p;
  return nullptr;
}

const std::string &unit_name(const std::variant<KernelSpec, Program> &u) {
  return std::visit([](const auto &x) -> const std::string & { return x.name; }, u);
}
Loc unit_loc(const std::variant<KernelSpec, Program> &u) {
  return std::visit([](const auto &x) { return x.loc; }, u);
}

std::ostream &operator<<(std::ostream &os, const Expr &e) { return os << print(e); }
std::ostream &operator<<(std::ostream &os, const Stmt &s) { return os << print(s); }
std::optional<ElementDim> element_dim(const Expr &b) {
  if (b.op != Op::Call || b.name != "Element") return std::nullopt;
  const std::size_t np = b.num_positional();
  const Expr *pad = np == 2 ? &b.args[1] : b.kwarg("padding");
  if (np < 1 || np > 2 || (np == 2 && b.kwarg("padding")) ||
      b.kwarg_names.size() > (b.kwarg("padding") ? 1 : 0))
    return std::nullopt;
  ElementDim e{b.args[0], Expr::integer(0, b.loc), Expr::integer(0, b.loc)};
  if (pad) {
    if (pad->op != Op::Tuple || pad->args.size() != 2) return std::nullopt;
    e.lo = pad->args[0];
    e.hi = pad->args[1];
  }
  return e;
}

std::optional<Expr> bounded_slice_dim(const Expr &b) {
  if (b.op != Op::Call || b.name != "BoundedSlice" || b.args.size() != 1 || !b.kwarg_names.empty())
    return std::nullopt;
  return b.args[0];
}

std::optional<DsIndex> ds_index(const Expr &r) {
  if (r.op != Op::Call || r.name != "ds" || r.args.size() != 2 || !r.kwarg_names.empty()) return std::nullopt;
  return DsIndex{r.args[0], r.args[1]};
}

std::ostream &operator<<(std::ostream &os, const KernelSpec &k) { return os << print(k); }
std::ostream &operator<<(std::ostream &os, const Program &p) { return os << print(p); }
std::ostream &operator<<(std::ostream &os, const File &f) { return os << print(f); }

namespace {

template <class S, class F> void each_own_expr(S &s, const F &f) {
  std::visit(
      [&](auto &x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Assign>) {
          f(x.target), f(x.value);
        } else if constexpr (std::is_same_v<T, Let>) {
          f(x.value);
        } else if constexpr (std::is_same_v<T, If>) {
          f(x.cond);
        } else if constexpr (std::is_same_v<T, For>) {
          f(x.lo), f(x.hi);
        } else if constexpr (std::is_same_v<T, Copy>) {
          f(x.src), f(x.dst), f(x.offset);
        } else if constexpr (std::is_same_v<T, Wgmma>) {
          f(x.acc), f(x.a), f(x.b);
        } else if constexpr (std::is_same_v<T, WgmmaWait>) {
          f(x.n);
        } else if constexpr (std::is_same_v<T, Dma>) {
          f(x.src), f(x.dst), f(x.sem), f(x.n);
        }
      },
      s.kind);
}

} // namespace

void for_each_expr(Stmt &s, const std::function<void(Expr &)> &f) { each_own_expr(s, f); }
void for_each_expr(const Stmt &s, const std::function<void(const Expr &)> &f) { each_own_expr(s, f); }

namespace {
// Whether `b` binds `n` to a value that does not name it before anything
// in it names n.
bool rebinds_first(const Block &b, const std::string &n) {
  for (const auto &s : b) {
    std::set<std::string> names;
    if (const auto *l = std::get_if<Let>(&s.kind); l && l->name == n) {
      collect_names(l->value, names);
      return names.count(n) == 0;
    }
    collect_names(s, names);
    if (names.count(n)) return false;
  }
  return false;
}
// The names `s` binds or stores into (its blocks too: spec::bound_names'
// and the stores' targets); false where it holds a statement whose effect
// on names is not one of those (a copy, a DMA).
bool changed_names(const Stmt &s, std::set<std::string> &out) {
  bool plain = true;
  for_each_stmt(s, [&](const Stmt &t) {
    if (const auto *l = std::get_if<Let>(&t.kind))
      out.insert(l->name);
    else if (const auto *a = std::get_if<Assign>(&t.kind))
      out.insert(a->target.name);
    else if (const auto *f = std::get_if<For>(&t.kind))
      out.insert(f->var);
    else if (!std::holds_alternative<If>(t.kind))
      plain = false;
  });
  return plain;
}

// The discards of the lets in `b` and the blocks it holds.
void discards_in(const Block &b, std::map<const Stmt *, std::vector<LocalDiscard>> &out) {
  for (auto it = b.begin(); it != b.end(); ++it) {
    if (const auto *i = std::get_if<If>(&it->kind)) {
      discards_in(i->then_body, out);
      discards_in(i->else_body, out);
    } else if (const auto *f = std::get_if<For>(&it->kind)) {
      discards_in(f->body, out);
    }
    const auto *l = std::get_if<Let>(&it->kind);
    if (!l) continue;
    const std::string &n = l->name;
    std::set<std::string> changed;
    std::vector<LocalDiscard> found;
    // Whether `c`'s value at the statement is its value at the let.
    const auto stays = [&](const Expr &c) {
      std::set<std::string> in_cond;
      collect_names(c, in_cond);
      return !in_cond.count(n) &&
             std::none_of(in_cond.begin(), in_cond.end(), [&](auto &x) { return changed.count(x) > 0; });
    };
    for (auto s = std::next(it); s != b.end(); ++s) {
      // `b = where(c, zeros, b)`: the old value is used only where c fails.
      if (const auto *r = std::get_if<Let>(&s->kind); r && r->name == n) {
        const Expr &v = r->value;
        if (v.op == Op::Call && v.name == "where" && v.num_positional() == 3 && v.args.size() == 3 &&
            stays(v.args[0]))
          for (int keep = 1; keep <= 2; ++keep) {
            const Expr &kept = v.args[static_cast<std::size_t>(keep)];
            std::set<std::string> other;
            collect_names(v.args[static_cast<std::size_t>(3 - keep)], other);
            if (kept.op == Op::Name && kept.name == n && !other.count(n))
              found.push_back({&unbroadcast(v.args[0]), keep == 1});
          }
        break;
      }
      if (const auto *w = std::get_if<If>(&s->kind); w && stays(w->cond)) {
        const bool then_rebinds = rebinds_first(w->then_body, n);
        const bool else_rebinds = rebinds_first(w->else_body, n);
        if (then_rebinds || else_rebinds) {
          if (then_rebinds) found.push_back({&w->cond, false});
          if (else_rebinds) found.push_back({&w->cond, true});
          if (then_rebinds && else_rebinds) break; // b is rebound on every path
          // The other branch may use the old value (where it runs, which
          // the entry allows); past the `when` it is followed no further.
          std::set<std::string> in_other;
          for (const auto &t : then_rebinds ? w->else_body : w->then_body)
            collect_names(t, in_other);
          if (in_other.count(n) || !changed_names(*s, changed)) break;
          continue;
        }
      }
      std::set<std::string> names;
      collect_names(*s, names);
      if (names.count(n) || !changed_names(*s, changed)) break;
    }
    if (!found.empty()) out.emplace(&*it, std::move(found));
  }
}

} // namespace

std::map<const Stmt *, std::vector<LocalDiscard>> local_discards(const Block &b) {
  std::map<const Stmt *, std::vector<LocalDiscard>> out;
  discards_in(b, out);
  return out;
}

void for_each_stmt(const Stmt &s, const std::function<void(const Stmt &)> &f) {
  f(s);
  if (const auto *i = std::get_if<If>(&s.kind)) {
    for_each_stmt(i->then_body, f);
    for_each_stmt(i->else_body, f);
  } else if (const auto *l = std::get_if<For>(&s.kind)) {
    for_each_stmt(l->body, f);
  } else if (const auto *e = std::get_if<EmitPipeline>(&s.kind)) {
    for_each_stmt(e->body, f);
  }
}

void for_each_stmt(const Block &b, const std::function<void(const Stmt &)> &f) {
  for (const auto &s : b)
    for_each_stmt(s, f);
}

std::optional<RefWrite> ref_write(const Stmt &s) {
  if (const auto *a = std::get_if<Assign>(&s.kind)) return RefWrite{a->target.name, &a->value};
  if (const auto *c = std::get_if<Copy>(&s.kind)) return RefWrite{c->dst.name, &c->src};
  if (const auto *d = std::get_if<Dma>(&s.kind); d && d->dst.op != Op::None)
    return RefWrite{d->dst.name, &d->src};
  if (const auto *w = std::get_if<Wgmma>(&s.kind)) return RefWrite{w->acc.name, nullptr};
  return std::nullopt;
}

const Expr &unbroadcast(const Expr &e) {
  const Expr *c = &e;
  while (c->op == Op::Call && c->name == "broadcast_to" && c->num_positional() >= 1)
    c = &c->args[0];
  return *c;
}

void collect_names(const Expr &e, std::set<std::string> &out) {
  if (e.op == Op::Name || e.op == Op::Ref || e.op == Op::Call) out.insert(e.name);
  for (const auto &a : e.args)
    collect_names(a, out);
}

void collect_names(const Stmt &s, std::set<std::string> &out) {
  for_each_expr(s, [&](const Expr &e) { collect_names(e, out); });
  if (const auto *l = std::get_if<Let>(&s.kind)) out.insert(l->name);
  if (const auto *d = std::get_if<Dma>(&s.kind)) out.insert(d->descriptor);
  if (const auto *i = std::get_if<If>(&s.kind)) {
    collect_names(i->then_body, out);
    collect_names(i->else_body, out);
  }
  if (const auto *f = std::get_if<For>(&s.kind)) {
    out.insert(f->var);
    collect_names(f->body, out);
  }
  if (const auto *e = std::get_if<EmitPipeline>(&s.kind)) {
    for (const auto &o : e->specs)
      if (o.index_map)
        for (const auto &r : o.index_map->results)
          collect_names(r, out);
    collect_names(e->body, out);
  }
}

void collect_names(const Block &b, std::set<std::string> &out) {
  for (const auto &s : b)
    collect_names(s, out);
}

std::set<std::string> kernel_names(const KernelSpec &k) {
  std::set<std::string> out;
  for (const auto &p : k.params)
    out.insert(p.name);
  for (const auto &o : k.operands) {
    out.insert(o.name);
    if (o.index_map) out.insert(o.index_map->params.begin(), o.index_map->params.end());
  }
  for (const auto &p : k.prefetches)
    out.insert(p.name);
  collect_names(k.body, out);
  return out;
}

} // namespace pipecheck::spec
