#include "verifier/rules/enumerate.hpp"

#include "verifier/rules/findings.hpp"

#include "spec/checked.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace pipecheck::verifier::rules {

namespace {

class Enum {
public:
  Enum(const KernelModel &m, std::int64_t max_points) : m_(m), max_(max_points) {}

  RuleOutcome run() {
    if (m_.num_points() > max_) {
      out_.unknown.push_back("grid too large to enumerate");
      return std::move(out_);
    }
    points();
    if (!precompute()) return std::move(out_);
    for (std::size_t i = 0; i < m_.operands.size(); ++i) {
      const auto &o = m_.operands[i];
      if (o.windowed && (o.role == spec::Role::in || o.role == spec::Role::out)) {
        out_of_bounds(i);
        if (m_.triton) triton_loads_past_end(i);
      }
      if (o.role == spec::Role::out && o.windowed) {
        // (Triton has no block that stays across visits to revisit or
        // reset: its programs' stores meet per element, or not at all.)
        if (!o.revisit_any && !m_.grid.empty() && !m_.triton) revisit(i);
        if (needs_element_coverage(m_, i)) {
          element_output_findings(m_, i, out_.findings, out_.unknown);
        } else {
          parallel_conflict(i);
          if (!m_.is_aliased_output(i)) not_covered(i);
        }
        if (m_.is_read(i) && !m_.grid.empty() && !m_.triton) {
          if (output_as_scratch(m_, i))
            scratch_resets(i);
          else
            resets(i);
        }
        if (copied_out_per_visit(m_, i)) lost_output_writes(i);
        if (copied_out_after_loop(m_, i)) lost_last_slot_writes(i);
        overwritten_stores(i);
      }
      const std::size_t scratch_findings = out_.findings.size();
      if (output_as_scratch(m_, i) && !m_.triton) scratch_carried(i);
      if (o.role == spec::Role::scratch && !m_.grid.empty()) {
        scratch_resets(i);
        if (!m_.triton) {
          scratch_carried(i);
          readded(i);
          lost_accumulations(i);
        }
      }
      // (Where the rules above fault none of its inits, a select's fresh
      // init cuts the carry: carry_use.)
      if (o.role == spec::Role::scratch && scratch_shared_across_parallel_axes(m_))
        scratch_carry(i, out_.findings.size() == scratch_findings);
    }
    hbm_copy_conflicts();
    const std::vector<bool> kept = kept_garbage(m_, out_.findings, out_.unknown);
    for (std::size_t e = 0; e < m_.effects.size(); ++e) {
      const auto &ef = m_.effects[e];
      const auto &o = m_.operands[ef.operand];
      if (ef.keep && kept[ef.operand]) continue;
      // An acc scratch (plgpu.ACC) starts at zero in every CTA.
      // (A Triton output's reads are its element pass's: per program, in order.)
      if ((ef.kind == Effect::read || ef.kind == Effect::accumulate) &&
          ((o.role == spec::Role::out && o.windowed && !m_.triton) ||
           (o.role == spec::Role::scratch && !o.acc)))
        uninitialized(e);
      if (ef.kind != Effect::read && o.role == spec::Role::in && o.windowed && !input_masked_in_place(m_, ef))
        input_write(e);
    }
    for (const auto &a : m_.copy_addresses)
      if (auto c = unaliased_input_copy(m_, a)) input_copy_write(*c);
    for (const auto &a : m_.aliases)
      alias(a);
    auto structural = structural_findings(m_, out_.unknown, [&](std::size_t e, std::size_t d) {
      const std::size_t op = m_.effects[e].operand;
      for (std::size_t p = 0; p < pts_.size(); ++p)
        if (fires_[e][p] && blk_[op][p][d] == m_.operands[op].num_blocks[d] - 1) return true;
      return false;
    });
    out_.findings.insert(out_.findings.end(), structural.begin(), structural.end());
    finalize(out_.findings);
    return std::move(out_);
  }

  // output-not-covered for `op` alone, every point evaluated; nullopt where
  // the grid is past the limit or a block index or guard has no value.
  std::optional<RuleOutcome> run_coverage(std::size_t op) {
    if (m_.grid.empty() || m_.num_points() > max_) return std::nullopt;
    std::int64_t blocks = 1;
    for (std::int64_t n : m_.operands[op].num_blocks)
      if (__builtin_mul_overflow(blocks, std::max<std::int64_t>(n, 1), &blocks) || blocks > max_)
        return std::nullopt;
    points();
    if (!precompute()) return std::nullopt;
    not_covered(op);
    return std::move(out_);
  }

  // Only the empty visits and superseded resets of accumulator-carried
  // (empty_visits, superseded_resets), for every scratch: what
  // check_empty_visits runs on every grid both checkers see.
  RuleOutcome run_empty_visits() {
    if (m_.grid.empty() || m_.triton) return std::move(out_);
    bool any = false;
    for (std::size_t i = 0; i < m_.operands.size(); ++i)
      any = any || visits_matter(i) || resets_matter(i);
    if (!any) return std::move(out_);
    if (m_.num_points() > max_) {
      // (Past the limit, superseded resets are the solver's case alone.)
      for (std::size_t i = 0; i < m_.operands.size(); ++i)
        if (visits_matter(i)) {
          out_.unknown.push_back("whether accumulator-carried holds (a visit that stores '" +
                                 m_.operands[i].name +
                                 "' without initializing or accumulating it) is not decided: the grid has " +
                                 std::to_string(m_.num_points()) + " points, more than the " +
                                 std::to_string(max_) + " it is decided on");
          break;
        }
      for (std::size_t i = 0; i < m_.operands.size(); ++i)
        if (resets_matter(i))
          if (auto inner = chain_inside(i)) {
            out_.unknown.push_back(
                "whether accumulator-carried holds (a read of '" + m_.operands[i].name +
                "' that may take another chain's value: an init guard names axis " +
                std::to_string(inner->first) + " and not axis " + std::to_string(inner->second) +
                ", which runs inside it) is not decided: the grid has " + std::to_string(m_.num_points()) +
                " points, more than the " + std::to_string(max_) + " it is decided on");
            break;
          }
      return std::move(out_);
    }
    points();
    if (!precompute()) return std::move(out_);
    for (std::size_t i = 0; i < m_.operands.size(); ++i) {
      if (visits_matter(i)) empty_visits(i);
      if (resets_matter(i)) {
        superseded_resets(i);
        crossed_chains(i);
      }
    }
    finalize(out_.findings);
    return std::move(out_);
  }

private:
  const KernelModel &m_;
  std::int64_t max_;
  RuleOutcome out_;
  std::vector<Point> pts_;
  std::vector<std::vector<Point>> blk_;                     // [operand][point]: its window (spec::window_at)
  std::vector<std::vector<char>> fires_;                    // [effect][point]
  std::map<std::size_t, std::vector<std::size_t>> reached_; // per scratch: reached_outputs
  std::vector<std::size_t> cta_first_, cta_last_;           // [point]: its CTA's first and last points
  mutable std::vector<std::vector<std::optional<Box>>> boxes_; // [effect][point]: box_or_whole's

  // In run order (spec::grid_point): lexicographic on TPU, CTA by CTA on
  // Mosaic GPU.
  void points() {
    for (std::int64_t g : m_.grid)
      if (g <= 0) return;
    const std::int64_t n = m_.num_points();
    for (std::int64_t l = 0; l < n; ++l)
      pts_.push_back(spec::grid_point(m_.grid, m_.cta_axes, l));
    // A CTA's points are consecutive in run order.
    const std::size_t m = pts_.size();
    cta_first_.resize(m);
    cta_last_.resize(m);
    for (std::size_t x = 0; x < m; ++x)
      cta_first_[x] = x > 0 && cta_of(x - 1) == cta_of(x) ? cta_first_[x - 1] : x;
    for (std::size_t x = m; x-- > 0;)
      cta_last_[x] = x + 1 < m && cta_of(x + 1) == cta_of(x) ? cta_last_[x + 1] : x;
  }

  bool precompute() {
    blk_.assign(m_.operands.size(), {});
    for (std::size_t i = 0; i < m_.operands.size(); ++i) {
      if (m_.operands[i].role == spec::Role::scratch) continue;
      // spec::window_at, point by point: the block index, then a
      // BoundedSlice window's ds sizes (same start, another size: another
      // window); the rules below compare these, the bounds use the index.
      spec::BlockIndexer indexer(m_.operands[i], m_.env, m_.grid, m_.grid.size(), &m_.operands[i].window);
      for (const auto &p : pts_) {
        auto b = indexer.at(p).value;
        if (!b) {
          if (auto d = index_error_at(m_, i, p))
            out_.errors.push_back(std::move(*d));
          else
            out_.unknown.push_back("cannot evaluate the index_map of '" + m_.operands[i].name + "'");
          return false;
        }
        blk_[i].push_back(std::move(*b));
      }
    }
    for (const auto &e : m_.effects) {
      std::vector<char> f;
      GuardEvaluator guards(m_, e, m_.grid.size()); // guard_at, point by point
      for (const auto &p : pts_) {
        auto g = guards.at(p);
        if (!g) {
          if (auto d = guard_error_at(m_, e, p))
            out_.errors.push_back(std::move(*d));
          else
            out_.unknown.push_back("cannot evaluate a guard on line " + std::to_string(e.loc.line));
          return false;
        }
        f.push_back(*g ? 1 : 0);
      }
      fires_.push_back(std::move(f));
    }
    return true;
  }

  // A scratch is one buffer per CTA on Mosaic GPU (its CTA coordinates name
  // it) and one for the whole grid on TPU.
  Point block(std::size_t op, std::size_t pt) const {
    return m_.operands[op].role == spec::Role::scratch ? cta_of(pt) : blk_[op][pt];
  }

  // The CTA coordinates of a point (empty on TPU: one for the whole grid).
  Point cta_of(std::size_t pt) const {
    Point cta;
    for (std::size_t a = 0; a < m_.cta_axes.size(); ++a)
      if (m_.cta_axes[a]) cta.push_back(pts_[pt][a]);
    return cta;
  }

  bool writes(std::size_t op, std::size_t pt) const {
    for (std::size_t e = 0; e < m_.effects.size(); ++e)
      if (m_.effects[e].operand == op && m_.effects[e].kind != Effect::read && fires_[e][pt]) return true;
    return false;
  }

