"""The target a call is checked for: a TPU call (pltpu.CompilerParams, a TPU memory space) gets
tpu_v5e's tiling rule and VMEM budget unless `target=` names another TPU; a Mosaic GPU call
h100's; a call that names no backend only an explicit target's."""

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj


def double(x_ref, o_ref):
    o_ref[...] = x_ref[...] + x_ref[...]


def call(block, shape, grid, index, params=True, dtype=jnp.float32):
    def f(x):
        return pl.pallas_call(
            double, grid=grid, in_specs=[pl.BlockSpec(block, index)],
            out_specs=pl.BlockSpec(block, index), out_shape=jax.ShapeDtypeStruct(shape, dtype),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel",) * len(grid)) if params else None)(x)
    return f, jax.ShapeDtypeStruct(shape, dtype)


def rules(r):
    return {f.rule for f in r.findings}


def test_a_tpu_block_off_the_8_by_128_tile_is_a_tiling_violation_at_the_call():
    f, x = call((4, 128), (32, 256), (8, 2), lambda i, j: (i, j))
    assert "    target = tpu_v5e" in pj.export(f, x)
    r = pj.check(f, x)
    assert rules(r) == {"block-tiling"}, r
    assert "block dim 0 is 4, neither a multiple of 8 nor the array's extent 32" in str(r), r
    assert all(f.python and f.python[0].endswith("test_targets.py") for f in r.findings), r


@pytest.mark.parametrize("block, dtype, ok", [
    ((512,), jnp.float32, True), ((384,), jnp.float32, False), ((4096,), jnp.float32, True),
    ((256,), jnp.int8, False), ((512,), jnp.int8, True)])
def test_a_1d_block_follows_pallas_rank_1_rule(block, dtype, ok):
    f, x = call(block, (8 * block[0],), (8,), lambda i: (i,), dtype=dtype)
    r = pj.check(f, x)
    assert (r.exit_code == 0) == ok, r
    if not ok:
        assert rules(r) == {"block-tiling"}, r


def test_a_squeezed_row_of_a_2d_array_is_a_block_of_one_row():
    f, x = call((None, 256), (16, 256), (16,), lambda i: (i, 0))
    r = pj.check(f, x)
    assert rules(r) == {"block-tiling"} and "squeezed (a block of 1)" in str(r), r


def test_blocks_over_the_vmem_budget_of_the_target_are_reported_and_a_bigger_target_takes_them():
    # (1024, 2048) f32 in and out, double-buffered: 32 MiB, over tpu_v5e's 16 MiB of scoped
    # VMEM, within tpu_v6e's 32 MiB.
    f, x = call((1024, 2048), (2048, 2048), (2,), lambda i: (i, 0))
    r = pj.check(f, x)
    assert rules(r) == {"sram-capacity"}, r
    assert "needs at least 33554432 bytes (32.0 MiB) of VMEM but tpu_v5e allows 16777216 bytes (16.0 MiB)" \
        in str(r), r
    assert pj.check(f, x, target="tpu_v6e").exit_code == 0


def test_a_call_that_names_no_backend_gets_tiling_only_from_an_explicit_target():
    f, x = call((4, 128), (32, 256), (8, 2), lambda i, j: (i, j), params=False)
    assert "    target =" not in pj.export(f, x)
    assert pj.check(f, x).exit_code == 0
    assert rules(pj.check(f, x, target="tpu_v4")) == {"block-tiling"}
    assert "    target = tpu_v4" in pj.export(f, x, target="tpu_v4")


def test_an_unknown_target_is_a_value_error():
    f, x = call((8, 128), (32, 256), (4, 2), lambda i, j: (i, j))
    with pytest.raises(ValueError, match="target must be one of"):
        pj.check(f, x, target="tpu_v9")


def test_the_command_line_takes_a_target(tmp_path):
    import os
    import subprocess
    import sys
    script = tmp_path / "k.py"
    script.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jax.experimental import pallas as pl\n"
        "def k(x_ref, o_ref):\n"
        "    o_ref[...] = x_ref[...] + 1.0\n"
        "f = pl.pallas_call(k, grid=(8,), in_specs=[pl.BlockSpec((4, 128), lambda i: (i, 0))],\n"
        "    out_specs=pl.BlockSpec((4, 128), lambda i: (i, 0)),\n"
        "    out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))\n"
        "f(jnp.zeros((32, 128), jnp.float32))\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pj.__file__)))
    base = [sys.executable, "-m", "pipecheck_jax", "--out", str(tmp_path / "out")]
    p = subprocess.run(base + [str(script)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(base + ["--target", "tpu_v5p", str(script)], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 1 and "block-tiling" in p.stdout and "tpu_v5p" in p.stdout, \
        p.stdout + p.stderr
