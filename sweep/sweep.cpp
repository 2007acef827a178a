#include "sweep/sweep.hpp"

#include "verifier/check.hpp"
#include "verifier/rule.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace pipecheck::sweep {

const char *to_string(Outcome o) {
  switch (o) {
  case Outcome::ok: return "ok";
  case Outcome::violation: return "violation";
  case Outcome::unknown: return "unknown";
  case Outcome::run_fails: return "run-fails";
  case Outcome::bad_input: return "bad-input";
  }
  return "?";
}

bool SweepResult::all_ok() const {
  return std::all_of(configs.begin(), configs.end(),
                     [](const ConfigResult &c) { return c.outcome == Outcome::ok; });
}

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Domain {
  std::string name;
  std::vector<std::int64_t> values; // as declared, without repeats
};

} // namespace

ConfigResult try_config(const spec::KernelSpec &k, const spec::Env &params, const SweepOptions &o) {
  ConfigResult c;
  c.params = params;
  spec::Env overrides = o.overrides;
  for (const auto &[n, v] : params)
    overrides[n] = v;
  verifier::CheckOptions co;
  co.overrides = overrides;
  co.target = o.target;
  auto t0 = std::chrono::steady_clock::now();
  verifier::Verdict v = verifier::check(k, co);
  c.check_ms = ms_since(t0);
  c.verdict = v.status;
  c.reason = v.reason;
  std::set<std::string> seen;
  for (const auto &f : v.findings)
    if (std::string id(verifier::id(f.rule)); seen.insert(id).second) c.rules.push_back(id);
  if (!v.errors.empty()) {
    c.outcome = Outcome::bad_input;
    c.reason = v.errors.front().message;
    return c;
  }
  c.outcome = v.status == verifier::Status::verified    ? Outcome::ok
              : v.status == verifier::Status::violation ? Outcome::violation
                                                        : Outcome::unknown;
  if (!o.run) return c;
  executor::RunOptions ro;
  ro.overrides = overrides;
  ro.target = o.target;
  ro.scale = o.scale;
  ro.seed = o.seed;
  ro.max_memory_bytes = o.max_memory_bytes;
  t0 = std::chrono::steady_clock::now();
  // Two schedules: every copy as early as it may land, and a seeded random one.
  for (auto mode : {executor::DmaMode::eager, executor::DmaMode::random}) {
    ro.mode = mode;
    executor::RunResult r = executor::run(k, ro);
    c.run = r.status;
    if (r.status == executor::RunStatus::pass) continue;
    if (r.mismatch) c.first_mismatch = r.reason; // the run's own account of it
    if (r.status == executor::RunStatus::bad_input || r.status == executor::RunStatus::error) {
      if (c.outcome == Outcome::ok) {
        c.outcome = Outcome::bad_input;
        c.reason = r.reason;
      }
    } else if (c.outcome == Outcome::ok) {
      c.outcome = Outcome::run_fails;
      c.reason = std::string(executor::to_string(mode)) + " run: " + r.reason;
    }
    break;
  }
  c.run_ms = ms_since(t0);
  return c;
}

std::variant<SweepResult, SweepError> sweep(const spec::KernelSpec &k, const SweepOptions &o) {
  SweepResult res;
  res.kernel = k.name;
  std::vector<Domain> domains;
  spec::Env fixed = spec::param_env(k.params, o.overrides);
  for (const auto &p : k.params) {
    if (p.domain.empty() || o.overrides.count(p.name)) continue;
    Domain d{p.name, {}};
    for (const auto &e : p.domain) {
      auto v = spec::eval_int(e, fixed);
      if (!v) return SweepError{e.loc, "the domain of param '" + p.name + "' must hold integers"};
      if (std::find(d.values.begin(), d.values.end(), *v) == d.values.end()) d.values.push_back(*v);
    }
    res.swept.push_back(p.name);
    domains.push_back(std::move(d));
  }
  std::size_t total = 1;
  for (const auto &d : domains)
    total =
        total > (std::size_t{1} << 40) / d.values.size() ? (std::size_t{1} << 40) : total * d.values.size();
  res.total_configs = total;
  // The indices tried: all, or a seeded sample in sweep order.
  std::vector<std::size_t> indices;
  if (total <= o.max_configs) {
    for (std::size_t i = 0; i < total; ++i)
      indices.push_back(i);
  } else {
    res.sampled = true;
    std::mt19937_64 rng(o.seed);
    std::set<std::size_t> picked;
    std::uniform_int_distribution<std::size_t> pick(0, total - 1);
    while (picked.size() < o.max_configs)
      picked.insert(pick(rng));
    indices.assign(picked.begin(), picked.end());
  }
  auto params_of = [&](std::size_t index) {
    spec::Env env;
    for (std::size_t d = domains.size(); d-- > 0;) {
      env[domains[d].name] = domains[d].values[index % domains[d].values.size()];
      index /= domains[d].values.size();
    }
    return env;
  };
  std::vector<std::size_t> mine;
  for (std::size_t i : indices)
    if (o.shard_count <= 1 ||
        static_cast<std::int64_t>(i % static_cast<std::size_t>(o.shard_count)) == o.shard_index)
      mine.push_back(i);
  for (std::size_t n = 0; n < mine.size(); ++n) {
    if (verifier::cancelled()) break;
    ConfigResult c = try_config(k, params_of(mine[n]), o);
    c.index = mine[n];
    res.configs.push_back(std::move(c));
    if (o.progress) o.progress(n + 1, mine.size());
  }
  // Shrink the first failure: lower each param, in domain order, while the
  // outcome stays the same.
  auto first = std::find_if(res.configs.begin(), res.configs.end(),
                            [](const ConfigResult &c) { return c.outcome != Outcome::ok; });
  if (first != res.configs.end()) {
    ConfigResult best = *first;
    int budget = 32;
    for (const auto &d : domains) {
      std::vector<std::int64_t> smaller;
      for (auto v : d.values)
        if (v < best.params.at(d.name)) smaller.push_back(v);
      std::sort(smaller.begin(), smaller.end());
      for (auto v : smaller) {
        if (budget-- <= 0 || verifier::cancelled()) break;
        spec::Env p = best.params;
        p[d.name] = v;
        ConfigResult c = try_config(k, p, o);
        if (c.outcome == best.outcome && c.rules == best.rules) {
          best = std::move(c);
          break;
        }
      }
    }
    // Its index in the sweep.
    std::size_t index = 0;
    for (const auto &d : domains) {
      auto at = std::find(d.values.begin(), d.values.end(), best.params.at(d.name));
      index = index * d.values.size() + static_cast<std::size_t>(at - d.values.begin());
    }
    best.index = index;
    res.smallest_failure = std::move(best);
  }
  return res;
}

