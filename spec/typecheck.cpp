#include "spec/typecheck.hpp"
#include "spec/checked.hpp"
#include "spec/nested.hpp"
#include "spec/state.hpp"
#include "spec/targets.hpp"

#include "spec/print.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace pipecheck::spec {

std::string dims_string(const Dims &d) {
  std::string s = "[";
  for (std::size_t k = 0; k < d.size(); ++k)
    s += (k ? ", " : "") + (d[k] == kUnknownExtent ? std::string("?") : std::to_string(d[k]));
  return s + "]";
}

std::string type_string(const TensorType &t) { return to_string(t.dtype) + dims_string(t.shape); }

namespace {

bool known(std::int64_t d) { return d != kUnknownExtent; }

// Equal where both are known (an unknown extent may be anything).
bool same_dims(const Dims &a, const Dims &b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (known(a[k]) && known(b[k]) && a[k] != b[k]) return false;
  return true;
}

bool exactly_one_element(const Dims &d) {
  return std::all_of(d.begin(), d.end(), [](std::int64_t x) { return x == 1; });
}

} // namespace

Typed<Dims> broadcast_dims(const Dims &a, const Dims &b) {
  Typed<Dims> r;
  const std::size_t n = std::max(a.size(), b.size());
  r.value.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t da = k < n - a.size() ? 1 : a[k - (n - a.size())];
    const std::int64_t db = k < n - b.size() ? 1 : b[k - (n - b.size())];
    if (da == db || db == 1)
      r.value[k] = da;
    else if (da == 1)
      r.value[k] = db;
    else if (!known(da) || !known(db))
      r.value[k] = known(da) ? da : db;
    else {
      r.error = "shapes " + dims_string(a) + " and " + dims_string(b) + " do not broadcast";
      return r;
    }
  }
  return r;
}

DType promote_dtype(DType a, bool a_weak, DType b, bool b_weak) {
  const bool fa = dtype_is_float(a), fb = dtype_is_float(b);
  if (a_weak && b_weak) return (fa || fb) ? DType::f32 : DType::i32;
  if (a_weak || b_weak) {
    const DType strong = a_weak ? b : a;
    const DType weak = a_weak ? a : b;
    if (dtype_is_float(weak) && !dtype_is_float(strong)) return DType::f32;
    if (strong == DType::boolean && weak != DType::boolean) return DType::i32;
    return strong;
  }
  if (a == b) return a;
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) return DType::f32;
  // jnp's integer lattice: bool < every int; signed ints by width; u8 with a
  // signed int needs at least i16.
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  auto width = [](DType t) { return t == DType::i32 ? 32 : t == DType::i16 ? 16 : 8; };
  const bool ua = a == DType::u8, ub = b == DType::u8;
  const int w = std::max(width(a), width(b));
  const int need = (ua != ub) ? std::max(w, 16) : w;
  return need >= 32 ? DType::i32 : need == 16 ? DType::i16 : DType::i8;
}

Typed<TensorType> elementwise_type(ElemOp op, const TensorType &a, const TensorType &b) {
  Typed<TensorType> r;
  auto shape = broadcast_dims(a.shape, b.shape);
  if (!shape.ok()) {
    r.error = shape.error;
    return r;
  }
  r.value.shape = std::move(shape.value);
  r.value.dtype = promote_dtype(a.dtype, a.weak, b.dtype, b.weak);
  r.value.weak = a.weak && b.weak;
  if (op == ElemOp::div && !dtype_is_float(r.value.dtype)) r.value.dtype = DType::f32;
  if ((op == ElemOp::bit_and || op == ElemOp::bit_or) && dtype_is_float(r.value.dtype))
    r.error = std::string("'") + (op == ElemOp::bit_and ? "&" : "|") +
              "' takes bool or integer values, not " + type_string(a) + " and " + type_string(b);
  return r;
}

Typed<TensorType> unary_type(UnaryOp op, const TensorType &a) {
  Typed<TensorType> r;
  r.value = a;
  switch (op) {
  case UnaryOp::neg:
  case UnaryOp::abs:
  case UnaryOp::floor:
  case UnaryOp::ceil:
  case UnaryOp::round:
  case UnaryOp::sign: break;
  case UnaryOp::bit_not:
    if (dtype_is_float(a.dtype)) r.error = "'~' takes bool or integer values, not " + type_string(a);
    break;
  default:
    if (!dtype_is_float(a.dtype)) r.value.dtype = DType::f32;
  }
  return r;
}

Typed<TensorType> compare_type(const TensorType &a, const TensorType &b) {
  Typed<TensorType> r;
  auto shape = broadcast_dims(a.shape, b.shape);
  if (!shape.ok()) {
    r.error = shape.error;
    return r;
  }
  r.value = TensorType{DType::boolean, false, std::move(shape.value)};
  return r;
}

Typed<TensorType> where_type(const TensorType &c, const TensorType &a, const TensorType &b) {
  Typed<TensorType> r;
  auto ab = broadcast_dims(a.shape, b.shape);
  auto all = ab.ok() ? broadcast_dims(c.shape, ab.value) : ab;
  if (!all.ok()) {
    r.error = "where(" + dims_string(c.shape) + ", " + dims_string(a.shape) + ", " + dims_string(b.shape) +
              "): " + all.error;
    return r;
  }
  r.value.shape = std::move(all.value);
  r.value.dtype = promote_dtype(a.dtype, a.weak, b.dtype, b.weak);
  r.value.weak = a.weak && b.weak;
  return r;
}

Typed<TensorType> iota_type(DType t, const Dims &shape, std::int64_t dim) {
  Typed<TensorType> r;
  if (dtype_is_float(t) || t == DType::boolean) {
    r.error = std::string("iota gives integers, not ") + to_string(t);
    return r;
  }
  if (dim < 0 || dim >= static_cast<std::int64_t>(shape.size())) {
    r.error = "iota dimension " + std::to_string(dim) + " is out of range for shape " + dims_string(shape);
    return r;
  }
  r.value = TensorType{t, false, shape};
  return r;
}

namespace {
// The element count, or kUnknownExtent.
std::int64_t count_of(const Dims &d) {
  std::int64_t n = 1;
  for (std::int64_t x : d) {
    if (!known(x)) return kUnknownExtent;
    n *= x;
  }
  return n;
}
} // namespace

std::string shape_arg_error(const Dims &shape) {
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  // (Over the nonzero extents: a shape with a zero one has no elements, but
  // its others still size its strides.)
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  const std::string what =
      empty ? "shape " + dims_string(shape) + " has nonzero extents whose product passes 2^31"
            : "shape " + dims_string(shape) + " has more than 2^31 elements";
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (!known(d) || d == 0) continue;
    if (n > kMax / d) return what;
    n *= d;
  }
  return n > kMax ? what : std::string();
}

Typed<TensorType> reshape_type(const TensorType &a, const Dims &shape) {
  Typed<TensorType> r;
  const std::int64_t na = count_of(a.shape), nb = count_of(shape);
  if (known(na) && known(nb) && na != nb) {
    r.error = "cannot reshape " + dims_string(a.shape) + " (" + std::to_string(na) + " elements) to " +
              dims_string(shape) + " (" + std::to_string(nb) + ")";
    return r;
  }
  r.value = TensorType{a.dtype, a.weak, shape};
  return r;
}

Typed<TensorType> broadcast_to_type(const TensorType &a, const Dims &shape) {
  Typed<TensorType> r;
  if (auto err = fit_error(a.shape, shape); !err.empty()) {
    r.error = "cannot broadcast " + dims_string(a.shape) + " to " + dims_string(shape);
    return r;
  }
  r.value = TensorType{a.dtype, a.weak, shape};
  return r;
}

