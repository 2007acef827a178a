#include "verifier/rules/findings.hpp"

#include "spec/checked.hpp"
#include "spec/lower.hpp"
#include "spec/place.hpp"
#include "spec/prefetch.hpp"
#include "spec/print.hpp"
#include "spec/targets.hpp"

#include "verifier/races/padding.hpp"
#include "verifier/rules/targets.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <set>

namespace pipecheck::verifier::rules {

std::vector<std::size_t> run_axes(const KernelModel &m) {
  std::vector<std::size_t> r;
  for (std::size_t a = 0; a < m.grid.size(); ++a)
    if (a < m.cta_axes.size() && m.cta_axes[a]) r.push_back(a);
  for (std::size_t a = 0; a < m.grid.size(); ++a)
    if (!(a < m.cta_axes.size() && m.cta_axes[a])) r.push_back(a);
  return r;
}

namespace {

bool names_program_id(const spec::Expr &e) {
  if (e.op == spec::Op::Call && (e.name == "program_id" || e.name == "num_programs")) return true;
  for (const auto &a : e.args)
    if (names_program_id(a)) return true;
  return false;
}

} // namespace

std::size_t keep_from(const KernelModel &m, std::size_t op) {
  const auto &o = m.operands[op];
  const auto axes = run_axes(m);
  std::size_t k = axes.size();
  // The window (a BoundedSlice window's ds sizes too: another size is another window).
  for (const auto &e : o.window)
    if (names_program_id(e)) return axes.size();
  while (k > 0) {
    bool named = false;
    for (const auto &e : o.window)
      named =
          named || (axes[k - 1] < o.index_params.size() && spec::mentions(e, o.index_params[axes[k - 1]]));
    if (named) break;
    --k;
  }
  return k;
}

std::optional<Point> block_at(const KernelModel &m, std::size_t op, const Point &p) {
  return spec::block_index(m.operands[op], m.env, m.grid, p).value;
}

std::optional<Point> sizes_at(const KernelModel &m, std::size_t op, const Point &p) {
  return spec::window_sizes(m.operands[op], m.env, m.grid, p).value;
}

std::optional<std::pair<std::size_t, std::string>> bounded_slice_fault(const KernelModel &m, std::size_t op,
                                                                       const Point &p) {
  const auto &o = m.operands[op];
  if (!o.has_bounded_dims()) return std::nullopt;
  auto b = block_at(m, op, p);
  auto z = sizes_at(m, op, p);
  if (!b || !z) return std::nullopt;
  for (std::size_t d = 0; d < o.bounded.size(); ++d) {
    if (!o.bounded[d]) continue;
    const std::int64_t start = (*b)[d], size = (*z)[d], end = spec::saturating_add(start, size);
    const std::string ds = "ds(" + std::to_string(start) + ", " + std::to_string(size) + ") along dim " +
                           std::to_string(d) + " (BoundedSlice(" + std::to_string(o.block[d]) + "))";
    std::string why;
    if (start < 0)
      why = ds + " starts before the array";
    else if (size < 0)
      why = ds + " has a negative size";
    else if (size > o.block[d])
      why = ds + " is longer than its bound: the block buffer holds " + std::to_string(o.block[d]) +
            " elements";
    else if (end > o.shape[d])
      why = ds + " takes elements " + std::to_string(start) + ":" + std::to_string(end) +
            ", past the end of the dim (" + std::to_string(o.shape[d]) + " elements)";
    if (!why.empty()) return std::make_pair(d, why);
  }
  return std::nullopt;
}

std::optional<bool> guard_at(const KernelModel &m, const Effect &e, const Point &p) {
  return GuardEvaluator(m, e, p.size()).at(p);
}

GuardEvaluator::GuardEvaluator(const KernelModel &m, const Effect &e, std::size_t rank)
    : env_(m.env), point_(rank, 0) {
  std::map<std::string, int> ids;
  auto intern = [&](const std::string &n) {
    return ids.try_emplace(n, static_cast<int>(ids.size())).first->second;
  };
  for (const auto &g : e.guards)
    guards_.push_back(ints_.compile(spec::grid_calls_as_names(g, rank, m.grid), intern));
  vars_.assign(ids.size(), nullptr);
  for (std::size_t a = 0; a < rank; ++a)
    if (auto it = ids.find(spec::program_id_var(static_cast<std::int64_t>(a))); it != ids.end())
      vars_[static_cast<std::size_t>(it->second)] = &point_[a];
  for (const auto &[name, id] : ids)
    if (auto it = env_.find(name); it != env_.end() && !vars_[static_cast<std::size_t>(id)])
      vars_[static_cast<std::size_t>(id)] = &it->second;
}

std::optional<bool> GuardEvaluator::at(const Point &p) {
  for (std::size_t a = 0; a < point_.size(); ++a)
    point_[a] = p.at(a);
  for (int g : guards_) {
    auto v = ints_.value(g, vars_.data());
    if (!v) return std::nullopt;
    if (*v == 0) return false;
  }
  return true;
}

namespace {

std::optional<spec::Diagnostic> located(const spec::Expr &e, const spec::Env &env, const std::string &where,
                                        const Point &p) {
  auto d = spec::arithmetic_error(e, env, where);
  if (d) d->message += " at grid point " + format_tuple(p);
  return d;
}

} // namespace

std::optional<spec::Diagnostic> index_error_at(const KernelModel &m, std::size_t op, const Point &p) {
  spec::BlockIndex b = spec::block_index(m.operands[op], m.env, m.grid, p);
  if (b.error && b.error->fault == spec::BindFault::bad_input) return b.error->diag;
  return std::nullopt;
}

std::optional<spec::Diagnostic> guard_error_at(const KernelModel &m, const Effect &e, const Point &p) {
  for (const auto &g : e.guards) {
    if (auto d = located(bind_grid(g, p, m.grid), m.env, "a guard", p)) return d;
    auto v = spec::eval_int(bind_grid(g, p, m.grid), m.env);
    if (!v || *v == 0) return std::nullopt; // later guards are not evaluated
  }
  return std::nullopt;
}

std::optional<spec::Diagnostic> witness_error(const KernelModel &m, const Finding &f) {
  static const char *const point_keys[] = {"grid_point",  "first_visit",  "revisit",      "reset",
                                           "first_write", "second_write", "written_back", "read"};
  for (const auto &it : f.witness.items) {
    const auto *p = std::get_if<std::vector<std::int64_t>>(&it.value);
    if (!p || p->size() != m.grid.size()) continue;
    bool is_point = false;
    for (const char *k : point_keys)
      is_point = is_point || it.key == k;
    if (!is_point) continue;
    for (std::size_t op = 0; op < m.operands.size(); ++op)
      if (m.operands[op].windowed)
        if (auto d = index_error_at(m, op, *p)) return d;
  }
  return std::nullopt;
}

namespace {

// The statement of read `r` stores the whole block of a windowed output,
// unguarded, and does not read it: that store's effect.
std::optional<std::size_t> overwritten_store(const KernelModel &m, const Effect &r) {
  for (std::size_t e = 0; e < m.effects.size(); ++e) {
    const Effect &w = m.effects[e];
    if (w.order != r.order + 1 || w.kind != Effect::write) continue;
    const auto &o = m.operands[w.operand];
    if (o.role != spec::Role::out || !o.windowed) continue;
    bool whole = w.box.size() == o.block.size();
    for (std::size_t d = 0; whole && d < w.box.size(); ++d)
      whole = w.box[d].first == 0 && w.box[d].second == o.block[d];
    bool reads_it = false;
    for (const auto &x : m.effects)
      reads_it = reads_it || (x.operand == w.operand && x.kind == Effect::read && x.order == r.order);
    if (whole && !reads_it && w.guards.empty()) return e;
  }
  return std::nullopt;
}

} // namespace

ScratchUse scratch_use(const KernelModel &m, std::size_t op) {
  // Within one statement the reads carry its `order` and the store order + 1.
  // A read there of other elements than the store's (`acc[0:8] +=
  // acc[8:16]`, both exact) consumes them: it is no self-update.
  auto same_statement_stores = [&](const Effect &r) {
    for (const auto &w : m.effects)
      if (w.operand == op && w.kind != Effect::read && w.order == r.order + 1 &&
          (!w.exact || !r.exact || overlaps(w.box, r.box)))
        return true;
    return false;
  };
  // A result accumulator (feeds_output) also updates itself through a
  // tensor local: `a = acc[...]` then `acc[...] = a + s`. (An auxiliary
  // one's such stores, online softmax's `m[...] = maximum(m_prev, ...)`, stay
  // inits: its last update is dead by design.)
  ScratchUse u;
  u.result = feeds_output(m, op);
  auto through_local = [&](const Effect &w) {
    return u.result && !w.fresh && std::any_of(w.sources.begin(), w.sources.end(), [&](std::size_t r) {
             return m.effects[r].operand == op && m.effects[r].kind == Effect::read;
           });
  };
  for (std::size_t e = 0; e < m.effects.size(); ++e) {
    const Effect &ef = m.effects[e];
    if (ef.operand != op) continue;
    if (ef.kind == Effect::accumulate ||
        (ef.kind == Effect::write && (m.reads_own_target(ef) || through_local(ef))))
      u.accumulates.push_back(e);
    else if (ef.kind == Effect::write) {
      u.inits.push_back(e);
      if (ef.fresh) u.fresh_inits.push_back(e);
    } else if (!same_statement_stores(ef)) {
      u.consumes.push_back(e);
      u.consume_store.push_back(overwritten_store(m, ef));
    }
  }
  return u;
}

bool revisit_needs_a_store(const KernelModel &m, std::size_t op) {
  return !m.is_read(op) && !m.is_aliased_output(op);
}

std::vector<std::size_t> contributions(const KernelModel &m, const ScratchUse &u) {
  std::vector<std::size_t> out = u.accumulates;
  for (std::size_t i : u.fresh_inits)
    if (!accumulated_inputs(m, m.effects[i]).empty()) out.push_back(i);
  std::sort(out.begin(), out.end());
  return out;
}

bool feeds_output(const KernelModel &m, std::size_t op) {
  for (const auto &w : m.effects) {
    if (w.kind == Effect::read || m.operands[w.operand].role != spec::Role::out) continue;
    for (std::size_t r : w.sources)
      if (m.effects[r].operand == op) return true;
  }
  return false;
}

bool output_as_scratch(const KernelModel &m, std::size_t op) {
  if (m.operands[op].role != spec::Role::out || !m.operands[op].trivial_window || m.grid.empty())
    return false;
  for (const auto &w : m.effects) {
    if (w.kind == Effect::read || w.operand == op || m.operands[w.operand].role != spec::Role::out) continue;
    for (std::size_t r : w.sources)
      if (m.effects[r].operand == op) return true;
  }
  return false;
}

namespace {

spec::Diagnostic note(const spec::Loc &loc, std::string msg) {
  spec::Diagnostic d;
  d.severity = spec::Severity::note;
  d.loc = loc;
  d.message = std::move(msg);
  return d;
}

std::string block_str(const KernelModel &m, std::size_t op, const Point &p) {
  auto b = block_at(m, op, p);
  return b ? format_tuple(*b) : std::string("?");
}

Finding make(Rule rule, const spec::Loc &loc, std::string msg) {
  Finding f;
  f.rule = rule;
  f.loc = loc;
  f.message = std::move(msg);
  return f;
}

void add_block(Finding &f, const KernelModel &m, std::size_t op, const Point &p) {
  if (auto b = block_at(m, op, p)) f.witness.items.push_back({"block", *b});
}

} // namespace

Finding revisit_finding(const KernelModel &m, std::size_t op, bool accumulated, const Point &first,
                        const Point &revisit) {
  const auto &o = m.operands[op];
  std::string b = block_str(m, op, first);
  Finding f = accumulated ? make(Rule::reduction_not_last_axis, o.loc,
                                 "output '" + o.name +
                                     "' is accumulated across grid axes in an order that "
                                     "revisits its block " +
                                     b +
                                     " non-consecutively: reduce only along the last "
                                     "grid axes, after every axis the index_map depends on")
                          : make(Rule::output_revisit, o.loc,
                                 "output '" + o.name + "' revisits block " + b +
                                     " non-consecutively: the earlier visit's write-back is overwritten "
                                     "by a window that was never copied in");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"first_visit", first});
  f.witness.items.push_back({"revisit", revisit});
  add_block(f, m, op, first);
  f.notes.push_back(note(o.loc, "an earlier visit of block " + b + " of " + o.name + ", at grid point " +
                                    format_tuple(first)));
  f.notes.push_back(
      note(o.loc, "revisited at grid point " + format_tuple(revisit) + " after other blocks in between"));
  return f;
}

Finding uninitialized_finding(const KernelModel &m, const Effect &r, const Point &p) {
  const auto &o = m.operands[r.operand];
  bool scratch = o.role == spec::Role::scratch;
  std::string what =
      scratch ? "scratch '" + o.name + "'" : "block " + block_str(m, r.operand, p) + " of '" + o.name + "'";
  // The advice names the reduction axis where there is one: an output's last
  // axis in run order that its index map does not name.
  // A scratch's: that of the first windowed output that has one (the
  // result it accumulates).
  std::string init = "initialize it under `when program_id(k) == 0`, k the reduction axis";
  if (!m.grid.empty()) {
    const auto axes = run_axes(m);
    for (std::size_t x = 0; x < m.operands.size(); ++x) {
      const auto &out = m.operands[x];
      if (scratch ? out.role != spec::Role::out || !out.windowed : x != r.operand) continue;
      // Every axis the map does not name, of more than one step, reduces
      // (`(i, k1, k2)` into `(i, 0)`: both k1 and k2); with none longer
      // than one step, the last unnamed one.
      std::vector<std::size_t> reduced;
      std::optional<std::size_t> last;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        bool named = false;
        for (const auto &e : out.index)
          named =
              named || (axes[i] < out.index_params.size() && spec::mentions(e, out.index_params[axes[i]]));
        if (named) continue;
        last = axes[i];
        if (axes[i] < m.grid.size() && m.grid[axes[i]] > 1) reduced.push_back(axes[i]);
      }
      if (!last) continue;
      if (reduced.empty()) reduced.push_back(*last);
      std::sort(reduced.begin(), reduced.end());
      std::string cond, list;
      for (std::size_t k = 0; k < reduced.size(); ++k) {
        const std::string a = std::to_string(reduced[k]);
        cond += (k ? " and " : "") + std::string("program_id(") + a + ") == 0";
        list += (k == 0 ? "" : k + 1 == reduced.size() ? " and " : ", ") + a;
      }
      init = "initialize it under `when " + cond + "` (" + (reduced.size() > 1 ? "axes " : "axis ") + list +
             ", which the index_map of '" + out.name + "' does not name, " +
             (reduced.size() > 1 ? "are" : "is") + " its reduction)";
      break;
    }
  }
  // An aliased output's window is not fetched from the input it aliases:
  // zeroing it drops what that input holds, which an in-place update means
  // to add to.
  if (!scratch && !m.triton)
    for (const AliasModel &al : m.aliases)
      if (al.output == r.operand && m.operands[al.input].windowed) {
        init += "; to add to what its aliased input '" + m.operands[al.input].name +
                "' holds, seed it from that input there (`" + o.name +
                "[...] = " + m.operands[al.input].name +
                "[...]`): the window of an aliased output is not fetched from the input";
        break;
      }
  // A copy started before the statement that fills its source (a write-back
  // started before the compute): the reduction advice does not apply.
  const Effect *later = nullptr;
  if (r.copy_source)
    for (const Effect &w : m.effects)
      if (w.operand == r.operand && w.kind != Effect::read && w.order > r.order && !w.copy_source) {
        later = &w;
        break;
      }
  if (later)
    init = "the copy starts before the statement that writes its source; start it after that store";
  else if (r.copy_source)
    init = "a copy reads it; write it before the copy starts";
  // A scoped buffer (`S[...] = undefined` at its scope's entry) read before
  // anything wrote it: undefined at every entry, not an accumulator that
  // lacks its first-step init.
  const std::pair<int, spec::Loc> *entry = nullptr;
  for (const auto &d : o.discards)
    if (d.first < r.order) entry = &d;
  if (scratch && entry) {
    Finding f = make(Rule::uninitialized_read, r.loc,
                     std::string(r.copy_source ? "copies out " : "reads ") + what + " at grid point " +
                         format_tuple(p) +
                         " before anything wrote it: its contents are undefined at every entry of its scope "
                         "(`" +
                         o.name + "[...] = undefined`); write it in the scope before this");
    f.witness.items.push_back({"operand", o.name});
    f.witness.items.push_back({"grid_point", p});
    f.notes.push_back(note(entry->second, "its scope begins here: '" + o.name + "' holds nothing defined"));
    return f;
  }
  Finding f = make(Rule::uninitialized_accumulator, r.loc,
                   std::string(r.copy_source ? "copies out " : "reads ") + what + " at grid point " +
                       format_tuple(p) + " before anything wrote it: " +
                       (m.triton ? "store it in the program first (a Triton program's output holds what the "
                                   "array held, garbage unless aliased, and its scratch nothing)"
                                 : init));
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  if (!scratch) add_block(f, m, r.operand, p);
  f.notes.push_back(note(r.loc, "at grid point " + format_tuple(p) +
                                    " no earlier statement or grid "
                                    "point has written " +
                                    what));
  if (later) f.notes.push_back(note(later->loc, "written here, after the copy started"));
  return f;
}

namespace {

// A mask (substituted, program_id left) at grid point p, the mask locals it
// reads through a subscript (`m[4:32]`) bound there in a flow of their own:
// nullopt where it does not evaluate (it reads data).
std::optional<races::IntTensor> mask_at(const KernelModel &m, const races::PaddingFlow &flow,
                                        const spec::Expr &mask,
                                        const std::map<std::string, spec::Expr> &locals, const Point &p) {
  std::optional<races::PaddingFlow> local;
  std::deque<spec::Expr> values; // (the flow keeps pointers to them)
  if (!locals.empty()) {
    local.emplace(flow);
    for (const auto &[name, value] : locals)
      local->bind(name, values.emplace_back(bind_grid(value, p, m.grid)), m.env);
  }
  return (local ? *local : flow).concrete(bind_grid(mask, p, m.grid), m.env);
}

// The mask of a masked store `T[s] = where(c, v, T[s])` at a grid point,
// over its box: which elements it sets (the others it keeps).
class StoreMask {
public:
  /// `box`: the store's box at p (box_at). Without a keep_mask the store
  /// sets its whole box; a mask that does not evaluate (or does not fit the
  /// box) sets nothing as far as it can tell (`evaluated` false).
  StoreMask(const KernelModel &m, const races::PaddingFlow &flow, const Effect &w, const Point &p,
            const Box &box)
      : w_(w), box_(box) {
    if (!w.keep_mask) return;
    const auto value = mask_at(m, flow, *w.keep_mask, w.keep_locals, p);
    mask_ = fit(value);
    misfit_ = value.has_value() && !mask_.has_value();
    // `in_bounds & (v > 0)`: the conjuncts that read no data bound what it
    // may set (a data condition only narrows it).
    if (!mask_ && w.keep_bound) may_ = fit(mask_at(m, flow, *w.keep_bound, w.keep_locals, p));
  }
  bool evaluated() const { return !w_.keep_mask || mask_.has_value(); }
  /// Whether the mask has a value that does not fit the box (a window that
  /// passes the block, cut there: that store's fault is another rule's).
  bool misfit() const { return misfit_; }
  /// Whether what it may set is bounded: evaluated, or some conjunct is.
  bool bounded() const { return evaluated() || may_.has_value(); }
  /// Whether the store sets the element at `e` (block-relative, inside the box).
  bool sets(const std::vector<std::int64_t> &e) const {
    if (!w_.keep_mask) return true;
    return mask_ && at(*mask_, e);
  }
  /// Whether it may set it: sets, where the mask evaluates; else where its
  /// evaluated conjuncts hold (everywhere without one).
  bool may_set(const std::vector<std::int64_t> &e) const {
    if (!w_.keep_mask) return true;
    if (mask_) return at(*mask_, e);
    return !may_ || at(*may_, e);
  }

private:
  const Effect &w_;
  Box box_;
  std::optional<races::IntTensor> mask_, may_;
  bool misfit_ = false;

