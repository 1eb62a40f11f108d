"""The execution cache: a chapter executes once and is read many times, and executes
again when, and only when, it must.

The triggers: the chapter's code, the torch version or build, what a chapter can import,
and the code in fences/. jupyter-cache covers the first (its key hashes the code cells);
fencecheck.cachekey covers the others: each key has its own cache folder, which the
test plugin stores each run in (fencecheck.executed) and the site build reads.
"""
from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

from fencecheck import cachekey
from fencecheck.upstream.jupyter_cache import get_cache, store

from fencecheck import executed
from fencecheck.chapter import HEADER, parse

ROOT = Path(__file__).resolve().parents[1]

CHAPTER = HEADER + """
# A chapter

```{code-cell} ipython3
x = 1
```
"""


def cache_with(tmp_path: Path, text: str):
    """A jupyter-cache holding ``text`` as if executed, as the build would read it."""
    chapter = tmp_path / "chapter.md"
    chapter.write_text(text)
    nb = parse(chapter.read_text(), chapter)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count, cell.outputs = 1, []
    cache = get_cache(tmp_path / ".jupyter_cache")
    store(cache, nb, str(chapter), 0.0)
    return cache, chapter


def test_an_unchanged_chapter_is_served_from_the_cache(tmp_path):
    cache, chapter = cache_with(tmp_path, CHAPTER)
    assert cache.match_cache_notebook(parse(chapter.read_text(), chapter)) is not None


def test_a_changed_chapter_is_executed_again(tmp_path):
    cache, chapter = cache_with(tmp_path, CHAPTER)
    chapter.write_text(CHAPTER.replace("x = 1", "x = 2"))
    with pytest.raises(KeyError):
        cache.match_cache_notebook(parse(chapter.read_text(), chapter))


def test_another_torch_release_changes_the_key(monkeypatch):
    before = cachekey.key()
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "9.9.9" if name == "torch" else real(name))
    assert cachekey.key() != before


