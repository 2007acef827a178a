// pipecheck fmt FILE: the canonical form.
#include "cli/command.hpp"
#include "spec/print.hpp"

#include <iostream>

namespace pipecheck::cli {
namespace {

const bool registered =
    register_command("fmt", "Print FILE in canonical form (fmt(fmt(x)) == fmt(x))", [](CLI::App &app) {
      auto path = std::make_shared<std::string>();
      app.add_option("FILE", *path, "a .pk file")->required();
      return std::function<int()>([path] {
        auto src = read_source(*path);
        if (!src) return int(bad_input);
        auto f = load(*src);
        if (!f) return int(bad_input);
        std::cout << spec::print(*f);
        return int(ok);
      });
    });

} // namespace
} // namespace pipecheck::cli