  void out_of_bounds(std::size_t op) {
    const auto &o = m_.operands[op];
    for (std::size_t i = 0; i < pts_.size(); ++i) {
      bool bad = false;
      for (std::size_t d = 0; d < o.num_blocks.size(); ++d)
        bad = bad || blk_[op][i][d] < 0 || blk_[op][i][d] >= o.num_blocks[d];
      if (!bad && o.has_bounded_dims()) {
        // A BoundedSlice window's size is checked at each point too.
        if (!sizes_at(m_, op, pts_[i])) {
          out_.unknown.push_back("cannot evaluate the ds sizes of the index_map of '" + o.name + "'");
          return;
        }
        bad = bounded_slice_fault(m_, op, pts_[i]).has_value();
      }
      if (bad) {
        out_.findings.push_back(out_of_bounds_finding(m_, op, pts_[i]));
        return;
      }
    }
  }

  // Triton: a load with no mask (not one of spec::masked_loads) reads its
  // whole ref from the array, which a ragged block passes; a masked load
  // reads the lanes its mask selects, where the mask evaluates at the grid
  // point (where it reads data, what the lanes hold is the padding flow's to
  // follow). One finding per load, at the first point that reads past the
  // end.
  void triton_loads_past_end(std::size_t op) {
    const auto &o = m_.operands[op];
    if (o.has_bounded_dims()) return; // (a BoundedSlice window's own bounds: out_of_bounds)
    for (std::size_t e = 0; e < m_.effects.size(); ++e) {
      const Effect &ef = m_.effects[e];
      if (ef.operand != op || ef.kind != Effect::read || ef.keep || (ef.masked_load && !ef.load_mask) ||
          ef.box.size() != o.shape.size() || !may_pass_end(o, ef))
        continue;
      for (std::size_t i = 0; i < pts_.size(); ++i) {
        if (!fires_[e][i] || !block_inside(op, i)) continue;
        const auto box = ref_box_at(m_, ef, pts_[i]);
        if (!box) {
          out_.unknown.push_back("cannot place the load of '" + o.name + "' on line " +
                                 std::to_string(ef.loc.line) + " at grid point " + format_tuple(pts_[i]) +
                                 ", so whether it reads past the array is not decided");
          return;
        }
        const Point blk(blk_[op][i].begin(),
                        blk_[op][i].begin() + static_cast<std::ptrdiff_t>(o.shape.size()));
        if (auto f = triton_load_past_end_at(m_, op, ef, pts_[i], blk, *box)) {
          out_.findings.push_back(std::move(*f));
          break;
        }
      }
    }
  }

  // Whether op's block index at point i is inside its array (outside is
  // out_of_bounds's finding).
  bool block_inside(std::size_t op, std::size_t i) const {
    const auto &o = m_.operands[op];
    for (std::size_t d = 0; d < o.num_blocks.size(); ++d)
      if (!o.element[d] && (blk_[op][i][d] < 0 || blk_[op][i][d] >= o.num_blocks[d])) return false;
    return true;
  }

  // The last run-order position b >= 1 whose axis one step along changes
  // the block of `op`.
  std::optional<std::size_t> last_dependent_axis(std::size_t op) const {
    const auto axes = run_axes(m_);
    std::vector<std::size_t> stride(axes.size(), 1);
    for (std::size_t k = axes.size(); k-- > 1;)
      stride[k - 1] = stride[k] * static_cast<std::size_t>(m_.grid[axes[k]]);
    for (std::size_t b = axes.size(); b-- > 1;)
      for (std::size_t x = 0; x < pts_.size(); ++x)
        if (pts_[x][axes[b]] + 1 < m_.grid[axes[b]] && blk_[op][x] != blk_[op][x + stride[b]]) return b;
    return std::nullopt;
  }

  void revisit(std::size_t op) {
    if (m_.is_read(op))
      if (auto last_dep = last_dependent_axis(op)) {
        // The first revisit whose first visit p0 (the smallest candidate p)
        // differs from it along an axis before the last dependent one.
        std::map<Point, std::pair<std::size_t, std::size_t>> seen; // block -> (first visit, visits)
        for (std::size_t q = 0; q < pts_.size(); ++q) {
          auto it = seen.find(blk_[op][q]);
          if (it == seen.end()) {
            seen.emplace(blk_[op][q], std::make_pair(q, std::size_t{1}));
            continue;
          }
          auto &[p0, visits] = it->second;
          bool non_consecutive = visits < q - p0;
          bool differ = false;
          const auto axes = run_axes(m_);
          for (std::size_t a = 0; a < *last_dep; ++a)
            differ = differ || pts_[p0][axes[a]] != pts_[q][axes[a]];
          if (non_consecutive && differ) {
            out_.findings.push_back(revisit_finding(m_, op, true, pts_[p0], pts_[q]));
            return;
          }
          ++visits;
        }
      }
    if (revisit_needs_a_store(m_, op)) {
      // The first q with an earlier point p of its block, a store firing at
      // p, and a point of another block between them (after p: before the
      // last such point before q, `gap`).
      std::map<Point, std::size_t> first_store;
      std::size_t gap = pts_.size(); // the last point before q on another block than q's
      for (std::size_t q = 0; q < pts_.size(); ++q) {
        if (q > 0 && blk_[op][q - 1] != blk_[op][q]) gap = q - 1;
        auto it = first_store.find(blk_[op][q]);
        if (it != first_store.end() && gap < pts_.size() && it->second < gap) {
          out_.findings.push_back(revisit_finding(m_, op, false, pts_[it->second], pts_[q]));
          return;
        }
        bool stores = false;
        for (std::size_t e = 0; e < m_.effects.size(); ++e)
          stores =
              stores || (m_.effects[e].operand == op && m_.effects[e].kind != Effect::read && fires_[e][q]);
        if (stores) first_store.emplace(blk_[op][q], q);
      }
      std::set<Point> seen;
      for (std::size_t q = 0; q < pts_.size(); ++q)
        if (!seen.insert(blk_[op][q]).second && blk_[op][q - 1] != blk_[op][q]) {
          out_.unstored_revisits.push_back(m_.operands[op].name);
          break;
        }
      return;
    }
    std::map<Point, std::size_t> first;
    for (std::size_t q = 0; q < pts_.size(); ++q) {
      auto it = first.find(blk_[op][q]);
      if (it == first.end()) {
        first.emplace(blk_[op][q], q);
      } else if (q > 0 && blk_[op][q - 1] != blk_[op][q]) {
        out_.findings.push_back(revisit_finding(m_, op, false, pts_[it->second], pts_[q]));
        return;
      }
    }
  }

  void parallel_conflict(std::size_t op) {
    std::vector<std::size_t> axes;
    for (std::size_t a = 0; a < m_.semantics.size(); ++a)
      if (m_.semantics[a] == spec::DimSemantics::parallel) axes.push_back(a);
    if (axes.empty()) return;
    auto proj = [&](std::size_t pt) {
      Point r;
      for (std::size_t a : axes)
        r.push_back(pts_[pt][a]);
      return r;
    };
    // The smallest p, then the smallest q > p on p's block, apart from it
    // along a parallel axis, one of the two storing it (every visit writes
    // its window back, stored or not).
    std::map<Point, std::vector<std::size_t>> by_block;
    for (std::size_t q = 0; q < pts_.size(); ++q)
      by_block[blk_[op][q]].push_back(q);
    for (std::size_t p = 0; p < pts_.size(); ++p) {
      const auto &visits = by_block[blk_[op][p]];
      for (auto it = std::upper_bound(visits.begin(), visits.end(), p); it != visits.end(); ++it)
        if (proj(*it) != proj(p) && (writes(op, p) || writes(op, *it))) {
          out_.findings.push_back(parallel_conflict_finding(m_, op, pts_[p], pts_[*it]));
          return;
        }
    }
  }

  // parallel-write-conflict of body copies' memory_space=any regions: the
  // smallest grid points p before q (by their coordinates) that differ
  // along a parallel axis where a copy at p and one at q touch one region of
  // an HBM array, one of them writing it. Every copy's region at every grid
  // point, swept along dim 0 per array (the usual per-block copies meet
  // none of the others there). Open prefetch contents in an address are the
  // solver's (check_copy_addresses).
  void hbm_copy_conflicts() {
    const CopyRegions regions(m_);
    if (regions.pairs().empty()) return;
    std::vector<char> used(m_.copy_addresses.size(), 0);
    for (const auto &[i, j] : regions.pairs())
      used[i] = used[j] = 1;
    for (std::size_t a = 0; a < used.size(); ++a)
      if (used[a] && regions.reads_open(a)) return;
    std::vector<std::size_t> axes;
    for (std::size_t a = 0; a < m_.semantics.size(); ++a)
      if (m_.semantics[a] == spec::DimSemantics::parallel) axes.push_back(a);
    auto core_differs = [&](std::size_t x, std::size_t y) {
      for (std::size_t a : axes)
        if (pts_[x][a] != pts_[y][a]) return true;
      return false;
    };
    struct Touch {
      std::size_t pt;
      bool write;
      Box box;
    };
    std::map<std::size_t, std::vector<Touch>> by_array;
    std::set<std::size_t> written;
    for (std::size_t pt = 0; pt < pts_.size(); ++pt)
      for (std::size_t a = 0; a < used.size(); ++a) {
        if (!used[a]) continue;
        const CopyRegions::At r = regions.at(a, pts_[pt]);
        if (!r.decided) {
          out_.unknown.push_back("parallel-write-conflict: the region of the copy on line " +
                                 std::to_string(m_.copy_addresses[a].loc.line) +
                                 " has no value at grid point " + format_tuple(pts_[pt]));
          return;
        }
        if (!r.fires || !region_meet(r.box, r.box)) continue;
        const std::size_t arr = hbm_array(m_, m_.copy_addresses[a].operand);
        const bool write = !m_.copy_addresses[a].source;
        if (write) written.insert(arr);
        by_array[arr].push_back({pt, write, r.box});
      }
    std::optional<std::pair<std::size_t, std::size_t>> best; // (p, q), p before q in run order
    auto better = [&](std::size_t p, std::size_t q) {
      return !best || std::tie(pts_[p], pts_[q]) < std::tie(pts_[best->first], pts_[best->second]);
    };
    constexpr std::int64_t kMaxComparisons = std::int64_t{1} << 26;
    std::int64_t comparisons = 0;
    for (auto &[arr, touches] : by_array) {
      if (!written.count(arr)) continue;
      auto lo0 = [](const Touch &t) { return t.box.empty() ? 0 : t.box[0].first; };
      auto hi0 = [](const Touch &t) { return t.box.empty() ? 1 : t.box[0].second; };
      std::stable_sort(touches.begin(), touches.end(),
                       [&](const Touch &x, const Touch &y) { return lo0(x) < lo0(y); });
      std::vector<const Touch *> active; // those whose dim-0 range reaches the current start
      for (const Touch &t : touches) {
        std::erase_if(active, [&](const Touch *u) { return hi0(*u) <= lo0(t); });
        for (const Touch *u : active) {
          if (++comparisons > kMaxComparisons) break;
          if (!(t.write || u->write) || !core_differs(t.pt, u->pt) || !region_meet(t.box, u->box)) continue;
          const std::size_t p = std::min(t.pt, u->pt), q = std::max(t.pt, u->pt);
          if (better(p, q)) best = std::make_pair(p, q);
        }
        if (comparisons > kMaxComparisons) break;
        active.push_back(&t);
      }
    }
    if (comparisons > kMaxComparisons && !best) {
      out_.unknown.push_back("parallel-write-conflict: more than " + std::to_string(kMaxComparisons) +
                             " pairs of body copies' memory_space=any regions meet");
      return;
    }
    if (!best) return;
    const Point &p = pts_[best->first], &q = pts_[best->second];
    if (const auto c = regions.conflict_at(p, q))
      out_.findings.push_back(
          hbm_copy_conflict_finding(m_, std::get<0>(*c), std::get<1>(*c), p, q, std::get<2>(*c)));
  }

