#include "spec/bind.hpp"

#include "spec/checked.hpp"
#include "spec/print.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

namespace pipecheck::spec {

std::vector<std::int64_t> BoundOperand::block_view_shape() const {
  std::vector<std::int64_t> s;
  for (std::size_t d = 0; d < block.size(); ++d)
    if (!squeezed[d]) s.push_back(block[d]);
  return s;
}

std::optional<std::size_t> BoundOperand::view_to_array_dim(std::int64_t v) const {
  std::int64_t seen = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (squeezed[d]) continue;
    if (seen == v) return d;
    ++seen;
  }
  return std::nullopt;
}

std::int64_t BoundOperand::block_bytes() const {
  std::int64_t n = dtype_bytes(dtype);
  for (std::int64_t b : block)
    n = saturating_mul(n, b);
  return n;
}

std::optional<std::size_t> BoundKernel::operand_index(const std::string &n) const {
  for (std::size_t i = 0; i < operands.size(); ++i)
    if (operands[i].name == n) return i;
  return std::nullopt;
}

const BoundOperand *BoundKernel::operand(const std::string &n) const {
  auto i = operand_index(n);
  return i ? &operands[*i] : nullptr;
}

std::int64_t num_points(const std::vector<std::int64_t> &grid) {
  std::int64_t n = 1;
  for (std::int64_t g : grid)
    n = saturating_mul(n, g);
  return n;
}

std::int64_t BoundKernel::num_points() const { return spec::num_points(grid); }

std::vector<std::int64_t> BoundKernel::point(std::int64_t linear) const {
  return grid_point(grid, {}, linear);
}

std::vector<bool> cta_axes(const KernelSpec &k, std::size_t rank) {
  std::vector<bool> cta(rank, true);
  if (k.dimension_semantics)
    for (std::size_t a = 0; a < rank && a < k.dimension_semantics->size(); ++a)
      cta[a] = (*k.dimension_semantics)[a] == DimSemantics::parallel;
  return cta;
}

bool moves_within_cta(const Operand &o, const std::vector<bool> &cta) {
  if (!o.index_map) return false;
  for (std::size_t a = 0; a < o.index_map->params.size() && a < cta.size(); ++a)
    if (!cta[a])
      for (const auto &r : o.index_map->results)
        if (mentions(r, o.index_map->params[a])) return true;
  return false;
}

std::int64_t cta_steps(const std::vector<std::int64_t> &grid, const std::vector<bool> &cta) {
  std::int64_t n = 1;
  for (std::size_t a = 0; a < grid.size(); ++a)
    if (a >= cta.size() || !cta[a]) n = saturating_mul(n, grid[a]);
  return n;
}

std::vector<std::int64_t> grid_point(const std::vector<std::int64_t> &grid, const std::vector<bool> &cta,
                                     std::int64_t linear) {
  const std::int64_t n = cta_steps(grid, cta);
  std::int64_t step = n > 0 ? linear % n : 0, block = n > 0 ? linear / n : 0;
  std::vector<std::int64_t> p(grid.size(), 0);
  for (std::size_t a = grid.size(); a-- > 0;) {
    std::int64_t &r = a < cta.size() && cta[a] ? block : step;
    if (grid[a] <= 0) continue;
    p[a] = r % grid[a];
    r /= grid[a];
  }
  return p;
}

std::int64_t grid_position(const std::vector<std::int64_t> &grid, const std::vector<bool> &cta,
                           const std::vector<std::int64_t> &point) {
  std::int64_t block = 0, step = 0;
  for (std::size_t a = 0; a < grid.size() && a < point.size(); ++a) {
    std::int64_t &r = a < cta.size() && cta[a] ? block : step;
    r = r * grid[a] + point[a];
  }
  return block * cta_steps(grid, cta) + step;
}

std::string format_tuple(const std::vector<std::int64_t> &v) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  if (v.size() == 1) os << ',';
  os << ')';
  return os.str();
}

Expr bind_grid(const Expr &e, const std::vector<std::int64_t> &point, const std::vector<std::int64_t> &grid) {
  if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1 &&
      e.args[0].op == Op::Int) {
    auto a = e.args[0].int_value;
    const auto &src = e.name == "program_id" ? point : grid;
    if (a >= 0 && static_cast<std::size_t>(a) < src.size())
      return Expr::integer(src[static_cast<std::size_t>(a)], e.loc);
    return e;
  }
  return e.map_args([&](const Expr &a) { return bind_grid(a, point, grid); });
}

