#include "spec/validate.hpp"
#include "spec/nested.hpp"

#include "spec/checked.hpp"
#include "spec/eval.hpp"
#include "spec/lower.hpp"
#include "spec/prefetch.hpp"
#include "spec/print.hpp"
#include "spec/state.hpp"
#include "spec/targets.hpp"
#include "spec/typecheck.hpp"

#include <map>
#include <set>

namespace pipecheck::spec {

namespace {

struct FnSig {
  std::size_t min_pos, max_pos;
  std::set<std::string> kwargs;
};

const std::map<std::string, FnSig> &functions() {
  static const std::map<std::string, FnSig> f = {
      {"cdiv", {2, 2, {}}},
      {"min", {1, 8, {"axis", "keepdims"}}},
      {"max", {1, 8, {"axis", "keepdims"}}},
      {"abs", {1, 1, {}}},
      {"program_id", {1, 1, {}}},
      {"num_programs", {1, 1, {}}},
      {"dot", {2, 2, {"trans_a", "trans_b", "preferred_element_type"}}},
      {"transpose", {1, 1, {}}},
      {"sum", {1, 1, {"axis", "keepdims"}}},
      {"exp", {1, 1, {}}},
      {"neg", {1, 1, {}}},
      {"maximum", {2, 2, {}}},
      {"minimum", {2, 2, {}}},
      {"full", {1, 1, {}}},
      {"cast", {2, 2, {}}},
      {"sqrt", {1, 1, {}}},
      {"rsqrt", {1, 1, {}}},
      {"log", {1, 1, {}}},
      {"log2", {1, 1, {}}},
      {"exp2", {1, 1, {}}},
      {"tanh", {1, 1, {}}},
      {"pow", {2, 2, {}}},
      {"where", {3, 3, {}}},
      {"iota", {2, 2, {"dtype"}}},
      {"reshape", {2, 2, {}}},
      {"broadcast_to", {2, 2, {}}},
      {"tile", {2, 2, {}}},
      {"ds", {2, 2, {}}},
      {"sin", {1, 1, {}}},
      {"cos", {1, 1, {}}},
      {"erf", {1, 1, {}}},
      {"erfc", {1, 1, {}}},
      {"floor", {1, 1, {}}},
      {"ceil", {1, 1, {}}},
      {"round", {1, 1, {}}},
      {"sign", {1, 1, {}}},
      {"sigmoid", {1, 1, {}}},
      {"expm1", {1, 1, {}}},
      {"log1p", {1, 1, {}}},
      {"tan", {1, 1, {}}},
      {"asin", {1, 1, {}}},
      {"acos", {1, 1, {}}},
      {"atan", {1, 1, {}}},
      {"sinh", {1, 1, {}}},
      {"cosh", {1, 1, {}}},
      {"asinh", {1, 1, {}}},
      {"acosh", {1, 1, {}}},
      {"atanh", {1, 1, {}}},
      {"cbrt", {1, 1, {}}},
      {"opaque", {0, 64, {"op", "shape", "dtype"}}},
      {"dot_general", {2, 2, {"contract", "batch", "preferred_element_type"}}},
      {"concatenate", {1, 64, {"axis"}}},
      {"roll", {2, 2, {"axis", "stride", "stride_axis"}}},
      {"flip", {1, 1, {"axis"}}},
      {"argmax", {1, 1, {"axis"}}},
      {"argmin", {1, 1, {"axis"}}},
      {"cumsum", {1, 1, {"axis", "reverse"}}},
      {"cummax", {1, 1, {"axis", "reverse"}}},
      {"cummin", {1, 1, {"axis", "reverse"}}},
      {"shift_left", {2, 2, {}}},
      {"shift_right_logical", {2, 2, {}}},
      {"shift_right_arithmetic", {2, 2, {}}},
  };
  return f;
}

class Validator {
public:
  std::vector<Diagnostic> errs;

  void error(Loc l, std::string msg) { errs.push_back(Diagnostic{Severity::error, l, std::move(msg), {}}); }

  static constexpr const char *undefined_only_stored =
      "'undefined' is only a whole store value: 'X[...] = undefined' makes what X[...] holds unspecified";
  /// `X[...] = undefined` is a plain store (the form checked by its caller).
  void discard_form(const Assign &a, Loc l) {
    if (a.accumulate) error(l, "'+= undefined' has no meaning; write 'X[...] = undefined'");
  }

  // --------------------------------------------------------------- params
  Env env;                      // values of params known so far
  std::set<std::string> params; // names of params defined so far
  Env overrides;                // --set / a fuzz configuration: values in place of the written ones

  void check_params(const std::vector<Param> &ps, std::set<std::string> &names) {
    for (const auto &p : ps) {
      if (!names.insert(p.name).second) error(p.loc, "duplicate name '" + p.name + "'");
      auto only_params = [&](const Expr &e, const char *what) {
        std::vector<const Expr *> unknown;
        collect_unknown(e, params, unknown);
        for (const Expr *u : unknown)
          error(u->loc, "'" + u->name + "' is used in the " + what + " of param '" + p.name +
                            "' before it is defined");
        return unknown.empty();
      };
      if (p.value && only_params(*p.value, "value")) {
        if (auto v = eval_int(*p.value, env))
          env[p.name] = *v;
        else if (check_arithmetic(*p.value, "the value of param '" + p.name + "'"))
          error(p.value->loc, "the value of param '" + p.name + "' is not an integer");
      }
      for (const auto &d : p.domain) {
        if (only_params(d, "domain") && !eval_int(d, env) &&
            check_arithmetic(d, "the fuzz domain of param '" + p.name + "'"))
          error(d.loc, "fuzz domain values of param '" + p.name + "' must be integers");
      }
      std::optional<std::int64_t> lo, hi;
      if (p.lo && only_params(*p.lo, "bound")) {
        lo = eval_int(*p.lo, env);
        if (!lo && check_arithmetic(*p.lo, "the lower bound of param '" + p.name + "'"))
          error(p.lo->loc, "the lower bound of param '" + p.name + "' is not an integer");
      }
      if (p.hi && only_params(*p.hi, "bound")) {
        hi = eval_int(*p.hi, env);
        if (!hi && check_arithmetic(*p.hi, "the upper bound of param '" + p.name + "'"))
          error(p.hi->loc, "the upper bound of param '" + p.name + "' is not an integer");
      }
      if (lo && hi && *hi < *lo)
        error(p.hi->loc, "param '" + p.name + "' has an empty range: " + std::to_string(*lo) + " > " +
                             std::to_string(*hi));
      if (auto it = overrides.find(p.name); it != overrides.end()) env[p.name] = it->second;
      params.insert(p.name);
    }
  }

  // Names a Name/Ref node uses that are not in `known`.
  static void collect_unknown(const Expr &e, const std::set<std::string> &known,
                              std::vector<const Expr *> &out) {
    if ((e.op == Op::Name || e.op == Op::Ref) && !known.count(e.name)) out.push_back(&e);
    for (const auto &a : e.args)
      collect_unknown(a, known, out);
  }

  /// An integer expression over `scope` names: no refs, no tensor functions,
  /// and no division by zero or overflow where the params decide one.
  void check_int_expr(const Expr &e, const std::set<std::string> &scope, const std::string &where) {
    const std::size_t before = errs.size();
    int_expr_shape(e, scope, where);
    if (errs.size() == before) check_arithmetic(e, where);
  }

  bool check_arithmetic(const Expr &e, const std::string &where) {
    auto d = arithmetic_error(e, env, where);
    if (d) errs.push_back(std::move(*d));
    return !d;
  }

  bool in_kernel_body_ = false;
  /// The names that read a prefetch array here: an index map's trailing
  /// arguments, or the arrays' own names in the body.
  std::map<std::string, std::size_t> prefetch_refs_; ///< name -> subscripts of one read
  std::set<std::string> written_;                    ///< prefetch arrays the body stores into (state)
  std::map<std::string, std::string> written_args_;  ///< index-map argument -> such an array

  // `ids[e]`: one integer subscript per dim.
  void prefetch_read(const Expr &e, std::size_t rank, const std::set<std::string> &scope,
                     const std::string &where) {
    const bool scalar = std::all_of(e.args.begin(), e.args.end(),
                                    [](const Expr &a) { return a.op != Op::Ellipsis && a.op != Op::Slice; });
    if (e.args.size() != rank || !scalar) {
      std::string idx = "i";
      for (std::size_t d = 1; d < rank; ++d)
        idx += ", " + std::string(1, static_cast<char>('i' + d));
      error(e.loc,
            "a prefetch array is read one element at a time ('" + e.name + "[" + idx + "]') in " + where);
      return;
    }
    for (const auto &a : e.args)
      int_expr_shape(a, scope, where);
    const Operand *o = k_ ? k_->operand(e.name) : nullptr;
    if (in_kernel_body_ && ((o && state_.count(o->name)) || written_.count(e.name))) state_subscripts(e);
  }

