"""Reusing ``make mutate``'s recorded outcomes for fences whose inputs did not change.

A fence's key (``environment_key`` then ``fence_keys``) hashes what its mutants' outcomes
depend on: its code and every code cell before it, the runtime (``fences``), torch's build,
the chapters' packages, Python, and the tool's deciding parts (``tools/mutants.py``, the
functions ``mutate.deciding`` names), not the verifier (``fencecheck``). A run re-runs a
fence's mutants only when its key differs from the one in ``mutate-results.json``.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What ``mutate-results.json`` holds per fence for reuse; a change of format is a new key.
FORMAT = 1
#: In the ``book`` extra but deciding no outcome: torch (hashed by its build file), the kernel
#: (mutants run with ``exec``) and the plotting library (figures are not fences).
NOT_DECIDING = {"torch", "ipykernel", "matplotlib"}


def chapter_packages(root: Path = ROOT) -> list[str]:
    """The distributions a fence's outcome depends on: the ``book`` extra less ``NOT_DECIDING``."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = (re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0]
             for req in project["optional-dependencies"]["book"])
    return sorted(n for n in names if n and n not in NOT_DECIDING)


def environment_key(deciding: list, root: Path = ROOT) -> str:
    """Everything but the chapter's code: torch's build, Python, the chapters' packages,
    the runtime, the operators, and the source of the functions in ``deciding``."""
    from fencecheck import cachekey

    digest = hashlib.sha256(f"format={FORMAT}\n".encode())
    digest.update(cachekey.torch_version_file().read_bytes())
    digest.update(f"python={sys.version_info[:2]}\n".encode())
    for name in chapter_packages(root):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}=={version}\n".encode())
    digest.update(cachekey.digest().encode())
    digest.update((root / "tools" / "mutants.py").read_bytes())
    for function in deciding:
        digest.update(inspect.getsource(function).encode())
    return digest.hexdigest()


def fence_keys(environment: str, sources: list[str]) -> list[str]:
    """For each code cell, the key of a fence there: the environment and every code
    cell up to and including it."""
    digest = hashlib.sha256(environment.encode())
    keys = []
    for source in sources:
        digest.update(b"\0cell\0" + source.encode())
        keys.append(digest.hexdigest()[:32])
    return keys


def stored(path: Path) -> dict[tuple[str, str], dict]:
    """The reusable fences of a recorded run by (chapter, fence id); empty with no record. A
    record that does not parse is an error naming it, never a silent re-run of every mutant."""
    from fencecheck.mutation import REGENERATE
    from fencecheck.record import read_json

    if not Path(path).exists():
        return {}
    return {(f["chapter"], f["fence"]): f for f in read_json(path, REGENERATE, ("fences",)).get("fences", [])
            if f.get("key") and "outcomes" in f}


def outcomes(mutants: list[dict]) -> list[list]:
    """One fence's mutants as stored: ``[number, outcome, detail]``, the detail kept only
    where the report shows it (not for an ordinary kill)."""
    return [[m["number"], m["outcome"], m["detail"] if m["outcome"] != "killed"
             or m["detail"].startswith("timed out") else ""] for m in mutants]


def reusable(entry: dict | None, key: str, mutants: list) -> bool:
    """Can ``entry`` (a stored fence) stand for this run of a fence with these mutants?"""
    return bool(entry) and entry.get("key") == key and \
        [o[0] for o in entry["outcomes"]] == [m.number for m in mutants]


def apply(entry: dict, mutants: list) -> None:
    """Give each freshly made mutant the outcome stored for it; a justified survivor is
    stored as judged, so it is judged again against the allowlist."""
    by_number = {o[0]: o for o in entry["outcomes"]}
    for mutant in mutants:
        _, mutant.outcome, mutant.detail = by_number[mutant.number]
        if mutant.outcome == "justified":
            mutant.outcome = "survived"
