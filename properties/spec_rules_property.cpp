#include "properties/spec_rules_property.hpp"

#include "spec/parse.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/symbolic.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace pipecheck::properties {

namespace {

const char *kAxis[] = {"i", "j", "k"};

// The index terms of small_kernel(), in the order the generator offers them.
std::vector<IndexTerm> index_terms(int rank, std::int64_t nblocks) {
  std::vector<IndexTerm> opts = {{IndexTerm::zero, 0, nblocks}};
  for (int a = 0; a < rank; ++a) {
    opts.push_back({IndexTerm::var, a, nblocks});
    opts.push_back({IndexTerm::half, a, nblocks});
    opts.push_back({IndexTerm::parity, a, nblocks});
    opts.push_back({IndexTerm::next, a, nblocks});
    opts.push_back({IndexTerm::reversed, a, nblocks});
    if (a + 1 < rank) opts.push_back({IndexTerm::sum, a, nblocks});
  }
  return opts;
}

std::string join(const std::vector<std::string> &v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + v[i];
  return s;
}

} // namespace

std::string IndexTerm::text() const {
  const std::string v = kAxis[axis];
  switch (kind) {
  case zero: return "0";
  case var: return v;
  case half: return v + " // 2";
  case parity: return v + " % 2";
  case next: return v + " + 1";
  case reversed: return std::to_string(nblocks - 1) + " - " + v;
  case sum: return v + " + " + kAxis[axis + 1];
  }
  return "0";
}

std::int64_t IndexTerm::at(const std::vector<std::int64_t> &point) const {
  const std::int64_t v = kind == zero ? 0 : point[static_cast<std::size_t>(axis)];
  switch (kind) {
  case zero: return 0;
  case var: return v;
  case half: return v / 2; // grid indices are never negative
  case parity: return v % 2;
  case next: return v + 1;
  case reversed: return nblocks - 1 - v;
  case sum: return v + point[static_cast<std::size_t>(axis) + 1];
  }
  return 0;
}

std::string SmallKernel::text() const {
  const int rank = static_cast<int>(grid.size());
  std::vector<std::string> g, params;
  for (int a = 0; a < rank; ++a) {
    g.push_back(std::to_string(grid[static_cast<std::size_t>(a)]));
    params.push_back(kAxis[a]);
  }
  std::string shape = std::to_string(n0 * b0 - r0) + ", " + std::to_string(n1 * b1 - r1);
  std::string block = std::to_string(b0) + ", " + std::to_string(b1);
  std::string lam = "(" + join(params) + ")";
  std::ostringstream os;
  os << "kernel k:\n";
  os << "    grid = (" << join(g) << (rank == 1 ? ",)" : ")") << "\n";
  if (triton) os << "    backend = triton\n";
  if (!semantics.empty())
    os << "    dimension_semantics = (" << join(semantics) << (rank == 1 ? ",)" : ")") << "\n";
  os << "    in  x: f32[" << shape << "]  block=(" << block << ")  index=" << lam << " -> (" << x[0].text()
     << ", " << x[1].text() << ")\n";
  os << "    out o: f32[" << shape << "]  block=(" << block << ")  index=" << lam << " -> (" << o[0].text()
     << ", " << o[1].text() << ")\n";
  if (scratch_body()) os << "    scratch acc: f32[" << block << "]\n";
  if (alias) os << "    alias x -> o\n";
  os << "    body:\n";
  std::string pid = "program_id(" + std::to_string(axis) + ")";
  std::string last = pid + " == num_programs(" + std::to_string(axis) + ") - 1";
  switch (body) {
  case 6:
    os << "        when " << pid << " == 0:\n            acc[...] = zeros\n        acc[...] += x[...]\n"
       << "        when " << last << ":\n            o[...] = acc[...]\n";
    break;
  case 7:
    os << "        when " << pid << " == 0:\n            acc[...] = zeros\n        acc[...] += x[...]\n"
       << "        o[...] = acc[...]\n";
    break;
  case 8:
    os << "        when " << pid << " % 2 == 0:\n            acc[...] = zeros\n        acc[...] += x[...]\n"
       << "        o[...] = acc[...]\n";
    break;
  case 10:
    os << "        when " << pid << " == 0:\n            acc[...] = zeros\n        acc[...] += x[...]\n"
       << "        when " << pid << " == 0:\n            o[...] = acc[...]\n";
    break;
  case 11:
    os << "        when " << pid << " == 0:\n            acc[...] = zeros\n        o[...] = acc[...]\n"
       << "        acc[...] += x[...]\n";
    break;
  case 9:
    os << "        o[0:4, :] = x[0:4, :]\n        when " << pid << " % 2 == 0:\n"
       << "            o[4:, :] = x[4:, :] + 1\n";
    break;
  case 0: os << "        o[...] = x[...]\n"; break;
  case 1: os << "        o[...] += x[...]\n"; break;
  case 2:
    os << "        when " << pid << " == 0:\n            o[...] = zeros\n        o[...] += x[...]\n";
    break;
  case 3: os << "        when " << last << ":\n            o[...] = x[...]\n"; break;
  case 4: os << "        x[...] = x[...] + 1\n        o[...] = x[...]\n"; break;
  case 5: os << "        when " << pid << " % 2 == 1:\n            o[...] = x[...] + 1\n"; break;
  }
  return os.str();
}

