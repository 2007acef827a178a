#pragma once
// Helpers for the spec-rule tests: parse .pk text, check one kernel, and
// compare a file's findings with its `# expect:` comments.

#include "spec/parse.hpp"
#include "verifier/check.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::testing {

inline spec::File parse_text(const std::string &text, const std::string &path = "test.pk") {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string(path, text));
  if (!r.file) {
    std::string msg = "parse failed: ";
    for (const auto &e : r.errors)
      msg += std::to_string(e.loc.line) + ":" + e.message + "; ";
    throw std::runtime_error(msg);
  }
  return *r.file;
}

inline std::string read_file(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline spec::KernelSpec kernel(const spec::File &f, const std::string &name) {
  for (const auto &u : f.units)
    if (const auto *k = std::get_if<spec::KernelSpec>(&u); k && k->name == name) return *k;
  throw std::runtime_error("no kernel " + name);
}

inline verifier::Verdict check_text(const std::string &text, const std::string &name,
                                    verifier::CheckOptions o = {}) {
  return verifier::check(std::variant<spec::KernelSpec, spec::Program>(kernel(parse_text(text), name)), o);
}

/// (rule, line) pairs.
using Marks = std::set<std::pair<verifier::Rule, int>>;

inline Marks marks(const verifier::Verdict &v) {
  Marks m;
  for (const auto &f : v.findings)
    m.insert({f.rule, f.loc.line});
  return m;
}

inline const verifier::WitnessItem *item(const verifier::Finding &f, const std::string &key) {
  for (const auto &i : f.witness.items)
    if (i.key == key) return &i;
  return nullptr;
}

inline std::vector<std::int64_t> point_item(const verifier::Finding &f, const std::string &key) {
  const auto *i = item(f, key);
  if (!i) return {};
  return std::get<std::vector<std::int64_t>>(i->value);
}

/// Kernel `name` of `text`: the solver and the grid-point enumerator decide
/// its spec rules alike, neither unknown: the same findings in order, with the
/// same rule and witness (and message, where `messages`).
inline void expect_enumerator_agrees(const std::string &text, const std::string &name, bool messages) {
  const spec::KernelSpec k = kernel(parse_text(text), name); // the model points into it
  auto m = verifier::rules::build_model(k, {}, std::nullopt);
  ASSERT_TRUE(m.model) << text;
  auto s = verifier::rules::check_symbolic(*m.model, 10000);
  auto e = verifier::rules::check_enumerated(*m.model);
  EXPECT_TRUE(s.unknown.empty() && e.unknown.empty()) << text;
  auto listed = [](const verifier::rules::RuleOutcome &r) {
    std::string out;
    for (const auto &f : r.findings)
      out += "\n  " + f.message;
    return out;
  };
  ASSERT_EQ(s.findings.size(), e.findings.size())
      << text << "\nsolver:" << listed(s) << "\nenumerator:" << listed(e);
  for (std::size_t i = 0; i < s.findings.size(); ++i) {
    EXPECT_EQ(s.findings[i].rule, e.findings[i].rule) << text;
    EXPECT_EQ(s.findings[i].witness, e.findings[i].witness) << text;
    if (messages) {
      EXPECT_EQ(s.findings[i].message, e.findings[i].message) << text;
    }
  }
}

} // namespace pipecheck::testing
