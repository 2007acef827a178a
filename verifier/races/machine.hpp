#pragma once
/// The concrete pipeline machine: runs a Program for one binding of its
/// params on the single issuing thread and records events, asynchronous
/// operations, the happens-before graph and raw findings. The program's
/// semantics — control flow, places, wait matching, retirement, faults,
/// strict slot contents — are spec::Stepper's (spec/step.hpp), shared with
/// the executor; the machine decides what the accesses it reports mean.
///
/// Semantics (docs/lowering.md "Race semantics"):
/// - copy_in_start(src, X[s]) reads src and writes X[s] from the start to the
///   copy_in_wait(X[s]) that retires it: the oldest outstanding copy into
///   X[s]; copy_out_start(Y[s], dst) likewise until copy_out_wait(Y[s]).
/// - wgmma(c, a, b) reads a and b and updates c until a wgmma_wait(n) retires
///   it (oldest first, until at most n remain); wgmmas on one accumulator are
///   ordered among themselves.
/// - Compute (`X[s] = ...`, `X[s] += ...`, tensor `name = ...`) accesses at
///   its own event.
/// - A ref denotes the part of its buffer that spec/place.hpp's rule gives
///   (a ring's first subscript is the slot); a subscript outside the buffer
///   (or a slot outside the ring) is `index-out-of-bounds` at its statement,
///   and the run stops there, as the executor's faults.
/// - An access races with a conflicting one (overlapping, one a write) of an
///   asynchronous operation still in flight: nothing orders the two, since
///   the operation's retiring wait has not come yet (the happens-before
///   graph, recorded on demand, agrees by construction).
/// - hbm buffers hold input data and acc buffers start at zero; a read of an
///   sram/smem place not covered by earlier writes is `uninitialized-read`.
/// - Strict slot contents: a copy replaces its whole destination ref; the
///   part the source does not fill (a clipped edge block's padding) is
///   undefined — computing on it is allowed (it flows element by element
///   into the store's target, through masks the machine evaluates:
///   verifier/races/padding.hpp), copying it out is `uninitialized-read`; a
///   copy reads only the part of its source that fits its destination (a
///   partial block's write-back, its in-bounds corner) — and a copy_out_wait leaves its slot undefined
///   unless another write-back out of the slot is still in flight or the slot was written after the retired
///   one started.
/// - stale-read: a slot's content is tagged with the hbm region it was copied
///   from or last written back to (a full `=` store clears the tag); an
///   accumulating compute (`+=`, or a value that reads its own target) on a
///   tagged slot whose result is then written back to a different region read
///   a block other than the one it produces.

#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/step.hpp"
#include "verifier/hb/hb.hpp"
#include "verifier/races/padding.hpp"
#include "verifier/rule.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace pipecheck::verifier::races {

/// Thrown for programs the machine cannot run (unbound names, bad slots).
struct Unsupported : std::runtime_error {
  spec::Loc loc;
  Unsupported(const std::string &m, spec::Loc l) : std::runtime_error(m), loc(l) {}
};

/// Half-open intervals, one per dim of the buffer (or of the slot's block).
using Box = spec::StepBox;
/// A place in memory: a buffer, its slot (-1 when not a ring) and a box.
using Place = spec::StepPlace;
bool overlaps(const Place &, const Place &);

/// One issued statement.
struct Event {
  const spec::Stmt *stmt = nullptr;
  std::vector<std::int64_t> iterations; ///< enclosing loop variables, outermost first
  std::optional<std::int64_t> slot;
  int node = -1; ///< its node in the happens-before graph (-1 when not recorded)
};

enum class OpKind { copy_in, copy_out, wgmma };

/// An asynchronous operation and the accesses it makes while in flight.
struct AsyncOp {
  OpKind kind = OpKind::copy_in;
  int start_event = -1;
  int end_event = -1; ///< the retiring wait; -1 while (or if forever) in flight
  int node = -1;
  Place src, dst;           ///< copies: source and destination
  Place acc, a, b;          ///< wgmma: accumulator and operands
  std::optional<Place> tag; ///< copy_in: the hbm region copied
};

/// A raw finding of one run, before deduplication.
struct RawFinding {
  Rule rule = Rule::slot_race;
  int anchor_event = -1; ///< the event whose statement is the anchor
  int other_event = -1;  ///< the earlier event of a race (the op's start), or -1
  int other_op = -1;     ///< the earlier asynchronous operation of a race, or -1
  int other_end = -1;    ///< the event that retired it, or -1
  std::string message;
  /// An uninitialized-read that is a write-back of a slot box nothing wrote
  /// (Finding::unwritten_write_back).
  bool unwritten_write_back = false;
};

