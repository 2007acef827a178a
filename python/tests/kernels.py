"""Pallas kernels written for the bridge's tests, in the style of the Pallas TPU guides.

Each `make_*` returns (fn, args): fn makes the pallas_call, args are ShapeDtypeStructs (export
and check need only shapes) — `concrete(args)` gives arrays for running them.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

f32 = jnp.float32


def concrete(args, seed=0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.uniform(-1, 1, a.shape).astype(a.dtype)) for a in args]


# The pipelining guide: elementwise add.
def add_matrices_kernel(x_ref, y_ref, z_ref):
    z_ref[...] = x_ref[...] + y_ref[...]


def make_add(m=1024, n=1024, bm=256, bn=512, interpret=False):
    def add_matrices(x, y):
        return pl.pallas_call(
            add_matrices_kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(m // bm, n // bn),
            in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
                      pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
            interpret=interpret,
        )(x, y)

    s = jax.ShapeDtypeStruct((m, n), f32)
    return add_matrices, [s, s]


# The pipelining guide's reduction sharp edge: the reduction runs along the first grid axis
# and the accumulator is never initialized.
def incorrect_sum_kernel(x_ref, o_ref):
    o_ref[...] += x_ref[...]


def make_incorrect_sum(b=8, m=1024, n=1024, bm=256, bn=256, interpret=False):
    def incorrect_sum(x):
        return pl.pallas_call(
            incorrect_sum_kernel,
            grid=(b, m // bm, n // bn),
            in_specs=[pl.BlockSpec((None, bm, bn), lambda i, j, k: (i, j, k))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (j, k)),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            interpret=interpret,
        )(x)

    return incorrect_sum, [jax.ShapeDtypeStruct((b, m, n), f32)]


def correct_sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def make_correct_sum(b=8, m=1024, n=1024, bm=256, bn=256, interpret=False):
    def correct_sum(x):
        return pl.pallas_call(
            correct_sum_kernel,
            grid=(m // bm, n // bn, b),
            in_specs=[pl.BlockSpec((None, bm, bn), lambda i, j, k: (k, i, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")),
            interpret=interpret,
        )(x)

    return correct_sum, [jax.ShapeDtypeStruct((b, m, n), f32)]


# The matmul guide: a VMEM scratch accumulator over the K axis.
def matmul_kernel(x_ref, y_ref, z_ref, acc_ref, *, nsteps):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == nsteps - 1)
    def _():
        z_ref[...] = acc_ref[...].astype(z_ref.dtype)


def make_matmul(m=512, k=512, n=512, bm=128, bk=128, bn=128, interpret=False):
    def matmul(x, y):
        return pl.pallas_call(
            functools.partial(matmul_kernel, nsteps=k // bk),
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary"),
                vmem_limit_bytes=32 * 2**20),
            interpret=interpret,
        )(x, y)

    return matmul, [jax.ShapeDtypeStruct((m, k), f32), jax.ShapeDtypeStruct((k, n), f32)]


# A causal flash-attention forward after jax/experimental/pallas/ops/tpu/flash_attention.py:
# m, l and acc in VMEM scratch across the kv axis; kv blocks above the diagonal skipped; the
# kv block walked in sub-blocks with a fori_loop.
NEG_INF = -0.7 * float(np.finfo(np.float32).max)


def flash_fwd_kernel(q_ref, k_ref, v_ref, o_ref, m_scr, l_scr, acc_scr, *, bq, bkm, bk, nkv):
    qi, kv = pl.program_id(2), pl.program_id(3)

    @pl.when(kv == 0)
    def _():
        m_scr[...] = jnp.full(m_scr.shape, -jnp.inf, jnp.float32)
        l_scr[...] = jnp.zeros(l_scr.shape, jnp.float32)
        acc_scr[...] = jnp.zeros(acc_scr.shape, jnp.float32)

    @pl.when((qi + 1) * bq - 1 > kv * bkm)
    def _():
        def body(t, carry):
            start = t * bk
            m_prev = m_scr[...]
            l_prev = l_scr[...]
            q = q_ref[...]
            k = k_ref[pl.ds(start, bk), :]
            s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())),
                                    preferred_element_type=jnp.float32)
            row = jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0) + qi * bq
            col = jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1) + kv * bkm + start
            s = s + jnp.where(col <= row, 0.0, NEG_INF)
            m_curr = jnp.max(s, axis=1)[:, None]
            m_next = jnp.maximum(m_prev, m_curr)
            p = jnp.exp(s - m_next)
            alpha = jnp.exp(m_prev - m_next)
            l_corr = alpha * l_prev
            l_next = jnp.sum(p, axis=1, keepdims=True) + l_corr
            l_scr[...] = l_next
            m_scr[...] = m_next
            l_inv = jnp.where(l_next == 0.0, 1.0, 1.0 / l_next)
            acc_scr[...] = acc_scr[...] * (l_corr * l_inv)
            o_curr = jnp.dot(p, v_ref[pl.ds(start, bk), :], preferred_element_type=jnp.float32)
            acc_scr[...] += o_curr * l_inv
            return carry

        jax.lax.fori_loop(0, bkm // bk, body, 0)

    @pl.when(kv == nkv - 1)
    def _():
        o_ref[...] = acc_scr[...].astype(o_ref.dtype)


def make_flash_fwd(batch=2, heads=2, seq=512, d=128, bq=128, bkm=256, bk=128, interpret=False,
                   select_kv_map=False):
    """select_kv_map: upstream's kv index map, which maps a skipped kv block to block 0."""
    nkv = seq // bkm

    def kv_map(b, h, i, j):
        if select_kv_map:
            return (b, h, jax.lax.select((i + 1) * bq - 1 > j * bkm, j, 0), 0)
        return (b, h, j, 0)

    def flash_attention(q, k, v):
        kernel = functools.partial(flash_fwd_kernel, bq=bq, bkm=bkm, bk=bk, nkv=nkv)
        qo = pl.BlockSpec((None, None, bq, d), lambda b, h, i, j: (b, h, i, 0))
        kvs = pl.BlockSpec((None, None, bkm, d), kv_map)
        return pl.pallas_call(
            kernel,
            grid=(batch, heads, seq // bq, nkv),
            in_specs=[qo, kvs, kvs],
            out_specs=qo,
            out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
            scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                            pltpu.VMEM((bq, d), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
            interpret=interpret,
        )(q, k, v)

    s = jax.ShapeDtypeStruct((batch, heads, seq, d), f32)
    return flash_attention, [s, s, s]


def flash_reference(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k)
    n = q.shape[2]
    mask = jnp.tril(jnp.ones((n, n), bool))
    s = jnp.where(mask, s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


# Scalar prefetch: the block of x each step reads comes from an SMEM table of indices.
def gather_rows_kernel(idx_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]


def make_scalar_prefetch(rows=8, n=128, interpret=False):
    def gather_rows(idx, x):
        return pl.pallas_call(
            gather_rows_kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(rows,),
                in_specs=[pl.BlockSpec((1, n), lambda i, idx_ref: (idx_ref[i], 0))],
                out_specs=pl.BlockSpec((1, n), lambda i, idx_ref: (i, 0)),
            ),
            out_shape=jax.ShapeDtypeStruct((rows, n), x.dtype),
            interpret=interpret,
        )(idx, x)

    return gather_rows, [jax.ShapeDtypeStruct((rows,), jnp.int32),
                         jax.ShapeDtypeStruct((rows, n), f32)]


# A manual DMA: the input stays in HBM and the body copies it into VMEM scratch.
def manual_copy_kernel(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm, buf, sem)
    copy.start()
    copy.wait()
    o_ref[...] = buf[...] + 1.0


def make_manual_dma(m=8, n=128, interpret=False):
    def manual_copy(x):
        return pl.pallas_call(
            manual_copy_kernel,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((m, n), lambda: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            scratch_shapes=[pltpu.VMEM((m, n), jnp.float32), pltpu.SemaphoreType.DMA(())],
            interpret=interpret,
        )(x)

    return manual_copy, [jax.ShapeDtypeStruct((m, n), f32)]


# Constructs beyond the guides: a fori_loop whose trip count depends on the grid point, with
# two carried values; a lax.cond with both branches; a sigmoid; a reduction kept as a row.
def loops_and_branches_kernel(x_ref, o_ref, s_ref):
    i = pl.program_id(0)

    def body(t, carry):
        m, s = carry
        row = x_ref[pl.ds(t, 1), :]
        return jnp.maximum(m, row), s + row

    m0 = jnp.full((1, 128), -jnp.inf, jnp.float32)
    m, s = jax.lax.fori_loop(0, i + 1, body, (m0, jnp.zeros((1, 128), jnp.float32)))

    def even():
        o_ref[0:1, :] = m

    def odd():
        o_ref[0:1, :] = -m

    jax.lax.cond(i % 2 == 0, even, odd)
    s_ref[...] = s
    o_ref[1:2, :] = s_ref[...] * 2.0 + jax.nn.sigmoid(s)
    o_ref[2:8, :] = jnp.broadcast_to(jnp.sum(x_ref[...], axis=0, keepdims=True), (6, 128))


def make_loops_and_branches(interpret=False):
    def loops_and_branches(x):
        return pl.pallas_call(
            loops_and_branches_kernel, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((1, 128), jnp.float32)],
            interpret=interpret,
        )(x)

    return loops_and_branches, [jax.ShapeDtypeStruct((32, 128), f32)]


# The software pipelining guide's manual double buffer ("Deriving a Double-Buffered
# Pipeline"), with the guide's loop as the grid: A and the output stay in HBM, X and Y are
# two-slot VMEM scratch, each copy is started at one step and waited at the next on its
# slot's DMA semaphore. `wait_slot` picks the semaphore the copy into X[cur] is waited on
# (the mutant waits on the other slot's, retiring the prefetch just started instead).
def make_manual_double_buffer_kernel(n_steps, bm, other_slot=False):
    def manual_double_buffer_kernel(a_hbm, o_hbm, x, y, in_sem, out_sem):
        i = pl.program_id(0)
        cur = i % 2
        nxt = (i + 1) % 2
        wait_slot = nxt if other_slot else cur

        @pl.when(i == 0)
        def _():
            pltpu.make_async_copy(a_hbm.at[pl.ds(0, bm)], x.at[0], in_sem.at[0]).start()

        @pl.when(i + 1 < n_steps)
        def _():
            pltpu.make_async_copy(a_hbm.at[pl.ds((i + 1) * bm, bm)], x.at[nxt],
                                  in_sem.at[nxt]).start()

        pltpu.make_async_copy(a_hbm.at[pl.ds(i * bm, bm)], x.at[cur], in_sem.at[wait_slot]).wait()
        y[cur] = x[cur] + 1.0
        pltpu.make_async_copy(y.at[cur], o_hbm.at[pl.ds(i * bm, bm)], out_sem.at[cur]).start()

        @pl.when(i > 0)
        def _():
            pltpu.make_async_copy(y.at[nxt], o_hbm.at[pl.ds((i - 1) * bm, bm)],
                                  out_sem.at[nxt]).wait()

        @pl.when(i == n_steps - 1)
        def _():
            pltpu.make_async_copy(y.at[cur], o_hbm.at[pl.ds(i * bm, bm)], out_sem.at[cur]).wait()

    return manual_double_buffer_kernel


def make_manual_double_buffer(n_steps=8, bm=8, other_slot=False, interpret=False):
    kernel = make_manual_double_buffer_kernel(n_steps, bm, other_slot)

    def manual_double_buffer(a):
        return pl.pallas_call(
            kernel, grid=(n_steps,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype),
            scratch_shapes=[pltpu.VMEM((2, bm, 128), jnp.float32),
                            pltpu.VMEM((2, bm, 128), jnp.float32),
                            pltpu.SemaphoreType.DMA((2,)), pltpu.SemaphoreType.DMA((2,))],
            interpret=interpret,
        )(a)

    return manual_double_buffer, [jax.ShapeDtypeStruct((n_steps * bm, 128), f32)]


# Dynamic block indexing with scalar prefetch (the Pallas TPU sparse guide's
# block_dynamic_slice, one block per grid step): each step copies the row block that the
# prefetched `block_idx` names, and the body also reads the table (a scalar in SMEM) to tag
# the block with its source index.
def dynamic_block_gather_kernel(block_idx, x_ref, o_ref):
    src = block_idx[pl.program_id(0)]
    o_ref[...] = x_ref[...] + src.astype(jnp.float32)


def make_dynamic_block_gather(steps=4, rows=4, bm=8, n=128, interpret=False):
    def dynamic_block_gather(block_idx, x):
        return pl.pallas_call(
            dynamic_block_gather_kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(steps,),
                in_specs=[pl.BlockSpec((bm, n), lambda i, block_idx: (block_idx[i], 0))],
                out_specs=pl.BlockSpec((bm, n), lambda i, block_idx: (i, 0)),
            ),
            out_shape=jax.ShapeDtypeStruct((steps * bm, n), x.dtype),
            interpret=interpret,
        )(block_idx, x)

    return dynamic_block_gather, [jax.ShapeDtypeStruct((steps,), jnp.int32),
                                  jax.ShapeDtypeStruct((rows * bm, n), f32)]


# A 2-D block table (paged attention's page_indices[b, p]): block (b, p) of the output is
# block table[b, p] of x, read in the index map and, as a number, in the body.
def block_table_gather_kernel(table, x_ref, o_ref):
    o_ref[...] = x_ref[...] + table[pl.program_id(0), pl.program_id(1)].astype(f32)


def make_block_table_gather(b=2, p=3, rows=4, bm=8, n=128, interpret=False):
    def block_table_gather(table, x):
        return pl.pallas_call(
            block_table_gather_kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(b, p),
                in_specs=[pl.BlockSpec((bm, n), lambda i, j, table: (table[i, j], 0))],
                out_specs=pl.BlockSpec((bm, n), lambda i, j, table: (i * p + j, 0)),
            ),
            out_shape=jax.ShapeDtypeStruct((b * p * bm, n), x.dtype),
            interpret=interpret,
        )(table, x)

    return block_table_gather, [jax.ShapeDtypeStruct((b, p), jnp.int32),
                                jax.ShapeDtypeStruct((rows * bm, n), f32)]


