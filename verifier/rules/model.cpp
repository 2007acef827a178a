#include "verifier/rules/model.hpp"

#include "spec/checked.hpp"
#include "spec/eval.hpp"
#include "spec/lower.hpp"
#include "spec/prefetch.hpp"
#include "spec/targets.hpp"
#include "spec/typecheck.hpp"
#include "verifier/races/padding.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <set>

namespace pipecheck::verifier::rules {

using spec::Expr;
using spec::Op;

const char *to_string(Effect::Kind k) {
  switch (k) {
  case Effect::read: return "read";
  case Effect::write: return "write";
  case Effect::accumulate: return "accumulate";
  }
  return "read";
}

namespace {

bool is_ds(const Expr &s) { return s.op == Op::Call && s.name == "ds" && s.num_positional() == 2; }

/// The box (Effect::box) of subscript `ref` into operand o (BoxArith over
/// int64); `ok` is cleared where a bound is not known and its dim is the
/// whole block as an over-approximation. One meaning for the model's static
/// boxes and box_at's per grid point.
std::vector<std::pair<std::int64_t, std::int64_t>>
subscript_box(const OperandModel &o, const Expr &ref,
              const std::function<std::optional<std::int64_t>(const Expr &)> &value, bool &ok) {
  BoxArith<std::int64_t> a;
  a.value = value;
  a.num = [](std::int64_t x) { return x; };
  a.add = [](std::int64_t x, std::int64_t y) { return spec::saturating_add(x, y); };
  a.clamp = [](std::int64_t x, std::int64_t n) { return std::clamp<std::int64_t>(x, 0, n); };
  a.max = [](std::int64_t x, std::int64_t y) { return std::max(x, y); };
  return subscript_box_of(o, ref, a, ok);
}

} // namespace

std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>>
box_at(const KernelModel &m, const Effect &e, const std::vector<std::int64_t> &p) {
  if (e.exact) return e.box;
  if (!e.target) return std::nullopt;
  // The grid point by name (spec::evaluate reads program_id(k) from it):
  // a given prefetch table's subscript is a where-tree of a leaf per
  // element, which bind_grid would copy at every point and effect.
  spec::Env env = m.env;
  spec::bind_point_names(env, p, m.grid);
  bool ok = true;
  auto box = subscript_box(
      m.operands[e.operand], *e.target, [&](const Expr &x) { return spec::evaluate(x, env).value; }, ok);
  if (!ok) return std::nullopt;
  return box;
}

std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>>
ref_box_at(const KernelModel &m, const Effect &e, const std::vector<std::int64_t> &p) {
  if (e.exact) return e.ref_box;
  return box_at(m, e, p); // (its target: the ref's own subscripts)
}

std::optional<std::size_t> KernelModel::operand_index(const std::string &n) const {
  for (std::size_t i = 0; i < operands.size(); ++i)
    if (operands[i].name == n) return i;
  return std::nullopt;
}

bool KernelModel::is_aliased_input(std::size_t op) const {
  for (const auto &a : aliases)
    if (a.input == op) return true;
  return false;
}

bool KernelModel::is_aliased_output(std::size_t op) const {
  for (const auto &a : aliases)
    if (a.output == op) return true;
  return false;
}

bool KernelModel::is_read(std::size_t op) const {
  for (const auto &e : effects)
    if (e.operand == op && (e.kind == Effect::read || e.kind == Effect::accumulate)) return true;
  return false;
}

bool KernelModel::zero_filled(std::size_t op) const {
  return op < operands.size() && spec::tma_zero_fills(target && spec::is_gpu_target(*target),
                                                      operands[op].role, operands[op].windowed);
}

bool KernelModel::updates_through_locals(const Effect &w) const {
  if (w.fresh) return false;
  if (reads_own_target(w)) return true;
  for (std::size_t r : w.sources)
    if (effects[r].operand == w.operand && effects[r].kind != Effect::write) return true;
  return false;
}

bool KernelModel::reads_own_target(const Effect &w) const {
  if (w.fresh) return false;
  // Within one statement the reads carry its `order` and the store order + 1.
  auto slow = [&] {
    for (const auto &r : effects)
      if (r.operand == w.operand && r.kind == Effect::read && r.order + 1 == w.order) return true;
    return false;
  };
  const auto i = static_cast<std::size_t>(&w - effects.data());
  if (&w < effects.data() || i >= effects.size()) return slow(); // (not one of the model's effects)
  if (reads_own_.size() != effects.size()) {
    std::set<std::pair<std::size_t, int>> reads;
    for (const auto &r : effects)
      if (r.kind == Effect::read) reads.insert({r.operand, r.order + 1});
    reads_own_.assign(effects.size(), 0);
    for (std::size_t e = 0; e < effects.size(); ++e)
      reads_own_[e] = reads.count({effects[e].operand, effects[e].order}) ? 1 : 0;
  }
  return reads_own_[i] != 0;
}

std::int64_t KernelModel::num_points() const { return spec::num_points(grid); }

namespace {

struct Builder {
  const spec::KernelSpec &k;
  KernelModel m;
  std::map<std::string, Expr> param_subst;
  std::map<std::string, Expr> int_locals;        // integer lets, substituted into guards
  std::map<std::string, std::size_t> ref_locals; // local = a ref (or transpose of one)
  std::map<std::string, bool> ref_local_transposed;
  std::string error;
  int order = 0;
  std::map<std::string, Expr> mask_locals{}; // tensor lets that read no operand (masks, iotas)
  std::map<std::string, Expr> conj_locals{}; // tensor lets of conjunctions, locals inlined (keep_bound)
  std::map<std::string, std::vector<std::size_t>> local_sources;      // a local: the reads its value holds
  std::map<std::string, std::vector<std::size_t>> local_data_sources; // those not only in a where's condition
  int in_condition = 0;                                               // scanning the condition of a where
  std::map<const Expr *, spec::LoadMask> masked_loads;                // the statement's (spec::load_masks)
  std::map<const spec::Stmt *, std::vector<spec::LocalDiscard>> discards; // spec::local_discards of the body
  // A local: its definitions as written, the last one and, after a branch
  // that rebinds it, those of either way (LocalFlow).
  std::map<std::string, std::vector<Expr>> local_values;
  // The locals (and loop variables) whose value names the grid point, as
  // Effect::grid_value (once named, for the rest of the body).
  std::set<std::string> grid_locals;
  bool names_grid(const Expr &e) const {
    if (e.op == Op::Call && e.name == "program_id") return true;
    if ((e.op == Op::Name || e.op == Op::Ref) && grid_locals.count(e.name)) return true;
    return std::any_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return names_grid(a); });
  }

  // The reads (effect indices) `e` holds additively (Effect::added), for a
  // store into operand `target`: `reads` are the reads its refs stand for
  // (the statement's own, or, inside a local's definition, the local's
  // sources); a local is followed into its last definition.
  mutable bool folds_by_extremum = false; // set by added_reads: a maximum/minimum folded what it added
  mutable std::map<std::string, std::set<std::size_t>> added_memo; // added_reads of locals, this store's
  std::set<std::size_t> added_reads(const Expr &e, const std::vector<std::size_t> &reads, std::size_t target,
                                    std::set<std::string> &open) const {
    auto of_operand = [&](const std::string &name) {
      std::set<std::size_t> out;
      if (auto i = m.operand_index(name))
        for (std::size_t r : reads)
          if (m.effects[r].operand == *i) out.insert(r);
      return out;
    };
    auto reads_target = [&](const Expr &x) {
      std::set<std::string> names;
      spec::collect_names(x, names);
      for (const auto &n : names) {
        if (auto i = m.operand_index(n); i && *i == target) return true;
        if (auto it = local_sources.find(n); it != local_sources.end())
          for (std::size_t r : it->second)
            if (m.effects[r].operand == target) return true;
      }
      return false;
    };
    auto both = [&](const Expr &a, const Expr &b) {
      std::set<std::size_t> x = added_reads(a, reads, target, open), y = added_reads(b, reads, target, open);
      x.insert(y.begin(), y.end());
      return x;
    };
    // A product: what one factor adds, scaled by the other, where that one
    // does not read the target. A read both factors hold is squared, not
    // scaled (`(x - mean) * (x - mean)`, a centred variance's term): no term
    // the sum adds.
    auto product = [&](const Expr &a, const Expr &b) {
      std::set<std::size_t> x, y;
      if (!reads_target(b)) x = added_reads(a, reads, target, open);
      if (!reads_target(a)) y = added_reads(b, reads, target, open);
      std::set<std::size_t> out;
      std::set_symmetric_difference(x.begin(), x.end(), y.begin(), y.end(), std::inserter(out, out.end()));
      return out;
    };
    switch (e.op) {
    case Op::Ref: return of_operand(e.name);
    case Op::Name: {
      if (m.operand_index(e.name)) return of_operand(e.name);
      auto v = local_values.find(e.name);
      auto src = local_sources.find(e.name);
      if (v == local_values.end() || src == local_sources.end() || open.count(e.name)) return {};
      // (Once per local and store: a chain of locals each naming the one
      // before twice would otherwise be followed 2^n times.)
      if (auto hit = added_memo.find(e.name); hit != added_memo.end()) return hit->second;
      open.insert(e.name);
      std::set<std::size_t> out;
      for (const auto &def : v->second) {
        auto y = added_reads(def, src->second, target, open);
        out.insert(y.begin(), y.end());
      }
      open.erase(e.name);
      added_memo[e.name] = out;
      return out;
    }
    case Op::Add:
    case Op::Sub: return both(e.args[0], e.args[1]);
    case Op::Neg: return added_reads(e.args[0], reads, target, open);
    case Op::Mul: return product(e.args[0], e.args[1]);
    case Op::Div:
      return reads_target(e.args[1]) ? std::set<std::size_t>{} : added_reads(e.args[0], reads, target, open);
    case Op::Call:
      if ((e.name == "dot" || e.name == "dot_general") && e.num_positional() >= 2)
        return product(e.args[0], e.args[1]);
      if (e.name == "where" && e.num_positional() == 3) return both(e.args[1], e.args[2]);
      // A running max or min folds its other side in as a sum adds it
      // (`mx[...] = maximum(mx[...], max(acc[...], axis=1))`): a partial
      // result folded at one step and again after more accumulation is as
      // wrong as one added twice. Only where one side reads the target: a
      // max with a constant (relu) or of two fresh values folds nothing.
      if ((e.name == "maximum" || e.name == "minimum") && e.num_positional() == 2) {
        if (reads_target(e.args[0]) == reads_target(e.args[1])) return {};
        auto out = both(e.args[0], e.args[1]);
        if (!out.empty()) folds_by_extremum = true;
        return out;
      }
      if ((e.name == "sum" || e.name == "max" || e.name == "min" || e.name == "reshape" ||
           e.name == "broadcast_to" || e.name == "transpose" || e.name == "cast" || e.name == "tile" ||
           e.name == "concatenate") &&
          e.num_positional() >= 1) {
        std::set<std::size_t> out;
        const std::size_t n = e.name == "concatenate" ? e.num_positional() : 1;
        for (std::size_t k = 0; k < n; ++k) {
          auto y = added_reads(e.args[k], reads, target, open);
          out.insert(y.begin(), y.end());
        }
        return out;
      }
      return {};
    default: return {};
    }
  }

