"""Runs exported kernels in pipecheck's executor on the arrays a JAX function is given."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core as jax_core

from ._check import pipecheck_binary
from ._export import (_CALLS, DEFAULT_WHILE_BOUND, Call, NotNative, UnsupportedError, _consts,
                      _inner, _while_bound, export_found, find_pallas_calls, lowered_unsupported,
                      _backend, _semantics, has_pipeline_primitive, scan_counts, sub_jaxprs,
                      trace, trace_lowered, unused_outputs)


@dataclasses.dataclass
class RunResult:
    """fn's outputs three ways: pallas_calls run by pipecheck, by JAX interpret=True, and ref."""

    #: fn's outputs, each pallas_call run by `pipecheck run`; None where a run stopped at an
    #: error of the kernel (then nothing is compared, and pipecheck_output says where)
    outputs: list | None
    interpret_outputs: list  # fn's outputs, each pallas_call run with interpret=True
    reference_outputs: list | None
    pipecheck_exit: int  # the worst `pipecheck run` exit code (1: pipelined run != oracle)
    pipecheck_output: str
    mismatches: list[str]
    #: why JAX's interpret=True could not run fn (then interpret_outputs is None and only the
    #: reference is compared), e.g. a pl.BoundedSlice block dim outside emit_pipeline
    interpret_error: str | None = None

    @property
    def ok(self) -> bool:
        compared = self.interpret_error is None or self.reference_outputs is not None
        return self.pipecheck_exit == 0 and not self.mismatches and compared

    def __str__(self) -> str:
        lines = list(self.mismatches)
        if self.interpret_error is not None:
            lines.append("interpret=True could not run it, so it was not compared with JAX"
                         + ("" if self.reference_outputs is not None else
                            " (and no reference was given: nothing was compared)")
                         + f": {self.interpret_error}")
        if self.pipecheck_exit:
            lines.append(f"pipecheck run exited {self.pipecheck_exit}:\n{self.pipecheck_output}")
        return "\n".join(lines) or "ok"


def _save(path: str, value) -> None:
    a = np.asarray(value)
    if a.dtype.name == "bfloat16":  # pipecheck reads bf16 as the raw bits, NumPy's V2
        a = a.view(np.uint16).view("V2")
    np.save(path, np.ascontiguousarray(a).reshape(a.shape))  # (ascontiguousarray makes a 0-d array 1-d)


def _load(path: str, dtype):
    a = np.load(path)
    if np.dtype(dtype).name == "bfloat16":
        a = a.view(np.uint16).view(jnp.bfloat16)
    return jnp.asarray(a)


class _Stopped(Exception):
    """`pipecheck run` stopped a kernel at an error of its own (exit 1, no outputs)."""


class _NotModelled(Exception):
    """interpret=True runs the pallas_call otherwise than a TPU would."""


def _aliased_any_inputs(eqn):
    """Each input in memory_space=ANY aliased to an output, as (input index, output index,
    whether the kernel reads the input, writes through the input, writes the output)."""
    kernel = eqn.params["jaxpr"]
    gm = eqn.params["grid_mapping"]
    written, read = set(), set()
    for e in kernel.effects:
        kind = type(e).__name__
        if kind in ("WriteEffect", "ReadEffect"):
            at = getattr(e, "input", getattr(e, "input_index", None))  # a Var, or its position
            (written if kind == "WriteEffect" else read).add(
                id(kernel.invars[at]) if isinstance(at, int) else id(at))
    for i, o in eqn.params["input_output_aliases"]:
        b = i - gm.num_index_operands
        if not 0 <= b < gm.num_inputs or i >= len(kernel.invars):
            continue
        space = getattr(gm.block_mappings[b].block_aval, "memory_space", None)
        if str(getattr(space, "value", space)) not in ("any", "hbm"):
            continue
        out = gm.num_index_operands + gm.num_inputs + o
        yield (i, o, id(kernel.invars[i]) in read, id(kernel.invars[i]) in written,
               out < len(kernel.invars) and id(kernel.invars[out]) in written)


