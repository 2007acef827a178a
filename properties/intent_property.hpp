#pragma once
/// Properties 3 and 5 of issue 12: a verified kernel matches its
/// `reference:` in every DMA mode on generated inputs, and a verified
/// pipeline survives adversarial DMA timing for every N <= 8.

#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pipecheck::properties {

/// Kernels with a `reference:` (kernel `k`), correct by construction, from
/// three templates: elementwise (`o = x * 2 + 1`; ragged rows, a grid
/// transposed by a permuted index map), a reduction with its init on the
/// last grid axis (`o = sum(x, axis=0)` over a squeezed block dim), and a
/// matmul with a scratch accumulator (`o = dot(a, b)`); block sizes, grid
/// extents and `buffered=` counts vary.
rc::Gen<std::string> reference_kernel_text();

/// What property 3 saw on one kernel.
struct IntentOutcome {
  std::string verdict;               ///< the check's, or "skip" (does not validate)
  std::vector<std::string> failures; ///< "INPUTS, MODE seed S: reason", one per failing run
  int runs = 0;
};

/// Checks `text`; when verified, runs it in every DMA mode (eager, on_wait,
/// random with three seeds) on each kind of generated input (uniform,
/// normal, integer-valued, one-hot, and special values for kernels that do
/// not reduce: NaN, ±inf and overflow make a sum's value depend on its
/// order), against the oracle and the reference.
IntentOutcome check_against_reference(const std::string &text, std::uint64_t seed);

/// The DMA schedules property 5 tries on each N: eager, on_wait, and random
/// with this many seeds.
inline constexpr int kAdversarialSeeds = 8;
inline constexpr std::int64_t kAdversarialMaxN = 8;

/// Checks the pipeline in `text` (one symbolic param N); when verified, runs
/// it at N = 1..kAdversarialMaxN in eager and on_wait modes and in random
/// mode with kAdversarialSeeds seeds. Failures as "N = n, MODE seed S:
/// reason"; verdict "skip" when it does not validate.
IntentOutcome check_adversarial_timing(const std::string &text);

} // namespace pipecheck::properties
