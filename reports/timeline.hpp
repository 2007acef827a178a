#pragma once
/// The pipeline timeline of a kernel for the HTML report: its lowered
/// program's events (spec::lower, walked by the one stepper spec/step.hpp)
/// laid out over the grid steps as copy-in / compute / copy-out bars, a lane
/// per slot of each operand and a compute lane, like the schedule figure of
/// the pipelining guide. And the measured timeline of a run, from the
/// executor's events.

#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::reports {

enum class BarKind { copy_in, compute, copy_out, wgmma };
/// "copy-in", "compute", "copy-out", "wgmma".
const char *to_string(BarKind);

/// A point of the schedule: a grid step and the position, in [0, 1), of an
/// event among the events that step issues.
struct StepTime {
  std::int64_t step = 0;
  double at = 0;
  friend bool operator==(const StepTime &, const StepTime &) = default;
};

struct TimelineLane {
  std::string label;       ///< "x[0]": the operand (or buffer) and its slot; "compute"
  std::string buffer;      ///< the lowered program's buffer ("" for compute)
  std::int64_t slot = -1;  ///< -1: not a ring
  bool is_compute = false; ///< the compute lane
};

struct TimelineBar {
  int lane = 0;
  BarKind kind = BarKind::compute;
  StepTime start, end; ///< a copy: from its start to its wait; compute: its statements
  bool racing = false; ///< issued by an event of a race finding's trace
  std::string detail;  ///< e.g. "copy_in_start(x_hbm[...], x[0])"
};

/// A kernel's schedule, cut to the steps drawn: the first `head` steps and
/// the last `tail`, with the ones between elided.
struct Timeline {
  std::vector<TimelineLane> lanes;
  std::vector<TimelineBar> bars; ///< only bars with an end on a drawn step
  std::int64_t steps = 0;        ///< grid steps in all
  std::int64_t head = 0;         ///< steps [0, head) are drawn
  std::int64_t tail = 0;         ///< and steps [steps - tail, steps)
  /// True when the walk stopped after the head (too many steps to walk): the
  /// tail is not drawn (tail == 0) although steps > head.
  bool truncated = false;
  /// Where the first compute starts and the last one ends (the start-up and
  /// drain bubbles lie outside); absent without compute.
  std::optional<StepTime> first_compute, last_compute;
  /// Bars by kind (over every step walked, drawn or not).
  std::int64_t copy_ins = 0, computes = 0, copy_outs = 0;
  /// True when `step` is drawn.
  bool drawn(std::int64_t step) const { return step < head || step >= steps - tail; }
};

struct TimelineOptions {
  std::int64_t head = 16;            ///< steps drawn from the start
  std::int64_t tail = 4;             ///< and from the end
  std::int64_t max_walked = 1 << 16; ///< over this many steps only the head is walked
};

/// Lowers `k` (rolled) with `env` overriding its params for `target` and
/// walks its program: the timeline, or nullopt with `why` when the kernel does
/// not lower or its program cannot be walked. Bars issued by an event of
/// `racing` (a finding's trace: the same top-level statement, loop
/// iterations and printed statement) are marked racing.
std::optional<Timeline> kernel_timeline(const spec::KernelSpec &k, const spec::Env &env,
                                        const std::optional<std::string> &target,
                                        const std::vector<verifier::TraceEvent> &racing, std::string &why,
                                        const TimelineOptions & = {});

/// The timeline as an inline SVG element (no external references): a row per
/// lane, a column per drawn step (an elision mark between head and tail),
/// bars as `<rect class="bar KIND">` with a `<title>`, start-up and drain
/// bubbles shaded on the compute lane (filled with the page's `#hatch`
/// pattern), racing bars outlined.
std::string timeline_svg(const Timeline &);

} // namespace pipecheck::reports
