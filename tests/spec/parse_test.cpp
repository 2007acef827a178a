#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>

using namespace pipecheck::spec;

namespace {

File parse_ok(const std::string &text) {
  auto r = parse(SourceFile::from_string("t.pk", text));
  if (!r.file) {
    ADD_FAILURE() << "parse failed: " << render(SourceFile::from_string("t.pk", text), r.errors.at(0));
    return {};
  }
  return *r.file;
}

const KernelSpec &kernel(const File &f, std::size_t i = 0) { return std::get<KernelSpec>(f.units.at(i)); }
const Program &program(const File &f, std::size_t i = 0) { return std::get<Program>(f.units.at(i)); }

} // namespace

TEST(ParseKernel, ReadsGridSemanticsOperandsAndBody) {
  File f = parse_ok(R"(kernel correct_sum:
    grid = (4, 4, 8)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (k, i, j)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += x[...]
)");
  const KernelSpec &k = kernel(f);
  EXPECT_EQ(k.name, "correct_sum");
  ASSERT_TRUE(k.grid);
  ASSERT_EQ(k.grid->size(), 3u);
  EXPECT_EQ((*k.grid)[2].int_value, 8);
  ASSERT_TRUE(k.dimension_semantics);
  EXPECT_EQ((*k.dimension_semantics)[2], DimSemantics::arbitrary);
  ASSERT_EQ(k.operands.size(), 2u);
  const Operand &x = k.operands[0];
  EXPECT_EQ(x.role, Role::in);
  EXPECT_EQ(x.dtype, DType::f32);
  ASSERT_TRUE(x.block_shape);
  EXPECT_FALSE((*x.block_shape)[0].has_value());
  EXPECT_EQ((*x.block_shape)[1]->int_value, 256);
  ASSERT_TRUE(x.index_map);
  EXPECT_EQ(x.index_map->params, (std::vector<std::string>{"i", "j", "k"}));
  EXPECT_EQ(print(x.index_map->results[0]), "k");
  EXPECT_EQ(x.loc.line, 4);
  EXPECT_EQ(x.loc.col, 5);
  ASSERT_EQ(k.body.size(), 2u);
  const If &w = std::get<If>(k.body[0].kind);
  EXPECT_TRUE(w.is_when);
  EXPECT_EQ(print(w.cond), "program_id(2) == 0");
  EXPECT_EQ(std::get<Assign>(w.then_body[0].kind).value.op, Op::Zeros);
  const Assign &acc = std::get<Assign>(k.body[1].kind);
  EXPECT_TRUE(acc.accumulate);
  EXPECT_EQ(k.body[1].loc.line, 9);
}

