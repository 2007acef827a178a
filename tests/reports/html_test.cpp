// The HTML report of `pipecheck check --format html`: its golden file, a page
// that fetches nothing, escaping of everything from the input, the pipeline
// timeline's lanes and bars, and a bounded page for a 2^20-step grid.
//
// PIPECHECK_UPDATE_GOLDEN=1 rewrites the golden file from the current output.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

const std::string kSource = PIPECHECK_SOURCE_DIR;
const std::string kInputs = "tests/reports/golden/units.pk tests/reports/golden/timeline.pk "
                            "tests/reports/golden/bad_input.pk";

struct Out {
  int code = -1;
  std::string text;
};

// Runs `pipecheck ARGS` in the source folder (report paths are relative to it).
Out run(const std::string &args) {
  Out o;
  FILE *p = popen(("cd '" + kSource + "' && " + std::string(PIPECHECK_BINARY) + " " + args).c_str(), "r");
  if (!p) return o;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    o.text.append(buf, n);
  int st = pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

std::string read(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int count(const std::string &s, const std::string &what) {
  int n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size()))
    ++n;
  return n;
}

// Timings differ from run to run: `<td class="time">0.012 s</td>` -> `0`.
std::string normalized(const std::string &html) {
  std::string r;
  const std::string cell = "<td class=\"time\">";
  std::size_t from = 0;
  for (std::size_t p; (p = html.find(cell, from)) != std::string::npos;) {
    const std::size_t end = html.find("</td>", p);
    const bool empty = end == p + cell.size();
    r += html.substr(from, p - from) + cell + (empty ? "" : "0");
    from = end;
  }
  return r + html.substr(from);
}

// The section of the page about one unit.
std::string section(const std::string &html, const std::string &unit) {
  const std::size_t at = html.find("<h2>kernel " + unit + " ");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</section>", at) - at);
}

} // namespace

TEST(HtmlReport, MatchesItsGoldenFile) {
  Out o = run("check --format html " + kInputs + " 2>/dev/null");
  EXPECT_EQ(o.code, 3) << "bad input outranks the violations";
  const std::string got = normalized(o.text);
  const std::string golden = kSource + "/tests/reports/golden/units.html";
  if (std::getenv("PIPECHECK_UPDATE_GOLDEN")) std::ofstream(golden, std::ios::binary) << got;
  EXPECT_EQ(got, read(golden)) << "differs from " << golden << " (PIPECHECK_UPDATE_GOLDEN=1 rewrites it)";
}

