// A nested emit_pipeline in a kernel body (issue 11): the form parses and
// prints back, what pipecheck does not accept is a located error, its
// flattened kernel is the sequential meaning the rules and the oracle use,
// and the lowering runs the inner pipeline through the top-level Scheduler.
#include "spec/lower.hpp"
#include "spec/nested.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

const char *kRows = R"(kernel rows:
    param m = 16
    param n = 128
    param k = 512
    param bm = 8
    param bk = 128
    grid = (m // bm,)
    target = tpu_v5e
    in  x: f32[m, k]  memory_space=any
    in  y: f32[k, n]  memory_space=any
    out o: f32[m, n]  block=(bm, n)  index=(i) -> (i, 0)
    scratch acc: f32[bm, n]
    body:
        r = program_id(0)
        acc[...] = zeros
        emit_pipeline(grid=(k // bk,)):
            in  x: block=(bm, bk)  index=(t) -> (r, t)
            in  y: block=(bk, n)  index=(t) -> (t, 0)
            body:
                acc[...] += dot(x[...], y[...])
        o[...] = acc[...]
)";

const char *kMatmul = R"(kernel mm:
    param m = 256
    param b = 128
    target = tpu_v5e
    in  x: f32[m, m]  memory_space=any
    in  y: f32[m, m]  memory_space=any
    out z: f32[m, m]  memory_space=any
    body:
        emit_pipeline(grid=(m // b, m // b, m // b)):
            in  x: block=(b, b)  index=(i, j, t) -> (i, t)
            in  y: block=(b, b)  index=(i, j, t) -> (t, j)
            out z: block=(b, b)  index=(i, j, t) -> (i, j)
            body:
                when program_id(2) == 0:
                    z[...] = zeros
                z[...] += dot(x[...], y[...])
)";

ParseResult parse_text(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("t.pk", text));
}

KernelSpec kernel_of(const std::string &text) {
  auto r = parse_text(text);
  EXPECT_TRUE(r.file) << (r.errors.empty() ? "" : r.errors[0].message);
  return std::get<KernelSpec>(r.file->units.at(0));
}

std::string first_error(const std::string &text) {
  auto r = parse_text(text);
  if (r.file) return "";
  const auto &e = r.errors.at(0);
  return std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col) + " " + e.message;
}

std::string replace(std::string s, const std::string &from, const std::string &to) {
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

} // namespace

TEST(NestedEmitPipeline, ParsesIntoOneStatementWithItsGridSpecsAndBody) {
  KernelSpec k = kernel_of(kRows);
  ASSERT_EQ(emit_pipeline_index(k), 2);
  const auto &e = std::get<EmitPipeline>(k.body[2].kind);
  ASSERT_EQ(e.grid.size(), 1u);
  ASSERT_EQ(e.specs.size(), 2u);
  EXPECT_EQ(e.specs[0].name, "x");
  EXPECT_EQ(e.specs[0].role, Role::in);
  EXPECT_EQ(e.specs[0].index_map->params, std::vector<std::string>{"t"});
  EXPECT_EQ(e.specs[0].loc.line, 17);
  EXPECT_EQ(e.body.size(), 1u);
}

TEST(NestedEmitPipeline, PrintsBackToTheSameKernel) {
  for (const char *text : {kRows, kMatmul}) {
    auto a = parse_text(text);
    ASSERT_TRUE(a.file);
    const std::string printed = print(*a.file);
    auto b = parse_text(printed);
    ASSERT_TRUE(b.file) << printed << (b.errors.empty() ? "" : b.errors[0].message);
    EXPECT_EQ(*a.file, *b.file) << printed;
    EXPECT_EQ(print(*b.file), printed);
  }
}

TEST(NestedEmitPipeline, ASpecNamingAWindowedOperandIsALocatedError) {
  std::string text = replace(kRows, "in  y: f32[k, n]  memory_space=any", "in  y: f32[k, n]");
  EXPECT_EQ(first_error(text), "18:13 the emit_pipeline stages 'y' from HBM, but it has a window of its own: "
                               "declare it 'memory_space=any'");
}

TEST(NestedEmitPipeline, ASpecNamingNoOperandOrTheWrongRoleIsALocatedError) {
  EXPECT_EQ(first_error(replace(kRows, "in  y: block", "in  w: block")),
            "18:13 'w' is no operand of kernel 'rows'");
  EXPECT_EQ(first_error(replace(kRows, "in  y: block", "out y: block")),
            "18:13 'y' is an 'in' operand of the kernel, not an 'out'");
}

TEST(NestedEmitPipeline, AnEmitPipelineUnderWhenIsNotSupported) {
  std::string text =
      replace(kMatmul, "        emit_pipeline(", "        when m > 0:\n          emit_pipeline(");
  // Re-indent the rest of the pipeline under the `when`.
  text = replace(text, "            in  x:", "              in  x:");
  text = replace(text, "            in  y:", "              in  y:");
  text = replace(text, "            out z:", "              out z:");
  text = replace(text, "            body:", "              body:");
  text =
      replace(text, "                when program_id(2) == 0:", "                  when program_id(2) == 0:");
  text = replace(text, "                    z[...] = zeros", "                      z[...] = zeros");
  text = replace(text, "                z[...] += dot", "                  z[...] += dot");
  EXPECT_EQ(first_error(text).substr(0, 42), "10:11 not supported: an emit_pipeline unde");
}

TEST(NestedEmitPipeline, AnEmitPipelineInsideAnInnerBodyIsNotSupported) {
  std::string text = replace(kMatmul, "                z[...] += dot(x[...], y[...])",
                             "                z[...] += dot(x[...], y[...])\n"
                             "                emit_pipeline(grid=(2,)):\n"
                             "                    body:\n"
                             "                        z[...] = zeros");
  EXPECT_EQ(first_error(text).substr(0, 61), "17:17 not supported: an emit_pipeline inside an emit_pipeline");
}

TEST(NestedEmitPipeline, AGpuTargetAndAGridOfRankFiveAreNotSupported) {
  EXPECT_EQ(first_error(replace(kMatmul, "target = tpu_v5e", "target = h100")).substr(0, 60),
            "9:9 not supported: emit_pipeline nested in a kernel body nee");
  std::string five = replace(kMatmul, "grid=(m // b, m // b, m // b)", "grid=(1, 1, 1, 1, 1)");
  EXPECT_EQ(first_error(five), "9:41 not supported: an emit_pipeline grid of rank 5 (at most 4)");
}

TEST(NestedEmitPipeline, AGridExtentFromABodyLocalIsNotSupportedAndAnUndeclaredNameIsUnknown) {
  // `r` is the outer grid index (a run-time extent); `kk` is declared nowhere: a typo, not a feature.
  EXPECT_EQ(
      first_error(replace(kRows, "grid=(k // bk,)", "grid=(r + 1,)")),
      "16:31 not supported: an emit_pipeline grid extent that is not made of params and constants ('r + 1')");
  EXPECT_EQ(first_error(replace(kRows, "grid=(k // bk,)", "grid=(kk,)")),
            "16:29 unknown name 'kk' in the emit_pipeline's grid (its extents are params and constants)");
}

TEST(NestedEmitPipeline, AStatementOutsideThePipelineNamingAStagedOperandIsNotSupported) {
  std::string text =
      replace(kRows, "        o[...] = acc[...]", "        o[...] = acc[...]\n        s = x[0]");
  EXPECT_EQ(
      first_error(text),
      "22:9 not supported: 'x' is staged by the emit_pipeline; the body's other statements may not use it");
}

TEST(NestedEmitPipeline, ALocalBeforeThePipelineReadingWhatItsBodyWritesIsNotSupported) {
  // Pallas binds t once per outer step; the flattened kernel would bind it
  // at every inner point, after the inner body accumulated into acc.
  std::string text = replace(kRows, "        acc[...] = zeros\n",
                             "        acc[...] = zeros\n        t = acc[...] + 1.0\n        u = t * 2\n");
  text = replace(text, "        o[...] = acc[...]", "        o[...] = acc[...] + u");
  EXPECT_EQ(first_error(text),
            "16:9 not supported: 't' reads 'acc', which the emit_pipeline's inner body writes: pipecheck "
            "evaluates a local bound before an emit_pipeline at every inner grid point, not once (store the "
            "value into a scratch instead, or bind it after the emit_pipeline)");
  // Through another local, and a write by a later statement before it.
  std::string through =
      replace(text, "        t = acc[...] + 1.0\n", "        t = 1.0\n        v = acc[...]\n");
  through = replace(through, "u = t * 2", "u = v * 2");
  EXPECT_EQ(first_error(through).substr(0, 74),
            "17:9 not supported: 'v' reads 'acc', which the emit_pipeline's inner body ");
  std::string later =
      replace(kRows, "        r = program_id(0)\n", "        r = program_id(0)\n        s = o[0, 0]\n");
  later =
      replace(later, "        acc[...] = zeros\n", "        acc[...] = zeros\n        o[...] = zeros + s\n");
  EXPECT_EQ(
      first_error(later).substr(0, 97),
      "15:9 not supported: 's' reads 'o', which the statement at line 17 writes before the emit_pipeline");
  // Its twin: the value held in a scratch is stored once, and an integer
  // local of the outer grid point is what the inner maps read.
  std::string twin = replace(kRows, "    scratch acc: f32[bm, n]\n",
                             "    scratch acc: f32[bm, n]\n    scratch t: f32[bm, n]\n");
  twin = replace(twin, "        acc[...] = zeros\n",
                 "        acc[...] = zeros\n        t[...] = acc[...] + 1.0\n");
  twin = replace(twin, "        o[...] = acc[...]", "        o[...] = acc[...] + t[...]");
  EXPECT_EQ(first_error(twin), "");
  // What an inner copy writes is its destination ref, not the locals that
  // index it: a local reading such an index is no error.
  std::string indexed = replace(kRows, "    scratch acc: f32[bm, n]\n",
                                "    scratch acc: f32[bm, n]\n    scratch buf: f32[2, bm, n]\n");
  indexed = replace(indexed, "        acc[...] = zeros\n",
                    "        acc[...] = zeros\n        s = r % 2\n        q = s + 1\n");
  indexed =
      replace(indexed, "                acc[...] += dot(x[...], y[...])",
              "                acc[...] += dot(x[...], y[...])\n                sync_copy(acc, buf[s])");
  indexed = replace(indexed, "        o[...] = acc[...]", "        o[...] = acc[...] + buf[q - 1]");
  EXPECT_EQ(first_error(indexed), "");
}

TEST(NestedEmitPipeline, AnInnerBodyTypeErrorIsLocatedInTheInnerBody) {
  std::string text = replace(kRows, "acc[...] += dot(x[...], y[...])", "acc[...] += y[...]");
  auto r = parse_text(text);
  ASSERT_FALSE(r.file);
  EXPECT_EQ(r.errors.at(0).loc.line, 20);
}

TEST(FlattenNested, TheGridIsTheOuterThenTheInnerAndStagedOperandsGetTheInnerBlockSpecs) {
  KernelSpec f = flatten_nested(kernel_of(kRows));
  ASSERT_TRUE(f.grid);
  ASSERT_EQ(f.grid->size(), 2u);
  EXPECT_EQ(print((*f.grid)[1]), "k // bk");
  const Operand *x = f.operand("x");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->memory_space, MemorySpace::vmem);
  EXPECT_EQ(x->index_map->params, (std::vector<std::string>{"outer0", "t"}));
  // The closure `r = program_id(0)` is the outer index.
  EXPECT_EQ(print(x->index_map->results[0]), "outer0");
  // The outer window ignores the inner index.
  EXPECT_EQ(f.operand("o")->index_map->params.size(), 2u);
}

