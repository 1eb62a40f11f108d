"""The build's execution cache re-executes a chapter when, and only when, it must.

Three triggers (issue: fast verification): the chapter's source, the torch
version or build, and the code in fences/. jupyter-cache covers the first
(its key hashes the code cells); fences.cachekey covers the other two:
fences.sphinx gives each key its own cache folder.
"""
from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

from fences import cachekey
from fences.upstream.jupyter_cache import get_cache, store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import preexecute  # noqa: E402
from fences.chapter import HEADER  # noqa: E402

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

    from fences import sphinx

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


def test_the_build_waits_for_preexecute_before_reading(tmp_path, monkeypatch):
    """`make book` runs preexecute beside the build; the build reads no page while the
    lock names a live process, and ignores a lock left by one that is gone."""
    import subprocess
    import time
    import types

    from fences import cachekey
    from fences import rebuild as ext

    monkeypatch.setattr(ext.myst_nb, "cache_path_of", lambda app: str(tmp_path))
    monkeypatch.setattr(ext, "warm_writer", lambda app: None)
    lock = cachekey.running_lock(tmp_path)
    ext.wait_for_preexecute(types.SimpleNamespace(), None, [])   # no lock: no wait
    lock.write_text("999999999")                                  # no such process
    ext.wait_for_preexecute(types.SimpleNamespace(), None, [])
    holder = subprocess.Popen(["sleep", "1"])
    lock.write_text(str(holder.pid))
    started = time.monotonic()
    ext.wait_for_preexecute(types.SimpleNamespace(), None, [])
    assert time.monotonic() - started >= 0.8     # waited for the holder to end
    # the holder is now a zombie (not reaped), as preexecute is under make: no wait
    started = time.monotonic()
    ext.wait_for_preexecute(types.SimpleNamespace(), None, [])
    assert time.monotonic() - started < 0.5
    holder.wait()


def test_preexecute_runs_the_newest_chapter_in_the_kernel_it_started_early(tmp_path, monkeypatch):
    """After an edit, the edited chapter (the newest) is found first and its kernel starts
    while the other chapters are checked; the chapter runs in that kernel and is cached.
    The lock is gone before that kernel is stopped: the build reads on meanwhile."""
    import os

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: old\nchapters:\n  - file: new\n")
    (tmp_path / "old.md").write_text(CHAPTER)
    (tmp_path / "new.md").write_text(CHAPTER.replace("x = 1", "import os\nos.getpid()"))
    os.utime(tmp_path / "old.md", (1, 1))
    monkeypatch.setattr(preexecute, "ROOT", tmp_path)
    assert preexecute.newest_first([tmp_path / "old.md", tmp_path / "new.md"])[0].name == "new.md"

    started, stopped = [], []
    real_start, real_stop = preexecute.start_kernel, preexecute.stop_kernel
    folder = cachekey.cache_path(tmp_path / ".jupyter_cache")

    def start(path, nb):
        km = real_start(path, nb)
        started.append((path.name, km.provisioner.pid))   # the kernel's process
        return km

    def stop(km):
        stopped.append((km.has_kernel, cachekey.running_lock(folder).exists()))
        real_stop(km)
        assert not km.has_kernel

    monkeypatch.setattr(preexecute, "start_kernel", start)
    monkeypatch.setattr(preexecute, "stop_kernel", stop)
    assert preexecute.main([str(tmp_path / ".jupyter_cache")]) == 0
    assert [name for name, _ in started] == ["new.md"]   # one early kernel, for the newest
    assert stopped == [(True, False)]             # still running after its chapter, lock gone
    cache = get_cache(folder)
    for name in ("old.md", "new.md"):             # both executed and cached
        cached = cache.merge_match_into_notebook(preexecute.read(tmp_path / name))[1]
        assert all(cell.execution_count for cell in cached.cells if cell.cell_type == "code")
    outputs = cache.merge_match_into_notebook(preexecute.read(tmp_path / "new.md"))[1].cells
    printed = [out["data"]["text/plain"] for cell in outputs if cell.cell_type == "code"
               for out in cell.outputs if "data" in out]
    assert printed == [str(started[0][1])]        # new.md ran in that kernel
