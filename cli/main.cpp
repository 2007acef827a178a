// pipecheck: verify and test pipelined accelerator kernels. Thin: flags to library calls.
#include "cli/command.hpp"
#include "reports/output.hpp"
#include "reports/report.hpp"
#include "verifier/check.hpp"

#include <chrono>
#include <csignal>
#include <iostream>
#include <pthread.h>
#include <sstream>
#include <thread>

namespace {

// Ctrl-C is taken by a thread of its own (SIGINT is blocked everywhere else,
// so neither a worker nor Z3's own handler can swallow it): it cancels every
// check, which then ends without writing, and ends the process with 130 if
// the command has not returned within a second.
void watch_interrupts() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    pipecheck::verifier::cancel_all();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::_Exit(pipecheck::cli::interrupted);
  }).detach();
}

// Standard output is collected and written at the end with plain write(2),
// so a failed write (a full disk, /dev/full, a closed pipe) is seen with its
// reason and becomes exit 4 instead of passing as if written.
class StdoutCollector {
public:
  StdoutCollector() : old_(std::cout.rdbuf(buf_.rdbuf())) {}
  ~StdoutCollector() { std::cout.rdbuf(old_); }
  StdoutCollector(const StdoutCollector &) = delete;
  StdoutCollector &operator=(const StdoutCollector &) = delete;
  int finish(int rc) {
    std::cout.rdbuf(old_);
    if (auto err = pipecheck::reports::write_to_fd(1, buf_.str()); !err.empty()) {
      std::cerr << "error: standard output: " << err << "\n";
      return pipecheck::cli::environment;
    }
    return rc;
  }

private:
  std::ostringstream buf_;
  std::streambuf *old_;
};

} // namespace

int main(int argc, char **argv) {
  using namespace pipecheck::cli;
  watch_interrupts();
  StdoutCollector out;
  CLI::App app{
      "pipecheck: verify and test pipelined accelerator kernels (Pallas pallas_call specs and pipelines)"};
  app.set_version_flag("--version", std::string("pipecheck ") + pipecheck::reports::kToolVersion);
  app.require_subcommand(1);
  std::function<int()> action;
  for (auto &c : registry()) {
    CLI::App *sub = app.add_subcommand(c.name, c.description);
    auto run = c.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int rc = app.exit(e);
    return out.finish(rc == 0 ? 0 : bad_input);
  }
  int rc = environment;
  try {
    rc = action ? action() : bad_input;
  } catch (const std::exception &e) {
    // Work cut short by Ctrl-C may end in an exception (Z3: "push canceled").
    if (!pipecheck::verifier::cancelled()) {
      std::cerr << "pipecheck: internal error: " << e.what() << "\n";
      return out.finish(environment);
    }
  }
  if (pipecheck::verifier::cancelled()) {
    std::cerr << "pipecheck: interrupted\n";
    return interrupted;
  }
  return out.finish(rc);
}