def _aliased_write_through_input(eqn) -> str | None:
    """Why interpret=True cannot stand for a TPU on this pallas_call, or None.

    An input in memory_space=ANY aliased to an output is that output's HBM buffer on a TPU,
    so the kernel's copies into the input's ref land in the output. JAX's interpret=True
    keeps them two buffers: the output keeps the input's data."""
    for i, o, _, writes_input, _ in _aliased_any_inputs(eqn):
        if writes_input:
            return (f"the kernel writes through input {i}, in memory_space=ANY and aliased to "
                    f"output {o}: on a TPU that is the output's buffer, but interpret=True keeps "
                    "the two apart (its output keeps the input's data)")
    return None


def _aliased_read_back(eqn) -> str | None:
    """Why interpret=True may differ from a TPU on this pallas_call, or None: the kernel reads
    an input in memory_space=ANY and writes the output aliased to it, so a read of rows already
    written sees them on a TPU (an in-place scatter-add whose ids repeat), not under
    interpret=True. Whether it does depends on the data: only a difference from
    interpret=True is put down to it."""
    for i, o, reads_input, _, writes_output in _aliased_any_inputs(eqn):
        if reads_input and writes_output:
            return (f"the kernel reads input {i}, in memory_space=ANY and aliased to output {o}, "
                    f"and writes that output: on a TPU they are one buffer, so a read after a "
                    "write sees it, but interpret=True keeps the two apart (the input keeps its "
                    "data)")
    return None


def _prefetch_written(eqn) -> str | None:
    """Why interpret=True cannot stand for a TPU on this pallas_call, or None: the kernel stores
    into a scalar-prefetch ref (upstream paged attention keeps its buffer index and init flag
    there). On a TPU those are SMEM words that keep the stores across grid steps; JAX's
    interpret=True does not keep them so."""
    kernel = eqn.params["jaxpr"]
    n = int(getattr(eqn.params["grid_mapping"], "num_index_operands", 0) or 0)
    prefetch = {id(v): i for i, v in enumerate(kernel.invars[:n])}
    for e in kernel.effects:
        if type(e).__name__ == "WriteEffect":
            at = getattr(e, "input", getattr(e, "input_index", None))
            i = at if isinstance(at, int) and at < n else prefetch.get(id(at))
            if i is not None:
                return (f"the kernel stores into scalar-prefetch ref {i}: on a TPU that SMEM "
                        "keeps the stores from one grid step to the next, interpret=True does not")
    return None


def _cta_scratch_shared(eqn) -> str | None:
    """Why interpret=True cannot stand for a GPU on this Mosaic GPU pallas_call, or None.

    On Mosaic GPU the parallel axes are CTAs, each with its own scratch, running the sequential
    axes in order. interpret=True runs the whole grid in order with one scratch: where a
    parallel axis comes after a sequential one, the CTAs' steps interleave on that scratch."""
    p = eqn.params
    kj, gm = p["jaxpr"], p["grid_mapping"]
    if _backend(p.get("compiler_params"), kj, gm) != "mosaic_gpu":
        return None
    n_scratch = int(getattr(gm, "num_scratch_operands", 0) or 0)
    sem = _semantics(p.get("compiler_params"), len(gm.grid), None) or []
    grid = [int(g) if isinstance(g, (int, np.integer)) else 2 for g in gm.grid]
    seen_sequential = False
    for a, s in enumerate(sem):
        if s != "parallel" and grid[a] > 1:
            seen_sequential = True
        elif s == "parallel" and grid[a] > 1 and seen_sequential and n_scratch:
            return (f"grid axis {a} is parallel after a sequential one: on the GPU each CTA "
                    "keeps its own scratch, but interpret=True runs the grid in order with one "
                    "scratch for all")
    return None