TEST(ParseKernel, ReadsParamsWithValuesDomainsAndBounds) {
  File f = parse_ok(R"(kernel k:
    param m = 4096
    param bm = 256 in {128, 256, 512}
    param n >= 1 <= 64
    grid = (m // bm,)
    in x: f32[m] block=(bm,) index=(i) -> (i)
    out o: f32[m] block=(bm,) index=(i) -> (i)
    body:
        o[...] = x[...]
)");
  const KernelSpec &k = kernel(f);
  ASSERT_EQ(k.params.size(), 3u);
  EXPECT_EQ(k.params[0].value->int_value, 4096);
  EXPECT_EQ(k.params[1].domain.size(), 3u);
  EXPECT_TRUE(k.params[2].is_symbolic());
  EXPECT_EQ(k.params[2].lo->int_value, 1);
  EXPECT_EQ(k.params[2].hi->int_value, 64);
  EXPECT_EQ(print((*k.grid)[0]), "m // bm");
}

TEST(ParseKernel, ReadsOperandOptionsSettingsScratchAndAlias) {
  File f = parse_ok(R"(kernel k:
    grid = (8)
    target = tpu_v5e
    vmem_limit_bytes = 64 * 2**20
    in  x: bf16[1024, 128] block=(128, 128) index=(i) -> (i, 0) buffered=3
    in  y: f32[1024, 128] block=(128, 128) index=(i) -> (i, 0) buffered=(2, lookahead)
    in  h: f32[1024, 128] memory_space=any
    out o: bf16[1024, 128] block=(128, 128) index=(i) -> (i, 0) revisit=any
    scratch acc: f32[128, 128] memory_space=smem
    alias x -> o
    body:
        o[...] = cast(x[...] + y[...], bf16)
)");
  const KernelSpec &k = kernel(f);
  EXPECT_EQ(k.grid->size(), 1u);
  EXPECT_EQ(k.setting("target")->value.name, "tpu_v5e");
  EXPECT_EQ(print(k.setting("vmem_limit_bytes")->value), "64 * 2 ** 20");
  EXPECT_EQ(k.operand("x")->pipeline_mode.buffer_count->int_value, 3);
  EXPECT_TRUE(k.operand("y")->pipeline_mode.lookahead);
  EXPECT_EQ(k.operand("h")->memory_space, MemorySpace::any);
  EXPECT_FALSE(k.operand("h")->block_shape);
  EXPECT_EQ(k.operand("o")->pipeline_mode.revisit, Revisit::any);
  EXPECT_EQ(k.operand("acc")->role, Role::scratch);
  EXPECT_EQ(k.operand("acc")->memory_space, MemorySpace::smem);
  ASSERT_EQ(k.aliases.size(), 1u);
  EXPECT_EQ(k.aliases[0].input, "x");
  EXPECT_EQ(k.aliases[0].output, "o");
}

TEST(ParseKernel, ReadsTensorExpressionsOfFlashAttention) {
  File f = parse_ok(R"(kernel attn:
    grid = (4, 8)
    in q: f32[512, 64] block=(128, 64) index=(i, j) -> (i, 0)
    in kk: f32[1024, 64] block=(128, 64) index=(i, j) -> (j, 0)
    out o: f32[512, 64] block=(128, 64) index=(i, j) -> (i, 0)
    scratch m: f32[128]
    body:
        s = dot(q[...], transpose(kk[...]))
        mx = maximum(m[...], max(s, axis=1))
        p = exp(s - mx)
        l = sum(p, axis=1) / full(2.5) * -inf
        o[:, 0:32] = neg(minimum(p[...], 1e-3))
        m[...] = mx
)");
  const KernelSpec &k = kernel(f);
  ASSERT_EQ(k.body.size(), 6u);
  const Let &s = std::get<Let>(k.body[0].kind);
  EXPECT_EQ(s.name, "s");
  EXPECT_EQ(s.value.name, "dot");
  const Let &mx = std::get<Let>(k.body[1].kind);
  const Expr &red = mx.value.args[1];
  EXPECT_EQ(red.name, "max");
  ASSERT_NE(red.kwarg("axis"), nullptr);
  EXPECT_EQ(red.kwarg("axis")->int_value, 1);
  const Assign &st = std::get<Assign>(k.body[4].kind);
  ASSERT_EQ(st.target.args.size(), 2u);
  EXPECT_EQ(st.target.args[0].op, Op::Slice);
  EXPECT_EQ(st.target.args[0].args[0].op, Op::None);
  EXPECT_EQ(print(st.target), "o[:, 0:32]");
  EXPECT_EQ(print(std::get<Let>(k.body[3].kind).value), "sum(p, axis=1) / full(2.5) * -inf");
}

TEST(ParseKernel, OmittedGridBlockAndIndexStayAbsent) {
  File f = parse_ok(R"(kernel add_matrices:
    in  x: f32[512, 512]
    out z: f32[512, 512]
    body:
        z[...] = x[...] + 1
)");
  const KernelSpec &k = kernel(f);
  EXPECT_FALSE(k.grid);
  EXPECT_FALSE(k.operands[0].block_shape);
  EXPECT_FALSE(k.operands[0].index_map);
}

TEST(ParsePipeline, ReadsBuffersLoopsIfsCopiesAndSlots) {
  File f = parse_ok(R"(pipeline p:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    sram T: f32[512]
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        if i + 1 < N:
            copy_in_start(A[i + 1], X[(i + 1) % 2])
        else:
            T[...] = zeros
        copy_in_wait(X[cur])
        X[cur] = X[cur] + 1
        copy_out_start(X[cur], A[i])
        copy_out_wait(X[cur])
)");
  const Program &p = program(f);
  ASSERT_EQ(p.buffers.size(), 3u);
  EXPECT_EQ(p.buffers[0].kind, BufferKind::hbm);
  EXPECT_FALSE(p.buffers[0].slots);
  EXPECT_EQ(p.buffers[1].slots->int_value, 2);
  EXPECT_FALSE(p.buffers[2].slots);
  ASSERT_EQ(p.body.size(), 2u);
  const Copy &c = std::get<Copy>(p.body[0].kind);
  EXPECT_EQ(c.kind, CopyKind::in_start);
  EXPECT_EQ(print(c.src), "A[0]");
  const For &loop = std::get<For>(p.body[1].kind);
  EXPECT_EQ(loop.var, "i");
  EXPECT_EQ(loop.lo.int_value, 0);
  EXPECT_EQ(print(loop.hi), "N");
  const If &br = std::get<If>(loop.body[1].kind);
  EXPECT_FALSE(br.is_when);
  EXPECT_EQ(br.else_body.size(), 1u);
  const Copy &w = std::get<Copy>(loop.body[2].kind);
  EXPECT_EQ(w.kind, CopyKind::in_wait);
  EXPECT_EQ(print(w.waited()), "X[cur]");
  EXPECT_EQ(std::get<Copy>(loop.body[5].kind).kind, CopyKind::out_wait);
}

TEST(ParsePipeline, ReadsWgmmaAccumulatorsAndRangeWithTwoBounds) {
  File f = parse_ok(R"(pipeline g:
    param K >= 1
    hbm  A: bf16[K, 128, 64]
    hbm  O: f32[128, 128]
    smem a[4]: bf16[128, 64]
    smem o[1]: f32[128, 128]
    acc  c: f32[128, 128]
    for s in range(1, min(4, K)):
        copy_in_start(A[s], a[s])
    wgmma(c, a[0], a[1])
    wgmma_wait(1)
    o[0] = c
    copy_out_start(o[0], O)
)");
  const Program &p = program(f);
  EXPECT_EQ(p.buffers[4].kind, BufferKind::acc);
  const For &loop = std::get<For>(p.body[0].kind);
  EXPECT_EQ(loop.lo.int_value, 1);
  EXPECT_EQ(print(loop.hi), "min(4, K)");
  const Wgmma &w = std::get<Wgmma>(p.body[1].kind);
  EXPECT_EQ(w.acc.op, Op::Name);
  EXPECT_EQ(w.acc.name, "c");
  EXPECT_EQ(print(w.b), "a[1]");
  EXPECT_EQ(std::get<WgmmaWait>(p.body[2].kind).n.int_value, 1);
  EXPECT_EQ(print(std::get<Copy>(p.body[4].kind).dst), "O");
}

TEST(ParsePipeline, ReadsAWgmmaOperandReadTransposedAndPrintsItBack) {
  const std::string text = R"(pipeline g:
    smem q[1]: bf16[64, 32]
    smem k[1]: bf16[64, 32]
    acc  c: f32[64, 64]
    wgmma(c, q[0], k[0], trans_b=True)
    wgmma(c, k[0], k[0], trans_a=True, trans_b=False)
    wgmma_wait(0)
)";
  const File f = parse_ok(text);
  const Program &p = program(f);
  const Wgmma &w = std::get<Wgmma>(p.body[0].kind);
  EXPECT_FALSE(w.trans_a);
  EXPECT_TRUE(w.trans_b);
  const Wgmma &v = std::get<Wgmma>(p.body[1].kind);
  EXPECT_TRUE(v.trans_a);
  EXPECT_FALSE(v.trans_b);
  EXPECT_EQ(print(p.body[0]), "wgmma(c, q[0], k[0], trans_b=True)\n");
  EXPECT_EQ(print(p.body[1]), "wgmma(c, k[0], k[0], trans_a=True)\n");
  auto bad = parse(SourceFile::from_string("t.pk", "pipeline g:\n    acc c: f32[64, 64]\n    wgmma(c, c, c, "
                                                   "transpose=True)\n"));
  ASSERT_FALSE(bad.file);
  EXPECT_NE(bad.errors.at(0).message.find("expected wgmma's trans_a=True or trans_b=True"), std::string::npos)
      << bad.errors.at(0).message;
  EXPECT_EQ(bad.errors.at(0).loc.line, 3);
}

