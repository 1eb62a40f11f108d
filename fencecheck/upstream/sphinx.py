"""Sphinx's HTML search (written against Sphinx 7.4.7), for ``fencecheck.search``.

- ``porter_js``: the JavaScript Snowball Porter stemmer Sphinx ships (``minified-js``), from
  the same source as the ``snowballstemmer`` that indexes the pages; Sphinx's English puts
  an older hand-written stemmer in the page, which stems some words otherwise ("vs").
- ``check`` holds Sphinx to what ``fencecheck.search`` works around (a stopword dropped
  before stemming a query word, after stemming an indexed one; terms looked up as plain
  object properties, sphinx-doc/sphinx#13096), and searchtools.js to the members
  ``search.js`` (beside this module) replaces and the index fields it reads.
- ``keep_index_entries``: an incremental build loses the index entries of the pages it
  does not write (sphinx-doc/sphinx#12599, open); they are kept beside the environment.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["porter_js", "keep_index_entries", "entries_outdated", "check"]

#: Where ``keep_index_entries`` keeps every page's index entries, in the doctree folder.
ENTRIES = "tf-index-entries.json"


def porter_js() -> str:
    """JavaScript defining ``BaseStemmer`` and ``PorterStemmer`` (with ``stemWord``)."""
    import sphinx.search

    folder = Path(sphinx.search.__file__).parent / "minified-js"
    return "\n".join((folder / name).read_text(encoding="utf-8") for name in ("base-stemmer.js", "porter-stemmer.js"))


def keep_index_entries(app) -> list:
    """``html-collect-pages`` (before the search index is written): put back into
    ``IndexBuilder._index_entries`` those of the pages this build did not write, and keep
    every page's for the next build."""
    import json

    indexer = getattr(app.builder, "indexer", None)
    if indexer is None:
        return []
    entries = indexer._index_entries
    path = Path(app.doctreedir) / ENTRIES
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        kept = {}
    for doc, rows in kept.items():
        if doc not in entries and doc in app.env.all_docs:
            entries[doc] = [tuple(row) for row in rows]
    path.write_text(json.dumps({doc: rows for doc, rows in entries.items() if doc in app.env.all_docs}),
                    encoding="utf-8")
    return []


def entries_outdated(app, env, added, changed, removed) -> list[str]:
    """``env-get-outdated``: every page Sphinx does not read anyway, when no entries are kept,
    so that all are known."""
    return [] if (Path(app.doctreedir) / ENTRIES).exists() else sorted(env.found_docs - added - changed)


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
    assert "indexentries" not in inspect.getsource(sphinx.search.IndexBuilder.load), \
        "Sphinx's IndexBuilder.load restores index entries (sphinx-doc/sphinx#12599 fixed?): " \
        "keep_index_entries may go"
    feed = inspect.getsource(sphinx.search.IndexBuilder.feed)
    assert "self._index_entries[docname] = sorted(_index_entries)" in feed, \
        "Sphinx's IndexBuilder no longer keeps _index_entries"
    assert "if not _filter(stemmed_word) and _filter(word):" in feed, \
        "Sphinx's index no longer keeps a word whose stem is a stopword unstemmed"
    tools = (Path(sphinx.search.__file__).parents[1] / "themes" / "basic" / "static"
             / "searchtools.js").read_text(encoding="utf-8")
    assert "stopwords.indexOf(queryTermLower) !== -1" in tools, \
        "Sphinx's page search no longer drops a stopword before stemming"
    for member in ("_parseQuery: (query) => {",
                   "_performSearch: (query, searchTerms, excludedTerms, highlightTerms, objectTerms) => {",
                   "htmlToText: (htmlString, anchor) => {",
                   "return [query, searchTerms, excludedTerms, highlightTerms, objectTerms];",
                   "for (const [file, id, isMain] of foundEntries)",
                   "for (const [file, id] of foundTitles)",
                   "const [docName, title, anchor, descr, score, _filename] = item;",
                   "_displayItem(results.pop(), searchTerms, highlightTerms);"):
        assert member in tools, f"Sphinx's searchtools.js changed: no {member!r} (search.js uses it)"
    assert "{ files: titleTerms[word], score: Scorer.title }" in tools, \
        "Sphinx's page search no longer looks terms up as plain-object properties " \
        "(sphinx-doc/sphinx#13096 fixed?): fencecheck.search's PROTOTYPE may go"
