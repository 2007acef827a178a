"""Runs `pipecheck check` on exported kernels and maps its findings back to the Python source."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from ._export import DEFAULT_WHILE_BOUND, Kernel, UnsupportedError, export_kernels

#: exit codes, as pipecheck's: 0 verified, 1 violation, 2 unknown/unsupported, 3 bad input,
#: 4 environment error.
EXIT_VERIFIED, EXIT_VIOLATION, EXIT_UNKNOWN, EXIT_BAD_INPUT, EXIT_ENV = 0, 1, 2, 3, 4


def pipecheck_binary() -> str:
    """The pipecheck executable: $PIPECHECK, else the repository's build/cli/pipecheck, else PATH."""
    env = os.environ.get("PIPECHECK")
    if env:
        return env
    here = Path(__file__).resolve().parent
    for root in (here.parent.parent, Path.cwd()):
        cand = root / "build" / "cli" / "pipecheck"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    found = shutil.which("pipecheck")
    if found:
        return found
    raise FileNotFoundError("no pipecheck executable: set PIPECHECK, build the repository "
                            "(scripts/build), or put pipecheck on PATH")


@dataclasses.dataclass
class Finding:
    """One finding of `pipecheck check`, located in the Python source where the jaxpr allows."""

    kernel: str
    rule: str
    message: str
    severity: str
    pk_file: str
    pk_line: int
    pk_text: str
    python: tuple[str, int] | None
    #: (message, python (file, line) or None, .pk line) of each note
    notes: list = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        where = f"{self.python[0]}:{self.python[1]}" if self.python else f"{self.pk_file}:{self.pk_line}"
        text = (f"{where}: {self.severity}: {self.message} [{self.rule}]\n"
                f"    kernel {self.kernel}, exported as {self.pk_file}:{self.pk_line}: "
                f"{self.pk_text.strip()}")
        for msg, py, line in self.notes:
            at = f"{py[0]}:{py[1]}" if py else f"{self.pk_file}:{line}"
            text += f"\n    {at}: note: {msg}"
        return text


@dataclasses.dataclass
class CheckResult:
    """What `pipecheck check` said about the exported kernels of one function or script."""

    exit_code: int
    verdicts: dict[str, str]  # kernel name -> verified | violation | unknown | error | unsupported
    findings: list[Finding]
    unsupported: list[UnsupportedError]
    kernels: list[Kernel]
    output: str  # pipecheck's own output (the --format asked for; json for check())
    files: list[str]
    #: kernel name -> pipecheck's reason for a verdict that is not `verified` or `violation`
    #: (why it is `unknown`: e.g. a while loop that may run past its bound)
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return self.exit_code == EXIT_VERIFIED

    @property
    def opaque(self) -> dict[str, list]:
        """Kernel name -> (primitive, python (file, line) or None, .pk line) of each op the
        export kept as an opaque op: checked on what it reads, not on its values."""
        return {k.name: list(k.opaque) for k in self.kernels if k.opaque}

    @property
    def dropped(self) -> dict[str, list]:
        """Kernel name -> (primitive, python (file, line) or None, .pk line) of each op the
        export left out as a comment (debug_print, debug_check: they write no memory)."""
        return {k.name: list(k.dropped) for k in self.kernels if k.dropped}

    def report(self) -> str:
        out = []
        for f in self.findings:
            out.append(str(f))
        for u in self.unsupported:
            out.append(str(u))
        for k, ops in self.opaque.items():
            for prim, py, line in ops:
                where = f"{py[0]}:{py[1]}: " if py else ""
                at = f" (line {line})" if line else ""
                out.append(f"{where}note: '{prim}' has no .pk form: kernel {k} keeps it as an opaque "
                           f"op{at}, checked on what it reads, not on its values; run cannot "
                           "execute it")
        for k, ops in self.dropped.items():
            for prim, py, line in ops:
                where = f"{py[0]}:{py[1]}: " if py else ""
                at = f" (a comment at line {line})" if line else ""
                out.append(f"{where}note: '{prim}' is left out of kernel {k}{at}: it writes no "
                           "memory; the refs its operands read are still read")
        for k, v in self.verdicts.items():
            why = self.reasons.get(k)
            out.append(f"kernel {k}: {v}" + (f" ({why})" if why else ""))
        return "\n".join(out)

    def __str__(self) -> str:
        return self.report()


def _combine(codes) -> int:
    codes = list(codes)
    for c in (EXIT_ENV, EXIT_BAD_INPUT, EXIT_VIOLATION, EXIT_UNKNOWN):
        if c in codes:
            return c
    return EXIT_VERIFIED


