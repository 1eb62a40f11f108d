"""Checks that check, and messages that name the place (issue 53): each plant of the issue
is refused, with a message naming where."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import fences
from fencecheck import chapter
from fencecheck.chapter import HEADER

ROOT = Path(__file__).resolve().parents[1]


def read(text: str):
    return chapter.parse(text, ROOT / "book" / "x.md")


def problems(body: str) -> list[str]:
    text = HEADER + body
    return chapter.lint_problems(text, read(text))


def fence(source: str, ident: str = "a-fence") -> str:
    return (f"```{{code-cell}} ipython3\n:tags: [fence]\n:fence-id: {ident}\n"
            f"# Proves: something.\n{source}\n```\n")


# --- raises / warns patterns -------------------------------------------------------------

def _shape_error():
    raise RuntimeError("The size of tensor a (2) must match the size of tensor b (3) at "
                       "non-singleton dimension 0")


@pytest.mark.parametrize("pattern", [r"must match the size|\w", r"size|of", r"tensor|d"])
def test_a_pattern_that_matches_unrelated_messages_is_refused(pattern):
    """The plant: ``"|\\w"`` inside a pattern passed on any error."""
    with pytest.raises(ValueError, match="also matches .* the message of an unrelated error"):
        with fences.raises(RuntimeError, pattern):
            _shape_error()


def test_a_specific_pattern_passes_and_one_error_of_the_kind_of_an_unrelated_one_too():
    with fences.raises(RuntimeError, r"must match the size of tensor"):
        _shape_error()
    with fences.raises(IndexError, r"out of bounds for dimension"):   # like the fixed one
        raise IndexError("index -5 is out of bounds for dimension 0 with size 2")
    with fences.raises(ZeroDivisionError, r"division by zero"):
        1 / 0  # noqa: B018


def test_a_warns_pattern_is_checked_the_same_way():
    import warnings

    with pytest.raises(ValueError, match="unrelated error"):
        with fences.warns(UserWarning, r"deprecated|\w"):
            warnings.warn("this is deprecated", UserWarning, stacklevel=1)


# --- forall --------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 5, fences.MIN_EXAMPLES - 1])
def test_forall_below_the_minimum_is_refused(n):
    """The plant: ``forall(..., examples=1)`` passed."""
    from hypothesis import strategies as st

    with pytest.raises(ValueError, match=f"examples={n}.*at least {fences.MIN_EXAMPLES}"):
        @fences.forall(st.integers(), examples=n)
        def claim(a):
            assert a == a


def test_forall_at_the_minimum_runs():
    from hypothesis import strategies as st

    @fences.forall(st.integers(0, 9), examples=fences.MIN_EXAMPLES)
    def claim(a):
        assert 0 <= a <= 9


def test_the_book_draws_at_least_the_minimum():
    import re

    for path in sorted((ROOT / "book").glob("*.md")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for value in re.findall(r"examples=(\d+)", line):
                assert int(value) >= fences.MIN_EXAMPLES, f"{path.name}:{n}: examples={value}"


# --- allowlist reasons ----------------------------------------------------------------------

@pytest.mark.parametrize("reason, words", [
    ("TODO", "placeholder"), ("FIXME: later", "placeholder"), ("tbd", "placeholder"),
    ("xxx the view keeps it", "placeholder"), ("equivalent", "says too little"),
    ("the order does not matter", "says too little"),
    ("why this mutant cannot change the outcome", "template"),
])
def test_an_allowlist_reason_that_says_nothing_is_refused(tmp_path, reason, words):
    """The plant: a placeholder reason ("TODO") justified a survivor."""
    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    path = tmp_path / "allow.yml"
    path.write_text(f"- fence: views-address\n  mutated: \"assert x == 7\"\n  reason: \"{reason}\"\n")
    with pytest.raises(ValueError, match=words) as caught:
        mutate.load_allowlist(path)
    assert "allow.yml entry 1 (fence views-address)" in str(caught.value)


def test_the_committed_allowlist_reasons_say_something():
    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    assert mutate.load_allowlist(mutate.ALLOWLIST)


# --- the lint -------------------------------------------------------------------------------

def test_a_solution_left_open_is_refused():
    """The plant: a solution without ``:class: dropdown`` was shown open on the site."""
    body = ("```{exercise} Try\n:label: ex-a\nDo it.\n```\n\n"
            "````{solution-start} ex-a\n````\n\nAnswer.\n\n````{solution-end}\n````\n")
    found = [p for p in problems(body) if "dropdown" in p]
    assert found and found[0].startswith("line ") and "ex-a" in found[0], problems(body)
    closed = body.replace("````{solution-start} ex-a\n", "````{solution-start} ex-a\n:class: dropdown\n")
    assert not [p for p in problems(closed) if "dropdown" in p]


def test_a_cyrillic_letter_in_an_id_is_named_by_its_code_point():
    """The plant: a Cyrillic ``е`` in an id gave a message whose printed id looked valid."""
    found = [p for p in problems(fence("assert 1 + 1 == 2", "vi\u0435ws-address")) if "fence-id" in p]
    assert found and "U+0435" in found[0] and "CYRILLIC SMALL LETTER IE" in found[0], found


def test_a_syntax_error_in_a_fence_is_a_syntax_error_at_its_md_line():
    """The plant: a syntax error gave "has no assert… cannot fail"."""
    body = "# T\n\n" + fence("x = (1,\nassert x == 1")
    text = HEADER + body
    found = problems(body)
    assert not [p for p in found if "cannot fail" in p], found
    (bad,) = [p for p in found if "SyntaxError" in p]
    # the .md line of the fence's source line that Python names
    lines = text.splitlines()
    at = int(bad.split("(at line ")[1].split(")")[0])
    assert lines[at - 1].startswith(("x = (1,", "assert x")), (bad, lines[at - 1])


def test_lint_messages_name_the_md_line_not_the_cell_number():
    body = "# T\n\n" + fence("assert 1 + 1 == 2", "Bad_Id")
    text = HEADER + body
    (bad,) = [p for p in problems(body) if "fence-id" in p]
    line = int(bad.split()[1])
    assert text.splitlines()[line - 1].startswith("```{code-cell}"), bad
    assert "code cell" not in bad


def test_preflight_names_a_toc_yaml_mistake_before_jupyter_book_reads_it(tmp_path):
    """jupyter-book's CLI parses _toc.yml itself (a traceback naming no line of ours):
    ``python -m fencecheck.preflight`` runs first in ``make book``."""
    import subprocess

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: index\nchapters:\n  - file: a\n   - file: b\n")
    proc = subprocess.run([sys.executable, "-m", "fencecheck.preflight", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "_toc.yml: line 5, column 4: the table of contents is not " \
        "valid YAML" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: index\n")
    (tmp_path / "index.md").write_text(HEADER.replace("kernelspec:", "tensor-fences: {form: 3\nkernelspec:"))
    proc = subprocess.run([sys.executable, "-m", "fencecheck.preflight", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "index.md (listed in _toc.yml): line " in proc.stderr, proc.stderr
    (tmp_path / "index.md").write_text(HEADER)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "left-out.md").write_text(HEADER)   # jupyter-book would skip it in silence
    proc = subprocess.run([sys.executable, "-m", "fencecheck.preflight", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "book/left-out.md is not listed in _toc.yml" in proc.stderr, proc.stderr
    twice = tmp_path / "twice.md"   # a chapter named after ROOT is linted without running it
    views = (ROOT / "book" / "views.md").read_text()
    twice.write_text(views.replace(":fence-id: views-hook", ":fence-id: views-address"))
    proc = subprocess.run([sys.executable, "-m", "fencecheck.preflight", str(ROOT), str(twice)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "'views-address' is used in twice.md line" in proc.stderr, proc.stderr
    assert subprocess.run([sys.executable, "-m", "fencecheck.preflight", str(ROOT)],
                          capture_output=True, text=True, cwd=ROOT).returncode == 0
