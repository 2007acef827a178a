"""Differential: exported correct kernels run by pipecheck equal JAX interpret=True."""

import pytest

import kernels as K
import pipecheck_jax as pj

CASES = {
    "add": (K.make_add, dict(m=256, n=512), lambda x, y: x + y),
    "correct_sum": (K.make_correct_sum, dict(b=4, m=256, n=256, bm=128, bn=128),
                    lambda x: x.sum(0)),
    "matmul": (K.make_matmul, dict(m=256, k=512, n=256), lambda x, y: x @ y),
    "flash_attention_fwd": (K.make_flash_fwd, dict(batch=1, heads=2, seq=512),
                            K.flash_reference),
    "flash_attention_fwd_select_kv_map": (K.make_flash_fwd,
                                          dict(batch=1, heads=1, seq=512, select_kv_map=True),
                                          K.flash_reference),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pipecheck_run_equals_jax_interpret_and_the_reference(name):
    make, kw, ref = CASES[name]
    fn, args = make(**kw)
    r = pj.run(fn, *K.concrete(args, seed=1), reference=ref, rtol=1e-4, atol=1e-4)
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0


def test_run_reports_a_difference_from_the_reference():
    fn, args = K.make_add(m=256, n=512)
    r = pj.run(fn, *K.concrete(args), reference=lambda x, y: x - y)
    assert not r.ok
    assert any(m.startswith("pipecheck vs reference: output 0 differs") for m in r.mismatches)


def test_loops_with_run_time_bounds_carries_and_two_branch_conds_run_like_interpret():
    fn, args = K.make_loops_and_branches()
    text = pj.export(fn, *args)
    assert "for t3 in range(program_id(0) + 1):" in text
    assert "when (program_id(0) % 2) == 0:" in text
    assert "when not ((program_id(0) % 2) == 0):" in text
    pj.assert_verified(fn, *args)
    r = pj.run(fn, *K.concrete(args, seed=2))
    assert r.ok, str(r)


def test_run_goes_through_jit_and_the_code_around_the_pallas_call():
    import jax

    fn, args = K.make_add(m=256, n=512)
    wrapped = jax.jit(lambda x, y: fn(x * 2.0, y) + 1.0)
    r = pj.run(wrapped, *K.concrete(args), reference=lambda x, y: x * 2.0 + y + 1.0)
    assert r.ok, str(r)


def test_run_takes_pytree_arguments_as_check_does():
    # An optimizer step's dict of params and grads: its leaves are the jaxpr's inputs.
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(p_ref, g_ref, o_ref):
        o_ref[...] = p_ref[...] - 0.5 * g_ref[...]

    def step(state):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(kernel, grid=(2,), in_specs=[spec, spec], out_specs=spec,
                              out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(
            state["params"], state["grads"])

    p = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
    state = {"params": p, "grads": jnp.ones_like(p)}
    r = pj.run(step, state, reference=lambda s: s["params"] - 0.5 * s["grads"])
    assert r.ok, str(r)
    wrong = pj.run(step, state, reference=lambda s: s["params"] - s["grads"])
    assert not wrong.ok
    with pytest.raises(TypeError, match="argument 0 holds a jax.ShapeDtypeStruct"):
        pj.run(step, {"params": p, "grads": jax.ShapeDtypeStruct(p.shape, p.dtype)})


def test_run_keeps_bf16_as_raw_bits_both_ways():
    import jax.numpy as jnp
    import numpy as np

    fn, args = K.make_matmul(m=256, k=256, n=256)
    xs = [jnp.asarray(np.random.default_rng(3).uniform(-1, 1, a.shape), jnp.bfloat16)
          for a in args]
    ref = lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32).astype(jnp.bfloat16)
    r = pj.run(fn, *xs, reference=ref, rtol=1e-2, atol=1e-2)
    assert r.ok, str(r)
    assert r.outputs[0].dtype == jnp.bfloat16


def test_a_vmapped_kernel_counts_program_id_axes_of_the_users_grid():
    import jax

    fn, args = K.make_correct_sum(b=2, m=256, n=256, bm=128, bn=128)
    s = jax.ShapeDtypeStruct((2,) + args[0].shape, args[0].dtype)
    text = pj.export(jax.vmap(fn), s)
    assert "grid = (2, 2, 2, 2)" in text
    assert "dimension_semantics = (parallel, parallel, parallel, arbitrary)" in text
    assert "when program_id(3) == 0:" in text
    pj.assert_verified(jax.vmap(fn), s)
    r = pj.run(jax.vmap(fn), *K.concrete([s]), reference=lambda x: x.sum(1))
    assert r.ok, str(r)


def test_a_vmapped_kernels_findings_say_the_batch_axes_come_first():
    import jax

    fn, args = K.make_incorrect_sum(b=2, m=256, n=256, bm=128, bn=128)
    s = jax.ShapeDtypeStruct((2,) + args[0].shape, args[0].dtype)
    r = pj.check(jax.vmap(fn), s)
    assert r.exit_code == 1 and r.findings, r.report()
    for f in r.findings:
        assert any("jax.vmap's batch axes as axis 0" in msg for msg, _, _ in f.notes), f


def test_a_batched_dot_general_exports_as_dot_general_verifies_and_runs_like_interpret():
    import jax.numpy as jnp

    fn, args = K.make_batched_scores()
    text = pj.export(fn, *args)
    assert "dot_general(" in text and "contract=((2,), (2,)), batch=((0,), (0,))" in text, text
    assert "opaque(" not in text
    pj.assert_verified(fn, *args)
    r = pj.run(fn, *K.concrete(args, seed=3),
               reference=lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k), rtol=1e-4, atol=1e-4)
    assert r.ok, str(r)


