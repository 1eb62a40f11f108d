"""How fast is the verify loop, against its floor?

    python benchmarks/bench.py [--runs N] [--only floor,book-tests,edit,...]     (make bench)

Measures on this machine, round by round (each measure once per round, N
rounds), and prints a table of medians:

- floor: every fence's code executed once, chapter after chapter, in one
  Python process (one torch import, a fresh namespace per chapter). No
  kernel, no pytest, no Sphinx: the least work that re-verifies the book.
- cold build: `make book` after removing _build.
- warm build: `make book` again with nothing changed.
- edit: `make book` after one code cell of a lesson chapter (views.md) changed:
  that chapter re-executes in a fresh kernel, then Sphinx re-renders.
- prose (``--only prose``): `make book` after one Markdown paragraph of the same
  chapter changed: Sphinx alone, nothing executed.
- kernel (``--only kernel``): a fresh Jupyter kernel importing what a chapter
  imports, then shut down: what re-executing any edited chapter costs at least.
- book-tests: `make test PYTEST_ARGS=book`: every chapter's fences under pytest, in
  a fresh kernel each, with the state guard: the harness's cost over the floor.
- test: `make test` wall time, everything run (the chapters and the tooling's own
  tests: the must-fail corpus, the small site builds, the mutate runs), .venv present.
- test-reuse (``--only test-reuse``): `make test` with ``FENCES_REUSE_OUTCOMES=1``,
  the tooling's subprocess proofs reused while their inputs are unchanged (opt-in).
- mutate (``--only mutate``): `tools/mutate.py --fresh` over the whole book, every
  mutant of every fence run, nothing reused; timed whatever its verdict.

Then the ratios against their targets (``TARGETS``): the chapters under pytest within
1.3 times the floor, the cold build within 3 times, a warm build a tenth of a cold
one, and the views edit in 8 s.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
sys.path.insert(0, str(ROOT))
from fencecheck.chapter import cell_timeout  # noqa: E402 - the cell timeout's one reader
TARGETS = {"book-tests / floor": 1.3, "cold build / floor": 3.0, "warm / cold build": 0.10,
           "book after one views code-cell edit (s)": 8.0}

FLOOR = r"""
import os, sys, time
t0 = time.perf_counter()
import torch, matplotlib
matplotlib.use("Agg")
from fencecheck.chapter import read, toc_files
from pathlib import Path
root = Path(sys.argv[1])
os.chdir(root / "book")
for path in toc_files(root):
    nb, _ = read(path)
    namespace = {"__name__": "__main__"}
    for cell in nb.cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, f"{path.name}", "exec"), namespace)
print(f"FLOOR {time.perf_counter() - t0:.3f}")
"""


def timed(cmd: list[str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def floor() -> float:
    """The whole floor process, torch import included, timed from outside."""
    start = time.perf_counter()
    out = subprocess.run([str(PYTHON), "-c", FLOOR, str(ROOT)], cwd=ROOT, check=True,
                         capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    assert "FLOOR" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    return time.perf_counter() - start


def book_tests() -> float:
    """Every chapter's fences under pytest (fresh kernels, the state guard), nothing else."""
    return timed(["make", "test", "PYTEST_ARGS=book"])


def test() -> float:
    """`make test` as it runs by default: every test run, no outcome reused."""
    return timed(["make", "test"], env={**os.environ, "FENCES_REUSE_OUTCOMES": ""})


def test_reuse() -> float:
    """`make test` with the opt-in reuse of the tooling's subprocess proofs."""
    return timed(["make", "test"], env={**os.environ, "FENCES_REUSE_OUTCOMES": "1"})


def cold() -> float:
    shutil.rmtree(ROOT / "_build", ignore_errors=True)
    return timed(["make", "book"])


EDITED = ROOT / "book" / "views.md"


