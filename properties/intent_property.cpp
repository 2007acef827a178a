#include "properties/intent_property.hpp"

#include "executor/run.hpp"
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include <sstream>

namespace pipecheck::properties {

namespace {

std::string buffered() {
  const int b = *rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {1, 2}, {1, 3}});
  return b > 0 ? "  buffered=" + std::to_string(b) : std::string();
}

std::string elementwise() {
  const std::int64_t bR = 8, bC = *rc::gen::element<std::int64_t>(8, 16);
  const std::int64_t nR = *rc::gen::inRange(1, 4), nC = *rc::gen::inRange(1, 4);
  const std::int64_t R = nR * bR - *rc::gen::element<std::int64_t>(0, 0, 3), C = nC * bC;
  const bool transposed = *rc::gen::arbitrary<bool>();
  std::ostringstream o;
  o << "kernel k:\n";
  // A transposed grid walks the column blocks first: the index map permutes.
  if (transposed)
    o << "    grid = (" << nC << ", " << nR << ")\n";
  else
    o << "    grid = (" << nR << ", " << nC << ")\n";
  if (*rc::gen::arbitrary<bool>()) o << "    dimension_semantics = (parallel, parallel)\n";
  const std::string map = transposed ? "(i, j) -> (j, i)" : "(i, j) -> (i, j)";
  o << "    in  x: f32[" << R << ", " << C << "]  block=(" << bR << ", " << bC << ")  index=" << map
    << buffered() << "\n";
  o << "    out o: f32[" << R << ", " << C << "]  block=(" << bR << ", " << bC << ")  index=" << map
    << buffered() << "\n";
  o << "    body:\n        o[...] = x[...] * 2 + 1\n";
  o << "    reference:\n        o = x * 2 + 1\n";
  return o.str();
}

std::string reduction() {
  const std::int64_t bm = 8, bn = *rc::gen::element<std::int64_t>(8, 16);
  const std::int64_t nm = *rc::gen::inRange(1, 3), nn = *rc::gen::inRange(1, 3), r = *rc::gen::inRange(1, 5);
  std::ostringstream o;
  o << "kernel k:\n    grid = (" << nm << ", " << nn << ", " << r << ")\n";
  if (*rc::gen::arbitrary<bool>()) o << "    dimension_semantics = (parallel, parallel, arbitrary)\n";
  o << "    in  x: f32[" << r << ", " << nm * bm << ", " << nn * bn << "]  block=(None, " << bm << ", " << bn
    << ")  index=(i, j, k) -> (k, i, j)" << buffered() << "\n";
  o << "    out o: f32[" << nm * bm << ", " << nn * bn << "]  block=(" << bm << ", " << bn
    << ")  index=(i, j, k) -> (i, j)" << buffered() << "\n";
  o << "    body:\n        when program_id(2) == 0:\n            o[...] = zeros\n        o[...] += x[...]\n";
  o << "    reference:\n        o = sum(x, axis=0)\n";
  return o.str();
}

std::string matmul() {
  const std::int64_t bm = *rc::gen::element<std::int64_t>(8, 16), bn = *rc::gen::element<std::int64_t>(8, 16),
                     bk = *rc::gen::element<std::int64_t>(8, 16);
  const std::int64_t nm = *rc::gen::inRange(1, 3), nn = *rc::gen::inRange(1, 3), nk = *rc::gen::inRange(1, 5);
  std::ostringstream o;
  o << "kernel k:\n    grid = (" << nm << ", " << nn << ", " << nk << ")\n";
  if (*rc::gen::arbitrary<bool>()) o << "    dimension_semantics = (parallel, parallel, arbitrary)\n";
  o << "    in  a: f32[" << nm * bm << ", " << nk * bk << "]  block=(" << bm << ", " << bk
    << ")  index=(i, j, kk) -> (i, kk)" << buffered() << "\n";
  o << "    in  b: f32[" << nk * bk << ", " << nn * bn << "]  block=(" << bk << ", " << bn
    << ")  index=(i, j, kk) -> (kk, j)" << buffered() << "\n";
  o << "    out o: f32[" << nm * bm << ", " << nn * bn << "]  block=(" << bm << ", " << bn
    << ")  index=(i, j, kk) -> (i, j)" << buffered() << "\n";
  o << "    scratch acc: f32[" << bm << ", " << bn << "]\n";
  o << "    body:\n        when program_id(2) == 0:\n            acc[...] = zeros\n"
    << "        acc[...] += dot(a[...], b[...])\n"
    << "        when program_id(2) == num_programs(2) - 1:\n            o[...] = acc[...]\n";
  o << "    reference:\n        o = dot(a, b)\n";
  return o.str();
}

