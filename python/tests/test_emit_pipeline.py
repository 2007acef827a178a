"""A `pltpu.emit_pipeline` inside a kernel, exported as what its jaxpr holds: the pipeline's
buffers as `run_scoped` scratch (undefined at the scope's entry), its DMAs on semaphores, and
its loop over the inner grid with the slot counters carried. The check covers the inner
BlockSpecs through the DMA addresses, and `run` compares with JAX."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pipecheck_jax as pj

X = jax.ShapeDtypeStruct((32, 128), jnp.float32)


def data(shape=(32, 128), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def doubling(index_map):
    def inner(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def kernel(x_hbm, o_hbm):
        pltpu.emit_pipeline(inner, grid=(4,),
                            in_specs=[pl.BlockSpec((8, 128), index_map)],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

    def fn(x):
        return pl.pallas_call(kernel,
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY),
                              out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)
    return fn


def test_an_emit_pipeline_exports_as_its_dmas_and_loop_with_buffers_undefined_at_entry():
    text = pj.export(doubling(lambda i: (i, 0)), X)
    body = [t.split("  # ")[0].strip() for t in text.splitlines()]
    # the double buffers and their semaphores are run_scoped allocations
    assert sum(1 for t in body if t.startswith("scratch ") and ": dma_sem[2]" in t) == 2, text
    assert sum(1 for t in body if t.endswith("[...] = undefined")) == 2, text
    assert any(t.startswith("for t1 in range(4):") for t in body), text
    assert any(".start()" in t for t in body) and any(".wait()" in t for t in body), text


def test_an_emit_pipeline_verifies_and_runs_like_jax():
    fn = doubling(lambda i: (i, 0))
    pj.assert_verified(fn, X)
    r = pj.run(fn, data(), reference=lambda x: 2.0 * x)
    assert r.ok, str(r)


def test_an_inner_index_map_one_block_too_far_is_an_index_out_of_bounds_of_its_dma():
    r = pj.check(doubling(lambda i: (i + 1, 0)), X)
    assert r.exit_code == 1, str(r)
    assert any(f.rule == "index-out-of-bounds" for f in r.findings), str(r)


SCRIPT = '''
import jax
import jax.numpy as jnp
import test_emit_pipeline as T

print(T.doubling(lambda i: (i, 0))(jnp.ones((32, 128), jnp.float32))[0, 0])
'''


def test_a_script_with_an_emit_pipeline_runs_on_a_cpu_under_the_cli_and_verifies(tmp_path):
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]),
               PIPECHECK=pj.pipecheck_binary())
    p = subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out", str(tmp_path / "specs"),
                        str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2.0" in p.stdout  # the script's own run, in interpret mode
    assert "verified" in p.stdout, p.stdout
