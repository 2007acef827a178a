"""Translates the pallas_call equations of a traced JAX function into `.pk` kernels.

The translation is syntactic and exact: every construct of the kernel jaxpr is either
rendered as the `.pk` construct with the same meaning, or, for an operation on values with
no `.pk` function, as `opaque(args..., op=NAME, shape=..., dtype=...)`, which keeps what it
reads and is listed in `Kernel.opaque`; anything else (a ref transform, an index map, control
flow the language lacks) stops the export with an `UnsupportedError` that names the construct
and the Python line it came from. Nothing is dropped silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from typing import Any, Callable

import jax
import numpy as np
from jax import tree_util

try:  # jax internals: the public API exposes no pallas_call equation parameters.
    from jax._src import core as jax_core
    from jax._src import source_info_util
except ImportError as e:  # pragma: no cover - an incompatible jax
    raise ImportError(f"pipecheck_jax needs jax's Pallas internals: {e}") from e

# The bridge's own frames (its tracing, its interception) are not the user's code.
source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)) + os.sep)


class UnsupportedError(Exception):
    """A construct the `.pk` language has no form for; `location` is "FILE:LINE" or None."""

    def __init__(self, message: str, location: str | None = None, kernel: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.kernel = kernel

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        what = f" (kernel {self.kernel})" if self.kernel else ""
        return f"{where}unsupported{what}: {self.message}"


class _Untiled(Exception):
    """The logical shape of a Mosaic GPU SMEM scratch declared with `transforms=` (tiling,
    swizzling), read off the untiling views of an access: the kernel jaxpr holds the scratch
    at its tiled shape, and the export declares it at this one; the kernel is translated again
    with it (see _Body.untile)."""

    def __init__(self, name: str, shape: tuple):
        super().__init__(name, shape)
        self.name, self.shape = name, shape


class _DataIntoSmem(Exception):
    """A store of data (a value read from a block) into the int32 SMEM scratch `name`: it is a
    data scratch, not SMEM state; the kernel is translated again with it so
    (spec::state_scratches says the same of the exported .pk)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class NotNative(UnsupportedError):
    """An emit_pipeline primitive (pltpu.emit_pipeline traced with JAX's
    jax_use_emit_pipeline_primitive) that `.pk`'s nested emit_pipeline cannot say: the caller
    traces the function again without the primitive and exports the DMAs and loop Pallas
    makes of it (trace_lowered)."""


def lowered_unsupported(nested: UnsupportedError, err: UnsupportedError) -> UnsupportedError:
    """Where an emit_pipeline has no nested form (`nested`, a NotNative) and the DMAs and
    loop Pallas lowers it to have none either (`err`): both reasons, at the emit_pipeline
    (the lowered form's failure is at code Pallas wrote, not the kernel's author)."""
    msg = err.message
    if "whose size is computed at run time" in msg:
        msg += (" (Pallas copies the partial last block of an array its block does not divide "
                "with such a slice)")
    at = f" (at {err.location})" if err.location and err.location != nested.location else ""
    return UnsupportedError(f"{nested.message}, and the DMAs and loop Pallas lowers it to have "
                            f"none either: {msg}{at}", nested.location or err.location,
                            err.kernel)


def internal_error(e: Exception, kernel: str | None = None) -> UnsupportedError:
    """An exception the export did not expect, as the diagnostic it reports instead of
    crashing the caller's program: never a pass (exit 2), and says it is the export's fault."""
    return UnsupportedError(f"internal error of the export ({type(e).__name__}: {e}); the "
                            "kernel is not checked: please report it", None, kernel)


@dataclasses.dataclass
class Kernel:
    """One exported pallas_call: its `.pk` text and where its lines came from."""

    name: str
    text: str
    #: 1-based line of `text` -> (python file, python line), where the jaxpr says.
    line_map: dict[int, tuple[str, int]]
    #: the kernel function's definition, (file, line), when known.
    source: tuple[str, int] | None
    #: the pallas_call's call site, (file, line), when known.
    call_site: tuple[str, int] | None
    #: (name, role, shape, numpy dtype) of each in then out operand, in pallas_call order;
    #: role is "in", "out", or "dropped" for an output the program drops that the kernel
    #: declares as the scratch it uses it as (see _export_call).
    operands: list[tuple[str, str, tuple[int, ...], Any]]
    #: the pallas_call equation itself.
    eqn: Any = dataclasses.field(repr=False, default=None)
    #: (primitive name, python (file, line) or None, .pk line) of each op exported as opaque.
    opaque: list = dataclasses.field(default_factory=list)
    #: (primitive, python (file, line) or None, .pk line) of each op left out of the body,
    #: as a comment there: ops with no effect on memory (debug_print, debug_check); their
    #: operands are still read.
    dropped: list = dataclasses.field(default_factory=list)
    #: `backend = triton`: the call picks Pallas' Triton backend (pltriton.CompilerParams).
    triton: bool = False
    #: `target = h100`: the call lowers to Mosaic GPU (_backend).
    mosaic_gpu: bool = False
    #: the grid axes jax.vmap added (its batch axes, parallel), in the exported grid's numbering
    batch_axes: tuple = ()
    #: the user frames the pallas_call was reached through past its call site, innermost first
    #: ((file, line) each): the caller of a helper that makes it
    callers: tuple = ()
    #: a Triton masked pl.ds window may start before its ref (`pl.ds(i * 128 - 1, 128)`):
    #: Triton reads it at that offset, interpret=True's dynamic_slice clamps the start
    ds_before_start: bool = False


_DTYPES = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "bool",
}

_RESERVED = {
    "kernel", "pipeline", "param", "in", "out", "scratch", "alias", "body", "when", "if",
    "else", "elif", "for", "and", "or", "not", "None", "zeros", "full", "inf", "nan", "range",
    "dot", "sum", "max", "min", "exp", "neg", "where", "iota", "cast", "transpose",
    "reshape", "broadcast_to", "maximum", "minimum", "abs", "pow", "sqrt", "rsqrt", "log",
    "log2", "exp2", "tanh", "cdiv", "ds", "program_id", "num_programs", "reference",
    "grid", "target", "dimension_semantics", "vmem_limit_bytes", "sin", "cos", "erf", "erfc",
    "floor", "ceil", "round", "sign", "sigmoid", "expm1", "log1p", "opaque", "tile",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt",
    "dot_general",
}

#: jaxpr primitives with a `.pk` function of the same meaning (one argument).
_UNARY = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
          "exp2": "exp2", "log2": "log2", "abs": "abs", "sin": "sin", "cos": "cos", "erf": "erf", "erfc": "erfc",
          "floor": "floor", "ceil": "ceil", "sign": "sign", "logistic": "sigmoid",
          "expm1": "expm1", "log1p": "log1p", "tan": "tan", "asin": "asin", "acos": "acos",
          "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh",
          "atanh": "atanh", "cbrt": "cbrt"}

_GRID_NAMES = ["i", "j", "k", "l", "m", "n", "p", "q"]

#: the `bound=` of the `while` a non-counted lax.while_loop exports to, unless told otherwise:
#: `check` is exact for runs of at most this many iterations and `unknown` past it.
DEFAULT_WHILE_BOUND = 64


#: The `.pk` targets (docs/language.md): TPUs, then Mosaic GPU's.
TPU_TARGETS = ("tpu_v4", "tpu_v5e", "tpu_v5p", "tpu_v6e")
GPU_TARGETS = ("h100", "h200")


def _target(name) -> str | None:
    if name is not None and name not in TPU_TARGETS + GPU_TARGETS:
        raise ValueError(f"target must be one of {', '.join(TPU_TARGETS + GPU_TARGETS)}, "
                         f"not {name!r}")
    return name


def _while_bound(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise ValueError(f"while_bound must be a positive integer, not {n!r}")
    return int(n)


def _frame(source_info) -> tuple[str, int] | None:
    try:
        fr = source_info_util.user_frame(source_info.traceback)
    except Exception:  # noqa: BLE001 - source info is best effort
        return None
    if fr is None:
        return None
    return (fr.file_name, fr.start_line)


def _callers(eqn, most: int = 3) -> tuple:
    """The user frames past eqn's own (its callers, innermost first), at most `most`."""
    try:
        frames = list(source_info_util.user_frames(eqn.source_info.traceback))
    except Exception:  # noqa: BLE001 - source info is best effort
        return ()
    return tuple((f.file_name, f.start_line) for f in frames[1:1 + most])


def _index_map_site(bm) -> tuple[str, int] | None:
    """Where the index map function of a BlockMapping is defined, from its debug info."""
    info = getattr(_inner(bm.index_map_jaxpr), "debug_info", None)
    m = re.search(r" at (.+):(\d+)$", str(getattr(info, "func_src_info", "") or ""))
    if m is None or "site-packages" in m.group(1) or "dist-packages" in m.group(1):
        return None
    return (m.group(1), int(m.group(2)))


def _fmt_loc(loc: tuple[str, int] | None) -> str | None:
    return f"{loc[0]}:{loc[1]}" if loc else None


def _dtype(dt, what: str, loc=None) -> str:
    name = np.dtype(dt).name if not str(dt) == "bfloat16" else "bfloat16"
    if name not in _DTYPES:
        raise UnsupportedError(f"{what} has dtype {name}, which .pk has no form for", loc)
    return _DTYPES[name]


def _shape(shape) -> str:
    return ", ".join(str(int(d)) for d in shape)


def _tuple(items) -> str:
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "(-inf)"
    t = repr(float(v)).replace("e+", "e")
    return f"({t})" if v < 0 else t


def _literal_text(val) -> tuple[str, bool, bool]:
    """(text, is_integer, nonnegative) of a scalar literal value."""
    arr = np.asarray(val)
    if arr.shape != ():
        raise UnsupportedError(f"a constant array of shape {arr.shape} has no .pk form")
    if arr.dtype == np.bool_:
        return ("1" if bool(arr) else "0"), True, True
    if np.issubdtype(arr.dtype, np.integer):
        v = int(arr)
        return (str(v) if v >= 0 else f"({v})"), True, v >= 0
    v = float(arr)
    return _float_text(v), False, v >= 0


@dataclasses.dataclass
class _E:
    """A value: its `.pk` text; `int` when it is an integer expression (grid, loop, literal)."""

    text: str
    int: bool = False
    nonneg: bool = False
    reads: frozenset = frozenset()
    pending: bool = False  # single use, not yet bound: inlined where it is used
    load: tuple | None = None  # (ref, subscript) when the value is a plain load
    masked_load: bool = False  # a Triton masked load, `where(m, x[s], other)`
    acc: tuple | None = None  # (ref, subscript, other) for `load + other`
    src: tuple | None = None
    name: bool = False  # text is a bare local name
    shape: tuple = ()
    dtype: Any = None
    #: (start, n, axis) when the value is an integer array start + iota(n) along `axis`,
    #: constant along every other dim (Triton's `i * bs + jnp.arange(bs)`, maybe `[:, None]`
    #: and broadcast): start is an int or an integer _E. A gather with it is ds(start, n).
    affine: tuple | None = None
    #: the integer scalar a value broadcasts (`broadcast_to(r, (128,))`): how JAX passes a
    #: scalar index beside an array index (`x_ref.at[r, cols]`)
    splat: Any = None
    #: the refs the value was computed from, kept when it is bound to a local (reads is
    #: not): for diagnostics only
    sources: frozenset = frozenset()


@dataclasses.dataclass
class _Ref:
    name: str
    shape: tuple
    prefetch: bool = False  # a scalar prefetch ref: its reads are integer scalars
    state: bool = False  # an int32 SMEM scratch: integer scalars kept across grid steps
    #: an integer input whose contents are known or described: (prefetch table name, per
    #: array dim (block size or None when squeezed, block index text of program_id)); a
    #: scalar read of it is also a read of the table, an integer (_data_tables)
    table: tuple | None = None
    #: a Mosaic GPU SMEM scratch, whose kernel ref may be tiled (`transforms=`): its tiled
    #: aval (ShapedArray), through which an access's untiling views give the logical shape
    tiled: Any = None
    #: a 0-d scalar prefetch ref, declared as a table of one (`s: i32[1]`, _prefetch_line):
    #: its reads and stores (`s[()]`, `s[...]`) are of element 0, `s[0]`
    zero_d: bool = False


# jax 0.10 wraps a Jaxpr and its consts in a ClosedJaxpr; in 0.11 the two are one class; 0.12
# has only Jaxpr, which holds its consts.
_CLOSED = getattr(jax_core, "ClosedJaxpr", None)


def _is_jaxpr(x) -> bool:
    return isinstance(x, jax_core.Jaxpr) or (_CLOSED is not None and isinstance(x, _CLOSED))


def _used_once_inside(e) -> frozenset:
    """The operand positions of a call (`pjit`: jnp.where, jnp.full_like, ... are jitted) that
    its jaxpr uses once, in a plain equation or as a result: such an operand may be inlined
    where it is used, as outside a call (jnp.where(k == 0, init, ref[...]) keeps its load
    inside the where). Loops, conds and other calls count as many uses."""
    if e.primitive.name not in ("pjit", "jit", "closed_call"):
        return frozenset()
    sub = e.params.get("jaxpr") or e.params.get("call_jaxpr")
    if sub is None:
        return frozenset()
    inner = _inner(sub)
    count: dict = {}
    for q in inner.eqns:
        many = any(True for v in q.params.values() for _ in sub_jaxprs(v))
        for a in q.invars:
            if isinstance(a, jax_core.Var):
                count[a] = count.get(a, 0) + (2 if many else 1)
    for a in inner.outvars:
        if isinstance(a, jax_core.Var):
            count[a] = count.get(a, 0) + 1
    return frozenset(k for k, v in enumerate(inner.invars) if count.get(v, 0) == 1)


def sub_jaxprs(value):
    """The jaxprs (open: eqns, invars) an equation parameter holds, one or a sequence."""
    for s in value if isinstance(value, (tuple, list)) else (value,):
        if _is_jaxpr(s):
            yield _inner(s)


#: equations whose sub-jaxpr is called once on the equation's operands, as a function is.
_CALLS = ("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
          "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint")


_STORES = ("swap", "addupdate", "masked_swap")


def _stores_into(e, refs: set) -> bool:
    """Whether equation e stores into one of the ref vars `refs`: itself, or inside the jaxprs
    it holds, following each ref to the var its sub-jaxpr names it by (a cond's branches take
    its operands after the index; a call's, a scan's and a loop body's take theirs in order,
    a while body after the condition's constants). A sub-jaxpr whose operands do not line up
    so counts as storing where it stores anything."""
    name = e.primitive.name
    if name in _STORES:
        return e.invars[0] in refs
    subs = [j for v in e.params.values() for j in sub_jaxprs(v)]
    if not subs or not any(v in refs for v in e.invars):
        return False
    body = next(sub_jaxprs(e.params["body_jaxpr"]), None) if name == "while" else None
    for j in subs:
        ins = list(e.invars)
        if name == "cond":
            ins = ins[1:]
        elif name == "while":
            if j is not body:
                continue  # (its condition)
            ins = ins[int(e.params.get("cond_nconsts", 0)):]  # body consts, then the carry
        if len(ins) != len(j.invars):
            if any(f.primitive.name in _STORES or _stores_into(f, set(f.invars))
                   for f in j.eqns):
                return True
            continue
        inner = {v for v, x in zip(j.invars, ins) if x in refs}
        if any(_stores_into(f, inner) for f in j.eqns):
            return True
    return False


def find_pallas_calls(jaxpr, primitives: tuple = ("pallas_call",)) -> list:
    """Every pallas_call equation (or equation of `primitives`) in `jaxpr` and the jaxprs nested
    in it (jit, cond, scan, ...)."""
    found = []
    for e in jaxpr.eqns:
        if e.primitive.name in primitives:
            found.append(e)
            continue
        for v in e.params.values():
            for s in sub_jaxprs(v):
                found.extend(find_pallas_calls(s, primitives))
    return found


#: Kernels that are not pallas_calls: `plgpu.kernel` (an `mpmd_map` of Mosaic GPU meshes) and
#: `pl.core_map`. The export does not read them; a function that makes one is unsupported as
#: a whole, so that its pallas_calls are never reported verified with a kernel left unread.
_OTHER_KERNELS = ("mpmd_map", "core_map")


def unused_outputs(eqn, jaxpr, dropped: frozenset = frozenset()) -> frozenset:
    """The positions of eqn's results that no equation of `jaxpr` (the jaxpr holding eqn)
    reads and that `jaxpr` does not return, or returns only at positions its caller drops
    (`dropped`: a jitted helper returning both results, one of which the caller ignores):
    results the program drops."""
    used = {v for q in jaxpr.eqns for v in q.invars if isinstance(v, jax_core.Var)}
    used |= {v for k, v in enumerate(jaxpr.outvars)
             if isinstance(v, jax_core.Var) and k not in dropped}
    return frozenset(k for k, v in enumerate(eqn.outvars)
                     if isinstance(v, jax_core.DropVar) or v not in used)


def _scratch_like(idx: str, dims: list, batch_axes: set) -> bool:
    """Whether a dropped output's block at index map results `idx` ("(0, 0)") never moves for
    the kernel: each result a constant, or one of jax.vmap's batch axes (`batch_axes`, whose
    block dim is squeezed): one buffer per batch element, which a scratch models (each batch
    element runs the kernel over the same grid from its start, so what the scratch carries
    into the next one the first one's start shows undefined)."""
    m = re.fullmatch(r"\((.*)\)", idx.strip())
    if m is None:
        return False
    parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
    if len(parts) != len(dims):
        return False
    return all(re.fullmatch(r"-?\d+", p) or (p in batch_axes and d == "None")
               for p, d in zip(parts, dims))


def _inner(j):
    return j.jaxpr if _CLOSED is not None and isinstance(j, _CLOSED) else j


def _uses_primitive(e, name: str) -> bool:
    """Whether equation e is a `name` or holds one in a jaxpr of its params (a cond's branches,
    a loop's body, a call's jaxpr), at any depth."""
    if e.primitive.name == name:
        return True
    return any(_uses_primitive(f, name) for v in e.params.values() for s in sub_jaxprs(v)
               for f in s.eqns)


def _consts(j):
    if _CLOSED is not None and isinstance(j, _CLOSED):
        return list(j.consts)
    return list(getattr(j, "consts", None) or ())


def scan_counts(params) -> tuple[int, int]:
    """A scan equation's numbers of constant and carried operands (its operands are the
    constants, the carry, then the scanned arrays). jax 0.10 has num_consts and num_carry;
    0.11 has ft_in, the three groups as flat trees."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry = params["ft_in"].elts[:2]
    return len(list(consts.vals)), len(list(carry.vals))


def _array_consts(j):
    """The array constants a sub-jaxpr closes over. From jax 0.11 every Jaxpr is closed, and a
    run_scoped body's consts are the tracers of the refs it closes over (its constvars, bound
    to the equation's operands), which are no constants."""
    return [c for c in _consts(j) if not isinstance(c, jax_core.Tracer)]


# --- integer expressions: shared by index maps and the body's integer scalars ---------


def _truncated(a: str, b: str, both: str = "and") -> str:
    """Where a // b (floor) is one below lax.div's quotient (towards zero): a remainder and
    operands of opposite signs, joined by `both` (`&` for tensors). (lax.rem's remainder is
    then a % b - b.) Not through abs: abs of the dtype's minimum wraps to itself (int8
    -128 // 16 would be +8)."""
    return f"((({a} % {b}) != 0) {both} (({a} < 0) != ({b} < 0)))"


def _int_binary(name: str, a: _E, b: _E) -> _E | None:
    nn = a.nonneg and b.nonneg
    ops = {"add": "+", "sub": "-", "mul": "*"}
    if name in ops:
        return _E(f"({a.text} {ops[name]} {b.text})", int=True, nonneg=nn and name != "sub")
    if name in ("max", "min"):
        return _E(f"{name}({_strip(a.text)}, {_strip(b.text)})", int=True,
                  nonneg=(a.nonneg or b.nonneg) if name == "max" else nn)
    if name == "div":  # lax.div truncates towards zero; .pk's // floors
        if nn:
            return _E(f"({a.text} // {b.text})", int=True, nonneg=True)
        return _E(f"where({_truncated(a.text, b.text)}, ({a.text} // {b.text}) + 1, "
                  f"{a.text} // {b.text})", int=True)
    if name == "rem":  # lax.rem takes the dividend's sign
        if nn:
            return _E(f"({a.text} % {b.text})", int=True, nonneg=True)
        return _E(f"where({_truncated(a.text, b.text)}, ({a.text} % {b.text}) - {b.text}, "
                  f"{a.text} % {b.text})", int=True)
    cmps = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
    if name in cmps:
        return _E(f"({a.text} {cmps[name]} {b.text})", int=True, nonneg=True)
    if name in ("and", "or"):
        return _E(f"({a.text} {name} {b.text})", int=True, nonneg=True)
    return None


def _floor_call(e, ins) -> _E | None:
    """jnp's integer `//` and `%` (a `jit` named floor_divide or remainder) on integer scalars:
    .pk's `//` and `%`, which floor as they do, instead of the lax.div/rem and sign
    corrections of their jaxprs, which nest once per level of a decode (`p // 72 // 8`) and
    grew past a gigabyte in the checker. A remainder by a divisor that is not a nonzero
    constant keeps its jaxpr (jnp takes x % 0 as 0)."""
    fn = str(e.params.get("name", ""))
    if fn not in ("floor_divide", "remainder") or len(ins) != 2 or len(e.outvars) != 1 or \
            not all(isinstance(x, _E) and x.int for x in ins) or \
            not np.issubdtype(e.outvars[0].aval.dtype, np.integer) or e.outvars[0].aval.shape:
        return None
    a, b = ins
    d = _const(b)
    if fn == "floor_divide":
        return _E(f"({a.text} // {b.text})", int=True, nonneg=a.nonneg and b.nonneg)
    if d is None or d == 0:
        return None
    return _E(f"({a.text} % {b.text})", int=True, nonneg=d > 0)


def _float_remainder(e, ins) -> bool:
    """A `jit` named remainder (jnp.remainder, `%` of jax arrays) of two float values."""
    return e.primitive.name in ("pjit", "jit") and str(e.params.get("name", "")) == "remainder" and \
        len(ins) == 2 and len(e.outvars) == 1 and all(isinstance(x, _E) for x in ins) and \
        jax.dtypes.issubdtype(e.outvars[0].aval.dtype, jax.numpy.floating)


def _float_floor_divide(e, ins) -> bool:
    """A `jit` named floor_divide (jnp.floor_divide, `//` of jax arrays) with a float result."""
    return e.primitive.name in ("pjit", "jit") and str(e.params.get("name", "")) == "floor_divide" \
        and len(ins) == 2 and len(e.outvars) == 1 and all(isinstance(x, _E) for x in ins) and \
        jax.dtypes.issubdtype(e.outvars[0].aval.dtype, jax.numpy.floating)


# Compiler hints that return their operand (pl.multiple_of, Triton's max_contiguous), and
# Mosaic GPU's layout_cast (plgpu.layout_cast, plgpu.broadcasted_iota(..., layout=)), which
# picks the register layout of a value and is the identity on its elements.
_HINTS = ("multiple_of", "max_contiguous", "layout_cast")


def _int_unary(name: str, a: _E, params) -> _E | None:
    if name == "neg":
        return _E(f"(-{a.text})", int=True, nonneg=a.text == "0")
    if name == "abs":
        return _E(f"abs({a.text})", int=True, nonneg=True)
    if name == "not":
        return _E(f"(not {a.text})", int=True, nonneg=True)
    if name == "sign":
        return _E(f"where({a.text} > 0, 1, where({a.text} < 0, -1, 0))", int=True, nonneg=a.nonneg)
    if name in ("convert_element_type", "copy", "copy_p", "optimization_barrier", "stop_gradient") + _HINTS:
        new = params.get("new_dtype")
        if new is not None and not (np.issubdtype(new, np.integer) or new == np.bool_):
            return None
        return a
    if name == "integer_pow":
        return _E(f"({a.text} ** {int(params['y'])})", int=True, nonneg=a.nonneg or params["y"] % 2 == 0)
    return None


#: The deepest bracket nesting a single-use value is inlined with: past it, the value is bound
#: to a local, so that a long chain of updates (an unrolled `t = t * 0.5 + x`) stays within the
#: .pk parser's expression depth instead of growing into one expression.
_MAX_INLINE_NESTING = 12


def _nesting(text: str) -> int:
    """The deepest bracket nesting in an expression's text."""
    depth = deepest = 0
    for ch in text:
        if ch in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]":
            depth -= 1
    return deepest


def _const(x: _E):
    try:
        return int(_strip(x.text))
    except ValueError:
        return None


