// bench_cpu_run: the CPU runner's copy bandwidth and copy/compute overlap.
//
// add_fraction_of_memcpy: the 4096x4096 f32 pipelined add (the guide's
//   add_matrices_pipelined, lowered by spec::lower, eager DMA) — bytes its
//   copies move / wall time — over single-threaded memcpy bandwidth of one
//   equal (64 MiB) buffer, measured in the same run. Target >= 0.7.
// overlap_ratio: wall time of a pipeline whose copy and compute cost about the
//   same, over max(its copy-only time, its compute-only time), the variants
//   being the same lowered program without its compute / without its copies.
//   Target <= 1.15.
// Prints one JSON object as its last line. Usage: bench_cpu_run [dma_threads (default 1)] [any 2nd arg: glibc
// mmap thresholds raised]

#include "executor/program_runner.hpp"
#include "executor/run.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <malloc.h>
#include <memory>
#include <string>
#include <vector>

using namespace pipecheck;
using namespace pipecheck::executor;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double memcpy_bandwidth(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now_s();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, now_s() - t0);
    a[r] = b[bytes - 1 - r]; // keep the copies observable
  }
  return static_cast<double>(bytes) / best;
}

spec::Lowered lower_kernel(const std::string &text) {
  auto r = spec::parse(spec::SourceFile::from_string("bench.pk", text));
  if (!r.file) {
    std::cerr << "bench: parse failed\n";
    std::exit(4);
  }
  const auto &k = std::get<spec::KernelSpec>(r.file->units.at(0));
  std::vector<spec::Diagnostic> errs;
  auto l = spec::lower(k, {}, errs);
  if (!l) {
    std::cerr << "bench: lower failed: " << (errs.empty() ? "" : errs[0].message) << "\n";
    std::exit(4);
  }
  return *l;
}

struct Buffers {
  std::vector<std::unique_ptr<HostArray>> owned;
  BufferMap map;
};

Buffers make_buffers(const spec::Program &p) {
  Buffers b;
  std::uint64_t seed = 1;
  for (const auto &buf : p.buffers) {
    auto shape = buffer_array_shape(buf, {});
    auto a = std::make_unique<HostArray>(buf.name, buf.dtype, *shape);
    if (buf.kind == spec::BufferKind::hbm)
      a->fill_random(seed++);
    else
      a->fill_zero(); // timing only: no NaN slow paths
    b.map[buf.name] = a.get();
    b.owned.push_back(std::move(a));
  }
  return b;
}

/// Best wall time of `reps` runs (seconds) and the bytes copied per run.
std::pair<double, std::int64_t> time_program(const spec::Program &p, Buffers &b, int threads, int reps) {
  ProgramRunConfig cfg;
  cfg.mode = DmaMode::eager;
  cfg.dma_threads = threads;
  cfg.max_events = 0;
  double best = 1e30;
  std::int64_t bytes = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    ProgramOutcome o = run_program(p, {}, b.map, cfg);
    const double t = now_s() - t0;
    if (o.error) {
      std::cerr << "bench: run failed: " << o.error->what() << "\n";
      std::exit(4);
    }
    best = std::min(best, t);
    bytes = o.bytes_copied;
  }
  return {best, bytes};
}

spec::Block filter(const spec::Block &b, bool keep_copies, bool keep_compute) {
  spec::Block out;
  for (const auto &s : b) {
    const bool copy = std::holds_alternative<spec::Copy>(s.kind);
    const bool compute =
        std::holds_alternative<spec::Assign>(s.kind) || std::holds_alternative<spec::Let>(s.kind);
    if ((copy && !keep_copies) || (compute && !keep_compute)) continue;
    out.push_back(s);
  }
  return out;
}

std::string add_kernel(const std::string &body) {
  return "kernel k:\n"
         "    grid = (8, 8)\n"
         "    in  x: f32[4096, 4096]  block=(512, 512)  index=(i, j) -> (i, j)\n"
         "    in  y: f32[4096, 4096]  block=(512, 512)  index=(i, j) -> (i, j)\n"
         "    out z: f32[4096, 4096]  block=(512, 512)  index=(i, j) -> (i, j)\n"
         "    body:\n" +
         body;
}

} // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  if (argc > 2) {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  const std::size_t bytes = std::size_t{4096} * 4096 * 4;
  const double memcpy_bw = memcpy_bandwidth(bytes);

  // 1. The pipelined add.
  const spec::Lowered add = lower_kernel(add_kernel("        z[...] = x[...] + y[...]\n"));
  Buffers ab = make_buffers(add.program);
  const auto [add_s, add_bytes] = time_program(add.program, ab, threads, 3);
  const double add_bw = static_cast<double>(add_bytes) / add_s;
  ab = Buffers{};

  // 2. Overlap: grow the compute until it costs about what the copies cost.
  double best_gap = 1e30, ratio = 0, copy_s = 0, compute_s = 0, full_s = 0;
  int chosen = 0;
  for (int n : {1, 2, 4, 8, 16}) {
    std::string body = "        t = x[...] + y[...]\n";
    for (int k = 0; k < n; ++k)
      body += "        t = t * 0.999 + 0.001\n";
    body += "        z[...] = t\n";
    spec::Lowered l = lower_kernel(add_kernel(body));
    Buffers b = make_buffers(l.program);
    spec::Program copy_only = l.program, compute_only = l.program;
    copy_only.body = filter(l.program.body, true, false);
    compute_only.body = filter(l.program.body, false, true);
    const double tc = time_program(copy_only, b, threads, 2).first;
    const double tk = time_program(compute_only, b, threads, 2).first;
    const double gap = std::max(tc, tk) / std::min(tc, tk);
    if (gap < best_gap) {
      const double tf = time_program(l.program, b, threads, 2).first;
      best_gap = gap;
      copy_s = tc;
      compute_s = tk;
      full_s = tf;
      ratio = tf / std::max(tc, tk);
      chosen = n;
    }
    if (tk > tc) break;
  }

  std::printf("memcpy: %.2f GB/s; pipelined add: %.2f GB/s over %.4f s (%d DMA threads)\n", memcpy_bw / 1e9,
              add_bw / 1e9, add_s, threads);
  std::printf("overlap: copy-only %.4f s, compute-only %.4f s, pipelined %.4f s (%d fma passes)\n", copy_s,
              compute_s, full_s, chosen);
  std::printf("{\"bench\": \"cpu_run\", \"dma_threads\": %d, \"memcpy_gbps\": %.3f, "
              "\"add_gbps\": %.3f, \"add_seconds\": %.5f, \"add_fraction_of_memcpy\": %.3f, "
              "\"copy_only_seconds\": %.5f, \"compute_only_seconds\": %.5f, "
              "\"pipelined_seconds\": %.5f, \"overlap_ratio\": %.3f}\n",
              threads, memcpy_bw / 1e9, add_bw / 1e9, add_s, add_bw / memcpy_bw, copy_s, compute_s, full_s,
              ratio);
  return 0;
}
