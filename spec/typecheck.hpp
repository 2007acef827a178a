#pragma once
/// The typing rules of kernel bodies: the shape and dtype of every body
/// expression, and which bodies have none.
///
/// The rules are the executor's: executor/value.cpp and executor/interp.cpp
/// call the rule functions below for every operation they run, and
/// `typecheck` applies the same functions statically, before anything runs.
/// Extents that depend on an unbound (symbolic) param are kUnknownExtent:
/// a rule checks what it can (ranks, dtypes, known extents) and rejects
/// nothing on account of an unknown extent.

#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/place.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::spec {

/// "[4, 512]", "?" for an unknown extent.
std::string dims_string(const Dims &);

/// The type of a body value. `weak`: a Python literal (or an integer such as
/// program_id), which adopts the other operand's dtype as in jnp.
struct TensorType {
  DType dtype = DType::f32;
  bool weak = false;
  Dims shape;
};
/// "f32[128, 64]" ("f32[]" for a scalar).
std::string type_string(const TensorType &);

/// A rule's answer: a value, or why there is none (`error` non-empty).
template <class T> struct Typed {
  T value{};
  std::string error;
  bool ok() const { return error.empty(); }
};

/// numpy broadcasting of two shapes (trailing dims align; 1 stretches).
Typed<Dims> broadcast_dims(const Dims &a, const Dims &b);
/// jnp promotion: weak literals adopt the strong dtype (a float literal
/// makes an integer f32, an integer literal makes bool i32), equal dtypes
/// stay, float beats int, two different floats give f32, bool gives way to
/// any int, two ints give the wider one (u8 with a signed int: at least i16).
DType promote_dtype(DType a, bool a_weak, DType b, bool b_weak);

/// `pow` is `**` / jnp.power; bit_and / bit_or are `&` / `|`: logical on
/// bool, bitwise on integers, an error on floats.
enum class ElemOp { add, sub, mul, div, floordiv, mod, maximum, minimum, pow, bit_and, bit_or };
/// bit_not is `~`: logical on bool, bitwise on integers.
/// floor, ceil, round (half to even, as jnp.round) and sign keep the dtype,
/// as abs does; the others are float functions.
enum class UnaryOp {
  neg,
  exp,
  sqrt,
  rsqrt,
  log,
  log2,
  exp2,
  tanh,
  abs,
  bit_not,
  sin,
  cos,
  erf,
  erfc,
  floor,
  ceil,
  round,
  sign,
  sigmoid,
  expm1,
  log1p,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  asinh,
  acosh,
  atanh,
  cbrt
};
enum class Reduction { sum, max, min };
/// `a < b` and the other comparisons.
enum class CompareOp { eq, ne, lt, le, gt, ge };

/// `a op b`: broadcast shape, promoted dtype (integer `/` is f32), weak when
/// both are.
Typed<TensorType> elementwise_type(ElemOp, const TensorType &a, const TensorType &b);
/// `-a`, `abs(a)`, `floor`, `ceil`, `round`, `sign` keep the type; the float
/// functions (exp, sqrt, rsqrt, log, log2, exp2, tanh, sin, cos, erf, erfc,
/// sigmoid, expm1, log1p, tan, asin, acos, atan, sinh, cosh, asinh, acosh,
/// atanh, cbrt) of an integer are f32; `~a` takes bool or integers.
Typed<TensorType> unary_type(UnaryOp, const TensorType &a);
/// `a < b`: the broadcast shape, strong bool (operands compared in their
/// promoted dtype).
Typed<TensorType> compare_type(const TensorType &a, const TensorType &b);
/// where(c, a, b): c, a and b broadcast together; a and b's promoted dtype
/// (c is any dtype: nonzero selects a).
Typed<TensorType> where_type(const TensorType &c, const TensorType &a, const TensorType &b);
/// iota(shape, dim) (lax.broadcasted_iota): `shape`, the given integer
/// dtype; each element is its index along `dim` (0 <= dim < rank).
Typed<TensorType> iota_type(DType, const Dims &shape, std::int64_t dim);
/// Why a shape argument (of iota, reshape, broadcast_to) cannot be a body
/// value: more than 2^31 elements. Empty when it can.
std::string shape_arg_error(const Dims &shape);
/// reshape(a, shape): same element count (when known), row-major order.
Typed<TensorType> reshape_type(const TensorType &a, const Dims &shape);
/// broadcast_to(a, shape): a must broadcast to exactly `shape`.
Typed<TensorType> broadcast_to_type(const TensorType &a, const Dims &shape);
/// jnp.tile(a, reps): the shorter of a's shape and reps is padded with
/// leading 1s, and each dim is a's extent times its rep.
Typed<TensorType> tile_type(const TensorType &a, const Dims &reps);
/// jnp.concatenate(parts, axis): one dtype and rank, every extent but the
/// axis's equal; the axis's extents add up.
Typed<TensorType> concatenate_type(const std::vector<TensorType> &parts, std::int64_t axis);
/// An operation that moves or scans elements along `axis` and keeps a's type
/// (roll, flip, cumsum, cummax, cummin; `what` names it in the error): the
/// axis in range.
Typed<TensorType> along_axis_type(const TensorType &a, std::int64_t axis, const std::string &what);
/// argmax / argmin over `axis` (lax.argmax: the first index of the maximum, a
/// NaN counting as the maximum): i32, the axis dropped; a nonempty axis.
Typed<TensorType> arg_reduce_type(const TensorType &a, std::int64_t axis);
/// shift_left, shift_right_logical, shift_right_arithmetic: integers (not
/// bool), broadcast and promoted as `a + b`.
Typed<TensorType> shift_type(const TensorType &a, const TensorType &b);
/// cast(a, t): a's shape, dtype t, strong.
TensorType cast_type(const TensorType &a, DType t);
/// The integers `t` holds exactly, [lo, hi]: an integer dtype's range, a
/// float dtype's run of consecutive integers (f32: +-2^24), bool's 0 and 1.
std::pair<std::int64_t, std::int64_t> exact_int_range(DType t);
/// How a dot contracts and what it gives (pl.dot's trans_a / trans_b,
/// jnp.dot's preferred_element_type).
struct DotOptions {
  bool trans_a = false, trans_b = false;
  std::optional<DType> preferred; ///< absent: f32 when either is a float, else i32
};
/// jnp.dot of 1-D/2-D operands: contracted dims equal (a's last, b's first,
/// after the transposes, which need 2-D operands).
Typed<TensorType> dot_type(const TensorType &a, const TensorType &b, const DotOptions &opts = {});
/// Reversed axes.
TensorType transpose_type(const TensorType &a);
/// lax.dot_general's dimension numbers: the contracting and the batch dims
/// of each operand (dims count from 0; each list pairs up by position).
struct DotDims {
  std::vector<std::int64_t> lhs_contract, rhs_contract, lhs_batch, rhs_batch;
};
/// The dimension numbers of `dot_general(a, b, contract=((..), (..)),
/// batch=((..), (..)))` (batch defaults to none), or an error at `where`
/// when a keyword is missing or is not a pair of tuples of constant ints.
Typed<DotDims> dot_general_dims(const Expr &call, Loc &where);
/// The DotDims of jnp.dot on operands of these ranks with pl.dot's flags.
DotDims dot_dims(std::size_t rank_a, std::size_t rank_b, bool trans_a = false, bool trans_b = false);
/// lax.dot_general: dims in range and none twice, contracting and batch
/// extents equal; the result is the batch dims, then a's free dims, then
/// b's free dims, each in order. The dtype is as dot_type's.
Typed<TensorType> dot_general_type(const TensorType &a, const TensorType &b, const DotDims &,
                                   std::optional<DType> preferred = std::nullopt);
