#pragma once
/// The CUDA code generator: a lowered (or hand-written) spec::Program becomes
/// one CUDA C++ translation unit, compiled at run time with NVRTC
/// (executor/cuda/nvrtc.hpp). It translates the Program statement by
/// statement and never looks at the `.pk` kernel: one semantics.
///
/// What the generated kernel does:
/// - Scalar statements (`name = ...`, `if`, `for`) run on every thread of a
///   CTA alike (uniform control flow), with Python's `//` and `%`, in 64-bit
///   integers without spec/eval's overflow checks (lower() has evaluated
///   every block index already; a hand-written pipeline is on its own).
/// - Every sram/smem buffer is a ring of `slots` buffers in dynamic shared
///   memory; the whole layout must fit the per-block budget.
/// - `copy_in_start(hbm region, slot)`: the CTA's threads issue `cp.async`
///   (4 bytes each, global to shared) and commit one group; the group's
///   number is queued on that slot. `copy_in_wait(slot)` waits
///   (`cp.async.wait_group`) until the oldest queued group of that slot has
///   landed, then `__syncthreads()`.
/// - On sm_90 (and in the host emulation) a copy_in_start whose slot rows
///   are whole 16-byte units, contiguous in the array, moves by bulk copies
///   (TMA, `cp.async.bulk`) of whole rows that complete on the slot's
///   mbarrier, where the slot has no copy in flight and the first row is
///   16-byte aligned; its copy_in_wait waits on that barrier's phase. Other
///   copies, and every copy before sm_90, use cp.async.
/// - A region meets its slot as spec::fit_copy says: when it keeps as many
///   dims as the slot has and is no larger in every dim (a partial edge
///   block) or no smaller, the smaller side's extents move, at the leading
///   corner, and the rest of a copied-in slot becomes poison; otherwise the
///   two must hold as many elements, moved in row-major order.
/// - `copy_out_start(slot, hbm region)` stores the slot with plain stores
///   between two `__syncthreads()` (the copy takes effect at its start: one
///   of the Program's allowed schedules); `copy_out_wait` checks that a
///   write-back of that slot is outstanding. (Adversarial mode: at its wait.)
/// - Body values are typed by spec's rules (typecheck.hpp) with every extent
///   known. A store (`ref = expr`, `ref += expr`, the ref a slot or a
///   sub-block of one: indices, slices, ds) is one pass of the CTA's threads
///   over the target's elements, each thread a strided set, then
///   `__syncthreads()`. Elementwise operations (arithmetic, comparisons,
///   where, maximum/minimum, exp and the other float functions, cast),
///   broadcasting, iota and slot refs fuse into that pass; reductions
///   (sum/max/min over an axis or all), dot (1-D/2-D, trans_a/trans_b,
///   preferred_element_type; f32 sums in k order) and a read of the
///   statement's own target at other coordinates are computed first into
///   temporaries in shared memory by passes of their own. A let bound to a
///   tensor (or a float) is a tensor local in shared memory, one per name
///   (every binding of the same type); temporaries and locals follow the
///   rings and count against the budget.
/// - A fault (an index out of bounds, a copy whose region fits its slot in
///   neither way above, a wait with nothing outstanding, a `while` whose condition still
///   holds after its bound) executes `__trap()`.
/// - `X[s] = undefined` stores NaN (poison) into the slot.
/// - `acc` buffers live in shared memory too and start as zeros.
///   `wgmma(acc, a, b)` queues acc += a @ b (f32 sums of the operands'
///   products). On sm_90a (PK_WGMMA), where every wgmma into an acc fits
///   m64nNk16 (bf16 or f16 operands, m % 64, k % 16, n % 8, whole
///   warpgroups), it is the `wgmma.mma_async` instruction: the operand rings
///   are stored in its canonical no-swizzle layout (pk_tile: 8 x 8 core
///   matrices, every access to them goes through it), the acc's tiles of
///   64 x n are dealt to the warpgroups and held in registers while wgmmas
///   on it are in flight (loaded from shared memory at the first, stored
///   back when the last retires), each statement commits one wgmma-group
///   and `wgmma_wait(n)` is `wgmma.wait_group n`: the hardware reads the
///   slots asynchronously, so a slot refilled before that wait (no
///   delay_release) races as it does in Pallas. Elsewhere it is a loop over
///   shared memory that reads a and b when a `wgmma_wait(n)` retires it, as
///   the CPU runner's eager and on_wait modes do, with FMA-free float
///   arithmetic.
/// - CodegenOptions::adversarial: slots poisoned at each copy into them,
///   write-backs taking effect at their waits and leaving their slots
///   poison, and seeded delays (see there).
/// - Poison: the kernel fills all of its shared memory with NaN before the
///   first statement; outputs (hbm buffers written and never read) are
///   poisoned by the host before the launch (fill_poison).
/// - CTAs: a Mosaic GPU lowering with CTA (parallel) axes runs one CUDA
///   block per CTA, each over its own contiguous run of steps of the main
///   loop (spec::Lowered: a CTA's state starts fresh at its first step);
///   any other program runs as one CUDA block, in program order.
///
/// - Element types f32, bf16, f16 and i32, typed by spec's rules
///   (typecheck.hpp: weak literals, promotion); bf16 and f16 are computed in
///   f32 and rounded after every operation, integers wrapped to 32 bits, as
///   the CPU interpreter does. 2-byte elements move in 4-byte cp.async pairs
///   where a pair lies next to each other in the array, otherwise at once.
///
/// Not supported yet (a CodegenResult with an error, never wrong code):
/// other dtypes (i16, i8, u8; bool only as a computed value), semaphores and
/// body DMAs, copies between on-chip buffers or into sub-blocks of slots,
/// copies with offset=, reshape, transpose, dot_general, pow, refs whose
/// extent is not known statically, a cast of a float to bool. Not done for speed
/// yet: TMA tensor maps (bulk copies move one row, or one 16-byte row of a
/// core matrix, each), swizzled wgmma layouts, TMA stores (write-backs are
/// plain stores).

