"""Every chapter runs top to bottom as a plain Jupyter notebook, under nbclient.

The notebook tested is the one the site offers for download
(_build/html/_sources/book/<chapter>.ipynb) when the site has been built,
else the same chapter converted from its MyST source by jupytext. Either
way it runs outside pytest's plugin, as a reader would run it.
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


def notebook_for(chapter: Path) -> nbformat.NotebookNode:
    downloaded = SITE / chapter.relative_to(ROOT).with_suffix(".ipynb")
    if downloaded.exists() and downloaded.stat().st_mtime >= chapter.stat().st_mtime:
        nb = nbformat.read(downloaded, as_version=4)
        for cell in nb.cells:          # run it fresh: the outputs must come from this run
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        return nb
    return jupytext.read(chapter, fmt="md:myst")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_chapter_runs_as_a_notebook(chapter: Path):
    nb = notebook_for(chapter)
    nbformat.validate(nb)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(chapter.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
