#include "executor/value.hpp"

#include "executor/error_bound.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

namespace pipecheck::executor {

using spec::DType;

Value Value::scalar_float(double v, DType t, bool weak) {
  Value r;
  r.dtype = t;
  r.weak = weak;
  r.f = {round_to(t, static_cast<float>(v))};
  return r;
}

Value Value::scalar_int(std::int64_t v, DType t, bool weak) {
  Value r;
  r.dtype = t;
  r.weak = weak;
  r.i = {wrap_to(t, v)};
  return r;
}

namespace {

constexpr std::size_t kCacheMin = 64 * 1024;
constexpr std::size_t kCacheEntries = 32;

struct BlockCache {
  std::vector<std::pair<std::size_t, void *>> free;
  ~BlockCache() {
    for (auto &[n, p] : free)
      ::operator delete(p);
  }
};
thread_local BlockCache block_cache;

} // namespace

void *block_alloc(std::size_t bytes) {
  if (bytes >= kCacheMin) {
    auto &f = block_cache.free;
    for (std::size_t k = 0; k < f.size(); ++k)
      if (f[k].first == bytes) {
        void *p = f[k].second;
        f[k] = f.back();
        f.pop_back();
        return p;
      }
  }
  return ::operator new(bytes);
}

void block_free(void *p, std::size_t bytes) {
  if (bytes >= kCacheMin) {
    auto &f = block_cache.free;
    if (f.size() == kCacheEntries) {
      ::operator delete(f.front().second);
      f.erase(f.begin());
    }
    f.emplace_back(bytes, p);
    return;
  }
  ::operator delete(p);
}

namespace {

[[noreturn]] void bad(spec::Loc loc, const std::string &msg) {
  throw ExecError(ExecError::Kind::bad_input, loc, msg);
}

void round_all(DType t, FloatVec &v) {
  if (t == DType::bf16)
    for (auto &x : v)
      x = bf16_to_f32(f32_to_bf16(x));
  else if (t == DType::f16)
    for (auto &x : v)
      x = f16_to_f32(f32_to_f16(x));
}

void wrap_all(DType t, IntVec &v) {
  if (t == DType::i32) return;
  for (auto &x : v)
    x = wrap_to(t, x);
}

/// a's numbers as floats: a.f itself, or a conversion kept in `tmp`.
const FloatVec &as_floats(const Value &a, FloatVec &tmp) {
  if (a.is_float()) return a.f;
  tmp.assign(a.i.begin(), a.i.end());
  return tmp;
}
FloatVec as_floats(const Value &a) {
  FloatVec tmp;
  return as_floats(a, tmp);
}

spec::TensorType checked(const spec::Typed<spec::TensorType> &t, spec::Loc loc) {
  if (!t.ok()) bad(loc, t.error);
  return t.value;
}

/// Strides (in elements) of `s` seen as broadcast to `out`: 0 on broadcast dims.
Shape bcast_strides(const Shape &s, const Shape &out) {
  Shape st(out.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const std::size_t d = s.size() - 1 - k;
    const std::size_t o = out.size() - 1 - k;
    st[o] = s[d] == 1 ? 0 : stride;
    stride *= s[d];
  }
  return st;
}

/// o = f(a, b) with broadcasting; `o` may be `a` itself when a has the output's size.
template <class V, class O, class F>
void map2(const V &a, const Shape &as, const V &b, const Shape &bs, const Shape &out, O &o, F f) {
  using T = typename V::value_type;
  const std::int64_t n = num_elements(out);
  o.resize(static_cast<std::size_t>(n));
  const std::int64_t na = num_elements(as), nb = num_elements(bs);
  if (na == n && nb == n) {
    for (std::int64_t k = 0; k < n; ++k)
      o[k] = f(a[k], b[k]);
  } else if (na == 1 && nb == n) {
    const T x = a[0];
    for (std::int64_t k = 0; k < n; ++k)
      o[k] = f(x, b[k]);
  } else if (nb == 1 && na == n) {
    const T y = b[0];
    for (std::int64_t k = 0; k < n; ++k)
      o[k] = f(a[k], y);
  } else {
    const Shape sa = bcast_strides(as, out), sb = bcast_strides(bs, out);
    const int r = static_cast<int>(out.size());
    std::vector<std::int64_t> idx(r, 0);
    std::int64_t ia = 0, ib = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      o[k] = f(a[ia], b[ib]);
      for (int d = r - 1; d >= 0; --d) {
        ia += sa[d];
        ib += sb[d];
        if (++idx[d] < out[d]) break;
        ia -= sa[d] * out[d];
        ib -= sb[d] * out[d];
        idx[d] = 0;
      }
    }
  }
}

// NaN wins; of two zeros, max is +0 and min -0 (IEEE maximum/minimum, as XLA's).
float fmax_nan(float a, float b) {
  if (a == b) return std::signbit(a) ? b : a;
  return (a > b || std::isnan(a)) ? a : b;
}
float fmin_nan(float a, float b) {
  if (a == b) return std::signbit(a) ? a : b;
  return (a < b || std::isnan(a)) ? a : b;
}

std::int64_t ifloordiv(std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t ifloormod(std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  std::int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

} // namespace

Value load(const View &v) {
  Value r;
  r.dtype = v.dtype();
  r.shape = v.shape();
  const std::int64_t n = v.size();
  const std::byte *base = v.array->data();
  std::int64_t pos = 0;
  switch (r.dtype) {
  case DType::f32:
    r.f.resize(static_cast<std::size_t>(n));
    v.for_each_run([&](std::int64_t off, std::int64_t len) {
      std::memcpy(r.f.data() + pos, base + off * 4, static_cast<std::size_t>(len * 4));
      pos += len;
    });
    break;
  case DType::bf16:
  case DType::f16: {
    r.f.resize(static_cast<std::size_t>(n));
    const bool bf = r.dtype == DType::bf16;
    v.for_each_run([&](std::int64_t off, std::int64_t len) {
      const auto *p = reinterpret_cast<const std::uint16_t *>(base) + off;
      for (std::int64_t k = 0; k < len; ++k)
        r.f[pos + k] = bf ? bf16_to_f32(p[k]) : f16_to_f32(p[k]);
      pos += len;
    });
    break;
  }
  case DType::i32:
    r.i.resize(static_cast<std::size_t>(n));
    v.for_each_run([&](std::int64_t off, std::int64_t len) {
      std::memcpy(r.i.data() + pos, base + off * 4, static_cast<std::size_t>(len * 4));
      pos += len;
    });
    break;
  default:
    r.i.resize(static_cast<std::size_t>(n));
    v.for_each_run([&](std::int64_t off, std::int64_t len) {
      for (std::int64_t k = 0; k < len; ++k)
        r.i[pos + k] = static_cast<std::int32_t>(v.array->get(off + k));
      pos += len;
    });
  }
  return r;
}

void store(const Value &v0, const View &dst, spec::Loc loc) {
  const Shape shape = dst.shape();
  const DType t = dst.dtype();
  const bool same = v0.shape == shape && v0.dtype == t;
  Value tmp;
  if (!same) {
    if (auto err = spec::store_error(v0.type(), shape); !err.empty()) bad(loc, err);
    tmp = v0.dtype == t ? v0 : cast(v0, t);
    if (tmp.shape != shape && tmp.size() != 1) tmp = broadcast_to(tmp, shape, loc);
  }
  const Value &v = same ? v0 : tmp;
  const bool splat = v.size() == 1 && dst.size() != 1;
  std::byte *base = dst.array->data();
  std::int64_t pos = 0;
  dst.for_each_run([&](std::int64_t off, std::int64_t len) {
    switch (t) {
    case DType::f32: {
      float *p = reinterpret_cast<float *>(base) + off;
      if (splat)
        std::fill(p, p + len, v.f[0]);
      else
        std::memcpy(p, v.f.data() + pos, static_cast<std::size_t>(len * 4));
      break;
    }
    case DType::bf16:
    case DType::f16: {
      auto *p = reinterpret_cast<std::uint16_t *>(base) + off;
      const bool bf = t == DType::bf16;
      for (std::int64_t k = 0; k < len; ++k) {
        const float x = v.f[splat ? 0 : pos + k];
        p[k] = bf ? f32_to_bf16(x) : f32_to_f16(x);
      }
      break;
    }
    case DType::i32: {
      auto *p = reinterpret_cast<std::int32_t *>(base) + off;
      if (splat)
        std::fill(p, p + len, v.i[0]);
      else
        std::memcpy(p, v.i.data() + pos, static_cast<std::size_t>(len * 4));
      break;
    }
    default:
      for (std::int64_t k = 0; k < len; ++k)
        dst.array->set(off + k, v.i[splat ? 0 : pos + k]);
    }
    pos += len;
  });
}

DType promote(const Value &a, const Value &b) {
  return spec::promote_dtype(a.dtype, a.weak, b.dtype, b.weak);
}

namespace {

/// The body of both binary overloads; `r` may hold a's storage (in place).
void binary_into(BinOp op, const Value &a, const Value &b, Value &r, spec::Loc loc) {
  spec::TensorType t = checked(spec::elementwise_type(op, a.type(), b.type()), loc);
  r.shape = std::move(t.shape);
  r.dtype = t.dtype;
  r.weak = t.weak;
  if (spec::dtype_is_float(r.dtype)) {
    FloatVec ta, tb;
    const FloatVec &fa = as_floats(a, ta);
    const FloatVec &fb = as_floats(b, tb);
    switch (op) {
    case BinOp::add:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) { return x + y; });
      break;
    case BinOp::sub:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) { return x - y; });
      break;
    case BinOp::mul:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) { return x * y; });
      break;
    case BinOp::div:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) { return x / y; });
      break;
    case BinOp::floordiv:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) { return std::floor(x / y); });
      break;
    case BinOp::mod:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) {
        float m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return m;
      });
      break;
    case BinOp::maximum: map2(fa, a.shape, fb, b.shape, r.shape, r.f, fmax_nan); break;
    case BinOp::minimum: map2(fa, a.shape, fb, b.shape, r.shape, r.f, fmin_nan); break;
    case BinOp::pow:
      map2(fa, a.shape, fb, b.shape, r.shape, r.f, [](float x, float y) { return std::pow(x, y); });
      break;
    case BinOp::bit_and: // floats are rejected by the typing rule
    case BinOp::bit_or: break;
    }
    round_all(r.dtype, r.f);
  } else {
    auto wrap = [](std::int64_t x) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(x)); };
    switch (op) {
    case BinOp::add:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i,
           [&](std::int32_t x, std::int32_t y) { return wrap(std::int64_t{x} + y); });
      break;
    case BinOp::sub:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i,
           [&](std::int32_t x, std::int32_t y) { return wrap(std::int64_t{x} - y); });
      break;
    case BinOp::mul:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i,
           [&](std::int32_t x, std::int32_t y) { return wrap(std::int64_t{x} * y); });
      break;
    case BinOp::div: // promoted to f32 above
      break;
    case BinOp::floordiv: {
      // By zero as jnp's floor_divide gives it: XLA's x / 0 (-1, all ones
      // unsigned), then one less where x's sign is not 0's (x != 0, signed).
      const bool is_unsigned = r.dtype == DType::u8;
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i, [&](std::int32_t x, std::int32_t y) {
        if (y == 0) return wrap(is_unsigned || x == 0 ? -1 : -2);
        return wrap(ifloordiv(x, y));
      });
      break;
    }
    case BinOp::mod:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i,
           [&](std::int32_t x, std::int32_t y) { return wrap(ifloormod(x, y)); });
      break;
    case BinOp::maximum:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i,
           [](std::int32_t x, std::int32_t y) { return std::max(x, y); });
      break;
    case BinOp::minimum:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i,
           [](std::int32_t x, std::int32_t y) { return std::min(x, y); });
      break;
    case BinOp::pow:
      // Integer powers wrap like repeated multiplication; a negative
      // exponent gives 0 except for bases 1 and -1.
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i, [&](std::int32_t x, std::int32_t y) {
        if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
        std::uint32_t p = 1, base = static_cast<std::uint32_t>(x);
        for (std::uint32_t e = static_cast<std::uint32_t>(y); e; e >>= 1, base *= base)
          if (e & 1) p *= base;
        return static_cast<std::int32_t>(p);
      });
      break;
    case BinOp::bit_and:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i, [](std::int32_t x, std::int32_t y) { return x & y; });
      break;
    case BinOp::bit_or:
      map2(a.i, a.shape, b.i, b.shape, r.shape, r.i, [](std::int32_t x, std::int32_t y) { return x | y; });
      break;
    }
    wrap_all(r.dtype, r.i);
  }
}

} // namespace

