#include "properties/agreement.hpp"

#include "executor/run.hpp"
#include "properties/spec_rules_property.hpp"
#include "spec/eval.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "verifier/check.hpp"
#include "verifier/races/races.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"

#include <algorithm>
#include <sstream>

namespace pipecheck::properties {

namespace {

// ---- pipelines --------------------------------------------------------------

enum Mutation {
  none,
  drop_wait,
  move_wait,
  change_slot,
  shift_hbm,
  smaller_ring,
  change_delay,
  no_reset,
  short_result, // an undefined result one row longer than the loop writes
};

struct PipeShape {
  int in_slots = 1, distance = 0, out_slots = 1, lag = 0, body = 0;
  bool in_place = false; // results written back into A (hbm races) rather than B
  /// B starts undefined (`B[...] = undefined`, as a kernel's unaliased
  /// output): what the loop leaves unwritten is garbage in the result.
  bool undefined_result = false;
  int mutation = none, variant = 0;
};

std::string plus(const std::string &v, int k) {
  if (k == 0) return v;
  return v + (k > 0 ? " + " : " - ") + std::to_string(k > 0 ? k : -k);
}

std::string render_pipeline(const PipeShape &s) {
  int S = s.in_slots, T = s.out_slots, D = s.distance, L = s.lag;
  int prologue = D, loop = D;
  int a_shift = 0, b_shift = 0, fetch_slot_shift = 0, read_slot_shift = 0, store_slot_shift = 0,
      out_wait_slot_shift = 0;
  bool drop_in_wait = false, drop_out_wait = false, drop_drain = false, in_wait_after_compute = false,
       out_wait_before_start = false, reset = true, drain = L > 0;
  switch (s.mutation) {
  case drop_wait:
    if (s.variant % 3 == 0)
      drop_in_wait = true;
    else if (s.variant % 3 == 1 || L == 0)
      drop_out_wait = true;
    else
      drop_drain = true;
    break;
  case move_wait:
    if (s.variant % 2 == 0)
      in_wait_after_compute = true;
    else
      out_wait_before_start = true;
    break;
  case change_slot:
    if (s.variant % 4 == 0)
      fetch_slot_shift = 1;
    else if (s.variant % 4 == 1)
      read_slot_shift = 1;
    else if (s.variant % 4 == 2)
      store_slot_shift = 1;
    else
      out_wait_slot_shift = 1;
    break;
  case shift_hbm:
    if (s.variant % 4 == 0)
      a_shift = 1;
    else if (s.variant % 4 == 1)
      a_shift = -1;
    else if (s.variant % 4 == 2)
      b_shift = 1;
    else
      b_shift = -1;
    break;
  case smaller_ring:
    if ((s.variant % 2 == 0 && S > 1) || T == 1)
      S = std::max(1, S - 1);
    else
      T = std::max(1, T - 1);
    break;
  case change_delay:
    if (s.variant % 4 == 0)
      loop += 1;
    else if (s.variant % 4 == 1)
      prologue += 1;
    else if (s.variant % 4 == 2)
      prologue = loop = D + 1;
    else if (L == 0)
      L = 1; // the write-back waited one iteration later, same ring
    else
      L = 0, drain = true; // waited at once, and still drained after the loop
    break;
  case no_reset: reset = false; break;
  default: break;
  }
  const std::string St = std::to_string(S), Tt = std::to_string(T);
  auto slot = [](const std::string &v, int shift, const std::string &n) {
    return "(" + plus(v, shift) + ") % " + n;
  };
  std::ostringstream o;
  o << "pipeline p:\n"
    << "    param N >= 1\n"
    << "    hbm  A: f32[N, 8]\n"
    << "    hbm  B: f32[" << (s.mutation == short_result ? "N + 1" : "N") << ", 8]\n"
    << "    sram X[" << S << "]: f32[8]\n"
    << "    sram Y[" << T << "]: f32[8]\n";
  if (s.undefined_result) o << "    B[...] = undefined\n";
  if (prologue > 0)
    o << "    for q in range(min(" << prologue << ", N)):\n"
      << "        copy_in_start(A[q], X[q % " << S << "])\n";
  o << "    for i in range(N):\n";
  std::string fetch = "copy_in_start(A[" + plus(plus("i", loop), a_shift) + "], X[" +
                      slot(plus("i", loop), fetch_slot_shift, St) + "])\n";
  if (loop > 0)
    o << "        if i + " << loop << " < N:\n            " << fetch;
  else
    o << "        " << fetch;
  std::string in_wait = drop_in_wait ? "" : "        copy_in_wait(X[i % " + St + "])\n";
  std::string y = "Y[" + slot("i", store_slot_shift, Tt) + "]";
  std::string x = "X[" + slot("i", read_slot_shift, St) + "]";
  std::string compute = s.body == 0 ? "        " + y + " = " + x + " + 1\n"
                                    : (reset ? "        " + y + " = zeros\n" : std::string()) + "        " +
                                          y + " += " + x + "\n";
  std::string out_start =
      "        copy_out_start(Y[i % " + Tt + "], " + (s.in_place ? "A[" : "B[") + plus("i", b_shift) + "])\n";
  std::string out_wait;
  if (!drop_out_wait) {
    if (L == 0)
      out_wait = "        copy_out_wait(Y[" + slot("i", out_wait_slot_shift, Tt) + "])\n";
    else
      out_wait =
          "        if i > 0:\n            copy_out_wait(Y[" + slot("i - 1", out_wait_slot_shift, Tt) + "])\n";
  }
  if (in_wait_after_compute)
    o << compute << in_wait;
  else
    o << in_wait << compute;
  if (out_wait_before_start)
    o << out_wait << out_start;
  else
    o << out_start << out_wait;
  if (drain && !drop_drain) o << "    copy_out_wait(Y[(N - 1) % " << T << "])\n";
  return o.str();
}

// ---- kernels ------------------------------------------------------------------

enum KernelMutation {
  k_none,
  k_shift_index,     // an index map shifted by one block (past the end)
  k_ragged,          // a shape that the block does not divide
  k_no_init,         // the accumulator never reset
  k_wrong_init,      // reset at the wrong step of the reduction
  k_reduce_first,    // the reduction on the first grid axis
  k_revisit,         // the output's index map revisits (i // 2)
  k_parallel_reduce, // the reduction axis marked parallel
};

std::string join(const std::vector<std::string> &v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + v[i];
  return s;
}

std::string tuple(const std::vector<std::string> &v) { return "(" + join(v) + (v.size() == 1 ? ",)" : ")"); }

// A copy (elementwise) or a sum over the last grid axis, rank 1-3, correct or
// with one mutation.
std::string structured_kernel_text() {
  const int rank = *rc::gen::inRange(1, 4);
  const bool reduce = *rc::gen::arbitrary<bool>();
  const int mutation = *rc::gen::weightedElement<int>({{6, k_none},
                                                       {1, k_shift_index},
                                                       {1, k_ragged},
                                                       {1, k_no_init},
                                                       {1, k_wrong_init},
                                                       {1, k_reduce_first},
                                                       {1, k_revisit},
                                                       {1, k_parallel_reduce}});
  const std::int64_t bR = 8, bC = *rc::gen::element<std::int64_t>(8, 16);
  const std::int64_t nR = *rc::gen::inRange(1, 4), nJ = *rc::gen::inRange(1, 3), K = *rc::gen::inRange(1, 5);
  const char *ax[] = {"i", "j", "k"};
  std::vector<std::string> params(ax, ax + rank), grid, sem, xi, oi;
  std::int64_t R = nR * bR, xC = 0, oC = 0;
  std::string body;
  int red_axis = rank - 1;
  if (!reduce) {
    // rank 1: rows; rank 2: rows x columns; rank 3: and a trailing axis that
    // revisits the same blocks consecutively (rewritten each time).
    grid = {std::to_string(nR)};
    xi = {"i", "0"};
    xC = bC;
    if (rank >= 2) grid.push_back(std::to_string(nJ)), xi[1] = "j", xC = nJ * bC;
    if (rank == 3) grid.push_back(std::to_string(K));
    oi = xi;
    oC = xC;
    for (int a = 0; a < rank; ++a)
      sem.push_back(a == 2 ? "arbitrary" : "parallel");
    body = "        o[...] = x[...] + 1\n";
  } else {
    // The last axis sums x's column blocks into o's.
    if (rank == 1) {
      grid = {std::to_string(K)};
      R = bR;
      xi = {"0", "i"}, oi = {"0", "0"};
      xC = K * bC, oC = bC;
    } else if (rank == 2) {
      grid = {std::to_string(nR), std::to_string(K)};
      xi = {"i", "j"}, oi = {"i", "0"};
      xC = K * bC, oC = bC;
    } else {
      grid = {std::to_string(nR), std::to_string(nJ), std::to_string(K)};
      xi = {"i", "j * " + std::to_string(K) + " + k"}, oi = {"i", "j"};
      xC = nJ * K * bC, oC = nJ * bC;
    }
    for (int a = 0; a < rank; ++a)
      sem.push_back(a == red_axis ? "arbitrary" : "parallel");
    std::string init = "0";
    if (mutation == k_wrong_init) init = K > 1 ? "1" : "num_programs(" + std::to_string(red_axis) + ") - 1";
    if (mutation != k_no_init)
      body = "        when program_id(" + std::to_string(red_axis) + ") == " + init +
             ":\n            o[...] = zeros\n";
    body += "        o[...] += x[...]\n";
    if (mutation == k_reduce_first && rank >= 2) {
      // The same sum, with the reduction moved to the first grid axis.
      std::rotate(grid.rbegin(), grid.rbegin() + 1, grid.rend());
      std::vector<std::string> renamed(params.size());
      for (int a = 0; a < rank; ++a)
        renamed[static_cast<std::size_t>((a + 1) % rank)] = params[static_cast<std::size_t>(a)];
      params = renamed; // the lambda's names in grid order: the old last axis is now first
      sem.clear();
      for (int a = 0; a < rank; ++a)
        sem.push_back(a == 0 ? "arbitrary" : "parallel");
      red_axis = 0;
      body = "        when program_id(0) == 0:\n            o[...] = zeros\n        o[...] += x[...]\n";
    }
    if (mutation == k_parallel_reduce) sem[static_cast<std::size_t>(red_axis)] = "parallel";
  }
  if (mutation == k_shift_index) {
    auto &m = *rc::gen::element(0, 1) ? xi : oi;
    m[0] = "(" + m[0] + ") + 1";
  }
  if (mutation == k_revisit) oi[0] = "(" + oi[0] + ") // 2";
  std::int64_t xR = R, oR = R;
  if (mutation == k_ragged) {
    if (*rc::gen::arbitrary<bool>())
      xR -= 3, oR -= 3;
    else
      xC -= 5, oC = reduce ? oC : xC;
  }
  auto buffered = [] {
    int b = *rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {1, 2}, {1, 3}});
    return b > 0 ? "  buffered=" + std::to_string(b) : std::string();
  };
  std::ostringstream o;
  o << "kernel k:\n    grid = " << tuple(grid) << "\n";
  if (*rc::gen::element(true, true, false)) o << "    dimension_semantics = " << tuple(sem) << "\n";
  // A quarter run on Mosaic GPU (one pipeline per CTA), the rest on TPU.
  if (*rc::gen::element(false, false, false, true)) o << "    target = h200\n";
  const std::string lam = tuple(params);
  o << "    in  x: f32[" << xR << ", " << xC << "]  block=(" << bR << ", " << bC << ")  index=" << lam
    << " -> (" << join(xi) << ")" << buffered() << "\n";
  o << "    out o: f32[" << oR << ", " << oC << "]  block=(" << bR << ", " << bC << ")  index=" << lam
    << " -> (" << join(oi) << ")" << buffered() << "\n";
  o << "    body:\n" << body;
  return o.str();
}

