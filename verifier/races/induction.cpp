#include "verifier/races/induction.hpp"

#include "spec/eval.hpp"
#include "spec/place.hpp"
#include "spec/print.hpp"
#include "verifier/smt/smt.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

namespace pipecheck::verifier::races {

namespace {

using spec::Expr;
using spec::Op;

enum class Kind { guard, slot, hbm };
enum class Region { prologue, main, epilogue };

struct CtxVar {
  std::string var;
  Expr lo, hi;
};

struct Site {
  Expr e;
  Kind kind = Kind::guard;
  int buffer = -1, dim = -1;
  Region region = Region::prologue;
  std::vector<CtxVar> ctx;
  std::string what; // for reasons
  /// The conditions of the branches the site is under (lets substituted):
  /// its value matters only where they hold, and they are sites themselves,
  /// checked first.
  std::vector<Expr> guards = {};
};

struct Full {
  int buffer, dim;
  Region region;
};

/// A ref whose subscripts must stay inside its buffer (spec/place.hpp's
/// rule): the subscripts and the conditions of the branches it is under,
/// lets substituted.
struct BoundsSite {
  int buffer = -1;
  std::vector<Expr> subs;
  Region region = Region::prologue;
  std::vector<CtxVar> ctx;
  std::vector<Expr> guards;
  std::string what;
  int line = 0;
};

bool is_integer_expr(const Expr &e, const spec::Program &p) {
  switch (e.op) {
  case Op::Ref:
  case Op::Float:
  case Op::Zeros:
  case Op::Undefined:
  case Op::Ellipsis:
  case Op::Slice:
  case Op::None: return false;
  case Op::Name:
    if (p.buffer(e.name)) return false;
    return true;
  case Op::Call:
    if (!spec::is_int_function(e.name)) return false;
    break;
  default: break;
  }
  for (auto &a : e.args)
    if (!is_integer_expr(a, p)) return false;
  return true;
}

/// Walks the program and records every integer expression that decides
/// behaviour, with lets substituted.
struct Collector {
  const spec::Program &p;
  std::map<std::string, Expr> subst;
  std::vector<Site> sites;
  std::vector<Full> fulls;
  std::string fail;
  std::set<std::string> tensor_locals;
  std::set<std::string> bound_lets;
  std::vector<BoundsSite> bounds;
  std::vector<Expr> guards; // the conditions of the enclosing branches

  Expr sub(const Expr &e) const { return spec::substitute(e, subst); }

  /// Only the params other than `param` bound (their fixed values).
  void bind_fixed(const spec::Env &fixed, const std::string &param) {
    subst.clear();
    for (auto &[k, v] : fixed)
      if (k != param) subst[k] = Expr::integer(v);
  }

  void add_site(Site s) {
    s.guards = guards;
    sites.push_back(std::move(s));
  }

  void ref(const Expr &r, Region reg, const std::vector<CtxVar> &ctx) {
    const spec::Buffer *b = p.buffer(r.name);
    if (!b) return;
    int bi = static_cast<int>(b - p.buffers.data());
    const auto &subs = r.op == Op::Ref ? r.args : std::vector<Expr>{};
    {
      BoundsSite bs{bi, {}, reg, ctx, guards, spec::print(r), r.loc.line};
      for (auto &x : subs)
        bs.subs.push_back(sub(x));
      bounds.push_back(std::move(bs));
    }
    if (b->kind != spec::BufferKind::hbm) {
      for (auto &s : subs) {
        if (s.op == Op::Slice) {
          for (auto &x : s.args)
            if (x.op != Op::None) add_site({sub(x), Kind::slot, bi, -1, reg, ctx, spec::print(r)});
        } else if (s.op != Op::Ellipsis) {
          add_site({sub(s), Kind::slot, bi, -1, reg, ctx, spec::print(r)});
        }
      }
      return;
    }
    int rank = static_cast<int>(b->shape.size());
    int d = 0;
    for (std::size_t k = 0; k < subs.size(); ++k) {
      const Expr &s = subs[k];
      if (s.op == Op::Ellipsis) {
        int rest = static_cast<int>(subs.size() - k - 1);
        while (d + rest < rank)
          fulls.push_back({bi, d++, reg});
        continue;
      }
      if (s.op == Op::Slice) {
        if (s.args[0].op != Op::None) add_site({sub(s.args[0]), Kind::hbm, bi, d, reg, ctx, spec::print(r)});
        if (s.args[1].op != Op::None)
          add_site({sub(s.args[1]), Kind::hbm, bi, d, reg, ctx, spec::print(r)});
        else
          fulls.push_back({bi, d, reg});
      } else {
        add_site({sub(s), Kind::hbm, bi, d, reg, ctx, spec::print(r)});
      }
      ++d;
    }
    for (; d < rank; ++d)
      fulls.push_back({bi, d, reg});
  }

  void refs_in(const Expr &e, Region reg, const std::vector<CtxVar> &ctx) {
    if ((e.op == Op::Ref || e.op == Op::Name) && p.buffer(e.name)) {
      ref(e, reg, ctx);
      return;
    }
    for (auto &a : e.args)
      refs_in(a, reg, ctx);
  }

  void block(const spec::Block &b, Region reg, std::vector<CtxVar> ctx, bool guarded) {
    for (auto &s : b)
      stmt(s, reg, ctx, guarded);
  }

