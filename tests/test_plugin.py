"""The test plugin, exercised with pytester (the way nbval tests itself)."""
from __future__ import annotations

import pytest

from fencecheck.chapter import HEADER


@pytest.mark.proof
def test_a_stray_notebook_in_the_book_is_refused_with_what_to_do(book):
    (book.path / "book" / "creation.ipynb").write_text('{"cells": [], "metadata": {}, '
                                                       '"nbformat": 4, "nbformat_minor": 5}')
    result = book.runpytest_subprocess("book")
    result.stdout.fnmatch_lines(["*book/creation.ipynb: a notebook inside book/ is not part "
                                 "of the book*jupytext --to ipynb*-o notebooks/creation.ipynb*"])
    assert result.ret != 0


@pytest.mark.proof
def test_a_chapter_failing_the_lint_is_a_collection_error(book):
    (book.path / "book" / "c.md").write_text(
        HEADER + "```{code-cell} ipython3\n:tags: [fence]\n:fence-id: c-one\n"
        "# Proves: x\nx = 1\nassert x == x\n```\n")
    result = book.runpytest_subprocess("book")
    result.stdout.fnmatch_lines(["*`assert x == x` cannot fail*"])
    assert result.ret != 0


@pytest.mark.proof
def test_duplicate_fence_ids_stop_the_session(book):
    book.makefile(".yml", _toc="format: jb-book\nroot: book/a\nchapters:\n  - file: book/b\n")
    cell = ("```{code-cell} ipython3\n:tags: [fence]\n:fence-id: same\n# Proves: x\n"
            "assert len('a') == 1\n```\n")
    for name in "ab":
        (book.path / "book" / f"{name}.md").write_text(HEADER + cell)
    result = book.runpytest_subprocess("book")
    result.stderr.fnmatch_lines(["*fence-id 'same' is used in book/a.md line * and in book/b.md line *"])
    assert result.ret != 0


@pytest.mark.proof
def test_the_cell_timeout_comes_from_the_site_config(book):
    book.makefile(".yml", _config="execute:\n  timeout: 7\n")
    book.makepyfile(test_t="def test_t(pytestconfig):\n"
                           "    assert pytestconfig.option.nbval_cell_timeout == 7.0\n")
    assert book.runpytest_subprocess("test_t.py").ret == 0


@pytest.mark.proof
def test_a_dead_kernel_is_reported_at_once_naming_the_cell(book):
    book.makefile(".yml", _config="execute:\n  timeout: 300\n")
    (book.path / "book" / "d.md").write_text(
        HEADER + "```{code-cell} ipython3\nx = 1\n```\n\n"
        "```{code-cell} ipython3\nimport os\n\nos._exit(3)\n```\n\n"
        "```{code-cell} ipython3\n:tags: [fence]\n:fence-id: d-after\n"
        "# Proves: nothing; it never runs.\nassert len('a') == 1\n```\n")
    import time

    started = time.monotonic()
    result = book.runpytest_subprocess("book", "-v")
    seconds = time.monotonic() - started
    out = result.stdout.str()
    assert "the kernel died (exit code 3) while running this cell (Cell 1 (line" in out, out
    assert "not run: the kernel died in Cell 1" in out, out
    assert "Timeout" not in out and seconds < 120, (seconds, out)   # not the 300 s timeout
    assert result.ret != 0
