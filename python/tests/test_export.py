"""The export of Pallas kernels to .pk and what pipecheck check says about them."""

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import kernels as K
import pipecheck_jax as pj


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if needle in text:
            return start + k
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def test_the_guides_add_exports_grid_blocks_and_index_maps_and_verifies():
    fn, args = K.make_add()
    text = pj.export(fn, *args)
    assert "kernel add_matrices_kernel:" in text
    assert "grid = (4, 2)" in text
    assert "in  x_ref: f32[1024, 1024]  block=(256, 512)  index=(i, j) -> (i, j)" in text
    assert "out z_ref: f32[1024, 1024]  block=(256, 512)  index=(i, j) -> (i, j)" in text
    assert "z_ref[...] = x_ref[...] + y_ref[...]" in text
    pj.assert_verified(fn, *args)


def test_incorrect_sum_reports_both_bugs_at_the_python_lines():
    fn, args = K.make_incorrect_sum()
    r = pj.check(fn, *args)
    assert r.exit_code == 1
    assert r.verdicts == {"incorrect_sum_kernel": "violation"}
    rules = {f.rule: f for f in r.findings}
    assert set(rules) == {"reduction-not-last-axis", "uninitialized-accumulator"}
    acc = rules["uninitialized-accumulator"]
    assert acc.python == (inspect.getsourcefile(K), line_of(K.incorrect_sum_kernel, "+="))
    assert acc.pk_text.strip() == "o_ref[...] += x_ref[...]"
    # the operand's finding lands on the pallas_call that declares the out spec
    assert rules["reduction-not-last-axis"].python[0] == inspect.getsourcefile(K)


def test_assert_verified_fails_with_the_findings():
    fn, args = K.make_incorrect_sum()
    with pytest.raises(AssertionError) as e:
        pj.assert_verified(fn, *args)
    msg = str(e.value)
    assert "uninitialized-accumulator" in msg and "reduction-not-last-axis" in msg
    assert f"kernels.py:{line_of(K.incorrect_sum_kernel, '+=')}" in msg


def test_correct_sum_exports_when_and_accumulation_and_verifies():
    fn, args = K.make_correct_sum()
    text = pj.export(fn, *args)
    assert "dimension_semantics = (parallel, parallel, arbitrary)" in text
    assert "index=(i, j, k) -> (k, i, j)" in text
    assert "when program_id(2) == 0:" in text
    assert "o_ref[...] += x_ref[...]" in text
    pj.assert_verified(fn, *args)


def test_matmul_with_a_scratch_accumulator_verifies():
    fn, args = K.make_matmul()
    text = pj.export(fn, *args)
    assert "scratch acc_ref: f32[128, 128]" in text
    assert "vmem_limit_bytes = 33554432" in text
    assert "acc_ref[...] += dot(x_ref[...], y_ref[...], preferred_element_type=f32)" in text
    assert "when program_id(2) == 3:" in text
    pj.assert_verified(fn, *args)


def test_causal_flash_attention_forward_verifies():
    fn, args = K.make_flash_fwd()
    text = pj.export(fn, *args)
    assert "for t1 in range(2):" in text
    assert "trans_b=True" in text and "iota((128, 128), 0)" in text
    assert "k_ref[ds(t1 * 128, 128), :]" in text
    pj.assert_verified(fn, *args)


def test_flash_attentions_select_kv_map_is_exported_exactly_and_verifies():
    fn, args = K.make_flash_fwd(select_kv_map=True)
    text = pj.export(fn, *args)
    assert "index=(i, j, k, l) -> (i, j, where((((k + 1) * 128) - 1) > (l * 256), l, 0), 0)" in text
    pj.assert_verified(fn, *args)


def test_a_kernel_with_a_bug_in_flash_attention_is_reported():
    # the kv reduction axis marked parallel: each core has its own m, l and acc
    fn, args = K.make_flash_fwd()
    text = pj.export(fn, *args).replace("(parallel, parallel, parallel, arbitrary)",
                                        "(parallel, parallel, parallel, parallel)")
    assert "parallel-write-conflict" in _check_text(text)


