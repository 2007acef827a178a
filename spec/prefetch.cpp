#include "spec/prefetch.hpp"

#include "spec/bind.hpp"
#include "spec/print.hpp"
#include "spec/targets.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace pipecheck::spec {

__extension__ typedef __int128 i128;

bool PrefetchSpace::all_given() const {
  return std::all_of(arrays.begin(), arrays.end(),
                     [](const PrefetchArray &a) { return a.given.has_value(); });
}

const PrefetchArray *PrefetchSpace::array(const std::string &name) const {
  for (const auto &a : arrays)
    if (a.name == name) return &a;
  return nullptr;
}

std::string prefetch_element(const std::string &name, std::int64_t k) {
  return name + "[" + std::to_string(k) + "]";
}

bool is_prefetch_element(const std::string &name) { return name.find('[') != std::string::npos; }

std::optional<std::string> prefetch_violation(const PrefetchArray &a, const std::vector<std::int64_t> &values,
                                              std::optional<std::size_t> *index) {
  auto at = [&](std::size_t i, std::string m) {
    if (index) *index = i;
    return std::optional<std::string>(std::move(m));
  };
  if (static_cast<std::int64_t>(values.size()) != a.length)
    return at(values.size(), "'" + a.name + "' has " + std::to_string(a.length) + " elements but " +
                                 std::to_string(values.size()) + " are given");
  // An element as the body subscripts it: `bm[0, 0, 1]` of an i8[1, 4, 4] table.
  auto named = [&](std::size_t i) {
    const auto flat = static_cast<std::int64_t>(i);
    const auto sub = a.dims.empty() ? std::vector<std::int64_t>{flat} : grid_point(a.dims, {}, flat);
    std::string out = a.name + "[";
    for (std::size_t d = 0; d < sub.size(); ++d)
      out += (d ? ", " : "") + std::to_string(sub[d]);
    return out + "]";
  };
  i128 sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t v = values[i];
    const std::string elem = named(i) + " = " + std::to_string(v);
    if (v < -2147483648LL || v > 2147483647LL) return at(i, elem + " does not fit i32");
    if ((a.lo && v < *a.lo) || (a.hi && v >= *a.hi))
      return at(i, elem + " is outside the stated range [" + std::to_string(a.lo.value_or(0)) + ", " +
                       std::to_string(a.hi.value_or(0)) + ")");
    if (a.nondecreasing && i > 0 && v < values[i - 1])
      return at(i, elem + " is smaller than " + named(i - 1) + " = " + std::to_string(values[i - 1]) +
                       ", but '" + a.name + "' is stated nondecreasing");
    sum += v;
  }
  if (a.sum && sum != *a.sum)
    return at(0, "the elements of '" + a.name + "' sum to " + std::to_string(static_cast<std::int64_t>(sum)) +
                     ", but the stated sum is " + std::to_string(*a.sum));
  return std::nullopt;
}

std::optional<std::string> prefetch_shape_mismatch(const PrefetchArray &a,
                                                   const std::vector<std::int64_t> &shape) {
  // A 1-D array of another length is left to prefetch_violation's count.
  if (shape.empty() || shape == a.dims || (shape.size() == 1 && a.dims.size() == 1)) return std::nullopt;
  std::string has = "("; // as NumPy writes a shape
  for (std::size_t d = 0; d < shape.size(); ++d)
    has += (d ? ", " : "") + std::to_string(shape[d]);
  return "holds an array of shape " + has + (shape.size() == 1 ? ",)" : ")") + ", but '" + a.name +
         "' is declared " + dims_string(a.dims);
}

namespace {
std::pair<i128, i128> feasible(const PrefetchArray &a, std::int64_t lo, std::int64_t hi, std::size_t i,
                               std::optional<std::int64_t> prev, i128 partial);
} // namespace

