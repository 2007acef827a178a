"""A `pltpu.emit_pipeline` inside a kernel, traced as JAX's emit_pipeline primitive and
exported as `.pk`'s nested `emit_pipeline(grid=...)`: its specs over the kernel's ANY operands
(a ref view `.at[...]` folded into them) and its inner body, so the spec rules see the
reductions it makes over its grid. What the nested form cannot say (an aliased operand, a
pipeline over VMEM refs) is exported as the DMAs and loop Pallas makes of it. `run` compares
with JAX's interpret mode, which runs the latter."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj
from test_body_forms import line_of

X = jax.ShapeDtypeStruct((32, 128), jnp.float32)


def data(shape=(32, 128), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def in_hbm(kernel, shape, **kwargs):
    """A pallas_call of `kernel` on one input and one f32 output of `shape`, both left in
    HBM (memory_space=ANY) for the kernel's emit_pipeline."""
    any_space = pl.BlockSpec(memory_space=pl.ANY)
    return lambda x: pl.pallas_call(kernel, in_specs=[any_space], out_specs=any_space,
                                    out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
                                    **kwargs)(x)


def doubling(index_map):
    def inner(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def kernel(x_hbm, o_hbm):
        pltpu.emit_pipeline(inner, grid=(4,),
                            in_specs=[pl.BlockSpec((8, 128), index_map)],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

    return in_hbm(kernel, (32, 128))


def body_lines(text):
    return [t.split("  # ")[0].strip() for t in text.splitlines()]


def test_an_emit_pipeline_exports_as_the_nested_form_with_its_specs_and_body():
    text = pj.export(doubling(lambda i: (i, 0)), X)
    body = body_lines(text)
    assert "emit_pipeline(grid=(4,)):" in body, text
    assert "in  x_hbm: block=(8, 128)  index=(i,) -> (i, 0)" in body, text
    assert "out o_hbm: block=(8, 128)  index=(i,) -> (i, 0)" in body, text
    assert "o_hbm[...] = x_hbm[...] * 2.0" in body, text
    assert not any(".start()" in t for t in body), text


def row_sums(store_step=-1, init_once=False):
    """Per outer row block r, an inner pipeline over x's column blocks of the row view
    x_hbm.at[rows] sums them into a scratch: stored into o's block after the pipeline (a
    windowed output), or, with store_step, by the inner body into the view o_hbm.at[rows] at
    that inner step (-1: the last)."""
    inner_store = store_step is not None

    def kernel(x_hbm, o, acc):
        r = pl.program_id(0)
        rows = pl.ds(pl.multiple_of(r * 8, 8), 8)
        if init_once:
            @pl.when(r == 0)
            def _():
                acc[...] = jnp.zeros_like(acc)

        def inner(x_blk, *o_blk):
            k = pl.program_id(0)
            if not init_once:
                @pl.when(k == 0)
                def _():
                    acc[...] = jnp.zeros_like(acc)
            acc[...] += x_blk[...]
            if inner_store:
                @pl.when(k == (store_step % 4))
                def _():
                    o_blk[0][...] = acc[...]

        pltpu.emit_pipeline(
            inner, grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda k: (0, k))],
            out_specs=[pl.BlockSpec((8, 128), lambda k: (0, 0))] if inner_store else [],
        )(x_hbm.at[rows], *([o.at[rows]] if inner_store else []))
        if not inner_store:
            o[...] = acc[...]

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(2,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY) if inner_store else
            pl.BlockSpec((8, 128), lambda r: (r, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x)
    return fn


def row_sums_reference(x):
    return x.reshape(16, 4, 128).sum(1)


XR = jax.ShapeDtypeStruct((16, 512), jnp.float32)


def test_a_row_view_is_an_element_offset_of_the_operand_closed_over_as_a_local():
    text = pj.export(row_sums(), XR)
    body = body_lines(text)
    assert "c1 = program_id(0) * 8" in body, text
    assert "in  x_hbm: block=(Element(8), 128)  index=(i,) -> (c1 + (0) * 8, i)" in body, text
    assert "out o: block=(Element(8), 128)  index=(i,) -> (c1 + (0) * 8, 0)" in body, text


def test_a_reduction_inside_an_emit_pipeline_stored_on_its_last_step_verifies_and_runs():
    fn = row_sums()
    pj.assert_verified(fn, XR)
    r = pj.run(fn, data((16, 512)), reference=row_sums_reference)
    assert r.ok, str(r)


def test_a_reduction_inside_an_emit_pipeline_stored_on_its_first_step_is_an_accumulation_lost():
    r = pj.check(row_sums(store_step=0), XR)
    assert r.exit_code == 1, str(r)
    assert [f.rule for f in r.findings] == ["accumulation-lost"], str(r)
    assert not pj.run(row_sums(store_step=0), data((16, 512)),
                      reference=row_sums_reference).ok


def test_an_accumulator_zeroed_on_the_first_outer_step_only_is_carried_into_the_next_row():
    fn = row_sums(store_step=None, init_once=True)
    r = pj.check(fn, XR)
    assert r.exit_code == 1, str(r)
    assert [f.rule for f in r.findings] == ["accumulator-carried"], str(r)
    # its twin, zeroed on each row's first inner step, stores each row's own sums
    good = row_sums(store_step=None)
    pj.assert_verified(good, XR)
    assert pj.run(good, data((16, 512)), reference=row_sums_reference).ok


def test_static_views_fold_into_block_indices_and_an_integer_index_squeezes_its_dim():
    def kernel(x_hbm, o_hbm):
        def inner(x_blk, o_blk):
            o_blk[...] = x_blk[...] + 1.0

        pltpu.emit_pipeline(inner, grid=(2,),
                            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                            )(x_hbm.at[1, pl.ds(8, 16)], o_hbm)

    fn = in_hbm(kernel, (16, 128))

    x3 = jax.ShapeDtypeStruct((2, 32, 128), jnp.float32)
    text = pj.export(fn, x3)
    assert "in  x_hbm: block=(None, 8, 128)  index=(i,) -> (1, 1 + i, 0)" in body_lines(text), text
    pj.assert_verified(fn, x3)
    x = data((2, 32, 128))
    assert pj.run(fn, x, reference=lambda a: a[1, 8:24] + 1.0).ok


def copy_through_a_row_view(rows):
    def kernel(x_hbm, o_hbm):
        def inner(x_blk, o_blk):
            o_blk[...] = x_blk[...]

        pltpu.emit_pipeline(inner, grid=(2,),
                            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                            )(x_hbm.at[pl.ds(0, rows)], o_hbm)

    return in_hbm(kernel, (16, 128))


def test_an_inner_block_past_the_end_of_its_view_is_an_index_out_of_bounds():
    # x_hbm.at[0:8] has one block of 8 rows; the inner grid reaches block 1, inside the
    # array but past the view
    x = jax.ShapeDtypeStruct((16, 128), jnp.float32)
    r = pj.check(copy_through_a_row_view(8), x)
    assert r.exit_code == 1 and [f.rule for f in r.findings] == ["index-out-of-bounds"], str(r)
    pj.assert_verified(copy_through_a_row_view(16), x)


def test_an_element_inner_blockspec_keeps_its_padding_and_checks_and_runs():
    # A 16-row window at every 8 rows, padded by 8 at the end: each step adds its rows to
    # the next 8 (zero past the end). Padded by 4 the last window runs past the padding.
    n = 64

    def summing(pad_hi):
        def kernel(x_hbm, o_hbm):
            def inner(x_ref, o_ref):
                pos = pl.program_id(0) * 8 + jax.lax.broadcasted_iota(jnp.int32, (16, 128), 0)
                v = jnp.where(pos < n, x_ref[...], 0.0)
                o_ref[...] = v[0:8] + v[8:16]

            pltpu.emit_pipeline(
                inner, grid=(n // 8,),
                in_specs=[pl.BlockSpec((pl.Element(16, (0, pad_hi)), 128), lambda i: (i * 8, 0))],
                out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

        return in_hbm(kernel, (n, 128))

    x = data((n, 128))
    assert "block=(Element(16, (0, 8)), 128)" in pj.export(summing(8), x)
    pj.assert_verified(summing(8), x)
    # (JAX's interpret mode cannot discharge it; the reference decides)
    r = pj.run(summing(8), x, reference=lambda a: a + jnp.concatenate([a[8:], jnp.zeros((8, 128))]))
    assert r.ok, str(r)
    bad = pj.check(summing(4), x)
    assert [f.rule for f in bad.findings] == ["index-out-of-bounds"], str(bad)


def in_place_increment():
    def kernel(x_hbm, o_hbm):
        def inner(x_blk, o_blk):
            o_blk[...] = x_blk[...] + 1.0

        pltpu.emit_pipeline(inner, grid=(4,),
                            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

    return in_hbm(kernel, (32, 128), input_output_aliases={0: 0})


def test_an_emit_pipeline_on_an_aliased_operand_exports_as_its_dmas_and_loop():
    fn = in_place_increment()
    body = body_lines(pj.export(fn, X))
    # the double buffers and their semaphores are run_scoped allocations, undefined at entry
    assert sum(1 for t in body if t.startswith("scratch ") and ": dma_sem[2]" in t) == 2, body
    assert sum(1 for t in body if t.endswith("[...] = undefined")) == 2, body
    assert any(t.startswith("for t1 in range(4):") for t in body), body
    assert any(".start()" in t for t in body) and any(".wait()" in t for t in body), body
    assert not any(t.startswith("emit_pipeline(") for t in body), body
    pj.assert_verified(fn, X)
    assert pj.run(fn, data(), reference=lambda x: x + 1.0).ok


def test_an_emit_pipeline_over_the_blocks_of_another_exports_as_its_dmas_and_loop():
    def kernel(x_hbm, o_hbm):
        def outer(x_rows, o_rows):
            def inner(x_blk, o_blk):
                o_blk[...] = x_blk[...] * 3.0
            pltpu.emit_pipeline(inner, grid=(2,),
                                in_specs=[pl.BlockSpec((8, 128), lambda k: (0, k))],
                                out_specs=[pl.BlockSpec((8, 128), lambda k: (0, k))],
                                )(x_rows, o_rows)
        pltpu.emit_pipeline(outer, grid=(2,),
                            in_specs=[pl.BlockSpec((8, 256), lambda r: (r, 0))],
                            out_specs=[pl.BlockSpec((8, 256), lambda r: (r, 0))])(x_hbm, o_hbm)

    fn = in_hbm(kernel, (16, 256))

    x = jax.ShapeDtypeStruct((16, 256), jnp.float32)
    body = body_lines(pj.export(fn, x))
    assert not any(t.startswith("emit_pipeline(") for t in body), body
    pj.assert_verified(fn, x)
    assert pj.run(fn, data((16, 256)), reference=lambda a: 3.0 * a).ok


def test_an_emit_pipeline_verifies_and_runs_like_jax():
    fn = doubling(lambda i: (i, 0))
    pj.assert_verified(fn, X)
    r = pj.run(fn, data(), reference=lambda x: 2.0 * x)
    assert r.ok, str(r)


def test_an_inner_index_map_one_block_too_far_is_an_index_out_of_bounds_of_its_spec():
    r = pj.check(doubling(lambda i: (i + 1, 0)), X)
    assert r.exit_code == 1, str(r)
    assert any(f.rule == "index-out-of-bounds" for f in r.findings), str(r)


def test_a_value_read_before_the_pipeline_from_a_ref_its_body_writes_keeps_its_value():
    # h0 is read once, before the pipeline: the nested form would read s again at each
    # inner step (it falls back), and the loop Pallas makes must not inline the read
    def kernel(x_hbm, o_ref, s):
        s[...] = jnp.ones_like(s)
        h0 = s[...]

        def inner(x_blk):
            s[...] += x_blk[...] * h0

        pltpu.emit_pipeline(inner, grid=(2,),
                            in_specs=[pl.BlockSpec((8, 128), lambda k: (0, k))])(x_hbm)
        o_ref[...] = s[...]

    def fn(x):
        return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x)

    x = data((8, 256))
    body = body_lines(pj.export(fn, x))
    assert not any(t.startswith("emit_pipeline(") for t in body), body
    r = pj.run(fn, x, reference=lambda a: 1.0 + a[:, :128] + a[:, 128:])
    assert r.ok, str(r)


def test_an_index_map_reading_an_smem_table_exports_as_its_dmas_and_loop():
    def kernel(idx, x_hbm, o_ref):
        j = idx[0]

        def inner(x_blk):
            o_ref[...] = x_blk[...]

        pltpu.emit_pipeline(inner, grid=(1,),
                            in_specs=[pl.BlockSpec((8, 128), lambda k: (j, k))])(x_hbm)

    def fn(i, x):
        return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                                pl.BlockSpec(memory_space=pl.ANY)],
                              out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(i, x)

    args = (jnp.array([1], jnp.int32), data((16, 128)))
    body = body_lines(pj.export(fn, *args))
    assert not any(t.startswith("emit_pipeline(") for t in body), body
    pj.assert_verified(fn, *args)
    assert pj.run(fn, *args, reference=lambda i, x: x[8:16]).ok


SCRIPT = '''
import jax
import jax.numpy as jnp
import test_emit_pipeline as T

print(T.doubling(lambda i: (i, 0))(jnp.ones((32, 128), jnp.float32))[0, 0])
'''


def test_a_script_with_an_emit_pipeline_runs_on_a_cpu_under_the_cli_and_verifies(tmp_path):
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]),
               PIPECHECK=pj.pipecheck_binary())
    p = subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out", str(tmp_path / "specs"),
                        str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2.0" in p.stdout  # the script's own run, in interpret mode
    assert "verified" in p.stdout, p.stdout


