"""``python -m fencecheck.preflight [ROOT [CHAPTER ...]]``: before ``make book``, check that ``_toc.yml`` and
every listed chapter's front matter parse and that no chapter is left out of it, printing each
problem with its file and line (exit status 2), since jupyter-book's own error names no line
and it skips an unlisted chapter in silence. The test plugin asks the same. Also prunes the
parse cache.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import chapter


def problems(root: Path, book: str = "book") -> list[str]:
    root = Path(root)
    if not (root / "_toc.yml").exists():
        return []
    try:
        listed = chapter.toc_files(root)
    except chapter.ChapterError as exc:
        return [str(exc)]
    out = [f"{path.relative_to(root)} is not listed in _toc.yml: the site would not build it "
           "(add one `- file:` line)" for path in sorted((root / book).glob("*.md")) if path not in listed]
    for path in listed:
        if not path.exists():
            out.append(f"_toc.yml lists {path.relative_to(root)}, which does not exist")
            continue
        out += [f"{path.relative_to(root)} (listed in _toc.yml): {p}"
                for p in chapter.header_problems(path.read_text(encoding="utf-8"))]
    return out


def main(argv: list[str]) -> int:
    """``[ROOT [CHAPTER ...]]``: each CHAPTER named is also linted, without executing it (every
    rule but the prose numbers', which needs the run's outputs)."""
    chapter.prune_parsed(chapter.parse_cache_dir())
    found = problems(Path(argv[0]) if argv else Path.cwd())
    for path in argv[1:]:
        try:
            chapter.read(Path(path))
        except chapter.ChapterError as exc:
            found.append(str(exc))
    for p in found:
        print(p, file=sys.stderr)
    return 2 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
