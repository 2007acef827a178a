"""Body forms beyond loads, stores and pl.when: lax.cond with results, lax.switch, masked loads
and stores, pl.run_scoped scratch and debug_print."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj

F32 = jax.ShapeDtypeStruct((32, 128), jnp.float32)


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if needle in text:
            return start + k
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def rows(kernel, grid=4, scratch_shapes=(), semantics=None, out_index=lambda i: (i, 0)):
    def fn(x):
        return pl.pallas_call(
            kernel, grid=(grid,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), out_index),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            scratch_shapes=list(scratch_shapes),
            compiler_params=None if semantics is None else
            pltpu.CompilerParams(dimension_semantics=semantics))(x)
    return fn


def data(shape=(32, 128), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


# --- lax.cond with results and lax.switch ----------------------------------------------------


def cond_and_switch_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    y = jax.lax.cond(i % 2 == 0, lambda x: x * 2.0, lambda x: x - 1.0, x_ref[...])
    z, s = jax.lax.switch(i, [lambda: (x_ref[...] + 1.0, 1),
                              lambda: (jnp.exp(x_ref[...]), 2),
                              lambda: (x_ref[...] * 0.5, i)])
    o_ref[...] = y + z + s


def cond_and_switch_reference(x):
    i = np.arange(32)[:, None] // 8
    y = np.where(i % 2 == 0, x * 2.0, x - 1.0)
    z = np.where(i == 0, x + 1.0, np.where(i == 1, np.exp(x), x * 0.5))
    s = np.where(i == 0, 1, np.where(i == 1, 2, i))
    return y + z + s


def test_cond_with_results_and_switch_export_as_whens_that_rebind_locals():
    fn = rows(cond_and_switch_kernel)
    text = pj.export(fn, F32)
    body = [t.split("  # ")[0].strip() for t in text.splitlines()]
    # the results start as zeros of their type, then each branch binds them
    assert "c2 = cast(broadcast_to(0, (8, 128)), f32)" in body, text
    assert "when (program_id(0) % 2) == 0:" in body and "c2 = v1 * 2.0" in body, text
    assert "when not ((program_id(0) % 2) == 0):" in body and "c2 = v1 - 1.0" in body, text
    # switch: the clamped index, one when per branch
    assert "v5 = min(max(program_id(0), 0), 2)" in body, text
    for k, value in enumerate(("x_ref[...] + 1.0", "exp(x_ref[...])", "x_ref[...] * 0.5")):
        assert f"when v5 == {k}:" in body and f"c3 = {value}" in body, text
    assert "c4 = program_id(0)" in body, text
    assert "o_ref[...] = (c2 + c3) + cast(c4, f32)" in body, text
    pj.assert_verified(fn, F32)


def test_cond_with_results_and_switch_run_like_interpret_and_the_reference():
    r = pj.run(rows(cond_and_switch_kernel), data(), reference=cond_and_switch_reference,
               rtol=1e-5, atol=1e-5)
    assert r.ok, str(r)


def test_a_bug_in_one_branch_of_a_cond_with_results_is_reported_at_that_branch():
    def kernel(x_ref, o_ref, acc_ref):
        i = pl.program_id(0)
        y = jax.lax.cond(i == 0, lambda: x_ref[...],
                         lambda: acc_ref[...] + x_ref[...])  # acc is never written
        o_ref[...] = y

    fn = rows(kernel, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    r = pj.check(fn, F32)
    assert r.exit_code == 1, str(r)
    # grid point 0 takes the other branch: the read is reported from grid point 1 on
    assert any(f.rule in ("uninitialized-read", "uninitialized-accumulator")
               and "grid point (1,)" in f.message
               and f.python[1] == line_of(kernel, "acc_ref[...] +") for f in r.findings), str(r)


def test_a_switch_on_array_data_is_a_located_unsupported_error():
    def kernel(x_ref, o_ref):
        k = (x_ref[0, 0] > 0).astype(jnp.int32)
        o_ref[...] = jax.lax.switch(k, [lambda: x_ref[...], lambda: -x_ref[...], lambda: x_ref[...]])

    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(rows(kernel), F32)
    assert "a switch index computed from array data has no .pk form" in err.value.message
    assert err.value.location.endswith(f":{line_of(kernel, 'jax.lax.switch')}")
