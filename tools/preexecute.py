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

from fences.cachekey import cache_path  # noqa: E402
from fences.chapter import cell_timeout, header_problems, toc_files  # noqa: E402
from fences.upstream import jupyter_cache, myst_nb  # noqa: E402

TIMEOUT = cell_timeout(ROOT)


read = myst_nb.read_notebook  # as the build reads it, so the cache keys match


def execute(job):
    path, nb = job
    ok, seconds = jupyter_cache.execute(nb, cwd=str(path.parent), timeout=TIMEOUT)
    return path, nb, ok, seconds


def main(argv: list[str]) -> int:
    cache = jupyter_cache.get_cache(cache_path(Path(argv[0]) if argv else ROOT / "_build" / ".jupyter_cache"))
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
