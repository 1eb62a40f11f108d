import functools
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
# The browser checks of the built site: `make check-site` runs them (pytest tests/site).
collect_ignore = ["site"]

ROOT = Path(__file__).resolve().parents[1]
#: What a tooling proof never reads: the chapters and the records (a proof reading one names it).
NOT_READ = ("book/", "results/", "mutate-results.json", "docs/")
#: The environment variables a proof's subprocesses read (pytest's options, Python's path, this project's, Jupyter's);
#: not the PYTEST_XDIST_* a worker is given, one of which is new in every session.
ENV_READ = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH", "FENCES_", "JUPYTER", "XDG_CACHE_HOME")


def tooling_key(also: tuple[Path, ...] = (), root: Path = ROOT, base: str | None = None) -> str | None:
    """What a tooling proof's outcome can depend on: Python, every installed distribution's version, and every file
    of the checkout (tracked or new, ignored ones aside) but the chapters and the records (``base``, when the session
    computed it already), plus ``also``. None outside a git checkout: the proof then always runs."""
    if base is None:
        try:
            listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                    cwd=root, capture_output=True)
        except OSError:   # no git
            return None
        if listed.returncode != 0:
            return None
        files = [root / f for f in sorted(set(listed.stdout.decode().split("\0")) - {""}) if not f.startswith(NOT_READ)]
        env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(ENV_READ))
        base = _digest("\n".join([sys.version, *installed(), *env]), files, root)
    return _digest(base, [Path(p) for p in also], root) if also else base


@functools.cache
def installed() -> tuple[str, ...]:
    """``name==version direct_url`` of every distribution in this venv's site-packages (not sys.path: tests move
    it, and the checkout's own ``*.egg-info`` would shadow the project's installed metadata)."""
    site = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    return tuple(sorted(f"{d.metadata['Name']}=={d.version} {d.read_text('direct_url.json') or ''}"
                        for d in importlib.metadata.distributions(path=[*site])))


def _digest(text: str, paths: list[Path], root: Path) -> str:
    sha = hashlib.sha256(text.encode())
    for path in paths:
        if path.is_file():   # its name, whether it is executable (all of its mode git keeps), its bytes
            sha.update(str(path.relative_to(root) if path.is_relative_to(root) else path).encode())
            sha.update(b"x" if os.access(path, os.X_OK) else b"-")
            sha.update(path.read_bytes())
    return sha.hexdigest()


@pytest.fixture(scope="session")
def proven(pytestconfig):
    """``proven(name, run)``: ``run()``'s result, or the result stored by an earlier session under the same
    ``tooling_key`` (``also``: files outside what it covers that the proof reads).

    The tooling's costly proofs (the must-fail corpus, the mutate runs, the small site builds) are functions of
    that key: they run again after any change of the tooling, the tests, the configuration or the packages, and
    not after an edit of a chapter. The result is stored in pytest's cache (.pytest_cache/); the assertions run on
    it either way. ``make test FRESH=1`` (``--fences-fresh``) runs every proof; a clean clone, as in CI, has none
    stored. The terminal summary says which proofs ran and which were read back.
    """
    def prove(name: str, run, also: tuple[Path, ...] = ()):
        base = pytestconfig.fences_tooling_key
        key, entry = tooling_key(also, base=base) if base else None, f"fences/proof-{name}"
        stored = _stored(pytestconfig, entry, key)
        if stored:
            _say(pytestconfig, name, f"read back (made {stored['date']})")
            return stored["result"]
        result = run()
        _say(pytestconfig, name, "ran")
        if key:   # stored when the session ends, if no test of this process failed (tests/conftest.py: sessionfinish)
            _pend(pytestconfig, entry, name, key, also, result=result)
        return result

    return prove


def pytest_configure(config):
    config.addinivalue_line("markers", "proof: a costly test of the tooling; its pass is read back under an unchanged "
                                       "tooling_key (tests/conftest.py: pytest_pyfunc_call)")
    # As the session starts (tests may write into the checkout later). None, so every proof runs, without pytest's
    # cache, or when the project is installed from another checkout (the proofs' subprocesses import that one).
    ours = [line for line in installed() if line.startswith("tensor-fences==")]
    here = getattr(config, "cache", None) is not None and any(ROOT.as_uri() in line for line in ours)
    config.fences_tooling_key = tooling_key() if here else None
    config.fences_pending = {}
    config.fences_said = {}   # proof -> "ran" or "read back (...)", for the summary


def _pend(config, entry: str, name: str, key: str, also: tuple[Path, ...] = (), **value) -> None:
    """Keep a proof to store when the session ends: a fixture's ``result``, or a marked test's pass."""
    config.fences_pending[entry] = (name, also, {"key": key, "date": time.strftime("%Y-%m-%d %H:%M"), **value})


