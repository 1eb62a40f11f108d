"""Before a build: the table of contents and every listed chapter's front matter parse.

    python -m fencecheck.preflight [ROOT]

jupyter-book reads ``_toc.yml`` itself, before Sphinx and this project's extension
start: a YAML mistake there is a traceback from its CLI naming no line of ours. This
check runs first (``make book``) and prints each problem with its file and line
(``_toc.yml: line 5, column 4: ...``, ``book/x.md (listed in _toc.yml): line 10, ...``);
exit status 2 when there is one, 0 otherwise. ``pytest`` reports the same problems
itself (``fencecheck.pytest_plugin``). It also prunes the parse cache outside the clone
(``chapter.prune_parsed``).
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import chapter


def problems(root: Path) -> list[str]:
    root = Path(root)
    if not (root / "_toc.yml").exists():
        return []
    try:
        listed = chapter.toc_files(root)
    except chapter.ChapterError as exc:
        return [str(exc)]
    out = []
    for path in listed:
        if not path.exists():
            out.append(f"_toc.yml lists {path.relative_to(root)}, which does not exist")
            continue
        for p in chapter.header_problems(path.read_text(encoding="utf-8")):
            out.append(f"{path.relative_to(root)} (listed in _toc.yml): {p}")
    return out


def main(argv: list[str]) -> int:
    chapter.prune_parsed(chapter.parse_cache_dir())   # the parse cache outside the clone
    found = problems(Path(argv[0]) if argv else Path.cwd())
    for p in found:
        print(p, file=sys.stderr)
    return 2 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
