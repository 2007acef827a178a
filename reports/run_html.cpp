#include "reports/html.hpp"
#include "reports/run_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace pipecheck::reports {
namespace {

std::string esc(const std::string &s) { return xml_text(s); }

std::string fixed(double v, const char *fmt = "%.1f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// A copy's transfer into its slot ring (its label is "SRC -> DST" and the
// event's buffer is the ring's side) is a copy-in; out of it, a copy-out.
bool is_copy_in(const executor::Event &e) {
  const auto arrow = e.detail.find(" -> ");
  return arrow != std::string::npos && e.detail.compare(arrow + 4, e.buffer.size(), e.buffer) == 0;
}

bool is_compute(const executor::Event &e) {
  return e.thread == 0 &&
         (e.kind == executor::EventKind::compute || e.kind == executor::EventKind::wgmma_exec);
}

bool is_blocked(const executor::Event &e) {
  return e.kind == executor::EventKind::copy_wait || e.kind == executor::EventKind::stall ||
         e.kind == executor::EventKind::wgmma_wait;
}

} // namespace

MeasuredOverlap measured_overlap(const std::vector<executor::Event> &events) {
  MeasuredOverlap m;
  std::vector<std::pair<std::int64_t, std::int64_t>> compute;
  std::int64_t first = INT64_MAX, last = 0;
  for (const auto &e : events) {
    first = std::min(first, e.t_start_ns);
    last = std::max(last, e.t_end_ns);
    if (is_compute(e) && e.t_end_ns > e.t_start_ns) compute.emplace_back(e.t_start_ns, e.t_end_ns);
  }
  m.span_ns = events.empty() ? 0 : last - first;
  std::sort(compute.begin(), compute.end());
  // Merged, so that a transfer's overlap is counted once.
  std::vector<std::pair<std::int64_t, std::int64_t>> merged;
  for (const auto &c : compute) {
    if (!merged.empty() && c.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, c.second);
    else
      merged.push_back(c);
  }
  for (const auto &c : merged)
    m.compute_ns += c.second - c.first;
  for (const auto &e : events) {
    if (e.kind != executor::EventKind::transfer || e.t_end_ns <= e.t_start_ns) continue;
    m.transfer_ns += e.t_end_ns - e.t_start_ns;
    auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(e.t_start_ns, INT64_MAX));
    if (it != merged.begin()) --it;
    for (; it != merged.end() && it->first < e.t_end_ns; ++it)
      m.overlapped_ns +=
          std::max<std::int64_t>(0, std::min(it->second, e.t_end_ns) - std::max(it->first, e.t_start_ns));
  }
  return m;
}