  void not_covered(std::size_t op) {
    const auto &o = m_.operands[op];
    std::int64_t total = 1;
    for (std::int64_t n : o.num_blocks) {
      if (n <= 0) return;
      if (__builtin_mul_overflow(total, n, &total) || total > max_) {
        out_.unknown.push_back("output-not-covered/" + o.name + ": too many blocks to enumerate");
        return;
      }
    }
    const CoverCells cells = cover_cells(m_, op);
    std::vector<std::size_t> stores;
    const Effect *inexact = nullptr; // a store whose box is not static: it covers nothing decided
    for (std::size_t e = 0; e < m_.effects.size(); ++e)
      if (m_.effects[e].operand == op && m_.effects[e].kind != Effect::read) {
        if (m_.effects[e].exact)
          stores.push_back(e);
        else if (!inexact)
          inexact = &m_.effects[e];
      }
    // Per block: which stores write it at some grid point.
    std::map<Point, std::vector<char>> by_block;
    for (std::size_t q = 0; q < pts_.size(); ++q)
      for (std::size_t s = 0; s < stores.size(); ++s)
        if (fires_[stores[s]][q]) {
          auto &w = by_block[blk_[op][q]];
          w.resize(stores.size(), 0);
          w[s] = 1;
        }
    Point b(o.num_blocks.size(), 0);
    while (true) {
      auto it = by_block.find(b);
      for (std::size_t c = 0; c < cells.cells.size(); ++c) {
        if (!cell_in_array(o, b, cells.cells[c])) continue;
        bool covered = false;
        for (std::size_t s = 0; s < stores.size() && !covered; ++s)
          covered = it != by_block.end() && it->second[s] &&
                    box_contains(m_.effects[stores[s]].box, cells.cells[c]);
        if (!covered) {
          if (inexact)
            out_.unknown.push_back(not_covered_unknown(m_, op, *inexact));
          else
            out_.findings.push_back(not_covered_finding(m_, op, b, cells.cells[c]));
          return;
        }
      }
      std::size_t k = b.size();
      bool done = true;
      while (k > 0) {
        --k;
        if (++b[k] < o.num_blocks[k]) {
          done = false;
          break;
        }
        b[k] = 0;
      }
      if (done) return;
    }
  }

  void uninitialized(std::size_t r) {
    const Effect &rd = m_.effects[r];
    std::vector<std::size_t> inits;
    for (std::size_t e = 0; e < m_.effects.size(); ++e)
      if (m_.effects[e].operand == rd.operand && m_.effects[e].kind != Effect::read) inits.push_back(e);
    std::set<Point> written;
    for (std::size_t p = 0; p < pts_.size(); ++p) {
      const Point b = block(rd.operand, p);
      if (fires_[r][p] && !written.count(b)) {
        bool same_step = false;
        for (std::size_t w : inits)
          same_step = same_step || (m_.effects[w].order < rd.order && fires_[w][p]);
        if (!same_step) {
          out_.findings.push_back(uninitialized_finding(m_, rd, pts_[p]));
          return;
        }
      }
      for (std::size_t w : inits)
        if (fires_[w][p]) written.insert(b);
    }
  }

  // The box of effect e at point p (box_at); one not decided is the whole block.
  // (Memoized per effect and point: the accumulator walks look back over
  // many points for each read, and evaluating a subscript costs far more
  // than comparing two boxes.)
  const Box &box_or_whole(const Effect &e, std::size_t p) const {
    const auto compute = [&] {
      if (auto b = box_at(m_, e, pts_[p])) return *b;
      Box whole;
      for (std::int64_t n : m_.operands[e.operand].block)
        whole.emplace_back(0, n);
      return whole;
    };
    // (e is one of the model's effects: its index.)
    const std::size_t i = static_cast<std::size_t>(&e - m_.effects.data());
    if (&e < m_.effects.data() || i >= m_.effects.size())
      throw std::logic_error("box_or_whole: an effect that is not the model's");
    if (boxes_.size() != m_.effects.size()) boxes_.resize(m_.effects.size());
    auto &memo = boxes_[i];
    if (memo.size() != pts_.size()) memo.assign(pts_.size(), std::nullopt);
    if (!memo[p]) memo[p] = compute();
    return *memo[p];
  }

  // Whether effect c at p touches elements of b, as a clear or init takes an
  // accumulation's (or a read's) box: an empty b, an access wholly outside
  // its operand, is index-out-of-bounds' and meets every c. (The symbolic
  // checker's meets_box.)
  bool meets_box(const Effect &c, std::size_t p, const Box &b) const {
    return is_empty(b) || overlaps(box_or_whole(c, p), b);
  }

  // The pieces' elements outside b, in place.
  static void cut(std::vector<Box> &pieces, const Box &b) {
    std::vector<Box> left;
    for (const Box &a : pieces)
      for (Box &piece : minus(a, b))
        left.push_back(std::move(piece));
    pieces = std::move(left);
  }

  // a's elements outside b, as disjoint non-empty boxes (none where b
  // covers a; a itself where they do not meet or a is empty).
  static std::vector<Box> minus(const Box &a, const Box &b) {
    if (is_empty(a)) return {};
    if (!overlaps(a, b)) return {a};
    std::vector<Box> out;
    Box rest = a;
    for (std::size_t d = 0; d < a.size() && d < b.size(); ++d) {
      if (rest[d].first < b[d].first) {
        Box below = rest;
        below[d].second = b[d].first;
        out.push_back(std::move(below));
        rest[d].first = b[d].first;
      }
      if (b[d].second < rest[d].second) {
        Box above = rest;
        above[d].first = b[d].second;
        out.push_back(std::move(above));
        rest[d].second = b[d].second;
      }
    }
    return out;
  }

  // The smallest q where the init fires on elements of its block that a read
  // or accumulation at some p < q took, then the smallest such p (boxes at
  // their points, box_at; one not decided counts as the whole block).
  void resets(std::size_t op) {
    for (std::size_t w = 0; w < m_.effects.size(); ++w) {
      const Effect &we = m_.effects[w];
      if (we.operand != op || we.kind != Effect::write || m_.updates_through_locals(we)) continue;
      // per block: (point, box, the seed store or npos) in order
      std::map<Point, std::vector<std::tuple<std::size_t, Box, std::size_t>>> taken;
      std::set<Point> written; // blocks a store or accumulation has set, up to q
      bool found = false;
      // A seed's sum is taken where some of its inputs moved to another block by q.
      auto moved = [&](std::size_t seed, std::size_t p, std::size_t q) {
        if (seed == std::string::npos) return true;
        for (std::size_t in : accumulated_inputs(m_, m_.effects[seed]))
          if (blk_[in][p] != blk_[in][q]) return true;
        return false;
      };
      for (std::size_t q = 0; q < pts_.size() && !found; ++q) {
        if (fires_[w][q]) {
          const Box wb = box_or_whole(we, q);
          for (const auto &[p, b, seed] : taken[blk_[op][q]])
            if (overlaps(b, wb) && moved(seed, p, q)) {
              out_.findings.push_back(reset_finding(m_, we, pts_[p], pts_[q]));
              found = true;
              break;
            }
        }
        // (A read that only puts back what the block holds, a select's kept
        // branch, takes no partial result; nor does a plain read of a block
        // nothing has set yet, which reads no result at all: that read is
        // the uninitialized-accumulator's.)
        const Point &b = blk_[op][q];
        int first_set = std::numeric_limits<int>::max(); // the first store or accumulation at q
        for (std::size_t e = 0; e < m_.effects.size(); ++e)
          if (m_.effects[e].operand == op && m_.effects[e].kind != Effect::read && fires_[e][q])
            first_set = std::min(first_set, m_.effects[e].order);
        for (std::size_t e = 0; e < m_.effects.size(); ++e) {
          const Effect &x = m_.effects[e];
          if (x.operand == op && !x.keep && fires_[e][q] &&
              (x.kind == Effect::accumulate ||
               (x.kind == Effect::read && (written.count(b) || first_set < x.order)) ||
               (x.kind == Effect::write && m_.updates_through_locals(x))))
            taken[b].emplace_back(q, box_or_whole(x, q), std::string::npos);
          else if (x.operand == op && !x.keep && fires_[e][q] && seeds_output_sum(m_, x))
            taken[b].emplace_back(q, box_or_whole(x, q), e);
        }
        if (first_set != std::numeric_limits<int>::max()) written.insert(b);
      }
    }
  }

