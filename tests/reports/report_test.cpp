// The reports of `pipecheck check` in every format: golden files, the SARIF
// 2.1.0 schema, JUnit's structure, files written with -o, text options.
//
// PIPECHECK_UPDATE_GOLDEN=1 rewrites the golden files from the current output.
#include "reports/report.hpp"
#include "verifier/rule.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

const std::string kSource = PIPECHECK_SOURCE_DIR;
const std::string kGoldenInputs = "tests/reports/golden/units.pk tests/reports/golden/bad_input.pk";

struct Out {
  int code = -1;
  std::string text;
};

// Runs a shell command in the source folder (so report paths are relative to
// it); `args` follows the binary and may redirect.
Out sh(const std::string &cmd) {
  Out o;
  FILE *p = popen(("cd '" + kSource + "' && " + cmd).c_str(), "r");
  if (!p) return o;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    o.text.append(buf, n);
  int st = pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

Out run(const std::string &args) { return sh(std::string(PIPECHECK_BINARY) + " " + args); }

std::string read(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Timings differ from run to run: they are zeroed before comparing.
std::string normalized(const std::string &format, const std::string &report) {
  if (format == "json") {
    auto j = nlohmann::json::parse(report);
    for (auto &r : j["results"])
      if (r.contains("seconds")) r["seconds"] = 0;
    return j.dump(2) + "\n";
  }
  if (format != "junit") return report;
  // time="1.234567" -> time="0" (no <regex>: GCC 12 warns inside it under ASan).
  std::string r;
  const std::string attr = "time=\"";
  std::size_t from = 0;
  for (std::size_t p; (p = report.find(attr, from)) != std::string::npos;) {
    const std::size_t end = report.find('"', p + attr.size());
    r += report.substr(from, p - from) + attr + "0\"";
    from = end + 1;
  }
  return r + report.substr(from);
}

// A fresh folder, removed with everything in it at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("pipecheck_reports_test_" + std::to_string(getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
};

const char *const kFormats[] = {"text", "json", "sarif", "junit"};

std::string golden_path(const std::string &format) {
  const std::string ext = format == "junit" ? "junit.xml" : format == "text" ? "txt" : format;
  return kSource + "/tests/reports/golden/units." + ext;
}

nlohmann::json sarif_of(const std::string &args) {
  Out o = run("check --format sarif " + args + " 2>/dev/null");
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << o.text;
  return j;
}

} // namespace

TEST(Reports, EveryFormatMatchesItsGoldenFile) {
  const bool update = std::getenv("PIPECHECK_UPDATE_GOLDEN") != nullptr;
  for (const std::string format : kFormats) {
    Out o = run("check --color never --format " + format + " " + kGoldenInputs + " 2>/dev/null");
    EXPECT_EQ(o.code, 3) << format << ": bad input outranks the violations";
    const std::string got = normalized(format, o.text);
    if (update) std::ofstream(golden_path(format), std::ios::binary) << got;
    EXPECT_EQ(got, read(golden_path(format)))
        << format << " differs from " << golden_path(format) << " (PIPECHECK_UPDATE_GOLDEN=1 rewrites it)";
  }
}

TEST(Reports, EveryFormatWrittenWithDashOIsTheReportOnStandardOutput) {
  TempDir dir;
  for (const std::string format : kFormats) {
    const fs::path file = dir.path / ("report." + format);
    Out to_file = run("check --format " + format + " " + kGoldenInputs + " -o " + file.string());
    EXPECT_EQ(to_file.code, 3);
    EXPECT_EQ(to_file.text, "") << "nothing but the file is written";
    Out to_stdout = run("check --format " + format + " " + kGoldenInputs + " -o - 2>/dev/null");
    EXPECT_EQ(to_stdout.code, 3);
    EXPECT_FALSE(fs::exists(kSource + "/-")) << "-o - is standard output, not a file named -";
    EXPECT_EQ(normalized(format, read(file)), normalized(format, to_stdout.text)) << format;
  }
}

TEST(Reports, SarifOfTheWholeCorpusIsValidAgainstTheSarif210Schema) {
  const std::string schema = kSource + "/.deps/sarif-schema-2.1.0.json";
  ASSERT_TRUE(fs::exists(schema)) << schema << " is missing: scripts/setup fetches it";
  TempDir dir;
  const fs::path log = dir.path / "corpus.sarif";
  // The corpus has a finding of every rule; the golden inputs add an unknown
  // verdict and bad input.
  run("check --format sarif corpus " + kGoldenInputs + " -o " + log.string());
  ASSERT_TRUE(fs::exists(log));
  auto j = nlohmann::json::parse(read(log));
  EXPECT_GT(j["runs"][0]["results"].size(), 50u);
  Out v = sh("/usr/bin/python3 tests/reports/validate_sarif.py " + schema + " " + log.string() + " 2>&1");
  EXPECT_EQ(v.code, 0) << v.text;
  EXPECT_NE(v.text.find("0 schema violations (Draft4Validator)"), std::string::npos) << v.text;
}