  // A mask that fits the box (right-aligned, dims of 1 broadcast), else nullopt.
  std::optional<races::IntTensor> fit(std::optional<races::IntTensor> t) const {
    const std::size_t r = t ? t->shape.size() : 0, nd = w_.keep_dims.size();
    if (r > nd) t.reset();
    for (std::size_t j = 0; t && j < r; ++j) {
      const std::int64_t ext = t->shape[r - 1 - j];
      const auto &bx = box_[w_.keep_dims[nd - 1 - j]];
      if (ext != 1 && ext != bx.second - bx.first) t.reset();
    }
    return t;
  }
  bool at(const races::IntTensor &t, const std::vector<std::int64_t> &e) const {
    std::int64_t mf = 0;
    const std::size_t r = t.shape.size(), nd = w_.keep_dims.size();
    for (std::size_t md = 0; md < r; ++md) {
      const std::size_t vd = nd + md - r; // right-aligned value dim (r <= nd here)
      const std::size_t d = w_.keep_dims[vd];
      const std::int64_t i = t.shape[md] == 1 ? 0 : e[d] - box_[d].first;
      mf = mf * t.shape[md] + i;
    }
    return t.v[static_cast<std::size_t>(mf)] != 0;
  }
};

races::PaddingFlow mask_flow(const KernelModel &m) {
  return races::PaddingFlow([mp = &m](const std::string &n) { return mp->operand_index(n).has_value(); },
                            [](const spec::Expr &) { return races::RefPadding{}; });
}

} // namespace

Finding masked_reset_finding(const KernelModel &m, const Effect &w, std::size_t output, const Point &earlier,
                             const Point &reset, const Effect &store, const Point &again,
                             const std::string &elem);

namespace {
// accumulator-reset's overwritten form: scratch `acc` accumulated at `first`
// (in the visit of a block of `output`), reset at `reset`, the block
// overwritten at `overwritten`.
void add_overwritten_witness(Finding &f, const KernelModel &m, std::size_t acc, std::size_t output,
                             const Point &first, const Point &reset, const Point &overwritten) {
  f.witness.items.push_back({"operand", m.operands[acc].name});
  f.witness.items.push_back({"first_visit", first});
  f.witness.items.push_back({"reset", reset});
  f.witness.items.push_back({"output", m.operands[output].name});
  f.witness.items.push_back({"overwritten", overwritten});
  add_block(f, m, output, reset);
}
} // namespace

std::optional<std::vector<Finding>> kept_garbage_findings(const KernelModel &m, std::size_t op,
                                                          std::vector<std::string> &unknown) {
  const auto &o = m.operands[op];
  std::vector<std::size_t> stores;
  std::optional<std::size_t> kept_read;
  for (std::size_t e = 0; e < m.effects.size(); ++e) {
    const Effect &ef = m.effects[e];
    if (ef.operand != op) continue;
    if (ef.kind == Effect::write) stores.push_back(e);
    if (ef.keep && !kept_read) kept_read = e;
  }
  if (!kept_read) return std::vector<Finding>{};
  const bool aliased = m.is_aliased_output(op); // it holds its input's data from the start
  // A masked store that sets an element again in one visit of its block,
  // where a scratch its value holds was re-initialized since the element was
  // set: what was stored there before the reset is lost (megablox's grouped
  // matmul whose store mask misses one bound: the second group's visit of a
  // shared tile overwrites the first group's rows). An unmasked store is
  // accumulator-reset's overwritten case already. Per keep store, the inits
  // of the scratches its value holds.
  std::map<std::size_t, std::vector<std::size_t>> resets; // keep store -> inits
  if (m.cta_axes.empty() && !m.triton)
    for (std::size_t s : stores) {
      if (!m.effects[s].keep_mask) continue;
      for (std::size_t r : m.effects[s].sources) {
        const std::size_t sc = m.effects[r].operand;
        if (m.operands[sc].role != spec::Role::scratch) continue;
        for (std::size_t i : scratch_use(m, sc).inits)
          if (std::find(resets[s].begin(), resets[s].end(), i) == resets[s].end()) resets[s].push_back(i);
      }
    }
  // The first such re-set: (grid position, element), the init, the earlier
  // store's position, the reset's, and the store.
  struct Reset {
    std::int64_t at = 0;
    Point elem;
    std::size_t init = 0, store = 0;
    std::int64_t earlier = 0, reset = 0;
  };
  std::optional<Reset> reset_found;
  const std::size_t rank = o.shape.size();
  const std::int64_t points = m.num_points();
  // Blocks that tile the array (no Element or BoundedSlice dim) are followed
  // one at a time, each over the points that visit it in run order: a store
  // writes inside its block only. Otherwise the whole array at once.
  const bool tiled = !o.has_element_dims() && !o.has_bounded_dims();
  std::int64_t region = 1;
  for (std::size_t d = 0; d < rank; ++d)
    region = spec::saturating_mul(region, tiled ? o.block[d] : o.shape[d]);
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 22, kMaxWork = std::int64_t{1} << 27,
                         kMaxPoints = std::int64_t{1} << 22;
  auto too_big = [&] {
    unknown.push_back("uninitialized-accumulator: which elements of '" + o.name +
                      "' the masked store at line " + std::to_string(m.effects[*kept_read].loc.line) +
                      " keeps is followed element by element, and " + std::to_string(points) +
                      " grid points over blocks of " + std::to_string(region) +
                      " elements are past what that follows (2^22 elements a block, 2^27 element stores)");
    return std::vector<Finding>{};
  };
  if (region > kMaxElements || points > kMaxPoints) return too_big();
  // The points in run order with their blocks, grouped by block (stable).
  std::vector<std::pair<Point, std::int64_t>> visits;
  visits.reserve(static_cast<std::size_t>(points));
  for (std::int64_t k = 0; k < points; ++k) {
    const Point p = spec::grid_point(m.grid, m.cta_axes, k);
    auto b = block_at(m, op, p);
    if (!b) return std::nullopt;
    visits.emplace_back(tiled ? *b : Point{}, k);
  }
  std::stable_sort(visits.begin(), visits.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  const races::PaddingFlow flow = mask_flow(m);
  std::vector<std::uint8_t> defined(static_cast<std::size_t>(region));
  std::vector<std::int64_t> kept_at(static_cast<std::size_t>(region)),
      maybe_at(static_cast<std::size_t>(region));
  // The element kept earliest (then first in row-major order) that stays
  // garbage: (grid position, its array coordinates); and the same for one a
  // mask that did not evaluate may keep.
  std::optional<std::pair<std::int64_t, Point>> worst, maybe;
  std::int64_t work = 0;
  std::map<std::size_t, bool> reads_open_prefetch; // per store: its mask reads a prefetch array
  for (std::size_t st : stores) {
    std::set<std::string> names;
    if (m.effects[st].keep_mask) spec::collect_names(*m.effects[st].keep_mask, names);
    reads_open_prefetch[st] = m.spec && std::any_of(names.begin(), names.end(), [&](const std::string &n) {
                                return m.spec->prefetch(n) != nullptr;
                              });
  }
  std::vector<std::int64_t> set_at; // per element: where a store last set it, and which store
  std::vector<std::size_t> set_by;
  // An init among `inits` that fires after store `before` at position p and
  // before store `after` at position q (p <= q, one visit): (init, position).
  std::map<std::pair<std::size_t, std::int64_t>, bool> fires;
  auto init_fires = [&](std::size_t i, std::int64_t at) {
    auto [it, fresh] = fires.try_emplace({i, at}, false);
    if (fresh)
      it->second = guard_at(m, m.effects[i], spec::grid_point(m.grid, m.cta_axes, at)).value_or(false);
    return it->second;
  };
  auto reset_between = [&](const std::vector<std::size_t> &inits, std::int64_t p, std::size_t before,
                           std::int64_t q,
                           std::size_t after) -> std::optional<std::pair<std::size_t, std::int64_t>> {
    // (Only a scratch the earlier store held loses a result: an output's
    // own init overwritten is no loss.)
    auto held = [&](std::size_t i) {
      const Effect &b = m.effects[before];
      return std::any_of(b.sources.begin(), b.sources.end(),
                         [&](std::size_t r) { return m.effects[r].operand == m.effects[i].operand; });
    };
    for (std::int64_t t = p; t <= q; ++t)
      for (std::size_t i : inits) {
        const int io = m.effects[i].order;
        if (!held(i)) continue;
        if ((t == p && io <= m.effects[before].order) || (t == q && io >= m.effects[after].order)) continue;
        if (init_fires(i, t)) return std::make_pair(i, t);
      }
    return std::nullopt;
  };
  for (std::size_t g = 0; g < visits.size();) {
    std::size_t end = g;
    while (end < visits.size() && visits[end].first == visits[g].first)
      ++end;
    Point origin(rank, 0);
    if (tiled)
      for (std::size_t d = 0; d < rank; ++d)
        origin[d] = o.window_start(d, visits[g].first[d]);
    std::fill(defined.begin(), defined.end(), aliased ? 1 : 0);
    std::fill(kept_at.begin(), kept_at.end(), -1);
    std::fill(maybe_at.begin(), maybe_at.end(), -1);
    if (!resets.empty()) {
      set_at.assign(defined.size(), -1);
      set_by.assign(defined.size(), 0);
    }
    std::int64_t visit_start = -1; // the first position of the current visit of this block
    Point last_block;              // (the whole array followed at once: a visit ends where the block changes)
    for (std::size_t v = g; v < end; ++v) {
      const std::int64_t k = visits[v].second;
      const Point p = spec::grid_point(m.grid, m.cta_axes, k);
      auto b = block_at(m, op, p);
      auto z = sizes_at(m, op, p); // a BoundedSlice window writes back only its size
      if (!b || !z) return std::nullopt;
      if (v == g || visits[v - 1].second + 1 != k || (!tiled && last_block != *b)) visit_start = k;
      last_block = *b;
      for (std::size_t s : stores) {
        const Effect &w = m.effects[s];
        auto gd = guard_at(m, w, p);
        if (!gd) return std::nullopt;
        if (!*gd || w.box.size() != rank) continue;
        // The store's box at this grid point (a `ds(program_id(0) * 16, 16)` is
        // one chunk here, not the whole block).
        const auto box = box_at(m, w, p);
        if (!box) return std::nullopt;
        std::int64_t volume = 1;
        bool empty = false;
        for (std::size_t d = 0; d < rank; ++d) {
          volume =
              spec::saturating_mul(volume, std::max<std::int64_t>((*box)[d].second - (*box)[d].first, 0));
          empty = empty || (*box)[d].second <= (*box)[d].first;
        }
        if (empty) continue;
        if ((work = spec::saturating_add(work, volume)) > kMaxWork) return too_big();
        const StoreMask mask(m, flow, w, p, *box); // a mask that does not evaluate defines nothing
        // (One over data keeps any element for some data, as far as the
        // rules can tell: kept. One over prefetch contents that are described,
        // not given, may keep none for the contents allowed: undecided.)
        // (One that does not fit the box keeps what the rules cannot tell: undecided.)
        const bool evaluated = mask.evaluated() || (!reads_open_prefetch[s] && !mask.misfit());
        std::vector<std::int64_t> e(rank);
        for (std::size_t d = 0; d < rank; ++d)
          e[d] = (*box)[d].first;
        while (true) {
          std::int64_t flat = 0;
          bool inside = true;
          for (std::size_t d = 0; d < rank; ++d) {
            const std::int64_t x = spec::saturating_add(o.window_start(d, (*b)[d]), e[d]);
            const std::int64_t local = x - origin[d], ext = tiled ? o.block[d] : o.shape[d];
            inside = inside && x >= 0 && x < o.shape[d] && (!o.bounded[d] || e[d] < (*z)[d]) && local >= 0 &&
                     local < ext;
            flat = flat * ext + local;
          }
          if (inside) {
            const auto f = static_cast<std::size_t>(flat);
            const bool sets = evaluated && mask.sets(e);
            if (sets && !set_at.empty()) {
              if (auto it = resets.find(s); it != resets.end() && set_at[f] >= visit_start)
                if (auto r = reset_between(it->second, set_at[f], set_by[f], k, s);
                    r && (!reset_found || k < reset_found->at)) {
                  Point elem(rank);
                  for (std::size_t d = 0; d < rank; ++d)
                    elem[d] = o.window_start(d, (*b)[d]) + e[d];
                  reset_found = Reset{k, elem, r->first, set_by[f], set_at[f], r->second};
                }
              set_at[f] = k;
              set_by[f] = s;
            }
            if (sets)
              defined[f] = 1;
            else if (!defined[f] && evaluated && kept_at[f] < 0)
              kept_at[f] = k;
            else if (!defined[f] && !evaluated && maybe_at[f] < 0)
              maybe_at[f] = k;
          }
          std::size_t d = rank;
          while (d-- > 0) {
            if (++e[d] < (*box)[d].second) break;
            e[d] = (*box)[d].first;
          }
          if (d == static_cast<std::size_t>(-1)) break;
        }
      }
    }
    for (std::size_t f = 0; f < defined.size(); ++f) {
      if (defined[f] || (kept_at[f] < 0 && maybe_at[f] < 0)) continue;
      Point elem(rank);
      for (std::size_t d = rank, r = f; d-- > 0;) {
        const std::int64_t ext = tiled ? o.block[d] : o.shape[d];
        elem[d] = origin[d] + static_cast<std::int64_t>(r) % ext;
        r /= static_cast<std::size_t>(ext);
      }
      auto &slot = kept_at[f] >= 0 ? worst : maybe;
      const std::int64_t at = kept_at[f] >= 0 ? kept_at[f] : maybe_at[f];
      if (!slot || std::make_pair(at, elem) < *slot) slot = std::make_pair(at, elem);
    }
    g = end;
  }
  const auto elem_str = [&](const Point &elem) { return element_str(o.name, elem); };
  std::vector<Finding> found;
  if (reset_found) {
    const Reset &r = *reset_found;
    const auto pt = [&](std::int64_t k) { return spec::grid_point(m.grid, m.cta_axes, k); };
    found.push_back(masked_reset_finding(m, m.effects[r.init], op, pt(r.earlier), pt(r.reset),
                                         m.effects[r.store], pt(r.at), elem_str(r.elem)));
  }
  if (!worst && maybe) {
    const Point p = spec::grid_point(m.grid, m.cta_axes, maybe->first);
    unknown.push_back("uninitialized-accumulator: at grid point " + format_tuple(p) +
                      " the masked store at line " + std::to_string(m.effects[*kept_read].loc.line) +
                      " may keep element " + elem_str(maybe->second) +
                      ", which nothing wrote before and no later grid point writes: its mask has no concrete "
                      "value there (it reads data, or does not fit the store), so whether the element stays "
                      "garbage is not decided");
    return found;
  }
  if (!worst) return found;
  const Point p = spec::grid_point(m.grid, m.cta_axes, worst->first);
  const std::vector<std::int64_t> &elem = worst->second;
  const Effect &r = m.effects[*kept_read];
  const std::string where = elem_str(elem);
  Finding f = make(Rule::uninitialized_accumulator, r.loc,
                   "at grid point " + format_tuple(p) + " the store keeps element " + where + " of block " +
                       block_str(m, op, p) +
                       (m.triton ? ", which no program writes: "
                                 : ", which nothing wrote before, and no later grid point writes it: ") +
                       "it stays garbage in the result");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  f.witness.items.push_back({"element", elem});
  add_block(f, m, op, p);
  f.notes.push_back(note(r.loc, "`where` takes " + where + " from '" + o.name +
                                    "' itself where its condition fails; every store after grid point " +
                                    format_tuple(p) + " leaves it out too"));
  found.push_back(std::move(f));
  return found;
}

Finding masked_reset_finding(const KernelModel &m, const Effect &w, std::size_t output, const Point &earlier,
                             const Point &reset, const Effect &store, const Point &again,
                             const std::string &elem) {
  const auto &acc = m.operands[w.operand];
  const auto &o = m.operands[output];
  const std::string b = block_str(m, output, reset);
  Finding f =
      make(Rule::accumulator_reset, w.loc,
           "this write re-initializes scratch '" + acc.name + "' at grid point " + format_tuple(reset) +
               ", within the visit of block " + b + " of '" + o.name + "': the masked store at grid point " +
               format_tuple(again) + " then sets element " + elem + " again, which the store at grid point " +
               format_tuple(earlier) +
               " had set from what accumulated before the reset, so that result is lost: initialize it only "
               "on the first step of the block's visit, or narrow the store's mask to the elements each "
               "round owns (a grouped matmul: its group's rows, from its start to its end)");
  add_overwritten_witness(f, m, w.operand, output, earlier, reset, again);
  f.notes.push_back(note(store.loc, elem + " set at grid point " + format_tuple(earlier) + " and again at " +
                                        format_tuple(again) + ", where the mask holds for it too"));
  f.notes.push_back(note(w.loc, "reset at grid point " + format_tuple(reset)));
  return f;
}

std::vector<bool> kept_garbage(const KernelModel &m, std::vector<Finding> &out,
                               std::vector<std::string> &unknown) {
  std::vector<bool> decided(m.operands.size(), false);
  for (std::size_t i = 0; i < m.operands.size(); ++i) {
    // A scratch (not acc) keeps what nothing wrote without harm until a read
    // uses it: the lowered program follows those elements one by one
    // (uninitialized-read where one reaches an output), so the kept read is
    // not checked on its own.
    if (m.operands[i].role == spec::Role::scratch && !m.operands[i].acc) {
      decided[i] = true;
      continue;
    }
    if (m.operands[i].role != spec::Role::out || !m.operands[i].windowed) continue;
    if (auto f = kept_garbage_findings(m, i, unknown)) {
      decided[i] = true;
      out.insert(out.end(), f->begin(), f->end());
    }
  }
  return decided;
}

namespace {
// Where operand `op` accumulates: its first `+=` (or a store whose value
// reads it, `acc = acc + x`), for a note that says so; its declaration
// where it has none.
spec::Loc accumulation_loc(const KernelModel &m, std::size_t op) {
  for (const auto &e : m.effects) {
    if (e.operand != op || e.kind == Effect::read) continue;
    if (e.kind == Effect::accumulate) return e.loc;
    for (std::size_t r : e.sources)
      if (m.effects[r].operand == op) return e.loc;
  }
  return m.operands[op].loc;
}
} // namespace

Finding reset_finding(const KernelModel &m, const Effect &w, const Point &partial, const Point &reset) {
  const auto &o = m.operands[w.operand];
  if (o.role == spec::Role::scratch) {
    Finding f =
        make(Rule::accumulator_reset, w.loc,
             "this write re-initializes scratch '" + o.name + "' at grid point " + format_tuple(reset) +
                 ", discarding the partial result accumulated since " + format_tuple(partial) +
                 " before any statement read it: guard the init on the first step of the "
                 "reduction axis");
    f.witness.items.push_back({"operand", o.name});
    f.witness.items.push_back({"first_visit", partial});
    f.witness.items.push_back({"reset", reset});
    f.notes.push_back(
        note(accumulation_loc(m, w.operand),
             "'" + o.name + "' accumulated at grid point " + format_tuple(partial) + " and not read since"));
    f.notes.push_back(note(w.loc, "reset at grid point " + format_tuple(reset)));
    return f;
  }
  std::string b = block_str(m, w.operand, reset);
  Finding f = make(Rule::accumulator_reset, w.loc,
                   "this write re-initializes block " + b + " of '" + o.name + "' at grid point " +
                       format_tuple(reset) + ", discarding the partial result accumulated since " +
                       format_tuple(partial) + ": guard the init on the reduction axis");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"first_visit", partial});
  f.witness.items.push_back({"reset", reset});
  add_block(f, m, w.operand, reset);
  f.notes.push_back(note(accumulation_loc(m, w.operand),
                         "block " + b + " accumulated at grid point " + format_tuple(partial)));
  f.notes.push_back(note(w.loc, "reset at grid point " + format_tuple(reset)));
  return f;
}

