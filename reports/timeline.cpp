#include "reports/timeline.hpp"

#include "reports/report.hpp"
#include "spec/bind.hpp"
#include "spec/lower.hpp"
#include "spec/print.hpp"
#include "spec/step.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

namespace pipecheck::reports {

const char *to_string(BarKind k) {
  switch (k) {
  case BarKind::copy_in: return "copy-in";
  case BarKind::compute: return "compute";
  case BarKind::copy_out: return "copy-out";
  case BarKind::wgmma: return "wgmma";
  }
  return "?";
}

namespace {

struct StopWalk {};

void index_statements(const spec::Block &b, int top, std::unordered_map<const spec::Stmt *, int> &out) {
  for (const auto &s : b) {
    out[&s] = top;
    if (auto *i = std::get_if<spec::If>(&s.kind)) {
      index_statements(i->then_body, top, out);
      index_statements(i->else_body, top, out);
    } else if (auto *f = std::get_if<spec::For>(&s.kind)) {
      index_statements(f->body, top, out);
    }
  }
}

std::string one_line(const spec::Stmt &s) {
  std::string t = spec::print(s);
  if (auto nl = t.find('\n'); nl != std::string::npos) t.resize(nl);
  auto b = t.find_first_not_of(' ');
  return b == std::string::npos ? t : t.substr(b);
}

// Lays the stepper's events out as bars. Event positions are kept as ordinals
// within their step until the walk ends and each step's count is known.
class Walker : public spec::StepConsumer {
public:
  Walker(const spec::Lowered &l, Timeline &t, const std::vector<verifier::TraceEvent> &racing,
         const TimelineOptions &o)
      : l_(l), t_(t), o_(o) {
    for (std::size_t i = 0; i < l.program.body.size(); ++i)
      index_statements_top(l.program.body[i], static_cast<int>(i));
    for (const auto &e : racing)
      if (e.top_level >= 0) racing_[{e.top_level, e.iterations}].insert(e.statement);
  }
  void attach(const spec::Stepper &st) {
    st_ = &st;
    // A lane per slot of each operand's window: inputs, compute, the rest.
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) {
        compute_lane_ = static_cast<int>(t_.lanes.size());
        t_.lanes.push_back({"compute", "", -1, true});
      }
      for (const auto &b : l_.bindings) {
        if ((b.role == spec::Role::in) != (pass == 0) || b.role == spec::Role::scratch || b.window.empty())
          continue;
        int buf = st.buffer_index(b.window);
        if (buf < 0) continue;
        const std::int64_t n = st.slots(buf);
        if (n < 0) lane_of(buf, -1, b.operand);
        for (std::int64_t s = 0; s < n; ++s)
          lane_of(buf, s, b.operand);
      }
    }
  }
  // After the walk stopped at the cut: copies still in flight end in the
  // elided columns.
  void cut() {
    for (auto &[op, p] : pending_)
      close(p, {t_.head, 0}, false, "waited after the steps drawn");
    pending_.clear();
  }
  // Normalizes positions once every step's count is known.
  void finish() {
    auto norm = [&](StepTime &p) {
      auto it = counts_.find(p.step);
      std::int64_t n = it == counts_.end() ? 1 : std::max<std::int64_t>(it->second, 1);
      p.at = std::min(p.at / static_cast<double>(n), 1.0);
    };
    for (auto &b : t_.bars) {
      norm(b.start);
      norm(b.end);
    }
    if (first_compute_ && t_.drawn(first_compute_->step) && counts_.count(first_compute_->step)) {
      t_.first_compute = *first_compute_;
      norm(*t_.first_compute);
    }
    if (last_compute_ && t_.drawn(last_compute_->step) && counts_.count(last_compute_->step)) {
      t_.last_compute = *last_compute_;
      norm(*t_.last_compute);
    }
  }