def write_kernels(kernels: list[Kernel], out_dir: str | os.PathLike) -> list[str]:
    """Writes each kernel to OUT_DIR/NAME.pk; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for k in kernels:
        path = os.path.join(out_dir, f"{k.name}.pk")
        with open(path, "w") as f:
            f.write(k.text)
        paths.append(path)
    return paths


def check_kernels(kernels: list[Kernel], out_dir: str, unsupported=(), extra_args=(),
                  fmt: str | None = None) -> CheckResult:
    """Writes the kernels to out_dir and runs `pipecheck check` on them.

    The findings come from a json run; with fmt (text, sarif, junit, html, json) a second run
    renders pipecheck's own report into CheckResult.output, SARIF with its locations moved to
    the Python source.
    """
    unsupported = list(unsupported)
    verdicts = {u.kernel or "?": "unsupported" for u in unsupported}
    if not kernels:
        return CheckResult(EXIT_UNKNOWN if unsupported else EXIT_VERIFIED, verdicts, [], unsupported,
                           [], "", [])
    paths = write_kernels(kernels, out_dir)
    exe = pipecheck_binary()
    proc = subprocess.run([exe, "check", "--format", "json", *extra_args, *paths],
                          capture_output=True, text=True)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"pipecheck check failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    by_path = {os.path.abspath(p): k for p, k in zip(paths, kernels)}
    texts = {os.path.abspath(p): k.text.splitlines() for p, k in zip(paths, kernels)}
    findings = []
    reasons = {}
    for r in data.get("results", []):
        path = os.path.abspath(r.get("file", ""))
        k = by_path.get(path)
        unit = r.get("unit") or (k.name if k else "?")
        verdicts[unit] = r.get("verdict", "?")
        if r.get("verdict") == "unknown" and r.get("reason"):
            reasons[unit] = _python_lines(r["reason"], k)
        if r.get("verdict") == "error":
            found = _finding(k, path, texts.get(path, []), unit, "bad-input",
                             r.get("message", ""), "error", r.get("line", 0))
            if _NEGATIVE_SUBSCRIPT.search(found.message):
                found.notes.append((_NEGATIVE_INDEX, found.python, found.pk_line))
            findings.append(found)
        for f in r.get("findings", []):
            found = _finding(k, path, texts.get(path, []), unit, f.get("rule", "?"),
                             f.get("message", ""), f.get("severity", "error"), f.get("line", 0))
            for n in f.get("notes", []):
                line = n.get("line", 0)
                found.notes.append((_python_lines(n.get("message", ""), k),
                                    k.line_map.get(line) if k is not None else None, line))
            if k is not None and k.mosaic_gpu and found.rule == "async-operand-overwritten":
                found.notes.append((_DROPPED_DELAY_RELEASE, k.call_site, 0))
            if k is not None and k.batch_axes:
                found.notes.append((_batch_axes_note(k.batch_axes), k.call_site, 0))
            if k is not None and k.callers and k.call_site is not None and sum(
                    o.call_site == k.call_site for o in kernels) > 1:
                # a helper that makes several of the calls: which one this is
                found.notes.append(("in the pallas_call made through this call (the helper at "
                                    f"{os.path.basename(k.call_site[0])}:{k.call_site[1]} makes "
                                    "several)", k.callers[0], 0))
            findings.append(found)
    code = _combine([proc.returncode] + ([EXIT_UNKNOWN] if unsupported else []))
    output = proc.stdout
    if fmt and fmt != "json":
        rendered = subprocess.run([exe, "check", "--format", fmt, *extra_args, *paths],
                                  capture_output=True, text=True)
        # pipecheck's notes on standard error would not parse as a SARIF or JSON document
        output = rendered.stdout + (rendered.stderr if fmt not in ("sarif", "json") else "")
        if fmt == "sarif":
            output = _sarif_to_python(output, by_path)
    return CheckResult(code, verdicts, findings, unsupported, kernels, output, paths, reasons)


#: Why a Mosaic GPU pallas_call's wgmma races whatever its BlockSpecs say: Pallas' lowering
#: (jax/_src/pallas/mosaic_gpu/lowering.py, _block_spec_from_block_mapping, in jax 0.10 and
#: 0.11) builds the pipeline's BlockSpecs from the call's block mappings, which keep no
#: delay_release.
_DROPPED_DELAY_RELEASE = (
    "a Mosaic GPU pallas_call pipelines with delay_release = 0, whatever its plgpu.BlockSpecs "
    "say: Pallas' lowering does not pass delay_release on to the pipeline. Await the wgmma in "
    "the step (plgpu.wgmma_wait(0)), or pipeline with plgpu.emit_pipeline inside plgpu.kernel, "
    "whose BlockSpecs keep it")


#: A static subscript below 0 (`x_ref[-1]`), which pipecheck rejects as out of bounds: JAX's
#: interpret=True reads an integer index from the end, as numpy (lax.dynamic_slice wraps it),
#: but Pallas' TPU and GPU lowerings pass it on as it is (jax 0.10's
#: `_indexer_to_start_size_stride` in jax/_src/pallas/mosaic/lowering.py; jax-ml/jax#27490).
_NEGATIVE_SUBSCRIPT = re.compile(r"\b(index|slice) -\d+\S* is out of bounds")
_NEGATIVE_INDEX = (
    "a negative index into a Pallas ref does not count from the end on a TPU or GPU: only "
    "interpret=True reads x_ref[-1] as numpy does; the compiled kernel reads outside the block. "
    "Write the element's own index (x_ref[n - 1])")


def _batch_axes_note(axes: tuple) -> str:
    """How the axes a finding names map to the kernel's own under jax.vmap."""
    which = ", ".join(str(a) for a in axes)
    return (f"the grid here has jax.vmap's batch axes as axis {which} (parallel): grid points, "
            "axis numbers and program_id(k) in this finding count them, so the kernel's own "
            "axes are numbered after them (pl.program_id in its body names its own, as Mosaic "
            "renumbers it)")