TEST(Reports, TheSchemaValidatorRejectsAnInvalidSarifLog) {
  const std::string schema = kSource + "/.deps/sarif-schema-2.1.0.json";
  ASSERT_TRUE(fs::exists(schema)) << schema << " is missing: scripts/setup fetches it";
  TempDir dir;
  auto j = sarif_of(kGoldenInputs);
  j["runs"][0]["results"][0]["level"] = "fatal";
  const fs::path log = dir.path / "bad.sarif";
  std::ofstream(log) << j.dump();
  Out v = sh("/usr/bin/python3 tests/reports/validate_sarif.py " + schema + " " + log.string() + " 2>&1");
  EXPECT_EQ(v.code, 1) << v.text;
  EXPECT_NE(v.text.find("runs/0/results/0/level"), std::string::npos) << v.text;
}

TEST(Reports, SarifDescribesEveryRuleOfTheRuleTable) {
  auto j = sarif_of(kGoldenInputs);
  const auto &driver = j["runs"][0]["tool"]["driver"];
  EXPECT_EQ(driver["name"], "pipecheck");
  EXPECT_EQ(driver["version"], "0.1.0");
  const auto table = pipecheck::verifier::rule_table();
  ASSERT_EQ(driver["rules"].size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto &r = driver["rules"][i];
    EXPECT_EQ(r["id"], std::string(table[i].id));
    EXPECT_EQ(r["shortDescription"]["text"], std::string(table[i].summary));
    EXPECT_FALSE(r["fullDescription"]["text"].get<std::string>().empty());
    EXPECT_FALSE(r.contains("helpUri")); // (an absolute URI there, or none)
    EXPECT_NE(r["help"]["text"].get<std::string>().find(table[i].anchor), std::string::npos);
  }
  for (const auto &res : j["runs"][0]["results"])
    EXPECT_EQ(driver["rules"][res["ruleIndex"].get<std::size_t>()]["id"], res["ruleId"]);
}

TEST(Reports, ASarifRaceResultHasTheOtherAccessAsARelatedLocationAndItsTraceAsACodeFlow) {
  auto j = sarif_of(kGoldenInputs);
  bool seen = false;
  for (const auto &r : j["runs"][0]["results"]) {
    if (r["ruleId"] != "slot-race") continue;
    seen = true;
    EXPECT_EQ(r["level"], "error");
    const auto &pl = r["locations"][0]["physicalLocation"];
    EXPECT_EQ(pl["artifactLocation"]["uri"], "tests/reports/golden/units.pk");
    EXPECT_EQ(pl["region"]["startLine"], 29);
    EXPECT_EQ(pl["region"]["startColumn"], 9);
    bool first_access = false;
    for (const auto &rl : r["relatedLocations"])
      first_access |= rl["physicalLocation"]["region"]["startLine"] == 28 &&
                      rl["message"]["text"].get<std::string>().find("first access") != std::string::npos;
    EXPECT_TRUE(first_access) << r["relatedLocations"].dump(2);
    const auto &flow = r["codeFlows"][0]["threadFlows"][0]["locations"];
    ASSERT_EQ(flow.size(), 3u) << flow.dump(2);
    EXPECT_EQ(flow[0]["executionOrder"], 4);
    EXPECT_EQ(flow[1]["importance"], "essential") << "the event the finding is anchored at";
  }
  EXPECT_TRUE(seen) << j.dump(2);
}

TEST(Reports, SarifUrisAreRelativeToTheWorkingDirectoryEvenForAbsolutePaths) {
  auto j = sarif_of(kSource + "/tests/reports/golden/units.pk");
  ASSERT_FALSE(j["runs"][0]["results"].empty());
  for (const auto &r : j["runs"][0]["results"])
    EXPECT_EQ(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
              "tests/reports/golden/units.pk");
}