  void on_compute(const spec::Stmt &s, const std::vector<spec::StepRef> &,
                  const std::optional<spec::StepRef> &) override {
    StepTime at = here();
    StepTime end{at.step, at.at + 1};
    ++t_.computes;
    if (!first_compute_) first_compute_ = at;
    last_compute_ = end;
    if (!t_.drawn(at.step)) return;
    const bool racing = is_racing();
    if (!t_.bars.empty()) {
      auto &last = t_.bars.back();
      if (last.lane == compute_lane_ && last.end.step == at.step && last.racing == racing &&
          last_compute_bar_ == t_.bars.size() - 1) {
        last.end = end;
        return;
      }
    }
    t_.bars.push_back({compute_lane_, BarKind::compute, at, end, racing, one_line(s)});
    last_compute_bar_ = t_.bars.size() - 1;
  }
  void on_start(const spec::Stmt &s, int op, const spec::AsyncStart &a) override {
    StepTime at = here();
    Pending p;
    p.start = at;
    p.racing = is_racing();
    if (a.kind == spec::AsyncKind::wgmma) {
      // A wgmma computes: the bubbles are where neither it nor a store runs.
      if (!first_compute_) first_compute_ = at;
      last_compute_ = StepTime{at.step, at.at + 1};
      p.kind = BarKind::wgmma;
      p.lane = lane_of(-2, -1, "wgmma");
    } else if (a.kind == spec::AsyncKind::copy_in) {
      p.kind = BarKind::copy_in;
      p.lane = lane_of(a.dst_filled.buffer, a.dst_filled.slot, "");
      ++t_.copy_ins;
    } else {
      p.kind = BarKind::copy_out;
      p.lane = lane_of(a.src_read.buffer, a.src_read.slot, "");
      ++t_.copy_outs;
    }
    if (t_.drawn(at.step)) p.detail = one_line(s);
    pending_[op] = std::move(p);
  }
  void on_wait(const spec::Stmt &s, const std::optional<spec::StepRef> &,
               const std::vector<int> &retired) override {
    StepTime at = here();
    const bool racing = is_racing();
    for (int op : retired) {
      auto it = pending_.find(op);
      if (it == pending_.end()) continue;
      close(it->second, {at.step, at.at + 1}, racing, one_line(s));
      pending_.erase(it);
    }
  }
  void on_undefined(const spec::Stmt &, const spec::StepPlace &) override {}
  void on_fault(const spec::Stmt &, spec::FaultKind, const std::string &) override {}
  void on_end(const std::vector<int> &in_flight) override {
    // Never waited: the bar runs to the end of the last step.
    for (int op : in_flight) {
      auto it = pending_.find(op);
      if (it == pending_.end()) continue;
      std::int64_t last = std::max<std::int64_t>(t_.steps - 1, 0);
      close(it->second, {last, static_cast<double>(count_in(last))}, false, "never waited");
    }
    pending_.clear();
    flush_count();
  }

private:
  struct Pending {
    int lane = 0;
    BarKind kind = BarKind::copy_in;
    StepTime start;
    bool racing = false;
    std::string detail;
  };

  void index_statements_top(const spec::Stmt &s, int top) {
    top_[&s] = top;
    if (auto *i = std::get_if<spec::If>(&s.kind)) {
      index_statements(i->then_body, top, top_);
      index_statements(i->else_body, top, top_);
    } else if (auto *f = std::get_if<spec::For>(&s.kind)) {
      index_statements(f->body, top, top_);
    }
  }

  void close(Pending &p, StepTime end, bool racing, const std::string &wait) {
    if (!t_.drawn(p.start.step) && !t_.drawn(end.step)) return;
    std::string detail = p.detail.empty() ? wait : p.detail + " ... " + wait;
    t_.bars.push_back({p.lane, p.kind, p.start, end, p.racing || racing, detail});
  }

  int top_level() const {
    auto it = top_.find(st_->current());
    return it == top_.end() ? -1 : it->second;
  }
  // The trace names a statement instance by its top-level statement, loop
  // iterations and printed text.
  bool is_racing() const {
    if (racing_.empty()) return false;
    auto it = racing_.find({top_level(), st_->loop_values()});
    return it != racing_.end() && it->second.count(one_line(*st_->current())) > 0;
  }

  std::int64_t count_in(std::int64_t step) const {
    if (step == step_) return ord_;
    auto it = counts_.find(step);
    return it == counts_.end() ? 0 : it->second;
  }
  void flush_count() {
    if (step_ >= 0 && t_.drawn(step_)) counts_[step_] = ord_;
  }

  // The current event's step and ordinal within it.
  StepTime here() {
    std::int64_t step = l_.step(top_level(), st_->loop_values());
    if (step != step_) {
      flush_count();
      step_ = step;
      ord_ = 0;
      if (t_.truncated && step >= t_.head) throw StopWalk{};
    }
    return {step, static_cast<double>(ord_++)};
  }

