#include "executor/tensor.hpp"

#include "spec/checked.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pipecheck::executor {

std::int64_t num_elements(const Shape &s) {
  std::int64_t n = 1;
  for (auto d : s)
    n = spec::saturating_mul(n, d);
  return n;
}

std::string shape_string(const Shape &s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i)
    os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

std::uint16_t f32_to_bf16(float f) {
  auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t f32_to_f16(float f) {
  const auto x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;
  if (ax >= 0x477ff000u) // >= 65520 rounds to infinity
    return sign | 0x7c00u;
  if (ax < 0x38800000u) { // below 2^-14: a half subnormal (or zero)
    // a * 2^24 is exact and below 2^10; nearbyint rounds to nearest even.
    const float scaled = std::bit_cast<float>(ax) * 16777216.0f;
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  std::uint32_t m = ax - (112u << 23);
  m += 0xfffu + ((m >> 13) & 1u);
  return sign | static_cast<std::uint16_t>(m >> 13);
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  const std::uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

float round_to(spec::DType t, float v) {
  switch (t) {
  case spec::DType::bf16: return bf16_to_f32(f32_to_bf16(v));
  case spec::DType::f16: return f16_to_f32(f32_to_f16(v));
  default: return v;
  }
}

std::int32_t wrap_to(spec::DType t, std::int64_t v) {
  switch (t) {
  case spec::DType::i16: return static_cast<std::int16_t>(static_cast<std::uint16_t>(v));
  case spec::DType::i8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
  case spec::DType::u8: return static_cast<std::uint8_t>(v);
  case spec::DType::boolean: return v != 0;
  default: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
  }
}

std::int32_t int_poison(spec::DType t) {
  switch (t) {
  case spec::DType::i16: return std::numeric_limits<std::int16_t>::min();
  case spec::DType::i8: return std::numeric_limits<std::int8_t>::min();
  case spec::DType::u8: return 0xff;
  case spec::DType::boolean: return 1;
  default: return std::numeric_limits<std::int32_t>::min();
  }
}

void HostArray::Free::operator()(std::byte *p) const { ::operator delete[](p, std::align_val_t{64}); }

HostArray::HostArray(std::string name, spec::DType t, Shape shape)
    : name_(std::move(name)), dtype_(t), shape_(std::move(shape)), elem_bytes_(spec::dtype_bytes(t)) {
  for (auto d : shape_)
    if (d < 0) throw std::length_error("HostArray " + name_ + ": negative extent in " + shape_string(shape_));
  // Strides, the element count and the byte size must all be exact: every
  // offset computed from them is then in range.
  const auto total = spec::checked_bytes(shape_, elem_bytes_);
  if (!total)
    throw std::length_error("HostArray " + name_ + ": " + shape_string(shape_) + " does not fit in 64 bits");
  strides_.assign(shape_.size(), 1);
  for (int d = static_cast<int>(shape_.size()) - 2; d >= 0; --d)
    strides_[d] = strides_[d + 1] * shape_[d + 1];
  size_ = *total / elem_bytes_;
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(*total, 1));
  data_.reset(static_cast<std::byte *>(::operator new[](n, std::align_val_t{64})));
}

double HostArray::get(std::int64_t i) const {
  assert(i >= 0 && i < size_);
  const std::byte *p = data_.get() + i * elem_bytes_;
  switch (dtype_) {
  case spec::DType::f32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case spec::DType::bf16:
  case spec::DType::f16: {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return dtype_ == spec::DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  case spec::DType::i32: {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case spec::DType::i16: {
    std::int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case spec::DType::i8: return static_cast<std::int8_t>(*p);
  case spec::DType::u8:
  case spec::DType::boolean: return static_cast<std::uint8_t>(*p);
  }
  return 0;
}

void HostArray::set(std::int64_t i, double v) {
  assert(i >= 0 && i < size_);
  std::byte *p = data_.get() + i * elem_bytes_;
  switch (dtype_) {
  case spec::DType::f32: {
    const auto f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
    return;
  }
  case spec::DType::bf16:
  case spec::DType::f16: {
    const auto f = static_cast<float>(v);
    const std::uint16_t h = dtype_ == spec::DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f);
    std::memcpy(p, &h, 2);
    return;
  }
  case spec::DType::i32: {
    const std::int32_t x = wrap_to(dtype_, static_cast<std::int64_t>(v));
    std::memcpy(p, &x, 4);
    return;
  }
  case spec::DType::i16: {
    const auto x = static_cast<std::int16_t>(wrap_to(dtype_, static_cast<std::int64_t>(v)));
    std::memcpy(p, &x, 2);
    return;
  }
  case spec::DType::i8:
  case spec::DType::u8:
  case spec::DType::boolean:
    *p = static_cast<std::byte>(wrap_to(dtype_, static_cast<std::int64_t>(v)) & 0xff);
    return;
  }
}

bool HostArray::is_poison(std::int64_t i) const {
  const double v = get(i);
  if (spec::dtype_is_float(dtype_)) return std::isnan(v);
  return static_cast<std::int32_t>(v) == int_poison(dtype_);
}

void HostArray::fill_poison() { fill_poison(0, size_); }

void HostArray::fill_poison(std::int64_t offset, std::int64_t count) {
  assert(offset >= 0 && count >= 0 && offset + count <= size_);
  if (stand_in_) {
    const bool first = stand_in_ == 1;
    double v = first ? 0.0 : 1.0; // bool: false, true (its poison is true)
    if (spec::dtype_is_float(dtype_)) {
      v = first ? 3.0 : -3.0;
    } else if (dtype_ != spec::DType::boolean) {
      const auto hi = spec::exact_int_range(dtype_).second;
      v = !first ? 0.0 : static_cast<double>(dtype_ == spec::DType::u8 ? hi - 1 : hi);
    }
    for (std::int64_t i = offset; i < offset + count; ++i)
      set(i, v);
    return;
  }
  switch (dtype_) {
  case spec::DType::f32: {
    // A quiet NaN with a recognisable payload.
    const auto bits = std::uint32_t{0x7fc0bad0u};
    auto *p = reinterpret_cast<std::uint32_t *>(data_.get()) + offset;
    std::fill(p, p + count, bits);
    return;
  }
  case spec::DType::bf16:
  case spec::DType::f16: {
    const std::uint16_t bits = dtype_ == spec::DType::bf16 ? 0x7fc1u : 0x7e01u;
    auto *p = reinterpret_cast<std::uint16_t *>(data_.get()) + offset;
    std::fill(p, p + count, bits);
    return;
  }
  default:
    for (std::int64_t i = offset; i < offset + count; ++i)
      set(i, int_poison(dtype_));
  }
}

void HostArray::fill_zero() { std::memset(data_.get(), 0, static_cast<std::size_t>(bytes())); }

namespace {
std::uint64_t splitmix64(std::uint64_t &s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
} // namespace

void HostArray::fill_random(std::uint64_t seed) {
  std::uint64_t s = seed * 0x2545f4914f6cdd1dull + 0x1234567ull;
  switch (dtype_) {
  case spec::DType::f32: {
    auto *p = reinterpret_cast<float *>(data_.get());
    for (std::int64_t i = 0; i < size_; ++i)
      p[i] = static_cast<float>(static_cast<double>(splitmix64(s) >> 11) * 0x1p-52 - 1.0);
    return;
  }
  case spec::DType::bf16:
  case spec::DType::f16: {
    auto *p = reinterpret_cast<std::uint16_t *>(data_.get());
    const bool bf = dtype_ == spec::DType::bf16;
    for (std::int64_t i = 0; i < size_; ++i) {
      const auto f = static_cast<float>(static_cast<double>(splitmix64(s) >> 11) * 0x1p-52 - 1.0);
      p[i] = bf ? f32_to_bf16(f) : f32_to_f16(f);
    }
    return;
  }
  case spec::DType::boolean:
    for (std::int64_t i = 0; i < size_; ++i)
      set(i, static_cast<double>(splitmix64(s) & 1));
    return;
  case spec::DType::u8:
    for (std::int64_t i = 0; i < size_; ++i)
      set(i, static_cast<double>(splitmix64(s) % 65));
    return;
  default:
    for (std::int64_t i = 0; i < size_; ++i)
      set(i, static_cast<double>(static_cast<std::int64_t>(splitmix64(s) % 129) - 64));
  }
}

std::unique_ptr<HostArray> HostArray::clone() const {
  auto c = std::make_unique<HostArray>(name_, dtype_, shape_);
  c->copy_from(*this);
  return c;
}

void HostArray::copy_from(const HostArray &o) {
  assert(o.dtype_ == dtype_ && o.size_ == size_);
  std::memcpy(data_.get(), o.data_.get(), static_cast<std::size_t>(bytes()));
}

bool Box::overlaps(const Box &o) const {
  if (array != o.array) return false;
  for (std::size_t d = 0; d < lo.size(); ++d)
    if (hi[d] <= o.lo[d] || o.hi[d] <= lo[d]) return false;
  return true;
}

View View::whole(HostArray &a) {
  View v;
  v.array = &a;
  v.box.array = &a;
  v.box.lo.assign(a.shape().size(), 0);
  v.box.hi = a.shape();
  for (int d = 0; d < static_cast<int>(a.shape().size()); ++d)
    v.kept.push_back(d);
  return v;
}

Shape View::shape() const {
  Shape s;
  for (int d : kept)
    s.push_back(box.hi[d] - box.lo[d]);
  return s;
}

std::int64_t View::size() const {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < box.lo.size(); ++d)
    n *= box.hi[d] - box.lo[d];
  return n;
}

std::int64_t View::offset() const {
  std::int64_t off = 0;
  for (std::size_t d = 0; d < box.lo.size(); ++d)
    off += box.lo[d] * array->strides()[d];
  return off;
}

bool View::is_contiguous() const {
  const auto &shape = array->shape();
  int inner = static_cast<int>(shape.size()) - 1;
  while (inner > 0 && box.lo[inner] == 0 && box.hi[inner] == shape[inner])
    --inner;
  // Dims outside the innermost run must not repeat it.
  for (int d = 0; d < inner; ++d)
    if (box.hi[d] - box.lo[d] != 1) return size() == 0;
  return true;
}

std::string View::to_string() const {
  std::ostringstream os;
  os << array->name();
  if (box.lo.empty()) return os.str();
  os << '[';
  for (std::size_t d = 0; d < box.lo.size(); ++d) {
    if (d) os << ", ";
    const bool is_kept = std::find(kept.begin(), kept.end(), static_cast<int>(d)) != kept.end();
    if (!is_kept)
      os << box.lo[d];
    else if (box.lo[d] == 0 && box.hi[d] == array->shape()[d])
      os << ':';
    else
      os << box.lo[d] << ':' << box.hi[d];
  }
  os << ']';
  return os.str();
}

namespace {

/// A view's maximal contiguous runs (those View::for_each_run visits), one at
/// a time, without allocating for the common ranks.
class RunCursor {
public:
  explicit RunCursor(const View &v) : strides_(v.array->strides()), box_(v.box) {
    const auto &shape = v.array->shape();
    const int rank = static_cast<int>(shape.size());
    if (rank == 0) {
      len_ = 1;
      return;
    }
    inner_ = rank - 1;
    len_ = box_.hi[inner_] - box_.lo[inner_];
    while (inner_ > 0 && box_.lo[inner_] == 0 && box_.hi[inner_] == shape[inner_]) {
      --inner_;
      len_ *= box_.hi[inner_] - box_.lo[inner_];
    }
    for (int d = 0; d < inner_ && len_ > 0; ++d)
      if (box_.hi[d] == box_.lo[d]) len_ = 0;
    off_ = v.offset();
    idx_.assign(static_cast<std::size_t>(inner_), 0);
  }
  bool done() const { return len_ == 0 || done_; }
  std::int64_t offset() const { return off_; }
  std::int64_t length() const { return len_; }
  void next() {
    int d = inner_ - 1;
    while (d >= 0) {
      off_ += strides_[d];
      if (++idx_[d] < box_.hi[d] - box_.lo[d]) return;
      off_ -= strides_[d] * idx_[d];
      idx_[d] = 0;
      --d;
    }
    done_ = true;
  }

private:
  const Shape &strides_;
  const Box &box_;
  int inner_ = 0;
  std::int64_t len_ = 0, off_ = 0;
  Shape idx_;
  bool done_ = false;
};

#if defined(__SANITIZE_THREAD__)
#define PIPECHECK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PIPECHECK_TSAN 1
#endif
#endif

// Streaming stores only pay off for copies far larger than the caches keep
// for long; below this a copy is left to memcpy.
constexpr std::int64_t kStreamMinBytes = 256 * 1024;

#if defined(__SSE2__) && !defined(PIPECHECK_TSAN)
// TSan does not see intrinsic stores, so those builds keep memcpy.
constexpr bool kCanStream = true;
void stream_copy(std::byte *d, const std::byte *s, std::size_t n) {
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
  if (n < head + 64) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), e);
  }
  std::memcpy(d, s, n);
}
void stream_fence() { _mm_sfence(); }
#else
constexpr bool kCanStream = false;
void stream_copy(std::byte *d, const std::byte *s, std::size_t n) { std::memcpy(d, s, n); }
void stream_fence() {}
#endif

} // namespace

void copy_view(const View &src, const View &dst, CopyHint hint) {
  assert(src.dtype() == dst.dtype());
  assert(src.size() == dst.size());
  const std::int64_t eb = src.array->elem_bytes();
  const std::byte *sbase = src.array->data();
  std::byte *dbase = dst.array->data();
  // Overlapping runs of one array need memmove's ordering; streaming never
  // applies there.
  const bool same_array = src.array == dst.array;
  const bool stream =
      kCanStream && hint == CopyHint::stream_dst && !same_array && src.size() * eb >= kStreamMinBytes;
  RunCursor s(src), d(dst);
  std::int64_t spos = 0, dpos = 0; // positions inside the current runs
  while (!s.done()) {
    assert(!d.done());
    const std::int64_t n = std::min(s.length() - spos, d.length() - dpos);
    std::byte *to = dbase + (d.offset() + dpos) * eb;
    const std::byte *from = sbase + (s.offset() + spos) * eb;
    const auto bytes = static_cast<std::size_t>(n * eb);
    if (stream)
      stream_copy(to, from, bytes);
    else if (same_array)
      std::memmove(to, from, bytes);
    else
      std::memcpy(to, from, bytes);
    spos += n;
    dpos += n;
    if (spos == s.length()) {
      s.next();
      spos = 0;
    }
    if (dpos == d.length()) {
      d.next();
      dpos = 0;
    }
  }
  // Non-temporal stores are weakly ordered: fence them before the caller
  // hands the bytes to another thread.
  if (stream) stream_fence();
}

void copy_view_changed(const View &src, const View &dst, const View &base) {
  assert(src.dtype() == dst.dtype() && base.dtype() == dst.dtype());
  assert(src.size() == dst.size() && base.size() == dst.size());
  auto offsets = [](const View &v) {
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(v.size()));
    v.for_each_run([&](std::int64_t off, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i)
        out.push_back(off + i);
    });
    return out;
  };
  const auto s = offsets(src), d = offsets(dst), b = offsets(base);
  const auto eb = static_cast<std::size_t>(src.array->elem_bytes());
  const std::byte *sbase = src.array->data(), *bbase = base.array->data();
  std::byte *dbase = dst.array->data();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::byte *from = sbase + static_cast<std::size_t>(s[i]) * eb;
    if (std::memcmp(from, bbase + static_cast<std::size_t>(b[i]) * eb, eb) != 0)
      std::memcpy(dbase + static_cast<std::size_t>(d[i]) * eb, from, eb);
  }
}

} // namespace pipecheck::executor
