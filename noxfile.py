"""The release matrix's environments: one nox session per torch release, made by uv.

    nox -s "torch(2.8.0)" --install-only            make (or check) one release's environment
    nox -s "torch(2.8.0)" -- python -m pytest ...   and run a command in it (tools/matrix.py)

The sessions are fencecheck/releases.py's list, then *newest* (the newest torch on PyPI)
and *nightly* (the newest nightly CPU build, upgraded on each install). Each gets its torch,
pinned exactly, and the suite's dependencies, pyproject.toml's ``test`` extra (which names
``book``; its ``torch>=2.8`` is left to the pin); the project itself is not installed (the
matrix runs this clone's, PYTHONPATH). The environments live under $TF_VENVS (default
~/.cache/tensor-fences/nox), outside any clone, so the clones of a machine share them, and
one that exists is reused (uv only checks it). uv installs them all from one cache,
$TF_UV_CACHE (default ~/.cache/tensor-fences/uv), hard-linking each unpacked wheel: the
``nvidia-*`` wheels the CUDA builds share are on disk once.

uv reads no pip configuration: PIP_FIND_LINKS (folders or pages of links) is passed on as
``--find-links`` unless UV_FIND_LINKS is set; without either, a release that is not on PyPI
uses its own (the CPU build: PyTorch's page). A pip cap on torch (PIP_CONSTRAINT) is not
passed on: each torch is pinned here.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from fencecheck import releases  # noqa: E402

CACHE = Path.home() / ".cache" / "tensor-fences"
ENVS = Path(os.environ.get("TF_VENVS", CACHE / "nox"))
UV_CACHE = Path(os.environ.get("TF_UV_CACHE", CACHE / "uv"))
nox.options.envdir = str(ENVS)
os.environ.update(UV_CACHE_DIR=str(UV_CACHE), UV_LINK_MODE="hardlink")  # for uv venv and uv pip

NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/cpu"
SESSIONS = [*releases.names(), "newest", "nightly"]
SUITE = ["-r", str(ROOT / "pyproject.toml"), "--extra", "test"]
MARKER = ".tensor-fences"  # the session an environment belongs to (tools/matrix.py prunes by it)


def find_links(own: str = "", environ=os.environ) -> list[str]:
    """``--find-links`` arguments: PIP_FIND_LINKS's, else the release's own; none when uv
    reads UV_FIND_LINKS itself."""
    if environ.get("UV_FIND_LINKS"):
        return []
    return [arg for link in (environ.get("PIP_FIND_LINKS") or own).split() for arg in ("--find-links", link)]


def install_args(name: str, environ=os.environ) -> list[list[str]]:
    """The arguments of each ``uv pip install`` that makes the environment of session ``name``."""
    if name == "nightly":  # torch alone from the nightly index; the rest keeps it (installed)
        return [[*find_links("", environ), "--upgrade-package", "torch", "--prerelease", "allow",
                 "--index-url", NIGHTLY_INDEX, "torch"], [*find_links("", environ), *SUITE]]
    if name == "newest":
        return [[*find_links("", environ), "--upgrade-package", "torch", "torch", *SUITE]]
    _, pin, _, own = next(r for r in releases.RELEASES if r[0] == name)
    return [[*find_links(own, environ), pin, *SUITE]]


@nox.session(venv_backend="uv", reuse_venv=True)
@nox.parametrize("release", SESSIONS, ids=SESSIONS)
def torch(session: nox.Session, release: str) -> None:
    for args in install_args(release):
        session.install(*args)
    Path(session.virtualenv.location, MARKER).write_text(release)
    if session.posargs:
        session.run(*session.posargs)