  int lane_of(int buffer, std::int64_t slot, const std::string &operand) {
    auto key = std::make_pair(buffer, slot);
    if (auto it = lanes_.find(key); it != lanes_.end()) return it->second;
    std::string name = operand;
    std::string bufname;
    if (buffer >= 0 && static_cast<std::size_t>(buffer) < l_.program.buffers.size())
      bufname = l_.program.buffers[static_cast<std::size_t>(buffer)].name;
    if (name.empty()) name = bufname;
    if (slot >= 0) name += "[" + std::to_string(slot) + "]";
    int lane = static_cast<int>(t_.lanes.size());
    t_.lanes.push_back({name, bufname, slot, false});
    lanes_[key] = lane;
    return lane;
  }

  const spec::Lowered &l_;
  Timeline &t_;
  TimelineOptions o_;
  const spec::Stepper *st_ = nullptr;
  std::unordered_map<const spec::Stmt *, int> top_;
  std::map<std::pair<int, std::vector<std::int64_t>>, std::set<std::string>> racing_;
  std::map<std::pair<int, std::int64_t>, int> lanes_;
  int compute_lane_ = 0;
  std::size_t last_compute_bar_ = static_cast<std::size_t>(-1);
  std::map<int, Pending> pending_; // by op: bars in start order
  std::int64_t step_ = -1, ord_ = 0;
  std::map<std::int64_t, std::int64_t> counts_; // events per drawn step
  std::optional<StepTime> first_compute_, last_compute_;
};

} // namespace

std::optional<Timeline> kernel_timeline(const spec::KernelSpec &k, const spec::Env &env,
                                        const std::optional<std::string> &target,
                                        const std::vector<verifier::TraceEvent> &racing, std::string &why,
                                        const TimelineOptions &o) {
  spec::LowerOptions lo;
  lo.overrides = env;
  lo.target = target;
  lo.check_blocks = false;
  std::vector<spec::Diagnostic> errors;
  std::optional<spec::Lowered> l;
  try {
    l = spec::lower(k, lo, errors);
  } catch (const std::exception &e) {
    why = e.what();
    return std::nullopt;
  }
  if (!l) {
    why = errors.empty() ? "the kernel does not lower" : errors.front().message;
    return std::nullopt;
  }
  Timeline t;
  t.steps = spec::num_points(l->grid);
  if (t.steps > o.max_walked) {
    t.truncated = true;
    t.head = std::min(o.head, t.steps);
    t.tail = 0;
  } else if (t.steps <= o.head + o.tail) {
    t.head = t.steps;
    t.tail = 0;
  } else {
    t.head = o.head;
    t.tail = o.tail;
  }
  Walker w(*l, t, racing, o);
  spec::Env walk_env;
  try {
    spec::Stepper st(l->program, l->program.body, walk_env);
    w.attach(st);
    try {
      st.run(w);
    } catch (const StopWalk &) {
      w.cut();
    }
  } catch (const spec::StepError &e) {
    why = e.what();
    return std::nullopt;
  }
  w.finish();
  return t;
}

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Columns of the drawing: the drawn steps, with the elision between.
struct Layout {
  const Timeline &t;
  double left = 130, top = 26, lane_h = 20, col_w = 40;
  bool elided = false;
  int head_cols = 0, cols = 0;
  explicit Layout(const Timeline &tl) : t(tl) {
    elided = t.truncated || t.steps > t.head + t.tail;
    head_cols = static_cast<int>(t.head);
    cols = static_cast<int>(t.head + t.tail) + (elided ? 1 : 0);
    col_w = std::clamp(760.0 / std::max(cols, 1), 14.0, 56.0);
  }
  double col_x(int col) const { return left + col * col_w; }
  int col_of(std::int64_t step) const {
    if (step < t.head) return static_cast<int>(step);
    return head_cols + (elided ? 1 : 0) + static_cast<int>(step - (t.steps - t.tail));
  }
  double x(const StepTime &p) const {
    if (!t.drawn(p.step)) return col_x(head_cols) + col_w / 2;
    return col_x(col_of(p.step)) + p.at * col_w;
  }
  double width() const { return col_x(cols) + 10; }
  double lane_y(int lane) const { return top + lane * lane_h; }
};

} // namespace