def _fold(name: str, vals: list[int], params, on_ints: bool = False) -> int | None:
    """The value of an integer equation on constants (lax semantics), or None."""
    if name == "select_n" and len(vals) == 3:
        return vals[2] if vals[0] else vals[1]
    if name == "select_n" and len(vals) > 3:
        return vals[1 + vals[0]] if 0 <= vals[0] < len(vals) - 1 else None
    if len(vals) == 2:
        a, b = vals
        ops = {"add": a + b, "sub": a - b, "mul": a * b, "max": max(a, b), "min": min(a, b),
               "lt": int(a < b), "le": int(a <= b), "gt": int(a > b), "ge": int(a >= b),
               "eq": int(a == b), "ne": int(a != b), "and": a & b, "or": a | b, "xor": a ^ b}
        if name in ops:
            return ops[name]
        if name.startswith("shift") and 0 <= b < 31:
            if name == "shift_left":
                return a << b
            return a >> b if name == "shift_right_arithmetic" or a >= 0 else None
        if name in ("div", "rem") and b != 0:
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            return q if name == "div" else a - b * q
        return None
    if len(vals) == 1:
        a = vals[0]
        if name == "neg":
            return -a
        if name == "abs":
            return abs(a)
        if name == "sign":
            return (a > 0) - (a < 0)
        if name == "not":
            return ~a if on_ints else int(not a) if a in (0, 1) else None
        if name == "convert_element_type":
            return int(a != 0) if params.get("new_dtype") == np.bool_ else a
    return None


_BITWISE = ("and", "or", "xor", "not", "shift_left", "shift_right_arithmetic", "shift_right_logical")


def _masked_bits(a: _E, c: int) -> str | None:
    """`a & c` for a constant c >= 0 of the form 2**k - 1 (`a % 2**k`, which floors as two's
    complement masks) or with at most 4 bits set (each bit `(a // 2**b) % 2 * 2**b`), in
    .pk's integer arithmetic; None for other constants."""
    if c == 0:
        return "0"
    if c < 0 or c >= 2**31:
        return None
    if c & (c + 1) == 0:
        return f"({a.text} % {c + 1})"
    bits = [b for b in range(31) if c >> b & 1]
    if len(bits) > 4:
        return None
    return "(" + " + ".join(f"((({a.text} // {1 << b}) % 2) * {1 << b})" if b else f"({a.text} % 2)"
                            for b in bits) + ")"


def _int_bits(name: str, ins: list[_E], consts: list) -> _E | None:
    """lax's bitwise and shift operations on integers (not bools), where .pk's integer
    arithmetic has an exact form: `&`, `|` and `^` with a constant (`x | c` is `x + c - (x & c)`,
    `x ^ c` is `x + c - 2 * (x & c)`), shifts by a constant (`x << k` is `x * 2**k`, an
    arithmetic `x >> k` is `x // 2**k`, which floors), and `~x`, `-x - 1`."""
    if name == "not":
        return _E(f"(-{ins[0].text} - 1)", int=True)
    if len(ins) != 2:
        return None
    a, b = ins
    ca, cb = consts
    if name.startswith("shift"):
        if cb is None or not 0 <= cb < 31:
            return None
        if name == "shift_left":
            return _E(f"({a.text} * {1 << cb})", int=True, nonneg=a.nonneg)
        if name == "shift_right_logical" and not a.nonneg:
            return None
        return _E(f"({a.text} // {1 << cb})", int=True, nonneg=a.nonneg)
    if cb is None:
        a, b, ca, cb = b, a, cb, ca
    if cb is None:
        return None
    m = _masked_bits(a, cb)
    if m is None:
        return None
    if name == "and":
        return _E(m, int=True, nonneg=True)
    if name == "or":
        return _E(f"({a.text} + {cb} - {m})", int=True, nonneg=a.nonneg)
    return _E(f"({a.text} + {cb} - 2 * {m})", int=True, nonneg=a.nonneg)


def _int_eqn(e, ins: list[_E]) -> _E | None:
    """The integer expression an equation computes from integer operands, or None."""
    name = e.primitive.name
    consts = [_const(x) for x in ins]
    in_dtypes = [getattr(getattr(v, "aval", None), "dtype", None) for v in e.invars]
    # lax's and/or/xor/not are bitwise on integers, logical on bools
    on_ints = any(d is not None and np.issubdtype(d, np.integer) for d in in_dtypes)
    if ins and all(c is not None for c in consts):
        new = e.params.get("new_dtype")
        if new is None or np.issubdtype(new, np.integer) or new == np.bool_:
            v = _fold(name, consts, e.params, on_ints)
            if v is not None and abs(v) < 2**31:
                return _E(str(v) if v >= 0 else f"({v})", int=True, nonneg=v >= 0)
    if name == "convert_element_type" and e.params.get("new_dtype") == np.bool_ and on_ints:
        return _E(f"({ins[0].text} != 0)", int=True, nonneg=True)
    if name in _BITWISE and (on_ints or name.startswith("shift")):
        return _int_bits(name, ins, consts)
    # what non-negativity decides (grid indices, jnp's floor-division and modulo fix-ups)
    if name in ("lt", "ge") and len(ins) == 2 and ins[0].nonneg and consts[1] == 0:
        return _E("0" if name == "lt" else "1", int=True, nonneg=True)
    if name == "and" and 0 in consts:
        return _E("0", int=True, nonneg=True)
    if name == "select_n" and len(ins) == 3 and consts[0] is not None:
        return ins[2] if consts[0] else ins[1]
    if name == "select_n" and len(ins) > 3 and consts[0] is not None:
        return ins[1 + consts[0]] if 0 <= consts[0] < len(ins) - 1 else None
    if name == "select_n":
        if len(ins) < 3:
            return None
        if len(ins) == 3:
            p, f, t = ins
            return _E(f"where({_strip(p.text)}, {_strip(t.text)}, {_strip(f.text)})", int=True,
                      nonneg=f.nonneg and t.nonneg)
        # lax.select_n(p, c0, c1, ...) (jnp.select, a 3-way lax.switch of indices): c_p, as
        # nested wheres on p == k (lax leaves p out of range undefined: the last case here)
        p, cases = ins[0], ins[1:]
        text = _strip(cases[-1].text)
        for k in range(len(cases) - 2, -1, -1):
            text = f"where({_strip(p.text)} == {k}, {_strip(cases[k].text)}, {text})"
        return _E(text, int=True, nonneg=all(c.nonneg for c in cases))
    if name == "clamp":
        lo, x, hi = ins
        return _E(f"min(max({x.text}, {lo.text}), {hi.text})", int=True, nonneg=lo.nonneg)
    if len(ins) == 2:
        return _int_binary(name, ins[0], ins[1])
    if len(ins) == 1:
        return _int_unary(name, ins[0], e.params)
    return None


def _is_int_aval(aval) -> bool:
    return getattr(aval, "shape", None) == () and (
        np.issubdtype(aval.dtype, np.integer) or aval.dtype == np.bool_)


def _is_zero_d(aval) -> bool:
    """Whether a ref's aval (or an array's) is 0-d."""
    return getattr(getattr(aval, "inner_aval", aval), "shape", None) == ()


def _prefetch_read(ref: _Ref, e, ins) -> _E:
    """`ids[e]` (`pt[b, p]` for a table of rank > 1): one element of a scalar prefetch ref
    read in an index map. A 0-d ref (`s[()]`, `s[...]`) is a table of one: `s[0]`."""
    transforms = tree_util.tree_unflatten(e.params["tree"], ins[1:])
    if ref.zero_d and all(type(t).__name__ == "NDIndexer" and not t.indices for t in transforms):
        return _E(f"{ref.name}[0]", int=True)
    (ix,) = transforms or (None,)
    idx = getattr(ix, "indices", ())
    if (type(ix).__name__ != "NDIndexer" or not idx or len(idx) != len(getattr(ix, "shape", idx))
            or any(type(i).__name__ == "Slice" for i in idx)):
        raise UnsupportedError(f"a read of the prefetch ref '{ref.name}' that is not one element "
                               "has no .pk form", _fmt_loc(_frame(e.source_info)))
    texts = [str(int(i)) if isinstance(i, (int, np.integer)) else _strip(i.text) for i in idx]
    return _E(f"{ref.name}[{', '.join(texts)}]", int=True)


def _index_map(bm, names: list[str], what: str, loc, prefetch: tuple = ()) -> str:
    """The block indices of one BlockMapping as `.pk` integer expressions of the grid names
    (and of the prefetch refs `prefetch`, passed after the grid indices)."""
    return _tuple(_index_map_parts(bm, names, what, loc, prefetch))


def _index_map_parts(bm, names: list[str], what: str, loc, prefetch: tuple = (),
                     consts: list | None = None) -> list[str]:
    """_index_map's expressions, one per array dim. `consts`: the index map's closed-over
    values as integer expressions (an emit_pipeline's index map closes over the outer
    kernel's values), else its constants are literals."""
    closed = bm.index_map_jaxpr
    j = _inner(closed)
    env: dict = {}
    for v, n in zip(j.invars, names):
        env[v] = _E(n, int=True, nonneg=True)
    for v, n in zip(j.invars[len(names):], prefetch):
        env[v] = _Ref(n, (), prefetch=True, zero_d=_is_zero_d(v.aval))
    if consts is not None:
        env.update(zip(j.constvars, consts))
    else:
        for v, c in zip(j.constvars, _consts(closed)):
            t, is_int, nn = _literal_text(c)
            env[v] = _E(t, int=True, nonneg=nn)

    def read(a):
        if isinstance(a, jax_core.Literal):
            t, _, nn = _literal_text(a.val)
            return _E(t, int=True, nonneg=nn)
        return env[a]

    def run(jx, args):
        for v, a in zip(jx.invars, args):
            env[v] = a
        for e in jx.eqns:
            ins = [read(a) for a in e.invars]
            sub = e.params.get("jaxpr") or e.params.get("call_jaxpr")
            floor = _floor_call(e, ins) if e.primitive.name in ("pjit", "jit") else None
            if floor is not None:
                env[e.outvars[0]] = floor
                continue
            if e.primitive.name in ("pjit", "jit", "custom_jvp_call", "closed_call") and sub is not None:
                for v, c in zip(_inner(sub).constvars, _consts(sub)):
                    t, _, nn = _literal_text(c)
                    env[v] = _E(t, int=True, nonneg=nn)
                outs = run(_inner(sub), ins)
                for v, o in zip(e.outvars, outs):
                    env[v] = o
                continue
            if e.primitive.name == "get" and ins and isinstance(ins[0], _Ref):
                env[e.outvars[0]] = _prefetch_read(ins[0], e, ins)
                continue
            out = _int_eqn(e, ins) if len(e.outvars) == 1 and \
                not any(isinstance(a, _Ref) for a in ins) else None
            if out is None:
                raise UnsupportedError(
                    f"the index map of {what} uses '{e.primitive.name}', which has no .pk form "
                    "(index maps may use +, -, *, //, %, min, max, comparisons and select, and the "
                    "bitwise &, |, ^ and shifts with a constant operand)",
                    _fmt_loc(_frame(e.source_info)) or loc)
            env[e.outvars[0]] = out
        return [read(v) for v in jx.outvars]

    outs = run(j, [env[v] for v in j.invars])
    tree = getattr(bm, "index_map_out_tree", None)
    results = tree_util.tree_unflatten(tree, outs) if tree is not None else outs
    if not isinstance(results, (tuple, list)):
        results = (results,)
    texts = []
    for d, (r, b) in enumerate(zip(results, bm.block_shape)):
        bounded = type(b).__name__ == "BoundedSlice"
        if type(r).__name__ == "Slice":
            if not bounded:  # JAX refuses this itself; kept as a located error all the same
                raise UnsupportedError(f"the index map of {what} returns a pl.ds in dim {d}, "
                                       "whose block dim is not a pl.BoundedSlice", loc)
            if int(getattr(r, "stride", 1) or 1) != 1:
                raise UnsupportedError(f"the index map of {what} returns a strided pl.ds in "
                                       f"dim {d}, which has no .pk form", loc)
            start, size = (x if isinstance(x, _E) else _E(str(int(x)), int=True)
                           for x in (r.start, r.size))
            texts.append(f"ds({_strip(start.text)}, {_strip(size.text)})")
        elif bounded:
            raise UnsupportedError(f"the index map of {what} returns no pl.ds in dim {d}, a "
                                   f"pl.BoundedSlice({int(b.block_size)}) dim", loc)
        else:
            texts.append(_strip(r.text))
    return texts


def _aligned(start, n: int) -> bool:
    """Whether a window start is a multiple of its size n for certain: an int, or an integer
    expression whose top-level operation is a product by n (`k * 64`, `program_id(0) * 128`)."""
    if isinstance(start, (int, np.integer)):
        return int(start) % n == 0
    text = _strip(getattr(start, "text", "") or "")
    return [op for _, op in _top_level_ops(text)] == [" * "] and text.endswith(f" * {n}")


def _top_level_ops(text: str) -> list:
    """(position, operator) of each binary `+ - * // %` of an integer expression's text
    outside parentheses, in order."""
    depth, top = 0, []
    for k, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and text[k:k + 3] in (" + ", " - ", " * ", " //", " % "):
            top.append((k, text[k:k + 3]))
    return top


def _low_reach(start, n: int) -> int:
    """How far before element 0 a window start may reach, for the front padding of a Triton
    operand read whole-array through masked windows (a halo's `offs - 1`): the negative part
    of the start's lower bound (_int_bounds: `i * 128 + (-1)`, `(i * 128 - 1) - 1`, a tap
    loop's `i * 128 + (t - 1)`; program ids, loop variables and sizes are not negative), or
    one window n where a subtraction has no bound (`A - expr`)."""
    if isinstance(start, (int, np.integer)):
        return max(0, -int(start))
    low = _int_bounds(_strip(getattr(start, "text", "") or ""))[0]
    return n if low is None else max(0, -low)


def _high_reach(start, n: int, size: int, upper: dict) -> int:
    """How far past a ref's end (`size` elements) a window of n from `start` may reach, for
    the padding of a Triton operand read through masked windows: by the start's upper bound
    under `upper` (_int_bounds), 0 where it has none (want_pad's whole windows then)."""
    if isinstance(start, (int, np.integer)):
        return max(0, int(start) + n - size)
    high = _int_bounds(_strip(getattr(start, "text", "") or ""), upper)[1]
    return 0 if high is None else max(0, high + n - size)


_INT_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_][A-Za-z_0-9]*|//|[-+*%(),])")


