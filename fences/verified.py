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
    runs = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]
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


def summary_rows(runs: list[dict]) -> list[tuple]:
    rows = []
    for run in runs:
        c = counts(run)
        status = "green" if ok(run) else "RED"
        rows.append((label(run), run.get("build", ""), run.get("date", ""), c["passed"],
                     c["failed"], c["skipped"], status, run.get("error", "")))
    return rows


def fence_grid(runs: list[dict]) -> dict[str, dict[str, dict[str, dict]]]:
    """chapter -> fence -> release label -> record (fences in first-seen order)."""
    grid: dict[str, dict[str, dict[str, dict]]] = {}
    for run in runs:
        for rec in run.get("fences", []):
            grid.setdefault(rec["chapter"], {}).setdefault(rec["fence"], {})[label(run)] = rec
    return grid


def grid_html(runs: list[dict], chapter: str) -> str:
    """One chapter's fences × releases as an HTML table, failures in red."""
    fences = fence_grid(runs).get(chapter, {})
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
    """Behaviour that differs between releases: (kind, chapter, fence/name, values by release).

    Two kinds: a value recorded with ``fences.observe`` that is not the same
    on every release, and a fence whose outcome is not the same everywhere.
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
