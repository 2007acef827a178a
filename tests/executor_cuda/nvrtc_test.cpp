// NVRTC: PTX and, through ptxas, sm_90a machine code; no GPU needed.
#include "executor/cuda/codegen.hpp"
#include "executor/cuda/nvrtc.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

TEST(CudaCodegen, AMalformedSourceIsAnNvrtcErrorWithItsLog) {
  const PtxResult p = compile_to_ptx("extern \"C\" __global__ void k() { undeclared(); }", "bad.cu");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.error.find("NVRTC"), std::string::npos);
  EXPECT_NE(p.error.find("undeclared"), std::string::npos) << p.error;
}

TEST(CudaNvrtc, TheGuidesPipelineAssemblesToSm90aMachineCode) {
  const auto f = load_corpus("corpus/examples/guide_pipelines.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 4}});
  ASSERT_TRUE(r) << r.error;
  const PtxResult c = compile_to_cubin(r.kernel->source, "add_one.cu", "sm_90a");
  ASSERT_TRUE(c.ok) << c.error;
  ASSERT_GT(c.cubin.size(), 4u);
  EXPECT_EQ(c.cubin.substr(0, 4), std::string("\x7f"
                                              "ELF"));
  EXPECT_NE(c.cubin.find("pk_double_buffered_add_one"), std::string::npos);
}

TEST(CudaNvrtc, AnUnknownArchitectureIsAnErrorNotAModule) {
  const PtxResult p = compile_to_ptx("extern \"C\" __global__ void k() {}", "k.cu", "compute_1");
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(p.ptx.empty());
  EXPECT_NE(p.error.find("NVRTC"), std::string::npos) << p.error;
}

} // namespace
} // namespace pipecheck::executor::cuda
