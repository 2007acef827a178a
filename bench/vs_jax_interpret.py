#!/usr/bin/env python3
"""pipecheck check through the JAX bridge against JAX's TPU interpret mode with race detection.

For the pipelining guide's kernels (add, incorrect_sum, correct_sum) at growing grid sizes:
the time of `pipecheck check` on the exported kernel (export included) and the time of one
run in TPU interpret mode with `detect_races=True` (compile included), and what each detects.
Prints a Markdown table, then one JSON object as its last line.

    PYTHONPATH=python:python/tests /usr/bin/python3 bench/vs_jax_interpret.py [--grids 8,64,512]
"""

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import kernels as K  # noqa: E402
import pipecheck_jax as pj  # noqa: E402
from pipecheck_jax._check import check_kernels  # noqa: E402

try:
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as _ipc
except ImportError:  # pragma: no cover
    _ipc = None


def cases(points):
    """(name, maker kwargs) with `points` grid points and small (8, 128) blocks."""
    q = points // 4
    return [
        ("add", K.make_add, dict(m=8 * q, n=512, bm=8, bn=128)),
        ("incorrect_sum", K.make_incorrect_sum, dict(b=q, m=16, n=256, bm=8, bn=128)),
        ("correct_sum", K.make_correct_sum, dict(b=q, m=16, n=256, bm=8, bn=128)),
    ]


def time_pipecheck(make, kw):
    t = time.perf_counter()
    fn, args = make(**kw)
    kernels = pj.export_kernels(fn, *args)
    with tempfile.TemporaryDirectory() as d:
        r = check_kernels(kernels, d)
    secs = time.perf_counter() - t
    rules = sorted({f.rule for f in r.findings})
    return secs, (", ".join(rules) if rules else list(r.verdicts.values())[0])


def time_interpret(make, kw):
    params = pltpu.InterpretParams(detect_races=True, uninitialized_memory="nan")
    fn, args = make(interpret=params, **kw)
    xs = K.concrete(args)
    t = time.perf_counter()
    try:
        out = jax.block_until_ready(jax.jit(fn)(*xs))
    except Exception as e:  # noqa: BLE001 - interpret mode raises on some bugs: that is a finding
        lines = [ln for ln in str(e).splitlines() if "Error: " in ln]
        msg = lines[-1].split("Error: ", 1)[1] if lines else type(e).__name__
        return time.perf_counter() - t, f"raises: {msg.split(' (')[0][:48]}"
    secs = time.perf_counter() - t
    found = []
    if _ipc is not None and getattr(_ipc, "races", None) is not None and _ipc.races.races_found:
        found.append("race")
    if np.isnan(np.asarray(out)).any():
        found.append("NaN in output")
    return secs, ", ".join(found) or "nothing"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grids", default="8,64,512")
    opts = ap.parse_args()
    print("| kernel | grid points | pipecheck check (export included) | interpret, detect_races | "
          "speed-up | pipecheck finds | interpret finds |")
    print("|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for points in (int(g) for g in opts.grids.split(",")):
        for name, make, kw in cases(points):
            pc_s, pc_found = time_pipecheck(make, kw)
            ji_s, ji_found = time_interpret(make, kw)
            r = dict(kernel=name, grid_points=points, pipecheck_s=round(pc_s, 3),
                     interpret_s=round(ji_s, 3), speedup=round(ji_s / pc_s, 1),
                     pipecheck_finds=pc_found, interpret_finds=ji_found)
            rows.append(r)
            print(f"| {r['kernel']} | {r['grid_points']} | {r['pipecheck_s']:.2f} s | "
                  f"{r['interpret_s']:.2f} s | {r['speedup']}x | {r['pipecheck_finds']} | "
                  f"{r['interpret_finds']} |", flush=True)
    print(json.dumps({"bench": "vs_jax_interpret", "jax": jax.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
