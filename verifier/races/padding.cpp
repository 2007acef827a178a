#include "verifier/races/padding.hpp"

#include "spec/place.hpp"
#include "spec/prefetch.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipecheck::verifier::races {

namespace {

using spec::Expr;
using spec::Op;
using spec::StepBox;

std::optional<std::int64_t> numel(const Shape &s) {
  std::int64_t n = 1;
  for (auto d : s) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMaxTrackedElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

bool small(const Shape &s) { return numel(s).has_value(); }

std::optional<Shape> broadcast_shape(const Shape &a, const Shape &b) {
  Shape r(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    r[r.size() - 1 - i] = x == 1 ? y : x;
  }
  return r;
}

/// The flat index in `from` of each element of `to` when `from` broadcasts
/// to `to` (jnp's rules), else nullopt. Both must be small.
std::optional<std::vector<std::int64_t>> broadcast_map(const Shape &from, const Shape &to) {
  if (from.size() > to.size()) return std::nullopt;
  const std::size_t off = to.size() - from.size();
  std::vector<std::int64_t> stride(to.size(), 0);
  std::int64_t s = 1;
  for (std::size_t i = from.size(); i-- > 0;) {
    if (from[i] != to[off + i] && from[i] != 1) return std::nullopt;
    stride[off + i] = from[i] == 1 ? 0 : s;
    s *= from[i];
  }
  const auto n = numel(to);
  if (!n) return std::nullopt;
  std::vector<std::int64_t> out(static_cast<std::size_t>(*n));
  std::vector<std::int64_t> idx(to.size(), 0);
  std::int64_t at = 0;
  for (std::int64_t k = 0; k < *n; ++k) {
    out[static_cast<std::size_t>(k)] = at;
    for (std::size_t d = to.size(); d-- > 0;) {
      at += stride[d];
      if (++idx[d] < to[d]) break;
      at -= stride[d] * idx[d];
      idx[d] = 0;
    }
  }
  return out;
}

/// The shape a tuple argument names, or nullopt.
std::optional<Shape> shape_arg(const Expr &t, const spec::Env &env) {
  if (t.op != Op::Tuple) return std::nullopt;
  Shape s;
  for (const auto &x : t.args) {
    auto v = spec::eval_int(x, env);
    if (!v || *v < 0) return std::nullopt;
    s.push_back(*v);
  }
  return s;
}

/// `local[subs]` on a value of shape `from`: the result's shape and, per
/// result element, the flat index it reads.
std::optional<std::pair<Shape, std::vector<std::int64_t>>> index_map(const Shape &from, const Expr &ref,
                                                                     const spec::Env &env) {
  const auto subs =
      spec::value_subscripts_of(ref, [&](const Expr &x, bool) { return spec::eval_int(x, env); });
  const spec::ValueIndexed ix = spec::index_value(from, subs);
  if (!ix.ok() || ix.part.dims.size() != from.size() || !small(ix.shape) || !small(from)) return std::nullopt;
  for (auto d : ix.shape)
    if (d < 0) return std::nullopt;
  // Row-major order over the part kept is the result's order: new axes have
  // extent 1 and dropped dims extent 1 too.
  std::vector<std::int64_t> out;
  const std::size_t r = from.size();
  std::vector<std::int64_t> idx(r);
  for (std::size_t d = 0; d < r; ++d) {
    if (ix.part.dims[d].lo < 0 || ix.part.dims[d].hi > from[d]) return std::nullopt;
    if (ix.part.dims[d].hi <= ix.part.dims[d].lo) return std::pair{ix.shape, out};
    idx[d] = ix.part.dims[d].lo;
  }
  while (true) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < r; ++d)
      flat = flat * from[d] + idx[d];
    out.push_back(flat);
    std::size_t d = r;
    while (d-- > 0) {
      if (++idx[d] < ix.part.dims[d].hi) break;
      idx[d] = ix.part.dims[d].lo;
    }
    if (d == static_cast<std::size_t>(-1)) break;
  }
  return std::pair{ix.shape, out};
}

std::uint8_t state_at(const PadValue &v, std::int64_t i) {
  if (!v.any) return kClean;
  return v.bits.empty() ? std::uint8_t{kGarbage} : v.bits[static_cast<std::size_t>(i)];
}

/// How an elementwise operation treats zero padding (kZero) in its
/// operands, the others clean: whether the result is still zero padding
/// (otherwise it is garbage). Garbage in any operand makes garbage.
enum class ZeroRule {
  all,   ///< zero only where every operand is (`a + b`, `maximum`, `where`, `-a`, `abs(a)`)
  any,   ///< zero where any operand is (`a * b`, `a & b`)
  first, ///< zero where the first operand is and no other (`a / b`, `a % b`)
  none,  ///< never zero (`exp(a)`, `a == b`, `cos(a)`)
  /// a running sum's update (`c = c + v`): zero padding adds nothing to data
  /// (data where either is data, zero where both are zero)
  sum,
};

/// The rule of an elementwise Call `f` (spec::is_elementwise_fn, where).
ZeroRule zero_rule(const std::string &f) {
  static const char *keeps[] = {"abs",  "neg",   "cast",  "sqrt",  "tanh",    "sin",     "erf",  "floor",
                                "ceil", "round", "sign",  "expm1", "log1p",   "tan",     "asin", "atan",
                                "sinh", "asinh", "atanh", "cbrt",  "maximum", "minimum", "where"};
  for (const char *k : keeps)
    if (f == k) return ZeroRule::all;
  if (f == "shift_left" || f == "shift_right_logical" || f == "shift_right_arithmetic")
    return ZeroRule::first;
  return ZeroRule::none;
}

/// A literal zero: `0`, `0.0`, `zeros`, a cast or broadcast of one.
bool literal_zero(const Expr &e) {
  if (e.op == Op::Zeros) return true;
  if (e.op == Op::Int) return e.int_value == 0;
  if (e.op == Op::Float) return e.float_value == 0.0;
  if (e.op == Op::Call && (e.name == "cast" || e.name == "broadcast_to" || e.name == "full") &&
      e.num_positional() >= 1)
    return literal_zero(e.args[0]);
  return false;
}

std::vector<bool> literal_zeros(const Expr &e, std::size_t n) {
  std::vector<bool> out(n, false);
  for (std::size_t k = 0; k < n && k < e.args.size(); ++k)
    out[k] = literal_zero(e.args[k]);
  return out;
}

/// `a ** p`, pow(a, p): 0 ** p is 0 for a positive constant p.
bool positive_power(const Expr &p, const spec::Env &env) {
  if (p.op == Op::Float) return p.float_value > 0;
  const auto v = spec::eval_int(p, env);
  return v && *v > 0;
}

/// The rule of an elementwise operator.
ZeroRule zero_rule(Op op) {
  switch (op) {
  case Op::Mul:
  case Op::And:
  case Op::BitAnd: return ZeroRule::any;
  case Op::Div:
  case Op::FloorDiv:
  case Op::Mod: return ZeroRule::first;
  case Op::Neg:
  case Op::Add:
  case Op::Sub:
  case Op::Or:
  case Op::BitOr: return ZeroRule::all;
  default: return ZeroRule::none;
  }
}

/// One element of an elementwise result from its operands' states.
/// `literal`: per operand, whether it is a literal zero (`0.0`, `zeros`),
/// which stands beside zero padding as a zero (`maximum(z, 0.0)` is 0).
std::uint8_t combined(const std::uint8_t *st, std::size_t n, ZeroRule rule,
                      const std::vector<bool> &literal) {
  std::size_t zeros = 0, literal_zeros = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (st[j] == kGarbage) return kGarbage;
    zeros += st[j] == kZero;
    literal_zeros += st[j] == kClean && j < literal.size() && literal[j];
  }
  if (zeros == 0) return kClean;
  switch (rule) {
  case ZeroRule::all: return zeros + literal_zeros == n ? kZero : kGarbage;
  case ZeroRule::any: return kZero;
  case ZeroRule::first: return st[0] == kZero && zeros == 1 ? kZero : kGarbage;
  case ZeroRule::none: return kGarbage;
  case ZeroRule::sum: return zeros == n ? kZero : kClean;
  }
  return kGarbage;
}

