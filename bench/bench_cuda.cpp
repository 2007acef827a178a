// bench_cuda: the generated CUDA kernels' speed on the current GPU, against
// the GPU's own references. Correctness first: every timed kernel's output is
// checked on fresh random data (never zeros) before its time counts.
//
//   add_tbps       elementwise f32 add through the generated pipeline
//                  (GIB GiB per input, counting 3 arrays), its best of REPS
//   d2d_copy_tbps  cudaMemcpy device to device of GIB GiB (counting 2)
//   add_over_copy  add_tbps / d2d_copy_tbps (the goal: >= 0.95)
//   matmul_tflops  bf16 N^3 through the generated wgmma pipeline (its
//                  wgmma a loop over shared memory so far), or null with
//                  matmul_error
//   cublas_tflops  cuBLAS bf16 N^3 (f32 accumulation) in the same run
//
// Usage: bench_cuda [--gib G] [--n N] [--reps R]   (defaults 4, 8192, 5)
// The last line is one JSON object; without a usable GPU it holds "error"
// and the exit status is 1.
#include "executor/cuda/codegen.hpp"
#include "executor/cuda/device.hpp"
#include "executor/cuda/launch.hpp"
#include "executor/cuda/measure.hpp"
#include "executor/cuda/nvrtc.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"

#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace pipecheck;
using namespace pipecheck::executor::cuda;

namespace {

std::string json_string(const std::string &s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r + "\"";
}

std::string json_number(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "null";
  std::ostringstream os;
  os << *v;
  return os.str();
}

// A kernel's CUDA source generated from `.pk` text (lowered for h200).
CodegenResult generate(const std::string &text, const std::string &name) {
  const auto sf = spec::SourceFile::from_string(name + ".pk", text);
  auto parsed = spec::parse(sf);
  CodegenResult r;
  if (!parsed.file) {
    r.error = spec::render(sf, parsed.errors.at(0));
    return r;
  }
  const auto &k = std::get<spec::KernelSpec>(parsed.file->units.at(0));
  std::vector<spec::Diagnostic> errors;
  spec::LowerOptions o;
  auto l = spec::lower(k, o, errors);
  if (!l) {
    r.error = "lowering failed: " + (errors.empty() ? std::string() : errors.front().message);
    return r;
  }
  return generate_cuda(*l, {});
}

std::vector<unsigned char> random_f32(std::int64_t n, std::mt19937_64 &g) {
  std::vector<unsigned char> v(static_cast<std::size_t>(n) * 4);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = d(g);
    std::memcpy(v.data() + i * 4, &x, 4);
  }
  return v;
}

} // namespace

