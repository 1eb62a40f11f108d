"""Execute the book's chapters in parallel into the site build's execution cache.

    python tools/preexecute.py [_build/.jupyter_cache]       (run by `make book`)

`jupyter-book build` (myst-nb, execution mode "cache") executes the
chapters one after another. This script executes the chapters the cache
does not hold yet, one fresh kernel per chapter, in parallel, and stores
each in the same jupyter-cache the build reads. The build then finds every
chapter cached and only renders.

What is cached is what myst-nb would have cached: the notebook read by
myst-nb's own reader (so the cache key, a hash of the code cells and the
kernelspec, is the one the build looks up), executed by jupyter-cache's
nbclient helper in the chapter's folder with the build's timeout. A
chapter that fails is not cached: the build executes it again and reports
the failing cell. The cache is the folder `fencecheck.cachekey.cache_path`
names for the current torch, the runtime (fences/) and packages: the one the build
reads (fencecheck.sphinx points myst-nb at it).

The chapters are checked newest first, and the first one the cache lacks
gets its kernel at once (``start_kernel``): it boots while the others are
checked, and that chapter runs in it, in this process. The others run in
as many worker processes as there are cores, one fresh kernel each (for a
while one kernel more than the cores: fewer workers would leave one core
idle once the first chapter is done).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fencecheck.cachekey import cache_path  # noqa: E402


def read(path: Path, text: str | None = None):
    """The chapter as the build reads it (``fencecheck.chapter.parse``), so the cache keys match."""
    from fencecheck.chapter import parse

    return parse(Path(path).read_text(encoding="utf-8") if text is None else text, path)


def execute(job, km=None):
    """Run one chapter; (path, nb, ok, seconds). Any failure, a kernel that died or never
    started included, is a chapter not cached, never the end of the other chapters' run."""
    from fencecheck.chapter import cell_timeout
    from fencecheck.upstream import jupyter_cache

    path, nb = job
    try:
        ok, seconds = jupyter_cache.execute(nb, cwd=str(path.parent), timeout=cell_timeout(ROOT), km=km)
    except Exception as error:   # noqa: BLE001 - reported; the build executes it and says why
        print(f"preexecute: {path.name}: {type(error).__name__}: {error}", flush=True)
        ok, seconds = False, 0.0
    return path, nb, ok, seconds


def start_kernel(path: Path, nb, kernels: list):
    """A fresh kernel for ``nb``, started now; None when it cannot start (the run starts one).

    The kernel boots while the other chapters are checked against the cache,
    instead of after: nbclient starts it as it would for this notebook
    (``create_kernel_manager``, ``start_new_kernel``: its kernel, arguments and
    working folder), and the chapter then runs in it (``execute(..., km)``).
    Its manager is added to ``kernels`` before the kernel starts, so that the
    caller stops it whatever happens next.
    """
    from nbclient import NotebookClient

    client = NotebookClient(nb, resources={"metadata": {"path": str(path.parent)}})
    kernels.append(client.create_kernel_manager())
    try:
        client.start_new_kernel()
    except Exception as error:   # noqa: BLE001 - execute() starts its own kernel
        print(f"preexecute: {path.name}: could not start its kernel early ({error})", flush=True)
        return None
    return client.km


def stop_kernel(km) -> None:
    """Stop a kernel ``start_kernel`` started (nbclient stops only those it starts).

    The kernel client nbclient made for it keeps its sockets until this
    process ends, a moment later: nbclient closes a client only when it
    started the kernel too."""
    from nbclient.util import run_sync

    if km is not None and km.has_kernel:
        run_sync(km.shutdown_kernel)(now=True)


#: The parse cache outside the clone (fencecheck.chapter.parse_cache_dir) keeps at most this
#: many chapters, and none older than ``PARSED_DAYS`` days: every edit of a chapter adds one.
PARSED_KEEP, PARSED_DAYS = 256, 14


