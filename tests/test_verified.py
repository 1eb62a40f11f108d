"""The "Verified on" renderer: a fence false on one release turns that column red."""
from __future__ import annotations

import json
from pathlib import Path

from fences import verified


def run(release, outcomes, observed=None, exitstatus=None):
    fences = [
        {"chapter": "book/a.md", "fence": f"Cell {i} (line {i})", "outcome": o,
         "reason": "AssertionError: boom" if o == "failed" else "", "proves": f"claim {i}",
         "observed": (observed or {}) if i == 0 else {}}
        for i, o in enumerate(outcomes)
    ]
    status = exitstatus if exitstatus is not None else int("failed" in outcomes)
    return {"release": release, "torch": release, "build": "b", "date": "2026-11-30",
            "exitstatus": status, "fences": fences}


def test_load_orders_releases_by_version(tmp_path: Path):
    for name in ("2.15.0", "2.8.0", "2.13.0+cpu"):
        (tmp_path / f"{name}.json").write_text(json.dumps(run(name, ["passed"])))
    assert [verified.label(r) for r in verified.load(tmp_path)] == ["2.8.0", "2.13.0+cpu", "2.15.0"]


def test_a_fence_false_on_one_release_is_red_there_only():
    runs = [run("2.8.0", ["passed", "passed"]), run("2.13.0", ["passed", "failed"])]
    table = verified.grid_html(runs, verified.fence_grid(runs)["book/a.md"])
    row = table.split("<tr>")[-1]
    assert '<td class="tf-pass" title="">pass</td><td class="tf-fail" title="AssertionError: boom">FAIL</td>' in row
    summary = verified.summary_html(runs)
    assert '<td class="tf-pass" title="">green</td>' in summary.split("<tr>")[2]
    assert '<td class="tf-fail" title="">RED</td>' in summary.split("<tr>")[3]
    assert ("outcome", "book/a.md", "Cell 1 (line 1)", {"2.8.0": "passed", "2.13.0": "failed"}) in verified.differences(runs)


def test_observed_values_that_differ_are_listed():
    runs = [run("2.13.0+cpu", ["passed"], {"acc": "None"}), run("2.14.1", ["passed"], {"acc": "cuda"})]
    diffs = verified.differences(runs)
    assert diffs == [("acc", "book/a.md", "Cell 0 (line 0)", {"2.13.0+cpu": "None", "2.14.1": "cuda"})]
    same = [run("a", ["passed"], {"acc": "x"}), run("b", ["passed"], {"acc": "x"})]
    assert verified.differences(same) == []


def test_a_missing_fence_is_marked_not_run():
    runs = [run("2.8.0", ["passed"]), run("2.13.0", ["passed", "passed"])]
    assert 'class="tf-missing"' in verified.grid_html(runs, verified.fence_grid(runs)["book/a.md"])


def test_an_install_failure_is_red():
    broken = {"release": "2.15.0", "torch": None, "exitstatus": 1, "error": "install failed", "fences": []}
    assert not verified.ok(broken)


def test_grid_follows_the_given_chapter_order():
    runs = [{"release": "x", "fences": [
        {"chapter": "book/b.md", "fence": "f", "outcome": "passed"},
        {"chapter": "book/a.md", "fence": "f", "outcome": "passed"}]}]
    assert list(verified.fence_grid(runs, ["book/a.md", "book/b.md"])) == ["book/a.md", "book/b.md"]


def test_differences_table_has_a_column_per_release():
    runs = [run("2.13.0+cpu", ["passed"], {"acc": "None"}), run("2.14.1", ["passed"], {"acc": "cuda"})]
    table = verified.differences_html(runs)
    assert "<th>2.13.0+cpu</th><th>2.14.1</th>" in table
    assert "<td>None</td><td>cuda</td>" in table
