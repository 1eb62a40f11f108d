"""The release matrix's environments: one nox session per torch release, made by uv.

    nox -s "torch(2.8.0)" --install-only            make (or check) one release's environment
    nox -s "torch(2.8.0)" -- python -m pytest ...   and run a command in it (tools/matrix.py)

Sessions: fencecheck/releases.py's list, *newest* (PyPI's) and *nightly*; each pins its torch and
installs pyproject.toml's ``test`` extra, not the project (the matrix runs this clone's). Where they
live and which pip settings reach uv: docs/matrix.md.
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
