"""Process-global settings a chapter could leave behind, read, compared and reset.

The test plugin runs ``snapshot()`` before a chapter's first cell, ``note(cell)``
after each cell and ``check()`` after its last. Every chapter runs in a fresh
kernel, but a reader runs the next cells in the same kernel, which would inherit
whatever a cell left; so a chapter that changes a setting and does not restore
it fails, and the message names the cell that changed it (its .md line and fence
id) and says how to restore it. The settings checked (``SETTINGS``):

- torch: default dtype and device, grad and inference mode, deterministic
  algorithms (and warn-only), cuDNN's deterministic and benchmark flags,
  float32 matmul precision and the TF32 / reduced-precision flags, anomaly
  detection, warn-always, number of threads, print options;
- NumPy's print options; Python's warning filters; the environment
  variables; the working directory.

Random number generators are not checked but reset: ``snapshot()`` reseeds
torch's default generator (``torch.seed()``), NumPy's legacy global
generator and Python's ``random`` from the operating system, which is how a
fresh process starts them (torch >= 2.8 seeds its default generator
randomly at start-up). So every chapter starts with fresh random state
whatever ran before it, in a shared kernel or a fresh one, and a chapter
may seed or draw freely without restoring anything. The rule for authors:
a fence whose claim depends on particular random values seeds in its own
cell (``torch.manual_seed(0)``) or draws from its own generator
(``g = torch.Generator().manual_seed(0)``, ``np.random.default_rng(0)``), so
it holds whatever ran before it and when run alone.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

_snapshot: dict[str, object] | None = None

_modules: set[str] = set()  # the modules imported when the snapshot was taken

_last: dict[str, object] | None = None  # the settings after the last cell ``note`` saw
_changed_by: dict[str, str] = {}         # setting -> the cell that moved it off the snapshot

#: Environment variables that a library sets when it is imported, not the
#: chapter's own code; a chapter that imports the library leaves them set,
#: and that is no leak. Found by importing what the book uses on torch
#: 2.8-2.15: jax sets two; torch._inductor (imported by
#: torch.use_deterministic_algorithms from 2.10, and by torch.compile) one;
#: torch.cuda's lazy initialisation one on 2.8 CUDA builds (seen without a GPU).
SET_BY_IMPORTS = {"TF_CPP_MIN_LOG_LEVEL": "jax", "TPU_SKIP_MDS_QUERY": "jax",
                  "TORCHINDUCTOR_CACHE_DIR": "torch._inductor",
                  "CUDA_MODULE_LOADING": "torch.cuda"}
WARNING_FILTERS = "warning filters (warnings.filters)"


@dataclass(frozen=True)
class Setting:
    """A global setting: its name (with the call that reads it), how to read it, how to restore it."""

    name: str
    read: Callable[[], object]
    restore: str


def _torch():
    import torch

    return torch


def _torch_print_options() -> dict:
    # torch has no public getter for its print options (2.8-2.15 have only
    # torch.set_printoptions); torch._tensor_str.get_printoptions exists in
    # all of them, PRINT_OPTS is the object it reads.
    ts = _torch()._tensor_str
    return ts.get_printoptions() if hasattr(ts, "get_printoptions") else dict(vars(ts.PRINT_OPTS))


def _numpy_print_options() -> dict:
    import numpy as np

    return np.get_printoptions()


def _environment() -> dict:
    return {k: v for k, v in os.environ.items() if k not in SET_BY_IMPORTS}


def _warning_filters() -> list:
    return list(warnings.filters)


def _backend_flags() -> dict:
    """TF32 and reduced-precision flags; readable without a GPU, and left alone by torch."""
    b = _torch().backends
    flags = {
        "cuda.matmul.allow_tf32": b.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.allow_tf32": b.cudnn.allow_tf32,
    }
    if hasattr(b, "fp32_precision"):  # the precision API added in 2.9
        flags["fp32_precision"] = b.fp32_precision
    return flags


def _restore(getter: str, setter: str) -> str:
    return (f"read it first, `old = {getter}`, and restore it in `finally: {setter}(old)`")


SETTINGS: list[Setting] = [
    Setting("default dtype (torch.get_default_dtype)", lambda: _torch().get_default_dtype(),
            _restore("torch.get_default_dtype()", "torch.set_default_dtype")),
    Setting("default device (torch.get_default_device)", lambda: _torch().get_default_device(),
            _restore("torch.get_default_device()", "torch.set_default_device")
            + ", or use `with torch.device(...):`"),
    Setting("grad mode (torch.is_grad_enabled)", lambda: _torch().is_grad_enabled(),
            "use `with torch.no_grad():` (or `torch.enable_grad()`) instead of "
            "torch.set_grad_enabled(False)"),
    Setting("inference mode (torch.is_inference_mode_enabled)",
            lambda: _torch().is_inference_mode_enabled(),
            "use `with torch.inference_mode():`, which ends with the block"),
    Setting("deterministic algorithms (torch.are_deterministic_algorithms_enabled)",
            lambda: _torch().are_deterministic_algorithms_enabled(),
            _restore("torch.are_deterministic_algorithms_enabled()",
                     "torch.use_deterministic_algorithms")),
    Setting("deterministic warn-only (torch.is_deterministic_algorithms_warn_only_enabled)",
            lambda: _torch().is_deterministic_algorithms_warn_only_enabled(),
            "read both, `old = torch.are_deterministic_algorithms_enabled()` and "
            "`warn = torch.is_deterministic_algorithms_warn_only_enabled()`, and restore them "
            "in `finally: torch.use_deterministic_algorithms(old, warn_only=warn)`"),
    Setting("cuDNN deterministic (torch.backends.cudnn.deterministic)",
            lambda: _torch().backends.cudnn.deterministic,
            "use `with torch.backends.cudnn.flags(deterministic=True):`"),
    Setting("cuDNN benchmark (torch.backends.cudnn.benchmark)",
            lambda: _torch().backends.cudnn.benchmark,
            "use `with torch.backends.cudnn.flags(benchmark=True):`"),
    Setting("float32 matmul precision (torch.get_float32_matmul_precision)",
            lambda: _torch().get_float32_matmul_precision(),
            _restore("torch.get_float32_matmul_precision()", "torch.set_float32_matmul_precision")),
    Setting("TF32 and reduced-precision flags (torch.backends.cuda.matmul, torch.backends.cudnn)",
            _backend_flags,
            "read the flag first, `old = torch.backends.cuda.matmul.allow_tf32`, and assign it "
            "back in `finally`"),
    Setting("anomaly detection (torch.is_anomaly_enabled)", lambda: _torch().is_anomaly_enabled(),
            "use `with torch.autograd.detect_anomaly():`"),
    Setting("warn-always (torch.is_warn_always_enabled)", lambda: _torch().is_warn_always_enabled(),
            _restore("torch.is_warn_always_enabled()", "torch.set_warn_always")),
    Setting("number of threads (torch.get_num_threads)", lambda: _torch().get_num_threads(),
            _restore("torch.get_num_threads()", "torch.set_num_threads")),
    Setting("torch print options (torch.set_printoptions)", _torch_print_options,
            "restore them in `finally: torch.set_printoptions(profile=\"default\")` "
            "(the defaults every chapter starts with)"),
    Setting("NumPy print options (numpy.get_printoptions)", _numpy_print_options,
            "use `with np.printoptions(...):`, which restores them at the end of the block"),
    Setting(WARNING_FILTERS, _warning_filters,
            "change filters only inside `with warnings.catch_warnings():` "
            "(or use `fences.warns(...)`)"),
    Setting("environment variables (os.environ)", _environment,
            "read it first, `old = os.environ.get(NAME)`, and in `finally` put it back "
            "(`os.environ.pop(NAME)` when old is None); or use "
            "`with unittest.mock.patch.dict(os.environ, {NAME: value}):`"),
    Setting("working directory (os.getcwd)", os.getcwd,
            "read it first, `old = os.getcwd()`, and restore it in `finally: os.chdir(old)`"),
]


def read() -> dict[str, object]:
    """The global settings a chapter may change, by name."""
    return {s.name: s.read() for s in SETTINGS}


def reset_random() -> None:
    """Reseed torch's, NumPy's and Python's global generators from the OS, as a fresh process has them."""
    import random

    import numpy as np

    _torch().seed()
    np.random.seed()
    random.seed()


