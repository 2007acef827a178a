#pragma once
/// Subcommand registry: each cli/cmd_*.cpp registers one subcommand. main()
/// builds the CLI11 app from the registry, so the commands stay independent.

#include "spec/diag.hpp"
#include "spec/ir.hpp"
#include "spec/parse.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
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
/// interrupted: Ctrl-C (128 + SIGINT), nothing written.
enum Exit { ok = 0, violation = 1, unknown = 2, bad_input = 3, environment = 4, interrupted = 130 };

/// How diagnostics name standard input (the path "-").
inline constexpr const char *kStdinName = "<stdin>";

/// While one lives, the errors that the helpers below print about a file
/// (and file_error) are also kept, so that run and fuzz can put bad input
/// into a structured report as check does. One per command, on its thread.
class ErrorRecord {
public:
  ErrorRecord();
  ~ErrorRecord();
  ErrorRecord(const ErrorRecord &) = delete;
  ErrorRecord &operator=(const ErrorRecord &) = delete;
  const std::vector<spec::Diagnostic> &errors() const { return errors_; }

private:
  std::vector<spec::Diagnostic> errors_;
  std::vector<spec::Diagnostic> *saved_ = nullptr;
};

/// Prints an error about a file, located (`PATH:LINE:COL: error:` with the
/// line and a caret) when `d` has a line and `src` is given, else
/// `PATH: error: MESSAGE`, and keeps it in the live ErrorRecord.
void file_error(const std::string &path, const spec::SourceFile *src, const spec::Diagnostic &d);

/// Reads a file ("-": standard input, named kStdinName); nullopt when it
/// cannot be read, with `why` set to the reason ("cannot open file: No such
/// file or directory", "is a directory", ...).
std::optional<spec::SourceFile> read_source(const std::string &path, std::string &why);
/// Reads a file; nullopt (with `PATH: error: why` on stderr) when it cannot be read.
std::optional<spec::SourceFile> read_source(const std::string &path);

/// Writes a command's output to `-o OUTPUT` (atomically), or to standard
/// output when OUTPUT is empty or `-`. False, with `error: FLAG OUTPUT: why`
/// on stderr (FLAG: the option that named it), when the file cannot be
/// written (the command exits 4).
bool emit(const std::string &output, const std::string &text, const std::string &flag = "-o");

/// One path named by a command line after directories are expanded: a file
/// to read, or a directory that could not be listed (`error` says why).
struct InputPath {
  std::string path;
  std::string error;
};

/// Expands directories (recursively) into their .pk files, sorted by path so
/// the order is stable; other paths stay as given. A directory or subfolder
/// that cannot be listed becomes an entry with an error, never a silent skip.
std::vector<InputPath> expand_paths(const std::vector<std::string> &paths);

/// Parses and validates a file, printing diagnostics to stderr on failure.
/// The .npy files of `prefetch ... from "FILE"` are read into the kernels,
/// unless `read_prefetch_files` is false (fmt: such a prefetch then stays
/// without contents, which only printing the file may see).
std::optional<spec::File> load(const spec::SourceFile &src, bool read_prefetch_files = true);

/// The unit named `name` (or the only unit when `name` is empty); prints an
/// error and returns nullptr when there is no such unit or the choice is ambiguous.
const std::variant<spec::KernelSpec, spec::Program> *select_unit(const spec::File &, const std::string &path,
                                                                 const std::string &name);

/// For the commands that take a kernel (lower, fuzz): select_unit(), and an
/// error `PATH:LINE:COL: error: 'NAME' WHY` at the pipeline's line (nullptr)
/// when the unit is a pipeline; a unit it returns holds a KernelSpec.
const std::variant<spec::KernelSpec, spec::Program> *
select_kernel(const spec::File &, const spec::SourceFile &src, const std::string &path,
              const std::string &name, const std::string &why_not_a_pipeline);

/// What is wrong with a unit under the --set values: an override outside its
/// param's domain (located at the param); else (with `validate`) the unit
/// does not validate with the overrides bound (validation checked it with
/// the file's own values). Empty when all is well or there are no overrides.
std::vector<spec::Diagnostic> override_errors(const std::variant<spec::KernelSpec, spec::Program> &,
                                              const std::map<std::string, std::int64_t> &overrides,
                                              bool validate = true);

