#pragma once
/// The one Program semantics: a stepper that walks a pipeline for one binding
/// of its params and reports what happens as events. The race checker
/// (verifier/races/machine.hpp) and the executor (executor/program_runner.hpp)
/// both consume it, so `check` and `run` see the same statements, places,
/// wait matching, retirements and faults (docs/lowering.md "Race semantics").
///
/// The stepper decides:
/// - control flow: `for` (the loop variable is bound in the env), `if`,
///   integer lets (bound in the env, no event);
/// - every ref's place by spec/place.hpp's one indexing rule (a ring's first
///   subscript is the slot; nothing wraps);
/// - wait matching: copy_in_wait(X[s]) retires the oldest copy into X[s],
///   copy_out_wait(Y[s]) the oldest copy out of Y[s]; wgmma_wait(n) retires
///   the oldest wgmmas until at most n remain;
/// - faults: a subscript outside its buffer or ring (`index-out-of-bounds`:
///   the run stops there) and a wait with nothing in flight (`wait-without-
///   copy`: a hang; the wait retires nothing and the run goes on, unless the
///   consumer stops it by throwing);
/// - strict slot contents: a copy fills its destination's leading corner
///   where its source is smaller, or the part at its `offset=` (spec::fit_copy;
///   the rest is undefined, or zeros for a copy in with `zeros=True`; an
///   offset past the slot is index_out_of_bounds), and
///   a copy_out_wait leaves its slot undefined unless another write-back out
///   of it is still in flight or the slot was written after the retired copy
///   started;
/// - DMAs on semaphores (`dma_start(src, dst, S)`, `dma_wait(dst, S)`,
///   `sync_copy`, `semaphore_signal` / `semaphore_wait`; docs/lowering.md
///   "DMAs and semaphores in kernel bodies"): a DMA adds its bytes to S when it
///   completes, a wait takes bytes(dst) from S. Copies on S complete in any
///   order, so a wait retires a copy only once the bytes waited on S exceed
///   what all the other outstanding copies on S could have supplied (with
///   equal sizes: when every outstanding copy on S is waited for). A wait
///   that asks for more bytes than the outstanding copies on S can ever
///   supply, or a semaphore_wait for more than was signalled, hangs
///   (`wait-without-copy`).

#include "spec/eval.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pipecheck::spec {

/// A program the stepper cannot run: an unevaluable expression, a name that
/// is not a buffer, a ring used without a slot (bad input to the executor,
/// `unknown` to the checker).
struct StepError : std::runtime_error {
  Loc loc;
  StepError(const std::string &m, Loc l) : std::runtime_error(m), loc(l) {}
};

/// Half-open intervals, one per dim of a buffer (or of a ring's block).
using StepBox = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// Where a ref points: a buffer (index into Program::buffers), its slot (-1
/// when not a ring) and the box it covers of the buffer (or slot's block).
struct StepPlace {
  int buffer = -1;
  std::int64_t slot = -1;
  StepBox box;
  friend bool operator==(const StepPlace &, const StepPlace &) = default;
};

/// A resolved ref: its place and the box dims it keeps (an index drops one).
struct StepRef {
  StepPlace place;
  std::vector<int> kept;
};

enum class AsyncKind { copy_in, copy_out, wgmma };
/// semaphore_nonzero: a semaphore is not zero when the program ends (a DMA
/// wait that completed copies while taking fewer bytes than they brought, the
/// rest never waited; a signal nothing waited). Reported after the walk, at
/// the statement that left the count (with its loop values), before on_end.
enum class FaultKind { index_out_of_bounds, wait_without_copy, semaphore_nonzero };

/// An asynchronous operation as started. Ops are numbered from 0 in start order.
struct AsyncStart {
  AsyncKind kind = AsyncKind::copy_in;
  /// copies: the refs as written, and what the copy reads of its source and
  /// fills of its destination (narrowed by spec::fit_copy where they differ).
  StepRef src, dst;
  StepPlace src_read, dst_filled;
  /// copy_in_start(..., zeros=True): the rest of dst (past dst_filled) is
  /// filled with zeros rather than left undefined.
  bool zero_fill = false;
  StepRef acc, a, b;                     ///< wgmma
  bool trans_a = false, trans_b = false; ///< wgmma: operands read transposed
};

