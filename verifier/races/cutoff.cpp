#include "verifier/races/cutoff.hpp"

#include "spec/bind.hpp"
#include "verifier/races/machine.hpp"
#include "verifier/races/races.hpp"

#include <map>
#include <utility>

namespace pipecheck::verifier::races {

CutCheck check_cut(const spec::Lowered &low, const spec::GridCut &cut) {
  CutCheck out;
  if (low.main_loop < 0) {
    out.reason = "the cut program is not rolled";
    return out;
  }
  const auto *main = std::get_if<spec::For>(&low.program.body[static_cast<std::size_t>(low.main_loop)].kind);
  const std::size_t rank = cut.axes.size();
  // Per cut axis: how far the later state's hbm coordinates have moved.
  std::vector<std::map<std::pair<int, int>, std::int64_t>> shift(rank);
  std::map<std::string, std::string> hbm_of;
  for (const auto &b : low.bindings)
    hbm_of[b.operand] = b.hbm;
  // (axis, outer coordinates) -> state at lo, state at lo + P
  std::map<std::pair<std::size_t, std::vector<std::int64_t>>, std::pair<std::string, std::string>> keys;
  bool shifts_ready = false;
  auto hook = [&](const spec::For &f, std::int64_t step, const Machine &m) {
    if (&f != main) return;
    if (!shifts_ready) {
      for (const auto &d : cut.dims) {
        auto axis = static_cast<std::size_t>(d.axis);
        shift[axis][{m.buffer_index(hbm_of[d.operand]), d.dim}] = d.step * cut.axes[axis].period;
      }
      shifts_ready = true;
    }
    const auto point = low.point(step);
    for (std::size_t e = 0; e < rank; ++e) {
      const spec::AxisCut &ax = cut.axes[e];
      if (ax.drop == 0) continue;
      bool inner_zero = true;
      for (std::size_t g = e + 1; g < rank; ++g)
        inner_zero &= point[g] == 0;
      if (!inner_zero) continue;
      std::vector<std::int64_t> outer(point.begin(), point.begin() + static_cast<std::ptrdiff_t>(e));
      if (point[e] == ax.first) keys[{e, outer}].first = m.state_key({});
      if (point[e] == ax.first + ax.period) keys[{e, outer}].second = m.state_key(shift[e]);
    }
  };
  out.findings = check_concrete(low.program, {}, "", hook);
  out.recurs = true;
  for (const auto &[where, ks] : keys) {
    ++out.states;
    // A later state never reached (the run stopped at a fault) is no recurrence.
    if (ks.second.empty() || ks.first != ks.second) {
      std::vector<std::int64_t> p = where.second;
      p.push_back(cut.axes[where.first].first);
      p.resize(rank, 0);
      out.recurs = false;
      out.reason = "the state at grid point " + spec::format_tuple(cut.kernel_point(p)) + " does not recur " +
                   std::to_string(cut.axes[where.first].period) + " values of axis " +
                   std::to_string(where.first) + " later";
      break;
    }
  }
  return out;
}

} // namespace pipecheck::verifier::races