  void stmt(const spec::Stmt &s, Region reg, const std::vector<CtxVar> &ctx, bool guarded) {
    using namespace spec;
    if (auto *l = std::get_if<Let>(&s.kind)) {
      if (is_integer_expr(l->value, p) && !tensor_locals.count(l->name)) {
        if (guarded || bound_lets.count(l->name)) {
          fail = "the integer binding '" + l->name + "' is conditional or rebound";
          return;
        }
        bound_lets.insert(l->name);
        subst[l->name] = sub(l->value);
      } else {
        tensor_locals.insert(l->name);
        refs_in(l->value, reg, ctx);
      }
    } else if (auto *a = std::get_if<Assign>(&s.kind)) {
      ref(a->target, reg, ctx);
      refs_in(a->value, reg, ctx);
    } else if (auto *c = std::get_if<Copy>(&s.kind)) {
      if (c->src.op != Op::None) ref(c->src, reg, ctx);
      if (c->dst.op != Op::None) ref(c->dst, reg, ctx);
      // Where in its slot a copy lands decides what the slot holds (and its
      // padding): like a slot index, it must repeat with the loop.
      if (c->offset.op != Op::None) {
        const spec::Buffer *b = p.buffer(c->dst.name);
        const int bi = b ? static_cast<int>(b - p.buffers.data()) : -1;
        for (auto &x : c->offset.args)
          add_site({sub(x), Kind::slot, bi, -1, reg, ctx, "offset= of " + spec::print(c->dst)});
      }
    } else if (auto *w = std::get_if<Wgmma>(&s.kind)) {
      ref(w->acc, reg, ctx), ref(w->a, reg, ctx), ref(w->b, reg, ctx);
    } else if (auto *w = std::get_if<WgmmaWait>(&s.kind)) {
      add_site({sub(w->n), Kind::slot, -1, -1, reg, ctx, "wgmma_wait"});
    } else if (std::holds_alternative<Dma>(s.kind)) {
      // A semaphore's count is state the induction does not carry.
      fail = "DMAs on semaphores are checked concretely";
    } else if (auto *i = std::get_if<If>(&s.kind)) {
      add_site({sub(i->cond), Kind::guard, -1, -1, reg, ctx, "if " + spec::print(i->cond)});
      guards.push_back(sub(i->cond));
      block(i->then_body, reg, ctx, true);
      guards.back() = Expr::unary(Op::Not, sub(i->cond));
      block(i->else_body, reg, ctx, true);
      guards.pop_back();
    } else if (auto *f = std::get_if<For>(&s.kind)) {
      // Counted from its lower bound: `for j in range(lo, hi)` is `for k in
      // range(hi - lo)` with j = lo + k. What must not change is the trip
      // count; where j goes, its uses say (a drain `range(max(N - D, 0), N)`
      // is D trips of slots and rows that move with N).
      const Expr lo = sub(f->lo), trips = Expr::binary(Op::Sub, sub(f->hi), lo);
      {
        Expr at = trips;
        at.loc = s.loc;
        add_site({at, Kind::guard, -1, -1, reg, ctx,
                  "range(" + spec::print(f->lo) + ", " + spec::print(f->hi) + ")"});
      }
      const std::string counter = f->var + "#" + std::to_string(ctx.size());
      auto inner = ctx;
      inner.push_back({counter, Expr::integer(0), trips});
      auto saved = subst.find(f->var) != subst.end() ? std::optional(subst[f->var]) : std::nullopt;
      subst[f->var] = Expr::binary(Op::Add, lo, Expr::var(counter));
      block(f->body, reg, inner, guarded);
      if (saved)
        subst[f->var] = *saved;
      else
        subst.erase(f->var);
    }
  }
};

std::int64_t collect_period(const Expr &e) {
  std::int64_t p = 1;
  // `i % k` repeats every k iterations, and `i // k` moves once every k
  // (`i - 2 * (i // 2)` is a slot of period 2, `B[i // 2]` a row per pair).
  if ((e.op == Op::Mod || e.op == Op::FloorDiv) && e.args[1].op == Op::Int && e.args[1].int_value > 0)
    p = std::lcm(p, e.args[1].int_value);
  for (auto &a : e.args)
    p = std::lcm(p, collect_period(a));
  return p;
}

/// The result of one attempt at fixed (W, X), or of one of its checks.
struct Attempt {
  enum class Kind {
    proven,
    /// A fact fails for the smallest trip counts tried; it may hold from a
    /// larger X on (e.g. a bound `max(N, 10)`), so a larger X is worth a try.
    fails_for_small_n,
    /// A fact fails whatever X is: a larger X cannot help.
    fails,
  };
  Kind kind = Kind::proven;
  std::string reason;
  /// When an hbm subscript moved with N: its (buffer, dim). Read from the
  /// end, such a walk may not move (the mirrored retry of plan_induction).
  std::optional<std::pair<int, int>> moving = {};
  bool ok() const { return kind == Kind::proven; }
};
Attempt proven() { return {}; }
Attempt fails_for_small_n(std::string why) { return {Attempt::Kind::fails_for_small_n, std::move(why)}; }
Attempt fails(std::string why) { return {Attempt::Kind::fails, std::move(why)}; }

/// One attempt at fixed (W, X).
class Prover {
public:
  Prover(smt::Context &c, const Collector &col, const std::string &param, std::int64_t lo,
         std::optional<std::int64_t> hi, const std::string &ivar, std::int64_t loop_lo, const Expr &loop_hi,
         std::int64_t P, unsigned timeout_ms)
      : c_(c), col_(col), param_(param), lo_(lo), hi_(hi), ivar_(ivar), loop_lo_(loop_lo), loop_hi_(loop_hi),
        P_(P), timeout_(timeout_ms) {}

  int queries = 0;
  std::map<std::pair<int, int>, std::int64_t> shift;

  /// The buffers' extents: every one at least 1 for every N >= lo_ (else
  /// `witness` is the smallest N where one is not, which the caller runs
  /// and validation rejects); and, from N = X_ on, a slot buffer's or a
  /// whole-dimension access's extent the same for every N (what a copy or a
  /// slot covers does not move with N).
  Attempt shapes(std::optional<std::int64_t> &witness) {
    smt::Term N = c_.int_var("N"), N2 = c_.int_var("N2");
    for (std::size_t bi = 0; bi < col_.p.buffers.size(); ++bi) {
      const spec::Buffer &b = col_.p.buffers[bi];
      std::vector<std::pair<Expr, int>> ext; // (extent, dim of the shape; -1 the slot count)
      if (b.slots) ext.emplace_back(col_.sub(*b.slots), -1);
      for (std::size_t d = 0; d < b.shape.size(); ++d)
        ext.emplace_back(col_.sub(b.shape[d]), static_cast<int>(d));
      for (const auto &[e, d] : ext) {
        const std::string what = "an extent of '" + b.name + "'";
        auto a = enc(e, N, std::nullopt, {}), a2 = enc(e, N2, std::nullopt, {});
        if (!a || !a2) return fails(what + " is not an integer expression of " + param_);
        if (!unsat(from_lo(N) && *a < 1, "extent-positive")) {
          auto h = smallest_n(from_lo(N) && *a < 1, N);
          if (!h) return fails(what + " may not be positive");
          witness = h;
          return fails(what + " is not positive at " + param_ + " = " + std::to_string(*h));
        }
        bool whole = b.kind != spec::BufferKind::hbm;
        for (const auto &f : col_.fulls)
          whole = whole || (f.buffer == static_cast<int>(bi) && f.dim == d);
        if (whole && !unsat(cN(N) && cN(N2) && *a != *a2, "extent-independent-of-N"))
          return fails_for_small_n("the shape of '" + b.name + "' changes with " + param_ +
                                   ", and with it what a copy or a slot covers");
      }
    }
    return proven();
  }

