#include "verifier/check.hpp"
#include "spec/nested.hpp"

#include "verifier/races/races.hpp"
#include "verifier/rules/enumerate.hpp"
#include "verifier/rules/findings.hpp"
#include "verifier/rules/model.hpp"
#include "verifier/rules/symbolic.hpp"
#include "verifier/rules/targets.hpp"
#include "verifier/smt/smt.hpp"

#include <algorithm>
#include <chrono>
#include <set>

namespace pipecheck::verifier {

void cancel_all() { smt::interrupt_all(); }
bool cancelled() { return smt::interrupted(); }

std::shared_ptr<rules::QueryCache> new_query_cache() { return std::make_shared<rules::QueryCache>(); }

namespace {

// Whether `e` divides by something other than a constant (a literal or a
// param: a group-M swizzle's `p % min(n - f, 8)`), or divides anything but
// one variable (a flattened grid decoded in levels, `(p // 72) // 8`; a ring
// order's `(i + k) % 80`).
bool divides_hard(const spec::Expr &e, const std::set<std::string> &params) {
  using spec::Op;
  if ((e.op == Op::FloorDiv || e.op == Op::Mod) && e.args.size() == 2) {
    const spec::Expr &d = e.args[1], &x = e.args[0];
    const bool constant = d.op == Op::Int || (d.op == Op::Name && params.count(d.name));
    // (one variable divided, `i // 72`, `program_id(0) % 2`, the solver takes well)
    const bool one = x.op == Op::Name || (x.op == Op::Call && x.name == "program_id");
    if (!constant || !one) return true;
  }
  return std::any_of(e.args.begin(), e.args.end(),
                     [&](const spec::Expr &a) { return divides_hard(a, params); });
}

// The solver's integer division terms make queries over such index maps and
// guards slow (tens of seconds at 4608 points) or unsupported (a non-constant
// divisor); evaluating every point is exact, so such a kernel is enumerated
// on a larger grid, as one with given prefetch contents is.
bool hard_divisions(const spec::KernelSpec &k) {
  std::set<std::string> params;
  for (const auto &p : k.params)
    params.insert(p.name);
  for (const auto &o : k.operands)
    if (o.index_map)
      for (const auto &r : o.index_map->results)
        if (divides_hard(r, params)) return true;
  bool hard = false;
  spec::for_each_stmt(k.body, [&](const spec::Stmt &s) {
    spec::for_each_expr(s, [&](const spec::Expr &e) { hard = hard || divides_hard(e, params); });
  });
  return hard;
}

constexpr std::int64_t kHardDivisionPoints = std::int64_t{1} << 16;

// Whether some Triton output is too large for the element pass and is
// decided by the solver over its programs' static boxes: only
// check_symbolic asks that, so such a model is not enumerated (a causal
// attention of 8 x 32 heads and 8192 tokens cut to 576 programs still
// stores 4.7M elements of o).
bool outputs_for_the_solver(const rules::KernelModel &m) {
  for (std::size_t i = 0; i < m.operands.size(); ++i) {
    const auto &o = m.operands[i];
    if (o.role == spec::Role::out && o.windowed && rules::needs_element_coverage(m, i) &&
        rules::element_pass_by_solver(m, i))
      return true;
  }
  return false;
}

Verdict spec_rules(const spec::KernelSpec &k, const CheckOptions &o, const spec::PrefetchSpace *open,
                   const spec::PrefetchContents *start) {
  Verdict v;
  auto built = rules::build_model(k, o.overrides, o.target);
  if (built.error) {
    v.status = Status::unknown;
    v.reason = "bad input: " + built.error->message;
    v.errors.push_back(std::move(*built.error));
    return v;
  }
  if (!built.model) {
    v.status = Status::unknown;
    v.reason = built.unknown_reason;
    return v;
  }
  v.sram_bytes = rules::sram_bytes(*built.model);
  if (built.model->target)
    if (const spec::Target *t = spec::find_target(*built.model->target))
      v.sram_budget_bytes = rules::sram_budget(*t, built.model->vmem_limit_bytes);
  // Small grids: evaluating every point is exact and much cheaper than the
  // solver's queries (fuzz checks hundreds of such configurations a second).
  // Open prefetch contents are quantified by the solver.
  const std::int64_t points = built.model->num_points();
  const std::int64_t enumerate_max = o.enumerate_max_points > 0 && points > o.enumerate_max_points &&
                                             points <= kHardDivisionPoints && hard_divisions(k)
                                         ? kHardDivisionPoints
                                         : o.enumerate_max_points;
  // Open contents read only in copy addresses (a page table): the other
  // rules do not depend on them and are evaluated on a small grid too.
  const bool addresses_only =
      open && points <= enumerate_max && !rules::reads_open_contents_outside_copy_addresses(*built.model);
  rules::RuleOutcome r = addresses_only ? rules::check_enumerated(*built.model, enumerate_max)
                         : open         ? rules::check_symbolic(*built.model, o.timeout_ms, *open, *start)
                         : points <= enumerate_max && !outputs_for_the_solver(*built.model)
                             ? rules::check_enumerated(*built.model, enumerate_max)
                             : rules::check_symbolic(*built.model, o.timeout_ms, o.query_cache.get());
  auto add = [&](const rules::RuleOutcome &a) {
    r.findings.insert(r.findings.end(), a.findings.begin(), a.findings.end());
    r.unknown.insert(r.unknown.end(), a.unknown.begin(), a.unknown.end());
    r.errors.insert(r.errors.end(), a.errors.begin(), a.errors.end());
  };
  if (addresses_only && r.errors.empty())
    add(rules::check_copy_addresses(*built.model, o.timeout_ms, *open, *start));
  if (r.errors.empty()) add(rules::check_prefetch_reads(*built.model, o.timeout_ms, open, start));
  // (Open contents leave guards without a value at a point: not enumerated.)
  constexpr std::int64_t kEmptyVisitPoints = 1 << 20;
  if (r.errors.empty() && !open) add(rules::check_any_output_coverage(*built.model, o.timeout_ms));
  if (r.errors.empty() && !open) {
    // (A store the other rules already report is one finding: one root cause.)
    rules::RuleOutcome e = rules::check_empty_visits(*built.model, kEmptyVisitPoints);
    // A crossing seen only in a scratch's own update is another view of any
    // fault already found on that scratch (its carry across a parallel axis).
    std::erase_if(e.findings, [&](const Finding &f) {
      const auto *via = f.witness.get<std::string>("carried_by");
      const auto *op = f.witness.get<std::string>("operand");
      return std::any_of(r.findings.begin(), r.findings.end(), [&](const Finding &g) {
        const auto *gop = g.witness.get<std::string>("operand");
        return (g.rule == f.rule && g.loc == f.loc) || (via && op && gop && *gop == *op);
      });
    });
    add(e);
  }
  if (!r.errors.empty()) {
    v.status = Status::unknown;
    v.reason = "bad input: " + r.errors.front().message;
    v.errors = std::move(r.errors);
    return v;
  }
  v.findings = std::move(r.findings);
  v.unstored_revisits = std::move(r.unstored_revisits);
  std::string unknown;
  for (const auto &u : r.unknown)
    unknown += (unknown.empty() ? "" : "; ") + u;
  if (!v.findings.empty()) {
    v.status = Status::violation;
    v.reason = unknown.empty() ? "" : "some rules undecided: " + unknown;
  } else if (!unknown.empty()) {
    v.status = Status::unknown;
    v.reason = unknown;
  } else {
    v.status = Status::verified;
    v.reason = "every spec-level rule holds at every grid point";
    if (open) v.reason += " for all prefetch contents the constraints allow";
  }
  return v;
}

} // namespace

Verdict check_spec_rules(const spec::KernelSpec &k, const CheckOptions &o) {
  // A nested emit_pipeline: the rules hold for its flattened kernel
  // (spec/nested.hpp), the inner BlockSpecs at every outer grid point.
  if (spec::has_emit_pipeline(k.body)) return spec_rules(spec::flatten_nested(k), o, nullptr, nullptr);
  return spec_rules(k, o, nullptr, nullptr);
}

Verdict check_spec_rules(const spec::KernelSpec &k, const CheckOptions &o, const spec::PrefetchSpace &open,
                         const spec::PrefetchContents &start) {
  return spec_rules(k, o, &open, &start);
}

Verdict check(const spec::Program &p, const CheckOptions &o) { return check_program(p, o); }

Verdict check(const std::variant<spec::KernelSpec, spec::Program> &u, const CheckOptions &o) {
  if (cancelled()) {
    Verdict v;
    v.status = Status::unknown;
    v.reason = "interrupted";
    return v;
  }
  auto t0 = std::chrono::steady_clock::now();
  Verdict v = std::visit([&](const auto &x) { return check(x, o); }, u);
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return v;
}

} // namespace pipecheck::verifier
