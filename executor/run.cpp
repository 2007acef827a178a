#include "executor/run.hpp"

#include "executor/oracle.hpp"
#include "executor/program_runner.hpp"
#include "spec/lower.hpp"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace pipecheck::executor {

const char *to_string(RunStatus s) {
  switch (s) {
  case RunStatus::pass: return "pass";
  case RunStatus::fail: return "fail";
  case RunStatus::bad_input: return "bad_input";
  case RunStatus::error: return "error";
  }
  return "?";
}

const char *to_string(DmaMode m) {
  switch (m) {
  case DmaMode::eager: return "eager";
  case DmaMode::on_wait: return "on_wait";
  case DmaMode::random: return "random";
  case DmaMode::synchronous: return "synchronous";
  }
  return "?";
}

std::optional<DmaMode> parse_dma_mode(const std::string &s) {
  for (DmaMode m : {DmaMode::eager, DmaMode::on_wait, DmaMode::random, DmaMode::synchronous})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

const char *to_string(EventKind k) {
  switch (k) {
  case EventKind::copy_start: return "copy_start";
  case EventKind::transfer: return "transfer";
  case EventKind::copy_wait: return "copy_wait";
  case EventKind::compute: return "compute";
  case EventKind::wgmma_issue: return "wgmma_issue";
  case EventKind::wgmma_exec: return "wgmma_exec";
  case EventKind::wgmma_wait: return "wgmma_wait";
  case EventKind::stall: return "stall";
  case EventKind::grid_step: return "grid_step";
  }
  return "?";
}

bool lowering_available() {
#ifdef PIPECHECK_HAVE_LOWER
  return true;
#else
  return false;
#endif
}

namespace {

using Clk = std::chrono::steady_clock;

std::string mib(std::uint64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

std::string index_string(const Shape &s, char open = '[', char close = ']') {
  std::ostringstream os;
  os << open;
  for (std::size_t i = 0; i < s.size(); ++i)
    os << (i ? ", " : "") << s[i];
  os << close;
  return os.str();
}

bool has_float_reduction(const spec::Expr &e) {
  if (e.op == spec::Op::Call && (e.name == "dot" || e.name == "sum")) return true;
  for (const auto &a : e.args)
    if (has_float_reduction(a)) return true;
  return false;
}

bool has_float_reduction(const spec::Block &b) {
  for (const auto &s : b) {
    bool r = false;
    std::visit(
        [&](const auto &k) {
          using K = std::decay_t<decltype(k)>;
          if constexpr (std::is_same_v<K, spec::Assign>)
            r = k.accumulate || has_float_reduction(k.value);
          else if constexpr (std::is_same_v<K, spec::Let>)
            r = has_float_reduction(k.value);
          else if constexpr (std::is_same_v<K, spec::If>)
            r = has_float_reduction(k.then_body) || has_float_reduction(k.else_body);
          else if constexpr (std::is_same_v<K, spec::For>)
            r = has_float_reduction(k.body);
          else if constexpr (std::is_same_v<K, spec::Wgmma>)
            r = true;
        },
        s.kind);
    if (r) return true;
  }
  return false;
}

/// The relative tolerance for an output of dtype `t`: nullopt (exact) unless
/// the unit accumulates floats, whose order of summation may legitimately
/// differ (e.g. a blocked matmul library).
std::optional<double> tolerance_for(spec::DType t, bool reduces) {
  if (!reduces || !spec::dtype_is_float(t)) return std::nullopt;
  switch (t) {
  case spec::DType::bf16: return 1e-2;
  case spec::DType::f16: return 1e-3;
  default: return 1e-5;
  }
}

Shape unflatten(std::int64_t i, const Shape &shape) {
  Shape idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return idx;
}

/// The first element where `actual` differs from `expected` (beyond `tol`,
/// relative, absolute below magnitude 1) or either holds poison.
std::optional<Mismatch> compare(const HostArray &expected, const HostArray &actual,
                                std::optional<double> tol) {
  std::optional<Mismatch> first;
  std::int64_t count = 0;
  const std::int64_t n = expected.size();
  for (std::int64_t i = 0; i < n; ++i) {
    const bool ep = expected.is_poison(i), ap = actual.is_poison(i);
    const double e = expected.get(i), a = actual.get(i);
    bool bad = ep || ap;
    if (!bad) {
      if (tol)
        bad = !(std::fabs(a - e) <= *tol * std::max(1.0, std::fabs(e)));
      else
        bad = !(a == e || (std::isnan(a) && std::isnan(e)));
    }
    if (!bad) continue;
    if (++count == 1) {
      first = Mismatch{};
      first->array = expected.name();
      first->element = unflatten(i, expected.shape());
      first->expected = e;
      first->actual = a;
      first->is_poison = ap;
      first->expected_is_poison = ep;
    }
  }
  if (first) first->count = count;
  return first;
}

std::string describe(const Mismatch &m, std::optional<double> tol) {
  std::ostringstream os;
  os << m.array << index_string(m.element);
  if (m.block) os << " (block " << index_string(*m.block);
  if (m.grid_point) os << ", grid point " << index_string(*m.grid_point, '(', ')');
  if (m.block) os << ")";
  os << ": expected " << m.expected << (m.expected_is_poison ? " (poison)" : "") << ", got " << m.actual
     << (m.is_poison ? " (poison)" : "");
  os << "; " << m.count << " element" << (m.count == 1 ? "" : "s") << " differ";
  if (tol) os << " (relative tolerance " << *tol << ")";
  if (m.expected_is_poison)
    os << " — the intent itself holds poison there: the unit reads memory nothing wrote "
          "(e.g. a missing accumulator init, or the padding of a partial block)";
  else if (m.is_poison)
    os << " — the output holds poison: it was never written or read unwritten memory";
  return os.str();
}

RunResult bad_input(const std::string &unit, spec::Loc loc, const std::string &msg) {
  RunResult r;
  r.unit = unit;
  r.status = RunStatus::bad_input;
  r.loc = loc;
  r.reason = msg;
  return r;
}

RunResult from_error(const std::string &unit, const ExecError &e, const std::string &prefix = "") {
  RunResult r = bad_input(unit, e.loc, prefix + e.what());
  if (e.kind == ExecError::Kind::fault) r.status = RunStatus::fail;
  return r;
}

void adopt(RunResult &r, ProgramOutcome &&o) {
  r.events = std::move(o.events);
  r.events_truncated = o.events_truncated;
  r.notes = std::move(o.notes);
  r.bytes_copied = o.bytes_copied;
  r.copies = o.copies;
  r.seconds = static_cast<double>(o.wall_ns) * 1e-9;
}

std::optional<RunResult> check_memory(const std::string &unit, spec::Loc loc, std::uint64_t need,
                                      std::uint64_t limit) {
  if (need <= limit) return std::nullopt;
  return bad_input(unit, loc,
                   "running this needs " + mib(need) + " of host memory, over --max-memory " + mib(limit) +
                       "; shrink it with --scale or --set");
}

ProgramRunConfig config_for(const RunOptions &o, DmaMode mode, std::uint64_t seed) {
  ProgramRunConfig c;
  c.mode = mode;
  c.seed = seed;
  c.dma_threads = o.dma_threads;
  c.max_events = o.max_events;
  return c;
}

// ------------------------------------------------------------------ kernels

struct KernelPrep {
  std::optional<RunResult> early; ///< set when it cannot run
  ConcreteKernel ck;
  ArrayMap arrays; ///< after the oracle: expected outputs; inputs untouched
#ifdef PIPECHECK_HAVE_LOWER
  std::optional<spec::Lowered> lowered;
#endif
  spec::Env program_env;
  std::map<std::string, Shape> buffer_shapes;
  bool reduces = false;
};

KernelPrep prepare(const spec::KernelSpec &k, const RunOptions &opts) {
  KernelPrep p;
  try {
    p.ck = concretize(k, opts.overrides, opts.scale);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e);
    return p;
  }
  std::uint64_t arrays = 0, blocks = 0;
  for (const auto &o : p.ck.operands) {
    const auto bytes = static_cast<std::uint64_t>(num_elements(o.array_shape)) *
                       static_cast<std::uint64_t>(spec::dtype_bytes(o.dtype));
    arrays += bytes;
    blocks += static_cast<std::uint64_t>(num_elements(o.block)) *
              static_cast<std::uint64_t>(spec::dtype_bytes(o.dtype));
  }
  // Oracle arrays + the pipelined run's HBM copies + its slot rings (<= 4 deep).
  if (auto r = check_memory(k.name, k.loc, 2 * arrays + 5 * blocks, opts.max_memory_bytes)) {
    p.early = r;
    return p;
  }
#ifdef PIPECHECK_HAVE_LOWER
  spec::LowerOptions lo;
  lo.overrides = p.ck.params;
  lo.target = opts.target;
  std::vector<spec::Diagnostic> errs;
  const spec::KernelSpec scaled = opts.scale > 1 ? concrete_spec(p.ck) : k;
  p.lowered = spec::lower(scaled, lo, errs);
  if (!p.lowered) {
    p.early = bad_input(k.name, errs.empty() ? k.loc : errs.front().loc,
                        "cannot lower: " +
                            (errs.empty() ? std::string("spec::lower failed") : errs.front().message));
    return p;
  }
  try {
    p.program_env = bind_params(p.lowered->program.params, p.ck.params);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e);
    return p;
  }
  std::uint64_t program_bytes = 0;
  for (const auto &b : p.lowered->program.buffers) {
    auto s = buffer_array_shape(b, p.program_env);
    if (!s) {
      p.early = bad_input(k.name, b.loc, "lowered buffer '" + b.name + "' has no concrete shape");
      return p;
    }
    program_bytes +=
        static_cast<std::uint64_t>(num_elements(*s)) * static_cast<std::uint64_t>(spec::dtype_bytes(b.dtype));
    p.buffer_shapes[b.name] = *s;
  }
  if (auto r = check_memory(k.name, k.loc, arrays + blocks + program_bytes, opts.max_memory_bytes)) {
    p.early = r;
    return p;
  }
  p.reduces = has_float_reduction(k.body);
  p.arrays = make_kernel_arrays(p.ck, opts.seed);
  try {
    run_oracle(p.ck, p.arrays);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e, "oracle: ");
    return p;
  }
#else
  p.early = RunResult{};
  p.early->unit = k.name;
  p.early->status = RunStatus::error;
  p.early->reason = "this build has no spec::lower, so kernels cannot run through a pipeline "
                    "(pipelines can)";
#endif
  return p;
}

