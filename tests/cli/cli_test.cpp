// The pipecheck executable: exit codes, located errors, formats.
#include "tests/cli/cli_testing.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using pipecheck::testing::Out;
using pipecheck::testing::run;
using pipecheck::testing::temp_dir;
using pipecheck::testing::temp_file;

std::string source(const std::string &rel) { return std::string(PIPECHECK_SOURCE_DIR) + "/" + rel; }

const char *kKernel = R"(kernel copy:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)";

} // namespace

// ---------------------------------------------------------------------------
// Hardening: signals, writes, directories, params, targets and flag values.

namespace {

// A fresh directory removed with everything in it at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int n = 0;
    path = std::filesystem::temp_directory_path() /
           ("pipecheck_cli_hardening_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    // A test may have made a subfolder unreadable.
    for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                 ec);
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string &name, const std::string &text) const {
    auto p = path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(path))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// Runs a shell command line as it is (run() adds the binary and 2>&1).
Out shell(const std::string &cmd) {
  Out o;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
    o.text.append(buf, n);
  int st = pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

// `param m >= 1` drives the grid: the repro of the --set and run items.
const char *kSymbolic = R"(kernel k:
    param m >= 1
    grid = (m,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i % 8, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i % 8, 0)
    body:
        o[...] = x[...]
)";

// Many kernels: a check that runs for seconds.
// Grids past what check decides by evaluation, so that each kernel takes the
// solver and the grid cut (a few ms each).
std::string many_kernels(int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += "kernel k" + std::to_string(i) +
            ":\n    grid = (8192,)\n    in  x: f32[1048576, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
            "    out o: f32[1048576, 128]  block=(128, 128)  index=(i) -> (i, 0)\n    body:\n"
            "        o[...] = x[...]\n\n";
  return text;
}

// `pipecheck check FILE -o OUT` in a child whose SIGINT is as a terminal's
// foreground job has it (default), or ignored as a script's background job has
// it: whatever the harness that runs the tests set.
pid_t start_check(const std::string &file, const std::string &out, bool sigint_ignored) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, sigint_ignored ? SIG_IGN : SIG_DFL);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(PIPECHECK_BINARY, PIPECHECK_BINARY, "check", file.c_str(), "-o", out.c_str(), (char *)nullptr);
    _exit(127);
  }
  return pid;
}

// Waits (up to 30 s) until the child's main thread blocks SIGINT, i.e. its
// Ctrl-C watcher is in place: a fixed sleep is too short on a loaded machine,
// and a SIGINT sent before that kills the process by the default action.
bool watching_interrupts(pid_t pid) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("SigBlk:", 0) == 0 &&
          (std::stoull(line.substr(7), nullptr, 16) & (1ull << (SIGINT - 1))))
        return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Waits up to `limit` for the child; kills it past that. Empty when it had to.
std::optional<int> wait_for(pid_t pid, std::chrono::seconds limit) {
  auto since = std::chrono::steady_clock::now();
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - since < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return std::nullopt;
  }
  return status;
}

} // namespace

TEST(CliHardening, CtrlCDuringCheckExitsWith130AtOnceAndLeavesNoOutputFile) {
  TempDir dir;
  std::string big = dir.file("big.pk", many_kernels(3000));
  std::string out = (dir.path / "report.txt").string();
  pid_t pid = start_check(big, out, false);
  ASSERT_GE(pid, 0);
  ASSERT_TRUE(watching_interrupts(pid)) << "the check never blocked SIGINT";
  std::this_thread::sleep_for(std::chrono::milliseconds(200)); // well into the checks
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "the check ended before it was interrupted";
  auto sent = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  std::optional<int> ended = wait_for(pid, std::chrono::seconds(10));
  ASSERT_TRUE(ended) << "still running 10 s after SIGINT";
  status = *ended;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_LT(seconds, 3.0); // at once, with room for a loaded CI machine (the fallback exit is at 1 s)
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"big.pk"}) << "a report or a temporary file was left";
}

TEST(CliHardening, ACheckStartedWithCtrlCIgnoredKeepsItIgnoredAndFinishes) {
  // nohup, or `pipecheck check ... &` in a script: SIGINT is ignored on entry,
  // and a Ctrl-C meant for the script does not stop the check halfway.
  TempDir dir;
  std::string file = dir.file("some.pk", many_kernels(600));
  std::string out = (dir.path / "report.txt").string();
  pid_t pid = start_check(file, out, true);
  ASSERT_GE(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500)); // well into the checks
  kill(pid, SIGINT);
  std::optional<int> ended = wait_for(pid, std::chrono::seconds(300));
  ASSERT_TRUE(ended) << "still running after 300 s";
  ASSERT_TRUE(WIFEXITED(*ended)) << "killed by signal " << (WIFSIGNALED(*ended) ? WTERMSIG(*ended) : 0);
  EXPECT_EQ(WEXITSTATUS(*ended), 0);
  std::stringstream report;
  report << std::ifstream(out).rdbuf();
  EXPECT_TRUE(contains(report.str(), "k599")) << report.str();
}

TEST(CliHardening, AFailedWriteIsExitFourWithTheReason) {
  std::string f = source("corpus/examples/guide_elementwise.pk");
  Out o = run("check " + f + " -o /dev/full");
  EXPECT_EQ(o.code, 4) << o.text;
  EXPECT_TRUE(contains(o.text, "/dev/full")) << o.text;
  EXPECT_TRUE(contains(o.text, "No space left on device")) << o.text;
  const std::string bin = PIPECHECK_BINARY;
  Out s = shell(bin + " check " + f + " 2>&1 >/dev/full");
  EXPECT_EQ(s.code, 4) << s.text;
  EXPECT_TRUE(contains(s.text, "standard output")) << s.text;
  EXPECT_TRUE(contains(s.text, "No space left on device")) << s.text;
  Out fmt = shell(bin + " fmt " + f + " 2>&1 >/dev/full");
  EXPECT_EQ(fmt.code, 4) << fmt.text;
}

TEST(CliHardening, AnEmptyOutputFileNameIsAUsageErrorNotStandardOutput) {
  // (`-o "$OUT"` with OUT unset must not put the report on standard output.)
  std::string f = source("corpus/examples/guide_elementwise.pk");
  for (const char *cmd : {"check", "run", "fuzz", "model"}) {
    Out o = run(std::string(cmd) + " " + f + " -o ''");
    EXPECT_EQ(o.code, 3) << cmd << ": " << o.text;
    EXPECT_TRUE(contains(o.text, "an empty file name")) << cmd << ": " << o.text;
  }
}

TEST(CliHardening, AClosedPipeOnStandardOutputIsExitFourNotADeathBySigpipe) {
  // (`pipecheck check dir | head`: the reader is gone before the report.)
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  const std::string f = source("corpus/examples/guide_elementwise.pk");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    signal(SIGPIPE, SIG_DFL);
    execl(PIPECHECK_BINARY, PIPECHECK_BINARY, "check", f.c_str(), (char *)nullptr);
    _exit(127);
  }
  close(fds[1]);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 4);
}

TEST(CliHardening, OutputReplacesTheReportWholeNeverRewritingItInPlace) {
  // A new report goes to a temporary file renamed over the old one: a reader
  // of the previous report still reads all of it, and writers never mix.
  TempDir dir;
  std::string out = dir.file("report.txt", "the previous report\n");
  std::ifstream previous(out);
  Out o = run("check " + source("corpus/examples/guide_elementwise.pk") + " -o " + out);
  EXPECT_LE(o.code, 1) << o.text;
  std::stringstream old_text, new_text;
  old_text << previous.rdbuf();
  EXPECT_EQ(old_text.str(), "the previous report\n");
  new_text << std::ifstream(out).rdbuf();
  EXPECT_TRUE(contains(new_text.str(), "verified")) << new_text.str();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"report.txt"}) << "a temporary file was left";
}

TEST(CliHardening, ConcurrentWritersToOneOutputLeaveOneWholeReport) {
  TempDir dir;
  std::string out = (dir.path / "report.json").string();
  std::string cmd =
      std::string(PIPECHECK_BINARY) + " check --format json " + source("corpus/examples/") + " -o " + out;
  for (int trial = 0; trial < 3; ++trial) {
    shell(cmd + " & " + cmd + " & " + cmd + " & wait");
    std::stringstream ss;
    ss << std::ifstream(out).rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "trial " << trial << ": not one whole report:\n"
                                   << ss.str().substr(0, 400);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"report.json"}) << "a temporary file was left";
  }
}

TEST(CliHardening, FmtFormatsEveryFileOfADirectoryAndRunAndLowerRejectOne) {
  TempDir dir;
  dir.file("b.pk", kKernel);
  dir.file("a/c.pk", kKernel);
  dir.file("notes.txt", "not a spec");
  Out o = run("fmt " + dir.path.string());
  EXPECT_EQ(o.code, 0) << o.text;
  auto a = o.text.find("==> " + (dir.path / "a/c.pk").string() + " <==");
  auto b = o.text.find("==> " + (dir.path / "b.pk").string() + " <==");
  ASSERT_NE(a, std::string::npos) << o.text;
  ASSERT_NE(b, std::string::npos) << o.text;
  EXPECT_LT(a, b) << "files in path order";
  EXPECT_TRUE(contains(o.text, "kernel copy:")) << o.text;
  EXPECT_FALSE(contains(o.text, "notes.txt")) << o.text;
  for (const char *cmd : {"run ", "lower "}) {
    Out r = run(cmd + dir.path.string());
    EXPECT_EQ(r.code, 3) << cmd << r.text;
    EXPECT_TRUE(contains(r.text, dir.path.string() + ": error: is a directory")) << cmd << r.text;
  }
}