  // Replays the scratch's events in grid and program order: `pending` is the
  // first point that accumulated since the last init or consuming read.
  void scratch_resets(std::size_t op) {
    ScratchUse u = scratch_use(m_, op);
    if (u.inits.empty() || u.accumulates.empty()) return;
    enum class Ev { none, init, accumulate, consume };
    std::vector<Ev> kind(m_.effects.size(), Ev::none);
    for (std::size_t e : u.inits)
      kind[e] = Ev::init;
    for (std::size_t e : u.accumulates)
      kind[e] = Ev::accumulate;
    for (std::size_t e : u.consumes)
      kind[e] = Ev::consume;
    std::vector<std::size_t> events;
    for (std::size_t e = 0; e < m_.effects.size(); ++e)
      if (kind[e] != Ev::none) events.push_back(e);
    std::stable_sort(events.begin(), events.end(),
                     [&](std::size_t a, std::size_t b) { return m_.effects[a].order < m_.effects[b].order; });
    // A reset is harmful only within a visit (see the symbolic checker), and
    // only where the init's box meets what was accumulated (one bank of a
    // scratch indexed by the grid point is not another's).
    const std::vector<std::size_t> contributing = contributions(m_, u);
    // One pass over the run: what is pending does not depend on which init
    // is being judged, so each init is judged where it first fires with a
    // harmful reset (a body loop unrolled into hundreds of column inits and
    // accumulations made a pass per init cubic in the loop's length).
    struct Pending {
      std::size_t point, effect;
      const Box *box; // box_or_whole's cached box
    };
    std::vector<Pending> pending;                                     // since the last clear
    std::map<std::size_t, std::pair<std::size_t, std::size_t>> first; // init -> (accumulated, reset)
    for (std::size_t q = 0; q < pts_.size() && first.size() < u.inits.size(); ++q)
      for (std::size_t e : events) {
        if (!fires_[e][q]) continue;
        if (kind[e] == Ev::accumulate) {
          pending.push_back({q, e, &box_or_whole(m_.effects[e], q)});
          continue;
        }
        const Box &eb = box_or_whole(m_.effects[e], q);
        // (A fresh init, `where(k == 0, 0, acc[...]) + x` where k == 0,
        // clears and then contributes: contributions().)
        if (kind[e] == Ev::init && !first.count(e)) {
          std::size_t best = pts_.size();
          for (const auto &pa : pending)
            if (pa.point < q && pa.point < best && overlaps(*pa.box, eb) && splits_a_visit(op, pa.point, q) &&
                !accumulated_again(op, pa.effect, pa.point, q))
              best = pa.point;
          if (best < pts_.size()) first[e] = {best, q};
        }
        // A clear takes what it meets (a bank read or reset leaves the
        // other banks' partial results pending; an empty box, an
        // accumulation wholly outside the scratch, meets every clear).
        std::erase_if(pending, [&](const Pending &pa) { return is_empty(*pa.box) || overlaps(eb, *pa.box); });
        if (std::find(contributing.begin(), contributing.end(), e) != contributing.end())
          pending.push_back({q, e, &eb});
      }
    for (std::size_t w : u.inits)
      if (auto it = first.find(w); it != first.end())
        out_.findings.push_back(
            reset_finding(m_, m_.effects[w], pts_[it->second.first], pts_[it->second.second]));
    for (std::size_t w : u.inits) {
      overwritten_reset(u, w);
      overwritten_after_reset(u, w);
    }
  }

  // As the symbolic checker's scratch_resets: whether accumulation a reads
  // the blocks it read at p again at some v >= q in q's CTA, with an output
  // the scratch reaches on one block at p, q and v (a round repeated whole).
  bool accumulated_again(std::size_t op, std::size_t a, std::size_t p, std::size_t q) {
    const std::vector<std::size_t> ins = accumulated_inputs(m_, m_.effects[a]);
    if (!round_may_repeat(m_, m_.effects[a])) return false;
    auto it = reached_.find(op);
    if (it == reached_.end()) it = reached_.emplace(op, reached_outputs(m_, op)).first;
    for (std::size_t v = q; v <= cta_last_[q]; ++v) {
      if (!fires_[a][v]) continue;
      bool same = true;
      for (std::size_t in : ins)
        same = same && blk_[in][v] == blk_[in][p];
      if (!same) continue;
      for (std::size_t x : it->second)
        if (blk_[x][p] == blk_[x][q] && blk_[x][q] == blk_[x][v]) return true;
    }
    return false;
  }

  // As the symbolic checker's overwritten_after_reset: per fed output, the
  // first q where the init fires whose block's last overwrite at or after
  // q (by point, then program order) is a delivering store after the init
  // in q's CTA, with no init between; then the first p before q in that
  // visit and CTA whose accumulation's input blocks are not read again by
  // it from q to t.
  void overwritten_after_reset(const ScratchUse &u, std::size_t wi) {
    if (!u.result || m_.triton) return;
    const Effect &w = m_.effects[wi];
    const std::size_t n = pts_.size();
    const std::vector<std::size_t> transfers = scratch_transfers(m_, u, w.operand);
    for (const OverwriteUse &ov : overwrite_uses(m_, w.operand)) {
      if (ov.delivering.empty()) continue;
      const std::size_t x = ov.output;
      bool found = false;
      for (std::size_t q = 0; q < n && !found; ++q) {
        if (!fires_[wi][q] || q == cta_first_[q]) continue;
        // An init where a later visit of x's block begins is output-revisit's.
        if (!m_.operands[x].revisit_any && blk_[x][q - 1] != blk_[x][q]) continue;
        std::size_t t = n, si = 0;
        for (std::size_t v = q; v < n; ++v)
          if (blk_[x][v] == blk_[x][q])
            for (std::size_t oi : ov.overwrites)
              if (fires_[oi][v] && (t != v || m_.effects[oi].order > m_.effects[si].order)) t = v, si = oi;
        if (t == n || cta_first_[t] != cta_first_[q]) continue;
        const Effect &s = m_.effects[si];
        if (std::find(ov.delivering.begin(), ov.delivering.end(), si) == ov.delivering.end()) continue;
        if (t == q && s.order < w.order) continue;
        bool init_between = false;
        for (std::size_t ii : u.inits) {
          const int io = m_.effects[ii].order;
          for (std::size_t v = q + 1; v < t; ++v)
            init_between = init_between || fires_[ii][v];
          if (io < s.order && fires_[ii][t] && (t != q || io > w.order)) init_between = true;
        }
        if (init_between) continue;
        const Box wb = box_or_whole(w, q);
        for (std::size_t p = cta_first_[q]; p < q && !found; ++p) {
          if (blk_[x][p] != blk_[x][q]) continue;
          for (std::size_t ai : u.accumulates) {
            const Effect &a = m_.effects[ai];
            bool lost = fires_[ai][p] && overlaps(box_or_whole(a, p), wb);
            // An init after it at p discards it (the reset clause's case),
            // unless a delivering store took it first: the block it went
            // into is overwritten at t (a flush and clear at every step).
            for (std::size_t ii : u.inits) {
              const int io = m_.effects[ii].order;
              bool taken = false;
              for (std::size_t di : ov.delivering)
                taken =
                    taken || (m_.effects[di].order > a.order && m_.effects[di].order < io && fires_[di][p]);
              lost = lost && !(io > a.order && fires_[ii][p] && !taken);
            }
            // (What a transfer moved on to other elements of the scratch
            // after it, before the reset, the reset does not touch.)
            const Box ab = box_or_whole(a, p);
            for (std::size_t ri : transfers) {
              const int ro = m_.effects[ri].order;
              auto meets = [&](std::size_t v) {
                return fires_[ri][v] && overlaps(box_or_whole(m_.effects[ri], v), ab);
              };
              bool moved = (ro > a.order && meets(p)) || (ro < w.order && meets(q));
              for (std::size_t v = p + 1; v < q && !moved; ++v)
                moved = meets(v);
              lost = lost && !moved;
            }
            const std::vector<std::size_t> ins = accumulated_inputs(m_, a);
            const bool repeats = value_repeats(m_, a);
            for (std::size_t v = q; lost && repeats && v <= t; ++v) {
              bool again = fires_[ai][v];
              for (std::size_t in : ins)
                again = again && blk_[in][v] == blk_[in][p];
              lost = !again;
            }
            if (lost) {
              out_.findings.push_back(
                  overwritten_after_reset_finding(m_, w, x, pts_[p], pts_[q], s, pts_[t]));
              found = true;
              break;
            }
          }
        }
      }
    }
  }

  // As the symbolic checker's overwritten_stores: per store, the first
  // point q where it fires after it fired at p earlier in the same visit of
  // op's block (every point from p to q in one CTA on that block), one of
  // its inputs on another block at q: at the next step first, then later.
  void overwritten_stores(std::size_t op) {
    for (std::size_t e = 0; e < m_.effects.size(); ++e) {
      const Effect &w = m_.effects[e];
      if (w.operand != op) continue;
      const auto inputs = overwritten_store_inputs(m_, w);
      if (inputs.empty()) continue;
      bool found = false;
      for (std::size_t p = 0; p + 1 < pts_.size() && !found; ++p) {
        if (cta_first_[p + 1] != cta_first_[p] || blk_[op][p] != blk_[op][p + 1] || !fires_[e][p] ||
            !fires_[e][p + 1] || apart(p, p + 1)) // (two cores: parallel-write-conflict's case)
          continue;
        for (std::size_t x : inputs)
          if (blk_[x][p] != blk_[x][p + 1]) {
            out_.findings.push_back(overwritten_store_finding(m_, w, x, pts_[p], pts_[p + 1]));
            found = true;
            break;
          }
      }
      // (The store's last firing point in the current visit, if any.)
      std::size_t last = pts_.size();
      for (std::size_t q = 0; q < pts_.size() && !found && !w.guards.empty(); ++q) {
        if (q > 0 && (cta_first_[q] != cta_first_[q - 1] || blk_[op][q] != blk_[op][q - 1]))
          last = pts_.size();
        if (!fires_[e][q]) continue;
        if (last < q && !apart(last, q))
          for (std::size_t x : inputs)
            if (blk_[x][last] != blk_[x][q]) {
              out_.findings.push_back(overwritten_store_finding(m_, w, x, pts_[last], pts_[q]));
              found = true;
              break;
            }
        last = q;
      }
    }
  }

  // As the symbolic checker's lost_output_writes: per store, the first point
  // in run order that is neither its CTA's first nor last step and whose
  // previous step has the same block.
  void lost_output_writes(std::size_t op) {
    for (std::size_t e = 0; e < m_.effects.size(); ++e) {
      const Effect &w = m_.effects[e];
      if (w.operand != op || w.kind == Effect::read) continue;
      for (std::size_t p = 0; p < pts_.size(); ++p) {
        const bool inner = cta_first_[p] < p && p < cta_last_[p]; // neither its CTA's first nor last step
        if (inner && fires_[e][p] && blk_[op][p] == blk_[op][p - 1]) {
          out_.findings.push_back(output_write_lost_finding(m_, w, pts_[p - 1], pts_[p]));
          break;
        }
      }
    }
  }

  // As the symbolic checker's lost_last_slot_writes: per store, the first
  // point in run order whose step index in its CTA is not the last step's
  // modulo the slot count, with no store that may overlap it later in the
  // CTA.
  void lost_last_slot_writes(std::size_t op) {
    const std::int64_t slots = gpu_slots(m_);
    const std::size_t n = pts_.size();
    const auto &first = cta_first_, &last = cta_last_;
    for (const auto &w : m_.effects) {
      if (w.operand != op || w.kind == Effect::read) continue;
      const std::size_t wi = static_cast<std::size_t>(&w - m_.effects.data());
      const std::vector<std::size_t> later = overlapping_stores(m_, w);
      for (std::size_t p = 0; p < n; ++p) {
        if (!fires_[wi][p]) continue;
        const auto t = static_cast<std::int64_t>(p - first[p]),
                   steps = static_cast<std::int64_t>(last[p] - first[p]);
        if (t % slots == steps % slots) continue;
        bool overwritten = false;
        for (std::size_t q = p + 1; q <= last[p] && !overwritten; ++q)
          for (std::size_t e : later)
            overwritten = overwritten || fires_[e][q];
        if (!overwritten) {
          out_.findings.push_back(output_last_slot_finding(m_, w, pts_[p], pts_[last[p]]));
          break;
        }
      }
    }
  }

