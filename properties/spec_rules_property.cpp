#include "properties/spec_rules_property.hpp"

#include "spec/parse.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/symbolic.hpp"

#include <sstream>

namespace pipecheck::properties {

namespace {

const char *kAxis[] = {"i", "j", "k"};

rc::Gen<std::string> index_expr(int rank, std::int64_t nblocks) {
  std::vector<std::string> opts = {"0"};
  for (int a = 0; a < rank; ++a) {
    std::string v = kAxis[a];
    opts.push_back(v);
    opts.push_back(v + " // 2");
    opts.push_back(v + " % 2");
    opts.push_back(v + " + 1");
    opts.push_back(std::to_string(nblocks - 1) + " - " + v);
    if (a + 1 < rank) opts.push_back(v + " + " + kAxis[a + 1]);
  }
  return rc::gen::elementOf(opts);
}

std::string join(const std::vector<std::string> &v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + v[i];
  return s;
}

} // namespace

rc::Gen<std::string> small_kernel_text() {
  return rc::gen::exec([]() {
    int rank = *rc::gen::inRange(1, 4);
    std::vector<std::string> grid, params;
    for (int a = 0; a < rank; ++a) {
      grid.push_back(std::to_string(*rc::gen::inRange(1, 5)));
      params.push_back(kAxis[a]);
    }
    std::int64_t b0 = *rc::gen::element<std::int64_t>(8, 16), b1 = *rc::gen::element<std::int64_t>(8, 16);
    std::int64_t n0 = *rc::gen::inRange<std::int64_t>(1, 5), n1 = *rc::gen::inRange<std::int64_t>(1, 5);
    std::int64_t r0 = *rc::gen::element<std::int64_t>(0, 0, 3), r1 = *rc::gen::element<std::int64_t>(0, 0, 5);
    std::string shape = std::to_string(n0 * b0 - r0) + ", " + std::to_string(n1 * b1 - r1);
    std::string block = std::to_string(b0) + ", " + std::to_string(b1);
    std::string lam = "(" + join(params) + ")";
    std::string xi = *index_expr(rank, n0) + ", " + *index_expr(rank, n1);
    std::string oi = *index_expr(rank, n0) + ", " + *index_expr(rank, n1);
    bool alias = *rc::gen::element(false, false, true);
    int sem = *rc::gen::inRange(0, 3);
    std::ostringstream os;
    os << "kernel k:\n";
    os << "    grid = (" << join(grid) << (rank == 1 ? ",)" : ")") << "\n";
    if (sem > 0) {
      std::vector<std::string> s;
      for (int a = 0; a < rank; ++a)
        s.push_back(*rc::gen::element<std::string>("parallel", "arbitrary"));
      os << "    dimension_semantics = (" << join(s) << (rank == 1 ? ",)" : ")") << "\n";
    }
    os << "    in  x: f32[" << shape << "]  block=(" << block << ")  index=" << lam << " -> (" << xi << ")\n";
    os << "    out o: f32[" << shape << "]  block=(" << block << ")  index=" << lam << " -> (" << oi << ")\n";
    int axis = *rc::gen::inRange(0, rank);
    // 6..8: a scratch accumulator (carried across an axis, consumed at its
    // last step or at every step); 9: stores of two slices of the block.
    int body = *rc::gen::inRange(0, 10);
    if (body >= 6 && body <= 8) os << "    scratch acc: f32[" << block << "]\n";
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
    case 9:
      os << "        o[0:4, :] = x[0:4, :]\n        when " << pid << " % 2 == 0:\n"
         << "            o[4:, :] = x[4:, :] + 1\n";
      break;
    case 0: os << "        o[...] = x[...]\n"; break;
    case 1: os << "        o[...] += x[...]\n"; break;
    case 2:
      os << "        when " << pid << " == 0:\n            o[...] = zeros\n        o[...] += x[...]\n";
      break;
    case 3:
      os << "        when " << pid << " == num_programs(" << axis << ") - 1:\n            o[...] = x[...]\n";
      break;
    case 4: os << "        x[...] = x[...] + 1\n        o[...] = x[...]\n"; break;
    case 5: os << "        when " << pid << " % 2 == 1:\n            o[...] = x[...] + 1\n"; break;
    }
    return os.str();
  });
}

namespace {

std::string describe(const verifier::Finding &f) {
  std::ostringstream os;
  os << f.rule << "@" << f.loc.line << " [";
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
    a += describe(f) + "; ";
  for (const auto &f : en.findings)
    b += describe(f) + "; ";
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
      if (!out) return "out-of-bounds witness does not hold: " + describe(f);
    }
  }
  return "";
}

} // namespace pipecheck::properties
