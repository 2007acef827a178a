#include "executor/interp.hpp"

#include "executor/error_bound.hpp"

#include "spec/bind.hpp"
#include "spec/place.hpp"
#include "spec/prefetch.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <map>
#include <set>
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
  return e.map_args([](const Expr &a) { return rewrite_grid_calls(a); });
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
            k.offset = rewrite_grid_calls(k.offset);
          } else if constexpr (std::is_same_v<K, spec::Wgmma>) {
            k.acc = rewrite_grid_calls(k.acc);
            k.a = rewrite_grid_calls(k.a);
            k.b = rewrite_grid_calls(k.b);
          } else if constexpr (std::is_same_v<K, spec::WgmmaWait>) {
            k.n = rewrite_grid_calls(k.n);
          } else if constexpr (std::is_same_v<K, spec::Dma>) {
            for (spec::Expr *e : {&k.src, &k.dst, &k.sem, &k.n})
              *e = rewrite_grid_calls(*e);
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

// `e` as its source wrote it: program_id(0), not the name the oracle binds.
Expr as_written(const Expr &e) {
  if (e.op == Op::Name)
    for (const char *call : {"program_id", "num_programs"}) {
      const std::string prefix = std::string(call) + "$";
      if (e.name.rfind(prefix, 0) == 0)
        return Expr::call(call, {Expr::integer(std::stoll(e.name.substr(prefix.size())), e.loc)}, e.loc);
    }
  return e.map_args([](const Expr &a) { return as_written(a); });
}

std::string expr_string(const Expr &e) {
  std::ostringstream os;
  os << as_written(e);
  return os.str();
}

} // namespace

namespace {

spec::DType dtype_of(const Expr &t) {
  std::optional<spec::DType> dt;
  if (t.op == Op::Name) dt = spec::parse_dtype(t.name);
  if (!dt) bad(t.loc, "expected a dtype name, not '" + expr_string(t) + "'");
  return *dt;
}

bool flag(const Expr &call, const char *name) {
  const Expr *k = call.kwarg(name);
  if (!k) return false;
  auto b = spec::bool_literal(*k);
  if (!b) bad(k->loc, std::string(name) + " takes True or False");
  return *b;
}

} // namespace

Shape Interp::shape_of(const Expr &t) {
  if (t.op != Op::Tuple) bad(t.loc, "expected a shape tuple, not '" + expr_string(t) + "'");
  Shape s;
  for (const auto &x : t.args) {
    const std::int64_t v = eval_int(x);
    if (v < 0) bad(x.loc, "extent " + std::to_string(v) + " is negative");
    s.push_back(v);
  }
  if (auto err = spec::shape_arg_error(s); !err.empty()) bad(t.loc, err);
  return s;
}

std::int64_t Interp::eval_int(const Expr &e) {
  if (auto v = spec::eval_int(e, env)) return *v;
  if (auto d = spec::arithmetic_error(e, env, "'" + expr_string(e) + "'")) bad(d->loc, d->message);
  bad(e.loc, "'" + expr_string(e) + "' has no integer value here");
}

namespace {
// `v[:, None]`: a subscript that adds an axis (a reference's whole-array
// value, indexed as a local's; the body's typing allows none on a ref).
bool adds_axis(const Expr &ref) {
  return std::any_of(ref.args.begin(), ref.args.end(), [](const Expr &a) { return a.op == Op::None; });
}
} // namespace

