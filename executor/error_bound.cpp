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

namespace error_bound {

// The rules are written with value.hpp's own operations on untracked f32
// values (their broadcasting included), so that nothing here restates what
// an operation does to its elements; only the few rules that need a
// function's values at the ends of an interval loop over elements.

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool exact(const Value &v) { return v.bound.e.empty(); }

DType acc_of(const Value &a, const Value &b) { return a.bound.on ? a.bound.acc : b.bound.acc; }

Value scalar(float x) {
  Value r;
  r.f = {x};
  return r;
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

// v's bound: an f32 value of v's shape, or the scalar 0 where v is exact.
Value error_of(const Value &v) {
  if (exact(v)) return scalar(0);
  Value r;
  r.shape = v.shape;
  r.f = v.bound.e;
  return r;
}

Value add(const Value &x, const Value &y) { return executor::binary(BinOp::add, x, y); }
Value mul(const Value &x, const Value &y) { return executor::binary(BinOp::mul, x, y); }
Value larger(const Value &x, const Value &y) { return executor::binary(BinOp::maximum, x, y); }
Value scaled(Value x, double c) {
  for (auto &v : x.f)
    v = static_cast<float>(v * c);
  return x;
}

// The rounding of a result to its dtype, on both sides: eps(t)·|r| (none for integers).
Value rounding(const Value &r) {
  if (!r.is_float()) return scalar(0);
  return scaled(magnitude(r), dtype_epsilon(r.dtype));
}

// x at shape s (broadcast), its elements.
FloatVec at(const Value &x, const Shape &s) { return x.shape == s ? x.f : broadcast_to(x, s).f; }

void set_exact(Value &r, DType acc) {
  r.bound.on = true;
  r.bound.acc = acc;
  r.bound.e.clear();
}

void set(Value &r, const Value &e, DType acc) {
  if (e.shape.empty() && e.f.at(0) == 0) return set_exact(r, acc);
  r.bound.on = true;
  r.bound.acc = acc;
  r.bound.e = at(e, r.shape);
  // (A NaN is an inf times a zero, or a function outside its domain: unbounded.)
  for (auto &x : r.bound.e)
    if (std::isnan(x)) x = kInf;
}

// How far an operand x (bound e) of a max (min) whose result is r could move
// r: (x - r) + e ((r - x) + e), the winner's own bound, or what a loser
// within reach could overtake it by (negative for one out of reach).
Value overtaking(bool max, const Value &x, const Value &e, const Value &r) {
  const Value gap = max ? executor::binary(BinOp::sub, numbers(x), numbers(r))
                        : executor::binary(BinOp::sub, numbers(r), numbers(x));
  return add(gap, e);
}

// Unbounded where either bound is not 0, exact elsewhere.
Value unbounded_where_inexact(const Value &a, const Value &b, const Shape &s) {
  const FloatVec ea = at(error_of(a), s), eb = at(error_of(b), s);
  Value e;
  e.shape = s;
  e.f.resize(ea.size());
  for (std::size_t k = 0; k < ea.size(); ++k)
    e.f[k] = ea[k] > 0 || eb[k] > 0 ? kInf : 0.0f;
  return e;
}

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

// Σ_l |Σ_{j<=l} a[i, j]·b[j, c]| for each element (i, c) of the 1-D/2-D
// dot a·b: the partial sums of each of its elements in index order, whose
// magnitudes bound its summation's rounding (Higham's running error bound).
// Row tiles of the partial sums stay in cache while the contraction runs.
Value partial_sums(const Value &a, const Value &b) {
  const std::int64_t m = a.shape.size() == 2 ? a.shape[0] : 1, k = a.shape.empty() ? 1 : a.shape.back();
  const std::int64_t n = b.shape.size() == 2 ? b.shape[1] : 1;
  const FloatVec A = numbers(a).f, B = numbers(b).f;
  Value r;
  r.shape = a.shape.size() == 2 && b.shape.size() == 2 ? Shape{m, n}
            : a.shape.size() == 2                      ? Shape{m}
            : b.shape.size() == 2                      ? Shape{n}
                                                       : Shape{};
  r.f.assign(static_cast<std::size_t>(m * n), 0.0f);
  using Row = Eigen::Map<Eigen::ArrayXf>;
  using ConstRow = Eigen::Map<const Eigen::ArrayXf>;
  const std::int64_t tile = std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(n, 1));
  std::vector<float> sums(static_cast<std::size_t>(tile * n));
  for (std::int64_t i0 = 0; i0 < m; i0 += tile) {
    const std::int64_t rows = std::min(tile, m - i0);
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      const ConstRow bj(B.data() + j * n, n);
      for (std::int64_t i = 0; i < rows; ++i) {
        Row s(sums.data() + i * n, n), mag(r.f.data() + (i0 + i) * n, n);
        s += A[static_cast<std::size_t>((i0 + i) * k + j)] * bj;
        mag += s.abs();
      }
    }
  }
  return r;
}

} // namespace

