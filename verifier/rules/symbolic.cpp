#include "verifier/rules/symbolic.hpp"

#include "spec/bind.hpp"
#include "spec/place.hpp"
#include "spec/prefetch.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/smt/smt.hpp"

#include <algorithm>
#include <cassert>
#include <functional>
#include <optional>
#include <tuple>

namespace pipecheck::verifier::rules {

namespace {

using smt::Term;

struct SymPoint {
  std::vector<Term> v;
  bool grid = true; ///< a grid point (minimized in run order), not a block index
};

// An output in memory_space=any, not aliased, that the body does not store
// into as if it were a block (any-space-access's case: one root cause): only
// copies write it.
bool any_output_written_by_copies(const KernelModel &m, std::size_t op) {
  const auto &o = m.operands[op];
  if (o.role != spec::Role::out || o.windowed || !o.decl || o.decl->memory_space != spec::MemorySpace::any ||
      m.is_aliased_output(op))
    return false;
  return std::none_of(m.effects.begin(), m.effects.end(), [&](const Effect &e) { return e.operand == op; });
}

class Sym {
public:
  Sym(const KernelModel &m, unsigned timeout_ms, QueryCache *cache)
      : m_(m), solver_(ctx_, timeout_ms), timeout_ms_(timeout_ms), cache_(cache), axes_(run_axes(m)) {}

  // Open prefetch contents: one solver variable per element, under the
  // stated constraints in every query. `m.env` (which `env` points into)
  // holds the contents of the last witness, so findings evaluate with them.
  Sym(KernelModel &m, unsigned timeout_ms, const spec::PrefetchSpace &space) : Sym(m, timeout_ms, nullptr) {
    env_ = &m.env;
    for (const auto &a : space.arrays) {
      if (a.given) continue;
      std::vector<Term> xs;
      for (std::int64_t k = 0; k < a.length; ++k) {
        Term x = ctx_.int_var("prefetch_" + a.name + "_" + std::to_string(k));
        pf_names_.emplace(spec::prefetch_element(a.name, k), x);
        pf_facts_.push_back(x >= a.lo.value_or(-2147483648LL));
        pf_facts_.push_back(x < a.hi.value_or(2147483648LL));
        if (a.nondecreasing && !xs.empty()) pf_facts_.push_back(x >= xs.back());
        pf_lower_.push_back(a.lo.value_or(-2147483648LL));
        xs.push_back(x);
      }
      if (a.sum) {
        Term t = ctx_.num(0);
        for (const auto &x : xs)
          t = t + x;
        pf_facts_.push_back(t == *a.sum);
      }
      pf_arrays_.emplace_back(a.name, std::move(xs));
    }
  }

  RuleOutcome run() {
    for (std::size_t i = 0; i < m_.operands.size(); ++i) {
      const auto &o = m_.operands[i];
      if (o.windowed && (o.role == spec::Role::in || o.role == spec::Role::out)) {
        out_of_bounds(i);
        if (m_.triton) triton_loads_past_end(i);
      }
      if (o.role == spec::Role::out && o.windowed) {
        // (Triton has no block that stays across visits to revisit or
        // reset: its programs' stores meet per element, or not at all.)
        if (!o.revisit_any && !m_.triton) revisit(i);
        if (needs_element_coverage(m_, i)) {
          if (element_pass_by_solver(m_, i)) {
            // Too many programs to replay: their stores meet only where two
            // static boxes overlap on one block, which the solver decides.
            triton_races(i);
            triton_garbage(i);
            triton_past_end(i);
            if (!m_.is_aliased_output(i)) not_covered(i);
          } else if (env_ && effects_read_contents(i)) {
            // The replay evaluates at one contents (m.env's): decided per
            // contents instead (check_each_contents), which names them.
            out_.unknown.push_back("the element pass over '" + o.name +
                                   "' depends on the open prefetch contents (a guard, subscript or mask of "
                                   "an access reads them)");
          } else {
            element_output_findings(m_, i, out_.findings, out_.unknown);
          }
        } else {
          parallel_conflict(i);
          if (!m_.is_aliased_output(i)) not_covered(i);
        }
        if (m_.is_read(i) && !m_.triton) {
          if (output_as_scratch(m_, i))
            scratch_resets(i);
          else
            resets(i);
        }
        if (copied_out_per_visit(m_, i)) lost_output_writes(i);
        if (copied_out_after_loop(m_, i)) lost_last_slot_writes(i);
        overwritten_stores(i);
      }
      const std::size_t scratch_findings = out_.findings.size();
      if (output_as_scratch(m_, i)) scratch_carried(i);
      if (o.role == spec::Role::scratch) {
        scratch_resets(i);
        scratch_carried(i);
        readded(i);
        lost_accumulations(i);
      }
      // (Where the rules above fault none of its inits, a select's fresh
      // init cuts the carry: carry_use.)
      if (o.role == spec::Role::scratch && scratch_shared_across_parallel_axes(m_))
        scratch_carry(i, out_.findings.size() == scratch_findings);
    }
    hbm_copy_conflicts(false);
    const std::vector<bool> kept = kept_garbage(m_, out_.findings, out_.unknown);
    for (const auto &e : m_.effects) {
      const auto &o = m_.operands[e.operand];
      if (e.keep && kept[e.operand]) continue;
      // An acc scratch (plgpu.ACC) starts at zero in every CTA.
      // (A Triton output's reads are its element pass's or triton_solver's:
      // per program, in order.)
      if ((e.kind == Effect::read || e.kind == Effect::accumulate) &&
          ((o.role == spec::Role::out && o.windowed && !m_.triton) ||
           (o.role == spec::Role::scratch && !o.acc)))
        uninitialized(e);
      if (e.kind != Effect::read && o.role == spec::Role::in && o.windowed && !input_masked_in_place(m_, e))
        input_write(e);
    }
    for (const auto &a : m_.copy_addresses)
      if (auto e = unaliased_input_copy(m_, a)) input_copy_write(*e);
    for (const auto &a : m_.aliases)
      alias(a);
    if (env_ && !pf_arrays_.empty()) copy_addresses();
    auto structural = structural_findings(
        m_, out_.unknown, [&](std::size_t e, std::size_t d) { return reads_last_block(m_.effects[e], d); });
    out_.findings.insert(out_.findings.end(), structural.begin(), structural.end());
    for (const auto &f : out_.findings)
      if (auto d = witness_error(m_, f)) {
        out_.errors.push_back(std::move(*d));
        out_.findings.clear();
        break;
      }
    if (env_) annotate_prefetch();
    finalize(out_.findings);
    return std::move(out_);
  }

  // Only the Triton race and garbage checks of the solver's path.
  RuleOutcome run_triton_races() {
    for (std::size_t i = 0; i < m_.operands.size(); ++i) {
      const auto &o = m_.operands[i];
      if (o.role != spec::Role::out || !o.windowed) continue;
      if (!triton_boxes_static(m_, i)) {
        out_.unknown.push_back("output '" + o.name + "' has a store or read whose box is not static");
        continue;
      }
      triton_races(i);
      triton_garbage(i);
    }
    finalize(out_.findings);
    return std::move(out_);
  }

  // The model's params without the elements of open contents (its env holds
  // those of the last witness): what a grid point's terms are folded with.
  spec::Env closed_params() const {
    spec::Env params = m_.env;
    for (const auto &[n, t] : pf_names_)
      params.erase(n);
    return params;
  }

  // `guards` at grid point p, folded with `params`: those that keep terms
  // (open contents, block data), or nullopt where one is false there.
  std::optional<std::vector<spec::Expr>> guards_at(const std::vector<spec::Expr> &guards,
                                                   const spec::Env &params, const Point &p) const {
    std::vector<spec::Expr> out;
    for (const auto &g : guards) {
      spec::Expr x = fold(g, params, p);
      if (x.op != spec::Op::Int)
        out.push_back(std::move(x));
      else if (x.int_value == 0)
        return std::nullopt;
    }
    return out;
  }

  // Open contents that make one of `bad` hold under the arrays' constraints
  // (the smallest where the tables are small): `params` with the elements
  // bound, also in env_ and pf_last_ for the findings; nullopt where none
  // does, or where the solver cannot say (then `unknown` names `name`).
  std::optional<spec::Env> witness_contents(const std::string &name, const std::vector<Term> &bad,
                                            const spec::Env &params) {
    if (bad.empty()) return std::nullopt;
    solver_.push();
    for (std::size_t i = 0; i < pf_facts_.size(); ++i)
      solver_.add(pf_facts_[i], name + "/contents" + std::to_string(i));
    solver_.add(ctx_.any_of(bad), name);
    smt::Result r = solver_.check();
    std::vector<std::int64_t> vals;
    if (r.kind == smt::Result::sat) {
      std::vector<Term> vars;
      for (const auto &[n, xs] : pf_arrays_)
        vars.insert(vars.end(), xs.begin(), xs.end());
      // Small tables get the smallest contents; a large one any (minimizing
      // hundreds of elements would cost a solver call each).
      constexpr std::size_t kMinimizeUpTo = 64;
      if (vars.size() <= kMinimizeUpTo) {
        vals = solver_.minimize_lex(vars, pf_lower_);
      } else {
        for (const auto &x : vars)
          vals.push_back(solver_.value(x));
      }
    } else if (r.kind == smt::Result::unknown) {
      out_.unknown.push_back(name + ": " + (r.reason.empty() ? "solver returned unknown" : r.reason));
    }
    solver_.pop();
    if (vals.empty()) return std::nullopt;
    spec::Env env = params;
    std::size_t at = 0;
    pf_last_.clear();
    for (const auto &[n, xs] : pf_arrays_) {
      std::vector<std::int64_t> v(vals.begin() + static_cast<std::ptrdiff_t>(at),
                                  vals.begin() + static_cast<std::ptrdiff_t>(at + xs.size()));
      for (std::size_t k = 0; k < v.size(); ++k) {
        env[spec::prefetch_element(n, static_cast<std::int64_t>(k))] = v[k];
        (*env_)[spec::prefetch_element(n, static_cast<std::int64_t>(k))] = v[k];
      }
      pf_last_[n] = std::move(v);
      at += xs.size();
    }
    return env;
  }

  // Only index-out-of-bounds of reads of prefetch arrays.
  RuleOutcome run_prefetch_reads() {
    prefetch_reads();
    if (env_) annotate_prefetch();
    finalize(out_.findings);
    return std::move(out_);
  }

  // index-out-of-bounds of a read of a prefetch array: at every grid point
  // (enumerated, as for copy addresses), under the read's guards, its
  // subscripts lie inside the array. Given contents fold every term to a
  // number; open ones are decided by one query over all allowed contents.
  // A guard that reads block data (no number with given contents) is not
  // decided here: that read is left out.
  void prefetch_reads() {
    if (m_.prefetch_reads.empty()) return;
    constexpr std::int64_t kMaxPoints = 1 << 16;
    const std::string name = "index-out-of-bounds/prefetch-reads";
    const std::int64_t points = m_.num_points();
    if (points > kMaxPoints) {
      out_.unknown.push_back(name + ": the grid has " + std::to_string(points) + " points, more than the " +
                             std::to_string(kMaxPoints) + " it is decided on");
      return;
    }
    const spec::Env params = closed_params();
    // Which subscript lies outside, at p under env.
    auto detail = [&](const PrefetchRead &r, const Point &p, const spec::Env &env) {
      return spec::elaborated_read_outside(
                 r.in_range,
                 [&](const spec::Expr &e) { return spec::evaluate(fold(e, env, p, r.locals), env).value; })
          .value_or("a subscript lies outside the array");
    };
    struct Instance {
      std::size_t read;
      Point p;
      std::vector<spec::Expr> guards;
      spec::Expr in;
    };
    std::vector<Instance> instances;
    std::vector<Term> bad;
    const smt::Bindings b = bindings({}, SymPoint{});
    for (std::int64_t k = 0; k < points; ++k) {
      const Point p = spec::grid_point(m_.grid, {}, k);
      for (std::size_t i = 0; i < m_.prefetch_reads.size(); ++i) {
        const auto &r = m_.prefetch_reads[i];
        Instance in{i, p, {}, fold(r.in_range, params, p, r.locals)};
        if (in.in.op == spec::Op::Int && in.in.int_value != 0) continue;
        auto guards = guards_at(r.guards, params, p);
        if (!guards) continue;
        in.guards = std::move(*guards);
        if (in.in.op == spec::Op::Int && in.guards.empty()) {
          out_.findings.push_back(prefetch_read_finding(m_, r, p, detail(r, p, params)));
          return;
        }
        if (!env_) continue;
        std::vector<Term> c;
        for (const auto &g : in.guards)
          if (auto t = tr(g, b)) c.push_back(smt::truthy(*t));
        if (auto t = tr(in.in, b)) c.push_back(!smt::truthy(*t));
        bad.push_back(ctx_.all_of(c));
        instances.push_back(std::move(in));
      }
    }
    if (!err_.empty()) {
      out_.unknown.push_back(name + ": unsupported construct: " + err_);
      err_.clear();
      return;
    }
    auto solved = witness_contents(name, bad, params);
    if (!solved) return;
    const spec::Env &env = *solved;
    for (const auto &in : instances) {
      bool fires = spec::evaluate(fold(in.in, env, in.p), env).value.value_or(1) == 0;
      for (const auto &g : in.guards)
        fires = fires && spec::evaluate(fold(g, env, in.p), env).value.value_or(0) != 0;
      if (!fires) continue;
      const auto &r = m_.prefetch_reads[in.read];
      out_.findings.push_back(prefetch_read_finding(m_, r, in.p, detail(r, in.p, env)));
      return;
    }
  }

  // output-not-covered of an output in `memory_space=any`, which only the
  // body's copies write (no window is written back): the union of what the
  // copies into it write, at every grid point (enumerated, given contents)
  // where their guards hold, covers the array. Decided where every such copy
  // has a value at every point and the array has at most 2^24 elements; an
  // aliased output keeps its input's data and is not checked.
  RuleOutcome run_any_output_coverage() {
    constexpr std::int64_t kMaxPoints = 1 << 16, kMaxElements = 1 << 24;
    if (m_.num_points() > kMaxPoints) return std::move(out_);
    for (std::size_t op = 0; op < m_.operands.size(); ++op) {
      const auto &o = m_.operands[op];
      if (!any_output_written_by_copies(m_, op)) continue;
      std::int64_t total = 1;
      for (std::int64_t d : o.shape)
        if (d <= 0 || __builtin_mul_overflow(total, d, &total)) total = kMaxElements + 1;
      if (total > kMaxElements) continue;
      std::vector<char> written(static_cast<std::size_t>(total), 0);
      bool decided = true;
      for (std::int64_t k = 0; k < m_.num_points() && decided; ++k) {
        const Point p = spec::grid_point(m_.grid, m_.cta_axes, k);
        for (const auto &a : m_.copy_addresses) {
          if (a.operand != op || a.source) continue;
          bool fires = true;
          for (const auto &g : a.guards) {
            auto v = spec::evaluate(fold(g, m_.env, p, a.locals), m_.env).value;
            if (!v) decided = false;
            fires = fires && v && *v != 0;
          }
          if (!decided) break;
          if (!fires) continue;
          const spec::Expr ref = fold(*a.ref, m_.env, p, a.locals);
          bool known = true;
          const auto subs = spec::subscripts_of(ref, [&](const spec::Expr &e, bool) {
            auto v = spec::evaluate(fold(e, m_.env, p), m_.env).value;
            known = known && v.has_value();
            return v;
          });
          const spec::Subscripted placed = spec::subscript(o.shape, subs);
          // (An address outside is index-out-of-bounds': where such a copy
          // lands is a fault, not a gap, so coverage says nothing then.)
          if (!known || !placed.ok()) {
            decided = false;
            break;
          }
          mark(written, o.shape, placed, 0, 0);
        }
      }
      if (!decided) continue;
      for (std::int64_t e = 0; e < total; ++e)
        if (!written[static_cast<std::size_t>(e)]) {
          std::vector<std::int64_t> element(o.shape.size());
          for (std::size_t d = o.shape.size(), r = static_cast<std::size_t>(e); d-- > 0;) {
            element[d] = static_cast<std::int64_t>(r % static_cast<std::size_t>(o.shape[d]));
            r /= static_cast<std::size_t>(o.shape[d]);
          }
          out_.findings.push_back(any_output_not_covered_finding(m_, op, element));
          break;
        }
    }
    finalize(out_.findings);
    return std::move(out_);
  }
  // Marks the elements `placed` covers, dims from `d` on, at flat offset `base`.
  static void mark(std::vector<char> &written, const std::vector<std::int64_t> &shape,
                   const spec::Subscripted &placed, std::size_t d, std::int64_t base) {
    if (d == shape.size()) {
      written[static_cast<std::size_t>(base)] = 1;
      return;
    }
    for (std::int64_t i = std::max<std::int64_t>(placed.dims[d].lo, 0);
         i < std::min(placed.dims[d].hi, shape[d]); ++i)
      mark(written, shape, placed, d + 1, base * shape[d] + i);
  }