# Batched attention scores, as flash attention's einsum("bqd,bkd->bqk") inside a kernel:
# a dot_general with a batch dim.
def batched_scores_kernel(q_ref, k_ref, s_ref):
    s_ref[...] = jax.lax.dot_general(q_ref[...], k_ref[...], (((2,), (2,)), ((0,), (0,))),
                                     preferred_element_type=f32)


def make_batched_scores(b=4, q=128, k=128, d=64, bb=2, interpret=False):
    def scores(qs, ks):
        return pl.pallas_call(
            batched_scores_kernel,
            out_shape=jax.ShapeDtypeStruct((b, q, k), f32),
            grid=(b // bb,),
            in_specs=[pl.BlockSpec((bb, q, d), lambda i: (i, 0, 0)),
                      pl.BlockSpec((bb, k, d), lambda i: (i, 0, 0))],
            out_specs=pl.BlockSpec((bb, q, k), lambda i: (i, 0, 0)),
            interpret=interpret,
        )(qs, ks)

    return scores, [jax.ShapeDtypeStruct((b, q, d), f32), jax.ShapeDtypeStruct((b, k, d), f32)]


# A halo: each block reads `halo` elements past its own (pl.Element with high padding), and
# masks what lies beyond the array (the last block's halo is padding) to zero.
def make_halo(n=1024, bs=128, halo=8, masked=True, interpret=False):
    def halo_kernel(x_ref, o_ref):
        x = x_ref[...]
        if masked:
            pos = pl.program_id(0) * bs + jax.lax.broadcasted_iota(jnp.int32, (bs + halo,), 0)
            x = jnp.where(pos < n, x, 0.0)
        o_ref[...] = x[:bs] + x[halo:]

    def halo_sum(x):
        return pl.pallas_call(
            halo_kernel,
            grid=(n // bs,),
            in_specs=[pl.BlockSpec((pl.Element(bs + halo, (0, halo)),), lambda i: (i * bs,))],
            out_specs=pl.BlockSpec((bs,), lambda i: (i,)),
            out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
            interpret=interpret,
        )(x)

    return halo_sum, [jax.ShapeDtypeStruct((n,), f32)]


def make_stencil(n=512, bs=128, mask_left=True, interpret=False):
    """y[i] = x[i - 1] + x[i] + x[i + 1] through Element(bs + 2, (1, 1)): the
    first window starts in the low padding, the last ends in the high."""
    def stencil_kernel(x_ref, o_ref):
        x = x_ref[...]
        pos = pl.program_id(0) * bs - 1 + jax.lax.broadcasted_iota(jnp.int32, (bs + 2,), 0)
        inside = pos < n
        if mask_left:
            inside = inside & (pos >= 0)
        x = jnp.where(inside, x, 0.0)
        o_ref[...] = x[:bs] + x[1:bs + 1] + x[2:]

    def stencil3(x):
        return pl.pallas_call(
            stencil_kernel,
            grid=(n // bs,),
            in_specs=[pl.BlockSpec((pl.Element(bs + 2, (1, 1)),), lambda i: (i * bs,))],
            out_specs=pl.BlockSpec((bs,), lambda i: (i,)),
            out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
            interpret=interpret,
        )(x)

    return stencil3, [jax.ShapeDtypeStruct((n,), f32)]


def stencil_reference(x):
    z = jnp.zeros((1,), x.dtype)
    return jnp.concatenate([z, x[:-1]]) + x + jnp.concatenate([x[1:], z])


def halo_reference(halo):
    return lambda x: x + jnp.concatenate([x[halo:], jnp.zeros((halo,), x.dtype)])


# Paged attention's search for the next sequence with pages (upstream's
# compute_block_indices / advance_to_next_non_zero_length): a lax.while_loop whose condition
# reads the scalar-prefetched lengths. Grid step b copies out the rows of the first sequence
# after b whose length is not zero, or zeros when there is none; `guarded=False` reads them
# without asking whether there is one.
def make_next_nonempty_sequence(seqs=8, bm=8, n=128, guarded=True, interpret=False):
    def next_nonempty_kernel(lengths_ref, x_ref, o_ref):
        b = pl.program_id(0)

        def empty(nb):  # nb is past the end, or sequence nb has no pages
            return (nb < seqs) & (lengths_ref[jnp.minimum(nb, seqs - 1)] == 0)

        nb = jax.lax.while_loop(empty, lambda nb: nb + 1, b + 1)

        def copy_next():
            o_ref[...] = x_ref[pl.ds(nb * bm, bm), :]

        if guarded:
            pl.when(nb < seqs)(copy_next)
        else:
            copy_next()

        @pl.when(nb >= seqs)
        def _():
            o_ref[...] = jnp.zeros((bm, n), o_ref.dtype)

    def next_nonempty(lengths, x):
        return pl.pallas_call(
            next_nonempty_kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(seqs,),
                in_specs=[pl.BlockSpec((seqs * bm, n), lambda b, lengths: (0, 0))],
                out_specs=pl.BlockSpec((bm, n), lambda b, lengths: (b, 0)),
            ),
            out_shape=jax.ShapeDtypeStruct((seqs * bm, n), x.dtype),
            interpret=interpret,
        )(lengths, x)

    return next_nonempty, [jax.ShapeDtypeStruct((seqs,), jnp.int32),
                           jax.ShapeDtypeStruct((seqs * bm, n), f32)]


def next_nonempty_reference(bm=8):
    def ref(lengths, x):
        lengths, x = np.asarray(lengths), np.asarray(x)
        out = np.zeros_like(x)
        for b in range(len(lengths)):
            nb = b + 1
            while nb < len(lengths) and lengths[nb] == 0:
                nb += 1
            if nb < len(lengths):
                out[b * bm:(b + 1) * bm] = x[nb * bm:(nb + 1) * bm]
        return out
    return ref


# SMEM state: a step counter in an SMEM scratch, stored at the first step (by program_id, or by
# a flag in a scalar prefetch ref that the body clears, as upstream paged attention's init_flag):
# block i gets x + i. With flag [0] the counter is read before anything stored it. (interpret=True
# keeps the SMEM scratch across grid steps but not a store into a prefetch ref: pltpu's
# InterpretParams mode, as the TPU, keeps both.)
def step_counter_kernel(flag_ref, x_ref, o_ref, count_ref):
    @pl.when(flag_ref[0] == 1)
    def _():
        count_ref[0] = 0
        flag_ref[0] = 0

    o_ref[...] = x_ref[...] + count_ref[0].astype(f32)
    count_ref[0] = count_ref[0] + 1


def step_counter_first_step_kernel(flag_ref, x_ref, o_ref, count_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        count_ref[0] = 0

    o_ref[...] = x_ref[...] + count_ref[0].astype(f32)
    count_ref[0] = count_ref[0] + 1


def make_step_counter(n=4, bm=8, w=128, by_flag=True, interpret=False):
    def step_counter(flag, x):
        return pl.pallas_call(
            step_counter_kernel if by_flag else step_counter_first_step_kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(n,),
                in_specs=[pl.BlockSpec((bm, w), lambda i, f: (i, 0))],
                out_specs=pl.BlockSpec((bm, w), lambda i, f: (i, 0)),
                scratch_shapes=[pltpu.SMEM((1,), jnp.int32)],
            ),
            out_shape=jax.ShapeDtypeStruct((n * bm, w), f32),
            interpret=interpret,
        )(flag, x)

    return step_counter, [jax.ShapeDtypeStruct((1,), jnp.int32), jax.ShapeDtypeStruct((n * bm, w), f32)]
