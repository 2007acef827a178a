// pipecheck check FILE...: verdicts for every kernel and pipeline.
#include "cli/command.hpp"
#include "executor/npy.hpp"
#include "perf/model.hpp"
#include "reports/output.hpp"
#include "reports/report.hpp"
#include "spec/opaque.hpp"
#include "spec/parse.hpp"
#include "spec/validate.hpp"
#include "verifier/check.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace pipecheck::cli {
namespace {

struct CheckArgs {
  std::vector<std::string> paths;
  std::string format = "text";
  std::string output;
  std::string color = "auto";
  bool quiet = false;
  std::string target;
  std::vector<std::string> sets;
  unsigned jobs = 1;
  std::vector<std::string> reports; // FORMAT:PATH, each written from the same check
  bool whole_grid = false;          // no grid cut: every grid point checked
  std::vector<std::string> kernels; // --kernel: only these units (all when empty)
};

// One more report of the same results: `--report sarif:out.sarif`.
struct ExtraReport {
  reports::Format format;
  std::string path;
};

// The --report values as formats and files; a usage error names the bad one. A
// path is a file (standard output is -o's), given once across -o and --report.
std::optional<std::vector<ExtraReport>> parse_reports(const CheckArgs &a) {
  std::vector<ExtraReport> out;
  std::set<std::string> paths;
  if (!a.output.empty() && a.output != "-") paths.insert(a.output);
  for (const auto &r : a.reports) {
    const auto colon = r.find(':');
    const auto format = colon == std::string::npos ? std::nullopt : reports::parse_format(r.substr(0, colon));
    if (!format) {
      usage_error("--report", r, std::string("expected FORMAT:PATH, FORMAT one of ") + reports::kFormatNames);
      return std::nullopt;
    }
    std::string path = r.substr(colon + 1);
    if (path.empty() || path == "-") {
      usage_error("--report", r, "expected a file after the ':' (standard output is -o's)");
      return std::nullopt;
    }
    if (!paths.insert(path).second) {
      usage_error("--report", r, "another report is written to " + path);
      return std::nullopt;
    }
    out.push_back({*format, std::move(path)});
  }
  return out;
}

// One file on its way through check: read, parsed, its params bound.
struct Loaded {
  reports::FileResult result;
  std::optional<spec::File> file;
  bool selected_none = false; // --kernel names none of its units: not reported
};

Loaded load_file(const InputPath &in, const verifier::CheckOptions &opts,
                 const std::vector<std::string> &kernels) {
  Loaded l;
  auto &r = l.result;
  r.source.path = in.path == "-" ? kStdinName : in.path;
  std::string why = in.error;
  auto src = why.empty() ? read_source(in.path, why) : std::nullopt;
  if (!src) {
    r.errors.push_back(spec::Diagnostic{spec::Severity::error, {}, why, {}});
    return l;
  }
  r.source = std::move(*src);
  auto parsed = spec::parse_and_validate(r.source, executor::load_prefetch_npy);
  if (!parsed.file) {
    r.errors = parsed.errors;
    return l;
  }
  // Nothing checked is no pass: an empty (or comment-only) file is bad input.
  if (parsed.file->units.empty()) {
    r.errors.push_back(spec::Diagnostic{spec::Severity::error, {}, "no kernel or pipeline in the file", {}});
    return l;
  }
  // --kernel: the units named, before their overrides are judged (a --set
  // for one kernel of a file need not fit the others).
  if (!kernels.empty()) {
    std::erase_if(parsed.file->units, [&](const std::variant<spec::KernelSpec, spec::Program> &u) {
      return std::find(kernels.begin(), kernels.end(), spec::unit_name(u)) == kernels.end();
    });
    if (parsed.file->units.empty()) {
      l.selected_none = true;
      return l;
    }
  }
  // An override outside a param's domain, or one the body does not type-check
  // with, is bad input.
  for (const auto &u : parsed.file->units)
    for (auto &e : override_errors(u, opts.overrides))
      r.errors.push_back(std::move(e));
  l.file = std::move(parsed.file);
  return l;
}

// The performance model's line for the HTML page: only where the timeline
// walked every step (the model walks them all too).
std::string model_note(const spec::KernelSpec &k, const verifier::CheckOptions &opts,
                       const reports::UnitResult &u) {
  if (!u.timeline || u.timeline->truncated) return "";
  perf::ModelOptions mo;
  mo.overrides = opts.overrides;
  mo.target = opts.target;
  mo.alternatives = false;
  perf::ModelResult r = perf::model_kernel(k, mo);
  if (!r.model)
    return "none (" + (r.unknown.empty() ? std::string("the kernel cannot be modelled") : r.unknown) + ")";
  return perf::summary(*r.model) +
         " (pipecheck model says what a larger block or deeper buffering would buy)";
}

// `schedule`: the HTML report draws each kernel's pipeline timeline.
void check_units(Loaded &l, const verifier::CheckOptions &opts, bool schedule) {
  if (!l.file || !l.result.errors.empty()) return;
  for (const auto &u : l.file->units) {
    if (verifier::cancelled()) break;
    reports::UnitResult ur;
    ur.name = spec::unit_name(u);
    ur.is_pipeline = std::holds_alternative<spec::Program>(u);
    ur.loc = spec::unit_loc(u);
    ur.verdict = verifier::check(u, opts);
    // Bad input the checker found (an overflow at a grid point, a division
    // by a param --set binds to 0) is reported like a validation error.
    if (!ur.verdict.errors.empty()) {
      l.result.errors.insert(l.result.errors.end(), ur.verdict.errors.begin(), ur.verdict.errors.end());
      continue;
    }
    if (schedule)
      if (const auto *k = std::get_if<spec::KernelSpec>(&u)) {
        reports::add_schedule(ur, *k, opts.overrides, opts.target);
        ur.model_note = model_note(*k, opts, ur);
      }
    l.result.units.push_back(std::move(ur));
  }
}

// Runs fn(i) for i in [0, n) on `jobs` threads; stops early on Ctrl-C. The
// first exception of any thread is rethrown here (an interrupted solver may
// throw; an exception escaping a std::thread would abort the process).
void parallel_for(std::size_t n, unsigned jobs, const std::function<void(std::size_t)> &fn) {
  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(std::min<std::size_t>(n, 256))));
  std::atomic<std::size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto worker = [&] {
    try {
      for (std::size_t i; !verifier::cancelled() && (i = next++) < n;)
        fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = n;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j)
    pool.emplace_back(worker);
  worker();
  for (auto &t : pool)
    t.join();
  if (error) std::rethrow_exception(error);
}