TEST(CliHardening, LowerAndFuzzOfAPipelineSayWhereItIs) {
  TempDir dir;
  std::string f =
      dir.file("p.pk", "# a pipeline\npipeline p:\n    hbm  A: f32[8, 128]\n    sram X[1]: f32[8, 128]\n"
                       "    copy_in_start(A, X[0])\n    copy_in_wait(X[0])\n");
  Out lower = run("lower " + f);
  EXPECT_EQ(lower.code, 3) << lower.text;
  EXPECT_TRUE(contains(lower.text, f + ":2:1: error: 'p' is already a pipeline\npipeline p:\n^"))
      << lower.text;
  Out fuzz = run("fuzz " + f);
  EXPECT_EQ(fuzz.code, 3) << fuzz.text;
  EXPECT_TRUE(contains(fuzz.text, f + ":2:1: error: 'p' is a pipeline")) << fuzz.text;
}

TEST(CliHardening, TwoUnitsOfOneNameAreALocatedErrorInEveryCommand) {
  TempDir dir;
  std::string f = dir.file("d.pk", "kernel k:\n    out o: f32[8]\n    body:\n        o[...] = zeros\n\n"
                                   "kernel k:\n    out o: f32[8]\n    body:\n        o[...] = zeros\n");
  for (const char *cmd : {"check ", "run ", "lower ", "fuzz ", "model "}) {
    Out out = run(std::string(cmd) + f);
    EXPECT_EQ(out.code, 3) << cmd << out.text;
    EXPECT_TRUE(contains(out.text, f + ":6:1: error: duplicate unit name 'k'")) << cmd << out.text;
  }
}

TEST(CliHardening, SetOutsideAParamsDomainOrNamingNoParamIsBadInputInEveryCommand) {
  TempDir dir;
  std::string f = dir.file("m.pk", kSymbolic);
  for (const char *cmd : {"check ", "run ", "lower "}) {
    Out zero = run(std::string(cmd) + "--set m=0 " + f);
    EXPECT_EQ(zero.code, 3) << cmd << zero.text;
    EXPECT_TRUE(contains(zero.text, f + ":2:5: error: param m = 0 (from --set) is outside its domain m >= 1"))
        << cmd << zero.text;
    Out unknown = run(std::string(cmd) + "--set m=8 --set zz=3 " + f);
    EXPECT_EQ(unknown.code, 3) << cmd << unknown.text;
    EXPECT_TRUE(contains(unknown.text, "error: --set zz=3: no param named 'zz'")) << cmd << unknown.text;
    Out typo = run(std::string(cmd) + "--set M=1024 " + f);
    EXPECT_EQ(typo.code, 3) << cmd << typo.text;
    EXPECT_TRUE(contains(typo.text, "error: --set M=1024: no param named 'M'; did you mean `m`?"))
        << cmd << typo.text;
  }
  // Across files a name is known when any unit of any file declares it.
  std::string other = dir.file("other.pk", kKernel);
  Out both = run("check --set m=8 " + f + " " + other);
  EXPECT_NE(both.code, 3) << both.text;
  EXPECT_TRUE(contains(both.text, "verified: kernel 'copy'")) << both.text;
}

TEST(CliHardening, RunWithAnUnboundSymbolicParamNamesItInsteadOfPickingEight) {
  TempDir dir;
  std::string f = dir.file("m.pk", kSymbolic);
  Out o = run("run " + f);
  EXPECT_EQ(o.code, 3) << o.text;
  EXPECT_TRUE(contains(o.text, f + ":2:5: error: param m is symbolic: bind it with --set m=VALUE")) << o.text;
  EXPECT_FALSE(contains(o.text, "FAIL")) << o.text;
  Out bound = run("run --set m=8 " + f);
  EXPECT_EQ(bound.code, 0) << bound.text;
}

TEST(CliHardening, EveryCommandRejectsAnUnknownTargetListingTheKnownOnes) {
  TempDir dir;
  std::string f = dir.file("k.pk", kKernel);
  for (const char *cmd : {"check ", "run ", "lower "}) {
    Out o = run(std::string(cmd) + "--target banana " + f);
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_TRUE(contains(o.text, "error: --target banana: unknown target; expected one of tpu_v4, tpu_v5e"))
        << cmd << o.text;
    EXPECT_FALSE(contains(o.text, "PASS")) << cmd << o.text;
  }
}

TEST(CliHardening, NegativeOrOutOfRangeFlagValuesAreUsageErrorsNamingTheFlag) {
  TempDir dir;
  std::string f = dir.file("k.pk", kKernel);
  struct Case {
    const char *args, *message;
  };
  for (const Case &c : {Case{"--max-memory -5G", "error: --max-memory -5G: expects a size"},
                        Case{"--max-memory 4x", "error: --max-memory 4x: expects a size"},
                        Case{"--seed -1", "error: --seed -1: expects a whole number from 0 to 4294967295"},
                        Case{"--seed 99999999999999999999999", "error: --seed 99999999999999999999999:"},
                        Case{"--seed 18446744073709551615", "error: --seed 18446744073709551615:"},
                        Case{"--scale 0", "error: --scale 0:"}, Case{"--scale 1.5", "error: --scale 1.5:"},
                        Case{"--dma sometimes", "error: --dma sometimes:"}}) {
    Out o = run(std::string("run ") + c.args + " " + f);
    EXPECT_EQ(o.code, 3) << c.args << o.text;
    EXPECT_TRUE(contains(o.text, c.message)) << c.args << o.text;
    EXPECT_FALSE(contains(o.text, "PASS")) << c.args << o.text;
  }
}

TEST(CliHardening, SizesAndFactorsTakeEveryDocumentedForm) {
  TempDir dir;
  std::string f = dir.file("k.pk", kKernel);
  for (const char *mem : {"4G", "4g", "4GB", "4GiB", "1100M", "1100m", "4194304k", "5000000000"}) {
    Out o = run(std::string("run --dma eager --max-memory ") + mem + " " + f);
    EXPECT_EQ(o.code, 0) << mem << o.text;
  }
  Out tiny = run("run --dma eager --max-memory 512k " + f);
  EXPECT_EQ(tiny.code, 3) << tiny.text;
  EXPECT_TRUE(contains(tiny.text, "--max-memory")) << tiny.text;
  for (const char *scale : {"2", "2.0"}) {
    Out o = run(std::string("run --dma eager --scale ") + scale + " " + f);
    EXPECT_EQ(o.code, 0) << scale << o.text;
  }
  Out help = run("run --help");
  EXPECT_TRUE(contains(help.text, "4G, 4g, 4GB, 4GiB, 512k, 1100M")) << help.text;
}

TEST(CliHardening, UnreadableInputsSayWhyAndNameTheFile) {
  Out mem = run("check /proc/self/mem");
  EXPECT_EQ(mem.code, 3) << mem.text;
  EXPECT_TRUE(contains(mem.text, "/proc/self/mem: error: cannot read file: Input/output error")) << mem.text;
  EXPECT_FALSE(contains(mem.text, "internal error")) << mem.text;
  for (const char *cmd : {"check ", "fmt ", "run ", "lower "}) {
    Out missing = run(std::string(cmd) + "/nonexistent/x.pk");
    EXPECT_EQ(missing.code, 3) << cmd << missing.text;
    EXPECT_TRUE(
        contains(missing.text, "/nonexistent/x.pk: error: cannot open file: No such file or directory"))
        << cmd << missing.text;
  }
}

TEST(CliHardening, AnEndlessInputIsRefusedInsteadOfReadForever) {
  for (const char *cmd : {"check ", "fmt ", "run ", "lower "}) {
    Out o = run(std::string(cmd) + "/dev/zero");
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_TRUE(contains(o.text, "/dev/zero: error: cannot read file: larger than 64 MiB")) << cmd << o.text;
  }
}