def test_run_goes_through_cond_switch_scan_while_and_custom_vjp_around_the_pallas_call():
    import jax
    import jax.numpy as jnp
    import numpy as np

    add, args = K.make_add(m=256, n=512)

    def in_cond(x, y):
        return jax.lax.cond(x[0, 0] > 0, add, lambda a, b: a - b, x, y)

    def in_switch(x, y):
        return jax.lax.switch(2, [lambda a, b: a, lambda a, b: b, add], x, y)

    def in_scan(x, y):
        return jax.lax.scan(lambda c, t: (add(c, y) * t, c.sum()), x, jnp.arange(1.0, 4.0))

    def in_while(x, y):
        return jax.lax.while_loop(lambda c: c[1] < 3, lambda c: (add(c[0], y), c[1] + 1),
                                  (x, 0))[0]

    @jax.custom_vjp
    def in_vjp(x, y):
        return add(x, y)

    in_vjp.defvjp(lambda x, y: (add(x, y), None), lambda _, g: (g, g))

    def scan_ref(x, y):
        c, sums = np.asarray(x, np.float64), []
        for t in (1.0, 2.0, 3.0):
            sums.append(c.sum())
            c = (c + y) * t
        return [c, np.array(sums)]

    x, y = (np.asarray(a) for a in K.concrete(args, seed=4))
    cases = {
        in_cond: lambda x, y: x + y if x[0, 0] > 0 else x - y,
        in_switch: lambda x, y: x + y,
        in_scan: scan_ref,
        in_while: lambda x, y: x + 3 * y,
        in_vjp: lambda x, y: x + y,
    }
    for fn, ref in cases.items():
        for sign in (1.0, -1.0):  # both branches of in_cond
            xs = (x * sign, y)
            r = pj.run(fn, *xs, reference=ref, rtol=1e-4, atol=1e-3)
            assert r.ok, f"{fn.__name__}: {r}"
            assert r.pipecheck_exit == 0
            # each pallas_call the values reach runs once: none in in_cond's other branch
            calls = {in_scan: 3, in_while: 3, in_cond: int(xs[0][0, 0] > 0)}.get(fn, 1)
            assert r.pipecheck_output.count("PASS") == calls, (fn.__name__, r.pipecheck_output)


