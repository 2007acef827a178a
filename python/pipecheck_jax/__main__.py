"""python -m pipecheck_jax [--out DIR] [--format F] [--while-bound N] SCRIPT.py [ARGS...]

Runs an unmodified script with pallas_call intercepted, writes each distinct call's `.pk`
spec to DIR (named after the kernel function), runs `pipecheck check` on them and exits
with its code (0 verified, 1 violation, 2 unknown or unsupported, 3 bad input, 4 error).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import runpy
import sys
import traceback

from ._check import EXIT_ENV, EXIT_UNKNOWN, check_kernels
from ._export import (DEFAULT_WHILE_BOUND, GPU_TARGETS, TPU_TARGETS, UnsupportedError,
                      NotNative, export_found, internal_error, lowered_unsupported, pallas_calls,
                      tpu_info_on_cpu, trace, trace_lowered)


class Recorder:
    """Collects the distinct pallas_calls a script makes, as exported kernels."""

    def __init__(self, while_bound: int = DEFAULT_WHILE_BOUND, target: str | None = None):
        self.while_bound = while_bound
        self.target = target
        self.kernels = []
        self.unsupported = []
        self.names: set = set()
        self._texts: set = set()
        self._errors: set = set()
        self._nested = None  # the NotNative of the last call traced again without the primitive

    def record(self, f, args, call_site=None):
        import jax

        specs = [jax.ShapeDtypeStruct(getattr(a, "shape", ()), getattr(a, "dtype", None))
                 if hasattr(a, "shape") else a for a in args]
        try:
            # (scalar prefetch contents, when concrete, from the args)
            exported = self._export(pallas_calls(trace(f, *specs), list(args)), call_site)
            if exported is None:  # an emit_pipeline the nested form cannot say: as Pallas lowers it
                nested = self._nested
                exported = self._export(pallas_calls(trace_lowered(f, *specs), list(args)),
                                        call_site)
                exported = [(c, lowered_unsupported(nested, k) if isinstance(k, UnsupportedError)
                             and nested is not None else k) for c, k in exported or []]
        except Exception as e:  # noqa: BLE001 - the script's own call will raise it again
            self._unsupported(UnsupportedError(f"could not trace the pallas_call: {e}"))
            return
        for call, k in exported:
            if isinstance(k, UnsupportedError):
                self._unsupported(k)
                continue
            if k.text in self._texts:
                continue
            self._texts.add(k.text)
            if k.name in self.names:  # another call of the same kernel function: a new name
                k = export_found(call, self.names, call_site, while_bound=self.while_bound,
                                 target=self.target)
            else:
                self.names.add(k.name)
            self.kernels.append(k)

    def _export(self, calls, call_site):
        """(call, its Kernel or the UnsupportedError saying why not) per call; None where an
        emit_pipeline has no nested form (NotNative): the function is traced again."""
        out = []
        for call in calls:
            try:
                k = export_found(call, set(), call_site, while_bound=self.while_bound,
                                 target=self.target)
            except NotNative as nested:
                self._nested = nested
                return None
            except UnsupportedError as e:
                k = e
            except Exception as e:  # noqa: BLE001 - a bug of the export must not stop the script
                k = internal_error(e)
            out.append((call, k))
        return out

    def _unsupported(self, e):
        if str(e) not in self._errors:
            self._errors.add(str(e))
            self.unsupported.append(e)


def _user_frame():
    """(file, line) of the innermost caller outside this package and jax."""
    import jax

    skip = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(jax.__file__)))
    for fr in reversed(traceback.extract_stack()):
        path = os.path.abspath(fr.filename)
        if not path.startswith(skip) and not fr.filename.startswith("<"):
            return (fr.filename, fr.lineno)
    return None


def intercept(recorder: Recorder, interpret_on_cpu: bool = True):
    """Patches pallas_call so that every call is recorded before it runs.

    On a CPU backend a call without `interpret=` runs in interpret mode, so that the script
    gets on past it. Returns a function that undoes the patch.
    """
    import jax
    from jax.experimental import pallas as pl
    from jax._src.pallas import pallas_call as pc_mod

    orig = pl.pallas_call

    @functools.wraps(orig)
    def pallas_call(*a, **kw):
        if interpret_on_cpu and not kw.get("interpret") and jax.default_backend() == "cpu":
            kw["interpret"] = True
        f = orig(*a, **kw)

        @functools.wraps(f)
        def call(*args):
            recorder.record(f, args, _user_frame())
            with tpu_info_on_cpu():  # (a pltpu.emit_pipeline asks for the TPU's tiling)
                return f(*args)

        return call

    pl.pallas_call = pallas_call
    had = getattr(pc_mod, "pallas_call", None)
    pc_mod.pallas_call = pallas_call

    def undo():
        pl.pallas_call = orig
        if had is not None:
            pc_mod.pallas_call = had

    return undo


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipecheck_jax",
        description="Run a JAX script, export each pallas_call it makes to .pk and check them.")
    ap.add_argument("--out", default="pipecheck_jax_out",
                    help="folder for the exported .pk specs (default: pipecheck_jax_out)")
    ap.add_argument("--format", default="text", choices=["text", "json", "sarif", "junit", "html"],
                    help="pipecheck check's output format; text and sarif name the Python lines")
    ap.add_argument("--no-interpret", action="store_true",
                    help="do not switch pallas_calls to interpret mode on a CPU backend")
    ap.add_argument("--while-bound", type=_positive, default=DEFAULT_WHILE_BOUND, metavar="N",
                    help="iterations each non-counted lax.while_loop in a kernel body is checked "
                    f"for (default {DEFAULT_WHILE_BOUND}); a loop that may run longer is unknown")
    ap.add_argument("--target", choices=list(TPU_TARGETS + GPU_TARGETS), default=None,
                    help="the TPU (default tpu_v5e) or GPU (default h100) whose tiling rule and "
                    "on-chip memory the kernels are checked against")
    ap.add_argument("script", help="the Python script to run, unmodified")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    opts = ap.parse_args(argv)

    rec = Recorder(opts.while_bound, opts.target)
    undo = intercept(rec, not opts.no_interpret)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [opts.script, *opts.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(opts.script)))
    script_failed = False
    # A machine-readable report owns standard output: the script's prints go to stderr then.
    quiet = contextlib.redirect_stdout(sys.stderr) if opts.format != "text" else contextlib.nullcontext()
    try:
        with quiet:
            runpy.run_path(opts.script, run_name="__main__")
    except SystemExit as e:
        script_failed = e.code not in (None, 0)
        if script_failed:
            print(f"pipecheck_jax: {opts.script} exited with {e.code}", file=sys.stderr)
    except Exception:  # noqa: BLE001 - report the script's failure, still check what it made
        traceback.print_exc()
        script_failed = True
    finally:
        undo()
        sys.argv, sys.path[:] = saved_argv, saved_path

    if not rec.kernels and not rec.unsupported:
        print(f"pipecheck_jax: {opts.script} made no pallas_call", file=sys.stderr)
        return EXIT_ENV if script_failed else EXIT_UNKNOWN
    result = check_kernels(rec.kernels, opts.out, rec.unsupported, fmt=opts.format)
    if opts.format == "text":
        print(result.report())
        print(f"pipecheck_jax: {len(rec.kernels)} kernel(s) written to {opts.out}/, "
              f"{len(rec.unsupported)} unsupported")
    else:
        sys.stdout.write(result.output)
        for u in rec.unsupported:
            print(str(u), file=sys.stderr)
    return EXIT_ENV if script_failed and result.exit_code == 0 else result.exit_code


if __name__ == "__main__":
    sys.exit(main())