PrefetchSpace prefetch_space(const KernelSpec &k, const Env &params) {
  PrefetchSpace s;
  auto value = [&](const Expr &e, const std::string &what) -> std::optional<std::int64_t> {
    Evaluation v = evaluate(e, params);
    if (v.value) return v.value;
    if (auto d = arithmetic_error(e, params, what)) {
      s.errors.push_back(std::move(*d));
    } else if (s.unknown.empty()) {
      s.unknown = what + " '" + print(e) + "' is not a constant (bind its params with --set)";
    }
    return std::nullopt;
  };
  for (const auto &p : k.prefetches) {
    PrefetchArray a;
    a.name = p.name;
    a.loc = p.loc;
    a.nondecreasing = p.nondecreasing;
    // Rank > 1: each extent at least 1 (the length, their product, is then bounded below).
    std::vector<std::int64_t> dims;
    for (const auto &d : p.dims) {
      auto v = value(d, "an extent of prefetch '" + p.name + "'");
      if (!v) break;
      if (*v < 1) {
        s.errors.push_back(
            {Severity::error,
             d.loc,
             "an extent of prefetch '" + p.name + "' must be at least 1, got " + std::to_string(*v),
             {}});
        break;
      }
      dims.push_back(*v);
    }
    if (dims.size() != p.dims.size()) continue;
    auto n = value(p.length, "the length of prefetch '" + p.name + "'");
    if (!n) continue;
    // SMEM holds at most a few hundred KiB; 65536 i32 are 256 KiB.
    if (*n < 1 || *n > (1 << 16)) {
      s.errors.push_back(
          {Severity::error,
           p.length.loc,
           "the length of prefetch '" + p.name + "' must lie in [1, 65536], got " + std::to_string(*n),
           {}});
      continue;
    }
    a.length = *n;
    a.dims = p.dims.empty() ? std::vector<std::int64_t>{*n} : dims;
    if (auto why = prefetch_shape_mismatch(a, p.file_shape)) {
      s.errors.push_back({Severity::error, p.file_loc, "\"" + p.file.value_or("") + "\" " + *why, {}});
      continue;
    }
    if (p.lo) a.lo = value(*p.lo, "the range of prefetch '" + p.name + "'");
    if (p.hi) a.hi = value(*p.hi, "the range of prefetch '" + p.name + "'");
    if (p.sum) a.sum = value(*p.sum, "the sum of prefetch '" + p.name + "'");
    if ((p.lo && !a.lo) || (p.hi && !a.hi) || (p.sum && !a.sum)) continue;
    // What the dtype holds (an i8 table holds no 130: JAX would wrap it to -126).
    const auto [dmin, dmax] = exact_int_range(p.dtype);
    const std::string holds = "what " + std::string(to_string(p.dtype)) + " holds (" + std::to_string(dmin) +
                              ".." + std::to_string(dmax) + ")";
    if ((a.lo && *a.lo < dmin) || (a.hi && *a.hi - 1 > dmax)) {
      s.errors.push_back({Severity::error,
                          a.lo && *a.lo < dmin ? p.lo->loc : p.hi->loc,
                          "the range [" + (a.lo ? std::to_string(*a.lo) : std::string("?")) + ", " +
                              (a.hi ? std::to_string(*a.hi) : std::string("?")) + ") of prefetch '" + p.name +
                              "' reaches past " + holds,
                          {}});
      continue;
    }
    if (a.lo && a.hi && *a.lo >= *a.hi) {
      s.errors.push_back({Severity::error,
                          p.lo->loc,
                          "the range [" + std::to_string(*a.lo) + ", " + std::to_string(*a.hi) +
                              ") of prefetch '" + p.name + "' is empty",
                          {}});
      continue;
    }
    // Open contents whose sum no elements in their range (or the dtype's)
    // reach: no kernel call can pass such a table.
    if (!p.values && a.sum && a.length > 0) {
      const std::int64_t lo = a.lo.value_or(dmin), hi = a.hi.value_or(dmax + 1);
      if (const auto [vlo, vhi] = feasible(a, lo, hi, 0, std::nullopt, 0); vlo > vhi) {
        s.errors.push_back(
            {Severity::error,
             p.sum->loc,
             "no contents of prefetch '" + p.name + "' satisfy its constraints: " + std::to_string(a.length) +
                 " elements in [" + std::to_string(lo) + ", " + std::to_string(hi) + ")" +
                 (a.nondecreasing ? ", nondecreasing," : "") + " cannot sum to " + std::to_string(*a.sum),
             {}});
        continue;
      }
    }
    if (p.values) {
      std::vector<std::int64_t> vs;
      bool ok = true;
      for (const auto &e : *p.values) {
        auto v = value(e, "an element of prefetch '" + p.name + "'");
        ok = ok && v.has_value();
        if (v) vs.push_back(*v);
      }
      if (!ok) continue;
      bool fits = true;
      for (std::size_t i = 0; i < vs.size() && fits; ++i)
        if (vs[i] < dmin || vs[i] > dmax) {
          fits = false;
          s.errors.push_back(
              {Severity::error,
               p.file ? p.file_loc : (*p.values)[i].loc,
               p.name + "[" + std::to_string(i) + "] = " + std::to_string(vs[i]) + " is outside " + holds,
               {}});
        }
      if (!fits) continue;
      std::optional<std::size_t> bad;
      if (auto why = prefetch_violation(a, vs, &bad)) {
        Loc l = p.loc;
        if (bad && *bad < p.values->size() && !a.sum) l = (*p.values)[*bad].loc;
        if (static_cast<std::int64_t>(vs.size()) != a.length) l = p.length.loc;
        if (p.file) {
          l = p.file_loc;
          *why = "the contents from \"" + *p.file + "\" do not fit the declaration: " + *why;
        }
        s.errors.push_back({Severity::error, l, *why, {}});
        continue;
      }
      a.given = std::move(vs);
    }
    s.arrays.push_back(std::move(a));
  }
  return s;
}

namespace {

constexpr std::int64_t kMaxWalkedLength = 4096;

// The range an open array's elements are drawn from when run picks them.
std::pair<std::int64_t, std::int64_t> pick_range(const PrefetchArray &a) {
  std::int64_t lo = a.lo.value_or(0);
  std::int64_t hi = a.hi.value_or(lo + 16);
  // Without a range, one wide enough for the sum (its mean's floor and ceiling).
  if (!a.lo && !a.hi && a.sum && a.length > 0) {
    const i128 n = a.length, sum = *a.sum;
    const i128 down = sum >= 0 ? sum / n : -((-sum + n - 1) / n);
    lo = static_cast<std::int64_t>(std::min<i128>(lo, down));
    hi = static_cast<std::int64_t>(std::max<i128>(hi, down + 2));
  }
  return {lo, hi};
}

// The values element `i` may take given the prefix (`prev`, `partial`), so
// that the rest can still be completed: [vlo, vhi], empty when vlo > vhi.
std::pair<i128, i128> feasible(const PrefetchArray &a, std::int64_t lo, std::int64_t hi, std::size_t i,
                               std::optional<std::int64_t> prev, i128 partial) {
  i128 vlo = lo, vhi = hi - 1;
  if (a.nondecreasing && prev) vlo = std::max<i128>(vlo, *prev);
  if (a.sum) {
    const i128 rest = static_cast<i128>(a.length) - static_cast<i128>(i) - 1;
    const i128 need = static_cast<i128>(*a.sum) - partial; // v + the rest's sum
    // The rest lies in [rest*lo', rest*(hi-1)] with lo' = v when nondecreasing.
    vlo = std::max(vlo, need - rest * (hi - 1));
    if (a.nondecreasing) {
      const i128 d = rest + 1; // v * d <= need, rounded toward negative infinity
      vhi = std::min(vhi, need >= 0 ? need / d : -((-need + d - 1) / d));
    } else
      vhi = std::min(vhi, need - rest * lo);
  }
  return {vlo, vhi};
}

} // namespace