// ---- shared -----------------------------------------------------------------

std::string describe(const verifier::Finding &f) {
  return verifier::to_string(f.rule) + "@" + std::to_string(f.loc.line);
}

bool has(const std::vector<verifier::Finding> &fs, const verifier::Finding &f) {
  for (const auto &g : fs)
    if (g.rule == f.rule && g.loc.line == f.loc.line) return true;
  return false;
}

std::string first_failure(const executor::RunReport &r) {
  for (const auto &run : r.runs)
    if (run.status != executor::RunStatus::pass)
      return std::string(executor::to_string(run.mode)) + " seed " + std::to_string(run.seed) + ": " +
             executor::to_string(run.status) + ": " + run.reason;
  return "";
}

void tally_runs(Agreement &a, const executor::RunReport &r) {
  for (const auto &run : r.runs) {
    ++a.runs;
    if (run.status != executor::RunStatus::pass) ++a.failed_runs;
  }
}

executor::RunOptions run_options() {
  executor::RunOptions ro;
  ro.seed = 1;
  ro.dma_threads = 1;
  ro.max_events = 0;
  ro.max_event_bytes = 0;
  return ro;
}

// ---- pipelines: check and run ------------------------------------------------

// The trip-count param of a pipeline: its one param without a value ("" when
// every param is bound, or when there are several).
std::string symbolic_param(const spec::Program &p) {
  std::string name;
  int count = 0;
  for (const auto &q : p.params)
    if (!q.value) name = q.name, ++count;
  return count == 1 ? name : "";
}

