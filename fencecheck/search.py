"""The site search's language: English whose index and query stem every word alike.

A pasted error message finds only pages holding every word, so the index (Python) and the
query (JavaScript) must stem alike. Sphinx's English (7.4) differs three ways
(``fencecheck.upstream.sphinx`` checks each still holds), each fixed here on both sides:
the query's stemmer is Snowball's Porter, as the index's; a word whose stem is empty or a
stopword ("one" -> "on") is its own stem; a stem named like a property of
``Object.prototype`` ("constructor") ends in "_", else the page's search stops with a
TypeError. tests/test_search.py requires ``stem`` and ``JS_STEMMER`` to agree.
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
