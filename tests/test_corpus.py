"""The must-fail corpus: chapters that must fail, each for its stated reason.

Each chapter in tests/corpus/ is copied into a fresh book folder and run by
pytest in a subprocess, with this project's plugin, exactly as `make test`
runs book/. A `fail_*` chapter must fail with its reason in the output; its
`pass_*` twin must pass. This proves the suite can fail.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus"
ROOT = Path(__file__).resolve().parents[1]

ANSI = re.compile(r"\x1b\[[0-9;]*m")

PYPROJECT = """[tool.pytest.ini_options]
addopts = "--nbval-lax --nbval-current-env --nbval-cell-timeout={timeout} -p no:cacheprovider"
"""


def run_book(tmp_path: Path, *chapters: str, toc: bool | str = True, timeout: int = 60, args=()):
    """Lay out a book of corpus chapters in tmp_path and run the suite on it.

    ``toc``: True writes a _toc.yml listing the chapters, False writes none,
    a string is written as the _toc.yml.
    """
    book = tmp_path / "book"
    book.mkdir()
    for name in chapters:
        shutil.copy(CORPUS / f"{name}.md", book / f"{name}.md")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["fences.pytest_plugin"]\n')
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(timeout=timeout))
    if isinstance(toc, str):
        (tmp_path / "_toc.yml").write_text(toc)
    elif toc:
        lines = [f"  - file: book/{name}" for name in chapters[1:]]
        (tmp_path / "_toc.yml").write_text(
            f"format: jb-book\nroot: book/{chapters[0]}\n"
            + ("chapters:\n" + "\n".join(lines) + "\n" if lines else "")
        )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "book", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    return proc.returncode, ANSI.sub("", proc.stdout + proc.stderr)


# (failing chapter, passing twin, text the failure must show, extra pytest options)
CASES = {
    "false assert": ("fail_assert", "pass_assert", "AssertionError: zeros are not ones", 60),
    "raise claimed, nothing raised": (
        "fail_raises", "pass_raises",
        "expected RuntimeError matching 'must match the size', nothing was raised", 60,
    ),
    "leaked default dtype": (
        "fail_leaks", "pass_restores",
        "default dtype (torch.get_default_dtype): was torch.float32, now torch.float64", 60,
    ),
    "hung cell": ("fail_hangs", "pass_quick", "Timeout of 5 seconds exceeded", 5),
    "raises-exception tag": ("fail_tag", "pass_assert", "tag 'raises-exception'", 60),
}


@pytest.mark.parametrize("case", CASES)
def test_must_fail_chapter_fails_for_its_reason(tmp_path, case):
    failing, _, reason, timeout = CASES[case]
    code, out = run_book(tmp_path, failing, timeout=timeout)
    assert code != 0, f"{failing}.md passed but must fail:\n{out}"
    assert reason in out, f"{failing}.md failed, but not for its reason {reason!r}:\n{out}"
    assert f"book/{failing}.md" in out, f"the failure does not name the chapter:\n{out}"


@pytest.mark.parametrize("case", CASES)
def test_must_pass_twin_passes(tmp_path, case):
    _, passing, _, timeout = CASES[case]
    code, out = run_book(tmp_path, passing, timeout=timeout)
    assert code == 0, f"{passing}.md must pass:\n{out}"


def test_chapter_in_toc_without_header_stops_the_suite(tmp_path):
    code, out = run_book(tmp_path, "pass_assert", "fail_no_header")
    assert code != 0
    assert "book/fail_no_header.md (listed in _toc.yml): no jupytext header" in out, out


def test_chapter_without_header_is_a_collection_error(tmp_path):
    code, out = run_book(tmp_path, "fail_no_header", toc=False)
    assert code != 0
    assert "book/fail_no_header.md: no jupytext header" in out, out


def test_toc_entry_that_does_not_exist_stops_the_suite(tmp_path):
    toc = "format: jb-book\nroot: book/pass_assert\nchapters:\n  - file: book/missing\n"
    code, out = run_book(tmp_path, "pass_assert", toc=toc)
    assert code != 0
    assert "_toc.yml lists book/missing.md, which does not exist" in out, out


def test_chapter_missing_from_toc_stops_the_suite(tmp_path):
    toc = "format: jb-book\nroot: book/pass_assert\n"
    code, out = run_book(tmp_path, "pass_assert", "pass_quick", toc=toc)
    assert code != 0
    assert "book/pass_quick.md is not listed in _toc.yml" in out, out


def test_device_gated_fence_is_reported_with_its_outcome(tmp_path):
    import torch

    results = tmp_path / "results.json"
    code, out = run_book(tmp_path, "pass_needs", args=("--fences-results", str(results)))
    assert code == 0, out
    records = json.loads(results.read_text())["fences"]
    gated = [r for r in records if r["fence"].startswith("Cell 0")]
    assert len(gated) == 1, records
    if torch.cuda.is_available():
        assert gated[0]["outcome"] == "passed", gated
    else:
        assert gated[0]["outcome"] == "skipped", gated
        assert "needs a CUDA GPU" in gated[0]["reason"], gated


def test_site_build_refuses_chapter_without_header(tmp_path):
    """The same missing header stops `jupyter-book build -W` too, naming the file."""
    shutil.copy(CORPUS / "pass_assert.md", tmp_path / "index.md")
    shutil.copy(CORPUS / "fail_no_header.md", tmp_path / "fail_no_header.md")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: index\nchapters:\n  - file: fail_no_header\n"
    )
    (tmp_path / "_config.yml").write_text(
        "title: corpus\nexecute:\n  execute_notebooks: force\n"
        "sphinx:\n  extra_extensions: [fences.sphinx]\n"
    )
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run(
        [str(jb), "build", str(tmp_path), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=300,
    )
    out = ANSI.sub("", proc.stdout + proc.stderr)
    assert proc.returncode != 0, out
    assert "fail_no_header.md: WARNING: no jupytext header" in out, out
