"""Integer inputs read as scalars that steer the body (decode attention's `kv_seq_len_ref[()]`
in a loop bound and a `lax.cond`): exported as reads of a prefetch table of the input's
contents, when they are known at export or described."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

import pipecheck_jax as pj

B, ROWS = 2, 32  # a batch of 2, each x block 32 rows: 4 chunks of 8


def chunk_sum_kernel(x_ref, n_ref, o_ref):
    # o = the sum of the first n chunks of the row block, n read from an integer input.
    n = n_ref[()]
    acc = lax.fori_loop(0, n, lambda t, acc: acc + x_ref[pl.ds(t * 8, 8), :],
                        jnp.zeros((8, 128), jnp.float32))
    o_ref[...] = lax.cond(n > 0, lambda: acc, lambda: jnp.full((8, 128), -1.0, jnp.float32))


def chunk_sum(x, n):
    return pl.pallas_call(
        chunk_sum_kernel, grid=(B,),
        in_specs=[pl.BlockSpec((None, ROWS, 128), lambda b: (b, 0, 0)),
                  pl.BlockSpec((None,), lambda b: (b,))],
        out_specs=pl.BlockSpec((None, 8, 128), lambda b: (b, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((B, 8, 128), jnp.float32))(x, n)


def x_data(seed=0):
    return jax.random.normal(jax.random.PRNGKey(seed), (B, ROWS, 128), jnp.float32)


def reference(x, n):
    out = []
    for b in range(B):
        k = int(n[b])
        out.append(x[b, :8 * k].reshape(k, 8, 128).sum(0) if k else jnp.full((8, 128), -1.0))
    return jnp.stack(out)


def test_an_integer_input_read_as_a_scalar_is_a_table_of_its_known_contents():
    n = jnp.array([3, 0], jnp.int32)
    text = pj.export(chunk_sum, x_data(), n)
    assert "prefetch n_ref_values: i32[2] = [3, 0]" in text, text
    assert "in  n_ref: i32[2]  block=(None,)" in text, text  # still an input, as Pallas has it
    assert "range(n_ref_values[program_id(0)])" in text, text
    assert "when n_ref_values[program_id(0)] > 0:" in text, text
    pj.assert_verified(chunk_sum, x_data(), n)


def test_a_data_steered_loop_runs_like_interpret():
    for n in ([3, 0], [4, 1]):
        n = jnp.array(n, jnp.int32)
        res = pj.run(chunk_sum, x_data(1), n, reference=reference, rtol=1e-5, atol=1e-5)
        assert res.ok, res


def test_a_count_past_the_block_reads_out_of_bounds_where_the_contents_say():
    # Batch 1 sums 5 chunks of a 4-chunk block: its fifth read is past the block.
    r = pj.check(chunk_sum, x_data(), jnp.array([2, 5], jnp.int32))
    assert r.verdicts == {"chunk_sum_kernel": "violation"}, r.report()
    f = next(f for f in r.findings if f.rule == "index-out-of-bounds")
    assert "slice 32:40" in f.message and "at grid point (1,)" in f.message, r.report()


def test_described_contents_are_checked_for_every_contents_they_allow():
    n = jax.ShapeDtypeStruct((B,), jnp.int32)
    pj.assert_verified(chunk_sum, x_data(), n, prefetch={"n_ref": "in [0, 5)"})
    r = pj.check(chunk_sum, x_data(), n, prefetch={"n_ref": "in [0, 6)"})
    assert r.verdicts == {"chunk_sum_kernel": "violation"}, r.report()
    assert "index-out-of-bounds" in {f.rule for f in r.findings}, r.report()


def test_unknown_contents_are_unsupported_with_how_to_give_them():
    r = pj.check(chunk_sum, x_data(), jax.ShapeDtypeStruct((B,), jnp.int32))
    assert r.exit_code == 2 and r.verdicts == {"chunk_sum_kernel": "unsupported"}, r.report()
    (u,) = r.unsupported
    assert "it reads the integer input 'n_ref'" in str(u), str(u)
    assert "prefetch={'n_ref':" in str(u), str(u)


def test_an_integer_input_read_only_as_a_block_stays_a_plain_input():
    def kernel(x_ref, n_ref, o_ref):
        o_ref[...] = x_ref[...] + n_ref[...].astype(jnp.float32)

    fn = lambda x, n: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x, n)
    text = pj.export(fn, jnp.zeros((8, 128)), jnp.asarray(np.arange(1024, dtype=np.int32).reshape(8, 128)))
    assert "prefetch" not in text, text


def test_a_run_that_stops_at_the_out_of_bounds_read_is_not_ok_and_says_where():
    r = pj.run(chunk_sum, x_data(), jnp.array([2, 5], jnp.int32))
    assert not r.ok and r.outputs is None
    assert "wrote no outputs" in str(r) and "slice 32:40 is out of bounds" in str(r), str(r)


def test_a_table_beside_the_kernels_own_prefetch_is_named_in_every_index_map_after_it():
    from jax.experimental.pallas import tpu as pltpu

    def kernel(ids, x_ref, n_ref, o_ref):
        o_ref[...] = lax.fori_loop(0, n_ref[pl.program_id(0)],
                                   lambda t, a: a + x_ref[pl.ds(t * 8, 8), :],
                                   jnp.zeros((8, 128), jnp.float32))

    def fn(ids, x, n):
        # n whole (a squeezed (None,) block of it is a block of 1, which TPU's tiling refuses)
        return pl.pallas_call(kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(B,),
            in_specs=[pl.BlockSpec((None, ROWS, 128), lambda b, ids: (ids[b], 0, 0)),
                      pl.BlockSpec((B,), lambda b, ids: (0,))],
            out_specs=pl.BlockSpec((None, 8, 128), lambda b, ids: (b, 0, 0))),
            out_shape=jax.ShapeDtypeStruct((B, 8, 128), jnp.float32))(ids, x, n)

    args = (jnp.array([1, 0], jnp.int32), x_data(), jnp.array([3, 4], jnp.int32))
    text = pj.export(fn, *args)
    assert "prefetch ids: i32[2] = [1, 0]" in text and "prefetch n_ref_values: i32[2]" in text
    assert text.count("index=(i, ids, n_ref_values) ->") == 3, text
    pj.assert_verified(fn, *args)
    assert pj.run(fn, *args).ok
