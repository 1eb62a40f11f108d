"""The record on the site: a badge on every fence, the Verified-on page, the grid out of search.

One small book is built with ``jupyter-book`` (execution off: badges come
from the cells' metadata and results/, not from outputs). The build is a
tooling proof, read back under an unchanged key (tests/conftest.py: ``proven``).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fencecheck import record
from fencecheck.chapter import HEADER

HOLDS = "# Proves: one plus one is two.\nassert 1 + 1 == 2"
CHANGES = ("# Proves: the flag is a bool.\nimport fences\n"
           "# Records: x.flag: whether herons fly (the book's words win over the label)\n"
           "assert fences.observe('x.flag', True) in (True, False)")
NEEDS_GPU = "# Proves: a CUDA tensor is on CUDA.\nimport fences\nif fences.needs('cuda'):\n    assert True is not False"
TAUGHT = "x = 1 + 1\nprint(x)\n# Proves: one plus one is two.\nassert x == 2\nassert x > 1"
VERIFIED = Path(__file__).resolve().parents[1] / "book" / "verified.md"
GRID_ONLY = "zebraquux"  # a fence id: it appears in the grid and nowhere else on the site


def fence(fid: str, source: str, tags: str = "fence") -> str:
    return f"```{{code-cell}} ipython3\n:tags: [{tags}]\n:fence-id: {fid}\n{source}\n```\n"


GPU = "needs a CUDA GPU; torch.cuda.is_available() is False"


def result(release: str, build: str, flag: str, code_of: dict[str, str]) -> dict:
    recs = [{"id": fid, "chapter": "book/a.md", "cell": n, "code": record.code_hash(src),
             "outcome": "skipped" if fid == "gpu-only" else "passed",
             "reason": GPU if fid == "gpu-only" else "", "details": "", "proves": "",
             "observed": {"x.flag": flag} if fid == "flag-check" else {},
             "labels": {"x.flag": "whether flamingos fly"} if fid == "flag-check" else {},
             **({"raised": [{"class": "RuntimeError", "message": "zebras refused"}]} if fid == "taught" else {})}
            for n, (fid, src) in enumerate(code_of.items())]
    return {"release": release, "torch": release, "build": build, "commit": "0123456789ab",
            "dirty": False, "date": "2026-12-01", "exitstatus": 0, "gpu": None, "fences": recs,
            "errors": [], "chapters": {"book/index.md": record.chapter_digest([]),
                                       "book/a.md": record.chapter_digest(list(code_of.values())),
                                       "book/verified.md": record.chapter_digest([]),
                                       "book/errors.md": record.chapter_digest([])}}


def lay_out(root: Path) -> None:
    (root / "book").mkdir()
    (root / "results").mkdir()
    code_of = {GRID_ONLY: HOLDS, "flag-check": CHANGES, "gpu-only": NEEDS_GPU, "taught": TAUGHT}
    (root / "book" / "index.md").write_text(HEADER + "# Home\n\nA test book.\n")
    (root / "book" / "a.md").write_text(
        HEADER + "# Chapter A\n\n## Sums\n\n" + fence(GRID_ONLY, HOLDS, "fence, proof")
        + "\n## Flags\n\n" + fence("flag-check", CHANGES) + "\n## On a GPU\n\n"
        + fence("gpu-only", NEEDS_GPU) + "\n## Taught\n\n" + fence("taught", TAUGHT))
    verified = VERIFIED.read_text()
    (root / "book" / "verified.md").write_text(verified)
    (root / "book" / "errors.md").write_text(HEADER + "# Errors\n\n## Every message\n\n```{record} errors\n```\n")
    (root / "book" / "glossary.md").write_text(
        HEADER + "# Glossary\n\n```{glossary}\nfence\n  A cell that asserts.\n```\n")
    for release, build, flag in (("2.8.0", "CUDA 12.8", "False"), ("2.11.0", "CUDA 12.8", "True"),
                                 ("2.15.0", "CUDA 13.0", "True")):
        (root / "results" / f"{release}.json").write_text(json.dumps(result(release, build, flag, code_of)))
    old = result("2.9.1", "CUDA 12.8", "False", {GRID_ONLY: HOLDS})  # chapter a changed since: stale
    (root / "results" / "2.9.1.json").write_text(json.dumps(old))
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n"
                                   "  - file: book/a\n  - file: book/verified\n  - file: book/errors\n"
                                   "  - file: book/glossary\n")
    (root / "_config.yml").write_text(
        "title: record\nexecute:\n  execute_notebooks: 'off'\n"
        "sphinx:\n  extra_extensions: [fencecheck.sphinx]\n")


@pytest.fixture(scope="module")
def site(proven, tmp_path_factory):
    """(exit code, output, {page: html}, search index) of the small book's build."""
    return proven("site-record-build", lambda: build(tmp_path_factory), also=(VERIFIED,))


