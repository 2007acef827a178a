#include "executor/reference.hpp"

#include "executor/interp.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <cmath>

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

void accumulate_targets(const spec::Block &b, const ConcreteKernel &c, spec::DType &acc) {
  for (const auto &s : b) {
    if (const auto *a = std::get_if<spec::Assign>(&s.kind)) {
      if (!a->accumulate) continue;
      const auto *o = c.operand(a->target.name);
      if (o && spec::dtype_is_float(o->dtype) && dtype_epsilon(o->dtype) > dtype_epsilon(acc)) acc = o->dtype;
    } else if (const auto *i = std::get_if<spec::If>(&s.kind)) {
      accumulate_targets(i->then_body, c, acc);
      accumulate_targets(i->else_body, c, acc);
    } else if (const auto *f = std::get_if<spec::For>(&s.kind)) {
      accumulate_targets(f->body, c, acc);
    }
  }
}

} // namespace

ArrayMap run_reference(const ConcreteKernel &c, ArrayMap &arrays) {
  WholeMemory mem;
  for (const auto &o : c.operands)
    if (o.role != spec::Role::scratch) mem.arrays[o.name] = arrays.at(o.name).get();
  Interp interp(mem);
  interp.env = c.params;
  interp.bounds = accumulation_dtype(c);
  ArrayMap bounds;
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
    bounds[o->name] = std::move(b);
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

spec::DType accumulation_dtype(const ConcreteKernel &c) {
  spec::DType acc = spec::DType::f32;
  accumulate_targets(c.spec->body, c, acc);
  return acc;
}

std::optional<double> reference_tolerance(spec::DType out, spec::DType acc, std::int64_t k) {
  if (!spec::dtype_is_float(out)) return std::nullopt;
  return 2 * dtype_epsilon(out) + static_cast<double>(std::max<std::int64_t>(k, 1)) * dtype_epsilon(acc);
}

double element_tolerance(spec::DType out, double bound, double r, double relative) {
  const double scale = std::max(1.0, std::fabs(r));
  return std::isfinite(bound) ? bound + 2 * dtype_epsilon(out) * scale : relative * scale;
}

} // namespace pipecheck::executor