Typed<TensorType> tile_type(const TensorType &a, const Dims &reps) {
  Typed<TensorType> r;
  const std::size_t rank = std::max(a.shape.size(), reps.size());
  Dims shape(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::size_t ka = d + a.shape.size(), kr = d + reps.size();
    const std::int64_t ext = ka >= rank ? a.shape[ka - rank] : 1, rep = kr >= rank ? reps[kr - rank] : 1;
    if (rep < 0) {
      r.error = "tile's reps must not be negative, got " + dims_string(reps);
      return r;
    }
    shape[d] = known(ext) ? ext * rep : ext;
  }
  r.value = TensorType{a.dtype, a.weak, shape};
  return r;
}

Typed<TensorType> concatenate_type(const std::vector<TensorType> &parts, std::int64_t axis) {
  Typed<TensorType> r;
  if (parts.empty()) {
    r.error = "concatenate takes at least one value";
    return r;
  }
  const TensorType &first = parts.front();
  const std::size_t rank = first.shape.size();
  const std::int64_t ax = normalize_axis(axis, rank);
  if (rank == 0 || ax < 0 || ax >= static_cast<std::int64_t>(rank)) {
    r.error = "concatenate's axis " + std::to_string(axis) + " is out of range for shape " +
              dims_string(first.shape);
    return r;
  }
  r.value = first;
  r.value.weak = true;
  std::int64_t total = 0;
  for (const auto &p : parts) {
    if (p.dtype != first.dtype) {
      r.error = std::string("concatenate's values must share a dtype, got ") + to_string(first.dtype) +
                " and " + to_string(p.dtype);
      return r;
    }
    bool same = p.shape.size() == rank;
    for (std::size_t d = 0; same && d < rank; ++d)
      same = static_cast<std::int64_t>(d) == ax || !known(p.shape[d]) || !known(first.shape[d]) ||
             p.shape[d] == first.shape[d];
    if (!same) {
      r.error = "concatenate's values must have equal extents except along axis " + std::to_string(ax) +
                ", got " + dims_string(first.shape) + " and " + dims_string(p.shape);
      return r;
    }
    const std::int64_t ext = p.shape[static_cast<std::size_t>(ax)];
    total = known(total) && known(ext) ? total + ext : kUnknownExtent;
    r.value.weak = r.value.weak && p.weak;
  }
  r.value.shape[static_cast<std::size_t>(ax)] = total;
  return r;
}

Typed<TensorType> along_axis_type(const TensorType &a, std::int64_t axis, const std::string &what) {
  Typed<TensorType> r;
  const std::int64_t ax = normalize_axis(axis, a.shape.size());
  if (ax < 0 || ax >= static_cast<std::int64_t>(a.shape.size()))
    r.error = what + "'s axis " + std::to_string(axis) + " is out of range for shape " + dims_string(a.shape);
  r.value = a;
  return r;
}

Typed<TensorType> arg_reduce_type(const TensorType &a, std::int64_t axis) {
  Typed<TensorType> r = reduce_type(Reduction::max, a, axis);
  r.value.dtype = DType::i32;
  r.value.weak = false;
  if (!r.ok() && r.error.find("empty axis") != std::string::npos)
    r.error = "an argmax or argmin over an empty axis";
  return r;
}

Typed<TensorType> shift_type(const TensorType &a, const TensorType &b) {
  Typed<TensorType> r;
  if (dtype_is_float(a.dtype) || dtype_is_float(b.dtype) || a.dtype == DType::boolean ||
      b.dtype == DType::boolean) {
    r.error = std::string("shifts take integers, got ") + to_string(a.dtype) + " and " + to_string(b.dtype);
    return r;
  }
  return elementwise_type(ElemOp::add, a, b);
}

TensorType cast_type(const TensorType &a, DType t) { return TensorType{t, false, a.shape}; }

std::pair<std::int64_t, std::int64_t> exact_int_range(DType t) {
  switch (t) {
  case DType::f32: return {-(std::int64_t{1} << 24), std::int64_t{1} << 24};
  case DType::f16: return {-2048, 2048};
  case DType::bf16: return {-256, 256};
  case DType::i32:
    return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
  case DType::i16: return {-32768, 32767};
  case DType::i8: return {-128, 127};
  case DType::u8: return {0, 255};
  case DType::boolean: return {0, 1};
  }
  return {0, 0};
}

Typed<TensorType> dot_type(const TensorType &a, const TensorType &b, const DotOptions &opts) {
  Typed<TensorType> r;
  Dims as = a.shape, bs = b.shape;
  if (as.empty() || bs.empty() || as.size() > 2 || bs.size() > 2) {
    r.error = "dot takes 1-D or 2-D operands, not " + dims_string(as) + " and " + dims_string(bs);
    return r;
  }
  if ((opts.trans_a && as.size() != 2) || (opts.trans_b && bs.size() != 2)) {
    r.error = "dot's trans_a / trans_b need a 2-D operand";
    return r;
  }
  if (opts.trans_a) std::reverse(as.begin(), as.end());
  if (opts.trans_b) std::reverse(bs.begin(), bs.end());
  if (known(as.back()) && known(bs[0]) && as.back() != bs[0]) {
    r.error = "dot of " + dims_string(as) + " and " + dims_string(bs) + ": contracted dims differ (" +
              std::to_string(as.back()) + " vs " + std::to_string(bs[0]) + ")";
    return r;
  }
  if (as.size() == 2) r.value.shape.push_back(as[0]);
  if (bs.size() == 2) r.value.shape.push_back(bs[1]);
  r.value.dtype = opts.preferred                                       ? *opts.preferred
                  : dtype_is_float(a.dtype) || dtype_is_float(b.dtype) ? DType::f32
                                                                       : DType::i32;
  return r;
}

Typed<DotDims> dot_general_dims(const Expr &call, Loc &where) {
  Typed<DotDims> r;
  where = call.loc;
  auto pair = [&](const char *key, std::vector<std::int64_t> &lhs, std::vector<std::int64_t> &rhs) {
    const Expr *k = call.kwarg(key);
    if (!k) {
      if (std::string(key) == "batch") return true;
      r.error = "dot_general needs contract=((a dims), (b dims)), the dims it sums over";
      return false;
    }
    where = k->loc;
    if (k->op != Op::Tuple || k->args.size() != 2 || k->args[0].op != Op::Tuple ||
        k->args[1].op != Op::Tuple) {
      r.error = std::string("dot_general's ") + key + " is a pair of dim tuples such as ((1,), (0,))";
      return false;
    }
    for (int side = 0; side < 2; ++side)
      for (const auto &x : k->args[side].args) {
        auto v = eval_int(x, {});
        if (!v) {
          where = x.loc;
          r.error = std::string("dot_general's ") + key + " dims must be constant integers";
          return false;
        }
        (side == 0 ? lhs : rhs).push_back(*v);
      }
    return true;
  };
  if (pair("contract", r.value.lhs_contract, r.value.rhs_contract))
    pair("batch", r.value.lhs_batch, r.value.rhs_batch);
  return r;
}

DotDims dot_dims(std::size_t rank_a, std::size_t rank_b, bool trans_a, bool trans_b) {
  DotDims d;
  d.lhs_contract = {static_cast<std::int64_t>(trans_a ? 0 : rank_a - 1)};
  d.rhs_contract = {static_cast<std::int64_t>(trans_b ? rank_b - 1 : 0)};
  return d;
}

