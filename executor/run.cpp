#include "executor/run.hpp"

#include "executor/footprint.hpp"
#include "executor/npy.hpp"
#include "executor/oracle.hpp"
#include "executor/program_runner.hpp"
#include "executor/reference.hpp"
#include "spec/lower.hpp"
#include "spec/nested.hpp"
#include "spec/prefetch.hpp"
#include "spec/print.hpp"
#include "spec/state.hpp"
#include "spec/targets.hpp"
#include "spec/typecheck.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
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

namespace {

using Clk = std::chrono::steady_clock;

// MiB with one decimal; below 0.1 MiB in KiB (`--max-memory 1k` is not "0.0 MiB").
std::string mib(std::uint64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  if (bytes < (1 << 20) / 10)
    os << static_cast<double>(bytes) / 1024 << " KiB";
  else
    os << static_cast<double>(bytes) / (1 << 20) << " MiB";
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

/// How far an element may be from its expected value e: exactly (no
/// relative tolerance), relative·max(1, |e|) at every element, or element by
/// element from the reference's error bounds (element_tolerance).
struct Tolerance {
  std::optional<double> relative;
  const HostArray *bound = nullptr; ///< per element (run_reference's), the output's shape
  spec::DType out = spec::DType::f32;
  Tolerance(std::optional<double> r = std::nullopt) : relative(r) {}
  Tolerance(std::optional<double> r, const HostArray *b, spec::DType t) : relative(r), bound(b), out(t) {}
  /// At flat element i, expected e; nullopt: exactly.
  std::optional<double> at(std::int64_t i, double e) const {
    if (bound && !spec::dtype_is_float(out)) {
      // (An integer output: within its bound where a rounding may flip.)
      const double b = bound->get(i);
      return std::isfinite(b) && b > 0 ? std::optional<double>(b) : std::nullopt;
    }
    if (!relative) return std::nullopt;
    if (bound) return element_tolerance(out, bound->get(i), e, *relative);
    if (!std::isfinite(e)) return 0.0; // (an infinity is matched by itself only)
    return *relative * std::max(1.0, std::fabs(e));
  }
};

/// The first element where `actual` differs from `expected` (beyond `tol`)
/// or either holds poison. With per-element bounds, also the tolerance used
/// there and the element that exceeds its own the most.
/// `nan_is_value`: NaN on both sides is equal (the inputs may hold NaN).
/// `stored`: 1 where the oracle's element is a value the program computed, so
/// that poison there, on both sides alike, is that value and no mismatch, and
/// on one side a value that differs (KernelPrep::defined,
/// ProgramPrep::stored): an integer's poison is its
/// lowest value, which a body may well compute (an int8 clamp to -128, a
/// masked max's iinfo.min), and a NaN may be computed too (log of a
/// negative input), not carried from undefined data.
std::optional<Mismatch> compare(const HostArray &expected, const HostArray &actual, const Tolerance &tol,
                                bool nan_is_value = false,
                                const std::vector<std::uint8_t> *stored = nullptr) {
  std::optional<Mismatch> first;
  std::int64_t count = 0;
  std::int64_t worst = -1; // (the largest excess over its tolerance, with bounds)
  double worst_ratio = 0, worst_tol = 0;
  const std::int64_t n = expected.size();
  const bool same = expected.dtype() == actual.dtype();
  for (std::int64_t i = 0; i < n; ++i) {
    const bool ep = expected.is_poison(i), ap = actual.is_poison(i);
    const double e = expected.get(i), a = actual.get(i);
    const bool computed = stored && static_cast<std::size_t>(i) < stored->size() && (*stored)[i];
    bool bad = ep || ap;
    if (bad && nan_is_value && ep && ap && std::isnan(e) && std::isnan(a))
      bad = false;
    else if (bad && same && ep && ap && computed)
      bad = false;
    else if (!bad && a != e) {
      // Equal infinities are equal; any other difference is measured.
      if (const auto t = tol.at(i, e)) {
        bad = !(std::fabs(a - e) <= *t);
        const double ratio = std::fabs(a - e) / *t;
        if (bad && tol.bound && !(ratio <= worst_ratio)) worst = i, worst_ratio = ratio, worst_tol = *t;
      } else {
        bad = !(std::isnan(a) && std::isnan(e));
      }
    }
    if (!bad) continue;
    if (++count == 1) {
      first = Mismatch{};
      first->array = expected.name();
      first->element = unflatten(i, expected.shape());
      first->expected = e;
      first->actual = a;
      // (Where the program computed the value, a NaN or an integer's lowest
      // value is that value, not memory nothing wrote: `0 / 0` where a row
      // has no key.)
      first->is_poison = ap && !computed;
      first->expected_is_poison = ep && !computed;
      if (tol.bound && !first->is_poison && !first->expected_is_poison) {
        first->tolerance = tol.at(i, e);
        if (const double b = tol.bound->get(i); std::isfinite(b))
          first->bound = b;
        else if (!spec::dtype_is_float(tol.out))
          first->unbounded_integer = true;
      }
    }
  }
  if (first) first->count = count;
  if (first && first->tolerance && worst >= 0 && unflatten(worst, expected.shape()) != first->element) {
    first->worst = unflatten(worst, expected.shape());
    first->worst_ratio = worst_ratio;
    first->worst_tolerance = worst_tol;
  }
  return first;
}

std::string number(double v) {
  std::ostringstream os;
  // (An integer value whole, as the mismatch line gives it: -2147483648.)
  if (std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 9.0e15)
    os << static_cast<std::int64_t>(v);
  else if (std::isnan(v))
    os << "nan"; // (not the sign bit's "-nan": a NaN has no sign worth telling)
  else
    os << v;
  return os.str();
}

/// Whether an array holds a NaN. Where the inputs do (special data, a
/// file's), NaN is compared as a value; elsewhere it is poison, also under
/// --inputs (the bridge passes its data that way).
bool holds_nan(const HostArray &a) {
  if (!spec::dtype_is_float(a.dtype())) return false;
  for (std::int64_t i = 0; i < a.size(); ++i)
    if (std::isnan(a.get(i))) return true;
  return false;
}

std::string describe(const Mismatch &m, std::optional<double> tol) {
  std::ostringstream os;
  os << m.array << index_string(m.element);
  std::string where;
  if (m.block) {
    where = " (block " + index_string(*m.block);
    if (m.grid_point) where += ", grid point " + spec::format_tuple(*m.grid_point); // (as check: "(2,)")
    where += ")";
  }
  if (!m.poison.empty()) {
    os << " " << m.poison.substr(0, m.poison.find(':')) << where;
    if (m.poison.find(':') != std::string::npos) os << m.poison.substr(m.poison.find(':'));
  } else {
    os << where << ": expected " << number(m.expected) << " (" << m.expected_from << "), got "
       << number(m.actual) << " (" << m.actual_from << ")";
  }
  // (Which comparison the count and the tolerance belong to: a run against
  // the oracle, or the oracle against the reference.)
  os << "; " << m.count << (m.count == 1 ? " element differs" : " elements differ") << " from the "
     << m.expected_from;
  if (m.tolerance) {
    // Element by element (the reference's): the one named, and the worst.
    os << " (tolerance " << number(*m.tolerance) << " at " << m.array << index_string(m.element);
    if (m.bound)
      os << ", from the reference's error bound " << number(*m.bound) << " there";
    else if (tol)
      os << ", relative " << *tol << ": the reference's error is not bounded there";
    if (m.worst)
      os << "; the worst, " << m.array << index_string(*m.worst) << ", differs by " << number(m.worst_ratio)
         << " times its tolerance " << number(m.worst_tolerance);
    os << ")";
  } else if (tol && m.poison.empty()) {
    os << " (relative tolerance " << *tol << ")";
  }
  if (m.unbounded_integer)
    os << " (compared exactly, though the reference's value there follows a comparison within its error "
          "of a tie, e.g. an argmax of near-equal scores, where either answer may be right: try another "
          "--seed, or compare the scores)";
  return os.str();
}

/// What poison on either side of a kernel's comparison means. `written`: the
/// oracle's record of the body's stores into this output (nullptr: none);
/// `aliased`: the input the output aliases, if any.
std::string kernel_poison(const Mismatch &m, const std::vector<std::uint8_t> *written, std::int64_t flat,
                          const std::string &output, const std::string *aliased) {
  const bool oracle_poison = m.expected_from == "oracle" ? m.expected_is_poison : m.is_poison;
  if (oracle_poison) {
    if (written && flat < static_cast<std::int64_t>(written->size()) &&
        !(*written)[static_cast<std::size_t>(flat)])
      return "was never written: no grid point's body stores to it";
    return "reads memory nothing wrote: the body stored poison there (e.g. a missing accumulator init, "
           "or the padding of a partial block)";
  }
  // (The oracle's body reads an aliased output's HBM array, which starts as
  // the input; a pipeline's output window is never fetched.)
  if (m.is_poison && aliased)
    return "holds poison in the pipelined run (the oracle has " + number(m.expected) + "): '" + output +
           "' aliases input '" + *aliased + "', whose values the oracle's body reads where it reads '" +
           output +
           "' before writing it, but a pipeline never fetches an output's block (input_output_aliases shares "
           "the array, not the window: read '" +
           *aliased +
           "' instead; check reports it as uninitialized-accumulator); or the lowered program never "
           "wrote it back, or computed it from a slot before its copy landed";
  if (m.is_poison)
    return "holds poison in the pipelined run: the lowered program never wrote it back, or computed it from "
           "a slot before its copy landed (the oracle has " +
           number(m.expected) + ")";
  // (The reference writes every element of its outputs from inputs that
  // hold no poison: its NaN is its own arithmetic's, or an output it reads
  // before its `o = ...`.)
  if (m.expected_is_poison && m.expected_from == "reference")
    return "holds NaN in the reference: the reference computes it there (0 / 0, inf - inf, a log of a "
           "negative number: give the reference the guard the body has), or reads an output before its "
           "`o = ...`";
  if (m.expected_is_poison) return "holds poison in the reference: the reference reads memory nothing wrote";
  return {};
}

std::int64_t flat_index(const Shape &idx, const Shape &shape) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + idx[d];
  return f;
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

// A device run in place of run_program (RunOptions::device); its fault or
// inability to run is the result's status and reason (false).
bool run_on_device(RunResult &r, const RunOptions &opts, const spec::Program &prog,
                   const spec::Lowered *lowered, const spec::Env &env, const BufferMap &buffers, DmaMode mode,
                   std::uint64_t seed) {
  const bool adversarial = mode == DmaMode::random;
  r.backend = opts.device->name(adversarial);
  const ProgramDevice::Outcome o = opts.device->run(prog, lowered, env, buffers, adversarial, seed);
  r.seconds = o.seconds;
  switch (o.kind) {
  case ProgramDevice::Outcome::Kind::ran: return true;
  case ProgramDevice::Outcome::Kind::fault:
    r.status = RunStatus::fail;
    r.reason = "the program faulted on the device: " + o.message;
    return false;
  case ProgramDevice::Outcome::Kind::cannot_run: break;
  }
  r.status = RunStatus::error;
  r.reason = o.message;
  return false;
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
  c.max_event_bytes = o.max_event_bytes;
  return c;
}

// ------------------------------------------------------ the memory estimate
//
// Everything a run allocates, sized before it allocates it: the arrays, the
// oracle's blocks, each run's buffers, the (unrolled) lowered program, each
// run's copy records, the interpreter's values and the event timelines. The
// terms are summed, although the oracle's blocks and a run's buffers are
// never alive together: an over-estimate is safe, an under-estimate is not.

using footprint::chunk;

struct Estimate {
  std::uint64_t bytes = 0;
  void add(std::uint64_t n) { bytes = spec::saturating_add(bytes, n); }
  void add(std::uint64_t count, std::uint64_t each) { add(spec::saturating_mul(count, each)); }
};

// Values hold 4 bytes an element whatever the dtype; the interpreter's block
// cache (executor/value.cpp) keeps up to 32 freed ones.
constexpr std::uint64_t kCachedValues = 32;

// Copies of a kernel body's expression trees alive during a run, at most
// (TypedValues: the sizes of its values are counted apart).
constexpr std::uint64_t kExprCopies = 10;

std::uint64_t nodes(const spec::Expr &e) {
  std::uint64_t n = 1;
  for (const auto &a : e.args)
    n += nodes(a);
  return n;
}

// Expression nodes of a statement, and of the largest statement of a block.
std::uint64_t nodes(const spec::Block &b, bool largest);
std::uint64_t nodes(const spec::Stmt &s, bool largest) {
  std::uint64_t n = 0;
  std::visit(
      [&](const auto &k) {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, spec::Assign>)
          n = nodes(k.target) + nodes(k.value);
        else if constexpr (std::is_same_v<K, spec::Let>)
          n = nodes(k.value);
        else if constexpr (std::is_same_v<K, spec::If>)
          n = nodes(k.cond) + nodes(k.then_body, largest) + nodes(k.else_body, largest);
        else if constexpr (std::is_same_v<K, spec::For>)
          n = nodes(k.lo) + nodes(k.hi) + nodes(k.body, largest);
        else if constexpr (std::is_same_v<K, spec::Wgmma>)
          n = nodes(k.acc) + nodes(k.a) + nodes(k.b) + 3;
        else
          n = 1;
      },
      s.kind);
  return n;
}
std::uint64_t nodes(const spec::Block &b, bool largest) {
  std::uint64_t n = 0;
  for (const auto &s : b)
    n = largest ? std::max(n, nodes(s, largest)) : n + nodes(s, largest);
  return n;
}

std::uint64_t lets(const spec::Block &b) {
  std::uint64_t n = 0;
  for (const auto &s : b) {
    if (std::holds_alternative<spec::Let>(s.kind)) ++n;
    if (const auto *i = std::get_if<spec::If>(&s.kind)) n += lets(i->then_body) + lets(i->else_body);
    if (const auto *f = std::get_if<spec::For>(&s.kind)) n += lets(f->body);
  }
  return n;
}

// One value of `elements` elements (4 bytes each, whatever the dtype).
std::uint64_t value_bytes(std::int64_t elements) {
  return chunk(spec::saturating_mul(std::uint64_t{4}, static_cast<std::uint64_t>(elements)));
}

std::uint64_t values(std::uint64_t live, std::int64_t max_elements, std::uint64_t cached = kCachedValues) {
  return spec::saturating_mul(live + cached + 4, value_bytes(max_elements));
}

// The values a block's expressions make, sized by their types: each typed
// node makes at most one value of its type's elements (4 bytes each, as
// values hold), a local binds one of its value's. Where typing left a node
// without a type, or a type without a size, that node counts
// `fallback_elements` (the largest value the statement can make). Integer
// subscripts, shapes and axes make no values (spec::eval_int), and their
// nodes have no type: a table's read elaborated into a `where` tree of
// thousands of scalar nodes costs what its scalars do, not a whole array
// each (a 512-entry page table sized 10 GiB so).
struct TypedValues {
  const spec::ExprTypes &types;
  std::int64_t fallback_elements;

