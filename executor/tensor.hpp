#pragma once
/// Host arrays for the reference executor: typed storage, exact bf16/f16
/// rounding, poison, seeded random fill, and box-shaped views into arrays.
///
/// Every buffer the executor touches (HBM arrays, slot rings, scratch, block
/// buffers of the oracle) is a HostArray. A View is a box of an array (per-dim
/// [lo, hi) in the array's coordinates) with some dims dropped by integer
/// subscripts; the box doubles as the footprint the DMA engine uses to order
/// accesses.

#include "spec/ir.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace pipecheck::executor {

using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a scalar); saturates at INT64_MAX
/// (an estimate then exceeds any limit) where the exact count does not fit.
std::int64_t num_elements(const Shape &);
/// "[4, 512]".
std::string shape_string(const Shape &);

/// Round-to-nearest-even conversions (NaN stays NaN, overflow becomes inf).
std::uint16_t f32_to_bf16(float);
float bf16_to_f32(std::uint16_t);
std::uint16_t f32_to_f16(float);
float f16_to_f32(std::uint16_t);

/// The value a float of dtype `t` holds after rounding `v` to `t`
/// (f32: unchanged; bf16/f16: rounded; integer dtypes: not allowed).
float round_to(spec::DType t, float v);
/// Wraps an integer to the width of the integer dtype `t` (bool: != 0).
std::int32_t wrap_to(spec::DType t, std::int64_t v);

/// The poison of an integer dtype: its lowest value (bool: true), as
/// `pl.enable_poison_buffers` fills on hardware. Floats are poisoned with NaN.
std::int32_t int_poison(spec::DType);

/// A dense row-major host array of one dtype. Not copyable (it may be large);
/// `clone()` copies explicitly.
class HostArray {
public:
  /// Allocates uninitialised storage; `fill_*` gives it contents. Throws
  /// std::length_error when an extent is negative or the byte size does not
  /// fit int64 (callers size arrays against their memory limit first).
  HostArray(std::string name, spec::DType, Shape);
  HostArray(const HostArray &) = delete;
  HostArray &operator=(const HostArray &) = delete;

  const std::string &name() const { return name_; }
  spec::DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  const Shape &strides() const { return strides_; } ///< in elements
  std::int64_t size() const { return size_; }       ///< elements
  std::int64_t bytes() const { return size_ * elem_bytes_; }
  int elem_bytes() const { return elem_bytes_; }
  std::byte *data() { return data_.get(); }
  const std::byte *data() const { return data_.get(); }

  /// Element `i` (flat) as a double, whatever the dtype.
  double get(std::int64_t i) const;
  /// Sets element `i` (flat) from a double, rounding/wrapping to the dtype.
  void set(std::int64_t i, double v);
  /// True when element `i` holds poison (NaN, or the integer sentinel).
  bool is_poison(std::int64_t i) const;

  void fill_poison();
  /// Poisons the `count` elements from flat offset `offset`.
  void fill_poison(std::int64_t offset, std::int64_t count);
  /// From now on fill_poison writes a defined-looking stand-in instead:
  /// `kind` 1 is 3.0, an integer dtype's largest value (u8: 254) and false;
  /// kind 2 is -3.0, 0 and true. A run on such arrays tells an integer
  /// sentinel the program computed (the same in both runs) from one copied
  /// out of memory nothing wrote, and a result that undefined data reaches
  /// through a comparison (`ids == iota` counts a stand-in id 0, not the
  /// sentinel; `x < 0` counts -3.0, not NaN).
  void poison_with_stand_in(int kind = 1) { stand_in_ = kind; }
  void fill_zero();
  /// Seeded values, never all zero: floats uniform in [-1, 1) rounded to the
  /// dtype, integers uniform in [-64, 64] (bool: 0/1). Same seed, same data.
  void fill_random(std::uint64_t seed);
  /// A copy with the same name, dtype, shape and contents.
  std::unique_ptr<HostArray> clone() const;
  void copy_from(const HostArray &);

private:
  std::string name_;
  spec::DType dtype_;
  Shape shape_, strides_;
  std::int64_t size_ = 0;
  int elem_bytes_ = 4;
  int stand_in_ = 0; ///< poison_with_stand_in's kind, 0: poison
  struct Free {
    void operator()(std::byte *p) const;
  };
  std::unique_ptr<std::byte[], Free> data_;
};

