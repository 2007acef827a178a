#include "executor/oracle.hpp"
#include "spec/nested.hpp"
#include "spec/prefetch.hpp"

#include "spec/targets.hpp"

#include "executor/interp.hpp"
#include "spec/checked.hpp"
#include "spec/lower.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace pipecheck::executor {

using spec::Expr;

namespace {

[[noreturn]] void bad(spec::Loc loc, const std::string &msg) {
  throw ExecError(ExecError::Kind::bad_input, loc, msg);
}

} // namespace

spec::Env bind_params(const std::vector<spec::Param> &params, const spec::Env &overrides) {
  spec::ParamBinding b = spec::bind_params(params, overrides, true);
  if (!b.errors.empty()) bad(b.errors.front().loc, b.errors.front().message);
  return std::move(b.env);
}

namespace {

// Where a body states extents of its own (a slice bound, ds(), a shape, a
// loop, an integer index other than 0: `acc[program_id(0)]` picks one of
// the dim's elements, which a scaled dim may no longer have), which --scale
// does not divide: the first such expression.
const spec::Expr *own_extent(const spec::Expr &e) {
  using spec::Op;
  if (e.op == Op::Slice && (e.args.at(0).op != Op::None || e.args.at(1).op != Op::None)) return &e;
  if (e.op == Op::Ref)
    for (const auto &a : e.args)
      if (a.op != Op::Slice && a.op != Op::Ellipsis && a.op != Op::None &&
          !(a.op == Op::Int && a.int_value == 0))
        return &a;
  if (e.op == Op::Call &&
      (e.name == "ds" || e.name == "iota" || e.name == "reshape" || e.name == "broadcast_to"))
    return &e;
  for (const auto &a : e.args)
    if (const spec::Expr *x = own_extent(a)) return x;
  return nullptr;
}

std::optional<spec::Loc> own_extent(const spec::Block &b) {
  for (const auto &st : b) {
    if (std::holds_alternative<spec::For>(st.kind)) return st.loc;
    // A DMA's refs index arrays by element (pages, rows), which no scale divides.
    if (std::holds_alternative<spec::Dma>(st.kind)) return st.loc;
    std::optional<spec::Loc> r;
    std::visit(
        [&](const auto &x) {
          using K = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<K, spec::Assign>) {
            for (const spec::Expr *e : {&x.target, &x.value})
              if (const spec::Expr *f = own_extent(*e); f && !r) r = f->loc;
          } else if constexpr (std::is_same_v<K, spec::Let>) {
            if (const spec::Expr *f = own_extent(x.value)) r = f->loc;
          } else if constexpr (std::is_same_v<K, spec::If>) {
            r = own_extent(x.then_body);
            if (!r) r = own_extent(x.else_body);
          }
        },
        st.kind);
    if (r) return r;
  }
  return std::nullopt;
}

} // namespace

