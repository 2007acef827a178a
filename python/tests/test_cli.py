"""python -m pipecheck_jax on unmodified scripts."""

import json
import os
import subprocess
import sys

import pipecheck_jax as pj

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = '''
import sys
import jax.numpy as jnp
import kernels as K

for make in {makers}:
    fn, args = make(b=2, m=256, n=256, bm=128, bn=128)
    fn(jnp.ones(args[0].shape, jnp.float32))
    fn(jnp.ones(args[0].shape, jnp.float32))  # the same call again: one spec
print("script done", sys.argv[1:])
'''


def run_cli(workdir, makers, *extra, cwd=None):
    script = os.path.join(workdir, "script.py")
    with open(script, "w") as f:
        f.write(SCRIPT.format(makers=makers))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE]),
               PIPECHECK=pj.pipecheck_binary())
    out = os.path.join(workdir, "specs")
    return subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out", out, *extra, script,
                           "--flag", "value"], capture_output=True, text=True, env=env, cwd=cwd or workdir)


def test_the_cli_writes_one_spec_per_distinct_call_and_exits_with_check_code(workdir):
    p = run_cli(workdir, "(K.make_incorrect_sum, K.make_correct_sum)")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "script done ['--flag', 'value']" in p.stdout
    assert sorted(os.listdir(os.path.join(workdir, "specs"))) == [
        "correct_sum_kernel.pk", "incorrect_sum_kernel.pk"]
    assert "[uninitialized-accumulator]" in p.stdout
    assert f"{os.path.join(HERE, 'kernels.py')}:" in p.stdout
    assert "kernel correct_sum_kernel: verified" in p.stdout


def test_the_cli_exits_zero_when_every_kernel_verifies(workdir):
    p = run_cli(workdir, "(K.make_correct_sum,)")
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_cli_sarif_points_at_the_python_kernel(workdir):
    p = run_cli(workdir, "(K.make_incorrect_sum,)", "--format", "sarif")
    assert p.returncode == 1, p.stderr
    assert "script done" in p.stderr  # the script's prints stay out of the report
    doc = json.loads(p.stdout)
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
            for run in doc["runs"] for res in run["results"] for loc in res["locations"]}
    assert uris == {"file://" + os.path.join(HERE, "kernels.py")}
    # Run from above the kernel's file, the URI is relative to the working directory,
    # as pipecheck's own SARIF writes it (code scanning lands it on the repository's line).
    p = run_cli(workdir, "(K.make_incorrect_sum,)", "--format", "sarif", cwd=os.path.dirname(HERE))
    doc = json.loads(p.stdout)
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
            for run in doc["runs"] for res in run["results"] for loc in res["locations"]}
    assert uris == {os.path.basename(HERE) + "/kernels.py"}


def test_the_cli_reports_a_script_without_pallas_call(workdir):
    script = os.path.join(workdir, "plain.py")
    with open(script, "w") as f:
        f.write("print(1 + 1)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    p = subprocess.run([sys.executable, "-m", "pipecheck_jax", "--out",
                        os.path.join(workdir, "o"), script], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 2 and "made no pallas_call" in p.stderr