def edit() -> float:
    """`make book` after editing one code cell of a lesson chapter (a line added to its
    first fence: a new cell source, so the chapter re-executes)."""
    if not (ROOT / "_build" / "html" / "index.html").exists():
        timed(["make", "book"])
    original = EDITED.read_text()
    start = original.index(":fence-id: views-hook\n")
    end = original.index("\n```\n", start) + 1  # the end of that fence's code
    try:
        EDITED.write_text(f"{original[:end]}bench_edit = {time.time()}\n{original[end:]}")
        return timed(["make", "book"])
    finally:
        restore(original)


def prose() -> float:
    """`make book` after editing one Markdown paragraph: nothing to execute, only Sphinx."""
    if not (ROOT / "_build" / "html" / "index.html").exists():
        timed(["make", "book"])
    original = EDITED.read_text()
    title = next(line for line in original.splitlines() if line.startswith("# "))
    try:
        EDITED.write_text(original.replace(title, f"{title}\n\nBench edit {time.time()}.", 1))
        return timed(["make", "book"])
    finally:
        restore(original)


def restore(original: str) -> None:
    """Put the edited chapter back and build it (untimed): the next measure finds the site
    current, as it would have without this one."""
    EDITED.write_text(original)
    timed(["make", "book"])


KERNEL = r"""
import nbformat
from nbclient import NotebookClient
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    "import torch, numpy, hypothesis, matplotlib.pyplot\nimport fences")])
nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3").execute()
""".replace("TIMEOUT", repr(cell_timeout(ROOT)))


def kernel() -> float:
    """A fresh kernel that imports what a chapter imports, then shuts down: the least an
    edited chapter's re-execution costs (the site runs each chapter in a fresh kernel)."""
    return timed([str(PYTHON), "-c", KERNEL])


def warm() -> float:
    if not (ROOT / "_build" / "html" / "index.html").exists():
        timed(["make", "book"])
    return timed(["make", "book"])


def mutate() -> float:
    """`make mutate` on the whole book, every mutant run (``--fresh``: nothing reused from
    the record); its exit status (survivors or not) is not the point."""
    start = time.perf_counter()
    subprocess.run([str(PYTHON), "tools/mutate.py", "--fresh", "--json", os.devnull], cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


# In this order: cold and warm leave a built site behind, so every later measure starts from one.
MEASURES = {"floor": floor, "cold": cold, "warm": warm, "edit": edit, "book-tests": book_tests,
            "test": test, "test-reuse": test_reuse, "mutate": mutate, "prose": prose,
            "kernel": kernel}


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem / 2**30:.0f} GiB, Python {platform.python_version()}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="floor,cold,warm,edit,book-tests,test")
    args = parser.parse_args(argv)
    names = args.only.split(",")
    # Round by round (each measure once per round), so that a machine that slows down or
    # speeds up during the runs moves every measure alike and their ratios stay fair.
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(args.runs):
        for name in names:
            samples[name].append(MEASURES[name]())
            print(f"  {name} run {i + 1}: {samples[name][-1]:.1f} s", flush=True)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    torch_version = subprocess.run([str(PYTHON), "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    print(f"\nmachine: {machine()}; torch {torch_version}; median of {args.runs} runs\n")
    print("| measure | seconds |\n|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.1f} |")
    ratios = {}
    if "floor" in medians:
        if "book-tests" in medians:
            ratios["book-tests / floor"] = medians["book-tests"] / medians["floor"]
        if "cold" in medians:
            ratios["cold build / floor"] = medians["cold"] / medians["floor"]
    if "cold" in medians and "warm" in medians:
        ratios["warm / cold build"] = medians["warm"] / medians["cold"]
    if "edit" in medians:
        ratios["book after one views code-cell edit (s)"] = medians["edit"]
    if {"edit", "kernel", "prose"} <= medians.keys():
        share = medians["edit"] / (medians["kernel"] + medians["prose"])
        print(f"\nedit / (kernel + prose): {share:.2f} (how much of the two floors the edit overlaps)")
    if ratios:
        print("\n| ratio | value | target | met |\n|---|---|---|---|")
        for name, value in ratios.items():
            met = "yes" if value <= TARGETS[name] else "NO"
            print(f"| {name} | {value:.2f} | <= {TARGETS[name]} | {met} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