Finding input_write_finding(const KernelModel &m, const Effect &w, const Point &p) {
  const auto &o = m.operands[w.operand];
  std::string twin;
  for (const auto &a : m.aliases)
    if (a.input == w.operand) twin = m.operands[a.output].name;
  // Aliasing does not help: the output's window, not the input's, is what
  // gets written back to the shared HBM buffer, and a block the input
  // revisits consecutively keeps the write for the next grid step.
  const Target *t = m.target ? find_target(*m.target) : nullptr;
  const std::string window = t && t->kind != TargetKind::tpu ? "shared-memory (SMEM) window" : "VMEM window";
  Finding f = make(Rule::input_write_lost, w.loc,
                   twin.empty() ? "writes input '" + o.name +
                                      "', which is not aliased to an output: the write "
                                      "stays in the " +
                                      window + " and never reaches HBM (use `alias " + o.name +
                                      " -> OUT` and write OUT, or write an output)"
                                : "writes input '" + o.name + "': the write stays in its " + window +
                                      " and never "
                                      "reaches HBM, although '" +
                                      o.name + "' is aliased to '" + twin + "' (only '" + twin +
                                      "'s window is written back), and a block revisited on the next "
                                      "step still holds it: write '" +
                                      twin + "' instead");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  f.notes.push_back(note(w.loc, "the write happens at grid point " + format_tuple(p)));
  return f;
}

std::optional<Effect> unaliased_input_copy(const KernelModel &m, const CopyAddress &a) {
  const auto &o = m.operands[a.operand];
  if (a.source || a.gather || o.role != spec::Role::in || m.is_aliased_input(a.operand)) return std::nullopt;
  Effect e;
  e.kind = Effect::write;
  e.operand = a.operand;
  e.guards = a.guards;
  e.loc = a.loc;
  return e;
}

Finding input_copy_write_finding(const KernelModel &m, const Effect &copy, const Point &p) {
  const auto &o = m.operands[copy.operand];
  Finding f = make(Rule::input_write_lost, copy.loc,
                   "copies into input '" + o.name +
                       "', which no output aliases: the copy overwrites the caller's array, which XLA did "
                       "not donate to the kernel (alias it, `alias " +
                       o.name + " -> OUT`, and copy into OUT, or copy into a scratch)");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  f.notes.push_back(note(copy.loc, "the copy starts at grid point " + format_tuple(p)));
  return f;
}

namespace {

// A windowed output of a Mosaic GPU pallas_call (its pipeline copies it out).
bool gpu_pipelined_output(const KernelModel &m, std::size_t op) {
  const auto &o = m.operands[op];
  return !m.triton && !m.cta_axes.empty() && o.role == spec::Role::out && o.windowed && o.decl;
}

} // namespace

bool copied_out_per_visit(const KernelModel &m, std::size_t op) {
  return gpu_pipelined_output(m, op) && spec::moves_within_cta(*m.operands[op].decl, m.cta_axes);
}

bool copied_out_after_loop(const KernelModel &m, std::size_t op) {
  return gpu_pipelined_output(m, op) && !spec::moves_within_cta(*m.operands[op].decl, m.cta_axes) &&
         gpu_slots(m) > 1;
}

std::vector<std::size_t> overlapping_stores(const KernelModel &m, const Effect &w) {
  std::vector<std::size_t> out;
  for (std::size_t e = 0; e < m.effects.size(); ++e) {
    const Effect &x = m.effects[e];
    if (x.operand != w.operand || x.kind == Effect::read) continue;
    bool meet = !x.exact || !w.exact;
    if (!meet) {
      meet = true;
      for (std::size_t d = 0; d < x.box.size() && d < w.box.size(); ++d)
        meet = meet && x.box[d].first < w.box[d].second && w.box[d].first < x.box[d].second;
    }
    if (meet) out.push_back(e);
  }
  return out;
}

Finding output_last_slot_finding(const KernelModel &m, const Effect &w, const Point &p, const Point &last) {
  const auto &o = m.operands[w.operand];
  const std::string b = block_str(m, w.operand, p);
  const std::int64_t slots = gpu_slots(m);
  Finding f =
      make(Rule::output_write_lost, w.loc,
           "this store into block " + b + " of '" + o.name + "' at grid point " + format_tuple(p) +
               " is never written back: on Mosaic GPU each step of a CTA's pipeline writes a fresh " +
               "SMEM slot (" + std::to_string(slots) + " here, max_concurrent_steps), and an output " +
               "whose index map names only parallel axes is copied out once, after the CTA's loop, " +
               "from the slot of its last step, grid point " + format_tuple(last) +
               ", which this step does not use; nothing stores there after it. Store the final value " +
               "on the CTA's last step");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  f.witness.items.push_back({"last_step", last});
  add_block(f, m, w.operand, p);
  f.notes.push_back(note(o.loc, "'" + o.name + "' is copied out from the slot of grid point " +
                                    format_tuple(last) + " only"));
  return f;
}

std::vector<std::size_t> overwritten_store_inputs(const KernelModel &m, const Effect &w) {
  const auto &o = m.operands[w.operand];
  if (m.triton || !m.cta_axes.empty() || m.grid.empty() || o.role != spec::Role::out || !o.windowed ||
      o.revisit_any || w.kind != Effect::write || w.keep_mask || !w.exact || m.is_read(w.operand) ||
      w.sources.empty())
    return {};
  std::vector<std::size_t> inputs;
  for (std::size_t s : sources_through_temporaries(m, w)) {
    const Effect &r = m.effects[s];
    const auto &x = m.operands[r.operand];
    if (x.role != spec::Role::in || !x.windowed) return {};
    if (std::find(inputs.begin(), inputs.end(), r.operand) == inputs.end()) inputs.push_back(r.operand);
  }
  return inputs;
}

Finding overwritten_store_finding(const KernelModel &m, const Effect &w, std::size_t input, const Point &p,
                                  const Point &next) {
  const auto &o = m.operands[w.operand];
  const auto &x = m.operands[input];
  const std::string b = block_str(m, w.operand, p);
  Finding f = make(Rule::output_write_lost, w.loc,
                   "this store into block " + b + " of '" + o.name + "' at grid point " + format_tuple(p) +
                       " never reaches HBM: the same store at grid point " + format_tuple(next) +
                       ", still on block " + b + ", overwrites it with a value from another block of '" +
                       x.name + "' before the block is written back (once, at the end of its visit). " +
                       "Accumulate into the block (or a scratch) instead, or give '" + o.name +
                       "' an index map that moves with the grid axis that moves '" + x.name + "'");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  f.witness.items.push_back({"next", next});
  add_block(f, m, w.operand, p);
  f.notes.push_back(note(x.loc, "'" + x.name + "' is on block " + block_str(m, input, p) + " at grid point " +
                                    format_tuple(p) + " and on block " + block_str(m, input, next) + " at " +
                                    format_tuple(next)));
  return f;
}

Finding output_write_lost_finding(const KernelModel &m, const Effect &w, const Point &previous,
                                  const Point &p) {
  const auto &o = m.operands[w.operand];
  const std::string b = block_str(m, w.operand, p);
  Finding f =
      make(Rule::output_write_lost, w.loc,
           "this store into block " + b + " of '" + o.name + "' at grid point " + format_tuple(p) +
               " is never written back: on Mosaic GPU each step of a CTA's pipeline writes a fresh " +
               "SMEM slot, and the slot of an output whose index map names a sequential axis is " +
               "copied out only on the first step of each visit of a block and at the CTA's last " +
               "step, and '" + o.name + "' is on block " + b + " at the step before, grid point " +
               format_tuple(previous) + ". Store the block on the first step of each visit (and on the " +
               "CTA's last step, whose slot is copied out again), or make the axes its index map " +
               "names parallel (CTA axes) so that it is stored once, after the CTA's loop");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"previous", previous});
  f.witness.items.push_back({"grid_point", p});
  add_block(f, m, w.operand, p);
  f.notes.push_back(note(o.loc, "block " + b + " of '" + o.name + "' at grid point " +
                                    format_tuple(previous) + " and at " + format_tuple(p) +
                                    ", which is not its CTA's last step"));
  return f;
}

Finding out_of_bounds_finding(const KernelModel &m, std::size_t op, const Point &p) {
  const auto &o = m.operands[op];
  auto b = block_at(m, op, p);
  std::string detail;
  std::int64_t dim = -1;
  if (b)
    for (std::size_t d = 0; d < b->size(); ++d)
      if (!o.bounded[d] && ((*b)[d] < 0 || (*b)[d] >= o.num_blocks[d])) {
        dim = static_cast<std::int64_t>(d);
        detail = "block index " + std::to_string((*b)[d]) + " along dim " + std::to_string(d) +
                 " is outside [0, " + std::to_string(o.num_blocks[d]) + ")";
        if (o.element[d]) {
          // An Element dim's index is an element offset into the padded dim.
          const std::int64_t lo = o.window_start(d, (*b)[d]);
          detail = "element offset " + std::to_string((*b)[d]) + " along dim " + std::to_string(d) +
                   " (Element(" + std::to_string(o.block[d]) + ", (" + std::to_string(o.pad_lo[d]) + ", " +
                   std::to_string(o.pad_hi[d]) + "))) puts its window at elements " + std::to_string(lo) +
                   ":" + std::to_string(spec::saturating_add(lo, o.block[d])) + ", outside the padded dim " +
                   std::to_string(-o.pad_lo[d]) + ":" +
                   std::to_string(spec::saturating_add(o.shape[d], o.pad_hi[d]));
        }
        break;
      }
  if (dim < 0)
    if (auto fault = bounded_slice_fault(m, op, p)) {
      dim = static_cast<std::int64_t>(fault->first);
      detail = fault->second;
    }
  Finding f = make(Rule::index_out_of_bounds, o.loc,
                   "the index_map of '" + o.name + "' maps grid point " + format_tuple(p) +
                       (o.has_bounded_dims() ? " to window start " : " to block ") +
                       (b ? format_tuple(*b) : std::string("?")) + ": " + detail);
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  if (b) f.witness.items.push_back({"block", *b});
  if (dim >= 0) f.witness.items.push_back({"dim", dim});
  f.notes.push_back(note(o.loc, "at grid point " + format_tuple(p) + ", " + detail));
  return f;
}

Finding copy_address_finding(const KernelModel &m, const CopyAddress &a, const Point &p,
                             const std::string &detail, int dim) {
  const auto &o = m.operands[a.operand];
  const std::string what = a.gather
                               ? "a load from '" + o.name + "'"
                               : std::string(a.source ? "a copy from '" : "a copy into '") + o.name + "'";
  const std::string of = a.gather ? " of its block's part inside the array" : "";
  Finding f = make(Rule::index_out_of_bounds, a.loc,
                   what + (a.gather ? "" : " (memory_space=any)") + " at grid point " + format_tuple(p) +
                       ": " + detail + of);
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  if (dim >= 0) f.witness.items.push_back({"dim", static_cast<std::int64_t>(dim)});
  f.notes.push_back(note(a.loc, "at grid point " + format_tuple(p) + ", " + what + ": " + detail + of));
  return f;
}

Finding prefetch_read_finding(const KernelModel &m, const PrefetchRead &r, const Point &p,
                              const std::string &detail) {
  // Under Triton a prefetch table stands for an integer input the programs load.
  const std::string what =
      m.triton ? "; on a GPU the load reads whatever memory lies past the table's array"
               : "; on a TPU the SMEM load takes whatever lies next to the table, and Pallas' TPU "
                 "interpret mode (pltpu.InterpretParams) raises on it by default";
  Finding f = make(Rule::index_out_of_bounds, r.loc,
                   "a read of a prefetch array at grid point " + format_tuple(p) + ": " + detail + what);
  f.witness.items.push_back({"grid_point", p});
  f.notes.push_back(note(r.loc, "at grid point " + format_tuple(p) + ", " + detail));
  return f;
}

namespace {
// How a kernel says an axis runs in order, and what runs the points of a
// parallel axis apart: Mosaic GPU's `sequential` and CTAs, TPU's
// `arbitrary` and cores.
std::string in_order(const KernelModel &m) { return m.cta_axes.empty() ? "`arbitrary`" : "`sequential`"; }
std::string apart(const KernelModel &m) { return m.cta_axes.empty() ? "core" : "CTA"; }
} // namespace

Finding parallel_conflict_finding(const KernelModel &m, std::size_t op, const Point &p, const Point &q) {
  const auto &o = m.operands[op];
  std::string b = block_str(m, op, p);
  const std::int64_t axis = parallel_axis_apart(m, p, q);
  // The axis the index map drops (does not name at all), or folds (names,
  // but maps both points to one block).
  bool named = false;
  if (axis >= 0 && static_cast<std::size_t>(axis) < o.index_params.size())
    for (const auto &e : o.index)
      named = named || spec::mentions(e, o.index_params[static_cast<std::size_t>(axis)]);
  const std::string ax = std::to_string(axis);
  // Whether the block accumulates along the axis (reads itself, or takes a
  // scratch's carried value): then the axis is a reduction to mark
  // arbitrary. Otherwise each visit overwrites the block with its own result.
  bool reduces = false;
  for (const Effect &e : m.effects) {
    if (e.operand != op) continue;
    reduces = reduces || e.kind == Effect::accumulate || e.kind == Effect::read;
    for (std::size_t r : e.sources)
      reduces = reduces || m.operands[m.effects[r].operand].role == spec::Role::scratch;
  }
  const std::string advice =
      reduces ? "axis " + ax + " reduces into '" + o.name + "', so mark it " + in_order(m)
              : "each visit stores its own result into the block, so all but the last write-back are lost "
                "(whichever " +
                    apart(m) + " is last): name axis " + ax + " in the index_map of '" + o.name +
                    "' so that each grid point has its own block";
  Finding f = make(Rule::parallel_write_conflict, o.loc,
                   "grid points " + format_tuple(p) + " and " + format_tuple(q) +
                       " differ along parallel axis " + ax +
                       (named ? ", which the index_map of '" + o.name + "' folds,"
                              : ", which the index_map of '" + o.name + "' drops,") +
                       " but both write block " + b + " of '" + o.name +
                       "' (a visit writes its window back, stored or not): " + advice);
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"first_write", p});
  f.witness.items.push_back({"second_write", q});
  f.witness.items.push_back({"axis", axis});
  add_block(f, m, op, p);
  f.notes.push_back(note(o.loc, "block " + b + " written at grid point " + format_tuple(p)));
  f.notes.push_back(
      note(o.loc, "and at grid point " + format_tuple(q) + ", possibly on another " + apart(m)));
  return f;
}

namespace {

// The last point after `from` and before `to` in the order the grid runs
// (through `to` when `through`) where `holds`, within a few thousand steps
// of `from`; `from` where there is none.
Point last_in_run_order(const KernelModel &m, const Point &from, const Point &to, bool through,
                        const std::function<bool(const Point &)> &holds) {
  Point last = from;
  const std::int64_t a = spec::grid_position(m.grid, m.cta_axes, from),
                     b = spec::grid_position(m.grid, m.cta_axes, to);
  for (std::int64_t t = a + 1; (t < b || (through && t == b)) && t - a <= 4096; ++t)
    if (Point p = spec::grid_point(m.grid, m.cta_axes, t); holds(p)) last = std::move(p);
  return last;
}

} // namespace

Finding scratch_carry_finding(const KernelModel &m, std::size_t op, const Point &written, const Point &read) {
  const auto &o = m.operands[op];
  const std::int64_t axis = parallel_axis_apart(m, written, read);
  const std::string ax = std::to_string(axis);
  // A value computed from an input block that the read's point no longer
  // sees (a per-block cache refreshed on the wrong axis) is stale on one
  // core too: marking the axis arbitrary would not fix it.
  // (An accumulation, `acc += dot(x, y)`, carries a running value: no cache.)
  std::optional<std::size_t> stale;
  bool accumulates = false;
  for (const Effect &w : m.effects)
    if (w.operand == op && w.kind != Effect::read)
      for (std::size_t r : w.sources)
        accumulates = accumulates || w.kind == Effect::accumulate || m.effects[r].operand == op;
  for (const Effect &w : m.effects) {
    if (accumulates) break;
    if (w.operand != op || w.kind == Effect::read || !guard_at(m, w, written).value_or(false)) continue;
    for (std::size_t r : w.sources) {
      const std::size_t in = m.effects[r].operand;
      if (!stale && m.operands[in].role == spec::Role::in && m.operands[in].windowed &&
          block_at(m, in, written) != block_at(m, in, read))
        stale = in;
    }
  }
  const std::string advice =
      !stale ? "mark axis " + ax + " " + in_order(m) + " or initialize '" + o.name + "' at each of its steps"
             : "it was computed from block " + block_str(m, *stale, written) + " of '" +
                   m.operands[*stale].name + "' and the read sees block " + block_str(m, *stale, read) +
                   ": if '" + o.name +
                   "' caches a function of the current block, initialize it whenever the block of '" +
                   m.operands[*stale].name + "' changes (marking axis " + ax + " " + in_order(m) +
                   " would leave it stale); if it is a running value of each index of axis " + ax +
                   " (a scan along a later axis), initialize it on the first step of each (every later axis "
                   "at 0); if it carries the earlier block on purpose (a halo), mark axis " +
                   ax + " " + in_order(m);
  // The write the read takes: the last in run order before it.
  const Point last = last_in_run_order(m, written, read, false, [&](const Point &p) {
    for (const Effect &w : m.effects)
      if (w.operand == op && w.kind != Effect::read && guard_at(m, w, p).value_or(false)) return true;
    return false;
  });
  const std::string updated = last != written ? " and last updated at grid point " + format_tuple(last) : "";
  Finding f =
      make(Rule::parallel_write_conflict, o.loc,
           "scratch '" + o.name + "' carries a value written at grid point " + format_tuple(written) +
               updated + " into grid point " + format_tuple(read) + ", which differs along parallel axis " +
               ax + ": the " + apart(m) + "s that split axis " + ax +
               " each have their own scratch, so the carried value is lost; " + advice);
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"first_write", written});
  f.witness.items.push_back({"read", read});
  f.witness.items.push_back({"axis", axis});
  f.notes.push_back(note(o.loc, "'" + o.name + "' written at grid point " + format_tuple(written) + updated));
  f.notes.push_back(note(o.loc, "and read at grid point " + format_tuple(read) +
                                    " with no init in between, possibly on another " + apart(m)));
  return f;
}

