// The one indexing rule (spec/place.hpp) that typing, the executor and the
// race machine share: boxes, kept dims, `...`, and no wrapping.
#include "spec/eval.hpp"
#include "spec/parse.hpp"
#include "spec/place.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

using K = Subscript::Kind;

Subscript index(std::int64_t i) { return Subscript{K::index, true, true, i, {}}; }
Subscript slice(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  return Subscript{K::slice, lo.has_value(), hi.has_value(), lo, hi};
}
Subscript ellipsis() { return Subscript{K::ellipsis, true, true, {}, {}}; }

} // namespace

TEST(IndexingRule, ANegativeIndexIsOutOfBoundsAndDoesNotWrap) {
  Subscripted r = subscript({4, 128}, {index(-1)});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.out_of_bounds);
  EXPECT_EQ(r.error_dim, 0);
  EXPECT_EQ(r.error, "index -1 is out of bounds for dim 0 (extent 4)");
}

TEST(IndexingRule, AnIndexAtTheExtentIsOutOfBoundsForItsDim) {
  Subscripted r = subscript({4, 128}, {index(0), index(128)});
  EXPECT_TRUE(r.out_of_bounds);
  EXPECT_EQ(r.error_dim, 1);
  EXPECT_EQ(r.error, "index 128 is out of bounds for dim 1 (extent 128)");
  EXPECT_TRUE(subscript({4, 128}, {index(3), index(127)}).ok());
}

TEST(IndexingRule, SlicesKeepTheirDimAndMustLieInside) {
  Subscripted r = subscript({8, 128}, {slice(2, 6), slice({}, {})});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.dims[0].lo, 2);
  EXPECT_EQ(r.dims[0].hi, 6);
  EXPECT_TRUE(r.dims[0].kept);
  EXPECT_EQ(r.dims[1].lo, 0);
  EXPECT_EQ(r.dims[1].hi, 128);
  EXPECT_EQ(r.shape, (Dims{4, 128}));
  EXPECT_TRUE(subscript({8}, {slice(6, 9)}).out_of_bounds);
  EXPECT_TRUE(subscript({8}, {slice(-2, 8)}).out_of_bounds); // no wrap of a negative bound
  EXPECT_TRUE(subscript({8}, {slice(0, -1)}).out_of_bounds);
  EXPECT_TRUE(subscript({8}, {slice(5, 3)}).out_of_bounds);
  EXPECT_TRUE(subscript({8}, {slice(8, {})}).ok()); // empty, at the end
  EXPECT_EQ(subscript({8}, {slice(9, {})}).error, "slice 9:8 is out of bounds for dim 0 (extent 8)");
}

TEST(IndexingRule, AnEllipsisCoversTheDimsTheOtherSubscriptsLeave) {
  Subscripted r = subscript({2, 8, 128}, {ellipsis(), index(5)});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.dims[0].hi, 2);
  EXPECT_EQ(r.dims[1].hi, 8);
  EXPECT_EQ(r.dims[2].lo, 5);
  EXPECT_EQ(r.dims[2].hi, 6);
  EXPECT_FALSE(r.dims[2].kept);
  EXPECT_EQ(r.shape, (Dims{2, 8}));
  Subscripted mid = subscript({2, 8, 128}, {index(1), ellipsis(), slice(0, 64)});
  ASSERT_TRUE(mid.ok()) << mid.error;
  EXPECT_EQ(mid.shape, (Dims{8, 64}));
  EXPECT_EQ(subscript_dims(3, {false, true, false}), (std::vector<int>{0, -1, 2}));
  EXPECT_EQ(subscript_dims(1, {false, false}), std::nullopt);
}

TEST(IndexingRule, IndexedDimsAreDroppedAndTrailingDimsAreWhole) {
  Subscripted r = subscript({2, 8, 128}, {index(1)});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.dims[0].kept);
  EXPECT_TRUE(r.dims[1].kept);
  EXPECT_TRUE(r.dims[2].kept);
  EXPECT_EQ(r.shape, (Dims{8, 128}));
}

TEST(IndexingRule, MoreSubscriptsThanDimsIsAnErrorButNotOutOfBounds) {
  Subscripted r = subscript({8}, {index(0), index(0)});
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.out_of_bounds);
}

TEST(IndexingRule, UnknownValuesAreCheckedAsFarAsTheyAreKnown) {
  Subscripted r = subscript({kUnknownExtent, 128}, {index(-1)});
  EXPECT_TRUE(r.out_of_bounds); // negative whatever the extent
  Subscripted u = subscript({kUnknownExtent, 128}, {slice(0, 1000)});
  EXPECT_TRUE(u.ok());
  Subscripted v = subscript({8, 128}, {Subscript{K::index, true, true, std::nullopt, {}}});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.dims[0].lo, kUnknownExtent);
}

TEST(IndexingRule, SubscriptsOfARefEvaluateEachIndexAndSliceBound) {
  auto r = parse(SourceFile::from_string("t.pk", "pipeline p:\n    hbm A: f32[4, 8, 128]\n"
                                                 "    sram X[1]: f32[128]\n"
                                                 "    copy_in_start(A[i - 1, 2:, ...], X[0])\n"
                                                 "    copy_in_wait(X[0])\n"));
  ASSERT_TRUE(r.file.has_value());
  const auto &p = std::get<Program>(r.file->units.at(0));
  const auto &ref = std::get<Copy>(p.body.at(0).kind).src;
  std::vector<bool> bounds;
  auto subs = subscripts_of(ref, [&](const Expr &e, bool bound) -> std::optional<std::int64_t> {
    bounds.push_back(bound);
    return eval_int(e, {{"i", 0}});
  });
  ASSERT_EQ(subs.size(), 3u);
  EXPECT_EQ(subs[0].kind, K::index);
  EXPECT_EQ(subs[0].lo, -1);
  EXPECT_EQ(subs[1].kind, K::slice);
  EXPECT_EQ(subs[1].lo, 2);
  EXPECT_FALSE(subs[1].has_hi);
  EXPECT_EQ(subs[2].kind, K::ellipsis);
  EXPECT_EQ(bounds, (std::vector<bool>{false, true}));
  EXPECT_TRUE(subscript({4, 8, 128}, subs).out_of_bounds);
}