def _python_lines(message: str, k) -> str:
    """A message's "line N" (a line of the exported .pk file) as the Python line it came from,
    `file.py:M`, where the export knows it."""
    if k is None:
        return message

    def sub(m):
        py = k.line_map.get(int(m.group(1)))
        return f"{os.path.basename(py[0])}:{py[1]}" if py else m.group(0)

    return re.sub(r"\bline (\d+)\b", sub, message)


def _finding(k, path, lines, unit, rule, message, severity, line) -> Finding:
    py = k.line_map.get(line) if k is not None else None
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return Finding(unit, rule, _python_lines(message, k), severity, path, line, text.split("  # ")[0], py)


def _sarif_uri(path: str) -> str:
    """A SARIF artifact URI as pipecheck's own SARIF writes one: relative to the working
    directory when the file is under it (where code scanning puts results on the
    repository's lines), else a file:// URI."""
    from urllib.parse import quote

    p = Path(path).resolve()
    try:
        return quote(p.relative_to(Path.cwd().resolve()).as_posix())
    except ValueError:
        return p.as_uri()


def _sarif_to_python(text: str, by_path: dict) -> str:
    """Moves each SARIF location from the exported .pk line to the Python line it came from."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return text

    def fix(loc):
        phys = loc.get("physicalLocation") or {}
        art = phys.get("artifactLocation") or {}
        uri = art.get("uri", "")
        path = os.path.abspath(uri[7:] if uri.startswith("file://") else uri)
        k = by_path.get(path)
        region = phys.get("region") or {}
        if k is None or "startLine" not in region:
            return
        py = k.line_map.get(region["startLine"])
        if py is None:
            return
        art["uri"] = _sarif_uri(py[0])
        art.pop("uriBaseId", None)
        phys["region"] = {"startLine": py[1]}

    def walk(node):
        if isinstance(node, dict):
            for key, v in node.items():
                if key in ("locations", "relatedLocations") and isinstance(v, list):
                    for loc in v:
                        if isinstance(loc, dict):
                            fix(loc)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    return json.dumps(doc, indent=2) + "\n"


def check(fn: Callable, *args, keep_dir: str | None = None,
          while_bound: int = DEFAULT_WHILE_BOUND, target: str | None = None,
          **kwargs) -> CheckResult:
    """Exports every pallas_call of fn(*args, **kwargs) and runs `pipecheck check` on them.

    A construct the export cannot express is an `unsupported` entry and exit code 2 (unknown).
    A non-counted `lax.while_loop` in a body is checked exactly for runs of at most
    while_bound iterations; where it may run longer, the kernel is `unknown` (exit 2).
    `target` is the TPU (default tpu_v5e) or GPU (default h100) whose tiling rule and
    on-chip memory the kernels are checked against (`tpu_v4`, `tpu_v5e`, `tpu_v5p`,
    `tpu_v6e`, `h100`, `h200`).
    """
    try:
        kernels = export_kernels(fn, *args, while_bound=while_bound, target=target, **kwargs)
        unsupported = []
    except UnsupportedError as e:
        kernels, unsupported = [], [e]
    if keep_dir is not None:
        return check_kernels(kernels, keep_dir, unsupported)
    with tempfile.TemporaryDirectory(prefix="pipecheck_jax_") as d:
        return check_kernels(kernels, d, unsupported)


def assert_verified(fn: Callable, *args, while_bound: int = DEFAULT_WHILE_BOUND,
                    target: str | None = None, **kwargs) -> CheckResult:
    """Fails (AssertionError with the findings) unless every kernel fn makes is verified
    (`while_bound`, `target`: see check)."""
    r = check(fn, *args, while_bound=while_bound, target=target, **kwargs)
    if not r.verified:
        raise AssertionError("pipecheck did not verify the kernels:\n" + r.report())
    return r
