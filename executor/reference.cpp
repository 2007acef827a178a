#include "executor/reference.hpp"

#include "executor/interp.hpp"
#include "spec/eval.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace pipecheck::executor {

namespace {

class WholeMemory : public Memory {
public:
  std::map<std::string, HostArray *> arrays;
  std::map<std::string, HostArray *> bounds; ///< of the outputs the reference has set
  HostArray *array(const std::string &n) override {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : it->second;
  }
  HostArray *bound_of(const std::string &n) override {
    auto it = bounds.find(n);
    return it == bounds.end() ? nullptr : it->second;
  }
};

void collect_reductions(const spec::Expr &e, const spec::ExprTypes &types, std::int64_t &k) {
  if (e.op == spec::Op::Call && (e.name == "dot" || e.name == "dot_general" || e.name == "sum") &&
      !e.args.empty()) {
    auto it = types.find(&e.args[0]);
    if (it != types.end() && !it->second.shape.empty()) {
      const auto &s = it->second.shape;
      std::int64_t len = 1;
      if (e.name == "dot") {
        len = s.back();
      } else if (e.name == "dot_general") {
        spec::Loc where;
        const auto d = spec::dot_general_dims(e, where);
        for (auto x : d.ok() ? d.value.lhs_contract : std::vector<std::int64_t>{})
          if (x >= 0 && static_cast<std::size_t>(x) < s.size())
            len = s[static_cast<std::size_t>(x)] == spec::kUnknownExtent
                      ? spec::kUnknownExtent
                      : len * s[static_cast<std::size_t>(x)];
      } else {
        std::optional<std::int64_t> axis;
        if (const spec::Expr *ax = e.kwarg("axis"))
          axis = spec::eval_int(*ax, {});
        else if (e.num_positional() >= 2)
          axis = spec::eval_int(e.args[1], {});
        if (axis) {
          const std::int64_t a = spec::normalize_axis(*axis, s.size());
          len = a >= 0 && a < static_cast<std::int64_t>(s.size()) ? s[static_cast<std::size_t>(a)] : 1;
        } else {
          for (std::int64_t d : s)
            len = d == spec::kUnknownExtent ? len : len * d;
        }
      }
      if (len != spec::kUnknownExtent) k = std::max(k, len);
    }
  }
  for (const auto &a : e.args)
    collect_reductions(a, types, k);
}

// What the body computes each ref and local from (flow-insensitive: every
// statement at any depth), and which refs it accumulates into: `t += v`, or
// a store whose value reads its own target (`t[...] = t[...] + v`).
struct BodyFlow {
  std::map<std::string, std::set<std::string>> from;
  std::set<std::string> accumulated;
};

void body_flow(const spec::Block &b, BodyFlow &f) {
  spec::for_each_stmt(b, [&](const spec::Stmt &s) {
    if (const auto *l = std::get_if<spec::Let>(&s.kind))
      return spec::collect_names(l->value, f.from[l->name]);
    const auto w = spec::ref_write(s);
    if (!w || !w->from) return;
    std::set<std::string> read;
    spec::collect_names(*w->from, read);
    const auto *a = std::get_if<spec::Assign>(&s.kind);
    if (a && (a->accumulate || read.count(w->ref))) f.accumulated.insert(w->ref);
    f.from[w->ref].insert(read.begin(), read.end());
  });
}

} // namespace

spec::DType accumulation_dtype(const ConcreteKernel &c, const std::string &output) {
  BodyFlow f;
  body_flow(c.spec->body, f);
  // Every name the output's value is computed from, through the body's
  // stores and locals.
  std::set<std::string> seen = {output};
  std::vector<std::string> todo = {output};
  while (!todo.empty()) {
    const std::string n = todo.back();
    todo.pop_back();
    if (auto it = f.from.find(n); it != f.from.end())
      for (const auto &m : it->second)
        if (seen.insert(m).second) todo.push_back(m);
  }
  spec::DType acc = spec::DType::f32;
  for (const auto &n : seen) {
    if (!f.accumulated.count(n)) continue;
    const auto *o = c.operand(n);
    if (o && spec::dtype_is_float(o->dtype) && dtype_epsilon(o->dtype) > dtype_epsilon(acc)) acc = o->dtype;
  }
  return acc;
}

