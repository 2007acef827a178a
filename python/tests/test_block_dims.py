"""pl.Element and pl.BoundedSlice block dims export to .pk's Element and BoundedSlice."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import kernels as K
import pipecheck_jax as pj


def test_an_element_halo_exports_as_element_with_its_padding_and_verifies():
    fn, args = K.make_halo()
    text = pj.export(fn, *args)
    assert "in  x_ref: f32[1024]  block=(Element(136, (0, 8)),)  index=(i,) -> (i * 128,)" \
        in text, text
    r = pj.check(fn, *args)
    assert r.verified, str(r)


def test_an_element_halo_runs_like_interpret_and_the_reference():
    fn, args = K.make_halo()
    r = pj.run(fn, *K.concrete(args, seed=3), reference=K.halo_reference(8))
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0


def test_an_unmasked_halo_writes_the_padding_out_and_is_an_uninitialized_read():
    fn, args = K.make_halo(masked=False)
    r = pj.check(fn, *args)
    assert r.exit_code == 1, str(r)
    assert any(f.rule == "uninitialized-read" and f.python is not None
               and f.python[0].endswith("kernels.py") for f in r.findings), str(r)


def test_an_element_stencil_with_low_padding_exports_it_verifies_and_runs_like_the_reference():
    fn, args = K.make_stencil()
    text = pj.export(fn, *args)
    assert "block=(Element(130, (1, 1)),)  index=(i,) -> (i * 128,)" in text, text
    r = pj.check(fn, *args)
    assert r.verified, str(r)
    r = pj.run(fn, *K.concrete(args, seed=5), reference=K.stencil_reference)
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0


def test_a_stencil_that_does_not_mask_its_low_padding_is_an_uninitialized_read():
    fn, args = K.make_stencil(mask_left=False)
    r = pj.check(fn, *args)
    assert r.exit_code == 1, str(r)
    assert any(f.rule == "uninitialized-read" for f in r.findings), str(r)


def test_an_element_window_past_the_padding_is_index_out_of_bounds_at_the_index_map():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 128)]

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(8,),
            in_specs=[pl.BlockSpec((pl.Element(136, (0, 8)),), lambda i: (i * 128 + 16,))],
            out_specs=pl.BlockSpec((128,), lambda i: (i,)),
            out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32))(x)

    r = pj.check(fn, jax.ShapeDtypeStruct((1024,), jnp.float32))
    assert r.exit_code == 1, str(r)
    (f,) = [f for f in r.findings if f.rule == "index-out-of-bounds"]
    assert "Element(136, (0, 8))" in f.message, str(f)
    assert f.python is not None and f.python[0].endswith("test_block_dims.py"), str(f)


def test_an_element_dim_without_padding_is_written_without_it():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(2,),
            in_specs=[pl.BlockSpec((pl.Element(8), 128), lambda i: (i * 8, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)

    args = [jax.ShapeDtypeStruct((16, 128), jnp.float32)]
    text = pj.export(fn, *args)
    assert "block=(Element(8), 128)  index=(i,) -> (i * 8, 0)" in text, text
    pj.assert_verified(fn, *args)
    r = pj.run(fn, *K.concrete(args), reference=lambda x: x)
    assert r.ok, str(r)


# --- pl.BoundedSlice ------------------------------------------------------------------------
# Ragged row groups: group g is rows offs[g]:offs[g + 1] of x (at most 16), read through a
# BoundedSlice(16) window whose start and size come from the prefetched offsets; the kernel
# doubles the group's rows and zeroes the rest of its 16-row output block.

OFFS = np.array([0, 16, 24, 40, 48], np.int32)


def ragged_kernel(masked=True):
    def ragged_double(offs_ref, x_ref, o_ref):
        i = pl.program_id(0)
        size = offs_ref[i + 1] - offs_ref[i]
        rows = jax.lax.broadcasted_iota(jnp.int32, (16, 128), 0)
        y = x_ref[...] * 2.0
        o_ref[...] = jnp.where(rows < size, y, 0.0) if masked else y
    return ragged_double


def bounded_spec():
    return pl.BlockSpec((pl.BoundedSlice(16), 128),
                        lambda i, o: (pl.ds(o[i], o[i + 1] - o[i]), 0))


def make_ragged(masked=True):
    def fn(offs, x):
        return pl.pallas_call(
            ragged_kernel(masked),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(4,), in_specs=[bounded_spec()],
                out_specs=pl.BlockSpec((16, 128), lambda i, o: (i, 0))),
            out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(offs, x)
    return fn


def ragged_reference(offs, x):
    out = np.zeros((64, 128), np.float32)
    for g in range(4):
        lo, hi = int(offs[g]), int(offs[g + 1])
        out[16 * g:16 * g + hi - lo] = 2.0 * np.asarray(x)[lo:hi]
    return out


def emit_pipeline_interpret(kernel):
    """JAX's own run of `kernel` on the same BlockSpecs: Pallas takes BoundedSlice only in
    pltpu.emit_pipeline, which runs in TPU interpret mode on CPU once its tiling lookup knows
    the device (the CPU is described as a v5e, as the export traces it)."""
    from pipecheck_jax._export import tpu_info_on_cpu

    def outer(offs_ref, x_hbm, o_hbm):
        pltpu.emit_pipeline(
            lambda x_ref, o_ref: kernel(offs_ref, x_ref, o_ref), grid=(4,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(16), 128),
                                   lambda i: (pl.ds(offs_ref[i], offs_ref[i + 1] - offs_ref[i]),
                                              0))],
            out_specs=[pl.BlockSpec((16, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

    def run(offs, x):
        with tpu_info_on_cpu():
            return pl.pallas_call(
                outer,
                in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                          pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec(memory_space=pl.ANY),
                out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32),
                interpret=pltpu.InterpretParams())(jnp.asarray(offs), x)
    return run


def test_a_bounded_slice_exports_as_bounded_slice_with_ds_in_its_index_map_and_verifies():
    fn = make_ragged()
    x = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    k, = pj.export_kernels(fn, OFFS, x)
    line = [t for t in k.text.splitlines() if t.lstrip().startswith("in  x_ref")][0]
    assert line.split("  # ")[0].strip() == (
        "in  x_ref: f32[64, 128]  block=(BoundedSlice(16), 128)  index=(i, offs_ref) -> "
        "(ds(offs_ref[i], offs_ref[i + 1] - offs_ref[i]), 0)"), k.text
    r = pj.check(fn, OFFS, x)
    assert r.verified, str(r)


def test_a_bounded_slice_with_a_static_ds_exports_its_constants():
    def fn(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]), grid=(4,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(16), 128), lambda i: (pl.ds(i * 16, 16), 0))],
            out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(x)

    x = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    assert "block=(BoundedSlice(16), 128)  index=(i,) -> (ds(i * 16, 16), 0)" in \
        pj.export(fn, x)
    pj.assert_verified(fn, x)
    r = pj.run(fn, *K.concrete([x]), reference=lambda x: x)
    # JAX's interpret=True refuses a BoundedSlice outside emit_pipeline: only the reference
    assert r.interpret_error is not None and "BoundedSlice" in r.interpret_error, str(r)
    assert r.ok, str(r)


def test_a_bounded_slice_runs_like_jax_emit_pipeline_in_interpret_mode():
    x = K.concrete([jax.ShapeDtypeStruct((64, 128), jnp.float32)], seed=5)[0]
    jax_out = np.asarray(emit_pipeline_interpret(ragged_kernel())(OFFS, x))
    np.testing.assert_allclose(jax_out, ragged_reference(OFFS, x), rtol=1e-6)
    r = pj.run(make_ragged(), OFFS, x, reference=emit_pipeline_interpret(ragged_kernel()))
    assert r.interpret_error is not None, str(r)  # the pallas_call itself: JAX cannot run it
    assert r.ok, str(r)


def test_the_undefined_tail_of_a_bounded_slice_written_out_is_an_uninitialized_read():
    fn = make_ragged(masked=False)
    x = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    r = pj.check(fn, OFFS, x)
    assert r.exit_code == 1, str(r)
    assert any(f.rule == "uninitialized-read" and f.python is not None
               and f.python[0].endswith("test_block_dims.py") for f in r.findings), str(r)


def test_a_bounded_slice_past_the_end_of_its_dim_is_index_out_of_bounds():
    bad = np.array([0, 16, 24, 40, 72], np.int32)  # group 3: rows 40:72 of 64, 32 > 16 rows
    r = pj.check(make_ragged(), bad, jax.ShapeDtypeStruct((64, 128), jnp.float32))
    assert r.exit_code == 1, str(r)
    (f,) = [f for f in r.findings if f.rule == "index-out-of-bounds"]
    assert "BoundedSlice(16)" in f.message, str(f)


def test_a_bounded_slice_output_exports_the_same_way_and_pipecheck_says_what_it_says_of_it():
    def fn(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]), grid=(4,),
            in_specs=[pl.BlockSpec((16, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((pl.BoundedSlice(16), 128), lambda i: (pl.ds(i * 16, 16), 0)),
            out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(x)

    x = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    assert "out o_ref: f32[64, 128]  block=(BoundedSlice(16), 128)  index=(i,) -> " \
        "(ds(i * 16, 16), 0)" in pj.export(fn, x)
    r = pj.check(fn, x)
    refused = "BoundedSlice block dims are supported on inputs only, not on operand 'o_ref'"
    bad = [f for f in r.findings if f.rule == "bad-input"]
    if r.exit_code == 3 and len(bad) == 1 and refused in bad[0].message:
        pytest.skip("this pipecheck takes BoundedSlice on inputs only: " + bad[0].message)
    assert r.verified, str(r)


def test_a_bounded_slice_index_map_that_returns_a_block_index_is_refused_by_jax_itself():
    def fn(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]), grid=(4,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(16), 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(x)

    with pytest.raises(ValueError, match="should be pl.Slice"):
        pj.export(fn, jax.ShapeDtypeStruct((64, 128), jnp.float32))


def test_an_element_block_on_an_aliased_operand_is_unsupported_at_the_call_not_a_bad_pk():
    # An in-place stencil whose input window is pl.Element rows: .pk aliases only blocks
    # that tile the array, so the export says so (exit 2), located at the pallas_call.
    def kernel(x_ref, o_ref):
        xx = x_ref[...]
        o_ref[...] = xx[0:16] + xx[1:17]

    def f(x):
        return pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec((pl.Element(24), pl.Element(128)), lambda i: (i * 16, 0))],
            out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), input_output_aliases={0: 0})(x)

    x = jnp.zeros((72, 128), jnp.float32)
    r = pj.check(f, x)
    assert r.exit_code == 2, r.report()
    assert "pl.Element block dim" in r.report() and "test_block_dims.py" in r.report(), r.report()
    with pytest.raises(pj.UnsupportedError, match="tile the array"):
        pj.export(f, x)


def _grid_free(index_map, compiler_params=None, grid=None):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def f(x):
        extra = {} if grid is None else {"grid": grid}
        return pl.pallas_call(
            kernel, in_specs=[pl.BlockSpec((8, 128), index_map)],
            out_specs=pl.BlockSpec((8, 128), lambda *_: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            compiler_params=compiler_params, **extra)(x)

    return f


def test_a_grid_free_window_off_block_zero_is_refused_on_a_tpu_as_mosaic_refuses_it():
    # Pallas' TPU lowering raises NotImplementedError for a non-trivial window without a
    # grid; the export used to drop the index map and call the kernel verified.
    x = jnp.zeros((16, 128), jnp.float32)
    f = _grid_free(lambda: (1, 0), pltpu.CompilerParams())
    with pytest.raises(pj.UnsupportedError, match="grid-free pallas_call"):
        pj.export(f, x)
    assert pj.check(f, x).exit_code == 2


def test_a_grid_free_index_map_is_exported_so_run_reads_the_block_interpret_reads():
    # No backend named: the index map is kept (as `index=() -> (1, 0)`), not dropped.
    x = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
    f = _grid_free(lambda: (1, 0))
    assert "index=() -> (1, 0)" in pj.export(f, x)
    r = pj.run(f, x, reference=lambda x: x[8:] * 2.0)
    assert r.ok, str(r)
    # the same window with grid=(1,) is legal on a TPU
    assert pj.check(_grid_free(lambda i: (1, 0), pltpu.CompilerParams(), grid=(1,)), x).verified


def test_a_windowed_any_space_operand_is_unsupported_not_exported_as_the_whole_array():
    def kernel(x_hbm, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

    def f(x):
        return pl.pallas_call(
            kernel, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0), memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)

    with pytest.raises(pj.UnsupportedError, match="ANY operand"):
        pj.export(f, jnp.zeros((16, 128), jnp.float32))