namespace {
// Each contents so far, once per array value: false past `limit` contents.
bool extend(std::vector<PrefetchContents> &out, const std::string &name,
            const std::vector<std::vector<std::int64_t>> &values, std::size_t limit) {
  std::vector<PrefetchContents> next;
  for (const auto &c : out)
    for (const auto &v : values) {
      if (next.size() >= limit) return false;
      PrefetchContents d = c;
      d[name] = v;
      next.push_back(std::move(d));
    }
  out = std::move(next);
  return true;
}
} // namespace

std::optional<std::vector<PrefetchContents>> enumerate_prefetch(const PrefetchSpace &s, std::size_t limit) {
  std::vector<PrefetchContents> out{{}};
  for (const auto &a : s.arrays) {
    if (a.given) continue;
    // The walks below recurse once per element.
    if (!a.lo || !a.hi || a.length > kMaxWalkedLength) return std::nullopt;
    std::vector<std::vector<std::int64_t>> all;
    std::vector<std::int64_t> cur;
    bool over = false;
    std::function<void(i128)> rec = [&](i128 partial) {
      if (over) return;
      if (static_cast<std::int64_t>(cur.size()) == a.length) {
        if (all.size() >= limit) {
          over = true;
          return;
        }
        all.push_back(cur);
        return;
      }
      std::optional<std::int64_t> prev;
      if (!cur.empty()) prev = cur.back();
      auto [vlo, vhi] = feasible(a, *a.lo, *a.hi, cur.size(), prev, partial);
      for (i128 v = vlo; v <= vhi && !over; ++v) {
        cur.push_back(static_cast<std::int64_t>(v));
        rec(partial + v);
        cur.pop_back();
      }
    };
    rec(0);
    if (over || !extend(out, a.name, all, limit)) return std::nullopt;
  }
  return out;
}

std::optional<std::vector<PrefetchContents>> prefetch_patterns(const PrefetchSpace &s, std::size_t limit) {
  std::vector<PrefetchContents> out{{}};
  for (const auto &a : s.arrays) {
    if (a.given) continue;
    if (!a.lo || !a.hi || a.sum || a.length > kMaxWalkedLength) return std::nullopt;
    const std::int64_t classes = *a.hi - *a.lo;
    std::vector<std::vector<std::int64_t>> all;
    std::vector<std::int64_t> cur;
    bool over = false;
    // Restricted growth strings: position k joins a class seen before or opens
    // the next; nondecreasing contents only rejoin the last class.
    std::function<void(std::int64_t)> rec = [&](std::int64_t used) {
      if (over) return;
      if (static_cast<std::int64_t>(cur.size()) == a.length) {
        if (all.size() >= limit) {
          over = true;
          return;
        }
        all.emplace_back();
        for (auto c : cur)
          all.back().push_back(*a.lo + c);
        return;
      }
      const std::int64_t first = a.nondecreasing && used > 0 ? used - 1 : 0;
      for (std::int64_t c = first; c <= used && c < classes && !over; ++c) {
        cur.push_back(c);
        rec(std::max(used, c + 1));
        cur.pop_back();
      }
    };
    rec(0);
    if (over || !extend(out, a.name, all, limit)) return std::nullopt;
  }
  return out;
}

namespace {

bool reads_any(const Expr &e, const std::set<std::string> &names) {
  if (e.op == Op::Ref && names.count(e.name)) return true;
  for (const auto &a : e.args)
    if (reads_any(a, names)) return true;
  return false;
}

bool block_reads_any(const Block &b, const std::set<std::string> &names) {
  for (const auto &s : b) {
    if (auto *a = std::get_if<Assign>(&s.kind)) {
      if (reads_any(a->target, names) || reads_any(a->value, names)) return true;
    } else if (auto *l = std::get_if<Let>(&s.kind)) {
      if (reads_any(l->value, names)) return true;
    } else if (auto *f = std::get_if<If>(&s.kind)) {
      if (reads_any(f->cond, names) || block_reads_any(f->then_body, names) ||
          block_reads_any(f->else_body, names))
        return true;
    } else if (auto *f = std::get_if<For>(&s.kind)) {
      if (reads_any(f->lo, names) || reads_any(f->hi, names) || block_reads_any(f->body, names)) return true;
    } else {
      return true; // a statement of another kind: not known not to read them
    }
  }
  return false;
}

} // namespace

bool prefetch_equality_only(const KernelSpec &raw, const Env &params) {
  const KernelSpec k = flatten_prefetch_reads(raw); // reads of rank > 1 as the element they are
  std::set<std::string> arrays;
  for (const auto &p : k.prefetches)
    arrays.insert(p.name);
  if (block_reads_any(k.body, arrays)) return false;
  const std::size_t grid_rank = k.grid ? k.grid->size() : 0;
  for (const auto &o : k.operands) {
    if (!o.index_map || o.index_map->params.size() <= grid_rank) continue;
    std::set<std::string> names(o.index_map->params.begin() + static_cast<std::ptrdiff_t>(grid_rank),
                                o.index_map->params.end());
    bool reads = false;
    for (std::size_t d = 0; d < o.index_map->results.size(); ++d) {
      const Expr &r = o.index_map->results[d];
      if (!reads_any(r, names)) continue;
      reads = true;
      if (r.op != Op::Ref || r.args.size() != 1 || reads_any(r.args[0], names)) return false;
      if (!o.block_shape || d >= o.block_shape->size() || d >= o.shape.size()) return false;
      auto n = eval_int(o.shape[d], params);
      auto b = (*o.block_shape)[d] ? eval_int(*(*o.block_shape)[d], params) : std::optional<std::int64_t>(1);
      if (!n || !b || *b <= 0 || *n % *b != 0) return false;
    }
    if (!reads) continue;
    if (o.role != Role::in && o.role != Role::out) return false;
    for (const auto &a : k.aliases)
      if (a.input == o.name || a.output == o.name) return false;
  }
  return true;
}

