#pragma once
// Runs a generated CUDA source on host threads, for tests without a GPU:
// include this, define PK_HOST_EMULATION, include the generated source (as
// it is in golden/), then pk_emulate(kernel, ctas, threads, args...).
// Blocks run one after another; a block's threads are std::threads meeting
// at __syncthreads() (a std::barrier).
//
// cp.async copies take effect as pk_emulation_schedule says:
// - eager: at once, where they are issued;
// - on_wait: as late as PTX allows, when a cp.async.wait_group of the
//   issuing thread covers their group (each thread has its own groups), and
//   never when no wait covers them.
// Both are schedules a GPU may run, the two ends of what it may do, as the
// CPU runner's eager and on_wait modes are for the Program.
// __trap() ends the launch: pk_emulate returns true (the block's other
// threads stop at their next __syncthreads()).

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

struct PkDim {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local PkDim threadIdx, blockIdx;
inline PkDim blockDim, gridDim;
inline std::barrier<> *pk_block_barrier = nullptr;
// One block's dynamic shared memory (blocks run one at a time).
alignas(16) inline unsigned char pk_smem[232448];

enum class PkSchedule { eager, on_wait };
inline PkSchedule pk_emulation_schedule = PkSchedule::eager;
inline std::atomic<bool> pk_trapped{false};
struct PkTrap {};

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n)
#define __shared__

inline void __syncthreads() {
  pk_block_barrier->arrive_and_wait();
  if (pk_trapped) throw PkTrap{};
}
[[noreturn]] inline void __trap() {
  if (!pk_trapped.exchange(true))
    std::fprintf(stderr, "__trap() in block %u thread %u\n", blockIdx.x, threadIdx.x);
  throw PkTrap{};
}
inline float __int_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
// f16 as the GPU's cvt.rn.f16.f32 / cvt.f32.f16 (the compiler's _Float16).
inline unsigned short pk_to_f16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  unsigned short u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}
inline float pk_from_f16(unsigned short u) {
  _Float16 h;
  std::memcpy(&h, &u, sizeof h);
  return static_cast<float>(h);
}

// A thread's cp.async copies not yet taken effect (on_wait), with the group
// each was committed in (-1: not yet committed).
struct PkPendingCopy {
  void *smem;
  const void *gmem;
  int bytes;
  long long group;
};
inline thread_local std::vector<PkPendingCopy> pk_pending;
inline thread_local long long pk_committed = 0;

inline void pk_cp_async(void *smem, const void *gmem, int bytes) {
  if (pk_emulation_schedule == PkSchedule::eager)
    std::memcpy(smem, gmem, static_cast<std::size_t>(bytes));
  else
    pk_pending.push_back({smem, gmem, bytes, -1});
}
inline void pk_cp_async4(void *smem, const void *gmem) { pk_cp_async(smem, gmem, 4); }
inline void pk_cp_async_commit() {
  ++pk_committed;
  for (auto &p : pk_pending)
    if (p.group < 0) p.group = pk_committed;
}
// cp.async.wait_group N: every group but the newest N has landed.
inline void pk_wait_groups(long long newer) {
  if (newer < 0) __trap();
  std::vector<PkPendingCopy> left;
  for (const auto &p : pk_pending)
    if (p.group >= 0 && p.group <= pk_committed - newer)
      std::memcpy(p.smem, p.gmem, static_cast<std::size_t>(p.bytes));
    else
      left.push_back(p);
  pk_pending.swap(left);
}

// sm_90 bulk copies (TMA) on an mbarrier: thread 0 issues them and every
// thread waits; under on_wait they take effect when thread 0 waits on their
// barrier (before the __syncthreads() that follows every wait).
#define PK_TMA 1
struct PkPendingBulk {
  void *smem;
  const void *gmem;
  unsigned bytes;
  const void *bar;
};
inline thread_local std::vector<PkPendingBulk> pk_pending_bulk;
inline void pk_mbar_init(unsigned long long *) {}
inline void pk_fence_proxy_async() {}
inline void pk_mbar_expect_tx(unsigned long long *, unsigned) {}
inline void pk_bulk_copy(void *smem, const void *gmem, unsigned bytes, unsigned long long *bar) {
  if (pk_emulation_schedule == PkSchedule::eager)
    std::memcpy(smem, gmem, bytes);
  else
    pk_pending_bulk.push_back({smem, gmem, bytes, bar});
}
inline void pk_mbar_wait(unsigned long long *bar, unsigned) {
  std::vector<PkPendingBulk> left;
  for (const auto &p : pk_pending_bulk)
    if (p.bar == bar)
      std::memcpy(p.smem, p.gmem, p.bytes);
    else
      left.push_back(p);
  pk_pending_bulk.swap(left);
}

