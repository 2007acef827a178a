#pragma once
/// The one concrete binding of a KernelSpec: grid extents, each operand's
/// array shape and block dims as numbers under bound params, and the block
/// index an operand's index_map gives at a grid point. The spec rules'
/// model, the executor's oracle and the lowering all evaluate a kernel
/// through it, so they agree on every size and block index, and on the
/// located error when one cannot be evaluated.

#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::spec {

/// Why a kernel (or a block index) could not be bound.
enum class BindFault {
  unbound,   ///< it names a param with no value (symbolic): bind it with --set
  bad_input, ///< a division by zero, an overflow, a negative extent, a non-positive block, a rank mismatch
};

/// A binding failure, located at the expression (or operand) at fault.
struct BindError {
  BindFault fault = BindFault::bad_input;
  Diagnostic diag;
};

/// One `in`/`out`/`scratch` operand with its sizes evaluated.
struct BoundOperand {
  const Operand *decl = nullptr;
  std::string name;
  Role role = Role::in;
  DType dtype = DType::f32;
  Loc loc;
  std::vector<std::int64_t> shape;      ///< the array's extents
  std::vector<std::int64_t> block;      ///< per array dim; 1 where squeezed; the shape without a block
  std::vector<bool> squeezed;           ///< per array dim: `None` in the block
  std::vector<std::int64_t> num_blocks; ///< cdiv(shape, block) per dim
  /// Pipelined through a VMEM/SMEM window (an in/out in vmem or smem).
  bool windowed = false;
  std::vector<std::string> index_params; ///< the index_map's lambda params; empty without one
  /// The block index per array dim with every bound param replaced by its
  /// value (the lambda params and unbound params stay names); literal zeros
  /// without an index_map.
  std::vector<Expr> index;

  /// Per array dim: an Element dim (pl.Element), whose index is an element
  /// offset into the array padded by pad_lo before and pad_hi after; for it
  /// num_blocks is the number of offsets whose window fits the padded array
  /// (so an index in [0, num_blocks) is in bounds either way).
  std::vector<bool> element;
  std::vector<std::int64_t> pad_lo, pad_hi;

  /// The first array element of the window at index `idx` along dim `d`:
  /// idx * block, idx - pad_lo for an Element dim, idx where squeezed.
  std::int64_t window_start(std::size_t d, std::int64_t idx) const;
  /// Whether some dim is an Element dim.
  bool has_element_dims() const;

  /// Per array dim: a BoundedSlice dim (pl.BoundedSlice), whose index (in
  /// `index`) is the start element of `ds(start, size)` and whose window is
  /// array elements [start, start + size); `block` is its bound. For it
  /// num_blocks is extent + 1 (the starts in [0, extent]); size and bound
  /// are checked by the rules.
  std::vector<bool> bounded;
  /// Per array dim: the window's extent, bound like `index`: the ds size of
  /// a BoundedSlice dim, the literal block elsewhere.
  std::vector<Expr> size;
  /// Whether some dim is a BoundedSlice dim.
  bool has_bounded_dims() const;
  /// What names the window at a grid point, bound like `index`: the index
  /// per array dim, then the ds size of each BoundedSlice dim in order. Two
  /// grid points whose values agree have the same window (Pallas keeps it
  /// in its slot, copies nothing in or out between them); a BoundedSlice
  /// window with the same start and another size is another window. Equal
  /// to `index` without BoundedSlice dims.
  std::vector<Expr> window;

  /// The block as the body sees it (squeezed dims removed).
  std::vector<std::int64_t> block_view_shape() const;
  /// The array dim of the `v`-th non-squeezed dim.
  std::optional<std::size_t> view_to_array_dim(std::int64_t v) const;
  /// dtype bytes x block elements, saturating.
  std::int64_t block_bytes() const;
};

/// A kernel with its grid and operands bound.
struct BoundKernel {
  const KernelSpec *spec = nullptr;
  Env params; ///< the bound params (symbolic ones may be missing)
  std::vector<std::int64_t> grid;
  std::vector<BoundOperand> operands; ///< in declaration order

  std::optional<std::size_t> operand_index(const std::string &name) const;
  const BoundOperand *operand(const std::string &name) const;
  /// The number of grid points, saturating at INT64_MAX.
  std::int64_t num_points() const;
  /// The `linear`-th grid point in grid order (last axis fastest; grid_point
  /// with no CTA axes).
  std::vector<std::int64_t> point(std::int64_t linear) const;
};

/// Mosaic GPU: the grid axes that are CTA axes. Pallas makes the `parallel`
/// axes of dimension_semantics the CUDA grid and runs the other axes
/// (sequential, arbitrary) as one emit_pipeline per CTA; with no
/// dimension_semantics every axis is parallel (one step per CTA).
std::vector<bool> cta_axes(const KernelSpec &, std::size_t grid_rank);

/// Mosaic GPU: whether the block of operand `o` may move within a CTA's
/// pipeline: its index map names some non-CTA axis (Pallas'
/// `_is_index_invariant` negated, which reads the index map's jaxpr after
/// dead-code elimination: a name the results mention counts, `k * 0` too).
/// Such an output is copied out inside the loop, on the first step of each
/// visit and at the CTA's last step; any other output once, after the loop.
bool moves_within_cta(const Operand &o, const std::vector<bool> &cta);

