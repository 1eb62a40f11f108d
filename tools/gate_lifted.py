"""A fence gated on a device must need it: run each gated fence with the gate lifted.

    python tools/gate_lifted.py [CHAPTER.md ...]     (default: every chapter of _toc.yml)

A fence whose code calls ``fences.needs("cuda")`` or ``fences.needs("mps")`` is
recorded "not yet run" on a machine without the device, and its mutants never
run. So a CPU claim behind the gate would never be checked anywhere but on a
GPU. This tool runs the chapter as ``tools/mutate.py`` does (its cells with
``exec`` in one namespace, in a process forked from one that imported torch),
and just before each gated fence forks a child in which ``fences.needs``
returns True while each device's probe (the torch function ``fences.DEVICES``
names for it) returns False (this machine has no device; the probes are forced
False in the child so the check means the same on a GPU machine) and runs the
fence there. The fence must fail: it needs the device.
One that passes is reported with its chapter, line and id, "this fence passes
without the device: move its CPU part out of the gate", and the run exits 1.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import mutate  # noqa: E402 - tools/ is this script's folder
from fences import DEVICES, GATE  # noqa: E402 - GPU detection's one home

MESSAGE = "this fence passes without the device: move its CPU part out of the gate"
TIMEOUT = mutate.TIMEOUT   # the cell timeout (_config.yml's execute.timeout), as for a mutant


def lifted(source: str, namespace: dict) -> dict:
    """Run ``source`` in ``namespace`` with every device gate lifted and no device present."""
    import torch

    import fences

    fences.needs = lambda device: True
    for name, value in list(namespace.items()):
        if getattr(value, "__name__", "") == "needs" and getattr(value, "__module__", "") == "fences":
            namespace[name] = fences.needs
    for path, _ in DEVICES.values():   # every device's probe False: none is present
        *owner, name = path.split(".")
        setattr(functools.reduce(getattr, owner, torch), name, lambda: False)
    result = mutate.execute(source, namespace, "<gate lifted>")
    result.pop("stdout", None)
    return result


def chapter_gates(path: Path) -> list[dict]:
    """Each gated fence of the chapter, run with its gate lifted: id, line, ok, error."""
    name, cells = mutate.read_chapter(path)
    os.chdir(Path(path).resolve().parent)
    namespace = {"__name__": "__main__"}
    found = []
    gated = [c.index for c in cells if c.fence and GATE.search(c.source)]
    for cell in cells:
        if cell.index > max(gated, default=-1):
            break
        if cell.index in gated:
            child = mutate.Child(lambda cell=cell, namespace=namespace: lifted(cell.source, namespace), TIMEOUT)
            mutate.gather([child], lambda c: None)
            result = dict(child.result or {})
            if child.timed_out:
                result = {"ok": False, "error": f"timed out after {TIMEOUT:.0f} s"}
            found.append({"chapter": name, "fence": cell.fence, "line": cell.line,
                          "ok": bool(result.get("ok")),
                          "error": result.get("error") or result.get("crash", "")})
        mutate.execute(cell.source, namespace, f"{name}:cell {cell.index}")
    return found


def run(paths: list[Path]) -> list[dict]:
    """Every gated fence of ``paths``, each chapter in a process of its own."""
    mutate.prepare_root()
    out = []
    for path in paths:
        if not GATE.search(Path(path).read_text(encoding="utf-8")):
            continue
        child = mutate.Child(lambda path=path: chapter_gates(path), None, quiet=True)
        mutate.gather([child], lambda c: None)
        result = child.result
        if isinstance(result, dict) and "crash" in result:
            out.append({"chapter": str(path), "fence": "", "line": 0, "ok": False,
                        "error": "the chapter could not run: " + result["crash"][-300:]})
        else:
            out.extend(result or [])
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if args.chapters:
        paths = args.chapters
    else:
        from fencecheck.chapter import toc_files

        paths = toc_files(ROOT)
    found = run(paths)
    passing = [f for f in found if f["ok"]]
    for f in found:
        print(f"{f['chapter']}:{f['line']} fence {f['fence']}: "
              + (MESSAGE if f["ok"] else f"fails with the gate lifted ({f['error'][:120]})"))
    print(f"{len(found)} gated fences, {len(passing)} pass without the device")
    return 1 if passing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
