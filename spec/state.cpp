#include "spec/state.hpp"

#include "spec/bind.hpp"
#include "spec/print.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace pipecheck::spec {

bool is_smem_i32_scratch(const Operand &o) {
  return o.role == Role::scratch && o.memory_space == MemorySpace::smem && o.dtype == DType::i32 &&
         o.sem == SemKind::none;
}

std::set<std::string> state_scratches(const KernelSpec &k) {
  std::set<std::string> state;
  for (const auto &o : k.operands)
    if (is_smem_i32_scratch(o)) state.insert(o.name);
  if (state.empty()) return state;
  // What reads data: a ref of an operand that is not (yet) state, a local
  // bound to data. Prefetch arrays, grid ids and loop variables are integers.
  std::set<std::string> data_locals;
  std::function<bool(const Expr &)> reads_data = [&](const Expr &e) {
    if (e.op == Op::Ref && (data_locals.count(e.name) || (k.operand(e.name) && !state.count(e.name))))
      return true;
    if (e.op == Op::Name && data_locals.count(e.name)) return true;
    return std::any_of(e.args.begin(), e.args.end(), reads_data);
  };
  // Until nothing changes: a state scratch given data makes its reads data.
  for (bool changed = true; changed;) {
    changed = false;
    for_each_stmt(k.body, [&](const Stmt &s) {
      if (const auto *l = std::get_if<Let>(&s.kind)) {
        if (!data_locals.count(l->name) && reads_data(l->value)) {
          data_locals.insert(l->name);
          changed = true;
        }
      } else if (const auto *a = std::get_if<Assign>(&s.kind)) {
        if (state.count(a->target.name) && !a->discards() && reads_data(a->value)) {
          state.erase(a->target.name);
          changed = true;
        }
      } else if (const auto *c = std::get_if<Copy>(&s.kind); c && c->kind == CopyKind::in_start) {
        // A pipeline's slot a copy fills (a lowered Mosaic GPU kernel's
        // i32 window, typed as an SMEM scratch) holds data.
        if (state.erase(c->dst.name)) changed = true;
      }
    });
  }
  return state;
}

namespace {

void stores_into(const Block &b, const KernelSpec &k, std::set<std::string> &out) {
  for (const auto &s : b) {
    if (const auto *a = std::get_if<Assign>(&s.kind)) {
      if (k.prefetch(a->target.name) && !k.operand(a->target.name)) out.insert(a->target.name);
    } else if (const auto *i = std::get_if<If>(&s.kind)) {
      stores_into(i->then_body, k, out);
      stores_into(i->else_body, k, out);
    } else if (const auto *f = std::get_if<For>(&s.kind)) {
      stores_into(f->body, k, out);
    }
  }
}

} // namespace

std::set<std::string> written_prefetches(const KernelSpec &k) {
  std::set<std::string> out;
  if (!k.prefetches.empty()) stores_into(k.body, k, out);
  return out;
}

bool has_state(const KernelSpec &k) { return !state_scratches(k).empty() || !written_prefetches(k).empty(); }

std::string undefined_state_message(const UndefinedStateRead &r) {
  return r.element + " is read at grid point " + format_tuple(r.grid_point) +
         " before anything stores it, and this statement depends on its value (an SMEM scratch holds no "
         "value "
         "until the body stores one)";
}

std::string parallel_carry_message(const ParallelStateCarry &c) {
  return "the SMEM state " + c.element + " is carried from grid point " + format_tuple(c.stored_at) +
         " into grid point " + format_tuple(c.grid_point) + ", across axis " + std::to_string(c.axis) +
         ", which is parallel: which steps one core runs, and in what order, is not fixed (mark it "
         "arbitrary, or set the state anew where that axis's index changes)";
}

namespace {

// One state array: an SMEM scratch or a written prefetch array.
struct StateArray {
  std::string name;
  std::vector<std::int64_t> dims;
  bool prefetch = false;
  /// The value of each element at the first step: the prefetched contents
  /// (nullopt when open), or nothing for a scratch.
  std::optional<std::vector<std::int64_t>> initial;
  std::size_t first = 0; ///< its first element's number
};

// The placeholder for element k's value at a step's entry, filled in once the
// grid has been run.
constexpr const char *kEntry = "state entry";

class Elaborator {
public:
  Elaborator(const KernelSpec &k, const Env &params, const PrefetchContents &contents)
      : k_(k), params_(params), contents_(contents), state_(state_scratches(k)) {}