std::vector<CarriedUse> carried_uses(const KernelModel &m, std::size_t op) {
  const ScratchUse u = scratch_use(m, op);
  std::vector<CarriedUse> out;
  for (std::size_t s = 0; s < m.effects.size(); ++s) {
    const Effect &w = m.effects[s];
    const auto &o = m.operands[w.operand];
    if (w.kind == Effect::read || o.role != spec::Role::out || !o.windowed) continue;
    for (std::size_t c : w.sources)
      if (std::find(u.consumes.begin(), u.consumes.end(), c) != u.consumes.end())
        out.push_back({s, c, w.operand});
  }
  return out;
}

Finding carried_finding(const KernelModel &m, std::size_t op, const CarriedUse &use, const Point &accumulated,
                        const Point &stored) {
  const auto &acc = m.operands[op];
  const auto &o = m.operands[use.output];
  const std::string from = block_str(m, use.output, accumulated), to = block_str(m, use.output, stored);
  const auto &via = m.operands[m.effects[use.store].operand];
  const std::string what = &via == &o ? "stores into block " + to + " of '" + o.name + "' at grid point " +
                                            format_tuple(stored) + " what"
                                      : "updates scratch '" + via.name + "' for block " + to + " of '" +
                                            o.name + "' at grid point " + format_tuple(stored) + " from what";
  // (An output used as a scratch is named as what it is.)
  const std::string kind = acc.role == spec::Role::scratch ? " scratch '" : " output '";
  // Where the stored block's visits are split (an earlier visit ended
  // before `stored`: the reduction runs outside the axes o follows), an init
  // on each visit's first step cannot help: the grid order is the fix.
  std::optional<Point> earlier;
  if (const auto sb = block_at(m, use.output, stored)) {
    constexpr std::int64_t kScan = std::int64_t{1} << 16;
    std::optional<Point> first;
    bool left = false, split = false;
    for (std::int64_t i = 0; i < std::min(m.num_points(), kScan); ++i) {
      const Point p = spec::grid_point(m.grid, m.cta_axes, i);
      if (p == stored) {
        if (left || split) earlier = first;
        break;
      }
      const auto b = block_at(m, use.output, p);
      if (!b) break;
      if (*b == *sb) {
        if (!first) first = p;
        split = split || left;
        left = false;
      } else if (first) {
        left = true;
      }
    }
  }
  const std::string advice =
      earlier
          ? "'" + o.name + "' visits block " + to + " at grid point " + format_tuple(*earlier) +
                " and again at " + format_tuple(stored) + ", after other blocks, and '" + acc.name +
                "' carries one partial result at a time: order the grid so that the axes the index_map of '" +
                o.name +
                "' names come first and the reduction runs along the last ones, or keep one bank of '" +
                acc.name + "' per block of '" + o.name + "'"
          : "re-initialize it on the first step of each block of '" + o.name + "'";
  Finding f = make(Rule::accumulator_carried, m.effects[use.store].loc,
                   what + kind + acc.name + "' accumulated since grid point " + format_tuple(accumulated) +
                       ", where '" + o.name + "' is on block " + from + ": no init of '" + acc.name +
                       "' fires between them; " + advice);
  f.witness.items.push_back({"operand", acc.name});
  f.witness.items.push_back({"accumulated", accumulated});
  f.witness.items.push_back({"stored", stored});
  add_block(f, m, use.output, stored);
  f.notes.push_back(note(accumulation_loc(m, op), "'" + acc.name + "' accumulated at grid point " +
                                                      format_tuple(accumulated) + ", for block " + from +
                                                      " of '" + o.name + "'"));
  f.notes.push_back(note(m.effects[use.store].loc, "and still holds it when stored into block " + to +
                                                       " at grid point " + format_tuple(stored)));
  return f;
}

Finding empty_visit_finding(const KernelModel &m, std::size_t op, const CarriedUse &use, const Point &written,
                            const Point &stored) {
  Finding f = carried_finding(m, op, use, written, stored);
  f.notes.push_back(note(m.effects[use.store].loc, "nothing initializes or accumulates '" +
                                                       m.operands[op].name + "' while '" +
                                                       m.operands[use.output].name + "' is on block " +
                                                       block_str(m, use.output, stored)));
  return f;
}

Finding superseded_reset_finding(const KernelModel &m, std::size_t op, const CarriedUse &use,
                                 const Point &own, const Point &other, const Point &stored) {
  Finding f = carried_finding(m, op, use, other, stored);
  f.notes.push_back(note(m.operands[op].loc, "'" + m.operands[op].name + "' was initialized for block " +
                                                 block_str(m, use.output, stored) + " at grid point " +
                                                 format_tuple(own) + ", and again for block " +
                                                 block_str(m, use.output, other) + " at grid point " +
                                                 format_tuple(other) + " before this store"));
  return f;
}

Finding crossed_chain_finding(const KernelModel &m, std::size_t op, const CarriedUse &use, const Point &own,
                              const Point &other, const Point &read, const std::vector<bool> &chain) {
  const auto &acc = m.operands[op];
  const Effect &rd = m.effects[use.consume];
  std::string axes, inner;
  std::size_t last_fixed = 0;
  for (std::size_t d = 0; d < chain.size(); ++d)
    if (!chain[d] && m.grid[d] > 1) last_fixed = d;
  for (std::size_t d = 0; d < chain.size(); ++d)
    if (chain[d]) {
      axes += (axes.empty() ? "" : ", ") + std::to_string(d);
      if (d > last_fixed && other[d] != read[d]) inner = std::to_string(d);
    }
  const bool one = axes.find(',') == std::string::npos;
  Finding f =
      make(Rule::accumulator_carried, rd.loc,
           "reads scratch '" + acc.name + "' at grid point " + format_tuple(read) + ", where it holds what " +
               "grid point " + format_tuple(other) + " stored: its init fires for each index of " +
               (one ? "axis " : "axes ") + axes + " (at " + format_tuple(own) +
               " for this one), one running value each, but they share one scratch" +
               (inner.empty() ? "" : " and axis " + inner + " runs inside the axis it is carried along") +
               "; keep one per index (index the scratch by program_id), or make " +
               (one ? "that axis the outer one" : "those axes the outer ones"));
  f.witness.items.push_back({"operand", acc.name});
  f.witness.items.push_back({"initialized", own});
  f.witness.items.push_back({"stored", other});
  f.witness.items.push_back({"read", read});
  f.notes.push_back(note(acc.loc, "'" + acc.name + "' was initialized at grid point " + format_tuple(own) +
                                      " and then stored at grid point " + format_tuple(other) +
                                      ", of another chain, before this read"));
  return f;
}

std::vector<CarriedUse> carried_and_indirect_uses(const KernelModel &m, std::size_t op) {
  std::vector<CarriedUse> out = carried_uses(m, op);
  const ScratchUse u = scratch_use(m, op);
  for (std::size_t s = 0; s < m.effects.size(); ++s) {
    const Effect &w = m.effects[s];
    if (w.kind == Effect::read || w.operand == op || m.operands[w.operand].role != spec::Role::scratch)
      continue;
    for (std::size_t c : w.sources)
      if (std::find(u.consumes.begin(), u.consumes.end(), c) != u.consumes.end())
        for (std::size_t x : reached_outputs(m, w.operand))
          out.push_back({s, c, x});
  }
  return out;
}

bool adds_into_output(const KernelModel &m, const CarriedUse &c) {
  const Effect &s = m.effects[c.store];
  return (s.kind == Effect::accumulate || m.updates_through_locals(s)) &&
         std::find(s.added.begin(), s.added.end(), c.consume) != s.added.end();
}

std::vector<CarriedUse> adding_uses(const KernelModel &m, std::size_t op) {
  std::vector<CarriedUse> out;
  for (const CarriedUse &c : carried_and_indirect_uses(m, op)) {
    const Effect &s = m.effects[c.store];
    const bool into_scratch = m.operands[s.operand].role == spec::Role::scratch;
    if (into_scratch ? s.kind == Effect::accumulate &&
                           std::find(s.added.begin(), s.added.end(), c.consume) != s.added.end()
                     : adds_into_output(m, c))
      out.push_back(c);
  }
  return out;
}

namespace {
// What the store of `use` adds into at `stored`: the output's block, or the
// scratch that carries it there.
std::string added_into(const KernelModel &m, const CarriedUse &use, const Point &stored) {
  const auto &o = m.operands[use.output];
  const auto &via = m.operands[m.effects[use.store].operand];
  const std::string b = block_str(m, use.output, stored);
  return &via == &o ? "block " + b + " of '" + o.name + "'"
                    : "scratch '" + via.name + "' (for block " + b + " of '" + o.name + "')";
}
} // namespace

Finding readded_round_finding(const KernelModel &m, std::size_t op, const CarriedUse &use,
                              const Point &accumulated, const Point &added, const Point &reaccumulated,
                              const Point &stored) {
  const auto &acc = m.operands[op];
  const std::string into = added_into(m, use, stored);
  Finding f = make(Rule::accumulator_carried, m.effects[use.store].loc,
                   "adds into " + into + " at grid point " + format_tuple(stored) + " what scratch '" +
                       acc.name + "' accumulated at grid point " + format_tuple(reaccumulated) +
                       " from the same input blocks as at grid point " + format_tuple(accumulated) +
                       ", whose result it already added there at grid point " + format_tuple(added) +
                       ": the reduction is repeated whole on each round and added every round, so it is "
                       "counted once per round; add it on one round only, or store it with `=`");
  f.witness.items.push_back({"operand", acc.name});
  f.witness.items.push_back({"accumulated", accumulated});
  f.witness.items.push_back({"added", added});
  f.witness.items.push_back({"reaccumulated", reaccumulated});
  f.witness.items.push_back({"stored", stored});
  add_block(f, m, use.output, stored);
  f.notes.push_back(note(accumulation_loc(m, op), "'" + acc.name + "' accumulated at grid point " +
                                                      format_tuple(accumulated) +
                                                      " and again from the same input blocks at grid point " +
                                                      format_tuple(reaccumulated)));
  f.notes.push_back(note(m.effects[use.store].loc, "added to " + into + " at grid point " +
                                                       format_tuple(added) + ", and again at grid point " +
                                                       format_tuple(stored)));
  return f;
}

Finding readded_finding(const KernelModel &m, std::size_t op, const CarriedUse &use, const Point &accumulated,
                        const Point &added, const Point &stored) {
  const auto &acc = m.operands[op];
  const std::string into = added_into(m, use, stored);
  Finding f =
      m.effects[use.store].folds_by_extremum
          ? make(Rule::accumulator_carried, m.effects[use.store].loc,
                 "folds into " + into + " at grid point " + format_tuple(stored) +
                     " (a running max or min) what scratch '" + acc.name +
                     "' holds there, and already folded it at grid point " + format_tuple(added) +
                     ", where it held only what it had accumulated up to grid point " +
                     format_tuple(accumulated) + ": no init of '" + acc.name +
                     "' fires between them, so a partial result of the reduction is folded in; fold '" +
                     acc.name + "' in once, after its last update for the block")
          : make(Rule::accumulator_carried, m.effects[use.store].loc,
                 "adds into " + into + " at grid point " + format_tuple(stored) + " what scratch '" +
                     acc.name + "' accumulated at grid point " + format_tuple(accumulated) +
                     ", which it already added there at grid point " + format_tuple(added) +
                     ": no init of '" + acc.name +
                     "' fires between them, so it is counted twice; re-initialize '" + acc.name +
                     "' after each store that adds it");
  f.witness.items.push_back({"operand", acc.name});
  f.witness.items.push_back({"accumulated", accumulated});
  f.witness.items.push_back({"added", added});
  f.witness.items.push_back({"stored", stored});
  add_block(f, m, use.output, stored);
  f.notes.push_back(note(accumulation_loc(m, op),
                         "'" + acc.name + "' accumulated at grid point " + format_tuple(accumulated)));
  f.notes.push_back(note(m.effects[use.store].loc, "added to " + into + " at grid point " +
                                                       format_tuple(added) + ", and again at grid point " +
                                                       format_tuple(stored)));
  return f;
}

