"""Assertion sensitivity: does each fence fail when what it expects is changed?

    python tools/mutate.py [CHAPTER.md ...] [--jobs N] [--timeout S]
                           [--allowlist FILE] [--json FILE] [--fence ID ...] [--list]
                                                                     (make mutate)

A fence that passes proves something only if it would fail were the claim
false. For every fence (a code cell tagged ``fence``, named by its
``fence-id``) this tool makes *mutants*: copies of the fence with one thing
it expects changed (``tools/mutants.py`` says what and where). Each mutant
runs on the chapter's state just before the fence: the chapter re-run up to
and including the mutated fence. A mutant is *killed* when the fence fails
(raises, times out, or leaves torch's global state other than the real
fence does); otherwise it *survived*: the fence cannot tell that
expectation from the changed one.

Speed: one root process imports torch once, with one intra-op thread
(forked children must not inherit a started OpenMP pool: they hang on it;
and the cores go to parallel mutants instead). Each chapter runs in a
process forked from it, executing its cells with ``exec`` in one namespace,
stdout and stderr captured. Before each fence, every mutant of that fence
is forked from the chapter process, so it starts from exactly the state
the fence would see and leaks nothing back; at most ``--jobs`` processes
(default: all cores) are busy at once across all chapters. Hypothesis does
not shrink in this run: a failing example is enough to kill, and shrinking
is what makes a failing ``forall`` slow.

Cells run as plain Python, not in a kernel: ``fences.glue`` (myst-nb's
``glue``, through IPython's ``display``) only prints, into the captured
output; a cell that needs a kernel (a ``%magic``, ``get_ipython()``) fails
here and is reported as an error.

A fence that prints ``fences.SKIP_MARKER`` (gated by ``fences.needs`` on a
device this machine lacks) is *not executed*: its mutants are counted
apart, never as killed. So is a mutant whose changed statement did not run
in the real fence (a branch for another build or release): *not reached*.
To tell, the real fence is line-traced when one of its mutants passed.

Survivors are printed with chapter, fence id, line in the ``.md`` file,
the original line and the mutated one. A survivor that is an equivalent
mutant (it cannot change the outcome) is justified in the allowlist
(``mutate-allowlist.yml``); any other survivor fails the run (exit 1), as
does a fence or cell that fails unmutated. Allowlist entries that match no
surviving mutant of a fence that ran are reported as stale.

The scores per chapter, the justified survivors and the open ones are
written to ``mutate-results.json`` (``--json``), which the "Verified on"
page renders through ``fencecheck.mutation``.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import io
import json
import os
import platform
import re
import resource
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import mutate_reuse  # noqa: E402 - tools/ is this script's folder
from fencecheck.chapter import cell_timeout  # noqa: E402
from mutants import Mutant, fence_mutants  # noqa: E402

ALLOWLIST = ROOT / "mutate-allowlist.yml"
RESULTS = ROOT / "mutate-results.json"
#: Seconds a mutant may run: the cell timeout, whose one home is _config.yml's
#: ``execute.timeout`` (``fencecheck.chapter.cell_timeout``, which the suite and the site
#: build read too), so a mutant that hangs is stopped exactly when the suite would fail it.
TIMEOUT = cell_timeout(ROOT)


# ---------------------------------------------------------------------------
# Reading a chapter


@dataclass
class Cell:
    index: int          # code cell index in the chapter
    source: str
    line: int           # .md line of the source's first line
    fence: str | None   # the fence id (or a stand-in when the fence has none); None: not a fence
    has_id: bool = True


def read_chapter(path: Path, root: Path = ROOT) -> tuple[str, list[Cell]]:
    """The chapter's name (relative to ``root``) and its code cells, fences named.

    Does not lint: a fence without a ``fence-id`` gets the stand-in
    ``<chapter>-cell-<index>`` so that old chapters can be measured too.
    """
    from fencecheck import lint
    from fencecheck.chapter import code_cell_lines, parse

    path = Path(path).resolve()
    text = path.read_text(encoding="utf-8")
    nb = parse(text, path)
    md = text.splitlines()
    directives = code_cell_lines(nb)
    try:
        name = path.relative_to(root.resolve()).as_posix()
    except ValueError:
        name = path.as_posix()
    cells = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for index, (cell, directive) in enumerate(zip(code, directives)):
        ident = lint.fence_id(cell) if lint.is_fence(cell) else None
        has_id = ident is not None or not lint.is_fence(cell)
        if lint.is_fence(cell) and ident is None:
            ident = f"{path.stem}-cell-{index}"
        cells.append(Cell(index, cell.source, _first_source_line(md, directive, cell.source),
                          ident, has_id))
    return name, cells


def _first_source_line(md: list[str], directive: int, source: str) -> int:
    """The .md line where the cell's source starts (after its options)."""
    lines = source.splitlines()
    for k in range(directive, min(directive + 40, len(md))):
        if md[k:k + len(lines)] == lines:
            return k + 1
    return directive + 1


