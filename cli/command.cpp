#include "cli/command.hpp"

#include "executor/npy.hpp"
#include "reports/output.hpp"
#include "spec/eval.hpp"
#include "spec/parse.hpp"
#include "spec/prefetch.hpp"
#include "spec/targets.hpp"
#include "spec/typecheck.hpp"

#include "spec/validate.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace pipecheck::cli {

std::vector<Command> &registry() {
  static std::vector<Command> r;
  return r;
}

bool register_command(std::string name, std::string description, CommandSetup setup) {
  registry().push_back(Command{std::move(name), std::move(description), std::move(setup)});
  return true;
}

namespace {
constexpr std::size_t kMaxSourceBytes = std::size_t{64} << 20;
} // namespace

std::optional<spec::SourceFile> read_source(const std::string &path, std::string &why) {
  // POSIX calls rather than streams: errno says why, and a read error (e.g.
  // /proc/self/mem) is a result here, not an exception from the stream buffer.
  const bool stdin_path = path == "-";
  int fd = stdin_path ? ::dup(0) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why = std::string(stdin_path ? "cannot read standard input: " : "cannot open file: ") +
          std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    why = "is a directory, not a .pk file";
    return std::nullopt;
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = std::string("cannot read file: ") + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    // An endless input (/dev/zero, a pipe that never closes with data) must not hang.
    if (text.size() > kMaxSourceBytes) {
      why = "cannot read file: larger than " + std::to_string(kMaxSourceBytes >> 20) +
            " MiB, which no .pk file is";
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  return spec::SourceFile::from_string(stdin_path ? kStdinName : path, std::move(text));
}

bool emit(const std::string &output, const std::string &text, const std::string &flag) {
  if (output.empty() || output == "-") {
    std::cout << text;
    return true;
  }
  if (auto err = reports::write_file_atomically(output, text); !err.empty()) {
    std::cerr << "error: " << flag << " " << output << ": " << err << "\n";
    return false;
  }
  return true;
}

namespace {
std::vector<spec::Diagnostic> *g_record = nullptr; // the live ErrorRecord's
void record(const spec::Diagnostic &d) {
  if (g_record) g_record->push_back(d);
}
spec::Diagnostic error_diag(const std::string &message, spec::Loc loc = {}) {
  return spec::Diagnostic{spec::Severity::error, loc, message, {}};
}
// An error about a flag's file or value: `error: MESSAGE`, kept too.
void flag_error(const std::string &message) {
  std::cerr << "error: " << message << "\n";
  record(error_diag(message));
}
} // namespace

ErrorRecord::ErrorRecord() : saved_(g_record) { g_record = &errors_; }
ErrorRecord::~ErrorRecord() { g_record = saved_; }

void file_error(const std::string &path, const spec::SourceFile *src, const spec::Diagnostic &d) {
  if (src && d.loc.line > 0)
    spec::render(std::cerr, *src, d);
  else
    std::cerr << path << ": error: " << d.message << "\n";
  record(d);
}

std::optional<spec::SourceFile> read_source(const std::string &path) {
  std::string why;
  auto src = read_source(path, why);
  if (!src) file_error(path, nullptr, error_diag(why));
  return src;
}

namespace {

void walk(const std::filesystem::path &dir, std::vector<InputPath> &out) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    out.push_back({dir.string(), "cannot open directory: " + ec.message()});
    return;
  }
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code sec;
    if (it->is_directory(sec) && !it->is_symlink(sec))
      walk(it->path(), out);
    else if (it->is_regular_file(sec) && it->path().extension() == ".pk")
      out.push_back({it->path().string(), ""});
  }
  if (ec) out.push_back({dir.string(), "cannot list directory: " + ec.message()});
}

} // namespace

std::vector<InputPath> expand_paths(const std::vector<std::string> &paths) {
  std::vector<InputPath> out;
  for (const auto &p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<InputPath> found;
      walk(p, found);
      std::sort(found.begin(), found.end(),
                [](const InputPath &a, const InputPath &b) { return a.path < b.path; });
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back({p, ""});
    }
  }
  return out;
}

std::optional<spec::File> load(const spec::SourceFile &src, bool read_prefetch_files) {
  spec::ParseResult r;
  if (read_prefetch_files) {
    r = spec::parse_and_validate(src, executor::load_prefetch_npy);
  } else {
    r = spec::parse(src);
    if (r.file) {
      r.errors = spec::validate(*r.file);
      if (!r.errors.empty()) r.file.reset();
    }
  }
  for (const auto &e : r.errors) {
    spec::render(std::cerr, src, e);
    record(e);
  }
  return std::move(r.file);
}