TEST(HtmlReport, IsOnePageThatFetchesNothing) {
  Out o = run("check --format html corpus 2>/dev/null");
  const std::string &h = o.text;
  ASSERT_NE(h.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_EQ(h.find("http://"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos) << "no <script src>, <img src>";
  EXPECT_EQ(h.find("<link"), std::string::npos) << "no stylesheet links";
  EXPECT_EQ(h.find("@import"), std::string::npos);
  // Every href and url() points into the page itself.
  for (const std::string attr : {"href=\"", "url("})
    for (std::size_t p = h.find(attr); p != std::string::npos; p = h.find(attr, p + 1))
      EXPECT_EQ(h[p + attr.size()], '#') << h.substr(p, 40);
  EXPECT_EQ(count(h, "<style>"), 1);
  EXPECT_EQ(count(h, "<script>"), 1);
  EXPECT_GT(count(h, "<svg class=\"timeline\""), 40) << "a timeline for most kernels of the corpus";
}

TEST(HtmlReport, EscapesPathsSourceLinesAndMessages) {
  // The source comes from standard input (its path is "<stdin>"); the line
  // of its finding (output-not-covered) carries markup in a comment.
  const fs::path in = fs::temp_directory_path() / ("pipecheck_html_test_" + std::to_string(getpid()) + ".pk");
  std::ofstream(in)
      << "kernel k_with_markup:\n"
         "    grid = (8,)\n"
         "    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
         "    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (0, 0)  # <script>alert(1)</script> "
         "& \"q\"\n"
         "    body:\n"
         "        o[...] = x[...]\n";
  Out o = run("check --format html - < '" + in.string() + "' 2>/dev/null");
  fs::remove(in);
  ASSERT_NE(o.text.find("k_with_markup"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("<script>alert"), std::string::npos);
  EXPECT_NE(o.text.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot;"), std::string::npos);
  EXPECT_NE(o.text.find("&lt;stdin&gt;"), std::string::npos);
  EXPECT_EQ(o.text.find("<stdin>"), std::string::npos);
}

TEST(HtmlReport, DrawsALanePerSlotOfEachOperandAndACopyAndComputeBarPerStep) {
  Out o = run("check --format html tests/reports/golden/units.pk 2>/dev/null");
  const std::string copy = section(o.text, "copy");
  ASSERT_FALSE(copy.empty()) << o.text;
  for (const std::string lane : {">x[0]<", ">x[1]<", ">compute<", ">o[0]<", ">o[1]<"})
    EXPECT_NE(copy.find(lane), std::string::npos) << lane;
  EXPECT_EQ(count(copy, "<rect class=\"bar copy-in\""), 8);
  EXPECT_EQ(count(copy, "<rect class=\"bar copy-out\""), 8);
  EXPECT_EQ(count(copy, "<rect class=\"bar compute\""), 8);
  EXPECT_EQ(count(copy, "<rect class=\"bubble\""), 2) << "start-up and drain";
  EXPECT_NE(copy.find("SRAM footprint"), std::string::npos);
}

TEST(HtmlReport, AKernelShowsThePerformanceModelsLineUnlessItsGridIsTooLongToWalk) {
  Out o = run("check --format html tests/reports/golden/units.pk 2>/dev/null");
  const std::string copy = section(o.text, "copy");
  ASSERT_FALSE(copy.empty()) << o.text;
  EXPECT_NE(copy.find("<p class=\"model\">Performance model: "), std::string::npos) << copy;
  EXPECT_NE(copy.find(" predicted on tpu_v5e (alpha "), std::string::npos) << copy;
  EXPECT_NE(copy.find("-bound"), std::string::npos) << copy;
  EXPECT_NE(copy.find("utilization "), std::string::npos) << copy;
  const std::string big = section(o.text, "too_large_to_check");
  ASSERT_FALSE(big.empty());
  EXPECT_EQ(big.find("Performance model"), std::string::npos);
}

TEST(HtmlReport, AMillionStepGridDrawsItsFirstStepsOnASmallPage) {
  Out o = run("check --format html tests/reports/golden/units.pk 2>/dev/null");
  const std::string big = section(o.text, "too_large_to_check");
  ASSERT_FALSE(big.empty());
  EXPECT_NE(big.find("1048576 grid steps"), std::string::npos) << big.substr(0, 2000);
  EXPECT_NE(big.find("class=\"elided\""), std::string::npos);
  EXPECT_LE(count(big, "<rect class=\"bar compute\""), 20);
  EXPECT_LT(o.text.size(), 400u * 1024);
}

TEST(HtmlReport, ARacingPairIsOutlinedOnTheTimeline) {
  Out o = run("check --format html tests/reports/golden/timeline.pk 2>/dev/null");
  EXPECT_GE(count(o.text, " racing\""), 2) << "both accesses of the race";
  EXPECT_NE(o.text.find("the racing pair is outlined"), std::string::npos);
}

TEST(HtmlReport, DashOWritesTheSamePage) {
  const fs::path out =
      fs::temp_directory_path() / ("pipecheck_html_test_" + std::to_string(getpid()) + ".html");
  Out o = run("check --format html -o '" + out.string() + "' tests/reports/golden/units.pk 2>/dev/null");
  Out s = run("check --format html tests/reports/golden/units.pk 2>/dev/null");
  EXPECT_EQ(o.code, s.code);
  EXPECT_EQ(normalized(read(out)), normalized(s.text));
  fs::remove(out);
}

TEST(HtmlReport, RunDrawsTheLoweredScheduleAndAMeasuredTimelinePerRun) {
  Out o = run("run --format html tests/reports/golden/units.pk --kernel copy 2>/dev/null");
  EXPECT_EQ(o.code, 0);
  const std::string &h = o.text;
  ASSERT_NE(h.find("<!DOCTYPE html>"), std::string::npos) << h;
  EXPECT_EQ(count(h, "<tr data-verdict=\"pass\""), 5) << "eager, on_wait and three random seeds";
  EXPECT_EQ(count(h, "<svg class=\"timeline measured\""), 5);
  EXPECT_NE(h.find("The schedule (lowered)"), std::string::npos);
  EXPECT_EQ(count(h, "of the transfer time overlapped compute"), 5);
  // Every run moves 8 blocks in and 8 out: 16 transfers per measured timeline
  // and 8 of each kind on the schedule.
  EXPECT_EQ(count(h, "<rect class=\"bar copy-in\""), 8 + 5 * 8);
  EXPECT_EQ(count(h, "<rect class=\"bar copy-out\""), 8 + 5 * 8);
  EXPECT_EQ(h.find("http://"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos);
}