  // A node's value: its type's elements, the fallback where it has no type
  // or a type without a size.
  std::uint64_t node(const spec::Expr &e) const {
    const auto it = types.find(&e);
    if (it == types.end()) return value_bytes(fallback_elements);
    std::int64_t n = 1;
    for (auto d : it->second.shape) {
      if (d < 0) return value_bytes(fallback_elements);
      n = spec::saturating_mul(n, d);
    }
    return value_bytes(n);
  }
  // (A value node without a type: the fallback; a node typed by the value
  // typing is one of the interpreter's values.)
  std::uint64_t expr(const spec::Expr &e, bool value) const {
    std::uint64_t n = value || types.count(&e) ? node(e) : 0;
    for (const auto &a : e.args)
      n = spec::saturating_add(n, expr(a, false));
    return n;
  }
  std::uint64_t block(const spec::Block &b) const {
    std::uint64_t n = 0;
    for (const auto &s : b) {
      if (const auto *a = std::get_if<spec::Assign>(&s.kind)) {
        n = spec::saturating_add(n, expr(a->value, true));
        for (const auto &x : a->target.args)
          n = spec::saturating_add(n, expr(x, false));
      } else if (const auto *l = std::get_if<spec::Let>(&s.kind)) {
        // Its value, and the local's binding of it.
        n = spec::saturating_add(n, spec::saturating_add(expr(l->value, true), node(l->value)));
      } else if (const auto *i = std::get_if<spec::If>(&s.kind)) {
        n = spec::saturating_add(n, expr(i->cond, false));
        n = spec::saturating_add(n, spec::saturating_add(block(i->then_body), block(i->else_body)));
      } else if (const auto *f = std::get_if<spec::For>(&s.kind)) {
        n = spec::saturating_add(n, block(f->body));
      } else {
        // Any other statement (a DMA, a wait): its expressions, untyped ones
        // at the fallback size.
        spec::for_each_expr(s, [&](const spec::Expr &x) { n = spec::saturating_add(n, expr(x, true)); });
      }
    }
    return n;
  }
};

bool has_loop(const spec::Block &b) {
  for (const auto &s : b) {
    if (std::holds_alternative<spec::For>(s.kind)) return true;
    if (const auto *i = std::get_if<spec::If>(&s.kind);
        i && (has_loop(i->then_body) || has_loop(i->else_body)))
      return true;
  }
  return false;
}

// Copy starts and waits a block executes: loops multiply (a bound that
// depends on an outer loop variable takes that variable's last value),
// branches take the larger side (starts) or the smaller one (waits).
struct Copies {
  std::uint64_t starts = 0, waits = 0;
};

Copies count_copies(const spec::Block &b, spec::Env &env) {
  Copies n;
  for (const auto &s : b) {
    if (const auto *c = std::get_if<spec::Copy>(&s.kind)) {
      const bool start = c->kind == spec::CopyKind::in_start || c->kind == spec::CopyKind::out_start;
      (start ? n.starts : n.waits) += 1;
    } else if (const auto *i = std::get_if<spec::If>(&s.kind)) {
      const Copies a = count_copies(i->then_body, env), e = count_copies(i->else_body, env);
      n.starts = spec::saturating_add(n.starts, std::max(a.starts, e.starts));
      n.waits = spec::saturating_add(n.waits, std::min(a.waits, e.waits));
    } else if (const auto *f = std::get_if<spec::For>(&s.kind)) {
      const auto lo = spec::eval_int(f->lo, env), hi = spec::eval_int(f->hi, env);
      if (!lo || !hi || *hi <= *lo) continue;
      const auto saved = env.find(f->var) != env.end() ? std::optional(env[f->var]) : std::nullopt;
      env[f->var] = *hi - 1;
      const auto trips = static_cast<std::uint64_t>(*hi) - static_cast<std::uint64_t>(*lo);
      const Copies inner = count_copies(f->body, env);
      n.starts = spec::saturating_add(n.starts, spec::saturating_mul(trips, inner.starts));
      n.waits = spec::saturating_add(n.waits, spec::saturating_mul(trips, inner.waits));
      if (saved)
        env[f->var] = *saved;
      else
        env.erase(f->var);
    }
  }
  return n;
}

// A copy's label, "A[0:128, 0:512] -> X[1, :, :]", for arrays of `rank`
// dims (counting a ring's slot dim) and names of up to `max_name` chars.
std::uint64_t label_bytes(std::size_t rank, std::size_t max_name) {
  return 2 * (max_name + 2 + 43 * rank) + 4;
}

// One copy's record: its views, label, buffer name and queue entries.
std::uint64_t transfer_bytes(std::size_t rank, std::size_t max_name) {
  return sizeof(Transfer) + 6 * chunk(8 * rank) + 2 * chunk(label_bytes(rank, max_name)) +
         chunk(max_name + 1) + 64;
}

// The note each kept run keeps for one copy never waited.
std::uint64_t note_bytes(std::size_t rank, std::size_t max_name, int runs) {
  return static_cast<std::uint64_t>(runs) * (sizeof(std::string) + chunk(label_bytes(rank, max_name) + 64));
}

std::uint64_t event_bytes(const RunOptions &o, int runs) {
  // Each kept run's timeline, and one growing vector's old copy.
  return spec::saturating_add(spec::saturating_mul(static_cast<std::uint64_t>(runs), o.max_event_bytes),
                              o.max_event_bytes / 2);
}

// ------------------------------------------------------------ .npy files

std::string npy_path(const std::string &dir, const std::string &file) {
  return (std::filesystem::path(dir) / file).string();
}

/// Replaces `a`'s contents with DIR/NAME.npy; empty, or why it cannot.
std::string load_npy_into(HostArray &a, const std::string &dir, const std::string &what, std::int64_t scale) {
  const std::string path = npy_path(dir, a.name() + ".npy");
  std::unique_ptr<HostArray> f;
  try {
    // The header is at most 64 KiB in the version-1 format; allow a version-2 one of 1 MiB.
    f = read_npy(path, a.name(), static_cast<std::uint64_t>(a.bytes()) + (1u << 20));
  } catch (const NpyError &e) {
    return e.what();
  }
  const std::string want = std::string(spec::to_string(a.dtype())) + shape_string(a.shape()) +
                           (scale > 1 ? " at --scale " + std::to_string(scale) : "");
  if (f->dtype() != a.dtype())
    return path + ": dtype " + spec::to_string(f->dtype()) + " (" + npy_descr(f->dtype()) + "), but " + what +
           " '" + a.name() + "' is " + want + " (" + npy_descr(a.dtype()) + ")";
  if (f->shape() != a.shape())
    return path + ": shape " + shape_string(f->shape()) + ", but " + what + " '" + a.name() + "' is " + want;
  a.copy_from(*f);
  return {};
}

/// Writes `a` as DIR/FILE, creating DIR; empty, or why it cannot.
std::string save_npy(const std::string &dir, const std::string &file, const HostArray &a) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return dir + ": cannot create the directory: " + ec.message();
  try {
    write_npy(npy_path(dir, file), a);
  } catch (const NpyError &e) {
    return e.what();
  }
  return {};
}

