#include "executor/error_bound.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipecheck::executor {

using spec::DType;

double dtype_epsilon(DType t) {
  switch (t) {
  case DType::bf16: return std::ldexp(1.0, -7);
  case DType::f16: return std::ldexp(1.0, -10);
  default: return std::ldexp(1.0, -23);
  }
}

double dtype_denorm_min(DType t) {
  switch (t) {
  case DType::bf16: return std::ldexp(1.0, -133);
  case DType::f16: return std::ldexp(1.0, -24);
  default: return std::ldexp(1.0, -149);
  }
}

namespace error_bound {

// The rules that move or reduce elements reuse value.hpp's own operations on
// untracked f32 values, so that nothing here restates what an operation
// does to its elements; the elementwise rules loop over the result's
// elements, reading the operands in place (a reference's values are whole
// arrays: a copy per operand and per term was gigabytes on a production
// attention backward).

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool exact(const Value &v) { return v.bound.e.empty(); }

Accumulation acc_of(const Value &a, const Value &b) { return a.bound.on ? a.bound.acc : b.bound.acc; }

// The rounding of a sum whose partial sums' magnitudes add up to `partials`
// and whose terms' to `terms`: eps(acc)·partials, a rounding at every term;
// for a body that rounds to a dtype narrower than f32 only at each of its
// `steps` accumulations (acc[...] += a block's f32 dot), at most
// eps(f32)·partials + eps(acc)·steps·terms (each such rounding is of a
// partial sum no larger than the terms' magnitudes), where that is less.
double sum_rounding(const Accumulation &acc, double partials, double terms) {
  const double every = dtype_epsilon(acc.dtype) * partials;
  if (acc.steps <= 0 || acc.dtype == DType::f32) return every;
  return std::min(every, dtype_epsilon(DType::f32) * partials +
                             dtype_epsilon(acc.dtype) * static_cast<double>(acc.steps) * terms);
}

// v's numbers as a strong, untracked f32 value.
Value numbers(const Value &v) {
  Value r;
  r.shape = v.shape;
  if (v.is_float())
    r.f = v.f;
  else
    r.f.assign(v.i.begin(), v.i.end());
  return r;
}

// |v| as an untracked f32 value.
Value magnitude(const Value &v) {
  Value r = numbers(v);
  for (auto &x : r.f)
    x = std::fabs(x);
  return r;
}

Value add(const Value &x, const Value &y) { return executor::binary(BinOp::add, x, y); }

// An operand of an elementwise operation read at the result's flat index:
// in place where it has the result's shape or one element, else from a
// broadcast copy (which carries its bound).
class At {
public:
  At(const Value &v, const Shape &shape) : v_(&v) {
    if (v.shape != shape && v.size() != 1) {
      copy_ = broadcast_to(v, shape);
      v_ = &copy_;
    }
    step_ = v_->size() == 1 ? 0 : 1;
  }
  double x(std::size_t k) const { return v_->at(static_cast<std::int64_t>(k * step_)); }
  double e(std::size_t k) const { return v_->bound.e.empty() ? 0.0 : v_->bound.e[k * step_]; }

private:
  const Value *v_;
  Value copy_;
  std::size_t step_ = 1;
};

void set_exact(Value &r, Accumulation acc) {
  r.bound.on = true;
  r.bound.acc = acc;
  r.bound.e.clear();
}

// r's bound: e (r's size), a NaN in it unbounded (an inf times a zero, or a
// function outside its domain).
void set(Value &r, FloatVec e, Accumulation acc) {
  r.bound.on = true;
  r.bound.acc = acc;
  for (auto &x : e)
    if (std::isnan(x)) x = kInf;
  r.bound.e = std::move(e);
}

// The same from a value of the bound's (a scalar 0: exact), broadcast to r.
void set(Value &r, const Value &e, Accumulation acc) {
  if (e.shape.empty() && e.f.at(0) == 0) return set_exact(r, acc);
  set(r, e.shape == r.shape ? e.f : broadcast_to(e, r.shape).f, acc);
}

// r's bound element by element: rule(k) for each flat index k.
template <class Rule> void set_each(Value &r, Accumulation acc, Rule rule) {
  FloatVec e(static_cast<std::size_t>(r.size()));
  for (std::size_t k = 0; k < e.size(); ++k)
    e[k] = static_cast<float>(rule(k));
  set(r, std::move(e), acc);
}

// The rounding of a result to its dtype, on both sides: eps(t)·|r| (none for integers).
double eps_of(const Value &r) { return r.is_float() ? dtype_epsilon(r.dtype) : 0.0; }

// How far a monotone f moves over [x - e, x + e] from f(x); inf where it is
// not monotone there (a pole of tan inside) or leaves its domain (NaN).
template <class F> double endpoint_change(F f, double x, double e) {
  if (e == 0) return 0;
  const double fx = f(x), lo = f(x - e), hi = f(x + e);
  const bool rising = lo <= fx && fx <= hi, falling = lo >= fx && fx >= hi;
  if (!rising && !falling) return kInf; // (also any NaN)
  const double d = std::max(std::fabs(hi - fx), std::fabs(lo - fx));
  return std::isnan(d) ? kInf : d;
}

double apply(UnOp op, double x) {
  switch (op) {
  case UnOp::exp: return std::exp(x);
  case UnOp::exp2: return std::exp2(x);
  case UnOp::expm1: return std::expm1(x);
  case UnOp::log: return std::log(x);
  case UnOp::log2: return std::log2(x);
  case UnOp::log1p: return std::log1p(x);
  case UnOp::sqrt: return std::sqrt(x);
  case UnOp::rsqrt: return 1.0 / std::sqrt(x);
  case UnOp::tanh: return std::tanh(x);
  case UnOp::erf: return std::erf(x);
  case UnOp::erfc: return std::erfc(x);
  case UnOp::sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case UnOp::atan: return std::atan(x);
  case UnOp::asinh: return std::asinh(x);
  case UnOp::sinh: return std::sinh(x);
  case UnOp::cbrt: return std::cbrt(x);
  case UnOp::asin: return std::asin(x);
  case UnOp::acos: return std::acos(x);
  case UnOp::atanh: return std::atanh(x);
  case UnOp::acosh: return std::acosh(x);
  case UnOp::tan: return std::tan(x);
  case UnOp::floor: return std::floor(x);
  case UnOp::ceil: return std::ceil(x);
  case UnOp::round: return std::nearbyint(x);
  case UnOp::sign: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
  case UnOp::cosh: return std::cosh(x); // (of |x|: monotone there)
  default: return std::nan("");
  }
}

// a's numbers as floats: a.f itself, or a conversion kept in `tmp`.
const FloatVec &floats_of(const Value &a, FloatVec &tmp) {
  if (a.is_float()) return a.f;
  tmp.assign(a.i.begin(), a.i.end());
  return tmp;
}

// eps-free rounding terms of the 1-D/2-D dot a·b, for each element (i, c):
// Σ_j |a[i, j]·b[j, c]| + Σ_l |Σ_{j<=l} a[i, j]·b[j, c]| — its products and
// its partial sums in index order, whose magnitudes bound its rounding
// (Higham's running error bound). Row tiles of the partial sums stay in
// cache while the contraction runs.
Value rounding_terms(const Value &a, const Value &b, const Shape &shape) {
  const std::int64_t m = a.shape.size() == 2 ? a.shape[0] : 1, k = a.shape.empty() ? 1 : a.shape.back();
  const std::int64_t n = b.shape.size() == 2 ? b.shape[1] : 1;
  FloatVec ta, tb;
  const FloatVec &A = floats_of(a, ta), &B = floats_of(b, tb);
  FloatVec absB(B.size());
  for (std::size_t x = 0; x < B.size(); ++x)
    absB[x] = std::fabs(B[x]);
  Value r;
  r.shape = shape;
  r.f.assign(static_cast<std::size_t>(m * n), 0.0f);
  using Row = Eigen::Map<Eigen::ArrayXf>;
  using ConstRow = Eigen::Map<const Eigen::ArrayXf>;
  const std::int64_t tile = std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(n, 1));
  std::vector<float> sums(static_cast<std::size_t>(tile * n));
  for (std::int64_t i0 = 0; i0 < m; i0 += tile) {
    const std::int64_t rows = std::min(tile, m - i0);
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      const ConstRow bj(B.data() + j * n, n), abs_bj(absB.data() + j * n, n);
      for (std::int64_t i = 0; i < rows; ++i) {
        const float aij = A[static_cast<std::size_t>((i0 + i) * k + j)];
        Row s(sums.data() + i * n, n), mag(r.f.data() + (i0 + i) * n, n);
        s += aij * bj;
        mag += s.abs() + std::fabs(aij) * abs_bj;
      }
    }
  }
  return r;
}

