// pipecheck explain [RULE | --list]: what a rule means, a wrong and a right example.
#include "cli/command.hpp"
#include "spec/eval.hpp"
#include "verifier/rule.hpp"
#include "verifier/rules/explain.hpp"

#include <algorithm>
#include <iostream>

namespace pipecheck::cli {
namespace {

// One line per rule: its id, padded, and its summary.
void list_rules(std::ostream &os) {
  std::size_t width = 0;
  for (const auto &r : verifier::rule_table())
    width = std::max(width, r.id.size());
  for (const auto &r : verifier::rule_table())
    os << "  " << r.id << std::string(width - r.id.size() + 2, ' ') << r.summary << "\n";
}

int explain_cmd(const std::string &rule, bool list) {
  if (list || rule.empty()) {
    std::cout << "The rules (pipecheck explain RULE says more about one):\n";
    list_rules(std::cout);
    return ok;
  }
  if (auto text = verifier::rules::explain(rule)) {
    std::cout << *text;
    if (!text->empty() && text->back() != '\n') std::cout << "\n";
    return ok;
  }
  std::vector<std::string> ids;
  for (const auto &r : verifier::rule_table())
    ids.emplace_back(r.id);
  std::string best = spec::nearest_name(rule, ids);
  std::cerr << "error: unknown rule '" << rule << "'"
            << (best.empty() ? "" : "; did you mean '" + best + "'?") << "\nthe rules are:\n";
  list_rules(std::cerr);
  return bad_input;
}

const bool registered = register_command(
    "explain", "Explain a rule: what it means, a wrong and a right example; without RULE, list the rules",
    [](CLI::App &app) {
      auto rule = std::make_shared<std::string>();
      auto list = std::make_shared<bool>(false);
      app.add_option("RULE", *rule, "a rule id (e.g. reduction-not-last-axis)");
      app.add_flag("--list", *list, "list the rules, one line each");
      return std::function<int()>([rule, list] { return explain_cmd(*rule, *list); });
    });

} // namespace
} // namespace pipecheck::cli
