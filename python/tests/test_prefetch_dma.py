"""Scalar prefetch (PrefetchScalarGridSpec) and manual DMAs / semaphores in kernel bodies."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import kernels as K
import pipecheck_jax as pj
from test_export import line_of


# Scalar prefetch ----------------------------------------------------------------------------


def test_prefetch_contents_passed_as_an_array_are_written_into_the_spec_and_verify():
    fn, args = K.make_dynamic_block_gather()
    ids = np.array([3, 0, 0, 2], np.int32)
    text = pj.export(fn, ids, args[1])
    assert "prefetch block_idx: i32[4] = [3, 0, 0, 2]" in text
    assert "index=(i, block_idx) -> (block_idx[i], 0)" in text
    assert "index=(i, block_idx) -> (i, 0)" in text
    assert "o_ref[...] = x_ref[...] + cast(block_idx[program_id(0)], f32)" in text
    pj.assert_verified(fn, ids, args[1])


def test_an_out_of_range_prefetch_id_is_index_out_of_bounds_at_the_index_map_line():
    fn, args = K.make_dynamic_block_gather()
    r = pj.check(fn, np.array([3, 0, 4, 2], np.int32), args[1])
    assert r.exit_code == 1
    assert r.verdicts == {"dynamic_block_gather_kernel": "violation"}
    (f,) = r.findings
    assert f.rule == "index-out-of-bounds"
    want = line_of(K.make_dynamic_block_gather, "in_specs=")
    assert f.python is not None and f.python[0].endswith("kernels.py")
    assert f.python[1] == want, f.python
    assert "block index 4 along dim 0 is outside [0, 4)" in f.message


def test_prefetch_contents_unknown_at_export_are_unsupported_unless_described():
    fn, args = K.make_dynamic_block_gather()
    with pytest.raises(pj.UnsupportedError, match="contents of scalar prefetch operand "
                       "'block_idx' are not known at export"):
        pj.export(fn, *args)
    r = pj.check(fn, *args)
    assert r.exit_code == 2 and r.verdicts == {"dynamic_block_gather_kernel": "unsupported"}
    text = pj.export(fn, *args, prefetch={"block_idx": "in [0, 4)"})
    assert "prefetch block_idx: i32[4] in [0, 4)" in text
    pj.assert_verified(fn, *args, prefetch={"block_idx": "in [0, 4)"})
    r = pj.check(fn, *args, prefetch={"block_idx": "in [0, 5) nondecreasing"})
    assert r.exit_code == 1
    assert [f.rule for f in r.findings] == ["index-out-of-bounds"]
    assert "prefetch contents: block_idx = [" in r.findings[0].message
    with pytest.raises(pj.UnsupportedError, match="names no scalar prefetch operand"):
        pj.export(fn, *args, prefetch={"ids": "in [0, 4)"})


def test_a_2d_block_table_exports_as_a_rank_2_prefetch_and_runs_like_interpret_mode():
    fn, args = K.make_block_table_gather()
    table = np.array([[3, 0, 1], [2, 2, 0]], np.int32)
    text = pj.export(fn, table, args[1])
    assert "prefetch table: i32[2, 3] = [3, 0, 1, 2, 2, 0]" in text
    assert "index=(i, j, table) -> (table[i, j], 0)" in text
    assert "cast(table[program_id(0), program_id(1)], f32)" in text
    pj.assert_verified(fn, table, args[1])
    x = np.random.default_rng(0).standard_normal((32, 128), np.float32)
    r = pj.run(fn, table, x)  # against interpret=True on the same table
    assert r.ok, r
    want = x[table.reshape(-1) * 8 + np.arange(8)[:, None]].transpose(1, 0, 2).reshape(48, 128) \
        + np.repeat(table.reshape(-1), 8)[:, None].astype(np.float32)
    np.testing.assert_array_equal(np.asarray(r.outputs[0]), want)
    # Described rather than given: every table in [0, 5) is checked, and 4 is past x's 4 blocks.
    r = pj.check(fn, *args, prefetch={"table": "in [0, 5)"})
    assert r.exit_code == 1 and [f.rule for f in r.findings] == ["index-out-of-bounds"]
    # In range, the spec rules hold for every table, but the body reads the table, so the
    # lowered program's race check would need each of the 4^6 tables: unknown, never verified.
    r = pj.check(fn, *args, prefetch={"table": "in [0, 4)"})
    assert r.exit_code == 2 and r.verdicts == {"block_table_gather_kernel": "unknown"}, r.report()


def _zero_d_offset_gather():
    """A kernel whose one scalar prefetch operand is 0-d: an offset in blocks, read whole
    (`s_ref[()]`) in the index map and (`s_ref[...]`, `s_ref[()]`) in the body."""
    def offset_gather_kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + s_ref[...].astype(jnp.float32) + s_ref[()].astype(jnp.float32)

    def fn(s, x):
        gs = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s_ref: (s_ref[()] + i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s_ref: (i, 0)))
        return pl.pallas_call(offset_gather_kernel, grid_spec=gs,
                              out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(s, x)
    return fn


def test_a_zero_d_scalar_prefetch_exports_as_a_one_element_table():
    fn = _zero_d_offset_gather()
    x = np.random.default_rng(5).standard_normal((24, 128), np.float32)
    s = np.array(1, np.int32)
    text = pj.export(fn, s, x)
    assert "prefetch s_ref: i32[1] = [1]" in text
    assert "index=(i, s_ref) -> (s_ref[0] + i, 0)" in text
    assert "cast(s_ref[0], f32)) + cast(s_ref[0], f32)" in text
    assert "s_ref[...]" not in text and "s_ref[]" not in text
    pj.assert_verified(fn, s, x)
    pj.assert_verified(fn, jnp.asarray(s), x)

    # (x + s) + s, as the kernel adds, in f32
    r = pj.run(fn, s, x, reference=lambda s, x: x[8:24] + np.float32(s) + np.float32(s))
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0
    want = x[8:24] + np.float32(1) + np.float32(1)
    np.testing.assert_array_equal(np.asarray(r.outputs[0]), want)

    # Given as a shape, the value is described like any prefetch operand's contents.
    sd = jax.ShapeDtypeStruct((), jnp.int32)
    xd = jax.ShapeDtypeStruct((24, 128), jnp.float32)
    with pytest.raises(pj.UnsupportedError, match="contents of scalar prefetch operand "
                       "'s_ref' are not known at export"):
        pj.export(fn, sd, xd)
    text = pj.export(fn, sd, xd, prefetch={"s_ref": "in [0, 2)"})
    assert "prefetch s_ref: i32[1] in [0, 2)" in text
    pj.assert_verified(fn, sd, xd, prefetch={"s_ref": "in [0, 2)"})


def test_a_zero_d_scalar_prefetch_offset_past_the_array_is_index_out_of_bounds():
    fn = _zero_d_offset_gather()
    x = np.random.default_rng(5).standard_normal((24, 128), np.float32)
    want = line_of(_zero_d_offset_gather, "in_specs=")
    # An offset of 2 blocks: the second grid step reads block 3 of x's 3.
    r = pj.check(fn, np.array(2, np.int32), x)
    assert r.exit_code == 1 and r.verdicts == {"offset_gather_kernel": "violation"}, r.report()
    (f,) = r.findings
    assert f.rule == "index-out-of-bounds"
    assert f.python is not None and f.python[1] == want, f.python
    assert "block index 3 along dim 0 is outside [0, 3)" in f.message
    r = pj.run(fn, np.array(2, np.int32), x)
    assert not r.ok and r.outputs is None
    assert "out of bounds" in r.pipecheck_output, r.pipecheck_output
    # Described rather than given: the witness names the one-element table.
    sd = jax.ShapeDtypeStruct((), jnp.int32)
    xd = jax.ShapeDtypeStruct((24, 128), jnp.float32)
    r = pj.check(fn, sd, xd, prefetch={"s_ref": "in [0, 3)"})
    assert r.exit_code == 1 and [f.rule for f in r.findings] == ["index-out-of-bounds"]
    assert "prefetch contents: s_ref = [2]" in r.findings[0].message


def test_a_store_into_a_zero_d_scalar_prefetch_is_state_of_its_one_element():
    def kernel(s_ref, x_ref, o_ref):
        @pl.when(s_ref[()] > 0)
        def _():
            o_ref[...] = x_ref[...]
            s_ref[...] = s_ref[...] - 1

        @pl.when(s_ref[()] <= 0)
        def _():
            o_ref[...] = -x_ref[...]

    def fn(s, x):
        gs = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(3,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s_ref: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s_ref: (i, 0)))
        return pl.pallas_call(kernel, grid_spec=gs,
                              out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32))(s, x)

    x = np.random.default_rng(6).standard_normal((24, 128), np.float32)
    text = pj.export(fn, np.array(2, np.int32), x)
    assert "prefetch s_ref: i32[1] = [2]" in text
    assert re.search(r"s_ref\[0\] = s\d+ - 1", text), text
    pj.assert_verified(fn, np.array(2, np.int32), x)


def test_a_prefetch_constant_inside_the_function_is_known():
    fn, args = K.make_dynamic_block_gather()
    text = pj.export(lambda x: fn(jnp.array([1, 1, 0, 3], jnp.int32), x), args[1])
    assert "prefetch block_idx: i32[4] = [1, 1, 0, 3]" in text


def test_the_gather_runs_like_interpret_and_the_reference():
    fn, args = K.make_dynamic_block_gather()
    ids = np.array([3, 0, 0, 2], np.int32)
    (x,) = K.concrete(args[1:], seed=3)

    def ref(i, x):
        return (x.reshape(4, 8, 128)[np.asarray(i)]
                + np.asarray(i, np.float32)[:, None, None]).reshape(32, 128)

    r = pj.run(fn, ids, x, reference=ref)
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0


# Manual DMAs and semaphores --------------------------------------------------------------


def test_the_guides_manual_double_buffer_exports_its_copies_and_verifies():
    fn, args = K.make_manual_double_buffer()
    text = pj.export(fn, *args)
    assert "in  a_hbm: f32[64, 128]  memory_space=any" in text
    assert "out o_hbm: f32[64, 128]  memory_space=any" in text
    assert "scratch in_sem: dma_sem[2]" in text
    assert ("async_copy(a_hbm[ds(program_id(0) * 8, 8), :], x[program_id(0) % 2, :, :], "
            "in_sem[program_id(0) % 2]).wait()") in text
    assert ("async_copy(y[program_id(0) % 2, :, :], o_hbm[ds(program_id(0) * 8, 8), :], "
            "out_sem[program_id(0) % 2]).start()") in text
    pj.assert_verified(fn, *args)


def test_waiting_on_the_other_slots_semaphore_is_a_slot_race_at_the_python_lines():
    fn, args = K.make_manual_double_buffer(other_slot=True)
    r = pj.check(fn, *args)
    assert r.exit_code == 1
    assert {f.rule for f in r.findings} == {"slot-race"}
    kernel = K.make_manual_double_buffer_kernel
    lines = {f.python[1] for f in r.findings if f.python}
    assert line_of(kernel, "y[cur] = x[cur] + 1.0") in lines


def test_the_manual_double_buffer_runs_like_interpret_and_the_reference():
    fn, args = K.make_manual_double_buffer()
    r = pj.run(fn, *K.concrete(args, seed=4), reference=lambda a: a + 1.0)
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0


def test_run_of_a_body_with_its_own_copies_takes_every_dma_mode_and_fails_the_wrong_semaphore():
    # Waiting on the other slot's semaphore returns early when the copies land in another
    # order: eager runs alone would pass it; run's other modes fail it.
    fn, args = K.make_manual_double_buffer(other_slot=True)
    r = pj.run(fn, *K.concrete(args, seed=4), reference=lambda a: a + 1.0)
    assert not r.ok and r.pipecheck_exit == 1, str(r)
    assert "on_wait" in r.pipecheck_output or "random" in r.pipecheck_output, r.pipecheck_output


def _read_modify_write_of_the_output(alias):
    def kernel(x, o, buf):
        pltpu.sync_copy(o, buf)
        buf[...] = buf[...] + 1.0
        pltpu.sync_copy(buf, o)

    def fn(x):
        return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY),
                              out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
                              input_output_aliases={0: 0} if alias else {})(x)
    return fn


def test_a_copy_out_of_an_unaliased_any_space_output_before_it_is_written_reads_garbage():
    x = np.ones((8, 128), np.float32)
    r = pj.check(_read_modify_write_of_the_output(False), x)
    assert [f.rule for f in r.findings] == ["uninitialized-read"], r.report()
    assert "of HBM, where nothing has been written" in r.findings[0].message, r.report()
    pj.assert_verified(_read_modify_write_of_the_output(True), x)


def test_a_single_dma_semaphore_is_one_dma_sem():
    fn, args = K.make_manual_dma()
    text = pj.export(fn, *args)
    assert "scratch sem: dma_sem\n" in text.replace("  # ", "\n# ")
    assert "async_copy(x_hbm[...], buf[...], sem).start()" in text
    pj.assert_verified(fn, *args)


def _signalling_call(kernel, scratch):
    def fn(x):
        return pl.pallas_call(
            kernel, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
            scratch_shapes=scratch)(x)

    return fn, [jax.ShapeDtypeStruct((16, 128), jnp.float32)]


def test_regular_semaphore_signals_and_waits_export_and_verify():
    def signalling_kernel(x_ref, o_ref, sem, sems):
        pl.semaphore_signal(sem, 1)
        pl.semaphore_wait(sem, 1)
        pl.semaphore_signal(sems.at[1], 2)
        pl.semaphore_wait(sems.at[1], 2)
        o_ref[...] = x_ref[...]

    fn, args = _signalling_call(signalling_kernel, [pltpu.SemaphoreType.REGULAR,
                                                    pltpu.SemaphoreType.REGULAR((2,))])
    text = pj.export(fn, *args)
    assert "scratch sem: semaphore  #" in text
    assert "scratch sems: semaphore[2]  #" in text
    assert "semaphore_signal(sem, 1)" in text
    assert "semaphore_wait(sems[1], 2)" in text
    pj.assert_verified(fn, *args)


def test_a_semaphore_read_is_still_reported_unsupported_at_its_line():
    def reading_kernel(x_ref, o_ref, sem):
        n = pl.semaphore_read(sem)
        o_ref[...] = x_ref[...] + n.astype(jnp.float32)

    fn, args = _signalling_call(reading_kernel, [pltpu.SemaphoreType.REGULAR])
    with pytest.raises(pj.UnsupportedError, match="'semaphore_read'") as e:
        pj.export(fn, *args)
    assert f"test_prefetch_dma.py:{line_of(reading_kernel, 'semaphore_read')}" in str(e.value)
    r = pj.check(fn, *args)
    assert r.exit_code == 2 and r.verdicts == {"reading_kernel": "unsupported"}


def test_a_sync_copy_exports_as_sync_copy_verifies_and_runs_like_interpret():
    def sync_copy_kernel(x_hbm, o_ref, buf):
        pltpu.sync_copy(x_hbm.at[pl.ds(8, 8)], buf)
        o_ref[...] = buf[...] * 2.0

    def fn(x):
        return pl.pallas_call(
            sync_copy_kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x)

    args = [jax.ShapeDtypeStruct((16, 128), jnp.float32)]
    text = pj.export(fn, *args)
    assert "sync_copy(x_hbm[8:16, :], buf[...])" in text
    pj.assert_verified(fn, *args)
    r = pj.run(fn, *K.concrete(args, seed=5), reference=lambda x: x[8:16] * 2.0)
    assert r.ok, str(r)


def test_the_cli_writes_the_prefetch_contents_the_script_passes(workdir):
    import os
    import subprocess
    import sys

    script = os.path.join(workdir, "script.py")
    with open(script, "w") as f:
        f.write("import jax.numpy as jnp\nimport kernels as K\n"
                "fn, args = K.make_dynamic_block_gather()\n"
                "fn(jnp.array([2, 2, 1, 0], jnp.int32), jnp.ones(args[1].shape, jnp.float32))\n")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]),
               PIPECHECK=pj.pipecheck_binary())
    out = os.path.join(workdir, "specs")
    r = subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out", out, script],
                       capture_output=True, text=True, env=env, cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "dynamic_block_gather_kernel.pk")) as f:
        assert "prefetch block_idx: i32[4] = [2, 2, 1, 0]" in f.read()


def test_a_prefetch_table_named_like_a_grid_index_is_renamed_and_prefetch_takes_its_python_name():
    def clash_kernel(i, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def fn(ids, x):
        return pl.pallas_call(
            clash_kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(2,),
                in_specs=[pl.BlockSpec((8, 128), lambda g, i: (i[g], 0))],
                out_specs=pl.BlockSpec((8, 128), lambda g, i: (g, 0))),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(ids, x)

    args = [jax.ShapeDtypeStruct((2,), jnp.int32), jax.ShapeDtypeStruct((16, 128), jnp.float32)]
    text = pj.export(fn, *args, prefetch={"i": "in [0, 2)"})
    assert "prefetch i_: i32[2] in [0, 2)" in text
    assert "index=(i, i_) -> (i_[i], 0)" in text
    pj.assert_verified(fn, *args, prefetch={"i": "in [0, 2)"})


def test_smem_state_exports_as_state_that_check_follows_across_grid_steps():
    fn, args = K.make_step_counter()
    flag = np.array([1], np.int32)
    text = pj.export(fn, flag, args[1])
    assert "scratch count_ref: i32[1]  memory_space=smem" in text, text
    # Reads of state are bound where they are, so a store after them does not change them.
    assert "flag_ref[0] = 0" in text and "= count_ref[0]" in text and "count_ref[0] = s" in text, text
    pj.assert_verified(fn, flag, args[1])
    # Without the flag, nothing stores the counter before the first step reads it.
    r = pj.check(fn, np.array([0], np.int32), args[1])
    assert r.exit_code == 1 and [f.rule for f in r.findings] == ["uninitialized-read"], r.report()
    assert r.findings[0].message.startswith("count_ref[0] is read at grid point (0,)"), r.report()


def test_an_smem_counter_runs_like_interpret_mode():
    fn, args = K.make_step_counter(by_flag=False)
    x = np.random.default_rng(1).standard_normal((32, 128), np.float32)
    r = pj.run(fn, np.array([0], np.int32), x)  # against interpret=True
    assert r.ok, r
    want = x + np.repeat(np.arange(4, dtype=np.float32), 8)[:, None]
    np.testing.assert_array_equal(np.asarray(r.outputs[0]), want)


def positive_count(init=True, branch_on_count=False):
    # A compaction counter: the number of positive elements so far, in an int32 SMEM scratch.
    def count_kernel(x_ref, o_ref, c_ref):
        i = pl.program_id(0)
        if init:
            @pl.when(i == 0)
            def _():
                c_ref[0] = jnp.zeros((), jnp.int32)
        n = jnp.sum((x_ref[...] > 0).astype(jnp.int32))
        c_ref[0] = c_ref[0] + n
        if branch_on_count:
            @pl.when(c_ref[0] > 100)
            def _():
                o_ref[1] = i

        @pl.when(i == pl.num_programs(0) - 1)
        def _():
            o_ref[0] = c_ref[0]
            o_ref[1] = jnp.zeros((), jnp.int32)

    def fn(x):
        return pl.pallas_call(
            count_kernel, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
            out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
            scratch_shapes=[pltpu.SMEM((1,), jnp.int32)],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)

    return fn


def test_an_int32_smem_scratch_the_body_stores_data_into_is_a_data_scratch_not_state():
    x = np.random.default_rng(2).standard_normal((32, 128), np.float32)
    text = pj.export(positive_count(), x)
    assert "scratch c_ref: i32[1]  memory_space=smem" in text, text
    assert "c_ref[0] += sum(cast(x_ref[...] > 0.0, i32))" in text, text
    pj.assert_verified(positive_count(), x)
    r = pj.run(positive_count(), x, reference=lambda x: jnp.stack([jnp.sum(x > 0), 0]).astype(jnp.int32))
    assert r.ok, r
    assert int(np.asarray(r.outputs[0])[0]) == int((x > 0).sum())
    # Without the init, the first step adds to what nothing stored.
    bad = pj.check(positive_count(init=False), x)
    assert [f.rule for f in bad.findings] == ["uninitialized-accumulator"], bad.report()
    # A condition on the count depends on the data: no .pk form.
    r = pj.check(positive_count(branch_on_count=True), x)
    assert r.verdicts == {"count_kernel": "unsupported"}, r.report()
    assert "a condition computed from array data" in str(r.unsupported[0]), r.report()


def test_prefetch_contents_computed_from_constants_inside_jit_are_known_at_export():
    # The table is a constant of the traced function, passed through a jit and computed on
    # (reversed, offset) before the pallas_call gets it, as splash attention's mask info is.
    fn, args = K.make_dynamic_block_gather()
    table = np.array([0, 1, 1, 2], np.int32)

    @jax.jit
    def through_jit(t, x):
        return fn(t[::-1] + 1, x)

    text = pj.export(lambda x: through_jit(jnp.asarray(table), x), args[1])
    assert "prefetch block_idx: i32[4] = [3, 2, 2, 1]" in text, text
    pj.assert_verified(lambda x: through_jit(jnp.asarray(table), x), args[1])
    # One entry past the 4 blocks of x: the computed contents reach the race check.
    r = pj.check(lambda x: through_jit(jnp.asarray(table) + 1, x), args[1])
    assert r.verdicts == {"dynamic_block_gather_kernel": "violation"}, r.report()
    assert {f.rule for f in r.findings} == {"index-out-of-bounds"}, r.report()


def test_a_prefetch_description_wins_over_contents_known_at_export():
    fn, args = K.make_dynamic_block_gather()
    ids = np.array([3, 0, 0, 2], np.int32)
    text = pj.export(fn, ids, args[1], prefetch={"block_idx": "in [0, 5)"})
    assert "prefetch block_idx: i32[4] in [0, 5)" in text, text
    # Every table in [0, 5) is checked, not only ids: 4 is past x's 4 blocks.
    r = pj.check(fn, ids, args[1], prefetch={"block_idx": "in [0, 5)"})
    assert [f.rule for f in r.findings] == ["index-out-of-bounds"], r.report()


def test_prefetch_contents_computed_from_an_argument_passed_as_a_shape_stay_unknown():
    fn, args = K.make_dynamic_block_gather()
    r = pj.check(lambda t, x: fn(t + 1, x), *args)
    assert r.verdicts == {"dynamic_block_gather_kernel": "unsupported"}, r.report()
    assert r.exit_code == 2
    assert "are not known at export" in r.report(), r.report()


def test_a_jitted_function_called_twice_gives_each_call_its_own_table():
    # One jitted function, so one sub-jaxpr, one pallas_call equation, two calls: each is
    # exported with the table it gets.
    fn, args = K.make_dynamic_block_gather()
    gather = jax.jit(lambda t, x: fn(t + 0, x))
    table = np.array([0, 1, 2, 3], np.int32)

    def twice(x):
        return gather(jnp.asarray(table), x) + gather(jnp.asarray(table[::-1].copy()), x)

    kernels = pj.export_kernels(twice, args[1])
    assert len(kernels) == 2
    assert "prefetch block_idx: i32[4] = [0, 1, 2, 3]" in kernels[0].text, kernels[0].text
    assert "prefetch block_idx: i32[4] = [3, 2, 1, 0]" in kernels[1].text, kernels[1].text


# A double buffer chained across grid steps on a 2-D grid: step s = i * 4 + j starts the copy
# for step s + 1 into the other slot and waits on its own. With axis 0 `parallel`, the chain
# crosses it at (i, 3) -> (i + 1, 0): the core that starts at (2, 0) waits on a copy it never
# started. The copy into the other slot at (i + 1, 0) does not make the slot it reads fresh.

def chained_rows_kernel(x_hbm, o_ref, buf, sem):
    i, j = pl.program_id(0), pl.program_id(1)
    s = i * 4 + j

    def copy(step, slot):
        return pltpu.make_async_copy(
            x_hbm.at[pl.ds((step // 4) * 8, 8), pl.ds((step % 4) * 128, 128)], buf.at[slot],
            sem.at[slot])

    @pl.when(s == 0)
    def _():
        copy(0, 0).start()

    @pl.when(s + 1 < 16)
    def _():
        copy(s + 1, 1 - s % 2).start()

    copy(s, s % 2).wait()

    @pl.when(j == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += buf[s % 2]


def chained_rows(semantics):
    def fn(x):
        return pl.pallas_call(
            chained_rows_kernel, grid=(4, 4), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
            scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics))(x)
    return fn


def test_a_dma_chain_across_a_parallel_axis_of_a_2d_grid_is_reported_and_sequential_verifies():
    x = jnp.arange(32 * 512, dtype=jnp.float32).reshape(32, 512)
    ok = chained_rows(("arbitrary", "arbitrary"))
    pj.assert_verified(ok, x)
    want = lambda x: x.reshape(4, 8, 4, 128).sum(axis=2).reshape(32, 128)
    assert pj.run(ok, x, reference=want).ok
    r = pj.check(chained_rows(("parallel", "arbitrary")), x)
    assert r.exit_code == 1, r.report()
    (f,) = [f for f in r.findings if "'buf'" in f.message]
    assert f.rule == "parallel-write-conflict" and "(0, 3) into grid point (1, 0)" in f.message, f


def test_a_vmapped_call_with_an_any_space_operand_is_unsupported_not_bad_input():
    # Under jax.vmap the kernel sees one batch element of the ANY operand (a 2-D ref of a
    # 3-D array): its DMAs' subscripts name that element, which the .pk operand cannot.
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_ref, buf, sem):
        def cp(k):
            return pltpu.make_async_copy(x_hbm.at[pl.ds(k * 8, 8)], buf.at[k % 2], sem.at[k % 2])

        cp(0).start()

        def body(k, c):
            @pl.when(k + 1 < 8)
            def _():
                cp(k + 1).start()

            cp(k).wait()
            o_ref[pl.ds(k * 8, 8), :] = buf[k % 2] * 3
            return c

        lax.fori_loop(0, 8, body, 0)

    def one(x):
        return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec((64, 128), lambda: (0, 0)),
                              out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32),
                              scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)

    assert pj.check(one, jax.ShapeDtypeStruct((64, 128), jnp.float32)).exit_code == 0
    r = pj.check(jax.vmap(one), jax.ShapeDtypeStruct((2, 64, 128), jnp.float32))
    assert r.exit_code == 2 and "vmapped" in str(r), str(r)


def two_copies_one_slot_kernel(idx_ref, x_hbm, o_ref, buf, sem):
    # Two copies through a 32-entry table into one slot before a wait: a slot race.
    i = pl.program_id(0)
    a = pltpu.make_async_copy(x_hbm.at[idx_ref[i]], buf.at[0], sem.at[0])
    b = pltpu.make_async_copy(x_hbm.at[idx_ref[(i + 1) % 32]], buf.at[0], sem.at[0])
    a.start()
    b.start()
    a.wait()
    b.wait()
    o_ref[...] = buf[0]


def test_a_copy_through_a_page_table_is_noted_by_the_regions_it_copies_at_that_step():
    def f(idx, x):
        return pl.pallas_call(
            two_copies_one_slot_kernel, out_shape=jax.ShapeDtypeStruct((32, 8, 128), jnp.float32),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(32,),
                in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec((None, 8, 128), lambda i, idx: (i, 0, 0)),
                scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                pltpu.SemaphoreType.DMA((2,))]),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(idx, x)

    idx = jnp.asarray((np.arange(32) * 7 + 11) % 32, jnp.int32)
    res = pj.check(f, idx, jnp.zeros((32, 8, 128), jnp.float32))
    assert res.exit_code == 1 and "slot-race" in str(res), str(res)
    notes = [ln for ln in str(res).splitlines() if "note: event" in ln]
    assert notes and max(len(ln) for ln in notes) < 400, notes
    # (the table's entry at grid point 0 is 11: the copy's region names it)
    assert any("x_hbm[11:12, 0:8, 0:128]" in ln for ln in notes), notes