rc::Gen<SmallKernel> small_kernel() {
  return rc::gen::exec([]() {
    SmallKernel k;
    const int rank = *rc::gen::inRange(1, 4);
    for (int a = 0; a < rank; ++a)
      k.grid.push_back(*rc::gen::inRange(1, 5));
    k.b0 = *rc::gen::element<std::int64_t>(8, 16), k.b1 = *rc::gen::element<std::int64_t>(8, 16);
    k.n0 = *rc::gen::inRange<std::int64_t>(1, 5), k.n1 = *rc::gen::inRange<std::int64_t>(1, 5);
    k.r0 = *rc::gen::element<std::int64_t>(0, 0, 3), k.r1 = *rc::gen::element<std::int64_t>(0, 0, 5);
    k.x[0] = *rc::gen::elementOf(index_terms(rank, k.n0));
    k.x[1] = *rc::gen::elementOf(index_terms(rank, k.n1));
    k.o[0] = *rc::gen::elementOf(index_terms(rank, k.n0));
    k.o[1] = *rc::gen::elementOf(index_terms(rank, k.n1));
    k.alias = *rc::gen::element(false, false, true);
    k.triton = *rc::gen::inRange(0, 4) == 0;
    if (!k.triton && *rc::gen::inRange(0, 3) > 0)
      for (int a = 0; a < rank; ++a)
        k.semantics.push_back(*rc::gen::element<std::string>("parallel", "arbitrary"));
    k.axis = *rc::gen::inRange(0, rank);
    // 6..8: a scratch accumulator (carried across an axis, consumed at its
    // last step or at every step); 9: stores of two slices of the block;
    // 10, 11: a scratch accumulator stored at its first step, after or
    // before (an exclusive scan) each step's update.
    k.body = *rc::gen::inRange(0, 12);
    return k;
  });
}

rc::Gen<std::string> small_kernel_text() {
  return rc::gen::map(small_kernel(), [](const SmallKernel &k) { return k.text(); });
}

namespace {

// Where the generated kernel's lines are (they depend only on the header).
int x_line(const SmallKernel &k) { return k.semantics.empty() && !k.triton ? 3 : 4; }

} // namespace

