#pragma once
// Helpers for the verifier tests.

#include "verifier/verdict.hpp"

#include <gtest/gtest.h>

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

} // namespace pipecheck::verifier::testing
