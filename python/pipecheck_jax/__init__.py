"""pipecheck_jax: check unmodified JAX Pallas kernels with pipecheck.

`export(fn, *args)` gives the `.pk` text of every pallas_call fn makes; `check(fn, *args)`
runs `pipecheck check` on it; `assert_verified(fn, *args)` is the pytest form;
`run(fn, *args, reference=ref)` runs the kernels in pipecheck's executor.
"""

from ._export import (DEFAULT_WHILE_BOUND, Kernel, UnsupportedError, export, export_kernels,
                      find_pallas_calls)
from ._check import CheckResult, Finding, assert_verified, check, pipecheck_binary
from ._run import RunResult, run

__all__ = [
    "DEFAULT_WHILE_BOUND", "CheckResult", "Finding", "Kernel", "RunResult", "UnsupportedError", "assert_verified", "check",
    "export", "export_kernels", "find_pallas_calls", "pipecheck_binary", "run",
]
