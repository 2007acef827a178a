"""Elementwise math the .pk language has (sin, erf, floor, ...) and opaque ops for the rest."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pipecheck_jax as pj

F32 = jax.ShapeDtypeStruct((16, 128), jnp.float32)


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if needle in text:
            return start + k
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def blocked(kernel, scratch_shapes=(), grid=(2,)):
    def fn(x):
        return pl.pallas_call(
            kernel, grid=grid,
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
            scratch_shapes=list(scratch_shapes))(x)
    return fn


MATH = {
    "sin": (jnp.sin, "sin("),
    "cos": (jnp.cos, "cos("),
    "erf": (jax.lax.erf, "erf("),
    "erfc": (jax.lax.erfc, "erfc("),
    "floor": (jnp.floor, "floor("),
    "ceil": (jnp.ceil, "ceil("),
    "round": (jnp.round, "round("),
    "sign": (jnp.sign, "sign("),
    "sigmoid": (jax.nn.sigmoid, "sigmoid("),
    "expm1": (jnp.expm1, "expm1("),
    "log1p": (lambda x: jnp.log1p(jnp.abs(x)), "log1p(abs("),
    "tan": (lambda x: jnp.tan(x * 0.1), "tan("),
    "asin": (lambda x: jnp.arcsin(x * 0.1), "asin("),
    "acos": (lambda x: jnp.arccos(x * 0.1), "acos("),
    "atan": (jnp.arctan, "atan("),
    "sinh": (lambda x: jnp.sinh(x * 0.1), "sinh("),
    "cosh": (lambda x: jnp.cosh(x * 0.1), "cosh("),
    "asinh": (jnp.arcsinh, "asinh("),
    "acosh": (lambda x: jnp.arccosh(jnp.abs(x) + 1.0), "acosh(abs("),
    "atanh": (lambda x: jnp.arctanh(jnp.tanh(x) * 0.5), "atanh(tanh("),
    "cbrt": (jax.lax.cbrt, "cbrt("),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_elementwise_math_exports_to_its_pk_function_and_runs_like_interpret(name):
    f, pk = MATH[name]

    def kernel(x_ref, o_ref):
        o_ref[...] = f(x_ref[...] * 3.0)

    fn = blocked(kernel)
    text = pj.export(fn, F32)
    assert f"o_ref[...] = {pk}" in text, text
    assert "opaque(" not in text
    pj.assert_verified(fn, F32)
    x = np.random.default_rng(0).standard_normal((16, 128), dtype=np.float32)
    x[0, :8] = [0.5, -0.5, 1.5, 2.5, -2.5, 0.0, -0.0, 1 / 6]  # ties of round, zeros of sign
    r = pj.run(fn, x, reference=lambda x: f(x * 3.0), rtol=2e-6, atol=2e-6)
    assert r.ok, str(r)


def test_exact_gelu_is_erfc_and_runs_like_interpret():
    # jax.nn.gelu(approximate=False) is 0.5 * x * erfc(-x / sqrt(2)).
    def kernel(x_ref, o_ref):
        o_ref[...] = jax.nn.gelu(x_ref[...], approximate=False)

    fn = blocked(kernel)
    text = pj.export(fn, F32)
    assert "erfc(" in text and "opaque(" not in text, text
    pj.assert_verified(fn, F32)
    x = np.random.default_rng(1).standard_normal((16, 128), dtype=np.float32) * 4
    r = pj.run(fn, x, reference=lambda x: jax.nn.gelu(x, approximate=False), rtol=2e-6, atol=2e-6)
    assert r.ok, str(r)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_float_remainder_is_pk_percent_and_runs_like_interpret(dtype):
    # jnp.remainder of floats takes the divisor's sign, as .pk's % does; lax.rem alone (the
    # dividend's sign) stays opaque.
    def kernel(x_ref, o_ref):
        x = x_ref[...].astype(dtype)
        o_ref[...] = (x % 1.75 + jnp.remainder(-x, x * 0.5 - 0.25)).astype(jnp.float32)

    fn = blocked(kernel)
    text = pj.export(fn, F32)
    assert " % 1.75" in text and "opaque(" not in text, text
    x = np.random.default_rng(2).standard_normal((16, 128), dtype=np.float32) * 5
    x[0, :4] = [0.0, -0.0, 3.5, -3.5]  # zero remainders keep their sign
    ref = lambda x: (x.astype(dtype) % 1.75 + jnp.remainder(-x.astype(dtype), x.astype(dtype) * 0.5 - 0.25)).astype(jnp.float32)  # noqa: E731
    r = pj.run(fn, x, reference=ref, rtol=1e-2 if dtype == jnp.bfloat16 else 2e-6, atol=1e-2 if dtype == jnp.bfloat16 else 2e-6)
    assert r.ok, str(r)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_float_floor_division_is_jnps_divmod_exactly_and_runs_bit_for_bit_like_interpret(dtype):
    # jnp's // of floats is CPython's divmod (1.0 // 0.1 is 9.0, inf // 3.0 nan, -1.0 // inf
    # -1.0), not floor(x / y), .pk's float `//` (10.0, inf, -0.0): its steps are exported, each
    # exact (lax.rem as sign(x) * (abs(x) % abs(y)), the rounding away from zero at halves).
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = (x_ref[...].astype(dtype) // y_ref[...].astype(dtype)).astype(jnp.float32)

    def fn(x, y):
        return pl.pallas_call(
            kernel, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x, y)

    text = pj.export(fn, F32, F32)
    assert "opaque(" not in text and " // " not in text, text
    pj.assert_verified(fn, F32, F32)
    # zeros of both signs, halves, infinities, nan, 1.0 // 0.1 (XLA on the CPU flushes
    # subnormals, which the executor does not: none here)
    special = np.float32([0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 0.5, -2.5, 3.0, -3.0, 7.0, 2 / 3,
                          8388607.5, -16777217.0, 1e30, -3e38, np.inf, -np.inf, np.nan, 1.2e-38])
    xs, ys = (a.ravel() for a in np.meshgrid(special, special))
    rng = np.random.default_rng(3)
    n = 16 * 128 - xs.size
    x = np.concatenate([xs, rng.standard_normal(n) * 10.0 ** rng.integers(-3, 8, n)])
    y = np.concatenate([ys, rng.standard_normal(n) * 2])
    x, y = (np.asarray(jnp.asarray(a.reshape(16, 128), dtype).astype(jnp.float32)) for a in (x, y))
    with np.errstate(all="ignore"):
        assert (np.floor(x / y) != x // y).any()  # where .pk's own // would be wrong
    r = pj.run(fn, x, y,
               reference=lambda x, y: (x.astype(dtype) // y.astype(dtype)).astype(jnp.float32))
    assert r.ok, str(r)
    got, want = np.asarray(r.outputs[0]), np.asarray(r.interpret_outputs[0])
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), (x[~same][:4], y[~same][:4], got[~same][:4], want[~same][:4])

    def uninitialized(x_ref, y_ref, o_ref, s_ref):  # the divisor's reads are kept
        o_ref[...] = x_ref[...] // s_ref[...]

    from jax.experimental.pallas import tpu as pltpu

    r = pj.check(lambda x, y: pl.pallas_call(
        uninitialized, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x, y), F32, F32)
    assert r.exit_code == 1, str(r)
    assert {f.python[1] for f in r.findings} == {line_of(uninitialized, "s_ref[...]")}, str(r)


def test_an_op_without_a_pk_form_is_an_opaque_op_that_keeps_its_reads():
    def kernel(x_ref, o_ref):
        o_ref[...] = jax.lax.erf_inv(x_ref[...]) + 1.0

    fn = blocked(kernel)
    text = pj.export(fn, F32)
    assert "o_ref[...] = opaque(x_ref[...], op=erf_inv, shape=(8, 128), dtype=f32) + 1.0" in text, text
    r = pj.check(fn, F32)
    assert r.verified, str(r)
    (k,) = r.kernels
    (prim, py, pk_line), = k.opaque
    assert prim == "erf_inv"
    assert py[1] == line_of(kernel, "lax.erf_inv")
    assert "opaque(" in k.text.splitlines()[pk_line - 1]
    assert r.opaque == {k.name: k.opaque}
    assert f"test_opaque.py:{py[1]}: note: 'erf_inv' has no .pk form: kernel {k.name} keeps it as an " \
        "opaque op" in r.report()


def test_an_opaque_op_feeding_an_uninitialized_accumulator_is_still_reported():
    def kernel(x_ref, o_ref, acc_ref):
        acc_ref[...] += jax.lax.cumprod(x_ref[...], axis=1)  # never initialized
        o_ref[...] = acc_ref[...]

    from jax.experimental.pallas import tpu as pltpu

    fn = blocked(kernel, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    text = pj.export(fn, F32)
    assert "op=cumprod" in text, text
    r = pj.check(fn, F32)
    assert r.exit_code == 1, str(r)
    assert any(f.rule in ("uninitialized-accumulator", "uninitialized-read")
               and f.python[1] == line_of(kernel, "lax.cumprod") for f in r.findings), str(r)


def test_an_op_with_several_results_is_one_opaque_value_per_result():
    def kernel(x_ref, o_ref):
        s, c = jax.lax.sort((x_ref[...] * 2.0, x_ref[...]), num_keys=1)
        o_ref[...] = s + c

    fn = blocked(kernel)
    text = pj.export(fn, F32)
    assert text.count("op=sort") == 2, text
    pj.assert_verified(fn, F32)


def test_run_refuses_a_kernel_with_an_opaque_op():
    def kernel(x_ref, o_ref):
        o_ref[...] = jax.lax.erf_inv(x_ref[...])

    x = np.ones((16, 128), np.float32)
    with pytest.raises(RuntimeError, match="cannot run .*opaque op erf_inv") as e:
        pj.run(blocked(kernel), x)
    # named at its Python line: the exported .pk file is gone once run returns
    assert f"opaque op erf_inv at {__file__}:{line_of(kernel, 'erf_inv')}" in str(e.value), e



CLI_SCRIPT = '''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def erf_inv_kernel(x_ref, o_ref):
    o_ref[...] = jax.lax.erf_inv(x_ref[...])

pl.pallas_call(erf_inv_kernel, grid=(2,),
               in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
               out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
               out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
               interpret=True)(jnp.ones((16, 128), jnp.float32) * 0.5)
'''


def test_the_cli_notes_the_opaque_op_at_its_python_line_and_keeps_sarif_parseable(workdir):
    import json
    import os
    import subprocess
    import sys

    script = os.path.join(workdir, "sinh_script.py")
    with open(script, "w") as f:
        f.write(CLI_SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here), PIPECHECK=pj.pipecheck_binary())

    def cli(*extra):
        return subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out",
                               os.path.join(workdir, "specs"), *extra, script],
                              capture_output=True, text=True, env=env, cwd=workdir)

    p = cli()
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{script}:6: note: 'erf_inv' has no .pk form: kernel erf_inv_kernel keeps it as an opaque op" \
        in p.stdout, p.stdout
    p = cli("--format", "sarif")
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)


def test_a_reduction_without_a_pk_form_is_an_opaque_op_of_its_result_shape():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + jnp.prod(x_ref[...], axis=1)[:, None]

    fn = blocked(kernel)
    text = pj.export(fn, F32)
    assert "op=reduce_prod, shape=(8,), dtype=f32)" in text, text
    pj.assert_verified(fn, F32)
