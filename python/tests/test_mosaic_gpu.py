"""pallas_calls that lower to Mosaic GPU (plgpu.CompilerParams, plgpu.ACC scratch,
plgpu.BlockSpec) export as `target = h100`: the parallel axes a grid of CTAs, each running
plgpu.emit_pipeline over the others with max_concurrent_steps slots, and plgpu.wgmma an
asynchronous matmul that reads its slots until a wgmma_wait retires it."""

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

import pipecheck_jax as pj

TM = TN = 64
TK = 32
GM, GN, GK = 2, 2, 4
M, N, K = GM * TM, GN * TN, GK * TK


def wgmma_kernel(wait):
    """Hopper's matmul step: a wgmma into the accumulator, awaited with `wait` left in
    flight; the last k step stores the accumulator."""
    def kernel(a_ref, b_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, a_ref, b_ref)

        @pl.when(pl.program_id(2) == GK - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(jnp.float16)

        plgpu.wgmma_wait(wait)
    return kernel


def matmul(kernel, steps=2, delay_release=1, transforms=(), scratch=(), params=True):
    """The (GM, GN, GK) matmul call of `kernel` with an ACC scratch (and `scratch`), k
    sequential with `steps` slots; without params, no compiler_params at all."""
    def f(a, b):
        spec = dict(delay_release=delay_release, transforms=transforms)
        return pl.pallas_call(
            kernel, grid=(GM, GN, GK),
            in_specs=[plgpu.BlockSpec((TM, TK), lambda i, j, k: (i, k), **spec),
                      plgpu.BlockSpec((TK, TN), lambda i, j, k: (k, j), **spec)],
            out_specs=plgpu.BlockSpec((TM, TN), lambda i, j, k: (i, j), transforms=transforms),
            out_shape=jax.ShapeDtypeStruct((M, N), jnp.float16),
            scratch_shapes=[plgpu.ACC((TM, TN), jnp.float32), *scratch],
            compiler_params=plgpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "sequential"),
                max_concurrent_steps=steps) if params else None)(a, b)
    return f


def specs():
    return (jax.ShapeDtypeStruct((M, K), jnp.float16), jax.ShapeDtypeStruct((K, N), jnp.float16))


def operands(seed=0):
    ka, kb = jax.random.split(jax.random.key(seed))
    return (jax.random.uniform(ka, (M, K), jnp.float16), jax.random.uniform(kb, (K, N), jnp.float16))


def reference(a, b):
    return (a.astype(jnp.float32) @ b.astype(jnp.float32)).astype(jnp.float16)


def line_of(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, t in enumerate(lines) if text in t)


def test_a_mosaic_gpu_call_exports_for_h100_with_its_slots_accumulator_and_untiled_blocks():
    tiled = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(64))
    text = pj.export(matmul(wgmma_kernel(1), steps=3, transforms=tiled), *specs())
    assert "    target = h100" in text
    assert "    dimension_semantics = (parallel, parallel, sequential)" in text
    assert "    max_concurrent_steps = 3" in text
    assert "delay_release" not in text  # Pallas' pallas_call lowering drops it
    assert "scratch acc_ref: f32[64, 64]  memory_space=acc" in text
    # the refs are tiled and swizzled in the jaxpr; the blocks are as the BlockSpecs say
    assert "in  a_ref: f16[128, 128]  block=(64, 32)  index=(i, j, k) -> (i, k)" in text
    assert "acc_ref[...] += dot(a_ref[...], b_ref[...], preferred_element_type=f32)" in text
    assert "o_ref[...] = cast(acc_ref[...], f16)" in text


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_a_wgmma_left_in_flight_is_overwritten_by_the_next_copy_whatever_its_blockspecs_delay(steps):
    # The pattern of Hopper matmuls: wgmma_wait(1) keeps the step's wgmma in flight, which
    # needs delay_release = 1. A pallas_call's pipeline never gets it: Pallas' Mosaic GPU
    # lowering rebuilds the BlockSpecs from the block mappings, which keep no delay_release.
    r = pj.check(matmul(wgmma_kernel(1), steps=steps), *specs())
    assert r.exit_code == 1, r
    found = {(f.rule, f.pk_text.split(":")[0].strip()) for f in r.findings}
    assert found == {("async-operand-overwritten", "in  a_ref"),
                     ("async-operand-overwritten", "in  b_ref")}, r
    for f in r.findings:
        notes = [msg for msg, _, _ in f.notes]
        assert any("delay_release = 0, whatever its plgpu.BlockSpecs say" in n for n in notes), f
        wgmma = [py for msg, py, _ in f.notes if msg.startswith("event") and "wgmma(" in msg]
        assert wgmma and wgmma[0][1] == line_of(wgmma_kernel(1), "plgpu.wgmma("), f


def test_a_wgmma_awaited_in_its_step_verifies_and_runs_equal_to_its_reference():
    f = matmul(wgmma_kernel(0), steps=2)
    r = pj.check(f, *specs())
    assert r.exit_code == 0, r
    assert "acc_ref[...] = acc_ref[...] + dot(a_ref[...], b_ref[...]" in pj.export(f, *specs())
    run = pj.run(f, *operands(), reference=reference, rtol=2e-2, atol=0.1)
    assert run.ok, run