  // Some output that scratch `op` reaches (reached_outputs) is on the same
  // block at p and q.
  bool splits_a_visit(std::size_t op, std::size_t p, std::size_t q) {
    auto it = reached_.find(op);
    if (it == reached_.end()) it = reached_.emplace(op, reached_outputs(m_, op)).first;
    for (std::size_t o : it->second)
      if (blk_[o][p] == blk_[o][q]) return true;
    return false;
  }

  // As the symbolic checker's lost_accumulations: per fed output and
  // accumulation, the smallest r where it is live (no clear of that output
  // after it at r, no store into the output taking its value at r) whose
  // next clear in its CTA is an init at q that starts a new visit, or which
  // has none (q the CTA's last point); then the smallest p < r in that CTA
  // that accumulated with the output on r's block (a fresh init that starts
  // the sum with an input block, `where(k == 0, 0, acc[...]) + x` at k == 0,
  // accumulated there too: contributions()).
  void lost_accumulations(std::size_t op) {
    const ScratchUse u = scratch_use(m_, op);
    // (Fed directly, `u.result`, or through another scratch: lost_uses.)
    if (u.accumulates.empty()) return;
    const std::size_t n = pts_.size();
    const std::vector<std::size_t> contributing = contributions(m_, u);
    std::vector<char> accumulated(n, 0);
    for (std::size_t x = 0; x < n; ++x)
      for (std::size_t aj : contributing)
        accumulated[x] = accumulated[x] || fires_[aj][x];
    for (const LostUse &l : lost_uses(m_, op)) {
      const std::vector<std::size_t> &clears = l.clears;
      auto clear_fires = [&](std::size_t ci, std::size_t x) {
        auto need = l.also_needs.find(ci);
        return fires_[ci][x] && (need == l.also_needs.end() || fires_[need->second][x]);
      };
      // A clear counts for what a accumulated at r only where its box meets
      // that (a flush of rows 0:8 delivers nothing of rows 8:16).
      // (An accumulation wholly outside the scratch, an empty box, is
      // index-out-of-bounds': every clear counts for it.)
      auto meets = [&](std::size_t ci, std::size_t x, const Box &ab) {
        return clear_fires(ci, x) && meets_box(m_.effects[ci], x, ab);
      };
      // Per (CTA, window of the output): the first point that accumulated.
      std::map<std::pair<Point, Point>, std::size_t> first_acc;
      for (std::size_t pt = 0; pt < n; ++pt)
        if (accumulated[pt]) first_acc.emplace(std::make_pair(block(op, pt), blk_[l.output][pt]), pt);
      for (std::size_t k = 0; k < u.accumulates.size(); ++k) {
        if (!l.feeds[k]) continue;
        const std::size_t ai = u.accumulates[k];
        const Effect &a = m_.effects[ai];
        const std::vector<std::size_t> ins = accumulated_inputs(m_, a);
        for (std::size_t r = 0; r < n; ++r) {
          bool live = fires_[ai][r];
          if (!live) continue;
          const Box ab = box_or_whole(a, r);
          for (std::size_t ci : clears)
            live = live && !(m_.effects[ci].order > a.order && meets(ci, r, ab));
          for (std::size_t wi : l.delivering[k])
            live = live && !fires_[wi][r];
          if (!live) continue;
          // The next point of r's CTA where a clear meeting it fires (n: none).
          std::size_t next = n;
          for (std::size_t x = r + 1; x <= cta_last_[r] && next == n; ++x)
            for (std::size_t ci : clears)
              if (meets(ci, x, ab)) next = x;
          const std::size_t q = next < n ? next : cta_last_[r];
          // (The first clear meeting it at q: an init.)
          // (Some init meets it at q with no clear meeting it earlier in
          // the step: the least order of the inits that meet it is at most
          // that of the clears that do.)
          int init_order = std::numeric_limits<int>::max(), clear_order = std::numeric_limits<int>::max();
          for (std::size_t wi : u.inits)
            if (m_.effects[wi].order < init_order && meets(wi, q, ab)) init_order = m_.effects[wi].order;
          for (std::size_t ci : clears)
            if (m_.effects[ci].order < std::min(clear_order, init_order) && meets(ci, q, ab))
              clear_order = m_.effects[ci].order;
          const bool init_first = init_order != std::numeric_limits<int>::max() && init_order <= clear_order;
          if (next < n && (!init_first || splits_a_visit(op, r, q))) continue;
          // (a round repeated whole: as the symbolic checker's, with z the
          // last init at or before r in its CTA)
          if (round_may_repeat(m_, a) && !u.inits.empty()) {
            std::size_t z = n;
            for (std::size_t t = r + 1; t-- > cta_first_[r] && z == n;)
              for (std::size_t wi : u.inits)
                if (fires_[wi][t]) z = t;
            bool again = false;
            for (std::size_t v = cta_first_[r]; z < n && v < z && !again; ++v) {
              again = fires_[ai][v] && blk_[l.output][v] == blk_[l.output][r];
              for (std::size_t in : ins)
                again = again && blk_[in][v] == blk_[in][r];
            }
            if (again) continue;
          }
          auto it = first_acc.find({block(op, r), blk_[l.output][r]});
          if (it != first_acc.end() && it->second < r) {
            out_.findings.push_back(lost_finding(m_, op, l.output, a, pts_[it->second], pts_[r], pts_[q]));
            break;
          }
        }
      }
    }
  }

  // Whether some init or accumulation of scratch `op` fires at every grid
  // point (no guard): then every visit writes it, and the last init before
  // any read is at the reading point.
  bool written_everywhere(std::size_t op, bool inits_only) const {
    const ScratchUse u = scratch_use(m_, op);
    auto unguarded = [&](std::size_t e) { return m_.effects[e].guards.empty(); };
    return std::any_of(u.inits.begin(), u.inits.end(), unguarded) ||
           (!inits_only && std::any_of(u.accumulates.begin(), u.accumulates.end(), unguarded));
  }
  bool visits_matter(std::size_t op) const {
    return m_.operands[op].role == spec::Role::scratch && !m_.operands[op].acc &&
           !empty_visit_candidates(op).empty() && !written_everywhere(op, false);
  }
  // Where crossed_chains may find something, by the init guards alone: an
  // axis a some guard names and an axis b > a (longer than 1) it does not,
  // (a, b); nullopt when none (an init on the innermost reduction axis).
  std::optional<std::pair<std::size_t, std::size_t>> chain_inside(std::size_t op) const {
    for (std::size_t i : scratch_use(m_, op).inits) {
      std::vector<bool> named(m_.grid.size(), false);
      for (const auto &g : m_.effects[i].guards)
        mark_axes(g, named);
      for (std::size_t a = 0; a < named.size(); ++a)
        for (std::size_t b = a + 1; named[a] && b < named.size(); ++b)
          if (!named[b] && m_.grid[b] > 1) return std::make_pair(a, b);
    }
    return std::nullopt;
  }
  static void mark_axes(const spec::Expr &e, std::vector<bool> &named) {
    if (e.op == spec::Op::Call && e.name == "program_id" && e.args.size() == 1 &&
        e.args[0].op == spec::Op::Int && e.args[0].int_value >= 0 &&
        static_cast<std::size_t>(e.args[0].int_value) < named.size())
      named[static_cast<std::size_t>(e.args[0].int_value)] = true;
    for (const auto &a : e.args)
      mark_axes(a, named);
  }

  bool resets_matter(std::size_t op) const {
    return m_.operands[op].role == spec::Role::scratch && !m_.operands[op].acc &&
           !scratch_use(m_, op).inits.empty() && !carried_uses(m_, op).empty() &&
           !written_everywhere(op, true);
  }

  // The stores that could store a block's partial result in a visit that
  // neither initializes nor accumulates the scratch: a store into an output
  // whose value reads nothing but scratch (`o[...] = acc[...]`, `acc / l`),
  // of a scratch with inits. (A store that reads an input block too, a
  // second pass's `(x - mean) * rstd`, computes the block from it.)
  std::vector<CarriedUse> empty_visit_candidates(std::size_t op) const {
    std::vector<CarriedUse> out;
    if (m_.operands[op].acc || scratch_use(m_, op).inits.empty()) return out;
    for (const CarriedUse &c : carried_uses(m_, op)) {
      const Effect &st = m_.effects[c.store];
      if (std::all_of(st.sources.begin(), st.sources.end(), [&](std::size_t r) {
            return m_.operands[m_.effects[r].operand].role == spec::Role::scratch;
          }))
        out.push_back(c);
    }
    return out;
  }

  // accumulator-carried, the empty visit: a store at q into the output's
  // block B of what the scratch holds, in a visit of B (the consecutive
  // points on B around q, in q's CTA) where nothing initializes or
  // accumulates the scratch, so that it stores the partial result the
  // scratch accumulated at its last write p before the visit, where the
  // output was on another block: the scratch is reset per block (its inits
  // fire on two blocks of the output), but not for B. The init inside the
  // guard that skips an empty block's work (`when k * bk < length[b]`). (A
  // single init for the whole grid is a total every block may store; an
  // exclusive scan's visit accumulates after its store; a copy into the
  // scratch at p, the next step's prefetch, is no partial result.)
  void empty_visits(std::size_t op) {
    const ScratchUse u = scratch_use(m_, op);
    std::vector<std::size_t> writes = u.inits;
    writes.insert(writes.end(), u.accumulates.begin(), u.accumulates.end());
    const std::size_t n = pts_.size();
    for (const CarriedUse &c : empty_visit_candidates(op)) {
      const Effect &rd = m_.effects[c.consume];
      bool two_blocks = false;
      std::optional<std::size_t> first;
      for (std::size_t x = 0; x < n && !two_blocks; ++x)
        for (std::size_t i : u.inits)
          if (fires_[i][x]) {
            if (!first) first = x;
            two_blocks = two_blocks || blk_[c.output][x] != blk_[c.output][*first];
          }
      if (!two_blocks) continue;
      // written[t]: how many points before t write the scratch (any box).
      std::vector<std::size_t> written(n + 1, 0);
      for (std::size_t t = 0; t < n; ++t) {
        bool any = false;
        for (std::size_t e : writes)
          any = any || fires_[e][t];
        written[t + 1] = written[t] + (any ? 1 : 0);
      }
      for (std::size_t s0 = 0, s1 = 0; s0 < n; s0 = s1) {
        // The visit [s0, s1).
        for (s1 = s0 + 1; s1 < n && s1 != cta_first_[s1] && blk_[c.output][s1] == blk_[c.output][s0]; ++s1) {
        }
        if (written[s1] - written[s0] > 0) continue;
        std::optional<std::size_t> q;
        for (std::size_t t = s0; t < s1 && !q; ++t)
          if (fires_[c.store][t] && fires_[c.consume][t]) q = t;
        if (!q) continue;
        const Box rb = box_or_whole(rd, *q);
        // The last write before the visit of what the store reads: an accumulation.
        std::optional<std::size_t> p, last;
        for (std::size_t t = s0; t-- > cta_first_[*q] && !last;)
          for (std::size_t e : writes)
            if (fires_[e][t] && overlaps(box_or_whole(m_.effects[e], t), rb)) {
              // (at t, its last write in program order decides)
              std::size_t lw = e;
              for (std::size_t f : writes)
                if (fires_[f][t] && overlaps(box_or_whole(m_.effects[f], t), rb) &&
                    m_.effects[f].order > m_.effects[lw].order)
                  lw = f;
              last = t;
              if (std::find(u.accumulates.begin(), u.accumulates.end(), lw) != u.accumulates.end()) p = t;
              break;
            }
        if (!p || blk_[c.output][*p] == blk_[c.output][*q]) continue;
        out_.findings.push_back(empty_visit_finding(m_, op, c, pts_[*p], pts_[*q]));
        break;
      }
    }
  }

