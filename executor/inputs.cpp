#include "executor/inputs.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace pipecheck::executor {

const char *to_string(InputKind k) {
  switch (k) {
  case InputKind::uniform: return "uniform";
  case InputKind::normal: return "normal";
  case InputKind::integers: return "integers";
  case InputKind::one_hot: return "one-hot";
  case InputKind::special: return "special";
  }
  return "?";
}

std::optional<InputKind> parse_input_kind(const std::string &s) {
  for (InputKind k :
       {InputKind::uniform, InputKind::normal, InputKind::integers, InputKind::one_hot, InputKind::special})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

namespace {

// The largest finite value, the smallest subnormal and the smallest normal
// of a float dtype.
struct FloatLimits {
  double max, min_subnormal, min_normal;
};

FloatLimits limits(spec::DType t) {
  switch (t) {
  case spec::DType::f16: return {65504.0, std::ldexp(1.0, -24), std::ldexp(1.0, -14)};
  case spec::DType::bf16: return {std::ldexp(255.0, 120), std::ldexp(1.0, -133), std::ldexp(1.0, -126)};
  default:
    return {std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
            std::numeric_limits<float>::min()};
  }
}

std::int64_t int_max(spec::DType t) {
  switch (t) {
  case spec::DType::i16: return std::numeric_limits<std::int16_t>::max();
  case spec::DType::i8: return std::numeric_limits<std::int8_t>::max();
  case spec::DType::u8: return 255;
  case spec::DType::boolean: return 1;
  default: return std::numeric_limits<std::int32_t>::max();
  }
}

std::int64_t int_min(spec::DType t) {
  switch (t) {
  case spec::DType::i16: return std::numeric_limits<std::int16_t>::min();
  case spec::DType::i8: return std::numeric_limits<std::int8_t>::min();
  case spec::DType::u8:
  case spec::DType::boolean: return 0;
  default: return std::numeric_limits<std::int32_t>::min();
  }
}

} // namespace

void fill_inputs(HostArray &a, InputKind kind, std::uint64_t seed) {
  if (kind == InputKind::uniform) {
    a.fill_random(seed);
    return;
  }
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(kind));
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1p-53; }; // [0, 1)
  const bool is_float = spec::dtype_is_float(a.dtype());
  const spec::DType t = a.dtype();
  const std::int64_t n = a.size();
  switch (kind) {
  case InputKind::uniform: break;
  case InputKind::normal:
    for (std::int64_t i = 0; i < n; ++i) {
      // Box-Muller: the same numbers on every platform, unlike std::normal_distribution.
      const double z = std::sqrt(-2.0 * std::log(1.0 - unit())) * std::cos(2 * M_PI * unit());
      if (is_float)
        a.set(i, z);
      else if (t == spec::DType::boolean)
        a.set(i, z > 0);
      else
        a.set(i, std::round(16 * z));
    }
    return;
  case InputKind::integers:
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(static_cast<std::int64_t>(rng() % 17) - 8);
      a.set(i, t == spec::DType::boolean ? (v > 0) : (t == spec::DType::u8 ? std::fabs(v) : v));
    }
    return;
  case InputKind::one_hot:
    a.fill_zero();
    if (n > 0) a.set(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)), 1);
    return;
  case InputKind::special: {
    std::vector<double> specials;
    if (is_float) {
      const FloatLimits l = limits(t);
      specials = {std::numeric_limits<double>::quiet_NaN(),
                  std::numeric_limits<double>::infinity(),
                  -std::numeric_limits<double>::infinity(),
                  0.0,
                  -0.0,
                  l.min_subnormal,
                  -l.min_subnormal,
                  l.min_normal / 2,
                  0.75 * l.max,
                  -0.75 * l.max,
                  l.max,
                  -l.max};
    } else {
      // Not the dtype's lowest value: that is an integer dtype's poison.
      specials = {static_cast<double>(int_max(t)), static_cast<double>(int_min(t) + 1), 0, 1, -1};
      if (t == spec::DType::u8 || t == spec::DType::boolean)
        specials = {static_cast<double>(int_max(t)), 0, 1};
    }
    for (std::int64_t i = 0; i < n; ++i) {
      if (rng() & 1) {
        a.set(i, specials[rng() % specials.size()]);
      } else if (is_float) {
        a.set(i, 2 * unit() - 1);
      } else {
        a.set(i, static_cast<double>(rng() % 65));
      }
    }
    return;
  }
  }
}

} // namespace pipecheck::executor