def _tma_zero_fill(eqn) -> str | None:
    """Why interpret=True may differ from a GPU on this Mosaic GPU pallas_call, or None: an
    input's last block is ragged. The GPU fetches it by TMA, which fills its part past the
    array with zeros (pipecheck's lowering: copy_in_start(..., zeros=True)); interpret=True
    pads it with undefined values (NaN). Whether the padding reaches an output depends on the
    kernel: only a difference from interpret=True is put down to it."""
    p = eqn.params
    gm = p["grid_mapping"]
    if _backend(p.get("compiler_params"), p["jaxpr"], gm) != "mosaic_gpu":
        return None
    first = int(getattr(gm, "num_index_operands", 0) or 0)
    for b, bm in enumerate(gm.block_mappings[:gm.num_inputs]):
        shape = tuple(getattr(bm.array_aval, "shape", ()))
        for d, (n, dim) in enumerate(zip(shape, bm.block_shape)):
            size = getattr(dim, "block_size", dim)
            if type(dim).__name__ == "Blocked" or isinstance(size, (int, np.integer)):
                if isinstance(size, (int, np.integer)) and size > 0 and int(n) % int(size) != 0:
                    return (f"input {first + b} is ragged along dim {d} ({n} in blocks of {size}): "
                            "on the GPU its last block's padding is zeros (TMA), under "
                            "interpret=True it is undefined (NaN)")
    return None


def _ds_clamped(eqn, holder, invals, dropped) -> str | None:
    """Why interpret=True cannot stand for Triton on this call, or None: a masked pl.ds window
    that starts before its ref (a halo's `pl.ds(i * 128 - 1, 128)`) is read by Triton at that
    offset, its lanes before the ref masked off, but interpret=True's dynamic_slice clamps the
    start into the ref and shifts every lane."""
    p = eqn.params
    if _backend(p.get("compiler_params"), p["jaxpr"], p["grid_mapping"]) != "triton":
        return None
    try:
        k = export_found(Call(eqn, holder, [np.asarray(v) for v in invals], dropped), set())
    except Exception:  # noqa: BLE001 - pipecheck's own run reports what does not export
        return None
    if k.ds_before_start:
        return ("a masked pl.ds window starts before its ref: Triton reads it at that offset, "
                "interpret=True clamps the start (lax.dynamic_slice) and shifts its lanes")
    return None


def _fmt(loc) -> str:
    return f"{loc[0]}:{loc[1]}"


def _at_python(text: str, k, pk: str) -> str:
    """`pipecheck run`'s output on the exported kernel k (written to pk, a temporary file gone
    after run unless keep_dir), each place in pk it names (`line N`, `PK:N:C`) written as the
    Python line it came from, `file.py:M`, where the export knows it."""
    def py(n: str):
        at = k.line_map.get(int(n))
        return _fmt(at) if at else None

    text = re.sub(re.escape(pk) + r":(\d+):\d+:",
                  lambda m: (py(m.group(1)) or f"line {m.group(1)}") + ":", text)
    return re.sub(r"\bline (\d+)\b", lambda m: py(m.group(1)) or m.group(0), text)


