#pragma once
// Runs a generated CUDA source on host threads, for tests without a GPU:
// include this, define PK_HOST_EMULATION, include the generated source (as
// it is in golden/), then pk_emulate(kernel, ctas, threads, args...).
// Blocks run one after another; a block's threads are std::threads meeting
// at __syncthreads() (a std::barrier). cp.async copies take effect at once
// (the eager schedule, one the Program allows), so this checks the
// generated indexing and control flow, not asynchrony. __trap() aborts.

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct PkDim {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local PkDim threadIdx, blockIdx;
inline PkDim blockDim, gridDim;
inline std::barrier<> *pk_block_barrier = nullptr;
// One block's dynamic shared memory (blocks run one at a time).
alignas(16) inline unsigned char pk_smem[232448];

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n)
#define __shared__

inline void __syncthreads() { pk_block_barrier->arrive_and_wait(); }
[[noreturn]] inline void __trap() {
  std::fprintf(stderr, "__trap() in block %u thread %u\n", blockIdx.x, threadIdx.x);
  std::abort();
}
inline float __int_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline void pk_cp_async4(void *smem, const void *gmem) { std::memcpy(smem, gmem, 4); }
inline void pk_cp_async_commit() {}
inline void pk_wait_groups(long long newer) {
  if (newer < 0) __trap();
}

template <class... P, class... A>
void pk_emulate(void (*kernel)(P...), unsigned ctas, unsigned threads, A... args) {
  blockDim = {threads, 1, 1};
  gridDim = {ctas, 1, 1};
  for (unsigned b = 0; b < ctas; ++b) {
    std::barrier<> bar(threads);
    pk_block_barrier = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        kernel(args...);
      });
    for (auto &th : ts)
      th.join();
  }
}