TEST(Reports, SarifColumnsCountCodePointsNotBytes) {
  // A bad word after a file name of two two-byte characters: its column is
  // two less in code points than in bytes.
  TempDir dir;
  const fs::path pk = dir.path / "col.pk";
  std::ofstream(pk) << "kernel g:\n    grid = (4,)\n"
                       "    prefetch ids: i32[4] from \"\xc3\xa9\xc3\xa9.npy\" in [0, 4) bogus\n"
                       "    in  x: f32[512, 128]  block=(128, 128)  index=(i, ids) -> (ids[i], 0)\n"
                       "    out o: f32[512, 128]  block=(128, 128)  index=(i, ids) -> (i, 0)\n"
                       "    body:\n        o[...] = x[...]\n";
  Out text = run("check " + pk.string() + " 2>&1");
  const auto at = text.text.find("col.pk:3:");
  ASSERT_NE(at, std::string::npos) << text.text;
  const int byte_col = std::stoi(text.text.substr(at + 9));
  auto j = sarif_of(pk.string());
  EXPECT_EQ(j["runs"][0]["columnKind"], "unicodeCodePoints");
  const auto &n = j["runs"][0]["invocations"][0]["toolExecutionNotifications"][0];
  EXPECT_EQ(n["locations"][0]["physicalLocation"]["region"]["startColumn"], byte_col - 2) << n.dump();
}

