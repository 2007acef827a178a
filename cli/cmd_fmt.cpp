// pipecheck fmt FILE...: the canonical form.
#include "cli/command.hpp"
#include "spec/print.hpp"

#include <iostream>

namespace pipecheck::cli {
namespace {

// Several files (or a directory): each canonical form follows a
// `==> PATH <==` line, in path order; a bad file is reported and the others
// are still printed.
int fmt_cmd(const std::vector<std::string> &paths) {
  std::vector<InputPath> files = expand_paths(paths);
  if (files.empty()) {
    std::cerr << "error: no .pk files in";
    for (const auto &p : paths)
      std::cerr << " " << p;
    std::cerr << "\n";
    return bad_input;
  }
  const bool headers = files.size() > 1 || files.front().path != paths.front();
  int rc = ok;
  bool first = true;
  for (const auto &in : files) {
    if (!in.error.empty()) {
      std::cerr << in.path << ": error: " << in.error << "\n";
      rc = bad_input;
      continue;
    }
    auto src = read_source(in.path);
    auto f = src ? load(*src) : std::nullopt;
    if (!f) {
      rc = bad_input;
      continue;
    }
    if (headers) std::cout << (first ? "" : "\n") << "==> " << in.path << " <==\n";
    first = false;
    std::cout << spec::print(*f);
  }
  return rc;
}

const bool registered = register_command(
    "fmt",
    "Print FILE in canonical form (fmt(fmt(x)) == fmt(x)); several files or a directory (its .pk files, "
    "recursively): each after a `==> PATH <==` line",
    [](CLI::App &app) {
      auto paths = std::make_shared<std::vector<std::string>>();
      app.add_option("FILE", *paths, ".pk files or directories")->required();
      return std::function<int()>([paths] { return fmt_cmd(*paths); });
    });

} // namespace
} // namespace pipecheck::cli