#include "spec/eval.hpp"
#include "spec/ir.hpp"
#include "spec/lower.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::executor::cuda {

/// One hbm buffer: a kernel parameter (a device pointer), in declaration order.
struct GlobalArray {
  std::string name;
  spec::DType dtype = spec::DType::f32;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0;
  bool read = false;    ///< the source of some copy_in_start
  bool written = false; ///< the destination of some copy_out_start
  /// Filled with poison by the host before the launch: written, never read.
  bool poison() const { return written && !read; }
};

/// One sram/smem buffer in dynamic shared memory.
struct SharedRing {
  std::string name;
  std::int64_t slots = 1;
  std::int64_t slot_elements = 0;
  std::vector<std::int64_t> slot_shape; ///< a slot's dims
  spec::DType dtype = spec::DType::f32;
  std::int64_t offset_bytes = 0; ///< from the start of dynamic shared memory, 16-aligned
  bool accumulator = false;      ///< an acc buffer (wgmma's): starts as zeros, not poison
};

struct CudaKernel {
  std::string entry;  ///< the `extern "C" __global__` function's name
  std::string source; ///< the whole translation unit
  std::int64_t ctas = 1;
  int threads = 256;
  std::int64_t smem_bytes = 0; ///< dynamic shared memory per block
  /// Issues wgmma instructions on sm_90a: launched with exactly `threads`
  /// threads (whole warpgroups, to which its accumulator tiles are dealt).
  bool wgmma = false;
  std::vector<GlobalArray> arrays;
  std::vector<SharedRing> shared;
  std::vector<std::string> notes; ///< e.g. why the program runs as one CTA
};

struct CodegenOptions {
  int threads = 256;
  /// Dynamic shared memory per block: H100/H200 opt-in maximum (227 KiB).
  std::int64_t smem_budget_bytes = 227 * 1024;
  /// Adversarial mode: widens the windows in which a racy pipeline goes
  /// wrong on a GPU, where plain runs of racy rings often give right answers.
  /// - Every copy_in_start first fills its destination slot with poison, so
  ///   a read that races the copy, or a slot read after another block's
  ///   copy into it started, reads NaN rather than a stale block that may
  ///   happen to be right.
  /// - A copy_out_start only queues its region; the write-back's stores
  ///   happen at its copy_out_wait (the latest point the Program allows), so
  ///   a slot overwritten before that wait writes back the wrong block.
  ///   Then, as the CPU runner's strict slot contents say, the slot becomes
  ///   poison unless another write-back out of it is in flight or it was
  ///   written since this one started; a write-back never waited never
  ///   lands.
  /// - Seeded spins (clock64) delay some copy starts, waits and compute
  ///   statements by up to 4095 cycles: whether a site spins, and how long,
  ///   is a hash of the seed, the site, the block and how many sites the
  ///   thread passed before, the same for every thread of a block.
  /// The seed is part of the generated source.
  bool adversarial = false;
  std::uint64_t adversarial_seed = 0;
};

/// A generated kernel, or why there is none: "not supported by the CUDA
/// backend: ..." for a construct the generator lacks, "does not fit shared
/// memory: ..." (naming the budget) for a too large layout.
struct CodegenResult {
  std::optional<CudaKernel> kernel;
  std::string error;
  explicit operator bool() const { return kernel.has_value(); }
};

/// Generates the kernel for `program` with every param bound in `env`; one CTA.
CodegenResult generate_cuda(const spec::Program &program, const spec::Env &env, const CodegenOptions & = {});

/// Generates the kernel for a lowered kernel spec: with CTA axes (Mosaic GPU
/// lowering, rolled) one CUDA block per CTA, otherwise one CTA.
CodegenResult generate_cuda(const spec::Lowered &lowered, const spec::Env &env, const CodegenOptions & = {});

/// The bit pattern poison is written with for `dtype` (f32: a quiet NaN;
/// bf16, f16: theirs, in the low 16 bits; i32: its lowest value), as
/// executor/tensor.hpp's HostArray::fill_poison writes it. Only the dtypes
/// the generator supports (f32, bf16, f16, i32).
std::uint32_t poison_bits(spec::DType dtype);

/// Bytes per element of a dtype the generator supports.
int element_bytes(spec::DType dtype);

/// Fills `elements` elements of `dtype` at host memory `data` with poison;
/// the host step before each launch for every GlobalArray with poison().
void fill_poison(void *data, spec::DType dtype, std::int64_t elements);

} // namespace pipecheck::executor::cuda