// A result stamped with the mode and seed of one run (a prepared early
// result — bad input, no lowering — is reported once per run).
RunResult with_run(RunResult r, DmaMode mode, std::uint64_t seed) {
  r.mode = mode;
  r.seed = seed;
  return r;
}

RunResult run_prepared(const spec::KernelSpec &k, KernelPrep &p, const RunOptions &opts, DmaMode mode,
                       std::uint64_t seed) {
  if (p.early) return with_run(*p.early, mode, seed);
  RunResult r = with_run(RunResult{}, mode, seed);
  r.unit = k.name;
  r.params = p.ck.params;
#ifdef PIPECHECK_HAVE_LOWER
  const spec::Program &prog = p.lowered->program;
  std::vector<std::unique_ptr<HostArray>> owned;
  BufferMap buffers;
  for (const auto &b : prog.buffers) {
    auto a = std::make_unique<HostArray>(b.name, b.dtype, p.buffer_shapes.at(b.name));
    if (b.kind == spec::BufferKind::acc)
      a->fill_zero();
    else
      a->fill_poison();
    buffers[b.name] = a.get();
    owned.push_back(std::move(a));
  }
  // HBM contents: inputs' data; outputs start as poison or as their aliased input.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto &bind : p.lowered->bindings) {
      if (bind.hbm.empty() || !buffers.count(bind.hbm)) continue;
      std::string source;
      if (pass == 0 && bind.role == spec::Role::out && p.ck.aliases.count(bind.operand))
        source = p.ck.aliases.at(bind.operand);
      if (pass == 1 && bind.role == spec::Role::in) source = bind.operand;
      if (source.empty()) continue;
      HostArray *dst = buffers[bind.hbm];
      const HostArray *src = nullptr;
      if (bind.role == spec::Role::in) {
        src = p.arrays.at(source).get();
      } else {
        // The aliased input's pristine data (the oracle wrote only its outputs).
        src = p.arrays.at(source).get();
      }
      if (src->shape() != dst->shape() || src->dtype() != dst->dtype()) {
        r.status = RunStatus::error;
        r.reason = "lowered buffer '" + bind.hbm + "' does not match operand '" + bind.operand + "'";
        return r;
      }
      dst->copy_from(*src);
    }
  ProgramOutcome o = run_program(prog, p.program_env, buffers, config_for(opts, mode, seed));
  const bool faulted = o.error.has_value();
  std::optional<ExecError> err = o.error;
  adopt(r, std::move(o));
  if (faulted) {
    RunResult e = from_error(k.name, *err, "lowered program: ");
    r.status = e.status;
    r.reason = e.reason;
    r.loc = e.loc;
    return r;
  }
  r.status = RunStatus::pass;
  for (const auto &bind : p.lowered->bindings) {
    if (bind.role != spec::Role::out || bind.hbm.empty()) continue;
    const ConcreteOperand *op = p.ck.operand(bind.operand);
    const HostArray &expected = *p.arrays.at(bind.operand);
    const auto tol = tolerance_for(expected.dtype(), p.reduces);
    auto m = compare(expected, *buffers.at(bind.hbm), tol);
    if (!m) continue;
    m->array = bind.operand;
    if (op && op->windowed) {
      Shape blk(m->element.size());
      for (std::size_t d = 0; d < blk.size(); ++d)
        blk[d] = op->squeezed[d] ? m->element[d] : m->element[d] / op->block[d];
      m->block = blk;
      for (std::int64_t lin = 0; lin < grid_size(p.ck); ++lin) {
        const Shape pt = grid_point(p.ck, lin);
        if (block_index(p.ck, *op, pt) == blk) {
          m->grid_point = pt;
          break;
        }
      }
    }
    r.status = RunStatus::fail;
    r.tolerance = tol;
    r.reason = describe(*m, tol);
    r.mismatch = m;
    break;
  }
