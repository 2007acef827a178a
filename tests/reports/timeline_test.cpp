// reports::kernel_timeline: the schedule of a kernel's lowering laid out over
// its grid steps, cut to the first and last steps of a long grid.
#include "reports/timeline.hpp"

#include "spec/parse.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;

namespace {

spec::KernelSpec kernel(const std::string &grid) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string(
      "k.pk", "kernel k:\n"
              "    grid = (" +
                  grid +
                  ",)\n"
                  "    in  x: f32[102400, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
                  "    out o: f32[102400, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
                  "    body:\n"
                  "        o[...] = x[...]\n"));
  EXPECT_TRUE(r.file.has_value());
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

} // namespace

TEST(Timeline, AShortGridIsDrawnWholeWithAnInAndOutCopyAndAComputePerStep) {
  std::string why;
  auto t = reports::kernel_timeline(kernel("8"), {}, std::nullopt, {}, why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->steps, 8);
  EXPECT_EQ(t->head, 8);
  EXPECT_EQ(t->tail, 0);
  EXPECT_FALSE(t->truncated);
  EXPECT_EQ(t->lanes.size(), 5u); // x[0], x[1], compute, o[0], o[1]
  EXPECT_TRUE(t->lanes[2].is_compute);
  int in = 0, out = 0, compute = 0;
  for (const auto &b : t->bars) {
    in += b.kind == reports::BarKind::copy_in;
    out += b.kind == reports::BarKind::copy_out;
    compute += b.kind == reports::BarKind::compute;
    EXPECT_LE(b.start.step, b.end.step);
    EXPECT_GE(b.start.at, 0);
    EXPECT_LE(b.end.at, 1);
  }
  EXPECT_EQ(in, 8);
  EXPECT_EQ(out, 8);
  EXPECT_EQ(compute, 8);
  ASSERT_TRUE(t->first_compute && t->last_compute);
  EXPECT_EQ(t->first_compute->step, 0);
  EXPECT_EQ(t->last_compute->step, 7);
}

TEST(Timeline, ALongGridDrawsItsFirst16AndLast4StepsOnly) {
  std::string why;
  auto t = reports::kernel_timeline(kernel("800"), {}, std::nullopt, {}, why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->steps, 800);
  EXPECT_EQ(t->head, 16);
  EXPECT_EQ(t->tail, 4);
  EXPECT_EQ(t->copy_ins, 800) << "every step is walked";
  int compute = 0;
  for (const auto &b : t->bars) {
    EXPECT_TRUE(t->drawn(b.start.step) || t->drawn(b.end.step)) << b.start.step << " " << b.end.step;
    compute += b.kind == reports::BarKind::compute;
  }
  EXPECT_EQ(compute, 20);
  const std::string svg = reports::timeline_svg(*t);
  EXPECT_NE(svg.find("class=\"elided\""), std::string::npos);
  EXPECT_NE(svg.find(">799<"), std::string::npos);
  EXPECT_EQ(svg.find(">400<"), std::string::npos);
}

TEST(Timeline, OverTheWalkLimitOnlyTheHeadIsWalked) {
  std::string why;
  reports::TimelineOptions o;
  o.max_walked = 100;
  auto t = reports::kernel_timeline(kernel("800"), {}, std::nullopt, {}, why, o);
  ASSERT_TRUE(t) << why;
  EXPECT_TRUE(t->truncated);
  EXPECT_EQ(t->head, 16);
  EXPECT_EQ(t->tail, 0);
  EXPECT_LE(t->copy_ins, 18);
  const std::string svg = reports::timeline_svg(*t);
  const auto first = svg.find("<rect class=\"bubble\"");
  ASSERT_NE(first, std::string::npos) << "the start-up bubble";
  EXPECT_EQ(svg.find("<rect class=\"bubble\"", first + 1), std::string::npos)
      << "no drain: the end is not walked";
}

TEST(Timeline, AKernelThatDoesNotLowerHasNoTimelineAndSaysWhy) {
  std::string why;
  auto r = spec::parse_and_validate(spec::SourceFile::from_string(
      "k.pk", "kernel k:\n"
              "    param n >= 1\n"
              "    grid = (n,)\n"
              "    in  x: f32[128 * n, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
              "    out o: f32[128 * n, 128]  block=(128, 128)  index=(i) -> (i, 0)\n"
              "    body:\n"
              "        o[...] = x[...]\n"));
  ASSERT_TRUE(r.file.has_value());
  auto t =
      reports::kernel_timeline(std::get<spec::KernelSpec>(r.file->units.at(0)), {}, std::nullopt, {}, why);
  EXPECT_FALSE(t);
  EXPECT_FALSE(why.empty());
}
