// pipecheck fmt FILE...: the canonical form; --check says which files are not
// canonical (with a diff), -i rewrites them.
#include "cli/command.hpp"
#include "reports/output.hpp"
#include "spec/print.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

namespace pipecheck::cli {
namespace {

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  return lines;
}

// A unified diff (3 lines of context) from `a` (the file) to `b` (its
// canonical form), from a longest common subsequence of lines. Files too
// large for the quadratic table are shown as one hunk.
void unified_diff(std::ostream &os, const std::string &path, const std::string &a_text,
                  const std::string &b_text) {
  const auto a = lines_of(a_text), b = lines_of(b_text);
  const std::size_t n = a.size(), m = b.size();
  enum Op : char { keep = ' ', del = '-', add = '+' };
  std::vector<std::pair<Op, const std::string *>> script;
  if ((n + 1) * (m + 1) <= std::size_t{16} << 20) {
    std::vector<std::vector<std::uint32_t>> lcs(n + 1, std::vector<std::uint32_t>(m + 1, 0));
    for (std::size_t i = n; i-- > 0;)
      for (std::size_t j = m; j-- > 0;)
        lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    std::size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] == b[j]) {
        script.push_back({keep, &a[i++]});
        ++j;
      } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
        script.push_back({del, &a[i++]});
      } else {
        script.push_back({add, &b[j++]});
      }
    }
  } else {
    for (const auto &l : a)
      script.push_back({del, &l});
    for (const auto &l : b)
      script.push_back({add, &l});
  }
  os << "--- " << path << "\n+++ " << path << " (canonical)\n";
  constexpr std::size_t kContext = 3;
  std::size_t k = 0;
  while (k < script.size()) {
    std::size_t first = k;
    while (first < script.size() && script[first].first == keep)
      ++first;
    if (first == script.size()) break;
    // A hunk: from kContext lines before the change to kContext after the
    // last change that is at most 2 * kContext unchanged lines from the next.
    std::size_t start = first >= kContext ? first - kContext : 0, end = first;
    while (end < script.size()) {
      std::size_t run = end;
      while (run < script.size() && script[run].first == keep)
        ++run;
      if (run == script.size() || run - end > 2 * kContext) {
        end = std::min(script.size(), end + kContext);
        break;
      }
      end = run;
      while (end < script.size() && script[end].first != keep)
        ++end;
    }
    std::size_t a_line = 1, b_line = 1;
    for (std::size_t t = 0; t < start; ++t) {
      a_line += script[t].first != add;
      b_line += script[t].first != del;
    }
    std::size_t a_count = 0, b_count = 0;
    for (std::size_t t = start; t < end; ++t) {
      a_count += script[t].first != add;
      b_count += script[t].first != del;
    }
    os << "@@ -" << (a_count ? a_line : a_line - 1) << "," << a_count << " +"
       << (b_count ? b_line : b_line - 1) << "," << b_count << " @@\n";
    for (std::size_t t = start; t < end; ++t)
      os << static_cast<char>(script[t].first) << *script[t].second << "\n";
    k = end;
  }
}

struct FmtArgs {
  std::vector<std::string> paths;
  bool check = false;
  bool in_place = false;
};

// Several files (or a directory): each canonical form follows a
// `==> PATH <==` line, in path order; a bad file is reported and the others
// are still printed (or checked, or rewritten).
int fmt_cmd(const FmtArgs &a) {
  if (a.check && a.in_place) return usage_error("--check", "-i", "choose one: --check reports, -i rewrites");
  if (a.in_place && std::count(a.paths.begin(), a.paths.end(), "-"))
    return usage_error("-i", "-", "standard input cannot be rewritten in place");
  std::vector<InputPath> files = expand_paths(a.paths);
  if (files.empty()) {
    std::cerr << "error: no .pk files in";
    for (const auto &p : a.paths)
      std::cerr << " " << p;
    std::cerr << "\n";
    return bad_input;
  }
  const bool headers = files.size() > 1 || files.front().path != a.paths.front();
  int rc = ok;
  bool first = true, changed = false;
  for (const auto &in : files) {
    if (!in.error.empty()) {
      std::cerr << in.path << ": error: " << in.error << "\n";
      rc = bad_input;
      continue;
    }
    auto src = read_source(in.path);
    auto f = src ? load(*src, /*read_prefetch_files=*/false) : std::nullopt; // formatting reads no data
    if (!f) {
      rc = bad_input;
      continue;
    }
    const std::string canonical = spec::print(*f);
    if (a.check || a.in_place) {
      if (canonical == src->text) continue;
      changed = true;
      if (a.check) {
        unified_diff(std::cout, src->path, src->text, canonical);
      } else if (auto err = reports::write_file_atomically(in.path, canonical); !err.empty()) {
        std::cerr << in.path << ": error: cannot rewrite: " << err << "\n";
        return environment;
      }
      continue;
    }
    if (headers) std::cout << (first ? "" : "\n") << "==> " << in.path << " <==\n";
    first = false;
    std::cout << canonical;
  }
  if (rc != ok) return rc;
  return a.check && changed ? violation : ok;
}

const bool registered = register_command(
    "fmt",
    "Print FILE in canonical form (fmt(fmt(x)) == fmt(x)); several files or a directory (its .pk files, "
    "recursively): each after a `==> PATH <==` line; --check: exit 1 with a diff when a file is not "
    "canonical; -i: rewrite the files in place",
    [](CLI::App &app) {
      auto a = std::make_shared<FmtArgs>();
      app.add_option("FILE", a->paths, ".pk files or directories; - reads standard input")->required();
      app.add_flag("--check", a->check,
                   "print nothing but a diff for each file that is not canonical; exit 1 if any");
      app.add_flag("-i,--in-place", a->in_place, "rewrite each file that is not canonical in place");
      return std::function<int()>([a] { return fmt_cmd(*a); });
    });

} // namespace
} // namespace pipecheck::cli
