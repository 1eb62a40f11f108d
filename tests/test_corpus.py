"""The must-fail corpus: chapters that must fail, each for its stated reason.

The chapters in tests/corpus/ are copied into a fresh book folder and run
by pytest in a subprocess, with this project's plugin, exactly as
`make test` runs book/. A `fail_*` chapter must fail with its reason in the
record the plugin writes for it; its `pass_*` twin must pass. This proves
the suite can fail.

All outcome cases run in one subprocess (a fresh kernel per chapter, as
in `make test`). fail_dead_kernel must fail at once, its cell named, not on
the timeout. The cases that
stop the whole suite (_toc.yml problems) each get their own in-process run.

The subprocess runs are proofs about the tooling: under an unchanged key their
recorded outcome is read back (tests/conftest.py: ``proven``).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fencecheck import chapter, lint

CORPUS = Path(__file__).parent / "corpus"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Seconds per cell in the corpus runs: fail_hangs must hit it; a cold torch import on a
# loaded 2-core machine takes over 5.
TIMEOUT = 20

PYPROJECT = f"""[tool.pytest.ini_options]
addopts = "--nbval-current-env --nbval-cell-timeout={TIMEOUT} -p no:cacheprovider -p no:xdist -p no:hypothesispytest"
"""

# failing chapter -> (its passing twin, text the failure must show)
CASES = {
    "fail_assert": ("pass_assert", "AssertionError: zeros are not ones"),
    "fail_raises": ("pass_raises", "expected RuntimeError matching 'must match the size', nothing was raised"),
    "fail_raises_subclass": ("pass_raises", "NotImplementedError was raised, a subclass of "
                             "RuntimeError: name NotImplementedError itself"),
    "fail_leaks": ("pass_restores", "default dtype (torch.get_default_dtype): was torch.float32, now torch.float64"
                   "\n    changed by: book/fail_leaks.md:14\n"),
    "fail_matmul_leak": ("pass_matmul_restores",
                         "float32 matmul precision (torch.get_float32_matmul_precision): was highest, "
                         "now medium\n    changed by: book/fail_matmul_leak.md:14\n"
                         "    fix: read it first, `old = torch.get_float32_matmul_precision()`, "
                         "and restore it in `finally: torch.set_float32_matmul_precision(old)`"),
    "fail_setup_cell": ("pass_assert", "RuntimeError: a setup cell broke"),
    "fail_hangs": ("pass_quick", f"Timeout of {TIMEOUT} seconds exceeded"),
    "fail_tag": ("pass_assert", "tag 'raises-exception'"),
    "fail_dead_kernel": ("pass_quick", "the kernel died (exit code 3) while running this cell"),
    "fail_no_header": ("pass_assert", "book/fail_no_header.md: no jupytext header"),
    "fail_fence_in_admonition": ("pass_assert", "a code cell inside the :::{note} block of line"),
    # issue 53's plants
    "fail_raises_any": ("pass_raises", "message pattern 'must match the size|\\\\w' also matches "
                        "'division by zero', the message of an unrelated error"),
    "fail_forall_few": ("pass_quick", "forall(..., examples=1): a universal claim draws at least 20"),
    "fail_front_matter_yaml": ("pass_assert", "fail_front_matter_yaml.md: line 10, column 24: the "
                               "front matter is not valid YAML"),
    "fail_syntax_error": ("pass_assert", "line 14 (fence corpus-syntax-error): SyntaxError: '(' was "
                          "never closed (at line 19): x = torch.ones(2"),
    "fail_cyrillic_id": ("pass_assert", "(U+0435 CYRILLIC SMALL LETTER IE) at position 16"),
    "fail_network": ("pass_quick", "the network is refused while the book's fences run"),
    "fail_open_solution": ("pass_assert", "line 19: {solution-start} corpus-ex-add without "
                           "`:class: dropdown`"),
    "fail_prose_number": ("pass_prose_number", "book/fail_prose_number.md: line 31: the number 65,519 "
                          "is in no code cell's code or output within 3 cells of it"),
    "fail_quiz_key": ("pass_quiz", "quiz: 0 of the choices ['(12, 4, 1)', '(4, 12, 1)'] equal the key (1, 12, 4)"),
}


def test_every_failing_corpus_chapter_has_its_case():
    """A fail_*.md left out of CASES would never be run for its reason."""
    assert {p.stem for p in CORPUS.glob("fail_*.md")} == set(CASES)


def lay_out(tmp_path: Path, chapters, toc: str | None = None) -> Path:
    """A book of corpus chapters in tmp_path, with this project's plugin enabled and the
    book's MyST extensions (its ``parse:`` block), so the suite reads them as the book."""
    import yaml

    parse = yaml.safe_load((CORPUS.parents[1] / "_config.yml").read_text())["parse"]
    (tmp_path / "_config.yml").write_text(yaml.safe_dump({"parse": parse}))
    book = tmp_path / "book"
    book.mkdir()
    for name in chapters:
        shutil.copy(CORPUS / f"{name}.md", book / f"{name}.md")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["fencecheck.pytest_plugin"]\n')
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    if toc is not None:
        (tmp_path / "_toc.yml").write_text(toc)
    return tmp_path


