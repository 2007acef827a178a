#pragma once
/// Reference speeds on the current GPU for bench_cuda: what the generated
/// kernels are measured against (the device-to-device copy bandwidth, and
/// cuBLAS's bf16 matmul). Each returns nullopt with `why` without a usable
/// device or when a CUDA call fails.

#include <cstdint>
#include <optional>
#include <string>

namespace pipecheck::executor::cuda {

/// The fastest of `reps` cudaMemcpy device-to-device copies of `bytes`
/// (after one warm-up), in seconds. The source holds non-zero data.
std::optional<double> d2d_copy_seconds(std::int64_t bytes, int reps, std::string *why);

/// The fastest of `reps` cublasGemmEx calls C = A B with A, B bf16 n x n
/// (seeded random, never zeros), C f32, f32 accumulation, in seconds; the
/// result is first checked against a host dot product at a few elements.
std::optional<double> cublas_bf16_gemm_seconds(int n, int reps, std::string *why);

} // namespace pipecheck::executor::cuda
