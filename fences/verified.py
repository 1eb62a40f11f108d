"""Render the release matrix's results (results/*.json) for the "Verified on" page.

Each results file is what ``pytest --fences-results`` wrote for one torch
release: one record per fence with its outcome, and the values the fence
recorded with ``fences.observe``.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

SYMBOL = {"passed": ("tf-pass", "pass"), "failed": ("tf-fail", "FAIL"),
          "skipped": ("tf-skip", "skip"), None: ("tf-missing", "not run")}


def load(folder: Path) -> list[dict]:
    """Every results file in ``folder``, oldest torch first."""
    runs = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))
            if p.name != "mutation.json"]  # make mutate's scores, not a release's results
    return sorted(runs, key=lambda r: _version_key(r.get("torch") or r.get("release", "")))


def _version_key(version: str) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


def label(run: dict) -> str:
    return run.get("release") or run.get("torch") or "?"


def counts(run: dict) -> dict[str, int]:
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for rec in run.get("fences", []):
        out[rec["outcome"]] = out.get(rec["outcome"], 0) + 1
    return out


def ok(run: dict) -> bool:
    """A release is green when its suite exited 0 and no fence failed."""
    return run.get("exitstatus") == 0 and counts(run)["failed"] == 0 and not run.get("error")


def summary_html(runs: list[dict]) -> str:
    """One row per release: build, date, counts, and a green or red status cell."""
    rows = []
    for run in runs:
        c = counts(run)
        css, status = ("tf-pass", "green") if ok(run) else ("tf-fail", "RED")
        cells = [label(run), run.get("build", ""), run.get("date", ""), c["passed"], c["failed"],
                 c["skipped"]]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in cells)
                    + f'<td class="{css}" title="{html.escape(run.get("error", ""))}">{status}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in
                   ("release", "build", "date", "passed", "failed", "skipped", "status"))
    return f'<table class="tf-matrix"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def fence_grid(runs: list[dict], chapters: list[str] | None = None) -> dict[str, dict[str, dict[str, dict]]]:
    """chapter -> fence -> release label -> record.

    Chapters in the order of ``chapters`` (e.g. the table of contents) when
    given, others after them; fences in first-seen order.
    """
    grid: dict[str, dict[str, dict[str, dict]]] = {c: {} for c in chapters or []}
    for run in runs:
        for rec in run.get("fences", []):
            grid.setdefault(rec["chapter"], {}).setdefault(rec["fence"], {})[label(run)] = rec
    return {c: fences for c, fences in grid.items() if fences}


def grid_html(runs: list[dict], fences: dict[str, dict[str, dict]]) -> str:
    """One chapter's fences (a value of ``fence_grid``) × releases as an HTML table, failures in red."""
    head = "".join(f"<th>{html.escape(label(r))}</th>" for r in runs)
    rows = []
    for fence, by_release in fences.items():
        proves = next((rec.get("proves", "") for rec in by_release.values() if rec.get("proves")), "")
        cells = []
        for run in runs:
            rec = by_release.get(label(run))
            css, text = SYMBOL[rec["outcome"] if rec else None]
            title = html.escape(rec.get("reason", "") if rec else "not in this release's results")
            cells.append(f'<td class="{css}" title="{title}">{text}</td>')
        rows.append(f"<tr><td>{html.escape(fence)}</td><td>{html.escape(proves)}</td>{''.join(cells)}</tr>")
    return (f'<table class="tf-matrix"><thead><tr><th>fence</th><th>what it proves</th>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def differences(runs: list[dict]) -> list[tuple[str, str, str, dict[str, str]]]:
    """Behaviour that differs between releases: (name, chapter, fence, value by release).

    Two kinds: a value recorded with ``fences.observe`` that is not the same
    on every release (name: the observed name), and a fence whose outcome is
    not the same everywhere (name: "outcome").
    """
    out = []
    for chapter, fences in fence_grid(runs).items():
        for fence, by_release in fences.items():
            outcomes = {rel: rec["outcome"] for rel, rec in by_release.items()}
            if len(set(outcomes.values())) > 1:
                out.append(("outcome", chapter, fence, outcomes))
            names = {n for rec in by_release.values() for n in rec.get("observed", {})}
            for name in sorted(names):
                values = {rel: rec.get("observed", {}).get(name, "(not recorded)")
                          for rel, rec in by_release.items()}
                if len(set(values.values())) > 1:
                    out.append((name, chapter, fence, values))
    return out


def differences_html(runs: list[dict]) -> str:
    """The differences as a table with one column per release."""
    head = "".join(f"<th>{html.escape(label(r))}</th>" for r in runs)
    proves = {(rec["chapter"], rec["fence"]): rec.get("proves", "")
              for run in runs for rec in run.get("fences", [])}
    rows = []
    for name, chapter, fence, values in differences(runs):
        what = proves.get((chapter, fence), "") or fence
        cells = "".join(f"<td>{html.escape(str(values.get(label(r), '(not run)')))}</td>" for r in runs)
        rows.append(f'<tr><td><code>{html.escape(name)}</code></td>'
                    f'<td title="{html.escape(fence)}"><b>{html.escape(Path(chapter).stem)}</b>: '
                    f"{html.escape(what)}</td>{cells}</tr>")
    return (f'<table class="tf-matrix"><thead><tr><th>behaviour</th><th>shown by</th>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")
