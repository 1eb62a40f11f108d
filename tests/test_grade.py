"""Graded exercises (fences/grade.py): a check names what differs, prove() proves the check."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

import fences
from fences.grade import Wrong, compare, grade, prove


@pytest.mark.parametrize("answer, expected, message", [
    (torch.zeros(2), torch.zeros(3), r"shape differs: expected torch.Size\(\[3\]\)"),
    (torch.zeros(2), torch.zeros(2, dtype=torch.int64), "dtype differs: expected torch.int64"),
    (torch.zeros(2, device="meta"), torch.zeros(2), "device differs: expected cpu"),
    (torch.tensor([1.0, 2.0, 5.0]), torch.tensor([1.0, 2.0, 3.0]),
     r"values differ: first at index \(2,\): expected 3.0, got 5.0 \(1 of 3"),
    ([1, 2], [1, 3], r"answer\[1\]: expected 3, got 2"),
    ({"a": True}, {"a": False}, r"answer\['a'\]: expected False"),
    ({"a": True}, {"b": True}, r"keys differ \(missing \['b'\], unexpected \['a'\]\)"),
    (1, True, "expected True or False, got 1"),
    ("x", torch.zeros(1), "expected a tensor, got str"),
    (np.zeros(2, np.float32), np.zeros(2), "dtype differs: expected float64"),
    (np.array([1, 2]), np.array([1, 3]), r"first at index \(1,\)"),
    ((2, 3), (3, 2), r"expected \(3, 2\), got \(2, 3\)"),
])
def test_compare_names_what_differs(answer, expected, message):
    with pytest.raises(Wrong, match=message):
        compare(answer, expected)


def test_compare_strides_and_offsets_when_asked():
    x = torch.zeros(3, 4)
    compare(x.t(), torch.zeros(4, 3))  # values only
    with pytest.raises(Wrong, match=r"stride differs: expected \(3, 1\), got \(1, 4\)"):
        compare(x.t(), torch.zeros(4, 3), strides=True)
    with pytest.raises(Wrong, match="storage offset differs: expected 0, got 4"):
        compare(x[1:], torch.zeros(2, 4), strides=True)


def test_compare_accepts_equal_values_nan_included():
    compare(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))
    compare(torch.Size([2, 3]), (2, 3))
    compare({"a": [torch.ones(1)]}, {"a": [torch.ones(1)]})


def test_grade_unanswered_right_and_wrong(capsys):
    def check(answer):
        compare(answer, 3)

    assert grade(check, None) is None
    assert "Not answered yet" in capsys.readouterr().out
    assert grade(check, 3) is None
    assert capsys.readouterr().out == "Correct.\n"
    with pytest.raises(Wrong, match="expected 3, got 4"):
        grade(check, 4)


def test_prove_passes_a_sound_check(capsys):
    prove(lambda a: compare(a, 3), solution=3, wrong=[(4, "expected 3, got 4")])
    out = capsys.readouterr().out
    assert "solution: accepted" in out and "wrong answer refused" in out


def test_prove_fails_a_check_that_refuses_its_solution():
    with pytest.raises(AssertionError, match="refuses its own solution"):
        prove(lambda a: compare(a, 3), solution=2, wrong=[(4, "")])


def test_prove_fails_a_check_that_accepts_a_wrong_answer():
    with pytest.raises(AssertionError, match="accepted a wrong answer: 4"):
        prove(lambda a: None, solution=3, wrong=[(4, "")])


def test_prove_fails_when_the_message_does_not_name_the_mistake():
    with pytest.raises(AssertionError, match="does not name 'dtype'"):
        prove(lambda a: compare(a, 3), solution=3, wrong=[(4, "dtype")])


def test_prove_needs_a_wrong_answer_and_a_solution():
    with pytest.raises(ValueError, match="at least one wrong answer"):
        prove(lambda a: None, solution=3, wrong=[])
    with pytest.raises(ValueError, match="unanswered"):
        prove(lambda a: None, solution=None, wrong=[(1, "")])


def test_forall_runs_the_stated_number_of_inputs(capsys):
    seen = []

    @fences.forall(st.integers(0, 10), examples=25)
    def holds(n):
        seen.append(n)
        assert 0 <= n <= 10

    assert "holds: held on" in capsys.readouterr().out
    assert 0 < len(seen) <= 25


def test_forall_is_derandomised_and_fails_with_a_minimal_input():
    draws = []
    for _ in range(2):
        run = []

        @fences.forall(st.integers(0, 1000), examples=20)
        def record(n):
            run.append(n)  # noqa: B023 - each loop's function runs before the next loop

        draws.append(run)
    assert draws[0] == draws[1]
    with pytest.raises(AssertionError):
        @fences.forall(st.integers(0, 1000))
        def small(n):
            assert n < 500


def test_layouts_reach_the_edges():
    from fences import strategies

    seen = set()

    @fences.forall(strategies.layouts(), examples=300)
    def collect(drawn):
        t, layout = drawn
        seen.add(layout)
        seen.add(("dims", t.dim()))
        if 0 in t.shape:
            seen.add("empty")
        if t.dim() and not t.is_contiguous():
            seen.add("non-contiguous")
        if 0 in t.stride() and t.numel() > 1:
            seen.add("overlapping")

    assert {"contiguous", "transposed", "stepped", "expanded", "offset", ("dims", 0),
            "empty", "non-contiguous", "overlapping"} <= seen