// How a reduction along `axis` (all of a without one) walks a: `outer`
// lines of `len` elements `inner` apart, line (o, in) starting at
// o·len·inner + in, its result at o·inner + in.
spec::AxisLines lines_of(const Value &a, std::optional<std::int64_t> axis) {
  if (!axis) return {1, a.size(), 1};
  return spec::lines_around(a.shape, spec::normalize_axis(*axis, a.shape.size()));
}

} // namespace

void track(Value &v, Accumulation acc, FloatVec e) {
  v.bound.on = true;
  v.bound.acc = acc;
  v.bound.e = std::move(e);
}

Value as_value(const Value &v) {
  Value r;
  r.shape = v.shape;
  if (exact(v))
    r.f.assign(static_cast<std::size_t>(v.size()), 0.0f);
  else
    r.f = v.bound.e;
  return r;
}

void binary(BinOp op, const Value &a, const Value &b, Value &r) {
  const Accumulation acc = acc_of(a, b);
  const double eps = eps_of(r);
  auto q = [&](std::size_t k) { return std::fabs(r.at(static_cast<std::int64_t>(k))); };
  if (exact(a) && exact(b)) {
    // Exact operands: a float result is rounded (a body may have associated
    // it otherwise); floor division, modulo, max and min of the same
    // numbers, and integer arithmetic, give the same result on both sides.
    const bool rounds =
        op == BinOp::add || op == BinOp::sub || op == BinOp::mul || op == BinOp::div || op == BinOp::pow;
    if (r.is_float() && rounds) return set_each(r, acc, [&](std::size_t k) { return eps * q(k); });
    return set_exact(r, acc);
  }
  const At A(a, r.shape), B(b, r.shape);
  switch (op) {
  case BinOp::add:
  case BinOp::sub: return set_each(r, acc, [&](std::size_t k) { return A.e(k) + B.e(k) + eps * q(k); });
  case BinOp::mul:
    return set_each(r, acc, [&](std::size_t k) {
      return std::fabs(A.x(k)) * B.e(k) + std::fabs(B.x(k)) * A.e(k) + A.e(k) * B.e(k) + eps * q(k);
    });
  case BinOp::maximum:
  case BinOp::minimum: {
    // The winner's bound, or how far a loser within reach could overtake it.
    const double s = op == BinOp::maximum ? 1 : -1;
    return set_each(r, acc, [&](std::size_t k) {
      const double v = r.at(static_cast<std::int64_t>(k));
      return std::max(s * (A.x(k) - v) + A.e(k), s * (B.x(k) - v) + B.e(k));
    });
  }
  case BinOp::div:
    // (ea + |r|·eb) / (|b| - eb): how far a / b moves with a and b in their intervals.
    return set_each(r, acc, [&](std::size_t k) {
      const double den = std::fabs(B.x(k)) - B.e(k);
      return den > 0 ? (A.e(k) + q(k) * B.e(k)) / den + eps * q(k) : kInf;
    });
  case BinOp::pow:
    if (!r.is_float()) break;
    // The largest change at a corner of [a ± ea] x [b ± eb]: pow is monotone
    // in each argument, or convex (x^2), where it is defined on the box.
    return set_each(r, acc, [&](std::size_t k) {
      const double x = A.x(k), y = B.x(k), ex = A.e(k), ey = B.e(k), p = std::pow(x, y);
      // (A negative exponent over a base interval that holds 0: a pole.)
      double d = ex > 0 && (x - ex) * (x + ex) <= 0 && y - ey < 0 ? kInf : 0.0;
      for (double sx : {-1.0, 1.0})
        for (double sy : {-1.0, 1.0})
          d = std::max(d, std::fabs(std::pow(x + sx * ex, y + sy * ey) - p));
      return std::isnan(d) ? kInf : d + eps * std::fabs(p);
    });
  case BinOp::bit_and:
  case BinOp::bit_or:
    // A flip of either boolean may flip the result (a bound of 1 is any flip).
    if (r.dtype == DType::boolean)
      return set_each(r, acc, [&](std::size_t k) { return std::max(A.e(k), B.e(k)); });
    break;
  case BinOp::floordiv:
  case BinOp::mod: break;
  }
  // Not followed: a floor, modulo or bit operation of an inexact value.
  set_each(r, acc, [&](std::size_t k) { return A.e(k) > 0 || B.e(k) > 0 ? kInf : 0.0; });
}

