"""The site search's language (fencecheck.search): the index and the query stem alike."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fencecheck import search, verified
from fencecheck.record import Fence, Raised

ROOT = Path(__file__).resolve().parents[1]
#: Words where Sphinx 7.4's English index and page search disagree (the module's list).
TRICKY = ["one", "its", "s", "tensor's", "constructor", "constructors", "__proto__", "vs",
          "analogies", "Use", "received", "the", "is", "0s"]


def book_words() -> list[str]:
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "book").glob("*.md")))
    return sorted({w.lower() for w in re.findall(r"\w+", text)} | {w.lower() for w in TRICKY})


def test_the_rule_on_the_words_sphinx_english_gets_wrong():
    lang = search.BookEnglish({})
    assert [lang.stem(w) for w in ("one", "its", "s", "constructor", "__proto__", "received")] \
        == ["one", "its", "s", "constructor_", "__proto___", "receiv"]
    assert lang.stem("Tensors") == "tensor"
    # a stopword stays a stopword, so the index drops it as the query does
    assert not lang.word_filter(lang.stem("the"))


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's stemmer")
def test_the_page_stems_every_word_of_the_book_as_the_index_does():
    """The page's Stemmer (what language_data.js holds) against the Python side, on every
    word of the book's chapters, with the stopwords the page is given."""
    lang = search.BookEnglish({})
    words = book_words()
    script = (f"var stopwords = {json.dumps(sorted(lang.stopwords))};\n{search.JS_STEMMER}\n"
              f"const s = new Stemmer();\n"
              f"console.log(JSON.stringify({json.dumps(words)}.map(w => s.stemWord(w))));")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    page = json.loads(out)
    differ = [(w, lang.stem(w), p) for w, p in zip(words, page) if lang.stem(w) != p]
    assert len(words) > 1000 and differ == []


def test_each_message_is_an_index_entry_at_its_own_anchor():
    f = Fence("a-raise", "book/a.md", 0, "c0", "Sums", "a claim")
    found = [Raised(f, "RuntimeError", "new\n   words", {"2.8.0": ("RuntimeError", "old words")}),
             Raised(f, "ValueError", "no data; none", {})]
    anchors = verified.error_anchors(found)
    assert anchors == [("message-a-raise-1", ["RuntimeError: new words", "RuntimeError: old words"]),
                       ("message-a-raise-2", ["ValueError: no data, none"])]  # ";" splits an entry
    html = "".join(h for _, h in verified.errors_sections(found, lambda c: "a.html", "2.13.0+cpu", {}))
    assert '<div class="tf-error" id="message-a-raise-1">' in html


def _build_twice(tmp_path, keep: bool) -> str:
    """A two-page Sphinx project, one page with an index entry, built, then built again
    after an edit of the other page only; the second build's searchindex.js."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir(parents=True)
    hook = ("from fencecheck.upstream import sphinx as s\n"
            "def setup(app):\n    app.connect('html-collect-pages', s.keep_index_entries)\n")
    (src / "conf.py").write_text(hook if keep else "")
    (src / "index.rst").write_text("Home\n====\n\n.. toctree::\n\n   errors\n   other\n")
    (src / "errors.rst").write_text("Errors\n======\n\n.. index:: single: view size is not compatible\n\nText.\n")
    (src / "other.rst").write_text("Other\n=====\n\nOne.\n")
    out, doctrees = tmp_path / "html", tmp_path / "doctrees"

    def build():
        Sphinx(str(src), str(src), str(out), str(doctrees), "html", status=None, warning=None).build()

    build()
    (src / "other.rst").write_text("Other\n=====\n\nTwo.\n")
    build()
    return (out / "searchindex.js").read_text()


def test_an_incremental_build_keeps_the_index_entries_of_pages_it_does_not_write(tmp_path):
    """sphinx-doc/sphinx#12599: without keep_index_entries, the entry is lost."""
    assert "view size is not compatible" in _build_twice(tmp_path / "kept", keep=True)
    assert "view size is not compatible" not in _build_twice(tmp_path / "lost", keep=False)


def _static_after_edit(tmp_path, hooked: bool) -> str:
    """A project with a static file, built, the file edited and nothing else, built again:
    the copy the site serves."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    (src / "_static").mkdir(parents=True)
    hook = ("from fencecheck.sphinx import _static_outdated\n"
            "def setup(app):\n    app.connect('env-get-outdated', _static_outdated)\n")
    (src / "conf.py").write_text("html_static_path = ['_static']\n" + (hook if hooked else ""))
    (src / "index.rst").write_text("Home\n====\n\nText.\n")
    (src / "_static" / "site.css").write_text("p { color: red; }\n")
    out, doctrees = tmp_path / "html", tmp_path / "doctrees"

    def build():
        Sphinx(str(src), str(src), str(out), str(doctrees), "html", status=None, warning=None).build()

    build()
    (src / "_static" / "site.css").write_text("p { color: blue; }\n")
    build()
    return (out / "_static" / "site.css").read_text()


def test_an_edit_of_a_static_file_alone_reaches_the_site(tmp_path):
    """Sphinx copies static files only when it writes a page (fencecheck.sphinx._static_outdated)."""
    assert "blue" in _static_after_edit(tmp_path / "hooked", hooked=True)
    assert "red" in _static_after_edit(tmp_path / "plain", hooked=False)