def run_suite(root: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "book", *args],
                          cwd=root, capture_output=True, text=True, timeout=1500)
    return proc.returncode, ANSI.sub("", proc.stdout + proc.stderr)


# Passing chapters that are no twin: a gated fence, a seed left set (no leak).
EXTRA = {"pass_needs", "pass_seeds"}


@pytest.fixture(scope="module")
def corpus_run(proven, tmp_path_factory):
    """Every corpus chapter in one suite run: (exit code, output, records by chapter).

    A chapter's records are its fences and, with ``"outcome": "failed"``, the
    other items that failed in it (the results file's ``errors``).
    """
    def run():
        root = tmp_path_factory.mktemp("corpus")
        names = sorted({n for case in CASES.items() for n in (case[0], case[1][0])} | EXTRA)
        lay_out(root, names)
        results = root / "results.json"
        code, out = run_suite(root, "--fences-results", str(results), "--continue-on-collection-errors")
        record = json.loads(results.read_text())
        by_chapter: dict[str, list[dict]] = {name: [] for name in names}
        for rec in record["fences"]:
            by_chapter[Path(rec["chapter"]).stem].append(rec)
        for err in record["errors"]:
            by_chapter.setdefault(Path(err["chapter"]).stem, []).append(
                {**err, "outcome": "failed", "error": True})
        return code, out, by_chapter

    return proven("corpus-chapters", run)


def test_the_corpus_run_fails(corpus_run):
    code, out, _ = corpus_run
    assert code == 1, out


@pytest.mark.parametrize("failing", CASES)
def test_must_fail_chapter_fails_for_its_reason(corpus_run, failing):
    _, out, by_chapter = corpus_run
    reason = CASES[failing][1]
    failed = [r for r in by_chapter.get(failing, []) if r["outcome"] == "failed"]
    assert failed, f"{failing}.md did not fail:\n{out}"
    assert any(reason in r["details"] for r in failed), (
        f"{failing}.md failed, but not for its reason {reason!r}: {failed}")
    assert f"book/{failing}.md" in out, f"the failure does not name the chapter:\n{out}"


def twin_problems(records: list[dict]) -> list[str]:
    """Why a must-pass twin's records do not show it passing: it must have run at least
    one fence (a twin with none would pass by running nothing), and everything in it
    passed."""
    fences = [r for r in records if not r.get("error")]
    problems = [] if fences else ["ran no fence"]
    return problems + [f"{r.get('id') or r.get('item')}: {r['outcome']}" for r in records
                       if r["outcome"] != "passed"]


@pytest.mark.parametrize("failing", CASES)
def test_must_pass_twin_passes(corpus_run, failing):
    _, out, by_chapter = corpus_run
    twin = CASES[failing][0]
    records = by_chapter.get(twin, [])
    assert twin_problems(records) == [], (twin, records)


def test_a_twin_that_runs_no_fence_does_not_pass():
    """The check above is not vacuous: no records, or only a failed non-fence cell, fail it."""
    passed = {"id": "corpus-quick", "outcome": "passed"}
    assert twin_problems([passed]) == []
    assert twin_problems([]) == ["ran no fence"]
    assert twin_problems([{"item": "Cell 0", "outcome": "failed", "error": True}]) == [
        "ran no fence", "Cell 0: failed"]
    assert twin_problems([passed, {"id": "x", "outcome": "skipped"}]) == ["x: skipped"]


def test_every_twin_has_a_fence():
    """Each must-pass twin, as written, holds a fence (read without running it)."""
    for twin in {case[0] for case in CASES.values()}:
        nb = chapter.parse((CORPUS / f"{twin}.md").read_text(encoding="utf-8"), CORPUS / f"{twin}.md")
        assert any(lint.is_fence(c) for c in nb.cells), f"{twin}.md has no fence"