ConcreteKernel concretize(const spec::KernelSpec &nested, const spec::Env &overrides, std::int64_t scale,
                          const std::optional<std::string> &target) {
  if (scale > 1 && spec::has_emit_pipeline(nested.body))
    bad(nested.loc, "--scale does not apply to a kernel with an emit_pipeline: shrink its params with --set");
  // A nested emit_pipeline runs per grid point of its flattened kernel
  // (spec/nested.hpp): the inner body per inner point, the rest at the
  // first and last.
  auto flat = std::make_shared<const spec::KernelSpec>(spec::flatten_nested(nested));
  const spec::KernelSpec &k = *flat;
  if (scale < 1) bad(k.loc, "--scale must be at least 1");
  if (scale > 1)
    if (auto l = own_extent(k.body))
      bad(*l, "--scale divides array and block dims, not the extents this body states (slices, ds, shapes, "
              "loops, integer indices): run it unscaled, or shrink its params with --set");
  if (scale > 1)
    if (auto l = own_extent(k.reference))
      bad(*l, "--scale divides array and block dims, not the extents this reference states (slices, shapes, "
              "integer indices): run it unscaled, or shrink its params with --set");
  const spec::Env params = bind_params(k.params, overrides);
  for (const auto &p : k.params)
    if (!params.count(p.name))
      bad(p.loc, "param '" + p.name + "' has no value; give one with --set " + p.name + "=...");
  spec::Binding b = spec::bind_kernel(k, params);
  if (b.error) bad(b.error->diag.loc, b.error->diag.message);
  ConcreteKernel c;
  static_cast<spec::BoundKernel &>(c) = std::move(*b.kernel);
  c.scale = scale;
  c.flattened = flat;
  c.gpu = spec::targets_gpu(k, target);
  if (c.gpu) c.cta = spec::cta_axes(k, c.grid.size());
  if (scale > 1)
    for (auto &o : c.operands) {
      for (std::size_t d = 0; d < o.shape.size(); ++d) {
        if (o.squeezed[d] || o.block[d] == 1) continue;
        if (o.bounded[d])
          bad(o.loc, "--scale " + std::to_string(scale) + " cannot scale the BoundedSlice dim " +
                         std::to_string(d) + " of '" + o.name + "': its index map gives element ranges");
        if (o.element[d])
          bad(o.loc, "--scale " + std::to_string(scale) + " cannot scale the Element dim " +
                         std::to_string(d) + " of '" + o.name + "': its index map gives element offsets");
        if (o.block[d] % scale != 0 || o.shape[d] % scale != 0)
          bad(o.loc, "--scale " + std::to_string(scale) + " does not divide dim " + std::to_string(d) +
                         " of '" + o.name + "' (array " + std::to_string(o.shape[d]) + ", block " +
                         std::to_string(o.block[d]) + ")");
        o.block[d] /= scale;
        o.shape[d] /= scale;
      }
      for (std::size_t d = 0; d < o.shape.size(); ++d)
        o.num_blocks[d] = o.shape[d] / o.block[d] + (o.shape[d] % o.block[d] != 0);
    }
  for (const auto &a : k.aliases) {
    const auto *in = c.operand(a.input);
    const auto *out = c.operand(a.output);
    if (!in || !out || in->shape != out->shape || in->dtype != out->dtype)
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
      op.shape[d] = Expr::integer(o->shape[d], op.shape[d].loc);
    if (op.block_shape)
      for (std::size_t d = 0; d < op.block_shape->size(); ++d)
        if ((*op.block_shape)[d])
          (*op.block_shape)[d] = Expr::integer(o->block[d], (*op.block_shape)[d]->loc);
  }
  return k;
}

Shape grid_point(const ConcreteKernel &c, std::int64_t linear) {
  return spec::grid_point(c.grid, c.cta, linear);
}

bool starts_cta(const ConcreteKernel &c, std::int64_t linear) {
  if (!c.gpu) return false;
  const std::int64_t n = spec::cta_steps(c.grid, c.cta);
  return n > 0 && linear % n == 0;
}

ArrayMap make_kernel_arrays(const ConcreteKernel &c, std::uint64_t seed, InputKind kind) {
  ArrayMap m;
  std::uint64_t k = 0;
  for (const auto &o : c.operands) {
    auto a = std::make_unique<HostArray>(o.name, o.dtype, o.shape);
    if (o.role == spec::Role::in)
      fill_inputs(*a, kind, seed * 1000003ull + ++k);
    else
      a->fill_poison();
    m[o.name] = std::move(a);
  }
  for (const auto &[out, in] : c.aliases)
    m[out]->copy_from(*m[in]);
  return m;
}