def prune_parsed(folder: Path, keep: int = PARSED_KEEP, days: float = PARSED_DAYS,
                 now: float | None = None) -> int:
    """Remove the parsed chapters written more than ``days`` ago, then the oldest beyond
    ``keep``, and half-written files left by a killed process; the number removed. A removed
    entry is only parsed again (0.1 s) when it is read."""
    import time

    now = time.time() if now is None else now
    try:
        entries = sorted(((p.stat().st_mtime, p) for p in Path(folder).iterdir()
                          if p.is_file() and p.suffix in (".ipynb", ".tmp")), reverse=True)
    except OSError:
        return 0
    removed = 0
    for n, (mtime, path) in enumerate(entries):
        stray = path.suffix == ".tmp" and now - mtime > 3600
        if stray or now - mtime > days * 86400 or n >= keep:
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _stopped(signum, frame):
    """SIGTERM (make book's trap ends this process group): unwind, so that ``main`` stops
    the kernel it started early (a kernel runs in a session of its own)."""
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    import signal

    from fencecheck.chapter import parse_cache_dir

    signal.signal(signal.SIGTERM, _stopped)
    prune_parsed(parse_cache_dir())
    folder = cache_path(Path(argv[0]) if argv else ROOT / "_build" / ".jupyter_cache")
    kernels: list = []
    try:
        return fill(folder, kernels)
    finally:
        for km in kernels:   # the kernel started early, which nbclient leaves running
            stop_kernel(km)


def newest_first(paths: list[Path]) -> list[Path]:
    """The chapters, the last edited first: after an edit, its chapter is the one to run."""
    return sorted(paths, key=lambda path: path.stat().st_mtime if path.exists() else 0, reverse=True)


def fill(folder: Path, kernels: list) -> int:
    """Execute the chapters ``folder``'s cache lacks, and cache them. The kernel started
    early is added to ``kernels``, for the caller to stop."""
    from fencecheck.chapter import header_problems, toc_files
    from fencecheck.upstream import jupyter_cache

    cache = jupyter_cache.get_cache(folder)
    first, km, rest = None, None, []
    for path in newest_first(toc_files(ROOT)):
        text = path.read_text(encoding="utf-8") if path.exists() else None
        if text is None or header_problems(text):
            continue  # the build refuses it, naming the file
        nb = read(path, text)
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            if first is None:
                first, km = (path, nb), start_kernel(path, nb, kernels)
            else:
                rest.append((path, nb))
    return run(cache, first, km, rest)


def run(cache, first, km, rest) -> int:
    """Execute ``first`` here in ``km`` and ``rest`` in worker processes, caching each success."""
    from fencecheck.upstream import jupyter_cache

    if first is None:
        print("preexecute: every chapter is cached")
        return 0
    print(f"preexecute: executing {1 + len(rest)} chapter(s)", flush=True)

    def report(path, nb, ok, seconds):
        name = path.relative_to(ROOT)
        if ok:
            jupyter_cache.store(cache, nb, str(path), seconds)
            print(f"preexecute: {name} executed in {seconds:.1f} s, cached", flush=True)
        else:
            print(f"preexecute: {name} FAILED; the build will execute it and report the cell", flush=True)

    if not rest:
        report(*execute(first, km))
        return 0
    # forkserver: this process holds a kernel's sockets and an event loop, which a forked
    # worker must not share. The workers start from a server that has imported the executor.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["fencecheck.upstream.jupyter_cache"])
    with ProcessPoolExecutor(min(len(rest), os.cpu_count() or 1), mp_context=context) as pool:
        futures = {pool.submit(execute, job): job for job in rest}
        report(*execute(first, km))
        for future, (path, nb) in futures.items():
            try:
                report(*future.result())
            except Exception as error:   # noqa: BLE001 - a worker that died: that chapter only
                print(f"preexecute: {path.relative_to(ROOT)}: worker failed ({error})", flush=True)
                report(path, nb, False, 0.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
