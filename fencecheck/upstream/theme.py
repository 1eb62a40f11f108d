"""sphinx-book-theme (written against 1.3.0) under Jupyter Book 1.0.4.

- ``offer_download``: the theme adds the ".ipynb" entry to its download
  menu when the page context holds ``ipynb_source``, but sets that key
  itself only when a launch button is configured (none are: they cannot be
  verified here).
- ``offer_wheel``: the download menu the theme built (``header_buttons``, the group
  labelled ``download-buttons``) gets a second entry beside the ".ipynb": the
  book's helpers, the wheel a downloaded notebook installs.
- ``dedupe_scripts``: Jupyter Book 1.x includes two scripts twice
  (sphinx-thebe's inline configuration, and a local ``mathjax_path``), and
  each copy is a JavaScript error on every page.
"""
from __future__ import annotations

import inspect

__all__ = ["offer_download", "offer_wheel", "dedupe_scripts", "check"]


def offer_download(context: dict, filename: str) -> None:
    context["ipynb_source"] = filename


def offer_wheel(context: dict, url: str, filename: str) -> bool:
    """Add the wheel after the ".ipynb" entry of the page's download menu; False when
    the page has no such menu (a page that is not a notebook)."""
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        buttons = group["buttons"]
        at = next((i + 1 for i, b in enumerate(buttons)
                   if b.get("label") == "download-notebook-button"), None)
        if at is None:
            return False
        buttons.insert(at, {"type": "link", "url": url, "text": ".whl (helpers)",
                            "icon": "fas fa-box", "label": "download-wheel-button",
                            "tooltip": f"The book's helpers, {filename}: save it beside the "
                                       "notebook"})
        return True
    return False


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

    source = inspect.getsource(buttons)
    assert "ipynb_source" in source, \
        "sphinx-book-theme: the download menu no longer reads ipynb_source"
    assert '"download-buttons"' in source and '"download-notebook-button"' in source, \
        "sphinx-book-theme: the download menu's labels changed (offer_wheel)"
