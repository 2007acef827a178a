// pl.BoundedSlice block dims: parsed, printed back, validated (inputs and
// outputs, the index map returns ds(start, size) in exactly those positions), bound
// with the ds start as the index and the size per grid point, typed with
// the bound, and lowered (unrolled) to copies of each step's slice.
#include "spec/bind.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pipecheck::spec {
namespace {

// Chunk i is x[i * 128 : min((i + 1) * 128, 1000)]: the last has 104 elements.
std::string tail(const std::string &block = "BoundedSlice(128)",
                 const std::string &index = "ds(i * 128, min(128, n - i * 128))",
                 const std::string &role = "in", const std::string &extra = "") {
  return R"(kernel tail:
    param n = 1000
    grid = (8,)
    )" + role +
         R"(  x: f32[n]  block=()" + block + R"(,)  index=(i) -> ()" + index + R"(,)
    out o: f32[8]  block=(None,)  index=(i) -> (i,)
)" + extra +
         R"(    body:
        o[...] = sum(x[...], axis=0)
)";
}

ParseResult parsed(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("k.pk", text));
}

KernelSpec kernel(const std::string &text) {
  auto r = parsed(text);
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ":" << r.errors.at(0).loc.col << ": "
                  << r.errors.at(0).message;
    return {};
  }
  return std::get<KernelSpec>(r.file->units.at(0));
}

TEST(BoundedSlice, ParsesAndPrintsBackToTheSameTree) {
  KernelSpec k = kernel(tail());
  const auto &dim = (*k.operands[0].block_shape)[0];
  ASSERT_TRUE(dim);
  auto bound = bounded_slice_dim(*dim);
  ASSERT_TRUE(bound);
  EXPECT_EQ(print(*bound), "128");
  auto ds = ds_index(k.operands[0].index_map->results[0]);
  ASSERT_TRUE(ds);
  EXPECT_EQ(print(ds->start), "i * 128");
  const std::string printed = print(k);
  EXPECT_NE(printed.find("BoundedSlice(128)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("ds(i * 128, min(128, n - i * 128))"), std::string::npos) << printed;
  EXPECT_EQ(kernel(printed), k) << printed;
}

TEST(BoundedSlice, BindsTheStartAsTheIndexAndTheSizePerGridPoint) {
  KernelSpec k = kernel(tail());
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.kernel) << b.error->diag.message;
  const BoundOperand &x = b.kernel->operands[0];
  EXPECT_EQ(x.block, (std::vector<std::int64_t>{128}));
  EXPECT_EQ(x.bounded, (std::vector<bool>{true}));
  EXPECT_TRUE(x.has_bounded_dims());
  // Starts 0 .. 1000 are in bounds (a size-0 slice may start at the end).
  EXPECT_EQ(x.num_blocks, (std::vector<std::int64_t>{1001}));
  EXPECT_EQ(block_index(*b.kernel, 0, {7}).value, (std::vector<std::int64_t>{896}));
  EXPECT_EQ(x.window_start(0, 896), 896);
  EXPECT_EQ(window_sizes(x, b.kernel->params, b.kernel->grid, {0}).value, (std::vector<std::int64_t>{128}));
  EXPECT_EQ(window_sizes(x, b.kernel->params, b.kernel->grid, {7}).value, (std::vector<std::int64_t>{104}));
  // Any other operand's window is its block.
  const BoundOperand &o = b.kernel->operands[1];
  EXPECT_FALSE(o.has_bounded_dims());
  EXPECT_EQ(window_sizes(o, b.kernel->params, b.kernel->grid, {3}).value, (std::vector<std::int64_t>{1}));
}

TEST(BoundedSlice, TheBodySeesABlockOfTheBound) {
  KernelSpec k = kernel(tail());
  EXPECT_TRUE(typecheck(k, {}).empty());
  std::string text = tail();
  const std::string body = "sum(x[...], axis=0)";
  text.replace(text.find(body), body.size(), "sum(sum(reshape(x[...], (2, 65)), axis=0), axis=0)");
  auto r = parsed(text);
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("cannot reshape [128]"), std::string::npos) << r.errors[0].message;
}

TEST(BoundedSlice, IsALocatedErrorWhereItsFormIsWrong) {
  struct Case {
    std::string text, message;
    int line, col;
  };
  const Case cases[] = {
      {tail("BoundedSlice(128)", "i"), "returns ds(start, size) there, not 'i'", 4, 62},
      {tail("128", "ds(i * 128, 128)"), "needs a BoundedSlice block dim in position 0", 4, 48},
      {tail("BoundedSlice(128, 8)"), "BoundedSlice takes one block size", 4, 27},
      {tail("BoundedSlice(0)", "ds(0, 0)"), "must be positive", 4, 40},
      {tail("BoundedSlice(128)", "ds(i * 1.5, 128)"), "must be an integer expression", 4, 69},
  };
  for (const auto &c : cases) {
    auto r = parsed(c.text);
    ASSERT_FALSE(r.file) << c.text;
    ASSERT_FALSE(r.errors.empty());
    EXPECT_NE(r.errors[0].message.find(c.message), std::string::npos) << r.errors[0].message;
    if (c.line) {
      EXPECT_EQ(r.errors[0].loc.line, c.line) << r.errors[0].message;
      if (c.col) {
        EXPECT_EQ(r.errors[0].loc.col, c.col) << r.errors[0].message;
      }
    }
  }
}

