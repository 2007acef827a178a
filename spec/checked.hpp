#pragma once
/// Checked and saturating 64-bit integer arithmetic for sizes, strides, byte
/// counts and footprints. Validation, the verifier and the executor share it,
/// so "does not fit" means the same everywhere.
///
/// - checked_*: the exact result, or nullopt when it does not fit int64
///   (for values that must be exact: element counts, strides, offsets);
/// - saturating_*: the exact result clamped to the type's range (for
///   estimates compared against a budget, where "huge" is the answer).

#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace pipecheck::spec {

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// The product of `extents` (1 for none), or nullopt when it, or any product
/// of trailing extents (a row-major stride), does not fit int64.
inline std::optional<std::int64_t> checked_product(std::span<const std::int64_t> extents) {
  std::int64_t n = 1;
  for (auto it = extents.rbegin(); it != extents.rend(); ++it)
    if (__builtin_mul_overflow(n, *it, &n)) return std::nullopt;
  return n;
}

/// checked_product(extents) * elem_bytes: the byte size of a dense array.
inline std::optional<std::int64_t> checked_bytes(std::span<const std::int64_t> extents,
                                                 std::int64_t elem_bytes) {
  auto n = checked_product(extents);
  if (!n) return std::nullopt;
  return checked_mul(*n, elem_bytes);
}

inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

inline std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? std::numeric_limits<std::int64_t>::min()
                            : std::numeric_limits<std::int64_t>::max();
}

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::numeric_limits<std::uint64_t>::max();
  return r;
}

inline std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::numeric_limits<std::uint64_t>::max();
  return r;
}

} // namespace pipecheck::spec