Value binary(BinOp op, const Value &a, const Value &b, spec::Loc loc) {
  Value r;
  binary_into(op, a, b, r, loc);
  if (a.bound.on || b.bound.on) error_bound::binary(op, a, b, r);
  return r;
}

Value binary(BinOp op, Value &&a, const Value &b, spec::Loc loc) {
  const spec::TensorType t = checked(spec::elementwise_type(op, a.type(), b.type()), loc);
  // (A bound needs the operands as they were.)
  if (spec::dtype_is_float(t.dtype) != a.is_float() || t.shape != a.shape || a.bound.on || b.bound.on)
    return binary(op, static_cast<const Value &>(a), b, loc);
  // Elementwise in place: o[k] depends only on a[k] and b's k-th element.
  binary_into(op, a, b, a, loc);
  return std::move(a);
}

Value unary(UnOp op, const Value &a, spec::Loc loc) {
  const spec::TensorType t = checked(spec::unary_type(op, a.type()), loc);
  Value r;
  r.shape = a.shape;
  r.weak = a.weak;
  r.dtype = t.dtype;
  if (!spec::dtype_is_float(t.dtype)) {
    r.i = a.i;
    for (auto &x : r.i) {
      const auto u = static_cast<std::uint32_t>(x);
      if (op == UnOp::floor || op == UnOp::ceil || op == UnOp::round)
        continue; // an integer is its own floor (jnp keeps the integer dtype)
      else if (op == UnOp::sign)
        x = a.dtype == DType::boolean ? x : (x > 0) - (x < 0);
      else if (op == UnOp::neg)
        x = static_cast<std::int32_t>(0u - u);
      else if (op == UnOp::abs)
        x = x < 0 ? static_cast<std::int32_t>(0u - u) : x;
      else if (a.dtype == DType::boolean)
        x = !x;
      else
        x = static_cast<std::int32_t>(~u);
    }
    wrap_all(r.dtype, r.i);
    if (a.bound.on) error_bound::unary(op, a, r);
    return r;
  }
  r.f = as_floats(a);
  auto apply = [&](auto f) {
    for (auto &x : r.f)
      x = f(x);
  };
  switch (op) {
  case UnOp::neg: apply([](float x) { return -x; }); break;
  case UnOp::abs: apply([](float x) { return std::fabs(x); }); break;
  case UnOp::exp: apply([](float x) { return std::exp(x); }); break;
  case UnOp::sqrt: apply([](float x) { return std::sqrt(x); }); break;
  case UnOp::rsqrt: apply([](float x) { return 1.0f / std::sqrt(x); }); break;
  case UnOp::log: apply([](float x) { return std::log(x); }); break;
  case UnOp::log2: apply([](float x) { return std::log2(x); }); break;
  case UnOp::exp2: apply([](float x) { return std::exp2(x); }); break;
  case UnOp::tanh: apply([](float x) { return std::tanh(x); }); break;
  case UnOp::bit_not: break; // rejected by the typing rule
  case UnOp::sin: apply([](float x) { return std::sin(x); }); break;
  case UnOp::cos: apply([](float x) { return std::cos(x); }); break;
  case UnOp::erf: apply([](float x) { return std::erf(x); }); break;
  case UnOp::erfc: apply([](float x) { return std::erfc(x); }); break;
  case UnOp::floor: apply([](float x) { return std::floor(x); }); break;
  case UnOp::ceil: apply([](float x) { return std::ceil(x); }); break;
  // jnp.round rounds half to even: the default floating-point rounding mode.
  case UnOp::round: apply([](float x) { return std::nearbyint(x); }); break;
  // lax.sign keeps -0, +0 and NaN as they are.
  case UnOp::sign: apply([](float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x; }); break;
  case UnOp::sigmoid: apply([](float x) { return 1.0f / (1.0f + std::exp(-x)); }); break;
  case UnOp::expm1: apply([](float x) { return std::expm1(x); }); break;
  case UnOp::log1p: apply([](float x) { return std::log1p(x); }); break;
  case UnOp::tan: apply([](float x) { return std::tan(x); }); break;
  case UnOp::asin: apply([](float x) { return std::asin(x); }); break;
  case UnOp::acos: apply([](float x) { return std::acos(x); }); break;
  case UnOp::atan: apply([](float x) { return std::atan(x); }); break;
  case UnOp::sinh: apply([](float x) { return std::sinh(x); }); break;
  case UnOp::cosh: apply([](float x) { return std::cosh(x); }); break;
  case UnOp::asinh: apply([](float x) { return std::asinh(x); }); break;
  case UnOp::acosh: apply([](float x) { return std::acosh(x); }); break;
  case UnOp::atanh: apply([](float x) { return std::atanh(x); }); break;
  case UnOp::cbrt: apply([](float x) { return std::cbrt(x); }); break;
  }
  round_all(r.dtype, r.f);
  if (a.bound.on) error_bound::unary(op, a, r);
  return r;
}

