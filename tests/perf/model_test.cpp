// The performance model: the lowered schedule timed with the guide's alpha,
// beta and F.
#include "perf/model.hpp"

#include "spec/parse.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

using namespace pipecheck;

namespace {

spec::KernelSpec kernel(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors[0].loc.line << ": " << r.errors[0].message << "\n" << text;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

perf::Model model(const spec::KernelSpec &k, perf::ModelOptions o = {}) {
  auto r = perf::model_kernel(k, o);
  EXPECT_TRUE(r.model) << (r.errors.empty() ? r.unknown : r.errors[0].message);
  return r.model ? *r.model : perf::Model{};
}

// Six steps accumulate into one output block: the input's block changes at
// every step, the output's never, so it is written back once at the end.
const char *kGuideFigure = R"(kernel guide_figure:
    grid = (6,)
    in  x: f32[768, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[128, 128]  block=(128, 128)  index=(i) -> (0, 0)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        o[...] += x[...]
)";

TEST(Model, TheGuidesScheduleFigureOfEightSlotsSixWithComputeIsSeventyFivePercentUtilized) {
  // One block (64 KiB) copies in one second and one step's compute (16384
  // adds) takes one second: slot 1 copies x's first block in, slots 2-7
  // compute while the next block streams in, slot 8 writes o back.
  perf::ModelOptions o;
  o.machine = perf::Machine{0, 65536, 16384};
  auto m = model(kernel(kGuideFigure), o);
  EXPECT_EQ(m.steps, 6);
  EXPECT_EQ(m.flops_step, 128 * 128);
  EXPECT_DOUBLE_EQ(m.seconds, 8);
  EXPECT_DOUBLE_EQ(m.compute_seconds, 6);
  EXPECT_DOUBLE_EQ(m.utilization, 0.75);
  EXPECT_DOUBLE_EQ(m.startup_seconds, 1);
  EXPECT_DOUBLE_EQ(m.drain_seconds, 1);
  EXPECT_DOUBLE_EQ(m.bubble_fraction, 0.25);
  ASSERT_EQ(m.timeline.size(), 6u);
  for (std::size_t s = 0; s < 6; ++s) {
    EXPECT_DOUBLE_EQ(m.timeline[s].compute_start, 1.0 + static_cast<double>(s));
    EXPECT_DOUBLE_EQ(m.timeline[s].compute_end, 2.0 + static_cast<double>(s));
  }
}

TEST(Model, AnOperandIsCopiedOnlyWhenItsBlockChangesBetweenConsecutiveSteps) {
  auto k = kernel(R"(kernel k:
    grid = (4, 2)
    in  x: f32[512, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    in  w: f32[128, 256]  block=(128, 256)  index=(i, j) -> (0, 0)
    in  r: f32[512, 128]  block=(128, 128)  index=(i, j) -> (i, 0)
    out o: f32[512, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...] + w[:, 0:128] + r[...]
)");
  auto m = model(k);
  ASSERT_EQ(m.operands.size(), 4u);
  EXPECT_EQ(m.operands[0].name, "x");
  EXPECT_EQ(m.operands[0].copies, 8);
  EXPECT_EQ(m.operands[1].copies, 1); // the same block at every step
  EXPECT_EQ(m.operands[2].copies, 4); // changes with i only
  EXPECT_EQ(m.operands[3].copies, 8);
  EXPECT_EQ(m.operands[2].bytes, 4 * 128 * 128 * 4);
  EXPECT_EQ(m.bytes, (8 + 2 + 4 + 8) * 128 * 128 * 4);
}

TEST(Model, AKernelWithScalarPrefetchIsModelledWithItsGivenContents) {
  // Index maps that take the prefetch table as well as the grid indices:
  // the table [3, 3, 2, 2] changes the gathered block twice after the first.
  auto k = kernel(R"(kernel gather_rows:
    grid = (4,)
    prefetch ids: i32[4] = [3, 3, 2, 2]
    in  x: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (ids[i], 0)
    out o: f32[32, 128]  block=(8, 128)  index=(i, ids) -> (i, 0)
    body:
        o[...] = x[...]
)");
  auto m = model(k);
  ASSERT_EQ(m.operands.size(), 2u);
  EXPECT_EQ(m.operands[0].name, "x");
  EXPECT_EQ(m.operands[0].copies, 2);
  EXPECT_EQ(m.operands[1].copies, 4);
}

TEST(Model, ADotCountsTwoMNKFlopsAndAnElementwiseOperationOnePerElement) {
  auto k = kernel(R"(kernel k:
    grid = (2,)
    in  a: bf16[256, 256]  block=(128, 256)  index=(i) -> (i, 0)
    in  b: bf16[256, 64]
    out o: f32[256, 64]  block=(128, 64)  index=(i) -> (i, 0)
    body:
        o[...] = dot(a[...], b[...]) * 2.0
)");
  auto flops = perf::body_flops(k, {});
  std::int64_t total = 0;
  for (auto &[loc, f] : flops)
    total += f;
  EXPECT_EQ(total, 2 * 128 * 64 * 256 + 128 * 64);
  EXPECT_EQ(model(k).flops, 2 * total);
}

TEST(Model, ADotGeneralCountsTwoFlopsPerOutputElementAndContractedIndex) {
  // A batch of 2, 64 x 32 per batch, contracting 128: 2 * 2 * 64 * 32 * 128.
  auto k = kernel(R"(kernel k:
    grid = (1,)
    in  q: f32[2, 64, 128]
    in  kk: f32[2, 32, 128]
    out o: f32[2, 64, 32]
    body:
        o[...] = dot_general(q[...], kk[...], contract=((2,), (2,)), batch=((0,), (0,)))
)");
  std::int64_t total = 0;
  for (auto &[loc, f] : perf::body_flops(k, {}))
    total += f;
  EXPECT_EQ(total, 2 * 2 * 64 * 32 * 128);
}

TEST(Model, AnElementwiseKernelIsMemoryBoundAndNamesItsDominatingOperandAndWhatMoreBuffersBuy) {
  auto k = kernel(R"(kernel k:
    param bm = 128 in {128, 256, 512}
    grid = (4096 // bm,)
    in  x: f32[4096, 512]  block=(bm, 512)  index=(i) -> (i, 0)
    in  y: f32[4096, 128]  block=(bm, 128)  index=(i) -> (i, 0)
    out o: f32[4096, 512]  block=(bm, 512)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] + 1.0
)");
  auto m = model(k);
  EXPECT_EQ(m.target, perf::kDefaultTarget);
  EXPECT_EQ(m.bound, perf::Bound::memory);
  ASSERT_TRUE(m.dominant);
  EXPECT_NE(m.operands[*m.dominant].name, "y");
  ASSERT_EQ(m.alternatives.size(), 2u);
  EXPECT_EQ(m.alternatives[0].change, "--set bm=256");
  EXPECT_TRUE(m.alternatives[0].ok);
  EXPECT_TRUE(m.alternatives[0].fits);
  EXPECT_LT(m.alternatives[0].seconds, m.seconds); // fewer per-copy latencies and bubbles
  EXPECT_EQ(m.alternatives[1].change.rfind("buffer_count=3 on ", 0), 0u);
  EXPECT_GT(m.alternatives[1].sram_bytes, m.sram_bytes);
  EXPECT_FALSE(m.latency_bound);
}

TEST(Model, ACopyKernelWithNoComputeWhoseLatencyIsNotHiddenIsLatencyBound) {
  // No compute: the whole time is start-up, 16 copies' latency against 1.3 us
  // of bandwidth on tpu_v5e.
  auto k = kernel(R"(kernel k:
    target = tpu_v5e
    dimension_semantics = (arbitrary,)
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  auto m = model(k);
  EXPECT_EQ(m.bound, perf::Bound::memory);
  EXPECT_TRUE(m.latency_bound) << m.seconds << " s against " << m.copy_seconds << " s of copies";
}

TEST(Model, SmallCopiesWhoseLatencyIsNotHiddenAreLatencyBoundAndMoreBuffersHelp) {
  // 4 KiB blocks: 1.3 ns of bandwidth each on h100 but 500 ns of latency.
  auto k = kernel(R"(kernel k:
    target = h100
    dimension_semantics = (arbitrary,)
    grid = (64,)
    in  x: f32[4096, 16]  block=(64, 16)  index=(i) -> (i, 0)
    out o: f32[4096, 16]  block=(64, 16)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] * 2.0
)");
  auto m = model(k);
  EXPECT_EQ(m.bound, perf::Bound::memory);
  EXPECT_TRUE(m.latency_bound);
  ASSERT_FALSE(m.alternatives.empty());
  EXPECT_EQ(m.alternatives.back().change, "max_concurrent_steps=2");
  EXPECT_TRUE(m.alternatives.back().ok) << m.alternatives.back().why;
  EXPECT_LT(m.alternatives.back().seconds, 0.8 * m.seconds);
  EXPECT_TRUE(m.alternatives.back().fits);
}

TEST(Model, ALargeMatmulBlockIsComputeBound) {
  auto k = kernel(R"(kernel k:
    target = tpu_v5e
    grid = (4, 4, 4)
    in  a: bf16[4096, 4096]  block=(1024, 1024)  index=(i, j, l) -> (i, l)
    in  b: bf16[4096, 4096]  block=(1024, 1024)  index=(i, j, l) -> (l, j)
    out o: f32[4096, 4096]  block=(1024, 1024)  index=(i, j, l) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += dot(a[...], b[...])
)");
  auto m = model(k);
  EXPECT_EQ(m.bound, perf::Bound::compute);
  EXPECT_FALSE(m.dominant);
  EXPECT_GT(m.utilization, 0.8);
}

TEST(Model, TheTargetsNumbersComeFromTheTargetsTable) {
  auto k = kernel(kGuideFigure);
  perf::ModelOptions o;
  o.target = "h200";
  auto m = model(k, o);
  EXPECT_EQ(m.target, "h200");
  EXPECT_DOUBLE_EQ(m.machine.beta_bytes_per_s, spec::find_target("h200")->hbm_bytes_per_s);
  for (const auto &t : spec::targets()) {
    EXPECT_GT(t.alpha_s, 0) << t.name;
    EXPECT_GT(t.hbm_bytes_per_s, 0) << t.name;
    EXPECT_GT(t.flops_per_s, 0) << t.name;
  }
}

TEST(Model, AMachineWithoutBandwidthOrFlopsHasNoModel) {
  perf::ModelOptions o;
  o.machine = perf::Machine{0, 0, 1};
  auto r = perf::model_kernel(kernel(kGuideFigure), o);
  EXPECT_FALSE(r.model);
  EXPECT_NE(r.unknown.find("no alpha, beta and F"), std::string::npos) << r.unknown;
}

TEST(Model, AKernelWhoseScheduleFaultsHasNoModelAndSaysWhy) {
  auto k = kernel(R"(kernel k:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i + 1, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  auto r = perf::model_kernel(k, {});
  EXPECT_FALSE(r.model);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_NE(r.unknown.find("faults at line 3"), std::string::npos) << r.unknown;
}

TEST(Model, AGridOfMoreStepsThanItSimulatesHasNoModelAndSaysWhy) {
  // 2^30 steps: the walk would take hours; 2^18 is the limit.
  const std::string text = R"(kernel big:
    param n = 2**40
    grid = (n // 1024,)
    in  x: f32[n]  block=(1024,)  index=(i) -> (i,)
    out o: f32[n]  block=(1024,)  index=(i) -> (i,)
    body:
        o[...] = x[...] * 2.0
)";
  auto r = perf::model_kernel(kernel(text), {});
  EXPECT_FALSE(r.model);
  EXPECT_NE(r.unknown.find("its grid has 1073741824 steps, more than the 262144"), std::string::npos)
      << r.unknown;
  perf::ModelOptions o;
  o.overrides["n"] = 1 << 28;
  EXPECT_TRUE(perf::model_kernel(kernel(text), o).model);
}

TEST(Model, TheGuidesSectionFourPipelineOverlapsEachStepsComputeWithTheNextCopyIn) {
  // The guide's double-buffered loop as written (corpus/guide/section4_rolled.pk)
  // with 6 steps; a block copies in half the time a step computes.
  std::ifstream in(std::string(PIPECHECK_SOURCE_DIR) + "/corpus/guide/section4_rolled.pk");
  std::stringstream text;
  text << in.rdbuf();
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("section4_rolled.pk", text.str()));
  ASSERT_TRUE(r.file);
  const spec::Program *p = nullptr;
  for (const auto &u : r.file->units)
    if (spec::unit_name(u) == "guide_rolled_loop_even_trip_count") p = &std::get<spec::Program>(u);
  ASSERT_NE(p, nullptr);
  perf::ModelOptions o;
  o.overrides = {{"M", 3}};
  o.machine = perf::Machine{0, 2 * 2048, 512}; // a 2 KiB block in 0.5 s, 512 adds in 1 s
  auto m = perf::model_program(*p, o);
  ASSERT_TRUE(m.model) << m.unknown;
  EXPECT_TRUE(m.model->pipeline);
  EXPECT_EQ(m.model->steps, 6);
  EXPECT_EQ(m.model->flops_step, 512);
  // 0.5 s copy-in, six 1 s computes each overlapping the next copy-in and the
  // previous write-back, 0.5 s write-back: 6 of 7 seconds compute.
  EXPECT_DOUBLE_EQ(m.model->seconds, 7);
  EXPECT_DOUBLE_EQ(m.model->utilization, 6.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.model->startup_seconds, 0.5);
  EXPECT_DOUBLE_EQ(m.model->drain_seconds, 0.5);
  ASSERT_EQ(m.model->timeline.size(), 6u);
  EXPECT_DOUBLE_EQ(m.model->timeline[5].compute_start, 5.5);
  ASSERT_EQ(m.model->operands.size(), 2u);
  EXPECT_EQ(m.model->operands[0].copies, 6);
  EXPECT_EQ(m.model->sram_bytes, 4 * 2048);
}

std::pair<int, std::string> cli(const std::string &args) {
  std::string out;
  FILE *p = popen(
      ("cd '" + std::string(PIPECHECK_SOURCE_DIR) + "' && " PIPECHECK_BINARY " " + args + " 2>&1").c_str(),
      "r");
  if (!p) return {-1, ""};
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(Model, BodyDmasOfAMemorySpaceAnyOperandCountTheirBytes) {
  // Each step copies one 8 x 128 f32 page (4 KiB) by hand from a pool in
  // HBM, through one semaphore: 8 copies, 32 KiB, beside o's 8 write-backs.
  const char *text = R"(kernel gather:
    grid = (8,)
    in  kp: f32[16, 8, 128]  memory_space=any
    out o: f32[8, 8, 128]  block=(None, 8, 128)  index=(i) -> (i, 0, 0)
    scratch buf: f32[8, 128]
    scratch sem: dma_sem
    body:
        c = async_copy(kp[15 - program_id(0)], buf, sem)
        c.start()
        c.wait()
        o[...] = buf[...]
)";
  perf::ModelOptions o;
  o.machine = perf::Machine{0, 4096, 1e12};
  auto m = model(kernel(text), o);
  ASSERT_EQ(m.operands.size(), 2u);
  EXPECT_EQ(m.operands[0].name, "kp");
  EXPECT_TRUE(m.operands[0].body_copies);
  EXPECT_EQ(m.operands[0].copies, 8);
  EXPECT_EQ(m.operands[0].bytes, 8 * 4096);
  EXPECT_DOUBLE_EQ(m.operands[0].seconds, 8);
  EXPECT_EQ(m.operands[1].name, "o");
  EXPECT_FALSE(m.operands[1].body_copies);
  EXPECT_EQ(m.bytes, 2 * 8 * 4096);
  EXPECT_DOUBLE_EQ(m.copy_seconds, 16);
}

TEST(ModelCommand, PrintsTheModelOfEveryKernelOfAFileAsTextOrJson) {
  auto [rc, out] =
      cli("model corpus/examples/guide_elementwise.pk --kernel add_matrices_pipelined --format json");
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["unit"], "add_matrices_pipelined");
  EXPECT_EQ(j["models"][0]["bound"], "memory");
  EXPECT_EQ(j["models"][0]["steps"], 64);
  // The file's copy_shifted_index reads past its array: its schedule
  // faults, so it has no model (exit 2) while the others have one.
  auto [rc2, text] = cli("model corpus/examples/guide_elementwise.pk --target h100");
  EXPECT_EQ(rc2, 2) << text;
  EXPECT_NE(text.find("copy_shifted_index: cannot model: its schedule faults at line 56"), std::string::npos)
      << text;
  EXPECT_NE(text.find("add_matrices_pipelined on h100"), std::string::npos) << text;
  EXPECT_NE(text.find("memory-bound"), std::string::npos) << text;
  EXPECT_NE(text.find("utilization"), std::string::npos) << text;
}

TEST(ModelCommand, JsonSaysWhichUnitsItCannotModelAndWhyAndIsAReportOnBadInput) {
  const std::string json_file =
      (std::filesystem::temp_directory_path() / ("model_json_" + std::to_string(getpid()) + ".json"))
          .string();
  auto read_json = [&] {
    std::ifstream in(json_file);
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  };
  auto [rc, out] = cli("model corpus/examples/guide_elementwise.pk --format json -o " + json_file);
  EXPECT_EQ(rc, 2) << out;
  auto j = read_json();
  EXPECT_EQ(j["version"], "0.1.0");
  EXPECT_EQ(j["ok"], false);
  bool said = false;
  for (const auto &m : j["models"])
    if (m["unit"] == "copy_shifted_index") {
      said = true;
      EXPECT_EQ(m["modelled"], false);
      EXPECT_NE(m["reason"].get<std::string>().find("its schedule faults at line 56"), std::string::npos);
    }
  EXPECT_TRUE(said) << j.dump();
  auto [rc2, bad] =
      cli("model corpus/examples/guide_elementwise.pk --kernel nope --format json -o " + json_file);
  EXPECT_EQ(rc2, 3) << bad;
  auto b = read_json();
  EXPECT_EQ(b["ok"], false);
  EXPECT_FALSE(b["errors"].empty()) << b.dump();
  std::filesystem::remove(json_file);
}

TEST(ModelCommand, AnUnknownTargetOrKernelIsBadInput) {
  EXPECT_EQ(cli("model corpus/examples/guide_elementwise.pk --target tpu_v9").first, 3);
  EXPECT_EQ(cli("model corpus/examples/guide_elementwise.pk --kernel nope").first, 3);
  EXPECT_EQ(cli("model corpus/examples/guide_elementwise.pk --format xml").first, 3);
}

} // namespace