TEST(FlattenNested, StatementsBeforeRunAtTheFirstInnerPointAndAfterAtTheLast) {
  KernelSpec f = flatten_nested(kernel_of(kRows));
  ASSERT_EQ(f.body.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<Let>(f.body[0].kind)); // r = program_id(0), unguarded
  const auto &before = std::get<If>(f.body[1].kind);
  EXPECT_EQ(print(before.cond), "program_id(1) == 0");
  EXPECT_TRUE(std::holds_alternative<Assign>(f.body[2].kind)); // the inner body
  const auto &after = std::get<If>(f.body[3].kind);
  EXPECT_EQ(print(after.cond), "program_id(1) == k // bk - 1");
}

TEST(FlattenNested, ALocalBoundAfterThePipelineIsVisibleToTheStatementsAfterIt) {
  std::string text =
      replace(kRows, "        o[...] = acc[...]\n", "        t = acc[...] * 2\n        o[...] = t\n");
  auto r = parse_text(text);
  ASSERT_TRUE(r.file) << (r.errors.empty() ? "" : r.errors[0].message);
  KernelSpec f = flatten_nested(std::get<KernelSpec>(r.file->units.at(0)));
  EXPECT_EQ(std::get<If>(f.body.back().kind).then_body.size(), 2u);
}

