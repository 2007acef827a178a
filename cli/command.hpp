#pragma once
/// Subcommand registry: each cli/cmd_*.cpp registers one subcommand. main()
/// builds the CLI11 app from the registry, so the commands stay independent.

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::cli {

/// Sets up the options of a subcommand and returns the action run when it is chosen.
using CommandSetup = std::function<std::function<int()>(CLI::App &)>;

struct Command {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<Command> &registry();
bool register_command(std::string name, std::string description, CommandSetup setup);

/// Exit codes of the CLI contract.
enum Exit { ok = 0, violation = 1, unknown = 2, bad_input = 3, environment = 4 };

/// Reads a file; nullopt (with a message on stderr) when it cannot be read.
std::optional<spec::SourceFile> read_source(const std::string &path);

/// Parses and validates a file, printing diagnostics to stderr on failure.
std::optional<spec::File> load(const spec::SourceFile &src);

/// The unit named `name` (or the only unit when `name` is empty); prints an
/// error and returns nullptr when there is no such unit or the choice is ambiguous.
const std::variant<spec::KernelSpec, spec::Program> *select_unit(const spec::File &, const std::string &path,
                                                                 const std::string &name);

/// A kernel's body type-checked again with the --set values bound (validation
/// checked it with the file's own values); no errors for a pipeline or when
/// there are no overrides.
std::vector<spec::Diagnostic> typecheck_with_sets(const std::variant<spec::KernelSpec, spec::Program> &,
                                                  const std::map<std::string, std::int64_t> &overrides);

/// Parses `NAME=VALUE` pairs of --set into an environment; false on a malformed one.
bool parse_sets(const std::vector<std::string> &sets, std::map<std::string, std::int64_t> &out);

} // namespace pipecheck::cli
