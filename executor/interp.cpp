#include "executor/interp.hpp"

#include <cassert>
#include <cmath>
#include <sstream>

namespace pipecheck::executor {

using spec::Expr;
using spec::Op;

std::string program_id_name(int axis) { return "program_id$" + std::to_string(axis); }
std::string num_programs_name(int axis) { return "num_programs$" + std::to_string(axis); }

Expr rewrite_grid_calls(const Expr &e) {
  if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1 &&
      e.args[0].op == Op::Int) {
    const int axis = static_cast<int>(e.args[0].int_value);
    return Expr::var(e.name == "program_id" ? program_id_name(axis) : num_programs_name(axis), e.loc);
  }
  Expr r = e;
  for (auto &a : r.args)
    a = rewrite_grid_calls(a);
  return r;
}

spec::Block rewrite_grid_calls(const spec::Block &b) {
  spec::Block out = b;
  for (auto &s : out) {
    std::visit(
        [](auto &k) {
          using K = std::decay_t<decltype(k)>;
          if constexpr (std::is_same_v<K, spec::Assign>) {
            k.target = rewrite_grid_calls(k.target);
            k.value = rewrite_grid_calls(k.value);
          } else if constexpr (std::is_same_v<K, spec::Let>) {
            k.value = rewrite_grid_calls(k.value);
          } else if constexpr (std::is_same_v<K, spec::If>) {
            k.cond = rewrite_grid_calls(k.cond);
            k.then_body = rewrite_grid_calls(k.then_body);
            k.else_body = rewrite_grid_calls(k.else_body);
          } else if constexpr (std::is_same_v<K, spec::For>) {
            k.lo = rewrite_grid_calls(k.lo);
            k.hi = rewrite_grid_calls(k.hi);
            k.body = rewrite_grid_calls(k.body);
          } else if constexpr (std::is_same_v<K, spec::Copy>) {
            k.src = rewrite_grid_calls(k.src);
            k.dst = rewrite_grid_calls(k.dst);
          } else if constexpr (std::is_same_v<K, spec::Wgmma>) {
            k.acc = rewrite_grid_calls(k.acc);
            k.a = rewrite_grid_calls(k.a);
            k.b = rewrite_grid_calls(k.b);
          } else if constexpr (std::is_same_v<K, spec::WgmmaWait>) {
            k.n = rewrite_grid_calls(k.n);
          }
        },
        s.kind);
  }
  return out;
}

namespace {

[[noreturn]] void bad(spec::Loc loc, const std::string &msg) {
  throw ExecError(ExecError::Kind::bad_input, loc, msg);
}

std::string expr_string(const Expr &e) {
  std::ostringstream os;
  os << e;
  return os.str();
}

} // namespace

std::int64_t Interp::eval_int(const Expr &e) {
  if (auto v = spec::eval_int(e, env)) return *v;
  bad(e.loc, "'" + expr_string(e) + "' has no integer value here");
}

View Interp::view_of(const Expr &ref) {
  if (ref.op != Op::Ref && ref.op != Op::Name)
    bad(ref.loc, "'" + expr_string(ref) + "' is not a buffer reference");
  HostArray *a = mem_.array(ref.name);
  if (!a) bad(ref.loc, "'" + ref.name + "' is not a buffer here");
  View v = View::whole(*a);
  if (ref.op == Op::Name) return v;
  const int rank = static_cast<int>(a->shape().size());
  std::vector<int> kept;
  int d = 0; // next array dim
  const auto &subs = ref.args;
  int n_real = 0; // subscripts that consume a dim
  for (const auto &s : subs)
    if (s.op != Op::Ellipsis) ++n_real;
  if (n_real > rank)
    bad(ref.loc, "'" + expr_string(ref) + "' has " + std::to_string(n_real) +
                     " subscripts for an array of rank " + std::to_string(rank));
  for (const auto &s : subs) {
    if (s.op == Op::Ellipsis) {
      // The ellipsis covers every dim the subscripts after it leave.
      int remaining = 0;
      for (const Expr *t = &s + 1; t != subs.data() + subs.size(); ++t)
        if (t->op != Op::Ellipsis) ++remaining;
      while (d < rank - remaining)
        kept.push_back(d++);
      continue;
    }
    const std::int64_t dim = a->shape()[d];
    if (s.op == Op::Slice) {
      std::int64_t lo = 0, hi = dim;
      if (s.args.size() >= 1 && s.args[0].op != Op::None) lo = eval_int(s.args[0]);
      if (s.args.size() >= 2 && s.args[1].op != Op::None) hi = eval_int(s.args[1]);
      if (lo < 0) lo += dim;
      if (hi < 0) hi += dim;
      if (lo < 0 || hi > dim || lo > hi)
        throw ExecError(ExecError::Kind::fault, ref.loc,
                        "'" + expr_string(ref) + "': slice " + std::to_string(lo) + ":" + std::to_string(hi) +
                            " is out of bounds for dim " + std::to_string(d) + " of " + a->name() +
                            shape_string(a->shape()));
      v.box.lo[d] = lo;
      v.box.hi[d] = hi;
      kept.push_back(d);
    } else {
      std::int64_t i = eval_int(s);
      if (i < 0) i += dim;
      if (i < 0 || i >= dim)
        throw ExecError(ExecError::Kind::fault, ref.loc,
                        "'" + expr_string(ref) + "': index " + std::to_string(i) +
                            " is out of bounds for dim " + std::to_string(d) + " of " + a->name() +
                            shape_string(a->shape()));
      v.box.lo[d] = i;
      v.box.hi[d] = i + 1;
    }
    ++d;
  }
  while (d < rank)
    kept.push_back(d++);
  v.kept = std::move(kept);
  return v;
}

