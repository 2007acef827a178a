#pragma once
// Helpers for the verifier tests.

#include "spec/parse.hpp"
#include "verifier/verdict.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace pipecheck::verifier::testing {

/// Whether `v` has a finding of `rule` at `line`; when it has none, every
/// finding it has is a test failure that names it, so the test shows what
/// was found instead.
inline bool has_finding(const Verdict &v, Rule rule, int line) {
  for (const auto &f : v.findings)
    if (f.rule == rule && f.loc.line == line) return true;
  for (const auto &f : v.findings)
    ADD_FAILURE() << "found " << to_string(f.rule) << " at line " << f.loc.line << ": " << f.message;
  return false;
}

/// The integer in environment variable `name`, or `fallback` where it is unset
/// (the generated tests' case counts and seeds).
inline std::int64_t env_int(const char *name, std::int64_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

/// The first kernel of `text`, or nullopt where it does not parse and
/// validate (a generated shape the validator rejects).
inline std::optional<spec::KernelSpec> first_kernel(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file || r.file->units.empty()) return std::nullopt;
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

} // namespace pipecheck::verifier::testing