/// What the stepper reports. Throwing from a callback stops the walk (the
/// exception propagates out of Stepper::run).
class StepConsumer {
public:
  virtual ~StepConsumer() = default;
  /// At the start of every iteration of every loop (the variable is bound).
  virtual void on_iteration(const For &, std::int64_t) {}
  /// An integer let binds `name` (already set in the env).
  virtual void on_int_let(const Stmt &, const std::string &name) { (void)name; }
  /// A compute statement: a store (`X[s] = ...`, `X[s] += ...`, a buffer's
  /// `T = ...`), with `write` its target, or a tensor let (`write` absent).
  /// `reads`: the buffer refs its value reads, in order (the target last,
  /// for `+=`).
  virtual void on_compute(const Stmt &, const std::vector<StepRef> &reads,
                          const std::optional<StepRef> &write) = 0;
  /// A copy or wgmma starts as op number `op`.
  virtual void on_start(const Stmt &, int op, const AsyncStart &) = 0;
  /// A copy wait or wgmma_wait; `retired`: the ops it retires, oldest first.
  /// `waited`: the ref a copy wait names.
  virtual void on_wait(const Stmt &, const std::optional<StepRef> &waited,
                       const std::vector<int> &retired) = 0;
  /// After on_wait: `slot` is undefined from now on (strict slot contents).
  virtual void on_undefined(const Stmt &, const StepPlace &slot) = 0;
  /// `X[...] = undefined` (Assign::discards): what `target` holds is undefined
  /// from now on. It is no store: on_compute is not called for it. By default
  /// the same as a slot left undefined by a write-back.
  virtual void on_discard(const Stmt &s, const StepRef &target) { on_undefined(s, target.place); }
  /// A fault at `stmt`. After index_out_of_bounds the walk stops (no on_end).
  virtual void on_fault(const Stmt &, FaultKind, const std::string &message) = 0;
  /// The end of the program; `in_flight`: ops never retired, in start order.
  virtual void on_end(const std::vector<int> &in_flight) = 0;
};

class Stepper {
public:
  /// Walks `body` (normally program.body) over `program`'s buffers with `env`
  /// binding every param; `env` is the stepper's working env (loop variables
  /// and integer lets are bound in it), shared with the consumer.
  /// A consumer may read `env` and bind names of its own in it, but must not
  /// erase a name the stepper binds (a loop variable, an integer let), except
  /// the name of the tensor let it is told of in on_compute.
  Stepper(const Program &, const Block &body, Env &env);
  Stepper(const Stepper &) = delete;
  Stepper &operator=(const Stepper &) = delete;
  /// Runs to the end (or the first out-of-bounds fault). Throws StepError.
  void run(StepConsumer &);

  /// Resolves a buffer ref under the current env. Throws StepError; an
  /// out-of-bounds subscript throws OutOfBounds.
  StepRef resolve(const Expr &ref, const Loc &stmt) const;
  struct OutOfBounds : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  /// The buffer a name denotes, or -1.
  int buffer_index(const std::string &name) const;
  /// The shape of a buffer's block (a ring's slot) under the params.
  const std::vector<std::int64_t> &block_shape(int buffer) const { return block_shapes_[buffer]; }
  /// The number of slots of a ring, -1 when not a ring.
  std::int64_t slots(int buffer) const { return slots_[buffer]; }
  /// The statement being executed.
  const Stmt *current() const { return current_; }
  /// The values of the enclosing loops' variables, outermost first.
  const std::vector<std::int64_t> &loop_values() const { return loop_values_; }

private:
  std::int64_t eval(const Expr &, const Loc &) const;
  /// eval_int under the env, through the compiled form where there is one.
  std::optional<std::int64_t> value_of(const Expr &) const;
  void exec_block(const Block &);
  void exec(const Stmt &);
  void exec_store(const Stmt &, const Expr &target, bool accumulate, const Expr &value);
  void exec_async(const Stmt &);
  void collect_reads(const Expr &, std::vector<StepRef> &, const Loc &) const;

  const Program &program_;
  const Block &body_;
  Env &env_;
  StepConsumer *c_ = nullptr;
  std::vector<std::vector<std::int64_t>> block_shapes_;
  std::vector<std::vector<std::int64_t>> ref_dims_; // a ring's slot count, then its block shape
  std::vector<std::int64_t> slots_;
  const Stmt *current_ = nullptr;
  std::vector<std::int64_t> loop_values_;
  int next_op_ = 0;
  std::vector<int> in_flight_; // ops in start order
  using SlotKey = std::pair<int, std::int64_t>;
  std::map<SlotKey, std::deque<int>> in_, out_;
  std::deque<int> wgmmas_;
  std::map<SlotKey, std::uint64_t> writes_; // stores and copies into each slot
  std::map<int, std::uint64_t> out_writes_; // copy_out op -> its slot's writes at its start

