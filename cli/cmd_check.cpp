// pipecheck check FILE...: verdicts for every kernel and pipeline.
#include "cli/command.hpp"
#include "reports/report.hpp"
#include "spec/parse.hpp"
#include "spec/validate.hpp"
#include "verifier/check.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
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

// Directories expand to their .pk files, sorted, so output order is stable.
std::vector<std::string> expand(const std::vector<std::string> &paths) {
  std::vector<std::string> out;
  for (const auto &p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file() && it->path().extension() == ".pk") found.push_back(it->path().string());
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

reports::FileResult check_file(const std::string &path, const verifier::CheckOptions &opts) {
  reports::FileResult r;
  r.source.path = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    r.errors.push_back(spec::Diagnostic{spec::Severity::error, {}, "cannot open file", {}});
    return r;
  }
  r.source.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  auto parsed = spec::parse_and_validate(r.source);
  if (!parsed.file) {
    r.errors = parsed.errors;
    return r;
  }
  for (const auto &u : parsed.file->units) {
    auto errs = typecheck_with_sets(u, opts.overrides);
    r.errors.insert(r.errors.end(), errs.begin(), errs.end());
  }
  if (!r.errors.empty()) return r;
  for (const auto &u : parsed.file->units) {
    reports::UnitResult ur;
    ur.name = spec::unit_name(u);
    ur.is_pipeline = std::holds_alternative<spec::Program>(u);
    ur.loc = spec::unit_loc(u);
    ur.verdict = verifier::check(u, opts);
    // Bad input the checker found (an overflow at a grid point, a division
    // by a param --set binds to 0) is reported like a validation error.
    if (!ur.verdict.errors.empty()) {
      r.errors.insert(r.errors.end(), ur.verdict.errors.begin(), ur.verdict.errors.end());
      continue;
    }
    r.units.push_back(std::move(ur));
  }
  return r;
}

int run_check(const CheckArgs &a) {
  verifier::CheckOptions opts;
  if (!a.target.empty()) {
    const auto &known = spec::known_targets();
    if (std::find(known.begin(), known.end(), a.target) == known.end()) {
      std::cerr << "error: unknown target '" << a.target << "'; expected one of:";
      for (const auto &t : known)
        std::cerr << " " << t;
      std::cerr << "\n";
      return bad_input;
    }
    opts.target = a.target;
  }
  if (!parse_sets(a.sets, opts.overrides)) return bad_input;
  std::vector<std::string> files = expand(a.paths);
  if (files.empty()) {
    std::cerr << "error: no .pk files to check\n";
    return bad_input;
  }
  std::vector<reports::FileResult> results(files.size());
  unsigned jobs = std::max(1u, std::min<unsigned>(a.jobs, files.size()));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < files.size();)
      results[i] = check_file(files[i], opts);
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j)
    pool.emplace_back(worker);
  worker();
  for (auto &t : pool)
    t.join();

  std::ofstream file_out;
  std::ostream *os = &std::cout;
  if (!a.output.empty()) {
    file_out.open(a.output);
    if (!file_out) {
      std::cerr << "error: cannot write " << a.output << "\n";
      return environment;
    }
    os = &file_out;
  }
  if (a.format == "json") {
    *os << reports::to_json(results).dump(2) << "\n";
  } else {
    reports::write_text(*os, results);
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
