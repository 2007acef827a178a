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

// An integer interval [lo, hi].
struct Span {
  std::int64_t lo = 0, hi = 0;
};

// An integer expression as `a * program_id(axis) + r` with r in `rest`
// (axis -1 and a 0: no program_id).
struct PidAffine {
  int axis = -1;
  std::int64_t a = 0;
  Span rest;
};

// The body's names as the grid-use scan reads them: its locals (`name =
// value`; one defined once is inlined, with the loop variables of where it
// is defined) and the loop variables in scope (`for v in range(lo, hi)` with
// constant bounds: [lo, hi - 1]; nullopt otherwise).
using Scope = std::map<std::string, std::optional<Span>>;
struct Local {
  int defs = 0;
  const Expr *value = nullptr;
  Scope scope;
};
using Locals = std::map<std::string, Local>;

__extension__ typedef __int128 i128;

constexpr std::int64_t kSpanLimit = std::int64_t{1} << 62;

std::optional<Span> checked_span(i128 lo, i128 hi) {
  if (lo > hi || lo < -kSpanLimit || hi > kSpanLimit) return std::nullopt;
  return Span{static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)};
}

std::int64_t floor_div(std::int64_t a, std::int64_t q) { // q > 0
  return a / q - ((a % q != 0) && (a < 0) ? 1 : 0);
}

