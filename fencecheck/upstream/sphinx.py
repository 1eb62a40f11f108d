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
- ``search.js`` (beside this module): the page's search, for a pasted message. It
  replaces members of searchtools.js's ``Search`` (``_parseQuery``,
  ``_performSearch``, ``htmlToText``) and reads ``Search._index``; ``check`` holds
  searchtools.js to their signatures and to the index's fields it reads.
- ``keep_index_entries``: the index entries of the pages an incremental build does
  not write are lost from ``searchindex.js`` (sphinx-doc/sphinx#12599, open): the
  errors page's messages, each an entry, then found nothing. Kept beside the
  environment and put back into ``IndexBuilder._index_entries`` before the index is
  written.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["porter_js", "keep_index_entries", "entries_outdated", "check"]

#: Where ``keep_index_entries`` keeps every page's index entries, in the doctree folder.
ENTRIES = "tf-index-entries.json"


def _folder() -> Path:
    import sphinx.search

    return Path(sphinx.search.__file__).parent / "minified-js"


def porter_js() -> str:
    """JavaScript defining ``BaseStemmer`` and ``PorterStemmer`` (with ``stemWord``)."""
    return "\n".join((_folder() / name).read_text(encoding="utf-8")
                     for name in ("base-stemmer.js", "porter-stemmer.js"))


def keep_index_entries(app) -> list:
    """``html-collect-pages`` (emitted before the search index is written): put back the
    index entries of the pages this build did not write, and keep every page's for the
    next build. ``IndexBuilder.load`` restores terms and titles from the old
    searchindex.js but not the entries, and the environment is saved before the pages
    are fed to the index, so an incremental build kept only the written pages' entries."""
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
    path.write_text(json.dumps({doc: [list(row) for row in rows] for doc, rows in entries.items()
                                if doc in app.env.all_docs}), encoding="utf-8")
    return []


def entries_outdated(app, env, added, changed, removed) -> list[str]:
    """``env-get-outdated``: with no kept entries (a build before ``keep_index_entries``,
    or its file lost) every page is written again, so that every page's are known."""
    return [] if (Path(app.doctreedir) / ENTRIES).exists() else sorted(env.found_docs)


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
    assert "self._index_entries[docname] = sorted(_index_entries)" in inspect.getsource(
        sphinx.search.IndexBuilder.feed), "Sphinx's IndexBuilder no longer keeps _index_entries"
    feed = inspect.getsource(sphinx.search.IndexBuilder.feed)
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