  StateElaboration run() {
    if (!arrays() || !grid()) return std::move(r_);
    KernelSpec out = rewrite();
    if (!r_.errors.empty()) return std::move(r_);
    KernelSpec sim = out;
    if (!sim.prefetches.empty()) {
      PrefetchSpace space = prefetch_space(out, params_);
      if (!space.errors.empty() || !space.unknown.empty()) {
        r_.unknown =
            "scalar prefetch: " + (space.errors.empty() ? space.unknown : space.errors.front().message);
        return std::move(r_);
      }
      // The run reads the body only: the arrays whose contents are known
      // become their values, and a read of one left open stays a read, which
      // has no value (need() says so) without a tree over a long table.
      for (auto &o : sim.operands)
        o.index_map.reset();
      std::erase_if(sim.prefetches, [&](const Prefetch &p) {
        const PrefetchArray *a = space.array(p.name);
        const bool open = !a || (!a->given && !contents_.count(p.name));
        if (open) open_.insert(p.name);
        return open;
      });
      sim = elaborate_prefetch(sim, space, contents_);
    }
    if (!simulate(sim.body)) return std::move(r_);
    fill_entries(out.body);
    r_.kernel = std::move(out);
    return std::move(r_);
  }

private:
  const KernelSpec &k_;
  const Env &params_;
  const PrefetchContents &contents_;
  const std::set<std::string> state_; ///< state_scratches(k_)
  StateElaboration r_;
  std::vector<StateArray> arrays_;
  std::vector<std::string> locals_;  ///< element k's local
  std::vector<std::string> display_; ///< element k as written: "st[0]"
  std::map<std::string, std::size_t> element_of_local_;
  std::string step_; ///< the local holding the step's position in the grid
  std::vector<std::int64_t> grid_;
  std::vector<bool> parallel_; ///< axis a is parallel (and longer than 1)
  /// entry_[k][L]: element k at the entry of step L (nullopt: undefined, or never read).
  std::vector<std::vector<std::optional<std::int64_t>>> entry_;

  void error(Loc l, std::string msg) {
    r_.errors.push_back(Diagnostic{Severity::error, l, std::move(msg), {}});
  }

  std::optional<std::int64_t> constant(const Expr &e) const { return eval_int(e, params_); }

  bool arrays() {
    std::set<std::string> used = kernel_names(k_);
    auto fresh = [&](std::string base) {
      while (used.count(base))
        base += "_";
      used.insert(base);
      return base;
    };
    for (const auto &o : k_.operands) {
      if (!state_.count(o.name)) continue;
      StateArray a;
      a.name = o.name;
      for (const auto &d : o.shape) {
        auto v = constant(d);
        if (!v) {
          r_.unknown = "the SMEM state '" + o.name + "' has an extent that depends on an unbound param";
          return false;
        }
        a.dims.push_back(*v);
      }
      arrays_.push_back(std::move(a));
    }
    for (const auto &name : written_prefetches(k_)) {
      const Prefetch &p = *k_.prefetch(name);
      StateArray a;
      a.name = name;
      a.prefetch = true;
      for (const auto &d : p.dims.empty() ? std::vector<Expr>{p.length} : p.dims) {
        auto v = constant(d);
        if (!v) {
          r_.unknown = "the prefetch array '" + name +
                       "', which the body stores into, has an extent that "
                       "depends on an unbound param";
          return false;
        }
        a.dims.push_back(*v);
      }
      if (auto it = contents_.find(name); it != contents_.end()) {
        a.initial = it->second; // contents given for the run (`run --prefetch`) come first
      } else if (p.values) {
        std::vector<std::int64_t> init;
        for (const auto &e : *p.values) {
          auto v = constant(e);
          if (!v) {
            r_.unknown = "the contents of prefetch '" + name + "' depend on an unbound param";
            return false;
          }
          init.push_back(*v);
        }
        a.initial = std::move(init);
      }
      arrays_.push_back(std::move(a));
    }
    step_ = fresh("step");
    for (auto &a : arrays_) {
      a.first = locals_.size();
      std::int64_t n = 1;
      for (auto d : a.dims)
        n *= d;
      if (a.initial && static_cast<std::int64_t>(a.initial->size()) != n) a.initial.reset();
      for (std::int64_t f = 0; f < n; ++f) {
        std::vector<std::int64_t> idx(a.dims.size());
        std::int64_t rest = f;
        for (std::size_t d = a.dims.size(); d-- > 0;) {
          idx[d] = rest % a.dims[d];
          rest /= a.dims[d];
        }
        std::string shown = a.name + "[", local = a.name;
        for (std::size_t d = 0; d < idx.size(); ++d) {
          shown += (d ? ", " : "") + std::to_string(idx[d]);
          local += "_" + std::to_string(idx[d]);
        }
        const std::string name = fresh(local);
        element_of_local_[name] = locals_.size();
        locals_.push_back(name);
        display_.push_back(shown + "]");
      }
    }
    return true;
  }

