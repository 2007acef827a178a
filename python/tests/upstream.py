"""The kernels the installed jax ships (jax.experimental.pallas.ops), called as their users
call them: shared by test_upstream_kernels.py and bench/upstream_kernels.py."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.gpu import attention as gpu_attention
from jax.experimental.pallas.ops.gpu import decode_attention as gpu_decode
from jax.experimental.pallas.ops.gpu import layer_norm as gpu_layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as gpu_rms_norm
from jax.experimental.pallas.ops.gpu import softmax as gpu_softmax
from jax.experimental.pallas.ops.tpu import flash_attention as tpu_flash
from jax.experimental.pallas.ops.tpu import matmul as tpu_matmul
from jax.experimental.pallas.ops.tpu.megablox import ops as megablox
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as ragged_paged
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sak
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sam

# The module of gmm and tgmm (the package's `gmm` is the function of ops.py).
megablox_kernels = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")

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


# Megablox grouped matmul: its grid (tiles_n, num_active_tiles, tiles_k) and its tile tables
# are computed from the group sizes (a histogram, a searchsorted, repeats), which the export
# computes as the program would when the group sizes are given.
def gmm(lhs, rhs, sizes):
    return megablox.gmm(lhs, rhs, sizes, tiling=(128, 128, 128))


def gmm_args(sizes, seed=2):
    key = jax.random.PRNGKey(seed)
    return (jax.random.normal(key, (512, 256), jnp.float32),
            jax.random.normal(jax.random.fold_in(key, 1), (4, 256, 128), jnp.float32),
            jnp.array(sizes, jnp.int32))


# Megablox's transposed grouped matmul (gmm's backward for rhs): out[g] = lhs[:, group g's
# rows] @ rhs[group g's rows], one (k, n) block per group, its scratch zeroed when the group
# changes along the grid's m tiles and stored when it is about to change.
def tgmm(lhs, rhs, sizes):
    return megablox_kernels.tgmm(lhs, rhs, sizes, tiling=(128, 128, 128))


def tgmm_args(sizes, seed=3):
    key = jax.random.PRNGKey(seed)
    m = int(sum(sizes))
    return (jax.random.normal(key, (256, m), jnp.float32),
            jax.random.normal(jax.random.fold_in(key, 1), (m, 128), jnp.float32),
            jnp.array(sizes, jnp.int32))


def tgmm_reference(lhs, rhs, sizes):
    ends = np.cumsum(np.asarray(sizes))
    return np.stack([np.asarray(lhs[:, e - s:e] @ rhs[e - s:e]) for s, e in zip(np.asarray(sizes), ends)])


VERIFIED = {
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
    # Triton window gathers, x_ref.at[i * bs + arange(bs)] under a mask, on ragged rows of 300.
    "gpu_layer_norm": (grad_of(gpu_layer_norm.layer_norm), f32s((2, 4, 300), (300,), (300,)),
                       {"ln_forward", "ln_backward_dx", "ln_backward_dw_db"}),
    "gpu_rms_norm": (grad_of(gpu_rms_norm.rms_norm), f32s((2, 4, 300), (300,), (300,)),
                     {"rms_forward", "ln_backward_dx", "ln_backward_dw_db"}),
}


# Decode attention: its start indices and kv lengths (integer inputs read as scalars that
# bound its kv loop and pick a lax.cond branch) are prefetch tables of their contents.
def decode(q, k, v, start, lengths):
    return gpu_decode.mqa(q, k, v, start, lengths, k_splits=4)


def decode_args(start, lengths, seed=1):
    q, k, v = data([jnp.zeros((2, 4, 64)), jnp.zeros((2, 256, 64)), jnp.zeros((2, 256, 64))],
                   seed)
    return q, k, v, jnp.array(start, jnp.int32), jnp.array(lengths, jnp.int32)


# Ragged paged attention (vLLM's TPU kernel): sequences of q_lens query tokens (their
# concatenation, padded to `tokens`) attending to kv_lens tokens each in pages of a shared
# pool (f32 K and V interleaved per head, `2 * kv_heads` combined heads); max_seqs table
# rows, the first len(q_lens) in use. Its prefetched lengths and page table are known at
# export, so the check follows its sequence walk and its double-buffered page copies.
def ragged(q, kv, kv_lens, pages, cu_q_lens, num_seqs, module=ragged_paged, **kwargs):
    return module.ragged_paged_attention(q, kv, kv_lens, pages, cu_q_lens, num_seqs,
                                         num_kv_pages_per_block=2, num_queries_per_block=8,
                                         **kwargs)


def ragged_args(q_lens, kv_lens, tokens, max_seqs=4, heads=4, kv_heads=2, pages=32,
                page_size=16, pages_per_seq=4, seed=3):
    q, kv = data([jnp.zeros((tokens, heads, 128)), jnp.zeros((pages, page_size, 2 * kv_heads,
                                                              128))], seed)
    n = len(q_lens)
    lens = [*kv_lens] + [0] * (max_seqs - n)
    cu = [0]
    for x in [*q_lens] + [0] * (max_seqs - n):
        cu.append(cu[-1] + x)
    table = jax.random.permutation(jax.random.PRNGKey(seed), pages)[:max_seqs * pages_per_seq]
    return (q, kv, jnp.array(lens, jnp.int32),
            table.reshape(max_seqs, pages_per_seq).astype(jnp.int32),
            jnp.array(cu, jnp.int32), jnp.array([n], jnp.int32))


def ragged_reference(*args, **kwargs):
    """The upstream reference (on the tokens in use, which must be all of them: the output
    rows of padding tokens are whatever the kernel's accumulator held)."""
    q, cu, n = args[0], args[4], args[5]
    assert int(cu[int(n[0])]) == q.shape[0], "padding tokens have no reference output"
    return ragged_paged.ref_ragged_paged_attention(*args, sm_scale=1.0, **kwargs)


def data(args, seed=1):
    """Normal random arrays of the shapes and dtypes of args (zeros, for the check)."""
    key = jax.random.PRNGKey(seed)
    return [jax.random.normal(jax.random.fold_in(key, n), a.shape, a.dtype)
            for n, a in enumerate(args)]
