#include "properties/failure_file.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipecheck::properties {

std::string failure_file_text(const std::string &text, const std::vector<std::pair<int, std::string>> &expect,
                              bool run_fails, const std::string &header) {
  std::ostringstream out;
  std::istringstream h(header);
  std::string line;
  while (std::getline(h, line))
    out << "# " << line << "\n";
  std::istringstream in(text);
  int n = 0;
  bool first_unit_line = true;
  while (std::getline(in, line)) {
    ++n;
    std::string what;
    for (const auto &[l, w] : expect)
      if (l == n) what += (what.empty() ? "" : ", ") + w;
    out << line;
    if (!what.empty()) out << "  # expect: " << what;
    out << "\n";
    const bool unit = line.rfind("kernel ", 0) == 0 || line.rfind("pipeline ", 0) == 0;
    if (unit && first_unit_line && run_fails) out << "    # expect-run: fail\n";
    if (unit) first_unit_line = false;
  }
  return out.str();
}

std::optional<std::string> save_failure(const std::string &name, const std::string &text,
                                        const std::vector<std::pair<int, std::string>> &expect,
                                        bool run_fails, const std::string &header,
                                        const std::optional<std::string> &dir) {
  std::string d;
  if (dir)
    d = *dir;
  else if (const char *e = std::getenv("PIPECHECK_PROPERTY_SAVE"))
    d = e;
  if (d.empty()) return std::nullopt;
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  const std::string path = (std::filesystem::path(d) / (name + "-" + hex + ".pk")).string();
  std::ofstream f(path, std::ios::binary);
  f << failure_file_text(text, expect, run_fails, header);
  f.close();
  if (!f) return std::nullopt;
  return path;
}

} // namespace pipecheck::properties
