"""The few helpers every chapter's fences use.

A fence is a code cell that asserts a claim made in the prose beside it.
This package stays small: a helper lives here only when several chapters
call it.

- ``raises`` / ``warns``: assert that a call raises (or warns), fail loudly
  when nothing happens, and show the message as a reader at the prompt sees it
  (``RuntimeError: view size is not ...``, one line, shortened in the middle).
- ``show``: end a lesson fence by showing what it is about (a tensor, a dtype,
  a shape), labelled, a few lines at most.
- ``shares_memory``: do two tensors (or a tensor and an array) use the same
  bytes?
- ``glue``: publish a computed value to the prose (myst-nb ``glue``), so
  numbers quoted in the text come from execution.
- ``needs``: gate a fence on a device; prints a visible "not executed here"
  line that the test suite reports as a skip.
- ``observe``: record a value that may differ between torch releases or
  builds; the release matrix compares them.
- ``table``: render rows computed by a fence as a table.
- ``torch_build``: which torch, which build, executed this page.
- ``forall``: run a universal claim's check over generated inputs
  (Hypothesis, derandomised); strategies that reach the edges are in
  ``fences.strategies``.
- ``grade``: graded exercises (``fences.grade``).
- ``quiz``: a quick check the reader answers on the page (jupyterquiz), its key
  recorded (``fences.quiz``; ``quiz_question``/``quiz_show`` for several in one output).
"""
from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = [
    "raises",
    "show",
    "warns",
    "shares_memory",
    "glue",
    "needs",
    "SKIP_MARKER",
    "observe",
    "OBSERVE_MARKER",
    "table",
    "torch_build",
    "forall",
    "grade",
    "quiz",
    "quiz_question",
    "quiz_show",
    "quiz_parts",
]

#: The line ``needs`` prints; the test plugin turns a cell that prints it
#: into a reported skip with the reason that follows.
SKIP_MARKER = "[fence not executed here]"

#: The prefix ``observe`` prints; the test plugin records what follows.
OBSERVE_MARKER = "[observed]"

#: The prefix ``raises``/``warns`` print under the test plugin, before the message in
#: full (JSON: class and text); the record keeps it and the errors page shows it.
RAISED_MARKER = "[raised]"
#: Distinct messages kept per fence (a proof that loops over dtypes raises many).
RAISED_KEPT = 8

#: Set (to "1") in the kernel's environment by the test plugin, which records what
#: ``observe`` and ``raises`` saw. Unset (the site, a downloaded notebook), they print
#: nothing: the page stays quiet, and the record keeps every value.
RECORD_ENV = "TENSOR_FENCES_RECORD"


def recording() -> bool:
    """True in a kernel started by the test plugin (``RECORD_ENV`` set)."""
    import os

    return os.environ.get(RECORD_ENV) == "1"

from . import grade  # noqa: E402 - graded exercises, fences.grade.prove
from .quiz import quiz, quiz_parts, quiz_question, quiz_show  # noqa: E402 - quick checks (jupyterquiz, imported when shown)

_SHOWN = 160  # characters of an exception message shown to the reader


def _first_line(message: str) -> str:
    """The message on one line (its lines joined), shortened in the middle when long:
    the start names the error and the end often names the fix. The cut falls between
    words (within 20 characters of the middle), so no word is shown half."""
    line = " ".join(part.strip() for part in message.strip().splitlines() if part.strip())
    if len(line) <= _SHOWN:
        return line
    half = (_SHOWN - 5) // 2
    end = line.find(" ", half)         # the head ends with a whole word: its own end,
    end = end if 0 <= end - half <= 12 else line.rfind(" ", 0, half)   # or the one before
    head = line[:end] if end >= half - 20 else line[:half]
    start = line.rfind(" ", 0, len(line) - half)   # the tail starts with a whole word
    start = start if 0 <= len(line) - half - start <= 12 else line.find(" ", len(line) - half)
    tail = line[start + 1:] if 0 <= start - (len(line) - half) <= 20 or \
        0 <= len(line) - half - start <= 12 else line[-half:]
    return f"{head.rstrip()} ... {tail.lstrip()}"