namespace {

// Which names an expression reads: refs (`ids[e]`) and plain names.
bool reads_name(const Expr &e, const std::set<std::string> &names) {
  if ((e.op == Op::Ref || e.op == Op::Name) && names.count(e.name)) return true;
  for (const auto &a : e.args)
    if (reads_name(a, names)) return true;
  return false;
}

// The address-only analysis of prefetch_address_only: `tainted` holds the
// arrays and every integer local computed from one (flow-insensitive, so a
// local is tainted wherever its name is bound); `ok` turns false at any read
// of a tainted name outside a DMA source's subscripts or a gather's index.
struct AddressUse {
  const KernelSpec &k;
  std::set<std::string> tainted;
  std::set<std::string> sources; // operands a DMA may read from with tainted subscripts
  bool ok = true;

  bool unaliased_in(const std::string &name) const {
    const Operand *o = k.operand(name);
    if (!o || o->role != Role::in) return false;
    for (const auto &a : k.aliases)
      if (a.input == name || a.output == name) return false;
    return true;
  }

  bool eligible_source(const std::string &name) const {
    return unaliased_in(name) && k.operand(name)->memory_space == MemorySpace::any;
  }

  // A Triton kernel's load of an unaliased input is a gather when a table
  // picks its index (upstream GPU paged attention's
  // `k_pages_ref[block_tables]`): a block is a view of the array, which no
  // program stores into, so whichever element a program reads is the
  // input's. (Under Mosaic a load reads a VMEM buffer, which the lowered
  // program's copies fill: there the index matters.)
  bool gather_source(const std::string &name) const { return uses_triton(k) && unaliased_in(name); }

  // Whether `e` reads a tainted name other than as the index (or the start
  // of a `ds`, never its size) of a gather.
  bool reads_outside_gathers(const Expr &e) const {
    if ((e.op == Op::Ref || e.op == Op::Name) && tainted.count(e.name)) return true;
    if (e.op == Op::Ref && gather_source(e.name))
      return std::any_of(e.args.begin(), e.args.end(), [&](const Expr &a) {
        if (a.op == Op::Slice) return reads_name(a, tainted);
        if (a.op == Op::Call && a.name == "ds") return a.args.size() != 2 || reads_name(a.args[1], tainted);
        return false;
      });
    return std::any_of(e.args.begin(), e.args.end(), [&](const Expr &a) { return reads_outside_gathers(a); });
  }

  // Lets that read a tainted name (but as a gather's index: the value
  // loaded is the input's data) taint theirs, until nothing changes.
  bool spread(const Block &b) {
    bool grew = false;
    for (const auto &s : b) {
      if (auto *l = std::get_if<Let>(&s.kind)) {
        if (!tainted.count(l->name) && reads_outside_gathers(l->value)) grew = tainted.insert(l->name).second;
      } else if (auto *f = std::get_if<If>(&s.kind)) {
        grew = spread(f->then_body) || grew;
        grew = spread(f->else_body) || grew;
      } else if (auto *f = std::get_if<For>(&s.kind)) {
        grew = spread(f->body) || grew;
      }
    }
    return grew;
  }

  void use(const Expr &e) { ok = ok && !reads_outside_gathers(e); }

  // A table read may pick where a copy reads (an index, the start of a
  // `ds`), never how much: a size from the table would change the bytes
  // its waits count and what of the destination it fills.
  void source(const Expr &src) {
    if (src.op != Op::Ref || !eligible_source(src.name)) return use(src);
    for (const auto &a : src.args) {
      if (!reads_name(a, tainted)) continue;
      if (a.op == Op::Slice) return use(a);
      if (a.op == Op::Call && a.name == "ds" && a.args.size() == 2) use(a.args[1]);
      sources.insert(src.name);
    }
  }

  void block(const Block &b) {
    for (const auto &s : b) {
      if (auto *a = std::get_if<Assign>(&s.kind)) {
        use(a->target);
        use(a->value);
      } else if (std::holds_alternative<Let>(s.kind)) {
        // A tainted local's value is only ever read where its uses are.
      } else if (auto *f = std::get_if<If>(&s.kind)) {
        use(f->cond);
        block(f->then_body);
        block(f->else_body);
      } else if (auto *f = std::get_if<For>(&s.kind)) {
        use(f->lo);
        use(f->hi);
        block(f->body);
      } else if (auto *d = std::get_if<Dma>(&s.kind)) {
        // A wait's source is no part of it (lowering drops it, as dma_wait).
        if (d->action != DmaAction::signal && d->action != DmaAction::sem_wait)
          source(d->src);
        else
          use(d->src);
        use(d->dst);
        use(d->sem);
        use(d->n);
      } else {
        ok = false; // a statement of another kind: not known not to read them
      }
    }
  }

