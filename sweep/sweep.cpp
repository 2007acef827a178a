#include "sweep/sweep.hpp"

#include "spec/eval.hpp"
#include "spec/opaque.hpp"
#include "spec/validate.hpp"
#include "verifier/check.hpp"
#include "verifier/rule.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

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

std::string source_hash(const std::string &text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool rejected_unchecked(const ConfigResult &c) { return c.outcome == Outcome::bad_input && c.check_ms == 0; }

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

executor::RunOptions run_options(const spec::Env &params, const SweepOptions &o) {
  executor::RunOptions ro;
  ro.overrides = o.overrides;
  for (const auto &[n, v] : params)
    ro.overrides[n] = v;
  ro.target = o.target;
  ro.scale = o.scale;
  ro.seed = o.seed;
  ro.max_memory_bytes = o.max_memory_bytes;
  return ro;
}

// The first run of try_config's schedules that fails with a mismatch, its
// inputs shrunk; empty when none does.
std::string shrink_failing_run(const spec::KernelSpec &k, const spec::Env &params, const SweepOptions &o) {
  executor::RunOptions ro = run_options(params, o);
  for (auto mode : {executor::DmaMode::eager, executor::DmaMode::random}) {
    ro.mode = mode;
    executor::RunResult r = executor::run(k, ro);
    if (r.status == executor::RunStatus::pass) continue;
    if (r.status != executor::RunStatus::fail || !r.mismatch) return "";
    executor::InputShrink s = executor::shrink_inputs(k, ro, r);
    return "seed " + std::to_string(r.seed) + ", dma " + executor::to_string(mode) + ", " +
           std::to_string(s.runs) + (s.runs == 1 ? " run: " : " runs: ") + s.message;
  }
  return "";
}

} // namespace