std::vector<std::string> brute_force_rules(const SmallKernel &k) {
  // Every grid point in run order (lexicographic: the kernels run on TPU).
  std::vector<std::vector<std::int64_t>> pts(1);
  for (std::int64_t g : k.grid) {
    std::vector<std::vector<std::int64_t>> next;
    for (const auto &p : pts)
      for (std::int64_t v = 0; v < g; ++v) {
        auto q = p;
        q.push_back(v);
        next.push_back(q);
      }
    pts = next;
  }
  using Block = std::pair<std::int64_t, std::int64_t>;
  auto block = [](const IndexTerm *t, const std::vector<std::int64_t> &p) {
    return Block{t[0].at(p), t[1].at(p)};
  };
  auto in_bounds = [&](Block b) {
    return b.first >= 0 && b.first < k.n0 && b.second >= 0 && b.second < k.n1;
  };
  const std::size_t ax = static_cast<std::size_t>(k.axis);
  // What the body does to `o` at a point: writes of its upper rows (0:4),
  // of its lower rows (4:), and whether it reads `o` first.
  struct Step {
    bool upper = false, lower = false, reads = false, init_first = false;
  };
  auto step = [&](const std::vector<std::int64_t> &p) {
    const std::int64_t pid = p[ax], n = k.grid[ax];
    Step s;
    bool all = false;
    switch (k.body) {
    case 0:
    case 4:
    case 7:
    case 8:
    case 11: all = true; break;
    case 1: all = s.reads = true; break;
    case 2: all = s.reads = true, s.init_first = pid == 0; break;
    case 3:
    case 6: all = pid == n - 1; break;
    case 5: all = pid % 2 == 1; break;
    case 10: all = pid == 0; break;
    case 9: s.upper = true, s.lower = pid % 2 == 0; break;
    }
    if (all) s.upper = s.lower = true;
    return s;
  };
  std::set<std::string> found;
  const int xl = x_line(k), ol = xl + 1;
  auto oob = [&](const IndexTerm *t, int line) {
    for (const auto &p : pts)
      if (!in_bounds(block(t, p))) found.insert("index-out-of-bounds@" + std::to_string(line));
  };
  oob(k.x, xl);
  oob(k.o, ol);
  // Triton: a store of a block in bounds whose rows or columns pass the
  // ragged end writes past the array (its stores reach the array itself), at
  // the store's line.
  if (k.triton) {
    const int b = ol + 2 + (k.scratch_body() ? 1 : 0) + (k.alias ? 1 : 0); // first body line
    struct Store {
      int line;
      bool upper, lower; // the rows it writes: 0:4, 4:
    };
    std::vector<Store> stores;
    switch (k.body) {
    case 0:
    case 1: stores = {{b, true, true}}; break;
    case 2: stores = {{b + 1, true, true}, {b + 2, true, true}}; break;
    case 3:
    case 5:
    case 4: stores = {{b + 1, true, true}}; break;
    case 6: stores = {{b + 4, true, true}}; break;
    case 7:
    case 8: stores = {{b + 3, true, true}}; break;
    case 10: stores = {{b + 4, true, true}}; break;
    case 11: stores = {{b + 2, true, true}}; break;
    case 9: stores = {{b, true, false}, {b + 2, false, true}}; break;
    }
    // Its loads of x (none under a where: each loads its whole ref) in a
    // block in bounds whose rows or columns pass the ragged end read past
    // the array, at the load's line: (line, rows 0:4, rows 4:, the
    // statement's guard holds at p).
    struct Load {
      int line;
      bool upper, lower;
      std::function<bool(std::int64_t pid, std::int64_t n)> fires;
    };
    auto always = [](std::int64_t, std::int64_t) { return true; };
    std::vector<Load> loads;
    switch (k.body) {
    case 0:
    case 1: loads = {{b, true, true, always}}; break;
    case 2:
    case 6:
    case 7:
    case 8:
    case 10: loads = {{b + 2, true, true, always}}; break;
    case 3:
      loads = {{b + 1, true, true, [](std::int64_t pid, std::int64_t n) { return pid == n - 1; }}};
      break;
    case 4: loads = {{b, true, true, always}, {b + 1, true, true, always}}; break;
    case 5: loads = {{b + 1, true, true, [](std::int64_t pid, std::int64_t) { return pid % 2 == 1; }}}; break;
    case 11: loads = {{b + 3, true, true, always}}; break;
    case 9:
      loads = {{b, true, false, always},
               {b + 2, false, true, [](std::int64_t pid, std::int64_t) { return pid % 2 == 0; }}};
      break;
    }
    for (const auto &p : pts) {
      const Block bl = block(k.x, p);
      if (!in_bounds(bl)) continue;
      const bool rows_past = bl.first == k.n0 - 1 && k.r0 > 0, cols_past = bl.second == k.n1 - 1 && k.r1 > 0;
      for (const auto &ld : loads)
        if (ld.fires(p[ax], k.grid[ax]) && (cols_past || (ld.lower && rows_past)))
          found.insert("index-out-of-bounds@" + std::to_string(ld.line));
    }
    for (const auto &p : pts) {
      const Block bl = block(k.o, p);
      if (!in_bounds(bl)) continue;
      const Step s = step(p);
      // Rows 0:4 stay within a ragged last block (it loses at most 3 of 8).
      const bool rows_past = bl.first == k.n0 - 1 && k.r0 > 0, cols_past = bl.second == k.n1 - 1 && k.r1 > 0;
      for (const auto &st : stores) {
        // Which of the step's writes this statement is (case 2's init fires
        // only where pid == 0; case 9's halves separately).
        bool fires = (st.upper && s.upper) || (st.lower && s.lower);
        if (k.body == 2 && st.line == b + 1) fires = p[ax] == 0;
        if (fires && (cols_past || (st.lower && rows_past)))
          found.insert("index-out-of-bounds@" + std::to_string(st.line));
      }
    }
  }
  // A non-consecutive revisit of an output block (either rule of the
  // family; Triton keeps no block across visits).
  // Of an output neither read nor aliased, only a revisit after a visit that
  // stored into the block (a visit that stores nothing writes back what the
  // last one replaces).
  if (!k.triton) {
    const bool needs_store = k.body != 1 && k.body != 2 && !k.alias;
    std::map<Block, bool> stored; // seen, and whether some point stored into it
    for (std::size_t q = 0; q < pts.size(); ++q) {
      Block b = block(k.o, pts[q]);
      auto it = stored.find(b);
      if (it != stored.end() && block(k.o, pts[q - 1]) != b && (!needs_store || it->second))
        found.insert("revisit@" + std::to_string(ol));
      const Step s = step(pts[q]);
      stored[b] = (it != stored.end() && it->second) || s.upper || s.lower;
    }
  }
  // Two writes of one block from points apart along a parallel axis;
  // Triton: two programs storing one row half of one block in the array.
  for (std::size_t p = 0; p < pts.size(); ++p)
    for (std::size_t q = p + 1; q < pts.size(); ++q) {
      Step sp = step(pts[p]), sq = step(pts[q]);
      if (k.triton) {
        const Block b = block(k.o, pts[p]);
        if (b == block(k.o, pts[q]) && in_bounds(b) && ((sp.upper && sq.upper) || (sp.lower && sq.lower)))
          found.insert("parallel-write-conflict@" + std::to_string(ol));
        continue;
      }
      // Every visit writes its window back, stored or not: one store of the
      // two is enough.
      if ((!(sp.upper || sp.lower) && !(sq.upper || sq.lower)) || block(k.o, pts[p]) != block(k.o, pts[q]))
        continue;
      for (std::size_t a = 0; a < k.semantics.size(); ++a)
        if (k.semantics[a] == "parallel" && pts[p][a] != pts[q][a])
          found.insert("parallel-write-conflict@" + std::to_string(ol));
    }
  // Triton, in place: x and o are one array, so a program reading through x
  // rows of a block another program stores races (the blocks tile the array
  // alike: the same block index, and one row half both touch).
  if (k.triton && k.alias) {
    auto reads_x = [&](const std::vector<std::int64_t> &p) {
      const std::int64_t pid = p[ax], n = k.grid[ax];
      switch (k.body) {
      case 9: return std::make_pair(true, pid % 2 == 0);
      case 3: return std::make_pair(pid == n - 1, pid == n - 1);
      case 5: return std::make_pair(pid % 2 == 1, pid % 2 == 1);
      default: return std::make_pair(true, true);
      }
    };
    for (const auto &p : pts)
      for (const auto &q : pts) {
        if (p == q) continue;
        const Block b = block(k.o, p);
        const Step s = step(p);
        const auto [upper, lower] = reads_x(q);
        if (in_bounds(b) && b == block(k.x, q) && ((s.upper && upper) || (s.lower && lower)))
          found.insert("parallel-write-conflict@" + std::to_string(ol));
      }
  }
  // An element of the array no point writes: an aliased output keeps the
  // input's data there, so only an unaliased one is judged.
  if (!k.alias) {
    std::map<Block, std::pair<bool, bool>> written;
    for (const auto &p : pts) {
      Block b = block(k.o, p);
      if (!in_bounds(b)) continue;
      Step s = step(p);
      written[b].first = written[b].first || s.upper;
      written[b].second = written[b].second || s.lower;
    }
    // Every block holds valid rows below 4 and from 4 on (a ragged last
    // block loses at most 3 of its 8 or 16 rows).
    for (std::int64_t r = 0; r < k.n0; ++r)
      for (std::int64_t c = 0; c < k.n1; ++c) {
        auto it = written.find({r, c});
        if (it == written.end() || !it->second.first || !it->second.second)
          found.insert("output-not-covered@" + std::to_string(ol));
      }
  }
  // A read of an output block that nothing has written yet; Triton: a read
  // of the (unaliased) array before the reading program stored there.
  if (k.triton) {
    for (const auto &p : pts) {
      const Step s = step(p);
      if (!k.alias && s.reads && !s.init_first && in_bounds(block(k.o, p)))
        found.insert("uninitialized-accumulator");
    }
  } else {
    std::set<Block> written;
    for (const auto &p : pts) {
      Step s = step(p);
      Block b = block(k.o, p);
      if (s.reads && !s.init_first && !written.count(b)) found.insert("uninitialized-accumulator");
      if (s.upper || s.lower) written.insert(b);
    }
  }
  // Triton: each program has its own scratch, so the accumulator bodies
  // read it uninitialized in every program whose guard skips the init.
  if (k.triton && k.scratch_body() && k.grid[ax] > 1) found.insert("uninitialized-accumulator");
  return {found.begin(), found.end()};
}

