"""Body forms beyond loads, stores and pl.when: lax.cond with results, lax.switch, masked loads
and stores, pl.run_scoped scratch and debug_print."""

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj

F32 = jax.ShapeDtypeStruct((32, 128), jnp.float32)


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if needle in text:
            return start + k
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def rows(kernel, grid=4, scratch_shapes=(), semantics=None, out_index=lambda i: (i, 0)):
    def fn(x):
        return pl.pallas_call(
            kernel, grid=(grid,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), out_index),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            scratch_shapes=list(scratch_shapes),
            compiler_params=None if semantics is None else
            pltpu.CompilerParams(dimension_semantics=semantics))(x)
    return fn


def data(shape=(32, 128), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


# --- lax.cond with results and lax.switch ----------------------------------------------------


def cond_and_switch_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    y = jax.lax.cond(i % 2 == 0, lambda x: x * 2.0, lambda x: x - 1.0, x_ref[...])
    z, s = jax.lax.switch(i, [lambda: (x_ref[...] + 1.0, 1),
                              lambda: (jnp.exp(x_ref[...]), 2),
                              lambda: (x_ref[...] * 0.5, i)])
    o_ref[...] = y + z + s


def cond_and_switch_reference(x):
    i = np.arange(32)[:, None] // 8
    y = np.where(i % 2 == 0, x * 2.0, x - 1.0)
    z = np.where(i == 0, x + 1.0, np.where(i == 1, np.exp(x), x * 0.5))
    s = np.where(i == 0, 1, np.where(i == 1, 2, i))
    return y + z + s


def test_cond_with_results_and_switch_export_as_whens_that_rebind_locals():
    fn = rows(cond_and_switch_kernel)
    text = pj.export(fn, F32)
    body = [t.split("  # ")[0].strip() for t in text.splitlines()]
    # the results start as zeros of their type, then each branch binds them
    assert "c2 = cast(broadcast_to(0, (8, 128)), f32)" in body, text
    assert "when (program_id(0) % 2) == 0:" in body and "c2 = v1 * 2.0" in body, text
    assert "when not ((program_id(0) % 2) == 0):" in body and "c2 = v1 - 1.0" in body, text
    # switch: the clamped index, one when per branch
    assert "v5 = min(max(program_id(0), 0), 2)" in body, text
    for k, value in enumerate(("x_ref[...] + 1.0", "exp(x_ref[...])", "x_ref[...] * 0.5")):
        assert f"when v5 == {k}:" in body and f"c3 = {value}" in body, text
    assert "c4 = program_id(0)" in body, text
    assert "o_ref[...] = (c2 + c3) + cast(c4, f32)" in body, text
    pj.assert_verified(fn, F32)


def test_cond_with_results_and_switch_run_like_interpret_and_the_reference():
    r = pj.run(rows(cond_and_switch_kernel), data(), reference=cond_and_switch_reference,
               rtol=1e-5, atol=1e-5)
    assert r.ok, str(r)


def test_a_bug_in_one_branch_of_a_cond_with_results_is_reported_at_that_branch():
    def kernel(x_ref, o_ref, acc_ref):
        i = pl.program_id(0)
        y = jax.lax.cond(i == 0, lambda: x_ref[...],
                         lambda: acc_ref[...] + x_ref[...])  # acc is never written
        o_ref[...] = y

    fn = rows(kernel, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    r = pj.check(fn, F32)
    assert r.exit_code == 1, str(r)
    # grid point 0 takes the other branch: the read is reported from grid point 1 on
    assert any(f.rule in ("uninitialized-read", "uninitialized-accumulator")
               and "grid point (1,)" in f.message
               and f.python[1] == line_of(kernel, "acc_ref[...] +") for f in r.findings), str(r)


def test_a_switch_on_array_data_is_a_located_unsupported_error():
    def kernel(x_ref, o_ref):
        k = (x_ref[0, 0] > 0).astype(jnp.int32)
        o_ref[...] = jax.lax.switch(k, [lambda: x_ref[...], lambda: -x_ref[...],
                                        lambda: x_ref[...]])

    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(rows(kernel), F32)
    assert "a switch index computed from array data has no .pk form" in err.value.message
    assert err.value.location.endswith(f":{line_of(kernel, 'jax.lax.switch')}")


# --- masked loads and stores -----------------------------------------------------------------

N_COLS = 1000  # not a multiple of the 128-wide blocks: the last block is partial


def cols(kernel, out_cols=N_COLS, out_block=(8, 128), out_index=lambda i: (0, i),
         semantics=None):
    def fn(x):
        return pl.pallas_call(
            kernel, grid=(8,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (0, i))],
            out_specs=pl.BlockSpec(out_block, out_index),
            out_shape=jax.ShapeDtypeStruct((8, out_cols), jnp.float32),
            compiler_params=None if semantics is None else
            pltpu.CompilerParams(dimension_semantics=semantics))(x)
    return fn


COLS = jax.ShapeDtypeStruct((8, N_COLS), jnp.float32)


def masked_kernel(x_ref, o_ref):
    pos = pl.program_id(0) * 128 + jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
    m = pos < N_COLS
    x = plgpu_load(x_ref, mask=m, other=0.0)
    y = pltpu.load(x_ref.at[pl.ds(0, 8), :], mask=m)
    pltpu.store(o_ref, x * 2.0 + y, mask=m)


def plgpu_load(ref, **kw):
    from jax.experimental.pallas import triton as pltriton

    return pltriton.load(ref, **kw)


def test_masked_loads_and_stores_export_to_where_forms_verify_and_run_like_interpret():
    fn = cols(masked_kernel)
    text = pj.export(fn, COLS)
    body = [t.split("  # ")[0].strip() for t in text.splitlines()]
    assert "v1 = ((program_id(0) * 128) + iota((8, 128), 1)) < 1000" in body, text
    # other= gives where(mask, x, other); without it the load goes through a scratch made
    # undefined at each load, whose masked-off elements nothing writes; the store keeps the
    # target where the mask does not hold
    k = body.index("x_ref_masked[...] = where(v1, x_ref[...], x_ref_masked[...])")
    assert body[k - 1] == "x_ref_masked[...] = undefined", text
    assert "o_ref[...] = where(v1, (where(v1, x_ref[...], 0.0) * 2.0) + x_ref_masked[...], " \
        "o_ref[...])" in body, text
    pj.assert_verified(fn, COLS)
    r = pj.run(fn, data((8, N_COLS)), reference=lambda x: x * 3.0)
    assert r.ok, str(r)


def reduce_kernel(mask_ok):
    def masked_row_sum(x_ref, o_ref):
        pos = pl.program_id(0) * 128 + jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        m = (pos < N_COLS) if mask_ok else (pos <= N_COLS)
        s = jnp.sum(plgpu_load(x_ref, mask=m, other=0.0), axis=1, keepdims=True)
        o_ref[...] = jnp.broadcast_to(s, (8, 128))
    return masked_row_sum


def test_a_masked_load_whose_mask_keeps_the_padding_out_of_a_reduction_verifies():
    pj.assert_verified(cols(reduce_kernel(True), out_cols=1024), COLS)


def test_an_off_by_one_load_mask_lets_the_padding_into_a_reduction_and_is_reported():
    kernel = reduce_kernel(False)
    r = pj.check(cols(kernel, out_cols=1024), COLS)
    assert r.exit_code == 1, str(r)
    # the padding past column 1000 reaches the last block's sum, which is written out
    assert any(f.rule == "uninitialized-read" and "grid point (7,)" in f.message
               for f in r.findings), str(r)


def unmasked_use_kernel(mask_kept):
    # pltpu.load without other=: the columns past 64 of each block are undefined
    def half_load(x_ref, o_ref):
        m = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1) < 64
        y = pltpu.load(x_ref, mask=m)
        o_ref[...] = jnp.where(m, y * 2.0, 0.0) if mask_kept else y * 2.0
    return half_load