// `e` as a * program_id(axis) + r over the params, the grid's extents
// (`grid_calls`: num_programs, where the caller replaces the expression by
// its value), the loop variables in `scope` and the locals defined once;
// nullopt for anything else (a float, a ref, a product of program_ids, a
// local defined twice, `//` or `%` of a program_id).
std::optional<PidAffine> pid_affine(const Expr &e, const Env &params, const std::vector<std::int64_t> &grid,
                                    const Locals &locals, const Scope &scope, bool grid_calls,
                                    int depth = 0) {
  if (depth > 16) return std::nullopt;
  auto of = [&](const Expr &x) { return pid_affine(x, params, grid, locals, scope, grid_calls, depth); };
  auto constant = [](std::int64_t v) { return PidAffine{-1, 0, {v, v}}; };
  switch (e.op) {
  case Op::Int: return constant(e.int_value);
  case Op::Name: {
    if (auto l = locals.find(e.name); l != locals.end()) {
      if (l->second.defs != 1 || !l->second.value) return std::nullopt;
      return pid_affine(*l->second.value, params, grid, locals, l->second.scope, grid_calls, depth + 1);
    }
    if (auto v = scope.find(e.name); v != scope.end()) {
      if (!v->second) return std::nullopt;
      return PidAffine{-1, 0, *v->second};
    }
    if (auto p = params.find(e.name); p != params.end()) return constant(p->second);
    return std::nullopt;
  }
  case Op::Call: {
    if (is_grid_call(e, "program_id")) {
      const auto axis = e.args[0].int_value;
      if (axis < 0 || axis >= static_cast<std::int64_t>(grid.size())) return std::nullopt;
      return PidAffine{static_cast<int>(axis), 1, {0, 0}};
    }
    if (is_grid_call(e, "num_programs")) {
      const auto axis = e.args[0].int_value;
      if (!grid_calls || axis < 0 || axis >= static_cast<std::int64_t>(grid.size())) return std::nullopt;
      return constant(grid[static_cast<std::size_t>(axis)]);
    }
    if (e.name == "iota" && e.args.size() == 2 && e.kwarg_names.empty() && e.args[0].op == Op::Tuple) {
      // int32 lanes 0 .. size - 1 along the dim.
      auto dim = eval_int(e.args[1], params);
      if (!dim || *dim < 0 || *dim >= static_cast<std::int64_t>(e.args[0].args.size())) return std::nullopt;
      auto size = eval_int(e.args[0].args[static_cast<std::size_t>(*dim)], params);
      if (!size || *size < 1) return std::nullopt;
      return PidAffine{-1, 0, {0, *size - 1}};
    }
    if (e.name == "broadcast_to" && e.args.size() == 2 && e.kwarg_names.empty()) return of(e.args[0]);
    if (auto v = eval_int(e, params)) return constant(*v); // cdiv, min, ... of params
    return std::nullopt;
  }
  case Op::Neg: {
    auto x = of(e.args[0]);
    if (!x) return std::nullopt;
    auto r = checked_span(-static_cast<i128>(x->rest.hi), -static_cast<i128>(x->rest.lo));
    if (!r) return std::nullopt;
    return PidAffine{x->axis, -x->a, *r};
  }
  case Op::Add:
  case Op::Sub: {
    auto x = of(e.args[0]), y = of(e.args[1]);
    if (!x || !y || (x->axis >= 0 && y->axis >= 0 && x->axis != y->axis)) return std::nullopt;
    const i128 sign = e.op == Op::Add ? 1 : -1;
    const i128 a = static_cast<i128>(x->a) + sign * y->a;
    auto r = sign > 0 ? checked_span(static_cast<i128>(x->rest.lo) + y->rest.lo,
                                     static_cast<i128>(x->rest.hi) + y->rest.hi)
                      : checked_span(static_cast<i128>(x->rest.lo) - y->rest.hi,
                                     static_cast<i128>(x->rest.hi) - y->rest.lo);
    if (!r || a < -kSpanLimit || a > kSpanLimit) return std::nullopt;
    const int axis = a == 0 ? -1 : x->axis >= 0 ? x->axis : y->axis;
    return PidAffine{axis, static_cast<std::int64_t>(a), *r};
  }
  case Op::Mul: {
    auto x = of(e.args[0]), y = of(e.args[1]);
    if (!x || !y) return std::nullopt;
    if (x->axis >= 0) std::swap(x, y);
    if (x->axis >= 0) return std::nullopt; // a product of program_ids
    if (y->axis >= 0 && x->rest.lo != x->rest.hi) return std::nullopt;
    const i128 corners[4] = {
        static_cast<i128>(x->rest.lo) * y->rest.lo, static_cast<i128>(x->rest.lo) * y->rest.hi,
        static_cast<i128>(x->rest.hi) * y->rest.lo, static_cast<i128>(x->rest.hi) * y->rest.hi};
    auto r = checked_span(*std::min_element(corners, corners + 4), *std::max_element(corners, corners + 4));
    const i128 a = static_cast<i128>(y->a) * x->rest.lo;
    if (!r || a < -kSpanLimit || a > kSpanLimit) return std::nullopt;
    return PidAffine{a == 0 ? -1 : y->axis, static_cast<std::int64_t>(a), *r};
  }
  case Op::FloorDiv:
  case Op::Mod: {
    auto x = of(e.args[0]);
    auto q = eval_int(e.args[1], params);
    if (!x || x->axis >= 0 || !q || *q < 1) return std::nullopt;
    const std::int64_t lo = floor_div(x->rest.lo, *q), hi = floor_div(x->rest.hi, *q);
    if (e.op == Op::FloorDiv) return PidAffine{-1, 0, {lo, hi}};
    if (lo == hi) return PidAffine{-1, 0, {x->rest.lo - lo * *q, x->rest.hi - hi * *q}};
    return PidAffine{-1, 0, {0, *q - 1}};
  }
  default: return std::nullopt;
  }
}