namespace {

// A scratch carried across a parallel axis is a quantified query, whose
// witness Z3's MBQI does not always minimize (the same kernel gives one of two
// witnesses, depending on the thread's reused context): its rule and line are
// compared, not its witness. check() decides small grids by enumeration.
bool unminimized_witness(const verifier::rules::KernelModel &m, const verifier::Finding &f) {
  if (f.rule != verifier::Rule::parallel_write_conflict) return false;
  for (const auto &it : f.witness.items)
    if (it.key == "operand")
      if (auto op = m.operand_index(std::get<std::string>(it.value)))
        return m.operands[*op].role == spec::Role::scratch;
  return false;
}

std::string describe(const verifier::Finding &f, bool witness = true) {
  std::ostringstream os;
  os << f.rule << "@" << f.loc.line << " [";
  if (witness)
    for (auto v : verifier::rules::witness_key(f.witness))
      os << v << " ";
  os << "]";
  return os.str();
}

} // namespace

std::string compare_symbolic_with_enumeration(const std::string &text) {
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("prop.pk", text));
  if (!parsed.file || parsed.file->units.empty()) return "skip";
  const auto *k = std::get_if<spec::KernelSpec>(&parsed.file->units[0]);
  if (!k) return "skip";
  auto built = verifier::rules::build_model(*k, {}, std::nullopt);
  if (!built.model) return "skip";
  const auto &m = *built.model;
  auto sym = verifier::rules::check_symbolic(m, 10000);
  auto en = verifier::rules::check_enumerated(m);
  if (!sym.unknown.empty()) return "symbolic unknown: " + sym.unknown[0];
  if (!en.unknown.empty()) return "enumeration unknown: " + en.unknown[0];
  std::string a, b;
  for (const auto &f : sym.findings)
    a += describe(f, !unminimized_witness(m, f)) + "; ";
  for (const auto &f : en.findings)
    b += describe(f, !unminimized_witness(m, f)) + "; ";
  if (a != b) return "symbolic {" + a + "} != enumerated {" + b + "}";
  // Each symbolic witness holds concretely.
  for (const auto &f : sym.findings) {
    auto pt = [&](const std::string &key) {
      for (const auto &it : f.witness.items)
        if (it.key == key) return std::get<std::vector<std::int64_t>>(it.value);
      return std::vector<std::int64_t>{};
    };
    auto o = m.operand_index("o");
    if (f.rule == verifier::Rule::output_revisit || f.rule == verifier::Rule::reduction_not_last_axis) {
      auto p = pt("first_visit"), q = pt("revisit");
      if (!(p < q) || verifier::rules::block_at(m, *o, p) != verifier::rules::block_at(m, *o, q))
        return "revisit witness does not hold: " + describe(f);
    }
    if (f.rule == verifier::Rule::index_out_of_bounds) {
      auto name = std::get<std::string>(f.witness.items[0].value);
      auto op = *m.operand_index(name);
      auto b = verifier::rules::block_at(m, op, pt("grid_point"));
      bool out = false;
      for (std::size_t d = 0; b && d < b->size(); ++d)
        out = out || (*b)[d] < 0 || (*b)[d] >= m.operands[op].num_blocks[d];
      // A Triton store past the array names the element it writes there.
      const auto e = pt("element");
      for (std::size_t d = 0; d < e.size() && d < m.operands[op].shape.size(); ++d)
        out = out || e[d] < 0 || e[d] >= m.operands[op].shape[d];
      if (!out) return "out-of-bounds witness does not hold: " + describe(f);
    }
  }
  return "";
}

