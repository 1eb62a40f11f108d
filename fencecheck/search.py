"""The site search's language: English whose index and query stem every word alike.

A reader pastes a whole error message into the search box, and Sphinx's search
lists only pages holding every word of it, so a single word the index and the
query treat differently finds nothing at all. With Sphinx's English (7.4) they
differ three ways (``fencecheck.upstream.sphinx`` checks each still holds):

- the query is stemmed by a hand-written JavaScript Porter stemmer, the index by
  Snowball's (``snowballstemmer``); here both are Snowball's, the page's from the
  JavaScript Snowball generates (``upstream.sphinx.porter_js``);
- a word whose stem is a stopword ("one" -> "on", "its" -> "it") is indexed
  unstemmed but queried stemmed: here its stem is the word itself on both sides
  (an empty stem too: "s", of "tensor's");
- a term named like a property of JavaScript's ``Object.prototype``
  ("constructor", "__proto__") stops the page's search with a TypeError: here
  such a stem ends in "_" on both sides.

``stem`` and ``JS_STEMMER`` implement the one rule; tests/test_search.py runs both
on the book's words and requires the same stems.
"""
from __future__ import annotations

import snowballstemmer
from sphinx.search.en import SearchEnglish

from .upstream import sphinx as upstream

#: Raised with every change to the rule: Sphinx keeps the index's stems in the saved
#: environment, which a new ``env_version`` of the extension discards.
ENV_VERSION = 1

#: Object.prototype's own property names that a lowercased stem can be.
PROTOTYPE = ("constructor", "__proto__")

#: The page's Stemmer (language_data.js defines ``stopwords`` before it).
JS_STEMMER = upstream.porter_js() + """
var Stemmer = function() {
  const porter = new PorterStemmer();
  const stop = new Set(stopwords);
  const prototype = new Set(%s);
  this.stemWord = (word) => {
    let stem = porter.stemWord(word.toLowerCase());
    if (!stem || stop.has(stem)) stem = word.toLowerCase();
    return prototype.has(stem) ? stem + "_" : stem;
  };
};
""" % list(PROTOTYPE)


class BookEnglish(SearchEnglish):
    """English, its index stemmed as the page stems a query (the module's rule)."""

    lang = "en"
    language_name = "English"
    js_stemmer_code = JS_STEMMER

    def init(self, options: dict[str, str]) -> None:
        self.stemmer = snowballstemmer.stemmer("porter")

    def stem(self, word: str) -> str:
        word = word.lower()
        stem = self.stemmer.stemWord(word)
        if not stem or stem in self.stopwords:
            stem = word
        return stem + "_" if stem in PROTOTYPE else stem