  /// With no loop that grows with N: from N = X on, every site is the same
  /// for every N (no loop, slot, subscript or branch moves with it).
  Attempt run_constant(std::int64_t X, std::optional<std::int64_t> &witness) {
    X_ = X;
    shift.clear();
    if (Attempt r = shapes(witness); !r.ok()) return r;
    for (const Site *s : ordered()) {
      Attempt r = check(*s);
      if (!r.ok()) return r;
    }
    return proven();
  }

  Attempt run(std::int64_t W, std::int64_t X, std::optional<std::int64_t> &witness) {
    W_ = W;
    X_ = X;
    shift.clear();
    if (Attempt r = shapes(witness); !r.ok()) return r;
    smt::Term N = c_.int_var("N");
    // The main loop's bound moves with N: hi(N + 1) == hi(N) + 1.
    {
      auto h0 = enc(loop_hi_, N, std::nullopt, {}), h1 = enc(loop_hi_, N + 1, std::nullopt, {});
      if (!h0 || !h1) return fails("the loop bound is not an integer expression of the params");
      auto slope = model_value(cN(N) && cN(N + 1), *h1 - *h0);
      if (!slope || *slope < 1 || *slope > 64 ||
          !unsat(cN(N) && cN(N + 1) && *h1 - *h0 != c_.num(static_cast<std::int64_t>(*slope)),
                 "loop-bound-grows-linearly-with-N"))
        return fails_for_small_n("the loop bound does not grow linearly with the trip count");
      // Growing N by q adds m whole periods of P iterations.
      q_ = P_ / std::gcd(P_, *slope);
      m_ = *slope * q_ / P_;
    }
    for (const Site *s : ordered()) {
      Attempt r = check(*s);
      if (!r.ok()) return r;
    }
    for (auto &f : col_.fulls) {
      if (f.region == Region::prologue) continue;
      auto it = shift.find({f.buffer, f.dim});
      if (it != shift.end() && it->second != 0)
        return fails("a whole-dimension access to '" + col_.p.buffers[f.buffer].name +
                     "' does not move with the loop");
    }
    return proven();
  }

  /// in_bounds for every access the collector saw; the first that fails.
  Attempt every_access_in_bounds(std::optional<std::int64_t> &witness) {
    for (const auto &b : col_.bounds)
      if (Attempt in = in_bounds(b, witness); !in.ok()) return in;
    return proven();
  }

  /// Whether every access of `b` stays inside its buffer for every N the
  /// last run() covers; when not proven, why not, with
  /// `witness` set to the smallest such N at which an access leaves it.
  Attempt in_bounds(const BoundsSite &b, std::optional<std::int64_t> &witness) {
    const spec::Buffer &buf = col_.p.buffers[static_cast<std::size_t>(b.buffer)];
    std::vector<Expr> extents;
    if (buf.slots) extents.push_back(col_.sub(*buf.slots));
    for (auto &e : buf.shape)
      extents.push_back(col_.sub(e));
    std::vector<bool> ellipsis;
    for (auto &x : b.subs)
      ellipsis.push_back(x.op == Op::Ellipsis);
    auto dims = spec::subscript_dims(extents.size(), ellipsis);
    const std::string fail = "cannot prove that '" + b.what + "' (line " + std::to_string(b.line) +
                             ") stays inside '" + buf.name + "' for every " + param_;
    if (!dims) return fails(fail);
    std::map<std::string, smt::Term> ctx;
    for (auto &cv : b.ctx)
      ctx.emplace(cv.var, c_.int_var("v_" + cv.var));
    smt::Term N = c_.int_var("N"), i = c_.int_var("i");
    std::optional<smt::Term> iv;
    if (b.region == Region::main) iv = i;
    auto e = [&](const Expr &x) { return enc(x, N, iv, ctx); };
    smt::Term bad = c_.boolean(false);
    for (std::size_t k = 0; k < b.subs.size(); ++k) {
      const int d = (*dims)[k];
      if (d < 0) continue;
      auto ext = e(extents[static_cast<std::size_t>(d)]);
      if (!ext) return fails(fail);
      const Expr &x = b.subs[k];
      if (x.op == Op::Slice) {
        std::optional<smt::Term> lo = x.args[0].op == Op::None ? c_.num(0) : e(x.args[0]);
        std::optional<smt::Term> hi = x.args[1].op == Op::None ? ext : e(x.args[1]);
        if (!lo || !hi) return fails(fail);
        bad = bad || *lo < 0 || *lo > *hi || *hi > *ext;
      } else {
        auto v = e(x);
        if (!v) return fails(fail);
        bad = bad || *v < 0 || *v >= *ext;
      }
    }
    // (Every N from the lower bound: an access's place needs no induction,
    // so the witness is the smallest N at which one leaves its buffer.)
    smt::Term pre = from_lo(N);
    if (iv) {
      auto h = enc(loop_hi_, N, std::nullopt, {});
      if (!h) return fails(fail);
      pre = pre && i >= c_.num(static_cast<std::int64_t>(loop_lo_)) && i < *h;
    }
    for (auto &cv : b.ctx) {
      auto l = e(cv.lo), h = e(cv.hi);
      if (!l || !h) return fails(fail);
      pre = pre && ctx.at(cv.var) >= *l && ctx.at(cv.var) < *h;
    }
    for (auto &g : b.guards) {
      auto gb = enc(g, N, iv, ctx);
      if (!gb) return fails(fail);
      pre = pre && smt::truthy(*gb);
    }
    if (unsat(pre && bad, "access-in-bounds")) return proven();
    // Sat (or undecided): look for the smallest N at which an access leaves
    // the buffer, so the driver can run it.
    auto hi = smallest_n(pre && bad, N);
    if (!hi) return fails(fail);
    witness = hi;
    return fails("'" + b.what + "' (line " + std::to_string(b.line) + ") leaves '" + buf.name + "' at " +
                 param_ + " = " + std::to_string(*hi));
  }

private:
  std::vector<const Site *> ordered() const {
    std::vector<const Site *> v;
    std::set<std::string> seen;
    for (int pass = 0; pass < 3; ++pass)
      for (auto &s : col_.sites) {
        if (static_cast<int>(s.kind) != pass) continue;
        std::string key = std::to_string(static_cast<int>(s.kind)) + "|" + std::to_string(s.buffer) + "|" +
                          std::to_string(s.dim) + "|" + std::to_string(static_cast<int>(s.region)) + "|" +
                          spec::print(s.e);
        for (auto &cv : s.ctx)
          key += "|" + cv.var + ":" + spec::print(cv.lo) + ":" + spec::print(cv.hi);
        for (auto &g : s.guards)
          key += "|if " + spec::print(g);
        if (seen.insert(key).second) v.push_back(&s);
      }
    return v;
  }

