"""The kernels jax itself ships (jax.experimental.pallas.ops), exported from the installed jax
and checked: what pipecheck says of the real thing, not of a transcription."""
import importlib
import importlib.util
import inspect
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas.ops.gpu import decode_attention as gpu_decode
from jax.experimental.pallas.ops.gpu import paged_attention as gpu_paged
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as pak
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sak
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sam

import pipecheck_jax as pj
import upstream as U
from upstream import SEQ, f32s, gmm, ragged, ragged_args, ragged_reference, splash, splash_args

B, H, D, S, P, C = 2, 8, 128, 16, 8, 2  # batch, heads, head_dim, page_size, pages, per block


def paged(q, k, v, lengths, pages):
    return pak.paged_attention(q, k, v, lengths, pages, pages_per_compute_block=C)


def args():
    return (jnp.zeros((B, H, D), jnp.float32), jnp.zeros((1, B * P, S, D), jnp.float32),
            jnp.zeros((1, B * P, S, D), jnp.float32), jnp.array([S * P, 3], jnp.int32),
            jnp.arange(B * P, dtype=jnp.int32).reshape(B, P))


# The export knows the tables of the one call traced (args(), through paged_attention's jit);
# the description, which wins over them, checks more: every sequence length below 4 tokens
# (empty ones too, which the kernel's search for the next sequence with pages skips), every
# page table into the pool, and the bookkeeping's start values (the jnp.zeros((1,)) and
# jnp.ones((1,)) the function builds).
PREFETCH = {"lengths_ref": "in [0, 4)", "page_indices_ref": f"in [0, {B * P})",
            "buffer_index_ref": "in [0, 1)", "init_flag_ref": "in [1, 2)"}


def test_upstream_paged_attention_exports_its_buffer_index_and_init_flag_as_smem_state():
    text = pj.export(paged, *args(), prefetch=PREFETCH)
    # init_flag is read, then cleared; the read is bound where it is, before the store.
    read = text.index("= init_flag_ref[0]")
    assert read < text.index("init_flag_ref[0] = 0") < text.index("buffer_index_ref[0] = where("), text
    assert "memory_space=any" in text and "async_copy(k_pages_hbm_ref[" in text, text


def test_upstream_paged_attention_is_verified_for_every_length_and_page_table_allowed():
    r = pj.check(paged, *args(), prefetch=PREFETCH)
    assert r.verdicts == {"paged_flash_attention_kernel_inline_seq_dim": "verified"}, r.report()


def mutant_of(module, old: str, new: str, tmp_path, name: str):
    """The installed `module` with `old` (once in its source) replaced by `new`, loaded from a
    file of tmp_path, so that findings point into the mutant's source."""
    src = inspect.getsource(module)
    assert src.count(old) == 1, old
    path = tmp_path / f"{name}.py"
    path.write_text(src.replace(old, new))
    spec = importlib.util.spec_from_file_location(name, path)
    mutant = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mutant  # dataclasses look their module up
    try:
        spec.loader.exec_module(mutant)
    finally:
        del sys.modules[spec.name]
    return mutant


def test_upstream_paged_attention_that_never_flips_its_buffer_index_is_a_violation(tmp_path):
    # The installed kernel's source with one statement removed, as an author might forget it.
    mutant = mutant_of(pak, "buffer_index_ref[0] = next_buffer_index",
                       "pass  # mutant: the buffer index is never flipped", tmp_path,
                       "paged_attention_mutant")

    def paged_mutant(q, k, v, lengths, pages):
        return mutant.paged_attention(q, k, v, lengths, pages, pages_per_compute_block=C)

    # buffer_index is no longer stored, so it is an ordinary prefetch array read in the body;
    # one page table keeps the race check to one program per allowed contents.
    prefetch = dict(PREFETCH, page_indices_ref="in [0, 1)")
    r = pj.check(paged_mutant, *args(), prefetch=prefetch)
    assert r.verdicts == {"paged_flash_attention_kernel_inline_seq_dim": "violation"}, r.report()
    assert "copy-never-waited" in {f.rule for f in r.findings}, r.report()


# Splash attention, as the installed jax ships it ----------------------------------------------


def splash_mutant(old: str, new: str, tmp_path):
    """The installed splash_attention_kernel module with `old` (once in it) replaced."""
    return mutant_of(sak, old, new, tmp_path, "splash_attention_mutant")