def test_the_racing_wgmma_gives_wrong_numbers_in_pipechecks_pipelined_run():
    run = pj.run(matmul(wgmma_kernel(1), steps=2), *operands(), reference=reference, rtol=2e-2,
                 atol=0.1)
    assert not run.ok, run
    assert "pipecheck run exited 1" in str(run), run


def accumulate_into_output(steps):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...]

    def f(x):
        return pl.pallas_call(
            kernel, grid=(2, 4),
            in_specs=[pl.BlockSpec((64, 64), lambda i, k: (i, k))],
            out_specs=pl.BlockSpec((64, 64), lambda i, k: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((128, 64), jnp.float32),
            compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel", "sequential"),
                                                 max_concurrent_steps=steps))(x)
    return f


def test_accumulating_into_an_output_across_steps_holds_only_with_one_slot():
    # Mosaic GPU's pipeline gives every step slot t % max_concurrent_steps of the output too:
    # with two, step 1 adds into a slot no step initialized. TPU's output block stays put.
    x = jax.random.uniform(jax.random.key(1), (128, 256), jnp.float32)
    ref = (lambda x: x.reshape(128, 4, 64).sum(1))
    one = accumulate_into_output(1)
    assert pj.check(one, x).exit_code == 0
    assert pj.run(one, x, reference=ref).ok
    two = accumulate_into_output(2)
    r = pj.check(two, x)
    assert r.exit_code == 1 and "uninitialized-read" in {f.rule for f in r.findings}, r
    assert not pj.run(two, x, reference=ref).ok


def test_a_call_with_an_acc_scratch_and_no_compiler_params_is_mosaic_gpu_with_every_axis_parallel():
    # Without dimension_semantics every axis is a CTA of one step: the k axis writes each
    # output block from four CTAs at once.
    def kernel(a_ref, b_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, a_ref, b_ref)
        plgpu.wgmma_wait(0)
        o_ref[...] = acc_ref[...].astype(jnp.float16)

    f = matmul(kernel, params=False)
    text = pj.export(f, *specs())
    assert "    target = h100" in text and "dimension_semantics" not in text
    r = pj.check(f, *specs())
    assert r.exit_code == 1 and "parallel-write-conflict" in {f.rule for f in r.findings}, r


def test_blocks_that_fit_tpu_vmem_but_not_an_h100_blocks_shared_memory_are_reported():
    # 4 slots of a (128, 128) f32 input and output: 512 KiB, over the 227 KiB of a CTA.
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def f(x, steps):
        return pl.pallas_call(
            kernel, grid=(8,),
            in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((1024, 128), jnp.float32),
            compiler_params=plgpu.CompilerParams(dimension_semantics=("sequential",),
                                                 max_concurrent_steps=steps))(x)
    x = jax.ShapeDtypeStruct((1024, 128), jnp.float32)
    r = pj.check(lambda x: f(x, 4), x)
    assert r.exit_code == 1 and {f.rule for f in r.findings} == {"sram-capacity"}, r
    assert pj.check(lambda x: f(x, 1), x).exit_code == 0


def unsupported_message(kernel, scratch=()):
    f = matmul(kernel, scratch=scratch)
    r = pj.check(f, *specs())
    assert r.exit_code == 2 and not r.findings and len(r.unsupported) == 1, r
    return str(r.unsupported[0])


def test_wgmmas_the_pk_form_cannot_hold_in_flight_are_unsupported_not_verified():
    def never_awaited(a_ref, b_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, a_ref, b_ref)

    def two_in_flight(a_ref, b_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, a_ref.at[:, pl.ds(0, 16)], b_ref.at[pl.ds(0, 16), :])
        plgpu.wgmma(acc_ref, a_ref.at[:, pl.ds(16, 16)], b_ref.at[pl.ds(16, 16), :])
        plgpu.wgmma_wait(0)

    assert "not awaited by a plgpu.wgmma_wait" in unsupported_message(never_awaited)
    assert "a second wgmma while one is in flight" in unsupported_message(two_in_flight)