  // Only the rules on copy addresses that read open contents:
  // index-out-of-bounds, and parallel-write-conflict of their regions.
  RuleOutcome run_copy_addresses() {
    if (env_ && !pf_arrays_.empty()) copy_addresses();
    if (env_ && !pf_arrays_.empty()) hbm_copy_conflicts(true);
    if (env_) annotate_prefetch();
    finalize(out_.findings);
    return std::move(out_);
  }

private:
  const KernelModel &m_;
  smt::Context ctx_;
  smt::Solver solver_;
  unsigned timeout_ms_;
  // query_quantified's attempt: a quantified query (query_core gives it a
  // solver of its own), with its quantifiers eliminated.
  bool quantified_ = false, use_qe_ = false;
  QueryCache *cache_ = nullptr;
  RuleOutcome out_;
  int fresh_ = 0;
  bool minimal_ = true; // whether the last sat query's witness was fully minimized
  std::string err_;
  smt::Bindings::Aux *aux_ = nullptr; // set while building a universally quantified body
  bool expand_ = false;               // forall_points expands over the grid (query_quantified)
  bool instances_only_ = false;       // at_no_point gives its anchors' instances (query_quantified)
  std::vector<std::size_t> axes_;     // run_axes: the grid axes in run order
  // Open prefetch contents (the second constructor).
  spec::Env *env_ = nullptr;
  std::map<std::string, Term> pf_names_;
  std::vector<Term> pf_facts_;
  std::vector<std::int64_t> pf_lower_;
  std::vector<std::pair<std::string, std::vector<Term>>> pf_arrays_;
  spec::PrefetchContents pf_last_; // the contents of the last witness
  std::size_t pf_annotated_ = 0;   // findings before this one name their contents

  // Names the prefetch contents in the findings made since the last call:
  // those of the witness they were built from (the last one).
  void annotate_prefetch() {
    for (; pf_annotated_ < out_.findings.size(); ++pf_annotated_) {
      if (pf_last_.empty()) continue;
      Finding &f = out_.findings[pf_annotated_];
      f.message += " (prefetch contents: " + spec::format_prefetch(pf_last_) + ")";
      for (const auto &[name, v] : pf_last_)
        f.witness.items.push_back({name, v});
    }
  }

  // Whether an access of `op` (or of an input aliased to it) reads open
  // prefetch contents in its guards, subscripts or masks.
  bool effects_read_contents(std::size_t op) const {
    auto reads = [&](const std::optional<spec::Expr> &x) { return x && mentions_element(*x); };
    auto reads_locals = [&](const std::map<std::string, spec::Expr> &ls) {
      return std::any_of(ls.begin(), ls.end(), [&](const auto &l) { return mentions_element(l.second); });
    };
    for (const auto &e : m_.effects) {
      const bool twin = std::any_of(m_.aliases.begin(), m_.aliases.end(), [&](const AliasModel &a) {
        return a.output == op && a.input == e.operand;
      });
      if (e.operand != op && !twin) continue;
      if (std::any_of(e.guards.begin(), e.guards.end(),
                      [&](const spec::Expr &g) { return mentions_element(g); }) ||
          reads(e.target) || reads(e.keep_mask) || reads(e.keep_bound) || reads(e.load_mask) ||
          reads_locals(e.keep_locals) || reads_locals(e.load_locals))
        return true;
    }
    return false;
  }

  bool mentions_element(const spec::Expr &e) const {
    if (e.op == spec::Op::Name && pf_names_.count(e.name)) return true;
    for (const auto &a : e.args)
      if (mentions_element(a)) return true;
    return false;
  }

  // `e` at one grid point: program_id bound, every closed subexpression
  // evaluated and `where` with a known condition replaced by its branch, so
  // that a prefetch read (a `where` tree over its index) becomes the one
  // element it reads.
  spec::Expr fold(const spec::Expr &e, const spec::Env &env, const Point &p,
                  const std::map<std::string, spec::Expr> &locals = {}) const {
    using spec::Op;
    if (e.op == Op::Int) return e;
    if (e.op == Op::Name) {
      if (auto l = locals.find(e.name); l != locals.end()) return fold(l->second, env, p);
      auto it = env.find(e.name);
      return it == env.end() ? e : spec::Expr::integer(it->second, e.loc);
    }
    if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1 &&
        e.args[0].op == Op::Int && e.args[0].int_value >= 0 &&
        static_cast<std::size_t>(e.args[0].int_value) < p.size()) {
      const auto a = static_cast<std::size_t>(e.args[0].int_value);
      return spec::Expr::integer(e.name == "program_id" ? p[a] : m_.grid[a], e.loc);
    }
    if (e.op == Op::Call && e.name == "where" && e.num_positional() == 3 && e.kwarg_names.empty()) {
      spec::Expr c = fold(e.args[0], env, p, locals);
      if (c.op == Op::Int) return fold(e.args[c.int_value != 0 ? 1 : 2], env, p, locals);
    }
    // Built node by node: copying `e` would copy whole `where` trees.
    spec::Expr out;
    out.op = e.op;
    out.int_value = e.int_value;
    out.float_value = e.float_value;
    out.name = e.name;
    out.kwarg_names = e.kwarg_names;
    out.loc = e.loc;
    bool closed = true;
    for (const auto &a : e.args) {
      out.args.push_back(fold(a, env, p, locals));
      closed = closed && out.args.back().op == Op::Int;
    }
    const bool value = out.op != Op::Ref && out.op != Op::Slice && !(out.op == Op::Call && out.name == "ds");
    if (closed && value)
      if (auto v = spec::evaluate(out, env).value) return spec::Expr::integer(*v, e.loc);
    return out;
  }

  // Whether subscript `a` of a ref lies inside array extent `n`
  // (spec/place.hpp's rule), as a solver term.
  Term in_extent(const spec::Expr &a, std::int64_t n, const smt::Bindings &b) {
    using spec::Op;
    if (a.op == Op::Slice) {
      Term lo = ctx_.num(0), hi = ctx_.num(n);
      if (!a.args.empty() && a.args[0].op != Op::None)
        if (auto t = tr(a.args[0], b)) lo = *t;
      if (a.args.size() >= 2 && a.args[1].op != Op::None)
        if (auto t = tr(a.args[1], b)) hi = *t;
      return lo >= 0 && lo <= hi && hi <= n;
    }
    if (a.op == Op::Call && a.name == "ds" && a.args.size() == 2 && a.kwarg_names.empty()) {
      auto start = tr(a.args[0], b), size = tr(a.args[1], b);
      if (!start || !size) return ctx_.boolean(false);
      return *start >= 0 && *size >= 0 && *start + *size <= n;
    }
    auto t = tr(a, b);
    if (!t) return ctx_.boolean(false);
    return *t >= 0 && *t < n;
  }

  // index-out-of-bounds of a body copy's HBM address that reads open
  // prefetch contents: at every grid point (enumerated, so that each
  // prefetch read folds to the element it reads), under the copy's guards,
  // every subscript lies inside its dim for every allowed contents. One
  // query for them all; a witness is mapped back to the first copy in run
  // order that it puts out of bounds.
  void copy_addresses() {
    constexpr std::int64_t kMaxPoints = 1 << 16;
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < m_.copy_addresses.size(); ++i) {
      const auto &a = m_.copy_addresses[i];
      // Directly, or through the integer locals its subscripts name.
      bool reads = mentions_element(*a.ref);
      for (const auto &[n, v] : a.locals)
        reads = reads || mentions_element(v);
      for (const auto &g : a.guards)
        reads = reads || mentions_element(g);
      if (reads) open.push_back(i);
    }
    if (open.empty()) return;
    const std::int64_t points = m_.num_points();
    if (points > kMaxPoints) {
      out_.unknown.push_back(
          "index-out-of-bounds of copy addresses that read prefetch contents: the grid has " +
          std::to_string(points) + " points, more than the " + std::to_string(kMaxPoints) +
          " it is decided on");
      return;
    }
    const spec::Env params = closed_params();
    struct Instance {
      std::size_t address;
      Point p;
      std::vector<spec::Expr> guards;
      spec::Expr ref;
    };
    std::vector<Instance> instances;
    std::vector<Term> bad;
    const smt::Bindings b = bindings({}, SymPoint{});
    std::map<std::size_t, std::vector<spec::Expr>> reads_inside;
    for (std::size_t i : open)
      reads_inside[i] = table_reads_inside(m_.copy_addresses[i]);
    for (std::int64_t k = 0; k < points; ++k) {
      const Point p = spec::grid_point(m_.grid, {}, k);
      for (std::size_t i : open) {
        const auto &a = m_.copy_addresses[i];
        auto guards = guards_at(a.guards, params, p);
        if (!guards) continue;
        Instance in{i, p, std::move(*guards), {}};
        std::vector<Term> c;
        for (const auto &g : in.guards)
          if (auto t = tr(g, b)) c.push_back(smt::truthy(*t));
        in.ref = fold(*a.ref, params, p, a.locals);
        // A subscript taken from a table read outside its array (the
        // poison) is that read's finding (prefetch_reads), not this one's.
        for (const auto &r : reads_inside[i])
          if (auto t = tr(fold(r, params, p, a.locals), b)) c.push_back(smt::truthy(*t));
        std::vector<bool> ellipsis;
        for (const auto &sub : in.ref.args)
          ellipsis.push_back(sub.op == spec::Op::Ellipsis);
        auto extents = address_extents(a, p);
        if (!extents) return;
        const auto &shape = *extents;
        auto dims = spec::subscript_dims(shape.size(), ellipsis);
        if (!dims) continue; // a rank error is the type checker's
        std::vector<Term> inside;
        for (std::size_t s = 0; s < in.ref.args.size(); ++s)
          if ((*dims)[s] >= 0)
            inside.push_back(in_extent(in.ref.args[s], shape[static_cast<std::size_t>((*dims)[s])], b));
        c.push_back(!ctx_.all_of(inside));
        bad.push_back(ctx_.all_of(c));
        instances.push_back(std::move(in));
      }
    }
    const std::string name = "index-out-of-bounds/copy-addresses";
    if (!err_.empty()) {
      out_.unknown.push_back(name + ": unsupported construct: " + err_);
      err_.clear();
      return;
    }
    // The witness contents, bound in env_ for the findings.
    auto solved = witness_contents(name, bad, params);
    if (!solved) return;
    const spec::Env &env = *solved;
    for (const auto &in : instances) {
      bool fires = true;
      for (const auto &g : in.guards)
        fires = fires && spec::evaluate(g, env).value.value_or(0) != 0;
      if (!fires) continue;
      const auto &a = m_.copy_addresses[in.address];
      bool poisoned = false;
      for (const auto &r : reads_inside[in.address])
        poisoned = poisoned || spec::evaluate(fold(r, env, in.p, a.locals), env).value.value_or(1) == 0;
      if (poisoned) continue;
      const auto subs = spec::subscripts_of(
          in.ref, [&](const spec::Expr &e, bool) { return spec::evaluate(fold(e, env, in.p), env).value; });
      const spec::Subscripted placed = spec::subscript(*address_extents(a, in.p), subs);
      if (!placed.out_of_bounds) continue;
      out_.findings.push_back(copy_address_finding(m_, a, in.p, placed.error, placed.error_dim));
      return;
    }
  }

  // The conditions that the table reads in a copy address's subscripts
  // (directly or through the locals they name) lie inside their tables.
  static std::vector<spec::Expr> table_reads_inside(const CopyAddress &a) {
    std::vector<spec::Expr> out;
    // (Past a read, only its condition can hold another: the contents tree
    // is the table's elements.)
    std::function<void(const spec::Expr &)> walk = [&](const spec::Expr &e) {
      if (const spec::Expr *r = spec::elaborated_read_bounds(e)) {
        out.push_back(*r);
        walk(*r);
        return;
      }
      for (const auto &x : e.args)
        walk(x);
    };
    walk(*a.ref);
    for (const auto &[n, v] : a.locals)
      walk(v);
    return out;
  }

  // What a copy address's subscripts index at p: its array's dims; for a
  // gather, its block's dims as the body sees them (squeezed ones left
  // out), each cut at the array's end (a Triton load past it reads no
  // element of the array). nullopt, with the reason in out_.unknown, where
  // the block has no place at p or its dims are Element or BoundedSlice ones.
  std::optional<std::vector<std::int64_t>> address_extents(const CopyAddress &a, const Point &p) {
    const auto &o = m_.operands[a.operand];
    if (!a.gather) return o.shape;
    const auto block = block_at(m_, a.operand, p);
    if (!block || o.has_element_dims() || o.has_bounded_dims()) {
      out_.unknown.push_back(
          "index-out-of-bounds of the load from '" + o.name + "' on line " + std::to_string(a.loc.line) +
          ", whose subscripts read prefetch contents: its block has no place at grid point " +
          format_tuple(p) + " that this check knows");
      return std::nullopt;
    }
    std::vector<std::int64_t> out;
    for (std::size_t d = 0; d < o.shape.size(); ++d)
      if (!o.squeezed[d])
        out.push_back(std::clamp<std::int64_t>(o.shape[d] - o.window_start(d, (*block)[d]), 0, o.block[d]));
    return out;
  }

  SymPoint point(const std::string &tag) {
    SymPoint p;
    std::string t = tag + std::to_string(fresh_++);
    for (std::size_t k = 0; k < m_.grid.size(); ++k)
      p.v.push_back(ctx_.int_var(t + "_" + std::to_string(k)));
    return p;
  }

  Term in_grid(const SymPoint &p) {
    std::vector<Term> c;
    for (std::size_t k = 0; k < p.v.size(); ++k) {
      c.push_back(p.v[k] >= 0);
      c.push_back(p.v[k] < m_.grid[k]);
    }
    return ctx_.all_of(c);
  }

  // Run order: lexicographic over the axes in run order (run_axes), last
  // fastest.
  Term lex_lt(const SymPoint &p, const SymPoint &q) {
    std::vector<Term> alts;
    std::vector<Term> prefix;
    for (std::size_t a : axes_) {
      auto c = prefix;
      c.push_back(p.v[a] < q.v[a]);
      alts.push_back(ctx_.all_of(c));
      prefix.push_back(p.v[a] == q.v[a]);
    }
    return ctx_.any_of(alts);
  }

  Term same(const std::vector<Term> &a, const std::vector<Term> &b) {
    assert(a.size() == b.size());
    std::vector<Term> c;
    for (std::size_t k = 0; k < a.size(); ++k)
      c.push_back(a[k] == b[k]);
    return ctx_.all_of(c);
  }

  // `elements`: bind the open prefetch elements too (an expression that
  // names none translates the same without them, and a long table's names
  // cost a map insertion each).
  smt::Bindings bindings(const std::vector<std::string> &params, const SymPoint &p, bool elements = true) {
    smt::Bindings b;
    for (std::size_t a = 0; a < params.size() && a < p.v.size(); ++a)
      b.names.emplace(params[a], p.v[a]);
    b.program_ids = p.v;
    if (elements)
      for (const auto &[n, t] : pf_names_)
        b.names.emplace(n, t);
    b.num_programs = m_.grid;
    b.aux = aux_;
    return b;
  }

  std::optional<Term> tr(const spec::Expr &e, const smt::Bindings &b) {
    auto t = smt::translate(ctx_, e, b);
    if (!t.term) {
      if (err_.empty()) err_ = t.error;
      return std::nullopt;
    }
    return t.term;
  }

  // A scratch is one buffer per CTA on Mosaic GPU (its CTA coordinates name
  // it) and one for the whole grid on TPU.
  std::vector<Term> cta(const SymPoint &p) {
    std::vector<Term> c;
    for (std::size_t a = 0; a < m_.cta_axes.size() && a < p.v.size(); ++a)
      if (m_.cta_axes[a]) c.push_back(p.v[a]);
    return c;
  }

  // How many run positions the CTA axes take: they lead the run order, and
  // the pipeline (non-CTA) axes follow (all axes are pipeline axes on TPU).
  std::size_t cta_count() const {
    std::size_t n = 0;
    for (std::size_t a = 0; a < m_.cta_axes.size() && a < m_.grid.size(); ++a)
      n += m_.cta_axes[a] ? 1 : 0;
    return n;
  }

  // q is the last step of its CTA: every pipeline axis at its last value.
  Term cta_last(const SymPoint &q) {
    std::vector<Term> c;
    for (std::size_t k = cta_count(); k < axes_.size(); ++k)
      c.push_back(q.v[axes_[k]] == m_.grid[axes_[k]] - 1);
    return ctx_.all_of(c);
  }

  // `earlier` is the grid point right before `later` in run order, `later`
  // advancing one of the run positions from `from` on: the positions before
  // it equal, the ones after it wrapped from their last value to 0.
  Term step_back(const SymPoint &later, const SymPoint &earlier, std::size_t from) {
    std::vector<Term> steps;
    for (std::size_t k = from; k < axes_.size(); ++k) {
      std::vector<Term> c = {later.v[axes_[k]] >= 1, earlier.v[axes_[k]] == later.v[axes_[k]] - 1};
      for (std::size_t j = 0; j < k; ++j)
        c.push_back(earlier.v[axes_[j]] == later.v[axes_[j]]);
      for (std::size_t j = k + 1; j < axes_.size(); ++j) {
        c.push_back(later.v[axes_[j]] == 0);
        c.push_back(earlier.v[axes_[j]] == m_.grid[axes_[j]] - 1);
      }
      steps.push_back(ctx_.all_of(c));
    }
    return ctx_.any_of(steps);
  }

