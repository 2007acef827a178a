"""Reads and stores through a reshaped ref (`buf.at[b].reshape(n, d)[h::heads, :]`, ragged paged
attention's K and V rows) and the select that initializes an accumulator
(`jnp.where(k == 0, init, acc[...])`, its load_with_init)."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj

HEADS = 4


def heads_call(kernel, out_rows=16):
    """x: (64, 4, 128) in blocks of (16, 4, 128) rows x heads; o: (4 * out_rows, 128)."""
    def fn(x):
        return pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec((16, HEADS, 128), lambda i: (i, 0, 0))],
            out_specs=pl.BlockSpec((out_rows, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((4 * out_rows, 128), jnp.float32))(x)
    return fn


def data(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def head_sum(x_ref, o_ref):
    # The rows of head h of the merged (token, head) dim: every HEADS-th row from h.
    rows = x_ref.reshape(16 * HEADS, 128)
    o_ref[...] = rows[0::HEADS, :] + 2.0 * rows[3::HEADS, :]


def test_a_strided_slice_of_a_merged_ref_is_the_rows_of_one_head():
    x = jax.ShapeDtypeStruct((64, HEADS, 128), jnp.float32)
    text = pj.export(heads_call(head_sum), x)
    # (16 tokens, 4 heads) merged, every 4th row from h: token dim whole, head h
    assert "o_ref[...] = x_ref[:, 0, :] + (2.0 * x_ref[:, 3, :])" in text, text
    r = pj.check(heads_call(head_sum), x)
    assert r.verdicts == {"head_sum": "verified"}, r.report()
    xs = data((64, HEADS, 128))
    res = pj.run(heads_call(head_sum), xs, reference=lambda x: x[:, 0] + 2.0 * x[:, 3])
    assert res.ok, res


def first_tokens(x_ref, o_ref):
    # the first 32 rows of the merged dim: tokens 0..7, every head, in (token, head) order
    o_ref[...] = x_ref.reshape(16 * HEADS, 128)[0:32, :]


def test_a_contiguous_slice_of_a_merged_ref_reads_a_box_reshaped_to_the_view():
    x = jax.ShapeDtypeStruct((64, HEADS, 128), jnp.float32)
    fn = heads_call(first_tokens, out_rows=32)
    text = pj.export(fn, x)
    assert "o_ref[...] = reshape(x_ref[0:8, :, :], (32, 128))" in text, text
    xs = data((64, HEADS, 128), seed=3)
    want = lambda x: x.reshape(4, 16 * HEADS, 128)[:, :32].reshape(128, 128)  # noqa: E731
    res = pj.run(fn, xs, reference=want)
    assert res.ok, res


def one_row(x_ref, o_ref):
    # row 5 of the merged (token, head) dim: token 1, head 1
    o_ref[...] = jnp.broadcast_to(x_ref.reshape(16 * HEADS, 128)[5], (16, 128))


def test_an_index_of_a_merged_ref_is_one_element_of_each_dim():
    x = jax.ShapeDtypeStruct((64, HEADS, 128), jnp.float32)
    text = pj.export(heads_call(one_row), x)
    assert "x_ref[1, 1, :]" in text, text
    xs = data((64, HEADS, 128), seed=4)
    res = pj.run(heads_call(one_row), xs,
                 reference=lambda x: jnp.repeat(x[1::16, 1], 16, axis=0))
    assert res.ok, res


def store_merged(x_ref, o_ref):
    # o's (16, 4 * 128) block seen as (16 * 4, 128) rows: a store through the merge.
    o_ref.reshape(16 * HEADS, 128)[...] = x_ref.reshape(16 * HEADS, 128)[...] * 3.0


def test_a_store_through_a_merged_ref_writes_its_dims():
    def fn(x):
        return pl.pallas_call(
            store_merged, grid=(4,),
            in_specs=[pl.BlockSpec((16, HEADS, 128), lambda i: (i, 0, 0))],
            out_specs=pl.BlockSpec((16, HEADS, 128), lambda i: (i, 0, 0)),
            out_shape=jax.ShapeDtypeStruct((64, HEADS, 128), jnp.float32))(x)
    xs = data((64, HEADS, 128), seed=1)
    text = pj.export(fn, xs)
    assert "o_ref[...] = reshape(" in text, text
    r = pj.check(fn, xs)
    assert r.verdicts == {"store_merged": "verified"}, r.report()
    res = pj.run(fn, xs, reference=lambda x: x * 3.0)
    assert res.ok, res


def pages_then_heads(x_ref, o_ref):
    # (16, 4) -> 64 rows, then (64,) -> (4, 16): a split, which has no .pk form.
    o_ref[...] = x_ref.reshape(16 * HEADS, 128).reshape(HEADS, 16, 128)[1]


def every_third_row(x_ref, o_ref):
    # rows 0, 3, 6, ... of the merged dim cross heads and tokens: no box of x's dims.
    o_ref[...] = x_ref.reshape(16 * HEADS, 128)[0:48:3, :]


@pytest.mark.parametrize("kernel, words", [
    (pages_then_heads, "that splits a dim has no .pk form"),
    (every_third_row, "that does not reach a box of them has no .pk form"),
], ids=["split", "not_a_box"])
def test_a_view_of_a_reshaped_ref_beyond_a_box_is_unsupported_at_its_line(kernel, words):
    x = jax.ShapeDtypeStruct((64, HEADS, 128), jnp.float32)
    r = pj.check(heads_call(kernel), x)
    assert r.exit_code == 2 and set(r.verdicts.values()) == {"unsupported"}, r.report()
    (u,) = r.unsupported
    assert words in str(u), str(u)
    lines, start = inspect.getsourcelines(kernel)
    assert u.location.endswith(f"test_ref_views.py:{start + len(lines) - 1}"), u.location


# The accumulator's init as a select: at k == 0 its read of acc is dropped.

def select_init(step):
    def kernel(x_ref, o_ref, acc_ref):
        k = pl.program_id(1)
        prev = jnp.where(k == step, jnp.full_like(acc_ref, 0.0), acc_ref[...])
        acc_ref[...] = prev + x_ref[...]

        @pl.when(k == pl.num_programs(1) - 1)
        def _():
            o_ref[...] = acc_ref[...]
    kernel.__name__ = f"select_init_at_{step}"
    return kernel


def row_sums(kernel):
    def fn(x):
        return pl.pallas_call(
            kernel, grid=(2, 4),
            in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
            out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)
    return fn


def test_an_accumulator_initialized_by_a_select_on_the_first_step_is_verified():
    fn = row_sums(select_init(0))
    text = pj.export(fn, jax.ShapeDtypeStruct((16, 512), jnp.float32))
    # the load stays inside the select (jnp.where is a jitted call whose operand it uses once)
    assert "where(program_id(1) == 0, broadcast_to(0.0, (8, 128)), acc_ref[...])" in text, text
    r = pj.check(fn, jax.ShapeDtypeStruct((16, 512), jnp.float32))
    assert r.verdicts == {"select_init_at_0": "verified"}, r.report()
    x = data((16, 512), seed=2)
    res = pj.run(fn, x, reference=lambda x: x.reshape(16, 4, 128).sum(1), rtol=1e-5, atol=1e-5)
    assert res.ok, res


def test_an_accumulator_initialized_by_a_select_on_the_second_step_reads_garbage_first():
    kernel = select_init(1)
    r = pj.check(row_sums(kernel), jax.ShapeDtypeStruct((16, 512), jnp.float32))
    assert r.verdicts == {"select_init_at_1": "violation"}, r.report()
    (f,) = [f for f in r.findings if f.rule == "uninitialized-accumulator"]
    lines, start = inspect.getsourcelines(kernel)
    assert f.python[1] == start + 3, f  # the store the select is inlined into
    assert "grid point (0, 0)" in f.message, f


def test_a_negative_index_is_out_of_bounds_at_its_line_noting_only_interpret_counts_it_back():
    # interpret=True reads x_ref[-1] as numpy does, the last row; Pallas' TPU and GPU lowerings
    # pass the -1 on as it is (jax-ml/jax#27490), as .pk's subscripts do: the CLI rejects it,
    # located, and the report says why interpret mode disagrees.
    def last_wrapped(x_ref, o_ref):
        o_ref[...] = x_ref[-1]

    def last(x_ref, o_ref):
        o_ref[...] = x_ref[x_ref.shape[0] - 1]

    def call(kernel):
        return lambda x: pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)

    x = data((3, 8, 128))
    r = pj.check(call(last_wrapped), x)
    assert r.exit_code == 3, str(r)
    (f,) = r.findings
    assert f.rule == "bad-input" and "index -1 is out of bounds" in f.message, str(r)
    assert f.python[1] == inspect.getsourcelines(last_wrapped)[1] + 1, str(r)
    (note, py, _), = f.notes
    assert "does not count from the end on a TPU or GPU" in note and py == f.python, note
    assert "only interpret=True reads x_ref[-1] as numpy does" in str(r)

    assert "o_ref[...] = x_ref[2, :, :]" in pj.export(call(last), x)
    pj.assert_verified(call(last), x)
    run = pj.run(call(last), x, reference=lambda x: x[2])
    assert run.ok, str(run)