/// How a reduction (or a running one) takes zero padding in.
enum class Fold {
  sum, ///< sum, cumsum: a zero adds nothing
  max, ///< max, min, argmax, cummax: a zero may win
};

/// The state of a reduction of a line whose elements hold `garbage`, `zeros`
/// zero padding and `clean` elements.
std::uint8_t folded(bool garbage, std::int64_t zeros, std::int64_t clean, Fold f) {
  if (garbage) return kGarbage;
  if (zeros == 0) return kClean;
  if (clean == 0) return kZero;
  return f == Fold::sum ? kClean : kGarbage;
}

PadValue none(std::optional<Shape> s) { return PadValue{std::move(s), false, {}}; }
PadValue everywhere(std::optional<Shape> s) { return PadValue{std::move(s), true, {}}; }

bool has_state(const PadValue &v, std::uint8_t state) {
  if (!v.any) return false;
  if (v.bits.empty()) return state == kGarbage;
  return std::find(v.bits.begin(), v.bits.end(), state) != v.bits.end();
}

/// Drops a per-element map that holds no padding.
PadValue normalized(PadValue v) {
  if (v.any && !v.bits.empty() && std::none_of(v.bits.begin(), v.bits.end(), [](auto b) { return b != 0; })) {
    v.any = false;
    v.bits.clear();
  }
  return v;
}

/// Padding of `v` gathered through `map` into a value of shape `to`.
PadValue gathered(const PadValue &v, const Shape &to, const std::vector<std::int64_t> &map) {
  if (!v.any) return none(to);
  if (v.bits.empty()) return everywhere(to);
  PadValue r{to, true, std::vector<std::uint8_t>(map.size())};
  for (std::size_t k = 0; k < map.size(); ++k)
    r.bits[k] = v.bits[static_cast<std::size_t>(map[k])];
  return normalized(std::move(r));
}

/// The elementwise combination of `args`: garbage where any of them is,
/// zero padding where `rule` keeps it so.
PadValue elementwise(const std::vector<PadValue> &args, ZeroRule rule = ZeroRule::all,
                     const std::vector<bool> &literal = {}) {
  std::optional<Shape> shape = Shape{};
  bool any = false;
  for (const auto &a : args) {
    any |= a.any;
    if (shape && a.shape)
      shape = broadcast_shape(*shape, *a.shape);
    else
      shape.reset();
  }
  if (!any) return none(shape);
  if (!shape || !small(*shape)) return everywhere(shape);
  const auto n = static_cast<std::size_t>(*numel(*shape));
  PadValue r{shape, true, std::vector<std::uint8_t>(n, 0)};
  // (An argument of the result's shape is read in place: no map.)
  std::vector<std::vector<std::int64_t>> maps(args.size());
  std::vector<bool> same(args.size(), false);
  for (std::size_t j = 0; j < args.size(); ++j) {
    if (!args[j].any) continue;
    if ((same[j] = *args[j].shape == *shape)) continue;
    auto map = broadcast_map(*args[j].shape, *shape);
    if (!map) return everywhere(shape);
    maps[j] = std::move(*map);
  }
  std::vector<std::uint8_t> st(args.size(), kClean);
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t j = 0; j < args.size(); ++j)
      st[j] = !args[j].any ? std::uint8_t{kClean}
                           : state_at(args[j], same[j] ? static_cast<std::int64_t>(k) : maps[j][k]);
    r.bits[k] = combined(st.data(), st.size(), rule, literal);
  }
  return normalized(std::move(r));
}

/// `where(c, a, b)` with c known: padded where c selects a padded element
/// (nullopt where the shapes do not broadcast or are too large to follow).
std::optional<PadValue> selected(const IntTensor &c, const PadValue &a, const PadValue &b) {
  if (!a.shape || !b.shape) return std::nullopt;
  auto s1 = broadcast_shape(c.shape, *a.shape);
  auto shape = s1 ? broadcast_shape(*s1, *b.shape) : std::nullopt;
  if (!shape || !small(*shape)) return std::nullopt;
  if (!a.any && !b.any) return none(shape);
  auto mc = broadcast_map(c.shape, *shape), ma = broadcast_map(*a.shape, *shape),
       mb = broadcast_map(*b.shape, *shape);
  if (!mc || !ma || !mb) return std::nullopt;
  PadValue r{shape, true, std::vector<std::uint8_t>(mc->size(), 0)};
  for (std::size_t k = 0; k < mc->size(); ++k)
    r.bits[k] = c.v[static_cast<std::size_t>((*mc)[k])] ? state_at(a, (*ma)[k]) : state_at(b, (*mb)[k]);
  return normalized(std::move(r));
}

/// A reduction of `v` along `axis` (all axes when nullopt).
PadValue reduced(const PadValue &v, std::optional<std::int64_t> axis, bool keepdims, Fold fold) {
  if (!v.shape) return v.any ? everywhere(std::nullopt) : none(std::nullopt);
  const Shape &s = *v.shape;
  Shape out;
  std::optional<std::size_t> ax;
  if (axis) {
    const auto r = static_cast<std::int64_t>(s.size());
    if (*axis < -r || *axis >= r) return v.any ? everywhere(std::nullopt) : none(std::nullopt);
    ax = static_cast<std::size_t>(*axis < 0 ? *axis + r : *axis);
  }
  for (std::size_t d = 0; d < s.size(); ++d) {
    const bool gone = !ax || d == *ax;
    if (!gone)
      out.push_back(s[d]);
    else if (keepdims)
      out.push_back(1);
  }
  if (!v.any) return none(out);
  if (v.bits.empty()) return everywhere(out);
  // Flat index = (outer * s[ax] + k) * inner + in (all axes: one line).
  std::int64_t outer = 1, inner = 1, len = static_cast<std::int64_t>(v.bits.size());
  if (ax) {
    len = s[*ax];
    for (std::size_t d = 0; d < *ax; ++d)
      outer *= s[d];
    for (std::size_t d = *ax + 1; d < s.size(); ++d)
      inner *= s[d];
  }
  PadValue r{out, true, std::vector<std::uint8_t>(static_cast<std::size_t>(outer * inner), 0)};
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      bool garbage = false;
      std::int64_t zeros = 0, clean = 0;
      for (std::int64_t k = 0; k < len; ++k) {
        const auto b = v.bits[static_cast<std::size_t>((o * len + k) * inner + i)];
        garbage |= b == kGarbage;
        zeros += b == kZero;
        clean += b == kClean;
      }
      r.bits[static_cast<std::size_t>(o * inner + i)] = folded(garbage, zeros, clean, fold);
    }
  return normalized(std::move(r));
}

/// Per row of a 2-D value's lines along `line_dim` (1: rows, 0: columns):
/// whether it holds garbage, and whether it is zero padding throughout.
struct LineStates {
  std::vector<std::uint8_t> garbage, all_zero;
};
LineStates line_states(const PadValue &v, bool by_column) {
  const std::int64_t rows = (*v.shape)[0], cols = (*v.shape)[1];
  const std::int64_t n = by_column ? cols : rows;
  LineStates l{std::vector<std::uint8_t>(static_cast<std::size_t>(n), 0),
               std::vector<std::uint8_t>(static_cast<std::size_t>(n), 1)};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto st = state_at(v, r * cols + c);
      const auto at = static_cast<std::size_t>(by_column ? c : r);
      l.garbage[at] |= st == kGarbage;
      if (st != kZero) l.all_zero[at] = 0;
    }
  return l;
}

