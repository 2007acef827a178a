#include "spec/cut.hpp"

#include "spec/bind.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <set>

namespace pipecheck::spec {

namespace {

bool is_compare(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge;
}

bool is_grid_call(const Expr &e, const char *name) {
  return e.op == Op::Call && e.name == name && e.args.size() == 1 && e.args[0].op == Op::Int;
}

bool mentions_program_id(const Expr &e) {
  if (e.op == Op::Call && e.name == "program_id") return true;
  return std::any_of(e.args.begin(), e.args.end(), mentions_program_id);
}

// An index-map component as c + sum coef[v] * f(v) over the map's lambda
// params: f(v) = v, or, with one param, (v + in) // q or (v + in) % q (a
// block shared by q consecutive steps, `h // group`; a block cycling with
// period q, `j % 2`).
struct Linear {
  std::int64_t c = 0;
  std::map<std::string, std::int64_t> coef;
  enum class Kind { plain, div, mod } kind = Kind::plain;
  std::int64_t q = 1, in = 0;
};

std::optional<Linear> linear(const Expr &e) {
  if (auto v = eval_int(e, {})) return Linear{*v, {}};
  auto both = [&](std::int64_t sign) -> std::optional<Linear> {
    auto a = linear(e.args[0]), b = linear(e.args[1]);
    if (!a || !b) return std::nullopt;
    // (A `//` or `%` term adds only a constant.)
    if ((a->kind != Linear::Kind::plain && !b->coef.empty()) ||
        (b->kind != Linear::Kind::plain && !a->coef.empty()))
      return std::nullopt;
    if (b->kind != Linear::Kind::plain) a->kind = b->kind, a->q = b->q, a->in = b->in;
    if (__builtin_mul_overflow(b->c, sign, &b->c) || __builtin_add_overflow(a->c, b->c, &a->c))
      return std::nullopt;
    for (auto &[v, k] : b->coef) {
      std::int64_t t = 0;
      if (__builtin_mul_overflow(k, sign, &t) || __builtin_add_overflow(a->coef[v], t, &a->coef[v]))
        return std::nullopt;
    }
    return a;
  };
  switch (e.op) {
  case Op::Name: {
    Linear l;
    l.coef[e.name] = 1;
    return l;
  }
  case Op::Add: return both(1);
  case Op::Sub: return both(-1);
  case Op::Neg: {
    auto a = linear(e.args[0]);
    if (!a || a->c == INT64_MIN) return std::nullopt;
    a->c = -a->c;
    for (auto &[v, k] : a->coef)
      k = -k;
    return a;
  }
  case Op::Mul: {
    auto a = linear(e.args[0]), b = linear(e.args[1]);
    if (!a || !b) return std::nullopt;
    if (!a->coef.empty()) std::swap(a, b);
    if (!a->coef.empty()) return std::nullopt; // a product of two variables
    std::int64_t k = a->c;
    if (__builtin_mul_overflow(b->c, k, &b->c)) return std::nullopt;
    for (auto &[v, x] : b->coef)
      if (__builtin_mul_overflow(x, k, &x)) return std::nullopt;
    return b;
  }
  case Op::FloorDiv:
  case Op::Mod: {
    // (v + in) // q, (v + in) % q: one param, coefficient 1, q > 0.
    auto a = linear(e.args[0]);
    auto q = eval_int(e.args[1], {});
    if (!a || !q || *q < 1 || a->kind != Linear::Kind::plain || a->coef.size() != 1 ||
        a->coef.begin()->second != 1)
      return std::nullopt;
    if (*q == 1) return e.op == Op::FloorDiv ? a : std::optional<Linear>(Linear{0, {}});
    Linear l;
    l.coef[a->coef.begin()->first] = 1;
    l.kind = e.op == Op::FloorDiv ? Linear::Kind::div : Linear::Kind::mod;
    l.q = *q;
    l.in = a->c;
    return l;
  }
  default: return std::nullopt;
  }
}

// Every expression of a block, statements nested in `when`/`for` included.
void each_expr(Block &b, const std::function<void(Expr &)> &f) {
  for (auto &s : b) {
    for_each_expr(s, f);
    if (auto *i = std::get_if<If>(&s.kind)) {
      each_expr(i->then_body, f);
      each_expr(i->else_body, f);
    } else if (auto *l = std::get_if<For>(&s.kind)) {
      each_expr(l->body, f);
    } else if (auto *e = std::get_if<EmitPipeline>(&s.kind)) {
      // Never cut (lowered unrolled); its grid and body for completeness.
      for (auto &g : e->grid)
        f(g);
      each_expr(e->body, f);
    }
  }
}

// The body's uses of the grid: comparisons `program_id(e) <op> constant`
// (either side), and the axes it uses otherwise: their num_programs, or
// their program_id in a value, a mask, a subscript or a comparison with
// another axis. Such an axis is kept whole: its every value runs as in the
// kernel, while the axes it does not name may still be cut (the events of
// their values then differ only by the index maps' shift).
struct BodyUse {
  std::map<int, std::set<std::int64_t>> constants; // axis -> compared constants
  std::int64_t period = 1;                         // lcm of q in `program_id(e) % q` compared
  std::set<int> pinned;                            // num_programs(e) outside such a comparison
  std::map<int, std::string> free;                 // axis -> why it is kept whole (its first such use)
  std::string bad;                                 // a use the cut cannot follow
};

// The constant a comparison's side folds to under the params and the grid.
std::optional<std::int64_t> fold_side(const Expr &side, const Env &params,
                                      const std::vector<std::int64_t> &grid) {
  if (mentions_program_id(side)) return std::nullopt;
  return eval_int(bind_grid(side, {}, grid), params);
}

// Calls `on_atom(cmp, pid side index, axis, constant)` for each comparison of
// a program_id with a constant in `e`, and reports any other grid use.
void scan(Expr &e, const Env &params, const std::vector<std::int64_t> &grid, BodyUse &use,
          const std::function<void(Expr &, int, int, std::int64_t)> &on_atom) {
  if (!use.bad.empty()) return;
  if (is_compare(e.op) && e.args.size() == 2) {
    // `program_id(e) % q <op> constant` holds with period q along the axis:
    // the cut leaves out a multiple of it, so it stays as written.
    for (int side = 0; side < 2; ++side) {
      const Expr &m = e.args[side];
      if (m.op != Op::Mod || m.args.size() != 2 || !is_grid_call(m.args[0], "program_id")) continue;
      auto q = eval_int(m.args[1], params);
      auto c = fold_side(e.args[1 - side], params, grid);
      if (!q || *q < 1 || *q > (1 << 20) || !c) break;
      use.period = std::lcm(use.period, *q);
      return;
    }
    for (int side = 0; side < 2; ++side) {
      const Expr &p = e.args[side];
      if (!is_grid_call(p, "program_id")) continue;
      auto axis = p.args[0].int_value;
      auto c = fold_side(e.args[1 - side], params, grid);
      if (axis < 0 || axis >= static_cast<std::int64_t>(grid.size()) || !c) break;
      use.constants[static_cast<int>(axis)].insert(*c);
      on_atom(e, side, static_cast<int>(axis), *c);
      return;
    }
  }
  if (e.op == Op::Call && e.name == "program_id") {
    if (is_grid_call(e, "program_id") && e.args[0].int_value >= 0 &&
        e.args[0].int_value < static_cast<std::int64_t>(grid.size())) {
      const int axis = static_cast<int>(e.args[0].int_value);
      use.free.emplace(axis, "program_id(" + std::to_string(axis) + ") at line " +
                                 std::to_string(e.loc.line) +
                                 " is used other than in a comparison with a constant");
      return;
    }
    use.bad = "program_id at line " + std::to_string(e.loc.line) +
              " is used other than in a comparison with a constant";
    return;
  }
  if (is_grid_call(e, "num_programs")) use.pinned.insert(static_cast<int>(e.args[0].int_value));
  for (auto &a : e.args)
    scan(a, params, grid, use, on_atom);
}

// The grid axes an index-map component names, when it is integer arithmetic
// (`where`, `min`, `max` included) of the map's grid variables and literals
// alone: no prefetch table, no other name. nullopt otherwise.
std::optional<std::set<int>> grid_axes_only(const Expr &e, const std::vector<std::string> &index_params) {
  std::set<int> axes;
  bool ok = true;
  std::function<void(const Expr &)> walk = [&](const Expr &x) {
    if (!ok) return;
    switch (x.op) {
    case Op::Int: return;
    case Op::Name: {
      auto it = std::find(index_params.begin(), index_params.end(), x.name);
      if (it == index_params.end()) {
        ok = false;
        return;
      }
      axes.insert(static_cast<int>(it - index_params.begin()));
      return;
    }
    case Op::Call:
      if ((x.name != "where" && x.name != "min" && x.name != "max" && x.name != "minimum" &&
           x.name != "maximum") ||
          !x.kwarg_names.empty()) {
        ok = false;
        return;
      }
      break;
    default:
      // Integer arithmetic and comparisons.
      if (!is_compare(x.op) && x.op != Op::Neg && x.op != Op::Not && x.op != Op::Add && x.op != Op::Sub &&
          x.op != Op::Mul && x.op != Op::FloorDiv && x.op != Op::Mod && x.op != Op::And && x.op != Op::Or) {
        ok = false;
        return;
      }
    }
    for (const auto &a : x.args)
      walk(a);
  };
  walk(e);
  if (!ok) return std::nullopt;
  return axes;
}

BodyUse body_use(const KernelSpec &k, const Env &params, const std::vector<std::int64_t> &grid) {
  BodyUse use;
  Block body = k.body;
  each_expr(body, [&](Expr &e) { scan(e, params, grid, use, [](Expr &, int, int, std::int64_t) {}); });
  return use;
}

} // namespace

std::vector<std::int64_t> GridCut::kernel_point(std::vector<std::int64_t> p) const {
  for (std::size_t e = 0; e < p.size() && e < axes.size(); ++e)
    if (axes[e].drop > 0 && p[e] >= axes[e].recurs_from + axes[e].period) p[e] += axes[e].drop;
  return p;
}

std::vector<std::int64_t> GridCut::shape(const std::string &operand, std::vector<std::int64_t> s) const {
  for (const auto &d : dims)
    if (d.operand == operand && static_cast<std::size_t>(d.dim) < s.size())
      s[static_cast<std::size_t>(d.dim)] -= d.shift(axes[static_cast<std::size_t>(d.axis)].drop);
  return s;
}

std::int64_t step_reach(const Program &p, int main_loop) {
  if (main_loop < 0 || static_cast<std::size_t>(main_loop) >= p.body.size()) return 0;
  Block loop{p.body[static_cast<std::size_t>(main_loop)]};
  const auto *f = std::get_if<For>(&loop[0].kind);
  if (!f) return 0;
  std::set<std::string> vars{f->var, "t"};
  std::int64_t reach = 0;
  std::function<void(const Expr &)> walk = [&](const Expr &e) {
    if ((e.op == Op::Add || e.op == Op::Sub) && e.args.size() == 2)
      for (int side = 0; side < 2; ++side)
        if (e.args[side].op == Op::Name && vars.count(e.args[side].name) && e.args[1 - side].op == Op::Int)
          reach = std::max(reach, std::abs(e.args[1 - side].int_value));
    for (const auto &a : e.args)
      walk(a);
  };
  each_expr(loop, [&](Expr &e) { walk(e); });
  return reach;
}

CutPlan plan_cut(const KernelSpec &k, const Env &overrides, std::int64_t period, std::int64_t reach,
                 std::int64_t window) {
  CutPlan out;
  Env params = param_env(k.params, overrides);
  Binding bound = bind_kernel(k, params);
  if (!bound.kernel) {
    out.reason = "the kernel cannot be bound";
    return out;
  }
  const BoundKernel &b = *bound.kernel;
  const std::size_t rank = b.grid.size();
  period = std::max<std::int64_t>(period, 1);
  const std::int64_t rings = period; // what the slot rings' sizes divide

  // Each array dim of a pipelined operand follows at most one grid axis:
  // block a * g + c, or a * ((g + in) // q) + c (one block per q values).
  struct Follow {
    int axis = -1;
    std::int64_t a = 0, q = 1;
    bool operator==(const Follow &) const = default;
  };
  std::map<std::string, std::vector<Follow>> follows; // operand -> per dim
  // Per axis: the values where a block that follows it stops being whole
  // and inside its array (ragged, then outside), or starts being inside.
  std::map<int, std::set<std::int64_t>> edges;
  // Axes a map names other than affinely (`where(i * bq < j * bk, j, 0)`):
  // kept whole, as the body's (BodyUse::free); the component then follows no
  // cut axis.
  std::map<int, std::string> map_kept;
  for (const auto &op : b.operands) {
    if (op.role == Role::scratch) continue;
    if (op.has_element_dims()) {
      out.reason = "'" + op.name + "' has an Element block dim";
      return out;
    }
    if (op.has_bounded_dims()) {
      out.reason = "'" + op.name + "' has a BoundedSlice block dim";
      return out;
    }
    auto &dims = follows[op.name];
    for (std::size_t d = 0; d < op.index.size(); ++d) {
      auto l = linear(op.index[d]);
      Follow f;
      bool mixed = false; // two axes, or one backwards
      for (auto &[v, a] : l ? l->coef : std::map<std::string, std::int64_t>{}) {
        if (a == 0) continue;
        auto it = std::find(op.index_params.begin(), op.index_params.end(), v);
        if (it == op.index_params.end() || f.axis >= 0 || a < 0) {
          mixed = true;
          break;
        }
        f = {static_cast<int>(it - op.index_params.begin()), a, l->q};
      }
      if (!l || mixed) {
        // Arithmetic of the grid alone (`i + j`, `n - 1 - i`, a causal
        // `where(i * bq < j * bk, j, 0)`): the axes it names are kept whole,
        // and the component follows no cut axis.
        auto axes = grid_axes_only(op.index[d], op.index_params);
        if (!axes) {
          out.reason = "the index map of '" + op.name + "' is not affine in the grid";
          return out;
        }
        for (int a : *axes)
          map_kept.emplace(a, "the index map of '" + op.name + "' names axis " + std::to_string(a) +
                                  (l ? " with another or backwards" : " other than affinely"));
        dims.push_back(Follow{});
        continue;
      }
      // A block cycling along the axis, a * ((g + in) % q) + c, follows no
      // axis: leaving out a multiple of q values keeps its cycle. One shared
      // by q values moves its ring a slot every q values: its slots repeat
      // after q times the rings' period.
      if (l->kind == Linear::Kind::mod) {
        period = std::lcm(period, l->q);
        f = Follow{};
      } else if (l->kind == Linear::Kind::div) {
        period = std::lcm(period, rings * l->q);
      }
      if (f.axis >= 0 && !op.windowed) {
        out.reason = "'" + op.name + "' is not pipelined but its index map follows the grid";
        return out;
      }
      dims.push_back(f);
      if (f.axis >= 0) {
        // Block a*u + c of size bs, u = g (or (g + in) // q), is whole and
        // inside for c + a*u >= 0 and (c + a*u + 1) * bs <= extent: a range
        // of u, whose ends are edges (at g = q*u - in).
        const std::int64_t a = f.a, c = l->c, bs = op.block[d], ext = op.shape[d];
        const std::int64_t first_inside = c >= 0 ? 0 : (-c + a - 1) / a;
        const std::int64_t whole_blocks = ext / bs; // blocks [0, whole_blocks) are whole
        const std::int64_t first_not_whole = whole_blocks - c <= 0 ? 0 : (whole_blocks - c + a - 1) / a;
        const std::int64_t first_outside =
            (ext + bs - 1) / bs - c <= 0 ? 0 : ((ext + bs - 1) / bs - c + a - 1) / a;
        for (std::int64_t u : {first_inside, first_not_whole, first_outside})
          if (u <= (std::int64_t{1} << 40)) edges[f.axis].insert(u * f.q - l->in); // (in: 0 unless `//`)
      }
    }
  }
  for (const auto &a : k.aliases)
    if (follows[a.input] != follows[a.output]) {
      out.reason = "aliased operands '" + a.input + "' and '" + a.output + "' follow the grid differently";
      return out;
    }

  bool dma = false;
  std::function<void(const Block &)> find_dma = [&](const Block &bl) {
    for (const auto &s : bl) {
      if (std::holds_alternative<Dma>(s.kind)) dma = true;
      if (auto *i = std::get_if<If>(&s.kind)) find_dma(i->then_body), find_dma(i->else_body);
      if (auto *f = std::get_if<For>(&s.kind)) find_dma(f->body);
    }
  };
  find_dma(k.body);
  if (dma) {
    // The machine's state key holds no semaphore counts.
    out.reason = "the body copies by hand on semaphores";
    return out;
  }
  BodyUse use = body_use(k, params, b.grid);
  if (!use.bad.empty()) {
    out.reason = use.bad;
    return out;
  }
  use.free.insert(map_kept.begin(), map_kept.end()); // (the body's reason first)
  period = std::lcm(period, use.period);

  GridCut cut;
  cut.grid = b.grid;
  cut.axes.resize(rank);
  bool any = false;
  std::string kept_whole; // why a long axis is not cut: a use in a value or a map
  for (std::size_t e = 0; e < rank; ++e) {
    const std::int64_t n = b.grid[e];
    AxisCut &ax = cut.axes[e];
    ax.period = period;
    if (use.pinned.count(static_cast<int>(e))) continue;
    // Guards are constant between consecutive boundaries; the pipeline's
    // first and last values of an axis are boundaries too.
    std::set<std::int64_t> bounds{0, std::min<std::int64_t>(1, n), std::max<std::int64_t>(n - 1, 0), n};
    for (std::int64_t c : use.constants[static_cast<int>(e)])
      for (std::int64_t x : {c, c + 1})
        if (x >= 0 && x <= n) bounds.insert(x);
    for (std::int64_t x : edges[static_cast<int>(e)])
      if (x >= 0 && x <= n) bounds.insert(x);
    std::int64_t lo = 0, hi = 0;
    for (auto it = bounds.begin(); std::next(it) != bounds.end(); ++it)
      if (*std::next(it) - *it > hi - lo) lo = *it, hi = *std::next(it);
    // The states at w and w + P, for some w in [lo + R, lo + R + window],
    // are compared; the values [w - R, w + P + R] must all lie in the
    // stretch of the cut grid, since a step looks R steps (so at most R
    // values) around.
    reach = std::max<std::int64_t>(reach, 0);
    window = std::max<std::int64_t>(window, 0);
    std::int64_t room = hi - lo - period - window - 2 * reach;
    std::int64_t drop = room > 0 ? room / period * period : 0;
    if (drop <= 0) continue;
    if (auto kept = use.free.find(static_cast<int>(e)); kept != use.free.end()) {
      if (kept_whole.empty()) kept_whole = kept->second;
      continue;
    }
    ax.drop = drop;
    ax.first = lo + reach;
    ax.window = window;
    ax.recurs_from = lo + reach;
    ax.upper = hi - drop;
    cut.grid[e] = n - drop;
    any = true;
  }
  if (!any) {
    out.reason = kept_whole;
    return out;
  }
  for (const auto &op : b.operands) {
    if (op.role == Role::scratch) continue;
    const auto &dims = follows[op.name];
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const Follow f = dims[d];
      if (f.axis < 0 || cut.axes[f.axis].drop == 0) continue;
      std::int64_t step = 0, shrink = 0;
      if (__builtin_mul_overflow(f.a, op.block[d], &step) ||
          __builtin_mul_overflow(step, cut.axes[f.axis].drop / f.q, &shrink) || op.shape[d] - shrink < 1) {
        out.reason = "'" + op.name + "' cannot shrink with its grid axis";
        return out;
      }
      cut.dims.push_back({op.name, static_cast<int>(d), f.axis, step, f.q});
    }
  }
  out.cut = std::move(cut);
  out.reason = kept_whole;
  return out;
}