  // SMEM state (spec/state.hpp) names one element with constant subscripts.
  void state_subscripts(const Expr &e) {
    for (const auto &a : e.args) {
      std::set<std::string> names;
      std::function<void(const Expr &)> walk = [&](const Expr &x) {
        if (x.op == Op::Name || x.op == Op::Ref || (x.op == Op::Call && !is_int_function(x.name)))
          names.insert(x.name);
        for (const auto &y : x.args)
          walk(y);
      };
      walk(a);
      for (const auto &n : names)
        if (!params.count(n)) {
          error(a.loc, "a subscript of SMEM state '" + e.name +
                           "' must be a constant of literals and params, "
                           "not '" +
                           print(a) + "' (each element is a scalar the checker follows across grid steps)");
          break;
        }
    }
  }

  // A read or store of an SMEM state array: one element, constant subscripts.
  void state_access(const Expr &r, std::size_t rank, const std::set<std::string> &scope) {
    const bool scalar = std::all_of(r.args.begin(), r.args.end(), [](const Expr &a) {
      return a.op != Op::Ellipsis && a.op != Op::Slice && a.op != Op::None;
    });
    if (r.args.size() != rank || !scalar) {
      error(r.loc, "'" + r.name + "' holds SMEM scalars: read and store one element at a time (" + r.name +
                       "[" + std::string(rank > 1 ? "i, j" : "i") + "]), with constant subscripts");
      return;
    }
    for (const auto &a : r.args)
      int_expr_shape(a, scope, "a subscript");
    state_subscripts(r);
  }

  void prefetch_decl(const Prefetch &p, std::set<std::string> &names) {
    if (!names.insert(p.name).second) error(p.loc, "duplicate name '" + p.name + "'");
    if (params.count(p.name)) error(p.loc, "prefetch '" + p.name + "' shadows a param");
    if (dtype_is_float(p.dtype) || p.dtype == DType::boolean)
      error(p.loc, "a prefetch array holds integers (i32), not " + std::string(to_string(p.dtype)));
    const std::string what = "prefetch '" + p.name + "'";
    check_int_expr(p.length, params, "the length of " + what);
    if (p.values)
      for (const auto &v : *p.values)
        check_int_expr(v, params, "the contents of " + what);
    for (const auto *e : {p.lo ? &*p.lo : nullptr, p.hi ? &*p.hi : nullptr, p.sum ? &*p.sum : nullptr})
      if (e) check_int_expr(*e, params, "a constraint of " + what);
  }

  void int_expr_shape(const Expr &e, const std::set<std::string> &scope, const std::string &where) {
    switch (e.op) {
    case Op::Int: return;
    case Op::Name:
      if (!scope.count(e.name)) error(e.loc, "unknown name '" + e.name + "' in " + where);
      return;
    case Op::Float: error(e.loc, where + " must be an integer expression"); return;
    case Op::Ref:
      if (auto it = written_args_.find(e.name); it != written_args_.end()) {
        error(e.loc, "an index map cannot read '" + it->second +
                         "': the body stores into it (SMEM state), and when the pipeline evaluates an index "
                         "map against the body's stores is not modelled");
        return;
      }
      if (auto it = prefetch_refs_.find(e.name); it != prefetch_refs_.end()) {
        prefetch_read(e, it->second, scope, where);
        return;
      }
      error(e.loc, "a buffer reference is not allowed in " + where);
      return;
    case Op::Zeros:
    case Op::Undefined:
    case Op::Ellipsis:
    case Op::None:
    case Op::Slice: error(e.loc, "'" + print(e) + "' is not allowed in " + where); return;
    case Op::Div: error(e.loc, "use '//' for integer division in " + where); return;
    case Op::BitAnd:
    case Op::BitOr:
    case Op::BitNot:
      error(e.loc, std::string("'") + to_string(e.op) +
                       "' is for masks and integer tensors; use 'and', 'or', " + "'not' in " + where);
      return;
    case Op::Tuple: error(e.loc, "a tuple is not allowed in " + where); return;
    case Op::Call: {
      // A body's subscripts and loop bounds may use the grid point.
      if (in_kernel_body_ && (e.name == "program_id" || e.name == "num_programs")) {
        call(e, scope, [](const Expr &) {});
        return;
      }
      if (!is_int_function(e.name) || !e.kwarg_names.empty()) {
        error(e.loc, "'" + e.name +
                         "' is not an integer function (cdiv, min, max, minimum, maximum, abs, where) in " +
                         where);
        return;
      }
      check_call_arity(e);
      for (const auto &a : e.args)
        int_expr_shape(a, scope, where);
      return;
    }
    default:
      for (const auto &a : e.args)
        int_expr_shape(a, scope, where);
    }
  }

  /// A known shape (of `slots` x `shape`) must have an element count and a
  /// byte size that fit int64: every size computed from it is then exact.
  void check_size(Loc loc, const std::string &what, const std::vector<Expr> &shape, const Expr *slots,
                  DType dtype) {
    std::vector<std::int64_t> extents;
    std::string dims;
    auto add = [&](const Expr &e) {
      auto v = eval_int(e, env);
      if (!v || *v < 0) return false;
      extents.push_back(*v);
      dims += (dims.empty() ? "" : " x ") + std::to_string(*v);
      return true;
    };
    if (slots && !add(*slots)) return;
    for (const auto &e : shape)
      if (!add(e)) return;
    if (!checked_bytes(extents, dtype_bytes(dtype)))
      error(loc, "integer overflow in the size of " + what + ": " + dims + " elements of " +
                     std::to_string(dtype_bytes(dtype)) + " bytes do not fit in 64 bits");
  }

  // Why an Element or BoundedSlice dim is refused where it is: only an
  // input's or output's window is placed by element.
  static std::string in_or_out_only(const std::string &kind, const Operand &, const std::string &what) {
    return kind + " block dims are supported on inputs and outputs only, not on " + what;
  }

  // pl.Element on an input: the rules and the lowering place its window by
  // element offset; outputs and aliases still assume blocks that tile the array.
  void check_element_dim(const Operand &o, const Expr &b, const std::set<std::string> &params,
                         const std::string &what) {
    auto e = element_dim(b);
    if (!e) {
      error(b.loc, "Element takes a block size and an optional padding (lo, hi): Element(128) or "
                   "Element(128, (0, 16))");
      return;
    }
    if (o.role != Role::in && o.role != Role::out) {
      error(b.loc, in_or_out_only("Element", o, what));
      return;
    }
    check_int_expr(e->size, params, "the block of " + what);
    check_positive(e->size, "a block extent of " + what);
    for (const Expr *x : {&e->lo, &e->hi}) {
      check_int_expr(*x, params, "the padding of " + what);
      if (auto v = eval_int(*x, env); v && *v < 0)
        error(x->loc, "the padding of " + what + " must not be negative, got " + std::to_string(*v));
    }
  }

  // pl.BoundedSlice on an input or output: the window is [start, start +
  // size) with a size the index map gives per grid point (an output writes
  // back only those `size` elements; its rules decide per element).
  void check_bounded_slice_dim(const Operand &o, const Expr &b, const std::set<std::string> &params,
                               const std::string &what) {
    auto bound = bounded_slice_dim(b);
    if (!bound) {
      error(b.loc, "BoundedSlice takes one block size, the most elements a window holds: BoundedSlice(128)");
      return;
    }
    if (o.role != Role::in && o.role != Role::out) {
      error(b.loc, in_or_out_only("BoundedSlice", o, what));
      return;
    }
    check_int_expr(*bound, params, "the block of " + what);
    check_positive(*bound, "the bound of a BoundedSlice dim of " + what);
  }

  // Index map result `d` of `o`: ds(start, size) exactly where the block dim
  // is a BoundedSlice, an integer expression elsewhere.
  void index_result(const Operand &o, std::size_t d, const Expr &r, const std::set<std::string> &scope,
                    const std::string &what) {
    const std::string where = "the index map of " + what;
    const bool bounded = o.block_shape && d < o.block_shape->size() && (*o.block_shape)[d] &&
                         (*o.block_shape)[d]->op == Op::Call && (*o.block_shape)[d]->name == "BoundedSlice";
    auto ds = ds_index(r);
    if (bounded) {
      if (!ds) {
        error(r.loc, "dim " + std::to_string(d) + " of " + what +
                         " is a BoundedSlice: the index map returns ds(start, size) there, not '" + print(r) +
                         "'");
        return;
      }
      check_int_expr(ds->start, scope, where);
      check_int_expr(ds->size, scope, where);
      return;
    }
    if (r.op == Op::Call && r.name == "ds") {
      error(r.loc, "'" + print(r) + "' in " + where + " needs a BoundedSlice block dim in position " +
                       std::to_string(d) + " (block=(..., BoundedSlice(n), ...))");
      return;
    }
    check_int_expr(r, scope, where);
  }

