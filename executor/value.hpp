#pragma once
/// Block values of the body interpreter and the dense operations on them.
///
/// A Value is a whole block (or a scalar) in a compute representation: float
/// dtypes (f32, bf16, f16) hold f32 numbers already rounded to their dtype,
/// integer dtypes hold int32 numbers wrapped to their width. Every operation
/// works on whole blocks (one dispatch per block, tight loops inside), rounds
/// its result to the result dtype, and follows jnp's promotion: Python
/// literals are weakly typed, f32 wins over bf16/f16, floats over ints.
/// Result shapes and dtypes, and which operands are ill-typed, come from the
/// typing rules of spec/typecheck.hpp, which `check` applies statically.

#include "executor/tensor.hpp"
#include "spec/typecheck.hpp"

#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::executor {

/// An error in a body or program found while running it: an ill-typed or
/// unsupported expression (`bad_input`), or a fault of the program itself
/// (an out-of-bounds access, a wait with nothing to wait for).
class ExecError : public std::runtime_error {
public:
  enum class Kind { bad_input, fault };
  ExecError(Kind k, spec::Loc loc, const std::string &msg) : std::runtime_error(msg), kind(k), loc(loc) {}
  Kind kind;
  spec::Loc loc;
};

/// An allocator that keeps freed large buffers in a small per-thread cache:
/// block values are allocated and freed once per statement, and fresh pages
/// from the OS (a page fault per 4 KiB) would otherwise dominate the run.
template <class T> struct BlockAllocator {
  using value_type = T;
  BlockAllocator() = default;
  template <class U> BlockAllocator(const BlockAllocator<U> &) {}
  T *allocate(std::size_t n);
  void deallocate(T *p, std::size_t n);
  template <class U> bool operator==(const BlockAllocator<U> &) const { return true; }
  /// `resize(n)` leaves new elements uninitialised (default-initialised):
  /// every user of a block overwrites all of it, and zeroing a block first
  /// would be one more pass over megabytes.
  template <class U> void construct(U *p) noexcept { ::new (static_cast<void *>(p)) U; }
  template <class U, class... Args> void construct(U *p, Args &&...args) {
    ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...);
  }
};
void *block_alloc(std::size_t bytes);
void block_free(void *p, std::size_t bytes);
template <class T> T *BlockAllocator<T>::allocate(std::size_t n) {
  return static_cast<T *>(block_alloc(n * sizeof(T)));
}
template <class T> void BlockAllocator<T>::deallocate(T *p, std::size_t n) { block_free(p, n * sizeof(T)); }

using FloatVec = std::vector<float, BlockAllocator<float>>;
using IntVec = std::vector<std::int32_t, BlockAllocator<std::int32_t>>;

/// A bound on how far a value may be from what a correct body computes for
/// it: the running error analysis of a kernel's `reference:`
/// (executor/error_bound.hpp). Off (the body's values) it costs nothing: no
/// operation computes it. On, every operation sets its result's from its
/// operands' (an operation with one tracked operand tracks its result).
/// Where the body's partial sums of an output live: their dtype
/// (reference.hpp's accumulation_dtype) and, for one narrower than f32, how
/// many times an element is rounded to it (its accumulation steps: the grid
/// steps per output block; 0: at every term).
struct Accumulation {
  spec::DType dtype = spec::DType::f32;
  std::int64_t steps = 0;
  Accumulation(spec::DType t = spec::DType::f32, std::int64_t s = 0) : dtype(t), steps(s) {}
};

struct ErrorBound {
  bool on = false;
  /// How partial sums are taken to accumulate, for the rounding of a sum or
  /// dot (the body's).
  Accumulation acc;
  /// Per element (row-major, the value's shape): |reference - body| <= e[k]
  /// for a body that computes the same formula in another order. Empty: 0
  /// everywhere (exact: an input, a literal, iota). +inf: unbounded (an
  /// operation whose error the analysis cannot follow).
  FloatVec e;
};

struct Value {
  spec::DType dtype = spec::DType::f32;
  bool weak = false; ///< a Python literal: adopts the other operand's dtype
  Shape shape;       ///< empty: a scalar
  FloatVec f;        ///< float dtypes
  IntVec i;          ///< integer dtypes
  ErrorBound bound;  ///< the reference's error bound (off in a body)

  bool is_float() const { return spec::dtype_is_float(dtype); }
  std::int64_t size() const { return num_elements(shape); }
  /// Element k as a double.
  double at(std::int64_t k) const { return is_float() ? f[k] : i[k]; }

  static Value scalar_float(double v, spec::DType t = spec::DType::f32, bool weak = true);
  static Value scalar_int(std::int64_t v, spec::DType t = spec::DType::i32, bool weak = true);
  /// Its type, for the typing rules.
  spec::TensorType type() const { return spec::TensorType{dtype, weak, shape}; }
};

