"""Render ``make mutate``'s results (``mutate-results.json``) for the "Verified on" page.

Only reads the file ``tools/mutate.py`` wrote: scores per chapter (a mutant is killed when
its fence fails), the open survivors and the justified ones (``mutate-allowlist.yml``).
"""
from __future__ import annotations

import html
from pathlib import Path

#: The file tools/mutate.py writes, at the top of the repository beside its allowlist
#: (not in results/, which holds one file per release).
RESULTS_NAME = "mutate-results.json"
#: How to write mutate-results.json again (in a BadFile error naming it).
REGENERATE = ("regenerate it with `make mutate MUTATE_ARGS=--fresh` (every mutant runs again), "
              f"or restore it with `git checkout -- {RESULTS_NAME}`")


def load(folder: Path) -> dict | None:
    """The results of the last ``make mutate`` in ``folder``, or None when it has not run."""
    from fencecheck.record import read_json

    path = Path(folder) / RESULTS_NAME
    return read_json(path, REGENERATE, ("chapters",)) if path.exists() else None


def _table(head: tuple, rows: list[str]) -> str:
    heads = "".join(f"<th>{h}</th>" for h in head)
    return (f'<table class="tf-matrix tf-mutation"><thead><tr>{heads}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def score_html(data: dict) -> str:
    """One row per chapter, and one for the book: changes run, killed, justified, open,
    and those that did not run here (a gated fence, or a branch for another build)."""
    keys = ("fences", "total", "killed", "justified", "survived", "not_executed", "not_reached")
    totals = dict.fromkeys(keys, 0)
    rows = []
    for c in data.get("chapters", []):
        if c.get("fences"):
            for key in keys:
                totals[key] += c.get(key, 0)
            rows.append(_row(Path(c["chapter"]).stem, c))
    rows.append(_row("all chapters", totals, bold=True))
    return _table(("chapter", "fences", "changes run", "killed", "justified", "open survivors",
                   "did not run here", "killed of run"), rows)


def _row(name: str, c: dict, bold: bool = False) -> str:
    survived, killed, total = c.get("survived", 0), c.get("killed", 0), c.get("total", 0)
    cells = "".join(f"<td>{v}</td>" for v in [html.escape(name)] + [
        c.get(k, 0) for k in ("fences", "total", "killed", "justified")])
    fail = ' class="tf-fail"' if survived else ""
    cells += f"<td{fail}>{survived}</td>"
    cells += f"<td>{c.get('not_executed', 0) + c.get('not_reached', 0)}</td>"
    cells += f"<td>{f'{killed} / {total} ({100 * killed / total:.0f}%)' if total else '-'}</td>"
    style = ' style="font-weight: bold"' if bold else ""
    return f"<tr{style}>{cells}</tr>"


def _change(m: dict, arrow: str) -> str:
    return f"<code>{html.escape(m['original'])}</code>{arrow}<code>{html.escape(m['mutated'])}</code>"


def justified_html(data: dict, kind: str = "equivalent") -> str:
    """The justified survivors of one kind: where, the change, and why."""
    items = [m for m in data.get("justified", []) if m.get("kind", "equivalent") == kind]
    if not items:
        return "<p>No survivor needed a justification.</p>"
    rows = [f"<tr><td>{html.escape(Path(m['chapter']).stem)}<br>"
            f"<small>{html.escape(m['fence'])}, line {m['line']}</small></td>"
            f"<td>{_change(m, '<br>→ ')}</td><td>{html.escape(m['reason'])}</td></tr>" for m in items]
    return _table(("fence", "change", "why it cannot fail" if kind == "equivalent" else "where it fails"), rows)


def section_html(folder: Path) -> str:
    """What the page shows: the run, the scores, the open and the justified survivors."""
    data = load(folder)
    if data is None:
        return "<p>Not measured yet: <code>make mutate</code> has not been run.</p>"
    fences = data.get("fences", [])
    reused = [f for f in fences if f.get("reused")]
    # fences whose code, the cells before them, torch, the packages and the tool were unchanged
    reuse = (f"; the mutants of {len(reused)} of {len(fences)} fences were not run again, "
             f"their code, the cells before them, torch, the packages and the tool being "
             f"unchanged since their run on {html.escape(', '.join(sorted({f.get('ran', '?') for f in reused})))}"
             if reused else "")
    out = (f"<p>Measured with {html.escape(data.get('build', data.get('torch', '?')))} on "
           f"{html.escape(data.get('date', '?'))}{reuse}.</p>") + score_html(data)
    survivors = data.get("survivors", [])
    if survivors:
        listing = "".join(f"<li>{html.escape(Path(m['chapter']).stem)}, fence {html.escape(m['fence'])}, "
                          f"line {m['line']}: {_change(m, ' → ')}</li>" for m in survivors)
        out += f'<p class="tf-fail">{len(survivors)} change(s) survived without a justification:</p><ul>{listing}</ul>'
    else:
        out += "<p>Every change that survived is justified below.</p>"
    unmeasured = data.get("unmeasured", [])
    if unmeasured:
        exercises = sum("-ex-" in f for f in unmeasured)
        out += (f"<p>{len(unmeasured)} fences hold nothing the operators change (no "
                "literal number, dtype, comparison or raise check) and are not scored"
                + (f"; {exercises} of them prove an exercise's check, which is a "
                   "mutation test of its own: the check must refuse each wrong answer"
                   if exercises else "") + ".</p>")
    justified = data.get("justified", [])
    equivalent = [m for m in justified if m.get("kind", "equivalent") == "equivalent"]
    out += "<h3>Justified survivors</h3>"
    if not justified:
        return out + justified_html(data)
    out += (f"<details><summary>{len(equivalent)} changes that cannot change the outcome on "
            f"any release, each with its reason</summary>{justified_html(data)}</details>")
    if len(justified) > len(equivalent):
        out += (f"<details><summary>{len(justified) - len(equivalent)} changes that survive on this "
                "release only: killed on another release, where torch raises another class (the "
                "fence accepts each release's class and records which)</summary>"
                f"{justified_html(data, 'release')}</details>")
    return out
