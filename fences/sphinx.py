"""Sphinx extension for the book's site.

- The site refuses what the test suite refuses: every page must be a
  jupytext MyST notebook (or myst-nb would render it without executing
  anything) and must not carry a tag that lets a cell pass without
  raising. Each problem is a warning naming the file, so
  ``jupyter-book build -W`` fails on it.
- ``{cited}``: a claim the book cites rather than proves, labelled as such.
- Every page offers its executed notebook as an ``.ipynb`` download.
- Scripts that Jupyter Book 1.x includes twice are included once.
- The record (``fences.record``, from results/*.json): a badge on every
  fence saying what the release matrix found for it, linking to its row on
  the Verified-on page (``_add_badges``), and the ``{record}`` directive that
  writes that page's parts. When the results or the book's fences change,
  every page is read again (``_record_outdated``), so no page shows an old
  record. The fence grid is kept out of the search index (``unsearched_html``).

Enabled in ``_config.yml`` under ``sphinx: extra_extensions``.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from . import chapter as chapters
from . import record as records
from . import verified

logger = logging.getLogger(__name__)


def _check_source(app, docname: str, source: list[str]) -> None:
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".md":
        return
    text = source[0]
    problems = chapters.header_problems(text)
    if not problems:
        import jupytext

        problems = chapters.lint_problems(text, jupytext.reads(text, fmt="md:myst"))
    for problem in problems:
        logger.warning(f"{problem}", location=docname, type="fences", subtype="chapter")


def _offer_notebook(app, pagename, templatename, context, doctree) -> None:
    """Offer the executed notebook as an .ipynb download.

    sphinx-book-theme adds the ".ipynb" entry of its download menu when
    ``ipynb_source`` is in the page context, but sets it itself only when a
    launch button is configured. This runs just before its header buttons.

    myst-nb writes jupyter_execute/<page>.ipynb from the notebook it read,
    not from the one it merged with the execution cache, so a page served
    from the cache is written without outputs (myst-nb 1.x). The outputs are
    merged back here from the same cache, so the download is the executed
    notebook either way.
    """
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    executes = app.env.mystnb_config.execution_mode != "off"  # off: nothing executed to merge
    if executes and any(c.cell_type == "code" and c.execution_count is None for c in nb.cells):
        from jupyter_cache import get_cache

        cache = get_cache(app.env.mystnb_config.execution_cache_path)
        try:
            _, nb = cache.merge_match_into_notebook(nb)
        except KeyError:
            logger.warning(f"no executed notebook in the cache for {pagename}",
                           location=pagename, type="fences", subtype="download")
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Include each script once: one tag per source file, one per inline body.

    Under Jupyter Book 1.x two scripts arrive twice, and the copies are
    JavaScript errors on every page: sphinx-thebe's inline configuration
    (``const THEBE_JS_URL`` declared twice; Sphinx holds it once with
    filename None and once with "") and a local ``mathjax_path`` (once with
    ``defer``, once without; MathJax loaded twice fails to start).
    """
    seen, kept = set(), []
    for script in context.get("script_files", []):
        filename = str(getattr(script, "filename", script) or "")
        key = filename or getattr(script, "attributes", {}).get("body", "")
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


class Cited(SphinxDirective):
    """A cited claim: ``{cited}`` with ``:source:`` (a URL) and ``:version:``.

    Rendered as an admonition titled "Cited, not verified here", naming the
    source and the release it describes, so a reader can tell it from a
    fenced claim. ``fences.lint`` refuses one without source or version.
    """

    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = {"source": directives.uri, "version": directives.unchanged_required,
                   "class": directives.class_option}

    def run(self):
        title = "Cited, not verified here"
        if self.arguments:
            title += f": {self.arguments[0]}"
        node = nodes.admonition(classes=["tf-cited"] + self.options.get("class", []))
        node += nodes.title(text=title)
        self.state.nested_parse(self.content, self.content_offset, node)
        source = self.options.get("source", "")
        para = nodes.paragraph()
        para += nodes.Text("Source: ")
        para += nodes.reference(refuri=source, text=source)
        para += nodes.Text(f" ({self.options.get('version', 'no version given')})")
        node += para
        return [node]


def _check_book(app) -> None:
    """Across chapters: every fence id unique (the lint's book-wide check)."""
    for problem in chapters.book_problems(Path(app.srcdir)):
        logger.warning(problem, type="fences", subtype="chapter")