  // DMA semaphores and regular ones, keyed by (buffer, flat index).
  struct Semaphore {
    std::vector<std::pair<int, std::int64_t>> ops; // outstanding copies and their bytes, start order
    std::int64_t total = 0;                        // their bytes
    std::int64_t credit = 0;                       // bytes waited not yet attributed to a copy
    std::int64_t value = 0;                        // a regular semaphore's count
    // Where a regular semaphore's count last rose from zero (a signal),
    // with the enclosing loops' values then.
    const Stmt *left_by = nullptr;
    std::vector<std::int64_t> left_at;
    std::string left_why;
    bool hung = false; // a wait on it hangs
  };
  std::map<SlotKey, Semaphore> sems_;
  void exec_dma(const Stmt &, const Dma &);
  /// Records that `s` leaves `sem` non-zero (the message's start: why).
  void leave(Semaphore &, const Stmt &s, std::string why) const;
  SlotKey semaphore(const Expr &ref, const Loc &) const;
  int start_copy(const Stmt &, const Expr &src, const Expr &dst);
  std::int64_t bytes_of(const StepRef &) const;
  /// Faults (OutOfBounds) a copy whose HBM side is larger than its on-chip side.
  void hbm_side_fits(const Expr &src_ref, const StepRef &src, const Expr &dst_ref, const StepRef &dst) const;

  // The body compiled once (every step runs the same statements): integer
  // expressions to CompiledInts reading names through pointers into env_,
  // buffer names to indices, values to the buffer refs they read.
  void plan_block(const Block &);
  int plan_int(const Expr &);
  void plan_ref(const Expr &);
  void plan_reads(const Expr &value);
  /// `where(c, a, b)` around a read: (c, true) inside a, (c, false) inside b.
  using ReadGuards = std::vector<std::pair<const Expr *, bool>>;
  void collect_read_refs(const Expr &, std::vector<const Expr *> &, ReadGuards guards = {}) const;
  int var(const std::string &name);
  void bind(int var, std::int64_t value);
  struct StmtPlan {
    int var = -1;                       // a for's variable, a let's name
    int ints[2] = {-1, -1};             // compiled: a for's bounds, an if's condition, a let's value
    const Expr *let_store = nullptr;    // `T = ...` on a buffer: the ref T
    bool reads_tables = false;          // it reads a scalar prefetch array (spec::has_elaborated_reads)
    std::vector<LocalDiscard> discards; // a let's: where its value is discarded unused (its reads count not)
  };
  struct RefPlan {
    int buffer = -1;                                // -1: not a buffer
    std::vector<std::pair<const Expr *, int>> subs; // what subscripts_of evaluates, in order, compiled
    bool sized = false; // a slice whose size its bounds do not show (`0:8 * t`, ds(i, n))
  };
  /// A compute statement's ref whose slice sizes change from one execution
  /// to the next (a size from a loop variable or the grid point): StepError.
  void same_sizes(const Expr &ref, const Loc &) const;
  mutable std::unordered_map<const Expr *, std::vector<std::int64_t>> sizes_;
  /// eval() through a compiled handle (-1: none).
  std::int64_t eval(int handle, const Expr &, const Loc &) const;
  StepRef resolve_in(const Expr &ref, int buffer, const RefPlan *, const Loc &) const;
  CompiledInts ints_;
  std::unordered_map<const Expr *, int> int_of_;   // integer expression -> compiled handle
  std::unordered_map<const Expr *, RefPlan> refs_; // the refs in the body
  std::unordered_map<const Expr *, std::vector<const Expr *>> reads_of_; // a value -> its buffer refs
  // A buffer ref read inside a `where` branch -> the conditions that select it:
  // an integer condition that does not select it keeps the read from counting
  // (`where(k == 0, init, acc[...])` reads acc only past k == 0).
  mutable std::unordered_map<const Expr *, ReadGuards> read_guards_;
  std::unordered_map<const Stmt *, StmtPlan> plans_;
  std::map<const Stmt *, std::vector<LocalDiscard>> discards_; // spec::local_discards of the body
  std::map<std::string, int> var_of_;
  std::vector<std::string> var_names_;
  std::vector<std::int64_t *> vars_; // each variable's value in env_, null while unbound
  std::deque<Expr> let_stores_;      // the refs of StmtPlan::let_store
};

} // namespace pipecheck::spec
