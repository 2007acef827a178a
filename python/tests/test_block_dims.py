"""pl.Element block dims export to .pk's Element; pl.BoundedSlice is a located UnsupportedError."""

import inspect

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

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


def test_a_bounded_slice_block_dim_is_a_located_unsupported_error_naming_it():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(16), 128),
                                   lambda i: (pl.ds(i * 16, 16), 0))],
            out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(x)

    call_line = inspect.getsourcelines(fn)[1] + 1
    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(fn, jax.ShapeDtypeStruct((64, 128), jnp.float32))
    assert "operand 'x_ref': block dim pl.BoundedSlice(16) has no .pk form" in err.value.message
    assert err.value.location == f"{__file__}:{call_line}", err.value.location