struct RunResult {
  std::vector<Event> events;
  std::vector<AsyncOp> ops;
  std::vector<RawFinding> findings;
  hb::Graph graph; ///< empty unless Machine::set_record_graph(true)
};

/// Runs `program` with `env` binding every param. Calls `on_iteration(for,
/// value, machine)` at the start of every iteration of every loop.
class Machine : private spec::StepConsumer {
public:
  /// Throws Unsupported.
  Machine(const spec::Program &, spec::Env env);
  using IterationHook = std::function<void(const spec::For &, std::int64_t, const Machine &)>;
  void set_iteration_hook(IterationHook h) { hook_ = std::move(h); }
  /// Caps the number of events (Unsupported beyond it).
  void set_event_limit(std::size_t n) { event_limit_ = n; }
  /// Records the happens-before graph (RunResult::graph, Event::node,
  /// AsyncOp::node); off by default. The graph decides nothing — a race's
  /// earlier operation is still outstanding, so no retiring wait orders it —
  /// and serves to check witnesses independently (races::witnesses_reproduce).
  void set_record_graph(bool on) { record_graph_ = on; }
  /// A lowered kernel's grid step of a statement (spec::Lowered::step: its
  /// top-level index and enclosing loop values). Given, a scratch (a buffer
  /// without slots) copied out to one region and accumulated on into
  /// another is a stale read only where the first region's value was
  /// accumulated over several grid steps (a reduction carried on, as the
  /// spec rule accumulator-carried judges a windowed output); a value
  /// accumulated once per region is a running value (a scan) on purpose.
  using StepOf = std::function<std::int64_t(int top_level, const std::vector<std::int64_t> &iterations)>;
  void set_step_of(StepOf f) { step_of_ = std::move(f); }
  /// Runs to the end; throws Unsupported.
  RunResult run();

  /// A canonical text of the state that decides future findings: outstanding
  /// operations (in order), slot coverage and stale-read tags (a wholly
  /// undefined slot counts as unused: any later use of its tag reads it
  /// uninitialized, a violation either way). hbm
  /// coordinates on (buffer, dim) are reduced by `shift[{buffer, dim}]`.
  std::string state_key(const std::map<std::pair<int, int>, std::int64_t> &shift) const;

  const spec::Program &program() const { return program_; }
  int buffer_index(const std::string &name) const { return stepper_->buffer_index(name); }

private:
  // spec::StepConsumer
  void on_iteration(const spec::For &, std::int64_t) override;
  void on_int_let(const spec::Stmt &, const std::string &name) override { flow_.forget(name); }
  void on_compute(const spec::Stmt &, const std::vector<spec::StepRef> &reads,
                  const std::optional<spec::StepRef> &write) override;
  void on_start(const spec::Stmt &, int op, const spec::AsyncStart &) override;
  void on_wait(const spec::Stmt &, const std::optional<spec::StepRef> &waited,
               const std::vector<int> &retired) override;
  void on_undefined(const spec::Stmt &, const spec::StepPlace &slot) override;
  void on_discard(const spec::Stmt &, const spec::StepRef &target) override;
  void on_fault(const spec::Stmt &, spec::FaultKind, const std::string &message) override;
  void on_end(const std::vector<int> &in_flight) override;

  int new_event(const spec::Stmt &, std::optional<std::int64_t> slot);
  void access(int event, int op, const Place &, bool write);
  bool covered(const Place &) const;
  void add_written(const Place &);
  /// Makes `p` undefined again (strict slot contents).
  void clear_written(const Place &);
  /// The parts of `p` that hold the padding of a partial block.
  std::vector<Box> padding_in(const Place &) const;
  /// The parts of `p` that hold zero padding (written, and 0: a copy in
  /// with zeros=True filled them past its array).
  std::vector<Box> zeros_in(const Place &) const;
  /// The parts of p's box that nothing wrote and that hold no padding;
  /// `some` (when given) set where something wrote or padded part of it.
  std::vector<Box> unwritten(const Place &p, bool *some = nullptr) const;
  /// The whole of a buffer that is no ring (an hbm array).
  Place whole(int buffer) const;
  /// The earliest store that put the padding `refs` (and the tensor locals
  /// `value` names) hold into a buffer; -1 where they hold none.
  int padding_origin(const std::vector<spec::StepRef> &refs, const spec::Expr &value) const;
  /// A read of an SRAM/SMEM buffer part of whose box something wrote: the
  /// rest becomes undefined data, followed like a partial block's padding.
  void pad_unwritten(const Place &);
  /// Undefined data a wgmma reads reaches its accumulator (row of a, column of b).
  void wgmma_padding(const spec::AsyncStart &, int event);
  void add_padding(const Place &, const std::vector<Box> &);
  void add_zeros(const Place &, const std::vector<Box> &);
  /// The padding a buffer ref reads, in the ref's value coordinates.
  RefPadding ref_padding(const spec::Expr &ref) const;
  void retire(int op, int event);

