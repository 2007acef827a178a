#include "spec/nested.hpp"

#include "spec/eval.hpp"
#include "spec/print.hpp"

#include <map>
#include <set>

namespace pipecheck::spec {

namespace {

void names_in(const Expr &e, std::set<std::string> &out) {
  if (e.op == Op::Name || e.op == Op::Ref) out.insert(e.name);
  for (const auto &a : e.args)
    names_in(a, out);
}

void names_in(const Block &b, std::set<std::string> &out) {
  for (const auto &st : b)
    std::visit(
        [&](const auto &k) {
          using T = std::decay_t<decltype(k)>;
          if constexpr (std::is_same_v<T, Assign>) {
            names_in(k.target, out);
            names_in(k.value, out);
          } else if constexpr (std::is_same_v<T, Let>) {
            names_in(k.value, out);
          } else if constexpr (std::is_same_v<T, If>) {
            names_in(k.cond, out);
            names_in(k.then_body, out);
            names_in(k.else_body, out);
          } else if constexpr (std::is_same_v<T, For>) {
            names_in(k.lo, out);
            names_in(k.hi, out);
            names_in(k.body, out);
          } else if constexpr (std::is_same_v<T, Copy>) {
            names_in(k.src, out);
            names_in(k.dst, out);
          } else if constexpr (std::is_same_v<T, Wgmma>) {
            names_in(k.acc, out);
            names_in(k.a, out);
            names_in(k.b, out);
          } else if constexpr (std::is_same_v<T, WgmmaWait>) {
            names_in(k.n, out);
          } else if constexpr (std::is_same_v<T, Dma>) {
            if (!k.descriptor.empty()) out.insert(k.descriptor);
            for (const Expr *e : {&k.src, &k.dst, &k.sem, &k.n})
              names_in(*e, out);
          } else if constexpr (std::is_same_v<T, EmitPipeline>) {
            for (const auto &g : k.grid)
              names_in(g, out);
            names_in(k.body, out);
          }
        },
        st.kind);
}

// The refs `b` (with the blocks it holds) writes (ref_write).
void written_in(const Block &b, std::set<std::string> &out) {
  for_each_stmt(b, [&](const Stmt &s) {
    if (auto w = ref_write(s)) out.insert(w->ref);
  });
}

bool calls(const Expr &e, const char *fn) {
  if (e.op == Op::Call && e.name == fn) return true;
  for (const auto &a : e.args)
    if (calls(a, fn)) return true;
  return false;
}

// Every emit_pipeline of `b` not at the top level of a kernel body.
void misplaced(const Block &b, bool top, bool inner, std::vector<Diagnostic> &errs) {
  for (const auto &st : b) {
    if (const auto *e = std::get_if<EmitPipeline>(&st.kind)) {
      if (inner)
        errs.push_back({Severity::error,
                        st.loc,
                        "not supported: an emit_pipeline inside an emit_pipeline's body (pipecheck models "
                        "at most two levels: a kernel and one inner pipeline)",
                        {}});
      else if (!top)
        errs.push_back({Severity::error,
                        st.loc,
                        "not supported: an emit_pipeline under 'when' or 'for' (pipecheck accepts one at "
                        "the top level of the kernel body)",
                        {}});
      misplaced(e->body, false, true, errs);
    } else if (const auto *i = std::get_if<If>(&st.kind)) {
      misplaced(i->then_body, false, inner, errs);
      misplaced(i->else_body, false, inner, errs);
    } else if (const auto *f = std::get_if<For>(&st.kind)) {
      misplaced(f->body, false, inner, errs);
    }
  }
}

// `program_id(a)` / `num_programs(a)` with a literal axis moved to `a + by`.
Expr shift_axes(const Expr &e, std::int64_t by) {
  Expr out = e.map_args([&](const Expr &a) { return shift_axes(a, by); });
  if (out.op == Op::Call && (out.name == "program_id" || out.name == "num_programs") &&
      out.args.size() == 1 && out.args[0].op == Op::Int)
    out.args[0].int_value += by;
  return out;
}
Block shift_axes(const Block &b, std::int64_t by);
Stmt shift_axes(const Stmt &st, std::int64_t by) {
  Stmt out = st;
  std::visit(
      [&](auto &k) {
        using T = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<T, Assign>) {
          k.target = shift_axes(k.target, by);
          k.value = shift_axes(k.value, by);
        } else if constexpr (std::is_same_v<T, Let>) {
          k.value = shift_axes(k.value, by);
        } else if constexpr (std::is_same_v<T, If>) {
          k.cond = shift_axes(k.cond, by);
          k.then_body = shift_axes(k.then_body, by);
          k.else_body = shift_axes(k.else_body, by);
        } else if constexpr (std::is_same_v<T, For>) {
          k.lo = shift_axes(k.lo, by);
          k.hi = shift_axes(k.hi, by);
          k.body = shift_axes(k.body, by);
        } else if constexpr (std::is_same_v<T, Dma>) {
          for (Expr *e : {&k.src, &k.dst, &k.sem, &k.n})
            *e = shift_axes(*e, by);
        }
      },
      out.kind);
  return out;
}
Block shift_axes(const Block &b, std::int64_t by) {
  Block out;
  for (const auto &st : b)
    out.push_back(shift_axes(st, by));
  return out;
}

// `program_id(a)` with a literal a < n replaced by names[a].
Expr grid_calls_to(const Expr &e, const std::vector<std::string> &names) {
  if (e.op == Op::Call && e.name == "program_id" && e.args.size() == 1 && e.args[0].op == Op::Int &&
      e.args[0].int_value >= 0 && e.args[0].int_value < static_cast<std::int64_t>(names.size()))
    return Expr::var(names[static_cast<std::size_t>(e.args[0].int_value)], e.loc);
  return e.map_args([&](const Expr &a) { return grid_calls_to(a, names); });
}

} // namespace

