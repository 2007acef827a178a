// A kernel's full check: the spec-level rules and the race checker on the
// program spec::lower emits for the same binding.
#include "spec/bind.hpp"
#include "spec/lower.hpp"
#include "verifier/check.hpp"
#include "verifier/races/races.hpp"

#include <set>

namespace pipecheck::verifier {

namespace {

// Gives each event of a lowered program's finding the grid point of the step
// that issued it, and says so in the message, the witness and the notes.
void locate_in_grid(Finding &f, const spec::Lowered &low) {
  std::optional<std::vector<std::int64_t>> at, other;
  for (std::size_t i = 0; i < f.witness.trace.size(); ++i) {
    TraceEvent &t = f.witness.trace[i];
    if (t.top_level < 0) continue;
    t.grid_point = low.point(low.step(t.top_level, t.iterations));
    if (t.anchor)
      at = t.grid_point;
    else if (!other)
      other = t.grid_point;
    // One note per trace event, in the same order (races::check_concrete).
    if (f.notes.size() == f.witness.trace.size()) {
      std::string &m = f.notes[i].message;
      const std::string head = "event " + std::to_string(t.index);
      if (m.rfind(head + ": ", 0) == 0)
        m = head + " at grid point " + spec::format_tuple(t.grid_point) + m.substr(head.size());
    }
  }
  if (at) f.witness.items.push_back({"grid_point", *at});
  if (other && other != at) f.witness.items.push_back({"other_grid_point", *other});
  f.message += " (in the lowered program";
  if (at) f.message += ", at grid point " + spec::format_tuple(*at);
  f.message += ")";
}

// The kernel operands whose hbm array or window a lowered statement names
// (an aliased output's hbm array is its input's, so it names both).
std::set<std::string> operands_of(const TraceEvent &t, const spec::Lowered &low) {
  std::set<std::string> names(t.buffers.begin(), t.buffers.end()), out;
  for (const auto &b : low.bindings)
    if (names.count(b.window) || (!b.hbm.empty() && names.count(b.hbm))) out.insert(b.operand);
  return out;
}

// A lowered index-out-of-bounds on a copy of an operand's window names a
// slice ("slice 64:32 is out of bounds"); say which block of which operand
// the index map gave, and along which dim it leaves the array: the first
// step, from the anchored one on, whose block is outside.
void name_block(Finding &f, const spec::KernelSpec &k, const spec::Lowered &low,
                const std::set<std::string> &ops, const CheckOptions &o) {
  std::optional<std::int64_t> from;
  for (const auto &t : f.witness.trace)
    if (t.anchor && t.top_level >= 0) from = low.step(t.top_level, t.iterations);
  if (!from) return;
  spec::Env env = spec::param_env(k.params, o.overrides);
  spec::Binding b = spec::bind_kernel(k, env);
  if (!b.kernel) return;
  const std::int64_t steps = spec::num_points(low.grid);
  for (std::size_t i = 0; i < b.kernel->operands.size(); ++i) {
    const auto &op = b.kernel->operands[i];
    if (!op.windowed || !ops.count(op.name)) continue;
    for (std::int64_t s = *from; s < steps; ++s) {
      const auto p = low.point(s);
      auto bi = spec::block_index(*b.kernel, i, p);
      if (!bi.value) return;
      for (std::size_t d = 0; d < bi.value->size(); ++d) {
        const std::int64_t x = (*bi.value)[d];
        if (x >= 0 && x < op.num_blocks[d]) continue;
        f.message = "the index_map of '" + op.name + "' maps grid point " + spec::format_tuple(p) +
                    " to block " + spec::format_tuple(*bi.value) + ": block index " + std::to_string(x) +
                    " along dim " + std::to_string(d) + " is outside [0, " +
                    std::to_string(op.num_blocks[d]) + "), so its copy " + f.message;
        f.witness.items.push_back({"block", *bi.value});
        f.witness.items.push_back({"dim", static_cast<std::int64_t>(d)});
        return;
      }
    }
  }
}

struct LoweredCheck {
  Status status = Status::unknown;
  std::vector<Finding> findings;
  /// Per finding: the operands its anchor statement touches.
  std::vector<std::set<std::string>> operands;
  std::string reason; ///< why unknown, or what was shown
};

LoweredCheck check_lowered(const spec::KernelSpec &k, const CheckOptions &o) {
  LoweredCheck out;
  spec::LowerOptions lo;
  lo.overrides = o.overrides;
  lo.target = o.target;
  lo.check_blocks = false; // the spec rules have evaluated every block index
  std::vector<spec::Diagnostic> errors;
  auto low = spec::lower(k, lo, errors);
  if (!low) {
    out.reason = "the lowered program is not checked: " +
                 (errors.empty() ? std::string("the kernel cannot be lowered") : errors.front().message);
    return out;
  }
  // The race checker walks a concrete program event by event; past this many
  // steps that costs seconds and memory for a verdict the spec rules mostly
  // decide already, so it is left undecided and says so.
  constexpr std::int64_t kMaxCheckedSteps = 1 << 16;
  const std::int64_t grid_steps = spec::num_points(low->grid);
  if (grid_steps > kMaxCheckedSteps) {
    out.reason = "the lowered program is not checked: its " + std::to_string(grid_steps) +
                 " grid steps are more than the " + std::to_string(kMaxCheckedSteps) +
                 " the race checker runs concretely (the all-N proof covers pipelines, not yet kernels)";
    return out;
  }
  // The program is concrete: every param is bound in its statements.
  CheckOptions po;
  po.timeout_ms = o.timeout_ms;
  po.n_max = o.n_max;
  Verdict v = check_program(low->program, po);
  out.status = v.status;
  out.findings = std::move(v.findings);
  for (auto &f : out.findings) {
    locate_in_grid(f, *low);
    std::set<std::string> ops;
    for (const auto &t : f.witness.trace)
      if (t.anchor) ops = operands_of(t, *low);
    if (f.rule == Rule::index_out_of_bounds) name_block(f, k, *low, ops, o);
    out.operands.push_back(std::move(ops));
  }
  if (v.status == Status::verified)
    out.reason = "the lowered program (" + std::to_string(grid_steps) + " grid steps) is race-free";
  else
    out.reason = "the lowered program: " + v.reason;
  return out;
}

} // namespace

Verdict check(const spec::KernelSpec &k, const CheckOptions &o) {
  Verdict v = check_spec_rules(k, o);
  if (!v.errors.empty()) return v;
  LoweredCheck low;
  if (cancelled())
    low.reason = "interrupted";
  else
    low = check_lowered(k, o);
  // One root cause, one finding: a spec-level finding explains what the
  // lowered program shows at its line or on its operand (docs/rules.md).
  std::set<int> lines;
  std::set<std::string> operands;
  // A block that reaches outside its array (ragged along a reduced dim, or an
  // index map out of bounds) is copied in clipped: its padding is what the
  // lowered program then reads or writes back uninitialized.
  bool clipped_blocks = false;
  for (const auto &f : v.findings) {
    clipped_blocks |= f.rule == Rule::partial_block_reduction || f.rule == Rule::index_out_of_bounds;
    lines.insert(f.loc.line);
    if (auto *name = f.witness.get<std::string>("operand")) operands.insert(*name);
    for (const auto &op : k.operands)
      if (op.loc.line == f.loc.line) operands.insert(op.name);
  }
  for (std::size_t i = 0; i < low.findings.size(); ++i) {
    bool explained = lines.count(low.findings[i].loc.line) > 0 ||
                     (clipped_blocks && low.findings[i].rule == Rule::uninitialized_read);
    for (const auto &op : low.operands[i])
      explained |= operands.count(op) > 0;
    if (!explained) v.findings.push_back(std::move(low.findings[i]));
  }

  std::string undecided;
  if (v.status == Status::unknown) undecided = v.reason;
  if (low.status == Status::unknown) undecided += (undecided.empty() ? "" : "; ") + low.reason;
  // A spec-level violation's reason already names its undecided rules.
  std::string spec_note = v.status == Status::violation ? v.reason : "";
  if (!v.findings.empty()) {
    v.status = Status::violation;
    v.reason = spec_note;
    if (!undecided.empty())
      v.reason += (v.reason.empty() ? "" : "; ") + ("some rules undecided: " + undecided);
  } else if (!undecided.empty()) {
    v.status = Status::unknown;
    v.reason = undecided;
  } else {
    v.status = Status::verified;
    v.reason = "every spec-level rule holds at every grid point; " + low.reason;
  }
  return v;
}

} // namespace pipecheck::verifier