  void check_positive(const Expr &e, const std::string &what) {
    if (auto v = eval_int(e, env); v && *v <= 0)
      error(e.loc, what + " must be positive, got " + std::to_string(*v));
  }

  bool check_call_arity(const Expr &e) {
    auto it = functions().find(e.name);
    if (it == functions().end()) {
      error(e.loc, "unknown function '" + e.name + "'");
      return false;
    }
    const FnSig &s = it->second;
    std::size_t n = e.num_positional();
    if (n < s.min_pos || n > s.max_pos) {
      error(e.loc,
            "'" + e.name + "' takes " +
                (s.min_pos == s.max_pos ? std::to_string(s.min_pos)
                                        : std::to_string(s.min_pos) + " to " + std::to_string(s.max_pos)) +
                " positional argument" + (s.max_pos == 1 ? "" : "s") + ", got " + std::to_string(n));
      return false;
    }
    for (const auto &k : e.kwarg_names)
      if (!s.kwargs.count(k)) {
        error(e.loc, "'" + e.name + "' has no keyword argument '" + k + "'");
        return false;
      }
    return true;
  }

  // --------------------------------------------------------------- kernels
  const KernelSpec *k_ = nullptr;
  std::set<std::string> state_;       // state_scratches(*k_)
  std::set<std::string> descriptors_; // DMA descriptors bound in the kernel body so far, in scope
  /// Descriptors bound in a `for`/`while`/`when` body that has ended: not
  /// visible after it (a fori_loop's or a pl.when's body is a function of its
  /// own), with the line of the statement whose body bound them.
  std::map<std::string, int> descriptors_gone_;
  std::size_t grid_rank_ = 0;

  void kernel(const KernelSpec &k) {
    k_ = &k;
    state_ = state_scratches(k);
    descriptors_.clear();
    descriptors_gone_.clear();
    std::set<std::string> names;
    check_params(k.params, names);
    if (k.grid) {
      for (const auto &g : *k.grid) {
        check_int_expr(g, params, "the grid");
        check_positive(g, "a grid extent");
      }
      grid_rank_ = k.grid->size();
    }
    if (k.dimension_semantics && k.dimension_semantics->size() != grid_rank_)
      error(k.dimension_semantics_loc, "dimension_semantics has " +
                                           std::to_string(k.dimension_semantics->size()) +
                                           " entries but the grid has rank " + std::to_string(grid_rank_));
    for (const auto &s : k.settings) {
      if (s.key == "target") {
        if (!find_target(s.value.name)) error(s.value.loc, unknown_target_message(s.value.name));
      } else if (s.key == "backend") {
        if (s.value.name != "triton")
          error(s.value.loc, "unknown backend '" + s.value.name +
                                 "'; expected triton (Mosaic is the default: name its target instead)");
      } else {
        check_int_expr(s.value, params, "'" + s.key + "'");
        auto v = eval_int(s.value, env);
        if (v && s.key == "delay_release" ? *v < 0 : (v && *v <= 0))
          error(s.value.loc,
                "'" + s.key + "' must be " + (s.key == "delay_release" ? "non-negative" : "positive"));
      }
    }
    if (uses_triton(k)) triton(k);
    if (auto *m = k.setting("max_concurrent_steps"); m) {
      if (auto *d = k.setting("delay_release"); d) {
        auto mv = eval_int(m->value, env), dv = eval_int(d->value, env);
        if (mv && dv && *dv >= *mv)
          error(d->loc, "delay_release (" + std::to_string(*dv) +
                            ") must be smaller than max_concurrent_steps (" + std::to_string(*mv) + ")");
      }
    }
    written_ = written_prefetches(k);
    for (const auto &p : k.prefetches)
      prefetch_decl(p, names);
    if (!k.prefetches.empty() && errs.empty()) {
      PrefetchSpace space = prefetch_space(k, env);
      errs.insert(errs.end(), space.errors.begin(), space.errors.end());
    }
    bool has_out = false;
    for (const auto &o : k.operands) {
      if (!names.insert(o.name).second) error(o.loc, "duplicate name '" + o.name + "'");
      operand(o);
      has_out |= o.role == Role::out;
      if (o.memory_space == MemorySpace::acc) acc_scratch(k, o);
      // Mosaic GPU's pallas_call takes no pipeline_mode (its _downcast_spec
      // refuses one): the slots are max_concurrent_steps.
      if (const Setting *t = k.setting("target");
          o.pipeline_mode.buffer_count && t && t->value.op == Op::Name && is_gpu_target(t->value.name))
        error(o.loc, "'" + o.name +
                         "' says buffered=, which Mosaic GPU's pallas_call refuses (pl.Buffered "
                         "is a TPU pipeline_mode): its slots are the kernel's max_concurrent_steps");
    }
    if (!has_out) error(k.loc, "kernel '" + k.name + "' has no 'out' operand");
    std::set<std::string> aliased_in, aliased_out;
    for (const auto &a : k.aliases) {
      alias(k, a, aliased_in, aliased_out);
      for (const std::string *name : {&a.input, &a.output}) {
        const Operand *x = k.operand(*name);
        if (!x || !x->block_shape) continue;
        const char *kind = nullptr;
        for (const auto &b : *x->block_shape)
          if (b && !kind)
            kind = element_dim(*b) ? "an Element" : bounded_slice_dim(*b) ? "a BoundedSlice" : nullptr;
        if (kind) {
          error(a.loc, std::string(name == &a.input ? "input '" : "output '") + *name + "' has " + kind +
                           " block dim and cannot be aliased");
          break;
        }
      }
    }
    if (k.body_loc.line == 0 && k.body.empty()) error(k.loc, "kernel '" + k.name + "' has no body");
    std::set<std::string> scope = params;
    in_kernel_body_ = true;
    for (const auto &p : k.prefetches)
      prefetch_refs_[p.name] = p.read_rank();
    for (const auto &o : k.operands)
      if (state_.count(o.name)) prefetch_refs_[o.name] = o.shape.size();
    kernel_block(k.body, scope, 0);
    prefetch_refs_.clear();
    in_kernel_body_ = false;
    if (k.reference_loc.line != 0 || !k.reference.empty()) reference(k);
  }

  // `reference:`: `name = value` statements over whole inputs and outputs;
  // each output is set, and read only once set (or when it aliases an input).
  void reference(const KernelSpec &k) {
    std::set<std::string> scope = params, assigned;
    for (const auto &o : k.operands)
      if (o.role == Role::in) scope.insert(o.name);
    for (const auto &a : k.aliases)
      scope.insert(a.output); // it starts as its input's data
    for (const auto &s : k.reference) {
      const auto *l = std::get_if<Let>(&s.kind);
      if (!l) {
        error(s.loc, "a reference holds 'name = value' statements on whole operands (e.g. 'o = dot(a, b)'); "
                     "stores, loops and conditions belong in the body");
        continue;
      }
      reference_expr(l->value, scope);
      const Operand *o = k.operand(l->name);
      if (o && o->role == Role::out) {
        assigned.insert(l->name);
        scope.insert(l->name);
      } else if (o) {
        error(s.loc, "'" + l->name + "' is " + (o->role == Role::in ? "an input" : "a scratch") +
                         "; a reference sets outputs and local names");
      } else if (params.count(l->name)) {
        error(s.loc, "'" + l->name + "' is a param; a reference sets outputs and local names");
      } else {
        scope.insert(l->name);
      }
    }
    for (const auto &o : k.operands)
      if (o.role == Role::out && !assigned.count(o.name))
        error(k.reference_loc,
              "the reference sets no value for output '" + o.name + "' (add '" + o.name + " = ...')");
  }