def test_a_masked_load_without_other_goes_through_a_scratch_nothing_else_writes():
    kernel = unmasked_use_kernel(True)
    k, = pj.export_kernels(rows(kernel), F32)
    body = [t.split("  # ")[0].strip() for t in k.text.splitlines()]
    assert "scratch x_ref_masked: f32[8, 128]" in body, k.text
    assert body[body.index("v1 = iota((8, 128), 1) < 64") + 1:][:3] == [
        "x_ref_masked[...] = undefined",
        "x_ref_masked[...] = where(v1, x_ref[...], x_ref_masked[...])",
        "o_ref[...] = where(v1, x_ref_masked[...] * 2.0, broadcast_to(0.0, (8, 128)))"], k.text
    # the scratch is declared at the load's line
    decl = next(n for n, t in enumerate(body, start=1) if t.startswith("scratch x_ref_masked"))
    assert k.line_map[decl][1] == line_of(kernel, "pltpu.load("), k.text


def test_masked_off_elements_of_a_load_without_other_kept_out_of_the_output_verify_and_run():
    fn = rows(unmasked_use_kernel(True))
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(), reference=lambda x: np.where(np.arange(128) < 64, 2.0 * x, 0.0))
    assert r.ok, str(r)


def test_masked_off_elements_of_a_load_without_other_written_out_are_an_uninitialized_read():
    kernel = unmasked_use_kernel(False)
    r = pj.check(rows(kernel), F32)
    assert r.exit_code == 1, str(r)
    assert any(f.rule == "uninitialized-read" and f.python is not None
               and f.python[0].endswith("test_body_forms.py") for f in r.findings), str(r)


def shrinking_mask_kernel(mask_kept):
    # The mask covers the whole block at grid point 0 and half of it after: what step 0's
    # load kept of x is no value of a later step's masked-off elements.
    def kernel(x_ref, o_ref):
        col = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        m = col < jnp.where(pl.program_id(0) == 0, 128, 64)
        y = pltpu.load(x_ref, mask=m)
        o_ref[...] = jnp.where(m, y * 2.0, 0.0) if mask_kept else y * 2.0
    return kernel


def test_masked_off_elements_are_undefined_at_every_load_not_what_an_earlier_step_loaded():
    kernel = shrinking_mask_kernel(False)
    r = pj.check(rows(kernel), F32)
    assert r.exit_code == 1, str(r)
    # grid point 1 writes out the columns its load left undefined (step 0's load took them)
    assert any(f.rule == "uninitialized-read" and "at grid point (1,)" in f.message
               for f in r.findings), str(r)


