"""Execute the book's chapters in parallel into the site build's execution cache.

    python tools/preexecute.py [_build/.jupyter_cache]       (run by `make book`)

`jupyter-book build` (myst-nb, execution mode "cache") executes the
chapters one after another. This script executes the chapters the cache
does not hold yet, one fresh kernel per chapter, as many at once as there
are cores, and stores each in the same jupyter-cache the build reads. The
build then finds every chapter cached and only renders.

What is cached is what myst-nb would have cached: the notebook read by
myst-nb's own reader (so the cache key, a hash of the code cells and the
kernelspec, is the one the build looks up), executed by jupyter-cache's
nbclient helper in the chapter's folder with the build's timeout. A
chapter that fails is not cached: the build executes it again and reports
the failing cell. The cache is the folder `fences.cachekey.cache_path`
names for the current torch, `fences/` and packages: the one the build
reads (fences.sphinx points myst-nb at it).
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fences.cachekey import cache_path, running_lock  # noqa: E402 - light: the lock comes first


def read(path: Path, text: str | None = None):
    """The chapter as the build reads it (myst-nb's reader), so the cache keys match."""
    from fences.upstream import myst_nb

    return myst_nb.read_notebook(path, text)


def execute(job):
    from fences.chapter import cell_timeout
    from fences.upstream import jupyter_cache

    path, nb = job
    ok, seconds = jupyter_cache.execute(nb, cwd=str(path.parent), timeout=cell_timeout(ROOT))
    return path, nb, ok, seconds


def main(argv: list[str]) -> int:
    folder = cache_path(Path(argv[0]) if argv else ROOT / "_build" / ".jupyter_cache")
    lock = running_lock(folder)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(str(os.getpid()))
    try:
        return fill(folder)
    finally:
        lock.unlink(missing_ok=True)


def fill(folder: Path) -> int:
    from fences.chapter import header_problems, toc_files
    from fences.upstream import jupyter_cache

    cache = jupyter_cache.get_cache(folder)
    pending = []
    for path in toc_files(ROOT):
        text = path.read_text(encoding="utf-8") if path.exists() else None
        if text is None or header_problems(text):
            continue  # the build refuses it, naming the file
        nb = read(path, text)
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            pending.append((path, nb))
    if not pending:
        print("preexecute: every chapter is cached")
        return 0
    workers = min(len(pending), os.cpu_count() or 1)
    print(f"preexecute: executing {len(pending)} chapter(s) on {workers} worker(s)", flush=True)
    with ProcessPoolExecutor(workers) as pool:
        for path, nb, ok, seconds in pool.map(execute, pending):
            name = path.relative_to(ROOT)
            if ok:
                jupyter_cache.store(cache, nb, str(path), seconds)
                print(f"preexecute: {name} executed in {seconds:.1f} s, cached", flush=True)
            else:
                print(f"preexecute: {name} FAILED; the build will execute it and report the cell", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