using BinOp = spec::ElemOp;
using UnOp = spec::UnaryOp;
using ReduceOp = spec::Reduction;

/// Loads a view into a value of the view's dtype and shape.
Value load(const View &);
/// Stores `v` into the view: `v` is broadcast to the view's shape and cast
/// to its dtype. Throws ExecError(bad_input) when it does not broadcast.
void store(const Value &v, const View &, spec::Loc loc = {});

/// The dtype jnp gives `a op b`.
spec::DType promote(const Value &a, const Value &b);
/// Elementwise with numpy broadcasting; throws ExecError(bad_input) when the
/// shapes do not broadcast. Integer `div` is true division (f32), as in jnp.
Value binary(BinOp, const Value &a, const Value &b, spec::Loc loc = {});
/// The same, reusing `a`'s storage for the result when it can.
Value binary(BinOp, Value &&a, const Value &b, spec::Loc loc = {});
/// The float functions of an integer value are f32 (spec::unary_type);
/// throws ExecError(bad_input) for `~` of a float.
Value unary(UnOp, const Value &a, spec::Loc loc = {});
/// A comparison with numpy broadcasting, in the operands' promoted dtype; bool.
Value compare(spec::CompareOp, const Value &a, const Value &b, spec::Loc loc = {});
/// jnp.where: a where c is nonzero, else b, all three broadcast together.
Value where(const Value &c, const Value &a, const Value &b, spec::Loc loc = {});
/// lax.broadcasted_iota: each element of `shape` is its index along `dim`.
Value iota(spec::DType, const Shape &shape, std::int64_t dim, spec::Loc loc = {});
/// The same elements in row-major order, another shape of the same size.
Value reshape(const Value &a, const Shape &shape, spec::Loc loc = {});
/// `m[:, None]`, `m[0]`, `m[:, 2:4]` (spec::index_value).
Value index(const Value &a, const std::vector<spec::ValueSubscript> &subs, spec::Loc loc = {});
Value cast(const Value &a, spec::DType t);
/// Broadcasts to `shape` (numpy rules).
Value broadcast_to(const Value &a, const Shape &shape, spec::Loc loc = {});
/// jnp.tile(a, reps) (spec::tile_type); throws ExecError(bad_input) on a negative rep.
Value tile(const Value &a, const Shape &reps, spec::Loc loc = {});
/// jnp.concatenate(parts, axis) (spec::concatenate_type).
Value concatenate(const std::vector<Value> &parts, std::int64_t axis, spec::Loc loc = {});
/// pltpu.roll / jnp.roll along `axis`: element i is a's (i - shift) mod n.
/// With a stride, row r along `stride->second` is rolled by shift + r * stride->first.
Value roll(const Value &a, std::int64_t shift, std::int64_t axis,
           std::optional<std::pair<std::int64_t, std::int64_t>> stride = std::nullopt, spec::Loc loc = {});
/// jnp.flip along `axis` (lax.rev).
Value flip(const Value &a, std::int64_t axis, spec::Loc loc = {});
/// lax.argmax / argmin over `axis`: i32, the first index of the extreme; a
/// NaN counts as the extreme (the first NaN wins), as lax's comparator does.
Value arg_reduce(bool max, const Value &a, std::int64_t axis, spec::Loc loc = {});
/// lax.cumsum / cummax / cummin along `axis` (from the end when `reverse`).
Value cumulative(ReduceOp op, const Value &a, std::int64_t axis, bool reverse, spec::Loc loc = {});
/// lax.shift_left / shift_right_logical / shift_right_arithmetic on integers,
/// on the bits of the promoted dtype: a shift by a negative amount or by at
/// least the bit width gives 0 (the arithmetic right shift: the sign fill).
enum class Shift { left, right_logical, right_arithmetic };
Value shift(Shift op, const Value &a, const Value &b, spec::Loc loc = {});
/// jnp.dot for 1-D/2-D operands. Floats accumulate in f32 and give f32 (as
/// preferred_element_type=f32); integers accumulate in int64, give i32.
Value dot(const Value &a, const Value &b, spec::Loc loc = {}, const spec::DotOptions &opts = {});
/// lax.dot_general (spec::dot_general_type): each batch of a's free x
/// contracted dims times b's contracted x free dims is a 2-D `dot`, so it
/// accumulates as dot does; cast to `preferred` when given.
Value dot_general(const Value &a, const Value &b, const spec::DotDims &dims, spec::Loc loc = {},
                  std::optional<spec::DType> preferred = std::nullopt);
/// Reverses the axes.
Value transpose(const Value &a);
/// Reduction over one axis (negative counts from the end) or all axes
/// (axis nullopt); the axis is dropped. Float sums accumulate in f32 in
/// index order and round to the input dtype.
Value reduce(ReduceOp, const Value &a, std::optional<std::int64_t> axis, spec::Loc loc = {},
             bool keepdims = false);

} // namespace pipecheck::executor