_PROVES = re.compile(r"^\s*#\s*Proves:")


def in_check_part(depth: int = 2) -> bool:
    """Is the caller (``depth`` frames up, past the context manager) on or after its cell's
    ``# Proves:`` line, in the check part of a lesson fence? The check part is folded on
    the page, so what it would print must not show under the teaching part's output.
    The cell's source is IPython's own copy (it keeps each cell in ``linecache`` for
    tracebacks); outside a cell (a script, a test) the answer is False."""
    import linecache
    import sys

    frame = sys._getframe(depth)
    while frame is not None and frame.f_code.co_filename.startswith(__file__.rsplit("/", 1)[0]):
        frame = frame.f_back        # out of this package (contextlib's frames are not ours)
    while frame is not None and "contextlib" in frame.f_code.co_filename:
        frame = frame.f_back
    if frame is None:
        return False
    lines = linecache.getlines(frame.f_code.co_filename)
    start = next((n for n, line in enumerate(lines, 1) if _PROVES.match(line)), None)
    return start is not None and frame.f_lineno > start


def shown_message(exc) -> str:
    """What a reader at the prompt sees of ``exc``: ``Class: message`` on one line."""
    return f"{type(exc).__name__}: {_first_line(str(exc))}"


def show(*values, **labelled) -> None:
    """Show what a lesson fence is about, as the prompt would: each positional value's
    ``repr`` on its own line, then each labelled one as ``label: repr`` (a
    multi-line ``repr``, a tensor's, indented under its label)::

        fences.show(x, stride=x.stride(), contiguous=x.is_contiguous())

    Returns None, so a call on a cell's last line echoes nothing more."""
    for value in values:
        print(repr(value))
    width = max((len(k) for k in labelled), default=0)
    for label, value in labelled.items():
        text = repr(value)
        if "\n" in text:
            print(f"{label}:")
            print("\n".join("  " + line for line in text.splitlines()))
        else:
            print(f"{label + ':':<{width + 1}} {text}")


@dataclass
class Caught:
    """What ``raises``/``warns`` caught: the exception (or warning) and its text."""

    value: BaseException | Warning | None = None
    message: str = field(default="")


@contextmanager
def raises(expected: type[BaseException] | tuple, match: str):
    """Assert that the block raises ``expected`` with a message matching ``match``.

    ``match`` is a regular expression searched in ``str(exception)``.
    Prints the message as the prompt would show it (``shown_message``), on the
    page, in a notebook and for the record alike. Fails with
    "expected X, nothing was raised" when the block completes normally, and
    lets any other exception through unchanged.
    """
    names = _names(expected)
    _check_pattern(match)
    caught = Caught()
    try:
        yield caught
    except expected as exc:  # noqa: B030 - a tuple of types is allowed
        _named_exactly(exc, expected, names)
        text = str(exc)
        if not re.search(match, text):
            raise AssertionError(
                f"{type(exc).__name__} was raised, but its message does not match "
                f"{match!r}:\n{text}"
            ) from exc
        _check_pattern(match, text)
        caught.value, caught.message = exc, text
        if not in_check_part():
            print(shown_message(exc))
        _record_raised(type(exc).__name__, text)
    else:
        raise AssertionError(f"expected {names} matching {match!r}, nothing was raised")


def _record_raised(kind: str, message: str) -> None:
    """Under the test plugin, the message in full for the record (one JSON line)."""
    if recording():
        import json

        print(f"{RAISED_MARKER} {json.dumps({'class': kind, 'message': message})}")