  void reference_expr(const Expr &e, const std::set<std::string> &scope) {
    switch (e.op) {
    case Op::Ref: {
      // A part of a local or of an operand's whole array (`t[:, 0:64]`, a crop or a shift).
      const Operand *o = k_->operand(e.name);
      if (!scope.count(e.name) && !(o && o->role == Role::in)) {
        reference_expr(Expr::var(e.name, e.loc), scope); // (what the name is not)
        return;
      }
      if (o && e.args.size() == 1 && e.args[0].op == Op::Ellipsis) {
        // (`a[...]` reads as the body's block: the reference has none.)
        error(e.loc, "a reference uses whole operands: write '" + e.name + "', not '" + print(e) + "'");
        return;
      }
      for (const auto &a : e.args)
        if (a.op == Op::Slice || a.op == Op::Ellipsis || a.op == Op::None) {
          for (const auto &b : a.args)
            if (b.op != Op::None) reference_expr(b, scope);
        } else {
          reference_expr(a, scope);
        }
      return;
    }
    case Op::Name: {
      if (scope.count(e.name)) return;
      const Operand *o = k_->operand(e.name);
      if (!o && k_->prefetch(e.name))
        error(e.loc,
              "a reference reads no prefetch array ('" + e.name +
                  "'): it states whole arrays for any contents; state what it needs of them as params");
      else if (!o)
        error(e.loc, "unknown name '" + e.name + "'");
      else if (o->role == Role::scratch)
        error(e.loc, "scratch '" + e.name + "' belongs to the body; a reference reads inputs and outputs");
      else
        error(e.loc, "the reference reads output '" + e.name + "' before it sets it");
      return;
    }
    case Op::Ellipsis:
    case Op::Slice:
    case Op::None: error(e.loc, "'" + print(e) + "' is only allowed inside a subscript"); return;
    case Op::Undefined:
      error(e.loc, "a reference states the values an output must hold; 'undefined' is none");
      return;
    case Op::Call:
      if (e.name == "program_id" || e.name == "num_programs") {
        error(e.loc, e.name + " belongs in the body: a reference states whole arrays, with no grid");
        return;
      }
      call(e, scope, [&](const Expr &a) { reference_expr(a, scope); });
      return;
    default:
      for (const auto &a : e.args)
        reference_expr(a, scope);
    }
  }

  void operand(const Operand &o) {
    std::string what = "operand '" + o.name + "'";
    if (o.shape.empty() && o.role != Role::scratch) {
      // A rank-0 array is allowed (a scalar); nothing to check.
    }
    for (const auto &e : o.shape) {
      check_int_expr(e, params, "the shape of " + what);
      check_positive(e, "an array extent of " + what);
    }
    check_size(o.loc, what, o.shape, nullptr, o.dtype);
    if (o.role == Role::scratch) {
      if (o.block_shape) error(o.loc, "scratch '" + o.name + "' has no block (it is allocated whole)");
      if (o.index_map) error(o.loc, "scratch '" + o.name + "' has no index map");
      if (o.pipeline_mode.buffer_count) error(o.loc, "scratch '" + o.name + "' is not buffered");
      return;
    }
    if (o.memory_space == MemorySpace::any || o.memory_space == MemorySpace::hbm) {
      if (o.block_shape || o.index_map)
        error(o.loc, what + " has memory_space=" + to_string(o.memory_space) +
                         ": it gets no window, so it takes no block or index");
    }
    if (o.block_shape) {
      if (o.block_shape->size() != o.shape.size())
        error(o.loc, "the block of " + what + " has rank " + std::to_string(o.block_shape->size()) +
                         " but the array has rank " + std::to_string(o.shape.size()));
      for (const auto &b : *o.block_shape)
        if (b && b->op == Op::Call && b->name == "Element")
          check_element_dim(o, *b, params, what);
        else if (b && b->op == Op::Call && b->name == "BoundedSlice")
          check_bounded_slice_dim(o, *b, params, what);
        else if (b) {
          check_int_expr(*b, params, "the block of " + what);
          check_positive(*b, "a block extent of " + what);
        }
    }
    if (o.index_map) {
      const auto &m = *o.index_map;
      // With scalar prefetch, Pallas passes the prefetch refs after the grid indices.
      const std::size_t n_prefetch = k_ ? k_->prefetches.size() : 0;
      if (m.params.size() != grid_rank_ && (n_prefetch == 0 || m.params.size() != grid_rank_ + n_prefetch))
        error(o.loc, "the index map of " + what + " takes " + std::to_string(m.params.size()) +
                         " grid indices but the grid has rank " + std::to_string(grid_rank_) +
                         (n_prefetch ? " (and " + std::to_string(n_prefetch) +
                                           " prefetch refs follow the grid indices, all or none)"
                                     : ""));
      for (std::size_t i = grid_rank_; i < m.params.size() && i - grid_rank_ < n_prefetch; ++i) {
        const Prefetch &p = k_->prefetches[i - grid_rank_];
        if (written_.count(p.name))
          written_args_[m.params[i]] = p.name;
        else
          prefetch_refs_[m.params[i]] = p.read_rank();
      }
      std::set<std::string> scope = params;
      std::set<std::string> seen;
      for (const auto &p : m.params) {
        if (!seen.insert(p).second)
          error(o.loc, "duplicate index variable '" + p + "' in the index map of " + what);
        if (params.count(p)) error(o.loc, "index variable '" + p + "' shadows a param");
        scope.insert(p);
      }
      if (m.results.size() != o.shape.size())
        error(o.loc, "the index map of " + what + " returns " + std::to_string(m.results.size()) +
                         " block indices but the array has rank " + std::to_string(o.shape.size()));
      for (std::size_t d = 0; d < m.results.size(); ++d)
        index_result(o, d, m.results[d], scope, what);
      prefetch_refs_.clear();
      written_args_.clear();
    } else if (o.block_shape && (o.role == Role::in || o.role == Role::out)) {
      for (const auto &b : *o.block_shape)
        if (b && bounded_slice_dim(*b)) {
          error(b->loc, "a BoundedSlice dim of " + what +
                            " needs an index map that returns ds(start, size) in its position");
          break;
        }
    }
    if (o.pipeline_mode.buffer_count) {
      check_int_expr(*o.pipeline_mode.buffer_count, params, "'buffered'");
      check_positive(*o.pipeline_mode.buffer_count, "the buffer count of " + what);
    }
    if (o.pipeline_mode.lookahead && o.role != Role::in)
      error(o.loc, "lookahead applies to inputs only ('" + o.name + "' is an output)");
  }

  // What the Triton backend of pallas_call refuses, and what is Mosaic's.
  void triton(const KernelSpec &k) {
    const std::string why = " (the kernel says backend = triton)";
    if (k.dimension_semantics)
      error(k.dimension_semantics_loc, "dimension_semantics is Mosaic's: Triton runs every grid point as its "
                                       "own program, all of them concurrently" +
                                           why);
    for (const auto &s : k.settings)
      if (s.key != "backend")
        error(s.loc, "'" + s.key + "' is a Mosaic setting; a Triton kernel has none" + why);
    // (A grid of more than 3 dims is fine: Pallas' Triton lowering folds the
    // leading ones into the launch grid's first, as jax.vmap's prepend.)
  }

  // plgpu.ACC: a Mosaic GPU scratch of wgmma accumulator registers.
  void acc_scratch(const KernelSpec &k, const Operand &o) {
    if (o.role != Role::scratch) {
      error(o.loc,
            "memory_space=acc applies to scratch only ('" + o.name + "' is an " + to_string(o.role) + ")");
      return;
    }
    // Without a `target =` line, --target decides; the model and the
    // lowering reject a non-GPU effective target with a located error.
    const Setting *t = k.setting("target");
    if (t && (t->value.op != Op::Name || !is_gpu_target(t->value.name)))
      error(o.loc, "scratch '" + o.name +
                       "' has memory_space=acc (plgpu.ACC), which needs a Mosaic GPU target: "
                       "add `target = h100` or `target = h200`");
    // (wgmma accumulates f16 and bf16 products in f32 or f16, int8 ones in i32.)
    if (o.dtype != DType::f32 && o.dtype != DType::f16 && o.dtype != DType::i32)
      error(o.loc, "an acc scratch holds f32, f16 or i32 (wgmma accumulators), not " +
                       std::string(to_string(o.dtype)));
    if (o.shape.size() != 2)
      error(o.loc, "an acc scratch is 2-D (a wgmma accumulator tile), '" + o.name + "' has rank " +
                       std::to_string(o.shape.size()));
  }

  void alias(const KernelSpec &k, const Alias &a, std::set<std::string> &ins, std::set<std::string> &outs) {
    const Operand *i = k.operand(a.input);
    const Operand *o = k.operand(a.output);
    if (!i)
      error(a.loc, "unknown input '" + a.input + "' in alias");
    else if (i->role != Role::in)
      error(a.loc, "'" + a.input + "' is not an input");
    if (!o)
      error(a.loc, "unknown output '" + a.output + "' in alias");
    else if (o->role != Role::out)
      error(a.loc, "'" + a.output + "' is not an output");
    if (i && o && i->role == Role::in && o->role == Role::out) {
      if (i->dtype != o->dtype)
        error(a.loc, std::string("aliased operands differ in dtype: ") + to_string(i->dtype) + " vs " +
                         to_string(o->dtype));
      bool same = i->shape.size() == o->shape.size();
      for (std::size_t d = 0; same && d < i->shape.size(); ++d) {
        auto x = eval_int(i->shape[d], env), y = eval_int(o->shape[d], env);
        same = (x && y) ? *x == *y : i->shape[d] == o->shape[d];
      }
      if (!same) error(a.loc, "aliased operands '" + a.input + "' and '" + a.output + "' differ in shape");
    }
    if (!ins.insert(a.input).second) error(a.loc, "input '" + a.input + "' is aliased twice");
    if (!outs.insert(a.output).second) error(a.loc, "output '" + a.output + "' is aliased twice");
  }