# ---------------------------------------------------------------------------
# Running: cells with exec, mutants in forked processes


def execute(source: str, namespace: dict, filename: str, trace: bool = False) -> dict:
    """Run one cell in ``namespace``; capture its output; never raise.

    Returns ``{"ok", "error", "stdout", "seconds", "lines"}``; ``error`` is
    the exception's type and first line; ``lines`` (with ``trace``) the
    cell's line numbers that ran, functions it defines included.
    """
    out = io.StringIO()
    start = time.perf_counter()
    error = ""
    ran: set[int] = set()
    try:
        code = compile(source, filename, "exec")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), \
                _lines_run(filename, ran) if trace else contextlib.nullcontext():
            exec(code, namespace)
    except BaseException as exc:  # noqa: BLE001 - a fence may raise anything; it is the result
        if isinstance(exc, _Timeout):  # an in-process mutant out of time: its runner reports it
            raise
        lines = str(exc).strip().splitlines()
        error = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
        if isinstance(exc, KeyboardInterrupt):
            raise
    return {"ok": not error, "error": error, "stdout": out.getvalue()[-20000:],
            "seconds": time.perf_counter() - start, "lines": sorted(ran)}


@contextlib.contextmanager
def _lines_run(filename: str, ran: set[int]):
    """Record the line numbers run in code compiled as ``filename`` (and only there)."""
    def local(frame, event, arg):
        if event == "line":
            ran.add(frame.f_lineno)
        return local

    def call(frame, event, arg):
        return local if frame.f_code.co_filename == filename else None

    previous = sys.gettrace()
    sys.settrace(call)
    try:
        yield
    finally:
        sys.settrace(previous)


def global_state() -> dict[str, str]:
    from fences import state

    return {k: str(v) for k, v in state.read().items()}


class Child:
    """A forked process that runs ``work()`` and sends back its JSON-able result."""

    def __init__(self, work, timeout: float | None = None, tag=None, quiet: bool = True):
        self.tag, self.result, self.timed_out = tag, None, False
        self.deadline = time.monotonic() + timeout if timeout else None
        read, write = os.pipe()
        sys.stdout.flush(), sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(read)
                if quiet:  # C++ warnings go straight to fd 2; this run reports through the pipe
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 1), os.dup2(devnull, 2)
                data = json.dumps(work()).encode()
                with os.fdopen(write, "wb") as pipe:
                    pipe.write(data)
            except BaseException:  # noqa: BLE001
                code = 70
                try:
                    os.write(write, json.dumps({"crash": traceback.format_exc()[-2000:]}).encode())
                except OSError:
                    pass
            finally:
                os._exit(code)
        os.close(write)
        self.pid, self.fd, self.chunks = pid, read, []

    def feed(self) -> bool:
        """Read what is available; True once the child closed its end (it has finished)."""
        chunk = os.read(self.fd, 1 << 16)
        if chunk:
            self.chunks.append(chunk)
            return False
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        raw = b"".join(self.chunks)
        try:
            self.result = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            self.result = None
        if self.result is None:
            self.result = {"crash": f"the process ended with status {status} and no result"}
        return True

    def kill(self) -> None:
        self.timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.close(self.fd)
        os.waitpid(self.pid, 0)


def gather(children: list[Child], on_done, launch=None) -> None:
    """Wait for ``children``; ``on_done(child)`` as each ends (one past its deadline is killed
    first). ``launch(block)`` starts another Child or returns None; it is called until it
    returns None, at the start and after each end, with ``block`` true when nothing runs."""
    running = {c.fd: c for c in children}

    def fill():
        while launch and (new := launch(not running)) is not None:
            running[new.fd] = new

    fill()
    while running:
        deadlines = [c.deadline for c in running.values() if c.deadline]
        wait = min(1.0, max(0.0, min(deadlines) - time.monotonic())) if deadlines else 1.0
        ready, _, _ = select.select(list(running), [], [], wait)
        finished = [running.pop(fd) for fd in ready if running[fd].feed()]
        now = time.monotonic()
        for fd, child in list(running.items()):
            if child.deadline and now > child.deadline:
                child.kill()
                finished.append(running.pop(fd))
        for child in finished:
            on_done(child)
        fill()


def run_mutants(mutants: list[Mutant], namespace: dict, slots, timeout: float) -> dict[int, dict]:
    """Run each mutant in a process forked from this one; its raw result by mutant number."""
    pending = list(mutants)
    results: dict[int, dict] = {}

    def work_for(mutant):
        def work():
            before = time.perf_counter()
            result = execute(mutant.source, namespace, f"<mutant {mutant.fence} #{mutant.number}>")
            result["state"] = global_state() if result["ok"] else {}
            result["seconds"] = time.perf_counter() - before
            del result["stdout"]  # only the real fence's output is read (for the skip marker)
            return result
        return work

    def launch(block):
        if not pending or not slots.acquire(block):
            return None
        mutant = pending.pop(0)
        return Child(work_for(mutant), timeout, tag=mutant)

    def done(child):
        slots.release()
        result = dict(child.result or {})
        if child.timed_out:
            result = {"ok": False, "error": f"timed out after {timeout:.0f} s", "timeout": True}
        results[child.tag.number] = result

    gather([], done, launch)
    return results