ConfigResult try_config(const spec::KernelSpec &k, const spec::Env &params, const SweepOptions &o) {
  ConfigResult c;
  c.params = params;
  spec::Env overrides = o.overrides;
  for (const auto &[n, v] : params)
    overrides[n] = v;
  // The configuration as if written: what it makes invalid is bad input,
  // as `check --set` says.
  {
    auto errors = spec::bind_params(k.params, overrides, false).errors;
    if (errors.empty()) errors = spec::validate(k, overrides);
    if (!errors.empty()) {
      c.outcome = Outcome::bad_input;
      c.reason = "line " + std::to_string(errors.front().loc.line) + ": " + errors.front().message;
      return c;
    }
  }
  verifier::CheckOptions co;
  co.overrides = overrides;
  co.target = o.target;
  co.query_cache = o.query_cache;
  co.enumerate_max_points = o.enumerate_max_points;
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
  // An opaque op's values are unknown: a run would be a guess, never a pass.
  if (const auto ops = spec::opaque_ops(k); !ops.empty()) {
    if (c.outcome == Outcome::ok) {
      c.outcome = Outcome::unknown;
      c.reason = "not run: opaque op " + ops.front().op + " at line " + std::to_string(ops.front().loc.line) +
                 " has no known values (check checks its reads and writes)";
    }
    return c;
  }
  executor::RunOptions ro = run_options(params, o);
  t0 = std::chrono::steady_clock::now();
  // Two schedules: every copy as early as it may land, and a seeded random one.
  for (auto mode : {executor::DmaMode::eager, executor::DmaMode::random}) {
    ro.mode = mode;
    executor::RunResult r = executor::run(k, ro);
    c.run = r.status;
    if (r.status == executor::RunStatus::pass) continue;
    if (r.mismatch)
      c.first_mismatch = r.reason; // the run's own account of it
    else if (c.reason.empty())
      c.reason = std::string(executor::to_string(mode)) + " run: " + r.reason; // a fault, not a value
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

std::variant<SweepResult, SweepError> sweep(const spec::KernelSpec &k, const SweepOptions &options) {
  SweepOptions o = options;
  if (!o.query_cache) o.query_cache = verifier::new_query_cache();
  SweepResult res;
  res.kernel = k.name;
  res.campaign.seed = o.seed;
  res.campaign.max_configs = o.max_configs;
  res.campaign.scale = o.scale;
  res.campaign.target = o.target;
  res.campaign.sets = o.overrides;
  res.campaign.run = o.run;
  res.campaign.max_memory_bytes = o.max_memory_bytes;
  res.campaign.shard_index = o.shard_count <= 1 ? 0 : o.shard_index;
  res.campaign.shard_count = std::max<std::int64_t>(o.shard_count, 1);
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
  // The size of the sweep, exact up to 2^62; past that the count is
  // saturated (`total_capped`) and configurations are drawn a param at a
  // time, each domain's value uniformly, so a sample still reaches every
  // value of every param (a flat index past 2^62 has no room).
  constexpr std::size_t kMaxTotal = std::size_t{1} << 62;
  std::size_t total = 1;
  for (const auto &d : domains) {
    if (total > kMaxTotal / d.values.size()) {
      total = kMaxTotal;
      res.total_capped = true;
    } else {
      total *= d.values.size();
    }
  }
  res.total_configs = total;
  // A configuration: its index in the sweep (lexicographic over the
  // domains; in a capped sweep, its place in the sample) and its params.
  struct Pick {
    std::size_t index;
    spec::Env params;
  };
  auto params_of = [&](std::size_t index) {
    spec::Env env;
    for (std::size_t d = domains.size(); d-- > 0;) {
      env[domains[d].name] = domains[d].values[index % domains[d].values.size()];
      index /= domains[d].values.size();
    }
    return env;
  };
  // The configurations tried: all, or a seeded sample in sweep order.
  std::vector<Pick> picks;
  if (total <= o.max_configs && !res.total_capped) {
    for (std::size_t i = 0; i < total; ++i)
      picks.push_back({i, params_of(i)});
  } else if (!res.total_capped) {
    res.sampled = true;
    std::mt19937_64 rng(o.seed);
    std::set<std::size_t> picked;
    std::uniform_int_distribution<std::size_t> pick(0, total - 1);
    while (picked.size() < o.max_configs)
      picked.insert(pick(rng));
    for (std::size_t i : picked)
      picks.push_back({i, params_of(i)});
  } else {
    res.sampled = true;
    std::mt19937_64 rng(o.seed);
    std::set<std::vector<std::size_t>> picked;
    while (picked.size() < o.max_configs) {
      std::vector<std::size_t> at;
      for (const auto &d : domains)
        at.push_back(std::uniform_int_distribution<std::size_t>(0, d.values.size() - 1)(rng));
      picked.insert(std::move(at));
    }
    std::size_t n = 0;
    for (const auto &at : picked) {
      spec::Env env;
      for (std::size_t d = 0; d < domains.size(); ++d)
        env[domains[d].name] = domains[d].values[at[d]];
      picks.push_back({n++, std::move(env)});
    }
  }
  std::vector<Pick> mine;
  for (auto &pk : picks)
    if (o.shard_count <= 1 ||
        static_cast<std::int64_t>(pk.index % static_cast<std::size_t>(o.shard_count)) == o.shard_index)
      mine.push_back(std::move(pk));
  std::vector<std::optional<ConfigResult>> done(mine.size());
  std::atomic<std::size_t> next{0};
  std::size_t finished = 0;
  std::mutex progress_mu;
  auto worker = [&] {
    for (std::size_t n; (n = next++) < mine.size();) {
      if (verifier::cancelled()) break;
      ConfigResult c = try_config(k, mine[n].params, o);
      c.index = mine[n].index;
      done[n] = std::move(c);
      if (o.progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        o.progress(++finished, mine.size());
      }
    }
  };
  {
    std::vector<std::jthread> threads;
    for (unsigned j = 1; j < std::min<std::size_t>(std::max(o.jobs, 1u), mine.size()); ++j)
      threads.emplace_back(worker);
    worker();
  }
  // Ctrl-C leaves some unfinished: the report keeps those that finished.
  for (auto &c : done)
    if (c) res.configs.push_back(std::move(*c));
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
    // Its index in the sweep (in a capped sweep, the sampled one's).
    if (!res.total_capped) {
      std::size_t index = 0;
      for (const auto &d : domains) {
        auto at = std::find(d.values.begin(), d.values.end(), best.params.at(d.name));
        index = index * d.values.size() + static_cast<std::size_t>(at - d.values.begin());
      }
      best.index = index;
    }
    if (o.run && !best.first_mismatch.empty() && !verifier::cancelled())
      best.shrunk_input = shrink_failing_run(k, best.params, o);
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
  if (!c.shrunk_input.empty()) j["shrunk_input"] = c.shrunk_input;
  j["check_ms"] = c.check_ms;
  j["run_ms"] = c.run_ms;
  return j;
}

nlohmann::json campaign_json(const Campaign &c) {
  nlohmann::json j;
  j["file"] = c.file;
  j["source_hash"] = c.source_hash;
  j["seed"] = c.seed;
  j["configs"] = c.max_configs;
  j["scale"] = c.scale;
  j["target"] = c.target ? nlohmann::json(*c.target) : nlohmann::json(nullptr);
  j["sets"] = nlohmann::json::object();
  for (const auto &[n, v] : c.sets)
    j["sets"][n] = v;
  j["run"] = c.run;
  j["max_memory_bytes"] = c.max_memory_bytes;
  j["shard"] = {{"index", c.shard_index}, {"count", c.shard_count}};
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
  j["campaign"] = campaign_json(r.campaign);
  j["swept"] = r.swept;
  j["total_configs"] = r.total_configs;
  j["total_capped"] = r.total_capped;
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
  os << "kernel '" << r.kernel << "': " << r.configs.size() << " of " << (r.total_capped ? "more than " : "")
     << r.total_configs << " configuration(s)" << (r.sampled ? " (a seeded sample)" : "") << "\n";
  std::map<std::string, int> counts;
  for (const auto &c : r.configs) {
    ++counts[to_string(c.outcome)];
    os << "  " << std::left << std::setw(28) << params_text(c.params) << " " << std::setw(10)
       << to_string(c.outcome);
    if (rejected_unchecked(c)) {
      // Rejected before it was checked: what is wrong with it is all there is.
      os << " " << c.reason << "\n";
      continue;
    }
    os << " check " << verifier::to_string(c.verdict);
    if (!c.rules.empty()) {
      os << " [";
      for (std::size_t i = 0; i < c.rules.size(); ++i)
        os << (i ? ", " : "") << c.rules[i];
      os << "]";
    }
    if (c.run) os << ", run " << executor::to_string(*c.run);
    if (!c.first_mismatch.empty())
      os << ": " << c.first_mismatch;
    else if (c.outcome != Outcome::ok && !c.reason.empty())
      os << ": " << c.reason;
    os << "\n";
  }
  if (r.smallest_failure)
    os << "smallest failing configuration: " << params_text(r.smallest_failure->params) << " ("
       << to_string(r.smallest_failure->outcome) << ")\n";
  if (r.smallest_failure && !r.smallest_failure->shrunk_input.empty())
    os << "shrunk input ("
       << r.smallest_failure->shrunk_input.substr(0, r.smallest_failure->shrunk_input.find(": "))
       << "): " << r.smallest_failure->shrunk_input.substr(r.smallest_failure->shrunk_input.find(": ") + 2)
       << "\n";
  os << "summary:";
  for (const auto &[k, n] : counts)
    os << " " << n << " " << k;
  os << (!r.all_ok()      ? "\n"
         : r.campaign.run ? " — every configuration verified and passed\n"
                          : " — every configuration verified (not run: --no-run)\n");
  return os.str();
}

namespace {

template <class E, class... Es> std::optional<E> enum_of(const std::string &s, Es... values) {
  for (E v : {values...})
    if (s == to_string(v)) return v;
  return std::nullopt;
}

// Throws nlohmann's type errors on a missing or mistyped member; from_json
// turns them into its error.
ConfigResult config_from(const nlohmann::json &j) {
  ConfigResult c;
  c.index = j.at("index").get<std::size_t>();
  for (const auto &[n, v] : j.at("params").items())
    c.params[n] = v.get<std::int64_t>();
  auto outcome = enum_of<Outcome>(j.at("outcome").get<std::string>(), Outcome::ok, Outcome::violation,
                                  Outcome::unknown, Outcome::run_fails, Outcome::bad_input);
  if (!outcome) throw std::invalid_argument("unknown outcome '" + j.at("outcome").get<std::string>() + "'");
  c.outcome = *outcome;
  auto verdict = enum_of<verifier::Status>(j.at("verdict").get<std::string>(), verifier::Status::verified,
                                           verifier::Status::violation, verifier::Status::unknown);
  if (!verdict) throw std::invalid_argument("unknown verdict '" + j.at("verdict").get<std::string>() + "'");
  c.verdict = *verdict;
  c.rules = j.at("rules").get<std::vector<std::string>>();
  c.reason = j.at("reason").get<std::string>();
  if (j.contains("run")) {
    auto run = enum_of<executor::RunStatus>(j.at("run").get<std::string>(), executor::RunStatus::pass,
                                            executor::RunStatus::fail, executor::RunStatus::bad_input,
                                            executor::RunStatus::error);
    if (!run) throw std::invalid_argument("unknown run status '" + j.at("run").get<std::string>() + "'");
    c.run = *run;
  }
  if (j.contains("first_mismatch")) c.first_mismatch = j.at("first_mismatch").get<std::string>();
  if (j.contains("shrunk_input")) c.shrunk_input = j.at("shrunk_input").get<std::string>();
  c.check_ms = j.at("check_ms").get<double>();
  c.run_ms = j.at("run_ms").get<double>();
  return c;
}

} // namespace

namespace {

// nlohmann's message without its "[json.exception.out_of_range.403] " tag.
std::string library_message(const std::string &what) {
  if (what.rfind("[json.exception.", 0) == 0)
    if (auto close = what.find("] "); close != std::string::npos) return what.substr(close + 2);
  return what;
}

} // namespace

std::variant<SweepResult, JsonError> from_json(const std::string &text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    return JsonError{"not JSON: " + library_message(e.what()), e.byte > 0 ? e.byte - 1 : 0};
  }
  try {
    SweepResult r;
    r.kernel = j.at("kernel").get<std::string>();
    const auto &c = j.at("campaign");
    r.campaign.file = c.at("file").get<std::string>();
    r.campaign.source_hash = c.at("source_hash").get<std::string>();
    r.campaign.seed = c.at("seed").get<std::uint64_t>();
    r.campaign.max_configs = c.at("configs").get<std::size_t>();
    r.campaign.scale = c.at("scale").get<std::int64_t>();
    if (!c.at("target").is_null()) r.campaign.target = c.at("target").get<std::string>();
    for (const auto &[n, v] : c.at("sets").items())
      r.campaign.sets[n] = v.get<std::int64_t>();
    r.campaign.run = c.at("run").get<bool>();
    r.campaign.max_memory_bytes = c.at("max_memory_bytes").get<std::uint64_t>();
    r.campaign.shard_index = c.at("shard").at("index").get<std::int64_t>();
    r.campaign.shard_count = c.at("shard").at("count").get<std::int64_t>();
    if (r.campaign.shard_count < 1 || r.campaign.shard_index < 0 ||
        r.campaign.shard_index >= r.campaign.shard_count)
      return JsonError{"campaign.shard must have 0 <= index < count", std::nullopt};
    r.swept = j.at("swept").get<std::vector<std::string>>();
    r.total_configs = j.at("total_configs").get<std::size_t>();
    r.total_capped = j.value("total_capped", false);
    r.sampled = j.at("sampled").get<bool>();
    for (const auto &cj : j.at("configs"))
      r.configs.push_back(config_from(cj));
    if (j.contains("smallest_failure")) r.smallest_failure = config_from(j.at("smallest_failure"));
    return r;
  } catch (const std::exception &e) {
    return JsonError{"not a `pipecheck fuzz --format json` result: " + library_message(e.what()),
                     std::nullopt};
  }
}

std::variant<SweepResult, std::string> merge(const std::vector<std::pair<std::string, SweepResult>> &shards) {
  if (shards.empty()) return std::string("nothing to merge");
  // Every shard against the first: the same campaign but for the shard.
  const auto &[name0, first] = shards.front();
  const Campaign &c0 = first.campaign;
  auto shown = [](const std::optional<std::string> &t) { return t ? *t : std::string("(none)"); };
  auto sets_text = [](const spec::Env &e) { return e.empty() ? std::string("(none)") : params_text(e); };
  for (const auto &[name, r] : shards) {
    const Campaign &c = r.campaign;
    auto differs = [&](const std::string &what, const std::string &a, const std::string &b) {
      return name + " has " + what + " " + b + " but " + name0 + " has " + a + ": not the same campaign";
    };
    if (c.source_hash != c0.source_hash)
      return differs("file", c0.file + " (" + c0.source_hash + ")", c.file + " (" + c.source_hash + ")");
    if (r.kernel != first.kernel) return differs("kernel", first.kernel, r.kernel);
    if (c.seed != c0.seed) return differs("seed", std::to_string(c0.seed), std::to_string(c.seed));
    if (c.max_configs != c0.max_configs)
      return differs("--configs", std::to_string(c0.max_configs), std::to_string(c.max_configs));
    if (c.scale != c0.scale) return differs("--scale", std::to_string(c0.scale), std::to_string(c.scale));
    if (c.target != c0.target) return differs("--target", shown(c0.target), shown(c.target));
    if (c.sets != c0.sets) return differs("--set", sets_text(c0.sets), sets_text(c.sets));
    if (c.run != c0.run)
      return differs("runs", c0.run ? "on" : "off (--no-run)", c.run ? "on" : "off (--no-run)");
    if (c.max_memory_bytes != c0.max_memory_bytes)
      return differs("--max-memory", std::to_string(c0.max_memory_bytes), std::to_string(c.max_memory_bytes));
    if (c.shard_count != c0.shard_count)
      return differs("shard count", std::to_string(c0.shard_count), std::to_string(c.shard_count));
    if (r.swept != first.swept || r.total_configs != first.total_configs || r.sampled != first.sampled ||
        r.total_capped != first.total_capped)
      return name + " sweeps other configurations than " + name0 + ": not the same campaign";
  }
  // Each shard once, all of them.
  std::map<std::int64_t, const std::pair<std::string, SweepResult> *> by_index;
  for (const auto &s : shards) {
    const std::int64_t i = s.second.campaign.shard_index;
    if (auto [it, fresh] = by_index.emplace(i, &s); !fresh)
      return s.first + " and " + it->second->first + " are both shard " + std::to_string(i) + "/" +
             std::to_string(c0.shard_count);
  }
  std::string missing;
  for (std::int64_t i = 0; i < c0.shard_count; ++i)
    if (!by_index.count(i))
      missing += (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(c0.shard_count);
  if (!missing.empty())
    return "missing shard" + std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
           " of the campaign (" + std::to_string(shards.size()) + " of " + std::to_string(c0.shard_count) +
           " given)";
  SweepResult out = by_index.begin()->second->second;
  out.campaign.shard_index = 0;
  out.campaign.shard_count = 1;
  out.configs.clear();
  out.smallest_failure.reset();
  std::optional<std::size_t> first_failure;
  for (const auto &[i, s] : by_index) {
    const SweepResult &r = s->second;
    for (const auto &c : r.configs) {
      if (c.index % static_cast<std::size_t>(c0.shard_count) != static_cast<std::size_t>(i))
        return s->first + " holds configuration " + std::to_string(c.index) + ", which is not in shard " +
               std::to_string(i) + "/" + std::to_string(c0.shard_count);
      out.configs.push_back(c);
    }
    // The whole run shrinks its first failure: the shard that holds it shrank the same one.
    auto f = std::find_if(r.configs.begin(), r.configs.end(),
                          [](const ConfigResult &c) { return c.outcome != Outcome::ok; });
    if (f != r.configs.end() && (!first_failure || f->index < *first_failure)) {
      first_failure = f->index;
      out.smallest_failure = r.smallest_failure;
    }
  }
  std::stable_sort(out.configs.begin(), out.configs.end(),
                   [](const ConfigResult &a, const ConfigResult &b) { return a.index < b.index; });
  return out;
}

} // namespace pipecheck::sweep