  // N within its declared bounds (cN: and past the attempt's X).
  smt::Term from_lo(const smt::Term &N) const {
    smt::Term r = N >= c_.num(static_cast<std::int64_t>(lo_));
    if (hi_) r = r && N <= c_.num(static_cast<std::int64_t>(*hi_));
    return r;
  }

  // The smallest N >= lo_ satisfying `bad` (a model of N bounding a binary
  // search); nullopt where the solver gives none.
  std::optional<std::int64_t> smallest_n(const smt::Term &bad, const smt::Term &N) {
    auto n = model_value(bad, N);
    if (!n) return std::nullopt;
    std::int64_t lo = lo_, hi = *n;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (auto m = model_value(bad && N <= c_.num(static_cast<std::int64_t>(mid)), N))
        hi = std::min(hi, *m);
      else
        lo = mid + 1;
    }
    return hi;
  }

  smt::Term cN(const smt::Term &N) const {
    smt::Term r = N >= c_.num(static_cast<std::int64_t>(std::max(lo_, X_)));
    if (hi_) r = r && N <= c_.num(static_cast<std::int64_t>(*hi_));
    return r;
  }

  std::optional<smt::Term> enc(const Expr &e, const smt::Term &N, std::optional<smt::Term> i,
                               const std::map<std::string, smt::Term> &ctx) {
    smt::Bindings bind;
    bind.names.emplace(param_, N);
    if (i && !ivar_.empty()) bind.names.emplace(ivar_, *i);
    for (auto &[k, v] : ctx)
      bind.names.insert_or_assign(k, v);
    auto t = smt::translate(c_, e, bind);
    if (!t.term) enc_error_ = t.error;
    return t.term;
  }
  std::string enc_error_; ///< why the last enc that failed did (smt::Translation::error)
  // Why a site's expression is not one the proof takes.
  std::string not_encoded() const {
    return enc_error_.empty() ? "is not an integer expression" : "is not one the proof takes: " + enc_error_;
  }

  std::optional<smt::Term> ctx_ok(const Site &s, const smt::Term &N, std::optional<smt::Term> i,
                                  const std::map<std::string, smt::Term> &ctx) {
    smt::Term r = c_.boolean(true);
    for (auto &cv : s.ctx) {
      auto l = enc(cv.lo, N, i, ctx), h = enc(cv.hi, N, i, ctx);
      if (!l || !h) return std::nullopt;
      r = r && ctx.at(cv.var) >= *l && ctx.at(cv.var) < *h;
    }
    for (auto &g : s.guards) {
      auto t = enc(g, N, i, ctx);
      if (!t) return std::nullopt;
      r = r && smt::truthy(*t);
    }
    return r;
  }

  smt::Solver &solver() {
    if (!solver_) solver_ = std::make_unique<smt::Solver>(c_, timeout_);
    return *solver_;
  }

  // Named after the fact it refutes, so an unsat core explains itself.
  bool unsat(const smt::Term &f, const char *name) {
    if (smt::interrupted()) return false;
    ++queries;
    smt::Solver &s = solver();
    s.push();
    s.add(f, name);
    bool r = s.check().kind == smt::Result::unsat;
    s.pop();
    return r;
  }

  std::optional<std::int64_t> model_value(const smt::Term &pre, const smt::Term &v) {
    ++queries;
    smt::Solver &s = solver();
    s.push();
    s.add(pre, "pre");
    std::optional<std::int64_t> r;
    if (s.check().kind == smt::Result::sat) r = s.try_value(v);
    s.pop();
    return r;
  }

  Attempt record_shift(const Site &s, std::int64_t d) {
    auto [it, fresh] = shift.emplace(std::make_pair(s.buffer, s.dim), d);
    if (!fresh && it->second != d)
      return fails("accesses to '" + col_.p.buffers[s.buffer].name + "' move by different amounts");
    return proven();
  }

  Attempt check(const Site &s) {
    Attempt r = check_site(s);
    if (r.kind == Attempt::Kind::fails_for_small_n && s.kind == Kind::hbm && s.buffer >= 0 && s.dim >= 0)
      r.moving = std::make_pair(s.buffer, s.dim);
    return r;
  }

