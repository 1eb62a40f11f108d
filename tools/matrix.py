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

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
VENVS = Path(os.environ.get("TF_VENVS", Path.home() / ".cache" / "tensor-fences" / "venvs"))

# name -> (pip requirement, environment for pip, what it exercises)
RELEASES = {
    "2.8.0": ("torch==2.8.0", {}, "the release the oldest source material was written against (CUDA build from PyPI)"),
    # The local version label pins the CPU build: this machine has that wheel on disk;
    # elsewhere it comes from PyTorch's CPU index (PIP_EXTRA_INDEX_URL, see the workflow).
    "2.13.0+cpu": ("torch==2.13.0+cpu", {}, "the reference build: CPU wheel, the one `make test` uses"),
    "2.14.1": ("torch==2.14.1", {}, "a CUDA build on a machine with no GPU"),
    # This machine caps pip at torch<=2.14.1 through a constraint file in its
    # pip config; an empty constraint file lifts the cap for this one install.
    "2.15.0": ("torch==2.15.0", {"PIP_CONSTRAINT": os.devnull}, "the newest release (CUDA build from PyPI)"),
}

# What the suite needs besides torch (the site build is not run per release).
SUITE_DEPS = ["numpy>=2", "pytest>=8", "pytest-xdist>=3", "nbval>=0.11", "jupytext>=1.16", "ipykernel>=6",
              "myst-nb>=1", "pyyaml", "matplotlib>=3.8", "hypothesis>=6.100", "ml_dtypes>=0.5",
              "array-api-strict>=2.3", "jax>=0.4.30"]


def venv_for(name: str) -> Path:
    return VENVS / f"torch-{name}"


def ensure_venv(name: str) -> Path:
    """Create (or reuse) the release's venv; raises CalledProcessError on failure."""
    requirement, env, _ = RELEASES[name]
    venv = venv_for(name)
    stamp = venv / ".tensor-fences"
    wanted = json.dumps([requirement, SUITE_DEPS])
    if stamp.exists() and stamp.read_text() == wanted:
        return venv
    if not (venv / "bin" / "python").exists():
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    print(f"[matrix] installing {requirement} into {venv}", flush=True)
    subprocess.run(pip + [requirement, *SUITE_DEPS], check=True, env={**os.environ, **env})
    stamp.write_text(wanted)
    return venv


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