void track(Value &v, DType acc, FloatVec e) {
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
  const DType acc = acc_of(a, b);
  const bool is_float = r.is_float();
  if (exact(a) && exact(b)) {
    // Exact operands: a float result is rounded (a body may have associated
    // it otherwise); floor division, modulo, max and min of the same
    // numbers, and integer arithmetic, give the same result on both sides.
    const bool rounds =
        op == BinOp::add || op == BinOp::sub || op == BinOp::mul || op == BinOp::div || op == BinOp::pow;
    if (is_float && rounds)
      set(r, rounding(r), acc);
    else
      set_exact(r, acc);
    return;
  }
  const Value ea = error_of(a), eb = error_of(b);
  switch (op) {
  case BinOp::add:
  case BinOp::sub: set(r, add(add(ea, eb), rounding(r)), acc); return;
  case BinOp::mul:
    set(r, add(add(add(mul(magnitude(a), eb), mul(magnitude(b), ea)), mul(ea, eb)), rounding(r)), acc);
    return;
  case BinOp::maximum:
  case BinOp::minimum: {
    const bool max = op == BinOp::maximum;
    set(r, larger(overtaking(max, a, ea, r), overtaking(max, b, eb, r)), acc);
    return;
  }
  case BinOp::div: {
    // (ea + |r|·eb) / (|b| - eb): how far a / b moves with a and b in their intervals.
    const FloatVec A = at(ea, r.shape), B = at(magnitude(b), r.shape), E = at(eb, r.shape);
    Value e;
    e.shape = r.shape;
    e.f.resize(A.size());
    for (std::size_t k = 0; k < A.size(); ++k) {
      const double q = std::fabs(static_cast<double>(r.f[k])), den = static_cast<double>(B[k]) - E[k];
      e.f[k] = den > 0 ? static_cast<float>((A[k] + q * E[k]) / den + dtype_epsilon(r.dtype) * q) : kInf;
    }
    set(r, e, acc);
    return;
  }
  case BinOp::pow: {
    if (!is_float) break;
    // The largest change at a corner of [a ± ea] x [b ± eb]: pow is monotone
    // in each argument, or convex (x^2), where it is defined on the box.
    const FloatVec x = at(numbers(a), r.shape), y = at(numbers(b), r.shape);
    const FloatVec ex = at(ea, r.shape), ey = at(eb, r.shape);
    Value e;
    e.shape = r.shape;
    e.f.resize(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double p = std::pow(static_cast<double>(x[k]), static_cast<double>(y[k]));
      // (A negative exponent over a base interval that holds 0: a pole.)
      const bool pole = ex[k] > 0 &&
                        (static_cast<double>(x[k]) - ex[k]) * (static_cast<double>(x[k]) + ex[k]) <= 0 &&
                        static_cast<double>(y[k]) - ey[k] < 0;
      double d = pole ? kInf : 0.0;
      for (double sx : {-1.0, 1.0})
        for (double sy : {-1.0, 1.0})
          d = std::max(d, std::fabs(std::pow(x[k] + sx * ex[k], y[k] + sy * ey[k]) - p));
      e.f[k] = std::isnan(d) ? kInf : static_cast<float>(d + dtype_epsilon(r.dtype) * std::fabs(p));
    }
    set(r, e, acc);
    return;
  }
  case BinOp::bit_and:
  case BinOp::bit_or:
    // A flip of either boolean may flip the result (a bound of 1 is any flip).
    if (r.dtype == DType::boolean) {
      set(r, larger(ea, eb), acc);
      return;
    }
    break;
  case BinOp::floordiv:
  case BinOp::mod: break;
  }
  // Not followed: a floor, modulo or bit operation of an inexact value.
  set(r, unbounded_where_inexact(a, b, r.shape), acc);
}