TEST(BoundedSlice, AnAliasedInputWithABoundedSliceDimIsRejected) {
  auto r = parsed(R"(kernel k:
    grid = (2,)
    in  x: f32[16]  block=(BoundedSlice(8),)  index=(i) -> (ds(i * 8, 8),)
    out o: f32[16]  block=(8,)  index=(i) -> (i,)
    alias x -> o
    body:
        o[...] = x[...]
)");
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("has a BoundedSlice block dim and cannot be aliased"),
            std::string::npos)
      << r.errors[0].message;
  EXPECT_EQ(r.errors[0].loc.line, 5);
}

TEST(BoundedSlice, AnInputWithoutAnIndexMapIsALocatedError) {
  auto r = parsed(R"(kernel k:
    grid = (1,)
    in  x: f32[8]  block=(BoundedSlice(8),)
    out o: f32[8]
    body:
        o[...] = x[...]
)");
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("needs an index map that returns ds(start, size)"), std::string::npos)
      << r.errors[0].message;
  EXPECT_EQ(r.errors[0].loc.line, 3);
}

std::string lowered_text(const std::string &text, const std::string &target = "") {
  LowerOptions o;
  if (!target.empty()) o.target = target;
  std::vector<Diagnostic> errs;
  auto l = lower(kernel(text), o, errs);
  if (!l) return "error: " + (errs.empty() ? std::string("?") : errs[0].message);
  return print(l->program);
}

TEST(BoundedSlice, LowersUnrolledToACopyOfEachStepsSlice) {
  KernelSpec k = kernel(tail());
  std::string why;
  EXPECT_TRUE(lowers_unrolled(k, false, &why));
  EXPECT_NE(why.find("BoundedSlice"), std::string::npos);
  const std::string t = lowered_text(tail());
  EXPECT_NE(t.find("x[0:128]"), std::string::npos) << t;
  EXPECT_NE(t.find("x[768:896]"), std::string::npos) << t;
  EXPECT_NE(t.find("x[896:1000]"), std::string::npos) << t;
}

TEST(BoundedSlice, AWindowThatKeepsItsStartButChangesItsSizeIsCopiedAgain) {
  // Every window starts at 0; its size grows with i.
  const std::string t = lowered_text(tail("BoundedSlice(128)", "ds(0, 16 * (i + 1))"));
  for (const char *s : {"x[0:16]", "x[0:32]", "x[0:128]"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
}

TEST(BoundedSlice, IsRefusedOnAMosaicGpuTarget) {
  const std::string t = lowered_text(tail(), "h100");
  EXPECT_NE(t.find("'x' has a BoundedSlice dim, a TPU block dim"), std::string::npos) << t;
}

// Chunk i of x scaled into the same slice of o: the last holds 104 of 128.
const char *kSlicedOutput = R"(kernel k:
    param n = 1000
    grid = (8,)
    in  x: f32[n]  block=(BoundedSlice(128),)  index=(i) -> (ds(i * 128, min(128, n - i * 128)),)
    out o: f32[n]  block=(BoundedSlice(128),)  index=(i) -> (ds(i * 128, min(128, n - i * 128)),)
    body:
        o[...] = x[...] * 2.0
)";

TEST(BoundedSlice, AnOutputIsAcceptedAndWritesBackOnlyEachStepsSlice) {
  const std::string t = lowered_text(kSlicedOutput);
  EXPECT_NE(t.find("copy_out_start(o_vmem[0], o[0:128])"), std::string::npos) << t;
  EXPECT_NE(t.find("copy_out_start(o_vmem[1], o[896:1000])"), std::string::npos) << t;
  EXPECT_EQ(t.find("o[896:1024]"), std::string::npos) << t;
}

TEST(BoundedSlice, AnOutputWithoutAnIndexMapIsALocatedError) {
  auto r = parsed(R"(kernel k:
    grid = (1,)
    in  x: f32[8]  block=(8,)  index=(i) -> (0,)
    out o: f32[8]  block=(BoundedSlice(8),)
    body:
        o[...] = x[...]
)");
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("needs an index map that returns ds(start, size)"), std::string::npos)
      << r.errors[0].message;
  EXPECT_EQ(r.errors[0].loc.line, 4);
}

TEST(BoundedSlice, AnAliasedOutputWithABoundedSliceDimIsRejected) {
  auto r = parsed(R"(kernel k:
    grid = (2,)
    in  x: f32[16]  block=(8,)  index=(i) -> (i,)
    out o: f32[16]  block=(BoundedSlice(8),)  index=(i) -> (ds(i * 8, 8),)
    alias x -> o
    body:
        o[...] = x[...]
)");
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("output 'o' has a BoundedSlice block dim and cannot be aliased"),
            std::string::npos)
      << r.errors[0].message;
  EXPECT_EQ(r.errors[0].loc.line, 5);
}

TEST(BoundedSlice, TheWindowIsNamedByItsStartThenItsSize) {
  KernelSpec k = kernel(tail("BoundedSlice(128)", "ds(0, 16 * (i + 1))"));
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.kernel) << b.error->diag.message;
  const BoundOperand &x = b.kernel->operands[0];
  ASSERT_EQ(x.window.size(), 2u);
  // One start, two sizes: two windows.
  EXPECT_EQ(window_at(x, b.kernel->params, b.kernel->grid, {0}).value, (std::vector<std::int64_t>{0, 16}));
  EXPECT_EQ(window_at(x, b.kernel->params, b.kernel->grid, {1}).value, (std::vector<std::int64_t>{0, 32}));
  // Without BoundedSlice dims the window is the block index.
  const BoundOperand &o = b.kernel->operands[1];
  EXPECT_EQ(o.window.size(), 1u);
  EXPECT_EQ(window_at(o, b.kernel->params, b.kernel->grid, {3}).value, (std::vector<std::int64_t>{3}));
}

} // namespace
} // namespace pipecheck::spec
