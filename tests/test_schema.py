"""The results files' schema and consistency (fencecheck.schema, record.problems): every
reader refuses an invalid or inconsistent record the same way, naming file, fence, field."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fencecheck import record, releases

ROOT = Path(__file__).resolve().parents[1]


def committed(name: str = "2.14.1") -> dict:
    return json.loads((ROOT / "results" / f"{name}.json").read_text())


def write(folder: Path, run: dict, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or run['release']}.json"
    path.write_text(json.dumps(run, indent=1))
    return path


def refused(folder: Path, *words: str) -> str:
    with pytest.raises(record.BadFile) as caught:
        record.load(folder)
    message = str(caught.value)
    for w in words:
        assert w in message, message
    return message


def test_the_committed_results_fit_the_schema_and_are_consistent():
    runs = record.load(ROOT / "results")
    assert {record.label(r) for r in runs} <= set(releases.names())


def test_a_record_without_its_outcome_names_file_fence_and_field(tmp_path):
    run = committed()
    victim = run["fences"][3]
    del victim["outcome"]
    write(tmp_path, run)
    msg = refused(tmp_path, "results/2.14.1.json", repr(victim["id"]), "field outcome", "missing")
    assert "KeyError" not in msg


@pytest.mark.parametrize("field, value, words", [
    ("outcome", "passd", "field outcome"),
    ("cell", "3", "field cell"),
    ("observed", {"x": 1001.0}, "field observed.x"),
    ("outcom", "passed", "field outcom"),
])
def test_a_wrong_field_is_named(tmp_path, field, value, words):
    run = committed()
    run["fences"][0][field] = value
    write(tmp_path, run)
    refused(tmp_path, "results/2.14.1.json", repr(run["fences"][0]["id"]), words)


@pytest.mark.parametrize("fences", [5, "passed", [["a"]], [{"id": ["a"], "outcome": "skipped", "reason": "CUDA"}]])
def test_a_fences_field_of_another_shape_is_named_not_a_crash(tmp_path, fences):
    run = committed()
    run["fences"] = fences
    write(tmp_path, run)
    assert "Error" not in refused(tmp_path, "results/2.14.1.json", "fence")


def test_a_gpu_gated_fence_passed_on_a_run_without_a_gpu_is_refused(tmp_path):
    """The plant: a GPU-only fence hand-marked passed (the badge said "CPU part holds")."""
    run = committed()
    gated = next(r for r in run["fences"] if r["outcome"] == "skipped" and "CUDA" in r["reason"])
    gated.update(outcome="passed", reason="")
    write(tmp_path, run)
    write(tmp_path, committed("2.15.0"))   # the same fence, skipped for want of a GPU
    refused(tmp_path, "results/2.14.1.json", repr(gated["id"]), "field outcome", "gated on a device",
            "no GPU")


def test_a_gpu_gated_fence_is_known_from_the_book_even_when_every_file_was_edited(tmp_path):
    book = tmp_path / "book"
    shutil.copytree(ROOT / "book", book)
    shutil.copy(ROOT / "_toc.yml", tmp_path / "_toc.yml")
    run = committed()
    in_book = record._gated_in_book(tmp_path)   # id -> the code hash of the book's fence now
    gated = next(r for r in run["fences"] if r["id"] in in_book)
    gated.update(outcome="passed", reason="", code=in_book[gated["id"]])
    for rec in run["fences"]:   # no skip reason left anywhere: only the book's code says so
        if rec["outcome"] == "skipped":
            rec.update(outcome="passed", reason="", code=in_book.get(rec["id"], rec["code"]))
    write(tmp_path / "results", run)
    refused(tmp_path / "results", repr(gated["id"]), "gated on a device")
    run["gpu"] = "NVIDIA H200"   # a run with a GPU may pass it
    write(tmp_path / "results", run)
    record.load(tmp_path / "results")


def test_a_release_the_matrix_does_not_run_is_refused(tmp_path):
    """The plant: results/2.7.1.json made every page say "hold on 2.7.1 – 2.15.0"."""
    run = committed("2.8.0")
    run["release"] = "2.7.1"
    write(tmp_path, run)
    refused(tmp_path, "results/2.7.1.json", "field release", "'2.7.1' is not a release the matrix runs")


def test_the_newest_release_on_pypi_is_allowed_and_a_misnamed_file_is_not(tmp_path):
    run = committed("2.15.0")
    run["release"] = "2.16.0"
    write(tmp_path, run)
    assert [record.label(r) for r in record.load(tmp_path)] == ["2.16.0"]
    write(tmp_path, run, name="2.15.0")
    refused(tmp_path, "results/2.15.0.json", "field release", "named for '2.15.0'")


def test_an_observed_value_on_a_fence_that_did_not_pass_is_refused(tmp_path):
    run = committed()
    skipped = next(r for r in run["fences"] if r["outcome"] == "skipped")
    skipped["observed"] = {"devices.x": "1001.0"}
    write(tmp_path, run)
    refused(tmp_path, repr(skipped["id"]), "field observed", "skipped")


def test_matrix_check_refuses_an_invalid_file_too():
    """``matrix.py --check`` reads through record.load: the same refusal, exit 2."""
    sys.path.insert(0, str(ROOT / "tools"))
    import matrix

    assert matrix.check([]) == []


def test_the_schema_prints_as_json():
    out = subprocess.run([sys.executable, "-m", "fencecheck.schema"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert json.loads(out)["properties"]["fences"]["items"]["required"][4] == "outcome"


def test_the_site_build_stops_on_an_invalid_record_naming_it_without_a_traceback(tmp_path):
    """The plant: a record without its ``outcome`` crashed ``make book`` with
    ``KeyError: 'outcome'``, naming no file."""
    from types import SimpleNamespace

    from sphinx.errors import SphinxError

    from fencecheck import sphinx as ext

    run = committed()
    victim = run["fences"][5]
    del victim["outcome"]
    write(tmp_path / "results", run)
    app = SimpleNamespace(srcdir=str(tmp_path), config=SimpleNamespace(fences_results="results"))
    with pytest.raises(SphinxError) as caught:
        ext._record(app)
    message = str(caught.value)
    assert "results/2.14.1.json" in message and repr(victim["id"]) in message, message
    assert "field outcome: missing" in message, message
