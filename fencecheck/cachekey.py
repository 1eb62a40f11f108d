"""The execution cache's key (torch's version and build, Python's, the runtime ``fences/``, what a chapter's kernel
can import), its folder per key (``cache_path``, which ``fencecheck.sphinx`` points myst-nb at), and the log of
executions. ``python -m fencecheck.cachekey _build`` prints the cache folder the build uses.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path

#: This package, the verifier: it never runs in a chapter's kernel.
VERIFIER = Path(__file__).resolve().parent
#: The one list of dependencies; its ``book`` extra is what a chapter's kernel imports.
PYPROJECT = VERIFIER.parent / "pyproject.toml"
#: Imported by the kernel outside the ``book`` extra: ``fences.glue`` publishes through myst-nb.
ALSO_IN_KERNEL = ("myst-nb",)
#: One line per chapter execution, appended by each executor: when, what, where, which key.
EXECUTIONS = "executions.log"


def _found(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"fencecheck.cachekey: {package} is not installed")
    return Path(spec.origin).resolve().parent


#: The runtime, the ``fences`` package this Python imports (found, not imported): all that a chapter's kernel loads
#: of this project, so only it keys the cache (an edit of the verifier re-renders without re-executing).
RUNTIME = _found("fences")


def digest(package: Path | None = None) -> str:
    """A hash of every Python file in ``package`` (the runtime by default), paths and contents."""
    package = RUNTIME if package is None else package
    sha = hashlib.sha256()
    for path in sorted(Path(package).rglob("*.py")):
        if path.name.startswith(".") or not path.is_file():
            continue  # an editor's lock file or a dangling link is not a module
        sha.update(path.relative_to(package).as_posix().encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()


def torch_version_file() -> Path:
    """torch's ``version.py`` (release, git commit, CUDA/ROCm version), found without importing torch."""
    return _found("torch") / "version.py"


def _short(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def key() -> str:
    """torch's version and build, Python's, a hash of the runtime and of ``kernel_packages``. Results files are not in
    it: no executed page reads them."""
    return " ".join([
        f"torch={importlib.metadata.version('torch')}",
        f"torch-build={_short(torch_version_file().read_bytes())}",
        f"python={sys.version_info.major}.{sys.version_info.minor}",
        f"fences={digest()[:16]}",
        f"book={_short(chr(10).join(kernel_packages()).encode())}",
    ])


def kernel_packages(pyproject: Path = PYPROJECT) -> list[str]:
    """``name==version`` of every installed distribution a chapter's kernel can import, sorted: the ``book`` extra
    with all it requires (markers evaluated, extras followed), read from pyproject.toml (an in-tree ``*.egg-info``
    could shadow the installed metadata), and ``ALSO_IN_KERNEL``."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    book = tomllib.loads(Path(pyproject).read_text(encoding="utf-8"))["project"]["optional-dependencies"]["book"]
    seen: dict[tuple[str, tuple], str] = {}
    for name in ALSO_IN_KERNEL:   # its own version only: the kernel calls one function of it
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            seen[canonicalize_name(name), ()] = importlib.metadata.version(name)
    roots = [Requirement(line) for line in book]
    todo = [(r.name, tuple(sorted(r.extras))) for r in roots if r.marker is None or r.marker.evaluate()]
    while todo:
        name, extras = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        here = (canonicalize_name(dist.metadata["Name"]), extras)
        if here in seen:
            continue
        seen[here] = dist.version
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        for req in map(Requirement, dist.requires or []):
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, tuple(sorted(req.extras))))
    return sorted({f"{name}=={version}" for (name, _), version in seen.items()})


def cache_path(base: Path) -> Path:
    """The execution cache for the current key: a folder of ``base`` named by its hash."""
    return Path(base) / _short(key().encode())


def cache_base(root: Path) -> Path:
    """Where a book's execution caches live, whatever folder the site is built into."""
    return Path(root) / "_build" / ".jupyter_cache"


def log_execution(root: Path, chapter: str, executor: str) -> None:
    """Note that ``executor`` executed ``chapter`` (a path relative to the book's root)."""
    path = Path(root) / "_build" / EXECUTIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}\t{chapter}\t{executor}\t{key()}\n"
    with open(path, "a", encoding="utf-8") as log:   # one short write: lines do not interleave
        log.write(line)


def executions(root: Path, since: str = "") -> dict[tuple[str, str], int]:
    """(chapter, key) -> how many times it was executed, from the log, since ``since`` (ISO time)."""
    path = Path(root) / "_build" / EXECUTIONS
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    rows = [(line.split("\t") + ["", "", ""])[:4] for line in lines]
    return dict(Counter((chapter, run_key) for when, chapter, _, run_key in rows if when >= since))


def main(argv: list[str]) -> int:
    """Print the cache folder for ``_build`` (or the folder given). ``--executions SINCE MOST``: how many times each
    chapter was executed on this torch since SINCE (ISO, UTC); fails if one was more than MOST times."""
    if argv[:1] != ["--executions"]:
        print(cache_path(Path(argv[0] if argv else "_build") / ".jupyter_cache"))
        return 0
    since, most = argv[1], int(argv[2])
    here = key().split()[0]      # torch=<release>: the runs on this torch, any executor
    counts: Counter[str] = Counter()
    for (chapter, run_key), n in executions(Path("."), since).items():
        if run_key.split()[:1] == [here]:
            counts[chapter] += n
    for chapter, n in sorted(counts.items()):
        print(f"executed {n} time(s) on {here}: {chapter}")
    print(f"executions: {len(counts)} chapter(s), at most {max(counts.values(), default=0)} "
          f"time(s) each on {here} (goal: at most {most})")
    return 1 if max(counts.values(), default=0) > most else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