def test_a_program_id_inside_a_when_body_runs_against_the_reference_where_interpret_fails():
    # jax 0.10's interpret=True cannot lower a pl.program_id inside a pl.when body on the
    # CPU; run says so and compares pipecheck's run with the reference alone.
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref) + pl.program_id(0).astype(jnp.float32)

        o_ref[...] += x_ref[...]

    def f(x):
        return pl.pallas_call(
            kernel, grid=(2, 2), in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)

    def ref(x):
        rows = jnp.repeat(jnp.arange(2, dtype=jnp.float32), 8)[:, None]
        return x[:, :128] + x[:, 128:] + rows

    x = jax.random.uniform(jax.random.key(0), (16, 256), jnp.float32)
    r = pj.run(f, x, reference=ref)
    assert r.interpret_error is not None and "program_id" in r.interpret_error, str(r)
    assert r.ok, str(r)
    bad = pj.run(f, x, reference=lambda x: ref(x) + 1)
    assert not bad.ok


def test_a_program_id_inside_run_scoped_runs_against_the_reference_where_interpret_asserts():
    # jax 0.10's interpret=True fails an assert inside JAX on a pl.program_id in a
    # pl.run_scoped body: no verdict of interpret mode, the reference decides.
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref):
        def scoped(tmp):
            tmp[...] = x_ref[...] + pl.program_id(0).astype(jnp.float32)
            o_ref[...] = tmp[...]

        pl.run_scoped(scoped, pltpu.VMEM((8, 128), jnp.float32))

    def f(x):
        return pl.pallas_call(
            kernel, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)

    def ref(x):
        return x + jnp.repeat(jnp.arange(2, dtype=jnp.float32), 8)[:, None]

    x = jax.random.uniform(jax.random.key(0), (16, 128), jnp.float32)
    r = pj.run(f, x, reference=ref)
    assert r.interpret_error is not None and "AssertionError" in r.interpret_error, str(r)
    assert r.ok, str(r)
    assert not pj.run(f, x, reference=lambda x: ref(x) + 1).ok


def test_a_0_d_scalar_input_in_smem_runs_with_its_shape():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[...]

    def f(s, x):
        return pl.pallas_call(
            kernel, grid=(2,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(s, x)

    s = jnp.asarray(1.5, jnp.float32)
    x = jax.random.uniform(jax.random.key(1), (16, 128), jnp.float32)
    r = pj.run(f, s, x, reference=lambda s, x: x * s)
    assert r.ok, str(r)


def _sgd_through(write_to):
    """In-place SGD on an aliased memory_space=ANY buffer, each chunk copied back through
    the input's ref or the output's."""
    import functools

    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(g_ref, p_hbm, o_hbm, buf):
        rows = pl.ds(pl.program_id(0) * 8, 8)
        pltpu.sync_copy(p_hbm.at[rows, :], buf)
        buf[...] = buf[...] - 0.5 * g_ref[...]
        pltpu.sync_copy(buf, (p_hbm if write_to == "in" else o_hbm).at[rows, :])

    def f(g, p):
        return pl.pallas_call(
            functools.partial(kernel), grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)),
                      pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            out_shape=jax.ShapeDtypeStruct(p.shape, jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
            input_output_aliases={1: 0})(g, p)

    g = jax.random.uniform(jax.random.key(0), (16, 128), jnp.float32)
    p = jax.random.uniform(jax.random.key(1), (16, 128), jnp.float32)
    return f, g, p


def test_a_copy_back_through_an_aliased_any_space_input_updates_the_output_once():
    # On a TPU the aliased input is the output's buffer. interpret=True keeps them apart (its
    # output is p unchanged), so it is not compared; the reference is, and pipecheck's run
    # applies the update once (before: twice in the pipelined run, never in the oracle).
    f, g, p = _sgd_through("in")
    r = pj.run(f, g, p, reference=lambda g, p: p - 0.5 * g)
    assert r.interpret_error is not None and "aliased to output 0" in r.interpret_error, str(r)
    assert r.ok and r.pipecheck_exit == 0, str(r)
    assert not pj.run(f, g, p, reference=lambda g, p: p).ok


def test_a_copy_back_through_the_aliased_output_is_still_compared_with_interpret():
    f, g, p = _sgd_through("out")
    r = pj.run(f, g, p, reference=lambda g, p: p - 0.5 * g)
    assert r.interpret_error is None and r.interpret_outputs is not None, str(r)
    assert r.ok, str(r)


def test_a_read_back_through_the_aliased_input_of_rows_written_is_put_down_to_interpret_mode():
    # An in-place scatter-add by ids that repeat: step 1 reads through the aliased ANY input the
    # row step 0 wrote through the output. On a TPU that is one buffer (pipecheck's run and the
    # reference agree); interpret=True keeps them apart and differs, which the result says
    # instead of failing the kernel. Without the repeat it is compared with interpret as usual.
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(ids_ref, x_ref, tab_in, tab_out, rbuf):
        row = ids_ref[pl.program_id(0)]
        pltpu.sync_copy(tab_in.at[pl.ds(row, 1)], rbuf)
        rbuf[...] = rbuf[...] + x_ref[...]
        pltpu.sync_copy(rbuf, tab_out.at[pl.ds(row, 1)])

    def f(ids, x, tab):
        return pl.pallas_call(kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((None, 1, 128), lambda i, ids: (i, 0, 0)),
                      pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((1, 128), jnp.float32)]),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32), input_output_aliases={2: 0},
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(ids, x, tab)

    x = jax.random.uniform(jax.random.key(0), (2, 1, 128), jnp.float32)
    tab = jax.random.uniform(jax.random.key(1), (8, 128), jnp.float32)
    ref = lambda ids, x, tab: tab.at[ids].add(x[:, 0, :])  # noqa: E731
    r = pj.run(f, jnp.array([3, 3], jnp.int32), x, tab, reference=ref)
    assert r.ok and r.pipecheck_exit == 0, str(r)
    assert r.interpret_error is not None and "reads input 2" in r.interpret_error, str(r)
    apart = pj.run(f, jnp.array([3, 5], jnp.int32), x, tab, reference=ref)
    assert apart.ok and apart.interpret_error is None and apart.interpret_outputs is not None, \
        str(apart)


