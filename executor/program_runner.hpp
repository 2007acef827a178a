#pragma once
/// Runs a Program (a hand-written or lowered pipeline) on host arrays with
/// real asynchronous copies (executor/dma.hpp) in one DmaMode.
///
/// Semantics: a copy *takes effect* (its data moves, reading its source as
/// it is then) at a point the mode picks between its start and its wait:
/// eager at the start, on_wait at the wait, random somewhere in between
/// (seeded), synchronous at the start and on the issuing thread. A `wgmma`
/// is deferred the same way: it reads its operands when it retires — at the
/// `wgmma_wait` that retires it in eager and on_wait modes, at a seeded point
/// in random mode, at issue when synchronous. Operations still outstanding at
/// the end take effect in eager mode and never in on_wait mode.
///
/// Strict slot contents (docs/lowering.md, the race machine's rule too): a
/// copy replaces its whole destination ref, the part its source does not
/// fill becoming poison; a retired write-back leaves its slot poison unless
/// another write-back out of it is in flight or the slot was written since
/// it started.

#include "executor/dma.hpp"
#include "executor/events.hpp"
#include "executor/interp.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::executor {

struct ProgramRunConfig {
  DmaMode mode = DmaMode::eager;
  std::uint64_t seed = 0; ///< the random mode's schedule
  int dma_threads = 2;
  std::size_t max_events = 200000; ///< the timeline keeps the first ones
  /// ... and at most this many heap bytes of them (the vector's capacity and
  /// the events' strings, as executor/footprint.hpp counts them).
  std::uint64_t max_event_bytes = 4ull << 20;
  /// Every copy in reads the hbm buffers as they were when the run
  /// started, and every copy out writes only the elements that differ from
  /// them: the Triton schedule in which all programs launch at once and
  /// read before any of them stores (a race-free kernel cannot tell it from
  /// any other; a racy one loses the stores it races with).
  bool launch_snapshot = false;
};

struct ProgramOutcome {
  /// Set when the program faulted (out-of-bounds access, a wait with
  /// nothing outstanding) or is ill-formed (bad_input).
  std::optional<ExecError> error;
  std::vector<Event> events;
  bool events_truncated = false;
  std::vector<std::string> notes; ///< e.g. copies never waited
  std::int64_t bytes_copied = 0;
  std::int64_t copies = 0;
  std::int64_t wall_ns = 0;
};

/// The arrays of a program's buffers, shaped as the program declares them
/// (a ring of S slots of shape s is an array of shape [S, *s]).
using BufferMap = std::map<std::string, HostArray *>;

/// The shape of a buffer's array under `env`; nullopt when it does not
/// evaluate (or is negative).
std::optional<Shape> buffer_array_shape(const spec::Buffer &, const spec::Env &env);

/// Executes `program` with every param bound in `env` on `buffers` (one
/// array per buffer, already initialised by the caller).
ProgramOutcome run_program(const spec::Program &program, const spec::Env &env, const BufferMap &buffers,
                           const ProgramRunConfig &cfg);

} // namespace pipecheck::executor
