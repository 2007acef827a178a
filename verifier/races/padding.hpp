#pragma once
/// Where the padding of a partial block (undefined data, spec/step.hpp's
/// strict slot contents; or zeros, where a copy in fills them) can be in a
/// tensor value, element by element, for the race machine
/// (verifier/races/machine.hpp).
///
/// A value's padding is tracked per element while its shape is known and has
/// at most kMaxTrackedElements elements; otherwise any padding in it counts
/// as padding everywhere (a sound over-approximation). Elementwise operations
/// keep padding where it is, a reduction spreads it along the reduced axis, a
/// dot along the rows of its left and the columns of its right operand.
/// Zero padding stays zero where the operation keeps a 0 a 0 and takes no
/// data in beside it (a product, a negation, a sum of zeros); a sum or a dot
/// over it takes nothing of it in; anything else makes it garbage.
///
/// Masks are evaluated concretely: an integer or boolean expression built
/// from literals, bound integer names, `iota`, arithmetic, comparisons,
/// `& | ~`, `where`, `minimum`/`maximum`, `abs`, `sign`, `reshape`,
/// `broadcast_to`, `[:, None]` and locals bound to such expressions has a
/// value per element, and `where(c, a, b)` then takes its padding from `a`
/// only where `c` holds and from `b` only where it does not. A mask that reads a buffer (data) or is
/// too large has no concrete value, and `where` keeps the padding of both.

#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/step.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pipecheck::verifier::races {

/// The most elements a value may have for its padding (or its concrete mask
/// value) to be tracked element by element.
inline constexpr std::int64_t kMaxTrackedElements = std::int64_t{1} << 20;

/// A tensor shape; empty: a scalar.
using Shape = std::vector<std::int64_t>;

/// What an element holds of a partial block's padding.
enum PadState : std::uint8_t {
  kClean = 0,
  /// Undefined data, or a value computed from it (or from zero padding
  /// where the result is no longer 0, `exp(0)`, or sits beside data, `0 + b`).
  kGarbage = 1,
  /// Zero padding (Mosaic GPU's TMA fills a ragged block's part past the
  /// array with zeros, spec::Copy::zeros), or a value still 0 because of it
  /// (`z * b`, `-z`, a sum of zeros): no element of the array, but a sum or a
  /// dot takes it in unchanged. A max, an exp or `z + b` makes it garbage.
  kZero = 2,
};

/// Where a value may hold padding.
struct PadValue {
  std::optional<Shape> shape; ///< nullopt: not known
  bool any = false;           ///< it may hold padding (garbage or zero) somewhere
  /// Per element, row-major, a PadState, when `any` and the shape is known
  /// and small; empty with `any`: garbage may be everywhere.
  std::vector<std::uint8_t> bits;
};

/// A concrete integer or boolean tensor (a mask, an iota), row-major.
struct IntTensor {
  Shape shape;
  std::vector<std::int64_t> v;
  bool is_bool = false;
  /// The range of the integer dtype its values come from (an i16 or u8
  /// iota's narrower than i32's): arithmetic past it is not evaluated (it
  /// would wrap), rather than evaluated exactly.
  std::int64_t lo = -2147483648LL, hi = 2147483647LL;
};

/// The padding of a buffer ref: its value shape and the padded boxes in
/// value coordinates. Throws whatever the resolution throws.
struct RefPadding {
  Shape shape;
  std::vector<spec::StepBox> boxes;
  std::vector<spec::StepBox> zeros; ///< boxes of zero padding (kZero)
};
using RefPaddingFn = std::function<RefPadding(const spec::Expr &ref)>;

/// The padding of tensor locals as a walk binds them.
class PaddingFlow {
public:
  /// `is_buffer(name)`: the name denotes a buffer (read through `ref`).
  PaddingFlow(std::function<bool(const std::string &)> is_buffer, RefPaddingFn ref)
      : is_buffer_(std::move(is_buffer)), ref_(std::move(ref)) {}