def test_upstream_splash_attention_exports_its_mask_info_and_its_scratch_outputs():
    text = pj.export(splash(), *splash_args())
    # The causal mask's block schedule, from the mask info made with the kernel.
    assert "prefetch data_next_ref: i8[1, 4, 4] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0, 1, 2, 3]" \
        in text, text
    # m, l and o are outputs the caller drops, with the index map lambda *_: (0, 0): the
    # scratch they are used as.
    for nm in ("m_scratch_ref", "l_scratch_ref", "o_scratch_ref"):
        assert f"scratch {nm}: f32[128, 128]" in text and f"out {nm}" not in text, text
    assert "out o_ref: f32[2, 512, 128]" in text, text


@pytest.mark.parametrize("variant", [
    dict(), dict(mask=lambda: sam.LocalMask((SEQ, SEQ), window_size=(100, 50), offset=0)),
    dict(mqa=True, residuals=True), dict(grad=True),
    dict(grad=True, mask=lambda: sam.LocalMask((SEQ, SEQ), window_size=(100, 50), offset=0)),
    dict(mask=lambda: sam.ChunkedCausalMask((SEQ, SEQ), chunk_size=192))],
    ids=["causal", "local", "mqa_residuals", "grad_causal", "grad_local", "chunked"])
def test_upstream_splash_attention_is_verified_forward_and_backward(variant):
    r = pj.check(splash(**variant), *splash_args(variant.get("mqa", False)))
    assert r.verified and r.verdicts and set(r.verdicts.values()) == {"verified"}, r.report()
    assert len(r.verdicts) == (3 if variant.get("grad") else 1), r.verdicts


def test_upstream_splash_attention_runs_like_interpret_forward_and_backward():
    # The chunked mask computes q // chunk == kv // chunk in the kernel: lax.div on integers.
    chunked = dict(mask=lambda: sam.ChunkedCausalMask((SEQ, SEQ), chunk_size=192))
    for variant in (dict(), dict(grad=True), chunked):
        res = pj.run(splash(**variant), *splash_args(seed=0), rtol=1e-4, atol=1e-4)
        assert res.ok, res


def test_upstream_splash_attention_whose_init_moves_off_the_first_kv_step_is_a_violation(tmp_path):
    init = "  @pl.when(j == 0)\n  def init():\n    o_scratch_ref[...] = jnp.zeros_like(o_scratch_ref)"
    mutant = splash_mutant(init, init.replace("j == 0", "j == 1"), tmp_path)
    r = pj.check(splash(mutant), *splash_args())
    assert r.verdicts == {"splash_mha_fwd_no_residuals": "violation"}, r.report()
    reads = [f for f in r.findings if f.rule == "uninitialized-accumulator"]
    assert {f.message.split("'")[1] for f in reads} == {"m_scratch_ref", "l_scratch_ref",
                                                       "o_scratch_ref"}, r.report()


FWD_SEMANTICS = 'dimension_semantics=("parallel", "arbitrary", "arbitrary"),'


def test_upstream_splash_attention_with_its_kv_axis_parallel_is_a_violation(tmp_path):
    mutant = splash_mutant(FWD_SEMANTICS, FWD_SEMANTICS.replace('"arbitrary"),', '"parallel"),'),
                           tmp_path)
    r = pj.check(splash(mutant), *splash_args())
    assert r.verdicts == {"splash_mha_fwd_no_residuals": "violation"}, r.report()
    assert {f.rule for f in r.findings} == {"parallel-write-conflict"}, r.report()


def test_upstream_splash_attention_with_its_q_axis_parallel_is_still_verified(tmp_path):
    # Every q block initializes m, l and o at its first kv step: splitting the q axis over
    # cores is correct (the correct twin of the mutant above).
    mutant = splash_mutant(FWD_SEMANTICS, FWD_SEMANTICS.replace(
        '"parallel", "arbitrary", "arbitrary"', '"parallel", "parallel", "arbitrary"'), tmp_path)
    r = pj.check(splash(mutant), *splash_args())
    assert r.verdicts == {"splash_mha_fwd_no_residuals": "verified"}, r.report()


# The other kernels jax ships ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(U.VERIFIED))
def test_upstream_kernel_is_verified_and_runs_like_interpret(name):
    fn, args, kernels = U.VERIFIED[name]
    r = pj.check(fn, *args)
    assert r.verdicts == {k: "verified" for k in kernels}, r.report()
    assert not r.opaque, r.report()  # flash attention's jnp.tile is .pk's tile
    res = pj.run(fn, *U.data(args), rtol=1e-4, atol=1e-4)
    assert res.ok, res


