// The HTML reports in a real browser: headless Chromium (installed by
// scripts/setup) loads a generated page of `check`, runs its script and takes
// a screenshot; the test checks the DOM after the script ran (the summary
// rows and the timeline bars it counted) and that the screenshot shows the
// bars' colours; then the page of a `run`. Skipped, and says so, only where
// no Chromium is installed.
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

struct Out {
  int code = -1;
  std::string text;
};

Out sh(const std::string &cmd) {
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

// The value of `name="..."` on the page's <body>, or "".
std::string body_attr(const std::string &dom, const std::string &name) {
  const std::size_t body = dom.find("<body");
  if (body == std::string::npos) return "";
  const std::size_t end = dom.find('>', body);
  const std::string tag = dom.substr(body, end - body);
  const std::size_t at = tag.find(" " + name + "=\"");
  if (at == std::string::npos) return "";
  const std::size_t from = at + name.size() + 3;
  return tag.substr(from, tag.find('"', from) - from);
}

std::string chromium() {
  for (const char *name : {"chromium", "chromium-browser", "google-chrome"}) {
    Out o = sh(std::string("command -v ") + name + " 2>/dev/null");
    if (o.code == 0 && !o.text.empty()) return o.text.substr(0, o.text.find('\n'));
  }
  return "";
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("pipecheck_browser_test_" + std::to_string(getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
};

} // namespace

TEST(HtmlInChromium, TheScriptRunsAndTheSummaryAndTimelineRender) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup installs it): not tested";
  TempDir dir;
  const fs::path page = dir.path / "report.html";
  Out check = sh("cd '" + kSource + "' && " + PIPECHECK_BINARY + " check --format html -o '" + page.string() +
                 "' tests/reports/golden/timeline.pk 2>&1");
  ASSERT_TRUE(fs::exists(page)) << check.text;
  const std::string html = read(page);
  const int rows = count(html, "<tr data-verdict=");
  const int bars = count(html, "<rect class=\"bar "); // not the legend's "key bar"
  ASSERT_GT(rows, 0);
  ASSERT_GT(bars, 0);

  // Chromium's profile and caches go into the temporary folder.
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --user-data-dir='" +
      (dir.path / "profile").string() + "' --window-size=1100,900";
  const std::string env = "HOME='" + dir.path.string() + "' timeout 60 '" + browser + "' " + flags;
  Out dom = sh(env + " --dump-dom 'file://" + page.string() + "' 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << dom.text;
  EXPECT_EQ(body_attr(dom.text, "data-rendered"), "yes") << "the page's script did not run";
  EXPECT_EQ(body_attr(dom.text, "data-rows"), std::to_string(rows));
  EXPECT_EQ(body_attr(dom.text, "data-bars"), std::to_string(bars));
  EXPECT_NE(body_attr(dom.text, "data-racing"), "0");
  EXPECT_NE(dom.text.find(std::to_string(rows) + " rows in the summary"), std::string::npos);

  const fs::path png = dir.path / "shot.png";
  Out shot = sh(env + " --screenshot='" + png.string() + "' 'file://" + page.string() + "' 2>&1");
  ASSERT_TRUE(fs::exists(png)) << shot.text;
  // The bars' colours (copy-in, compute, copy-out) and the verdict badge
  // (violation) are on screen, and much of the page is not white.
  Out stats = sh("python3 '" + kSource + "/tests/reports/png_colors.py' '" + png.string() +
                 "' 4e79a7 59a14f f28e2b c62828");
  ASSERT_EQ(stats.code, 0) << stats.text;
  std::istringstream in(stats.text);
  long width = 0, height = 0, nonwhite = 0;
  in >> width >> height >> nonwhite;
  EXPECT_EQ(width, 1100);
  EXPECT_GT(nonwhite, width * height / 50) << "the screenshot is (nearly) blank";
  std::string colour;
  long n = 0;
  while (in >> colour >> n)
    EXPECT_GT(n, 100) << "colour #" << colour << " is not on the screenshot";

  // The page of a run: its script counts a row per run.
  const fs::path run_page = dir.path / "run.html";
  Out ran = sh("cd '" + kSource + "' && " + PIPECHECK_BINARY + " run --format html -o '" + run_page.string() +
               "' tests/reports/golden/units.pk --kernel copy 2>&1");
  ASSERT_TRUE(fs::exists(run_page)) << ran.text;
  Out run_dom = sh(env + " --dump-dom 'file://" + run_page.string() + "' 2>/dev/null");
  EXPECT_EQ(body_attr(run_dom.text, "data-rendered"), "yes");
  EXPECT_EQ(body_attr(run_dom.text, "data-rows"), "5");
  EXPECT_EQ(body_attr(run_dom.text, "data-bars"),
            std::to_string(count(read(run_page), "<rect class=\"bar ")));
}
