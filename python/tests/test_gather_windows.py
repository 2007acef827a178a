"""Triton's window gathers, `x_ref.at[i * bs + jnp.arange(bs)]` under a mask (GPU layer norm,
RMS norm): exported as ds windows on blocks padded to whole windows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

import pipecheck_jax as pj

N, BS, ROWS = 300, 128, 4  # a ragged row: 3 windows of 128, the last 84 columns real


def row_scale_kernel(x_ref, o_ref, *, cmp, mask_load):
    # o = x * sum(x) per row, a window at a time, as upstream's layer norm walks its row.
    n = x_ref.shape[0]

    def total(i, acc):
        cols = i * BS + jnp.arange(BS)
        mask = cmp(cols, n)
        return acc + plgpu.load(x_ref.at[cols], mask=mask if mask_load else None, other=0.0
                                if mask_load else None)

    s = lax.fori_loop(0, pl.cdiv(n, BS), total, jnp.zeros(BS, jnp.float32)).sum()

    @pl.loop(0, pl.cdiv(n, BS))
    def _(i):
        cols = i * BS + jnp.arange(BS)
        mask = cols < n
        plgpu.store(o_ref.at[cols], plgpu.load(x_ref.at[cols], mask=mask, other=0.0) * s,
                    mask=mask)


def row_scale(cmp=lambda c, n: c < n, mask_load=True):
    def call(x):
        kernel = pl.pallas_call(
            lambda x_ref, o_ref: row_scale_kernel(x_ref, o_ref, cmp=cmp, mask_load=mask_load),
            out_shape=jax.ShapeDtypeStruct((N,), jnp.float32), grid=())
        return jax.vmap(kernel)(x)
    return call


def x_rows(seed=0):
    return jax.random.normal(jax.random.PRNGKey(seed), (ROWS, N), jnp.float32)


def test_a_window_gather_exports_as_ds_on_a_block_padded_to_whole_windows():
    text = pj.export(row_scale(), x_rows())
    # 300 columns in windows of 128: the block is the 3 windows, the last 212 of them padding.
    assert "in  x_ref: f32[4, 300]  block=(None, 384)" in text, text
    assert "out o_ref: f32[4, 300]  block=(None, 384)" in text, text
    assert "x_ref[ds(t" in text and "* 128, 128)]" in text, text
    assert "opaque" not in text, text


def test_a_masked_window_gather_verifies_and_runs_like_interpret():
    pj.assert_verified(row_scale(), x_rows())
    x = x_rows(1)
    res = pj.run(row_scale(), x, reference=lambda x: x * x.sum(axis=1, keepdims=True),
                 rtol=1e-4, atol=1e-4)
    assert res.ok, res


@pytest.mark.parametrize("variant", [dict(cmp=lambda c, n: c <= n), dict(mask_load=False)],
                         ids=["off_by_one_mask", "no_mask"])
def test_a_window_that_reads_past_the_row_unmasked_is_an_uninitialized_read(variant):
    # The lanes past column 299 read the padding, and the sum carries it into every output.
    r = pj.check(row_scale(**variant), x_rows())
    assert r.verdicts == {"kernel_": "violation"}, r.report()
    assert "uninitialized-read" in {f.rule for f in r.findings}, r.report()


def block_sum_kernel(x_ref, o_ref):
    # 2-D windows, as upstream's layer norm backward reads rows and columns at once.
    m, n = x_ref.shape
    j = pl.program_id(0)
    cols = j * 16 + jnp.arange(16)

    def body(i, acc):
        rows = i * 8 + jnp.arange(8)
        mask = (rows < m)[:, None] & (cols < n)[None, :]
        return acc + plgpu.load(x_ref.at[rows[:, None], cols[None]], mask=mask,
                                other=0.0).sum(axis=0)

    acc = lax.fori_loop(0, pl.cdiv(m, 8), body, jnp.zeros(16, jnp.float32))
    plgpu.store(o_ref.at[cols], acc, mask=cols < n)


def block_sum(x):
    return pl.pallas_call(block_sum_kernel, out_shape=jax.ShapeDtypeStruct((x.shape[1],),
                                                                           jnp.float32),
                          grid=(pl.cdiv(x.shape[1], 16),))(x)


def test_two_d_window_gathers_and_per_program_chunks_of_one_output_verify():
    x = jax.random.normal(jax.random.PRNGKey(2), (20, 50), jnp.float32)
    text = pj.export(block_sum, x)
    assert "in  x_ref: f32[20, 50]  block=(24, 64)" in text, text  # whole windows of 8 and 16
    pj.assert_verified(block_sum, x)
    res = pj.run(block_sum, x, reference=lambda x: x.sum(axis=0), rtol=1e-4, atol=1e-4)
    assert res.ok, res


def test_a_gather_that_is_no_window_is_unsupported_at_its_line():
    def kernel(x_ref, o_ref):
        o_ref[...] = plgpu.load(x_ref.at[jnp.arange(64) * 2])  # strided: no ds window

    fn = lambda x: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
                                  grid=())(x)
    r = pj.check(fn, jnp.zeros((128,), jnp.float32))
    assert r.exit_code == 2, r.report()
    (u,) = r.unsupported
    assert "that is not a window start + jnp.arange(n)" in str(u), str(u)


def test_a_ref_read_through_windows_past_its_end_and_whole_is_unsupported():
    def kernel(x_ref, o_ref):
        cols = jnp.arange(128)
        o_ref[...] = plgpu.load(x_ref.at[cols], mask=cols < 100, other=0.0)[:100] + x_ref[...]

    fn = lambda x: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((100,), jnp.float32),
                                  grid=())(x)
    r = pj.check(fn, jnp.zeros((100,), jnp.float32))
    assert r.exit_code == 2, r.report()
    assert "read both through gather windows of 128 that pass its end and whole" in r.report()


def test_windows_within_the_ref_need_no_padding():
    # 256 columns in windows of 128: the block stays the row.
    x = jnp.asarray(np.ones((ROWS, 256), np.float32))

    def call(x):
        kernel = pl.pallas_call(
            lambda x_ref, o_ref: row_scale_kernel(x_ref, o_ref, cmp=lambda c, n: c < n,
                                                  mask_load=True),
            out_shape=jax.ShapeDtypeStruct((256,), jnp.float32), grid=())
        return jax.vmap(kernel)(x)

    text = pj.export(call, x)
    assert "block=(None, 256)" in text, text
    pj.assert_verified(call, x)


def tail_store_kernel(x_ref, o_ref, *, masked):
    # Windows of 16 over 50 elements: the last program's window passes the end.
    idx = pl.program_id(0) * 16 + jnp.arange(16)
    x = plgpu.load(x_ref.at[idx], mask=idx < 50, other=0.0)
    plgpu.store(o_ref.at[idx], x + 1.0, mask=(idx < 50) if masked else None)


def tail_store(masked):
    def fn(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: tail_store_kernel(x_ref, o_ref, masked=masked), grid=(4,),
            out_shape=jax.ShapeDtypeStruct((50,), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_a_window_store_past_the_array_without_its_mask_is_out_of_bounds_at_the_store():
    # The padded block would hold it, but a Triton program's store reaches global memory.
    x = jnp.arange(50, dtype=jnp.float32)
    pj.assert_verified(tail_store(True), x)
    r = pj.check(tail_store(False), x)
    assert r.exit_code == 1, r.report()
    (f,) = r.findings
    assert f.rule == "index-out-of-bounds" and "element (50,)" in f.message, r.report()
    assert "plgpu.store" in open(f.python[0]).read().splitlines()[f.python[1] - 1], f
    # and run stops it there, as the GPU would fault (the padded block would drop it)
    run = pj.run(tail_store(False), x, reference=lambda x: x + 1.0)
    assert not run.ok and "stores element (50,) of 'o_ref', outside its shape (50,)" in str(run), run
    assert pj.run(tail_store(True), x, reference=lambda x: x + 1.0).ok


def chunked_total_kernel(x_ref, o_ref, *, masked):
    # pl.ds windows of 64 over 200 elements: the last passes the end, its lanes masked off.
    def body(k, acc):
        cols = k * 64 + jnp.arange(64)
        win = x_ref.at[pl.ds(k * 64, 64)]
        return acc + (plgpu.load(win, mask=cols < 200, other=0.0) if masked else plgpu.load(win))
    o_ref[0] = lax.fori_loop(0, pl.cdiv(200, 64), body, jnp.zeros(64, jnp.float32)).sum()


def chunked_total(masked):
    def fn(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: chunked_total_kernel(x_ref, o_ref, masked=masked), grid=(1,),
            out_shape=jax.ShapeDtypeStruct((1,), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_a_masked_ds_window_past_the_end_is_padded_like_a_gather_window_and_verifies():
    x = jnp.arange(200, dtype=jnp.float32)
    assert "block=(256,)" in pj.export(chunked_total(True), x)
    pj.assert_verified(chunked_total(True), x)
    assert pj.run(chunked_total(True), x, reference=lambda x: x.sum()[None]).ok
    # Unmasked, the window past the end is out of bounds (no padding asked for).
    r = pj.check(chunked_total(False), x)
    assert r.exit_code == 1 and {f.rule for f in r.findings} == {"index-out-of-bounds"}, r.report()


def ds_tail_store(slack):
    # 1000 elements in pl.ds windows of 128: the last store's lanes past `1000 + slack` masked off.
    def tail_kernel(x_ref, o_ref):
        i = pl.program_id(0)
        cols = i * 128 + jnp.arange(128)
        v = plgpu.load(x_ref.at[pl.ds(i * 128, 128)], mask=cols < 1000, other=0.0)
        plgpu.store(o_ref.at[pl.ds(i * 128, 128)], v * 3.0, mask=cols < 1000 + slack)

    def fn(x):
        return pl.pallas_call(
            tail_kernel, grid=(8,), in_specs=[pl.BlockSpec((1000,), lambda i: (0,))],
            out_specs=pl.BlockSpec((1000,), lambda i: (0,)),
            out_shape=jax.ShapeDtypeStruct((1000,), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_a_masked_ds_store_past_the_end_is_padded_too_and_out_of_bounds_where_its_mask_lets_it():
    x = jax.random.normal(jax.random.PRNGKey(0), (1000,), jnp.float32)
    assert "out o_ref: f32[1000]  block=(1024,)" in pj.export(ds_tail_store(0), x)
    pj.assert_verified(ds_tail_store(0), x)
    assert pj.run(ds_tail_store(0), x, reference=lambda x: x * 3.0).ok
    r = pj.check(ds_tail_store(8), x)
    assert [f.rule for f in r.findings] == ["index-out-of-bounds"], r.report()
    assert "element (1000,) of 'o_ref'" in r.findings[0].message, r.report()


def test_a_row_gather_interpret_mode_cannot_discharge_is_compared_with_the_reference_alone():
    # jax 0.10's interpret mode raises a bare NotImplementedError on a masked row gather
    R, C, RB = 50, 64, 16

    def half_rows_kernel(x_ref, o_ref):
        rows = pl.program_id(0) * RB + jnp.arange(RB)
        m = (rows < R)[:, None]
        plgpu.store(o_ref.at[rows], plgpu.load(x_ref.at[rows], mask=m, other=0.0) * 0.5, mask=m)

    def f(x):
        return pl.pallas_call(
            half_rows_kernel, grid=(4,), in_specs=[pl.BlockSpec((R, C), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((R, C), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((R, C), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)

    x = jax.random.normal(jax.random.PRNGKey(0), (R, C), jnp.float32)
    pj.assert_verified(f, x)
    r = pj.run(f, x, reference=lambda x: x * 0.5)
    assert r.ok and r.interpret_error == "NotImplementedError: interpret mode does not implement it", r


def tail_gather_load(masked):
    # 1000 elements in gather windows of 128; the store is masked, the load masked or not.
    def gather_kernel(x_ref, o_ref):
        cols = pl.program_id(0) * 128 + jnp.arange(128)
        v = plgpu.load(x_ref.at[cols], mask=cols < 1000, other=0.0) if masked else \
            plgpu.load(x_ref.at[cols])
        plgpu.store(o_ref.at[cols], v * 3.0, mask=cols < 1000)

    def fn(x):
        return pl.pallas_call(
            gather_kernel, grid=(8,), in_specs=[pl.BlockSpec((1000,), lambda i: (0,))],
            out_specs=pl.BlockSpec((1000,), lambda i: (0,)),
            out_shape=jax.ShapeDtypeStruct((1000,), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_an_unmasked_gather_load_past_the_array_is_out_of_bounds_though_its_store_is_masked():
    # Its lanes past 999 read global memory past the array: the block is not padded for it.
    x = jax.random.normal(jax.random.PRNGKey(0), (1000,), jnp.float32)
    assert "in  x_ref: f32[1000]  block=(1000,)" in pj.export(tail_gather_load(False), x)
    r = pj.check(tail_gather_load(False), x)
    assert [f.rule for f in r.findings] == ["index-out-of-bounds"], r.report()
    pj.assert_verified(tail_gather_load(True), x)


def unaligned_windows(kind):
    # 1000 elements through masked windows of 128 whose starts are no multiple of 128: chunks of
    # 100 per program ("chunk"), or a halo's right neighbour, offs + 1 ("halo").
    def unaligned_kernel(x_ref, o_ref):
        i = pl.program_id(0)
        lane = jnp.arange(128)
        if kind == "chunk":
            offs = i * 100 + lane
            m = (offs < 1000) & (lane < 100)
            v = plgpu.load(x_ref.at[offs], mask=m, other=0.0) + 5.0
        else:
            offs = i * 128 + lane
            m = offs < 1000
            v = plgpu.load(x_ref.at[offs], mask=m, other=0.0) + \
                plgpu.load(x_ref.at[offs + 1], mask=offs + 1 < 1000, other=0.0)
        plgpu.store(o_ref.at[offs], v, mask=m)

    def fn(x):
        return pl.pallas_call(
            unaligned_kernel, grid=(10 if kind == "chunk" else 8,),
            in_specs=[pl.BlockSpec((1000,), lambda i: (0,))],
            out_specs=pl.BlockSpec((1000,), lambda i: (0,)),
            out_shape=jax.ShapeDtypeStruct((1000,), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


@pytest.mark.parametrize("kind", ["chunk", "halo"])
def test_masked_windows_whose_starts_are_no_multiple_of_their_size_get_one_window_more(kind):
    x = jax.random.normal(jax.random.PRNGKey(0), (1000,), jnp.float32)
    assert "in  x_ref: f32[1000]  block=(1152,)" in pj.export(unaligned_windows(kind), x)
    pj.assert_verified(unaligned_windows(kind), x)
    want = (lambda x: x + 5.0) if kind == "chunk" else (lambda x: x + jnp.pad(x[1:], (0, 1)))
    assert pj.run(unaligned_windows(kind), x, reference=want).ok


def left_halo(masked, form="gather", reach=1):
    # A causal shift: y[t] = x[t] + x[t - reach], the lanes before element 0 masked off
    # (`offs >= reach`), read through a gather window or a pl.ds window that starts before
    # the array at program 0.
    def halo_kernel(x_ref, o_ref):
        i = pl.program_id(0)
        offs = i * 128 + jnp.arange(128)
        m = offs < 1000
        back = (m & (offs >= reach)) if masked else m
        starts = {  # other ways to write the same start, i * 128 - reach
            "plus_negative": lambda: i * 128 + (-reach),
            "negative_first": lambda: -reach + i * 128,
            "twice": lambda: (i * 128 - 1) - (reach - 1),
            "tap": lambda: i * 128 + (jnp.int32(0) - reach),
        }
        win = x_ref.at[offs - reach] if form == "gather" else \
            x_ref.at[pl.ds(i * 128 - reach, 128)] if form == "ds" else x_ref.at[pl.ds(starts[form](), 128)]
        v = plgpu.load(x_ref.at[offs], mask=m, other=0.0) + plgpu.load(win, mask=back, other=0.0)
        plgpu.store(o_ref.at[offs], v, mask=m)

    def fn(x):
        return pl.pallas_call(
            halo_kernel, grid=(8,),
            in_specs=[pl.BlockSpec((1000,), lambda i: (0,))],
            out_specs=pl.BlockSpec((1000,), lambda i: (0,)),
            out_shape=jax.ShapeDtypeStruct((1000,), jnp.float32),
            compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


@pytest.mark.parametrize("form,reach", [("gather", 1), ("ds", 1), ("gather", 3), ("plus_negative", 1),
                                         ("negative_first", 2), ("twice", 2), ("tap", 1)])
def test_masked_windows_that_start_before_the_array_pad_its_block_in_front(form, reach):
    x = jax.random.normal(jax.random.PRNGKey(1), (1000,), jnp.float32)
    text = pj.export(left_halo(True, form, reach), x)
    assert f"block=(Element({reach + 1152}, ({reach}, 152)),)" in text, text
    pj.assert_verified(left_halo(True, form, reach), x)
    want = lambda x: x + jnp.pad(x[:-reach], (reach, 0))  # noqa: E731
    assert pj.run(left_halo(True, form, reach), x, reference=want).ok
    # Without the `offs >= reach` mask, program 0's load selects the lanes before the array:
    # it reads memory there (index-out-of-bounds at the load, which explains the garbage it
    # brings into o[0:reach]).
    r = pj.check(left_halo(False, form, reach), x)
    assert r.exit_code == 1 and {f.rule for f in r.findings} == {"index-out-of-bounds"}, r.report()
    assert f"this masked load reads element ({-reach},) of 'x_ref'" in r.report(), r.report()


@pytest.mark.parametrize("form", ["scalar_and_window", "view_then_window"])
def test_a_scalar_row_beside_a_column_window_is_that_row_of_the_window(form):
    # x_ref.at[r, cols]: JAX passes r broadcast to cols' shape; it is the row r, as in
    # x_ref.at[r].at[cols].
    def kernel(x_ref, o_ref):
        cols = pl.program_id(0) * 128 + jnp.arange(128)

        def body(r, acc):
            view = x_ref.at[r, cols] if form == "scalar_and_window" else x_ref.at[r].at[cols]
            return acc + plgpu.load(view)
        plgpu.store(o_ref.at[cols], jax.lax.fori_loop(0, 8, body, jnp.zeros((128,), jnp.float32)))

    def fn(x):
        return pl.pallas_call(kernel, grid=(2,), out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                              compiler_params=plgpu.CompilerParams(num_warps=4))(x)

    x = jax.random.normal(jax.random.PRNGKey(2), (8, 256), jnp.float32)
    pj.assert_verified(fn, x)
    assert pj.run(fn, x, reference=lambda x: x.sum(0)).ok


def test_a_masked_row_view_window_that_interpret_mode_cannot_discharge_is_compared_with_the_reference():
    # jax 0.10's interpret mode fails inside JAX on x_ref.at[r].at[cols] with a mask (a
    # TypeError from its broadcast_in_dim): pipecheck's run is compared with the reference.
    def kernel(x_ref, o_ref):
        r = pl.program_id(0)
        cols = jnp.arange(512)
        m = cols < 300
        c = plgpu.load(x_ref.at[r].at[cols], mask=m, other=0.0)
        plgpu.store(o_ref.at[r].at[cols], c * 2, mask=m)

    def fn(x):
        return pl.pallas_call(kernel, grid=(16,), out_shape=jax.ShapeDtypeStruct((16, 300), jnp.float32),
                              compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1))(x)

    x = jax.random.normal(jax.random.PRNGKey(3), (16, 300), jnp.float32)
    pj.assert_verified(fn, x)
    r = pj.run(fn, x, reference=lambda x: 2 * x)
    assert r.ok, str(r)
    assert r.interpret_error is None or "inside JAX" in r.interpret_error, r.interpret_error


def windows_per_program(n, masked=True):
    # Each of 2 programs takes 2 windows of 16: with n = 48 the last program's second window
    # (48..63) lies wholly past the end, every lane masked off.
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)
        for t in range(2):
            s = (i * 2 + t) * 16
            m = s + jnp.arange(16) < n
            v = plgpu.load(x_ref.at[pl.ds(s, 16)], mask=m if masked else None,
                           other=0.0 if masked else None)
            plgpu.store(o_ref.at[pl.ds(s, 16)], v + 1.0, mask=m)

    def fn(x):
        return pl.pallas_call(kernel, grid=(2,), out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
                              compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_a_window_wholly_past_the_end_under_its_mask_pads_the_block_as_far_as_its_start_reaches():
    x = jnp.arange(48, dtype=jnp.float32)
    # The start's bound under the grid (program_id(0) <= 1) reaches 48 + 16.
    assert "block=(64,)" in pj.export(windows_per_program(48), x)
    pj.assert_verified(windows_per_program(48), x)
    assert pj.run(windows_per_program(48), x, reference=lambda x: x + 1.0).ok
    # Its load unmasked reads past the array.
    r = pj.check(windows_per_program(48, masked=False), x)
    assert r.exit_code == 1 and "index-out-of-bounds" in {f.rule for f in r.findings}, r.report()


def whole_row_store(masked):
    # One program stores 256 lanes into 200 elements through a constant-start window.
    def kernel(x_ref, o_ref):
        m = jnp.arange(256) < 200
        v = plgpu.load(x_ref.at[pl.ds(0, 256)], mask=m, other=0.0)
        plgpu.store(o_ref.at[pl.ds(0, 256)], v + 1.0, mask=m if masked else None)

    def fn(x):
        return pl.pallas_call(kernel, grid=(), out_shape=jax.ShapeDtypeStruct((200,), jnp.float32),
                              compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_a_constant_start_window_past_the_end_unmasked_is_out_of_bounds_not_bad_input():
    x = jnp.arange(200, dtype=jnp.float32)
    pj.assert_verified(whole_row_store(True), x)
    r = pj.check(whole_row_store(False), x)
    assert r.exit_code == 1 and {f.rule for f in r.findings} == {"index-out-of-bounds"}, r.report()
    run = pj.run(whole_row_store(False), x, reference=lambda x: x + 1.0)
    assert not run.ok, run


def in_place(read_next):
    # input_output_aliases: x and o are one GPU buffer; program i reads window i (or i + 1).
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)
        src = jnp.minimum(i + 1, 3) if read_next else i
        o_ref[pl.ds(i * 8, 8)] = x_ref[pl.ds(src * 8, 8)] * 2.0

    def fn(x):
        return pl.pallas_call(kernel, grid=(4,), out_shape=jax.ShapeDtypeStruct((32,), jnp.float32),
                              input_output_aliases={0: 0},
                              compiler_params=plgpu.CompilerParams(num_warps=4))(x)
    return fn


def test_an_in_place_program_reading_what_another_overwrites_through_the_aliased_input_races():
    x = jnp.arange(32, dtype=jnp.float32)
    pj.assert_verified(in_place(False), x)
    r = pj.check(in_place(True), x)
    assert [f.rule for f in r.findings] == ["parallel-write-conflict"], r.report()
    assert "(through 'x_ref', aliased to it)" in r.findings[0].message, r.report()