KernelSpec cut_body(const KernelSpec &k, const Env &overrides, const GridCut &cut) {
  KernelSpec out = k;
  Env params = param_env(k.params, overrides);
  Binding bound = bind_kernel(k, params);
  if (!bound.kernel) return out;
  const auto &grid = bound.kernel->grid;
  BodyUse use;
  each_expr(out.body, [&](Expr &e) {
    scan(e, params, grid, use, [&](Expr &cmp, int side, int axis, std::int64_t c) {
      const AxisCut &ax = cut.axes[static_cast<std::size_t>(axis)];
      if (ax.drop > 0 && c >= ax.upper + ax.drop) c -= ax.drop;
      Loc l = cmp.args[1 - side].loc;
      cmp.args[1 - side] = Expr::integer(c, l);
    });
  });
  return out;
}

KernelSpec cut_kernel(const KernelSpec &k, const Env &overrides, const GridCut &cut) {
  KernelSpec out = cut_body(k, overrides, cut);
  Binding bound = bind_kernel(k, param_env(k.params, overrides));
  if (!bound.kernel) return out;
  for (std::size_t e = 0; out.grid && e < out.grid->size() && e < cut.grid.size(); ++e)
    (*out.grid)[e] = Expr::integer(cut.grid[e], (*out.grid)[e].loc);
  for (auto &op : out.operands)
    if (const BoundOperand *b = bound.kernel->operand(op.name)) {
      const auto shape = cut.shape(op.name, b->shape);
      for (std::size_t d = 0; d < op.shape.size() && d < shape.size(); ++d)
        if (shape[d] != b->shape[d]) op.shape[d] = Expr::integer(shape[d], op.shape[d].loc);
    }
  return out;
}

} // namespace pipecheck::spec
