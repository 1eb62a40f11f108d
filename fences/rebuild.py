"""What keeps `make book` after one edit quick: the Sphinx side.

``make book`` runs ``tools/preexecute.py`` (which executes the chapters the
execution cache lacks) beside ``jupyter-book build``. Sphinx starts while
the kernels run, then:

- ``wait_for_preexecute``: reads no page while preexecute fills the cache
  (reading one first would execute its chapter a second time). While it
  waits, it does now what writing the first page would do first
  (``warm_writer``).
- ``cache_templates``: keeps the theme's compiled Jinja templates between
  builds (Jinja's own bytecode cache), so a build does not compile them
  again. Jinja keys a compiled template on its source only; the folder it
  is kept in is named by everything else that shapes the compiled code
  (``template_cache``).
- ``freeze_environment``: the environment Sphinx has just loaded (every
  page's metadata, kept until the build ends) is moved out of the garbage
  collector's sight (``gc.freeze``). Each collection otherwise walks all of
  it again: more than half the time Sphinx spends loading the pages'
  doctrees to number their figures, here.
- ``skip_final_collection``: once the build is done, the interpreter's last
  garbage collection (about a second here, over every page's doctree) is
  skipped the same way; the process is about to end and the operating
  system frees it all.

Frozen objects are never collected: the entries of the pages read again
(all of them, after a key change) stay in memory until the process ends.
That is the command-line build's case; a process that runs many Sphinx
builds should not connect these two hooks.

Registered by ``fences.sphinx``.
"""
from __future__ import annotations

import gc
import os
import time
from pathlib import Path

from sphinx.util import logging

from .upstream import myst_nb

logger = logging.getLogger(__name__)


def wait_for_preexecute(app, env, docnames) -> None:
    """Before reading any page, wait for ``tools/preexecute.py`` filling this cache.

    A lock left by a process that no longer runs is ignored.
    """
    from . import cachekey

    lock = cachekey.running_lock(Path(myst_nb.cache_path_of(app)))
    if not (lock.exists() and running(lock)):
        return
    waited = time.monotonic()
    warm_writer(app)
    while lock.exists() and running(lock):
        time.sleep(0.02)
    if time.monotonic() - waited > 0.5:
        logger.info(f"fences: waited {time.monotonic() - waited:.1f} s for preexecute")


def running(lock: Path) -> bool:
    """Does the preexecute the lock names still run? One that ended without removing its
    lock (killed) is gone, and so is a zombie: `make book`'s shell reaps preexecute only
    after the build, so waiting on its zombie would never end. A lock naming no process,
    this one, or a process that is not preexecute (its number reused) is stale."""
    try:
        pid = int(lock.read_text() or 0)
        if pid <= 0 or pid == os.getpid():
            return False
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return True   # no /proc: trust kill()
    return state != "Z" and b"preexecute" in command


def warm_writer(app) -> None:
    """Pay now, while Sphinx would only wait, what writing the first page pays first:
    Pygments compiles a lexer's rules when it first highlights with it (code cells,
    outputs, tracebacks), and soupsieve its CSS grammar when the theme first selects
    in a page's navigation with BeautifulSoup. Nothing here changes any output."""
    highlighter = getattr(app.builder, "highlighter", None)
    if highlighter is not None:
        for lexer in {"ipython3", app.config.nb_render_text_lexer, app.config.nb_render_error_lexer}:
            try:
                highlighter.highlight_block("x = 1\n", lexer)
            except Exception:   # noqa: BLE001 - a lexer the page would report itself
                pass
    try:
        import soupsieve
    except ImportError:
        return
    soupsieve.compile("li > details")


def cache_templates(app) -> None:
    """Give the builder's Jinja environment a bytecode cache beside the doctrees."""
    from jinja2 import FileSystemBytecodeCache

    environment = getattr(getattr(app.builder, "templates", None), "environment", None)
    if environment is None or environment.bytecode_cache is not None:
        return
    folder = Path(app.doctreedir) / "jinja" / template_cache(environment)
    folder.mkdir(parents=True, exist_ok=True)
    environment.bytecode_cache = FileSystemBytecodeCache(str(folder))


def template_cache(environment) -> str:
    """A name for what shapes compiled template code besides each template's source: the
    installed packages (Jinja, Sphinx, the theme, ...), Python and fences/
    (``fences.cachekey.key``), the environment's extensions and its parsing options."""
    import hashlib

    from . import cachekey

    options = ("block_start_string", "block_end_string", "variable_start_string",
               "variable_end_string", "comment_start_string", "comment_end_string",
               "line_statement_prefix", "line_comment_prefix", "trim_blocks", "lstrip_blocks",
               "newline_sequence", "keep_trailing_newline", "optimized", "autoescape", "finalize")

    def shown(value):   # a function by its name: its repr holds an address that changes
        return getattr(value, "__qualname__", repr(value)) if callable(value) else repr(value)

    shape = [cachekey.key(), type(environment).__qualname__, sorted(environment.extensions),
             [(name, shown(getattr(environment, name, None))) for name in options]]
    return hashlib.sha256(repr(shape).encode()).hexdigest()[:16]


def freeze_environment(app, env, docnames) -> None:
    """Keep what exists now, the loaded environment above all, out of every later
    collection. Objects made from now on (each page's doctree) are collected as usual."""
    gc.freeze()


def skip_final_collection(app, exception) -> None:
    """Move every object to the permanent generation, which no collection visits."""
    gc.freeze()


def setup(app) -> None:
    app.connect("builder-inited", cache_templates)
    app.connect("env-before-read-docs", freeze_environment, priority=100)
    app.connect("env-before-read-docs", wait_for_preexecute)
    app.connect("build-finished", skip_final_collection, priority=900)
