#pragma once
/// The parser fuzzer's property, shared by the libFuzzer target and the regression test
/// that replays every input that ever failed it.

#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <string>

namespace pipecheck::fuzz {

/// Empty when `text` holds the property: parse and validate never crash, a failure says why,
/// and whatever parses prints to text that parses back to the same IR and prints the same.
/// Otherwise what broke.
inline std::string parse_print_roundtrip_failure(const std::string &text) {
  using namespace pipecheck::spec;
  SourceFile src = SourceFile::from_string("fuzz.pk", text);
  ParseResult r = parse_and_validate(src);
  if (!r.file) {
    if (r.errors.empty()) return "parsing failed without saying why";
    (void)render(src, r.errors.front());
    return {};
  }
  std::string printed = print(*r.file);
  ParseResult again = parse(SourceFile::from_string("fuzz.pk", printed));
  if (!again.file) return "the printed form does not parse:\n" + printed;
  if (!(*again.file == *r.file)) return "the printed form parses to another IR:\n" + printed;
  if (print(*again.file) != printed) return "printing is not a fixed point:\n" + printed;
  return {};
}

} // namespace pipecheck::fuzz
