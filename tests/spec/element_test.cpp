// pl.Element block dims: parsed, printed back, validated (inputs and
// outputs, not aliased, padding (lo, hi) not negative), bound with element offsets, and lowered
// to copies of the window's in-bounds part.
#include "spec/bind.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pipecheck::spec {
namespace {

std::string halo(const std::string &block, const std::string &index = "i * 128",
                 const std::string &role = "in") {
  return R"(kernel halo:
    param n = 1024
    grid = (n // 128,)
    )" + role +
         R"(  x: f32[n]  block=()" + block + R"(,)  index=(i) -> ()" + index + R"(,)
    out o: f32[n]  block=(128,)  index=(i) -> (i,)
    body:
        o[...] = x[0:128]
)";
}

ParseResult parsed(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("k.pk", text));
}

KernelSpec kernel(const std::string &text) {
  auto r = parsed(text);
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return std::get<KernelSpec>(r.file->units.at(0));
}

TEST(Element, ParsesWithPositionalOrKeywordPaddingAndPrintsBackToTheSameTree) {
  for (const char *b : {"Element(144)", "Element(144, (0, 16))", "Element(144, padding=(0, 16))"}) {
    KernelSpec k = kernel(halo(b));
    const auto &dim = (*k.operands[0].block_shape)[0];
    ASSERT_TRUE(dim);
    auto e = element_dim(*dim);
    ASSERT_TRUE(e) << b;
    EXPECT_EQ(print(e->size), "144");
    const std::string printed = print(k);
    EXPECT_NE(printed.find(b), std::string::npos) << printed;
    EXPECT_EQ(kernel(printed), k) << printed;
  }
}

TEST(Element, BindsTheIndexAsAnElementOffsetIntoThePaddedDim) {
  KernelSpec k = kernel(halo("Element(144, (4, 16))"));
  Binding b = bind_kernel(k, param_env(k.params));
  ASSERT_TRUE(b.kernel) << b.error->diag.message;
  const BoundOperand &x = b.kernel->operands[0];
  EXPECT_EQ(x.block, (std::vector<std::int64_t>{144}));
  EXPECT_EQ(x.element, (std::vector<bool>{true}));
  EXPECT_EQ(x.pad_lo, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(x.pad_hi, (std::vector<std::int64_t>{16}));
  // Offsets 0 .. 1024 + 4 + 16 - 144 fit the padded dim.
  EXPECT_EQ(x.num_blocks, (std::vector<std::int64_t>{901}));
  EXPECT_EQ(x.window_start(0, 0), -4);
  EXPECT_EQ(x.window_start(0, 900), 896);
  EXPECT_EQ(block_index(*b.kernel, 0, {7}).value, (std::vector<std::int64_t>{896}));
  EXPECT_EQ(b.kernel->operands[1].window_start(0, 7), 896);
}

TEST(Element, IsRejectedWithNegativePaddingAndWhenMalformed) {
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {halo("Element(144, (0, -1))"), "must not be negative"},
      {halo("Element(144, (0, 16, 2))"), "Element takes a block size"},
      {halo("Element(0)"), "must be positive"},
  };
  for (const auto &c : cases) {
    auto r = parsed(c.text);
    ASSERT_FALSE(r.file) << c.text;
    ASSERT_FALSE(r.errors.empty());
    EXPECT_NE(r.errors[0].message.find(c.message), std::string::npos) << r.errors[0].message;
  }
}

TEST(Element, IsAcceptedOnAnOutputAndAnAliasedOutputWithOneIsRejected) {
  const std::string t = R"(kernel k:
    grid = (8,)
    in  x: f32[1000]  block=(128,)  index=(i) -> (i,)
    out o: f32[1000]  block=(Element(128, (0, 24)),)  index=(i) -> (i * 128,)
    body:
        o[...] = x[...]
)";
  EXPECT_TRUE(parsed(t).file);
  std::string aliased = t;
  aliased.replace(aliased.find("f32[1000]  block=(128,)"), 23, "f32[1000]  block=(Element(128, (0, 24)),)");
  aliased.replace(aliased.find("(i,)\n"), 4, "(i * 128,)");
  aliased.replace(aliased.find("    body:"), 0, "    alias x -> o\n");
  auto r = parsed(aliased);
  ASSERT_FALSE(r.file) << aliased;
  EXPECT_NE(r.errors.at(0).message.find("has an Element block dim and cannot be aliased"), std::string::npos)
      << r.errors[0].message;
  std::string out_only = t;
  out_only.replace(out_only.find("    body:"), 0, "    alias x -> o\n");
  auto r2 = parsed(out_only);
  ASSERT_FALSE(r2.file);
  EXPECT_NE(r2.errors.at(0).message.find("output 'o' has an Element block dim and cannot be aliased"),
            std::string::npos)
      << r2.errors[0].message;
}

TEST(Element, AnAliasedInputWithAnElementDimIsRejected) {
  std::string t = halo("Element(128)");
  t.replace(t.find("    body:"), 0, "    alias x -> o\n");
  auto r = parsed(t);
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("cannot be aliased"), std::string::npos) << r.errors[0].message;
}