void unary(UnOp op, const Value &a, Value &r) {
  const Accumulation acc = a.bound.acc;
  const bool steps = op == UnOp::floor || op == UnOp::ceil || op == UnOp::round || op == UnOp::sign;
  const double eps = steps ? 0.0 : eps_of(r);
  auto q = [&](std::size_t k) { return std::fabs(r.at(static_cast<std::int64_t>(k))); };
  if (exact(a)) {
    // A float function rounds its result; negation, abs and the steps are exact.
    if (r.is_float() && op != UnOp::neg && op != UnOp::abs && !steps)
      return set_each(r, acc, [&](std::size_t k) { return eps * q(k); });
    return set_exact(r, acc);
  }
  if (op == UnOp::neg || op == UnOp::abs || (!r.is_float() && op != UnOp::sign && op != UnOp::bit_not) ||
      (op == UnOp::bit_not && r.dtype == DType::boolean))
    return set(r, a.bound.e, acc); // (an integer is its own floor; a flipped boolean's negation flips)
  const At A(a, a.shape);
  if (op == UnOp::bit_not) return set_each(r, acc, [&](std::size_t k) { return A.e(k) > 0 ? kInf : 0.0; });
  if (op == UnOp::sin || op == UnOp::cos)
    return set_each(r, acc, [&](std::size_t k) { return std::min(A.e(k), 2.0) + eps * q(k); });
  if (op == UnOp::cosh)
    return set_each(r, acc, [&](std::size_t k) {
      return endpoint_change([](double v) { return std::cosh(std::max(v, 0.0)); }, std::fabs(A.x(k)),
                             A.e(k)) +
             eps * q(k);
    });
  set_each(r, acc, [&](std::size_t k) {
    return endpoint_change([op](double v) { return apply(op, v); }, A.x(k), A.e(k)) + eps * q(k);
  });
}