class Record:
    """The record as this build sees it: current and stale runs, the book's fences."""

    def __init__(self, srcdir: Path, results: Path):
        self.current, self.digests = records.read_book(srcdir)
        runs = records.load(results) if results.exists() else []
        self.runs, self.stale = records.split(runs, self.current, self.digests)
        digest = hashlib.sha256()
        for path in sorted(results.glob("*.json")) if results.exists() else []:
            digest.update(path.name.encode() + path.read_bytes())
        for f in self.current:
            digest.update(f"{f.id} {f.chapter} {f.code} {f.section}".encode())
        digest.update(repr(sorted(self.digests.items())).encode())
        self.key = digest.hexdigest()


def _record(app) -> Record:
    if getattr(app, "_tf_record", None) is None:
        app._tf_record = Record(Path(app.srcdir), Path(app.srcdir) / app.config.fences_results)
    return app._tf_record


def _record_outdated(app, env, added, changed, removed):
    """Every page again when the record changed: badges and the Verified-on page show it.

    Neither Sphinx nor jupyter-cache sees results/*.json, and a chapter's edit
    can make another page's record stale; reading again costs no execution
    (the chapters' outputs come from the execution cache).
    """
    key = _record(app).key
    if getattr(env, "tf_record_key", None) == key:
        return []
    env.tf_record_key = key
    return sorted(env.found_docs - set(added) - set(changed) - set(removed))


class unsearched_html(nodes.comment):  # noqa: N801 - docutils dispatches on the class name
    """Raw HTML that Sphinx's search does not index.

    Sphinx (7.4) indexes the text of raw HTML nodes but skips comment nodes
    (``isinstance(node, nodes.comment)`` in ``sphinx.search``); translators
    dispatch on the class name, so this node is written as the HTML it holds.
    Used for the fence grid: hundreds of ids and marks that would flood a search.
    """


def _visit_unsearched_html(self, node):
    self.body.append(node["html"])
    raise nodes.SkipNode


def _skip(self, node):
    raise nodes.SkipNode


class RecordDirective(SphinxDirective):
    """``{record} part``: one part of the Verified-on page, from the record.

    Parts: provenance, summary, never-run, changes, other-values, grid.
    """

    required_arguments = 1
    PARTS = ("provenance", "summary", "never-run", "changes", "other-values", "grid")

    def run(self):
        part = self.arguments[0]
        if part not in self.PARTS:
            raise self.error(f"record: unknown part {part!r}; one of {', '.join(self.PARTS)}")
        rec = _record(self.env.app)
        here = self.env.docname

        def url(chapter: str) -> str:
            target = str(Path(chapter).with_suffix("").as_posix())
            return self.env.app.builder.get_relative_uri(here, target)

        if part == "provenance":
            text = verified.provenance_html(rec.runs, rec.stale)
        elif part == "summary":
            text = verified.summary_html(rec.runs, rec.current)
        elif part == "never-run":
            text = verified.never_run_html(records.never_run(rec.runs, rec.current), url) \
                if rec.runs else ""
        elif part == "changes":
            text = verified.changes_html(records.changes(rec.runs, rec.current), rec.current, url)
        elif part == "other-values":
            text = verified.other_values_html(records.changes(rec.runs, rec.current), rec.current, url)
        else:
            node = unsearched_html()
            node["html"] = verified.grid_html(rec.runs, rec.current, url)
            return [node]
        return [nodes.raw("", text, format="html")]


def _add_badges(app, doctree, docname) -> None:
    """A badge on every fence: what the record says of it, linking to its row on the Verified-on page.

    The fence's cell gets the id ``fence-<id>``, which the Verified-on page links to.
    """
    rec = None
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") != "cell_code":
            continue
        ident = (cell.get("cell_metadata") or {}).get("fence-id")
        if not ident:
            continue
        rec = rec or _record(app)
        badge = records.badge(str(ident), rec.runs)
        href = app.builder.get_relative_uri(docname, app.config.fences_verified_page)
        link = nodes.reference("", badge.text, refuri=f"{href}#fence-{ident}", reftitle=badge.title,
                               classes=["tf-badge", f"tf-badge-{badge.kind}"])
        cell["ids"].append(f"fence-{ident}")
        cell.insert(0, nodes.paragraph("", "", link, classes=["tf-badge-line"]))


def setup(app):
    app.add_config_value("fences_results", "results", "env")
    app.add_config_value("fences_verified_page", "book/verified", "env")
    app.add_node(unsearched_html, html=(_visit_unsearched_html, None),
                 latex=(_skip, None), text=(_skip, None), man=(_skip, None), texinfo=(_skip, None))
    app.add_directive("record", RecordDirective)
    app.connect("env-get-outdated", _record_outdated)
    app.connect("doctree-resolved", _add_badges)
    app.add_directive("cited", Cited)
    app.connect("builder-inited", _check_book)
    app.connect("html-page-context", _dedupe_scripts)
    app.connect("source-read", _check_source)
    app.connect("html-page-context", _offer_notebook, priority=500)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
