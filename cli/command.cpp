#include "cli/command.hpp"

#include "spec/parse.hpp"
#include "spec/typecheck.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

namespace pipecheck::cli {

std::vector<Command> &registry() {
  static std::vector<Command> r;
  return r;
}

bool register_command(std::string name, std::string description, CommandSetup setup) {
  registry().push_back(Command{std::move(name), std::move(description), std::move(setup)});
  return true;
}

std::optional<spec::SourceFile> read_source(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": error: cannot open file\n";
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    std::cerr << path << ": error: cannot read file\n";
    return std::nullopt;
  }
  return spec::SourceFile::from_string(path, ss.str());
}

std::optional<spec::File> load(const spec::SourceFile &src) {
  auto r = spec::parse_and_validate(src);
  for (const auto &e : r.errors)
    spec::render(std::cerr, src, e);
  return std::move(r.file);
}

const std::variant<spec::KernelSpec, spec::Program> *select_unit(const spec::File &f, const std::string &path,
                                                                 const std::string &name) {
  if (name.empty()) {
    if (f.units.size() == 1) return &f.units[0];
    std::cerr << path << ": error: the file has " << f.units.size()
              << " kernels and pipelines; choose one with --kernel NAME:";
    for (const auto &u : f.units)
      std::cerr << " " << spec::unit_name(u);
    std::cerr << "\n";
    return nullptr;
  }
  for (const auto &u : f.units)
    if (spec::unit_name(u) == name) return &u;
  std::cerr << path << ": error: no kernel or pipeline named '" << name << "'; the file has:";
  for (const auto &u : f.units)
    std::cerr << " " << spec::unit_name(u);
  std::cerr << "\n";
  return nullptr;
}

std::vector<spec::Diagnostic> typecheck_with_sets(const std::variant<spec::KernelSpec, spec::Program> &u,
                                                  const std::map<std::string, std::int64_t> &overrides) {
  const auto *k = std::get_if<spec::KernelSpec>(&u);
  if (!k || overrides.empty()) return {};
  return spec::typecheck(*k, overrides);
}

bool parse_sets(const std::vector<std::string> &sets, std::map<std::string, std::int64_t> &out) {
  for (const auto &s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "error: --set expects NAME=VALUE, got '" << s << "'\n";
      return false;
    }
    try {
      std::size_t used = 0;
      std::string v = s.substr(eq + 1);
      long long x = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
      out[s.substr(0, eq)] = x;
    } catch (const std::exception &) {
      std::cerr << "error: --set " << s << ": the value is not an integer\n";
      return false;
    }
  }
  return true;
}

} // namespace pipecheck::cli
