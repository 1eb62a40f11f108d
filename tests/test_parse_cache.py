"""fences.chapter.parse: jupytext's reading, kept on disk per text."""
import jupytext
import pytest

from fences import chapter
from fences.chapter import HEADER

TEXT = HEADER + """
# A chapter

```{code-cell} ipython3
x = 1
```
"""


def same(a, b) -> bool:
    """Equal notebooks, cell ids aside (jupytext draws new random ids on every read)."""
    def strip(nb):
        return {**nb, "cells": [{k: v for k, v in c.items() if k != "id"} for c in nb.cells]}
    return strip(a) == strip(b)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FENCES_PARSE_CACHE", str(tmp_path / "parsed"))
    return tmp_path / "parsed"


def test_parse_is_jupytext_reading(cache):
    assert same(chapter.parse(TEXT), jupytext.reads(TEXT, fmt="md:myst"))
    assert len(list(cache.glob("*.ipynb"))) == 1


def test_second_parse_reads_the_cache_not_the_text(cache, monkeypatch):
    first = chapter.parse(TEXT)

    def refuse(*args, **kwargs):
        raise AssertionError("jupytext read the text again")

    monkeypatch.setattr(jupytext, "reads", refuse)
    assert chapter.parse(TEXT) == first
    with pytest.raises(AssertionError, match="read the text again"):
        chapter.parse(TEXT + "\nmore\n")   # another text is read, not served from the cache


def test_each_call_returns_a_fresh_notebook(cache):
    a = chapter.parse(TEXT)
    a.cells[1].source = "changed"
    assert chapter.parse(TEXT).cells[1].source == "x = 1"


def test_a_damaged_cache_file_is_read_again(cache):
    chapter.parse(TEXT)
    (entry,) = cache.glob("*.ipynb")
    entry.write_text("{not json")
    assert same(chapter.parse(TEXT), jupytext.reads(TEXT, fmt="md:myst"))


def test_an_unwritable_cache_still_parses(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FENCES_PARSE_CACHE", str(blocker / "parsed"))
    assert same(chapter.parse(TEXT), jupytext.reads(TEXT, fmt="md:myst"))
