// pipecheck: verify and test pipelined accelerator kernels. Thin: flags to library calls.
#include "cli/command.hpp"
#include "reports/output.hpp"
#include "reports/report.hpp"
#include "spec/eval.hpp"
#include "verifier/check.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <iostream>
#include <optional>
#include <pthread.h>
#include <sstream>
#include <thread>

namespace {

// Ctrl-C is taken by a thread of its own (SIGINT is blocked everywhere else,
// so neither a worker nor Z3's own handler can swallow it): it cancels every
// check, which then ends without writing, and ends the process with 130 if
// the command has not returned within a second.
// A process started with SIGINT ignored (nohup, a background job of a script)
// keeps it ignored, as the shell meant.
void watch_interrupts() {
  struct sigaction current {};
  if (sigaction(SIGINT, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) return;
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

// A usage error: `error: what`, a hint where to look, exit 3.
int usage(const std::string &what, const std::string &hint) {
  std::cerr << "error: " << what << "\n" << hint << "\n";
  return pipecheck::cli::bad_input;
}

std::string did_you_mean(const std::string &name, const std::vector<std::string> &candidates) {
  std::string best = pipecheck::spec::nearest_name(name, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

CLI::App *find_command(CLI::App &app, const std::string &name) {
  for (auto *sub : app.get_subcommands([](CLI::App *) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::string joined(const std::vector<std::string> &names) {
  std::string s;
  for (const auto &n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s;
}

// What CLI11 leaves to a generic message is answered here first: no command,
// `help [CMD]`, an unknown command or option (named, with the nearest one).
// Returns an exit code when the command line is answered, else nullopt.
std::optional<int> answer_before_parsing(CLI::App &app, int argc, char **argv) {
  std::vector<std::string> commands;
  for (const auto *sub : app.get_subcommands([](CLI::App *) { return true; }))
    commands.push_back(sub->get_name());
  commands.push_back("help");
  const std::string all =
      "the commands are: " + joined(commands) + "; 'pipecheck help CMD' shows a command's usage";
  if (argc < 2) {
    std::cerr << app.help();
    return usage("a command is required", all);
  }
  const std::string first = argv[1];
  if (first == "help") {
    if (argc == 2) {
      std::cout << app.help();
      return pipecheck::cli::ok;
    }
    const std::string cmd = argv[2];
    if (cmd == "help") {
      std::cout << "pipecheck help [CMD]: the commands, or the usage of one\n";
      return pipecheck::cli::ok;
    }
    if (auto *sub = find_command(app, cmd)) {
      std::cout << sub->help("pipecheck");
      return pipecheck::cli::ok;
    }
    return usage("unknown command '" + cmd + "'" + did_you_mean(cmd, commands), all);
  }
  if (first == "-h" || first == "--help" || first == "--version") return std::nullopt;
  if (first.size() > 1 && first[0] == '-')
    return usage("unknown option '" + first + "'" + did_you_mean(first, {"--help", "--version"}), all);
  auto *sub = find_command(app, first);
  if (!sub) return usage("unknown command '" + first + "'" + did_you_mean(first, commands), all);
  // Options of the command: a long option or a one-letter short one that it
  // does not have is named, with its nearest option.
  std::vector<std::string> options;
  for (const auto *o : sub->get_options()) {
    for (const auto &l : o->get_lnames())
      options.push_back("--" + l);
    for (const auto &n : o->get_snames())
      options.push_back("-" + n);
  }
  const std::string hint = "'pipecheck help " + first + "' shows its usage";
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    const bool long_opt = a.size() > 2 && a.starts_with("--");
    const bool short_opt = a.size() == 2 && a[0] == '-' && std::isalpha(static_cast<unsigned char>(a[1]));
    if (!long_opt && !short_opt) continue;
    const std::string name = long_opt ? a.substr(0, a.find('=')) : a;
    if (std::find(options.begin(), options.end(), name) != options.end()) {
      // Skip the option's value, which may itself start with '-' ("-o -").
      if (const auto *o = sub->get_option_no_throw(name);
          o && o->get_type_size() != 0 && a.find('=') == std::string::npos)
        ++i;
      continue;
    }
    return usage("unknown option '" + name + "' for '" + first + "'" +
                     (long_opt ? did_you_mean(name, options) : ""),
                 hint);
  }
  return std::nullopt;
}

} // namespace

int main(int argc, char **argv) {
  using namespace pipecheck::cli;
  watch_interrupts();
  // A closed pipe (`pipecheck check dir | head`) is a failed write, exit 4
  // with its reason, not a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  StdoutCollector out;
  CLI::App app{
      "pipecheck: verify and test pipelined accelerator kernels (Pallas pallas_call specs and pipelines)"};
  app.name("pipecheck");
  app.set_version_flag("--version", std::string("pipecheck ") + pipecheck::reports::kToolVersion);
  app.require_subcommand(1);
  std::function<int()> action;
  for (auto &c : registry()) {
    CLI::App *sub = app.add_subcommand(c.name, c.description);
    auto run = c.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  if (auto rc = answer_before_parsing(app, argc, argv)) return out.finish(*rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return out.finish(app.exit(e));
  } catch (const CLI::CallForVersion &e) {
    return out.finish(app.exit(e));
  } catch (const CLI::ParseError &e) {
    // Every other problem of the command line: one convention, exit 3.
    std::string cmd = argc > 1 ? argv[1] : "";
    return out.finish(usage(e.what(), "'pipecheck help " + cmd + "' shows its usage"));
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