#else
  (void)opts;
#endif
  return r;
}

// ---------------------------------------------------------------- pipelines

struct ProgramPrep {
  std::optional<RunResult> early;
  spec::Env env;
  std::map<std::string, Shape> shapes;
  std::map<std::string, std::unique_ptr<HostArray>> initial; ///< hbm buffers' data
  std::map<std::string, std::unique_ptr<HostArray>> intent;  ///< after the synchronous run
  bool reduces = false;
};

std::vector<std::unique_ptr<HostArray>> fresh_buffers(const spec::Program &prog, ProgramPrep &p,
                                                      BufferMap &map) {
  std::vector<std::unique_ptr<HostArray>> owned;
  for (const auto &b : prog.buffers) {
    auto a = std::make_unique<HostArray>(b.name, b.dtype, p.shapes.at(b.name));
    if (b.kind == spec::BufferKind::hbm)
      a->copy_from(*p.initial.at(b.name));
    else if (b.kind == spec::BufferKind::acc)
      a->fill_zero();
    else
      a->fill_poison();
    map[b.name] = a.get();
    owned.push_back(std::move(a));
  }
  return owned;
}

ProgramPrep prepare(const spec::Program &prog, const RunOptions &opts) {
  ProgramPrep p;
  if (opts.scale != 1) {
    p.early =
        bad_input(prog.name, prog.loc, "--scale applies to kernels; size a pipeline with --set (e.g. N)");
    return p;
  }
  try {
    p.env = bind_params(prog.params, opts.overrides);
  } catch (const ExecError &e) {
    p.early = from_error(prog.name, e);
    return p;
  }
  for (const auto &par : prog.params) {
    if (!p.env.count(par.name)) {
      p.early = bad_input(prog.name, par.loc,
                          "param '" + par.name + "' has no value; give one with --set " + par.name + "=...");
      return p;
    }
    const auto v = p.env.at(par.name);
    const auto lo = par.lo ? spec::eval_int(*par.lo, p.env) : std::nullopt;
    const auto hi = par.hi ? spec::eval_int(*par.hi, p.env) : std::nullopt;
    if ((lo && v < *lo) || (hi && v > *hi)) {
      p.early = bad_input(prog.name, par.loc,
                          "param " + par.name + " = " + std::to_string(v) + " is outside its bounds");
      return p;
    }
  }
  std::uint64_t total = 0, hbm = 0;
  for (const auto &b : prog.buffers) {
    auto s = buffer_array_shape(b, p.env);
    if (!s) {
      p.early = bad_input(prog.name, b.loc, "buffer '" + b.name + "' has no concrete shape");
      return p;
    }
    const auto bytes =
        static_cast<std::uint64_t>(num_elements(*s)) * static_cast<std::uint64_t>(spec::dtype_bytes(b.dtype));
    total += bytes;
    if (b.kind == spec::BufferKind::hbm) hbm += bytes;
    p.shapes[b.name] = *s;
  }
  // Initial data, the intent's buffers, one run's buffers.
  if (auto r = check_memory(prog.name, prog.loc, hbm + 2 * total, opts.max_memory_bytes)) {
    p.early = r;
    return p;
  }
  std::uint64_t k = 0;
  for (const auto &b : prog.buffers)
    if (b.kind == spec::BufferKind::hbm) {
      auto a = std::make_unique<HostArray>(b.name, b.dtype, p.shapes.at(b.name));
      a->fill_random(opts.seed * 1000003ull + ++k);
      p.initial[b.name] = std::move(a);
    }
  p.reduces = has_float_reduction(prog.body);
  BufferMap map;
  auto owned = fresh_buffers(prog, p, map);
  ProgramOutcome o = run_program(prog, p.env, map, config_for(opts, DmaMode::synchronous, 0));
  if (o.error) {
    p.early = from_error(prog.name, *o.error, "even with synchronous copies: ");
    return p;
  }
  for (auto &a : owned)
    if (p.initial.count(a->name())) p.intent[a->name()] = std::move(a);
  return p;
}

