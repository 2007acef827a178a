"""Everyday value operations of kernel bodies that have `.pk` forms: concatenate, roll
(jnp and pltpu, strided too), flip, argmax/argmin, cumsum/cummax/cummin, the integer
shifts and xor. Each kernel is checked and run by pipecheck, and its outputs must equal JAX's
interpret=True and a jnp reference: the executor computes what JAX computes."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj

R, C = 16, 128  # one block
G = 4  # grid steps, each its own rows


def rowwise(body, out_dtype=None, out_cols=C, in_dtype=jnp.float32, n_in=1):
    """A pallas_call over G row blocks of (R, C) inputs applying `body` to the loaded
    blocks (and the program id): the kernel under test."""
    def kernel(*refs):
        *ins, o_ref = refs
        o_ref[...] = body(*[r[...] for r in ins], pl.program_id(0))

    def f(*xs):
        return pl.pallas_call(
            kernel, grid=(G,),
            in_specs=[pl.BlockSpec((R, C), lambda i: (i, 0))] * n_in,
            out_specs=pl.BlockSpec((R, out_cols), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((G * R, out_cols), out_dtype or in_dtype),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(*xs)
    return f


def per_block(body, n_in=1):
    """The reference: body applied to each (R, C) row block, as the kernel does."""
    def ref(*xs):
        return jnp.concatenate([body(*[x[i * R:(i + 1) * R] for x in xs], i) for i in range(G)])
    return ref


def data(dtype=jnp.float32, seed=0, n=1):
    key = jax.random.key(seed)
    out = []
    for k in range(n):
        kk = jax.random.fold_in(key, k)
        if jnp.issubdtype(dtype, jnp.integer):
            out.append(jax.random.randint(kk, (G * R, C), -1000, 1000).astype(dtype))
        else:  # small integers as floats: ties for argmax, exact sums
            out.append(jax.random.randint(kk, (G * R, C), -8, 8).astype(dtype))
    return out


BODIES = {
    "concatenate_lanes": (lambda x, y, i: jnp.concatenate([x[:, :64], y[:, 64:]], axis=1), 2, {}),
    "concatenate_rows": (lambda x, y, i: jnp.concatenate([y[8:], x[:8]], axis=0), 2, {}),
    "stack_halves": (lambda x, y, i: jnp.stack([x[:, :64], y[:, 64:]], axis=1).reshape(R, C),
                     2, {}),
    "jnp_roll": (lambda x, i: jnp.roll(x, 3, axis=1), 1, {}),
    "pltpu_roll": (lambda x, i: pltpu.roll(x, 5, 1), 1, {}),
    "pltpu_roll_by_program_id": (lambda x, i: pltpu.roll(x, i + 1, 0), 1, {}),
    "pltpu_roll_strided": (lambda x, i: pltpu.roll(x, 1, 1, stride=2, stride_axis=0), 1, {}),
    "flip_rows": (lambda x, i: jnp.flip(x, axis=0), 1, {}),
    "flip_both": (lambda x, i: jnp.flip(x), 1, {}),
    "argmax_lanes": (lambda x, i: jnp.broadcast_to(
        jnp.argmax(x, axis=1)[:, None], (R, C)), 1, dict(out_dtype=jnp.int32)),
    "argmin_rows": (lambda x, i: jnp.broadcast_to(
        jnp.argmin(x, axis=0)[None, :], (R, C)), 1, dict(out_dtype=jnp.int32)),
    "cumsum_lanes": (lambda x, i: jnp.cumsum(x, axis=1), 1, {}),
    "cumsum_rows_reversed": (lambda x, i: jax.lax.cumsum(x, axis=0, reverse=True), 1, {}),
    "cummax_lanes": (lambda x, i: jax.lax.cummax(x, axis=1), 1, {}),
    "cummin_rows": (lambda x, i: jax.lax.cummin(x, axis=0), 1, {}),
    # (x + 16.5 is exact in bf16 too: approx=True reads x rounded to bf16, as interpret mode)
    "reciprocal": (lambda x, i: pl.reciprocal(x + 16.5), 1, {}),
    "reciprocal_approx": (lambda x, i: pl.reciprocal(x + 16.5, approx=True), 1, {}),
    # jnp.var carries a NaN literal (its empty-count guard); so does a where with jnp.nan
    "layer_norm_var": (lambda x, i: (x - x.mean(1, keepdims=True))
                       * jax.lax.rsqrt(jnp.var(x, axis=1, keepdims=True) + 1e-5), 1, {}),
    "where_nan": (lambda x, i: jnp.where(x > 0, x, jnp.nan), 1, {}),
}

# pltpu.roll and pl.reciprocal run only inside a kernel: their references are jnp's
ROLL_REFERENCES = {
    "reciprocal": lambda x, i: 1.0 / (x + 16.5),
    "reciprocal_approx": lambda x, i: 1.0 / (x + 16.5),
    "pltpu_roll": lambda x, i: jnp.roll(x, 5, 1),
    "pltpu_roll_by_program_id": lambda x, i: jnp.roll(x, i + 1, 0),
    "pltpu_roll_strided": lambda x, i: jnp.stack([jnp.roll(x[r], 1 + 2 * r) for r in range(R)]),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_value_operation_verifies_and_runs_equal_to_interpret_mode_and_a_reference(name):
    body, n_in, kw = BODIES[name]
    f = rowwise(body, n_in=n_in, **kw)
    xs = data(n=n_in)
    assert "opaque(" not in pj.export(f, *xs)
    r = pj.check(f, *xs)
    assert r.exit_code == 0, r
    run = pj.run(f, *xs, reference=per_block(ROLL_REFERENCES.get(name, body), n_in))
    assert run.ok, run


def test_a_bf16_reciprocal_exports_as_a_division_and_runs_equal_to_interpret_mode():
    f = rowwise(lambda x, i: pl.reciprocal(x + 16.5), in_dtype=jnp.bfloat16)
    (x,) = data(jnp.bfloat16)
    text = pj.export(f, x)
    assert "opaque(" not in text and "1.0 / " in text, text
    assert pj.check(f, x).exit_code == 0
    run = pj.run(f, x, reference=per_block(lambda x, i: 1.0 / (x + 16.5)), rtol=1e-2)
    assert run.ok, run


SHIFTS = {
    "nibbles": lambda x, i: (x >> 4) & 15,
    "shift_left": lambda x, i: x << 3,
    "logical_right_of_negatives": lambda x, i: jax.lax.shift_right_logical(x, jnp.int32(7)),
    "by_row_amounts": lambda x, i: jax.lax.shift_right_arithmetic(
        x, jax.lax.broadcasted_iota(jnp.int32, (R, C), 0) * 3),  # 0..45: past 31 too
    "left_past_the_width": lambda x, i: jax.lax.shift_left(x, jnp.int32(40)),
    # A hash step of a counter-based PRNG (xorshift): xor with shifted copies.
    "xorshift": lambda x, i: (lambda y: y ^ jax.lax.shift_right_logical(y, jnp.int32(17)))(
        x ^ (x << 13)),
    "xor_of_masks": lambda x, i: jnp.where((x > 0) ^ (x % 3 == 0), x, -x),
}


@pytest.mark.parametrize("name", sorted(SHIFTS))
def test_integer_shifts_run_equal_to_interpret_mode_and_a_reference(name):
    body = SHIFTS[name]
    f = rowwise(body, in_dtype=jnp.int32)
    (x,) = data(jnp.int32)
    text = pj.export(f, x)
    assert "opaque(" not in text and ("shift_" in text or "~" in text), text
    assert pj.check(f, x).exit_code == 0
    run = pj.run(f, x, reference=per_block(body))
    assert run.ok, run


def test_int8_dequantization_by_shifts_and_scales_runs_equal_to_a_reference():
    # Two int4 values packed per int8 byte, unpacked with shifts, then scaled.
    def body(q, i):
        q = q.astype(jnp.int32)
        lo = jax.lax.shift_right_arithmetic(jax.lax.shift_left(q, 28), 28)
        hi = jax.lax.shift_right_arithmetic(q, 4)
        return (jnp.concatenate([lo[:, :64], hi[:, :64]], axis=1).astype(jnp.float32) * 0.5)

    f = rowwise(body, out_dtype=jnp.float32, in_dtype=jnp.int8)
    q = jax.random.randint(jax.random.key(3), (G * R, C), -128, 128).astype(jnp.int8)
    assert pj.check(f, q).exit_code == 0
    run = pj.run(f, q, reference=per_block(body))
    assert run.ok, run


def ragged_rows(kernel, out_block=(16, C), out_rows=60):
    """kernel over a (60, C) array in blocks of 16 rows: rows 12..15 of the last block are
    padding."""
    return lambda x: pl.pallas_call(
        kernel, grid=(4,), in_specs=[pl.BlockSpec((16, C), lambda i: (i, 0))],
        out_specs=pl.BlockSpec(out_block, lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((out_rows, C), jnp.float32))(x)


def test_a_roll_that_brings_a_ragged_tails_padding_into_the_stored_rows_is_reported():
    # 60 rows in blocks of 16: the last block's rows 12..15 are padding. Rolled down by 4
    # rows, they land on rows 0..3 of that block, which are stored into rows 48..51 of the
    # output: undefined values written out. Without the roll, verified.
    def call(roll):
        def kernel(x_ref, o_ref):
            x = x_ref[...]
            o_ref[...] = pltpu.roll(x, 4, 0) if roll else x

        return ragged_rows(kernel)

    x = jax.ShapeDtypeStruct((60, C), jnp.float32)
    assert pj.check(call(False), x).exit_code == 0
    r = pj.check(call(True), x)
    assert r.exit_code == 1 and {f.rule for f in r.findings} == {"uninitialized-read"}, r


def test_flipping_a_masked_tail_keeps_the_padding_where_the_mask_put_zeros():
    # A ragged reduction written as a flip of the masked block: the flip moves the zeros,
    # not the padding, so this verifies; flipping before the mask is reported.
    def call(mask_first):
        def kernel(x_ref, o_ref):
            rows = jax.lax.broadcasted_iota(jnp.int32, (16, C), 0) + pl.program_id(0) * 16
            x = x_ref[...]
            if mask_first:
                y = jnp.flip(jnp.where(rows < 60, x, 0.0), axis=0)
            else:
                y = jnp.where(rows < 60, jnp.flip(x, axis=0), 0.0)
            o_ref[...] = jnp.sum(y, axis=0, keepdims=True)

        return ragged_rows(kernel, out_block=(1, C), out_rows=4)

    x = jax.ShapeDtypeStruct((60, C), jnp.float32)
    assert pj.check(call(True), x).exit_code == 0
    r = pj.check(call(False), x)
    assert r.exit_code == 1 and "uninitialized-read" in {f.rule for f in r.findings}, r


@pytest.mark.parametrize("op", ["concatenate", "argmax", "cumsum"])
def test_the_value_operations_type_check_their_operands(op, tmp_path):
    body = {"concatenate": "v = concatenate(x[...], x[0:8, :], axis=1)",
            "argmax": "v = argmax(x[...], axis=2)",
            "cumsum": "v = cumsum(x[...], axis=1, reverse=1)"}[op]
    why = {"concatenate": "equal extents except along axis 1",
           "argmax": "axis 2 is out of range", "cumsum": "reverse takes True or False"}[op]
    pk = tmp_path / "k.pk"
    pk.write_text(f"""kernel k:
    grid = (2,)
    in  x: f32[32, 128]  block=(16, 128)  index=(i) -> (i, 0)
    out o: f32[32, 128]  block=(16, 128)  index=(i) -> (i, 0)
    body:
        {body}
        o[...] = x[...]
