#include "executor/oracle.hpp"

#include "executor/interp.hpp"
#include "spec/checked.hpp"
#include "spec/lower.hpp"

#include <algorithm>
#include <cassert>
#include <sstream>

namespace pipecheck::executor {

using spec::Expr;

namespace {

[[noreturn]] void bad(spec::Loc loc, const std::string &msg) {
  throw ExecError(ExecError::Kind::bad_input, loc, msg);
}

std::string expr_string(const Expr &e) {
  std::ostringstream os;
  os << e;
  return os.str();
}

std::int64_t must_eval(const Expr &e, const spec::Env &env, const std::string &what) {
  auto v = spec::eval_int(e, env);
  if (v) return *v;
  if (auto d = spec::arithmetic_error(e, env, what + " '" + expr_string(e) + "'")) bad(d->loc, d->message);
  bad(e.loc, what + " '" + expr_string(e) + "' has no value (bind its params with --set)");
}

} // namespace

Shape ConcreteOperand::block_view_shape() const {
  Shape s;
  for (std::size_t d = 0; d < block.size(); ++d)
    if (!squeezed[d]) s.push_back(block[d]);
  return s;
}

const ConcreteOperand *ConcreteKernel::operand(const std::string &n) const {
  for (const auto &o : operands)
    if (o.name == n) return &o;
  return nullptr;
}

spec::Env bind_params(const std::vector<spec::Param> &params, const spec::Env &overrides) {
  spec::ParamBinding b = spec::bind_params(params, overrides, true);
  if (!b.errors.empty()) bad(b.errors.front().loc, b.errors.front().message);
  return std::move(b.env);
}

ConcreteKernel concretize(const spec::KernelSpec &k, const spec::Env &overrides, std::int64_t scale,
                          const std::optional<std::string> &target) {
  if (scale < 1) bad(k.loc, "--scale must be at least 1");
  ConcreteKernel c;
  c.spec = &k;
  c.scale = scale;
  c.params = bind_params(k.params, overrides);
  for (const auto &p : k.params)
    if (!c.params.count(p.name))
      bad(p.loc, "param '" + p.name + "' has no value; give one with --set " + p.name + "=...");
  if (k.grid)
    for (const auto &g : *k.grid) {
      const auto v = must_eval(g, c.params, "grid extent");
      if (v < 0) bad(g.loc, "grid extent '" + expr_string(g) + "' is negative");
      c.grid.push_back(v);
    }
  std::string t = target.value_or("");
  if (const auto *s = k.setting("target"); !target && s && s->value.op == spec::Op::Name) t = s->value.name;
  c.gpu = spec::is_gpu_target(t);
  if (c.gpu) c.cta = spec::cta_axes(k, c.grid.size());
  for (const auto &op : k.operands) {
    ConcreteOperand o;
    o.decl = &op;
    o.name = op.name;
    o.role = op.role;
    o.dtype = op.dtype;
    for (const auto &d : op.shape) {
      const auto v = must_eval(d, c.params, "dim");
      if (v < 0) bad(d.loc, "dim '" + expr_string(d) + "' is negative");
      o.array_shape.push_back(v);
    }
    if (!spec::checked_bytes(o.array_shape, spec::dtype_bytes(o.dtype)))
      bad(op.loc, "integer overflow in the size of operand '" + op.name +
                      "': " + shape_string(o.array_shape) + " does not fit in 64 bits");
    o.windowed = op.role != spec::Role::scratch &&
                 (op.memory_space == spec::MemorySpace::vmem || op.memory_space == spec::MemorySpace::smem);
    const std::size_t rank = o.array_shape.size();
    o.squeezed.assign(rank, false);
    o.block = o.array_shape;
    if (op.block_shape && o.windowed) {
      if (op.block_shape->size() != rank)
        bad(op.loc, "operand '" + op.name + "' has a block of rank " +
                        std::to_string(op.block_shape->size()) + " for an array of rank " +
                        std::to_string(rank));
      for (std::size_t d = 0; d < rank; ++d) {
        const auto &b = (*op.block_shape)[d];
        if (!b) {
          o.squeezed[d] = true;
          o.block[d] = 1;
        } else {
          o.block[d] = must_eval(*b, c.params, "block dim");
          if (o.block[d] < 1) bad(b->loc, "block dim '" + expr_string(*b) + "' is not positive");
        }
      }
    }
    if (op.index_map && o.windowed) {
      o.index_params = op.index_map->params;
      o.index_results = op.index_map->results;
      // Decided with the grid indices unbound: `i // N` with --set N=0.
      for (const auto &r : o.index_results)
        if (auto d = spec::arithmetic_error(r, c.params, "the index map of '" + op.name + "'"))
          bad(d->loc, d->message);
      if (o.index_results.size() != rank)
        bad(op.loc, "index map of '" + op.name + "' returns " + std::to_string(o.index_results.size()) +
                        " indices for an array of rank " + std::to_string(rank));
      if (o.index_params.size() != c.grid.size())
        bad(op.loc, "index map of '" + op.name + "' takes " + std::to_string(o.index_params.size()) +
                        " grid indices; the grid has " + std::to_string(c.grid.size()));
    }
    if (scale > 1) {
      for (std::size_t d = 0; d < rank; ++d) {
        if (o.squeezed[d] || o.block[d] == 1) continue;
        if (o.block[d] % scale != 0 || o.array_shape[d] % scale != 0)
          bad(op.loc, "--scale " + std::to_string(scale) + " does not divide dim " + std::to_string(d) +
                          " of '" + op.name + "' (array " + std::to_string(o.array_shape[d]) + ", block " +
                          std::to_string(o.block[d]) + ")");
        o.block[d] /= scale;
        o.array_shape[d] /= scale;
      }
    }
    c.operands.push_back(std::move(o));
  }
  for (const auto &a : k.aliases) {
    const auto *in = c.operand(a.input);
    const auto *out = c.operand(a.output);
    if (!in || !out || in->array_shape != out->array_shape || in->dtype != out->dtype)
      bad(a.loc, "alias " + a.input + " -> " + a.output + " needs two operands of one shape and dtype");
    c.aliases[a.output] = a.input;
  }
  c.body = rewrite_grid_calls(k.body);
  return c;
}

spec::KernelSpec concrete_spec(const ConcreteKernel &c) {
  spec::KernelSpec k = *c.spec;
  if (k.grid) {
    std::vector<Expr> g;
    for (auto v : c.grid)
      g.push_back(Expr::integer(v));
    k.grid = g;
  }
  for (auto &op : k.operands) {
    const ConcreteOperand *o = c.operand(op.name);
    assert(o);
    for (std::size_t d = 0; d < op.shape.size(); ++d)
      op.shape[d] = Expr::integer(o->array_shape[d], op.shape[d].loc);
    if (op.block_shape)
      for (std::size_t d = 0; d < op.block_shape->size(); ++d)
        if ((*op.block_shape)[d])
          (*op.block_shape)[d] = Expr::integer(o->block[d], (*op.block_shape)[d]->loc);
  }
  return k;
}

std::int64_t grid_size(const ConcreteKernel &c) { return num_elements(c.grid); }

Shape grid_point(const ConcreteKernel &c, std::int64_t linear) {
  if (c.gpu) return spec::gpu_grid_point(c.grid, c.cta, linear);
  Shape p(c.grid.size());
  for (int d = static_cast<int>(c.grid.size()) - 1; d >= 0; --d) {
    p[d] = linear % c.grid[d];
    linear /= c.grid[d];
  }
  return p;
}

bool starts_cta(const ConcreteKernel &c, std::int64_t linear) {
  if (!c.gpu) return false;
  const std::int64_t n = spec::cta_steps(c.grid, c.cta);
  return n > 0 && linear % n == 0;
}

Shape block_index(const ConcreteKernel &c, const ConcreteOperand &op, const Shape &point) {
  Shape idx(op.array_shape.size(), 0);
  if (op.index_results.empty()) return idx;
  spec::Env env = c.params;
  for (std::size_t k = 0; k < op.index_params.size(); ++k)
    env[op.index_params[k]] = point[k];
  for (std::size_t d = 0; d < idx.size(); ++d)
    idx[d] = must_eval(op.index_results[d], env, "index map result");
  return idx;
}

ArrayMap make_kernel_arrays(const ConcreteKernel &c, std::uint64_t seed) {
  ArrayMap m;
  std::uint64_t k = 0;
  for (const auto &o : c.operands) {
    auto a = std::make_unique<HostArray>(o.name, o.dtype, o.array_shape);
    if (o.role == spec::Role::in)
      a->fill_random(seed * 1000003ull + ++k);
    else
      a->fill_poison();
    m[o.name] = std::move(a);
  }
  for (const auto &[out, in] : c.aliases)
    m[out]->copy_from(*m[in]);
  return m;
}

namespace {

/// The array box a block covers, clipped to the array, and the matching box
/// of the block buffer. False when nothing of the block is inside the array.
bool block_boxes(const ConcreteOperand &o, const Shape &bidx, Box &abox, Box &bbox, bool &partial) {
  const std::size_t rank = o.array_shape.size();
  abox.lo.assign(rank, 0);
  abox.hi.assign(rank, 0);
  bbox.lo.clear();
  bbox.hi.clear();
  partial = false;
  bool any = true;
  for (std::size_t d = 0; d < rank; ++d) {
    // Saturating: a block index far outside the array stays outside it.
    const std::int64_t lo = o.squeezed[d] ? bidx[d] : spec::saturating_mul(bidx[d], o.block[d]);
    const std::int64_t hi = spec::saturating_add(lo, o.block[d]);
    const std::int64_t clo = std::clamp<std::int64_t>(lo, 0, o.array_shape[d]);
    const std::int64_t chi = std::clamp<std::int64_t>(hi, 0, o.array_shape[d]);
    if (clo != lo || chi != hi) partial = true;
    if (chi <= clo) any = false;
    abox.lo[d] = clo;
    abox.hi[d] = std::max(clo, chi);
    if (!o.squeezed[d]) {
      bbox.lo.push_back(clo - lo);
      bbox.hi.push_back(std::max(clo, chi) - lo);
    }
  }
  return any;
}

class OracleMemory : public Memory {
public:
  std::map<std::string, HostArray *> arrays;
  HostArray *array(const std::string &n) override {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : it->second;
  }
};

View box_view(HostArray &a, const Box &b) {
  View v = View::whole(a);
  v.box.lo = b.lo;
  v.box.hi = b.hi;
  return v;
}

} // namespace

void run_oracle(const ConcreteKernel &c, ArrayMap &arrays) {
  OracleMemory mem;
  std::vector<std::unique_ptr<HostArray>> blocks(c.operands.size());
  for (std::size_t k = 0; k < c.operands.size(); ++k) {
    const auto &o = c.operands[k];
    HostArray *whole = arrays.at(o.name).get();
    if (o.windowed) {
      blocks[k] = std::make_unique<HostArray>(o.name, o.dtype, o.block_view_shape());
      mem.arrays[o.name] = blocks[k].get();
    } else {
      mem.arrays[o.name] = whole;
    }
  }
  Interp interp(mem);
  const std::int64_t n = grid_size(c);
  for (std::int64_t lin = 0; lin < n; ++lin) {
    const Shape point = grid_point(c, lin);
    std::vector<Box> aboxes(c.operands.size()), bboxes(c.operands.size());
    std::vector<bool> inside(c.operands.size());
    for (std::size_t k = 0; k < c.operands.size(); ++k) {
      const auto &o = c.operands[k];
      if (!o.windowed) continue;
      bool partial = false;
      inside[k] = block_boxes(o, block_index(c, o, point), aboxes[k], bboxes[k], partial);
      HostArray &blk = *blocks[k];
      if (partial || !inside[k]) blk.fill_poison();
      if (inside[k]) copy_view(box_view(*arrays.at(o.name), aboxes[k]), box_view(blk, bboxes[k]));
    }
    // Every CTA has its own scratch: plgpu.ACC starts at zero (the lowered
    // program says so too), SMEM undefined.
    if (starts_cta(c, lin))
      for (const auto &o : c.operands)
        if (o.role == spec::Role::scratch) {
          if (o.decl && o.decl->memory_space == spec::MemorySpace::acc)
            arrays.at(o.name)->fill_zero();
          else
            arrays.at(o.name)->fill_poison();
        }
    interp.env = c.params;
    interp.locals.clear();
    for (std::size_t a = 0; a < c.grid.size(); ++a) {
      interp.env[program_id_name(static_cast<int>(a))] = point[a];
      interp.env[num_programs_name(static_cast<int>(a))] = c.grid[a];
    }
    interp.exec(c.body);
    for (std::size_t k = 0; k < c.operands.size(); ++k) {
      const auto &o = c.operands[k];
      if (o.windowed && o.role == spec::Role::out && inside[k])
        copy_view(box_view(*blocks[k], bboxes[k]), box_view(*arrays.at(o.name), aboxes[k]));
    }
  }
}

} // namespace pipecheck::executor