  struct SlotState {
    std::vector<Box> written;
    /// Parts holding the padding of a partial block: undefined data that may
    /// be computed on (elementwise, it stays in the padding) but not written back.
    std::vector<Box> padding;
    /// Written parts holding zero padding (verifier/races/padding.hpp kZero):
    /// a sum or a dot takes them in unchanged, a max or an exp does not.
    std::vector<Box> zeros;
    /// Per box of the slot (a scratch of several blocks, `buf[k % 2]`, is one
    /// slot -1 whose boxes are its blocks): the hbm region it holds.
    struct Tag {
      Box box;
      Place from;
      /// A kernel scratch (Machine::set_step_of): the grid steps whose
      /// accumulates make the value copied out to `from`.
      int steps = 0;
    };
    std::vector<Tag> tags;
    /// An accumulate into a tagged box, not yet written back.
    struct Pending {
      Box box;
      int event = -1;
      Place from;
    };
    std::vector<Pending> pending;
    /// A kernel scratch: per box, the grid steps that accumulated into it
    /// since it was last stored whole or copied out (`last`: the latest).
    struct Run {
      Box box;
      int steps = 0;
      std::int64_t last = -1;
    };
    std::vector<Run> runs;
    /// Box `b` holds no hbm region any more (nor an accumulate into one).
    void untag(const Box &b);
    int undefined_by = -1; ///< the copy_out_wait or `= undefined` event that last left it undefined
    int padded_by = -1;    ///< the store that first put the undefined data (padding) it holds into a buffer
  };

  const spec::Program &program_;
  spec::Env env_;
  std::unique_ptr<spec::Stepper> stepper_; // walks program_ in env_
  RunResult r_;
  std::vector<int> outstanding_; // ops in flight, in issue order
  /// The races found so far, by rule and the statements of both accesses:
  /// one finding each (a pile-up of copies never waited would otherwise
  /// give one per pair of copies).
  std::set<std::tuple<Rule, const spec::Stmt *, const spec::Stmt *>> races_seen_;
  /// Past this many ops in flight with a finding made, the walk stops: the
  /// kernel is a violation already, and each later access would be checked
  /// against every copy piled up.
  static constexpr std::size_t kPileUp = 2048;
  struct PiledUp {};
  void push_outstanding(int op);
  std::map<std::pair<int, std::int64_t>, SlotState> slots_state_;
  /// The parts of `p` that a slot state's `set` (padding, zeros) holds.
  std::vector<Box> boxes_in(const Place &p, std::vector<Box> SlotState::*set) const;
  // hbm arrays some `A[...] = undefined` left undefined: their reads are checked
  std::set<int> undefined_hbm_;
  /// Whether what is written into `buffer` is followed (its reads of what
  /// nothing wrote are uninitialized-reads): sram and smem, and an hbm array
  /// some `A[...] = undefined` left undefined.
  bool follows_writes(int buffer) const;
  std::map<int, int> last_wgmma_on_acc_; // acc buffer -> op
  PaddingFlow flow_;                     // where tensor locals hold padding, element by element
  std::map<std::string, int>
      local_padded_by_;      // a tensor local read from padded buffers: the store that padded them
  bool zero_filled_ = false; // a copy in has filled a partial block's padding with zeros
  bool any_padding_ = false; // some slot has held padding (else flow_ tracks nothing)
  int last_node_ = -1;
  std::size_t event_limit_ = 4'000'000;
  bool record_graph_ = false;
  StepOf step_of_;
  std::map<const spec::Stmt *, int> top_level_; // step_of_'s cache
  std::int64_t step_of_event(int ev);
  IterationHook hook_;
};

} // namespace pipecheck::verifier::races