def parse_raised(text: str) -> list[dict]:
    """The ``[raised]`` lines in a cell's output: each distinct (class, message), in
    order, at most ``RAISED_KEPT``."""
    import json

    found: list[dict] = []
    for line in text.splitlines():
        if not line.startswith(RAISED_MARKER):
            continue
        try:
            item = json.loads(line[len(RAISED_MARKER):])
        except ValueError:
            continue
        if item not in found and len(found) < RAISED_KEPT:
            found.append(item)
    return found


#: Messages of other errors, from other operations: a raise/warn pattern that matches
#: one of them would pass on that error too (``"shape|\\w"`` matches every message).
UNRELATED = (
    "division by zero",
    "index 3 is out of bounds for dimension 0 with size 2",
    "expected scalar type Float but found Double",
    "name 'x' is not defined",
    "unsupported operand type(s) for +: 'int' and 'str'",
    "[Errno 2] No such file or directory: 'data.csv'",
    "CUDA out of memory. Tried to allocate 2.00 GiB",
)


def _alike(a: str, b: str) -> bool:
    """Two messages of one error, their numbers aside (an IndexError's index and size)."""
    import difflib

    a, b = (re.sub(r"-?\d+(?:\.\d+)?", "N", t) for t in (a, b))
    return a in b or b in a or difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def _check_pattern(match: str, message: str | None = None) -> None:
    """A message pattern must say something: one that matches the empty string ("",
    ".*", "x?"), or names no word of three letters (".", r"\\w+"), matches about every
    message, so the check would pass on any error. Once the error is caught (its
    ``message`` known), the pattern must also match none of ``UNRELATED``, other errors'
    messages (one like the caught message, its numbers aside, is not unrelated)."""
    if not isinstance(match, str) or re.search(match, "") is not None \
            or not re.search(r"[A-Za-z]{3}", re.sub(r"\\.", "", match)):
        raise ValueError(f"message pattern {match!r} matches any message: name the "
                         "message (a word of it, at least, that only this error has)")
    if message is None:
        return
    for other in UNRELATED:
        if not _alike(other, message) and re.search(match, other):
            raise ValueError(f"message pattern {match!r} also matches {other!r}, the message "
                             "of an unrelated error: the check would pass on it too; match "
                             f"words only this message has:\n{message}")


def _named_exactly(exc: BaseException, expected, names: str) -> None:
    """A standard exception class the check did not name fails it, even as a subclass of
    one it did: ``raises(RuntimeError, ...)`` would otherwise pass on a
    ``NotImplementedError``, and the book would name the wrong class. A library's own
    subclass (``torch.OutOfMemoryError`` of ``RuntimeError``) still counts."""
    classes = expected if isinstance(expected, tuple) else (expected,)
    kind = type(exc)
    if kind not in classes and kind.__module__ == "builtins":
        raise AssertionError(
            f"{kind.__name__} was raised, a subclass of {names}: name {kind.__name__} "
            f"itself (the check would pass on any {names})") from exc


@contextmanager
def warns(expected: type[Warning], match: str):
    """Assert that the block emits a warning of ``expected`` matching ``match``."""
    _check_pattern(match)
    caught = Caught()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield caught
    for w in seen:
        if issubclass(w.category, expected) and re.search(match, str(w.message)):
            _check_pattern(match, str(w.message))
            caught.value, caught.message = w.message, str(w.message)
            if not in_check_part():
                print(f"{w.category.__name__}: {_first_line(str(w.message))}")
            _record_raised(w.category.__name__, str(w.message))
            return
    others = "; ".join(f"{w.category.__name__}: {w.message}" for w in seen) or "none"
    raise AssertionError(
        f"expected {expected.__name__} matching {match!r}, nothing was warned "
        f"(warnings seen: {others})"
    )


def _names(expected) -> str:
    if isinstance(expected, tuple):
        return " or ".join(e.__name__ for e in expected)
    return expected.__name__