/// Mosaic GPU: the number of pipeline steps in one CTA (the product of the
/// non-CTA extents; 1 when every axis is a CTA axis).
std::int64_t cta_steps(const std::vector<std::int64_t> &grid, const std::vector<bool> &cta);

/// The grid point at position `linear` of the order the lowered program (and
/// the oracle) run: CTA by CTA (CTA axes in lexicographic order, last
/// fastest), each CTA's pipeline steps in lexicographic order of the other
/// axes. A new CTA starts where `linear % cta_steps(...) == 0`. With no CTA
/// axes (`cta` empty: TPU) or leading ones (the usual case) this is plain
/// grid order, last axis fastest.
std::vector<std::int64_t> grid_point(const std::vector<std::int64_t> &grid, const std::vector<bool> &cta,
                                     std::int64_t linear);
/// The position of `point` in that order: grid_point's inverse.
std::int64_t grid_position(const std::vector<std::int64_t> &grid, const std::vector<bool> &cta,
                           const std::vector<std::int64_t> &point);

/// The result of bind_kernel(): a kernel or an error.
struct Binding {
  std::optional<BoundKernel> kernel;
  std::optional<BindError> error; ///< set exactly when kernel is not
};

/// Binds a validated kernel under `params` (from spec::bind_params). The
/// grid, shapes and blocks must evaluate: a param they need and `params`
/// lacks is BindFault::unbound; an arithmetic error, a negative extent, a
/// block that is not positive, a size over 64 bits, or an index map that
/// divides by zero whatever the grid point, is bad input.
Binding bind_kernel(const KernelSpec &, const Env &params);

/// The block index of an operand at a grid point, or why there is none.
struct BlockIndex {
  std::optional<std::vector<std::int64_t>> value;
  std::optional<BindError> error; ///< set exactly when value is not
};

/// The block index `op` maps grid point `point` to (program_id and
/// num_programs in the index map read the point and the grid). An overflow
/// or division by zero is bad input located at the operator, naming the
/// point ("integer overflow in the index map of 'x' at grid point (8,)"); an
/// unbound param is BindFault::unbound.
BlockIndex block_index(const BoundOperand &op, const Env &params, const std::vector<std::int64_t> &grid,
                       const std::vector<std::int64_t> &point);
BlockIndex block_index(const BoundKernel &, std::size_t op, const std::vector<std::int64_t> &point);

/// The window extents of `op` at grid point `point`, per array dim: the
/// evaluated ds size of a BoundedSlice dim, the block elsewhere (1 where
/// squeezed). Errors as block_index.
BlockIndex window_sizes(const BoundOperand &op, const Env &params, const std::vector<std::int64_t> &grid,
                        const std::vector<std::int64_t> &point);

/// The values of `op.window` at grid point `point` (what names its window
/// there: the block index, then the ds sizes of BoundedSlice dims). Errors
/// as block_index.
BlockIndex window_at(const BoundOperand &op, const Env &params, const std::vector<std::int64_t> &grid,
                     const std::vector<std::int64_t> &point);

/// block_index() of one operand at many grid points of one rank (`rank`
/// coordinates each), its environment built once: the spec rules evaluate
/// every point of a small grid.
class BlockIndexer {
public:
  /// `exprs`: what to evaluate per dim (the operand's window sizes, say); its index by default.
  BlockIndexer(const BoundOperand &, const Env &params, std::vector<std::int64_t> grid, std::size_t rank,
               const std::vector<Expr> *exprs = nullptr);
  BlockIndexer(const BlockIndexer &) = delete;
  BlockIndexer &operator=(const BlockIndexer &) = delete;
  /// block_index(op, params, grid, point); point.size() must be `rank`.
  BlockIndex at(const std::vector<std::int64_t> &point);

private:
  const BoundOperand &op_;
  const std::vector<Expr> &exprs_;
  std::vector<std::int64_t> grid_;
  Env env_;
  std::vector<std::int64_t *> index_vars_; // the lambda params' values in env_
  std::vector<char> grid_calls_;           // per dim: its index names program_id or num_programs
};

/// The number of points of a grid, saturating at INT64_MAX.
std::int64_t num_points(const std::vector<std::int64_t> &grid);

/// Replaces program_id(a) and num_programs(a) by the point's coordinates and
/// the grid's extents.
Expr bind_grid(const Expr &, const std::vector<std::int64_t> &point, const std::vector<std::int64_t> &grid);

/// The name program_id(a) has in grid_calls_as_names' result, one that no
/// identifier can be: its value at a point goes in the env.
std::string program_id_var(std::int64_t a);
/// The name num_programs(a) is read by from an env (spec::evaluate).
std::string num_programs_var(std::int64_t a);
/// Binds a grid point's program_id_var and the grid's num_programs_var
/// names in `env`: spec::evaluate reads program_id(a) and num_programs(a)
/// calls from them, with no bind_grid rewrite of the expression.
void bind_point_names(Env &env, const std::vector<std::int64_t> &point,
                      const std::vector<std::int64_t> &grid);

/// bind_grid for a point of `rank` coordinates not yet known: program_id(a)
/// becomes the name program_id_var(a), num_programs(a) the grid's extent; so
/// that an expression evaluated at many points is rewritten once.
Expr grid_calls_as_names(const Expr &, std::size_t rank, const std::vector<std::int64_t> &grid);

/// "(0, 1, 2)"; a 1-tuple is "(0,)".
std::string format_tuple(const std::vector<std::int64_t> &);

} // namespace pipecheck::spec
