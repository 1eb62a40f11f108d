"""Graded exercises: ``compare`` names what is wrong, ``grade`` grades the reader's answer,
``prove`` proves the check on the solution and on stated wrong answers (docs/chapters.md)."""
from __future__ import annotations

import re

__all__ = ["Wrong", "compare", "grade", "prove", "UNANSWERED"]

#: What the reader's cell holds before it is answered.
UNANSWERED = (None, Ellipsis)


class Wrong(AssertionError):
    """An answer that differs from the expected one; the message says where."""


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "stride")


def _is_array(x) -> bool:
    return type(x).__module__ == "numpy" and hasattr(x, "strides")


def _is_shape(x) -> bool:
    return type(x).__name__ == "Size" or (isinstance(x, tuple) and all(type(n) is int for n in x))


def compare(answer, expected, what: str = "answer", strides: bool = False) -> None:
    """Raise :class:`Wrong` naming the first difference between ``answer`` and ``expected``.

    Tensors by type, shape, dtype, device, (with ``strides``) stride and storage offset,
    then values (NaN equals NaN); arrays likewise; mappings by key, sequences by element,
    anything else with ``==``.
    """
    if _is_tensor(expected):
        _compare_tensor(answer, expected, what, strides)
    elif _is_array(expected):
        _compare_array(answer, expected, what)
    elif isinstance(expected, dict):
        if not isinstance(answer, dict):
            raise Wrong(f"{what}: expected a dict, got {type(answer).__name__}")
        missing = [k for k in expected if k not in answer]
        extra = [k for k in answer if k not in expected]
        if missing or extra:
            raise Wrong(f"{what}: keys differ (missing {missing}, unexpected {extra})")
        for key in expected:
            compare(answer[key], expected[key], f"{what}[{key!r}]", strides)
    elif isinstance(expected, (list, tuple)) and not _is_shape(expected):
        if not isinstance(answer, (list, tuple)):
            raise Wrong(f"{what}: expected a {type(expected).__name__}, got {type(answer).__name__}")
        if len(answer) != len(expected):
            raise Wrong(f"{what}: expected {len(expected)} items, got {len(answer)}")
        for i, (a, e) in enumerate(zip(answer, expected)):
            compare(a, e, f"{what}[{i}]", strides)
    else:
        if isinstance(expected, bool) and not isinstance(answer, bool):
            raise Wrong(f"{what}: expected True or False, got {answer!r}")
        if _is_shape(expected) and _is_shape(answer):
            answer, expected = tuple(answer), tuple(expected)
        if answer != expected:
            raise Wrong(f"{what}: expected {expected!r}, got {answer!r}")


def _compare_tensor(answer, expected, what: str, strides: bool) -> None:
    if not _is_tensor(answer):
        raise Wrong(f"{what}: expected a tensor, got {type(answer).__name__}")
    _compare_parts(answer, expected, what, ("shape", "dtype", "device"))
    if strides and answer.stride() != expected.stride():
        raise Wrong(f"{what}: stride differs: expected {expected.stride()}, got {answer.stride()}")
    if strides and answer.storage_offset() != expected.storage_offset():
        raise Wrong(f"{what}: storage offset differs: expected "
                    f"{expected.storage_offset()}, got {answer.storage_offset()}")
    if answer.device.type == "meta":
        return
    a, e = answer.detach().cpu(), expected.detach().cpu()
    same = a == e
    if a.is_floating_point() or a.is_complex():
        same = same | ((a != a) & (e != e))  # NaN matches NaN
    if not bool(same.all()):
        where = tuple((~same).nonzero()[0].tolist())
        raise Wrong(f"{what}: values differ: first at index {where}: expected "
                    f"{e[where].item()!r}, got {a[where].item()!r}"
                    f" ({int((~same).sum())} of {same.numel()} elements differ)")


def _compare_array(answer, expected, what: str) -> None:
    import numpy as np

    if not _is_array(answer):
        raise Wrong(f"{what}: expected a NumPy array, got {type(answer).__name__}")
    _compare_parts(answer, expected, what, ("shape", "dtype"))
    same = (answer == expected) | (np.isnan(answer) & np.isnan(expected)) \
        if answer.dtype.kind in "fc" else answer == expected
    if not same.all():
        where = tuple(int(i) for i in np.argwhere(~same)[0])
        raise Wrong(f"{what}: values differ: first at index {where}: expected "
                    f"{expected[where]!r}, got {answer[where]!r}")


def _compare_parts(answer, expected, what: str, parts: tuple[str, ...]) -> None:
    for part in parts:
        a, e = getattr(answer, part), getattr(expected, part)
        if a != e:
            raise Wrong(f"{what}: {part} differs: expected {e}, got {a}")


def grade(check, answer) -> None:
    """Grade the reader's answer with ``check``: unanswered prints a hint, right prints
    "Correct.", wrong lets ``check``'s :class:`Wrong` fail the cell."""
    if any(answer is u for u in UNANSWERED):
        print("Not answered yet: replace `None` in `answer` above, then run this cell.")
        return
    check(answer)
    print("Correct.")


def prove(check, solution, wrong: dict | list) -> None:
    """Assert that ``check`` passes ``solution`` and refuses every wrong answer with a message
    matching its pattern; ``wrong`` maps answer -> pattern, or lists (answer, pattern) pairs."""
    pairs = list(wrong.items()) if isinstance(wrong, dict) else list(wrong)
    if not pairs:
        raise ValueError("prove() needs at least one wrong answer")
    if any(solution is u for u in UNANSWERED):
        raise ValueError("the solution is unanswered")
    try:
        check(solution)
    except Wrong as exc:
        raise AssertionError(f"the check refuses its own solution: {exc}") from None
    print("solution: accepted")
    for answer, pattern in pairs:
        try:
            check(answer)
        except Wrong as exc:
            if not re.search(pattern, str(exc)):
                raise AssertionError(
                    f"the check refused a wrong answer, but its message {str(exc)!r} "
                    f"does not name {pattern!r}") from None
            print(f"wrong answer refused: {exc}")
        else:
            raise AssertionError(f"the check accepted a wrong answer: {answer!r}")
