"""Keep the site build's caches honest.

jupyter-cache re-executes a chapter when its code cells or kernelspec
change, and for nothing else; Sphinx re-renders a page when its source
changes. A page executed under another torch, or with another version of
``fences/``, would be served unchanged by both. This module keys the build
folder on those two as well: when the key differs from the one stored in
the build folder, every cache derived from execution is dropped (the
execution cache, Sphinx's environment, the rendered and executed pages).

    python -m fences.cachekey _build
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import shutil
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def key() -> str:
    """torch's version and build, Python's version, a hash of every file in fences/,
    of every installed distribution's name and version.

    The release matrix's results (results/*.json) are not part of it: no
    executed page reads them. The Sphinx extension renders them, and reads
    every page again when they change (``fences.sphinx._record_outdated``),
    so new results cost no execution.

    torch is not imported (that costs seconds): its version file, which names the
    release, the git commit and the CUDA/ROCm version it was built for, is hashed.
    """
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("fences.cachekey: torch is not installed")
    torch_build = (Path(spec.origin).parent / "version.py").read_bytes()
    # Every installed distribution and its version (numpy, myst-nb, ...): outputs depend on them too.
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    parts = [
        f"torch={importlib.metadata.version('torch')}",
        f"torch-build={hashlib.sha256(torch_build).hexdigest()[:16]}",
        f"python={sys.version_info.major}.{sys.version_info.minor}",
        f"fences={digest.hexdigest()[:16]}",
        f"env={hashlib.sha256(chr(10).join(dists).encode()).hexdigest()[:16]}",
    ]
    return " ".join(parts)


#: What a build folder holds that was derived from executing the chapters.
DERIVED = (".jupyter_cache", ".doctrees", "html", "jupyter_execute")


def refresh(build: Path) -> bool:
    """Drop what ``build`` derived from execution unless it was made under the current key.

    Returns True when something was dropped.
    """
    build = Path(build)
    stamp = build / ".fences-key"
    current = key()
    stale = not stamp.exists() or stamp.read_text().strip() != current
    dropped = False
    if stale:
        for name in DERIVED:
            if (build / name).exists():
                shutil.rmtree(build / name)
                dropped = True
    build.mkdir(parents=True, exist_ok=True)
    stamp.write_text(current + "\n")
    return dropped


def main(argv: list[str]) -> int:
    build = Path(argv[0] if argv else "_build")
    if refresh(build):
        print(f"fences.cachekey: {build} was made under another torch or fences/; "
              f"dropped {', '.join(DERIVED)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
