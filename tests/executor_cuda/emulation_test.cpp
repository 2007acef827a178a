// The golden generated sources, run on host threads (host_emulation.hpp):
// the generated indexing, slot rings and CTA split compute what the Program
// means, checked without a GPU. The golden test keeps these files equal to
// what the generator emits.
#include "executor/cuda/codegen.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

void emulate_double_buffered_add_one(float *a, unsigned threads);
void emulate_add_rows_h200(const float *x, const float *y, float *z, unsigned ctas, unsigned threads);

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

TEST(CudaEmulation, TheGoldenDoubleBufferedPipelineAddsOneToEveryRowOnHostThreads) {
  const auto a0 = random_floats(4 * 512, 1);
  auto a = a0;
  emulate_double_buffered_add_one(a.data(), 8);
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(a[i], a0[i] + 1.0f) << "element " << i;
}

TEST(CudaEmulation, TheGoldenSequentialAxisKernelComputesEveryBlockThroughItsRingsOnHostThreads) {
  const auto f = parse_text(add_rows_h200, "add_rows_h200.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "add_rows_h200"), "h200"), {});
  ASSERT_TRUE(r) << r.error;
  const auto x = random_floats(64 * 256, 2), y = random_floats(64 * 256, 3);
  std::vector<float> z(64 * 256);
  fill_poison(z.data(), spec::DType::f32, static_cast<std::int64_t>(z.size()));
  emulate_add_rows_h200(x.data(), y.data(), z.data(), static_cast<unsigned>(r.kernel->ctas), 8);
  for (std::size_t i = 0; i < z.size(); ++i)
    ASSERT_EQ(z[i], x[i] * 2.0f + y[i]) << "element " << i;
}

} // namespace
} // namespace pipecheck::executor::cuda