Value compare(spec::CompareOp op, const Value &a, const Value &b, spec::Loc loc) {
  const spec::TensorType t = checked(spec::compare_type(a.type(), b.type()), loc);
  Value r;
  r.dtype = DType::boolean;
  r.shape = t.shape;
  auto run = [&](const auto &x, const auto &y) {
    using T = typename std::decay_t<decltype(x)>::value_type;
    map2(x, a.shape, y, b.shape, r.shape, r.i, [op](T u, T v) -> std::int32_t {
      switch (op) {
      case spec::CompareOp::eq: return u == v;
      case spec::CompareOp::ne: return u != v;
      case spec::CompareOp::lt: return u < v;
      case spec::CompareOp::le: return u <= v;
      case spec::CompareOp::gt: return u > v;
      case spec::CompareOp::ge: return u >= v;
      }
      return 0;
    });
  };
  if (spec::dtype_is_float(promote(a, b))) {
    FloatVec ta, tb;
    run(as_floats(a, ta), as_floats(b, tb));
  } else {
    run(a.i, b.i);
  }
  if (a.bound.on || b.bound.on) error_bound::compare(op, a, b, r);
  return r;
}

Value where(const Value &c, const Value &a, const Value &b, spec::Loc loc) {
  const spec::TensorType t = checked(spec::where_type(c.type(), a.type(), b.type()), loc);
  auto as = [&](const Value &v) {
    Value x = v.dtype == t.dtype ? v : cast(v, t.dtype);
    return broadcast_to(x, t.shape, loc);
  };
  const Value x = as(a), y = as(b);
  const Value m = broadcast_to(
      c.is_float() ? compare(spec::CompareOp::ne, c, Value::scalar_float(0), loc) : c, t.shape, loc);
  Value r;
  r.dtype = t.dtype;
  r.weak = t.weak;
  r.shape = t.shape;
  const auto n = static_cast<std::size_t>(num_elements(t.shape));
  if (spec::dtype_is_float(t.dtype)) {
    r.f.resize(n);
    for (std::size_t k = 0; k < n; ++k)
      r.f[k] = m.i[k] ? x.f[k] : y.f[k];
  } else {
    r.i.resize(n);
    for (std::size_t k = 0; k < n; ++k)
      r.i[k] = m.i[k] ? x.i[k] : y.i[k];
  }
  if (m.bound.on || x.bound.on || y.bound.on) error_bound::where(m, x, y, r);
  return r;
}