class _Evaluator:
    def __init__(self, mode: str, work: str, while_bound: int = DEFAULT_WHILE_BOUND,
                 max_memory: str | None = None, kept: bool = False):
        self.mode = mode  # "pipecheck" or "interpret"
        self.work = work
        self.kept = kept  # whether work outlives the run (keep_dir): its .pk files may be cited
        self.while_bound = while_bound
        self.max_memory = max_memory  # `pipecheck run --max-memory`, or None for its default
        self.exit = 0
        self.output = ""
        self.caveats: list[str] = []  # why interpret mode may differ on this data
        self.count = 0

    def pallas_call(self, eqn, invals, holder, dropped=frozenset()):
        """eqn (a pallas_call of the jaxpr `holder`, whose results at `dropped` its callers
        drop) run on invals: by JAX's interpret mode, or exported with the values it gets and
        run by `pipecheck run`."""
        if self.mode == "interpret":
            for caveat in (_aliased_read_back(eqn), _tma_zero_fill(eqn)):
                if caveat is not None:
                    self.caveats.append(caveat)
            if (why := _aliased_write_through_input(eqn) or _prefetch_written(eqn)
                    or _cta_scratch_shared(eqn)
                    or _ds_clamped(eqn, holder, invals, dropped)) is not None:
                raise _NotModelled(why)
            params = dict(eqn.params)
            params["interpret"] = True
            return eqn.primitive.bind(*invals, **params)
        k = export_found(Call(eqn, holder, [np.asarray(v) for v in invals], dropped), set(),
                         while_bound=self.while_bound)
        self.count += 1
        d = os.path.join(self.work, f"{self.count}_{k.name}")
        os.makedirs(os.path.join(d, "in"), exist_ok=True)
        pk = os.path.join(d, f"{k.name}.pk")
        with open(pk, "w") as f:
            f.write(k.text)
        ins = [op for op in k.operands if op[1] == "in"]
        for (name, _, _, _), v in zip(ins, invals[len(invals) - len(ins):]):
            _save(os.path.join(d, "in", f"{name}.npy"), v)
        # A Triton kernel runs as Triton may: every program launched at once (pipecheck's
        # adversarial run), so one that races with another's stores gives other outputs. A
        # body's own asynchronous copies run in every DMA mode (`run`'s default: eager,
        # on_wait and random seeds, the outputs of the first), where a wait on the wrong
        # semaphore or a read before its wait shows; the pipeline alone, eagerly.
        dma = ["--dma", "random", "--seed", "0"] if k.triton else \
            [] if re.search(r"\b(async_copy|semaphore_signal|semaphore_wait)\(", k.text) else \
            ["--dma", "eager"]
        if self.max_memory is not None:
            dma += ["--max-memory", self.max_memory]
        proc = subprocess.run([pipecheck_binary(), "run", pk, *dma, "--inputs",
                               os.path.join(d, "in"), "--save", os.path.join(d, "out")],
                              capture_output=True, text=True)
        said = _at_python(proc.stdout + proc.stderr, k, pk)
        self.output += said
        self.exit = max(self.exit, proc.returncode)
        outs = [os.path.join(d, "out", f"{name}.npy") for name, role, _, _ in k.operands
                if role == "out"]
        where = f" (the pallas_call at {_fmt(k.call_site)})" if k.call_site else ""
        kept = f", exported as {pk}" if self.kept else ""
        if proc.returncode == 1 and not all(os.path.exists(f) for f in outs):
            # the run stopped at an error of the kernel (an out-of-bounds access, a wait that
            # hangs): a verdict on it, not a failure to run
            raise _Stopped(f"pipecheck run stopped kernel {k.name}{where}{kept} at an error "
                           f"of the kernel, and it wrote no outputs:\n{said}")
        if proc.returncode not in (0, 1) or not all(os.path.exists(f) for f in outs):
            raise RuntimeError(f"pipecheck run of kernel {k.name}{where}{kept} failed (exit "
                               f"{proc.returncode}) and wrote no outputs:\n{said}")
        # A dropped output the kernel declared as scratch has no result; nothing reads it.
        return [_load(os.path.join(d, "out", f"{name}.npy"), dt) if role == "out" else
                jnp.zeros(shape, dt)
                for name, role, shape, dt in k.operands if role in ("out", "dropped")]

    def eval(self, jaxpr, consts, args, dropped=frozenset()):
        env = {}

        def read(v):
            return v.val if isinstance(v, jax_core.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        for e in jaxpr.eqns:
            invals = [read(v) for v in e.invars]
            if e.primitive.name == "pallas_call":
                outs = self.pallas_call(e, invals, jaxpr, dropped)
            else:
                nested = [j for v in e.params.values() for j in sub_jaxprs(v)]
                if any(find_pallas_calls(j) for j in nested):
                    outs = self.control(e, invals, unused_outputs(e, jaxpr, dropped))
                else:
                    bp = e.primitive.get_bind_params(e.params)
                    subfuns, params = bp if isinstance(bp, tuple) else ((), bp)
                    outs = e.primitive.bind(*subfuns, *invals, **params)
                    if not e.primitive.multiple_results:
                        outs = [outs]
            for v, o in zip(e.outvars, outs):
                env[v] = o
        return [read(v) for v in jaxpr.outvars]


    def closed(self, sub, args, dropped=frozenset()):
        """Evaluates a (closed) sub-jaxpr on args (its results at `dropped` unused)."""
        return self.eval(_inner(sub), _consts(sub), list(args), dropped)

    def control(self, e, invals, dropped=frozenset()):
        """An equation whose sub-jaxprs make pallas_calls (its results at `dropped` unused),
        run step by step on the actual values, so that each pallas_call inside runs on its own
        inputs: jit, checkpoint and custom derivative calls, a shard_map over one device,
        cond/switch (the branch the index picks), scan and while."""
        name, p = e.primitive.name, e.params
        if name in _CALLS:
            sub = p.get("jaxpr") or p.get("call_jaxpr") or p.get("fun_jaxpr")
            if sub is not None:
                return self.closed(sub, invals, dropped)
        if name == "shard_map" and getattr(p.get("mesh"), "size", None) == 1:
            return self.closed(p["jaxpr"], invals, dropped)  # its one shard is the arrays
        if name == "cond":
            branches = p["branches"]
            k = min(max(int(np.asarray(invals[0])), 0), len(branches) - 1)
            return self.closed(branches[k], invals[1:])
        if name == "scan":
            (nc, ncarry), length = scan_counts(p), int(p["length"])
            consts, carry, xs = invals[:nc], invals[nc:nc + ncarry], invals[nc + ncarry:]
            steps = range(length - 1, -1, -1) if p.get("reverse") else range(length)
            ys = {}
            for t in steps:
                out = self.closed(p["jaxpr"], consts + list(carry) + [x[t] for x in xs])
                carry, ys[t] = out[:ncarry], out[ncarry:]
            stacked = []
            for k, v in enumerate(e.outvars[ncarry:]):
                stacked.append(jnp.stack([ys[t][k] for t in range(length)]) if length else
                               jnp.zeros(v.aval.shape, v.aval.dtype))
            return list(carry) + stacked
        if name == "while":
            cn, bn = p["cond_nconsts"], p["body_nconsts"]
            cconsts, bconsts, carry = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]
            while bool(np.asarray(self.closed(p["cond_jaxpr"], cconsts + list(carry))[0])):
                carry = self.closed(p["body_jaxpr"], bconsts + list(carry))
            return list(carry)
        raise UnsupportedError(f"run: a pallas_call inside '{name}' is not supported (jit, "
                               "checkpoint, custom_jvp/vjp, a shard_map over one device, cond, "
                               "switch, scan and while are)")