std::string lowered_text(const std::string &text, bool unroll) {
  LowerOptions o;
  o.unroll = unroll;
  std::vector<Diagnostic> errs;
  auto l = lower(kernel(text), o, errs);
  if (!l) return "error: " + (errs.empty() ? std::string("?") : errs[0].message);
  return print(l->program);
}

TEST(Element, LowersTheLastWindowToACopyOfItsInBoundsPart) {
  const std::string unrolled = lowered_text(halo("Element(144, (0, 16))"), true);
  EXPECT_NE(unrolled.find("x[128:272]"), std::string::npos) << unrolled;
  EXPECT_NE(unrolled.find("x[896:1024]"), std::string::npos) << unrolled;
  const std::string rolled = lowered_text(halo("Element(144, (0, 16))"), false);
  EXPECT_NE(rolled.find("min("), std::string::npos) << rolled;
}

TEST(Element, AWindowThatStartsInTheLowPaddingLandsAtAnOffsetIntoItsSlot) {
  // Element(144, (16, 0)) at offset i * 128: the first window is padded
  // elements 0:144, array elements -16:128; its in-bounds part x[0:128]
  // lands 16 elements into the slot. The others start in the array.
  const std::string unrolled = lowered_text(halo("Element(144, (16, 0))", "i * 128"), true);
  EXPECT_NE(unrolled.find("copy_in_start(x[0:128], x_vmem[0], offset=(16,))"), std::string::npos) << unrolled;
  EXPECT_NE(unrolled.find("copy_in_start(x[112:256], x_vmem[1])"), std::string::npos) << unrolled;
  EXPECT_EQ(unrolled.find("error"), std::string::npos) << unrolled;
  // The rolled form computes the offset from the block index.
  const std::string rolled = lowered_text(halo("Element(144, (16, 0))", "i * 128"), false);
  EXPECT_NE(rolled.find("offset=(min(max(16 - "), std::string::npos) << rolled;
}

TEST(Element, AnOutputWindowInTheLowPaddingIsWrittenBackFromPastItsPaddingInTheSlot) {
  const std::string t = R"(kernel k:
    grid = (8,)
    in  x: f32[1000]  block=(125,)  index=(i) -> (i,)
    out o: f32[1000]  block=(Element(128, (3, 0)),)  index=(i) -> (i * 125,)
    body:
        o[3:128] = x[...]
)";
  const std::string unrolled = lowered_text(t, true);
  EXPECT_NE(unrolled.find("copy_out_start(o_vmem[0], o[0:125], offset=(3,))"), std::string::npos) << unrolled;
}

TEST(Element, TheLoweredCopyWithAnOffsetParsesAndPrintsBackToTheSameProgram) {
  for (bool unroll : {true, false}) {
    const std::string text = lowered_text(halo("Element(144, (16, 0))", "i * 128"), unroll);
    auto r = parse_and_validate(SourceFile::from_string("p.pk", text));
    ASSERT_TRUE(r.file) << r.errors.at(0).loc.line << ": " << r.errors.at(0).message << "\n" << text;
    const auto &p = std::get<Program>(r.file->units.at(0));
    EXPECT_EQ(print(p), text);
  }
}

TEST(Element, ACopyOffsetThatPutsTheBlockPastItsSlotIsALocatedError) {
  const std::string text = R"(pipeline p:
    hbm x: f32[16]
    sram x_vmem[1]: f32[8]
    copy_in_start(x[0:4], x_vmem[0], offset=(5,))
    copy_in_wait(x_vmem[0])
)";
  auto r = parse_and_validate(SourceFile::from_string("p.pk", text));
  ASSERT_FALSE(r.file);
  EXPECT_NE(r.errors.at(0).message.find("past the slot"), std::string::npos) << r.errors[0].message;
  EXPECT_EQ(r.errors[0].loc.line, 4);
}

TEST(Element, AWindowWhollyInThePaddingCopiesNothingInBothForms) {
  // Element(8, (16, 0)) at offset i * 8 over 8 elements: windows 0 and 1 lie
  // in the low padding (array elements -16:-8, -8:0), an empty copy each,
  // landing at the slot's end; window 2 is the array.
  const std::string k = R"(kernel k:
    grid = (3,)
    in  x: f32[8]  block=(Element(8, (16, 0)),)  index=(i) -> (i * 8,)
    out o: f32[3, 8]  block=(None, 8)  index=(i) -> (i, 0)
    body:
        o[...] = where(program_id(0) == 2, x[...], 0.0)
)";
  const std::string unrolled = lowered_text(k, true);
  EXPECT_NE(unrolled.find("copy_in_start(x[0:0], x_vmem[0], offset=(8,))"), std::string::npos) << unrolled;
  EXPECT_NE(unrolled.find("copy_in_start(x[0:0], x_vmem[1], offset=(8,))"), std::string::npos) << unrolled;
  EXPECT_NE(unrolled.find("copy_in_start(x, x_vmem[0])"), std::string::npos) << unrolled;
  const std::string rolled = lowered_text(k, false);
  EXPECT_NE(rolled.find("max(x_next0 - 8, 0)"), std::string::npos) << rolled;
}

} // namespace
} // namespace pipecheck::spec