Value iota(DType dt, const Shape &shape, std::int64_t dim, spec::Loc loc) {
  const spec::TensorType t = checked(spec::iota_type(dt, shape, dim), loc);
  Value r;
  r.dtype = t.dtype;
  r.shape = t.shape;
  std::int64_t inner = 1;
  for (std::size_t d = static_cast<std::size_t>(dim) + 1; d < shape.size(); ++d)
    inner *= shape[d];
  const std::int64_t len = shape[static_cast<std::size_t>(dim)], n = num_elements(shape);
  r.i.resize(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k)
    r.i[static_cast<std::size_t>(k)] = wrap_to(dt, (k / inner) % len);
  return r;
}

Value reshape(const Value &a, const Shape &shape, spec::Loc loc) {
  const spec::TensorType t = checked(spec::reshape_type(a.type(), shape), loc);
  Value r = a;
  r.shape = t.shape;
  return r;
}

Value index(const Value &a, const std::vector<spec::ValueSubscript> &subs, spec::Loc loc) {
  const spec::ValueIndexed v = spec::index_value(a.shape, subs);
  if (!v.ok())
    throw ExecError(v.part.out_of_bounds ? ExecError::Kind::fault : ExecError::Kind::bad_input, loc, v.error);
  Value r;
  r.dtype = a.dtype;
  r.weak = a.weak;
  r.shape = v.shape;
  // The kept part in row-major order; new axes (extent 1) do not move elements.
  const std::size_t rank = a.shape.size();
  Shape strides(rank, 1);
  for (std::size_t d = rank; d-- > 1;)
    strides[d - 1] = strides[d] * a.shape[d];
  const std::int64_t n = num_elements(v.shape);
  std::vector<std::int64_t> idx(rank);
  for (std::size_t d = 0; d < rank; ++d)
    idx[d] = v.part.dims[d].lo;
  auto gather = [&](auto &out, const auto &in) {
    out.resize(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < rank; ++d)
        off += idx[d] * strides[d];
      out[static_cast<std::size_t>(k)] = in[static_cast<std::size_t>(off)];
      for (std::size_t d = rank; d-- > 0;) {
        if (++idx[d] < v.part.dims[d].hi) break;
        idx[d] = v.part.dims[d].lo;
      }
    }
  };
  if (a.is_float())
    gather(r.f, a.f);
  else
    gather(r.i, a.i);
  error_bound::moved(a, r, [&](const Value &e) { return index(e, subs, loc); });
  return r;
}

