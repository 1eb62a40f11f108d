"""Render ``make mutate``'s results (``mutate-results.json``) for the "Verified on" page.

``tools/mutate.py`` changes one thing a fence expects at a time (a number,
a dtype, a shape, a comparison, the exception a raise check names, a row of
a table) and re-runs the chapter up to that fence. A changed fence that
fails is *killed*; one that passes *survived*. A survivor that cannot change
the outcome (an equivalent mutant) is *justified* in ``mutate-allowlist.yml``
with its reason. Fences gated on a device the machine lacks did not run and
are counted apart. This module only reads the file the tool wrote.
"""
from __future__ import annotations

import html
from pathlib import Path

#: The file tools/mutate.py writes, at the top of the repository beside its allowlist
#: (not in results/, which holds one file per release).
RESULTS_NAME = "mutate-results.json"

_COLUMNS = ("chapter", "fences", "changes run", "killed", "justified", "open survivors",
            "did not run here", "killed of run")


def load(folder: Path) -> dict | None:
    """The results of the last ``make mutate`` in ``folder``, or None when it has not run."""
    from fencecheck.record import read_json

    path = Path(folder) / RESULTS_NAME
    return read_json(path, REGENERATE, ("chapters",)) if path.exists() else None


#: How to write mutate-results.json again (in a BadFile error naming it).
REGENERATE = ("regenerate it with `make mutate MUTATE_ARGS=--fresh` (every mutant runs again), "
              f"or restore it with `git checkout -- {RESULTS_NAME}`")


def _percent(killed: int, total: int) -> str:
    return f"{killed} / {total} ({100 * killed / total:.0f}%)" if total else "-"


def score_html(data: dict) -> str:
    """One row per chapter, and one for the book: changes run, killed, justified, open,
    and those that did not run here (a gated fence, or a branch for another build)."""
    keys = ("fences", "total", "killed", "justified", "survived", "not_executed", "not_reached")
    totals = dict.fromkeys(keys, 0)
    rows = []
    for c in data.get("chapters", []):
        if not c.get("fences"):
            continue
        for key in keys:
            totals[key] += c.get(key, 0)
        rows.append(_row(Path(c["chapter"]).stem, c))
    rows.append(_row("all chapters", totals, bold=True))
    head = "".join(f"<th>{h}</th>" for h in _COLUMNS)
    return (f'<table class="tf-matrix tf-mutation"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _row(name: str, c: dict, bold: bool = False) -> str:
    survived = c.get("survived", 0)
    cells = [html.escape(name)] + [c.get(k, 0) for k in ("fences", "total", "killed", "justified")]
    html_cells = "".join(f"<td>{v}</td>" for v in cells)
    css = ' class="tf-fail"' if survived else ""
    html_cells += f"<td{css}>{survived}</td>"
    html_cells += f"<td>{c.get('not_executed', 0) + c.get('not_reached', 0)}</td>"
    html_cells += f"<td>{_percent(c.get('killed', 0), c.get('total', 0))}</td>"
    style = ' style="font-weight: bold"' if bold else ""
    return f"<tr{style}>{html_cells}</tr>"


def justified_html(data: dict, kind: str = "equivalent") -> str:
    """The justified survivors of one kind: where, the change, and why."""
    items = [m for m in data.get("justified", []) if m.get("kind", "equivalent") == kind]
    if not items:
        return "<p>No survivor needed a justification.</p>"
    rows = []
    for m in items:
        change = (f"<code>{html.escape(m['original'])}</code><br>→ "
                  f"<code>{html.escape(m['mutated'])}</code>")
        rows.append(f"<tr><td>{html.escape(Path(m['chapter']).stem)}<br>"
                    f"<small>{html.escape(m['fence'])}, line {m['line']}</small></td>"
                    f"<td>{change}</td><td>{html.escape(m['reason'])}</td></tr>")
    why = "why it cannot fail" if kind == "equivalent" else "where it fails"
    head = "".join(f"<th>{h}</th>" for h in ("fence", "change", why))
    return (f'<table class="tf-matrix tf-mutation"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _reuse_text(data: dict) -> str:
    """How much of the run was reused: fences whose code, the cells before them, torch,
    the packages and the tool were unchanged keep the outcomes of the run that made them."""
    fences = data.get("fences", [])
    reused = [f for f in fences if f.get("reused")]
    if not reused:
        return ""
    dates = sorted({f.get("ran", "?") for f in reused})
    return (f"; the mutants of {len(reused)} of {len(fences)} fences were not run again, "
            f"their code, the cells before them, torch, the packages and the tool being "
            f"unchanged since their run on {html.escape(', '.join(dates))}")


def section_html(folder: Path) -> str:
    """What the page shows: the run, the scores, the open and the justified survivors."""
    data = load(folder)
    if data is None:
        return "<p>Not measured yet: <code>make mutate</code> has not been run.</p>"
    run = (f"<p>Measured with {html.escape(data.get('build', data.get('torch', '?')))} on "
           f"{html.escape(data.get('date', '?'))}{_reuse_text(data)}.</p>")
    survivors = data.get("survivors", [])
    if survivors:
        listing = "".join(
            f"<li>{html.escape(Path(m['chapter']).stem)}, fence {html.escape(m['fence'])}, "
            f"line {m['line']}: <code>{html.escape(m['original'])}</code> → "
            f"<code>{html.escape(m['mutated'])}</code></li>"
            for m in survivors)
        open_part = (f'<p class="tf-fail">{len(survivors)} change(s) survived without a '
                     f"justification:</p><ul>{listing}</ul>")
    else:
        open_part = "<p>Every change that survived is justified below.</p>"
    unmeasured = data.get("unmeasured", [])
    if unmeasured:
        exercises = sum("-ex-" in f for f in unmeasured)
        open_part += (f"<p>{len(unmeasured)} fences hold nothing the operators change (no "
                      "literal number, dtype, comparison or raise check) and are not scored"
                      + (f"; {exercises} of them prove an exercise's check, which is a "
                         "mutation test of its own: the check must refuse each wrong answer"
                         if exercises else "") + ".</p>")
    justified = data.get("justified", [])
    equivalent = [m for m in justified if m.get("kind", "equivalent") == "equivalent"]
    elsewhere = len(justified) - len(equivalent)
    out = run + score_html(data) + open_part + "<h3>Justified survivors</h3>"
    if not justified:
        return out + justified_html(data)
    out += (f"<details><summary>{len(equivalent)} changes that cannot change the outcome on "
            f"any release, each with its reason</summary>{justified_html(data)}</details>")
    if elsewhere:
        out += (f"<details><summary>{elsewhere} changes that survive on this release only: "
                "killed on another release, where torch raises another class (the fence "
                "accepts each release's class and records which)</summary>"
                f"{justified_html(data, 'release')}</details>")
    return out