/// For the commands that take one unit: every --set names one of its params
/// and override_errors() has nothing to say; else the errors are printed and
/// the answer is false. (`fuzz` validates each configuration itself:
/// validate = false.)
bool check_overrides(const std::variant<spec::KernelSpec, spec::Program> &, const spec::SourceFile &,
                     const std::map<std::string, std::int64_t> &overrides, bool validate = true);

/// For the commands that run or lower one kernel: a kernel with scalar
/// prefetch elaborated (spec::elaborate_prefetch) with its given contents,
/// those in `supplied` (--prefetch; checked against the constraints), and
/// the rest picked with `seed` (`note` then names them); any other unit as
/// it is. nullopt after printing the errors (bad input).
std::optional<std::variant<spec::KernelSpec, spec::Program>>
resolve_prefetch(const std::variant<spec::KernelSpec, spec::Program> &, const spec::SourceFile &,
                 const std::map<std::string, std::int64_t> &overrides,
                 const std::map<std::string, spec::LoadedContents> &supplied, std::uint64_t seed,
                 std::string &note);

/// Parses `NAME=VALUE` pairs of --set into an environment; false (with a
/// usage error on stderr) on a malformed one.
bool parse_sets(const std::vector<std::string> &sets, std::map<std::string, std::int64_t> &out);

/// Adds the repeatable `--set NAME=VALUE` option: one pair per --set, so the
/// files after it stay files.
void add_set_option(CLI::App &, std::vector<std::string> &sets, const std::string &description);

/// Refuses an empty file name for an output option (`-o ""`, an unset `$OUT`:
/// a usage error, not the report on standard output); `-` is standard output.
CLI::Option *non_empty_path(CLI::Option *);

/// The params a kernel or pipeline declares.
const std::vector<spec::Param> &unit_params(const std::variant<spec::KernelSpec, spec::Program> &);

/// Checks the names of --set overrides against the declared params: prints
/// `error: --set NAME=VALUE: no param named 'NAME'; did you mean `name`?` for
/// each unknown one and returns false if there was any.
bool check_set_names(const std::map<std::string, std::int64_t> &overrides,
                     const std::set<std::string> &declared);

/// Prints the usage error `error: FLAG VALUE: why` and returns bad_input: every
/// bad flag value is reported this way.
int usage_error(const std::string &flag, const std::string &value, const std::string &why);

/// The one number parser of flag values: a finite decimal number ("2", "2.5",
/// "1e3"), whole string, no sign other than a leading '-'.
std::optional<double> parse_number(const std::string &);

/// A non-negative whole number that fits in 64 bits ("0", "42"): no sign, no
/// fraction, no overflow.
std::optional<std::uint64_t> parse_unsigned(const std::string &);

/// The one size parser: a non-negative number with an optional binary unit,
/// case-insensitive: "4096", "512k", "1100M", "4G", "4g", "4GB", "4GiB",
/// "1.5G", "1T" (K = 2^10, M = 2^20, G = 2^30, T = 2^40; B alone is bytes).
/// nullopt on anything else, on a negative size or a fraction of a byte.
std::optional<std::uint64_t> parse_size(const std::string &);

/// --seed S: 0 to 4294967295 (the random mode also runs seed + 1 and
/// seed + 2). nullopt after printing the usage error.
std::optional<std::uint64_t> seed_flag(const std::string &);
/// --scale F: a whole factor of at least 1 ("2" or "2.0"; it divides array
/// and block dims). nullopt after printing the usage error.
std::optional<std::int64_t> scale_flag(const std::string &);
/// --max-memory SIZE (parse_size). nullopt after printing the usage error.
std::optional<std::uint64_t> memory_flag(const std::string &);

/// The --target check shared by every command: true for a known target;
/// otherwise prints `error: --target NAME: unknown target; expected one of ...`.
bool check_target(const std::string &target);

/// The --help text of --target: the known targets.
std::string target_help();

/// The accepted forms of sizes, for --help texts.
inline constexpr const char *size_help =
    "a size in bytes with an optional binary unit: 4G, 4g, 4GB, 4GiB, 512k, 1100M";

} // namespace pipecheck::cli