  /// The padding of `e` under `env` (integer names) and the bound locals.
  PadValue eval(const spec::Expr &e, const spec::Env &env) const;
  /// The concrete value of an integer/boolean tensor expression, or nullopt.
  std::optional<IntTensor> concrete(const spec::Expr &e, const spec::Env &env) const;

  /// A tensor let `name = value`. Its concrete value is computed when first
  /// asked for (most are never: no padding meets them), from `env` and the
  /// locals as they are now; `value` must outlive the flow (a statement of
  /// the program walked).
  void bind(const std::string &name, const spec::Expr &value, const spec::Env &env);
  /// `name` is no tensor local any more (an integer let), or is bound where
  /// nothing is tracked: it holds no padding and has no known value.
  void forget(const std::string &name);
  /// A store of `value` into the whole of scratch `buffer` (of `shape`, a
  /// dtype that holds every integer value a mask takes: f32, i32 or bool):
  /// a read of the buffer has its concrete value (a mask kept in a scratch,
  /// `m[...] = col < n` then `where(m[...] > 0, x, 0)`) until `clobber`.
  void store(const std::string &buffer, const spec::Expr &value, const spec::Env &env, Shape shape,
             bool boolean);
  /// Anything else that writes `buffer`: its value is no longer known.
  void clobber(const std::string &buffer) { values_.erase(buffer); }

private:
  /// An expression's concrete value as of a bind, computed on first use.
  struct Lazy {
    const spec::Expr *expr = nullptr;
    spec::Env env;                                       ///< the integers its expression names, as bound then
    std::map<std::string, std::shared_ptr<Lazy>> values; ///< the locals it names, as bound then
    std::set<std::string> tensors;                       ///< the tensor locals it names then
    bool forced = false;
    std::optional<IntTensor> value;
    /// A store's: the buffer's shape (the value broadcasts to it) and
    /// whether it is a bool buffer.
    std::optional<Shape> shape;
    bool boolean = true;
    /// The longest chain of unforced values it names (1: none): a value
    /// carried in a scratch from step to step (`m[...] = maximum(m[...], x)`
    /// never reset) would otherwise chain every step's bind, in memory and
    /// in the recursion that forces or frees it.
    int depth = 1;
  };
  using LazyPtr = std::shared_ptr<Lazy>;

  LazyPtr defer(const spec::Expr &e, const spec::Env &env) const;
  const std::optional<IntTensor> &force(Lazy &l) const;
  std::optional<IntTensor> concrete_in(const spec::Expr &e, const spec::Env &env,
                                       const std::map<std::string, LazyPtr> &values,
                                       const std::set<std::string> *tensors) const;

  std::function<bool(const std::string &)> is_buffer_;
  RefPaddingFn ref_;
  std::map<std::string, PadValue> pads_;
  /// A local bound to `c + v` (c another local): c and v's padding, for a
  /// later `c = t` that makes it c's running sum.
  std::map<std::string, std::pair<std::string, PadValue>> sums_;
  std::map<std::string, LazyPtr> values_;
  /// A boolean local bound to `m & d`, d not known: the operands m that
  /// held no padding, in order; the first with a concrete value is the
  /// local's mask (where m is 0 the local is false, whatever d holds).
  std::map<std::string, std::vector<LazyPtr>> and_masks_;
};

/// Where the elements of `v` in `state` (kGarbage or kZero), stored into a
/// ref covering `target` of its buffer and keeping its dims `kept`, land:
/// boxes in buffer coordinates. The value broadcasts into the ref as a store
/// does; when its shape is not known (or does not fit), any padding is
/// garbage over all of `target` (and no element is known zero).
std::vector<spec::StepBox> padding_in_target(const PadValue &v, const spec::StepBox &target,
                                             const std::vector<int> &kept, PadState state = kGarbage);

/// The elements of a value in `state` as boxes (value coordinates); a padded
/// scalar is one empty box.
std::vector<spec::StepBox> padded_boxes(const PadValue &v, PadState state = kGarbage);

} // namespace pipecheck::verifier::races
