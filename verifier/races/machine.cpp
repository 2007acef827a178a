#include "verifier/races/machine.hpp"

#include "spec/place.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <cassert>
#include <set>
#include <sstream>

namespace pipecheck::verifier::races {

namespace {

// A box as `lo:hi, ...`; with `indices`, a dim of extent 1 as its index.
std::string box_text(const Box &b, bool indices) {
  std::string s;
  for (const auto &[lo, hi] : b)
    s += (s.empty() ? "" : ", ") +
         (indices && hi == lo + 1 ? std::to_string(lo) : std::to_string(lo) + ":" + std::to_string(hi));
  return s;
}

bool box_overlaps(const Box &a, const Box &b) {
  if (a.size() != b.size()) return true; // conservative: different views of one buffer
  for (std::size_t d = 0; d < a.size(); ++d)
    if (a[d].second <= b[d].first || b[d].second <= a[d].first) return false;
  return true;
}

bool box_empty(const Box &b) {
  for (auto &[lo, hi] : b)
    if (hi <= lo) return true;
  return false;
}

/// True when `b` is covered by the union of `parts` (coordinate compression).
bool box_covered(const Box &b, const std::vector<Box> &parts) {
  if (box_empty(b)) return true;
  std::vector<const Box *> rel;
  for (auto &p : parts)
    if (p.size() == b.size() && box_overlaps(p, b)) {
      bool all = true;
      for (std::size_t d = 0; d < b.size(); ++d)
        if (p[d].first > b[d].first || p[d].second < b[d].second) all = false;
      if (all) return true;
      rel.push_back(&p);
    }
  if (rel.empty()) return false;
  std::vector<std::vector<std::int64_t>> cuts(b.size());
  for (std::size_t d = 0; d < b.size(); ++d) {
    cuts[d] = {b[d].first, b[d].second};
    for (auto &p : rel) {
      if ((*p)[d].first > b[d].first && (*p)[d].first < b[d].second) cuts[d].push_back((*p)[d].first);
      if ((*p)[d].second > b[d].first && (*p)[d].second < b[d].second) cuts[d].push_back((*p)[d].second);
    }
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
  }
  std::vector<std::size_t> idx(b.size(), 0);
  std::size_t cells = 0;
  while (true) {
    if (++cells > 100000) return false;
    Box cell;
    for (std::size_t d = 0; d < b.size(); ++d)
      cell.push_back({cuts[d][idx[d]], cuts[d][idx[d] + 1]});
    bool hit = false;
    for (auto &p : rel) {
      bool in = true;
      for (std::size_t d = 0; d < b.size(); ++d)
        if ((*p)[d].first > cell[d].first || (*p)[d].second < cell[d].second) in = false;
      if (in) {
        hit = true;
        break;
      }
    }
    if (!hit) return false;
    std::size_t d = 0;
    for (; d < b.size(); ++d) {
      if (++idx[d] + 1 < cuts[d].size()) break;
      idx[d] = 0;
    }
    if (d == b.size()) return true;
  }
}

} // namespace

bool overlaps(const Place &a, const Place &b) {
  if (a.buffer != b.buffer) return false;
  if (a.slot != b.slot && a.slot >= 0 && b.slot >= 0) return false;
  return box_overlaps(a.box, b.box);
}

namespace {

// `T[s] = where(c, v, T[s])`: the store puts back what it reads of T where
// c fails (megablox's masked store of a tile two groups share).
bool is_keep_store(const spec::Stmt &s) {
  const auto *a = std::get_if<spec::Assign>(&s.kind);
  return a && spec::keep_select(*a);
}

} // namespace

Machine::Machine(const spec::Program &p, spec::Env env)
    : program_(p), env_(std::move(env)), flow_([this](const std::string &n) { return buffer_index(n) >= 0; },
                                               [this](const spec::Expr &e) { return ref_padding(e); }) {
  try {
    stepper_ = std::make_unique<spec::Stepper>(p, p.body, env_);
  } catch (const spec::StepError &e) {
    throw Unsupported(e.what(), e.loc);
  }
}

int Machine::new_event(const spec::Stmt &s, std::optional<std::int64_t> slot) {
  // Past the limit with a finding in hand: the finding stands (the walk
  // stops there, as a pile-up does); without one, nothing is shown.
  if (r_.events.size() >= event_limit_) {
    if (!r_.findings.empty()) throw PiledUp{};
    throw Unsupported("more than " + std::to_string(event_limit_) + " events", s.loc);
  }
  Event ev;
  ev.stmt = &s;
  ev.iterations = stepper_->loop_values();
  ev.slot = slot;
  if (record_graph_) {
    ev.node = r_.graph.add_node();
    if (last_node_ >= 0) r_.graph.add_edge(last_node_, ev.node);
    last_node_ = ev.node;
  }
  r_.events.push_back(std::move(ev));
  return static_cast<int>(r_.events.size()) - 1;
}

std::int64_t Machine::step_of_event(int ev) {
  if (top_level_.empty())
    for (std::size_t i = 0; i < program_.body.size(); ++i)
      spec::for_each_stmt(program_.body[i],
                          [&](const spec::Stmt &x) { top_level_[&x] = static_cast<int>(i); });
  const Event &e = r_.events[static_cast<std::size_t>(ev)];
  auto it = top_level_.find(e.stmt);
  return step_of_(it == top_level_.end() ? -1 : it->second, e.iterations);
}

bool Machine::covered(const Place &p) const {
  auto it = slots_state_.find({p.buffer, p.slot});
  if (it == slots_state_.end()) return box_empty(p.box);
  if (box_covered(p.box, it->second.written)) return true;
  if (it->second.padding.empty()) return false;
  std::vector<Box> all = it->second.written;
  all.insert(all.end(), it->second.padding.begin(), it->second.padding.end());
  return box_covered(p.box, all);
}

bool Machine::follows_writes(int buffer) const {
  // (An hbm array holds data, but where `A[...] = undefined` left it
  // undefined: from there on it holds what copies write into it.)
  const auto kind = program_.buffers[buffer].kind;
  return kind == spec::BufferKind::sram || kind == spec::BufferKind::smem ||
         (kind == spec::BufferKind::hbm && undefined_hbm_.count(buffer));
}

void Machine::add_written(const Place &p) {
  if (!follows_writes(p.buffer)) return;
  const auto kind = program_.buffers[p.buffer].kind;
  auto &st = slots_state_[{p.buffer, p.slot}];
  if (kind != spec::BufferKind::hbm) {
    if (box_covered(p.box, st.written)) return;
    st.written.push_back(p.box);
    return;
  }
  // An hbm array is written region by region, a block per grid step: the
  // regions are merged where they join along one dim (rows after rows, then
  // strips after strips), so the set stays small. Past kMaxRegions the array
  // is no longer followed (its reads count as defined: no finding, as before
  // `A[...] = undefined` was followed at all).
  constexpr std::size_t kMaxRegions = 1024;
  if (!st.written.empty() && box_covered(p.box, {st.written.back()})) return;
  Box b = p.box;
  for (bool merged = true; merged;) {
    merged = false;
    for (std::size_t k = st.written.size(); k-- > 0 && k + 8 >= st.written.size();) {
      const Box &w = st.written[k];
      if (w.size() != b.size()) continue;
      int along = -1, differ = 0;
      for (std::size_t d = 0; d < b.size(); ++d)
        if (w[d] != b[d]) {
          ++differ;
          along = static_cast<int>(d);
        }
      if (differ == 0) return; // (written already)
      if (differ != 1) continue;
      const auto &x = w[static_cast<std::size_t>(along)], &y = b[static_cast<std::size_t>(along)];
      if (x.second < y.first || y.second < x.first) continue;
      b[static_cast<std::size_t>(along)] = {std::min(x.first, y.first), std::max(x.second, y.second)};
      st.written.erase(st.written.begin() + static_cast<std::ptrdiff_t>(k));
      merged = true;
      break;
    }
  }
  st.written.push_back(std::move(b));
  if (st.written.size() > kMaxRegions) {
    undefined_hbm_.erase(p.buffer);
    st.written.clear();
  }
}

namespace {

/// `b` minus `cut`: at most two boxes per dim.
std::vector<Box> box_minus(const Box &b, const Box &cut) {
  if (b.size() != cut.size() || !box_overlaps(b, cut)) return {b};
  std::vector<Box> out;
  Box rest = b;
  for (std::size_t d = 0; d < b.size(); ++d) {
    if (rest[d].first < cut[d].first) {
      Box piece = rest;
      piece[d].second = cut[d].first;
      out.push_back(piece);
      rest[d].first = cut[d].first;
    }
    if (rest[d].second > cut[d].second) {
      Box piece = rest;
      piece[d].first = cut[d].second;
      out.push_back(piece);
      rest[d].second = cut[d].second;
    }
  }
  return out;
}

} // namespace

namespace {

std::vector<Box> boxes_minus(const std::vector<Box> &bs, const Box &cut) {
  std::vector<Box> kept;
  for (auto &b : bs)
    for (auto &piece : box_minus(b, cut))
      if (!box_empty(piece)) kept.push_back(std::move(piece));
  return kept;
}

Box box_intersection(const Box &a, const Box &b) {
  Box r = a;
  for (std::size_t d = 0; d < r.size() && d < b.size(); ++d)
    r[d] = {std::max(a[d].first, b[d].first), std::min(a[d].second, b[d].second)};
  return r;
}

} // namespace

void Machine::clear_written(const Place &p) {
  auto it = slots_state_.find({p.buffer, p.slot});
  if (it == slots_state_.end()) return;
  auto &st = it->second;
  if (st.written.size() == 1 && st.written[0] == p.box)
    st.written.clear();
  else if (!st.written.empty())
    st.written = boxes_minus(st.written, p.box);
  if (!st.padding.empty()) st.padding = boxes_minus(st.padding, p.box);
  if (!st.zeros.empty()) st.zeros = boxes_minus(st.zeros, p.box);
}

std::vector<Box> Machine::unwritten(const Place &p, bool *some) const {
  std::vector<Box> out{p.box};
  auto it = slots_state_.find({p.buffer, p.slot});
  if (it == slots_state_.end()) return out;
  for (const auto *set : {&it->second.written, &it->second.padding})
    for (const auto &w : *set) {
      if (some) *some = *some || (w.size() == p.box.size() && box_overlaps(w, p.box));
      out = boxes_minus(out, w);
    }
  return out;
}

std::vector<Box> Machine::boxes_in(const Place &p, std::vector<Box> SlotState::*set) const {
  std::vector<Box> out;
  auto it = slots_state_.find({p.buffer, p.slot});
  if (it == slots_state_.end()) return out;
  for (auto &b : it->second.*set)
    if (b.size() == p.box.size() && box_overlaps(b, p.box)) out.push_back(box_intersection(b, p.box));
  return out;
}

std::vector<Box> Machine::padding_in(const Place &p) const { return boxes_in(p, &SlotState::padding); }

std::vector<Box> Machine::zeros_in(const Place &p) const { return boxes_in(p, &SlotState::zeros); }

RefPadding Machine::ref_padding(const spec::Expr &e) const {
  const spec::StepRef ref = stepper_->resolve(e, stepper_->current() ? stepper_->current()->loc : e.loc);
  const Place &p = ref.place;
  RefPadding out;
  for (int d : ref.kept)
    out.shape.push_back(p.box[static_cast<std::size_t>(d)].second - p.box[static_cast<std::size_t>(d)].first);
  auto relative = [&](const Box &b) {
    Box v;
    for (int d : ref.kept) {
      const auto k = static_cast<std::size_t>(d);
      v.push_back({b[k].first - p.box[k].first, b[k].second - p.box[k].first});
    }
    return v;
  };
  for (auto &b : padding_in(p))
    out.boxes.push_back(relative(b));
  for (auto &b : zeros_in(p))
    out.zeros.push_back(relative(b));
  return out;
}

// acc += a @ b: undefined data in a row of a (any column) reaches that row
// of acc, in a column of b that column (rows and columns of the operands as
// read, transposed where the wgmma says so), as a dot spreads a partial block's
// padding (verifier/races/padding.hpp). Its rows past a ragged M edge are
// padding the write-back leaves out; an undefined column of a, every row.
void Machine::wgmma_padding(const spec::AsyncStart &a, int ev) {
  const spec::StepRef &acc = a.acc;
  if (acc.kept.size() != 2 || a.a.kept.size() != 2 || a.b.kept.size() != 2) return;
  // (An operand part of whose box something wrote takes the rest as undefined, as on_compute's reads.)
  pad_unwritten(a.a.place);
  pad_unwritten(a.b.place);
  if (!any_padding_) return;
  auto dim = [](const spec::StepRef &r, int k) {
    return static_cast<std::size_t>(r.kept[static_cast<std::size_t>(k)]);
  };
  auto rel = [&](const spec::StepRef &r, const Box &b, int k) {
    const std::size_t d = dim(r, k);
    return std::make_pair(b[d].first - r.place.box[d].first, b[d].second - r.place.box[d].first);
  };
  std::vector<Box> pads;
  auto acc_box = [&](std::pair<std::int64_t, std::int64_t> rows, std::pair<std::int64_t, std::int64_t> cols) {
    Box b = acc.place.box;
    const std::size_t r = dim(acc, 0), c = dim(acc, 1);
    b[r] = {acc.place.box[r].first + rows.first, acc.place.box[r].first + rows.second};
    b[c] = {acc.place.box[c].first + cols.first, acc.place.box[c].first + cols.second};
    b[r] = {std::max(b[r].first, acc.place.box[r].first), std::min(b[r].second, acc.place.box[r].second)};
    b[c] = {std::max(b[c].first, acc.place.box[c].first), std::min(b[c].second, acc.place.box[c].second)};
    pads.push_back(std::move(b));
  };
  const std::int64_t m = acc.place.box[dim(acc, 0)].second - acc.place.box[dim(acc, 0)].first;
  const std::int64_t n = acc.place.box[dim(acc, 1)].second - acc.place.box[dim(acc, 1)].first;
  // (a's rows are its dim 0, its dim 1 when read transposed; b's columns its dim 1, or 0.)
  for (const auto &b : padding_in(a.a.place))
    acc_box(rel(a.a, b, a.trans_a ? 1 : 0), {0, n});
  for (const auto &b : padding_in(a.b.place))
    acc_box({0, m}, rel(a.b, b, a.trans_b ? 0 : 1));
  if (pads.empty()) return;
  add_padding(acc.place, pads);
  auto &st = slots_state_[{acc.place.buffer, acc.place.slot}];
  if (st.padded_by < 0) st.padded_by = ev;
}

void Machine::SlotState::untag(const Box &b) {
  std::erase_if(tags, [&](const Tag &t) { return box_overlaps(t.box, b); });
  std::erase_if(pending, [&](const Pending &x) { return box_overlaps(x.box, b); });
}

void Machine::pad_unwritten(const Place &p) {
  auto kind = program_.buffers[p.buffer].kind;
  if ((kind != spec::BufferKind::sram && kind != spec::BufferKind::smem) || covered(p)) return;
  bool some = false;
  std::vector<Box> undefined = unwritten(p, &some);
  if (some) add_padding(p, undefined);
}

void Machine::add_padding(const Place &p, const std::vector<Box> &boxes) {
  auto kind = program_.buffers[p.buffer].kind;
  if (boxes.empty() ||
      (kind != spec::BufferKind::sram && kind != spec::BufferKind::smem && kind != spec::BufferKind::acc))
    return;
  any_padding_ = true;
  auto &pad = slots_state_[{p.buffer, p.slot}].padding;
  for (auto &b : boxes)
    if (!box_empty(b) && !box_covered(b, pad)) pad.push_back(b);
}

void Machine::add_zeros(const Place &p, const std::vector<Box> &boxes) {
  if (boxes.empty()) return;
  any_padding_ = true;
  auto &z = slots_state_[{p.buffer, p.slot}].zeros;
  for (auto &b : boxes)
    if (!box_empty(b) && !box_covered(b, z)) z.push_back(b);
}

namespace {
struct OpAccess {
  const Place *place;
  bool write;
  bool wgmma_operand;
  bool acc;
};
// The places an operation accesses while in flight (pointing into `o`).
struct OpAccesses {
  OpAccess at[3];
  int n = 0;
  const OpAccess *begin() const { return at; }
  const OpAccess *end() const { return at + n; }
};
OpAccesses op_accesses(const AsyncOp &o) {
  switch (o.kind) {
  case OpKind::copy_in:
  case OpKind::copy_out: return {{{&o.src, false, false, false}, {&o.dst, true, false, false}, {}}, 2};
  case OpKind::wgmma:
    return {{{&o.a, false, true, false}, {&o.b, false, true, false}, {&o.acc, true, false, true}}, 3};
  }
  return {};
}
} // namespace

void Machine::access(int event, int op, const Place &p, bool write) {
  const auto &bufs = program_.buffers;
  if (write) flow_.clobber(bufs[p.buffer].name); // (a whole store gives it its value again: on_compute)
  bool is_wgmma = op >= 0 && r_.ops[op].kind == OpKind::wgmma;
  bool operand = is_wgmma && !write;
  bool acc_access = is_wgmma && write;
  auto kind = bufs[p.buffer].kind;
  if (!write && follows_writes(p.buffer) && !covered(p)) {
    auto st = slots_state_.find({p.buffer, p.slot});
    const int undefined_at = st == slots_state_.end() ? -1 : st->second.undefined_by;
    std::string what =
        "reads " + bufs[p.buffer].name + (p.slot >= 0 ? "[" + std::to_string(p.slot) + "]" : std::string());
    std::string why = what + ", which nothing has written";
    bool some = false;
    const std::vector<Box> rest = unwritten(p, &some);
    if (some && !rest.empty()) {
      // (Part of it written: name the first part that is not.)
      why = what + ", of which nothing has written [" + box_text(rest.front(), false) + "]";
    }
    if (kind == spec::BufferKind::hbm) {
      // (Only `A[...] = undefined` leaves an hbm array undefined.)
      why = "reads " + bufs[p.buffer].name + "[" +
            box_text(some && !rest.empty() ? rest.front() : p.box, false) +
            "] of HBM, where nothing has been written";
      if (undefined_at >= 0)
        why += " since '" + spec::print(std::get<spec::Assign>(r_.events[undefined_at].stmt->kind).target) +
               " = undefined' at line " + std::to_string(r_.events[undefined_at].stmt->loc.line) +
               " (a kernel's output that no input aliases holds nothing until the kernel writes it)";
    } else if (undefined_at >= 0) {
      const spec::Stmt &by = *r_.events[undefined_at].stmt;
      const std::string line = std::to_string(by.loc.line);
      why = std::holds_alternative<spec::Assign>(by.kind)
                ? what + ", which '" + spec::print(std::get<spec::Assign>(by.kind).target) +
                      " = undefined' at line " + line + " left undefined"
                : what + ", whose contents the waited write-back at line " + line +
                      " left undefined (a slot keeps nothing for its next visit)";
    }
    const bool write_back = op >= 0 && r_.ops[op].kind == OpKind::copy_out && !some;
    r_.findings.push_back({Rule::uninitialized_read, event, undefined_at, -1, -1, why, write_back});
  }
  for (int o : outstanding_) {
    if (o == op) continue;
    const AsyncOp &other = r_.ops[o];
    for (auto &y : op_accesses(other)) {
      if (!(write || y.write) || !overlaps(*y.place, p)) continue;
      if (acc_access && y.acc && other.kind == OpKind::wgmma) continue; // ordered on the accumulator
      // (A wgmma issued on a slot a copy still fills reads it early: a
      // slot-race, as a plain read there is; its operand overwritten while
      // it reads is async-operand-overwritten.)
      const bool async_operand = y.wgmma_operand && write;
      const bool early_operand = operand && y.write && !async_operand;
      const Rule rule = async_operand ? Rule::async_operand_overwritten : Rule::slot_race;
      if (!races_seen_.insert({rule, r_.events[event].stmt, r_.events[other.start_event].stmt}).second) break;
      std::string what =
          bufs[p.buffer].name + (p.slot >= 0 ? "[" + std::to_string(p.slot) + "]" : std::string());
      // What the operation in flight does to this place: a slot is written by
      // a copy in and read by a copy out; an hbm array (named with its
      // region) is read by a copy in and written by a copy out.
      std::string by = other.kind == OpKind::wgmma ? "wgmma" : y.write ? "copy into it" : "copy out of it";
      if (bufs[p.buffer].kind == spec::BufferKind::hbm && other.kind != OpKind::wgmma) {
        what += "[" + box_text(p.box, true) + "]";
        by = std::string(other.kind == OpKind::copy_in ? "copy in" : "copy out") +
             (y.write ? " writing it" : " reading it");
      }
      std::string msg =
          async_operand   ? "overwrites " + what + " while a wgmma still reads it (no wgmma_wait retired it)"
          : early_operand ? "the wgmma reads " + what + " while an asynchronous " + by +
                                " is still in flight: wait for the copy before the wgmma"
                          : (write ? "writes " : "reads ") + what + " while an asynchronous " + by +
                                " is still in flight";
      RawFinding f{rule, event, other.start_event, -1, -1, msg};
      f.other_op = o;
      r_.findings.push_back(std::move(f));
      break;
    }
  }
}

void Machine::retire(int op, int event) {
  AsyncOp &o = r_.ops[op];
  o.end_event = event;
  if (record_graph_) r_.graph.add_edge(o.node, r_.events[event].node);
  outstanding_.erase(std::find(outstanding_.begin(), outstanding_.end(), op));
}

void Machine::on_iteration(const spec::For &f, std::int64_t v) {
  if (hook_) hook_(f, v, *this);
}

int Machine::padding_origin(const std::vector<spec::StepRef> &refs, const spec::Expr &value) const {
  int origin = -1;
  const auto earliest = [&](int e) { origin = origin < 0 ? e : std::min(origin, e); };
  for (auto &r : refs)
    if (auto it = slots_state_.find({r.place.buffer, r.place.slot});
        it != slots_state_.end() && it->second.padded_by >= 0 && !padding_in(r.place).empty())
      earliest(it->second.padded_by);
  if (!local_padded_by_.empty()) {
    std::set<std::string> names;
    spec::collect_names(value, names);
    for (const auto &n : names)
      if (auto it = local_padded_by_.find(n); it != local_padded_by_.end()) earliest(it->second);
  }
  return origin;
}

void Machine::on_compute(const spec::Stmt &s, const std::vector<spec::StepRef> &refs,
                         const std::optional<spec::StepRef> &write) {
  const spec::Expr &value = std::holds_alternative<spec::Assign>(s.kind)
                                ? std::get<spec::Assign>(s.kind).value
                                : std::get<spec::Let>(s.kind).value;
  // A read of a buffer part of whose box something wrote takes the rest as
  // undefined data, followed element by element like a partial block's
  // padding (a carry scratch read whole whose unwritten rows a slice drops;
  // uninitialized-read where they reach an output). One nothing wrote any
  // of is the read's error (access).
  for (auto &r : refs)
    if (!(write && r.place == write->place && is_keep_store(s))) pad_unwritten(r.place);
  if (!write) {
    // A tensor local: where it holds padding, element by element. One bound
    // before any padding exists holds none, but its shape and value (a mask)
    // still place and keep out what a later expression combines it with.
    const std::string &name = std::get<spec::Let>(s.kind).name;
    flow_.bind(name, value, env_);
    // (Which store first put the padding it reads into a buffer, for the
    // note on its write-back: a masked load's kept lanes, say.)
    const int origin = padding_origin(refs, value);
    if (origin >= 0)
      local_padded_by_[name] = origin;
    else
      local_padded_by_.erase(name);
    int ev = new_event(s, std::nullopt);
    for (auto &r : refs)
      access(ev, -1, r.place, false);
    return;
  }
  const Place &target = write->place;
  const auto *assign = std::get_if<spec::Assign>(&s.kind);
  const bool accumulate = assign && assign->accumulate;
  bool self_read = accumulate;
  for (std::size_t k = 0; k + (accumulate ? 1 : 0) < refs.size(); ++k)
    if (overlaps(refs[k].place, target)) self_read = true;
  // A keep store reads its target only to put it back: what nothing wrote
  // of it becomes undefined data (like a partial block's padding) that the
  // mask keeps or overwrites element by element; writing it back is the error.
  const bool keep = is_keep_store(s);
  bool kept_defined = false;
  if (keep) {
    auto it = slots_state_.find({target.buffer, target.slot});
    kept_defined = it != slots_state_.end() && !it->second.written.empty();
    add_padding(target, unwritten(target));
  }
  int ev = new_event(s, target.slot >= 0 ? std::optional(target.slot) : std::nullopt);
  for (auto &r : refs)
    if (!keep || !(r.place == target)) access(ev, -1, r.place, false);
  access(ev, -1, target, true);
  // A mask stored whole into a scratch keeps its value for later reads.
  if (!accumulate && !keep && target.slot < 0) {
    const spec::Buffer &b = program_.buffers[target.buffer];
    const auto &shape = stepper_->block_shape(target.buffer);
    bool whole =
        b.kind == spec::BufferKind::sram && !b.slots && target.box.size() == shape.size() &&
        (b.dtype == spec::DType::f32 || b.dtype == spec::DType::i32 || b.dtype == spec::DType::boolean);
    for (std::size_t d = 0; whole && d < shape.size(); ++d)
      whole = target.box[d].first == 0 && target.box[d].second == shape[d];
    if (whole) flow_.store(b.name, value, env_, shape, b.dtype == spec::DType::boolean);
  }
  if (any_padding_) {
    // The padding of a partial block (see on_start) flows into the target:
    // reading it is no error, writing it back is. (The store that first put
    // it into a buffer is named where it is written back: a read of a
    // buffer a store padded keeps that store.)
    int origin = ev;
    if (const int o = padding_origin(refs, value); o >= 0) origin = std::min(origin, o);
    // `T = T + v` (a wgmma the bridge exports, a fori_loop carry) accumulates v as `T += v` does.
    const spec::Expr *added = nullptr;
    if (assign && !accumulate && value.op == spec::Op::Add && value.args.size() == 2 &&
        value.args[0] == assign->target)
      added = &value.args[1];
    const PadValue v = flow_.eval(added ? *added : value, env_);
    std::vector<Box> pads = padding_in_target(v, target.box, write->kept);
    std::vector<Box> zeros = padding_in_target(v, target.box, write->kept, kZero);
    if (accumulate || added) {
      for (auto &b : padding_in(target))
        pads.push_back(b);
      // `T += v`: zero padding stays where both were (a zero added to data
      // leaves the data; data added to a zero is no zero).
      std::vector<Box> both;
      for (const auto &old : zeros_in(target))
        for (const auto &b : zeros)
          if (box_overlaps(old, b)) both.push_back(box_intersection(old, b));
      zeros = std::move(both);
    }
    auto it = slots_state_.find({target.buffer, target.slot});
    if (it != slots_state_.end() && !it->second.padding.empty())
      it->second.padding = boxes_minus(it->second.padding, target.box);
    if (it != slots_state_.end() && !it->second.zeros.empty())
      it->second.zeros = boxes_minus(it->second.zeros, target.box);
    add_padding(target, pads);
    add_zeros(target, zeros);
    if (std::any_of(pads.begin(), pads.end(), [](const Box &b) { return !box_empty(b); }))
      slots_state_[{target.buffer, target.slot}].padded_by = origin;
  }
  add_written(target);
  auto &st = slots_state_[{target.buffer, target.slot}];
  // A keep store into a slot nothing defined holds no other block's data.
  if (keep && !kept_defined && refs.size() > 0) {
    bool other = false;
    for (auto &r : refs)
      other = other || (!(r.place == target) && overlaps(r.place, target));
    self_read = other;
  }
  const Box &tb = target.box;
  // A kernel scratch's accumulates, by grid step.
  if (step_of_ && target.slot < 0) {
    if (self_read) {
      const std::int64_t step = step_of_event(ev);
      auto run = std::find_if(st.runs.begin(), st.runs.end(),
                              [&](const SlotState::Run &r) { return box_overlaps(r.box, tb); });
      if (run == st.runs.end())
        st.runs.push_back({tb, 1, step});
      else if (run->last != step)
        *run = {run->box, run->steps + 1, step};
    } else {
      std::erase_if(st.runs, [&](const SlotState::Run &r) { return box_overlaps(r.box, tb); });
    }
  }
  if (self_read) {
    const bool pending = std::any_of(st.pending.begin(), st.pending.end(),
                                     [&](const SlotState::Pending &x) { return box_overlaps(x.box, tb); });
    if (!pending)
      for (const auto &t : st.tags)
        if (box_overlaps(t.box, tb)) {
          st.pending.push_back({tb, ev, t.from});
          break;
        }
  } else {
    std::erase_if(st.tags, [&](const SlotState::Tag &t) { return box_overlaps(t.box, tb); });
    std::erase_if(st.pending, [&](const SlotState::Pending &x) { return box_overlaps(x.box, tb); });
  }
}

void Machine::on_start(const spec::Stmt &s, int op_id, const spec::AsyncStart &a) {
  (void)op_id;
  AsyncOp o;
  if (a.kind == spec::AsyncKind::wgmma) {
    const Place &acc = a.acc.place, &pa = a.a.place, &pb = a.b.place;
    int ev = new_event(s, pa.slot >= 0 ? std::optional(pa.slot) : std::nullopt);
    o.kind = OpKind::wgmma;
    o.start_event = ev;
    if (record_graph_) {
      o.node = r_.graph.add_node();
      r_.graph.add_edge(r_.events[ev].node, o.node);
    }
    o.acc = acc;
    o.a = pa;
    o.b = pb;
    r_.ops.push_back(std::move(o));
    const int op = static_cast<int>(r_.ops.size()) - 1;
    assert(op == op_id);
    auto prev = last_wgmma_on_acc_.find(acc.buffer);
    if (record_graph_ && prev != last_wgmma_on_acc_.end())
      r_.graph.add_edge(r_.ops[prev->second].node, r_.ops[op].node);
    last_wgmma_on_acc_[acc.buffer] = op;
    wgmma_padding(a, ev);
    access(ev, op, pa, false);
    access(ev, op, pb, false);
    access(ev, op, acc, true);
    push_outstanding(op);
    return;
  }
  const bool in = a.kind == spec::AsyncKind::copy_in;
  const Place &src = a.src.place, &dst = a.dst.place;
  const Place &slot_place = in ? dst : src;
  int ev = new_event(s, slot_place.slot >= 0 ? std::optional(slot_place.slot) : std::nullopt);
  o.kind = in ? OpKind::copy_in : OpKind::copy_out;
  o.start_event = ev;
  if (record_graph_) {
    o.node = r_.graph.add_node();
    r_.graph.add_edge(r_.events[ev].node, o.node);
  }
  o.src = src;
  o.dst = dst;
  r_.ops.push_back(std::move(o));
  const int op = static_cast<int>(r_.ops.size()) - 1;
  assert(op == op_id);
  // A copy reads only what fits its destination (a partial block's
  // write-back reads the slot's in-bounds corner, not its padding).
  access(ev, op, a.src_read, false);
  access(ev, op, dst, true);
  if (any_padding_ && !padding_in(a.src_read).empty())
    r_.findings.push_back(
        {Rule::uninitialized_read, ev, slots_state_[{src.buffer, src.slot}].padded_by, -1, -1,
         "copies out " + program_.buffers[src.buffer].name +
             (src.slot >= 0 ? "[" + std::to_string(src.slot) + "]" : std::string()) +
             " with undefined data in it (the padding of a partial block, what a masked "
             "store kept of a slot nothing wrote, or what a store took from memory nothing "
             "wrote)" +
             (zero_filled_ ? std::string("; a partial block's zero padding (zeros=True) counts "
                                         "as undefined once the body makes more than zeros of it "
                                         "(exp(0), 0 + b) or a max or min takes it in")
                           : std::string())});
  push_outstanding(op);
  // The part of the destination the source does not fill is the padding of
  // a partial block: undefined, fine to compute on, wrong to write back; or,
  // with zeros=True, zeros (written).
  if (a.zero_fill && !(a.dst_filled == dst)) {
    zero_filled_ = true;
    clear_written(dst);
    add_written(dst);
    add_zeros(dst, box_minus(dst.box, a.dst_filled.box));
  } else {
    if (auto it = slots_state_.find({dst.buffer, dst.slot});
        it == slots_state_.end() || it->second.written.size() != 1 ||
        !(it->second.written[0] == a.dst_filled.box) || !it->second.padding.empty() ||
        !it->second.zeros.empty()) {
      clear_written(dst);
      add_written(a.dst_filled);
    }
    if (!(a.dst_filled == dst)) add_padding(dst, box_minus(dst.box, a.dst_filled.box));
  }
  // The box of a slot a copy reads out now holds that hbm region's block: an
  // accumulate into it written back elsewhere carries one block's result
  // into another's. A copy in holds what the program chose to load, stale
  // for nothing (`copy_in(C[0], Z)`, `Z = Z * 2`, `copy_out(Z, C[1])` is
  // a shift): it only clears the box's tag.
  auto retag = [](SlotState &st, const Box &b, const Place &from, int steps) {
    st.untag(b);
    st.tags.push_back({b, from, steps});
  };
  if (in) {
    slots_state_[{dst.buffer, dst.slot}].untag(dst.box);
    std::erase_if(slots_state_[{dst.buffer, dst.slot}].runs,
                  [&](const SlotState::Run &r) { return box_overlaps(r.box, dst.box); });
  } else {
    auto &st = slots_state_[{src.buffer, src.slot}];
    // A kernel scratch: the steps its value for each region accumulated
    // over (Machine::set_step_of).
    const bool by_steps = step_of_ && src.slot < 0;
    const auto tag_steps = [&](const Place &from, const Box &b) {
      int n = 0;
      for (const auto &t : st.tags)
        if (t.from == from && box_overlaps(t.box, b)) n = std::max(n, t.steps);
      return n;
    };
    for (const auto &x : st.pending)
      if (box_overlaps(x.box, src.box) && x.from.buffer == dst.buffer && !(x.from == dst) &&
          (!by_steps || tag_steps(x.from, x.box) >= 2)) {
        r_.findings.push_back({Rule::stale_read, x.event, ev, -1, -1,
                               by_steps ? "accumulates onto the value the scratch holds for another region, "
                                          "which it reduced over several grid steps: its result is written "
                                          "back to a different region"
                                        : "accumulates into a slot that holds another block: its result "
                                          "is written back to a different region"});
        break;
      }
    int steps = 0;
    if (by_steps) {
      for (const auto &r : st.runs)
        if (box_overlaps(r.box, src.box)) steps = std::max(steps, r.steps);
      // Copied out to the region it went to before: the same value, grown.
      steps += tag_steps(dst, src.box);
      std::erase_if(st.runs, [&](const SlotState::Run &r) { return box_overlaps(r.box, src.box); });
    }
    retag(st, src.box, dst, steps);
  }
}

void Machine::on_wait(const spec::Stmt &s, const std::optional<spec::StepRef> &waited,
                      const std::vector<int> &retired) {
  const std::optional<std::int64_t> slot =
      waited && waited->place.slot >= 0 ? std::optional(waited->place.slot) : std::nullopt;
  int ev = new_event(s, slot);
  for (int op : retired)
    retire(op, ev);
  // A write-back waited with keep=True leaves its block in the slot on
  // purpose, a value the program goes on with (a running sum copied out
  // after every step): what accumulates on it is no other block's stale data.
  if (const auto *c = std::get_if<spec::Copy>(&s.kind); c && c->keep && waited)
    slots_state_[{waited->place.buffer, waited->place.slot}].untag(waited->place.box);
}

void Machine::on_undefined(const spec::Stmt &, const spec::StepPlace &slot) {
  flow_.clobber(program_.buffers[slot.buffer].name);
  clear_written(slot);
  slots_state_[{slot.buffer, slot.slot}].runs.clear();
  slots_state_[{slot.buffer, slot.slot}].undefined_by = static_cast<int>(r_.events.size()) - 1;
}

Place Machine::whole(int buffer) const {
  Place p{buffer, -1, {}};
  for (std::int64_t n : stepper_->block_shape(buffer))
    p.box.push_back({0, n});
  return p;
}

void Machine::on_discard(const spec::Stmt &s, const spec::StepRef &target) {
  const spec::StepPlace &p = target.place;
  // An hbm array followed from its first `= undefined` on: what that leaves
  // out still holds the array's data.
  if (program_.buffers[p.buffer].kind == spec::BufferKind::hbm && undefined_hbm_.insert(p.buffer).second)
    add_written(whole(p.buffer));
  const int ev = new_event(s, p.slot >= 0 ? std::optional(p.slot) : std::nullopt);
  flow_.clobber(program_.buffers[p.buffer].name);
  clear_written(p);
  auto &st = slots_state_[{p.buffer, p.slot}];
  st.undefined_by = ev;
  st.untag(p.box); // (it holds no block there: nothing accumulated there is stale)
}

void Machine::on_fault(const spec::Stmt &s, spec::FaultKind kind, const std::string &message) {
  int ev = new_event(s, std::nullopt);
  if (kind == spec::FaultKind::wait_without_copy) {
    r_.findings.push_back({Rule::wait_without_copy, ev, -1, -1, -1, message});
    return;
  }
  if (kind == spec::FaultKind::semaphore_nonzero) { // (a count never waited)
    r_.findings.push_back({Rule::copy_never_waited, ev, -1, -1, -1, message});
    return;
  }
  // The access faults, as it does in the executor: the run ends at it, and
  // what is still in flight then is no leak of the program's.
  r_.findings.push_back({Rule::index_out_of_bounds, ev, -1, -1, -1, message});
  outstanding_.clear();
}

void Machine::on_end(const std::vector<int> &in_flight) {
  for (int op : in_flight) {
    const auto &o = r_.ops[op];
    r_.findings.push_back({Rule::copy_never_waited, o.start_event, -1, -1, -1,
                           o.kind == OpKind::wgmma
                               ? std::string("this wgmma is still in flight when the pipeline ends")
                               : std::string("this copy is never waited: it is still in flight "
                                             "when the pipeline ends")});
  }
  // An hbm array some `A[...] = undefined` left undefined is the pipeline's
  // result where it ends (whoever called it reads the array whole, as run's
  // oracle does): a part nothing wrote since is garbage there.
  for (int b : undefined_hbm_) {
    const std::vector<Box> rest = unwritten(whole(b));
    const auto st = slots_state_.find({b, -1});
    if (rest.empty() || st == slots_state_.end() || st->second.undefined_by < 0) continue;
    const int by = st->second.undefined_by;
    const std::string &name = program_.buffers[b].name;
    const std::string target = spec::print(std::get<spec::Assign>(r_.events[by].stmt->kind).target);
    r_.findings.push_back({Rule::output_not_covered, by, -1, -1, -1,
                           name + "[" + box_text(rest.front(), false) + "]" +
                               (rest.size() > 1 ? " (and " + std::to_string(rest.size() - 1) + " more part" +
                                                      (rest.size() > 2 ? "s" : "") + ")"
                                                : std::string()) +
                               " is still undefined when the pipeline ends: nothing wrote it after '" +
                               target + " = undefined' here, and the array is the pipeline's result"});
  }
}

void Machine::push_outstanding(int op) {
  outstanding_.push_back(op);
  if (outstanding_.size() > kPileUp && !r_.findings.empty()) throw PiledUp{};
}

RunResult Machine::run() {
  try {
    stepper_->run(*this);
  } catch (const spec::StepError &e) {
    throw Unsupported(e.what(), e.loc);
  } catch (const PiledUp &) {
    // (What is in flight here is not reported as never waited: the walk
    // did not reach the end.)
  }
  for (auto &f : r_.findings)
    if (f.other_op >= 0) f.other_end = r_.ops[f.other_op].end_event;
  // An accumulation into a slot left undefined by a write-back that is then
  // written back to another block is reported once, as the more precise
  // stale-read.
  std::set<int> stale;
  for (auto &f : r_.findings)
    if (f.rule == Rule::stale_read) stale.insert(f.anchor_event);
  if (!stale.empty())
    std::erase_if(r_.findings, [&](const RawFinding &f) {
      return f.rule == Rule::uninitialized_read && stale.count(f.anchor_event);
    });
  return std::move(r_);
}

std::string Machine::state_key(const std::map<std::pair<int, int>, std::int64_t> &shift) const {
  std::ostringstream os;
  auto put = [&](const Place &p) {
    os << p.buffer << '/' << p.slot << '(';
    bool hbm = program_.buffers[p.buffer].kind == spec::BufferKind::hbm;
    for (std::size_t d = 0; d < p.box.size(); ++d) {
      std::int64_t s = 0;
      if (hbm) {
        auto it = shift.find({p.buffer, static_cast<int>(d)});
        if (it != shift.end()) s = it->second;
      }
      os << p.box[d].first - s << ':' << p.box[d].second - s << ',';
    }
    os << ')';
  };
  os << "ops:";
  for (int op : outstanding_) {
    const auto &o = r_.ops[op];
    os << static_cast<int>(o.kind) << '@' << r_.events[o.start_event].stmt << '{';
    if (o.kind == OpKind::wgmma) {
      put(o.acc), put(o.a), put(o.b);
    } else {
      put(o.src), put(o.dst);
    }
    os << '}';
  }
  os << "|slots:";
  for (auto &[k, st] : slots_state_) {
    // A wholly undefined slot is as if never used: its stale-read tag can only
    // matter to an accumulate that reads it, which is an uninitialized read
    // either way, so it does not change the verdict.
    if (st.written.empty() && st.padding.empty() && st.zeros.empty() && st.pending.empty()) continue;
    os << k.first << '/' << k.second << '[';
    auto w = st.written;
    std::sort(w.begin(), w.end());
    for (auto &b : w) {
      for (auto &[lo, hi] : b)
        os << lo << ':' << hi << ',';
      os << ';';
    }
    for (const auto *set : {&st.padding, &st.zeros}) {
      os << (set == &st.padding ? "]p[" : "]z[");
      auto pad = *set;
      std::sort(pad.begin(), pad.end());
      for (auto &b : pad) {
        for (auto &[lo, hi] : b)
          os << lo << ':' << hi << ',';
        os << ';';
      }
    }
    // (Tags and pending accumulates in the order their boxes were last
    // tagged: two runs that reach the same state do so in the same order.)
    for (const auto &t : st.tags) {
      os << "]t";
      for (auto &[lo, hi] : t.box)
        os << lo << ':' << hi << ',';
      put(t.from);
      // (Past 2 steps a count decides nothing more.)
      if (step_of_) os << 's' << std::min(t.steps, 2);
    }
    for (const auto &r : st.runs) {
      os << "]r";
      for (auto &[lo, hi] : r.box)
        os << lo << ':' << hi << ',';
      os << std::min(r.steps, 2);
    }
    for (const auto &x : st.pending) {
      os << "p" << r_.events[x.event].stmt;
      for (auto &[lo, hi] : x.box)
        os << lo << ':' << hi << ',';
      put(x.from);
    }
  }
  return os.str();
}

} // namespace pipecheck::verifier::races