Typed<TensorType> dot_general_type(const TensorType &a, const TensorType &b, const DotDims &d,
                                   std::optional<DType> preferred) {
  Typed<TensorType> r;
  if (d.lhs_contract.size() != d.rhs_contract.size() || d.lhs_batch.size() != d.rhs_batch.size()) {
    r.error = "dot_general's contract and batch pair as many dims of a as of b";
    return r;
  }
  auto claim = [&](const Dims &shape, const std::vector<std::int64_t> &dims, std::vector<bool> &used,
                   const char *side) {
    for (auto x : dims) {
      if (x < 0 || static_cast<std::size_t>(x) >= shape.size()) {
        r.error = std::string("dot_general: dim ") + std::to_string(x) + " of " + side +
                  " is out of range for " + dims_string(shape);
        return false;
      }
      if (used[static_cast<std::size_t>(x)]) {
        r.error = std::string("dot_general: dim ") + std::to_string(x) + " of " + side + " is named twice";
        return false;
      }
      used[static_cast<std::size_t>(x)] = true;
    }
    return true;
  };
  std::vector<bool> ua(a.shape.size()), ub(b.shape.size());
  if (!claim(a.shape, d.lhs_batch, ua, "a") || !claim(a.shape, d.lhs_contract, ua, "a") ||
      !claim(b.shape, d.rhs_batch, ub, "b") || !claim(b.shape, d.rhs_contract, ub, "b"))
    return r;
  auto agree = [&](const std::vector<std::int64_t> &l, const std::vector<std::int64_t> &rr,
                   const char *what) {
    for (std::size_t i = 0; i < l.size(); ++i) {
      const std::int64_t x = a.shape[static_cast<std::size_t>(l[i])],
                         y = b.shape[static_cast<std::size_t>(rr[i])];
      if (known(x) && known(y) && x != y) {
        r.error = "dot_general of " + dims_string(a.shape) + " and " + dims_string(b.shape) + ": " + what +
                  " dims " + std::to_string(l[i]) + " and " + std::to_string(rr[i]) + " differ (" +
                  std::to_string(x) + " vs " + std::to_string(y) + ")";
        return false;
      }
    }
    return true;
  };
  if (!agree(d.lhs_contract, d.rhs_contract, "contracted") || !agree(d.lhs_batch, d.rhs_batch, "batch"))
    return r;
  for (auto x : d.lhs_batch)
    r.value.shape.push_back(a.shape[static_cast<std::size_t>(x)]);
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    if (!ua[i]) r.value.shape.push_back(a.shape[i]);
  for (std::size_t i = 0; i < b.shape.size(); ++i)
    if (!ub[i]) r.value.shape.push_back(b.shape[i]);
  r.value.dtype = preferred                                            ? *preferred
                  : dtype_is_float(a.dtype) || dtype_is_float(b.dtype) ? DType::f32
                                                                       : DType::i32;
  return r;
}

ValueIndexed index_value(const Dims &value, const std::vector<ValueSubscript> &subs) {
  ValueIndexed r;
  std::vector<Subscript> real;
  for (const auto &s : subs)
    if (!s.new_axis) real.push_back(s.sub);
  r.part = subscript(value, real);
  if (!r.part.ok()) {
    r.error = r.part.error;
    return r;
  }
  // A new axis goes after the kept dims of the array dims the subscripts
  // before it consume (all of them up to the next subscript for a `...`).
  bool ellipsis_before = false;
  std::size_t real_before = 0, axes_before = 0;
  auto kept_below = [&](std::size_t n) {
    std::size_t k = 0;
    for (std::size_t d = 0; d < n && d < r.part.dims.size(); ++d)
      k += r.part.dims[d].kept;
    return k;
  };
  std::vector<std::size_t> positions;
  for (const auto &s : subs) {
    if (s.new_axis) {
      std::size_t consumed = 0;
      if (ellipsis_before) {
        std::size_t later = 0;
        for (std::size_t t = real_before; t < real.size(); ++t)
          later += real[t].kind != Subscript::Kind::ellipsis;
        consumed = value.size() - later;
      } else {
        consumed = real_before;
      }
      positions.push_back(kept_below(consumed) + axes_before++);
      continue;
    }
    ellipsis_before = ellipsis_before || s.sub.kind == Subscript::Kind::ellipsis;
    ++real_before;
  }
  r.shape = r.part.shape;
  for (std::size_t p : positions)
    r.shape.insert(r.shape.begin() + static_cast<std::ptrdiff_t>(p), 1);
  return r;
}

TensorType transpose_type(const TensorType &a) {
  TensorType r = a;
  std::reverse(r.shape.begin(), r.shape.end());
  return r;
}

std::vector<ValueSubscript> value_subscripts_of(const Expr &ref, const SubscriptValue &value) {
  Expr real = ref;
  real.args.clear();
  for (const auto &a : ref.args)
    if (a.op != Op::None) real.args.push_back(a);
  const std::vector<Subscript> subs = subscripts_of(real, value);
  std::vector<ValueSubscript> out;
  std::size_t k = 0;
  for (const auto &a : ref.args) {
    if (a.op == Op::None)
      out.push_back(ValueSubscript{true, {}});
    else
      out.push_back(ValueSubscript{false, subs[k++]});
  }
  return out;
}

std::optional<bool> bool_literal(const Expr &e) {
  if (e.op == Op::Name && e.name == "True") return true;
  if (e.op == Op::Name && e.name == "False") return false;
  return std::nullopt;
}

AxisLines lines_around(const Dims &shape, std::int64_t axis) {
  AxisLines l;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(shape.size()); ++d)
    (d < axis ? l.outer : d == axis ? l.len : l.inner) *= shape[static_cast<std::size_t>(d)];
  return l;
}

std::int64_t normalize_axis(std::int64_t axis, std::size_t rank) {
  return axis < 0 ? axis + static_cast<std::int64_t>(rank) : axis;
}

Typed<TensorType> reduce_type(Reduction op, const TensorType &a, std::optional<std::int64_t> axis,
                              bool keepdims) {
  Typed<TensorType> r;
  r.value.dtype = a.dtype;
  std::int64_t len = 1;
  if (axis) {
    const std::int64_t ax = normalize_axis(*axis, a.shape.size());
    if (ax < 0 || ax >= static_cast<std::int64_t>(a.shape.size())) {
      r.error = "axis " + std::to_string(*axis) + " is out of range for shape " + dims_string(a.shape);
      return r;
    }
    len = a.shape[static_cast<std::size_t>(ax)];
    for (std::size_t d = 0; d < a.shape.size(); ++d)
      if (static_cast<std::int64_t>(d) != ax)
        r.value.shape.push_back(a.shape[d]);
      else if (keepdims)
        r.value.shape.push_back(1);
  } else {
    for (std::int64_t d : a.shape)
      len = known(d) && known(len) ? len * d : kUnknownExtent;
    if (keepdims) r.value.shape.assign(a.shape.size(), 1);
  }
  if (len == 0 && op != Reduction::sum)
    r.error = std::string(op == Reduction::max ? "max" : "min") + " over an empty axis";
  return r;
}

Typed<TensorType> full_type(const TensorType &v) {
  Typed<TensorType> r;
  if (!exactly_one_element(v.shape) &&
      std::all_of(v.shape.begin(), v.shape.end(), [](std::int64_t d) { return known(d); })) {
    r.error = "full() takes a scalar, not " + type_string(v);
    return r;
  }
  r.value = v;
  r.value.weak = true;
  return r;
}

std::string fit_error(const Dims &value, const Dims &target) {
  if (same_dims(value, target)) return {};
  auto b = broadcast_dims(value, target);
  if (b.ok() && same_dims(b.value, target)) return {};
  return "a value of shape " + dims_string(value) + " does not fit a block of shape " + dims_string(target);
}

std::string store_error(const TensorType &value, const Dims &target) {
  if (exactly_one_element(value.shape)) return {};
  return fit_error(value.shape, target);
}

bool added_as_weak(DType target, const TensorType &value) { return value.weak || value.dtype != target; }

Typed<TensorType> accumulate_type(const TensorType &target, TensorType value) {
  value.weak = added_as_weak(target.dtype, value);
  return elementwise_type(ElemOp::add, TensorType{target.dtype, false, target.shape}, value);
}