Value cast(const Value &a, DType t) {
  Value r;
  const spec::TensorType ty = spec::cast_type(a.type(), t);
  r.dtype = ty.dtype;
  r.shape = ty.shape;
  if (spec::dtype_is_float(t)) {
    r.f = as_floats(a);
    round_all(t, r.f);
  } else if (a.is_float()) {
    r.i.resize(a.f.size());
    const auto [lo, hi] = spec::exact_int_range(t);
    for (std::size_t k = 0; k < a.f.size(); ++k) {
      const float x = a.f[k];
      if (std::isnan(x))
        r.i[k] = int_poison(t);
      else if (t == DType::boolean)
        r.i[k] = x != 0;
      else // (XLA's convert: truncated, then saturated at the dtype's range)
        r.i[k] = static_cast<std::int32_t>(
            std::clamp(static_cast<double>(x), static_cast<double>(lo), static_cast<double>(hi)));
    }
  } else {
    r.i = a.i;
    wrap_all(t, r.i);
  }
  if (a.bound.on) error_bound::cast(a, r);
  return r;
}

Value broadcast_to(const Value &a, const Shape &shape, spec::Loc loc) {
  if (a.shape == shape) return a;
  if (auto err = spec::fit_error(a.shape, shape); !err.empty()) bad(loc, err);
  Value r;
  r.dtype = a.dtype;
  r.weak = a.weak;
  r.shape = shape;
  if (a.is_float()) {
    FloatVec zero(1, 0.0f);
    map2(a.f, a.shape, zero, Shape{}, shape, r.f, [](float x, float) { return x; });
  } else {
    IntVec zero(1, 0);
    map2(a.i, a.shape, zero, Shape{}, shape, r.i, [](std::int32_t x, std::int32_t) { return x; });
  }
  error_bound::moved(a, r, [&](const Value &e) { return broadcast_to(e, shape, loc); });
  return r;
}

Value tile(const Value &a, const Shape &reps, spec::Loc loc) {
  const spec::TensorType t = checked(spec::tile_type(a.type(), reps), loc);
  const std::size_t rank = t.shape.size();
  Shape in(rank, 1);
  for (std::size_t d = 0; d < a.shape.size(); ++d)
    in[rank - a.shape.size() + d] = a.shape[d];
  Value r;
  r.dtype = a.dtype;
  r.weak = a.weak;
  r.shape = t.shape;
  const std::int64_t n = num_elements(r.shape);
  if (a.is_float())
    r.f.resize(static_cast<std::size_t>(n));
  else
    r.i.resize(static_cast<std::size_t>(n));
  std::vector<std::int64_t> idx(rank, 0);
  for (std::int64_t k = 0; k < n; ++k) {
    // The source element: each output coordinate modulo a's (padded) extent.
    std::int64_t src = 0;
    for (std::size_t d = 0; d < rank; ++d)
      src = src * in[d] + idx[d] % in[d];
    if (a.is_float())
      r.f[static_cast<std::size_t>(k)] = a.f[static_cast<std::size_t>(src)];
    else
      r.i[static_cast<std::size_t>(k)] = a.i[static_cast<std::size_t>(src)];
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < r.shape[d]) break;
      idx[d] = 0;
    }
  }
  error_bound::moved(a, r, [&](const Value &e) { return tile(e, reps, loc); });
  return r;
}

Value dot(const Value &a0, const Value &b0, spec::Loc loc, const spec::DotOptions &opts) {
  if (opts.trans_a || opts.trans_b || opts.preferred) {
    checked(spec::dot_type(a0.type(), b0.type(), opts), loc);
    Value r = dot(opts.trans_a ? transpose(a0) : a0, opts.trans_b ? transpose(b0) : b0, loc);
    return opts.preferred && *opts.preferred != r.dtype ? cast(r, *opts.preferred) : r;
  }
  const Value &a = a0, &b = b0;
  const spec::TensorType t = checked(spec::dot_type(a.type(), b.type()), loc);
  const std::int64_t m = a.shape.size() == 2 ? a.shape[0] : 1;
  const std::int64_t k = a.shape.back();
  const std::int64_t n = b.shape.size() == 2 ? b.shape[1] : 1;
  Value r;
  r.shape = t.shape;
  using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMajorI = Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  r.dtype = t.dtype;
  if (spec::dtype_is_float(t.dtype)) {
    FloatVec ta, tb;
    const FloatVec &fa = as_floats(a, ta);
    const FloatVec &fb = as_floats(b, tb);
    Eigen::Map<const RowMajorF> A(fa.data(), m, k), B(fb.data(), k, n);
    r.f.resize(static_cast<std::size_t>(m * n));
    Eigen::Map<RowMajorF> C(r.f.data(), m, n);
    C.noalias() = A * B;
  } else {
    RowMajorI A(m, k), B(k, n);
    for (std::int64_t x = 0; x < m * k; ++x)
      A.data()[x] = a.i[x];
    for (std::int64_t x = 0; x < k * n; ++x)
      B.data()[x] = b.i[x];
    RowMajorI C = A * B;
    r.i.resize(static_cast<std::size_t>(m * n));
    for (std::int64_t x = 0; x < m * n; ++x)
      r.i[x] = wrap_to(DType::i32, C.data()[x]);
  }
  if (a.bound.on || b.bound.on) error_bound::dot(a, b, r);
  return r;
}