def test_a_shrinking_load_mask_kept_out_of_the_output_verifies_and_runs():
    fn = rows(shrinking_mask_kernel(True))
    pj.assert_verified(fn, F32)
    keep = np.broadcast_to(np.arange(128) < 64, (32, 128)).copy()
    keep[:8] = True
    r = pj.run(fn, data(), reference=lambda x: np.where(keep, 2.0 * x, 0.0))
    assert r.ok, str(r)


def halves(second_half_ok):
    # Two grid points share one output block; each stores its half of the columns.
    def halves_kernel(x_ref, o_ref):
        i = pl.program_id(0)
        col = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        lo = i * 64 if second_half_ok else 0
        pltpu.store(o_ref, x_ref[...], mask=(col >= lo) & (col < lo + 64))

    def fn(x):
        return pl.pallas_call(
            halves_kernel, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (0, i))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)
    return halves_kernel, fn


HALVES = jax.ShapeDtypeStruct((8, 256), jnp.float32)


def test_masked_stores_that_together_write_a_shared_block_verify_and_run_like_interpret():
    _, fn = halves(True)
    text = pj.export(fn, HALVES)
    assert "o_ref[...] = where(" in text and ", x_ref[...], o_ref[...])" in text, text
    pj.assert_verified(fn, HALVES)
    x = data((8, 256))
    r = pj.run(fn, x, reference=lambda x: np.concatenate([x[:, :64], x[:, 192:]], axis=1))
    assert r.ok, str(r)


def test_masked_stores_that_leave_part_of_a_block_unwritten_are_reported_at_the_store():
    kernel, fn = halves(False)
    r = pj.check(fn, HALVES)
    assert r.exit_code == 1, str(r)
    assert any(f.python is not None and f.python[1] == line_of(kernel, "pltpu.store(")
               for f in r.findings), str(r)


def test_the_old_value_of_a_masked_swap_is_the_target_where_the_mask_holds_else_the_value():
    from jax._src.pallas import primitives as pallas_primitives  # masked_swap, no public swap

    def kernel(x_ref, o_ref):
        col = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        o_ref[...] = jnp.full((8, 128), 3.0, jnp.float32)
        old = pallas_primitives.swap(o_ref, None, x_ref[...] * 2.0, mask=col < 64)
        o_ref[...] += old * 10.0

    fn = rows(kernel, grid=4)
    text = pj.export(fn, F32)
    assert "v2 = where(iota((8, 128), 1) < 64, o_ref[...], v1)" in text, text
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(),
               reference=lambda x: np.where(np.arange(128) < 64, 2 * x + 30.0, 20 * x + 3.0))
    assert r.ok, str(r)


# --- pl.run_scoped and debug_print -----------------------------------------------------------


def scoped_kernel(x_ref, o_ref):
    def double(tmp):
        tmp[...] = x_ref[...] * 2.0
        return tmp[...] + 1.0

    y = pl.run_scoped(double, pltpu.VMEM((8, 128), jnp.float32))

    def copy_in(tmp, sem):
        pltpu.async_copy(x_ref, tmp, sem).wait()
        o_ref[...] = y + tmp[...]

    pl.run_scoped(copy_in, pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA(()))


def test_run_scoped_buffers_become_scratch_declared_at_the_scope_and_run_like_interpret():
    fn = rows(scoped_kernel)
    k, = pj.export_kernels(fn, F32)
    lines = k.text.splitlines()
    decl = {t.split("  # ")[0].strip(): n for n, t in enumerate(lines, start=1)
            if t.lstrip().startswith("scratch ")}
    assert list(decl) == ["scratch tmp: f32[8, 128]", "scratch tmp2: f32[8, 128]",
                          "scratch sem: dma_sem"], k.text
    # each declaration is located at its pl.run_scoped call
    assert k.line_map[decl["scratch tmp: f32[8, 128]"]][1] == \
        line_of(scoped_kernel, "pl.run_scoped(double")
    assert k.line_map[decl["scratch sem: dma_sem"]][1] == \
        line_of(scoped_kernel, "pl.run_scoped(copy_in")
    body = [t.split("  # ")[0].strip() for t in lines]
    # each buffer (not the semaphore) starts undefined at its scope's entry
    assert [t for t in body if t.endswith("= undefined")] == [
        "tmp[...] = undefined", "tmp2[...] = undefined"], k.text
    assert body.index("tmp[...] = undefined") < body.index("tmp[...] = x_ref[...] * 2.0")
    # the scope's value is read inside the scope, before the next one starts
    assert body.index("v1 = tmp[...] + 1.0") < \
        body.index("async_copy(x_ref[...], tmp2[...], sem).start()")
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(), reference=lambda x: 3.0 * x + 1.0)
    assert r.ok, str(r)


def test_a_run_scoped_buffer_read_before_it_is_written_is_reported_at_the_read():
    def kernel(x_ref, o_ref):
        def scope(tmp):
            o_ref[...] = tmp[...] + x_ref[...]  # tmp starts undefined

        pl.run_scoped(scope, pltpu.VMEM((8, 128), jnp.float32))

    r = pj.check(rows(kernel), F32)
    assert r.exit_code == 1, str(r)
    assert any(f.rule in ("uninitialized-read", "uninitialized-accumulator")
               and f.python[1] == line_of(kernel, "tmp[...] + x_ref") for f in r.findings), str(r)