  std::vector<Term> block(std::size_t op, const SymPoint &p) { return at(op, m_.operands[op].index, p); }

  // What names the window of `op` at p (spec::BoundOperand::window): the
  // block index, then a BoundedSlice window's ds sizes. The rules that ask
  // whether two points share a window compare these.
  std::vector<Term> window(std::size_t op, const SymPoint &p) { return at(op, m_.operands[op].window, p); }

  // Index-map results `es` of `op` at p, as terms.
  std::vector<Term> at(std::size_t op, const std::vector<spec::Expr> &es, const SymPoint &p) {
    auto b = bindings(m_.operands[op].index_params, p);
    std::vector<Term> out;
    for (const auto &e : es) {
      auto t = tr(e, b);
      out.push_back(t ? *t : ctx_.num(0));
    }
    return out;
  }

  Term guard(const Effect &e, const SymPoint &p) {
    const bool elements =
        !pf_names_.empty() &&
        std::any_of(e.guards.begin(), e.guards.end(), [&](const auto &g) { return mentions_element(g); });
    auto b = bindings({}, p, elements);
    std::vector<Term> c;
    for (const auto &g : e.guards) {
      auto t = tr(g, b);
      if (!t) return ctx_.boolean(false);
      c.push_back(smt::truthy(*t));
    }
    return ctx_.all_of(c);
  }

  // Some effect of `kinds` on operand `op` fires at p.
  Term fires(std::size_t op, bool writes_only, bool reads_only, const SymPoint &p) {
    std::vector<Term> c;
    for (const auto &e : m_.effects) {
      if (e.operand != op) continue;
      bool is_write = e.kind != Effect::read;
      bool is_read = e.kind != Effect::write;
      if ((writes_only && !is_write) || (reads_only && !is_read)) continue;
      c.push_back(guard(e, p));
    }
    return ctx_.any_of(c);
  }