  void kernel_block(const Block &b, std::set<std::string> &scope, int depth) {
    for (const auto &s : b)
      kernel_stmt(s, scope, depth);
  }

  // The body of a `for`, `while` or `when` at `at`: the descriptors it binds
  // stay in it, as its integer locals do.
  void inner_block(const Block &b, std::set<std::string> &scope, int depth, Loc at) {
    const std::set<std::string> outer = descriptors_;
    kernel_block(b, scope, depth + 1);
    for (const auto &d : descriptors_)
      if (!outer.count(d)) descriptors_gone_.emplace(d, at.line);
    descriptors_ = outer;
  }

  void kernel_stmt(const Stmt &s, std::set<std::string> &scope, int depth) {
    if (auto *a = std::get_if<Assign>(&s.kind)) {
      kernel_ref(a->target, scope, true);
      if (a->discards()) {
        const Operand *o = k_->operand(a->target.name);
        if (o && (o->role != Role::scratch || o->sem != SemKind::none))
          error(a->target.loc, "only a scratch buffer can be made undefined; '" + a->target.name + "' is " +
                                   (o->sem != SemKind::none
                                        ? "a semaphore"
                                        : std::string("an ") + (o->role == Role::in ? "input" : "output")));
        discard_form(*a, s.loc);
      } else {
        kernel_expr(a->value, scope);
      }
    } else if (auto *l = std::get_if<Let>(&s.kind)) {
      kernel_expr(l->value, scope);
      if (k_->operand(l->name) || params.count(l->name) || k_->prefetch(l->name))
        error(s.loc, "'" + l->name + "' is an operand or param; store into a block with '" + l->name +
                         "[...] = ...'");
      scope.insert(l->name);
    } else if (auto *f = std::get_if<If>(&s.kind)) {
      kernel_expr(f->cond, scope);
      std::set<std::string> inner = scope;
      inner_block(f->then_body, inner, depth, s.loc);
      std::set<std::string> inner2 = scope;
      inner_block(f->else_body, inner2, depth, s.loc);
    } else if (auto *f = std::get_if<For>(&s.kind)) {
      check_int_expr(f->lo, scope, "a loop bound");
      check_int_expr(f->hi, scope, f->is_while ? "a while bound" : "a loop bound");
      if (k_->prefetch(f->var)) error(s.loc, "loop variable '" + f->var + "' shadows a prefetch operand");
      std::set<std::string> inner = scope;
      inner.insert(f->var);
      inner_block(f->body, inner, depth, s.loc);
    } else if (std::holds_alternative<Copy>(s.kind)) {
      error(s.loc, "copy_in_start, copy_in_wait, copy_out_start and copy_out_wait belong in pipelines; a "
                   "kernel's blocks are copied by its index maps (a manual copy is async_copy with a "
                   "semaphore)");
    } else if (auto *d = std::get_if<Dma>(&s.kind)) {
      kernel_dma(*d, s.loc, scope);
    } else if (std::holds_alternative<CommitSmem>(s.kind)) {
      // (A TPU kernel has no async proxy to fence; an unset target is
      // Mosaic GPU's where the kernel says so otherwise.)
      if (auto t = kernel_target(*k_, std::nullopt); t && !is_gpu_target(*t))
        error(s.loc,
              "commit_smem() is Mosaic GPU's (plgpu.commit_smem); target " + *t + " has no async proxy");
    } else {
      error(s.loc, "wgmma statements belong in pipelines; kernel bodies use dot()");
    }
  }

  void kernel_dma(const Dma &d, Loc l, std::set<std::string> &scope) {
    if (!d.descriptor.empty() && d.action != DmaAction::bind) {
      if (!descriptors_.count(d.descriptor)) {
        const std::string bind = "'" + d.descriptor + " = async_copy(src, dst, sem)'";
        const auto gone = descriptors_gone_.find(d.descriptor);
        error(l, gone == descriptors_gone_.end()
                     ? "'" + d.descriptor + "' is no DMA descriptor; bind one first: " + bind
                     : "'" + d.descriptor + "' is bound in the body of the statement at line " +
                           std::to_string(gone->second) +
                           " and not visible after it (a fori_loop's or pl.when's body is a function of its "
                           "own); bind it again here: " +
                           bind);
      }
      return;
    }
    if (d.action == DmaAction::bind) descriptors_.insert(d.descriptor);
    for (const Expr *r : {&d.src, &d.dst}) {
      if (r->op == Op::None) continue;
      if (const Operand *o = k_->operand(r->name); o && o->sem != SemKind::none) {
        error(r->loc, "'" + r->name + "' is a semaphore, not an array to copy");
        continue;
      }
      if (const Operand *o = k_->operand(r->name); o && state_.count(o->name)) {
        error(r->loc, "'" + r->name +
                          "' holds SMEM scalars (an i32 SMEM scratch): the body stores them with "
                          "'=' and reads them as integers; a DMA cannot copy it");
        continue;
      }
      kernel_ref(*r, scope, false);
    }
    if (d.sem.op != Op::None) {
      const Operand *o = k_->operand(d.sem.name);
      const bool dma = d.action != DmaAction::signal && d.action != DmaAction::sem_wait;
      if (!o || o->sem == SemKind::none) {
        error(d.sem.loc, "'" + d.sem.name + "' is not a semaphore (declare 'scratch " + d.sem.name +
                             (dma ? ": dma_sem[n]')" : ": semaphore[n]')"));
      } else {
        if (dma != (o->sem == SemKind::dma))
          error(d.sem.loc, dma ? "'" + d.sem.name + "' is a regular semaphore; a DMA signals a dma_sem"
                               : "'" + d.sem.name +
                                     "' is a DMA semaphore; semaphore_signal/semaphore_wait take "
                                     "a regular one");
        std::size_t idx = 0;
        for (const auto &a : d.sem.args) {
          if (a.op == Op::Slice || a.op == Op::Ellipsis || a.op == Op::None)
            error(a.loc, "name one semaphore: index '" + d.sem.name + "' with integers");
          else
            check_int_expr(a, scope, "a semaphore index");
          ++idx;
        }
        if (idx != o->shape.size())
          error(d.sem.loc, o->shape.empty()
                               ? "'" + d.sem.name + "' is one semaphore; name it without a subscript"
                               : "'" + d.sem.name + "' is an array of semaphores of rank " +
                                     std::to_string(o->shape.size()) + "; name one with " +
                                     std::to_string(o->shape.size()) + " index(es): " + d.sem.name + "[k]");
      }
    }
    if (d.n.op != Op::None) check_int_expr(d.n, scope, "a semaphore count");
  }

  void kernel_ref(const Expr &r, const std::set<std::string> &scope, bool store) {
    const Operand *o = k_->operand(r.name);
    if (o && o->sem != SemKind::none) {
      error(r.loc, "'" + r.name +
                       "' is a semaphore: DMAs and semaphore_signal/semaphore_wait use it, loads and "
                       "stores cannot");
      return;
    }
    if (!o && k_->prefetch(r.name) && !scope.count(r.name)) {
      // A store makes the array SMEM state, as upstream paged attention's buffer_index_ref.
      if (store)
        state_access(r, k_->prefetch(r.name)->dims.empty() ? 1 : k_->prefetch(r.name)->dims.size(), scope);
      else
        prefetch_read(r, k_->prefetch(r.name)->read_rank(), scope, "a body");
      return;
    }
    if (o && state_.count(o->name)) {
      state_access(r, o->shape.size(), scope);
      return;
    }
    if (!o) {
      if (scope.count(r.name) && !store)
        value_subscripts(r, scope);
      else if (scope.count(r.name))
        error(r.loc, "cannot store into '" + r.name + "': it is not a buffer");
      else
        error(r.loc, "unknown operand '" + r.name + "'");
      return;
    }
    std::size_t rank = 0;
    if (o->role == Role::scratch || !o->block_shape) {
      rank = o->shape.size();
    } else {
      for (const auto &b : *o->block_shape)
        rank += b ? 1 : 0;
    }
    std::size_t n = 0;
    bool ellipsis = false;
    for (const auto &s : r.args) {
      if (s.op == Op::Ellipsis) {
        if (ellipsis) error(s.loc, "more than one '...' in a subscript");
        ellipsis = true;
        continue;
      }
      if (s.op == Op::None) {
        error(s.loc, "a new axis (None) indexes a value, not a block: load it first ('x = " + r.name +
                         "[...]', then 'x[:, None]')");
        continue;
      }
      ++n;
      slice_or_index(s, scope);
    }
    if (n > rank)
      error(r.loc, "'" + r.name + "' has " + std::to_string(n) + " subscripts but its block has rank " +
                       std::to_string(rank));
  }

