"""How fast is the author's loop and the verify loop, against their floors?

    python benchmarks/bench.py [--runs N] [--only prose,sphinx-prose,...]     (make bench)

Measures on this machine, round by round (each measure once per round, N rounds), and
prints a table of medians, then the ratios against their goals (``TARGETS``, issue #52),
each ratio taken within one run:

- floor: every fence's code executed once, chapter after chapter, in one Python process
  (one torch import, a fresh namespace per chapter): the least work that re-verifies it.
- prose: `make book` after a one-word prose edit of views.md.
- sphinx-prose: Sphinx's own incremental build of the same edit (`jupyter-book build`
  into the same private folder, nothing else).
- code: `make book` after a one-number code-cell edit of views.md (that chapter runs
  again, under the test plugin, and Sphinx re-renders).
- chapter: views.md executed in a fresh kernel (nbclient): what the code edit costs at least.
- live: `make live` running, the prose edit saved: seconds until the open page shows it.
- test: `make test` as it runs (the execution cache warm: chapters read back).
- test-fresh (``--only test-fresh``): `make test FRESH=1`: every chapter executed.
- kernel, mutate (``--only``): a fresh kernel importing what a chapter imports; `tools/mutate.py --fresh`.

Also printed: the tooling's size, tracked .py outside tests/, book/, benchmarks/ and
conftest.py (goal: at most 4,800 lines).
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
sys.path.insert(0, str(ROOT))
from fencecheck.chapter import cell_timeout  # noqa: E402 - the cell timeout's one reader
TARGETS = {"prose / sphinx-prose": 1.3, "code / (chapter + prose)": 1.3,
           "live / sphinx-prose": 1.3, "test / floor": 2.0}
TOOLING_GOAL = 4800

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
            try:
                exec(compile(cell.source, f"{path.name}", "exec"), namespace)
            except AssertionError:
                print("FLOOR-FAILED", cell.metadata.get("fence-id"))
print(f"FLOOR {time.perf_counter() - t0:.3f}")
"""
#: Fences that hold only in a process of their own chapter (torch warns once per process),
#: which the one-process floor runs after other chapters: allowed to fail there.
ONCE_PER_PROCESS = {"creation-ref-not-writable"}


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
    failed = set(re.findall(r"^FLOOR-FAILED (\S+)", out.stdout, re.M))
    assert failed <= ONCE_PER_PROCESS, f"the floor: fences failed in one process: {failed}"
    return time.perf_counter() - start


def test() -> float:
    """`make test` as it runs by default: every test run; the chapters whose run the execution cache holds, and the
    tooling's proofs stored under an unchanged key (tests/conftest.py: proven), read back."""
    return timed(["make", "test"])


def test_fresh() -> float:
    """`make test FRESH=1`: every chapter executed, every tooling proof run."""
    return timed(["make", "test", "FRESH=1"])


EDITED = ROOT / "book" / "views.md"
WORD = "one flat run of elements"   # a prose line of views.md; "run" is the word changed


def edited(change):
    """A context: views.md with ``change(text)`` applied; put back (and built, untimed) after."""
    import contextlib

    @contextlib.contextmanager
    def context():
        if not (ROOT / "_build" / "html" / "index.html").exists():
            timed(["make", "book"])
        original = EDITED.read_text()
        try:
            EDITED.write_text(change(original))
            yield
        finally:
            EDITED.write_text(original)
            timed(["make", "book"])
    return context()


def prose_edit(text: str, token: str = "") -> str:
    """One word of views.md's prose changed (to ``token``, by default a new one each time)."""
    assert WORD in text, f"benchmarks/bench.py: views.md no longer says {WORD!r}"
    return text.replace(WORD, WORD.replace("run", token or f"row{time.time_ns() % 10**6}"), 1)


def prose() -> float:
    with edited(prose_edit):
        return timed(["make", "book"])


def sphinx_prose() -> float:
    with edited(prose_edit):
        return timed([str(ROOT / ".venv" / "bin" / "jupyter-book"), "build", ".", "--path-output",
                      "_build/.site", "-n", "-W", "--keep-going"])


def code_edit(text: str) -> str:
    start = text.index(":fence-id: views-hook\n")
    end = text.index("\n```\n", start) + 1    # the end of that fence's code
    return f"{text[:end]}bench_edit = {time.time_ns()}\n{text[end:]}"