def scope_written_at_step_0_only(every_step):
    def kernel(x_ref, o_ref):
        write = jnp.logical_or(every_step, pl.program_id(0) == 0)

        def scope(tmp):
            @pl.when(write)
            def _():
                tmp[...] = x_ref[...]

            o_ref[...] = tmp[...] + x_ref[...]  # tmp is undefined at each entry of the scope

        pl.run_scoped(scope, pltpu.VMEM((8, 128), jnp.float32))
    return kernel


def test_a_run_scoped_buffer_written_at_every_entry_before_it_is_read_verifies():
    fn = rows(scope_written_at_step_0_only(True))
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(), reference=lambda x: 2.0 * x)
    assert r.ok, str(r)


def test_a_run_scoped_buffer_read_before_written_at_a_later_entry_is_reported():
    kernel = scope_written_at_step_0_only(False)
    r = pj.check(rows(kernel), F32)
    assert r.exit_code == 1, str(r)
    assert any(f.rule in ("uninitialized-read", "uninitialized-accumulator")
               and f.python[1] == line_of(kernel, "tmp[...] + x_ref") for f in r.findings), str(r)


def test_run_scoped_with_collective_axes_is_a_located_unsupported_error():
    from jax._src.pallas import primitives as pallas_primitives

    def kernel(x_ref, o_ref):
        def scope(tmp):
            tmp[...] = x_ref[...]
            o_ref[...] = tmp[...]

        pallas_primitives.run_scoped(scope, pltpu.VMEM((8, 128), jnp.float32),
                                     collective_axes=("x",))

    try:
        jax.make_jaxpr(rows(kernel))(F32)
    except Exception:  # noqa: BLE001 - this jax does not trace it outside a mesh
        pytest.skip("run_scoped(collective_axes=) does not trace outside a mesh in this jax")
    with pytest.raises(pj.UnsupportedError, match="collective_axes"):
        pj.export(rows(kernel), F32)