RunResult env_error(const std::string &unit, const std::string &msg) {
  RunResult r;
  r.unit = unit;
  r.status = RunStatus::error;
  r.reason = msg;
  return r;
}

// ------------------------------------------------------------------ kernels

struct KernelPrep {
  std::optional<RunResult> early; ///< set when it cannot run
  ConcreteKernel ck;
  ArrayMap arrays; ///< after the oracle: expected outputs; inputs untouched
  std::optional<spec::Lowered> lowered;
  spec::Env program_env;
  std::map<std::string, Shape> buffer_shapes;
  bool reduces = false;
  std::uint64_t memory_estimate = 0;
  WrittenMap written; ///< the oracle's stores into each output
  /// Where an output's poison is a value. An integer's sentinel: the body
  /// stored it (a sentinel it copied out of memory nothing wrote changes
  /// with the stand-ins: undefined_dependence), or (an aliased output) the
  /// element keeps its input's data, which may hold the sentinel under
  /// --inputs (a cache's int8 -128 the update leaves). A NaN: the body
  /// stored it and it stays NaN with both sets of stand-ins (computed, not
  /// carried from undefined data).
  WrittenMap defined;
  /// The oracle against the kernel's `reference:` (the same for every run).
  std::optional<Mismatch> reference_mismatch;
  /// Where the reference's own error is a large share of an output's scale
  /// (an ill-conditioned reference): what a passing run cannot tell there.
  std::vector<std::string> reference_notes;
  std::optional<double> reference_tolerance; ///< relative, where no bound applies
  bool nan_value = false;                    ///< an input holds a NaN (holds_nan): NaN is compared as a value
  /// When NaN is a value: the first output element no grid
  /// point's body stored into (poison no longer shows it).
  std::optional<Mismatch> unwritten;
  /// The first output element the oracle computed differently with other
  /// undefined data (find_undefined_dependence).
  std::optional<Mismatch> undefined_dependence;
};

/// The kernel's sizes that do not depend on its lowering.
struct KernelSizes {
  std::uint64_t arrays = 0;        ///< every operand's array (the oracle's)
  std::uint64_t blocks = 0;        ///< the oracle's block buffers
  std::uint64_t ring_bytes = 0;    ///< a run's slot rings, before lowering sizes them
  std::uint64_t ring_slots = 0;    ///< their slots (the prologue's copies)
  std::uint64_t hbm = 0;           ///< a run's HBM copies and scratch, before lowering
  std::int64_t max_elements = 1;   ///< the largest value the body can load
  std::size_t windowed = 0;        ///< windowed in/out operands
  std::size_t copies_per_step = 0; ///< copy statements a step can emit
  std::size_t starts_per_step = 0; ///< of which copy starts
  std::size_t max_rank = 1;        ///< of any array, plus a ring's slot dim
  std::size_t max_name = 0;
  std::uint64_t steps = 0;
  bool gpu = false;                    ///< lowered for h100/h200
  std::uint64_t out_elements = 0;      ///< of every output (the oracle's record of stores)
  std::int64_t max_array_elements = 1; ///< the largest whole array (the reference's values)
  bool undefined_reads = false;        ///< the oracle runs twice (may_read_undefined)
};

/// Whether the body may read undefined data: scratch, a partial block's
/// padding, an Element or BoundedSlice window, an output block before it
/// stores it (find_undefined_dependence).
bool may_read_undefined(const ConcreteKernel &c) {
  std::vector<std::string> outputs;
  for (const auto &o : c.operands) {
    if (o.role == spec::Role::scratch) return true;
    if (o.role == spec::Role::out) outputs.push_back(o.name);
    if (!o.windowed) continue;
    if (o.has_element_dims() || o.has_bounded_dims()) return true;
    for (std::size_t d = 0; d < o.shape.size(); ++d)
      if (!o.squeezed[d] && o.block[d] > 0 && o.shape[d] % o.block[d] != 0) return true;
  }
  // An output read: in a value, a `+=` target, a condition, a bound, a DMA's source.
  bool reads = false;
  auto note = [&](const spec::Expr &e) {
    for (const auto &n : outputs)
      reads = reads || spec::mentions(e, n);
  };
  spec::for_each_stmt(c.body, [&](const spec::Stmt &s) {
    if (const auto *a = std::get_if<spec::Assign>(&s.kind)) {
      if (a->accumulate) note(a->target);
      note(a->value);
    } else if (const auto *d = std::get_if<spec::Dma>(&s.kind)) {
      note(d->src);
    } else if (std::holds_alternative<spec::Let>(s.kind) || std::holds_alternative<spec::If>(s.kind) ||
               std::holds_alternative<spec::For>(s.kind)) {
      spec::for_each_expr(s, note);
    }
  });
  return reads;
}

KernelSizes kernel_sizes(const spec::KernelSpec &k, const ConcreteKernel &c) {
  KernelSizes z;
  z.undefined_reads = may_read_undefined(c);
  z.steps = static_cast<std::uint64_t>(c.num_points());
  const bool gpu = z.gpu = c.gpu;
  std::int64_t concurrent = 1;
  if (const auto *m = k.setting("max_concurrent_steps"))
    if (auto v = spec::eval_int(m->value, c.params)) concurrent = std::max<std::int64_t>(1, *v);
  for (const auto &o : c.operands) {
    const std::uint64_t array = footprint::array_bytes(o.shape, o.dtype);
    const std::uint64_t block = footprint::array_bytes(o.block_view_shape(), o.dtype);
    z.arrays = spec::saturating_add(z.arrays, array);
    z.max_rank = std::max(z.max_rank, o.shape.size() + 1);
    z.max_name = std::max(z.max_name, o.name.size() + 5);
    z.max_array_elements = std::max(z.max_array_elements, num_elements(o.shape));
    if (o.role == spec::Role::out)
      z.out_elements =
          spec::saturating_add(z.out_elements, static_cast<std::uint64_t>(num_elements(o.shape)));
    if (!o.windowed) {
      z.hbm = spec::saturating_add(z.hbm, array);
      // An operand left in HBM (memory_space=any/hbm) is only copied, never
      // loaded into a value (any-space-access): a page pool of many MiB does
      // not size the body's values.
      const bool in_hbm = o.decl && (o.decl->memory_space == spec::MemorySpace::any ||
                                     o.decl->memory_space == spec::MemorySpace::hbm);
      if (!in_hbm) z.max_elements = std::max(z.max_elements, num_elements(o.shape));
      continue;
    }
    z.hbm = spec::saturating_add(z.hbm, array);
    z.blocks = spec::saturating_add(z.blocks, block);
    z.max_elements = std::max(z.max_elements, num_elements(o.block_view_shape()));
    ++z.windowed;
    // An input: start and wait; an output: start and wait, and with
    // revisit=any or on Triton a copy back in (start and wait) first.
    const bool revisits =
        o.role == spec::Role::out &&
        ((o.decl && o.decl->pipeline_mode.revisit == spec::Revisit::any) || spec::uses_triton(k));
    z.copies_per_step += revisits ? 4 : 2;
    z.starts_per_step += revisits ? 2 : 1;
    std::int64_t depth = 2;
    if (o.decl && o.decl->pipeline_mode.buffer_count)
      if (auto v = spec::eval_int(*o.decl->pipeline_mode.buffer_count, c.params)) depth = std::max(depth, *v);
    if (gpu) depth = std::max(depth, concurrent);
    const auto d = static_cast<std::uint64_t>(depth);
    z.ring_slots = spec::saturating_add(z.ring_slots, d);
    z.ring_bytes = spec::saturating_add(z.ring_bytes, spec::saturating_mul(d, block));
  }
  return z;
}