def _check_text(text):
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".pk") as f:
        f.write(text)
        f.flush()
        return subprocess.run([pj.pipecheck_binary(), "check", f.name], capture_output=True,
                              text=True).stdout


def test_pallas_calls_are_found_inside_jit_cond_scan_and_custom_vjp():
    add, args = K.make_add(m=256, n=512)

    def in_cond(x, y):
        return jax.lax.cond(x[0, 0] > 0, add, lambda a, b: a - b, x, y)

    def in_scan(x, y):
        return jax.lax.scan(lambda c, _: (add(c, y), None), x, None, length=2)[0]

    @jax.custom_vjp
    def in_vjp(x, y):
        return add(x, y)

    in_vjp.defvjp(lambda x, y: (add(x, y), None), lambda _, g: (g, g))
    for fn in (jax.jit(add), in_cond, in_scan, in_vjp):
        kernels = pj.export_kernels(fn, *args)
        assert [k.name for k in kernels] == ["add_matrices_kernel"], fn


def test_buffered_pipeline_mode_aliases_and_clamped_index_maps_are_exported():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (jnp.minimum(i, 2), 0),
                                   pipeline_mode=pl.Buffered(3))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (jnp.where(i < 2, i, 3 - i + 2), 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            input_output_aliases={0: 0})(x)

    text = pj.export(fn, jax.ShapeDtypeStruct((32, 128), jnp.float32))
    assert "index=(i,) -> (min(i, 2), 0)  buffered=3" in text
    assert "index=(i,) -> (where(i < 2, i, (3 - i) + 2), 0)" in text
    assert "alias x_ref -> o_ref" in text


def _k_first_sum(revisit):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...]

    mode = pl.Buffered(1, revisit=pl.RevisitMode.ANY) if revisit else pl.Buffered(1)

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(3, 4),
            in_specs=[pl.BlockSpec((None, 128, 128), lambda k, i: (k, i, 0))],
            out_specs=pl.BlockSpec((128, 128), lambda k, i: (i, 0), pipeline_mode=mode),
            out_shape=jax.ShapeDtypeStruct((512, 128), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")))(x)

    return fn


def test_revisit_mode_any_is_exported_and_makes_a_reduction_on_the_first_axis_correct():
    # Mosaic fetches a revisited block again under RevisitMode.ANY: summing
    # over k with k outermost is then right; without it, reduction-not-last-axis.
    x = jax.ShapeDtypeStruct((3, 512, 128), jnp.float32)
    text = pj.export(_k_first_sum(True), x)
    assert "index=(i, j) -> (j, 0)  buffered=1  revisit=any" in text
    assert "1 verified" in _check_text(text)
    plain = pj.export(_k_first_sum(False), x)
    assert "revisit=any" not in plain
    assert "reduction-not-last-axis" in _check_text(plain)


@pytest.mark.parametrize("mode, refusal", [
    (pl.Buffered(3), "Only single \\(1\\) and double \\(2\\) buffering are supported"),
    (pl.Buffered(2, use_lookahead=True), "Lookahead is not supported"),
    (pl.Buffered(2, revisit=pl.RevisitMode.ANY), "RevisitMode.ANY is not supported with double buffering"),
])
def test_a_pipeline_mode_mosaic_tpu_refuses_on_a_pallas_call_is_unsupported(mode, refusal):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0), pipeline_mode=mode)],
            out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((512, 128), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)

    with pytest.raises(pj.UnsupportedError, match="operand 'x_ref': pipeline_mode=.*" + refusal):
        pj.export(fn, jax.ShapeDtypeStruct((512, 128), jnp.float32))


def test_an_index_map_op_without_a_pk_form_is_an_unsupported_diagnostic():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (jax.lax.shift_left(1, i) % 4, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)

    # (a shift by a constant is `* 2**k`; by a grid index it has no form)
    with pytest.raises(pj.UnsupportedError, match="index map of 'x_ref' uses 'shift_left'.*with a constant"):
        pj.export(fn, jax.ShapeDtypeStruct((32, 128), jnp.float32))


def test_a_function_without_pallas_call_is_an_error():
    with pytest.raises(pj.UnsupportedError, match="no pallas_call"):
        pj.export(lambda x: x + 1, jax.ShapeDtypeStruct((8,), jnp.float32))


