"""Every chapter runs top to bottom as a plain Jupyter notebook, under nbclient.

The notebook a reader downloads from the site (the ".ipynb" button) is the
one the site build executed: myst-nb ran it with nbclient in a fresh
kernel, outside pytest. When that file is present and holds exactly the
chapter's current code, this test reads the record of that run: a valid
notebook, every code cell executed once, in order (execution counts
1..N), no error output. When the site has not been built, or the chapter
changed since, the test converts the chapter with jupytext and executes it
with nbclient here.
"""
from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from fences.chapter import toc_files

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html" / "_sources"
CHAPTERS = toc_files(ROOT)


def code_of(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def downloaded(chapter: Path):
    """The site's executed notebook for ``chapter``, if it is there and current."""
    path = SITE / chapter.relative_to(ROOT).with_suffix(".ipynb")
    if not path.exists():
        return None
    nb = nbformat.read(path, as_version=4)
    source = jupytext.read(chapter, fmt="md:myst")
    return nb if code_of(nb) == code_of(source) else None


def assert_ran_top_to_bottom(nb) -> None:
    nbformat.validate(nb)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"not executed once, in order: {counts}"
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_chapter_runs_as_a_notebook(chapter: Path):
    nb = downloaded(chapter)
    if nb is None:
        nb = jupytext.read(chapter, fmt="md:myst")
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(chapter.parent)}}).execute()
    assert_ran_top_to_bottom(nb)
