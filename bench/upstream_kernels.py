#!/usr/bin/env python3
"""pipecheck check through the JAX bridge on the kernels the installed jax ships.

For each upstream kernel (jax.experimental.pallas.ops: TPU matmul, flash attention forward
and backward, splash attention, megablox gmm and tgmm, ragged paged attention, GPU attention,
softmax, layer norm, RMS norm and decode attention), called as its users call it: the time of `pipecheck_jax.check` (trace and export included): the first run, when jax
traces the function afresh, and the median of --repeat runs, when its jit caches are warm;
the kernels it makes, their grid points and verdicts. Prints a Markdown
table, then one JSON object as its last line.

    PYTHONPATH=python:python/tests /usr/bin/python3 bench/upstream_kernels.py [--repeat 3] [--only NAME]
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import jax  # noqa: E402
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sam  # noqa: E402

import pipecheck_jax as pj  # noqa: E402
import upstream as U  # noqa: E402


def cases():
    """(name, fn, args, keyword arguments of pj.check)"""
    out = [(name, fn, args) for name, (fn, args, _) in sorted(U.VERIFIED.items())]
    local = dict(mask=lambda: sam.LocalMask((U.SEQ, U.SEQ), window_size=(100, 50), offset=0))
    out += [("splash causal forward", U.splash(), U.splash_args()),
            ("splash causal forward+backward", U.splash(grad=True), U.splash_args()),
            ("splash local forward+backward", U.splash(grad=True, **local), U.splash_args())]
    out += [(f"megablox gmm, group sizes {s}", U.gmm, U.gmm_args(s))
            for s in ([100, 0, 300, 112], [1, 1, 1, 509])]
    out += [("megablox tgmm, group sizes [100, 0, 300, 112]", U.tgmm, U.tgmm_args([100, 0, 300, 112]))]
    out += [("decode attention, lengths [100, 256]", U.decode, U.decode_args([0, 30], [100, 256]))]
    out += [("ragged paged attention, q lens [5, 16, 11]", U.ragged,
             U.ragged_args([5, 16, 11], [40, 64, 12], 32)),
            ("ragged paged attention, 8 decodes", U.ragged,
             U.ragged_args([1] * 8, [33, 17, 64, 1, 5, 16, 63, 2], 8, max_seqs=8, pages=64)),
            ("ragged paged attention, 2 head blocks", U.ragged,
             U.ragged_args([3, 13], [3, 50], 16, heads=16, kv_heads=8))]
    lens = [(17 * i + 5) % 64 + 1 for i in range(32)]
    out += [("ragged paged attention, 32 decodes", U.ragged,
             U.ragged_args([1] * 32, lens, 32, max_seqs=32, pages=128)),
            ("ragged paged attention, q lens [100, 200, 300, 160]", U.ragged,
             U.ragged_args([100, 200, 300, 160], [400, 200, 500, 160], 760, pages=128,
                           pages_per_seq=32))]
    # (name, fn, args, keyword arguments of pj.check)
    out = [(*c, {}) for c in out]
    out += [("ragged paged attention, 8 decodes, every page table", U.ragged,
             U.ragged_args([1] * 8, [33, 17, 64, 1, 5, 16, 63, 2], 8, max_seqs=8, pages=64),
             dict(prefetch={"page_indices_ref": "in [0, 64)"}))]
    return out


def grid_points(text: str) -> int:
    m = re.search(r"^\s*grid = \(([^)]*)\)", text, re.M)
    n = 1
    for d in (m.group(1).split(",") if m else []):
        if d.strip():
            n *= int(d)
    return n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="only the kernels whose name contains this")
    a = ap.parse_args()
    rows = []
    for name, fn, args, kwargs in cases():
        if a.only not in name:
            continue
        times, r = [], None
        for _ in range(max(1, a.repeat)):
            t = time.perf_counter()
            r = pj.check(fn, *args, **kwargs)
            times.append(time.perf_counter() - t)
        rows.append({"kernel": name, "first_seconds": times[0],
                     "seconds": statistics.median(times),
                     "calls": len(r.kernels),
                     "grid_points": sum(grid_points(k.text) for k in r.kernels),
                     "verdicts": sorted(set(r.verdicts.values()))})
    print(f"jax {jax.__version__}, {a.repeat} runs, trace and export included\n")
    print("| upstream kernel | pallas_calls | grid points | verdict | first check (s) | "
          "median (s) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['kernel']} | {row['calls']} | {row['grid_points']} | "
              f"{', '.join(row['verdicts'])} | {row['first_seconds']:.2f} | "
              f"{row['seconds']:.2f} |")
    print(json.dumps({"jax": jax.__version__, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