TEST(ParsePipeline, ReadsAWriteBackWaitThatKeepsItsSlot) {
  const File f = parse_ok(R"(pipeline g:
    hbm  O: f32[64]
    smem o[1]: f32[64]
    o[0] = zeros
    copy_out_start(o[0], O)
    copy_out_wait(o[0], keep=True)
    copy_out_start(o[0], O)
    copy_out_wait(o[0])
)");
  const Program &p = program(f);
  EXPECT_TRUE(std::get<Copy>(p.body[2].kind).keep);
  EXPECT_FALSE(std::get<Copy>(p.body[4].kind).keep);
  EXPECT_EQ(print(p.body[2]), "copy_out_wait(o[0], keep=True)\n");
  auto bad =
      parse(SourceFile::from_string("t.pk", "pipeline g:\n    smem o[1]: f32[64]\n    copy_out_wait(o[0], "
                                            "kept=True)\n"));
  ASSERT_FALSE(bad.file);
  EXPECT_NE(bad.errors.at(0).message.find("expected 'keep=True' after the slot of copy_out_wait"),
            std::string::npos)
      << bad.errors.at(0).message;
}

TEST(ParsePipeline, ReadsACopyInThatFillsItsSlotWithZeros) {
  const File f = parse_ok(R"(pipeline g:
    hbm  X: f32[100]
    smem x[1]: f32[128]
    copy_in_start(X, x[0], zeros=True)
    copy_in_wait(x[0])
    copy_in_start(X[0:50], x[0], offset=(10,), zeros=False)
    copy_in_wait(x[0])
)");
  const Program &p = program(f);
  EXPECT_TRUE(std::get<Copy>(p.body[0].kind).zeros);
  EXPECT_FALSE(std::get<Copy>(p.body[2].kind).zeros);
  EXPECT_EQ(print(p.body[0]), "copy_in_start(X, x[0], zeros=True)\n");
  EXPECT_EQ(print(p.body[2]), "copy_in_start(X[0:50], x[0], offset=(10,))\n");
  auto error_of = [](const std::string &line) {
    auto bad = parse(SourceFile::from_string(
        "t.pk", "pipeline g:\n    hbm  X: f32[100]\n    smem x[1]: f32[128]\n" + line + "\n"));
    EXPECT_FALSE(bad.file) << line;
    return bad.file ? std::string() : bad.errors.at(0).message;
  };
  EXPECT_NE(error_of("    copy_out_start(x[0], X, zeros=True)").find("zeros= applies to copy_in_start"),
            std::string::npos);
  EXPECT_NE(error_of("    copy_in_start(X, x[0], zeros=True, zeros=True)").find("zeros= given twice"),
            std::string::npos);
  EXPECT_NE(error_of("    copy_in_start(X, x[0], zeros=1)").find("expected True or False after 'zeros='"),
            std::string::npos);
  EXPECT_NE(error_of("    copy_in_start(X, x[0], zero=True)").find("expected 'offset=(...)' or 'zeros=True'"),
            std::string::npos);
}