def _step_counter_in_prefetch(store):
    """Adds the grid step to each block, counting steps in a scalar-prefetch ref (as upstream
    paged attention keeps its buffer index there), or in a local when `store` is False."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(cnt_ref, x_ref, o_ref):
        c = cnt_ref[0] if store else pl.program_id(0)
        o_ref[...] = x_ref[...] + c.astype(jnp.float32)
        if store:
            cnt_ref[0] = c + 1

    def f(cnt, x):
        return pl.pallas_call(
            kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(4,),
                in_specs=[pl.BlockSpec((8, 128), lambda i, c: (i, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i, c: (i, 0))),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(cnt, x)

    x = jax.random.uniform(jax.random.key(0), (32, 128), jnp.float32)
    ref = lambda c, x: x + jnp.repeat(jnp.arange(4, dtype=jnp.float32), 8)[:, None]  # noqa: E731
    return f, jnp.zeros((1,), jnp.int32), x, ref


def test_stores_into_a_prefetch_ref_are_compared_with_the_reference_only():
    # On a TPU the prefetch ref is SMEM that keeps the count across grid steps; interpret=True
    # does not (its output adds 0 everywhere), so only the reference is compared.
    f, cnt, x, ref = _step_counter_in_prefetch(True)
    r = pj.run(f, cnt, x, reference=ref)
    assert r.interpret_error is not None and "scalar-prefetch ref 0" in r.interpret_error, str(r)
    assert r.ok and r.pipecheck_exit == 0, str(r)
    g, cnt, x, ref = _step_counter_in_prefetch(False)
    r = pj.run(g, cnt, x, reference=ref)
    assert r.interpret_error is None and r.interpret_outputs is not None and r.ok, str(r)


def _rowwise(body, dtype):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = body(x_ref[...])

    def f(x):
        return pl.pallas_call(
            kernel, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), dtype))(x)

    return f, jax.random.normal(jax.random.key(0), (16, 128), jnp.float32).astype(dtype)


def test_a_bf16_division_and_jax_nn_softmax_run_as_interpret_mode_computes_them():
    # bf16 `/` was exported as an opaque op (numpy's issubdtype does not count bfloat16 as
    # floating), and jax.nn.softmax's stop_gradient too: run refused both.
    import jax
    import jax.numpy as jnp

    f, x = _rowwise(lambda v: v / jnp.sum(jnp.exp(v), axis=1, keepdims=True), jnp.bfloat16)
    r = pj.run(f, x)
    assert r.ok and r.pipecheck_exit == 0 and r.interpret_outputs is not None, str(r)
    g, x = _rowwise(lambda v: jax.nn.softmax(v, axis=-1), jnp.float32)
    r = pj.run(g, x, reference=lambda x: jax.nn.softmax(x, axis=-1))
    assert r.ok and r.pipecheck_exit == 0 and r.interpret_outputs is not None, str(r)


def test_jnp_any_all_and_isfinite_run_as_interpret_mode_computes_them():
    # reduce_or / reduce_and of a mask and is_finite were opaque: run refused them.
    import jax.numpy as jnp

    def body(v):
        big = v > 1.0
        row_any = jnp.any(big, axis=1, keepdims=True)
        row_all = jnp.all(v > -3.0, axis=1, keepdims=True)
        fin = jnp.isfinite(jnp.where(v > 2.0, jnp.inf, v))
        return jnp.where(row_any & row_all & fin, v, 0.0) + jnp.any(big).astype(jnp.float32)

    f, x = _rowwise(body, jnp.float32)
    text = pj.export(f, x)
    assert "opaque" not in text, text
    r = pj.run(f, x)
    assert r.ok and r.pipecheck_exit == 0 and r.interpret_outputs is not None, str(r)


def _cumsum_kernel(dtype):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.cumsum(x_ref[...], axis=1)

    def fn(x):
        return pl.pallas_call(kernel, grid=(1,), in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                              out_shape=jax.ShapeDtypeStruct((8, 128), dtype))(x)
    return fn


def test_a_bf16_cumsum_runs_equal_to_interpret_within_a_few_units_in_the_last_place():
    # The executor and XLA round a bf16 scan's partial sums in other orders: 1e-5 is far
    # below one bf16 ulp, so the default tolerance is the dtype's.
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 128)), jnp.bfloat16)
    r = pj.run(_cumsum_kernel(jnp.bfloat16), x)
    assert r.ok, str(r)
    # A real difference is still one: every element off by 10%.
    r = pj.run(_cumsum_kernel(jnp.bfloat16), x, reference=lambda x: jnp.cumsum(x, axis=1) * 1.1)
    assert not r.ok


def _elementwise_kernel(body, out_dtype):
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = body(x_ref[...]).astype(out_dtype)

    def fn(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, out_dtype))(x)
    return fn


def test_integer_outputs_are_compared_exactly():
    # Off by one at 1e6 is within any relative tolerance, and wrong.
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.arange(8 * 128, dtype=np.int32).reshape(8, 128) + 1_000_000)
    r = pj.run(_elementwise_kernel(lambda v: v + 1, jnp.int32), x, reference=lambda x: x)
    assert not r.ok
    assert any("(1024 of 1024 elements)" in m for m in r.mismatches), r.mismatches
    assert pj.run(_elementwise_kernel(lambda v: v + 1, jnp.int32), x, reference=lambda x: x + 1).ok


def test_a_quantization_is_compared_within_one_step_and_a_wrong_one_still_fails():
    # tpu-inference's int8 activation quantization: the row maximum lands at -126.99999 in
    # strict f32 (the executor, numpy) and at -127.0 in XLA on the CPU (amax / 127 taken as
    # amax * (1 / 127)): truncated, one step apart. Integer outputs of a conversion from
    # floats are compared within 1; a quantization off by more is still a failure.
    import jax
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.key(0), (8, 128), jnp.float32)

    def quantize(v):
        scale = jnp.max(jnp.abs(v), axis=-1, keepdims=True) / 127.0
        return v * (1 / scale)

    q = _elementwise_kernel(lambda v: quantize(v).astype(jnp.int8).astype(jnp.int32), jnp.int32)
    r = pj.run(q, x)
    assert r.ok, str(r)
    assert not pj.run(q, x, reference=lambda x: quantize(x).astype(jnp.int32) + 2).ok
    # Dequantized, the step carries into a float output: within 2**-7 of it.
    dq = _elementwise_kernel(lambda v: quantize(v).astype(jnp.int8).astype(jnp.float32) * 0.5,
                             jnp.float32)
    assert pj.run(dq, x).ok
    assert not pj.run(dq, x, reference=lambda x: quantize(x).astype(jnp.int8) * 0.55).ok


def test_one_large_element_does_not_hide_the_others_and_small_outputs_are_not_zero():
    import jax.numpy as jnp
    import numpy as np

    # bf16: the absolute tolerance scales with the mean magnitude, not the largest.
    x = np.ones((8, 128), np.float32)
    x[0, 0] = 100
    x = jnp.asarray(x, jnp.bfloat16)
    zeroed = _elementwise_kernel(lambda v: jnp.where(v > 50, v, 0), jnp.bfloat16)
    assert not pj.run(zeroed, x, reference=lambda x: x).ok
    # f32: an output of 1e-6 is not all zeros within 1e-5.
    y = jnp.asarray(np.random.default_rng(0).uniform(1, 2, (8, 128)), jnp.float32)
    assert not pj.run(_elementwise_kernel(lambda v: v * 0, jnp.float32), y,
                      reference=lambda y: y * 1e-6).ok
    assert pj.run(_elementwise_kernel(lambda v: v * 1e-6, jnp.float32), y,
                  reference=lambda y: y * 1e-6).ok


def test_a_kernel_computing_in_bf16_is_compared_at_bf16s_tolerance_though_its_output_is_f32():
    # The executor rounds the product to bf16, as the TPU does; XLA on the CPU keeps f32
    # between bf16 ops: they differ by bf16 units, not f32 ones.
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 128)), jnp.float32)
    square = _elementwise_kernel(lambda v: v.astype(jnp.bfloat16) * v.astype(jnp.bfloat16),
                                 jnp.float32)
    r = pj.run(square, x)
    assert r.ok, str(r)
    assert not pj.run(square, x, reference=lambda x: x * x * 1.1).ok


def test_run_says_it_needs_arrays_where_it_is_given_shapes():
    import jax
    import jax.numpy as jnp

    with pytest.raises(TypeError, match="argument 0 is a jax.ShapeDtypeStruct"):
        pj.run(_cumsum_kernel(jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))


def test_run_passes_max_memory_on_to_pipecheck_run_which_refuses_a_run_past_it():
    # pipecheck run refuses a run whose memory estimate passes --max-memory (4 GiB by
    # default); run's max_memory raises it for a kernel the estimate overrates, or lowers it.
    fn, args = K.make_add(m=256, n=512)
    xs = K.concrete(args)
    for size in (1 << 34, "16G"):
        assert pj.run(fn, *xs, max_memory=size, reference=lambda x, y: x + y).ok
    for size in (1024, "1k"):
        with pytest.raises(RuntimeError, match=r"over --max-memory 1\.0 KiB"):
            pj.run(fn, *xs, max_memory=size)
    for bad in (0, -1, True, 1.5, ""):
        with pytest.raises(ValueError, match="max_memory must be"):
            pj.run(fn, *xs, max_memory=bad)


def wait_kernel(waits):
    """A manual copy of the input into a scratch, waited `waits` times: a second wait finds no
    copy in flight and hangs."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def copy_kernel(x_hbm, o_ref, buf, sem):
        copy = pltpu.make_async_copy(x_hbm, buf, sem)
        copy.start()
        copy.wait()
        o_ref[...] = buf[...] + 1.0
        for _ in range(waits - 1):
            copy.wait()  # the wait that hangs

    def f(x):
        return pl.pallas_call(
            copy_kernel, grid=(1,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA(())])(x)
    return f


def test_a_run_stopped_at_an_error_of_the_kernel_says_the_python_line_not_the_deleted_pk():
    import inspect

    import numpy as np

    x = np.ones((8, 128), np.float32)
    assert pj.run(wait_kernel(1), x, reference=lambda x: x + 1.0).ok
    r = pj.run(wait_kernel(2), x)
    assert not r.ok and r.outputs is None, r
    lines, first = inspect.getsourcelines(wait_kernel)
    hang = first + next(k for k, t in enumerate(lines) if "the wait that hangs" in t)
    assert f"{__file__}:{hang}: lowered program: waits for 4096 bytes on sem" in str(r), r
    assert ".pk" not in str(r) and "line " not in str(r), r  # the exported file is gone
    assert f"stopped kernel copy_kernel (the pallas_call at {__file__}:" in str(r), r
    # check points at the same line
    (f,) = pj.check(wait_kernel(2), x).findings
    assert f.rule == "wait-without-copy" and f.python == (__file__, hang), f