/// A reduction over `axis` (negative counts from the end; nullopt: all
/// axes), which is dropped (kept with extent 1 when `keepdims`); the input's
/// dtype.
Typed<TensorType> reduce_type(Reduction, const TensorType &a, std::optional<std::int64_t> axis,
                              bool keepdims = false);
/// One subscript of a value (`m[:, None]`): a Subscript, or a new axis.
struct ValueSubscript {
  bool new_axis = false;
  Subscript sub; ///< when not new_axis
};
/// A subscripted value: the part of the value it keeps (by the ref rule of
/// spec/place.hpp) and the result's shape, with a 1 at each new axis.
struct ValueIndexed {
  Subscripted part;
  Dims shape;
  std::string error;
  bool ok() const { return error.empty(); }
};
ValueIndexed index_value(const Dims &value, const std::vector<ValueSubscript> &subs);
/// The subscripts of `local[...]` (Op::Ref on a local value): `None` is a
/// new axis, the rest as subscripts_of.
std::vector<ValueSubscript> value_subscripts_of(const Expr &ref, const SubscriptValue &value);
/// Every name a block binds (lets, loop variables), nested blocks too.
void bound_names(const Block &, std::set<std::string> &out);
/// `True` / `False` (a keyword argument such as keepdims=True), else nullopt.
std::optional<bool> bool_literal(const Expr &);
/// The axis `reduce_type` reduces, normalized to [0, rank) (call after it succeeded).
std::int64_t normalize_axis(std::int64_t axis, std::size_t rank);
/// A row-major shape seen around one axis: the element at (o, k, i) is flat
/// index (o * len + k) * inner + i, k along the axis. The executor's moves
/// and scans and the race checker's padding flow walk values this way.
struct AxisLines {
  std::int64_t outer = 1, len = 1, inner = 1;
};
AxisLines lines_around(const Dims &shape, std::int64_t axis);
/// full(v): v must have one element; the result is weak.
Typed<TensorType> full_type(const TensorType &v);
/// Whether a value of shape `value` fits a block of shape `target`:
/// broadcasting it gives exactly `target`. Empty when it fits.
std::string fit_error(const Dims &value, const Dims &target);
/// A store `target = value` (any dtype: the store casts): a one-element
/// value fills the target, anything else must fit (fit_error). Empty when ok.
std::string store_error(const TensorType &value, const Dims &target);
/// In `target += value`, a value of another dtype than the target's is
/// added as if weak, so the sum keeps the target's dtype where jnp allows.
bool added_as_weak(DType target, const TensorType &value);
/// The type of `cur + value` in `target += value` (see added_as_weak).
Typed<TensorType> accumulate_type(const TensorType &target, TensorType value);

/// The type of each body expression evaluated as a tensor value, by node.
using ExprTypes = std::map<const Expr *, TensorType>;

/// Type-checks a kernel body with the params bound by param_env(params,
/// overrides): every expression by the rules above, every subscript that is
/// known statically against its block, every store against its target.
/// Call on a kernel that validates otherwise. Each problem is a located error.
/// `types`, when given, receives the type of every tensor expression of the
/// body (the tests compare them with the values the executor computes).
std::vector<Diagnostic> typecheck(const KernelSpec &, const Env &overrides = {}, ExprTypes *types = nullptr);
/// Type-checks a pipeline's compute statements the same way, its buffers
/// standing for the blocks (a ring's slot index its leading dim).
std::vector<Diagnostic> typecheck(const Program &, const Env &overrides = {});

} // namespace pipecheck::spec
