// Generated kernels launched on a GPU against the values the Program must
// compute. These need a CUDA device and skip without one, saying why; they
// have not yet run on a GPU (the no-device path is tested below).
#include "executor/cuda/device.hpp"
#include "executor/cuda/launch.hpp"
#include "executor/cuda/nvrtc.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

#define SKIP_WITHOUT_A_GPU()                                                                                 \
  do {                                                                                                       \
    std::string why_;                                                                                        \
    if (!cuda_device_available(&why_)) GTEST_SKIP() << "needs a CUDA GPU: " << why_;                         \
  } while (0)

TEST(CudaLaunch, WithoutADeviceALaunchIsAnErrorNamingCuda) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present; this checks the no-device path";
  const auto f = load_corpus("corpus/examples/guide_pipelines.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 4}});
  ASSERT_TRUE(r) << r.error;
  const PtxResult p = compile_to_ptx(r.kernel->source, "add_one.cu");
  ASSERT_TRUE(p.ok) << p.error;
  std::vector<std::vector<unsigned char>> arrays{bytes_of(std::vector<float>(4 * 512, 1.0f))};
  const LaunchResult l = launch_once(*r.kernel, p.ptx, arrays);
  EXPECT_FALSE(l.ok);
  EXPECT_EQ(l.error.rfind("CUDA: ", 0), 0u) << l.error;
}

TEST(CudaLaunch, TheGuidesDoubleBufferedPipelineAddsOneInPlaceOnTheGpu) {
  SKIP_WITHOUT_A_GPU();
  const auto f = load_corpus("corpus/examples/guide_pipelines.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 6}});
  ASSERT_TRUE(r) << r.error;
  const PtxResult p = compile_to_ptx(r.kernel->source, "add_one.cu");
  ASSERT_TRUE(p.ok) << p.error;
  const auto a = random_floats(6 * 512, 1);
  std::vector<std::vector<unsigned char>> arrays{bytes_of(a)};
  const LaunchResult l = launch_once(*r.kernel, p.ptx, arrays);
  ASSERT_TRUE(l.ok) << l.error;
  const auto out = floats_of(arrays[0]);
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(out[i], a[i] + 1.0f) << "element " << i;
}

TEST(CudaLaunch, TheGuidesElementwiseAddRunsOneCudaBlockPerCtaOnTheGpu) {
  SKIP_WITHOUT_A_GPU();
  const auto f = load_corpus("corpus/examples/guide_elementwise.pk");
  const auto lw = lower(unit<spec::KernelSpec>(f, "add_matrices_param"), "h200",
                        {{"m", 256}, {"n", 512}, {"bm", 32}, {"bn", 128}});
  const auto r = generate_cuda(lw, {});
  ASSERT_TRUE(r) << r.error;
  const PtxResult p = compile_to_ptx(r.kernel->source, "add.cu");
  ASSERT_TRUE(p.ok) << p.error;
  const auto x = random_floats(256 * 512, 2), y = random_floats(256 * 512, 3);
  std::vector<std::vector<unsigned char>> arrays{bytes_of(x), bytes_of(y),
                                                 bytes_of(std::vector<float>(256 * 512, 0.0f))};
  const LaunchResult l = launch_once(*r.kernel, p.ptx, arrays);
  ASSERT_TRUE(l.ok) << l.error;
  const auto z = floats_of(arrays[2]);
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(std::isnan(z[i])) << "poison left at element " << i;
    ASSERT_EQ(z[i], x[i] + y[i]) << "element " << i;
  }
}

TEST(CudaLaunch, AKernelWithASequentialAxisRunsItsCtasThroughTheirRingsOnTheGpu) {
  SKIP_WITHOUT_A_GPU();
  const auto f = parse_text(add_rows_h200, "add_rows_h200.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "add_rows_h200"), "h200"), {});
  ASSERT_TRUE(r) << r.error;
  const PtxResult p = compile_to_ptx(r.kernel->source, "add_rows.cu");
  ASSERT_TRUE(p.ok) << p.error;
  const auto x = random_floats(64 * 256, 4), y = random_floats(64 * 256, 5);
  std::vector<std::vector<unsigned char>> arrays{bytes_of(x), bytes_of(y),
                                                 bytes_of(std::vector<float>(64 * 256, 0.0f))};
  const LaunchResult l = launch_once(*r.kernel, p.ptx, arrays);
  ASSERT_TRUE(l.ok) << l.error;
  const auto z = floats_of(arrays[2]);
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(z[i], x[i] * 2.0f + y[i]) << "element " << i;
}

} // namespace
} // namespace pipecheck::executor::cuda