std::vector<std::size_t> fed_outputs(const KernelModel &m, std::size_t op) {
  std::vector<std::size_t> out;
  for (const CarriedUse &c : carried_uses(m, op))
    if (std::find(out.begin(), out.end(), c.output) == out.end()) out.push_back(c.output);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::size_t> reached_outputs(const KernelModel &m, std::size_t op) {
  std::vector<bool> seen(m.operands.size(), false), out(m.operands.size(), false);
  std::vector<std::size_t> todo = {op};
  seen[op] = true;
  while (!todo.empty()) {
    const std::size_t s = todo.back();
    todo.pop_back();
    for (const auto &w : m.effects) {
      if (w.kind == Effect::read) continue;
      const auto &x = m.operands[w.operand];
      bool holds = false;
      for (std::size_t r : w.sources)
        holds = holds || m.effects[r].operand == s;
      if (!holds) continue;
      if (x.role == spec::Role::out && x.windowed) out[w.operand] = true;
      if (x.role == spec::Role::scratch && !seen[w.operand]) {
        seen[w.operand] = true;
        todo.push_back(w.operand);
      }
    }
  }
  std::vector<std::size_t> r;
  for (std::size_t x = 0; x < out.size(); ++x)
    if (out[x]) r.push_back(x);
  return r;
}

std::vector<std::size_t> scratch_transfers(const KernelModel &m, const ScratchUse &u, std::size_t op) {
  std::vector<std::size_t> out;
  for (std::size_t r : u.consumes)
    for (const auto &w : m.effects)
      if (w.operand == op && w.kind != Effect::read && w.order == m.effects[r].order + 1) {
        out.push_back(r);
        break;
      }
  return out;
}

std::vector<LostUse> lost_uses(const KernelModel &m, std::size_t op) {
  const ScratchUse u = scratch_use(m, op);
  auto is_consume = [&](std::size_t r) {
    return std::find(u.consumes.begin(), u.consumes.end(), r) != u.consumes.end();
  };
  std::vector<LostUse> out;
  // What delivers to each output: its stores that hold a read of the scratch,
  // and the stores into another scratch that reaches it (`t[...] = acc[...] *
  // 2; o[...] = t[...]`), as carried_and_indirect_uses finds them.
  const std::vector<CarriedUse> uses = carried_and_indirect_uses(m, op);
  std::vector<std::size_t> outputs = fed_outputs(m, op);
  std::set<std::size_t> through_scratch;
  for (const CarriedUse &c : uses)
    if (std::find(outputs.begin(), outputs.end(), c.output) == outputs.end())
      through_scratch.insert(c.output);
  outputs.insert(outputs.end(), through_scratch.begin(), through_scratch.end());
  // A read that moves part of the scratch into another part hands what it
  // reads on to what that part delivers: a clear of it, for every output.
  const std::vector<std::size_t> transfers = scratch_transfers(m, u, op);
  for (std::size_t x : outputs) {
    LostUse l;
    l.output = x;
    l.clears = u.inits;
    l.clears.insert(l.clears.end(), transfers.begin(), transfers.end());
    std::vector<std::size_t> stores;
    for (const CarriedUse &c : uses) {
      if (c.output != x) continue;
      if (std::find(stores.begin(), stores.end(), c.store) == stores.end()) stores.push_back(c.store);
      // (A read into a local outside the `when` that stores it delivers
      // only where the store fires: LostUse::also_needs.)
      if (std::find(l.clears.begin(), l.clears.end(), c.consume) == l.clears.end()) {
        l.clears.push_back(c.consume);
        if (m.effects[c.store].guards.size() > m.effects[c.consume].guards.size())
          l.also_needs[c.consume] = c.store;
      }
    }
    // A scratch that only picks what the stores put in the block (a running
    // argmax's max, in the condition of `o = where(x > m[...], i, o)`): its
    // last update is for later comparisons, none of which the block needs.
    if (!stores.empty() && std::none_of(stores.begin(), stores.end(), [&](std::size_t s) {
          const auto &d = m.effects[s].data_sources;
          return std::any_of(d.begin(), d.end(), is_consume);
        }))
      continue;
    // An accumulation whose elements only another output's reads can meet
    // is that output's (rows 0:8 for o1, rows 8:16 for o2, one scratch): x
    // does not judge it. One that no read meets is lost for every output.
    // (Static boxes; one not exact may meet.)
    std::vector<std::size_t> reads_x = transfers, reads_other;
    for (const CarriedUse &c : uses)
      (c.output == x ? reads_x : reads_other).push_back(c.consume);
    for (std::size_t ai : u.accumulates) {
      const Effect &a = m.effects[ai];
      auto meets = [&](const std::vector<std::size_t> &reads) {
        return std::any_of(reads.begin(), reads.end(), [&](std::size_t r) {
          const Effect &re = m.effects[r];
          return !a.exact || !re.exact || overlaps(a.box, re.box);
        });
      };
      l.feeds.push_back(meets(reads_x) || !meets(reads_other));
    }
    for (std::size_t ai : u.accumulates) {
      const Effect &a = m.effects[ai];
      std::vector<std::size_t> d;
      for (std::size_t s : stores)
        for (std::size_t r : m.effects[s].sources)
          if (is_consume(r) && std::find(a.sources.begin(), a.sources.end(), r) != a.sources.end()) {
            d.push_back(s);
            break;
          }
      l.delivering.push_back(std::move(d));
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<OverwriteUse> overwrite_uses(const KernelModel &m, std::size_t op) {
  std::vector<OverwriteUse> out;
  for (std::size_t x : fed_outputs(m, op)) {
    OverwriteUse u;
    u.output = x;
    for (std::size_t s = 0; s < m.effects.size(); ++s) {
      const Effect &w = m.effects[s];
      if (w.operand != x || w.kind != Effect::write || m.updates_through_locals(w)) continue;
      u.overwrites.push_back(s);
      if (std::any_of(w.sources.begin(), w.sources.end(),
                      [&](std::size_t r) { return m.effects[r].operand == op; }))
        u.delivering.push_back(s);
    }
    out.push_back(std::move(u));
  }
  return out;
}

bool value_repeats(const KernelModel &m, const Effect &a) {
  if (a.grid_value) return false;
  for (std::size_t r : sources_through_temporaries(m, a)) {
    const std::size_t op = m.effects[r].operand;
    const auto &o = m.operands[op];
    if (op != a.operand && !(o.role == spec::Role::in && o.windowed)) return false;
  }
  return true;
}

bool round_may_repeat(const KernelModel &m, const Effect &a) {
  const std::vector<std::size_t> ins = accumulated_inputs(m, a);
  if (ins.empty() || !value_repeats(m, a)) return false;
  for (std::size_t g = 0; g < m.grid.size(); ++g) {
    bool pinned = false;
    for (std::size_t in : ins) {
      const auto &o = m.operands[in];
      if (g >= o.index_params.size()) continue;
      for (const auto &e : o.index)
        pinned = pinned || (e.op == spec::Op::Name && e.name == o.index_params[g]);
    }
    if (!pinned) return true;
  }
  return false;
}

std::vector<std::size_t> accumulated_inputs(const KernelModel &m, const Effect &a) {
  std::vector<std::size_t> out;
  for (std::size_t r : a.sources) {
    const std::size_t op = m.effects[r].operand;
    if (m.operands[op].role == spec::Role::in && m.operands[op].windowed) out.push_back(op);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool seeds_output_sum(const KernelModel &m, const Effect &w) {
  if (w.kind != Effect::write || m.operands[w.operand].role != spec::Role::out || m.reads_own_target(w) ||
      m.updates_through_locals(w) || accumulated_inputs(m, w).empty())
    return false;
  return std::any_of(m.effects.begin(), m.effects.end(), [&](const Effect &e) {
    return e.operand == w.operand &&
           (e.kind == Effect::accumulate ||
            (e.kind == Effect::write && (m.reads_own_target(e) || m.updates_through_locals(e))));
  });
}

namespace {

// Whether every guard of `inner` is one of `outer`'s (as written): inner
// fires wherever outer does.
bool guards_among(const Effect &inner, const Effect &outer) {
  std::set<std::string> have;
  for (const auto &g : outer.guards)
    have.insert(spec::print(g));
  return std::all_of(inner.guards.begin(), inner.guards.end(),
                     [&](const spec::Expr &g) { return have.count(spec::print(g)) > 0; });
}

void resolve_temporaries(const KernelModel &m, const Effect &w, std::size_t r, int depth,
                         std::vector<std::size_t> &out) {
  const Effect &rd = m.effects[r];
  const Effect *last = nullptr;
  if (depth > 0 && m.operands[rd.operand].role == spec::Role::scratch && rd.kind == Effect::read && rd.exact)
    for (const auto &e : m.effects)
      if (e.operand == rd.operand && e.kind != Effect::read && e.order < rd.order &&
          (!last || e.order > last->order))
        last = &e;
  const bool covers = last && last->kind == Effect::write && last->exact && !m.reads_own_target(*last) &&
                      !m.updates_through_locals(*last) && !last->keep_mask && guards_among(*last, w) &&
                      box_contains(last->box, rd.box);
  if (!covers) {
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
    return;
  }
  for (std::size_t s : last->sources)
    resolve_temporaries(m, w, s, depth - 1, out);
}

} // namespace

std::vector<std::size_t> sources_through_temporaries(const KernelModel &m, const Effect &w) {
  std::vector<std::size_t> out;
  for (std::size_t r : w.sources)
    resolve_temporaries(m, w, r, 4, out);
  return out;
}

bool input_masked_in_place(const KernelModel &m, const Effect &w) {
  if (m.triton || !m.target || !spec::is_gpu_target(*m.target) || w.kind == Effect::read) return false;
  return std::any_of(m.effects.begin(), m.effects.end(), [&](const Effect &r) {
    return r.operand == w.operand && r.kind == Effect::read && r.order > w.order && overlaps(r.box, w.box) &&
           guards_among(r, w);
  });
}

Finding overwritten_after_reset_finding(const KernelModel &m, const Effect &w, std::size_t output,
                                        const Point &partial, const Point &reset, const Effect &store,
                                        const Point &overwritten) {
  const auto &acc = m.operands[w.operand];
  const auto &o = m.operands[output];
  const std::string b = block_str(m, output, reset);
  Finding f =
      make(Rule::accumulator_reset, w.loc,
           "this write re-initializes scratch '" + acc.name + "' at grid point " + format_tuple(reset) +
               ", within the visit of block " + b + " of '" + o.name + "': the store at grid point " +
               format_tuple(overwritten) + " then overwrites that block with what accumulated after " +
               "the reset, so what '" + acc.name + "' accumulated since " + format_tuple(partial) +
               " is lost: initialize it only on the first step of the block's visit, or store with `where` "
               "keeping the elements the block already holds");
  add_overwritten_witness(f, m, w.operand, output, partial, reset, overwritten);
  f.notes.push_back(note(accumulation_loc(m, w.operand), "'" + acc.name + "' accumulated for block " + b +
                                                             " of '" + o.name + "' at grid point " +
                                                             format_tuple(partial)));
  f.notes.push_back(note(w.loc, "reset at grid point " + format_tuple(reset)));
  f.notes.push_back(note(store.loc, "block " + b + " of '" + o.name + "' overwritten at grid point " +
                                        format_tuple(overwritten) + ", its last store in this visit"));
  return f;
}

Finding lost_finding(const KernelModel &m, std::size_t op, std::size_t out, const Effect &a,
                     const Point &earlier, const Point &lost_at, const Point &next) {
  const auto &acc = m.operands[op];
  const auto &o = m.operands[out];
  // The store to fix: the first in program order of o from the scratch (or
  // of the scratch that takes its value to o).
  const Effect *store = nullptr;
  for (const CarriedUse &c : carried_and_indirect_uses(m, op))
    if (c.output == out && (!store || m.effects[c.store].order < store->order)) store = &m.effects[c.store];
  bool reset = false;
  if (next != lost_at)
    for (std::size_t i : scratch_use(m, op).inits)
      reset = reset || guard_at(m, m.effects[i], next).value_or(false);
  // (The witness may be any lost update; the message names the last, up to
  // the reset, or through the CTA's last step: one of the same blocks.)
  const auto blk = block_at(m, out, lost_at), own = block_at(m, op, lost_at);
  const Point lost = last_in_run_order(m, lost_at, next, !reset, [&](const Point &p) {
    return guard_at(m, a, p).value_or(false) && block_at(m, out, p) == blk && block_at(m, op, p) == own;
  });
  const std::string b = block_str(m, out, lost);
  const std::string then =
      reset ? "re-initialized at grid point " + format_tuple(next) + " for block " + block_str(m, out, next) +
                  " before any statement reads it"
            : "not read again before " +
                  (m.cta_axes.empty() ? std::string("the grid ends") : std::string("its CTA ends")) +
                  " (grid point " + format_tuple(next) + ")";
  Finding f = make(Rule::accumulation_lost, store ? store->loc : a.loc,
                   "the last updates of scratch '" + acc.name + "' for block " + b + " of '" + o.name +
                       "' never reach it: '" + acc.name + "' is updated at grid point " + format_tuple(lost) +
                       " and " + then + "; store '" + o.name + "' from '" + acc.name +
                       "' after the last update of each block (on the reduction's last step)");
  f.witness.items.push_back({"operand", acc.name});
  f.witness.items.push_back({"output", o.name});
  f.witness.items.push_back({"accumulated", earlier});
  f.witness.items.push_back({"lost", lost});
  f.witness.items.push_back({reset ? "reset" : "last_step", next});
  add_block(f, m, out, lost);
  f.notes.push_back(note(accumulation_loc(m, op), "'" + acc.name + "' accumulated for block " + b + " of '" +
                                                      o.name + "' at grid point " + format_tuple(earlier)));
  f.notes.push_back(note(a.loc, "and updated here at grid point " + format_tuple(lost) + ", unread since"));
  return f;
}

CarryUse carry_use(const KernelModel &m, std::size_t op, bool fresh_cuts) {
  CarryUse c;
  for (std::size_t e = 0; e < m.effects.size(); ++e) {
    if (m.effects[e].operand != op) continue;
    if (m.effects[e].kind != Effect::read) c.stores.push_back(e);
    if (m.effects[e].kind != Effect::write) c.reads.push_back(e);
  }
  // (The fresh inits only where `fresh_cuts`: a select that starts the sum
  // on one step reads the scratch on the others, where a carry it then drops
  // is one root cause with the select on the wrong step, uninitialized-
  // accumulator's; on the right step, `where(j == 0, -inf, best[...])` at
  // each row's first step, it cuts the carry as a `when j == 0` init does.)
  const ScratchUse u = scratch_use(m, op);
  for (std::size_t i : u.inits)
    if (fresh_cuts || !m.effects[i].fresh) c.inits.push_back(i);
  // A store that fills one region of the scratch from another (`w[8:16] =
  // w[0:8] + 1`, a staging buffer) reads none of what it writes: for the
  // carry, an init of its region.
  // Where a box moves with the grid point, it is that at each point (Fill).
  for (std::size_t e : c.stores) {
    const Effect &w = m.effects[e];
    if (w.kind != Effect::write || w.fresh || std::find(c.inits.begin(), c.inits.end(), e) != c.inits.end())
      continue;
    // (its statement's reads of the scratch, and those through its locals)
    CarryUse::Fill fill{e, {}};
    bool apart = true, exact = w.exact;
    for (std::size_t r = 0; r < m.effects.size(); ++r) {
      const Effect &rd = m.effects[r];
      if (rd.operand != op || rd.kind != Effect::read ||
          (rd.order + 1 != w.order && std::find(w.sources.begin(), w.sources.end(), r) == w.sources.end()))
        continue;
      fill.reads.push_back(r);
      exact = exact && rd.exact;
      apart = apart && rd.exact && !overlaps(rd.box, w.box);
    }
    if (fill.reads.empty()) continue;
    if (w.exact && apart)
      c.inits.push_back(e);
    else if (!exact)
      c.fills.push_back(std::move(fill));
  }
  return c;
}

std::int64_t parallel_axis_apart(const KernelModel &m, const Point &p, const Point &q) {
  for (std::size_t a = 0; a < p.size() && a < q.size() && a < m.semantics.size(); ++a)
    if (p[a] != q[a] && m.semantics[a] == spec::DimSemantics::parallel) return static_cast<std::int64_t>(a);
  return -1;
}

bool scratch_shared_across_parallel_axes(const KernelModel &m) {
  if (!m.cta_axes.empty()) return false;
  for (auto s : m.semantics)
    if (s == spec::DimSemantics::parallel) return true;
  return false;
}

bool needs_element_coverage(const KernelModel &m, std::size_t op) {
  const auto &o = m.operands[op];
  if (o.has_element_dims() || o.has_bounded_dims() || (m.triton && o.role == spec::Role::out)) return true;
  return std::any_of(m.effects.begin(), m.effects.end(),
                     [&](const Effect &e) { return e.operand == op && e.kind != Effect::read && !e.exact; });
}

namespace {
// index-out-of-bounds of a Triton access (`what` element ... of op) past
// the array, with the element and the grid point.
Finding triton_outside_finding(const KernelModel &m, std::size_t op, const Effect &access, const Point &p,
                               const Point &element, const std::string &what, const std::string &why) {
  const auto &o = m.operands[op];
  Finding f = make(Rule::index_out_of_bounds, access.loc,
                   what + " element " + format_tuple(element) + " of '" + o.name + "', outside its shape " +
                       format_tuple(o.shape) + ", at grid point " + format_tuple(p) + ": " + why);
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"element", element});
  f.witness.items.push_back({"grid_point", p});
  return f;
}
} // namespace

Finding triton_past_end_finding(const KernelModel &m, std::size_t op, const Effect &store, const Point &p,
                                const Point &element) {
  return triton_outside_finding(
      m, op, store, p, element, "this store writes",
      "a Triton program's stores reach the array itself; mask the store to the array's extent");
}

std::optional<Point> first_outside(const OperandModel &o, const Point &blk, const Box &box) {
  // The box's start where that is outside; else the start moved to the
  // array's end in the last dim whose box passes it (the row-major first).
  Point x(box.size());
  bool outside = false;
  for (std::size_t d = 0; d < box.size(); ++d) {
    if (box[d].second <= box[d].first) return std::nullopt;
    x[d] = spec::saturating_add(o.window_start(d, blk[d]), box[d].first);
    outside = outside || x[d] < 0 || x[d] >= o.shape[d];
  }
  if (outside) return x;
  for (std::size_t d = box.size(); d-- > 0;)
    if (spec::saturating_add(o.window_start(d, blk[d]), box[d].second) > o.shape[d]) {
      x[d] = o.shape[d];
      return x;
    }
  return std::nullopt;
}

bool may_pass_end(const OperandModel &o, const Effect &e) {
  if (e.gather) return false; // (CopyAddress decides it, for every allowed contents)
  for (std::size_t d = 0; d < e.ref_box.size() && d < o.shape.size(); ++d)
    if (o.element[d] || o.block[d] <= 0 || o.shape[d] % o.block[d] != 0 || e.ref_box[d].first < 0 ||
        e.ref_box[d].second > o.block[d])
      return true;
  return false;
}

Finding triton_load_past_end_finding(const KernelModel &m, std::size_t op, const Effect &read, const Point &p,
                                     const Point &element) {
  return triton_outside_finding(
      m, op, read, p, element, "this load reads",
      "a Triton program's block is a view of the array, not a padded copy, so a load "
      "with no mask reads memory past the array; load with a mask that keeps it to the "
      "array's extent (`where(mask, " +
          m.operands[op].name + "[...], other)`, Triton's `load(ref, mask=, other=)`)");
}

std::optional<Point> masked_load_past_end(const KernelModel &m, std::size_t op, const Effect &read,
                                          const Point &p, const Point &blk, const Box &box) {
  if (!read.load_mask) return std::nullopt;
  const auto &o = m.operands[op];
  if (!first_outside(o, blk, box)) return std::nullopt; // (no lane of the box is outside)
  const auto mask = mask_at(m, mask_flow(m), *read.load_mask, read.load_locals, p);
  if (!mask) return std::nullopt; // (it reads data: which lanes load is not decided here)
  // The ref's value: the box along the dims it keeps.
  std::vector<std::int64_t> value;
  for (std::size_t d : read.load_dims)
    value.push_back(box[d].second - box[d].first);
  // A lane is inside where its box along the dims the value drops is, and
  // each of its coordinates along the kept ones: only a lane outside is placed.
  std::vector<std::int64_t> start(box.size());
  std::vector<bool> kept(box.size(), false);
  for (std::size_t d = 0; d < box.size(); ++d)
    start[d] = spec::saturating_add(o.window_start(d, blk[d]), box[d].first);
  for (std::size_t d : read.load_dims)
    kept[d] = true;
  bool rest_inside = true;
  for (std::size_t d = 0; d < box.size(); ++d)
    rest_inside = rest_inside &&
                  (kept[d] || (start[d] >= 0 &&
                               spec::saturating_add(start[d], box[d].second - box[d].first) <= o.shape[d]));
  const auto coordinate_inside = [&](std::size_t k, std::int64_t c) {
    const std::int64_t x = start[read.load_dims[k]] + c;
    return x >= 0 && x < o.shape[read.load_dims[k]];
  };
  // First over the mask's own elements, where it broadcasts to the value (a
  // head mask of (1, D) stands for every row): whether any it sets reaches
  // a lane outside; only then lane by lane, for the first such lane.
  const std::size_t r = mask->shape.size(), n = value.size();
  bool broadcasts = r <= n;
  for (std::size_t j = 0; broadcasts && j < r; ++j)
    broadcasts = mask->shape[j] == 1 || mask->shape[j] == value[n - r + j];
  if (broadcasts && rest_inside) {
    // Per value dim: whether some coordinate is outside (for a dim the mask
    // does not vary along).
    std::vector<bool> any_outside(n, false);
    for (std::size_t k = 0; k < n; ++k)
      any_outside[k] = !coordinate_inside(k, 0) || !coordinate_inside(k, value[k] - 1);
    bool reaches = false;
    std::vector<std::int64_t> mc(r, 0);
    for (std::size_t f = 0; f < mask->v.size() && !reaches; ++f) {
      if (mask->v[f] != 0)
        for (std::size_t k = 0; k < n && !reaches; ++k) {
          const bool fixed = k + r >= n && mask->shape[k + r - n] != 1;
          reaches = fixed ? !coordinate_inside(k, mc[k + r - n]) : any_outside[k];
        }
      for (std::size_t j = r; j-- > 0;)
        if (++mc[j] < mask->shape[j])
          break;
        else
          mc[j] = 0;
    }
    if (!reaches) return std::nullopt;
  }
  spec::LaneMask lm{mask->shape, {}};
  for (auto x : mask->v)
    lm.on.push_back(x != 0);
  const auto lanes = spec::selected_lanes({lm}, value);
  if (!lanes) return std::nullopt; // (not the ref's value's shape: not placed)
  std::vector<std::int64_t> at(value.size(), 0);
  for (std::size_t f = 0; f < lanes->size(); ++f) {
    bool inside = rest_inside;
    for (std::size_t k = 0; k < value.size() && inside; ++k)
      inside = coordinate_inside(k, at[k]);
    if ((*lanes)[f] && !inside) {
      Box lane = box;
      for (std::size_t k = 0; k < value.size(); ++k)
        lane[read.load_dims[k]] = {box[read.load_dims[k]].first + at[k],
                                   box[read.load_dims[k]].first + at[k] + 1};
      if (auto x = first_outside(o, blk, lane)) return x; // (row-major: the first)
    }
    for (std::size_t k = value.size(); k-- > 0;)
      if (++at[k] < value[k])
        break;
      else
        at[k] = 0;
  }
  return std::nullopt;
}

std::optional<Finding> triton_load_past_end_at(const KernelModel &m, std::size_t op, const Effect &read,
                                               const Point &p, const Point &blk, const Box &box) {
  if (read.masked_load) {
    if (auto x = masked_load_past_end(m, op, read, p, blk, box))
      return triton_masked_load_past_end_finding(m, op, read, p, *x);
  } else if (auto x = first_outside(m.operands[op], blk, box)) {
    return triton_load_past_end_finding(m, op, read, p, *x);
  }
  return std::nullopt;
}

bool load_mask_evaluates(const KernelModel &m, const Effect &read, const Point &p) {
  return read.load_mask && mask_at(m, mask_flow(m), *read.load_mask, read.load_locals, p).has_value();
}

Finding triton_masked_load_past_end_finding(const KernelModel &m, std::size_t op, const Effect &read,
                                            const Point &p, const Point &element) {
  return triton_outside_finding(
      m, op, read, p, element, "this masked load reads",
      "its mask selects that lane, and a Triton program's block is a view of the array, not a padded "
      "copy, so the load reads memory past the array; narrow the mask to the array's extent");
}

Finding triton_race_finding(const KernelModel &m, std::size_t op, const Point &element, const Point &store,
                            const Point &other, bool other_reads, const OperandModel *through) {
  const auto &o = m.operands[op];
  const std::string e = "element " + format_tuple(element) + " of '" + o.name + "'" +
                        (through ? " (through '" + through->name + "', aliased to it)" : std::string());
  Finding f = make(Rule::parallel_write_conflict, o.loc,
                   other_reads ? "grid point " + format_tuple(other) + " reads " + e + ", which grid point " +
                                     format_tuple(store) +
                                     " stores: Triton runs them as concurrent programs, so the read sees the "
                                     "store or not, as they happen to run"
                               : "grid points " + format_tuple(store) + " and " + format_tuple(other) +
                                     " both store " + e +
                                     ": Triton runs them as concurrent programs, so which store lands there "
                                     "is a race");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"element", element});
  f.witness.items.push_back({"first_write", store});
  f.witness.items.push_back({other_reads ? "read" : "second_write", other});
  return f;
}

Finding triton_garbage_finding(const KernelModel &m, const Effect &read, const Point &p,
                               const Point &element) {
  const auto &o = m.operands[read.operand];
  Finding f =
      make(Rule::uninitialized_accumulator, read.loc,
           "grid point " + format_tuple(p) + " reads element " + format_tuple(element) + " of '" + o.name +
               "' before its program stores it: a Triton program reads the array itself, which holds "
               "garbage there (store it first, or alias an input to the output)");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"grid_point", p});
  f.witness.items.push_back({"element", element});
  return f;
}

