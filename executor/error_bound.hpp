#pragma once
/// The running (forward) error analysis of a kernel's `reference:`, after
/// Higham: beside each value the reference interpreter computes, an
/// elementwise bound (Value::bound) on how far a correct body's value of the
/// same quantity may be from the reference's. `run` compares the body's
/// outputs with the reference element by element within that bound
/// (reference.hpp), so that a small result of large cancelling terms is held
/// to the size of its terms, not to its own.
///
/// What "correct" allows: the same formula evaluated in another order or
/// association (a blocked dot, a running softmax), each with its own
/// rounding. So each rounding counts twice, once for each side: a result
/// rounded to dtype t adds eps(t)·|r| (eps the machine epsilon, twice the
/// unit roundoff), and a sum or dot adds eps(acc)·Σ|partial sums| (Higham's
/// running bound u·Σ|ŝ_k| of a sum, its partial sums ŝ_k taken in index
/// order: a body that sums in blocks has partial sums of that size or
/// smaller, and the factor two covers its own; `acc` the dtype the body
/// accumulates in). Errors already in the operands propagate to first order
/// and beyond by each operation's own rule:
///
///   a ± b         ea + eb + eps·|r|
///   a · b         |a|·eb + |b|·ea + ea·eb + eps·|r|
///   a / b         (ea + |r|·eb) / (|b| - eb) + eps·|r|      (unbounded where |b| <= eb)
///   max, min      max over operands x of (x - r) + ex        (the winner's bound, or what
///                 ((r - x) + ex for min)                     a loser within reach overtakes by)
///   f(a)          max |f(a ± ea) - f(a)| + eps·|r|          (f monotone: exp, log, sqrt, tanh, floor, ...)
///   sin, cos      ea + eps·|r|
///   pow(a, b)     the largest change at a corner of [a ± ea] x [b ± eb], + eps·|r|
///   sum           Σ e + eps(acc)·Σ|partial sums|; for an acc narrower than
///                 f32 rounded at S accumulation steps (Accumulation::steps),
///                 the least of that and eps(f32)·Σ|partial sums| + eps(acc)·S·Σ|terms|
///   dot(A, B)     |A|·eB + eA·(|B| + eB) + eps(acc)·(|A|·|B| + Σ|partial sums|)
///                 (that rounding term as a sum's, its terms' magnitudes |A|·|B|)
///   cast          e, + eps(t)·|r| where e > 0 and t is narrower: an exact
///                 value rounds to the same neighbour on both sides
///   a moved element (index, reshape, broadcast, transpose, roll, ...) keeps its bound
///
/// A comparison of values with errors may flip where they are within their
/// bounds of each other: the boolean's bound is then 1, and a `where` on it
/// is bounded by max(ea, eb) + |a - b| (either branch). Where the analysis
/// cannot follow an operation (an integer division, bit operation or shift
/// of an inexact value, an argmax whose winner is within error of another,
/// a result outside a function's domain, an overflow) the bound is +inf:
/// `run` then falls back to the relative tolerance of reference_tolerance
/// for that element, never to "anything passes". Inputs, literals, iota and
/// integer arithmetic on them are exact (bound 0).

#include "executor/value.hpp"

#include <cstdint>
#include <optional>

namespace pipecheck::executor {

/// The machine epsilon of a float dtype (f32 2^-23, f16 2^-10, bf16 2^-7).
double dtype_epsilon(spec::DType);
/// The smallest positive (subnormal) value of a float dtype (f32 2^-149,
/// bf16 2^-133, f16 2^-24).
double dtype_denorm_min(spec::DType);

namespace error_bound {

/// Turns `v`'s bound on: exact, or `e` (one element per element of v).
void track(Value &v, Accumulation acc, FloatVec e = {});

/// v's bound as an untracked f32 value of v's shape (zeros where exact).
Value as_value(const Value &v);

/// The bound of the result `r` of value.hpp's operation of the same name on
/// these operands; each is called by that operation where an operand is
/// tracked, after it computed r.
void binary(BinOp, const Value &a, const Value &b, Value &r);
void unary(UnOp, const Value &a, Value &r);
void compare(spec::CompareOp, const Value &a, const Value &b, Value &r);
/// a and b at r's shape and dtype, c a boolean of r's shape.
void where(const Value &c, const Value &a, const Value &b, Value &r);
void cast(const Value &a, Value &r);
/// The plain 1-D/2-D dot (after any transpose; before a preferred cast).
void dot(const Value &a, const Value &b, Value &r);
void reduce(ReduceOp, const Value &a, std::optional<std::int64_t> axis, bool keepdims, Value &r);
void cumulative(ReduceOp, const Value &a, std::int64_t axis, bool reverse, Value &r);
void arg_reduce(bool max, const Value &a, std::int64_t axis, Value &r);
/// An operation whose error the analysis does not follow (shifts): exact
/// from exact operands, else unbounded.
void unfollowed(const Value &a, const Value &b, Value &r);
/// An operation that only moves elements: r's bound is `op` applied to a's
/// bound (as an untracked f32 value of a's shape).
template <class Op> void moved(const Value &a, Value &r, Op op) {
  if (!a.bound.on) return;
  r.bound.on = true;
  r.bound.acc = a.bound.acc;
  r.bound.e.clear();
  if (!a.bound.e.empty()) r.bound.e = op(as_value(a)).f;
}

} // namespace error_bound
} // namespace pipecheck::executor
