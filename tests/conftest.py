import pytest

pytest_plugins = ["pytester"]
# The browser checks of the built site: `make check-site` runs them (pytest tests/site).
collect_ignore = ["site"]


def pytest_terminal_summary(terminalreporter, config):
    """Say whether the must-fail corpus ran in this session or its proof was reused."""
    if getattr(config, "cache", None) is None:  # -p no:cacheprovider
        return
    used = config.cache.get("fences/corpus-proof-used", None)
    if used and not hasattr(config, "workerinput"):
        terminalreporter.write_line(f"must-fail corpus: {used} (FENCES_REUSE_OUTCOMES=1 reuses it)")
        config.cache.set("fences/corpus-proof-used", None)


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
