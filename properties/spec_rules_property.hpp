#pragma once
/// The spec-rule property: on random small kernels the symbolic checker and
/// the brute-force enumerator agree, and every symbolic witness is real.

#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pipecheck::properties {

/// One block index of a generated kernel's index map: `0`, `v`, `v // 2`,
/// `v % 2`, `v + 1`, `nblocks - 1 - v` or `v + w` (w the next grid axis).
struct IndexTerm {
  enum Kind { zero, var, half, parity, next, reversed, sum };
  Kind kind = zero;
  int axis = 0;
  std::int64_t nblocks = 1; ///< the operand's block count along this dimension
  std::string text() const;
  /// Its value at a grid point.
  std::int64_t at(const std::vector<std::int64_t> &point) const;
};

/// A generated small kernel (see small_kernel_text) as data, so that an
/// evaluator independent of the verifier can judge it.
struct SmallKernel {
  std::vector<std::int64_t> grid;
  std::vector<std::string> semantics; ///< empty: no dimension_semantics line
  bool triton = false;                ///< `backend = triton` (then no semantics)
  std::int64_t b0 = 8, b1 = 8;        ///< the block
  std::int64_t n0 = 1, n1 = 1;        ///< blocks per dimension
  std::int64_t r0 = 0, r1 = 0;        ///< the shape is n * b - r (ragged when r > 0)
  IndexTerm x[2], o[2];               ///< the index maps of `x` and `o`
  bool alias = false;                 ///< `alias x -> o`
  int axis = 0;                       ///< the grid axis the body's guards name
  int body = 0;                       ///< the body template, 0-11
  std::string text() const;           ///< as `.pk` text
  /// Bodies 6-8, 10 and 11 accumulate into `scratch acc` (the others touch
  /// only x and o).
  bool scratch_body() const { return (body >= 6 && body <= 8) || body >= 10; }
};

rc::Gen<SmallKernel> small_kernel();

/// The brute-force evaluator, with its own rule gating (it shares nothing
/// with verifier/rules): walks every grid point of `k` and says which of
/// these rules its semantics break, as "RULE@LINE" (sorted):
/// index-out-of-bounds (per operand line), "revisit" (output-revisit or
/// reduction-not-last-axis, at the out line), parallel-write-conflict,
/// output-not-covered (unaliased output only), and "uninitialized-accumulator"
/// (no line) for a read of an output block nothing wrote yet. Under
/// `backend = triton`: no revisit, a conflict where two programs store one
/// row half of one block, a read of the unaliased output before its own
/// program stored there is uninitialized, and so is a scratch read in a
/// program that did not initialize it (each program has its own), and a
/// store of a block in bounds that passes the array's ragged end is
/// index-out-of-bounds at the store's line. A parallel-write-conflict needs
/// one store of the two points' shared block (each visit writes it back).
std::vector<std::string> brute_force_rules(const SmallKernel &k);

/// Compares the symbolic spec rules on `k` with brute_force_rules, on the
/// rules that evaluator judges. "" when they agree, "skip" when the text does
/// not validate, else both sets.
std::string compare_symbolic_with_brute_force(const SmallKernel &k);

/// For a `backend = triton` kernel: whether the solver's race and garbage
/// checks (the path past the element replay's limits) find a
/// parallel-write-conflict and an uninitialized-accumulator on the output
/// exactly when brute_force_rules does. "" when they agree,
/// "skip" when the kernel is not Triton's or does not validate.
std::string compare_triton_races_with_brute_force(const SmallKernel &k);

/// Random small kernel specs as `.pk` text (kernel name `k`): grids of rank
/// 1-3 with extents 1-4, 2-D operands with ragged shapes, index maps with
/// `//`, `%`, offsets and transposes, guarded inits, input writes, aliases.
rc::Gen<std::string> small_kernel_text();

/// Checks the kernel in `text` both ways. Returns an empty string when the
/// verdicts agree (same rule, anchor line and witness for every finding) and
/// every symbolic witness holds concretely; otherwise what differs. Returns
/// "skip" when the text does not validate.
std::string compare_symbolic_with_enumeration(const std::string &text);

} // namespace pipecheck::properties
