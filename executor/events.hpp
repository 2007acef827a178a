#pragma once
/// DMA completion modes and the event timeline of a run.

#include "spec/ir.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace pipecheck::executor {

/// When an asynchronous operation takes effect between its start and its wait.
enum class DmaMode {
  eager,       ///< a copy is handed to a DMA worker the moment it starts
  on_wait,     ///< a copy is performed at its wait (as late as possible);
               ///< never, when nothing waits for it
  random,      ///< each copy and wgmma picks, from the seed, to take effect
               ///< at its start, at its wait, or some statements after its start
  synchronous, ///< ideal memory: every copy and wgmma completes where it
               ///< starts (the intent of a hand-written pipeline)
};
const char *to_string(DmaMode);
std::optional<DmaMode> parse_dma_mode(const std::string &);

enum class EventKind {
  copy_start,  ///< the issuing thread starts a copy (instant)
  transfer,    ///< the data movement itself, on the thread that did it
  copy_wait,   ///< a copy_in_wait / copy_out_wait, for as long as it blocked
  compute,     ///< a store or binding in the body / pipeline
  wgmma_issue, ///< wgmma issued (instant)
  wgmma_exec,  ///< the deferred wgmma computing c += a @ b
  wgmma_wait,  ///< wgmma_wait(n)
  stall,       ///< the issuing thread waited for a conflicting in-flight copy
  grid_step,   ///< the oracle ran the body for one grid point
};
const char *to_string(EventKind);

/// One event of a run. Times are nanoseconds since the run started.
struct Event {
  EventKind kind = EventKind::compute;
  spec::Loc loc;          ///< the statement (line 0: synthesized)
  std::string buffer;     ///< the slot ring / buffer involved, if any
  std::int64_t slot = -1; ///< its slot, -1 when not a ring
  int thread = 0;         ///< 0: the issuing thread; 1..n: DMA workers
  std::int64_t t_start_ns = 0;
  std::int64_t t_end_ns = 0;
  std::string detail; ///< e.g. "A[3] -> X[1]" or "step (0, 1)"
};

} // namespace pipecheck::executor