def test_debug_print_is_left_out_with_a_note_at_its_python_line_and_its_reads_kept():
    def kernel(x_ref, o_ref, acc_ref):
        pl.debug_print("step {}", pl.program_id(0))
        pl.debug_print("acc {}", acc_ref[0, 0])  # acc is never written: a real read of it
        o_ref[...] = x_ref[...]

    fn = rows(kernel, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    k, = pj.export_kernels(fn, F32)
    lines = k.text.splitlines()
    assert "        # dropped: debug_print('step {}', program_id(0)) prints, writing no memory" \
        in lines, k.text
    assert "        # dropped: debug_print('acc {}', v1) prints, writing no memory" in lines
    assert [(p, py[1]) for p, py, _ in k.dropped] == [
        ("debug_print", line_of(kernel, '"step {}"')), ("debug_print", line_of(kernel, '"acc {}"'))]
    assert all(lines[n - 1].lstrip().startswith("# dropped: debug_print") for _, _, n in k.dropped)
    r = pj.check(fn, F32)
    assert r.exit_code == 1, str(r)
    assert any(f.python[1] == line_of(kernel, '"acc {}"') for f in r.findings), str(r)
    step_line = line_of(kernel, '"step {}"')
    assert (f"test_body_forms.py:{step_line}: note: 'debug_print' is left out of kernel "
            f"{k.name}") in r.report(), r.report()


def test_debug_check_is_left_out_like_debug_print_with_a_note_and_its_reads_kept():
    # pl.debug_check writes no memory (and checks only under pl.enable_debug_checks): a comment
    # with the message and the failure predicate (`not cond`), not an unsupported 'check'.
    def kernel(x_ref, o_ref, acc_ref):
        pl.debug_check(pl.program_id(0) < 4, "step in range")
        pl.debug_check(acc_ref[0, 0] >= 0.0, "acc not negative")  # acc never written: a read
        o_ref[...] = x_ref[...]

    fn = rows(kernel, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    k, = pj.export_kernels(fn, F32)
    lines = k.text.splitlines()
    assert any(t.startswith("        # dropped: debug_check('step in range', ") and
               "program_id(0) < 4" in t and t.endswith(") checks, writing no memory")
               for t in lines), k.text
    assert "        # dropped: debug_check('acc not negative', v1) checks, writing no memory" \
        in lines, k.text
    assert [(p, py[1]) for p, py, _ in k.dropped] == [
        ("debug_check", line_of(kernel, '"step in range"')),
        ("debug_check", line_of(kernel, '"acc not negative"'))]
    r = pj.check(fn, F32)
    assert r.exit_code == 1, str(r)
    assert any(f.python[1] == line_of(kernel, '"acc not negative"') for f in r.findings), str(r)
    assert (f"test_body_forms.py:{line_of(kernel, 'step in range')}: note: 'debug_check' is left "
            f"out of kernel {k.name}") in r.report(), r.report()

    def checked(x_ref, o_ref):
        pl.debug_check(pl.program_id(0) < 4, "step in range")
        pl.debug_check(x_ref[0, 0] > -100.0, "x in range")
        o_ref[...] = x_ref[...] * 2.0

    pj.assert_verified(rows(checked), F32)
    r = pj.run(rows(checked), data(), reference=lambda x: 2.0 * x)
    assert r.ok, str(r)


def test_a_kernel_with_only_a_debug_print_of_values_verifies_and_runs():
    def kernel(x_ref, o_ref):
        y = x_ref[...] * 2.0
        pl.debug_print("y {}", y[0, 0])
        o_ref[...] = y

    fn = rows(kernel)
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(), reference=lambda x: 2.0 * x)
    assert r.ok, str(r)


def test_a_when_or_loop_that_holds_only_a_debug_print_stays_a_valid_block():
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            pl.debug_print("first")

        def body(t, c):
            pl.debug_print("t {}", t)
            return c

        jax.lax.fori_loop(0, 3, body, 0)
        o_ref[...] = x_ref[...]

    fn = rows(kernel)
    k, = pj.export_kernels(fn, F32)
    assert len(k.dropped) == 2, k.text
    for _, _, line in k.dropped:  # the block around each comment holds a statement too
        following = k.text.splitlines()[line].split("  # ")[0]
        assert following.strip().startswith("v") and following.strip().endswith("= 0"), k.text
    pj.assert_verified(fn, F32)


# Compiler hints: pl.multiple_of returns its operand, so a slice start or a DMA address with
# the alignment hint exports as the same integer expression, and is checked as without it.

def hinted_slice_kernel(hint):
    def kernel(x_ref, o_ref):
        start = pl.program_id(1) * 128
        if hint:
            start = pl.multiple_of(start, 128)
        o_ref[...] = x_ref[:, pl.ds(start, 128)] * 2.0
    return kernel


def hinted_slice(hint, bk=128):
    def fn(x):
        return pl.pallas_call(
            hinted_slice_kernel(hint), grid=(2, 256 // bk),
            in_specs=[pl.BlockSpec((16, 256), lambda i, j: (i, 0))],
            out_specs=pl.BlockSpec((16, 128), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((32, 256 // bk * 128), jnp.float32))(x)
    return fn


def hinted_dma(x_hbm, o_ref, buf, sem):
    start = pl.multiple_of(pl.program_id(0) * 8, 8)
    cp = pltpu.make_async_copy(x_hbm.at[pl.ds(start, 8), :], buf, sem)
    cp.start()
    cp.wait()
    o_ref[...] = buf[...]


def test_multiple_of_is_its_operand_in_a_slice_start_and_a_dma_address():
    x = jnp.arange(32 * 256, dtype=jnp.float32).reshape(32, 256)
    assert pj.export(hinted_slice(True), x) == pj.export(hinted_slice(False), x)
    pj.assert_verified(hinted_slice(True), x)
    assert pj.run(hinted_slice(True), x, reference=lambda x: x * 2.0).ok

    def dma(x):
        return pl.pallas_call(
            hinted_dma, grid=(4,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(x)

    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128)
    pj.assert_verified(dma, x)
    assert pj.run(dma, x, reference=lambda x: x).ok


def test_a_hinted_slice_start_past_the_block_is_still_out_of_bounds():
    # bk = 64: four column steps, the start 128 * j passes the 256 columns at j = 2.
    r = pj.check(hinted_slice(True, bk=64), jnp.ones((32, 256), jnp.float32))
    assert r.exit_code == 1 and "index-out-of-bounds" in {f.rule for f in r.findings}, r.report()


def popcount_start_kernel(x_ref, o_ref):
    start = jax.lax.population_count(pl.program_id(0)) * 8
    o_ref[...] = x_ref[pl.ds(start, 8), :]


def test_an_index_computed_by_an_integer_op_without_a_pk_form_names_that_op():
    def fn(x):
        return pl.pallas_call(
            popcount_start_kernel, grid=(4,), in_specs=[pl.BlockSpec((64, 128), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)

    r = pj.check(fn, jax.ShapeDtypeStruct((64, 128), jnp.float32))
    assert r.exit_code == 2, r.report()
    (u,) = r.unsupported
    assert "computed by 'population_count'" in str(u) and "array data" not in str(u), str(u)
    assert u.location.endswith(f":{line_of(popcount_start_kernel, 'x_ref[pl.ds')}"), u.location


# A ragged reduction axis (300 rows in blocks of 128), the last block's padding rows masked
# out by their global row, iota + program_id * 128 < 300: the usual idiom, decided element by
# element in the lowered program. `<=` lets row 300 through.

def masked_column_sums(op):
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)

        @pl.when(i == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        row = jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0) + i * 128
        x = jnp.where(op(row, 300), x_ref[...], 0.0)
        o_ref[...] += jnp.broadcast_to(jnp.sum(x, axis=0, keepdims=True), (8, 256))

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(pl.cdiv(300, 128),), in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 256), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 256), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)
    return fn


def test_a_ragged_reduction_masked_by_its_grid_point_verifies_and_its_off_by_one_is_reported():
    x = jax.random.normal(jax.random.PRNGKey(0), (300, 256), jnp.float32)
    ok = masked_column_sums(lambda r, n: r < n)
    pj.assert_verified(ok, x)
    want = lambda x: jnp.broadcast_to(jnp.sum(x, axis=0, keepdims=True), (8, 256))
    assert pj.run(ok, x, reference=want, rtol=1e-4, atol=1e-4).ok
    r = pj.check(masked_column_sums(lambda r, n: r <= n), x)
    assert r.exit_code == 1 and {f.rule for f in r.findings} == {"uninitialized-read"}, r.report()


@pytest.mark.parametrize("form", ["cast_of_bf16", "abs", "scaled"])
def test_a_mask_around_an_elementwise_function_of_the_load_masks_the_load(form):
    # where(mask, f(x_ref[...]), 0) with f elementwise (an astype, abs, a scale): each
    # element of f's value comes from the load's element at its position, so the mask keeps
    # the padding out as it does around the load itself. x * mask (NaN * 0) does not.
    f = {"cast_of_bf16": lambda x: x.astype(jnp.float32), "abs": jnp.abs,
         "scaled": lambda x: 2.0 * x + 1.0}[form]
    dt = jnp.bfloat16 if form == "cast_of_bf16" else jnp.float32

    def kernel(x_ref, o_ref, *, multiply):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        row = jax.lax.broadcasted_iota(jnp.int32, (128, 256), 0) + pl.program_id(0) * 128
        if multiply:
            x = f(x_ref[...]) * (row < 300).astype(jnp.float32)
        else:
            x = jnp.where(row < 300, f(x_ref[...]), 0.0)
        o_ref[...] += jnp.broadcast_to(jnp.sum(x, axis=0, keepdims=True), (8, 256))

    def fn(x, multiply=False):
        return pl.pallas_call(
            functools.partial(kernel, multiply=multiply), grid=(pl.cdiv(300, 128),),
            in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 256), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 256), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)

    x = jax.random.normal(jax.random.PRNGKey(0), (300, 256), jnp.float32).astype(dt)
    pj.assert_verified(fn, x)
    want = lambda x: jnp.broadcast_to(jnp.sum(f(x), axis=0, keepdims=True), (8, 256))
    assert pj.run(fn, x, reference=want, rtol=1e-2, atol=1e-2).ok
    r = pj.check(lambda x: fn(x, multiply=True), x)
    assert r.exit_code == 1 and "partial-block-reduction" in {f.rule for f in r.findings}, r


@pytest.mark.parametrize("through_local", [False, True])
def test_an_accumulation_through_a_local_is_one_and_an_init_mid_reduction_discards_it(through_local):
    # acc[...] = acc[...] + s, or a = acc[...]; acc[...] = a + s with a used again: both add
    # into acc, and an init that also fires at k == 2 throws away what k = 0, 1 added.
    def kernel(x_ref, o_ref, acc, last, *, reset_at):
        k = pl.program_id(1)

        @pl.when((k == 0) | (k == reset_at))
        def _():
            acc[...] = jnp.zeros_like(acc)

        s = jnp.sum(x_ref[...], axis=1, keepdims=True)
        if through_local:
            a = acc[...]
            acc[...] = a + s
            last[...] = a
        else:
            acc[...] = acc[...] + s
            last[...] = s

        @pl.when(k == pl.num_programs(1) - 1)
        def _():
            o_ref[...] = acc[...]

    def fn(x, reset_at=0):
        return pl.pallas_call(
            functools.partial(kernel, reset_at=reset_at), grid=(2, 4),
            in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
            out_specs=pl.BlockSpec((8, 1), lambda i, k: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 1), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 1), jnp.float32)] * 2,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")))(x)

    x = jax.ShapeDtypeStruct((16, 512), jnp.float32)
    pj.assert_verified(fn, x)
    r = pj.check(lambda x: fn(x, reset_at=2), x)
    assert {f.rule for f in r.findings} == {"accumulator-reset"}, r
    assert "re-initializes scratch 'acc' at grid point (0, 2)" in str(r), r


def centered_rows_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x - jnp.mean(x, axis=0, keepdims=True)


def test_a_message_that_names_a_line_of_the_export_names_the_python_line_instead():
    fn = lambda x: pl.pallas_call(  # noqa: E731
        centered_rows_kernel, grid=(pl.cdiv(300, 128),),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((300, 256), jnp.float32))(x)
    r = pj.check(fn, jax.ShapeDtypeStruct((300, 256), jnp.float32))
    (f,) = r.findings
    line = line_of(centered_rows_kernel, "jnp.mean")
    assert f.rule == "partial-block-reduction", r.report()
    assert f"contracts it (dot/sum/max) on test_body_forms.py:{line}" in f.message, f.message


def read_around_a_wait_kernel(a_hbm, o_ref, abuf, other, sem, *, read_first):
    pltpu.make_async_copy(a_hbm, abuf, sem.at[0]).start()
    if read_first:
        s = abuf[...] * 2.0  # before the copy into abuf is waited
    # a wait-only descriptor that names another buffer of the same size and semaphore
    pltpu.make_async_copy(a_hbm, other, sem.at[0]).wait()
    if not read_first:
        s = abuf[...] * 2.0
    o_ref[...] = s + 1.0


def read_around_a_wait(read_first):
    return lambda a: pl.pallas_call(
        functools.partial(read_around_a_wait_kernel, read_first=read_first),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.VMEM((8, 128), jnp.float32),
                        pltpu.SemaphoreType.DMA((1,))])(a)