std::int64_t accumulation_steps(const ConcreteKernel &c, const std::string &output) {
  const auto at = c.operand_index(output);
  if (!at) return 0;
  const spec::BoundOperand &o = c.operands[*at];
  std::int64_t steps = 1;
  for (std::size_t a = 0; a < c.grid.size(); ++a) {
    // (An axis the output's block index does not follow revisits its block.)
    bool follows = false;
    if (a < o.index_params.size())
      for (const auto &e : o.index)
        follows = follows || spec::mentions(e, o.index_params[a]);
    if (!follows) steps *= std::max<std::int64_t>(c.grid[a], 1);
  }
  return steps;
}

ArrayMap run_reference(const ConcreteKernel &c, ArrayMap &arrays) {
  // The bound of each output follows the dtype the body accumulates it in:
  // one run of the reference per such dtype and step count (the values are
  // the same), each keeping the bounds of its outputs.
  std::map<std::string, std::pair<spec::DType, std::int64_t>> acc_of;
  std::set<std::pair<spec::DType, std::int64_t>> accs;
  for (const auto &o : c.operands)
    if (o.role == spec::Role::out) {
      const spec::DType t = accumulation_dtype(c, o.name);
      accs.insert(acc_of[o.name] = {t, t == spec::DType::f32 ? 0 : accumulation_steps(c, o.name)});
    }
  if (accs.empty()) accs.insert({spec::DType::f32, 0});
  ArrayMap bounds;
  for (const auto &acc : accs) {
    WholeMemory mem;
    for (const auto &o : c.operands)
      if (o.role != spec::Role::scratch) mem.arrays[o.name] = arrays.at(o.name).get();
    Interp interp(mem);
    interp.env = c.params;
    interp.bounds = Accumulation(acc.first, acc.second);
    ArrayMap run_bounds;
    for (const auto &s : c.spec->reference) {
      const auto *l = std::get_if<spec::Let>(&s.kind);
      const ConcreteOperand *o = l ? c.operand(l->name) : nullptr;
      if (!o || o->role != spec::Role::out) {
        interp.exec(s);
        continue;
      }
      const Value v = interp.eval(l->value);
      HostArray &out = *arrays.at(o->name);
      // Cast to the output's dtype (its bound gains the rounding where
      // inexact), and stored with its bound, each broadcast alike.
      const Value stored = v.dtype == out.dtype() ? v : cast(v, out.dtype());
      store(stored, View::whole(out), s.loc);
      auto b = std::make_unique<HostArray>(o->name, spec::DType::f32, out.shape());
      store(error_bound::as_value(stored), View::whole(*b), s.loc);
      mem.bounds[o->name] = b.get();
      run_bounds[o->name] = std::move(b);
    }
    for (auto &[name, b] : run_bounds)
      if (acc_of[name] == acc) bounds[name] = std::move(b);
  }
  return bounds;
}

std::int64_t reference_reduction_length(const ConcreteKernel &c) {
  const spec::KernelSpec k = concrete_spec(c);
  spec::ExprTypes types;
  (void)spec::typecheck(k, c.params, &types);
  std::int64_t len = 1;
  for (const auto &s : k.reference)
    if (const auto *l = std::get_if<spec::Let>(&s.kind)) collect_reductions(l->value, types, len);
  return len;
}

std::optional<double> reference_tolerance(spec::DType out, spec::DType acc, std::int64_t k) {
  if (!spec::dtype_is_float(out)) return std::nullopt;
  return 2 * dtype_epsilon(out) + static_cast<double>(std::max<std::int64_t>(k, 1)) * dtype_epsilon(acc);
}

double element_tolerance(spec::DType out, double bound, double r, double relative) {
  // (An infinite reference value is matched by itself only: a masked max's
  // -inf, an overflow.)
  if (!std::isfinite(r)) return 0;
  if (!std::isfinite(bound)) return relative * std::max(1.0, std::fabs(r));
  // Two of the output's smallest steps below its normal range: a value the
  // bound holds exact is rounded alike on both sides.
  return bound + 2 * dtype_epsilon(out) * std::fabs(r) + 2 * dtype_denorm_min(out);
}

} // namespace pipecheck::executor