View Interp::view_of(const Expr &ref) {
  if (ref.op != Op::Ref && ref.op != Op::Name)
    bad(ref.loc, "'" + expr_string(ref) + "' is not a buffer reference");
  HostArray *a = mem_.array(ref.name);
  if (!a) bad(ref.loc, "'" + ref.name + "' is not a buffer here");
  View v = View::whole(*a);
  if (ref.op == Op::Name) return v;
  const auto subs = spec::subscripts_of(
      ref, [&](const Expr &e, bool) -> std::optional<std::int64_t> { return eval_int(e); });
  const spec::Subscripted r = spec::subscript(a->shape(), subs);
  if (!r.ok()) {
    // A subscript that reads scalar-prefetch tables is an elaborated `where` tree of a
    // kilobyte or more: the line and the failing index say more than its text.
    std::string what = "'" + expr_string(ref) + "'";
    if (what.size() > 160) what = "the reference to " + ref.name + " on this line";
    throw ExecError(r.out_of_bounds ? ExecError::Kind::fault : ExecError::Kind::bad_input, ref.loc,
                    what + ": " + r.error + " of " + a->name() + shape_string(a->shape()));
  }
  std::vector<int> kept;
  for (std::size_t d = 0; d < r.dims.size(); ++d) {
    v.box.lo[d] = r.dims[d].lo;
    v.box.hi[d] = r.dims[d].hi;
    if (r.dims[d].kept) kept.push_back(static_cast<int>(d));
  }
  v.kept = std::move(kept);
  return v;
}

Value Interp::eval(const Expr &e) {
  Value v = eval_node(e);
  // (In a reference every value carries its bound: one made of literals and
  // iota alone is exact, and what is computed from it rounds.)
  if (bounds && !v.bound.on) error_bound::track(v, *bounds);
  return v;
}