std::string describe(const executor::RunResult &r) {
  std::string s = executor::to_string(r.mode);
  if (r.mode == executor::DmaMode::random) s += " seed " + std::to_string(r.seed);
  return s + ": " + executor::to_string(r.status) + ": " + r.reason;
}

executor::RunOptions quiet_options() {
  executor::RunOptions ro;
  ro.dma_threads = 1;
  ro.max_events = 0;
  ro.max_event_bytes = 0;
  return ro;
}

} // namespace

rc::Gen<std::string> reference_kernel_text() {
  return rc::gen::exec([]() {
    switch (*rc::gen::inRange(0, 3)) {
    case 0: return elementwise();
    case 1: return reduction();
    default: return matmul();
    }
  });
}

IntentOutcome check_against_reference(const std::string &text, std::uint64_t seed) {
  IntentOutcome out;
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("intent.pk", text));
  if (!parsed.file || parsed.file->units.size() != 1) return {"skip", {}, 0};
  const auto *k = std::get_if<spec::KernelSpec>(&parsed.file->units[0]);
  if (!k) return {"skip", {}, 0};
  verifier::Verdict v = verifier::check(*k, {});
  out.verdict = verifier::to_string(v.status);
  if (v.status != verifier::Status::verified) return out;
  const bool reduces = text.find("sum(") != std::string::npos || text.find("dot(") != std::string::npos;
  std::vector<executor::InputKind> kinds = {executor::InputKind::uniform, executor::InputKind::normal,
                                            executor::InputKind::integers, executor::InputKind::one_hot};
  if (!reduces) kinds.push_back(executor::InputKind::special);
  for (auto kind : kinds) {
    executor::RunOptions ro = quiet_options();
    ro.seed = seed;
    ro.input_kind = kind;
    executor::RunReport r = executor::run_all_modes(*k, ro);
    for (const auto &run : r.runs) {
      ++out.runs;
      if (run.status != executor::RunStatus::pass)
        out.failures.push_back(std::string(executor::to_string(kind)) + " inputs, " + describe(run));
    }
    if (r.runs.empty()) out.failures.push_back(std::string(executor::to_string(kind)) + " inputs: no run");
  }
  return out;
}

IntentOutcome check_adversarial_timing(const std::string &text) {
  IntentOutcome out;
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("timing.pk", text));
  if (!parsed.file || parsed.file->units.size() != 1) return {"skip", {}, 0};
  const auto *p = std::get_if<spec::Program>(&parsed.file->units[0]);
  if (!p) return {"skip", {}, 0};
  verifier::CheckOptions co;
  co.n_max = kAdversarialMaxN;
  verifier::Verdict v = verifier::check(*p, co);
  out.verdict = verifier::to_string(v.status);
  if (v.status != verifier::Status::verified) return out;
  std::string param;
  for (const auto &q : p->params)
    if (!q.value) param = q.name;
  for (std::int64_t n = 1; n <= (param.empty() ? 1 : kAdversarialMaxN); ++n) {
    std::vector<std::pair<executor::DmaMode, std::uint64_t>> schedules = {{executor::DmaMode::eager, 0},
                                                                          {executor::DmaMode::on_wait, 0}};
    for (int s = 0; s < kAdversarialSeeds; ++s)
      schedules.emplace_back(executor::DmaMode::random, static_cast<std::uint64_t>(1000 * n + s));
    for (const auto &[mode, seed] : schedules) {
      executor::RunOptions ro = quiet_options();
      ro.mode = mode;
      ro.seed = seed;
      if (!param.empty()) ro.overrides[param] = n;
      executor::RunResult r = executor::run(*p, ro);
      ++out.runs;
      if (r.status != executor::RunStatus::pass)
        out.failures.push_back((param.empty() ? "" : param + " = " + std::to_string(n) + ", ") + describe(r));
    }
  }
  return out;
}

} // namespace pipecheck::properties