// Colour on a terminal: never into a file, never with NO_COLOR set (unless
// asked for with --color always) or on a dumb terminal.
bool use_color(const CheckArgs &a, bool to_stdout) {
  if (a.color == "always") return true;
  if (a.color == "never" || !to_stdout || !::isatty(1)) return false;
  const char *no_color = std::getenv("NO_COLOR");
  const char *term = std::getenv("TERM");
  return !(no_color && *no_color) && !(term && std::string(term) == "dumb");
}

// A kernel with opaque ops is checked on their effects alone: say so once per
// kernel, on standard error so that a structured report stays as it is.
void note_opaque(const std::vector<Loaded> &loaded, const std::vector<reports::FileResult> &results) {
  for (std::size_t i = 0; i < loaded.size() && i < results.size(); ++i) {
    const auto &l = loaded[i];
    if (!l.file || !results[i].errors.empty()) continue;
    for (const auto &u : l.file->units) {
      const auto *k = std::get_if<spec::KernelSpec>(&u);
      const auto ops = k ? spec::opaque_ops(*k) : spec::opaque_ops(std::get<spec::Program>(u));
      if (ops.empty()) continue;
      const spec::Loc loc = spec::unit_loc(u);
      std::cerr << results[i].source.path << ":" << loc.line << ":" << loc.col
                << ": note: " << (k ? "kernel '" : "pipeline '") << spec::unit_name(u) << "' has opaque ops ("
                << spec::describe(ops)
                << "): the rules see their reads and writes, not their values, and run cannot execute them\n";
    }
  }
}