std::string timeline_svg(const Timeline &t) {
  Layout L(t);
  const double height = L.lane_y(static_cast<int>(t.lanes.size())) + 30;
  std::ostringstream os;
  os << "<svg class=\"timeline\" width=\"" << num(L.width()) << "\" height=\"" << num(height)
     << "\" viewBox=\"0 0 " << num(L.width()) << " " << num(height) << "\" role=\"img\">\n";
  // Step columns and their numbers (every k-th when narrow).
  const int every = L.col_w >= 28 ? 1 : L.col_w >= 18 ? 2 : 4;
  auto column = [&](int col, const std::string &label, bool show) {
    os << "<rect class=\"col\" x=\"" << num(L.col_x(col)) << "\" y=\"" << num(L.top) << "\" width=\""
       << num(L.col_w) << "\" height=\"" << num(t.lanes.size() * L.lane_h) << "\"/>";
    if (show)
      os << "<text class=\"step\" x=\"" << num(L.col_x(col) + L.col_w / 2) << "\" y=\"" << num(L.top - 8)
         << "\">" << label << "</text>";
    os << "\n";
  };
  for (std::int64_t s = 0; s < t.head; ++s)
    column(L.col_of(s), std::to_string(s), s % every == 0);
  if (L.elided) {
    const std::int64_t hidden = t.steps - t.head - t.tail;
    os << "<rect class=\"elided\" x=\"" << num(L.col_x(L.head_cols)) << "\" y=\"" << num(L.top)
       << "\" width=\"" << num(L.col_w) << "\" height=\"" << num(t.lanes.size() * L.lane_h) << "\"><title>"
       << hidden << " steps not drawn</title></rect><text class=\"step\" x=\""
       << num(L.col_x(L.head_cols) + L.col_w / 2) << "\" y=\"" << num(L.top - 8) << "\">&#8230;</text>\n";
  }
  for (std::int64_t s = t.steps - t.tail; s < t.steps; ++s)
    column(L.col_of(s), std::to_string(s), true);
  // Lanes.
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    const double y = L.lane_y(static_cast<int>(i));
    os << "<text class=\"lane" << (t.lanes[i].is_compute ? " compute" : "") << "\" x=\"" << num(L.left - 6)
       << "\" y=\"" << num(y + L.lane_h * 0.7) << "\">" << xml_text(t.lanes[i].label) << "</text>";
    os << "<line class=\"lane\" x1=\"" << num(L.left) << "\" y1=\"" << num(y + L.lane_h) << "\" x2=\""
       << num(L.col_x(L.cols)) << "\" y2=\"" << num(y + L.lane_h) << "\"/>\n";
  }
  // Start-up and drain bubbles: the compute lane before the first compute and
  // after the last.
  int compute = -1;
  for (std::size_t i = 0; i < t.lanes.size(); ++i)
    if (t.lanes[i].is_compute) compute = static_cast<int>(i);
  if (compute >= 0 && t.steps > 0) {
    const double y = L.lane_y(compute) + 2, h = L.lane_h - 4;
    auto bubble = [&](double x0, double x1, const char *what) {
      if (x1 - x0 < 0.5) return;
      os << "<rect class=\"bubble\" x=\"" << num(x0) << "\" y=\"" << num(y) << "\" width=\"" << num(x1 - x0)
         << "\" height=\"" << num(h) << "\"><title>" << what << " bubble: no compute</title></rect>\n";
    };
    if (t.first_compute) bubble(L.col_x(0), L.x(*t.first_compute), "start-up");
    if (t.last_compute && !t.truncated && t.drawn(t.steps - 1))
      bubble(L.x(*t.last_compute), L.col_x(L.cols), "drain");
  }
  // Bars.
  for (const auto &b : t.bars) {
    const double x0 = L.x(b.start), x1 = std::max(L.x(b.end), x0 + 1.5);
    const double y = L.lane_y(b.lane) + 3, h = L.lane_h - 6;
    os << "<rect class=\"bar " << to_string(b.kind) << (b.racing ? " racing" : "") << "\" x=\"" << num(x0)
       << "\" y=\"" << num(y) << "\" width=\"" << num(x1 - x0) << "\" height=\"" << num(h) << "\"><title>"
       << to_string(b.kind) << ", step " << b.start.step;
    if (b.end.step != b.start.step) os << " to " << b.end.step;
    os << (b.racing ? " (racing)" : "") << ": " << xml_text(b.detail) << "</title></rect>\n";
  }
  // Legend.
  const double ly = L.lane_y(static_cast<int>(t.lanes.size())) + 12;
  double lx = L.left;
  for (const char *k : {"copy-in", "compute", "copy-out", "bubble", "racing"}) {
    os << "<rect class=\"key " << (std::string(k) == "bubble" ? "bubble" : std::string("bar ") + k)
       << "\" x=\"" << num(lx) << "\" y=\"" << num(ly)
       << "\" width=\"14\" height=\"10\"/><text class=\"key\" x=\"" << num(lx + 18) << "\" y=\""
       << num(ly + 9) << "\">" << k << "</text>";
    lx += 90;
  }
  os << "\n</svg>\n";
  return os.str();
}

} // namespace pipecheck::reports
