"""Process-global settings a chapter could leave behind (``SETTINGS``), read and compared.

The test plugin calls ``snapshot()`` before a chapter's first cell (which also reseeds the
global random generators, as a fresh process has them), ``note(cell)`` after each cell and
``check()`` after the last: a chapter that leaves a setting changed fails, naming the cell
that changed it and how to restore it (a reader runs the next cells in the same kernel).
"""
from __future__ import annotations

import functools
import os
import random
import sys
import warnings
from typing import Callable, NamedTuple

import numpy as np
import torch  # here, so the test plugin's warm-up (``import fences.state``) takes the cold import

_snapshot: dict[str, object] | None = None
_modules: set[str] = set()  # the modules imported when the snapshot was taken
_changed_by: dict[str, tuple[str, object]] = {}  # setting -> (the cell that moved it off the snapshot, its value)

#: Environment variables that importing a library sets (no leak of the chapter's): found by
#: importing what the book uses on torch 2.8-2.15.
SET_BY_IMPORTS = {"TF_CPP_MIN_LOG_LEVEL": "jax", "TPU_SKIP_MDS_QUERY": "jax",
                  "TORCHINDUCTOR_CACHE_DIR": "torch._inductor", "CUDA_MODULE_LOADING": "torch.cuda"}
WARNING_FILTERS = "warning filters (warnings.filters)"


class Setting(NamedTuple):
    """A global setting: its name (with the call that reads it), how to read it, how to restore it."""
    name: str
    read: Callable[[], object]
    restore: str


def _torch_print_options() -> dict:
    # torch has no public getter (2.8-2.15); _tensor_str has get_printoptions, or PRINT_OPTS.
    ts = torch._tensor_str
    return ts.get_printoptions() if hasattr(ts, "get_printoptions") else dict(vars(ts.PRINT_OPTS))


def _backend_flags() -> dict:
    """TF32 and reduced-precision flags (and 2.9's precision API); readable without a GPU."""
    b = torch.backends
    names = ["cuda.matmul.allow_tf32", "cuda.matmul.allow_fp16_reduced_precision_reduction",
             "cuda.matmul.allow_bf16_reduced_precision_reduction", "cudnn.allow_tf32"]
    names += ["fp32_precision"] if hasattr(b, "fp32_precision") else []
    return {name: functools.reduce(getattr, name.split("."), b) for name in names}


def _getter(label: str, getter: str, setter: str, more: str = "") -> Setting:
    """A torch setting read by ``torch.<getter>()`` and restored by ``torch.<setter>(old)``."""
    return Setting(f"{label} (torch.{getter})", getattr(torch, getter),
                   f"read it first, `old = torch.{getter}()`, and restore it in `finally: torch.{setter}(old)`{more}")


SETTINGS: list[Setting] = [
    _getter("default dtype", "get_default_dtype", "set_default_dtype"),
    _getter("default device", "get_default_device", "set_default_device", ", or use `with torch.device(...):`"),
    Setting("grad mode (torch.is_grad_enabled)", torch.is_grad_enabled,
            "use `with torch.no_grad():` (or `torch.enable_grad()`) instead of torch.set_grad_enabled(False)"),
    Setting("inference mode (torch.is_inference_mode_enabled)", torch.is_inference_mode_enabled,
            "use `with torch.inference_mode():`, which ends with the block"),
    _getter("deterministic algorithms", "are_deterministic_algorithms_enabled", "use_deterministic_algorithms"),
    Setting("deterministic warn-only (torch.is_deterministic_algorithms_warn_only_enabled)",
            torch.is_deterministic_algorithms_warn_only_enabled,
            "read both, `old = torch.are_deterministic_algorithms_enabled()` and `warn = "
            "torch.is_deterministic_algorithms_warn_only_enabled()`, and restore them "
            "in `finally: torch.use_deterministic_algorithms(old, warn_only=warn)`"),
    Setting("cuDNN deterministic (torch.backends.cudnn.deterministic)", lambda: torch.backends.cudnn.deterministic,
            "use `with torch.backends.cudnn.flags(deterministic=True):`"),
    Setting("cuDNN benchmark (torch.backends.cudnn.benchmark)", lambda: torch.backends.cudnn.benchmark,
            "use `with torch.backends.cudnn.flags(benchmark=True):`"),
    _getter("float32 matmul precision", "get_float32_matmul_precision", "set_float32_matmul_precision"),
    Setting("TF32 and reduced-precision flags (torch.backends.cuda.matmul, torch.backends.cudnn)", _backend_flags,
            "read the flag first, `old = torch.backends.cuda.matmul.allow_tf32`, and assign it back in `finally`"),
    Setting("anomaly detection (torch.is_anomaly_enabled)", torch.is_anomaly_enabled,
            "use `with torch.autograd.detect_anomaly():`"),
    _getter("warn-always", "is_warn_always_enabled", "set_warn_always"),
    _getter("number of threads", "get_num_threads", "set_num_threads"),
    Setting("torch print options (torch.set_printoptions)", _torch_print_options,
            "restore them in `finally: torch.set_printoptions(profile=\"default\")` "
            "(the defaults every chapter starts with)"),
    Setting("NumPy print options (numpy.get_printoptions)", np.get_printoptions,
            "use `with np.printoptions(...):`, which restores them at the end of the block"),
    Setting(WARNING_FILTERS, lambda: list(warnings.filters),
            "change filters only inside `with warnings.catch_warnings():` (or use `fences.warns(...)`)"),
    Setting("environment variables (os.environ)",
            lambda: {k: v for k, v in os.environ.items() if k not in SET_BY_IMPORTS},
            "read it first, `old = os.environ.get(NAME)`, and in `finally` put it back (`os.environ.pop(NAME)` "
            "when old is None); or use `with unittest.mock.patch.dict(os.environ, {NAME: value}):`"),
    Setting("working directory (os.getcwd)", os.getcwd,
            "read it first, `old = os.getcwd()`, and restore it in `finally: os.chdir(old)`"),
]