  // The reads registered since effect `first`, and those of the locals `e`
  // names: what a value computed by `e` holds (Effect::sources). With
  // `data_only`, without the reads that only pick (in a where's condition,
  // directly or through a local named there): Effect::data_sources.
  std::vector<std::size_t> sources_of(const Expr &e, std::size_t first, bool data_only = false) const {
    std::set<std::size_t> out;
    for (std::size_t i = first; i < m.effects.size(); ++i)
      if (m.effects[i].kind == Effect::read && !(data_only && m.effects[i].selects)) out.insert(i);
    std::set<std::string> names;
    std::function<void(const Expr &)> walk = [&](const Expr &x) {
      if (x.op == Op::Name || x.op == Op::Ref || x.op == Op::Call)
        names.insert(x.name); // (spec::collect_names)
      const bool picks = data_only && x.op == Op::Call && x.name == "where" && x.num_positional() == 3;
      for (std::size_t a = picks ? 1 : 0; a < x.args.size(); ++a)
        walk(x.args[a]);
    };
    walk(e);
    const auto &locals = data_only ? local_data_sources : local_sources;
    for (const auto &n : names)
      if (auto it = locals.find(n); it != locals.end()) out.insert(it->second.begin(), it->second.end());
    return {out.begin(), out.end()};
  }

  // Store `w` (its reads registered from effect `first` on): where every
  // read of its own operand that its value holds (in its statement or
  // through locals) fires under w's guards and more, the condition under
  // which one of them fires (the disjunction of their extra guards). None:
  // no such read, or one that fires wherever w does.
  std::optional<Expr> update_condition(const Effect &w, std::size_t first) const {
    std::vector<std::size_t> own;
    for (std::size_t r = first; r < m.effects.size(); ++r)
      own.push_back(r);
    own.insert(own.end(), w.sources.begin(), w.sources.end());
    std::optional<Expr> any;
    for (std::size_t r : own) {
      const Effect &e = m.effects[r];
      if (e.operand != w.operand || e.kind != Effect::read) continue;
      if (e.guards.size() <= w.guards.size() ||
          !std::equal(w.guards.begin(), w.guards.end(), e.guards.begin()))
        return std::nullopt;
      std::optional<Expr> all;
      for (std::size_t g = w.guards.size(); g < e.guards.size(); ++g)
        all = all ? Expr::binary(Op::And, *all, e.guards[g]) : e.guards[g];
      any = any ? Expr::binary(Op::Or, *any, *all) : *all;
    }
    return any;
  }

  std::optional<spec::Diagnostic> bad_input;

  // A division by zero or an overflow (a param bound by --set can cause
  // one) is bad input, located at the operator.
  std::optional<std::int64_t> eval(const Expr &e, const std::string &where = "an integer expression") {
    spec::Evaluation v = spec::evaluate(e, m.env);
    if (v.is_error() && !bad_input) bad_input = spec::arithmetic_error(e, m.env, where);
    return v.value;
  }

  bool fail(const std::string &s) {
    if (error.empty()) error = s;
    return false;
  }

  void build_operands(const spec::BoundKernel &bound) {
    for (const auto &bo : bound.operands) {
      OperandModel om;
      static_cast<spec::BoundOperand &>(om) = bo;
      const spec::Operand &op = *bo.decl;
      om.acc = op.role == spec::Role::scratch && op.memory_space == spec::MemorySpace::acc;
      if (om.acc && !spec::is_gpu_target(m.target.value_or("")) && !bad_input)
        bad_input =
            spec::Diagnostic{spec::Severity::error,
                             op.loc,
                             "scratch '" + op.name +
                                 "' has memory_space=acc (plgpu.ACC), which needs a Mosaic GPU target "
                                 "(h100 or h200)",
                             {}};
      bool full_block = true;
      for (std::size_t d = 0; d < om.shape.size(); ++d)
        full_block = full_block && om.block[d] == om.shape[d];
      bool zero_index = true;
      if (op.index_map)
        for (const auto &r : op.index_map->results)
          zero_index = zero_index && r.op == Op::Int && r.int_value == 0;
      om.trivial_window = full_block && zero_index;
      om.revisit_any = op.pipeline_mode.revisit == spec::Revisit::any;
      if (op.pipeline_mode.buffer_count) {
        auto v = eval(*op.pipeline_mode.buffer_count, "the buffer count of '" + op.name + "'");
        if (!v || *v < 1) {
          fail("the buffer count of '" + op.name + "' is not a positive constant");
          return;
        }
        om.buffer_count = *v;
      } else {
        om.buffer_count = om.trivial_window ? 1 : 2;
      }
      if (op.role == spec::Role::scratch) om.buffer_count = 1;
      m.operands.push_back(std::move(om));
    }
  }

  // A let whose value is elementwise in the reads it holds (masks_reads: `v
  // = x[...]`, `x = cast(x_ref[...], f32)`, `s = dot(q, k)`, or of such
  // locals): which of its elements reach anything its uses decide, as if the
  // value were written at each (`where(col < n, v, -inf)` in a later
  // statement masks the read as it would inline). Its reads' boxes and
  // masked dims become those of its uses, joined (finish_deferred); a use
  // that is not followed (past the block that binds it, or once a name its
  // value names is bound again: `closed`) takes them whole, as the let
  // registered them. A local never used keeps them whole too.
  using Box = std::vector<std::pair<std::int64_t, std::int64_t>>;
  // Which dim of the mask (counted from its last) each dim of a value
  // stands at, none for a dim the mask does not reach (a dot's contracted
  // dim); nullopt: the value's dims align with the mask's trailing dims.
  using MaskDims = std::optional<std::vector<std::optional<std::size_t>>>;
  struct Deferred {
    Expr value;
    std::vector<std::size_t> reads;               ///< the read effects the let registered
    std::vector<std::size_t> deps;                ///< the deferred lets its value names (records)
    std::vector<Box> box;                         ///< joined over its uses
    std::vector<std::vector<std::size_t>> masked; ///< intersected over its uses
    bool used = false;
    bool closed = false;
    bool whole = false; ///< used whole (use_whole)
  };
  /// Uses followed by scanning a value again; past kMaxDeferredScans (a
  /// chain of locals each used twice by the next doubles them per link) a
  /// use takes the reads whole.
  std::size_t deferred_scans = 0;
  static constexpr std::size_t kMaxDeferredScans = 20000;
  /// Deferred values being scanned, one inside another (a chain of locals
  /// `a1 = a0 + 1; a2 = a1 + 1; ...`); past kMaxDeferredDepth a use takes
  /// the local's reads whole, so a long chain cannot overflow the stack.
  std::size_t deferred_depth = 0;
  static constexpr std::size_t kMaxDeferredDepth = 64;
  std::vector<Deferred> deferred_records;
  std::map<std::string, std::size_t> deferred_names; ///< a local's current record
  bool deferring = false;                            ///< scanning a deferred let's own value
  int walk_depth = 0;

  void join_use(Deferred &d, std::vector<Box> boxes, std::vector<std::vector<std::size_t>> masked) {
    if (!d.used) {
      d.box = std::move(boxes);
      d.masked = std::move(masked);
      d.used = true;
      return;
    }
    for (std::size_t r = 0; r < d.box.size(); ++r) {
      for (std::size_t k = 0; k < d.box[r].size() && k < boxes[r].size(); ++k)
        d.box[r][k] = {std::min(d.box[r][k].first, boxes[r][k].first),
                       std::max(d.box[r][k].second, boxes[r][k].second)};
      std::erase_if(d.masked[r], [&](std::size_t x) {
        return std::find(masked[r].begin(), masked[r].end(), x) == masked[r].end();
      });
    }
  }

  // A use of record `r` that takes its reads whole, and those of the
  // deferred lets it names.
  void use_whole(std::size_t r) {
    // (Once taken whole, a record and what it names stay whole.)
    if (deferred_records[r].whole) return;
    deferred_records[r].whole = true;
    std::vector<Box> boxes;
    std::vector<std::vector<std::size_t>> masked;
    for (std::size_t e : deferred_records[r].reads) {
      boxes.push_back(m.effects[e].box);
      masked.push_back(m.effects[e].masked);
    }
    join_use(deferred_records[r], std::move(boxes), std::move(masked));
    const auto deps = deferred_records[r].deps;
    for (std::size_t d : deps)
      use_whole(d);
  }

  // A use of the deferred local `name` (false: it is none), under the mask
  // `cond` along `dims` where given: its value scanned here, its reads taken
  // back out and joined into its record.
  bool use_deferred(const std::string &name, const Expr *cond, const MaskDims &dims,
                    const std::vector<Expr> &guards, spec::Loc loc) {
    auto it = deferred_names.find(name);
    if (it == deferred_names.end()) return false;
    if (deferring) return true; // a deferred let's own value: the let's uses decide
    const std::size_t r = it->second;
    if (deferred_records[r].closed || deferred_records[r].whole || ++deferred_scans > kMaxDeferredScans ||
        deferred_depth >= kMaxDeferredDepth) {
      use_whole(r);
      return true;
    }
    const Expr value = deferred_records[r].value;
    const std::size_t first = m.effects.size(), contractions = m.contractions.size();
    ++deferred_depth;
    if (cond)
      scan_masked(*cond, value, guards, loc, dims);
    else
      scan_value(value, guards, loc);
    --deferred_depth;
    std::vector<Box> boxes;
    std::vector<std::vector<std::size_t>> masked;
    bool same = true;
    for (std::size_t e = first; e < m.effects.size() && same; ++e)
      if (m.effects[e].kind == Effect::read) {
        const std::size_t k = boxes.size();
        same = k < deferred_records[r].reads.size() &&
               m.effects[deferred_records[r].reads[k]].operand == m.effects[e].operand &&
               m.effects[deferred_records[r].reads[k]].box.size() == m.effects[e].box.size();
        boxes.push_back(m.effects[e].box);
        masked.push_back(m.effects[e].masked);
      }
    same = same && boxes.size() == deferred_records[r].reads.size();
    m.effects.resize(first);
    m.contractions.resize(contractions);
    if (same)
      join_use(deferred_records[r], std::move(boxes), std::move(masked));
    else
      use_whole(r);
    return true;
  }

