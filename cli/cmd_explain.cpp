// pipecheck explain RULE: what a rule means, a wrong and a right example.
#include "cli/command.hpp"
#include "verifier/rule.hpp"
#include "verifier/rules/explain.hpp"

#include <iostream>

namespace pipecheck::cli {
namespace {

const bool registered = register_command(
    "explain", "Explain a rule: what it means, a wrong and a right example", [](CLI::App &app) {
      auto rule = std::make_shared<std::string>();
      app.add_option("RULE", *rule, "a rule id (e.g. reduction-not-last-axis)")->required();
      return std::function<int()>([rule] {
        if (auto text = verifier::rules::explain(*rule)) {
          std::cout << *text;
          if (!text->empty() && text->back() != '\n') std::cout << "\n";
          return int(ok);
        }
        std::cerr << "error: unknown rule '" << *rule << "'; the rules are:\n";
        for (const auto &r : verifier::rule_table())
          std::cerr << "  " << r.id << ": " << r.summary << "\n";
        return int(bad_input);
      });
    });

} // namespace
} // namespace pipecheck::cli
