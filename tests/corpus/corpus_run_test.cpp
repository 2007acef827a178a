// The executor agrees with the corpus' expectations: every unit expected to
// verify runs correctly in every DMA mode, and every pipeline with an expected
// race, hang or leak fails in at least one mode — the verifier and the
// executor cross-check each other on the same programs.
#include "executor/run.hpp"
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace pipecheck;
namespace fs = std::filesystem;
using testing_corpus::corpus_files;
using testing_corpus::read;
using testing_corpus::test_name;

namespace {

// Runs at the largest of a few scales that keeps every block whole, so the
// corpus' realistic sizes stay fast.
executor::RunReport run_scaled(const std::variant<spec::KernelSpec, spec::Program> &u,
                               const spec::Env &sets = {}) {
  executor::RunOptions o;
  o.overrides = sets;
  o.max_memory_bytes = 512ull << 20;
  executor::RunReport r;
  for (std::int64_t scale : {16, 8, 4, 2, 1}) {
    o.scale = std::holds_alternative<spec::Program>(u) ? 1 : scale;
    r = std::visit([&](const auto &x) { return executor::run_all_modes(x, o); }, u);
    if (r.status != executor::RunStatus::bad_input) return r;
    if (std::holds_alternative<spec::Program>(u)) return r;
  }
  return r;
}

// Whether a line in [first, last] holds a `# expect-run: fail` comment.
bool expects_run_failure(const spec::SourceFile &src, int first, int last) {
  std::istringstream in(src.text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (n >= first && n <= last && line.find("# expect-run: fail") != std::string::npos) return true;
  return false;
}

// Whether a line in [first, last] marks an expectation as a false alarm
// (`# expect: RULE (false alarm...)`): the finding is a known imprecision of
// the rules, so the unit must still run correctly.
bool has_false_alarm(const spec::SourceFile &src, int first, int last) {
  std::istringstream in(src.text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (n >= first && n <= last && line.find("# expect:") != std::string::npos &&
        line.find("(false alarm") != std::string::npos)
      return true;
  return false;
}

class CorpusRun : public testing::TestWithParam<std::string> {};

} // namespace

TEST_P(CorpusRun, VerifiedUnitsPassAndRacyPipelinesFail) {
  const std::string rel = GetParam();
  spec::SourceFile src = spec::SourceFile::from_string(rel, read(fs::path(PIPECHECK_SOURCE_DIR) / rel));
  auto parsed = spec::parse_and_validate(src);
  ASSERT_TRUE(parsed.file) << spec::render(src, parsed.errors.at(0));
  const spec::File &file = *parsed.file;
  using verifier::Rule;
  static const std::set<Rule> kObservable = {Rule::slot_race,          Rule::async_operand_overwritten,
                                             Rule::wait_without_copy,  Rule::copy_never_waited,
                                             Rule::uninitialized_read, Rule::index_out_of_bounds};
  for (std::size_t u = 0; u < file.units.size(); ++u) {
    const auto &unit = file.units[u];
    int first = spec::unit_loc(unit).line;
    int last = u + 1 < file.units.size() ? spec::unit_loc(file.units[u + 1]).line - 1 : 1 << 30;
    bool verified = false, observable = false;
    for (const auto &e : file.expectations) {
      if (e.line < first || e.line > last) continue;
      verified |= e.rule == "verified";
      auto rule = verifier::find_rule(e.rule);
      observable |= rule && kObservable.count(*rule) > 0;
    }
    // `# expect-run: fail`: the run must fail, whatever checking says (a
    // body wrong in itself, which only its reference exposes).
    const bool run_fails = expects_run_failure(src, first, last);
    bool is_pipeline = std::holds_alternative<spec::Program>(unit);
    if (run_fails) {
      executor::RunReport r = run_scaled(unit);
      EXPECT_EQ(r.status, executor::RunStatus::fail)
          << rel << ":" << first << ": '" << spec::unit_name(unit) << "' expects its run to fail:\n"
          << executor::format_report(r);
      continue;
    }
    // A kernel whose findings include known false alarms is correct: its
    // run (and reference) must pass, which keeps the marker honest.
    if (!verified && !is_pipeline && has_false_alarm(src, first, last)) {
      executor::RunReport r = run_scaled(unit);
      EXPECT_EQ(r.status, executor::RunStatus::pass)
          << rel << ":" << first << ": '" << spec::unit_name(unit)
          << "' marks its findings as false alarms but its run did not pass:\n"
          << executor::format_report(r);
      continue;
    }
    if (!verified && !(is_pipeline && observable)) continue;
    // A racy pipeline runs at the trip count of the verifier's witness: the
    // executor must reproduce what the verifier found, where it found it.
    spec::Env sets;
    if (!verified) {
      verifier::Verdict v = verifier::check(unit, verifier::CheckOptions{});
      const auto &params = std::get<spec::Program>(unit).params;
      for (const auto &f : v.findings)
        for (const auto &item : f.witness.items)
          for (const auto &p : params)
            if (item.key == p.name && p.is_symbolic())
              if (auto *n = std::get_if<std::int64_t>(&item.value))
                if (!sets.count(p.name) || *n < sets[p.name]) sets[p.name] = *n;
    }
    // A run needs every symbolic param bound: 8 trips (or the nearest the
    // bounds allow) wrap every slot ring of the corpus.
    for (const auto &p : std::visit([](const auto &x) { return x.params; }, unit)) {
      if (!p.is_symbolic() || sets.count(p.name)) continue;
      spec::Env bound = spec::param_env(std::visit([](const auto &x) { return x.params; }, unit), sets);
      std::int64_t v = std::max<std::int64_t>(p.lo ? spec::eval_int(*p.lo, bound).value_or(1) : 1, 8);
      if (p.hi) v = std::min(v, spec::eval_int(*p.hi, bound).value_or(v));
      sets[p.name] = v;
    }
    executor::RunReport r = run_scaled(unit, sets);
    const std::string &name = spec::unit_name(unit);
    if (verified) {
      EXPECT_EQ(r.status, executor::RunStatus::pass)
          << rel << ":" << first << ": '" << name << "' is expected to verify but its run did not pass:\n"
          << executor::format_report(r);
    } else {
      EXPECT_EQ(r.status, executor::RunStatus::fail)
          << rel << ":" << first << ": '" << name
          << "' has an expected race, hang or leak but no DMA mode exposed it:\n"
          << executor::format_report(r);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusRun, testing::ValuesIn(corpus_files()), test_name);

TEST(CheckAndRun, AgreeThatANegativeIndexIsOutOfBoundsAtItsStatement) {
  // The issue's wrap_minus_one: when the race machine and the executor each
  // resolved places, A[i - 1] at i = 0 was the box {-1} to one and A[3] to
  // the other, so `check` said verified while `run` failed on the numbers.
  // Both now step the program with spec::Stepper.
  const std::string text = R"(pipeline wrap_minus_one:
    hbm A: f32[4, 128]
    sram X[1]: f32[128]
    sram Y[1]: f32[128]
    for i in range(1):
        Y[0] = zeros
        copy_out_start(Y[0], A[i - 1])
        copy_in_start(A[3], X[0])
        copy_out_wait(Y[0])
        copy_in_wait(X[0])
        copy_out_start(X[0], A[1])
        copy_out_wait(X[0])
)";
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("t.pk", text));
  ASSERT_TRUE(parsed.file);
  const auto &unit = parsed.file->units.at(0);
  const verifier::Verdict v = verifier::check(unit, verifier::CheckOptions{});
  ASSERT_EQ(v.status, verifier::Status::violation) << v.reason;
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, verifier::Rule::index_out_of_bounds);
  EXPECT_EQ(v.findings[0].loc.line, 7);
  const executor::RunReport r = executor::run_all_modes(std::get<spec::Program>(unit), {});
  ASSERT_FALSE(r.runs.empty());
  for (const auto &run : r.runs) {
    EXPECT_EQ(run.status, executor::RunStatus::fail) << executor::to_string(run.mode);
    EXPECT_EQ(run.loc.line, 7) << run.reason;
    EXPECT_NE(run.reason.find(v.findings[0].message.substr(0, 40)), std::string::npos)
        << run.reason << " vs " << v.findings[0].message;
  }
}
