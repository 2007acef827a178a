// `run` allocates no more than the estimate it checks --max-memory against:
// this binary counts every byte operator new hands out (the executor's
// arrays, values, programs, copy records and timelines all come from it) and
// compares the peak a run reaches with the run's own estimate.
#include "executor/run.hpp"
#include "spec/parse.hpp"

#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::int64_t> g_live{0}, g_peak{0};

void *counted(void *p) {
  if (!p) throw std::bad_alloc();
  const auto n = static_cast<std::int64_t>(malloc_usable_size(p));
  const std::int64_t now = g_live.fetch_add(n) + n;
  std::int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void uncounted(void *p) {
  if (!p) return;
  g_live.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)));
  std::free(p);
}

void *aligned(std::size_t n, std::align_val_t a) {
  const auto al = static_cast<std::size_t>(a);
  return std::aligned_alloc(al, (std::max<std::size_t>(n, 1) + al - 1) / al * al);
}

} // namespace

void *operator new(std::size_t n) { return counted(std::malloc(std::max<std::size_t>(n, 1))); }
void *operator new[](std::size_t n) { return counted(std::malloc(std::max<std::size_t>(n, 1))); }
void *operator new(std::size_t n, std::align_val_t a) { return counted(aligned(n, a)); }
void *operator new[](std::size_t n, std::align_val_t a) { return counted(aligned(n, a)); }
void operator delete(void *p) noexcept { uncounted(p); }
void operator delete[](void *p) noexcept { uncounted(p); }
void operator delete(void *p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void *p, std::size_t) noexcept { uncounted(p); }
void operator delete(void *p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void *p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

using namespace pipecheck;

namespace {

struct Measured {
  executor::RunReport report;
  std::int64_t peak_growth = 0;
};

/// Under a sanitizer the allocator is the sanitizer's and every run is many times slower:
/// the estimate is measured in the plain build only.
constexpr bool kSanitized =
#ifdef PIPECHECK_SANITIZED
    true;
#else
    false;
#endif

Measured measure(const std::variant<spec::KernelSpec, spec::Program> &u, const executor::RunOptions &o) {
  Measured m;
  const std::int64_t before = g_live.load();
  g_peak.store(before);
  m.report = std::visit([&](const auto &x) { return executor::run_all_modes(x, o); }, u);
  m.peak_growth = g_peak.load() - before;
  return m;
}

class MemoryEstimate : public ::testing::TestWithParam<std::string> {};

/// Runs `k`, which passes, allocating no more than its estimate.
executor::RunResult run_within_estimate(const spec::KernelSpec &k, const executor::RunOptions &o) {
  const std::int64_t before = g_live.load();
  g_peak.store(before);
  auto r = executor::run(k, o);
  const std::int64_t growth = g_peak.load() - before;
  EXPECT_EQ(r.status, executor::RunStatus::pass) << r.reason;
  EXPECT_LE(static_cast<std::uint64_t>(growth), r.memory_estimate)
      << "peak " << growth << " bytes, estimate " << r.memory_estimate;
  return r;
}

} // namespace

TEST_P(MemoryEstimate, EveryCorpusUnitAllocatesLessThanItsEstimate) {
  if (kSanitized) GTEST_SKIP() << "allocation peaks are measured in the build without sanitizers";
  const std::string rel = GetParam();
  const auto src = spec::SourceFile::from_string(
      rel, testing_corpus::read(std::filesystem::path(PIPECHECK_SOURCE_DIR) / rel));
  auto parsed = spec::parse_and_validate(src);
  ASSERT_TRUE(parsed.file);
  executor::RunOptions o;
  o.max_memory_bytes = 1ull << 30;
  for (const auto &u : parsed.file->units) {
    const Measured m = measure(u, o);
    const auto &r = m.report;
    if (r.status == executor::RunStatus::bad_input && r.memory_estimate > o.max_memory_bytes) {
      // Refused up front: nothing large was allocated.
      EXPECT_LT(m.peak_growth, 1 << 20) << spec::unit_name(u);
      continue;
    }
    if (r.memory_estimate == 0) continue; // stopped before sizing anything (bad input)
    EXPECT_LE(static_cast<std::uint64_t>(m.peak_growth), r.memory_estimate)
        << spec::unit_name(u) << ": peak " << m.peak_growth << " bytes, estimate " << r.memory_estimate;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, MemoryEstimate, ::testing::ValuesIn(testing_corpus::corpus_files()),
                         testing_corpus::test_name);

TEST(MemoryEstimateLongGrid, CoversTheUnrolledProgramCopiesAndTimelineOfEveryStep) {
  if (kSanitized) GTEST_SKIP() << "allocation peaks are measured in the build without sanitizers";
  // 16384 steps of a tiny block: the arrays are 8 MiB, everything else grows
  // with the step count.
  auto parsed = spec::parse_and_validate(
      spec::SourceFile::from_string("long.pk", "kernel k:\n    grid = (16384,)\n"
                                               "    in  x: f32[16384, 64] block=(1, 64) index=(i) -> (i, 0)\n"
                                               "    out o: f32[16384, 64] block=(1, 64) index=(i) -> (i, 0)\n"
                                               "    body:\n        o[...] = x[...] + 1\n"));
  ASSERT_TRUE(parsed.file);
  executor::RunOptions o;
  const auto r = run_within_estimate(std::get<spec::KernelSpec>(parsed.file->units.at(0)), o);
  // Refusing it is decided before anything grows.
  o.max_memory_bytes = r.memory_estimate - 1;
  g_peak.store(g_live.load());
  const std::int64_t start = g_live.load();
  const auto refused = executor::run(std::get<spec::KernelSpec>(parsed.file->units.at(0)), o);
  EXPECT_EQ(refused.status, executor::RunStatus::bad_input);
  EXPECT_LT(g_peak.load() - start, 1 << 20);
}

TEST(MemoryEstimateHbmOperand, APagePoolLeftInHbmDoesNotSizeTheBodysValues) {
  if (kSanitized) GTEST_SKIP() << "allocation peaks are measured in the build without sanitizers";
  // An 8 MiB pool in memory_space=any is only copied from, page by page,
  // never loaded into a value: the body's values are pages (ragged paged
  // attention's 7 GiB estimate came from counting each of its thousands of
  // value nodes as big as the pool).
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string(
      "pool.pk", "kernel k:\n    grid = (4,)\n    target = tpu_v5e\n"
                 "    in  pool: f32[64, 256, 128]  memory_space=any\n"
                 "    out o: f32[1024, 128]  block=(256, 128)  index=(i) -> (i, 0)\n"
                 "    scratch page: f32[256, 128]\n    scratch sem: dma_sem\n"
                 "    body:\n"
                 "        async_copy(pool[program_id(0) * 3], page, sem).start()\n"
                 "        async_copy(pool[program_id(0) * 3], page, sem).wait()\n"
                 "        a = page[...] * 2.0 + 1.0\n"
                 "        b = where(a > 0.0, a, -a) * a - page[...]\n"
                 "        o[...] = exp(b) + tanh(a) * b\n"));
  ASSERT_TRUE(parsed.file);
  executor::RunOptions o;
  const std::uint64_t pool = 64ull * 256 * 128 * 4;
  const auto r = run_within_estimate(std::get<spec::KernelSpec>(parsed.file->units.at(0)), o);
  EXPECT_LT(r.memory_estimate, 6 * pool) << r.memory_estimate;
}

TEST(MemoryEstimateReference, AStraightLineReferenceCountsAValueANodeAndNotAWholeBlockCacheOfArrays) {
  if (kSanitized) GTEST_SKIP() << "allocation peaks are measured in the build without sanitizers";
  // Two 16 MiB arrays and a reference `o = x * 2 + 1` over them: it makes a
  // few whole-array values, not the 32 the interpreter's block cache may
  // keep of a loop's (an estimate 30 times the arrays refused a 2 x 256 MiB
  // kernel at the default 4 GiB that ran in 1.5 GB).
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string(
      "ref.pk", "kernel k:\n    grid = (8, 8)\n"
                "    in  x: f32[2048, 2048] block=(256, 256) index=(i, j) -> (i, j)\n"
                "    out o: f32[2048, 2048] block=(256, 256) index=(i, j) -> (i, j)\n"
                "    body:\n        o[...] = x[...] * 2.0 + 1.0\n"
                "    reference:\n        o = x * 2.0 + 1.0\n"));
  ASSERT_TRUE(parsed.file);
  executor::RunOptions o;
  const auto r = run_within_estimate(std::get<spec::KernelSpec>(parsed.file->units.at(0)), o);
  const std::uint64_t arrays = 2ull * 2048 * 2048 * 4;
  EXPECT_LT(r.memory_estimate, 12 * arrays) << r.memory_estimate;
}

