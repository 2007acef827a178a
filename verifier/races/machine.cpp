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
  std::vector<Box> rel;
  for (auto &p : parts)
    if (p.size() == b.size() && box_overlaps(p, b)) rel.push_back(p);
  if (rel.empty()) return false;
  for (auto &p : rel) {
    bool all = true;
    for (std::size_t d = 0; d < b.size(); ++d)
      if (p[d].first > b[d].first || p[d].second < b[d].second) all = false;
    if (all) return true;
  }
  std::vector<std::vector<std::int64_t>> cuts(b.size());
  for (std::size_t d = 0; d < b.size(); ++d) {
    cuts[d] = {b[d].first, b[d].second};
    for (auto &p : rel) {
      if (p[d].first > b[d].first && p[d].first < b[d].second) cuts[d].push_back(p[d].first);
      if (p[d].second > b[d].first && p[d].second < b[d].second) cuts[d].push_back(p[d].second);
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
        if (p[d].first > cell[d].first || p[d].second < cell[d].second) in = false;
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

Machine::Machine(const spec::Program &p, spec::Env env) : program_(p), env_(std::move(env)) {
  for (auto &b : p.buffers) {
    std::vector<std::int64_t> shape;
    for (auto &e : b.shape)
      shape.push_back(eval(e, b.loc));
    block_shapes_.push_back(shape);
    Box box;
    for (auto v : shape)
      box.push_back({0, v});
    shapes_.push_back(box);
    slots_.push_back(b.slots ? eval(*b.slots, b.loc) : -1);
    if (b.slots && slots_.back() < 1) throw Unsupported("buffer '" + b.name + "' has no slots", b.loc);
  }
}

int Machine::buffer_index(const std::string &name) const {
  for (std::size_t i = 0; i < program_.buffers.size(); ++i)
    if (program_.buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

std::int64_t Machine::eval(const spec::Expr &e, const spec::Loc &l) const {
  auto v = spec::eval_int(e, env_);
  if (!v) throw Unsupported("cannot evaluate '" + spec::print(e) + "'", e.loc.line ? e.loc : l);
  return *v;
}

Place Machine::place_of(const spec::Expr &ref, const spec::Loc &l, std::vector<int> *kept) {
  const std::string &name = ref.name;
  int bi = buffer_index(name);
  if (bi < 0 || (ref.op != spec::Op::Ref && ref.op != spec::Op::Name))
    throw Unsupported("'" + spec::print(ref) + "' is not a buffer", l);
  const bool ring = slots_[bi] >= 0;
  // A ring is indexed as an array whose first dim is the slot, as in the executor.
  spec::Dims dims;
  if (ring) dims.push_back(slots_[bi]);
  dims.insert(dims.end(), block_shapes_[bi].begin(), block_shapes_[bi].end());
  const auto subs = spec::subscripts_of(
      ref, [&](const spec::Expr &e, bool) -> std::optional<std::int64_t> { return eval(e, l); });
  if (ring && (subs.empty() || subs[0].kind != spec::Subscript::Kind::index))
    throw Unsupported("slot ring '" + name + "' used without a slot", l);
  const spec::Subscripted r = spec::subscript(dims, subs);
  if (!r.ok()) {
    std::string what = "'" + spec::print(ref) + "': " + r.error + " of " + name + spec::dims_string(dims);
    if (r.out_of_bounds) throw OutOfBounds(what);
    throw Unsupported(what, l);
  }
  Place p;
  p.buffer = bi;
  std::size_t d = 0;
  if (ring) p.slot = r.dims[d++].lo;
  const std::size_t first = d;
  for (; d < r.dims.size(); ++d) {
    p.box.push_back({r.dims[d].lo, r.dims[d].hi});
    if (kept && r.dims[d].kept) kept->push_back(static_cast<int>(d - first));
  }
  return p;
}

void Machine::collect_reads(const spec::Expr &e, std::vector<Place> &out, const spec::Loc &l) {
  if (e.op == spec::Op::Ref || e.op == spec::Op::Name) {
    if (buffer_index(e.name) >= 0) {
      out.push_back(place_of(e, l));
      return;
    }
    if (e.op == spec::Op::Name) return;
  }
  for (auto &a : e.args)
    collect_reads(a, out, l);
}

int Machine::new_event(const spec::Stmt &s, std::optional<std::int64_t> slot) {
  if (r_.events.size() >= event_limit_)
    throw Unsupported("more than " + std::to_string(event_limit_) + " events", s.loc);
  Event ev;
  ev.stmt = &s;
  ev.iterations = loop_values_;
  ev.slot = slot;
  ev.node = r_.graph.add_node();
  if (last_node_ >= 0) r_.graph.add_edge(last_node_, ev.node);
  last_node_ = ev.node;
  r_.events.push_back(std::move(ev));
  return static_cast<int>(r_.events.size()) - 1;
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

void Machine::add_written(const Place &p) {
  auto kind = program_.buffers[p.buffer].kind;
  if (kind != spec::BufferKind::sram && kind != spec::BufferKind::smem) return;
  auto &st = slots_state_[{p.buffer, p.slot}];
  if (box_covered(p.box, st.written)) return;
  st.written.push_back(p.box);
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
  it->second.written = boxes_minus(it->second.written, p.box);
  it->second.padding = boxes_minus(it->second.padding, p.box);
}

std::vector<Box> Machine::padding_in(const Place &p) const {
  std::vector<Box> out;
  auto it = slots_state_.find({p.buffer, p.slot});
  if (it == slots_state_.end()) return out;
  for (auto &b : it->second.padding)
    if (b.size() == p.box.size() && box_overlaps(b, p.box)) out.push_back(box_intersection(b, p.box));
  return out;
}

namespace {

/// `b`, a part of `from`, moved into `to` dim by dim: where the two have one
/// extent it keeps its position, elsewhere (a broadcast, a reduction) it
/// spreads over the whole dim.
Box map_box(const Box &b, const Box &from, const Box &to) {
  if (b.size() != to.size() || from.size() != to.size()) return to;
  Box r = to;
  for (std::size_t d = 0; d < to.size(); ++d)
    if (from[d].second - from[d].first == to[d].second - to[d].first)
      r[d] = {b[d].first - from[d].first + to[d].first, b[d].second - from[d].first + to[d].first};
  return r;
}

} // namespace

void Machine::padding_flow(const spec::Expr &e, const Place &target, std::vector<Box> &out,
                           const spec::Loc &l) {
  using spec::Op;
  if ((e.op == Op::Ref || e.op == Op::Name) && buffer_index(e.name) >= 0) {
    const Place p = place_of(e, l);
    for (auto &b : padding_in(p))
      out.push_back(map_box(b, p.box, target.box));
    return;
  }
  if (e.op == Op::Name) {
    if (padded_locals_.count(e.name)) out.push_back(target.box);
    return;
  }
  if (e.op == Op::Call && e.name == "dot" && e.args.size() >= 2 && target.box.size() >= 2) {
    // dot(x, y): padding rows of x stay rows of the result, padding columns
    // of y stay columns; padding in the contracted dim reaches everything.
    for (int k = 0; k < 2; ++k) {
      const spec::Expr &x = e.args[k];
      if ((x.op == Op::Ref || x.op == Op::Name) && buffer_index(x.name) >= 0) {
        std::vector<int> kept;
        const Place p = place_of(x, l, &kept);
        for (auto &b : padding_in(p)) {
          if (kept.size() != 2) {
            out.push_back(target.box);
            continue;
          }
          const int contracted = kept[k == 0 ? 1 : 0], free = kept[k == 0 ? 0 : 1];
          if (b[contracted] != p.box[contracted]) {
            out.push_back(target.box);
            continue;
          }
          Box r = target.box;
          const std::size_t td = target.box.size() - (k == 0 ? 2 : 1);
          r[td] = {b[free].first - p.box[free].first + r[td].first,
                   b[free].second - p.box[free].first + r[td].first};
          out.push_back(std::move(r));
        }
      } else {
        std::vector<Box> inner;
        padding_flow(x, target, inner, l);
        if (!inner.empty()) out.push_back(target.box);
      }
    }
    return;
  }
  if (e.op == Op::Call && (e.name == "sum" || e.name == "max" || e.name == "transpose")) {
    std::vector<Box> inner;
    for (auto &a : e.args)
      padding_flow(a, target, inner, l);
    if (!inner.empty()) out.push_back(target.box);
    return;
  }
  for (auto &a : e.args)
    padding_flow(a, target, out, l);
}

void Machine::add_padding(const Place &p, const std::vector<Box> &boxes) {
  auto kind = program_.buffers[p.buffer].kind;
  if (boxes.empty() || (kind != spec::BufferKind::sram && kind != spec::BufferKind::smem)) return;
  auto &pad = slots_state_[{p.buffer, p.slot}].padding;
  for (auto &b : boxes)
    if (!box_empty(b) && !box_covered(b, pad)) pad.push_back(b);
}

namespace {
struct OpAccess {
  Place place;
  bool write;
  bool wgmma_operand;
  bool acc;
};
std::vector<OpAccess> op_accesses(const AsyncOp &o) {
  switch (o.kind) {
  case OpKind::copy_in:
  case OpKind::copy_out: return {{o.src, false, false, false}, {o.dst, true, false, false}};
  case OpKind::wgmma:
    return {{o.a, false, true, false}, {o.b, false, true, false}, {o.acc, true, false, true}};
  }
  return {};
}
} // namespace

void Machine::access(int event, int node, int op, const Place &p, bool write) {
  const auto &bufs = program_.buffers;
  bool is_wgmma = op >= 0 && r_.ops[op].kind == OpKind::wgmma;
  bool operand = is_wgmma && !write;
  bool acc_access = is_wgmma && write;
  auto kind = bufs[p.buffer].kind;
  if (!write && (kind == spec::BufferKind::sram || kind == spec::BufferKind::smem) && !covered(p)) {
    auto st = slots_state_.find({p.buffer, p.slot});
    const int undefined_at = st == slots_state_.end() ? -1 : st->second.undefined_by;
    std::string what =
        "reads " + bufs[p.buffer].name + (p.slot >= 0 ? "[" + std::to_string(p.slot) + "]" : std::string());
    r_.findings.push_back({"uninitialized-read", event, undefined_at, -1, -1,
                           undefined_at >= 0 ? what + ", whose contents the waited write-back at line " +
                                                   std::to_string(r_.events[undefined_at].stmt->loc.line) +
                                                   " left undefined (a slot keeps nothing for its next visit)"
                                             : what + ", which nothing has written"});
  }
  for (int o : outstanding_) {
    if (o == op) continue;
    const AsyncOp &other = r_.ops[o];
    for (auto &y : op_accesses(other)) {
      if (!(write || y.write) || !overlaps(y.place, p)) continue;
      if (acc_access && y.acc && other.kind == OpKind::wgmma) continue; // ordered on the accumulator
      bool async_operand = (y.wgmma_operand && write) || (operand && y.write);
      std::string what =
          bufs[p.buffer].name + (p.slot >= 0 ? "[" + std::to_string(p.slot) + "]" : std::string());
      std::string msg =
          async_operand ? "overwrites " + what + " while a wgmma still reads it (no wgmma_wait retired it)"
                        : (write ? "writes " : "reads ") + what + " while an asynchronous " +
                              (other.kind == OpKind::copy_in    ? std::string("copy into it")
                               : other.kind == OpKind::copy_out ? std::string("copy out of it")
                                                                : std::string("wgmma")) +
                              " is still in flight";
      RawFinding f{
          async_operand ? "async-operand-overwritten" : "slot-race", event, other.start_event, -1, -1, msg};
      f.other_op = o;
      (void)node;
      r_.findings.push_back(std::move(f));
      break;
    }
  }
}

void Machine::retire(int op, int event) {
  AsyncOp &o = r_.ops[op];
  o.end_event = event;
  r_.graph.add_edge(o.node, r_.events[event].node);
  outstanding_.erase(std::find(outstanding_.begin(), outstanding_.end(), op));
}

void Machine::exec_block(const spec::Block &b) {
  for (auto &s : b)
    exec(s);
}

void Machine::exec(const spec::Stmt &s) {
  using namespace spec;
  current_ = &s;
  if (auto *f = std::get_if<For>(&s.kind)) {
    std::int64_t lo = eval(f->lo, s.loc), hi = eval(f->hi, s.loc);
    auto saved = env_.find(f->var) != env_.end() ? std::optional(env_[f->var]) : std::nullopt;
    for (std::int64_t v = lo; v < hi; ++v) {
      env_[f->var] = v;
      loop_values_.push_back(v);
      if (hook_) hook_(*f, v, *this);
      exec_block(f->body);
      loop_values_.pop_back();
    }
    if (saved) env_[f->var] = *saved;
    return;
  }
  if (auto *i = std::get_if<If>(&s.kind)) {
    exec_block(eval(i->cond, s.loc) ? i->then_body : i->else_body);
    return;
  }
  if (auto *l = std::get_if<Let>(&s.kind); l && buffer_index(l->name) >= 0) {
    // `T = expr` on an unslotted buffer is a store into the whole buffer.
    Stmt as = s;
    as.kind = Assign{Expr::var(l->name, s.loc), false, l->value};
    exec_store(s, std::get<Assign>(as.kind));
    return;
  }
  if (auto *l = std::get_if<Let>(&s.kind)) {
    if (auto v = eval_int(l->value, env_)) {
      env_[l->name] = *v;
      padded_locals_.erase(l->name);
      tensor_locals_.erase(l->name);
      return;
    }
    std::vector<Place> reads;
    collect_reads(l->value, reads, s.loc);
    tensor_locals_[l->name] = true;
    env_.erase(l->name);
    {
      std::vector<Box> pads;
      Place whole; // a local has no place: any padding in it spreads
      padding_flow(l->value, whole, pads, s.loc);
      if (pads.empty())
        padded_locals_.erase(l->name);
      else
        padded_locals_.insert(l->name);
    }
    int ev = new_event(s, std::nullopt);
    for (auto &p : reads)
      access(ev, r_.events[ev].node, -1, p, false);
    return;
  }
  if (auto *a = std::get_if<Assign>(&s.kind)) {
    exec_store(s, *a);
    return;
  }
  exec_async(s);
}

void Machine::exec_store(const spec::Stmt &s, const spec::Assign &assign) {
  using namespace spec;
  const Assign *a = &assign;
  {
    Place target = place_of(a->target, s.loc);
    std::vector<Place> reads;
    collect_reads(a->value, reads, s.loc);
    bool self_read = a->accumulate;
    for (auto &p : reads)
      if (overlaps(p, target)) self_read = true;
    if (a->accumulate) reads.push_back(target);
    int ev = new_event(s, target.slot >= 0 ? std::optional(target.slot) : std::nullopt);
    int node = r_.events[ev].node;
    for (auto &p : reads)
      access(ev, node, -1, p, false);
    access(ev, node, -1, target, true);
    // The padding of a partial block (see exec_async) flows into the target:
    // reading it is no error, writing it back is.
    std::vector<Box> pads;
    padding_flow(a->value, target, pads, s.loc);
    if (a->accumulate)
      for (auto &b : padding_in(target))
        pads.push_back(b);
    {
      auto it = slots_state_.find({target.buffer, target.slot});
      if (it != slots_state_.end()) it->second.padding = boxes_minus(it->second.padding, target.box);
    }
    add_written(target);
    add_padding(target, pads);
    auto &st = slots_state_[{target.buffer, target.slot}];
    ++st.writes;
    if (self_read) {
      if (st.tag && st.pending_accumulate < 0) {
        st.pending_accumulate = ev;
        st.pending_tag = st.tag;
      }
    } else {
      st.tag.reset();
      st.pending_accumulate = -1;
      st.pending_tag.reset();
    }
  }
}

void Machine::exec_async(const spec::Stmt &s) {
  using namespace spec;
  if (auto *c = std::get_if<Copy>(&s.kind)) {
    switch (c->kind) {
    case CopyKind::in_start:
    case CopyKind::out_start: {
      bool in = c->kind == CopyKind::in_start;
      std::vector<int> src_kept, dst_kept;
      Place src = place_of(c->src, s.loc, &src_kept), dst = place_of(c->dst, s.loc, &dst_kept);
      // A copy replaces its whole destination ref; what the source does not
      // fill (spec::fit_copy) is undefined.
      spec::Dims src_shape, dst_shape;
      for (int k : src_kept)
        src_shape.push_back(src.box[k].second - src.box[k].first);
      for (int k : dst_kept)
        dst_shape.push_back(dst.box[k].second - dst.box[k].first);
      Place filled = dst, read = src;
      const spec::CopyFit fit = spec::fit_copy(src_shape, dst_shape);
      for (std::size_t d = 0; d < dst_kept.size(); ++d)
        filled.box[dst_kept[d]].second = filled.box[dst_kept[d]].first + fit.dst[d];
      for (std::size_t d = 0; d < src_kept.size(); ++d)
        read.box[src_kept[d]].second = read.box[src_kept[d]].first + fit.src[d];
      const Place &slot_place = in ? dst : src;
      int ev = new_event(s, slot_place.slot >= 0 ? std::optional(slot_place.slot) : std::nullopt);
      AsyncOp o;
      o.kind = in ? OpKind::copy_in : OpKind::copy_out;
      o.start_event = ev;
      o.node = r_.graph.add_node();
      r_.graph.add_edge(r_.events[ev].node, o.node);
      o.src = src;
      o.dst = dst;
      r_.ops.push_back(o);
      int op = static_cast<int>(r_.ops.size()) - 1;
      access(ev, o.node, op, src, false);
      access(ev, o.node, op, dst, true);
      if (!padding_in(read).empty())
        r_.findings.push_back({"uninitialized-read", ev, -1, -1, -1,
                               "copies out " + program_.buffers[src.buffer].name +
                                   (src.slot >= 0 ? "[" + std::to_string(src.slot) + "]" : std::string()) +
                                   " with the padding of a partial block in it, which holds garbage"});
      outstanding_.push_back(op);
      (in ? in_flight_in_ : in_flight_out_)[{slot_place.buffer, slot_place.slot}].push_back(op);
      // The part of the destination the source does not fill is the padding
      // of a partial block: undefined, fine to compute on, wrong to write back.
      clear_written(dst);
      add_written(filled);
      add_padding(dst, box_minus(dst.box, filled.box));
      if (in) {
        auto &st = slots_state_[{dst.buffer, dst.slot}];
        ++st.writes;
        st.tag = src;
        st.pending_accumulate = -1;
        st.pending_tag.reset();
      } else {
        auto &st = slots_state_[{src.buffer, src.slot}];
        r_.ops[op].slot_writes = st.writes;
        if (st.pending_accumulate >= 0 && st.pending_tag && st.pending_tag->buffer == dst.buffer &&
            !(*st.pending_tag == dst))
          r_.findings.push_back({"stale-read", st.pending_accumulate, ev, -1, -1,
                                 "accumulates into a slot that holds another block: its result "
                                 "is written back to a different region"});
        st.tag = dst;
        st.pending_accumulate = -1;
        st.pending_tag.reset();
      }
      return;
    }
    case CopyKind::in_wait:
    case CopyKind::out_wait: {
      bool in = c->kind == CopyKind::in_wait;
      Place p = place_of(c->waited(), s.loc);
      int ev = new_event(s, p.slot >= 0 ? std::optional(p.slot) : std::nullopt);
      auto &q = (in ? in_flight_in_ : in_flight_out_)[{p.buffer, p.slot}];
      if (q.empty()) {
        r_.findings.push_back({"wait-without-copy", ev, -1, -1, -1,
                               std::string("waits for a copy ") + (in ? "into " : "out of ") +
                                   program_.buffers[p.buffer].name +
                                   (p.slot >= 0 ? "[" + std::to_string(p.slot) + "]" : "") +
                                   " but none is in flight: this hangs"});
        return;
      }
      int op = q.front();
      q.pop_front();
      retire(op, ev);
      // Strict slot contents: the retired write-back leaves its slot
      // undefined, unless another write-back out of it is still in flight or
      // something wrote the slot after this one started (a copy into it, or
      // a store that races with it and is reported as such).
      if (auto &st = slots_state_[{p.buffer, p.slot}];
          !in && q.empty() && st.writes == r_.ops[op].slot_writes) {
        clear_written(p);
        st.undefined_by = ev;
      }
      return;
    }
    }
  }
  if (auto *w = std::get_if<Wgmma>(&s.kind)) {
    Place acc = place_of(w->acc, s.loc), a = place_of(w->a, s.loc), b = place_of(w->b, s.loc);
    int ev = new_event(s, a.slot >= 0 ? std::optional(a.slot) : std::nullopt);
    AsyncOp o;
    o.kind = OpKind::wgmma;
    o.start_event = ev;
    o.node = r_.graph.add_node();
    r_.graph.add_edge(r_.events[ev].node, o.node);
    o.acc = acc;
    o.a = a;
    o.b = b;
    r_.ops.push_back(o);
    int op = static_cast<int>(r_.ops.size()) - 1;
    auto prev = last_wgmma_on_acc_.find(acc.buffer);
    if (prev != last_wgmma_on_acc_.end()) r_.graph.add_edge(r_.ops[prev->second].node, o.node);
    last_wgmma_on_acc_[acc.buffer] = op;
    access(ev, o.node, op, a, false);
    access(ev, o.node, op, b, false);
    access(ev, o.node, op, acc, true);
    outstanding_.push_back(op);
    wgmmas_.push_back(op);
    return;
  }
  if (auto *w = std::get_if<WgmmaWait>(&s.kind)) {
    std::int64_t n = eval(w->n, s.loc);
    int ev = new_event(s, std::nullopt);
    while (static_cast<std::int64_t>(wgmmas_.size()) > std::max<std::int64_t>(n, 0)) {
      retire(wgmmas_.front(), ev);
      wgmmas_.pop_front();
    }
    return;
  }
}

RunResult Machine::run() {
  try {
    exec_block(program_.body);
  } catch (const OutOfBounds &e) {
    // The access faults, as it does in the executor: the run ends at it, and
    // what is still in flight then is no leak of the program's.
    int ev = new_event(*current_, std::nullopt);
    r_.findings.push_back({"index-out-of-bounds", ev, -1, -1, -1, e.what()});
    outstanding_.clear();
  }
  for (int op : outstanding_) {
    const auto &o = r_.ops[op];
    r_.findings.push_back({"copy-never-waited", o.start_event, -1, -1, -1,
                           o.kind == OpKind::wgmma
                               ? std::string("this wgmma is still in flight when the pipeline ends")
                               : std::string("this copy is never waited: it is still in flight "
                                             "when the pipeline ends")});
  }
  for (auto &f : r_.findings)
    if (f.other_op >= 0) f.other_end = r_.ops[f.other_op].end_event;
  // An accumulation into a slot left undefined by a write-back that is then
  // written back to another block is reported once, as the more precise
  // stale-read.
  std::set<int> stale;
  for (auto &f : r_.findings)
    if (f.rule == "stale-read") stale.insert(f.anchor_event);
  if (!stale.empty())
    std::erase_if(r_.findings, [&](const RawFinding &f) {
      return f.rule == "uninitialized-read" && stale.count(f.anchor_event);
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
    os << k.first << '/' << k.second << '[';
    auto w = st.written;
    std::sort(w.begin(), w.end());
    for (auto &b : w) {
      for (auto &[lo, hi] : b)
        os << lo << ':' << hi << ',';
      os << ';';
    }
    os << "]p[";
    auto pad = st.padding;
    std::sort(pad.begin(), pad.end());
    for (auto &b : pad) {
      for (auto &[lo, hi] : b)
        os << lo << ':' << hi << ',';
      os << ';';
    }
    os << "]t";
    if (st.tag) put(*st.tag);
    if (st.pending_accumulate >= 0) {
      os << "p" << r_.events[st.pending_accumulate].stmt;
      if (st.pending_tag) put(*st.pending_tag);
    }
  }
  return os.str();
}

} // namespace pipecheck::verifier::races