  // `m[:, None]` on a local value: `None` adds an axis; rank is the typechecker's.
  void value_subscripts(const Expr &r, const std::set<std::string> &scope) {
    bool ellipsis = false;
    for (const auto &s : r.args) {
      if (s.op == Op::None) continue;
      if (s.op == Op::Ellipsis) {
        if (ellipsis) error(s.loc, "more than one '...' in a subscript");
        ellipsis = true;
      } else {
        slice_or_index(s, scope);
      }
    }
  }

  // `lo:hi`, `ds(start, size)` (pl.ds) or an index.
  void slice_or_index(const Expr &s, const std::set<std::string> &scope) {
    if (s.op == Op::Slice) {
      for (const auto &b : s.args)
        if (b.op != Op::None) check_int_expr(b, scope, "a slice bound");
    } else if (s.op == Op::Call && s.name == "ds") {
      if (!check_call_arity(s)) return;
      check_int_expr(s.args[0], scope, "the start of ds()");
      check_int_expr(s.args[1], scope, "the size of ds()");
    } else {
      check_int_expr(s, scope, "a subscript");
    }
  }

  // A shape argument: a tuple of integer expressions.
  void shape_arg(const Expr &t, const std::set<std::string> &scope, const std::string &fn) {
    if (t.op != Op::Tuple) {
      error(t.loc, fn + " takes a shape tuple such as (bm, bn), not '" + print(t) + "'");
      return;
    }
    for (const auto &x : t.args)
      check_int_expr(x, scope, "a shape of " + fn);
  }

  // opaque(args..., op=NAME, shape=(...), dtype=T): all three keywords are needed.
  void opaque_call(const Expr &e, const std::set<std::string> &scope) {
    const Expr *op = e.kwarg("op");
    if (!op || op->op != Op::Name)
      error(op ? op->loc : e.loc, "opaque needs op=NAME, the name of the operation it stands for");
    if (const Expr *sh = e.kwarg("shape"))
      shape_arg(*sh, scope, "opaque");
    else
      error(e.loc, "opaque needs shape=(...), the shape of its result");
    if (const Expr *dt = e.kwarg("dtype"))
      dtype_arg(*dt, "opaque's dtype");
    else
      error(e.loc, "opaque needs dtype=T, the dtype of its result");
  }

  void dtype_arg(const Expr &t, const std::string &what) {
    if (t.op != Op::Name || !parse_dtype(t.name))
      error(t.loc, what + " is a dtype (f32, bf16, i32, ...), not '" + print(t) + "'");
  }

  void kernel_expr(const Expr &e, const std::set<std::string> &scope) {
    switch (e.op) {
    case Op::Ref: kernel_ref(e, scope, false); return;
    case Op::Name:
      if (k_->operand(e.name))
        error(e.loc, "load the block with '" + e.name + "[...]'");
      else if (!scope.count(e.name))
        error(e.loc, "unknown name '" + e.name + "'");
      return;
    case Op::Ellipsis:
    case Op::Slice:
    case Op::None: error(e.loc, "'" + print(e) + "' is only allowed inside a subscript"); return;
    case Op::Undefined: error(e.loc, undefined_only_stored); return;
    case Op::Call: call(e, scope, [&](const Expr &a) { kernel_expr(a, scope); }); return;
    default:
      for (const auto &a : e.args)
        kernel_expr(a, scope);
    }
  }

  template <class F> void call(const Expr &e, const std::set<std::string> &scope, F &&sub) {
    if (!check_call_arity(e)) return;
    if (e.name == "program_id" || e.name == "num_programs") {
      auto a = eval_int(e.args[0], {});
      if (!a)
        error(e.args[0].loc, e.name + " takes a constant grid axis");
      else if (*a < 0 || static_cast<std::size_t>(*a) >= grid_rank_)
        error(e.args[0].loc, e.name + "(" + std::to_string(*a) + ") names no axis of a grid of rank " +
                                 std::to_string(grid_rank_));
      return;
    }
    if (e.name == "cast") {
      sub(e.args[0]);
      if (e.args[1].op != Op::Name || !parse_dtype(e.args[1].name))
        error(e.args[1].loc, "the second argument of cast is a dtype (f32, bf16, ...)");
      return;
    }
    if (e.name == "iota") {
      shape_arg(e.args[0], scope, "iota");
      if (!eval_int(e.args[1], {})) error(e.args[1].loc, "iota's dimension must be a constant integer");
      if (const Expr *d = e.kwarg("dtype")) dtype_arg(*d, "iota's dtype");
      return;
    }
    if (e.name == "reshape" || e.name == "broadcast_to" || e.name == "tile") {
      sub(e.args[0]);
      shape_arg(e.args[1], scope, e.name);
      return;
    }
    if (e.name == "roll") {
      // The shift and stride are integers: what constants decide about them
      // (an overflow) is decided here, as for a subscript.
      sub(e.args[0]);
      check_int_expr(e.args[1], scope, "roll's shift");
      for (const char *k : {"axis", "stride", "stride_axis"})
        if (const Expr *v = e.kwarg(k)) check_int_expr(*v, scope, std::string("roll's ") + k);
      return;
    }
    if (e.name == "dot_general") {
      Loc where;
      if (auto d = dot_general_dims(e, where); !d.ok()) error(where, d.error);
      if (const Expr *p = e.kwarg("preferred_element_type")) dtype_arg(*p, "preferred_element_type");
      sub(e.args[0]);
      sub(e.args[1]);
      return;
    }
    if (e.name == "opaque") {
      opaque_call(e, scope);
      for (std::size_t i = 0; i < e.num_positional(); ++i)
        sub(e.args[i]);
      return;
    }
    for (const char *k : {"axis", "stride", "stride_axis"})
      if (const Expr *x = e.kwarg(k); x && !eval_int(*x, {}))
        error(x->loc, std::string(k) + " must be a constant integer");
    for (const char *k : {"keepdims", "trans_a", "trans_b", "reverse"})
      if (const Expr *b = e.kwarg(k); b && !bool_literal(*b))
        error(b->loc, std::string(k) + " takes True or False");
    if (const Expr *p = e.kwarg("preferred_element_type")) dtype_arg(*p, "preferred_element_type");
    (void)scope;
    for (std::size_t i = 0; i < e.num_positional(); ++i)
      sub(e.args[i]);
  }

  // ------------------------------------------------------------- programs
  const Program *p_ = nullptr;
  Env prog_env_;

  void program(const Program &p) {
    p_ = &p;
    std::set<std::string> names;
    check_params(p.params, names);
    for (const auto &b : p.buffers) {
      if (!names.insert(b.name).second) error(b.loc, "duplicate name '" + b.name + "'");
      for (const auto &e : b.shape) {
        check_int_expr(e, params, "the shape of '" + b.name + "'");
        check_positive(e, "an extent of '" + b.name + "'");
      }
      if (b.slots) {
        if (b.kind == BufferKind::hbm) error(b.loc, "an HBM array has no slots");
        check_int_expr(*b.slots, params, "the slot count of '" + b.name + "'");
        check_positive(*b.slots, "the slot count of '" + b.name + "'");
      }
      check_size(b.loc, "'" + b.name + "'", b.shape, b.slots ? &*b.slots : nullptr, b.dtype);
    }
    std::set<std::string> scope = params;
    program_block(p.body, scope);
  }

  void program_block(const Block &b, std::set<std::string> &scope) {
    for (const auto &s : b)
      program_stmt(s, scope);
  }

  enum class Want { any, hbm, onchip, acc, sem };

  // Checks a buffer reference; returns the region's rank and extents when known.
  struct Region {
    bool ok = false;
    DType dtype = DType::f32;
    std::vector<std::optional<std::int64_t>> extents;
  };