  // Whether `e` names a deferred local.
  bool names_deferred(const Expr &e) const {
    if (e.op == Op::Name && deferred_names.count(e.name)) return true;
    return std::any_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return names_deferred(a); });
  }
  // Whether `e` reads an operand, directly or through a deferred local.
  bool reads_data(const Expr &e) const { return reads_ref(e, m) || names_deferred(e); }

  // The records whose value names `name` (bound again, or a loop variable
  // taking new values) are followed no further.
  void close_deferred_naming(const std::string &name) {
    for (auto &d : deferred_records)
      if (!d.closed && spec::mentions(d.value, name)) d.closed = true;
  }

  // The deferred reads' boxes, from their uses.
  void finish_deferred() {
    for (const auto &d : deferred_records) {
      if (!d.used) continue;
      for (std::size_t k = 0; k < d.reads.size(); ++k) {
        Effect &e = m.effects[d.reads[k]];
        if (e.box != d.box[k]) e.partial = true;
        e.box = d.box[k];
        e.masked = d.masked[k];
      }
    }
  }

  // The integer locals a ref's subscripts name, with their values (only
  // those: each may be a large term).
  std::map<std::string, Expr> subscript_locals(const Expr &r) const {
    std::set<std::string> names;
    spec::collect_names(r, names);
    std::map<std::string, Expr> out;
    for (const auto &n : names)
      if (auto it = int_locals.find(n); it != int_locals.end()) out.emplace(n, it->second);
    return out;
  }

  // A Triton load of an unaliased input whose subscripts read open prefetch
  // contents, directly or through integer locals: a gather, whose bounds
  // the symbolic rules decide for every allowed contents (CopyAddress).
  bool gather(const Expr &r, std::size_t op, const std::vector<Expr> &guards, const spec::Loc &loc) {
    // (A masked gather is left to the rules on loads, which follow its mask.)
    if (!m.triton || m.operands[op].role != spec::Role::in || m.is_aliased_input(op) ||
        masked_loads.count(&r))
      return false;
    auto names_element = [](const Expr &x) {
      std::set<std::string> names;
      spec::collect_names(x, names);
      return std::any_of(names.begin(), names.end(),
                         [](const std::string &n) { return spec::is_prefetch_element(n); });
    };
    std::map<std::string, Expr> locals = subscript_locals(r);
    bool reads = names_element(r);
    for (const auto &[n, v] : locals)
      reads = reads || names_element(v);
    if (!reads) return false;
    CopyAddress a;
    a.operand = op;
    a.gather = true;
    a.held = std::make_shared<const Expr>(r);
    a.ref = a.held.get();
    a.locals = std::move(locals);
    a.guards = guards;
    a.loc = loc;
    m.copy_addresses.push_back(std::move(a));
    return true;
  }

  // Registers reads of every operand ref in a tensor expression, and the dims
  // that dot/sum/max contract.
  void scan_value(const Expr &e, const std::vector<Expr> &guards, const spec::Loc &loc) {
    if (e.op == Op::Name) {
      use_deferred(e.name, nullptr, std::nullopt, guards, loc);
      return;
    }
    if (e.op == Op::Ref) {
      if (auto i = m.operand_index(e.name)) {
        Effect ef;
        ef.kind = Effect::read;
        ef.operand = *i;
        ef.guards = guards;
        ef.order = order;
        ef.partial = is_partial(e);
        ef.box = box_of(e, *i, &ef.exact);
        ef.ref_box = ef.box;
        if (!ef.exact) ef.target = substituted_target(e);
        ef.loc = loc;
        ef.selects = in_condition > 0;
        if (auto it = masked_loads.find(&e); it != masked_loads.end()) {
          ef.masked_load = true;
          if (auto dims = value_dims(e, *i)) {
            const spec::LoadMask &lm = it->second;
            ef.load_mask = mask_expr(lm.holds ? *lm.cond : Expr::unary(Op::BitNot, *lm.cond));
            ef.load_dims = std::move(*dims);
            ef.load_locals = subscripted_mask_locals(*ef.load_mask);
          }
        }
        ef.gather = gather(e, *i, guards, loc);
        m.effects.push_back(std::move(ef));
      }
      for (const auto &a : e.args)
        scan_value(a, guards, loc);
      return;
    }
    // `where(c, a, b)` with an integer condition (`k == 0`, no block data):
    // a reaches the value only where c holds and b only where it does not,
    // so their reads count under those guards (`where(k == 0, init,
    // acc[...])`, upstream's load_with_init, reads acc only past step 0).
    // A where whose branches read no operand (an integer tree over a
    // prefetch array's contents) needs no guards.
    if (split_grid_select(e, guards, loc,
                          [&](const Expr &b, const std::vector<Expr> &g) { scan_value(b, g, loc); }))
      return;
    // `where(c, x, y)`: x counts only where c holds and y only where it
    // does not (`where(col >= n, 0, x[...])` masks as `where(col < n, x[...], 0)`).
    if (e.op == Op::Call && e.name == "where" && e.num_positional() == 3 &&
        (masks_reads(e.args[1]) || masks_reads(e.args[2]))) {
      ++in_condition;
      scan_value(e.args[0], guards, loc);
      --in_condition;
      for (std::size_t b = 1; b < 3; ++b) {
        if (!masks_reads(e.args[b]))
          scan_value(e.args[b], guards, loc);
        else
          scan_masked(b == 1 ? e.args[0] : Expr::unary(Op::BitNot, e.args[0]), e.args[b], guards, loc);
      }
      for (std::size_t a = 3; a < e.args.size(); ++a)
        scan_value(e.args[a], guards, loc);
      return;
    }
    // `x & m` with a mask m that reads no operand (`(x[...] > 0.5) & (col <
    // n)`): where m is 0 the result is 0 whatever x holds, as `where(m, x, 0)`.
    if (e.op == Op::BitAnd && e.args.size() == 2) {
      for (std::size_t s = 0; s < 2; ++s) {
        const Expr &mk = e.args[s], &x = e.args[1 - s];
        if (reads_data(mk) || reads_local_ref(mk) || !reads_data(x) || !masks_reads(x)) continue;
        scan_value(mk, guards, loc);
        scan_masked(mk, x, guards, loc);
        return;
      }
    }
    if (e.op == Op::Call) {
      note_contraction(e, loc);
    }
    const bool where = e.op == Op::Call && e.name == "where" && e.num_positional() == 3;
    for (std::size_t a = 0; a < e.args.size(); ++a) {
      in_condition += where && a == 0;
      scan_value(e.args[a], guards, loc);
      in_condition -= where && a == 0;
    }
  }

  // Whether an element of `v` at some position comes only from elements at
  // that position of the operand reads in it: an operand read, or an
  // elementwise operator or function (cast, abs, maximum, ...) of such
  // values and of values with no read (a bf16 load cast to f32, `x * x`).
  // A where's mask then narrows those reads as it would the read itself.
  // A dot's result position (b, m, n) takes the elements of its operands
  // at those positions along their batch and free dims (every element
  // along a contracted dim): a mask on the result narrows the operands'
  // reads along those dims (`where(col < n, dot(q, k, trans_b=True), -inf)`
  // masks k's padded rows, the result's padded columns). Also a transpose
  // (its dims reversed) and the elementwise forms.
  bool masks_reads(const Expr &v) const {
    if (v.op == Op::Ref) return m.operand_index(v.name).has_value();
    // A deferred local's value is such a value (its uses narrow its reads).
    if (v.op == Op::Name && deferred_names.count(v.name)) return true;
    if (!reads_data(v)) return true;
    if (v.op == Op::Call && (v.name == "dot" || v.name == "dot_general"))
      return dot_operand_dims(v).has_value() && masks_reads(v.args[0]) && masks_reads(v.args[1]);
    if (v.op == Op::Call && v.name == "transpose" && v.num_positional() == 1)
      return value_rank(v.args[0]) == 2 && masks_reads(v.args[0]);
    // A where is elementwise in its three arguments: an outer mask narrows
    // the reads of both branches and of the condition (`where(valid,
    // exp(where(causal, s, -inf) - lse[...]), 0)`).
    if (v.op == Op::Call && v.name == "where" && v.num_positional() == 3 && v.args.size() == 3)
      return masks_reads(v.args[0]) && masks_reads(v.args[1]) && masks_reads(v.args[2]);
    const bool fn = v.op == Op::Call && spec::is_elementwise_fn(v.name);
    const bool oper = spec::is_elementwise_op(v.op);
    if (!fn && !oper) return false;
    const std::size_t n = fn && v.name == "cast" ? 1 : v.num_positional();
    for (std::size_t k = 0; k < n; ++k)
      if (!masks_reads(v.args[k])) return false;
    return true;
  }

  // `dims` for a value of rank n: its trailing alignment with the value it
  // is part of (broadcasting).
  static std::vector<std::optional<std::size_t>> aligned(const MaskDims &dims, std::size_t n) {
    std::vector<std::optional<std::size_t>> r(n);
    for (std::size_t k = 0; k < n; ++k)
      if (!dims)
        r[k] = n - 1 - k;
      else if (k + dims->size() >= n)
        r[k] = (*dims)[k + dims->size() - n];
    return r;
  }

  // The dot's operands' dims in its result: for each operand, per dim, the
  // result dim it stands at (none where contracted); nullopt where an
  // operand's rank is unknown or the dims are malformed.
  std::optional<std::array<std::vector<std::optional<std::size_t>>, 2>>
  dot_operand_dims(const Expr &dot) const {
    if (dot.num_positional() != 2) return std::nullopt;
    auto ra = value_rank(dot.args[0]), rb = value_rank(dot.args[1]);
    if (!ra || !rb) return std::nullopt;
    spec::DotDims d;
    if (dot.name == "dot") {
      if (*ra != 2 || *rb != 2) return std::nullopt;
      auto flag = [&](const char *k) {
        const Expr *f = dot.kwarg(k);
        return f && spec::bool_literal(*f).value_or(false);
      };
      d = spec::dot_dims(2, 2, flag("trans_a"), flag("trans_b"));
    } else {
      spec::Loc where;
      auto g = spec::dot_general_dims(dot, where);
      if (!g.ok()) return std::nullopt;
      d = g.value;
    }
    std::array<std::vector<std::optional<std::size_t>>, 2> out{std::vector<std::optional<std::size_t>>(*ra),
                                                               std::vector<std::optional<std::size_t>>(*rb)};
    const auto in = [](const std::vector<std::int64_t> &v, std::size_t x) {
      return std::find(v.begin(), v.end(), static_cast<std::int64_t>(x)) != v.end();
    };
    const std::vector<std::int64_t> *batch[2] = {&d.lhs_batch, &d.rhs_batch},
                                    *contract[2] = {&d.lhs_contract, &d.rhs_contract};
    std::size_t at = d.lhs_batch.size(); // the free dims follow the batch dims, a's then b's
    for (std::size_t s = 0; s < 2; ++s)
      for (std::size_t x = 0; x < out[s].size(); ++x) {
        if (in(*contract[s], x)) continue;
        const auto &b = *batch[s];
        if (auto it = std::find(b.begin(), b.end(), static_cast<std::int64_t>(x)); it != b.end())
          out[s][x] = static_cast<std::size_t>(it - b.begin());
        else
          out[s][x] = at++;
      }
    return out;
  }

  // The rank of a value, where the expression says it: an operand read, a
  // shape argument, a dot, or an elementwise combination of such.
  mutable std::set<std::string> rank_open_; // value_rank: the locals being followed
  std::optional<std::size_t> value_rank(const Expr &e) const {
    if (e.op == Op::Int || e.op == Op::Float) return 0;
    // A tensor local: the rank of its definitions, where they agree
    // (`q = where(valid, q_ref[...], 0)`, then `dot(q, k_ref[...])`).
    if (e.op == Op::Name && !m.operand_index(e.name) && !rank_open_.count(e.name)) {
      std::vector<Expr> defs;
      if (auto v = local_values.find(e.name); v != local_values.end()) defs = v->second;
      if (auto k = mask_locals.find(e.name); defs.empty() && k != mask_locals.end())
        defs.push_back(k->second);
      if (defs.empty()) return std::nullopt;
      rank_open_.insert(e.name);
      std::optional<std::size_t> r;
      bool agree = true;
      for (const auto &d : defs) {
        auto x = value_rank(d);
        agree = agree && x && (!r || *r == *x);
        r = x;
      }
      rank_open_.erase(e.name);
      return agree ? r : std::nullopt;
    }
    if (e.op == Op::Ref) {
      auto op = m.operand_index(e.name);
      if (!op) return std::nullopt;
      auto d = value_dims(e, *op);
      return d ? std::optional<std::size_t>(d->size()) : std::nullopt;
    }
    if (e.op == Op::Call) {
      const std::size_t np = e.num_positional();
      const Expr *shape = e.name == "iota" && np >= 1                                    ? &e.args[0]
                          : (e.name == "broadcast_to" || e.name == "reshape") && np == 2 ? &e.args[1]
                                                                                         : nullptr;
      if (shape)
        return shape->op == Op::Tuple ? std::optional<std::size_t>(shape->args.size()) : std::nullopt;
      if (e.name == "transpose" && np == 1) return value_rank(e.args[0]);
      if (e.name == "cast" && np >= 1) return value_rank(e.args[0]);
      if (e.name == "where" && np != 3) return std::nullopt;
      if (e.name == "dot" || e.name == "dot_general") {
        auto d = dot_operand_dims(e);
        if (!d) return std::nullopt;
        std::size_t n = 0;
        for (const auto &side : *d)
          for (const auto &x : side)
            if (x) n = std::max(n, *x + 1);
        return n;
      }
      if (!spec::is_elementwise_fn(e.name) && e.name != "where") return std::nullopt;
    } else if (!spec::is_elementwise_op(e.op)) {
      return std::nullopt;
    }
    std::size_t r = 0;
    for (std::size_t k = 0; k < e.num_positional(); ++k) {
      auto a = value_rank(e.args[k]);
      if (!a) return std::nullopt;
      r = std::max(r, *a);
    }
    return r;
  }

  // `where(c, a, b)` with a grid condition c whose branches read operands:
  // scans c, then each branch with `branch` under the guards plus c (a) or
  // not c (b). False (nothing scanned) for any other expression.
  bool split_grid_select(const Expr &e, const std::vector<Expr> &guards, spec::Loc loc,
                         const std::function<void(const Expr &, const std::vector<Expr> &)> &branch) {
    if (!(e.op == Op::Call && e.name == "where" && e.num_positional() == 3 && e.args.size() == 3 &&
          grid_condition(e.args[0]) && reads_in_branches(e)))
      return false;
    scan_value(e.args[0], guards, loc);
    const Expr c = guard_expr(*grid_condition(e.args[0]));
    auto then_g = guards, else_g = guards;
    then_g.push_back(c);
    else_g.push_back(Expr::unary(Op::Not, c));
    branch(e.args[1], then_g);
    branch(e.args[2], else_g);
    return true;
  }

  // Scans `v` (masks_reads holds) with each operand read in it narrowed by
  // the mask `cond` along the dims `dims` says.
  void scan_masked(const Expr &cond, const Expr &v, const std::vector<Expr> &guards, spec::Loc loc,
                   const MaskDims &dims = std::nullopt) {
    if (v.op == Op::Name && use_deferred(v.name, &cond, dims, guards, loc)) return;
    if (v.op == Op::Ref) {
      const std::size_t first = m.effects.size();
      scan_value(v, guards, loc);
      // scan_value registers a ref's own read before those in its subscripts.
      if (m.effects.size() > first) narrow_by_mask(cond, v, m.effects[first], dims);
      return;
    }
    if (!reads_data(v)) {
      scan_value(v, guards, loc);
      return;
    }
    if (v.op == Op::Call && (v.name == "dot" || v.name == "dot_general")) {
      note_contraction(v, loc);
      const auto sides = *dot_operand_dims(v);
      const auto result = aligned(dims, *value_rank(v));
      for (std::size_t s = 0; s < 2; ++s) {
        std::vector<std::optional<std::size_t>> child;
        for (const auto &x : sides[s])
          child.push_back(x ? result[*x] : std::nullopt);
        scan_masked(cond, v.args[s], guards, loc, child);
      }
      for (std::size_t a = 2; a < v.args.size(); ++a)
        scan_value(v.args[a], guards, loc);
      return;
    }
    if (v.op == Op::Call && v.name == "transpose") {
      auto child = aligned(dims, 2);
      std::swap(child[0], child[1]);
      scan_masked(cond, v.args[0], guards, loc, child);
      return;
    }
    // A where inside a mask that reads data (`where(col == label[...],
    // where(col < n, x[...], -inf), 0)`): the outer mask narrows nothing,
    // the inner one does (scan_value's).
    if (v.op == Op::Call && v.name == "where" && v.num_positional() == 3 && v.args.size() == 3 &&
        !data_free_mask(cond)) {
      scan_value(v, guards, loc);
      return;
    }
    // Broadcasting aligns an argument's dims with the value's last ones.
    auto arg = [&](const Expr &a, const std::vector<Expr> &g) {
      if (!dims) return scan_masked(cond, a, g, loc);
      auto r = value_rank(a);
      if (r && *r <= dims->size())
        scan_masked(cond, a, g, loc, aligned(dims, *r));
      else
        scan_value(a, g, loc);
    };
    // A select on a grid condition inside the mask splits the guards, as
    // scan_value does (`where(rows, x[...], where(k == 0, 0, t[...]))`: t
    // is read only where k != 0).
    if (split_grid_select(v, guards, loc, arg)) return;
    for (const auto &a : v.args)
      arg(a, guards);
  }

  // The array dims a ref's value keeps, in order (a scalar subscript drops
  // its dim); nullopt where the ref is not a plain subscript list.
  std::optional<std::vector<std::size_t>> value_dims(const Expr &ref, std::size_t op) const {
    const auto &o = m.operands[op];
    std::vector<std::size_t> view, dims;
    for (std::size_t d = 0; d < o.block.size(); ++d)
      if (!o.squeezed[d]) view.push_back(d);
    std::size_t explicit_n = 0;
    for (const auto &s : ref.args) {
      if (s.op == Op::None) return std::nullopt;
      if (s.op != Op::Ellipsis) ++explicit_n;
    }
    if (explicit_n > view.size()) return std::nullopt;
    std::size_t v = 0;
    for (const auto &s : ref.args) {
      if (s.op == Op::Ellipsis) {
        for (std::size_t k = 0; k < view.size() - explicit_n; ++k)
          dims.push_back(view[v++]);
        continue;
      }
      if (s.op == Op::Slice || is_ds(s)) dims.push_back(view[v]);
      ++v;
    }
    for (; v < view.size(); ++v)
      dims.push_back(view[v]);
    return dims;
  }

  // A tensor expression with params, integer locals and mask locals
  // substituted; program_id stays.
  Expr mask_expr(const Expr &c) {
    // Integer lets first: a grid index or param inside a mask (`mine = row // 8 == i`).
    Expr g = guard_expr(c);
    return mask_locals.empty() ? g : spec::substitute(g, mask_locals);
  }

  // The value of a mask the params decide (iota, comparisons, `& | ~`, ...),
  // or nullopt (it reads data or a grid index).
  std::optional<races::IntTensor> concrete_mask(const Expr &masked) const {
    races::PaddingFlow flow([this](const std::string &n) { return m.operand_index(n).has_value(); },
                            [](const Expr &) { return races::RefPadding{}; });
    return flow.concrete(masked, m.env);
  }

  // `where(c, x[s], ...)`: an element of x[s] at a position where c holds
  // nowhere never reaches the value, so the read's box along a dim shrinks
  // to the span of positions where c holds somewhere (megablox masks its k
  // remainder this way: `where(iota(shape, 1) < k_rem, lhs[...], 0)`).
  void narrow_by_mask(const Expr &cond, const Expr &ref, Effect &rd, const MaskDims &at = std::nullopt) {
    // `a & b` where one side reads data (`valid & (col == label[...])`):
    // an element reaches the value only where each holds, so each side that
    // reads none narrows as it would alone.
    if ((cond.op == Op::BitAnd || cond.op == Op::And) && cond.args.size() == 2 && !data_free_mask(cond)) {
      narrow_by_mask(cond.args[0], ref, rd, at);
      narrow_by_mask(cond.args[1], ref, rd, at);
      return;
    }
    auto dims = value_dims(ref, rd.operand);
    if (!dims) return;
    const auto from_end = aligned(at, dims->size());
    const Expr mk = mask_expr(cond);
    auto mask = concrete_mask(mk);
    if (!mask) {
      // What is left of a mask that reads no data: program_id, iotas and
      // arithmetic (a tensor local still named reads an operand).
      if (data_free_mask(cond))
        for (std::size_t k = 0; k < dims->size(); ++k)
          if (from_end[k]) rd.masked.push_back((*dims)[k]);
      return;
    }
    const auto &shape = mask->shape;
    const std::size_t r = shape.size(), nd = dims->size();
    for (std::size_t k = 0; k < nd; ++k) {
      if (!from_end[k] || *from_end[k] >= r) continue;
      const std::size_t md = r - 1 - *from_end[k], d = (*dims)[k];
      auto &b = rd.box[d];
      if (shape[md] != b.second - b.first || shape[md] <= 1) continue;
      // Row-major position of `md` in a flat index: (flat / stride) % extent.
      std::int64_t stride = 1;
      for (std::size_t j = md + 1; j < r; ++j)
        stride *= shape[j];
      std::int64_t lo = shape[md], hi = -1;
      for (std::size_t f = 0; f < mask->v.size(); ++f)
        if (mask->v[f] != 0) {
          const std::int64_t i = (static_cast<std::int64_t>(f) / stride) % shape[md];
          lo = std::min(lo, i);
          hi = std::max(hi, i);
        }
      if (hi < 0) return; // c holds nowhere: leave the read as it is
      b = {b.first + lo, b.first + hi + 1};
      rd.partial = true;
    }
  }

  // Whether a mask reads no data once its params and mask locals are
  // substituted: program_id, iotas and arithmetic (a tensor local still
  // named reads an operand). Only such a mask narrows a read.
  bool data_free_mask(const Expr &cond) {
    const Expr mk = mask_expr(cond);
    std::set<std::string> names;
    spec::collect_names(mk, names);
    return !reads_data(mk) && !reads_local_ref(mk) &&
           std::none_of(names.begin(), names.end(),
                        [&](const std::string &n) { return tensor_locals.count(n); });
  }

  // The mask locals a substituted mask reads through a subscript (`m[4:32]`,
  // which substitution leaves named), with their values.
  std::map<std::string, Expr> subscripted_mask_locals(const Expr &mask) const {
    std::map<std::string, Expr> out;
    std::function<void(const Expr &)> walk = [&](const Expr &x) {
      if (x.op == Op::Ref)
        if (auto it = mask_locals.find(x.name); it != mask_locals.end()) out[x.name] = it->second;
      for (const auto &y : x.args)
        walk(y);
    };
    walk(mask);
    return out;
  }

  // Effect::keep_bound of a keep store's condition `cond`.
  std::optional<Expr> data_free_bound(const Expr &cond) {
    std::optional<Expr> out;
    std::function<void(const Expr &)> split = [&](const Expr &e) {
      if ((e.op == Op::BitAnd || e.op == Op::And) && e.args.size() == 2) {
        split(e.args[0]);
        split(e.args[1]);
      } else if (auto it = conj_locals.find(e.name); e.op == Op::Name && it != conj_locals.end()) {
        split(it->second);
      } else if (data_free_mask(e)) {
        Expr t = mask_expr(e);
        out = out ? Expr::binary(Op::BitAnd, std::move(*out), std::move(t), e.loc) : std::move(t);
      }
    };
    split(cond);
    return out;
  }

  bool reads_local_ref(const Expr &e) const {
    if ((e.op == Op::Ref || e.op == Op::Name) && ref_locals.count(e.name)) return true;
    for (const auto &a : e.args)
      if (reads_local_ref(a)) return true;
    return false;
  }

  // A where condition that holds or fails for the whole block at a grid
  // point: an integer condition (`k == 0`), possibly broadcast to the block
  // (spec::unbroadcast). The condition itself.
  // `&`, `|` and `~` of such conditions (jnp's way to write `and` on bools,
  // spec::is_truth_value) are read as `and`, `or` and `not`.
  std::optional<Expr> grid_condition(const Expr &c) const {
    const Expr &u = spec::unbroadcast(c);
    if (!is_tensor_value(u)) return u;
    if (!spec::is_truth_value(u) || (u.op != Op::BitAnd && u.op != Op::BitOr && u.op != Op::BitNot))
      return std::nullopt;
    std::vector<Expr> args;
    for (const auto &a : u.args) {
      auto g = grid_condition(a);
      if (!g) return std::nullopt;
      args.push_back(std::move(*g));
    }
    if (u.op == Op::BitNot) return Expr::unary(Op::Not, std::move(args[0]), u.loc);
    return Expr::binary(u.op == Op::BitAnd ? Op::And : Op::Or, std::move(args[0]), std::move(args[1]), u.loc);
  }

  bool reads_in_branches(const Expr &where) const {
    for (std::size_t a = 1; a < 3; ++a)
      if (reads_ref(where.args[a], m) || reads_local_ref(where.args[a])) return true;
    return false;
  }

  static bool reads_ref(const Expr &e, const KernelModel &m) {
    if ((e.op == Op::Ref || e.op == Op::Name) && m.operand_index(e.name)) return true;
    for (const auto &a : e.args)
      if (reads_ref(a, m)) return true;
    return false;
  }

  static bool is_partial(const Expr &ref) {
    for (const auto &s : ref.args)
      if (s.op != Op::Ellipsis &&
          !(s.op == Op::Slice && s.args.size() == 2 && s.args[0].op == Op::None && s.args[1].op == Op::None))
        return true;
    return false;
  }

  // A subscript bound known statically: params and integer locals substituted.
  std::optional<std::int64_t> static_int(const Expr &e) { return spec::evaluate(guard_expr(e), m.env).value; }

  /// `*exact` (when given) is cleared where a subscript is not static and
  /// its dim is the whole block as an over-approximation.
  std::vector<std::pair<std::int64_t, std::int64_t>> box_of(const Expr &ref, std::size_t op,
                                                            bool *exact = nullptr) {
    bool ignored = true;
    return subscript_box(
        m.operands[op], ref, [&](const Expr &e) { return static_int(e); }, exact ? *exact : ignored);
  }

  /// The target with params and integer locals substituted in its
  /// subscripts (Effect::target).
  Expr substituted_target(const Expr &ref) {
    Expr t = ref;
    for (auto &s : t.args)
      s = guard_expr(s);
    return t;
  }

  // The operand a tensor argument reads directly (a ref, a local bound to a
  // ref, or transpose of either), and whether it is transposed.
  std::optional<std::pair<std::size_t, bool>> direct_operand(const Expr &e) {
    if (e.op == Op::Ref) {
      if (auto i = m.operand_index(e.name)) return std::make_pair(*i, false);
      return std::nullopt;
    }
    if (e.op == Op::Name) {
      auto it = ref_locals.find(e.name);
      if (it != ref_locals.end()) return std::make_pair(it->second, ref_local_transposed[e.name]);
      return std::nullopt;
    }
    if (e.op == Op::Call && e.name == "transpose" && e.num_positional() == 1) {
      auto inner = direct_operand(e.args[0]);
      if (inner) inner->second = !inner->second;
      return inner;
    }
    if (e.op == Op::Call && e.name == "cast" && e.num_positional() >= 1) return direct_operand(e.args[0]);
    return std::nullopt;
  }

  std::int64_t view_rank(std::size_t op) const {
    std::int64_t r = 0;
    for (bool s : m.operands[op].squeezed)
      r += s ? 0 : 1;
    return r;
  }

  void add_contraction(std::size_t op, std::int64_t view_dim, bool transposed, const spec::Loc &loc,
                       const std::string &fn) {
    std::int64_t r = view_rank(op);
    if (transposed && r == 2) view_dim = 1 - view_dim;
    if (auto d = m.operands[op].view_to_array_dim(view_dim)) m.contractions.push_back({op, *d, loc, fn});
  }

  void note_contraction(const Expr &call, const spec::Loc &loc) {
    if (call.name == "dot" && call.num_positional() == 2) {
      // trans_a / trans_b flip which dim of a 2-D operand is contracted.
      auto trans = [&](const char *k) {
        const Expr *f = call.kwarg(k);
        return f && spec::bool_literal(*f).value_or(false);
      };
      if (auto a = direct_operand(call.args[0])) {
        std::int64_t r = view_rank(a->first);
        if (r >= 1) add_contraction(a->first, r - 1, a->second != trans("trans_a"), loc, call.name);
      }
      if (auto b = direct_operand(call.args[1])) {
        std::int64_t r = view_rank(b->first);
        if (r >= 1)
          add_contraction(b->first, r >= 2 ? r - 2 : 0, b->second != trans("trans_b"), loc, call.name);
      }
    } else if (call.name == "dot_general" && call.num_positional() == 2) {
      spec::Loc where;
      const auto dims = spec::dot_general_dims(call, where);
      if (!dims.ok()) return;
      for (int side = 0; side < 2; ++side)
        if (auto o = direct_operand(call.args[static_cast<std::size_t>(side)])) {
          const std::int64_t r = view_rank(o->first);
          for (auto d : side == 0 ? dims.value.lhs_contract : dims.value.rhs_contract)
            if (d >= 0 && d < r) add_contraction(o->first, d, o->second, loc, call.name);
        }
    } else if ((call.name == "sum" || call.name == "max" || call.name == "min") &&
               call.num_positional() == 1) {
      // With two positional arguments max/min are elementwise (jnp.maximum).
      auto a = direct_operand(call.args[0]);
      if (!a) return;
      std::int64_t r = view_rank(a->first);
      const Expr *axis = call.kwarg("axis");
      if (!axis) {
        for (std::int64_t v = 0; v < r; ++v)
          add_contraction(a->first, v, false, loc, call.name);
        return;
      }
      auto v = eval(*axis);
      if (!v) return;
      std::int64_t ax = *v < 0 ? *v + r : *v;
      if (ax >= 0 && ax < r) add_contraction(a->first, ax, a->second, loc, call.name);
    }
  }

  Expr guard_expr(const Expr &cond) {
    Expr g = spec::substitute(cond, param_subst);
    if (!int_locals.empty()) g = spec::substitute(g, int_locals);
    return g;
  }

  std::set<std::string> tensor_locals; // lets bound to block values
  // A block value: a tensor expression, or one that names a local bound to
  // one (`c = v` copies a block, not an integer).
  bool is_tensor_value(const Expr &e) const {
    if (is_tensor_expr(e)) return true;
    for (const auto &t : tensor_locals)
      if (spec::mentions(e, t)) return true;
    return false;
  }
  static bool is_tensor_expr(const Expr &e) {
    if (e.op == Op::Ref || e.op == Op::Zeros || e.op == Op::Float || e.op == Op::BitAnd ||
        e.op == Op::BitOr || e.op == Op::BitNot || e.op == Op::Tuple)
      return true;
    if (e.op == Op::Call && e.name != "program_id" && e.name != "num_programs" &&
        !spec::is_int_function(e.name))
      return true;
    for (const auto &a : e.args)
      if (is_tensor_expr(a)) return true;
    return false;
  }

  // A body DMA, as the grid point's semantics sees it (the oracle's): its
  // start (or sync_copy) reads the source and writes the destination; waits
  // and semaphores touch no data. An HBM-side ref is no access of the body's
  // (DMAs are how HBM is reached); the race checker sees the rest.
  // Into the spec, which outlives the model.
  std::map<std::string, const spec::Dma *> descriptors;
  void dma(const spec::Dma &d, const std::vector<Expr> &guards, const spec::Loc &loc) {
    if (d.action == spec::DmaAction::bind) {
      descriptors[d.descriptor] = &d;
      return;
    }
    if (d.action != spec::DmaAction::start && d.action != spec::DmaAction::sync_copy) return;
    const spec::Dma *c = &d;
    if (!d.descriptor.empty()) {
      auto it = descriptors.find(d.descriptor);
      if (it == descriptors.end()) return;
      c = it->second;
    }
    auto hbm_side = [&](const Expr &r) {
      auto i = m.operand_index(r.name);
      return !i || !m.operands[*i].decl || m.operands[*i].decl->memory_space == spec::MemorySpace::any ||
             m.operands[*i].decl->memory_space == spec::MemorySpace::hbm;
    };
    // A bare name is the whole ref, as `x[...]`.
    auto as_ref = [](const Expr &r) {
      return r.op == Op::Name ? Expr::ref(r.name, {Expr::leaf(Op::Ellipsis, r.loc)}, r.loc) : r;
    };
    auto address = [&](const Expr &r, bool source) {
      auto i = r.op == Op::Ref || r.op == Op::Name ? m.operand_index(r.name) : std::nullopt;
      if (!i) return;
      CopyAddress a;
      a.operand = *i;
      a.ref = &r;
      if (r.op == Op::Name) {
        // `sync_copy(x, o)`: the whole ref, as o[...].
        a.held = std::make_shared<const Expr>(as_ref(r));
        a.ref = a.held.get();
      }
      a.locals = subscript_locals(r);
      a.guards = guards;
      a.source = source;
      a.loc = loc;
      m.copy_addresses.push_back(std::move(a));
    };
    if (hbm_side(c->src)) address(c->src, true);
    if (hbm_side(c->dst)) address(c->dst, false);
    if (!hbm_side(c->src)) {
      const std::size_t first = m.effects.size();
      scan_value(as_ref(c->src), guards, loc);
      for (std::size_t e = first; e < m.effects.size(); ++e)
        m.effects[e].copy_source = true;
    }
    if (!hbm_side(c->dst)) {
      const Expr dst = as_ref(c->dst);
      const std::size_t i = *m.operand_index(dst.name);
      Effect ef;
      ef.kind = Effect::write;
      ef.operand = i;
      ef.guards = guards;
      ef.order = order + 1;
      ef.partial = is_partial(dst);
      ef.box = box_of(dst, i, &ef.exact);
      if (!ef.exact) ef.target = substituted_target(dst);
      ef.loc = loc;
      m.effects.push_back(std::move(ef));
    }
  }

  // The reads of prefetch arrays in `e` (nested ones too: `ids[perm[i]]`).
  void prefetch_reads(const Expr &e, const std::vector<Expr> &guards) {
    if (const Expr *in = spec::elaborated_read_bounds(e)) {
      PrefetchRead r;
      r.in_range = *in;
      std::set<std::string> names;
      spec::collect_names(*in, names);
      for (const auto &n : names)
        if (auto it = int_locals.find(n); it != int_locals.end()) r.locals.emplace(n, it->second);
      r.guards = guards;
      r.loc = e.loc;
      m.prefetch_reads.push_back(std::move(r));
    }
    if ((e.op == Op::And || e.op == Op::Or) && e.args.size() == 2) {
      // Python's short circuit: the right side is read only where the left
      // does not decide (`k < n and lens[k] == 0`).
      prefetch_reads(e.args[0], guards);
      auto right = guards;
      const Expr left = guard_expr(e.args[0]);
      right.push_back(e.op == Op::And ? left : Expr::unary(Op::Not, left));
      prefetch_reads(e.args[1], right);
      return;
    }
    for (const auto &a : e.args)
      prefetch_reads(a, guards);
  }
  void walk(const spec::Block &body, std::vector<Expr> guards) {
    // A let in a nested block (a branch, a loop iteration) is followed only
    // there: after it, the names its value reads may hold merged values.
    const std::size_t records = deferred_records.size();
    ++walk_depth;
    walk_statements(body, std::move(guards));
    --walk_depth;
    if (walk_depth > 0)
      for (std::size_t r = records; r < deferred_records.size(); ++r)
        deferred_records[r].closed = true;
  }
  void walk_statements(const spec::Block &body, std::vector<Expr> guards) {
    for (const auto &st : body) {
      spec::for_each_expr(st, [&](const Expr &e) { prefetch_reads(e, guards); });
      const std::size_t effects_before = m.effects.size();
      if (const auto *a = std::get_if<spec::Assign>(&st.kind)) {
        order += 2;
        if (a->discards()) {
          // `S[...] = undefined` (a scratch only) neither reads nor writes. What
          // it leaves undefined is the lowered program's per-element check's to
          // find (docs/rules.md): these rules never count it as a write.
          for (const auto &s : a->target.args)
            scan_value(s, guards, st.loc);
          if (auto i = m.operand_index(a->target.name)) m.operands[*i].discards.emplace_back(order, st.loc);
          continue;
        }
        const std::size_t first = m.effects.size();
        masked_loads = spec::load_masks(a->value);
        scan_value(a->value, guards, st.loc);
        masked_loads.clear();
        std::vector<std::size_t> sources = sources_of(a->value, first);
        for (const auto &s : a->target.args)
          scan_value(s, guards, st.loc);
        if (auto i = m.operand_index(a->target.name)) {
          // `T[s] = where(c, v, T[s])`: the last read of T is the kept branch.
          // With an integer condition (`k == 0`, no block data) it is `when c:
          // T[s] = v`: the split below (update_condition) leaves only that.
          // (spec::keep_select: through casts too.)
          const Expr *kept = spec::keep_select(*a);
          const Expr &v = kept ? *kept : a->value;
          const bool select = kept != nullptr;
          // (Not where the selected value reads T too, `where(k == 0, acc * 0, acc)`.)
          auto reads_target = [&](const Expr &x) {
            std::set<std::string> names;
            spec::collect_names(x, names);
            for (const auto &n : names) {
              if (n == a->target.name) return true;
              if (auto it = local_sources.find(n); it != local_sources.end())
                for (std::size_t r : it->second)
                  if (m.effects[r].operand == *i) return true;
            }
            return false;
          };
          const bool grid_select =
              select && grid_condition(v.args[0]) && reads_in_branches(v) && !reads_target(v.args[1]);
          const bool keep = select && !grid_select &&
                            !std::any_of(a->target.args.begin(), a->target.args.end(),
                                         [&](const Expr &x) { return reads_ref(x, m); });
          auto dims = keep ? value_dims(a->target, *i) : std::nullopt;
          // A grid select's kept branch puts back what T holds where the
          // condition fails: a read that only keeps, as a keep-store's.
          if (dims || grid_select)
            for (auto e = m.effects.rbegin(); e != m.effects.rend(); ++e)
              if (e->operand == *i && e->kind == Effect::read && e->order == order) {
                e->keep = true;
                break;
              }
          Effect ef;
          ef.masked_overwrite = keep && !reads_target(v.args[1]);
          if (dims) {
            ef.keep_mask = mask_expr(v.args[0]);
            ef.keep_bound = data_free_bound(v.args[0]);
            ef.keep_dims = *dims;
            ef.keep_locals = subscripted_mask_locals(*ef.keep_mask);
          }
          ef.kind = a->accumulate ? Effect::accumulate : Effect::write;
          {
            std::vector<std::size_t> own;
            for (std::size_t r = first; r < m.effects.size(); ++r)
              if (m.effects[r].kind == Effect::read) own.push_back(r);
            std::set<std::string> open;
            folds_by_extremum = false;
            added_memo.clear();
            const auto added = added_reads(v, own, *i, open);
            ef.added.assign(added.begin(), added.end());
            ef.folds_by_extremum = folds_by_extremum;
          }
          ef.operand = *i;
          ef.guards = guards;
          ef.order = order + 1;
          ef.partial = is_partial(a->target);
          ef.box = box_of(a->target, *i, &ef.exact);
          if (!ef.exact) ef.target = substituted_target(a->target);
          ef.loc = st.loc;
          ef.sources = std::move(sources);
          ef.data_sources = sources_of(a->value, first, true);
          ef.grid_value = names_grid(a->value);
          if (std::optional<Expr> upd =
                  !dims && ef.kind == Effect::write ? update_condition(ef, first) : std::nullopt) {
            Effect fresh = ef;
            fresh.fresh = true;
            fresh.guards.push_back(Expr::unary(Op::Not, *upd));
            ef.guards.push_back(*upd);
            // (A grid select's update puts back what T held: no write at all.)
            if (!grid_select) m.effects.push_back(std::move(ef));
            m.effects.push_back(std::move(fresh));
          } else {
            m.effects.push_back(std::move(ef));
          }
        }
      } else if (const auto *l = std::get_if<spec::Let>(&st.kind)) {
        order += 2;
        const std::size_t first = m.effects.size();
        // (What the value names is bound as before until the let is done.)
        std::set<std::string> named;
        spec::collect_names(l->value, named);
        const bool defer =
            !deferring && masks_reads(l->value) &&
            (reads_ref(l->value, m) || std::any_of(named.begin(), named.end(), [&](const std::string &n) {
               return deferred_names.count(n) > 0;
             }));
        Deferred rec;
        if (defer) {
          rec.value = l->value;
          for (const auto &n : named)
            if (auto d = deferred_names.find(n); d != deferred_names.end()) rec.deps.push_back(d->second);
        }
        deferring = defer;
        masked_loads = spec::load_masks(l->value);
        scan_value(l->value, guards, st.loc);
        masked_loads.clear();
        deferring = false;
        close_deferred_naming(l->name);
        deferred_names.erase(l->name);
        if (defer) {
          for (std::size_t e = first; e < m.effects.size(); ++e)
            if (m.effects[e].kind == Effect::read) rec.reads.push_back(e);
          // (`v = v * 2` names the binding before it: followed no further.)
          rec.closed = named.count(l->name) > 0;
          deferred_names[l->name] = deferred_records.size();
          deferred_records.push_back(std::move(rec));
        }
        // The binding holds from here to the end of its block; where the
        // block is a branch, the value after it is joined with the other
        // way's (join_flow).
        local_values[l->name] = {l->value};
        if (names_grid(l->value)) grid_locals.insert(l->name);
        std::vector<std::size_t> src = sources_of(l->value, first);
        std::vector<std::size_t> data = sources_of(l->value, first, true);
        if (!src.empty())
          local_sources[l->name] = std::move(src);
        else
          local_sources.erase(l->name);
        if (!data.empty())
          local_data_sources[l->name] = std::move(data);
        else
          local_data_sources.erase(l->name);
        // `k = k + 1`: the value reads the old binding, so it is taken first.
        const bool is_int = !is_tensor_value(l->value) && !direct_operand(l->value);
        const std::optional<Expr> int_value =
            is_int ? std::optional<Expr>(guard_expr(l->value)) : std::nullopt;
        if (is_int)
          tensor_locals.erase(l->name);
        else
          tensor_locals.insert(l->name);
        ref_locals.erase(l->name);
        int_locals.erase(l->name);
        mask_locals.erase(l->name);
        if (is_tensor_value(l->value) && !reads_ref(l->value, m) && !reads_local_ref(l->value)) {
          // A mask past the size limit is left unknown (as one that reads data),
          // and so is a value that still names a tensor local: it reads data
          // through it (an online softmax's `m_next = maximum(m_i, m_curr)`,
          // m_curr = max(qk)), and substituting such values into each other
          // grew the carried rows by a copy per unrolled iteration: quadratic.
          Expr mk = mask_expr(l->value);
          std::set<std::string> names;
          spec::collect_names(mk, names);
          const bool via_tensor = std::any_of(names.begin(), names.end(), [&](const std::string &n) {
            // (a mask local read through a subscript stays named)
            return tensor_locals.count(n) > 0 && !mask_locals.count(n);
          });
          if (!via_tensor && size_of(mk) <= kMaxLocalSize) mask_locals[l->name] = std::move(mk);
        }
        {
          Expr ck = is_tensor_value(l->value) ? spec::substitute(mask_expr(l->value), conj_locals) : Expr{};
          conj_locals.erase(l->name);
          // Only a conjunction has conjuncts to split (data_free_bound); any
          // other local stays named there, a tensor local that counts as
          // data, as its value would. (An unrolled `acc = acc + x[...]` kept
          // whole grew by a term an iteration: quadratic.)
          if (is_tensor_value(l->value) && (ck.op == Op::BitAnd || ck.op == Op::And) &&
              size_of(ck) <= kMaxLocalSize)
            conj_locals[l->name] = std::move(ck);
        }
        if (auto d = direct_operand(l->value)) {
          ref_locals[l->name] = d->first;
          ref_local_transposed[l->name] = d->second;
        } else if (int_value) {
          // Many terms with a value at every grid point where the statement
          // runs: the table of those values, which every use copies instead.
          const std::size_t terms = size_of(*int_value);
          std::optional<Expr> table_value;
          if (terms > kTabulateAbove) table_value = tabulate(l->value, guards);
          if (table_value) int_locals[l->name] = std::move(*table_value);
          // `k = where(c(k), k + 1, k)` unrolled: each iteration substitutes
          // k into itself, so the terms grow by a factor per iteration.
          // Past the size limit: the table over a larger grid, before giving up.
          else if (terms > kMaxLocalSize && (table_value = tabulate(l->value, guards, kMaxLocalSize / 4)))
            int_locals[l->name] = std::move(*table_value);
          else if (terms > kMaxLocalSize)
            fail("the integer local '" + l->name + "' bound at line " + std::to_string(st.loc.line) +
                 " grows past " + std::to_string(kMaxLocalSize) +
                 " terms (a `for` or `while` loop that rebinds it from its previous value, unrolled "
                 "symbolically: each iteration holds the last one's terms)");
          else
            int_locals[l->name] = *int_value;
        }
      } else if (const auto *w = std::get_if<spec::If>(&st.kind)) {
        order += 2;
        scan_value(w->cond, guards, st.loc);
        Expr c = guard_expr(w->cond);
        auto then_g = guards;
        then_g.push_back(c);
        const auto before = int_locals;
        const LocalFlow flow_before = local_flow(st);
        walk(w->then_body, then_g);
        const auto after_then = int_locals;
        const LocalFlow flow_then = local_flow(st);
        int_locals = before;
        set_flow(flow_before);
        if (!w->else_body.empty()) {
          auto else_g = guards;
          else_g.push_back(Expr::unary(Op::Not, c));
          walk(w->else_body, else_g);
        }
        merge_branches(c, before, after_then);
        join_flow(flow_then);
      } else if (const auto *f = std::get_if<spec::For>(&st.kind)) {
        loop(*f, guards, st.loc);
      } else if (const auto *d = std::get_if<spec::Dma>(&st.kind)) {
        order += 2;
        dma(*d, guards, st.loc);
      } else if (std::holds_alternative<spec::CommitSmem>(st.kind)) {
        // A fence: no effect on values (its rule walks the body itself).
      } else {
        fail("the kernel body holds a statement that is not an assignment, binding, `when` or `for`");
      }
      if (auto d = discards.find(&st); d != discards.end())
        for (const auto &[cond, holds] : d->second) {
          const auto g = grid_condition(*cond);
          if (!g) continue; // a select on data
          const Expr c = guard_expr(*g);
          for (std::size_t r = effects_before; r < m.effects.size(); ++r)
            if (m.effects[r].kind == Effect::read)
              m.effects[r].guards.push_back(holds ? c : Expr::unary(Op::Not, c));
        }
    }
  }

  static constexpr std::int64_t kMaxUnrolled = 1024;

  // What the tensor locals a block binds hold (their reads, definitions),
  // taken before and after a branch that may not run: after it, a local
  // holds either way's (a lax.cond branch's `when c: v = acc[...]` keeps
  // what v read before too), while inside it a binding replaces the old.
  struct LocalFlow {
    std::map<std::string, std::optional<std::vector<std::size_t>>> sources, data_sources;
    std::map<std::string, std::optional<std::vector<Expr>>> values;
  };
  template <class Body> LocalFlow local_flow(const Body &body) const {
    LocalFlow f;
    spec::for_each_stmt(body, [&](const spec::Stmt &s) {
      if (const auto *l = std::get_if<spec::Let>(&s.kind)) {
        const auto take = [&](const auto &from, auto &into) {
          auto it = from.find(l->name);
          into[l->name] = it == from.end() ? std::nullopt : std::optional(it->second);
        };
        take(local_sources, f.sources);
        take(local_data_sources, f.data_sources);
        take(local_values, f.values);
      }
    });
    return f;
  }
  void set_flow(const LocalFlow &f) {
    const auto put = [](const auto &from, auto &into) {
      for (const auto &[n, v] : from)
        if (v)
          into[n] = *v;
        else
          into.erase(n);
    };
    put(f.sources, local_sources);
    put(f.data_sources, local_data_sources);
    put(f.values, local_values);
  }
  // Each local of `other` holds what it holds now or what `other` says.
  void join_flow(const LocalFlow &other) {
    const auto join = [](const auto &from, auto &into) {
      for (const auto &[n, v] : from) {
        if (!v) continue;
        auto &now = into[n];
        for (const auto &x : *v)
          if (std::find(now.begin(), now.end(), x) == now.end()) now.push_back(x);
        if constexpr (std::is_same_v<std::decay_t<decltype(now)>, std::vector<std::size_t>>)
          std::sort(now.begin(), now.end());
      }
    };
    join(other.sources, local_sources);
    join(other.data_sources, local_data_sources);
    join(other.values, local_values);
  }

  // After `when c:` (or `if c: ... else: ...`): an integer local a branch
  // rebinds is `where(c, then's, else's)` (a carried while counter); one
  // bound in a branch only is not visible after it. int_locals holds the
  // else branch's (or, without one, the old) values.
  void merge_branches(const Expr &c, const std::map<std::string, Expr> &before,
                      const std::map<std::string, Expr> &after_then) {
    std::map<std::string, Expr> merged;
    for (const auto &[n, old] : before) {
      auto t = after_then.find(n);
      auto e = int_locals.find(n);
      if (t == after_then.end() || e == int_locals.end()) continue; // rebound as a tensor
      if (t->second == e->second) {
        merged[n] = t->second;
        continue;
      }
      // An accumulation `k = k + d` in the branch: k + where(c, d, 0), so
      // that a carry summed over many branches grows by d, not twofold.
      const Expr &nv = t->second;
      Expr w = nv.op == Op::Add && nv.args.size() == 2 && nv.args[0] == e->second
                   ? Expr::binary(Op::Add, e->second, Expr::call("where", {c, nv.args[1], Expr::integer(0)}))
                   : Expr::call("where", {c, t->second, e->second});
      if (size_of(w) > kMaxLocalSize) {
        fail("the integer local '" + n + "' that a branch at line " + std::to_string(c.loc.line) +
             " rebinds grows past " + std::to_string(kMaxLocalSize) + " terms (a deep while loop)");
        continue;
      }
      merged[n] = std::move(w);
    }
    int_locals = std::move(merged);
  }
  static constexpr std::size_t kMaxLocalSize = 1 << 16;

  // The while loop decided at each grid point, where its condition and the
  // integers it carries have values there (given prefetch contents, params,
  // program_id): substituting a carried counter into its own condition at
  // every iteration grows the terms by a factor per iteration, while a
  // table over the grid points stays the grid's size. Iteration k then runs
  // under `k < trips` with each carried integer its value at that point and
  // iteration (tables indexed by program_id), which is the same effects.
  // False (nothing done) where some value is unknown or the grid is large.
  static constexpr std::int64_t kMaxTablePoints = 1024;
  // The point's number in the order spec::grid_point gives (row-major, the
  // last axis fastest): ((program_id(0) * g1) + program_id(1)) * g2 + ...
  Expr point_number() const {
    Expr e = Expr::integer(0);
    for (std::size_t a = 0; a < m.grid.size(); ++a) {
      Expr pid = Expr::call("program_id", {Expr::integer(static_cast<std::int64_t>(a))});
      e = a == 0 ? pid
                 : Expr::binary(Op::Add, Expr::binary(Op::Mul, std::move(e), Expr::integer(m.grid[a])), pid);
    }
    return e;
  }
  // v[point] as a search tree on the point's number: a value in log(points)
  // comparisons, a run of equal values one leaf.
  static Expr tree(const Expr &at, const std::vector<std::int64_t> &v, std::size_t lo, std::size_t hi) {
    if (std::all_of(v.begin() + static_cast<std::ptrdiff_t>(lo), v.begin() + static_cast<std::ptrdiff_t>(hi),
                    [&](std::int64_t x) { return x == v[lo]; }))
      return Expr::integer(v[lo]);
    const std::size_t mid = lo + (hi - lo) / 2;
    return Expr::call("where", {Expr::binary(Op::Lt, at, Expr::integer(static_cast<std::int64_t>(mid))),
                                tree(at, v, lo, mid), tree(at, v, mid, hi)});
  }
  Expr table(const std::vector<std::int64_t> &v) const { return tree(point_number(), v, 0, v.size()); }
  // Runs the integer statements of `b` on `env` (the point's values); false
  // where a condition or a loop bound has no value. A let of a block value is skipped, and so is one
  // computed from such a let of this run (`r = iota(...)`, then `q = r // 2`):
  // the walk has not reached them yet, so tensor_locals does not name them.
  // `env` holds the point's coordinates as program_id_var names; `named`
  // each statement's expressions as evaluated there, made once per loop.
  using Named = std::map<const Expr *, Expr>;
  const Expr &named(const Expr &e, Named &cache) const {
    auto it = cache.find(&e);
    if (it == cache.end())
      it =
          cache
              .emplace(&e, spec::grid_calls_as_names(spec::substitute(e, param_subst), m.grid.size(), m.grid))
              .first;
    return it->second;
  }
  bool run_ints(const spec::Block &b, spec::Env &env, Named &cache, int depth = 0) {
    std::set<std::string> blocks;
    return run_ints(b, env, cache, depth, blocks);
  }
  bool run_ints(const spec::Block &b, spec::Env &env, Named &cache, int depth,
                std::set<std::string> &blocks) {
    auto value = [&](const Expr &e) { return spec::evaluate(named(e, cache), env).value; };
    for (const auto &st : b) {
      if (const auto *l = std::get_if<spec::Let>(&st.kind)) {
        const bool block = is_tensor_value(l->value) ||
                           std::any_of(blocks.begin(), blocks.end(),
                                       [&](const std::string &t) { return spec::mentions(l->value, t); });
        if (block) {
          blocks.insert(l->name);
          env.erase(l->name);
          continue;
        }
        blocks.erase(l->name);
        // One without a value (a read of open prefetch contents: a page
        // number) is fine until a condition, a bound or a carried integer
        // needs it.
        if (auto v = value(l->value))
          env[l->name] = *v;
        else
          env.erase(l->name);
      } else if (const auto *i = std::get_if<spec::If>(&st.kind)) {
        auto c = value(i->cond);
        if (!c) return false;
        if (!run_ints(*c ? i->then_body : i->else_body, env, cache, depth + 1, blocks)) return false;
      } else if (const auto *f = std::get_if<spec::For>(&st.kind)) {
        auto lo = value(f->lo), hi = value(f->hi);
        if (!lo || !hi || *hi - *lo > kMaxUnrolled || depth > 8) return false;
        for (std::int64_t v = *lo; v < *hi; ++v) {
          if (!f->is_while) env[f->var] = v;
          if (!run_ints(f->body, env, cache, depth + 1, blocks)) return false;
        }
        if (f->is_while) {
          auto c = value(spec::while_cond(*f));
          if (!c || *c) return false;
        }
      }
    }
    return true;
  }
  // What is evaluated at one grid point after another: the guards, and the
  // int locals of some names, rewritten once with program_id(a) the name
  // program_id_var(a).
  struct PointForms {
    std::vector<Expr> guards;
    std::vector<std::pair<std::string, Expr>> locals;
  };
  PointForms point_forms(const std::vector<Expr> &guards, const std::set<std::string> &names) const {
    PointForms f;
    for (const auto &g : guards)
      f.guards.push_back(spec::grid_calls_as_names(g, m.grid.size(), m.grid));
    for (const auto &[x, e] : int_locals)
      if (names.count(x)) f.locals.emplace_back(x, spec::grid_calls_as_names(e, m.grid.size(), m.grid));
    return f;
  }
  // `env` at point p: the params (not the elements of prefetch arrays left
  // open, which have no value at a point), the point's coordinates and the
  // locals' values there (their terms name no local: each is evaluated
  // before any is set; one without a value is left out). Whether the guards
  // hold there; nullopt where one has no value.
  std::optional<bool> at_point(const PointForms &f, const std::vector<std::int64_t> &p,
                               spec::Env &env) const {
    env.clear();
    for (const auto &[x, v] : m.env)
      if (!spec::is_prefetch_element(x)) env[x] = v;
    for (std::size_t a = 0; a < p.size(); ++a)
      env[spec::program_id_var(static_cast<std::int64_t>(a))] = p[a];
    std::vector<std::pair<std::string, std::int64_t>> values;
    for (const auto &[x, e] : f.locals)
      if (auto v = spec::evaluate(e, env).value) values.emplace_back(x, *v);
    bool runs = true;
    for (const auto &g : f.guards) {
      auto v = spec::evaluate(g, env).value;
      if (!v) return std::nullopt;
      runs = runs && *v != 0;
    }
    for (const auto &[x, v] : values)
      env[x] = v;
    return runs;
  }
  // An integer local of more terms than this, bound where its value at each
  // grid point is known, is kept as the table of those values: a subscript
  // of a prefetch read that reads other prefetch arrays (a tree over their
  // contents each) would otherwise be copied, trees and all, into every use.
  static constexpr std::size_t kTabulateAbove = 512;
  // The value `e` (as written) has with the int locals substituted, as a
  // table over the grid points, where it has a value at every point the
  // guards hold; at a point where they do not, the statement does not run
  // and its value is never used. Nullopt where some value is unknown (open
  // prefetch contents) or the grid is large. Each int local `e` names is
  // evaluated once per point, not once per use.
  std::optional<Expr> tabulate(const Expr &e, const std::vector<Expr> &guards,
                               std::int64_t max_points = kMaxTablePoints) const {
    const std::int64_t points = m.num_points();
    if (points > max_points) return std::nullopt;
    std::set<std::string> names;
    spec::collect_names(e, names);
    const PointForms forms = point_forms(guards, names);
    Named cache;
    const Expr &e_at = named(e, cache);
    std::vector<std::int64_t> v(static_cast<std::size_t>(points));
    spec::Env env;
    for (std::int64_t q = 0; q < points; ++q) {
      const auto runs = at_point(forms, spec::grid_point(m.grid, {}, q), env);
      if (!runs) return std::nullopt;
      const auto at = static_cast<std::size_t>(q);
      if (!*runs) {
        v[at] = q > 0 ? v[at - 1] : 0;
        continue;
      }
      auto x = spec::evaluate(e_at, env).value;
      if (!x) return std::nullopt;
      v[at] = *x;
    }
    return table(v);
  }
  bool while_by_point(const spec::For &f, const std::vector<Expr> &guards, const spec::Loc &loc,
                      std::int64_t n) {
    const std::int64_t points = m.num_points();
    if (points > kMaxTablePoints) return false;
    std::set<std::string> names;
    spec::bound_names(spec::while_body(f), names);
    std::vector<std::string> carried;
    for (const auto &x : names)
      if (int_locals.count(x)) carried.push_back(x);
    // vals[c][k][q]: carried c at the start of iteration k at point q.
    std::vector<std::vector<std::vector<std::int64_t>>> vals(carried.size());
    std::vector<std::int64_t> trips(static_cast<std::size_t>(points), 0),
        over(static_cast<std::size_t>(points), 0);
    std::int64_t most = 0;
    // The guards and the integer locals the loop uses, at every point.
    Named cache;
    std::set<std::string> used;
    spec::collect_names(f.body, used);
    const PointForms forms = point_forms(guards, used);
    for (std::int64_t q = 0; q < points; ++q) {
      spec::Env env;
      const auto holds = at_point(forms, spec::grid_point(m.grid, {}, q), env);
      if (!holds) return false;
      for (const auto &x : carried)
        if (!env.count(x)) return false;
      const bool runs = *holds;
      std::int64_t k = 0;
      for (;; ++k) {
        for (std::size_t c = 0; c < carried.size(); ++c) {
          if (vals[c].size() <= static_cast<std::size_t>(k))
            vals[c].resize(static_cast<std::size_t>(k) + 1,
                           std::vector<std::int64_t>(static_cast<std::size_t>(points)));
          auto v = env.find(carried[c]);
          if (v == env.end()) return false;
          vals[c][static_cast<std::size_t>(k)][static_cast<std::size_t>(q)] = v->second;
        }
        if (!runs) break;
        auto c = spec::evaluate(named(spec::while_cond(f), cache), env).value;
        if (!c) return false;
        if (*c == 0) break;
        if (k == n) {
          over[static_cast<std::size_t>(q)] = 1;
          break;
        }
        if (!run_ints(spec::while_body(f), env, cache)) return false;
      }
      trips[static_cast<std::size_t>(q)] = std::min(k, n);
      most = std::max(most, trips[static_cast<std::size_t>(q)]);
    }
    // Where a point's loop ended earlier, its values stay as they were.
    auto at = [&](std::size_t c, std::int64_t k) {
      std::vector<std::int64_t> v(static_cast<std::size_t>(points));
      for (std::size_t q = 0; q < v.size(); ++q) {
        const std::int64_t kk = std::min(k, trips[q]);
        v[q] = vals[c][static_cast<std::size_t>(kk)][q];
      }
      return table(v);
    };
    const Expr t = table(trips);
    for (std::int64_t k = 0; k <= most; ++k) {
      for (std::size_t c = 0; c < carried.size(); ++c)
        int_locals[carried[c]] = at(c, k);
      // The condition is evaluated at each iteration the loop reaches, the
      // one that ends it too: a table read there is a read (`tbl[c]` one
      // past the end when no entry stops the scan).
      auto reached = guards;
      reached.push_back(Expr::binary(Op::Le, Expr::integer(k), t));
      prefetch_reads(spec::while_cond(f), reached);
      if (k == most) break;
      auto g = guards;
      g.push_back(Expr::binary(Op::Lt, Expr::integer(k), t));
      walk(spec::while_body(f), g);
    }
    // After the loop: the carried values where it ended; a name first bound
    // in it is not visible after it.
    for (const auto &x : names)
      int_locals.erase(x);
    for (std::size_t c = 0; c < carried.size(); ++c)
      int_locals[carried[c]] = at(c, most);
    m.while_bounds.push_back({guards, table(over), n, loc});
    return true;
  }
  static std::size_t size_of(const Expr &e) {
    std::size_t n = 1;
    for (const auto &a : e.args)
      n += size_of(a);
    return n;
  }

  // A body loop is unrolled, so its effects are exact: iteration v binds
  // the loop variable to lo + v in guards, and with bounds that depend on
  // the grid point it runs where lo + v < hi, up to the most iterations any
  // grid point runs.
  void loop(const spec::For &f, const std::vector<Expr> &guards, const spec::Loc &loc) {
    if (f.is_while) {
      // `while cond, bound=n:` is n iterations of `if cond:` (spec::For);
      // whether some run needs more is decided from the condition after them.
      const auto n = eval(guard_expr(f.hi), "a while bound");
      if (!n) {
        fail("the bound of the while loop at line " + std::to_string(loc.line) + " is not a constant");
        return;
      }
      if (*n > kMaxUnrolled) {
        fail("the while loop at line " + std::to_string(loc.line) + " has bound " + std::to_string(*n) +
             ", more than the " + std::to_string(kMaxUnrolled) + " iterations the spec rules model");
        return;
      }
      if (while_by_point(f, guards, loc, std::max<std::int64_t>(*n, 0))) return;
      for (std::int64_t v = 0; v < *n; ++v)
        walk(f.body, guards);
      m.while_bounds.push_back({guards, guard_expr(spec::while_cond(f)), std::max<std::int64_t>(*n, 0), loc});
      return;
    }
    const Expr lo = guard_expr(f.lo), hi = guard_expr(f.hi);
    const auto clo = eval(lo, "a loop bound"), chi = eval(hi, "a loop bound");
    std::int64_t trips = 0;
    const bool constant = clo && chi;
    if (constant) {
      if (__builtin_sub_overflow(*chi, *clo, &trips)) trips = *chi > *clo ? kMaxUnrolled + 1 : 0;
      trips = std::max<std::int64_t>(0, trips);
    } else {
      const Expr span = Expr::binary(Op::Sub, hi, lo);
      const std::int64_t points = m.num_points();
      if (points > 65536) {
        fail("the bounds of the loop over '" + f.var + "' depend on the grid point, on a grid of " +
             std::to_string(points) + " points");
        return;
      }
      for (std::int64_t k = 0; k < points; ++k) {
        const auto v = eval(bind_grid(span, spec::grid_point(m.grid, {}, k), m.grid), "a loop bound");
        if (!v) {
          fail("the bounds of the loop over '" + f.var + "' are not integers at every grid point");
          return;
        }
        trips = std::max(trips, *v);
        if (trips > kMaxUnrolled) break;
      }
    }
    if (trips > kMaxUnrolled) {
      fail("the loop over '" + f.var + "' runs more than " + std::to_string(kMaxUnrolled) +
           " iterations, the most the spec rules model");
      return;
    }
    const auto saved =
        int_locals.find(f.var) != int_locals.end() ? std::optional<Expr>(int_locals.at(f.var)) : std::nullopt;
    ref_locals.erase(f.var);
    if (!constant && (names_grid(lo) || names_grid(hi))) grid_locals.insert(f.var);
    close_deferred_naming(f.var);
    deferred_names.erase(f.var);
    for (std::int64_t v = 0; v < trips; ++v) {
      const Expr t = constant ? Expr::integer(*clo + v) : Expr::binary(Op::Add, lo, Expr::integer(v));
      auto g = guards;
      int_locals[f.var] = t;
      if (constant) {
        walk(f.body, g);
        continue;
      }
      // An iteration past this point's bound does not run: what it binds
      // holds only where it runs (a carry summed over a grid-dependent range).
      const Expr runs = Expr::binary(Op::Lt, t, hi);
      g.push_back(runs);
      const auto before = int_locals;
      const LocalFlow flow_before = local_flow(f.body);
      walk(f.body, g);
      const auto after = int_locals;
      int_locals = before;
      merge_branches(runs, before, after);
      join_flow(flow_before);
    }
    if (saved)
      int_locals[f.var] = *saved;
    else
      int_locals.erase(f.var);
  }

  bool run(const spec::Env &overrides, const std::optional<std::string> &target) {
    m.spec = &k;
    m.env = spec::param_env(k.params, overrides);
    for (const auto &[n, v] : m.env)
      param_subst[n] = Expr::integer(v);
    spec::Binding bound = spec::bind_kernel(k, m.env);
    if (bound.error) {
      if (bound.error->fault == spec::BindFault::bad_input) bad_input = bound.error->diag;
      return fail(bound.error->diag.message);
    }
    m.grid = bound.kernel->grid;
    if (k.dimension_semantics && k.dimension_semantics->size() == m.grid.size())
      m.semantics = *k.dimension_semantics;
    else
      m.semantics.assign(m.grid.size(), spec::DimSemantics::arbitrary);
    m.target = spec::kernel_target(k, target);
    if (const auto *s = k.setting("vmem_limit_bytes")) {
      auto v = eval(s->value, "vmem_limit_bytes");
      if (!v) return fail("vmem_limit_bytes is not a constant");
      m.vmem_limit_bytes = *v;
    }
    if (const auto *s = k.setting("max_concurrent_steps")) {
      auto v = eval(s->value, "max_concurrent_steps");
      if (v && *v >= 1) m.max_concurrent_steps = *v;
    }
    if (spec::is_gpu_target(m.target.value_or(""))) {
      m.cta_axes = spec::cta_axes(k, m.grid.size());
      // Mosaic GPU without dimension_semantics: every axis is a CTA axis.
      if (!k.dimension_semantics) m.semantics.assign(m.grid.size(), spec::DimSemantics::parallel);
    }
    if (spec::uses_triton(k)) {
      // Each program is a CTA of one step: its scratch (a program-local
      // array) is its own.
      m.triton = true;
      m.semantics.assign(m.grid.size(), spec::DimSemantics::parallel);
      m.cta_axes.assign(m.grid.size(), true);
    }
    build_operands(*bound.kernel);
    if (!error.empty()) return false;
    for (const auto &a : k.aliases) {
      auto i = m.operand_index(a.input), o = m.operand_index(a.output);
      if (!i || !o) return fail("alias names an unknown operand");
      m.aliases.push_back({*i, *o, a.loc});
    }
    // The index maps' prefetch reads, their params the grid point's coordinates.
    for (const auto &o : m.operands) {
      std::map<std::string, Expr> at;
      for (std::size_t a = 0; a < o.index_params.size() && a < m.grid.size(); ++a)
        at[o.index_params[a]] = Expr::call("program_id", {Expr::integer(static_cast<std::int64_t>(a))});
      for (const auto &e : o.index)
        prefetch_reads(spec::substitute(e, at), {});
    }
    // `b = o[...]; when k == 0: b = zeros`: b's reads count only where k != 0.
    discards = spec::local_discards(k.body);
    walk(k.body, {});
    finish_deferred();
    return error.empty();
  }
};

} // namespace

ModelResult build_model(const spec::KernelSpec &k, const spec::Env &overrides,
                        const std::optional<std::string> &target) {
  Builder b{k, {}, {}, {}, {}, {}, {}, 0};
  ModelResult r;
  const bool built = b.run(overrides, target);
  if (b.bad_input)
    r.error = b.bad_input;
  else if (built)
    r.model = std::move(b.m);
  else
    r.unknown_reason = b.error;
  return r;
}

} // namespace pipecheck::verifier::rules