// sm_90a's wgmma instructions (PK_WGMMA; a test may define it 0 before
// including this, to run a wgmma as its loop instead). Each thread computes
// its own accumulator fragment elements, reading the operands through their
// shared memory matrix descriptors as the PTX ISA defines them (no swizzle:
// 8 x 16-byte core matrices; K-major element (mn, k) of a at
// start + mn%8*16 + mn/8*SBO + k%8*2 + k/8*LBO, MN-major at
// start + mn%8*2 + mn/8*SBO + k%8*16 + k/8*LBO), and the fragment layout of
// the m64nNk16 f32 accumulator (element i of thread t: row
// t/32*16 + t%32/4 + 8*(i/2%2), column 8*(i/4) + 2*(t%4) + i%2).
// eager: computed where issued; on_wait: when a wgmma.wait_group of the
// thread covers its wgmma-group (reading its operands then), never when none does.
#ifndef PK_WGMMA
#define PK_WGMMA 1
#endif
// The running block's dynamic shared memory, where shared addresses start
// (host_module.cpp gives each kernel its own pk_smem and sets this).
inline unsigned char *pk_smem_base = pk_smem;
inline unsigned pk_shared_addr(const void *p) {
  return static_cast<unsigned>(static_cast<const unsigned char *>(p) - pk_smem_base);
}
struct PkPendingWgmma {
  float *d;
  int n;
  unsigned long long a, b;
  bool bf16;
  int trans_a, trans_b;
  long long group;
};
inline thread_local std::vector<PkPendingWgmma> pk_pending_wgmma;
inline thread_local long long pk_wgmma_groups = 0;
inline float pk_emulated_half(unsigned offset, bool bf16) {
  if (offset + 2 > sizeof pk_smem) __trap();
  unsigned short u;
  std::memcpy(&u, pk_smem_base + offset, 2);
  return bf16 ? __int_as_float(static_cast<unsigned>(u) << 16) : pk_from_f16(u);
}
inline void pk_wgmma_execute(const PkPendingWgmma &w) {
  auto field = [](unsigned long long d, int lo) { return static_cast<unsigned>((d >> lo) & 0x3fffu) << 4; };
  if ((w.a >> 62) != 0 || (w.b >> 62) != 0) __trap(); // swizzled layouts: not emulated
  // Element (mn, k) of an operand.
  auto element = [&](unsigned long long desc, int trans, unsigned mn, unsigned k) {
    const unsigned start = field(desc, 0), lbo = field(desc, 16), sbo = field(desc, 32);
    const unsigned off = trans == 0 ? mn % 8 * 16 + mn / 8 * sbo + k % 8 * 2 + k / 8 * lbo
                                    : mn % 8 * 2 + mn / 8 * sbo + k % 8 * 16 + k / 8 * lbo;
    return pk_emulated_half(start + off, w.bf16);
  };
  const unsigned t = threadIdx.x % 128;
  for (int i = 0; i < w.n / 2; ++i) {
    const unsigned row = t / 32 * 16 + t % 32 / 4 + 8 * (i / 2 % 2);
    const unsigned col = 8 * (i / 4) + 2 * (t % 4) + i % 2;
    float sum = 0.0f;
    for (unsigned k = 0; k < 16; ++k)
      sum += element(w.a, w.trans_a, row, k) * element(w.b, w.trans_b, col, k);
    w.d[i] += sum;
  }
}
inline void pk_wgmma_emulated(float *d, int n, unsigned long long a, unsigned long long b, bool bf16,
                              int trans_a, int trans_b) {
  const PkPendingWgmma w{d, n, a, b, bf16, trans_a, trans_b, -1};
  if (pk_emulation_schedule == PkSchedule::eager)
    pk_wgmma_execute(w);
  else
    pk_pending_wgmma.push_back(w);
}
inline void pk_wgmma_fence() {}
inline void pk_fence_operand(float &) {}
inline void pk_wgmma_commit() {
  ++pk_wgmma_groups;
  for (auto &w : pk_pending_wgmma)
    if (w.group < 0) w.group = pk_wgmma_groups;
}
template <int N> void pk_wgmma_wait() {
  std::vector<PkPendingWgmma> left;
  for (const auto &w : pk_pending_wgmma)
    if (w.group >= 0 && w.group <= pk_wgmma_groups - N)
      pk_wgmma_execute(w);
    else
      left.push_back(w);
  pk_pending_wgmma.swap(left);
}

// Returns true when a thread executed __trap().
template <class... P, class... A>
bool pk_emulate(void (*kernel)(P...), unsigned ctas, unsigned threads, A... args) {
  blockDim = {threads, 1, 1};
  gridDim = {ctas, 1, 1};
  pk_trapped = false;
  for (unsigned b = 0; b < ctas && !pk_trapped; ++b) {
    std::barrier<> bar(threads);
    pk_block_barrier = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        pk_pending.clear();
        pk_pending_bulk.clear();
        pk_pending_wgmma.clear();
        pk_committed = 0;
        pk_wgmma_groups = 0;
        try {
          kernel(args...);
        } catch (const PkTrap &) {
          bar.arrive_and_drop(); // the others stop at their next barrier
        }
      });
    for (auto &th : ts)
      th.join();
  }
  return pk_trapped;
}

// Calls pk_emulate with kernel parameters from untyped pointers, each cast
// to the kernel's parameter type: how a run-time compiled module is called.
template <class... P, std::size_t... I>
bool pk_call_impl(void (*kernel)(P...), void *const *args, unsigned ctas, unsigned threads,
                  std::index_sequence<I...>) {
  return pk_emulate(kernel, ctas, threads, static_cast<P>(args[I])...);
}
template <class... P> bool pk_call(void (*kernel)(P...), void *const *args, unsigned ctas, unsigned threads) {
  return pk_call_impl(kernel, args, ctas, threads, std::index_sequence_for<P...>{});
}

// Adversarial mode's delays: no time to widen on the host (the schedule
// stands in for them).
inline void pk_delay(unsigned long long, long long &passed) { ++passed; }