  bool grid() {
    if (k_.grid)
      for (const auto &e : *k_.grid) {
        auto v = constant(e);
        if (!v || *v < 0) {
          r_.unknown = "the SMEM state is tabulated over the grid, and the grid extent '" + print(e) +
                       "' depends on an unbound param (bind it with --set)";
          return false;
        }
        grid_.push_back(*v);
      }
    std::int64_t steps = 1;
    for (auto g : grid_) {
      if (g > 0 && steps > kMaxStateSteps / g + 1) {
        steps = kMaxStateSteps + 1;
        break;
      }
      steps *= g;
    }
    if (steps > kMaxStateSteps) {
      r_.unknown = "the SMEM state is tabulated over the grid, which has more than " +
                   std::to_string(kMaxStateSteps) + " steps";
      return false;
    }
    for (std::size_t a = 0; a < grid_.size(); ++a)
      parallel_.push_back(k_.dimension_semantics && a < k_.dimension_semantics->size() &&
                          (*k_.dimension_semantics)[a] == DimSemantics::parallel && grid_[a] > 1);
    entry_.assign(locals_.size(), std::vector<std::optional<std::int64_t>>(static_cast<std::size_t>(steps)));
    return true;
  }

  // The state array element k belongs to.
  std::string state_array(std::size_t k) const {
    std::string name;
    for (const auto &a : arrays_) // in order of their first element
      if (k >= a.first) name = a.name;
    return name;
  }

  const StateArray *array(const std::string &name) const {
    for (const auto &a : arrays_)
      if (a.name == name) return &a;
    return nullptr;
  }

  // The element `r` (a read or store of a state array) names, or nullopt
  // (with an error) when a subscript is not a constant inside its dim.
  std::optional<std::size_t> element(const Expr &r, const StateArray &a) {
    if (r.args.size() != a.dims.size()) {
      error(r.loc, "'" + print(r) + "' must name one element of '" + a.name + "' (" +
                       std::to_string(a.dims.size()) + " subscripts)");
      return std::nullopt;
    }
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < a.dims.size(); ++d) {
      auto v = constant(r.args[d]);
      if (!v) {
        error(r.args[d].loc, "a subscript of SMEM state '" + a.name +
                                 "' must be a constant (literals and params): '" + print(r.args[d]) + "'");
        return std::nullopt;
      }
      if (*v < 0 || *v >= a.dims[d]) {
        error(r.args[d].loc, "'" + print(r) + "' is outside '" + a.name + "', whose dim " +
                                 std::to_string(d) + " has " + std::to_string(a.dims[d]) + " elements");
        return std::nullopt;
      }
      flat = flat * a.dims[d] + *v;
    }
    return a.first + static_cast<std::size_t>(flat);
  }

  Expr expr(const Expr &e) {
    if (e.op == Op::Ref)
      if (const StateArray *a = array(e.name)) {
        auto k = element(e, *a);
        return Expr::var(k ? locals_[*k] : e.name, e.loc);
      }
    return e.map_args([&](const Expr &x) { return expr(x); });
  }

