// bench_check: verification cost of `pipecheck check`. Prints figures as
// text, then one JSON object on its last line:
//   median_ms_per_kernel       median verifier::check over the corpus kernels, the lowered
//                              program's race check included (target <= 20)
//   max_ms_per_kernel          the slowest corpus kernel
//   median_ms_spec_rules_only  the same median without the lowered program's check
//   grid_2e20_over_8           one kernel at 2^20 vs 8 grid points, both by the same procedure:
//                              the spec rules by the solver (target <= 1.5). By default a
//                              grid of at most 4096 points is enumerated instead, which has
//                              no solver set-up, so that ratio compares two procedures:
//   grid_2e20_over_8_enumerated  the default check at 2^20 vs the default (enumerated) one at 8
//   grid_8_ms, grid_2e20_ms    the default check's times at 8 and 2^20 points
//   grid_2e20_verdict          its verdict at 2^20 (the lowered program's race check runs on
//                              the grid cut, docs/lowering.md)
//   grid_2e16_ms               the same kernel at 2^16 grid points
//   cut_off_2e16_ms            the same kernel at 2^16 grid points with no grid cut (every
//                              step of the lowered loop walked)
//   lower_lines_2e20_over_8    `lower`'s printed lines for that kernel at 2^20 vs 8 points (target <= 1.2)
//   lower_2e20_ms              the time to lower it at 2^20 points
//   symbolic_speedup_vs_enumeration_2e20   brute force / symbolic at 2^20 (target >= 100)
//   pipeline_median_ms         median verifier::check over the corpus pipelines
//   pipeline_n_1e6_over_n_8    a pipeline with N <= 1000000 vs N <= 8
//   flash_attention_fwd_ms     corpus/kernels' causal flash attention forward with its kv
//                              sub-block loop (target <= 100)
//   flash_attention_fwd_2e18_ms    the same at a production size: 8 x 32 heads, 8192 tokens
//                              in 128 x 512 blocks, grid (8, 32, 64, 16) = 262144 points
//                              (one run; `_verdict`: its verdict)
//   layer_norm_triton_4096_rows_ms corpus/kernels' Triton layer norm forward (n = 6000
//                              columns) at 4096 rows (one run; `_verdict`: its verdict)
//   add_vectors_triton_2e28_ms corpus/kernels' Triton vector add (its ragged block masked
//                              by `program_id(0) * B + iota < n`) at n = 2^28 in blocks of
//                              1024: 262144 programs (one run; `_verdict`: its verdict)
//   mha_forward_triton_8192_ms corpus/kernels' Triton causal attention forward (its kv loop
//                              runs up to the diagonal: a grid-dependent trip count) at one
//                              batch element and head of 8192 tokens: 64 programs, up to 128
//                              iterations each (`_verdict`: its verdict)
//   mha_forward_triton_2e14_ms the same at 8 x 32 heads: 16384 programs, its o 2^27 elements
//                              (one run; `_verdict`: its verdict)
//   layer_norm_bwd_mask_bug_8192_rows_ms corpus/kernels' Triton layer norm backward (dx)
//                              whose masked loads select one lane past each row, at 8192
//                              rows: the time to its finding (`_verdict`: violation)
//   paged_attention_page_table_ms  corpus/kernels' paged attention with body DMAs, a
//                              page table described by constraints and the upstream
//                              test's lengths (a while loop finds the next sequence with
//                              pages), at the upstream test's shape (B = 6, P = 128,
//                              C = 32; target <= 1000)
//   paged_attention_gpu_triton_ms  corpus/kernels' GPU paged attention (Triton), its block
//                              table open (`in [0, NP)`) and gathered page by page, with the
//                              upstream test's 5 lengths, 256 pages of 16 per sequence (a
//                              pool of 1280) and 8 kv heads: 1280 programs (`_verdict`: its
//                              verdict)
//   column_loop_1024_ms          a scratch zeroed and accumulated one column at a time by body
//                              loops of 1024 `ds(t, 1)` updates, grid (8, 8), all of it stored
//                              (`_verdict`: verified): 2048 effects, each pair of which the
//                              scratch rules once compared per init
//   paged_attention_smem_state_ms  the same with upstream's buffer_index and init_flag as
//                              SMEM state (prefetch arrays the body stores into), at the
//                              same shape
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "verifier/check.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/model.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace pipecheck;
using Unit = std::variant<spec::KernelSpec, spec::Program>;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A check's time and verdict ("missing" where the corpus has no such kernel).
struct Sized {
  double ms = 0;
  std::string verdict = "missing";
};