bool has_emit_pipeline(const Block &b) {
  for (const auto &st : b) {
    if (std::holds_alternative<EmitPipeline>(st.kind)) return true;
    if (const auto *i = std::get_if<If>(&st.kind))
      if (has_emit_pipeline(i->then_body) || has_emit_pipeline(i->else_body)) return true;
    if (const auto *f = std::get_if<For>(&st.kind))
      if (has_emit_pipeline(f->body)) return true;
  }
  return false;
}

int emit_pipeline_index(const KernelSpec &k) {
  for (std::size_t i = 0; i < k.body.size(); ++i)
    if (std::holds_alternative<EmitPipeline>(k.body[i].kind)) return static_cast<int>(i);
  return -1;
}

std::vector<Diagnostic> nested_errors(const KernelSpec &k) {
  std::vector<Diagnostic> errs;
  if (!has_emit_pipeline(k.body)) {
    if (has_emit_pipeline(k.reference))
      errs.push_back({Severity::error, k.reference_loc, "an emit_pipeline has no place in a reference", {}});
    return errs;
  }
  auto err = [&](Loc l, std::string m) { errs.push_back({Severity::error, l, std::move(m), {}}); };
  misplaced(k.body, true, false, errs);
  const int at = emit_pipeline_index(k);
  for (std::size_t i = 0; i < k.body.size(); ++i)
    if (static_cast<int>(i) != at && std::holds_alternative<EmitPipeline>(k.body[i].kind))
      err(k.body[i].loc, "not supported: a second emit_pipeline in one kernel body (pipecheck accepts one)");
  if (!errs.empty() || at < 0) return errs;
  const Stmt &st = k.body[static_cast<std::size_t>(at)];
  const auto &e = std::get<EmitPipeline>(st.kind);
  if (const Setting *t = k.setting("target");
      t && t->value.op == Op::Name && (t->value.name == "h100" || t->value.name == "h200"))
    err(st.loc,
        "not supported: emit_pipeline nested in a kernel body needs a TPU target (pltpu.emit_pipeline); "
        "this kernel's target is " +
            t->value.name);
  if (!k.prefetches.empty()) err(st.loc, "not supported: an emit_pipeline in a kernel with scalar prefetch");
  if (e.grid.empty()) err(st.loc, "the emit_pipeline's grid has no axis");
  if (e.grid.size() > kMaxInnerGridRank)
    err(e.grid[kMaxInnerGridRank].loc, "not supported: an emit_pipeline grid of rank " +
                                           std::to_string(e.grid.size()) + " (at most " +
                                           std::to_string(kMaxInnerGridRank) + ")");
  // The body's names bound before the emit_pipeline: an extent from one of
  // them is a run-time grid; any other name is no name at all.
  std::set<std::string> locals;
  for (int i = 0; i < at; ++i)
    for_each_stmt(k.body[static_cast<std::size_t>(i)], [&](const Stmt &b) {
      if (const auto *l = std::get_if<Let>(&b.kind)) locals.insert(l->name);
      if (const auto *f = std::get_if<For>(&b.kind)) locals.insert(f->var);
    });
  for (const auto &g : e.grid) {
    std::set<std::string> names;
    names_in(g, names);
    bool bad = calls(g, "program_id") || calls(g, "num_programs");
    bool unknown = false;
    for (const auto &n : names)
      if (!k.param(n)) {
        if (!locals.count(n)) {
          err(g.loc,
              "unknown name '" + n + "' in the emit_pipeline's grid (its extents are params and constants)");
          unknown = true;
        }
        bad = true;
      }
    if (bad && !unknown)
      err(g.loc, "not supported: an emit_pipeline grid extent that is not made of params and constants ('" +
                     print(g) + "')");
  }
  std::set<std::string> staged;
  for (const auto &s : e.specs) {
    const Operand *o = k.operand(s.name);
    if (!o) {
      err(s.loc, "'" + s.name + "' is no operand of kernel '" + k.name + "'");
      continue;
    }
    if (!staged.insert(s.name).second) err(s.loc, "'" + s.name + "' has two specs in this emit_pipeline");
    if (o->role != s.role)
      err(s.loc, "'" + s.name + "' is an '" + to_string(o->role) + "' operand of the kernel, not an '" +
                     to_string(s.role) + "'");
    else if (o->memory_space != MemorySpace::any && o->memory_space != MemorySpace::hbm)
      err(s.loc, "the emit_pipeline stages '" + s.name +
                     "' from HBM, but it has a window of its own: declare it 'memory_space=any'");
    if (s.memory_space != MemorySpace::vmem)
      err(s.loc, "an emit_pipeline spec stages its block into VMEM: it takes no memory_space");
  }
  // A local bound before the emit_pipeline is evaluated at every inner grid
  // point in the flattened kernel (check's rules, run's oracle), not once as
  // in Pallas: one that reads what the inner body, or a statement after it
  // before the emit_pipeline, writes would take another value there.
  {
    std::set<std::string> inner_writes;
    written_in(e.body, inner_writes);
    std::map<std::string, std::set<std::string>> reads; // a local's refs and names, through earlier locals
    for (int i = 0; i < at; ++i) {
      const Stmt &s = k.body[static_cast<std::size_t>(i)];
      const auto *l = std::get_if<Let>(&s.kind);
      if (!l) continue;
      std::set<std::string> r;
      names_in(l->value, r);
      for (const auto &n : std::set<std::string>(r))
        if (auto it = reads.find(n); it != reads.end()) r.insert(it->second.begin(), it->second.end());
      std::string hit, by;
      for (const auto &n : r)
        if (inner_writes.count(n)) {
          hit = n;
          by = "the emit_pipeline's inner body writes";
          break;
        }
      for (int j = i + 1; j < at && hit.empty(); ++j) {
        std::set<std::string> w;
        written_in(Block{k.body[static_cast<std::size_t>(j)]}, w);
        for (const auto &n : r)
          if (w.count(n)) {
            hit = n;
            by = "the statement at line " + std::to_string(k.body[static_cast<std::size_t>(j)].loc.line) +
                 " writes before the emit_pipeline";
            break;
          }
      }
      if (!hit.empty())
        err(s.loc, "not supported: '" + l->name + "' reads '" + hit + "', which " + by +
                       ": pipecheck evaluates a local bound before an emit_pipeline at every inner "
                       "grid point, not once (store the value into a scratch instead, or bind it "
                       "after the emit_pipeline)");
      reads[l->name] = std::move(r);
    }
  }
  for (std::size_t i = 0; i < k.body.size(); ++i) {
    if (static_cast<int>(i) == at) continue;
    std::set<std::string> names;
    names_in(Block{k.body[i]}, names);
    for (const auto &n : staged)
      if (names.count(n))
        err(k.body[i].loc,
            "not supported: '" + n +
                "' is staged by the emit_pipeline; the body's other statements may not use it");
  }
  return errs;
}