TEST(ParseExpressions, FollowPythonPrecedence) {
  File f = parse_ok(R"(pipeline p:
    param N >= 1
    hbm A: f32[N]
    x = 1 + 2 * 3 ** 2
    y = -2 ** 2
    z = (1 + 2) * 3
    w = not 1 < 2 and 3 >= 4 or 5 != 6
    v = 7 // 2 % 3 - -1
)");
  const Program &p = program(f);
  auto val = [&](int i) { return std::get<Let>(p.body[i].kind).value; };
  EXPECT_EQ(val(0).op, Op::Add);
  EXPECT_EQ(val(0).args[1].args[1].op, Op::Pow);
  EXPECT_EQ(val(1).op, Op::Neg);
  EXPECT_EQ(val(1).args[0].op, Op::Pow);
  EXPECT_EQ(val(2).op, Op::Mul);
  EXPECT_EQ(val(3).op, Op::Or);
  EXPECT_EQ(val(3).args[0].op, Op::And);
  EXPECT_EQ(val(3).args[0].args[0].op, Op::Not);
  EXPECT_EQ(val(4).op, Op::Sub);
  EXPECT_EQ(val(4).args[1].op, Op::Int);
  EXPECT_EQ(val(4).args[1].int_value, -1);
}

TEST(ParseComments, CollectsExpectationsWithTheirLines) {
  File f = parse_ok(R"(# header
kernel k:   # expect: verified
    out o: f32[8]  # expect: output-not-covered, index-out-of-bounds (why)
    body:
        o[...] = zeros
)");
  ASSERT_EQ(f.expectations.size(), 3u);
  EXPECT_EQ(f.expectations[0].line, 2);
  EXPECT_EQ(f.expectations[0].rule, "verified");
  EXPECT_EQ(f.expectations[1].line, 3);
  EXPECT_EQ(f.expectations[1].rule, "output-not-covered");
  EXPECT_EQ(f.expectations[2].rule, "index-out-of-bounds");
}

