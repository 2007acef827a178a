// The type checker and the executor walk a body separately, over the same
// typing rules (spec/typecheck.hpp). This runs every corpus kernel body (and
// a few richer bodies) at its first and last grid points and asserts that
// every tensor expression the executor evaluates has exactly the shape,
// dtype and weakness the type checker gave it, so the two walks cannot drift.
#include "executor/interp.hpp"
#include "executor/oracle.hpp"
#include "spec/nested.hpp"
#include "spec/parse.hpp"
#include "spec/prefetch.hpp"
#include "spec/state.hpp"
#include "spec/typecheck.hpp"

#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <functional>

using namespace pipecheck;
namespace fs = std::filesystem;

namespace {

class BlockMemory : public executor::Memory {
public:
  std::map<std::string, std::unique_ptr<executor::HostArray>> arrays;
  executor::HostArray *array(const std::string &n) override {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : it->second.get();
  }
};

// Compares every typed node of `e` with the value the executor computes for it.
int compare_expr(executor::Interp &interp, const spec::Expr &e, const spec::ExprTypes &types,
                 const std::string &where) {
  int n = 0;
  for (const auto &a : e.args)
    n += compare_expr(interp, a, types, where);
  auto it = types.find(&e);
  if (it == types.end()) return n;
  const executor::Value v = interp.eval(executor::rewrite_grid_calls(e));
  const spec::TensorType &t = it->second;
  EXPECT_EQ(v.shape, t.shape) << where << ": '" << e << "' at line " << e.loc.line;
  EXPECT_EQ(v.dtype, t.dtype) << where << ": '" << e << "' at line " << e.loc.line;
  EXPECT_EQ(v.weak, t.weak) << where << ": '" << e << "' at line " << e.loc.line;
  return n + 1;
}

// Runs the body at the first and last grid points on block-sized arrays.
int compare_kernel(const spec::KernelSpec &nested, const std::string &where) {
  // A nested emit_pipeline runs, and is typed, as its flattened kernel.
  const spec::KernelSpec k = spec::flatten_nested(nested);
  const executor::ConcreteKernel c = executor::concretize(k, {}, 1);
  spec::ExprTypes types;
  const auto errs = spec::typecheck(k, c.params, &types);
  for (const auto &e : errs)
    ADD_FAILURE() << where << ":" << e.loc.line << ": " << e.message;
  BlockMemory mem;
  for (const auto &o : c.operands) {
    auto a =
        std::make_unique<executor::HostArray>(o.name, o.dtype, o.windowed ? o.block_view_shape() : o.shape);
    a->fill_random(7);
    mem.arrays[o.name] = std::move(a);
  }
  int compared = 0;
  for (bool last : {false, true}) {
    executor::Interp interp(mem);
    interp.env = c.params;
    for (std::size_t a = 0; a < c.grid.size(); ++a) {
      interp.env[executor::program_id_name(static_cast<int>(a))] = last ? c.grid[a] - 1 : 0;
      interp.env[executor::num_programs_name(static_cast<int>(a))] = c.grid[a];
    }
    std::function<void(const spec::Block &)> walk = [&](const spec::Block &b) {
      for (const auto &s : b) {
        if (const auto *i = std::get_if<spec::If>(&s.kind)) {
          interp.exec_branch(*i, interp.eval_int(executor::rewrite_grid_calls(i->cond)) != 0, walk);
          continue;
        }
        if (const auto *f = std::get_if<spec::For>(&s.kind)) {
          const std::int64_t lo = interp.eval_int(executor::rewrite_grid_calls(f->lo));
          const std::int64_t hi = interp.eval_int(executor::rewrite_grid_calls(f->hi));
          interp.begin_loop(*f);
          for (std::int64_t v = lo; v < hi; ++v) {
            interp.env[f->var] = v;
            walk(f->body);
          }
          interp.env.erase(f->var);
          continue;
        }
        if (const auto *a = std::get_if<spec::Assign>(&s.kind))
          compared += compare_expr(interp, a->value, types, where);
        else if (const auto *l = std::get_if<spec::Let>(&s.kind))
          compared += compare_expr(interp, l->value, types, where);
        interp.exec(executor::rewrite_grid_calls(spec::Block{s}));
      }
    };
    try {
      walk(k.body);
    } catch (const executor::ExecError &e) {
      // An out-of-bounds access (a corpus mutant's) ends the walk: it is the
      // index rule's business, not the typing rules'.
      if (e.kind != executor::ExecError::Kind::fault) throw;
    }
  }
  return compared;
}

int compare_file(const std::string &name, const std::string &text) {
  spec::SourceFile src = spec::SourceFile::from_string(name, text);
  auto parsed = spec::parse_and_validate(src);
  if (!parsed.file) {
    ADD_FAILURE() << spec::render(src, parsed.errors.at(0));
    return 0;
  }
  int compared = 0;
  for (const auto &u : parsed.file->units)
    if (const auto *k = std::get_if<spec::KernelSpec>(&u)) {
      // Scalar prefetch and SMEM state: the executor runs the kernel with
      // contents bound and its state elaborated (spec/state.hpp), so the
      // types are compared on that kernel (one whose state cannot be
      // elaborated does not run).
      const spec::Env params = spec::param_env(k->params);
      const spec::PrefetchSpace space = spec::prefetch_space(*k, params);
      std::string why;
      const auto contents = spec::pick_prefetch(space, 0, why);
      if ((k->prefetches.empty() && !spec::has_state(*k)) || !contents) {
        compared += compare_kernel(*k, name + " " + k->name);
      } else if (auto e = spec::elaborate(*k, space, params, *contents); e.kernel) {
        compared += compare_kernel(*e.kernel, name + " " + k->name);
      }
    }
  return compared;
}

class CorpusTyping : public testing::TestWithParam<std::string> {};

} // namespace

TEST_P(CorpusTyping, TheExecutorComputesTheTypesTheCheckerGives) {
  const std::string rel = GetParam();
  compare_file(rel, testing_corpus::read(fs::path(PIPECHECK_SOURCE_DIR) / rel));
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTyping, testing::ValuesIn(testing_corpus::corpus_files()),
                         testing_corpus::test_name);

TEST(BodyTypes, RicherBodiesGetTheSameTypesFromBothWalks) {
  const int n = compare_file("rich.pk", R"(kernel rich:
    grid = (4, 2)
    in  a: f32[2, 512, 256]  block=(None, 128, 256)  index=(i, j) -> (0, i, 0)
    in  b: bf16[256, 256]  block=(256, 128)  index=(i, j) -> (0, j)
    in  m: i32[512, 128]  block=(128, 128)  index=(i, j) -> (i, 0)
    out o: f32[512, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    out p: bf16[512, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        s = sum(a[...], axis=1)
        r = max(acc[...], axis=-1)
        t = acc[...] * 2 + s - r
        row = program_id(0) * 2 + 1
        q = m[...] // 3 + m[...] % 5 - m[0:1, :] / 2
        o[...] = maximum(t, full(0.5)) / num_programs(1) + q
        o[0, :] = exp(cast(acc[row, :], bf16))
        o[1:3, ...] = transpose(acc[0:128, 0:2])
        p[...] = b[0:128, :] * 2 + exp(m[...]) - neg(b[0:128, 0:1])
        p[...] += minimum(m[...], 7) + 1.5
        p[2, :] = sum(m[...]) + dot(m[0, :], m[...])
)");
  EXPECT_GE(n, 40);
}
