"""fencecheck.chapter.parse: the one reader (myst-nb's, with the build's MyST extensions),
kept on disk per text."""
from pathlib import Path

import pytest
from fencecheck.upstream import myst_nb as upstream

from fencecheck import chapter
from fencecheck.chapter import HEADER

TEXT = HEADER + """
# A chapter

```{code-cell} ipython3
x = 1
```
"""


PATH = Path("book/a.md")   # not read: the text is given


def myst(text: str, extensions=()):
    """myst-nb's reader itself, as the build calls it."""
    return upstream.read_myst_markdown_notebook(
        text, upstream.MdParserConfig(enable_extensions=set(extensions)), add_source_map=True, path=PATH)


def same(a, b) -> bool:
    """Equal notebooks, cell ids aside (a reader may draw new ids on every read)."""
    def strip(nb):
        return {**nb, "cells": [{k: v for k, v in c.items() if k != "id"} for c in nb.cells]}
    return strip(a) == strip(b)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FENCES_PARSE_CACHE", str(tmp_path / "parsed"))
    return tmp_path / "parsed"


def test_parse_is_myst_nb_reading_with_the_builds_extensions(cache):
    assert same(chapter.parse(TEXT, PATH), myst(TEXT, chapter.myst_extensions(PATH)))
    assert "colon_fence" in chapter.myst_extensions(PATH)   # this book's _config.yml
    assert len(list(cache.glob("*.ipynb"))) == 1


def test_second_parse_reads_the_cache_not_the_text(cache, monkeypatch):
    first = chapter.parse(TEXT, PATH)

    def refuse(*args, **kwargs):
        raise AssertionError("the reader read the text again")

    monkeypatch.setattr(upstream, "read_myst_markdown_notebook", refuse)
    assert chapter.parse(TEXT, PATH) == first
    with pytest.raises(AssertionError, match="read the text again"):
        chapter.parse(TEXT + "\nmore\n", PATH)   # another text is read, not served from the cache


def test_each_call_returns_a_fresh_notebook(cache):
    a = chapter.parse(TEXT, PATH)
    a.cells[1].source = "changed"
    assert chapter.parse(TEXT, PATH).cells[1].source == "x = 1"


def test_a_damaged_cache_file_is_read_again(cache):
    chapter.parse(TEXT, PATH)
    (entry,) = cache.glob("*.ipynb")
    entry.write_text("{not json")
    assert same(chapter.parse(TEXT, PATH), myst(TEXT, chapter.myst_extensions(PATH)))


def test_an_unwritable_cache_still_parses(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FENCES_PARSE_CACHE", str(blocker / "parsed"))
    assert same(chapter.parse(TEXT, PATH), myst(TEXT, chapter.myst_extensions(PATH)))


def test_a_cell_in_a_colon_box_is_text_for_the_build_and_so_for_every_tool(cache, tmp_path):
    """Why the reader takes the build's extensions: with colon_fence (the book's), a
    code cell inside ``:::{note}`` is text in the box; without it, a cell."""
    boxed = HEADER + "\n:::{note}\nA note.\n\n```{code-cell} ipython3\nx = 1\n```\n:::\n"
    (tmp_path / "_config.yml").write_text("parse:\n  myst_enable_extensions: [colon_fence]\n")
    inside = tmp_path / "book" / "a.md"
    assert chapter.myst_extensions(inside) == ("colon_fence",)
    assert [c.cell_type for c in chapter.parse(boxed, inside).cells] == ["markdown"]
    assert "code" in [c.cell_type for c in myst(boxed).cells]     # the default config differs


def test_the_cache_is_keyed_on_the_extensions_too(cache, tmp_path):
    """The same text and path under another _config.yml is read again, not served."""
    boxed = HEADER + "\n:::{note}\nA note.\n\n```{code-cell} ipython3\nx = 1\n```\n:::\n"
    inside = tmp_path / "book" / "a.md"
    config = tmp_path / "_config.yml"
    config.write_text("parse:\n  myst_enable_extensions: [colon_fence]\n")
    assert [c.cell_type for c in chapter.parse(boxed, inside).cells] == ["markdown"]
    config.write_text("parse:\n  myst_enable_extensions: []\n")
    assert "code" in [c.cell_type for c in chapter.parse(boxed, inside).cells]