UPSTREAM_UNSUPPORTED = {
    # name: (fn, args, the construct the diagnostic names, the upstream file it points into)
    "gpu_paged_attention": (
        lambda q, k, v, tables, lengths: gpu_paged.paged_attention(
            q, k, v, tables, lengths, block_h=16, pages_per_compute_block=2, k_splits=2),
        f32s((2, 16, 64), (4, 32, 16, 64), (4, 32, 16, 64)) + [
            jnp.arange(16, dtype=jnp.int32).reshape(2, 8), jnp.full((2,), 64, jnp.int32)],
        "an array (gather) index into 'k_pages_ref' that is not a window", "paged_attention.py"),
    "gpu_decode_attention_of_unknown_lengths": (
        lambda q, k, v, start, lengths: gpu_decode.mqa(q, k, v, start, lengths, k_splits=4),
        f32s((2, 4, 64), (2, 256, 64), (2, 256, 64)) + [jax.ShapeDtypeStruct((2,), jnp.int32)] * 2,
        "a condition computed from array data", "decode_attention.py"),
    "tpu_megablox_gmm_of_unknown_group_sizes": (
        gmm,
        f32s((512, 256), (4, 256, 128)) + [jax.ShapeDtypeStruct((4,), jnp.int32)],
        "a grid with bounds known only at run time", "gmm.py"),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM_UNSUPPORTED))
def test_upstream_kernel_beyond_the_export_is_unsupported_at_its_python_line(name):
    # Never a pass: exit 2, and a diagnostic that names the construct and where it is.
    fn, args, construct, file = UPSTREAM_UNSUPPORTED[name]
    r = pj.check(fn, *args)
    assert r.exit_code == 2 and set(r.verdicts.values()) == {"unsupported"}, r.report()
    (u,) = r.unsupported
    assert construct in str(u) and u.location and f"/{file}:" in u.location, str(u)


# Megablox grouped matmul: its grid (tiles_n, num_active_tiles, tiles_k) and its tile tables
# are computed from the group sizes (a histogram, a searchsorted, repeats), which the export
# computes as the program would when the group sizes are given.

@pytest.mark.parametrize("sizes", [[100, 0, 300, 112], [512, 0, 0, 0], [1, 1, 1, 509]],
                         ids=["shared_tiles", "one_group", "tiny_groups"])
def test_upstream_megablox_gmm_is_verified_and_runs_like_interpret_for_given_group_sizes(sizes):
    lhs, rhs, sizes = U.gmm_args(sizes)
    text = pj.export(gmm, lhs, rhs, sizes)
    active = {(100, 0, 300, 112): 6, (512, 0, 0, 0): 4, (1, 1, 1, 509): 7}[tuple(sizes.tolist())]
    assert f"grid = (1, {active}, 2)" in text, text  # num_active_tiles, from the group sizes
    r = pj.check(gmm, lhs, rhs, sizes)
    assert r.verdicts == {"kernel_": "verified"}, r.report()
    ends = np.cumsum(np.asarray(sizes))
    starts = ends - np.asarray(sizes)
    want = np.concatenate([np.asarray(lhs[s:e] @ rhs[g]) for g, (s, e) in enumerate(zip(starts, ends))])
    res = pj.run(gmm, lhs, rhs, sizes, reference=lambda *_: want, rtol=1e-4, atol=1e-4)
    assert res.ok, res


def test_upstream_megablox_gmm_whose_accumulator_init_moves_is_a_violation(tmp_path):
    init = "    @pl.when(k_i == 0)\n    def _zero_acc():"  # gmm's (tgmm's guard differs)
    mutant = mutant_of(U.megablox_kernels, init, init.replace("k_i == 0", "k_i == 1"), tmp_path,
                       "gmm_mutant")
    lhs, rhs = f32s((512, 256), (4, 256, 128))
    r = pj.check(lambda a, b, c: mutant.gmm(a, b, c, tiling=(128, 128, 128)), lhs, rhs,
                 jnp.array([100, 0, 300, 112], jnp.int32))
    assert r.verdicts == {"kernel_": "violation"}, r.report()
    assert "uninitialized-accumulator" in {f.rule for f in r.findings}, r.report()


@pytest.mark.parametrize("sizes", [[100, 0, 300, 112], [512, 0, 0, 0], [0, 0, 0, 512], [1, 1, 1, 509]],
                         ids=["shared_tiles", "first_group", "last_group", "tiny_groups"])
def test_upstream_megablox_tgmm_is_verified_and_runs_like_interpret_for_given_group_sizes(sizes):
    args = U.tgmm_args(sizes)
    r = pj.check(U.tgmm, *args)
    assert r.verdicts == {"kernel_": "verified"}, r.report()
    if sizes == [100, 0, 300, 112]:
        res = pj.run(U.tgmm, *args, reference=lambda *a: U.tgmm_reference(*a), rtol=1e-4, atol=1e-4)
        assert res.ok, res