def _int_bounds(text: str, upper: dict | None = None) -> tuple:
    """(lower, upper) bounds of an integer expression's text (`.pk` arithmetic: + - * // %,
    min, max, parentheses, literals), None where unknown. A name or any other call
    (program_id, a loop variable, a local) counts as non-negative, as _low_reach assumes, and
    at most what `upper` says of it (`program_id(0)`: the grid's size less one; a loop's
    variable: its bound less one), where it says."""
    upper = upper or {}
    toks = _INT_TOKEN.findall(text)
    if "".join(toks) != text.replace(" ", ""):
        return (0, None)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def add(a, b, sign):
        lo = a[0] + (b[0] if sign > 0 else -b[1]) if a[0] is not None and \
            (b[0] if sign > 0 else b[1]) is not None else None
        hi = a[1] + (b[1] if sign > 0 else -b[0]) if a[1] is not None and \
            (b[1] if sign > 0 else b[0]) is not None else None
        return (lo, hi)

    def mul(a, b, op):
        if op == "*":
            if None in a or None in b:
                nonneg = a[0] is not None and a[0] >= 0 and b[0] is not None and b[0] >= 0
                return (a[0] * b[0], None) if nonneg else (None, None)
            prods = [x * y for x in a for y in b]
            return (min(prods), max(prods))
        if b[0] is None or b[0] != b[1] or b[0] <= 0:
            return (None, None) if op == "//" else (0, None) if (a[0] or 0) >= 0 else (None, None)
        c = b[0]
        if op == "%":
            return (0, c - 1)
        return (None if a[0] is None else a[0] // c, None if a[1] is None else a[1] // c)

    def expr():
        r = term()
        while peek() in ("+", "-"):
            sign = 1 if take() == "+" else -1
            r = add(r, term(), sign)
        return r

    def term():
        r = unary()
        while peek() in ("*", "//", "%"):
            op = take()
            r = mul(r, unary(), op)
        return r

    def unary():
        if peek() == "-":
            take()
            a = unary()
            return (None if a[1] is None else -a[1], None if a[0] is None else -a[0])
        return atom()

    def atom():
        t = take() if peek() is not None else None
        if t is None:
            raise ValueError
        if t == "(":
            r = expr()
            if take() != ")":
                raise ValueError
            return r
        if t.isdigit():
            return (int(t), int(t))
        if not (t[0].isalpha() or t[0] == "_"):
            raise ValueError
        if peek() != "(":
            return (0, upper.get(t))
        take()
        args = []
        while peek() != ")":
            args.append(expr())
            if peek() == ",":
                take()
        take()
        if t in ("min", "max", "minimum", "maximum") and len(args) == 2:
            lo = [a[0] for a in args if a[0] is not None]
            hi = [a[1] for a in args if a[1] is not None]
            if t.startswith("max"):  # at least any side's low; at most the larger high
                return (max(lo, default=None), max(hi) if len(hi) == 2 else None)
            return (min(lo) if len(lo) == 2 else None, min(hi, default=None))
        if t == "program_id" and len(args) == 1 and args[0][0] is not None and \
                args[0][0] == args[0][1]:
            return (0, upper.get(f"program_id({args[0][0]})"))
        return (0, None)

    try:
        r = expr()
        return r if pos[0] == len(toks) else (0, None)
    except (ValueError, IndexError):
        return (0, None)


def _offset(base, add):
    """`base + add` for a subscript: ints stay ints, an integer expression (_E) becomes one."""
    if isinstance(base, int) and isinstance(add, int):
        return base + add
    if isinstance(base, int) and base == 0:
        return add
    if isinstance(add, int) and add == 0:
        return base
    bt = str(base) if isinstance(base, int) else f"({_strip(base.text)})"
    at = str(add) if isinstance(add, int) else f"({_strip(add.text)})"
    return _E(f"{bt} + {at}", int=True)


def _affine(e, ins) -> tuple | None:
    """The `affine` (start, n, axis) of e's result: iota, and what keeps the form: + or -
    an integer scalar, broadcast_in_dim, reshape, integer casts. None otherwise."""
    name, p = e.primitive.name, e.params
    shape = tuple(int(d) for d in getattr(e.outvars[0].aval, "shape", ())) if e.outvars else ()

    def along(axis, n):  # constant along the other dims: broadcast (as [:, None] makes)
        return 0 <= axis < len(shape) and shape[axis] == n

    if not np.issubdtype(getattr(e.outvars[0].aval, "dtype", np.float32), np.integer):
        return None
    if name == "iota":
        axis = int(p["dimension"])
        return (0, shape[axis], axis) if along(axis, shape[axis]) else None
    args = [getattr(a, "affine", None) for a in ins]
    if name in ("add", "sub") and len(ins) == 2:
        for k in (0, 1):
            a, b = args[k], ins[1 - k]
            if a is None or not isinstance(b, _E) or not b.int or tuple(b.shape or ()) != ():
                continue
            if name == "sub" and k == 1:
                return None  # b - iota runs backwards
            if name == "add":
                start = _offset(a[0], b)
            else:
                base = a[0] if isinstance(a[0], _E) else _E(str(a[0]), int=True)
                start = _int_binary("sub", base, b)
            return (start, a[1], a[2]) if along(a[2], a[1]) else None
        return None
    a = args[0] if args else None
    if a is None:
        return None
    start, n, axis = a
    if name in ("convert_element_type", "copy", "copy_p") + _HINTS:
        return a if along(axis, n) else None
    if name == "broadcast_in_dim":
        new = int(p["broadcast_dimensions"][axis])
        return (start, n, new) if along(new, n) else None
    if name == "broadcast_to":  # numpy's rule: new dims come first
        new = axis + len(shape) - len(e.invars[0].aval.shape)
        return (start, n, new) if along(new, n) else None
    if name in ("reshape", "squeeze", "expand_dims"):  # only size-1 dims come or go
        src = tuple(int(d) for d in e.invars[0].aval.shape)
        if [d for d in src if d != 1] != [n] or [d for d in shape if d != 1] != [n]:
            return None
        return (start, n, shape.index(n))
    return None


def _strip(t: str) -> str:
    """Drops one pair of outer parentheses that enclose the whole text."""
    if t.startswith("(") and t.endswith(")"):
        depth = 0
        for i, ch in enumerate(t):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i != len(t) - 1:
                return t
        return t[1:-1]
    return t


# --- the body --------------------------------------------------------------------------


class _Body:
    """Emits `.pk` body statements for a kernel jaxpr."""

    def __init__(self, kernel: str, default_loc):
        self.kernel = kernel
        self.default_loc = default_loc
        #: the pallas_call's own traceback where JAX traced the kernel under one fixed context
        #: (a custom_vjp's backward rule under jax.grad): body equations carrying it are
        #: placed at the kernel's definition, not at that context's line
        self.outer_traceback = None
        self.lines: list[tuple[str, tuple | None]] = []
        self.counter = 0
        self.bind_reads_of: frozenset = frozenset()  # SMEM state refs whose reads are bound
        self.stored_state: set = set()  # SMEM state refs the body stores into
        self.in_while_cond = 0  # translating a lax.while_loop's condition (one expression)
        self.pending: list[_E] = []
        self.uses: dict = {}
        self.user_axes: list[int] = []
        self.src_override = None
        #: (primitive, its .pk op= name, python (file, line)) of each opaque op
        self.opaque: list = []
        #: the names the kernel's lines use, and (scratch line, python (file, line)) of each
        #: pl.run_scoped allocation, declared with the kernel's scratch
        self.taken: set = set()
        self.scoped: list = []
        #: (primitive, python (file, line)) of each op left out as a comment
        self.dropped: list = []
        #: ref name -> {dim: n} for each dim a gather window `ref.at[s + arange(n)]` reads,
        #: which may pass the ref's end where a mask keeps it out (Triton's idiom): the
        #: export pads the block to a multiple of n there
        self.pad: dict = {}
        #: upper bounds of the integer names and calls a window start may use (_int_bounds):
        #: `program_id(k)` by the grid, a fori_loop's variable by its literal bound
        self.upper: dict = {}
        #: (ref name, dim) of each access that covers a dim of a ref whole
        self.whole: set = set()
        #: (ref name, dim) -> front padding of a Triton operand whose windows start before it:
        #: its subscripts there move by that much (view_of; set by a second translation)
        self.shift: dict = {}
        #: a Triton call's body: its masked loads touch no memory where the mask is off
        self.triton = False
        #: a masked pl.ds window whose start may be negative (Kernel.ds_before_start)
        self.ds_before_start = False
        #: the plgpu.ACC scratch of a Mosaic GPU call (`memory_space=acc`), which wgmma
        #: accumulates into
        self.acc_refs: set = set()
        #: the equations after the one being translated, in its block (see wgmma)
        self.after: list = []
        #: [the equations of a block, the index of the one being translated] of each block
        #: being translated, outermost first (see unsynchronized_acc_read)
        self.frames: list = []
        #: whether the kernel issues a wgmma anywhere (see acc_read)
        self.has_wgmma = False
        #: a Mosaic GPU call's body
        self.mgpu = False
        #: the data tables (_Ref.table) a read used
        self.tables_read: set = set()
        #: the integer inputs without a data table (contents neither known nor described)
        self.untabled: set = set()
        #: the kernel's unaliased memory_space=ANY operands (name -> "in"/"out"), which an
        #: emit_pipeline may stage; whether the kernel has scalar prefetch
        self.any_operands: dict = {}
        self.has_prefetch = False
        #: (the operands it stages, its first and one past its last line, the refs its
        #: body closes over) of the body's emit_pipeline exported in .pk's nested form
        self.pipeline: tuple | None = None

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def fail(self, msg: str, e=None):
        loc = _frame(e.source_info) if e is not None else None
        raise UnsupportedError(msg, _fmt_loc(loc or self.default_loc), self.kernel)

    def no_statements(self, mark: int) -> bool:
        """Whether the lines emitted since `mark` are comments at most."""
        return all(t.lstrip().startswith("#") for t, _ in self.lines[mark:])

    def emit(self, indent: int, text: str, src):
        self.lines.append(("    " * indent + text, src))

    # Values -----------------------------------------------------------------------------

    def bind(self, indent: int, e: _E) -> _E:
        """Binds a pending value to a fresh local, so it is read where it was in the jaxpr."""
        if not e.pending:
            return e
        name = self.fresh("v")
        self.emit(indent, f"{name} = {_strip(e.text)}", e.src)
        e.text, e.pending, e.name, e.load, e.acc, e.reads = name, False, True, None, None, frozenset()
        if e in self.pending:
            self.pending.remove(e)
        return e

    def flush(self, indent: int, ref: str | None = None):
        """Binds the pending values that read `ref` (every pending read when None)."""
        for p in list(self.pending):
            if p.reads and (ref is None or ref in p.reads):
                self.bind(indent, p)

    # Translation ------------------------------------------------------------------------

    def run(self, jaxpr, env: dict, indent: int) -> list:
        self.frames.append([jaxpr.eqns, 0])
        try:
            return self.run_block(jaxpr, env, indent)
        finally:
            self.frames.pop()

    def run_block(self, jaxpr, env: dict, indent: int) -> list:
        uses: dict = {}
        multi: set = set()
        for e in jaxpr.eqns:
            # (a run_scoped body too: a pltpu.emit_pipeline's loop inside one must not take
            # a value read before it, `h0 = s[...]`, as a read at each of its steps)
            flow = e.primitive.name in ("cond", "scan", "while", "run_scoped", "pjit", "jit",
                                        "custom_jvp_call", "custom_vjp_call",
                                        "custom_vjp_call_jaxpr", "closed_call")
            once = _used_once_inside(e) if flow else ()
            for k, a in enumerate(e.invars):
                if isinstance(a, jax_core.Var):
                    uses[a] = uses.get(a, 0) + 1
                    if flow and k not in once:
                        multi.add(a)
        for a in jaxpr.outvars:
            if isinstance(a, jax_core.Var):
                uses[a] = uses.get(a, 0) + 1
        self.uses.update(uses)

        def read(a):
            if isinstance(a, jax_core.Literal):
                t, is_int, nn = _literal_text(a.val)
                return _E(t, int=is_int and getattr(a.aval, "shape", ()) == (), nonneg=nn,
                          shape=(), dtype=a.aval.dtype)
            v = env[a]
            if isinstance(v, _E) and v.pending:
                v.pending = False  # consumed: it lives on inside its user's text
                if v in self.pending:
                    self.pending.remove(v)
                v.pending_consumed = True
            return v

        for at, e in enumerate(jaxpr.eqns):
            tb = getattr(e.source_info, "traceback", None)
            src = self.src_override or (
                None if tb is not None and tb is self.outer_traceback else _frame(e.source_info)) \
                or self.default_loc
            self.after = jaxpr.eqns[at + 1:]  # what follows e in its block (wgmma's await)
            self.frames[-1][1] = at
            outs = self.eqn(e, read, env, indent, src)
            if outs is None:
                continue
            for v, o in zip(e.outvars, outs):
                if isinstance(v, jax_core.DropVar) or o is None:
                    continue
                if isinstance(o, _E) and not o.name and not o.int and not _atomic(o.text):
                    # (A Triton call's plain load is bound to a local: inside a `where`'s
                    # branch .pk takes a ref as a masked load, which touches only the lanes
                    # the mask selects, where Triton's unmasked load reads them all: past
                    # the array, at a ragged block. A masked load too, so that what it
                    # reads is reported at its own line, not at its use's.)
                    if uses.get(v, 0) == 1 and v not in multi and not isinstance(o, _Ref) and \
                            _nesting(o.text) <= _MAX_INLINE_NESTING and \
                            not (self.triton and (o.load is not None or o.masked_load)):
                        o.pending = True
                        o.src = o.src or src
                        self.pending.append(o)
                    elif uses.get(v, 0) >= 1:
                        o.pending = True
                        o.src = o.src or src
                        self.bind(indent, o)
                env[v] = o
        return [env[v] if isinstance(v, jax_core.Var) else read(v) for v in jaxpr.outvars]

    def subscript(self, ref: _Ref, e, idx_atoms, read, tree) -> str:
        return self.subscript_of(ref, e, tree_util.tree_unflatten(tree, idx_atoms), read)

    def subscript_of(self, ref: _Ref, e, transforms, read) -> str:
        """The `.pk` subscript of `ref` under its transforms: one NDIndexer, or several stacked
        (`ref.at[h].at[page]`, as paged attention's copies), composed into one over the ref's
        own dims. A view that reshapes the ref is refused here (see view_of)."""
        sub, shape, reshaped = self.view_of(ref, e, transforms, read)
        if reshaped:
            self.fail(f"a reshaped view of '{ref.name}' as a copy or semaphore operand has no "
                      ".pk form (reads and stores through one have)", e)
        return sub

    def untile(self, ref: _Ref, e, transforms) -> list:
        """The transforms of an access to a Mosaic GPU SMEM scratch past its untiling views.

        A scratch with `transforms=` (plgpu.TilingTransform, SwizzleTransform) is a ref of the
        tiled shape in the kernel jaxpr (f16[8, 1, 8, 64] for (64, 64) tiled by (8, 64)),
        which the kernel reads through the views that undo them (_LAYOUT_VIEWS), first in
        every access: what those views make of the tiled aval is the scratch's own shape, which
        the export declares. The first access that shows it raises _Untiled, and the kernel is
        translated again with the scratch at that shape; an access that reaches the tiled ref
        otherwise has no .pk form."""
        transforms = list(transforms)
        k = 0
        while k < len(transforms) and type(transforms[k]).__name__ in _LAYOUT_VIEWS:
            k += 1
        if any(type(t).__name__ in _LAYOUT_VIEWS for t in transforms[k:]):
            self.fail(f"an access of the scratch '{ref.name}', declared with transforms= "
                      "(tiling, swizzling), that indexes its tiled ref before undoing them has "
                      "no .pk form", e)
        aval = ref.tiled
        try:
            for t in transforms[:k]:
                aval = t.transform_type(aval)
        except Exception as err:  # noqa: BLE001 - a view JAX itself would refuse
            self.fail(f"the untiling of the scratch '{ref.name}' ({type(err).__name__}) has "
                      "no .pk form", e)
        shape = tuple(int(d) for d in aval.shape)
        if k == 0 and shape != tuple(ref.shape):
            self.fail(f"an access of the scratch '{ref.name}', declared with transforms= "
                      f"(tiling, swizzling), that reaches its tiled ref {tuple(shape)} without "
                      f"undoing them (`{ref.name}.ref`) has no .pk form", e)
        if shape != tuple(ref.shape):
            raise _Untiled(ref.name, shape)
        return transforms[k:]

    def view_of(self, ref: _Ref, e, transforms, read) -> tuple:
        """(subscript, shape, reshaped): the `.pk` subscript over the ref's own dims that
        reaches the elements of the view `transforms` make, the shape of what that subscript
        reads, and whether the view is a reshape of it (its shape then differs from the
        view's, and a read is `reshape(ref[sub], view shape)`, row-major as Pallas').

        The view is a list of groups, each a run of the ref's dims (in order) that the view
        sees as one dim, merged row-major: a ReshapeTransform merges runs of the view's dims
        (`kv_bufs.at[b].reshape(pages * page_size * heads, head_dim)`, ragged paged
        attention's), and an index into a merged dim must reach a box of its ref dims (a
        strided slice `kv[h::heads, :]` of that merge is the rows of head h: every page and
        token, one head); anything else has no .pk form and is refused."""
        if ref.tiled is not None:
            transforms = self.untile(ref, e, transforms)
        if len(transforms) == 0:
            self.whole.update((ref.name, d) for d in range(len(ref.shape)))
            return "[...]", tuple(int(n) for n in ref.shape), False
        # One entry per dim of the ref: ("int", text) removes the dim, ("slice", start, size)
        # keeps it (start a text, or an int when static).
        dims = [("slice", 0, int(n)) for n in ref.shape]
        groups = [[d] for d in range(len(ref.shape))]
        reshaped = False
        for ix in transforms:
            kind = type(ix).__name__
            if kind in _LAYOUT_VIEWS:
                continue  # Mosaic GPU's tiling and swizzling, undone: the ref's own elements
            if kind == "ReshapeTransform":
                groups = self.reshape_view(ref, e, dims, groups, tuple(ix.shape))
                reshaped = True
                continue
            if kind != "NDIndexer":
                self.fail(f"a ref transform ({kind}) on '{ref.name}' has no .pk form", e)
            if getattr(ix, "int_indexer_shape", ()) not in ((), None):
                if any(len(g) != 1 for g in groups):
                    self.fail(f"an array (gather) index into a reshaped view of '{ref.name}' "
                              "has no .pk form", e)
                kept = [g[0] for g in groups]
                self.gather_windows(ref, e, ix, kept, dims, read)
                continue
            if len(ix.indices) > len(groups):
                self.fail(f"an index of rank {len(ix.indices)} into a view of '{ref.name}' of rank "
                          f"{len(groups)} has no .pk form", e)
            new_groups = []
            for g, s in zip(groups, ix.indices):
                if len(g) != 1:
                    if self.index_merged(ref, e, dims, g, s, read):
                        new_groups.append([d for d in g if dims[d][0] == "slice"])
                    continue
                d = g[0]
                base = dims[d][1]
                if type(s).__name__ == "Slice":
                    if s.stride != 1:
                        self.fail(f"a strided slice (stride {s.stride}) of '{ref.name}' has no "
                                  ".pk form", e)
                    if isinstance(s.start, (int, np.integer)):
                        start = int(s.start)
                    else:
                        start = self.int_of(read(s.start) if not isinstance(s.start, _E) else s.start, e,
                                            "a slice start")
                    if not isinstance(s.size, (int, np.integer)):
                        self.fail(f"a slice of '{ref.name}' whose size is computed at run time "
                                  "has no .pk form (a body slice has a static size; a "
                                  "BlockSpec's pl.BoundedSlice dim takes a dynamic one)", e)
                    dims[d] = ("slice", _offset(base, start), int(s.size))
                    new_groups.append(g)
                else:
                    if isinstance(s, (int, np.integer)):
                        idx = int(s)
                    else:
                        idx = self.int_of(s if isinstance(s, _E) else read(s), e, "an index")
                    dims[d] = ("int", _offset(base, idx))
            groups = new_groups + groups[len(ix.indices):]
        parts, full = [], True
        for d, x in enumerate(dims):
            # A Triton operand padded in front for windows that start before it (a halo's
            # `offs - 1`): its block is an Element dim whose slot element k is array element
            # k - front, so every subscript of the dim moves by front (_pad_for_gathers).
            front = self.shift.get((ref.name, d), 0)
            if front and x[0] == "slice" and isinstance(x[1], int) and x[1] == 0 and \
                    x[2] == ref.shape[d]:
                self.whole.add((ref.name, d))  # refused by _pad_for_gathers
            if front:
                x = (x[0], _offset(x[1], front)) + tuple(x[2:])
            if x[0] == "int":
                full = False
                parts.append(_strip(x[1].text) if isinstance(x[1], _E) else str(x[1]))
            elif isinstance(x[1], int):
                lo, size = x[1], x[2]
                if lo == 0 and size == ref.shape[d]:
                    self.whole.add((ref.name, d))
                    parts.append(":")
                elif lo + size > ref.shape[d]:
                    # (a window past the ref's end, which Pallas' Triton lowering does not
                    # check: a ds window, whose reach the rules decide)
                    full = False
                    parts.append(f"ds({lo}, {size})")
                else:
                    full = False
                    parts.append(f"{lo}:{lo + size}")
            else:
                full = False
                parts.append(f"ds({_strip(x[1].text)}, {x[2]})")
        shape = tuple(x[2] for x in dims if x[0] == "slice")
        return ("[...]" if full else "[" + ", ".join(parts) + "]"), shape, reshaped

    def reshape_view(self, ref: _Ref, e, dims: list, groups: list, shape: tuple) -> list:
        """The groups of a view reshaped to `shape`: each new dim merges a run of the view's
        dims whose sizes multiply to it (dims of size 1 go with any run). A new dim that
        splits one of the view's dims is refused."""
        sizes = [math.prod(dims[d][2] for d in g) for g in groups]
        total = math.prod(sizes)
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            shape = tuple(total // known if n == -1 else n for n in shape)
        if math.prod(shape) != total:
            self.fail(f"a reshape of a view of '{ref.name}' to {shape} that changes its size", e)
        out, i = [], 0
        for n in shape:
            members, prod = [], 1
            while i < len(groups) and prod * sizes[i] <= n and (prod < n or sizes[i] == 1):
                members += groups[i]
                prod *= sizes[i]
                i += 1
            if prod != n:
                self.fail(f"a reshape of a view of '{ref.name}' (dims {tuple(sizes)}) to "
                          f"{tuple(shape)} that splits a dim has no .pk form (one that merges "
                          "adjacent dims has)", e)
            out.append(members)
        for g, n in zip(groups[i:], sizes[i:]):  # dims of size 1 left over
            if out:
                out[-1] += g
        return out

    def index_merged(self, ref: _Ref, e, dims: list, group: list, s, read) -> bool:
        """Applies the index `s` (an int or a Slice, static) of a merged view dim to the ref
        dims of `group`, each of which becomes an index ("int") or a slice; True when the view
        keeps the dim (a slice). The elements it reaches must be a box of those dims (their
        increasing order is then the box's row-major order): `h::heads` of (token, head)
        merged, one head of every token, or `0:32`, the first tokens' every head."""
        sizes = [dims[d][2] for d in group]
        if type(s).__name__ == "Slice":
            if not all(isinstance(x, (int, np.integer)) for x in (s.start, s.size, s.stride)):
                self.fail(f"a slice of a reshaped view of '{ref.name}' whose start or size is "
                          "computed at run time has no .pk form", e)
            start, size, stride, keep = int(s.start), int(s.size), int(s.stride), True
        else:
            v = s if isinstance(s, (int, np.integer, _E)) else read(s)
            if isinstance(v, _E) and v.int and re.fullmatch(r"-?\d+", _strip(v.text)):
                v = int(_strip(v.text))  # a constant index, as a literal
            if not isinstance(v, (int, np.integer)):
                self.fail(f"an index into a reshaped view of '{ref.name}' computed at run time "
                          "has no .pk form", e)
            start, size, stride, keep = int(v), 1, 1, False
        if size < 1 or size > 1 << 20 or stride < 1:
            self.fail(f"an index of a reshaped view of '{ref.name}' of {size} elements, stride "
                      f"{stride}, has no .pk form", e)
        coords = [set() for _ in group]
        for t in range(size):
            flat = start + t * stride
            for k in reversed(range(len(group))):
                coords[k].add(flat % sizes[k])
                flat //= sizes[k]
            if flat:
                self.fail(f"an index of a reshaped view of '{ref.name}' past its end has no "
                          ".pk form", e)
        lo = [min(c) if c else 0 for c in coords]
        ext = [max(c) + 1 - min(c) if c else 0 for c in coords]
        # The elements reached lie in the box of their coordinates' ranges; they are all of
        # it (and, increasing, in its row-major order) when there are as many of them.
        if math.prod(ext) != size:
            self.fail(f"an index of a reshaped view of '{ref.name}' (start {start}, size "
                      f"{size}, stride {stride} into merged dims {tuple(sizes)}) that does not "
                      "reach a box of them has no .pk form", e)
        inner = [k for k, n in enumerate(ext) if n > 1]
        for k, d in enumerate(group):
            base = dims[d][1]
            if keep and ext[k] > 1:
                dims[d] = ("slice", _offset(base, lo[k]), ext[k])
            elif keep and k == (inner[0] if inner else len(group) - 1):
                dims[d] = ("slice", _offset(base, lo[k]), 1)  # the view's dim of size 1
            else:
                dims[d] = ("int", _offset(base, lo[k]))
        return keep

    def table_read(self, ref: _Ref, e, idx_atoms, read, tree) -> _E | None:
        """A scalar read of an integer input with a table (_Ref.table), as that table's element:
        an integer the body may test, loop to and index with (decode attention's
        `kv_seq_len_ref[()]`). None where the read is no single element of the block."""
        transforms = tree_util.tree_unflatten(tree, idx_atoms)
        local = []  # the element's index in each dim of the ref (the block's unsqueezed dims)
        if len(transforms) > 1:
            return None
        if transforms:
            ix = transforms[0]
            if type(ix).__name__ != "NDIndexer" or \
                    getattr(ix, "int_indexer_shape", ()) not in ((), None):
                return None
            for s in ix.indices:
                if type(s).__name__ == "Slice":
                    if s.size != 1 or not isinstance(s.start, (int, np.integer)):
                        return None
                    local.append(_E(str(int(s.start)), int=True))
                else:
                    v = _E(str(int(s)), int=True) if isinstance(s, (int, np.integer)) else (
                        s if isinstance(s, _E) else read(s))
                    if not isinstance(v, _E) or not v.int:
                        return None
                    local.append(v)
        if len(local) != len(ref.shape) and not all(d == 1 for d in ref.shape):
            return None
        table, dims = ref.table
        it = iter(local)
        subs = []
        for size, block_index in dims:  # the array index: block index * block size + local
            if size is None:
                subs.append(block_index)
                continue
            x = next(it, None)
            terms = [f"({block_index}) * {size}" if size != 1 else f"({block_index})"]
            if x is not None and _strip(x.text) != "0":
                terms.append(f"({_strip(x.text)})")
            subs.append(" + ".join(terms))
        self.tables_read.add(table)
        return _E(f"{table}[{', '.join(_strip(t) for t in subs) or '0'}]", int=True)

    def gather_windows(self, ref: _Ref, e, ix, kept: list, dims: list, read):
        """An NDIndexer with array indices, where each is a window start + iota(n) along its
        own axis of the indexer (`x_ref.at[col_idx]`, `x_ref.at[row_idx[:, None],
        col_idx[None]]`, col_idx = i * bs + jnp.arange(bs)) on adjacent dims: the gather
        is those slices. Sets dims[d] to ("slice", start, n) and asks for padding."""
        what = f"an array (gather) index into '{ref.name}'"
        arrays = []
        for k, (d, s) in enumerate(zip(kept, ix.indices)):
            if type(s).__name__ == "Slice":
                continue
            if isinstance(s, (int, np.integer)):
                dims[d] = ("int", _offset(dims[d][1], int(s)))
                continue
            v = s if isinstance(s, _E) else read(s)
            scalar = v if isinstance(v, _E) and v.int else getattr(v, "splat", None)
            if scalar is not None:
                # a scalar index beside the windows (`x_ref.at[r, cols]`, which JAX passes
                # broadcast to the windows' shape): the row, as in `x_ref.at[r].at[cols]`
                dims[d] = ("int", _offset(dims[d][1], scalar))
                continue
            aff = getattr(v, "affine", None)
            if aff is None:
                self.fail(f"{what} that is not a window start + jnp.arange(n) has no .pk form", e)
            arrays.append((k, d, aff))
        shape = tuple(int(n) for n in ix.int_indexer_shape)
        ks = [k for k, _, _ in arrays]
        if ks != list(range(ks[0], ks[0] + len(ks))) or len(shape) != len(arrays) or \
                any(aff[2] != i or aff[1] != shape[i] for i, (_, _, aff) in enumerate(arrays)):
            self.fail(f"{what} whose windows are not along their own axes, in dim order, has "
                      "no .pk form", e)
        # A load with no mask reads every lane: a window past the end is out of bounds (on a
        # GPU, a read of global memory past the array), so it asks for no padding; a masked
        # load's masked-off lanes touch no memory, and a store past the end is the Triton
        # store check's (which names the element).
        name = e.primitive.name
        unmasked_load = name == "get" or (
            name == "masked_load" and "args_tree" in e.params
            and tree_util.tree_unflatten(e.params["args_tree"], e.invars)[2] is None)
        for _, d, (start, n, _) in arrays:
            dims[d] = ("slice", _offset(dims[d][1], start), n)
            if not unmasked_load:
                self.want_pad(ref.name, d, n, _aligned(start, n), _low_reach(start, n),
                              _high_reach(start, n, int(ref.shape[d]), self.upper))

    def int_of(self, v, e, what: str) -> _E:
        if not isinstance(v, _E) or not v.int:
            ops = re.findall(r"op=([A-Za-z_][A-Za-z_0-9]*)", getattr(v, "text", ""))
            if ops and not getattr(v, "reads", None):
                msg = (f"{what} computed by '{ops[0]}', an operation with no integer .pk form, has "
                       "no .pk form (indices and conditions must come from program_id, loop "
                       "variables, scalar prefetch and constants)")
            elif isinstance(v, _E) and not v.reads and not v.sources:
                msg = (f"{what} computed from integers by an operation .pk's integer expressions "
                       "lack has no .pk form (they have +, -, *, //, %, "
                       "min, max, comparisons and where, and the bitwise &, |, ^ and shifts only "
                       "with a constant operand)")
            else:
                msg = (f"{what} computed from array data has no .pk form (indices and conditions "
                       "must come from program_id, loop variables and constants)")
            inputs = sorted(set(getattr(v, "sources", ()) or ()) & self.untabled)
            if inputs:
                msg += (f"; it reads the integer input '{inputs[0]}', whose reads would count "
                        "if its contents were known at export (pass the array itself) or "
                        f"described: prefetch={{{inputs[0]!r}: \"in [0, 8)\"}}")
            self.fail(msg, e)
        return v

    def eqn(self, e, read, env, indent, src):
        if e.primitive.name == "add_any":
            # autodiff's sum of tangents (jax.grad in a body, a jax.jvp'd kernel) is an add
            e = e.replace(primitive=jax.lax.add_p)
        name = e.primitive.name
        p = e.params
        if name in ("get", "swap", "addupdate"):
            ref = read(e.invars[0])
            if not isinstance(ref, _Ref):
                self.fail(f"'{name}' on a value that is not a kernel ref", e)
            if ref.prefetch or ref.state:
                # Integer scalars in SMEM: a read is an integer, and a store (into a prefetch ref
                # too, as paged attention's buffer_index_ref) makes them state the .pk follows
                # across grid steps (docs/language.md, "SMEM state").
                what = "scalar prefetch ref" if ref.prefetch else "SMEM scratch"
                n = 1 if name == "get" else 2
                transforms = tree_util.tree_unflatten(p["tree"], e.invars[n:])
                if ref.zero_d and all(type(t).__name__ == "NDIndexer" and not t.indices
                                      for t in transforms):
                    sub = "[0]"  # the only element of a 0-d prefetch ref, a table of one
                else:
                    sub = self.subscript_of(ref, e, transforms, read)
                if sub in ("[...]", "") or ":" in sub or "ds(" in sub:
                    self.fail(f"a {'read' if name == 'get' else 'write'} of the {what} '{ref.name}' "
                              "that is not one element has no .pk form", e)
                state = ref.state or name != "get" or ref.name in self.bind_reads_of
                if state and not re.fullmatch(r"\[\s*\d+(\s*,\s*\d+)*\s*\]", sub):
                    self.fail(f"a {'read' if name == 'get' else 'write'} of the {what} '{ref.name}' "
                              f"at {sub}, a subscript that is not a constant, has no .pk form (SMEM "
                              "state is followed element by element; docs/language.md, \"SMEM state\")",
                              e)
                if name == "get":
                    if ref.name in self.bind_reads_of:
                        local = self.fresh("s")
                        self.emit(indent, f"{local} = {ref.name}{sub}", src)
                        return [_E(local, int=True, name=True)]
                    return [_E(f"{ref.name}{sub}", int=True)]
                self.stored_state.add(ref.name)
                val = read(e.invars[1])
                if not ref.prefetch and isinstance(val, _E) and not val.int and (val.reads or val.sources):
                    raise _DataIntoSmem(ref.name)
                if not isinstance(val, _E) or not val.int:
                    self.fail(f"a write to the {what} '{ref.name}' of a value that is not an integer "
                              "expression has no .pk form (SMEM state holds integers computed from "
                              "program_id, loop variables, constants and SMEM reads)", e)
                if name == "swap" and self.uses.get(e.outvars[0], 0) > 0:
                    self.fail(f"a swap on the {what} '{ref.name}' whose old value is used has no .pk "
                              "form (read it first)", e)
                self.emit(indent, f"{ref.name}{sub} {'+=' if name == 'addupdate' else '='} "
                                  f"{_strip(val.text)}", src)
                return []
            n = 1 if name == "get" else 2
            if name == "get" and ref.table is not None and e.outvars[0].aval.shape == ():
                read_ = self.table_read(ref, e, e.invars[1:], read, p["tree"])
                if read_ is not None:
                    return [read_]
            sub, vshape, reshaped = self.view_of(
                ref, e, tree_util.tree_unflatten(p["tree"], e.invars[n:]), read)
            target = f"{ref.name}{sub}"
            if name == "get":
                aval = e.outvars[0].aval
                if reshaped and tuple(aval.shape) != vshape:  # a read through a ref reshape
                    return [_E(f"reshape({target}, {_tuple(str(int(d)) for d in aval.shape)})",
                               reads=frozenset([ref.name]), src=src, shape=aval.shape,
                               dtype=aval.dtype, sources=frozenset([ref.name]))]
                return [_E(target, reads=frozenset([ref.name]), load=(ref.name, sub), src=src,
                           shape=aval.shape, dtype=aval.dtype, sources=frozenset([ref.name]))]
            val = read(e.invars[1])
            if reshaped and tuple(e.invars[1].aval.shape) != vshape:
                # a store through a ref reshape: the value, reshaped back to the ref's dims
                val = _E(f"reshape({_strip(val.text)}, {_tuple(str(d) for d in vshape)})",
                         reads=val.reads, src=val.src, shape=vshape, dtype=val.dtype)
                if name == "swap" and self.uses.get(e.outvars[0], 0) > 0:
                    self.fail(f"a swap through a reshaped view of '{ref.name}' whose old value "
                              "is used has no .pk form", e)
            old = None
            if name == "swap" and self.uses.get(e.outvars[0], 0) > 0:
                old = _E(target, reads=frozenset([ref.name]), pending=True, src=src)
                self.pending.append(old)
                self.bind(indent, old)
            self.flush(indent, ref.name)
            if name == "addupdate":
                self.emit(indent, f"{target} += {_strip(val.text)}", src)
            elif val.acc is not None and val.acc[0] == ref.name and val.acc[1] == sub \
                    and getattr(val, "pending_consumed", False):
                self.emit(indent, f"{target} += {_strip(val.acc[2].text)}", src)
            else:
                self.emit(indent, f"{target} = {_strip(val.text)}", src)
            return [old] if name == "swap" else []
        if name in ("program_id", "num_programs"):
            axis = int(p["axis"])  # an axis of the user's grid: vmap's axes are not counted
            axis = self.user_axes[axis] if axis < len(self.user_axes) else axis
            return [_E(f"{name}({axis})", int=True, nonneg=True)]
        if name == "cond":
            return self.cond(e, read, env, indent, src)
        if name == "scan":
            return self.scan(e, read, env, indent, src)
        if name == "while":
            return self.while_loop(e, read, env, indent, src)
        if name in ("pjit", "jit", "closed_call", "custom_jvp_call", "custom_vjp_call",
                    "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint"):
            sub = p.get("jaxpr") or p.get("call_jaxpr") or p.get("fun_jaxpr")
            if sub is None:
                self.fail(f"'{name}' without a jaxpr", e)
            ins = [read(a) for a in e.invars]
            floor = _floor_call(e, ins) if name in ("pjit", "jit") else None
            if floor is not None:
                return [floor]
            if _float_remainder(e, ins):
                return [self.tensor(e, ins, src)]
            if _float_floor_divide(e, ins):
                return [self.float_floor_divide(e, ins, indent, src)]
            inner = _inner(sub)
            senv = {}
            for v, c in zip(inner.constvars, _consts(sub)):
                t, is_int, nn = _literal_text(c)
                senv[v] = _E(t, int=is_int, nonneg=nn)
            for v, a in zip(inner.invars, ins):
                senv[v] = a
            saved, self.src_override = self.src_override, src
            try:
                return self.run(inner, senv, indent)
            finally:
                self.src_override = saved
        if name in ("dma_start", "dma_wait"):
            return self.dma(e, read, indent, src)
        if name in ("semaphore_signal", "semaphore_wait"):
            return self.semaphore(e, read, indent, src)
        if name == "wgmma_ref":
            return self.wgmma(e, read, indent, src)
        if name == "wgmma_wait":
            # each wgmma's await was read where it was issued (see wgmma)
            return []
        if name == "commit_smem":
            # the fence that makes the body's SMEM stores visible to a wgmma (the async proxy):
            # check holds every wgmma operand the body stored into to one since the store
            self.emit(indent, "commit_smem()", src)
            return []
        if name in ("wgmma_accumulator_deref", "wgmma_accumulator_deref_p"):
            return self.acc_read(e, read, src)
        if name in ("wgmma_accumulator_store", "wgmma_accumulator_store_p"):
            # `acc[...] = v` on a plgpu.ACC: the .pk store (which awaits the wgmmas in flight)
            acc, val = read(e.invars[0]), read(e.invars[1])
            if not isinstance(acc, _Ref) or acc.name not in self.acc_refs:
                self.fail("a store into an accumulator that is not a plgpu.ACC scratch", e)
            self.flush(indent, acc.name)
            self.emit(indent, f"{acc.name}[...] = {_strip(val.text)}", src)
            return [val]
        if name in ("semaphore_read",
                    "async_copy", "copy_gmem_to_smem", "copy_smem_to_gmem", "barrier_wait",
                    "barrier_arrive", "wgmma", "device_id", "tcgen05_mma", "wait_smem_to_gmem"):
            self.fail(f"manual DMA and synchronization ('{name}') have no .pk form in this "
                      "version of pipecheck (the export has local async copies, sync_copy, "
                      "semaphore_signal and semaphore_wait)", e)
        if name == "emit_pipeline":
            return self.emit_pipeline(e, read, env, indent, src)
        if name == "run_scoped" and self.sync_copy(e, read, indent, src):
            return []
        if name == "run_scoped":
            return self.run_scoped(e, read, indent, src)
        if name == "debug_print" or (name == "check" and p.get("debug")):
            return self.debug_print(e, read, indent, src)
        if name in ("masked_load", "masked_swap"):
            return self.masked(e, read, indent, src)

        ins = [read(a) for a in e.invars]
        out_aval = e.outvars[0].aval if e.outvars else None
        if all(isinstance(a, _E) and a.int for a in ins) and out_aval is not None \
                and _is_int_aval(out_aval):
            if name in ("and", "or") and not self.in_while_cond:
                # jnp's & and | take both sides, loaded before they combine; .pk's `and` and
                # `or` short-circuit, as Python's: a side that reads SMEM (a prefetch table
                # read past its end at the last step) is bound to a local first. (Not in a
                # while condition, which is one expression.)
                for k, a in enumerate(ins):
                    if "[" in a.text and not a.name:
                        local = self.fresh("v")
                        self.emit(indent, f"{local} = {_strip(a.text)}", src)
                        ins[k] = _E(local, int=True, name=True, nonneg=a.nonneg)
            r = _int_eqn(e, ins)
            if r is not None:
                return [r]
        if len(e.outvars) != 1:
            return self.opaque_multi(e, ins, indent, src)
        r = self.tensor(e, ins, src)
        return [r]

    def wgmma(self, e, read, indent, src):
        """`plgpu.wgmma(acc, a, b)` in a Mosaic GPU `pallas_call`: an asynchronous
        `acc += a @ b` that reads the refs a and b until a `plgpu.wgmma_wait(n)` retires it.
        The .pk statement `acc[...] += dot(a[...], b[...])` is such a wgmma followed by
        `wgmma_wait(1)` (one left in flight until the next wgmma's wait or a read of acc:
        docs/lowering.md, "Mosaic GPU"); `acc[...] = acc[...] + dot(...)` is one awaited at
        once. Which of the two a wgmma is decided by the first await that follows it in its
        block: `wgmma_wait(0)` (nothing stored into a or b in between) is the second,
        `wgmma_wait(n >= 1)` (unless a wgmma_wait(0) follows it before another wgmma or a read
        of acc) or a read of acc the first. A wgmma not awaited in its block, or a
        second issued while the first is in flight, keeps more in flight than the .pk form
        says, and is refused."""
        p = e.params
        acc = read(e.invars[0])
        if not isinstance(acc, _Ref) or acc.name not in self.acc_refs:
            self.fail("a wgmma whose accumulator is not a plgpu.ACC scratch has no .pk form", e)
        # (wgmma_ref's operands: acc, a, b, then the transforms' leaves of acc, a and b)
        refs = [e.invars[1], e.invars[2]]
        acc_tree = p.get("acc_transforms_tree")
        rest = list(e.invars[3 + (acc_tree.num_leaves if acc_tree is not None else 0):])
        views = []
        for what in ("a", "b"):
            opnd = read(refs.pop(0))
            if not isinstance(opnd, _Ref):
                self.fail(f"a wgmma whose {what} operand is a value in registers, not a ref, has "
                          "no .pk form", e)
            tree = p.get(f"{what}_transforms_tree")
            k = tree.num_leaves if tree is not None else 0
            leaves, rest = rest[:k], rest[k:]
            transforms = list(tree_util.tree_unflatten(tree, leaves) if tree is not None else ())
            # plgpu.transpose_ref(k_ref, (1, 0)): the wgmma reads the operand transposed
            # (attention's S = Q Kᵀ), the .pk dot's trans_a / trans_b. Only a last transpose
            # of a 2-D view is one; a view indexed after a transpose is refused.
            trans = False
            tpos = [k for k, t in enumerate(transforms) if type(t).__name__ == "TransposeTransform"]
            if tpos:
                later = [t for t in transforms[tpos[-1] + 1:]
                         if type(t).__name__ not in _LAYOUT_VIEWS]
                perm = tuple(int(x) for x in getattr(transforms[tpos[-1]], "permutation", ()))
                if len(tpos) > 1 or later or perm != (1, 0):
                    self.fail(f"a wgmma {what} operand transposed other than by a last "
                              f"transpose_ref(..., (1, 0)) of '{opnd.name}' has no .pk form", e)
                del transforms[tpos[-1]]
                trans = True
            sub, _, reshaped = self.view_of(opnd, e, transforms, read)
            if reshaped:
                self.fail(f"a wgmma operand that reshapes '{opnd.name}' has no .pk form", e)
            views.append((opnd, sub, trans))
        if p.get("acc_transforms_tree") is not None:
            self.fail("a wgmma into a view of its accumulator has no .pk form", e)
        waited = None  # the n of the first wgmma_wait after e, or "read" for a read of acc
        stored = False  # whether something stores into a or b before that
        mine = {e.invars[1], e.invars[2]}
        for f in self.after:
            fn = f.primitive.name
            if fn == "wgmma_wait":
                n = f.invars[0]
                if not isinstance(n, jax_core.Literal):
                    self.fail("plgpu.wgmma_wait(n) with an n not known at export has no .pk form",
                              f)
                waited = int(n.val)
                if waited == 0:
                    break
                continue  # (a wgmma_wait(0) after it, before another wgmma, retires it all the same)
            if waited is not None and waited != "read" and (
                    fn in ("wgmma_accumulator_deref", "wgmma_accumulator_deref_p")
                    or _uses_primitive(f, "wgmma_ref")):
                break  # left in flight by its wait(n >= 1)
            if fn in ("wgmma_accumulator_deref", "wgmma_accumulator_deref_p"):
                waited = "read"
                break
            if _uses_primitive(f, "wgmma_ref"):
                self.fail("a second wgmma while one is in flight (no plgpu.wgmma_wait between "
                          "them) has no .pk form (the .pk wgmma keeps at most one in flight)", f)
            if _stores_into(f, mine):
                stored = True
        if waited is None:
            self.fail("a wgmma not awaited by a plgpu.wgmma_wait in the same block has no .pk "
                      "form (the .pk wgmma keeps at most one in flight, awaited by the next "
                      "wgmma's wait or a read of the accumulator)", e)
        self.flush(indent)
        (a, sa, ta), (b, sb, tb) = views
        flags = (", trans_a=True" if ta else "") + (", trans_b=True" if tb else "")
        dot = f"dot({a.name}{sa}, {b.name}{sb}{flags}, preferred_element_type=f32)"
        # A store into an operand before its wait(0) (at top level, or in a pl.when) races the
        # wgmma still reading it: left in flight, as .pk says, the store is the
        # async-operand-overwritten it is.
        if waited == 0 and not stored:
            self.emit(indent, f"{acc.name}[...] = {acc.name}[...] + {dot}", src)
        else:
            self.emit(indent, f"{acc.name}[...] += {dot}", src)
        return []

    def acc_read(self, e, read, src):
        """`acc[...]` of a plgpu.ACC scratch (Pallas' wgmma_accumulator_deref, wait_n=0): it
        awaits every wgmma in flight first, as the .pk program does before any use of an acc
        scratch. With another wait_n, see unsynchronized_acc_read."""
        acc = read(e.invars[0])
        if not isinstance(acc, _Ref):
            self.fail("a read of an accumulator that is not a kernel ref", e)
        wait_n = e.params.get("wait_n", 0)
        if wait_n is None or int(wait_n) != 0:
            self.unsynchronized_acc_read(e, acc, wait_n)
        aval = e.outvars[0].aval
        return [_E(f"{acc.name}[...]", reads=frozenset([acc.name]), load=(acc.name, "[...]"),
                   src=src, shape=aval.shape, dtype=aval.dtype, sources=frozenset([acc.name]))]

    def preceding(self):
        """The equations that ran before the one being translated, latest first: those before
        it in its block, then those before the block's own equation in the block around it,
        and so on out to the kernel body, as long as what comes before is the same on every
        run of the block (not past a loop that issues a wgmma: an earlier iteration ran its
        wgmmas before it)."""
        for k in range(len(self.frames) - 1, -1, -1):
            eqns, at = self.frames[k]
            yield from reversed(eqns[:at])
            if k:
                outer, outer_at = self.frames[k - 1]
                around = outer[outer_at]  # the equation whose block this is
                if around.primitive.name in ("scan", "while") and \
                        _uses_primitive(around, "wgmma_ref"):
                    return

    def unsynchronized_acc_read(self, e, acc: _Ref, wait_n) -> None:
        """`plgpu.wgmma_accumulator_load(acc, wait_n=None)` (no synchronization) or with
        `wait_n >= 1` (it leaves that many wgmmas in flight): a read of the accumulator's
        registers that retires no wgmma. The .pk wgmma keeps at most one in flight (wgmma), so
        such a read retires nothing there either: it is the plain read `acc[...]` where no
        wgmma can be in flight, which holds after a `plgpu.wgmma_wait(0)` (or an awaiting
        read of an accumulator) earlier in its block with no wgmma after it, or in a kernel
        that issues none. After a wgmma not retired since, it reads registers the wgmma is
        still writing, a race on the GPU; a .pk read of an accumulator waits for its wgmmas,
        so that read has no .pk form, and the diagnostic says it races."""
        how = "wait_n=None" if wait_n is None else f"wait_n={int(wait_n)}"
        for f in self.preceding():
            fn = f.primitive.name
            if fn == "wgmma_wait" and isinstance(f.invars[0], jax_core.Literal):
                if int(f.invars[0].val) == 0:
                    return  # every wgmma retired
                continue  # wgmma_wait(n >= 1) leaves the one in flight
            if fn in ("wgmma_accumulator_deref", "wgmma_accumulator_deref_p"):
                if f.params.get("wait_n", 0) is not None and int(f.params["wait_n"]) == 0:
                    return
                continue
            if fn == "wgmma_ref":
                at = _frame(f.source_info)
                self.fail(f"plgpu.wgmma_accumulator_load({acc.name}, {how}) reads the "
                          f"accumulator while the wgmma at {_fmt_loc(at) or 'an earlier line'} "
                          "is still in flight (nothing retired it since): it reads registers "
                          "that wgmma is still writing, a race on the GPU. A .pk read of an "
                          "accumulator waits for its wgmmas, so this read has no .pk form: "
                          "retire the wgmma first (plgpu.wgmma_wait(0)) or read with wait_n=0 "
                          f"({acc.name}[...])", e)
            if any(_uses_primitive(f, q) for q in ("wgmma_ref", "wgmma_wait",
                                                  "wgmma_accumulator_deref",
                                                  "wgmma_accumulator_deref_p")):
                break  # a wgmma or an await in a nested block: not known here
        if self.has_wgmma:
            self.fail(f"plgpu.wgmma_accumulator_load({acc.name}, {how}) waits for no wgmma, and "
                      "the export cannot tell that none is in flight here (a wgmma left in "
                      "flight reads registers it is still writing, a race on the GPU): put "
                      "plgpu.wgmma_wait(0) before it in its block, or read with wait_n=0 "
                      f"({acc.name}[...])", e)

    def masked(self, e, read, indent, src):
        """`pl.load`/`pltpu.load`/`plgpu.load(..., mask=, other=)` and the stores with a mask.

        A load with a mask and `other` is `where(mask, x[s], other)`; without `other` the
        masked-off elements are undefined (masked_load_undefined). A masked store is `x[s] = where(mask, v,
        x[s])`, the form the rules know as a masked store (it reads x[s] only to put it back).
        """
        name = e.primitive.name
        tree = e.params.get("args_tree")
        if tree is None:
            self.fail(f"'{name}' without its operand tree has no .pk form", e)
        args = tree_util.tree_unflatten(tree, [read(a) for a in e.invars])
        ref, transforms = args[0], tuple(args[1] or ())
        if not isinstance(ref, _Ref):
            self.fail(f"'{name}' on a value that is not a kernel ref", e)
        if ref.prefetch:
            self.fail(f"a masked access of the scalar prefetch ref '{ref.name}' has no .pk form", e)
        if e.params.get("is_volatile"):
            self.fail(f"a volatile load of '{ref.name}' has no .pk form", e)
        sub = self.subscript_of(ref, e, transforms, read)
        target = f"{ref.name}{sub}"
        for a in args[2:]:
            if a is not None and not isinstance(a, _E):
                self.fail(f"'{name}' of '{ref.name}' takes a ref as a value, which has no .pk "
                          "form", e)
        if name == "masked_load":
            mask, other = args[2], args[3]
            aval = e.outvars[0].aval
            if mask is None:
                return [_E(target, reads=frozenset([ref.name]), load=(ref.name, sub), src=src,
                           shape=aval.shape, dtype=aval.dtype)]
            if self.triton:
                self.pad_masked_windows(ref, transforms, read)
            if other is None:
                return [self.masked_load_undefined(e, ref, target, mask, aval, indent, src)]
            reads = frozenset([ref.name]) | mask.reads | other.reads
            return [_E(f"where({_strip(mask.text)}, {target}, {_strip(other.text)})", reads=reads,
                       src=src, shape=aval.shape, dtype=aval.dtype, masked_load=self.triton)]
        val, mask = args[2], args[3]
        if self.triton and mask is not None:
            self.pad_masked_windows(ref, transforms, read)  # (a masked-off lane stores nothing)
        used = bool(e.outvars) and self.uses.get(e.outvars[0], 0) > 0
        if used and mask is not None and not val.name and not _atomic(val.text):
            val.pending = True  # the old value reads it too: one read, at its place
            self.bind(indent, val)
        old = None
        if used:
            text = target if mask is None else \
                f"where({_strip(mask.text)}, {target}, {_strip(val.text)})"
            old = _E(text, reads=frozenset([ref.name]) | val.reads, pending=True, src=src)
            self.pending.append(old)
            self.bind(indent, old)
        self.flush(indent, ref.name)
        if mask is None:
            self.emit(indent, f"{target} = {_strip(val.text)}", src)
        else:
            self.emit(indent,
                      f"{target} = where({_strip(mask.text)}, {_strip(val.text)}, {target})", src)
        return [old]

    def pad_masked_windows(self, ref: _Ref, transforms, read) -> None:
        """A Triton masked load or store through `pl.ds(start, n)` windows (`x_ref.at[pl.ds(k *
        64, 64)]`, mask=cols < n): its masked-off lanes touch no memory, so its last window may
        pass the ref's end. Its block is padded as a gather window's is (_pad_for_gathers): what a
        lane reads there is padding, which the mask keeps out."""
        if len(transforms) != 1 or type(transforms[0]).__name__ != "NDIndexer":
            return
        ix = transforms[0]
        if getattr(ix, "int_indexer_shape", ()) not in ((), None):
            return  # a gather: gather_windows pads it
        for d, s in enumerate(ix.indices):
            if type(s).__name__ != "Slice" or not isinstance(s.size, (int, np.integer)) or \
                    s.stride != 1 or int(s.size) <= 0 or d >= len(ref.shape):
                continue
            n = int(s.size)
            if isinstance(s.start, (int, np.integer)) and int(s.start) + n <= int(ref.shape[d]):
                continue  # a static window within the ref
            start = s.start if isinstance(s.start, (int, np.integer, _E)) else read(s.start)
            low = _low_reach(start, n)
            self.ds_before_start |= low > 0
            # (a window wholly past the end, all its lanes masked off: `for t in range(2)` of
            # windows per program, the last program's second past an array of 3 windows)
            self.want_pad(ref.name, d, n, _aligned(start, n), low,
                          _high_reach(start, n, int(ref.shape[d]), self.upper))

    def want_pad(self, name: str, d: int, n: int, aligned: bool, low: int = 0,
                 high: int = 0) -> None:
        """Asks for the block of `name` padded in dim d for windows of n (_pad_for_gathers): to
        whole windows where every start is a multiple of n, else one window more (a chunk of
        100 read through 128 lanes, a halo's `offs + 1`: a start below the array's end ends
        within it), at least `high` elements past the end where a start's bound says a window
        reaches that far (_high_reach), and `low` elements in front where a start may be
        negative (_low_reach)."""
        width, extra, front, beyond = self.pad.setdefault(name, {}).get(d, (0, 0, 0, 0))
        self.pad[name][d] = (max(width, n), max(extra, 0 if aligned else n), max(front, low),
                             max(beyond, high))

    def masked_load_undefined(self, e, ref, target, mask, aval, indent, src) -> _E:
        """A masked load without `other`: the masked-off elements are undefined (interpret
        mode returns what memory holds; hardware, anything). `.pk` has no undefined value, only
        undefined contents, so the load goes through a scratch of its own that nothing else
        writes: `u[...] = undefined` (what an earlier load kept is gone), then the masked store
        the rules know, `u[...] = where(mask, x[s], u[...])`, which keeps u where the mask does
        not hold. What nothing wrote of u is undefined, followed element by element (docs/rules.md,
        "Masked stores in programs"), so using a masked-off element is an uninitialized-read and
        a mask that keeps it out verifies. The value is `u[...]`."""
        nm = _ident(f"{ref.name}_masked", self.taken)
        dt = _dtype(aval.dtype, f"a masked load of '{ref.name}'", _fmt_loc(src))
        self.scoped.append((f"    scratch {nm}: {dt}[{_shape(aval.shape)}]", src))
        if not mask.name and not _atomic(mask.text) and mask.reads:
            mask.pending = True  # a mask that reads memory is read here, once
            self.bind(indent, mask)
        self.emit(indent, f"{nm}[...] = undefined", src)
        self.emit(indent, f"{nm}[...] = where({_strip(mask.text)}, {target}, {nm}[...])", src)
        return _E(f"{nm}[...]", reads=frozenset([nm]), load=(nm, "[...]"), src=src,
                  shape=aval.shape, dtype=aval.dtype)

    def debug_print(self, e, read, indent, src):
        """`pl.debug_print`: it only prints, so it is left out, as a comment in the body and a
        `Kernel.dropped` entry; an operand that reads a ref is bound to a local first, so the
        read stays (printing an uninitialized scratch still reads it). `pl.debug_check(cond,
        msg)` (checkify's `check` with debug=True, whose operand is the failure, `not cond`)
        the same: it writes no memory, and stops the kernel only where debug checks are
        enabled (pl.enable_debug_checks; otherwise Pallas drops it)."""
        ins = [read(a) for a in e.invars]
        for a in ins:
            if isinstance(a, _E) and a.reads and not a.name:
                a.pending = True
                self.bind(indent, a)
        if e.primitive.name == "check":
            what, does = "debug_check", "checks"
            try:  # the message and the failure predicate, as Pallas' TPU lowering reads them
                err = tree_util.tree_unflatten(e.params["err_tree"], list(range(len(ins))))
                (pred,), (meta,), (payload,) = (list(d.values()) for d in (
                    err._pred, err._metadata, err._payload))
                fmt = tree_util.tree_unflatten(meta, payload).fmt_string
                ins = [ins[pred]]
            except Exception:  # noqa: BLE001 - another jax's Error: every operand, no message
                fmt = ""
        else:
            what, does, fmt = "debug_print", "prints", e.params.get("fmt", "")
        fmt = re.sub(r"[^ -~]", " ", str(fmt))[:60]
        args = "".join(f", {_strip(a.text)}" for a in ins if isinstance(a, _E))
        self.dropped.append((what, src))
        self.emit(indent, f"# dropped: {what}({fmt!r}{args}) {does}, writing no memory", src)
        return []

    def float_floor_divide(self, e, ins, indent, src) -> _E:
        """jnp's `//` of floats, CPython's float_divmod as jax computes it: m = lax.rem(x, y),
        q = (x - m) / y (x / y where y is 0), one less where m is not 0 and its sign is not
        y's, then lax.round away from zero. `.pk`'s float `//` is floor(x / y), which differs
        (1.0 // 0.1 is 9.0 here and 10.0 there; inf // 3.0 is nan, -1.0 // inf is -1.0), so the
        steps are written as they are, each exactly: lax.rem (fmod, the dividend's sign) as
        sign(x) * (abs(x) % abs(y)), since `.pk`'s `%` of non-negative floats is fmod, and the
        rounding as round (half to even) but at a half, where it goes away from zero."""
        aval = e.outvars[0].aval
        sources = frozenset().union(*[a.reads | a.sources for a in ins])
        for a in ins:  # each operand is used several times: a local, read where the jaxpr reads
            if not a.name and not _atomic(_strip(a.text)):
                a.pending, a.src = True, a.src or src
                self.bind(indent, a)
        # (jnp promotes its operands inside the call: an integer one, or a weak float
        # scalar, is cast to the result's dtype first)
        dt = _dtype(aval.dtype, "a floor division", _fmt_loc(src))
        x, y = (_strip(a.text) if v.aval.dtype == aval.dtype else f"cast({_strip(a.text)}, {dt})"
                for a, v in zip(ins, e.invars))

        def local(text):
            name = self.fresh("v")
            self.emit(indent, f"{name} = {text}", src)
            return name

        m = local(f"sign({x}) * (abs({x}) % abs({y}))")
        q = local(f"where({y} == 0.0, {x}, {x} - {m}) / {y}")
        q = local(f"where(({m} != 0.0) & (sign({y}) != sign({m})), {q} - 1.0, {q})")
        return _E(f"where(abs({q}) - floor(abs({q})) == 0.5, {q} + sign({q}) * 0.5, round({q}))",
                  src=src, shape=aval.shape, dtype=aval.dtype, sources=sources)

    def run_scoped(self, e, read, indent, src):
        """`pl.run_scoped(f, *allocations)`: each allocation becomes a kernel scratch (named
        after f's parameter) and f's body is exported in place. The buffer lives across scopes
        and grid steps in `.pk`, where Pallas' starts undefined at each entry of the scope: so
        the scope begins with `NAME[...] = undefined` for each buffer (not for semaphores), and
        a read before a write in this entry is an uninitialized-read whatever an earlier entry
        wrote. A plgpu.ACC starts at zero at each entry (`NAME[...] = zeros`), as Pallas'
        Mosaic GPU lowering allocates it; a Mosaic GPU SMEM allocation with transforms= is
        declared at the shape its untiling views give."""
        p = e.params
        if p.get("collective_axes"):
            self.fail("pl.run_scoped with collective_axes (memory shared across cores) has no "
                      ".pk form", e)
        views = [tuple(t or ()) for t in (p.get("ref_transforms") or ())]
        if any(type(t).__name__ not in _LAYOUT_VIEWS or not self.mgpu for t in sum(views, ())):
            self.fail("pl.run_scoped allocations with ref transforms other than Mosaic GPU's "
                      "tiling and swizzling (plgpu.SMEM(..., transforms=)) have no .pk form", e)
        sub = p["jaxpr"]
        inner = _inner(sub)
        if _array_consts(sub):
            self.fail("a pl.run_scoped body that closes over array constants has no .pk form", e)
        arg_names = list(getattr(getattr(inner, "debug_info", None), "arg_names", None) or [])
        senv = {}
        for v, a in zip(inner.constvars, e.invars):
            senv[v] = read(a)
        for k, v in enumerate(inner.invars):
            an = arg_names[k] if k < len(arg_names) and arg_names[k] else "scoped"
            nm = _ident(an, self.taken)
            inner_aval = getattr(v.aval, "inner_aval", v.aval)
            shape, tiled = tuple(int(d) for d in inner_aval.shape), None
            if self.mgpu and "smem" in _memory_space_name(v.aval) and not _is_semaphore(v.aval):
                # a Mosaic GPU SMEM allocation, tiled where it has transforms=: the ref is
                # tiled, and the views that undo its transforms give its own shape (view_of)
                tiled, aval = inner_aval, inner_aval
                for t in views[k] if k < len(views) else ():
                    aval = t.transform_type(aval)
                shape = tuple(int(d) for d in aval.shape)
            self.scoped.append((_scratch_line(nm, v.aval, _fmt_loc(src), self.kernel,
                                              shape if tiled is not None else None), src))
            senv[v] = _Ref(nm, shape, tiled=tiled)
            if _is_acc(v.aval):
                # plgpu.ACC: Pallas' Mosaic GPU lowering of run_scoped gives it zeroed
                # registers at each entry of the scope (WGMMAAccumulator.zero), where the
                # `memory_space=acc` scratch is zero only at the CTA's start.
                self.acc_refs.add(nm)
                self.emit(indent, f"{nm}[...] = zeros", src)
            elif not _is_semaphore(v.aval):
                self.emit(indent, f"{nm}[...] = undefined", src)
        outs = self.run(inner, senv, indent)
        for v in inner.invars:  # the buffers die with the scope: their reads happen in it
            self.flush(indent, senv[v].name)
        return outs

    def emit_pipeline(self, e, read, env, indent, src):
        """`pltpu.emit_pipeline(body, grid=..., in_specs=..., out_specs=...)(refs...)`, traced as
        JAX's emit_pipeline primitive, as `.pk`'s nested `emit_pipeline(grid=...)`: the inner
        grid, per BlockSpec a spec naming the kernel's memory_space=ANY operand it stages, and
        the inner body, in which program_id is the inner grid's (docs/language.md, "Nested
        emit_pipeline"). So the spec rules see the inner BlockSpecs and the reductions the
        inner body makes over the inner grid. The outer values the index maps and the body
        close over are locals bound before it. What the nested form cannot say raises
        NotNative: the kernel is then exported as the DMAs and loop Pallas makes of it."""
        p = e.params
        gm = p["grid_mapping"]

        def no(why: str):
            raise NotNative(f"an emit_pipeline {why} has no nested .pk form", _fmt_loc(src),
                             self.kernel)

        if indent != 2 or self.pipeline is not None:
            no("under a condition or loop, inside another, or after another in the body,")
        if self.has_prefetch:
            no("in a kernel with scalar prefetch")
        if p.get("core_axis") is not None or p.get("core_axis_name") is not None:
            no("split across cores (core_axis)")
        if p.get("no_pipelining"):
            no("with no_pipelining=True")
        grid = tuple(gm.grid)
        if int(gm.num_dynamic_grid_bounds or 0) or int(p.get("_num_extra_dynamic") or 0) or \
                getattr(gm, "vmapped_dims", ()) or \
                any(not isinstance(g, (int, np.integer)) for g in grid) or \
                any(not isinstance(o, (int, np.integer)) or o for o in
                    p.get("_static_grid_offsets") or ()) or not 1 <= len(grid) <= 4:
            no(f"over a grid {grid} that is not static, of rank 1 to 4")
        counts = [len(bm.index_map_jaxpr.consts) for bm in gm.block_mappings]
        n_im, n_body = sum(counts), int(p["body_consts_len"])
        body = p["body_jaxpr"]
        args = e.invars[n_im + n_body:]
        try:  # the refs, each maybe a view (x_hbm.at[rows]): its ref and indexer, as leaves
            tree = p["args_tree"].unflatten([f"\0{k}" for k in range(len(args))])
        except Exception:  # noqa: BLE001 - a tree this export does not know
            no("on refs of a structure this export does not know")
        leaf = {f"\0{k}": a for k, a in enumerate(args)}
        views = tree if isinstance(tree, (tuple, list)) else (tree,)
        if len(views) != len(gm.block_mappings) or len(body.invars) != len(views):
            no("on refs of a structure this export does not know")
        self.flush(indent)
        bound: dict = {}

        def closure(a):
            """An outer value the pipeline reads: the value, bound to a local when it is an
            expression (the inner program_id is not the outer one)."""
            if isinstance(a, jax_core.Var) and a in bound:
                return bound[a]
            x = read(a)
            if not isinstance(x, _Ref) and not _atomic(x.text):
                local = self.fresh("c")
                self.emit(indent, f"{local} = {_strip(x.text)}", src)
                x = _E(local, int=x.int, nonneg=x.nonneg, name=True, shape=x.shape,
                       dtype=x.dtype, sources=x.sources | x.reads)
            if isinstance(a, jax_core.Var):
                bound[a] = x
            return x

        def scalar(x):
            """An index of a view: a Python int, or an integer outer value (a leaf)."""
            if isinstance(x, (int, np.integer)):
                return int(x)
            c = closure(leaf[x]) if isinstance(x, str) and x in leaf else None
            if not isinstance(c, _E) or not c.int:
                no("on a ref view whose index is not an integer scalar")
            return c

        staged: list[str] = []
        # per staged ref: per dim of the operand, None (a dim the view keeps) or its index:
        # ("at", i) for x.at[i], ("ds", start, size) for x.at[pl.ds(start, size)]
        layouts: list = []
        for k, v in enumerate(views):
            role = "in" if k < gm.num_inputs else "out"
            base, idx = v, None
            if type(v).__name__ == "TransformedRef":
                base, transforms = v.ref, tuple(v.transforms)
                if len(transforms) != 1 or type(transforms[0]).__name__ != "NDIndexer" or \
                        tuple(getattr(transforms[0], "int_indexer_shape", ()) or ()) != ():
                    no("on a ref with transforms other than one .at[...] of ints and pl.ds")
                idx = transforms[0].indices
            r = read(leaf[base]) if isinstance(base, str) and base in leaf else None
            if not isinstance(r, _Ref) or self.any_operands.get(r.name) != role or \
                    r.name in staged:
                no("on a ref that is not a memory_space=ANY operand of the kernel's "
                   f"{'inputs' if role == 'in' else 'outputs'}, staged once,")
            staged.append(r.name)
            if idx is None:
                layouts.append([None] * len(r.shape))
                continue
            lay = []
            for d in idx:
                if type(d).__name__ == "Slice":
                    if int(getattr(d, "stride", 1) or 1) != 1:
                        no("on a strided ref view")
                    st = scalar(d.start)
                    lay.append(None if st == 0 and int(d.size) == r.shape[len(lay)]
                               else ("ds", st, int(d.size)))
                else:
                    lay.append(("at", scalar(d)))
            layouts.append(lay + [None] * (len(r.shape) - len(lay)))

        im = [closure(a) for a in e.invars[:n_im]]
        consts = [closure(a) for a in e.invars[n_im:n_im + n_body]]
        touched = frozenset(c.name for c in consts if isinstance(c, _Ref))
        gnames = _GRID_NAMES[:len(grid)]
        specs = []
        at = 0
        for k, (bm, nm, lay) in enumerate(zip(gm.block_mappings, staged, layouts)):
            mine, at = im[at:at + counts[k]], at + counts[k]
            if any(not isinstance(c, _E) or not c.int for c in mine):
                no(f"whose index map for '{nm}' closes over a value that is not an integer")
            vdims = _block_dims(bm, nm, _fmt_loc(src), self.kernel)
            # (a pl.Element dim of the operand itself is the .pk's; one of a view would
            # need its offset folded in, and pl.BoundedSlice has no nested form)
            kept = [d for d in lay if d is None or d[0] != "at"]  # the view's dims, as vdims
            if any(d.startswith("BoundedSlice") or (d.startswith("Element") and v is not None)
                   for d, v in zip(vdims, kept)):
                no(f"with a pl.BoundedSlice block dim, or a pl.Element one on a view, for '{nm}'")
            try:
                vidx = _index_map_parts(bm, gnames, f"'{nm}'", _fmt_loc(src), consts=mine)
            except UnsupportedError as err:
                no(f"whose index map for '{nm}' has no .pk form ({err.message})")
            # The view's BlockSpec as one of the whole operand: an x.at[i] dim squeezed at i,
            # a pl.ds(start, n) dim offset by start (in elements: pl.Element, unless start
            # is a multiple of the block known at export).
            # (a view's blocks past its end: known at export where the index map closes over
            # nothing; such a block is written as block -1, an index-out-of-bounds)
            ranges = _index_ranges(bm, grid) if not counts[k] else None
            dims, idxs, it = [], [], iter(enumerate(zip(vdims, vidx)))
            for d in lay:
                if d is not None and d[0] == "at":
                    dims.append("None")
                    idxs.append(_strip(d[1].text) if isinstance(d[1], _E) else str(d[1]))
                    continue
                vd, (b, ix) = next(it)
                if d is None:
                    dims.append(b)
                    idxs.append(ix)
                    continue
                st, n = d[1], d[2]
                stt = _strip(st.text) if isinstance(st, _E) else str(st)
                if b != "None" and n % int(b):
                    no(f"on a view of '{nm}' of {n} elements in a dim its blocks of {b} "
                       "do not divide")
                blocks = n if b == "None" else n // int(b)
                past = ranges is not None and (ranges[vd][0] < 0 or ranges[vd][1] >= blocks)
                if b == "None":
                    dims.append("None")
                    real, out = f"{stt} + {ix}", "-1"
                elif isinstance(st, int) and st % int(b) == 0:
                    dims.append(b)
                    real, out = (f"{st // int(b)} + {ix}" if st else ix), "-1"
                else:
                    dims.append(f"Element({b})")
                    real, out = f"{stt} + ({ix}) * {b}", f"-{b}"
                idxs.append(f"where(({ix} >= 0) and ({ix} < {blocks}), {real}, {out})"
                            if past else real)
            role = "in" if k < gm.num_inputs else "out"
            specs.append((f"{role:<3} {nm}: block={_tuple(dims)}  index={_tuple(gnames)} -> "
                          f"{_tuple(idxs)}{_buffered(bm)}", _index_map_site(bm) or src))
        start = len(self.lines)
        self.emit(indent, f"emit_pipeline(grid={_tuple(str(int(g)) for g in grid)}):", src)
        for text, site in specs:
            self.emit(indent + 1, text, site)
        self.emit(indent + 1, "body:", src)
        benv = dict(zip(body.constvars, consts))
        for v, nm in zip(body.invars, staged):
            inner = getattr(v.aval, "inner_aval", v.aval)
            benv[v] = _Ref(nm, tuple(int(d) for d in inner.shape))
        mark = len(self.lines)
        saved = self.user_axes
        self.user_axes = []  # the inner grid's axes, as the body names them
        try:
            self.run(body, benv, indent + 2)
            self.flush(indent + 2)
        finally:
            self.user_axes = saved
        if self.no_statements(mark):
            self.emit(indent + 2, f"{self.fresh('v')} = 0", src)
        self.pipeline = (frozenset(staged), start, len(self.lines), touched)
        return []

    def sync_copy(self, e, read, indent, src) -> bool:
        """`pltpu.sync_copy(src, dst)`: a run_scoped that allocates one DMA semaphore and
        only starts and waits one copy on it. False (nothing emitted) for any other."""
        sub = e.params.get("jaxpr")
        inner = _inner(sub) if sub is not None else None
        if inner is None or len(inner.invars) != 1 or _array_consts(sub) or \
                [q.primitive.name for q in inner.eqns] != ["dma_start", "dma_wait"]:
            return False
        sem = inner.invars[0]
        aval = getattr(sem.aval, "inner_aval", sem.aval)
        if "dma" not in str(getattr(aval, "dtype", "")).lower() or tuple(aval.shape) != ():
            return False
        senv = {sem: _Ref("<sync_copy semaphore>", ())}
        for v, a in zip(inner.constvars, e.invars):
            senv[v] = read(a)

        def sread(a):
            return read(a) if isinstance(a, jax_core.Literal) else senv[a]

        start, wait = inner.eqns
        if any(isinstance(a, jax_core.Var) and a not in senv for q in inner.eqns
               for a in q.invars):
            return False
        texts, refs = self.dma_texts(start, sread)
        for r in refs:
            self.flush(indent, r)
        self.emit(indent, f"sync_copy({texts[0]}, {texts[1]})", src)
        return True

    def dma_texts(self, e, read):
        """The .pk texts of a dma_start/dma_wait's source, destination and semaphore, and the
        names of the source and destination refs."""
        name = e.primitive.name
        vals = [read(a) for a in e.invars]
        tree = e.params.get("tree")
        if tree is None:
            self.fail(f"'{name}' without its operand tree has no .pk form", e)
        args = tree_util.tree_unflatten(tree, vals)
        if len(args) < 3 or any(a is not None for a in args[3:]):
            self.fail(f"a remote or two-semaphore copy ('{name}' with a source semaphore or a "
                      "device id) has no .pk form", e)
        texts = []
        for what, tr in zip(("source", "destination", "semaphore"), args[:3]):
            ref = getattr(tr, "ref", tr)
            transforms = tuple(getattr(tr, "transforms", ()) or ())
            if not isinstance(ref, _Ref):
                self.fail(f"the {what} of '{name}' is not a kernel ref", e)
            sub = self.subscript_of(ref, e, transforms, read)
            if what == "semaphore" and sub == "[...]" and ref.shape == ():
                sub = ""
            texts.append(ref.name + sub)
        if name == "dma_start" and e.params.get("add"):
            self.fail("an accumulating copy (make_async_copy(..., add=True)) has no .pk form", e)
        return texts, [getattr(a, "ref", a).name for a in args[:2]]

    def dma(self, e, read, indent, src):
        """`pltpu.make_async_copy(src, dst, sem).start()` / `.wait()` as `async_copy`."""
        name = e.primitive.name
        texts, refs = self.dma_texts(e, read)
        for r in refs:
            self.flush(indent, r)  # a copy reads its source and writes its destination
        if name == "dma_wait":
            # A wait may complete a copy into any buffer (one semaphore for several copies,
            # or a descriptor naming another buffer): no read moves past it.
            self.flush(indent)
        op = "start" if name == "dma_start" else "wait"
        self.emit(indent, f"async_copy({texts[0]}, {texts[1]}, {texts[2]}).{op}()", src)
        return []

    def semaphore(self, e, read, indent, src):
        """`pl.semaphore_signal(sem, n)` / `pl.semaphore_wait(sem, n)` on a local semaphore."""
        name = e.primitive.name
        tree = e.params.get("args_tree")
        if tree is None:
            self.fail(f"'{name}' without its operand tree has no .pk form", e)
        args = list(tree_util.tree_unflatten(tree, [read(a) for a in e.invars]))
        ref, transforms, value, rest = args[0], tuple(args[1] or ()), args[2], args[3:]
        if name == "semaphore_signal" and any(a is not None for a in rest):
            self.fail("a remote semaphore_signal (with a device id or core index) has no .pk "
                      "form", e)
        if name == "semaphore_wait" and rest and not (isinstance(rest[0], _E)
                                                      and rest[0].text == "1"):
            self.fail("a semaphore_wait that does not decrement has no .pk form", e)
        if not isinstance(ref, _Ref):
            self.fail(f"the semaphore of '{name}' is not a kernel ref", e)
        sub = self.subscript_of(ref, e, transforms, read)
        if sub == "[...]" and ref.shape == ():
            sub = ""
        count = self.int_of(value, e, f"the count of '{name}'")
        self.flush(indent)  # no read moves past a wait (or the signal that answers one)
        self.emit(indent, f"{name}({ref.name}{sub}, {_strip(count.text)})", src)
        return []

    def opaque_multi(self, e, ins, indent, src):
        """An op with several results (or none): one opaque value per result, each reading
        every operand, which is bound to a local first so that it is read once."""
        name = e.primitive.name
        for a in ins:
            if isinstance(a, _Ref):
                self.fail(f"'{name}' takes the ref '{a.name}' itself, which has no .pk form", e)
        if not e.outvars:
            self.fail(f"'{name}' has no result and no .pk form (an opaque op needs a result)", e)
        for a in ins:
            if not a.name and not a.int and not _atomic(a.text):
                a.pending = True
                self.bind(indent, a)
        return [self.opaque_op(e, ins, v.aval, src) for v in e.outvars]

    def tensor(self, e, ins, src) -> _E:
        r = self._tensor(e, ins, src)
        aff = _affine(e, ins)
        if aff is not None and isinstance(r, _E):
            r.affine = aff
        return r

    def _tensor(self, e, ins, src) -> _E:
        name = e.primitive.name
        p = e.params
        aval = e.outvars[0].aval
        reads = frozenset().union(*[a.reads for a in ins if isinstance(a, _E)]) if ins else frozenset()
        sources = frozenset().union(*[a.sources for a in ins if isinstance(a, _E)]) if ins \
            else frozenset()
        for a in ins:
            if isinstance(a, _Ref):
                if name.startswith("atomic"):
                    self.fail(f"an atomic read-modify-write ('{name}': plgpu.atomic_add, "
                              f"atomic_max, atomic_cas, ...) of '{a.name}' has no .pk form: programs "
                              "that add into one element at once are not modelled (accumulate "
                              "per program, or split K into a grid axis with a reduction after)",
                              e)
                self.fail(f"'{name}' takes the ref '{a.name}' itself, which has no .pk form", e)

        def mk(text, **kw):
            return _E(text, reads=reads, src=src, shape=aval.shape, dtype=aval.dtype,
                      sources=reads | sources, **kw)

        t = [a.text for a in ins]
        if _float_remainder(e, ins):
            # jnp.remainder of floats: lax.rem (fmod), plus the divisor where the signs differ
            # and the remainder is not 0: .pk's `%` of floats, computed the same way.
            return mk(f"({t[0]} % {t[1]})")
        binops = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
                  "eq": "==", "ne": "!="}
        if name in binops:
            r = mk(f"({t[0]} {binops[name]} {t[1]})")
            if name == "add":
                for a, b in ((ins[0], ins[1]), (ins[1], ins[0])):
                    if a.load is not None and getattr(a, "pending_consumed", False):
                        r.acc = (a.load[0], a.load[1], b)
                        break
            return r
        if name in ("div", "rem") and np.issubdtype(aval.dtype, np.integer):
            # lax.div truncates towards zero and lax.rem takes the dividend's sign, where
            # .pk's // and % floor: the same where-forms as for integer scalars (_int_binary).
            a, b = t[0], t[1]
            off = _truncated(a, b, "&")
            if name == "div":
                q = f"where({off}, ({a} // {b}) + 1, {a} // {b})"
            else:
                q = f"where({off}, ({a} % {b}) - {b}, {a} % {b})"
            try:
                nonzero = int(_strip(b)) != 0  # a literal divisor
            except ValueError:
                nonzero = False
            # By zero, XLA's: x / 0 is -1 (all ones), x rem 0 is x.
            return mk(q if nonzero else f"where({b} == 0, {'-1' if name == 'div' else a}, {q})")
        if name == "div":
            # (jax.dtypes: numpy's issubdtype does not count bfloat16 as floating)
            if not jax.dtypes.issubdtype(aval.dtype, jax.numpy.floating):
                return self.opaque_op(e, ins, aval, src)  # no exact .pk form
            return mk(f"({t[0]} / {t[1]})")
        if name in ("and", "or"):
            return mk(f"({t[0]} {'&' if name == 'and' else '|'} {t[1]})")
        if name == "xor":
            # (a | b) & ~(a & b): bitwise on integers, logical on bool, as lax.xor.
            return mk(f"(({t[0]} | {t[1]}) & ~({t[0]} & {t[1]}))")
        if name == "not":
            return mk(f"(~{t[0]})")
        if name in ("max", "min"):
            return mk(f"{name}imum({t[0]}, {t[1]})")
        if name == "pow":
            return mk(f"pow({t[0]}, {t[1]})")
        if name == "integer_pow":
            return mk(f"({t[0]} ** {int(p['y'])})")
        if name == "square":
            return mk(f"({t[0]} ** 2)")
        if name == "neg":
            return mk(f"(-{t[0]})")
        if name in _UNARY:
            return mk(f"{_UNARY[name]}({_strip(t[0])})")
        if name == "reciprocal" and jax.dtypes.issubdtype(aval.dtype, jax.numpy.floating):
            # pl.reciprocal: 1 / x; approx=True as interpret mode computes it, of x
            # rounded to bf16 (a TPU's approximation differs in the last bits).
            if p.get("approx") and np.dtype(aval.dtype).name != "bfloat16":
                dt = _dtype(aval.dtype, "a reciprocal", _fmt_loc(src))
                return mk(f"1.0 / cast(cast({_strip(t[0])}, bf16), {dt})")
            return mk(f"1.0 / {t[0]}")
        if name == "round" and _round_half_even(p):
            return mk(f"round({_strip(t[0])})")
        if name == "clamp":
            return mk(f"minimum(maximum({t[1]}, {t[0]}), {t[2]})")
        if name in ("copy", "copy_p", "optimization_barrier", "stop_gradient") + _HINTS:
            return ins[0]  # (stop_gradient: jax.nn.softmax's max; the identity on values)
        if name == "select_n":
            if len(ins) != 3:
                return self.opaque_op(e, ins, aval, src)  # no exact .pk form
            pred = t[0] if e.invars[0].aval.dtype == np.bool_ else f"({t[0]} != 0)"
            return mk(f"where({_strip(pred)}, {_strip(t[2])}, {_strip(t[1])})")
        if name == "convert_element_type":
            src_dt = e.invars[0].aval.dtype
            if np.dtype(src_dt) == np.dtype(p["new_dtype"]) and not ins[0].int:
                return ins[0]
            return mk(f"cast({_strip(t[0])}, {_dtype(p['new_dtype'], 'a cast', _fmt_loc(src))})")
        if name == "iota":
            dt = _dtype(p["dtype"], "an iota", _fmt_loc(src))
            base = f"iota({_tuple(str(int(d)) for d in p['shape'])}, {int(p['dimension'])}"
            if dt == "i32":
                return mk(base + ")")
            if dt in ("i16", "i8", "u8"):
                return mk(base + f", dtype={dt})")
            return mk(f"cast({base}), {dt})")
        if name == "broadcast_in_dim":
            shape = tuple(int(d) for d in p["shape"])
            dims = tuple(p["broadcast_dimensions"])
            src_shape = tuple(e.invars[0].aval.shape)
            x = _strip(t[0])
            if src_shape == ():
                text = f"broadcast_to({x}, {_tuple(str(d) for d in shape)})"
                if isinstance(e.invars[0], jax_core.Literal):
                    dt = _dtype(aval.dtype, "a constant", _fmt_loc(src))
                    if dt not in ("f32", "i32"):
                        text = f"cast({text}, {dt})"
                return mk(text, splat=ins[0] if isinstance(ins[0], _E) and ins[0].int else None)
            if list(dims) != sorted(dims):
                return self.opaque_op(e, ins, aval, src)  # no exact .pk form
            inter = tuple(src_shape[dims.index(d)] if d in dims else 1 for d in range(len(shape)))
            text = x
            if inter != src_shape:
                text = f"reshape({text}, {_tuple(str(d) for d in inter)})"
            if inter != shape:
                text = f"broadcast_to({text}, {_tuple(str(d) for d in shape)})"
            return mk(text)
        if name in ("reshape", "squeeze", "expand_dims"):
            if tuple(e.invars[0].aval.shape) == tuple(aval.shape):
                return ins[0]
            return mk(f"reshape({_strip(t[0])}, {_tuple(str(int(d)) for d in aval.shape)})")
        if name == "broadcast_to":  # jnp.broadcast_to's primitive: numpy's rule, as .pk's
            if tuple(e.invars[0].aval.shape) == tuple(aval.shape):
                return ins[0]
            scalar = tuple(e.invars[0].aval.shape) == () and isinstance(ins[0], _E) and ins[0].int
            return mk(f"broadcast_to({_strip(t[0])}, {_tuple(str(int(d)) for d in aval.shape)})",
                      splat=ins[0] if scalar else None)
        if name == "tile":  # jnp.tile: the same reps, the same leading-1 padding
            if all(int(r) == 1 for r in p["reps"]) and \
                    tuple(e.invars[0].aval.shape) == tuple(aval.shape):
                return ins[0]
            return mk(f"tile({_strip(t[0])}, {_tuple(str(int(r)) for r in p['reps'])})")
        if name == "concatenate":
            return mk(f"concatenate({', '.join(_strip(x) for x in t)}, axis={int(p['dimension'])})")
        if name == "stack":  # jnp.stack: each operand with a unit dim at the axis, joined
            ax = int(p["axis"])
            parts = []
            for a, v in zip(t, e.invars):
                shape = list(v.aval.shape)
                shape.insert(ax, 1)
                parts.append(f"reshape({_strip(a)}, {_tuple(str(int(d)) for d in shape)})")
            return mk(f"concatenate({', '.join(parts)}, axis={ax})")
        if name == "rev":  # jnp.flip: one flip per dimension
            text = _strip(t[0])
            for d in p["dimensions"]:
                text = f"flip({text}, axis={int(d)})"
            return mk(text)
        if name in ("argmax", "argmin") and len(p["axes"]) == 1 and \
                np.dtype(p["index_dtype"]) == np.int32:
            return mk(f"{name}({_strip(t[0])}, axis={int(p['axes'][0])})")
        if name in ("cumsum", "cummax", "cummin"):
            rev = ", reverse=True" if p.get("reverse") else ""
            return mk(f"{name}({_strip(t[0])}, axis={int(p['axis'])}{rev})")
        if name in ("shift_left", "shift_right_logical", "shift_right_arithmetic"):
            return mk(f"{name}({_strip(t[0])}, {_strip(t[1])})")
        if name == "roll" and len(ins) == 2 and isinstance(ins[1], _E) and ins[1].int:
            # pltpu.roll: jnp.roll's direction; with a stride, each row along stride_axis
            # rolled by shift + row * stride
            stride = "" if p.get("stride") is None else \
                f", stride={int(p['stride'])}, stride_axis={int(p['stride_axis'])}"
            return mk(f"roll({_strip(t[0])}, {_strip(t[1])}, axis={int(p['axis'])}{stride})")
        if name == "transpose":
            perm = tuple(p["permutation"])
            if perm == tuple(range(len(perm))):
                return ins[0]
            if perm != tuple(reversed(range(len(perm)))):
                return self.opaque_op(e, ins, aval, src)  # no exact .pk form
            return mk(f"transpose({_strip(t[0])})")
        if name in ("reduce_or", "reduce_and") and np.dtype(e.invars[0].aval.dtype) == np.bool_:
            # jnp.any / jnp.all: the max / min of the mask as 0 and 1, then > 0.
            fn = "max" if name == "reduce_or" else "min"
            return mk(f"({_reduced(fn, f'cast({_strip(t[0])}, i32)', e, p)} > 0)")
        if name == "is_finite":
            # jnp.isfinite: |x| < inf is false for inf and for NaN, as isfinite is.
            return mk(f"(abs({_strip(t[0])}) < inf)")
        if name in ("reduce_sum", "reduce_max", "reduce_min"):
            return mk(_reduced(name[len("reduce_"):], _strip(t[0]), e, p))
        if name == "dot_general":
            (lc, rc), (lb, rb) = p["dimension_numbers"]
            ra, rb_ = len(e.invars[0].aval.shape), len(e.invars[1].aval.shape)
            pet = _dtype(aval.dtype, 'a dot', _fmt_loc(src))
            if lb or rb or ra > 2 or rb_ > 2 or len(lc) != 1 or len(rc) != 1:
                # Batched or higher-rank contractions: .pk's dot_general, with the same
                # dimension numbers (result: batch, lhs free, rhs free dims).
                def dims(ds):
                    ds = [str(int(d)) for d in ds]
                    return f"({ds[0]},)" if len(ds) == 1 else "(" + ", ".join(ds) + ")"
                batch = f", batch=({dims(lb)}, {dims(rb)})" if (lb or rb) else ""
                return mk(f"dot_general({_strip(t[0])}, {_strip(t[1])}, "
                          f"contract=({dims(lc)}, {dims(rc)}){batch}, preferred_element_type={pet})")
            trans_a = ra == 2 and tuple(lc) == (0,)
            trans_b = rb_ == 2 and tuple(rc) == (1,)
            kw = ""
            if trans_a:
                kw += ", trans_a=True"
            if trans_b:
                kw += ", trans_b=True"
            kw += f", preferred_element_type={pet}"
            return mk(f"dot({_strip(t[0])}, {_strip(t[1])}{kw})")
        if name == "slice":
            starts, limits = p["start_indices"], p["limit_indices"]
            if p.get("strides") and any(s != 1 for s in p["strides"]):
                return self.opaque_op(e, ins, aval, src)  # no exact .pk form
            base = ins[0]
            if not base.name and not _atomic(base.text):
                base.pending = True  # subscripts apply to a name: bind the value first
                self.bind(self._indent, base)
            shape = e.invars[0].aval.shape
            parts = [":" if (a == 0 and b == shape[d]) else f"{a}:{b}"
                     for d, (a, b) in enumerate(zip(starts, limits))]
            return mk(f"{base.text}[{', '.join(parts)}]")
        return self.opaque_op(e, ins, aval, src)

    def opaque_op(self, e, ins, aval, src) -> _E:
        """An op with no `.pk` function: its result reads all its operands, values unknown."""
        name = e.primitive.name
        op = re.sub(r"\W", "_", name)
        op = op if op and not op[0].isdigit() else f"op_{op}"
        dt = _dtype(aval.dtype, f"the result of '{name}'", _fmt_loc(src))
        args = "".join(f"{_strip(a.text)}, " for a in ins)
        shape = _tuple(str(int(d)) for d in aval.shape)
        self.opaque.append((name, op, src))
        reads = frozenset().union(*[a.reads for a in ins]) if ins else frozenset()
        return _E(f"opaque({args}op={op}, shape={shape}, dtype={dt})", reads=reads, src=src,
                  shape=aval.shape, dtype=aval.dtype)

    # Control flow -------------------------------------------------------------------------

    def cond(self, e, read, env, indent, src):
        """`pl.when`, `lax.cond` and `lax.switch` as one `when` per branch. Results are locals
        bound before the branches (to a zero of their type, which no path keeps: exactly one
        branch runs) and rebound at the end of each branch."""
        branches = e.params["branches"]
        ins = [read(a) for a in e.invars]
        pred = self.int_of(ins[0], e, "a condition" if len(branches) == 2 else "a switch index")
        self.flush(indent)
        results = [v for v in e.outvars if not isinstance(v, jax_core.DropVar)]
        names = []
        for v in e.outvars:
            if isinstance(v, jax_core.DropVar):
                names.append(None)
                continue
            n = self.fresh("c")
            self.emit(indent, f"{n} = {self.zero_of(v.aval, e)}", src)
            names.append(n)
        if len(branches) == 2:
            conds = [f"not {pred.text}", _strip(pred.text)]
        else:  # the index is clamped to [0, n) by lax.switch before the cond
            if not pred.name and not _atomic(pred.text):
                k = self.fresh("v")
                self.emit(indent, f"{k} = {_strip(pred.text)}", src)
                pred = _E(k, int=True, name=True)
            conds = [f"{pred.text} == {bi}" for bi in range(len(branches))]
        order = [1, 0] if len(branches) == 2 else list(range(len(branches)))
        for bi in order:
            b = _inner(branches[bi])
            if not b.eqns and not results:
                continue
            benv = {}
            for v, c in zip(b.constvars, _consts(branches[bi])):
                t, is_int, nn = _literal_text(c)
                benv[v] = _E(t, int=is_int, nonneg=nn)
            for v, a in zip(b.invars, ins[1:]):
                benv[v] = a
            self.emit(indent, f"when {conds[bi]}:", src)
            mark = len(self.lines)
            self._indent = indent + 1
            outs = self.run(b, benv, indent + 1)
            for n, o in zip(names, outs):  # no store follows: a pending result reads here
                if n is None:
                    continue
                if isinstance(o, _Ref):
                    self.fail("a lax.cond that returns a ref has no .pk form", e)
                if o.pending:
                    o.pending = False
                    if o in self.pending:
                        self.pending.remove(o)
                self.emit(indent + 1, f"{n} = {_strip(o.text)}", o.src or src)
            self.flush(indent + 1)
            self._indent = indent
            if len(self.lines) == mark:
                self.lines.pop()
            elif self.no_statements(mark):  # only dropped ops: a `when` needs a statement
                self.emit(indent + 1, f"{self.fresh('v')} = 0", src)
        return [None if n is None else
                _E(n, int=_is_int_aval(v.aval), name=True, shape=tuple(v.aval.shape),
                   dtype=v.aval.dtype)
                for n, v in zip(names, e.outvars)]

    def zero_of(self, aval, e) -> str:
        """A `.pk` zero of exactly aval's shape and dtype."""
        dt = _dtype(aval.dtype, "a lax.cond result", _fmt_loc(_frame(e.source_info)))
        shape = tuple(int(d) for d in aval.shape)
        if not shape:
            return "0" if _is_int_aval(aval) else f"cast(0, {dt})"
        return f"cast(broadcast_to(0, {_tuple(str(d) for d in shape)}), {dt})"

    def _loop(self, e, indent, src, lo: _E | None, hi_text: str | None, consts, carries,
              body_closed, index_pos: int | None, header: Callable | None = None):
        """Emits `for t in range(lo, hi)` with carried locals; returns the carry outputs.

        With `header`, a function of the carries' local names that returns the loop's first
        line (`while COND, bound=N:`), that line instead of the `for` (no loop variable)."""
        body = _inner(body_closed)
        self.flush(indent)
        t = self.fresh("t") if header is None else None
        names = []
        for k, c in enumerate(carries):
            if k == index_pos:
                names.append(None)
                continue
            n = self.fresh("c")
            self.emit(indent, f"{n} = {_strip(c.text)}", src)
            names.append(n)
        if header is None:
            lo_text = _strip(lo.text)
            rng = f"range({hi_text})" if lo_text == "0" else f"range({lo_text}, {hi_text})"
            hi_bound = _int_bounds(_strip(hi_text), self.upper)[1]
            if hi_bound is not None:
                self.upper[t] = hi_bound - 1
            self.emit(indent, f"for {t} in {rng}:", src)
        else:
            head = header(names)
            self.emit(indent, head, src)
        benv = {}
        for v, c in zip(body.constvars, _consts(body_closed)):
            tx, is_int, nn = _literal_text(c)
            benv[v] = _E(tx, int=is_int, nonneg=nn)
        nconst = len(consts)
        for v, a in zip(body.invars[:nconst], consts):
            benv[v] = a
        for k, v in enumerate(body.invars[nconst:nconst + len(carries)]):
            if k == index_pos:
                benv[v] = _E(t, int=True, nonneg=lo.nonneg, name=True)
            else:
                benv[v] = _E(names[k], int=_is_int_aval(v.aval), name=True,
                             shape=v.aval.shape, dtype=v.aval.dtype)
        mark = len(self.lines)
        self._indent = indent + 1
        outs = self.run(body, benv, indent + 1)
        updates = [(names[k], o) for k, o in enumerate(outs[:len(carries)])
                   if k != index_pos and o.text != names[k]]
        if header is not None:
            in_cond = set(re.findall(r"[A-Za-z_]\w*", head.split(", bound=")[0]))
            for n, o in updates:
                if n in in_cond and not o.int:
                    self.fail("the condition of a lax.while_loop reads a carry that the body "
                              "computes from array data (a value loaded from a block, a scratch "
                              "or an SMEM ref), which has no .pk form (a `while` condition may "
                              "use the loop's integer carries, scalar prefetch reads, "
                              "program_id and constants)", e)
        # A `while` rebinds its carries in order, each `c = value` with the value inline,
        # unless a value reads a carry that an earlier update rebinds (then, as a `for` always
        # does with several carries, through fresh locals): the rules follow a tensor carry
        # copied through a local (`v = c + x[...]`, `c = v`) in a while by terms that double
        # with each iteration, and a direct rebinding by one term per iteration.
        rebound: set = set()
        clash = header is None and len(updates) > 1
        for n, o in updates:
            clash = clash or bool(rebound & set(re.findall(r"[A-Za-z_]\w*", o.text)))
            rebound.add(n)
        held = [o for _, o in updates
                if header is not None and not clash and o.pending and o in self.pending]
        for o in held:  # read where the update is, which is where the flush would bind it
            self.pending.remove(o)
            o.pending = False
        self.flush(indent + 1)
        if clash:
            tmp = []
            for n, o in updates:
                if o.name or _atomic(o.text):
                    tmp.append((n, o.text))
                else:
                    o.pending = True
                    o.src = o.src or src
                    self.bind(indent + 1, o)
                    tmp.append((n, o.text))
            # a later update may read an earlier carry: go through fresh locals
            staged = []
            for n, tx in tmp:
                if tx in dict(tmp):
                    s = self.fresh("v")
                    self.emit(indent + 1, f"{s} = {tx}", src)
                    staged.append((n, s))
                else:
                    staged.append((n, tx))
            for n, tx in staged:
                self.emit(indent + 1, f"{n} = {tx}", src)
        else:
            for n, o in updates:
                if o.pending:  # inlined here: no later flush binds it again
                    o.pending = False
                    if o in self.pending:
                        self.pending.remove(o)
                self.emit(indent + 1, f"{n} = {_strip(o.text)}",
                          (o.src or src) if header is not None else src)
        self._indent = indent
        if self.no_statements(mark):  # a loop body needs a statement
            self.emit(indent + 1, f"{self.fresh('v')} = 0", src)
        res = []
        for k, c in enumerate(carries):
            if k == index_pos:
                res.append(_E(f"({lo.text} + {hi_text} - {lo.text})", int=True))
            else:
                aval = e.outvars[k].aval if k < len(e.outvars) else None
                res.append(_E(names[k], int=aval is not None and _is_int_aval(aval), name=True,
                              shape=tuple(getattr(aval, "shape", ())),
                              dtype=getattr(aval, "dtype", None)))
        return res

    def scan(self, e, read, env, indent, src):
        p = e.params
        (nc, ncarry), length = scan_counts(p), int(p["length"])
        ins = [read(a) for a in e.invars]
        if len(ins) != nc + ncarry:
            self.fail("lax.scan over arrays (xs) has no .pk form (fori_loop and pl.loop have)", e)
        if p.get("reverse"):
            self.fail("a reversed scan has no .pk form", e)
        body = _inner(p["jaxpr"])
        consts, carries = ins[:nc], ins[nc:]
        index_pos = None
        if carries and carries[0].int:
            iv = body.invars[nc]
            out0 = body.outvars[0]
            for q in body.eqns:
                if q.outvars and q.outvars[0] is out0 and q.primitive.name == "add" and \
                        iv in q.invars and any(isinstance(a, jax_core.Literal) and int(a.val) == 1
                                               for a in q.invars):
                    index_pos = 0
        if index_pos is None:
            lo = _E("0", int=True, nonneg=True)
            hi = str(length)
        else:
            lo = carries[0]
            hi = str(length) if lo.text == "0" else f"{_strip(lo.text)} + {length}"
        outs = self._loop(e, indent, src, lo, hi, consts, carries, p["jaxpr"], index_pos)
        return outs + [None] * (len(e.outvars) - len(outs))

    def while_loop(self, e, read, env, indent, src):
        p = e.params
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        ins = [read(a) for a in e.invars]
        bconsts, carries = ins[cn:cn + bn], ins[cn + bn:]  # the cond's consts: only `lt`
        cj = _inner(p["cond_jaxpr"])
        bj = _inner(p["body_jaxpr"])
        # fori_loop with bounds known only at run time: carries (i, upper, *rest), i < upper.
        ok = (len(carries) >= 2 and carries[0].int and carries[1].int and len(cj.eqns) == 1
              and cj.eqns[0].primitive.name == "lt"
              and list(cj.eqns[0].invars) == [cj.invars[cn], cj.invars[cn + 1]]
              and bj.outvars[1] is bj.invars[bn + 1])
        if ok:
            out0 = bj.outvars[0]
            ok = any(q.outvars and q.outvars[0] is out0 and q.primitive.name == "add"
                     and bj.invars[bn] in q.invars for q in bj.eqns)
        if not ok:
            return self.bounded_while(e, ins, indent, src)
        hi_text = _strip(carries[1].text)
        body_carries = [carries[0], carries[1]] + carries[2:]
        outs = self._loop(e, indent, src, carries[0], hi_text, bconsts, body_carries,
                          p["body_jaxpr"], 0)
        return outs

    def bounded_while(self, e, ins, indent, src):
        """A `lax.while_loop` that is not a counted fori_loop: `while COND, bound=N:`, its
        carries as locals bound before the loop and rebound at the end of each iteration (as
        a `for` carries them), COND the cond_jaxpr as an integer expression of those locals,
        the prefetch refs, program_id and constants, N the export's `while_bound`. `.pk` reads
        it as N iterations each under `when COND:`, exact for every run of at most N
        iterations; where COND can still hold after N, `check` says unknown and `run` stops."""
        p = e.params
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cconsts, bconsts, carries = ins[:cn], ins[cn:cn + bn], ins[cn + bn:]
        for c in carries:
            if not isinstance(c, _E):
                self.fail("a lax.while_loop that carries a ref has no .pk form", e)
        for v in e.outvars:
            _dtype(v.aval.dtype, "a lax.while_loop carry", _fmt_loc(_frame(e.source_info)))
        cond_closed = p["cond_jaxpr"]
        cj = _inner(cond_closed)

        def header(names):
            cenv = {}
            for v, c in zip(cj.constvars, _consts(cond_closed)):
                tx, is_int, nn = _literal_text(c)
                cenv[v] = _E(tx, int=is_int, nonneg=nn)
            for v, a in zip(cj.invars[:cn], cconsts):
                cenv[v] = a
            for v, n, c in zip(cj.invars[cn:], names, carries):
                cenv[v] = _E(n, int=_is_int_aval(v.aval), name=True, nonneg=False,
                             shape=tuple(v.aval.shape), dtype=v.aval.dtype)
            mark = len(self.lines)
            self.in_while_cond += 1  # (one expression: no local can be bound in it)
            try:
                (cond,) = self.run(cj, cenv, indent)
            finally:
                self.in_while_cond -= 1
            if not isinstance(cond, _E) or not cond.int or len(self.lines) != mark:
                self.fail("the condition of a lax.while_loop that is not an integer expression "
                          "has no .pk form (a `while` condition may use the loop's integer "
                          "carries, scalar prefetch reads, program_id and constants; not values "
                          "loaded from a block, a scratch or an SMEM ref)", e)
            return f"while {_strip(cond.text)}, bound={self.while_bound}:"

        return self._loop(e, indent, src, None, None, bconsts, carries, p["body_jaxpr"], None,
                          header=header)

    _indent = 0
    while_bound = DEFAULT_WHILE_BOUND


def _round_half_even(params) -> bool:
    """lax.round's rounding_method is TO_NEAREST_EVEN (jnp.round's), which `.pk` round is."""
    m = params.get("rounding_method")
    return m is not None and ("EVEN" in str(getattr(m, "name", m)).upper() or m == 1)


def _atomic(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|\(?-?[0-9.e]+\)?|inf|\(-inf\)", text))


def _ident(name: str, taken: set) -> str:
    n = re.sub(r"[^A-Za-z0-9_]", "_", name or "") or "x"
    if n[0].isdigit():
        n = "x" + n
    if n in _RESERVED or re.fullmatch(r"[vtc][0-9]+", n) or n in _GRID_NAMES:
        n += "_"
    base, k = n, 2
    while n in taken:
        n = f"{base}{k}"
        k += 1
    taken.add(n)
    return n


#: The views Mosaic GPU puts on a ref whose BlockSpec or scratch has `transforms=`
#: (plgpu.TilingTransform, SwizzleTransform): a ref of the tiled shape, read through
#: untiling and unswizzling as the block's own elements. The export declares such refs with
#: their block's shape, so these views are the identity there.
_LAYOUT_VIEWS = ("UnswizzleRef", "UntilingTransform")


def _backend(cp, kj, gm) -> str | None:
    """Which Pallas backend a pallas_call is written for: "triton" (pltriton.CompilerParams),
    "mosaic_gpu" (plgpu.CompilerParams, or a Mosaic GPU ref: a plgpu.ACC, SMEM or GMEM scratch
    or block), "mosaic_tpu" (pltpu.CompilerParams or the old `{"mosaic": ...}` dict, or a TPU
    memory space: pltpu.VMEM, SMEM, semaphores), or None: a call that names no backend lowers
    to Mosaic TPU on a TPU and to Mosaic GPU on a GPU (the default since JAX 0.9), which the
    export cannot tell from the call."""
    if _is_triton(cp):
        return "triton"
    refs = [v.aval for v in kj.invars]
    made = [cp, *refs, *(getattr(a, "memory_space", None) for a in refs),
            *(getattr(bm.transformed_block_aval, "memory_space", None) for bm in gm.block_mappings)]
    modules = [type(x).__module__ for x in made]
    if any(m.startswith("jax._src.pallas.mosaic_gpu") for m in modules):
        return "mosaic_gpu"
    if any(m.startswith("jax._src.pallas.mosaic.") for m in modules) or \
            (isinstance(cp, dict) and "mosaic" in cp):
        return "mosaic_tpu"
    return None


def _mosaic_gpu_block(bm, nm: str, ms_name: str, loc, kernel) -> None:
    """Refuses, as Pallas' Mosaic GPU lowering does (`_check_block_mappings`), a BlockSpec it
    cannot lower: a GMEM block that is not the whole array at (0, ...), block dims other than
    Blocked and Squeezed, a pipeline_mode."""
    why = None
    if "gmem" in ms_name and not bm.has_trivial_window():
        why = "a GMEM block must be the whole array with an index map of zeros"
    elif any(type(b).__name__ not in ("Blocked", "Squeezed") and b is not None
             and not isinstance(b, (int, np.integer)) for b in bm.block_shape):
        why = "only Blocked (and squeezed) block dims are supported"
    elif getattr(bm, "pipeline_mode", None) is not None:
        why = "pipeline_mode (pl.Buffered) is not supported"
    if why:
        raise UnsupportedError(f"operand '{nm}': Pallas' Mosaic GPU lowering refuses this "
                               f"BlockSpec: {why}", loc, kernel)


def _is_triton(cp) -> bool:
    """Whether a pallas_call's compiler_params pick the Triton backend (pltriton.CompilerParams;
    without compiler_params a GPU call lowers to Mosaic GPU, the default since JAX 0.9)."""
    try:
        from jax.experimental.pallas import triton as pltriton
    except ImportError:  # a jax without the Triton backend makes no Triton calls
        return False
    return isinstance(cp, pltriton.CompilerParams)


def _semantics(cp, rank: int, loc) -> list[str] | None:
    ds = getattr(cp, "dimension_semantics", None)
    if ds is None and isinstance(cp, dict):
        ds = (cp.get("mosaic") or {}).get("dimension_semantics")
    if ds is None:
        return None
    out = []
    for s in ds:
        t = str(getattr(s, "value", s)).lower().split(".")[-1]
        if t in ("parallel", "arbitrary", "sequential"):
            out.append(t)
        elif t == "core_parallel":
            # Split across cores as a parallel axis may be: checked as one (the
            # rules assume any split, so what holds for parallel holds here).
            out.append("parallel")
        else:
            raise UnsupportedError(f"dimension semantics '{s}' has no .pk form", loc)
    return out


def _kernel_name(pc, taken: set) -> str:
    nm = pc.params.get("name")
    if not nm:
        dbg = getattr(pc.params["jaxpr"], "debug_info", None)
        src = getattr(dbg, "func_src_info", None) or ""
        nm = src.split(" at ")[0] if src else "kernel"
    nm = nm.strip("<>") or "kernel"
    if nm == "lambda":
        nm = "kernel"
    return _ident(nm, taken)


def _kernel_source(pc) -> tuple[str, int] | None:
    dbg = getattr(pc.params["jaxpr"], "debug_info", None)
    src = getattr(dbg, "func_src_info", None) or ""
    m = re.match(r".* at (.*):(\d+)$", src)
    return (m.group(1), int(m.group(2))) if m else None


def export_call(pc, taken_names: set | None = None, call_site=None, prefetch_values=None,
                prefetch: dict | None = None, while_bound: int = DEFAULT_WHILE_BOUND,
                unused: frozenset = frozenset(), grid_bounds=(), input_values=(),
                target: str | None = None) -> Kernel:
    """The `.pk` kernel of one pallas_call equation; raises UnsupportedError.

    target: the `.pk` target a TPU call is checked for (default tpu_v5e: its tiling rule is
    every TPU's, its VMEM budget the smallest), or a Mosaic GPU call (default h100); one of
    the other kind is not applied. A Triton call names none; nor does a call that names no
    backend (no compiler_params, no TPU or GPU memory space), unless `target` is a TPU.

    call_site, (file, line), stands for the pallas_call's own source info where that has none.
    while_bound is the `bound=` of each non-counted lax.while_loop in the body.
    unused: the positions of the call's results that the program drops (unused_outputs).
    grid_bounds: the values of its dynamic grid bounds (its first operands; None where not
    known at export): the grid is exported with them.
    input_values: the values of its inputs where known at export (None where not): an integer
    input's scalar reads become reads of a prefetch table of its contents (_data_tables).
    """
    while_bound = _while_bound(while_bound)
    target = _target(target)
    taken_names = taken_names if taken_names is not None else set()
    call_site = _frame(pc.source_info) or call_site
    source = _kernel_source(pc)
    name = _kernel_name(pc, taken_names)
    loc = _fmt_loc(call_site)
    try:
        return _export_call(pc, name, call_site, source, prefetch_values, prefetch or {},
                            while_bound, unused, grid_bounds, input_values, target)
    except UnsupportedError as err:
        err.kernel = err.kernel or name
        err.location = err.location or loc
        raise


def _prefetch_line(nm: str, aval, value, constraint: str | None, loc, kernel) -> str:
    """`prefetch NAME: i32[n] = [..] CONSTRAINTS` (`i32[b, n]` for rank > 1, the contents in C
    order) of one scalar prefetch operand. A 0-d operand, which `.pk` has no form for, is a
    table of one (`i32[1]`, its value the one element), its reads `s[()]` `s[0]`."""
    shape = tuple(getattr(aval, "shape", ()))
    if shape == ():
        shape = (1,)
        if value is not None:
            value = np.asarray(value).reshape(1)
    if not 1 <= len(shape) <= 4 or not np.issubdtype(aval.dtype, np.integer):
        raise UnsupportedError(f"scalar prefetch operand '{nm}' of shape {shape} and dtype "
                               f"{aval.dtype} has no .pk form (.pk prefetch arrays are integer "
                               "arrays of rank 1 to 4)", loc, kernel)
    dims = ", ".join(str(int(d)) for d in shape)
    text = f"    prefetch {nm}: {_dtype(aval.dtype, f'prefetch {nm!r}', loc)}[{dims}]"
    if value is not None:
        text += " = [" + ", ".join(str(int(v)) for v in np.asarray(value).reshape(-1)) + "]"
    elif not constraint:
        raise UnsupportedError(
            f"the contents of scalar prefetch operand '{nm}' are not known at export: they come "
            "from an argument given as a ShapeDtypeStruct (pass the array itself), or change "
            "from step to step of a loop around the call (a lax.scan or fori_loop calling it, or "
            "jax.vmap over a batched table, which Pallas runs as a loop); describe them: "
            f"prefetch={{{nm!r}: \"in [0, 8) nondecreasing\"}}", loc, kernel)
    if constraint:
        text += f" {constraint.strip()}"
    return text


#: the most elements a data table may have (a .pk prefetch array's limit: SMEM is small).
_TABLE_ELEMENTS = 65536


def _data_tables(gm, names, n_in, input_values, prefetch: dict, py_names, rank, pre_names,
                 taken, loc) -> dict:
    """The integer inputs whose scalar reads may steer the body (decode attention's
    `kv_seq_len_ref[()]` in a loop bound and a `lax.cond`): those whose contents are known at
    export, or described by prefetch= under their name, with blocks of Blocked and squeezed
    dims and at most _TABLE_ELEMENTS elements. name -> ((table name, dims), prefetch line
    text): the body reads the element at (block index * block size + local index) of a
    prefetch table of the input's contents, the same values the block holds."""
    out = {}
    pids = [f"program_id({k})" for k in range(rank)]
    for k, bm in enumerate(gm.block_mappings[:n_in]):
        nm = names[k]
        aval = bm.array_aval if hasattr(bm, "array_aval") else bm.array_shape_dtype
        if not np.issubdtype(aval.dtype, np.integer) or math.prod(aval.shape) > _TABLE_ELEMENTS:
            continue
        ms = getattr(bm.transformed_block_aval, "memory_space", None)
        if "any" in str(getattr(ms, "name", ms) or "").lower():
            continue
        value = input_values[k] if k < len(input_values) else None
        py = py_names[k] if k < len(py_names) else None
        constraint = prefetch.get(nm) or (prefetch.get(py) if py else None)
        if value is None and not constraint:
            continue
        sizes = []
        for b in bm.block_shape:
            tn = type(b).__name__
            if tn == "Squeezed" or b is None:
                sizes.append(None)
            elif tn == "Blocked":
                sizes.append(int(b.block_size))
            elif isinstance(b, (int, np.integer)):
                sizes.append(int(b))
            else:
                sizes = None
                break
        if sizes is None:
            continue
        try:
            index = _index_map_parts(bm, pids, f"'{nm}'", loc, pre_names)
        except UnsupportedError:
            continue  # the operand line reports it
        shape = tuple(int(d) for d in aval.shape)
        dims = list(zip(sizes, index))
        if shape == ():  # a scalar input: a table of one
            shape, dims = (1,), [(None, "0")]
            value = None if value is None else np.asarray(value).reshape(1)
        if len(shape) > 4:
            continue  # no .pk prefetch form: its reads stay block reads
        table = _ident(f"{nm}_values", taken)
        line = _prefetch_line(table, jax.ShapeDtypeStruct(shape, aval.dtype), value, constraint,
                              loc, None)
        out[nm] = ((table, dims), line + f"  # the contents of '{nm}', read as integers")
    return out


def _declare_tables(lines: list, tables: dict, used: set, params: list | None):
    """Declares the data tables the body read (_data_tables) as prefetch arrays after the
    kernel's own, and names them in every index map whose parameters `params` name the
    prefetch arrays (an index map takes one name per prefetch array, in declaration order)."""
    new = [(t, line) for (t, _), line in tables.values() if t in used]
    if not new:
        return
    at = max((k for k, (t, _) in enumerate(lines) if t.lstrip().startswith("prefetch ")),
             default=None)
    if at is None:
        at = next(k for k, (t, _) in enumerate(lines) if t.lstrip().startswith(("in ", "out ")))
        at -= 1
    site = lines[at][1] if at >= 0 else None
    for off, (_, line) in enumerate(new, start=1):
        lines.insert(at + off, (line, site))
    if params:  # the index maps name the kernel's own prefetch arrays: these follow them
        old = f"  index={_tuple(params)} ->"
        ext = f"  index={_tuple(params + [t for t, _ in new])} ->"
        lines[:] = [(t.replace(old, ext, 1), src) for t, src in lines]


def _front_padding(lines: list, operand_line: dict, body) -> dict:
    """(operand, dim) -> front padding for each Triton operand whose masked windows may start
    before element 0 (want_pad's low: `x_ref.at[offs - 1]`, mask `offs >= 1`), where its block
    is the whole dim and its index map gives 0 there (Pallas Triton's whole-array refs):
    that dim becomes an Element block padded in front. Elsewhere such a window stays the
    index-out-of-bounds of its block it is."""
    out = {}
    for nm, pads in body.pad.items():
        if nm not in operand_line:
            continue
        k, dims = operand_line[nm]
        text = lines[k][0]
        shape = re.search(r":\s*\w+\[([^\]]*)\]", text)
        mapped = re.search(r" -> \(([^)]*)\)", text)
        if not shape or not mapped:
            continue
        extents = [x.strip() for x in shape.group(1).split(",")]
        results = [x.strip() for x in mapped.group(1).split(",") if x.strip()]
        shown = [i for i, d in enumerate(dims) if d != "None"]
        for d, (_, _, low, _) in pads.items():
            if low <= 0 or d >= len(shown):
                continue
            i = shown[d]
            if i < len(extents) and i < len(results) and dims[i] == extents[i] and \
                    results[i] == "0":
                out[(nm, d)] = low
    return out


def _pad_for_gathers(lines: list, operand_line: dict, body, loc, kernel) -> None:
    """Pads the block of each operand that a gather window `ref.at[s + arange(n)]` reads, in
    that dim, to a multiple of n: a window may pass the array's end where its mask keeps the
    lanes out (Triton's `col_idx < n_col`), and what it reads there is the block's padding,
    which the rules follow as undefined (an unmasked lane that reaches an output is an
    uninitialized-read). A window past even the padding is an index-out-of-bounds."""
    for nm, pads in body.pad.items():
        if nm not in operand_line:
            raise UnsupportedError(f"a gather window into '{nm}' (a scratch, or in memory_space="
                                   "any) has no .pk form", loc, kernel)
        k, dims = operand_line[nm]
        if not all(d == "None" or d.isdigit() for d in dims):
            raise UnsupportedError(f"a gather window into '{nm}', whose block has Element or "
                                   "BoundedSlice dims, has no .pk form", loc, kernel)
        padded = list(dims)
        shown = [i for i, d in enumerate(dims) if d != "None"]
        for d, (n, extra, low, beyond) in sorted(pads.items()):
            size = int(dims[shown[d]])
            front = body.shift.get((nm, d), 0)
            if (size % n or extra or front or beyond) and (nm, d) in body.whole:
                raise UnsupportedError(
                    f"'{nm}' is read both through gather windows of {n} that pass its end and "
                    f"whole: no .pk form (the padded block would change the whole read)", loc,
                    kernel)
            total = max(-(-size // n) * n + extra, size + beyond)
            # Padded in front too (_front_padding): an Element dim at element offset 0 of the
            # array padded by `front` before and the rest after.
            padded[shown[d]] = (f"Element({front + total}, ({front}, {total - size}))" if front
                                else str(total))
        text, site = lines[k]
        lines[k] = (text.replace(f"block={_tuple(dims)}", f"block={_tuple(padded)}", 1), site)


def _index_ranges(bm, grid, limit: int = 1 << 16) -> list | None:
    """Per dim, the (least, greatest) block index bm's index map gives over `grid`; None
    where it closes over values not known here, the grid has more than `limit` points, or
    it cannot be evaluated (then nothing is decided)."""
    closed = bm.index_map_jaxpr
    consts = _consts(closed)
    if any(isinstance(c, jax_core.Tracer) for c in consts) or not grid or \
            math.prod(int(g) for g in grid) > limit:
        return None
    try:
        axes = np.meshgrid(*(np.arange(int(g), dtype=np.int32) for g in grid), indexing="ij")
        flat = [jax.numpy.asarray(a.reshape(-1)) for a in axes]
        outs = jax.vmap(lambda *ix: jax_core.eval_jaxpr(_inner(closed), consts, *ix))(*flat)
        return [(int(np.min(o)), int(np.max(o))) for o in outs]
    except Exception:  # noqa: BLE001 - a map this cannot evaluate: nothing decided
        return None


def _block_dims(bm, nm: str, loc, kernel) -> list[str]:
    """The `.pk` block= dims of one BlockMapping."""
    dims = []
    for b in bm.block_shape:
        tn = type(b).__name__
        if tn == "Squeezed" or b is None:
            dims.append("None")
        elif tn == "Blocked":
            dims.append(str(int(b.block_size)))
        elif isinstance(b, (int, np.integer)):
            dims.append(str(int(b)))
        elif tn == "Element":  # the index map gives an element offset into the padded dim
            lo, hi = (int(x) for x in (getattr(b, "padding", None) or (0, 0)))
            pad = f", ({lo}, {hi})" if (lo, hi) != (0, 0) else ""
            dims.append(f"Element({int(b.block_size)}{pad})")
        elif tn == "BoundedSlice":  # the index map gives ds(start, size) in this dim
            dims.append(f"BoundedSlice({int(b.block_size)})")
        else:
            raise UnsupportedError(
                f"operand '{nm}': block dim {tn} has no .pk form in this version of the "
                "export (Blocked, Element, BoundedSlice and Squeezed/None have)", loc, kernel)
    return dims


def _reduced(fn: str, text: str, e, p) -> str:
    """`fn` (sum, max or min) of the value `text` over a reduce primitive's axes: one call over
    all of them, or one per axis from the last."""
    axes = sorted((int(a) for a in p["axes"]), reverse=True)
    rank = len(e.invars[0].aval.shape)
    if len(axes) == rank and rank > 1:
        return f"{fn}({text})"
    for a in axes:
        text = f"{fn}({text}, axis={a})"
    return text


def _revisit_any(pm) -> bool:
    """Whether a pipeline_mode (pl.Buffered) has revisit=pl.RevisitMode.ANY."""
    revisit = getattr(pm, "revisit", None)
    return str(getattr(revisit, "value", revisit) or "").lower() == "any"


def _mosaic_pipeline_mode(bm, nm, loc, name):
    """Refuses what Mosaic TPU's lowering of a pallas_call's BlockSpec refuses
    (jax/_src/pallas/mosaic/lowering.py): more than 2 buffers, lookahead, and
    RevisitMode.ANY with 2 buffers."""
    pm = getattr(bm, "pipeline_mode", None)
    n = getattr(pm, "buffer_count", None) if pm is not None else None
    if n is None:
        return
    why = None
    if getattr(pm, "use_lookahead", False):
        why = "\"Lookahead is not supported for XLA pipeline emitter lowering.\""
    elif int(n) < 1 or int(n) > 2:
        why = f"\"Only single (1) and double (2) buffering are supported. Got {int(n)}.\""
    elif int(n) > 1 and _revisit_any(pm):
        why = "\"RevisitMode.ANY is not supported with double buffering.\""
    if why:
        raise UnsupportedError(
            f"operand '{nm}': pipeline_mode={pm} on a pallas_call's BlockSpec: Pallas' TPU lowering "
            f"refuses it ({why}); pltpu.emit_pipeline takes it in a kernel", loc, name)


def _buffered(bm) -> str:
    """The `  buffered=...` option of a BlockMapping's pipeline_mode (pl.Buffered), or ""."""
    pm = getattr(bm, "pipeline_mode", None)
    n = getattr(pm, "buffer_count", None) if pm is not None else None
    if n is None:
        return ""
    # pl.Buffered(..., revisit=pl.RevisitMode.ANY): a revisited block is
    # fetched again, so a non-consecutive revisit accumulates correctly.
    any_ = "  revisit=any" if _revisit_any(pm) else ""
    return (f"  buffered=({int(n)}, lookahead)" if getattr(pm, "use_lookahead", False)
            else f"  buffered={int(n)}") + any_


def _memory_space_name(aval) -> str:
    ms = getattr(aval, "memory_space", None)
    return str(getattr(ms, "name", ms) or "").lower()


def _is_semaphore(aval) -> bool:
    """A ref aval of semaphores (a DMA or regular semaphore scratch or allocation)."""
    inner = getattr(aval, "inner_aval", aval)
    return "sem" in _memory_space_name(aval) or "sem" in str(getattr(inner, "dtype", "")).lower()


def _is_acc(aval) -> bool:
    """A plgpu.ACC scratch: Mosaic GPU's wgmma accumulator, in registers."""
    return type(aval).__name__ == "WGMMAAbstractAccumulatorRef"


def _scratch_line(nm: str, aval, loc, kernel, shape=None) -> str:
    """`scratch NAME: ...` of a kernel scratch or a run_scoped allocation (its ref's aval;
    `shape`, where given, instead of the aval's: a tiled Mosaic GPU scratch's own, _Untiled)."""
    inner = getattr(aval, "inner_aval", aval)
    ms_name = _memory_space_name(aval)
    sem_dt = str(getattr(inner, "dtype", "")).lower()
    if _is_semaphore(aval):
        kind = "dma_sem" if "dma" in sem_dt else "semaphore"
        if len(inner.shape) > 1:
            raise UnsupportedError(f"scratch '{nm}': a semaphore array of shape "
                                   f"{tuple(inner.shape)} has no .pk form (one dim at most)",
                                   loc, kernel)
        shape = f"[{int(inner.shape[0])}]" if inner.shape else ""
        return f"    scratch {nm}: {kind}{shape}"
    if "any" in ms_name or "hbm" in ms_name or "gmem" in ms_name or "tmem" in ms_name:
        raise UnsupportedError(f"scratch '{nm}': a scratch in {ms_name} memory has no .pk form "
                               "(scratch is VMEM, SMEM, a plgpu.ACC or a semaphore)", loc, kernel)
    if "barrier" in sem_dt:
        raise UnsupportedError(f"scratch '{nm}': Mosaic GPU barriers have no .pk form in this "
                               "version of pipecheck", loc, kernel)
    if getattr(aval, "transforms", ()):
        raise UnsupportedError(f"scratch '{nm}': a scratch with transforms= (tiling, swizzling) "
                               "has no .pk form in this version of the export", loc, kernel)
    dt = _dtype(inner.dtype, f"scratch '{nm}'", loc)
    text = f"    scratch {nm}: {dt}[{_shape(inner.shape if shape is None else shape)}]"
    if _is_acc(aval):
        text += "  memory_space=acc"  # plgpu.ACC: wgmma accumulator registers, zero at start
    elif "smem" in ms_name:
        text += "  memory_space=smem"
    return text


def _export_call(pc, name, call_site, source, prefetch_values=None, prefetch=None,
                 while_bound: int = DEFAULT_WHILE_BOUND, unused: frozenset = frozenset(),
                 grid_bounds=(), input_values=(), target: str | None = None) -> Kernel:
    p = pc.params
    gm = p["grid_mapping"]
    loc = _fmt_loc(call_site)
    n_pre = int(gm.num_index_operands or 0)
    grid = tuple(gm.grid)
    if _num_grid_bounds(pc):
        # megablox's (tiles_n, num_active_tiles, tiles_k): a bound computed from the group
        # sizes, known at export when they are; the kernel is checked for that grid.
        bounds = iter(grid_bounds)
        grid = tuple(next(bounds, None) if type(g).__name__ == "DynamicGridDim" else g
                     for g in grid)
        if any(g is None for g in grid):
            raise UnsupportedError("a grid with bounds known only at run time (not at export: "
                                   "pass the arrays they are computed from) has no .pk form",
                                   loc, name)
        grid = tuple(g if isinstance(g, int) else int(np.asarray(g).reshape(-1)[0]) for g in grid)
    if any(not isinstance(g, (int, np.integer)) for g in grid):
        raise UnsupportedError(f"a dynamic grid {grid} has no .pk form", loc, name)
    if any(int(g) == 0 for g in grid):
        # (pl.cdiv(0, bm) for an empty array): Pallas runs no grid point at all.
        raise UnsupportedError(f"grid {tuple(int(g) for g in grid)} has an extent of 0: the "
                               "kernel never runs, and .pk grids and arrays are not empty",
                               loc, name)
    if p.get("mesh") is not None:
        raise UnsupportedError("pallas_call with a mesh (core_map) has no .pk form", loc, name)
    kj = p["jaxpr"]
    arg_names = list(getattr(getattr(kj, "debug_info", None), "arg_names", None) or [])
    taken: set = set()
    n_in, n_out = gm.num_inputs, gm.num_outputs
    names = []
    for k in range(len(kj.invars)):
        default = f"in{k}" if k < n_in else (f"out{k - n_in}" if k < n_in + n_out else f"scratch{k - n_in - n_out}")
        default = f"prefetch{k}" if k < n_pre else default
        an = arg_names[k] if k < len(arg_names) and arg_names[k] else default
        # a ref with Mosaic GPU transforms is a TransformedRef: jax names it `a_ref.ref`
        names.append(_ident(an.removesuffix(".ref"), taken))
    pre_names, names = names[:n_pre], names[n_pre:]
    # prefetch= may name a table by its kernel parameter's name or by its name in the spec.
    py_names = [arg_names[k] if k < len(arg_names) else None for k in range(n_pre)]
    constraints = [(prefetch or {}).get(nm) or (prefetch or {}).get(py_names[k])
                   for k, nm in enumerate(pre_names)]
    int_inputs = [names[k] for k in range(n_in)
                  if np.issubdtype(getattr(kj.invars[n_pre + k].aval, "inner_aval",
                                           kj.invars[n_pre + k].aval).dtype, np.integer)]
    int_py = [arg_names[n_pre + k] if n_pre + k < len(arg_names) else None for k in range(n_in)]
    for key in prefetch or {}:
        if key not in pre_names and key not in py_names and key not in int_inputs and \
                key not in int_py:
            raise UnsupportedError(f"prefetch={{{key!r}: ...}} names no scalar prefetch operand "
                                   f"or integer input of this kernel (it has "
                                   f"{pre_names + int_inputs})", loc, name)
    gnames = (_GRID_NAMES + [f"g{k}" for k in range(len(_GRID_NAMES), len(grid))])[:len(grid)]

    lines: list[tuple[str, tuple | None]] = []
    head = "# exported by pipecheck_jax"
    if source:
        head += f" from {source[0]}:{source[1]}"
    lines.append((head, source))
    lines.append((f"kernel {name}:", source))
    if grid:
        lines.append((f"    grid = {_tuple(str(int(g)) for g in grid)}", call_site))
    cp = p.get("compiler_params")
    backend = _backend(cp, kj, gm)
    triton, mgpu = backend == "triton", backend == "mosaic_gpu"
    if triton:
        # Pallas' Triton backend: every grid point a concurrent program whose loads and
        # stores reach the arrays directly (docs/language.md, "The Triton backend").
        lines.append(("    backend = triton", call_site))
        cp = None
    if mgpu:
        # Pallas' Mosaic GPU pallas_call: the parallel axes a CUDA grid of CTAs, each running
        # plgpu.emit_pipeline over the others (docs/lowering.md, "Mosaic GPU"). Its lowering
        # builds the pipeline's BlockSpecs from the block mappings, which keep no
        # delay_release: a plgpu.BlockSpec's delay_release does not reach the pipeline, so
        # the export writes none.
        lines.append((f"    target = {target if target in GPU_TARGETS else 'h100'}", call_site))
        if n_pre:
            raise UnsupportedError("scalar prefetch in a Mosaic GPU pallas_call: Pallas' "
                                   "Mosaic GPU lowering does not support it", loc, name)
        if getattr(gm, "vmapped_dims", ()):
            raise UnsupportedError("a vmapped Mosaic GPU pallas_call: Pallas' Mosaic GPU "
                                   "lowering does not support it", loc, name)
    mosaic_tpu = not triton and not mgpu and (target in TPU_TARGETS or backend == "mosaic_tpu")
    if mosaic_tpu:
        # Mosaic TPU: its tiling rule and VMEM budget (block-tiling, sram-capacity). A call
        # that names no backend gets them only from an explicit target.
        lines.append((f"    target = {target if target in TPU_TARGETS else 'tpu_v5e'}", call_site))
    sem = _semantics(cp, len(grid), loc) if cp is not None else None
    vmapped = set(getattr(gm, "vmapped_dims", ()) or ())
    user_axes = [a for a in range(len(grid)) if a not in vmapped]
    if sem is not None and vmapped:  # as Mosaic does: a vmapped grid axis is parallel
        it = iter(sem)
        sem = [next(it) if a not in vmapped else "parallel" for a in range(len(grid))]
    if sem:
        lines.append((f"    dimension_semantics = {_tuple(sem)}", call_site))
    steps = int(getattr(cp, "max_concurrent_steps", 1) or 1) if mgpu else 1
    if steps != 1:
        lines.append((f"    max_concurrent_steps = {steps}", call_site))
    vmem = getattr(cp, "vmem_limit_bytes", None)
    if vmem is None and isinstance(cp, dict):
        vmem = (cp.get("mosaic") or {}).get("vmem_limit_bytes")
    if vmem:
        lines.append((f"    vmem_limit_bytes = {int(vmem)}", call_site))

    for k, nm in enumerate(pre_names):
        # A description says what to check, every contents it allows: it wins over contents
        # known at export (those of the one call traced).
        value = prefetch_values[k] if prefetch_values and k < len(prefetch_values) and \
            not constraints[k] else None
        lines.append((_prefetch_line(nm, kj.invars[k].aval.inner_aval if hasattr(
            kj.invars[k].aval, "inner_aval") else kj.invars[k].aval, value,
            constraints[k], loc, name), call_site))
    operands = []
    aliased = {int(i_out) for _, i_out in p.get("input_output_aliases") or ()}
    # An output the program drops whose index map is constant is the scratch idiom of the
    # time before scratch_shapes (splash attention's m/l/o): its block stays in VMEM for the
    # whole grid (per core) and is never read back, so it is exported as the scratch it is.
    as_scratch = []
    operand_line: dict = {}  # operand name -> (index in lines of its line, its block dims)
    any_operands: dict = {}  # memory_space=ANY operand name -> "in" or "out"
    for k, bm in enumerate(gm.block_mappings):
        role = "in" if k < n_in else "out"
        nm = names[k]
        aval = bm.array_aval if hasattr(bm, "array_aval") else bm.array_shape_dtype
        shape = tuple(int(d) for d in aval.shape)
        if 0 in shape:
            raise UnsupportedError(f"operand '{nm}' is empty, {shape}: .pk arrays are not", loc,
                                   name)
        dt = _dtype(aval.dtype, f"operand '{nm}'", loc)
        operands.append((nm, role, shape, aval.dtype))
        text = f"    {role:<3} {nm}: {dt}[{_shape(shape)}]"
        ms = getattr(bm.transformed_block_aval, "memory_space", None)
        ms_name = str(getattr(ms, "name", ms) or "").lower()
        if mgpu:
            _mosaic_gpu_block(bm, nm, ms_name, loc, name)
            if "smem" in ms_name:
                ms_name = ""  # where Mosaic GPU's pipeline puts every block
        if "any" in ms_name or "hbm" in ms_name or "gmem" in ms_name:
            if getattr(gm, "vmapped_dims", ()):
                # jax.vmap gives the kernel one batch element of it (a ref without the batch
                # dims), which the .pk operand, the whole array, cannot name.
                raise UnsupportedError(f"operand '{nm}' in memory_space=ANY of a vmapped "
                                       "pallas_call: the kernel sees one batch element of it, "
                                       "which has no .pk form", loc, name)
            if not mgpu and not bm.has_trivial_window():
                # (the kernel would see a window of the array, which .pk's whole-array ANY
                # operand cannot say; Mosaic GPU's own refusal is _mosaic_gpu_block's)
                raise UnsupportedError(
                    f"operand '{nm}': a memory_space=ANY BlockSpec with block "
                    f"{_tuple(_block_dims(bm, nm, loc, name))} and its index map: "
                    "Pallas does not window an ANY operand (its TPU lowering refuses it); "
                    "give the BlockSpec no block shape (the whole array)", loc, name)
            text += "  memory_space=any"
            lines.append((text, call_site))
            any_operands[nm] = role
            continue
        dims = _block_dims(bm, nm, loc, name)
        operand_line[nm] = (len(lines), dims)
        text += f"  block={_tuple(dims)}"
        idx = _index_map(bm, gnames, f"'{nm}'", loc, tuple(pre_names))
        if (role == "out" and k - n_in in unused and k - n_in not in aliased
                and _scratch_like(idx, dims, {gnames[a] for a in vmapped})
                and all(d == "None" or d.isdigit() for d in dims)):
            operands[-1] = (nm, "dropped", shape, aval.dtype)
            block = [d for d in dims if d != "None"]
            line = f"    scratch {nm}: {dt}[{', '.join(block)}]"
            if "smem" in ms_name:
                line += "  memory_space=smem"
            as_scratch.append((line + "  # a dropped output with a constant index map",
                               call_site))
            continue
        if not grid and mosaic_tpu and not bm.has_trivial_window():
            raise UnsupportedError(
                f"operand '{nm}': a block {_tuple(dims)} of its {_tuple(map(str, shape))} array at "
                f"index {idx} in a pallas_call without a grid: Pallas' TPU lowering refuses any "
                "window but the whole array at index 0 there (\"Non-trivial windowing is not "
                "supported for grid-free pallas_call\"); give it grid=(1,)", loc, name)
        text += f"  index={_tuple(gnames + pre_names)} -> {idx}"
        if "smem" in ms_name:
            text += "  memory_space=smem"
        if mosaic_tpu:
            _mosaic_pipeline_mode(bm, nm, loc, name)
        text += _buffered(bm)
        # (an operand's line is its BlockSpec's: where its index_map is defined, the lambda's
        # line, which a finding about its blocks points at; the pallas_call where that is not
        # the user's code, a default or library index map)
        lines.append((text, _index_map_site(bm) or call_site))
    tables = _data_tables(gm, names, n_in, input_values, prefetch or {}, arg_names[n_pre:],
                          len(grid), tuple(pre_names), taken, loc)
    lines.extend(as_scratch)
    scratch_at: dict = {}  # scratch name -> its index in lines (untiled: see _Untiled)
    for k in range(n_in + n_out, len(names)):
        scratch_at[names[k]] = len(lines)
        lines.append((_scratch_line(names[k], kj.invars[n_pre + k].aval, loc, name), call_site))
    aliased_names: set = set()
    for i_in, i_out in p.get("input_output_aliases") or ():
        if i_in < n_pre:
            raise UnsupportedError(
                f"input_output_aliases aliases scalar prefetch operand '{pre_names[i_in]}' to output "
                f"'{names[n_in + i_out]}': .pk aliases only windowed or memory_space inputs",
                _fmt_loc(call_site))
        for k in (i_in - n_pre, n_in + i_out):
            kinds = {type(b).__name__ for b in gm.block_mappings[k].block_shape} & \
                {"Element", "BoundedSlice"}
            if kinds:
                raise UnsupportedError(
                    f"input_output_aliases aliases '{names[i_in - n_pre]}' to "
                    f"'{names[n_in + i_out]}', and '{names[k]}' has a pl.{min(kinds)} block dim: "
                    ".pk aliases only operands whose blocks tile the array", _fmt_loc(call_site))
        lines.append((f"    alias {names[i_in - n_pre]} -> {names[n_in + i_out]}", call_site))
        aliased_names |= {names[i_in - n_pre], names[n_in + i_out]}
    lines.append(("    body:", source))

    for v in kj.constvars:
        raise UnsupportedError("a kernel that closes over array constants has no .pk form", loc, name)

    data_smem: set = set()  # int32 SMEM scratches the body stores data into (_DataIntoSmem)

    untiled: dict = {}  # Mosaic GPU SMEM scratch with transforms= -> its own shape (_Untiled)

    def translate(stored: frozenset) -> _Body:
        while True:
            try:
                return translate_once(stored)
            except _DataIntoSmem as d:
                if d.name in data_smem:
                    raise
                data_smem.add(d.name)
            except _Untiled as u:
                if u.name in untiled:  # two accesses untile it to different shapes
                    raise UnsupportedError(
                        f"scratch '{u.name}': accesses that untile it to {untiled[u.name]} "
                        f"and {u.shape} have no .pk form", loc, name) from None
                untiled[u.name] = u.shape

    shift: dict = {}  # (operand, dim) -> front padding (_front_padding)

    def translate_once(stored: frozenset) -> _Body:
        body = _Body(name, source)
        body.shift = shift
        body.outer_traceback = getattr(pc.source_info, "traceback", None)
        body.triton = triton
        body.user_axes = user_axes
        body.while_bound = while_bound
        body.taken = set(taken)  # (each translation names its own scratch alike)
        body.mgpu = mgpu
        body.bind_reads_of = stored
        body.untabled = set(int_inputs) - set(tables)
        body.any_operands = {nm: role for nm, role in any_operands.items()
                             if nm not in aliased_names}
        body.has_prefetch = n_pre > 0
        body.upper = {f"program_id({k})": int(g) - 1 for k, g in enumerate(grid)}
        env: dict = {}
        for k, v in enumerate(kj.invars):
            aval = v.aval
            inner = getattr(aval, "inner_aval", aval)
            nm = pre_names[k] if k < n_pre else names[k - n_pre]
            state = (k >= n_pre + n_in + n_out and "smem" in _memory_space_name(aval)
                     and np.dtype(inner.dtype) == np.int32 and nm not in data_smem)
            table = tables[nm][0] if nm in tables else None
            shape = tuple(int(d) for d in inner.shape)
            zero_d = k < n_pre and shape == ()
            if zero_d:
                shape = (1,)  # a 0-d prefetch operand is declared as a table of one
            if n_pre <= k < n_pre + n_in + n_out and gm.block_mappings[k - n_pre].transforms:
                # Mosaic GPU's tiled ref: read through its untiling (_LAYOUT_VIEWS), it is the
                # block as declared
                shape = tuple(int(getattr(b, "block_size", b))
                              for b in gm.block_mappings[k - n_pre].block_shape
                              if b is not None and type(b).__name__ != "Squeezed")
            if k >= n_pre + n_in + n_out and _is_acc(aval):
                body.acc_refs.add(nm)
            tiled = None
            if mgpu and k >= n_pre + n_in + n_out and "smem" in _memory_space_name(aval) \
                    and not _is_semaphore(aval):
                # (its ref is tiled where the scratch has transforms=: view_of untiles it)
                tiled = inner
                shape = untiled.get(nm, shape)
            env[v] = _Ref(nm, shape, prefetch=k < n_pre, state=state, table=table, tiled=tiled,
                          zero_d=zero_d)
        body.has_wgmma = any(_uses_primitive(q, "wgmma_ref") for q in kj.eqns)
        body._indent = 2
        body.run(kj, env, 2)
        body.flush(2)
        return body

    body = translate(frozenset())
    for k in range(n_in + n_out, len(names)):
        if names[k] in untiled:  # declared at its own shape, which its untiling views give
            lines[scratch_at[names[k]]] = (_scratch_line(
                names[k], kj.invars[n_pre + k].aval, loc, name, untiled[names[k]]), call_site)
    if body.stored_state:
        # SMEM state is stored into: its reads are bound to a local where they are in the jaxpr
        # (`init = init_flag_ref[0]` before `init_flag_ref[0] = 0`), not inlined at their use.
        body = translate(frozenset(body.stored_state))
        for text, _ in lines:
            mapped = text.split(" -> ", 1)[1] if "  index=" in text and " -> " in text else ""
            for st in sorted(body.stored_state):
                if re.search(rf"\b{re.escape(st)}\[", mapped):
                    raise UnsupportedError(
                        f"an index map reads '{st}', which the body stores into (SMEM state): when "
                        "the pipeline evaluates an index map against the body's stores has no .pk "
                        "form", loc, name)
    front = _front_padding(lines, operand_line, body) if triton else {}
    if front:
        # Windows that start before their operand: translated again, their subscripts moved
        # past the front padding.
        shift.update(front)
        body = translate(frozenset(body.stored_state))
    if body.pipeline is not None and (body.tables_read or pre_names):
        raise NotNative("an emit_pipeline in a kernel that reads scalar prefetch or a data "
                        "table has no nested .pk form", loc, name)
    if body.pipeline is not None:
        # .pk's nested form: no statement outside the emit_pipeline names an operand it stages
        staged, start, end, touched = body.pipeline
        for t, src in body.lines[:start] + body.lines[end:]:
            hit = next((nm for nm in sorted(staged) if not t.lstrip().startswith("#") and
                        re.search(rf"\b{re.escape(nm)}\b", t)), None)
            if hit is not None:
                raise NotNative(f"an emit_pipeline staging '{hit}', which the body also "
                                 "names outside it, has no nested .pk form",
                                 _fmt_loc(src or source), name)
        # and it evaluates a local bound before it at every inner step: one read from a ref
        # the inner body may write (`h0 = s[...]`, then `s[...] += x * h0`, or h0 used after
        # it) would change under it
        later = "\n".join(t for t, _ in body.lines[start:])
        for t, src in body.lines[:start]:
            m = re.match(r"\s*(\w+) = (.*)", t)
            if m and any(re.search(rf"\b{re.escape(r)}\[", m.group(2)) for r in touched) and \
                    re.search(rf"\b{re.escape(m.group(1))}\b", later):
                raise NotNative(f"an emit_pipeline after '{m.group(1)}', a value read from a ref "
                                "its body may write and used after, has no nested .pk form",
                                _fmt_loc(src or source), name)
    _pad_for_gathers(lines, operand_line, body, loc, name)
    _declare_tables(lines, tables, body.tables_read, gnames + pre_names if pre_names else None)
    if body.no_statements(0):
        body.emit(2, "v0 = 0", source)
    lines[-1:-1] = body.scoped  # before `body:`
    lines.extend(body.lines)

    text_lines, line_map = [], {}
    for k, (t, src) in enumerate(lines, start=1):
        if src is not None and k > 2 and not t.lstrip().startswith("#"):
            t = f"{t}  # {os.path.basename(src[0])}:{src[1]}"
        text_lines.append(t)
        if src is not None:
            line_map[k] = src
    # Each opaque op at the next exported line that names it (its value may be inlined
    # into a later line than its own equation's).
    sites = [(k, m.group(1)) for k, t in enumerate(text_lines, start=1)
             for m in re.finditer(r"\bop=(\w+),", t.split("  # ")[0])]
    opaque = []
    for prim, op, src in body.opaque:
        hit = next((site for site in sites if site[1] == op), None)
        if hit is not None:
            sites.remove(hit)
        opaque.append((prim, src, hit[0] if hit else None))
    drops = [k for k, t in enumerate(text_lines, start=1) if t.lstrip().startswith("# dropped: ")]
    dropped = [(prim, src, line) for (prim, src), line in zip(body.dropped, drops)]
    return Kernel(name=name, text="\n".join(text_lines) + "\n", line_map=line_map, source=source,
                  call_site=call_site, operands=operands, eqn=pc, opaque=opaque, dropped=dropped,
                  triton=triton, mosaic_gpu=mgpu, batch_axes=tuple(sorted(vmapped)),
                  callers=_callers(pc), ds_before_start=bool(shift) and body.ds_before_start)



def trace(fn: Callable, *args, **kwargs):
    """The jaxpr of fn(*args, **kwargs); arrays or jax.ShapeDtypeStruct both work. A
    `pltpu.emit_pipeline` in a kernel is traced as JAX's emit_pipeline primitive (which keeps
    its grid and BlockSpecs) where this jax has it and it traces; see trace_lowered."""
    state = _pipeline_primitive_state()
    if state is not None:
        try:
            with tpu_info_on_cpu(), state(True):
                return jax.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args)
        except Exception:  # noqa: BLE001 - traced again as JAX traces it by default, below
            pass
    return trace_lowered(fn, *args, **kwargs)


def trace_lowered(fn: Callable, *args, **kwargs):
    """trace, with a `pltpu.emit_pipeline` traced into the DMAs and loop Pallas makes of it,
    as JAX does by default (and as interpret mode runs it)."""
    state = _pipeline_primitive_state()
    with tpu_info_on_cpu(), (state(False) if state is not None else contextlib.nullcontext()):
        return jax.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args)


def _pipeline_primitive_state():
    """JAX's jax_use_emit_pipeline_primitive config state, or None in a jax without it."""
    try:
        from jax._src import config as jax_config
    except ImportError:  # pragma: no cover - an incompatible jax
        return None
    return getattr(jax_config, "use_emit_pipeline_primitive", None)


def has_pipeline_primitive(closed) -> bool:
    """Whether a pallas_call of the traced function holds an emit_pipeline primitive (a
    jaxpr made by trace that interpret mode cannot run: run it from trace_lowered's)."""
    return any(_uses_primitive(f, "emit_pipeline") for pc in find_pallas_calls(closed.jaxpr)
               for f in _inner(pc.params["jaxpr"]).eqns)


@contextlib.contextmanager
def tpu_info_on_cpu():
    """While tracing on a machine without a TPU, answer Pallas' questions about the TPU
    (`pltpu.emit_pipeline` asks for its tiling at trace time and refuses a CPU device) as a
    TPU v5e would. Nothing changes where the backend already has TPU info, or where this jax
    has no such registry (then tracing fails as it would without pipecheck)."""
    try:
        from jax._src.pallas.mosaic import tpu_info
        registry = tpu_info.registry
        chip = tpu_info.ChipVersion.TPU_V5E
    except (ImportError, AttributeError):
        yield
        return
    added = "cpu" not in registry
    if added:
        registry["cpu"] = lambda: tpu_info.get_tpu_info_for_chip(chip, 1)
    try:
        yield
    finally:
        if added:
            registry.pop("cpu", None)


@dataclasses.dataclass
class Call:
    """One pallas_call the traced function makes, as reached through the calls around it."""

    eqn: Any
    #: the jaxpr that holds eqn (what its results are used by: unused_outputs)
    holder: Any
    #: the value of each of eqn's operands where it is known at export (numpy), else None
    values: list
    #: the positions of holder's results that the calls around it drop
    dropped: frozenset = frozenset()


#: the most elements a result computed at export may have.
_FOLD_ELEMENTS = 1 << 20
#: the most elements an operand of a non-integer result computed at export may have.
_FOLD_FLOAT_OPERAND = 1 << 16


def pallas_calls(closed, args) -> list[Call]:
    """Every pallas_call of the traced function (`closed`, made from `args`), each with the
    operand values known at export: those that follow from the array arguments (numpy or jax
    arrays, not ShapeDtypeStructs) and the constants, through the calls around it (jit,
    custom_jvp/vjp: each call on its own operands, so a jitted function called twice is two
    calls with their own values) and through effect-free equations on known values (a table
    sliced, offset or cumulated on the way), computed here as the program would."""
    env = dict(zip(closed.jaxpr.constvars, closed.consts))
    for v, a in zip(closed.jaxpr.invars, tree_util.tree_leaves(args)):
        if isinstance(a, (np.ndarray, np.generic)) or (
                isinstance(a, jax.Array) and not isinstance(a, jax_core.Tracer)):
            env[v] = np.asarray(a)
    found: list[Call] = []
    _walk(closed.jaxpr, env, found)
    return found


def _walk(jaxpr, env: dict, found: list, dropped: frozenset = frozenset()) -> list:
    """Records jaxpr's pallas_calls in `found`, following values in `env` (this invocation's:
    jaxpr variable -> value), with the positions of jaxpr's results its callers drop
    (`dropped`); returns the values of jaxpr's results (None where unknown)."""
    def value(a):
        return np.asarray(a.val) if isinstance(a, jax_core.Literal) else env.get(a)

    for e in jaxpr.eqns:
        ins = [value(a) for a in e.invars]
        name = e.primitive.name
        if name == "pallas_call":
            found.append(Call(e, jaxpr, ins, dropped))
            continue
        subs = [s for v in e.params.values() for s in
                (v if isinstance(v, (tuple, list)) else (v,)) if _is_jaxpr(s)]
        if name in _CALLS and len(subs) == 1:
            inner = _inner(subs[0])
            sub_env = dict(zip(inner.constvars, _consts(subs[0])))
            sub_env.update((v, x) for v, x in zip(inner.invars, ins) if x is not None)
            outs = _walk(inner, sub_env, found, unused_outputs(e, jaxpr, dropped))
        elif any(find_pallas_calls(_inner(s)) for s in subs):
            for s in subs:  # cond branches, loop bodies: what they make, with their constants
                _walk(_inner(s), dict(zip(_inner(s).constvars, _consts(s))), found)
            outs = None
        else:  # loops too (jnp.searchsorted's binary search): they end as the program's do
            outs = _computed(e, ins)
        for v, o in zip(e.outvars, outs or ()):
            if o is not None and not isinstance(v, jax_core.DropVar):
                env[v] = np.asarray(o)
    return [value(a) for a in jaxpr.outvars]


def _computed(e, ins) -> list | None:
    """e's results computed on its known operands, where all are known, e has no effects and
    its results are arrays of at most _FOLD_ELEMENTS elements; else None. Floats too
    (megablox's tile visits are a histogram of its group offsets), but only from operands of
    at most _FOLD_FLOAT_OPERAND elements: a model's weights passed as arrays are not worth
    computing on, op by op, for the tables a kernel takes."""
    if e.effects or any(x is None for x in ins):
        return None
    for v in e.outvars:
        if not hasattr(v.aval, "dtype") or math.prod(v.aval.shape) > _FOLD_ELEMENTS:
            return None
    ints = all(np.issubdtype(v.aval.dtype, np.integer) or v.aval.dtype == np.bool_
               for v in e.outvars)
    if not ints and any(np.size(x) > _FOLD_FLOAT_OPERAND for x in ins):
        return None
    try:
        bp = e.primitive.get_bind_params(e.params)
        subfuns, params = bp if isinstance(bp, tuple) else ((), bp)
        outs = e.primitive.bind(*subfuns, *ins, **params)
        return [np.asarray(o) for o in (outs if e.primitive.multiple_results else [outs])]
    except Exception:  # noqa: BLE001 - not computable here (or under a trace, as from
        return None    # python -m pipecheck_jax inside a jit): the values stay unknown


def export_found(call: Call, taken_names: set | None = None, call_site=None,
                 prefetch: dict | None = None,
                 while_bound: int = DEFAULT_WHILE_BOUND, target: str | None = None) -> Kernel:
    """export_call with what `call` knows: the values of its grid bounds, prefetch operands and
    inputs, and which of its results the program holding it drops."""
    return export_call(call.eqn, taken_names, call_site, prefetch_values=_prefetch_values(call),
                       prefetch=prefetch, while_bound=while_bound,
                       unused=unused_outputs(call.eqn, call.holder, call.dropped),
                       grid_bounds=call.values[:_num_grid_bounds(call.eqn)],
                       input_values=_input_values(call), target=target)


def _num_grid_bounds(eqn) -> int:
    """How many dynamic grid bounds the pallas_call eqn takes (its first operands)."""
    return int(getattr(eqn.params["grid_mapping"], "num_dynamic_grid_bounds", 0) or 0)


def _input_values(call: Call) -> list:
    """The known values of the call's inputs (after its grid bounds and prefetch operands)."""
    gm = call.eqn.params["grid_mapping"]
    start = _num_grid_bounds(call.eqn) + int(gm.num_index_operands or 0)
    return call.values[start:start + int(gm.num_inputs)]


def _prefetch_values(call: Call) -> list:
    skip = _num_grid_bounds(call.eqn)
    return call.values[skip:skip + int(call.eqn.params["grid_mapping"].num_index_operands or 0)]


def _refuse_other_kernels(jaxpr, outer) -> None:
    """Raises UnsupportedError at the first plgpu.kernel / pl.core_map kernel in `jaxpr` or the
    jaxprs nested in it, named, at its line: the innermost user frame on the way down (one
    made inside a jitted helper, upstream's ragged_dot, has a traceback that stops at the
    jit: its place is then where the function calls the helper)."""
    for e in jaxpr.eqns:
        here = _frame(e.source_info) or outer
        if e.primitive.name in _OTHER_KERNELS:
            name = e.params.get("name")
            raise UnsupportedError(
                f"a kernel made by plgpu.kernel or pl.core_map (the '{e.primitive.name}' "
                "primitive) has no .pk form in this version of the export, which reads "
                "pallas_calls", _fmt_loc(here), name if isinstance(name, str) and name else None)
        for v in e.params.values():
            for sub in sub_jaxprs(v):
                _refuse_other_kernels(sub, here)


def export_kernels(fn: Callable, *args, prefetch: dict | None = None,
                   while_bound: int = DEFAULT_WHILE_BOUND, target: str | None = None,
                   **kwargs) -> list[Kernel]:
    """One Kernel per pallas_call that fn(*args, **kwargs) makes; raises UnsupportedError.

    A `lax.while_loop` in a kernel body that is not a counted fori_loop becomes
    `while COND, bound=while_bound:`: checked exactly for runs of at most while_bound
    iterations, `unknown` (never verified) where the condition may still hold after them.

    A scalar prefetch operand's contents are written into the spec when they follow from
    array arguments of `fn` and constants (passed through jit, or computed on with integer
    operations, on the way); otherwise `prefetch` describes them by the kernel
    parameter's name, in `.pk` constraint syntax: `prefetch={"ids_ref": "in [0, 8)
    nondecreasing"}`. A description wins over known contents: all it allows is checked.

    `target` names the TPU or GPU the calls are checked for (see export_call)."""
    while_bound = _while_bound(while_bound)
    target = _target(target)
    closed = trace(fn, *args, **kwargs)
    _refuse_other_kernels(closed.jaxpr, None)
    if not find_pallas_calls(closed.jaxpr):
        raise UnsupportedError("the function makes no pallas_call")
    taken: set = set()
    try:
        try:
            return [export_found(c, taken, prefetch=prefetch, while_bound=while_bound,
                                 target=target) for c in pallas_calls(closed, args)]
        except NotNative as nested:  # an emit_pipeline the nested form cannot say: as Pallas lowers it
            closed, taken = trace_lowered(fn, *args, **kwargs), set()
            try:
                return [export_found(c, taken, prefetch=prefetch, while_bound=while_bound,
                                     target=target) for c in pallas_calls(closed, args)]
            except UnsupportedError as err:
                raise lowered_unsupported(nested, err) from None
    except UnsupportedError:
        raise
    except Exception as e:  # noqa: BLE001 - past tracing, a failure is the export's own bug
        raise internal_error(e) from e


def export(fn: Callable, *args, prefetch: dict | None = None,
           while_bound: int = DEFAULT_WHILE_BOUND, target: str | None = None, **kwargs) -> str:
    """The `.pk` text of every pallas_call that fn(*args, **kwargs) makes (`prefetch`,
    `while_bound`, `target`: see export_kernels)."""
    return "\n".join(k.text for k in export_kernels(fn, *args, prefetch=prefetch,
                                                     while_bound=while_bound, target=target,
                                                     **kwargs))