/// The estimate for `runs` runs of a kernel; `lowered`: the program once
/// lowered (nullptr: estimate the lowering from the kernel).
std::uint64_t kernel_estimate(const spec::KernelSpec &k, const KernelSizes &z, const RunOptions &opts,
                              int runs, bool gpu, const spec::Program *lowered,
                              const std::map<std::string, Shape> *buffer_shapes) {
  Estimate e;
  e.add(z.arrays);
  if (spec::uses_triton(k)) e.add(z.arrays); // a run's launch snapshot of the hbm buffers
  e.add(z.blocks);
  // The body's and the reference's values by their types, where the kernel
  // types without errors at these params (one typing: spec::typecheck); by
  // the largest value for every node otherwise.
  spec::ExprTypes types;
  const bool typed = spec::typecheck(k, opts.overrides, &types).empty();
  if (typed) {
    // (With the slack of values(): the block cache and a few temporaries.)
    e.add(spec::saturating_add(TypedValues{types, z.max_elements}.block(k.body), values(0, z.max_elements)));
    // The body's expression trees, copied by the concrete kernel, the
    // oracle's and the lowering's forms: a prefetch table's reads elaborated
    // into `where` trees are most of it (the embedding backward's body of
    // 65582 nodes, 7.9 MB: its run peaks 7.1 of those above the other terms).
    e.add(kExprCopies, footprint::heap(k.body));
  } else {
    e.add(values(nodes(k.body, false) + lets(k.body), z.max_elements));
  }
  e.add(event_bytes(opts, runs));
  e.add(z.out_elements);
  if (z.undefined_reads) e.add(z.arrays); // the oracle's second pass, beside the first's results
  if (!k.reference.empty()) {
    // The reference's own arrays, and its values over whole arrays. It runs
    // once: without a loop it makes at most one value a node, so what the
    // block cache keeps of them is among those (an `o = x * 2` over two
    // 256 MiB arrays is not 36 of them). Each output's error bound is an
    // f32 array (error_bound.hpp). A value's bound is as large again, and
    // its rule's temporaries a few more: within this count of a value for
    // every node at once (a straight-line reference frees them as it goes;
    // the memory test measures the corpus' peaks against it).
    e.add(z.arrays);
    e.add(z.out_elements, 4);
    const std::uint64_t made = nodes(k.reference, false) + lets(k.reference);
    const std::uint64_t cached = has_loop(k.reference) ? kCachedValues : 0;
    if (typed)
      e.add(spec::saturating_add(TypedValues{types, z.max_array_elements}.block(k.reference),
                                 values(0, z.max_array_elements, cached)));
    else
      e.add(values(made, z.max_array_elements, cached));
  }
  // The scaled copy of the spec lowering reads, and the unrolled lowering's
  // per-step tables (grid coordinates, block indices, visits); the rolled
  // form's size does not depend on the grid.
  const bool unrolled = spec::lowers_unrolled(k, gpu);
  const std::uint64_t lowered_steps = unrolled ? z.steps : 1;
  e.add(footprint::heap(k.body));
  e.add(lowered_steps, (z.windowed + 1) * (sizeof(std::vector<std::int64_t>) + chunk(8 * z.max_rank)) +
                           z.windowed * (16 + chunk(96)));
  if (lowered && buffer_shapes) {
    e.add(footprint::heap(lowered->body));
    for (const auto &b : lowered->buffers)
      e.add(footprint::array_bytes(buffer_shapes->at(b.name), b.dtype));
    // A copy's record lives until its wait. The emitter never has more than
    // a ring's slots in flight per operand (two more counted: a revisit's
    // copy back in, a single buffer), and waits for every copy it starts:
    // no notes of leaked ones.
    std::uint64_t live = 0;
    for (const auto &b : lowered->buffers) {
      if (!b.slots) continue;
      const auto &shape = buffer_shapes->at(b.name);
      live = spec::saturating_add(live, 2 + (shape.empty() ? 1 : static_cast<std::uint64_t>(shape[0])));
    }
    e.add(live, transfer_bytes(z.max_rank, z.max_name));
  } else {
    // Per step: the body with its operands bound to slots (at most twice the
    // kernel's body; on a GPU each statement may gain two wgmma waits) and
    // the copies; the statement vector may hold twice its statements. The
    // lowering waits for every copy it starts: no notes of leaked ones.
    const std::uint64_t stmts = (gpu ? 3 : 1) * k.body.size() + z.copies_per_step;
    const std::uint64_t start = chunk(z.max_rank * sizeof(spec::Expr)) +
                                z.max_rank * chunk(2 * sizeof(spec::Expr)) + chunk(sizeof(spec::Expr)) +
                                2 * chunk(z.max_name + 1);
    // (The rolled form is one such section plus its state: counted as eight.)
    e.add(unrolled ? z.steps : 8, 2 * footprint::heap(k.body) + 2 * stmts * sizeof(spec::Stmt) +
                                      z.copies_per_step * (start + chunk(sizeof(spec::Expr))));
    e.add(z.hbm);
    e.add(z.ring_bytes);
    e.add(spec::saturating_add(spec::saturating_mul(lowered_steps, z.starts_per_step),
                               spec::saturating_add(z.ring_slots, 2 * z.windowed)),
          transfer_bytes(z.max_rank, z.max_name));
  }
  return e.bytes;
}

/// Fresh arrays (make_kernel_arrays) holding the prepared inputs; outputs
/// and scratch poison, or with `stand_in`, HostArray::poison_with_stand_in's
/// values of that kind; an aliased output its input's data.
ArrayMap arrays_with_inputs(const KernelPrep &p, const RunOptions &opts, int stand_in = 0) {
  ArrayMap a = make_kernel_arrays(p.ck, opts.seed, opts.input_kind);
  for (const auto &o : p.ck.operands)
    if (o.role == spec::Role::in) {
      a.at(o.name)->copy_from(*p.arrays.at(o.name));
    } else if (stand_in) {
      a.at(o.name)->poison_with_stand_in(stand_in);
      a.at(o.name)->fill_poison();
    }
  for (const auto &[out, in] : p.ck.aliases)
    a.at(out)->copy_from(*a.at(in));
  return a;
}

void compare_reference(const spec::KernelSpec &, KernelPrep &, const RunOptions &);
void find_unwritten(KernelPrep &);
void find_undefined_dependence(KernelPrep &, const RunOptions &);