RunResult run_prepared(const spec::Program &prog, ProgramPrep &p, const RunOptions &opts, DmaMode mode,
                       std::uint64_t seed) {
  if (p.early) return with_run(*p.early, mode, seed);
  RunResult r = with_run(RunResult{}, mode, seed);
  r.unit = prog.name;
  r.params = p.env;
  BufferMap map;
  auto owned = fresh_buffers(prog, p, map);
  ProgramOutcome o = run_program(prog, p.env, map, config_for(opts, mode, seed));
  std::optional<ExecError> err = o.error;
  adopt(r, std::move(o));
  if (err) {
    RunResult e = from_error(prog.name, *err);
    r.status = e.status;
    r.reason = e.reason;
    r.loc = e.loc;
    return r;
  }
  r.status = RunStatus::pass;
  for (const auto &b : prog.buffers) {
    if (b.kind != spec::BufferKind::hbm) continue;
    const HostArray &expected = *p.intent.at(b.name);
    const auto tol = tolerance_for(expected.dtype(), p.reduces);
    if (auto m = compare(expected, *map.at(b.name), tol)) {
      r.status = RunStatus::fail;
      r.tolerance = tol;
      r.reason = describe(*m, tol);
      r.mismatch = m;
      break;
    }
  }
  return r;
}

