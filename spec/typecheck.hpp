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
#include <string>
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
/// makes an integer f32), equal dtypes stay, float beats int, two different
/// floats give f32, two different ints give i32.
DType promote_dtype(DType a, bool a_weak, DType b, bool b_weak);

enum class ElemOp { add, sub, mul, div, floordiv, mod, maximum, minimum };
enum class UnaryOp { neg, exp };
enum class Reduction { sum, max };

/// `a op b`: broadcast shape, promoted dtype (integer `/` is f32), weak when
/// both are.
Typed<TensorType> elementwise_type(ElemOp, const TensorType &a, const TensorType &b);
/// `-a` keeps the type; exp of an integer is f32.
TensorType unary_type(UnaryOp, const TensorType &a);
/// cast(a, t): a's shape, dtype t, strong.
TensorType cast_type(const TensorType &a, DType t);
/// jnp.dot of 1-D/2-D operands: contracted dims equal; f32 when either is a
/// float, else i32.
Typed<TensorType> dot_type(const TensorType &a, const TensorType &b);
/// Reversed axes.
TensorType transpose_type(const TensorType &a);
/// A reduction over `axis` (negative counts from the end; nullopt: all
/// axes), which is dropped; the input's dtype.
Typed<TensorType> reduce_type(Reduction, const TensorType &a, std::optional<std::int64_t> axis);
/// The axis `reduce_type` reduces, normalized to [0, rank) (call after it succeeded).
std::int64_t normalize_axis(std::int64_t axis, std::size_t rank);
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

} // namespace pipecheck::spec