const std::variant<spec::KernelSpec, spec::Program> *select_unit(const spec::File &f, const std::string &path,
                                                                 const std::string &name) {
  if (f.units.empty()) {
    file_error(path, nullptr, error_diag("no kernel or pipeline in the file"));
    return nullptr;
  }
  std::string names;
  for (const auto &u : f.units)
    names += " " + spec::unit_name(u);
  if (name.empty()) {
    if (f.units.size() == 1) return &f.units[0];
    file_error(path, nullptr,
               error_diag("the file has " + std::to_string(f.units.size()) +
                          " kernels and pipelines; choose one with --kernel NAME:" + names));
    return nullptr;
  }
  for (const auto &u : f.units)
    if (spec::unit_name(u) == name) return &u;
  file_error(path, nullptr, error_diag("no kernel or pipeline named '" + name + "'; the file has:" + names));
  return nullptr;
}

std::optional<std::variant<spec::KernelSpec, spec::Program>>
resolve_prefetch(const std::variant<spec::KernelSpec, spec::Program> &u, const spec::SourceFile &src,
                 const std::map<std::string, std::int64_t> &overrides,
                 const std::map<std::string, spec::LoadedContents> &supplied, std::uint64_t seed,
                 std::string &note) {
  const auto *k = std::get_if<spec::KernelSpec>(&u);
  if (!k || k->prefetches.empty()) {
    for (const auto &[name, v] : supplied) {
      flag_error("--prefetch " + name + ": the unit has no prefetch operands");
      return std::nullopt;
    }
    return u;
  }
  spec::PrefetchSpace space = spec::prefetch_space(*k, spec::param_env(k->params, overrides));
  for (const auto &e : space.errors)
    file_error(src.path, &src, e);
  if (!space.errors.empty()) return std::nullopt;
  if (!space.unknown.empty()) {
    file_error(src.path, &src, error_diag(space.unknown, k->loc));
    return std::nullopt;
  }
  spec::PrefetchContents contents;
  for (const auto &[name, file] : supplied) {
    const std::vector<std::int64_t> &v = *file.values;
    const spec::PrefetchArray *a = space.array(name);
    if (!a) {
      flag_error("--prefetch " + name + ": kernel '" + k->name + "' has no prefetch named '" + name + "'");
      return std::nullopt;
    }
    if (auto why = spec::prefetch_shape_mismatch(*a, file.shape)) {
      flag_error("--prefetch " + name + ": the file " + *why);
      return std::nullopt;
    }
    if (auto why = spec::prefetch_violation(*a, v)) {
      flag_error("--prefetch " + name + ": " + *why);
      return std::nullopt;
    }
    contents[name] = v;
  }
  spec::PrefetchSpace rest = space;
  for (auto &a : rest.arrays)
    if (contents.count(a.name)) a.given = contents[a.name];
  std::string why;
  auto picked = spec::pick_prefetch(rest, seed, why);
  if (!picked) {
    file_error(src.path, &src, error_diag(why, k->loc));
    return std::nullopt;
  }
  if (!picked->empty())
    note =
        "prefetch contents picked with seed " + std::to_string(seed) + ": " + spec::format_prefetch(*picked);
  if (!contents.empty())
    note += (note.empty() ? "" : "; ") + std::string("prefetch contents from --prefetch: ") +
            spec::format_prefetch(contents);
  contents.insert(picked->begin(), picked->end());
  // An array given in the .pk (`= [...]`, `from "FILE"`) runs with --prefetch's contents when
  // both name it, as the note says. The command elaborates the kernel itself (spec::elaborate).
  return spec::with_contents(*k, contents);
}

std::vector<spec::Diagnostic> override_errors(const std::variant<spec::KernelSpec, spec::Program> &u,
                                              const std::map<std::string, std::int64_t> &overrides,
                                              bool validate) {
  if (overrides.empty()) return {};
  auto errors = spec::bind_params(unit_params(u), overrides, false).errors;
  if (!errors.empty() || !validate) return errors;
  return std::visit([&](const auto &x) { return spec::validate(x, overrides); }, u);
}

bool check_overrides(const std::variant<spec::KernelSpec, spec::Program> &u, const spec::SourceFile &src,
                     const std::map<std::string, std::int64_t> &overrides, bool validate) {
  std::set<std::string> declared;
  for (const auto &p : unit_params(u))
    declared.insert(p.name);
  if (!check_set_names(overrides, declared)) return false;
  auto errors = override_errors(u, overrides, validate);
  for (const auto &e : errors)
    file_error(src.path, &src, e);
  return errors.empty();
}

