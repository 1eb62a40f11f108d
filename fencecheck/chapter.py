"""Reading a chapter (a MyST notebook file) as the build reads it, refusing before anything runs a
chapter without its jupytext header or with what ``fencecheck.lint`` finds; also ``_toc.yml`` and
``_config.yml``. The test plugin and the Sphinx extension both read through here."""
from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import os
import re
import time
from pathlib import Path

import yaml

from . import lint

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
#: The form of a lesson (standard 3): the one definition of "a lesson" is a chapter whose front
#: matter declares ``tensor-fences: {form: 3}`` (``is_lesson``, ``lessons``; tests/test_one_home.py).
LESSON_FORM = 3
#: The parse cache (``parse_cache_dir``) keeps at most this many chapters, none older than so many days.
PARSED_KEEP, PARSED_DAYS = 256, 14


class ChapterError(Exception):
    """A chapter that must not be built or tested as it is."""


def front_matter(text: str) -> dict:
    """The YAML block between the leading ``---`` lines, or {} when there is none."""
    end = text.find("\n---", 3)
    return copy.deepcopy(_front_matter(text[3:end])) if text.startswith("---") and end >= 0 else {}


@functools.lru_cache(maxsize=256)
def _front_matter(block: str) -> dict:
    """One YAML block parsed once per process (a build reads each header several times)."""
    try:
        data = yaml.safe_load(block) or {}
    except yaml.YAMLError as exc:
        raise ChapterError(yaml_problem(exc, "the front matter")) from None
    return data if isinstance(data, dict) else {}


def yaml_problem(exc: Exception, what: str) -> str:
    """"line 4, column 2: the front matter is not valid YAML: ...": a YAML error at its line."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(x) for x in (getattr(exc, "context", None), getattr(exc, "problem", None))
                       if x) or str(exc).splitlines()[0]
    where = f"line {1 + mark.line}, column {mark.column + 1}: " if mark else ""
    return f"{where}{what} is not valid YAML: {problem}"


def header_problems(text: str) -> list[str]:
    """What is missing from a chapter's jupytext header (empty when it is complete)."""
    try:
        meta = front_matter(text)
    except ChapterError as exc:  # a YAML mistake: its line, never a traceback
        return [str(exc)]
    problems = []
    if (meta.get("jupytext") or {}).get("text_representation", {}).get("format_name") != "myst":
        problems.append("no jupytext header with `format_name: myst`: myst-nb would render it "
                        "without executing a single fence")
    kernelspec = meta.get("kernelspec") or {}
    if not (kernelspec.get("name") and kernelspec.get("display_name")):
        problems.append("no `kernelspec` with `name: python3` and a `display_name` in the front matter")
    return problems


def myst_extensions(path: Path) -> tuple[str, ...]:
    """``parse.myst_enable_extensions`` of the nearest ``_config.yml`` above ``path`` (none without one)."""
    config = next((f / "_config.yml" for f in Path(path).resolve().parents if (f / "_config.yml").exists()), None)
    return _extensions_in(config.read_text(encoding="utf-8")) if config else ()


@functools.lru_cache(maxsize=32)
def _extensions_in(config: str) -> tuple[str, ...]:
    data = yaml.safe_load(config) or {}
    return tuple(sorted((data.get("parse") or {}).get("myst_enable_extensions") or ()))


def is_lesson(text: str | dict) -> bool:
    """Whether a chapter (its text, or a notebook's metadata) declares the lesson form."""
    meta = (text if isinstance(text, dict) else front_matter(text)).get("tensor-fences")
    return isinstance(meta, dict) and meta.get("form") == LESSON_FORM


def lessons(root: Path) -> list[Path]:
    """Every lesson of the book at ``root``, in the order of _toc.yml."""
    return [p for p in toc_files(Path(root)) if p.exists() and is_lesson(p.read_text(encoding="utf-8"))]


def lint_problems(text: str, nb) -> list[str]:
    """Everything ``fencecheck.lint`` finds in one chapter (the lesson form's rules in a lesson)."""
    lines = lint.cell_lines(nb)
    problems = (lint.cell_problems(nb, text) + lint.text_problems(text) + lint.exponent_problems(text)
                + lint.solution_problems(text) + lint.meta_problems(front_matter(text).get("tensor-fences"))
                + lint.quiz_problems(nb, lines))
    if is_lesson(text):
        problems += lint.lesson_problems(nb, lines) + lint.allowed_numbers(text)[1]
    return problems


