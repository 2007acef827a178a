#include "spec/bind.hpp"

#include "spec/parse.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace pipecheck::spec {
namespace {

KernelSpec kernel(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return std::get<KernelSpec>(r.file->units.at(0));
}

const char *kMatmul = R"(kernel mm:
    param K = 512
    grid = (2, 3, K // 128)
    in  a: f32[256, K]    block=(128, 128)  index=(i, j, k) -> (i, k)
    in  b: f32[K, 384]    block=(128, 128)  index=(i, j, k) -> (k, j)
    in  s: f32[4, 128]    block=(None, 128) index=(i, j, k) -> (k % 4, 0)
    out o: f32[256, 384]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        acc[...] = dot(a[...], b[...])
        o[...] = acc[...] + s[...]
)";

TEST(Bind, EvaluatesTheGridShapesAndBlocksUnderTheParams) {
  KernelSpec k = kernel(kMatmul);
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.kernel) << b.error->diag.message;
  const BoundKernel &bk = *b.kernel;
  EXPECT_EQ(bk.grid, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(bk.num_points(), 24);
  const BoundOperand &a = *bk.operand("a");
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{256, 512}));
  EXPECT_EQ(a.block, (std::vector<std::int64_t>{128, 128}));
  EXPECT_EQ(a.num_blocks, (std::vector<std::int64_t>{2, 4}));
  EXPECT_TRUE(a.windowed);
  const BoundOperand &s = *bk.operand("s");
  EXPECT_EQ(s.block, (std::vector<std::int64_t>{1, 128}));
  EXPECT_EQ(s.squeezed, (std::vector<bool>{true, false}));
  EXPECT_EQ(s.block_view_shape(), (std::vector<std::int64_t>{128}));
  EXPECT_EQ(s.block_bytes(), 512);
  const BoundOperand &acc = *bk.operand("acc");
  EXPECT_FALSE(acc.windowed);
  EXPECT_EQ(acc.block, acc.shape);
  // --set K=1024 changes every size that depends on K, in one place.
  Binding big = bind_kernel(k, param_env(k.params, {{"K", 1024}}));
  ASSERT_TRUE(big.kernel);
  EXPECT_EQ(big.kernel->grid[2], 8);
  EXPECT_EQ(big.kernel->operand("b")->num_blocks, (std::vector<std::int64_t>{8, 3}));
}

