"""One virtual environment per torch release, for the release matrix.

    python tools/venvs.py [RELEASE ...]     install (or check) the environments only

Every environment lives under $TF_VENVS (default
~/.cache/tensor-fences/venvs), outside any clone, so the clones of one
machine share them. Each CUDA build of torch brings 3-4 GB of ``nvidia-*``
wheels, most of them identical from one release to the next. When ``uv`` is
available (``pip install uv``) every environment is installed from one uv
cache, $TF_UV_CACHE (default ~/.cache/tensor-fences/uv), on the same disk:
uv hard-links an unpacked wheel from its cache into each environment, so a
wheel that several releases use is on disk once. Without uv, pip installs
each environment in full (about 6 GB per CUDA build); the run says so.

uv does not read pip's configuration. Where wheels come from besides PyPI
is passed on from the environment: ``PIP_FIND_LINKS`` (a folder or a page
of links) becomes uv's ``--find-links``. Without one, a release that is not
on PyPI uses its own ``find_links`` (the CPU build: PyTorch's page of CPU
wheels, https://download.pytorch.org/whl/cpu/torch/). A pip configuration that caps torch
(a ``constraint`` file) does not apply: the matrix pins each torch exactly,
so for the pip fallback ``PIP_CONSTRAINT`` points at an empty file, which
works whether or not a machine has such a cap.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CACHE = Path.home() / ".cache" / "tensor-fences"
VENVS = Path(os.environ.get("TF_VENVS", CACHE / "venvs"))
UV_CACHE = Path(os.environ.get("TF_UV_CACHE", CACHE / "uv"))

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def suite_deps() -> list[str]:
    """What the suite needs besides torch: pyproject.toml's ``test`` extra, with the extras it
    names (``book``) and the base dependencies, torch left out. The one list (the site build
    is not run per release, so ``site`` is not installed)."""
    import re
    import tomllib

    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    found: list[str] = list(project.get("dependencies", []))

    def add(extra: str) -> None:
        for req in extras[extra]:
            named = re.fullmatch(r"tensor-fences\[([\w,-]+)\]", req.strip())
            if named:
                for name in named.group(1).split(","):
                    add(name)
            elif re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0] != "torch":
                found.append(req.strip())

    add("test")
    return sorted(set(found))


SUITE_DEPS = suite_deps()


@dataclass(frozen=True)
class Release:
    """A torch to verify on: the name the results file takes and the pip requirement."""

    name: str
    requirement: str
    why: str = ""
    #: Where the wheel is when it is not on PyPI (a page of links), used when the
    #: environment names no place of its own (PIP_FIND_LINKS / UV_FIND_LINKS).
    find_links: str = ""
    #: A package index that replaces PyPI for torch alone, pre-releases allowed (the
    #: nightly builds); the suite's other packages still come from PyPI. Such an
    #: environment is installed afresh each day.
    index_url: str = ""


def uv_command() -> list[str] | None:
    """How to run uv: on PATH, or the ``uv`` package of this Python; None without it."""
    found = shutil.which("uv")
    if found:
        return [found]
    try:
        import uv  # the PyPI package ships the binary

        return [uv.find_uv_bin()]
    except (ImportError, FileNotFoundError):
        return None


def venv_for(release: Release) -> Path:
    return VENVS / f"torch-{release.name}"


def _stamp(release: Release) -> str:
    import datetime

    day = datetime.date.today().isoformat() if release.index_url else ""
    return json.dumps([release.requirement, SUITE_DEPS, day])


def is_current(release: Release) -> bool:
    """The environment exists and was installed for this requirement and these deps."""
    stamp = venv_for(release) / ".tensor-fences"
    return stamp.exists() and stamp.read_text() == _stamp(release) and \
        (venv_for(release) / "bin" / "python").exists()


def install_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the installer: uv's cache and link mode, pip's cap lifted."""
    env = dict(os.environ if base is None else base)
    env["UV_CACHE_DIR"] = str(UV_CACHE)
    env["UV_LINK_MODE"] = "hardlink"  # one copy of a wheel, however many environments use it
    if env.get("PIP_FIND_LINKS") and not env.get("UV_FIND_LINKS"):
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"].replace(" ", ",")
    env["PIP_CONSTRAINT"] = os.devnull  # the matrix pins torch itself; see the docstring
    return env


def ensure(release: Release, log=print) -> Path:
    """Create (or reuse) the release's environment; raises CalledProcessError on failure."""
    venv = venv_for(release)
    if is_current(release):
        return venv
    env = install_env()
    if release.find_links and not env.get("UV_FIND_LINKS"):
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"] = release.find_links
    uv = uv_command()
    python = venv / "bin" / "python"
    if venv.exists() and not python.exists():
        shutil.rmtree(venv)
    log(f"[matrix] installing {release.requirement} into {venv} with {'uv' if uv else 'pip'}")
    if uv:
        if not python.exists():
            subprocess.run(uv + ["venv", "--quiet", "--python", sys.executable, str(venv)],
                           check=True, env=env)
        if release.index_url:
            subprocess.run(uv + ["pip", "install", "--quiet", "--python", str(python), "--upgrade",
                                 "--prerelease", "allow", "--index-url", release.index_url,
                                 release.requirement], check=True, env=env)
        subprocess.run(uv + ["pip", "install", "--quiet", "--python", str(python),
                             *([] if release.index_url else [release.requirement]), *SUITE_DEPS],
                       check=True, env=env)
    else:
        log("[matrix] uv not found (pip install uv): each environment is a full copy")
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run(pip + ["--upgrade", "pip"], check=True, env=env)
        if release.index_url:
            subprocess.run(pip + ["--upgrade", "--pre", "--index-url", release.index_url,
                                  release.requirement], check=True, env=env)
        subprocess.run(pip + [*([] if release.index_url else [release.requirement]), *SUITE_DEPS],
                       check=True, env=env)
    (venv / ".tensor-fences").write_text(_stamp(release))
    return venv


def prune(keep: list[Release], log=print) -> None:
    """Remove environments of releases no longer verified, then the cache entries only they used."""
    wanted = {venv_for(r).name for r in keep}
    for path in sorted(VENVS.glob("torch-*")):
        if path.name not in wanted and (path / ".tensor-fences").exists():
            log(f"[matrix] removing {path} (no longer in the matrix)")
            shutil.rmtree(path)
    uv = uv_command()
    if uv and UV_CACHE.exists():
        subprocess.run(uv + ["cache", "prune", "--quiet"], env=install_env(), check=False)


def disk_usage(paths: list[Path]) -> int:
    """Bytes the paths use together, a hard-linked file counted once (like ``du -s``)."""
    seen, total = set(), 0
    for root in paths:
        if not root.exists():
            continue
        for dirpath, _, files in os.walk(root):
            for name in files:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from matrix import resolve  # noqa: E402

    for rel in resolve(sys.argv[1:]):
        ensure(rel)
    print(f"[matrix] environments and cache: {disk_usage([VENVS, UV_CACHE]) / 2**30:.1f} GiB")