""")
    import subprocess
    p = subprocess.run([pj.pipecheck_binary(), "check", str(pk)], capture_output=True, text=True)
    assert p.returncode == 3, p
    assert why in p.stdout + p.stderr and ":6:" in p.stdout + p.stderr, p


def test_shifts_match_lax_on_every_amount_and_sign():
    # The executor's shifts against lax's on all amounts -2..40 and i32 values of both
    # signs, the extremes among them.
    amounts = jnp.arange(-2, 41, dtype=jnp.int32)
    # (not -2**31: the executor's poison for an i32 element nothing wrote, as interpret
    # mode's iinfo.min is)
    vals = jnp.array([-2**31 + 1, -123456, -1, 0, 1, 7, 123456, 2**31 - 1], jnp.int32)
    x = jnp.broadcast_to(jnp.tile(vals, 16)[:C], (G * R, C))
    n = jnp.broadcast_to(jnp.resize(amounts, (G * R, 1)), (G * R, C))
    for op in (jax.lax.shift_left, jax.lax.shift_right_logical, jax.lax.shift_right_arithmetic):
        # a result of exactly -2**31 (1 << 31, say) is kept out of the outputs: pipecheck's
        # run takes that i32 for its poison (known; see the test's values above)
        body = functools.partial(
            lambda op, x, n, i: jnp.where(op(x, n) == -2**31, 0, op(x, n)), op)
        f = rowwise(body, in_dtype=jnp.int32, n_in=2)
        run = pj.run(f, x, n, reference=per_block(body, 2))
        assert run.ok, (op, run)


def test_padding_moves_with_a_roll_so_a_mask_on_the_rolled_lanes_keeps_it_out():
    # 100 of 128 lanes are data: lanes 100..127 of the block are padding. Rolled by 28
    # they are lanes 0..27, which the mask drops before the lanes are summed: verified.
    # The mask on the unrolled lanes (< 100) lets the rolled padding through.
    def call(first_data_lane, keep_above):
        def kernel(x_ref, o_ref):
            lanes = jax.lax.broadcasted_iota(jnp.int32, (8, C), 1)
            y = pltpu.roll(x_ref[...], 28, 1)
            keep = lanes >= first_data_lane if keep_above else lanes < first_data_lane
            o_ref[...] = jnp.sum(jnp.where(keep, y, 0.0), axis=1, keepdims=True)

        return lambda x: pl.pallas_call(
            kernel, grid=(2,), in_specs=[pl.BlockSpec((8, C), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 1), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 1), jnp.float32))(x)

    x = jax.ShapeDtypeStruct((16, 100), jnp.float32)
    r = pj.check(call(28, True), x)
    assert r.exit_code == 0, r
    r = pj.check(call(100, False), x)
    assert r.exit_code == 1 and "uninitialized-read" in {f.rule for f in r.findings}, r
    xs = jax.random.normal(jax.random.key(0), (16, 100), jnp.float32)
    run = pj.run(call(28, True), xs, reference=lambda x: jnp.sum(x, 1, keepdims=True),
                 rtol=1e-4, atol=1e-4)
    assert run.ok, run


def test_integer_division_and_remainder_truncate_as_lax_at_the_dtypes_minimum():
    # lax.div truncates towards zero and lax.rem takes the dividend's sign; -128 // 16 on
    # int8 (an int4 unpack's high nibble) is -8. Tensors and grid-point scalars both.
    vals = jnp.array([-128, -127, -17, -16, -15, -1, 0, 1, 15, 16, 17, 127], jnp.int8)
    x = jnp.broadcast_to(jnp.resize(vals, (C,)), (G * R, C))
    d = jnp.broadcast_to(jnp.resize(jnp.array([16, -16, 3, -3, 7], jnp.int8), (R * G, 1)),
                         (G * R, C))

    def body(x, d, i):
        k = jnp.int32(i) - 2  # a grid-point scalar of both signs
        s = jax.lax.div(k * 7, jnp.int32(-2)) + jax.lax.rem(k * 7, jnp.int32(4))
        return (jax.lax.div(x, d) * 2 + jax.lax.rem(x, d) + x // 16).astype(jnp.int32) + s

    f = rowwise(body, out_dtype=jnp.int32, in_dtype=jnp.int8, n_in=2)
    run = pj.run(f, x, d, reference=per_block(body, 2))
    assert run.ok, run


def test_autodiffs_add_any_in_a_body_or_a_jvpd_kernel_exports_as_an_add_that_runs():
    def dact_kernel(x_ref, o_ref):
        # d/dv (v * tanh(v)) has two terms, which jax.grad sums with add_any
        o_ref[...] = jax.vmap(jax.vmap(jax.grad(lambda v: v * jnp.tanh(v))))(x_ref[...])

    def square_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * x_ref[...]

    def call(kernel, x):
        spec = pl.BlockSpec((64, 128), lambda i: (i, 0))
        return pl.pallas_call(kernel, grid=(2,), in_specs=[spec], out_specs=spec,
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = jax.random.normal(jax.random.PRNGKey(0), (128, 128), jnp.float32)
    text = pj.export(functools.partial(call, dact_kernel), x)
    assert "add_any" not in text, text
    r = pj.run(functools.partial(call, dact_kernel), x,
               reference=lambda x: jnp.tanh(x) + x * (1 - jnp.tanh(x) ** 2))
    assert r.ok, r
    # jax.jvp of a pallas_call makes a kernel that sums the two tangent products
    jvp = jax.jit(lambda x, t: jax.jvp(functools.partial(call, square_kernel), (x,), (t,)))
    assert "add_any" not in pj.export(jvp, x, x)
    r = pj.run(jvp, x, x, reference=lambda x, t: (x * x, 2 * x * t))
    assert r.ok, r