#: The default tolerance of a float output by the float type it is computed in, relative and
#: (times the output's mean magnitude) absolute: a few units in the last place, since
#: pipecheck's executor and XLA sum and scan in other orders (a bf16 `cumsum` rounds each
#: partial sum), and an element near zero is a sum that cancelled, with its terms' rounding.
_TOLERANCE = {"bfloat16": 2e-2, "float16": 4e-3}
_DEFAULT_TOLERANCE = 1e-5


class _Compute(NamedTuple):
    """What fn's computation makes of the default tolerances: `tol`, the loosest relative
    tolerance of the float types it computes in, and `int_atol`, how far an integer output
    may be from the other side's (1 where a float is converted to an integer: a value at a
    rounding boundary, 126.99999 or 127.0 as an executor rounds it, truncates either way)."""
    tol: float = _DEFAULT_TOLERANCE
    int_atol: float = 0.0


def _compute_tolerance(closed) -> _Compute:
    """The loosest default tolerance of the float types fn's computation makes values of,
    pallas_call bodies included: a product rounded to bf16 and stored to an f32 output
    carries bf16's error (which XLA on the CPU, keeping f32 between bf16 ops, does not). A
    float converted to an integer of b bits (an int8 quantization) carries one step of it,
    2**(1 - b) of its range, into what is computed from it, and the integer itself may be
    one off."""
    tol, int_atol, seen, todo = _DEFAULT_TOLERANCE, 0.0, set(), [closed.jaxpr]
    while todo:
        jaxpr = todo.pop()
        if id(jaxpr) in seen:
            continue
        seen.add(id(jaxpr))
        for eqn in jaxpr.eqns:
            for v in eqn.outvars:
                dtype = getattr(v.aval, "dtype", None)
                tol = max(tol, _TOLERANCE.get(getattr(dtype, "name", ""), 0.0))
            if eqn.primitive.name == "convert_element_type" and eqn.invars and eqn.outvars:
                src = np.dtype(getattr(eqn.invars[0].aval, "dtype", np.float32))
                dst = np.dtype(getattr(eqn.outvars[0].aval, "dtype", np.float32))
                if (src.kind == "f" or src.name == "bfloat16") and dst.kind in "iu":
                    int_atol = 1.0
                    tol = max(tol, 2.0 ** (1 - 8 * dst.itemsize))
        todo.extend(jax_core.subjaxprs(jaxpr))
    return _Compute(tol, int_atol)