  Attempt check_site(const Site &s) {
    std::map<std::string, smt::Term> ctx;
    for (auto &cv : s.ctx)
      ctx.emplace(cv.var, c_.int_var("v_" + cv.var));
    smt::Term N = c_.int_var("N"), N2 = c_.int_var("N2"), i = c_.int_var("i");
    std::string fail = "'" + s.what + "' (line " + std::to_string(s.e.loc.line) + ") ";
    auto inv = [&](std::optional<smt::Term> i1, std::optional<smt::Term> i2) -> bool {
      auto a = enc(s.e, N, i1, ctx), b = enc(s.e, N2, i2, ctx);
      auto ca = ctx_ok(s, N, i1, ctx), cb = ctx_ok(s, N2, i2, ctx);
      if (!a || !b || !ca || !cb) return false;
      return unsat(cN(N) && cN(N2) && *ca && *cb && *a != *b, "site-independent-of-N");
    };
    if (s.region == Region::prologue) {
      if (!inv(std::nullopt, std::nullopt))
        return fails_for_small_n(fail + "depends on the trip count before the loop");
      return proven();
    }
    auto hi_of = [&](const smt::Term &n) { return enc(loop_hi_, n, std::nullopt, {}); };
    if (s.region == Region::main) {
      for (std::int64_t t = 0; t < W_; ++t) {
        smt::Term it = c_.num(static_cast<std::int64_t>(loop_lo_ + t));
        if (!inv(it, it))
          return fails_for_small_n(fail + "depends on the trip count in the first iterations");
      }
      auto h = hi_of(N), h2 = hi_of(N2);
      if (!h || !h2) return fails("bad loop bound");
      auto mid = [&](const smt::Term &ii, const smt::Term &hh) {
        return ii >= c_.num(static_cast<std::int64_t>(loop_lo_ + W_)) &&
               ii <= hh - 1 - c_.num(static_cast<std::int64_t>(W_));
      };
      // Independent of N in the middle.
      {
        auto a = enc(s.e, N, i, ctx), b = enc(s.e, N2, i, ctx);
        auto ca = ctx_ok(s, N, i, ctx), cb = ctx_ok(s, N2, i, ctx);
        if (!a || !b || !ca || !cb) return fails(fail + not_encoded());
        if (!unsat(cN(N) && cN(N2) && mid(i, *h) && mid(i, *h2) && *ca && *cb && *a != *b,
                   "middle-independent-of-N"))
          return fails_for_small_n(fail + "depends on the trip count in the middle iterations");
      }
      // Guards and slots repeat with the period (a guard `i % 2 == 0` of a
      // loop that pairs its iterations as much as a slot `i % 2`).
      const std::int64_t step = P_;
      smt::Term j = i + c_.num(static_cast<std::int64_t>(step));
      auto a = enc(s.e, N, i, ctx), b = enc(s.e, N, j, ctx);
      auto ca = ctx_ok(s, N, i, ctx), cb = ctx_ok(s, N, j, ctx);
      if (!a || !b || !ca || !cb) return fails(fail + not_encoded());
      smt::Term pre = cN(N) && mid(i, *h) && mid(j, *h) && *ca && *cb;
      if (s.kind == Kind::hbm) {
        // Under a branch taken nowhere in the middle (a drain's last copy),
        // the subscript is never evaluated there.
        if (!s.guards.empty() && unsat(pre, "site-reached-in-middle")) return end_facts(s, ctx, fail);
        auto d = model_value(pre, *b - *a);
        if (!d) return fails(fail + "cannot be related across iterations");
        if (!unsat(pre && *b - *a != c_.num(static_cast<std::int64_t>(*d)), "hbm-shift-per-period"))
          return fails(fail + "does not move by a constant per period");
        if (auto r = record_shift(s, *d); !r.ok()) return r;
      } else if (!unsat(pre && *a != *b,
                        s.kind == Kind::guard ? "guard-periodic-in-middle" : "slot-periodic-in-middle")) {
        return fails(fail + (s.kind == Kind::guard
                                 ? "does not repeat with the period in the middle iterations"
                                 : "is not periodic in the loop variable"));
      }
    }
    return end_facts(s, ctx, fail);
  }

  // Tail iterations and the epilogue: as N grows by P, guards and slots keep
  // their values and hbm subscripts move by the shift.
  Attempt end_facts(const Site &s, const std::map<std::string, smt::Term> &ctx, const std::string &fail) {
    smt::Term N = c_.int_var("N");
    auto hi_of = [&](const smt::Term &n) { return enc(loop_hi_, n, std::nullopt, {}); };
    smt::Term NP = N + c_.num(static_cast<std::int64_t>(q_));
    std::vector<std::optional<std::pair<smt::Term, smt::Term>>> insts;
    if (s.region == Region::main) {
      auto h = hi_of(N), hp = hi_of(NP);
      for (std::int64_t t = 0; t < W_; ++t)
        insts.push_back(std::make_pair(*h - 1 - c_.num(static_cast<std::int64_t>(t)),
                                       *hp - 1 - c_.num(static_cast<std::int64_t>(t))));
    } else {
      insts.push_back(std::nullopt);
    }
    for (auto &in : insts) {
      std::optional<smt::Term> i1, i2;
      if (in) i1 = in->first, i2 = in->second;
      auto a = enc(s.e, N, i1, ctx), b = enc(s.e, NP, i2, ctx);
      auto ca = ctx_ok(s, N, i1, ctx), cb = ctx_ok(s, NP, i2, ctx);
      if (!a || !b || !ca || !cb)
        return fails_for_small_n(fail + "is not an integer expression of the trip count");
      smt::Term pre = cN(N) && cN(NP) && *ca && *cb;
      if (s.kind == Kind::hbm) {
        if (!s.guards.empty() && unsat(pre, "site-reached-at-end")) continue;
        auto d = model_value(pre, *b - *a);
        if (!d) return fails_for_small_n(fail + "cannot be related across trip counts");
        if (!unsat(pre && *b - *a != c_.num(static_cast<std::int64_t>(*d)), "hbm-shift-at-end"))
          return fails_for_small_n(fail + "does not move by a constant with the trip count");
        if (*d % m_ != 0) return fails(fail + "does not move with the loop at the end");
        if (auto r = record_shift(s, *d / m_); !r.ok()) return r;
      } else if (!unsat(pre && *a != *b, "periodic-at-end")) {
        return fails_for_small_n(fail + "changes with the trip count at the end of the loop");
      }
    }
    return proven();
  }