TEST(FlattenNested, ProgramIdInTheInnerBodyIsTheInnerAxis) {
  std::string text = replace(kRows, "        r = program_id(0)\n        acc[...] = zeros\n",
                             "        r = program_id(0)\n        acc[...] = zeros\n");
  text = replace(text, "acc[...] += dot(x[...], y[...])", "acc[...] += dot(x[...], y[...]) * program_id(0)");
  KernelSpec f = flatten_nested(kernel_of(text));
  const auto &a = std::get<Assign>(f.body[2].kind);
  EXPECT_EQ(print(a.value), "dot(x[...], y[...]) * program_id(1)");
}

TEST(LowerNested, AGridlessKernelLowersToTheTopLevelSchedulersProgramForItsPipeline) {
  // One semantics: the kernel whose body is only an emit_pipeline runs the
  // program that the same pipeline as a pallas_call runs.
  KernelSpec k = kernel_of(kMatmul);
  std::vector<Diagnostic> errs;
  auto nested = lower(k, {}, errs);
  ASSERT_TRUE(nested) << (errs.empty() ? "" : errs[0].message);
  auto top = lower(flatten_nested(k), {}, errs);
  ASSERT_TRUE(top) << (errs.empty() ? "" : errs[0].message);
  EXPECT_EQ(nested->program.body, top->program.body) << print(nested->program) << "\n---\n"
                                                     << print(top->program);
  EXPECT_EQ(nested->program.buffers.size(), top->program.buffers.size());
}

