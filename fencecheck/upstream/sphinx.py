"""Sphinx's HTML search (written against Sphinx 7.4.7), for ``fencecheck.search``.

- ``porter_js``: the JavaScript of the Snowball Porter stemmer Sphinx ships
  (``sphinx/search/minified-js``): generated from the same Snowball source as the
  Python ``snowballstemmer`` that indexes the pages, so the query and the index stem
  a word alike. Sphinx's English search puts an older hand-written Porter stemmer
  in the page instead (``sphinx.search.en.js_porter_stemmer``), which stems some
  words otherwise ("vs", "analogies").
- What ``check`` holds the installed Sphinx to, the facts ``fencecheck.search``
  works around: the page's search drops a stopword before stemming a query word
  while the index drops one after (``IndexBuilder.feed``: a word whose stem is a
  stopword is indexed unstemmed), and it looks a term up as a property of a plain
  object (``terms[word]``), so a term named like a property of
  ``Object.prototype`` ("constructor") stops the search with a TypeError
  (sphinx-doc/sphinx#13096, fixed in 8.2 with ``hasOwnProperty``). When a Sphinx
  release changes these, ``check`` fails and ``fencecheck.search`` is revisited.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["porter_js", "check"]


def _folder() -> Path:
    import sphinx.search

    return Path(sphinx.search.__file__).parent / "minified-js"


def porter_js() -> str:
    """JavaScript defining ``BaseStemmer`` and ``PorterStemmer`` (with ``stemWord``)."""
    return "\n".join((_folder() / name).read_text(encoding="utf-8")
                     for name in ("base-stemmer.js", "porter-stemmer.js"))


def check() -> None:
    import inspect

    import snowballstemmer
    import sphinx.search
    from sphinx.search.en import SearchEnglish

    js = porter_js()
    assert "BaseStemmer" in js and "PorterStemmer" in js and "stemWord" in js, \
        "sphinx/search/minified-js no longer holds the Snowball Porter stemmer"
    english = SearchEnglish({})
    porter = snowballstemmer.stemmer("porter")
    for word in ("received", "using", "contiguous", "one", "its"):
        assert english.stem(word) == porter.stemWord(word), \
            "Sphinx's English index no longer stems with snowballstemmer's Porter"
    feed = inspect.getsource(sphinx.search.IndexBuilder.feed)
    assert "if not _filter(stemmed_word) and _filter(word):" in feed, \
        "Sphinx's index no longer keeps a word whose stem is a stopword unstemmed"
    tools = (Path(sphinx.search.__file__).parents[1] / "themes" / "basic" / "static"
             / "searchtools.js").read_text(encoding="utf-8")
    assert "stopwords.indexOf(queryTermLower) !== -1" in tools, \
        "Sphinx's page search no longer drops a stopword before stemming"
    assert "{ files: titleTerms[word], score: Scorer.title }" in tools, \
        "Sphinx's page search no longer looks terms up as plain-object properties " \
        "(sphinx-doc/sphinx#13096 fixed?): fencecheck.search's PROTOTYPE may go"