std::optional<std::string> element_pass_too_large(const KernelModel &m, std::size_t op) {
  const auto &o = m.operands[op];
  const std::string kinds = o.has_element_dims() && o.has_bounded_dims() ? "has Element and BoundedSlice dims"
                            : o.has_element_dims()                       ? "has Element dims"
                            : o.has_bounded_dims()                       ? "has BoundedSlice dims"
                            : m.triton ? "is stored element by element by concurrent Triton programs"
                                       : "is stored in parts that move with the grid point";
  std::int64_t total = 1;
  for (auto n : o.shape)
    total = spec::saturating_mul(total, n);
  const std::int64_t points = m.num_points();
  // Conflicts compare pairs of points: fewer of them where some axis is
  // parallel (Triton's compare each element's stores, one pass).
  bool parallel = false;
  for (auto sem : m.semantics)
    parallel = parallel || (sem == spec::DimSemantics::parallel && !m.triton);
  const std::int64_t kMaxPoints = parallel ? 4096 : 65536, kMaxElements = std::int64_t{1} << 22;
  std::int64_t block = 1;
  for (auto b : o.block)
    block = spec::saturating_mul(block, b);
  // Per point, a Triton program's work is what its effects touch (a whole-array
  // block is one visit, written back once): their boxes at the first point,
  // which a window's static size keeps at every point.
  std::int64_t per_point = block;
  if (m.triton && points > 0) {
    const Point p0 = spec::grid_point(m.grid, m.cta_axes, 0);
    std::int64_t touched = 0;
    for (const auto &e : m.effects) {
      if (e.operand != op || e.box.size() != o.shape.size()) continue;
      const auto box = box_at(m, e, p0);
      if (!box) {
        touched = block;
        break;
      }
      std::int64_t n = 1;
      for (const auto &[lo, hi] : *box)
        n = spec::saturating_mul(n, std::max<std::int64_t>(hi - lo, 0));
      touched = spec::saturating_add(touched, n);
    }
    per_point = std::min(block, touched);
  }
  const std::int64_t work = spec::saturating_add(spec::saturating_mul(points, per_point), total);
  constexpr std::int64_t kMaxWork = std::int64_t{1} << 27;
  if (points > kMaxPoints || total > kMaxElements || work > kMaxWork)
    return "output '" + o.name + "' " + kinds +
           ": its coverage and parallel writes are decided by evaluating every "
           "grid point and element, and it has " +
           std::to_string(points) + " grid points (at most " + std::to_string(kMaxPoints) + ") and " +
           std::to_string(total) + " elements (at most " + std::to_string(kMaxElements) + "), " +
           (m.triton ? "its programs touching " : "its blocks ") + std::to_string(work) +
           " elements over the grid (at most " + std::to_string(kMaxWork) + ")";
  return std::nullopt;
}

bool triton_boxes_static(const KernelModel &m, std::size_t op) {
  const auto &o = m.operands[op];
  if (o.has_element_dims() || o.has_bounded_dims()) return false;
  return std::all_of(m.effects.begin(), m.effects.end(),
                     [&](const Effect &e) { return e.operand != op || e.keep || (e.exact && !e.keep_mask); });
}

bool element_pass_by_solver(const KernelModel &m, std::size_t op) {
  return m.triton && element_pass_too_large(m, op) && triton_boxes_static(m, op);
}

void element_output_findings(const KernelModel &m, std::size_t op, std::vector<Finding> &out,
                             std::vector<std::string> &unknown) {
  if (auto why = element_pass_too_large(m, op)) {
    unknown.push_back(*why);
    return;
  }
  const auto &o = m.operands[op];
  const std::size_t rank = o.shape.size();
  std::int64_t total = 1;
  for (auto n : o.shape)
    total = spec::saturating_mul(total, n);
  const std::int64_t points = m.num_points();
  auto flat_of = [&](const Point &e) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < rank; ++d)
      flat = flat * o.shape[d] + e[d];
    return static_cast<std::size_t>(flat);
  };
  // Calls f(element) for each element of a non-empty box.
  auto each = [&](const Box &box, auto &&f) {
    for (std::size_t d = 0; d < rank; ++d)
      if (box[d].second <= box[d].first) return;
    Point e(rank);
    for (std::size_t d = 0; d < rank; ++d)
      e[d] = box[d].first;
    for (;;) {
      f(e);
      std::size_t d = rank;
      while (d > 0 && ++e[d - 1] == box[d - 1].second) {
        e[d - 1] = box[d - 1].first;
        --d;
      }
      if (d == 0) break;
    }
  };
  // Per array element, in run order: what the last write-back left there.
  enum : std::uint8_t { never, stored, undefined };
  std::vector<std::uint8_t> state(static_cast<std::size_t>(total), never);
  std::vector<std::int64_t> undefined_at(static_cast<std::size_t>(total),
                                         -1); // the point (linear) that left it
  const Effect *inexact = nullptr;            // a store whose box is not static: it covers nothing decided
  std::vector<Point> pts;
  std::vector<Box> windows; // the in-bounds part of each storing point's window
  // A visit: consecutive grid points with one window (spec::window_at: a
  // BoundedSlice window with the same start and another size is another
  // one). Pallas writes the window's `size` elements back when it ends,
  // each from what the visit's stores put in the slot, undefined elsewhere
  // (revisit=any copies a window seen before back in first).
  std::optional<Point> key;
  Box win;
  std::vector<Box> visit_stores;
  std::int64_t visit_last = -1;
  std::set<Point> seen;
  bool copied_in = false;
  // Triton: the program (linear grid point) that stored each element first,
  // and the first element two programs store.
  std::vector<std::int64_t> owner(m.triton ? static_cast<std::size_t>(total) : 0, -1);
  std::optional<std::pair<std::int64_t, Point>> race; // (the other program, element)
  Point race_at;
  struct Read {
    std::int64_t k;                        // the program (linear grid point)
    Box box;                               // in array elements
    const OperandModel *through = nullptr; // the aliased input read, where not the output
  };
  std::vector<Read> reads; // Triton: every program's reads of the output (or its aliased input)
  // Triton: the last program that stored each element (programs run one at
  // a time here, each through its effects in order), and the first read of
  // an element its own program had not stored yet: what the array held.
  std::vector<std::int64_t> mine(m.triton ? static_cast<std::size_t>(total) : 0, -1);
  struct Garbage {
    Point point, element;
    const Effect *read;
  };
  std::optional<Garbage> garbage;
  struct Past {
    Point point, element;
    const Effect *store;
  };
  std::map<const Effect *, Past> past; // Triton: per store, the first element it writes past the array
  const bool aliased = m.is_aliased_output(op);
  const races::PaddingFlow flow = mask_flow(m);
  Box whole(rank);
  for (std::size_t d = 0; d < rank; ++d)
    whole[d] = {0, o.shape[d]};
  // A box of operand x's block `blk` in array elements, within `clip`.
  auto placed = [&](const OperandModel &x, const std::vector<std::int64_t> &blk, const Box &box,
                    const Box &clip) {
    Box at(rank);
    for (std::size_t d = 0; d < rank; ++d) {
      const std::int64_t lo = x.window_start(d, blk[d]);
      at[d] = {
          std::clamp<std::int64_t>(spec::saturating_add(lo, box[d].first), clip[d].first, clip[d].second),
          std::clamp<std::int64_t>(spec::saturating_add(lo, box[d].second), clip[d].first, clip[d].second)};
    }
    return at;
  };
  auto read_before_store = [&](const Box &at, const Effect &e, std::int64_t k, const Point &p) {
    if (garbage || aliased) return;
    each(at, [&](const Point &x) {
      if (!garbage && mine[flat_of(x)] != k) garbage = Garbage{p, x, &e};
    });
  };
  // (Per array element: whether the visit's stores set it; cleared after each visit.)
  std::vector<char> in_visit(static_cast<std::size_t>(total), 0);
  auto end_visit = [&] {
    if (!key) return;
    for (const auto &b : visit_stores) // (each store's box lies within the window)
      each(b, [&](const Point &e) { in_visit[flat_of(e)] = 1; });
    each(win, [&](const Point &e) {
      const std::size_t f = flat_of(e);
      const bool s = in_visit[f] != 0;
      in_visit[f] = 0;
      if (s) {
        state[f] = stored;
      } else if (!copied_in) {
        state[f] = undefined;
        undefined_at[f] = visit_last;
      }
    });
  };
  for (std::int64_t k = 0; k < points; ++k) {
    const Point p = spec::grid_point(m.grid, m.cta_axes, k);
    auto b = block_at(m, op, p);
    auto z = sizes_at(m, op, p);
    auto w = spec::window_at(o, m.env, m.grid, p).value;
    if (!b || !z || !w) {
      unknown.push_back("cannot evaluate the index_map of '" + o.name + "'");
      return;
    }
    if (!key || *key != *w) {
      end_visit();
      key = *w;
      visit_stores.clear();
      // Triton's stores reach the array itself: whatever they miss keeps its contents.
      copied_in = m.triton || (o.revisit_any && !seen.insert(*w).second);
      win.assign(rank, {0, 0});
      for (std::size_t d = 0; d < rank; ++d) {
        // A BoundedSlice dim writes back its ds size (kept within its
        // bound, as the block buffer holds no more; past it is
        // index-out-of-bounds), any other dim its block.
        const std::int64_t ext = o.bounded[d] ? std::clamp<std::int64_t>((*z)[d], 0, o.block[d]) : o.block[d];
        const std::int64_t lo = o.window_start(d, (*b)[d]);
        win[d] = {std::clamp<std::int64_t>(lo, 0, o.shape[d]),
                  std::clamp<std::int64_t>(spec::saturating_add(lo, ext), 0, o.shape[d])};
      }
    }
    visit_last = k;
    // Triton, in place: a read of the input aliased to the output reads the
    // same array (one buffer), as a read of the output would.
    for (const auto &al : m.aliases) {
      if (!m.triton || al.output != op) continue;
      const auto &in = m.operands[al.input];
      const auto bi = block_at(m, al.input, p);
      for (const auto &e : m.effects) {
        if (e.operand != al.input || e.kind != Effect::read || e.keep || e.box.size() != rank ||
            in.shape.size() != rank)
          continue;
        const auto g = guard_at(m, e, p);
        const auto box = g && *g ? box_at(m, e, p) : std::nullopt;
        if (!g || (*g && (!bi || !box))) {
          unknown.push_back("cannot place the read of '" + in.name + "' (aliased to '" + o.name +
                            "') on line " + std::to_string(e.loc.line) + " at grid point " + format_tuple(p));
          return;
        }
        if (!*g) continue;
        reads.push_back({k, placed(in, *bi, *box, whole), &in});
      }
    }
    bool stores = false;
    for (const auto &e : m.effects) {
      // (A masked store's kept branch reads nothing on Triton: the store
      // leaves those elements alone.)
      const bool triton_read = m.triton && e.kind == Effect::read && !e.keep;
      if (e.operand != op || (e.kind == Effect::read && !triton_read) || e.box.size() != rank) continue;
      auto g = guard_at(m, e, p);
      if (!g) {
        unknown.push_back("cannot evaluate a guard on line " + std::to_string(e.loc.line));
        return;
      }
      if (!*g) continue;
      const auto box = box_at(m, e, p); // decided at this grid point where not static
      // The box in array elements, within `clip` (the array for a read, the
      // part of the window written back for a store).
      auto place = [&](const Box &clip) { return placed(o, *b, *box, clip); };
      if (triton_read) {
        if (!box) {
          unknown.push_back("cannot place the read of '" + o.name + "' on line " +
                            std::to_string(e.loc.line) + " at grid point " + format_tuple(p));
          return;
        }
        Box at = place(whole);
        read_before_store(at, e, k, p);
        reads.push_back({k, std::move(at), nullptr});
        continue;
      }
      stores = true;
      if (!box && m.triton) { // the stores it might meet are not known: no verdict on races
        unknown.push_back("cannot place the store into '" + o.name + "' on line " +
                          std::to_string(e.loc.line) + " at grid point " + format_tuple(p) +
                          ", so whether another program stores there is not decided");
        return;
      }
      if (!box) {
        inexact = &e;
        continue;
      }
      const Box at = place(win);
      if (m.triton && e.kind == Effect::accumulate) read_before_store(at, e, k, p); // `+=` reads first
      // A masked store sets only where its mask holds: programs whose chunks
      // overlap under masks that keep them apart do not race (a mask that
      // does not evaluate counts as setting all of its box).
      const std::optional<StoreMask> mask = m.triton && e.keep_mask
                                                ? std::optional<StoreMask>(std::in_place, m, flow, e, p, *box)
                                                : std::nullopt;
      Point rel(rank);
      if (m.triton && !past.count(&e)) {
        // Triton's stores reach the array itself: an element past its end
        // (the block's padding, which the JAX bridge adds for gather
        // windows) is written out of bounds unless the mask keeps it.
        // (A block index outside the array is the index map's
        // index-out-of-bounds: one root cause, one finding.)
        Box full(rank);
        bool outside = false, block_in = true;
        for (std::size_t d = 0; d < rank; ++d)
          block_in = block_in && (o.element[d] || ((*b)[d] >= 0 && (*b)[d] < o.num_blocks[d]));
        for (std::size_t d = 0; d < rank && block_in; ++d) {
          const std::int64_t lo = o.window_start(d, (*b)[d]);
          full[d] = {spec::saturating_add(lo, (*box)[d].first), spec::saturating_add(lo, (*box)[d].second)};
          outside = outside || full[d].first < 0 || full[d].second > o.shape[d];
        }
        bool maybe = outside && mask && !mask->bounded();
        if (outside && !maybe) {
          each(full, [&](const Point &x) {
            bool in = true;
            for (std::size_t d = 0; d < rank; ++d) {
              in = in && x[d] >= 0 && x[d] < o.shape[d];
              rel[d] = x[d] - o.window_start(d, (*b)[d]);
            }
            if (past.count(&e) || in || (mask && !mask->may_set(rel))) return;
            if (mask && !mask->evaluated())
              maybe = true; // (its data conjunct decides)
            else
              past.emplace(&e, Past{p, x, &e});
          });
        }
        if (maybe && !past.count(&e))
          unknown.push_back("cannot decide whether the masked store into '" + o.name + "' on line " +
                            std::to_string(e.loc.line) + " at grid point " + format_tuple(p) +
                            " stays within the array (its mask is not evaluated)");
      }
      if (m.triton)
        each(at, [&](const Point &x) {
          if (mask) {
            for (std::size_t d = 0; d < rank; ++d)
              rel[d] = x[d] - o.window_start(d, (*b)[d]);
            if (!mask->may_set(rel)) return;
          }
          const std::size_t f = flat_of(x);
          mine[f] = k;
          std::int64_t &who = owner[f];
          if (who >= 0 && who != k && !race) {
            race = std::make_pair(who, x);
            race_at = p;
          }
          if (who < 0) who = k;
        });
      visit_stores.push_back(at);
    }
    if (stores) {
      pts.push_back(p);
      windows.push_back(win);
    }
  }
  end_visit();
  if (!m.is_aliased_output(op))
    for (std::size_t flat = 0; flat < state.size(); ++flat) {
      if (state[flat] == stored) continue;
      if (inexact) {
        unknown.push_back(not_covered_unknown(m, op, *inexact));
        break;
      }
      Point e(rank);
      for (std::size_t d = rank, r = flat; d-- > 0;) {
        e[d] = static_cast<std::int64_t>(r % static_cast<std::size_t>(o.shape[d]));
        r /= static_cast<std::size_t>(o.shape[d]);
      }
      std::string msg = "element " + format_tuple(e) + " of output '" + o.name + "' is never written: ";
      if (state[flat] == never) {
        msg += m.triton ? "no program stores it" : "no grid point's window reaches it";
      } else {
        const Point p = spec::grid_point(m.grid, m.cta_axes, undefined_at[flat]);
        msg += "the window written back after grid point " + format_tuple(p) +
               " holds it, but no store of that visit wrote it, so its write-back leaves it undefined";
      }
      Finding f = make(Rule::output_not_covered, o.loc, msg);
      f.witness.items.push_back({"operand", o.name});
      f.witness.items.push_back({"element", e});
      if (state[flat] == undefined)
        f.witness.items.push_back({"grid_point", spec::grid_point(m.grid, m.cta_axes, undefined_at[flat])});
      out.push_back(std::move(f));
      break;
    }
  // Triton: a program that reads an element another program stores sees
  // it before or after that store, as the two happen to run.
  if (m.triton && !race)
    for (const auto &r : reads) {
      std::optional<Point> hit;
      std::int64_t who = -1;
      each(r.box, [&](const Point &e) {
        const std::int64_t w = owner[flat_of(e)];
        if (!hit && w >= 0 && w != r.k) {
          hit = e;
          who = w;
        }
      });
      if (!hit) continue;
      out.push_back(triton_race_finding(m, op, *hit, spec::grid_point(m.grid, m.cta_axes, who),
                                        spec::grid_point(m.grid, m.cta_axes, r.k), true, r.through));
      break;
    }
  if (garbage) out.push_back(triton_garbage_finding(m, *garbage->read, garbage->point, garbage->element));
  for (const auto &[store, at] : past)
    out.push_back(triton_past_end_finding(m, op, *store, at.point, at.element));
  if (race)
    out.push_back(triton_race_finding(m, op, race->second, spec::grid_point(m.grid, m.cta_axes, race->first),
                                      race_at, false));
  // Two storing points on different parallel cores whose windows overlap:
  // each core writes its whole window back, in either order (Triton has no
  // write-back: its programs race only where their stores meet, above).
  for (std::size_t i = 0; i < pts.size() && !m.triton; ++i)
    for (std::size_t j = i + 1; j < pts.size(); ++j) {
      const std::int64_t axis = parallel_axis_apart(m, pts[i], pts[j]);
      bool overlap = axis >= 0;
      for (std::size_t d = 0; d < rank && overlap; ++d)
        overlap = windows[i][d].first < windows[j][d].second && windows[j][d].first < windows[i][d].second;
      if (!overlap) continue;
      std::string both;
      for (std::size_t d = 0; d < rank; ++d)
        both += (d ? ", " : "") + std::to_string(std::max(windows[i][d].first, windows[j][d].first)) + ":" +
                std::to_string(std::min(windows[i][d].second, windows[j][d].second));
      Finding f =
          make(Rule::parallel_write_conflict, o.loc,
               "grid points " + format_tuple(pts[i]) + " and " + format_tuple(pts[j]) +
                   " differ along parallel axis " + std::to_string(axis) + " and both write '" + o.name +
                   "'[" + both + "] through overlapping windows: the cores write them back in either order");
      f.witness.items.push_back({"operand", o.name});
      f.witness.items.push_back({"first_write", pts[i]});
      f.witness.items.push_back({"second_write", pts[j]});
      out.push_back(std::move(f));
      return;
    }
}