Agreement agree_pipeline(const spec::Program &p) {
  Agreement a;
  verifier::CheckOptions co;
  co.n_max = 8;
  verifier::Verdict v = verifier::check(p, co);
  a.verdict = verifier::to_string(v.status);
  a.findings = static_cast<int>(v.findings.size());
  const std::string param = symbolic_param(p);
  // The bindings run: the first kAgreementMaxN values of N from its lower
  // bound (1 when it has none), or the one binding of a concrete program.
  std::vector<spec::Env> bindings;
  if (param.empty()) {
    bindings.push_back({});
  } else {
    std::int64_t lo = 1;
    std::optional<std::int64_t> hi;
    for (const auto &prm : p.params)
      if (prm.name == param) {
        if (prm.lo)
          if (auto l = spec::eval_int(*prm.lo, spec::param_env(p.params, {}))) lo = *l;
        if (prm.hi) hi = spec::eval_int(*prm.hi, spec::param_env(p.params, {}));
      }
    for (std::int64_t n = lo; n < lo + kAgreementMaxN && (!hi || n <= *hi); ++n)
      bindings.push_back({{param, n}});
  }
  auto at = [&](const spec::Env &env) {
    return env.empty() ? std::string() : " at " + param + " = " + std::to_string(env.begin()->second);
  };
  // check_concrete binds only what its env says; the params with a value
  // (`param B = 2`) are added to each binding where it is called.
  bool any_ran = false;
  for (const auto &env : bindings) {
    executor::RunOptions ro = run_options();
    ro.overrides = env;
    executor::RunReport r = executor::run_all_modes(p, ro);
    tally_runs(a, r);
    if (r.status == executor::RunStatus::bad_input || r.status == executor::RunStatus::error) {
      if (v.status == verifier::Status::verified)
        a.disagreements.push_back("verified, but run" + at(env) + " says " + first_failure(r));
      continue;
    }
    any_ran = true;
    if (r.status == executor::RunStatus::pass) continue;
    // (a) and (b): a failing run has a finding, at this very binding.
    if (v.status == verifier::Status::verified)
      a.disagreements.push_back("verified, but run" + at(env) + " fails: " + first_failure(r));
    else if (v.status == verifier::Status::unknown)
      a.unknown_with_failing_run = true;
    else if (verifier::races::check_concrete(p, spec::param_env(p.params, env), param).empty())
      a.disagreements.push_back("run" + at(env) + " fails (" + first_failure(r) +
                                "), but the concrete check" + at(env) + " finds nothing");
  }
  if (!any_ran && v.status != verifier::Status::verified) a.verdict = "skip";
  // (c) each witness reproduces at its binding.
  for (const auto &f : v.findings) {
    spec::Env env;
    if (!param.empty()) {
      if (auto *k = f.witness.get<std::int64_t>(param)) env[param] = *k;
      if (env.empty()) {
        a.disagreements.push_back("finding " + describe(f) + " has no witness " + param);
        a.not_reproduced.push_back(a.disagreements.back());
        continue;
      }
    }
    if (!has(verifier::races::check_concrete(p, spec::param_env(p.params, env), param), f)) {
      a.disagreements.push_back("witness" + at(env) + " of " + describe(f) + " does not reproduce");
      a.not_reproduced.push_back(a.disagreements.back());
      continue;
    }
    ++a.reproduced;
    if (env.empty() || env.begin()->second <= kAgreementMaxN) {
      executor::RunOptions ro = run_options();
      ro.overrides = env;
      if (executor::run_all_modes(p, ro).status == executor::RunStatus::fail) ++a.shown_by_run;
    }
  }
  return a;
}