// The body's uses of the grid: comparisons of `a * program_id(e) + r` (r
// bounded and free of program_id: lanes of an iota, loop variables; through
// the locals that hold them) with a constant, and the axes it uses
// otherwise: their num_programs, or their program_id in a value, a
// subscript, a loop's bounds or a comparison with another axis. Such an axis
// is kept whole: its every value runs as in the kernel, while the axes it
// does not name may still be cut (the events of their values then differ
// only by the index maps' shift).
//
// A comparison of `p = a * program_id(e) + r` with c holds for every r, or
// for none, at the values of the axis where p's range lies wholly below c or
// wholly above it; the values between, where c is in p's range (the last,
// ragged block's mask `program_id(0) * B + iota((B,), 0) < n`: the one
// value whose lanes straddle n), are the comparison's bounds. Between bounds
// it is constant, and the cut (cut_body) moves c down by a * D where the
// bounds lie above the left-out values: `p < c` at a value v of the cut
// above them is `p < c` at the kernel's v + D, and below them both hold
// alike (both ends lie on one side of c).
struct BodyUse {
  std::map<int, std::set<std::int64_t>> bounds; // axis -> values where a comparison changes
  std::int64_t period = 1;                      // lcm of q in `program_id(e) % q` compared
  std::set<int> pinned;                         // num_programs(e) outside such a comparison
  std::map<int, std::string> free;              // axis -> why it is kept whole (its first such use)
  std::string bad;                              // a use the cut cannot follow
};

// One comparison of a program_id with a constant, as the cut moves it: the
// constant side's index, its value c, the axis, the program_id's coefficient
// a, and the first value of the axis where the comparison may change.
struct Atom {
  int constant_side = 1;
  std::int64_t c = 0;
  int axis = 0;
  std::int64_t a = 1;
  std::int64_t first_bound = 0;
  /// Both sides vary (`b - 4 * program_id(0) > iota(...)`): the right side
  /// is moved, `R - a * D` with a the coefficient of L - R, not folded.
  bool both_vary = false;
};

// The grid-use scan of a body (BodyUse), calling `on_atom` for each
// comparison the cut moves.
class GridScan {
public:
  GridScan(const Env &params, const std::vector<std::int64_t> &grid, BodyUse &use,
           std::function<void(Expr &, const Atom &)> on_atom)
      : params_(params), grid_(grid), use_(use), on_atom_(std::move(on_atom)) {}

  void body(Block &b) {
    collect(b, {});
    walk(b, {});
  }

private:
  const Env &params_;
  const std::vector<std::int64_t> &grid_;
  BodyUse &use_;
  std::function<void(Expr &, const Atom &)> on_atom_;
  Locals locals_;
  std::set<std::string> loop_vars_;
  std::map<std::string, int> deferred_; // local -> the axis whose program_id it holds

  Scope enter(const For &f, Scope scope) const {
    if (f.var.empty()) return scope;
    auto lo = eval_int(f.lo, params_), hi = eval_int(f.hi, params_);
    scope[f.var] = lo && hi && *hi > *lo ? std::optional<Span>(Span{*lo, *hi - 1}) : std::nullopt;
    return scope;
  }

  // Every local's definitions, each with the loop variables where it stands.
  void collect(const Block &b, const Scope &scope) {
    for (const auto &s : b) {
      if (const auto *l = std::get_if<Let>(&s.kind)) {
        Local &local = locals_[l->name];
        ++local.defs;
        local.value = &l->value;
        local.scope = scope;
      } else if (const auto *i = std::get_if<If>(&s.kind)) {
        collect(i->then_body, scope);
        collect(i->else_body, scope);
      } else if (const auto *f = std::get_if<For>(&s.kind)) {
        if (!f->var.empty()) loop_vars_.insert(f->var);
        collect(f->body, enter(*f, scope));
      } else if (const auto *e = std::get_if<EmitPipeline>(&s.kind)) {
        collect(e->body, scope);
      }
    }
    for (auto &[name, l] : locals_)
      if (params_.count(name) || loop_vars_.count(name)) l.defs = 2; // (a name of two meanings: not inlined)
  }

  void walk(Block &b, const Scope &scope) {
    for (auto &s : b) {
      if (auto *l = std::get_if<Let>(&s.kind)) {
        // A local holding `a * program_id(e) + r` is read where it is used.
        auto p = pid_affine(l->value, params_, grid_, locals_, scope, false);
        if (p && p->axis >= 0 && locals_[l->name].defs == 1) {
          deferred_[l->name] = p->axis;
          continue;
        }
      }
      for_each_expr(s, [&](Expr &e) { scan(e, scope); });
      if (auto *i = std::get_if<If>(&s.kind)) {
        walk(i->then_body, scope);
        walk(i->else_body, scope);
      } else if (auto *f = std::get_if<For>(&s.kind)) {
        walk(f->body, enter(*f, scope));
      } else if (auto *e = std::get_if<EmitPipeline>(&s.kind)) {
        // Never cut (lowered unrolled); its grid and body for completeness.
        for (auto &g : e->grid)
          scan(g, scope);
        walk(e->body, scope);
      }
    }
  }

