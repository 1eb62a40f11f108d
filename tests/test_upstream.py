"""Each upstream package still has the shape fences/upstream/ relies on."""
from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["nbval", "myst_nb", "jupyter_cache", "theme"])
def test_upstream_has_the_shape_we_rely_on(name):
    importlib.import_module(f"fences.upstream.{name}").check()


def test_no_private_import_outside_fences_upstream():
    """Private names of the four upstreams are imported in fences/upstream/ only."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    private = re.compile(r"^\s*(from|import) (nbval\.plugin|myst_nb\.core|myst_parser\.config|"
                         r"jupyter_cache\.(base|executors)|sphinx_book_theme)", re.M)
    offenders = [p.relative_to(root).as_posix()
                 for folder in ("fences", "tools", "benchmarks", "tests")
                 for p in (root / folder).rglob("*.py")
                 if "upstream" not in p.parts and private.search(p.read_text())]
    assert offenders == []


def test_jupytext_and_myst_nb_read_every_chapter_alike():
    """The suite reads chapters with jupytext, the build with myst-nb's reader: same cells."""
    from pathlib import Path

    import jupytext

    from fences.chapter import toc_files
    from fences.upstream.myst_nb import read_notebook

    def cells(nb):
        return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", [])),
                 c.metadata.get("fence-id")) for c in nb.cells if c.cell_type == "code"]

    root = Path(__file__).resolve().parents[1]
    for path in toc_files(root):
        assert cells(jupytext.read(path, fmt="md:myst")) == cells(read_notebook(path)), path