Value Interp::eval(const Expr &e) {
  switch (e.op) {
  case Op::Int: return Value::scalar_int(e.int_value);
  case Op::Float: return Value::scalar_float(e.float_value);
  case Op::Zeros: return Value::scalar_float(0.0);
  case Op::Name: {
    if (auto it = locals.find(e.name); it != locals.end()) return it->second;
    if (mem_.array(e.name)) {
      View v = view_of(e);
      mem_.before_read(v);
      return load(v);
    }
    if (auto it = env.find(e.name); it != env.end()) return Value::scalar_int(it->second);
    if (e.name == "inf") return Value::scalar_float(INFINITY);
    bad(e.loc, "unknown name '" + e.name + "'");
  }
  case Op::Ref: {
    View v = view_of(e);
    mem_.before_read(v);
    return load(v);
  }
  case Op::Neg: return unary(UnOp::neg, eval(e.args.at(0)));
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::FloorDiv:
  case Op::Mod: {
    Value a = eval(e.args.at(0));
    const Value b = eval(e.args.at(1));
    const BinOp op = e.op == Op::Add        ? BinOp::add
                     : e.op == Op::Sub      ? BinOp::sub
                     : e.op == Op::Mul      ? BinOp::mul
                     : e.op == Op::Div      ? BinOp::div
                     : e.op == Op::FloorDiv ? BinOp::floordiv
                                            : BinOp::mod;
    return binary(op, std::move(a), b, e.loc);
  }
  case Op::Call: {
    const auto np = e.num_positional();
    auto arg = [&](std::size_t k) -> const Expr & {
      if (k >= np) bad(e.loc, e.name + "() takes more arguments");
      return e.args[k];
    };
    if (e.name == "program_id" || e.name == "num_programs") {
      const Expr r = rewrite_grid_calls(e);
      if (r.op == Op::Name) return eval(r);
      bad(e.loc, e.name + "() takes an integer literal axis");
    }
    if (e.name == "full") {
      Value v = eval(arg(0));
      if (v.size() != 1) bad(e.loc, "full() takes a scalar");
      v.weak = true;
      return v;
    }
    if (e.name == "zeros") return Value::scalar_float(0.0);
    if (e.name == "exp") return unary(UnOp::exp, eval(arg(0)));
    if (e.name == "neg") return unary(UnOp::neg, eval(arg(0)));
    if (e.name == "maximum" || e.name == "minimum" || ((e.name == "max" || e.name == "min") && np == 2)) {
      const bool mx = e.name == "maximum" || e.name == "max";
      Value a = eval(arg(0));
      return binary(mx ? BinOp::maximum : BinOp::minimum, std::move(a), eval(arg(1)), e.loc);
    }
    if (e.name == "dot") return dot(eval(arg(0)), eval(arg(1)), e.loc);
    if (e.name == "transpose") return transpose(eval(arg(0)));
    if (e.name == "sum" || e.name == "max") {
      std::optional<std::int64_t> axis;
      if (const Expr *ax = e.kwarg("axis"))
        axis = eval_int(*ax);
      else if (np >= 2)
        axis = eval_int(e.args[1]);
      return reduce(e.name == "sum" ? ReduceOp::sum : ReduceOp::max, eval(arg(0)), axis, e.loc);
    }
    if (e.name == "cast") {
      const Expr &t = arg(1);
      std::optional<spec::DType> dt;
      if (t.op == Op::Name) dt = spec::parse_dtype(t.name);
      if (!dt) bad(t.loc, "cast() takes a dtype name, not '" + expr_string(t) + "'");
      return cast(eval(arg(0)), *dt);
    }
    bad(e.loc, "unsupported function '" + e.name + "' in a body");
  }
  default:
    if (auto v = spec::eval_int(e, env)) return Value::scalar_int(*v);
    bad(e.loc, "unsupported expression '" + expr_string(e) + "' in a body");
  }
}

void Interp::exec(const spec::Stmt &s) {
  if (const auto *a = std::get_if<spec::Assign>(&s.kind)) {
    Value v = eval(a->value);
    const View dst = view_of(a->target);
    if (a->accumulate) {
      mem_.before_read(dst);
      Value cur = load(dst);
      v.weak = v.weak || v.dtype != cur.dtype;
      v = binary(BinOp::add, std::move(cur), v, s.loc);
    }
    mem_.before_write(dst);
    store(v, dst, s.loc);
    return;
  }
  if (const auto *l = std::get_if<spec::Let>(&s.kind)) {
    if (auto iv = spec::eval_int(l->value, env)) {
      locals.erase(l->name);
      env[l->name] = *iv;
    } else {
      env.erase(l->name);
      locals[l->name] = eval(l->value);
    }
    return;
  }
  if (const auto *i = std::get_if<spec::If>(&s.kind)) {
    exec(eval_int(i->cond) != 0 ? i->then_body : i->else_body);
    return;
  }
  bad(s.loc, "this statement is not allowed in a body");
}

void Interp::exec(const spec::Block &b) {
  for (const auto &s : b)
    exec(s);
}

} // namespace pipecheck::executor
