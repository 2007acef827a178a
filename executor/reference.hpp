#pragma once
/// A kernel's `reference:`: its intent stated on whole arrays
/// (`o = dot(a, b)`), run by the body interpreter with every operand name
/// bound to its whole array, and the tolerance a body may differ from it by:
/// element by element, from the running error analysis the interpreter
/// carries beside the reference's values (executor/error_bound.hpp).

#include "executor/error_bound.hpp"
#include "executor/oracle.hpp"

#include <cstdint>
#include <optional>

namespace pipecheck::executor {

/// Runs `c`'s reference in place on `arrays` (from make_kernel_arrays, with
/// the inputs the oracle saw): each `out = value` stores the value, cast and
/// broadcast, into the whole output; other statements bind locals. Returns
/// each output's error bound as stored (error_bound.hpp, with the body's
/// accumulation_dtype): an f32 array of the output's shape by its name,
/// +inf where the analysis cannot follow an operation. Throws
/// ExecError(bad_input) on an ill-typed reference.
ArrayMap run_reference(const ConcreteKernel &c, ArrayMap &arrays);

/// The longest reduction the reference states: the contracted extent of a
/// dot, the reduced extent of a sum (all elements without `axis`); 1 when it
/// sums nothing. At `c`'s (scaled) shapes.
std::int64_t reference_reduction_length(const ConcreteKernel &c);

/// The dtype the partial sums of `output` live in, in `c`'s body: the least
/// precise float dtype among f32 and the refs the body accumulates into
/// (`t += v`, or `t[...] = t[...] + v`) that the output's value is computed
/// from, through its stores and locals (dot and sum accumulate in f32). A
/// bf16 counter beside an f32 accumulator loosens no other output's bound.
spec::DType accumulation_dtype(const ConcreteKernel &c, const std::string &output);
/// How many grid steps visit each block of `output`: the product of the
/// grid axes its block index does not follow (all of them for an output
/// without a window). A body accumulating in a narrower dtype than f32
/// rounds each element to it about once per such step (body loops that
/// accumulate inside a step are not counted).
std::int64_t accumulation_steps(const ConcreteKernel &c, const std::string &output);

/// The tolerance where the error analysis cannot bound an element, relative
/// to max(1, |reference|): nullopt (exactly) for integer outputs, else
/// 2·eps(out) + K·eps(acc) — the output's own rounding, and the worst-case
/// rounding error of a K-term sum accumulated in `acc` (Higham's gamma_K,
/// with eps for the unit roundoff: a factor 2 of slack for a different
/// summation order), K the longest reduction the reference states.
std::optional<double> reference_tolerance(spec::DType out, spec::DType acc, std::int64_t k);

/// How far the body's value of an element of a float output of dtype `out`
/// may be from the reference's value `r` there, given the reference's error
/// bound `bound` at it (run_reference):
///
///     bound + 2·eps(out)·|r| + 2·(out's smallest subnormal)
///
/// (the bound already counts each rounding on both sides; the second term is
/// the output's own rounding, a ulp either way: relative, so that a small
/// bf16 value is not allowed a hundredth); where the bound is not finite,
/// `relative`·max(1, |r|) (reference_tolerance). An infinite `r` is matched
/// by itself only (0). (An integer output is compared within its bound where
/// that is finite and nonzero, a rounding of an inexact value that may flip,
/// else exactly: run.cpp's Tolerance.)
double element_tolerance(spec::DType out, double bound, double r, double relative);

} // namespace pipecheck::executor
