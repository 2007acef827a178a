#pragma once
/// The body interpreter: evaluates `.pk` tensor expressions and executes body
/// statements (stores, `+=`, local bindings, `when`/`if`) at block
/// granularity over a Memory that maps buffer names to host arrays.
///
/// Refs are subscripted on the named array by the one indexing rule of
/// spec/place.hpp (the race machine's too): an index drops a dim, a slice
/// `lo:hi` keeps it, `...` and `:` keep whole dims, and nothing wraps — a
/// negative or too large subscript is a fault. A slot ring is an array whose
/// first dim is the slot, so `X[cur]` picks a slot the same way.
/// `program_id(a)` / `num_programs(a)` read the names `program_id$a` /
/// `num_programs$a` of the integer environment (`rewrite_grid_calls`).

#include "executor/tensor.hpp"
#include "executor/value.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace pipecheck::executor {

/// Where refs point. The before_* hooks let a runner order an access after
/// the asynchronous copies it conflicts with.
class Memory {
public:
  virtual ~Memory() = default;
  /// The array a name denotes, or nullptr when it names no buffer.
  virtual HostArray *array(const std::string &name) = 0;
  /// The error bound of the array a name denotes (an f32 array of its
  /// shape: Interp::bounds), or nullptr where it is exact.
  virtual HostArray *bound_of(const std::string &name) {
    (void)name;
    return nullptr;
  }
  virtual void before_read(const View &) {}
  virtual void before_write(const View &) {}
  /// A body's store of a value into `dst` (after before_write) by the
  /// statement at `at`: `masked` when it is `where(mask, v, dst)`, which
  /// keeps what the mask leaves.
  virtual void on_store(const View &dst, bool masked, spec::Loc at) {
    (void)dst;
    (void)masked;
    (void)at;
  }
  /// Whether on_load wants to hear of loads (they cost a lookup each).
  virtual bool follows_loads() const { return false; }
  /// A body's load of `src` (after before_read) by the statement at `at`.
  /// `lanes`: null for a load of every element; for a load a `where` masks
  /// (spec::load_masks: a Triton masked load), the elements of src's value
  /// its masks select (spec::selected_lanes, flat, row-major), the only ones
  /// it reads.
  virtual void on_load(const View &src, const std::vector<bool> *lanes, spec::Loc at) {
    (void)src;
    (void)lanes;
    (void)at;
  }
};

/// `program_id(a)` -> Name `program_id$a`, `num_programs(a)` -> `num_programs$a`
/// (a must be an integer literal), everywhere in the expression / block.
spec::Expr rewrite_grid_calls(const spec::Expr &);
spec::Block rewrite_grid_calls(const spec::Block &);
/// The env names rewrite_grid_calls uses.
std::string program_id_name(int axis);
std::string num_programs_name(int axis);

class Interp {
public:
  explicit Interp(Memory &mem) : mem_(mem) {}

  spec::Env env;                       ///< integers: params, loop vars, grid ids
  std::map<std::string, Value> locals; ///< tensor bindings
  /// Set (to the dtype a body accumulates in), every value loaded from
  /// memory carries an error bound (Value::bound: Memory::bound_of's, or
  /// exact), which every operation on it carries on: a reference's running
  /// error analysis (executor/error_bound.hpp). Unset for a body: nothing is
  /// computed.
  std::optional<Accumulation> bounds;

  /// An integer expression; throws ExecError(bad_input) when it has no value.
  std::int64_t eval_int(const spec::Expr &);
  /// A shape argument `(a, b, ...)` of integer expressions.
  Shape shape_of(const spec::Expr &);
  /// A tensor expression.
  Value eval(const spec::Expr &);
  /// The view a ref (Op::Ref or a bare buffer Name) denotes; throws
  /// ExecError(fault) on an out-of-bounds subscript.
  View view_of(const spec::Expr &ref);
  /// Executes an Assign, Let, If (`when`) or For (a body loop) statement; other statement kinds
  /// are the runner's. A body DMA (oracle, per grid point) copies at its start
  /// or sync_copy, as if it finished at once; waits and semaphores do nothing.
  void exec(const spec::Stmt &);
  void exec(const spec::Block &);
  /// What entering a body loop does to the locals (exec calls it): the loop
  /// variable is no tensor, and a weak carry becomes strong (fori_loop).
  void begin_loop(const spec::For &);
  /// Runs the way of `i` that `taken` selects through `run` (exec, or a
  /// caller's walk), then joins weak types as lax.cond does (spec::typecheck):
  /// a strong local the other way leaves as it was stays strong after a
  /// branch that rebinds it to a literal.
  void exec_branch(const spec::If &i, bool taken, const std::function<void(const spec::Block &)> &run);

private:
  Value eval_node(const spec::Expr &); ///< eval without its bound switched on
  struct Fused;
  /// The fast path of exec for elementwise f32 statements (see interp.cpp);
  /// false when the statement is not one, having done nothing.
  bool exec_fused(const spec::Stmt &);
  bool plan_fused(const spec::Expr &, Fused &, int &node);

  Memory &mem_;
  /// The masked loads (spec::load_masks) of the statement values executed
  /// so far, for on_load, and those values.
  std::map<const spec::Expr *, spec::LoadMask> masked_refs_;
  std::set<const spec::Expr *> scanned_;
  /// The kept branches of keep stores (spec::kept_ref): not loads.
  std::set<const spec::Expr *> kept_refs_;
  /// The values of the conditions of the wheres being evaluated (while
  /// on_load follows loads): a masked load's lanes come from its mask's.
  std::map<const spec::Expr *, const Value *> conds_;
  spec::Loc stmt_loc_; ///< the statement being executed (on_load)
  /// Whether each statement's own expressions read scalar-prefetch arrays,
  /// as elaboration leaves the reads (spec::elaborated_read_bounds).
  std::map<const spec::Stmt *, bool> prefetch_reads_;
  /// Faults at a read of a scalar-prefetch array outside it (as check's
  /// index-out-of-bounds; on a TPU the SMEM load takes whatever lies next to
  /// the table), before `s` runs.
  void check_prefetch_reads(const spec::Stmt &s);
  /// Tells the memory of the load `v` of ref `e` by the statement being
  /// executed (e null: a load of every element).
  void loaded(const View &v, const spec::Expr *e);
  /// Loads the view `v` of the array named `name`, with its bound where
  /// `bounds` is set.
  Value load_value(const View &v, const std::string &name);
  std::map<std::string, spec::Dma> descriptors_; // the body's async_copy bindings
};

} // namespace pipecheck::executor