def test_wgmmas_on_views_of_their_blocks_read_those_views():
    def kernel(a_ref, b_ref, o_ref, acc_ref):
        for c in range(2):
            plgpu.wgmma(acc_ref, a_ref.at[:, pl.ds(c * 16, 16)], b_ref.at[pl.ds(c * 16, 16), :])
            plgpu.wgmma_wait(0)

        @pl.when(pl.program_id(2) == GK - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(jnp.float16)

    f = matmul(kernel)
    text = pj.export(f, *specs())
    assert "dot(a_ref[:, 0:16], b_ref[0:16, :], preferred_element_type=f32)" in text
    assert "dot(a_ref[:, 16:32], b_ref[16:32, :], preferred_element_type=f32)" in text
    assert pj.check(f, *specs()).exit_code == 0
    assert pj.run(f, *operands(), reference=reference, rtol=2e-2, atol=0.1).ok


def test_barriers_and_manual_copies_are_unsupported():
    def with_barrier(a_ref, b_ref, o_ref, acc_ref, bar):
        plgpu.wgmma(acc_ref, a_ref, b_ref)
        plgpu.wgmma_wait(0)

    assert "barriers have no .pk form" in unsupported_message(
        with_barrier, [plgpu.Barrier(num_arrivals=1)])


def test_a_plgpu_kernel_is_unsupported_as_a_whole_even_beside_a_pallas_call():
    # plgpu.kernel is no pallas_call: the function is not checked at all rather than
    # reported verified for its pallas_call alone.
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), grid=(1,),
                  grid_names=("x",))
    def fill(o_ref):
        o_ref[...] = jnp.full_like(o_ref, 42.0)

    def both(a, b):
        return matmul(wgmma_kernel(0))(a, b), fill()

    r = pj.check(both, *specs())
    assert r.exit_code == 2 and not r.kernels, r
    assert "plgpu.kernel or pl.core_map" in str(r.unsupported[0])
    # named, at the line that makes it; inside a jitted helper (whose traceback stops at the
    # jit, as upstream's ragged_dot), at the helper's call
    line = next(n for n, t in enumerate(open(__file__).read().splitlines(), 1) if "fill()" in t)
    assert r.unsupported[0].location == f"{__file__}:{line}", r.unsupported[0]
    assert r.unsupported[0].kernel == "fill", r.unsupported[0]
    jitted = pj.check(jax.jit(lambda a, b: both(a, b)), *specs())
    assert jitted.unsupported[0].location is not None, jitted.unsupported[0]