Finding any_output_not_covered_finding(const KernelModel &m, std::size_t op, const Point &element) {
  const auto &o = m.operands[op];
  Finding f = make(Rule::output_not_covered, o.loc,
                   "no copy writes element " + format_tuple(element) + " of output '" + o.name +
                       "' (memory_space=any): that part of the result stays garbage; an output in HBM is "
                       "written by the body's copies alone (alias an input to it, input_output_aliases, to "
                       "keep the rest)");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"element", element});
  return f;
}

Finding not_covered_finding(const KernelModel &m, std::size_t op, const Point &block, const Box &cell) {
  const auto &o = m.operands[op];
  bool whole = true;
  for (std::size_t d = 0; d < cell.size(); ++d)
    whole = whole && cell[d].first == 0 && cell[d].second == o.block[d];
  std::string what = "block " + format_tuple(block);
  if (!whole) {
    // The cell's elements in the array, clipped to it.
    std::string r;
    for (std::size_t d = 0; d < cell.size(); ++d) {
      const std::int64_t base = spec::saturating_mul(block[d], o.block[d]);
      const std::int64_t lo = spec::saturating_add(base, cell[d].first);
      const std::int64_t hi = std::min(spec::saturating_add(base, cell[d].second), o.shape[d]);
      r += (d ? ", " : "") +
           (o.squeezed[d] ? std::to_string(lo) : std::to_string(lo) + ":" + std::to_string(hi));
    }
    what = "elements " + o.name + "[" + r + "] of block " + format_tuple(block);
  }
  Finding f = make(Rule::output_not_covered, o.loc,
                   "no grid point writes " + what + " of output '" + o.name +
                       "': that part of the result stays garbage");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"block", block});
  if (!whole) {
    std::vector<std::int64_t> lo, hi;
    for (const auto &[l, h] : cell) {
      lo.push_back(l);
      hi.push_back(h);
    }
    f.witness.items.push_back({"cell_lo", lo});
    f.witness.items.push_back({"cell_hi", hi});
  }
  f.notes.push_back(
      note(o.loc, what + " of " + o.name + " (of " + format_tuple(o.num_blocks) + " blocks) " +
                      (whole ? "is" : "are") + " never written" +
                      (whole ? "" : ": every store that writes this block covers only part of it")));
  return f;
}

std::string not_covered_unknown(const KernelModel &m, std::size_t op, const Effect &store) {
  return "output-not-covered/" + m.operands[op].name + ": the store on line " +
         std::to_string(store.loc.line) +
         " writes a part of the block that depends on the grid point (a subscript that is not static), and "
         "the other stores leave part of '" +
         m.operands[op].name + "' unwritten";
}

CoverCells cover_cells(const KernelModel &m, std::size_t op, bool reads_too) {
  const auto &o = m.operands[op];
  std::vector<std::vector<std::int64_t>> cuts(o.block.size());
  for (std::size_t d = 0; d < o.block.size(); ++d)
    cuts[d] = {0, o.block[d]};
  for (const auto &e : m.effects)
    if (e.operand == op && (e.kind != Effect::read || (reads_too && !e.keep)))
      for (std::size_t d = 0; d < e.box.size() && d < cuts.size(); ++d) {
        cuts[d].push_back(e.box[d].first);
        cuts[d].push_back(e.box[d].second);
      }
  for (auto &c : cuts) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
  }
  CoverCells r;
  std::vector<std::size_t> at(cuts.size(), 0);
  for (const auto &c : cuts)
    if (c.size() < 2) return r;
  while (true) {
    Box cell;
    for (std::size_t d = 0; d < cuts.size(); ++d)
      cell.emplace_back(cuts[d][at[d]], cuts[d][at[d] + 1]);
    r.cells.push_back(std::move(cell));
    std::size_t k = at.size();
    bool done = true;
    while (k > 0) {
      --k;
      if (++at[k] + 1 < cuts[k].size()) {
        done = false;
        break;
      }
      at[k] = 0;
    }
    if (done) return r;
  }
}

bool overlaps(const Box &a, const Box &b) {
  for (std::size_t d = 0; d < a.size() && d < b.size(); ++d)
    if (!(a[d].first < b[d].second && b[d].first < a[d].second)) return false;
  return true;
}

bool is_empty(const Box &b) {
  return std::any_of(b.begin(), b.end(), [](const auto &d) { return d.first >= d.second; });
}

bool box_contains(const Box &outer, const Box &inner) {
  if (outer.size() != inner.size()) return false;
  for (std::size_t d = 0; d < inner.size(); ++d)
    if (inner[d].first < outer[d].first || inner[d].second > outer[d].second) return false;
  return true;
}

bool cell_in_array(const OperandModel &o, const Point &b, const Box &cell) {
  for (std::size_t d = 0; d < cell.size() && d < b.size(); ++d)
    if (spec::saturating_add(spec::saturating_mul(b[d], o.block[d]), cell[d].first) >= o.shape[d])
      return false;
  return true;
}

Finding alias_finding(const KernelModel &m, const AliasModel &a, const Point &written, const Point &read) {
  const auto &x = m.operands[a.input];
  const auto &o = m.operands[a.output];
  Finding f = make(Rule::alias_hazard, a.loc,
                   "input '" + x.name + "' reads block " + block_str(m, a.input, read) + " at grid point " +
                       format_tuple(read) + " after output '" + o.name +
                       "' wrote back the same HBM region from grid point " + format_tuple(written) +
                       ": the input may see the new values instead of the original ones (or race with the "
                       "write-back where the fetch of the reading step overlaps it)");
  f.witness.items.push_back({"operand", x.name});
  f.witness.items.push_back({"written_back", written});
  f.witness.items.push_back({"read", read});
  f.notes.push_back(note(o.loc, "block " + block_str(m, a.output, written) + " of " + o.name +
                                    " visited at grid point " + format_tuple(written) +
                                    " and written back when its visit ended"));
  f.notes.push_back(note(x.loc, "block " + block_str(m, a.input, read) + " of " + x.name +
                                    " read at grid point " + format_tuple(read)));
  return f;
}

Finding alias_across_cores_finding(const KernelModel &m, const AliasModel &a, const Point &written,
                                   const Point &read) {
  const auto &x = m.operands[a.input];
  const auto &o = m.operands[a.output];
  const std::string ax = std::to_string(parallel_axis_apart(m, written, read));
  Finding f = make(Rule::alias_hazard, a.loc,
                   "input '" + x.name + "' reads block " + block_str(m, a.input, read) + " at grid point " +
                       format_tuple(read) + ", whose HBM region output '" + o.name +
                       "' writes back from grid point " + format_tuple(written) +
                       ": the two differ along parallel axis " + ax +
                       ", so they may run on two cores, and the fetch races with the write-back (the input "
                       "sees the original values or the new ones); mark axis " +
                       ax + " `arbitrary`, or read each block only at the grid points that write it");
  f.witness.items.push_back({"operand", x.name});
  f.witness.items.push_back({"written_back", written});
  f.witness.items.push_back({"read", read});
  f.notes.push_back(note(o.loc, "block " + block_str(m, a.output, written) + " of " + o.name +
                                    " written back from grid point " + format_tuple(written)));
  f.notes.push_back(note(x.loc, "block " + block_str(m, a.input, read) + " of " + x.name +
                                    " read at grid point " + format_tuple(read) +
                                    ", possibly on another core"));
  return f;
}

std::vector<std::pair<std::size_t, std::size_t>> twin_stores(const KernelModel &m, const AliasModel &a) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t s = 0; s < m.effects.size(); ++s) {
    const Effect &st = m.effects[s];
    if (st.operand != a.output || st.kind != Effect::write) continue;
    for (std::size_t r : sources_through_temporaries(m, st))
      if (m.effects[r].operand == a.input) {
        out.emplace_back(s, r);
        break;
      }
  }
  return out;
}

std::vector<std::size_t> input_sources(const KernelModel &m, const Effect &w, const AliasModel &a) {
  std::vector<std::size_t> out;
  for (std::size_t r : sources_through_temporaries(m, w)) {
    const std::size_t op = m.effects[r].operand;
    const auto &o = m.operands[op];
    if (op != a.input && o.role == spec::Role::in && o.windowed &&
        std::find(out.begin(), out.end(), op) == out.end())
      out.push_back(op);
  }
  return out;
}

Finding stale_twin_finding(const KernelModel &m, const AliasModel &a, const Effect &store,
                           const Point &stored, const Point &read) {
  const auto &x = m.operands[a.input];
  const auto &o = m.operands[a.output];
  const std::string b = block_str(m, a.output, read);
  Finding f = make(
      Rule::alias_hazard, store.loc,
      "this store writes block " + b + " of '" + o.name + "' at grid point " + format_tuple(read) +
          " from input '" + x.name + "', its alias, whose window still holds the block as it was before '" +
          o.name + "' stored into it at grid point " + format_tuple(stored) +
          ": the steps of one visit of a block neither write the output back nor fetch the input again, "
          "so that store is lost; update '" +
          o.name + "' instead (" + o.name + "[...] = " + x.name +
          "[...] on the block's first step, then +=)");
  f.witness.items.push_back({"operand", x.name});
  f.witness.items.push_back({"stored", stored});
  f.witness.items.push_back({"read", read});
  add_block(f, m, a.output, read);
  f.notes.push_back(note(a.loc, "'" + x.name + "' aliased to '" + o.name + "'"));
  f.notes.push_back(note(store.loc, "'" + o.name + "' stored at grid point " + format_tuple(stored) +
                                        ", earlier in the same visit of the block"));
  return f;
}

std::int64_t gpu_slots(const KernelModel &m) {
  std::int64_t n = 1;
  if (m.spec) n = spec::cta_steps(m.grid, spec::cta_axes(*m.spec, m.grid.size()));
  return std::max<std::int64_t>(1, std::min(m.max_concurrent_steps, n));
}

namespace {
// A block's bytes on chip: Mosaic TPU keeps a bool as an i32 in its memrefs
// (BOOL_MEMREF_TYPE); a GPU as a byte.
std::int64_t on_chip_bytes(const OperandModel &o, bool gpu) {
  const std::int64_t b = o.block_bytes();
  return !gpu && o.dtype == spec::DType::boolean ? spec::saturating_mul(b, 4) : b;
}
} // namespace

namespace {
// `33554432 bytes (32.0 MiB)`: a byte count as the message gives it.
std::string with_mib(std::int64_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes (" + mib + " MiB)";
}
} // namespace

std::int64_t sram_bytes(const KernelModel &m) {
  const Target *t = m.target ? find_target(*m.target) : nullptr;
  bool gpu = t && t->kind == TargetKind::gpu;
  std::int64_t total = 0;
  for (const auto &o : m.operands) {
    if (o.role == spec::Role::scratch) {
      if (o.decl && o.decl->memory_space != spec::MemorySpace::any &&
          o.decl->memory_space != spec::MemorySpace::hbm && !o.acc)
        total = spec::saturating_add(total, on_chip_bytes(o, gpu));
      continue;
    }
    if (!o.windowed) continue;
    std::int64_t n = gpu ? gpu_slots(m) : o.buffer_count;
    total = spec::saturating_add(total, spec::saturating_mul(n, on_chip_bytes(o, gpu)));
  }
  return total;
}

namespace {

// A while loop that some grid point may run past its bound (KernelModel::
// while_bounds): its guards and its condition after the modelled iterations
// may all hold. Evaluated at every grid point; a condition that reads open
// prefetch contents is not decided here, and the check decides it once per
// allowed contents (verifier/kernel.cpp) where they are few.
void while_bounds(const KernelModel &m, std::vector<std::string> &unknown) {
  if (m.while_bounds.empty()) return;
  constexpr std::int64_t kMaxPoints = 1 << 16;
  const std::int64_t points = m.num_points();
  // Without any prefetch element a witness may have bound in the env.
  spec::Env env;
  for (const auto &[n, v] : m.env)
    if (!spec::is_prefetch_element(n)) env[n] = v;
  for (const auto &w : m.while_bounds) {
    const std::string said = spec::while_bound_message(w.loc, w.bound);
    if (points > kMaxPoints) {
      unknown.push_back(said + " (not decided: the grid has " + std::to_string(points) +
                        " points, more than " + std::to_string(kMaxPoints) + ")");
      continue;
    }
    for (std::int64_t k = 0; k < points; ++k) {
      const auto p = spec::grid_point(m.grid, {}, k);
      bool undecided = false, holds = true;
      auto test = [&](const spec::Expr &e) {
        const auto v = spec::evaluate(bind_grid(e, p, m.grid), env).value;
        if (!v)
          undecided = true;
        else
          holds = holds && *v != 0;
      };
      for (const auto &g : w.guards)
        test(g);
      test(w.cond);
      if (!holds) continue;
      unknown.push_back(said + (undecided ? " (not decided at grid point " + format_tuple(p) +
                                                " without the prefetch contents its condition reads)"
                                          : " (at grid point " + format_tuple(p) + ")"));
      break;
    }
  }
}

} // namespace

namespace {

// Mosaic GPU: a wgmma reads its SMEM operands through the async proxy, which
// sees the body's stores into SMEM (generic proxy) only after a fence,
// plgpu.commit_smem() (PTX's fence.proxy.async). Walking the body in order
// (a `when`'s branches merged, a loop's body twice), each operand of a
// wgmma (a `dot` stored into a plgpu.ACC scratch) that the body stored into
// since the last commit_smem is a race between those stores and its reads.
// (Across grid steps the pipeline's own barriers stand between.)
void commit_smem_findings(const KernelModel &m, std::vector<Finding> &out) {
  if (!m.spec || !m.target || !spec::is_gpu_target(*m.target) || m.triton) return;
  auto decl = [&](const std::string &name) -> const OperandModel * {
    auto i = m.operand_index(name);
    return i ? &m.operands[*i] : nullptr;
  };
  auto in_smem = [&](const std::string &name) {
    const OperandModel *o = decl(name);
    return o && (o->windowed || (o->role == spec::Role::scratch && o->decl &&
                                 o->decl->memory_space == spec::MemorySpace::smem));
  };
  auto is_acc = [&](const std::string &name) {
    const OperandModel *o = decl(name);
    return o && o->decl && o->decl->memory_space == spec::MemorySpace::acc;
  };
  using Stored = std::map<std::string, spec::Loc>; // SMEM operand -> its last store since a fence
  std::set<std::pair<std::string, int>> seen;
  std::function<void(const spec::Expr &, const spec::Stmt &, const Stored &)> dots =
      [&](const spec::Expr &e, const spec::Stmt &st, const Stored &stored) {
        if (e.op == spec::Op::Call && (e.name == "dot" || e.name == "dot_general"))
          for (std::size_t k = 0; k < e.num_positional() && k < 2; ++k) {
            const spec::Expr &r = e.args[k];
            auto it = r.op == spec::Op::Ref ? stored.find(r.name) : stored.end();
            if (it == stored.end() || !seen.insert({r.name, st.loc.line}).second) continue;
            Finding f =
                make(Rule::slot_race, st.loc,
                     "this wgmma reads '" + r.name + "', which the body stored into on line " +
                         std::to_string(it->second.line) +
                         " with no commit_smem() in between: a wgmma reads SMEM through the async "
                         "proxy, which sees those stores only after a fence; call plgpu.commit_smem() "
                         "after the last store and before the wgmma");
            f.witness.items.push_back({"operand", r.name});
            f.witness.items.push_back({"store_line", static_cast<std::int64_t>(it->second.line)});
            f.notes.push_back(note(it->second, "'" + r.name + "' stored here (generic proxy)"));
            out.push_back(std::move(f));
          }
        for (const auto &a : e.args)
          dots(a, st, stored);
      };
  std::function<void(const spec::Block &, Stored &)> walk = [&](const spec::Block &b, Stored &stored) {
    for (const auto &st : b) {
      if (std::holds_alternative<spec::CommitSmem>(st.kind)) {
        stored.clear();
      } else if (const auto *a = std::get_if<spec::Assign>(&st.kind)) {
        if (is_acc(a->target.name)) dots(a->value, st, stored);
        if (!a->discards() && in_smem(a->target.name)) stored[a->target.name] = st.loc;
      } else if (const auto *i = std::get_if<spec::If>(&st.kind)) {
        Stored then = stored, other = stored;
        walk(i->then_body, then);
        walk(i->else_body, other);
        stored = std::move(then);
        for (const auto &[n, l] : other)
          stored.emplace(n, l);
      } else if (const auto *f = std::get_if<spec::For>(&st.kind)) {
        for (int pass = 0; pass < 2; ++pass)
          walk(f->body, stored);
      }
    }
  };
  Stored stored;
  walk(m.spec->body, stored);
}

} // namespace