  // accumulator-carried, a reset superseded: a store at q into the output's
  // block B of what the scratch holds, whose last init before the read (of
  // what the read takes) fired at w while the output was on another block,
  // after an init at some w0 < w while it was on B: the scratch is reset per
  // block, and B's reset was overwritten by another block's before B stored.
  // Blocks visited in turn that share one scratch (grid (b, kv, q) with the
  // output on q and the init on kv == 0), at any length of the reduction. (A
  // running total or scan that is reset per row never resets for a later
  // block of the row; a block whose visits each reset first has its own init
  // last.)
  void superseded_resets(std::size_t op) {
    const ScratchUse u = scratch_use(m_, op);
    if (u.inits.empty()) return;
    const std::size_t n = pts_.size();
    // prev[t]: the last point at or before t where some init fires (n: none),
    // so that the walks back from a read visit only init points.
    std::vector<std::size_t> prev(n, n);
    for (std::size_t t = 0; t < n; ++t) {
      bool fires = false;
      for (std::size_t i : u.inits)
        fires = fires || fires_[i][t];
      prev[t] = fires ? t : t > 0 ? prev[t - 1] : n;
    }
    const auto before = [&](std::size_t t) { return t > 0 ? prev[t - 1] : n; };
    for (const CarriedUse &c : carried_uses(m_, op)) {
      const Effect &rd = m_.effects[c.consume];
      for (std::size_t q = 0; q < n; ++q) {
        if (!fires_[c.store][q] || !fires_[c.consume][q]) continue;
        const Box rb = box_or_whole(rd, q);
        auto init_at = [&](std::size_t t, bool before_read) {
          for (std::size_t i : u.inits)
            if (fires_[i][t] && (!before_read || m_.effects[i].order < rd.order) &&
                overlaps(box_or_whole(m_.effects[i], t), rb))
              return true;
          return false;
        };
        std::optional<std::size_t> w;
        for (std::size_t t = prev[q]; t != n && t >= cta_first_[q] && !w; t = before(t))
          if (init_at(t, t == q)) w = t;
        if (!w || blk_[c.output][*w] == blk_[c.output][q]) continue;
        std::optional<std::size_t> w0;
        for (std::size_t t = before(*w); t != n && t >= cta_first_[q] && !w0; t = before(t))
          if (blk_[c.output][t] == blk_[c.output][q] && init_at(t, false)) w0 = t;
        if (!w0) continue;
        out_.findings.push_back(superseded_reset_finding(m_, op, c, pts_[*w0], pts_[*w], pts_[q]));
        break;
      }
    }
  }

  // accumulator-carried, chains crossed: the scratch's inits fire at points
  // that differ on some axes (the chain axes: a scan reset at `i == 0` on
  // grid (i, j) fires at (0, j) for every j, one running value per j), and
  // a read at q, with no init before it at q, takes what a point p of
  // another chain stored last, after an init of q's own chain: the chains
  // share the scratch, and a chain axis runs inside the axis the value is
  // carried along. (Banked, `c[program_id(1)]`, each read meets its own
  // chain's stores.) One init point, or inits that differ on every axis
  // with none fired on whole (below), make no chains.
  void crossed_chains(std::size_t op) {
    const ScratchUse u = scratch_use(m_, op);
    const std::size_t n = pts_.size();
    std::optional<std::size_t> first;
    std::vector<bool> chain(m_.grid.size(), false);
    for (std::size_t t = 0; t < n; ++t)
      if (init_fires(u, t, [](int) { return true; })) {
        if (!first) first = t;
        for (std::size_t d = 0; d < chain.size(); ++d)
          chain[d] = chain[d] || pts_[t][d] != pts_[*first][d];
      }
    // Inits on every axis: a scan reset more than once along the axis it is
    // carried on (`i % 2 == 0` on grid (i, j), or at the segment starts of
    // a prefetch table) has inits that differ there too. Its chain axes are
    // then the ones the inits fire on whole: every init point's line along
    // the axis is all inits (j above), while the carried axis has points
    // with no init.
    if (std::all_of(chain.begin(), chain.end(), [](bool b) { return b; })) {
      std::map<Point, std::size_t> at;
      for (std::size_t t = 0; t < n; ++t)
        at.emplace(pts_[t], t);
      for (std::size_t d = 0; d < chain.size(); ++d) {
        chain[d] = m_.grid[d] > 1;
        for (std::size_t t = 0; t < n && chain[d]; ++t) {
          if (!init_fires(u, t, [](int) { return true; })) continue;
          Point x = pts_[t];
          for (x[d] = 0; x[d] < m_.grid[d] && chain[d]; ++x[d])
            chain[d] = init_fires(u, at.at(x), [](int) { return true; });
        }
      }
    }
    if (std::none_of(chain.begin(), chain.end(), [](bool b) { return b; }) ||
        std::all_of(chain.begin(), chain.end(), [](bool b) { return b; }))
      return;
    auto same_chain = [&](std::size_t a, std::size_t b) {
      for (std::size_t d = 0; d < chain.size(); ++d)
        if (chain[d] && pts_[a][d] != pts_[b][d]) return false;
      return true;
    };
    std::vector<std::size_t> writes = u.inits;
    writes.insert(writes.end(), u.accumulates.begin(), u.accumulates.end());
    // The reads that carry the running value: the stores' into an output,
    // and the scratch's own updates' (`c += x; o = c` takes the crossed
    // value in the update, whose store the output's read then sees at q).
    // (An update's crossing only where nothing else is found on the scratch:
    // a reset superseded, a visit with no init, seen first, are its cause.)
    std::vector<CarriedUse> uses = carried_uses(m_, op);
    const std::size_t stores = uses.size();
    const bool found = std::any_of(out_.findings.begin(), out_.findings.end(), [&](const Finding &f) {
      const auto *name = f.witness.get<std::string>("operand");
      return name && *name == m_.operands[op].name;
    });
    if (!uses.empty() && !found)
      for (std::size_t a : u.accumulates) {
        // (`c[...] += x` reads c in the accumulate itself.)
        if (m_.effects[a].kind == Effect::accumulate) uses.push_back({a, a, uses.front().output});
        for (std::size_t r : m_.effects[a].sources)
          if (m_.effects[r].operand == op && m_.effects[r].kind == Effect::read)
            uses.push_back({a, r, uses.front().output});
      }
    std::set<std::size_t> reported; // a read once, whichever use it serves
    for (std::size_t k = 0; k < uses.size(); ++k) {
      const CarriedUse &c = uses[k];
      if (reported.count(c.consume)) continue;
      const Effect &rd = m_.effects[c.consume];
      for (std::size_t q = 0; q < n; ++q) {
        if (!fires_[c.store][q] || !fires_[c.consume][q]) continue;
        const Box rb = box_or_whole(rd, q);
        // The last write before the read of what it takes, at p (at q: before the read).
        std::optional<std::size_t> p;
        bool by_init = false;
        for (std::size_t t = q + 1; t-- > cta_first_[q] && !p;) {
          int order = -1;
          for (std::size_t e : writes)
            if (fires_[e][t] && (t < q || m_.effects[e].order < rd.order) && m_.effects[e].order > order &&
                overlaps(box_or_whole(m_.effects[e], t), rb)) {
              order = m_.effects[e].order;
              by_init = std::find(u.inits.begin(), u.inits.end(), e) != u.inits.end();
              p = t;
            }
        }
        if (!p || *p == q || by_init || same_chain(*p, q)) continue;
        // q's own chain was initialized before p stored.
        std::optional<std::size_t> own;
        for (std::size_t t = *p; t-- > cta_first_[q] && !own;)
          if (same_chain(t, q))
            for (std::size_t i : u.inits)
              if (fires_[i][t] && overlaps(box_or_whole(m_.effects[i], t), rb)) own = t;
        if (!own) continue;
        out_.findings.push_back(crossed_chain_finding(m_, op, c, pts_[*own], pts_[*p], pts_[q], chain));
        if (k >= stores) out_.findings.back().witness.items.push_back({"carried_by", std::string("update")});
        reported.insert(c.consume);
        break;
      }
    }
  }