std::string program_id_var(std::int64_t a) { return "program_id(" + std::to_string(a) + ")"; }
std::string num_programs_var(std::int64_t a) { return "num_programs(" + std::to_string(a) + ")"; }

void bind_point_names(Env &env, const std::vector<std::int64_t> &point,
                      const std::vector<std::int64_t> &grid) {
  for (std::size_t a = 0; a < point.size(); ++a)
    env[program_id_var(static_cast<std::int64_t>(a))] = point[a];
  for (std::size_t a = 0; a < grid.size(); ++a)
    env[num_programs_var(static_cast<std::int64_t>(a))] = grid[a];
}

Expr grid_calls_as_names(const Expr &e, std::size_t rank, const std::vector<std::int64_t> &grid) {
  if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs") && e.args.size() == 1 &&
      e.args[0].op == Op::Int) {
    const auto a = e.args[0].int_value;
    const bool pid = e.name == "program_id";
    if (a >= 0 && static_cast<std::size_t>(a) < (pid ? rank : grid.size()))
      return pid ? Expr::var(program_id_var(a), e.loc)
                 : Expr::integer(grid[static_cast<std::size_t>(a)], e.loc);
    return e;
  }
  return e.map_args([&](const Expr &a) { return grid_calls_as_names(a, rank, grid); });
}

namespace {

// Whether bind_grid can change `e`.
bool has_grid_calls(const Expr &e) {
  if (e.op == Op::Call && (e.name == "program_id" || e.name == "num_programs")) return true;
  for (const auto &a : e.args)
    if (has_grid_calls(a)) return true;
  return false;
}

BindError bad(Loc loc, std::string msg) {
  return {BindFault::bad_input, Diagnostic{Severity::error, loc, std::move(msg), {}}};
}

class Binder {
public:
  Binder(const KernelSpec &k, const Env &params) : k_(k) {
    out_.spec = &k;
    out_.params = params;
  }

  Binding run() {
    Binding b;
    try {
      bind_grid_extents();
      for (const auto &op : k_.operands)
        out_.operands.push_back(bind_operand(op));
      b.kernel = std::move(out_);
    } catch (BindError &e) {
      b.error = std::move(e);
    }
    return b;
  }

private:
  const KernelSpec &k_;
  BoundKernel out_;

  // The value of a size expression; `where` names it in errors ("the grid",
  // "the shape of 'x'"), `unbound` says what to do when a param is symbolic.
  std::int64_t value(const Expr &e, const std::string &where, const std::string &unbound) {
    Evaluation v = evaluate(e, out_.params);
    if (v.value) return *v.value;
    if (v.is_error()) throw bad_at(e, out_.params, where);
    if (v.fault == EvalFault::unbound)
      throw BindError{BindFault::unbound, Diagnostic{Severity::error, e.loc, unbound, {}}};
    throw bad(e.loc, where + " '" + print(e) + "' is not an integer");
  }

  static BindError bad_at(const Expr &e, const Env &env, const std::string &where) {
    if (auto d = arithmetic_error(e, env, where)) return {BindFault::bad_input, std::move(*d)};
    return bad(e.loc, "cannot evaluate " + where);
  }

  void bind_grid_extents() {
    if (!k_.grid) return;
    for (const auto &g : *k_.grid) {
      std::int64_t v =
          value(g, "the grid", "the grid is not a constant (a param is symbolic: bind it with --set)");
      if (v < 0) throw bad(g.loc, "grid extent '" + print(g) + "' is negative");
      if (v > std::numeric_limits<std::int32_t>::max())
        throw bad(g.loc, "grid extent " + (g.op == Op::Int ? std::string() : "'" + print(g) + "' = ") +
                             std::to_string(v) + " is past 2147483647: Pallas' program ids are int32");
      out_.grid.push_back(v);
    }
  }