# jnp.tile ----------------------------------------------------------------------------------


def tile_rows_kernel(b_ref, x_ref, o_ref):
    # A (1, 128) bias row repeated down the block, and an identity tile Pallas code also has
    # (splash attention's tile(x, (1, head_dim // 128)) at head_dim 128).
    o_ref[...] = x_ref[...] + jnp.tile(b_ref[...], (8, 1)) + jnp.tile(x_ref[...], (1, 1))


def make_tile_rows():
    def tile_rows(b, x):
        return pl.pallas_call(
            tile_rows_kernel, grid=(2,),
            in_specs=[pl.BlockSpec((1, 128), lambda i: (0, 0)),
                      pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(b, x)
    return tile_rows


def test_jnp_tile_exports_as_tile_and_runs_like_interpret():
    fn = make_tile_rows()
    b = jnp.arange(128, dtype=jnp.float32).reshape(1, 128)
    x = jnp.linspace(-1, 1, 16 * 128, dtype=jnp.float32).reshape(16, 128)
    text = pj.export(fn, b, x)
    assert "tile(b_ref[...], (8, 1))" in text, text
    assert "tile(x_ref" not in text and "opaque" not in text, text
    r = pj.assert_verified(fn, b, x)
    assert not r.opaque
    res = pj.run(fn, b, x, reference=lambda b, x: 2 * x + b)
    assert res.ok, res


# Outputs the program drops -----------------------------------------------------------------


def scratch_output_kernel(x_ref, acc_ref, o_ref):
    # The scratch idiom of the time before scratch_shapes: acc_ref is an output whose index
    # map is constant, accumulated over the grid and dropped by the caller.
    @pl.when(pl.program_id(0) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...]
    o_ref[...] = acc_ref[...]


def make_scratch_output(acc_index=lambda i: (0, 0), acc_rows=8, keep_acc=False,
                        semantics="arbitrary"):
    def scratch_output(x):
        acc, o = pl.pallas_call(
            scratch_output_kernel, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=[pl.BlockSpec((8, 128), acc_index),
                       pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_shape=[jax.ShapeDtypeStruct((acc_rows, 128), jnp.float32),
                       jax.ShapeDtypeStruct((32, 128), jnp.float32)],
            compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)))(x)
        return (acc, o) if keep_acc else o
    return scratch_output


def test_a_dropped_output_with_a_constant_index_map_is_exported_as_scratch_and_runs():
    fn = make_scratch_output()
    x = jnp.linspace(-1, 1, 32 * 128, dtype=jnp.float32).reshape(32, 128)
    text = pj.export(fn, x)
    assert "scratch acc_ref: f32[8, 128]" in text and "out acc_ref" not in text, text
    pj.assert_verified(fn, x)
    res = pj.run(fn, x, reference=lambda x: jnp.cumsum(x.reshape(4, 8, 128), 0).reshape(32, 128))
    assert res.ok, res


def test_an_output_dropped_by_the_caller_of_a_jit_or_under_vmap_is_scratch_too():
    x = jnp.linspace(-1, 1, 32 * 128, dtype=jnp.float32).reshape(32, 128)
    want = jnp.cumsum(x.reshape(4, 8, 128), 0).reshape(32, 128)
    # The jitted helper returns both results; its caller drops acc.
    helper = jax.jit(make_scratch_output(keep_acc=True))
    caller = jax.jit(lambda x: helper(x)[1])
    assert "scratch acc_ref: f32[8, 128]" in pj.export(caller, x)
    pj.assert_verified(caller, x)
    assert pj.run(caller, x, reference=lambda x: want).ok
    # Returned by the caller too: an output.
    assert "out acc_ref" in pj.export(jax.jit(lambda x: helper(x)), x)
    # Under jax.vmap acc's index map is (b, 0, 0), b the batch axis: one buffer per batch element.
    batched = jax.vmap(make_scratch_output())
    xs = jnp.stack([x, -x])
    text = pj.export(batched, xs)
    assert "scratch acc_ref: f32[8, 128]" in text, text
    pj.assert_verified(batched, xs)
    assert pj.run(batched, xs, reference=lambda xs: jnp.stack([want, -want])).ok
    # The parallel carry stays a finding.
    r = pj.check(jax.vmap(make_scratch_output(semantics="parallel")), xs)
    assert "parallel-write-conflict" in {f.rule for f in r.findings}, r.report()


def test_a_pallas_call_runs_inside_jax_checkpoint_and_a_shard_map_over_one_device():
    from jax.sharding import Mesh, PartitionSpec as P
    x = jnp.linspace(-1, 1, 32 * 128, dtype=jnp.float32).reshape(32, 128)
    want = jnp.cumsum(x.reshape(4, 8, 128), 0).reshape(32, 128)
    assert pj.run(jax.checkpoint(make_scratch_output()), x, reference=lambda x: want).ok
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    sharded = jax.shard_map(make_scratch_output(), mesh=mesh, in_specs=P(), out_specs=P(),
                            check_vma=False)
    assert pj.run(jax.jit(sharded), x, reference=lambda x: want).ok


def test_a_dropped_output_used_as_scratch_on_a_parallel_axis_is_reported():
    # Each core of a megacore split has its own copy of the block: the carry is lost.
    r = pj.check(make_scratch_output(semantics="parallel"), jnp.zeros((32, 128)))
    assert r.verdicts == {"scratch_output_kernel": "violation"}, r.report()
    assert "parallel-write-conflict" in {f.rule for f in r.findings}, r.report()


def test_a_core_parallel_axis_is_checked_as_a_parallel_one():
    # pltpu.CORE_PARALLEL splits the axis across cores: the same carry is lost.
    r = pj.check(make_scratch_output(semantics=pltpu.CORE_PARALLEL), jnp.zeros((32, 128)))
    assert r.verdicts == {"scratch_output_kernel": "violation"}, r.report()
    assert "parallel-write-conflict" in {f.rule for f in r.findings}, r.report()
    text = pj.export(make_scratch_output(acc_index=lambda i: (i, 0), acc_rows=32, keep_acc=True,
                                         semantics=pltpu.CORE_PARALLEL), jnp.zeros((32, 128)))
    assert "dimension_semantics = (parallel,)" in text, text


def test_an_output_the_program_returns_stays_an_output_even_with_a_constant_index_map():
    fn = make_scratch_output(keep_acc=True)
    text = pj.export(fn, jnp.zeros((32, 128)))
    assert "out acc_ref: f32[8, 128]" in text and "scratch acc_ref" not in text, text


def test_a_dropped_output_whose_index_map_moves_stays_an_output():
    # Its blocks are written back between visits: not the scratch idiom, so not exported as one
    # (here each block holds the running sum of one step, and the rules check it as an output).
    fn = make_scratch_output(acc_index=lambda i: (i, 0), acc_rows=32)
    text = pj.export(fn, jnp.zeros((32, 128)))
    assert "out acc_ref: f32[32, 128]" in text and "scratch acc_ref" not in text, text


def int_div_rem_kernel(x_ref, o_ref):
    # lax.div truncates and lax.rem takes the dividend's sign, on negative values too.
    a = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1) - 64
    o_ref[...] = x_ref[...] + (jax.lax.div(a, 3) * 1000 + jax.lax.rem(a, 3)).astype(jnp.float32)