  // A source that some DMA writes is not read-only.
  void written(const Block &b) {
    for (const auto &s : b) {
      if (auto *f = std::get_if<If>(&s.kind)) {
        written(f->then_body);
        written(f->else_body);
      } else if (auto *f = std::get_if<For>(&s.kind)) {
        written(f->body);
      } else if (auto *d = std::get_if<Dma>(&s.kind)) {
        const Expr &dst = d->dst;
        if ((dst.op == Op::Ref || dst.op == Op::Name) && sources.count(dst.name)) ok = false;
      } else if (auto *a = std::get_if<Assign>(&s.kind)) {
        // A store into an input makes it no gather's source.
        const Expr &t = a->target;
        if ((t.op == Op::Ref || t.op == Op::Name) && gather_source(t.name)) ok = false;
      }
    }
  }
};

// The prefetch arrays of `raw` (reads of rank > 1 flattened to the element
// they are) that no index map reads and for which `keep` holds, given the
// array and every integer local computed from one (AddressUse::tainted).
std::set<std::string> arrays_outside_maps(const KernelSpec &raw,
                                          const std::function<bool(const KernelSpec &, AddressUse &)> &keep) {
  const KernelSpec k = flatten_prefetch_reads(raw);
  std::set<std::string> out;
  const std::size_t grid_rank = k.grid ? k.grid->size() : 0;
  for (std::size_t i = 0; i < k.prefetches.size(); ++i) {
    const Prefetch &p = k.prefetches[i];
    bool in_map = false;
    for (const auto &o : k.operands)
      if (o.index_map && o.index_map->params.size() > grid_rank + i)
        for (const auto &r : o.index_map->results)
          in_map = in_map || reads_name(r, {o.index_map->params[grid_rank + i]});
    if (in_map) continue;
    AddressUse u{k, {p.name}, {}, true};
    while (u.spread(k.body)) {
    }
    if (keep(k, u)) out.insert(p.name);
  }
  return out;
}

} // namespace

std::set<std::string> prefetch_address_only(const KernelSpec &raw) {
  return arrays_outside_maps(raw, [](const KernelSpec &k, AddressUse &u) {
    u.block(k.body);
    u.written(k.body);
    return u.ok;
  });
}

namespace {

// Whether every read of a name in `tainted` within `e` is taken only as a
// value from `e`'s root: under + - * /, unary -, a cast to a float dtype, a
// broadcast, a `where`'s branches (not its condition). A read of a prefetch
// array there is a value whatever its subscripts (an address in SMEM).
bool value_only_in(const KernelSpec &k, const Expr &e, const std::set<std::string> &tainted) {
  if (!reads_name(e, tainted)) return true;
  if ((e.op == Op::Ref || e.op == Op::Name) && (tainted.count(e.name) || k.prefetch(e.name))) return true;
  const auto all = [&] {
    return std::all_of(e.args.begin(), e.args.end(),
                       [&](const Expr &a) { return value_only_in(k, a, tainted); });
  };
  switch (e.op) {
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Neg: return all();
  case Op::Call:
    if (e.name == "cast" && e.args.size() == 2 && e.args[1].op == Op::Name) {
      const auto d = parse_dtype(e.args[1].name);
      return d && dtype_is_float(*d) && value_only_in(k, e.args[0], tainted);
    }
    if (e.name == "broadcast_to" && e.args.size() == 2)
      return value_only_in(k, e.args[0], tainted) && !reads_name(e.args[1], tainted);
    if (e.name == "where" && e.num_positional() == 3 && e.args.size() == 3)
      return !reads_name(e.args[0], tainted) && value_only_in(k, e.args[1], tainted) &&
             value_only_in(k, e.args[2], tainted);
    return false;
  default: return false;
  }
}

// Statements reading a tainted name only as values (value_only_in) of
// stores; a local bound from one is tainted (and its own uses checked).
bool value_only_in(const KernelSpec &k, const Block &b, const std::set<std::string> &tainted) {
  for (const auto &s : b) {
    if (const auto *a = std::get_if<Assign>(&s.kind)) {
      if (reads_name(a->target, tainted) || !value_only_in(k, a->value, tainted)) return false;
    } else if (const auto *l = std::get_if<Let>(&s.kind)) {
      // Its name is tainted where its value reads one (its uses are checked),
      // and its value must take them as values too: `a = a + kp[bt[t]]`
      // reads the table in a subscript, whatever `a` then reaches.
      if (!value_only_in(k, l->value, tainted)) return false;
    } else if (const auto *f = std::get_if<If>(&s.kind)) {
      if (reads_name(f->cond, tainted) || !value_only_in(k, f->then_body, tainted) ||
          !value_only_in(k, f->else_body, tainted))
        return false;
    } else if (const auto *f = std::get_if<For>(&s.kind)) {
      if (reads_name(f->lo, tainted) || reads_name(f->hi, tainted) || !value_only_in(k, f->body, tainted))
        return false;
    } else {
      bool reads = false;
      for_each_expr(s, [&](const Expr &e) { reads = reads || reads_name(e, tainted); });
      if (reads || std::holds_alternative<EmitPipeline>(s.kind)) return false;
    }
  }
  return true;
}

} // namespace

std::set<std::string> prefetch_value_only(const KernelSpec &raw) {
  return arrays_outside_maps(
      raw, [](const KernelSpec &k, const AddressUse &u) { return value_only_in(k, k.body, u.tainted); });
}

std::optional<PrefetchContents> pick_prefetch(const PrefetchSpace &s, std::uint64_t seed, std::string &why) {
  std::mt19937_64 rng(seed);
  PrefetchContents out;
  for (const auto &a : s.arrays) {
    if (a.given) continue;
    auto [lo, hi] = pick_range(a);
    std::vector<std::int64_t> v;
    i128 partial = 0;
    for (std::int64_t i = 0; i < a.length; ++i) {
      std::optional<std::int64_t> prev;
      if (!v.empty()) prev = v.back();
      auto [vlo, vhi] = feasible(a, lo, hi, static_cast<std::size_t>(i), prev, partial);
      if (vlo > vhi) {
        why = "no contents of '" + a.name + "' satisfy its constraints within [" + std::to_string(lo) + ", " +
              std::to_string(hi) + ")";
        return std::nullopt;
      }
      const auto span = static_cast<std::uint64_t>(vhi - vlo) + 1;
      const std::int64_t x = static_cast<std::int64_t>(vlo + static_cast<i128>(rng() % span));
      v.push_back(x);
      partial += x;
    }
    if (auto bad = prefetch_violation(a, v)) {
      why = *bad;
      return std::nullopt;
    }
    out[a.name] = std::move(v);
  }
  return out;
}

