// The pipecheck executable: exit codes, located errors, formats.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

namespace {

struct Out {
  int code = -1;
  std::string text; // stdout and stderr
};

Out run(const std::string &args) {
  std::string cmd = std::string(PIPECHECK_BINARY) + " " + args + " 2>&1";
  Out o;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    o.text.append(buf, n);
  int st = pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

std::string temp_file(const std::string &name, const std::string &text) {
  auto dir = std::filesystem::temp_directory_path() / ("pipecheck_cli_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

std::string source(const std::string &rel) { return std::string(PIPECHECK_SOURCE_DIR) + "/" + rel; }

const char *kKernel = R"(kernel copy:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";

} // namespace

TEST(Cli, FmtPrintsTheCanonicalFormAndExitsZero) {
  std::string f = temp_file(
      "k.pk", "kernel copy:\n  grid=(8)\n  in x: f32[1024,128] block=(128,128) index=(i)->(i,0)\n"
              "  out o: f32[1024,128] block=(128,128) index=(i)->(i,0)\n  body:\n    o[...]=x[...]\n");
  Out o = run("fmt " + f);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("    grid = (8,)\n"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("    in x: f32[1024, 128] block=(128, 128) index=(i) -> (i, 0)\n"), std::string::npos)
      << o.text;
  std::string g = temp_file("k2.pk", o.text);
  EXPECT_EQ(run("fmt " + g).text, o.text);
}

TEST(Cli, BadInputExitsThreeWithFileLineColumnAndACaret) {
  std::string f =
      temp_file("bad.pk", "kernel k:\n    grid = (8,)\n    out o: f32[8] block=(2,) index=(i, j) -> (i)\n"
                          "    body:\n        o[...] = zeros\n");
  for (const char *cmd : {"fmt ", "check ", "lower --kernel k ", "run "}) {
    Out o = run(cmd + f);
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_NE(o.text.find(f + ":3:5: error: the index map of operand 'o' takes 2 grid indices"),
              std::string::npos)
        << cmd << o.text;
    EXPECT_NE(o.text.find("    out o: f32[8] block=(2,) index=(i, j) -> (i)\n    ^"), std::string::npos)
        << o.text;
  }
}

TEST(Cli, AMissingFileIsBadInput) {
  Out o = run("fmt /nonexistent/x.pk");
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("/nonexistent/x.pk: error: cannot open file"), std::string::npos) << o.text;
}

TEST(Cli, UnknownOptionsAndCommandsAreBadInput) {
  EXPECT_EQ(run("frobnicate").code, 3);
  EXPECT_EQ(run("check --no-such-flag x.pk").code, 3);
  EXPECT_EQ(run("check --format yaml " + source("corpus/examples/guide_elementwise.pk")).code, 3);
}

TEST(Cli, CheckRejectsAnUnknownTargetAndAMalformedSet) {
  std::string f = temp_file("k.pk", kKernel);
  Out t = run("check --target tpu_v99 " + f);
  EXPECT_EQ(t.code, 3);
  EXPECT_NE(t.text.find("error: --target tpu_v99: unknown target"), std::string::npos) << t.text;
  Out s = run("check --set m " + f);
  EXPECT_EQ(s.code, 3);
  EXPECT_NE(s.text.find("error: --set m: expects NAME=VALUE"), std::string::npos) << s.text;
  Out v = run("check --set m=abc " + f);
  EXPECT_EQ(v.code, 3);
}

TEST(Cli, CheckNeverPrintsVerifiedForAnUnknownVerdict) {
  Out o = run("check " + source("corpus/examples/guide_pipelines.pk"));
  for (std::size_t at = o.text.find("unknown: "); at != std::string::npos;
       at = o.text.find("unknown: ", at + 1)) {
    std::size_t end = o.text.find('\n', at);
    EXPECT_EQ(o.text.substr(at, end - at).find("verified:"), std::string::npos);
  }
  if (o.text.find("unknown:") != std::string::npos) {
    EXPECT_NE(o.code, 0);
  }
}

TEST(Cli, CheckJsonHasTheContractFields) {
  Out o = run("check --format json " + source("corpus/examples/guide_elementwise.pk") + " 2>/dev/null");
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.text;
  EXPECT_EQ(j["tool"], "pipecheck");
  EXPECT_EQ(j["version"], "0.1.0");
  ASSERT_TRUE(j["results"].is_array());
  ASSERT_FALSE(j["results"].empty());
  for (const auto &r : j["results"]) {
    EXPECT_TRUE(r.contains("file"));
    EXPECT_TRUE(r.contains("kernel"));
    EXPECT_TRUE(r.contains("verdict"));
    EXPECT_TRUE(r.contains("seconds"));
    EXPECT_TRUE(r["findings"].is_array());
    for (const auto &f : r["findings"])
      for (const char *k : {"rule", "severity", "line", "column", "message", "witness"})
        EXPECT_TRUE(f.contains(k)) << k;
  }
}

TEST(Cli, CheckOutputOrderIsTheSameWithManyJobs) {
  std::string corpus = source("corpus/");
  Out one = run("check --format json --jobs 1 " + corpus);
  Out many = run("check --format json --jobs 4 " + corpus);
  auto a = nlohmann::json::parse(one.text, nullptr, false);
  auto b = nlohmann::json::parse(many.text, nullptr, false);
  ASSERT_FALSE(a.is_discarded());
  ASSERT_FALSE(b.is_discarded());
  ASSERT_EQ(a["results"].size(), b["results"].size());
  for (std::size_t i = 0; i < a["results"].size(); ++i) {
    EXPECT_EQ(a["results"][i]["file"], b["results"][i]["file"]);
    EXPECT_EQ(a["results"][i]["kernel"], b["results"][i]["kernel"]);
    EXPECT_EQ(a["results"][i]["verdict"], b["results"][i]["verdict"]);
  }
  EXPECT_EQ(one.code, many.code);
}

TEST(Cli, SelectingAnUnknownUnitNamesTheOnesThereAre) {
  Out o = run("lower --kernel nope " + source("corpus/examples/guide_elementwise.pk"));
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("no kernel or pipeline named 'nope'"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("add_matrices_pipelined"), std::string::npos) << o.text;
}

TEST(Cli, ExplainKnowsEveryRuleAndRejectsOthers) {
  for (const char *r :
       {"reduction-not-last-axis", "slot-race", "async-operand-overwritten", "sram-capacity"}) {
    Out o = run(std::string("explain ") + r);
    EXPECT_EQ(o.code, 0) << r;
    EXPECT_NE(o.text.find(r), std::string::npos) << o.text;
  }
  Out bad = run("explain no-such-rule");
  EXPECT_EQ(bad.code, 3);
  EXPECT_NE(bad.text.find("slot-race"), std::string::npos);
}

TEST(Cli, RunWithCudaBackendAndNoDeviceIsAnEnvironmentError) {
  std::string f = temp_file("k.pk", kKernel);
  Out o = run("run --backend cuda " + f);
  EXPECT_EQ(o.code, 4) << o.text;
}