namespace {

// a with its dims in the order `perm` (output dim j is input dim perm[j]).
Value permuted(const Value &a, const std::vector<std::size_t> &perm) {
  const std::size_t rank = a.shape.size();
  Shape strides(rank, 1);
  for (std::size_t d = rank; d-- > 1;)
    strides[d - 1] = strides[d] * a.shape[d];
  Value r;
  r.dtype = a.dtype;
  r.weak = a.weak;
  for (auto p : perm)
    r.shape.push_back(a.shape[p]);
  const std::int64_t n = a.size();
  auto run = [&](auto &out, const auto &in) {
    out.resize(static_cast<std::size_t>(n));
    std::vector<std::int64_t> idx(rank, 0);
    for (std::int64_t k = 0; k < n; ++k) {
      std::int64_t src = 0;
      for (std::size_t j = 0; j < rank; ++j)
        src += idx[j] * strides[perm[j]];
      out[static_cast<std::size_t>(k)] = in[static_cast<std::size_t>(src)];
      for (std::size_t j = rank; j-- > 0;) {
        if (++idx[j] < r.shape[j]) break;
        idx[j] = 0;
      }
    }
  };
  if (a.is_float())
    run(r.f, a.f);
  else
    run(r.i, a.i);
  error_bound::moved(a, r, [&](const Value &e) { return permuted(e, perm); });
  return r;
}

// Rows [k * rows, (k + 1) * rows) of a's flat data as a rows x cols matrix.
Value matrix_slice(const Value &a, std::int64_t k, std::int64_t rows, std::int64_t cols) {
  Value r;
  r.dtype = a.dtype;
  r.weak = a.weak;
  r.shape = {rows, cols};
  const auto from = static_cast<std::ptrdiff_t>(k * rows * cols), to = from + rows * cols;
  if (a.is_float())
    r.f.assign(a.f.begin() + from, a.f.begin() + to);
  else
    r.i.assign(a.i.begin() + from, a.i.begin() + to);
  error_bound::moved(a, r, [&](const Value &e) { return matrix_slice(e, k, rows, cols); });
  return r;
}

} // namespace

Value dot_general(const Value &a, const Value &b, const spec::DotDims &d, spec::Loc loc,
                  std::optional<DType> preferred) {
  const spec::TensorType t = checked(spec::dot_general_type(a.type(), b.type(), d, preferred), loc);
  // a as [batch, free, contract] and b as [batch, contract, free]: one 2-D
  // dot per batch element.
  auto order = [](std::size_t rank, const std::vector<std::int64_t> &batch,
                  const std::vector<std::int64_t> &con, bool free_first) {
    std::vector<bool> used(rank);
    std::vector<std::size_t> perm, free;
    for (auto x : batch)
      used[static_cast<std::size_t>(x)] = true, perm.push_back(static_cast<std::size_t>(x));
    for (auto x : con)
      used[static_cast<std::size_t>(x)] = true;
    for (std::size_t i = 0; i < rank; ++i)
      if (!used[i]) free.push_back(i);
    auto add = [&](const auto &v) {
      for (auto x : v)
        perm.push_back(static_cast<std::size_t>(x));
    };
    if (free_first)
      add(free), add(con);
    else
      add(con), add(free);
    return perm;
  };
  auto extent = [](const Value &v, const std::vector<std::int64_t> &dims) {
    std::int64_t n = 1;
    for (auto x : dims)
      n *= v.shape[static_cast<std::size_t>(x)];
    return n;
  };
  const Value pa = permuted(a, order(a.shape.size(), d.lhs_batch, d.lhs_contract, true));
  const Value pb = permuted(b, order(b.shape.size(), d.rhs_batch, d.rhs_contract, false));
  const std::int64_t batch = extent(a, d.lhs_batch), k = extent(a, d.lhs_contract);
  const std::int64_t m = batch * k == 0 ? 0 : a.size() / (batch * k);
  const std::int64_t n = batch * k == 0 ? 0 : b.size() / (batch * k);
  Value r;
  r.shape = t.shape;
  r.dtype = dtype_is_float(a.dtype) || dtype_is_float(b.dtype) ? DType::f32 : DType::i32;
  // (The batches' bounds, where the operands are tracked: zeros for an exact one.)
  if (a.bound.on || b.bound.on) r.bound = a.bound.on ? a.bound : b.bound, r.bound.e.clear();
  bool inexact = false;
  for (std::int64_t i = 0; i < batch && m > 0 && n > 0; ++i) {
    const Value c = dot(matrix_slice(pa, i, m, k), matrix_slice(pb, i, k, n), loc);
    r.f.insert(r.f.end(), c.f.begin(), c.f.end());
    r.i.insert(r.i.end(), c.i.begin(), c.i.end());
    if (!c.bound.on) continue;
    if (c.bound.e.empty())
      r.bound.e.insert(r.bound.e.end(), static_cast<std::size_t>(c.size()), 0.0f);
    else
      r.bound.e.insert(r.bound.e.end(), c.bound.e.begin(), c.bound.e.end());
    inexact = inexact || !c.bound.e.empty();
  }
  if (!inexact) r.bound.e.clear();
  // An empty contraction sums nothing.
  if (k == 0) {
    if (r.is_float())
      r.f.assign(static_cast<std::size_t>(num_elements(r.shape)), 0.0f);
    else
      r.i.assign(static_cast<std::size_t>(num_elements(r.shape)), 0);
    r.bound.e.clear();
  }
  return preferred && *preferred != r.dtype ? cast(r, *preferred) : r;
}

Value transpose(const Value &a) {
  const spec::TensorType t = spec::transpose_type(a.type());
  const std::size_t rank = a.shape.size();
  if (rank < 2) return a;
  // Output dim j is input dim rank - 1 - j: dot_general's permutation, reversed.
  std::vector<std::size_t> perm(rank);
  for (std::size_t j = 0; j < rank; ++j)
    perm[j] = rank - 1 - j;
  Value r = permuted(a, perm);
  r.dtype = t.dtype;
  r.weak = t.weak;
  r.shape = t.shape;
  return r;
}