TEST(ParseComments, KeepsLeadingAndTrailingCommentsForFmt) {
  std::string text = R"(# about k
kernel k:  # expect: verified
    # the output
    out o: f32[8]  # trailing
    body:
        # init
        o[...] = zeros  # store
# the end
)";
  File f = parse_ok(text);
  std::string out = print(f);
  for (const char *c :
       {"# about k", "# expect: verified", "# the output", "# trailing", "# init", "# store", "# the end"})
    EXPECT_NE(out.find(c), std::string::npos) << c << " lost in:\n" << out;
}

TEST(ParseLayout, AcceptsTabIndentationUsedConsistently) {
  File f = parse_ok("kernel k:\n\tout o: f32[8]\n\tbody:\n\t\to[...] = zeros\n");
  EXPECT_EQ(kernel(f).body.size(), 1u);
}

TEST(ParseLayout, JoinsLinesInsideBrackets) {
  File f = parse_ok(
      "kernel k:\n    grid = (2,\n            4)\n    out o: f32[8, 8]\n    body:\n        o[...] = zeros\n");
  EXPECT_EQ(kernel(f).grid->size(), 2u);
}

TEST(ParseExpressions, ASubscriptedExpressionIsBoundToALocalJustBeforeItsStatementAndPrintsBackInPlace) {
  const std::string text = R"(kernel k:
    grid = (2,)
    in x: f32[16, 128] block=(8, 128) index=(i) -> (i, 0)
    out o: f32[16, 128] block=(8, 128) index=(i) -> (i, 0)
    body:
        m = max(x[...], axis=1)
        for t in range(sum(iota((2,), 0))[1]):
            o[...] = x[...] - max(x[...], axis=1)[:, None] + (m - m)[:, None]
    reference:
        o = x - max(x, axis=1)[:, None]
)";
  File f = parse_ok(text);
  const KernelSpec &k = kernel(f);
  // m, the loop bound's local, the loop; in the loop the two locals, the store.
  ASSERT_EQ(k.body.size(), 3u);
  const auto &bound = std::get<Let>(k.body[1].kind);
  EXPECT_TRUE(bound.hoisted);
  EXPECT_EQ(print(bound.value), "sum(iota((2,), 0))");
  const auto &loop = std::get<For>(k.body[2].kind);
  EXPECT_EQ(loop.hi.op, Op::Ref);
  EXPECT_EQ(loop.hi.name, bound.name);
  ASSERT_EQ(loop.body.size(), 3u);
  EXPECT_TRUE(std::get<Let>(loop.body[0].kind).hoisted);
  EXPECT_EQ(print(std::get<Let>(loop.body[1].kind).value), "m - m");
  ASSERT_EQ(k.reference.size(), 2u);
  // fmt prints the source back, and what it prints parses to the same kernel.
  EXPECT_EQ(print(f), text);
  EXPECT_EQ(print(parse_ok(print(f))), text);
  // Quoted in a message, the local reads as the expression it stands for.
  {
    const HoistedNames quoted(k.body);
    EXPECT_EQ(print(std::get<Assign>(loop.body[2].kind).value),
              "x[...] - max(x[...], axis=1)[:, None] + (m - m)[:, None]");
  }
  EXPECT_NE(print(std::get<Assign>(loop.body[2].kind).value).find("__sub"), std::string::npos);
}

TEST(ParseExpressions, ASubscriptedExpressionWhereItCannotBeBoundFirstIsALocatedError) {
  const std::string head =
      "kernel k:\n    grid = (2,)\n    in x: f32[16, 128] block=(8, 128) index=(i) -> (i, 0)\n"
      "    out o: f32[16, 128] block=(8, 128) index=(i) -> (i, 0)\n    body:\n";
  struct Case {
    std::string body, where;
  };
  for (const auto &c : std::vector<Case>{
           {"        while max(x[...], axis=1)[0] > 0, bound=2:\n            o[...] = x[...]\n",
            "a 'while' condition"},
           {"        t = 1 and max(x[...], axis=1)[0]\n", "the right side of 'and'"},
           {"        if 1 > 2:\n            o[...] = x[...]\n        elif sum(iota((2,), 0))[1] > 0:\n"
            "            o[...] = x[...]\n",
            "an 'elif' condition"},
           {"        o[...] = max(x[...], axis=1)[:, None][0]\n", "one subscript per expression"}}) {
    auto r = parse(SourceFile::from_string("t.pk", head + c.body));
    ASSERT_FALSE(r.file) << c.body;
    EXPECT_NE(r.errors.at(0).message.find(c.where), std::string::npos) << r.errors.at(0).message;
    EXPECT_GE(r.errors.at(0).loc.line, 6) << c.body;
  }
}