def tgmm_mutant(tmp_path, old, new):
    mutant = mutant_of(U.megablox_kernels, old, new, tmp_path, "tgmm_mutant")
    return lambda a, b, c: mutant.tgmm(a, b, c, tiling=(128, 128, 128))


def test_upstream_megablox_tgmm_that_resets_only_at_the_first_tile_carries_groups_into_each_other(
        tmp_path):
    # Its scratch is zeroed at grid_id 0 only, not when the group changes: group 2's block
    # holds group 0's sum as well.
    fn = tgmm_mutant(tmp_path, "group_has_changed = jnp.logical_or(grid_id == 0, prev_group != group)",
                     "group_has_changed = grid_id == 0")
    r = pj.check(fn, *U.tgmm_args([100, 0, 300, 112]))
    assert r.verdicts == {"kernel_": "violation"}, r.report()
    assert {f.rule for f in r.findings} == {"accumulator-carried"}, r.report()
    (f,) = r.findings
    assert f.python and f.python[0].endswith("tgmm_mutant.py"), f  # the store, in the source
    assert "out[...] = " in open(f.python[0]).read().splitlines()[f.python[1] - 1], f


def test_upstream_megablox_tgmm_that_stores_only_at_the_end_leaves_groups_unwritten(tmp_path):
    fn = tgmm_mutant(tmp_path,
                     "group_is_changing = jnp.logical_or(is_end_of_grid, group != next_group)",
                     "group_is_changing = is_end_of_grid")
    r = pj.check(fn, *U.tgmm_args([100, 0, 300, 112]))
    assert {"output-not-covered", "accumulation-lost"} <= {f.rule for f in r.findings}, r.report()


# Decode attention (upstream.decode): its lengths, given, are prefetch tables.

@pytest.mark.parametrize("start, lengths", [([0, 30], [100, 256]), ([0, 0], [0, 1]),
                                            ([200, 0], [100, 64])],
                         ids=["ragged", "empty", "start_past_length"])
def test_upstream_decode_attention_is_verified_and_runs_like_interpret(start, lengths):
    args = U.decode_args(start, lengths)
    r = pj.check(U.decode, *args)
    assert r.verdicts == {"mha_forward": "verified"}, r.report()
    res = pj.run(U.decode, *args, rtol=1e-4, atol=1e-4)
    assert res.ok, res


def test_upstream_decode_attention_of_described_lengths_is_not_verified_past_what_it_can_check():
    # Every length in [0, 257) for each of 2 sequences: the race check would need each of
    # them; the verdict says so rather than passing.
    s = jax.ShapeDtypeStruct((2,), jnp.int32)
    r = pj.check(U.decode, *f32s((2, 4, 64), (2, 256, 64), (2, 256, 64)), s, s,
                 prefetch={"start_idx_ref": "in [0, 257)", "kv_seq_len_ref": "in [0, 257)"})
    assert r.verdicts == {"mha_forward": "unknown"}, r.report()


# Ragged paged attention (upstream.ragged): its pages reach the kernel through hand-written
# double-buffered copies (one per page) into kv_bufs, read back as `kv_bufs.at[b].reshape(
# pages * page_size * heads, head_dim)` sliced with a stride (its K and V rows, interleaved
# per head): a reshaped view the export turns back into kv_bufs' own dims. Its state
# (seq_buf_idx: where the next grid step starts, which buffer holds its pages) is followed
# across the grid; its accumulators start with `where(kv_blk_idx == 0, init, ref[...])`.

RAGGED = {
    # name: (q_lens, kv_lens, tokens, extra args of ragged_args)
    "prefill": ([8, 8], [20, 40], 16, {}),
    "mixed_across_query_blocks": ([5, 16, 11], [40, 64, 12], 32, {}),  # kv_len >= q_len
    "decode": ([1, 1, 1, 1, 1, 1, 1, 1], [33, 17, 64, 1, 5, 16, 63, 2], 8,
               dict(max_seqs=8, pages=64)),
    # 16 heads in q blocks of 8: a (8, 4, 128) block of 8 heads (heads=8, kv_heads=8, which
    # upstream's get_min_heads_per_blk allows) is a block-tiling violation, rejected by
    # Pallas' own check of TPU blocks (the second-minor dim 4, of 8)
    "two_head_blocks": ([3, 13], [3, 50], 16, dict(heads=16, kv_heads=8)),
}