  // The constant a comparison's side folds to.
  std::optional<std::int64_t> constant(const Expr &side, const Scope &scope) const {
    if (auto v = eval_int(bind_grid(side, {}, grid_), params_)) return v;
    auto c = pid_affine(side, params_, grid_, locals_, scope, true);
    if (!c || c->axis >= 0 || c->rest.lo != c->rest.hi) return std::nullopt;
    return c->rest.lo;
  }

  // Whether `p` stays in int32 over its axis: the program_id is an int32,
  // its arithmetic too, so where p may leave it the kernel's values and the
  // cut's could differ.
  bool in_int32(const PidAffine &p) const {
    const std::int64_t n = p.axis >= 0 ? grid_[static_cast<std::size_t>(p.axis)] : 1;
    const i128 lo = std::min<i128>(p.rest.lo, static_cast<i128>(p.a) * (n - 1) + p.rest.lo),
               hi = std::max<i128>(p.rest.hi, static_cast<i128>(p.a) * (n - 1) + p.rest.hi);
    return lo >= INT32_MIN && hi <= INT32_MAX;
  }

  // The bounds of `p <op> c` on p's axis, and its Atom for the cut; false
  // where the comparison changes at too many values to cut the axis.
  bool changes(Expr &e, const PidAffine &p, std::int64_t c, Atom at) {
    const std::int64_t n = grid_[static_cast<std::size_t>(p.axis)];
    // Where p's range [a*v + lo, a*v + hi] lies wholly below c (values
    // before t0, a > 0) or above it (from t1 on), and the other way round
    // for a < 0.
    const std::int64_t a = p.a;
    auto ceil_div = [](std::int64_t x, std::int64_t q) { return -floor_div(-x, q); };
    const std::int64_t t0 = a > 0 ? ceil_div(c - p.rest.hi, a) : ceil_div(p.rest.lo - c, -a);
    const std::int64_t t1 = a > 0 ? floor_div(c - p.rest.lo, a) + 1 : floor_div(p.rest.hi - c, -a) + 1;
    const std::int64_t from = std::max<std::int64_t>(t0, 0), to = std::min<std::int64_t>(t1, n);
    if (to - from > (1 << 16))
      return false; // (a comparison of half the grid's values: the axis is kept whole)
    auto &bounds = use_.bounds[p.axis];
    for (std::int64_t v = from; v <= to; ++v)
      bounds.insert(v);
    at.c = c, at.axis = p.axis, at.a = a, at.first_bound = t0;
    on_atom_(e, at);
    return true;
  }

