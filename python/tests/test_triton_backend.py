"""pallas_calls with compiler_params=pltriton.CompilerParams(...) export as `backend = triton`:
every grid point a concurrent program whose stores reach the arrays themselves. A kernel
that is right on Mosaic TPU's sequential axes can race there."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

import pipecheck_jax as pj

M = N = 64
K = 256
BM = BN = 32
BK = 64


def split_k_kernel(a_ref, b_ref, o_ref):
    # TPU style: the k chunks are a grid axis, o initialized at the first and accumulated.
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(a_ref[...], b_ref[...])


def split_k(compiler_params):
    return functools.partial(
        pl.pallas_call, split_k_kernel, grid=(M // BM, N // BN, K // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        compiler_params=compiler_params)()


def k_loop_kernel(a_ref, b_ref, o_ref):
    # Triton style: one program per output block, the k chunks a loop in the body.
    def chunk(c, acc):
        return acc + jnp.dot(a_ref[:, pl.ds(c * BK, BK)], b_ref[pl.ds(c * BK, BK), :])

    o_ref[...] = jax.lax.fori_loop(0, K // BK, chunk, jnp.zeros((BM, BN), jnp.float32))


def k_loop(a, b):
    return pl.pallas_call(
        k_loop_kernel, grid=(M // BM, N // BN),
        in_specs=[pl.BlockSpec((BM, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((K, BN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        compiler_params=pltriton.CompilerParams(num_warps=4))(a, b)


def operands(seed=0):
    key = jax.random.PRNGKey(seed)
    return (jax.random.normal(key, (M, K), jnp.float32),
            jax.random.normal(jax.random.fold_in(key, 1), (K, N), jnp.float32))


def test_a_triton_call_exports_its_backend_and_no_dimension_semantics():
    text = pj.export(k_loop, *operands())
    assert "    backend = triton" in text, text
    assert "dimension_semantics" not in text, text


def test_split_k_in_the_grid_is_a_race_under_triton_and_right_on_mosaic_tpu():
    r = pj.check(lambda a, b: split_k(pltriton.CompilerParams(num_warps=4))(a, b), *operands())
    assert r.verdicts == {"split_k_kernel": "violation"}, r.report()
    # Two programs store one element, and those past k = 0 read o before they store it.
    assert {f.rule for f in r.findings} == {"parallel-write-conflict", "uninitialized-accumulator"}, \
        r.report()
    (f,) = [f for f in r.findings if f.rule == "parallel-write-conflict"]
    assert "concurrent programs" in f.message and "element (0, 0) of 'o_ref'" in f.message, f.message
    tpu = pj.check(lambda a, b: split_k(None)(a, b), *operands())
    assert tpu.verdicts == {"split_k_kernel": "verified"}, tpu.report()


def test_split_k_under_triton_runs_as_triton_may_and_loses_the_racing_stores():
    # interpret=True runs the programs in order and gets the right product; pipecheck runs a
    # Triton kernel with every program launched at once, where the programs past k = 0 read
    # o before the init lands.
    res = pj.run(lambda a, b: split_k(pltriton.CompilerParams(num_warps=4))(a, b),
                 *operands(seed=3), rtol=1e-4, atol=1e-4)
    assert not res.ok and res.pipecheck_exit == 1, res
    assert "as they were at launch" in res.pipecheck_output, res
    ok = pj.run(lambda a, b: split_k(None)(a, b), *operands(seed=3), rtol=1e-4, atol=1e-4)
    assert ok.ok, ok


def test_its_twin_with_the_k_loop_in_the_body_verifies_and_runs_like_interpret():
    pj.assert_verified(k_loop, *operands())
    res = pj.run(k_loop, *operands(seed=3), rtol=1e-4, atol=1e-4)
    assert res.ok, res


def test_the_upstream_gpu_kernels_export_as_triton():
    from upstream import VERIFIED
    for name in ("gpu_softmax", "gpu_layer_norm"):
        fn, args, _ = VERIFIED[name]
        text = pj.export(fn, *args)
        assert text.count("    backend = triton") == text.count("\nkernel "), text


def test_an_atomic_add_is_unsupported_and_says_atomics_are_not_modelled():
    def split_k_atomic_kernel(a_ref, b_ref, o_ref):
        pltriton.atomic_add(o_ref, (slice(None), slice(None)), jnp.dot(a_ref[...], b_ref[...]))

    def f(a, b):
        return pl.pallas_call(
            split_k_atomic_kernel, grid=(M // BM, N // BN, K // BK),
            in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                      pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
            compiler_params=pltriton.CompilerParams(num_warps=4))(a, b)

    r = pj.check(f, *operands())
    assert r.verdicts == {"split_k_atomic_kernel": "unsupported"}, r.report()
    assert "an atomic read-modify-write" in str(r.unsupported[0]), r.report()
