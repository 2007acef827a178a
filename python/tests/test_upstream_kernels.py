"""The kernels jax itself ships (jax.experimental.pallas.ops), exported from the installed jax
and checked: what pipecheck says of the real thing, not of a transcription."""
import importlib.util
import inspect
import sys

import jax
import jax.numpy as jnp
import pytest
from jax.experimental.pallas.ops.gpu import attention as gpu_attention
from jax.experimental.pallas.ops.gpu import decode_attention as gpu_decode
from jax.experimental.pallas.ops.gpu import layer_norm as gpu_layer_norm
from jax.experimental.pallas.ops.gpu import softmax as gpu_softmax
from jax.experimental.pallas.ops.tpu import flash_attention as tpu_flash
from jax.experimental.pallas.ops.tpu import matmul as tpu_matmul
from jax.experimental.pallas.ops.tpu.megablox import ops as megablox
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as pak
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as ragged_paged
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sak
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sam

import pipecheck_jax as pj

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


def test_upstream_paged_attention_that_never_flips_its_buffer_index_is_a_violation(tmp_path):
    # The installed kernel's source with one statement removed, as an author might forget it.
    src = inspect.getsource(pak)
    store = "buffer_index_ref[0] = next_buffer_index"
    assert src.count(store) == 1
    path = tmp_path / "paged_attention_mutant.py"
    path.write_text(src.replace(store, "pass  # mutant: the buffer index is never flipped"))
    spec = importlib.util.spec_from_file_location("paged_attention_mutant", path)
    mutant = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutant)

    def paged_mutant(q, k, v, lengths, pages):
        return mutant.paged_attention(q, k, v, lengths, pages, pages_per_compute_block=C)

    # buffer_index is no longer stored, so it is an ordinary prefetch array read in the body;
    # one page table keeps the race check to one program per allowed contents.
    prefetch = dict(PREFETCH, page_indices_ref="in [0, 1)")
    r = pj.check(paged_mutant, *args(), prefetch=prefetch)
    assert r.verdicts == {"paged_flash_attention_kernel_inline_seq_dim": "violation"}, r.report()
    assert "copy-never-waited" in {f.rule for f in r.findings}, r.report()


# Splash attention, as the installed jax ships it ----------------------------------------------


SPLASH_BLOCKS = dict(block_q=128, block_kv=128, block_kv_compute=128, block_q_dkv=128,
                     block_kv_dkv=128, block_kv_dkv_compute=128, block_q_dq=128, block_kv_dq=128)
SEQ, HEADS, HEAD_DIM = 512, 2, 128


def splash(module=sak, mask=lambda: sam.CausalMask((SEQ, SEQ)), mqa=False, residuals=False,
           grad=False):
    """fn(q, k, v) of a splash kernel made by `module` (the installed one or a mutant); the
    mask info (data_next, block_mask, ...) is computed from the mask when it is made and
    reaches the pallas_calls as constants through jit, so the export knows its contents."""
    heads = sam.MultiHeadMask([mask() for _ in range(HEADS)])
    make = module.make_splash_mqa_single_device if mqa else module.make_splash_mha_single_device
    kernel = make(heads, block_sizes=module.BlockSizes(**SPLASH_BLOCKS), save_residuals=residuals)
    if grad:
        return lambda q, k, v: jax.grad(lambda q, k, v: kernel(q, k, v).sum(),
                                        argnums=(0, 1, 2))(q, k, v)
    if residuals:
        return lambda q, k, v: kernel(q, k, v)[0]
    return kernel


def splash_args(mqa=False, seed=None):
    q, kv = (HEADS, SEQ, HEAD_DIM), ((SEQ, HEAD_DIM) if mqa else (HEADS, SEQ, HEAD_DIM))
    if seed is None:
        return jnp.zeros(q, jnp.float32), jnp.zeros(kv, jnp.float32), jnp.zeros(kv, jnp.float32)
    key = jax.random.PRNGKey(seed)
    return tuple(jax.random.normal(jax.random.fold_in(key, n), s, jnp.float32)
                 for n, s in enumerate((q, kv, kv)))


def splash_mutant(old: str, new: str, tmp_path):
    """The installed splash_attention_kernel module with `old` (once in it) replaced."""
    src = inspect.getsource(sak)
    assert src.count(old) == 1, old
    path = tmp_path / "splash_attention_mutant.py"
    path.write_text(src.replace(old, new))
    spec = importlib.util.spec_from_file_location("splash_attention_mutant", path)
    mutant = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mutant  # its dataclasses look their module up
    try:
        spec.loader.exec_module(mutant)
    finally:
        del sys.modules[spec.name]
    return mutant


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
    dict(grad=True, mask=lambda: sam.LocalMask((SEQ, SEQ), window_size=(100, 50), offset=0))],
    ids=["causal", "local", "mqa_residuals", "grad_causal", "grad_local"])
def test_upstream_splash_attention_is_verified_forward_and_backward(variant):
    r = pj.check(splash(**variant), *splash_args(variant.get("mqa", False)))
    assert r.verified and r.verdicts and set(r.verdicts.values()) == {"verified"}, r.report()
    assert len(r.verdicts) == (3 if variant.get("grad") else 1), r.verdicts


