#include "reports/html.hpp"
#include "reports/report.hpp"

#include "spec/targets.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

namespace pipecheck::reports {

void add_schedule(UnitResult &u, const spec::KernelSpec &k, const spec::Env &overrides,
                  const std::optional<std::string> &target) {
  u.target = spec::kernel_target(k, target);
  std::vector<verifier::TraceEvent> racing;
  for (const auto &f : u.verdict.findings)
    if (!f.witness.trace.empty()) {
      racing = f.witness.trace;
      break;
    }
  std::string why;
  u.timeline = kernel_timeline(k, overrides, target, racing, why);
  if (!u.timeline) u.timeline_note = why;
}

namespace {

// Everything from the input (paths, names, messages, source lines) goes
// through here: the five escapes, and no control bytes or invalid UTF-8.
std::string esc(const std::string &s) { return xml_text(s); }

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

std::string bytes(std::int64_t b) {
  char buf[48];
  if (b >= (1LL << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

const char *kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd}
table.summary{border-collapse:collapse;margin:12px 0}
table.summary th,table.summary td{border:1px solid #ccc;padding:3px 10px;text-align:left}
table.summary th{background:#f0f0f0}td.time{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-weight:600;padding:1px 6px;border-radius:3px;color:#fff}
.verdict.verified{background:#2e7d32}.verdict.violation{background:#c62828}
.verdict.unknown{background:#9e6a00}.verdict.error{background:#6a1b9a}
.meta,.where,.reason,.note-line{color:#555}
.finding{border-left:4px solid #c62828;padding:2px 12px;margin:10px 0;background:#fdf6f6}
.finding .msg{font-weight:600}.rule{font-family:monospace;color:#c62828}
pre.src{background:#f6f6f6;padding:6px 8px;margin:4px 0;overflow-x:auto;font-size:12.5px}
pre.src .hl{background:#ffe0e0;display:inline-block;min-width:100%}
pre.src .ln{color:#999;user-select:none}
ol.trace{font-family:monospace;font-size:12.5px}ol.trace li.anchor{font-weight:700;color:#c62828}
dl.witness{display:grid;grid-template-columns:max-content auto;gap:0 12px;font-size:13px}
dl.witness dt{font-family:monospace}dl.witness dd{margin:0;font-family:monospace}
.sram{margin:8px 0}.meter{width:420px;height:14px;background:#eee;border:1px solid #bbb;position:relative}
.meter .fill{height:100%;background:#4e79a7}.meter.over .fill{background:#c62828}
svg.timeline{display:block;margin:8px 0;font:11px system-ui,sans-serif}
svg.timeline text.step{text-anchor:middle;fill:#666}svg.timeline text.lane{text-anchor:end;fill:#333}
svg.timeline text.lane.compute{font-weight:700}
svg.timeline rect.col{fill:#fafafa;stroke:#e4e4e4}svg.timeline rect.elided{fill:#fff;stroke:#ccc;stroke-dasharray:3 2}
svg.timeline line.lane{stroke:#e0e0e0}
svg.timeline rect.bar{stroke:#fff;stroke-width:.5}
svg.timeline .copy-in{fill:#4e79a7}svg.timeline .compute{fill:#59a14f}svg.timeline .copy-out{fill:#f28e2b}
svg.timeline .wgmma{fill:#af7aa1}svg.timeline .blocked{fill:#bab0ac}svg.timeline .bubble{fill:url(#hatch)}
svg.timeline rect.racing{stroke:#d62728;stroke-width:2.5}svg.timeline rect.key.racing{fill:#fff}
svg.timeline text.key{fill:#333}
.hidden{display:none}
)";

// The page's script: it counts what rendered (the Chromium test reads
// the counts from the DOM) and lets the reader hide verified units.
const char *kScript = R"(
(function () {
  var rows = document.querySelectorAll('table.summary tbody tr').length;
  var bars = document.querySelectorAll('svg.timeline rect.bar:not(.key)').length;
  var racing = document.querySelectorAll('svg.timeline rect.bar.racing:not(.key)').length;
  document.body.setAttribute('data-rows', rows);
  document.body.setAttribute('data-bars', bars);
  document.body.setAttribute('data-racing', racing);
  var status = document.getElementById('status');
  if (status) status.textContent = rows + ' rows in the summary, ' + bars + ' timeline bars drawn';
  var box = document.getElementById('problems-only');
  if (box) box.addEventListener('change', function () {
    document.querySelectorAll('[data-verdict="verified"]').forEach(function (e) {
      e.classList.toggle('hidden', box.checked);
    });
  });
  document.body.setAttribute('data-rendered', 'yes');
})();
)";

// The lines around `line` with line numbers, `line` highlighted and a caret
// under `col`.
void excerpt(std::ostream &os, const spec::SourceFile &src, const spec::Loc &loc) {
  if (loc.line <= 0 || src.line(loc.line).empty()) return;
  os << "<pre class=\"src\">";
  for (int n = std::max(1, loc.line - 2); n <= loc.line + 1; ++n) {
    const std::string text = spec::printable(src.line(n));
    if (n > loc.line && text.empty()) break;
    char ln[16];
    std::snprintf(ln, sizeof ln, "%5d | ", n);
    if (n == loc.line) {
      os << "<span class=\"hl\"><span class=\"ln\">" << ln << "</span>" << esc(text) << "</span>\n";
      os << "<span class=\"ln\">      | </span>" << esc(spec::caret_pad(text, loc.col)) << "^\n";
    } else {
      os << "<span class=\"ln\">" << ln << "</span>" << esc(text) << "\n";
    }
  }
  os << "</pre>\n";
}

std::string where(const spec::SourceFile &src, const spec::Loc &loc) {
  return esc(src.path) + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
}

std::string rules_of(const UnitResult &u) {
  std::set<std::string> seen;
  std::string r;
  for (const auto &f : u.verdict.findings) {
    std::string id(verifier::info(f.rule).id);
    if (seen.insert(id).second) r += (r.empty() ? "" : ", ") + id;
  }
  return r;
}

void witness(std::ostream &os, const verifier::Witness &w) {
  if (!w.items.empty()) {
    os << "<dl class=\"witness\">";
    for (const auto &it : w.items) {
      os << "<dt>" << esc(it.key) << "</dt><dd>";
      if (auto *i = std::get_if<std::int64_t>(&it.value)) os << *i;
      if (auto *s = std::get_if<std::string>(&it.value)) os << esc(*s);
      if (auto *v = std::get_if<std::vector<std::int64_t>>(&it.value)) {
        os << "(";
        for (std::size_t k = 0; k < v->size(); ++k)
          os << (k ? ", " : "") << (*v)[k];
        os << ")";
      }
      os << "</dd>";
    }
    os << "</dl>\n";
  }
  if (!w.trace.empty()) {
    os << "<p>Event trace:</p><ol class=\"trace\">";
    for (const auto &e : w.trace) {
      os << "<li" << (e.anchor ? " class=\"anchor\"" : "") << ">line " << e.loc.line << ": "
         << esc(e.statement);
      if (!e.grid_point.empty()) {
        os << " at grid point (";
        for (std::size_t k = 0; k < e.grid_point.size(); ++k)
          os << (k ? ", " : "") << e.grid_point[k];
        os << ")";
      }
      if (e.slot) os << ", slot " << *e.slot;
      os << "</li>";
    }
    os << "</ol>\n";
  }
}

void sram(std::ostream &os, const UnitResult &u) {
  const auto &v = u.verdict;
  if (!v.sram_bytes) return;
  os << "<div class=\"sram\"><p>SRAM footprint: <b>" << bytes(*v.sram_bytes) << "</b> (" << *v.sram_bytes
     << " bytes)";
  if (v.sram_budget_bytes && *v.sram_budget_bytes > 0) {
    const double pct = 100.0 * static_cast<double>(*v.sram_bytes) / static_cast<double>(*v.sram_budget_bytes);
    char p[32];
    std::snprintf(p, sizeof p, "%.1f%%", pct);
    os << " of the " << esc(u.target.value_or("target")) << " budget of " << bytes(*v.sram_budget_bytes)
       << ": " << p << "</p><div class=\"meter" << (pct > 100 ? " over" : "") << "\" title=\"" << p
       << "\"><div class=\"fill\" style=\"width:" << std::min(pct, 100.0) << "%\"></div></div>";
  } else {
    os << "; no target budget (the kernel names no known target)</p>";
  }
  os << "</div>\n";
}

void timeline(std::ostream &os, const UnitResult &u) {
  if (!u.timeline) {
    if (!u.timeline_note.empty())
      os << "<p class=\"reason\">No pipeline timeline: " << esc(u.timeline_note) << "</p>\n";
    return;
  }
  const Timeline &t = *u.timeline;
  os << "<figure><figcaption>Pipeline timeline: " << t.steps << " grid step" << (t.steps == 1 ? "" : "s");
  if (t.truncated)
    os << ", the first " << t.head << " drawn (too many to walk for the rest)";
  else if (t.steps > t.head + t.tail)
    os << ", the first " << t.head << " and the last " << t.tail << " drawn";
  os << "; " << t.copy_ins << " copies in, " << t.computes << " compute statements, " << t.copy_outs
     << " copies out";
  if (std::any_of(t.bars.begin(), t.bars.end(), [](const TimelineBar &b) { return b.racing; }))
    os << "; the racing pair is outlined in red";
  os << ".</figcaption>\n" << timeline_svg(t) << "</figure>\n";
}

} // namespace

std::string to_html(const std::vector<FileResult> &files) {
  Counts total;
  for (const auto &f : files)
    total.add(f);
  std::ostringstream os;
  os << html_head("pipecheck report") << "<h1>pipecheck report</h1>\n<p class=\"meta\">pipecheck "
     << kToolVersion << ": " << total.files << " file" << (total.files == 1 ? "" : "s") << ", " << total.units
     << " units: " << total.verified << " verified, " << total.violation << " with violations, "
     << total.unknown << " unknown, " << total.error << " file" << (total.error == 1 ? "" : "s")
     << " with bad input; " << total.findings << " finding" << (total.findings == 1 ? "" : "s") << ".</p>\n"
     << "<p><label><input type=\"checkbox\" id=\"problems-only\"> hide verified units</label> "
     << "<span id=\"status\" class=\"meta\"></span></p>\n";
  // The summary table.
  os << "<table class=\"summary\">\n<thead><tr><th>file</th><th>unit</th><th>kind</th><th>verdict</th>"
        "<th>rules</th><th>time</th></tr></thead>\n<tbody>\n";
  int id = 0;
  for (const auto &f : files) {
    if (!f.errors.empty())
      os << "<tr data-verdict=\"error\"><td>" << esc(f.source.path) << "</td><td><a href=\"#u" << id
         << "\">(bad input)</a></td><td></td><td><span class=\"verdict error\">error</span></td><td>"
         << f.errors.size() << " error" << (f.errors.size() == 1 ? "" : "s")
         << "</td><td class=\"time\"></td></tr>\n";
    ++id;
    for (const auto &u : f.units) {
      const char *verdict = verifier::to_string(u.verdict.status);
      os << "<tr data-verdict=\"" << verdict << "\"><td>" << esc(f.source.path) << "</td><td><a href=\"#u"
         << id << "\">" << esc(u.name) << "</a></td><td>" << u.kind() << "</td><td><span class=\"verdict "
         << verdict << "\">" << verdict << "</span></td><td>" << esc(rules_of(u))
         << "</td><td class=\"time\">" << seconds(u.verdict.seconds) << "</td></tr>\n";
      ++id;
    }
  }
  os << "</tbody>\n</table>\n";
  // Per unit: findings, SRAM, timeline.
  id = 0;
  for (const auto &f : files) {
    if (!f.errors.empty()) {
      os << "<section id=\"u" << id << "\" data-verdict=\"error\">\n<h2>" << esc(f.source.path)
         << " <span class=\"verdict error\">bad input</span></h2>\n";
      for (const auto &e : f.errors) {
        os << "<div class=\"finding\"><p class=\"msg\">" << where(f.source, e.loc) << ": " << esc(e.message)
           << "</p>\n";
        excerpt(os, f.source, e.loc);
        os << "</div>\n";
      }
      os << "</section>\n";
    }
    ++id;
    for (const auto &u : f.units) {
      const auto &v = u.verdict;
      const char *verdict = verifier::to_string(v.status);
      os << "<section id=\"u" << id++ << "\" data-verdict=\"" << verdict << "\">\n<h2>" << u.kind() << " "
         << esc(u.name) << " <span class=\"verdict " << verdict << "\">" << verdict << "</span></h2>\n"
         << "<p class=\"where\">" << where(f.source, u.loc) << "</p>\n";
      if (!v.reason.empty()) os << "<p class=\"reason\">" << esc(v.reason) << "</p>\n";
      for (const auto &fd : v.findings) {
        const verifier::RuleInfo &rule = verifier::info(fd.rule);
        os << "<div class=\"finding\">\n<p class=\"msg\">" << where(f.source, fd.loc) << ": "
           << spec::to_string(fd.severity) << ": " << esc(fd.message) << " <span class=\"rule\" title=\""
           << esc(std::string(rule.summary)) << "\">[" << esc(std::string(rule.id)) << "]</span></p>\n";
        excerpt(os, f.source, fd.loc);
        for (const auto &n : fd.notes) {
          os << "<p class=\"note-line\">" << where(f.source, n.loc) << ": note: " << esc(n.message)
             << "</p>\n";
          if (n.loc.line != fd.loc.line) excerpt(os, f.source, n.loc);
        }
        witness(os, fd.witness);
        os << "</div>\n";
      }
      sram(os, u);
      if (!u.model_note.empty())
        os << "<p class=\"model\">Performance model: " << esc(u.model_note) << "</p>\n";
      timeline(os, u);
      os << "</section>\n";
    }
  }
  os << html_tail();
  return os.str();
}

std::string html_head(const std::string &title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + esc(title) +
         "</title>\n<style>" + kStyle +
         "</style>\n</head>\n<body data-rendered=\"no\">\n"
         "<svg width=\"0\" height=\"0\" style=\"position:absolute\"><defs><pattern id=\"hatch\" width=\"6\" "
         "height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" "
         "height=\"6\" fill=\"#e6e6e6\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b0b0b0\" "
         "stroke-width=\"3\"/></pattern></defs></svg>\n";
}

std::string html_tail() { return std::string("<script>") + kScript + "</script>\n</body>\n</html>\n"; }

} // namespace pipecheck::reports
