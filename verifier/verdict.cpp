#include "verifier/verdict.hpp"

namespace pipecheck::verifier {

const char *to_string(Status s) {
  switch (s) {
  case Status::verified: return "verified";
  case Status::violation: return "violation";
  case Status::unknown: return "unknown";
  }
  return "?";
}

} // namespace pipecheck::verifier
