"""The runtime a chapter's fences import (``__all__``); ``quiz_question``/``quiz_show`` show several in one output."""
from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import linecache
import os
import re
import sys
import types
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["raises", "show", "warns", "shares_memory", "glue", "needs", "SKIP_MARKER", "observe",
           "OBSERVE_MARKER", "table", "torch_build", "forall", "grade", "quiz", "quiz_question",
           "quiz_show", "quiz_parts"]

#: The line ``needs`` prints; the test plugin reports such a cell as a skip.
SKIP_MARKER = "[fence not executed here]"
#: The prefix ``observe`` prints; the test plugin records what follows.
OBSERVE_MARKER = "[observed]"
#: The prefix ``raises``/``warns`` print under the test plugin before the message in full (JSON).
RAISED_MARKER = "[raised]"
#: Distinct messages kept per fence (a proof that loops over dtypes raises many).
RAISED_KEPT = 8
#: Set to "1" by the test plugin: ``observe`` and ``raises`` print for the record; else the page stays quiet.
RECORD_ENV = "TENSOR_FENCES_RECORD"


def recording() -> bool:
    return os.environ.get(RECORD_ENV) == "1"


from . import grade  # noqa: E402 - graded exercises, fences.grade.prove
from .quiz import quiz, quiz_parts, quiz_question, quiz_show  # noqa: E402 - imports jupyterquiz only when shown

_SHOWN = 160  # characters of an exception message shown to the reader


def _first_line(message: str) -> str:
    """The message on one line, shortened in the middle when long (the start names the
    error, the end often the fix), cut between words within 20 characters of the middle."""
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


def in_check_part() -> bool:
    """Is the calling cell past its ``# Proves:`` line (the folded check part, which must print
    nothing)? The cell's source is IPython's copy in ``linecache``; outside a cell, False."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith(os.path.dirname(__file__))
                                 or "contextlib" in frame.f_code.co_filename):
        frame = frame.f_back        # out of this package and contextlib
    if frame is None:
        return False
    lines = linecache.getlines(frame.f_code.co_filename)
    start = next((n for n, line in enumerate(lines, 1) if _PROVES.match(line)), None)
    return start is not None and frame.f_lineno > start


def shown_message(exc) -> str:
    """What a reader at the prompt sees of ``exc``: ``Class: message`` on one line."""
    return f"{type(exc).__name__}: {_first_line(str(exc))}"


def show(*values, **labelled) -> None:
    """Print each value's ``repr``, then each labelled one as ``label: repr`` (a multi-line
    ``repr`` indented under its label); returns None, so a last line echoes nothing more."""
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
    message: str = ""


def _caught(caught: Caught, value, match: str) -> None:
    """Accept what ``raises``/``warns`` caught: check the pattern, show it (``shown_message``), record it."""
    text = str(value)
    _check_pattern(match, text)
    caught.value, caught.message = value, text
    if not in_check_part():
        print(shown_message(value))
    if recording():
        print(f"{RAISED_MARKER} {json.dumps({'class': type(value).__name__, 'message': text})}")


@contextmanager
def raises(expected: type[BaseException] | tuple, match: str):
    """Assert that the block raises ``expected`` with a message matching the regex ``match``,
    and print it as the prompt would (``shown_message``). Any other exception passes through."""
    classes = expected if isinstance(expected, tuple) else (expected,)
    names = " or ".join(e.__name__ for e in classes)
    _check_pattern(match)
    caught = Caught()
    try:
        yield caught
    except expected as exc:  # noqa: B030 - a tuple of types is allowed
        kind = type(exc)
        if kind not in classes and kind.__module__ == "builtins":
            # A standard subclass it did not name fails (the book would name the wrong class);
            # a library's own subclass (torch.OutOfMemoryError of RuntimeError) still counts.
            raise AssertionError(
                f"{kind.__name__} was raised, a subclass of {names}: name {kind.__name__} "
                f"itself (the check would pass on any {names})") from exc
        if not re.search(match, str(exc)):
            raise AssertionError(
                f"{kind.__name__} was raised, but its message does not match {match!r}:\n{exc}") from exc
        _caught(caught, exc, match)
    else:
        raise AssertionError(f"expected {names} matching {match!r}, nothing was raised")


@contextmanager
def warns(expected: type[Warning], match: str):
    """Assert that the block emits a warning of ``expected`` matching ``match``; print it."""
    _check_pattern(match)
    caught = Caught()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield caught
    for w in seen:
        if issubclass(w.category, expected) and re.search(match, str(w.message)):
            _caught(caught, w.message, match)
            return
    others = "; ".join(f"{w.category.__name__}: {w.message}" for w in seen) or "none"
    raise AssertionError(f"expected {expected.__name__} matching {match!r}, nothing was warned "
                         f"(warnings seen: {others})")


def parse_raised(text: str) -> list[dict]:
    """The ``[raised]`` lines in a cell's output: each distinct (class, message), at most ``RAISED_KEPT``."""
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


#: Other errors' messages: a pattern that matches one would pass on that error too.
UNRELATED = ("division by zero", "index 3 is out of bounds for dimension 0 with size 2",
             "expected scalar type Float but found Double", "name 'x' is not defined",
             "unsupported operand type(s) for +: 'int' and 'str'",
             "[Errno 2] No such file or directory: 'data.csv'", "CUDA out of memory. Tried to allocate 2.00 GiB")