// ------------------------------------------------------------- the checker

namespace {

struct Local {
  bool is_int = false;
  std::optional<TensorType> type; ///< a tensor's type; nullopt after an error in its value
  /// An integer whose value names the grid point (program_id, or such a
  /// local, or a loop variable whose bounds do): never a static extent.
  bool grid = false;
};

struct Scope {
  std::map<std::string, Local> locals;
  Env ints; ///< params and integer locals whose value is known
  /// Inside a body loop: the tensor locals bound before it, which a
  /// rebinding in the loop carries to the next iteration (fori_loop's carry).
  std::map<std::string, TensorType> carried;
};

} // namespace

void bound_names(const Block &b, std::set<std::string> &out) {
  for (const auto &st : b) {
    if (const auto *l = std::get_if<Let>(&st.kind)) out.insert(l->name);
    if (const auto *i = std::get_if<If>(&st.kind)) {
      bound_names(i->then_body, out);
      bound_names(i->else_body, out);
    }
    if (const auto *f = std::get_if<For>(&st.kind)) {
      out.insert(f->var);
      bound_names(f->body, out);
    }
  }
}

namespace {

TensorType weak_int() { return TensorType{DType::i32, true, {}}; }
TensorType weak_float() { return TensorType{DType::f32, true, {}}; }

class Checker {
public:
  /// `pipeline`: typing a pipeline's statements (typecheck(const Program &)).
  Checker(const KernelSpec &k, const Env &overrides, ExprTypes *types, bool pipeline = false)
      : k_(k), params_(param_env(k.params, overrides)), types_(types), state_(state_scratches(k)),
        pipeline_(pipeline) {
    for (const auto &o : k.operands) {
      Window b;
      b.type.dtype = o.dtype;
      const bool windowed = o.role != Role::scratch &&
                            (o.memory_space == MemorySpace::vmem || o.memory_space == MemorySpace::smem);
      b.windowed = windowed && o.block_shape.has_value();
      if (b.windowed) {
        for (const auto &d : *o.block_shape)
          if (d)
            b.type.shape.push_back(extent(element_dim(*d)         ? element_dim(*d)->size
                                          : bounded_slice_dim(*d) ? *bounded_slice_dim(*d)
                                                                  : *d));
      } else {
        for (const auto &d : o.shape)
          b.type.shape.push_back(extent(d));
      }
      blocks_[o.name] = std::move(b);
    }
  }

  std::vector<Diagnostic> run() {
    Scope s;
    s.ints = params_;
    block(k_.body, s);
    reference();
    return std::move(errs_);
  }

  // `reference:` on whole operands: a bare operand name is its whole array,
  // `out = value` stores into the whole output (validate.cpp checked names).
  void reference() {
    in_reference_ = true;
    Scope s;
    s.ints = params_;
    std::map<std::string, TensorType> whole;
    for (const auto &o : k_.operands) {
      TensorType t{o.dtype, false, {}};
      for (const auto &d : o.shape)
        t.shape.push_back(extent(d));
      whole[o.name] = t;
      if (o.role != Role::scratch) s.locals[o.name] = Local{false, t};
    }
    for (const auto &st : k_.reference) {
      const auto *l = std::get_if<Let>(&st.kind);
      if (!l) continue;
      auto v = type_of(l->value, s);
      const Operand *o = k_.operand(l->name);
      if (!o || o->role != Role::out) {
        s.locals[l->name] = Local{false, v};
        continue;
      }
      if (!v) continue;
      const TensorType &t = whole.at(l->name);
      if (auto err = store_error(*v, t.shape); !err.empty())
        error(st.loc, "cannot set output '" + l->name + "' (" + type_string(t) + ") to a " + type_string(*v) +
                          " value: " + err);
    }
  }

private:
  struct Window {
    TensorType type;
    bool windowed = false;
  };

  const KernelSpec &k_;
  const bool triton_ = uses_triton(k_);
  Env params_;
  std::map<std::string, Window> blocks_;
  std::vector<Diagnostic> errs_;
  int bound_passes_ = 0; // body loops typechecked at a bound iteration, nested
  ExprTypes *types_ = nullptr;
  const std::set<std::string> state_; ///< state_scratches(k_)
  const bool pipeline_ = false;       ///< typing a pipeline's statements
  bool in_reference_ = false;         ///< typing the `reference:` section

  void error(Loc l, std::string msg) { errs_.push_back(Diagnostic{Severity::error, l, std::move(msg), {}}); }

  std::int64_t extent(const Expr &e) const {
    auto v = eval_int(e, params_);
    return v && *v >= 0 ? *v : kUnknownExtent;
  }