std::string measured_svg(const std::vector<executor::Event> &all, std::size_t max_bars) {
  // The events drawn: the first `max_bars` with a duration, by start time.
  std::vector<const executor::Event *> events;
  for (const auto &e : all)
    if (e.kind != executor::EventKind::grid_step && e.t_end_ns > e.t_start_ns &&
        (e.kind == executor::EventKind::transfer || is_compute(e) || is_blocked(e)))
      events.push_back(&e);
  std::stable_sort(events.begin(), events.end(), [](const executor::Event *a, const executor::Event *b) {
    return a->t_start_ns < b->t_start_ns;
  });
  if (events.size() > max_bars) events.resize(max_bars);
  // The axis starts at the first event drawn (a run starts its DMA workers
  // before its first statement).
  const std::int64_t start_ns = events.empty() ? 0 : events.front()->t_start_ns;
  std::int64_t end_ns = start_ns + 1;
  for (const auto *e : events)
    end_ns = std::max(end_ns, e->t_end_ns);
  // Lanes: slot rings' copy-ins, compute, waits, copy-outs.
  std::map<std::pair<int, std::string>, std::string> lane_keys; // (group, label) -> label
  auto lane_label = [](const executor::Event &e) {
    return e.slot >= 0 ? e.buffer + "[" + std::to_string(e.slot) + "]" : e.buffer;
  };
  for (const auto *e : events) {
    if (e->kind == executor::EventKind::transfer)
      lane_keys[{is_copy_in(*e) ? 0 : 3, lane_label(*e)}] = lane_label(*e);
    else if (is_compute(*e))
      lane_keys[{1, "compute"}] = "compute";
    else
      lane_keys[{2, "waiting"}] = "waiting";
  }
  std::map<std::pair<int, std::string>, int> lane_of;
  std::vector<std::string> lanes;
  for (const auto &[key, label] : lane_keys) {
    lane_of[key] = static_cast<int>(lanes.size());
    lanes.push_back(label);
  }
  const double left = 130, top = 26, lane_h = 20, width = 760;
  const double height = top + lanes.size() * lane_h + 30;
  auto x = [&](std::int64_t ns) {
    return left + width * static_cast<double>(ns - start_ns) / static_cast<double>(end_ns - start_ns);
  };
  std::ostringstream os;
  os << "<svg class=\"timeline measured\" width=\"" << fixed(left + width + 50) << "\" height=\""
     << fixed(height) << "\" role=\"img\">\n";
  for (int k = 0; k <= 4; ++k) {
    const std::int64_t ns = start_ns + (end_ns - start_ns) * k / 4;
    os << "<line class=\"lane\" x1=\"" << fixed(x(ns)) << "\" y1=\"" << fixed(top) << "\" x2=\""
       << fixed(x(ns)) << "\" y2=\"" << fixed(top + lanes.size() * lane_h) << "\"/><text class=\"step\" x=\""
       << fixed(x(ns)) << "\" y=\"" << fixed(top - 8) << "\">"
       << fixed(static_cast<double>(ns) / 1000, "%.1f") << " &#181;s</text>\n";
  }
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const double y = top + i * lane_h;
    os << "<text class=\"lane\" x=\"" << fixed(left - 6) << "\" y=\"" << fixed(y + lane_h * 0.7) << "\">"
       << esc(lanes[i]) << "</text><line class=\"lane\" x1=\"" << fixed(left) << "\" y1=\""
       << fixed(y + lane_h) << "\" x2=\"" << fixed(left + width) << "\" y2=\"" << fixed(y + lane_h)
       << "\"/>\n";
  }
  for (const auto *e : events) {
    std::pair<int, std::string> key;
    const char *cls = "";
    if (e->kind == executor::EventKind::transfer) {
      const bool in = is_copy_in(*e);
      key = {in ? 0 : 3, lane_label(*e)};
      cls = in ? "copy-in" : "copy-out";
    } else if (is_compute(*e)) {
      key = {1, "compute"};
      cls = "compute";
    } else {
      key = {2, "waiting"};
      cls = "blocked";
    }
    const double x0 = x(e->t_start_ns), x1 = std::max(x(e->t_end_ns), x0 + 1);
    const double y = top + lane_of[key] * lane_h + 3;
    os << "<rect class=\"bar " << cls << "\" x=\"" << fixed(x0, "%.2f") << "\" y=\"" << fixed(y)
       << "\" width=\"" << fixed(x1 - x0, "%.2f") << "\" height=\"" << fixed(lane_h - 6) << "\"><title>"
       << executor::to_string(e->kind) << " " << fixed(static_cast<double>(e->t_start_ns) / 1000, "%.2f")
       << "-" << fixed(static_cast<double>(e->t_end_ns) / 1000, "%.2f") << " &#181;s, line " << e->loc.line
       << (e->thread > 0 ? ", DMA worker " + std::to_string(e->thread) : std::string()) << ": "
       << esc(e->detail) << "</title></rect>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string to_html(const RunFileResult &f) {
  const auto &rep = f.report;
  std::ostringstream os;
  os << html_head("pipecheck run report") << "<h1>pipecheck run: " << esc(rep.unit)
     << "</h1>\n<p class=\"meta\">" << esc(f.path) << ", " << (f.is_pipeline ? "pipeline" : "kernel")
     << ": <span class=\"verdict " << (rep.status == executor::RunStatus::pass ? "verified" : "violation")
     << "\">" << executor::to_string(rep.status) << "</span> <span id=\"status\"></span></p>\n";
  if (!f.errors.empty()) os << "<pre class=\"reason\">" << esc(error_lines(f)) << "</pre>\n";
  os << "<table class=\"summary\">\n<thead><tr><th>run</th><th>status</th><th>copies</th><th>bytes "
        "copied</th>"
        "<th>transfer time hidden by compute</th><th>time</th></tr></thead>\n<tbody>\n";
  std::vector<MeasuredOverlap> overlaps;
  for (std::size_t i = 0; i < rep.runs.size(); ++i) {
    const auto &r = rep.runs[i];
    overlaps.push_back(measured_overlap(r.events));
    const auto &m = overlaps.back();
    os << "<tr data-verdict=\"" << executor::to_string(r.status) << "\"><td><a href=\"#r" << i << "\">"
       << esc(executor::run_label(r)) << "</a></td><td>" << executor::to_string(r.status) << "</td><td>"
       << r.copies << "</td><td>" << r.bytes_copied << "</td><td>"
       << (m.transfer_ns > 0 ? fixed(100.0 * m.overlapped_ns / m.transfer_ns) + "%" : std::string("-"))
       << "</td><td class=\"time\">" << fixed(r.seconds, "%.3f s") << "</td></tr>\n";
  }
  os << "</tbody>\n</table>\n";
  if (f.schedule) {
    os << "<h2>The schedule (lowered)</h2>\n<figure><figcaption>The pipeline as lowered: "
       << f.schedule->steps << " grid steps, in statement order within each step.</figcaption>\n"
       << timeline_svg(*f.schedule) << "</figure>\n";
  }
  for (std::size_t i = 0; i < rep.runs.size(); ++i) {
    const auto &r = rep.runs[i];
    const auto &m = overlaps[i];
    os << "<section id=\"r" << i << "\">\n<h2>" << esc(executor::run_label(r)) << " <span class=\"verdict "
       << (r.status == executor::RunStatus::pass ? "verified" : "violation") << "\">"
       << executor::to_string(r.status) << "</span></h2>\n";
    if (!r.reason.empty()) os << "<p class=\"reason\">" << esc(r.reason) << "</p>\n";
    if (r.mismatch) {
      const auto &mm = *r.mismatch;
      os << "<p class=\"reason\">first mismatch in " << esc(mm.array) << " at (";
      for (std::size_t k = 0; k < mm.element.size(); ++k)
        os << (k ? ", " : "") << mm.element[k];
      os << "): " << esc(mm.expected_from) << " " << mm.expected << ", " << esc(mm.actual_from) << " "
         << (mm.is_poison ? std::string("poison") : fixed(mm.actual, "%g")) << " (" << mm.count
         << " elements differ)" << (mm.poison.empty() ? "" : "; " + esc(mm.poison)) << "</p>\n";
    }
    for (const auto &n : r.notes)
      os << "<p class=\"note-line\">" << esc(n) << "</p>\n";
    if (!r.events.empty()) {
      os << "<figure><figcaption>Measured timeline of the run (" << fixed(m.span_ns / 1000.0, "%.1f")
         << " &#181;s";
      if (r.events_truncated) os << ", the first events only";
      os << "): copies by DMA worker threads, compute and waits on the issuing thread";
      if (m.transfer_ns > 0)
        os << "; " << fixed(100.0 * m.overlapped_ns / m.transfer_ns)
           << "% of the transfer time overlapped compute";
      os << ".</figcaption>\n" << measured_svg(r.events) << "</figure>\n";
    }
    os << "</section>\n";
  }
  os << html_tail();
  return os.str();
}

} // namespace pipecheck::reports