def pytest_sessionfinish(session):
    """Store this process's proofs: a marked test's pass, and a fixture's result only when no test of this process
    failed (a result its tests fail on may be a slow machine's). None is stored when the key is no longer the one the
    session started with: a file edited during the session and restored later would leave the edit's outcome under
    the old key."""
    config = session.config
    pending = {e: p for e, p in config.fences_pending.items() if "result" not in p[2] or session.testsfailed == 0}
    base = tooling_key() if pending else None
    for entry, (name, also, value) in pending.items():
        if base and tooling_key(also, base=base) == value["key"]:
            config.cache.set(entry, value)
        else:
            _say(config, name, "ran, not stored: the checkout or the environment changed during the session")
    if hasattr(session.config, "workeroutput"):   # an xdist worker: what it said goes to the controller
        session.config.workeroutput["fences_said"] = session.config.fences_said


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist's controller: a worker's notes for the summary."""
    node.config.fences_said.update(getattr(node, "workeroutput", {}).get("fences_said", {}))


def _stored(config, entry: str, key: str | None) -> dict | None:
    """What an earlier session stored under ``entry`` for ``key``; None when there is none, it is stale, or FRESH=1."""
    if not key or config.getoption("--fences-fresh"):
        return None
    stored = config.cache.get(entry, None)
    return stored if stored and stored.get("key") == key else None


def _proof_entry(item) -> str:
    return "fences/proof-test-" + item.nodeid.replace("/", "-")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``proof`` that passed under the same ``tooling_key`` is read back, not run (as ``proven`` does
    for a fixture's result: its outcome is a function of that key); ``--fences-fresh`` runs it."""
    if pyfuncitem.get_closest_marker("proof") is None:
        return None
    stored = _stored(pyfuncitem.config, _proof_entry(pyfuncitem), pyfuncitem.config.fences_tooling_key)
    if stored:
        pyfuncitem.read_back = True
        _say(pyfuncitem.config, pyfuncitem.name, f"read back (passed {stored['date']})")
        return True
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call" and report.passed and item.get_closest_marker("proof") is not None:
        key = item.config.fences_tooling_key
        if not getattr(item, "read_back", False):
            _say(item.config, item.name, "ran")
            if key:
                _pend(item.config, _proof_entry(item), item.name, key)
    return report


def _say(config, name: str, what: str) -> None:
    """Note for the summary what became of a proof."""
    config.fences_said[name] = what


def pytest_terminal_summary(terminalreporter, config):
    """Say which tooling proofs ran in this session and which were read back."""
    said = dict(sorted(config.fences_said.items()))
    if said:
        back = [n for n, w in said.items() if w.startswith("read back")]
        lost = [n for n, w in said.items() if w.startswith("ran, not stored")]
        terminalreporter.write_line(f"tooling proofs: {len(said) - len(back)} ran, {len(back)} read back under an "
                                    f"unchanged key (FRESH=1 runs them all){': ' + ', '.join(back) if back else ''}")
        if lost:
            terminalreporter.write_line(f"tooling proofs not stored, as the checkout or the environment changed "
                                        f"during the session: {', '.join(lost)}")


def _edited_copy(tmp_path, monkeypatch, name: str, module: str):
    """A copy of the runtime or the verifier with ``module`` edited, put where
    ``fencecheck.cachekey`` looks for that package."""
    import shutil

    from fencecheck import cachekey

    copy = tmp_path / f"edited-{name}"
    shutil.copytree(getattr(cachekey, name), copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / module).write_text((copy / module).read_text() + "\n# edited\n")
    monkeypatch.setattr(cachekey, name, copy)
    return copy


@pytest.fixture
def verifier_edited(tmp_path, monkeypatch):
    """While the test runs, the verifier's Sphinx extension has been edited."""
    return lambda: _edited_copy(tmp_path, monkeypatch, "VERIFIER", "sphinx.py")


@pytest.fixture
def runtime_edited(tmp_path, monkeypatch):
    """While the test runs, a runtime module (the state guard) has been edited."""
    return lambda: _edited_copy(tmp_path, monkeypatch, "RUNTIME", "state.py")


@pytest.fixture
def book(pytester):
    """A pytester folder with the test plugin and an empty book/ (the way nbval tests itself)."""
    pytester.makeconftest('pytest_plugins = ["fencecheck.pytest_plugin"]\n')
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\naddopts = "-p no:xdist '
                               '-p no:cacheprovider --nbval-current-env"\n')
    pytester.mkdir("book")
    return pytester