Value Interp::eval_node(const Expr &e) {
  switch (e.op) {
  case Op::Int: return Value::scalar_int(e.int_value);
  case Op::Float: return Value::scalar_float(e.float_value);
  case Op::Zeros: return Value::scalar_float(0.0);
  case Op::Undefined:
    throw ExecError(ExecError::Kind::bad_input, e.loc, "'undefined' is only a whole store value");
  case Op::Name: {
    if (auto it = locals.find(e.name); it != locals.end()) return it->second;
    if (mem_.array(e.name)) {
      View v = view_of(e);
      mem_.before_read(v);
      loaded(v, &e);
      return load_value(v, e.name);
    }
    if (auto it = env.find(e.name); it != env.end()) return Value::scalar_int(it->second);
    if (e.name == "inf") return Value::scalar_float(INFINITY);
    bad(e.loc, "unknown name '" + e.name + "'");
  }
  case Op::Ref: {
    if (auto it = locals.find(e.name); it != locals.end() && !mem_.array(e.name)) {
      const auto subs = spec::value_subscripts_of(
          e, [&](const Expr &x, bool) -> std::optional<std::int64_t> { return eval_int(x); });
      return index(it->second, subs, e.loc);
    }
    // (As the reference's typing reads it.)
    if (adds_axis(e)) {
      Expr whole = e;
      whole.op = Op::Name;
      whole.args.clear();
      const Value a = eval(whole);
      const auto subs = spec::value_subscripts_of(
          e, [&](const Expr &x, bool) -> std::optional<std::int64_t> { return eval_int(x); });
      return index(a, subs, e.loc);
    }
    View v = view_of(e);
    mem_.before_read(v);
    loaded(v, &e);
    return load_value(v, e.name);
  }
  case Op::Neg: return unary(UnOp::neg, eval(e.args.at(0)), e.loc);
  case Op::BitNot: return unary(UnOp::bit_not, eval(e.args.at(0)), e.loc);
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge: {
    if (auto v = spec::eval_int(e, env)) return Value::scalar_int(*v);
    const Value a = eval(e.args.at(0));
    const Value b = eval(e.args.at(1));
    const spec::CompareOp op = e.op == Op::Eq   ? spec::CompareOp::eq
                               : e.op == Op::Ne ? spec::CompareOp::ne
                               : e.op == Op::Lt ? spec::CompareOp::lt
                               : e.op == Op::Le ? spec::CompareOp::le
                               : e.op == Op::Gt ? spec::CompareOp::gt
                                                : spec::CompareOp::ge;
    return compare(op, a, b, e.loc);
  }
  case Op::Pow:
  case Op::BitAnd:
  case Op::BitOr: {
    if (e.op == Op::Pow)
      if (auto v = spec::eval_int(e, env)) return Value::scalar_int(*v);
    Value a = eval(e.args.at(0));
    const Value b = eval(e.args.at(1));
    const BinOp op = e.op == Op::Pow ? BinOp::pow : e.op == Op::BitAnd ? BinOp::bit_and : BinOp::bit_or;
    return binary(op, std::move(a), b, e.loc);
  }
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
    // An integer function of integers (`x[...] / cdiv(n, bs)`): the integer,
    // as in a subscript (spec::eval_int), weakly typed as its typing says.
    if (spec::is_int_function(e.name) && e.kwarg_names.empty())
      if (auto v = spec::eval_int(e, env)) return Value::scalar_int(*v);
    if (e.name == "full") {
      Value v = eval(arg(0));
      const auto t = spec::full_type(v.type());
      if (!t.ok()) bad(e.loc, t.error);
      v.weak = t.value.weak;
      return v;
    }
    if (e.name == "zeros") return Value::scalar_float(0.0);
    static const std::map<std::string, UnOp> unaries = {
        {"exp", UnOp::exp},     {"neg", UnOp::neg},   {"sqrt", UnOp::sqrt},
        {"rsqrt", UnOp::rsqrt}, {"log", UnOp::log},   {"log2", UnOp::log2},
        {"exp2", UnOp::exp2},   {"tanh", UnOp::tanh}, {"abs", UnOp::abs}};
    static const std::map<std::string, UnOp> math = {
        {"sin", UnOp::sin},         {"cos", UnOp::cos},     {"erf", UnOp::erf},     {"erfc", UnOp::erfc},
        {"floor", UnOp::floor},     {"ceil", UnOp::ceil},   {"round", UnOp::round}, {"sign", UnOp::sign},
        {"sigmoid", UnOp::sigmoid}, {"expm1", UnOp::expm1}, {"log1p", UnOp::log1p}, {"tan", UnOp::tan},
        {"asin", UnOp::asin},       {"acos", UnOp::acos},   {"atan", UnOp::atan},   {"sinh", UnOp::sinh},
        {"cosh", UnOp::cosh},       {"asinh", UnOp::asinh}, {"acosh", UnOp::acosh}, {"atanh", UnOp::atanh},
        {"cbrt", UnOp::cbrt}};
    if (auto m = math.find(e.name); m != math.end() && np == 1) return unary(m->second, eval(arg(0)), e.loc);
    if (e.name == "opaque") {
      const Expr *op = e.kwarg("op");
      bad(e.loc, "cannot run: opaque op " + (op ? expr_string(*op) : std::string("?")) + " at line " +
                     std::to_string(e.loc.line) + " has no known values");
    }
    if (auto u = unaries.find(e.name); u != unaries.end() && np == 1) {
      if (e.name == "abs")
        if (auto v = spec::eval_int(e, env)) return Value::scalar_int(*v);
      return unary(u->second, eval(arg(0)), e.loc);
    }
    if (e.name == "pow") {
      Value a = eval(arg(0));
      return binary(BinOp::pow, std::move(a), eval(arg(1)), e.loc);
    }
    if (e.name == "where") {
      const Value c = eval(arg(0));
      if (!mem_.follows_loads()) {
        const Value a = eval(arg(1));
        return where(c, a, eval(arg(2)), e.loc);
      }
      // (Its condition, for the masked loads in its branches.)
      struct Active {
        std::map<const Expr *, const Value *> &conds;
        const Expr *cond;
        ~Active() { conds.erase(cond); }
      } active{conds_, &arg(0)};
      conds_[&arg(0)] = &c;
      const Value a = eval(arg(1));
      return where(c, a, eval(arg(2)), e.loc);
    }
    if (e.name == "iota") {
      spec::DType dt = spec::DType::i32;
      if (const Expr *d = e.kwarg("dtype")) dt = dtype_of(*d);
      return iota(dt, shape_of(arg(0)), eval_int(arg(1)), e.loc);
    }
    if (e.name == "reshape") return reshape(eval(arg(0)), shape_of(arg(1)), e.loc);
    if (e.name == "broadcast_to") {
      const Value a = eval(arg(0));
      const Shape shape = shape_of(arg(1));
      const auto t = spec::broadcast_to_type(a.type(), shape);
      if (!t.ok()) bad(e.loc, t.error);
      return broadcast_to(a, shape, e.loc);
    }
    if (e.name == "tile") return tile(eval(arg(0)), shape_of(arg(1)), e.loc);
    if (e.name == "concatenate") {
      std::vector<Value> parts;
      for (std::size_t k = 0; k < np; ++k)
        parts.push_back(eval(arg(k)));
      const Expr *ax = e.kwarg("axis");
      return concatenate(parts, ax ? eval_int(*ax) : 0, e.loc);
    }
    if (e.name == "roll" || e.name == "flip" || e.name == "argmax" || e.name == "argmin" ||
        e.name == "cumsum" || e.name == "cummax" || e.name == "cummin") {
      const Expr *ax = e.kwarg("axis");
      if (!ax) bad(e.loc, e.name + " takes axis=");
      const std::int64_t axis = eval_int(*ax);
      const Value a = eval(arg(0));
      if (e.name == "flip") return flip(a, axis, e.loc);
      if (e.name == "argmax" || e.name == "argmin") return arg_reduce(e.name == "argmax", a, axis, e.loc);
      if (e.name == "roll") {
        std::optional<std::pair<std::int64_t, std::int64_t>> stride;
        if (const Expr *st = e.kwarg("stride"))
          if (const Expr *sa = e.kwarg("stride_axis")) stride = std::make_pair(eval_int(*st), eval_int(*sa));
        return roll(a, eval_int(arg(1)), axis, stride, e.loc);
      }
      const ReduceOp op = e.name == "cumsum"   ? ReduceOp::sum
                          : e.name == "cummax" ? ReduceOp::max
                                               : ReduceOp::min;
      return cumulative(op, a, axis, flag(e, "reverse"), e.loc);
    }
    if (e.name == "shift_left" || e.name == "shift_right_logical" || e.name == "shift_right_arithmetic") {
      const Shift op = e.name == "shift_left"            ? Shift::left
                       : e.name == "shift_right_logical" ? Shift::right_logical
                                                         : Shift::right_arithmetic;
      const Value a = eval(arg(0));
      return shift(op, a, eval(arg(1)), e.loc);
    }
    if (e.name == "maximum" || e.name == "minimum" || ((e.name == "max" || e.name == "min") && np == 2)) {
      const bool mx = e.name == "maximum" || e.name == "max";
      Value a = eval(arg(0));
      return binary(mx ? BinOp::maximum : BinOp::minimum, std::move(a), eval(arg(1)), e.loc);
    }
    if (e.name == "dot") {
      spec::DotOptions o;
      o.trans_a = flag(e, "trans_a");
      o.trans_b = flag(e, "trans_b");
      if (const Expr *p = e.kwarg("preferred_element_type")) o.preferred = dtype_of(*p);
      const Value a = eval(arg(0));
      return dot(a, eval(arg(1)), e.loc, o);
    }
    if (e.name == "dot_general") {
      spec::Loc where;
      const auto dims = spec::dot_general_dims(e, where);
      if (!dims.ok()) bad(where, dims.error);
      std::optional<spec::DType> pref;
      if (const Expr *p = e.kwarg("preferred_element_type")) pref = dtype_of(*p);
      const Value a = eval(arg(0));
      return dot_general(a, eval(arg(1)), dims.value, e.loc, pref);
    }
    if (e.name == "transpose") return transpose(eval(arg(0)));
    if (e.name == "sum" || e.name == "max" || e.name == "min") {
      std::optional<std::int64_t> axis;
      if (const Expr *ax = e.kwarg("axis"))
        axis = eval_int(*ax);
      else if (np >= 2)
        axis = eval_int(e.args[1]);
      const ReduceOp op = e.name == "sum" ? ReduceOp::sum : e.name == "max" ? ReduceOp::max : ReduceOp::min;
      return reduce(op, eval(arg(0)), axis, e.loc, flag(e, "keepdims"));
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

// An elementwise statement over f32 blocks (`z[...] = x[...] + y[...] * 2`,
// `t = t * 0.5 + 1`, `o[...] += x[...]`) is evaluated in cache-sized chunks
// straight from the operands' memory into the target, in vector code, rather
// than as one whole-block Value per operand and per operation. It computes
// the same floats in the same order as the Value path (every operation of a
// node with an f32 block operand is an f32 operation, operands in source
// order), and calls the Memory hooks in the same order. Anything else —
// broadcasting, other dtypes, other functions, a target that partly overlaps
// an operand — takes the Value path.
struct Interp::Fused {
  enum class Kind { block, scalar, add, sub, mul, div, neg };
  struct Node {
    Kind kind = Kind::scalar;
    const float *data = nullptr; ///< block: its first element
    float value = 0;             ///< scalar
    int a = -1, b = -1;          ///< operands
    int scratch = -1;            ///< an operation's chunk buffer
  };
  static constexpr std::int64_t kChunk = 2048;

  std::vector<Node> nodes;
  std::vector<View> reads; ///< block operands read from memory, in source order
  Shape shape;             ///< every block operand's shape
  bool has_shape = false;
  int ops = 0;
  std::vector<float> scratch;

  int add(Node n) {
    nodes.push_back(n);
    return static_cast<int>(nodes.size()) - 1;
  }
  bool is_block(int i) const {
    const Kind k = nodes[static_cast<std::size_t>(i)].kind;
    return k != Kind::scalar;
  }
  bool take_shape(const Shape &s) {
    if (has_shape) return s == shape;
    shape = s;
    has_shape = true;
    return true;
  }

  struct Operand {
    const float *p; ///< nullptr: the scalar s
    float s;
  };
  /// Node i's values for elements [k0, k0 + n) — in `out` when given.
  Operand eval(int i, std::int64_t k0, std::int64_t n, float *out) {
    using A = Eigen::Array<float, Eigen::Dynamic, 1>;
    using CMap = Eigen::Map<const A>;
    const Node &nd = nodes[static_cast<std::size_t>(i)];
    if (nd.kind == Kind::block) return {nd.data + k0, 0};
    if (nd.kind == Kind::scalar) return {nullptr, nd.value};
    float *o = out ? out : scratch.data() + nd.scratch * kChunk;
    Eigen::Map<A> O(o, n);
    const Operand x = eval(nd.a, k0, n, nullptr);
    if (nd.kind == Kind::neg) {
      O = -CMap(x.p, n);
      return {o, 0};
    }
    const Operand y = eval(nd.b, k0, n, nullptr);
    auto apply = [&](auto f) {
      if (x.p && y.p)
        O = f(CMap(x.p, n), CMap(y.p, n));
      else if (x.p)
        O = f(CMap(x.p, n), y.s);
      else
        O = f(x.s, CMap(y.p, n));
    };
    switch (nd.kind) {
    case Kind::add: apply([](const auto &u, const auto &v) { return u + v; }); break;
    case Kind::sub: apply([](const auto &u, const auto &v) { return u - v; }); break;
    case Kind::mul: apply([](const auto &u, const auto &v) { return u * v; }); break;
    case Kind::div: apply([](const auto &u, const auto &v) { return u / v; }); break;
    default: assert(false);
    }
    return {o, 0};
  }

  /// Evaluates node `root` into out[0, size).
  void run(int root, float *out) {
    scratch.resize(static_cast<std::size_t>(ops * kChunk));
    const std::int64_t total = num_elements(shape);
    for (std::int64_t k0 = 0; k0 < total; k0 += kChunk) {
      const std::int64_t n = std::min(kChunk, total - k0);
      const Operand r = eval(root, k0, n, out + k0);
      assert(r.p == out + k0);
      (void)r;
    }
  }
};

bool Interp::plan_fused(const Expr &e, Fused &f, int &node) {
  using K = Fused::Kind;
  auto block = [&](const View &v) {
    if (v.dtype() != spec::DType::f32 || !v.is_contiguous() || !f.take_shape(v.shape())) return false;
    f.reads.push_back(v);
    node = f.add({K::block, reinterpret_cast<const float *>(v.array->data()) + v.offset()});
    return true;
  };
  auto scalar = [&](float x) {
    node = f.add({K::scalar, nullptr, x});
    return true;
  };
  switch (e.op) {
  case Op::Float: return scalar(static_cast<float>(e.float_value));
  case Op::Int: return scalar(static_cast<float>(wrap_to(spec::DType::i32, e.int_value)));
  case Op::Name: {
    if (auto it = locals.find(e.name); it != locals.end()) {
      const Value &v = it->second;
      if (v.dtype != spec::DType::f32) return false;
      if (v.shape.empty()) return scalar(v.f.at(0));
      if (v.weak || !f.take_shape(v.shape)) return false;
      node = f.add({K::block, v.f.data()});
      return true;
    }
    if (mem_.array(e.name)) return block(view_of(e));
    return false;
  }
  case Op::Ref:
    // (`v[:, None]` on a whole array is a value indexed by eval.)
    if (adds_axis(e)) return false;
    return block(view_of(e));
  case Op::Neg: {
    int a = -1;
    if (!plan_fused(e.args.at(0), f, a) || !f.is_block(a)) return false;
    node = f.add({K::neg, nullptr, 0, a, -1, f.ops++});
    return true;
  }
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div: {
    int a = -1, b = -1;
    if (!plan_fused(e.args.at(0), f, a) || !plan_fused(e.args.at(1), f, b)) return false;
    // Two scalars would follow jnp's weak-type rules, not f32's.
    if (!f.is_block(a) && !f.is_block(b)) return false;
    const K k = e.op == Op::Add ? K::add : e.op == Op::Sub ? K::sub : e.op == Op::Mul ? K::mul : K::div;
    node = f.add({k, nullptr, 0, a, b, f.ops++});
    return true;
  }
  default: return false;
  }
}

bool Interp::exec_fused(const spec::Stmt &s) {
  if (bounds) return false; // (it computes values only)
  const auto *a = std::get_if<spec::Assign>(&s.kind);
  const auto *l = std::get_if<spec::Let>(&s.kind);
  if (!a && !l) return false;
  const Expr &value = a ? a->value : l->value;
  if (value.op != Op::Add && value.op != Op::Sub && value.op != Op::Mul && value.op != Op::Div &&
      value.op != Op::Neg)
    return false; // nothing to fuse
  if (l && spec::eval_int(value, env)) return false;
  Fused f;
  int root = -1;
  try {
    if (!plan_fused(value, f, root) || !f.is_block(root)) return false;
  } catch (const ExecError &) {
    return false; // the Value path reports it
  }
  if (l) {
    for (const View &v : f.reads) {
      mem_.before_read(v);
      loaded(v, nullptr); // (no where: arithmetic alone)
    }
    env.erase(l->name);
    Value &r = locals[l->name];
    // Rebinding a name (`t = t * 2`) reuses its block: an operand that is
    // the old block is read chunk by chunk before the same chunk is written.
    const auto n = static_cast<std::size_t>(num_elements(f.shape));
    if (r.dtype != spec::DType::f32 || r.weak || r.shape != f.shape || r.f.size() != n || !r.i.empty()) {
      r = Value{};
      r.shape = f.shape;
      r.f.resize(n);
    }
    f.run(root, r.f.data());
    return true;
  }
  View dst;
  try {
    dst = view_of(a->target);
  } catch (const ExecError &) {
    return false; // the Value path faults where it would have
  }
  if (dst.dtype() != spec::DType::f32 || !dst.is_contiguous() || dst.shape() != f.shape) return false;
  // Chunks of the target are written while later chunks of the operands are
  // still to be read: only an operand that is exactly the target may overlap.
  for (const View &v : f.reads)
    if (v.box.overlaps(dst.box) && (v.box.lo != dst.box.lo || v.box.hi != dst.box.hi)) return false;
  for (const View &v : f.reads) {
    mem_.before_read(v);
    loaded(v, nullptr); // (no where: arithmetic alone)
  }
  if (a->accumulate) {
    mem_.before_read(dst);
    const int cur =
        f.add({Fused::Kind::block, reinterpret_cast<const float *>(dst.array->data()) + dst.offset()});
    root = f.add({Fused::Kind::add, nullptr, 0, cur, root, f.ops++});
  }
  mem_.before_write(dst);
  mem_.on_store(dst, false, s.loc);
  f.run(root, reinterpret_cast<float *>(dst.array->data()) + dst.offset());
  return true;
}

Value Interp::load_value(const View &v, const std::string &name) {
  Value r = load(v);
  if (!bounds) return r;
  FloatVec e;
  if (HostArray *b = mem_.bound_of(name)) {
    View bv = v; // (the same elements of the bound)
    bv.array = b;
    e = load(bv).f;
  }
  error_bound::track(r, *bounds, std::move(e));
  return r;
}

void Interp::loaded(const View &v, const Expr *e) {
  if (!mem_.follows_loads() || (e && kept_refs_.count(e))) return;
  const auto it = e ? masked_refs_.find(e) : masked_refs_.end();
  if (it == masked_refs_.end()) return mem_.on_load(v, nullptr, stmt_loc_);
  // A masked load reads the lanes its mask selects.
  const auto c = conds_.find(it->second.cond);
  if (c == conds_.end()) return; // (not under its where now: not placed)
  spec::LaneMask m{c->second->shape, {}};
  for (std::int64_t k = 0; k < c->second->size(); ++k)
    m.on.push_back((c->second->at(k) != 0) == it->second.holds);
  if (auto lanes = spec::selected_lanes({m}, v.shape())) mem_.on_load(v, &*lanes, stmt_loc_);
}

void Interp::check_prefetch_reads(const spec::Stmt &s) {
  auto [it, fresh] = prefetch_reads_.try_emplace(&s, false);
  if (fresh) {
    bool found = false;
    spec::for_each_expr(s, [&](const Expr &e) { found = found || spec::has_elaborated_reads(e); });
    it->second = found;
  }
  if (!it->second) return;
  const auto value = [&](const Expr &x) { return spec::eval_int(x, env); };
  spec::for_each_expr(s, [&](const Expr &e) {
    const auto r = spec::prefetch_read_outside(e, value);
    if (!r) return;
    // (The grid point where the body runs at one: the oracle binds its program ids.)
    std::vector<std::int64_t> point;
    for (int a = 0;; ++a) {
      auto id = env.find(program_id_name(a));
      if (id == env.end()) break;
      point.push_back(id->second);
    }
    throw ExecError(ExecError::Kind::fault, r->read->loc, spec::read_outside_fault(*r, point));
  });
}

void Interp::exec(const spec::Stmt &s) {
  stmt_loc_ = s.loc;
  check_prefetch_reads(s);
  // The statement's masked loads, for on_load (its value scanned once).
  if (mem_.follows_loads()) {
    const Expr *value = nullptr;
    const auto *a = std::get_if<spec::Assign>(&s.kind);
    if (a) value = &a->value;
    if (const auto *l = std::get_if<spec::Let>(&s.kind)) value = &l->value;
    if (value && scanned_.insert(value).second) {
      masked_refs_.merge(spec::load_masks(*value));
      if (const Expr *k = a ? spec::kept_ref(*a) : nullptr) kept_refs_.insert(k);
    }
  }
  if (exec_fused(s)) return;
  if (const auto *a = std::get_if<spec::Assign>(&s.kind)) {
    if (a->discards()) { // `S[...] = undefined`: poison, so a read of it fails visibly
      const View dst = view_of(a->target);
      mem_.before_write(dst);
      dst.fill_poison();
      return;
    }
    // A bare local is stored from where it lives, not from a copy.
    if (!a->accumulate && a->value.op == Op::Name) {
      if (auto it = locals.find(a->value.name); it != locals.end()) {
        const View dst = view_of(a->target);
        mem_.before_write(dst);
        mem_.on_store(dst, false, s.loc);
        store(it->second, dst, s.loc);
        return;
      }
    }
    Value v = eval(a->value);
    const View dst = view_of(a->target);
    if (a->accumulate) {
      mem_.before_read(dst);
      Value cur = load(dst);
      v.weak = spec::added_as_weak(cur.dtype, v.type());
      v = binary(BinOp::add, std::move(cur), v, s.loc);
    }
    mem_.before_write(dst);
    mem_.on_store(dst, spec::keep_select(*a) != nullptr, s.loc);
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
    exec_branch(*i, eval_int(i->cond) != 0, [&](const spec::Block &b) { exec(b); });
    return;
  }
  if (const auto *f = std::get_if<spec::For>(&s.kind)) {
    const std::int64_t lo = eval_int(f->lo), hi = eval_int(f->hi);
    const auto it = env.find(f->var);
    const auto saved = it != env.end() ? std::optional<std::int64_t>(it->second) : std::nullopt;
    begin_loop(*f);
    for (std::int64_t v = lo; v < hi; ++v) {
      // (A while loop is done at its first failing condition: spec::For.)
      if (f->is_while) {
        check_prefetch_reads(f->body.at(0)); // (what the condition reads, as its `if` would)
        if (eval_int(spec::while_cond(*f)) == 0) break;
      }
      env[f->var] = v;
      exec(f->body);
    }
    if (saved)
      env[f->var] = *saved;
    else
      env.erase(f->var);
    // A while loop that needs more iterations than its bound (spec::For).
    if (f->is_while && eval_int(spec::while_cond(*f)) != 0)
      bad(s.loc, spec::while_bound_message(s.loc, std::max<std::int64_t>(hi - lo, 0)));
    return;
  }
  if (const auto *d = std::get_if<spec::Dma>(&s.kind)) {
    if (d->action == spec::DmaAction::bind) {
      descriptors_[d->descriptor] = *d;
      return;
    }
    if (d->action != spec::DmaAction::start && d->action != spec::DmaAction::sync_copy) return;
    const spec::Dma *c = d;
    if (!d->descriptor.empty()) {
      auto it = descriptors_.find(d->descriptor);
      if (it == descriptors_.end()) bad(s.loc, "'" + d->descriptor + "' is no DMA descriptor");
      c = &it->second;
    }
    const View src = view_of(c->src), dst = view_of(c->dst);
    mem_.before_read(src);
    Value v = load(src);
    mem_.before_write(dst);
    store(v, dst, s.loc);
    return;
  }
  if (std::holds_alternative<spec::CommitSmem>(s.kind)) return; // a fence: no value
  bad(s.loc, "this statement is not allowed in a body");
}

void Interp::exec_branch(const spec::If &i, bool taken, const std::function<void(const spec::Block &)> &run) {
  std::set<std::string> other;
  spec::bound_names(taken ? i.else_body : i.then_body, other);
  std::vector<std::string> strong;
  for (const auto &[n, v] : locals)
    if (!v.weak && !other.count(n)) strong.push_back(n);
  run(taken ? i.then_body : i.else_body);
  for (const auto &n : strong)
    if (auto l = locals.find(n); l != locals.end()) l->second.weak = false;
}

void Interp::begin_loop(const spec::For &f) {
  locals.erase(f.var);
  // A weak carry (a literal) becomes strong, as fori_loop promotes it
  // (spec::typecheck gives it the same type).
  std::set<std::string> rebound;
  spec::bound_names(f.body, rebound);
  for (const auto &n : rebound)
    if (auto l = locals.find(n); l != locals.end()) l->second.weak = false;
}

void Interp::exec(const spec::Block &b) {
  for (const auto &s : b)
    exec(s);
}

} // namespace pipecheck::executor