def test_a_lowered_emit_pipeline_over_rows_its_block_does_not_divide_says_both_reasons():
    # two pipelines in one body: no nested form; their lowered DMAs copy the partial last
    # block (72 rows in blocks of 16) with a slice of run-time size, which `.pk` has not
    def kernel(x_hbm, o_hbm):
        def inner(xb, ob):
            ob[...] = xb[...] + 1.0
        for _ in range(2):
            pltpu.emit_pipeline(inner, grid=(5,),
                                in_specs=[pl.BlockSpec((16, 128), lambda t: (t, 0))],
                                out_specs=[pl.BlockSpec((16, 128), lambda t: (t, 0))])(x_hbm, o_hbm)

    fn = in_hbm(kernel, (72, 128))
    x = jax.ShapeDtypeStruct((72, 128), jnp.float32)
    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(fn, x)
    assert "has no nested .pk form, and the DMAs and loop Pallas lowers it to have none " \
        "either" in err.value.message, err.value.message
    assert "partial last block" in err.value.message
    assert err.value.location.endswith(f":{line_of(kernel, 'pltpu.emit_pipeline(')}")
    with pytest.raises(pj.UnsupportedError) as err:
        pj.run(fn, data((72, 128)))
    assert "has no nested .pk form" in err.value.message