TEST(LowerNested, EachOuterStepRunsTheInnerPipelineOverItsOwnRowsAndDeclaresTheRingsOnce) {
  auto low_or = [&] {
    std::vector<Diagnostic> errs;
    return lower(kernel_of(kRows), {}, errs);
  };
  auto low = low_or();
  ASSERT_TRUE(low);
  int rings = 0;
  for (const auto &b : low->program.buffers)
    rings += b.name == "x_vmem" || b.name == "y_vmem";
  EXPECT_EQ(rings, 2);
  const std::string text = print(low->program);
  // Outer step 1 (r = 1) prefetches rows 8:16 of x.
  EXPECT_NE(text.find("copy_in_start(x[8:16, 0:128], x_vmem[0])"), std::string::npos) << text;
  EXPECT_NE(text.find("copy_in_start(x[0:8, 0:128], x_vmem[0])"), std::string::npos) << text;
  // A loop over the 4 inner steps at each of the 2 outer steps.
  int loops = 0;
  for (const auto &st : low->program.body)
    loops += std::holds_alternative<For>(st.kind);
  EXPECT_EQ(loops, 2);
  // The inner body's scratch is the kernel's.
  EXPECT_NE(text.find("acc[...] += dot(x_vmem["), std::string::npos) << text;
  // It parses back as a pipeline.
  auto back = parse_text(text);
  EXPECT_TRUE(back.file) << (back.errors.empty() ? "" : back.errors[0].message) << text;
}

TEST(LowerNested, AStagedOutputAliasedToAnInputIsWrittenBackIntoTheInputsArray) {
  // The in-place update (input_output_aliases with pl.ANY operands): o is
  // a's array, and the inner pipeline's write-back lands there.
  std::vector<Diagnostic> errs;
  auto low = lower(kernel_of(R"(kernel inplace:
    target = tpu_v5e
    in  a: f32[64, 128]  memory_space=any
    out o: f32[64, 128]  memory_space=any
    alias a -> o
    body:
        emit_pipeline(grid=(8,)):
            in  a: block=(8, 128)  index=(t) -> (t, 0)
            out o: block=(8, 128)  index=(t) -> (t, 0)
            body:
                o[...] = a[...] * 2.0
)"),
                   {}, errs);
  ASSERT_TRUE(low) << (errs.empty() ? "" : errs[0].message);
  EXPECT_EQ(low->program.buffer("o"), nullptr);
  const std::string text = print(low->program);
  EXPECT_NE(text.find("copy_out_start(o_vmem[o_unit % 2], a["), std::string::npos) << text;
  auto back = parse_text(text);
  EXPECT_TRUE(back.file) << (back.errors.empty() ? "" : back.errors[0].message) << text;
}

TEST(LowerNested, AHandWrittenPipelineWithAnEmitPipelineIsALocatedError) {
  const char *text = R"(pipeline p:
    hbm A: f32[8]
    emit_pipeline(grid=(2,)):
        body:
            A[0:1] = zeros
)";
  EXPECT_EQ(first_error(text),
            "3:5 an emit_pipeline belongs in a kernel body; a pipeline writes its copies itself");
}