def parse_cache_dir() -> Path:
    """Where parsed chapters are kept: ``$FENCES_PARSE_CACHE``, else the user's cache."""
    if os.environ.get("FENCES_PARSE_CACHE"):   # Path.home() may fail in a sandbox without HOME
        return Path(os.environ["FENCES_PARSE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tensor-fences" / "parsed"


def prune_parsed(folder: Path, keep: int = PARSED_KEEP, days: float = PARSED_DAYS,
                 now: float | None = None) -> int:
    """Remove the parsed chapters written more than ``days`` ago, then the oldest beyond ``keep``,
    and half-written files older than an hour; the number removed (a removed one is re-parsed)."""
    now = time.time() if now is None else now
    try:
        entries = sorted(((p.stat().st_mtime, p) for p in Path(folder).iterdir()
                          if p.is_file() and p.suffix in (".ipynb", ".tmp")), reverse=True)
    except OSError:
        return 0
    old = [path for n, (mtime, path) in enumerate(entries)
           if (path.suffix == ".tmp" and now - mtime > 3600) or now - mtime > days * 86400 or n >= keep]
    for path in old:
        path.unlink(missing_ok=True)
    return len(old)


def parse(text: str, path: Path):
    """The chapter ``path`` (its text ``text``) as a notebook, read by myst-nb with the build's MyST
    extensions; kept on disk (``cached_notebook``), as a build reads each chapter several times."""
    from .upstream import myst_nb

    return myst_nb.read_notebook(Path(path), text, myst_extensions(path))


def cached_notebook(reader: str, text: str, read):
    """``read()``, a notebook made from ``text``, kept on disk keyed by the text, the ``reader``
    (its name and version) and nbformat's version; each call returns a fresh notebook."""
    import nbformat

    key = hashlib.sha256(f"{reader} nbformat {nbformat.__version__}\n{text}".encode())
    path = parse_cache_dir() / f"{key.hexdigest()[:32]}.ipynb"
    with contextlib.suppress(OSError, ValueError):
        return nbformat.from_dict(json.loads(path.read_text(encoding="utf-8")))
    nb = read()
    with contextlib.suppress(OSError):   # a read-only home: read every time
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(nb), encoding="utf-8")
        os.replace(partial, path)  # atomic: parallel readers never see half a file
    return nb


def read(path: Path):
    """The chapter as ``(notebook, lines)`` after every check (``lines[i]``: the source line of
    code cell ``i``); raises ``ChapterError``."""
    path = Path(path)
    if not path.exists():
        raise ChapterError(f"{path}: file does not exist")
    text = path.read_text(encoding="utf-8")
    problems = header_problems(text) or [
        f"line {n}: `{line.strip()}`: a cell's tags are a list in brackets, e.g. :tags: [fence, proof]"
        for n, line in enumerate(text.splitlines(), 1) if re.match(r"^:tags:\s*[^\s\[]", line)]
    if not problems:
        nb = parse(text, path)
        # a fence id twice in this chapter, also when it is not (yet) in _toc.yml
        problems = lint_problems(text, nb) + lint.book_problems({path.name: nb})
    if problems:
        raise ChapterError(f"{path}: " + "; ".join(problems))
    return nb, lint.cell_lines(nb)


def _listed(node) -> list[str]:
    """The ``root`` and ``file`` entries of a parsed _toc.yml, in order."""
    if isinstance(node, dict):
        found = [node[key] for key in ("root", "file") if isinstance(node.get(key), str)]
        return found + _listed(list(node.values()))
    return [f for item in node for f in _listed(item)] if isinstance(node, list) else []


def toc_files(root: Path) -> list[Path]:
    """Every file ``_toc.yml`` lists, resolved against ``root``, in order (``.md`` if it has no suffix)."""
    try:
        toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ChapterError(f"{root / '_toc.yml'}: {yaml_problem(exc, 'the table of contents')}") from None
    return [root / (f if Path(f).suffix else f + ".md") for f in _listed(toc)]


def book_problems(root: Path) -> list[str]:
    notebooks = {}
    for path in toc_files(root):
        if path.exists() and not header_problems(text := path.read_text(encoding="utf-8")):
            notebooks[path.relative_to(root).as_posix()] = parse(text, path)
    return lint.book_problems(notebooks)


def cell_timeout(root: Path) -> float | None:
    """Seconds a cell may run: ``execute.timeout`` in ``_config.yml``, its one home (None without one)."""
    path = Path(root) / "_config.yml"
    if not path.exists():
        return None
    return float((yaml.safe_load(path.read_text(encoding="utf-8")) or {})["execute"]["timeout"])