namespace {

// Rewrites every read of a prefetch array in a kernel's index maps and body
// with `read` (the array's name, and the read as written, its subscripts
// already rewritten).
class ReadRewriter {
public:
  using Read = std::function<Expr(const std::string &array, Expr read)>;
  explicit ReadRewriter(Read read) : read_(std::move(read)) {}

  // `names` maps a name as written (an index-map argument, or the array's
  // own name in the body) to the array.
  Expr expr(const Expr &e, const std::map<std::string, std::string> &names) const {
    Expr out = e.map_args([&](const Expr &a) { return expr(a, names); });
    if (e.op == Op::Ref)
      if (auto it = names.find(e.name); it != names.end()) return read_(it->second, std::move(out));
    return out;
  }

  void block(Block &b, const std::map<std::string, std::string> &names) const {
    for (auto &s : b) {
      if (auto *a = std::get_if<Assign>(&s.kind)) {
        a->target = expr(a->target, names);
        a->value = expr(a->value, names);
      } else if (auto *l = std::get_if<Let>(&s.kind)) {
        l->value = expr(l->value, names);
      } else if (auto *f = std::get_if<If>(&s.kind)) {
        f->cond = expr(f->cond, names);
        block(f->then_body, names);
        block(f->else_body, names);
      } else if (auto *f = std::get_if<For>(&s.kind)) {
        f->lo = expr(f->lo, names);
        f->hi = expr(f->hi, names);
        block(f->body, names);
      } else if (auto *d = std::get_if<Dma>(&s.kind)) {
        // A page table read in a copy's subscripts (paged attention).
        for (Expr *e : {&d->src, &d->dst, &d->sem, &d->n})
          *e = expr(*e, names);
      }
    }
  }

  // The index maps (through their trailing prefetch arguments, which are
  // dropped when `drop_arguments`) and the body of `out`, a copy of `k`.
  void kernel(KernelSpec &out, const KernelSpec &k, bool drop_arguments) const {
    const std::size_t grid_rank = k.grid ? k.grid->size() : 0;
    for (auto &o : out.operands) {
      if (!o.index_map || o.index_map->params.size() <= grid_rank) continue;
      std::map<std::string, std::string> names;
      for (std::size_t i = grid_rank; i < o.index_map->params.size() && i - grid_rank < k.prefetches.size();
           ++i)
        names[o.index_map->params[i]] = k.prefetches[i - grid_rank].name;
      if (drop_arguments) o.index_map->params.resize(grid_rank);
      for (auto &r : o.index_map->results)
        r = expr(r, names);
    }
    std::map<std::string, std::string> body_names;
    for (const auto &p : k.prefetches)
      body_names[p.name] = p.name;
    block(out.body, body_names);
  }

private:
  Read read_;
};

class Elaborator {
public:
  Elaborator(const PrefetchSpace &s, const PrefetchContents &c) : s_(s), c_(c) {}

  // The leaves of array `name`: literals, or element names when open.
  std::vector<Expr> leaves(const std::string &name, Loc l) const {
    const PrefetchArray *a = s_.array(name);
    std::vector<Expr> out;
    const std::vector<std::int64_t> *vals = a->given ? &*a->given : nullptr;
    if (auto it = c_.find(name); !vals && it != c_.end()) vals = &it->second;
    for (std::int64_t k = 0; k < a->length; ++k)
      out.push_back(vals ? Expr::integer((*vals)[static_cast<std::size_t>(k)], l)
                         : Expr::var(prefetch_element(name, k), l));
    return out;
  }

  // The nodes of `e`, counting up to `cap`.
  static std::size_t nodes(const Expr &e, std::size_t cap) {
    std::size_t n = 1;
    for (const auto &a : e.args) {
      if (n >= cap) break;
      n += nodes(a, cap - n);
    }
    return n;
  }

  static Expr tree(const Expr &idx, const std::vector<Expr> &leaves, std::size_t lo, std::size_t hi, Loc l) {
    if (hi - lo == 1) return leaves[lo];
    const std::size_t mid = lo + (hi - lo) / 2;
    Expr a = tree(idx, leaves, lo, mid, l), b = tree(idx, leaves, mid, hi, l);
    // Equal contents need no choice: a run of one value is one leaf.
    if (a.op == Op::Int && b.op == Op::Int && a.int_value == b.int_value) return a;
    Expr c = Expr::binary(Op::Lt, idx, Expr::integer(static_cast<std::int64_t>(mid), l), l);
    return Expr::call("where", {c, std::move(a), std::move(b)}, l);
  }