/// A box of an array: per array dim [lo, hi). Boxes of different arrays never
/// overlap.
struct Box {
  const HostArray *array = nullptr;
  Shape lo, hi;
  bool overlaps(const Box &) const;
};

/// A view: a box of an array whose dims listed in `kept` are the view's dims
/// (in order); the other dims of the box have extent 1 (dropped by an index).
struct View {
  HostArray *array = nullptr;
  Box box;
  std::vector<int> kept;

  /// The whole array.
  static View whole(HostArray &);
  Shape shape() const;
  std::int64_t size() const;
  spec::DType dtype() const { return array->dtype(); }
  /// Flat element offset of the box's first element.
  std::int64_t offset() const;
  /// True when the view's elements are one contiguous run of its array.
  bool is_contiguous() const;
  /// Calls fn(flat_offset, run_length) for each maximal contiguous run of the
  /// view, in row-major order.
  template <class F> void for_each_run(F &&fn) const;
  /// Fills the view's elements with poison (HostArray::fill_poison).
  void fill_poison() const {
    for_each_run([&](std::int64_t off, std::int64_t n) { array->fill_poison(off, n); });
  }
  /// Fills the view's elements with zeros.
  void fill_zero() const {
    for_each_run([&](std::int64_t off, std::int64_t n) {
      std::memset(array->data() + off * array->elem_bytes(), 0,
                  static_cast<std::size_t>(n) * static_cast<std::size_t>(array->elem_bytes()));
    });
  }
  /// A readable "X[1, 0:512]".
  std::string to_string() const;
};

/// How a copy may treat the caches.
enum class CopyHint {
  normal,     ///< ordinary stores: the destination stays cached
  stream_dst, ///< the destination will not be read soon (a copy out to HBM):
              ///< large copies write around the caches (non-temporal stores)
              ///< where the platform has them; same bytes as `normal`
};

/// Copies src into dst element by element in row-major order (same dtype,
/// same number of elements); one memcpy per contiguous run the two views
/// share. Every store is visible to a thread that synchronizes with the
/// caller afterwards (a streaming copy ends with a store fence).
void copy_view(const View &src, const View &dst, CopyHint hint = CopyHint::normal);
/// copy_view, but only the elements of src whose bytes differ from the
/// element at the same position of `base` (a view shaped like dst): a
/// write-back of only what a program changed (a Triton program's stores).
void copy_view_changed(const View &src, const View &dst, const View &base);

// ------------------------------------------------------------ implementation

template <class F> void View::for_each_run(F &&fn) const {
  const auto &shape = array->shape();
  const auto &strides = array->strides();
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    fn(std::int64_t{0}, std::int64_t{1});
    return;
  }
  // The innermost run: trailing dims the box covers fully, then one partial.
  int inner = rank - 1;
  std::int64_t run = box.hi[inner] - box.lo[inner];
  while (inner > 0 && box.lo[inner] == 0 && box.hi[inner] == shape[inner]) {
    --inner;
    run *= box.hi[inner] - box.lo[inner];
  }
  if (run == 0) return;
  std::int64_t base = offset();
  if (inner == 0) {
    fn(base, run);
    return;
  }
  // Odometer over dims [0, inner).
  std::vector<std::int64_t> idx(inner, 0);
  for (;;) {
    std::int64_t off = base;
    for (int d = 0; d < inner; ++d)
      off += idx[d] * strides[d];
    fn(off, run);
    int d = inner - 1;
    while (d >= 0) {
      if (++idx[d] < box.hi[d] - box.lo[d]) break;
      idx[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

} // namespace pipecheck::executor
