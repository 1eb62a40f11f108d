"""Keep the build's execution cache honest.

jupyter-cache re-executes a chapter when its code cells or kernelspec
change, and for nothing else. A page executed under another torch, or with
another version of ``fences/``, would be served from the cache unchanged.
This module keys the cache folder on those two as well: when the key
differs from the one stored beside the cache, the cache is dropped.

    python -m fences.cachekey _build/.jupyter_cache
"""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def key() -> str:
    """torch version and build, Python version, and a hash of every file in fences/."""
    import torch

    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    parts = [
        f"torch={torch.__version__}",
        f"cuda={torch.version.cuda}",
        f"python={sys.version_info.major}.{sys.version_info.minor}",
        f"fences={digest.hexdigest()[:16]}",
    ]
    return " ".join(parts)


def refresh(cache: Path) -> bool:
    """Drop ``cache`` unless it was made under the current key. True if dropped."""
    stamp = cache.with_name(cache.name + ".key")
    current = key()
    dropped = False
    if cache.exists() and (not stamp.exists() or stamp.read_text().strip() != current):
        shutil.rmtree(cache)
        dropped = True
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(current + "\n")
    return dropped


def main(argv: list[str]) -> int:
    cache = Path(argv[0] if argv else "_build/.jupyter_cache")
    if refresh(cache):
        print(f"fences.cachekey: {cache} was made under another torch or fences/; dropped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