def read() -> dict[str, object]:
    """The global settings a chapter may change, by name."""
    return {s.name: s.read() for s in SETTINGS}


def _describe(before, after) -> str:
    """What changed, briefly: the keys of a dict or the entries of a list that differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        parts = [f"{k} was {before[k]!r}, now {after[k]!r}" for k in before
                 if k in after and before[k] != after[k]]
        parts += [f"{k} added ({after[k]!r})" for k in after if k not in before]
        parts += [f"{k} removed (was {before[k]!r})" for k in before if k not in after]
        return "; ".join(parts)
    if isinstance(before, list) and isinstance(after, list):
        parts = [f"added {f!r}" for f in after if f not in before]
        parts += [f"removed {f!r}" for f in before if f not in after]
        return "; ".join(parts) or "the same entries in another order"
    return f"was {before}, now {after}"


def leaks(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """One line per setting that differs: 'name: was X, now Y'."""
    return [f"{name}: {_describe(before[name], after[name])}"
            for name in before if before[name] != after[name]]


def snapshot() -> None:
    """Before a chapter's first cell: reseed torch's, NumPy's and Python's global generators from
    the OS, as a fresh process has them, then remember the settings as they are."""
    global _snapshot, _modules
    torch.seed()
    np.random.seed()
    random.seed()
    _snapshot = read()
    _changed_by.clear()
    _modules = set(sys.modules)


def note(cell: str) -> None:
    """After each cell (``cell`` names it, e.g. ``book/x.md:120, fence x-id``): remember the cell
    that moved each setting off its snapshot value; a setting put back forgets its cell."""
    if _snapshot is None:
        return
    for name, value in read().items():
        if value == _snapshot.get(name):
            _changed_by.pop(name, None)
        elif name not in _changed_by or value != _changed_by[name][1]:
            _changed_by[name] = (cell, value)


def check() -> None:
    """Fail, naming each setting, the cell that changed it and how to restore it, if any
    differs from the last ``snapshot``."""
    if _snapshot is None:
        raise RuntimeError("fences.state.check() called before snapshot()")
    after = read()
    # A new filter whose category's module was not imported at the snapshot came with that
    # module's import (sympy adds one for its SymPyDeprecationWarning), not from the chapter.
    after[WARNING_FILTERS] = [f for f in after[WARNING_FILTERS] if f in _snapshot[WARNING_FILTERS]
                              or getattr(f[2], "__module__", "builtins") in _modules]
    how = {s.name: s.restore for s in SETTINGS}
    lines = []
    for name in [n for n in _snapshot if _snapshot[n] != after[n]]:
        who = _changed_by.get(name)
        lines.append(f"{name}: {_describe(_snapshot[name], after[name])}"
                     + (f"\n    changed by: {who[0]}" if who else "") + f"\n    fix: {how[name]}")
    if lines:
        raise AssertionError(
            "the chapter changed global state and did not restore it; a reader who runs "
            "the next cells in the same kernel inherits it:\n  " + "\n  ".join(lines)
        )
