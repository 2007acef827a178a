#include "executor/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace pipecheck::executor;
using pipecheck::spec::DType;

TEST(Bf16, RoundsHalfwayCasesToEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 0x1p-7f)), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(F16, RoundsNormalsSubnormalsAndOverflowLikeIeee) {
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(65520.0f))));
  EXPECT_EQ(f16_to_f32(f32_to_f16(65519.0f)), 65504.0f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f / 3.0f)), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1e-8f)), 0.0f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(6e-8f)), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(-2.0f)), -2.0f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 0x1p-11f)), 1.0f); // halfway: to even
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
}

TEST(HostArray, PoisonIsNanForFloatsAndTheLowestValueForIntegers) {
  HostArray f("f", DType::bf16, {4});
  f.fill_poison();
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(f.is_poison(i) && std::isnan(f.get(i)));
  HostArray n("n", DType::i32, {3});
  n.fill_poison();
  EXPECT_EQ(n.get(2), std::numeric_limits<std::int32_t>::min());
  EXPECT_TRUE(n.is_poison(0));
  n.set(0, 5);
  EXPECT_FALSE(n.is_poison(0));
}

TEST(HostArray, RandomFillIsSeededNotAllZeroAndRepresentableInItsDtype) {
  HostArray a("a", DType::bf16, {64}), b("b", DType::bf16, {64}), c("c", DType::bf16, {64});
  a.fill_random(7);
  b.fill_random(7);
  c.fill_random(8);
  bool any_nonzero = false, differs = false;
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(a.get(i), b.get(i));
    EXPECT_EQ(round_to(DType::bf16, static_cast<float>(a.get(i))), static_cast<float>(a.get(i)));
    EXPECT_GE(a.get(i), -1.0);
    EXPECT_LT(a.get(i), 1.0);
    any_nonzero |= a.get(i) != 0;
    differs |= a.get(i) != c.get(i);
  }
  EXPECT_TRUE(any_nonzero);
  EXPECT_TRUE(differs);
  HostArray n("n", DType::i32, {64});
  n.fill_random(1);
  bool nz = false;
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(std::abs(n.get(i)), 64);
    nz |= n.get(i) != 0;
  }
  EXPECT_TRUE(nz);
}

TEST(View, CopiesASubBoxRunByRun) {
  HostArray src("src", DType::f32, {4, 6}), dst("dst", DType::f32, {2, 3});
  for (int i = 0; i < 24; ++i)
    src.set(i, i);
  View s = View::whole(src);
  s.box.lo = {1, 2};
  s.box.hi = {3, 5};
  copy_view(s, View::whole(dst));
  EXPECT_EQ(dst.get(0), 8);
  EXPECT_EQ(dst.get(2), 10);
  EXPECT_EQ(dst.get(3), 14);
  EXPECT_EQ(dst.get(5), 16);
  EXPECT_EQ(s.to_string(), "src[1:3, 2:5]");
}

TEST(Box, OverlapsOnlyWhenEveryDimIntersectsInTheSameArray) {
  HostArray a("a", DType::f32, {4, 4}), b("b", DType::f32, {4, 4});
  Box x{&a, {0, 0}, {2, 2}}, y{&a, {1, 1}, {3, 3}}, z{&a, {2, 0}, {4, 2}}, w{&b, {0, 0}, {2, 2}};
  EXPECT_TRUE(x.overlaps(y));
  EXPECT_FALSE(x.overlaps(z));
  EXPECT_FALSE(x.overlaps(w));
}

TEST(View, IsContiguousWhenItsBoxIsOneRunOfTheArray) {
  HostArray a("a", DType::f32, {2, 4, 6});
  View whole = View::whole(a);
  EXPECT_TRUE(whole.is_contiguous());
  View slot = whole; // a[1]: one slot of a ring
  slot.box.lo = {1, 0, 0};
  slot.box.hi = {2, 4, 6};
  EXPECT_TRUE(slot.is_contiguous());
  View rows = whole; // a[0, 1:3]: whole rows
  rows.box.lo = {0, 1, 0};
  rows.box.hi = {1, 3, 6};
  EXPECT_TRUE(rows.is_contiguous());
  View cols = whole; // a[0, :, 1:3]: a strided window
  cols.box.lo = {0, 0, 1};
  cols.box.hi = {1, 4, 3};
  EXPECT_FALSE(cols.is_contiguous());
}

TEST(View, AStreamingCopyMovesTheSameBytesAsAnOrdinaryOne) {
  // Large enough to stream, with windows that start off any 16-byte boundary.
  HostArray src("src", DType::f32, {300, 701}), plain("plain", DType::f32, {300, 700}),
      streamed("streamed", DType::f32, {300, 700}), back("back", DType::f32, {300, 701});
  src.fill_random(3);
  back.fill_poison();
  View s = View::whole(src);
  s.box.lo = {0, 1};
  copy_view(s, View::whole(plain));
  copy_view(s, View::whole(streamed), CopyHint::stream_dst);
  for (std::int64_t i = 0; i < plain.size(); i += 7)
    ASSERT_EQ(plain.get(i), streamed.get(i)) << i;
  View b = View::whole(back);
  b.box.lo = {0, 1};
  copy_view(View::whole(streamed), b, CopyHint::stream_dst);
  for (std::int64_t r = 0; r < 300; ++r) {
    EXPECT_TRUE(back.is_poison(r * 701)) << r;
    for (std::int64_t c = 1; c < 701; c += 13)
      ASSERT_EQ(back.get(r * 701 + c), src.get(r * 701 + c)) << r << ", " << c;
  }
}

TEST(HostArray, RefusesAShapeWhoseByteSizeDoesNotFitInt64) {
  const std::int64_t big = std::int64_t{1} << 31;
  EXPECT_THROW(HostArray("x", DType::f32, {big, big}), std::length_error);
  EXPECT_THROW(HostArray("x", DType::f32, {std::int64_t{1} << 62, std::int64_t{1} << 62}), std::length_error);
  // A zero extent does not make an overflowing stride acceptable.
  EXPECT_THROW(HostArray("x", DType::f32, {0, std::int64_t{1} << 40, std::int64_t{1} << 40}),
               std::length_error);
  EXPECT_THROW(HostArray("x", DType::f32, {-1, 4}), std::length_error);
}

TEST(NumElements, SaturatesInsteadOfWrapping) {
  EXPECT_EQ(num_elements({std::int64_t{1} << 62, std::int64_t{1} << 62}),
            std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(num_elements({std::int64_t{1} << 31, std::int64_t{1} << 31}), std::int64_t{1} << 62);
}
