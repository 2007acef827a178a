#include "spec/lower.hpp"

#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

using namespace pipecheck::spec;

namespace {

KernelSpec kernel(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors[0].loc.line << ": " << r.errors[0].message;
    return {};
  }
  return std::get<KernelSpec>(r.file->units.at(0));
}

/// These tests read the schedule in its unrolled form (literal slots and
/// regions per step); lower_rolled_test holds the rolled form equal to it.
Lowered lowered(const std::string &text, LowerOptions o = {}) {
  o.unroll = true;
  std::vector<Diagnostic> errs;
  auto l = lower(kernel(text), o, errs);
  if (!l) {
    ADD_FAILURE() << (errs.empty() ? "no diagnostic" : errs[0].message);
    return {};
  }
  return *l;
}

/// Statements (flattened) printed one per entry.
std::vector<std::string> lines(const Program &p) {
  std::vector<std::string> out;
  std::function<void(const Block &)> walk = [&](const Block &b) {
    for (auto &s : b) {
      std::string t = print(s, 0);
      if (!t.empty() && t.back() == '\n') t.pop_back();
      out.push_back(t);
    }
  };
  walk(p.body);
  return out;
}

int count_prefix(const std::vector<std::string> &v, const std::string &p) {
  int n = 0;
  for (auto &s : v)
    if (s.rfind(p, 0) == 0) ++n;
  return n;
}

void expect_round_trip(const Program &p) {
  auto back = parse(SourceFile::from_string("lowered.pk", print(p)));
  ASSERT_TRUE(back.file) << back.errors[0].message << "\n" << print(p);
  EXPECT_TRUE(std::get<Program>(back.file->units.at(0)) == p) << print(p);
}

const char *kRowPanels = R"(kernel rows:
    grid = (2, 4)
    in  x: f32[256, 512]  block=(128, 512)  index=(i, j) -> (i, 0)
    in  y: f32[256, 2048] block=(128, 512)  index=(i, j) -> (i, j)
    out z: f32[256, 2048] block=(128, 512)  index=(i, j) -> (i, j)
    body:
        z[...] = x[...] + y[...]
)";

} // namespace

TEST(LowerTpu, SkipsTheCopyOfAnInputWhoseBlockDoesNotChange) {
  auto l = lowered(kRowPanels);
  auto v = lines(l.program);
  EXPECT_EQ(count_prefix(v, "copy_in_start(x["), 2); // one per row panel
  EXPECT_EQ(count_prefix(v, "copy_in_wait(x_vmem"), 2);
  EXPECT_EQ(count_prefix(v, "copy_in_start(y["), 8);
  EXPECT_EQ(count_prefix(v, "copy_out_start(z_vmem"), 8);
  EXPECT_EQ(count_prefix(v, "copy_out_wait(z_vmem"), 8);
  EXPECT_EQ(v.front(), "copy_in_start(x[0:128, :], x_vmem[0])");
  expect_round_trip(l.program);
}

TEST(LowerTpu, NamesTheHbmArrayAfterTheOperandAndTheRingWithVmem) {
  auto l = lowered(kRowPanels);
  ASSERT_EQ(l.bindings.size(), 3u);
  EXPECT_EQ(l.bindings[0].hbm, "x");
  EXPECT_EQ(l.bindings[0].window, "x_vmem");
  const Buffer *w = l.program.buffer("x_vmem");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(print(*w->slots), "2");
  EXPECT_EQ(l.program.buffer("x")->kind, BufferKind::hbm);
}