def _extent(x) -> tuple[int, int]:
    """[start, end) byte range that a tensor or array can touch."""
    if hasattr(x, "untyped_storage"):
        start = x.untyped_storage().data_ptr()
        return start, start + x.untyped_storage().nbytes()
    import numpy as np

    bounds = getattr(np.lib, "array_utils", np).byte_bounds  # moved in NumPy 2
    return bounds(x)


def shares_memory(a, b) -> bool:
    """True when ``a`` and ``b`` (tensors or NumPy arrays) can touch the same bytes.

    For two tensors this compares their storages: a view shares its base's
    storage even where the two select disjoint elements. Across the NumPy
    bridge it compares byte ranges. Tensors on the ``meta`` device have no
    bytes and never share; nor does anything with an empty storage (two
    empty tensors both report address 0, yet touch no bytes).
    """
    for x in (a, b):
        if getattr(x, "is_meta", False):
            return False
    (a0, a1), (b0, b1) = _extent(a), _extent(b)
    if a0 == a1 or b0 == b1:
        return False
    if hasattr(a, "untyped_storage") and hasattr(b, "untyped_storage"):
        return a0 == b0  # same storage (a tensor's extent is its whole storage)
    return a0 < b1 and b0 < a1


def glue(name: str, value, display: bool = False):
    """Publish ``value`` under ``name`` for ``{glue}`name``` in the prose.

    Uses myst-nb's ``glue`` when it is installed (the site build, the test
    suite); in a bare notebook it only returns the value.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:  # a downloaded notebook opened without myst-nb
        return value
    _glue(name, value, display=display)
    return value


#: The devices a fence can be gated on: the one home of GPU detection. For each kind,
#: the probe (an attribute path under ``torch``, called with no argument) and what
#: ``needs`` says is missing. ``available`` asks the probe; ``GATE`` finds a gated fence
#: in a chapter's source; tools/gate_lifted.py forces each probe False. A second copy is
#: refused by tests/test_one_home.py.
DEVICES = {"cuda": ("cuda.is_available", "a CUDA GPU"),
           "mps": ("backends.mps.is_available", "Apple MPS")}
#: Code gated on a device: a call of ``fences.needs``, or ``needs("cuda")`` imported bare.
GATE = re.compile(r"\bfences\.needs\(|\bneeds\(\s*[\"'](?:" + "|".join(DEVICES) + r")[\"']")


def probe(device: str):
    """The torch function that says whether ``device`` is here (``DEVICES``)."""
    import torch

    if device not in DEVICES:
        raise ValueError(f"unknown device kind {device!r}")
    found = torch
    for name in DEVICES[device][0].split("."):
        found = getattr(found, name)
    return found


def available(device: str) -> bool:
    """True when ``device`` ("cuda", "mps") can run code here; prints nothing."""
    return bool(probe(device)())


def needs(device: str) -> bool:
    """True when ``device`` ("cuda", "mps", ...) can run code here.

    When it cannot, prints one visible line starting with ``SKIP_MARKER``;
    the page shows it and the test suite reports the cell as skipped::

        if fences.needs("cuda"):
            ...  # the CUDA-only fence
    """
    import torch

    ok = available(device)
    if not ok:
        what, missing = DEVICES[device]
        print(f"{SKIP_MARKER} needs {missing}; torch.{what}() is False (torch {torch.__version__})")
    return ok


_OBSERVED_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_OBSERVED_LINE = re.compile(r"^(?:(?P<label>.*?) \((?P<named>[A-Za-z0-9_.\-]+)\)|(?P<name>[A-Za-z0-9_.\-]+))"
                            r" = (?P<value>.*)$")


def observe(name: str, value, label: str | None = None):
    """Record ``value`` under ``name`` (e.g. "devices.current_accelerator") and return it.

    For behaviour that depends on the torch release or build. ``label`` says
    in plain words what the value is ("the accelerator torch reports"); the
    "Verified on" page lists a labelled value that differs between releases
    as a behaviour, in those words, and an unlabelled one only in its
    collapsed list of other recorded values. Under the test plugin
    (``recording()``) prints one line, ``[observed] label (name) = value`` (or
    ``[observed] name = value``), which the plugin stores with the fence's
    result; on a page it prints nothing.
    ``name`` is letters, digits, ``_``, ``.`` and ``-``.
    """
    if not _OBSERVED_NAME.match(name):
        raise ValueError(f"observe: name {name!r} must be letters, digits, '_', '.' or '-'")
    if recording():
        shown = f"{' '.join(label.split())} ({name})" if label else name
        print(f"{OBSERVE_MARKER} {shown} = {' '.join(str(value).splitlines())}")
    return value


def parse_observed(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The ``observe`` lines in a cell's output: (name -> value, name -> label)."""
    values: dict[str, str] = {}
    labels: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith(OBSERVE_MARKER):
            continue
        m = _OBSERVED_LINE.match(line[len(OBSERVE_MARKER):].strip())
        if not m:
            continue
        name = m["named"] or m["name"]
        values[name] = m["value"]
        if m["label"]:
            labels[name] = m["label"]
    return values, labels