def test_another_torch_build_changes_the_key(tmp_path, monkeypatch):
    """Same release, other build (CPU vs CUDA): torch/version.py differs."""
    before = cachekey.key()
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "version.py").write_text("__version__ = '2.13.0'\ncuda = '13.0'\n")
    spec = importlib.machinery.ModuleSpec("torch", None, origin=str(fake / "__init__.py"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "torch" else real(name, *a))
    assert cachekey.key() != before


def test_each_key_has_its_own_cache_folder(tmp_path, monkeypatch):
    first = cachekey.cache_path(tmp_path)
    assert cachekey.cache_path(tmp_path) == first          # same key: same folder, reused
    monkeypatch.setattr(cachekey, "key", lambda: "torch=another")
    second = cachekey.cache_path(tmp_path)
    assert second != first and second.parent == first.parent
    monkeypatch.undo()
    assert cachekey.cache_path(tmp_path) == first          # switching back reuses the old one


def test_the_sphinx_extension_keys_the_cache_myst_nb_reads(tmp_path):
    from types import SimpleNamespace

    from fencecheck import sphinx

    config = SimpleNamespace(nb_execution_cache_path=str(tmp_path / ".jupyter_cache"))
    app = SimpleNamespace(outdir=str(tmp_path / "html"))
    sphinx._key_the_cache(app, config)
    assert config.nb_execution_cache_path == str(cachekey.cache_path(tmp_path / ".jupyter_cache"))


def test_the_key_does_not_depend_on_the_working_directory(tmp_path, monkeypatch):
    """An *.egg-info on sys.path (building the wheel leaves one in the tree) changes nothing:
    the build and the test plugin run with different sys.path and must agree."""
    before = cachekey.key()
    info = tmp_path / "stray.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: stray\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cachekey.key() == before


SHOWN = HEADER + """
# A chapter

```{code-cell} ipython3
:tags: [fence]
:fence-id: a-shown
import fences

print("a reader sees this")
six = fences.observe("six", 2 * 3)
# Proves: two threes are six.
assert six == 6
```
"""


@pytest.fixture
def book(book):
    """tests/conftest.py's book, with a table of contents naming book/a."""
    book.makefile(".yml", _toc="format: jb-book\nroot: book/a\n")
    return book


def runs(root: Path) -> int:
    return sum(cachekey.executions(root).values())


@pytest.mark.proof
def test_a_chapter_runs_once_and_is_then_read_back(book):
    """The first run executes and stores the chapter; the second reads every cell's outcome
    (and what it recorded) from the store, executing nothing; --fences-fresh executes."""
    chapter = book.path / "book" / "a.md"
    chapter.write_text(SHOWN)
    first = book.runpytest_subprocess("book", "--fences-results", "one.json")
    assert first.ret == 0 and runs(book.path) == 1
    assert executed.missing(book.path) == []
    stored, _ = executed.Stored.find(cachekey.cache_path(cachekey.cache_base(book.path)),
                                     parse(SHOWN, chapter)).cell(0)
    assert [o.get("text") for o in stored] == ["a reader sees this\n"]   # the record's lines taken out
    second = book.runpytest_subprocess("book", "--fences-results", "two.json")
    assert second.ret == 0 and runs(book.path) == 1                       # nothing executed
    import json

    one, two = (json.loads((book.path / f).read_text())["fences"] for f in ("one.json", "two.json"))
    assert one == two and one[0]["observed"] == {"six": "6"}
    assert book.runpytest_subprocess("book", "--fences-fresh").ret == 0 and runs(book.path) == 2


@pytest.mark.proof
def test_a_run_with_a_failing_cell_is_not_stored(book):
    chapter = book.path / "book" / "a.md"
    chapter.write_text(SHOWN.replace("assert six == 6", "assert six == 7"))
    assert book.runpytest_subprocess("book").ret != 0
    assert executed.missing(book.path) == [chapter]
    assert book.runpytest_subprocess("book").ret != 0 and runs(book.path) == 2   # run again


def test_a_notebook_another_executor_cached_is_not_read_back(tmp_path):
    """myst-nb caches the chapters it executes on a miss, without what the harness records:
    the test plugin executes those again."""
    cache, chapter = cache_with(tmp_path, CHAPTER)
    assert executed.Stored.find(tmp_path / ".jupyter_cache", parse(CHAPTER, chapter)) is None


def test_the_record_lines_leave_the_page_and_streams_are_joined():
    from nbformat.v4 import new_output

    shown, recorded = executed.Stored.split([
        new_output("stream", name="stdout", text="a\n[observed] x = 1\n"),
        new_output("stream", name="stdout", text="b\n"),
        new_output("stream", name="stdout", text='[raised] {"class": "E"}\n'),
        new_output("execute_result", data={"text/plain": "3"}, execution_count=7)])
    assert [o.get("text") for o in shown] == ["a\nb\n", None]
    assert recorded == '[observed] x = 1\n[raised] {"class": "E"}\n'


def test_a_tool_no_chapter_imports_is_not_in_the_key():
    names = {p.split("==")[0] for p in cachekey.kernel_packages()}
    assert {"numpy", "ipykernel", "ml-dtypes", "myst-nb"} <= names
    for tool in ("pypdf", "playwright", "jupyter-book", "pytest", "ruff"):
        assert tool not in names


def test_another_version_of_a_package_a_chapter_imports_changes_the_key(monkeypatch):
    before = cachekey.key()
    real = importlib.metadata.distribution

    class Other:
        def __init__(self, dist):
            self.metadata, self.requires, self.version = dist.metadata, dist.requires, "0.0.1"

    monkeypatch.setattr(importlib.metadata, "distribution",
                        lambda name: Other(real(name)) if name == "ml_dtypes" else real(name))
    assert cachekey.key() != before


def test_the_kernel_loads_the_runtime_and_nothing_of_the_verifier(tmp_path):
    """A chapter's kernel, importing what chapters import plus the test plugin's warm-up,
    loads its ``fences`` from ``RUNTIME`` and nothing of the verifier, and no runtime
    module names the verifier (an import, even later inside a function, or a module path
    in a string). So an edit of the verifier (the Sphinx extension, the record, the
    lint), which the key leaves out, cannot change what a chapter outputs; the key's
    side is the next test."""
    import subprocess

    from fencecheck.pytest_plugin import WARM_UP

    probe = (f"import sys, fences, fences.strategies, fences.grade\n{WARM_UP}\n"
             "print('\\n'.join(f'{m} {getattr(sys.modules[m], \"__file__\", None)}' for m in sys.modules "
             "if m.split('.')[0] in ('fences', 'fencecheck')))")
    (tmp_path / "empty").mkdir()  # not beside the copy: the kernel imports the runtime installed
    loaded = dict(line.split(" ", 1) for line in subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True,
        cwd=tmp_path / "empty").stdout.splitlines())
    assert "fences.state" in loaded and not [m for m in loaded if m.startswith("fencecheck")]
    assert all(Path(f).resolve().is_relative_to(cachekey.RUNTIME) for f in loaded.values()), loaded
    for path in cachekey.RUNTIME.rglob("*.py"):  # not even importlib.import_module("fencecheck...")
        assert "fencecheck" not in path.read_text(), path