int run_check(const CheckArgs &a) {
  auto format = reports::parse_format(a.format);
  if (!format)
    return usage_error("--format", a.format, std::string("expected one of ") + reports::kFormatNames);
  if (a.color != "auto" && a.color != "always" && a.color != "never")
    return usage_error("--color", a.color, "expected auto, always or never");
  if (std::count(a.paths.begin(), a.paths.end(), "-") > 1)
    return usage_error("FILE", "-", "standard input can be read only once");
  const auto extra = parse_reports(a);
  if (!extra) return bad_input;
  const bool html = *format == reports::Format::html ||
                    std::any_of(extra->begin(), extra->end(),
                                [](const ExtraReport &r) { return r.format == reports::Format::html; });
  verifier::CheckOptions opts;
  opts.grid_cut = !a.whole_grid;
  if (!a.target.empty()) {
    if (!check_target(a.target)) return bad_input;
    opts.target = a.target;
  }
  if (!parse_sets(a.sets, opts.overrides)) return bad_input;
  std::vector<InputPath> files = expand_paths(a.paths);
  if (files.empty()) {
    std::cerr << "error: no .pk files to check\n";
    return bad_input;
  }
  std::vector<Loaded> loaded(files.size());
  parallel_for(files.size(), a.jobs,
               [&](std::size_t i) { loaded[i] = load_file(files[i], opts, a.kernels); });
  // A --kernel name no parsed file has is bad input, as an unknown --set
  // name is (a file that did not parse may have it: its errors are reported).
  for (const auto &name : a.kernels) {
    bool found = false, all_parsed_files = true;
    for (const auto &l : loaded) {
      all_parsed_files &= l.file.has_value() || l.selected_none;
      if (l.file)
        for (const auto &u : l.file->units)
          found = found || spec::unit_name(u) == name;
    }
    if (!found && all_parsed_files)
      return usage_error("--kernel", name, "no kernel or pipeline of that name in the files checked");
  }
  std::erase_if(loaded, [](const Loaded &l) { return l.selected_none; });
  // A --set name is unknown only when no unit of any file declares it (a
  // file that did not parse may declare it: its errors are reported instead).
  std::set<std::string> declared;
  bool all_parsed = true;
  for (const auto &l : loaded) {
    all_parsed &= l.file.has_value();
    if (l.file)
      for (const auto &u : l.file->units)
        for (const auto &p : unit_params(u))
          declared.insert(p.name);
  }
  if (all_parsed && !check_set_names(opts.overrides, declared)) return bad_input;
  parallel_for(files.size(), a.jobs, [&](std::size_t i) { check_units(loaded[i], opts, html); });
  std::vector<reports::FileResult> results;
  for (auto &l : loaded)
    results.push_back(std::move(l.result));

  // Interrupted: nothing is written, not even a partial report.
  if (verifier::cancelled()) return interrupted;

  const bool to_stdout = a.output.empty() || a.output == "-";
  reports::TextOptions text{use_color(a, to_stdout), a.quiet};
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  // The --report files first: -o may be standard output, read by a pipe that
  // closes early.
  for (const auto &r : *extra)
    if (!emit(r.path, reports::render(r.format, results, {false, a.quiet}, cwd), "--report"))
      return environment;
  const std::string report = reports::render(*format, results, text, cwd);
  if (!emit(a.output, report)) return environment;
  if (!a.quiet) note_opaque(loaded, results);
  return reports::exit_code(results);
}

const bool registered = register_command(
    "check", "Verify every kernel and pipeline in FILE... (directories: their .pk files)", [](CLI::App &app) {
      auto a = std::make_shared<CheckArgs>();
      app.add_option("FILE", a->paths, ".pk files or directories; - reads standard input")->required();
      app.add_option("--format", a->format, std::string("output format: ") + reports::kFormatNames)
          ->type_name("FORMAT");
      non_empty_path(
          app.add_option("-o,--output", a->output, "write the report to this file (-: standard output)"));
      app.add_option(
             "--report", a->reports,
             "also write a FORMAT report of the same check to PATH (repeatable: --report sarif:r.sarif "
             "--report junit:r.xml)")
          ->allow_extra_args(false)
          ->take_all()
          ->type_name("FORMAT:PATH");
      app.add_option("--color", a->color,
                     "colour the text on a terminal: auto (default; NO_COLOR turns it off), always, never")
          ->type_name("WHEN");
      app.add_flag("-q,--quiet", a->quiet, "text: print only findings and errors");
      app.add_option("--target", a->target, target_help());
      add_set_option(app, a->sets, "NAME=VALUE: override a param");
      app.add_option("--jobs,-j", a->jobs, "check files in parallel")->check(CLI::Range(1u, 256u));
      app.add_option("--kernel", a->kernels,
                     "check only the kernel or pipeline of this name (repeatable); --set applies to it alone")
          ->type_name("NAME");
      app.add_flag("--whole-grid", a->whole_grid,
                   "check every grid point, never a grid cut (docs/lowering.md): the same verdict, "
                   "slower on large grids, and past the concrete limits unknown");
      return std::function<int()>([a] { return run_check(*a); });
    });

} // namespace
} // namespace pipecheck::cli