def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    lay_out(root)
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(root), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=600)
    html = root / "_build" / "html"
    pages = {p: (html / "book" / f"{p}.html").read_text() for p in ("a", "verified", "errors")
             if (html / "book" / f"{p}.html").exists()}
    index = (html / "searchindex.js").read_text() if (html / "searchindex.js").exists() else ""
    return [proc.returncode, proc.stdout[-3000:] + proc.stderr[-3000:], pages, index]


def test_the_book_builds(site):
    code, out, pages, _ = site
    assert code == 0, out
    assert set(pages) == {"a", "verified", "errors"}


def badges(page: str) -> list[tuple[str, str, str]]:
    """(kind, href, text) of every badge on a page."""
    return re.findall(r'<a class="[^"]*tf-badge tf-badge-(\w+)[^"]*" href="([^"]+)"[^>]*>([^<]+)</a>', page)


def test_a_badge_only_where_there_is_news_linking_to_its_row(site):
    found = badges(site[2]["a"])
    assert found == [
        ("changed", "verified.html#fence-flag-check",
         "whether herons fly (the book's words win over the label): changed in 2.11.0: False → True"),
        ("gpu", "verified.html#fence-gpu-only", "not yet run on a GPU"),
    ], found
    assert f'id="fence-{GRID_ONLY}"' in site[2]["a"]  # the Verified-on page links back here
    line = re.sub(r"<[^>]+>", "", site[2]["a"].split('class="tf-page-record"', 1)[1].split("</p>", 1)[0])
    assert "2 of the 4 fences on this page hold on 2.8.0 – 2.15.0; 1 differs by release " \
        "or build, 1 has a GPU part not yet run" in line, line


def test_a_proof_is_folded_behind_its_proves_line(site):
    page = site[2]["a"]
    folds = re.findall(r'<details class="[^"]*hide above-input">\s*<summary[^>]*>\s*'
                       r'<p class="collapsed admonition-title">([^<]*)</p>', page)
    assert folds == ["Proof: one plus one is two. Show the code", "✓ 2 checks"], folds
    assert page.count("<details") == 2  # the other lesson fences stay open


def test_a_lesson_fence_shows_its_teaching_part_and_folds_its_checks(site):
    """The teaching lines stay in the fence's cell; the check part, from `# Proves:` on,
    is a cell of its own right after it, its code folded behind "✓ 2 checks"."""
    page = site[2]["a"]
    cell = page[page.index('id="fence-taught"'):]
    shown, _, rest = cell.partition("tf-checks")
    assert "print" in shown and "assert" not in shown and "Proves" not in shown
    folded = rest[:rest.index("</details>")]
    assert "✓ 2 checks" in folded and "Proves" in folded and folded.count("assert") == 2


def test_verified_page_has_true_counts_changes_and_the_grid(site):
    page = site[2]["verified"]
    assert "The book has <b>4</b> fences" in page
    assert "Current results for <b>3</b> releases (2.8.0, 2.11.0, 2.15.0)" in page
    assert "<b>Stale: results/2.9.1.json</b>" in page
    assert '<td data-label="behaviour">whether herons fly (the book&#x27;s words win over the label)</td>' \
        in page, page
    assert "whether flamingos fly" not in page
    assert "whether herons fly (the book" in site[2]["a"]    # in the badge's title too
    assert '<td data-label="first release with the new value">2.11.0</td>' in page
    assert '<a href="a.html#fence-flag-check">a: Flags</a>' in page
    assert f'<tr id="fence-{GRID_ONLY}">' in page
    assert "<b>1 fences never ran on any release</b>" in page