  static std::vector<Term> with(std::vector<Term> a, const std::vector<Term> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  enum class Q { sat, unsat, unknown };

  // One satisfiability query; on sat, the points in `order` are minimized
  // lexicographically and returned in that order.
  Q query(const std::string &name, const std::vector<Term> &facts, const std::vector<const SymPoint *> &order,
          std::vector<Point> &values, const std::vector<std::int64_t> &lower = {}) {
    if (env_) {
      annotate_prefetch();
      // A query none of whose facts names an element is the same without
      // the contents' constraints (they are satisfiable), and much smaller
      // for a long table.
      const bool reads = std::any_of(facts.begin(), facts.end(), [](const Term &f) {
        return f.to_string().find("prefetch_") != std::string::npos;
      });
      if (!pf_facts_.empty() && reads) return query_with_prefetch(name, facts, order, values, lower);
    }
    return query_core(name, facts, order, values, lower);
  }

  // A query over open prefetch contents: the constraints join its facts and
  // the contents are minimized after the points, then bound in env_.
  Q query_with_prefetch(const std::string &name, std::vector<Term> facts,
                        const std::vector<const SymPoint *> &order, std::vector<Point> &values,
                        std::vector<std::int64_t> lower) {
    facts.insert(facts.end(), pf_facts_.begin(), pf_facts_.end());
    SymPoint contents;
    contents.grid = false;
    for (const auto &[n, xs] : pf_arrays_)
      contents.v.insert(contents.v.end(), xs.begin(), xs.end());
    std::vector<const SymPoint *> ord = order;
    if (!order.empty()) {
      std::size_t vars = 0;
      for (const auto *p : order)
        vars += p->v.size();
      lower.resize(vars, 0);
      lower.insert(lower.end(), pf_lower_.begin(), pf_lower_.end());
      ord.push_back(&contents);
    }
    Q q = query_core(name, facts, ord, values, lower);
    if (q == Q::sat && !order.empty()) {
      const Point &c = values.back();
      std::size_t at = 0;
      pf_last_.clear();
      for (const auto &[n, xs] : pf_arrays_) {
        std::vector<std::int64_t> v(c.begin() + static_cast<std::ptrdiff_t>(at),
                                    c.begin() + static_cast<std::ptrdiff_t>(at + xs.size()));
        for (std::size_t k = 0; k < v.size(); ++k)
          (*env_)[spec::prefetch_element(n, static_cast<std::int64_t>(k))] = v[k];
        pf_last_[n] = std::move(v);
        at += xs.size();
      }
      values.pop_back();
    }
    return q;
  }

  Q query_core(const std::string &name, const std::vector<Term> &facts,
               const std::vector<const SymPoint *> &order, std::vector<Point> &values,
               const std::vector<std::int64_t> &lower) {
    if (!err_.empty()) {
      out_.unknown.push_back(name + ": unsupported construct: " + err_);
      err_.clear();
      return Q::unknown;
    }
    // The query as text: its answer depends on nothing else (every
    // assertion is made inside its push/pop scope).
    std::string key;
    if (cache_) {
      // (variables by first occurrence: a query asked again with fresh
      // points, as query_quantified's next attempt does, is the same query)
      std::vector<Term> all = facts;
      for (const auto *p : order)
        all.insert(all.end(), p->v.begin(), p->v.end());
      const std::vector<std::string> keys = Term::keys(all);
      key = name;
      std::size_t at = 0;
      for (; at < facts.size(); ++at)
        key += "\n" + keys[at];
      key += "\norder";
      for (const auto *p : order) {
        key += p->grid ? " g" : " b";
        for (std::size_t k = 0; k < p->v.size(); ++k)
          key += " " + keys[at++];
      }
      for (auto l : lower)
        key += " " + std::to_string(l);
      if (auto a = cache_->find(key)) {
        values = a->witness;
        if (a->sat) minimal_ = true;
        return a->sat ? Q::sat : Q::unsat;
      }
    }
    // A quantified query on a solver of its own: whether instantiation
    // decides it then depends on the query alone, not on what the shared
    // solver learned before (a cached run asks fewer queries).
    std::unique_ptr<smt::Solver> own;
    if (quantified_)
      own = std::make_unique<smt::Solver>(
          ctx_, timeout_ms_, use_qe_ ? smt::Solver::Mode::eliminate_quantifiers : smt::Solver::Mode::plain);
    smt::Solver &solver = own ? *own : solver_;
    solver.push();
    for (std::size_t i = 0; i < facts.size(); ++i)
      solver.add(facts[i], name + "/" + std::to_string(i));
    smt::Result r = solver.check();
    Q q = Q::unsat;
    if (r.kind == smt::Result::sat) {
      q = Q::sat;
      // A grid point's coordinates are minimized in run order, so the
      // witness is the first in run order, as the enumerator finds it.
      auto coord = [&](const SymPoint *p, std::size_t k) {
        return p->grid && p->v.size() == axes_.size() ? axes_[k] : k;
      };
      std::vector<Term> vars;
      for (const auto *p : order)
        for (std::size_t k = 0; k < p->v.size(); ++k)
          vars.push_back(p->v[coord(p, k)]);
      std::vector<std::int64_t> lo = lower;
      lo.resize(vars.size(), 0);
      // (On a grid query_quantified may expand, a quantified query's
      // minimizing probes get a sixteenth of the budget: the expanded form
      // minimizes exactly where they give up, in milliseconds where a probe
      // could spend seconds.)
      auto vals = solver.minimize_lex(vars, lo, &minimal_,
                                      quantified_ && m_.num_points() <= kExpandedPoints ? 16 : 1);
      std::size_t at = 0;
      values.clear();
      for (const auto *p : order) {
        Point pt(p->v.size(), 0);
        for (std::size_t k = 0; k < p->v.size(); ++k)
          pt[coord(p, k)] = vals[at + k];
        values.push_back(std::move(pt));
        at += p->v.size();
      }
    } else if (r.kind == smt::Result::unknown) {
      q = Q::unknown;
      out_.unknown.push_back(name + ": " + (r.reason.empty() ? "solver returned unknown" : r.reason));
    }
    solver.pop();
    if (cache_ && (q == Q::unsat || (q == Q::sat && minimal_)))
      cache_->store(key, {q == Q::sat, q == Q::sat ? values : std::vector<Point>{}});
    return q;
  }

  // Whether the block of `op` changes between two grid points that differ
  // only along `axis` (by one step): the index_map depends on that axis.
  bool depends_on(std::size_t op, std::size_t axis) {
    const auto &o = m_.operands[op];
    if (m_.grid[axis] < 2) return false;
    bool may = false;
    for (const auto &e : o.window)
      may = may || (axis < o.index_params.size() && spec::mentions(e, o.index_params[axis])) ||
            mentions_program_id(e);
    if (!may) return false;
    SymPoint x = point("x");
    SymPoint y = x;
    y.v[axis] = x.v[axis] + 1;
    std::vector<Point> v;
    return query("depends/" + o.name + "/axis" + std::to_string(axis),
                 {in_grid(x), in_grid(y), !same(window(op, x), window(op, y))}, {}, v) == Q::sat;
  }

  static bool mentions_program_id(const spec::Expr &e) {
    if (e.op == spec::Op::Call && (e.name == "program_id" || e.name == "num_programs")) return true;
    for (const auto &a : e.args)
      if (mentions_program_id(a)) return true;
    return false;
  }

  // A non-consecutive revisit p < r < q (block(p) == block(q) != block(r)) is
  // a reduction-not-last-axis when the output is accumulated and p and q
  // differ along some axis a that is followed by an axis b > a the index_map
  // depends on; any other non-consecutive revisit is an output-revisit.
  // With b_max the last axis the index_map depends on, "p and q differ along
  // an axis a < b_max" is exactly that condition.
  void revisit(std::size_t op) {
    if (m_.grid.empty()) return;
    const auto &o = m_.operands[op];
    SymPoint p = point("p"), r = point("r"), q = point("q");
    auto bp = window(op, p), br = window(op, r), bq = window(op, q);
    std::vector<Term> facts = {in_grid(p),   in_grid(r),   in_grid(q),   lex_lt(p, r),
                               lex_lt(r, q), same(bp, bq), !same(bp, br)};
    const bool needs_store = revisit_needs_a_store(m_, op);
    std::vector<Term> unrelaxed = facts;
    if (needs_store) {
      std::vector<Term> stored;
      for (const auto &w : m_.effects)
        if (w.operand == op && w.kind != Effect::read) stored.push_back(guard(w, p));
      facts.push_back(ctx_.any_of(stored));
    }
    // Most outputs are never revisited: one query settles both rules.
    std::vector<Point> v;
    if (query("output-revisit/" + o.name, facts, {&q, &p, &r}, v) != Q::sat) {
      std::vector<Point> u;
      if (needs_store && query("output-revisit/" + o.name + "/any", unrelaxed, {&q, &p, &r}, u) == Q::sat)
        out_.unstored_revisits.push_back(o.name);
      return;
    }
    if (m_.is_read(op)) {
      // Positions in run order (run_axes).
      std::optional<std::size_t> last_dep;
      for (std::size_t b = axes_.size(); b-- > 1 && !last_dep;)
        if (depends_on(op, axes_[b])) last_dep = b;
      if (last_dep) {
        std::vector<Term> differ;
        for (std::size_t a = 0; a < *last_dep; ++a)
          differ.push_back(p.v[axes_[a]] != q.v[axes_[a]]);
        std::vector<Point> w;
        if (query("reduction-not-last-axis/" + o.name, with(facts, {ctx_.any_of(differ)}), {&q, &p, &r}, w) ==
            Q::sat) {
          out_.findings.push_back(revisit_finding(m_, op, true, w[1], w[0]));
          return;
        }
      }
    }
    out_.findings.push_back(revisit_finding(m_, op, false, v[1], v[0]));
  }

  void uninitialized(const Effect &rd) {
    const auto &o = m_.operands[rd.operand];
    SymPoint p = point("p");
    std::vector<Term> facts = {in_grid(p), guard(rd, p)};
    // No write earlier in the same grid step...
    // Any store counts, `+=` included: a read after a `+=` of garbage has the
    // `+=` as its root cause, which is reported there.
    for (const auto &w : m_.effects)
      if (w.operand == rd.operand && w.kind != Effect::read && w.order < rd.order)
        facts.push_back(!guard(w, p));
    // ...nor at any earlier grid point, to the same block.
    std::vector<std::size_t> stores;
    for (std::size_t w = 0; w < m_.effects.size(); ++w)
      if (m_.effects[w].operand == rd.operand && m_.effects[w].kind != Effect::read) stores.push_back(w);
    auto bp = o.role == spec::Role::scratch ? cta(p) : window(rd.operand, p);
    auto best = query_quantified(
        "uninitialized-accumulator/" + o.name + "/line" + std::to_string(rd.loc.line),
        [&](smt::Bindings::Aux &aux, bool with_aux) {
          if (stores.empty()) return facts;
          SymPoint q = point("q");
          aux_ = with_aux ? &aux : nullptr;
          std::vector<Term> inits;
          for (std::size_t w : stores)
            inits.push_back(guard(m_.effects[w], q));
          auto bq = o.role == spec::Role::scratch ? cta(q) : window(rd.operand, q);
          aux_ = nullptr;
          Term body =
              in_grid(q) && ctx_.all_of(aux.side) && lex_lt(q, p) && ctx_.any_of(inits) && same(bq, bp);
          return with(facts, {forall_points(q, aux, !body)});
        },
        {&p}, by_run());
    if (best) out_.findings.push_back(uninitialized_finding(m_, rd, (*best)[0]));
  }

  // The box of effect e at p as terms (subscript_box_of): its static box,
  // or its target's with p's coordinates; a bound the solver cannot take
  // leaves its dim the whole block.
  std::vector<std::pair<Term, Term>> box_terms(const Effect &e, const SymPoint &p) {
    bool ok = true;
    return box_terms(e, p, ok);
  }
  // The same, clearing `ok` where some bound is not known (that dim is then
  // the whole block).
  std::vector<std::pair<Term, Term>> box_terms(const Effect &e, const SymPoint &p, bool &ok) {
    std::vector<std::pair<Term, Term>> out;
    if (e.exact || !e.target) {
      for (const auto &[lo, hi] : e.box)
        out.emplace_back(ctx_.num(lo), ctx_.num(hi));
      return out;
    }
    const smt::Bindings b = bindings({}, p);
    BoxArith<Term> a;
    a.value = [&](const spec::Expr &x) -> std::optional<Term> {
      auto t = smt::translate(ctx_, x, b);
      return t.term ? std::optional<Term>(*t.term) : std::nullopt;
    };
    a.num = [&](std::int64_t x) { return ctx_.num(x); };
    a.add = [](const Term &x, const Term &y) { return x + y; };
    a.clamp = [&](const Term &x, std::int64_t n) {
      return smt::ite(x < 0, ctx_.num(0), smt::ite(x > n, ctx_.num(n), x));
    };
    a.max = [](const Term &x, const Term &y) { return smt::ite(x < y, y, x); };
    return subscript_box_of(m_.operands[e.operand], *e.target, a, ok);
  }

  // p and q differ along some parallel axis.
  Term apart(const SymPoint &p, const SymPoint &q) {
    std::vector<Term> differ;
    for (std::size_t a = 0; a < m_.semantics.size() && a < p.v.size(); ++a)
      if (m_.semantics[a] == spec::DimSemantics::parallel) differ.push_back(p.v[a] != q.v[a]);
    return ctx_.any_of(differ);
  }

  // Whether effect c at t touches elements of b, as a clear or init takes an
  // accumulation's (or a read's) box: an empty b, an access wholly outside
  // its operand (clamped to it), is index-out-of-bounds' and meets every c.
  // (The evaluator's meets_box.)
  Term meets_box(const Effect &c, const SymPoint &t, const std::vector<std::pair<Term, Term>> &b) {
    std::vector<Term> empty;
    for (const auto &[lo, hi] : b)
      empty.push_back(lo >= hi);
    return ctx_.any_of(empty) || overlap(box_terms(c, t), b);
  }

  Term overlap(const std::vector<std::pair<Term, Term>> &a, const std::vector<std::pair<Term, Term>> &b) {
    std::vector<Term> c;
    for (std::size_t d = 0; d < a.size() && d < b.size(); ++d) {
      c.push_back(a[d].first < b[d].second);
      c.push_back(b[d].first < a[d].second);
    }
    return ctx_.all_of(c);
  }

  // The init at q re-initializes elements of the block that some read or
  // accumulation at p < q took (disjoint chunks of one block, each
  // initialized on its own first step, are not a reset).
  void resets(std::size_t op) {
    if (m_.grid.empty()) return;
    const auto &o = m_.operands[op];
    for (const auto &w : m_.effects) {
      if (w.operand != op || w.kind != Effect::write || m_.updates_through_locals(w)) continue;
      SymPoint p = point("p"), q = point("q"), s = point("s");
      const auto wb = box_terms(w, q);
      // The block was set (a store or accumulation) at some s < p, or at p
      // before the read (`set_at_p`).
      std::vector<Term> set_at_s;
      for (const auto &x : m_.effects)
        if (x.operand == op && x.kind != Effect::read) set_at_s.push_back(guard(x, s));
      const Term set_earlier =
          in_grid(s) && lex_lt(s, p) && same(window(op, s), window(op, p)) && ctx_.any_of(set_at_s);
      std::vector<Term> taken;
      // (A read that only puts back what the block holds, a select's kept
      // branch, takes no partial result; nor does a plain read of a block
      // nothing has set yet, which reads no result at all: that read is the
      // uninitialized-accumulator's.)
      for (const auto &e : m_.effects) {
        // A seed store's sum (seeds_output_sum), where some of its inputs
        // moved to another block by q.
        if (e.operand == op && !e.keep && seeds_output_sum(m_, e)) {
          std::vector<Term> moved;
          for (std::size_t in : accumulated_inputs(m_, e))
            moved.push_back(!same(window(in, p), window(in, q)));
          taken.push_back(guard(e, p) && overlap(box_terms(e, p), wb) && ctx_.any_of(moved));
        }
        if (e.operand == op && !e.keep && (e.kind != Effect::write || m_.updates_through_locals(e))) {
          Term t = guard(e, p) && overlap(box_terms(e, p), wb);
          if (e.kind == Effect::read) {
            std::vector<Term> set_at_p;
            for (const auto &x : m_.effects)
              if (x.operand == op && x.kind != Effect::read && x.order < e.order)
                set_at_p.push_back(guard(x, p));
            t = t && (set_earlier || ctx_.any_of(set_at_p));
          }
          taken.push_back(t);
        }
      }
      std::vector<Point> v;
      if (query("accumulator-reset/" + o.name + "/line" + std::to_string(w.loc.line),
                {in_grid(p), in_grid(q), lex_lt(p, q), same(window(op, p), window(op, q)), guard(w, q),
                 ctx_.any_of(taken)},
                {&q, &p}, v) == Q::sat)
        out_.findings.push_back(reset_finding(m_, w, v[1], v[0]));
    }
  }

  // For every grid point t strictly between p and q in run order, none of the
  // effects `es` fires at t: the quantified part of the reset and carry
  // queries (query_quantified; aux_ is set while the guards at t are built).
  Term none_between(const std::vector<std::size_t> &es, const SymPoint &p, const SymPoint &q,
                    smt::Bindings::Aux &aux, bool with_aux) {
    return at_no_point(
        [&](const SymPoint &t) {
          std::vector<Term> fired;
          for (std::size_t e : es)
            fired.push_back(guard(m_.effects[e], t));
          return lex_lt(p, t) && lex_lt(t, q) && ctx_.any_of(fired);
        },
        aux, with_aux, {&p, &q});
  }

  // A scratch accumulator carries one partial result at a time, whatever block
  // the outputs are on. Its init at q discards work when some p < q
  // accumulated into it after the last init and nothing read it since: no
  // init or consuming read fires after that accumulation at p, at any point
  // strictly between p and q, or before the init at q (see ScratchUse).
  void scratch_resets(std::size_t op) {
    if (m_.grid.empty()) return;
    const auto &o = m_.operands[op];
    ScratchUse u = scratch_use(m_, op);
    if (u.inits.empty() || u.accumulates.empty()) return;
    std::vector<std::size_t> clears = u.inits;
    clears.insert(clears.end(), u.consumes.begin(), u.consumes.end());
    auto cleared_at = [&](std::size_t ci, const SymPoint &x) { return guard(m_.effects[ci], x); };
    for (std::size_t wi : u.inits) {
      const Effect &w = m_.effects[wi];
      SymPoint p = point("p"), q = point("q");
      std::vector<Term> facts = {in_grid(p), in_grid(q), lex_lt(p, q), guard(w, q)};
      const auto wb = box_terms(w, q);
      // What a accumulated at p, unless a later firing of a from q on, in
      // the visit, reads the same input blocks again: a reduction repeated
      // whole on each round of an outer axis, stored on its last round,
      // loses nothing to the resets between rounds.
      const std::vector<std::size_t> reached = reached_outputs(m_, op);
      auto accumulated = [&](smt::Bindings::Aux &aux, bool with_aux) {
        std::vector<Term> out;
        for (std::size_t ai : contributions(m_, u)) {
          const Effect &a = m_.effects[ai];
          // A clear takes what it meets (a bank read or reset leaves the
          // other banks' partial results; an empty box, an accumulation
          // wholly outside the scratch, meets every clear).
          const auto ab = box_terms(a, p);
          auto meets = [&](std::size_t ci, const SymPoint &x) {
            return cleared_at(ci, x) && meets_box(m_.effects[ci], x, ab);
          };
          std::vector<Term> c = {guard(a, p), overlap(ab, wb)};
          for (std::size_t ci : clears)
            if (m_.effects[ci].order > a.order) c.push_back(!meets(ci, p));
          for (std::size_t ci : clears)
            if (m_.effects[ci].order < w.order) c.push_back(!meets(ci, q));
          c.push_back(at_no_point(
              [&](const SymPoint &t) {
                std::vector<Term> fired;
                for (std::size_t ci : clears)
                  fired.push_back(meets(ci, t));
                return lex_lt(p, t) && lex_lt(t, q) && ctx_.any_of(fired);
              },
              aux, with_aux, {&p, &q}));
          const std::vector<std::size_t> ins = accumulated_inputs(m_, a);
          if (round_may_repeat(m_, a))
            c.push_back(at_no_point(
                [&](const SymPoint &v) {
                  std::vector<Term> visit;
                  for (std::size_t x : reached)
                    visit.push_back(same(window(x, p), window(x, q)) && same(window(x, q), window(x, v)));
                  std::vector<Term> again = {!lex_lt(v, q), same(cta(v), cta(q)), ctx_.any_of(visit),
                                             guard(a, v)};
                  for (std::size_t in : ins)
                    again.push_back(same(window(in, v), window(in, p)));
                  return ctx_.all_of(again);
                },
                aux, with_aux, {&q}));
          out.push_back(ctx_.all_of(c));
        }
        return ctx_.any_of(out);
      };
      // A reset is harmful only within a visit: some output the scratch
      // reaches on the same block at p and q. (Between visits, what a result scratch accumulated unread
      // is accumulation-lost's: the stores, not the init, are misplaced; an
      // auxiliary scratch's last update may be dead by design.)
      facts.push_back(splits_a_visit(op, p, q));
      auto best = query_quantified(
          "accumulator-reset/" + o.name + "/line" + std::to_string(w.loc.line),
          [&](smt::Bindings::Aux &aux, bool with_aux) { return with(facts, {accumulated(aux, with_aux)}); },
          {&q, &p}, by_run());
      if (best) out_.findings.push_back(reset_finding(m_, w, (*best)[1], (*best)[0]));
      overwritten_reset(u, wi);
      overwritten_after_reset(u, wi);
    }
  }

  // The grid points next to x in run order: per axis, x one further along
  // it (the later axes at 0) and one back (the later axes at their last).
  // An unlisted quantifier's instances at them decide most "nothing fires
  // between p and q" facts without quantifier reasoning (an init at
  // `k % 8 == 0` and a read at `k % 8 == 7`: q's predecessor).
  std::vector<SymPoint> neighbours(const SymPoint &x) {
    std::vector<SymPoint> out;
    for (std::size_t i = 0; i < axes_.size(); ++i) {
      SymPoint up = x, down = x;
      up.v[axes_[i]] = x.v[axes_[i]] + ctx_.num(1);
      down.v[axes_[i]] = x.v[axes_[i]] - ctx_.num(1);
      for (std::size_t j = i + 1; j < axes_.size(); ++j) {
        up.v[axes_[j]] = ctx_.num(0);
        down.v[axes_[j]] = ctx_.num(m_.grid[axes_[j]] - 1);
      }
      out.push_back(std::move(up));
      out.push_back(std::move(down));
    }
    return out;
  }

  // forall u. !(u in the grid and cond(u)), aux_ set while cond is built
  // when with_aux (each quantifier its own aux variables).
  // (`outer` learns its aux variables only to know that it has some:
  // query_quantified's second attempt.)
  // While instances_only_ (query_quantified's first pass), the forall is
  // only its instances at the grid points next to `anchors` in run order.
  Term at_no_point(const std::function<Term(const SymPoint &)> &cond, smt::Bindings::Aux &outer,
                   bool with_aux, const std::vector<const SymPoint *> &anchors = {}) {
    if (instances_only_) {
      std::vector<Term> each = {ctx_.boolean(true)};
      for (const auto *x : anchors)
        for (const auto &t : neighbours(*x))
          each.push_back(!(in_grid(t) && cond(t)));
      return ctx_.all_of(each);
    }
    SymPoint u = point("u");
    smt::Bindings::Aux aux;
    aux_ = with_aux ? &aux : nullptr;
    Term c = cond(u);
    aux_ = nullptr;
    outer.aux_vars.insert(outer.aux_vars.end(), aux.aux_vars.begin(), aux.aux_vars.end());
    return forall_points(u, aux, !(in_grid(u) && ctx_.all_of(aux.side) && c));
  }

  // The init at q, within the visit of a block of output x the result
  // (not at its first step: its step before, in its CTA, on the same block)
  // scratch feeds (overwrite_uses), after which the last store into that
  // block that does not read it (at t, no such store later at t or at any
  // later point on that block) holds a read of the scratch, with no init
  // after q before it: the block ends as what accumulated after q. Lost:
  // accumulation a at p < q, in x's visit and q's CTA, its box meeting the
  // init's, no init after it at p, whose input blocks no firing of a from q
  // to t reads again (a reduction repeated whole after each reset, the
  // same result each round, loses nothing).
  void overwritten_after_reset(const ScratchUse &u, std::size_t wi) {
    if (!u.result || m_.triton) return;
    const Effect &w = m_.effects[wi];
    const auto &o = m_.operands[w.operand];
    const std::vector<std::size_t> transfers = scratch_transfers(m_, u, w.operand);
    for (const OverwriteUse &ov : overwrite_uses(m_, w.operand)) {
      if (ov.delivering.empty()) continue;
      const std::size_t x = ov.output;
      SymPoint p = point("p"), q = point("q"), t = point("t"), b = point("b");
      const Term at_q = same(q.v, t.v);
      std::vector<Term> facts = {in_grid(p), in_grid(q), in_grid(t), lex_lt(p, q),
                                 // q does not start a visit of x (b is its step before, in its
                                 // CTA, on the same block): an init where a later visit of a
                                 // block begins is what output-revisit reports.
                                 in_grid(b), step_back(q, b, cta_count()),
                                 m_.operands[x].revisit_any ? ctx_.boolean(true)
                                                            : same(window(x, b), window(x, q)),
                                 !lex_lt(t, q), guard(w, q), same(cta(p), cta(q)), same(cta(q), cta(t)),
                                 same(window(x, p), window(x, q)), same(window(x, q), window(x, t))};
      std::vector<Term> last;
      for (std::size_t si : ov.delivering) {
        const Effect &s = m_.effects[si];
        std::vector<Term> c = {guard(s, t)};
        if (s.order < w.order) c.push_back(!at_q);
        for (std::size_t oi : ov.overwrites)
          if (m_.effects[oi].order > s.order) c.push_back(!guard(m_.effects[oi], t));
        for (std::size_t ii : u.inits)
          if (m_.effects[ii].order < s.order)
            c.push_back((at_q && ctx_.boolean(m_.effects[ii].order <= w.order)) || !guard(m_.effects[ii], t));
        last.push_back(ctx_.all_of(c));
      }
      facts.push_back(ctx_.any_of(last));
      const auto wb = box_terms(w, q);
      auto best = query_quantified(
          "accumulator-reset/" + o.name + "/" + m_.operands[x].name + "/line" + std::to_string(w.loc.line) +
              "/overwritten-after",
          [&](smt::Bindings::Aux &aux, bool with_aux) {
            std::vector<Term> more = {none_between(u.inits, q, t, aux, with_aux),
                                      at_no_point(
                                          [&](const SymPoint &v) {
                                            std::vector<Term> later;
                                            for (std::size_t oi : ov.overwrites)
                                              later.push_back(guard(m_.effects[oi], v));
                                            return lex_lt(t, v) && same(window(x, v), window(x, t)) &&
                                                   ctx_.any_of(later);
                                          },
                                          aux, with_aux)};
            std::vector<Term> lost;
            for (std::size_t ai : u.accumulates) {
              const Effect &a = m_.effects[ai];
              std::vector<Term> c = {guard(a, p), overlap(box_terms(a, p), wb)};
              // (An init after it at p, unless a delivering store took it
              // first: the evaluator's overwritten_after_reset.)
              for (std::size_t ii : u.inits) {
                const int io = m_.effects[ii].order;
                if (io <= a.order) continue;
                std::vector<Term> taken;
                for (std::size_t di : ov.delivering)
                  if (m_.effects[di].order > a.order && m_.effects[di].order < io)
                    taken.push_back(guard(m_.effects[di], p));
                c.push_back(!guard(m_.effects[ii], p) || ctx_.any_of(taken));
              }
              // (What a transfer moved on to other elements of the scratch
              // after it, before the reset, the reset does not touch: the
              // evaluator's overwritten_after_reset.)
              const auto ab = box_terms(a, p);
              for (std::size_t ri : transfers) {
                const Effect &r = m_.effects[ri];
                auto meets = [&](const SymPoint &v) { return guard(r, v) && overlap(box_terms(r, v), ab); };
                if (r.order > a.order) c.push_back(!meets(p));
                if (r.order < w.order) c.push_back(!meets(q));
                c.push_back(
                    at_no_point([&](const SymPoint &v) { return lex_lt(p, v) && lex_lt(v, q) && meets(v); },
                                aux, with_aux));
              }
              const std::vector<std::size_t> ins = accumulated_inputs(m_, a);
              if (value_repeats(m_, a))
                c.push_back(at_no_point(
                    [&](const SymPoint &v) {
                      std::vector<Term> again = {!lex_lt(v, q), !lex_lt(t, v), guard(a, v)};
                      for (std::size_t in : ins)
                        again.push_back(same(window(in, v), window(in, p)));
                      return ctx_.all_of(again);
                    },
                    aux, with_aux));
              lost.push_back(ctx_.all_of(c));
            }
            more.push_back(ctx_.any_of(lost));
            return with(facts, more);
          },
          {&q, &p, &t}, by_run());
      if (best) {
        const Point &tv = (*best)[2];
        // The store the witness names: the last delivering one firing at t.
        const Effect *s = nullptr;
        for (std::size_t si : ov.delivering)
          if (guard_at(m_, m_.effects[si], tv).value_or(false) && (!s || m_.effects[si].order > s->order))
            s = &m_.effects[si];
        out_.findings.push_back(overwritten_after_reset_finding(m_, w, x, (*best)[1], (*best)[0],
                                                                s ? *s : m_.effects[ov.delivering[0]], tv));
      }
    }
  }

  // TPU: a store into output `op` at p (overwritten_store_inputs) that the
  // same store overwrites at a later point q of the visit (every point from
  // p to q in its CTA on the same block), with one of its inputs on
  // another block there. First at p's next step; a guarded store (`when k %
  // 2 == 0`) may skip steps, so then at any later point of the visit.
  void overwritten_stores(std::size_t op) {
    for (const auto &w : m_.effects) {
      if (w.operand != op) continue;
      const auto inputs = overwritten_store_inputs(m_, w);
      for (std::size_t x : inputs) {
        SymPoint p = point("p"), q = point("q");
        // The store fires at p and q on one block of op, x's block differs.
        // (A step along a parallel axis may change cores: that is
        // parallel-write-conflict's case.)
        std::vector<Term> overwrites = {same(window(op, p), window(op, q)), guard(w, p), guard(w, q),
                                        !same(block(x, p), block(x, q))};
        for (std::size_t a = 0; a < m_.semantics.size() && a < p.v.size(); ++a)
          if (m_.semantics[a] == spec::DimSemantics::parallel) overwrites.push_back(p.v[a] == q.v[a]);
        std::vector<Term> c = {in_grid(p), in_grid(q), step_back(q, p, cta_count())};
        c.insert(c.end(), overwrites.begin(), overwrites.end());
        const std::string name = "output-write-lost/" + m_.operands[op].name + "/overwritten/line" +
                                 std::to_string(w.loc.line) + "/" + m_.operands[x].name;
        std::vector<Point> v;
        if (query(name, c, {&p, &q}, v) == Q::sat) {
          out_.findings.push_back(overwritten_store_finding(m_, w, x, v[0], v[1]));
          break;
        }
        if (w.guards.empty()) continue; // (fires at every step: a later q has a next step that moves x)
        std::vector<Term> later = {in_grid(p), in_grid(q), lex_lt(p, q), same(cta(p), cta(q))};
        later.insert(later.end(), overwrites.begin(), overwrites.end());
        auto best = query_quantified(
            name + "/later",
            [&](smt::Bindings::Aux &aux, bool with_aux) {
              return with(later, {at_no_point(
                                     [&](const SymPoint &t) {
                                       return lex_lt(p, t) && lex_lt(t, q) &&
                                              !same(window(op, t), window(op, p));
                                     },
                                     aux, with_aux, {&p, &q})});
            },
            {&q, &p}, by_run());
        if (best) {
          out_.findings.push_back(overwritten_store_finding(m_, w, x, (*best)[1], (*best)[0]));
          break;
        }
      }
    }
  }

  // Mosaic GPU: a store into output `op` at p, whose previous step q in its
  // CTA (its run-order predecessor there: the non-CTA axes one step back)
  // has the same block, p not the CTA's last step: no copy-out takes p's slot.
  void lost_output_writes(std::size_t op) {
    const auto &o = m_.operands[op];
    for (const auto &w : m_.effects) {
      if (w.operand != op || w.kind == Effect::read) continue;
      SymPoint p = point("p"), q = point("q");
      std::vector<Point> v;
      if (query("output-write-lost/" + o.name + "/line" + std::to_string(w.loc.line),
                {in_grid(p), in_grid(q), step_back(p, q, cta_count()), !cta_last(p),
                 same(window(op, p), window(op, q)), guard(w, p)},
                {&p, &q}, v) == Q::sat)
        out_.findings.push_back(output_write_lost_finding(m_, w, v[1], v[0]));
    }
  }

  // Mosaic GPU, an output copied out after the loop from the slot of the
  // CTA's last step q: a store at p, whose step index within the CTA is not
  // that slot's modulo the slot count, with no store that may overlap it at
  // any point after p up to q.
  void lost_last_slot_writes(std::size_t op) {
    const auto &o = m_.operands[op];
    const std::int64_t slots = gpu_slots(m_), n = spec::cta_steps(m_.grid, m_.cta_axes);
    for (const auto &w : m_.effects) {
      if (w.operand != op || w.kind == Effect::read) continue;
      const std::vector<std::size_t> later = overlapping_stores(m_, w);
      SymPoint p = point("p"), q = point("q");
      // p's step index within its CTA, pipeline axes last fastest.
      Term t = ctx_.num(0);
      std::int64_t stride = 1;
      for (std::size_t k = axes_.size(); k-- > cta_count();) {
        t = t + p.v[axes_[k]] * ctx_.num(stride);
        stride *= m_.grid[axes_[k]];
      }
      const std::string tag = "slot" + std::to_string(fresh_++);
      Term c = ctx_.int_var(tag + "_c"), r = ctx_.int_var(tag + "_r");
      std::vector<Term> facts = {in_grid(p),  in_grid(q),  same(cta(p), cta(q)),
                                 cta_last(q), guard(w, p), t == c * ctx_.num(slots) + r,
                                 r >= 0,      r < slots,   r != (n - 1) % slots};
      for (std::size_t e : later)
        facts.push_back(!guard(m_.effects[e], q));
      auto best = query_quantified(
          "output-write-lost/" + o.name + "/line" + std::to_string(w.loc.line) + "/last-slot",
          [&](smt::Bindings::Aux &aux, bool with_aux) {
            return with(facts, {none_between(later, p, q, aux, with_aux)});
          },
          {&p, &q}, by_run());
      if (best) out_.findings.push_back(output_last_slot_finding(m_, w, (*best)[0], (*best)[1]));
    }
  }

  // Some output that scratch `op` reaches (reached_outputs) is on the same
  // block at p and q.
  Term splits_a_visit(std::size_t op, const SymPoint &p, const SymPoint &q) {
    std::vector<Term> visit;
    for (std::size_t x : reached_outputs(m_, op))
      visit.push_back(same(window(x, p), window(x, q)));
    return ctx_.any_of(visit);
  }

  // Per output x the result scratch feeds (lost_uses): accumulation a at r
  // whose value never reaches x: no clear of x (an init, or a read some
  // store into x holds) after it at r, no store into x that takes its value
  // at r, no clear at any point strictly between r and q, where q is either
  // the next point of r's CTA where one fires, the first of them an init,
  // with no reached output on the same block at r and q (an init within a
  // visit is accumulator-reset's), or, where none fires after r, the last
  // point of r's CTA. And a reduction over several steps: some p < r in that
  // CTA accumulated, with x on the same block at p and r: an accumulation,
  // or a fresh init that starts the sum with an input block
  // (contributions(): `where(k == 0, 0, acc[...]) + x` at k == 0, so that a
  // two-step reduction stored at its first step is reported). (Without p, a
  // store before each step's update is an exclusive scan, whose last update
  // is dead by design.)
  void lost_accumulations(std::size_t op) {
    if (m_.grid.empty() || m_.triton) return;
    const auto &o = m_.operands[op];
    const ScratchUse u = scratch_use(m_, op);
    // (Fed directly, `u.result`, or through another scratch: lost_uses.)
    if (u.accumulates.empty()) return;
    for (const LostUse &l : lost_uses(m_, op)) {
      const std::size_t x = l.output;
      const std::vector<std::size_t> &clears = l.clears;
      auto clear_at = [&](std::size_t ci, const SymPoint &t) {
        auto need = l.also_needs.find(ci);
        return need == l.also_needs.end() ? guard(m_.effects[ci], t)
                                          : guard(m_.effects[ci], t) && guard(m_.effects[need->second], t);
      };
      for (std::size_t k = 0; k < u.accumulates.size(); ++k) {
        if (!l.feeds[k]) continue;
        const Effect &a = m_.effects[u.accumulates[k]];
        SymPoint r = point("r"), p = point("p"), q = point("q");
        // A clear counts for what a accumulated at r only where its box
        // meets that (a flush of rows 0:8 delivers nothing of rows 8:16).
        // (An accumulation wholly outside the scratch, an empty box, is
        // index-out-of-bounds': every clear counts for it.)
        const auto ab = box_terms(a, r);
        auto meets = [&](std::size_t ci, const SymPoint &t) {
          return clear_at(ci, t) && meets_box(m_.effects[ci], t, ab);
        };
        std::vector<Term> facts = {
            in_grid(r),           in_grid(p),           in_grid(q),  lex_lt(p, r),
            same(cta(p), cta(r)), same(cta(q), cta(r)), guard(a, r), same(window(x, p), window(x, r))};
        for (std::size_t ci : clears)
          if (m_.effects[ci].order > a.order) facts.push_back(!meets(ci, r));
        for (std::size_t wi : l.delivering[k])
          facts.push_back(!guard(m_.effects[wi], r));
        std::vector<Term> at_p;
        for (std::size_t aj : contributions(m_, u))
          at_p.push_back(guard(m_.effects[aj], p));
        facts.push_back(ctx_.any_of(at_p));
        std::vector<Term> none_at_q, reset;
        for (std::size_t ci : clears)
          none_at_q.push_back(!meets(ci, q));
        for (std::size_t wi : u.inits) {
          // (an init that meets what a accumulated: one bank of acc[i] is not another's)
          std::vector<Term> c = {meets(wi, q)};
          for (std::size_t ci : clears)
            if (m_.effects[ci].order < m_.effects[wi].order) c.push_back(!meets(ci, q));
          reset.push_back(ctx_.all_of(c));
        }
        Term ends = cta_last(q) && (same(r.v, q.v) || ctx_.all_of(none_at_q));
        Term resets = lex_lt(r, q) && ctx_.any_of(reset) && !splits_a_visit(op, r, q);
        facts.push_back(ends || resets);
        // A round repeated whole loses nothing: with z the last init at or
        // before r, a at some v < z in the visit read the same input blocks
        // (a bias gradient recomputed on each round of an outer axis and
        // stored on one). (The first round, with no init before it, is
        // judged as it is.)
        const std::vector<std::size_t> ins = accumulated_inputs(m_, a);
        SymPoint z = point("z");
        auto best = query_quantified(
            "accumulation-lost/" + o.name + "/" + m_.operands[x].name + "/line" + std::to_string(a.loc.line),
            [&](smt::Bindings::Aux &aux, bool with_aux) {
              std::vector<Term> more = {at_no_point(
                  [&](const SymPoint &t) {
                    std::vector<Term> fired;
                    for (std::size_t ci : clears)
                      fired.push_back(meets(ci, t));
                    return lex_lt(r, t) && lex_lt(t, q) && ctx_.any_of(fired);
                  },
                  aux, with_aux, {&r, &q})};
              if (round_may_repeat(m_, a) && !u.inits.empty()) {
                auto init_at = [&](const SymPoint &t) {
                  std::vector<Term> fired;
                  for (std::size_t wi : u.inits)
                    fired.push_back(guard(m_.effects[wi], t));
                  return ctx_.any_of(fired);
                };
                Term first_round = at_no_point(
                    [&](const SymPoint &t) { return !lex_lt(r, t) && same(cta(t), cta(r)) && init_at(t); },
                    aux, with_aux, {&r});
                Term later_round =
                    in_grid(z) && !lex_lt(r, z) && same(cta(z), cta(r)) && init_at(z) &&
                    none_between(u.inits, z, r, aux, with_aux) && (same(z.v, r.v) || !init_at(r)) &&
                    at_no_point(
                        [&](const SymPoint &v) {
                          std::vector<Term> again = {lex_lt(v, z), same(cta(v), cta(r)),
                                                     same(window(x, v), window(x, r)), guard(a, v)};
                          for (std::size_t in : ins)
                            again.push_back(same(window(in, v), window(in, r)));
                          return ctx_.all_of(again);
                        },
                        aux, with_aux, {&z, &r});
                more.push_back(first_round || later_round);
              }
              return with(facts, more);
            },
            {&r, &p, &q}, by_run());
        if (best) out_.findings.push_back(lost_finding(m_, op, x, a, (*best)[1], (*best)[0], (*best)[2]));
      }
    }
  }

  // A store at q of the scratch's partial result into the output's block
  // there, while the scratch holds what it accumulated at p < q (after the
  // last init at p, none at any point between, none at q before the read)
  // where the output is on another block, and the block of q or of p was
  // accumulated at some r, p < r < q: a reduction within a block whose
  // accumulator was never reset for the next (p's block reduced over several
  // steps reaches q's even where q's is one step: megablox tgmm's group of
  // one m tile after a group of several). (Without r, a store every step of
  // what accumulated so far is a running total, cumsum's carry: not
  // reported.) The same CTA
  // (on Mosaic GPU each has its own scratch; an acc scratch starts at zero in
  // each, its init).
  void scratch_carried(std::size_t op) {
    if (m_.grid.empty() || m_.triton) return;
    const auto &o = m_.operands[op];
    const ScratchUse u = scratch_use(m_, op);
    // Without an init uninitialized-accumulator reports the first read.
    if (u.accumulates.empty() || (u.inits.empty() && !o.acc)) return;
    for (const CarriedUse &c : carried_and_indirect_uses(m_, op)) {
      const Effect &store = m_.effects[c.store], &rd = m_.effects[c.consume];
      SymPoint p = point("p"), q = point("q"), r = point("r");
      std::vector<Term> facts = {in_grid(p),
                                 in_grid(q),
                                 in_grid(r),
                                 lex_lt(p, r),
                                 lex_lt(r, q),
                                 same(cta(p), cta(q)),
                                 guard(store, q),
                                 guard(rd, q),
                                 !same(window(c.output, p), window(c.output, q)),
                                 ctx_.any_of({same(window(c.output, r), window(c.output, q)),
                                              same(window(c.output, r), window(c.output, p))})};
      const auto rb = box_terms(rd, q);
      // Init i at x re-initializes what the read takes (an empty rb, a read
      // wholly outside the scratch, is index-out-of-bounds': every init
      // counts): an init of other rows leaves the partial result there.
      auto resets = [&](std::size_t i, const SymPoint &x) {
        return guard(m_.effects[i], x) && meets_box(m_.effects[i], x, rb);
      };
      for (std::size_t i : u.inits)
        if (m_.effects[i].order < rd.order) facts.push_back(!resets(i, q));
      std::vector<Term> at_p, at_r;
      for (std::size_t ai : u.accumulates) {
        const Effect &a = m_.effects[ai];
        // (what p accumulated meets what the store reads at q: one bank of a
        // scratch indexed by the grid point is not another's)
        std::vector<Term> t = {guard(a, p), overlap(box_terms(a, p), rb)};
        for (std::size_t i : u.inits)
          if (m_.effects[i].order > a.order) t.push_back(!resets(i, p));
        at_p.push_back(ctx_.all_of(t));
        at_r.push_back(guard(a, r));
      }
      facts.push_back(ctx_.any_of(at_p));
      facts.push_back(ctx_.any_of(at_r));
      SymPoint v = point("v");
      std::vector<Term> at_v;
      for (std::size_t ai : u.accumulates) {
        std::vector<Term> t = {guard(m_.effects[ai], v)};
        if (m_.effects[ai].order > rd.order) t.push_back(!same(v.v, q.v));
        at_v.push_back(ctx_.all_of(t));
      }
      facts.push_back(in_grid(v));
      facts.push_back(!lex_lt(q, v));
      facts.push_back(same(window(c.output, v), window(c.output, q)));
      facts.push_back(ctx_.any_of(at_v));
      auto best = query_quantified(
          "accumulator-carried/" + o.name + "/line" + std::to_string(store.loc.line),
          [&](smt::Bindings::Aux &aux, bool with_aux) {
            // And an accumulation at some v in q's visit (the output on q's
            // block from v to q), before the read where v is q: a statistic
            // a first pass computes over every block and a second pass only
            // reads (a two-pass norm) is no block's partial result.
            std::vector<Term> more = {at_no_point(
                [&](const SymPoint &t) {
                  return lex_lt(v, t) && lex_lt(t, q) && !same(window(c.output, t), window(c.output, q));
                },
                aux, with_aux)};
            if (!u.inits.empty())
              more.push_back(at_no_point(
                  [&](const SymPoint &t) {
                    std::vector<Term> fired;
                    for (std::size_t i : u.inits)
                      fired.push_back(resets(i, t));
                    return lex_lt(p, t) && lex_lt(t, q) && ctx_.any_of(fired);
                  },
                  aux, with_aux, {&p, &q}));
            return with(facts, more);
          },
          {&q, &p}, by_run());
      if (best) out_.findings.push_back(carried_finding(m_, op, c, (*best)[1], (*best)[0]));
    }
  }

  // What readded and readded_round share: the adding store of `cq` fires at
  // q with no init before its read there, output x on the same block at p
  // and q, r <= p, r and q in one CTA.
  std::vector<Term> added_again(const ScratchUse &u, const CarriedUse &cq, const SymPoint &r,
                                const SymPoint &p, const SymPoint &q) {
    const Effect &rq = m_.effects[cq.consume];
    std::vector<Term> facts = {in_grid(r),
                               in_grid(p),
                               in_grid(q),
                               !lex_lt(p, r),
                               same(cta(r), cta(q)),
                               same(window(cq.output, p), window(cq.output, q)),
                               guard(m_.effects[cq.store], q),
                               guard(rq, q)};
    for (std::size_t i : u.inits)
      if (m_.effects[i].order < rq.order) facts.push_back(!guard(m_.effects[i], q));
    return facts;
  }

  // A store at q that adds the scratch into output x's block (adds_into_output),
  // while the scratch still holds what it accumulated at r, which such a
  // store already added at p, r <= p <= q (at q, an earlier statement), x on
  // the same block at p and q,
  // one CTA: no init after the accumulation at r, at any point strictly
  // between r and q, nor at q before the read.
  void readded(std::size_t op) {
    if (m_.grid.empty() || m_.triton) return;
    const auto &o = m_.operands[op];
    const ScratchUse u = scratch_use(m_, op);
    if (u.accumulates.empty()) return;
    const std::vector<CarriedUse> uses = adding_uses(m_, op);
    for (const CarriedUse &cq : uses) {
      const Effect &rq = m_.effects[cq.consume];
      SymPoint r = point("r"), p = point("p"), q = point("q");
      std::vector<Term> facts = added_again(u, cq, r, p, q);
      facts.push_back(!lex_lt(q, p));
      const auto rb = box_terms(rq, q);
      std::vector<Term> pairs;
      for (const CarriedUse &cp : uses) {
        if (cp.output != cq.output || m_.effects[cp.store].operand != m_.effects[cq.store].operand) continue;
        for (std::size_t ai : u.accumulates) {
          const Effect &a = m_.effects[ai];
          if (a.keep_mask) continue; // (a masked store replaces what it selects: it adds nothing)
          // (the read itself at p: `o += where(k == last, acc, 0)` adds acc
          // only on the last step)
          std::vector<Term> c = {guard(m_.effects[cp.store], p), guard(m_.effects[cp.consume], p),
                                 guard(a, r), overlap(box_terms(a, r), rb)};
          for (std::size_t i : u.inits)
            if (m_.effects[i].order > a.order) c.push_back(!guard(m_.effects[i], r));
          if (a.order > m_.effects[cp.consume].order) c.push_back(!same(r.v, p.v));
          // (p = q: an earlier statement of the step added it, `o += acc` twice)
          if (m_.effects[cp.consume].order >= rq.order) c.push_back(!same(p.v, q.v));
          pairs.push_back(ctx_.all_of(c));
        }
      }
      facts.push_back(ctx_.any_of(pairs));
      auto best = query_quantified(
          "accumulator-carried/" + o.name + "/line" + std::to_string(m_.effects[cq.store].loc.line) +
              "/re-added",
          [&](smt::Bindings::Aux &aux, bool with_aux) {
            if (u.inits.empty()) return facts;
            return with(facts, {none_between(u.inits, r, q, aux, with_aux)});
          },
          {&q, &p, &r}, by_run());
      if (best) {
        out_.findings.push_back(readded_finding(m_, op, cq, (*best)[2], (*best)[1], (*best)[0]));
        continue;
      }
      // A masked overwrite of a reduction repeated whole after its reset
      // stores the same kind of sum into other rows (megablox tiles of two
      // groups on one weight): nothing is counted twice.
      if (!m_.effects[cq.store].masked_overwrite) readded_round(u, cq, uses);
    }
  }

  // A reduction repeated whole on each round of an outer axis, and added
  // into the output every round: the store adding the scratch at q holds
  // what accumulation a did at s from the same input blocks as at r, whose
  // result a store already added into that block at p (r <= p < s <= q; no
  // init from r to that read at p, nor from s to the read at q; one CTA).
  // The same contribution is counted once per round. (With no init between
  // p and s, readded's own case; an accumulation that reads no windowed
  // input is not followed: its value need not repeat.)
  void readded_round(const ScratchUse &u, const CarriedUse &cq, const std::vector<CarriedUse> &uses) {
    const std::size_t op = m_.effects[cq.consume].operand;
    const Effect &rq = m_.effects[cq.consume];
    SymPoint r = point("r"), p = point("p"), s = point("s"), q = point("q");
    std::vector<Term> facts = added_again(u, cq, r, p, q);
    facts.insert(facts.end(), {in_grid(s), lex_lt(p, s), !lex_lt(q, s)});
    const auto rb = box_terms(rq, q);
    std::vector<Term> pairs;
    for (const CarriedUse &cp : uses) {
      if (cp.output != cq.output || m_.effects[cp.store].operand != m_.effects[cq.store].operand) continue;
      const Effect &rp = m_.effects[cp.consume];
      for (std::size_t ai : u.accumulates) {
        const Effect &a = m_.effects[ai];
        const std::vector<std::size_t> ins = accumulated_inputs(m_, a);
        if (a.keep_mask || !round_may_repeat(m_, a)) continue;
        std::vector<Term> c = {guard(m_.effects[cp.store], p),
                               guard(rp, p),
                               guard(a, r),
                               overlap(box_terms(a, r), box_terms(rp, p)),
                               guard(a, s),
                               overlap(box_terms(a, s), rb)};
        for (std::size_t in : ins)
          c.push_back(same(window(in, r), window(in, s)));
        for (std::size_t i : u.inits) {
          const Effect &w = m_.effects[i];
          if (w.order > a.order) c.push_back(!guard(w, r) && !guard(w, s));
          // (at p, before its read: unless p is r and the init came before a)
          if (w.order < rp.order)
            c.push_back((same(r.v, p.v) && ctx_.boolean(w.order < a.order)) || !guard(w, p));
        }
        if (a.order > rp.order) c.push_back(!same(r.v, p.v));
        if (a.order > rq.order) c.push_back(!same(s.v, q.v));
        pairs.push_back(ctx_.all_of(c));
      }
    }
    if (pairs.empty()) return;
    facts.push_back(ctx_.any_of(pairs));
    auto best = query_quantified(
        "accumulator-carried/" + m_.operands[op].name + "/line" +
            std::to_string(m_.effects[cq.store].loc.line) + "/re-added-round",
        [&](smt::Bindings::Aux &aux, bool with_aux) {
          return with(facts, {none_between(u.inits, r, p, aux, with_aux),
                              none_between(u.inits, s, q, aux, with_aux)});
        },
        {&q, &p, &s, &r}, by_run());
    if (best)
      out_.findings.push_back(
          readded_round_finding(m_, op, cq, (*best)[3], (*best)[1], (*best)[2], (*best)[0]));
  }

  // The init at q discards what the previous grid point in run order
  // accumulated, whose every later read in that step is a consume the step to
  // q overwrites (ScratchUse::consume_store, keep_from). A local condition,
  // so no quantifier.
  void overwritten_reset(const ScratchUse &u, std::size_t wi) {
    const Effect &w = m_.effects[wi];
    const auto &o = m_.operands[w.operand];
    std::size_t keep = axes_.size();
    for (std::size_t c = 0; c < u.consumes.size(); ++c)
      if (u.consume_store[c]) keep = std::min(keep, keep_from(m_, m_.effects[*u.consume_store[c]].operand));
    if (keep >= axes_.size()) return;
    SymPoint q = point("q"), r = point("r");
    // (Each consume that may fire at r after the accumulation must be
    // overwritten by this step.)
    std::vector<Term> facts = {in_grid(q), in_grid(r), step_back(q, r, keep), guard(w, q)};
    for (std::size_t ci : u.inits)
      if (m_.effects[ci].order < w.order) facts.push_back(!guard(m_.effects[ci], q));
    for (std::size_t ci : u.consumes)
      if (m_.effects[ci].order < w.order) facts.push_back(!guard(m_.effects[ci], q));
    std::vector<Term> accumulated;
    for (std::size_t ai : u.accumulates) {
      const Effect &a = m_.effects[ai];
      std::vector<Term> c = {guard(a, r)};
      for (std::size_t ci : u.inits)
        if (m_.effects[ci].order > a.order) c.push_back(!guard(m_.effects[ci], r));
      for (std::size_t x = 0; x < u.consumes.size(); ++x) {
        const std::size_t ci = u.consumes[x];
        if (m_.effects[ci].order <= a.order) continue;
        // A consume that is not overwritten at every step from `keep` on
        // reads the partial result: it must not fire.
        bool dead = u.consume_store[x] && keep_from(m_, m_.effects[*u.consume_store[x]].operand) <= keep;
        if (!dead) c.push_back(!guard(m_.effects[ci], r));
      }
      accumulated.push_back(ctx_.all_of(c));
    }
    facts.push_back(ctx_.any_of(accumulated));
    std::vector<Point> v;
    if (query("accumulator-reset/" + o.name + "/line" + std::to_string(w.loc.line) + "/overwritten", facts,
              {&q, &r}, v) == Q::sat)
      out_.findings.push_back(reset_finding(m_, w, v[1], v[0]));
  }

  bool reads_last_block(const Effect &r, std::size_t d) {
    const auto &o = m_.operands[r.operand];
    SymPoint p = point("p");
    std::vector<Point> v;
    return query("partial-block-reduction/" + o.name + "/line" + std::to_string(r.loc.line),
                 {in_grid(p), guard(r, p), block(r.operand, p)[d] == o.num_blocks[d] - 1}, {}, v) != Q::unsat;
  }

  // A store of the scratch at p reaches a read at q > p (no init at q before
  // the read, none at any point strictly between), p and q apart along a
  // parallel axis.
  void scratch_carry(std::size_t op, bool fresh_cuts) {
    if (m_.grid.empty()) return;
    const CarryUse u = carry_use(m_, op, fresh_cuts);
    // Without an init every store accumulates, and uninitialized-accumulator
    // reports the first read: one root cause, one finding.
    if (u.stores.empty() || u.reads.empty() || u.inits.empty()) return;
    SymPoint p = point("p"), q = point("q");
    std::vector<Term> read;
    // An element x some read at q takes that no init before it at q writes
    // (an init of the other slot of a double buffer cuts nothing; one of half
    // the read's box, the new rows of a halo window, cuts that half), a store
    // at p writes (one slot per block of a parallel axis, `acc[j]`, is no
    // carry between the slots), and no init at a point between writes. (A
    // read whose box is empty, clamped past the scratch, holds no x: the
    // lowered program's index-out-of-bounds.)
    std::vector<Term> x;
    for (std::size_t d = 0; d < m_.operands[op].block.size(); ++d)
      x.push_back(ctx_.int_var("carried" + std::to_string(fresh_) + "_" + std::to_string(d)));
    ++fresh_;
    auto holds = [&](const std::vector<std::pair<Term, Term>> &b) {
      std::vector<Term> in;
      for (std::size_t d = 0; d < b.size() && d < x.size(); ++d) {
        in.push_back(b[d].first <= x[d]);
        in.push_back(x[d] < b[d].second);
      }
      return ctx_.all_of(in);
    };
    // A fill writes x at t where it fires and its own reads there take
    // none of what it writes (a box not decided is no fill).
    auto filled = [&](const CarryUse::Fill &f, const SymPoint &t) {
      bool ok = true;
      const auto w = box_terms(m_.effects[f.store], t, ok);
      std::vector<Term> c = {guard(m_.effects[f.store], t), holds(w)};
      for (std::size_t r : f.reads)
        c.push_back(!guard(m_.effects[r], t) || !overlap(box_terms(m_.effects[r], t, ok), w));
      return ok ? ctx_.all_of(c) : ctx_.boolean(false);
    };
    for (std::size_t r : u.reads) {
      std::vector<Term> c = {guard(m_.effects[r], q), holds(box_terms(m_.effects[r], q))};
      for (std::size_t i : u.inits)
        if (m_.effects[i].order < m_.effects[r].order)
          c.push_back(!(guard(m_.effects[i], q) && holds(box_terms(m_.effects[i], q))));
      for (const auto &f : u.fills)
        if (m_.effects[f.store].order < m_.effects[r].order) c.push_back(!filled(f, q));
      read.push_back(ctx_.all_of(c));
    }
    std::vector<Term> stored;
    for (std::size_t e : u.stores)
      stored.push_back(guard(m_.effects[e], p) && holds(box_terms(m_.effects[e], p)));
    const std::vector<Term> facts = {in_grid(p),  in_grid(q),        lex_lt(p, q),
                                     apart(p, q), ctx_.any_of(read), ctx_.any_of(stored)};
    auto best = query_quantified(
        "scratch-carry/" + m_.operands[op].name,
        [&](smt::Bindings::Aux &aux, bool with_aux) {
          return with(facts,
                      {at_no_point(
                          [&](const SymPoint &t) {
                            std::vector<Term> cut;
                            for (std::size_t i : u.inits)
                              cut.push_back(guard(m_.effects[i], t) && holds(box_terms(m_.effects[i], t)));
                            for (const auto &f : u.fills)
                              cut.push_back(filled(f, t));
                            return lex_lt(p, t) && lex_lt(t, q) && ctx_.any_of(cut);
                          },
                          aux, with_aux)});
        },
        {&q, &p}, by_run());
    if (best) out_.findings.push_back(scratch_carry_finding(m_, op, (*best)[1], (*best)[0]));
  }

  // Grid points' coordinates in run order, concatenated: compares witnesses
  // as the enumerator orders them.
  // A query whose facts quantify over a grid point: first with each
  // quantifier replaced by its instances at the grid points next to its
  // anchors (at_no_point), where unsat is the answer; then with linear side
  // conditions for `//` and `%` (aux variables), which usually help
  // quantifier instantiation; where MBQI gives up on them ("incomplete
  // quantifiers") or leaves the witness unminimized, the same with the
  // quantifiers eliminated (linear integer arithmetic: decided where its
  // budget lasts), then with Z3's own div/mod; where that is undecided too
  // and the grid has at most
  // kExpandedPoints points, once more with the quantifier expanded into one
  // instance per grid point, which is quantifier-free and decided. (A
  // witness left unminimized on such a grid goes straight to the expanded
  // form.)
  // `facts(aux, with_aux)` builds the facts, setting aux_ to `&aux` while it
  // builds the quantified part when `with_aux`, and quantifying that part by
  // forall_points. Returns the least witness by `less`, an undecided attempt
  // forgotten when a later one decides.
  static constexpr std::int64_t kExpandedPoints = 4096;

  std::optional<std::vector<Point>>
  query_quantified(const std::string &name,
                   const std::function<std::vector<Term>(smt::Bindings::Aux &, bool)> &facts,
                   const std::vector<const SymPoint *> &order,
                   const std::function<bool(const std::vector<Point> &, const std::vector<Point> &)> &less) {
    std::optional<std::vector<Point>> best;
    const std::size_t undecided = out_.unknown.size();
    {
      // First the quantifiers' instances next to their anchors only: a
      // consequence of the facts, so unsat there is unsat.
      instances_only_ = true;
      smt::Bindings::Aux aux;
      std::vector<Term> f = facts(aux, false);
      instances_only_ = false;
      std::vector<Point> v;
      const Q r = query(name + "/instances", f, {}, v);
      out_.unknown.resize(undecided);
      if (r == Q::unsat) return best;
    }
    bool has_aux = false;
    for (int attempt = 0; attempt < 4; ++attempt) {
      // 0: aux variables, the plain kernel; 1: the same with the quantifiers
      // eliminated; 2: Z3's own div/mod (only where there are aux
      // variables); 3: expanded.
      if (attempt == 2 && !has_aux) continue;
      if (attempt == 3) {
        if (m_.num_points() > kExpandedPoints) break;
        expand_ = true;
      }
      out_.unknown.resize(undecided); // only the last attempt's reason is kept
      smt::Bindings::Aux aux;
      std::vector<Term> f = facts(aux, attempt < 2);
      if (attempt == 0) has_aux = !aux.aux_vars.empty();
      expand_ = false;
      use_qe_ = attempt == 1;
      quantified_ = attempt < 3;
      std::vector<Point> v;
      Q r = query(name, f, order, v);
      use_qe_ = quantified_ = false;
      if (r == Q::sat && (!best || less(v, *best))) best = v;
      if (r == Q::unsat || (r == Q::sat && minimal_)) break;
      // A witness found but left unminimized: the expanded form, where the
      // grid allows it, minimizes it exactly (the other forms spent their
      // whole budget per probe here: a minute on a 24-point grid).
      if (r == Q::sat && attempt < 2 && m_.num_points() <= kExpandedPoints) attempt = 2;
    }
    if (best) out_.unknown.resize(undecided);
    return best;
  }

  // `forall point. body` over the grid point `point` (body bounds it by
  // in_grid) and `aux`'s variables; while query_quantified expands, the
  // conjunction of `body` at every grid point instead (no aux variables then).
  Term forall_points(const SymPoint &point, const smt::Bindings::Aux &aux, const Term &body) {
    if (instances_only_) return ctx_.boolean(true); // (a forall not at_no_point's: no instances)
    if (!expand_) return smt::forall(with(point.v, aux.aux_vars), body);
    std::vector<Term> each;
    const std::int64_t n = m_.num_points();
    for (std::int64_t l = 0; l < n; ++l) {
      std::vector<Term> at;
      for (auto c : spec::grid_point(m_.grid, m_.cta_axes, l))
        at.push_back(ctx_.num(c));
      each.push_back(smt::substitute(body, point.v, at));
    }
    return ctx_.all_of(each);
  }

  // Witness order: by the run order of their grid points.
  std::function<bool(const std::vector<Point> &, const std::vector<Point> &)> by_run() const {
    return
        [this](const std::vector<Point> &a, const std::vector<Point> &b) { return run_key(a) < run_key(b); };
  }

  std::vector<std::int64_t> run_key(const std::vector<Point> &pts) const {
    std::vector<std::int64_t> k;
    for (const auto &p : pts)
      for (std::size_t a : axes_)
        k.push_back(p[a]);
    return k;
  }

  void input_write(const Effect &w) {
    SymPoint p = point("p");
    std::vector<Point> v;
    if (query("input-write-lost/" + m_.operands[w.operand].name, {in_grid(p), guard(w, p)}, {&p}, v) ==
        Q::sat)
      out_.findings.push_back(input_write_finding(m_, w, v[0]));
  }

  void input_copy_write(const Effect &c) {
    SymPoint p = point("p");
    std::vector<Point> v;
    if (query("input-write-lost/" + m_.operands[c.operand].name + "/copy" + std::to_string(c.loc.line),
              {in_grid(p), guard(c, p)}, {&p}, v) == Q::sat)
      out_.findings.push_back(input_copy_write_finding(m_, c, v[0]));
  }

  void out_of_bounds(std::size_t op) {
    const auto &o = m_.operands[op];
    SymPoint p = point("p");
    auto b = block(op, p);
    std::vector<Term> bad;
    for (std::size_t d = 0; d < b.size(); ++d) {
      bad.push_back(b[d] < 0);
      bad.push_back(b[d] >= o.num_blocks[d]);
    }
    if (o.has_bounded_dims()) {
      // A BoundedSlice window [start, start + size): size in [0, bound],
      // and the slice ends within the dim.
      auto env = bindings(o.index_params, p);
      for (std::size_t d = 0; d < b.size(); ++d) {
        if (!o.bounded[d]) continue;
        auto z = tr(o.size[d], env);
        if (!z) {
          out_.unknown.push_back("cannot encode the ds size of the index_map of '" + o.name + "'");
          return;
        }
        bad.push_back(*z < 0);
        bad.push_back(*z > o.block[d]);
        bad.push_back(b[d] + *z > o.shape[d]);
      }
    }
    std::vector<Point> v;
    if (query("index-out-of-bounds/" + o.name, {in_grid(p), ctx_.any_of(bad)}, {&p}, v) == Q::sat)
      out_.findings.push_back(out_of_bounds_finding(m_, op, v[0]));
  }

  void parallel_conflict(std::size_t op) {
    std::vector<std::size_t> axes;
    for (std::size_t a = 0; a < m_.semantics.size(); ++a)
      if (m_.semantics[a] == spec::DimSemantics::parallel) axes.push_back(a);
    if (axes.empty()) return;
    SymPoint p = point("p"), q = point("q");
    std::vector<Point> v;
    // Every visit writes its window back, stored or not: a point that never
    // stores the block still copies garbage over it from its own core.
    if (query("parallel-write-conflict/" + m_.operands[op].name,
              {in_grid(p), in_grid(q), lex_lt(p, q), apart(p, q), same(block(op, p), block(op, q)),
               fires(op, true, false, p) || fires(op, true, false, q)},
              {&p, &q}, v) == Q::sat)
      out_.findings.push_back(parallel_conflict_finding(m_, op, v[0], v[1]));
  }

  // parallel-write-conflict of body copies' memory_space=any regions (the
  // enumerator's hbm_copy_conflicts, for any grid): grid points p before q
  // in run order, differing along a parallel axis, where some pair of
  // copies on one HBM array, one of them a write, fires at p and q with
  // regions that meet; p and q minimized, the pair then picked at them by
  // evaluation (CopyRegions::conflict_at). `open_only`: only where some
  // such copy reads open prefetch contents (the enumerator leaves those).
  void hbm_copy_conflicts(bool open_only) {
    const CopyRegions regions(m_);
    if (regions.pairs().empty()) return;
    if (open_only) {
      bool open = false;
      for (const auto &[i, j] : regions.pairs())
        open = open || regions.reads_open(i) || regions.reads_open(j);
      if (!open) return;
    }
    spec::Env params = closed_params();
    std::map<std::string, spec::Expr> subst;
    for (const auto &[n, v] : params)
      subst.emplace(n, spec::Expr::integer(v));
    SymPoint p = point("p"), q = point("q");
    std::vector<Term> alts;
    for (const auto &[i, j] : regions.pairs()) {
      alts.push_back(copies_meet(i, p, j, q, subst));
      if (i != j) alts.push_back(copies_meet(j, p, i, q, subst));
    }
    const std::string name = "parallel-write-conflict/hbm-copies";
    const std::vector<Term> facts = {in_grid(p), in_grid(q), lex_lt(p, q), apart(p, q), ctx_.any_of(alts)};
    std::vector<Point> v;
    if (!env_ || pf_facts_.empty()) {
      if (query(name, facts, {&p, &q}, v) != Q::sat) return;
    } else {
      // Open contents: the points minimized under the contents' constraints,
      // then contents for those points (witness_contents: the smallest for
      // a small table; minimizing a long table's elements one solver call
      // each, as query would, takes far too long).
      annotate_prefetch();
      if (query_core(name, with(facts, pf_facts_), {&p, &q}, v, {}) != Q::sat) return;
      std::vector<Term> pinned = facts;
      for (std::size_t k = 0; k < p.v.size(); ++k) {
        pinned.push_back(p.v[k] == v[0][k]);
        pinned.push_back(q.v[k] == v[1][k]);
      }
      if (!witness_contents(name, {ctx_.all_of(pinned)}, closed_params())) return;
    }
    // (Evaluated with the witness's contents, which the query bound in the env.)
    if (const auto c = CopyRegions(m_).conflict_at(v[0], v[1]))
      out_.findings.push_back(
          hbm_copy_conflict_finding(m_, std::get<0>(*c), std::get<1>(*c), v[0], v[1], std::get<2>(*c)));
    else
      out_.unknown.push_back("parallel-write-conflict/hbm-copies: the witness " + format_tuple(v[0]) + ", " +
                             format_tuple(v[1]) + " does not evaluate");
  }

  // Copy address a fires at p and b at q, and their regions (CopyRegions::at,
  // as terms) meet.
  Term copies_meet(std::size_t a, const SymPoint &p, std::size_t b, const SymPoint &q,
                   const std::map<std::string, spec::Expr> &params) {
    std::vector<Term> c;
    const auto ra = copy_region(a, p, params, c), rb = copy_region(b, q, params, c);
    for (std::size_t d = 0; d < ra.size() && d < rb.size(); ++d) {
      c.push_back(ra[d].first < rb[d].second);
      c.push_back(rb[d].first < ra[d].second);
      c.push_back(ra[d].first < ra[d].second);
      c.push_back(rb[d].first < rb[d].second);
    }
    return ctx_.all_of(c);
  }

  // The region of copy address i at p, per array dim, cut to the array; its
  // guards at p go to `facts`.
  std::vector<std::pair<Term, Term>> copy_region(std::size_t i, const SymPoint &p,
                                                 const std::map<std::string, spec::Expr> &params,
                                                 std::vector<Term> &facts) {
    const CopyAddress &a = m_.copy_addresses[i];
    const smt::Bindings b = bindings({}, p, !pf_names_.empty());
    auto term = [&](const spec::Expr &e) {
      spec::Expr x = a.locals.empty() ? e : spec::substitute(e, a.locals);
      auto t = tr(spec::substitute(x, params), b);
      return t ? *t : ctx_.num(0); // (err_ is set: the query is unknown)
    };
    for (const auto &g : a.guards)
      facts.push_back(smt::truthy(term(g)));
    const auto &shape = m_.operands[a.operand].shape;
    std::vector<std::pair<Term, Term>> box;
    for (std::int64_t n : shape)
      box.emplace_back(ctx_.num(0), ctx_.num(n));
    std::vector<bool> ellipsis;
    for (const auto &s : a.ref->args)
      ellipsis.push_back(s.op == spec::Op::Ellipsis);
    const auto dims = spec::subscript_dims(shape.size(), ellipsis);
    if (!dims) {
      facts.push_back(ctx_.boolean(false));
      return box;
    }
    auto clamp = [&](const Term &t, std::int64_t n) {
      return smt::ite(t < 0, ctx_.num(0), smt::ite(t > n, ctx_.num(n), t));
    };
    for (std::size_t s = 0; s < a.ref->args.size(); ++s) {
      if ((*dims)[s] < 0) continue;
      const auto d = static_cast<std::size_t>((*dims)[s]);
      const std::int64_t n = shape[d];
      const spec::Expr &x = a.ref->args[s];
      Term lo = ctx_.num(0), hi = ctx_.num(n);
      if (x.op == spec::Op::Slice) {
        if (!x.args.empty() && x.args[0].op != spec::Op::None) lo = term(x.args[0]);
        if (x.args.size() >= 2 && x.args[1].op != spec::Op::None) hi = term(x.args[1]);
      } else if (x.op == spec::Op::Call && x.name == "ds" && x.args.size() == 2 && x.kwarg_names.empty()) {
        lo = term(x.args[0]);
        hi = lo + term(x.args[1]);
      } else {
        lo = term(x);
        hi = lo + 1;
      }
      box[d] = {clamp(lo, n), clamp(hi, n)};
    }
    return box;
  }

  // Some element of `box` (block-relative) of block `bp` lies inside the
  // array (the block index may be out of bounds: the elements must not be).
  void reaches_array(std::size_t op, const std::vector<Term> &bp, const Box &box, std::vector<Term> &facts) {
    const auto &o = m_.operands[op];
    for (std::size_t d = 0; d < box.size(); ++d) {
      facts.push_back(bp[d] * o.block[d] + box[d].first < o.shape[d]);
      facts.push_back(bp[d] * o.block[d] + box[d].second > 0);
    }
  }

  // The first array element of `box` in op's block at grid point p (a
  // witness), nullopt where the index map does not evaluate.
  std::optional<Point> first_element(std::size_t op, const Point &p, const Box &box) {
    const auto b = block_at(m_, op, p);
    if (!b) return std::nullopt;
    Point element(box.size());
    for (std::size_t d = 0; d < box.size(); ++d)
      element[d] = std::max<std::int64_t>((*b)[d] * m_.operands[op].block[d] + box[d].first, 0);
    return element;
  }

  // The element pass's check of stores past the array, for a grid too large
  // to replay: a store (static box, no mask) at some p where it fires, its
  // block inside the array, whose box passes the array's end in some dim.
  // A grid point where effect e fires, op's block is inside the array and
  // `box` (block-relative, static) passes the array's end: nullopt where
  // there is none.
  // (`besides`: points it is not, for the next one in run order.)
  // `axes`: where given, a point of `besides` is excluded with every point
  // that agrees with it on those grid axes and on the block index along the
  // ragged dims (where a block can pass the end): a mask naming only those
  // axes selects the same lanes there.
  std::optional<Point> past_end_at(std::size_t op, const Effect &e, const Box &box, const std::string &what,
                                   const std::vector<Point> &besides = {},
                                   const std::set<std::size_t> *axes = nullptr) {
    const auto &o = m_.operands[op];
    SymPoint p = point("p");
    auto bp = block(op, p);
    std::vector<Term> inside, past;
    for (std::size_t d = 0; d < bp.size(); ++d) {
      inside.push_back(bp[d] >= 0);
      inside.push_back(bp[d] < o.num_blocks[d]);
      past.push_back(bp[d] * o.block[d] + box[d].second > o.shape[d]);
      past.push_back(bp[d] * o.block[d] + box[d].first < 0);
    }
    std::vector<Term> facts{in_grid(p), guard(e, p), ctx_.all_of(inside), ctx_.any_of(past)};
    for (const auto &x : besides) {
      std::vector<Term> differs;
      for (std::size_t d = 0; d < x.size() && d < p.v.size(); ++d)
        if (!axes || axes->count(d)) differs.push_back(p.v[d] != x[d]);
      if (axes)
        if (const auto bx = block_at(m_, op, x))
          for (std::size_t d = 0; d < bp.size() && d < bx->size(); ++d)
            if (o.shape[d] % o.block[d] != 0) differs.push_back(bp[d] != (*bx)[d]);
      facts.push_back(ctx_.any_of(differs));
    }
    std::vector<Point> v;
    if (query(what + "/" + o.name + "/line" + std::to_string(e.loc.line), facts, {&p}, v) != Q::sat)
      return std::nullopt;
    return v[0];
  }

  void triton_past_end(std::size_t op) {
    const auto &o = m_.operands[op];
    for (const auto &e : m_.effects) {
      if (e.operand != op || e.kind == Effect::read || e.keep || e.box.size() != o.shape.size()) continue;
      const auto at = past_end_at(op, e, e.box, "triton-past-end");
      if (!at) continue;
      const auto b = block_at(m_, op, *at);
      if (!b) continue;
      // The first element of the box past the end in row-major order (the
      // element pass's).
      if (auto x = first_outside(o, *b, e.box))
        out_.findings.push_back(triton_past_end_finding(m_, op, e, *at, *x));
    }
  }

  // The grid axes a masked load's mask (or a mask local it reads) names
  // through program_id(a).
  static std::set<std::size_t> mask_axes(const Effect &e) {
    std::set<std::size_t> out;
    std::function<void(const spec::Expr &)> walk = [&](const spec::Expr &x) {
      if (x.op == spec::Op::Call && x.name == "program_id" && x.args.size() == 1 &&
          x.args[0].op == spec::Op::Int)
        out.insert(static_cast<std::size_t>(x.args[0].int_value));
      for (const auto &a : x.args)
        walk(a);
    };
    if (e.load_mask) walk(*e.load_mask);
    for (const auto &[name, l] : e.load_locals)
      walk(l);
    return out;
  }

  // Triton: a load with no mask whose box passes the array's end at some
  // point where it fires, its block inside the array (the evaluator's
  // triton_loads_past_end, for a grid too large to replay). A masked load's
  // mask is evaluated at the point the solver finds: a lane it selects there
  // past the end is the finding (where it selects none, the load is left as
  // the evaluator leaves one whose mask reads data).
  void triton_loads_past_end(std::size_t op) {
    const auto &o = m_.operands[op];
    if (o.has_bounded_dims()) return;
    for (const auto &e : m_.effects) {
      if (e.operand != op || e.kind != Effect::read || e.keep || (e.masked_load && !e.load_mask) ||
          e.box.size() != o.shape.size() || !may_pass_end(o, e))
        continue;
      if (!e.exact || o.has_element_dims()) {
        // Its box moves with the grid point (`x[ds(j * bn, bn)]`): placed at
        // each point, as the enumerator does, where the grid is small
        // enough (a Triton output too large for the element pass sends a
        // small grid here; a masked load skipped here let a transposed 2-D
        // mask verify).
        if (moving_load_past_end(op, e)) continue;
        if (e.masked_load && !data_free_load_mask(e)) continue; // (as the enumerator leaves it)
        out_.unknown.push_back(
            "cannot decide whether the load of '" + o.name + "' on line " + std::to_string(e.loc.line) +
            " reads past the array at every grid point (its box moves with the grid point)");
        continue;
      }
      const auto at = past_end_at(op, e, e.ref_box, "triton-load-past-end");
      if (!at) continue;
      const auto b = block_at(m_, op, *at);
      if (!b) continue;
      if (e.masked_load) {
        // The points whose ref passes the end, in run order, up to
        // kMaskedPoints of them (a ragged dim's last blocks, typically few):
        // the first whose mask selects a lane past it. Past that many the
        // load is left as one whose mask reads data is.
        constexpr std::size_t kMaskedPoints = 64;
        std::vector<Point> seen{*at};
        const std::set<std::size_t> axes = mask_axes(e);
        bool found = false;
        std::optional<Point> p = at;
        for (; p && seen.size() <= kMaskedPoints;) {
          const auto bb = block_at(m_, op, *p);
          if (bb)
            if (auto x = masked_load_past_end(m_, op, e, *p, *bb, e.ref_box)) {
              out_.findings.push_back(triton_masked_load_past_end_finding(m_, op, e, *p, *x));
              found = true;
              break;
            }
          p = past_end_at(op, e, e.ref_box, "triton-masked-load-past-end", seen, &axes);
          if (p) seen.push_back(*p);
        }
        // Points left unseen that differ from every seen one where the mask
        // or the ragged block can (`| (program_id(1) == 69999)`): one of them
        // may select a lane past the end that none seen did. Not decided, so
        // not verified.
        if (!found && p)
          out_.unknown.push_back(
              "the mask of the load of '" + o.name + "' on line " + std::to_string(e.loc.line) +
              " depends on the grid point and was evaluated at the first " + std::to_string(kMaskedPoints) +
              " grid points whose block passes the array's end; more remain, where it may "
              "select a lane past it");
      } else if (auto x = first_outside(o, *b, e.ref_box)) {
        out_.findings.push_back(triton_load_past_end_finding(m_, op, e, *at, *x));
      }
    }
  }

  // A Triton load whose box moves with the grid point, placed at every
  // grid point in run order where there are at most kPlacedPoints: the
  // first lane past the array it reads (its mask selects), as a finding.
  // False where the grid is larger, or a box does not place (nothing
  // decided); true where decided, found or not.
  static constexpr std::int64_t kPlacedPoints = 65536;
  bool moving_load_past_end(std::size_t op, const Effect &e) {
    const auto &o = m_.operands[op];
    if (m_.num_points() > kPlacedPoints || o.has_element_dims()) return false;
    for (std::int64_t k = 0; k < m_.num_points(); ++k) {
      const Point p = spec::grid_point(m_.grid, m_.cta_axes, k);
      const auto fires = guard_at(m_, e, p);
      if (!fires) return false;
      if (!*fires) continue;
      const auto blk = block_at(m_, op, p);
      const auto box = ref_box_at(m_, e, p);
      if (!blk || !box) return false;
      bool inside = true; // (a block outside the array is out_of_bounds's finding)
      for (std::size_t d = 0; d < o.num_blocks.size() && d < blk->size(); ++d)
        inside = inside && ((*blk)[d] >= 0 && (*blk)[d] < o.num_blocks[d]);
      if (!inside) continue;
      if (auto f = triton_load_past_end_at(m_, op, e, p, *blk, *box)) {
        out_.findings.push_back(std::move(*f));
        return true;
      }
    }
    return true;
  }

  // Whether a masked load's mask evaluates at the first grid point (reads
  // no data): one that reads data is left as the enumerator leaves it.
  bool data_free_load_mask(const Effect &e) const {
    return m_.num_points() > 0 && load_mask_evaluates(m_, e, spec::grid_point(m_.grid, m_.cta_axes, 0));
  }

  // Triton: two programs whose static store boxes (or a store's and a
  // read's) overlap on one block, on an element inside the array.
  void triton_races(std::size_t op) {
    const auto &o = m_.operands[op];
    std::vector<std::size_t> stores, touches;
    // An input aliased to the output is the same array (one buffer): its
    // reads are the output's where its blocks are the output's (the same
    // block and index map); elsewhere they are not placed here.
    std::set<std::size_t> twins;
    for (const auto &al : m_.aliases) {
      if (al.output != op) continue;
      const auto &in = m_.operands[al.input];
      if (in.block == o.block && in.index == o.index && in.index_params == o.index_params &&
          in.element == o.element && in.bounded == o.bounded)
        twins.insert(al.input);
      else if (triton_alias_races(op, al.input))
        return;
    }
    for (std::size_t e = 0; e < m_.effects.size(); ++e) {
      const Effect &ef = m_.effects[e];
      if (ef.keep) continue;
      if (ef.operand != op) {
        if (twins.count(ef.operand) && ef.kind == Effect::read) touches.push_back(e);
        continue;
      }
      if (ef.kind != Effect::read) stores.push_back(e);
      touches.push_back(e);
    }
    for (std::size_t s : stores)
      for (std::size_t t : touches) {
        const Effect &es = m_.effects[s], &et = m_.effects[t];
        const bool reads = et.kind == Effect::read;
        if (!reads && t < s) continue; // each pair of stores once: p and q range over both orders
        Box ov(o.shape.size());
        bool empty = false;
        for (std::size_t d = 0; d < ov.size(); ++d) {
          ov[d] = {std::max(es.box[d].first, et.box[d].first), std::min(es.box[d].second, et.box[d].second)};
          empty = empty || ov[d].first >= ov[d].second;
        }
        if (empty) continue;
        SymPoint p = point("p"), q = point("q");
        std::vector<Term> differ;
        for (std::size_t a = 0; a < m_.grid.size(); ++a)
          differ.push_back(p.v[a] != q.v[a]);
        const auto bp = block(op, p);
        std::vector<Term> facts = {in_grid(p),   in_grid(q),  ctx_.any_of(differ), same(bp, block(op, q)),
                                   guard(es, p), guard(et, q)};
        reaches_array(op, bp, ov, facts);
        std::vector<Point> v;
        if (query("parallel-write-conflict/" + o.name, facts, {&p, &q}, v) != Q::sat) continue;
        const auto element = first_element(op, v[0], ov);
        if (!element) continue;
        out_.findings.push_back(triton_race_finding(m_, op, *element, v[0], v[1], reads,
                                                    et.operand == op ? nullptr : &m_.operands[et.operand]));
        return;
      }
  }

  // Triton, in place, an input aliased to output `op` with another block or
  // index map: a read through it at q of an element a store of p != q
  // writes, the two boxes placed in array elements. True where found (or
  // left unknown: an Element or BoundedSlice dim).
  bool triton_alias_races(std::size_t op, std::size_t in) {
    const auto &o = m_.operands[op], &x = m_.operands[in];
    auto regular = [](const OperandModel &b) { return !b.has_element_dims() && !b.has_bounded_dims(); };
    const std::size_t rank = o.shape.size();
    for (const Effect &es : m_.effects) {
      if (es.operand != op || es.kind == Effect::read || es.keep || es.box.size() != rank) continue;
      for (const Effect &et : m_.effects) {
        if (et.operand != in || et.kind != Effect::read || et.keep || et.box.size() != rank) continue;
        if (!regular(o) || !regular(x) || x.shape.size() != rank) {
          out_.unknown.push_back(
              "'" + x.name + "' is aliased to '" + o.name +
              "' and has Element or BoundedSlice dims: whether a program reads what another "
              "stores through it is not decided for this many programs");
          return true;
        }
        SymPoint p = point("p"), q = point("q");
        std::vector<Term> differ;
        for (std::size_t a = 0; a < m_.grid.size(); ++a)
          differ.push_back(p.v[a] != q.v[a]);
        const auto bp = block(op, p), bq = block(in, q);
        std::vector<Term> facts = {in_grid(p), in_grid(q), ctx_.any_of(differ), guard(es, p), guard(et, q)};
        // Some element lies in the store's box, the read's and the array.
        for (std::size_t d = 0; d < rank; ++d) {
          const Term slo = bp[d] * o.block[d] + es.box[d].first, shi = bp[d] * o.block[d] + es.box[d].second;
          const Term rlo = bq[d] * x.block[d] + et.box[d].first, rhi = bq[d] * x.block[d] + et.box[d].second;
          for (const Term &t : {slo < rhi, rlo < shi, slo<o.shape[d], rlo<o.shape[d], shi> 0, rhi> 0})
            facts.push_back(t);
        }
        std::vector<Point> v;
        if (query("parallel-write-conflict/" + o.name + "/" + x.name, facts, {&p, &q}, v) != Q::sat) continue;
        const auto b = block_at(m_, op, v[0]), c = block_at(m_, in, v[1]);
        if (!b || !c) continue;
        Point element(rank);
        for (std::size_t d = 0; d < rank; ++d)
          element[d] = std::max({(*b)[d] * o.block[d] + es.box[d].first,
                                 (*c)[d] * x.block[d] + et.box[d].first, std::int64_t{0}});
        out_.findings.push_back(triton_race_finding(m_, op, element, v[0], v[1], true, &x));
        return true;
      }
    }
    return false;
  }

  // Triton: a load or `+=` of the output at some program, on a cell of its
  // box (cover_cells, cut at the reads' boxes too) that no earlier store of
  // the same program covers, inside the array, unaliased.
  void triton_garbage(std::size_t op) {
    const auto &o = m_.operands[op];
    if (m_.is_aliased_output(op)) return;
    const CoverCells cells = cover_cells(m_, op, true);
    // The first such read in run order (the grid point, then the statement),
    // as the element pass finds it: one finding per output.
    std::optional<std::tuple<Point, std::size_t, Point>> first; // (point, effect, element)
    for (std::size_t r = 0; r < m_.effects.size(); ++r) {
      const Effect &er = m_.effects[r];
      if (er.operand != op || er.keep || er.kind == Effect::write) continue;
      for (const Box &cell : cells.cells) {
        if (!box_contains(er.box, cell)) continue;
        SymPoint p = point("p");
        const auto bp = block(op, p);
        std::vector<Term> facts = {in_grid(p), guard(er, p)};
        for (std::size_t s = 0; s < r; ++s) {
          const Effect &es = m_.effects[s];
          if (es.operand == op && es.kind != Effect::read && box_contains(es.box, cell))
            facts.push_back(!guard(es, p));
        }
        reaches_array(op, bp, cell, facts);
        std::vector<Point> v;
        if (query("uninitialized-accumulator/" + o.name, facts, {&p}, v) != Q::sat) continue;
        if (const auto element = first_element(op, v[0], cell))
          if (!first || std::tie(v[0], r) < std::tie(std::get<0>(*first), std::get<1>(*first)))
            first = std::make_tuple(v[0], r, *element);
      }
    }
    if (first)
      out_.findings.push_back(triton_garbage_finding(m_, m_.effects[std::get<1>(*first)], std::get<0>(*first),
                                                     std::get<2>(*first)));
  }

  // Whether some dim of the operand's block index combines several grid
  // axes (`(a * 16 + b) * 40 + c`): the coverage question the solver's
  // quantifiers can take minutes on.
  bool flattens_axes(std::size_t op) const {
    const auto &o = m_.operands[op];
    for (const auto &e : o.index) {
      int axes = 0;
      for (std::size_t a = 0; a < o.index_params.size() && a < m_.grid.size(); ++a)
        axes += spec::mentions(e, o.index_params[a]) ? 1 : 0;
      if (axes > 1) return true;
    }
    return false;
  }

  // Per cell (cover_cells): some block whose cell holds array elements and
  // that no store containing the cell writes at any grid point.
  void not_covered(std::size_t op) {
    // Such a map is decided by evaluating every point instead, where the
    // contents of every prefetch table are given (open ones are quantified).
    constexpr std::int64_t kEnumeratedCoverage = 1 << 16;
    if (pf_arrays_.empty() && flattens_axes(op))
      if (auto e = check_coverage_enumerated(m_, op, kEnumeratedCoverage)) {
        out_.findings.insert(out_.findings.end(), e->findings.begin(), e->findings.end());
        out_.unknown.insert(out_.unknown.end(), e->unknown.begin(), e->unknown.end());
        return;
      }
    const CoverCells cells = cover_cells(m_, op);
    std::optional<std::pair<Point, std::size_t>> best;
    for (std::size_t c = 0; c < cells.cells.size(); ++c) {
      auto w = uncovered_block(op, cells.cells[c]);
      if (w && (!best || *w < best->first)) best = std::make_pair(*w, c);
    }
    if (!best) return;
    for (const auto &e : m_.effects)
      if (e.operand == op && e.kind != Effect::read && !e.exact) {
        out_.unknown.push_back(not_covered_unknown(m_, op, e));
        return;
      }
    out_.findings.push_back(not_covered_finding(m_, op, best->first, cells.cells[best->second]));
  }

  std::optional<Point> uncovered_block(std::size_t op, const Box &cell) {
    const auto &o = m_.operands[op];
    SymPoint b;
    b.grid = false;
    std::vector<Term> facts;
    for (std::size_t d = 0; d < o.num_blocks.size(); ++d) {
      b.v.push_back(ctx_.int_var("b" + std::to_string(fresh_) + "_" + std::to_string(d)));
      facts.push_back(b.v.back() >= 0);
      facts.push_back(b.v.back() < o.num_blocks[d]);
      // Some element of the cell lies in the array (implied by the bound
      // above for a cell at the block's start).
      if (cell[d].first > 0) facts.push_back(b.v.back() * o.block[d] + cell[d].first < o.shape[d]);
    }
    ++fresh_;
    auto witness = query_quantified(
        "output-not-covered/" + o.name,
        [&](smt::Bindings::Aux &aux, bool with_aux) {
          SymPoint q = point("q");
          aux_ = with_aux ? &aux : nullptr;
          auto bq = block(op, q);
          std::vector<Term> stores;
          for (const auto &e : m_.effects)
            if (e.operand == op && e.kind != Effect::read && e.exact && box_contains(e.box, cell))
              stores.push_back(guard(e, q));
          Term w = ctx_.any_of(stores);
          aux_ = nullptr;
          Term written = in_grid(q) && ctx_.all_of(aux.side) && same(bq, b.v) && w;
          auto all = facts;
          all.push_back(forall_points(q, aux, !written));
          return all;
        },
        {&b}, [](const std::vector<Point> &x, const std::vector<Point> &y) { return x[0] < y[0]; });
    if (!witness) return std::nullopt;
    return (*witness)[0];
  }

  void alias(const AliasModel &a) {
    const auto &x = m_.operands[a.input];
    const auto &o = m_.operands[a.output];
    if (!x.windowed || !o.windowed || x.shape.size() != o.shape.size() || m_.grid.empty()) return;
    // Whether the input's block at q and the output's at p share HBM elements.
    auto meets = [&](const SymPoint &q, const SymPoint &p) {
      auto bx = block(a.input, q), bo = block(a.output, p);
      std::vector<Term> c;
      for (std::size_t d = 0; d < bo.size(); ++d) {
        Term xs = bx[d] * x.block[d], os = bo[d] * o.block[d];
        c.push_back(xs < os + o.block[d]);
        c.push_back(os < xs + x.block[d]);
      }
      return ctx_.all_of(c);
    };
    // The window read at q (where the body reads it: a window fetched and
    // never read there takes nothing stale) was fetched at or after some f in [r, q]: the
    // input's block changes at f (from its predecessor e in f's CTA), or
    // f starts its CTA. One fetched before p's visit ended holds what the
    // array held before.
    SymPoint p = point("p"), r = point("r"), q = point("q"), f = point("f"), e = point("e");
    std::vector<Term> starts;
    for (std::size_t k = cta_count(); k < axes_.size(); ++k)
      starts.push_back(f.v[axes_[k]] == 0);
    const Term fetch = ctx_.all_of(starts) || (in_grid(e) && step_back(f, e, cta_count()) &&
                                               !same(block(a.input, e), block(a.input, f)));
    std::vector<Point> v;
    if (query("alias-hazard/" + x.name + "->" + o.name,
              {in_grid(p), in_grid(r), in_grid(q), in_grid(f), lex_lt(p, r), lex_lt(r, f) || same(r.v, f.v),
               lex_lt(f, q) || same(f.v, q.v), fetch, !same(block(a.output, p), block(a.output, r)),
               meets(q, p), fires(a.input, false, true, q)},
              {&q, &p, &r}, v) == Q::sat) {
      out_.findings.push_back(alias_finding(m_, a, v[1], v[0]));
      return;
    }
    // Two points apart along a parallel axis may run on two cores (TPU):
    // one's fetch of the input and the other's write-back of the output
    // meet in HBM in no order. (Not where q visits p's output block too:
    // that revisit across a parallel axis is parallel-write-conflict's.)
    if (scratch_shared_across_parallel_axes(m_)) {
      if (query("alias-hazard/" + x.name + "->" + o.name + "/across-cores",
                {in_grid(p), in_grid(q), apart(p, q), meets(q, p),
                 !same(block(a.output, p), block(a.output, q)), fires(a.input, false, true, q)},
                {&q, &p}, v) == Q::sat) {
        out_.findings.push_back(alias_across_cores_finding(m_, a, v[1], v[0]));
        return;
      }
    }
    // A store at q taking the input's window over the output's block, which
    // overwrites what a store at p, earlier in the visit (in q's CTA: no
    // point between on another block), put there from other inputs that the
    // store at q does not read again at the same blocks.
    for (const auto &[s, rd] : twin_stores(m_, a)) {
      const Effect &st = m_.effects[s];
      const std::vector<std::size_t> again = input_sources(m_, st, a);
      SymPoint pp = point("p"), qq = point("q");
      std::vector<Term> c = {in_grid(pp),
                             in_grid(qq),
                             lex_lt(pp, qq),
                             same(cta(pp), cta(qq)),
                             same(window(a.output, pp), window(a.output, qq)),
                             guard(st, qq),
                             guard(m_.effects[rd], qq),
                             meets(qq, qq)};
      std::vector<Term> stored;
      for (const auto &w : m_.effects) {
        if (w.operand != a.output || w.kind == Effect::read) continue;
        std::vector<Term> lost;
        for (std::size_t op : input_sources(m_, w, a))
          lost.push_back(std::find(again.begin(), again.end(), op) == again.end()
                             ? ctx_.all_of({})
                             : !same(block(op, pp), block(op, qq)));
        stored.push_back(guard(w, pp) && overlap(box_terms(w, pp), box_terms(st, qq)) && ctx_.any_of(lost));
      }
      c.push_back(ctx_.any_of(stored));
      auto best = query_quantified(
          "alias-hazard/" + x.name + "->" + o.name + "/in-visit/line" + std::to_string(st.loc.line),
          [&](smt::Bindings::Aux &aux, bool with_aux) {
            return with(c, {at_no_point(
                               [&](const SymPoint &t) {
                                 return lex_lt(pp, t) && lex_lt(t, qq) &&
                                        !same(window(a.output, t), window(a.output, qq));
                               },
                               aux, with_aux)});
          },
          {&qq, &pp}, by_run());
      if (best) {
        out_.findings.push_back(stale_twin_finding(m_, a, st, (*best)[1], (*best)[0]));
        return;
      }
    }
  }
};

} // namespace