TEST(CliHardening, AnUnreadableSubfolderIsReportedAndTheOtherFilesAreStillChecked) {
  TempDir dir;
  dir.file("good.pk", kKernel);
  dir.file("locked/hidden.pk", kKernel);
  std::filesystem::permissions(dir.path / "locked", std::filesystem::perms::none);
  // Root reads any folder: run the check as nobody then.
  std::string prefix;
  if (geteuid() == 0) {
    if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "root without setpriv: cannot lock a folder";
    prefix = "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  Out o = shell(prefix + PIPECHECK_BINARY + " check " + dir.path.string() + " 2>&1");
  const std::string &text = o.text;
  EXPECT_EQ(o.code, 3) << text;
  EXPECT_TRUE(
      contains(text, (dir.path / "locked").string() + ": error: cannot open directory: Permission denied"))
      << text;
  EXPECT_TRUE(contains(text, "verified: kernel 'copy'")) << text;
}

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

TEST(Cli, RunAndFuzzWriteTheirReportOnBadInputAsCheckDoes) {
  // A CI job that asked for a report file gets one saying why, not nothing.
  std::string f = temp_file("bad_report.pk", "kernel k:\n    grid = (4,)\n"
                                             "    in  x: f32[512]  block=(128,)  index=(i) -> (i)\n"
                                             "    out o: f32[512]  block=(128,)  index=(i) -> (i)\n"
                                             "    body:\n        o[...] := x[...] + 1\n");
  const auto d = temp_dir();
  auto slurp = [](const std::filesystem::path &p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  Out j = run("run --format json -o " + (d / "bad_run.json").string() + " " + f);
  EXPECT_EQ(j.code, 3) << j.text;
  const auto run_json = nlohmann::json::parse(slurp(d / "bad_run.json"));
  EXPECT_EQ(run_json["verdict"], "bad_input");
  EXPECT_EQ(run_json["errors"][0]["line"], 6);
  EXPECT_EQ(run_json["errors"][0]["column"], 16);
  EXPECT_EQ(run_json["errors"][0]["message"], "expected '=' or '+=', found ':'");
  // Standard error still says it, located, with the caret.
  EXPECT_NE(j.text.find(f + ":6:16: error: expected '=' or '+=', found ':'"), std::string::npos) << j.text;

  Out x = run("run --format junit -o " + (d / "bad_run.xml").string() + " " + f);
  EXPECT_EQ(x.code, 3) << x.text;
  const std::string junit = slurp(d / "bad_run.xml");
  EXPECT_NE(junit.find("errors=\"1\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<error type=\"bad_input\" message=\"" + f + ":6:16: error: expected"),
            std::string::npos)
      << junit;

  // A unit refused before any run (past --max-memory) counts once under its verdict, as
  // JUnit's one test case with its error.
  std::string big = temp_file("refused_run.pk", "kernel k:\n    grid = (4,)\n"
                                                "    in  x: f32[512]  block=(128,)  index=(i) -> (i)\n"
                                                "    out o: f32[512]  block=(128,)  index=(i) -> (i)\n"
                                                "    body:\n        o[...] = x[...] + 1\n");
  Out m = run("run --format json --max-memory 1k -o " + (d / "refused_run.json").string() + " " + big);
  const auto refused = nlohmann::json::parse(slurp(d / "refused_run.json"));
  EXPECT_EQ(refused["verdict"], "bad_input") << m.text;
  EXPECT_EQ(refused["summary"]["runs"], 0) << m.text;
  EXPECT_EQ(refused["summary"]["bad_input"], 1) << m.text;

  // No unit chosen in a file of two: the report names the choice.
  std::string two =
      temp_file("two_units.pk", "pipeline a:\n    hbm A: f32[8]\npipeline b:\n    hbm B: f32[8]\n");
  Out t = run("run --format json " + two);
  EXPECT_EQ(t.code, 3) << t.text;
  EXPECT_NE(t.text.find("choose one with --kernel NAME: a b"), std::string::npos) << t.text;

  Out s = run("fuzz --format sarif -o " + (d / "bad_fuzz.sarif").string() + " " + f);
  EXPECT_EQ(s.code, 3) << s.text;
  const auto sarif = nlohmann::json::parse(slurp(d / "bad_fuzz.sarif"));
  const auto &note = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"][0];
  EXPECT_EQ(note["message"]["text"], "expected '=' or '+=', found ':'");
  EXPECT_EQ(note["locations"][0]["physicalLocation"]["region"]["startLine"], 6);
  Out fj = run("fuzz --format json -o " + (d / "bad_fuzz.json").string() + " " + f);
  EXPECT_EQ(fj.code, 3) << fj.text;
  const auto fuzz_json = nlohmann::json::parse(slurp(d / "bad_fuzz.json"));
  EXPECT_EQ(fuzz_json["ok"], false);
  EXPECT_EQ(fuzz_json["errors"][0]["line"], 6);
  // Text stays as it was: the error on standard error, no report.
  Out plain = run("run -o " + (d / "bad_run.txt").string() + " " + f);
  EXPECT_EQ(plain.code, 3);
  EXPECT_FALSE(std::filesystem::exists(d / "bad_run.txt"));
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
    EXPECT_TRUE(r.contains("unit"));
    EXPECT_TRUE(r.contains("kind"));
    EXPECT_FALSE(r.contains("kernel")) << "one key for the name, one for the kind";
    EXPECT_TRUE(r.contains("verdict"));
    EXPECT_TRUE(r.contains("seconds"));
    EXPECT_TRUE(r["findings"].is_array());
    for (const auto &f : r["findings"])
      for (const char *k : {"rule", "severity", "line", "column", "message", "witness"})
        EXPECT_TRUE(f.contains(k)) << k;
  }
}

TEST(Cli, ReportWritesMoreFormatsFromOneCheckEachAsItsOwnFormatWouldAlone) {
  const std::string f = source("corpus/examples/guide_reductions.pk");
  const auto dir = temp_dir() / "reports";
  std::filesystem::create_directories(dir);
  const std::string sarif = (dir / "one.sarif").string(), xml = (dir / "one.xml").string(),
                    json = (dir / "one.json").string();
  Out o =
      run("check " + f + " --format json -o " + json + " --report sarif:" + sarif + " --report junit:" + xml);
  EXPECT_EQ(o.code, 1) << o.text; // the guide's incorrect kernels
  auto slurp = [](const std::string &p) {
    std::stringstream s;
    s << std::ifstream(p).rdbuf();
    return s.str();
  };
  // SARIF has no timings: byte for byte what --format sarif writes.
  Out alone = run("check " + f + " --format sarif 2>/dev/null");
  EXPECT_EQ(slurp(sarif), alone.text);
  EXPECT_TRUE(contains(slurp(xml), "<failure")) << slurp(xml);
  EXPECT_TRUE(contains(slurp(xml), "incorrect_sum")) << slurp(xml);
  auto j = nlohmann::json::parse(slurp(json), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_FALSE(j["results"].empty());
}

TEST(Cli, ABadReportIsAUsageErrorAndAnUnwritableOneExitFourNamingIt) {
  const std::string f = source("corpus/examples/guide_elementwise.pk");
  for (const auto &[arg, why] : std::vector<std::pair<std::string, std::string>>{
           {"--report yaml:r.yaml", "FORMAT one of text, json"},
           {"--report sarif", "expected FORMAT:PATH"},
           {"--report sarif:", "expected a file"},
           {"--report sarif:-", "standard output is -o's"},
           {"-o same.txt --report sarif:same.txt", "another report is written to same.txt"},
           {"--report json:a --report sarif:a", "another report is written to a"}}) {
    Out o = run("check " + f + " " + arg);
    EXPECT_EQ(o.code, 3) << arg << ": " << o.text;
    EXPECT_TRUE(contains(o.text, why)) << arg << ": " << o.text;
  }
  Out full = run("check " + f + " --report junit:/dev/full");
  EXPECT_EQ(full.code, 4) << full.text;
  EXPECT_TRUE(contains(full.text, "--report /dev/full")) << full.text;
}

TEST(Cli, CheckOfAKernelTooLargeToCheckConcretelyIsUnknownWithTheReasonAndExitTwo) {
  auto path = temp_file("big.pk", R"(kernel big:
    grid = (1024, 1024)
    in  x: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    out o: f32[131072, 1024]  block=(128, 1)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...] + 1
        when program_id(0) + program_id(1) == 0:
            o[...] = x[...]
)");
  Out o = run("check " + path);
  EXPECT_EQ(o.code, 2) << o.text;
  EXPECT_NE(o.text.find("unknown: kernel 'big' is not verified: the lowered program is not checked"),
            std::string::npos)
      << o.text;
  EXPECT_EQ(o.text.find("verified: kernel"), std::string::npos) << o.text;
}

TEST(Cli, CheckReportsALoweredProgramsFindingOnTheKernelsLineWithGridPoints) {
  Out o = run("check --format json " + source("corpus/rules/async-operand-overwritten.pk"));
  EXPECT_EQ(o.code, 1);
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.text;
  bool seen = false;
  for (const auto &r : j["results"]) {
    if (r["unit"] != "mosaic_gpu_matmul_without_delay_release") continue;
    for (const auto &f : r["findings"]) {
      EXPECT_EQ(f["rule"], "async-operand-overwritten");
      EXPECT_EQ(f["witness"]["grid_point"].size(), 3u) << f.dump();
      ASSERT_FALSE(f["witness"]["trace"].empty());
      for (const auto &ev : f["witness"]["trace"])
        EXPECT_EQ(ev["grid_point"].size(), 3u) << ev.dump();
      seen = true;
    }
  }
  EXPECT_TRUE(seen) << o.text;
  Out t = run("check " + source("corpus/rules/async-operand-overwritten.pk"));
  EXPECT_NE(t.text.find("(in the lowered program, at grid point (0, 0, 0)) [async-operand-overwritten]"),
            std::string::npos)
      << t.text;
}

TEST(Cli, CheckJsonLinksEachFindingToItsRulesSectionOfTheDocs) {
  // (The examples and the guide's kernels: findings of 14 rules in under a
  // second; corpus/rules/ takes minutes under ASan.)
  Out o = run("check --format json " + source("corpus/examples/") + " " + source("corpus/guide/") +
              " 2>/dev/null");
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.text;
  int findings = 0;
  std::set<std::string> rules;
  for (const auto &r : j["results"])
    for (const auto &f : r["findings"]) {
      ++findings;
      rules.insert(f["rule"].get<std::string>());
      EXPECT_EQ(f["doc"], "docs/rules.md#" + f["rule"].get<std::string>());
    }
  EXPECT_GT(findings, 10);
  EXPECT_GE(rules.size(), 10u);
}

TEST(Cli, CheckWholeGridChecksEveryGridPointWithTheSameVerdictsAndWitnesses) {
  // The Triton add at 10^6 elements: 977 programs, on a cut of 3 by default.
  const std::string file = source("corpus/kernels/elementwise_triton.pk") + " --set n=1000000";
  Out cut = run("check " + file + " 2>&1");
  Out whole = run("check --whole-grid " + file + " 2>&1");
  EXPECT_EQ(cut.code, 1);
  EXPECT_EQ(whole.code, 1);
  EXPECT_NE(cut.text.find("checked on its grid cut to (3,)"), std::string::npos) << cut.text;
  EXPECT_EQ(whole.text.find("grid cut"), std::string::npos) << whole.text;
  for (const std::string said :
       {"verified: kernel 'add_vectors_triton'",
        "reads element (1000000,) of 'x', outside its shape (1000000,), at grid point (976,)",
        "the store keeps element o[999999] of block (976,)", "1 verified, 3 with violations, 0 unknown"}) {
    EXPECT_NE(cut.text.find(said), std::string::npos) << said << "\n" << cut.text;
    EXPECT_NE(whole.text.find(said), std::string::npos) << said << "\n" << whole.text;
  }
}

TEST(Cli, CheckKernelChecksOnlyTheUnitsNamedAndTheirSetsFitThemAlone) {
  // The Triton attention at 8 x 32 heads: the file's single-head kernels
  // state a reference that batch=8 does not type, which made the whole file
  // an error; --kernel checks the batched kernel alone.
  const std::string file = source("corpus/kernels/attention_triton.pk");
  const std::string sets = " --set seq=1024 --set batch=8 --set heads=32";
  Out all = run("check " + file + sets + " 2>&1");
  EXPECT_EQ(all.code, 3) << all.text;
  Out one = run("check " + file + sets + " --kernel mha_forward 2>&1");
  EXPECT_EQ(one.code, 0) << one.text;
  EXPECT_NE(one.text.find("verified: kernel 'mha_forward'"), std::string::npos) << one.text;
  EXPECT_NE(one.text.find("1 verified, 0 with violations, 0 unknown"), std::string::npos) << one.text;
  // Across files, each name where it is; a file naming none is left out.
  Out two = run("check " + file + " " + source("corpus/kernels/elementwise_triton.pk") + " " +
                source("corpus/examples/guide_reference.pk") +
                " --kernel mha_forward_single_head --kernel add_vectors_triton_unmasked 2>&1");
  EXPECT_EQ(two.code, 1) << two.text;
  EXPECT_NE(two.text.find("total: 1 verified, 1 with violations, 0 unknown"), std::string::npos) << two.text;
  EXPECT_EQ(two.text.find("guide_reference.pk"), std::string::npos) << two.text;
  Out none = run("check " + file + " --kernel mha_backward 2>&1");
  EXPECT_EQ(none.code, 3) << none.text;
  EXPECT_NE(none.text.find("--kernel mha_backward: no kernel or pipeline of that name"), std::string::npos)
      << none.text;
}

TEST(Cli, CheckOutputOrderIsTheSameWithManyJobs) {
  // (Files that take from milliseconds to most of a second, so that the
  // threads finish out of order; the whole corpus takes minutes under ASan.)
  std::string corpus = source("corpus/examples/") + " " + source("corpus/guide/") + " " +
                       source("corpus/kernels/paged_attention_page_table_tpu.pk");
  Out one = run("check --format json --jobs 1 " + corpus);
  Out many = run("check --format json --jobs 4 " + corpus);
  auto a = nlohmann::json::parse(one.text, nullptr, false);
  auto b = nlohmann::json::parse(many.text, nullptr, false);
  ASSERT_FALSE(a.is_discarded());
  ASSERT_FALSE(b.is_discarded());
  ASSERT_EQ(a["results"].size(), b["results"].size());
  for (std::size_t i = 0; i < a["results"].size(); ++i) {
    EXPECT_EQ(a["results"][i]["file"], b["results"][i]["file"]);
    EXPECT_EQ(a["results"][i]["unit"], b["results"][i]["unit"]);
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

TEST(Cli, RunWithCudaBackendTakesNoDmaModeSinceTheGpuPicksItsOwnSchedule) {
  std::string f = temp_file("k.pk", kKernel);
  Out o = run("run --backend cuda --dma eager " + f);
  EXPECT_EQ(o.code, 3) << o.text;
  EXPECT_NE(o.text.find("applies to the cpu backend"), std::string::npos) << o.text;
}

TEST(Cli, RunWithCudaBackendFailsFastNamingCudaWhenItCannotRunThere) {
  // No GPU here (or no CUDA in this build): an environment error that says
  // CUDA, before any input is generated or any program is run.
  std::string f = temp_file("k.pk", kKernel);
  const auto t0 = std::chrono::steady_clock::now();
  Out o = run("run --backend cuda " + f);
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.code, 4) << o.text;
  EXPECT_NE(o.text.find("error: --backend cuda: "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("CUDA"), std::string::npos) << o.text;
  EXPECT_LT(seconds, 10.0);
}

TEST(Cli, ABodyThatDoesNotTypeCheckIsBadInputInCheckRunAndLower) {
  auto dir = std::filesystem::temp_directory_path() / ("pipecheck_cli_typecheck_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string f = (dir / "t.pk").string();
  std::ofstream(f) << "kernel k:\n    in  x: f32[128, 64]\n    out o: f32[128, 64]\n    body:\n"
                      "        o[...] = sum(x[...], axis=5)\n";
  for (const char *cmd : {"check ", "run ", "lower "}) {
    Out o = run(cmd + f);
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_NE(o.text.find(f + ":5:18: error: axis 5 is out of range for shape [128, 64]"), std::string::npos)
        << cmd << o.text;
    EXPECT_NE(o.text.find("        o[...] = sum(x[...], axis=5)\n                 ^"), std::string::npos)
        << cmd << o.text;
  }
  // A --set value that makes a slice run past its block is caught the same way.
  std::ofstream(f) << "kernel k:\n    param bm = 256\n    grid = (4,)\n"
                      "    in  x: f32[1024, 64]  block=(bm, 64)  index=(i) -> (i, 0)\n"
                      "    out o: f32[1024, 64]  block=(256, 64)  index=(i) -> (i, 0)\n"
                      "    body:\n        o[...] = x[0:256, :]\n";
  for (const char *cmd : {"check ", "run ", "lower "}) {
    EXPECT_NE(run(cmd + f).code, 3) << cmd;
    Out o = run(cmd + f + " --set bm=128");
    EXPECT_EQ(o.code, 3) << cmd << o.text;
    EXPECT_NE(
        o.text.find(f + ":7:18: error: 'x[0:256, :]': slice 0:256 is out of bounds for dim 0 (extent 128)"),
        std::string::npos)
        << cmd << o.text;
  }
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------ integer arithmetic (sizes,
// division by zero, overflow): bad input at the operand or operator, exit 3.

namespace {

std::string add_one_kernel(const std::string &x, const std::string &o, const std::string &extra = "") {
  return "kernel k:\n" + extra + "    in  x: " + x + "\n    out o: " + o +
         "\n    body:\n        o[...] = x[...] + 1\n";
}

} // namespace

TEST(CliArithmetic, ASizeThatOverflowsIsBadInputNotACrashOrAPass) {
  for (const char *shape : {"f32[2**31, 2**31]", "f32[2**62, 2**62]"}) {
    std::string f = temp_file("overflow.pk", add_one_kernel(shape, shape));
    Out o = run("run " + f);
    EXPECT_EQ(o.code, 3) << o.text;
    EXPECT_NE(o.text.find(":2:5: error: integer overflow in the size of operand 'x'"), std::string::npos)
        << o.text;
    std::filesystem::remove(f);
  }
}

TEST(CliArithmetic, SramCapacityFiresWhenTheFootprintOverflows) {
  std::string f = temp_file(
      "sram.pk", add_one_kernel("f32[2**30, 2**30]", "f32[2**30, 2**30]", "    target = tpu_v5e\n"));
  Out o = run("check " + f);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("[sram-capacity]"), std::string::npos) << o.text;
  std::filesystem::remove(f);
}

TEST(CliArithmetic, DivisionByZeroIsLocatedAtTheOperator) {
  std::string f = temp_file("div.pk", "kernel k:\n    grid = (8 // 0,)\n"
                                      "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i // 0, 0)\n"
                                      "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                                      "    body:\n        o[...] = x[...] + 1\n");
  Out o = run("check " + f);
  EXPECT_EQ(o.code, 3) << o.text;
  EXPECT_NE(o.text.find(":2:15: error: division by zero in the grid"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find(":3:56: error: division by zero in the index map of operand 'x'"), std::string::npos)
      << o.text;
  EXPECT_EQ(o.text.find("unsupported construct"), std::string::npos) << o.text;
  std::filesystem::remove(f);
}

TEST(CliArithmetic, CheckRunAndLowerReportTheSameIndexMapOverflowAtTheSameGridPoint) {
  // One binding of the kernel: the three commands evaluate block indices alike.
  std::string f = temp_file("ovf8.pk", "kernel k:\n    grid = (16,)\n"
                                       "    in  x: f32[64, 128] block=(8, 128) index=(i) -> "
                                       "(i * 2**60 // 2**60 % 8, 0)\n"
                                       "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i % 8, 0)\n"
                                       "    body:\n        o[...] = x[...] + 1\n");
  for (const char *cmd : {"check", "run", "lower"}) {
    Out o = run(std::string(cmd) + " " + f);
    EXPECT_EQ(o.code, 3) << cmd << ": " << o.text;
    EXPECT_NE(o.text.find(":3:56: error: "), std::string::npos) << cmd << ": " << o.text;
    EXPECT_NE(o.text.find("integer overflow in the index map of 'x' at grid point (8,)"), std::string::npos)
        << cmd << ": " << o.text;
  }
  std::filesystem::remove(f);
}

TEST(CliArithmetic, AnIndexMapThatOverflowsIsAnErrorNotABlockQuestionMark) {
  std::string f =
      temp_file("ovf.pk", "kernel k:\n    grid = (8,)\n"
                          "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i + 2**62 + 2**62, 0)\n"
                          "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                          "    body:\n        o[...] = x[...] + 1\n");
  Out o = run("check " + f);
  EXPECT_EQ(o.code, 3) << o.text;
  EXPECT_NE(o.text.find(":3:64: error: integer overflow in the index map of 'x' at grid point (0,)"),
            std::string::npos)
      << o.text;
  EXPECT_EQ(o.text.find("block ?"), std::string::npos) << o.text;
  std::filesystem::remove(f);
}

TEST(CliFuzz, SweepsEveryCombinationOfTheDomainsAndExitsZeroWhenAllVerifyAndPass) {
  Out o = run("fuzz " + source("corpus/examples/guide_reductions.pk") +
              " --kernel matmul --set m=256 --set n=256 --set k=256");
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("27 of 27 configuration(s)"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("every configuration verified and passed"), std::string::npos) << o.text;
}

TEST(CliFuzz, ExitsOneWithTheSmallestFailingConfigurationWhenOneFails) {
  auto path = temp_file("fuzz.pk", R"(kernel row_sum:
    param bk = 64 in {64, 48, 32}
    grid = (1, cdiv(128, bk))
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[8, 128]  block=(8, bk)  index=(i, k) -> (i, k)
    out o: f32[8]       block=(8,)     index=(i, k) -> (i,)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += sum(x[...], axis=1)
)");
  Out o = run("fuzz --format json " + path);
  EXPECT_EQ(o.code, 1) << o.text;
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.text;
  EXPECT_EQ(j["smallest_failure"]["params"]["bk"], 48);
  EXPECT_EQ(j["smallest_failure"]["rules"][0], "partial-block-reduction");
}

TEST(CliFuzz, SaveFailuresWritesTheSmallestFailingConfigurationAsACorpusFileThatChecksAsItsExpectationsSay) {
  auto path = temp_file("fuzz_save.pk", R"(kernel row_sum:  # expect: verified
    param bk = 64 in {64, 48, 32}
    grid = (1, cdiv(128, bk))
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[8, 128]  block=(8, bk)  index=(i, k) -> (i, k)
    out o: f32[8]       block=(8,)     index=(i, k) -> (i,)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += sum(x[...], axis=1)
)");
  TempDir d;
  Out o = run("fuzz " + path + " --save-failures " + (d.path / "saved").string());
  EXPECT_EQ(o.code, 1) << o.text;
  std::vector<std::filesystem::path> files;
  for (const auto &e : std::filesystem::directory_iterator(d.path / "saved"))
    files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << o.text;
  std::ifstream in(files[0]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string saved = ss.str();
  // bk fixed at the failing 48, no domain, the source's own expectation gone.
  EXPECT_NE(saved.find("param bk = 48\n"), std::string::npos) << saved;
  EXPECT_EQ(saved.find("expect: verified"), std::string::npos) << saved;
  EXPECT_NE(saved.find("# expect: partial-block-reduction"), std::string::npos) << saved;
  // Checking the saved file finds what its expectation says, on that line.
  int line = 0, n = 0;
  std::istringstream lines(saved);
  for (std::string l; std::getline(lines, l);)
    if (++n, l.find("# expect: partial-block-reduction") != std::string::npos) line = n;
  Out c = run("check " + files[0].string());
  EXPECT_EQ(c.code, 1) << c.text;
  EXPECT_NE(c.text.find(files[0].filename().string() + ":" + std::to_string(line) + ":"), std::string::npos)
      << c.text << saved;
  EXPECT_NE(c.text.find("partial-block-reduction"), std::string::npos) << c.text;
  // A folder that cannot be written is an environment error.
  Out bad = run("fuzz " + path + " --save-failures " + path + "/sub");
  EXPECT_EQ(bad.code, 4) << bad.text;
}

TEST(CliFuzz, ASmallestFailureThatIsBadInputIsNotSavedAndTheExitStaysOne) {
  auto path = temp_file("fuzz_div.pk", R"(kernel div_zero:
    param bm = 8 in {0, 8, 16}
    grid = (64 // bm,)
    in  x: f32[64, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    out o: f32[64, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  TempDir d;
  Out o = run("fuzz " + path + " --save-failures " + (d.path / "saved").string());
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("bm=0                         bad-input  line 3: division by zero"),
            std::string::npos)
      << o.text;
  EXPECT_NE(o.text.find("the smallest failing configuration is bad input"), std::string::npos) << o.text;
  EXPECT_FALSE(std::filesystem::exists(d.path / "saved"));
}

TEST(CliFuzz, WrittenDefaultsThatDoNotValidateAreOneBadInputRowNotAnAbortedCampaign) {
  // bm = 32 with sb = 8 slices 32 rows of an 8-row scratch: that row is bad
  // input, the rest of the sweep runs.
  auto path = temp_file("fuzz_defaults.pk", R"(kernel scratch_rows:
    param bm = 32 in {8, 16, 32}
    param sb = 8 in {8, 16, 32}
    grid = (64 // bm,)
    in  x: f32[64, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    out o: f32[64, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    scratch t: f32[sb, 128]
    body:
        t[0:bm, :] = x[...] * 3.0
        o[...] = t[0:bm, :]
)");
  Out o = run("fuzz --no-run --format json " + path);
  EXPECT_EQ(o.code, 1) << o.text;
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.text;
  EXPECT_EQ(j["configs"].size(), 9u);
  EXPECT_EQ(j["summary"]["ok"], 6);
  EXPECT_EQ(j["summary"]["bad-input"], 3);
  // A sweep none of whose configurations validates is bad input as written.
  auto typo = temp_file("fuzz_typo.pk", R"(kernel typo:
    param bm = 8 in {8, 16}
    grid = (64 // bm,)
    in  x: f32[64, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    out o: f32[64, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    body:
        o[...] = y[...]
)");
  Out t = run("fuzz --no-run " + typo);
  EXPECT_EQ(t.code, 3) << t.text;
  EXPECT_NE(t.text.find("fuzz_typo.pk:7:18: error:"), std::string::npos) << t.text;
  // A kernel that sweeps nothing is validated as written.
  Out w = run("fuzz --no-run --set bm=32 --set sb=8 " + path);
  EXPECT_EQ(w.code, 3) << w.text;
  EXPECT_NE(w.text.find("fuzz_defaults.pk:10:"), std::string::npos) << w.text;
}

TEST(CliFuzz, TouchesBazelsShardStatusFileWhenItShardsByTheEnvironment) {
  TempDir d;
  const auto status = d.path / "shard_status";
  Out s = run("fuzz " + source("corpus/examples/guide_reductions.pk") +
                  " --kernel matmul --set m=256 --set n=256 --set k=256 --no-run",
              "TEST_SHARD_INDEX=1 TEST_TOTAL_SHARDS=3 TEST_SHARD_STATUS_FILE=" + status.string());
  EXPECT_EQ(s.code, 0) << s.text;
  EXPECT_NE(s.text.find("9 of 27 configuration(s)"), std::string::npos) << s.text;
  EXPECT_TRUE(std::filesystem::exists(status));
  EXPECT_NE(s.text.find("every configuration verified (not run: --no-run)"), std::string::npos) << s.text;
}

TEST(CliFuzz, RefusesAPipelineAndABadShardAsBadInput) {
  Out p =
      run("fuzz " + source("corpus/examples/guide_pipelines.pk") + " --kernel " + "double_buffered_add_one");
  EXPECT_EQ(p.code, 3) << p.text;
  Out s = run("fuzz " + source("corpus/examples/guide_reductions.pk") + " --kernel matmul --shard 3/2");
  EXPECT_EQ(s.code, 3) << s.text;
  EXPECT_NE(s.text.find("--shard 3/2"), std::string::npos) << s.text;
}

// ---------------------------------------------------------------------------
// merge: a fuzz campaign's shards as one result.

namespace {

const char *kRowSumDomains = R"(kernel row_sum:
    param bk = 64 in {64, 48, 32, 16}
    param bi = 8 in {8, 4}
    grid = (cdiv(8, bi), cdiv(128, bk))
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[8, 128]  block=(bi, bk)  index=(i, k) -> (i, k)
    out o: f32[8]       block=(bi,)     index=(i, k) -> (i,)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += sum(x[...], axis=1)
)";

std::string slurp_file(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The JSON with every "check_ms"/"run_ms" value set to 0: the only fields a
// rerun does not repeat.
std::string without_timings(std::string text) {
  for (const std::string key : {"\"check_ms\": ", "\"run_ms\": "})
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
      const auto from = at + key.size(), to = text.find_first_of(",\n}", from);
      text.replace(from, to - from, "0");
    }
  return text;
}

} // namespace

TEST(CliMerge, ACampaignRunWholeEqualsItsShardsMergedInAnyOrder) {
  TempDir d;
  const std::string k = d.file("k.pk", kRowSumDomains);
  Out whole = run("fuzz --format json " + k + " -o " + (d.path / "whole.json").string());
  ASSERT_EQ(whole.code, 1) << whole.text; // bk = 48 is a partial block
  for (int i = 0; i < 3; ++i) {
    Out s = run("fuzz --format json " + k + " --shard " + std::to_string(i) + "/3 -o " +
                (d.path / ("s" + std::to_string(i) + ".json")).string());
    ASSERT_EQ(s.code, i == 1 ? 0 : 1) << i << ": " << s.text;
  }
  auto shard = [&](int i) { return (d.path / ("s" + std::to_string(i) + ".json")).string(); };
  Out m = run("merge --format json " + shard(2) + " " + shard(0) + " " + shard(1) + " -o " +
              (d.path / "merged.json").string());
  EXPECT_EQ(m.code, 1) << m.text;
  const std::string expected = without_timings(slurp_file(d.path / "whole.json"));
  EXPECT_EQ(without_timings(slurp_file(d.path / "merged.json")), expected);
  EXPECT_NE(expected.find("\"smallest_failure\""), std::string::npos) << expected;
  Out text = run("merge " + shard(0) + " " + shard(1) + " " + shard(2));
  EXPECT_EQ(text.code, 1) << text.text;
  EXPECT_TRUE(contains(text.text, "8 of 8 configuration(s)")) << text.text;
  EXPECT_TRUE(contains(text.text, "smallest failing configuration: bi=4 bk=48")) << text.text;
}

TEST(CliMerge, ExitsZeroWhenEveryMergedConfigurationIsOk) {
  TempDir d;
  const std::string k = source("corpus/examples/guide_reductions.pk");
  const std::string args = " --kernel matmul --set m=256 --set n=256 --set k=256 --no-run --format json";
  ASSERT_EQ(run("fuzz" + args + " --shard 0/2 -o " + (d.path / "a.json").string() + " " + k).code, 0);
  ASSERT_EQ(run("fuzz" + args + " --shard 1/2 -o " + (d.path / "b.json").string() + " " + k).code, 0);
  Out m = run("merge " + (d.path / "a.json").string() + " " + (d.path / "b.json").string());
  EXPECT_EQ(m.code, 0) << m.text;
  EXPECT_TRUE(contains(m.text, "27 of 27 configuration(s)")) << m.text;
  // (--no-run: nothing was run, so nothing passed)
  EXPECT_TRUE(contains(m.text, "every configuration verified (not run: --no-run)")) << m.text;
}

TEST(CliMerge, RefusesAMissingShardAnotherSeedARepeatedShardAndNonJsonAsBadInput) {
  TempDir d;
  const std::string k = d.file("k.pk", kRowSumDomains);
  auto shard = [&](const std::string &name, const std::string &args) {
    const std::string path = (d.path / name).string();
    Out o = run("fuzz --no-run --format json " + k + " " + args + " -o " + path);
    EXPECT_NE(o.code, 3) << o.text;
    return path;
  };
  const std::string s0 = shard("s0.json", "--shard 0/3"), s1 = shard("s1.json", "--shard 1/3"),
                    s2 = shard("s2.json", "--shard 2/3"), other = shard("seed.json", "--shard 2/3 --seed 7");
  Out missing = run("merge " + s0 + " " + s2);
  EXPECT_EQ(missing.code, 3) << missing.text;
  EXPECT_TRUE(contains(missing.text, "missing shard 1/3")) << missing.text;
  Out seed = run("merge " + s0 + " " + s1 + " " + other);
  EXPECT_EQ(seed.code, 3) << seed.text;
  EXPECT_TRUE(contains(seed.text, "seed 7")) << seed.text;
  EXPECT_TRUE(contains(seed.text, "not the same campaign")) << seed.text;
  Out twice = run("merge " + s0 + " " + s1 + " " + s2 + " " + s1);
  EXPECT_EQ(twice.code, 3) << twice.text;
  EXPECT_TRUE(contains(twice.text, "are both shard 1/3")) << twice.text;
  Out junk = run("merge " + d.file("junk.json", "{\n  \"kernel\": ,\n}\n"));
  EXPECT_EQ(junk.code, 3) << junk.text;
  EXPECT_TRUE(contains(junk.text, "junk.json:2:")) << junk.text;
  EXPECT_FALSE(contains(junk.text, "json.exception")) << junk.text;
  // JSON, but not a fuzz result: says what is missing, in plain words.
  Out empty = run("merge " + d.file("empty.json", "{}\n"));
  EXPECT_EQ(empty.code, 3) << empty.text;
  EXPECT_TRUE(contains(empty.text, "not a `pipecheck fuzz --format json` result: key 'kernel' not found"))
      << empty.text;
  Out text = run("merge " + k);
  EXPECT_EQ(text.code, 3) << text.text;
}

TEST(CliRunShrink, AFailingRunWithShrinkNamesTheOneInputElementThatStillFails) {
  const std::string k = source("corpus/examples/guide_reference.pk");
  Out o = run("run " + k + " --kernel matmul_writes_at_first_step --dma eager --scale 2 --shrink");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(contains(o.text, "shrunk input (seed 0, dma eager, ")) << o.text;
  EXPECT_TRUE(contains(o.text, " is 0 (reference: 1) when only a[")) << o.text;
  EXPECT_TRUE(contains(o.text, " = 1 are non-zero")) << o.text;
  Out plain = run("run " + k + " --kernel matmul_writes_at_first_step --dma eager --scale 2");
  EXPECT_EQ(plain.code, 1) << plain.text;
  EXPECT_FALSE(contains(plain.text, "shrunk input")) << plain.text;
  Out pass = run("run " + k + " --kernel matmul_writes_at_last_step --dma eager --scale 2 --shrink");
  EXPECT_EQ(pass.code, 0) << pass.text;
  EXPECT_FALSE(contains(pass.text, "shrunk input")) << pass.text;
}

// ---------------------------------------------------------------------------
// run: the reference, and .npy inputs and outputs.

namespace {

const char *kAddOne = R"(kernel add_one:
    grid = (2,)
    in  x: f32[16, 8]  block=(8, 8)  index=(i,) -> (i, 0)
    out o: f32[16, 8]  block=(8, 8)  index=(i,) -> (i, 0)
    body:
        o[...] = x[...] + 1
    reference:
        o = x + 1
)";

std::string slurp(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST(CliRun, AMatmulWritingItsAccumulatorAtTheFirstStepFailsAgainstItsReference) {
  Out bad = run("run " + source("corpus/examples/guide_reference.pk") +
                " --kernel matmul_writes_at_first_step --dma eager --scale 2");
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_TRUE(contains(bad.text,
                       "the body disagrees with the reference: o[0, 0] (block [0, 0], grid point (0, 0, 0))"))
      << bad.text;
  Out good = run("run " + source("corpus/examples/guide_reference.pk") +
                 " --kernel matmul_writes_at_last_step --dma eager --scale 2");
  EXPECT_EQ(good.code, 0) << good.text;
}

// A reference whose whole-array values pass 2^31 elements at a production
// size (megablox's group selection broadcast over m x groups x k) does not
// stop `check`, which never runs it; `run` refuses it at its line, exit 3.
TEST(CliCheck, AReferenceTooLargeToRunStillLetsTheKernelBeChecked) {
  TempDir dir;
  const std::string pk = dir.file("k.pk", R"(kernel scale:
    param m = 8
    grid = (m // 8,)
    in  x: f32[m, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[m, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] * 2.0
    reference:
        wide = broadcast_to(reshape(x, (m, 1, 128)), (m, m, 128))
        o = sum(wide, axis=1) * 2.0 / m
)");
  Out small = run("check " + pk);
  EXPECT_EQ(small.code, 0) << small.text;
  Out big = run("check " + pk + " --set m=8192");
  EXPECT_EQ(big.code, 0) << big.text;
  EXPECT_TRUE(contains(big.text, "verified: kernel 'scale'")) << big.text;
  // The memory estimate counts the reference's values by their types: 8192 x
  // 8192 x 128 floats are past any host's memory.
  Out ran = run("run " + pk + " --set m=8192");
  EXPECT_EQ(ran.code, 3) << ran.text;
  EXPECT_TRUE(contains(ran.text, "MiB of host memory")) << ran.text;
  // Allowed that much, the interpreter refuses the value at its line.
  Out allowed = run("run " + pk + " --set m=8192 --max-memory 1024G");
  EXPECT_EQ(allowed.code, 3) << allowed.text;
  EXPECT_TRUE(contains(allowed.text, ":9:")) << allowed.text;
  EXPECT_TRUE(contains(allowed.text, "more than 2^31 elements")) << allowed.text;
}

TEST(CliRun, SaveWritesInputsAndOutputsAndInputsReadsThemBack) {
  TempDir dir;
  const std::string pk = dir.file("k.pk", kAddOne);
  const auto first = dir.path / "first", second = dir.path / "second";
  Out a = run("run " + pk + " --seed 3 --save " + first.string());
  ASSERT_EQ(a.code, 0) << a.text;
  for (const char *f : {"x.npy", "o.npy", "o.oracle.npy", "o.reference.npy", "o.tolerance.npy"})
    EXPECT_TRUE(std::filesystem::exists(first / f)) << f;
  // x + 1 of inputs in [-1, 1): its rounding (eps·|o|) and two ulps of f32
  // of |o| for the output's own: 3·eps·|o| at each element, under 6 ulps.
  const std::string tol = slurp(first / "o.tolerance.npy"), ref = slurp(first / "o.reference.npy");
  ASSERT_EQ(tol.size(), 128u + 16 * 8 * 4);
  ASSERT_EQ(ref.size(), tol.size());
  for (std::size_t k = 128; k < tol.size(); k += 4) {
    float t, o;
    std::memcpy(&t, tol.data() + k, 4);
    std::memcpy(&o, ref.data() + k, 4);
    EXPECT_NEAR(t, 3 * 0x1p-23f * std::fabs(o), 0x1p-40f) << o;
    EXPECT_LE(t, 6 * 0x1p-23f);
  }
  EXPECT_EQ(slurp(first / "x.npy").substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  // Another seed, but the inputs come from the files: the same outputs.
  Out b =
      run("run " + pk + " --seed 9 --dma eager --inputs " + first.string() + " --save " + second.string());
  ASSERT_EQ(b.code, 0) << b.text;
  EXPECT_EQ(slurp(second / "x.npy"), slurp(first / "x.npy"));
  EXPECT_EQ(slurp(second / "o.npy"), slurp(first / "o.npy"));
  EXPECT_EQ(slurp(first / "o.npy").size(), 128u + 16 * 8 * 4);
}

TEST(CliRun, AnInputFileOfTheWrongShapeOrDtypeIsBadInputAtTheOperand) {
  TempDir dir;
  const std::string pk = dir.file("k.pk", kAddOne);
  auto npy = [](const std::string &descr, const std::string &shape, std::size_t data) {
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    h += std::string(63 - (10 + h.size()) % 64, ' ') + "\n";
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size()) + '\0' + h +
           std::string(data, '\0');
  };
  dir.file("in/x.npy", npy("<f4", "(3,)", 12));
  Out shape = run("run " + pk + " --dma eager --inputs " + (dir.path / "in").string());
  EXPECT_EQ(shape.code, 3) << shape.text;
  EXPECT_TRUE(contains(shape.text, "k.pk:3:5: error: " + (dir.path / "in" / "x.npy").string() +
                                       ": shape [3], but input 'x' is f32[16, 8]"))
      << shape.text;
  dir.file("in/x.npy", npy("<i4", "(16, 8)", 512));
  Out dtype = run("run " + pk + " --dma eager --inputs " + (dir.path / "in").string());
  EXPECT_EQ(dtype.code, 3) << dtype.text;
  EXPECT_TRUE(contains(dtype.text, "x.npy: dtype i32 (<i4), but input 'x' is f32[16, 8] (<f4)"))
      << dtype.text;
  std::filesystem::remove(dir.path / "in" / "x.npy");
  Out missing = run("run " + pk + " --dma eager --inputs " + (dir.path / "in").string());
  EXPECT_EQ(missing.code, 3) << missing.text;
  EXPECT_TRUE(contains(missing.text, "x.npy: cannot be read")) << missing.text;
  Out nodir = run("run " + pk + " --inputs " + (dir.path / "nope").string());
  EXPECT_EQ(nodir.code, 3) << nodir.text;
  EXPECT_TRUE(contains(nodir.text, "is not a directory of .npy files")) << nodir.text;
}

TEST(CliRun, InputsKindTakesTheDocumentedKindsAndRejectsOthers) {
  TempDir dir;
  const std::string pk = dir.file("k.pk", kAddOne);
  for (const char *kind : {"uniform", "normal", "integers", "one-hot", "special"}) {
    Out o = run("run " + pk + " --dma eager --inputs-kind " + kind);
    EXPECT_EQ(o.code, 0) << kind << o.text;
  }
  Out bad = run("run " + pk + " --inputs-kind gaussian");
  EXPECT_EQ(bad.code, 3) << bad.text;
  EXPECT_TRUE(contains(
      bad.text, "error: --inputs-kind gaussian: expected uniform, normal, integers, one-hot or special"))
      << bad.text;
}

TEST(CliRun, AnInputFileFarLargerThanItsOperandIsRefusedUnread) {
  TempDir dir;
  const std::string pk = dir.file("k.pk", kAddOne);
  dir.file("in/x.npy", std::string(3u << 20, 'x'));
  Out o = run("run " + pk + " --dma eager --inputs " + (dir.path / "in").string());
  EXPECT_EQ(o.code, 3) << o.text;
  EXPECT_TRUE(contains(o.text, "bytes, more than the array it should hold")) << o.text;
}

TEST(CliRun, ASaveDirectoryThatCannotBeWrittenIsExitFour) {
  TempDir dir;
  const std::string pk = dir.file("k.pk", kAddOne);
  dir.file("plain", "a file, not a folder");
  Out o = run("run " + pk + " --dma eager --save " + (dir.path / "plain" / "sub").string());
  EXPECT_EQ(o.code, 4) << o.text;
  EXPECT_TRUE(contains(o.text, "cannot create the directory")) << o.text;
}

// ---------------------------------------------------------------------------
// The command line a new user meets: help, typos, usage errors.

TEST(CliUsage, HelpListsTheCommandsAndHelpCmdShowsTheUsageOfOne) {
  Out help = run("help");
  EXPECT_EQ(help.code, 0) << help.text;
  for (const char *cmd : {"check", "run", "fmt", "lower", "explain"})
    EXPECT_NE(help.text.find(cmd), std::string::npos) << cmd << "\n" << help.text;
  Out check = run("help check");
  EXPECT_EQ(check.code, 0) << check.text;
  EXPECT_NE(check.text.find("Usage: pipecheck check"), std::string::npos) << check.text;
  EXPECT_NE(check.text.find("--format"), std::string::npos) << check.text;
}

TEST(CliUsage, AnUnknownCommandNamesItselfAndSuggestsTheNearest) {
  Out o = run("chek corpus");
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("error: unknown command 'chek'; did you mean 'check'?"), std::string::npos) << o.text;
  Out h = run("help chek");
  EXPECT_EQ(h.code, 3);
  EXPECT_NE(h.text.find("error: unknown command 'chek'; did you mean 'check'?"), std::string::npos) << h.text;
}

TEST(CliUsage, AnUnknownOptionNamesItselfAndSuggestsTheNearestOfItsCommand) {
  Out top = run("--bogus");
  EXPECT_EQ(top.code, 3);
  EXPECT_NE(top.text.find("error: unknown option '--bogus'"), std::string::npos) << top.text;
  Out check = run("check --fromat json " + source("corpus/examples/guide_elementwise.pk"));
  EXPECT_EQ(check.code, 3);
  EXPECT_NE(check.text.find("error: unknown option '--fromat' for 'check'; did you mean '--format'?"),
            std::string::npos)
      << check.text;
  Out run_typo = run("run --sed 1 " + source("corpus/examples/guide_elementwise.pk"));
  EXPECT_EQ(run_typo.code, 3);
  EXPECT_NE(run_typo.text.find("did you mean '--seed'?"), std::string::npos) << run_typo.text;
}

TEST(CliUsage, NoCommandIsAUsageErrorThatListsTheCommands) {
  Out o = run("");
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("error: a command is required"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("the commands are: "), std::string::npos) << o.text;
}

TEST(CliUsage, AMissingArgumentIsAUsageErrorPointingAtTheCommandsHelp) {
  Out o = run("check");
  EXPECT_EQ(o.code, 3);
  EXPECT_NE(o.text.find("error: FILE is required\n'pipecheck help check' shows its usage"), std::string::npos)
      << o.text;
}

TEST(CliUsage, ExplainAloneOrWithListListsEveryRuleOnALineOfItsOwn) {
  for (const char *args : {"explain", "explain --list"}) {
    Out o = run(args);
    EXPECT_EQ(o.code, 0) << args << "\n" << o.text;
    for (const char *id : {"reduction-not-last-axis", "slot-race", "uninitialized-read"})
      EXPECT_NE(o.text.find("\n  " + std::string(id) + " "), std::string::npos) << id << "\n" << o.text;
  }
  Out typo = run("explain slot-rce");
  EXPECT_EQ(typo.code, 3);
  EXPECT_NE(typo.text.find("did you mean 'slot-race'?"), std::string::npos) << typo.text;
}

TEST(CliUsage, FmtCheckIsExitOneWithADiffForANonCanonicalFileAndZeroForACanonicalOne) {
  const std::string messy =
      temp_file("messy.pk", std::string(kKernel).replace(std::string(kKernel).find("in  x"), 5, "in   x"));
  Out canon = run("fmt " + messy + " 2>/dev/null");
  ASSERT_EQ(canon.code, 0) << canon.text;
  const std::string clean = temp_file("clean.pk", canon.text);
  Out ok = run("fmt --check " + clean);
  EXPECT_EQ(ok.code, 0) << ok.text;
  EXPECT_EQ(ok.text, "");
  Out bad = run("fmt --check " + clean + " " + messy);
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_NE(bad.text.find("--- " + messy + "\n+++ " + messy + " (canonical)\n@@ -1,"), std::string::npos)
      << bad.text;
  EXPECT_NE(bad.text.find("\n-    in   x: f32[1024, 128]"), std::string::npos) << bad.text;
  EXPECT_NE(bad.text.find("\n+    in x: f32[1024, 128]"), std::string::npos) << bad.text;
  EXPECT_EQ(bad.text.find(clean), std::string::npos) << "a canonical file is not mentioned";
}

TEST(CliUsage, FmtInPlaceRewritesEveryNonCanonicalFileToItsCanonicalForm) {
  const std::string a = temp_file("inplace_a.pk", kKernel);
  const std::string b = temp_file("inplace_b.pk", kKernel);
  Out canon = run("fmt " + a);
  Out o = run("fmt -i " + a + " " + b);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(o.text, "");
  for (const auto &p : {a, b}) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_EQ(s.str(), canon.text) << p;
  }
  EXPECT_EQ(run("fmt --check " + a + " " + b).code, 0);
  EXPECT_EQ(run("fmt -i --check " + a).code, 3);
  EXPECT_EQ(run("fmt -i - < " + a).code, 3);
  // The rewritten file keeps its mode (a private 0600 file stays private).
  const std::string c = temp_file("inplace_c.pk", kKernel);
  std::filesystem::permissions(c, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(run("fmt -i " + c).code, 0);
  EXPECT_EQ(std::filesystem::status(c).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(CliUsage, EveryCommandRefusesAFileWithNoKernelOrPipeline) {
  const std::string f = temp_file("only_a_comment.pk", "# nothing here\n");
  for (const std::string cmd : {"model", "lower", "run"}) {
    Out o = run(cmd + " " + f);
    EXPECT_EQ(o.code, 3) << cmd << ": " << o.text;
    EXPECT_NE(o.text.find("no kernel or pipeline in the file"), std::string::npos) << cmd << ": " << o.text;
  }
}

TEST(CliUsage, FmtReadsStandardInputForDash) {
  const std::string a = temp_file("stdin.pk", kKernel);
  Out file = run("fmt " + a);
  Out in = run("fmt - < " + a);
  EXPECT_EQ(in.code, 0) << in.text;
  EXPECT_EQ(in.text, file.text);
}

// ---------------------------------------------------------------------------
// Opaque ops (the JAX bridge's form of an operation .pk has no function for).

TEST(CliOpaque, CheckNotesTheOpaqueOpsAndRunRefusesTheKernelWithExitTwo) {
  const std::string p = temp_file("opaque.pk", R"(kernel sinh_copy:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = opaque(x[...], op=sinh, shape=(128, 128), dtype=f32)
)");
  Out c = run("check " + p);
  EXPECT_EQ(c.code, 0) << c.text;
  EXPECT_NE(c.text.find("verified: kernel 'sinh_copy'"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find(":1:1: note: kernel 'sinh_copy' has opaque ops (sinh at line 6)"), std::string::npos)
      << c.text;
  Out r = run("run " + p);
  EXPECT_EQ(r.code, 2) << r.text;
  EXPECT_NE(r.text.find(":6:18: error: cannot run 'sinh_copy': opaque op sinh at line 6 has no known values"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("PASS"), std::string::npos) << r.text;
  Out f = run("fmt " + p);
  EXPECT_EQ(f.code, 0) << f.text;
  EXPECT_NE(f.text.find("o[...] = opaque(x[...], op=sinh, shape=(128, 128), dtype=f32)"), std::string::npos)
      << f.text;
}

TEST(CliBoundedSlice, AMisplacedDsIsALocatedErrorWithACaretAndExitThree) {
  const std::string p = temp_file("bounded.pk", R"(kernel tail:
    grid = (8,)
    in  x: f32[1000]  block=(BoundedSlice(128),)  index=(i) -> (i * 128,)
    out o: f32[8]  block=(None,)  index=(i) -> (i,)
    body:
        o[...] = sum(x[...], axis=0)
)");
  for (const char *cmd : {"check ", "run ", "fmt ", "lower "}) {
    Out r = run(cmd + p);
    EXPECT_EQ(r.code, 3) << cmd << r.text;
    EXPECT_NE(
        r.text.find("bounded.pk:3:67: error: dim 0 of operand 'x' is a BoundedSlice: the index map returns "
                    "ds(start, size) there, not 'i * 128'"),
        std::string::npos)
        << cmd << r.text;
    EXPECT_NE(r.text.find("\n" + std::string(66, ' ') + "^\n"), std::string::npos) << cmd << r.text;
  }
}

TEST(CliNestedEmitPipeline, AnEmitPipelineUnderWhenIsALocatedNotSupportedErrorWithACaretAndExitThree) {
  const std::string p = temp_file("nested.pk", R"(kernel k:
    grid = (2,)
    target = tpu_v5e
    in  x: f32[16, 128]  memory_space=any
    out o: f32[16, 128]  memory_space=any
    body:
        when program_id(0) == 0:
            emit_pipeline(grid=(2,)):
                in  x: block=(8, 128)  index=(t) -> (t, 0)
                out o: block=(8, 128)  index=(t) -> (t, 0)
                body:
                    o[...] = x[...]
)");
  for (const char *cmd : {"check ", "run ", "fmt ", "lower "}) {
    Out r = run(cmd + p);
    EXPECT_EQ(r.code, 3) << cmd << r.text;
    EXPECT_NE(r.text.find("nested.pk:8:13: error: not supported: an emit_pipeline under 'when' or 'for'"),
              std::string::npos)
        << cmd << r.text;
    EXPECT_NE(r.text.find("\n" + std::string(12, ' ') + "^\n"), std::string::npos) << cmd << r.text;
  }
}

TEST(CliNestedEmitPipeline, LowerPrintsTheInnerPipelineInsideEachOuterStep) {
  const std::string p = temp_file("nested_ok.pk", R"(kernel k:
    grid = (2,)
    target = tpu_v5e
    in  x: f32[32, 128]  memory_space=any
    out o: f32[32, 128]  memory_space=any
    body:
        r = program_id(0)
        emit_pipeline(grid=(2,)):
            in  x: block=(8, 128)  index=(t) -> (2 * r + t, 0)
            out o: block=(8, 128)  index=(t) -> (2 * r + t, 0)
            body:
                o[...] = x[...] + 1
    reference:
        o = x + 1
)");
  Out l = run("lower " + p);
  EXPECT_EQ(l.code, 0) << l.text;
  EXPECT_NE(l.text.find("copy_in_start(x[16:24, :], x_vmem[0])"), std::string::npos) << l.text;
  Out c = run("check " + p);
  EXPECT_EQ(c.code, 0) << c.text;
  Out r = run("run " + p);
  EXPECT_EQ(r.code, 0) << r.text;
}

TEST(CliHardening, AFileWithNoKernelOrPipelineIsBadInputNotAPass) {
  for (const char *text : {"", "# only a comment\n\n"}) {
    std::string f = temp_file("nothing.pk", text);
    for (const char *cmd : {"check ", "run "}) {
      Out o = run(cmd + f);
      EXPECT_EQ(o.code, 3) << cmd << o.text;
      EXPECT_NE(o.text.find("error: no kernel or pipeline in the file"), std::string::npos) << cmd << o.text;
    }
    std::filesystem::remove(f);
  }
}
