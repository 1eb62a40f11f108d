"""A reader with only a downloaded notebook can run it: checked in a fresh environment.

    python tools/check_notebooks.py [_build/html]        (run by make check-site)

For every chapter, downloads its ``.ipynb`` and the wheel offered beside it
from the served site into an empty folder, creates a fresh virtual
environment holding only torch (``TORCH``, from the local wheel cache is
fine: a reader has torch already) and a Jupyter runner (nbclient, ipykernel),
and executes the notebook top to bottom there. The notebook's own first cell
must install everything else. Before running it, reads it as Jupyter would
show it: no MyST syntax left in a Markdown cell, no solution open, and no
link to a repository (``fences.jupyter``). Fails on any error, naming the
chapter.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from check_site import report, serve, toc_pages  # noqa: E402

from fences.sphinx import WHEEL_DIR  # noqa: E402

TORCH = os.environ.get("TORCH", "torch==2.13.0")
TORCH_INDEX = os.environ.get("TORCH_INDEX", "")  # as in the Makefile
RUNNER = ["nbclient>=0.10", "ipykernel>=6"]


def fresh_env(folder: Path) -> Path:
    """A new venv with torch and a notebook runner only; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    index = ["--extra-index-url", TORCH_INDEX] if TORCH_INDEX else []
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *index, TORCH, *RUNNER],
                   check=True)
    return python


def download(url: str, target: Path) -> Path:
    with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
        target.write_bytes(response.read())
    return target


def reading_problems(path: Path) -> list[str]:
    """What a reader opening the notebook in Jupyter would find wrong."""
    import nbformat

    from fences import jupyter

    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    problems = jupyter.myst_left(nb) + jupyter.open_solutions(nb)
    if "git+" in text or "tensor-fences/tensor-fences" in text:
        problems.append("installs from or points at a repository that _config.yml does not set")
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else ROOT / "_build" / "html"
    wheels = sorted((site / WHEEL_DIR).glob("*.whl"))
    if not wheels:
        print(f"check-notebooks: no wheel in {site / WHEEL_DIR}; run `make book`", file=sys.stderr)
        return 1
    pages = toc_pages()
    server, url = serve(site)
    failures = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            python = fresh_env(Path(tmp) / "env")
            print(f"check-notebooks: fresh environment with {TORCH} "
                  f"in {time.monotonic() - start:.0f} s", flush=True)
            for name in pages:
                work = Path(tmp) / name.replace("/", "_")
                work.mkdir()
                nb = download(f"{url}/_sources/{name}.ipynb", work / f"{Path(name).stem}.ipynb")
                failures += report(f"{name}: reads as Jupyter Markdown", reading_problems(nb))
                download(f"{url}/{WHEEL_DIR}/{wheels[-1].name}", work / wheels[-1].name)
                start = time.monotonic()
                run = subprocess.run([str(python.parent / "jupyter-execute"), "--timeout=600",
                                      str(nb)], cwd=work, capture_output=True, text=True)
                ok = run.returncode == 0
                tail = [] if ok else ((run.stdout + run.stderr).splitlines()[-15:]
                                      or [f"exit status {run.returncode}"])
                failures += report(f"{name} ({time.monotonic() - start:.0f} s)", tail)
    finally:
        server.shutdown()
    print(f"check-notebooks: {len(pages) - failures} ran, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