def test_a_read_is_never_moved_past_a_dma_wait_so_a_read_before_the_wait_is_a_slot_race():
    a = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    good = read_around_a_wait(read_first=False)
    pj.assert_verified(good, a)
    assert pj.run(good, a, reference=lambda a: 2 * a + 1).ok
    text = pj.export(read_around_a_wait(read_first=True), a)
    lines = [t.split("  #")[0].strip() for t in text.splitlines()]
    read = next(k for k, t in enumerate(lines) if "abuf[...] * 2.0" in t)
    wait = next(k for k, t in enumerate(lines) if t.endswith(".wait()"))
    assert read < wait, text
    r = pj.check(read_around_a_wait(read_first=True), a)
    assert "slot-race" in {f.rule for f in r.findings}, r


def test_an_index_map_that_reads_smem_state_the_body_stores_into_is_unsupported():
    def kernel(keep_ref, cur_ref, x_ref, o_ref):
        @pl.when(keep_ref[pl.program_id(0)] != 0)
        def _():
            o_ref[...] = x_ref[...]
            cur_ref[0] = cur_ref[0] + 1

    def fn(keep, cur, x):
        return pl.pallas_call(
            kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=2, grid=(4,),
                in_specs=[pl.BlockSpec((8, 128), lambda i, kp, c: (i, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i, kp, c: (c[0], 0))),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(keep, cur, x)

    r = pj.check(fn, np.array([1, 0, 1, 1], np.int32), np.array([0], np.int32),
                 jax.ShapeDtypeStruct((32, 128), jnp.float32))
    assert r.exit_code == 2, r
    assert "an index map reads 'cur_ref', which the body stores into" in str(r), r


def test_smem_state_at_a_subscript_that_is_not_a_constant_is_unsupported():
    def kernel(x_ref, o_ref, c_ref):
        j = pl.program_id(0)
        c_ref[j] = j + 1  # one counter per grid step: SMEM state is followed element by element
        o_ref[...] = x_ref[...] * c_ref[j].astype(jnp.float32)

    fn = lambda x: pl.pallas_call(  # noqa: E731
        kernel, grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda j: (j, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda j: (j, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
        scratch_shapes=[pltpu.SMEM((4,), jnp.int32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)
    r = pj.check(fn, jax.ShapeDtypeStruct((32, 128), jnp.float32))
    assert r.exit_code == 2, r
    assert "a subscript that is not a constant" in str(r), r


def segment_flush_kernel(seg_ref, x_ref, o_ref, *, clamp):
    t = pl.program_id(0)
    nxt = jnp.minimum(t + 1, 3) if clamp else t + 1
    # jnp's | takes both sides: seg_ref[t + 1] is loaded at t == 3 too, past the table
    @pl.when((t == 3) | (seg_ref[t] != seg_ref[nxt]))
    def _():
        o_ref[...] = x_ref[...]


def segment_flush(clamp):
    return lambda seg, x: pl.pallas_call(
        functools.partial(segment_flush_kernel, clamp=clamp),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda t, s: (t, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda t, s: (s[t], 0))),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(seg, x)


def test_a_prefetch_read_on_either_side_of_jnp_or_is_a_read_past_the_table_at_the_last_step():
    seg = np.array([0, 0, 1, 1], np.int32)
    x = jax.ShapeDtypeStruct((32, 128), jnp.float32)
    pj.assert_verified(segment_flush(clamp=True), seg, x)
    r = pj.check(segment_flush(clamp=False), seg, x)
    (f,) = r.findings
    assert f.rule == "index-out-of-bounds", r
    assert "'seg_ref[program_id(0) + 1]' at grid point (3,): its subscript 0 is 4, outside 0:4" in f.message, f


def test_aliasing_a_scalar_prefetch_operand_is_a_located_unsupported_error():
    # (It used to alias the last output to itself: a negative index.)
    def kernel(pos_ref, x_ref, po_ref):
        b = pl.program_id(0)
        po_ref[b] = pos_ref[b] + 1

    def fn(pos, x):
        return pl.pallas_call(
            kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(3,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec(memory_space=pltpu.SMEM)),
            out_shape=jax.ShapeDtypeStruct((3,), jnp.int32), input_output_aliases={0: 0})(pos, x)

    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(fn, jnp.asarray([5, 23, 62], jnp.int32), jnp.zeros((8, 128), jnp.float32))
    assert "aliases scalar prefetch operand" in err.value.message
    assert err.value.location is not None


# Bitwise operations and bool casts on integer scalars (lax's and/or/xor/not are bitwise on
# integers, logical on bools) ------------------------------------------------------------------

BITWISE = {
    "and_mask": lambda i: i & 3,
    "and_bits": lambda i: i & 6,
    "or": lambda i: i | 4,
    "xor_slot": lambda i: i ^ 1,
    "xor_bit": lambda i: i ^ 2,
    "shl": lambda i: i << 3,
    "shr": lambda i: i >> 1,
    "not": lambda i: ~i,
    "bool_cast": lambda i: i.astype(bool).astype(jnp.int32),
    "bool_and": lambda i: ((i > 0) & (i < 3)).astype(jnp.int32),
}


@pytest.mark.parametrize("name", sorted(BITWISE))
def test_bitwise_integer_scalars_have_exact_pk_forms_that_run_like_interpret(name):
    f = BITWISE[name]

    def kernel(o_ref):
        o_ref[...] = jnp.full((8, 128), f(pl.program_id(0) - 3), jnp.float32)

    def fn():
        return pl.pallas_call(kernel, grid=(8,), out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                              out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))()

    text = pj.export(fn)
    assert "opaque(" not in text, text
    # (.pk's `and` and `or` are logical: a bitwise & of integers is never one)
    assert (" and " in text.split("body:")[1]) == (name == "bool_and"), text
    pj.assert_verified(fn)
    want = np.repeat([int(f(jnp.int32(i - 3))) for i in range(8)], 8)[:, None] * np.ones((1, 128))
    r = pj.run(fn, reference=lambda: want)
    assert r.ok, str(r)


def test_a_ping_pong_slot_from_xor_and_a_reset_on_a_bit_mask_are_read_exactly():
    # (i & 7) == 0 re-zeroes a global sum every 8 steps: the accumulator-reset that i % 8 is.
    def kernel(x_ref, o_ref, buf, sem):
        i = pl.program_id(0)

        @pl.when((i & 7) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        slot = i & 1
        cp = pltpu.make_async_copy(x_ref.at[pl.ds(i * 8, 8)], buf.at[slot], sem.at[slot])
        cp.start()
        cp.wait()
        o_ref[...] += jnp.sum(buf[slot ^ 1 ^ 1], axis=0, keepdims=True)

    def fn(x):
        return pl.pallas_call(
            kernel, grid=(16,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((1, 128), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((1, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)

    r = pj.check(fn, jax.ShapeDtypeStruct((128, 128), jnp.float32))
    assert [f.rule for f in r.findings] == ["accumulator-reset"], r.report()
    assert "% 8" in pj.export(fn, jax.ShapeDtypeStruct((128, 128), jnp.float32))


def test_an_index_map_of_shifts_and_bit_masks_covers_each_block_once():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def fn(x):
        spec = pl.BlockSpec((8, 128), lambda i: (i >> 1, i & 1))
        return pl.pallas_call(kernel, grid=(8,), in_specs=[spec], out_specs=spec,
                              out_shape=jax.ShapeDtypeStruct((32, 256), jnp.float32))(x)

    x = np.random.default_rng(0).standard_normal((32, 256), dtype=np.float32)
    assert "(i // 2, i % 2)" in pj.export(fn, x)
    pj.assert_verified(fn, x)
    assert pj.run(fn, x, reference=lambda x: x + 1.0).ok


def test_an_index_map_with_a_multi_way_select_n_is_nested_wheres_checked_case_by_case():
    from jax import lax

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def rows(pick):
        def fn(x):
            return pl.pallas_call(kernel, grid=(4,),
                                  in_specs=[pl.BlockSpec((8, 128), lambda i: (pick(i), 0))],
                                  out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                                  out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)
        return fn

    x = np.random.default_rng(0).standard_normal((32, 128), dtype=np.float32)
    ok = rows(lambda i: lax.select_n(jnp.minimum(i, 2), 3, 2, 0))
    assert "where(min(i, 2) == 0, 3, where(min(i, 2) == 1, 2, 0))" in pj.export(ok, x)
    pj.assert_verified(ok, x)
    r = pj.run(ok, x, reference=lambda x: (x.reshape(4, 8, 128)[jnp.array([3, 2, 0, 0])] * 2.0)
               .reshape(32, 128))
    assert r.ok, str(r)
    # Its third case one block past the end: grid points 2 and 3 read block 4 of 4.
    r = pj.check(rows(lambda i: lax.select_n(jnp.minimum(i, 2), 3, 2, 4)), x)
    assert [f.rule for f in r.findings] == ["index-out-of-bounds"], r.report()


def test_a_bitwise_op_of_two_grid_indices_is_unsupported_and_says_what_integers_can_use():
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[...] = x_ref[pl.ds((i ^ (i >> 1)) * 8, 8), :]  # a Gray code: no .pk form

    def fn(x):
        return pl.pallas_call(kernel, grid=(4,), in_specs=[pl.BlockSpec((32, 128), lambda i: (0, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                              out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)

    r = pj.check(fn, jax.ShapeDtypeStruct((32, 128), jnp.float32))
    assert r.exit_code == 2, r.report()
    (u,) = r.unsupported
    assert "computed from integers by an operation" in str(u) and "array data" not in str(u), str(u)


def unrolled_update_kernel(x_ref, o_ref):
    # A Python loop in the body (an unrolled Horner / Newton step): one long chain of values.
    t = x_ref[...]
    for _ in range(40):
        t = t * 0.5 + x_ref[...]
    o_ref[...] = t


def test_a_long_unrolled_chain_exports_in_locals_within_the_expression_depth_and_verifies():
    def f(x):
        return pl.pallas_call(
            unrolled_update_kernel, grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)

    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128) / 4096
    text = pj.export(f, x)
    assert max(line.count("(") for line in text.splitlines()) <= 40, text
    res = pj.check(f, x)
    assert res.verified, str(res)

    def ref(x):
        t = x
        for _ in range(40):
            t = t * 0.5 + x
        return t

    assert pj.run(f, x, reference=ref).ok
