#pragma once
/// RapidCheck generators of `.pk` IR in canonical form (what the parser
/// produces), for the printer round-trip property and the fuzzers.

#include "spec/ir.hpp"

#include <rapidcheck.h>

#include <string>
#include <vector>

namespace pipecheck::properties {

namespace gen_detail {

inline rc::Gen<std::string> name() {
  return rc::gen::element<std::string>("a", "b", "x", "y", "o", "acc", "N", "K", "bm", "i", "j", "kk", "s",
                                       "cur", "nxt", "X", "Y", "A", "tmp_1", "range2");
}

inline rc::Gen<spec::Expr> int_expr(int depth);

inline rc::Gen<spec::Expr> leaf() {
  return rc::gen::oneOf(rc::gen::map(rc::gen::inRange<std::int64_t>(-1000, 100000),
                                     [](std::int64_t v) { return spec::Expr::integer(v); }),
                        rc::gen::map(name(), [](std::string n) { return spec::Expr::var(n); }));
}

inline rc::Gen<spec::Expr> int_expr(int depth) {
  using spec::Expr;
  using spec::Op;
  if (depth <= 0) return leaf();
  auto sub = rc::gen::lazy([depth] { return int_expr(depth - 1); });
  return rc::gen::oneOf(
      leaf(),
      rc::gen::apply([](Op op, Expr a, Expr b) { return Expr::binary(op, std::move(a), std::move(b)); },
                     rc::gen::element(Op::Add, Op::Sub, Op::Mul, Op::Div, Op::FloorDiv, Op::Mod, Op::Pow,
                                      Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::And, Op::Or),
                     sub, sub),
      // A negated literal is itself a literal, so only non-literals are negated.
      rc::gen::map(sub,
                   [](Expr a) {
                     if (a.op == Op::Int || a.op == Op::Float) return a;
                     return Expr::unary(Op::Neg, std::move(a));
                   }),
      rc::gen::map(sub, [](Expr a) { return Expr::unary(Op::Not, std::move(a)); }),
      rc::gen::apply(
          [](std::string fn, Expr a, Expr b) {
            return Expr::call(fn, {std::move(a), std::move(b)});
          },
          rc::gen::element<std::string>("cdiv", "min", "max"), sub, sub));
}

inline rc::Gen<spec::Expr> subscript() {
  using spec::Expr;
  using spec::Op;
  auto bound = rc::gen::oneOf(rc::gen::just(Expr::leaf(Op::None)), int_expr(1));
  return rc::gen::oneOf(
      rc::gen::just(Expr::leaf(Op::Ellipsis)), int_expr(1),
      rc::gen::apply([](Expr lo, Expr hi) { return Expr::binary(Op::Slice, lo, hi); }, bound, bound));
}

inline rc::Gen<spec::Expr> ref() {
  return rc::gen::apply(
      [](std::string n, std::vector<spec::Expr> s) { return spec::Expr::ref(n, s); }, name(),
      rc::gen::resize(3, rc::gen::nonEmpty(rc::gen::container<std::vector<spec::Expr>>(subscript()))));
}

inline rc::Gen<spec::Expr> tensor_expr(int depth) {
  using spec::Expr;
  using spec::Op;
  auto base = rc::gen::oneOf(
      ref(), rc::gen::just(Expr::leaf(Op::Zeros)),
      rc::gen::map(rc::gen::inRange(-50, 50), [](int v) { return Expr::floating(v / 4.0); }), leaf());
  if (depth <= 0) return base;
  auto sub = rc::gen::lazy([depth] { return tensor_expr(depth - 1); });
  return rc::gen::oneOf(
      base,
      rc::gen::apply([](Op op, Expr a, Expr b) { return Expr::binary(op, std::move(a), std::move(b)); },
                     rc::gen::element(Op::Add, Op::Sub, Op::Mul, Op::Div), sub, sub),
      rc::gen::apply([](std::string fn, Expr a) { return Expr::call(fn, {std::move(a)}); },
                     rc::gen::element<std::string>("exp", "neg", "transpose", "full"), sub),
      rc::gen::apply(
          [](std::string fn, Expr a, Expr b) {
            return Expr::call(fn, {std::move(a), std::move(b)});
          },
          rc::gen::element<std::string>("dot", "maximum", "minimum"), sub, sub),
      rc::gen::apply(
          [](std::string fn, Expr a, int axis) {
            Expr c = Expr::call(fn, {std::move(a), Expr::integer(axis)});
            c.kwarg_names = {"axis"};
            return c;
          },
          rc::gen::element<std::string>("sum", "max"), sub, rc::gen::inRange(0, 3)),
      rc::gen::apply(
          [](Expr a, spec::DType d) {
            return Expr::call("cast", {std::move(a), Expr::var(spec::to_string(d))});
          },
          sub, rc::gen::element(spec::DType::f32, spec::DType::bf16, spec::DType::i32)));
}

inline rc::Gen<spec::Stmt> stmt(int depth, bool kernel);

inline rc::Gen<spec::Block> block(int depth, bool kernel) {
  return rc::gen::resize(3, rc::gen::nonEmpty(rc::gen::container<spec::Block>(
                                rc::gen::lazy([depth, kernel] { return stmt(depth - 1, kernel); }))));
}

inline spec::Stmt wrap(auto k) {
  spec::Stmt s;
  s.kind = std::move(k);
  return s;
}

inline rc::Gen<spec::Stmt> stmt(int depth, bool kernel) {
  using namespace spec;
  auto g_assign = (rc::gen::apply(
      [](Expr t, bool acc, Expr v) {
        return wrap(Assign{t, acc, v});
      },
      ref(), rc::gen::arbitrary<bool>(), tensor_expr(2)));
  auto g_let = rc::gen::apply([](std::string n, Expr v) { return wrap(Let{n, v}); }, name(), tensor_expr(2));
  auto slot = rc::gen::oneOf(ref(), rc::gen::map(name(), [](std::string n) { return Expr::var(n); }));
  auto g_copy = (rc::gen::apply(
      [](CopyKind k, Expr a, Expr b) {
        Copy c{k, a, b};
        if (k == CopyKind::in_wait) c.src = Expr::leaf(Op::None);
        if (k == CopyKind::out_wait) c.dst = Expr::leaf(Op::None);
        return wrap(c);
      },
      rc::gen::element(CopyKind::in_start, CopyKind::in_wait, CopyKind::out_start, CopyKind::out_wait), slot,
      slot));
  auto g_wgmma = rc::gen::apply(
      [](Expr c, Expr a, Expr b) {
        return wrap(Wgmma{c, a, b});
      },
      slot, slot, slot);
  auto g_wait = rc::gen::map(rc::gen::inRange(0, 4), [](int n) { return wrap(WgmmaWait{Expr::integer(n)}); });
  if (depth <= 0)
    return rc::gen::weightedOneOf<Stmt>({{3, g_assign}, {2, g_let}, {1, g_copy}, {1, g_wgmma}, {1, g_wait}});
  {
    auto g_if = (rc::gen::apply(
        [kernel](Expr c, Block t, Block e, bool has_else) {
          If f{kernel, c, t, {}};
          if (!kernel && has_else) f.else_body = e;
          return wrap(f);
        },
        int_expr(2), block(depth, kernel), block(depth, kernel), rc::gen::arbitrary<bool>()));
    auto g_for = (rc::gen::apply(
        [](std::string v, Expr lo, Expr hi, Block b) {
          return wrap(For{v, lo, hi, b, false});
        },
        name(), int_expr(1), int_expr(1), block(depth, kernel)));
    return rc::gen::weightedOneOf<Stmt>(
        {{3, g_assign}, {2, g_let}, {1, g_copy}, {1, g_wgmma}, {1, g_wait}, {1, g_if}, {1, g_for}});
  }
}

inline rc::Gen<spec::Param> param() {
  using namespace spec;
  return rc::gen::apply(
      [](std::string n, int kind, Expr v, std::vector<Expr> dom, Expr lo, Expr hi) {
        Param p;
        p.name = n;
        if (kind == 0) p.value = v;
        if (kind == 1) {
          p.value = v;
          p.domain = dom;
        }
        if (kind == 2) p.lo = lo;
        if (kind == 3) {
          p.lo = lo;
          p.hi = hi;
        }
        return p;
      },
      name(), rc::gen::inRange(0, 4), int_expr(1),
      rc::gen::resize(3, rc::gen::nonEmpty(rc::gen::container<std::vector<Expr>>(leaf()))), int_expr(1),
      int_expr(1));
}

} // namespace gen_detail

/// A random kernel spec in canonical form (structurally valid for the parser;
/// not necessarily valid for validation).
inline rc::Gen<spec::KernelSpec> kernel_spec() {
  using namespace spec;
  using namespace gen_detail;
  auto operand = rc::gen::apply(
      [](Role r, std::string n, DType d, std::vector<Expr> shape, bool has_block, std::vector<Expr> block,
         bool has_index, std::vector<std::string> ps, std::vector<Expr> res, int buffered, bool lookahead,
         bool revisit_any, MemorySpace ms) {
        Operand o;
        o.role = r;
        o.name = n;
        o.dtype = d;
        o.shape = shape;
        if (has_block) {
          std::vector<std::optional<Expr>> b;
          for (std::size_t i = 0; i < block.size(); ++i)
            b.push_back(i % 3 == 1 ? std::nullopt : std::optional<Expr>(block[i]));
          o.block_shape = b;
        }
        if (has_index) o.index_map = IndexMap{ps, res};
        if (buffered > 0) {
          o.pipeline_mode.buffer_count = Expr::integer(buffered);
          o.pipeline_mode.lookahead = lookahead;
        }
        if (revisit_any) o.pipeline_mode.revisit = Revisit::any;
        o.memory_space = ms;
        return o;
      },
      rc::gen::element(Role::in, Role::out, Role::scratch), name(),
      rc::gen::element(DType::f32, DType::bf16, DType::f16, DType::i32, DType::i8, DType::boolean),
      rc::gen::resize(4, rc::gen::container<std::vector<Expr>>(int_expr(1))), rc::gen::arbitrary<bool>(),
      rc::gen::resize(4, rc::gen::container<std::vector<Expr>>(int_expr(1))), rc::gen::arbitrary<bool>(),
      rc::gen::resize(4, rc::gen::container<std::vector<std::string>>(name())),
      rc::gen::resize(4, rc::gen::container<std::vector<Expr>>(int_expr(2))), rc::gen::inRange(0, 4),
      rc::gen::arbitrary<bool>(), rc::gen::arbitrary<bool>(),
      rc::gen::element(MemorySpace::vmem, MemorySpace::any, MemorySpace::smem, MemorySpace::hbm));
  auto kernel = rc::gen::apply(
      [](std::string n, std::vector<Param> ps, bool has_grid, std::vector<Expr> grid,
         std::vector<DimSemantics> sem, std::vector<Operand> ops,
         std::vector<std::pair<std::string, std::string>> al, Block body, std::string target) {
        KernelSpec k;
        k.name = n;
        k.params = ps;
        if (has_grid) {
          k.grid = grid;
          k.dimension_semantics = sem;
        }
        k.settings.push_back(Setting{"target", Expr::var(target), {}, {}});
        k.settings.push_back(Setting{"vmem_limit_bytes",
                                     Expr::binary(Op::Mul, Expr::integer(64),
                                                  Expr::binary(Op::Pow, Expr::integer(2), Expr::integer(20))),
                                     {},
                                     {}});
        k.operands = ops;
        for (auto &[a, b] : al)
          k.aliases.push_back(Alias{a, b, {}, {}});
        k.body = body;
        return k;
      },
      name(), rc::gen::resize(3, rc::gen::container<std::vector<Param>>(param())), rc::gen::arbitrary<bool>(),
      rc::gen::resize(4, rc::gen::container<std::vector<Expr>>(int_expr(2))),
      rc::gen::resize(4, rc::gen::container<std::vector<DimSemantics>>(rc::gen::element(
                             DimSemantics::parallel, DimSemantics::arbitrary, DimSemantics::sequential))),
      rc::gen::resize(4, rc::gen::container<std::vector<Operand>>(operand)),
      rc::gen::resize(2, rc::gen::container<std::vector<std::pair<std::string, std::string>>>(
                             rc::gen::pair(name(), name()))),
      block(2, true), rc::gen::element<std::string>("tpu_v5e", "h200"));
  // A `reference:` section (none when empty): bindings of tensor expressions.
  auto let = rc::gen::apply([](std::string n, Expr v) { return wrap(Let{n, v}); }, name(), tensor_expr(2));
  return rc::gen::apply(
      [](KernelSpec k, Block reference) {
        k.reference = std::move(reference);
        return k;
      },
      kernel, rc::gen::resize(3, rc::gen::container<Block>(let)));
}

/// A random pipeline in canonical form.
inline rc::Gen<spec::Program> program() {
  using namespace spec;
  using namespace gen_detail;
  auto buffer = rc::gen::apply(
      [](BufferKind k, std::string n, bool slotted, int slots, DType d, std::vector<Expr> shape) {
        Buffer b;
        b.kind = k;
        b.name = n;
        if (slotted) b.slots = Expr::integer(slots);
        b.dtype = d;
        b.shape = shape;
        return b;
      },
      rc::gen::element(BufferKind::hbm, BufferKind::sram, BufferKind::smem, BufferKind::acc), name(),
      rc::gen::arbitrary<bool>(), rc::gen::inRange(1, 5), rc::gen::element(DType::f32, DType::bf16),
      rc::gen::resize(3, rc::gen::container<std::vector<Expr>>(int_expr(1))));
  return rc::gen::apply(
      [](std::string n, std::vector<Param> ps, std::vector<Buffer> bs, Block body) {
        Program p;
        p.name = n;
        p.params = ps;
        p.buffers = bs;
        p.body = body;
        return p;
      },
      name(), rc::gen::resize(3, rc::gen::container<std::vector<Param>>(param())),
      rc::gen::resize(4, rc::gen::container<std::vector<Buffer>>(buffer)), block(3, false));
}

} // namespace pipecheck::properties