  Region program_ref(const Expr &r, const std::set<std::string> &scope, Want want, const std::string &role) {
    Region reg;
    if (r.op != Op::Ref && r.op != Op::Name) {
      error(r.loc, role + " must be a buffer reference");
      return reg;
    }
    const Buffer *b = p_->buffer(r.name);
    if (!b) {
      if (scope.count(r.name))
        error(r.loc, "'" + r.name + "' is not a buffer");
      else
        error(r.loc, "unknown buffer '" + r.name + "'");
      return reg;
    }
    if (want == Want::hbm && b->kind != BufferKind::hbm)
      error(r.loc, role + " must be an HBM array, but '" + r.name + "' is " + to_string(b->kind));
    if (want == Want::onchip && (b->kind == BufferKind::hbm || b->kind == BufferKind::acc))
      error(r.loc, role + " must be an sram or smem buffer, but '" + r.name + "' is " + to_string(b->kind));
    if (want == Want::acc && b->kind != BufferKind::acc)
      error(r.loc, role + " must be an acc buffer, but '" + r.name + "' is " + to_string(b->kind));
    if ((want == Want::sem) != (b->kind == BufferKind::sem)) {
      error(r.loc, want == Want::sem
                       ? role + " must be a semaphore, but '" + r.name + "' is " + to_string(b->kind)
                       : role + " cannot be the semaphore '" + r.name + "'");
      return reg;
    }
    std::size_t first = 0;
    if (b->slots) {
      if (r.op == Op::Name || r.args.empty()) {
        error(r.loc, "'" + r.name + "' is a ring of slots; name a slot: " + r.name + "[s]");
        return reg;
      }
      const Expr &slot = r.args[0];
      if (slot.op == Op::Slice || slot.op == Op::Ellipsis) {
        error(slot.loc, "the first subscript of '" + r.name + "' is its slot index");
      } else {
        check_int_expr(slot, scope, "a slot index");
        auto sv = eval_int(slot, env);
        auto n = eval_int(*b->slots, env);
        if (sv && n && (*sv < 0 || *sv >= *n))
          error(slot.loc, "slot " + std::to_string(*sv) + " is outside '" + r.name + "' (" +
                              std::to_string(*n) + " slots)");
      }
      first = 1;
    } else if (b->kind != BufferKind::hbm && b->kind != BufferKind::sem && r.op == Op::Ref &&
               b->shape.size() < 2) {
      // A buffer of rank 2 or more is indexed like an array (a kernel's
      // scratch `x[0]` lowers so); on a rank-1 buffer an index is a slot by mistake.
      for (const auto &s : r.args)
        if (s.op != Op::Slice && s.op != Op::Ellipsis) {
          error(s.loc, "'" + r.name + "' has no slots, so it takes no slot index (declare a ring: " +
                           to_string(b->kind) + " " + r.name + "[2]: ...)");
          return reg;
        }
    }
    // Remaining subscripts index or slice the buffer's dims.
    reg.dtype = b->dtype;
    std::size_t dim = 0;
    bool ellipsis = false;
    std::size_t explicit_dims = 0;
    for (std::size_t i = first; i < r.args.size(); ++i)
      explicit_dims += r.args[i].op != Op::Ellipsis;
    if (explicit_dims > b->shape.size()) {
      error(r.loc, "'" + r.name + "' has rank " + std::to_string(b->shape.size()) + " but " +
                       std::to_string(explicit_dims) + " subscripts");
      return reg;
    }
    for (std::size_t i = first; i < r.args.size(); ++i) {
      const Expr &s = r.args[i];
      if (s.op == Op::Ellipsis) {
        if (ellipsis) error(s.loc, "more than one '...' in a subscript");
        ellipsis = true;
        std::size_t keep = b->shape.size() - explicit_dims;
        for (std::size_t k = 0; k < keep; ++k, ++dim)
          reg.extents.push_back(eval_int(b->shape[dim], env));
        continue;
      }
      if (s.op == Op::Slice) {
        std::optional<std::int64_t> lo = 0, hi = eval_int(b->shape[dim], env);
        if (s.args[0].op != Op::None) {
          check_int_expr(s.args[0], scope, "a slice bound");
          lo = eval_int(s.args[0], env);
        }
        if (s.args[1].op != Op::None) {
          check_int_expr(s.args[1], scope, "a slice bound");
          hi = eval_int(s.args[1], env);
        }
        reg.extents.push_back(lo && hi ? checked_sub(*hi, *lo) : static_slice_size(s.args[0], s.args[1]));
      } else if (s.op == Op::Call && s.name == "ds" && s.kwarg_names.empty()) {
        // pl.ds(start, size), as `lower` prints a kernel body's: its size.
        if (check_call_arity(s)) {
          check_int_expr(s.args[0], scope, "the start of ds()");
          check_int_expr(s.args[1], scope, "the size of ds()");
          reg.extents.push_back(eval_int(s.args[1], env));
        } else {
          reg.extents.push_back(std::nullopt);
        }
      } else {
        check_int_expr(s, scope, "a subscript");
      }
      ++dim;
    }
    for (; dim < b->shape.size(); ++dim)
      reg.extents.push_back(eval_int(b->shape[dim], env));
    reg.ok = true;
    return reg;
  }

  /// A copy's `offset=`: one integer expression per kept dim of the slot
  /// side `slot`; nullopt when the copy has none (its values where known).
  std::optional<std::vector<std::optional<std::int64_t>>> copy_offset(const Copy &c, const Region &slot,
                                                                      const std::set<std::string> &scope) {
    if (c.offset.op == Op::None) return std::nullopt;
    std::vector<std::optional<std::int64_t>> at;
    for (const auto &o : c.offset.args) {
      check_int_expr(o, scope, "a copy offset");
      at.push_back(eval_int(o, env));
      if (at.back() && *at.back() < 0) error(o.loc, "a copy offset must be >= 0");
    }
    if (slot.ok && at.size() != slot.extents.size())
      error(c.offset.loc, "offset= takes " + std::to_string(slot.extents.size()) +
                              " element offsets (one per kept dim of the slot), not " +
                              std::to_string(at.size()));
    return at;
  }

  /// `a`: the hbm side of a copy, `b` its slot side; with an offset, `a`
  /// must fit `b` at it (where the extents are known).
  void same_region(const Region &a, const Region &b, Loc l,
                   const std::optional<std::vector<std::optional<std::int64_t>>> &at = std::nullopt,
                   bool corner = true) {
    if (!a.ok || !b.ok) return;
    if (at) {
      if (a.dtype != b.dtype)
        error(l, std::string("copy between different dtypes: ") + to_string(a.dtype) + " and " +
                     to_string(b.dtype));
      for (std::size_t i = 0; i < a.extents.size() && i < b.extents.size() && i < at->size(); ++i)
        if (a.extents[i] && b.extents[i] && (*at)[i] && *(*at)[i] + *a.extents[i] > *b.extents[i])
          error(l, "offset " + std::to_string(*(*at)[i]) + " puts the copy's " +
                       std::to_string(*a.extents[i]) + " elements past the slot's " +
                       std::to_string(*b.extents[i]) + " along its dim " + std::to_string(i));
      return;
    }
    if (a.dtype != b.dtype) {
      error(l, std::string("copy between different dtypes: ") + to_string(a.dtype) + " and " +
                   to_string(b.dtype));
      return;
    }
    auto shape = [](const Region &r) {
      std::string s = "[";
      for (std::size_t i = 0; i < r.extents.size(); ++i)
        s += (i ? ", " : "") + (r.extents[i] ? std::to_string(*r.extents[i]) : std::string("?"));
      return s + "]";
    };
    // (With `corner`, the hbm side may be smaller: a partial block at the
    // array's end fills the slot's leading corner, the rest its padding, as
    // `lower` prints it. A DMA's two sides are one shape.)
    bool mismatch = a.extents.size() != b.extents.size();
    for (std::size_t i = 0; !mismatch && i < a.extents.size(); ++i)
      mismatch =
          a.extents[i] && b.extents[i] &&
          (corner ? *a.extents[i] > *b.extents[i] || *a.extents[i] < 0 : *a.extents[i] != *b.extents[i]);
    if (mismatch) error(l, "copy between different shapes: " + shape(a) + " and " + shape(b));
  }

