// What the executable's tests share: running pipecheck and a temporary folder
// that is removed when the test program ends. Include it in one file per test
// program.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace pipecheck::testing {

struct Out {
  int code = -1;
  std::string text; // stdout and stderr
};

/// Runs `pipecheck ARGS` through the shell, with `env` (`NAME=VALUE ...`)
/// set for it; its exit code and output.
inline Out run(const std::string &args, const std::string &env = "") {
  std::string cmd = env + (env.empty() ? "" : " ") + std::string(PIPECHECK_BINARY) + " " + args + " 2>&1";
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

/// This test program's temporary folder (named after the program and its pid).
inline std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() /
         ("pipecheck_" + std::string(program_invocation_short_name) + "_" + std::to_string(getpid()));
}

/// Removes the test's temporary folder when the test program ends.
struct TempDirCleanup : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};
inline const auto *const kCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

/// Writes `bytes` to NAME in the temporary folder; its path.
inline std::string temp_file(const std::string &name, const std::string &bytes) {
  auto dir = temp_dir();
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

} // namespace pipecheck::testing
