// bench_fuzz: the cost of `pipecheck fuzz` and the agreement of check and run
// on generated kernels. Prints figures as text, then one JSON object on its
// last line:
//   verified_configs_per_s   configurations checked per second (--no-run) of a
//                            matmul over 3 x 3 x 3 x 3 block sizes, one thread, each
//                            sweep with its own query cache (target >= 1000); a text
//                            line gives the same with --jobs = hardware threads
//   executed_configs_per_s   configurations checked and run (two schedules) per
//                            second, small shapes (target >= 100)
//   agreement                generated kernels whose verdict agrees with their runs,
//                            as a fraction (target 1.0); PIPECHECK_BENCH_AGREEMENT_CASES
//                            sets the count (default 10000), PIPECHECK_BENCH_AGREEMENT_SEED
//                            the generator's seed (default 1)
//   agreement_cases          that count
//   agreement_seed           that seed
#include "properties/agreement.hpp"
#include "spec/parse.hpp"
#include "sweep/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace pipecheck;

namespace {

const char *kMatmul = R"(kernel matmul:
    param m = 256
    param bm = 64 in {32, 64, 128}
    param bn = 64 in {32, 64, 128}
    param bk = 64 in {32, 64, 128}
    param nb = 2 in {1, 2, 3}
    grid = (m // bm, m // bn, m // bk)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  a: f32[m, m]  block=(bm, bk)  index=(i, j, k) -> (i, k)  buffered=nb
    in  b: f32[m, m]  block=(bk, bn)  index=(i, j, k) -> (k, j)  buffered=nb
    out o: f32[m, m]  block=(bm, bn)  index=(i, j, k) -> (i, j)
    scratch acc: f32[bm, bn]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(2) == num_programs(2) - 1:
            o[...] = acc[...]
)";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main() {
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("matmul.pk", kMatmul));
  if (!parsed.file) {
    std::fprintf(stderr, "bench_fuzz: %s\n", parsed.errors.at(0).message.c_str());
    return 1;
  }
  const auto &k = std::get<spec::KernelSpec>(parsed.file->units.at(0));

  sweep::SweepOptions checked;
  checked.run = false;
  checked.max_configs = 1000;
  auto t0 = std::chrono::steady_clock::now();
  std::size_t n_checked = 0;
  for (int rep = 0; rep < 3; ++rep)
    n_checked += std::get<sweep::SweepResult>(sweep::sweep(k, checked)).configs.size();
  const double verified_per_s = n_checked / seconds_since(t0);
  std::printf("fuzz --no-run: %zu configurations, %.0f per second\n", n_checked, verified_per_s);
  // The same on every hardware thread (fuzz --jobs): a figure of the host.
  checked.jobs = std::max(1u, std::thread::hardware_concurrency());
  t0 = std::chrono::steady_clock::now();
  std::size_t n_parallel = 0;
  for (int rep = 0; rep < 3; ++rep)
    n_parallel += std::get<sweep::SweepResult>(sweep::sweep(k, checked)).configs.size();
  std::printf("fuzz --no-run --jobs %u: %zu configurations, %.0f per second\n", checked.jobs, n_parallel,
              n_parallel / seconds_since(t0));

  sweep::SweepOptions executed;
  executed.max_configs = 1000;
  executed.overrides["m"] = 128; // small shapes, every block fits
  executed.overrides["bm"] = 32;
  t0 = std::chrono::steady_clock::now();
  auto ran = std::get<sweep::SweepResult>(sweep::sweep(k, executed));
  const double executed_per_s = ran.configs.size() / seconds_since(t0);
  std::printf("fuzz: %zu configurations checked and run, %.0f per second, all ok: %s\n", ran.configs.size(),
              executed_per_s, ran.all_ok() ? "yes" : "no");

  std::int64_t cases = 10000;
  if (const char *e = std::getenv("PIPECHECK_BENCH_AGREEMENT_CASES"))
    cases = std::max<long long>(1, std::atoll(e));
  std::uint64_t seed = 1;
  if (const char *e = std::getenv("PIPECHECK_BENCH_AGREEMENT_SEED")) seed = std::strtoull(e, nullptr, 10);
  t0 = std::chrono::steady_clock::now();
  auto tally = properties::run_agreement(properties::agreement_kernel_text(), cases, seed);
  std::printf("agreement: %s (%.1f s)\n", tally.summary().c_str(), seconds_since(t0));
  for (const auto &[text, a] : tally.disagreements)
    std::printf("disagreement:\n%s\n", text.c_str());
  const double agreement = tally.cases > 0 ? 1.0 - static_cast<double>(tally.disagreements.size()) /
                                                       static_cast<double>(tally.cases)
                                           : 0;
  std::printf("{\"verified_configs_per_s\": %.1f, \"executed_configs_per_s\": %.1f, \"agreement\": %.4f, "
              "\"agreement_cases\": %lld, \"agreement_seed\": %llu}\n",
              verified_per_s, executed_per_s, agreement, static_cast<long long>(tally.cases),
              static_cast<unsigned long long>(seed));
  return 0;
}
