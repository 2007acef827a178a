"""lax.while_loop in kernel bodies: a non-counted loop exports to `.pk`'s bounded
`while COND, bound=N:` (docs/jax.md, "While loops")."""

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import kernels as K
import pipecheck_jax as pj
from test_body_forms import F32, data, line_of, rows

# Sequences 1, 2, 4, 6 and 7 are empty: from step 0 the search skips two of them, from
# step 5 two and then runs off the end.
LENGTHS = np.array([3, 0, 0, 5, 0, 2, 0, 0], np.int32)


def search_args(seed=0):
    fn, args = K.make_next_nonempty_sequence()
    (x,) = K.concrete(args[1:], seed=seed)
    return fn, x


def test_the_search_for_the_next_nonempty_sequence_exports_to_a_bounded_while_and_verifies():
    fn, x = search_args()
    text = pj.export(fn, LENGTHS, x, while_bound=8)
    body = [t.split("  # ")[0].strip() for t in text.splitlines()]
    assert "c1 = program_id(0) + 1" in body, text
    assert "while (c1 < 8) and (lengths_ref[min(c1, 7)] == 0), bound=8:" in body, text
    assert "c1 = c1 + 1" in body, text
    assert "o_ref[...] = x_ref[ds(c1 * 8, 8), :]" in body, text
    # the loop's line maps to the while_loop call in the kernel
    k = pj.export_kernels(fn, LENGTHS, x, while_bound=8)[0]
    (line,) = [n for n, t in enumerate(k.text.splitlines(), start=1) if t.lstrip().startswith("while ")]
    assert k.line_map[line] == (K.__file__, line_of(K.make_next_nonempty_sequence,
                                                   "jax.lax.while_loop("))
    r = pj.assert_verified(fn, LENGTHS, x, while_bound=8)
    assert r.verdicts == {"next_nonempty_kernel": "verified"}


def test_the_default_bound_is_64_and_verifies_the_search():
    fn, x = search_args()
    assert pj.DEFAULT_WHILE_BOUND == 64
    assert ", bound=64:" in pj.export(fn, LENGTHS, x)
    pj.assert_verified(fn, LENGTHS, x)


def test_the_search_runs_in_pipecheck_like_interpret_and_the_reference():
    fn, x = search_args(seed=4)
    r = pj.run(fn, LENGTHS, x, reference=K.next_nonempty_reference(), while_bound=8)
    assert r.ok, str(r)
    assert r.pipecheck_exit == 0
    # the search found a later sequence at step 0 (3) and none at step 5
    out = np.asarray(r.outputs[0])
    np.testing.assert_array_equal(out[0:8], np.asarray(x)[24:32])
    np.testing.assert_array_equal(out[40:48], np.zeros((8, 128), np.float32))


def test_a_search_whose_result_is_used_without_asking_whether_there_is_one_is_reported():
    fn, args = K.make_next_nonempty_sequence(guarded=False)
    (x,) = K.concrete(args[1:])
    r = pj.check(fn, LENGTHS, x, while_bound=8)
    assert r.exit_code == 1, str(r)
    assert r.verdicts == {"next_nonempty_kernel": "violation"}
    assert any(f.python == (K.__file__, line_of(K.make_next_nonempty_sequence,
                                                "o_ref[...] = x_ref[pl.ds(nb * bm, bm)"))
               for f in r.findings), str(r)


def test_a_search_that_may_run_past_a_small_bound_is_unknown_naming_the_loop_and_the_bound():
    fn, x = search_args()
    r = pj.check(fn, LENGTHS, x, while_bound=1)
    assert r.exit_code == 2, str(r)
    assert r.verdicts == {"next_nonempty_kernel": "unknown"}
    assert not r.verified and not r.findings
    why = r.reasons["next_nonempty_kernel"]
    # at the Python line of the lax.while_loop, not a line of the deleted .pk
    loop = line_of(K.make_next_nonempty_sequence, "jax.lax.while_loop(")
    assert f"the while loop at kernels.py:{loop} may run past its bound 1" in why, why
    assert "may run past its bound 1" in r.report()
    with pytest.raises(AssertionError, match="may run past its bound 1"):
        pj.assert_verified(fn, LENGTHS, x, while_bound=1)
    # a bound of 2 covers every search in this table: no step skips more than two
    pj.assert_verified(fn, LENGTHS, x, while_bound=2)


def test_a_run_that_needs_more_iterations_than_the_bound_stops_naming_the_bound():
    fn, x = search_args()
    with pytest.raises(RuntimeError, match="may run past its bound 1"):
        pj.run(fn, LENGTHS, x, while_bound=1)


def test_a_bound_that_is_not_a_positive_integer_is_refused():
    fn, x = search_args()
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="while_bound must be a positive integer"):
            pj.export(fn, LENGTHS, x, while_bound=bad)


def accumulate_while(k_ref=None):
    """o = x * (i + 1) at grid step i, summed in a while loop that carries the block."""
    def kernel(x_ref, o_ref):
        def body(carry):
            k, acc = carry
            return k + 1, acc + x_ref[...]

        i = pl.program_id(0)  # outside the loop: interpret=True has no program_id in a cond
        _, acc = jax.lax.while_loop(lambda c: c[0] < i, body, (0, x_ref[...]))
        o_ref[...] = acc
    return kernel