def _alike(a: str, b: str) -> bool:
    """Two messages of one error, their numbers aside (an IndexError's index and size)."""
    a, b = (re.sub(r"-?\d+(?:\.\d+)?", "N", t) for t in (a, b))
    return a in b or b in a or difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def _check_pattern(match: str, message: str | None = None) -> None:
    """Refuse a pattern that matches about any message (the empty string, or no word of three
    letters); once ``message`` is caught, also one matching an ``UNRELATED`` message unlike it."""
    if not isinstance(match, str) or re.search(match, "") is not None \
            or not re.search(r"[A-Za-z]{3}", re.sub(r"\\.", "", match)):
        raise ValueError(f"message pattern {match!r} matches any message: name the "
                         "message (a word of it, at least, that only this error has)")
    for other in UNRELATED if message is not None else ():
        if not _alike(other, message) and re.search(match, other):
            raise ValueError(f"message pattern {match!r} also matches {other!r}, the message "
                             "of an unrelated error: the check would pass on it too; match "
                             f"words only this message has:\n{message}")


def _extent(x) -> tuple[int, int]:
    """[start, end) byte range that a tensor (its whole storage) or array can touch."""
    if hasattr(x, "untyped_storage"):
        start = x.untyped_storage().data_ptr()
        return start, start + x.untyped_storage().nbytes()
    import numpy as np

    return getattr(np.lib, "array_utils", np).byte_bounds(x)  # moved in NumPy 2


def shares_memory(a, b) -> bool:
    """True when tensors or NumPy arrays ``a`` and ``b`` can touch the same bytes: two tensors
    the same storage, across the NumPy bridge overlapping byte ranges; never a meta or empty one."""
    if getattr(a, "is_meta", False) or getattr(b, "is_meta", False):
        return False
    (a0, a1), (b0, b1) = _extent(a), _extent(b)
    if a0 == a1 or b0 == b1:
        return False
    if hasattr(a, "untyped_storage") and hasattr(b, "untyped_storage"):
        return a0 == b0
    return a0 < b1 and b0 < a1


def glue(name: str, value, display: bool = False):
    """Publish ``value`` for ``{glue}`name``` with myst-nb; without myst-nb only return it."""
    try:
        from myst_nb import glue as _glue
    except ImportError:  # a downloaded notebook opened without myst-nb
        return value
    _glue(name, value, display=display)
    return value


#: GPU detection's one home (tests/test_one_home.py): per device kind, the probe (a path
#: under ``torch``, called with no argument) and what ``needs`` says is missing.
DEVICES = {"cuda": ("cuda.is_available", "a CUDA GPU"),
           "mps": ("backends.mps.is_available", "Apple MPS")}
#: Code gated on a device: a call of ``fences.needs``, or ``needs("cuda")`` imported bare.
GATE = re.compile(r"\bfences\.needs\(|\bneeds\(\s*[\"'](?:" + "|".join(DEVICES) + r")[\"']")


def probe(device: str):
    """The torch function that says whether ``device`` is here (``DEVICES``)."""
    import torch

    if device not in DEVICES:
        raise ValueError(f"unknown device kind {device!r}")
    return functools.reduce(getattr, DEVICES[device][0].split("."), torch)


def available(device: str) -> bool:
    """True when ``device`` ("cuda", "mps") can run code here; prints nothing."""
    return bool(probe(device)())


def needs(device: str) -> bool:
    """``available(device)``; when False, also print a ``SKIP_MARKER`` line (a reported skip)."""
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
    """Record and return ``value``, which may differ between torch releases or builds: under the
    test plugin print ``[observed] label (name) = value`` (the "Verified on" page's words)."""
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
        m = _OBSERVED_LINE.match(line[len(OBSERVE_MARKER):].strip()) \
            if line.startswith(OBSERVE_MARKER) else None
        if m:
            name = m["named"] or m["name"]
            values[name] = m["value"]
            if m["label"]:
                labels[name] = m["label"]
    return values, labels


def table(rows, headers) -> None:
    """Display ``rows`` as a Markdown table (returns None: a last line echoes nothing)."""
    from IPython.display import Markdown, display

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))


def torch_build(version=None) -> str:
    """``torch 2.x (CUDA 12.8 build)``, of ``version`` (``torch.version``-like; the imported torch's)."""
    if version is None:
        import torch

        version = torch.version
    kind = (f"CUDA {version.cuda} build" if getattr(version, "cuda", None)
            else f"ROCm {version.hip} build" if getattr(version, "hip", None) else "CPU-only build")
    return f"torch {version.__version__} ({kind})"


def installed_torch_version():
    """torch's ``version`` module, read from its file without importing torch (seconds)."""
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
    """Decorator: run the claim's check at once on ``examples`` Hypothesis inputs (derandomised,
    no database; a failure is shrunk and printed), then print how many inputs it held on."""
    from hypothesis import HealthCheck, given, settings

    if not isinstance(examples, int) or examples < MIN_EXAMPLES:
        raise ValueError(f"forall(..., examples={examples!r}): a universal claim draws at least "
                         f"{MIN_EXAMPLES} examples (fences.MIN_EXAMPLES); the default is {EXAMPLES}")

    def decorate(check):
        seen = []

        # Hypothesis seeds from this function's source: changing it changes the inputs drawn.
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