/// dot(a, b) of 2-D values: element (i, j) is garbage when row i of a or
/// column j of b holds garbage (0 * garbage is garbage); zero padding adds
/// nothing to it (0 * b), and it is zero padding itself where that row or
/// column is zero padding throughout.
PadValue dotted(const PadValue &a, const PadValue &b, bool ta, bool tb) {
  if (!a.shape || !b.shape || a.shape->size() != 2 || b.shape->size() != 2)
    return a.any || b.any ? everywhere(std::nullopt) : none(std::nullopt);
  const std::int64_t m = (*a.shape)[ta ? 1 : 0], n = (*b.shape)[tb ? 0 : 1];
  const Shape out{m, n};
  if (!a.any && !b.any) return none(out);
  if (!small(out) || (a.any && a.bits.empty()) || (b.any && b.bits.empty())) return everywhere(out);
  // (a's rows are its dim 0, its dim 1 read transposed; b's columns its dim 1, or 0.)
  const LineStates row = line_states(a, ta), col = line_states(b, !tb);
  PadValue v{out, true, std::vector<std::uint8_t>(static_cast<std::size_t>(m * n), 0)};
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const auto ri = static_cast<std::size_t>(i), cj = static_cast<std::size_t>(j);
      v.bits[static_cast<std::size_t>(i * n + j)] =
          row.garbage[ri] || col.garbage[cj]     ? std::uint8_t{kGarbage}
          : row.all_zero[ri] || col.all_zero[cj] ? std::uint8_t{kZero}
                                                 : std::uint8_t{kClean};
    }
  return normalized(std::move(v));
}

// lax.dot_general: an output element (batch, a-free, b-free) is padded when
// an a element of its batch and a-free index is (whatever its contracted
// index), or a b element of its batch and b-free index: padding along a
// contracted dim reaches the whole output row or column, along a batch or
// free dim only its own.
PadValue dot_generaled(const PadValue &a, const PadValue &b, const spec::DotDims &d) {
  if (!a.shape || !b.shape) return a.any || b.any ? everywhere(std::nullopt) : none(std::nullopt);
  const auto t = spec::dot_general_type(spec::TensorType{spec::DType::f32, false, *a.shape},
                                        spec::TensorType{spec::DType::f32, false, *b.shape}, d);
  if (!t.ok()) return a.any || b.any ? everywhere(std::nullopt) : none(std::nullopt);
  const Shape out = t.value.shape;
  if (!a.any && !b.any) return none(out);
  if (!small(out) || (a.any && a.bits.empty()) || (b.any && b.bits.empty())) return everywhere(out);
  // Per (batch, free) index of an operand: whether its line along the
  // contracted dims holds garbage, and whether it is zero padding throughout.
  auto marks = [](const PadValue &v, const std::vector<std::int64_t> &batch,
                  const std::vector<std::int64_t> &con, std::int64_t &nbatch, std::int64_t &nfree) {
    const Shape &sh = *v.shape;
    std::vector<int> role(sh.size(), 2); // 0 batch, 1 contracted, 2 free
    for (auto x : con)
      role[static_cast<std::size_t>(x)] = 1;
    nbatch = 1;
    nfree = 1;
    for (auto x : batch)
      role[static_cast<std::size_t>(x)] = 0, nbatch *= sh[static_cast<std::size_t>(x)];
    for (std::size_t i = 0; i < sh.size(); ++i)
      if (role[i] == 2) nfree *= sh[i];
    LineStates m{std::vector<std::uint8_t>(static_cast<std::size_t>(nbatch * nfree), 0),
                 std::vector<std::uint8_t>(static_cast<std::size_t>(nbatch * nfree), 1)};
    const std::int64_t n = *numel(sh);
    std::vector<std::int64_t> idx(sh.size(), 0);
    for (std::int64_t k = 0; k < n; ++k) {
      if (const auto st = state_at(v, k); st != kZero) {
        std::int64_t bi = 0, fi = 0;
        for (auto x : batch)
          bi = bi * sh[static_cast<std::size_t>(x)] + idx[static_cast<std::size_t>(x)];
        for (std::size_t i = 0; i < sh.size(); ++i)
          if (role[i] == 2) fi = fi * sh[i] + idx[i];
        const auto at = static_cast<std::size_t>(bi * nfree + fi);
        m.all_zero[at] = 0;
        if (st == kGarbage) m.garbage[at] = 1;
      }
      for (std::size_t i = sh.size(); i-- > 0;) {
        if (++idx[i] < sh[i]) break;
        idx[i] = 0;
      }
    }
    return m;
  };
  std::int64_t nb = 1, m = 1, nb2 = 1, n = 1;
  const auto ma = marks(a, d.lhs_batch, d.lhs_contract, nb, m);
  const auto mb = marks(b, d.rhs_batch, d.rhs_contract, nb2, n);
  PadValue v{out, true, std::vector<std::uint8_t>(static_cast<std::size_t>(nb * m * n), 0)};
  for (std::int64_t x = 0; x < nb; ++x)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const auto ai = static_cast<std::size_t>(x * m + i), bj = static_cast<std::size_t>(x * n + j);
        v.bits[static_cast<std::size_t>((x * m + i) * n + j)] =
            ma.garbage[ai] || mb.garbage[bj]     ? std::uint8_t{kGarbage}
            : ma.all_zero[ai] || mb.all_zero[bj] ? std::uint8_t{kZero}
                                                 : std::uint8_t{kClean};
      }
  return normalized(std::move(v));
}

std::optional<std::int64_t> int_kwarg(const Expr &e, const char *k, const spec::Env &env) {
  const Expr *x = e.kwarg(k);
  if (!x) return std::nullopt;
  return spec::eval_int(*x, env);
}

bool bool_kwarg(const Expr &e, const char *k) {
  const Expr *x = e.kwarg(k);
  return x && spec::bool_literal(*x).value_or(false);
}

// ------------------------------------------------------- concrete values

constexpr std::int64_t kIntLimit = std::numeric_limits<std::int32_t>::max();

/// Within i32 (the executor wraps beyond it; such a value is not decided here).
bool in_range(std::int64_t v) { return v >= -kIntLimit - 1 && v <= kIntLimit; }

std::optional<IntTensor> combine(const IntTensor &a, const IntTensor &b, Op op) {
  auto shape = broadcast_shape(a.shape, b.shape);
  if (!shape) return std::nullopt;
  auto ma = broadcast_map(a.shape, *shape), mb = broadcast_map(b.shape, *shape);
  if (!ma || !mb) return std::nullopt;
  IntTensor r{*shape, std::vector<std::int64_t>(ma->size()), false};
  const bool cmp =
      op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge;
  r.is_bool = cmp || ((op == Op::BitAnd || op == Op::BitOr) && a.is_bool && b.is_bool);
  if (!cmp) { // (the narrower dtype's range: a result past it is not decided)
    r.lo = std::max(a.lo, b.lo);
    r.hi = std::min(a.hi, b.hi);
  }
  for (std::size_t k = 0; k < ma->size(); ++k) {
    const std::int64_t x = a.v[static_cast<std::size_t>((*ma)[k])],
                       y = b.v[static_cast<std::size_t>((*mb)[k])];
    std::int64_t z = 0;
    switch (op) {
    case Op::Add: z = x + y; break;
    case Op::Sub: z = x - y; break;
    case Op::Mul: z = x * y; break; // |x|, |y| < 2^31: no int64 overflow
    case Op::FloorDiv:
      if (y == 0) return std::nullopt;
      z = spec::floor_div(x, y);
      break;
    case Op::Mod:
      if (y == 0) return std::nullopt;
      z = spec::floor_mod(x, y);
      break;
    case Op::Eq: z = x == y; break;
    case Op::Ne: z = x != y; break;
    case Op::Lt: z = x < y; break;
    case Op::Le: z = x <= y; break;
    case Op::Gt: z = x > y; break;
    case Op::Ge: z = x >= y; break;
    case Op::BitAnd: z = x & y; break;
    case Op::BitOr: z = x | y; break;
    default: return std::nullopt;
    }
    if (!in_range(z) || z < r.lo || z > r.hi) return std::nullopt;
    r.v[k] = z;
  }
  return r;
}