// ---- kernels: check and run ----------------------------------------------------

bool from_lowered_program(const verifier::Finding &f) {
  for (const auto &t : f.witness.trace)
    if (!t.grid_point.empty()) return true;
  return false;
}

Agreement agree_kernel(const spec::KernelSpec &k) {
  Agreement a;
  // The solver's verdict, not the evaluation check() uses on small grids:
  // witnesses are then reproduced by an independent enumeration.
  verifier::CheckOptions co;
  co.enumerate_max_points = 0;
  verifier::Verdict v = verifier::check(k, co);
  if (!v.errors.empty()) {
    a.verdict = "skip";
    return a;
  }
  a.verdict = verifier::to_string(v.status);
  a.findings = static_cast<int>(v.findings.size());
  executor::RunReport r = executor::run_all_modes(k, run_options());
  tally_runs(a, r);
  bool ran = r.status == executor::RunStatus::pass || r.status == executor::RunStatus::fail;
  if (!ran) {
    if (v.status == verifier::Status::verified)
      a.disagreements.push_back("verified, but run says " + first_failure(r));
    else
      a.verdict = "skip";
  } else if (r.status == executor::RunStatus::fail) {
    if (v.status == verifier::Status::verified)
      a.disagreements.push_back("verified, but run fails: " + first_failure(r));
    else if (v.status == verifier::Status::unknown)
      a.unknown_with_failing_run = true;
  }
  // (c) Spec-level witnesses reproduce by enumerating the grid; the lowered
  // program's by its concrete race check, at the same grid point.
  std::optional<verifier::rules::RuleOutcome> enumerated;
  std::optional<spec::Lowered> lowered;
  std::vector<verifier::Finding> lowered_findings;
  for (const auto &f : v.findings) {
    if (from_lowered_program(f)) {
      if (!lowered) {
        std::vector<spec::Diagnostic> errors;
        lowered = spec::lower(k, {}, errors);
        if (!lowered) {
          a.disagreements.push_back("finding " + describe(f) +
                                    " of a lowered program, but the kernel does not lower");
          break;
        }
        lowered_findings = verifier::races::check_concrete(lowered->program, {});
      }
      const auto *at = f.witness.get<std::vector<std::int64_t>>("grid_point");
      bool found = false;
      for (const auto &g : lowered_findings) {
        if (g.rule != f.rule || g.loc.line != f.loc.line) continue;
        for (const auto &t : g.witness.trace)
          if (t.anchor && t.top_level >= 0)
            found = found || !at || lowered->point(lowered->step(t.top_level, t.iterations)) == *at;
      }
      if (!found) {
        a.disagreements.push_back("lowered-program witness of " + describe(f) + " does not reproduce");
        a.not_reproduced.push_back(a.disagreements.back());
        continue;
      }
    } else {
      if (!enumerated) {
        auto built = verifier::rules::build_model(k, {}, std::nullopt);
        if (!built.model) {
          a.disagreements.push_back("finding " + describe(f) + ", but the kernel has no model");
          break;
        }
        enumerated = verifier::rules::check_enumerated(*built.model);
        // (and the visit passes every checker runs by enumeration)
        const auto visits = verifier::rules::check_empty_visits(*built.model, 1 << 16);
        enumerated->findings.insert(enumerated->findings.end(), visits.findings.begin(),
                                    visits.findings.end());
      }
      bool found = false;
      for (const auto &g : enumerated->findings)
        found = found || (g.rule == f.rule && g.loc.line == f.loc.line &&
                          verifier::rules::witness_key(g.witness) == verifier::rules::witness_key(f.witness));
      if (!found && has(enumerated->findings, f)) found = true; // rules whose witness is not a grid point
      if (!found) {
        a.disagreements.push_back("spec-rule witness of " + describe(f) +
                                  " does not reproduce by enumeration");
        a.not_reproduced.push_back(a.disagreements.back());
        continue;
      }
    }
    ++a.reproduced;
    if (r.status == executor::RunStatus::fail) ++a.shown_by_run;
  }
  return a;
}

} // namespace

