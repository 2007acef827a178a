// Any byte string: parse and validate never crash or hang, and whatever parses
// prints to text that parses back to the same IR.
#include "roundtrip.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::string failure =
      pipecheck::fuzz::parse_print_roundtrip_failure(std::string(reinterpret_cast<const char *>(data), size));
  if (!failure.empty()) {
    std::fprintf(stderr, "%s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