std::optional<IntTensor> scalar(std::int64_t v, bool is_bool) {
  if (!in_range(v)) return std::nullopt;
  return IntTensor{{}, {v}, is_bool};
}

bool is_comparison(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge;
}

} // namespace

namespace {

/// A scalar constant strictly between two integers (`0.5`, `n - 0.5`):
/// float literals and integer scalars under + - *, or nullopt.
std::optional<double> fractional_constant(const Expr &e, const spec::Env &env) {
  std::function<std::optional<double>(const Expr &)> value = [&](const Expr &x) -> std::optional<double> {
    if (x.op == Op::Float) return std::isfinite(x.float_value) ? std::optional(x.float_value) : std::nullopt;
    if (x.op == Op::Neg) {
      auto a = value(x.args.at(0));
      return a ? std::optional(-*a) : std::nullopt;
    }
    if (x.op == Op::Add || x.op == Op::Sub || x.op == Op::Mul) {
      auto a = value(x.args.at(0)), b = value(x.args.at(1));
      if (!a || !b) return std::nullopt;
      return x.op == Op::Add ? *a + *b : x.op == Op::Sub ? *a - *b : *a * *b;
    }
    if (x.op == Op::Call) return std::nullopt;
    if (auto v = spec::eval_int(x, env)) return static_cast<double>(*v);
    return std::nullopt;
  };
  auto v = value(e);
  if (!v || std::trunc(*v) == *v || std::abs(*v) > 8388608.0)
    return std::nullopt; // (f32 has no fraction past 2^23)
  return v;
}

} // namespace

std::optional<IntTensor> PaddingFlow::concrete(const Expr &e, const spec::Env &env) const {
  return concrete_in(e, env, values_, nullptr);
}

PaddingFlow::LazyPtr PaddingFlow::defer(const Expr &e, const spec::Env &env) const {
  // A value named through a chain this long is computed now (the same value
  // as later: it is computed from what it captured), which ends its chain.
  constexpr int kMaxDepth = 32;
  auto l = std::make_shared<Lazy>();
  l->expr = &e;
  // (Only the integers it names: evaluation looks up names of the
  // expression alone, and the whole env is copied at every bind otherwise.)
  std::function<void(const Expr &)> names = [&](const Expr &x) {
    if (x.op == Op::Name)
      if (auto it = env.find(x.name); it != env.end()) l->env.insert(*it);
    if (x.op == Op::Name || x.op == Op::Ref) {
      if (auto it = values_.find(x.name); it != values_.end()) {
        Lazy &named = *it->second;
        if (!named.forced && named.depth >= kMaxDepth) force(named);
        if (!named.forced) l->depth = std::max(l->depth, named.depth + 1);
        l->values.emplace(x.name, it->second);
      }
      if (pads_.count(x.name)) l->tensors.insert(x.name);
    }
    for (const auto &a : x.args)
      names(a);
  };
  names(e);
  return l;
}

const std::optional<IntTensor> &PaddingFlow::force(Lazy &l) const {
  if (!l.forced) {
    l.value = concrete_in(*l.expr, l.env, l.values, &l.tensors);
    if (l.value && l.shape) {
      // A store: the value broadcast to the buffer, numbers in a numeric one.
      auto m = broadcast_map(l.value->shape, *l.shape);
      if (!m || !small(*l.shape)) {
        l.value.reset();
      } else {
        IntTensor r{*l.shape, std::vector<std::int64_t>(m->size()), l.value->is_bool && l.boolean,
                    l.value->lo, l.value->hi};
        for (std::size_t k = 0; k < m->size(); ++k)
          r.v[k] = l.value->v[static_cast<std::size_t>((*m)[k])];
        l.value = std::move(r);
      }
    }
    l.forced = true;
    l.values.clear(); // what it named is needed no more
  }
  return l.value;
}

