"""jupyter-cache (written against 1.0.1): the execution cache the build reads.

``execute`` is the nbclient run jupyter-cache's executors make (``make bench`` times it);
``store`` and ``stored`` are the write they make after a run and the read of a chapter's
run with its ``data``; ``get_cache`` creates a new cache's database under a lock (two
pytest-xdist workers doing it at once failed with "table nbcache already exists").
"""
from __future__ import annotations

import contextlib
import fcntl
import inspect
from pathlib import Path

from jupyter_cache import get_cache as _get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution

__all__ = ["get_cache", "execute", "store", "stored", "check"]


@contextlib.contextmanager
def _locked(path):
    """The cache folder's lock: one process at a time creates the database, or writes or
    reads a record and its notebook (a reader could find a notebook being replaced)."""
    Path(path).mkdir(parents=True, exist_ok=True)
    with open(Path(path) / "create.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def get_cache(path):
    """jupyter-cache's cache at ``path``, its database created by one process at a time."""
    cache = _get_cache(path)
    with _locked(path):
        cache.db   # noqa: B018 - the property creates the database and its tables
    return cache


def execute(nb, cwd: str, timeout: float, km=None):
    """Run ``nb`` in a fresh kernel (or ``km``, started and unused, which the caller stops);
    returns (ok, seconds). The kernel stops at once when done: a graceful shutdown cost
    about a second of every rebuild."""
    result = single_nb_execution(nb, cwd=cwd, timeout=timeout, allow_errors=False,
                                 meta_override=True, shutdown_kernel="immediate", km=km)
    return result.err is None, result.time


def store(cache, nb, uri: str, seconds: float, data: dict | None = None) -> None:
    """Cache ``nb`` (executed) under the hash of its code cells, replacing an older run."""
    with _locked(cache.path):
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, uri, data={"execution_seconds": seconds, **(data or {})}),
            check_validity=False, overwrite=True)


def stored(cache, nb):
    """(the executed notebook the cache holds for ``nb``'s code, its record's ``data``),
    or None when it holds none. Its cells are the code cells only, in order."""
    with _locked(cache.path):
        try:
            record = cache.match_cache_notebook(nb)
        except KeyError:
            return None
        return cache.get_cache_bundle(record.pk).nb, dict(record.data or {})


def check() -> None:
    params = inspect.signature(single_nb_execution).parameters
    for name in ("nb", "cwd", "timeout", "allow_errors", "meta_override", "kwargs"):
        assert name in params, f"jupyter-cache: single_nb_execution has no {name!r}"
    from nbclient import NotebookClient

    assert "immediate" in NotebookClient.shutdown_kernel.values, \
        "nbclient: NotebookClient.shutdown_kernel has no 'immediate'"
    for name in ("create_kernel_manager", "start_new_kernel"):
        assert hasattr(NotebookClient, name), f"nbclient: NotebookClient has no {name}"
    assert "km" in inspect.signature(NotebookClient.__init__).parameters, \
        "nbclient: NotebookClient takes no km"
    from jupyter_cache.cache.main import JupyterCacheBase

    assert isinstance(JupyterCacheBase.db, property), "jupyter-cache: the cache has no db property"
    fields = inspect.signature(CacheBundleIn).parameters
    assert {"nb", "uri", "data"} <= set(fields), f"jupyter-cache: CacheBundleIn takes {fields}"
    from jupyter_cache.base import JupyterCacheAbstract

    for name in ("cache_notebook_bundle", "match_cache_notebook", "merge_match_into_notebook",
                 "get_cache_bundle"):
        assert hasattr(JupyterCacheAbstract, name), f"jupyter-cache: no {name}"