TEST(LowerTpu, NamesARingAwayFromAScratchOrOperandThatHasItsName) {
  const std::string text = R"(kernel clash:
    grid = (2,)
    in  x: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    in  o_vmem: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: f32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    scratch x_vmem: f32[2, 8, 128]
    body:
        x_vmem[program_id(0) % 2] = x[...]
        o[...] = x_vmem[program_id(0) % 2] + o_vmem[...]
)";
  for (bool unroll : {true, false}) {
    LowerOptions o;
    o.unroll = unroll;
    std::vector<Diagnostic> errs;
    auto l = lower(kernel(text), o, errs);
    ASSERT_TRUE(l) << errs.at(0).message;
    ASSERT_EQ(l->bindings.size(), 4u);
    EXPECT_EQ(l->bindings[0].window, "x_vmem_");
    EXPECT_EQ(l->bindings[1].window, "o_vmem_vmem");
    EXPECT_EQ(l->bindings[2].window, "o_vmem_");
    EXPECT_EQ(l->bindings[3].window, "x_vmem");
    // The scratch keeps its name and its shape; each ring is a buffer of its own.
    ASSERT_NE(l->program.buffer("x_vmem"), nullptr);
    EXPECT_FALSE(l->program.buffer("x_vmem")->slots);
    EXPECT_EQ(print(*l->program.buffer("x_vmem_")->slots), "2");
    EXPECT_EQ(print(*l->program.buffer("o_vmem_")->slots), "2");
  }
}

TEST(LowerTpu, ReplacesProgramIdByTheGridIndexAndFoldsWhen) {
  auto l = lowered(R"(kernel s:
    grid = (2, 3)
    in  x: f32[2, 3, 8, 128]  block=(None, None, 8, 128)  index=(i, k) -> (i, k, 0, 0)
    out o: f32[16, 128]       block=(8, 128)              index=(i, k) -> (i, 0)
    body:
        when program_id(1) == 0:
            o[...] = zeros
        o[...] += x[...]
)");
  auto v = lines(l.program);
  EXPECT_EQ(count_prefix(v, "o_vmem[0] = zeros"), 1);
  EXPECT_EQ(count_prefix(v, "o_vmem[1] = zeros"), 1);
  EXPECT_EQ(count_prefix(v, "o_vmem["), 8); // 2 inits + 6 accumulations
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_vmem[0], o[0:8, :])"), 1);
  EXPECT_EQ(count_prefix(v, "copy_in_start(x[1, 2, :, :], x_vmem["), 1);
  expect_round_trip(l.program);
}