namespace {

/// The window extents of `op` at `point` (a BoundedSlice dim's ds size),
/// kept within [0, block]: a size past its bound is the rules' finding, and
/// the block buffer holds no more.
Shape window_extents(const ConcreteOperand &op, spec::BlockIndex b) {
  if (b.error) bad(b.error->diag.loc, b.error->diag.message);
  Shape out = std::move(*b.value);
  for (std::size_t d = 0; d < out.size() && d < op.block.size(); ++d)
    out[d] = std::clamp<std::int64_t>(out[d], 0, op.block[d]);
  return out;
}

/// A windowed operand's index map (and a BoundedSlice window's sizes),
/// evaluated point after point by one spec::BlockIndexer each: making one
/// scans the maps, which for a prefetch table's gather are a select over
/// the whole table.
struct Indexers {
  std::unique_ptr<spec::BlockIndexer> index, sizes;
  const ConcreteKernel &c;
  const ConcreteOperand &op;
  // Its map's dims that read a scalar prefetch array, with program_id(a)
  // named (spec::grid_calls_as_names): rewritten once, not per point (a
  // gather's map is a select over the whole table).
  std::vector<Expr> reading;
  Indexers(const ConcreteKernel &c, const ConcreteOperand &op)
      : index(std::make_unique<spec::BlockIndexer>(op, c.params, c.grid, c.grid.size())),
        sizes(op.has_bounded_dims()
                  ? std::make_unique<spec::BlockIndexer>(op, c.params, c.grid, c.grid.size(), &op.size)
                  : nullptr),
        c(c), op(op) {
    for (const auto &e : op.window)
      if (spec::has_elaborated_reads(e))
        reading.push_back(spec::grid_calls_as_names(e, c.grid.size(), c.grid));
  }
  // A read of a table outside it faults at the read, as in a body (Interp):
  // a clamp of the block index it gives (`max(ids[i + 1], 0)`) hides nothing.
  void check_reads(const Shape &point) const {
    spec::Env env = c.params;
    for (std::size_t a = 0; a < op.index_params.size() && a < point.size(); ++a)
      env[op.index_params[a]] = point[a];
    for (std::size_t a = 0; a < point.size(); ++a)
      env[spec::program_id_var(static_cast<std::int64_t>(a))] = point[a];
    for (const auto &e : reading) {
      const auto r = spec::prefetch_read_outside(e, [&](const Expr &x) { return spec::eval_int(x, env); });
      if (r)
        throw ExecError(ExecError::Kind::fault, r->read->loc,
                        spec::read_outside_fault(*r, point, "the index map of '" + op.name + "' reads"));
    }
  }
  Shape block(const Shape &point) {
    if (!reading.empty()) check_reads(point);
    spec::BlockIndex b = index->at(point);
    if (b.error) bad(b.error->diag.loc, b.error->diag.message);
    return std::move(*b.value);
  }
  Shape extents(const ConcreteOperand &op, const Shape &point) {
    return window_extents(op, sizes ? sizes->at(point) : spec::BlockIndex{op.block, std::nullopt});
  }
};

/// The array box a block covers, clipped to the array, and the matching box
/// of the block buffer. False when nothing of the block is inside the array.
/// `ext` is the window's extent per dim (the block but for BoundedSlice dims);
/// where it is short of the block the block is partial.
bool block_boxes(const ConcreteOperand &o, const Shape &bidx, const Shape &ext, Box &abox, Box &bbox,
                 bool &partial) {
  const std::size_t rank = o.shape.size();
  abox.lo.assign(rank, 0);
  abox.hi.assign(rank, 0);
  bbox.lo.clear();
  bbox.hi.clear();
  partial = false;
  bool any = true;
  for (std::size_t d = 0; d < rank; ++d) {
    // Saturating: a block index far outside the array stays outside it.
    const std::int64_t lo = o.window_start(d, bidx[d]);
    const std::int64_t hi = spec::saturating_add(lo, ext[d]);
    const std::int64_t clo = std::clamp<std::int64_t>(lo, 0, o.shape[d]);
    const std::int64_t chi = std::clamp<std::int64_t>(hi, 0, o.shape[d]);
    if (clo != lo || chi != hi || ext[d] != o.block[d]) partial = true;
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

// An output the oracle records stores into: `buffer` is what the body
// writes (its block buffer, or the array itself when not windowed), and at
// the current grid point block box `bbox` of it is array box `abox`.
struct WriteTrack {
  const ConcreteOperand *op = nullptr;
  HostArray *buffer = nullptr;
  const HostArray *array = nullptr;
  std::vector<std::uint8_t> *written = nullptr;
  Box abox, bbox;
  bool inside = false;

  void mark(const Box &view) {
    const std::size_t rank = op->shape.size();
    Shape lo(rank), hi(rank);
    std::size_t j = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      if (!op->windowed) {
        lo[d] = view.lo[d];
        hi[d] = view.hi[d];
      } else if (op->squeezed[d]) {
        lo[d] = abox.lo[d];
        hi[d] = abox.hi[d];
      } else {
        lo[d] = std::max(view.lo[j], bbox.lo[j]) - bbox.lo[j] + abox.lo[d];
        hi[d] = std::min(view.hi[j], bbox.hi[j]) - bbox.lo[j] + abox.lo[d];
        ++j;
      }
      if (hi[d] <= lo[d]) return;
    }
    if (rank == 0) {
      (*written)[0] = 1;
      return;
    }
    // One run along the last dim per index of the others.
    const Shape &strides = array->strides();
    const auto run = static_cast<std::size_t>(hi[rank - 1] - lo[rank - 1]);
    Shape idx = lo;
    for (;;) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < rank; ++d)
        off += idx[d] * strides[d];
      std::memset(written->data() + off, 1, run);
      std::size_t d = rank - 1;
      while (d > 0) {
        --d;
        if (++idx[d] < hi[d]) break;
        idx[d] = lo[d];
        if (d == 0) return;
      }
      if (rank == 1) return;
    }
  }
};