def close_figures() -> None:
    """Close figures a previous chapter left open in this kernel (its names are already reset)."""
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


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


def remedies(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """One line per setting that differs: what changed, then exactly how to restore it."""
    how = {s.name: s.restore for s in SETTINGS}
    return [f"{line}\n    fix: {how.get(name, 'restore it in `finally`')}"
            for name, line in zip([n for n in before if before[n] != after[n]], leaks(before, after))]


def snapshot() -> None:
    """Before a chapter's first cell: fresh random state, then remember the settings as they are."""
    global _snapshot, _modules, _last
    reset_random()
    _snapshot = read()
    _last = _snapshot
    _changed_by.clear()
    _modules = set(sys.modules)


def note(cell: str) -> None:
    """After each cell (the plugin calls it, ``cell`` naming it, e.g. ``book/x.md:120, fence
    x-id``): remember, for each setting this cell moved off its snapshot value, that this cell
    did it, so ``check`` names the cell that changed what was left changed. A setting put
    back to its snapshot value forgets its cell."""
    global _last
    if _snapshot is None:
        return
    now = read()
    for name, value in now.items():
        if value == _snapshot.get(name):
            _changed_by.pop(name, None)
        elif _last is None or value != _last.get(name):
            _changed_by[name] = cell
    _last = now


def _without_import_filters(before: list, after: list, modules: set[str]) -> list:
    """``after`` less the filters that importing a module added (sympy adds one for its own
    SymPyDeprecationWarning): a new filter whose category lives in a module that was not
    imported at the snapshot came with that module's import, not from the chapter."""
    return [f for f in after
            if f in before or getattr(f[2], "__module__", "builtins") in modules]


def check() -> None:
    """Fail, naming each setting and how to restore it, if any differs from the last ``snapshot``."""
    if _snapshot is None:
        raise RuntimeError("fences.state.check() called before snapshot()")
    after = read()
    after[WARNING_FILTERS] = _without_import_filters(
        _snapshot[WARNING_FILTERS], after[WARNING_FILTERS], _modules)
    names = [n for n in _snapshot if _snapshot[n] != after[n]]
    changed = remedies(_snapshot, after)
    if changed:
        lines = []
        for name, line in zip(names, changed):
            head, _, fix = line.partition("\n")
            who = _changed_by.get(name)
            lines.append(head + (f"\n    changed by: {who}" if who else "") + "\n" + fix)
        raise AssertionError(
            "the chapter changed global state and did not restore it; a reader who runs "
            "the next cells in the same kernel inherits it:\n  " + "\n  ".join(lines)
        )