def test_upstream_splash_attention_runs_like_interpret_forward_and_backward():
    for variant in (dict(), dict(grad=True)):
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


FLASH_BLOCKS = tpu_flash.BlockSizes(
    block_q=128, block_k_major=128, block_k=128, block_b=1, block_q_major_dkv=128,
    block_k_major_dkv=128, block_k_dkv=128, block_q_dkv=128, block_k_major_dq=128,
    block_k_dq=128, block_q_dq=128)
MHA_BLOCKS = gpu_attention.BlockSizes(block_q=64, block_k=64, block_q_dkv=64, block_kv_dkv=64,
                                      block_q_dq=64, block_kv_dq=64)


def grad_of(f):
    return lambda *a: jax.grad(lambda *a: f(*a).sum(), argnums=tuple(range(len(a))))(*a)


def f32s(*shapes):
    return [jnp.zeros(s, jnp.float32) for s in shapes]


UPSTREAM_VERIFIED = {
    # name: (fn, args, the kernels it makes)
    "tpu_matmul": (lambda x, y: tpu_matmul.matmul(x, y, block_shape=(128, 128)),
                   f32s((256, 512), (512, 256)), {"matmul_kernel"}),
    "tpu_flash_attention": (
        grad_of(lambda q, k, v: tpu_flash.flash_attention(q, k, v, causal=True,
                                                          block_sizes=FLASH_BLOCKS)),
        f32s(*[(1, 2, 256, 128)] * 3),
        {"_flash_attention_kernel", "_flash_attention_dkv_kernel", "_flash_attention_dq_kernel"}),
    "gpu_attention": (
        grad_of(lambda q, k, v: gpu_attention.mha(q, k, v, segment_ids=None, causal=True,
                                                  block_sizes=MHA_BLOCKS)),
        f32s(*[(1, 256, 2, 64)] * 3), {"mha_forward", "mha_preprocess_backward", "mha_backward"}),
    "gpu_softmax": (gpu_softmax.softmax, f32s((8, 256)), {"_vmappable_softmax_kernel"}),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM_VERIFIED))
def test_upstream_kernel_is_verified_and_runs_like_interpret(name):
    fn, args, kernels = UPSTREAM_VERIFIED[name]
    r = pj.check(fn, *args)
    assert r.verdicts == {k: "verified" for k in kernels}, r.report()
    assert not r.opaque, r.report()  # flash attention's jnp.tile is .pk's tile
    key = jax.random.PRNGKey(1)
    data = [jax.random.normal(jax.random.fold_in(key, n), a.shape, a.dtype)
            for n, a in enumerate(args)]
    res = pj.run(fn, *data, rtol=1e-4, atol=1e-4)
    assert res.ok, res


UPSTREAM_UNSUPPORTED = {
    # name: (fn, args, the construct the diagnostic names, the upstream file it points into)
    "gpu_layer_norm": (gpu_layer_norm.layer_norm, f32s((2, 4, 300), (300,), (300,)),
                       "an array (gather) index into 'x_ref'", "layer_norm.py"),
    "gpu_decode_attention": (
        lambda q, k, v, start, lengths: gpu_decode.mqa(q, k, v, start, lengths, k_splits=4),
        f32s((2, 4, 64), (2, 256, 64), (2, 256, 64)) + [jnp.zeros((2,), jnp.int32),
                                                         jnp.full((2,), 256, jnp.int32)],
        "a condition computed from array data", "decode_attention.py"),
    "tpu_megablox_gmm": (
        lambda lhs, rhs, sizes: megablox.gmm(lhs, rhs, sizes, tiling=(128, 128, 128)),
        f32s((512, 256), (4, 256, 128)) + [jnp.array([128, 0, 256, 128], jnp.int32)],
        "a grid with bounds known only at run time", "gmm.py"),
    "tpu_ragged_paged_attention": (
        lambda q, kv, lens, pages, cu, n: ragged_paged.ragged_paged_attention(
            q, kv, lens, pages, cu, n, num_kv_pages_per_block=2, num_queries_per_block=8,
            vmem_limit_bytes=32 * 1024 * 1024),
        f32s((16, 4, 128), (32, 16, 4, 128)) + [
            jnp.array([20, 40, 0, 0], jnp.int32), jnp.arange(16, dtype=jnp.int32).reshape(4, 4),
            jnp.array([0, 8, 16, 16, 16], jnp.int32), jnp.array([2], jnp.int32)],
        "a ref transform (ReshapeTransform) on 'kv_bufs'", "kernel.py"),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM_UNSUPPORTED))
def test_upstream_kernel_beyond_the_export_is_unsupported_at_its_python_line(name):
    # Never a pass: exit 2, and a diagnostic that names the construct and where it is.
    fn, args, construct, file = UPSTREAM_UNSUPPORTED[name]
    r = pj.check(fn, *args)
    assert r.exit_code == 2 and set(r.verdicts.values()) == {"unsupported"}, r.report()
    (u,) = r.unsupported
    assert construct in str(u) and u.location and f"/{file}:" in u.location, str(u)