  // As the symbolic checker's scratch_carried: the smallest q where a store
  // of the scratch's partial result fires with no init before its read,
  // then the smallest p in q's CTA, at or after the last init before q, that
  // accumulated after its inits, where the output is on another block, with
  // an accumulation at some r, p < r < q, on q's block or on p's.
  void scratch_carried(std::size_t op) {
    const ScratchUse u = scratch_use(m_, op);
    if (u.accumulates.empty() || (u.inits.empty() && !m_.operands[op].acc)) return;
    // Init i at p re-initializes what the read takes (box rb; an empty one,
    // a read wholly outside the scratch, is index-out-of-bounds': every init
    // counts): an init of other rows leaves the partial result there.
    auto resets = [&](std::size_t i, std::size_t p, const Box &rb) {
      return fires_[i][p] && meets_box(m_.effects[i], p, rb);
    };
    // An accumulation at p, with (after_inits) no init of rb after it at
    // p, and a box that meets rb.
    auto accumulated_at = [&](std::size_t p, bool after_inits, const Box *rb = nullptr) {
      for (std::size_t ai : u.accumulates) {
        bool kept = fires_[ai][p] && (!rb || overlaps(box_or_whole(m_.effects[ai], p), *rb));
        for (std::size_t i : u.inits)
          if (after_inits && rb && m_.effects[i].order > m_.effects[ai].order)
            kept = kept && !resets(i, p, *rb);
        if (kept) return true;
      }
      return false;
    };
    for (const CarriedUse &c : carried_and_indirect_uses(m_, op)) {
      const int read_order = m_.effects[c.consume].order;
      // The first point of each point's visit of the output (q's must accumulate).
      std::vector<std::size_t> visit(pts_.size(), 0);
      for (std::size_t x = 1; x < pts_.size(); ++x)
        visit[x] = blk_[c.output][x - 1] == blk_[c.output][x] ? visit[x - 1] : x;
      bool found = false;
      for (std::size_t q = 0; q < pts_.size() && !found; ++q) {
        if (!fires_[c.store][q] || !fires_[c.consume][q]) continue;
        const Box rb = box_or_whole(m_.effects[c.consume], q);
        bool init_first = false;
        for (std::size_t i : u.inits)
          init_first = init_first || (resets(i, q, rb) && m_.effects[i].order < read_order);
        // The last point before q where an init of rb fired.
        std::size_t from = 0;
        for (std::size_t x = q; x-- > 0 && from == 0;)
          for (std::size_t i : u.inits)
            if (resets(i, x, rb)) from = x;
        // (An accumulation in q's visit, before the read at q itself.)
        bool accumulated_in_visit = false;
        for (std::size_t x = visit[q]; x <= q && fires_[c.store][q]; ++x)
          for (std::size_t ai : u.accumulates)
            accumulated_in_visit =
                accumulated_in_visit || (fires_[ai][x] && (x < q || m_.effects[ai].order < read_order));
        if (!init_first) {
          for (std::size_t p = from; p < q && !found; ++p) {
            // (block() of a scratch is its CTA.)
            if (block(op, p) != block(op, q) || !accumulated_at(p, true, &rb) ||
                blk_[c.output][p] == blk_[c.output][q])
              continue;
            for (std::size_t r = p + 1; r < q && !found && accumulated_in_visit; ++r)
              if (accumulated_at(r, false) &&
                  (blk_[c.output][r] == blk_[c.output][q] || blk_[c.output][r] == blk_[c.output][p])) {
                out_.findings.push_back(carried_finding(m_, op, c, pts_[p], pts_[q]));
                found = true;
              }
          }
        }
      }
    }
  }

  // Whether an init of u fires at point x whose order `pred` accepts.
  template <class Pred> bool init_fires(const ScratchUse &u, std::size_t x, Pred &&pred) const {
    for (std::size_t i : u.inits)
      if (fires_[i][x] && pred(m_.effects[i].order)) return true;
    return false;
  }
  // [x]: how many points before x an init of u fires at (x up to n).
  std::vector<std::size_t> count_inits_before(const ScratchUse &u) const {
    std::vector<std::size_t> out(pts_.size() + 1, 0);
    for (std::size_t x = 0; x < pts_.size(); ++x)
      out[x + 1] = out[x] + (init_fires(u, x, [](int) { return true; }) ? 1 : 0);
    return out;
  }

  // As the symbolic checker's readded: per adding use, the first q, then p,
  // then r.
  void readded(std::size_t op) {
    if (m_.triton) return;
    const ScratchUse u = scratch_use(m_, op);
    if (u.accumulates.empty()) return;
    const std::vector<CarriedUse> uses = adding_uses(m_, op);
    const std::size_t n = pts_.size();
    const std::vector<std::size_t> inits_before = count_inits_before(u);
    auto init_at = [&](std::size_t x, auto &&pred) { return init_fires(u, x, pred); };
    for (const CarriedUse &cq : uses) {
      const Effect &rq = m_.effects[cq.consume];
      bool found = false;
      for (std::size_t q = 0; q < n && !found; ++q) {
        if (!fires_[cq.store][q] || !fires_[cq.consume][q] || init_at(q, [&](int o) { return o < rq.order; }))
          continue;
        const Box rb = box_or_whole(rq, q);
        for (std::size_t p = cta_first_[q]; p <= q && !found; ++p) {
          if (blk_[cq.output][p] != blk_[cq.output][q]) continue;
          for (std::size_t r = cta_first_[q]; r <= p && !found; ++r) {
            // (no init strictly between r and q)
            if (r + 1 < q && inits_before[q] - inits_before[r + 1] > 0) continue;
            for (const CarriedUse &cp : uses) {
              if (found || cp.output != cq.output ||
                  m_.effects[cp.store].operand != m_.effects[cq.store].operand || !fires_[cp.store][p] ||
                  !fires_[cp.consume][p])
                continue;
              for (std::size_t ai : u.accumulates) {
                const Effect &a = m_.effects[ai];
                if (a.keep_mask || !fires_[ai][r] || !overlaps(box_or_whole(a, r), rb)) continue;
                if (init_at(r, [&](int o) { return o > a.order; })) continue;
                if (r == p && a.order > m_.effects[cp.consume].order) continue;
                if (p == q && m_.effects[cp.consume].order >= rq.order) continue;
                out_.findings.push_back(readded_finding(m_, op, cq, pts_[r], pts_[p], pts_[q]));
                found = true;
                break;
              }
            }
          }
        }
      }
      if (!found && !m_.effects[cq.store].masked_overwrite) readded_round(u, cq, uses); // (symbolic.cpp)
    }
  }

  // As the symbolic checker's readded_round: the first q, then p, then s,
  // then r. An accumulation at x holds until the next init: x's segment
  // starts after the last point before it where an init fires (or at an
  // init of x itself before it). With readded's case ruled out, p lies in
  // an earlier segment than q.
  void readded_round(const ScratchUse &u, const CarriedUse &cq, const std::vector<CarriedUse> &uses) {
    const std::size_t n = pts_.size();
    const Effect &rq = m_.effects[cq.consume];
    auto init_at = [&](std::size_t x, auto &&pred) { return init_fires(u, x, pred); };
    std::vector<std::size_t> accs;
    for (std::size_t ai : u.accumulates)
      if (!m_.effects[ai].keep_mask && round_may_repeat(m_, m_.effects[ai])) accs.push_back(ai);
    if (accs.empty()) return;
    const std::vector<std::size_t> inits_before = count_inits_before(u);
    // seg[x]: a point at or before the first whose accumulations may still
    // be held at x, per CTA.
    std::vector<std::size_t> seg(n);
    for (std::size_t x = 0; x < n; ++x)
      seg[x] = x == cta_first_[x] ? x : (init_at(x - 1, [](int) { return true; }) ? x - 1 : seg[x - 1]);
    // a at x holds at `upto` (a point, and the order of the read there).
    auto holds = [&](std::size_t ai, std::size_t x, std::size_t upto, int order) {
      const Effect &a = m_.effects[ai];
      if (!fires_[ai][x]) return false;
      if (x == upto && a.order > order) return false;
      // (an init of x after a clears it; one before a starts the segment)
      if (init_at(x, [&](int o) { return o > a.order && (x != upto || o < order); })) return false;
      if (upto > x + 1 && inits_before[upto] - inits_before[x + 1] > 0) return false;
      if (upto != x && init_at(upto, [&](int o) { return o < order; })) return false;
      return true;
    };
    auto same_inputs = [&](std::size_t ai, std::size_t x, std::size_t y) {
      for (std::size_t in : accumulated_inputs(m_, m_.effects[ai]))
        if (blk_[in][x] != blk_[in][y]) return false;
      return true;
    };
    for (std::size_t q = 0; q < n; ++q) {
      if (!fires_[cq.store][q] || !fires_[cq.consume][q] || init_at(q, [&](int o) { return o < rq.order; }))
        continue;
      const Box rb = box_or_whole(rq, q);
      for (std::size_t p = cta_first_[q]; p < q; ++p) {
        if (blk_[cq.output][p] != blk_[cq.output][q]) continue;
        for (const CarriedUse &cp : uses) {
          if (cp.output != cq.output || m_.effects[cp.store].operand != m_.effects[cq.store].operand ||
              !fires_[cp.store][p] || !fires_[cp.consume][p])
            continue;
          const Effect &rp = m_.effects[cp.consume];
          const Box pb = box_or_whole(rp, p);
          for (std::size_t sp = std::max(p + 1, seg[q]); sp <= q; ++sp)
            for (std::size_t rr = std::max(seg[p], cta_first_[q]); rr <= p; ++rr)
              for (std::size_t ai : accs) {
                const Effect &a = m_.effects[ai];
                if (!holds(ai, sp, q, rq.order) || !overlaps(box_or_whole(a, sp), rb) ||
                    !holds(ai, rr, p, rp.order) || !overlaps(box_or_whole(a, rr), pb) ||
                    !same_inputs(ai, rr, sp))
                  continue;
                out_.findings.push_back(readded_round_finding(m_, m_.effects[cq.consume].operand, cq,
                                                              pts_[rr], pts_[p], pts_[sp], pts_[q]));
                return;
              }
        }
      }
    }
  }

  // As the symbolic checker's overwritten_reset: the init at q discards what
  // q - 1 accumulated, whose later reads there are all consumes the step to
  // q overwrites.
  void overwritten_reset(const ScratchUse &u, std::size_t wi) {
    const auto axes = run_axes(m_);
    std::size_t keep = axes.size();
    for (std::size_t c = 0; c < u.consumes.size(); ++c)
      if (u.consume_store[c]) keep = std::min(keep, keep_from(m_, m_.effects[*u.consume_store[c]].operand));
    if (keep >= axes.size()) return;
    const Effect &w = m_.effects[wi];
    for (std::size_t q = 1; q < pts_.size(); ++q) {
      const std::size_t r = q - 1;
      std::size_t k = 0;
      while (k < axes.size() && pts_[q][axes[k]] == pts_[r][axes[k]])
        ++k;
      if (k < keep || !fires_[wi][q]) continue;
      bool read_before = false;
      for (std::size_t ci : u.inits)
        read_before = read_before || (m_.effects[ci].order < w.order && fires_[ci][q]);
      for (std::size_t ci : u.consumes)
        read_before = read_before || (m_.effects[ci].order < w.order && fires_[ci][q]);
      if (read_before) continue;
      bool accumulated = false;
      for (std::size_t ai : u.accumulates) {
        const Effect &a = m_.effects[ai];
        bool ok = fires_[ai][r];
        for (std::size_t ci : u.inits)
          ok = ok && !(m_.effects[ci].order > a.order && fires_[ci][r]);
        for (std::size_t x = 0; x < u.consumes.size(); ++x) {
          const std::size_t ci = u.consumes[x];
          if (m_.effects[ci].order <= a.order) continue;
          bool dead = u.consume_store[x] && keep_from(m_, m_.effects[*u.consume_store[x]].operand) <= keep;
          ok = ok && (dead || !fires_[ci][r]);
        }
        accumulated = accumulated || ok;
      }
      if (accumulated) {
        out_.findings.push_back(reset_finding(m_, w, pts_[r], pts_[q]));
        return;
      }
    }
  }