  smt::Context &c_;
  const Collector &col_;
  std::string param_;
  std::int64_t lo_;
  std::optional<std::int64_t> hi_;
  std::string ivar_;
  std::int64_t loop_lo_;
  Expr loop_hi_;
  std::int64_t P_;
  unsigned timeout_;
  std::int64_t W_ = 1, X_ = 1;
  std::unique_ptr<smt::Solver> solver_;

public:
  std::int64_t q_ = 1, m_ = 1;
};

/// A plan that stops at an access (or an extent) that fails at some N,
/// `witness` the smallest such N where the solver found one.
InductionPlan out_of_bounds_plan(InductionPlan plan, std::string reason, std::optional<std::int64_t> witness,
                                 int queries) {
  plan.kind = InductionPlan::Kind::out_of_bounds;
  plan.reason = std::move(reason);
  plan.out_of_bounds_at = witness;
  plan.queries = queries;
  return plan;
}

/// No loop grows with N (N sizes an array, or bounds a fixed loop's
/// guard): the proof is that nothing the race machine follows moves with N
/// past some N = X, so every larger N runs as X does, and that every access
/// stays inside its buffer for every N.
InductionPlan plan_constant(const spec::Program &p, const std::string &param, std::int64_t lo,
                            std::optional<std::int64_t> hi, const spec::Env &fixed, unsigned timeout_ms,
                            std::optional<std::pair<int, int>> &moving) {
  InductionPlan plan;
  Collector col{p, {}, {}, {}, {}, {}, {}, {}, {}};
  col.bind_fixed(fixed, param);
  for (const auto &st : p.body)
    col.stmt(st, Region::prologue, {}, false);
  if (!col.fail.empty()) {
    plan.reason = "no loop grows with " + param + ", and " + col.fail;
    return plan;
  }
  auto moves = [&](const Expr &e) { return spec::mentions(col.sub(e), param); };
  // A slot's extent, or a whole dimension an access spans, that moves with N
  // moves what the access covers.
  for (const auto &b : p.buffers) {
    if (b.kind == spec::BufferKind::hbm) continue;
    bool m = b.slots && moves(*b.slots);
    for (const auto &e : b.shape)
      m = m || moves(e);
    if (m) {
      plan.reason = "no loop grows with " + param + ", and the shape of '" + b.name + "' does";
      return plan;
    }
  }
  for (const auto &f : col.fulls)
    if (moves(p.buffers[static_cast<std::size_t>(f.buffer)].shape[static_cast<std::size_t>(f.dim)])) {
      plan.reason = "no loop grows with " + param + ", and an access spans all of a dimension of '" +
                    p.buffers[static_cast<std::size_t>(f.buffer)].name + "' that does";
      return plan;
    }
  smt::Context c;
  Prover prover(c, col, param, lo, hi, "", 0, Expr::integer(0), 1, timeout_ms);
  std::string first_reason;
  // From which N on nothing moves: the first few, then past each constant
  // the program compares or bounds with (`if N > 40`, `range(min(N, 10))`).
  std::set<std::int64_t> from;
  for (std::int64_t X = lo; X <= lo + 8; ++X)
    from.insert(X);
  std::function<void(const Expr &)> consts = [&](const Expr &e) {
    if (e.op == Op::Int && e.int_value > lo + 8 && e.int_value <= lo + 64) from.insert(e.int_value + 1);
    for (auto &a : e.args)
      consts(a);
  };
  for (const auto &st : p.body)
    spec::for_each_stmt(st, [&](const spec::Stmt &x) {
      if (const auto *i = std::get_if<spec::If>(&x.kind)) consts(i->cond);
      if (const auto *f = std::get_if<spec::For>(&x.kind)) consts(f->lo), consts(f->hi);
      if (const auto *l = std::get_if<spec::Let>(&x.kind)) consts(l->value);
    });
  for (std::int64_t X : from) {
    if (hi && X > *hi) break;
    std::optional<std::int64_t> bad_extent;
    Attempt r = prover.run_constant(X, bad_extent);
    if (bad_extent) return out_of_bounds_plan(plan, r.reason, bad_extent, prover.queries);
    if (!r.ok()) {
      if (first_reason.empty()) {
        first_reason = r.reason;
        moving = r.moving;
      }
      if (r.kind != Attempt::Kind::fails_for_small_n) break;
      continue;
    }
    std::optional<std::int64_t> witness;
    if (Attempt in = prover.every_access_in_bounds(witness); !in.ok())
      return out_of_bounds_plan(plan, in.reason, witness, prover.queries);
    plan.kind = InductionPlan::Kind::proven;
    plan.ok = true;
    plan.n_struct = X;
    plan.queries = prover.queries;
    return plan;
  }
  plan.queries = prover.queries;
  plan.reason = "no loop grows with " + param + ", and " +
                (first_reason.empty() ? "a site moves with it" : first_reason);
  return plan;
}

/// The plan for `p` as written; `moving` is set where the first fact that
/// failed was an hbm subscript moving with N.
InductionPlan plan_program(const spec::Program &p, const std::string &param, std::int64_t lo,
                           std::optional<std::int64_t> hi, const spec::Env &fixed, unsigned timeout_ms,
                           std::optional<std::pair<int, int>> &moving) {
  InductionPlan plan;
  Collector col{p, {}, {}, {}, {}, {}, {}, {}, {}};
  col.bind_fixed(fixed, param);
  // Find the main loop: the one top-level `for` whose bound mentions N.
  std::size_t main_idx = p.body.size();
  for (std::size_t k = 0; k < p.body.size(); ++k) {
    auto &s = p.body[k];
    if (auto *l = std::get_if<spec::Let>(&s.kind)) {
      if (is_integer_expr(l->value, p)) col.subst[l->name] = col.sub(l->value);
    }
    if (auto *f = std::get_if<spec::For>(&s.kind)) {
      // A loop grows with N when its trip count does: a drain
      // `range(max(N - D, 0), N)` runs D times however large N is.
      Expr h = col.sub(f->hi), l = col.sub(f->lo);
      spec::Env probe{{param, 1 << 20}};
      auto big = spec::eval_int(h, probe), big_lo = spec::eval_int(l, probe);
      probe[param] = (1 << 20) + 1;
      auto big2 = spec::eval_int(h, probe), big2_lo = spec::eval_int(l, probe);
      if (spec::mentions(h, param) && big && big2 && big_lo && big2_lo &&
          *big2 - *big2_lo != *big - *big_lo) {
        if (main_idx != p.body.size()) {
          plan.reason = "more than one loop grows with " + param;
          return plan;
        }
        main_idx = k;
      }
    }
  }
  if (main_idx == p.body.size()) {
    // A loop that grows nested in another (rows, then a K loop per row) is
    // one the proof does not take: say which.
    const spec::Stmt *hit = nullptr;
    for (const auto &top : p.body)
      spec::for_each_stmt(top, [&](const spec::Stmt &st) {
        if (const auto *f = std::get_if<spec::For>(&st.kind);
            !hit && &st != &top && f && spec::mentions(f->hi, param))
          hit = &st;
      });
    if (hit) {
      plan.reason = "the loop that grows with " + param + " (line " + std::to_string(hit->loc.line) +
                    ") is nested in another loop or branch; the proof takes a loop at the top level";
      return plan;
    }
    return plan_constant(p, param, lo, hi, fixed, timeout_ms, moving);
  }
  col.bind_fixed(fixed, param);
  const auto &main_stmt = p.body[main_idx];
  const auto &loop = std::get<spec::For>(main_stmt.kind);
  for (std::size_t k = 0; k < main_idx; ++k)
    col.stmt(p.body[k], Region::prologue, {}, false);
  Expr loop_lo = col.sub(loop.lo), loop_hi = col.sub(loop.hi);
  auto lo_v = spec::eval_int(loop_lo, {});
  if (!lo_v) {
    plan.reason = "the loop's lower bound is not constant";
    return plan;
  }
  col.subst.erase(loop.var);
  col.block(loop.body, Region::main, {}, false);
  for (std::size_t k = main_idx + 1; k < p.body.size(); ++k)
    col.stmt(p.body[k], Region::epilogue, {}, false);
  if (!col.fail.empty()) {
    plan.reason = col.fail;
    return plan;
  }
  std::int64_t P = 1;
  for (auto &s : col.sites)
    if (s.region != Region::prologue) P = std::lcm(P, collect_period(s.e));
  if (P > 64) {
    plan.reason =
        "the loop's slot indices and guards repeat only every " + std::to_string(P) +
        " iterations, more than the 64 the proof takes (a ring of more slots, or a guard like `i % 67`)";
    return plan;
  }
  plan.loop = &loop;
  plan.loop_lo = *lo_v;
  plan.loop_hi = loop_hi;
  plan.period = P;

  smt::Context c; // interrupted with every other context by smt::interrupt_all
  Prover prover(c, col, param, lo, hi, loop.var, *lo_v, loop_hi, P, timeout_ms);
  std::string first_reason;
  // A guard `i + c < N` or `i >= c` settles only c iterations from either end:
  // start the window at the largest constant a loop guard compares with.
  std::int64_t w0 = 1;
  std::function<void(const Expr &)> consts = [&](const Expr &e) {
    if (e.op == Op::Int) w0 = std::max<std::int64_t>(w0, std::min<std::int64_t>(std::abs(e.int_value), 16));
    for (auto &a : e.args)
      consts(a);
  };
  for (auto &s : col.sites)
    if (s.region == Region::main && s.kind == Kind::guard) consts(s.e);
  std::vector<std::int64_t> windows{w0, w0 + 1, w0 + 2, 8};
  if (w0 > 1) windows.push_back(1);
  std::sort(windows.begin(), windows.end());
  windows.erase(std::unique(windows.begin(), windows.end()), windows.end());
  windows.erase(
      std::remove_if(windows.begin(), windows.end(), [&](std::int64_t w) { return w < w0 && w != 1; }),
      windows.end());
  std::stable_partition(windows.begin(), windows.end(), [&](std::int64_t w) { return w >= w0; });
  for (std::int64_t W : windows) {
    // X0: the smallest N whose middle holds at least P + 1 iterations.
    std::optional<std::int64_t> x0;
    for (std::int64_t n = lo; n < lo + 100000; ++n) {
      auto h = spec::eval_int(loop_hi, {{param, n}});
      if (h && *h - 1 - W >= *lo_v + W + P) {
        x0 = n;
        break;
      }
    }
    if (!x0) continue;
    if (hi && *x0 > *hi) break;
    for (std::int64_t X : {*x0, *x0 + 8, 2 * *x0 + 8}) {
      if (hi && X > *hi) continue;
      std::optional<std::int64_t> bad_extent;
      Attempt r = prover.run(W, X, bad_extent);
      if (bad_extent) return out_of_bounds_plan(plan, r.reason, bad_extent, prover.queries);
      if (r.ok()) {
        // The states recur, but a shifted access may still leave a buffer
        // whose extent does not grow with N.
        std::optional<std::int64_t> witness;
        if (Attempt in = prover.every_access_in_bounds(witness); !in.ok())
          return out_of_bounds_plan(plan, in.reason, witness, prover.queries);
        plan.kind = InductionPlan::Kind::proven;
        plan.ok = true;
        plan.window = W;
        plan.n_struct = X;
        plan.shift = prover.shift;
        plan.n_step = prover.q_;
        plan.queries = prover.queries;
        return plan;
      }
      if (first_reason.empty()) {
        first_reason = r.reason;
        moving = r.moving;
      }
      if (r.kind != Attempt::Kind::fails_for_small_n) break;
    }
  }
  plan.queries = prover.queries;
  plan.reason = first_reason.empty() ? "no window closes the induction" : first_reason;
  return plan;
}

// ------------------------------------------------------- read from the end

/// The subscript of ref `r` (of a buffer of rank `rank`) that indexes
/// dimension `dim` (spec::subscript_dims): null where none does (an
/// ellipsis, a missing trailing one: the whole dimension) or the
/// subscripts outnumber the dimensions.
template <class R> auto subscript_of(R &r, std::size_t rank, int dim) -> decltype(&r.args[0]) {
  std::vector<bool> ellipsis;
  for (const Expr &x : r.args)
    ellipsis.push_back(x.op == Op::Ellipsis);
  const auto dims = spec::subscript_dims(rank, ellipsis);
  for (std::size_t k = 0; dims && k < dims->size(); ++k)
    if ((*dims)[k] == dim) return &r.args[k];
  return nullptr;
}

/// Whether dimension `dim` of hbm buffer `bi` may be read from its end
/// (mirrored): the buffer appears only as a copy's hbm side, never with
/// zeros= (a region past its end), its subscripts on that dimension are
/// integers or slices of them, and where a slice copies several of its
/// elements in their order, which lands where in the slot decides nothing
/// checked: the buffer is only read by copies (defined throughout) or only
/// written (never read back).
bool mirrorable(const spec::Program &p, int bi, int dim) {
  const spec::Buffer &b = p.buffers[static_cast<std::size_t>(bi)];
  const std::size_t rank = b.shape.size();
  if (b.kind != spec::BufferKind::hbm || dim < 0 || static_cast<std::size_t>(dim) >= rank) return false;
  bool ok = true, read = false, written = false, sliced = false;
  auto integer = [&](const Expr &x) { return x.op == Op::None || is_integer_expr(x, p); };
  for_each_stmt(p.body, [&](const spec::Stmt &st) {
    if (std::holds_alternative<spec::EmitPipeline>(st.kind)) ok = false;
    const auto *c = std::get_if<spec::Copy>(&st.kind);
    if (!c) {
      spec::for_each_expr(st, [&](const Expr &e) { ok = ok && !spec::mentions(e, b.name); });
      return;
    }
    if (c->offset.op != Op::None && spec::mentions(c->offset, b.name)) ok = false;
    for (const Expr *side : {&c->src, &c->dst}) {
      if (side->op == Op::None || !spec::mentions(*side, b.name)) continue;
      if ((side->op != Op::Ref && side->op != Op::Name) || side->name != b.name || c->zeros) {
        ok = false;
        continue;
      }
      (c->kind == spec::CopyKind::in_start ? read : written) = true;
      for (const Expr &x : side->args)
        ok = ok && !spec::mentions(x, b.name);
      const Expr *x = subscript_of(*side, rank, dim);
      sliced = sliced || !x || x->op == Op::Slice;
      if (x)
        ok = ok && (x->op == Op::Slice ? integer(x->args[0]) && integer(x->args[1]) : is_integer_expr(*x, p));
    }
  });
  return ok && !(read && written && sliced);
}

/// `p` with dimension d of each (buffer, d) in `dims` read from its end:
/// element x of extent S is element S - 1 - x, a region lo:hi is S - hi:S - lo
/// (the same elements, mirrored; each copy's region keeps its order).
spec::Program mirrored(const spec::Program &p, const std::vector<std::pair<int, int>> &dims) {
  spec::Program m = p;
  std::function<void(spec::Block &)> walk = [&](spec::Block &blk) {
    for (spec::Stmt &st : blk) {
      if (auto *c = std::get_if<spec::Copy>(&st.kind)) {
        for (Expr *side : {&c->src, &c->dst})
          for (const auto &[bi, d] : dims) {
            const spec::Buffer &b = p.buffers[static_cast<std::size_t>(bi)];
            if (side->op != Op::Ref || side->name != b.name) continue;
            Expr *x = subscript_of(*side, b.shape.size(), d);
            if (!x) continue;
            const Expr &S = b.shape[static_cast<std::size_t>(d)];
            auto from_end = [&](const Expr &v) { return Expr::binary(Op::Sub, S, v, v.loc); };
            if (x->op == Op::Slice) {
              Expr lo = x->args[0], hi = x->args[1];
              x->args[0] = hi.op == Op::None ? hi : from_end(hi);
              x->args[1] = lo.op == Op::None ? lo : from_end(lo);
            } else {
              *x = from_end(Expr::binary(Op::Add, *x, Expr::integer(1, x->loc), x->loc));
            }
          }
      } else if (auto *i = std::get_if<spec::If>(&st.kind)) {
        walk(i->then_body);
        walk(i->else_body);
      } else if (auto *f = std::get_if<spec::For>(&st.kind)) {
        walk(f->body);
      }
    }
  };
  walk(m.body);
  return m;
}

} // namespace

