#include "sweep/sweep.hpp"

#include "spec/parse.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

using namespace pipecheck;
using sweep::Outcome;

namespace {

spec::KernelSpec kernel(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors[0].message;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

// A row sum over column blocks: bk = 48 does not divide 128, so the last
// block's padding is summed (partial-block-reduction); 32 and 64 are fine.
const char *kRowSum = R"(kernel row_sum:
    param bm = 8 in {8, 16}
    param bk = 64 in {32, 48, 64}
    grid = (32 // bm, cdiv(128, bk))
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[32, 128]  block=(bm, bk)  index=(i, k) -> (i, k)
    out o: f32[32]       block=(bm,)     index=(i, k) -> (i,)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += sum(x[...], axis=1)
)";

const sweep::SweepResult &result(const std::variant<sweep::SweepResult, sweep::SweepError> &r) {
  if (auto *e = std::get_if<sweep::SweepError>(&r)) ADD_FAILURE() << e->message;
  return std::get<sweep::SweepResult>(r);
}

} // namespace

TEST(Sweep, TriesEveryCombinationOfTheDomainsAndNamesTheFailingOnes) {
  auto r = sweep::sweep(kernel(kRowSum), {});
  const auto &s = result(r);
  EXPECT_EQ(s.total_configs, 6u);
  EXPECT_FALSE(s.sampled);
  ASSERT_EQ(s.configs.size(), 6u);
  for (const auto &c : s.configs) {
    const bool ragged = c.params.at("bk") == 48;
    EXPECT_EQ(c.outcome, ragged ? Outcome::violation : Outcome::ok) << c.reason;
    if (ragged) {
      EXPECT_EQ(c.rules, std::vector<std::string>{"partial-block-reduction"});
    } else {
      EXPECT_EQ(c.run, executor::RunStatus::pass);
    }
  }
  EXPECT_FALSE(s.all_ok());
}

TEST(Sweep, ShrinksTheFirstFailureToItsSmallestConfiguration) {
  auto r = sweep::sweep(kernel(kRowSum), {});
  const auto &s = result(r);
  ASSERT_TRUE(s.smallest_failure);
  EXPECT_EQ(s.smallest_failure->params.at("bm"), 8);
  EXPECT_EQ(s.smallest_failure->params.at("bk"), 48);
  EXPECT_EQ(s.smallest_failure->outcome, Outcome::violation);
}

TEST(Sweep, SamplesAtMostTheGivenNumberOfConfigurationsTheSameWayForTheSameSeed) {
  sweep::SweepOptions o;
  o.max_configs = 4;
  o.run = false;
  auto a = sweep::sweep(kernel(kRowSum), o), b = sweep::sweep(kernel(kRowSum), o);
  const auto &sa = result(a), &sb = result(b);
  EXPECT_TRUE(sa.sampled);
  ASSERT_EQ(sa.configs.size(), 4u);
  ASSERT_EQ(sb.configs.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(sa.configs[i].params, sb.configs[i].params);
  EXPECT_FALSE(sa.configs[0].run.has_value()); // --no-run
}

TEST(Sweep, ShardsSplitTheSweepIntoDisjointPartsThatCoverIt) {
  std::set<std::size_t> seen;
  std::size_t total = 0;
  for (std::int64_t k = 0; k < 3; ++k) {
    sweep::SweepOptions o;
    o.run = false;
    o.shard_index = k;
    o.shard_count = 3;
    auto r = sweep::sweep(kernel(kRowSum), o);
    for (const auto &c : result(r).configs) {
      EXPECT_TRUE(seen.insert(c.index).second) << "index " << c.index << " in two shards";
      ++total;
    }
  }
  EXPECT_EQ(total, 6u);
}

TEST(Sweep, AFixedParamIsNotSwept) {
  sweep::SweepOptions o;
  o.run = false;
  o.overrides["bk"] = 64;
  auto r = sweep::sweep(kernel(kRowSum), o);
  const auto &s = result(r);
  EXPECT_EQ(s.swept, std::vector<std::string>{"bm"});
  EXPECT_EQ(s.total_configs, 2u);
  EXPECT_TRUE(s.all_ok());
}

TEST(Sweep, AVerifiedConfigurationThatCannotRunIsBadInputNeverOk) {
  sweep::SweepOptions o;
  o.max_memory_bytes = 1024; // every run is over the limit
  auto r = sweep::sweep(kernel(kRowSum), o);
  for (const auto &c : result(r).configs) {
    if (c.verdict == verifier::Status::verified) {
      EXPECT_EQ(c.outcome, Outcome::bad_input) << c.reason;
    }
  }
  EXPECT_FALSE(result(r).all_ok());
}

TEST(Sweep, ASampleOfAHugeSweepReachesEveryValueOfItsLeadingParam) {
  // 8 params of 50 values (3.9e13 combinations): the output is written only
  // when q0 <= 25, so about half of any uniform sample is a violation.
  std::string domain = "{";
  for (int v = 1; v <= 50; ++v)
    domain += (v > 1 ? ", " : "") + std::to_string(v);
  domain += "}";
  std::string text = "kernel huge:\n";
  for (int q = 0; q < 8; ++q)
    text += "    param q" + std::to_string(q) + " = 1 in " + domain + "\n";
  text += R"(    grid = (4,)
    dimension_semantics = (parallel,)
    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        when q0 <= 25:
            o[...] = x[...]
)";
  sweep::SweepOptions o;
  o.run = false;
  o.max_configs = 40;
  auto r = sweep::sweep(kernel(text), o);
  const auto &s = result(r);
  EXPECT_TRUE(s.sampled);
  EXPECT_FALSE(s.total_capped);
  EXPECT_EQ(s.total_configs, 50ull * 50 * 50 * 50 * 50 * 50 * 50 * 50);
  int violations = 0;
  std::set<std::int64_t> q0;
  for (const auto &c : s.configs) {
    violations += c.outcome == Outcome::violation;
    q0.insert(c.params.at("q0"));
    EXPECT_EQ(c.outcome, c.params.at("q0") <= 25 ? Outcome::ok : Outcome::violation) << c.reason;
  }
  EXPECT_GT(violations, 8);
  EXPECT_GT(q0.size(), 15u);
  // Past 2^62 combinations (12 params of 50) the count is capped and each
  // param is drawn on its own.
  std::string more = text;
  for (int q = 8; q < 12; ++q)
    more.insert(more.find("    grid"), "    param q" + std::to_string(q) + " = 1 in " + domain + "\n");
  auto m = sweep::sweep(kernel(more), o);
  const auto &sm = result(m);
  EXPECT_TRUE(sm.total_capped);
  EXPECT_EQ(sm.configs.size(), 40u);
  int mv = 0;
  for (const auto &c : sm.configs)
    mv += c.outcome == Outcome::violation;
  EXPECT_GT(mv, 8);
  EXPECT_NE(sweep::to_text(sm).find("of more than 4611686018427387904 configuration(s)"), std::string::npos);
}

TEST(Sweep, AConfigurationItsValuesMakeInvalidIsBadInputAsCheckSetSaysNotOk) {
  // s = 16 slices 16 rows of an 8-row block, in a branch never taken.
  auto r = sweep::sweep(kernel(R"(kernel dead_branch:
    param s = 8 in {8, 16}
    grid = (4,)
    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
        when program_id(0) > 10:
            o[...] = sum(x[0:s, :], axis=0, keepdims=True) + x[...]
)"),
                        {});
  const auto &s = result(r);
  ASSERT_EQ(s.configs.size(), 2u);
  EXPECT_EQ(s.configs[0].outcome, Outcome::ok);
  EXPECT_EQ(s.configs[1].outcome, Outcome::bad_input);
  EXPECT_NE(s.configs[1].reason.find("line 9: 'x[0:s, :]': slice 0:16 is out of bounds"), std::string::npos)
      << s.configs[1].reason;
  EXPECT_FALSE(s.configs[1].run.has_value());
}

TEST(Sweep, AKernelWithAnOpaqueOpIsNotRunAndItsVerifiedConfigurationsAreUnknown) {
  auto r = sweep::sweep(kernel(R"(kernel sinh_copy:
    param b = 64 in {64, 128}
    grid = (128 // b,)
    in  x: f32[128, 128]  block=(b, 128)  index=(i) -> (i, 0)
    out o: f32[128, 128]  block=(b, 128)  index=(i) -> (i, 0)
    body:
        o[...] = opaque(x[...], op=sinh, shape=(b, 128), dtype=f32)
)"),
                        {});
  for (const auto &c : result(r).configs) {
    EXPECT_EQ(c.verdict, verifier::Status::verified) << c.reason;
    EXPECT_EQ(c.outcome, Outcome::unknown);
    EXPECT_FALSE(c.run.has_value());
    EXPECT_NE(c.reason.find("not run: opaque op sinh at line 7"), std::string::npos) << c.reason;
  }
}

TEST(Sweep, ARunThatFaultsSaysWhyOnItsLine) {
  auto r = sweep::sweep(kernel(R"(kernel grid_extent:
    param g = 4 in {4, 5}
    grid = (g,)
    in  x: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[32, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)"),
                        {});
  const auto &c = result(r).configs.at(1);
  EXPECT_EQ(c.outcome, Outcome::violation);
  EXPECT_EQ(c.run, executor::RunStatus::fail);
  EXPECT_NE(c.reason.find("eager run: "), std::string::npos) << c.reason;
  EXPECT_NE(sweep::to_text(result(r)).find("slice 32:40 is out of bounds"), std::string::npos)
      << sweep::to_text(result(r));
}

TEST(Sweep, ItsJsonCarriesEachConfigurationAndASummary) {
  auto r = sweep::sweep(kernel(kRowSum), {});
  auto j = nlohmann::json::parse(sweep::to_json(result(r)));
  EXPECT_EQ(j["kernel"], "row_sum");
  EXPECT_EQ(j["total_configs"], 6);
  EXPECT_EQ(j["configs"].size(), 6u);
  EXPECT_EQ(j["summary"]["ok"], 4);
  EXPECT_EQ(j["summary"]["violation"], 2);
  EXPECT_EQ(j["smallest_failure"]["params"]["bk"], 48);
  EXPECT_EQ(j["ok"], false);
}

TEST(Sweep, TheSmallestFailingRunCarriesItsInputShrunkToOneProduct) {
  // The matmul that copies its accumulator out at the first k step: every
  // bk with more than one k step fails against the reference.
  const auto k = kernel(R"(kernel matmul:
    param bk = 64 in {64, 32, 128}
    grid = (2, 2, 128 // bk)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  a: f32[64, 128]  block=(32, bk)  index=(i, j, kk) -> (i, kk)
    in  b: f32[128, 64]  block=(bk, 32)  index=(i, j, kk) -> (kk, j)
    out o: f32[64, 64]   block=(32, 32)  index=(i, j, kk) -> (i, j)
    scratch acc: f32[32, 32]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(2) == 0:
            o[...] = acc[...]
    reference:
        o = dot(a, b)
)");
  sweep::SweepOptions o;
  const auto r = sweep::sweep(k, o);
  const auto &res = result(r);
  ASSERT_TRUE(res.smallest_failure);
  EXPECT_EQ(res.smallest_failure->params.at("bk"), 32);
  EXPECT_EQ(res.smallest_failure->outcome, Outcome::violation); // accumulator-reset, and its run fails
  EXPECT_EQ(res.smallest_failure->shrunk_input.rfind("seed 0, dma eager, ", 0), 0u)
      << res.smallest_failure->shrunk_input;
  EXPECT_NE(res.smallest_failure->shrunk_input.find(
                ": o[0, 0] is 0 (reference: 1) when only a[0, 32] = 1 and b[32, 0] = 1 are non-zero"),
            std::string::npos)
      << res.smallest_failure->shrunk_input;
  auto j = nlohmann::json::parse(sweep::to_json(res));
  EXPECT_EQ(j["smallest_failure"]["shrunk_input"], res.smallest_failure->shrunk_input);
  EXPECT_NE(sweep::to_text(res).find("shrunk input (seed 0, dma eager, "), std::string::npos);
  // Only the smallest failure is shrunk.
  for (const auto &c : res.configs)
    EXPECT_TRUE(c.shrunk_input.empty());
}

TEST(Sweep, ConfigurationsOnSeveralThreadsGiveTheSameResultAsOne) {
  const auto k = kernel(kRowSum);
  sweep::SweepOptions one, four;
  four.jobs = 4;
  std::size_t calls = 0, last = 0;
  four.progress = [&](std::size_t done, std::size_t total) {
    ++calls;
    EXPECT_EQ(done, last + 1);
    EXPECT_EQ(total, 6u);
    last = done;
  };
  auto zero_times = [](sweep::SweepResult r) {
    for (auto &c : r.configs)
      c.check_ms = c.run_ms = 0;
    if (r.smallest_failure) r.smallest_failure->check_ms = r.smallest_failure->run_ms = 0;
    return sweep::to_json(r);
  };
  const std::string a = zero_times(result(sweep::sweep(k, one)));
  const std::string b = zero_times(result(sweep::sweep(k, four)));
  EXPECT_EQ(a, b);
  EXPECT_EQ(calls, 6u);
}

TEST(Sweep, ThreadsSharingTheSolversQueryCacheGiveTheSameVerdictsAsOneThreadAndAsEvaluation) {
  // The solver path (its per-thread Z3 contexts and the shared query cache)
  // on two threads; the CI's TSan build runs this.
  const auto k = kernel(kRowSum);
  sweep::SweepOptions evaluated, solved_one, solved_two;
  evaluated.run = solved_one.run = solved_two.run = false;
  solved_one.enumerate_max_points = solved_two.enumerate_max_points = 0;
  solved_two.jobs = 2;
  auto verdicts = [](const sweep::SweepResult &r) {
    std::string s;
    for (const auto &c : r.configs) {
      s += std::string(sweep::to_string(c.outcome)) + ":";
      for (const auto &rule : c.rules)
        s += rule + ",";
      s += " ";
    }
    return s;
  };
  const std::string a = verdicts(result(sweep::sweep(k, evaluated)));
  EXPECT_EQ(verdicts(result(sweep::sweep(k, solved_one))), a);
  EXPECT_EQ(verdicts(result(sweep::sweep(k, solved_two))), a);
  EXPECT_NE(a.find("violation"), std::string::npos) << a;
}
