#pragma once
// Helpers for the spec tests: parse and validate .pk text.

#include "spec/parse.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace pipecheck::spec::testing {

/// The first unit of `text` (named `file`), parsed and validated; a test
/// failure showing the first error when it does not validate.
inline KernelSpec kernel_ok(const std::string &text, const std::string &file = "t.pk") {
  auto src = SourceFile::from_string(file, text);
  auto r = parse_and_validate(src);
  if (!r.file) {
    ADD_FAILURE() << render(src, r.errors.at(0));
    return {};
  }
  return std::get<KernelSpec>(r.file->units.at(0));
}

/// The first error of parse_and_validate, as "LINE:COL: message"; "no error"
/// when there is none.
inline std::string first_error(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("t.pk", text));
  if (r.errors.empty()) return "no error";
  const auto &e = r.errors.front();
  return std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col) + ": " + e.message;
}

} // namespace pipecheck::spec::testing