TEST(Reports, ASarifUriOfARelativePathOutOfTheWorkingDirectoryIsAFileUri) {
  // (`../x.pk` resolves nowhere in a checkout.)
  Out o = sh("cd tests/cli && " + std::string(PIPECHECK_BINARY) +
             " check ../reports/golden/units.pk --format sarif 2>/dev/null");
  auto j = nlohmann::json::parse(o.text);
  ASSERT_FALSE(j["runs"][0]["results"].empty());
  EXPECT_EQ(j["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "file://" + (fs::path(kSource) / "tests/reports/golden/units.pk").lexically_normal().string());
}

TEST(Reports, SarifReportsUnknownVerdictsAndBadInputAsNotifications) {
  auto j = sarif_of(kGoldenInputs);
  const auto &inv = j["runs"][0]["invocations"][0];
  EXPECT_EQ(inv["executionSuccessful"], false);
  std::set<std::string> levels;
  for (const auto &n : inv["toolExecutionNotifications"])
    levels.insert(n["level"].get<std::string>());
  EXPECT_EQ(levels, (std::set<std::string>{"error", "warning"}));
}

TEST(Reports, JunitHasATestcasePerUnitAFailurePerViolationAndAnErrorPerUnknownOrBadFile) {
  Out o = run("check --format junit " + kGoldenInputs + " 2>/dev/null");
  auto count = [&](const std::string &s) {
    std::size_t n = 0;
    for (auto p = o.text.find(s); p != std::string::npos; p = o.text.find(s, p + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("<testcase "), 5u) << o.text; // four units and the bad file
  EXPECT_EQ(count("<failure "), 2u) << o.text;
  EXPECT_EQ(count("<error type=\"unknown\""), 1u) << o.text;
  EXPECT_EQ(count("<error type=\"bad-input\""), 1u) << o.text;
  EXPECT_NE(o.text.find("<testsuites name=\"pipecheck\" tests=\"5\" failures=\"2\" errors=\"2\""),
            std::string::npos)
      << o.text;
  EXPECT_NE(o.text.find("&lt;- first access"), std::string::npos) << "notes are escaped: " << o.text;
}

TEST(Reports, JsonHasOneKeyForTheUnitsNameAndOneForItsKindAndASummary) {
  Out o = run("check --format json " + kGoldenInputs + " 2>/dev/null");
  auto j = nlohmann::json::parse(o.text);
  std::set<std::string> kinds;
  for (const auto &r : j["results"]) {
    if (r["verdict"] == "error") continue;
    EXPECT_TRUE(r.contains("unit")) << r.dump();
    EXPECT_FALSE(r.contains("kernel") || r.contains("pipeline")) << r.dump();
    kinds.insert(r["kind"].get<std::string>());
    for (const auto &f : r["findings"])
      for (const auto &n : f["notes"])
        EXPECT_GT(n["column"].get<int>(), 0) << n.dump();
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"kernel", "pipeline"}));
  EXPECT_EQ(j["summary"], nlohmann::json({{"files", 2},
                                          {"units", 4},
                                          {"verified", 1},
                                          {"violation", 2},
                                          {"unknown", 1},
                                          {"error", 1},
                                          {"findings", 2}}));
}

TEST(Reports, TextShowsTheSourceLineOncePerFindingNotAgainForANoteOnTheSameLine) {
  Out o = run("check tests/reports/golden/units.pk 2>/dev/null");
  auto count = [&](const std::string &s) {
    std::size_t n = 0;
    for (auto p = o.text.find(s); p != std::string::npos; p = o.text.find(s, p + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("\n        Y[cur] = X[cur] * 2\n"), 1u) << o.text;
  EXPECT_EQ(count("\n    out o: f32[512, 256]   block=(128, 256)  index=(i) -> (i % 4, 0)\n"), 1u) << o.text;
  EXPECT_NE(o.text.find("note: event 5: Y[cur] = X[cur] * 2"), std::string::npos) << o.text;
}

TEST(Reports, TextHasASummaryLinePerFileAndATotal) {
  Out o = run("check " + kGoldenInputs + " 2>/dev/null");
  EXPECT_NE(o.text.find("\ntests/reports/golden/units.pk: 1 verified, 2 with violations, 1 unknown\n"),
            std::string::npos)
      << o.text;
  EXPECT_NE(
      o.text.find("\ntests/reports/golden/bad_input.pk: 0 verified, 0 with violations, 0 unknown, 1 file "
                  "with errors\n"),
      std::string::npos)
      << o.text;
  EXPECT_TRUE(o.text.ends_with("\ntotal: 1 verified, 2 with violations, 1 unknown, 1 file with errors\n"))
      << o.text;
}

TEST(Reports, ColourIsUsedWithAlwaysEvenUnderNoColorAndNeverWithNever) {
  Out always = sh("NO_COLOR=1 " + std::string(PIPECHECK_BINARY) +
                  " check --color always tests/reports/golden/units.pk 2>/dev/null");
  EXPECT_NE(always.text.find("\033[1;31merror:\033[0m"), std::string::npos) << always.text;
  Out never = run("check --color never tests/reports/golden/units.pk 2>/dev/null");
  EXPECT_EQ(never.text.find('\033'), std::string::npos) << never.text;
  Out piped = run("check tests/reports/golden/units.pk 2>/dev/null");
  EXPECT_EQ(piped.text.find('\033'), std::string::npos) << "auto: no colour into a pipe";
  Out bad = run("check --color sometimes tests/reports/golden/units.pk 2>&1");
  EXPECT_EQ(bad.code, 3);
  EXPECT_NE(bad.text.find("error: --color sometimes: expected auto, always or never"), std::string::npos)
      << bad.text;
}

TEST(Reports, ColourAutoOnATerminalIsOffUnderNoColor) {
  // script(1) gives the command a terminal; without it there is nothing to test.
  if (sh("command -v script >/dev/null").code != 0) GTEST_SKIP() << "script(1) is not installed";
  const std::string cmd = std::string(PIPECHECK_BINARY) + " check tests/reports/golden/units.pk";
  Out tty = sh("script -qec '" + cmd + "' /dev/null");
  EXPECT_NE(tty.text.find("\033[1;31merror:"), std::string::npos) << tty.text;
  Out no_color = sh("NO_COLOR=1 script -qec '" + cmd + "' /dev/null");
  EXPECT_EQ(no_color.text.find('\033'), std::string::npos) << no_color.text;
}

TEST(Reports, QuietPrintsOnlyFindingsAndErrors) {
  Out o = run("check --quiet " + kGoldenInputs + " 2>/dev/null");
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("[slot-race]"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("error: unknown name 'q'"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("verified:"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("unknown:"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("total:"), std::string::npos) << o.text;
}

TEST(Reports, CheckDashReadsTheFileFromStandardInput) {
  Out o = run("check --format json - < tests/reports/golden/units.pk 2>/dev/null");
  EXPECT_EQ(o.code, 1) << o.text; // a violation outranks the unknown
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.text;
  EXPECT_EQ(j["results"][0]["file"], "<stdin>");
  EXPECT_EQ(j["summary"]["units"], 4);
  Out twice = run("check - - < tests/reports/golden/units.pk 2>&1");
  EXPECT_EQ(twice.code, 3) << twice.text;
}

TEST(Reports, AnUnknownFormatIsAUsageErrorNamingTheFormats) {
  Out o = run("check --format yaml tests/reports/golden/units.pk 2>&1");
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("error: --format yaml: expected one of text, json, sarif, junit"), std::string::npos)
      << o.text;
}

// ---------------------------------------------------------------------------
// pipecheck run: json and JUnit.

namespace {

std::string normalized_run(const std::string &format, const std::string &report) {
  if (format == "json") {
    auto j = nlohmann::json::parse(report);
    for (auto &r : j["runs"])
      r["seconds"] = 0;
    return j.dump(2) + "\n";
  }
  return normalized(format, report);
}

} // namespace

TEST(RunReports, JsonAndJunitOfARunMatchTheirGoldenFiles) {
  const bool update = std::getenv("PIPECHECK_UPDATE_GOLDEN") != nullptr;
  for (const std::string format : {"json", "junit"}) {
    Out o = run("run --format " + format + " --kernel copy tests/reports/golden/units.pk 2>/dev/null");
    EXPECT_EQ(o.code, 0) << o.text;
    const std::string golden =
        kSource + "/tests/reports/golden/run_copy." + (format == "junit" ? "junit.xml" : "json");
    const std::string got = normalized_run(format, o.text);
    if (update) std::ofstream(golden, std::ios::binary) << got;
    EXPECT_EQ(got, read(golden)) << format << " differs from " << golden
                                 << " (PIPECHECK_UPDATE_GOLDEN=1 rewrites it)";
  }
}

TEST(RunReports, AFailedRunIsAJunitFailureAndAJsonRunWithItsMismatch) {
  // The racing pipeline computes the wrong rows when its copies complete
  // late: some run of the five fails.
  Out j = run(
      "run --format json --kernel prefetch_distance_2_with_2_slots --set N=4 tests/reports/golden/units.pk "
      "2>/dev/null");
  EXPECT_EQ(j.code, 1) << j.text;
  auto doc = nlohmann::json::parse(j.text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.text;
  EXPECT_EQ(doc["verdict"], "fail");
  EXPECT_EQ(doc["kind"], "pipeline");
  int failed = 0;
  for (const auto &r : doc["runs"])
    if (r["status"] == "fail") {
      ++failed;
      EXPECT_TRUE(r.contains("mismatch") || r.contains("reason")) << r.dump();
    }
  EXPECT_GT(failed, 0) << j.text;
  EXPECT_EQ(doc["summary"]["fail"], failed);
  Out x = run(
      "run --format junit --kernel prefetch_distance_2_with_2_slots --set N=4 tests/reports/golden/units.pk "
      "2>/dev/null");
  EXPECT_EQ(x.code, 1);
  std::size_t n = 0;
  for (auto p = x.text.find("<failure "); p != std::string::npos; p = x.text.find("<failure ", p + 1))
    ++n;
  EXPECT_EQ(n, static_cast<std::size_t>(failed)) << x.text;
}

TEST(RunReports, AJsonRunInOneDmaModeHasTheReportsMemoryEstimateAsAllModesDo) {
  for (const std::string dma : {"", " --dma eager"}) {
    Out o = run("run --format json --kernel copy tests/reports/golden/units.pk" + dma + " 2>/dev/null");
    EXPECT_EQ(o.code, 0) << o.text;
    auto j = nlohmann::json::parse(o.text);
    EXPECT_GT(j["memory_estimate"].get<std::uint64_t>(), 0u) << dma << ": " << o.text;
  }
}

TEST(RunReports, RunWritesEveryFormatWithDashOAndRejectsSarif) {
  TempDir dir;
  for (const std::string format : {"text", "json", "junit"}) {
    const fs::path file = dir.path / ("run." + format);
    Out o =
        run("run --format " + format + " --kernel copy tests/reports/golden/units.pk -o " + file.string());
    EXPECT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(o.text, "");
    EXPECT_FALSE(read(file).empty()) << format;
  }
  Out sarif = run("run --format sarif --kernel copy tests/reports/golden/units.pk 2>&1");
  EXPECT_EQ(sarif.code, 3);
  EXPECT_NE(sarif.text.find("error: --format sarif: expected one of text, json, junit"), std::string::npos)
      << sarif.text;
}

TEST(Reports, XmlTextKeepsValidUtf8AndReplacesOverlongFormsSurrogatesAndCodePointsPastTheRange) {
  using pipecheck::reports::xml_text;
  EXPECT_EQ(xml_text("caf\xc3\xa9 \xf0\x9f\x99\x82 <a>"), "caf\xc3\xa9 \xf0\x9f\x99\x82 &lt;a&gt;");
  EXPECT_EQ(xml_text("a\xc0\xaf"
                     "b"),
            "a??b"); // overlong '/'
  EXPECT_EQ(xml_text("a\xe0\x80\xaf"
                     "b"),
            "a???b"); // overlong, 3 bytes
  EXPECT_EQ(xml_text("a\xed\xa0\x80"
                     "b"),
            "a???b"); // a surrogate, U+D800
  EXPECT_EQ(xml_text("a\xf4\x90\x80\x80"
                     "b"),
            "a????b"); // U+110000
  EXPECT_EQ(xml_text("a\xef\xbf\xbe"
                     "b"),
            "a???b"); // U+FFFE, not an XML character
}