def _tolerances(w, rtol, atol, compute=_Compute()):
    """rtol and atol for comparing with `want` leaf w: as given, or by its dtype and the
    float type it was computed in: integers and bools exactly, unless a float was converted
    to an integer on the way (then within one, and the float tolerance)."""
    dtype = np.asarray(w).dtype
    if dtype.kind in "iub":
        quantized = dtype.kind != "b" and compute.int_atol > 0
        return ((compute.tol if quantized else 0.0) if rtol is None else rtol,
                (compute.int_atol if quantized else 0.0) if atol is None else atol)
    tol = max(_TOLERANCE.get(dtype.name, _DEFAULT_TOLERANCE), compute.tol)
    if rtol is None:
        rtol = tol
    if atol is None:
        # (The mean, not the largest: one large element must not hide the rest.)
        finite = np.abs(np.asarray(w, dtype=np.float64))
        finite = finite[np.isfinite(finite)]
        scale = float(finite.mean()) if finite.size else 0.0
        atol = tol * (scale if scale > 0 else 1.0)
    return rtol, atol


def _compare(what: str, got, want, rtol: float | None, atol: float | None,
             compute: _Compute = _Compute()) -> list[str]:
    out = []
    got = jax.tree_util.tree_leaves(got)
    want = jax.tree_util.tree_leaves(want)
    if len(got) != len(want):
        return [f"{what}: {len(got)} outputs against {len(want)}"]
    for n, (g, w) in enumerate(zip(got, want)):
        r, a = _tolerances(w, rtol, atol, compute)
        g = np.asarray(g, dtype=np.float64) if np.asarray(g).dtype.kind == "f" or \
            np.asarray(g).dtype.name == "bfloat16" else np.asarray(g)
        w = np.asarray(w, dtype=g.dtype)
        if g.shape != w.shape:
            out.append(f"{what}: output {n} has shape {g.shape}, expected {w.shape}")
            continue
        bad = (g != w) if g.dtype.kind in "iub" and r == 0 and a == 0 else \
            ~np.isclose(g, w, rtol=r, atol=a, equal_nan=True)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            out.append(f"{what}: output {n} differs at {list(idx)}: {g[idx]} against {w[idx]} "
                       f"({int(bad.sum())} of {bad.size} elements)")
    return out


def _max_memory(size) -> str | None:
    """run's max_memory as `pipecheck run --max-memory` takes it: a positive int of bytes, or
    a size string that the CLI reads (and rejects, exit 3, where it is no size)."""
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, (int, np.integer, str)) or \
            (size.strip() == "" if isinstance(size, str) else size < 1):
        raise ValueError(f"max_memory must be a positive number of bytes or a size such as "
                         f"'16G', not {size!r}")
    return size.strip() if isinstance(size, str) else str(int(size))


