// Any byte string: parse and validate never crash or hang, and whatever parses
// prints to text that parses back to the same IR.
#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace pipecheck::spec;
  SourceFile src =
      SourceFile::from_string("fuzz.pk", std::string(reinterpret_cast<const char *>(data), size));
  ParseResult r = parse_and_validate(src);
  if (!r.file) {
    if (r.errors.empty()) std::abort(); // a failure must say why
    (void)render(src, r.errors.front());
    return 0;
  }
  std::string printed = print(*r.file);
  ParseResult again = parse(SourceFile::from_string("fuzz.pk", printed));
  if (!again.file || !(*again.file == *r.file)) std::abort();
  if (print(*again.file) != printed) std::abort();
  return 0;
}
