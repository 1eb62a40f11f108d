"""The build's execution cache re-executes a chapter when, and only when, it must.

Three triggers (issue: fast verification): the chapter's source, the torch
version or build, and the code in fences/. jupyter-cache covers the first
(its key hashes the code cells); fencecheck.cachekey covers the other two:
fencecheck.sphinx gives each key its own cache folder.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import preexecute  # noqa: E402
from fencecheck.chapter import HEADER  # noqa: E402

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
    nb = preexecute.read(chapter)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count, cell.outputs = 1, []
    cache = get_cache(tmp_path / ".jupyter_cache")
    store(cache, nb, str(chapter), 0.0)
    return cache, chapter


def test_an_unchanged_chapter_is_served_from_the_cache(tmp_path):
    cache, chapter = cache_with(tmp_path, CHAPTER)
    assert cache.match_cache_notebook(preexecute.read(chapter)) is not None


def test_a_changed_chapter_is_executed_again(tmp_path):
    cache, chapter = cache_with(tmp_path, CHAPTER)
    chapter.write_text(CHAPTER.replace("x = 1", "x = 2"))
    with pytest.raises(KeyError):
        cache.match_cache_notebook(preexecute.read(chapter))


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
    the build and tools/preexecute.py run with different sys.path and must agree."""
    before = cachekey.key()
    info = tmp_path / "stray.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: stray\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cachekey.key() == before


def book_of(tmp_path, monkeypatch, old: str, new: str) -> Path:
    """A two-chapter book in ``tmp_path`` for preexecute (``new.md`` the newer); its cache."""
    import os

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: old\nchapters:\n  - file: new\n")
    (tmp_path / "old.md").write_text(CHAPTER.replace("x = 1", old))
    (tmp_path / "new.md").write_text(CHAPTER.replace("x = 1", new))
    os.utime(tmp_path / "old.md", (1, 1))
    monkeypatch.setattr(preexecute, "ROOT", tmp_path)
    return cachekey.cache_path(tmp_path / ".jupyter_cache")


def outputs(cache, chapter: Path) -> list[str] | None:
    """What the cached run of ``chapter`` showed, or None when it is not cached."""
    try:
        nb = cache.merge_match_into_notebook(preexecute.read(chapter))[1]
    except KeyError:
        return None
    return [out["data"]["text/plain"] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.outputs if "data" in out]


def test_preexecute_runs_the_newest_chapter_in_the_kernel_it_started_early(tmp_path, monkeypatch):
    """After an edit, the edited chapter (the newest) is found first and its kernel starts
    while the other chapters are checked; the chapter runs in that kernel, in its own
    folder, and is cached; that kernel is stopped at the end."""
    folder = book_of(tmp_path, monkeypatch, old="6 * 7", new='import os\nf"{os.getpid()} {os.getcwd()}"')
    assert preexecute.newest_first([tmp_path / "old.md", tmp_path / "new.md"])[0].name == "new.md"
    started, stopped = [], []
    real_start, real_stop = preexecute.start_kernel, preexecute.stop_kernel

    def start(path, nb, kernels):
        km = real_start(path, nb, kernels)
        started.append((path.name, km.provisioner.pid))   # the kernel's process
        return km

    def stop(km):
        stopped.append(km.has_kernel)
        real_stop(km)
        assert not km.has_kernel

    monkeypatch.setattr(preexecute, "start_kernel", start)
    monkeypatch.setattr(preexecute, "stop_kernel", stop)
    assert preexecute.main([str(tmp_path / ".jupyter_cache")]) == 0
    assert [name for name, _ in started] == ["new.md"]   # one early kernel, for the newest
    assert stopped == [True]                      # still running after its chapter: stopped
    cache = get_cache(folder)
    assert outputs(cache, tmp_path / "old.md") == ["42"]       # run in a worker, cached
    assert outputs(cache, tmp_path / "new.md") == [repr(f"{started[0][1]} {tmp_path}")]


def test_a_chapter_whose_kernel_dies_costs_only_that_chapter(tmp_path, monkeypatch):
    """A kernel that dies (a crash, the out-of-memory killer) fails its own chapter: the
    others are still cached, so the build executes that one chapter only."""
    folder = book_of(tmp_path, monkeypatch, old="6 * 7", new="import os\nos._exit(1)")
    assert preexecute.main([str(tmp_path / ".jupyter_cache")]) == 0
    cache = get_cache(folder)
    assert outputs(cache, tmp_path / "new.md") is None
    assert outputs(cache, tmp_path / "old.md") == ["42"]


def test_without_an_early_kernel_each_chapter_starts_its_own(tmp_path, monkeypatch):
    folder = book_of(tmp_path, monkeypatch, old="6 * 7", new="7 * 6")
    monkeypatch.setattr(preexecute, "start_kernel", lambda path, nb, kernels: None)
    assert preexecute.main([str(tmp_path / ".jupyter_cache")]) == 0
    cache = get_cache(folder)
    assert outputs(cache, tmp_path / "old.md") == outputs(cache, tmp_path / "new.md") == ["42"]


def test_another_version_of_any_package_changes_the_key(tmp_path, monkeypatch):
    """The key names every distribution installed beside torch, with its version."""
    import sysconfig

    site = tmp_path / "site-packages"
    (site / "x-1.0.dist-info").mkdir(parents=True)
    real = sysconfig.get_paths
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {**real(*a, **k), "purelib": str(site)})
    before = cachekey.key()
    (site / "x-1.0.dist-info").rename(site / "x-1.1.dist-info")
    assert cachekey.key() != before
    (site / "x-1.1.dist-info").rename(site / "y-1.1.dist-info")
    assert cachekey.key() != before


def test_the_kernel_loads_the_runtime_and_nothing_of_the_verifier(tmp_path):
    """A chapter's kernel, importing what chapters import plus the test plugin's warm-up,
    loads its ``fences`` from ``RUNTIME`` and nothing of the verifier, and no runtime
    module names the verifier (an import, even later inside a function, or a module path
    in a string). So an edit of the verifier (the Sphinx extension, the record, the
    lint), which the key leaves out, cannot change what a chapter outputs; the key's
    side is the next test."""
    import subprocess
    import sys

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
    import sys

    copy = tmp_path / "elsewhere" / "fences"
    shutil.copytree(cachekey.RUNTIME, copy, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-c", "from fencecheck import cachekey; print(cachekey.RUNTIME)"],
                         env={**os.environ, "PYTHONPATH": f"{copy.parent}{os.pathsep}{ROOT}"},
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == copy.resolve()