  // ids[idx] as `where(0 <= idx < n, tree, poison)`.
  Expr read(const std::string &name, const Expr &idx, Loc l) const {
    // ids[where(c, f, -1)] (a flattened read of rank > 1) is where(c, ids[f], poison), as
    // -1 reads poison: the tree then branches on f, not on the whole where.
    if (idx.op == Op::Call && idx.name == "where" && idx.args.size() == 3 && idx.args[2].op == Op::Int &&
        idx.args[2].int_value == -1)
      return Expr::call("where", {idx.args[0], read(name, idx.args[1], l), Expr::integer(kPrefetchPoison, l)},
                        l);
    auto lv = leaves(name, l);
    const auto n = static_cast<std::int64_t>(lv.size());
    const std::size_t terms = nodes(idx, kMaxElaboratedNodes);
    if (lv.size() > 1 && terms * lv.size() > kMaxElaboratedNodes)
      throw ElaborationTooLarge(
          "a read of prefetch array '" + name + "' at line " + std::to_string(l.line) + " whose subscript (" +
          std::to_string(terms) + " terms, reading a prefetch array itself) would be " +
          "copied into each of its " + std::to_string(lv.size()) + " entries' choices: more than " +
          std::to_string(kMaxElaboratedNodes) + " terms; read the inner value into a table of its own (a " +
          "prefetch array of the composed values)");
    Expr in = Expr::binary(Op::And, Expr::binary(Op::Ge, idx, Expr::integer(0, l), l),
                           Expr::binary(Op::Lt, idx, Expr::integer(n, l), l), l);
    return Expr::call("where", {in, tree(idx, lv, 0, lv.size(), l), Expr::integer(kPrefetchPoison, l)}, l);
  }

private:
  const PrefetchSpace &s_;
  const PrefetchContents &c_;
};

// Binds each subscript of a body read of a prefetch array that would be
// costly to copy to a local of its own, set just before the statement that
// reads (`t = <subscript>`, then `ids[t]`): the read becomes a tree over its
// contents that names the subscript at every branch, so a long subscript, or
// one that reads a prefetch array itself (and is a tree too), would be copied
// once per element, and nested reads multiply. The condition of a while loop,
// evaluated at every iteration, keeps its subscripts in place.
class SubscriptBinder {
public:
  explicit SubscriptBinder(const KernelSpec &k) : used_(kernel_names(k)) {
    for (const auto &p : k.prefetches)
      arrays_.insert(p.name);
  }