/// `tensors`: the tensor locals (nullptr: those bound now).
std::optional<IntTensor> PaddingFlow::concrete_in(const Expr &e, const spec::Env &env,
                                                  const std::map<std::string, LazyPtr> &values,
                                                  const std::set<std::string> *tensors) const {
  const auto is_tensor = [&](const std::string &n) {
    return tensors ? tensors->count(n) > 0 : pads_.count(n) > 0;
  };
  const auto concrete = [&](const Expr &x, const spec::Env &en) {
    return concrete_in(x, en, values, tensors);
  };
  if (e.op == Op::Name || e.op == Op::Ref) {
    // (A buffer has a value only where a whole store gave it one: store.)
    auto it = values.find(e.name);
    if (it == values.end() && is_buffer_(e.name)) return std::nullopt;
    if (it != values.end()) {
      const auto &v = force(*it->second);
      if (!v) return std::nullopt; // a tensor local with no concrete value
      if (e.op == Op::Name) return v;
      auto m = index_map(v->shape, e, env);
      if (!m) return std::nullopt;
      IntTensor r{m->first, std::vector<std::int64_t>(m->second.size()), v->is_bool, v->lo, v->hi};
      for (std::size_t k = 0; k < m->second.size(); ++k)
        r.v[k] = v->v[static_cast<std::size_t>(m->second[k])];
      return r;
    }
    if (is_tensor(e.name)) return std::nullopt; // a tensor local with no concrete value
  }
  if (auto b = spec::bool_literal(e)) return scalar(*b ? 1 : 0, true);
  if (e.op != Op::Call && e.op != Op::Ref && e.op != Op::Float) {
    // Any integer scalar the env decides (params, grid and loop variables).
    bool tensor_name = false;
    if (e.op == Op::Name) tensor_name = is_tensor(e.name);
    if (!tensor_name)
      if (auto v = spec::eval_int(e, env))
        return scalar(*v, is_comparison(e.op) || e.op == Op::Not || e.op == Op::And || e.op == Op::Or);
  }
  // A float literal with an integer value (`cast(c, f32) > 0.0`): exact.
  if (e.op == Op::Float && std::isfinite(e.float_value) && std::trunc(e.float_value) == e.float_value &&
      std::abs(e.float_value) <= 16777216.0)
    return scalar(static_cast<std::int64_t>(e.float_value), false);
  switch (e.op) {
  case Op::Neg: {
    auto a = concrete(e.args.at(0), env);
    if (!a) return std::nullopt;
    for (auto &x : a->v)
      if (!in_range(x = -x)) return std::nullopt;
    a->is_bool = false;
    return a;
  }
  case Op::BitNot: {
    auto a = concrete(e.args.at(0), env);
    if (!a) return std::nullopt;
    for (auto &x : a->v)
      x = a->is_bool ? !x : ~x;
    return a;
  }
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::FloorDiv:
  case Op::Mod:
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
  case Op::BitAnd:
  case Op::BitOr: {
    auto a = concrete(e.args.at(0), env);
    auto b = concrete(e.args.at(1), env);
    // An integer-valued tensor against a constant between two integers
    // (`cast(m, f32) > 0.5`, `cast(col, f32) < n - 0.5`): the same as
    // against the integer on the comparison's side of it.
    if (is_comparison(e.op) && (a.has_value() != b.has_value())) {
      const bool left = !a;
      if (auto c = fractional_constant(e.args.at(left ? 0 : 1), env)) {
        // Normalized to `x OP c`, x the concrete side.
        Op op = e.op;
        if (left)
          op = op == Op::Lt   ? Op::Gt
               : op == Op::Gt ? Op::Lt
               : op == Op::Le ? Op::Ge
               : op == Op::Ge ? Op::Le
                              : op;
        const IntTensor &x = left ? *b : *a;
        if (op == Op::Eq || op == Op::Ne) {
          IntTensor r{x.shape, std::vector<std::int64_t>(x.v.size(), op == Op::Ne ? 1 : 0), true};
          return r;
        }
        // x < c and x >= c against ceil(c); x > c and x <= c against floor(c).
        const double k = op == Op::Lt || op == Op::Ge ? std::ceil(*c) : std::floor(*c);
        if (std::abs(k) > 9.0e15) return std::nullopt;
        return combine(x, *scalar(static_cast<std::int64_t>(k), false), op);
      }
    }
    if (!a || !b) return std::nullopt;
    return combine(*a, *b, e.op);
  }
  case Op::Call: break;
  default: return std::nullopt;
  }
  const std::size_t np = e.num_positional();
  if (e.name == "iota" && np == 2) {
    // Of an integer dtype: its values, and the dtype's range.
    std::int64_t lo = -2147483648LL, hi = 2147483647LL;
    if (const Expr *dt = e.kwarg("dtype")) {
      const auto d = dt->op != Op::Name    ? std::nullopt
                     : dt->name == "int32" ? std::optional(spec::DType::i32)
                                           : spec::parse_dtype(dt->name);
      if (d == spec::DType::i16)
        lo = -32768, hi = 32767;
      else if (d == spec::DType::i8)
        lo = -128, hi = 127;
      else if (d == spec::DType::u8)
        lo = 0, hi = 255;
      else if (d != spec::DType::i32)
        return std::nullopt;
    }
    auto shape = shape_arg(e.args[0], env);
    auto dim = spec::eval_int(e.args[1], env);
    if (!shape || !dim || *dim < 0 || *dim >= static_cast<std::int64_t>(shape->size())) return std::nullopt;
    auto n = numel(*shape);
    if (!n) return std::nullopt;
    std::int64_t inner = 1;
    for (std::size_t d = static_cast<std::size_t>(*dim) + 1; d < shape->size(); ++d)
      inner *= (*shape)[d];
    const std::int64_t ext = (*shape)[static_cast<std::size_t>(*dim)];
    if (ext - 1 > hi) return std::nullopt; // (it wraps)
    IntTensor r{*shape, std::vector<std::int64_t>(static_cast<std::size_t>(*n)), false, lo, hi};
    for (std::int64_t k = 0; k < *n; ++k)
      r.v[static_cast<std::size_t>(k)] = (k / inner) % ext;
    return r;
  }
  if (e.name == "where" && np == 3) {
    auto c = concrete(e.args[0], env), a = concrete(e.args[1], env), b = concrete(e.args[2], env);
    if (!c || !a || !b) return std::nullopt;
    auto s1 = broadcast_shape(c->shape, a->shape);
    auto shape = s1 ? broadcast_shape(*s1, b->shape) : std::nullopt;
    if (!shape) return std::nullopt;
    auto mc = broadcast_map(c->shape, *shape), ma = broadcast_map(a->shape, *shape),
         mb = broadcast_map(b->shape, *shape);
    if (!mc || !ma || !mb) return std::nullopt;
    IntTensor r{*shape, std::vector<std::int64_t>(mc->size()), a->is_bool && b->is_bool,
                std::max(a->lo, b->lo), std::min(a->hi, b->hi)};
    for (std::size_t k = 0; k < mc->size(); ++k)
      r.v[k] = c->v[static_cast<std::size_t>((*mc)[k])] ? a->v[static_cast<std::size_t>((*ma)[k])]
                                                        : b->v[static_cast<std::size_t>((*mb)[k])];
    return r;
  }
  // min(a, b) and max(a, b) of two values are minimum and maximum (the
  // body's `min(bs, n - i * bs)`).
  if ((e.name == "minimum" || e.name == "maximum" || e.name == "min" || e.name == "max") && np == 2) {
    auto a = concrete(e.args[0], env), b = concrete(e.args[1], env);
    if (!a || !b) return std::nullopt;
    auto lt = combine(*a, *b, Op::Lt);
    if (!lt) return std::nullopt;
    auto ma = broadcast_map(a->shape, lt->shape), mb = broadcast_map(b->shape, lt->shape);
    IntTensor r{lt->shape, std::vector<std::int64_t>(lt->v.size()), a->is_bool && b->is_bool,
                std::max(a->lo, b->lo), std::min(a->hi, b->hi)};
    for (std::size_t k = 0; k < r.v.size(); ++k) {
      const std::int64_t x = a->v[static_cast<std::size_t>((*ma)[k])],
                         y = b->v[static_cast<std::size_t>((*mb)[k])];
      r.v[k] = (e.name == "minimum" || e.name == "min") == (lt->v[k] != 0) ? x : y;
    }
    return r;
  }
  // abs and sign, elementwise: jnp's integer `//` and `%` on a tensor come
  // out of the export as where/sign/abs trees (masked_store's `iota // group`).
  if ((e.name == "abs" || e.name == "sign") && np == 1) {
    auto a = concrete(e.args[0], env);
    if (!a) return std::nullopt;
    for (auto &x : a->v) {
      if (e.name == "sign")
        x = (x > 0) - (x < 0);
      else if (!in_range(x = x < 0 ? -x : x))
        return std::nullopt;
    }
    a->is_bool = false;
    return a;
  }
  // cast to bool (nonzero), or to a dtype that holds every value exactly
  // (an integer dtype within its range; a float one up to its exact
  // integers): a mask spelled `cast(c, f32) > 0` or `cast(cast(c, i32), bool)`.
  if (e.name == "cast" && np == 2 && e.args[1].op == Op::Name) {
    auto to = spec::parse_dtype(e.args[1].name);
    auto a = concrete(e.args[0], env);
    if (!to || !a) return std::nullopt;
    if (*to == spec::DType::boolean) {
      for (auto &x : a->v)
        x = x != 0;
      a->is_bool = true;
      return a;
    }
    const auto [lo, hi] = spec::exact_int_range(*to);
    for (std::int64_t x : a->v)
      if (x < lo || x > hi) return std::nullopt;
    a->is_bool = false;
    return a;
  }
  // tile(a, reps): a repeated along each dim (reps and a's shape padded
  // with leading 1s to one rank).
  if (e.name == "tile" && np == 2) {
    auto a = concrete(e.args[0], env);
    auto reps = shape_arg(e.args[1], env);
    if (!a || !reps) return std::nullopt;
    Shape in = a->shape, rp = *reps;
    while (in.size() < rp.size())
      in.insert(in.begin(), 1);
    while (rp.size() < in.size())
      rp.insert(rp.begin(), 1);
    Shape out(in.size());
    for (std::size_t d = 0; d < in.size(); ++d)
      out[d] = in[d] * rp[d];
    if (!small(out)) return std::nullopt;
    IntTensor r{out, std::vector<std::int64_t>(static_cast<std::size_t>(*numel(out))), a->is_bool, a->lo,
                a->hi};
    for (std::size_t k = 0; k < r.v.size(); ++k) {
      std::int64_t rest = static_cast<std::int64_t>(k), src = 0, stride = 1;
      for (std::size_t d = out.size(); d-- > 0;) {
        const std::int64_t i = rest % out[d];
        rest /= out[d];
        src += (i % in[d]) * stride;
        stride *= in[d];
      }
      r.v[k] = a->v[static_cast<std::size_t>(src)];
    }
    return r;
  }
  // concatenate(a, b, ..., axis=k).
  if (e.name == "concatenate" && np >= 1) {
    std::vector<IntTensor> parts;
    for (std::size_t k = 0; k < np; ++k) {
      auto p = concrete(e.args[k], env);
      if (!p) return std::nullopt;
      parts.push_back(std::move(*p));
    }
    const auto r0 = static_cast<std::int64_t>(parts[0].shape.size());
    std::int64_t axis = 0;
    if (e.kwarg("axis")) {
      auto ax = int_kwarg(e, "axis", env);
      if (!ax) return std::nullopt;
      axis = *ax;
    }
    if (axis < 0) axis += r0;
    if (axis < 0 || axis >= r0) return std::nullopt;
    const auto ax = static_cast<std::size_t>(axis);
    Shape out = parts[0].shape;
    out[ax] = 0;
    bool is_bool = true;
    for (const auto &p : parts) {
      if (p.shape.size() != out.size()) return std::nullopt;
      for (std::size_t d = 0; d < out.size(); ++d)
        if (d != ax && p.shape[d] != parts[0].shape[d]) return std::nullopt;
      out[ax] += p.shape[ax];
      is_bool = is_bool && p.is_bool;
    }
    if (!small(out)) return std::nullopt;
    std::int64_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < ax; ++d)
      outer *= out[d];
    for (std::size_t d = ax + 1; d < out.size(); ++d)
      inner *= out[d];
    IntTensor r{out, {}, is_bool};
    r.v.reserve(static_cast<std::size_t>(*numel(out)));
    for (std::int64_t o = 0; o < outer; ++o)
      for (const auto &p : parts) {
        const std::int64_t chunk = p.shape[ax] * inner;
        r.v.insert(r.v.end(), p.v.begin() + o * chunk, p.v.begin() + (o + 1) * chunk);
      }
    return r;
  }
  if ((e.name == "reshape" || e.name == "broadcast_to") && np == 2) {
    auto a = concrete(e.args[0], env);
    auto shape = shape_arg(e.args[1], env);
    if (!a || !shape || !small(*shape)) return std::nullopt;
    if (e.name == "reshape") {
      if (numel(*shape) != numel(a->shape)) return std::nullopt;
      a->shape = *shape;
      return a;
    }
    auto m = broadcast_map(a->shape, *shape);
    if (!m) return std::nullopt;
    IntTensor r{*shape, std::vector<std::int64_t>(m->size()), a->is_bool, a->lo, a->hi};
    for (std::size_t k = 0; k < m->size(); ++k)
      r.v[k] = a->v[static_cast<std::size_t>((*m)[k])];
    return r;
  }
  return std::nullopt;
}

