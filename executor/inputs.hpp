#pragma once
/// Generated input data for `run --inputs-kind`: seeded, the same seed giving
/// the same data, each kind chosen to break kernels a different way.

#include "executor/tensor.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace pipecheck::executor {

enum class InputKind {
  uniform,  ///< floats uniform in [-1, 1), integers in [-64, 64] (HostArray::fill_random)
  normal,   ///< floats N(0, 1); integers round(16·N(0, 1)), wrapped to the dtype; bool N > 0
  integers, ///< integer values in [-8, 8] in every dtype: float sums of them are exact
  one_hot,  ///< zeros but one element 1, at a seeded place: a wrong output shows where it came from
  special,  ///< half special values — floats: NaN, ±inf, ±0, the smallest subnormal, a mid subnormal,
            ///< ±0.75·max and ±max of the dtype; integers: max, min + 1, 0, ±1 — half uniform
};
const char *to_string(InputKind);
std::optional<InputKind> parse_input_kind(const std::string &);

/// Fills `a` with data of `kind` from `seed`.
void fill_inputs(HostArray &a, InputKind kind, std::uint64_t seed);

} // namespace pipecheck::executor