rc::Gen<std::string> agreement_pipeline_text(bool mutated) {
  return rc::gen::exec([mutated]() {
    PipeShape s;
    s.distance = *rc::gen::inRange(0, 3);
    s.in_slots = *rc::gen::inRange(s.distance + 1, 4);
    s.lag = *rc::gen::inRange(0, 2);
    s.out_slots = *rc::gen::inRange(s.lag + 1, 3);
    s.body = *rc::gen::inRange(0, 2);
    s.in_place = *rc::gen::element(false, false, true);
    // (Not among the unmutated, every one of which must be verified for
    // every N: a followed result that grows with N is checked up to the
    // concrete bound only, `unknown` past it.)
    s.undefined_result = mutated && !s.in_place && *rc::gen::element(false, false, true);
    s.mutation = *rc::gen::weightedElement<int>({{5, none},
                                                 {2, drop_wait},
                                                 {2, move_wait},
                                                 {2, change_slot},
                                                 {2, shift_hbm},
                                                 {1, smaller_ring},
                                                 {2, change_delay},
                                                 {1, no_reset},
                                                 {1, short_result}});
    if (!mutated || (s.mutation == short_result && !s.undefined_result)) s.mutation = none;
    if (s.mutation == no_reset) s.body = 1;
    s.variant = *rc::gen::inRange(0, 12);
    return render_pipeline(s);
  });
}

