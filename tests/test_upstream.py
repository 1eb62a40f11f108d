"""Each upstream package still has the shape fencecheck/upstream/ relies on."""
from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["nbval", "myst_nb", "jupyter_cache", "theme", "sphinx"])
def test_upstream_has_the_shape_we_rely_on(name):
    importlib.import_module(f"fencecheck.upstream.{name}").check()


def test_no_private_import_outside_fencecheck_upstream():
    """Private names of the four upstreams are imported in fencecheck/upstream/ only."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    private = re.compile(r"^\s*(from|import) (nbval\.plugin|myst_nb\.core|myst_parser\.config|"
                         r"jupyter_cache\.(base|executors)|sphinx_book_theme)", re.M)
    offenders = [p.relative_to(root).as_posix()
                 for folder in ("fences", "fencecheck", "tools", "benchmarks", "tests")
                 for p in (root / folder).rglob("*.py")
                 if "upstream" not in p.parts and private.search(p.read_text())]
    assert offenders == []


def test_every_tool_reads_a_chapter_through_the_one_reader():
    """jupytext is read nowhere: fencecheck.chapter.parse (myst-nb's reader) is the reader."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for folder in ("fences", "fencecheck", "tools"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            assert "jupytext.read" not in text and "read_myst_markdown_notebook(" not in text \
                or path.name == "myst_nb.py", path
