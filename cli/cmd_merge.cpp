// pipecheck merge A.json B.json ...: the shards of one fuzz campaign as one result.
#include "cli/command.hpp"
#include "reports/output.hpp"
#include "sweep/sweep.hpp"

#include <iostream>

namespace pipecheck::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> paths;
  std::string format = "text";
  std::string output;
};

int merge_cmd(const MergeArgs &a) {
  std::vector<std::pair<std::string, sweep::SweepResult>> shards;
  for (const auto &path : a.paths) {
    auto src = read_source(path);
    if (!src) return bad_input;
    auto parsed = sweep::from_json(src->text);
    if (auto *err = std::get_if<sweep::JsonError>(&parsed)) {
      spec::Loc loc{1, 1};
      if (err->byte)
        for (std::size_t i = 0; i < *err->byte && i < src->text.size(); ++i) {
          if (src->text[i] == '\n') {
            ++loc.line;
            loc.col = 1;
          } else {
            ++loc.col;
          }
        }
      if (err->byte)
        spec::render(std::cerr, *src, spec::Diagnostic{spec::Severity::error, loc, err->message, {}});
      else
        std::cerr << path << ": error: " << err->message << "\n";
      return bad_input;
    }
    shards.emplace_back(path, std::move(std::get<sweep::SweepResult>(parsed)));
  }
  auto merged = sweep::merge(shards);
  if (auto *err = std::get_if<std::string>(&merged)) {
    std::cerr << "error: " << *err << "\n";
    return bad_input;
  }
  const auto &r = std::get<sweep::SweepResult>(merged);
  const std::string text = a.format == "json" ? sweep::to_json(r) : sweep::to_text(r);
  if (!emit(a.output, text)) return environment;
  return r.all_ok() ? ok : violation;
}

const bool registered = register_command(
    "merge", "Combine the --format json results of a fuzz campaign's shards (--shard K/N) into one",
    [](CLI::App &app) {
      auto a = std::make_shared<MergeArgs>();
      app.add_option("FILES", a->paths, "every shard's `pipecheck fuzz --format json` output")->required();
      app.add_option("--format", a->format, "output format")->check(CLI::IsMember({"text", "json"}));
      non_empty_path(
          app.add_option("-o,--output", a->output, "write the result to this file (- for standard output)"));
      return std::function<int()>([a] { return merge_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