  // `a * program_id(e) + r <op> c` (either side), or such on both sides, as
  // an Atom and the bounds of the axis it adds; false where the comparison
  // is not one.
  bool compare(Expr &e, const Scope &scope) {
    auto l = pid_affine(e.args[0], params_, grid_, locals_, scope, false),
         r = pid_affine(e.args[1], params_, grid_, locals_, scope, false);
    for (int side = 0; side < 2; ++side) {
      const auto &p = side == 0 ? l : r;
      if (!p || p->axis < 0) continue;
      auto c = constant(e.args[1 - side], scope);
      if (!c) break;
      if (!in_int32(*p) || *c < INT32_MIN || *c > INT32_MAX) return false;
      Atom at;
      at.constant_side = 1 - side;
      return changes(e, *p, *c, at);
    }
    // Both sides vary, on one axis: L <op> R is L - R <op> 0, and the cut
    // moves R by the coefficient of L - R (none where it cancels).
    if (!l || !r || (l->axis < 0 && r->axis < 0) || (l->axis >= 0 && r->axis >= 0 && l->axis != r->axis) ||
        !in_int32(*l) || !in_int32(*r))
      return false;
    const i128 a = static_cast<i128>(l->a) - r->a;
    auto rest =
        checked_span(static_cast<i128>(l->rest.lo) - r->rest.hi, static_cast<i128>(l->rest.hi) - r->rest.lo);
    if (!rest || a < INT32_MIN || a > INT32_MAX) return false;
    if (a == 0) return true; // (pid-free: the same at every value)
    // The moved right side, R - a * D for every D up to the axis's extent, in int32 too.
    const int axis = l->axis >= 0 ? l->axis : r->axis;
    const i128 most = -a * grid_[static_cast<std::size_t>(axis)];
    auto moved = checked_span(r->rest.lo + std::min<i128>(0, most), r->rest.hi + std::max<i128>(0, most));
    if (!moved || !in_int32(PidAffine{r->axis, r->a, *moved})) return false;
    Atom at;
    at.both_vary = true;
    return changes(e, PidAffine{axis, static_cast<std::int64_t>(a), *rest}, 0, at);
  }

  void scan(Expr &e, const Scope &scope) {
    if (!use_.bad.empty()) return;
    if (is_compare(e.op) && e.args.size() == 2) {
      // `program_id(e) % q <op> constant` holds with period q along the axis:
      // the cut leaves out a multiple of it, so it stays as written.
      for (int side = 0; side < 2; ++side) {
        const Expr &m = e.args[side];
        if (m.op != Op::Mod || m.args.size() != 2 || !is_grid_call(m.args[0], "program_id")) continue;
        auto q = eval_int(m.args[1], params_);
        auto c = constant(e.args[1 - side], scope);
        if (!q || *q < 1 || *q > (1 << 20) || !c) break;
        use_.period = std::lcm(use_.period, *q);
        return;
      }
      if (compare(e, scope)) return;
    }
    if (e.op == Op::Name) {
      if (auto d = deferred_.find(e.name); d != deferred_.end())
        use_.free.emplace(d->second, "'" + e.name + "', which holds program_id(" + std::to_string(d->second) +
                                         "), is used at line " + std::to_string(e.loc.line) +
                                         " other than in a comparison with a constant");
      return;
    }
    if (e.op == Op::Call && e.name == "program_id") {
      if (is_grid_call(e, "program_id") && e.args[0].int_value >= 0 &&
          e.args[0].int_value < static_cast<std::int64_t>(grid_.size())) {
        const int axis = static_cast<int>(e.args[0].int_value);
        use_.free.emplace(axis, "program_id(" + std::to_string(axis) + ") at line " +
                                    std::to_string(e.loc.line) +
                                    " is used other than in a comparison with a constant");
        return;
      }
      use_.bad = "program_id at line " + std::to_string(e.loc.line) +
                 " is used other than in a comparison with a constant";
      return;
    }
    if (is_grid_call(e, "num_programs")) use_.pinned.insert(static_cast<int>(e.args[0].int_value));
    for (auto &a : e.args)
      scan(a, scope);
  }
};

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
  GridScan(params, grid, use, [](Expr &, const Atom &) {}).body(body);
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
    for (std::int64_t x : use.bounds[static_cast<int>(e)])
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
  BodyUse use;
  GridScan(params, bound.kernel->grid, use, [&](Expr &cmp, const Atom &at) {
    const AxisCut &ax = cut.axes[static_cast<std::size_t>(at.axis)];
    const bool moved = ax.drop > 0 && at.first_bound >= ax.upper + ax.drop;
    if (at.both_vary) {
      Expr &right = cmp.args[1];
      if (moved) right = Expr::binary(Op::Sub, right, Expr::integer(at.a * ax.drop, right.loc), right.loc);
      return;
    }
    Expr &side = cmp.args[static_cast<std::size_t>(at.constant_side)];
    side = Expr::integer(moved ? at.c - at.a * ax.drop : at.c, side.loc); // (int32 values)
  }).body(out.body);
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
