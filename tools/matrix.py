"""The release matrix: every chapter's fences, once per supported torch.

    python tools/matrix.py [RELEASE ...]      (make matrix)

Each release gets its own virtual environment under $TF_VENVS (default
~/.cache/tensor-fences/venvs), outside the clone and reused between runs.
The project is not installed there: the suite runs with PYTHONPATH set to
this checkout, so the fences tested are the ones in this clone.

Each run writes results/<release>.json (one record per fence, from
fences.pytest_plugin). The "Verified on" page renders those files. A
release that fails to install, or any fence that fails, fails the run,
after every release has been tried.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
VENVS = Path(os.environ.get("TF_VENVS", Path.home() / ".cache" / "tensor-fences" / "venvs"))

from venvs import Release  # noqa: E402

# Every minor release since 2.8, at its latest patch, plus the newest on PyPI.
RELEASES = [
    Release("2.8.0", "torch==2.8.0", "the release the oldest source material was written against"),
    Release("2.9.1", "torch==2.9.1"),
    Release("2.10.0", "torch==2.10.0"),
    Release("2.11.0", "torch==2.11.0"),
    Release("2.12.1", "torch==2.12.1"),
    # The local version label pins the CPU build (PIP_FIND_LINKS says where it is).
    Release("2.13.0+cpu", "torch==2.13.0+cpu", "the reference build: CPU wheel, the one `make test` uses"),
    Release("2.14.1", "torch==2.14.1"),
    Release("2.15.0", "torch==2.15.0"),
]
NEWEST = "newest"
PYPI_JSON = "https://pypi.org/pypi/torch/json"


def newest_on_pypi(url: str = PYPI_JSON) -> str:
    """The newest torch release on PyPI (its "latest" version, never a pre-release)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.load(answer)["info"]["version"]


def resolve(names: list[str], newest=newest_on_pypi) -> list[Release]:
    """The releases to run: the named ones (all when none), "newest" resolved now, no duplicates."""
    known = {r.name: r for r in RELEASES}
    out: list[Release] = []
    for name in names or [*known, NEWEST]:
        if name == NEWEST:
            version = newest()
            rel = known.get(version) or Release(version, f"torch=={version}", "the newest release on PyPI")
        elif name in known:
            rel = known[name]
        else:
            raise SystemExit(f"unknown release {name!r}; known: {[*known, NEWEST]}")
        if rel not in out:
            out.append(rel)
    return out


def run_release(name: str) -> int:
    """Run the chapter suite on one release; write results/<name>.json. Returns the exit code."""
    out = RESULTS / f"{name}.json"
    started = time.monotonic()
    try:
        venv = ensure_venv(name)
    except subprocess.CalledProcessError as exc:
        record = {"release": name, "torch": None, "build": "install failed",
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                  "exitstatus": 1, "error": f"install failed: {exc}", "fences": []}
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"[matrix] {name}: INSTALL FAILED ({exc})", flush=True)
        return 1
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PIP_CONSTRAINT", None)
    cmd = [str(venv / "bin" / "python"), "-m", "pytest", "book", "-q", "-p", "no:cacheprovider",
           "--fences-results", str(out)]
    print(f"[matrix] {name}: {' '.join(cmd[2:])}", flush=True)
    code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    if out.exists():
        record = json.loads(out.read_text())
        record["release"] = name
        record["seconds"] = round(time.monotonic() - started, 1)
        out.write_text(json.dumps(record, indent=1) + "\n")
    return code


def main(argv: list[str]) -> int:
    names = argv or list(RELEASES)
    unknown = [n for n in names if n not in RELEASES]
    if unknown:
        print(f"unknown release(s): {unknown}; known: {list(RELEASES)}", file=sys.stderr)
        return 2
    RESULTS.mkdir(exist_ok=True)
    codes = {name: run_release(name) for name in names}
    print("[matrix] " + ", ".join(f"{n}: {'ok' if c == 0 else 'FAILED'}" for n, c in codes.items()))
    return 0 if all(c == 0 for c in codes.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