namespace {

// compare(model) on the model of k's text (which points into the parsed
// file, alive for the call); "skip" when it does not validate or build.
template <class F> std::string with_model(const SmallKernel &k, F &&compare) {
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("prop.pk", k.text()));
  if (!parsed.file || parsed.file->units.empty()) return "skip";
  const auto *ks = std::get_if<spec::KernelSpec>(&parsed.file->units[0]);
  if (!ks) return "skip";
  auto built = verifier::rules::build_model(*ks, {}, std::nullopt);
  if (!built.model) return "skip";
  return compare(*built.model);
}

std::string triton_races_agree(const SmallKernel &k, const verifier::rules::KernelModel &m) {
  auto sym = verifier::rules::check_triton_races_symbolically(m, 10000);
  if (!sym.unknown.empty()) return "symbolic unknown: " + sym.unknown[0];
  const std::string conflict = "parallel-write-conflict@" + std::to_string(x_line(k) + 1);
  bool solver = false, solver_garbage = false;
  for (const auto &f : sym.findings) {
    solver = solver || (f.rule == verifier::Rule::parallel_write_conflict && f.loc.line == x_line(k) + 1);
    solver_garbage = solver_garbage || f.rule == verifier::Rule::uninitialized_accumulator;
  }
  const auto want = brute_force_rules(k);
  const bool brute = std::find(want.begin(), want.end(), conflict) != want.end();
  // (Bodies 6-8 read a scratch, not the output: their uninitialized read is not this path's.)
  const bool brute_garbage =
      !k.scratch_body() && std::find(want.begin(), want.end(), "uninitialized-accumulator") != want.end();
  if (solver == brute && solver_garbage == brute_garbage) return "";
  return std::string("the solver ") + (solver ? "finds" : "does not find") + " a race and " +
         (solver_garbage ? "finds" : "does not find") + " a read before a store, the brute force " +
         (brute ? "does" : "does not") + " and " + (brute_garbage ? "does" : "does not");
}