namespace {

/// A value of a's dtype whose element at each multi-index `idx` of `shape` is
/// a's element number src(idx): the element moves of roll and flip.
template <class Src> Value moved(const Value &a, const Shape &shape, Src src) {
  Value r;
  r.dtype = a.dtype;
  r.weak = a.weak;
  r.shape = shape;
  const std::int64_t n = num_elements(shape);
  if (a.is_float())
    r.f.resize(static_cast<std::size_t>(n));
  else
    r.i.resize(static_cast<std::size_t>(n));
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    const auto from = static_cast<std::size_t>(src(idx));
    if (a.is_float())
      r.f[static_cast<std::size_t>(k)] = a.f[from];
    else
      r.i[static_cast<std::size_t>(k)] = a.i[from];
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  error_bound::moved(a, r, [&](const Value &e) { return moved(e, shape, src); });
  return r;
}

/// The flat index of `idx` in `shape`, row-major.
std::int64_t flat_index(const Shape &shape, const std::vector<std::int64_t> &idx) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + idx[d];
  return f;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t n) { return n == 0 ? 0 : ((a % n) + n) % n; }

using spec::AxisLines;
using spec::lines_around;

} // namespace

Value concatenate(const std::vector<Value> &parts, std::int64_t axis, spec::Loc loc) {
  std::vector<spec::TensorType> types;
  for (const auto &p : parts)
    types.push_back(p.type());
  const spec::TensorType t = checked(spec::concatenate_type(types, axis), loc);
  const std::int64_t ax = spec::normalize_axis(axis, t.shape.size());
  Value r;
  r.dtype = t.dtype;
  r.weak = t.weak;
  r.shape = t.shape;
  const AxisLines out = lines_around(r.shape, ax);
  if (r.is_float())
    r.f.resize(static_cast<std::size_t>(r.size()));
  else
    r.i.resize(static_cast<std::size_t>(r.size()));
  std::int64_t at = 0; // where along the axis the part starts
  for (const auto &p : parts) {
    const AxisLines l = lines_around(p.shape, ax);
    const std::int64_t run = l.len * l.inner; // one outer row of the part, contiguous in both
    for (std::int64_t o = 0; o < l.outer; ++o) {
      const auto from = static_cast<std::size_t>(o * run),
                 to = static_cast<std::size_t>((o * out.len + at) * out.inner);
      if (r.is_float())
        std::copy_n(p.f.begin() + from, run, r.f.begin() + to);
      else
        std::copy_n(p.i.begin() + from, run, r.i.begin() + to);
    }
    at += l.len;
  }
  // The parts' bounds, concatenated as their elements are.
  if (std::any_of(parts.begin(), parts.end(), [](const Value &p) { return p.bound.on; })) {
    const auto tracked = std::find_if(parts.begin(), parts.end(), [](const Value &p) { return p.bound.on; });
    r.bound = tracked->bound;
    r.bound.e.clear();
    if (std::any_of(parts.begin(), parts.end(), [](const Value &p) { return !p.bound.e.empty(); })) {
      std::vector<Value> bounds;
      for (const auto &p : parts)
        bounds.push_back(error_bound::as_value(p));
      r.bound.e = concatenate(bounds, axis, loc).f;
    }
  }
  return r;
}

Value roll(const Value &a, std::int64_t shift, std::int64_t axis,
           std::optional<std::pair<std::int64_t, std::int64_t>> stride, spec::Loc loc) {
  checked(spec::along_axis_type(a.type(), axis, "roll"), loc);
  const auto ax = static_cast<std::size_t>(spec::normalize_axis(axis, a.shape.size()));
  std::optional<std::size_t> sax;
  if (stride) sax = static_cast<std::size_t>(spec::normalize_axis(stride->second, a.shape.size()));
  std::vector<std::int64_t> from;
  return moved(a, a.shape, [&](const std::vector<std::int64_t> &idx) {
    from = idx;
    const std::int64_t s = shift + (sax ? idx[*sax] * stride->first : 0);
    from[ax] = floor_mod(idx[ax] - s, a.shape[ax]);
    return flat_index(a.shape, from);
  });
}

Value flip(const Value &a, std::int64_t axis, spec::Loc loc) {
  checked(spec::along_axis_type(a.type(), axis, "flip"), loc);
  const auto ax = static_cast<std::size_t>(spec::normalize_axis(axis, a.shape.size()));
  std::vector<std::int64_t> from;
  return moved(a, a.shape, [&](const std::vector<std::int64_t> &idx) {
    from = idx;
    from[ax] = a.shape[ax] - 1 - idx[ax];
    return flat_index(a.shape, from);
  });
}

Value arg_reduce(bool max, const Value &a, std::int64_t axis, spec::Loc loc) {
  const spec::TensorType t = checked(spec::arg_reduce_type(a.type(), axis), loc);
  const AxisLines l = lines_around(a.shape, spec::normalize_axis(axis, a.shape.size()));
  Value r;
  r.dtype = t.dtype;
  r.shape = t.shape;
  r.i.assign(static_cast<std::size_t>(l.outer * l.inner), 0);
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t in = 0; in < l.inner; ++in) {
      std::int64_t best = 0;
      auto at = [&](std::int64_t k) { return static_cast<std::size_t>((o * l.len + k) * l.inner + in); };
      for (std::int64_t k = 1; k < l.len; ++k) {
        bool better;
        if (a.is_float()) {
          const float x = a.f[at(k)], b = a.f[at(best)];
          better = !std::isnan(b) && (std::isnan(x) || (max ? x > b : x < b));
        } else {
          const std::int64_t x = a.i[at(k)], b = a.i[at(best)];
          better = max ? x > b : x < b;
        }
        if (better) best = k;
      }
      r.i[static_cast<std::size_t>(o * l.inner + in)] = best;
    }
  if (a.bound.on) error_bound::arg_reduce(max, a, axis, r);
  return r;
}

