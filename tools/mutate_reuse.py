"""Reusing ``make mutate``'s recorded outcomes for fences whose inputs did not change.

A mutant's outcome depends on the fence's code, every code cell before it in
its chapter (the state it runs on), the runtime (the ``fences`` package,
``fencecheck.cachekey.RUNTIME``), the torch build, the
packages the chapters import, Python, and the parts of the tool that decide
an outcome (the operators in ``tools/mutants.py``; running and classifying
in ``tools/mutate.py``). ``fence_key`` hashes all of them. The run writes
each fence's key and its mutants' outcomes into ``mutate-results.json``;
the next run re-runs a fence's mutants only when its key differs (the chapter
still executes up to the last fence that re-runs, since the mutants need its
state), and a chapter whose every fence matches is not executed at all.

So CI, on the committed record, re-runs just what a change touched; a new
torch, a new NumPy or an edit of the runtime re-runs everything (an edit of the
verifier, ``fencecheck``: the Sphinx extension, the record, the lint, re-runs nothing).
``--fresh`` ignores the record.
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


#: In the ``book`` extra but deciding no fence's outcome: the kernel (mutants run with
#: ``exec``) and the plotting library (figures are not fences).
NOT_DECIDING = {"torch", "ipykernel", "matplotlib"}


def chapter_packages(root: Path = ROOT) -> list[str]:
    """The distributions whose behaviour a fence's outcome depends on: pyproject.toml's
    ``book`` extra, less ``NOT_DECIDING`` (torch is hashed by its build file instead)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = (re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0]
             for req in project["optional-dependencies"]["book"])
    return sorted(n for n in names if n and n not in NOT_DECIDING)


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def environment_key(deciding: list, root: Path = ROOT) -> str:
    """Everything but the chapter's code: torch's build, Python, the chapters' packages,
    the runtime, the operators, and the source of the functions in ``deciding``."""
    from fencecheck import cachekey

    digest = hashlib.sha256(f"format={FORMAT}\n".encode())
    digest.update(cachekey.torch_version_file().read_bytes())
    digest.update(f"python={sys.version_info[:2]}\n".encode())
    for name in chapter_packages(root):
        digest.update(f"{name}=={_version(name)}\n".encode())
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
    """The reusable fences of a recorded run, by (chapter, fence id); empty if there is no
    record. A record that does not parse is an error (``fencecheck.record.BadFile``) naming it:
    its outcomes are not dropped and every mutant re-run silently."""
    from fencecheck.mutation import REGENERATE
    from fencecheck.record import read_json

    if not Path(path).exists():
        return {}
    data = read_json(path, REGENERATE, ("fences",))
    return {(f["chapter"], f["fence"]): f for f in data.get("fences", [])
            if f.get("key") and "outcomes" in f}


def outcomes(mutants: list[dict]) -> list[list]:
    """One fence's mutants as stored: ``[number, outcome, detail]``, the detail kept only
    where the report shows it (not for an ordinary kill)."""
    out = []
    for m in mutants:
        keep = m["outcome"] != "killed" or m["detail"].startswith("timed out")
        out.append([m["number"], m["outcome"], m["detail"] if keep else ""])
    return out


def reusable(entry: dict | None, key: str, mutants: list) -> bool:
    """Can ``entry`` (a stored fence) stand for this run of a fence with these mutants?"""
    return bool(entry) and entry.get("key") == key and \
        [o[0] for o in entry["outcomes"]] == [m.number for m in mutants]


def apply(entry: dict, mutants: list) -> None:
    """Give each freshly made mutant the outcome stored for it."""
    by_number = {o[0]: o for o in entry["outcomes"]}
    for mutant in mutants:
        _, mutant.outcome, mutant.detail = by_number[mutant.number]
        # a justified survivor is stored as judged; judge it again against the allowlist now
        if mutant.outcome == "justified":
            mutant.outcome = "survived"