template <class Unit, class Prep> RunReport all_modes(const Unit &u, Prep &p, const RunOptions &opts) {
  RunReport rep;
  rep.unit = u.name;
  rep.status = RunStatus::pass;
  const std::pair<DmaMode, std::uint64_t> plan[] = {{DmaMode::eager, opts.seed},
                                                    {DmaMode::on_wait, opts.seed},
                                                    {DmaMode::random, opts.seed},
                                                    {DmaMode::random, opts.seed + 1},
                                                    {DmaMode::random, opts.seed + 2}};
  for (const auto &[mode, seed] : plan) {
    rep.runs.push_back(run_prepared(u, p, opts, mode, seed));
    const RunStatus s = rep.runs.back().status;
    if (s == RunStatus::bad_input || s == RunStatus::error) {
      rep.status = s;
      return rep;
    }
    if (s == RunStatus::fail) rep.status = RunStatus::fail;
  }
  return rep;
}

} // namespace

RunResult run(const spec::KernelSpec &k, const RunOptions &opts) {
  KernelPrep p = prepare(k, opts);
  return run_prepared(k, p, opts, opts.mode, opts.seed);
}

RunResult run(const spec::Program &prog, const RunOptions &opts) {
  ProgramPrep p = prepare(prog, opts);
  return run_prepared(prog, p, opts, opts.mode, opts.seed);
}