void compare(spec::CompareOp, const Value &a, const Value &b, Value &r) {
  const Accumulation acc = acc_of(a, b);
  if (exact(a) && exact(b)) return set_exact(r, acc);
  // It may flip where a and b are within their bounds of each other.
  const At A(a, r.shape), B(b, r.shape);
  set_each(r, acc, [&](std::size_t k) {
    const double s = A.e(k) + B.e(k);
    return s > 0 && !(std::fabs(A.x(k) - B.x(k)) > s) ? 1.0 : 0.0;
  });
}

void where(const Value &c, const Value &a, const Value &b, Value &r) {
  const Accumulation acc = c.bound.on ? c.bound.acc : acc_of(a, b);
  if (exact(c) && exact(a) && exact(b)) return set_exact(r, acc);
  const At C(c, r.shape), A(a, r.shape), B(b, r.shape);
  set_each(r, acc, [&](std::size_t k) {
    if (C.e(k) > 0) return std::max(A.e(k), B.e(k)) + std::fabs(A.x(k) - B.x(k)); // either branch
    return C.x(k) != 0 ? A.e(k) : B.e(k);
  });
}

void cast(const Value &a, Value &r) {
  const Accumulation acc = a.bound.acc;
  // An exact value converts to the same number on both sides.
  if (exact(a) || a.dtype == r.dtype) {
    r.bound = a.bound;
    return;
  }
  const At A(a, r.shape);
  if (r.is_float()) {
    // An inexact value may round to the other neighbour on the other side.
    const bool narrows = !a.is_float() || dtype_epsilon(r.dtype) > dtype_epsilon(a.dtype);
    const double eps = narrows ? dtype_epsilon(r.dtype) : 0.0;
    return set_each(r, acc, [&](std::size_t k) {
      return A.e(k) > 0 ? A.e(k) + eps * std::fabs(r.at(static_cast<std::int64_t>(k))) : 0.0;
    });
  }
  if (r.dtype == DType::boolean)
    return set_each(r, acc,
                    [&](std::size_t k) { return A.e(k) > 0 && std::fabs(A.x(k)) <= A.e(k) ? 1.0 : 0.0; });
  if (a.is_float()) {
    // Truncation, saturated: monotone.
    const auto [lo, hi] = spec::exact_int_range(r.dtype);
    auto convert = [lo = static_cast<double>(lo), hi = static_cast<double>(hi)](double x) {
      return std::clamp(std::trunc(x), lo, hi);
    };
    return set_each(r, acc, [&](std::size_t k) { return endpoint_change(convert, A.x(k), A.e(k)); });
  }
  set(r, a.bound.e, acc); // (integers to integers: the wrap is not followed)
}