TEST(MemoryEstimateReference, AReferenceIsSizedByItsValuesTypesNotAWholeArrayANode) {
  if (kSanitized) GTEST_SKIP() << "allocation peaks are measured in the build without sanitizers";
  // A layer norm's reference over a 16 MiB array: most of its nodes are
  // rows (a mean, a variance) or scalars, a few are whole arrays (counted
  // each at the largest array, it was 17 GiB for a 768 MiB layer norm
  // backward that ran in 3.6 GB).
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string(
      "ln.pk", "kernel k:\n    grid = (8,)\n"
               "    in  x: f32[2048, 2048] block=(256, 2048) index=(i) -> (i, 0)\n"
               "    out o: f32[2048, 2048] block=(256, 2048) index=(i) -> (i, 0)\n"
               "    body:\n"
               "        mu = sum(x[...], axis=1, keepdims=True) / 2048\n"
               "        c = x[...] - mu\n"
               "        var = sum(c * c, axis=1, keepdims=True) / 2048\n"
               "        o[...] = c / sqrt(var + 0.00001)\n"
               "    reference:\n"
               "        mu = sum(x, axis=1, keepdims=True) / 2048\n"
               "        var = sum((x - mu) * (x - mu), axis=1, keepdims=True) / 2048\n"
               "        rs = 1.0 / sqrt(var + 0.00001)\n"
               "        o = (x - mu) * rs\n"));
  ASSERT_TRUE(parsed.file);
  executor::RunOptions o;
  const auto r = run_within_estimate(std::get<spec::KernelSpec>(parsed.file->units.at(0)), o);
  // (26 times the arrays when each node counted a whole array; 13.5 now.)
  const std::uint64_t arrays = 2ull * 2048 * 2048 * 4;
  EXPECT_LT(r.memory_estimate, 16 * arrays) << r.memory_estimate;
}