def test_the_grid_is_kept_out_of_search(site):
    index = site[3]
    assert "heron" in index  # the changes table is searchable
    assert GRID_ONLY not in index  # the grid is not


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read_pages(out: str) -> set[str]:
    """The pages a Sphinx build read (its "reading sources... [ 50%] book/a" lines)."""
    return set(re.findall(r"reading sources\.\.\. \[\s*\d+%\] (\S+)", ANSI.sub("", out)))


@pytest.mark.proof
def test_an_incremental_build_reads_again_exactly_the_pages_whose_record_changed(tmp_path):
    """Sphinx sees neither results/ nor the badges: the extension reads again the pages
    whose record changed, and no other. A changed fence record: its page and the
    Verified-on page, not a chapter whose fences' record is the same, nor the landing
    page; a record change no badge shows (a run's date): the Verified-on page alone; a
    new fence: its page, the Verified-on page and the landing page (its count), not the
    other chapter; a prose edit: that page alone. Each page read again shows the new
    record."""
    lay_out(tmp_path)
    for page in ("errors", "glossary"):   # not needed here
        (tmp_path / "book" / f"{page}.md").unlink()
    (tmp_path / "book" / "index.md").write_text(
        HEADER + "# Home\n\nA test book of {book}`index_fences` fences.\n")
    other = HEADER + "# Chapter B\n\nSome prose.\n\n" + fence("b-holds", HOLDS)
    (tmp_path / "book" / "b.md").write_text(other)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n"
                                       "  - file: book/a\n  - file: book/b\n  - file: book/verified\n")
    for path in (tmp_path / "results").glob("*.json"):   # b's fence held on every release
        run = json.loads(path.read_text())
        run["fences"].append({**run["fences"][0], "id": "b-holds", "chapter": "book/b.md", "cell": 0})
        run["chapters"]["book/b.md"] = record.chapter_digest([HOLDS])
        path.write_text(json.dumps(run))
    jb = Path(sys.executable).with_name("jupyter-book")

    def build() -> set[str]:
        proc = subprocess.run([str(jb), "build", str(tmp_path), "-W", "-n", "--keep-going"],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return read_pages(proc.stdout)

    def page(name: str) -> str:
        return (tmp_path / "_build" / "html" / "book" / f"{name}.html").read_text()

    everything = {"book/index", "book/a", "book/b", "book/verified"}
    assert build() == everything
    assert "A test book of 5 fences." in page("index")
    assert build() == set()   # nothing changed: nothing read
    newest = tmp_path / "results" / "2.15.0.json"
    run = json.loads(newest.read_text())
    flag = next(r for r in run["fences"] if r["id"] == "flag-check")
    flag["observed"]["x.flag"] = "False"   # True on 2.11.0 only now
    newest.write_text(json.dumps(run))
    assert "changed in 2.11.0: False → True" in page("a")
    shown = page("verified")
    assert build() == {"book/a", "book/verified"}
    from fencecheck.sphinx import Record, page_marks

    (_, now), = page_marks(Record(tmp_path, tmp_path / "results"), ["flag-check"])[0]
    assert now.kind == "changed" and "2.15.0" in now.text, now
    assert [b[2] for b in badges(page("a")) if "flag-check" in b[1]] == [now.text]
    assert page("verified") != shown and now.text.split(": ", 1)[1] in page("verified")
    run["date"] = "2027-01-02"
    newest.write_text(json.dumps(run))
    assert build() == {"book/verified"}
    assert "2027-01-02" in page("verified")
    (tmp_path / "book" / "b.md").write_text(other + "\n" + fence("b-new", HOLDS.replace("1 + 1", "2 + 2")))
    assert build() == {"book/b", "book/verified", "book/index"}
    assert "A test book of 6 fences." in page("index")
    assert 'id="fence-b-new"' in page("b")
    (tmp_path / "book" / "b.md").write_text(other.replace("Some prose", "Some more prose")
                                            + "\n" + fence("b-new", HOLDS.replace("1 + 1", "2 + 2")))
    assert build() == {"book/b"}
    assert "Some more prose" in page("b")


def test_grid_node_is_skipped_by_the_search_indexer():
    """The grid's node is a comment to Sphinx's indexer (7.4: isinstance(node, nodes.comment))."""
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document
    from sphinx.search import WordCollector
    from sphinx.search.en import SearchEnglish

    from fencecheck.sphinx import unsearched_html

    doc = new_document("t", get_default_settings(Parser))
    grid = unsearched_html()
    grid["html"] = "<table><tr><td>zebraquux</td></tr></table>"
    doc += [nodes.paragraph("", "flamingo"), grid, nodes.raw("", "<b>pelican</b>", format="html")]
    collector = WordCollector(doc, SearchEnglish({}))
    doc.walk(collector)  # as sphinx.search.IndexBuilder.feed does
    assert "flamingo" in collector.found_words and "pelican" in collector.found_words
    assert not any("zebra" in w for w in collector.found_words)


def test_rewording_a_records_comment_makes_every_page_read_again(tmp_path):
    """The words are a comment (not in a fence's code hash), yet the Verified-on and
    changes pages show them: the record's key changes with them, so those pages are
    read again on the next build."""
    from fencecheck.chapter import HEADER
    from fencecheck.sphinx import Record

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/a\n")
    (tmp_path / "book").mkdir()
    chapter = HEADER + ("\n```{code-cell} ipython3\n:tags: [fence]\n:fence-id: a\n"
                        "# Proves: something.\n# Records: x.flag: %s\n"
                        "assert fences.observe('x.flag', True)\n```\n")
    (tmp_path / "book" / "a.md").write_text(chapter % "whether herons fly")
    before = Record(tmp_path, tmp_path / "results")
    assert before.labels == {"a": {"x.flag": "whether herons fly"}}
    (tmp_path / "book" / "a.md").write_text(chapter % "whether herons swim")
    assert Record(tmp_path, tmp_path / "results").key != before.key


def test_the_line_under_a_title_links_its_first_word_of_the_books_own_to_the_glossary(site):
    code, out, pages, _ = site
    assert code == 0, out
    line = pages["a"].split('class="tf-page-record"', 1)[1].split("</p>", 1)[0]
    assert '<a class="reference external" href="glossary.html#term-fence">fences</a> on this page' in line, line


def test_the_errors_page_has_a_section_per_chapter_in_its_contents_and_finds_a_message(site):
    code, out, pages, index = site
    assert code == 0, out
    page = pages["errors"]
    assert '<section id="errors-chapter-a">' in page and 'href="#errors-chapter-a"' in page   # in the contents
    assert 'id="message-taught-1"' in page and "RuntimeError: zebras refused" in page
    assert '"runtimeerror: zebras refused"' in index.lower()     # an index entry: a paste finds it


def test_a_proofs_table_is_shown_off_a_lesson_its_code_folded(tmp_path):
    """The site's side of the rule (``lint.proof_output_shown``): a proof whose output holds
    a table folds its code only on a page that is not a lesson; in a lesson, code and table."""
    from types import SimpleNamespace

    from docutils import nodes

    from fencecheck import sphinx as ext

    def fold(lesson: bool, tmp: Path) -> str:
        page = tmp / ("lesson.md" if lesson else "ref.md")
        page.write_text(("---\ntensor-fences: {form: 3}\n---\n" if lesson else "") + "# T\n")
        cell = nodes.container(nb_element="cell_code", cell_metadata={"tags": ["fence", "proof"]})
        cell += nodes.literal_block("# Proves: a.\nfences.table(t)", "# Proves: a.\nfences.table(t)")
        out = nodes.container(nb_element="cell_code_output")
        out += nodes.table()
        cell += out
        doctree = nodes.document(None, None)
        doctree += cell
        env = SimpleNamespace(docname="x", doc2path=lambda name: str(page))
        ext._fold_proofs(SimpleNamespace(env=env), doctree)
        return cell["hide_mode"]

    assert fold(False, tmp_path) == "input" and fold(True, tmp_path) == "all"
