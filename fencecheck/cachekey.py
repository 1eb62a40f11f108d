"""Keep the site build's caches honest.

jupyter-cache re-executes a chapter when its code cells or kernelspec
change, and for nothing else; Sphinx re-renders a page when its source
changes. A page executed under another torch, or with another version of
the runtime (the ``fences`` package, ``RUNTIME``), would be served unchanged by
both. This module keys the execution cache on those as well: ``fencecheck.sphinx``
points myst-nb at ``cache_path(...)``, a folder named by the key, at
``config-inited``. Any build command passes there (``make book``, a plain
``jupyter-book build .``). A new key is a new config value, so Sphinx re-reads
every page and myst-nb executes into the new, empty cache; an old key's folder is
reused when its torch comes back.

    python -m fencecheck.cachekey _build     # prints the cache folder the build uses
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

#: This package, the verifier: it never runs in a chapter's kernel.
VERIFIER = Path(__file__).resolve().parent


def _runtime() -> Path:
    """The ``fences`` package this Python imports (found, not imported). A chapter's kernel
    runs in the same environment and, from book/, finds the same copy (the editable
    install's); a process that puts another checkout first on ``sys.path`` keys that one."""
    spec = importlib.util.find_spec("fences")
    if spec is None or spec.origin is None:
        raise SystemExit("fencecheck.cachekey: the fences package is not importable")
    return Path(spec.origin).resolve().parent


#: The runtime: the ``fences`` package, all that a chapter's kernel loads of this project
#: (what a chapter imports, and the test plugin's warm-up and state guard). Only it
#: decides what a chapter's cells output, so only it keys the execution cache and
#: make mutate's reuse: an edit of the verifier (the Sphinx extension, the record, the
#: lint) re-renders without re-executing or re-mutating. It is also all that the wheel
#: the site ships holds. tests/test_cache.py checks that a kernel loads nothing else.
RUNTIME = _runtime()


def digest(package: Path | None = None) -> str:
    """A hash of every Python file in ``package`` (the runtime by default), paths and
    contents."""
    package = RUNTIME if package is None else package
    sha = hashlib.sha256()
    for path in sorted(Path(package).rglob("*.py")):
        if path.name.startswith(".") or not path.is_file():
            continue  # an editor's lock file or a dangling link is not a module
        sha.update(path.relative_to(package).as_posix().encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()


def torch_version_file() -> Path:
    """torch's ``version.py``: the release, the git commit and the CUDA/ROCm version it was
    built for, read without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("fencecheck.cachekey: torch is not installed")
    return Path(spec.origin).parent / "version.py"


def key() -> str:
    """torch's version and build, Python's version, a hash of the runtime (``RUNTIME``)
    and of the versions of what a chapter's kernel can import (``kernel_packages``).

    The release matrix's results (results/*.json) are not part of it: no
    executed page reads them. The Sphinx extension renders them, and reads again
    the pages whose part of the record changed (``fencecheck.sphinx``), so new
    results cost no execution.

    torch is not imported (that costs seconds): its version file, which names the
    release, the git commit and the CUDA/ROCm version it was built for, is hashed.
    """
    torch_build = torch_version_file().read_bytes()
    parts = [
        f"torch={importlib.metadata.version('torch')}",
        f"torch-build={hashlib.sha256(torch_build).hexdigest()[:16]}",
        f"python={sys.version_info.major}.{sys.version_info.minor}",
        f"fences={digest()[:16]}",
        f"book={hashlib.sha256(chr(10).join(kernel_packages()).encode()).hexdigest()[:16]}",
    ]
    return " ".join(parts)


#: The one list of dependencies; its ``book`` extra is what a chapter's kernel imports.
PYPROJECT = VERIFIER.parent / "pyproject.toml"
#: Imported by the kernel too, outside the ``book`` extra: ``fences.glue`` publishes
#: through myst-nb (its version is in the key; what it requires, Sphinx's stack, is not).
ALSO_IN_KERNEL = ("myst-nb",)


def kernel_packages(pyproject: Path = PYPROJECT) -> list[str]:
    """``name==version`` of every installed distribution a chapter's kernel can import:
    the ``book`` extra of ``pyproject`` with all it requires, and ``ALSO_IN_KERNEL``,
    resolved in this environment (markers evaluated, extras followed), sorted. A tool no
    chapter imports (pypdf, playwright, jupyter-book) is not in it. The extra is read
    from pyproject.toml, not from the installed metadata, which an in-tree
    ``*.egg-info`` could shadow."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    book = tomllib.loads(Path(pyproject).read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]["book"]
    roots = [Requirement(line) for line in book]
    seen: dict[tuple[str, tuple], str] = {}
    for name in ALSO_IN_KERNEL:   # its own version: the kernel calls one function of it
        try:
            seen[canonicalize_name(name), ()] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    todo = [(r.name, tuple(sorted(r.extras))) for r in roots if r.marker is None or r.marker.evaluate()]
    while todo:
        name, extras = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        here = (canonicalize_name(dist.metadata["Name"]), tuple(extras))
        if here in seen:
            continue
        seen[here] = dist.version
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, tuple(sorted(req.extras))))
    return sorted({f"{name}=={version}" for (name, _), version in seen.items()})