class OracleMemory : public Memory {
public:
  std::map<std::string, HostArray *> arrays;
  std::vector<WriteTrack> tracks;
  HostArray *array(const std::string &n) override {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : it->second;
  }
  void before_write(const View &v) override {
    for (auto &t : tracks)
      if (t.buffer == v.array && (t.inside || !t.op->windowed)) t.mark(v.box);
  }
  /// backend = triton: the input and output blocks (buffer, the box inside
  /// its array, whether any of it is) of this grid point, the first unmasked
  /// store past an output's end and the first unmasked load past an
  /// array's end: (operand, element in block coordinates).
  struct TritonBlock {
    std::size_t operand;
    const HostArray *buffer;
    Box bbox;
    bool inside;
    bool output;
  };
  std::vector<TritonBlock> triton_blocks;
  /// (operand, element in block coordinates, the statement)
  struct Stray {
    std::size_t operand;
    Shape at;
    spec::Loc loc;
    bool masked = false; ///< (a load) one a mask selects
  };
  std::optional<Stray> triton_stray, triton_stray_load;
  /// backend = triton: the last masked store into each output buffer (what
  /// it let through past the array is found after the body).
  std::map<const HostArray *, spec::Loc> triton_masked_store;
  void on_store(const View &v, bool masked, spec::Loc loc) override {
    if (masked && !triton_blocks.empty()) triton_masked_store[v.array] = loc;
    if (masked || triton_stray) return; // (a masked store: its kept poison shows what it left)
    if (auto at = outside(v, true)) triton_stray = Stray{at->first, at->second, loc};
  }
  bool follows_loads() const override { return !triton_blocks.empty(); }
  void on_load(const View &v, const std::vector<bool> *lanes, spec::Loc loc) override {
    if (triton_stray_load) return;
    if (!lanes) {
      if (auto at = outside(v, false)) triton_stray_load = Stray{at->first, at->second, loc};
      return;
    }
    // A masked load reads the lanes its mask selects: the first of them
    // outside the array, row-major.
    if (!outside(v, false)) return;
    const Shape vs = v.shape();
    Shape lane(vs.size(), 0);
    for (std::size_t f = 0; f < lanes->size(); ++f) {
      if ((*lanes)[f]) {
        View one = v;
        for (std::size_t k = 0; k < vs.size(); ++k) {
          const auto d = static_cast<std::size_t>(v.kept[k]);
          one.box.lo[d] = v.box.lo[d] + lane[k];
          one.box.hi[d] = one.box.lo[d] + 1;
        }
        if (auto at = outside(one, false)) {
          triton_stray_load = Stray{at->first, at->second, loc, true};
          return;
        }
      }
      for (std::size_t k = vs.size(); k-- > 0;)
        if (++lane[k] < vs[k])
          break;
        else
          lane[k] = 0;
    }
  }
  // The first element of `v` outside its Triton block's array: in the first
  // dim that leaves it, the others at the view's lowest element inside.
  std::optional<std::pair<std::size_t, Shape>> outside(const View &v, bool outputs_only) const {
    for (const auto &t : triton_blocks) {
      if (t.buffer != v.array || v.size() <= 0 || (outputs_only && !t.output)) continue;
      Shape at = v.box.lo;
      bool out = !t.inside;
      for (std::size_t d = 0; d < at.size() && !out; ++d) {
        if (v.box.lo[d] < t.bbox.lo[d]) {
          out = true;
        } else if (v.box.hi[d] > t.bbox.hi[d]) {
          at[d] = std::max(v.box.lo[d], t.bbox.hi[d]);
          out = true;
        }
      }
      if (out) return std::pair{t.operand, at};
    }
    return std::nullopt;
  }
};

