// pipecheck fuzz FILE [--kernel NAME]: check and run a kernel over its param domains.
#include "cli/command.hpp"
#include "executor/npy.hpp"
#include "reports/output.hpp"
#include "reports/run_report.hpp"
#include "reports/sweep_report.hpp"
#include "spec/parse.hpp"
#include "spec/validate.hpp"
#include "sweep/failure_file.hpp"
#include "sweep/sweep.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

namespace pipecheck::cli {
namespace {

struct FuzzArgs {
  std::string path;
  std::string kernel;
  std::string configs = "64";
  std::string seed = "0";
  std::string scale = "1";
  std::string shard;
  std::string format = "text";
  std::string output;
  std::string max_memory = "4G";
  std::string target;
  std::vector<std::string> sets;
  bool no_run = false;
  unsigned jobs = 1;
  std::string save_failures;
};

// "K/N", 0 <= K < N; also TEST_SHARD_INDEX / TEST_TOTAL_SHARDS (Bazel, GoogleTest).
bool parse_shard(const std::string &text, std::int64_t &k, std::int64_t &n) {
  auto slash = text.find('/');
  if (slash == std::string::npos) return false;
  auto kk = parse_unsigned(text.substr(0, slash)), nn = parse_unsigned(text.substr(slash + 1));
  if (!kk || !nn || *nn < 1 || *kk >= *nn || *nn > (1u << 20)) return false;
  k = static_cast<std::int64_t>(*kk);
  n = static_cast<std::int64_t>(*nn);
  return true;
}

int fuzz_cmd(const FuzzArgs &a) {
  sweep::SweepOptions o;
  auto configs = parse_unsigned(a.configs);
  if (!configs || *configs < 1 || *configs > 1000000)
    return usage_error("--configs", a.configs, "expects a whole number from 1 to 1000000");
  o.max_configs = *configs;
  auto seed = seed_flag(a.seed);
  if (!seed) return bad_input;
  o.seed = *seed;
  auto scale = scale_flag(a.scale);
  if (!scale) return bad_input;
  o.scale = *scale;
  auto mem = memory_flag(a.max_memory);
  if (!mem) return bad_input;
  o.max_memory_bytes = *mem;
  std::string shard = a.shard;
  if (shard.empty()) {
    const char *i = std::getenv("TEST_SHARD_INDEX"), *n = std::getenv("TEST_TOTAL_SHARDS");
    if (i && n) {
      shard = std::string(i) + "/" + n;
      // Bazel's sharding protocol: touching the status file says the test
      // shards (Bazel 7 fails a sharded test that does not).
      if (const char *status = std::getenv("TEST_SHARD_STATUS_FILE"); status && *status)
        std::ofstream(status, std::ios::app).flush();
    }
  }
  if (!shard.empty() && !parse_shard(shard, o.shard_index, o.shard_count))
    return usage_error("--shard", shard, "expects K/N with 0 <= K < N");
  o.run = !a.no_run;
  o.jobs = a.jobs;
  if (!parse_sets(a.sets, o.overrides)) return bad_input;
  if (!a.target.empty()) {
    if (!check_target(a.target)) return bad_input;
    o.target = a.target;
  }
  // Bad input in the file is the report's too (json, sarif, junit), as it
  // is check's: a CI job that asked for a report gets one that says why.
  ErrorRecord record;
  std::optional<spec::SourceFile> src;
  auto bad = [&] {
    if (a.format == "text" || record.errors().empty()) return static_cast<int>(bad_input);
    std::string text;
    if (a.format == "json") {
      nlohmann::json j = reports::bad_input_json(a.path, record.errors());
      j["kernel"] = a.kernel;
      text = j.dump(2) + "\n";
    } else {
      reports::FileResult f;
      if (src) f.source = *src;
      f.source.path = a.path;
      f.errors = record.errors();
      std::error_code ec;
      text = reports::render(*reports::parse_format(a.format), {f}, {},
                             std::filesystem::current_path(ec).string());
    }
    if (!emit(a.output, text)) return static_cast<int>(environment);
    return static_cast<int>(bad_input);
  };
  src = read_source(a.path);
  if (!src) return bad();
  // The file validates as written, but for the kernel swept: its written
  // values are one configuration of the sweep, each validated on its own
  // (a default combination that does not validate is that row's bad input,
  // not the campaign's).
  spec::ParseResult parsed = spec::parse(*src);
  if (parsed.file)
    parsed.errors = spec::load_prefetch_files(*parsed.file, src->path, executor::load_prefetch_npy);
  if (!parsed.file || !parsed.errors.empty()) {
    for (const auto &e : parsed.errors)
      file_error(src->path, &*src, e);
    return bad();
  }
  const spec::File &file = *parsed.file;
  {
    // (Before choosing a unit by name: two of one name is the file's error.)
    std::set<std::string> names;
    for (const auto &u : file.units)
      if (!names.insert(spec::unit_name(u)).second) {
        file_error(src->path, &*src,
                   spec::Diagnostic{spec::Severity::error,
                                    spec::unit_loc(u),
                                    "duplicate unit name '" + spec::unit_name(u) + "'",
                                    {}});
        return bad();
      }
  }
  const auto *unit =
      select_kernel(file, *src, a.path, a.kernel, "is a pipeline; fuzz sweeps a kernel's param domains");
  if (!unit) return bad();
  const auto *k = &std::get<spec::KernelSpec>(*unit);
  const bool sweeps = std::any_of(k->params.begin(), k->params.end(), [&](const spec::Param &p) {
    return !p.domain.empty() && !o.overrides.count(p.name);
  });
  {
    auto errors = spec::validate(file, unit);
    if (!sweeps) {
      auto own = spec::validate(*k, o.overrides);
      errors.insert(errors.end(), own.begin(), own.end());
    }
    for (const auto &e : errors)
      file_error(src->path, &*src, e);
    if (!errors.empty()) return bad();
  }
  if (!check_overrides(*unit, *src, o.overrides, /*validate=*/false)) return bad();
  if (isatty(STDERR_FILENO))
    o.progress = [](std::size_t done, std::size_t total) {
      const int width = 30, filled = static_cast<int>(width * done / std::max<std::size_t>(total, 1));
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done
                << "/" << total << (done == total ? "\n" : "") << std::flush;
    };
  auto result = sweep::sweep(*k, o);
  if (auto *err = std::get_if<sweep::SweepError>(&result)) {
    file_error(src->path, &*src, spec::Diagnostic{spec::Severity::error, err->loc, err->message, {}});
    return bad();
  }
  auto &r = std::get<sweep::SweepResult>(result);
  // Not one configuration validates: the file is bad input as written.
  if (sweeps && !r.configs.empty() &&
      std::all_of(r.configs.begin(), r.configs.end(), sweep::rejected_unchecked)) {
    auto errors = spec::validate(*k, o.overrides);
    for (const auto &e : errors)
      file_error(src->path, &*src, e);
    if (!errors.empty()) return bad();
  }
  r.campaign.file = a.path;
  r.campaign.source_hash = sweep::source_hash(src->text);
  std::string text;
  if (a.format == "sarif" || a.format == "junit") {
    // The CI formats render the configurations as check results.
    std::vector<reports::FileResult> files{reports::sweep_file_result(*src, *k, r)};
    std::error_code ec;
    text = reports::render(*reports::parse_format(a.format), files, {},
                           std::filesystem::current_path(ec).string());
  } else {
    text = a.format == "json" ? sweep::to_json(r) : sweep::to_text(r);
  }
  if (!emit(a.output, text)) return environment;
  // The smallest failing configuration as a corpus file with its expectations.
  if (!a.save_failures.empty() && r.smallest_failure &&
      r.smallest_failure->outcome == sweep::Outcome::bad_input) {
    // A corpus file must parse: bad input has no expectations to save.
    std::cerr << "note: --save-failures: the smallest failing configuration is bad input (it does not "
                 "check); nothing saved\n";
  } else if (!a.save_failures.empty() && r.smallest_failure) {
    auto path = sweep::save_config_failure(*k, *r.smallest_failure, o, a.save_failures);
    if (!path) {
      std::cerr << "error: --save-failures " << a.save_failures
                << ": cannot write the failing configuration\n";
      return environment;
    }
    std::cerr << "saved the smallest failing configuration as " << *path << "\n";
  }
  return r.all_ok() ? ok : violation;
}

const bool registered = register_command(
    "fuzz", "Check and run a kernel for every combination of its param domains (param b = 128 in {64, 128})",
    [](CLI::App &app) {
      auto a = std::make_shared<FuzzArgs>();
      app.add_option("FILE", a->path, "a .pk file")->required();
      app.add_option("--kernel", a->kernel, "the kernel to sweep (needed when the file has several)");
      app.add_option("--configs", a->configs,
                     "try every combination up to N, else a seeded sample of N (default 64)")
          ->type_name("N");
      app.add_option("--seed", a->seed, "seed of the sample and of the runs' data (0 to 4294967295)")
          ->type_name("S");
      app.add_option("--scale", a->scale, "divide array sizes by this whole factor F in the runs")
          ->type_name("F");
      app.add_option(
             "--shard", a->shard,
             "K/N: only configurations K mod N of the sweep (default: TEST_SHARD_INDEX/TEST_TOTAL_SHARDS)")
          ->type_name("K/N");
      app.add_option("--format", a->format, "output format")
          ->check(CLI::IsMember({"text", "json", "sarif", "junit"}));
      non_empty_path(
          app.add_option("-o,--output", a->output, "write the report to this file (- for standard output)"));
      app.add_option("--max-memory", a->max_memory, std::string("per run: ") + size_help + " (default 4G)")
          ->type_name("SIZE");
      app.add_option("--target", a->target, target_help());
      app.add_flag("--no-run", a->no_run, "check each configuration without running it");
      app.add_option("--jobs,-j", a->jobs, "check and run N configurations at once (default 1)")
          ->check(CLI::Range(1u, 256u))
          ->type_name("N");
      add_set_option(app, a->sets, "NAME=VALUE: fix a param (its domain is not swept)");
      app.add_option("--save-failures", a->save_failures,
                     "write the smallest failing configuration to DIR as a .pk corpus file with its "
                     "# expect: comments")
          ->type_name("DIR");
      return std::function<int()>([a] { return fuzz_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
