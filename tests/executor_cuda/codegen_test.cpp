// The CUDA code generator and its NVRTC compile: no GPU needed.
//
// The golden source tests/executor_cuda/golden/double_buffered_add_one.cu is
// compared exactly; after an intended change of the generator, regenerate it
// with PIPECHECK_UPDATE_GOLDEN=1 ctest --test-dir build -R executor_cuda
// and review the diff.
#include "executor/cuda/codegen.hpp"
#include "executor/cuda/device.hpp"
#include "executor/cuda/nvrtc.hpp"
#include "tests/executor_cuda/testing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

namespace pipecheck::executor::cuda {
namespace {

using namespace testing;

// Its copies are asynchronous: cp.async groups, or (sm_90) bulk copies on
// mbarriers, whichever paths the compiler keeps.
void expect_ptx_with_cp_async(const CudaKernel &k) {
  const PtxResult p = compile_to_ptx(k.source, k.entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error << "\n" << k.source;
  EXPECT_NE(p.ptx.find(".entry " + k.entry), std::string::npos);
  const bool cp_async = p.ptx.find("cp.async.ca.shared.global") != std::string::npos &&
                        p.ptx.find("cp.async.commit_group") != std::string::npos &&
                        p.ptx.find("cp.async.wait_group") != std::string::npos;
  const bool bulk = p.ptx.find("cp.async.bulk.shared::cluster.global") != std::string::npos &&
                    p.ptx.find("mbarrier.try_wait.parity") != std::string::npos;
  EXPECT_TRUE(cp_async || bulk) << p.ptx.substr(0, 2000);
}

TEST(CudaCodegen, TheGuidesElementwiseKernelLoweredForH200IsOneCudaBlockPerCtaAndCompilesToPtxWithCpAsync) {
  const auto f = load_corpus("corpus/examples/guide_elementwise.pk");
  const auto l = lower(unit<spec::KernelSpec>(f, "add_matrices_param"), "h200", {{"bm", 32}, {"bn", 128}});
  const auto r = generate_cuda(l, {});
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r.kernel->ctas, (4096 / 32) * (4096 / 128));
  EXPECT_TRUE(r.kernel->notes.empty());
  expect_ptx_with_cp_async(*r.kernel);
}

TEST(CudaCodegen, TheGuidesElementwiseKernelLoweredForTpuRunsAsOneCtaAndCompilesToPtxWithCpAsync) {
  const auto f = load_corpus("corpus/examples/guide_elementwise.pk");
  const auto l = lower(unit<spec::KernelSpec>(f, "add_matrices_param"), "tpu_v5e", {{"bm", 32}, {"bn", 128}});
  const auto r = generate_cuda(l, {});
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r.kernel->ctas, 1);
  ASSERT_EQ(r.kernel->notes.size(), 1u);
  EXPECT_NE(r.kernel->notes[0].find("one CTA"), std::string::npos);
  // A double-buffered ring of each operand: 3 x 2 slots of 32 x 128 f32.
  EXPECT_EQ(r.kernel->smem_bytes, 3 * 2 * 32 * 128 * 4);
  expect_ptx_with_cp_async(*r.kernel);
}

TEST(CudaCodegen, OnlyTheOutputIsPoisonedByTheHostAndPoisonIsNaN) {
  const auto f = load_corpus("corpus/examples/guide_elementwise.pk");
  const auto l = lower(unit<spec::KernelSpec>(f, "add_matrices_param"), "h200", {{"bm", 32}, {"bn", 128}});
  const auto r = generate_cuda(l, {});
  ASSERT_TRUE(r) << r.error;
  ASSERT_EQ(r.kernel->arrays.size(), 3u);
  EXPECT_FALSE(r.kernel->arrays[0].poison()); // x
  EXPECT_FALSE(r.kernel->arrays[1].poison()); // y
  EXPECT_TRUE(r.kernel->arrays[2].poison());  // z
  EXPECT_EQ(r.kernel->arrays[2].elements, 4096 * 4096);
  float v[3] = {1, 2, 3};
  fill_poison(v, spec::DType::f32, 3);
  for (float x : v)
    EXPECT_TRUE(std::isnan(x));
  // bf16 and f16 poison is their NaN, i32's the lowest value, as HostArray's.
  std::uint16_t h[2] = {1, 2};
  fill_poison(h, spec::DType::bf16, 1);
  fill_poison(h + 1, spec::DType::f16, 1);
  EXPECT_EQ(h[0], 0x7fc0);
  EXPECT_EQ(h[1], 0x7e00);
  std::int32_t i = 0;
  fill_poison(&i, spec::DType::i32, 1);
  EXPECT_EQ(i, std::numeric_limits<std::int32_t>::min());
  // The kernel poisons its shared memory itself before the first statement.
  EXPECT_NE(r.kernel->source.find("Poison: every slot starts as NaN"), std::string::npos);
}

TEST(CudaCodegen, ABlockThatDoesNotFitSharedMemoryIsAnErrorNamingTheBudget) {
  const auto f = load_corpus("corpus/examples/guide_elementwise.pk");
  const auto l = lower(unit<spec::KernelSpec>(f, "add_matrices_pipelined"), "h200");
  const auto r = generate_cuda(l, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error.find("does not fit shared memory"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("x_smem 1 x 1048576 B"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("budget is 232448 bytes"), std::string::npos) << r.error;
}

TEST(CudaCodegen, ADotBodyIsComputedIntoATemporaryByAPassOfItsOwnBeforeTheStore) {
  const auto f = parse_text(R"(kernel mm:
    grid = (2, 2)
    target = h200
    in  a: f32[64, 32]  block=(32, 32)  index=(i, j) -> (i, 0)
    in  b: f32[32, 64]  block=(32, 32)  index=(i, j) -> (0, j)
    out o: f32[64, 64]  block=(32, 32)  index=(i, j) -> (i, j)
    body:
        o[...] = dot(a[...], b[...]) * 2
)",
                            "mm.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "mm"), "h200"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  // The dot's (32, 32) f32 result in shared memory after the rings, summed
  // in f32 over k in order, then a barrier, then the store reads it.
  const auto dot = src.find("// dot(a_smem[");
  const auto sum = src.find("for (long long pk_k", dot);
  const auto sync = src.find("__syncthreads();", sum);
  const auto store = src.find("pk_d[", sync);
  ASSERT_NE(dot, std::string::npos) << src;
  EXPECT_NE(sum, std::string::npos) << src;
  EXPECT_NE(store, std::string::npos) << src;
  std::int64_t rings = 0;
  for (const auto &ring : r.kernel->shared)
    rings += ring.slots * ring.slot_elements * 4;
  EXPECT_EQ(r.kernel->smem_bytes, rings + 32 * 32 * 4) << src; // and the dot's result
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error;
}

TEST(CudaCodegen, ABodyTooLargeForSharedMemoryWithItsTemporariesNamesTheBudget) {
  // Slots of 32, 64 and 128 KiB fit the 227 KiB; the dot's 128 KiB result does not.
  const auto f = parse_text(R"(kernel mm:
    grid = (2,)
    target = h200
    in  a: f32[256, 64]  block=(128, 64)  index=(i) -> (i, 0)
    in  b: f32[64, 256]  block=(64, 256)  index=(i) -> (0, 0)
    out o: f32[256, 256]  block=(128, 256)  index=(i) -> (i, 0)
    body:
        o[...] = dot(a[...], b[...])
)",
                            "mm.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "mm"), "h200"), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error.rfind("does not fit shared memory: ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("bytes of body values (tensor locals, temporaries)"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("the per-block budget is 232448 bytes"), std::string::npos) << r.error;
}

TEST(CudaCodegen, AnI8BufferIsNotSupportedYetAndSaysSo) {
  const auto f = parse_text("pipeline bytes:\n"
                            "    hbm A: i8[4, 512]\n"
                            "    sram X[2]: i8[512]\n"
                            "    copy_in_start(A[0], X[0])\n"
                            "    copy_in_wait(X[0])\n",
                            "bytes.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "bytes"), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error, "not supported by the CUDA backend: dtype i8 (f32, bf16, f16 and i32 so far): buffer A");
}

TEST(CudaCodegen, Bf16IsHeldAsItsBitsComputedInF32AndRoundedAfterEveryOperation) {
  const auto f = load_corpus("corpus/kernels/typed_elementwise_gpu.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "bf16_scale_add_rows"), "h100"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  EXPECT_NE(src.find("const unsigned short *__restrict__ g_x"), std::string::npos) << src;
  // x * 3 + y - 0.5: the literals adopt bf16, each operation rounds to it.
  EXPECT_NE(
      src.find(
          "pk_from_bf16(pk_to_bf16((pk_from_bf16(pk_to_bf16((pk_from_bf16(pk_to_bf16((pk_from_bf16(pk_p"),
      std::string::npos)
      << src;
  // 2-byte elements: 4-byte cp.async pairs where a pair is contiguous.
  EXPECT_NE(src.find("pk_cp_async4(dst + e0, g_x + off0);"), std::string::npos) << src;
  EXPECT_NE(src.find("* pk_from_bf16(pk_to_bf16(static_cast<float>(3LL)))))) + pk_from_bf16(pk_p"),
            std::string::npos)
      << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_NE(p.ptx.find("cp.async.ca.shared.global"), std::string::npos);
}

TEST(CudaCodegen, TheGeneratedSourceOfTheGuidesDoubleBufferedPipelineMatchesItsGolden) {
  const auto f = load_corpus("corpus/examples/guide_pipelines.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 4}});
  ASSERT_TRUE(r) << r.error;
  const std::string path =
      std::string(PIPECHECK_SOURCE_DIR) + "/tests/executor_cuda/golden/double_buffered_add_one.cu";
  if (const char *u = std::getenv("PIPECHECK_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path) << r.kernel->source;
    GTEST_SKIP() << "rewrote " << path;
  }
  EXPECT_EQ(r.kernel->source, read_file(path))
      << "regenerate with PIPECHECK_UPDATE_GOLDEN=1 and review the diff";
  EXPECT_EQ(r.kernel->smem_bytes, 2 * 2 * 512 * 4);
  expect_ptx_with_cp_async(*r.kernel);
}

TEST(CudaCodegen, TheGeneratedSourceOfAnElementwiseKernelWithASequentialAxisForH200MatchesItsGolden) {
  const auto f = parse_text(add_rows_h200, "add_rows_h200.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "add_rows_h200"), "h200"), {});
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r.kernel->ctas, 2);
  EXPECT_EQ(r.kernel->shared.at(0).slots, 2);
  const std::string path = std::string(PIPECHECK_SOURCE_DIR) + "/tests/executor_cuda/golden/add_rows_h200.cu";
  if (const char *u = std::getenv("PIPECHECK_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path) << r.kernel->source;
    GTEST_SKIP() << "rewrote " << path;
  }
  EXPECT_EQ(r.kernel->source, read_file(path))
      << "regenerate with PIPECHECK_UPDATE_GOLDEN=1 and review the diff";
  expect_ptx_with_cp_async(*r.kernel);
}

TEST(CudaCodegen, AWhilePastItsBoundTrapsAndAStoreOfUndefinedIsNaNAndBothCompileToPtx) {
  const auto f = parse_text("pipeline w:\n"
                            "    hbm A: f32[4, 512]\n"
                            "    sram X[2]: f32[512]\n"
                            "    k = 0\n"
                            "    while k < 4, bound=2:\n"
                            "        copy_in_start(A[k], X[0])\n"
                            "        copy_in_wait(X[0])\n"
                            "        k = k + 1\n"
                            "    X[1] = undefined\n"
                            "    X[1] = X[0] + X[1]\n",
                            "w.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "w"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  const auto trap = src.find(") __trap(); // the while loop at line 5 may run past its bound 2");
  ASSERT_NE(trap, std::string::npos) << src;
  // after the loop's last guarded iteration, before what follows the loop
  EXPECT_LT(trap, src.find("X[1] = undefined")) << src;
  EXPECT_NE(src.find("= __int_as_float(0x7fc00000);"), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error << "\n" << src;
  EXPECT_NE(p.ptx.find("trap;"), std::string::npos);
}

TEST(CudaCodegen, ErfAndErfcAreCudasErffAndErfcfAndCompileToPtx) {
  const auto f = parse_text("pipeline g:\n"
                            "    hbm A: f32[512]\n"
                            "    sram X[2]: f32[512]\n"
                            "    copy_in_start(A, X[0])\n"
                            "    copy_in_wait(X[0])\n"
                            "    X[1] = erf(X[0]) + erfc(X[0])\n",
                            "g.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "g"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  EXPECT_NE(src.find("erff("), std::string::npos) << src;
  EXPECT_NE(src.find("erfcf("), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error << "\n" << src;
}

TEST(CudaCodegen, AdversarialModeSpinsOnClock64PoisonsSlotsAtCopyStartsAndDefersWriteBacksToTheirWaits) {
  const auto f = load_corpus("corpus/examples/guide_pipelines.pk");
  CodegenOptions o;
  o.adversarial = true;
  o.adversarial_seed = 42;
  const auto r = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 4}}, o);
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  EXPECT_NE(src.find("#define PK_SEED 42ULL"), std::string::npos) << src;
  EXPECT_NE(src.find("dst[e] = __int_as_float(0x7fc00000); pk_cp_async4("), std::string::npos) << src;
  EXPECT_NE(src.find("takes effect at its wait"), std::string::npos) << src;
  EXPECT_NE(src.find("// strict slot contents"), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error << "\n" << src;
  EXPECT_NE(p.ptx.find("%clock64"), std::string::npos);
  // The seed is the only difference another seed makes; plain mode has none of it.
  o.adversarial_seed = 43;
  const auto r43 = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 4}}, o);
  ASSERT_TRUE(r43);
  EXPECT_NE(r43.kernel->source, src);
  const auto plain = generate_cuda(unit<spec::Program>(f, "double_buffered_add_one"), {{"N", 4}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain.kernel->source.find("pk_delay"), std::string::npos);
}

TEST(CudaCodegen, APartialEdgeBlockMovesToTheSlotsLeadingCornerAndTheRestOfTheSlotIsPoison) {
  const auto f = parse_text("pipeline edge:\n"
                            "    hbm A: f32[6, 8]\n"
                            "    hbm B: f32[6, 8]\n"
                            "    sram X[1]: f32[4, 8]\n"
                            "    copy_in_start(A[4:6, :], X[0])\n"
                            "    copy_in_wait(X[0])\n"
                            "    copy_out_start(X[0], B[4:6, :])\n"
                            "    copy_out_wait(X[0])\n",
                            "edge.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "edge"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  EXPECT_NE(src.find("const long long m0 = pk_min(n0, 4LL);"), std::string::npos) << src;
  EXPECT_NE(src.find("if (c0 < m0 && c1 < m1) { pk_cp_async4(dst + e, g_A + off); } else dst[e] = "
                     "__int_as_float(0x7fc00000);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("if (c0 < m0 && c1 < m1) g_B[off] = src[e];"), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error << "\n" << src;
}

TEST(CudaCodegen, AWgmmaIsQueuedAtItsStatementAndReadsItsSlotsWhenAWaitRetiresIt) {
  const auto f = load_corpus("corpus/kernels/wgmma_matmul_gpu.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "wgmma_matmul_delay_release"), "h100"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  EXPECT_EQ(r.kernel->ctas, 4);
  // The accumulator starts as zeros, the slots as poison.
  EXPECT_NE(src.find("s_acc[e] = 0.0f;"), std::string::npos) << src;
  const auto issue = src.find("wgmma(acc, a_smem[t % 2], b_smem[t % 2]): reads its operands when it retires");
  const auto retire = src.find("case 0: { // acc += a_smem @ b_smem");
  ASSERT_NE(issue, std::string::npos) << src;
  ASSERT_NE(retire, std::string::npos) << src;
  EXPECT_NE(src.find("while (wg_n > keep) {"), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error;
}

TEST(CudaCodegen, ATransposedWgmmaOperandIsReadTransposedByTheLoopAndNeverByTheInstruction) {
  const auto f = load_corpus("corpus/kernels/wgmma_matmul_gpu.pk");
  const auto r =
      generate_cuda(lower(unit<spec::KernelSpec>(f, "wgmma_scores_qt_k_ragged_queries"), "h100"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  // qt's (64, 64) slot is read as its transpose, element (i, p) at p * 64 + i;
  // kt's likewise at j * 64 + p.
  EXPECT_NE(src.find("trans_a=True, trans_b=True): reads its operands when it retires"), std::string::npos)
      << src;
  EXPECT_NE(src.find("A[p * 64LL + i]"), std::string::npos) << src;
  EXPECT_NE(src.find("B[j * 64LL + p]"), std::string::npos) << src;
  EXPECT_EQ(src.find("pk_wgmma_bf16_m64n64("), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu", "compute_90a");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.ptx.find("wgmma.mma_async"), std::string::npos);
}

TEST(CudaCodegen, OnSm90aAWgmmaIsTheWgmmaInstructionOnCanonicalLayoutSlotsAndItsWaitIsWaitGroup) {
  const auto f = load_corpus("corpus/kernels/wgmma_matmul_gpu.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "wgmma_matmul_delay_release"), "h100"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  // a (64, 32) and b (32, 64) slots are stored as 8 x 8 core matrices;
  // the (64, 64) acc is one 64 x 64 tile: 32 floats per thread.
  EXPECT_NE(src.find("pk_cp_async4(dst + pk_tile(e0, 32LL), g_a + off0);"), std::string::npos) << src;
  EXPECT_NE(src.find("pk_cp_async4(dst + pk_tile(e0, 64LL), g_b + off0);"), std::string::npos) << src;
  EXPECT_NE(src.find("float f_acc[1][32]; int wgn_acc = 0;"), std::string::npos) << src;
  EXPECT_NE(src.find("pk_wgmma_bf16_m64n64(f_acc[0], pk_wgmma_desc(A + pk_tile(mt * 2048LL + ks * 16, 32LL), "
                     "128u, 512u), pk_wgmma_desc(B + pk_tile(ks * 1024LL + nt * 64, 64LL), 1024u, 128u));"),
            std::string::npos)
      << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu", "compute_90a");
  ASSERT_TRUE(p.ok) << p.error;
  for (const char *op : {"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "wgmma.fence.sync.aligned",
                         "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 1",
                         "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"})
    EXPECT_NE(p.ptx.find(op), std::string::npos) << op;
  const PtxResult sass = compile_to_cubin(src, r.kernel->entry + ".cu", "sm_90a");
  EXPECT_TRUE(sass.ok) << sass.error;
  // Without sm_90a's features (sm_90, sm_80) a wgmma is the loop at its retirement.
  for (const char *arch : {"compute_90", "compute_80"}) {
    const PtxResult loop = compile_to_ptx(src, r.kernel->entry + ".cu", arch);
    ASSERT_TRUE(loop.ok) << loop.error;
    EXPECT_EQ(loop.ptx.find("wgmma."), std::string::npos) << arch;
  }
}

TEST(CudaCodegen, AWgmmaTheInstructionDoesNotFitIsTheLoopOnEveryArchitecture) {
  // m = 32 is not a multiple of 64: no m64nNk16 tile.
  const auto f = parse_text("pipeline small_wgmma:\n"
                            "    hbm a: bf16[32, 16]\n"
                            "    hbm b: bf16[16, 8]\n"
                            "    hbm o: f32[32, 8]\n"
                            "    smem x: bf16[32, 16]\n"
                            "    smem y: bf16[16, 8]\n"
                            "    smem z: f32[32, 8]\n"
                            "    acc c: f32[32, 8]\n"
                            "    copy_in_start(a[...], x[...])\n"
                            "    copy_in_start(b[...], y[...])\n"
                            "    copy_in_wait(x[...])\n"
                            "    copy_in_wait(y[...])\n"
                            "    wgmma(c, x[...], y[...])\n"
                            "    wgmma_wait(0)\n"
                            "    z[...] = c[...]\n"
                            "    copy_out_start(z[...], o[...])\n"
                            "    copy_out_wait(z[...])\n",
                            "small.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "small_wgmma"), {});
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r.kernel->source.find("pk_tile(e"), std::string::npos) << r.kernel->source;
  EXPECT_EQ(r.kernel->source.find("f_c["), std::string::npos) << r.kernel->source;
  const PtxResult p = compile_to_ptx(r.kernel->source, r.kernel->entry + ".cu", "compute_90a");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.ptx.find("wgmma."), std::string::npos);
}

TEST(CudaCodegen, OnSm90WholeAlignedRowsMoveByBulkCopiesOnAnMbarrierAndAssembleForSm90a) {
  const auto f = parse_text(add_rows_h200, "add_rows_h200.pk");
  const auto r = generate_cuda(lower(unit<spec::KernelSpec>(f, "add_rows_h200"), "h200"), {});
  ASSERT_TRUE(r) << r.error;
  const std::string &src = r.kernel->source;
  // 64 f32 per row: 256 bytes, whole 16-byte units.
  EXPECT_NE(src.find("pk_bulk_copy(dst + e, g_x + off, 256u, &pk_bar_x_smem["), std::string::npos) << src;
  EXPECT_NE(src.find("pk_mbar_wait(&pk_bar_x_smem["), std::string::npos) << src;
  const PtxResult p = compile_to_ptx(src, r.kernel->entry + ".cu");
  ASSERT_TRUE(p.ok) << p.error;
  for (const char *op :
       {"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.init.shared::cta.b64", "fence.proxy.async.shared::cta", "cp.async.wait_group"})
    EXPECT_NE(p.ptx.find(op), std::string::npos) << op;
  const PtxResult sass = compile_to_cubin(src, r.kernel->entry + ".cu", "sm_90a");
  EXPECT_TRUE(sass.ok) << sass.error;
  // Before sm_90 the same source has only its cp.async path.
  const PtxResult sm80 = compile_to_ptx(src, r.kernel->entry + ".cu", "compute_80");
  ASSERT_TRUE(sm80.ok) << sm80.error;
  EXPECT_EQ(sm80.ptx.find("cp.async.bulk"), std::string::npos);
}

TEST(CudaCodegen, RowsThatAreNot16ByteUnitsMoveByCpAsyncOnly) {
  const auto f = parse_text("pipeline odd_rows:\n"
                            "    hbm A: f32[4, 6]\n"
                            "    sram X[2]: f32[6]\n"
                            "    copy_in_start(A[0], X[0])\n"
                            "    copy_in_wait(X[0])\n",
                            "odd.pk");
  const auto r = generate_cuda(unit<spec::Program>(f, "odd_rows"), {});
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r.kernel->source.find("pk_bulk_copy(dst"), std::string::npos) << r.kernel->source;
  EXPECT_EQ(r.kernel->source.find("pk_bar_X"), std::string::npos) << r.kernel->source;
}

TEST(CudaDevice, WithoutADeviceTheProbeSaysWhyNamingCuda) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present; this checks the no-device path";
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
}

} // namespace
} // namespace pipecheck::executor::cuda