rc::Gen<std::string> agreement_kernel_text() {
  return rc::gen::exec([]() {
    if (*rc::gen::element(true, true, false)) return structured_kernel_text();
    // The spec-rule property's kernels (ragged shapes, revisiting and
    // offset maps, aliases, input writes), with buffer counts added.
    std::string text = *small_kernel_text();
    std::istringstream in(text);
    std::ostringstream out;
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("    in  x:", 0) == 0 || line.rfind("    out o:", 0) == 0) {
        int b = *rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {1, 2}, {1, 3}});
        if (b > 0) line += "  buffered=" + std::to_string(b);
      }
      out << line << "\n";
    }
    return out.str();
  });
}

Agreement check_agreement(const std::string &text) {
  auto parsed = spec::parse_and_validate(spec::SourceFile::from_string("agree.pk", text));
  if (!parsed.file || parsed.file->units.size() != 1) return Agreement{"skip", {}, 0, 0, 0, 0, 0, false, {}};
  return check_agreement(parsed.file->units[0]);
}

Agreement check_agreement(const std::variant<spec::KernelSpec, spec::Program> &unit) {
  try {
    if (const auto *p = std::get_if<spec::Program>(&unit)) return agree_pipeline(*p);
    return agree_kernel(std::get<spec::KernelSpec>(unit));
  } catch (const std::exception &e) {
    Agreement a;
    a.verdict = "error";
    a.disagreements.push_back(std::string("exception: ") + e.what());
    return a;
  }
}

void AgreementTally::add(const std::string &text, const Agreement &a) {
  ++cases;
  if (a.verdict == "verified")
    ++verified;
  else if (a.verdict == "violation")
    ++violation;
  else if (a.verdict == "unknown")
    ++unknown;
  else if (a.verdict == "skip")
    ++skipped;
  runs += a.runs;
  failed_runs += a.failed_runs;
  findings += a.findings;
  reproduced += a.reproduced;
  shown_by_run += a.shown_by_run;
  unknown_with_failing_run += a.unknown_with_failing_run;
  for (const auto &n : a.not_reproduced)
    not_reproduced.emplace_back(text, n);
  if (!a.disagreements.empty()) disagreements.emplace_back(text, a);
}

std::string AgreementTally::summary() const {
  std::ostringstream o;
  o << cases << " cases: " << verified << " verified, " << violation << " violation, " << unknown
    << " unknown (" << unknown_with_failing_run << " of them with a failing run), " << skipped << " skipped; "
    << runs << " runs, " << failed_runs << " failed; " << findings << " findings, " << reproduced
    << " witnesses reproduced, " << not_reproduced.size() << " not reproduced, " << shown_by_run
    << " also shown by run; " << disagreements.size() << " disagreements";
  return o.str();
}

AgreementTally run_agreement(const rc::Gen<std::string> &gen, std::int64_t cases, std::uint64_t seed,
                             const std::function<void(const std::string &, const Agreement &)> &each) {
  AgreementTally t;
  rc::Random random(seed);
  for (std::int64_t i = 0; i < cases; ++i) {
    rc::Random r = random.split();
    std::string text = gen(r, static_cast<int>(i % 100)).value();
    Agreement a = check_agreement(text);
    if (each) each(text, a);
    t.add(text, a);
  }
  return t;
}

} // namespace pipecheck::properties