KernelSpec flatten_nested(const KernelSpec &k) {
  const int at = emit_pipeline_index(k);
  if (at < 0) return k;
  const Stmt &st = k.body[static_cast<std::size_t>(at)];
  const auto &e = std::get<EmitPipeline>(st.kind);
  KernelSpec f = k;
  const std::size_t r = k.grid ? k.grid->size() : 0, q = e.grid.size();
  std::vector<Expr> grid = k.grid ? *k.grid : std::vector<Expr>{};
  grid.insert(grid.end(), e.grid.begin(), e.grid.end());
  f.grid = grid;
  if (!k.grid) f.grid_loc = st.loc;
  if (k.dimension_semantics) {
    f.dimension_semantics->insert(f.dimension_semantics->end(), q, DimSemantics::arbitrary);
  }
  // Names no index map or local of the kernel uses.
  std::set<std::string> taken;
  names_in(k.body, taken);
  for (const auto &p : k.params)
    taken.insert(p.name);
  auto fresh = [&](std::string n) {
    while (taken.count(n))
      n += "_";
    taken.insert(n);
    return n;
  };
  std::vector<std::string> outer_idx, inner_idx;
  for (std::size_t a = 0; a < r; ++a)
    outer_idx.push_back(fresh("outer" + std::to_string(a)));
  for (std::size_t a = 0; a < q; ++a)
    inner_idx.push_back(fresh("inner" + std::to_string(a)));
  // Integer locals bound before the emit_pipeline, as expressions of the
  // outer grid indices (an inner map reads them as closures do).
  std::map<std::string, Expr> locals;
  for (int i = 0; i < at; ++i)
    if (const auto *l = std::get_if<Let>(&k.body[static_cast<std::size_t>(i)].kind))
      locals[l->name] = grid_calls_to(substitute(l->value, locals), outer_idx);
  for (auto &o : f.operands) {
    const Operand *spec = nullptr;
    for (const auto &s : e.specs)
      if (s.name == o.name) spec = &s;
    if (!spec) {
      if (o.index_map)
        for (const auto &n : inner_idx)
          o.index_map->params.push_back(fresh(n));
      continue;
    }
    Operand n = *spec;
    n.dtype = o.dtype;
    n.shape = o.shape;
    n.memory_space = MemorySpace::vmem;
    n.emit_pipeline = true;
    if (n.index_map) {
      IndexMap m;
      m.params = outer_idx;
      m.params.insert(m.params.end(), spec->index_map->params.begin(), spec->index_map->params.end());
      // program_id(a) in an inner map is the inner axis a.
      std::vector<std::string> inner_names;
      for (std::size_t a = 0; a < q; ++a)
        inner_names.push_back(a < spec->index_map->params.size() ? spec->index_map->params[a] : inner_idx[a]);
      for (const auto &res : spec->index_map->results)
        m.results.push_back(grid_calls_to(substitute(res, locals), inner_names));
      n.index_map = std::move(m);
    }
    o = std::move(n);
  }
  // The body: before at the first inner point, the inner body at every
  // one, after at the last.
  auto at_corner = [&](bool last) {
    Expr c;
    for (std::size_t a = 0; a < q; ++a) {
      Expr pid = Expr::call("program_id", {Expr::integer(static_cast<std::int64_t>(r + a), st.loc)}, st.loc);
      Expr v = last ? Expr::binary(Op::Sub, e.grid[a], Expr::integer(1, st.loc), st.loc)
                    : Expr::integer(0, st.loc);
      Expr eq = Expr::binary(Op::Eq, pid, v, st.loc);
      c = a == 0 ? eq : Expr::binary(Op::And, c, eq, st.loc);
    }
    return c;
  };
  Block body;
  auto guarded = [&](const Stmt &s) {
    // (A local, or a DMA descriptor, which has no effect: both stay visible
    // to what follows, the inner body and the statements after it.)
    const auto *d = std::get_if<Dma>(&s.kind);
    if (std::holds_alternative<Let>(s.kind) || (d && d->action == DmaAction::bind)) {
      body.push_back(s);
      return;
    }
    Stmt w;
    w.loc = s.loc;
    w.kind = If{true, at_corner(false), {s}, {}};
    body.push_back(std::move(w));
  };
  for (int i = 0; i < at; ++i)
    guarded(k.body[static_cast<std::size_t>(i)]);
  for (const auto &s : shift_axes(e.body, static_cast<std::int64_t>(r)))
    body.push_back(s);
  // The statements after run as one block at the last inner point, so that
  // a local one of them binds is visible to the next.
  if (static_cast<std::size_t>(at) + 1 < k.body.size()) {
    Stmt w;
    w.loc = k.body[static_cast<std::size_t>(at) + 1].loc;
    w.kind = If{true, at_corner(true), Block(k.body.begin() + at + 1, k.body.end()), {}};
    body.push_back(std::move(w));
  }
  f.body = std::move(body);
  return f;
}

} // namespace pipecheck::spec