int main(int argc, char **argv) {
  int gib = 4, n = 8192, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (f == "--gib") gib = v;
    if (f == "--n") n = v;
    if (f == "--reps") reps = v;
  }
  std::string why;
  const std::string arch = device_arch(&why);
  if (arch.empty()) {
    std::cout << "{\"error\": " << json_string(why) << "}\n";
    return 1;
  }
  std::mt19937_64 g(std::random_device{}()); // fresh data every run
  const std::int64_t bytes = static_cast<std::int64_t>(gib) << 30, elems = bytes / 4;
  const std::int64_t rows = elems / 16384;

  // add: blocks of 32 x 256 f32, one CTA per 32 rows, 64 sequential steps.
  std::optional<double> add_tbps;
  std::string add_error;
  {
    std::ostringstream k;
    k << "kernel bench_add:\n    grid = (" << rows / 32 << ", 64)\n"
      << "    dimension_semantics = (parallel, sequential)\n    target = h200\n    max_concurrent_steps = 2\n"
      << "    in  x: f32[" << rows << ", 16384]  block=(32, 256)  index=(i, j) -> (i, j)\n"
      << "    in  y: f32[" << rows << ", 16384]  block=(32, 256)  index=(i, j) -> (i, j)\n"
      << "    out z: f32[" << rows << ", 16384]  block=(32, 256)  index=(i, j) -> (i, j)\n"
      << "    body:\n        z[...] = x[...] + y[...]\n";
    const CodegenResult r = generate(k.str(), "bench_add");
    if (!r) {
      add_error = r.error;
    } else {
      const PtxResult p = compile_to_cubin(r.kernel->source, "bench_add.cu", arch);
      std::vector<std::vector<unsigned char>> arrays{
          random_f32(elems, g), random_f32(elems, g),
          std::vector<unsigned char>(static_cast<std::size_t>(bytes))};
      const LaunchResult l = p.ok ? launch_timed(*r.kernel, p.cubin, arrays, reps) : LaunchResult{};
      if (!p.ok) {
        add_error = p.error;
      } else if (!l.ok) {
        add_error = l.error;
      } else {
        for (std::int64_t i = 0; i < elems && add_error.empty(); ++i) {
          float x, y, z;
          std::memcpy(&x, arrays[0].data() + i * 4, 4);
          std::memcpy(&y, arrays[1].data() + i * 4, 4);
          std::memcpy(&z, arrays[2].data() + i * 4, 4);
          if (z != x + y)
            add_error =
                "z[" + std::to_string(i) + "] = " + std::to_string(z) + ", x + y = " + std::to_string(x + y);
        }
        if (add_error.empty()) add_tbps = 3.0 * static_cast<double>(bytes) / l.seconds / 1e12;
      }
    }
  }
  std::optional<double> copy_tbps;
  std::string copy_error;
  if (auto t = d2d_copy_seconds(bytes, reps, &copy_error))
    copy_tbps = 2.0 * static_cast<double>(bytes) / *t / 1e12;

  // matmul: the Hopper pipeline (wgmma into an accumulator), 64 x 64 output
  // blocks, a K loop of 64-wide steps, 2 in flight, delay_release 1.
  std::optional<double> matmul_tflops;
  std::string matmul_error;
  {
    std::ostringstream k;
    k << "kernel bench_matmul:\n    grid = (" << n / 64 << ", " << n / 64 << ", " << n / 64 << ")\n"
      << "    dimension_semantics = (parallel, parallel, sequential)\n    target = h200\n"
      << "    max_concurrent_steps = 2\n    delay_release = 1\n"
      << "    in  a: bf16[" << n << ", " << n << "]  block=(64, 64)  index=(i, j, k) -> (i, k)\n"
      << "    in  b: bf16[" << n << ", " << n << "]  block=(64, 64)  index=(i, j, k) -> (k, j)\n"
      << "    out o: f32[" << n << ", " << n << "]   block=(64, 64)  index=(i, j, k) -> (i, j)\n"
      << "    scratch acc: f32[64, 64]  memory_space=acc\n"
      << "    body:\n        acc[...] += dot(a[...], b[...])\n"
      << "        when program_id(2) == num_programs(2) - 1:\n            o[...] = acc[...]\n";
    const CodegenResult r = generate(k.str(), "bench_matmul");
    if (!r) {
      matmul_error = r.error;
    } else {
      const std::int64_t nn = static_cast<std::int64_t>(n) * n;
      std::vector<std::vector<unsigned char>> arrays(3);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (int x = 0; x < 2; ++x) {
        arrays[x].resize(static_cast<std::size_t>(nn) * 2);
        for (std::int64_t i = 0; i < nn; ++i) {
          const float v = d(g);
          std::uint32_t u;
          std::memcpy(&u, &v, 4);
          const auto h = static_cast<std::uint16_t>(u >> 16);
          std::memcpy(arrays[x].data() + i * 2, &h, 2);
        }
      }
      arrays[2].resize(static_cast<std::size_t>(nn) * 4);
      const PtxResult p = compile_to_cubin(r.kernel->source, "bench_matmul.cu", arch);
      const LaunchResult l = p.ok ? launch_timed(*r.kernel, p.cubin, arrays, reps) : LaunchResult{};
      if (!p.ok) {
        matmul_error = p.error;
      } else if (!l.ok) {
        matmul_error = l.error;
      } else {
        auto bf = [&](int x, std::int64_t i) {
          std::uint16_t h;
          std::memcpy(&h, arrays[x].data() + i * 2, 2);
          const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
          float f;
          std::memcpy(&f, &u, 4);
          return static_cast<double>(f);
        };
        for (int t = 0; t < 16 && matmul_error.empty(); ++t) {
          const std::int64_t i = (t * 7919) % n, j = (t * 104729) % n;
          double want = 0;
          for (std::int64_t q = 0; q < n; ++q)
            want += bf(0, i * n + q) * bf(1, q * n + j);
          float got;
          std::memcpy(&got, arrays[2].data() + (i * n + j) * 4, 4);
          if (!(std::fabs(got - want) <= 1e-3 * std::sqrt(static_cast<double>(n))))
            matmul_error = "o[" + std::to_string(i) + ", " + std::to_string(j) +
                           "] = " + std::to_string(got) + ", the host gives " + std::to_string(want);
        }
        if (matmul_error.empty())
          matmul_tflops = 2.0 * std::pow(static_cast<double>(n), 3) / l.seconds / 1e12;
      }
    }
  }
  std::optional<double> cublas_tflops;
  std::string cublas_error;
  if (auto t = cublas_bf16_gemm_seconds(n, reps, &cublas_error))
    cublas_tflops = 2.0 * std::pow(static_cast<double>(n), 3) / *t / 1e12;

  std::cout << "add (generated pipeline): " << json_number(add_tbps) << " TB/s"
            << (add_error.empty() ? "" : "  " + add_error) << "\nd2d copy: " << json_number(copy_tbps)
            << " TB/s" << (copy_error.empty() ? "" : "  " + copy_error)
            << "\nmatmul (generated pipeline): " << json_number(matmul_tflops) << " TFLOP/s  " << matmul_error
            << "\ncuBLAS bf16: " << json_number(cublas_tflops) << " TFLOP/s"
            << (cublas_error.empty() ? "" : "  " + cublas_error) << "\n";
  std::optional<double> ratio;
  if (add_tbps && copy_tbps) ratio = *add_tbps / *copy_tbps;
  std::cout << "{\"arch\": " << json_string(arch) << ", \"gib\": " << gib << ", \"n\": " << n
            << ", \"reps\": " << reps << ", \"add_tbps\": " << json_number(add_tbps)
            << ", \"add_error\": " << json_string(add_error)
            << ", \"d2d_copy_tbps\": " << json_number(copy_tbps)
            << ", \"add_over_copy\": " << json_number(ratio)
            << ", \"matmul_tflops\": " << json_number(matmul_tflops)
            << ", \"matmul_error\": " << json_string(matmul_error)
            << ", \"cublas_tflops\": " << json_number(cublas_tflops)
            << ", \"cublas_error\": " << json_string(cublas_error) << "}\n";
  return add_tbps && copy_tbps && cublas_tflops ? 0 : 1;
}