  void block(Block &b) {
    for (auto &s : b) {
      if (auto *a = std::get_if<Assign>(&s.kind)) {
        if (const StateArray *arr = array(a->target.name)) {
          auto k = element(a->target, *arr);
          if (!k) continue;
          Expr v = expr(a->value);
          if (a->accumulate) v = Expr::binary(Op::Add, Expr::var(locals_[*k], a->target.loc), v, s.loc);
          s.kind = Let{locals_[*k], std::move(v)};
          continue;
        }
      }
      if (std::holds_alternative<EmitPipeline>(s.kind)) {
        std::set<std::string> names;
        collect_names(s, names);
        for (const auto &a : arrays_)
          if (names.count(a.name)) {
            error(s.loc, "not supported: SMEM state ('" + a.name + "') in an emit_pipeline's body or specs");
            break;
          }
        continue;
      }
      for_each_expr(s, [&](Expr &e) { e = expr(e); });
      if (auto *i = std::get_if<If>(&s.kind)) {
        block(i->then_body);
        block(i->else_body);
      } else if (auto *f = std::get_if<For>(&s.kind)) {
        block(f->body);
      }
    }
  }

  // `k` with the state arrays gone: reads and stores rewritten, the state
  // scratches and written prefetch arrays dropped (with their index-map
  // arguments), and the entry bindings at the top of the body.
  KernelSpec rewrite() {
    KernelSpec out = k_;
    block(out.body);
    const std::size_t rank = grid_.size();
    std::vector<std::size_t> dropped; // positions of dropped prefetch arrays
    for (std::size_t i = 0; i < k_.prefetches.size(); ++i)
      if (array(k_.prefetches[i].name)) dropped.push_back(i);
    for (auto &o : out.operands)
      if (o.index_map && o.index_map->params.size() == rank + k_.prefetches.size())
        for (auto it = dropped.rbegin(); it != dropped.rend(); ++it)
          o.index_map->params.erase(o.index_map->params.begin() + static_cast<std::ptrdiff_t>(rank + *it));
    std::erase_if(out.prefetches, [&](const Prefetch &p) { return array(p.name) != nullptr; });
    std::erase_if(out.operands, [&](const Operand &o) { return state_.count(o.name) > 0; });
    Block prologue;
    Expr linear = Expr::integer(0, k_.body_loc);
    for (std::size_t a = 0; a < rank; ++a) {
      Expr pid =
          Expr::call("program_id", {Expr::integer(static_cast<std::int64_t>(a), k_.body_loc)}, k_.body_loc);
      linear =
          a == 0 ? pid
                 : Expr::binary(Op::Add, Expr::binary(Op::Mul, linear, Expr::integer(grid_[a], k_.body_loc)),
                                pid, k_.body_loc);
    }
    prologue.push_back(Stmt{Let{step_, linear}, k_.body_loc, {}});
    for (std::size_t k = 0; k < locals_.size(); ++k)
      prologue.push_back(
          Stmt{Let{locals_[k], Expr::call(kEntry, {Expr::integer(static_cast<std::int64_t>(k))})},
               k_.body_loc,
               {}});
    out.body.insert(out.body.begin(), prologue.begin(), prologue.end());
    return out;
  }

  // ---------------------------------------------------------- the grid run

  struct Cell {
    std::optional<std::int64_t> value;
    bool open = false;                   ///< prefetched contents left open
    bool carried = false;                ///< stored by an earlier step
    std::vector<std::int64_t> stored_at; ///< carried: the grid point that stored it last
  };
  std::vector<Cell> cells_;
  std::vector<Cell> at_entry_;
  std::vector<bool> stored_; ///< stored during this step
  std::vector<std::int64_t> point_;
  std::map<const Stmt *, bool> names_state_; ///< whether a statement's expressions name state
  std::set<std::string> open_;               ///< prefetch arrays whose contents are left open
  Env env_;
  std::int64_t budget_ = 4'000'000; ///< statements the run may execute

  bool fail(std::string why, const std::string &needs_array = "") {
    r_.unknown = std::move(why);
    r_.needs_contents = !needs_array.empty();
    r_.needs_array = needs_array;
    return false;
  }

