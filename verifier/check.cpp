#include "verifier/check.hpp"

#include <chrono>

namespace pipecheck::verifier {

const std::vector<std::string> &all_rules() {
  static const std::vector<std::string> rules = {
      "reduction-not-last-axis", "output-revisit", "uninitialized-accumulator",
      "accumulator-reset", "input-write-lost", "index-out-of-bounds",
      "partial-block-reduction", "parallel-write-conflict", "output-not-covered",
      "alias-hazard", "sram-capacity", "block-tiling", "slot-race",
      "async-operand-overwritten", "wait-without-copy", "copy-never-waited",
      "stale-read", "uninitialized-read"};
  return rules;
}

std::vector<std::string> implemented_rules() { return {}; }

Verdict check(const spec::KernelSpec &, const CheckOptions &) {
  Verdict v;
  v.status = Status::unknown;
  v.reason = "verification of kernel specs is not implemented yet";
  return v;
}

Verdict check(const spec::Program &, const CheckOptions &) {
  Verdict v;
  v.status = Status::unknown;
  v.reason = "verification of pipelines is not implemented yet";
  return v;
}

Verdict check(const std::variant<spec::KernelSpec, spec::Program> &u, const CheckOptions &o) {
  auto t0 = std::chrono::steady_clock::now();
  Verdict v = std::visit([&](const auto &x) { return check(x, o); }, u);
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return v;
}

}  // namespace pipecheck::verifier
