#include "sweep/failure_file.hpp"

#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "verifier/check.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipecheck::sweep {

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

std::string config_kernel_text(const spec::KernelSpec &k, const spec::Env &params) {
  spec::KernelSpec fixed = k;
  for (auto &p : fixed.params)
    if (auto it = params.find(p.name); it != params.end()) {
      p.value = spec::Expr::integer(it->second);
      p.domain.clear();
    }
  std::istringstream in(spec::print(fixed));
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto at = line.find("# expect"); at != std::string::npos) {
      line.erase(at);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\t'))
        line.pop_back();
    }
    out << line << "\n";
  }
  return out.str();
}

std::optional<std::string> save_config_failure(const spec::KernelSpec &k, const ConfigResult &c,
                                               const SweepOptions &o, const std::string &dir) {
  spec::Env params = o.overrides;
  for (const auto &[name, v] : c.params)
    params[name] = v;
  const std::string text = config_kernel_text(k, params);
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string(k.name + ".pk", text));
  if (!parsed.file || parsed.file->units.size() != 1) return std::nullopt;
  const auto *fixed = std::get_if<spec::KernelSpec>(&parsed.file->units[0]);
  if (!fixed) return std::nullopt;
  verifier::CheckOptions co;
  co.target = o.target;
  const verifier::Verdict v = verifier::check(*fixed, co);
  std::vector<std::pair<int, std::string>> expect;
  for (const auto &f : v.findings)
    expect.emplace_back(f.loc.line, std::string(verifier::id(f.rule)));
  if (v.status == verifier::Status::verified) expect.emplace_back(fixed->loc.line, "verified");
  std::string header = "pipecheck fuzz: kernel " + k.name + " at";
  for (const auto &[name, value] : c.params)
    header += " " + name + "=" + std::to_string(value);
  header += ": " + std::string(to_string(c.outcome));
  if (!c.reason.empty()) header += "\n" + c.reason;
  if (!c.first_mismatch.empty()) header += "\n" + c.first_mismatch;
  return save_failure(k.name, text, expect, c.run == executor::RunStatus::fail, header, dir);
}

} // namespace pipecheck::sweep