namespace {

using spec::AxisLines;
using spec::lines_around;

/// `where(c, a, b)` with c not known: its elements are those of a and b
/// (garbage where c is), but zero where both branches are (zero padding or
/// a literal zero): 0 whichever branch is taken (`where(x > 0, x, 0.0)` of
/// zero padding).
PadValue either_zero(const PadValue &c, const PadValue &a, const PadValue &b, bool a_lit, bool b_lit) {
  PadValue all = elementwise({c, a, b}, ZeroRule::all, {false, a_lit, b_lit});
  if (!all.any || all.bits.empty()) return all;
  const PadValue both = elementwise({a, b}, ZeroRule::all, {a_lit, b_lit});
  if (!both.any || both.bits.empty() || both.shape != all.shape) return all;
  for (std::size_t k = 0; k < all.bits.size(); ++k)
    if (both.bits[k] == kZero) all.bits[k] = kZero;
  return all;
}

/// The padding of flip, roll and the running reductions (cumsum, cummax,
/// cummin) of `a` along `ax`: moved with the elements, or, for a running
/// reduction, from the first padded element of a line on (from the last,
/// reversed). A roll whose shift is not known here may move it anywhere.
PadValue along_axis(const std::string &f, const Expr &e, const PadValue &a, std::int64_t ax,
                    const spec::Env &env) {
  const Shape &s = *a.shape;
  if (!a.any) return none(s);
  std::optional<std::int64_t> shift, stride, stride_axis;
  if (f == "roll") {
    if (e.num_positional() < 2 || !(shift = spec::eval_int(e.args[1], env))) return everywhere(s);
    if (e.kwarg("stride")) {
      stride = int_kwarg(e, "stride", env);
      stride_axis = int_kwarg(e, "stride_axis", env);
      if (!stride || !stride_axis) return everywhere(s);
      if (*stride_axis < 0) *stride_axis += static_cast<std::int64_t>(s.size());
    }
  }
  if (a.bits.empty() || !small(s)) return everywhere(s);
  const AxisLines l = lines_around(s, ax);
  const bool reverse = bool_kwarg(e, "reverse");
  PadValue r{s, true, std::vector<std::uint8_t>(a.bits.size(), 0)};
  bool garbage = false;
  std::int64_t zeros = 0, clean = 0;
  auto at = [&](std::int64_t o, std::int64_t k, std::int64_t i) {
    return static_cast<std::size_t>((o * l.len + k) * l.inner + i);
  };
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i)
      for (std::int64_t step = 0; step < l.len; ++step) {
        const std::int64_t k = reverse ? l.len - 1 - step : step;
        std::uint8_t bit;
        if (f == "flip") {
          bit = a.bits[at(o, l.len - 1 - k, i)];
        } else if (f == "roll") {
          std::int64_t by = *shift;
          if (stride) { // the element's coordinate along stride_axis
            std::int64_t rest = static_cast<std::int64_t>(at(o, k, i));
            for (std::int64_t d = static_cast<std::int64_t>(s.size()) - 1; d > *stride_axis; --d)
              rest /= s[static_cast<std::size_t>(d)];
            by += rest % s[static_cast<std::size_t>(*stride_axis)] * *stride;
          }
          bit = a.bits[at(o, ((k - by) % l.len + l.len) % l.len, i)];
        } else {
          // A running reduction: the line's states so far, folded as its
          // reduction folds them, at this element's place.
          const auto self = a.bits[at(o, k, i)];
          garbage = (step > 0 && garbage) || self == kGarbage;
          zeros = (step > 0 ? zeros : 0) + (self == kZero);
          clean = (step > 0 ? clean : 0) + (self == kClean);
          bit = folded(garbage, zeros, clean, f == "cumsum" ? Fold::sum : Fold::max);
          // (At a place of zero padding any data before it makes a value
          // that is no longer 0.)
          if (self == kZero && bit == kClean) bit = kGarbage;
        }
        r.bits[at(o, k, i)] = bit;
      }
  return normalized(std::move(r));
}

} // namespace