def test_integer_div_and_rem_on_arrays_export_exactly_and_run_like_interpret():
    fn = lambda x: pl.pallas_call(int_div_rem_kernel, grid=(1,),
                                  in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                                  out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                                  out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    x = jnp.zeros((8, 128), jnp.float32)
    r = pj.assert_verified(fn, x)
    assert not r.opaque, r.report()
    a = jnp.arange(128, dtype=jnp.int32) - 64
    want = jnp.broadcast_to((jax.lax.div(a, 3) * 1000 + jax.lax.rem(a, 3)).astype(jnp.float32),
                            (8, 128))
    res = pj.run(fn, x, reference=lambda x: want)
    assert res.ok, res


def test_jnp_floor_division_of_grid_indices_exports_as_floor_division_and_runs_like_interpret():
    # A flattened grid decoded in levels with Python's // and %: jnp's floor_divide and
    # remainder are .pk's // and %, not lax.div/rem with sign corrections, which nested
    # once per level into kilobyte index maps that the checker took a gigabyte on.
    def kernel(x_ref, o_ref):
        p = pl.program_id(0)
        o_ref[...] = x_ref[...] + ((p // 4) // 2 * 100 + (p // 4) % 2 * 10 + p % 4).astype(jnp.float32)

    def dec(p):
        return (p // 4) // 2, (p // 4) % 2

    fn = lambda x: pl.pallas_call(
        kernel, grid=(16,),
        in_specs=[pl.BlockSpec((8, 128), lambda p: dec(p))],
        out_specs=pl.BlockSpec((8, 128), lambda p: dec(p)),
        out_shape=jax.ShapeDtypeStruct((16, 256), jnp.float32))(x)
    x = jnp.zeros((16, 256), jnp.float32)
    text = pj.export(fn, x)
    assert "index=(i,) -> ((i // 4) // 2, (i // 4) % 2)" in text, text
    assert "sign" not in text and "where" not in text, text
    # the output block is revisited at consecutive steps (p % 4), each rewriting it: the last wins
    want = jnp.repeat(jnp.repeat(jnp.array([[3, 13], [103, 113]], jnp.float32), 8, 0), 128, 1)
    res = pj.run(fn, x, reference=lambda x: want)
    assert res.ok, res


def test_an_export_bug_is_an_unsupported_internal_error_never_a_crash_or_a_pass(monkeypatch):
    import pipecheck_jax._export as export

    def boom(*a, **k):
        raise KeyError("a construct the export did not expect")

    monkeypatch.setattr(export, "_export_call", boom)
    fn, args = K.make_add()
    r = pj.check(fn, *args)
    assert r.exit_code == 2 and not r.verified, r.report()
    (u,) = r.unsupported
    assert "internal error of the export (KeyError" in str(u), str(u)


def test_a_body_slice_of_run_time_size_is_unsupported_at_its_line():
    from jax.experimental.pallas import tpu as pltpu

    def kernel(n_ref, x_hbm, o_ref, buf, sem):
        n = n_ref[0]
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, n)], buf.at[pl.ds(0, n)], sem).start()
        o_ref[...] = jnp.zeros_like(o_ref)

    def fn(n, x):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pl.ANY)],
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA(())])(n, x)

    r = pj.check(fn, jnp.array([4], jnp.int32), jnp.zeros((8, 128), jnp.float32))
    assert r.exit_code == 2, r.report()
    assert any("whose size is computed at run time" in str(u) for u in r.unsupported), r.report()


