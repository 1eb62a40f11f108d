"""sphinx-book-theme (written against 1.3.0) under Jupyter Book 1.0.4.

- ``offer_download``: the theme adds the ".ipynb" entry to its download
  menu when the page context holds ``ipynb_source``, but sets that key
  itself only when a launch button is configured (none are: they cannot be
  verified here).
- ``dedupe_scripts``: Jupyter Book 1.x includes two scripts twice
  (sphinx-thebe's inline configuration, and a local ``mathjax_path``), and
  each copy is a JavaScript error on every page.
"""
from __future__ import annotations

import inspect

__all__ = ["offer_download", "dedupe_scripts", "check"]


def offer_download(context: dict, filename: str) -> None:
    context["ipynb_source"] = filename


def dedupe_scripts(context: dict) -> None:
    """Keep one tag per script file, one per inline body."""
    seen, kept = set(), []
    for script in context.get("script_files", []):
        filename = str(getattr(script, "filename", script) or "")
        key = filename or getattr(script, "attributes", {}).get("body", "")
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def check() -> None:
    import sphinx_book_theme.header_buttons as buttons

    assert "ipynb_source" in inspect.getsource(buttons), \
        "sphinx-book-theme: the download menu no longer reads ipynb_source"
