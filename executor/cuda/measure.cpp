#include "executor/cuda/measure.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace pipecheck::executor::cuda {
namespace {

bool ok(cudaError_t e, const char *what, std::string *why) {
  if (e == cudaSuccess) return true;
  if (why) *why = std::string("CUDA: ") + what + ": " + cudaGetErrorString(e);
  return false;
}

bool ok(cublasStatus_t e, const char *what, std::string *why) {
  if (e == CUBLAS_STATUS_SUCCESS) return true;
  if (why) *why = std::string("cuBLAS: ") + what + ": status " + std::to_string(static_cast<int>(e));
  return false;
}

struct DeviceBuffers {
  std::vector<void *> p;
  ~DeviceBuffers() {
    for (void *x : p)
      cudaFree(x);
  }
  void *alloc(std::size_t bytes, std::string *why) {
    void *x = nullptr;
    if (!ok(cudaMalloc(&x, bytes), "cudaMalloc", why)) return nullptr;
    p.push_back(x);
    return x;
  }
};

// The fastest of `reps` runs of `f` (after one warm-up), timed with events.
template <class F> std::optional<double> fastest(int reps, F f, std::string *why) {
  if (!f()) return std::nullopt;
  cudaEvent_t a = nullptr, b = nullptr;
  if (!ok(cudaEventCreate(&a), "cudaEventCreate", why) || !ok(cudaEventCreate(&b), "cudaEventCreate", why))
    return std::nullopt;
  std::optional<double> best;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    if (!ok(cudaEventRecord(a), "cudaEventRecord", why) || !f() ||
        !ok(cudaEventRecord(b), "cudaEventRecord", why) ||
        !ok(cudaEventSynchronize(b), "cudaEventSynchronize", why) ||
        !ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime", why)) {
      best.reset();
      break;
    }
    best = best ? std::min(*best, ms * 1e-3) : ms * 1e-3;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace

std::optional<double> d2d_copy_seconds(std::int64_t bytes, int reps, std::string *why) {
  DeviceBuffers d;
  void *src = d.alloc(static_cast<std::size_t>(bytes), why);
  void *dst = src ? d.alloc(static_cast<std::size_t>(bytes), why) : nullptr;
  if (!dst || !ok(cudaMemset(src, 0x3c, static_cast<std::size_t>(bytes)), "cudaMemset", why))
    return std::nullopt;
  return fastest(
      reps,
      [&] {
        return ok(cudaMemcpy(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice),
                  "cudaMemcpy", why);
      },
      why);
}

std::optional<double> cublas_bf16_gemm_seconds(int n, int reps, std::string *why) {
  const std::size_t nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<std::uint16_t> a(nn), b(nn);
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto &x : a)
    x = to_bf16(u(g));
  for (auto &x : b)
    x = to_bf16(u(g));
  DeviceBuffers d;
  void *da = d.alloc(nn * 2, why), *db = da ? d.alloc(nn * 2, why) : nullptr,
       *dc = db ? d.alloc(nn * 4, why) : nullptr;
  if (!dc || !ok(cudaMemcpy(da, a.data(), nn * 2, cudaMemcpyHostToDevice), "cudaMemcpy", why) ||
      !ok(cudaMemcpy(db, b.data(), nn * 2, cudaMemcpyHostToDevice), "cudaMemcpy", why))
    return std::nullopt;
  cublasHandle_t h = nullptr;
  if (!ok(cublasCreate(&h), "cublasCreate", why)) return std::nullopt;
  const float one = 1.0f, zero = 0.0f;
  // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
  auto gemm = [&] {
    return ok(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, db, CUDA_R_16BF, n, da, CUDA_R_16BF, n,
                           &zero, dc, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx", why);
  };
  std::optional<double> t = fastest(reps, gemm, why);
  std::vector<float> c(nn);
  if (t && ok(cudaMemcpy(c.data(), dc, nn * 4, cudaMemcpyDeviceToHost), "cudaMemcpy", why)) {
    for (int k = 0; k < 8; ++k) {
      const std::size_t i = (static_cast<std::size_t>(k) * 7919u) % static_cast<std::size_t>(n),
                        j = (static_cast<std::size_t>(k) * 104729u) % static_cast<std::size_t>(n);
      double want = 0;
      for (std::size_t p = 0; p < static_cast<std::size_t>(n); ++p)
        want += static_cast<double>(from_bf16(a[i * n + p])) * from_bf16(b[p * n + j]);
      if (std::fabs(c[i * n + j] - want) > 1e-2 * std::max(1.0, std::sqrt(static_cast<double>(n)))) {
        if (why)
          *why = "cuBLAS: C[" + std::to_string(i) + ", " + std::to_string(j) +
                 "] = " + std::to_string(c[i * n + j]) + ", the host gives " + std::to_string(want);
        t.reset();
        break;
      }
    }
  } else {
    t.reset();
  }
  cublasDestroy(h);
  return t;
}

} // namespace pipecheck::executor::cuda