  // The value of an integer expression the state depends on at this step.
  std::optional<std::int64_t> need(const Expr &e, const Loc &at) {
    const Expr bound = bind_grid(e, point_, grid_); // v.at points into it
    Evaluation v = evaluate(bound, env_);
    if (v.value) return v.value;
    if (v.at && v.at->op == Op::Ref && open_.count(v.at->name)) {
      fail("the SMEM state depends on the prefetch contents ('" + print(*v.at) + "' at line " +
               std::to_string(at.line) + "), which are left open",
           v.at->name);
      return std::nullopt;
    }
    fail("the SMEM state depends on '" + print(e) + "' at line " + std::to_string(at.line) +
         ", which has no integer value at grid point " + format_tuple(point_));
    return std::nullopt;
  }

  // The state elements `e` reads at their step-entry values (not yet stored
  // this step): the read is of what an earlier step, or the start, left.
  bool reads(const Expr &e, const Loc &at) {
    if (e.op == Op::Name)
      if (auto it = element_of_local_.find(e.name); it != element_of_local_.end() && !stored_[it->second]) {
        const Cell &c = at_entry_[it->second];
        const std::string &shown = display_[it->second];
        if (c.open)
          return fail("the SMEM state " + shown + " starts with the prefetch contents, which are left open",
                      state_array(it->second));
        if (!c.value) return true; // a garbage value: taint() decides whether it matters
        // Steps that agree on every parallel axis run on one core, in the
        // grid's order, and other cores' steps store into their own SMEM:
        // a value stored last by such a step is what this core reads. One
        // stored at a step that differs along a parallel axis may be
        // another core's.
        if (c.carried)
          for (std::size_t a = 0; a < parallel_.size(); ++a)
            if (parallel_[a] && c.stored_at[a] != point_[a]) {
              // The first is the finding; the run goes on with the value
              // the grid's order carries, so that `lower` can still show
              // the program.
              if (!r_.parallel_carry)
                r_.parallel_carry = ParallelStateCarry{at, shown, c.stored_at, point_, a};
              break;
            }
      }
    return std::all_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return reads(a, at); });
  }

  // Whether `e` names a state element's local.
  bool names_state(const Expr &e) const {
    if (e.op == Op::Name && element_of_local_.count(e.name)) return true;
    return std::any_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return names_state(a); });
  }

  // An element's value that nothing stored (an SMEM load of garbage, which
  // does not fault) matters only where it decides something. The locals
  // holding one are tainted; the run goes on with poison for them, and the
  // first statement whose effect depends on one is the finding: a store, a
  // copy, a loop bound, a condition that has no value without them (`(k ==
  // 0) or (prev != id)` at k == 0 has one, either way round, as jnp's `|`).
  std::set<std::string> tainted_;
  std::map<std::string, std::string> taint_shown_; ///< tainted local -> the element it holds

  // The first tainted local or garbage element local `e` names, as its element.
  std::optional<std::string> taint(const Expr &e) const {
    if (e.op == Op::Name) {
      if (auto it = element_of_local_.find(e.name); it != element_of_local_.end() && !stored_[it->second] &&
                                                    !at_entry_[it->second].value &&
                                                    !at_entry_[it->second].open)
        return display_[it->second];
      if (tainted_.count(e.name)) return taint_shown_.at(e.name);
    }
    for (const auto &a : e.args)
      if (auto t = taint(a)) return t;
    return std::nullopt;
  }

  // e's value without the tainted names (nullopt where it needs one); `and`,
  // `or` and `not` decided by either side.
  std::optional<std::int64_t> untainted(const Expr &e, const Env &env) const {
    if ((e.op == Op::And || e.op == Op::Or) && e.args.size() == 2) {
      auto a = untainted(e.args[0], env), b = untainted(e.args[1], env);
      const std::int64_t stop = e.op == Op::And ? 0 : 1;
      if ((a && (*a != 0) == (stop != 0)) || (b && (*b != 0) == (stop != 0))) return stop;
      if (a && b) return 1 - stop;
      return std::nullopt;
    }
    if (e.op == Op::Not && e.args.size() == 1) {
      auto a = untainted(e.args[0], env);
      if (!a) return std::nullopt;
      return *a == 0 ? 1 : 0;
    }
    if (taint(e)) return std::nullopt;
    return evaluate(e, env).value;
  }

  void report_taint(const Loc &at, const std::string &shown) {
    // The first is the finding; the run goes on with poison, so that
    // `lower` can still show the program.
    if (!r_.undefined_read) r_.undefined_read = UndefinedStateRead{at, shown, point_};
  }

  bool stmt_reads(const Stmt &s) {
    // Most statements name no state (a copy's address trees over a page
    // table are large): decided once per statement, not at every step.
    auto [it, fresh] = names_state_.try_emplace(&s, false);
    if (fresh) {
      bool any = false;
      for_each_expr(s, [&](const Expr &e) { any = any || names_state(e); });
      it->second = any;
    }
    if (!it->second) return true;
    bool ok = true;
    for_each_expr(s, [&](const Expr &e) { ok = ok && reads(e, s.loc); });
    return ok;
  }

  bool exec(const Block &b) {
    for (const auto &s : b) {
      if (--budget_ < 0)
        return fail("the SMEM state is tabulated by running the body's integers over the grid, which takes "
                    "more than 4000000 statements here");
      if (const auto *l = std::get_if<Let>(&s.kind);
          l && l->value.op == Op::Call && l->value.name == kEntry) {
        const auto k = static_cast<std::size_t>(l->value.args[0].int_value);
        env_[l->name] = at_entry_[k].value.value_or(kPrefetchPoison);
        continue;
      }
      if (!stmt_reads(s)) return false;
      const auto *let = std::get_if<Let>(&s.kind);
      const bool plain_let = let && !element_of_local_.count(let->name);
      if (plain_let) {
        tainted_.erase(let->name);
        if (auto t = taint(let->value)) {
          tainted_.insert(let->name);
          taint_shown_[let->name] = *t;
        }
      } else if (const auto *i = std::get_if<If>(&s.kind); i && taint(i->cond)) {
        if (auto c = untainted(bind_grid(i->cond, point_, grid_), env_)) {
          if (!exec(*c ? i->then_body : i->else_body)) return false;
          continue;
        }
        report_taint(s.loc, *taint(i->cond));
      } else if (const auto *f = std::get_if<For>(&s.kind)) {
        if (auto t = taint(f->lo); t || (t = taint(f->hi))) report_taint(s.loc, *t);
      } else if (!std::get_if<If>(&s.kind)) {
        std::optional<std::string> t;
        for_each_expr(s, [&](const Expr &e) {
          if (!t) t = taint(e);
        });
        if (t) report_taint(s.loc, *t);
      }
      if (const auto *l = let) {
        if (auto it = element_of_local_.find(l->name); it != element_of_local_.end()) {
          auto v = need(l->value, s.loc);
          if (!v) return false;
          env_[l->name] = *v;
          stored_[it->second] = true;
        } else if (auto v = eval_int(bind_grid(l->value, point_, grid_), env_)) {
          env_[l->name] = *v;
        } else {
          env_.erase(l->name); // a tensor, or an integer the state may not need
        }
      } else if (const auto *i = std::get_if<If>(&s.kind)) {
        auto c = need(i->cond, s.loc);
        if (!c || !exec(*c ? i->then_body : i->else_body)) return false;
      } else if (const auto *f = std::get_if<For>(&s.kind)) {
        auto lo = need(f->lo, s.loc);
        auto hi = lo ? need(f->hi, s.loc) : std::nullopt;
        if (!hi) return false;
        for (std::int64_t v = *lo; v < *hi; ++v) {
          if (!f->var.empty()) env_[f->var] = v;
          if (!exec(f->body)) return false;
        }
      }
    }
    return true;
  }

  bool simulate(const Block &body) {
    cells_.assign(locals_.size(), Cell{});
    for (const auto &a : arrays_)
      for (std::size_t f = 0; a.prefetch && f < (a.initial ? a.initial->size() : 0); ++f)
        cells_[a.first + f].value = (*a.initial)[f];
    for (const auto &a : arrays_)
      if (a.prefetch && !a.initial) {
        std::int64_t n = 1;
        for (auto d : a.dims)
          n *= d;
        for (std::int64_t f = 0; f < n; ++f)
          cells_[a.first + static_cast<std::size_t>(f)].open = true;
      }
    const std::size_t steps = entry_.empty() ? 0 : entry_[0].size();
    point_.assign(grid_.size(), 0);
    for (std::size_t L = 0; L < steps; ++L) {
      std::size_t rest = L;
      for (std::size_t a = grid_.size(); a-- > 0;) {
        point_[a] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(grid_[a]));
        rest /= static_cast<std::size_t>(grid_[a]);
      }
      env_ = params_;
      tainted_.clear();
      at_entry_ = cells_;
      stored_.assign(locals_.size(), false);
      for (std::size_t k = 0; k < locals_.size(); ++k)
        entry_[k][L] = cells_[k].value;
      if (!exec(body)) return false;
      for (std::size_t k = 0; k < locals_.size(); ++k)
        if (stored_[k]) cells_[k] = Cell{env_.at(locals_[k]), false, true, point_};
    }
    return true;
  }

  // ------------------------------------------------------ the entry tables

  // A balanced `where` tree over the step's position: runs of equal values
  // are one leaf; a step whose entry value is undefined (never read there)
  // joins its neighbour's run.
  Expr table(const std::vector<std::optional<std::int64_t>> &values, Loc at) const {
    std::vector<std::int64_t> filled(values.size(), 0);
    std::optional<std::int64_t> last;
    for (std::size_t L = 0; L < values.size(); ++L) {
      if (values[L]) last = values[L];
      filled[L] = last.value_or(0);
    }
    if (auto first = std::find_if(values.begin(), values.end(), [](const auto &v) { return v.has_value(); });
        first != values.end())
      for (auto it = values.begin(); it != first; ++it)
        filled[static_cast<std::size_t>(it - values.begin())] = **first;
    std::vector<std::pair<std::int64_t, std::int64_t>> runs; // (first step, value)
    for (std::size_t L = 0; L < filled.size(); ++L)
      if (runs.empty() || runs.back().second != filled[L])
        runs.push_back({static_cast<std::int64_t>(L), filled[L]});
    if (runs.empty()) return Expr::integer(0, at);
    std::function<Expr(std::size_t, std::size_t)> tree = [&](std::size_t lo, std::size_t hi) -> Expr {
      if (hi - lo == 1) return Expr::integer(runs[lo].second, at);
      const std::size_t mid = lo + (hi - lo) / 2;
      Expr cond = Expr::binary(Op::Lt, Expr::var(step_, at), Expr::integer(runs[mid].first, at), at);
      return Expr::call("where", {cond, tree(lo, mid), tree(mid, hi)}, at);
    };
    return tree(0, runs.size());
  }

  void fill_entries(Block &body) {
    for (auto &s : body)
      if (auto *l = std::get_if<Let>(&s.kind); l && l->value.op == Op::Call && l->value.name == kEntry)
        l->value = table(entry_[static_cast<std::size_t>(l->value.args[0].int_value)], s.loc);
  }
};

} // namespace

StateElaboration elaborate_state(const KernelSpec &k, const Env &params, const PrefetchContents &contents) {
  if (!has_state(k)) {
    StateElaboration r;
    r.kernel = k;
    return r;
  }
  return Elaborator(k, params, contents).run();
}

StateElaboration elaborate(const KernelSpec &k, const PrefetchSpace &space, const Env &params,
                           const PrefetchContents &contents) {
  StateElaboration r = elaborate_state(k, params, contents);
  if (r.kernel && !k.prefetches.empty()) r.kernel = elaborate_prefetch(*r.kernel, space, contents);
  return r;
}

StateElaboration elaborate_picked(const KernelSpec &k, const Env &overrides) {
  const Env params = param_env(k.params, overrides);
  const PrefetchSpace s = prefetch_space(k, params);
  StateElaboration out;
  out.unknown = s.unknown;
  std::optional<PrefetchContents> c;
  if (s.errors.empty() && out.unknown.empty()) c = pick_prefetch(s, 0, out.unknown);
  if (!c) {
    out.errors = s.errors;
    return out;
  }
  return elaborate(k, s, params, *c);
}

} // namespace pipecheck::spec