def test_an_edit_of_the_verifier_keeps_the_key_and_one_of_the_runtime_changes_it(
        verifier_edited, runtime_edited):
    """The issue's promise: a change to the Sphinx extension re-renders without re-executing."""
    before = cachekey.key()
    verifier_edited()
    assert cachekey.key() == before
    runtime_edited()
    assert cachekey.key() != before


def test_the_digest_names_each_file_and_skips_what_is_not_a_module(tmp_path):
    import shutil

    copy = tmp_path / "fences"
    shutil.copytree(cachekey.RUNTIME, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = cachekey.digest(copy)
    (copy / "strategies.py").rename(copy / "strategies_.py")  # same contents, another module
    assert cachekey.digest(copy) != before
    (copy / "strategies_.py").rename(copy / "strategies.py")
    (copy / ".#state.py").symlink_to(tmp_path / "nowhere")    # an editor's lock: a dangling link
    assert cachekey.digest(copy) == before


def test_the_runtime_is_the_fences_package_this_python_imports(tmp_path):
    """Found by import spec: another copy first on the path is the one keyed."""
    import os
    import shutil
    import subprocess

    copy = tmp_path / "elsewhere" / "fences"
    shutil.copytree(cachekey.RUNTIME, copy, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-c", "from fencecheck import cachekey; print(cachekey.RUNTIME)"],
                         env={**os.environ, "PYTHONPATH": f"{copy.parent}{os.pathsep}{ROOT}"},
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == copy.resolve()


def test_make_ci_fails_a_chapter_executed_more_than_twice(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for n in range(3):
        cachekey.log_execution(tmp_path, "book/a.md", "pytest")
        assert cachekey.main(["--executions", "2000-01-01", "2"]) == (1 if n == 2 else 0)
    assert cachekey.main(["--executions", "2999-01-01", "2"]) == 0   # none since then


def _open_and_list(path, barrier, locked=True):
    from jupyter_cache import get_cache as unlocked

    barrier.wait()
    try:
        return len((get_cache if locked else unlocked)(path).list_cache_records())
    except Exception as exc:  # noqa: BLE001 - the race's error is the finding
        return type(exc).__name__


def test_processes_opening_a_new_cache_at_once_all_get_it(tmp_path, monkeypatch):
    """The matrix's xdist workers open each release's new cache at once: its tables are
    made by one of them (a race failed every release: "table nbcache already exists").
    The race is forced: each process, having found no database, waits before it creates
    the tables, so every one of them tries; without the lock five of six fail."""
    import multiprocessing
    import time

    from jupyter_cache.cache import db

    create_all = db.OrmBase.metadata.create_all

    def slow(engine, **kwargs):
        time.sleep(0.5)
        create_all(engine, checkfirst=False)

    monkeypatch.setattr(db.OrmBase.metadata, "create_all", slow)
    ctx = multiprocessing.get_context("fork")
    for locked in (True, False):
        barrier = ctx.Manager().Barrier(6)
        with ctx.Pool(6) as pool:
            got = pool.starmap(_open_and_list, [(tmp_path / f"new-{locked}", barrier, locked)] * 6)
        assert (got == [0] * 6) == locked, (locked, got)


@pytest.mark.proof
def test_the_site_build_runs_the_chapters_the_cache_lacks_and_stops_on_a_failure(book, monkeypatch):
    """``make book`` executes only through the test plugin: the Sphinx process runs the
    chapters ``missing`` names (pytest, workers only for more than one) before it reads
    the cache, and a failing chapter stops the build; with the setting off, nothing runs."""
    import subprocess
    from types import SimpleNamespace

    from fencecheck import sphinx as ext

    chapter = book.path / "book" / "a.md"
    chapter.write_text(SHOWN)
    app = SimpleNamespace(srcdir=str(book.path), config=SimpleNamespace(fences_run_lacking=True,
                                                                        nb_execution_mode="cache"))
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, cwd: calls.append(args) or SimpleNamespace(returncode=1))
    with pytest.raises(SystemExit, match="a chapter failed its fences.*book/a.md"):
        ext._run_lacking(app)
    assert calls[-1][1:3] == ["-m", "pytest"] and calls[-1][-1] == "book/a.md" and "-n" not in calls[-1]
    app.config.fences_run_lacking = False
    ext._run_lacking(app)
    app.config.fences_run_lacking, app.config.nb_execution_mode = True, "force"   # myst-nb runs all
    ext._run_lacking(app)
    assert len(calls) == 1
    app.config.nb_execution_mode = "cache"
    monkeypatch.undo()
    ext._run_lacking(app)                       # really runs it, and stores the run
    assert executed.missing(book.path) == [] and runs(book.path) == 1
    ext._run_lacking(app)                       # nothing lacking: nothing runs
    assert runs(book.path) == 1


# --- the tooling's proofs (tests/conftest.py: tooling_key, proven) -------------------------

def _git(root: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_tooling_proof_is_keyed_by_the_tooling_not_by_the_chapters(tmp_path, tmp_path_factory, monkeypatch):
    from conftest import tooling_key

    (tmp_path / "book").mkdir()
    (tmp_path / "tool.py").write_text("x = 1\n")
    (tmp_path / "book" / "a.md").write_text("# A\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    key = tooling_key(root=tmp_path)
    (tmp_path / "book" / "a.md").write_text("# A, edited\n")          # a chapter: read by no proof
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "x.py").write_text("y = 2\n")              # what git ignores
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "new-in-every-session")  # an xdist worker's
    assert tooling_key(root=tmp_path) == key
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")                               # what the proofs' runs read
    assert tooling_key(root=tmp_path) != key
    monkeypatch.delenv("PYTEST_ADDOPTS")
    also = tmp_path / "book" / "verified.md"
    also.write_text("v1\n")
    assert tooling_key((also,), root=tmp_path) != key                 # a chapter the proof names
    (tmp_path / "tool.py").write_text("x = 2\n")                       # the tooling, edited
    edited = tooling_key(root=tmp_path)
    assert edited != key
    (tmp_path / "tool.py").chmod(0o755)                                # made executable: git keeps that
    assert tooling_key(root=tmp_path) != edited
    (tmp_path / "tool.py").chmod(0o644)
    (tmp_path / "new.py").write_text("")                               # a new file, not yet added
    assert tooling_key(root=tmp_path) != edited
    assert tooling_key(root=tmp_path_factory.mktemp("plain")) is None  # no checkout: always run


def _proofs_plugin(pytester) -> Path:
    """tests/conftest.py's proofs in a pytester checkout; the file each proof's run notes a letter in."""
    tests = Path(__file__).resolve().parent
    pytester.makeconftest(
        'import importlib.util\npytest_plugins = ["fencecheck.pytest_plugin"]\n'
        f'spec = importlib.util.spec_from_file_location("proofs", {str(tests / "conftest.py")!r})\n'
        'proofs = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(proofs)\n'
        'proven, pytest_terminal_summary = proofs.proven, proofs.pytest_terminal_summary\n'
        'pytest_configure, pytest_pyfunc_call = proofs.pytest_configure, proofs.pytest_pyfunc_call\n'
        'pytest_runtest_makereport = proofs.pytest_runtest_makereport\n'
        'pytest_sessionfinish = proofs.pytest_sessionfinish\n')
    return pytester.path.parent / f"{pytester.path.name}-runs"    # outside the checkout the plugin guards


def _note(runs: Path) -> str:
    return f"import os, pytest\n\ndef note(what):\n    with open({str(runs)!r}, 'a') as f:\n        f.write(what)\n\n"


def test_a_tooling_proof_runs_once_and_is_read_back_until_fresh(pytester):
    """The second session reads the proofs back (a fixture's result, and the pass of a test marked ``proof``; not a
    failure); ``--fences-fresh`` (make test FRESH=1) runs them again."""
    runs = _proofs_plugin(pytester)
    pytester.makepyfile(test_p=(
        _note(runs) +
        "def test_p(proven):\n"
        "    def run():\n        note('p')\n        return [1, 2]\n"
        "    assert proven('p', run) == [1, 2]\n\n"
        "@pytest.mark.proof\ndef test_q():\n    note('q')\n\n"
        "@pytest.mark.proof\ndef test_r():\n    note('r')\n    assert False\n"))
    first = pytester.runpytest_subprocess("-p", "no:xdist")            # r fails: p's result is not stored
    assert first.ret == 1 and runs.read_text() == "pqr"
    first.stdout.fnmatch_lines(["tooling proofs: 2 ran, 0 read back*"])
    assert pytester.runpytest_subprocess("-p", "no:xdist", "-k", "not test_r").ret == 0
    assert runs.read_text() == "pqrp"                                  # q was stored: a marked pass is
    second = pytester.runpytest_subprocess("-p", "no:xdist")
    second.assert_outcomes(passed=2, failed=1)
    assert runs.read_text() == "pqrpr"                                 # a failure is not stored
    second.stdout.fnmatch_lines(["tooling proofs: 0 ran, 2 read back*: p, test_q"])
    assert pytester.runpytest_subprocess("-p", "no:xdist", "--fences-fresh").ret == 1
    assert runs.read_text() == "pqrprpqr"


def test_a_tooling_proof_is_not_stored_when_its_key_changed_during_the_session(pytester):
    """A proof whose key is no longer the session's when it ends (here a variable the key reads, set by the proof;
    a file edited during the session and restored later is the case it stands for) runs again next time."""
    runs = _proofs_plugin(pytester)
    pytester.makepyfile(test_s=(
        _note(runs) +
        "def test_s(proven):\n"
        "    def run():\n        note('s')\n        os.environ['FENCES_EDITED'] = 'yes'\n        return 1\n"
        "    assert proven('s', run) == 1\n\n"
        "@pytest.mark.proof\ndef test_t():\n    note('t')\n    os.environ['FENCES_EDITED'] = 'yes'\n"))
    for _ in range(2):
        result = pytester.runpytest_subprocess("-p", "no:xdist")
        assert result.ret == 0
        result.stdout.fnmatch_lines(["tooling proofs: 2 ran, 0 read back*",
                                     "tooling proofs not stored, as the checkout*changed*: s, test_t"])
    assert runs.read_text() == "stst"

