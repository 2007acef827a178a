#include "verifier/races/cutoff.hpp"

#include "spec/bind.hpp"
#include "verifier/races/machine.hpp"
#include "verifier/races/races.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace pipecheck::verifier::races {

CutCheck check_cut(const spec::Lowered &low, spec::GridCut &cut) {
  CutCheck out;
  if (low.main_loop < 0) {
    out.reason = "the cut program is not rolled";
    return out;
  }
  const auto *main = std::get_if<spec::For>(&low.program.body[static_cast<std::size_t>(low.main_loop)].kind);
  const std::size_t rank = cut.axes.size();
  // Per cut axis: the array dims that follow it (spec::CutDim::shift).
  std::vector<std::map<std::pair<int, int>, const spec::CutDim *>> per_value(rank);
  std::map<std::string, std::string> hbm_of;
  for (const auto &b : low.bindings)
    hbm_of[b.operand] = b.hbm;
  // (axis, outer coordinates) -> the state at first + j for j = 0..window + P, its hbm
  // coordinates moved back by j values of the axis.
  std::map<std::pair<std::size_t, std::vector<std::int64_t>>, std::map<std::int64_t, std::string>> keys;
  bool shifts_ready = false;
  // The run order: Mosaic GPU runs CTA by CTA (CTA axes outermost), each
  // CTA's steps in order of the other axes; TPU runs the grid in order.
  std::vector<std::size_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t e = 0; e < rank; ++e)
      if ((e < low.cta.size() && low.cta[e]) == (pass == 0)) order.push_back(e);
  auto hook = [&](const spec::For &f, std::int64_t step, const Machine &m) {
    if (&f != main) return;
    out.last_step = std::max(out.last_step, step);
    if (!shifts_ready) {
      for (const auto &d : cut.dims)
        per_value[static_cast<std::size_t>(d.axis)][{m.buffer_index(hbm_of[d.operand]), d.dim}] = &d;
      shifts_ready = true;
    }
    const auto point = low.point(step);
    for (std::size_t i = 0; i < rank; ++i) {
      const std::size_t e = order[i];
      const spec::AxisCut &ax = cut.axes[e];
      const std::int64_t j = point[e] - ax.first;
      if (ax.drop == 0 || j < 0 || j > ax.window + ax.period) continue;
      bool inner_zero = true;
      for (std::size_t g = i + 1; g < rank; ++g)
        inner_zero &= point[order[g]] == 0;
      if (!inner_zero) continue;
      std::vector<std::int64_t> outer;
      for (std::size_t g = 0; g < i; ++g)
        outer.push_back(point[order[g]]);
      // (Moved back by the whole periods of j: the states at j and j + P,
      // compared, then differ by one period's shift, whatever j is.)
      std::map<std::pair<int, int>, std::int64_t> shift;
      for (const auto &[where, d] : per_value[e])
        shift[where] = d->shift(j / ax.period * ax.period);
      keys[{e, outer}][j] = m.state_key(shift);
    }
  };
  out.findings =
      check_concrete(low.program, {}, "", hook, 0,
                     [&](int top, const std::vector<std::int64_t> &it) { return low.step(top, it); });
  // Per axis, the least w = lo + j whose state recurs P values later for
  // every value of the outer axes. A later state never reached (the run
  // stopped at a fault) is no recurrence.
  out.recurs = true;
  for (std::size_t e = 0; e < rank && out.recurs; ++e) {
    spec::AxisCut &ax = cut.axes[e];
    if (ax.drop == 0) continue;
    std::optional<std::int64_t> found;
    for (std::int64_t j = 0; j <= ax.window && !found; ++j) {
      bool all = true;
      for (const auto &[where, ks] : keys) {
        if (where.first != e) continue;
        ++out.states;
        auto a = ks.find(j), b = ks.find(j + ax.period);
        all &= a != ks.end() && b != ks.end() && a->second == b->second;
      }
      if (all) found = j;
    }
    if (!found) {
      out.recurs = false;
      out.reason = "the state of axis " + std::to_string(e) + " at no value from " +
                   std::to_string(ax.first) + " to " + std::to_string(ax.first + ax.period) + " recurs " +
                   std::to_string(ax.period) + " values later";
      break;
    }
    ax.recurs_from = ax.first + *found;
  }
  return out;
}

} // namespace pipecheck::verifier::races