TEST(Bind, GridPointsRunInGridOrderWithTheLastAxisFastest) {
  KernelSpec k = kernel(kMatmul);
  BoundKernel bk = *bind_kernel(k, param_env(k.params)).kernel;
  EXPECT_EQ(bk.point(0), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(bk.point(1), (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(bk.point(4), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(bk.point(23), (std::vector<std::int64_t>{1, 2, 3}));
  bk.grid = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  EXPECT_EQ(bk.num_points(), std::numeric_limits<std::int64_t>::max()) << "saturates";
}

TEST(Bind, GivesTheBlockIndexAtAGridPointFromTheIndexParams) {
  KernelSpec k = kernel(kMatmul);
  BoundKernel bk = *bind_kernel(k, param_env(k.params)).kernel;
  auto at = [&](const char *op, std::vector<std::int64_t> p) {
    BlockIndex b = block_index(bk, *bk.operand_index(op), p);
    EXPECT_FALSE(b.error) << b.error->diag.message;
    return b.value.value_or(std::vector<std::int64_t>{});
  };
  EXPECT_EQ(at("a", {1, 2, 3}), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(at("b", {1, 2, 3}), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(at("s", {0, 0, 3}), (std::vector<std::int64_t>{3, 0}));
  EXPECT_EQ(at("o", {1, 2, 3}), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(at("acc", {1, 2, 3}), (std::vector<std::int64_t>{0, 0})) << "no index map: block 0";
}

TEST(Bind, ASymbolicParamIsUnboundNotBadInput) {
  KernelSpec k = kernel("kernel k:\n    param N >= 1\n    grid = (N,)\n"
                        "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                        "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                        "    body:\n        o[...] = x[...]\n");
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.error);
  EXPECT_EQ(b.error->fault, BindFault::unbound);
  EXPECT_EQ(b.error->diag.loc.line, 3);
  EXPECT_TRUE(bind_kernel(k, param_env(k.params, {{"N", 8}})).kernel);
}

TEST(Bind, AGridExtentPastInt32IsBadInputAsPallasProgramIdsAreInt32) {
  KernelSpec k = kernel("kernel k:\n    param N = 4294967296\n    grid = (N, 2)\n"
                        "    in  x: f32[64, 128] block=(8, 128) index=(i, j) -> (0, 0)\n"
                        "    out o: f32[64, 128] block=(8, 128) index=(i, j) -> (0, 0)\n"
                        "    body:\n        o[...] = x[...]\n");
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.error);
  EXPECT_EQ(b.error->fault, BindFault::bad_input);
  EXPECT_EQ(b.error->diag.message,
            "grid extent 'N' = 4294967296 is past 2147483647: Pallas' program ids are int32");
  EXPECT_TRUE(bind_kernel(k, param_env(k.params, {{"N", 2147483647}})).kernel);
}

TEST(Bind, ASymbolicDivisorInAnIndexMapBindsAndLeavesTheBlockIndexUnbound) {
  KernelSpec k = kernel("kernel k:\n    param D >= 1\n    grid = (8,)\n"
                        "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i // D, 0)\n"
                        "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                        "    body:\n        o[...] = x[...]\n");
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.kernel);
  BlockIndex x = block_index(*b.kernel, 0, {5});
  ASSERT_TRUE(x.error);
  EXPECT_EQ(x.error->fault, BindFault::unbound);
}

TEST(Bind, ANegativeGridExtentFromSetIsBadInputAtTheExtent) {
  KernelSpec k = kernel("kernel k:\n    param N = 12\n    grid = (N - 8,)\n"
                        "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                        "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                        "    body:\n        o[...] = x[...]\n");
  Binding b = bind_kernel(k, param_env(k.params, {{"N", 4}}));
  ASSERT_TRUE(b.error);
  EXPECT_EQ(b.error->fault, BindFault::bad_input);
  EXPECT_EQ(b.error->diag.loc.line, 3);
  EXPECT_EQ(b.error->diag.message, "grid extent 'N - 8' is negative");
}

TEST(Bind, AnIndexMapThatDividesByZeroEverywhereIsBadInputAtBindTime) {
  KernelSpec k = kernel("kernel k:\n    param N = 4\n    grid = (8,)\n"
                        "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i // N, 0)\n"
                        "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i, 0)\n"
                        "    body:\n        o[...] = x[...]\n");
  Binding b = bind_kernel(k, param_env(k.params, {{"N", 0}}));
  ASSERT_TRUE(b.error);
  EXPECT_EQ(b.error->fault, BindFault::bad_input);
  EXPECT_EQ(b.error->diag.loc.line, 4);
  EXPECT_EQ(b.error->diag.loc.col, 56);
  EXPECT_EQ(b.error->diag.message, "division by zero in the index map of 'x'");
}

TEST(Bind, AnIndexMapThatOverflowsAtAGridPointIsBadInputNamingThePoint) {
  KernelSpec k = kernel("kernel k:\n    grid = (16,)\n"
                        "    in  x: f32[64, 128] block=(8, 128) index=(i) -> (i * 2**60 // 2**60 % 8, 0)\n"
                        "    out o: f32[64, 128] block=(8, 128) index=(i) -> (i % 8, 0)\n"
                        "    body:\n        o[...] = x[...]\n");
  BoundKernel bk = *bind_kernel(k, {}).kernel;
  EXPECT_TRUE(block_index(bk, 0, {7}).value);
  BlockIndex b = block_index(bk, 0, {8});
  ASSERT_TRUE(b.error);
  EXPECT_EQ(b.error->fault, BindFault::bad_input);
  EXPECT_EQ(b.error->diag.loc.line, 3);
  EXPECT_EQ(b.error->diag.loc.col, 56);
  EXPECT_EQ(b.error->diag.message, "integer overflow in the index map of 'x' at grid point (8,)");
}

TEST(Bind, ABlockIndexerReusedAcrossPointsGivesWhatBlockIndexGivesAtEach) {
  // An overflow at one point and a value at the next:
  // nothing of one point stays in the indexer's env for the next.
  KernelSpec k = kernel("kernel k:\n    grid = (16, 2)\n"
                        "    in  x: f32[64, 128] block=(8, 128) "
                        "index=(i, j) -> ((i * 2**60 // 2**60 + j) % 8, 0)\n"
                        "    out o: f32[64, 256] block=(8, 128) index=(i, j) -> (i % 8, j)\n"
                        "    body:\n        o[...] = x[...]\n");
  BoundKernel bk = *bind_kernel(k, {}).kernel;
  for (std::size_t op = 0; op < 2; ++op) {
    BlockIndexer indexer(bk.operands[op], bk.params, bk.grid, 2);
    for (std::vector<std::int64_t> p : {std::vector<std::int64_t>{7, 1}, {8, 0}, {3, 1}, {9, 1}, {0, 0}}) {
      const BlockIndex want = block_index(bk, op, p), got = indexer.at(p);
      EXPECT_EQ(got.value, want.value) << op << " at " << format_tuple(p);
      ASSERT_EQ(got.error.has_value(), want.error.has_value());
      if (want.error) {
        EXPECT_EQ(got.error->diag.message, want.error->diag.message);
      }
    }
  }
  EXPECT_EQ(block_index(bk, 0, {3, 1}).value, (std::vector<std::int64_t>{4, 0}));
  EXPECT_TRUE(block_index(bk, 0, {8, 0}).error);
}

} // namespace
} // namespace pipecheck::spec