  // Whether the executor evaluates `e` as an integer (spec::eval_int with
  // params, grid ids and integer locals bound).
  bool is_int(const Expr &e, const Scope &s) const {
    switch (e.op) {
    case Op::Int: return true;
    case Op::Name: {
      if (auto it = s.locals.find(e.name); it != s.locals.end()) return it->second.is_int;
      return k_.param(e.name) != nullptr;
    }
    case Op::Ref: { // a scalar load from a prefetch array or from SMEM state (spec/state.hpp)
      if (s.locals.count(e.name)) return false;
      const Operand *o = k_.operand(e.name);
      const std::size_t rank = o && state_.count(o->name)  ? o->shape.size()
                               : !o && k_.prefetch(e.name) ? k_.prefetch(e.name)->read_rank()
                                                           : 0;
      return rank != 0 && e.args.size() == rank &&
             std::all_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return is_int(a, s); });
    }
    case Op::Call:
      if (e.name == "program_id" || e.name == "num_programs") return true;
      if (spec::is_int_function(e.name) && e.kwarg_names.empty())
        return std::all_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return is_int(a, s); });
      return false;
    case Op::Neg:
    case Op::Not:
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::FloorDiv:
    case Op::Mod:
    case Op::Pow:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::And:
    case Op::Or:
      return std::all_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return is_int(a, s); });
    default: return false;
    }
  }

  // An i32 SMEM scratch `e` reads that is not state (state_scratches), or empty.
  std::string data_scratch_read(const Expr &e) const {
    if (e.op == Op::Ref)
      if (const Operand *o = k_.operand(e.name); o && is_smem_i32_scratch(*o) && !state_.count(o->name))
        return o->name;
    for (const auto &a : e.args)
      if (auto d = data_scratch_read(a); !d.empty()) return d;
    return {};
  }

  // Why `e` cannot be used where an integer is needed, or empty.
  std::string not_int(const Expr &e, const Scope &s, const std::string &where) {
    if (is_int(e, s)) return {};
    std::string what = "'" + print(e) + "'";
    if (auto it = s.locals.find(e.name); e.op == Op::Name && it != s.locals.end() && it->second.type)
      what += " is a " + type_string(*it->second.type) + " value";
    else if (e.op == Op::Ref)
      what += " is a block load";
    else if (e.op == Op::BitAnd || e.op == Op::BitOr || e.op == Op::BitNot)
      what += " is a mask expression (use 'and', 'or', 'not' on integers)";
    else
      what += " is not an integer expression";
    if (const std::string d = data_scratch_read(e); !d.empty())
      what += " ('" + d +
              "' is an i32 SMEM scratch that a store gives data, a value read from a block, so "
              "its reads are data, not integers)";
    return where + " must be an integer, but " + what;
  }

  void block(const spec::Block &b, Scope &s) {
    for (const auto &st : b)
      stmt(st, s);
  }

  void stmt(const Stmt &st, Scope &s) {
    if (const auto *a = std::get_if<Assign>(&st.kind)) {
      const Operand *o = k_.operand(a->target.name);
      if ((o && state_.count(o->name)) || (!o && k_.prefetch(a->target.name))) {
        // SMEM state holds integer scalars: what is stored is an integer expression.
        for (const auto &sub : a->target.args)
          if (auto err = not_int(sub, s, "a subscript"); !err.empty()) error(sub.loc, err);
        if (auto err = not_int(a->value, s, "a value stored into SMEM state '" + a->target.name + "'");
            !err.empty())
          error(a->value.loc, err);
        return;
      }
      auto target = ref_type(a->target, s);
      if (a->discards()) return; // no value: the target's contents become unspecified
      auto value = type_of(a->value, s);
      if (!target || !value) return;
      if (a->accumulate) {
        auto sum = accumulate_type(*target, *value);
        if (!sum.ok()) {
          error(st.loc, "cannot add " + type_string(*value) + " to " + print(a->target) + " (" +
                            type_string(*target) + "): " + sum.error);
          return;
        }
        value = sum.value;
      }
      if (auto err = store_error(*value, target->shape); !err.empty())
        error(st.loc, "cannot store " + type_string(*value) + " into " + print(a->target) + " (" +
                          type_string(*target) + "): " + err);
    } else if (const auto *w = std::get_if<Wgmma>(&st.kind)) {
      // acc += a @ b: 2-D operands whose contraction and free dims agree
      // with the accumulator's, as the runner multiplies them.
      auto acc = type_of(w->acc, s), a = type_of(w->a, s), b = type_of(w->b, s);
      if (!acc || !a || !b) return;
      if (a->shape.size() != 2 || b->shape.size() != 2 || acc->shape.size() != 2) {
        error(st.loc, "wgmma takes 2-D operands and accumulator: " + print(w->acc) + " is " +
                          type_string(*acc) + ", " + print(w->a) + " " + type_string(*a) + ", " +
                          print(w->b) + " " + type_string(*b));
        return;
      }
      DotOptions o;
      o.trans_a = w->trans_a;
      o.trans_b = w->trans_b;
      auto product = dot_type(*a, *b, o);
      if (!product.ok()) {
        error(st.loc,
              "wgmma(" + print(w->acc) + ", " + print(w->a) + ", " + print(w->b) + "): " + product.error);
        return;
      }
      if (product.value.shape != acc->shape)
        error(st.loc, "wgmma(" + print(w->acc) + ", " + print(w->a) + ", " + print(w->b) +
                          "): the product is " + type_string(product.value) + " but the accumulator " +
                          print(w->acc) + " is " + type_string(*acc));
    } else if (const auto *l = std::get_if<Let>(&st.kind)) {
      Local loc;
      if (is_int(l->value, s)) {
        loc.is_int = true;
        loc.type = weak_int();
        loc.grid = names_grid(l->value, s);
        if (auto v = eval_int(l->value, s.ints))
          s.ints[l->name] = *v;
        else
          s.ints.erase(l->name);
      } else {
        loc.type = type_of(l->value, s);
        s.ints.erase(l->name);
      }
      if (auto c = s.carried.find(l->name);
          c != s.carried.end() && loc.type &&
          (loc.type->dtype != c->second.dtype || loc.type->shape != c->second.shape))
        error(st.loc, "'" + l->name + "' is carried across loop iterations: it is " + type_string(c->second) +
                          " before the loop and " + type_string(*loc.type) +
                          " here (a loop carry keeps its type; broadcast_to or cast it before the loop)");
      s.locals[l->name] = loc;
    } else if (const auto *i = std::get_if<If>(&st.kind)) {
      if (auto err = not_int(i->cond, s, std::string("a '") + (i->is_when ? "when" : "if") + "' condition");
          !err.empty())
        error(i->cond.loc, err);
      Scope a = s, b = s;
      block(i->then_body, a);
      block(i->else_body, b);
      // An integer a branch rebinds has no one value after it.
      std::set<std::string> rebound;
      bound_names(i->then_body, rebound);
      bound_names(i->else_body, rebound);
      for (const auto &n : rebound)
        s.ints.erase(n);
      // A tensor local bound before and rebound in a branch has after it
      // what either branch left (lax.cond's outputs): one shape and dtype,
      // weak only where both are (a literal's zeros, rebound to a dot's
      // result in one branch, are strong after it).
      for (const auto &n : rebound) {
        auto before = s.locals.find(n);
        if (before == s.locals.end() || before->second.is_int || !before->second.type) continue;
        const auto la = a.locals.find(n), lb = b.locals.find(n);
        if (la == a.locals.end() || lb == b.locals.end() || la->second.is_int || lb->second.is_int ||
            !la->second.type || !lb->second.type)
          continue;
        const TensorType &ta = *la->second.type, &tb = *lb->second.type;
        if (ta.shape != tb.shape || ta.dtype != tb.dtype) {
          error(st.loc, "'" + n + "' is " + type_string(ta) + " after the " +
                            (i->is_when ? "'when'" : "'if'") + " body and " + type_string(tb) +
                            (i->else_body.empty() ? " where it does not run" : " after the 'else'") +
                            " (both ways must leave one shape and dtype, as lax.cond's branches do)");
          continue;
        }
        TensorType joined = ta;
        joined.weak = ta.weak && tb.weak;
        before->second.type = joined;
      }
    } else if (const auto *f = std::get_if<For>(&st.kind)) {
      for (const Expr *b : {&f->lo, &f->hi})
        if (auto err = not_int(*b, s, f->is_while ? "a while bound" : "a loop bound"); !err.empty())
          error(b->loc, err);
      // An integer the loop rebinds has no one value in it or after it.
      std::set<std::string> rebound;
      bound_names(f->body, rebound);
      for (const auto &n : rebound)
        s.ints.erase(n);
      // A weak carry (a literal) becomes strong, as fori_loop promotes it.
      for (const auto &n : rebound)
        if (auto it = s.locals.find(n); it != s.locals.end() && !it->second.is_int && it->second.type)
          it->second.type->weak = false;
      Scope inner = s;
      for (const auto &[n, l] : s.locals)
        if (!l.is_int && l.type) inner.carried[n] = *l.type;
      if (f->is_while) {
        // The condition is evaluated before each iteration and once after
        // the last, on the locals the loop carries.
        if (auto err = not_int(while_cond(*f), inner, "a 'while' condition"); !err.empty())
          error(while_cond(*f).loc, err);
        block(while_body(*f), inner);
        return;
      }
      inner.locals[f->var] = Local{true, weak_int(), names_grid(f->lo, s) || names_grid(f->hi, s)};
      inner.ints.erase(f->var);
      const Scope unbound = inner;
      const std::size_t before = errs_.size();
      block(f->body, inner);
      // A loop of known bounds: its first and last iterations too, the
      // variable bound, where a slice's size may come from it (`x[0:2 * t]`,
      // whose shape no block can have at every t). Two levels deep at most.
      const auto lo = eval_int(f->lo, s.ints), hi = eval_int(f->hi, s.ints);
      if (bound_passes_ < 2 && errs_.size() == before && lo && hi && *hi > *lo)
        for (const std::int64_t t : {*lo, *hi - 1}) {
          Scope at = unbound;
          at.ints[f->var] = t;
          ++bound_passes_;
          block(f->body, at);
          --bound_passes_;
          if (errs_.size() > before) {
            errs_.resize(before + 1);
            errs_.back().message += " (at " + f->var + " = " + std::to_string(t) + ")";
            break;
          }
        }
    } else if (const auto *d = std::get_if<Dma>(&st.kind)) {
      // A DMA copies a ref onto one of the same shape and dtype (make_async_copy
      // takes no casts or broadcasts); a wait's byte count is its dst's.
      std::optional<TensorType> src, dst;
      if (d->src.op != Op::None) src = ref_type(d->src, s);
      if (d->dst.op != Op::None) dst = ref_type(d->dst, s);
      // (In a pipeline, a slice whose size is not static, `a[i * 8:i * 8 + 8]`
      // as a lowered kernel prints, has an unknown extent: the run checks it.
      // A kernel's copy sizes are static.)
      auto same_shape = [&](const Dims &a, const Dims &b) {
        if (a.size() != b.size()) return false;
        for (std::size_t i = 0; i < a.size(); ++i)
          if (a[i] != b[i] && !(pipeline_ && (a[i] == kUnknownExtent || b[i] == kUnknownExtent)))
            return false;
        return true;
      };
      if (src && dst && (src->dtype != dst->dtype || !same_shape(src->shape, dst->shape)))
        error(st.loc, "copies " + print(d->src) + " (" + type_string(*src) + ") to " + print(d->dst) + " (" +
                          type_string(*dst) + "): a DMA needs the same shape and dtype on both sides");
      if (d->n.op != Op::None)
        if (auto err = not_int(d->n, s, "a semaphore count"); !err.empty()) error(d->n.loc, err);
    }
  }

  std::optional<TensorType> ref_type(const Expr &r, const Scope &s) {
    auto it = blocks_.find(r.name);
    if (it == blocks_.end()) {
      // (A param is an integer, as an integer local is: no array to index.)
      if (k_.param(r.name))
        error(r.loc, "'" + print(r) + "': '" + r.name +
                         "' is a param, an integer, not an array: it takes no subscripts");
      return std::nullopt; // (any other name: validation reports it)
    }
    const Window &b = it->second;
    bool ok = true;
    const std::vector<Subscript> subs =
        subscripts_of(r, [&](const Expr &e, bool bound) -> std::optional<std::int64_t> {
          if (auto err = not_int(e, s, bound ? "a slice bound" : "a subscript"); !err.empty()) {
            error(e.loc, err);
            ok = false;
            return std::nullopt;
          }
          return eval_int(e, s.ints);
        });
    if (!ok) return std::nullopt;
    Subscripted v = subscript(b.type.shape, subs);
    // (At a loop's bound iteration a subscript out of bounds is the rules'
    // to decide, under the guards around it: no type error.)
    if (!v.ok() && v.out_of_bounds && bound_passes_ > 0) return std::nullopt;
    // Triton: a `ds(start, n)` window past the end (a `pl.ds` window, which
    // Pallas does not check: masked, its lanes there touch nothing) is an
    // access the rules decide (index-out-of-bounds where a lane reaches past
    // the block), not a type error: typed as its n elements.
    if (!v.ok() && v.out_of_bounds && triton_) {
      Dims wide = b.type.shape;
      std::vector<bool> ellipsis;
      for (auto &sub : subs)
        ellipsis.push_back(sub.kind == Subscript::Kind::ellipsis);
      const auto dims = subscript_dims(wide.size(), ellipsis);
      for (std::size_t k = 0; dims && k < subs.size(); ++k)
        if (const int d = (*dims)[k]; d >= 0 && subs[k].size && *subs[k].size >= 0 &&
                                      (!subs[k].lo || *subs[k].lo >= 0) &&
                                      known(wide[static_cast<std::size_t>(d)]))
          wide[static_cast<std::size_t>(d)] =
              std::max(wide[static_cast<std::size_t>(d)], subs[k].lo.value_or(0) + *subs[k].size);
      if (Subscripted w = subscript(wide, subs); w.ok()) {
        triton_size(r, b, w.shape);
        return TensorType{b.type.dtype, false, w.shape};
      }
    }
    if (!v.ok()) {
      error(r.loc, "'" + print(r) + "': " + v.error + " of " +
                       (b.windowed ? "the block of '" + r.name + "', " : "'" + r.name + "', ") +
                       type_string(b.type));
      return std::nullopt;
    }
    triton_size(r, b, v.shape);
    return TensorType{b.type.dtype, false, v.shape};
  }

  // The Pallas Triton lowering loads and stores only arrays whose size is a
  // power of 2 (_check_tensor_size on every load's and store's indexer
  // shape: "requires that all operations have array arguments and results
  // whose size is a power of 2"): a located error, as Pallas raises it.
  void triton_size(const Expr &r, const Window &b, const Dims &shape) {
    if (!triton_ || !b.windowed) return;
    std::int64_t size = 1;
    for (auto d : shape) {
      if (!known(d) || d < 0) return;
      size = saturating_mul(size, d);
      if (size == std::numeric_limits<std::int64_t>::max()) return; // (past 2^63: bad input elsewhere)
    }
    if (size > 0 && (size & (size - 1)) == 0) return;
    error(r.loc, "'" + print(r) + "' accesses " + std::to_string(size) + " elements (shape " +
                     dims_string(shape) +
                     "): the Pallas Triton lowering loads and stores only arrays whose size is a power of 2 "
                     "(pad the block to one, with a mask for the elements past the array)");
  }

  std::optional<TensorType> check(const Typed<TensorType> &t, Loc l) {
    if (t.ok()) return t.value;
    error(l, t.error);
    return std::nullopt;
  }

  // The type of `e` evaluated as a tensor value, as Interp::eval does.
  std::optional<TensorType> type_of(const Expr &e, const Scope &s) {
    auto t = eval_type(e, s);
    if (t && types_) (*types_)[&e] = *t;
    return t;
  }

  std::optional<TensorType> eval_type(const Expr &e, const Scope &s) {
    switch (e.op) {
    case Op::Int: return weak_int();
    case Op::Float:
    case Op::Zeros: return weak_float();
    case Op::Undefined: return std::nullopt; // only a whole store value (validation reports it elsewhere)
    case Op::Name:
      if (auto it = s.locals.find(e.name); it != s.locals.end()) return it->second.type;
      if (k_.param(e.name)) return weak_int();
      if (e.name == "inf") return weak_float();
      // A pipeline's buffer by bare name is its whole value (`o[0] = c` of an
      // acc), as the executor reads it: `x[0] + t` of a [64, 64] t beside a
      // [128, 128] slot does not broadcast.
      if (pipeline_)
        if (auto it = blocks_.find(e.name); it != blocks_.end()) return it->second.type;
      return std::nullopt; // validation reports it
    case Op::Ref:
      if (auto it = s.locals.find(e.name); it != s.locals.end()) return value_index_type(e, it->second, s);
      if (k_.prefetch(e.name)) return weak_int(); // elaborated into integer `where`s (spec/prefetch)
      return ref_type(e, s);
    case Op::Neg:
    case Op::BitNot: {
      auto a = type_of(e.args[0], s);
      if (!a) return std::nullopt;
      return check(unary_type(e.op == Op::Neg ? UnaryOp::neg : UnaryOp::bit_not, *a), e.loc);
    }
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge: {
      if (is_int(e, s)) return weak_int();
      auto a = type_of(e.args[0], s);
      auto b = type_of(e.args[1], s);
      if (!a || !b) return std::nullopt;
      return check(compare_type(*a, *b), e.loc);
    }
    case Op::BitAnd:
    case Op::BitOr:
    case Op::Pow: {
      if (e.op == Op::Pow && is_int(e, s)) return weak_int();
      auto a = type_of(e.args[0], s);
      auto b = type_of(e.args[1], s);
      if (!a || !b) return std::nullopt;
      const ElemOp op = e.op == Op::BitAnd  ? ElemOp::bit_and
                        : e.op == Op::BitOr ? ElemOp::bit_or
                                            : ElemOp::pow;
      return check(elementwise_type(op, *a, *b), e.loc);
    }
    case Op::Tuple:
      error(e.loc, "a tuple is a shape (of iota, reshape or broadcast_to), not a value");
      return std::nullopt;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::FloorDiv:
    case Op::Mod: {
      auto a = type_of(e.args[0], s);
      auto b = type_of(e.args[1], s);
      if (!a || !b) return std::nullopt;
      const ElemOp op = e.op == Op::Add        ? ElemOp::add
                        : e.op == Op::Sub      ? ElemOp::sub
                        : e.op == Op::Mul      ? ElemOp::mul
                        : e.op == Op::Div      ? ElemOp::div
                        : e.op == Op::FloorDiv ? ElemOp::floordiv
                                               : ElemOp::mod;
      return check(elementwise_type(op, *a, *b), e.loc);
    }
    case Op::Call: return call_type(e, s);
    default:
      if (is_int(e, s)) return weak_int();
      error(e.loc, "'" + print(e) + "' is not supported on tensors ('and', 'or' and 'not' take integers; " +
                       "use '&', '|' and '~' on masks)");
      return std::nullopt;
    }
  }

  std::optional<TensorType> value_index_type(const Expr &r, const Local &l, const Scope &s) {
    if (!l.type) return std::nullopt;
    bool ok = true;
    const auto subs = value_subscripts_of(r, [&](const Expr &e, bool bound) -> std::optional<std::int64_t> {
      if (auto err = not_int(e, s, bound ? "a slice bound" : "a subscript"); !err.empty()) {
        error(e.loc, err);
        ok = false;
        return std::nullopt;
      }
      return eval_int(e, s.ints);
    });
    if (!ok) return std::nullopt;
    ValueIndexed v = index_value(l.type->shape, subs);
    if (!v.ok()) {
      error(r.loc,
            "'" + print(r) + "': " + v.error + " of the value '" + r.name + "', " + type_string(*l.type));
      return std::nullopt;
    }
    return TensorType{l.type->dtype, l.type->weak, v.shape};
  }

  // Whether an integer expression names the grid point (Local::grid).
  static bool names_grid(const Expr &e, const Scope &s) {
    if (e.op == Op::Call && e.name == "program_id") return true;
    if (auto it = s.locals.find(e.name); e.op == Op::Name && it != s.locals.end() && it->second.grid)
      return true;
    return std::any_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return names_grid(a, s); });
  }

  // A shape argument `(a, b, ...)` of integer expressions.
  std::optional<Dims> shape_arg(const Expr &t, const Scope &s) {
    if (t.op != Op::Tuple) {
      error(t.loc, "expected a shape tuple such as (bm, bn), found '" + print(t) + "'");
      return std::nullopt;
    }
    Dims d;
    for (const auto &x : t.args) {
      if (auto err = not_int(x, s, "an extent"); !err.empty()) {
        error(x.loc, err);
        return std::nullopt;
      }
      if (names_grid(x, s)) {
        error(x.loc, "the extent '" + print(x) +
                         "' depends on the grid point (program_id): a shape is static in Pallas, the "
                         "same at every grid point");
        return std::nullopt;
      }
      auto v = eval_int(x, s.ints);
      if (v && *v < 0) {
        error(x.loc, "extent " + std::to_string(*v) + " is negative");
        return std::nullopt;
      }
      d.push_back(v ? *v : kUnknownExtent);
    }
    // A reference's whole-array values may pass 2^31 elements at a
    // production size (`check --set`, which never runs the reference):
    // only `run` evaluates them, and its interpreter refuses such a shape
    // at its line (exit 3). A body's block values never may.
    if (auto err = shape_arg_error(d); !err.empty() && !in_reference_) {
      error(t.loc, err);
      return std::nullopt;
    }
    return d;
  }

  // opaque(args..., op=, shape=, dtype=): the stated type, strong; the
  // arguments are typed for their own errors, their types do not matter.
  std::optional<TensorType> opaque_type(const Expr &e, const Scope &s) {
    bool ok = true;
    for (std::size_t k = 0; k < e.num_positional(); ++k)
      ok &= type_of(e.args[k], s).has_value();
    const Expr *sh = e.kwarg("shape");
    const Expr *dt = e.kwarg("dtype");
    if (!sh || !dt) return std::nullopt; // validation reports it
    auto shape = shape_arg(*sh, s);
    auto t = dt->op == Op::Name ? parse_dtype(dt->name) : std::nullopt;
    if (!ok || !shape || !t) return std::nullopt;
    return TensorType{*t, false, *shape};
  }

  std::optional<bool> flag(const Expr &call, const char *name) {
    const Expr *k = call.kwarg(name);
    if (!k) return false;
    auto b = bool_literal(*k);
    if (!b) error(k->loc, std::string(name) + " takes True or False");
    return b;
  }

  std::optional<TensorType> call_type(const Expr &e, const Scope &s) {
    const std::size_t np = e.num_positional();
    auto arg = [&](std::size_t k) { return type_of(e.args[k], s); };
    const std::string &f = e.name;
    if (f == "program_id" || f == "num_programs") return weak_int();
    // An integer function of integers (`x[...] / cdiv(n, bs)`, `min(n, bs)`)
    // is the integer it is in a subscript or a bound, weakly typed, as
    // every command evaluates it (not `min`'s reduction over an axis).
    if (spec::is_int_function(f) && e.kwarg_names.empty() && is_int(e, s)) return weak_int();
    if (f == "full") {
      auto v = arg(0);
      return v ? check(full_type(*v), e.loc) : std::nullopt;
    }
    static const std::map<std::string, UnaryOp> unary = {
        {"exp", UnaryOp::exp},     {"neg", UnaryOp::neg},   {"sqrt", UnaryOp::sqrt},
        {"rsqrt", UnaryOp::rsqrt}, {"log", UnaryOp::log},   {"log2", UnaryOp::log2},
        {"exp2", UnaryOp::exp2},   {"tanh", UnaryOp::tanh}, {"abs", UnaryOp::abs}};
    static const std::map<std::string, UnaryOp> math = {
        {"sin", UnaryOp::sin},     {"cos", UnaryOp::cos},     {"erf", UnaryOp::erf},
        {"erfc", UnaryOp::erfc},   {"floor", UnaryOp::floor}, {"ceil", UnaryOp::ceil},
        {"round", UnaryOp::round}, {"sign", UnaryOp::sign},   {"sigmoid", UnaryOp::sigmoid},
        {"expm1", UnaryOp::expm1}, {"log1p", UnaryOp::log1p}, {"tan", UnaryOp::tan},
        {"asin", UnaryOp::asin},   {"acos", UnaryOp::acos},   {"atan", UnaryOp::atan},
        {"sinh", UnaryOp::sinh},   {"cosh", UnaryOp::cosh},   {"asinh", UnaryOp::asinh},
        {"acosh", UnaryOp::acosh}, {"atanh", UnaryOp::atanh}, {"cbrt", UnaryOp::cbrt}};
    if (auto m = math.find(f); m != math.end() && np == 1) {
      auto v = arg(0);
      if (!v) return std::nullopt;
      return check(unary_type(m->second, *v), e.loc);
    }
    if (auto u = unary.find(f); u != unary.end() && np == 1) {
      auto v = arg(0);
      if (!v) return std::nullopt;
      return check(unary_type(u->second, *v), e.loc);
    }
    if (f == "pow") {
      auto a = arg(0), b = arg(1);
      if (!a || !b) return std::nullopt;
      return check(elementwise_type(ElemOp::pow, *a, *b), e.loc);
    }
    if (f == "where") {
      auto c = arg(0), a = arg(1), b = arg(2);
      if (!c || !a || !b) return std::nullopt;
      return check(where_type(*c, *a, *b), e.loc);
    }
    if (f == "iota") {
      auto shape = shape_arg(e.args[0], s);
      auto dim = eval_int(e.args[1], s.ints);
      if (!dim) error(e.args[1].loc, "iota's dimension must be a constant integer");
      DType t = DType::i32;
      if (const Expr *d = e.kwarg("dtype")) {
        auto dt = d->op == Op::Name ? parse_dtype(d->name) : std::nullopt;
        if (!dt) return std::nullopt; // validation reports it
        t = *dt;
      }
      if (!shape || !dim) return std::nullopt;
      return check(iota_type(t, *shape, *dim), e.loc);
    }
    if (f == "opaque") return opaque_type(e, s);
    if (f == "reshape" || f == "broadcast_to") {
      auto a = arg(0);
      auto shape = shape_arg(e.args[1], s);
      if (!a || !shape) return std::nullopt;
      return check(f == "reshape" ? reshape_type(*a, *shape) : broadcast_to_type(*a, *shape), e.loc);
    }
    if (f == "tile") {
      auto a = arg(0);
      auto reps = shape_arg(e.args[1], s);
      if (!a || !reps) return std::nullopt;
      return check(tile_type(*a, *reps), e.loc);
    }
    // The constant integer keyword `name` of f (`axis=1`), `dflt` when absent.
    auto const_kwarg = [&](const char *name,
                           std::optional<std::int64_t> dflt) -> std::optional<std::int64_t> {
      const Expr *k = e.kwarg(name);
      if (!k) return dflt;
      auto v = eval_int(*k, s.ints);
      if (!v) error(k->loc, f + "'s " + name + " must be a constant integer");
      return v;
    };
    if (f == "concatenate") {
      std::vector<TensorType> parts;
      bool ok = true;
      for (std::size_t k = 0; k < np; ++k)
        if (auto t = arg(k))
          parts.push_back(*t);
        else
          ok = false;
      auto axis = const_kwarg("axis", 0);
      if (!ok || !axis) return std::nullopt;
      return check(concatenate_type(parts, *axis), e.loc);
    }
    if (f == "roll" || f == "flip" || f == "cumsum" || f == "cummax" || f == "cummin" || f == "argmax" ||
        f == "argmin") {
      auto a = arg(0);
      if (f == "roll")
        if (auto err = not_int(e.args[1], s, "roll's shift"); !err.empty()) error(e.args[1].loc, err);
      auto axis = const_kwarg("axis", std::nullopt);
      if (!e.kwarg("axis")) error(e.loc, f + " takes axis=");
      if (f == "roll" && (e.kwarg("stride") != nullptr) != (e.kwarg("stride_axis") != nullptr))
        error(e.loc, "roll takes stride= and stride_axis= together");
      auto stride_axis = const_kwarg("stride_axis", std::nullopt);
      if (e.kwarg("stride")) const_kwarg("stride", 0);
      if (f.rfind("cum", 0) == 0 && !flag(e, "reverse")) return std::nullopt;
      if (!a || !axis) return std::nullopt;
      if (f == "argmax" || f == "argmin") return check(arg_reduce_type(*a, *axis), e.loc);
      auto t = check(along_axis_type(*a, *axis, f), e.loc);
      if (t && stride_axis) {
        if (!check(along_axis_type(*a, *stride_axis, "roll's stride"), e.loc)) return std::nullopt;
        if (normalize_axis(*stride_axis, a->shape.size()) == normalize_axis(*axis, a->shape.size())) {
          error(e.loc, "roll's stride_axis must differ from its axis");
          return std::nullopt;
        }
      }
      return t;
    }
    if (f == "shift_left" || f == "shift_right_logical" || f == "shift_right_arithmetic") {
      auto a = arg(0), b = arg(1);
      if (!a || !b) return std::nullopt;
      return check(shift_type(*a, *b), e.loc);
    }
    if (f == "maximum" || f == "minimum" || ((f == "max" || f == "min") && np == 2)) {
      auto a = arg(0), b = arg(1);
      if (!a || !b) return std::nullopt;
      return check(elementwise_type(f == "maximum" || f == "max" ? ElemOp::maximum : ElemOp::minimum, *a, *b),
                   e.loc);
    }
    if (f == "dot") {
      auto a = arg(0), b = arg(1);
      auto ta = flag(e, "trans_a"), tb = flag(e, "trans_b");
      DotOptions o;
      if (const Expr *p = e.kwarg("preferred_element_type")) {
        o.preferred = p->op == Op::Name ? parse_dtype(p->name) : std::nullopt;
        if (!o.preferred) return std::nullopt; // validation reports it
      }
      if (!a || !b || !ta || !tb) return std::nullopt;
      o.trans_a = *ta;
      o.trans_b = *tb;
      return check(dot_type(*a, *b, o), e.loc);
    }
    if (f == "dot_general") {
      auto a = arg(0), b = arg(1);
      std::optional<DType> pref;
      if (const Expr *p = e.kwarg("preferred_element_type")) {
        pref = p->op == Op::Name ? parse_dtype(p->name) : std::nullopt;
        if (!pref) return std::nullopt; // validation reports it
      }
      Loc where;
      auto dims = dot_general_dims(e, where);
      if (!dims.ok()) {
        error(where, dims.error);
        return std::nullopt;
      }
      if (!a || !b) return std::nullopt;
      return check(dot_general_type(*a, *b, dims.value, pref), e.loc);
    }
    if (f == "transpose") {
      auto a = arg(0);
      if (!a) return std::nullopt;
      return transpose_type(*a);
    }
    if (f == "sum" || f == "max" || f == "min") {
      std::optional<std::int64_t> axis;
      auto keep = flag(e, "keepdims");
      if (!keep) return std::nullopt;
      const Expr *ax = e.kwarg("axis");
      if (!ax && np >= 2) ax = &e.args[1];
      if (ax) {
        axis = eval_int(*ax, s.ints);
        if (!axis) {
          error(ax->loc, "axis must be a constant integer");
          return std::nullopt;
        }
      }
      auto a = arg(0);
      if (!a) return std::nullopt;
      const Reduction op = f == "sum" ? Reduction::sum : f == "max" ? Reduction::max : Reduction::min;
      return check(reduce_type(op, *a, axis, *keep), e.loc);
    }
    if (f == "cast") {
      auto a = arg(0);
      auto t = e.args[1].op == Op::Name ? parse_dtype(e.args[1].name) : std::nullopt;
      if (!a || !t) return std::nullopt; // validation reports a bad dtype
      return cast_type(*a, *t);
    }
    error(e.loc, "'" + f + "' is an integer function; a tensor value cannot use it");
    return std::nullopt;
  }
};

} // namespace

