"""myst-nb (written against 1.4.0) and myst-parser (3.0.1): how the build reads a chapter.

``read_notebook`` is myst-nb's own reader (``myst_nb.core.read``, not a documented API),
the one reader of a chapter (``fencecheck.chapter.parse``), configured as the build is.
The rest reach into the build: its record of a run, its folds; ``check`` also holds
myst-nb to what ``fencecheck.sphinx`` reads of it directly (``mystnb_config``'s cache path,
each page's notebook in ``jupyter_execute/``).
"""
from __future__ import annotations

import inspect
from pathlib import Path

from myst_nb.core.read import read_myst_markdown_notebook
from myst_parser.config.main import MdParserConfig

from myst_nb.core.variables import format_plain_text  # how {glue:text} formats a value

__all__ = ["format_plain_text", "read_notebook", "exec_data", "fold_cell", "check"]


def read_notebook(path: Path, text: str, extensions: tuple[str, ...]):
    """The chapter as myst-nb's reader makes it, with the build's MyST ``extensions``
    (``colon_fence`` decides whether a code cell in a ``:::`` block is a cell);
    ``nb.metadata.source_map`` holds each cell's first line (1-based). Kept on disk
    (``fencecheck.chapter.cached_notebook``)."""
    from importlib.metadata import version

    from ..chapter import cached_notebook

    reader = (f"myst-nb {version('myst-nb')} myst-parser {version('myst-parser')} "
              f"{sorted(extensions)} {path}")
    return cached_notebook(reader, text, lambda: read_myst_markdown_notebook(
        text, MdParserConfig(enable_extensions=set(extensions)), add_source_map=True, path=path))


def exec_data(env, docname: str) -> dict | None:
    """What myst-nb recorded of the page's execution (``mtime``, ``runtime``, ``succeeded``)."""
    from myst_nb.sphinx_ import NbMetadataCollector

    return NbMetadataCollector.get_doc_data(env).get(docname, {}).get("exec_data")


def fold_cell(cell, show: str, hide: str, mode: str = "all") -> None:
    """Fold a code cell's source and outputs (``mode="input"``: its source) behind one
    summary, as ``hide-cell`` (``hide-input``) does: set before myst-nb's
    ``HideInputCells`` post-transform reads them."""
    cell["hide_mode"] = mode
    cell["prompt_show"] = show
    cell["prompt_hide"] = hide


def check() -> None:
    from myst_nb.sphinx_ import NbMetadataCollector

    assert callable(getattr(NbMetadataCollector, "get_doc_data", None)), \
        "myst-nb: NbMetadataCollector.get_doc_data is gone"
    params = inspect.signature(read_myst_markdown_notebook).parameters
    for name in ("config", "add_source_map", "path"):
        assert name in params, f"myst-nb: read_myst_markdown_notebook has no {name!r}"
    from myst_nb.core.config import NbParserConfig

    assert "execution_cache_path" in NbParserConfig.__dataclass_fields__, \
        "myst-nb: NbParserConfig has no execution_cache_path"
    from myst_nb.sphinx_ import HideInputCells

    source = inspect.getsource(HideInputCells)
    for name in ("hide_mode", "prompt_show", "prompt_hide"):
        assert f'"{name}"' in source, f"myst-nb: HideInputCells no longer reads {name!r}"
    import myst_nb.sphinx_ext

    assert "jupyter_execute" in inspect.getsource(myst_nb.sphinx_ext), \
        "myst-nb: executed notebooks are no longer written to jupyter_execute/"
