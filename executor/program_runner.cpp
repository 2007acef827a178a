#include "executor/program_runner.hpp"

#include "executor/footprint.hpp"
#include "spec/place.hpp"

#include <algorithm>
#include <cassert>
#include <deque>
#include <limits>
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
            found = mentions_grid_calls(k.src) || mentions_grid_calls(k.dst);
          else if constexpr (std::is_same_v<K, spec::Wgmma>)
            found = mentions_grid_calls(k.acc) || mentions_grid_calls(k.a) || mentions_grid_calls(k.b);
          else if constexpr (std::is_same_v<K, spec::WgmmaWait>)
            found = mentions_grid_calls(k.n);
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

/// Narrows `v` to `extents` on its kept dims (spec::fit_copy's leading corner).
void narrow(View &v, const Shape &extents) {
  for (std::size_t d = 0; d < extents.size() && d < v.kept.size(); ++d) {
    const int ad = v.kept[d];
    v.box.hi[ad] = v.box.lo[ad] + extents[d];
  }
}

void fill_poison(const View &v) {
  v.for_each_run([&](std::int64_t off, std::int64_t n) { v.array->fill_poison(off, n); });
}

class Runner : public Memory {
public:
  Runner(const spec::Program &p, const spec::Env &env, const BufferMap &buffers, const ProgramRunConfig &cfg)
      : buffers_(buffers), cfg_(cfg), engine_(cfg.mode == DmaMode::synchronous ? 0 : cfg.dma_threads, clock_),
        interp_(*this), rng_(cfg.seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {
    interp_.env = env;
    for (const auto &b : p.buffers) {
      if (b.slots) slotted_.insert(b.name);
      if (b.kind == spec::BufferKind::sram || b.kind == spec::BufferKind::smem) scratchpad_.insert(b.name);
    }
  }

  ProgramOutcome run() {
    try {
      exec(*body_);
      finish();
    } catch (const ExecError &e) {
      out_.error = e;
    }
    engine_.drain();
    for (const Transfer &t : transfers_) {
      if (t.thread < 0) continue;
      ++out_.copies;
      out_.bytes_copied += t.bytes();
      record({EventKind::transfer, t.loc, t.buffer, t.slot, t.thread, t.t_start_ns, t.t_end_ns, t.label});
    }
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

  struct Key {
    bool in;
    std::string buffer;
    std::int64_t slot;
    auto operator<=>(const Key &) const = default;
  };
  struct PendingWgmma {
    View acc, a, b;
    spec::Loc loc;
    std::int64_t due;
  };

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

  void exec(const spec::Block &b) {
    for (const auto &s : b)
      exec(s);
  }

  void exec(const spec::Stmt &s) {
    cur_loc_ = s.loc;
    std::visit([&](const auto &k) { exec_kind(s, k); }, s.kind);
  }

  void exec_kind(const spec::Stmt &s, const spec::Assign &a) {
    const auto t0 = clock_.now_ns();
    interp_.exec(s);
    std::string buf = a.target.name;
    std::int64_t slot = -1;
    if (array(buf)) {
      slot = slot_of(interp_.view_of(a.target));
      ++writes_[{buf, slot}];
    }
    record({EventKind::compute, s.loc, buf, slot, 0, t0, clock_.now_ns(), a.accumulate ? "+=" : "="});
    tick();
  }
  void exec_kind(const spec::Stmt &s, const spec::Let &l) {
    const auto t0 = clock_.now_ns();
    const bool is_int = spec::eval_int(l.value, interp_.env).has_value();
    interp_.exec(s);
    if (array(l.name)) ++writes_[{l.name, -1}];
    if (!is_int) {
      record({EventKind::compute, s.loc, "", -1, 0, t0, clock_.now_ns(), l.name + " ="});
      tick();
    }
  }
  void exec_kind(const spec::Stmt &, const spec::If &i) {
    exec(interp_.eval_int(i.cond) != 0 ? i.then_body : i.else_body);
  }
  void exec_kind(const spec::Stmt &, const spec::For &f) {
    const std::int64_t lo = interp_.eval_int(f.lo), hi = interp_.eval_int(f.hi);
    for (std::int64_t v = lo; v < hi; ++v) {
      interp_.env[f.var] = v;
      exec(f.body);
    }
  }
  void exec_kind(const spec::Stmt &s, const spec::Copy &c) {
    const bool in = c.kind == spec::CopyKind::in_start || c.kind == spec::CopyKind::in_wait;
    if (c.kind == spec::CopyKind::in_start || c.kind == spec::CopyKind::out_start) {
      View src = interp_.view_of(c.src);
      View dst = interp_.view_of(c.dst);
      if (src.dtype() != dst.dtype())
        bad(s.loc, "copy from " + src.to_string() + " (" + spec::to_string(src.dtype()) + ") to " +
                       dst.to_string() + " (" + spec::to_string(dst.dtype()) + "): dtypes differ");
      // A partial edge block: the in-bounds part of the array moves to (or
      // from) the leading corner of the window (spec::fit_copy). A copy
      // replaces its whole destination ref: what the source does not fill is
      // poison (strict slot contents), so relying on it fails visibly.
      const spec::CopyFit fit = spec::fit_copy(src.shape(), dst.shape());
      if (fit.dst != dst.shape()) {
        order(dst, true);
        fill_poison(dst);
        narrow(dst, fit.dst);
      }
      narrow(src, fit.src);
      if (squeezed(src.shape()) != squeezed(dst.shape()))
        bad(s.loc, "copy from " + src.to_string() + " of shape " + shape_string(src.shape()) + " to " +
                       dst.to_string() + " of shape " + shape_string(dst.shape()) + ": shapes differ");
      Transfer &t = transfers_.emplace_back();
      t.src = src;
      t.dst = dst;
      t.loc = s.loc;
      t.is_in = in;
      const View &side = in ? dst : src;
      t.buffer = side.array->name();
      t.slot = slot_of(side);
      t.label = src.to_string() + " -> " + dst.to_string();
      outstanding_[Key{in, t.buffer, t.slot}].push_back(&t);
      if (in)
        ++writes_[{t.buffer, t.slot}];
      else
        t.slot_writes = writes_[{t.buffer, t.slot}];
      const auto now = clock_.now_ns();
      record({EventKind::copy_start, s.loc, t.buffer, t.slot, 0, now, now, t.label});
      const std::int64_t due = due_tick();
      if (due <= tick_)
        submit(t);
      else
        pending_.emplace_back(&t, due);
      tick();
      return;
    }
    const View w = interp_.view_of(c.waited());
    const Key key{in, w.array->name(), slot_of(w)};
    auto &q = outstanding_[key];
    if (q.empty())
      throw ExecError(ExecError::Kind::fault, s.loc,
                      std::string(in ? "copy_in_wait(" : "copy_out_wait(") + w.to_string() +
                          ") has no outstanding copy " + (in ? "into" : "out of") +
                          " it: this hangs on hardware");
    Transfer *t = q.front();
    q.pop_front();
    const auto t0 = clock_.now_ns();
    if (!t->submitted) {
      for (auto it = pending_.begin(); it != pending_.end(); ++it)
        if (it->first == t) {
          pending_.erase(it);
          break;
        }
      submit(*t);
    }
    engine_.complete(*t);
    // Strict slot contents (the race machine's rule): a retired write-back
    // leaves its slot undefined — Pallas promises nothing about a buffer's
    // contents at its next visit — unless another write-back out of it is
    // still in flight or the slot was written after this one started.
    if (!in && q.empty() && scratchpad_.count(key.buffer) &&
        writes_[{key.buffer, key.slot}] == t->slot_writes) {
      order(w, true);
      fill_poison(w);
    }
    record({EventKind::copy_wait, s.loc, key.buffer, key.slot, 0, t0, clock_.now_ns(), t->label});
    tick();
  }
  void exec_kind(const spec::Stmt &s, const spec::Wgmma &g) {
    PendingWgmma w{interp_.view_of(g.acc), interp_.view_of(g.a), interp_.view_of(g.b), s.loc, 0};
    if (w.a.shape().size() != 2 || w.b.shape().size() != 2) bad(s.loc, "wgmma takes 2-D operands");
    w.due = due_tick();
    const auto now = clock_.now_ns();
    record({EventKind::wgmma_issue, s.loc, w.a.array->name(), slot_of(w.a), 0, now, now,
            w.acc.to_string() + " += " + w.a.to_string() + " @ " + w.b.to_string()});
    wgmmas_.push_back(std::move(w));
    if (cfg_.mode == DmaMode::synchronous) retire_wgmma();
    tick();
  }
  void exec_kind(const spec::Stmt &s, const spec::WgmmaWait &w) {
    const std::int64_t n = interp_.eval_int(w.n);
    if (n < 0) bad(s.loc, "wgmma_wait takes n >= 0");
    const auto t0 = clock_.now_ns();
    while (static_cast<std::int64_t>(wgmmas_.size()) > n)
      retire_wgmma();
    record({EventKind::wgmma_wait, s.loc, "", -1, 0, t0, clock_.now_ns(),
            "wgmma_wait(" + std::to_string(n) + ")"});
    tick();
  }

  void retire_wgmma() {
    PendingWgmma w = std::move(wgmmas_.front());
    wgmmas_.pop_front();
    const auto t0 = clock_.now_ns();
    order(w.a, false);
    order(w.b, false);
    order(w.acc, true);
    Value c = load(w.acc);
    const Value p = dot(load(w.a), load(w.b), w.loc);
    Value sum = binary(BinOp::add, std::move(c), p, w.loc);
    store(sum, w.acc, w.loc);
    record({EventKind::wgmma_exec, w.loc, w.a.array->name(), slot_of(w.a), 0, t0, clock_.now_ns(),
            w.acc.to_string() + " += " + w.a.to_string() + " @ " + w.b.to_string()});
  }

  void finish() {
    const bool effect = cfg_.mode == DmaMode::eager || cfg_.mode == DmaMode::synchronous;
    for (auto &[t, due] : pending_) {
      (void)due;
      if (effect) submit(*t);
    }
    pending_.clear();
    std::optional<spec::Loc> leaked_at;
    std::string leaked;
    for (auto &[key, q] : outstanding_)
      for (Transfer *t : q) {
        std::ostringstream os;
        os << "line " << t->loc.line << ": copy " << t->label << " was never waited";
        if (!t->submitted) os << "; in " << to_string(cfg_.mode) << " mode it never took effect";
        out_.notes.push_back(os.str());
        if (!leaked_at || t->loc.line < leaked_at->line) {
          leaked_at = t->loc;
          leaked = "copy " + t->label;
        }
      }
    if (!wgmmas_.empty()) {
      const spec::Loc first_wgmma = wgmmas_.front().loc;
      std::ostringstream os;
      os << wgmmas_.size() << " wgmma(s) still in flight at the end";
      if (effect) {
        while (!wgmmas_.empty())
          retire_wgmma();
      } else {
        os << "; in " << to_string(cfg_.mode) << " mode they never took effect";
        wgmmas_.clear();
      }
      out_.notes.push_back(os.str());
      if (!leaked_at) {
        leaked_at = first_wgmma;
        leaked = "a wgmma";
      }
    }
    // A kernel that ends with an operation in flight is broken whatever the
    // timing: on hardware its semaphore is never waited and its data may not land.
    if (leaked_at)
      throw ExecError(ExecError::Kind::fault, *leaked_at,
                      leaked + " is still in flight when the program ends (never waited)");
  }

  const BufferMap &buffers_;
  ProgramRunConfig cfg_;
  Clock clock_;
  std::deque<Transfer> transfers_; // outlives the engine's pointers to it
  DmaEngine engine_;
  Interp interp_;
  std::uint64_t rng_;
  std::set<std::string> slotted_;
  std::set<std::string> scratchpad_;                                     // sram / smem buffers
  std::map<std::pair<std::string, std::int64_t>, std::uint64_t> writes_; // stores and copies into each slot
  std::map<Key, std::deque<Transfer *>> outstanding_;
  std::vector<std::pair<Transfer *, std::int64_t>> pending_;
  std::deque<PendingWgmma> wgmmas_;
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
