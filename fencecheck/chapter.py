"""Reading a chapter: a MyST notebook file, checked before anything runs.

One reader for everything (``parse``): myst-nb's, with the MyST extensions
``_config.yml`` enables, as the build reads the chapter. The test plugin,
the lint, mutate, the record and the landing page see the
cells the build executes, at the lines the build reports.

Both the test plugin and the Sphinx extension use these checks, so the
suite and the site refuse the same mistakes:

- a chapter without the jupytext header (myst-nb would render it as plain
  Markdown and execute nothing; a notebook collector would skip it);
- a chapter listed in ``_toc.yml`` that does not exist;
- everything ``fencecheck.lint`` checks: the book standard as far as a
  machine can check it (forbidden tags, fences without an id, a ``Proves:``
  line or a check, asserts that cannot fail, uncited citations, long lines,
  exercises whose check is never proven).
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
from pathlib import Path

import yaml

from . import lint
from .lint import FORBIDDEN_TAGS  # noqa: F401 - re-exported

#: The front matter every chapter starts with (jupytext MyST, a Python 3 kernel).
HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


class ChapterError(Exception):
    """A chapter that must not be built or tested as it is."""


def front_matter(text: str) -> dict:
    """The YAML block between the leading ``---`` lines, or {} when there is none."""
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    return copy.deepcopy(_front_matter(text[3:end]))


@functools.lru_cache(maxsize=256)
def _front_matter(block: str) -> dict:
    """``front_matter`` of one YAML block, parsed once per process per text (a build
    reads every chapter's header several times); callers get a copy."""
    try:
        data = yaml.safe_load(block) or {}
    except yaml.YAMLError as exc:
        raise ChapterError(yaml_problem(exc, "the front matter", first_line=1)) from None
    return data if isinstance(data, dict) else {}


def yaml_problem(exc: Exception, what: str, first_line: int = 1) -> str:
    """"line 4: the front matter is not valid YAML: mapping values are not allowed here":
    a YAML error at its line in the file (``first_line``: the file's line of the
    block's first line)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(x) for x in (getattr(exc, "context", None), getattr(exc, "problem", None))
                       if x) or str(exc).splitlines()[0]
    where = f"line {first_line + mark.line}, column {mark.column + 1}: " if mark else ""
    return f"{where}{what} is not valid YAML: {problem}"


def header_problems(text: str) -> list[str]:
    """What is missing from a chapter's jupytext header (empty when it is complete)."""
    try:
        meta = front_matter(text)
    except ChapterError as exc:  # a YAML mistake: its line, never a traceback
        return [str(exc)]
    problems = []
    fmt = (meta.get("jupytext") or {}).get("text_representation", {}).get("format_name")
    if fmt != "myst":
        problems.append(
            "no jupytext header with `format_name: myst`: myst-nb would render it "
            "without executing a single fence"
        )
    kernelspec = meta.get("kernelspec") or {}
    if not (kernelspec.get("name") and kernelspec.get("display_name")):
        problems.append(
            "no `kernelspec` with `name: python3` and a `display_name` in the front matter"
        )
    return problems


def code_cell_lines(nb) -> list[int]:
    """1-based line number of each code cell's directive, in order (the reader's map)."""
    lines = nb.metadata.get("source_map", [])
    return [lines[i] for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def myst_extensions(path: Path) -> tuple[str, ...]:
    """The MyST extensions the build enables for ``path``: ``parse.myst_enable_extensions``
    of the nearest ``_config.yml`` above it (none without one)."""
    for folder in Path(path).resolve().parents:
        config = folder / "_config.yml"
        if config.exists():
            return _extensions_in(config.read_text(encoding="utf-8"))
    return ()


@functools.lru_cache(maxsize=32)
def _extensions_in(config: str) -> tuple[str, ...]:
    """``myst_extensions`` of one _config.yml text, parsed once per process per text."""
    data = yaml.safe_load(config) or {}
    return tuple(sorted((data.get("parse") or {}).get("myst_enable_extensions") or ()))


def form(text: str | dict) -> int | None:
    """The lesson form a chapter declares (``tensor-fences: {form: 3}``), or None; from its
    text, or from its front matter as a dict (a notebook's metadata)."""
    meta = (text if isinstance(text, dict) else front_matter(text)).get("tensor-fences")
    return meta.get("form") if isinstance(meta, dict) else None


#: The form of a lesson (standard 3). The one definition of "a lesson": a chapter whose
#: front matter declares ``tensor-fences: {form: 3}`` (``is_lesson``); ``lessons`` lists
#: them in the order of _toc.yml. Every tool asks these; tests/test_one_home.py refuses
#: another list or test.
LESSON_FORM = 3


def is_lesson(text: str | dict) -> bool:
    """Whether the chapter ``text`` is a lesson: its front matter declares the lesson form."""
    return form(text) == LESSON_FORM


def lessons(root: Path) -> list[Path]:
    """Every lesson of the book at ``root``: the pages of _toc.yml that declare the lesson
    form, in the table of contents' order."""
    return [p for p in toc_files(Path(root))
            if p.exists() and is_lesson(p.read_text(encoding="utf-8"))]


def lint_problems(text: str, nb) -> list[str]:
    """Everything ``fencecheck.lint`` finds in one chapter (empty when it passes); the
    lesson form's rules where the chapter declares form 3."""
    problems = (lint.cell_problems(nb, text) + lint.text_problems(text) + lint.exponent_problems(text)
                + lint.place_problems(text, nb) + lint.meta_problems(front_matter(text).get("tensor-fences"))
                + lint.quiz_problems(nb, code_cell_lines(nb)))
    if is_lesson(text):
        problems += lint.lesson_problems(nb, code_cell_lines(nb)) + lint.prose_numbers(text)[0]
    return problems


def parse_cache_dir() -> Path:
    """Where parsed chapters are kept: ``$FENCES_PARSE_CACHE``, else the user's cache."""
    if os.environ.get("FENCES_PARSE_CACHE"):
        return Path(os.environ["FENCES_PARSE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tensor-fences" / "parsed"


#: The parse cache outside the clone (fencecheck.chapter.parse_cache_dir) keeps at most this
#: many chapters, and none older than ``PARSED_DAYS`` days: every edit of a chapter adds one.
PARSED_KEEP, PARSED_DAYS = 256, 14


def prune_parsed(folder: Path, keep: int = PARSED_KEEP, days: float = PARSED_DAYS,
                 now: float | None = None) -> int:
    """Remove the parsed chapters written more than ``days`` ago, then the oldest beyond
    ``keep``, and half-written files left by a killed process; the number removed. A removed
    entry is only parsed again (0.1 s) when it is read."""
    import time

    now = time.time() if now is None else now
    try:
        entries = sorted(((p.stat().st_mtime, p) for p in Path(folder).iterdir()
                          if p.is_file() and p.suffix in (".ipynb", ".tmp")), reverse=True)
    except OSError:
        return 0
    removed = 0
    for n, (mtime, path) in enumerate(entries):
        stray = path.suffix == ".tmp" and now - mtime > 3600
        if stray or now - mtime > days * 86400 or n >= keep:
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def parse(text: str, path: Path):
    """The chapter ``path`` (its text ``text``) as a notebook, read as the build reads it:
    myst-nb's reader with the build's MyST extensions (``fencecheck.upstream.myst_nb``).

    Reading MyST costs about 0.1 s a chapter, and one build reads every
    chapter several times (lint, the book-wide id check, the record): kept on
    disk (``cached_notebook``), so an edit re-reads one chapter.
    """
    from .upstream import myst_nb

    return myst_nb.read_notebook(Path(path), text, myst_extensions(path))


def cached_notebook(reader: str, text: str, read):
    """``read()``, a notebook made from ``text``, kept on disk keyed by the text, the
    ``reader`` (its name and version) and nbformat's version. Each call returns a fresh
    notebook: callers may change it."""
    import nbformat

    key = hashlib.sha256(f"{reader} nbformat {nbformat.__version__}\n{text}".encode())
    path = parse_cache_dir() / f"{key.hexdigest()[:32]}.ipynb"
    try:
        return nbformat.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass
    nb = read()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(nb), encoding="utf-8")
        os.replace(partial, path)  # atomic: parallel readers never see half a file
    except OSError:
        pass  # a read-only home: read every time
    return nb


def read(path: Path):
    """The chapter as a notebook, after every check; raises ``ChapterError``.

    Returns ``(notebook, lines)`` where ``lines[i]`` is the source line of
    code cell ``i``.
    """
    path = Path(path)
    if not path.exists():
        raise ChapterError(f"{path}: file does not exist")
    text = path.read_text(encoding="utf-8")
    problems = header_problems(text)
    if problems:
        raise ChapterError(f"{path}: " + "; ".join(problems))
    bad_tags = [f"line {n}: `{line.strip()}`: a cell's tags are a list in brackets, e.g. "
                ":tags: [fence, proof]"
                for n, line in enumerate(text.splitlines(), 1)
                if re.match(r"^:tags:\s*[^\s\[]", line)]
    if bad_tags:
        raise ChapterError(f"{path}: " + "; ".join(bad_tags))
    nb = parse(text, path)
    # a fence id twice in this chapter, also when it is not (yet) in _toc.yml
    problems = lint_problems(text, nb) + lint.book_problems({path.name: nb})
    if problems:
        raise ChapterError(f"{path}: " + "; ".join(problems))
    return nb, code_cell_lines(nb)


def toc_files(root: Path) -> list[Path]:
    """Every file ``_toc.yml`` lists, resolved against ``root``, in order.

    A listed file without an extension is taken as ``.md``.
    """
    try:
        toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ChapterError(f"{root / '_toc.yml'}: {yaml_problem(exc, 'the table of contents')}") from None
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    found.append(node[key])
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [root / (f if Path(f).suffix else f + ".md") for f in found]


def book_problems(root: Path) -> list[str]:
    """Problems across the book's chapters (a fence id used twice)."""
    notebooks = {}
    for path in toc_files(root):
        if path.exists() and not header_problems(text := path.read_text(encoding="utf-8")):
            notebooks[path.relative_to(root).as_posix()] = parse(text, path)
    return lint.book_problems(notebooks)


def cell_timeout(root: Path) -> float | None:
    """Seconds a cell may run: ``execute.timeout`` in ``_config.yml``, the one place it is set.

    None when there is no ``_config.yml`` (a test book without a site).
    """
    path = Path(root) / "_config.yml"
    if not path.exists():
        return None
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return float(config["execute"]["timeout"])