def code() -> float:
    with edited(code_edit):
        return timed(["make", "book"])


CHAPTER = r"""
import sys
from pathlib import Path
from fencecheck.chapter import cell_timeout, parse
from fencecheck.upstream.jupyter_cache import execute
path = Path(sys.argv[1])
ok, seconds = execute(parse(path.read_text(), path), cwd=str(path.parent), timeout=cell_timeout(Path(".")))
assert ok
"""


def chapter() -> float:
    """views.md in a fresh kernel, as a reader's notebook runs it (nbclient)."""
    return timed([str(PYTHON), "-c", CHAPTER, str(EDITED)])


LIVE: dict = {}


def live() -> float:
    """Seconds from saving a prose edit to the open page showing it, `make live` running
    (started on first use, its first build untimed; stopped at the end of the run)."""
    import atexit
    import signal

    if "server" not in LIVE:
        server = subprocess.Popen(["make", "live", "LIVE_PORT=8765"], cwd=ROOT, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        atexit.register(lambda: os.killpg(server.pid, signal.SIGTERM))
        for line in server.stdout:
            if "Serving on" in line:
                break
        from playwright.sync_api import sync_playwright

        LIVE["pw"] = sync_playwright().start()
        LIVE["page"] = LIVE["pw"].chromium.launch(executable_path="/usr/bin/chromium",
                                                 args=["--no-sandbox"]).new_page()
        LIVE["server"] = server
    page = LIVE["page"]
    page.goto("http://127.0.0.1:8765/book/views.html", wait_until="load")
    original = EDITED.read_text()
    new = f"row{time.time_ns() % 10**6}"
    changed = prose_edit(original, new)
    try:
        EDITED.write_text(changed)
        start = time.perf_counter()
        page.wait_for_function(f"() => document.body.innerText.includes({new!r})", timeout=300_000)
        return time.perf_counter() - start
    finally:
        EDITED.write_text(original)
        page.wait_for_function(f"() => !document.body.innerText.includes({new!r})", timeout=300_000)


def tooling_lines() -> int:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    counted = [f for f in files if not f.startswith(("tests/", "book/", "benchmarks/"))
               and not f.endswith("conftest.py") and (ROOT / f).exists()]   # a deletion not yet committed
    return sum(len((ROOT / f).read_text().splitlines()) for f in counted)


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


def mutate() -> float:
    """`make mutate` on the whole book, every mutant run (``--fresh``: nothing reused from
    the record); its exit status (survivors or not) is not the point."""
    start = time.perf_counter()
    subprocess.run([str(PYTHON), "tools/mutate.py", "--fresh", "--json", os.devnull], cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


MEASURES = {"floor": floor, "prose": prose, "sphinx-prose": sphinx_prose, "code": code,
            "chapter": chapter, "live": live, "test": test, "test-fresh": test_fresh,
            "kernel": kernel, "mutate": mutate}


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem / 2**30:.0f} GiB, Python {platform.python_version()}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="floor,prose,sphinx-prose,code,chapter,live,test")
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
    m = medians
    ratios = {}
    if {"prose", "sphinx-prose"} <= m.keys():
        ratios["prose / sphinx-prose"] = m["prose"] / m["sphinx-prose"]
    if {"code", "chapter", "prose"} <= m.keys():
        ratios["code / (chapter + prose)"] = m["code"] / (m["chapter"] + m["prose"])
    if {"live", "sphinx-prose"} <= m.keys():
        ratios["live / sphinx-prose"] = m["live"] / m["sphinx-prose"]
    if {"test", "floor"} <= m.keys():
        ratios["test / floor"] = m["test"] / m["floor"]
    lines = tooling_lines()
    print(f"\ntooling: {lines} lines of .py outside tests/, book/, benchmarks/ (goal: at most "
          f"{TOOLING_GOAL}: {'met' if lines <= TOOLING_GOAL else 'NOT met'})")
    if ratios:
        print("\n| ratio | value | target | met |\n|---|---|---|---|")
        for name, value in ratios.items():
            met = "yes" if value <= TARGETS[name] else "NO"
            print(f"| {name} | {value:.2f} | <= {TARGETS[name]} | {met} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