def test_a_chapter_may_leave_the_generator_seeded(corpus_run):
    """Seeding torch's generator is no leak: the state guard passes pass_seeds."""
    records = corpus_run[2]["pass_seeds"]
    assert records and all(r["outcome"] == "passed" for r in records), records


def test_a_failing_cell_that_is_no_fence_fails_the_run_but_is_not_a_fence(corpus_run):
    records = corpus_run[2]["fail_setup_cell"]
    fences = [r for r in records if not r.get("error")]
    errors = [r for r in records if r.get("error")]
    assert [(f["id"], f["outcome"]) for f in fences] == [("corpus-after-setup", "passed")], records
    assert [e["item"] for e in errors] == ["Cell 0 (line 14)"], errors


def test_records_hold_fences_keyed_by_id_in_chapter_order(corpus_run):
    records = [r for r in corpus_run[2]["pass_matmul_restores"] if not r.get("error")]
    assert [r["id"] for r in records] == ["corpus-matmul-restored"]
    rec = records[0]
    assert rec["proves"].startswith("the chapter starts at the default precision")
    assert len(rec["code"]) == 12 and rec["cell"] == 0


def test_device_gated_fence_is_reported_with_its_outcome(corpus_run):
    import fences

    _, _, by_chapter = corpus_run
    gated = [r for r in by_chapter["pass_needs"] if r.get("id") == "corpus-needs-cuda"]
    assert len(gated) == 1, by_chapter["pass_needs"]
    if fences.available("cuda"):
        assert gated[0]["outcome"] == "passed", gated
    else:
        assert gated[0]["outcome"] == "skipped", gated
        assert "needs a CUDA GPU" in gated[0]["reason"], gated


@pytest.mark.parametrize("toc, chapters, message", [
    ("format: jb-book\nroot: book/pass_assert\nchapters:\n  - file: book/fail_no_header\n",
     ["pass_assert", "fail_no_header"],
     "book/fail_no_header.md (listed in _toc.yml): no jupytext header"),
    ("format: jb-book\nroot: book/pass_assert\nchapters:\n  - file: book/missing\n",
     ["pass_assert"], "_toc.yml lists book/missing.md, which does not exist"),
    ("format: jb-book\nroot: book/pass_assert\n",
     ["pass_assert", "pass_quick"], "book/pass_quick.md is not listed in _toc.yml"),
    ("format: jb-book\nroot: book/pass_assert\nchapters:\n  - file: book/pass_quick\n   - file: x\n",
     ["pass_assert", "pass_quick"], "_toc.yml: line 5, column 4: the table of contents is not valid YAML"),
    ("format: jb-book\nroot: book/pass_assert\nchapters:\n  - file: book/fail_front_matter_yaml\n",
     ["pass_assert", "fail_front_matter_yaml"],
     "book/fail_front_matter_yaml.md (listed in _toc.yml): line 10, column 24: the front matter is "
     "not valid YAML"),
], ids=["listed-without-header", "listed-but-missing", "not-listed", "toc-yaml", "front-matter-yaml"])
def test_toc_problems_stop_the_suite(pytester, toc, chapters, message):
    # These stop the session before any kernel starts, so pytest runs in-process (without Hypothesis's
    # plugin, as the book's config: loaded here, it would leave the worker in its "initializing" state,
    # and every later Hypothesis test on that worker warned).
    lay_out(pytester.path, chapters, toc)
    result = pytester.runpytest_inprocess("book", "-p", "no:cacheprovider", "-p", "no:xdist")
    out = ANSI.sub("", result.stdout.str() + result.stderr.str())
    assert result.ret != 0, out
    assert message in out, out
    assert "INTERNALERROR" not in out and "Traceback" not in out, out