double time_ms(const std::function<void()> &f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(ms_since(t0));
  }
  return median(t);
}

std::vector<Unit> parse_units(const std::string &path, const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string(path, text));
  if (!r.file) return {};
  return r.file->units;
}

std::vector<Unit> corpus_units() {
  std::vector<Unit> out;
  namespace fs = std::filesystem;
  for (const auto &e : fs::recursive_directory_iterator(std::string(PIPECHECK_SOURCE_DIR) + "/corpus")) {
    if (e.path().extension() != ".pk") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto u = parse_units(e.path().string(), ss.str());
    out.insert(out.end(), u.begin(), u.end());
  }
  return out;
}

std::string sum_kernel(int g0, int g1, int g2) {
  std::ostringstream os;
  os << "kernel s:\n    grid = (" << g0 << ", " << g1 << ", " << g2 << ")\n"
     << "    dimension_semantics = (parallel, parallel, arbitrary)\n"
     << "    in  x: f32[" << g2 << ", " << 256 * g0 << ", " << 256 * g1
     << "]  block=(None, 256, 256)  index=(i, j, k) -> (k, i, j)\n"
     << "    out o: f32[" << 256 * g0 << ", " << 256 * g1
     << "]  block=(256, 256)  index=(i, j, k) -> (i, j)\n"
     << "    body:\n        when program_id(2) == 0:\n            o[...] = zeros\n        o[...] += x[...]\n";
  return os.str();
}

std::string add_one_pipeline(const std::string &hi) {
  return "pipeline p:\n    param N >= 1 <= " + hi +
         "\n    hbm  A: f32[N, 512]\n    sram X[2]: f32[512]\n    sram Y[2]: f32[512]\n"
         "    copy_in_start(A[0], X[0])\n    for i in range(N):\n        cur = i % 2\n        nxt = (i + 1) "
         "% 2\n"
         "        if i + 1 < N:\n            copy_in_start(A[i + 1], X[nxt])\n        copy_in_wait(X[cur])\n"
         "        Y[cur] = X[cur] + 1\n        copy_out_start(Y[cur], A[i])\n        if i > 0:\n"
         "            copy_out_wait(Y[nxt])\n    copy_out_wait(Y[(N - 1) % 2])\n";
}

} // namespace