RunReport run_all_modes(const spec::KernelSpec &k, const RunOptions &opts) {
  KernelPrep p = prepare(k, opts);
  return all_modes(k, p, opts);
}

RunReport run_all_modes(const spec::Program &prog, const RunOptions &opts) {
  ProgramPrep p = prepare(prog, opts);
  return all_modes(prog, p, opts);
}

void print_report(std::ostream &os, const RunReport &rep) {
  os << rep.unit << ": ";
  switch (rep.status) {
  case RunStatus::pass: os << "PASS"; break;
  case RunStatus::fail: os << "FAIL"; break;
  case RunStatus::bad_input: os << "BAD INPUT"; break;
  case RunStatus::error: os << "ERROR"; break;
  }
  os << " (" << rep.runs.size() << " run" << (rep.runs.size() == 1 ? "" : "s") << ")\n";
  for (const auto &r : rep.runs) {
    std::ostringstream mode;
    mode << to_string(r.mode);
    if (r.mode == DmaMode::random) mode << " seed=" << r.seed;
    // Wide enough for "random seed=4294967297" (the CLI's largest seed + 2).
    os << "  " << std::left << std::setw(23) << mode.str() << std::setw(10) << to_string(r.status)
       << std::right;
    if (r.status == RunStatus::pass || r.status == RunStatus::fail)
      os << std::fixed << std::setprecision(4) << r.seconds << " s, " << r.copies << " copies, "
         << mib(static_cast<std::uint64_t>(r.bytes_copied)) << std::defaultfloat;
    os << "\n";
    if (!r.reason.empty()) {
      os << "    ";
      if (r.loc.line > 0) os << "line " << r.loc.line << ": ";
      os << r.reason << "\n";
    }
    for (const auto &n : r.notes)
      os << "    note: " << n << "\n";
  }
  if (!rep.runs.empty()) {
    const auto &p = rep.runs.front().params;
    if (!p.empty()) {
      os << "  params:";
      for (const auto &[k, v] : p)
        os << " " << k << "=" << v;
      os << "\n";
    }
  }
}

std::string format_report(const RunReport &rep) {
  std::ostringstream os;
  print_report(os, rep);
  return os.str();
}

} // namespace pipecheck::executor