std::optional<QueryCache::Answer> QueryCache::find(const std::string &key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = answers_.find(key);
  if (it == answers_.end()) return std::nullopt;
  return it->second;
}

void QueryCache::store(const std::string &key, Answer a) {
  std::lock_guard<std::mutex> lock(mu_);
  answers_.emplace(key, std::move(a));
}

std::size_t QueryCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answers_.size();
}

RuleOutcome check_symbolic(const KernelModel &m, unsigned timeout_ms, QueryCache *cache) {
  return Sym(m, timeout_ms, cache).run();
}

RuleOutcome check_symbolic(const KernelModel &m, unsigned timeout_ms, const spec::PrefetchSpace &open,
                           const spec::PrefetchContents &start) {
  KernelModel copy = m;
  for (const auto &[n, v] : start)
    for (std::size_t k = 0; k < v.size(); ++k)
      copy.env[spec::prefetch_element(n, static_cast<std::int64_t>(k))] = v[k];
  return Sym(copy, timeout_ms, open).run();
}

RuleOutcome check_copy_addresses(const KernelModel &m, unsigned timeout_ms, const spec::PrefetchSpace &open,
                                 const spec::PrefetchContents &start) {
  KernelModel copy = m;
  for (const auto &[n, v] : start)
    for (std::size_t k = 0; k < v.size(); ++k)
      copy.env[spec::prefetch_element(n, static_cast<std::int64_t>(k))] = v[k];
  return Sym(copy, timeout_ms, open).run_copy_addresses();
}