  // The smallest read point q, then the smallest p < q that stored an
  // element the read at q takes, with p and q apart along a parallel axis
  // and no init writing that element at q before the read or at a point
  // between.
  // Whether points p and q differ along a parallel axis.
  bool apart(std::size_t p, std::size_t q) const { return parallel_axis_apart(m_, pts_[p], pts_[q]) >= 0; }

  void scratch_carry(std::size_t op, bool fresh_cuts) {
    const CarryUse u = carry_use(m_, op, fresh_cuts);
    // Without an init every store accumulates, and uninitialized-accumulator
    // reports the first read: one root cause, one finding.
    if (u.stores.empty() || u.reads.empty() || u.inits.empty()) return;
    // What a fill writes at t where it fires and reads none of it there.
    auto filled = [&](const CarryUse::Fill &f, std::size_t t) -> std::optional<Box> {
      if (!fires_[f.store][t]) return std::nullopt;
      std::optional<Box> w = box_at(m_, m_.effects[f.store], pts_[t]);
      if (!w) return std::nullopt;
      for (std::size_t r : f.reads) {
        if (!fires_[r][t]) continue;
        std::optional<Box> rb = box_at(m_, m_.effects[r], pts_[t]);
        if (!rb || overlaps(*rb, *w)) return std::nullopt;
      }
      return w;
    };
    for (std::size_t q = 0; q < pts_.size(); ++q) {
      // The parts of the reads' boxes at q that no init before them in q
      // writes. (An init of what the read does not take, the other slot,
      // cuts nothing; one of half the box, the new rows of a halo window,
      // cuts that half; a read whose box is empty, past the scratch, carries
      // nothing.)
      std::vector<Box> carried;
      for (std::size_t r : u.reads) {
        if (!fires_[r][q]) continue;
        std::vector<Box> left = {box_or_whole(m_.effects[r], q)};
        for (std::size_t i : u.inits)
          if (fires_[i][q] && m_.effects[i].order < m_.effects[r].order)
            cut(left, box_or_whole(m_.effects[i], q));
        for (const auto &f : u.fills)
          if (m_.effects[f.store].order < m_.effects[r].order)
            if (auto w = filled(f, q)) cut(left, *w);
        carried.insert(carried.end(), left.begin(), left.end());
      }
      // A store at p of what such a read takes (one slot per block of a
      // parallel axis, `acc[j]`, is no carry between the slots), with no init
      // of it at a point between: walking back from q, each point's inits
      // cut what they write; the smallest such p.
      std::optional<std::size_t> found;
      for (std::size_t t = q; t-- > 0 && !carried.empty();) {
        if (apart(t, q))
          for (std::size_t s : u.stores) {
            if (!fires_[s][t]) continue;
            const Box sb = box_or_whole(m_.effects[s], t);
            if (std::any_of(carried.begin(), carried.end(), [&](const Box &rb) { return overlaps(sb, rb); }))
              found = t;
          }
        for (std::size_t i : u.inits)
          if (fires_[i][t]) cut(carried, box_or_whole(m_.effects[i], t));
        for (const auto &f : u.fills)
          if (auto w = filled(f, t)) cut(carried, *w);
      }
      if (found) {
        out_.findings.push_back(scratch_carry_finding(m_, op, pts_[*found], pts_[q]));
        return;
      }
    }
  }

  void input_copy_write(const Effect &c) {
    GuardEvaluator guards(m_, c, m_.grid.size());
    for (const auto &p : pts_) {
      auto g = guards.at(p);
      if (!g) {
        out_.unknown.push_back("cannot evaluate a guard on line " + std::to_string(c.loc.line));
        return;
      }
      if (*g) {
        out_.findings.push_back(input_copy_write_finding(m_, c, p));
        return;
      }
    }
  }

  void input_write(std::size_t w) {
    for (std::size_t p = 0; p < pts_.size(); ++p)
      if (fires_[w][p]) {
        out_.findings.push_back(input_write_finding(m_, m_.effects[w], pts_[p]));
        return;
      }
  }

  void alias(const AliasModel &a) {
    const auto &x = m_.operands[a.input];
    const auto &o = m_.operands[a.output];
    if (!x.windowed || !o.windowed || x.shape.size() != o.shape.size() || m_.grid.empty()) return;
    const std::size_t n = pts_.size();
    // next_change[p]: the first r > p whose output block differs from p's.
    std::vector<std::size_t> next_change(n, n);
    for (std::size_t p = n; p-- > 0;)
      if (p + 1 < n) next_change[p] = blk_[a.output][p + 1] != blk_[a.output][p] ? p + 1 : next_change[p + 1];
    // Whether the input's block at q and output block b share HBM elements.
    auto meets_block = [&](std::size_t q, const Point &b) {
      for (std::size_t d = 0; d < x.shape.size(); ++d) {
        // Saturating: an index far outside the array stays far outside.
        const std::int64_t xs = spec::saturating_mul(blk_[a.input][q][d], x.block[d]);
        const std::int64_t os = spec::saturating_mul(b[d], o.block[d]);
        if (!(xs < spec::saturating_add(os, o.block[d]) && os < spec::saturating_add(xs, x.block[d])))
          return false;
      }
      return true;
    };
    auto meets = [&](std::size_t q, std::size_t p) { return meets_block(q, blk_[a.output][p]); };
    // fetched[q]: the point whose fetch filled the input's window read at q
    // (its block changed there, or the CTA starts there). A window fetched
    // before p's visit ended holds what the array held before, whatever
    // that visit writes back.
    std::vector<std::size_t> fetched(n, 0);
    for (std::size_t q = 0; q < n; ++q)
      fetched[q] = q > cta_first_[q] && blk_[a.input][q - 1] == blk_[a.input][q] ? fetched[q - 1] : q;
    // (Only where the body reads the window: one fetched and never read
    // there takes nothing stale.)
    auto read_at = [&](std::size_t q) {
      for (std::size_t e = 0; e < m_.effects.size(); ++e)
        if (m_.effects[e].operand == a.input && m_.effects[e].kind != Effect::write && fires_[e][q])
          return true;
      return false;
    };
    for (std::size_t q = 0; q < n; ++q)
      for (std::size_t p = 0; p < q && read_at(q); ++p)
        if (next_change[p] <= fetched[q] && meets(q, p)) {
          out_.findings.push_back(alias_finding(m_, a, pts_[p], pts_[q]));
          return;
        }
    // Two points apart along a parallel axis may run on two cores (TPU):
    // one's fetch of the input and the other's write-back of the output
    // meet in HBM in no order.
    if (scratch_shared_across_parallel_axes(m_) &&
        std::all_of(o.block.begin(), o.block.end(), [](std::int64_t b) { return b > 0; })) {
      std::map<Point, std::vector<std::size_t>> visits; // output block -> its points
      for (std::size_t p = 0; p < n; ++p)
        visits[blk_[a.output][p]].push_back(p);
      std::optional<std::pair<std::size_t, std::size_t>> best; // (q, p), least in run order
      // (Not where q visits p's output block too: that revisit across a
      // parallel axis is parallel-write-conflict's.)
      auto take = [&](std::size_t q, const std::vector<std::size_t> &ps) {
        for (std::size_t p : ps)
          if (read_at(q) && apart(p, q) && blk_[a.output][p] != blk_[a.output][q] &&
              (!best || p < best->second))
            best = {q, p};
      };
      for (std::size_t q = 0; q < n && !best; ++q) {
        // The output blocks the input's block at q meets, dim by dim:
        // [floor(start / ob), ceil(end / ob)); all of them where that is
        // more than there are.
        Point lo(x.shape.size()), hi(x.shape.size());
        std::int64_t count = 1;
        for (std::size_t d = 0; d < x.shape.size(); ++d) {
          const std::int64_t xs = spec::saturating_mul(blk_[a.input][q][d], x.block[d]);
          const std::int64_t xe = spec::saturating_add(xs, x.block[d]);
          lo[d] = spec::floor_div(xs, o.block[d]);
          hi[d] = spec::floor_div(spec::saturating_add(xe, o.block[d] - 1), o.block[d]);
          count = spec::saturating_mul(count, std::max<std::int64_t>(hi[d] - lo[d], 0));
        }
        if (count > static_cast<std::int64_t>(visits.size())) {
          for (const auto &[b, ps] : visits)
            if (meets_block(q, b)) take(q, ps);
          continue;
        }
        Point b = lo;
        for (std::int64_t k = 0; k < count; ++k) {
          if (auto it = visits.find(b); it != visits.end()) take(q, it->second);
          for (std::size_t d = b.size(); d-- > 0;) {
            if (++b[d] < hi[d]) break;
            b[d] = lo[d];
          }
        }
      }
      if (best) {
        out_.findings.push_back(alias_across_cores_finding(m_, a, pts_[best->second], pts_[best->first]));
        return;
      }
    }
    // A store at q taking the input's window over the output's block, which
    // overwrites what a store at p, earlier in the visit (in q's CTA), put
    // there from other inputs that the store at q does not read again at
    // the same blocks (the smallest q, then p, per store).
    for (const auto &[s, r] : twin_stores(m_, a)) {
      const Effect &st = m_.effects[s];
      const std::vector<std::size_t> again = input_sources(m_, st, a);
      for (std::size_t q = 0; q < n; ++q) {
        if (!fires_[s][q] || !fires_[r][q] || !meets(q, q)) continue;
        std::size_t v = q; // the visit's first point
        while (v > cta_first_[q] && blk_[a.output][v - 1] == blk_[a.output][q])
          --v;
        const Box sb = box_or_whole(st, q);
        for (std::size_t p = v; p < q; ++p)
          for (std::size_t e = 0; e < m_.effects.size(); ++e) {
            const Effect &w = m_.effects[e];
            if (w.operand != a.output || w.kind == Effect::read || !fires_[e][p] ||
                !overlaps(box_or_whole(w, p), sb))
              continue;
            bool lost = false;
            for (std::size_t op : input_sources(m_, w, a))
              lost = lost || std::find(again.begin(), again.end(), op) == again.end() ||
                     blk_[op][p] != blk_[op][q];
            if (!lost) continue;
            out_.findings.push_back(stale_twin_finding(m_, a, st, pts_[p], pts_[q]));
            return;
          }
      }
    }
  }
};

} // namespace

RuleOutcome check_enumerated(const KernelModel &m, std::int64_t max_points) {
  return Enum(m, max_points).run();
}

std::optional<RuleOutcome> check_coverage_enumerated(const KernelModel &m, std::size_t op,
                                                     std::int64_t max_points) {
  return Enum(m, max_points).run_coverage(op);
}

RuleOutcome check_empty_visits(const KernelModel &m, std::int64_t max_points) {
  return Enum(m, max_points).run_empty_visits();
}

} // namespace pipecheck::verifier::rules