def table(rows, headers):
    """Show ``rows`` (computed by the fence) as a Markdown table.

    Returns None, so a call on a cell's last line does not echo the rows.
    """
    from IPython.display import Markdown, display

    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))


def torch_build(version=None) -> str:
    """One line naming the torch that runs this code: version and build kind.

    ``version`` is a ``torch.version``-like object; by default the imported
    torch's. ``installed_torch_version()`` gives one without importing torch.
    """
    if version is None:
        import torch

        version = torch.version
    if getattr(version, "cuda", None):
        kind = f"CUDA {version.cuda} build"
    elif getattr(version, "hip", None):
        kind = f"ROCm {version.hip} build"
    else:
        kind = "CPU-only build"
    return f"torch {version.__version__} ({kind})"


def installed_torch_version():
    """torch's ``version`` module, read from its file without importing torch (seconds)."""
    import importlib.util
    import types
    from pathlib import Path

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    namespace: dict = {}
    exec((Path(spec.origin).parent / "version.py").read_text(), namespace)  # noqa: S102
    return types.SimpleNamespace(**{k: v for k, v in namespace.items()
                                    if not k.startswith("__") or k == "__version__"})


#: Generated inputs per universal claim unless a fence says otherwise.
EXAMPLES = 200
#: The fewest inputs ``forall`` draws: below it a universal claim is barely sampled.
MIN_EXAMPLES = 20


def forall(*strategies, examples: int = EXAMPLES, **named):
    """Check a universal claim on generated inputs; use as a decorator.

    The decorated function asserts the claim for one input. It runs at once
    on ``examples`` inputs drawn by Hypothesis, derandomised (the same
    inputs on every run, so CI is reproducible) and without a database. A
    failure is shrunk to a minimal input, which Hypothesis prints. Prints
    how many inputs the claim held on::

        @fences.forall(st.integers(0, 255), st.integers(0, 255))
        def uint8_add_wraps(a, b):
            assert (torch.tensor([a], dtype=torch.uint8) + b).item() == (a + b) % 256
    """
    from hypothesis import HealthCheck, given, settings

    if not isinstance(examples, int) or examples < MIN_EXAMPLES:
        raise ValueError(f"forall(..., examples={examples!r}): a universal claim draws at least "
                         f"{MIN_EXAMPLES} examples (fences.MIN_EXAMPLES); the default is {EXAMPLES}")

    def decorate(check):
        seen = []

        def counted(*args, **kwargs):
            seen.append(1)
            return check(*args, **kwargs)

        counted.__signature__ = __import__("inspect").signature(check)
        counted.__name__ = check.__name__
        run = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                       suppress_health_check=list(HealthCheck), print_blob=False)(
            given(*strategies, **named)(counted))
        run()
        print(f"{check.__name__}: held on {len(seen)} generated inputs")
        return check

    return decorate
