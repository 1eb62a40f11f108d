"""Torch's process-global settings, read and compared.

A fence that changes one of these (``torch.set_default_dtype`` and friends)
must restore it in ``finally``. The test plugin snapshots them before a
chapter's first cell and fails the chapter if any differs after its last.
"""
from __future__ import annotations

import os

_snapshot: dict[str, object] | None = None


def read() -> dict[str, object]:
    """The global settings a chapter may change, by name."""
    import torch

    return {
        "default dtype (torch.get_default_dtype)": torch.get_default_dtype(),
        "default device (torch.get_default_device)": torch.get_default_device(),
        "grad mode (torch.is_grad_enabled)": torch.is_grad_enabled(),
        "inference mode (torch.is_inference_mode_enabled)": torch.is_inference_mode_enabled(),
        "deterministic algorithms (torch.are_deterministic_algorithms_enabled)":
            torch.are_deterministic_algorithms_enabled(),
        "deterministic warn-only (torch.is_deterministic_algorithms_warn_only_enabled)":
            torch.is_deterministic_algorithms_warn_only_enabled(),
        "anomaly detection (torch.is_anomaly_enabled)": torch.is_anomaly_enabled(),
        "number of threads (torch.get_num_threads)": torch.get_num_threads(),
        "working directory (os.getcwd)": os.getcwd(),
    }


def close_figures() -> None:
    """Close figures a previous chapter left open in this kernel (its names are already reset)."""
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def leaks(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """One line per setting that differs: 'name: was X, now Y'."""
    return [
        f"{name}: was {before[name]}, now {after[name]}"
        for name in before
        if before[name] != after[name]
    ]


def snapshot() -> None:
    """Remember the settings as they are now (run before a chapter's first cell)."""
    global _snapshot
    _snapshot = read()


def check() -> None:
    """Fail, naming each setting, if any differs from the last ``snapshot``."""
    if _snapshot is None:
        raise RuntimeError("fences.state.check() called before snapshot()")
    changed = leaks(_snapshot, read())
    if changed:
        raise AssertionError(
            "the chapter changed torch's global state and did not restore it "
            "(restore it in `finally`):\n  " + "\n  ".join(changed)
        )