def test_a_while_that_carries_a_block_value_exports_verifies_and_runs_like_interpret():
    # .pk's while carries any local a `for` does (docs/language.md, "Loops in the body")
    fn = rows(accumulate_while())
    text = pj.export(fn, F32)
    assert re.search(r"\n        while (c\d+) < program_id\(0\), bound=64:", text), text
    # the block carry is rebound directly, not copied through a local
    (c,) = re.findall(r"\n            (c\d+) = \1 \+ x_ref\[\.\.\.\]", text)
    assert f"o_ref[...] = {c}" in text, text
    pj.assert_verified(fn, F32)
    x = data()
    r = pj.run(fn, x, reference=lambda x: x * np.repeat(np.arange(1, 5), 8)[:, None])
    assert r.ok, str(r)


def test_a_while_whose_block_carry_starts_from_zeros_verifies_at_the_default_bound():
    # the carry starts as a constant bound to a local first (`c3 = v1`): the
    # rules take it for a block, so the loop stays decided at each grid step
    def kernel(x_ref, o_ref):
        def body(carry):
            k, acc = carry
            return k + 1, acc + x_ref[...]

        i = pl.program_id(0)
        _, acc = jax.lax.while_loop(lambda c: c[0] <= i, body, (0, jnp.zeros((8, 128), jnp.float32)))
        o_ref[...] = acc

    fn = rows(kernel)
    assert "bound=64:" in pj.export(fn, F32)
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(), reference=lambda x: x * np.repeat(np.arange(1, 5), 8)[:, None])
    assert r.ok, str(r)


def test_a_while_that_reads_an_uninitialized_scratch_in_its_body_is_reported_there():
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref, s_ref):
        def body(carry):
            k, acc = carry
            return k + 1, acc + s_ref[...]

        _, acc = jax.lax.while_loop(lambda c: c[0] < 2, body, (pl.program_id(0), x_ref[...]))
        o_ref[...] = acc
        s_ref[...] = x_ref[...]

    r = pj.check(rows(kernel, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)]), F32)
    assert r.exit_code == 1, str(r)
    assert any(f.rule in ("uninitialized-read", "uninitialized-accumulator")
               and f.python == (__file__, line_of(kernel, "acc + s_ref[...]"))
               for f in r.findings), str(r)


def test_a_while_whose_condition_reads_a_block_value_is_a_located_unsupported_error():
    def kernel(x_ref, o_ref):
        n = jax.lax.while_loop(lambda k: (k < 128) & (x_ref[0, jnp.minimum(k, 127)] > 0.0),
                               lambda k: k + 1, 0)
        o_ref[...] = x_ref[...] + n

    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(rows(kernel), F32)
    assert "the condition of a lax.while_loop that is not an integer expression has no .pk " \
        "form" in err.value.message
    assert err.value.location == f"{__file__}:{line_of(kernel, 'jax.lax.while_loop(')}"
    r = pj.check(rows(kernel), F32)
    assert r.exit_code == 2 and list(r.verdicts.values()) == ["unsupported"], str(r)


def test_a_while_whose_condition_reads_a_carry_computed_from_a_block_is_a_located_unsupported_error():
    # stops at the first chunk whose first element is negative: the flag is data
    def kernel(x_ref, o_ref):
        def body(st):
            k, _ = st
            return k + 1, x_ref[0, jnp.minimum(k, 127)] >= 0.0

        n, _ = jax.lax.while_loop(lambda st: (st[0] < 6) & st[1], body, (0, True))
        o_ref[...] = x_ref[...] + n

    with pytest.raises(pj.UnsupportedError) as err:
        pj.export(rows(kernel), F32)
    assert "reads a carry that the body computes from array data" in err.value.message
    assert err.value.location == f"{__file__}:{line_of(kernel, 'jax.lax.while_loop(')}"
    with pytest.raises(pj.UnsupportedError):
        pj.run(rows(kernel), data())


def test_a_while_on_an_integer_carry_computed_in_the_body_exports_and_runs_like_interpret():
    # the loop that the bridge refused before: k * k < 40 runs 7 times
    def kernel(x_ref, o_ref):
        n = jax.lax.while_loop(lambda k: k * k < 40, lambda k: k + 1, 0)
        o_ref[...] = x_ref[...] + n

    fn = rows(kernel)
    assert "while (c1 * c1) < 40, bound=64:" in pj.export(fn, F32)
    pj.assert_verified(fn, F32)
    r = pj.run(fn, data(), reference=lambda x: x + 7)
    assert r.ok, str(r)
    r = pj.check(fn, F32, while_bound=6)
    assert r.verdicts == {"kernel_": "unknown"} and "bound 6" in r.reasons["kernel_"], str(r)


def test_the_cli_takes_the_while_bound(workdir):
    script = os.path.join(workdir, "script.py")
    with open(script, "w") as f:
        f.write("import jax.numpy as jnp\nimport kernels as K\n"
                "fn, args = K.make_next_nonempty_sequence()\n"
                f"fn(jnp.array({LENGTHS.tolist()}, jnp.int32), jnp.ones(args[1].shape))\n")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]),
               PIPECHECK=pj.pipecheck_binary())
    out = os.path.join(workdir, "specs")
    r = subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out", out, "--while-bound", "1",
                        script], capture_output=True, text=True, env=env, cwd=workdir)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "may run past its bound 1" in r.stdout, r.stdout
    with open(os.path.join(out, "next_nonempty_kernel.pk")) as f:
        assert ", bound=1:" in f.read()
    bad = subprocess.run([sys.executable, "-m", "pipecheck_jax", "--while-bound", "0", script],
                         capture_output=True, text=True, env=env, cwd=workdir)
    assert bad.returncode == 2 and "positive integer" in bad.stderr, bad.stderr