def test_a_grid_with_an_extent_of_0_or_an_empty_operand_is_unsupported_not_bad_input():
    # Pallas runs no grid point of grid (0, 2) (pl.cdiv(0, 8) rows); .pk has no empty grid or
    # array, so the kernel is unknown, never a crash of the checker (exit 3).
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def f(x, grid):
        return pl.pallas_call(kernel, grid=grid, in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                              out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)

    r = pj.check(lambda x: f(x, (0,)), jax.ShapeDtypeStruct((16, 128), jnp.float32))
    assert r.exit_code == 2 and "extent of 0" in str(r), str(r)
    r = pj.check(lambda x: f(x, (1,)), jax.ShapeDtypeStruct((0, 128), jnp.float32))
    assert r.exit_code == 2 and "is empty" in str(r), str(r)


def vjp_square_call(kernel, *args):
    return pl.pallas_call(
        kernel, grid=(2, 2), in_specs=[pl.BlockSpec((64, 128), lambda i, j: (i, j))] * len(args),
        out_specs=pl.BlockSpec((64, 128), lambda i, j: (i, 0)),  # the backward's bug: j dropped
        out_shape=jax.ShapeDtypeStruct(args[0].shape, args[0].dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")))(*args)


def vjp_square_bwd_kernel(x_ref, g_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...] * g_ref[...]


def test_a_custom_vjp_backward_kernel_is_placed_at_its_own_lines_not_the_jax_grad_call():
    # JAX traces the backward rule under the custom_vjp call's traceback: every equation of
    # the backward kernel carries the jax.grad line.
    def square_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * x_ref[...]

    @jax.custom_vjp
    def square(x):
        return vjp_square_call(square_kernel, x)

    square.defvjp(lambda x: (vjp_square_call(square_kernel, x), x),
                  lambda x, g: (vjp_square_call(vjp_square_bwd_kernel, x, g),))
    grad = jax.jit(jax.grad(lambda x: jnp.sum(square(x))))
    grad_line = inspect.currentframe().f_lineno - 1
    r = pj.check(grad, jnp.zeros((128, 256), jnp.float32))
    bwd = [f for f in r.findings if f.kernel == "vjp_square_bwd_kernel"]
    assert bwd, r.report()
    out_specs_line = inspect.getsourcelines(vjp_square_call)[1] + 3
    assert {f.python[1] for f in bwd} == {out_specs_line}, r.report()
    assert grad_line not in {f.python[1] for f in r.findings}, r.report()


def helper_matmul(x, y, semantics):
    return pl.pallas_call(
        functools.partial(K.matmul_kernel, nsteps=2), grid=(2, 2, 2),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((256, 256), x.dtype),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics))(x, y)


def test_a_finding_in_one_of_several_calls_a_helper_makes_names_the_caller_line():
    def chain(x, y, z):
        a = helper_matmul(x, y, ("parallel", "parallel", "arbitrary"))
        return helper_matmul(a, z, ("parallel", "parallel", "parallel"))  # the reduction split
    buggy_line = inspect.currentframe().f_lineno - 1
    x = jnp.zeros((256, 256), jnp.float32)
    r = pj.check(jax.jit(chain), x, x, x)
    assert r.findings, r.report()
    for f in r.findings:
        callers = [py for msg, py, _ in f.notes if msg.startswith("in the pallas_call made through")]
        assert callers and callers[0][1] == buggy_line, f


def test_integer_div_and_rem_by_zero_in_arrays_run_as_xla_computes_them():
    # XLA: x / 0 is -1 and x rem 0 is x; jnp's // by zero is -2 (0 // 0: -1), its % 0.
    def kernel(a_ref, b_ref, o_ref):
        a, b = a_ref[...], b_ref[...]
        o_ref[...] = (jax.lax.div(a, b) * 1000 + jax.lax.rem(a, b) * 100 + (a // b) * 10
                      + a % b)

    fn = lambda a, b: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape, jnp.int32))(a, b)
    a = jnp.arange(-512, 512, dtype=jnp.int32).reshape(8, 128)
    b = (jnp.arange(1024, dtype=jnp.int32).reshape(8, 128) % 5) - 2  # a zero every fifth
    res = pj.run(fn, a, b)
    assert res.ok, res


