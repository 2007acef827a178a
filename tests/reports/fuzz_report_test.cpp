// `pipecheck fuzz --format sarif|junit`: a sweep's configurations rendered as
// check results, one unit per configuration.
#include "reports/sweep_report.hpp"

#include "spec/parse.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace pipecheck;
namespace fs = std::filesystem;

namespace {

const std::string kSource = PIPECHECK_SOURCE_DIR;

std::pair<int, std::string> sh(const std::string &cmd) {
  std::string out;
  FILE *p = popen(("cd '" + kSource + "' && " + cmd).c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

sweep::ConfigResult config(std::int64_t bm, sweep::Outcome o, std::vector<std::string> rules = {},
                           std::string reason = "") {
  sweep::ConfigResult c;
  c.params = {{"bm", bm}};
  c.outcome = o;
  c.rules = std::move(rules);
  c.reason = std::move(reason);
  return c;
}

TEST(FuzzReport, EachConfigurationIsOneUnitWithItsOutcomeAsAVerdict) {
  const std::string text = "kernel k:\n"
                           "    param bm = 64 in {64, 128}\n"
                           "    grid = (512 // bm,)\n"
                           "    in  x: f32[512]  block=(bm,)  index=(i) -> (i,)\n"
                           "    out o: f32[512]  block=(bm,)  index=(i) -> (i,)\n"
                           "    body:\n"
                           "        o[...] = x[...]\n";
  auto src = spec::SourceFile::from_string("k.pk", text);
  auto parsed = spec::parse_and_validate(src);
  ASSERT_TRUE(parsed.file);
  const auto &k = std::get<spec::KernelSpec>(parsed.file->units[0]);
  sweep::SweepResult s;
  s.kernel = "k";
  s.swept = {"bm"};
  s.configs = {config(64, sweep::Outcome::ok), config(128, sweep::Outcome::violation, {"output-not-covered"}),
               config(256, sweep::Outcome::run_fails, {}, "eager run: o differs at 3"),
               config(512, sweep::Outcome::bad_input, {}, "a block that does not fit")};
  s.smallest_failure = config(32, sweep::Outcome::violation, {"output-not-covered"});
  auto f = reports::sweep_file_result(src, k, s);
  ASSERT_EQ(f.units.size(), 5u);
  EXPECT_EQ(f.units[0].name, "k(bm=64)");
  EXPECT_EQ(f.units[0].verdict.status, verifier::Status::verified);
  EXPECT_EQ(f.units[1].verdict.status, verifier::Status::violation);
  ASSERT_EQ(f.units[1].verdict.findings.size(), 1u);
  EXPECT_EQ(f.units[1].verdict.findings[0].loc.line, 1);
  EXPECT_NE(f.units[1].verdict.findings[0].message.find(
                "`pipecheck check k.pk --kernel k --set bm=128` shows where"),
            std::string::npos);
  EXPECT_EQ(f.units[2].verdict.status, verifier::Status::unknown);
  EXPECT_NE(f.units[2].verdict.reason.find("its run failed"), std::string::npos);
  EXPECT_EQ(f.units[3].verdict.status, verifier::Status::unknown);
  EXPECT_EQ(f.units[4].name, "k(bm=32) (smallest failure)");
  const std::string junit = reports::to_junit({f});
  EXPECT_NE(junit.find("tests=\"5\" failures=\"2\" errors=\"2\""), std::string::npos) << junit;
}

TEST(FuzzReport, FuzzWritesJUnitAndSchemaValidSarif) {
  std::string tmpl = (fs::temp_directory_path() / "pipecheck_fuzz_report_XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  const std::string fuzz = std::string(PIPECHECK_BINARY) +
                           " fuzz corpus/examples/guide_reductions.pk --kernel matmul --configs 2 --no-run";
  auto [rc, junit] = sh(fuzz + " --format junit");
  EXPECT_EQ(rc, 0) << junit;
  EXPECT_NE(junit.find("<testsuites name=\"pipecheck\" tests=\"2\" failures=\"0\" errors=\"0\""),
            std::string::npos)
      << junit;
  EXPECT_NE(junit.find("<testcase name=\"matmul(bm="), std::string::npos) << junit;
  const fs::path log = dir / "fuzz.sarif";
  auto [rc2, out] = sh(fuzz + " --format sarif -o " + log.string());
  EXPECT_EQ(rc2, 0) << out;
  const std::string schema = kSource + "/.deps/sarif-schema-2.1.0.json";
  if (fs::exists(schema)) {
    auto [v, text] =
        sh("/usr/bin/python3 tests/reports/validate_sarif.py " + schema + " " + log.string() + " 2>&1");
    EXPECT_EQ(v, 0) << text;
  } else {
    ADD_FAILURE() << schema << " is missing: scripts/setup fetches it";
  }
  fs::remove_all(dir);
}

} // namespace