int main() {
  verifier::CheckOptions opts;
  auto units = corpus_units();
  std::vector<double> kernel_ms, pipeline_ms, spec_only_ms;
  for (const auto &u : units) {
    double t = time_ms([&] { (void)verifier::check(u, opts); }, 3);
    (std::holds_alternative<spec::KernelSpec>(u) ? kernel_ms : pipeline_ms).push_back(t);
    if (auto *k = std::get_if<spec::KernelSpec>(&u))
      spec_only_ms.push_back(time_ms([&] { (void)verifier::check_spec_rules(*k, opts); }, 3));
  }
  std::printf("corpus: %zu kernels, %zu pipelines\n", kernel_ms.size(), pipeline_ms.size());
  double flash_ms = 0, flash_big_ms = 0;
  std::string flash_big_verdict = "missing";
  for (const auto &u : units)
    if (auto *k = std::get_if<spec::KernelSpec>(&u); k && k->name == "flash_attention_fwd") {
      flash_ms = time_ms([&] { (void)verifier::check(u, opts); }, 5);
      std::printf("flash_attention_fwd: %s in %.1f ms\n",
                  verifier::to_string(verifier::check(u, opts).status), flash_ms);
      verifier::CheckOptions big = opts;
      big.overrides = {{"batch", 8}, {"heads", 32}, {"seq", 8192}, {"bkm", 512}};
      verifier::Verdict v;
      flash_big_ms = time_ms([&] { v = verifier::check(u, big); }, 1);
      flash_big_verdict = verifier::to_string(v.status);
      std::printf("flash_attention_fwd at 262144 grid points: %s in %.1f ms (%s)\n",
                  flash_big_verdict.c_str(), flash_big_ms, v.reason.c_str());
    }
  // One corpus kernel at a size: its check time and verdict, printed as `what`.
  const auto sized = [&](const std::string &name, const spec::Env &overrides, int reps, const char *what) {
    Sized out;
    for (const auto &u : units)
      if (auto *k = std::get_if<spec::KernelSpec>(&u); k && k->name == name) {
        verifier::CheckOptions at = opts;
        at.overrides = overrides;
        verifier::Verdict v;
        out.ms = time_ms([&] { v = verifier::check(u, at); }, reps);
        out.verdict = verifier::to_string(v.status);
        std::printf("%s: %s in %.1f ms (%s)\n", what, out.verdict.c_str(), out.ms, v.reason.c_str());
      }
    return out;
  };
  const Sized norm = sized("layer_norm_fwd", {{"rows", 4096}}, 1, "layer_norm_fwd (Triton) at 4096 rows");
  const Sized add =
      sized("add_vectors_triton", {{"n", std::int64_t{1} << 28}}, 1, "add_vectors_triton at 2^28 elements");
  const Sized mha = sized("mha_forward", {{"batch", 1}, {"heads", 1}, {"seq", 8192}}, 3,
                          "mha_forward (Triton) at 8192 tokens");
  const Sized mha_big = sized("mha_forward", {{"batch", 8}, {"heads", 32}, {"seq", 8192}}, 1,
                              "mha_forward (Triton) at 8 x 32 heads, 8192 tokens");
  const Sized ln_bug = sized("ln_bwd_dx_mask_off_by_one", {{"rows", 8192}}, 3,
                             "ln_bwd_dx_mask_off_by_one (Triton) at 8192 rows");
  const Sized paged_gpu =
      sized("paged_attention_gpu", {{"KVH", 8}, {"PPS", 256}}, 3,
            "paged_attention_gpu (Triton) at 8 kv heads, 256 pages per sequence, table open");
  double paged_ms = 0, state_ms = 0;
  std::string paged_verdict = "missing", state_verdict = "missing";
  for (const auto &u : units)
    if (auto *k = std::get_if<spec::KernelSpec>(&u);
        k &&
        (k->name == "paged_attention_page_table" || k->name == "paged_attention_page_table_smem_state")) {
      verifier::CheckOptions upstream = opts;
      upstream.overrides = {{"B", 6}, {"P", 128}, {"C", 32}};
      const bool state = k->name != "paged_attention_page_table";
      double &ms = state ? state_ms : paged_ms;
      std::string &verdict = state ? state_verdict : paged_verdict;
      ms = time_ms([&] { (void)verifier::check(u, upstream); }, 3);
      verdict = verifier::to_string(verifier::check(u, upstream).status);
      std::printf("%s (B = 6, P = 128, C = 32): %s in %.1f ms\n", k->name.c_str(), verdict.c_str(), ms);
    }

  Unit columns =
      parse_units("columns.pk", "kernel column_loop:\n"
                                "    grid = (8, 8)\n"
                                "    dimension_semantics = (parallel, arbitrary)\n"
                                "    in  x: f32[64, 8192]  block=(8, 1024)  index=(i, j) -> (i, j)\n"
                                "    out o: f32[64, 1024]  block=(8, 1024)  index=(i, j) -> (i, 0)\n"
                                "    scratch acc: f32[8, 1024]\n"
                                "    body:\n"
                                "        when program_id(1) == 0:\n"
                                "            for t in range(1024):\n"
                                "                acc[:, ds(t, 1)] = zeros\n"
                                "        for t in range(1024):\n"
                                "            acc[:, ds(t, 1)] += x[:, ds(t, 1)]\n"
                                "        when program_id(1) == 7:\n"
                                "            o[...] = acc[...]\n")
          .at(0);
  Sized column_loop;
  {
    verifier::Verdict v;
    column_loop.ms = time_ms([&] { v = verifier::check(columns, opts); }, 1);
    column_loop.verdict = verifier::to_string(v.status);
    std::printf("column loop (1024 single-column updates, grid (8, 8)): %s in %.1f ms\n",
                column_loop.verdict.c_str(), column_loop.ms);
  }

  Unit small = parse_units("small.pk", sum_kernel(2, 2, 2)).at(0);
  Unit big = parse_units("big.pk", sum_kernel(64, 128, 128)).at(0);
  Unit largest = parse_units("largest.pk", sum_kernel(16, 64, 64)).at(0);
  double small_ms = time_ms([&] { (void)verifier::check(small, opts); }, 7);
  verifier::CheckOptions by_solver = opts;
  by_solver.enumerate_max_points = 0; // 2^20 points are past the enumeration limit anyway
  double small_solver_ms = time_ms([&] { (void)verifier::check(small, by_solver); }, 7);
  double big_ms = time_ms([&] { (void)verifier::check(big, opts); }, 7);
  double largest_ms = time_ms([&] { (void)verifier::check(largest, opts); }, 3);
  verifier::CheckOptions walk = opts;
  walk.grid_cut = false;
  double walk_ms = time_ms([&] { (void)verifier::check(largest, walk); }, 1);
  auto small_v = verifier::check(small, opts), big_v = verifier::check(big, opts),
       largest_v = verifier::check(largest, opts);
  std::printf("sum kernel verdicts: 8 points %s; 2^16 points %s (%.1f ms); 2^20 points %s (%s)\n",
              verifier::to_string(small_v.status), verifier::to_string(largest_v.status), largest_ms,
              verifier::to_string(big_v.status), big_v.reason.c_str());
  auto model = verifier::rules::build_model(std::get<spec::KernelSpec>(big), {}, std::nullopt);
  double enum_ms = time_ms([&] { (void)verifier::rules::check_enumerated(*model.model, 1 << 21); }, 1);
  std::printf("sum kernel: 8 points %.3f ms (spec rules by the solver: %.3f ms), 2^20 points %.3f ms, "
              "enumeration at 2^20 %.1f ms\n",
              small_ms, small_solver_ms, big_ms, enum_ms);

  double p8 = 0, p1e6 = 0;
  auto ps = parse_units("p8.pk", add_one_pipeline("8"));
  auto pb = parse_units("p1e6.pk", add_one_pipeline("1000000"));
  if (!ps.empty() && !pb.empty()) {
    // Proof time: with concrete checking capped below both bounds, both
    // verdicts need the all-N induction, so the ratio shows whether its cost
    // grows with the bound (a bound of 8 would otherwise be checked by brute force).
    verifier::CheckOptions proof = opts;
    proof.n_max = 4;
    auto v8 = verifier::check(ps[0], proof), v1e6 = verifier::check(pb[0], proof);
    std::printf("pipeline proof: N <= 8 %s, N <= 10^6 %s\n", verifier::to_string(v8.status),
                verifier::to_string(v1e6.status));
    p8 = time_ms([&] { (void)verifier::check(ps[0], proof); }, 3);
    p1e6 = time_ms([&] { (void)verifier::check(pb[0], proof); }, 3);
  }
  // The lowered program's size and cost at 8 and 2^20 grid points.
  auto lower_lines = [](const Unit &u, double *ms) {
    std::vector<spec::Diagnostic> errs;
    spec::LowerOptions lo;
    lo.check_blocks = false; // as the kernel check lowers
    std::optional<spec::Lowered> l;
    double t = time_ms([&] { l = spec::lower(std::get<spec::KernelSpec>(u), lo, errs); }, 3);
    if (ms) *ms = t;
    if (!l) return 0.0;
    auto text = spec::print(l->program);
    return static_cast<double>(std::count(text.begin(), text.end(), '\n'));
  };
  double lower_big_ms = 0;
  double lines_small = lower_lines(small, nullptr), lines_big = lower_lines(big, &lower_big_ms);
  std::printf("lower: %.0f lines at 8 points, %.0f at 2^20 points (%.3f ms)\n", lines_small, lines_big,
              lower_big_ms);
  double max_kernel_ms = kernel_ms.empty() ? 0 : *std::max_element(kernel_ms.begin(), kernel_ms.end());
  std::printf(
      "{\"median_ms_per_kernel\": %.3f, \"max_ms_per_kernel\": %.3f, \"median_ms_spec_rules_only\": %.3f, "
      "\"grid_2e20_over_8\": %.3f, \"grid_2e20_over_8_enumerated\": %.3f, \"grid_8_ms\": %.3f, "
      "\"grid_2e20_ms\": %.3f, "
      "\"grid_2e20_verdict\": \"%s\", \"grid_2e16_ms\": %.1f, \"cut_off_2e16_ms\": %.1f, "
      "\"symbolic_speedup_vs_enumeration_2e20\": %.1f, \"pipeline_median_ms\": %.3f, "
      "\"pipeline_n_1e6_over_n_8\": %.3f, \"lower_lines_2e20_over_8\": %.3f, \"lower_2e20_ms\": %.3f, "
      "\"flash_attention_fwd_ms\": %.1f, \"flash_attention_fwd_2e18_ms\": %.1f, "
      "\"flash_attention_fwd_2e18_verdict\": \"%s\", \"paged_attention_page_table_ms\": %.1f, "
      "\"paged_attention_page_table_verdict\": \"%s\", \"paged_attention_smem_state_ms\": %.1f, "
      "\"paged_attention_smem_state_verdict\": \"%s\", \"layer_norm_triton_4096_rows_ms\": %.1f, "
      "\"layer_norm_triton_4096_rows_verdict\": \"%s\", \"add_vectors_triton_2e28_ms\": %.1f, "
      "\"add_vectors_triton_2e28_verdict\": \"%s\", \"mha_forward_triton_8192_ms\": %.1f, "
      "\"mha_forward_triton_8192_verdict\": \"%s\", \"mha_forward_triton_2e14_ms\": %.1f, "
      "\"mha_forward_triton_2e14_verdict\": \"%s\", \"layer_norm_bwd_mask_bug_8192_rows_ms\": %.1f, "
      "\"layer_norm_bwd_mask_bug_8192_rows_verdict\": \"%s\", \"paged_attention_gpu_triton_ms\": %.1f, "
      "\"paged_attention_gpu_triton_verdict\": \"%s\", \"column_loop_1024_ms\": %.1f, "
      "\"column_loop_1024_verdict\": \"%s\"}\n",
      median(kernel_ms), max_kernel_ms, median(spec_only_ms),
      small_solver_ms > 0 ? big_ms / small_solver_ms : 0, small_ms > 0 ? big_ms / small_ms : 0, small_ms,
      big_ms, verifier::to_string(big_v.status), largest_ms, walk_ms, big_ms > 0 ? enum_ms / big_ms : 0,
      median(pipeline_ms), p8 > 0 ? p1e6 / p8 : 0, lines_small > 0 ? lines_big / lines_small : 0,
      lower_big_ms, flash_ms, flash_big_ms, flash_big_verdict.c_str(), paged_ms, paged_verdict.c_str(),
      state_ms, state_verdict.c_str(), norm.ms, norm.verdict.c_str(), add.ms, add.verdict.c_str(), mha.ms,
      mha.verdict.c_str(), mha_big.ms, mha_big.verdict.c_str(), ln_bug.ms, ln_bug.verdict.c_str(),
      paged_gpu.ms, paged_gpu.verdict.c_str(), column_loop.ms, column_loop.verdict.c_str());
  return 0;
}
