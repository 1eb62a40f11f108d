"""The record (fencecheck.record): identity, order, provenance, staleness, badges, the change report."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fences
from fencecheck import lint, record, releases
from fencecheck.record import Fence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import matrix  # noqa: E402
from fencecheck.chapter import HEADER  # noqa: E402



def fence(fid: str, chapter: str = "book/a.md", cell: int = 0, code: str = "c0") -> Fence:
    return Fence(fid, chapter, cell, code, f"Section of {fid}", f"claim {fid}")


def rec(fid, outcome="passed", observed=None, labels=None, reason="", chapter="book/a.md", code="c0"):
    return {"id": fid, "chapter": chapter, "cell": 0, "code": code, "outcome": outcome,
            "reason": reason, "details": "", "proves": f"claim {fid}",
            "observed": observed or {}, "labels": labels or {}}


#: The chapters of the synthetic book and the digest of their code now.
DIGESTS = {"book/a.md": "da", "book/c.md": "dc"}


def run(release, recs, build="CUDA 12.8", torch=None, errors=(), exitstatus=None, chapters=None):
    failed = any(r["outcome"] == "failed" for r in recs) or bool(errors)
    return {"release": release, "torch": torch or release, "build": build, "commit": "abc123",
            "dirty": False, "date": "2026-12-01", "gpu": None,
            "exitstatus": int(failed) if exitstatus is None else exitstatus,
            "fences": list(recs), "errors": list(errors),
            "chapters": dict(DIGESTS) if chapters is None else chapters}


# --- identity and order ---------------------------------------------------------------

def test_code_hash_ignores_comments_and_blank_lines_only():
    base = record.code_hash("# Proves: x\nassert f(1) == 2\n")
    assert record.code_hash("# Proves: x, reworded\n\nassert f(1) == 2   \n") == base
    assert record.code_hash("# Proves: x\nassert f(1) == 3\n") != base


def test_records_follow_the_table_of_contents_then_cells():
    toc = {"book/b.md": 0, "book/a.md": 1}
    recs = [{"chapter": "book/a.md", "cell": 0}, {"chapter": "book/b.md", "cell": 5},
            {"chapter": "book/z.md", "cell": 0}, {"chapter": "book/b.md", "cell": 2},
            {"chapter": "book/a.md", "cell": -1}]
    assert [(r["chapter"], r["cell"]) for r in record.ordered(recs, toc)] == [
        ("book/b.md", 2), ("book/b.md", 5), ("book/a.md", -1), ("book/a.md", 0), ("book/z.md", 0)]


def test_the_book_now_fences_in_reading_order_and_chapter_digests(tmp_path: Path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/two\nchapters:\n  - file: book/one\n")
    cell = "```{{code-cell}} ipython3\n:tags: [fence]\n:fence-id: {}\n# Proves: {}\nassert 1 + 1 == 2\n```\n"
    setup = "\n```{code-cell} ipython3\nx = 1\n```\n"
    one = (HEADER + "# One\n\n## First part\n\n" + cell.format("one-a", "a") + setup
           + "\n## Second part\n\n" + cell.format("one-b", "b"))
    (tmp_path / "book" / "one.md").write_text(one)
    (tmp_path / "book" / "two.md").write_text(HEADER + "# Two\n\n" + cell.format("two-a", "c"))
    found, digests = record.read_book(tmp_path)
    assert [(f.id, f.chapter, f.cell, f.section, f.proves) for f in found] == [
        ("two-a", "book/two.md", 0, "Two", "c"),
        ("one-a", "book/one.md", 0, "First part", "a"),
        ("one-b", "book/one.md", 2, "Second part", "b")]
    assert list(digests) == ["book/two.md", "book/one.md"]
    # a change to a cell that is not a fence changes its chapter's digest, and only that one
    (tmp_path / "book" / "one.md").write_text(one.replace("x = 1", "x = 2"))
    _, after = record.read_book(tmp_path)
    assert after["book/one.md"] != digests["book/one.md"] and after["book/two.md"] == digests["book/two.md"]
    # comments do not count
    (tmp_path / "book" / "one.md").write_text(one.replace("# Proves: a", "# Proves: a, reworded"))
    assert record.read_book(tmp_path)[1] == digests


# --- provenance ---------------------------------------------------------------------------

def test_provenance_names_torch_build_cuda_numpy_python_platform_and_commit():
    import numpy
    import torch

    p = record.provenance(ROOT)
    assert p["torch"] == torch.__version__ and p["numpy"] == numpy.__version__
    assert p["build"] == ("CPU-only" if torch.version.cuda is None else f"CUDA {torch.version.cuda}")
    assert p["torch_git"] == torch.version.git_version
    assert set(p) >= {"cuda", "gpu", "python", "platform", "commit", "dirty"}
    assert p["python"].count(".") == 2 and p["platform"]
    last = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--", *record.BOOK_PATHS],
                          capture_output=True, text=True)
    assert p["commit"] == (last.stdout.strip() if last.returncode == 0 else None)


def test_committing_results_does_not_change_the_books_commit(tmp_path: Path):
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                               *args], check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.md").write_text("a")
    git("add", "book")
    git("commit", "-qm", "book")
    book = git("rev-parse", "HEAD")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text("{}")
    git("add", "results")
    git("commit", "-qm", "results")
    p = record.provenance(tmp_path)
    assert p["commit"] == book and p["dirty"] is False
    (tmp_path / "book" / "a.md").write_text("b")
    assert record.provenance(tmp_path)["dirty"] is True


def test_claim_is_the_whole_proves_comment():
    source = ("import torch\n# Proves: a view shares storage with its base;\n#   writes show through.\n"
              "# Does not prove: anything about copies.\nassert True is not None\n")
    assert record.claim(source) == "a view shares storage with its base; writes show through."
    assert record.claim("# Proves: one line\nx = 1\n# later comment\n") == "one line"
    assert record.claim("# just a comment\nassert 1\n") == "just a comment"


def test_section_titles_are_plain_text():
    assert record.plain("Picking a device: `torch.accelerator`") == "Picking a device: torch.accelerator"
    assert record.plain("The {term}`stride` and **offset**") == "The stride and offset"
    assert record.plain("See {ref}`views <views-label>`") == "See views"


def test_build_kind():
    assert record.build_kind(None) == "CPU-only"
    assert record.build_kind("12.8") == "CUDA 12.8"
    assert record.build_kind(None, "6.4") == "ROCm 6.4"


# --- staleness ---------------------------------------------------------------------------------

CURRENT = [fence("a"), fence("b", cell=1), fence("c", chapter="book/c.md")]


def test_a_results_file_matching_the_book_is_current():
    r = run("2.8.0", [rec("a"), rec("b"), rec("c", chapter="book/c.md")])
    assert record.stale_reasons(r, CURRENT, DIGESTS) == []
    fresh, stale = record.split([r], CURRENT, DIGESTS)
    assert stale == [] and list(fresh[0]["fences"]) == r["fences"] and fresh[0]["stale_chapters"] == []


@pytest.mark.parametrize("recs, chapters, says", [
    ([rec("a"), rec("c", chapter="book/c.md")], {"book/a.md": "old", "book/c.md": "dc"},
     "book/a.md changed since this run (new fences: b)"),
    ([rec("a"), rec("b"), rec("gone"), rec("c", chapter="book/c.md")], {"book/a.md": "old", "book/c.md": "dc"},
     "book/a.md changed since this run (fences gone: gone)"),
    ([rec("a"), rec("b", code="old"), rec("c", chapter="book/c.md")], {"book/a.md": "old", "book/c.md": "dc"},
     "book/a.md changed since this run (fences whose code changed: b)"),
    ([rec("a"), rec("b"), rec("c", chapter="book/c.md")], {"book/a.md": "old", "book/c.md": "dc"},
     "book/a.md changed since this run (cells that are not fences)"),
    ([rec("c", chapter="book/c.md")], {"book/c.md": "dc"}, "book/a.md was not run"),
])
def test_a_changed_chapter_is_stale_and_only_its_records_are_dropped(recs, chapters, says):
    r = run("2.8.0", recs, chapters=chapters)
    why = record.stale_reasons(r, CURRENT, DIGESTS)
    assert why == [says], why
    (part,), ((stale, _),) = record.split([r], CURRENT, DIGESTS)
    assert stale is r
    assert [x["id"] for x in part["fences"]] == ["c"] and part["stale_chapters"] == ["book/a.md"]


def test_a_file_from_before_fence_ids_is_stale_throughout():
    old = run("2.8.0", [{"chapter": "book/a.md", "fence": "Cell 0 (line 3)", "outcome": "passed"}])
    del old["chapters"]
    assert record.stale_reasons(old, CURRENT, DIGESTS) == [
        "written before fences had ids and chapters a digest; the book has 3 fences"]
    fresh, stale = record.split([old], CURRENT, DIGESTS)
    assert fresh == [] and len(stale) == 1


def test_chapters_no_longer_in_the_book_are_reported():
    r = run("2.8.0", [rec("a"), rec("b"), rec("c", chapter="book/c.md"), rec("x", chapter="book/x.md")],
            chapters={**DIGESTS, "book/x.md": "dx"})
    assert record.stale_reasons(r, CURRENT, DIGESTS) == ["chapters no longer in the book: book/x.md"]
    (part,), _ = record.split([r], CURRENT, DIGESTS)
    assert [x["id"] for x in part["fences"]] == ["a", "b", "c"]


def test_load_orders_releases_by_version_cpu_build_first(tmp_path: Path):
    for name, build in (("2.15.0", "CUDA 13.0"), ("2.8.0", "CUDA 12.8"), ("2.13.0+cpu", "CPU-only"),
                        ("2.13.0", "CUDA 12.8"), ("2.10.0", "CUDA 12.8")):
        (tmp_path / f"{name}.json").write_text(json.dumps(run(name, [], build=build)))
    known = ["2.8.0", "2.10.0", "2.13.0+cpu", "2.13.0", "2.15.0"]
    assert [record.label(r) for r in record.load(tmp_path, known)] == [
        "2.8.0", "2.10.0", "2.13.0+cpu", "2.13.0", "2.15.0"]



@pytest.mark.parametrize("text, problem", [
    ('{"release": "2.8.0", "fences": [', "not valid JSON"),   # truncated
    ("", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"release": "2.8.0"}', "no fences"),
])
def test_a_results_file_that_does_not_parse_is_named_with_how_to_regenerate_it(
        tmp_path: Path, text, problem):
    (tmp_path / "2.10.0.json").write_text(json.dumps(run("2.10.0", [])))
    (tmp_path / "2.8.0.json").write_text(text)
    with pytest.raises(record.BadFile) as caught:
        record.load(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "2.8.0.json") in message and problem in message, message
    assert "make matrix RELEASES=2.8.0" in message, message


def test_a_mutation_file_that_does_not_parse_is_named_never_re_run_silently(tmp_path: Path):
    from fencecheck import mutation

    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    path = tmp_path / mutation.RESULTS_NAME
    assert mutation.load(tmp_path) is None and mutate.stored(path) == {}  # none yet
    path.write_text('{"chapters": [], "fences": [{"chapter": "book/a.md", "fen')
    for read in (lambda: mutation.load(tmp_path), lambda: mutate.stored(path)):
        with pytest.raises(record.BadFile, match="not valid JSON") as caught:
            read()
        assert str(path) in str(caught.value) and "make mutate MUTATE_ARGS=--fresh" in str(
            caught.value)
    # the tool stops before running anything: exit 2, the file named, nothing rewritten
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "mutate.py"),
                           str(ROOT / "tests" / "corpus" / "mutate_strong.md"), "--json", str(path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and str(path) in proc.stderr, proc.stdout + proc.stderr
    assert "mutants of" not in proc.stdout and path.read_text().endswith('"fen')


# --- what differs, and the badge -----------------------------------------------------------

def test_counts_are_fences_only():
    r = run("2.8.0", [rec("a"), rec("b", "skipped"), rec("c", "failed")],
            errors=[{"chapter": "book/a.md", "item": "Cell 3 (line 9)", "reason": "boom"}])
    assert record.counts(r) == {"passed": 1, "failed": 1, "skipped": 1, "errors": 1}
    assert not record.ok(r)
    assert not record.ok(run("2.8.0", [rec("a")], errors=[{"item": "x"}]))
    assert record.ok(run("2.8.0", [rec("a")]))


def series(values: dict[str, str], label="the accelerator", cpu=("2.13.0+cpu",)):
    return [run(rel, [rec("a", observed={"x": v}, labels={"x": label} if label else {})],
                build="CPU-only" if rel in cpu else "CUDA 12.8") for rel, v in values.items()]


def test_badge_holds_names_the_first_and_last_release():
    runs = [run(r, [rec("a")]) for r in ("2.8.0", "2.9.1", "2.15.0")]
    b = record.badge("a", runs)
    assert (b.kind, b.text) == ("holds", "holds on 2.8.0 – 2.15.0")
    assert record.badge("a", runs[:1]).text == "holds on 2.8.0"


def test_badge_changed_names_the_release_and_both_values():
    runs = series({"2.8.0": "1", "2.9.1": "1", "2.11.0": "2", "2.15.0": "2"}, cpu=())
    b = record.badge("a", runs)
    assert (b.kind, b.text) == ("changed", "the accelerator: changed in 2.11.0: 1 → 2")
    assert "the accelerator: changed in 2.11.0" in b.title


def test_a_records_comment_describes_a_change_and_keeps_the_code_hash():
    """``# Records: name: words`` gives a recorded value its words where it changes, in
    the badge and the changes list; being a comment, it leaves the fence's code hash (and
    so the record) as it was."""
    source = 'x = fences.observe("thing", f())\nassert x\n'
    worded = "# Records: thing: what f returns\n" + source
    assert record.code_hash(worded) == record.code_hash(source)
    assert lint.described(worded) == {"thing": "what f returns"}
    runs = [run(r, [rec("a", observed={"thing": v})]) for r, v in (("2.8.0", "1"), ("2.11.0", "2"))]
    b = record.badge("a", runs, lint.described(worded))
    assert "what f returns: changed in 2.11.0: 1 → 2" in b.title
    current = [record.Fence("a", "book/a.md", 0, "c0", "S", "claim", lint.described(worded))]
    assert [c.label for c in record.changes(runs, current)] == ["what f returns"]
    assert [c.label for c in record.changes(runs, [fence("a")])] == [""]


def test_records_words_continue_on_indented_comment_lines_only():
    source = "# Records: a: x\n#   y\n# Records: b: z\n# plain\nf()\n"
    assert lint.described(source) == {"a": "x y", "b": "z"}


def test_the_books_words_win_over_a_recorded_label_everywhere(tmp_path: Path):
    """The fence's # Records: words win over a label= the runs recorded: in the changes,
    the badge, and the change report; read_book reads them off the chapter."""
    runs = [run(r, [rec("a", observed={"thing": v}, labels={"thing": "old words"})])
            for r, v in (("2.8.0", "1"), ("2.11.0", "2"))]
    current = [Fence("a", "book/a.md", 0, "c0", "S", "claim", {"thing": "new words"})]
    assert [c.label for c in record.changes(runs, current)] == ["new words"]
    assert "new words: changed in 2.11.0" in record.badge("a", runs, current[0].labels).title
    before = [run("2.11.0", [rec("a", observed={"thing": "1"}, labels={"thing": "old words"})])]
    md = record.change_report(before, runs[1:], runs, current, {"book/a.md": "da"})
    assert "| 2.11.0 | `a` (book/a.md) | new words | 1 | 2 |" in md, md
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/a\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.md").write_text(HEADER + """
```{code-cell} ipython3
:tags: [fence]
:fence-id: a
# Proves: something.
# Records: thing: new words,
#   on two lines
x = fences.observe("thing", 1)
assert x == 1
```
""")
    (fence_now,), _ = record.read_book(tmp_path)
    assert fence_now.labels == {"thing": "new words, on two lines"}


def test_badge_by_build():
    runs = series({"2.8.0": "cuda", "2.13.0+cpu": "None", "2.15.0": "cuda"})
    b = record.badge("a", runs)
    assert (b.kind, b.text) == ("changed", "the accelerator: seen only on the CPU-only build "
                                "2.13.0+cpu: None; CUDA builds with no GPU: cuda")


def test_a_change_first_seen_on_a_local_build_names_the_release():
    runs = series({"2.12.1": "1", "2.13.0+cpu": "2", "2.14.1": "2"}, cpu=())
    assert record.badge("a", runs).text == \
        "the accelerator: changed in 2.13.0 (first recorded on its cpu build): 1 → 2"


def test_a_value_that_comes_and_goes_varies():
    runs = series({"2.8.0": "1", "2.9.1": "2", "2.10.0": "1"}, cpu=())
    (change,) = record.fence_changes("a", runs)
    assert change.kind == "varies"
    assert change.text() == "varies: 1 from 2.8.0, 2 from 2.9.1, 1 from 2.10.0"


def test_badge_not_yet_run_on_a_gpu():
    why = "needs a CUDA GPU; torch.cuda.is_available() is False (torch 2.8.0)"
    runs = [run(r, [rec("a", "skipped", reason=why)]) for r in ("2.8.0", "2.9.1")]
    assert record.badge("a", runs).text == "not yet run on a GPU"
    mixed = runs + [run("2.15.0", [rec("a")])]
    b = record.badge("a", mixed)
    assert (b.kind, b.text) == ("gpu", "CPU part holds on 2.15.0; GPU part not yet run")


def test_a_long_change_is_shown_whole():
    old, new = "RuntimeError: " + "x" * 60, "NotImplementedError: " + "y" * 60
    runs = series({"2.8.0": old, "2.15.0": new}, cpu=())
    assert record.badge("a", runs).text == f"the accelerator: changed in 2.15.0: {old} → {new}"


def test_page_summary_counts_only_the_news():
    runs = [run(r, [rec("a"), rec("b")]) for r in ("2.8.0", "2.15.0")]
    assert record.page_summary(["a", "b"], runs) == \
        "All 2 fences on this page hold on 2.8.0 – 2.15.0."
    assert record.page_summary(["a", "b", "new"], runs) == (
        "2 of the 3 fences on this page hold on 2.8.0 – 2.15.0; "
        "1 is checked on this build only, not yet on every release (each is marked).")
    assert record.page_summary([], runs) == ""


def test_badge_fails_and_not_yet_in_the_record():
    runs = [run("2.8.0", [rec("a")]), run("2.9.1", [rec("a", "failed", reason="AssertionError: x")])]
    b = record.badge("a", runs)
    assert (b.kind, b.text, b.title) == ("fails", "fails on 2.9.1", "AssertionError: x")
    assert record.badge("new", runs) == record.Badge(
        "none", "checked on this build only", "no current results file holds this fence: run `make matrix`")


def test_never_run_anywhere():
    current = [fence("a"), fence("gpu", cell=1), fence("new", cell=2)]
    runs = [run("2.8.0", [rec("a"), rec("gpu", "skipped", reason="needs a CUDA GPU")])]
    assert [(f.id, why) for f, why in record.never_run(runs, current)] == [
        ("gpu", "needs a CUDA GPU"), ("new", "in no results file")]


# --- the change report ------------------------------------------------------------------------

def test_change_report_on_two_results_files():
    current = [fence("a"), fence("b", cell=1), fence("c", cell=2), fence("gpu", cell=3), fence("d", cell=4)]
    before = [run("2.15.0", [rec("a", observed={"acc": "None"}, labels={"acc": "the accelerator"}),
                             rec("b", "failed", reason="AssertionError: old"), rec("c"),
                             rec("gpu", "skipped", reason="needs a CUDA GPU")])]
    after = [run("2.15.0", [rec("a", observed={"acc": "cuda"}, labels={"acc": "the accelerator"}),
                            rec("b"), rec("c", "failed", reason="AssertionError: new"),
                            rec("gpu", "skipped", reason="needs a CUDA GPU"), rec("d")],
                 errors=[{"chapter": "book/a.md", "item": "Cell 7 (line 80)", "reason": "NameError: y"}])]
    md = record.change_report(before, after, after, current, {"book/a.md": "da"})
    assert md.startswith("# Release matrix: what changed")
    assert "| 2.15.0 ❌ | 2.15.0 | CUDA 12.8 | 3 | 1 | 1 | 1 | passed +1, errors +1 |" in md
    assert "## New failures (1)\n\n- `c` (book/a.md) on 2.15.0: AssertionError: new" in md
    assert "| 2.15.0 | `a` (book/a.md) | the accelerator | None | cuda |" in md
    assert "## Fixed (failed before) (1)\n\n- `b` (book/a.md) on 2.15.0: now passed" in md
    assert "- book/a.md Cell 7 (line 80) on 2.15.0: NameError: y" in md
    assert "## Fences new to the record (in no earlier results file) (1)\n\n- `d` (book/a.md)" in md
    assert "## Fences never run anywhere (1)\n\n- `gpu` (book/a.md): needs a CUDA GPU" in md


def test_change_report_names_a_behaviour_a_new_release_changed():
    current = [fence("a")]
    acc = {"acc": "the accelerator"}
    before = [run("2.14.1", [rec("a", observed={"acc": "None"}, labels=acc)], chapters={"book/a.md": "da"})]
    new = run("2.16.0", [rec("a", observed={"acc": "cuda"}, labels=acc)], chapters={"book/a.md": "da"})
    md = record.change_report(before, [new], before + [new], current, {"book/a.md": "da"})
    assert "## Behaviours that now differ between releases or builds (1)\n\n" \
        "- the accelerator: changed in 2.16.0: None → cuda (`a` (book/a.md))" in md


def test_change_report_calls_out_stale_files_and_new_releases():
    current = [fence("a")]
    old = run("2.8.0", [rec("a", code="before-edit")], chapters={"book/a.md": "before-edit"})
    new = run("2.9.1", [rec("a")], chapters={"book/a.md": "da"})
    md = record.change_report([], [new], [old, new], current, {"book/a.md": "da"})
    assert "| 2.9.1 | 2.9.1 | CUDA 12.8 | 1 | 0 | 0 | 0 | new release |" in md
    assert "## Stale results files (what they hold of these chapters is not shown as current) (1)\n\n" \
        "- 2.8.0: book/a.md changed since this run (fences whose code changed: a)" in md
    assert "## New failures" not in md  # empty sections are left out


def test_change_report_says_when_nothing_changed():
    current = [fence("a")]
    same = [run("2.8.0", [rec("a")], chapters={"book/a.md": "da"})]
    md = record.change_report(same, same, same, current, {"book/a.md": "da"})
    assert md.rstrip().endswith("Nothing changed: no new failure, no changed value, every fence ran somewhere.")


# --- the matrix runner -------------------------------------------------------------------------

def test_every_minor_release_and_newest_resolved_once():
    names = [r.name for r in matrix.resolve([], newest=lambda: "2.15.0")]
    assert names == ["2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0+cpu", "2.14.1", "2.15.0"]
    newer = matrix.resolve(["2.8.0", "newest"], newest=lambda: "2.16.0")
    assert [(r.name, r.requirement) for r in newer] == [("2.8.0", "torch==2.8.0"), ("2.16.0", "torch==2.16.0")]
    with pytest.raises(SystemExit, match="unknown release"):
        matrix.resolve(["1.0"])


def test_make_matrix_checks_its_arguments_before_installing_anything(tmp_path: Path):
    """``make matrix RELEASES=bogus``: refused by ``matrix.py --check`` before any environment
    is made or anything runs. Every call of the venv's python is logged by a stand-in; the
    venv's stamp is out of the way (STAMP=)."""
    log = tmp_path / "calls"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    proc = subprocess.run(["make", "-C", str(ROOT), "matrix", "RELEASES=2.8.0 bogus", "STAMP=",
                           f"BIN={fake.parent}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "unknown release 'bogus'" in proc.stderr, proc.stderr
    calls = log.read_text().splitlines()
    assert calls == ["tools/matrix.py --check 2.8.0 bogus"], calls   # no nox, no run
    assert matrix.main(["--check", "2.8.0", "newest"]) == 0


def test_newest_unreachable_fails_the_run_but_not_the_other_releases():
    def offline():
        raise OSError("no route to host")

    problems: list[str] = []
    assert [r.name for r in matrix.resolve(["2.8.0", "newest"], offline, problems)] == ["2.8.0"]
    assert problems == [f"newest: could not read the newest torch from {matrix.PYPI_JSON}: no route to host"]
    with pytest.raises(OSError):
        matrix.resolve(["newest"], offline)


def test_committed_results_are_read_from_git_head(tmp_path: Path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "2.8.0.json").write_text(json.dumps(run("2.8.0", [rec("a")])))
    git("add", "results")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results")
    (tmp_path / "results" / "2.8.0.json").write_text(json.dumps(run("2.8.0", [rec("a", "failed")])))
    (committed,) = matrix.committed_results(tmp_path)
    assert committed["fences"][0]["outcome"] == "passed" and committed["file"] == "2.8.0.json"
    assert matrix.committed_results(tmp_path / "results" / "nowhere") is None


def test_uv_gets_pips_find_links_and_not_its_cap():
    import noxfile

    pip = {"PIP_FIND_LINKS": "/opt/wheels https://example.org/torch/", "PIP_CONSTRAINT": "/etc/cap.txt"}
    (call,) = noxfile.install_args("2.8.0", environ=pip)
    assert call[:4] == ["--find-links", "/opt/wheels", "--find-links", "https://example.org/torch/"]
    assert not any("cap.txt" in arg or "constraint" in arg for arg in call)   # pip's cap stays pip's
    assert noxfile.find_links("https://own/", {"UV_FIND_LINKS": "/w", **pip}) == []   # uv reads its own


def test_each_release_environment_pins_its_torch_exactly():
    """A release's one requirement on torch is ``torch==`` its name (the test extra's
    ``torch>=2.8`` is left to it); newest's, the one left open, shows the check tells them apart."""
    import noxfile

    def torches(name: str) -> list[str]:
        return [arg for call in noxfile.install_args(name, environ={}) for arg in call if arg.startswith("torch")]

    for name in releases.names():
        assert torches(name) == [f"torch=={name}"], name
    assert "torch" in torches("newest") and not any("==" in arg for arg in torches("newest"))
    assert noxfile.SUITE[1:] == [str(ROOT / "pyproject.toml"), "--extra", "test"]


def test_the_whole_matrix_prunes_the_environments_nox_no_longer_has(tmp_path: Path, monkeypatch):
    import noxfile

    monkeypatch.setattr(noxfile, "ENVS", tmp_path / "nox")
    monkeypatch.setattr(noxfile, "UV_CACHE", tmp_path / "uv")
    for folder, session in (("torch-2-8-0", "2.8.0"), ("torch-2-7-1", "2.7.1"), ("other", "")):
        (tmp_path / "nox" / folder).mkdir(parents=True)
        if session:
            (tmp_path / "nox" / folder / noxfile.MARKER).write_text(session)
    matrix.environments(prune=False)   # some releases ran: nothing goes
    assert len(list((tmp_path / "nox").iterdir())) == 3
    matrix.environments(prune=True)
    assert sorted(p.name for p in (tmp_path / "nox").iterdir()) == ["other", "torch-2-8-0"]


# --- observe ------------------------------------------------------------------------------------

def test_observe_with_and_without_a_label_round_trips(capsys):
    fences.observe("devices.acc", "device(type='cuda')", label="the accelerator torch reports")
    fences.observe("dtypes.count", 23)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == \
        "[observed] the accelerator torch reports (devices.acc) = device(type='cuda')"
    assert fences.parse_observed(out) == (
        {"devices.acc": "device(type='cuda')", "dtypes.count": "23"},
        {"devices.acc": "the accelerator torch reports"})
    with pytest.raises(ValueError, match="must be letters"):
        fences.observe("has space", 1)


def test_the_cpu_build_names_where_its_wheel_is():
    import noxfile

    cpu = next(r for r in matrix.RELEASES if r.name.endswith("+cpu"))
    assert cpu.requirement == f"torch=={releases.REFERENCE}+cpu"   # the reference's CPU build
    page = ["--find-links", "https://download.pytorch.org/whl/cpu/torch/"]
    assert noxfile.install_args(cpu.name, environ={})[0][:2] == page
    assert all(noxfile.install_args(r.name, environ={})[0][0] == r.requirement   # PyPI's builds
               for r in matrix.RELEASES if r is not cpu)


def test_the_record_names_a_commit_that_touched_either_package():
    """A run's outcome depends on the runtime and the verifier: both are in BOOK_PATHS, as is
    every package pyproject.toml installs."""
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    packages = {name.split(".")[0] for name in include["find"]["include"]}
    assert packages == {"fences", "fencecheck"} and packages <= set(record.BOOK_PATHS)


# --- the errors page: each fence's messages, from the record ---

def test_raises_records_the_whole_message_under_the_plugin(monkeypatch, capsys):
    monkeypatch.setenv(fences.RECORD_ENV, "1")
    with fences.raises(ValueError, "first"):
        raise ValueError("first line\nsecond line")
    out = capsys.readouterr().out
    assert fences.parse_raised(out) == [{"class": "ValueError", "message": "first line\nsecond line"}]
    repeated = out * 3 + out.replace("first line", "other")
    assert len(fences.parse_raised(repeated)) == 2        # each distinct message once


def test_raising_calls_are_the_bodies_of_the_raise_blocks():
    src = "x = 1\nwith fences.raises(E, 'abc'):\n    f(x)\nwith fences.warns(W, 'abc') as w:\n    g()\n" \
          "with fences.raises(E, 'abc'):\n    f(x)\nwith open('f') as h:\n    h.read()"
    assert record.raising_calls(src) == ("f(x)", "g()")
    assert lint.fix("# Fix: cast it,\n#   then retry.\nassert 1") == "cast it, then retry."


def test_the_errors_page_quotes_the_reference_run_and_names_other_words():
    a = {**rec("a-raise"), "raised": [{"class": "RuntimeError", "message": "new words"}]}
    old = {**rec("a-raise"), "raised": [{"class": "RuntimeError", "message": "old words"}]}
    quiet = rec("b-quiet")
    runs = [run("2.8.0", [old, quiet]), run("2.13.0+cpu", [a, quiet], torch="2.13.0+cpu")]
    current = [fence("a-raise"), fence("b-quiet")]
    found = record.errors(runs, current, "2.13.0+cpu")
    assert [(r.fence.id, r.kind, r.message) for r in found] == [("a-raise", "RuntimeError", "new words")]
    assert found[0].elsewhere == {"2.8.0 (CUDA 12.8 build)": ("RuntimeError", "old words")}
    from fencecheck import verified

    ((title, html),) = verified.errors_sections(found, lambda c: "a.html", "2.13.0+cpu", {"book/a.md": "Chapter A"})
    assert title == "Chapter A" and "RuntimeError: new words" in html
    assert "2.8.0 (CUDA 12.8 build): <code>RuntimeError: old words</code>" in html
    assert 'href="a.html#fence-a-raise"' in html


def test_the_errors_page_lists_a_message_once_with_each_fence_that_proves_it():
    """The same message from two fences, and one fence's message with other numbers: one
    entry each, every place and every wording listed, every wording an index entry; a
    call a reader does not make (a dispatch table's) is not shown; a fix's `code` is code."""
    from fencecheck import verified

    one = record.Fence("a-one", "book/a.md", 0, "c0", "One", "claim one", calls=("x.view(-1)",),
                       fix="use `x.reshape(-1)`")
    two = record.Fence("b-two", "book/b.md", 0, "c1", "Two", "claim two", calls=("CALLS[name]()", "call()"))
    sizes = [record.Raised(two, "RuntimeError", f"size of a ({n}) must match b ({n + 1})", {}) for n in (3, 4)]
    found = [record.Raised(one, "RuntimeError", "view size", {}), record.Raised(two, "RuntimeError", "view size", {}),
             *sizes]
    entries = verified.error_entries(found)
    assert [(a, [r.fence.id for r in g]) for a, g in entries] == [
        ("message-a-one-1", ["a-one", "b-two"]), ("message-b-two-2", ["b-two", "b-two"])]
    assert verified.error_anchors(found)[1] == ("message-b-two-2", [
        "RuntimeError: size of a (3) must match b (4)", "RuntimeError: size of a (4) must match b (5)"])
    sections = verified.errors_sections(found, lambda c: c, "2.13", {})
    assert [t for t, _ in sections] == ["a", "b"]      # a section per chapter, in reading order
    html = "".join(h for _, h in sections)
    assert html.count('class="tf-error"') == 2 and html.count("#fence-b-two") == 2
    assert "<li><code>RuntimeError: size of a (4) must match b (5)</code></li>" in html
    assert "<pre>x.view(-1)</pre>" in html and "CALLS" not in html and "call()" not in html
    assert "The fix: use <code>x.reshape(-1)</code>" in html


def test_other_words_are_paired_by_alignment_not_by_position():
    """A release that raises one message more (2.8.0's float8 refusal) shifts no pair; a
    warning's "(Triggered internally at …)" location is not other words."""
    said = ["a", "b", "c"]
    ref = {**rec("f"), "raised": [{"class": "E", "message": m} for m in said]
           + [{"class": "UserWarning", "message": "w (Triggered internally at x.cpp:203.)"}]}
    extra = {**rec("f"), "raised": [{"class": "E", "message": m} for m in ("a", "new", "b", "C")]
             + [{"class": "UserWarning", "message": "w (Triggered internally at x.cpp:206.)"}]}
    runs = [run("2.8.0", [extra]), run("2.13.0+cpu", [ref], build="CPU-only", torch="2.13.0+cpu")]
    found = record.errors(runs, [fence("f")], "2.13.0+cpu")
    assert [r.message for r in found] == ["a", "b", "c", "w (Triggered internally at x.cpp:203.)"]
    assert [r.elsewhere for r in found] == [{}, {}, {"2.8.0 (CUDA 12.8 build)": ("E", "C")}, {}]


def test_a_build_difference_is_claimed_only_where_a_release_ran_in_both_builds():
    """Both builds of 2.13.0 recorded, disagreeing: "build". Only the CPU build of 2.13.0
    beside CUDA builds of other releases: the record cannot tell build from release."""
    cpu = run("2.13.0+cpu", [rec("a", observed={"v": "1"})], build="CPU-only", torch="2.13.0+cpu")
    cuda = run("2.13.0", [rec("a", observed={"v": "2"})])
    other = run("2.14.1", [rec("a", observed={"v": "2"})])
    both = record.fence_changes("a", [cpu, cuda, other])
    assert [c.kind for c in both] == ["build"]
    lone = record.fence_changes("a", [cpu, other])
    assert [c.kind for c in lone] == ["one-build"]
    assert lone[0].text() == "seen only on the CPU-only build 2.13.0+cpu: 1; CUDA builds with no GPU: 2"
    on_a_gpu = record.fence_changes("a", [cpu, {**other, "gpu": "NVIDIA H100"}])   # a GPU's value
    assert on_a_gpu[0].text() == "seen only on the CPU-only build 2.13.0+cpu: 1; CUDA builds: 2"


def test_a_value_reads_in_words():
    assert record.words("{'float16': 1.0, 'bfloat16': 1.0}") == "float16: 1.0; bfloat16: 1.0"
    assert record.words("(1, 12, 4)") == "1, 12, 4" and record.words("RuntimeError") == "RuntimeError"


def test_words_reads_a_dict_whose_strings_hold_inf_and_one_with_bare_nan():
    assert record.words("{'a inf b': 'refused', 'c': 'wrote 1'}") == "a inf b: refused; c: wrote 1"
    assert record.words("{'x': nan}") == "x: nan"


def test_by_id_is_built_once_per_fence_list_and_again_when_the_list_changes():
    """The site asks by_id for every fence of every run: it indexes a list once, and
    never answers from an index of a list that has since changed."""
    from fencecheck.record import by_id

    a, b = {"id": "a", "outcome": "passed"}, {"id": "b", "outcome": "passed"}
    run = {"fences": [a, b]}
    first = by_id(run)
    assert first == {"a": a, "b": b} and by_id(run) is first   # the same index, not a new one
    assert by_id(dict(run)) is first        # a copy of the run holds the same list
    run["fences"].append({"id": "c", "outcome": "failed"})
    assert set(by_id(run)) == {"a", "b", "c"}                   # grown
    c2 = {"id": "c2", "outcome": "skipped"}
    run["fences"][2] = c2
    assert set(by_id(run)) == {"a", "b", "c2"} and by_id(run)["c2"] is c2   # one replaced
    run["fences"].reverse()
    assert list(by_id(run)) == ["c2", "b", "a"]                 # reordered
    run["fences"] = [b]
    assert by_id(run) == {"b": b}                               # another list
    assert by_id({}) == {} and by_id({"fences": []}) == {}
    loaded = {"fences": (a, b)}            # load's runs hold tuples, which cannot change
    assert by_id(loaded) == {"a": a, "b": b} and by_id(loaded) is by_id(loaded)
