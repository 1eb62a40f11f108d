"""sphinx-book-theme (written against 1.3.0) under Jupyter Book 1.0.4.

The theme shows the ".ipynb" download only when the page context holds ``ipynb_source``,
which it sets itself only for launch buttons (``fencecheck.sphinx`` sets it); ``offer_wheel`` adds
the wheel beside it in the menu (``header_buttons``); ``dedupe_scripts`` drops the scripts
Jupyter Book 1.x includes twice (each copy a JavaScript error on every page).
"""
from __future__ import annotations

import inspect

__all__ = ["offer_wheel", "dedupe_scripts", "check"]


def offer_wheel(context: dict, url: str, filename: str) -> bool:
    """Add the wheel after the ".ipynb" entry of the page's download menu; False when
    the page has no such menu (a page that is not a notebook)."""
    for group in context.get("header_buttons", []):
        buttons = group["buttons"] if group.get("label") == "download-buttons" else []
        for at, button in enumerate(buttons, 1):
            if button.get("label") == "download-notebook-button":
                buttons.insert(at, {"type": "link", "url": url, "text": ".whl (helpers)", "icon": "fas fa-box",
                                    "label": "download-wheel-button",
                                    "tooltip": f"The book's helpers, {filename}: save it beside the notebook"})
                return True
    return False


def dedupe_scripts(context: dict) -> None:
    """Keep one tag per script file, one per inline body."""
    kept = {}
    for script in context.get("script_files", []):
        filename = str(getattr(script, "filename", script) or "")
        kept.setdefault(filename or getattr(script, "attributes", {}).get("body", ""), script)
    context["script_files"] = list(kept.values())


def check() -> None:
    import sphinx_book_theme.header_buttons as buttons

    source = inspect.getsource(buttons)
    assert "ipynb_source" in source, \
        "sphinx-book-theme: the download menu no longer reads ipynb_source"
    assert '"download-buttons"' in source and '"download-notebook-button"' in source, \
        "sphinx-book-theme: the download menu's labels changed (offer_wheel)"