std::string symbolic_agrees(const SmallKernel &k, const verifier::rules::KernelModel &m) {
  auto sym = verifier::rules::check_symbolic(m, 10000);
  if (!sym.unknown.empty()) return "symbolic unknown: " + sym.unknown[0];
  if (!sym.errors.empty()) return "skip";
  std::set<std::string> got;
  for (const auto &f : sym.findings) {
    const std::string line = "@" + std::to_string(f.loc.line);
    switch (f.rule) {
    case verifier::Rule::index_out_of_bounds: got.insert("index-out-of-bounds" + line); break;
    case verifier::Rule::output_revisit:
    case verifier::Rule::reduction_not_last_axis: got.insert("revisit" + line); break;
    case verifier::Rule::parallel_write_conflict:
      // A scratch carried across a parallel axis is reported at the scratch
      // line: not judged here.
      if (f.loc.line == x_line(k) + 1) got.insert("parallel-write-conflict" + line);
      break;
    case verifier::Rule::output_not_covered: got.insert("output-not-covered" + line); break;
    case verifier::Rule::uninitialized_accumulator: got.insert("uninitialized-accumulator"); break;
    default: break;
    }
  }
  auto want = brute_force_rules(k);
  std::vector<std::string> have(got.begin(), got.end());
  if (want == have) return "";
  return "symbolic {" + join(have) + "} != brute force {" + join(want) + "}";
}

} // namespace

std::string compare_triton_races_with_brute_force(const SmallKernel &k) {
  if (!k.triton) return "skip";
  return with_model(k, [&](const verifier::rules::KernelModel &m) { return triton_races_agree(k, m); });
}

std::string compare_symbolic_with_brute_force(const SmallKernel &k) {
  return with_model(k, [&](const verifier::rules::KernelModel &m) { return symbolic_agrees(k, m); });
}

} // namespace pipecheck::properties