TEST(LowerTpu, BufferedThreeFetchesTwoStepsAhead) {
  auto l = lowered(R"(kernel b3:
    grid = (6,)
    in  x: f32[768, 128]  block=(128, 128)  index=(i) -> (i, 0)  buffered=3
    out o: f32[768, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  auto v = lines(l.program);
  ASSERT_GE(v.size(), 4u);
  EXPECT_EQ(v[0], "copy_in_start(x[0:128, :], x_vmem[0])");
  EXPECT_EQ(v[1], "copy_in_start(x[128:256, :], x_vmem[1])");
  EXPECT_EQ(v[2], "copy_in_start(x[256:384, :], x_vmem[2])");
  EXPECT_EQ(v[3], "copy_in_wait(x_vmem[0])");
  EXPECT_EQ(print(*l.program.buffer("x_vmem")->slots), "3");
  expect_round_trip(l.program);
}

TEST(LowerTpu, LookaheadFillsEverySlotAtTheNextIndexChanges) {
  auto l = lowered(R"(kernel la:
    grid = (8,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i // 2, 0)  buffered=(3, lookahead)
    out o: f32[1024, 128] block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  auto v = lines(l.program);
  // Before the first wait the ring holds the blocks of steps 0, 2 and 4.
  ASSERT_GE(v.size(), 4u);
  EXPECT_EQ(v[0], "copy_in_start(x[0:128, :], x_vmem[0])");
  EXPECT_EQ(v[1], "copy_in_start(x[128:256, :], x_vmem[1])");
  EXPECT_EQ(v[2], "copy_in_start(x[256:384, :], x_vmem[2])");
  EXPECT_EQ(v[3], "copy_in_wait(x_vmem[0])");
  EXPECT_EQ(count_prefix(v, "copy_in_start(x["), 4);
  expect_round_trip(l.program);
}

TEST(LowerTpu, RevisitAnyCopiesARevisitedOutputBlockBackIn) {
  auto l = lowered(R"(kernel fold:
    grid = (8,)
    in  x: f32[1024, 256]  block=(128, 256)  index=(i) -> (i, 0)
    out o: f32[512, 256]   block=(128, 256)  index=(i) -> (i % 4, 0)  buffered=1  revisit=any
    body:
        when program_id(0) < 4:
            o[...] = zeros
        o[...] += x[...]
)");
  auto v = lines(l.program);
  EXPECT_EQ(count_prefix(v, "copy_in_start(o["), 4); // steps 4..7 revisit
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_vmem[0]"), 8);
  EXPECT_EQ(print(*l.program.buffer("o_vmem")->slots), "1");
  expect_round_trip(l.program);
}

TEST(LowerTriton, ReadsEveryOutputBlockBackBeforeTheBodyIntoOneSlot) {
  // Triton's stores reach the array itself: what a program does not store
  // keeps the array's contents, so each visit starts from them.
  auto l = lowered(R"(kernel half:
    grid = (4,)
    backend = triton
    in  x: f32[64]  block=(16,)  index=(i) -> (i,)
    out o: f32[64]  block=(16,)  index=(i) -> (i,)
    body:
        o[ds(0, 8)] = x[ds(0, 8)]
)");
  auto v = lines(l.program);
  EXPECT_EQ(count_prefix(v, "copy_in_start(o["), 4);
  // (A Triton block is the program's view of the array: no VMEM.)
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_block[0]"), 4);
  EXPECT_EQ(print(*l.program.buffer("o_block")->slots), "1");
  expect_round_trip(l.program);
}

TEST(LowerTpu, AliasedOperandsShareOneHbmArray) {
  auto l = lowered(R"(kernel inplace:
    grid = (8,)
    in  x: f32[1024, 512]  block=(128, 512)  index=(i) -> (i, 0)
    out o: f32[1024, 512]  block=(128, 512)  index=(i) -> (i, 0)
    alias x -> o
    body:
        o[...] = x[...] + 1
)");
  EXPECT_EQ(l.program.buffer("o"), nullptr);
  ASSERT_EQ(l.bindings.size(), 2u);
  EXPECT_EQ(l.bindings[1].hbm, "x");
  auto v = lines(l.program);
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_vmem[1], x[128:256, :])"), 1);
  expect_round_trip(l.program);
}

TEST(LowerTpu, MemorySpaceAnyGetsNoWindow) {
  auto l = lowered(R"(kernel anyk:
    grid = (2,)
    in  h: f32[256, 128]  memory_space=any
    in  x: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  EXPECT_EQ(l.program.buffer("h_vmem"), nullptr);
  EXPECT_NE(l.program.buffer("h"), nullptr);
  EXPECT_EQ(count_prefix(lines(l.program), "copy_in_start(h"), 0);
}

TEST(LowerGpu, RefillsTheSlotOfStepSMinusDelayReleaseAndIssuesWgmma) {
  const char *text = R"(kernel mm:
    grid = (8,)
    target = h200
    max_concurrent_steps = 4
    delay_release = 1
    dimension_semantics = (sequential,)
    in  a: bf16[128, 512]  block=(128, 64)  index=(k) -> (0, k)
    in  b: bf16[512, 128]  block=(64, 128)  index=(k) -> (k, 0)
    out o: f32[128, 128]   block=(128, 128) index=(k) -> (0, 0)
    scratch acc: f32[128, 128]  memory_space=acc
    body:
        when program_id(0) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(0) == num_programs(0) - 1:
            o[...] = acc[...]
)";
  auto l = lowered(text);
  auto v = lines(l.program);
  EXPECT_EQ(print(*l.program.buffer("a_smem")->slots), "4");
  EXPECT_EQ(l.program.buffer("acc")->kind, BufferKind::acc);
  EXPECT_EQ(count_prefix(v, "wgmma(acc, a_smem["), 8);
  // After body(1) the refill carries step 4 into slot 0 (the slot of step 0).
  EXPECT_EQ(count_prefix(v, "copy_in_start(a[:, 256:320], a_smem[0])"), 1);
  EXPECT_EQ(count_prefix(v, "copy_in_start(a["), 8);
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_smem[3], o)"), 1);
  expect_round_trip(l.program);
}

TEST(Lower, RejectsAnUnboundParamWithALocatedError) {
  std::vector<Diagnostic> errs;
  auto k = kernel(R"(kernel p:
    param n >= 1
    grid = (n,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  EXPECT_FALSE(lower(k, {}, errs));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].loc.line, 2);
  LowerOptions o;
  o.overrides["n"] = 8;
  errs.clear();
  EXPECT_TRUE(lower(k, o, errs));
}

TEST(Lower, RecordsTheGridStepOfEveryTopLevelStatementWithoutChangingTheText) {
  auto l = lowered(kRowPanels);
  EXPECT_EQ(l.grid, (std::vector<std::int64_t>{2, 4}));
  ASSERT_EQ(l.step_of.size(), l.program.body.size());
  EXPECT_EQ(l.step_of.front(), 0); // the prologue is issued with step 0
  EXPECT_EQ(l.step_of.back(), 7);  // the epilogue with the last step
  EXPECT_TRUE(std::is_sorted(l.step_of.begin(), l.step_of.end()));
  // Each step's body statement carries that step.
  std::int64_t body = 0;
  for (std::size_t i = 0; i < l.program.body.size(); ++i)
    if (std::holds_alternative<Assign>(l.program.body[i].kind)) {
      EXPECT_EQ(l.step_of[i], body++);
    }
  EXPECT_EQ(body, 8);
  expect_round_trip(l.program);
}

TEST(Lower, AStepsGridPointIsRowMajorWithTheLastAxisFastestOnTpu) {
  Lowered l;
  l.grid = {2, 4};
  EXPECT_EQ(l.point(0), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(l.point(5), (std::vector<std::int64_t>{1, 1}));
  l.grid = {4, 4, 10};
  EXPECT_EQ(l.point(11), (std::vector<std::int64_t>{0, 1, 1}));
  l.grid = {};
  EXPECT_EQ(l.point(0), (std::vector<std::int64_t>{}));
}

namespace {

const char *kCtaMatmul = R"(kernel mm:
    grid = (2, 2, 3)
    dimension_semantics = (parallel, parallel, sequential)
    target = h100
    max_concurrent_steps = 2
    delay_release = 1
    in  a: bf16[128, 96]  block=(64, 32)  index=(i, j, k) -> (i, k)
    in  b: bf16[96, 128]  block=(32, 64)  index=(i, j, k) -> (k, j)
    out o: f32[128, 128]  block=(64, 64)  index=(i, j, k) -> (i, j)
    scratch acc: f32[64, 64]  memory_space=acc
    body:
        acc[...] += dot(a[...], b[...])
        when program_id(2) == 2:
            o[...] = acc[...]
)";

/// The statements of the CTA sections: each starts at an `acc[...] = zeros`.
std::vector<std::vector<std::string>> cta_sections(const std::vector<std::string> &v) {
  std::vector<std::vector<std::string>> out;
  for (auto &s : v) {
    if (s == "acc[...] = zeros") out.emplace_back();
    if (out.empty()) out.emplace_back();
    out.back().push_back(s);
  }
  return out;
}

} // namespace

TEST(LowerGpu, RunsOneCompletePipelinePerCtaInCtaOrderEachStartingItsAccAtZero) {
  auto l = lowered(kCtaMatmul);
  auto v = lines(l.program);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front(), "acc[...] = zeros");
  auto ctas = cta_sections(v);
  ASSERT_EQ(ctas.size(), 4u);
  const char *regions[] = {"o[0:64, 0:64]", "o[0:64, 64:128]", "o[64:128, 0:64]", "o[64:128, 64:128]"};
  for (std::size_t c = 0; c < 4; ++c) {
    const auto &s = ctas[c];
    // Its own prologue: steps 0 and 1 into slots 0 and 1, then one refill
    // (delay_release = 1: step 2 into slot 0 after body(1)).
    EXPECT_EQ(count_prefix(s, "copy_in_start(a["), 3) << c;
    EXPECT_EQ(count_prefix(s, "copy_in_start(b["), 3) << c;
    EXPECT_EQ(count_prefix(s, "copy_in_wait("), 6) << c;
    EXPECT_EQ(count_prefix(s, "wgmma(acc, "), 3) << c;
    // The output does not move within the CTA: stored once after the loop,
    // from the last step's slot (3 - 1) % 2 = 0, and waited before the next CTA.
    EXPECT_EQ(count_prefix(s, "copy_out_start("), 1) << c;
    EXPECT_EQ(count_prefix(s, std::string("copy_out_start(o_smem[0], ") + regions[c] + ")"), 1) << c;
    EXPECT_EQ(s.back(), "copy_out_wait(o_smem[0])") << c;
  }
  // Every CTA but the first starts with shared memory of its own: each slot
  // undefined again, whatever the previous CTA left in it.
  for (std::size_t c = 0; c < 4; ++c)
    for (const char *slot : {"a_smem[0]", "a_smem[1]", "b_smem[0]", "b_smem[1]", "o_smem[0]", "o_smem[1]"})
      EXPECT_EQ(count_prefix(ctas[c], std::string(slot) + " = undefined"), c > 0 ? 1 : 0) << c << slot;
  // The first CTA's slots restart in the second: its first copy is step 0 into slot 0.
  EXPECT_EQ(ctas[1][7], "copy_in_start(a[0:64, 0:32], a_smem[0])");
  EXPECT_EQ(print(*l.program.buffer("a_smem")->slots), "2");
  EXPECT_EQ(l.program.buffer("acc")->kind, BufferKind::acc);
  expect_round_trip(l.program);
}

TEST(LowerGpu, WithoutDimensionSemanticsEveryAxisIsACtaOfOneStepWithOneSlot) {
  auto l = lowered(R"(kernel ew:
    grid = (2, 3)
    target = h200
    max_concurrent_steps = 4
    in  x: f32[128, 384]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[128, 384]  block=(64, 128)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...] + 1
)");
  auto v = lines(l.program);
  // M = 4 is clipped to the one step of each CTA.
  EXPECT_EQ(print(*l.program.buffer("x_smem")->slots), "1");
  EXPECT_EQ(count_prefix(v, "copy_in_start(x["), 6);
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_smem[0], "), 6);
  EXPECT_EQ(count_prefix(v, "copy_out_wait(o_smem[0])"), 6);
  // Each CTA is complete before the next starts.
  EXPECT_EQ(v[0], "copy_in_start(x[0:64, 0:128], x_smem[0])");
  EXPECT_EQ(v[4], "copy_out_wait(o_smem[0])");
  EXPECT_EQ(v[5], "x_smem[0] = undefined");
  EXPECT_EQ(v[6], "o_smem[0] = undefined");
  EXPECT_EQ(v[7], "copy_in_start(x[0:64, 128:256], x_smem[0])");
  expect_round_trip(l.program);
}