def run(fn: Callable, *args, reference: Callable | None = None, rtol: float | None = None,
        atol: float | None = None, keep_dir: str | None = None,
        while_bound: int = DEFAULT_WHILE_BOUND, max_memory: int | str | None = None,
        **kwargs) -> RunResult:
    """Runs fn(*args) with each pallas_call executed by `pipecheck run` on the actual arrays.

    Compares the result with fn under JAX's interpret=True and, when given, with
    reference(*args). `RunResult.ok` says whether all agree and pipecheck's pipelined run
    matched its oracle. Where interpret=True cannot run fn (it raises that a construct is
    unsupported, as for a pallas_call with a pl.BoundedSlice dim, or fails inside JAX with an
    AttributeError or AssertionError), `RunResult.interpret_error` says why and only the reference is
    compared: without one, `ok` is False. A non-counted `lax.while_loop` in a kernel body
    runs for real, up to while_bound iterations: a run that needs more stops `pipecheck run`
    with that error (a RuntimeError here). Outputs are compared within rtol and atol; left
    out, integer and bool outputs exactly, float ones within a few units in the last place
    of the narrowest float type fn computes in: 1e-5 for f32, 2e-2 for bf16, 4e-3 for f16,
    atol times the output's mean magnitude. Where fn converts a float to an integer (a
    quantization), a value at a rounding boundary may truncate either way: integer outputs
    are then compared within 1 (and that relative tolerance), float ones within one step of
    the narrowest such integer as well (2**-7 for int8). max_memory raises (or lowers) the host memory
    `pipecheck run` may use, whose estimate refuses a run past 4 GiB by default: bytes as an
    int, or a size as its --max-memory takes it ("16G", "512M"). The args are arrays: a
    jax.ShapeDtypeStruct (enough for check) has no values to run on.
    """
    for n, a in enumerate(args):
        for leaf in jax.tree_util.tree_leaves(a):
            if isinstance(leaf, jax.ShapeDtypeStruct):
                what = "is" if leaf is a else "holds"
                raise TypeError(f"run needs arrays with values, and argument {n} {what} a "
                                f"jax.ShapeDtypeStruct {leaf.shape} {leaf.dtype}: pass an array "
                                "(check and export take either)")
    while_bound = _while_bound(while_bound)
    max_memory = _max_memory(max_memory)
    # An argument may be a pytree (an optimizer step's dict of params): its leaves are
    # the jaxpr's inputs, in the order jax flattens them.
    args = jax.tree_util.tree_map(jnp.asarray, list(args))
    closed = trace(fn, *args, **kwargs)
    leaves = jax.tree_util.tree_leaves(args)
    compute = _compute_tolerance(closed)
    # (interpret mode runs a pltpu.emit_pipeline as the DMAs and loop Pallas makes of it,
    # which JAX may fail to trace: a pl.Element inner BlockSpec)
    lowered, lowered_error = closed, None
    if has_pipeline_primitive(closed):
        try:
            lowered = trace_lowered(fn, *args, **kwargs)
        except Exception as err:  # noqa: BLE001 - JAX's own failure: interpret mode cannot run it
            lowered = None
            lowered_error = (f"interpret mode failed inside JAX tracing the emit_pipeline: "
                             f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}")
    work = keep_dir or tempfile.mkdtemp(prefix="pipecheck_jax_run_")
    try:
        pc = _Evaluator("pipecheck", work, while_bound, max_memory, keep_dir is not None)
        try:
            try:
                outs = pc.eval(closed.jaxpr, closed.consts, leaves)
            except NotNative as nested:  # an emit_pipeline the nested form cannot say: as Pallas lowers it
                if lowered is None:
                    raise RuntimeError(lowered_error) from None
                pc = _Evaluator("pipecheck", work, while_bound, max_memory, keep_dir is not None)
                try:
                    outs = pc.eval(lowered.jaxpr, lowered.consts, leaves)
                except NotNative:
                    raise
                except UnsupportedError as err:
                    raise lowered_unsupported(nested, err) from None
        except _Stopped as stop:  # nothing to compare: the kernel's run failed
            return RunResult(None, None, None, 1, str(stop),
                             ["pipecheck run stopped at an error of the kernel (below)"])
        interp, interpret_error, caveats = None, lowered_error, []
        try:
            if lowered is not None:
                interpreter = _Evaluator("interpret", work)
                interp = interpreter.eval(lowered.jaxpr, lowered.consts, leaves)
                caveats = interpreter.caveats
        except _NotModelled as err:
            interpret_error = f"interpret mode does not model it: {err}"
        except (ValueError, NotImplementedError, AttributeError, AssertionError, TypeError) as err:
            text = str(err).splitlines()[0] if str(err) else ""
            if isinstance(err, (AttributeError, AssertionError, TypeError)):
                # (A TypeError here comes after pipecheck's own run of the same jaxpr went
                # through: jax 0.10's discharge of a Triton `x_ref.at[r].at[cols]` builds a
                # broadcast_in_dim of the wrong rank.)
                # (jax 0.10's discharge of a pltpu.emit_pipeline with a pl.Element BlockSpec
                # slices by a traced size: "Shapes must be 1D sequences of concrete values")
                # (An assert inside JAX: jax 0.10's interpret mode asserts on a
                # pl.program_id inside a pl.run_scoped body.)
                # A crash of interpret mode itself, past tracing (jax 0.10's discharge of
                # upstream ragged paged attention's masked pltpu.store: "'TypedInt' object
                # has no attribute 'shape'"): no verdict on the kernel.
                text = f"interpret mode failed inside JAX: {text}"
            elif "MLIR translation rule for primitive" in text:
                # jax 0.10's interpret mode leaves a pl.program_id inside a pl.when body
                # (a cond branch) undischarged and fails lowering it on the CPU: JAX's
                # own failure, however common the kernel.
                text = f"interpret mode failed inside JAX: {text}"
            elif "does not have a corresponding jaxpr input" in text or \
                    "Did not ask for inval to be discharged" in text:
                # (jax 0.10's discharge of a pl.run_scoped around a pltpu.emit_pipeline: "Did
                # not ask for inval to be discharged but it was")
                # jax 0.10's discharge of a plgpu.wgmma through a ref view (`a_ref.at[:, ds]`):
                # its read effect names a ref the discharged jaxpr lacks; JAX's own failure.
                text = f"interpret mode failed inside JAX: {text}"
            elif isinstance(err, NotImplementedError):
                # (jax 0.10's discharge of a masked Triton row gather, `load(x_ref.at[rows],
                # mask=m)`, raises one with no message): what interpret mode lacks
                text = "interpret mode does not implement it" + (f": {text}" if text else "")
            elif "unsupported" not in text.lower() and "not supported" not in text.lower():
                raise  # not a construct interpret mode lacks: JAX's own verdict on the kernel
            interpret_error = f"{type(err).__name__}: {text}"
    finally:
        if keep_dir is None:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    mismatches = [] if interp is None else \
        _compare("pipecheck vs interpret=True", outs, interp, rtol, atol, compute)
    if mismatches and caveats:
        # A difference interpret mode's model explains: not compared, as for a call it cannot
        # model at all (the reference still is).
        interpret_error = f"interpret mode does not model it: {caveats[0]} ({mismatches[0]})"
        interp, mismatches = None, []
    ref = None
    if reference is not None:
        ref = jax.tree_util.tree_leaves(reference(*args))
        mismatches += _compare("pipecheck vs reference", outs, ref, rtol, atol, compute)
    return RunResult(outs, interp, ref, pc.exit, pc.output, mismatches, interpret_error)
