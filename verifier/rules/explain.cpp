#include "verifier/rules/explain.hpp"

#include <cassert>

namespace pipecheck::verifier::rules {

namespace {

const char *kSumWrong = R"(kernel incorrect_sum:
    grid = (8, 4, 4)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (i, j, k)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (j, k)
    body:
        when program_id(0) == 0:
            o[...] = zeros
        o[...] += x[...]
)";

const char *kSumRight = R"(kernel correct_sum:
    grid = (4, 4, 8)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (k, i, j)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += x[...]
)";

const char *kPipeRight = R"(pipeline double_buffered_add_one:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    sram Y[2]: f32[512]
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        nxt = (i + 1) % 2
        if i + 1 < N:
            copy_in_start(A[i + 1], X[nxt])
        copy_in_wait(X[cur])
        Y[cur] = X[cur] + 1
        copy_out_start(Y[cur], A[i])
        if i > 0:
            copy_out_wait(Y[nxt])
    copy_out_wait(Y[(N - 1) % 2])
)";

std::vector<RuleDoc> make_docs() {
  std::vector<RuleDoc> d;
  d.push_back(
      {Rule::reduction_not_last_axis,
       "An output is accumulated along a grid axis that comes before an axis its index_map depends "
       "on. Pallas keeps an output block in VMEM only while consecutive grid points map to it, so the "
       "block is revisited non-consecutively and each revisit starts from a stale window. "
       "Precisely: grid points p < r < q map the output to one block at p and q but to another "
       "at r, and p and q differ along some axis a followed by an axis b > a that the index_map "
       "depends on (a revisit with no such later axis, e.g. a single axis with `i % 4`, is an "
       "output-revisit). Reduce along the last grid axes only.",
       kSumWrong, kSumRight});
  d.push_back({Rule::output_revisit,
               "Grid points p < r < q map an output to the same block at p and q but to another block at r. "
               "Pallas writes the block back when the visit at p ends and never copies it in again, so the "
               "visit at q overwrites HBM with a window that does not hold the earlier result.",
               R"(kernel revisit:
    grid = (2, 2)
    in  x: f32[256, 128]  block=(128, 128)  index=(i, j) -> (j, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i, j) -> (j, 0)
    body:
        when program_id(0) == 0:
            o[0:64, :] = x[0:64, :]
        when program_id(0) == 1:
            o[64:128, :] = x[64:128, :]
)",
               R"(kernel no_revisit:
    grid = (2, 2)
    in  x: f32[256, 128]  block=(128, 128)  index=(i, j) -> (i, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i, j) -> (i, 0)
    body:
        when program_id(1) == 0:
            o[0:64, :] = x[0:64, :]
        when program_id(1) == 1:
            o[64:128, :] = x[64:128, :]
)"});
  d.push_back({Rule::uninitialized_accumulator,
               "The body reads an output or scratch block (a load or `+=`) at a grid point where nothing has "
               "written it yet. Outputs and scratch start as garbage (a `memory_space=acc` scratch is zero "
               "at each CTA start): initialize the accumulator under "
               "`when program_id(a) == 0` on the reduction axis.",
               R"(kernel sum_last_axis_without_init:
    grid = (4, 4, 8)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (k, i, j)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (i, j)
    body:
        o[...] += x[...]
)",
               kSumRight});
  d.push_back({Rule::accumulator_reset,
               "The initializing write of an accumulator also fires on a later visit of the same block, "
               "throwing away the partial result accumulated so far: its `when` tests the wrong grid axis. "
               "For an output: the init fires at grid point q and an earlier point p < q accumulated into "
               "the same block. For a scratch accumulator (one buffer shared by every block): the init (a "
               "plain `=` store that does not read the scratch) fires at q, some p < q accumulated into it "
               "(`+=`, or a store that reads it) after its previous init, and no other statement read it "
               "in between (from after the accumulation at p up to the init at q), as `o[...] = acc[...]` "
               "on the last reduction step does.",
               R"(kernel two_level_sum_init_on_inner_axis_only:
    grid = (4, 2, 4)
    dimension_semantics = (parallel, arbitrary, arbitrary)
    in  x: f32[1024, 2048]  block=(256, 256)  index=(i, k1, k2) -> (i, 4 * k1 + k2)
    out o: f32[1024, 256]   block=(256, 256)  index=(i, k1, k2) -> (i, 0)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += x[...]
    reference:
        o = sum(reshape(x, (1024, 8, 256)), axis=1)
)",
               R"(kernel two_level_sum_init_on_both_axes:
    grid = (4, 2, 4)
    dimension_semantics = (parallel, arbitrary, arbitrary)
    in  x: f32[1024, 2048]  block=(256, 256)  index=(i, k1, k2) -> (i, 4 * k1 + k2)
    out o: f32[1024, 256]   block=(256, 256)  index=(i, k1, k2) -> (i, 0)
    body:
        when program_id(1) == 0 and program_id(2) == 0:
            o[...] = zeros
        o[...] += x[...]
    reference:
        o = sum(reshape(x, (1024, 8, 256)), axis=1)
)"});
  d.push_back(
      {Rule::accumulator_carried,
       "A scratch accumulator (one buffer for the whole grid) is stored into an output block while it "
       "still holds what it accumulated for an earlier block: its init does not fire on the first "
       "step of each block. At grid point q the store's value reads the scratch; some p < q "
       "accumulated into it while the output was on another block, with no init since; and the "
       "block of q was itself accumulated over several steps after p. A scratch stored at every step "
       "into that step's own block (a running total, cumsum's carry) is not reported.",
       R"(kernel matmul_init_once:
    grid = (2, 2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, j, k) -> (i, k)
    in  y: f32[512, 256]  block=(128, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(0) == 0 and program_id(1) == 0 and program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(x[...], y[...])
        when program_id(2) == 3:
            o[...] = acc[...]
    reference:
        o = dot(x, y)
)",
       R"(kernel matmul_init_per_block:
    grid = (2, 2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, j, k) -> (i, k)
    in  y: f32[512, 256]  block=(128, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(x[...], y[...])
        when program_id(2) == 3:
            o[...] = acc[...]
    reference:
        o = dot(x, y)
)"});
  d.push_back(
      {Rule::accumulation_lost,
       "A scratch accumulator is updated after the last statement that reads it for an output block, "
       "and then re-initialized for the next block, or the grid (on Mosaic GPU: the CTA) ends, before "
       "anything reads it: the output was stored before its reduction finished, and the last steps' "
       "work never reaches it. Reported where some earlier step of the same visit of the output "
       "accumulated too; a store before each step's update into that step's own block (an exclusive "
       "scan) leaves its last update dead by design and is not reported.",
       R"(kernel matmul_stored_on_first_step:
    grid = (2, 2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, j, k) -> (i, k)
    in  y: f32[512, 256]  block=(128, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(x[...], y[...])
        when program_id(2) == 0:
            o[...] = acc[...]
    reference:
        o = dot(x, y)
)",
       R"(kernel matmul_stored_on_last_step:
    grid = (2, 2, 4)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, j, k) -> (i, k)
    in  y: f32[512, 256]  block=(128, 128)  index=(i, j, k) -> (k, j)
    out o: f32[256, 256]  block=(128, 128)  index=(i, j, k) -> (i, j)
    scratch acc: f32[128, 128]
    body:
        when program_id(2) == 0:
            acc[...] = zeros
        acc[...] += dot(x[...], y[...])
        when program_id(2) == num_programs(2) - 1:
            o[...] = acc[...]
    reference:
        o = dot(x, y)
)"});
  d.push_back(
      {Rule::input_write_lost,
       "The body writes an input block. Inputs are copied HBM -> VMEM only, so the write stays in the "
       "window and never reaches HBM; with input_output_aliases too, since only the output's window "
       "is written back (and a block the input revisits next step still holds the write). Write "
       "the output instead.",
       R"(kernel scale_in_place_then_add:
    grid = (8, 2)
    in  x: f32[1024, 1]  block=(128, 1)  index=(i, j) -> (i, 0)
    in  y: f32[1024, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    out o: f32[1024, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    body:
        x[...] = x[...] * 2.0         # at j == 1 the window still holds this: x * 4
        o[...] = x[...] + y[...]
    reference:
        o = x * 2.0 + y
)",
       R"(kernel scale_then_add:
    grid = (8, 2)
    in  x: f32[1024, 1]  block=(128, 1)  index=(i, j) -> (i, 0)
    in  y: f32[1024, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    out o: f32[1024, 256]  block=(128, 128)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...] * 2.0 + y[...]
    reference:
        o = x * 2.0 + y
)"});
  d.push_back(
      {Rule::output_write_lost,
       "Mosaic GPU: each step of a CTA's pipeline writes a fresh SMEM slot, and an output whose index "
       "map names a sequential axis is copied out only on the first step of each visit of a block and "
       "at the CTA's last step. A store at any other step (the TPU idiom of storing on the last "
       "reduction step) is never written back. Make the axes the output's index map names parallel: "
       "then it is stored once per CTA, after the loop, from the last step's slot. On TPU a block is "
       "written back once, at the end of its visit: a store of input blocks alone that the next "
       "step of the visit overwrites from another input block never reaches HBM.",
       R"(kernel row_sums_sequential_rows:
    grid = (2, 4)
    dimension_semantics = (sequential, sequential)
    target = h100
    max_concurrent_steps = 2
    delay_release = 1
    in  a: bf16[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    in  b: bf16[512, 128]  block=(128, 128)  index=(i, k) -> (k, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        when program_id(1) == 0:
            acc[...] = zeros
        acc[...] += dot(a[...], b[...])
        when program_id(1) == 3:
            o[...] = acc[...]
)",
       R"(kernel row_sums_parallel_rows:
    grid = (2, 4)
    dimension_semantics = (parallel, sequential)
    target = h100
    max_concurrent_steps = 2
    delay_release = 1
    in  a: bf16[128, 512]  block=(64, 128)  index=(i, k) -> (i, k)
    in  b: bf16[512, 128]  block=(128, 128)  index=(i, k) -> (k, 0)
    out o: f32[128, 128]  block=(64, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[64, 128]  memory_space=acc
    body:
        acc[...] += dot(a[...], b[...])
        when program_id(1) == 3:
            o[...] = acc[...]
)"});
  d.push_back({Rule::index_out_of_bounds,
               "Some grid point maps an operand to a block index below 0 or at least cdiv(extent, block) "
               "along some dim: no element of that block lies in the array. In a pipeline: a ref's "
               "subscript lies outside its buffer (or its slot outside the ring) on some run; refs do "
               "not wrap, so A[i - 1] at i = 0 is out of bounds, not A's last row. Under backend = "
               "triton a block is a view of the array: a load with no mask (a ref outside a where's "
               "branch) or a store whose mask does not keep it that reaches past the array's end (a "
               "ragged last block) reads or writes memory outside it.",
               R"(kernel copy_shifted_index:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i + 1, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)",
               R"(kernel copy:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)"});
  d.push_back(
      {Rule::partial_block_reduction,
       "A reduced dimension (indexed by a grid axis along which the output block stays the same, or "
       "contracted by dot/sum in the body) is not a multiple of its block. The last block is padded "
       "with garbage, and the padding enters the reduction. Mask it (on both sides of a dot: garbage times "
       "zero is NaN), or pick a block that divides it and fits the target's tiling. On Mosaic GPU (h100, "
       "h200) the padding of an input block is zeros (the TMA fills it): a dot or a sum is exact there, but "
       "a "
       "max, a min, an exp or a bias added before the sum still takes the zeros in as values.",
       R"(kernel matmul_ragged_k:
    grid = (8, 8, 8)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  a: f32[1024, 1000]  block=(128, 128)  index=(i, j, kk) -> (i, kk)
    in  b: f32[1000, 1024]  block=(128, 128)  index=(i, j, kk) -> (kk, j)
    out o: f32[1024, 1024]  block=(128, 128)  index=(i, j, kk) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += dot(a[...], b[...])
)",
       R"(kernel matmul_ragged_k_masked:
    grid = (8, 8, 8)
    dimension_semantics = (parallel, parallel, arbitrary)
    in  a: f32[1024, 1000]  block=(128, 128)  index=(i, j, kk) -> (i, kk)
    in  b: f32[1000, 1024]  block=(128, 128)  index=(i, j, kk) -> (kk, j)
    out o: f32[1024, 1024]  block=(128, 128)  index=(i, j, kk) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        k = program_id(2) * 128
        o[...] += dot(where(k + iota((128, 128), 1) < 1000, a[...], 0.0),
                      where(k + iota((128, 128), 0) < 1000, b[...], 0.0))
)"});
  d.push_back(
      {Rule::parallel_write_conflict,
       "Two grid points that differ along a `parallel` axis write the same output block. Parallel "
       "axes may be split across cores (megacore, the CUDA grid), so the writes race. The same "
       "holds for a scratch that carries a value across a parallel axis: each core has its own, and for "
       "body DMAs whose `memory_space=any` regions meet at two such grid points, one writing it (a "
       "prefix sum carried through the output, a scatter with a repeated row). "
       "Mark the reduction axis `arbitrary`. Under `backend = triton` every grid point is a "
       "concurrent program storing into the array itself: two programs storing one element, or "
       "one reading what another stores, race; a reduction belongs in the body's loop.",
       R"(kernel sum_reduction_axis_marked_parallel:
    grid = (4, 4, 8)
    dimension_semantics = (parallel, parallel, parallel)
    in  x: f32[8, 1024, 1024]  block=(None, 256, 256)  index=(i, j, k) -> (k, i, j)
    out o: f32[1024, 1024]     block=(256, 256)        index=(i, j, k) -> (i, j)
    body:
        when program_id(2) == 0:
            o[...] = zeros
        o[...] += x[...]
)",
       kSumRight});
  d.push_back(
      {Rule::output_not_covered,
       "Some elements of an output are never written by any grid point (decided per element box: a "
       "block every step writes only half of is not covered): that part of the result is garbage. "
       "An output aliased to an input keeps the input's data where nothing writes. In a pipeline: an hbm "
       "array that `A[...] = undefined` left undefined and that is not wholly written again by the end.",
       R"(kernel copy_half_covered:
    grid = (4,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)",
       R"(kernel copy_covered:
    grid = (8,)
    in  x: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[1024, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)"});
  d.push_back({Rule::alias_hazard,
               "With input_output_aliases an input and an output share HBM. An input block is read after the "
               "output has written back the same region, so the kernel reads its own new values instead of "
               "the original input.",
               R"(kernel reversed_in_place:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (3 - i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    alias x -> o
    body:
        o[...] = x[...] + 1
)",
               R"(kernel add_one_in_place:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    alias x -> o
    body:
        o[...] = x[...] + 1
)"});
  d.push_back({Rule::sram_capacity,
               "buffer_count x block bytes per pipelined operand, plus scratch, exceed the target's budget "
               "(TPU: the scoped VMEM limit, which vmem_limit_bytes raises up to the physical VMEM; GPU: "
               "shared memory per block: max_concurrent_steps slots per operand, clipped to one CTA's "
               "steps; a `memory_space=acc` scratch is registers). The figure is a lower bound: the "
               "compiler adds intermediates.",
               R"(kernel too_big:
    grid = (2,)
    target = tpu_v5e
    in  x: f32[8192, 1024]  block=(4096, 1024)  index=(i) -> (i, 0)
    out o: f32[8192, 1024]  block=(4096, 1024)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)",
               R"(kernel fits:
    grid = (2,)
    target = tpu_v5e
    vmem_limit_bytes = 100 * 2**20
    in  x: f32[8192, 1024]  block=(4096, 1024)  index=(i) -> (i, 0)
    out o: f32[8192, 1024]  block=(4096, 1024)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)"});
  d.push_back({Rule::block_tiling,
               "The block violates the target's tiling rule: on TPU the last two block dims must be "
               "multiples of (8, 128) or equal the array's; on Mosaic GPU the minor dim must span a multiple "
               "of 16 bytes and no dim may exceed 256 elements (TMA).",
               R"(kernel bad_tile:
    grid = (8,)
    target = tpu_v4
    in  x: f32[800, 1000]  block=(100, 1000)  index=(i) -> (i, 0)
    out o: f32[800, 1000]  block=(100, 1000)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)",
               R"(kernel good_tile:
    grid = (8,)
    target = tpu_v4
    in  x: f32[1024, 1000]  block=(128, 1000)  index=(i) -> (i, 0)
    out o: f32[1024, 1000]  block=(128, 1000)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)"});
  d.push_back({Rule::any_space_access,
               "The body loads or stores an operand declared memory_space=any or hbm (pltpu.ANY). Such an "
               "operand stays in HBM with no VMEM/SMEM window; only DMAs may touch it, and Mosaic rejects "
               "a vector load or store on it. Give it a BlockSpec (block=), or copy it by DMA into a "
               "scratch buffer.",
               R"(kernel scale_unwindowed:
    grid = (4,)
    in  x: f32[512, 128]  memory_space=any
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[0:128, :] * 2
)",
               R"(kernel scale_windowed:
    grid = (4,)
    in  x: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[512, 128]  block=(128, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...] * 2
)"});
  d.push_back({Rule::slot_race,
               "Two accesses to the same slot (or HBM region), at least one a write, are not ordered by "
               "happens-before: a copy into a slot still being read, a read before its wait, compute "
               "writing a slot that is being copied out.",
               R"(pipeline compute_before_wait:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    sram Y[2]: f32[512]
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        nxt = (i + 1) % 2
        if i + 1 < N:
            copy_in_start(A[i + 1], X[nxt])
        Y[cur] = X[cur] + 1
        copy_in_wait(X[cur])
        copy_out_start(Y[cur], A[i])
        copy_out_wait(Y[cur])
)",
               kPipeRight});
  d.push_back({Rule::async_operand_overwritten,
               "A copy overwrites a slot that an asynchronous consumer (wgmma) still reads: the missing "
               "delay_release. With wgmma_wait(1) the previous step's wgmma is still in flight, so refill "
               "the slot of step s-1, not of step s.",
               R"(pipeline wgmma_k_loop_without_delay_release:
    param K >= 1
    hbm  A: bf16[K, 128, 64]
    hbm  B: bf16[K, 64, 128]
    hbm  O: f32[128, 128]
    smem a[3]: bf16[128, 64]
    smem b[3]: bf16[64, 128]
    smem o[1]: f32[128, 128]
    acc  c: f32[128, 128]
    for s in range(min(3, K)):
        copy_in_start(A[s], a[s])
        copy_in_start(B[s], b[s])
    for s in range(K):
        copy_in_wait(a[s % 3])
        copy_in_wait(b[s % 3])
        wgmma(c, a[s % 3], b[s % 3])
        wgmma_wait(1)
        if s + 3 < K:
            copy_in_start(A[s + 3], a[s % 3])
            copy_in_start(B[s + 3], b[s % 3])
    wgmma_wait(0)
    o[0] = c
    copy_out_start(o[0], O)
    copy_out_wait(o[0])
)",
               R"(pipeline wgmma_k_loop_with_delay_release:
    param K >= 1
    hbm  A: bf16[K, 128, 64]
    hbm  B: bf16[K, 64, 128]
    hbm  O: f32[128, 128]
    smem a[3]: bf16[128, 64]
    smem b[3]: bf16[64, 128]
    smem o[1]: f32[128, 128]
    acc  c: f32[128, 128]
    for s in range(min(3, K)):
        copy_in_start(A[s], a[s])
        copy_in_start(B[s], b[s])
    for s in range(K):
        copy_in_wait(a[s % 3])
        copy_in_wait(b[s % 3])
        wgmma(c, a[s % 3], b[s % 3])
        wgmma_wait(1)
        if s >= 1 and s + 2 < K:
            copy_in_start(A[s + 2], a[(s - 1) % 3])
            copy_in_start(B[s + 2], b[(s - 1) % 3])
    wgmma_wait(0)
    o[0] = c
    copy_out_start(o[0], O)
    copy_out_wait(o[0])
)"});
  d.push_back({Rule::wait_without_copy,
               "A wait with no matching outstanding copy: on hardware the semaphore never reaches its "
               "value and the kernel hangs.",
               R"(pipeline extra_wait:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    for i in range(N):
        copy_in_start(A[i], X[i % 2])
        copy_in_wait(X[i % 2])
        copy_in_wait(X[i % 2])
)",
               R"(pipeline one_wait_per_copy:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    for i in range(N):
        copy_in_start(A[i], X[i % 2])
        copy_in_wait(X[i % 2])
)"});
  d.push_back({Rule::copy_never_waited,
               "A copy is still outstanding when the kernel ends: its data may never land (the last "
               "write-back of the pipeline is the usual victim).",
               R"(pipeline forgets_last_writeback:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    sram Y[2]: f32[512]
    copy_in_start(A[0], X[0])
    for i in range(N):
        cur = i % 2
        nxt = (i + 1) % 2
        if i + 1 < N:
            copy_in_start(A[i + 1], X[nxt])
        copy_in_wait(X[cur])
        Y[cur] = X[cur] + 1
        copy_out_start(Y[cur], A[i])
        if i > 0:
            copy_out_wait(Y[nxt])
)",
               kPipeRight});
  d.push_back(
      {Rule::stale_read,
       "The body reads a slot that holds a different block than the one it indexes, e.g. a ring "
       "slot refilled for a later step, an output window revisited without being copied in, or (below) "
       "an accumulator slot zeroed once that still holds the previous row's finished sum.",
       R"(pipeline row_sums_accumulator_zeroed_once:
    hbm  A: f32[3, 4, 512]
    hbm  O: f32[3, 512]
    sram X[2]: f32[512]
    sram Y[1]: f32[512]
    Y[0] = zeros
    copy_in_start(A[0, 0], X[0])
    for t in range(12):
        j = t // 4
        k = t % 4
        if t + 1 < 12:
            copy_in_start(A[(t + 1) // 4, (t + 1) % 4], X[(t + 1) % 2])
        copy_in_wait(X[t % 2])
        Y[0] = Y[0] + X[t % 2]
        if k == 3:
            copy_out_start(Y[0], O[j])
            copy_out_wait(Y[0])
)",
       R"(pipeline row_sums_accumulator_started_per_row:
    hbm  A: f32[3, 4, 512]
    hbm  O: f32[3, 512]
    sram X[2]: f32[512]
    sram Y[1]: f32[512]
    copy_in_start(A[0, 0], X[0])
    for t in range(12):
        j = t // 4
        k = t % 4
        if t + 1 < 12:
            copy_in_start(A[(t + 1) // 4, (t + 1) % 4], X[(t + 1) % 2])
        copy_in_wait(X[t % 2])
        if k == 0:
            Y[0] = X[t % 2]
        else:
            Y[0] = Y[0] + X[t % 2]
        if k == 3:
            copy_out_start(Y[0], O[j])
            copy_out_wait(Y[0])
)"});
  d.push_back({Rule::uninitialized_read,
               "The program reads a slot or buffer that no copy and no compute has written: it holds "
               "garbage (poison in pipecheck's executor).",
               R"(pipeline read_before_any_copy:
    param N >= 1
    hbm  A: f32[N, 512]
    sram X[2]: f32[512]
    sram Y[2]: f32[512]
    for i in range(N):
        Y[i % 2] = X[i % 2] + 1
        copy_out_start(Y[i % 2], A[i])
        copy_out_wait(Y[i % 2])
)",
               kPipeRight});
  return d;
}

} // namespace

const std::vector<RuleDoc> &rule_docs() {
  static const std::vector<RuleDoc> d = make_docs();
  return d;
}

const RuleDoc &rule_doc(Rule r) {
  for (const auto &d : rule_docs())
    if (d.rule == r) return d;
  assert(false && "every rule has a RuleDoc (explain_test)");
  return rule_docs().front();
}

std::optional<std::string> explain(const std::string &rule) {
  auto r = find_rule(rule);
  if (!r) return std::nullopt;
  const RuleDoc &d = rule_doc(*r);
  const RuleInfo &i = info(*r);
  return std::string(i.id) + ": " + std::string(i.summary) + "\n\n" + d.meaning + "\n\nWrong:\n\n" + d.wrong +
         "\nRight:\n\n" + d.right + "\nSee " + std::string(i.anchor) + ".\n";
}

} // namespace pipecheck::verifier::rules
