// pipecheck run FILE [--kernel NAME]: execute a kernel or pipeline against its intent.
#include "cli/command.hpp"
#ifdef PIPECHECK_WITH_CUDA
#include "executor/cuda/device.hpp"
#include "executor/cuda_runner/cuda_runner.hpp"
#endif
#include "executor/npy.hpp"
#include "executor/run.hpp"
#include "reports/output.hpp"
#include "reports/run_report.hpp"
#include "spec/opaque.hpp"
#include "spec/prefetch.hpp"

#include <filesystem>
#include <iostream>

namespace pipecheck::cli {
namespace {

struct RunArgs {
  std::string path;
  std::string kernel;
  std::string backend = "cpu";
  std::string dma;
  std::string seed = "0";
  std::string scale = "1";
  std::string max_memory = "4G";
  std::string target;
  std::vector<std::string> sets;
  std::string inputs, save;
  std::string inputs_kind = "uniform";
  std::string format = "text";
  std::string output;
  bool shrink = false;
  std::vector<std::string> prefetch; ///< NAME=FILE.npy
};

// --prefetch NAME=FILE.npy: the contents of a prefetch operand.
bool read_prefetch_files(const std::vector<std::string> &flags,
                         std::map<std::string, spec::LoadedContents> &out) {
  for (const auto &f : flags) {
    const auto eq = f.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == f.size()) {
      usage_error("--prefetch", f, "expected NAME=FILE.npy");
      return false;
    }
    const std::string name = f.substr(0, eq), path = f.substr(eq + 1);
    spec::LoadedContents c = executor::load_prefetch_npy(path);
    if (!c.values) {
      usage_error("--prefetch", f, c.error);
      return false;
    }
    out[name] = std::move(c);
  }
  return true;
}

int exit_for(executor::RunStatus s) {
  switch (s) {
  case executor::RunStatus::pass: return ok;
  case executor::RunStatus::fail: return violation;
  case executor::RunStatus::bad_input: return bad_input;
  case executor::RunStatus::error: return environment;
  }
  return environment;
}

int run_cmd(const RunArgs &a) {
  auto format = reports::parse_format(a.format);
  if (!format || *format == reports::Format::sarif)
    return usage_error("--format", a.format, "expected one of text, json, junit, html");
  // Bad input from here on is the report's too (json, junit, html), as it is
  // check's: a CI job that asked for a report gets one that says why.
  ErrorRecord record;
  const std::variant<spec::KernelSpec, spec::Program> *chosen = nullptr;
  auto bad = [&](int = bad_input) {
    if (*format == reports::Format::text || record.errors().empty()) return static_cast<int>(bad_input);
    reports::RunFileResult r;
    r.path = a.path == "-" ? kStdinName : a.path;
    r.is_pipeline = chosen && std::holds_alternative<spec::Program>(*chosen);
    r.report.status = executor::RunStatus::bad_input;
    r.report.unit = chosen ? spec::unit_name(*chosen) : a.kernel;
    r.errors = record.errors();
    if (!emit(a.output, *reports::render(*format, r))) return static_cast<int>(environment);
    return static_cast<int>(bad_input);
  };
#ifdef PIPECHECK_WITH_CUDA
  std::optional<executor::cuda::CudaDevice> cuda;
#endif
  if (a.backend == "cuda") {
    if (!a.dma.empty())
      return bad(usage_error(
          "--dma", a.dma, "applies to the cpu backend (the cuda backend runs plainly, then adversarially)"));
#ifdef PIPECHECK_WITH_CUDA
    std::string why;
    if (!executor::cuda::cuda_device_available(&why)) {
      std::cerr << "error: --backend cuda: " << why << "\n";
      return environment;
    }
    cuda.emplace();
#else
    std::cerr
        << "error: --backend cuda: this build has no CUDA executor (configured without the CUDA toolkit or "
           "with -DPIPECHECK_CUDA=OFF)\n";
    return environment;
#endif
  }
  executor::RunOptions opts;
#ifdef PIPECHECK_WITH_CUDA
  if (cuda) opts.device = &*cuda;
#endif
  if (!a.dma.empty() && !executor::parse_dma_mode(a.dma))
    return bad(usage_error("--dma", a.dma, "unknown mode; expected eager, on_wait or random"));
  auto seed = seed_flag(a.seed);
  if (!seed) return bad();
  opts.seed = *seed;
  auto scale = scale_flag(a.scale);
  if (!scale) return bad();
  opts.scale = *scale;
  auto mem = memory_flag(a.max_memory);
  if (!mem) return bad();
  opts.max_memory_bytes = *mem;
  if (!parse_sets(a.sets, opts.overrides)) return bad();
  if (!a.target.empty()) {
    if (!check_target(a.target)) return bad();
    opts.target = a.target;
  }
  if (!a.inputs.empty()) {
    if (!std::filesystem::is_directory(a.inputs))
      return bad(usage_error("--inputs", a.inputs, "is not a directory of .npy files"));
    opts.inputs_dir = a.inputs;
  }
  if (!a.save.empty()) opts.save_dir = a.save;
  auto kind = executor::parse_input_kind(a.inputs_kind);
  if (!kind)
    return bad(usage_error("--inputs-kind", a.inputs_kind,
                           "expected uniform, normal, integers, one-hot or special"));
  opts.input_kind = *kind;
  auto src = read_source(a.path);
  if (!src) return bad();
  auto file = load(*src);
  if (!file) return bad();
  const auto *selected = select_unit(*file, a.path, a.kernel);
  if (!selected) return bad();
  chosen = selected;
  if (!check_overrides(*selected, *src, opts.overrides)) return bad();
  std::map<std::string, spec::LoadedContents> supplied;
  if (!read_prefetch_files(a.prefetch, supplied)) return bad();
  std::string prefetch_note;
  auto resolved = resolve_prefetch(*selected, *src, opts.overrides, supplied, opts.seed, prefetch_note);
  if (!resolved) return bad();
  const auto *unit = &*resolved;
  // An opaque op's values are unknown: any result would be a guess, never a pass.
  {
    const auto *k = std::get_if<spec::KernelSpec>(unit);
    const auto ops = k ? spec::opaque_ops(*k) : spec::opaque_ops(std::get<spec::Program>(*unit));
    if (!ops.empty()) {
      std::cerr << src->path << ":" << ops.front().loc.line << ":" << ops.front().loc.col
                << ": error: cannot run '" << spec::unit_name(*unit) << "': opaque op " << ops.front().op
                << " at line " << ops.front().loc.line
                << " has no known values (pipecheck check still checks its reads and writes)\n";
      return unknown;
    }
  }
  executor::RunReport report;
  if (a.dma.empty()) {
    report = std::visit([&](const auto &u) { return executor::run_all_modes(u, opts); }, *unit);
  } else {
    opts.mode = *executor::parse_dma_mode(a.dma);
    executor::RunResult r = std::visit([&](const auto &u) { return executor::run(u, opts); }, *unit);
    report.status = r.status;
    report.unit = r.unit;
    report.memory_estimate = r.memory_estimate; // (the report's, as for every mode)
    report.runs.push_back(std::move(r));
  }
  // Bad input in a run is located in the file, like every other bad input.
  for (const auto &r : report.runs)
    if (r.status == executor::RunStatus::bad_input && r.loc.line > 0) {
      file_error(src->path, &*src, spec::Diagnostic{spec::Severity::error, r.loc, r.reason, {}});
      return bad();
    }
  if (!prefetch_note.empty())
    for (auto &r : report.runs)
      r.notes.push_back(prefetch_note);
  if (a.shrink && report.status == executor::RunStatus::fail)
    if (const auto *k = std::get_if<spec::KernelSpec>(&*unit))
      for (auto &r : report.runs) {
        if (r.status != executor::RunStatus::fail || !r.mismatch) continue;
        executor::InputShrink s = executor::shrink_inputs(*k, opts, r);
        r.notes.push_back("shrunk input (seed " + std::to_string(r.seed) + ", dma " +
                          executor::to_string(r.mode) + ", " + std::to_string(s.runs) +
                          (s.runs == 1 ? " run): " : " runs): ") + s.message);
        break;
      }
  reports::RunFileResult result{
      src->path, std::holds_alternative<spec::Program>(*unit), std::move(report), {}};
  if (*format == reports::Format::html)
    if (const auto *k = std::get_if<spec::KernelSpec>(unit)) {
      std::string why;
      result.schedule = reports::kernel_timeline(*k, opts.overrides, opts.target, {}, why);
    }
  const std::string text = *reports::render(*format, result);
  if (!emit(a.output, text)) return environment;
  return exit_for(result.report.status);
}

const bool registered = register_command(
    "run", "Execute a kernel or pipeline with asynchronous copies and compare it with its intent",
    [](CLI::App &app) {
      auto a = std::make_shared<RunArgs>();
      app.add_option("FILE", a->path, "a .pk file")->required();
      app.add_option("--kernel", a->kernel,
                     "the kernel or pipeline to run (needed when the file has several)");
      app.add_option("--backend", a->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
      app.add_option("--dma", a->dma,
                     "one DMA completion mode (default: eager, on_wait and three random seeds)");
      app.add_option("--seed", a->seed, "seed of the input data and of the random mode (0 to 4294967295)")
          ->type_name("S");
      app.add_option("--scale", a->scale,
                     "divide array sizes by this whole factor F (2 or 2.0), keeping blocks whole")
          ->type_name("F");
      app.add_option("--max-memory", a->max_memory,
                     std::string("refuse runs needing more host memory: ") + size_help + " (default 4G)")
          ->type_name("SIZE");
      app.add_option("--target", a->target, target_help());
      add_set_option(app, a->sets, "NAME=VALUE: bind a param");
      app.add_option("--inputs", a->inputs, "read each input operand NAME from DIR/NAME.npy")
          ->type_name("DIR");
      app.add_option("--save", a->save, "write the inputs and outputs to DIR as .npy files")
          ->type_name("DIR");
      app.add_option("--inputs-kind", a->inputs_kind,
                     "generated inputs: uniform (default), normal, integers, one-hot or special")
          ->type_name("KIND");
      app.add_flag("--shrink", a->shrink,
                   "on a mismatch, shrink the inputs toward one non-zero element that still fails");
      app.add_option("--prefetch", a->prefetch,
                     "NAME=FILE.npy: the contents of prefetch operand NAME (default: its given contents, or "
                     "contents that satisfy its constraints, picked with --seed)")
          ->type_name("NAME=FILE");
      app.add_option("--format", a->format, "output format: text, json, junit, html")->type_name("FORMAT");
      non_empty_path(
          app.add_option("-o,--output", a->output, "write the report to this file (-: standard output)"));
      return std::function<int()>([a] { return run_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