  // Lowered programs write DMAs as the primitives: descriptors are the kernel body's.
  void program_dma(const Dma &d, Loc l, const std::set<std::string> &scope) {
    if (d.action == DmaAction::bind || !d.descriptor.empty() || d.method) {
      error(l, "a pipeline writes DMAs as dma_start(src, dst, sem) and dma_wait(dst, sem); async_copy "
               "descriptors belong in kernel bodies");
      return;
    }
    if (d.sem.op != Op::None) {
      Region sr = program_ref(d.sem, scope, Want::sem, "the semaphore");
      if (sr.ok && !sr.extents.empty()) error(d.sem.loc, "name one semaphore: '" + d.sem.name + "[k]'");
      const Buffer *b = p_->buffer(d.sem.name);
      const bool dma = d.action == DmaAction::start || d.action == DmaAction::wait;
      if (b && b->kind == BufferKind::sem && dma != (b->sem == SemKind::dma))
        error(d.sem.loc, dma ? "'" + d.sem.name + "' is a regular semaphore; a DMA signals a dma_sem"
                             : "'" + d.sem.name +
                                   "' is a DMA semaphore; semaphore_signal/semaphore_wait take a "
                                   "regular one");
    }
    if (d.n.op != Op::None) check_int_expr(d.n, scope, "a semaphore count");
    Region a, b;
    if (d.src.op != Op::None) a = program_ref(d.src, scope, Want::any, "the source of the copy");
    if (d.dst.op != Op::None) b = program_ref(d.dst, scope, Want::any, "the destination of the copy");
    if (d.src.op != Op::None && d.dst.op != Op::None) same_region(a, b, l, std::nullopt, false);
  }

  void program_stmt(const Stmt &s, std::set<std::string> &scope) {
    if (auto *a = std::get_if<Assign>(&s.kind)) {
      const Buffer *b = p_->buffer(a->target.name);
      if (!b) {
        if (scope.count(a->target.name))
          error(a->target.loc, "cannot store into '" + a->target.name + "': it is not a buffer");
        else
          error(a->target.loc, "unknown buffer '" + a->target.name + "'");
      } else if (b->kind == BufferKind::hbm && !a->discards()) {
        // (`A[...] = undefined` is no store: A holds nothing from there on,
        // as a kernel's output no input aliases starts.)
        error(a->target.loc, "cannot store into HBM array '" + b->name +
                                 "' directly; copy a buffer out with copy_out_start");
      } else if (a->discards() && b->kind == BufferKind::sem) {
        error(a->target.loc, "'" + b->name + "' is a semaphore; only a buffer can be made undefined");
      } else {
        program_ref(a->target, scope, Want::any, "the store target");
      }
      if (a->discards())
        discard_form(*a, s.loc);
      else
        program_expr(a->value, scope);
    } else if (auto *l = std::get_if<Let>(&s.kind)) {
      program_expr(l->value, scope);
      if (p_->buffer(l->name))
        error(s.loc,
              "cannot rebind buffer '" + l->name + "'; store into it with '" + l->name + "[...] = ...'");
      else if (params.count(l->name))
        error(s.loc, "cannot rebind param '" + l->name + "'");
      scope.insert(l->name);
    } else if (auto *f = std::get_if<If>(&s.kind)) {
      if (f->is_when) error(s.loc, "'when' belongs in kernel bodies; pipelines use 'if'");
      check_int_expr(f->cond, scope, "a condition");
      std::set<std::string> a = scope, b = scope;
      program_block(f->then_body, a);
      program_block(f->else_body, b);
    } else if (auto *f = std::get_if<For>(&s.kind)) {
      check_int_expr(f->lo, scope, "a loop bound");
      check_int_expr(f->hi, scope, "a loop bound");
      if (p_->buffer(f->var) || params.count(f->var))
        error(s.loc, "loop variable '" + f->var + "' shadows a buffer or param");
      std::set<std::string> inner = scope;
      inner.insert(f->var);
      program_block(f->body, inner);
    } else if (auto *c = std::get_if<Copy>(&s.kind)) {
      switch (c->kind) {
      case CopyKind::in_start: {
        Region a = program_ref(c->src, scope, Want::hbm, "the source of copy_in_start");
        Region b = program_ref(c->dst, scope, Want::onchip, "the destination of copy_in_start");
        same_region(a, b, s.loc, copy_offset(*c, b, scope));
        break;
      }
      case CopyKind::out_start: {
        Region a = program_ref(c->src, scope, Want::onchip, "the source of copy_out_start");
        Region b = program_ref(c->dst, scope, Want::hbm, "the destination of copy_out_start");
        if (c->offset.op == Op::None)
          same_region(b, a, s.loc); // (the hbm side first: it may be the smaller)
        else
          same_region(b, a, s.loc, copy_offset(*c, a, scope));
        break;
      }
      case CopyKind::in_wait: program_ref(c->dst, scope, Want::onchip, "the slot of copy_in_wait"); break;
      case CopyKind::out_wait: program_ref(c->src, scope, Want::onchip, "the slot of copy_out_wait"); break;
      }
    } else if (auto *w = std::get_if<Wgmma>(&s.kind)) {
      program_ref(w->acc, scope, Want::acc, "the accumulator of wgmma");
      program_ref(w->a, scope, Want::onchip, "the first operand of wgmma");
      program_ref(w->b, scope, Want::onchip, "the second operand of wgmma");
    } else if (auto *w = std::get_if<WgmmaWait>(&s.kind)) {
      check_int_expr(w->n, scope, "wgmma_wait");
      if (auto v = eval_int(w->n, env); v && *v < 0) error(w->n.loc, "wgmma_wait takes a count >= 0");
    } else if (auto *d = std::get_if<Dma>(&s.kind)) {
      program_dma(*d, s.loc, scope);
    } else if (std::holds_alternative<CommitSmem>(s.kind)) {
      error(s.loc, "commit_smem() belongs in a Mosaic GPU kernel body (plgpu.commit_smem); a pipeline's "
                   "wgmma reads what its copies and stores leave in SMEM");
    }
  }

  void program_expr(const Expr &e, const std::set<std::string> &scope) {
    switch (e.op) {
    case Op::Ref:
      // A slice of a local value (`m[0:8, :]`, as `lower` prints a kernel
      // body's), else a buffer reference.
      if (!p_->buffer(e.name) && scope.count(e.name)) {
        value_subscripts(e, scope);
        return;
      }
      program_ref(e, scope, Want::any, "a reference");
      return;
    case Op::Name:
      if (const Buffer *b = p_->buffer(e.name)) {
        if (b->slots) error(e.loc, "'" + e.name + "' is a ring of slots; name a slot: " + e.name + "[s]");
      } else if (!scope.count(e.name)) {
        error(e.loc, "unknown name '" + e.name + "'");
      }
      return;
    case Op::Ellipsis:
    case Op::Slice:
    case Op::None: error(e.loc, "'" + print(e) + "' is only allowed inside a subscript"); return;
    case Op::Undefined: error(e.loc, undefined_only_stored); return;
    case Op::Call:
      if (e.name == "program_id" || e.name == "num_programs") {
        error(e.loc, e.name + " belongs in kernel bodies");
        return;
      }
      call(e, scope, [&](const Expr &a) { program_expr(a, scope); });
      return;
    default:
      for (const auto &a : e.args)
        program_expr(a, scope);
    }
  }
};

} // namespace

std::vector<Diagnostic> validate(const KernelSpec &k, const Env &overrides) {
  // A nested emit_pipeline: what the language accepts of it, then its
  // flattened kernel (spec/nested.hpp) as any other, which validates the
  // inner specs and body where they are written.
  if (has_emit_pipeline(k.body) || has_emit_pipeline(k.reference)) {
    auto errs = nested_errors(k);
    if (!errs.empty()) return errs;
    return validate(flatten_nested(k), overrides);
  }
  const HoistedNames quoted(k.body, k.reference);
  Validator v;
  v.overrides = overrides;
  v.kernel(k);
  // The body's types are only meaningful over names and ranks that validate.
  if (v.errs.empty()) return typecheck(k, overrides);
  return v.errs;
}

std::vector<Diagnostic> validate(const Program &p, const Env &overrides) {
  const HoistedNames quoted(p.body);
  Validator v;
  v.overrides = overrides;
  for (const auto &st : p.body)
    if (has_emit_pipeline(Block{st}))
      v.errs.push_back({Severity::error,
                        st.loc,
                        "an emit_pipeline belongs in a kernel body; a pipeline writes its copies itself",
                        {}});
  if (!v.errs.empty()) return v.errs;
  v.program(p);
  if (v.errs.empty()) return typecheck(p, overrides);
  return v.errs;
}

std::vector<Diagnostic> validate(const File &f) { return validate(f, nullptr); }

std::vector<Diagnostic> validate(const File &f, const std::variant<KernelSpec, Program> *except) {
  std::vector<Diagnostic> errs;
  std::set<std::string> names;
  for (const auto &u : f.units) {
    if (!names.insert(unit_name(u)).second)
      errs.push_back(
          Diagnostic{Severity::error, unit_loc(u), "duplicate unit name '" + unit_name(u) + "'", {}});
    if (&u == except) continue;
    auto e = std::visit([](const auto &x) { return validate(x); }, u);
    errs.insert(errs.end(), e.begin(), e.end());
  }
  return errs;
}

} // namespace pipecheck::spec