TEST(MemoryEstimatePrefetch, ATableReadElaboratedIntoAWhereTreeCostsItsScalarsNotAValueANode) {
  if (kSanitized) GTEST_SKIP() << "allocation peaks are measured in the build without sanitizers";
  // A Triton gather through a 512-entry open table: each read becomes a
  // `where` tree of 512 leaves, thousands of scalar nodes that the estimate
  // counted as values of the 2 MiB page pool each (6.2 GiB for a run of
  // 53 MB).
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string(
      "gather.pk", "kernel g:\n    grid = (2,)\n    backend = triton\n"
                   "    prefetch bt: i32[512] in [0, 512)\n"
                   "    in  kp: f32[512, 16, 64]\n"
                   "    out o: f32[2, 16, 64]  block=(None, 16, 64)  index=(i, bt) -> (i, 0, 0)\n"
                   "    body:\n"
                   "        acc = broadcast_to(0.0, (16, 64))\n"
                   "        for t in range(4):\n"
                   "            acc = acc + kp[bt[program_id(0) * 4 + t]]\n"
                   "        o[...] = acc\n"));
  ASSERT_TRUE(parsed.file);
  executor::RunOptions o;
  const auto r = run_within_estimate(std::get<spec::KernelSpec>(parsed.file->units.at(0)), o);
  const std::uint64_t pool = 512ull * 16 * 64 * 4;
  EXPECT_LT(r.memory_estimate, 64 * pool) << r.memory_estimate;
}
