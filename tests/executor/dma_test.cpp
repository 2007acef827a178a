#include "executor/dma.hpp"

#include <gtest/gtest.h>

#include <deque>

using namespace pipecheck::executor;
using pipecheck::spec::DType;

namespace {
View rows(HostArray &a, std::int64_t lo, std::int64_t hi) {
  View v = View::whole(a);
  v.box.lo[0] = lo;
  v.box.hi[0] = hi;
  return v;
}
} // namespace

TEST(DmaEngine, PerformsSubmittedCopiesOnWorkerThreads) {
  Clock clock;
  HostArray src("src", DType::f32, {64, 256}), dst("dst", DType::f32, {64, 256});
  src.fill_random(3);
  dst.fill_poison();
  std::deque<Transfer> ts(64);
  {
    DmaEngine e(2, clock);
    for (int r = 0; r < 64; ++r) {
      ts[r].src = rows(src, r, r + 1);
      ts[r].dst = rows(dst, 63 - r, 64 - r);
      e.submit(ts[r]);
    }
    for (auto &t : ts)
      e.complete(t);
  }
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 256; ++c)
      ASSERT_EQ(dst.get((63 - r) * 256 + c), src.get(r * 256 + c));
  for (const auto &t : ts) {
    EXPECT_GE(t.thread, 0);
    EXPECT_LE(t.t_start_ns, t.t_end_ns);
  }
}

TEST(DmaEngine, WithoutWorkersTheWaiterPerformsTheCopy) {
  Clock clock;
  HostArray src("src", DType::i32, {8}), dst("dst", DType::i32, {8});
  src.fill_random(1);
  dst.fill_poison();
  Transfer t;
  t.src = View::whole(src);
  t.dst = View::whole(dst);
  DmaEngine e(0, clock);
  e.submit(t);
  EXPECT_TRUE(dst.is_poison(0)); // queued, not performed
  e.complete(t);
  EXPECT_EQ(t.thread, 0);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(dst.get(i), src.get(i));
}

TEST(DmaEngine, OrdersAnAccessAfterTheInFlightCopyItConflictsWith) {
  Clock clock;
  HostArray src("src", DType::f32, {1 << 16}), slot("slot", DType::f32, {2, 1 << 16});
  src.fill_random(9);
  slot.fill_poison();
  Transfer t;
  t.src = View::whole(src);
  t.dst = rows(slot, 1, 2);
  t.dst.kept = {1};
  DmaEngine e(1, clock);
  e.submit(t);
  EXPECT_FALSE(e.order_access(rows(slot, 0, 1), true)); // the other slot: no conflict
  e.order_access(rows(slot, 1, 2), false);              // reads the copy's destination
  EXPECT_EQ(slot.get((1 << 16) + 5), src.get(5));       // ordered after the copy
  e.complete(t);
}

TEST(DmaEngine, OrdersACopyAfterAnInFlightCopyOfTheSameBytes) {
  Clock clock;
  HostArray a("a", DType::f32, {4096}), b("b", DType::f32, {4096}), c("c", DType::f32, {4096});
  a.fill_random(1);
  b.fill_poison();
  c.fill_poison();
  Transfer ab, bc;
  ab.src = View::whole(a);
  ab.dst = View::whole(b);
  bc.src = View::whole(b);
  bc.dst = View::whole(c);
  DmaEngine e(2, clock);
  e.submit(ab);
  e.submit(bc); // reads what ab writes: must see ab's data
  e.complete(bc);
  e.complete(ab);
  for (int i = 0; i < 4096; i += 97)
    EXPECT_EQ(c.get(i), a.get(i));
}

TEST(DmaEngine, ALargeCopyOutIsVisibleToTheIssuerOnceCompleted) {
  // 1 MiB into a strided window of HBM: large enough to take the streaming path.
  Clock clock;
  HostArray slot("slot", DType::f32, {2, 512, 512}), hbm("hbm", DType::f32, {1024, 1024});
  slot.fill_random(4);
  hbm.fill_poison();
  std::deque<Transfer> ts(2);
  {
    DmaEngine e(1, clock);
    for (int k = 0; k < 2; ++k) {
      ts[k].src = rows(slot, k, k + 1);
      ts[k].src.kept = {1, 2};
      ts[k].dst = View::whole(hbm);
      ts[k].dst.box.lo = {512 * k, 256};
      ts[k].dst.box.hi = {512 * k + 512, 768};
      ts[k].is_in = false;
      e.submit(ts[k]);
    }
    for (auto &t : ts)
      e.complete(t);
    for (int k = 0; k < 2; ++k)
      for (std::int64_t r = 0; r < 512; r += 31)
        for (std::int64_t c = 0; c < 512; c += 17)
          ASSERT_EQ(hbm.get((512 * k + r) * 1024 + 256 + c), slot.get((k * 512 + r) * 512 + c));
  }
  EXPECT_TRUE(hbm.is_poison(0));
  EXPECT_TRUE(hbm.is_poison(1023));
}