Value cumulative(ReduceOp op, const Value &a, std::int64_t axis, bool reverse, spec::Loc loc) {
  checked(spec::along_axis_type(a.type(), axis, "a cumulative reduction"), loc);
  const AxisLines l = lines_around(a.shape, spec::normalize_axis(axis, a.shape.size()));
  Value r = a;
  r.weak = a.weak;
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t in = 0; in < l.inner; ++in)
      for (std::int64_t step = 1; step < l.len; ++step) {
        const std::int64_t k = reverse ? l.len - 1 - step : step, prev = reverse ? k + 1 : k - 1;
        const auto at = static_cast<std::size_t>((o * l.len + k) * l.inner + in),
                   before = static_cast<std::size_t>((o * l.len + prev) * l.inner + in);
        if (r.is_float()) {
          float &x = r.f[at];
          const float p = r.f[before];
          x = op == ReduceOp::sum ? x + p : op == ReduceOp::max ? fmax_nan(x, p) : fmin_nan(x, p);
        } else {
          const std::int64_t x = r.i[at], p = r.i[before];
          r.i[at] = op == ReduceOp::sum
                        ? wrap_to(r.dtype, x + p)
                        : static_cast<std::int32_t>(op == ReduceOp::max ? std::max(x, p) : std::min(x, p));
        }
      }
  round_all(r.dtype, r.f);
  if (a.bound.on) error_bound::cumulative(op, a, axis, reverse, r);
  return r;
}

Value shift(Shift op, const Value &a, const Value &b, spec::Loc loc) {
  const spec::TensorType t = checked(spec::shift_type(a.type(), b.type()), loc);
  const int bits = spec::dtype_bytes(t.dtype) * 8;
  const bool is_unsigned = t.dtype == DType::u8;
  const std::uint64_t mask = bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
  Value r;
  r.dtype = t.dtype;
  r.weak = t.weak;
  r.shape = t.shape;
  map2(a.i, a.shape, b.i, b.shape, r.shape, r.i, [&](std::int64_t x, std::int64_t n) -> std::int64_t {
    const std::uint64_t u = static_cast<std::uint64_t>(x) & mask;
    // An arithmetic shift fills with the top bit, of an unsigned dtype too
    // (XLA's shift_right_arithmetic: u8 236 >> 2 is 251): the bits read as
    // signed of the same width.
    const std::int64_t sx =
        is_unsigned && bits < 64 && (u >> (bits - 1)) != 0 ? static_cast<std::int64_t>(u | ~mask) : x;
    if (n < 0 || n >= bits) return op == Shift::right_arithmetic && sx < 0 ? wrap_to(t.dtype, -1) : 0;
    switch (op) {
    case Shift::left: return wrap_to(t.dtype, static_cast<std::int64_t>((u << n) & mask));
    case Shift::right_logical: return wrap_to(t.dtype, static_cast<std::int64_t>(u >> n));
    case Shift::right_arithmetic: break;
    }
    return wrap_to(t.dtype, sx >> n); // C++20's >> fills with the sign
  });
  if (a.bound.on || b.bound.on) error_bound::unfollowed(a, b, r);
  return r;
}

Value reduce(ReduceOp op, const Value &a, std::optional<std::int64_t> axis, spec::Loc loc, bool keepdims) {
  const int rank = static_cast<int>(a.shape.size());
  std::int64_t outer = 1, len = a.size(), inner = 1;
  const spec::TensorType t = checked(spec::reduce_type(op, a.type(), axis, keepdims), loc);
  Value r;
  r.dtype = t.dtype;
  r.shape = t.shape;
  if (axis) {
    const std::int64_t ax = spec::normalize_axis(*axis, a.shape.size());
    outer = 1;
    inner = 1;
    for (int d = 0; d < ax; ++d)
      outer *= a.shape[d];
    for (int d = static_cast<int>(ax) + 1; d < rank; ++d)
      inner *= a.shape[d];
    len = a.shape[ax];
  }
  if (a.is_float()) {
    const float inf = std::numeric_limits<float>::infinity();
    r.f.assign(static_cast<std::size_t>(outer * inner), op == ReduceOp::sum   ? 0.0f
                                                        : op == ReduceOp::max ? -inf
                                                                              : inf);
    for (std::int64_t o = 0; o < outer; ++o) {
      float *acc = r.f.data() + o * inner;
      for (std::int64_t k = 0; k < len; ++k) {
        const float *x = a.f.data() + (o * len + k) * inner;
        if (op == ReduceOp::sum)
          for (std::int64_t in = 0; in < inner; ++in)
            acc[in] += x[in];
        else if (op == ReduceOp::max)
          for (std::int64_t in = 0; in < inner; ++in)
            acc[in] = fmax_nan(x[in], acc[in]);
        else
          for (std::int64_t in = 0; in < inner; ++in)
            acc[in] = fmin_nan(x[in], acc[in]);
      }
    }
    round_all(r.dtype, r.f);
  } else {
    std::vector<std::int64_t> acc(static_cast<std::size_t>(outer * inner),
                                  op == ReduceOp::sum   ? 0
                                  : op == ReduceOp::max ? std::numeric_limits<std::int64_t>::min()
                                                        : std::numeric_limits<std::int64_t>::max());
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t k = 0; k < len; ++k)
        for (std::int64_t in = 0; in < inner; ++in) {
          auto &c = acc[o * inner + in];
          const std::int64_t x = a.i[(o * len + k) * inner + in];
          c = op == ReduceOp::sum ? c + x : op == ReduceOp::max ? std::max(c, x) : std::min(c, x);
        }
    r.i.resize(acc.size());
    for (std::size_t k = 0; k < acc.size(); ++k)
      r.i[k] = wrap_to(r.dtype, acc[k]);
  }
  if (a.bound.on) error_bound::reduce(op, a, axis, keepdims, r);
  return r;
}

} // namespace pipecheck::executor
