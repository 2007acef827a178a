// pipecheck: verify and test pipelined accelerator kernels. Thin: flags to library calls.
#include "cli/command.hpp"

#include <iostream>

int main(int argc, char **argv) {
  using namespace pipecheck::cli;
  CLI::App app{
      "pipecheck: verify and test pipelined accelerator kernels (Pallas pallas_call specs and pipelines)"};
  app.set_version_flag("--version", "pipecheck 0.1.0");
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
    return rc == 0 ? 0 : bad_input;
  }
  try {
    return action ? action() : bad_input;
  } catch (const std::exception &e) {
    std::cerr << "pipecheck: internal error: " << e.what() << "\n";
    return environment;
  }
}