KernelPrep prepare(const spec::KernelSpec &k, const RunOptions &opts, int runs) {
  KernelPrep p;
  // A nested emit_pipeline: the oracle and the sizes are its flattened
  // kernel's (p.ck is bound to it); the lowering is the nested kernel's.
  const spec::KernelSpec flat = spec::flatten_nested(k);
  try {
    p.ck = concretize(k, opts.overrides, opts.scale, opts.target);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e);
    return p;
  }
  const KernelSizes sizes = kernel_sizes(flat, p.ck);
  p.memory_estimate = kernel_estimate(flat, sizes, opts, runs, sizes.gpu, nullptr, nullptr);
  if (auto r = check_memory(k.name, k.loc, p.memory_estimate, opts.max_memory_bytes)) {
    p.early = r;
    return p;
  }
  spec::LowerOptions lo;
  lo.overrides = p.ck.params;
  lo.target = opts.target;
  std::vector<spec::Diagnostic> errs;
  const spec::KernelSpec scaled = opts.scale > 1 ? concrete_spec(p.ck) : k;
  p.lowered = spec::lower(scaled, lo, errs);
  if (!p.lowered) {
    p.early = bad_input(k.name, errs.empty() ? k.loc : errs.front().loc,
                        errs.empty() ? std::string("cannot lower '" + k.name + "'") : errs.front().message);
    return p;
  }
  try {
    p.program_env = bind_params(p.lowered->program.params, p.ck.params);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e);
    return p;
  }
  for (const auto &b : p.lowered->program.buffers) {
    auto s = buffer_array_shape(b, p.program_env);
    if (!s) {
      p.early = bad_input(k.name, b.loc, "lowered buffer '" + b.name + "' has no concrete shape");
      return p;
    }
    p.buffer_shapes[b.name] = *s;
  }
  // Now with the lowered program's own size, buffers and copies.
  p.memory_estimate =
      kernel_estimate(flat, sizes, opts, runs, sizes.gpu, &p.lowered->program, &p.buffer_shapes);
  if (auto r = check_memory(k.name, k.loc, p.memory_estimate, opts.max_memory_bytes)) {
    p.early = r;
    return p;
  }
  p.reduces = has_float_reduction(flat.body);
  p.arrays = make_kernel_arrays(p.ck, opts.seed, opts.input_kind);
  if (opts.inputs_dir) {
    for (const auto &o : p.ck.operands)
      if (o.role == spec::Role::in)
        if (auto err = load_npy_into(*p.arrays.at(o.name), *opts.inputs_dir, "input", opts.scale);
            !err.empty()) {
          p.early = bad_input(k.name, o.loc, err);
          return p;
        }
    for (const auto &[out, in] : p.ck.aliases)
      p.arrays.at(out)->copy_from(*p.arrays.at(in));
  }
  if (opts.input_data) {
    for (const auto &o : p.ck.operands)
      if (auto it = opts.input_data->find(o.name); o.role == spec::Role::in && it != opts.input_data->end())
        p.arrays.at(o.name)->copy_from(*it->second);
    for (const auto &[out, in] : p.ck.aliases)
      p.arrays.at(out)->copy_from(*p.arrays.at(in));
  }
  if (opts.save_dir)
    for (const auto &o : p.ck.operands)
      if (o.role == spec::Role::in)
        if (auto err = save_npy(*opts.save_dir, o.name + ".npy", *p.arrays.at(o.name)); !err.empty()) {
          p.early = env_error(k.name, err);
          return p;
        }
  // An input in HBM (memory_space=any) that no output aliases is the
  // caller's array, which XLA did not donate: the body's copies may not
  // write it (check's input-write-lost). Kept aside to tell.
  std::map<std::string, std::unique_ptr<HostArray>> callers;
  for (const auto &o : p.ck.operands)
    if (o.role == spec::Role::in && !o.windowed && o.decl && o.decl->memory_space == spec::MemorySpace::any &&
        std::none_of(p.ck.aliases.begin(), p.ck.aliases.end(),
                     [&](const auto &a) { return a.second == o.name; }))
      callers[o.name] = p.arrays.at(o.name)->clone();
  try {
    run_oracle(p.ck, p.arrays, &p.written);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e, "oracle: ");
    return p;
  }
  for (const auto &[name, before] : callers) {
    const HostArray &now = *p.arrays.at(name);
    for (std::int64_t i = 0; i < now.size(); ++i) {
      const double was = before->get(i), is = now.get(i);
      if (was == is || (std::isnan(was) && std::isnan(is))) continue;
      const auto &o = *p.ck.operand(name);
      p.early = bad_input(
          k.name, o.decl->loc,
          "the body wrote input '" + name + "' (memory_space=any), which no output aliases: " + name +
              index_string(unflatten(i, now.shape())) + " was " + number(was) + ", is " + number(is) +
              "; that is the caller's array, not the kernel's to change (alias it to an "
              "output, `alias " +
              name + " -> OUT`, or copy into an output or a scratch)");
      p.early->status = RunStatus::fail;
      return p;
    }
  }
  for (const auto &o : p.ck.operands)
    if (o.role == spec::Role::in && holds_nan(*p.arrays.at(o.name))) p.nan_value = true;
  // (A float's: find_undefined_dependence.)
  for (const auto &[name, w] : p.written)
    p.defined[name] =
        spec::dtype_is_float(p.arrays.at(name)->dtype()) ? std::vector<std::uint8_t>(w.size(), 0) : w;
  for (const auto &[out, in] : p.ck.aliases)
    if (auto d = p.defined.find(out); d != p.defined.end()) {
      const HostArray &x = *p.arrays.at(in);
      for (std::int64_t i = 0; i < x.size() && static_cast<std::size_t>(i) < d->second.size(); ++i)
        if (!d->second[static_cast<std::size_t>(i)] && x.is_poison(i))
          d->second[static_cast<std::size_t>(i)] = 1;
    }
  if (p.nan_value) find_unwritten(p);
  find_undefined_dependence(p, opts);
  if (!k.reference.empty()) compare_reference(k, p, opts);
  if (opts.save_dir && !p.early)
    for (const auto &o : p.ck.operands)
      if (o.role == spec::Role::out)
        if (auto err = save_npy(*opts.save_dir, o.name + ".oracle.npy", *p.arrays.at(o.name)); !err.empty()) {
          p.early = env_error(k.name, err);
          return p;
        }
  return p;
}

/// The block of `op` holding the mismatching element, and the first grid
/// point (in run order) that visits it; and what poison there means.
void locate(const KernelPrep &p, const std::string &operand, Mismatch &m) {
  m.array = operand;
  const ConcreteOperand *op = p.ck.operand(operand);
  if (op && op->windowed) {
    if (op->has_element_dims() || op->has_bounded_dims()) {
      // Windows placed by element: the first grid point whose window (its
      // ds size along a BoundedSlice dim) holds the element, and its index.
      spec::BlockIndexer index(*op, p.ck.params, p.ck.grid, p.ck.grid.size()),
          sizes(*op, p.ck.params, p.ck.grid, p.ck.grid.size(), op->has_bounded_dims() ? &op->size : nullptr);
      for (std::int64_t lin = 0; lin < p.ck.num_points() && !m.grid_point; ++lin) {
        const Shape pt = grid_point(p.ck, lin);
        const auto bi = index.at(pt).value;
        const auto z = op->has_bounded_dims() ? sizes.at(pt).value : std::optional<Shape>(op->block);
        if (!bi) continue;
        const Shape &b = *bi;
        bool in = z.has_value();
        for (std::size_t d = 0; d < b.size() && in; ++d) {
          const std::int64_t lo = op->window_start(d, b[d]);
          in = m.element[d] >= lo && m.element[d] - lo < (*z)[d];
        }
        if (in) {
          m.block = b;
          m.grid_point = pt;
        }
      }
    } else {
      Shape blk(m.element.size());
      for (std::size_t d = 0; d < blk.size(); ++d)
        blk[d] = op->squeezed[d] ? m.element[d] : m.element[d] / op->block[d];
      m.block = blk;
      spec::BlockIndexer index(*op, p.ck.params, p.ck.grid, p.ck.grid.size());
      for (std::int64_t lin = 0; lin < p.ck.num_points(); ++lin) {
        const Shape pt = grid_point(p.ck, lin);
        if (index.at(pt).value == blk) {
          m.grid_point = pt;
          break;
        }
      }
    }
  }
  if (m.is_poison || m.expected_is_poison) {
    auto w = p.written.find(operand);
    const HostArray &a = *p.arrays.at(operand);
    const auto alias = p.ck.aliases.find(operand);
    m.poison = kernel_poison(m, w == p.written.end() ? nullptr : &w->second, flat_index(m.element, a.shape()),
                             operand, alias == p.ck.aliases.end() ? nullptr : &alias->second);
  }
}

void find_unwritten(KernelPrep &p) {
  for (const auto &o : p.ck.operands) {
    if (o.role != spec::Role::out || p.ck.aliases.count(o.name)) continue;
    const auto &w = p.written.at(o.name);
    std::int64_t count = 0, first = -1;
    for (std::size_t i = 0; i < w.size(); ++i)
      if (!w[i] && count++ == 0) first = static_cast<std::int64_t>(i);
    if (!count) continue;
    Mismatch m;
    m.element = unflatten(first, p.arrays.at(o.name)->shape());
    m.count = count;
    m.expected_is_poison = m.is_poison = true;
    locate(p, o.name, m);
    p.unwritten = m;
    return;
  }
}

/// Poison shows undefined data only where it survives to an output: an
/// integer's sentinel compared with an iota (`ids == iota`, a histogram's
/// padding ids) or a NaN compared with a threshold gives an ordinary False.
/// So where the oracle may read undefined data (a partial block's padding,
/// scratch), it runs a second time with stand-ins for it (run_oracle's
/// stand_in); an output element that is a value in the first pass and
/// another value in the second depends on undefined data.
void find_undefined_dependence(KernelPrep &p, const RunOptions &opts) {
  // The NaNs the body stored: a computed value (log of a negative, or an
  // input's NaN carried) where no stand-in changes it, else poison carried.
  std::map<std::string, std::vector<std::uint8_t>> nans;
  {
    for (const auto &o : p.ck.operands) {
      if (o.role != spec::Role::out || !spec::dtype_is_float(o.dtype) || !p.written.count(o.name)) continue;
      const HostArray &a = *p.arrays.at(o.name);
      const auto &w = p.written.at(o.name);
      std::vector<std::uint8_t> n(w.size(), 0);
      bool any = false;
      for (std::size_t i = 0; i < w.size(); ++i)
        if (w[i] && std::isnan(a.get(static_cast<std::int64_t>(i)))) {
          n[i] = 1;
          any = true;
        }
      if (any) nans[o.name] = std::move(n);
    }
  }
  auto keep_nans = [&] {
    for (auto &[name, n] : nans)
      for (std::size_t i = 0; i < n.size(); ++i)
        if (n[i]) p.defined[name][i] = 1;
  };
  if (!may_read_undefined(p.ck)) {
    keep_nans(); // (nothing undefined is read: every NaN stored is computed)
    return;
  }
  // Two sets of stand-ins (HostArray::poison_with_stand_in): a large and a
  // small one, so that a comparison either way sees one of them.
  static const char *const kStandIns[] = {"", "3.0, the dtype's largest integer, false", "-3.0, 0, true"};
  for (int kind = 1; kind <= 2; ++kind) {
    ArrayMap alt = arrays_with_inputs(p, opts, kind);
    try {
      run_oracle(p.ck, alt, nullptr, kind);
    } catch (const ExecError &) {
      // What the first pass did not stop at, the stand-ins did: no verdict
      // on a dependence, and no NaN shown to be computed.
      nans.clear();
      continue;
    }
    for (auto &[name, n] : nans) {
      const HostArray &b = *alt.at(name);
      for (std::size_t i = 0; i < n.size(); ++i)
        if (n[i] && !std::isnan(b.get(static_cast<std::int64_t>(i)))) n[i] = 0;
    }
    if (p.undefined_dependence) continue;
    for (const auto &o : p.ck.operands) {
      if (o.role != spec::Role::out) continue;
      const HostArray &a = *p.arrays.at(o.name), &b = *alt.at(o.name);
      std::int64_t count = 0, first = -1;
      for (std::int64_t i = 0; i < a.size(); ++i) {
        // (A NaN there is poison or a computed NaN, `nans`; an integer's
        // sentinel may be a value the body stored, and one that changes
        // with the stand-ins is unwritten memory copied out.)
        if (spec::dtype_is_float(a.dtype()) && a.is_poison(i)) continue;
        const double x = a.get(i), y = b.get(i);
        if (x == y || (std::isnan(x) && std::isnan(y))) continue;
        if (count++ == 0) first = i;
      }
      if (!count) continue;
      Mismatch m;
      m.element = unflatten(first, a.shape());
      m.count = count;
      m.expected = a.get(first);
      m.actual = b.get(first);
      m.expected_from = "oracle, undefined data as poison";
      m.actual_from = std::string("oracle, undefined data as ") + kStandIns[kind];
      locate(p, o.name, m);
      m.poison = "is " + number(m.expected) + " with undefined data as poison and " + number(m.actual) +
                 " with stand-ins for it (" + kStandIns[kind] + ")";
      p.undefined_dependence = m;
      break;
    }
  }
  keep_nans();
}