@pytest.mark.parametrize("chapter, message", [
    ("fail_no_header", "fail_no_header.md: WARNING: no jupytext header"),
    ("fail_fence_in_admonition", "fail_fence_in_admonition.md: WARNING: line 20: a code cell "
     "inside the :::{note} block of line 17"),
    ("fail_front_matter_yaml", "fail_front_matter_yaml.md: WARNING: line 10, column 24: the front "
     "matter is not valid YAML"),
], ids=["no-header", "fence-in-a-box", "front-matter-yaml"])
def test_site_build_refuses_what_the_suite_refuses(proven, tmp_path, chapter, message):
    """A chapter the suite refuses (CASES) stops `jupyter-book build -W` too, naming the
    file, under the book's MyST extensions (colon_fence: a cell in a box is text there)."""
    import yaml

    extensions = yaml.safe_load((CORPUS.parents[1] / "_config.yml").read_text())["parse"]

    def run():
        shutil.copy(CORPUS / "pass_assert.md", tmp_path / "index.md")
        shutil.copy(CORPUS / f"{chapter}.md", tmp_path / f"{chapter}.md")
        (tmp_path / "_toc.yml").write_text(
            f"format: jb-book\nroot: index\nchapters:\n  - file: {chapter}\n"
        )
        (tmp_path / "_config.yml").write_text(yaml.safe_dump({
            "title": "corpus", "execute": {"execute_notebooks": "off"}, "parse": extensions,
            "sphinx": {"extra_extensions": ["fencecheck.sphinx"]}}))
        jb = Path(sys.executable).with_name("jupyter-book")
        proc = subprocess.run([str(jb), "build", str(tmp_path), "-W", "-n", "--keep-going"],
                              capture_output=True, text=True, timeout=300)
        return proc.returncode, ANSI.sub("", proc.stdout + proc.stderr)

    code, out = proven(f"corpus-site-build-{chapter}", run)
    assert code != 0, out
    assert message in out, out
    assert "Traceback" not in out, out


def test_site_build_reports_every_failing_chapter(proven, tmp_path):
    """Under the book's own execution settings, `jupyter-book build -W --keep-going`
    names every failing chapter and its error, not only the first (myst-nb's
    raise-on-error stops at the first)."""
    import yaml

    config = yaml.safe_load((CORPUS.parents[1] / "_config.yml").read_text())
    nb_settings = {k: v for k, v in config["sphinx"]["config"].items() if k.startswith("nb_execution")}

    def run():
        shutil.copy(CORPUS / "pass_assert.md", tmp_path / "index.md")
        shutil.copy(CORPUS / "fail_assert.md", tmp_path / "a.md")
        shutil.copy(CORPUS / "fail_raises.md", tmp_path / "b.md")
        (tmp_path / "_toc.yml").write_text(
            "format: jb-book\nroot: index\nchapters:\n  - file: a\n  - file: b\n")
        (tmp_path / "_config.yml").write_text(yaml.safe_dump({
            "title": "corpus", "execute": config["execute"],
            "sphinx": {"extra_extensions": ["fencecheck.sphinx"], "config": nb_settings}}))
        jb = Path(sys.executable).with_name("jupyter-book")
        proc = subprocess.run([str(jb), "build", str(tmp_path), "-W", "-n", "--keep-going"],
                              capture_output=True, text=True, timeout=600)
        return proc.returncode, ANSI.sub("", proc.stdout + proc.stderr)

    code, out = proven("corpus-site-build-every-failure", run)
    assert code != 0, out
    for name, error in (("a.md", "zeros are not ones"), ("b.md", "nothing was raised")):
        assert f"{name}: WARNING: Executing notebook failed" in out, out
        assert error in out, out


@pytest.mark.proof
def test_a_run_that_leaves_a_new_file_in_the_checkout_fails_naming_it(pytester):
    """The plant: a fence wrote ``saved.pt`` next to its chapter and the run passed."""
    lay_out(pytester.path, ["pass_quick", "leaves_file"])
    results = pytester.path / "results.json"
    result = pytester.runpytest_subprocess("book", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           "--fences-results", str(results))
    out = ANSI.sub("", result.stdout.str() + result.stderr.str())
    assert result.ret == 1, out
    assert "FAILED: new file book/saved.pt" in out or "FAILED: new file saved.pt" in out, out
    record = json.loads(results.read_text())
    assert record["exitstatus"] == 1
    assert any("saved.pt" in e["reason"] for e in record["errors"]), record["errors"]
    # every fence passed: only the file fails the run
    assert all(f["outcome"] == "passed" for f in record["fences"]), record["fences"]


def test_a_quick_checks_key_is_recorded(corpus_run):
    """fences.quiz records its key as an observed value of its fence (quiz.<name>)."""
    [rec] = [r for r in corpus_run[2]["pass_quiz"] if not r.get("error")]
    assert rec["observed"] == {"quiz.corpus-permute": "(1, 12, 4)"}, rec
    assert rec["labels"]["quiz.corpus-permute"] == "the answer to the quick check: What is y.stride()?"