bool parse_sets(const std::vector<std::string> &sets, std::map<std::string, std::int64_t> &out) {
  for (const auto &s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      usage_error("--set", s, "expects NAME=VALUE");
      return false;
    }
    std::string v = s.substr(eq + 1);
    std::int64_t x = 0;
    auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || err != std::errc() || end != v.data() + v.size()) {
      usage_error("--set", s, "the value is not a 64-bit integer");
      return false;
    }
    out[s.substr(0, eq)] = x;
  }
  return true;
}

void add_set_option(CLI::App &app, std::vector<std::string> &sets, const std::string &description) {
  app.add_option("--set", sets, description)->allow_extra_args(false)->take_all()->type_name("NAME=VALUE");
}

CLI::Option *non_empty_path(CLI::Option *o) {
  return o->check(
      [](const std::string &v) {
        return v.empty() ? std::string("an empty file name ('-' is standard output)") : "";
      },
      "FILE");
}

const std::vector<spec::Param> &unit_params(const std::variant<spec::KernelSpec, spec::Program> &u) {
  return std::visit([](const auto &x) -> const std::vector<spec::Param> & { return x.params; }, u);
}

bool check_set_names(const std::map<std::string, std::int64_t> &overrides,
                     const std::set<std::string> &declared) {
  auto unknown = spec::unknown_params(overrides, declared);
  for (const auto &[name, why] : unknown)
    usage_error("--set", name + "=" + std::to_string(overrides.at(name)), why);
  return unknown.empty();
}

int usage_error(const std::string &flag, const std::string &value, const std::string &why) {
  flag_error(flag + " " + value + ": " + why);
  return bad_input;
}

std::optional<double> parse_number(const std::string &s) {
  // Plain decimal notation only: strtod would also take hex, "inf", "nan" and
  // leading blanks.
  if (s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos) return std::nullopt;
  if (s[0] == '+' || !(std::isdigit(static_cast<unsigned char>(s.back())) || s.back() == '.'))
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_unsigned(const std::string &s) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<std::uint64_t> parse_size(const std::string &s) {
  std::size_t end = s.find_first_not_of("0123456789.");
  std::string num = s.substr(0, end), unit = end == std::string::npos ? "" : s.substr(end);
  for (auto &c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!unit.empty() && unit != "b") {
    const std::string units = "kmgt";
    auto u = units.find(unit[0]);
    std::string rest = unit.substr(1);
    if (u == std::string::npos || !(rest.empty() || rest == "b" || rest == "ib")) return std::nullopt;
    shift = 10 * static_cast<int>(u + 1);
  }
  auto v = parse_number(num);
  if (!v || *v < 0) return std::nullopt;
  double bytes = std::ldexp(*v, shift);
  if (bytes != std::floor(bytes) || bytes >= 18446744073709551616.0) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::string target_help() { return "target, overriding a spec's `target =`: one of " + spec::target_names(); }

bool check_target(const std::string &target) {
  if (spec::find_target(target)) return true;
  usage_error("--target", target, "unknown target; expected one of " + spec::target_names());
  return false;
}

std::optional<std::uint64_t> seed_flag(const std::string &text) {
  auto seed = parse_unsigned(text);
  // 32 bits: the random mode also runs seed + 1 and seed + 2, and the report's
  // columns are sized for them.
  if (!seed || *seed > 0xffffffffull) {
    usage_error("--seed", text, "expects a whole number from 0 to 4294967295");
    return std::nullopt;
  }
  return seed;
}

std::optional<std::int64_t> scale_flag(const std::string &text) {
  auto scale = parse_number(text);
  // The factor divides array and block dims, so it has to be whole.
  if (!scale || *scale < 1 || *scale != std::floor(*scale) || *scale > 1e9) {
    usage_error("--scale", text, "expects a whole factor of at least 1 (e.g. 2 or 2.0)");
    return std::nullopt;
  }
  return static_cast<std::int64_t>(*scale);
}

std::optional<std::uint64_t> memory_flag(const std::string &text) {
  auto mem = parse_size(text);
  if (!mem) usage_error("--max-memory", text, std::string("expects ") + size_help);
  return mem;
}

const std::variant<spec::KernelSpec, spec::Program> *
select_kernel(const spec::File &file, const spec::SourceFile &src, const std::string &path,
              const std::string &name, const std::string &why_not_a_pipeline) {
  const auto *unit = select_unit(file, path, name);
  if (!unit || std::holds_alternative<spec::KernelSpec>(*unit)) return unit;
  spec::Diagnostic d = error_diag("'" + spec::unit_name(*unit) + "' " + why_not_a_pipeline);
  d.loc = spec::unit_loc(*unit);
  file_error(path, &src, d);
  return nullptr;
}

} // namespace pipecheck::cli