namespace {

nlohmann::json config_json(const ConfigResult &c) {
  nlohmann::json j;
  j["index"] = c.index;
  j["params"] = nlohmann::json::object();
  for (const auto &[n, v] : c.params)
    j["params"][n] = v;
  j["outcome"] = to_string(c.outcome);
  j["verdict"] = verifier::to_string(c.verdict);
  j["rules"] = c.rules;
  j["reason"] = c.reason;
  if (c.run) j["run"] = executor::to_string(*c.run);
  if (!c.first_mismatch.empty()) j["first_mismatch"] = c.first_mismatch;
  j["check_ms"] = c.check_ms;
  j["run_ms"] = c.run_ms;
  return j;
}

std::string params_text(const spec::Env &p) {
  std::string out;
  for (const auto &[n, v] : p)
    out += (out.empty() ? "" : " ") + n + "=" + std::to_string(v);
  return out.empty() ? "(no params)" : out;
}

} // namespace

std::string to_json(const SweepResult &r) {
  nlohmann::json j;
  j["kernel"] = r.kernel;
  j["swept"] = r.swept;
  j["total_configs"] = r.total_configs;
  j["sampled"] = r.sampled;
  j["configs"] = nlohmann::json::array();
  std::map<std::string, int> counts;
  for (const auto &c : r.configs) {
    j["configs"].push_back(config_json(c));
    ++counts[to_string(c.outcome)];
  }
  j["summary"] = counts;
  if (r.smallest_failure) j["smallest_failure"] = config_json(*r.smallest_failure);
  j["ok"] = r.all_ok();
  return j.dump(2) + "\n";
}

std::string to_text(const SweepResult &r) {
  std::ostringstream os;
  os << "kernel '" << r.kernel << "': " << r.configs.size() << " of " << r.total_configs
     << " configuration(s)" << (r.sampled ? " (a seeded sample)" : "") << "\n";
  std::map<std::string, int> counts;
  for (const auto &c : r.configs) {
    ++counts[to_string(c.outcome)];
    os << "  " << std::left << std::setw(28) << params_text(c.params) << " " << std::setw(10)
       << to_string(c.outcome) << " check " << verifier::to_string(c.verdict);
    if (!c.rules.empty()) {
      os << " [";
      for (std::size_t i = 0; i < c.rules.size(); ++i)
        os << (i ? ", " : "") << c.rules[i];
      os << "]";
    }
    if (c.run) os << ", run " << executor::to_string(*c.run);
    if (!c.first_mismatch.empty())
      os << ": " << c.first_mismatch;
    else if (c.outcome == Outcome::unknown || c.outcome == Outcome::bad_input)
      os << ": " << c.reason;
    os << "\n";
  }
  if (r.smallest_failure)
    os << "smallest failing configuration: " << params_text(r.smallest_failure->params) << " ("
       << to_string(r.smallest_failure->outcome) << ")\n";
  os << "summary:";
  for (const auto &[k, n] : counts)
    os << " " << n << " " << k;
  os << (r.all_ok() ? " — every configuration verified and passed\n" : "\n");
  return os.str();
}

} // namespace pipecheck::sweep