def one_block_too_far():
    """A BlockSpec built away from the pallas_call that uses it, its index map one block
    too far."""
    return pl.BlockSpec((8, 128), lambda i: (i + 1, 0))


def add_with(y_spec):
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    return lambda x, y: pl.pallas_call(
        add_kernel, grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)),
                  y_spec],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x, y)


def test_an_index_map_finding_points_at_the_operands_blockspec_wherever_it_is_built():
    # With or without scalar prefetch, an operand's line is its index_map's: the lambda in
    # its BlockSpec, in the in_specs list or in a helper, not the pallas_call line.
    x = jax.ShapeDtypeStruct((32, 128), jnp.float32)
    pj.assert_verified(add_with(pl.BlockSpec((8, 128), lambda i: (i, 0))), x, x)
    inline = pl.BlockSpec((8, 128), lambda i: (i + 1, 0))
    inline_line = inspect.currentframe().f_lineno - 1
    for spec, line in [(inline, inline_line),
                       (one_block_too_far(), line_of(one_block_too_far, "lambda i"))]:
        r = pj.check(add_with(spec), x, x)
        (f,) = r.findings
        assert f.rule == "index-out-of-bounds" and "'y_ref'" in f.message, r
        assert f.python == (__file__, line), r
        assert f.python[1] != line_of(add_with, "pl.pallas_call("), r
