// pipecheck model FILE [--kernel NAME]: the pipelining guide's performance model of a kernel.
#include "cli/command.hpp"
#include "perf/model.hpp"
#include "reports/output.hpp"
#include "reports/report.hpp"
#include "reports/run_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace pipecheck::cli {
namespace {

struct ModelArgs {
  std::string path;
  std::string kernel;
  std::string target;
  std::vector<std::string> sets;
  std::string format = "text";
  std::string output;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string bytes(std::int64_t b) {
  const double v = static_cast<double>(b);
  if (b < 1024) return std::to_string(b) + " B";
  if (b < 1024 * 1024) return fixed(v / 1024, 1) + " KiB";
  if (b < std::int64_t{1} << 30) return fixed(v / (1024 * 1024), 1) + " MiB";
  return fixed(v / static_cast<double>(std::int64_t{1} << 30), 2) + " GiB";
}

std::string signed_change(double now, double then) {
  if (then <= 0) return "";
  std::string d = fixed((now - then) / then * 100, 0);
  if (d == "-0") d = "0";
  return (d[0] == '-' || d == "0" ? "" : "+") + d + "%";
}

void text(std::ostream &os, const std::string &path, const perf::Model &m) {
  const auto &mc = m.machine;
  os << path << ": " << m.kernel << " on " << m.target << " (alpha " << perf::format_seconds(mc.alpha_s)
     << ", beta " << fixed(mc.beta_bytes_per_s / 1e9, 0) << " GB/s, F " << fixed(mc.flops_per_s / 1e12, 0)
     << " TFLOP/s)\n";
  os << "  " << m.steps << (m.pipeline ? " compute steps; " : " grid steps; ") << m.flops_step
     << " flops per step, " << bytes(m.bytes) << " moved in all\n";
  for (const auto &o : m.operands) {
    os << "  " << (o.role == spec::Role::in ? "in  " : "out ") << o.name;
    if (o.body_copies)
      os << ": memory_space=any, " << o.copies << (o.copies == 1 ? " copy" : " copies") << " by the body, ";
    else
      os << ": block " << bytes(o.block_bytes) << ", " << o.copies << (o.copies == 1 ? " copy" : " copies")
         << (m.pipeline ? ", " : " (when its block changes), ");
    os << bytes(o.bytes) << " = " << perf::format_seconds(o.seconds) << "\n";
  }
  os << "  predicted " << perf::format_seconds(m.seconds) << ": " << perf::to_string(m.bound) << "-bound"
     << (m.bound == perf::Bound::compute ? ""
         : m.latency_bound               ? ", by latency: each copy's alpha is not hidden"
                                         : ", by bandwidth")
     << " (copies " << perf::format_seconds(m.copy_seconds) << ", compute "
     << perf::format_seconds(m.compute_seconds) << ")\n";
  os << "  start-up " << perf::format_seconds(m.startup_seconds) << ", drain "
     << perf::format_seconds(m.drain_seconds) << ": bubbles " << perf::format_percent(m.bubble_fraction)
     << "; utilization " << perf::format_percent(m.utilization) << "\n";
  os << "  SRAM " << bytes(m.sram_bytes) << " of " << bytes(m.sram_budget) << "\n";
  if (m.dominant) {
    const auto &d = m.operands[*m.dominant];
    os << "  dominated by " << d.name << ": " << bytes(d.bytes) << " of " << bytes(m.bytes) << " moved";
    if (d.array_bytes > 0 && d.bytes > d.array_bytes)
      os << " (" << fixed(static_cast<double>(d.bytes) / static_cast<double>(d.array_bytes), 1)
         << "x its array: it is fetched again as the grid revisits its blocks)";
    os << "\n";
    for (const auto &a : m.alternatives) {
      os << "  with " << a.change << ": ";
      if (!a.ok) {
        os << "not modelled (" << a.why << ")\n";
        continue;
      }
      os << perf::format_seconds(a.seconds) << " (" << signed_change(a.seconds, m.seconds) << "), SRAM "
         << bytes(a.sram_bytes) << " of " << bytes(m.sram_budget) << (a.fits ? ": fits" : ": does not fit")
         << "\n";
    }
  }
}

nlohmann::json json(const std::string &path, const perf::Model &m) {
  nlohmann::json j;
  j["file"] = path;
  j["unit"] = m.kernel;
  j["kind"] = m.pipeline ? "pipeline" : "kernel";
  j["target"] = m.target;
  j["machine"] = {{"alpha_s", m.machine.alpha_s},
                  {"beta_bytes_per_s", m.machine.beta_bytes_per_s},
                  {"flops_per_s", m.machine.flops_per_s}};
  j["steps"] = m.steps;
  j["flops"] = m.flops;
  j["flops_per_step"] = m.flops_step;
  j["bytes"] = m.bytes;
  j["seconds"] = m.seconds;
  j["compute_seconds"] = m.compute_seconds;
  j["copy_seconds"] = m.copy_seconds;
  j["startup_seconds"] = m.startup_seconds;
  j["drain_seconds"] = m.drain_seconds;
  j["bound"] = perf::to_string(m.bound);
  j["latency_bound"] = m.latency_bound;
  j["utilization"] = m.utilization;
  j["bubble_fraction"] = m.bubble_fraction;
  j["sram_bytes"] = m.sram_bytes;
  j["sram_budget_bytes"] = m.sram_budget;
  j["operands"] = nlohmann::json::array();
  for (const auto &o : m.operands)
    j["operands"].push_back({{"name", o.name},
                             {"role", spec::to_string(o.role)},
                             {"block_bytes", o.block_bytes},
                             {"array_bytes", o.array_bytes},
                             {"copies", o.copies},
                             {"bytes", o.bytes},
                             {"seconds", o.seconds},
                             {"body_copies", o.body_copies}});
  j["dominant"] = m.dominant ? nlohmann::json(m.operands[*m.dominant].name) : nlohmann::json(nullptr);
  j["alternatives"] = nlohmann::json::array();
  for (const auto &a : m.alternatives) {
    nlohmann::json x = {{"change", a.change}, {"ok", a.ok}};
    if (a.ok) {
      x["seconds"] = a.seconds;
      x["sram_bytes"] = a.sram_bytes;
      x["fits"] = a.fits;
    } else {
      x["why"] = a.why;
    }
    j["alternatives"].push_back(std::move(x));
  }
  j["timeline"] = nlohmann::json::array();
  for (const auto &s : m.timeline)
    j["timeline"].push_back({s.compute_start, s.compute_end});
  return j;
}

int model_cmd(const ModelArgs &a) {
  if (a.format != "text" && a.format != "json")
    return usage_error("--format", a.format, "expected text or json");
  perf::ModelOptions opts;
  if (!parse_sets(a.sets, opts.overrides)) return bad_input;
  if (!a.target.empty()) {
    if (!check_target(a.target)) return bad_input;
    opts.target = a.target;
  }
  // Bad input in the file is the JSON report's too, as run's and fuzz's: a
  // CI job that asked for JSON gets JSON that says why.
  ErrorRecord record;
  auto bad = [&] {
    if (a.format != "json" || record.errors().empty()) return static_cast<int>(bad_input);
    nlohmann::json j = reports::bad_input_json(a.path, record.errors());
    j["models"] = nlohmann::json::array();
    const std::string text = j.dump(2) + "\n";
    if (!emit(a.output, text)) return static_cast<int>(environment);
    return static_cast<int>(bad_input);
  };
  auto src = read_source(a.path);
  if (!src) return bad();
  auto file = load(*src);
  if (!file) return bad();
  std::vector<const std::variant<spec::KernelSpec, spec::Program> *> units;
  if (!a.kernel.empty() || !a.sets.empty()) {
    const auto *unit = select_unit(*file, a.path, a.kernel);
    if (!unit) return bad();
    if (!check_overrides(*unit, *src, opts.overrides)) return bad();
    units.push_back(unit);
  } else {
    // (A file with no unit is the same error as in every other command.)
    if (file->units.empty()) {
      select_unit(*file, a.path, a.kernel);
      return bad();
    }
    for (const auto &u : file->units)
      units.push_back(&u);
  }
  std::ostringstream out;
  nlohmann::json models = nlohmann::json::array();
  int rc = ok;
  // Scalar prefetch: modelled with its given contents, or seed 0's (as `lower`).
  std::vector<std::variant<spec::KernelSpec, spec::Program>> resolved;
  resolved.reserve(units.size());
  for (auto &u : units) {
    std::string note;
    auto r = resolve_prefetch(*u, *src, opts.overrides, {}, 0, note);
    if (!r) return bad();
    resolved.push_back(std::move(*r));
    u = &resolved.back();
  }
  for (const auto *u : units) {
    auto r = std::holds_alternative<spec::KernelSpec>(*u)
                 ? perf::model_kernel(std::get<spec::KernelSpec>(*u), opts)
                 : perf::model_program(std::get<spec::Program>(*u), opts);
    if (!r.errors.empty()) {
      for (const auto &e : r.errors)
        file_error(a.path, &*src, e);
      return bad();
    }
    if (!r.model) {
      std::cerr << a.path << ": " << spec::unit_name(*u) << ": cannot model: " << r.unknown << "\n";
      rc = unknown;
      // (In JSON too: a unit left out is said, not dropped.)
      if (a.format == "json")
        models.push_back(
            {{"file", src->path}, {"unit", spec::unit_name(*u)}, {"modelled", false}, {"reason", r.unknown}});
      continue;
    }
    if (a.format == "json") {
      models.push_back(json(src->path, *r.model));
      models.back()["modelled"] = true;
    } else
      text(out, src->path, *r.model);
  }
  std::string result = a.format == "json" ? nlohmann::json{{"tool", "pipecheck"},
                                                           {"version", reports::kToolVersion},
                                                           {"ok", rc == ok},
                                                           {"models", models}}
                                                    .dump(2) +
                                                "\n"
                                          : out.str();
  if (!emit(a.output, result)) return environment;
  return rc;
}

const bool registered = register_command(
    "model",
    "Predict a kernel's pipelined time on a target: bytes and flops per step, memory- or compute-bound, "
    "bubbles, utilization",
    [](CLI::App &app) {
      auto a = std::make_shared<ModelArgs>();
      app.add_option("FILE", a->path, "a .pk file")->required();
      app.add_option("--kernel", a->kernel,
                     "the kernel or pipeline to model (default: every one in the file)");
      app.add_option("--target", a->target,
                     target_help() + " (default: the spec's target, else " + perf::kDefaultTarget + ")");
      add_set_option(app, a->sets, "NAME=VALUE: override a param");
      app.add_option("--format", a->format, "text or json");
      non_empty_path(app.add_option("-o", a->output, "write the result to this file ('-': standard output)"));
      return std::function<int()>([a] { return model_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