RuleOutcome check_prefetch_reads(const KernelModel &m, unsigned timeout_ms, const spec::PrefetchSpace *open,
                                 const spec::PrefetchContents *start) {
  if (m.prefetch_reads.empty()) return {};
  if (!open) return Sym(m, timeout_ms, nullptr).run_prefetch_reads();
  KernelModel copy = m;
  if (start)
    for (const auto &[n, v] : *start)
      for (std::size_t k = 0; k < v.size(); ++k)
        copy.env[spec::prefetch_element(n, static_cast<std::int64_t>(k))] = v[k];
  return Sym(copy, timeout_ms, *open).run_prefetch_reads();
}

RuleOutcome check_any_output_coverage(const KernelModel &m, unsigned timeout_ms) {
  // (No solver for a kernel without such an output: building one costs more than most checks.)
  bool any = false;
  for (std::size_t op = 0; op < m.operands.size(); ++op)
    any = any || any_output_written_by_copies(m, op);
  if (!any) return {};
  return Sym(m, timeout_ms, nullptr).run_any_output_coverage();
}

RuleOutcome check_triton_races_symbolically(const KernelModel &m, unsigned timeout_ms) {
  return Sym(m, timeout_ms, nullptr).run_triton_races();
}

bool reads_open_contents_outside_copy_addresses(const KernelModel &m) {
  std::function<bool(const spec::Expr &)> reads = [&](const spec::Expr &e) {
    if (e.op == spec::Op::Name && spec::is_prefetch_element(e.name)) return true;
    return std::any_of(e.args.begin(), e.args.end(), reads);
  };
  auto any = [&](const std::vector<spec::Expr> &xs) { return std::any_of(xs.begin(), xs.end(), reads); };
  for (const auto &e : m.effects)
    if (any(e.guards) || (e.keep_mask && reads(*e.keep_mask))) return true;
  for (const auto &o : m.operands)
    if (any(o.index)) return true;
  for (const auto &w : m.while_bounds)
    if (any(w.guards) || reads(w.cond)) return true;
  return false;
}

} // namespace pipecheck::verifier::rules
