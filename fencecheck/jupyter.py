"""The downloaded notebook, written for Jupyter rather than for Sphinx.

``for_jupyter`` turns the MyST of an executed chapter into plain Markdown (glued values,
links for the site's roles, quoted admonitions), collapses solutions, proofs and setup
cells, and splits each lesson fence into its teaching cell and a collapsed check cell.
``myst_left`` and ``open_solutions`` say what it missed (``make check-site`` fails on it).
"""
from __future__ import annotations

import copy
import re

from . import chapter, lint

ROLE = re.compile(r"\{([a-z:]+)\}`([^`]*)`")
DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{([a-z-]+)\}[ \t]*(.*)$")
OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+?)\.md(#[^)]*)?\)")
#: ``{{ name }}`` substitutions and ``{book}`name``` numbers (``fencecheck.sphinx.BookRole``).
SUBSTITUTION = re.compile(r"\{\{\s*([\w-]+)\s*\}\}|\{book\}`([\w-]+)`")
TARGET = re.compile(r"^\(([^)\s]+)\)=\s*$", re.M)
LEFT = re.compile(r"\{\{\s*[\w-]+\s*\}\}|\[missing value: |\{[a-z:]+\}`|^(`{3,}|:{3,})\{"
                  r"|^\([\w-]+\)=\s*$|\]\([^)]*\.md[)#]", re.M)
#: The tag of a lesson fence's check part in the downloaded notebook.
CHECKS_TAG = "fence-checks"


def glued_values(nb) -> dict[str, dict]:
    """Every value a cell glued (myst-nb's ``scrapbook`` outputs): name -> mime bundle."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            meta = (out.get("metadata") or {}).get("scrapbook")
            if meta:
                prefix = len(meta.get("mime_prefix", ""))
                found[meta["name"]] = {k[prefix:]: v for k, v in out.get("data", {}).items()}
    return found


def _role(kind: str, text: str, glued: dict, ext: dict, site: str) -> str:
    if kind.startswith("glue"):
        from .upstream.myst_nb import format_plain_text

        key, _, spec = text.partition(":")
        data = glued.get(key)
        if data is None:
            return f"[missing value: {key}]"  # myst_left reports it
        if kind == "glue:md" and "text/markdown" in data:
            return "".join(data["text/markdown"])
        return format_plain_text("".join(data.get("text/plain", key)), spec)
    m = re.match(r"^(.*?)\s*(?:<([^>]*)>)?$", text, re.S)
    shown, target = (m.group(1) or text), m.group(2)
    if kind in ext:
        pattern, caption = ext[kind]
        return f"[`{caption % shown}`]({pattern % (target or shown)})"
    if kind == "term":
        return f"[{shown}]({site}book/glossary.html)"
    if kind == "math":
        return f"${shown}$"
    return f"`{shown}`" if kind in ("code", "literal") else shown


def _directive(kind: str, title: str, options: dict, text: str) -> str:
    """A MyST directive's block as Jupyter Markdown: a quote, a heading or a note."""
    if kind == "exercise":
        return f"### Exercise: {title}".rstrip(": ") + "\n\n" + text
    if kind in ("solution-start", "solution-end"):
        return "**Solution** (collapsed below: expand the cells to see it)" if kind == "solution-start" else ""
    head = title or ("" if kind == "admonition" else kind.capitalize())
    if kind == "cited":
        head = "Cited, not verified here" + (f": {title}" if title else "")
        text += f"\n\nSource: <{options.get('source', '')}> ({options.get('version', '')})"
    quoted = "\n".join(f"> {line}".rstrip() for line in text.splitlines())
    return f"> **{head}**\n>\n{quoted}"


def markdown(source: str, glued: dict, ext: dict, site: str, subs: dict | None = None) -> str:
    """A MyST Markdown cell as plain (Jupyter) Markdown (``subs``: the site's
    ``{{ name }}`` substitutions and ``{book}`name``` numbers)."""
    source = SUBSTITUTION.sub(lambda m: str((subs or {}).get(m.group(1) or m.group(2), m.group(0))), source)
    out: list[str] = []
    lines = iter(source.splitlines())
    for line in lines:
        m = DIRECTIVE.match(line)
        if not m:
            out.append(line)
            continue
        fence, kind, title = m.groups()
        options, body = {}, []
        for line in lines:
            if line.rstrip() == fence:
                break
            option = OPTION.match(line)
            if option and not body:
                options[option.group(1)] = option.group(2)
            else:
                body.append(line)
        out.append(_directive(kind, title, options, "\n".join(body).strip("\n")))
    text = TARGET.sub("", "\n".join(out))
    text = ROLE.sub(lambda r: _role(r.group(1), r.group(2), glued, ext, site), text)
    return LINK.sub(lambda m: f"]({site}book/{m.group(1)}.html{m.group(2) or ''})", text)


def _split_checks(cell) -> list:
    """A lesson fence as (teaching cell with the outputs, collapsed check cell); any
    other cell as itself."""
    tags = cell.metadata.get("tags", []) if cell.cell_type == "code" else []
    if "fence" not in tags or lint.PROOF_TAG in tags:
        return [cell]
    teaching, checks = lint.lesson_parts(cell.source)
    if not teaching:
        return [cell]
    after = copy.deepcopy(cell)
    cell.source, after.source, after.outputs = teaching, checks, []
    after.execution_count = None
    if "id" in cell:   # a copy keeps the id, which nbformat would replace at random on writing
        after.id = f"{cell.id[:57]}-checks"
    after.metadata = {"tags": [CHECKS_TAG], "jupyter": {"source_hidden": True}}
    return [cell, after]


def myst_left(nb) -> list[str]:
    """What the Markdown cells still hold of MyST syntax, one line each."""
    return [f"markdown cell {n}: {m.group(0)!r}" for n, cell in enumerate(nb.cells)
            if cell.cell_type == "markdown" for m in LEFT.finditer(cell.source)]


def open_solutions(nb) -> list[str]:
    """Code cells of a solution that Jupyter would show open."""
    problems, inside = [], False
    for n, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and "**Solution**" in cell.source:
            inside = True
        elif cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            inside = False
        elif cell.cell_type == "code" and inside and not \
                cell.metadata.get("jupyter", {}).get("source_hidden"):
            problems.append(f"code cell {n} of a solution is open")
    return problems


def for_jupyter(nb, ext: dict, site: str = "../../", subs: dict | None = None):
    """``nb`` (executed, MyST) rewritten for Jupyter, in place; returns it. ``ext``: the
    site's extlinks (role -> (url pattern, caption pattern)); ``site``: the site's root."""
    glued = glued_values(nb)
    lesson = chapter.is_lesson(dict(nb.metadata))
    in_solution = False
    nb.cells = [part for cell in nb.cells for part in _split_checks(cell)]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            starts = re.search(r"^`{3,}\{solution-start\}", cell.source, re.M)
            ends = re.search(r"^`{3,}\{solution-end\}", cell.source, re.M)
            cell.source = markdown(cell.source, glued, ext, site, subs).strip("\n")
            in_solution = bool(starts) or (in_solution and not ends)
            continue
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.get("outputs", [])
                        if "scrapbook" not in (o.get("metadata") or {})]
        tags = set(cell.metadata.get("tags", []))
        # A folding tag collapses the cell in Jupyter, and its outputs too unless it names only the input.
        folds = [not t.endswith("-input") for t in tags & lint.FOLDING_TAGS] + ([False] if CHECKS_TAG in tags else [])
        if in_solution or folds:
            fold = {"source_hidden": True}
            table = any("text/markdown" in (o.get("data") or {}) for o in cell.outputs)
            if in_solution or (any(folds) and not (
                    lint.PROOF_TAG in tags and lint.proof_output_shown(lesson, table))):
                fold["outputs_hidden"] = True
            cell.metadata.setdefault("jupyter", {}).update(fold)
    nb.cells = [c for c in nb.cells if c.cell_type != "markdown" or c.source.strip()]
    return nb