InductionPlan plan_induction(const spec::Program &p, const std::string &param, std::int64_t lo,
                             std::optional<std::int64_t> hi, const spec::Env &fixed, unsigned timeout_ms) {
  std::optional<std::pair<int, int>> moving;
  InductionPlan plan = plan_program(p, param, lo, hi, fixed, timeout_ms, moving);
  if (plan.kind != InductionPlan::Kind::not_proven) return plan;
  // A walk from the end (the prologue's `A[N - 1]`, the loop's `A[N - 1 - i]`)
  // moves with N as written, and not read from the end: the program with
  // those dimensions mirrored copies the mirrored elements, copy by copy, so
  // its races and bounds are this one's. Each retry mirrors the dimension
  // the last one found moving.
  std::vector<std::pair<int, int>> dims;
  int queries = plan.queries;
  while (moving && dims.size() < 8 && std::find(dims.begin(), dims.end(), *moving) == dims.end() &&
         mirrorable(p, moving->first, moving->second)) {
    dims.push_back(*moving);
    auto m = std::make_shared<const spec::Program>(mirrored(p, dims));
    moving.reset();
    InductionPlan next = plan_program(*m, param, lo, hi, fixed, timeout_ms, moving);
    queries += next.queries;
    if (next.kind == InductionPlan::Kind::proven) {
      next.program = m;
      for (const auto &[bi, d] : dims)
        next.mirrored.emplace_back(p.buffers[static_cast<std::size_t>(bi)].name, d);
      next.queries = queries;
      return next;
    }
    if (next.kind == InductionPlan::Kind::out_of_bounds) {
      // (The same access leaves this program's buffer at the same N: the
      // caller runs it there, and reports it in this program's words.)
      plan.kind = next.kind;
      plan.out_of_bounds_at = next.out_of_bounds_at;
      if (next.out_of_bounds_at)
        plan.reason += "; read from the end, an access leaves its buffer at " + param + " = " +
                       std::to_string(*next.out_of_bounds_at);
      break;
    }
  }
  plan.queries = queries;
  return plan;
}

} // namespace pipecheck::verifier::races