void dot(const Value &a, const Value &b, Value &r) {
  const Accumulation acc = acc_of(a, b);
  if (!r.is_float() && exact(a) && exact(b)) return set_exact(r, acc);
  Value e;
  e.shape = r.shape;
  e.f.assign(static_cast<std::size_t>(r.size()), 0.0f);
  // The rounding of the products and of the partial sums: eps(acc)·(|A|·|B| + Σ|partial sums|).
  if (r.is_float()) {
    e = rounding_terms(a, b, r.shape);
    const Value m = acc.steps > 0 ? executor::dot(magnitude(a), magnitude(b)) : Value{};
    for (std::size_t k = 0; k < e.f.size(); ++k)
      e.f[k] = static_cast<float>(sum_rounding(acc, e.f[k], acc.steps > 0 ? m.f[k] : 0.0));
  }
  // The operands' errors: |A|·eB + eA·(|B| + eB).
  if (!exact(b)) e = add(e, executor::dot(magnitude(a), as_value(b)));
  if (!exact(a))
    e = add(e, executor::dot(as_value(a), exact(b) ? magnitude(b) : add(magnitude(b), as_value(b))));
  set(r, std::move(e.f), acc);
}

void reduce(ReduceOp op, const Value &a, std::optional<std::int64_t> axis, bool keepdims, Value &r) {
  (void)keepdims; // (r's elements are the lines' results either way)
  const Accumulation acc = a.bound.acc;
  if (exact(a) && (op != ReduceOp::sum || !r.is_float())) return set_exact(r, acc); // max, min, integer sums
  // Along each line: for a sum, Σ e + eps(acc)·Σ|partial sums| (and the
  // rounding to a narrower input dtype: partial sums are f32); for a max
  // (min), the most an element could overtake the result by, the winner's
  // own bound or a loser's within reach.
  const spec::AxisLines l = lines_of(a, axis);
  const bool sum = op == ReduceOp::sum, floats = r.is_float();
  const double s = op == ReduceOp::max ? 1 : -1;
  const double narrow =
      floats && dtype_epsilon(r.dtype) > dtype_epsilon(DType::f32) ? dtype_epsilon(r.dtype) : 0.0;
  FloatVec e(static_cast<std::size_t>(l.outer * l.inner));
  std::vector<double> partial(static_cast<std::size_t>(l.inner)), acc_e(partial.size()), mag(partial.size()),
      terms(partial.size());
  for (std::int64_t o = 0; o < l.outer; ++o) {
    std::fill(partial.begin(), partial.end(), 0.0);
    std::fill(acc_e.begin(), acc_e.end(), sum ? 0.0 : -static_cast<double>(kInf));
    std::fill(mag.begin(), mag.end(), 0.0);
    std::fill(terms.begin(), terms.end(), 0.0);
    for (std::int64_t k = 0; k < l.len; ++k)
      for (std::int64_t in = 0; in < l.inner; ++in) {
        const auto x = static_cast<std::int64_t>((o * l.len + k) * l.inner + in);
        const double ex = exact(a) ? 0.0 : a.bound.e[static_cast<std::size_t>(x)];
        const auto j = static_cast<std::size_t>(in);
        if (sum) {
          partial[j] += a.at(x);
          mag[j] += std::fabs(partial[j]);
          terms[j] += std::fabs(a.at(x));
          acc_e[j] += ex;
        } else {
          const double v = r.at(o * l.inner + in);
          acc_e[j] = std::max(acc_e[j], s * (a.at(x) - v) + ex);
        }
      }
    for (std::int64_t in = 0; in < l.inner; ++in) {
      const auto j = static_cast<std::size_t>(in), out = static_cast<std::size_t>(o * l.inner + in);
      e[out] = static_cast<float>(sum ? acc_e[j] + (floats ? sum_rounding(acc, mag[j], terms[j]) : 0.0) +
                                            narrow * std::fabs(r.at(o * l.inner + in))
                                      : acc_e[j]);
    }
  }
  set(r, std::move(e), acc);
}