void unary(UnOp op, const Value &a, Value &r) {
  const DType acc = a.bound.acc;
  const bool steps = op == UnOp::floor || op == UnOp::ceil || op == UnOp::round || op == UnOp::sign;
  if (exact(a)) {
    // A float function rounds its result; negation, abs and the steps are exact.
    if (r.is_float() && op != UnOp::neg && op != UnOp::abs && !steps)
      set(r, rounding(r), acc);
    else
      set_exact(r, acc);
    return;
  }
  const Value ea = error_of(a);
  if (op == UnOp::neg || op == UnOp::abs || (!r.is_float() && op != UnOp::sign && op != UnOp::bit_not) ||
      (op == UnOp::bit_not && r.dtype == DType::boolean)) {
    set(r, ea, acc); // (an integer is its own floor; a flipped boolean's negation flips)
    return;
  }
  if (op == UnOp::bit_not) {
    set(r, unbounded_where_inexact(a, a, r.shape), acc);
    return;
  }
  if (op == UnOp::sin || op == UnOp::cos) {
    Value e = ea;
    for (auto &x : e.f)
      x = std::min(x, 2.0f);
    set(r, add(e, rounding(r)), acc);
    return;
  }
  const FloatVec x = numbers(a).f, ex = at(ea, a.shape);
  Value e;
  e.shape = r.shape;
  e.f.resize(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    double d;
    if (op == UnOp::cosh)
      d = endpoint_change([](double v) { return std::cosh(std::max(v, 0.0)); }, std::fabs(x[k]), ex[k]);
    else
      d = endpoint_change([op](double v) { return apply(op, v); }, x[k], ex[k]);
    e.f[k] = static_cast<float>(d);
  }
  set(r, steps ? e : add(e, rounding(r)), acc);
}

void compare(spec::CompareOp, const Value &a, const Value &b, Value &r) {
  const DType acc = acc_of(a, b);
  if (exact(a) && exact(b)) return set_exact(r, acc);
  // It may flip where a and b are within their bounds of each other.
  const FloatVec x = at(numbers(a), r.shape), y = at(numbers(b), r.shape);
  const FloatVec s = at(add(error_of(a), error_of(b)), r.shape);
  Value e;
  e.shape = r.shape;
  e.f.resize(x.size());
  for (std::size_t k = 0; k < x.size(); ++k)
    e.f[k] = s[k] > 0 && !(std::fabs(static_cast<double>(x[k]) - y[k]) > s[k]) ? 1.0f : 0.0f;
  set(r, e, acc);
}

void where(const Value &c, const Value &a, const Value &b, Value &r) {
  const DType acc = c.bound.on ? c.bound.acc : acc_of(a, b);
  if (exact(c) && exact(a) && exact(b)) return set_exact(r, acc);
  const FloatVec ec = at(error_of(c), r.shape), ea = at(error_of(a), r.shape), eb = at(error_of(b), r.shape);
  const FloatVec x = numbers(a).f, y = numbers(b).f;
  Value e;
  e.shape = r.shape;
  e.f.resize(ea.size());
  for (std::size_t k = 0; k < e.f.size(); ++k) {
    if (ec[k] > 0) // either branch
      e.f[k] = static_cast<float>(std::max(ea[k], eb[k]) + std::fabs(static_cast<double>(x[k]) - y[k]));
    else
      e.f[k] = c.i[k] ? ea[k] : eb[k];
  }
  set(r, e, acc);
}

void cast(const Value &a, Value &r) {
  const DType acc = a.bound.acc;
  // An exact value converts to the same number on both sides.
  if (exact(a) || a.dtype == r.dtype) {
    r.bound = a.bound;
    return;
  }
  const Value ea = error_of(a);
  const FloatVec ex = at(ea, r.shape);
  Value e;
  e.shape = r.shape;
  e.f.resize(ex.size());
  if (r.is_float()) {
    // An inexact value may round to the other neighbour on the other side.
    const bool narrows = !a.is_float() || dtype_epsilon(r.dtype) > dtype_epsilon(a.dtype);
    const double eps = narrows ? dtype_epsilon(r.dtype) : 0.0;
    for (std::size_t k = 0; k < ex.size(); ++k)
      e.f[k] = ex[k] > 0 ? static_cast<float>(ex[k] + eps * std::fabs(r.f[k])) : 0.0f;
  } else if (r.dtype == DType::boolean) {
    const FloatVec x = numbers(a).f;
    for (std::size_t k = 0; k < ex.size(); ++k)
      e.f[k] = std::fabs(x[k]) <= ex[k] && ex[k] > 0 ? 1.0f : 0.0f;
  } else if (a.is_float()) {
    // Truncation, saturated: monotone.
    const auto [lo, hi] = spec::exact_int_range(r.dtype);
    auto convert = [lo = static_cast<double>(lo), hi = static_cast<double>(hi)](double x) {
      return std::clamp(std::trunc(x), lo, hi);
    };
    const FloatVec x = numbers(a).f;
    for (std::size_t k = 0; k < ex.size(); ++k)
      e.f[k] = static_cast<float>(endpoint_change(convert, x[k], ex[k]));
  } else {
    e.f = ex; // (integers to integers: the wrap is not followed)
  }
  set(r, e, acc);
}

