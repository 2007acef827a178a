#pragma once
/// The race check of a kernel's lowered program through its grid cut
/// (spec/cut.hpp): the cut program is run, and at the start of the first
/// repeating value `w` of every cut axis, and again P values later, the
/// machine's state (outstanding operations, slot contents, stale-read tags;
/// Machine::state_key) is taken for every value of the outer axes. When each
/// pair agrees once the later state's hbm coordinates are moved back by P
/// values of the axis, the kernel's run is the cut run with P-value stretches
/// repeated: the same events, shifted, from the same states. So the kernel
/// has a finding exactly when the cut program has, at the grid point
/// GridCut::kernel_point gives (docs/lowering.md, "Large grids: the grid cut").

#include "spec/cut.hpp"
#include "spec/lower.hpp"
#include "verifier/verdict.hpp"

#include <string>
#include <vector>

namespace pipecheck::verifier::races {

struct CutCheck {
  /// Every state the cut relies on recurred (else `reason` names the first
  /// that did not, and the cut decides nothing).
  bool recurs = false;
  std::string reason;
  std::vector<Finding> findings; ///< the cut program's, as check_concrete gives them
  std::int64_t states = 0;       ///< state pairs compared
  std::int64_t last_step = -1;   ///< the last step of the main loop the run began (a fault stops it)
};

/// Runs `cut_low`, spec::lower's rolled program for the kernel on `cut`, and
/// settles each cut axis's `recurs_from`: the least w in [first, first + window] whose
/// states recur (the start-up of a deep pipeline can take a few values to
/// pass). Throws Unsupported.
CutCheck check_cut(const spec::Lowered &cut_low, spec::GridCut &cut);

} // namespace pipecheck::verifier::races