void compare_reference(const spec::KernelSpec &k, KernelPrep &p, const RunOptions &opts) {
  // The oracle's inputs (read or generated), fresh outputs.
  ArrayMap ref = arrays_with_inputs(p, opts);
  ArrayMap bounds;
  try {
    bounds = run_reference(p.ck, ref);
  } catch (const ExecError &e) {
    p.early = from_error(k.name, e, "reference: ");
    return;
  }
  const std::int64_t len = reference_reduction_length(p.ck);
  std::map<std::string, spec::DType> acc; // per output (accumulation_dtype)
  for (const auto &o : p.ck.operands)
    if (o.role == spec::Role::out) acc[o.name] = accumulation_dtype(p.ck, o.name);
  if (opts.save_dir)
    for (const auto &o : p.ck.operands) {
      if (o.role != spec::Role::out) continue;
      auto err = save_npy(*opts.save_dir, o.name + ".reference.npy", *ref.at(o.name));
      // A float output's tolerance, element by element.
      if (const auto tol = reference_tolerance(o.dtype, acc.at(o.name), len); tol && err.empty()) {
        const HostArray &r = *ref.at(o.name), &b = *bounds.at(o.name);
        HostArray t(o.name, spec::DType::f32, r.shape());
        for (std::int64_t i = 0; i < r.size(); ++i)
          t.set(i, element_tolerance(o.dtype, b.get(i), r.get(i), *tol));
        err = save_npy(*opts.save_dir, o.name + ".tolerance.npy", t);
      }
      if (!err.empty()) {
        p.early = env_error(k.name, err);
        return;
      }
    }
  for (const auto &o : p.ck.operands) {
    if (o.role != spec::Role::out) continue;
    const auto tol = reference_tolerance(o.dtype, acc.at(o.name), len);
    auto w = p.defined.find(o.name);
    const Tolerance t(tol, bounds.at(o.name).get(), o.dtype);
    auto m = compare(*ref.at(o.name), *p.arrays.at(o.name), t, p.nan_value,
                     w == p.defined.end() ? nullptr : &w->second);
    if (!m) {
      // The largest tolerance over the output's largest magnitude: past 5%,
      // the reference cancels so much that a body off by that much passes.
      const HostArray &r = *ref.at(o.name);
      double scale = 0, worst = 0;
      std::int64_t at = -1;
      for (std::int64_t i = 0; i < r.size(); ++i)
        if (std::isfinite(r.get(i))) scale = std::max(scale, std::fabs(r.get(i)));
      for (std::int64_t i = 0; i < r.size() && tol && scale > 0; ++i)
        if (const auto x = t.at(i, r.get(i)); x && std::isfinite(r.get(i)) && *x > worst) worst = *x, at = i;
      if (at >= 0 && worst > 0.05 * scale) {
        std::ostringstream os;
        os << "the reference's error bound allows " << number(worst) << " at " << o.name
           << index_string(unflatten(at, r.shape())) << ", " << number(std::round(100 * worst / scale))
           << "% of the largest |" << o.name << "| (" << number(scale)
           << "), so a body off by that much passes: ";
        if (acc.at(o.name) != spec::DType::f32)
          os << "the body accumulates it in " << spec::to_string(acc.at(o.name))
             << ", whose rounding the bound counts at every term of its sums (accumulate in f32 to be held "
                "tighter)";
        else
          os << "the reference cancels there (e.g. a variance as E[x^2] - E[x]^2); a well-conditioned "
                "reference (a two-pass variance) is held tighter";
        p.reference_notes.push_back(os.str());
      }
      continue;
    }
    m->expected_from = "reference";
    m->actual_from = "oracle: the body run per grid point";
    locate(p, o.name, *m);
    p.reference_mismatch = m;
    p.reference_tolerance = tol;
    return;
  }
}

// A result stamped with the mode and seed of one run (a prepared early
// result — bad input, a kernel that cannot lower — is reported once per run).
RunResult with_run(RunResult r, DmaMode mode, std::uint64_t seed) {
  r.mode = mode;
  r.seed = seed;
  return r;
}

// The program on the CPU runner; false (with the result's status and
// reason, after `prefix`) when it faulted.
bool run_on_cpu(RunResult &r, const std::string &unit, const spec::Program &prog, const spec::Env &env,
                const BufferMap &buffers, const RunOptions &opts, DmaMode mode, std::uint64_t seed,
                const std::string &prefix, bool launch_snapshot = false) {
  ProgramRunConfig c = config_for(opts, mode, seed);
  c.launch_snapshot = launch_snapshot;
  ProgramOutcome o = run_program(prog, env, buffers, c);
  std::optional<ExecError> err = o.error;
  adopt(r, std::move(o));
  if (!err) return true;
  RunResult e = from_error(unit, *err, prefix);
  r.status = e.status;
  r.reason = e.reason;
  r.loc = e.loc;
  return false;
}

RunResult run_prepared(const spec::KernelSpec &k, KernelPrep &p, const RunOptions &opts, DmaMode mode,
                       std::uint64_t seed, bool save) {
  if (p.early) return with_run(*p.early, mode, seed);
  RunResult r = with_run(RunResult{}, mode, seed);
  r.unit = k.name;
  r.params = p.ck.params;
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
  // Triton's adversarial runs: every program reads the arrays as they were
  // at launch, so a program that reads (or `+=`s) what another stores loses it.
  const bool snapshot = !opts.device && mode == DmaMode::random && spec::uses_triton(k);
  if (opts.device) {
    if (!run_on_device(r, opts, prog, &*p.lowered, p.program_env, buffers, mode, seed)) return r;
  } else if (!run_on_cpu(r, k.name, prog, p.program_env, buffers, opts, mode, seed,
                         "lowered program: ", snapshot)) {
    return r;
  }
  if (snapshot)
    r.notes.push_back("backend = triton: in this run every program read the arrays as they were at launch "
                      "(all programs at once, no store landed before another program's reads)");
  r.status = RunStatus::pass;
  if (save && opts.save_dir)
    for (const auto &bind : p.lowered->bindings)
      if (bind.role == spec::Role::out && !bind.hbm.empty())
        if (auto err = save_npy(*opts.save_dir, bind.operand + ".npy", *buffers.at(bind.hbm)); !err.empty()) {
          r.status = RunStatus::error;
          r.reason = err;
          return r;
        }
  for (const auto &bind : p.lowered->bindings) {
    if (bind.role != spec::Role::out || bind.hbm.empty()) continue;
    const HostArray &expected = *p.arrays.at(bind.operand);
    const auto tol = tolerance_for(expected.dtype(), p.reduces);
    auto w = p.defined.find(bind.operand);
    auto m = compare(expected, *buffers.at(bind.hbm), tol, p.nan_value,
                     w == p.defined.end() ? nullptr : &w->second);
    if (!m) continue;
    locate(p, bind.operand, *m);
    r.status = RunStatus::fail;
    r.tolerance = tol;
    r.reason = describe(*m, tol);
    r.mismatch = m;
    break;
  }
  if (r.status == RunStatus::pass && p.unwritten) {
    r.status = RunStatus::fail;
    r.mismatch = p.unwritten;
    r.reason = describe(*r.mismatch, std::nullopt);
  }
  if (r.status == RunStatus::pass && p.undefined_dependence) {
    r.status = RunStatus::fail;
    r.mismatch = p.undefined_dependence;
    r.reason = "the body's result depends on undefined data (the padding of a partial block, or scratch "
               "nothing wrote, that dropped out of the poison through a comparison or a select): " +
               describe(*r.mismatch, std::nullopt);
  }
  if (r.status == RunStatus::pass)
    r.notes.insert(r.notes.end(), p.reference_notes.begin(), p.reference_notes.end());
  // The pipelined run equals the oracle; the oracle must equal the reference.
  if (r.status == RunStatus::pass && p.reference_mismatch) {
    r.status = RunStatus::fail;
    // (One relative tolerance only where the element compared had no bound.)
    if (!p.reference_mismatch->bound) r.tolerance = p.reference_tolerance;
    r.mismatch = p.reference_mismatch;
    r.reason = "the body disagrees with the reference: " + describe(*r.mismatch, r.tolerance);
  }
  return r;
}

// ---------------------------------------------------------------- pipelines

struct ProgramPrep {
  std::optional<RunResult> early;
  spec::Env env;
  std::map<std::string, Shape> shapes;
  std::map<std::string, std::unique_ptr<HostArray>> initial; ///< hbm buffers' data
  std::map<std::string, std::unique_ptr<HostArray>> intent;  ///< after the synchronous run
  /// Per hbm buffer whose intent holds poison (an integer's sentinel, a NaN
  /// where the data holds none): 1 where the program computed it (a value,
  /// not poison; see prepare).
  std::map<std::string, std::vector<std::uint8_t>> stored;
  bool nan_value = false; ///< the initial data holds a NaN (holds_nan): NaN is compared as a value
  bool reduces = false;
  std::uint64_t memory_estimate = 0;
};