void cumulative(ReduceOp op, const Value &a, std::int64_t axis, bool reverse, Value &r) {
  const Accumulation acc = a.bound.acc;
  Value e = exact(a) ? Value::scalar_float(0, DType::f32, false)
                     : executor::cumulative(op == ReduceOp::sum ? ReduceOp::sum : ReduceOp::max, as_value(a),
                                            axis, reverse);
  if (op == ReduceOp::sum && r.is_float()) {
    // Each prefix's Σ|partial sums|: r's own partial sums are the prefixes.
    Value partial = magnitude(r);
    partial = executor::cumulative(ReduceOp::sum, partial, axis, reverse);
    const Value terms =
        acc.steps > 0 ? executor::cumulative(ReduceOp::sum, magnitude(a), axis, reverse) : Value{};
    const double narrow = dtype_epsilon(r.dtype) > dtype_epsilon(DType::f32) ? dtype_epsilon(r.dtype) : 0.0;
    for (std::size_t k = 0; k < partial.f.size(); ++k)
      partial.f[k] = static_cast<float>(sum_rounding(acc, partial.f[k], acc.steps > 0 ? terms.f[k] : 0.0) +
                                        narrow * std::fabs(r.f[k]));
    e = add(e, partial);
  } else if (exact(a)) {
    return set_exact(r, acc);
  }
  set(r, e, acc);
}

void arg_reduce(bool max, const Value &a, std::int64_t axis, Value &r) {
  const Accumulation acc = a.bound.acc;
  if (exact(a)) return set_exact(r, acc);
  // The index is unbounded where another element is within the bounds of
  // the winner (either may win on the other side).
  const spec::AxisLines l = lines_of(a, axis);
  const FloatVec &ex = a.bound.e;
  FloatVec e(static_cast<std::size_t>(l.outer * l.inner), 0.0f);
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t in = 0; in < l.inner; ++in) {
      auto idx = [&](std::int64_t k) { return (o * l.len + k) * l.inner + in; };
      const auto out = static_cast<std::size_t>(o * l.inner + in);
      const std::int64_t w = idx(r.i[out]);
      for (std::int64_t k = 0; k < l.len; ++k) {
        const std::int64_t j = idx(k);
        if (j == w) continue;
        const double gap = max ? a.at(w) - a.at(j) : a.at(j) - a.at(w);
        if (!(gap > static_cast<double>(ex[static_cast<std::size_t>(w)]) + ex[static_cast<std::size_t>(j)]))
          e[out] = kInf;
      }
    }
  set(r, std::move(e), acc);
}

void unfollowed(const Value &a, const Value &b, Value &r) {
  const Accumulation acc = acc_of(a, b);
  if (exact(a) && exact(b)) return set_exact(r, acc);
  const At A(a, r.shape), B(b, r.shape);
  set_each(r, acc, [&](std::size_t k) { return A.e(k) > 0 || B.e(k) > 0 ? kInf : 0.0; });
}

} // namespace error_bound
} // namespace pipecheck::executor
