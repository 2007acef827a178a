// pipecheck lower FILE --kernel NAME: the Program the Pallas emitter produces, in .pk pipeline syntax.
#include "cli/command.hpp"
#include "spec/lower.hpp"
#include "spec/print.hpp"

#include <iostream>

namespace pipecheck::cli {
namespace {

struct LowerArgs {
  std::string path;
  std::string kernel;
  std::string target;
  std::vector<std::string> sets;
  bool unroll = false;
};

int lower_cmd(const LowerArgs &a) {
  spec::LowerOptions opts;
  opts.unroll = a.unroll;
  if (!parse_sets(a.sets, opts.overrides)) return bad_input;
  if (!a.target.empty()) {
    if (!check_target(a.target)) return bad_input;
    opts.target = a.target;
  }
  auto src = read_source(a.path);
  if (!src) return bad_input;
  auto file = load(*src);
  if (!file) return bad_input;
  const auto *unit = select_kernel(*file, *src, a.path, a.kernel, "is already a pipeline");
  if (!unit) return bad_input;
  if (!check_overrides(*unit, *src, opts.overrides)) return bad_input;
  std::string note;
  auto resolved = resolve_prefetch(*unit, *src, opts.overrides, {}, 0, note);
  if (!resolved) return bad_input;
  if (!note.empty()) std::cerr << "note: " << note << "\n";
  const auto *k = &std::get<spec::KernelSpec>(*resolved);
  std::vector<spec::Diagnostic> errors;
  auto lowered = spec::lower(*k, opts, errors);
  for (const auto &e : errors)
    spec::render(std::cerr, *src, e);
  if (!lowered) return bad_input;
  if (!lowered->note.empty()) std::cerr << "note: " << lowered->note << "\n";
  std::cout << spec::print(lowered->program);
  return ok;
}

const bool registered = register_command(
    "lower", "Print the pipeline Pallas would run for a kernel (prologue, loop, epilogue on slot rings)",
    [](CLI::App &app) {
      auto a = std::make_shared<LowerArgs>();
      app.add_option("FILE", a->path, "a .pk file")->required();
      app.add_option("--kernel", a->kernel, "the kernel to lower (needed when the file has several)");
      app.add_option("--target", a->target, target_help());
      add_set_option(app, a->sets, "NAME=VALUE: override a param");
      app.add_flag("--unroll", a->unroll,
                   "one section per grid step with literal slots and regions (at most 65536 steps)");
      return std::function<int()>([a] { return lower_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