def cache_path(base: Path) -> Path:
    """The execution cache for the current key: a folder of ``base`` named by its hash.

    Each torch (and each state of the runtime and the installed packages) gets
    its own jupyter-cache, so a page is never served from a
    run under other code, and switching back to a torch reuses its cache.
    """
    return Path(base) / hashlib.sha256(key().encode()).hexdigest()[:16]


def cache_base(root: Path) -> Path:
    """Where a book's execution caches live: ``_build/.jupyter_cache`` of its source folder,
    whatever folder the site is built into. The test plugin stores each chapter it ran
    there and the site build reads it (``cache_path`` of it)."""
    return Path(root) / "_build" / ".jupyter_cache"


#: One line per chapter execution, appended by each executor: when, what, where, which key.
EXECUTIONS = "executions.log"


def log_execution(root: Path, chapter: str, executor: str) -> None:
    """Note that ``executor`` executed ``chapter`` (a path relative to the book's root)."""
    import time

    path = Path(root) / "_build" / EXECUTIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}\t{chapter}\t{executor}\t{key()}\n"
    with open(path, "a", encoding="utf-8") as log:   # one short write: lines do not interleave
        log.write(line)


def executions(root: Path, since: str = "") -> dict[tuple[str, str], int]:
    """(chapter, key) -> how many times it was executed, from the log, lines at or after
    ``since`` (an ISO time) only."""
    counts: dict[tuple[str, str], int] = {}
    path = Path(root) / "_build" / EXECUTIONS
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        when, chapter, _, run_key = (line.split("\t") + ["", "", ""])[:4]
        if when >= since:
            counts[chapter, run_key] = counts.get((chapter, run_key), 0) + 1
    return counts


def main(argv: list[str]) -> int:
    """Print the cache folder for ``_build`` (or the folder given): what the build reads.
    ``--executions SINCE MOST``: how many times each chapter was executed on this torch
    since SINCE (an ISO time, UTC), from the log; fails if one was more than MOST times."""
    if argv[:1] == ["--executions"]:
        since, most = argv[1], int(argv[2])
        here = key().split()[0]      # torch=<release>: the runs on this torch, any executor
        counts: dict[str, int] = {}
        for (chapter, run_key), n in executions(Path("."), since).items():
            if run_key.split()[:1] == [here]:
                counts[chapter] = counts.get(chapter, 0) + n
        for chapter, n in sorted(counts.items()):
            print(f"executed {n} time(s) on {here}: {chapter}")
        over = [c for c, n in counts.items() if n > most]
        print(f"executions: {len(counts)} chapter(s), at most {max(counts.values(), default=0)} "
              f"time(s) each on {here} (goal: at most {most})")
        return 1 if over else 0
    print(cache_path(Path(argv[0] if argv else "_build") / ".jupyter_cache"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
