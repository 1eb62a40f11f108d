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
import os
import sys
import sysconfig
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
    """torch's version and build, Python's version, a hash of the runtime (``RUNTIME``),
    of every installed distribution's name and version.

    The release matrix's results (results/*.json) are not part of it: no
    executed page reads them. The Sphinx extension renders them, and reads
    every page again when they change (``fencecheck.sphinx._record_outdated``),
    so new results cost no execution.

    torch is not imported (that costs seconds): its version file, which names the
    release, the git commit and the CUDA/ROCm version it was built for, is hashed.
    """
    torch_build = torch_version_file().read_bytes()
    # Every installed distribution and its version (numpy, myst-nb, ...): outputs depend on them too.
    # Read from the environment's site-packages only: on sys.path, an in-tree *.egg-info
    # (left by building the wheel) would make the key depend on the working directory.
    # A distribution's folder there is named by its name and version (numpy-2.3.1.dist-info),
    # so the names are read, not each one's metadata (ten times faster; on every build).
    site = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    dists = sorted(entry.name for folder in site if os.path.isdir(folder)
                   for entry in os.scandir(folder) if entry.name.endswith((".dist-info", ".egg-info")))
    parts = [
        f"torch={importlib.metadata.version('torch')}",
        f"torch-build={hashlib.sha256(torch_build).hexdigest()[:16]}",
        f"python={sys.version_info.major}.{sys.version_info.minor}",
        f"fences={digest()[:16]}",
        f"env={hashlib.sha256(chr(10).join(dists).encode()).hexdigest()[:16]}",
    ]
    return " ".join(parts)


def cache_path(base: Path) -> Path:
    """The execution cache for the current key: a folder of ``base`` named by its hash.

    Each torch (and each state of the runtime and the installed packages) gets
    its own jupyter-cache, so a page is never served from a
    run under other code, and switching back to a torch reuses its cache.
    """
    return Path(base) / hashlib.sha256(key().encode()).hexdigest()[:16]


def main(argv: list[str]) -> int:
    """Print the cache folder for ``_build`` (or the folder given): what the build reads."""
    print(cache_path(Path(argv[0] if argv else "_build") / ".jupyter_cache"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