TEST(LowerGpu, CopiesAMovingOutputAtItsFirstVisitWithinTheCta) {
  auto l = lowered(R"(kernel mv:
    grid = (2, 4)
    dimension_semantics = (parallel, sequential)
    target = h100
    max_concurrent_steps = 2
    in  x: f32[128, 512]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[128, 256]  block=(64, 128)  index=(i, j) -> (i, j // 2)
    body:
        o[...] = x[...]
)");
  auto v = lines(l.program);
  // Blocks (i, 0) and (i, 1) are each copied out at their first visit
  // (steps 0 and 2, slots 0 and 0) and at the last step (slot 1).
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_smem[0], o[0:64, 0:128])"), 1);
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_smem[0], o[0:64, 128:256])"), 1);
  EXPECT_EQ(count_prefix(v, "copy_out_start(o_smem[1], o[0:64, 128:256])"), 1);
  EXPECT_EQ(count_prefix(v, "copy_out_start("), 6);
  EXPECT_EQ(count_prefix(v, "copy_out_wait("), 6);
  expect_round_trip(l.program);
}

TEST(LowerGpu, WithOneSlotAWriteBackWaitedWithinItsVisitKeepsTheSlot) {
  auto l = lowered(R"(kernel mv:
    grid = (4,)
    dimension_semantics = (sequential,)
    target = h100
    max_concurrent_steps = 1
    in  x: f32[256, 128]  block=(64, 128)  index=(j) -> (j, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(j) -> (j // 2, 0)
    body:
        o[...] = x[...]
)");
  auto v = lines(l.program);
  // Copied out at steps 0 (first visit of block 0), 2 (of block 1) and 3
  // (the last step); waited at steps 1 and 3, each within its block's visit,
  // where the TMA store left the slot as it was, and at the end.
  EXPECT_EQ(count_prefix(v, "copy_out_start("), 3);
  EXPECT_EQ(count_prefix(v, "copy_out_wait(o_smem[0], keep=True)"), 2);
  EXPECT_EQ(count_prefix(v, "copy_out_wait(o_smem[0])"), 1);
  expect_round_trip(l.program);
  // With two slots step t has slot t % 2: no wait keeps anything.
  auto two = lowered(R"(kernel mv:
    grid = (4,)
    dimension_semantics = (sequential,)
    target = h100
    max_concurrent_steps = 2
    in  x: f32[256, 128]  block=(64, 128)  index=(j) -> (j, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(j) -> (j // 2, 0)
    body:
        o[...] = x[...]
)");
  for (const auto &line : lines(two.program))
    EXPECT_EQ(line.find("keep=True"), std::string::npos) << line;
}

TEST(LowerGpu, FetchesARaggedInputByACopyThatFillsThePaddingWithZeros) {
  // Mosaic GPU's TMA fills a ragged block's part past the array with zeros;
  // a TPU's DMA leaves it undefined, and a dividing operand has none.
  const std::string kernel = R"(kernel rowsum:
    grid = (2,)
    dimension_semantics = (parallel,)
    target = TARGET
    in  x: f32[128, 100]  block=(64, 128)  index=(i) -> (i, 0)
    in  w: f32[128, 128]  block=(64, 128)  index=(i) -> (i, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i) -> (i, 0)
    body:
        o[...] = broadcast_to(sum(x[...] * w[...], axis=1, keepdims=True), (64, 128))
)";
  auto with = [&](const std::string &target) {
    std::string k = kernel;
    k.replace(k.find("TARGET"), 6, target);
    return lines(lowered(k).program);
  };
  const auto gpu = with("h100");
  EXPECT_GT(count_prefix(gpu, "copy_in_start(x["), 0);
  for (const auto &line : gpu) {
    if (line.find("copy_in_start(x[") != std::string::npos) {
      EXPECT_NE(line.find(", zeros=True)"), std::string::npos) << line;
    }
    if (line.find("copy_in_start(w[") != std::string::npos) {
      EXPECT_EQ(line.find("zeros="), std::string::npos) << line;
    }
  }
  for (const auto &line : with("tpu_v5e"))
    EXPECT_EQ(line.find("zeros="), std::string::npos) << line;
}

TEST(LowerGpu, AnI32WindowsLoweredProgramReadsBackAsTheSameProgram) {
  // Its slots are left undefined between CTAs (`x_smem[0] = undefined`): an
  // i32 SMEM slot a copy fills holds data, not integer scalar state.
  auto l = lowered(R"(kernel scale_i32_gpu:
    grid = (2,)
    target = h100
    in  x: i32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    out o: i32[16, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] * 3
)");
  expect_round_trip(l.program);
  auto checked = parse_and_validate(SourceFile::from_string("lowered.pk", print(l.program)));
  ASSERT_TRUE(checked.file) << checked.errors.at(0).message << "\n" << print(l.program);
}

TEST(LowerGpu, RunsTheCtasOfATrailingParallelAxisOneAfterAnother) {
  auto l = lowered(R"(kernel colsum:
    grid = (4, 2)
    dimension_semantics = (sequential, parallel)
    target = h100
    max_concurrent_steps = 2
    in  x: f32[256, 256]  block=(64, 128)  index=(i, j) -> (i, j)
    out o: f32[64, 256]   block=(64, 128)  index=(i, j) -> (0, j)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += x[...]
        when program_id(0) == 3:
            o[...] = acc[...]
)");
  auto v = lines(l.program);
  auto ctas = cta_sections(v);
  ASSERT_EQ(ctas.size(), 2u);
  // CTA j = 0 runs i = 0..3 first.
  EXPECT_EQ(count_prefix(ctas[0], "copy_in_start(x["), 4);
  EXPECT_EQ(count_prefix(ctas[0], "copy_in_start(x[192:256, 0:128]"), 1);
  EXPECT_EQ(count_prefix(ctas[0], "copy_out_start(o_smem[1], o[:, 0:128])"), 1);
  EXPECT_EQ(count_prefix(ctas[1], "copy_out_start(o_smem[1], o[:, 128:256])"), 1);
  expect_round_trip(l.program);
}

TEST(LowerGpu, APlainScratchIsSharedMemoryAndItsDotIsNoWgmma) {
  std::string text = kCtaMatmul;
  text.replace(text.find("  memory_space=acc"), std::string("  memory_space=acc").size(), "");
  auto l = lowered(text);
  EXPECT_EQ(l.program.buffer("acc")->kind, BufferKind::smem);
  EXPECT_EQ(count_prefix(lines(l.program), "wgmma"), 0);
  EXPECT_EQ(count_prefix(lines(l.program), "acc[...] = zeros"), 0);
}

TEST(LowerGpu, AnAccScratchOnATpuTargetIsALocatedError) {
  std::vector<Diagnostic> errs;
  LowerOptions o;
  o.target = "tpu_v5e";
  EXPECT_FALSE(lower(kernel(kCtaMatmul), o, errs));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].loc.line, 10);
  EXPECT_NE(errs[0].message.find("memory_space=acc"), std::string::npos);
}

TEST(LowerTpu, AStoreToAWholeAnySpaceOutputIsPrintedAsARefAndParsesBack) {
  Lowered l = lowered(R"(kernel k:
    grid = (1,)
    in  x: f32[16, 128]  block=(16, 128)  index=(i) -> (0, 0)
    out o: f32[16, 128]  memory_space=any
    body:
        o[...] = x[...]
)");
  std::string text = print(l.program);
  EXPECT_NE(text.find("\n    o[...] = x_vmem[0]\n"), std::string::npos) << text;
  auto back = parse(SourceFile::from_string("lowered.pk", text));
  ASSERT_TRUE(back.file) << (back.errors.empty() ? "" : back.errors[0].message);
  EXPECT_EQ(std::get<Program>(back.file->units.at(0)), l.program);
}

TEST(LowerUnrolled, ALoopBoundThatNamesAnIntegerLocalIsDecidedAtEachGridStep) {
  auto l = lowered(R"(kernel loop_local:
    param n = 512
    param bs = 128
    grid = (2,)
    in  x: f32[2, n]  block=(None, n)  index=(i) -> (i, 0)
    out o: f32[2, n]  block=(None, n)  index=(i) -> (i, 0)
    body:
        chunks = n // bs
        when chunks > 2:
            for t in range(chunks):
                o[ds(t * bs, bs)] = x[ds(t * bs, bs)] * 2.0
)");
  // Two grid steps, four iterations each.
  const auto ls = lines(l.program);
  EXPECT_EQ(std::count_if(ls.begin(), ls.end(),
                          [](const std::string &s) { return s.find("* 2.0") != std::string::npos; }),
            8);
}

TEST(LowerTpu, APrintedProgramWithDsWindowsLocalSlicesAndARaggedLastBlockValidatesBack) {
  // What `pipecheck lower` prints is a pipeline a person can check again.
  const char *text = R"(kernel k:
    grid = (2,)
    in  x: f32[12, 128]  block=(8, 128)  index=(i) -> (i, 0)
    in  w: f32[16, 128]  block=(16, 128)  index=(i) -> (0, 0)
    out o: f32[12, 128]  block=(8, 128)  index=(i) -> (i, 0)
    body:
        t = w[ds(program_id(0) * 8, 8), :] * 2.0
        o[...] = x[...] + t[0:8, :]
)";
  for (bool unroll : {false, true}) {
    LowerOptions o;
    o.unroll = unroll;
    const std::string printed = print(lowered(text, o).program);
    auto back = parse_and_validate(SourceFile::from_string("lowered.pk", printed));
    EXPECT_TRUE(back.errors.empty()) << back.errors.at(0).message << "\n" << printed;
  }
}