void dot(const Value &a, const Value &b, Value &r) {
  const DType acc = acc_of(a, b);
  if (!r.is_float() && exact(a) && exact(b)) return set_exact(r, acc);
  const Value A = magnitude(a), B = magnitude(b);
  Value e = scalar(0);
  // The rounding of the products and of the partial sums: eps(acc)·(|A|·|B| + Σ|partial sums|).
  if (r.is_float()) e = scaled(add(executor::dot(A, B), partial_sums(a, b)), dtype_epsilon(acc));
  // The operands' errors: |A|·eB + eA·(|B| + eB).
  if (!exact(b)) e = add(e, executor::dot(A, as_value(b)));
  if (!exact(a)) e = add(e, executor::dot(as_value(a), exact(b) ? B : add(B, as_value(b))));
  set(r, e, acc);
}

void reduce(ReduceOp op, const Value &a, std::optional<std::int64_t> axis, bool keepdims, Value &r) {
  const DType acc = a.bound.acc;
  if (op != ReduceOp::sum) {
    if (exact(a)) return set_exact(r, acc);
    // The most any element could overtake the result by (its own bound, for the winner).
    Shape kept = a.shape;
    if (axis) kept[static_cast<std::size_t>(spec::normalize_axis(*axis, a.shape.size()))] = 1;
    const Value rk = axis ? executor::reshape(numbers(r), kept) : executor::reshape(numbers(r), {});
    return set(r,
               executor::reduce(ReduceOp::max, overtaking(op == ReduceOp::max, a, error_of(a), rk), axis, {},
                                keepdims),
               acc);
  }
  Value e = exact(a) ? scalar(0) : executor::reduce(ReduceOp::sum, as_value(a), axis, {}, keepdims);
  if (r.is_float()) {
    // Σ|partial sums| along the axis (all of a in row-major order without one).
    const Value x = axis ? numbers(a) : executor::reshape(numbers(a), {a.size()});
    const std::int64_t ax = axis ? *axis : 0;
    Value partial = executor::cumulative(ReduceOp::sum, x, ax, false);
    for (auto &v : partial.f)
      v = std::fabs(v);
    e = add(e,
            scaled(executor::reduce(ReduceOp::sum, partial, ax, {}, axis && keepdims), dtype_epsilon(acc)));
    // (Partial sums in f32, the result rounded to a narrower input dtype.)
    if (dtype_epsilon(r.dtype) > dtype_epsilon(DType::f32)) e = add(e, rounding(r));
  } else if (exact(a)) {
    return set_exact(r, acc); // an integer sum of exact integers
  }
  set(r, e, acc);
}

void cumulative(ReduceOp op, const Value &a, std::int64_t axis, bool reverse, Value &r) {
  const DType acc = a.bound.acc;
  Value e = exact(a) ? scalar(0)
                     : executor::cumulative(op == ReduceOp::sum ? ReduceOp::sum : ReduceOp::max, as_value(a),
                                            axis, reverse);
  if (op == ReduceOp::sum && r.is_float()) {
    // Each prefix's Σ|partial sums|: r's own partial sums are the prefixes.
    Value partial = numbers(r);
    for (auto &v : partial.f)
      v = std::fabs(v);
    e = add(e, scaled(executor::cumulative(ReduceOp::sum, partial, axis, reverse), dtype_epsilon(acc)));
    if (dtype_epsilon(r.dtype) > dtype_epsilon(DType::f32)) e = add(e, rounding(r));
  } else if (exact(a)) {
    return set_exact(r, acc);
  }
  set(r, e, acc);
}

void arg_reduce(bool max, const Value &a, std::int64_t axis, Value &r) {
  const DType acc = a.bound.acc;
  if (exact(a)) return set_exact(r, acc);
  // The index is unbounded where another element is within the bounds of
  // the winner (either may win on the other side).
  const spec::AxisLines l = spec::lines_around(a.shape, spec::normalize_axis(axis, a.shape.size()));
  const FloatVec x = numbers(a).f, &ex = a.bound.e;
  Value e;
  e.shape = r.shape;
  e.f.assign(static_cast<std::size_t>(l.outer * l.inner), 0.0f);
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t in = 0; in < l.inner; ++in) {
      auto idx = [&](std::int64_t k) { return static_cast<std::size_t>((o * l.len + k) * l.inner + in); };
      const auto out = static_cast<std::size_t>(o * l.inner + in);
      const std::size_t w = idx(r.i[out]);
      for (std::int64_t k = 0; k < l.len; ++k) {
        const std::size_t j = idx(k);
        if (j == w) continue;
        const double gap = max ? static_cast<double>(x[w]) - x[j] : static_cast<double>(x[j]) - x[w];
        if (!(gap > static_cast<double>(ex[w]) + ex[j])) e.f[out] = kInf;
      }
    }
  set(r, e, acc);
}

void unfollowed(const Value &a, const Value &b, Value &r) {
  const DType acc = acc_of(a, b);
  if (exact(a) && exact(b)) return set_exact(r, acc);
  set(r, unbounded_where_inexact(a, b, r.shape), acc);
}

} // namespace error_bound
} // namespace pipecheck::executor