#: Libraries whose thread pools do not survive a fork: once one is imported in a chapter,
#: a child forked from the chapter's process inherits the pool's locks but not its
#: threads, and hangs (or aborts) on its first call into the library. Seen here with
#: jax 0.10.2: its CPU client starts 15 threads on first use. (torch's own threads,
#: with one intra-op thread, fork safely: every other chapter forks.)
FORK_UNSAFE = ("jax",)


def fork_safe() -> bool:
    return not any(name in sys.modules for name in FORK_UNSAFE)


def _isolated(namespace: dict) -> dict:
    """A copy of the chapter's namespace for one in-process mutant: data deep-copied (so an
    in-place change does not reach the real fence), what cannot be copied shared."""
    import copy

    out, memo = {}, {}   # one memo: two names for one object stay one object
    for name, value in namespace.items():
        if name.startswith("__") or callable(value) or type(value).__name__ == "module":
            out[name] = value
            continue
        try:
            out[name] = copy.deepcopy(value, memo)
        except Exception:  # noqa: BLE001 - an object that cannot be copied is shared
            out[name] = value
    return out


@contextlib.contextmanager
def _random_kept():
    """torch's, NumPy's and Python's global random state as they were, after the block."""
    import random

    import numpy as np
    import torch

    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])


class _Timeout(BaseException):
    """Raised in the main thread when an in-process mutant runs out of time."""


