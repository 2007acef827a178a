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


def ragged_block_call(kernel, n=1000, bs=256):
    """A BlockSpec block of bs over n elements: the last program's block passes the array."""
    spec = pl.BlockSpec((bs,), lambda i: (i,))
    return lambda x: pl.pallas_call(
        kernel, grid=(pl.cdiv(n, bs),), in_specs=[spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
        compiler_params=pltriton.CompilerParams(num_warps=4))(x)


def _tail_mask(bs=256, n=1000):
    return pl.program_id(0) * bs + jnp.arange(bs) < n


def unmasked_load_kernel(x_ref, o_ref):
    # The load has no mask: the last program reads x[1000:1024], past the array (Pallas'
    # Triton lowering masks nothing itself); the masked store keeps those lanes out.
    pltriton.store(o_ref, pltriton.load(x_ref) * 2.0, mask=_tail_mask())


def where_after_load_kernel(x_ref, o_ref):
    # jnp.where after a whole load drops the lanes, but the load has read them already.
    m = _tail_mask()
    pltriton.store(o_ref, jnp.where(m, pltriton.load(x_ref), 0.0), mask=m)


def masked_load_kernel(x_ref, o_ref):
    m = _tail_mask()
    pltriton.store(o_ref, pltriton.load(x_ref, mask=m, other=0.0) * 2.0, mask=m)


def test_an_unmasked_load_of_a_ragged_block_reads_past_the_array_in_check_and_run():
    x = jnp.arange(1000.0)
    for kernel in (unmasked_load_kernel, where_after_load_kernel):
        res = pj.check(ragged_block_call(kernel), x)
        assert res.exit_code == 1, str(res)
        assert "index-out-of-bounds" in str(res) and "element (1000,) of 'x_ref'" in str(res), str(res)
        run = pj.run(ragged_block_call(kernel), x, reference=lambda x: x * 2.0)
        assert not run.ok and "loads element (1000,)" in str(run), str(run)


def test_where_after_a_whole_load_exports_the_load_as_a_local_and_a_masked_load_in_place():
    x = jax.ShapeDtypeStruct((1000,), jnp.float32)
    text = pj.export(ragged_block_call(where_after_load_kernel), x)
    assert "v2 = x_ref[...]" in text and "where(v1, v2, " in text, text
    text = pj.export(ragged_block_call(masked_load_kernel), x)
    assert "where(v1, x_ref[...], 0.0)" in text, text


def test_its_masked_load_twin_verifies_and_runs_like_the_reference():
    x = jnp.arange(1000.0)
    res = pj.check(ragged_block_call(masked_load_kernel), x)
    assert res.verified, str(res)
    run = pj.run(ragged_block_call(masked_load_kernel), x, reference=lambda x: x * 2.0)
    assert run.ok, str(run)


def load_mask_one_lane_too_many_kernel(x_ref, o_ref):
    m = _tail_mask()
    lanes = pl.program_id(0) * 256 + jnp.arange(256)
    v = pltriton.load(x_ref, mask=lanes <= 1000, other=0.0)  # one lane past the array
    pltriton.store(o_ref, v * 2.0, mask=m)


def test_a_load_mask_one_lane_too_wide_reads_past_the_array_at_its_own_line_whatever_the_store_masks():
    # Triton issues the load with its own mask: the store's mask, which keeps lane 1000 out
    # of the result, does not narrow what the load reads.
    import inspect
    x = jnp.arange(1000.0)
    res = pj.check(ragged_block_call(load_mask_one_lane_too_many_kernel), x)
    assert res.exit_code == 1, str(res)
    oob = [f for f in res.findings if f.rule == "index-out-of-bounds"]
    assert oob and "this masked load reads element (1000,) of 'x_ref'" in oob[0].message, str(res)
    lines, first = inspect.getsourcelines(load_mask_one_lane_too_many_kernel)
    load_line = first + next(k for k, t in enumerate(lines) if "pltriton.load(" in t)
    assert oob[0].python[1] == load_line, str(res)
    run = pj.run(ragged_block_call(load_mask_one_lane_too_many_kernel), x, reference=lambda x: x * 2.0)
    assert not run.ok and "loads, masked, element (1000,)" in str(run), str(run)


def _masked_row_sum(other):
    def kernel(x_ref, o_ref):
        m = jnp.arange(128) < 100
        x = pltriton.load(x_ref.at[pl.ds(0, 128)], mask=m, other=other)  # the load
        s = jnp.sum(x)
        pltriton.store(o_ref.at[pl.ds(0, 128)], x * 0 + s, mask=m)

    return lambda x: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((100,), jnp.float32),
                                    compiler_params=pltriton.CompilerParams(num_warps=4))(x)


def test_a_masked_load_without_other_is_named_where_its_undefined_lanes_reach_the_output():
    # The lanes the mask leaves off are undefined on a GPU; the sum takes them in. The
    # finding's trace starts at the load (what other=0.0 fixes), not at the masked store.
    x = jax.ShapeDtypeStruct((100,), jnp.float32)
    r = pj.check(_masked_row_sum(None), x)
    (f,) = r.findings
    assert f.rule == "uninitialized-read", r.report()
    load = next(n for n, t in enumerate(open(__file__).read().splitlines(), 1) if "# the load" in t)
    first = [n for n in f.notes if "the undefined data first stored here" in n[0]]
    assert first and first[0][1][1] == load, r.report()
    assert pj.check(_masked_row_sum(0.0), x).verified