// The first element of `blk` outside `bbox` (the part of a partial block
// past its array) that holds no poison, as an index into the block; none
// when all of it is poison. Filled with poison before the body ran, such an
// element is one the body stored a value into.
std::optional<Shape> stored_padding(HostArray &blk, const Box &bbox) {
  const Shape &size = blk.shape();
  const std::size_t rank = size.size();
  // The box within the block (a block wholly outside its array has an empty
  // one, placed anywhere: then every element is outside).
  Shape in_lo(rank), in_hi(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    in_lo[d] = std::clamp<std::int64_t>(bbox.lo[d], 0, size[d]);
    in_hi[d] = std::clamp<std::int64_t>(bbox.hi[d], in_lo[d], size[d]);
  }
  // Slab d: dims before d inside the box, dim d outside it, the rest whole.
  std::optional<std::int64_t> hit;
  for (std::size_t d = 0; d < rank && !hit; ++d)
    for (const auto &[from, to] : {std::pair{std::int64_t{0}, in_lo[d]}, std::pair{in_hi[d], size[d]}}) {
      View slab = View::whole(blk);
      for (std::size_t e = 0; e < rank; ++e) {
        slab.box.lo[e] = e < d ? in_lo[e] : e == d ? from : 0;
        slab.box.hi[e] = e < d ? in_hi[e] : e == d ? to : size[e];
      }
      if (slab.size() <= 0) continue;
      slab.for_each_run([&](std::int64_t off, std::int64_t n) {
        for (std::int64_t i = off; i < off + n && !hit; ++i)
          if (!blk.is_poison(i)) hit = i;
      });
      if (hit) break;
    }
  if (!hit) return std::nullopt;
  Shape idx(rank);
  for (std::size_t d = 0; d < rank; ++d)
    idx[d] = *hit / blk.strides()[d] % size[d];
  return idx;
}

View box_view(HostArray &a, const Box &b) {
  View v = View::whole(a);
  v.box.lo = b.lo;
  v.box.hi = b.hi;
  return v;
}

} // namespace