@contextlib.contextmanager
def _deadline(seconds: float):
    def expire(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_mutants_here(mutants: list[Mutant], namespace: dict, slots, timeout: float
                     ) -> dict[int, dict]:
    """Run each mutant in this process, one at a time: where forking is not safe.

    Each runs on a copy of the namespace, with the random state put back after
    it and warning filters restored; its global state is read as in a child. A
    mutant that changes another global setting cannot be undone here: it is
    killed, and the fence's later mutants are errors (rerun the chapter alone).
    """
    import warnings

    results: dict[int, dict] = {}
    before = global_state()
    tainted = ""
    for mutant in mutants:
        if tainted:
            results[mutant.number] = {"crash": f"not run: mutant #{tainted} changed a global "
                                      "setting in a process that cannot fork"}
            continue
        with slots, _random_kept(), warnings.catch_warnings():
            try:
                with _deadline(timeout):
                    result = execute(mutant.source, _isolated(namespace),
                                     f"<mutant {mutant.fence} #{mutant.number}>")
            except _Timeout:
                result = {"ok": False, "error": f"timed out after {timeout:.0f} s",
                          "timeout": True}
            result["state"] = global_state() if result["ok"] else {}
            result.pop("stdout", None)
        if global_state() != before:
            tainted = str(mutant.number)
            result = {"ok": False, "error": "global state differs: the mutant changed a "
                      "global setting and did not restore it"}
        results[mutant.number] = result
    return results


def classify(mutant: Mutant, result: dict, original: dict, state_after: dict) -> None:
    """Set the mutant's outcome from its run and the real fence's run."""
    from fences import SKIP_MARKER

    if not original["ok"]:
        mutant.outcome, mutant.detail = "error", f"the fence itself fails: {original['error']}"
    elif SKIP_MARKER in original["stdout"]:
        mutant.outcome = "not-executed"
        mutant.detail = original["stdout"].split(SKIP_MARKER, 1)[1].strip().splitlines()[0]
    elif "crash" in result:
        mutant.outcome, mutant.detail = "error", result["crash"].strip().splitlines()[-1]
    elif result.get("timeout"):
        # a hang is not a failing fence: a fork can hang on a library's threads (JAX's
        # pool, an OpenMP pool) whatever the fence expects; never counted as killed
        mutant.outcome, mutant.detail = "timeout", result["error"]
    elif "forked subprocess" in result.get("error", ""):
        # torch cannot use CUDA in a process forked after CUDA was initialised
        mutant.outcome, mutant.detail = "not-executed", result["error"]
    elif not result["ok"]:
        mutant.outcome, mutant.detail = "killed", result["error"]
    elif result.get("state") != state_after:
        changed = sorted(k for k in state_after if result["state"].get(k) != state_after[k])
        mutant.outcome, mutant.detail = "killed", "global state differs: " + ", ".join(changed)
    elif not set(range(mutant.statement[0], mutant.statement[1] + 1)) & set(original["lines"]):
        # the changed statement never ran (a branch for another build or release): the
        # mutant could not fail here, which says nothing about the fence
        mutant.outcome = "not-reached"
        mutant.detail = "the changed statement did not run in this run of the fence"
    else:
        mutant.outcome = "survived"


def run_chapter(path: Path, slots, timeout: float, fences_wanted: set[str] | None = None,
                root: Path = ROOT, environment: str = "", previous: dict | None = None) -> dict:
    """Execute a chapter cell by cell, forking each fence's mutants just before it runs.

    With an ``environment`` key, a fence whose key (``mutate_reuse.fence_key``)
    matches its entry in ``previous`` takes its recorded outcomes instead of
    running its mutants, and execution stops after the last fence that runs.

    Returns the chapter's record: its mutants (with outcomes), fences, and
    cells that failed.
    """
    name, cells = read_chapter(path, root)
    os.chdir(Path(path).resolve().parent)
    namespace = {"__name__": "__main__"}
    record = {"chapter": name, "fences": [], "mutants": [], "errors": [], "in_process": [],
              "reused": 0}
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    keys = mutate_reuse.fence_keys(environment, [c.source for c in cells])
    made, reuse = {}, {}
    for cell, key in zip(cells, keys):
        if cell.fence and (fences_wanted is None or cell.fence in fences_wanted):
            made[cell.index] = fence_mutants(cell.source, name, cell.fence, cell.line)
            entry = (previous or {}).get((name, cell.fence))
            if environment and mutate_reuse.reusable(entry, key, made[cell.index]):
                reuse[cell.index] = entry
    last = max((i for i in made if i not in reuse), default=-1)
    for cell, key in zip(cells, keys):
        wanted = cell.index in made
        if cell.index in reuse:
            entry, mutants = reuse[cell.index], made[cell.index]
            mutate_reuse.apply(entry, mutants)
            record["mutants"].extend(m.record() for m in mutants)
            record["fences"].append({**entry, "reused": True})
            record["reused"] += 1
            if cell.index > last:
                continue
        if cell.index > last:
            continue   # no mutant runs after the last fence that is not reused
        mutants = made.get(cell.index, []) if cell.index not in reuse else []
        if wanted and not parses(cell.source):
            record["errors"].append(f"{name}:{cell.line} fence {cell.fence} is not plain "
                                    "Python (a magic?): it cannot be mutated")
        started = time.perf_counter()
        runner = run_mutants if fork_safe() else run_mutants_here
        if mutants and runner is run_mutants_here:
            record["in_process"].append(cell.fence)
        results = runner(mutants, namespace, slots, timeout) if mutants else {}
        mutant_seconds = time.perf_counter() - started
        with slots:
            # tracing costs up to 7x on a Python-heavy fence: only when a mutant passed
            # and the question "did its changed statement run?" has to be answered
            original = execute(cell.source, namespace, f"{name}:cell {cell.index}",
                               trace=any(r.get("ok") for r in results.values()))
            state_after = global_state()
        for mutant in mutants:
            classify(mutant, results.get(mutant.number, {"crash": "no result"}), original, state_after)
            record["mutants"].append(mutant.record())
        if wanted and cell.index not in reuse:
            fence = {"fence": cell.fence, "chapter": name, "line": cell.line,
                     "has_id": cell.has_id, "mutants": len(mutants),
                     "seconds": round(original["seconds"], 3),
                     "mutant_seconds": round(mutant_seconds, 3), "ran": today}
            if original["ok"] and all(m.outcome != "error" for m in mutants):
                # only a clean run is reused: an error is looked at again next time
                fence["key"] = key
                fence["outcomes"] = mutate_reuse.outcomes([m.record() for m in mutants])
            record["fences"].append(fence)
        if not original["ok"]:
            record["errors"].append(f"{name}:{cell.line} cell {cell.index}"
                                    f"{' (fence ' + cell.fence + ')' if cell.fence else ''} "
                                    f"fails: {original['error']}")
    return record


#: The functions whose code decides a mutant's outcome: part of every fence's reuse key.
def deciding() -> list:
    return [execute, _lines_run, run_mutants, run_mutants_here, _isolated, _random_kept,
            classify, run_chapter, prepare_root, fork_safe, global_state]


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def prepare_root() -> None:
    """The process every chapter is forked from: torch imported, single-threaded, no shrinking."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import torch

    # Forked children must not inherit a started OpenMP pool (they hang on it), and the
    # cores are used by parallel mutants instead: one intra-op thread everywhere.
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    import fencecheck.upstream.myst_nb  # noqa: F401 - the chapter reader, imported once here
    import matplotlib  # noqa: F401
    import numpy  # noqa: F401
    from hypothesis import Phase, settings

    # A failing example kills the mutant; shrinking it only costs time.
    settings.register_profile("tensor-fences-mutate", phases=[Phase.explicit, Phase.reuse,
                                                             Phase.generate],
                              report_multiple_bugs=False)
    settings.load_profile("tensor-fences-mutate")
    import fences  # noqa: F401



def run_book(paths: list[Path], jobs: int, timeout: float, fences_wanted=None,
             root: Path = ROOT, progress=print, environment: str = "",
             previous: dict | None = None) -> list[dict]:
    """Every chapter in its own forked process, at most ``jobs`` busy processes in all."""
    import multiprocessing

    prepare_root()
    slots = multiprocessing.get_context("fork").BoundedSemaphore(jobs)
    records = {}

    def chapter_work(path):
        return lambda: run_chapter(path, slots, timeout, fences_wanted, root, environment,
                                   previous)

    children = [Child(chapter_work(p), None, tag=p, quiet=True) for p in paths]

    def done(child):
        rec = child.result
        if "crash" in rec:
            rec = {"chapter": str(child.tag), "fences": [], "mutants": [],
                   "errors": [f"{child.tag}: the chapter's process crashed: {rec['crash']}"]}
        records[child.tag] = rec
        c = tally(rec)
        reused = rec.get("reused", 0)
        progress(f"mutate: {rec['chapter']}: {c['killed']} of {c['total']} mutants killed, "
                 f"{c['survived']} survived, {c['not_executed'] + c['not_reached']} did not run"
                 + (f", {len(rec['errors'])} error(s)" if rec["errors"] else "")
                 + (f"; {reused} of {c['fences']} fences reused" if reused else "")
                 + (f"; {len(rec.get('in_process', []))} fence(s) run in-process (the chapter "
                    f"imported {', '.join(FORK_UNSAFE)})" if rec.get("in_process") else ""))

    gather(children, done)
    return [records[p] for p in paths]


# ---------------------------------------------------------------------------
# The allowlist and the verdict


def _norm(text: str) -> str:
    return " ".join(str(text).split())


#: The fewest words a reason can say why a mutant cannot change the outcome in.
REASON_WORDS = 6
#: Words that mark a reason not yet written.
PLACEHOLDER = re.compile(r"\b(?:todo|fixme|tbd|tbc|xxx+|placeholder|lorem|ipsum|fill (?:this )?in|"
                         r"to be (?:written|done|decided))\b|\?\?\?", re.I)
#: The reason the report prints in the entry to paste (a reason not yet written).
TEMPLATE = "why this mutant cannot change the outcome"


def reason_problem(reason: str) -> str | None:
    """What is wrong with an allowlist reason that says nothing, or None: a placeholder
    word (TODO, FIXME, tbd, xxx...), the report's template text, or under
    ``REASON_WORDS`` words."""
    text = " ".join(reason.split())
    found = PLACEHOLDER.search(text)
    if found:
        return f"{text!r} is a placeholder ({found.group(0)!r}): say why the mutant cannot change the outcome"
    if text.strip(" .\"'").lower() == TEMPLATE:
        return f"{text!r} is the report's template: say why this mutant cannot change the outcome"
    words = re.findall(r"[\w()\[\].,*+-]+", text)
    if len(words) < REASON_WORDS:
        return (f"{text!r} says too little ({len(words)} words, at least {REASON_WORDS}): say why "
                "the mutant cannot change the outcome")
    return None


def load_allowlist(path: Path) -> list[dict]:
    """The justified survivors: a YAML list of {fence, reason, and mutated or operator}.

    Each entry names the fence and why the mutant cannot change the outcome
    (``reason``), and identifies the mutant by ``mutated`` (the mutated
    line as the report prints it), optionally ``original`` (the line
    before), or by ``operator`` alone for every survivor of that operator
    in the fence.
    """
    import yaml

    path = Path(path)
    if not path.exists():
        return []
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a YAML list of entries")
    allowed = {"fence", "reason", "mutated", "original", "operator", "kind"}
    for n, entry in enumerate(entries, 1):
        where = f"{path.name} entry {n}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected a mapping")
        unknown = set(entry) - allowed
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        if not entry.get("fence") or not str(entry.get("reason", "")).strip():
            raise ValueError(f"{where}: needs `fence` and a `reason`")
        if entry.setdefault("kind", "equivalent") not in KINDS:
            raise ValueError(f"{where}: kind {entry['kind']!r}; one of {', '.join(KINDS)}")
        if entry.get("kind") == "unmeasured":
            if "mutated" in entry or "operator" in entry or "original" in entry:
                raise ValueError(f"{where}: kind unmeasured names a fence (or a pattern "
                                 "such as '*-ex-*'), not a mutant")
        elif "mutated" not in entry and "operator" not in entry:
            raise ValueError(f"{where}: needs `mutated` (the mutated line) or `operator`")
        empty = reason_problem(str(entry["reason"]))
        if empty:
            raise ValueError(f"{where} (fence {entry['fence']}): the reason {empty}")
    return entries


#: Why a survivor is justified. ``equivalent``: it cannot change the outcome on any
#: release the book is verified on. ``release``: it survives on this release only and
#: is killed on another, where torch behaves differently (a raise check accepting the
#: class each release raises, which the fence records): not equivalent, and shown apart.
#: ``timeout``: a mutant that runs out of time (never counted as killed) is expected to:
#: the reason says why its hang is the fence failing. ``unmeasured``: a fence (``fence``
#: may be a pattern, ``*-ex-*``) with nothing the operators change, or none of whose
#: changed statements ran here; the reason says what else proves it can fail.
KINDS = ("equivalent", "release", "timeout", "unmeasured")


def matches(entry: dict, mutant: dict) -> bool:
    if entry.get("kind") == "unmeasured" or entry["fence"] != mutant["fence"]:
        return False
    if "operator" in entry and entry["operator"] != mutant["operator"]:
        return False
    if "mutated" in entry and _norm(entry["mutated"]) != _norm(mutant["mutated"]):
        return False
    if "original" in entry and _norm(entry["original"]) != _norm(mutant["original"]):
        return False
    return True


def judge(records: list[dict], allowlist: list[dict], whole_book: bool = False) -> dict:
    """Mark justified survivors; return open survivors, stale entries and errors.

    An entry is stale when it justifies no survivor of a fence that ran; on the
    whole book, an entry naming a fence that no longer exists is stale too.
    """
    mutants = [m for rec in records for m in rec["mutants"]]
    fences_run = {f["fence"] for rec in records for f in rec["fences"]}
    used = [False] * len(allowlist)
    survivors, timeouts, unmeasured = [], [], []
    for m in mutants:
        if m["outcome"] not in ("survived", "timeout"):
            continue
        timeout = m["outcome"] == "timeout"
        for i, entry in enumerate(allowlist):
            if (entry.get("kind") == "timeout") == timeout and matches(entry, m):
                m["reason"], used[i] = str(entry["reason"]).strip(), True
                if not timeout:
                    m["outcome"], m["kind"] = "justified", entry.get("kind", "equivalent")
                break
        else:
            (timeouts if timeout else survivors).append(m)
    for rec in records:
        for f in rec["fences"]:
            if not _unmeasured(f, rec["mutants"]):
                continue
            for i, entry in enumerate(allowlist):
                if entry.get("kind") == "unmeasured" and fnmatch.fnmatchcase(f["fence"], entry["fence"]):
                    f["unmeasured_reason"], used[i] = str(entry["reason"]).strip(), True
                    break
            else:
                unmeasured.append({"chapter": rec["chapter"], "line": f["line"],
                                   "fence": f["fence"], "why": _unmeasured(f, rec["mutants"])})

    def ran(entry):
        if entry.get("kind") == "unmeasured":
            return any(fnmatch.fnmatchcase(f, entry["fence"]) for f in fences_run)
        return entry["fence"] in fences_run

    stale = [e for e, u in zip(allowlist, used) if not u and (whole_book or ran(e))]
    errors = [e for rec in records for e in rec["errors"]]
    errors += [f"{m['chapter']}:{m['line']} {m['fence']} mutant #{m['number']}: {m['detail']}"
               for m in mutants if m["outcome"] == "error" and not m["detail"].startswith("the fence")]
    return {"survivors": survivors, "stale": stale, "errors": errors, "timeouts": timeouts,
            "unmeasured": unmeasured}


def _unmeasured(fence: dict, mutants: list[dict]) -> str:
    """Why a fence that ran is not measured ("" when it is): no mutant, or every mutant's
    changed statement did not run (its asserts were not reached)."""
    if not fence.get("mutants"):
        return "nothing the operators change (no literal expectation, comparison or raise check)"
    own = [m for m in mutants if m["fence"] == fence["fence"] and m["chapter"] == fence.get(
        "chapter", m["chapter"])]
    if own and all(m["outcome"] == "not-reached" for m in own):
        return "none of the statements its mutants change ran here (its asserts were not reached)"
    return ""


#: Outcomes of mutants that did not run here; counted apart, never as killed.
NOT_RUN = ("not-executed", "not-reached")


def tally(record: dict) -> dict:
    """Counts of one chapter. ``total`` counts the mutants that ran (killed, survived,
    justified, errors); ``not_executed`` those of fences gated on a missing device,
    ``not_reached`` those whose changed statement did not run."""
    c = {"fences": len(record["fences"]), "total": 0, "killed": 0, "survived": 0,
         "justified": 0, "errors": 0, "timeout": 0, "not_executed": 0, "not_reached": 0}
    for m in record["mutants"]:
        c[m["outcome"].replace("-", "_").replace("error", "errors")] += 1
        c["total"] += m["outcome"] not in NOT_RUN
    c["score"] = round(c["killed"] / c["total"], 4) if c["total"] else None
    return c


def by_operator(records: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for rec in records:
        for m in rec["mutants"]:
            if m["outcome"] in NOT_RUN:
                continue
            o = out.setdefault(m["operator"], {"total": 0, "killed": 0})
            o["total"] += 1
            o["killed"] += m["outcome"] == "killed"
    return dict(sorted(out.items()))


def summary(records: list[dict], verdict: dict, seconds: float, jobs: int) -> dict:
    """What mutate-results.json holds (rendered by fencecheck.mutation)."""
    import torch

    from fences import available, torch_build

    keep = ("chapter", "fence", "line", "operator", "original", "mutated")
    return {
        "torch": torch.__version__,
        "build": torch_build(),
        # asked only now: CUDA initialised in the root would be unusable in forked children
        "cuda_available": available("cuda"),
        "python": platform.python_version(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "seconds": round(seconds, 1),
        "jobs": jobs,
        "chapters": [{"chapter": rec["chapter"], **tally(rec)} for rec in records],
        # fences whose outcomes were taken from the last run (same key), not run again
        "reused": sum(rec.get("reused", 0) for rec in records),
        "in_process": [f"{rec['chapter']} {f}" for rec in records for f in rec.get("in_process", [])],
        "fences": [{"chapter": rec["chapter"], **f} for rec in records for f in rec["fences"]],
        "operators": by_operator(records),
        "justified": [{**{k: m[k] for k in keep}, "reason": m["reason"], "kind": m["kind"]}
                      for rec in records for m in rec["mutants"] if m["outcome"] == "justified"],
        "survivors": [{k: m[k] for k in keep} for m in verdict["survivors"]],
        "not_reached": [{k: m[k] for k in keep} for rec in records for m in rec["mutants"]
                        if m["outcome"] == "not-reached"],
        # counted as run, never as killed; each fails the run unless justified (kind timeout)
        "timeouts": [{**{k: m[k] for k in keep}, "reason": m.get("reason", "")}
                     for rec in records for m in rec["mutants"] if m["outcome"] == "timeout"],
        "stale": verdict["stale"],
        "errors": verdict["errors"],
        "fences_without_id": [f"{rec['chapter']}:{f['line']}" for rec in records
                              for f in rec["fences"] if not f["has_id"]],
        # fences with nothing the operators change (e.g. only `assert torch.equal(a, b)`
        # of two computed tensors): their sensitivity is not measured
        "unmeasured": [f"{rec['chapter']}:{f['line']} {f['fence']}" for rec in records
                       for f in rec["fences"] if _unmeasured(f, rec["mutants"])],
        # of those, the ones no allowlist entry (kind unmeasured) justifies: they fail the run
        "unmeasured_open": [f"{u['chapter']}:{u['line']} {u['fence']}: {u['why']}"
                            for u in verdict["unmeasured"]],
    }


def _where(m: dict) -> str:
    """A mutant's place as the report prints it: chapter:line, fence, operator."""
    return f"{m['chapter']}:{m['line']}  fence {m['fence']}  [{m['operator']}]"


def _listing(out, header: str, lines: list[str]) -> None:
    """A report section: a header line, then one indented line per item."""
    out(header)
    for line in lines:
        out(f"  {line}")


def survivor_text(m: dict) -> str:
    """A survivor as the report prints it: where, what changed, and an allowlist entry."""
    original = "\n".join("      - " + line for line in m["original"].splitlines())
    mutated = "\n".join("      + " + line for line in m["mutated"].splitlines())
    entry = (f"      allowlist entry:\n        - fence: {m['fence']}\n"
             f"          mutated: {json.dumps(' '.join(m['mutated'].split()))}\n"
             f"          reason: \"why this mutant cannot change the outcome\"")
    return f"  {_where(m)}\n{original}\n{mutated}\n{entry}"


def report(data: dict, verdict: dict, out=print) -> None:
    """The scores per chapter, then what needs the reader: survivors, stale entries, errors."""
    out("\n| chapter | fences | mutants run | killed | justified | survived | errors "
        "| timed out | not executed | not reached | killed of run |")
    out("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in data["chapters"]:
        score = f"{100 * c['score']:.0f}%" if c["score"] is not None else "-"
        out(f"| {c['chapter']} | {c['fences']} | {c['total']} | {c['killed']} | {c['justified']} "
            f"| {c['survived']} | {c['errors']} | {c.get('timeout', 0)} | {c['not_executed']} "
            f"| {c['not_reached']} "
            f"| {score} |")
    if verdict["survivors"]:
        out(f"\n{len(verdict['survivors'])} mutant(s) survived: the fence passes with the "
            "expectation changed. Strengthen the fence, or justify the mutant in "
            "mutate-allowlist.yml if it cannot change the outcome:")
        for m in verdict["survivors"]:
            out(survivor_text(m))
    if verdict["stale"]:
        _listing(out, f"\n{len(verdict['stale'])} stale allowlist entr(y/ies) match no surviving "
                 "mutant (the fence changed, or the mutant is now killed): remove them",
                 [json.dumps(e) for e in verdict["stale"]])
    if verdict["errors"]:
        _listing(out, f"\n{len(verdict['errors'])} error(s):", verdict["errors"])
    if data["not_reached"]:
        _listing(out, f"\nnote: {len(data['not_reached'])} mutant(s) changed a statement that "
                 "did not run here (a branch for another build or release); counted apart, "
                 "never killed:",
                 [f"{_where(m)}  {' '.join(m['mutated'].split())}" for m in data["not_reached"]])
    if verdict["timeouts"]:
        _listing(out, f"\n{len(verdict['timeouts'])} mutant(s) timed out: counted as run, not "
                 "as killed (a forked process can hang on a library's threads whatever the "
                 "fence expects). Make the fence fail instead of hanging, or justify the "
                 "timeout in mutate-allowlist.yml with `kind: timeout`:",
                 [f"{_where(m)}  {' '.join(m['mutated'].split())}" for m in verdict["timeouts"]])
    if verdict["unmeasured"]:
        _listing(out, f"\n{len(verdict['unmeasured'])} fence(s) are not measured: give them an "
                 "expectation the operators change, or justify them in mutate-allowlist.yml "
                 "with `kind: unmeasured` and what else proves they can fail:",
                 [f"{u['chapter']}:{u['line']} {u['fence']}: {u['why']}"
                  for u in verdict["unmeasured"]])
    if data["fences_without_id"]:
        out(f"\nnote: {len(data['fences_without_id'])} fence(s) have no fence-id; they are named "
            "<chapter>-cell-<index> here, which is not stable for the allowlist")
    mutants = sum(c["total"] + c["not_executed"] + c["not_reached"] for c in data["chapters"])
    if data.get("in_process"):
        out(f"\nnote: {len(data['in_process'])} fence(s) ran their mutants in the chapter's own "
            "process, one at a time, on a copy of its data: the chapter had imported a library "
            "whose threads do not survive a fork (JAX); a forked child hangs on its first call "
            "into it")
    fences_run = sum(c['fences'] for c in data['chapters'])
    reused = (f" ({data['reused']} fences' outcomes reused from the last run: their code, the "
              "cells before them, torch, the packages and the tool are unchanged; --fresh runs "
              "them)" if data.get("reused") else "")
    out(f"\nmutate: {mutants} mutants of {fences_run} fences{reused} "
        f"in {data['seconds']} s on {data['jobs']} job(s)"
        + (f" ({data['cpu_seconds']} s of CPU)" if "cpu_seconds" in data else ""))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapters to mutate (default: every chapter in _toc.yml)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per mutant")
    parser.add_argument("--allowlist", type=Path, default=ALLOWLIST)
    parser.add_argument("--json", type=Path, default=None,
                        help=f"write the results here (default: {RESULTS.relative_to(ROOT)} "
                        "when the whole book runs)")
    parser.add_argument("--fence", action="append", help="mutate only this fence id (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    parser.add_argument("--fresh", action="store_true",
                        help="run every mutant; do not reuse outcomes recorded in "
                        f"{RESULTS.relative_to(ROOT)} for fences whose key is unchanged")
    args = parser.parse_args(argv)

    from fencecheck.chapter import header_problems, toc_files

    whole_book = not args.chapters and not args.fence
    paths = args.chapters or [p for p in toc_files(ROOT) if p.exists()
                              and not header_problems(p.read_text(encoding="utf-8"))]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"mutate: no such chapter: {', '.join(missing)}", file=sys.stderr)
        return 2
    paths = [p.resolve() for p in paths]
    try:
        allowlist = load_allowlist(args.allowlist)
    except ValueError as exc:
        print(f"mutate: {exc}", file=sys.stderr)
        return 2
    wanted = set(args.fence) if args.fence else None
    if wanted:
        known = {c.fence for p in paths for c in read_chapter(p)[1] if c.fence}
        unknown = sorted(wanted - known)
        if unknown:
            print(f"mutate: no fence {', '.join(unknown)} in "
                  f"{', '.join(str(p) for p in args.chapters) or 'the book'}", file=sys.stderr)
            return 2
    if args.list:
        for path in paths:
            name, cells = read_chapter(path)
            for cell in cells:
                if cell.fence and (wanted is None or cell.fence in wanted):
                    for m in fence_mutants(cell.source, name, cell.fence, cell.line):
                        print(f"{m.key()} #{m.number}\n    - {m.original}\n    + {m.mutated}")
        return 0
    start = time.perf_counter()
    print(f"mutate: {len(paths)} chapter(s) on {args.jobs} job(s)", flush=True)
    environment = mutate_reuse.environment_key(deciding())
    # the record read is the one this run writes: mutate-results.json, or --json's file
    target = args.json or (RESULTS if whole_book else None)
    try:
        previous = {} if args.fresh else mutate_reuse.stored(target or RESULTS)
    except ValueError as exc:  # fencecheck.record.BadFile: named, with how to regenerate it
        print(f"mutate: {exc}", file=sys.stderr)
        return 2
    records = run_book(paths, args.jobs, args.timeout, wanted, environment=environment,
                       previous=previous)
    verdict = judge(records, allowlist, whole_book)
    data = summary(records, verdict, time.perf_counter() - start, args.jobs)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)  # every chapter and mutant process
    data["cpu_seconds"] = round(used.ru_utime + used.ru_stime, 1)
    report(data, verdict)
    if target:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"mutate: wrote {target}")
    return 1 if (verdict["survivors"] or verdict["errors"] or verdict["timeouts"]
                 or verdict["unmeasured"]) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