PadValue PaddingFlow::eval(const Expr &e, const spec::Env &env) const {
  switch (e.op) {
  case Op::Int:
  case Op::Float:
  case Op::Zeros:
  case Op::Undefined: return none(Shape{});
  case Op::Name:
  case Op::Ref: {
    if (is_buffer_(e.name)) {
      RefPadding rp = ref_(e);
      if (rp.boxes.empty() && rp.zeros.empty()) return none(rp.shape);
      if (!small(rp.shape)) return rp.boxes.empty() ? none(rp.shape) : everywhere(rp.shape);
      PadValue v{rp.shape, true, std::vector<std::uint8_t>(static_cast<std::size_t>(*numel(rp.shape)), 0)};
      // Zero padding first: garbage over it wins.
      std::vector<std::pair<const spec::StepBox *, std::uint8_t>> marked;
      for (const auto &b : rp.zeros)
        marked.emplace_back(&b, kZero);
      for (const auto &b : rp.boxes)
        marked.emplace_back(&b, kGarbage);
      for (const auto &[bp, state] : marked) {
        const spec::StepBox &b = *bp;
        if (b.size() != rp.shape.size()) {
          if (state == kZero) continue;
          return everywhere(rp.shape);
        }
        // Every element of the box: row-major walk.
        std::vector<std::int64_t> idx;
        bool empty = false;
        for (auto &[lo, hi] : b) {
          idx.push_back(lo);
          empty |= hi <= lo;
        }
        if (empty) continue;
        while (true) {
          std::int64_t flat = 0;
          for (std::size_t d = 0; d < idx.size(); ++d)
            flat = flat * rp.shape[d] + idx[d];
          v.bits[static_cast<std::size_t>(flat)] = state;
          std::size_t d = idx.size();
          while (d-- > 0) {
            if (++idx[d] < b[d].second) break;
            idx[d] = b[d].first;
          }
          if (d == static_cast<std::size_t>(-1)) break;
        }
      }
      return normalized(std::move(v));
    }
    auto it = pads_.find(e.name);
    if (it == pads_.end()) {
      // A param, a loop variable, or a local bound while no padding existed;
      // an element of a prefetch table left open (`sc[0]`, spec::prefetch_element): a scalar.
      if (e.op == Op::Name && (env.count(e.name) || e.name == "inf" || spec::is_prefetch_element(e.name)))
        return none(Shape{});
      return none(std::nullopt);
    }
    if (e.op == Op::Name) return it->second;
    if (!it->second.shape) return it->second.any ? everywhere(std::nullopt) : none(std::nullopt);
    auto m = index_map(*it->second.shape, e, env);
    if (!m) return it->second.any ? everywhere(std::nullopt) : none(std::nullopt);
    return gathered(it->second, m->first, m->second);
  }
  case Op::Call: break;
  case Op::BitAnd: {
    // `a & m` with m known (`(x > 0.5) & (col < n)`): where m is 0 the
    // result is 0 whatever a holds, as `where(m, a, 0)`.
    const PadValue a = eval(e.args.at(0), env), b = eval(e.args.at(1), env);
    if (!a.any && !b.any)
      if (auto r = elementwise({a, b}); r.shape) return r;
    for (std::size_t s = 0; s < 2; ++s)
      if (auto mv = concrete(e.args[s], env); mv && !(s == 0 ? a : b).any)
        if (auto r = selected(*mv, s == 0 ? b : a, none(Shape{}))) return *r;
    return elementwise({a, b}, ZeroRule::any);
  }
  default: {
    std::vector<PadValue> args;
    for (const auto &a : e.args)
      args.push_back(eval(a, env));
    const ZeroRule rule = e.op == Op::Pow && e.args.size() == 2 && positive_power(e.args[1], env)
                              ? ZeroRule::first
                              : zero_rule(e.op);
    return elementwise(args, rule, literal_zeros(e, args.size()));
  }
  }
  const std::size_t np = e.num_positional();
  const std::string &f = e.name;
  if (f == "iota" && np >= 1) return none(shape_arg(e.args[0], env));
  if (f == "program_id" || f == "num_programs") return none(Shape{});
  if (f == "where" && np == 3) {
    const PadValue c = eval(e.args[0], env), a = eval(e.args[1], env), b = eval(e.args[2], env);
    // No padding to select from (the common case): the mask's value is not needed.
    if (!c.any && !a.any && !b.any)
      if (auto r = elementwise({c, a, b}); r.shape) return r;
    auto cv = concrete(e.args[0], env);
    // `where(m & d, a, b)` with m known and d data (`valid & (col ==
    // label[...])`): where m is 0 the value is b, elsewhere it depends on d.
    const Expr &ce = e.args[0];
    if (!cv && ce.op == Op::BitAnd && ce.args.size() == 2)
      for (std::size_t s = 0; s < 2; ++s)
        if (auto mv = concrete(ce.args[s], env); mv && !eval(ce.args[s], env).any)
          if (auto r = selected(*mv, elementwise({eval(ce.args[1 - s], env), a, b}), b)) return *r;
    // The same through a local bound to such an `&` (`valid = rows & (lab[...] != -100)`,
    // a cross-entropy's ignore_index mask).
    if (!cv && ce.op == Op::Name)
      if (auto it = and_masks_.find(ce.name); it != and_masks_.end())
        for (const auto &m : it->second)
          if (const auto &mv = force(*m)) {
            if (auto r = selected(*mv, elementwise({c, a, b}), b)) return *r;
            break;
          }
    if (!cv || c.any) return either_zero(c, a, b, literal_zero(e.args[1]), literal_zero(e.args[2]));
    // (Not value_or: its argument, a pass over every element, would be computed each time.)
    if (auto r = selected(*cv, a, b)) return *r;
    return either_zero(c, a, b, literal_zero(e.args[1]), literal_zero(e.args[2]));
  }
  if ((f == "sum" || f == "max" || f == "min") && np == 1) {
    std::optional<std::int64_t> axis;
    if (e.kwarg("axis")) {
      axis = int_kwarg(e, "axis", env);
      if (!axis) return eval(e.args[0], env).any ? everywhere(std::nullopt) : none(std::nullopt);
    }
    return reduced(eval(e.args[0], env), axis, bool_kwarg(e, "keepdims"), f == "sum" ? Fold::sum : Fold::max);
  }
  if (f == "dot" && np == 2)
    return dotted(eval(e.args[0], env), eval(e.args[1], env), bool_kwarg(e, "trans_a"),
                  bool_kwarg(e, "trans_b"));
  if (f == "dot_general" && np == 2) {
    spec::Loc where;
    const auto dims = spec::dot_general_dims(e, where);
    const PadValue a = eval(e.args[0], env), b = eval(e.args[1], env);
    if (!dims.ok()) return a.any || b.any ? everywhere(std::nullopt) : none(std::nullopt);
    return dot_generaled(a, b, dims.value);
  }
  if (f == "transpose" && np == 1) {
    const PadValue a = eval(e.args[0], env);
    if (!a.shape || a.shape->size() != 2) return a.any ? everywhere(std::nullopt) : none(std::nullopt);
    const Shape out{(*a.shape)[1], (*a.shape)[0]};
    if (!a.any || a.bits.empty()) return PadValue{out, a.any, {}};
    PadValue r{out, true, std::vector<std::uint8_t>(a.bits.size())};
    for (std::int64_t i = 0; i < out[0]; ++i)
      for (std::int64_t j = 0; j < out[1]; ++j)
        r.bits[static_cast<std::size_t>(i * out[1] + j)] = a.bits[static_cast<std::size_t>(j * out[0] + i)];
    return r;
  }
  if ((f == "reshape" || f == "broadcast_to") && np == 2) {
    const PadValue a = eval(e.args[0], env);
    auto shape = shape_arg(e.args[1], env);
    if (!shape) return a.any ? everywhere(std::nullopt) : none(std::nullopt);
    if (!a.any) return none(shape);
    if (!a.shape || !small(*shape) || a.bits.empty()) return everywhere(shape);
    if (f == "reshape") {
      if (numel(*shape) != numel(*a.shape)) return everywhere(shape);
      PadValue r = a;
      r.shape = shape;
      return r;
    }
    auto m = broadcast_map(*a.shape, *shape);
    if (!m) return everywhere(shape);
    return gathered(a, *shape, *m);
  }
  if (f == "concatenate" && np >= 1) {
    // Each part's padding lands where the part does along the axis.
    std::vector<PadValue> parts;
    bool any = false, known = true;
    for (std::size_t k = 0; k < np; ++k) {
      parts.push_back(eval(e.args[k], env));
      any |= parts.back().any;
      known = known && parts.back().shape && parts.back().shape->size() == parts[0].shape->size();
    }
    auto axis = e.kwarg("axis") ? int_kwarg(e, "axis", env) : std::optional<std::int64_t>(0);
    const auto rank = known ? static_cast<std::int64_t>(parts[0].shape->size()) : 0;
    const std::int64_t ax = axis && *axis < 0 ? *axis + rank : axis.value_or(-1);
    if (!known || ax < 0 || ax >= rank) return any ? everywhere(std::nullopt) : none(std::nullopt);
    Shape out = *parts[0].shape;
    out[static_cast<std::size_t>(ax)] = 0;
    for (const auto &p : parts)
      out[static_cast<std::size_t>(ax)] += (*p.shape)[static_cast<std::size_t>(ax)];
    if (!any) return none(out);
    if (!small(out)) return everywhere(out);
    const AxisLines l = lines_around(out, ax);
    PadValue r{out, true, std::vector<std::uint8_t>(static_cast<std::size_t>(*numel(out)), 0)};
    std::int64_t at = 0;
    for (const auto &p : parts) {
      const std::int64_t len = (*p.shape)[static_cast<std::size_t>(ax)];
      for (std::int64_t o = 0; o < l.outer; ++o)
        for (std::int64_t k = 0; k < len; ++k)
          for (std::int64_t i = 0; i < l.inner; ++i)
            r.bits[static_cast<std::size_t>((o * l.len + at + k) * l.inner + i)] =
                state_at(p, (o * len + k) * l.inner + i);
      at += len;
    }
    return normalized(std::move(r));
  }
  if ((f == "flip" || f == "roll" || f == "argmax" || f == "argmin" || f == "cumsum" || f == "cummax" ||
       f == "cummin") &&
      np >= 1) {
    const PadValue a = eval(e.args[0], env);
    auto axis = int_kwarg(e, "axis", env);
    const auto rank = a.shape ? static_cast<std::int64_t>(a.shape->size()) : 0;
    const std::int64_t ax = axis && *axis < 0 ? *axis + rank : axis.value_or(-1);
    if (!a.shape || ax < 0 || ax >= rank) return a.any ? everywhere(std::nullopt) : none(std::nullopt);
    // argmax / argmin: an index is garbage where its line held padding, as a max is.
    if (f == "argmax" || f == "argmin") return reduced(a, ax, false, Fold::max);
    return along_axis(f, e, a, ax, env);
  }
  if (f == "cast" && np >= 1) return eval(e.args[0], env); // the dtype argument is no value
  if (spec::is_elementwise_fn(f) || ((f == "max" || f == "min") && np == 2)) {
    std::vector<PadValue> args;
    for (std::size_t k = 0; k < np; ++k)
      args.push_back(eval(e.args[k], env));
    const ZeroRule rule = f == "max" || f == "min"                                  ? ZeroRule::all
                          : f == "pow" && np == 2 && positive_power(e.args[1], env) ? ZeroRule::first
                                                                                    : zero_rule(f);
    return elementwise(args, rule, literal_zeros(e, args.size()));
  }
  if (f == "opaque") {
    // Its values are unknown: padding in any argument may reach every element.
    bool any = false;
    for (std::size_t k = 0; k < np; ++k)
      any |= eval(e.args[k], env).any;
    const Expr *sh = e.kwarg("shape");
    auto shape = sh ? shape_arg(*sh, env) : std::nullopt;
    return any ? everywhere(shape) : none(shape);
  }
  // Anything else: padding anywhere in an operand may reach every element.
  bool any = false;
  for (const auto &a : e.args)
    any |= eval(a, env).any;
  return any ? everywhere(std::nullopt) : none(std::nullopt);
}