def test_blockspecs_pallas_mosaic_gpu_lowering_refuses_are_unsupported():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def call(spec):
        return lambda x: pl.pallas_call(
            kernel, grid=(4,), in_specs=[spec],
            out_specs=pl.BlockSpec((32, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
            compiler_params=plgpu.CompilerParams(dimension_semantics=("sequential",)))(x)

    x = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    for spec, why in [
            (pl.BlockSpec((32, 128), lambda i: (i, 0), memory_space=plgpu.GMEM),
             "a GMEM block must be the whole array"),
            (pl.BlockSpec((pl.Element(32), 128), lambda i: (i * 32, 0)),
             "only Blocked (and squeezed) block dims"),
            (pl.BlockSpec((32, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered(3)),
             "pipeline_mode")]:
        r = pj.check(call(spec), x)
        assert r.exit_code == 2 and len(r.unsupported) == 1, r
        assert "Pallas' Mosaic GPU lowering refuses this BlockSpec" in str(r.unsupported[0])
        assert why in str(r.unsupported[0]), r
    ok = pj.check(call(pl.BlockSpec((32, 128), lambda i: (i, 0))), x)
    assert ok.exit_code == 0, ok


@pytest.mark.parametrize("zero_at, rules", [(0, set()), (1, {"accumulator-reset"})])
def test_a_store_into_the_acc_exports_and_zeroing_it_mid_reduction_is_a_reset(zero_at, rules):
    def kernel(a_ref, b_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == zero_at)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        plgpu.wgmma(acc_ref, a_ref, b_ref)
        plgpu.wgmma_wait(0)

        @pl.when(pl.program_id(2) == GK - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(jnp.float16)

    f = matmul(kernel)
    assert "acc_ref[...] = broadcast_to(0.0, (64, 64))" in pj.export(f, *specs())
    r = pj.check(f, *specs())
    assert {x.rule for x in r.findings} == rules, r
    run = pj.run(f, *operands(), reference=reference, rtol=2e-2, atol=0.1)
    assert run.ok == (not rules), run


def staged_operand(store_at):
    # The a operand staged in an SMEM scratch; `store_at` says where the scratch is zeroed:
    # "when" (in a pl.when between the wgmma and its wait(0)), "top" (there, unguarded) or
    # "after" (past the wait: the wgmma no longer reads it).
    def staged_kernel(a_ref, b_ref, o_ref, acc_ref, as_ref):
        as_ref[...] = a_ref[...] * 2.0
        plgpu.commit_smem()  # (the store made visible to the wgmma's reads)
        plgpu.wgmma(acc_ref, as_ref, b_ref)
        if store_at == "when":
            @pl.when(pl.program_id(0) == 0)
            def _():
                as_ref[...] = jnp.zeros_like(as_ref)
        elif store_at == "top":
            as_ref[...] = jnp.zeros_like(as_ref)
        plgpu.wgmma_wait(0)
        if store_at == "after":
            as_ref[...] = jnp.zeros_like(as_ref)
        o_ref[...] = acc_ref[...].astype(jnp.float16)

    def f(a, b):
        return pl.pallas_call(
            staged_kernel, grid=(1,),
            in_specs=[pl.BlockSpec((64, 32), lambda i: (0, 0)),
                      pl.BlockSpec((32, 64), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((64, 64), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float16),
            scratch_shapes=[plgpu.ACC((64, 64), jnp.float32), plgpu.SMEM((64, 32), jnp.float16)],
            compiler_params=plgpu.CompilerParams(dimension_semantics=("sequential",),
                                                 max_concurrent_steps=1))(a, b)
    return f


@pytest.mark.parametrize("store_at", ["when", "top"])
def test_a_store_into_a_wgmma_operand_before_its_wait_is_an_overwritten_operand(store_at):
    args = [jax.ShapeDtypeStruct((64, 32), jnp.float16), jax.ShapeDtypeStruct((32, 64), jnp.float16)]
    r = pj.check(staged_operand(store_at), *args)
    assert [f.rule for f in r.findings] == ["async-operand-overwritten"], r.report()
    pj.assert_verified(staged_operand("after"), *args)


def column_sum_sequential_then_parallel(x):
    # Each CTA (a column block c) keeps its own scratch and sums its rows r = 0..3 in order.
    def colsum_kernel(x_ref, o_ref, acc_ref):
        r = pl.program_id(0)

        @pl.when(r == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += x_ref[...].sum(0, keepdims=True)

        @pl.when(r == pl.num_programs(0) - 1)
        def _():
            o_ref[...] = acc_ref[...]

    return pl.pallas_call(
        colsum_kernel, grid=(4, 2), in_specs=[pl.BlockSpec((64, 128), lambda r, c: (r, c))],
        out_specs=pl.BlockSpec((1, 128), lambda r, c: (0, c)),
        out_shape=jax.ShapeDtypeStruct((1, 256), jnp.float32),
        scratch_shapes=[plgpu.SMEM((1, 128), jnp.float32)],
        compiler_params=plgpu.CompilerParams(dimension_semantics=("sequential", "parallel"),
                                             max_concurrent_steps=1))(x)


def test_a_parallel_axis_after_a_sequential_one_is_compared_with_the_reference_not_interpret():
    # interpret=True runs (r, c) in order with one scratch: its columns mix there, not on a GPU.
    x = jax.random.normal(jax.random.PRNGKey(0), (256, 256), jnp.float32)
    pj.assert_verified(column_sum_sequential_then_parallel, x)
    r = pj.run(column_sum_sequential_then_parallel, x,
               reference=lambda x: x.sum(0, keepdims=True), rtol=1e-4, atol=1e-4)
    assert r.ok, r
    assert "grid axis 1 is parallel after a sequential one" in r.interpret_error, r


def test_wgmmas_on_views_of_both_operands_in_a_fori_loop_read_those_views():
    # wgmma_ref takes acc, a, b and then the views' leaves: a's view must not read b as its start
    def k_chunks_kernel(a_ref, b_ref, o_ref, acc_ref):
        def body(c, carry):
            plgpu.wgmma(acc_ref, a_ref.at[:, pl.ds(c * 16, 16)], b_ref.at[pl.ds(c * 16, 16), :])
            plgpu.wgmma_wait(0)
            return carry
        jax.lax.fori_loop(0, 4, body, 0)
        o_ref[...] = acc_ref[...].astype(jnp.float16)

    def f(a, b):
        return pl.pallas_call(
            k_chunks_kernel, grid=(1,),
            in_specs=[pl.BlockSpec((64, 64), lambda i: (0, 0)),
                      pl.BlockSpec((64, 64), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((64, 64), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float16),
            scratch_shapes=[plgpu.ACC((64, 64), jnp.float32)],
            compiler_params=plgpu.CompilerParams(dimension_semantics=("sequential",),
                                                 max_concurrent_steps=1))(a, b)

    a = jax.random.normal(jax.random.PRNGKey(0), (64, 64)).astype(jnp.float16)
    b = jax.random.normal(jax.random.PRNGKey(1), (64, 64)).astype(jnp.float16)
    text = pj.export(f, a, b)
    assert "dot(a_ref[:, ds(t1 * 16, 16)], b_ref[ds(t1 * 16, 16), :]" in text, text
    pj.assert_verified(f, a, b)
    r = pj.run(f, a, b, reference=lambda a, b: (a.astype(jnp.float32) @ b.astype(jnp.float32))
               .astype(jnp.float16), rtol=2e-2, atol=0.1)
    assert r.ok, r


def scores_kernel(wait):
    """Attention's score step S = Q Kᵀ: the wgmma reads K transposed (plgpu.transpose_ref),
    awaited with `wait` left in flight; the last k step stores the accumulator."""
    def kernel(q_ref, k_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, q_ref, plgpu.transpose_ref(k_ref, (1, 0)))
        if wait == 0:
            plgpu.wgmma_wait(0)

        @pl.when(pl.program_id(2) == GK - 1)
        def _():
            o_ref[...] = acc_ref[...]

        if wait != 0:
            plgpu.wgmma_wait(wait)
    return kernel


def scores(kernel, keys=N):
    """S[i, j] = sum_k Q[i, k] K[j, k] over (GM, keys / TN, GK) blocks, k sequential."""
    def f(q, k):
        return pl.pallas_call(
            kernel, grid=(GM, pl.cdiv(keys, TN), GK),
            in_specs=[pl.BlockSpec((TM, TK), lambda i, j, k: (i, k)),
                      pl.BlockSpec((TN, TK), lambda i, j, k: (j, k))],
            out_specs=pl.BlockSpec((TM, TN), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((M, keys), jnp.float32),
            scratch_shapes=[plgpu.ACC((TM, TN), jnp.float32)],
            compiler_params=plgpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "sequential"),
                max_concurrent_steps=2))(q, k)
    return f


def test_a_wgmma_reading_k_through_transpose_ref_is_q_times_k_transposed():
    q = jax.random.uniform(jax.random.key(3), (M, K), jnp.float16)
    # 100 keys: K's last block is ragged, its padding rows are S's columns past the edge.
    k = jax.random.uniform(jax.random.key(4), (100, K), jnp.float16)
    f = scores(scores_kernel(0), keys=100)
    text = pj.export(f, q, k)
    assert "dot(q_ref[...], k_ref[...], trans_b=True, preferred_element_type=f32)" in text, text
    pj.assert_verified(f, q, k)
    run = pj.run(f, q, k, reference=lambda q, k: q.astype(jnp.float32) @ k.astype(jnp.float32).T,
                 rtol=2e-2, atol=0.1)
    assert run.ok, run
    # Left in flight, the transposed K slot is refilled under the wgmma as any operand is.
    r = pj.check(scores(scores_kernel(1), keys=100), q, k)
    assert {(f.rule, f.pk_text.split(":")[0].strip()) for f in r.findings} == {
        ("async-operand-overwritten", "in  q_ref"), ("async-operand-overwritten", "in  k_ref")}, r


def test_a_transpose_of_a_wgmma_operand_that_is_not_its_last_view_is_unsupported():
    def transposed_twice(a_ref, b_ref, o_ref, acc_ref):
        twice = plgpu.transpose_ref(plgpu.transpose_ref(b_ref, (1, 0)), (1, 0))
        plgpu.wgmma(acc_ref, a_ref, twice)
        plgpu.wgmma_wait(0)

    assert "transposed other than by a last transpose_ref" in unsupported_message(transposed_twice)


@pytest.mark.parametrize("in_dt,acc_dt", [(jnp.int8, jnp.int32), (jnp.float16, jnp.float16)])
def test_a_wgmma_accumulates_int8_in_i32_and_f16_in_f16_as_hopper_does(in_dt, acc_dt):
    # (Hopper's wgmma: f16 products into an f32 or f16 accumulator, int8 ones into s32.)
    def kernel(a_ref, b_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, a_ref, b_ref)
        plgpu.wgmma_wait(0)
        o_ref[...] = acc_ref[...]

    def f(a, b):
        return pl.pallas_call(
            kernel, grid=(1, 1),
            in_specs=[plgpu.BlockSpec((TM, TK), lambda i, j: (i, 0)),
                      plgpu.BlockSpec((TK, TN), lambda i, j: (0, j))],
            out_specs=plgpu.BlockSpec((TM, TN), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((TM, TN), acc_dt),
            scratch_shapes=[plgpu.ACC((TM, TN), acc_dt)],
            compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel", "parallel")))(a, b)

    ka, kb = jax.random.split(jax.random.key(3))
    if in_dt == jnp.int8:
        a = jax.random.randint(ka, (TM, TK), -128, 128).astype(in_dt)
        b = jax.random.randint(kb, (TK, TN), -128, 128).astype(in_dt)
    else:
        a, b = jax.random.uniform(ka, (TM, TK), in_dt), jax.random.uniform(kb, (TK, TN), in_dt)
    r = pj.check(f, a, b)
    assert r.exit_code == 0, r
    ref = lambda a, b: jnp.dot(a, b, preferred_element_type=acc_dt)
    run = pj.run(f, a, b, reference=ref, **({} if in_dt == jnp.int8 else dict(rtol=2e-2, atol=0.1)))
    assert run.ok, run


def acc_load_kernel(wait, wait_n=None):
    """The matmul step with its accumulator read through wgmma_accumulator_load(wait_n=...)
    at the last k step: with wait_n=None (or 1) the read waits for nothing, so it is right
    only where `wgmma_wait(wait)` retired the step's wgmma (wait 0)."""
    def kernel(a_ref, b_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, a_ref, b_ref)
        plgpu.wgmma_wait(wait)

        @pl.when(pl.program_id(2) == GK - 1)
        def _():
            o_ref[...] = plgpu.wgmma_accumulator_load(acc_ref, wait_n=wait_n).astype(jnp.float16)
    return kernel


def test_an_accumulator_load_that_waits_for_nothing_reads_it_after_a_wgmma_wait_0():
    # wgmma_accumulator_load(acc, wait_n=None) does no synchronization: after wgmma_wait(0)
    # nothing is in flight, so it is the plain read.
    f = matmul(acc_load_kernel(0))
    assert "o_ref[...] = cast(acc_ref[...], f16)" in pj.export(f, *specs())
    pj.assert_verified(f, *specs())
    assert pj.run(f, *operands(), reference=reference, rtol=2e-2, atol=0.1).ok
    pj.assert_verified(matmul(acc_load_kernel(0, wait_n=1)), *specs())


@pytest.mark.parametrize("wait_n", [None, 1])
def test_an_accumulator_load_that_waits_for_nothing_while_the_wgmma_is_in_flight_is_a_race(wait_n):
    # After wgmma_wait(1) the step's wgmma is still writing the registers the load reads. A
    # .pk read of an accumulator waits for its wgmmas, so the race has no .pk form: the
    # kernel is refused, saying so, never verified.
    r = pj.check(matmul(acc_load_kernel(1, wait_n)), *specs())
    assert r.exit_code == 2 and not r.findings and len(r.unsupported) == 1, r
    u = str(r.unsupported[0])
    assert f"wgmma_accumulator_load(acc_ref, wait_n={wait_n})" in u and "a race on the GPU" in u, u
    assert f"test_mosaic_gpu.py:{line_of(acc_load_kernel, 'plgpu.wgmma(')}" in u, u
    assert u.startswith(f"{__file__}:{line_of(acc_load_kernel, 'o_ref[...] = plgpu.wgmma_acc')}:"), u


def test_a_layout_cast_iota_mask_is_its_values_so_run_executes_it():
    # plgpu.broadcasted_iota(..., layout=) is an iota and a layout_cast, which only picks
    # registers: the identity on values, not an opaque op that `run` refuses.
    def masked_kernel(bound):
        def kernel(x_ref, o_ref):
            cols = plgpu.broadcasted_iota(jnp.int32, (64, 128), 1, layout=plgpu.Layout.WGMMA)
            o_ref[...] = jnp.where(cols < bound, x_ref[...], 0.0)
        return kernel

    def call(bound):
        return lambda x: pl.pallas_call(
            masked_kernel(bound), grid=(2,), in_specs=[pl.BlockSpec((64, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((64, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
            compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel",)))(x)

    x = jax.random.normal(jax.random.key(0), (128, 128))
    ref = lambda x: jnp.where(jnp.arange(128)[None] < 100, x, 0.0)
    text = pj.export(call(100), x)
    assert "opaque" not in text and "where(iota(" in text, text
    pj.assert_verified(call(100), x)
    assert pj.run(call(100), x, reference=ref).ok
    # a mask off by one column: the run computes the mask and differs from the reference
    r = pj.run(call(101), x, reference=ref)
    assert not r.ok and "pipecheck vs reference: output 0 differs at [0, 100]" in str(r), r


TILED = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


def staged_in_tiled_smem(store_first):
    """The a operand staged, doubled, in an SMEM scratch tiled and swizzled for the wgmma
    (how Hopper kernels stage operands); without `store_first` the wgmma reads it unwritten."""
    def tiled_kernel(a_ref, b_ref, o_ref, acc_ref, st_ref):
        if store_first:
            st_ref[...] = a_ref[...] * 2.0
            plgpu.commit_smem()
        plgpu.wgmma(acc_ref, st_ref, b_ref)
        plgpu.wgmma_wait(0)
        o_ref[...] = acc_ref[...].astype(jnp.float16)

    def f(a, b):
        return pl.pallas_call(
            tiled_kernel, grid=(2,),
            in_specs=[pl.BlockSpec((64, 64), lambda i: (i, 0)),
                      pl.BlockSpec((64, 64), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((64, 64), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((128, 64), jnp.float16),
            scratch_shapes=[plgpu.ACC((64, 64), jnp.float32),
                            plgpu.SMEM((64, 64), jnp.float16, transforms=TILED)],
            compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel",)))(a, b)
    return f, tiled_kernel


def doubled_reference(a, b):
    return ((2 * a).astype(jnp.float32) @ b.astype(jnp.float32)).astype(jnp.float16)


def small_operands():
    ka, kb = jax.random.split(jax.random.key(5))
    return (jax.random.normal(ka, (128, 64)).astype(jnp.float16),
            jax.random.normal(kb, (64, 64)).astype(jnp.float16))


def test_an_smem_scratch_with_transforms_is_declared_at_its_own_shape_and_checked():
    # The kernel jaxpr holds the scratch tiled, f16[8, 1, 8, 64], and reads it through the
    # views that undo the tiling and swizzling: the export declares it as those views see it.
    f, _ = staged_in_tiled_smem(True)
    text = pj.export(f, *small_operands())
    assert "scratch st_ref: f16[64, 64]  memory_space=smem" in text, text
    assert "acc_ref[...] = acc_ref[...] + dot(st_ref[...], b_ref[...]" in text, text
    pj.assert_verified(f, *small_operands())
    assert pj.run(f, *small_operands(), reference=doubled_reference, rtol=2e-2, atol=0.1).ok
    bad, kernel = staged_in_tiled_smem(False)
    r = pj.check(bad, *small_operands())
    assert r.exit_code == 1 and {x.rule for x in r.findings} == {"uninitialized-accumulator"}, r
    assert {x.python[1] for x in r.findings} == {line_of(kernel, "plgpu.wgmma(")}, r
    assert "'st_ref'" in r.findings[0].message, r


def test_an_access_of_a_tiled_scratch_past_its_untiling_is_unsupported_at_its_line():
    def raw_kernel(a_ref, b_ref, o_ref, acc_ref, st_ref):
        st_ref.ref[...] = jnp.zeros(st_ref.ref.shape, jnp.float16)  # the tiled ref itself
        st_ref[...] = a_ref[...]
        plgpu.wgmma(acc_ref, st_ref, b_ref)
        plgpu.wgmma_wait(0)
        o_ref[...] = acc_ref[...].astype(jnp.float16)

    msg = unsupported_message(raw_kernel, [plgpu.SMEM((TM, TK), jnp.float16, transforms=(
        plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(64)))])
    assert "declared with transforms=" in msg and "(`st_ref.ref`)" in msg, msg
    assert msg.startswith(f"{__file__}:{line_of(raw_kernel, 'st_ref.ref[...]')}:"), msg


def scoped_acc_matmul(kernel):
    def f(a, b):
        return pl.pallas_call(
            kernel, grid=(GM, GN, GK),
            in_specs=[pl.BlockSpec((TM, TK), lambda i, j, k: (i, k)),
                      pl.BlockSpec((TK, TN), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((TM, TN), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((M, N), jnp.float16),
            compiler_params=plgpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "sequential"),
                max_concurrent_steps=2))(a, b)
    return f


def test_an_accumulator_from_run_scoped_is_zero_at_each_entry_of_its_scope():
    # pl.run_scoped(f, plgpu.ACC(...)), as upstream's Hopper kernels allocate it: Pallas'
    # Mosaic GPU lowering zeroes the registers at each entry of the scope. Within one step
    # (here a loop over the k chunks of whole-K blocks) it accumulates, and the tiled SMEM
    # scratch it allocates beside it is declared at its own shape.
    def scoped_kernel(a_ref, b_ref, o_ref):
        def scoped(acc_ref, st_ref):
            st_ref[...] = a_ref[...] * 2.0
            plgpu.commit_smem()
            for c in range(2):
                plgpu.wgmma(acc_ref, st_ref.at[:, pl.ds(c * 32, 32)], b_ref.at[pl.ds(c * 32, 32), :])
                plgpu.wgmma_wait(0)
            return acc_ref[...]
        out = pl.run_scoped(scoped, plgpu.ACC((64, 64), jnp.float32),
                            plgpu.SMEM((64, 64), jnp.float16, transforms=TILED))
        o_ref[...] = out.astype(jnp.float16)

    def f(a, b):
        return pl.pallas_call(
            scoped_kernel, grid=(2,),
            in_specs=[pl.BlockSpec((64, 64), lambda i: (i, 0)),
                      pl.BlockSpec((64, 64), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((64, 64), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((128, 64), jnp.float16),
            compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel",)))(a, b)

    text = pj.export(f, *small_operands())
    assert "scratch acc_ref: f32[64, 64]  memory_space=acc" in text, text
    assert "scratch st_ref: f16[64, 64]  memory_space=smem" in text, text
    assert "acc_ref[...] = zeros" in text, text
    pj.assert_verified(f, *small_operands())
    assert pj.run(f, *small_operands(), reference=doubled_reference, rtol=2e-2, atol=0.1).ok


def test_a_run_scoped_accumulator_kept_across_grid_steps_is_reset_at_each():
    # The scratch_shapes matmul with its ACC moved into a run_scoped in the step: each k
    # step starts from zero, and the last one stores its own product alone.
    def across_steps(a_ref, b_ref, o_ref):
        def scoped(acc_ref):
            plgpu.wgmma(acc_ref, a_ref, b_ref)
            plgpu.wgmma_wait(0)

            @pl.when(pl.program_id(2) == GK - 1)
            def _():
                o_ref[...] = acc_ref[...].astype(jnp.float16)
        pl.run_scoped(scoped, plgpu.ACC((TM, TN), jnp.float32))

    f = scoped_acc_matmul(across_steps)
    r = pj.check(f, *specs())
    assert r.exit_code == 1 and {x.rule for x in r.findings} == {"accumulator-reset"}, r
    assert r.findings[0].python[1] == line_of(across_steps, "pl.run_scoped("), r
    assert not pj.run(f, *operands(), reference=reference, rtol=2e-2, atol=0.1).ok


def test_a_wgmma_wait_0_after_a_wait_1_in_the_step_retires_the_wgmma_there():
    # wgmma_wait(1) leaves it in flight, the wgmma_wait(0) after it retires it before the
    # step ends: the next refill of its slots cannot overlap it.
    def kernel(wait):
        def k(a_ref, b_ref, o_ref, acc_ref):
            plgpu.wgmma(acc_ref, a_ref, b_ref)
            plgpu.wgmma_wait(1)
            if wait:
                plgpu.wgmma_wait(0)

            @pl.when(pl.program_id(2) == GK - 1)
            def _():
                o_ref[...] = acc_ref[...].astype(jnp.float16)
        return k

    r = pj.check(matmul(kernel(True), steps=2), *specs())
    assert r.exit_code == 0, r
    run = pj.run(matmul(kernel(True), steps=2), *operands(), reference=reference, rtol=2e-2, atol=0.1)
    assert run.ok, run
    left = pj.check(matmul(kernel(False), steps=2), *specs())
    assert {f.rule for f in left.findings} == {"async-operand-overwritten"}, left


def ragged_k_matmul(a, b):
    """K = 100 in blocks of 32: the last k block of a and b is ragged, unmasked."""
    def kernel(a_ref, b_ref, o_ref, acc):
        plgpu.wgmma(acc, a_ref, b_ref)
        plgpu.wgmma_wait(0)

        @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
        def _():
            o_ref[...] = acc[...]
    return pl.pallas_call(
        kernel, grid=(4,),
        in_specs=[pl.BlockSpec((64, 32), lambda k: (0, k)), pl.BlockSpec((32, 64), lambda k: (k, 0))],
        out_specs=pl.BlockSpec((64, 64), lambda k: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float32),
        scratch_shapes=[plgpu.ACC((64, 64), jnp.float32)],
        compiler_params=plgpu.CompilerParams(dimension_semantics=("sequential",),
                                             max_concurrent_steps=2))(a, b)


def ragged_row_reduction(reduce):
    """A row reduction over 100 columns in one 128-wide block."""
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(reduce(x_ref[...]), (64, 128))

    def f(x):
        return pl.pallas_call(
            kernel, grid=(2,), in_specs=[pl.BlockSpec((64, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((64, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
            compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel",)))(x)
    return f


def test_a_ragged_input_block_is_zero_filled_by_tma_so_an_unmasked_ragged_k_matmul_is_exact():
    # Pallas fetches Mosaic GPU input blocks with copy_gmem_to_smem, whose TMA fills the
    # part past the array with zeros: 0 * 0 adds nothing to the product.
    a = jax.random.uniform(jax.random.key(1), (64, 100)).astype(jnp.float16)
    b = jax.random.uniform(jax.random.key(2), (100, 64)).astype(jnp.float16)
    res = pj.check(ragged_k_matmul, a, b)
    assert res.verified, res
    r = pj.run(ragged_k_matmul, a, b, reference=lambda a, b: a.astype(jnp.float32) @ b.astype(jnp.float32),
               rtol=2e-2, atol=0.1)
    assert r.ok, r


def test_on_mosaic_gpu_a_sum_over_zero_padding_is_exact_and_a_max_or_an_exp_of_it_is_not():
    x = jax.random.normal(jax.random.key(3), (128, 100))
    row_sum = ragged_row_reduction(lambda v: jnp.sum(v, axis=1, keepdims=True))
    assert pj.check(row_sum, x).verified
    r = pj.run(row_sum, x, reference=lambda x: jnp.broadcast_to(x.sum(1, keepdims=True), (128, 128)))
    assert r.ok, r
    # interpret=True pads with NaN: the difference is put down to the TMA's zeros.
    assert "zeros (TMA)" in (r.interpret_error or ""), r
    row_max = ragged_row_reduction(lambda v: jnp.max(v, axis=1, keepdims=True))
    res = pj.check(row_max, x)
    assert [f.rule for f in res.findings] == ["partial-block-reduction"], res
    assert "which the max takes for values" in str(res), res
    sum_exp = ragged_row_reduction(lambda v: jnp.sum(jnp.exp(v), axis=1, keepdims=True))
    res = pj.check(sum_exp, x)
    assert [f.rule for f in res.findings] == ["uninitialized-read"], res
    assert "zero padding (zeros=True)" in str(res), res
    # What the GPU computes: the 28 padding columns add exp(0) = 1 each.
    r = pj.run(sum_exp, x, reference=lambda x: jnp.broadcast_to(jnp.exp(x).sum(1, keepdims=True), (128, 128)))
    assert not r.ok and "differs" in str(r), r


def test_a_wgmma_reading_smem_the_body_stored_into_needs_commit_smem_between():
    # A wgmma reads SMEM through the async proxy: the generic-proxy store of the staged
    # operand reaches it only after plgpu.commit_smem() (PTX's fence.proxy.async).
    def make(commit):
        def kernel(a_ref, b_ref, o_ref, acc, st):
            st[...] = a_ref[...] * 2
            if commit:
                plgpu.commit_smem()
            plgpu.wgmma(acc, st, b_ref)
            plgpu.wgmma_wait(0)
            o_ref[...] = acc[...].astype(jnp.float16)

        def f(a, b):
            return pl.pallas_call(
                kernel, grid=(2,),
                in_specs=[pl.BlockSpec((64, 64), lambda i: (i, 0)), pl.BlockSpec((64, 64), lambda i: (0, 0))],
                out_specs=pl.BlockSpec((64, 64), lambda i: (i, 0)),
                out_shape=jax.ShapeDtypeStruct((128, 64), jnp.float16),
                scratch_shapes=[plgpu.ACC((64, 64), jnp.float32), plgpu.SMEM((64, 64), jnp.float16)],
                compiler_params=plgpu.CompilerParams(dimension_semantics=("parallel",)))(a, b)
        return f
    args = (jax.ShapeDtypeStruct((128, 64), jnp.float16), jax.ShapeDtypeStruct((64, 64), jnp.float16))
    assert "commit_smem()" in pj.export(make(True), *args)
    pj.assert_verified(make(True), *args)
    r = pj.check(make(False), *args)
    assert [f.rule for f in r.findings] == ["slot-race"], r.report()
    assert "no commit_smem() in between" in str(r), r
