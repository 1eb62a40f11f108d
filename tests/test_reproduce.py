"""The record proves itself: a fresh matrix run must reproduce its committed results file
(tools/matrix.py ``reproduced``, fencecheck.record ``reproduce``)."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

from fencecheck import record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import matrix  # noqa: E402


def committed(name: str = "2.11.0") -> dict:
    run = json.loads((ROOT / "results" / f"{name}.json").read_text())
    run["file"] = f"{name}.json"
    return run


def observed_fence(run: dict) -> dict:
    return next(r for r in run["fences"] if r["observed"])


def test_an_identical_run_reproduces_apart_from_its_per_run_fields():
    old = committed()
    new = copy.deepcopy(old)
    new.update(date="2027-01-01", commit="f" * 40, dirty=True, numpy="2.5.0", platform="other")
    found = record.reproduce(old, new)
    assert found.failures == [] and found.rerecorded == []
    assert any("numpy" in n for n in found.notes)


def test_a_hand_edited_observed_value_is_named_file_fence_field_old_new():
    """The plant: one observed value hand-edited to 1001.0 made the site report a change
    that never happened; the fresh run does not reproduce it."""
    old = committed()
    victim = observed_fence(old)
    name = next(iter(victim["observed"]))
    new = copy.deepcopy(old)
    victim["observed"][name] = "1001.0"        # the hand edit, committed
    found = record.reproduce(old, new)
    fresh = observed_fence(new)["observed"][name]
    assert found.failures == [f"results/2.11.0.json: fence {victim['id']!r}: observed.{name}: "
                              f"'1001.0' → {fresh!r}"], found.failures


def test_a_hand_edited_outcome_and_a_hand_added_record_are_named():
    old, new = committed(), committed()
    old["fences"][0]["outcome"] = "skipped"
    old["fences"].append({**old["fences"][1], "id": "invented-fence"})
    failures = record.reproduce(old, new).failures
    assert any(f"{new['fences'][0]['id']!r}: outcome: 'skipped' → 'passed'" in f for f in failures)
    assert any("'invented-fence': in the committed file, but the run did not produce it" in f
               for f in failures)


def test_a_changed_chapter_is_re_recorded_not_a_failure():
    old, new = committed(), committed()
    victim = observed_fence(new)
    chapter = victim["chapter"]
    new["chapters"][chapter] = "0" * 12         # its code changed since the committed file
    victim["observed"][next(iter(victim["observed"]))] = "changed"
    victim["code"] = "1" * 12
    found = record.reproduce(old, new)
    assert found.failures == []
    assert any(victim["id"] in r for r in found.rerecorded)
    # a fence of an unchanged chapter must still reproduce
    other = next(r for r in new["fences"] if r["chapter"] != chapter)
    other["outcome"] = "failed"
    assert [f for f in record.reproduce(old, new).failures if other["id"] in f]


def test_make_matrix_fails_on_a_planted_hand_edit(tmp_path, monkeypatch):
    """matrix.main: the committed 2.11.0 file carries a hand edit; the fresh run (its
    original) writes what torch gives; the run fails naming the record."""
    results = tmp_path / "results"
    results.mkdir()
    fresh = committed()
    planted = copy.deepcopy(fresh)
    victim = observed_fence(planted)
    name = next(iter(victim["observed"]))
    victim["observed"][name] = "1001.0"

    def run_release(release):
        out = {k: v for k, v in fresh.items() if k != "file"}
        (results / f"{release.name}.json").write_text(json.dumps(out))
        return 0

    monkeypatch.setattr(matrix, "RESULTS", results)
    monkeypatch.setattr(matrix, "REPORT", tmp_path / "_build" / "matrix-report.md")
    monkeypatch.setattr(matrix, "ROOT", tmp_path)
    monkeypatch.setattr(matrix, "committed_results", lambda: [planted])
    monkeypatch.setattr(matrix, "run_release", run_release)
    monkeypatch.setattr(matrix, "report", lambda before, names, base: "# report\n")
    monkeypatch.setattr(matrix, "environments", lambda prune: None)
    (tmp_path / "_build").mkdir()
    assert matrix.main(["2.11.0"]) == 1
    text = (tmp_path / "_build" / "matrix-report.md").read_text()
    assert f"fence {victim['id']!r}: observed.{name}: '1001.0' →" in text, text
    # and without the edit the same run passes
    monkeypatch.setattr(matrix, "committed_results", lambda: [committed()])
    assert matrix.main(["2.11.0"]) == 0
