#include "executor/program_runner.hpp"

#include "executor/footprint.hpp"
#include "spec/bind.hpp"
#include "spec/place.hpp"
#include "spec/step.hpp"

#include <algorithm>
#include <cassert>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace pipecheck::executor {

using spec::Expr;

std::optional<Shape> buffer_array_shape(const spec::Buffer &b, const spec::Env &env) {
  Shape s;
  if (b.slots) {
    auto n = spec::eval_int(*b.slots, env);
    if (!n || *n < 1) return std::nullopt;
    s.push_back(*n);
  }
  for (const auto &d : b.shape) {
    auto n = spec::eval_int(d, env);
    if (!n || *n < 0) return std::nullopt;
    s.push_back(*n);
  }
  return s;
}

namespace {

bool mentions_grid_calls(const Expr &e) {
  if (e.op == spec::Op::Call && (e.name == "program_id" || e.name == "num_programs")) return true;
  for (const auto &a : e.args)
    if (mentions_grid_calls(a)) return true;
  return false;
}

bool mentions_grid_calls(const spec::Block &b) {
  for (const auto &s : b) {
    bool found = false;
    std::visit(
        [&](const auto &k) {
          using K = std::decay_t<decltype(k)>;
          if constexpr (std::is_same_v<K, spec::Assign>)
            found = mentions_grid_calls(k.target) || mentions_grid_calls(k.value);
          else if constexpr (std::is_same_v<K, spec::Let>)
            found = mentions_grid_calls(k.value);
          else if constexpr (std::is_same_v<K, spec::If>)
            found = mentions_grid_calls(k.cond) || mentions_grid_calls(k.then_body) ||
                    mentions_grid_calls(k.else_body);
          else if constexpr (std::is_same_v<K, spec::For>)
            found = mentions_grid_calls(k.lo) || mentions_grid_calls(k.hi) || mentions_grid_calls(k.body);
          else if constexpr (std::is_same_v<K, spec::Copy>)
            found = mentions_grid_calls(k.src) || mentions_grid_calls(k.dst) || mentions_grid_calls(k.offset);
          else if constexpr (std::is_same_v<K, spec::Wgmma>)
            found = mentions_grid_calls(k.acc) || mentions_grid_calls(k.a) || mentions_grid_calls(k.b);
          else if constexpr (std::is_same_v<K, spec::WgmmaWait>)
            found = mentions_grid_calls(k.n);
          else if constexpr (std::is_same_v<K, spec::Dma>)
            found = mentions_grid_calls(k.src) || mentions_grid_calls(k.dst) || mentions_grid_calls(k.sem) ||
                    mentions_grid_calls(k.n);
        },
        s.kind);
    if (found) return true;
  }
  return false;
}

constexpr std::int64_t kAtWait = std::numeric_limits<std::int64_t>::max();

[[noreturn]] void bad(spec::Loc loc, const std::string &msg) {
  throw ExecError(ExecError::Kind::bad_input, loc, msg);
}

Shape squeezed(const Shape &s) {
  Shape r;
  for (auto d : s)
    if (d != 1) r.push_back(d);
  return r;
}

class Runner : public Memory, private spec::StepConsumer {
public:
  Runner(const spec::Program &p, const spec::Env &env, const BufferMap &buffers, const ProgramRunConfig &cfg)
      : program_(p), buffers_(buffers), cfg_(cfg),
        engine_(cfg.mode == DmaMode::synchronous ? 0 : cfg.dma_threads, clock_), interp_(*this),
        rng_(cfg.seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {
    interp_.env = env;
    for (const auto &b : p.buffers)
      if (b.slots) slotted_.insert(b.name);
  }

  ProgramOutcome run() {
    if (cfg_.launch_snapshot)
      for (const auto &b : program_.buffers)
        if (b.kind == spec::BufferKind::hbm)
          if (HostArray *a = array(b.name)) snapshot_[a] = a->clone();
    try {
      // The program's semantics are the stepper's (spec/step.hpp), the race
      // checker's too; this runner gives its events effect on host arrays.
      spec::Stepper stepper(program_, *body_, interp_.env);
      stepper.run(*this);
    } catch (const spec::StepError &e) {
      out_.error = ExecError(ExecError::Kind::bad_input, e.loc, e.what());
    } catch (const ExecError &e) {
      out_.error = e;
      // A kernel's lowered program names its grid point pid0, pid1, ...
      // (spec/lower.hpp): a fault says where, as check does.
      std::vector<std::int64_t> point;
      for (std::size_t a = 0;; ++a) {
        auto it = interp_.env.find("pid" + std::to_string(a));
        if (it == interp_.env.end()) break;
        point.push_back(it->second);
      }
      if (e.kind == ExecError::Kind::fault && !point.empty())
        out_.error = ExecError(e.kind, e.loc,
                               std::string(e.what()) + " (at grid point " + spec::format_tuple(point) + ")");
    }
    engine_.drain();
    for (auto &[op, t] : transfers_) // never waited, in start order
      account(*t);
    transfers_.clear();
    out_.wall_ns = clock_.now_ns();
    return std::move(out_);
  }

  HostArray *array(const std::string &n) override {
    auto it = buffers_.find(n);
    return it == buffers_.end() ? nullptr : it->second;
  }
  void before_read(const View &v) override { order(v, false); }
  void before_write(const View &v) override { order(v, true); }

  const spec::Block *body_ = nullptr;

private:
  std::uint64_t event_string_bytes_ = 0;

  struct PendingWgmma {
    int op;
    View acc, a, b;
    spec::Loc loc;
    std::int64_t due;
    bool trans_a = false, trans_b = false;
  };

  // A copy's statistics and timeline entry, once it is done with.
  void account(const Transfer &t) {
    if (t.thread < 0) return;
    ++out_.copies;
    out_.bytes_copied += t.bytes();
    record({EventKind::transfer, t.loc, t.buffer, t.slot, t.thread, t.t_start_ns, t.t_end_ns, t.label});
  }

  void order(const View &v, bool write) {
    const auto t0 = clock_.now_ns();
    if (engine_.order_access(v, write))
      record({EventKind::stall, cur_loc_, v.array->name(), slot_of(v), 0, t0, clock_.now_ns(),
              "waits for an in-flight copy of " + v.to_string()});
  }

  void record(Event e) {
    // The vector doubles when full: count the capacity it would grow to.
    auto &ev = out_.events;
    const std::uint64_t cap =
        ev.size() < ev.capacity() ? ev.capacity() : std::max<std::size_t>(1, 2 * ev.size());
    const std::uint64_t strings = event_string_bytes_ + footprint::heap(e);
    if (ev.size() >= cfg_.max_events || cap * sizeof(Event) + strings > cfg_.max_event_bytes) {
      out_.events_truncated = true;
      return;
    }
    event_string_bytes_ = strings;
    ev.push_back(std::move(e));
  }

  std::int64_t slot_of(const View &v) const {
    if (!slotted_.count(v.array->name()) || v.box.lo.empty()) return -1;
    if (v.box.hi[0] - v.box.lo[0] != 1) return -1;
    return v.box.lo[0];
  }

  /// The view of a place the stepper resolved (a ring's array has the slot first).
  View view_of(const spec::StepPlace &p, const std::vector<int> &kept) {
    HostArray *a = array(program_.buffers[p.buffer].name);
    assert(a);
    View v = View::whole(*a);
    const int off = p.slot >= 0 ? 1 : 0;
    if (off) {
      v.box.lo[0] = p.slot;
      v.box.hi[0] = p.slot + 1;
    }
    for (std::size_t d = 0; d < p.box.size(); ++d) {
      v.box.lo[d + off] = p.box[d].first;
      v.box.hi[d + off] = p.box[d].second;
    }
    v.kept.clear();
    for (int k : kept)
      v.kept.push_back(k + off);
    return v;
  }
  View view_of(const spec::StepRef &r) { return view_of(r.place, r.kept); }

  std::uint64_t next_random() {
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  /// When an operation started now takes effect (a tick, or kAtWait).
  std::int64_t due_tick() {
    switch (cfg_.mode) {
    case DmaMode::eager:
    case DmaMode::synchronous: return tick_;
    case DmaMode::on_wait: return kAtWait;
    case DmaMode::random: break;
    }
    switch (next_random() % 3) {
    case 0: return tick_;
    case 1: return kAtWait;
    default: return tick_ + 1 + static_cast<std::int64_t>(next_random() % 12);
    }
  }

  void tick() {
    ++tick_;
    if (cfg_.mode != DmaMode::random) return;
    for (std::size_t k = 0; k < pending_.size();) {
      if (pending_[k].second <= tick_) {
        Transfer *t = pending_[k].first;
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(k));
        submit(*t);
      } else {
        ++k;
      }
    }
    while (!wgmmas_.empty() && wgmmas_.front().due <= tick_)
      retire_wgmma();
  }

  void submit(Transfer &t) {
    const auto t0 = clock_.now_ns();
    if (engine_.submit(t) > 0)
      record({EventKind::stall, t.loc, t.buffer, t.slot, 0, t0, clock_.now_ns(),
              "orders " + t.label + " after a conflicting in-flight copy"});
    if (cfg_.mode == DmaMode::synchronous) engine_.complete(t);
  }

  // ---------------------------------------------------------- the stepper's events

  void on_int_let(const spec::Stmt &, const std::string &name) override { interp_.locals.erase(name); }

  void on_compute(const spec::Stmt &s, const std::vector<spec::StepRef> &,
                  const std::optional<spec::StepRef> &write) override {
    cur_loc_ = s.loc;
    const auto t0 = clock_.now_ns();
    interp_.exec(s);
    if (const auto *a = std::get_if<spec::Assign>(&s.kind))
      record({EventKind::compute, s.loc, a->target.name, write ? write->place.slot : -1, 0, t0,
              clock_.now_ns(), a->accumulate ? "+=" : "="});
    else
      record({EventKind::compute, s.loc, "", -1, 0, t0, clock_.now_ns(),
              std::get<spec::Let>(s.kind).name + " ="});
    tick();
  }

  void on_start(const spec::Stmt &s, int op, const spec::AsyncStart &a) override {
    cur_loc_ = s.loc;
    if (a.kind == spec::AsyncKind::wgmma) {
      wgmma_loc_[op] = s.loc;
      PendingWgmma w{op, view_of(a.acc), view_of(a.a), view_of(a.b), s.loc, 0, a.trans_a, a.trans_b};
      if (w.a.shape().size() != 2 || w.b.shape().size() != 2) bad(s.loc, "wgmma takes 2-D operands");
      w.due = due_tick();
      const auto now = clock_.now_ns();
      record({EventKind::wgmma_issue, s.loc, w.a.array->name(), slot_of(w.a), 0, now, now,
              w.acc.to_string() + " += " + w.a.to_string() + " @ " + w.b.to_string()});
      wgmmas_.push_back(std::move(w));
      if (cfg_.mode == DmaMode::synchronous) retire_wgmma();
      tick();
      return;
    }
    const bool in = a.kind == spec::AsyncKind::copy_in;
    View src = view_of(a.src), dst = view_of(a.dst);
    if (src.dtype() != dst.dtype())
      bad(s.loc, "copy from " + src.to_string() + " (" + spec::to_string(src.dtype()) + ") to " +
                     dst.to_string() + " (" + spec::to_string(dst.dtype()) + "): dtypes differ");
    // A partial edge block: the in-bounds part of the array moves to (or
    // from) the leading corner of the window (spec::fit_copy). A copy
    // replaces its whole destination ref: what the source does not fill is
    // poison (strict slot contents), so relying on it fails visibly; with
    // zeros=True (Mosaic GPU's TMA fetch) it is zeros.
    if (!(a.dst_filled == a.dst.place)) {
      order(dst, true);
      if (a.zero_fill)
        dst.fill_zero();
      else
        dst.fill_poison();
      dst = view_of(a.dst_filled, a.dst.kept);
    }
    src = view_of(a.src_read, a.src.kept);
    if (in && cfg_.launch_snapshot)
      if (auto it = snapshot_.find(src.array); it != snapshot_.end()) src.array = it->second.get();
    if (squeezed(src.shape()) != squeezed(dst.shape()))
      bad(s.loc, "copy from " + src.to_string() + " of shape " + shape_string(src.shape()) + " to " +
                     dst.to_string() + " of shape " + shape_string(dst.shape()) + ": shapes differ");
    auto owned = std::make_unique<Transfer>();
    Transfer &t = *owned;
    transfers_.emplace(op, std::move(owned));
    t.src = src;
    t.dst = dst;
    t.loc = s.loc;
    t.is_in = in;
    // Launch snapshot: a program's write-back carries only what it changed
    // of what it read, so it does not undo another program's stores.
    if (!in && cfg_.launch_snapshot)
      if (auto it = snapshot_.find(dst.array); it != snapshot_.end()) {
        t.changed_from = dst;
        t.changed_from->array = it->second.get();
      }
    const spec::StepPlace &side = in ? a.dst.place : a.src.place;
    t.buffer = program_.buffers[side.buffer].name;
    t.slot = side.slot;
    t.label = src.to_string() + " -> " + dst.to_string();
    const auto now = clock_.now_ns();
    record({EventKind::copy_start, s.loc, t.buffer, t.slot, 0, now, now, t.label});
    const std::int64_t due = due_tick();
    if (due <= tick_)
      submit(t);
    else
      pending_.emplace_back(&t, due);
    tick();
  }

  void on_wait(const spec::Stmt &s, const std::optional<spec::StepRef> &waited,
               const std::vector<int> &retired) override {
    cur_loc_ = s.loc;
    const auto t0 = clock_.now_ns();
    if (!waited && !std::holds_alternative<spec::WgmmaWait>(s.kind)) {
      // semaphore_wait: the stepper keeps the count; nothing to move.
      tick();
      return;
    }
    if (!waited) {
      // wgmma_wait(n): the retired wgmmas take effect now if they have not yet.
      for (int op : retired) {
        wgmma_loc_.erase(op);
        while (!wgmmas_.empty() && wgmmas_.front().op <= op)
          retire_wgmma();
      }
      record({EventKind::wgmma_wait, s.loc, "", -1, 0, t0, clock_.now_ns(),
              "wgmma_wait(" + std::to_string(interp_.eval_int(std::get<spec::WgmmaWait>(s.kind).n)) + ")"});
      tick();
      return;
    }
    for (int op : retired) {
      auto it = transfers_.find(op);
      if (it == transfers_.end()) continue;
      Transfer *t = it->second.get();
      if (!t->submitted) {
        for (auto it = pending_.begin(); it != pending_.end(); ++it)
          if (it->first == t) {
            pending_.erase(it);
            break;
          }
        submit(*t);
      }
      engine_.complete(*t);
      record({EventKind::copy_wait, s.loc, program_.buffers[waited->place.buffer].name, waited->place.slot, 0,
              t0, clock_.now_ns(), t->label});
      // Retired: the record goes, so a long run's memory does not grow with its copies.
      account(*t);
      transfers_.erase(it);
    }
    tick();
  }

  void on_undefined(const spec::Stmt &s, const spec::StepPlace &slot) override {
    // Strict slot contents: a retired write-back leaves its slot poison —
    // Pallas promises nothing about a buffer's contents at its next visit.
    cur_loc_ = s.loc;
    std::vector<int> all(slot.box.size());
    for (std::size_t d = 0; d < all.size(); ++d)
      all[d] = static_cast<int>(d);
    const View w = view_of(slot, all);
    order(w, true);
    w.fill_poison();
  }

  void on_fault(const spec::Stmt &s, spec::FaultKind, const std::string &message) override {
    throw ExecError(ExecError::Kind::fault, s.loc, message);
  }

  void retire_wgmma() {
    PendingWgmma w = std::move(wgmmas_.front());
    wgmmas_.pop_front();
    const auto t0 = clock_.now_ns();
    order(w.a, false);
    order(w.b, false);
    order(w.acc, true);
    Value c = load(w.acc);
    const Value p = dot(load(w.a), load(w.b), w.loc, {w.trans_a, w.trans_b, std::nullopt});
    Value sum = binary(BinOp::add, std::move(c), p, w.loc);
    store(sum, w.acc, w.loc);
    record({EventKind::wgmma_exec, w.loc, w.a.array->name(), slot_of(w.a), 0, t0, clock_.now_ns(),
            w.acc.to_string() + " += " + w.a.to_string() + " @ " + w.b.to_string()});
  }

  void on_end(const std::vector<int> &in_flight) override {
    const bool effect = cfg_.mode == DmaMode::eager || cfg_.mode == DmaMode::synchronous;
    for (auto &[t, due] : pending_) {
      (void)due;
      if (effect) submit(*t);
    }
    pending_.clear();
    std::optional<spec::Loc> leaked_at;
    std::string leaked;
    std::size_t wgmmas_in_flight = 0;
    std::optional<spec::Loc> first_wgmma;
    for (int op : in_flight) {
      auto it = transfers_.find(op);
      if (it == transfers_.end()) {
        if (!wgmmas_in_flight++) first_wgmma = wgmma_loc_[op];
        continue;
      }
      Transfer *t = it->second.get();
      std::ostringstream os;
      os << "line " << t->loc.line << ": copy " << t->label << " was never waited";
      if (!t->submitted) os << "; in " << to_string(cfg_.mode) << " mode it never took effect";
      out_.notes.push_back(os.str());
      if (!leaked_at || t->loc.line < leaked_at->line) {
        leaked_at = t->loc;
        leaked = "copy " + t->label;
      }
    }
    if (wgmmas_in_flight > 0) {
      std::ostringstream os;
      os << wgmmas_in_flight << " wgmma(s) still in flight at the end";
      if (!effect && !wgmmas_.empty())
        os << "; in " << to_string(cfg_.mode) << " mode they never took effect";
      out_.notes.push_back(os.str());
      if (!leaked_at && first_wgmma) {
        leaked_at = first_wgmma;
        leaked = "a wgmma";
      }
    }
    if (effect) {
      while (!wgmmas_.empty())
        retire_wgmma();
    } else {
      wgmmas_.clear();
    }
    // A kernel that ends with an operation in flight is broken whatever the
    // timing: on hardware its semaphore is never waited and its data may not land.
    if (leaked_at)
      throw ExecError(ExecError::Kind::fault, *leaked_at,
                      leaked + " is still in flight when the program ends (never waited)");
  }

  const spec::Program &program_;
  const BufferMap &buffers_;
  std::map<const HostArray *, std::unique_ptr<HostArray>> snapshot_; ///< launch_snapshot: hbm as it started
  ProgramRunConfig cfg_;
  Clock clock_;
  // The copies started and not yet waited, by op (the engine points into
  // them until they complete; a waited one is accounted for and freed).
  std::map<int, std::unique_ptr<Transfer>> transfers_;
  DmaEngine engine_;
  Interp interp_;
  std::uint64_t rng_;
  std::set<std::string> slotted_;
  std::map<int, spec::Loc> wgmma_loc_; // wgmma op -> its start, while not retired
  std::vector<std::pair<Transfer *, std::int64_t>> pending_;
  std::deque<PendingWgmma> wgmmas_; // issued, not yet taken effect
  std::int64_t tick_ = 0;
  spec::Loc cur_loc_;
  ProgramOutcome out_;
};

} // namespace

ProgramOutcome run_program(const spec::Program &program, const spec::Env &env, const BufferMap &buffers,
                           const ProgramRunConfig &cfg) {
  for (const auto &b : program.buffers) {
    auto it = buffers.find(b.name);
    assert(it != buffers.end() && it->second);
    (void)it;
  }
  Runner r(program, env, buffers, cfg);
  // Lowered and hand-written programs name no grid calls: run them in place
  // rather than holding a second copy of a (possibly long) unrolled body.
  spec::Block rewritten;
  if (mentions_grid_calls(program.body)) {
    rewritten = rewrite_grid_calls(program.body);
    r.body_ = &rewritten;
  } else {
    r.body_ = &program.body;
  }
  return r.run();
}

} // namespace pipecheck::executor