  void block(Block &b) {
    Block out;
    out.reserve(b.size());
    for (auto &s : b) {
      std::vector<Stmt> lets;
      if (auto *f = std::get_if<For>(&s.kind)) {
        f->hi = expr(f->hi, lets);
        if (f->is_while) {
          // Its body is one `if cond:` (make_while), whose cond stays.
          for (auto &inner : f->body)
            if (auto *i = std::get_if<If>(&inner.kind)) block(i->then_body);
        } else {
          f->lo = expr(f->lo, lets);
          block(f->body);
        }
      } else if (auto *i = std::get_if<If>(&s.kind)) {
        i->cond = expr(i->cond, lets);
        block(i->then_body);
        block(i->else_body);
      } else if (std::holds_alternative<Assign>(s.kind) || std::holds_alternative<Let>(s.kind) ||
                 std::holds_alternative<Dma>(s.kind)) {
        for_each_expr(s, [&](Expr &e) { e = expr(e, lets); });
      }
      for (auto &l : lets)
        out.push_back(std::move(l));
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

private:
  std::set<std::string> arrays_, used_;
  std::size_t next_ = 0;

  // At most this many nodes, a subscript that reads no prefetch array is
  // copied into the tree as it is.
  static constexpr std::size_t kInlineNodes = 8;

  static std::size_t nodes(const Expr &e, std::size_t cap) {
    std::size_t n = 1;
    for (const auto &a : e.args) {
      if (n > cap) break;
      n += nodes(a, cap - n);
    }
    return n;
  }

  bool costly(const Expr &sub) const {
    if (sub.op == Op::Name || sub.op == Op::Int || sub.op == Op::Slice || sub.op == Op::Ellipsis ||
        sub.op == Op::None || ds_index(sub) || bounded_slice_dim(sub))
      return false;
    return reads_any(sub, arrays_) || nodes(sub, kInlineNodes) > kInlineNodes;
  }

  Expr expr(Expr e, std::vector<Stmt> &lets) {
    // The right side of `and`/`or` is read only where the left side lets it
    // (`i + 1 < n and a[tbl[i + 1]] > 0`): its subscripts stay in place, as a
    // while condition's do, rather than being set before the statement.
    const bool short_circuit = (e.op == Op::And || e.op == Op::Or) && e.args.size() == 2;
    for (std::size_t k = 0; k < e.args.size(); ++k)
      if (!(short_circuit && k == 1)) e.args[k] = expr(std::move(e.args[k]), lets);
    if (e.op != Op::Ref || !arrays_.count(e.name)) return e;
    for (auto &a : e.args) {
      if (!costly(a)) continue;
      std::string name = e.name + "_idx" + std::to_string(next_++);
      while (used_.count(name))
        name += "_";
      used_.insert(name);
      Stmt let;
      let.loc = a.loc;
      const Loc at = a.loc;
      let.kind = Let{name, std::move(a)};
      lets.push_back(std::move(let));
      a = Expr::var(name, at);
    }
    return e;
  }
};

} // namespace

KernelSpec elaborate_prefetch(const KernelSpec &raw, const PrefetchSpace &s,
                              const PrefetchContents &contents) {
  KernelSpec bound = raw;
  SubscriptBinder(raw).block(bound.body);
  const KernelSpec k = flatten_prefetch_reads(bound);
  KernelSpec out = k;
  Elaborator el(s, contents);
  ReadRewriter rw([&](const std::string &array, Expr read) {
    // Flattened above: one subscript.
    return el.read(array, read.args.at(0), read.loc);
  });
  rw.kernel(out, k, /*drop_arguments=*/true);
  out.prefetches.clear();
  return out;
}

const Expr *elaborated_read_bounds(const Expr &e) {
  if (e.op == Op::Call && e.name == "where" && e.args.size() == 3 && e.kwarg_names.empty() &&
      e.args[2].op == Op::Int && e.args[2].int_value == kPrefetchPoison)
    return &e.args[0];
  return nullptr;
}

std::optional<std::string>
elaborated_read_outside(const Expr &in,
                        const std::function<std::optional<std::int64_t>(const Expr &)> &value) {
  const auto extents = elaborated_read_extents(in);
  for (std::size_t d = 0; d < extents.size(); ++d) {
    const auto i = value(extents[d].first), n = value(extents[d].second);
    if (i && n && (*i < 0 || *i >= *n))
      return "its subscript " + std::to_string(d) + " is " + std::to_string(*i) +
             ", outside 0:" + std::to_string(*n);
  }
  return std::nullopt;
}

bool has_elaborated_reads(const Expr &e) {
  return elaborated_read_bounds(e) ||
         std::any_of(e.args.begin(), e.args.end(), [](const Expr &a) { return has_elaborated_reads(a); });
}

std::optional<ReadOutside>
prefetch_read_outside(const Expr &e, const std::function<std::optional<std::int64_t>(const Expr &)> &value) {
  if (const Expr *in = elaborated_read_bounds(e)) {
    if (value(*in).value_or(1) == 0)
      return ReadOutside{&e, elaborated_read_outside(*in, value).value_or("its subscript is outside it")};
    return prefetch_read_outside(*in, value); // (its subscripts may read tables too)
  }
  if ((e.op == Op::And || e.op == Op::Or) && e.args.size() == 2) {
    if (auto r = prefetch_read_outside(e.args[0], value)) return r;
    if (const auto l = value(e.args[0]); l && (*l != 0) == (e.op == Op::Or)) return std::nullopt;
    return prefetch_read_outside(e.args[1], value);
  }
  for (const auto &a : e.args)
    if (auto r = prefetch_read_outside(a, value)) return r;
  return std::nullopt;
}

std::string read_outside_fault(const ReadOutside &r, const std::vector<std::int64_t> &point,
                               const std::string &who) {
  return who + " a scalar-prefetch array outside it" +
         (point.empty() ? std::string() : " at grid point " + format_tuple(point)) + ": " + r.what +
         " (on a TPU the SMEM load takes whatever lies next to the table)";
}

std::vector<std::pair<Expr, Expr>> elaborated_read_extents(const Expr &in) {
  std::vector<std::pair<Expr, Expr>> out;
  std::function<void(const Expr &)> walk = [&](const Expr &c) {
    if (c.op == Op::And)
      for (const auto &a : c.args)
        walk(a);
    else if (c.op == Op::Lt && c.args.size() == 2)
      out.emplace_back(c.args[0], c.args[1]);
  };
  walk(in);
  return out;
}

KernelSpec with_contents(const KernelSpec &k, const PrefetchContents &contents) {
  KernelSpec out = k;
  for (auto &p : out.prefetches)
    if (auto it = contents.find(p.name); it != contents.end()) {
      std::vector<Expr> values;
      for (auto v : it->second)
        values.push_back(Expr::integer(v, p.loc));
      p.values = std::move(values);
      p.file.reset();
    }
  return out;
}

KernelSpec flatten_prefetch_reads(const KernelSpec &k) {
  std::map<std::string, const Prefetch *> multi;
  for (const auto &p : k.prefetches)
    if (p.read_rank() > 1) multi[p.name] = &p;
  if (multi.empty()) return k;
  KernelSpec out = k;
  ReadRewriter rw([&](const std::string &array, Expr read) {
    auto it = multi.find(array);
    if (it == multi.end() || read.args.size() != it->second->dims.size()) return read;
    const auto &dims = it->second->dims;
    const auto &sub = read.args;
    const Loc l = read.loc;
    std::optional<Expr> in, flat;
    for (std::size_t d = 0; d < dims.size(); ++d) {
      Expr lo = Expr::binary(Op::Le, Expr::integer(0, l), sub[d], l);
      Expr hi = Expr::binary(Op::Lt, sub[d], dims[d], l);
      Expr both = Expr::binary(Op::And, std::move(lo), std::move(hi), l);
      in = in ? Expr::binary(Op::And, std::move(*in), std::move(both), l) : std::move(both);
      flat = flat ? Expr::binary(Op::Add, Expr::binary(Op::Mul, std::move(*flat), dims[d], l), sub[d], l)
                  : sub[d];
    }
    Expr idx = Expr::call("where", {std::move(*in), std::move(*flat), Expr::integer(-1, l)}, l);
    read.args = {std::move(idx)};
    return read;
  });
  rw.kernel(out, k, /*drop_arguments=*/false);
  for (auto &p : out.prefetches)
    if (multi.count(p.name)) p.flat = true;
  return out;
}

std::string format_prefetch(const PrefetchContents &c) {
  // A table past 32 elements is summed up: its most common value with the
  // few elements that differ (a solver's witness), else its ends.
  constexpr std::size_t kWhole = 32, kExceptions = 8, kHead = 8, kTail = 2;
  std::ostringstream os;
  bool first = true;
  for (const auto &[name, v] : c) {
    os << (first ? "" : ", ") << name << " = ";
    first = false;
    if (v.size() <= kWhole) {
      os << "[";
      for (std::size_t i = 0; i < v.size(); ++i)
        os << (i ? ", " : "") << v[i];
      os << "]";
      continue;
    }
    std::map<std::int64_t, std::size_t> counts;
    for (auto x : v)
      ++counts[x];
    const auto common = std::max_element(counts.begin(), counts.end(),
                                         [](const auto &a, const auto &b) { return a.second < b.second; });
    if (v.size() - common->second <= kExceptions) {
      os << "[" << common->first << "] * " << v.size();
      const char *sep = " but at flat positions ";
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != common->first) {
          os << sep << i << ": " << v[i];
          sep = ", ";
        }
      continue;
    }
    os << "[";
    for (std::size_t i = 0; i < kHead; ++i)
      os << (i ? ", " : "") << v[i];
    os << ", ...";
    for (std::size_t i = v.size() - kTail; i < v.size(); ++i)
      os << ", " << v[i];
    os << "] (" << v.size() << " elements)";
  }
  return os.str();
}

} // namespace pipecheck::spec