std::vector<Diagnostic> typecheck(const Program &p, const Env &overrides) {
  // A pipeline's compute statements are typed as a kernel body over its
  // buffers: each a scratch of its shape, a ring's slot index its leading
  // dim (`X[0]` is one slot). Copies and waits are checked by validate.
  KernelSpec k;
  k.name = p.name;
  k.params = p.params;
  k.body = p.body;
  k.loc = p.loc;
  for (const auto &b : p.buffers) {
    if (b.kind == BufferKind::sem) continue;
    Operand o;
    o.role = Role::scratch;
    o.name = b.name;
    o.dtype = b.dtype;
    o.loc = b.loc;
    o.memory_space = b.kind == BufferKind::hbm    ? MemorySpace::hbm
                     : b.kind == BufferKind::smem ? MemorySpace::smem
                                                  : MemorySpace::vmem;
    if (b.slots) o.shape.push_back(*b.slots);
    o.shape.insert(o.shape.end(), b.shape.begin(), b.shape.end());
    k.operands.push_back(std::move(o));
  }
  return Checker(k, overrides, nullptr, /*pipeline=*/true).run();
}

std::vector<Diagnostic> typecheck(const KernelSpec &k, const Env &overrides, ExprTypes *types) {
  // A nested emit_pipeline is typed as its flattened kernel: the inner
  // body sees each staged operand as its inner block (spec/nested.hpp).
  // (`types` then names the flattened kernel's expressions.)
  if (has_emit_pipeline(k.body)) return Checker(flatten_nested(k), overrides, nullptr).run();
  return Checker(k, overrides, types).run();
}

} // namespace pipecheck::spec