/// A run's buffers: hbm ones hold the initial data, acc ones zeros, the rest
/// poison (with `stand_in`, HostArray::poison_with_stand_in's of that kind).
std::vector<std::unique_ptr<HostArray>> fresh_buffers(const spec::Program &prog, ProgramPrep &p,
                                                      BufferMap &map, int stand_in = 0) {
  std::vector<std::unique_ptr<HostArray>> owned;
  for (const auto &b : prog.buffers) {
    auto a = std::make_unique<HostArray>(b.name, b.dtype, p.shapes.at(b.name));
    if (stand_in) a->poison_with_stand_in(stand_in);
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

ProgramPrep prepare(const spec::Program &prog, const RunOptions &opts, int runs) {
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
  std::int64_t max_elements = 1;
  std::size_t max_rank = 1, max_name = 0;
  for (const auto &b : prog.buffers) {
    auto s = buffer_array_shape(b, p.env);
    if (!s) {
      p.early = bad_input(prog.name, b.loc, "buffer '" + b.name + "' has no concrete shape");
      return p;
    }
    const auto bytes = footprint::array_bytes(*s, b.dtype);
    total = spec::saturating_add(total, bytes);
    if (b.kind == spec::BufferKind::hbm) hbm = spec::saturating_add(hbm, bytes);
    // A load reads at most one slot (or one whole array).
    Shape slot = *s;
    if (b.slots && !slot.empty()) slot.erase(slot.begin());
    max_elements = std::max(max_elements, num_elements(slot));
    max_rank = std::max(max_rank, s->size());
    max_name = std::max(max_name, b.name.size());
    p.shapes[b.name] = *s;
  }
  // Initial data, the intent's buffers and one run's buffers; each run's
  // copy records, values and timeline.
  Estimate e;
  e.add(hbm);
  e.add(spec::saturating_mul(std::uint64_t{2}, total));
  spec::Env env = p.env;
  const Copies c = count_copies(prog.body, env);
  e.add(c.starts, transfer_bytes(max_rank, max_name));
  e.add(c.starts > c.waits ? c.starts - c.waits : 0, note_bytes(max_rank, max_name, runs + 1));
  e.add(values(nodes(prog.body, true) + lets(prog.body), max_elements));
  e.add(event_bytes(opts, runs + 1));
  p.memory_estimate = e.bytes;
  if (auto r = check_memory(prog.name, prog.loc, p.memory_estimate, opts.max_memory_bytes)) {
    p.early = r;
    return p;
  }
  std::uint64_t k = 0;
  for (const auto &b : prog.buffers)
    if (b.kind == spec::BufferKind::hbm) {
      auto a = std::make_unique<HostArray>(b.name, b.dtype, p.shapes.at(b.name));
      fill_inputs(*a, opts.input_kind, opts.seed * 1000003ull + ++k);
      if (opts.inputs_dir && std::filesystem::exists(npy_path(*opts.inputs_dir, b.name + ".npy")))
        if (auto err = load_npy_into(*a, *opts.inputs_dir, "buffer", 1); !err.empty()) {
          p.early = bad_input(prog.name, b.loc, err);
          return p;
        }
      if (opts.save_dir)
        if (auto err = save_npy(*opts.save_dir, b.name + ".npy", *a); !err.empty()) {
          p.early = env_error(prog.name, err);
          return p;
        }
      p.nan_value = p.nan_value || holds_nan(*a);
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
  // An integer's poison is a value too (INT32_MIN, the -128 of a saturating
  // int8 cast, bool true), and so is a NaN the program computes (log of a
  // negative) where the data holds none. Where the intent holds such a
  // value, a second synchronous run with stand-ins for undefined data
  // (poison_with_stand_in) tells a computed one, the same there, from one
  // copied out of memory nothing wrote.
  std::vector<std::string> sentinel;
  for (const auto &[name, a] : p.intent)
    if (!spec::dtype_is_float(a->dtype()) || !p.nan_value)
      for (std::int64_t i = 0; i < a->size(); ++i)
        if (a->is_poison(i)) {
          sentinel.push_back(name);
          break;
        }
  if (!sentinel.empty()) {
    BufferMap alt_map;
    const auto alt = fresh_buffers(prog, p, alt_map, 1);
    if (!run_program(prog, p.env, alt_map, config_for(opts, DmaMode::synchronous, 0)).error)
      for (const auto &name : sentinel) {
        const HostArray &x = *p.intent.at(name), &y = *alt_map.at(name);
        auto &s = p.stored[name];
        s.assign(static_cast<std::size_t>(x.size()), 0);
        for (std::int64_t i = 0; i < x.size(); ++i)
          s[static_cast<std::size_t>(i)] = x.is_poison(i) && y.is_poison(i);
      }
  }
  return p;
}

RunResult run_prepared(const spec::Program &prog, ProgramPrep &p, const RunOptions &opts, DmaMode mode,
                       std::uint64_t seed, bool save) {
  if (p.early) return with_run(*p.early, mode, seed);
  RunResult r = with_run(RunResult{}, mode, seed);
  r.unit = prog.name;
  r.params = p.env;
  BufferMap map;
  auto owned = fresh_buffers(prog, p, map);
  if (opts.device) {
    if (!run_on_device(r, opts, prog, nullptr, p.env, map, mode, seed)) return r;
  } else if (!run_on_cpu(r, prog.name, prog, p.env, map, opts, mode, seed, "")) {
    return r;
  }
  r.status = RunStatus::pass;
  if (save && opts.save_dir)
    for (const auto &b : prog.buffers)
      if (b.kind == spec::BufferKind::hbm)
        if (auto err = save_npy(*opts.save_dir, b.name + ".out.npy", *map.at(b.name)); !err.empty()) {
          r.status = RunStatus::error;
          r.reason = err;
          return r;
        }
  for (const auto &b : prog.buffers) {
    if (b.kind != spec::BufferKind::hbm) continue;
    const HostArray &expected = *p.intent.at(b.name);
    const auto tol = tolerance_for(expected.dtype(), p.reduces);
    const auto stored = p.stored.find(b.name);
    if (auto m = compare(expected, *map.at(b.name), tol, p.nan_value,
                         stored == p.stored.end() ? nullptr : &stored->second)) {
      m->expected_from = "synchronous run";
      m->actual_from = "run";
      // HBM arrays start as data, poison there was copied out of a slot
      // nothing had written; but for one `A[...] = undefined` left as
      // poison, whose element may simply never have been written since.
      bool discarded = false;
      spec::for_each_stmt(prog.body, [&](const spec::Stmt &st) {
        if (const auto *a = std::get_if<spec::Assign>(&st.kind))
          discarded = discarded || (a->discards() && a->target.name == b.name);
      });
      const std::string how = discarded
                                  ? "poison: '" + b.name +
                                        "[...] = undefined' left it so and nothing wrote it since, or a copy "
                                        "brought poison there"
                                  : "poison was copied there";
      if (m->expected_is_poison)
        m->poison = "reads memory nothing wrote: " + how + ", in the synchronous run too";
      else if (m->is_poison)
        m->poison =
            "reads memory nothing wrote: " + how + " (the synchronous run has " + number(m->expected) + ")";
      r.status = RunStatus::fail;
      r.tolerance = tol;
      r.reason = describe(*m, tol);
      r.mismatch = m;
      break;
    }
  }
  return r;
}

constexpr int kAllModesRuns = 5;

template <class Unit, class Prep> RunReport all_modes(const Unit &u, Prep &p, const RunOptions &opts) {
  RunReport rep;
  rep.unit = u.name;
  rep.status = RunStatus::pass;
  std::vector<std::pair<DmaMode, std::uint64_t>> plan = {{DmaMode::eager, opts.seed},
                                                         {DmaMode::on_wait, opts.seed},
                                                         {DmaMode::random, opts.seed},
                                                         {DmaMode::random, opts.seed + 1},
                                                         {DmaMode::random, opts.seed + 2}};
  // A device: one plain run, two adversarial ones (RunOptions::device).
  if (opts.device)
    plan = {{DmaMode::eager, opts.seed}, {DmaMode::random, opts.seed}, {DmaMode::random, opts.seed + 1}};
  for (const auto &[mode, seed] : plan) {
    rep.runs.push_back(run_prepared(u, p, opts, mode, seed, rep.runs.empty()));
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

namespace {

// A kernel with scalar prefetch runs elaborated (spec/prefetch.hpp) with its
// given contents and, for the rest, contents that satisfy the constraints,
// picked with the run's seed (named in `note`); nullopt with `bad` set when
// its prefetch operands are bad input.
std::optional<spec::KernelSpec> resolve_prefetch(const spec::KernelSpec &k, const RunOptions &opts,
                                                 std::string &note, RunResult &bad) {
  if (k.prefetches.empty() && !spec::has_state(k)) return k;
  const spec::Env params = spec::param_env(k.params, opts.overrides);
  spec::PrefetchSpace space = spec::prefetch_space(k, params);
  std::string why = !space.errors.empty() ? space.errors.front().message : space.unknown;
  bad.status = RunStatus::bad_input;
  bad.unit = k.name;
  bad.loc = !space.errors.empty() ? space.errors.front().loc : k.loc;
  std::optional<spec::PrefetchContents> picked;
  if (why.empty()) picked = spec::pick_prefetch(space, opts.seed, why);
  if (!picked) {
    bad.reason = why;
    return std::nullopt;
  }
  if (!picked->empty())
    note = "prefetch contents picked with seed " + std::to_string(opts.seed) + ": " +
           spec::format_prefetch(*picked);
  // SMEM state (spec/state.hpp) runs as the same elaborated kernel that check proves.
  spec::StateElaboration e;
  try {
    e = spec::elaborate(k, space, params, *picked);
  } catch (const spec::ElaborationTooLarge &too) {
    bad.status = RunStatus::error;
    bad.reason = std::string("not run: ") + too.what();
    return std::nullopt;
  }
  if (e.kernel && !e.undefined_read && !e.parallel_carry) return std::move(*e.kernel);
  if (!e.errors.empty()) {
    bad.loc = e.errors.front().loc;
    bad.reason = e.errors.front().message;
  } else if (e.undefined_read) {
    bad.status = RunStatus::fail;
    bad.loc = e.undefined_read->loc;
    bad.reason = spec::undefined_state_message(*e.undefined_read);
  } else if (e.parallel_carry) {
    bad.status = RunStatus::fail;
    bad.loc = e.parallel_carry->loc;
    bad.reason = spec::parallel_carry_message(*e.parallel_carry);
  } else {
    bad.reason = "cannot run '" + k.name + "': " + e.unknown;
  }
  return std::nullopt;
}

} // namespace

RunResult run(const spec::KernelSpec &k0, const RunOptions &opts) {
  const spec::HoistedNames quoted(k0.body, k0.reference);
  std::string note;
  RunResult bad;
  auto k = resolve_prefetch(k0, opts, note, bad);
  if (!k) return bad;
  KernelPrep p = prepare(*k, opts, 1);
  RunResult r = run_prepared(*k, p, opts, opts.mode, opts.seed, true);
  r.memory_estimate = p.memory_estimate;
  if (!note.empty()) r.notes.push_back(note);
  return r;
}

RunResult run(const spec::Program &prog, const RunOptions &opts) {
  const spec::HoistedNames quoted(prog.body);
  ProgramPrep p = prepare(prog, opts, 1);
  RunResult r = run_prepared(prog, p, opts, opts.mode, opts.seed, true);
  r.memory_estimate = p.memory_estimate;
  return r;
}

RunReport run_all_modes(const spec::KernelSpec &k0, const RunOptions &opts) {
  std::string note;
  RunResult bad;
  auto k = resolve_prefetch(k0, opts, note, bad);
  if (!k) {
    RunReport r;
    r.status = bad.status;
    r.unit = bad.unit;
    r.runs.push_back(std::move(bad));
    return r;
  }
  KernelPrep p = prepare(*k, opts, kAllModesRuns);
  RunReport r = all_modes(*k, p, opts);
  r.memory_estimate = p.memory_estimate;
  if (!note.empty())
    for (auto &run : r.runs)
      run.notes.push_back(note);
  return r;
}

RunReport run_all_modes(const spec::Program &prog, const RunOptions &opts) {
  ProgramPrep p = prepare(prog, opts, kAllModesRuns);
  RunReport r = all_modes(prog, p, opts);
  r.memory_estimate = p.memory_estimate;
  return r;
}

std::string run_label(const RunResult &r) {
  std::string n = r.backend.empty() ? to_string(r.mode) : r.backend;
  if (r.mode == DmaMode::random) n += " seed=" + std::to_string(r.seed);
  return n;
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
    // Wide enough for "random seed=4294967297" (the CLI's largest seed + 2).
    os << "  " << std::left << std::setw(23) << run_label(r) << std::setw(10) << to_string(r.status)
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

// ---------------------------------------------------------------- shrinking

namespace {

// A range [lo, hi) of one input's flat elements kept at their original
// values; every element outside the kept ranges is zero.
struct Chunk {
  std::string input;
  std::int64_t lo = 0, hi = 0;
};

std::string mismatch_short(const Mismatch &m) {
  std::string s = m.array + index_string(m.element);
  if (!m.poison.empty()) return s + " " + m.poison.substr(0, m.poison.find(':'));
  return s + " is " + number(m.actual) + " (" + m.expected_from + ": " + number(m.expected) + ")";
}

} // namespace

InputShrink shrink_inputs(const spec::KernelSpec &k, const RunOptions &opts, const RunResult &failing,
                          int max_runs) {
  InputShrink out;
  if (!failing.mismatch) {
    out.message = "nothing to shrink: the run failed without a mismatching element";
    return out;
  }
  RunOptions base_opts = opts;
  base_opts.mode = failing.mode;
  base_opts.seed = failing.seed;
  base_opts.save_dir.reset();
  // The inputs the failing run had (generated or read).
  KernelPrep p = prepare(k, base_opts, 1);
  if (p.early) {
    out.message = "cannot shrink: " + p.early->reason;
    return out;
  }
  std::map<std::string, std::unique_ptr<HostArray>> base, trial;
  std::vector<std::string> inputs;
  for (const auto &o : p.ck.operands)
    if (o.role == spec::Role::in) {
      inputs.push_back(o.name);
      base[o.name] = p.arrays.at(o.name)->clone();
      trial[o.name] = p.arrays.at(o.name)->clone();
    }
  p = KernelPrep{};
  std::map<std::string, const HostArray *> data;
  for (const auto &[n, a] : trial)
    data[n] = a.get();
  base_opts.input_data = &data;
  const Mismatch &want = *failing.mismatch;
  // Whether the failure persists with only `kept` non-zero (value 1 instead
  // of the original where `ones`).
  auto fails = [&](const std::vector<Chunk> &kept, bool ones) -> bool {
    for (auto &[n, a] : trial)
      a->fill_zero();
    for (const auto &c : kept)
      for (std::int64_t i = c.lo; i < c.hi; ++i)
        trial.at(c.input)->set(i, ones ? 1.0 : base.at(c.input)->get(i));
    ++out.runs;
    RunResult r = run(k, base_opts);
    const bool same = r.status == RunStatus::fail && r.mismatch && r.mismatch->array == want.array &&
                      r.mismatch->expected_from == want.expected_from;
    if (same) out.mismatch = r.mismatch;
    return same;
  };
  std::vector<Chunk> kept, work;
  for (const auto &n : inputs)
    if (base.at(n)->size() > 0) work.push_back({n, 0, base.at(n)->size()});
  auto without = [&](std::size_t skip_work, const Chunk *extra) {
    std::vector<Chunk> s = kept;
    for (std::size_t i = 0; i < work.size(); ++i)
      if (i != skip_work) s.push_back(work[i]);
    if (extra) s.push_back(*extra);
    return s;
  };
  if (fails({}, false)) {
    out.shrunk = true;
    out.message = mismatch_short(*out.mismatch) + " even when every input is 0";
    return out;
  }
  // Each input zeroed whole.
  for (std::size_t i = 0; i < work.size() && work.size() > 1 && out.runs < max_runs;)
    if (fails(without(i, nullptr), false))
      work.erase(work.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  // Halves, breadth first: a chunk that must stay is split; its upper half is
  // zeroed when the failure persists without it (the lowest indices stay),
  // else its lower half.
  while (!work.empty() && out.runs < max_runs) {
    Chunk c = work.front();
    work.erase(work.begin());
    if (c.hi - c.lo <= 1) {
      kept.push_back(c);
      continue;
    }
    const std::int64_t mid = c.lo + (c.hi - c.lo) / 2;
    Chunk lo{c.input, c.lo, mid}, hi{c.input, mid, c.hi};
    if (fails(without(work.size(), &lo), false)) {
      work.push_back(lo);
    } else if (out.runs < max_runs && fails(without(work.size(), &hi), false)) {
      work.push_back(hi);
    } else {
      work.push_back(lo);
      work.push_back(hi);
    }
  }
  for (const auto &c : work)
    kept.push_back(c);
  std::sort(kept.begin(), kept.end(), [&](const Chunk &a, const Chunk &b) {
    auto ia = std::find(inputs.begin(), inputs.end(), a.input) - inputs.begin();
    auto ib = std::find(inputs.begin(), inputs.end(), b.input) - inputs.begin();
    return std::tie(ia, a.lo) < std::tie(ib, b.lo);
  });
  // The elements left non-zero.
  std::vector<Chunk> singles;
  for (const auto &c : kept)
    for (std::int64_t i = c.lo; i < c.hi; ++i)
      if (base.at(c.input)->get(i) != 0) {
        if (++out.nonzero <= 8) singles.push_back({c.input, i, i + 1});
      }
  bool ones = false;
  if (out.nonzero <= 8 && out.runs < max_runs && fails(singles, true)) ones = true;
  out.shrunk = true;
  std::string what;
  for (std::size_t i = 0; i < singles.size() && out.nonzero <= 8; ++i) {
    const auto &a = *base.at(singles[i].input);
    out.elements.emplace_back(singles[i].input, unflatten(singles[i].lo, a.shape()));
    out.values.push_back(ones ? 1.0 : a.get(singles[i].lo));
    what += std::string(i == 0                    ? ""
                        : i + 1 == singles.size() ? " and "
                                                  : ", ") +
            singles[i].input + index_string(out.elements.back().second) + " = " + number(out.values.back());
  }
  if (out.nonzero > 8) {
    std::map<std::string, std::int64_t> per;
    for (const auto &c : kept)
      for (std::int64_t i = c.lo; i < c.hi; ++i)
        per[c.input] += base.at(c.input)->get(i) != 0;
    for (const auto &[n, count] : per)
      what += (what.empty() ? "" : ", ") + std::to_string(count) + " of " + n;
    what = std::to_string(out.nonzero) + " non-zero input elements (" + what + ")" +
           (out.runs >= max_runs ? ", after " + std::to_string(out.runs) + " runs (the budget)" : "");
    out.message = mismatch_short(*out.mismatch) + " with " + what;
  } else {
    out.message =
        mismatch_short(*out.mismatch) + " when only " + what + (out.nonzero == 1 ? "" : " are non-zero");
  }
  return out;
}

} // namespace pipecheck::executor
