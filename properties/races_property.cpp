#include "properties/races_property.hpp"

#include "spec/parse.hpp"
#include "verifier/races/races.hpp"

#include <set>
#include <sstream>

namespace pipecheck::properties {

namespace {

struct Shape {
  int slots, distance, out_slots, lag, mutation;
};

std::string render(const Shape &s) {
  const int S = s.slots, D = s.distance, T = s.out_slots;
  std::ostringstream o;
  o << "pipeline p:\n"
    << "    param N >= 1\n"
    << "    hbm  A: f32[N + 8, 8]\n"
    << "    hbm  B: f32[N + 8, 8]\n"
    << "    sram X[" << S << "]: f32[8]\n"
    << "    sram Y[" << T << "]: f32[8]\n";
  if (D > 0)
    o << "    for q in range(min(" << D << ", N)):\n"
      << "        copy_in_start(A[q], X[q % " << S << "])\n";
  o << "    for i in range(N):\n";
  std::string fetch_slot = s.mutation == 3 ? "(i + " + std::to_string(D + 1) + ") % " + std::to_string(S)
                                           : "(i + " + std::to_string(D) + ") % " + std::to_string(S);
  if (D > 0)
    o << "        if i + " << D << " < N:\n"
      << "            copy_in_start(A[i + " << D << "], X[" << fetch_slot << "])\n";
  else
    o << "        copy_in_start(A[i], X[" << fetch_slot << "])\n";
  std::string wait = "        copy_in_wait(X[i % " + std::to_string(S) + "])\n";
  std::string compute = "        Y[i % " + std::to_string(T) + "] = X[i % " + std::to_string(S) + "] + 1\n";
  if (s.mutation == 2)
    o << compute << wait; // compute before the wait
  else if (s.mutation == 1)
    o << compute; // the wait dropped
  else if (s.mutation == 5)
    o << wait << wait << compute; // the wait doubled
  else
    o << wait << compute;
  o << "        copy_out_start(Y[i % " << T << "], B[i])\n";
  if (s.lag == 0) {
    o << "        copy_out_wait(Y[i % " << T << "])\n";
  } else {
    o << "        if i > 0:\n"
      << "            copy_out_wait(Y[(i - 1) % " << T << "])\n";
    if (s.mutation != 4) o << "    copy_out_wait(Y[(N - 1) % " << T << "])\n"; // 4: no drain
  }
  return o.str();
}

std::set<std::pair<std::string, int>> keys(const std::vector<verifier::Finding> &fs) {
  std::set<std::pair<std::string, int>> out;
  for (auto &f : fs)
    out.insert({std::string(verifier::id(f.rule)), f.loc.line});
  return out;
}

std::string show(const std::set<std::pair<std::string, int>> &s) {
  std::string out = "{";
  for (auto &[r, l] : s)
    out += " " + r + "@" + std::to_string(l);
  return out + " }";
}

} // namespace

rc::Gen<std::string> small_pipeline_text() {
  return rc::gen::map(
      rc::gen::tuple(rc::gen::inRange(1, 4), rc::gen::inRange(0, 4), rc::gen::inRange(1, 3),
                     rc::gen::inRange(0, 2),
                     rc::gen::weightedElement<int>({{4, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}})),
      [](const std::tuple<int, int, int, int, int> &t) {
        auto [S, D, T, L, M] = t;
        return render({S, D, T, L, M});
      });
}

std::string all_n_status(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("p.pk", text));
  if (!r.file || r.file->units.size() != 1 || !std::holds_alternative<spec::Program>(r.file->units[0]))
    return "skip";
  return verifier::to_string(verifier::check_program(std::get<spec::Program>(r.file->units[0]), {}).status);
}

std::string compare_all_n_with_exhaustive(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("p.pk", text));
  if (!r.file || r.file->units.size() != 1 || !std::holds_alternative<spec::Program>(r.file->units[0]))
    return "skip";
  const auto &p = std::get<spec::Program>(r.file->units[0]);
  verifier::CheckOptions opts;
  opts.n_max = 8;
  auto v = verifier::check_program(p, opts);
  if (v.status == verifier::Status::unknown) return "unknown: " + v.reason;
  std::set<std::pair<std::string, int>> concrete;
  std::int64_t first_bad = 0;
  auto run_n = [&](std::int64_t n) {
    spec::Env env{{"N", n}};
    auto fs = verifier::races::check_concrete(p, env, "N");
    if (!fs.empty() && !first_bad) first_bad = n;
    for (auto &k : keys(fs))
      concrete.insert(k);
  };
  for (std::int64_t n = 1; n <= 8; ++n)
    run_n(n);
  if (v.status == verifier::Status::verified) {
    for (std::int64_t n = 9; n <= 16; ++n)
      run_n(n);
    if (!concrete.empty())
      return "verified, but concretely " + show(concrete) + " at N = " + std::to_string(first_bad);
    return "";
  }
  // violation: the findings are those of the concrete runs N <= 8 (the
  // checker stops at the first bad trip counts), each at its smallest N.
  if (!concrete.empty() && keys(v.findings) != concrete)
    return "all-N " + show(keys(v.findings)) + " vs concrete " + show(concrete);
  for (auto &f : v.findings) {
    if (f.witness.items.empty() || f.witness.items[0].key != "N") return "witness without N";
    std::int64_t n = std::get<std::int64_t>(f.witness.items[0].value);
    spec::Env env{{"N", n}};
    verifier::races::Machine m(p, env);
    m.set_record_graph(true);
    auto run = m.run();
    if (!verifier::races::witnesses_reproduce(run)) return "a race is ordered on the graph";
    bool found = false;
    for (auto &raw : run.findings)
      found = found || (raw.rule == f.rule && run.events[raw.anchor_event].stmt->loc.line == f.loc.line);
    if (!found)
      return "witness N = " + std::to_string(n) + " does not reproduce " + std::string(verifier::id(f.rule));
    for (std::int64_t k = 1; k < n; ++k) {
      spec::Env e{{"N", k}};
      for (auto &g : verifier::races::check_concrete(p, e, "N"))
        if (g.rule == f.rule && g.loc.line == f.loc.line) return "witness N is not the smallest";
    }
  }
  return "";
}

} // namespace pipecheck::properties