  BoundOperand bind_operand(const Operand &op) {
    BoundOperand o;
    o.decl = &op;
    o.name = op.name;
    o.role = op.role;
    o.dtype = op.dtype;
    o.loc = op.loc;
    const std::string of = " of '" + op.name + "'";
    for (const auto &e : op.shape) {
      std::int64_t v =
          value(e, "the shape" + of, "the shape" + of + " is not a constant (bind its params with --set)");
      if (v < 0) throw bad(e.loc, "dim '" + print(e) + "'" + of + " is negative");
      o.shape.push_back(v);
    }
    if (!checked_bytes(o.shape, dtype_bytes(o.dtype)))
      throw bad(op.loc,
                "integer overflow in the size of operand '" + op.name + "': its bytes do not fit in 64 bits");
    const std::size_t rank = o.shape.size();
    o.windowed = op.role != Role::scratch &&
                 (op.memory_space == MemorySpace::vmem || op.memory_space == MemorySpace::smem);
    o.block = o.shape;
    o.squeezed.assign(rank, false);
    o.element.assign(rank, false);
    o.pad_lo.assign(rank, 0);
    o.pad_hi.assign(rank, 0);
    o.bounded.assign(rank, false);
    if (op.block_shape) {
      if (op.block_shape->size() != rank)
        throw bad(op.loc, "the block" + of + " has rank " + std::to_string(op.block_shape->size()) +
                              " but the array has rank " + std::to_string(rank));
      for (std::size_t d = 0; d < rank; ++d) {
        const auto &b = (*op.block_shape)[d];
        if (!b) {
          o.squeezed[d] = true;
          o.block[d] = 1;
          continue;
        }
        const auto el = element_dim(*b);
        const auto bound = bounded_slice_dim(*b);
        o.bounded[d] = bound.has_value();
        const Expr &size = el ? el->size : bound ? *bound : *b;
        o.block[d] = value(size, "the block" + of,
                           "the block" + of + " is not a constant (bind its params with --set)");
        if (o.block[d] < 1) throw bad(size.loc, "block dim '" + print(size) + "'" + of + " is not positive");
        if (el) {
          o.element[d] = true;
          o.pad_lo[d] = value(el->lo, "the padding" + of, "the padding" + of + " is not a constant");
          o.pad_hi[d] = value(el->hi, "the padding" + of, "the padding" + of + " is not a constant");
          if (o.pad_lo[d] < 0 || o.pad_hi[d] < 0) throw bad(b->loc, "the padding" + of + " is negative");
        }
      }
    }
    for (std::size_t d = 0; d < rank; ++d) {
      if (o.element[d]) {
        // The offsets whose window [i, i + block) fits the padded dim.
        const std::int64_t padded = saturating_add(saturating_add(o.shape[d], o.pad_lo[d]), o.pad_hi[d]);
        o.num_blocks.push_back(std::max<std::int64_t>(0, padded - o.block[d] + 1));
        continue;
      }
      if (o.bounded[d]) {
        o.num_blocks.push_back(saturating_add(o.shape[d], 1));
        continue;
      }
      o.num_blocks.push_back(o.shape[d] / o.block[d] + (o.shape[d] % o.block[d] != 0));
    }
    for (std::size_t d = 0; d < rank; ++d)
      o.size.push_back(Expr::integer(o.block[d], op.loc));
    if (!op.index_map) {
      if (o.has_bounded_dims()) throw bad(op.loc, "a BoundedSlice dim" + of + " needs an index map");
      o.index.assign(rank, Expr::integer(0, op.loc));
      o.window = o.index;
      return o;
    }
    const IndexMap &m = *op.index_map;
    if (m.params.size() != out_.grid.size())
      throw bad(op.loc, "the index map" + of + " takes " + std::to_string(m.params.size()) +
                            " grid indices but the grid has rank " + std::to_string(out_.grid.size()));
    if (m.results.size() != rank)
      throw bad(op.loc, "the index map" + of + " returns " + std::to_string(m.results.size()) +
                            " block indices but the array has rank " + std::to_string(rank));
    o.index_params = m.params;
    std::map<std::string, Expr> subst;
    for (const auto &[n, v] : out_.params)
      subst[n] = Expr::integer(v);
    for (const auto &p : m.params)
      subst.erase(p);
    for (std::size_t d = 0; d < rank; ++d) {
      const Expr &r = m.results[d];
      // Decided with the grid indices unbound: `i // N` with --set N=0.
      if (auto e = arithmetic_error(r, out_.params, "the index map" + of))
        throw BindError{BindFault::bad_input, *e};
      if (!o.bounded[d]) {
        o.index.push_back(substitute(r, subst));
        continue;
      }
      auto ds = ds_index(r);
      if (!ds)
        throw bad(r.loc, "dim " + std::to_string(d) + of +
                             " is a BoundedSlice: its index map returns ds(start, size)");
      o.index.push_back(substitute(ds->start, subst));
      o.size[d] = substitute(ds->size, subst);
    }
    o.window = o.index;
    for (std::size_t d = 0; d < rank; ++d)
      if (o.bounded[d]) o.window.push_back(o.size[d]);
    return o;
  }
};

} // namespace

