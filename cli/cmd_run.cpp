// pipecheck run FILE [--kernel NAME]: execute a kernel or pipeline against its intent.
#include "cli/command.hpp"
#include "executor/run.hpp"

#include <iostream>

namespace pipecheck::cli {
namespace {

struct RunArgs {
  std::string path;
  std::string kernel;
  std::string backend = "cpu";
  std::string dma;
  std::uint64_t seed = 0;
  std::int64_t scale = 1;
  std::string max_memory = "4G";
  std::string target;
  std::vector<std::string> sets;
};

std::optional<std::uint64_t> parse_bytes(const std::string &s) {
  if (s.empty()) return std::nullopt;
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception &) {
    return std::nullopt;
  }
  std::string unit = s.substr(used);
  std::uint64_t mul = 1;
  if (unit == "" || unit == "B")
    mul = 1;
  else if (unit == "K" || unit == "KiB")
    mul = 1ull << 10;
  else if (unit == "M" || unit == "MiB")
    mul = 1ull << 20;
  else if (unit == "G" || unit == "GiB")
    mul = 1ull << 30;
  else
    return std::nullopt;
  return v * mul;
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
  if (a.backend == "cuda") {
    std::cerr << "error: --backend cuda: this build has no CUDA executor\n";
    return environment;
  }
  auto src = read_source(a.path);
  if (!src) return bad_input;
  auto file = load(*src);
  if (!file) return bad_input;
  const auto *unit = select_unit(*file, a.path, a.kernel);
  if (!unit) return bad_input;
  executor::RunOptions opts;
  opts.seed = a.seed;
  if (a.scale < 1) {
    std::cerr << "error: --scale must be at least 1\n";
    return bad_input;
  }
  opts.scale = a.scale;
  auto mem = parse_bytes(a.max_memory);
  if (!mem) {
    std::cerr << "error: --max-memory expects a size like 512M or 4G, got '" << a.max_memory << "'\n";
    return bad_input;
  }
  opts.max_memory_bytes = *mem;
  if (!parse_sets(a.sets, opts.overrides)) return bad_input;
  if (auto errs = typecheck_with_sets(*unit, opts.overrides); !errs.empty()) {
    for (const auto &e : errs)
      spec::render(std::cerr, *src, e);
    return bad_input;
  }
  if (!a.target.empty()) opts.target = a.target;
  executor::RunReport report;
  if (a.dma.empty()) {
    report = std::visit([&](const auto &u) { return executor::run_all_modes(u, opts); }, *unit);
  } else {
    auto mode = executor::parse_dma_mode(a.dma);
    if (!mode) {
      std::cerr << "error: unknown --dma mode '" << a.dma << "'; expected eager, on_wait or random\n";
      return bad_input;
    }
    opts.mode = *mode;
    executor::RunResult r = std::visit([&](const auto &u) { return executor::run(u, opts); }, *unit);
    report.status = r.status;
    report.unit = r.unit;
    report.runs.push_back(std::move(r));
  }
  // Bad input in a run is located in the file, like every other bad input.
  for (const auto &r : report.runs)
    if (r.status == executor::RunStatus::bad_input && r.loc.line > 0) {
      spec::render(std::cerr, *src, spec::Diagnostic{spec::Severity::error, r.loc, r.reason, {}});
      return bad_input;
    }
  executor::print_report(std::cout, report);
  return exit_for(report.status);
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
      app.add_option("--seed", a->seed, "seed of the input data and of the random mode");
      app.add_option("--scale", a->scale, "divide array sizes by this factor, keeping blocks whole");
      app.add_option("--max-memory", a->max_memory, "refuse runs needing more host memory (e.g. 512M, 4G)");
      app.add_option("--target", a->target, "target for lowering");
      app.add_option("--set", a->sets, "NAME=VALUE: bind a param")->take_all();
      return std::function<int()>([a] { return run_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
