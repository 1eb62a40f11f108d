"""A fence gated on a device must need it: run each gated fence with the gate lifted.

    python tools/gate_lifted.py [CHAPTER.md ...]     (default: every chapter of _toc.yml)

A fence gated by ``fences.needs("cuda")`` (or ``"mps"``) never runs on a machine without
the device, so a CPU claim behind the gate would be checked only on a GPU. The chapter runs
as in ``tools/mutate.py``; before each gated fence a forked child runs it with
``fences.needs`` returning True and each device's probe (``fences.DEVICES``) forced False,
the same on a GPU machine. The fence must fail; one that passes is reported and exits 1.
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
from fencecheck.chapter import toc_files  # noqa: E402
from fences import DEVICES, GATE  # noqa: E402 - GPU detection's one home

MESSAGE = "this fence passes without the device: move its CPU part out of the gate"


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


def _in_child(work, timeout: float | None = None):
    """``work()``'s result, run in a forked process (killed after ``timeout`` seconds)."""
    child = mutate.Child(work, timeout)
    mutate.gather([child], lambda c: None)
    return mutate._timed_out(timeout) if child.timed_out else child.result


def chapter_gates(path: Path) -> list[dict]:
    """Each gated fence of the chapter, run with its gate lifted: id, line, ok, error."""
    name, cells = mutate.read_chapter(path)
    os.chdir(Path(path).resolve().parent)
    namespace = {"__name__": "__main__"}
    found = []
    gated = [c.index for c in cells if c.fence and GATE.search(c.source)]
    for cell in cells[:max(gated, default=-1) + 1]:
        if cell.index in gated:
            result = _in_child(lambda cell=cell: lifted(cell.source, namespace), mutate.TIMEOUT)
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
        if GATE.search(Path(path).read_text(encoding="utf-8")):
            result = _in_child(lambda path=path: chapter_gates(path))
            if isinstance(result, dict) and "crash" in result:
                result = [{"chapter": str(path), "fence": "", "line": 0, "ok": False,
                           "error": "the chapter could not run: " + result["crash"][-300:]}]
            out.extend(result or [])
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path)
    args = parser.parse_args(argv)
    found = run(args.chapters or toc_files(ROOT))
    passing = [f for f in found if f["ok"]]
    for f in found:
        print(f"{f['chapter']}:{f['line']} fence {f['fence']}: "
              + (MESSAGE if f["ok"] else f"fails with the gate lifted ({f['error'][:120]})"))
    print(f"{len(found)} gated fences, {len(passing)} pass without the device")
    return 1 if passing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
