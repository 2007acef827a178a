#pragma once
/// SMEM state: integer scalars a kernel body keeps across grid steps.
///
/// Two Pallas forms hold it, and both are state here:
/// - an SMEM scratch of i32 (`scratch st: i32[2] memory_space=smem`,
///   pltpu.SMEM((2,), jnp.int32) in scratch_shapes), undefined at the first
///   grid step, unless the body stores data into it (state_scratches);
/// - a scalar-prefetch array the body stores into (upstream paged
///   attention's `buffer_index_ref[0] = next_buffer_index`), which starts
///   with the prefetched contents.
/// The body reads and stores such an array one element at a time, with
/// subscripts that are constants of the params (validate.cpp checks that).
///
/// elaborate_state turns a kernel with state into one without: each element
/// becomes an integer local bound at the top of the body to its value at the
/// step's entry, a store to it rebinds that local, and the entry value is a
/// `where` tree over the step's position in the grid. That table is computed
/// by running the integer part of the body (locals, `when`, loops, stores to
/// state) over the grid in order, which is exact: conditions, subscripts and
/// stores to state are integer expressions, which read no tensor data. Every
/// command (check, run, lower, model) elaborates the same way, so what check
/// proves is what run executes.

#include "spec/diag.hpp"
#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/prefetch.hpp"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pipecheck::spec {

/// An SMEM scratch of i32 scalars (no semaphore): state, unless a store
/// gives it data (state_scratches).
bool is_smem_i32_scratch(const Operand &);

/// The SMEM scratches of i32 scalars in `k` that hold state: each one that
/// no store gives a value read from data (a block, a data scratch or a local
/// computed from one, transitively). One that does (a count of nonzero
/// elements, `c[0] = c[0] + sum(astype(x[...] > 0, i32))`) is a data
/// scratch like an f32 one: its reads are tensor loads, never integers for a
/// condition or a subscript.
std::set<std::string> state_scratches(const KernelSpec &k);

/// The prefetch arrays the kernel body stores into (state with an initial value).
std::set<std::string> written_prefetches(const KernelSpec &);

/// Whether `k` has state: a state scratch, or a prefetch array its body writes.
bool has_state(const KernelSpec &);

/// The most grid steps whose state is tabulated; past it the outcome is unknown.
inline constexpr std::int64_t kMaxStateSteps = 4096;

/// A read of a state element before anything stored it (an SMEM scratch
/// holds no value at the first grid step).
struct UndefinedStateRead {
  Loc loc;                              ///< the statement that reads it
  std::string element;                  ///< "st[0]"
  std::vector<std::int64_t> grid_point; ///< the first step that reads it
};

/// A state element read at a grid step whose value was stored at a step on
/// another index of a parallel axis: on a chip with several cores, the core
/// that runs the read need not have run the store.
struct ParallelStateCarry {
  Loc loc;                              ///< the statement that reads it
  std::string element;                  ///< "st[0]"
  std::vector<std::int64_t> stored_at;  ///< the step that stored the value read
  std::vector<std::int64_t> grid_point; ///< the step that reads it
  std::size_t axis = 0;                 ///< the parallel axis the two differ on
};

/// The outcome of elaborate_state: the kernel without state, or why not.
struct StateElaboration {
  std::optional<KernelSpec> kernel;
  /// Why the state could not be tabulated (a symbolic grid, a parallel axis,
  /// too many steps, open prefetch contents it depends on).
  std::string unknown;
  /// `unknown` because the state depends on prefetch contents left open:
  /// given contents for them would decide it.
  bool needs_contents = false;
  /// With needs_contents: the open prefetch array whose contents it needs
  /// (others may be needed too once it is given).
  std::string needs_array;
  /// The first read of an element before anything stored it. `kernel` is
  /// then still given (an undefined entry value is whatever the table holds
  /// there), for `lower` to show; check reports the read, run fails at it.
  std::optional<UndefinedStateRead> undefined_read;
  /// The first read of a value carried across a parallel axis. `kernel` is
  /// then still given (with the value the grid's order carries), for `lower`
  /// to show; check reports it as a parallel-write-conflict, run fails at it.
  std::optional<ParallelStateCarry> parallel_carry;
  std::vector<Diagnostic> errors; ///< bad input (a subscript outside its array)
};

/// `k` with its state elaborated (see above), under `params`; `contents`
/// gives the prefetch arrays that `k` leaves open (they may be absent, and
/// then a state that depends on them is unknown with needs_contents). A
/// kernel without state comes back as it is. Prefetch reads that are not
/// state stay as written, for elaborate_prefetch.
StateElaboration elaborate_state(const KernelSpec &k, const Env &params,
                                 const PrefetchContents &contents = {});

/// The kernel every command runs and lowers: elaborate_state, then
/// elaborate_prefetch (when `k` has prefetch arrays) with the same contents
/// over `space` (prefetch_space of `k`, with any contents the run replaces).
StateElaboration elaborate(const KernelSpec &k, const PrefetchSpace &space, const Env &params,
                           const PrefetchContents &contents);

/// elaborate() with the contents one run of `k` sees: those its declarations
/// give, the rest picked with seed 0 (spec::pick_prefetch), as `lower` and
/// `model` take them. Without a kernel: the prefetch space's errors, or why
/// no contents could be picked (`unknown`), or elaborate()'s own.
StateElaboration elaborate_picked(const KernelSpec &k, const Env &overrides);

/// "st[0] is read at grid point (1, 0) before anything stores it ...": the
/// sentence every command says for an undefined state read.
std::string undefined_state_message(const UndefinedStateRead &);

/// "the SMEM state st[0] is carried from grid point (0,) into (1,), across
/// axis 0, which is parallel ...": the sentence for a ParallelStateCarry.
std::string parallel_carry_message(const ParallelStateCarry &);

} // namespace pipecheck::spec