void run_oracle(const ConcreteKernel &c, ArrayMap &arrays, WrittenMap *written, int stand_in) {
  OracleMemory mem;
  std::vector<std::unique_ptr<HostArray>> blocks(c.operands.size());
  std::vector<int> track_of(c.operands.size(), -1);
  // An input in memory_space=any aliased to an output is the output's HBM
  // buffer (the lowering binds both to one): the body's copies through it
  // read and write the output's array. Its own array keeps the input data.
  std::map<std::string, std::string> hbm_of; // any-space input -> its output
  for (const auto &[out, in] : c.aliases)
    if (const auto *x = c.operand(in); x && !x->windowed) hbm_of[in] = out;
  for (std::size_t k = 0; k < c.operands.size(); ++k) {
    const auto &o = c.operands[k];
    HostArray *whole = arrays.at(o.name).get();
    if (auto it = hbm_of.find(o.name); it != hbm_of.end()) {
      mem.arrays[o.name] = arrays.at(it->second).get();
    } else if (o.windowed) {
      blocks[k] = std::make_unique<HostArray>(o.name, o.dtype, o.block_view_shape());
      if (stand_in) blocks[k]->poison_with_stand_in(stand_in);
      mem.arrays[o.name] = blocks[k].get();
    } else {
      mem.arrays[o.name] = whole;
    }
    if (stand_in && o.role == spec::Role::scratch) whole->poison_with_stand_in(stand_in);
    if (written && o.role == spec::Role::out) {
      auto &w = (*written)[o.name];
      w.assign(static_cast<std::size_t>(whole->size()), 0);
      WriteTrack t;
      t.op = &o;
      t.buffer = mem.arrays[o.name];
      t.array = whole;
      t.written = &w;
      track_of[k] = static_cast<int>(mem.tracks.size());
      mem.tracks.push_back(std::move(t));
    }
  }
  Interp interp(mem);
  const bool triton_backend = c.spec && spec::uses_triton(*c.spec);
  const bool triton = triton_backend && stand_in == 0;
  const std::int64_t n = c.num_points();
  // Each output's window at the point before: one that stays the same is the
  // same VMEM buffer, padding included (an (8, 128) block over an f32[8, 1]
  // output keeps what a step stored past the array for the next step to
  // read, as the pipeline's slot does). A Triton program's is its own.
  std::vector<std::optional<std::pair<Box, Box>>> resident(c.operands.size());
  std::vector<std::optional<Indexers>> indexers(c.operands.size());
  for (std::size_t k = 0; k < c.operands.size(); ++k)
    if (c.operands[k].windowed) indexers[k].emplace(c, c.operands[k]);
  for (std::int64_t lin = 0; lin < n; ++lin) {
    const Shape point = grid_point(c, lin);
    std::vector<Box> aboxes(c.operands.size()), bboxes(c.operands.size());
    std::vector<bool> inside(c.operands.size());
    for (std::size_t k = 0; k < c.operands.size(); ++k) {
      const auto &o = c.operands[k];
      if (!o.windowed) continue;
      bool partial = false;
      inside[k] = block_boxes(o, indexers[k]->block(point), indexers[k]->extents(o, point), aboxes[k],
                              bboxes[k], partial);
      HostArray &blk = *blocks[k];
      const bool stays = o.role == spec::Role::out && !triton_backend && !starts_cta(c, lin) && resident[k] &&
                         resident[k]->first.lo == aboxes[k].lo && resident[k]->first.hi == aboxes[k].hi &&
                         resident[k]->second.lo == bboxes[k].lo && resident[k]->second.hi == bboxes[k].hi;
      if (o.role == spec::Role::out && inside[k])
        resident[k] = std::pair(aboxes[k], bboxes[k]);
      else
        resident[k].reset();
      // Mosaic GPU fetches an input block by TMA, which fills the part past
      // the array with zeros (the lowering's copy_in_start zeros=True).
      if (!stays && partial && inside[k] && spec::tma_zero_fills(c.gpu, o.role, o.windowed))
        blk.fill_zero();
      else if (!stays && (partial || !inside[k]))
        blk.fill_poison();
      if (!stays && inside[k]) copy_view(box_view(*arrays.at(o.name), aboxes[k]), box_view(blk, bboxes[k]));
      if (track_of[k] >= 0) {
        WriteTrack &t = mem.tracks[static_cast<std::size_t>(track_of[k])];
        t.abox = aboxes[k];
        t.bbox = bboxes[k];
        t.inside = inside[k];
      }
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
    if (triton) {
      mem.triton_blocks.clear();
      mem.triton_stray.reset();
      mem.triton_stray_load.reset();
      mem.triton_masked_store.clear();
      for (std::size_t k = 0; k < c.operands.size(); ++k) {
        const auto &o = c.operands[k];
        if (o.windowed && (o.role == spec::Role::out || o.role == spec::Role::in) && blocks[k])
          mem.triton_blocks.push_back({k, blocks[k].get(), bboxes[k], inside[k], o.role == spec::Role::out});
      }
    }
    // The array element of a Triton block's element `at` (block coordinates).
    auto element_of = [&](std::size_t k, const Shape &at) {
      const auto &o = c.operands[k];
      Shape element;
      std::size_t j = 0;
      for (std::size_t d = 0; d < o.shape.size(); ++d)
        if (o.squeezed[d]) {
          element.push_back(aboxes[k].lo[d]);
        } else {
          element.push_back(aboxes[k].lo[d] + at[j] - bboxes[k].lo[j]);
          ++j;
        }
      return element;
    };
    interp.exec(c.body);
    // backend = triton: a program's block is a view of the array, and a
    // load with no mask reads every element of its ref, a masked one the
    // lanes its mask selects (what `check` reports as index-out-of-bounds).
    if (triton && mem.triton_stray_load) {
      const auto &[k, at, loc, masked] = *mem.triton_stray_load;
      const auto &o = c.operands[k];
      throw ExecError(
          ExecError::Kind::fault, loc,
          "grid point " + spec::format_tuple(point) +
              (masked ? " loads, masked, element " : " loads element ") +
              spec::format_tuple(element_of(k, at)) + " of '" + o.name + "', outside its shape " +
              spec::format_tuple(o.shape) +
              (masked ? ": its mask selects that lane, and a Triton program's block is a view of the "
                        "array, so the load reads memory past it; narrow the mask to the array's extent"
                      : ": a Triton program's block is a view of the array, so a load with no mask "
                        "reads memory past it; load with a mask that keeps it to the array's extent"));
    }
    // backend = triton: a program's store reaches the array itself, and one
    // past its end writes memory outside it (what `check` reports as
    // index-out-of-bounds), whatever it stores (`x + 1` of the input's
    // padding is poison too); a masked store keeps the padding's poison,
    // and what its mask let through is a value there.
    if (triton)
      for (std::size_t k = 0; k < c.operands.size(); ++k) {
        const auto &o = c.operands[k];
        if (!o.windowed || o.role != spec::Role::out || !blocks[k]) continue;
        const bool stray = mem.triton_stray && mem.triton_stray->operand == k;
        const auto at = stray ? std::optional(mem.triton_stray->at) : stored_padding(*blocks[k], bboxes[k]);
        if (!at) continue;
        // (At the store where it is known; a masked store's is found after
        // the body, in what the block holds: at the last masked store into
        // the block, else the operand's line.)
        const auto masked_at = mem.triton_masked_store.find(blocks[k].get());
        throw ExecError(ExecError::Kind::fault,
                        stray                                        ? mem.triton_stray->loc
                        : masked_at != mem.triton_masked_store.end() ? masked_at->second
                        : o.decl                                     ? o.decl->loc
                                                                     : c.spec->loc,
                        "grid point " + spec::format_tuple(point) + " stores element " +
                            spec::format_tuple(element_of(k, *at)) + " of '" + o.name +
                            "', outside its shape " + spec::format_tuple(o.shape) +
                            ": a Triton program's stores reach the array itself; mask the store to the "
                            "array's extent");
      }
    for (std::size_t k = 0; k < c.operands.size(); ++k) {
      const auto &o = c.operands[k];
      if (o.windowed && o.role == spec::Role::out && inside[k])
        copy_view(box_view(*blocks[k], bboxes[k]), box_view(*arrays.at(o.name), aboxes[k]));
    }
  }
}

} // namespace pipecheck::executor