std::int64_t BoundOperand::window_start(std::size_t d, std::int64_t idx) const {
  if (d < squeezed.size() && squeezed[d]) return idx;
  if (d < element.size() && element[d]) return saturating_add(idx, -pad_lo[d]);
  if (d < bounded.size() && bounded[d]) return idx;
  return saturating_mul(idx, block[d]);
}

bool BoundOperand::has_element_dims() const {
  return std::find(element.begin(), element.end(), true) != element.end();
}

bool BoundOperand::has_bounded_dims() const {
  return std::find(bounded.begin(), bounded.end(), true) != bounded.end();
}

Binding bind_kernel(const KernelSpec &k, const Env &params) { return Binder(k, params).run(); }

BlockIndexer::BlockIndexer(const BoundOperand &op, const Env &params, std::vector<std::int64_t> grid,
                           std::size_t rank, const std::vector<Expr> *exprs)
    : op_(op), exprs_(exprs ? *exprs : op.index), grid_(std::move(grid)), env_(params) {
  for (std::size_t a = 0; a < op.index_params.size() && a < rank; ++a)
    index_vars_.push_back(&env_[op.index_params[a]]);
  for (const auto &e : exprs_)
    grid_calls_.push_back(has_grid_calls(e) ? 1 : 0);
}

BlockIndex BlockIndexer::at(const std::vector<std::int64_t> &point) {
  for (std::size_t a = 0; a < index_vars_.size(); ++a)
    *index_vars_[a] = point.at(a);
  BlockIndex out;
  std::vector<std::int64_t> idx;
  auto where = [&] { return "the index map of '" + op_.name + "'"; };
  // An arithmetic error in any dim wins over a symbolic param in another.
  for (std::size_t d = 0; d < exprs_.size(); ++d) {
    const Expr &e = exprs_[d];
    Expr with_grid;
    const Expr &bound = grid_calls_[d] ? (with_grid = bind_grid(e, point, grid_)) : e;
    Evaluation v = evaluate(bound, env_);
    if (v.value) {
      idx.push_back(*v.value);
      continue;
    }
    if (auto dg = v.is_error() ? arithmetic_error(bound, env_, where()) : std::nullopt) {
      dg->message += " at grid point " + format_tuple(point);
      out.error = BindError{BindFault::bad_input, std::move(*dg)};
      return out;
    }
    if (!out.error)
      out.error = BindError{v.fault == EvalFault::unbound ? BindFault::unbound : BindFault::bad_input,
                            Diagnostic{Severity::error,
                                       e.loc,
                                       where() + " has no value at grid point " + format_tuple(point) +
                                           (v.fault == EvalFault::unbound ? " (a param is symbolic)" : ""),
                                       {}}};
  }
  if (!out.error) out.value = std::move(idx);
  return out;
}

BlockIndex block_index(const BoundOperand &op, const Env &params, const std::vector<std::int64_t> &grid,
                       const std::vector<std::int64_t> &point) {
  return BlockIndexer(op, params, grid, point.size()).at(point);
}

BlockIndex window_sizes(const BoundOperand &op, const Env &params, const std::vector<std::int64_t> &grid,
                        const std::vector<std::int64_t> &point) {
  if (!op.has_bounded_dims()) return BlockIndex{op.block, std::nullopt};
  return BlockIndexer(op, params, grid, point.size(), &op.size).at(point);
}

BlockIndex window_at(const BoundOperand &op, const Env &params, const std::vector<std::int64_t> &grid,
                     const std::vector<std::int64_t> &point) {
  if (!op.has_bounded_dims()) return block_index(op, params, grid, point);
  return BlockIndexer(op, params, grid, point.size(), &op.window).at(point);
}

BlockIndex block_index(const BoundKernel &k, std::size_t op, const std::vector<std::int64_t> &point) {
  return block_index(k.operands[op], k.params, k.grid, point);
}

} // namespace pipecheck::spec
