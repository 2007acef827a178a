// pipecheck check FILE...: verdicts for every kernel and pipeline.
#include "cli/command.hpp"
#include "reports/output.hpp"
#include "reports/report.hpp"
#include "spec/parse.hpp"
#include "spec/validate.hpp"
#include "verifier/check.hpp"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <sstream>
#include <thread>

namespace pipecheck::cli {
namespace {

struct CheckArgs {
  std::vector<std::string> paths;
  std::string format = "text";
  std::string output;
  std::string target;
  std::vector<std::string> sets;
  unsigned jobs = 1;
};

reports::FileResult check_file(const InputPath &in, const verifier::CheckOptions &opts) {
  reports::FileResult r;
  r.source.path = in.path;
  std::string why = in.error;
  auto src = why.empty() ? read_source(in.path, why) : std::nullopt;
  if (!src) {
    r.errors.push_back(spec::Diagnostic{spec::Severity::error, {}, why, {}});
    return r;
  }
  r.source = std::move(*src);
  auto parsed = spec::parse_and_validate(r.source);
  if (!parsed.file) {
    r.errors = parsed.errors;
    return r;
  }
  for (const auto &u : parsed.file->units) {
    if (verifier::cancelled()) break;
    reports::UnitResult ur;
    ur.name = spec::unit_name(u);
    ur.is_pipeline = std::holds_alternative<spec::Program>(u);
    ur.loc = spec::unit_loc(u);
    ur.verdict = verifier::check(u, opts);
    r.units.push_back(std::move(ur));
  }
  return r;
}

int run_check(const CheckArgs &a) {
  verifier::CheckOptions opts;
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
  std::vector<reports::FileResult> results(files.size());
  unsigned jobs = std::max(1u, std::min<unsigned>(a.jobs, files.size()));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; !verifier::cancelled() && (i = next++) < files.size();)
      results[i] = check_file(files[i], opts);
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j)
    pool.emplace_back(worker);
  worker();
  for (auto &t : pool)
    t.join();

  // Interrupted: nothing is written, not even a partial report.
  if (verifier::cancelled()) return interrupted;

  std::ostringstream report;
  if (a.format == "json")
    report << reports::to_json(results).dump(2) << "\n";
  else
    reports::write_text(report, results);
  if (a.output.empty()) {
    std::cout << report.str();
  } else if (auto err = reports::write_file_atomically(a.output, report.str()); !err.empty()) {
    std::cerr << "error: -o " << a.output << ": " << err << "\n";
    return environment;
  }
  return reports::exit_code(results);
}

const bool registered = register_command(
    "check", "Verify every kernel and pipeline in FILE... (directories: their .pk files)", [](CLI::App &app) {
      auto a = std::make_shared<CheckArgs>();
      app.add_option("FILE", a->paths, ".pk files or directories")->required();
      app.add_option("--format", a->format, "output format")->check(CLI::IsMember({"text", "json"}));
      app.add_option("-o,--output", a->output, "write the report to this file");
      app.add_option("--target", a->target, "target (overrides a spec's `target =`)");
      app.add_option("--set", a->sets, "NAME=VALUE: override a param")->take_all();
      app.add_option("--jobs,-j", a->jobs, "check files in parallel")->check(CLI::Range(1u, 256u));
      return std::function<int()>([a] { return run_check(*a); });
    });

} // namespace
} // namespace pipecheck::cli