std::vector<Finding> structural_findings(const KernelModel &m, std::vector<std::string> &unknown,
                                         const ReadsLastBlock &reads_last_block) {
  std::vector<Finding> out;
  commit_smem_findings(m, out);
  while_bounds(m, unknown);
  // partial-block-reduction: an axis is a reduction axis when no output's
  // index_map depends on it.
  bool has_output = false;
  for (const auto &o : m.operands)
    has_output = has_output || (o.role == spec::Role::out && o.windowed);
  for (std::size_t i = 0; i < m.operands.size(); ++i) {
    const auto &x = m.operands[i];
    if (x.role != spec::Role::in || !x.windowed) continue;
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      // An Element dim holds undefined values only where it is padded.
      const bool padded = x.element[d] ? x.pad_lo[d] > 0 || x.pad_hi[d] > 0 : x.shape[d] % x.block[d] != 0;
      // A BoundedSlice dim's undefined tail (past its size) moves with the
      // grid point: the race check follows it element by element instead.
      if (x.squeezed[d] || !padded || x.bounded[d]) continue;
      // Mosaic GPU fills a ragged input block's padding with zeros (TMA): a
      // sum or a dot takes them in unchanged, a max or a min does not. What
      // the body makes of them past a direct reduction (an exp, a running
      // maximum across steps) the lowered program follows element by element.
      const bool zeros = m.zero_filled(i);
      std::string why, zero_fn;
      if (has_output && !zeros)
        for (std::size_t a = 0; a < x.index_params.size() && why.empty(); ++a) {
          if (!spec::mentions(x.index[d], x.index_params[a])) continue;
          bool output_depends = false;
          for (const auto &o : m.operands)
            if (o.role == spec::Role::out && o.windowed && a < o.index_params.size())
              for (const auto &e : o.index)
                output_depends = output_depends || spec::mentions(e, o.index_params[a]);
          if (!output_depends)
            why = "it is indexed by grid axis " + std::to_string(a) +
                  ", along which every output block stays the same";
        }
      for (const auto &c : m.contractions)
        if (why.empty() && c.operand == i && c.array_dim == d) {
          if (!zeros)
            why = "the body contracts it (dot/sum/max) on line " + std::to_string(c.loc.line);
          else if (c.fn == "max" || c.fn == "min")
            why = "the body takes its " + (zero_fn = c.fn) + " on line " + std::to_string(c.loc.line);
        }
      if (why.empty()) continue;
      if (x.element[d]) {
        // Which offsets reach the padding depends on the index map: any read counts.
        bool read = false;
        for (const auto &r : m.effects)
          read = read || (r.operand == i && r.kind != Effect::write);
        if (!read) continue;
        Finding f =
            make(Rule::partial_block_reduction, x.loc,
                 "dim " + std::to_string(d) + " of '" + x.name + "' is an Element dim padded by (" +
                     std::to_string(x.pad_lo[d]) + ", " + std::to_string(x.pad_hi[d]) + ") and " + why +
                     ": a window that reaches the padding takes undefined values into the reduction");
        f.witness.items.push_back({"operand", x.name});
        f.witness.items.push_back({"dim", static_cast<std::int64_t>(d)});
        f.witness.items.push_back({"extent", x.shape[d]});
        f.witness.items.push_back({"block_size", x.block[d]});
        out.push_back(std::move(f));
        break;
      }
      std::int64_t valid = x.shape[d] % x.block[d];
      // A read that stays within the valid elements (`x[:, 0:valid]`, as
      // megablox reads its k remainder) takes no padding in.
      bool padding_read = false;
      for (std::size_t e = 0; e < m.effects.size() && !padding_read; ++e) {
        const Effect &r = m.effects[e];
        if (r.operand != i || r.kind == Effect::write || d >= r.box.size() || r.box[d].second <= valid ||
            std::find(r.masked.begin(), r.masked.end(), d) != r.masked.end())
          continue;
        padding_read = reads_last_block(e, d);
      }
      if (!padding_read) continue;
      Finding f =
          make(Rule::partial_block_reduction, x.loc,
               "dim " + std::to_string(d) + " of '" + x.name + "' (" + std::to_string(x.shape[d]) +
                   ") is not a multiple of its block (" + std::to_string(x.block[d]) + ") and " + why +
                   (zeros ? ": the padding of the last block holds zeros (Mosaic GPU's TMA fills it), "
                            "which the " +
                                zero_fn + " takes for values"
                    : m.triton ? ": the last block reaches past the array, and what a load reads there "
                                 "(memory past it: a Triton block is a view of the array, not a padded "
                                 "copy) enters the reduction"
                               : ": the padding of the last block enters the reduction as garbage"));
      f.witness.items.push_back({"operand", x.name});
      f.witness.items.push_back({"dim", static_cast<std::int64_t>(d)});
      f.witness.items.push_back({"extent", x.shape[d]});
      f.witness.items.push_back({"block_size", x.block[d]});
      f.witness.items.push_back({"last_block", x.num_blocks[d] - 1});
      f.witness.items.push_back({"valid_elements", valid});
      f.notes.push_back(note(x.loc, "block " + std::to_string(x.num_blocks[d] - 1) + " along dim " +
                                        std::to_string(d) + " holds only " + std::to_string(valid) + " of " +
                                        std::to_string(x.block[d]) + " valid elements"));
      out.push_back(std::move(f));
      break;
    }
  }
  // any-space-access: Mosaic rejects the kernel at compile time, so every
  // access counts, whatever its guard.
  for (const auto &e : m.effects) {
    const auto &o = m.operands[e.operand];
    if (!o.decl ||
        (o.decl->memory_space != spec::MemorySpace::any && o.decl->memory_space != spec::MemorySpace::hbm))
      continue;
    const bool load = e.kind == Effect::read;
    const std::string role = o.role == spec::Role::in    ? "input"
                             : o.role == spec::Role::out ? "output"
                                                         : "scratch";
    Finding f = make(Rule::any_space_access, e.loc,
                     std::string(load ? "loads " : "stores ") + role + " '" + o.name +
                         "' (memory_space=" + spec::to_string(o.decl->memory_space) +
                         "), which stays in HBM with no VMEM/SMEM window: only DMAs may touch it, so Mosaic "
                         "rejects the kernel; give '" +
                         o.name + "' a block=, or copy it into a scratch buffer by DMA");
    f.witness.items.push_back({"operand", o.name});
    f.witness.items.push_back({"access", std::string(load ? "load" : "store")});
    f.notes.push_back(note(o.loc, "'" + o.name + "' is declared here with memory_space=" +
                                      spec::to_string(o.decl->memory_space)));
    out.push_back(std::move(f));
  }
  if (!m.target) return out;
  const Target *t = find_target(*m.target);
  if (!t) {
    unknown.push_back(spec::unknown_target_message(*m.target) + ": " + std::string(id(Rule::sram_capacity)) +
                      " and " + std::string(id(Rule::block_tiling)) + " not checked");
    return out;
  }
  std::int64_t bytes = sram_bytes(m);
  std::int64_t budget = sram_budget(*t, m.vmem_limit_bytes);
  if (bytes > budget) {
    const spec::Loc &loc = m.spec ? m.spec->loc : spec::Loc{};
    Finding f =
        make(Rule::sram_capacity, loc,
             "the kernel needs at least " + with_mib(bytes) + " of " +
                 (t->kind == TargetKind::tpu ? "VMEM" : "shared memory") + " but " + t->name + " allows " +
                 with_mib(budget) +
                 " (a lower bound: the compiler's scoped allocations add intermediates and "
                 "spills)" +
                 (t->kind == TargetKind::tpu && budget < t->physical_sram_bytes
                      ? "; vmem_limit_bytes can raise the budget up to " + with_mib(t->physical_sram_bytes)
                      : std::string()));
    f.witness.items.push_back({"sram_bytes", bytes});
    f.witness.items.push_back({"budget_bytes", budget});
    f.witness.items.push_back({"target", t->name});
    for (const auto &o : m.operands) {
      std::int64_t n = o.role == spec::Role::scratch ? 1
                       : t->kind == TargetKind::gpu  ? gpu_slots(m)
                                                     : o.buffer_count;
      if (!o.windowed && o.role != spec::Role::scratch) continue;
      if (o.acc) {
        f.notes.push_back(note(o.loc, o.name + ": registers (memory_space=acc), not shared memory"));
        continue;
      }
      const bool as_i32 = t->kind == TargetKind::tpu && o.dtype == spec::DType::boolean;
      f.notes.push_back(note(o.loc, o.name + ": " + std::to_string(n) + " x " +
                                        std::to_string(on_chip_bytes(o, t->kind == TargetKind::gpu)) +
                                        " bytes" +
                                        (as_i32 ? " (a bool is an i32 in Mosaic's memrefs)" : "")));
    }
    out.push_back(std::move(f));
  }
  for (const auto &o : m.operands) {
    if (!o.windowed) continue;
    // Mosaic's lowering takes a block with Element dims only where every
    // other dim is an Element or squeezed ("All block dimensions must be
    // Elements or none of them can be Elements"); interpret mode runs both.
    if (t->kind == TargetKind::tpu && !(o.decl && o.decl->emit_pipeline) &&
        std::find(o.element.begin(), o.element.end(), true) != o.element.end()) {
      std::optional<std::size_t> plain;
      for (std::size_t d = 0; d < o.block.size() && !plain; ++d)
        if (!o.element[d] && !o.squeezed[d]) plain = d;
      if (plain) {
        Finding f = make(Rule::block_tiling, o.loc,
                         "the block of '" + o.name + "' mixes Element dims with a plain dim (dim " +
                             std::to_string(*plain) + ", block " + std::to_string(o.block[*plain]) +
                             "), which Mosaic rejects on " + t->name +
                             ": every dim beside an Element dim must be an Element or squeezed; write dim " +
                             std::to_string(*plain) + " as Element(" + std::to_string(o.block[*plain]) +
                             ") with its index_map returning the element offset");
        f.witness.items.push_back({"operand", o.name});
        f.witness.items.push_back({"dim", static_cast<std::int64_t>(*plain)});
        f.witness.items.push_back({"block_size", o.block[*plain]});
        out.push_back(std::move(f));
        continue;
      }
    }
    // Pallas TPU rejects a rank-0 block but for a scalar in SMEM
    // (_check_block_mappings: "supports only blocks of rank >= 1").
    if (t->kind == TargetKind::tpu && o.block.empty() &&
        !(o.decl && o.decl->memory_space == spec::MemorySpace::smem)) {
      Finding f = make(Rule::block_tiling, o.loc,
                       "the block of '" + o.name + "' has rank 0, which the Pallas TPU lowering rejects on " +
                           t->name + " (it supports only blocks of rank >= 1): give '" + o.name +
                           "' a dim of 1, or keep the scalar in SMEM (memory_space=smem)");
      f.witness.items.push_back({"operand", o.name});
      out.push_back(std::move(f));
      continue;
    }
    auto v = tiling_violations(*t, o.shape, o.block, o.squeezed, o.dtype);
    if (v.empty()) continue;
    Finding f = make(Rule::block_tiling, o.loc,
                     "the block of '" + o.name + "' violates " + t->name + "'s tiling rule: " + v[0].message);
    f.witness.items.push_back({"operand", o.name});
    f.witness.items.push_back({"dim", static_cast<std::int64_t>(v[0].dim)});
    f.witness.items.push_back({"block_size", v[0].block});
    f.witness.items.push_back({"required", v[0].required});
    for (const auto &x : v)
      f.notes.push_back(note(o.loc, x.message));
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::int64_t> witness_key(const Witness &w) {
  std::vector<std::int64_t> k;
  for (const auto &it : w.items) {
    if (const auto *v = std::get_if<std::int64_t>(&it.value))
      k.push_back(*v);
    else if (const auto *vs = std::get_if<std::vector<std::int64_t>>(&it.value))
      k.insert(k.end(), vs->begin(), vs->end());
  }
  return k;
}

void finalize(std::vector<Finding> &fs) {
  std::set<std::string> reduced;
  std::set<int> stored_early; // the lines of accumulation-lost's and alias-hazard's stores
  for (const auto &f : fs) {
    if (f.rule == Rule::reduction_not_last_axis)
      for (const auto &it : f.witness.items)
        if (it.key == "operand") reduced.insert(std::get<std::string>(it.value));
    if (f.rule == Rule::accumulation_lost) stored_early.insert(f.loc.line);
    // (alias-hazard's in-visit store, `o[...] = b[...] + x[...]`: the next
    // step's store drops this one's x as the TPU overwrite does; one cause.)
    if (f.rule == Rule::alias_hazard) stored_early.insert(f.loc.line);
  }
  std::vector<Finding> kept;
  std::map<std::pair<Rule, int>, std::size_t> at;
  for (auto &f : fs) {
    // A store before the reduction ends that Mosaic GPU also never copies
    // out: one fix (store on the last step), one finding. (So too a store
    // alias-hazard reports: one that takes the aliased input's stale window.)
    if (f.rule == Rule::output_write_lost && stored_early.count(f.loc.line)) continue;
    if (f.rule == Rule::output_revisit) {
      bool superseded = false;
      for (const auto &it : f.witness.items)
        if (it.key == "operand" && reduced.count(std::get<std::string>(it.value))) superseded = true;
      if (superseded) continue;
    }
    auto key = std::make_pair(f.rule, f.loc.line);
    auto it = at.find(key);
    if (it == at.end()) {
      at[key] = kept.size();
      kept.push_back(std::move(f));
    } else if (witness_key(f.witness) < witness_key(kept[it->second].witness)) {
      kept[it->second] = std::move(f);
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Finding &a, const Finding &b) {
    if (a.loc.line != b.loc.line) return a.loc.line < b.loc.line;
    return id(a.rule) < id(b.rule);
  });
  fs = std::move(kept);
}

std::size_t hbm_array(const KernelModel &m, std::size_t op) {
  for (const auto &a : m.aliases)
    if (a.input == op) return a.output;
  return op;
}

namespace {

// A name of an open prefetch element (spec::prefetch_element, `ids[3]`):
// its value is a solver variable, not the env's.
bool reads_open_element(const spec::Expr &e) {
  if (e.op == spec::Op::Name && spec::is_prefetch_element(e.name)) return true;
  return std::any_of(e.args.begin(), e.args.end(), reads_open_element);
}

} // namespace

CopyRegions::CopyRegions(const KernelModel &m) : m_(m), env_(m.env) {
  bool parallel = false;
  for (std::size_t a = 0; a < m.semantics.size() && a < m.grid.size(); ++a)
    parallel = parallel || (m.semantics[a] == spec::DimSemantics::parallel && m.grid[a] > 1);
  // (A Triton kernel has no body copies; its stores race per element.)
  if (!parallel || m.triton) return;
  for (const auto &a : m.copy_addresses) {
    std::vector<spec::Expr> gs;
    for (const auto &g : a.guards)
      gs.push_back(spec::grid_calls_as_names(g, m.grid.size(), m.grid));
    guards_.push_back(std::move(gs));
    const spec::Expr ref = a.locals.empty() ? *a.ref : spec::substitute(*a.ref, a.locals);
    refs_.push_back(spec::grid_calls_as_names(ref, m.grid.size(), m.grid));
  }
  const auto &as = m.copy_addresses;
  for (std::size_t i = 0; i < as.size(); ++i)
    for (std::size_t j = i; j < as.size(); ++j)
      if (hbm_array(m, as[i].operand) == hbm_array(m, as[j].operand) && (!as[i].source || !as[j].source))
        pairs_.emplace_back(i, j);
}

bool CopyRegions::reads_open(std::size_t i) const {
  const CopyAddress &a = m_.copy_addresses[i];
  if (reads_open_element(*a.ref)) return true;
  for (const auto &[n, v] : a.locals)
    if (reads_open_element(v)) return true;
  return std::any_of(a.guards.begin(), a.guards.end(), reads_open_element);
}

CopyRegions::At CopyRegions::at(std::size_t i, const Point &p) const {
  At r;
  for (std::size_t a = 0; a < p.size(); ++a)
    env_[spec::program_id_var(static_cast<std::int64_t>(a))] = p[a];
  auto value = [&](const spec::Expr &e) { return spec::evaluate(e, env_).value; };
  for (const auto &g : guards_[i]) {
    const auto v = value(g);
    if (!v) {
      r.decided = false;
      return r;
    }
    if (*v == 0) return r;
  }
  r.fires = true;
  const auto &shape = m_.operands[m_.copy_addresses[i].operand].shape;
  for (std::int64_t n : shape)
    r.box.emplace_back(0, n);
  const spec::Expr &ref = refs_[i];
  std::vector<bool> ellipsis;
  for (const auto &s : ref.args)
    ellipsis.push_back(s.op == spec::Op::Ellipsis);
  const auto dims = spec::subscript_dims(shape.size(), ellipsis);
  if (!dims) {
    r.decided = false; // (a rank error is the type checker's)
    return r;
  }
  for (std::size_t s = 0; s < ref.args.size(); ++s) {
    if ((*dims)[s] < 0) continue;
    const auto d = static_cast<std::size_t>((*dims)[s]);
    const spec::Expr &x = ref.args[s];
    std::optional<std::int64_t> lo, hi;
    if (x.op == spec::Op::Slice) {
      lo = x.args.empty() || x.args[0].op == spec::Op::None ? std::optional<std::int64_t>(0)
                                                            : value(x.args[0]);
      hi = x.args.size() < 2 || x.args[1].op == spec::Op::None ? std::optional<std::int64_t>(shape[d])
                                                               : value(x.args[1]);
    } else if (x.op == spec::Op::Call && x.name == "ds" && x.args.size() == 2 && x.kwarg_names.empty()) {
      lo = value(x.args[0]);
      const auto size = value(x.args[1]);
      if (lo && size) hi = *lo + *size;
    } else {
      lo = value(x);
      if (lo) hi = *lo + 1;
    }
    if (!lo || !hi) {
      r.decided = false;
      return r;
    }
    // Cut to the array (the part outside is index-out-of-bounds').
    const std::int64_t l = std::clamp<std::int64_t>(*lo, 0, shape[d]);
    r.box[d] = {l, std::max(l, std::clamp<std::int64_t>(*hi, 0, shape[d]))};
  }
  return r;
}

std::optional<Box> region_meet(const Box &a, const Box &b) {
  if (a.size() != b.size()) return std::nullopt;
  Box out;
  for (std::size_t d = 0; d < a.size(); ++d) {
    out.emplace_back(std::max(a[d].first, b[d].first), std::min(a[d].second, b[d].second));
    if (out.back().first >= out.back().second) return std::nullopt;
  }
  return out;
}

std::optional<std::tuple<std::size_t, std::size_t, Box>> CopyRegions::conflict_at(const Point &p,
                                                                                  const Point &q) const {
  for (const auto &[i, j] : pairs_)
    for (int way = 0; way < (i == j ? 1 : 2); ++way) {
      const std::size_t a = way == 0 ? i : j, b = way == 0 ? j : i;
      const At x = at(a, p), y = at(b, q);
      if (!x.decided || !y.decided || !x.fires || !y.fires) continue;
      if (auto meet = region_meet(x.box, y.box)) return std::make_tuple(a, b, *meet);
    }
  return std::nullopt;
}

std::string element_str(const std::string &name, const Point &elem) {
  std::string s = name + "[";
  for (std::size_t d = 0; d < elem.size(); ++d)
    s += (d ? ", " : "") + std::to_string(elem[d]);
  return s + "]";
}

std::string region_str(const std::string &name, const Box &box) {
  std::string s = name + "[";
  for (std::size_t d = 0; d < box.size(); ++d)
    s += (d ? ", " : "") + std::to_string(box[d].first) + ":" + std::to_string(box[d].second);
  return s + "]";
}

Finding hbm_copy_conflict_finding(const KernelModel &m, std::size_t a, std::size_t b, const Point &p,
                                  const Point &q, const Box &region) {
  const CopyAddress &x = m.copy_addresses[a], &y = m.copy_addresses[b];
  const auto &o = m.operands[hbm_array(m, x.operand)];
  const std::int64_t axis = parallel_axis_apart(m, p, q);
  const std::string ax = std::to_string(axis);
  // Through an aliased input the array has another name: say both.
  auto via = [&](const CopyAddress &c) {
    return c.operand == hbm_array(m, c.operand) ? std::string()
                                                : " (through '" + m.operands[c.operand].name + "', aliased)";
  };
  auto does = [&](const CopyAddress &c) { return c.source ? "reads" : "writes"; };
  auto at_line = [](const CopyAddress &c) { return " (line " + std::to_string(c.loc.line) + ")"; };
  const std::string r = region_str(o.name, region);
  const bool both_write = !x.source && !y.source;
  Finding f =
      make(Rule::parallel_write_conflict, y.loc,
           "grid points " + format_tuple(p) + " and " + format_tuple(q) + " differ along parallel axis " +
               ax + ", but the copy at " + format_tuple(p) + at_line(x) + " " + does(x) + " " + r + via(x) +
               " and the copy at " + format_tuple(q) + at_line(y) + " " + does(y) + " it" + via(y) +
               " (memory_space=any): the cores that split axis " + ax + " may run them at once, so " +
               (both_write ? "which copy lands last is a race"
                           : "the read takes the data from before or after the write, as they happen "
                             "to run") +
               "; mark axis " + ax + " `arbitrary`, or give each of its grid points its own region");
  f.witness.items.push_back({"operand", o.name});
  f.witness.items.push_back({"first_access", p});
  f.witness.items.push_back({"second_access", q});
  f.witness.items.push_back({"axis", axis});
  Point element;
  for (const auto &[lo, hi] : region)
    element.push_back(lo);
  f.witness.items.push_back({"element", element});
  f.witness.items.push_back({"first_line", static_cast<std::int64_t>(x.loc.line)});
  f.witness.items.push_back({"second_line", static_cast<std::int64_t>(y.loc.line)});
  f.notes.push_back(note(x.loc, "at grid point " + format_tuple(p) + ", this copy " + does(x) + " " + r));
  f.notes.push_back(note(y.loc, "at grid point " + format_tuple(q) +
                                    ", possibly on another core, this copy " + does(y) + " " + r));
  return f;
}

} // namespace pipecheck::verifier::rules