void PaddingFlow::bind(const std::string &name, const Expr &value, const spec::Env &env) {
  // `c = c + v`, or `t = c + v` then `c = t` (a fori_loop's running sum, as
  // the bridge writes it): v's zero padding adds nothing to c.
  const bool adds = value.op == Op::Add && value.args.size() == 2 && value.args[0].op == Op::Name;
  auto sum = value.op == Op::Name ? sums_.find(value.name) : sums_.end();
  if (adds && value.args[0].name == name && pads_.count(name))
    pads_[name] = elementwise({pads_[name], eval(value.args[1], env)}, ZeroRule::sum);
  else if (sum != sums_.end() && sum->second.first == name && pads_.count(name))
    pads_[name] = elementwise({pads_[name], sum->second.second}, ZeroRule::sum);
  else
    pads_[name] = eval(value, env);
  sums_.erase(name);
  if (adds && value.args[0].name != name) sums_[name] = {value.args[0].name, eval(value.args[1], env)};
  and_masks_.erase(name);
  // `m & d` with m known and free of padding: false wherever m is, whatever d holds.
  std::vector<LazyPtr> masks;
  if (value.op == Op::BitAnd && value.args.size() == 2)
    for (std::size_t s = 0; s < 2; ++s)
      if (!eval(value.args[s], env).any) masks.push_back(defer(value.args[s], env));
  values_[name] = defer(value, env);
  if (!masks.empty()) and_masks_[name] = std::move(masks);
}

void PaddingFlow::store(const std::string &buffer, const Expr &value, const spec::Env &env, Shape shape,
                        bool boolean) {
  auto l = defer(value, env);
  l->shape = std::move(shape);
  l->boolean = boolean;
  values_[buffer] = std::move(l);
}

void PaddingFlow::forget(const std::string &name) {
  pads_.erase(name);
  sums_.erase(name);
  values_.erase(name);
  and_masks_.erase(name);
}

std::vector<StepBox> padded_boxes(const PadValue &v, PadState state) {
  if (!has_state(v, state)) return {};
  if (!v.shape) return {};
  const Shape &s = *v.shape;
  if (v.bits.empty()) {
    StepBox b;
    for (auto d : s)
      b.push_back({0, d});
    return {b};
  }
  // Dim by dim: consecutive indices of the first dim whose sub-blocks hold
  // the same boxes merge into one.
  std::function<std::vector<StepBox>(std::size_t, std::int64_t)> rec = [&](std::size_t d, std::int64_t base) {
    std::vector<StepBox> out;
    if (d == s.size()) {
      if (v.bits[static_cast<std::size_t>(base)] == state) out.push_back({});
      return out;
    }
    std::vector<StepBox> run;
    std::int64_t run_lo = 0;
    auto flush = [&](std::int64_t hi) {
      for (auto &b : run) {
        StepBox x{{run_lo, hi}};
        x.insert(x.end(), b.begin(), b.end());
        out.push_back(std::move(x));
      }
    };
    for (std::int64_t i = 0; i < s[d]; ++i) {
      auto sub = rec(d + 1, base * s[d] + i);
      if (i == 0 || sub != run) {
        flush(i);
        run = std::move(sub);
        run_lo = i;
      }
    }
    flush(s[d]);
    return out;
  };
  return rec(0, 0);
}

std::vector<StepBox> padding_in_target(const PadValue &v, const StepBox &target, const std::vector<int> &kept,
                                       PadState state) {
  if (!v.any) return {};
  // (Where the value's place in the target is not known, nothing of it is known zero.)
  auto whole = state == kGarbage ? std::vector<StepBox>{target} : std::vector<StepBox>{};
  if (!v.shape || v.shape->size() > kept.size()) return whole;
  const Shape &s = *v.shape;
  const std::size_t off = kept.size() - s.size();
  for (std::size_t j = 0; j < s.size(); ++j) {
    const auto &dim = target[static_cast<std::size_t>(kept[off + j])];
    if (s[j] != 1 && s[j] != dim.second - dim.first) return whole;
  }
  std::vector<StepBox> out;
  for (const auto &b : padded_boxes(v, state)) {
    StepBox r = target;
    for (std::size_t j = 0; j < s.size(); ++j) {
      auto &dim = r[static_cast<std::size_t>(kept[off + j])];
      if (s[j] == 1 && dim.second - dim.first != 1) continue; // broadcast over the dim
      const std::int64_t lo = dim.first;
      dim = {lo + b[j].first, lo + b[j].second};
    }
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace pipecheck::verifier::races