@pytest.mark.parametrize("name", sorted(RAGGED))
def test_upstream_ragged_paged_attention_is_verified_and_runs_like_its_reference(name):
    q_lens, kv_lens, tokens, extra = RAGGED[name]
    args = ragged_args(q_lens, kv_lens, tokens, **extra)
    text = pj.export(ragged, *args)
    assert "reshape(kv_bufs[" in text, text  # the strided rows of the reshaped buffer
    r = pj.check(ragged, *args)
    assert r.verdicts == {"ragged_paged_attention_kernel": "verified"}, r.report()
    res = pj.run(ragged, *args, reference=ragged_reference, rtol=1e-4, atol=1e-4)
    # The kernel keeps state in a scalar-prefetch ref (SMEM across grid steps on a TPU), which
    # interpret=True does not keep (and jax 0.10's interpret mode would crash on its masked
    # pltpu.store of a ref view anyway): compared with the reference only.
    assert res.ok and "scalar-prefetch ref" in (res.interpret_error or ""), res


def test_upstream_ragged_paged_attention_with_a_block_of_half_of_8_heads_is_a_tiling_violation():
    r = pj.check(ragged, *ragged_args([3, 13], [3, 50], 16, heads=8, kv_heads=8))
    assert {f.rule for f in r.findings} == {"block-tiling"}, r.report()
    assert "block dim 1 is 4, neither a multiple of 8 nor the array's extent 8" in r.report()


def test_upstream_ragged_paged_attention_writes_out_its_padding_tokens_undefined():
    # 3 tokens in a query block of 8, on the first grid step: rows 3..7 of the accumulator
    # are never stored, and the output block is written back with them.
    r = pj.check(ragged, *ragged_args([1, 1, 1], [33, 17, 64], 8))
    assert r.verdicts == {"ragged_paged_attention_kernel": "violation"}, r.report()
    assert {f.rule for f in r.findings} == {"uninitialized-read"}, r.report()
    assert "o_ref" in r.report(), r.report()


# Every page table into the pool: the table is read only as the page of each copy's source,
# so one race check holds for all of them and the spec rules bound every page for every
# table; a range one page past the pool is out of bounds with a witness table.
@pytest.mark.parametrize("pages, verdict", [(64, "verified"), (65, "violation")])
def test_upstream_ragged_paged_attention_is_decided_for_every_page_table_in_a_range(pages, verdict):
    args = ragged_args([1] * 8, [33, 17, 64, 1, 5, 16, 63, 2], 8, max_seqs=8, pages=64)
    r = pj.check(ragged, *args, prefetch={"page_indices_ref": f"in [0, {pages})"})
    assert r.verdicts == {"ragged_paged_attention_kernel": verdict}, r.report()
    if verdict == "violation":
        assert {f.rule for f in r.findings} == {"index-out-of-bounds"}, r.report()
        assert "index 64 is out of bounds for dim 0 (extent 64)" in r.report(), r.report()
        assert "page_indices_ref = [" in r.report(), r.report()


RAGGED_MUTANTS = {
    # name: (upstream text, its replacement, the rules reported)
    "prefetch_into_the_buffer_in_use": (
        "next_buf_idx = lax.select(cur_buf_idx == 0, 1, 0)", "next_buf_idx = cur_buf_idx",
        {"slot-race"}),
    "buffer_index_not_stored": (
        "  seq_buf_idx_ref[1] = buf_idx\n", "\n",
        {"slot-race", "copy-never-waited", "wait-without-copy"}),
    "init_on_the_second_kv_block": (
        "kv_blk_idx == 0, jnp.full_like(ref, init_val)", "kv_blk_idx == 1, jnp.full_like(ref, init_val)",
        {"uninitialized-accumulator", "uninitialized-read"}),
    "sequence_not_reset_for_the_next_head_block": (
        "seq_buf_idx_ref[0] = lax.select(seq_idx < num_seqs, seq_idx, 0)",
        "seq_buf_idx_ref[0] = seq_idx", {"copy-never-waited"}),
}


@pytest.mark.parametrize("name", sorted(RAGGED_MUTANTS))
def test_upstream_ragged_paged_attention_mutant_is_a_violation(name, tmp_path):
    old, new, rules = RAGGED_MUTANTS[name]
    mutant = mutant_of(U.ragged_paged, old, new, tmp_path, "ragged_mutant")
    args = ragged_args([3, 13], [3, 50], 16, heads=16, kv_heads=8)  # two head blocks
    r = pj.check(lambda *a: ragged(*a, module=mutant), *args)
    assert r.verdicts == {"ragged_paged_attention_kernel": "violation"}, r.report()
    assert {f.rule for f in r.findings} == rules, r.report()
    assert all(f.python and f.python[0].endswith("ragged_mutant.py") for f in r.findings), r.report()
