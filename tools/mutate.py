"""Assertion sensitivity: does each fence fail when what it expects is changed? (``make mutate``)

Each mutant of a fence (``tools/mutants.py``) runs on the chapter's state just before the fence: *killed*
when the fence fails (raises, times out, or leaves torch's global state other than the real fence does), else it
*survived*. docs/mutate.md has the rules (the allowlist, what is counted apart, exit codes, reuse). One root
process imports torch (one intra-op thread: a forked child hangs on a started OpenMP pool); each chapter runs
forked from it, its cells run with ``exec``; each mutant is forked from the chapter's process just before its
fence, at most ``--jobs`` busy in all. Hypothesis does not shrink: a failing example kills.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import fnmatch
import hashlib
import importlib.metadata
import inspect
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
import tomllib
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fencecheck.chapter import cell_timeout  # noqa: E402
from mutants import Mutant, fence_mutants  # noqa: E402 - tools/ is this script's folder

ALLOWLIST = ROOT / "mutate-allowlist.yml"
RESULTS = ROOT / "mutate-results.json"
#: Seconds a mutant may run: the cell timeout (_config.yml's ``execute.timeout``, its one home).
TIMEOUT = cell_timeout(ROOT)


@dataclass
class Cell:
    index: int          # code cell index in the chapter
    source: str
    line: int           # .md line of the source's first line
    fence: str | None   # the fence id (or a stand-in when the fence has none); None: not a fence
    has_id: bool = True


def read_chapter(path: Path, root: Path = ROOT) -> tuple[str, list[Cell]]:
    """The chapter's name (relative to ``root``) and its code cells, fences named. Not linted:
    a fence without a ``fence-id`` is named ``<chapter>-cell-<index>``."""
    from fencecheck import lint
    from fencecheck.chapter import parse

    path = Path(path).resolve()
    text = path.read_text(encoding="utf-8")
    nb = parse(text, path)
    try:
        name = path.relative_to(root.resolve()).as_posix()
    except ValueError:
        name = path.as_posix()
    cells = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for index, (cell, line) in enumerate(zip(code, lint.cell_lines(nb, text))):   # line: before the source
        ident = lint.fence_id(cell) if lint.is_fence(cell) else None
        stand_in = f"{path.stem}-cell-{index}" if lint.is_fence(cell) and ident is None else None
        cells.append(Cell(index, cell.source, line + 1, stand_in or ident, stand_in is None))
    return name, cells


class _Timeout(BaseException):
    """Raised in the main thread when an in-process mutant runs out of time."""


def execute(source: str, namespace: dict, filename: str, trace: bool = False) -> dict:
    """Run one cell in ``namespace``, output captured; never raises (but ``_Timeout``). ``error``: the exception's
    type and first line; ``lines`` (with ``trace``): the line numbers run of code compiled as ``filename``."""
    out = io.StringIO()
    start = time.perf_counter()
    error = ""
    ran: set[int] = set()

    def local(frame, event, arg):
        if event == "line":
            ran.add(frame.f_lineno)
        return local

    previous = sys.gettrace()
    try:
        code = compile(source, filename, "exec")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            if trace:
                sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename == filename else None)
            try:
                exec(code, namespace)
            finally:
                if trace:
                    sys.settrace(previous)
    except (_Timeout, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - a fence may raise anything; it is the result
        lines = str(exc).strip().splitlines()
        error = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
    return {"ok": not error, "error": error, "stdout": out.getvalue()[-20000:],
            "seconds": time.perf_counter() - start, "lines": sorted(ran)}


def global_state() -> dict[str, str]:
    from fences import state

    return {k: str(v) for k, v in state.read().items()}


class Child:
    """A forked process that runs ``work()`` and sends back its JSON-able result."""

    def __init__(self, work, timeout: float | None = None, tag=None):
        self.tag, self.result, self.timed_out, self.chunks = tag, None, False, []
        self.deadline = time.monotonic() + timeout if timeout else None
        self.fd, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid:
            os.close(write)
            return
        code = 70   # the child: never returns
        try:
            os.close(self.fd)
            devnull = os.open(os.devnull, os.O_WRONLY)   # C++ warnings go to fd 2; results through the pipe
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            try:
                data = json.dumps(work()).encode()
                code = 0
            except BaseException:  # noqa: BLE001
                data = json.dumps({"crash": traceback.format_exc()[-2000:]}).encode()
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
        finally:
            os._exit(code)

    def feed(self) -> bool:
        """Read what is available; True once the child closed its end (it has finished)."""
        chunk = os.read(self.fd, 1 << 16)
        if chunk:
            self.chunks.append(chunk)
            return False
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        with contextlib.suppress(json.JSONDecodeError):
            self.result = json.loads(b"".join(self.chunks) or b"null")
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
    """Wait for ``children``, ``on_done(child)`` as each ends (killed past its deadline). ``launch(block)`` starts
    another Child or returns None; called until None, at first and after each end, ``block`` when none runs."""
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
        for fd, child in list(running.items()):
            if child.deadline and time.monotonic() > child.deadline:
                child.kill()
                finished.append(running.pop(fd))
        for child in finished:
            on_done(child)
        fill()


def _timed_out(timeout: float) -> dict:
    return {"ok": False, "error": f"timed out after {timeout:.0f} s", "timeout": True}


def _mutant_run(mutant: Mutant, namespace: dict) -> dict:
    return execute(mutant.source, namespace, f"<mutant {mutant.fence} #{mutant.number}>")


def _settled(result: dict) -> dict:
    """A mutant's result with the global state it left; only the real fence's output is read."""
    result["state"] = global_state() if result["ok"] else {}
    result.pop("stdout", None)
    return result


def run_mutants(mutants: list[Mutant], namespace: dict, slots, timeout: float) -> dict[int, dict]:
    pending = list(mutants)
    results: dict[int, dict] = {}

    def launch(block):
        if not pending or not slots.acquire(block):
            return None
        mutant = pending.pop(0)
        return Child(lambda: _settled(_mutant_run(mutant, namespace)), timeout, tag=mutant)

    def done(child):
        slots.release()
        results[child.tag.number] = _timed_out(timeout) if child.timed_out else dict(child.result)

    gather([], done, launch)
    return results


#: Libraries whose thread pools do not survive a fork: once one is imported, a child forked
#: from the chapter inherits the pool's locks but not its threads, and hangs on its first call
#: into it (jax 0.10.2's CPU client starts 15 threads). torch's, with one thread, fork safely.
FORK_UNSAFE = ("jax",)


def _isolated(namespace: dict) -> dict:
    """A copy of the chapter's namespace for one in-process mutant: data deep-copied (so an
    in-place change does not reach the real fence), what cannot be copied shared."""
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


def run_mutants_here(mutants: list[Mutant], namespace: dict, slots, timeout: float
                     ) -> dict[int, dict]:
    """Run each mutant here, one at a time, where forking is not safe: on a copy of the namespace, the random states
    and warning filters put back after it. One that changes another global setting is killed, and the later ones
    are errors (rerun the chapter alone)."""
    import random
    import warnings

    import numpy as np
    import torch

    def expire(signum, frame):
        raise _Timeout()

    results: dict[int, dict] = {}
    before = global_state()
    tainted = ""
    for mutant in mutants:
        if tainted:
            results[mutant.number] = {"crash": f"not run: mutant #{tainted} changed a global "
                                      "setting in a process that cannot fork"}
            continue
        saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
        with slots, warnings.catch_warnings():
            previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                result = _mutant_run(mutant, _isolated(namespace))
            except _Timeout:
                result = _timed_out(timeout)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            _settled(result)   # read after the deadline, as in a forked child
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])
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
        # the changed statement never ran (a branch for another build or release)
        mutant.outcome = "not-reached"
        mutant.detail = "the changed statement did not run in this run of the fence"
    else:
        mutant.outcome = "survived"


def run_chapter(path: Path, slots, timeout: float, fences_wanted: set[str] | None = None,
                environment: str = "", previous: dict | None = None) -> dict:
    """Execute a chapter cell by cell, forking each fence's mutants just before it runs: its record. A fence whose key
    matches its entry in ``previous`` takes the recorded outcomes; execution stops after the last fence that runs."""
    name, cells = read_chapter(path)
    os.chdir(Path(path).resolve().parent)
    namespace = {"__name__": "__main__"}
    record = {"chapter": name, "fences": [], "mutants": [], "errors": [], "in_process": []}
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    keys = fence_keys(environment, [c.source for c in cells])
    made, reuse = {}, {}
    for cell, key in zip(cells, keys):
        if cell.fence and (fences_wanted is None or cell.fence in fences_wanted):
            made[cell.index] = fence_mutants(cell.source, name, cell.fence, cell.line)
            entry = (previous or {}).get((name, cell.fence))
            # reusable: the same key, and the same mutants (numbered alike) as when they ran
            if environment and entry and entry.get("key") == key and \
                    [o[0] for o in entry["outcomes"]] == [m.number for m in made[cell.index]]:
                reuse[cell.index] = entry
    last = max((i for i in made if i not in reuse), default=-1)
    for cell, key in zip(cells, keys):
        entry = reuse.get(cell.index)
        if entry:
            for mutant, (_, outcome, detail) in zip(made[cell.index], entry["outcomes"]):
                # a justified survivor is judged again against the allowlist
                mutant.outcome, mutant.detail = "survived" if outcome == "justified" else outcome, detail
            record["mutants"].extend(m.record() for m in made[cell.index])
            record["fences"].append({**entry, "reused": True})
        if cell.index > last:
            continue   # no mutant runs after the last fence that is not reused
        wanted = cell.index in made and not entry
        mutants = made[cell.index] if wanted else []
        if cell.index in made:
            try:
                ast.parse(cell.source)
            except SyntaxError:
                record["errors"].append(f"{name}:{cell.line} fence {cell.fence} is not plain Python (a magic?): "
                                        "it cannot be mutated")
        started = time.perf_counter()
        runner = run_mutants_here if any(name in sys.modules for name in FORK_UNSAFE) else run_mutants
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
        if wanted:
            fence = {"fence": cell.fence, "chapter": name, "line": cell.line,
                     "has_id": cell.has_id, "mutants": len(mutants),
                     "seconds": round(original["seconds"], 3),
                     "mutant_seconds": round(mutant_seconds, 3), "ran": today}
            if original["ok"] and all(m.outcome != "error" for m in mutants):
                # only a clean run is reused: an error is looked at again next time
                fence["key"] = key
                fence["outcomes"] = outcomes(mutants)
            record["fences"].append(fence)
        if not original["ok"]:
            record["errors"].append(f"{name}:{cell.line} cell {cell.index}"
                                    f"{' (fence ' + cell.fence + ')' if cell.fence else ''} "
                                    f"fails: {original['error']}")
    return record


def deciding() -> list:
    """The functions whose code decides a mutant's outcome: part of every fence's reuse key."""
    return [execute, _mutant_run, _settled, _timed_out, run_mutants, run_mutants_here, _isolated, classify,
            run_chapter, prepare_root, global_state]


#: What ``mutate-results.json`` holds per fence for reuse; a change of format is a new key.
FORMAT = 1
#: In the ``book`` extra but deciding no outcome: torch (hashed by its build file), the kernel
#: (mutants run with ``exec``) and the plotting library (figures are not fences).
NOT_DECIDING = {"torch", "ipykernel", "matplotlib"}


def chapter_packages(root: Path = ROOT) -> list[str]:
    """The distributions a fence's outcome depends on: the ``book`` extra less ``NOT_DECIDING``."""
    from packaging.requirements import Requirement

    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = (Requirement(req).name for req in project["optional-dependencies"]["book"])
    return sorted(n for n in names if n not in NOT_DECIDING)


def environment_key(deciding: list, root: Path = ROOT) -> str:
    """A fence's key but its chapter's code (docs/mutate.md, "Reuse"): torch's build, Python, the chapters'
    packages, the runtime, the operators, and the source of the functions in ``deciding``; not the verifier."""
    from fencecheck import cachekey

    digest = hashlib.sha256(f"format={FORMAT}\n".encode())
    digest.update(cachekey.torch_version_file().read_bytes())
    digest.update(f"python={sys.version_info[:2]}\n".encode())
    for name in chapter_packages(root):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}=={version}\n".encode())
    digest.update(cachekey.digest().encode())
    digest.update((root / "tools" / "mutants.py").read_bytes())
    for function in deciding:
        digest.update(inspect.getsource(function).encode())
    return digest.hexdigest()


def fence_keys(environment: str, sources: list[str]) -> list[str]:
    """For each code cell, the key of a fence there: the environment and every code cell up to and including it."""
    digest = hashlib.sha256(environment.encode())
    keys = []
    for source in sources:
        digest.update(b"\0cell\0" + source.encode())
        keys.append(digest.hexdigest()[:32])
    return keys


def stored(path: Path) -> dict[tuple[str, str], dict]:
    """The reusable fences of a recorded run by (chapter, fence id); empty with no record. A
    record that does not parse is an error naming it, never a silent re-run of every mutant."""
    from fencecheck.mutation import REGENERATE
    from fencecheck.record import read_json

    if not Path(path).exists():
        return {}
    return {(f["chapter"], f["fence"]): f for f in read_json(path, REGENERATE, ("fences",)).get("fences", [])
            if f.get("key") and "outcomes" in f}


def outcomes(mutants: list[Mutant]) -> list[list]:
    """One fence's mutants as stored: ``[number, outcome, detail]``, the detail kept only
    where the report shows it (not for an ordinary kill)."""
    return [[m.number, m.outcome, m.detail if m.outcome != "killed"
             or m.detail.startswith("timed out") else ""] for m in mutants]


def prepare_root() -> None:
    """The process every chapter is forked from: torch imported, single-threaded, no shrinking."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    import fencecheck.upstream.myst_nb  # noqa: F401 - the chapter reader, imported once here
    import matplotlib  # noqa: F401
    import numpy  # noqa: F401
    from hypothesis import Phase, settings

    settings.register_profile("tensor-fences-mutate", phases=[Phase.explicit, Phase.reuse, Phase.generate],
                              report_multiple_bugs=False)
    settings.load_profile("tensor-fences-mutate")
    import fences  # noqa: F401


def run_book(paths: list[Path], jobs: int, timeout: float, fences_wanted=None,
             environment: str = "", previous: dict | None = None) -> list[dict]:
    """Every chapter in its own forked process, at most ``jobs`` busy processes in all."""
    import multiprocessing

    prepare_root()
    slots = multiprocessing.get_context("fork").BoundedSemaphore(jobs)
    records = {}

    def done(child):
        rec = child.result
        if "crash" in rec:
            rec = {"chapter": str(child.tag), "fences": [], "mutants": [],
                   "errors": [f"{child.tag}: the chapter's process crashed: {rec['crash']}"]}
        records[child.tag] = rec
        c = tally(rec)
        reused = sum(1 for f in rec["fences"] if f.get("reused"))
        print(f"mutate: {rec['chapter']}: {c['killed']} of {c['total']} mutants killed, "
              f"{c['survived']} survived, {c['not_executed'] + c['not_reached']} did not run"
              + (f", {len(rec['errors'])} error(s)" if rec["errors"] else "")
              + (f"; {reused} of {c['fences']} fences reused" if reused else "")
              + (f"; {len(rec.get('in_process', []))} fence(s) run in-process (the chapter "
                 f"imported {', '.join(FORK_UNSAFE)})" if rec.get("in_process") else ""))

    gather([Child(lambda p=p: run_chapter(p, slots, timeout, fences_wanted, environment, previous),
                  tag=p) for p in paths], done)
    return [records[p] for p in paths]


#: The fewest words a reason can say why a mutant cannot change the outcome in.
REASON_WORDS = 6
#: Words that mark a reason not yet written.
PLACEHOLDER = re.compile(r"\b(?:todo|fixme|tbd|tbc|xxx+|placeholder|lorem|ipsum|fill (?:this )?in|"
                         r"to be (?:written|done|decided))\b|\?\?\?", re.I)
#: The reason the report prints in the entry to paste (a reason not yet written).
TEMPLATE = "why this mutant cannot change the outcome"
#: Why a survivor is justified: ``equivalent`` on every release; ``release``: killed on another release (shown apart);
#: ``timeout``: its hang is the fence failing; ``unmeasured``: a fence (or pattern, ``*-ex-*``) with nothing the
#: operators change or none of whose changed statements ran, the reason saying what else proves it can fail.
KINDS = ("equivalent", "release", "timeout", "unmeasured")


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def reason_problem(reason: str) -> str | None:
    """What is wrong with a reason that says nothing (a placeholder, the template, too few words), or None."""
    text = _norm(reason)
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
    """The justified survivors: a YAML list of {fence, reason, kind} and the mutant: ``mutated`` (the line as the
    report prints it; optionally ``original``) or ``operator`` (every survivor of it)."""
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
        if set(entry) - allowed:
            raise ValueError(f"{where}: unknown key(s) {sorted(set(entry) - allowed)}; "
                             f"allowed: {sorted(allowed)}")
        if not entry.get("fence") or not str(entry.get("reason", "")).strip():
            raise ValueError(f"{where}: needs `fence` and a `reason`")
        if entry.setdefault("kind", "equivalent") not in KINDS:
            raise ValueError(f"{where}: kind {entry['kind']!r}; one of {', '.join(KINDS)}")
        if entry["kind"] == "unmeasured":
            if {"mutated", "operator", "original"} & set(entry):
                raise ValueError(f"{where}: kind unmeasured names a fence (or a pattern "
                                 "such as '*-ex-*'), not a mutant")
        elif "mutated" not in entry and "operator" not in entry:
            raise ValueError(f"{where}: needs `mutated` (the mutated line) or `operator`")
        empty = reason_problem(str(entry["reason"]))
        if empty:
            raise ValueError(f"{where} (fence {entry['fence']}): the reason {empty}")
    return entries


def matches(entry: dict, mutant: dict) -> bool:
    return entry.get("kind") != "unmeasured" and entry["fence"] == mutant["fence"] and \
        entry.get("operator", mutant["operator"]) == mutant["operator"] and all(
            _norm(entry[k]) == _norm(mutant[k]) for k in ("mutated", "original") if k in entry)


def judge(records: list[dict], allowlist: list[dict], whole_book: bool = False) -> dict:
    """Mark justified survivors; return open survivors, stale entries and errors. An entry is stale when it justifies
    no survivor of a fence that ran (on the whole book, also when its fence no longer exists)."""
    mutants = [m for rec in records for m in rec["mutants"]]
    fences_run = {f["fence"] for rec in records for f in rec["fences"]}
    used = [False] * len(allowlist)
    survivors, timeouts, unmeasured = [], [], []
    for m in (m for m in mutants if m["outcome"] in ("survived", "timeout")):
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
            why = _unmeasured(f, rec["mutants"])
            if not why:
                continue
            for i, entry in enumerate(allowlist):
                if entry.get("kind") == "unmeasured" and fnmatch.fnmatchcase(f["fence"], entry["fence"]):
                    f["unmeasured_reason"], used[i] = str(entry["reason"]).strip(), True
                    break
            else:
                unmeasured.append({"chapter": rec["chapter"], "line": f["line"],
                                   "fence": f["fence"], "why": why})

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
    """Why a fence that ran is not measured ("" when it is): no mutant, or none of their statements ran."""
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
    """Counts of one chapter: ``total``, the mutants that ran; ``not_executed`` and ``not_reached``, the others."""
    c = {"fences": len(record["fences"]), "total": 0, "killed": 0, "survived": 0,
         "justified": 0, "errors": 0, "timeout": 0, "not_executed": 0, "not_reached": 0}
    for m in record["mutants"]:
        c[m["outcome"].replace("-", "_").replace("error", "errors")] += 1
        c["total"] += m["outcome"] not in NOT_RUN
    c["score"] = round(c["killed"] / c["total"], 4) if c["total"] else None
    return c


def summary(records: list[dict], verdict: dict, seconds: float, jobs: int) -> dict:
    """What mutate-results.json holds (rendered by fencecheck.mutation)."""
    import torch

    from fences import available, torch_build

    keep = ("chapter", "fence", "line", "operator", "original", "mutated")
    mutants = [m for rec in records for m in rec["mutants"]]
    fences = [{"chapter": rec["chapter"], **f} for rec in records for f in rec["fences"]]
    operators: dict[str, dict] = {}
    for m in sorted(mutants, key=lambda m: m["operator"]):
        if m["outcome"] not in NOT_RUN:
            o = operators.setdefault(m["operator"], {"total": 0, "killed": 0})
            o["total"] += 1
            o["killed"] += m["outcome"] == "killed"

    def where(m, *more):
        return {**{k: m[k] for k in keep}, **{k: m.get(k, "") for k in more}}

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
        "reused": sum(1 for f in fences if f.get("reused")),
        "in_process": [f"{rec['chapter']} {f}" for rec in records for f in rec.get("in_process", [])],
        "fences": fences,
        "operators": operators,
        "justified": [where(m, "reason", "kind") for m in mutants if m["outcome"] == "justified"],
        "survivors": [where(m) for m in verdict["survivors"]],
        "not_reached": [where(m) for m in mutants if m["outcome"] == "not-reached"],
        # counted as run, never as killed; each fails the run unless justified (kind timeout)
        "timeouts": [where(m, "reason") for m in mutants if m["outcome"] == "timeout"],
        "stale": verdict["stale"],
        "errors": verdict["errors"],
        "fences_without_id": [f"{f['chapter']}:{f['line']}" for f in fences if not f["has_id"]],
        # fences with nothing the operators change: their sensitivity is not measured
        "unmeasured": [f"{rec['chapter']}:{f['line']} {f['fence']}" for rec in records
                       for f in rec["fences"] if _unmeasured(f, rec["mutants"])],
        # of those, the ones no allowlist entry (kind unmeasured) justifies: they fail the run
        "unmeasured_open": [f"{u['chapter']}:{u['line']} {u['fence']}: {u['why']}"
                            for u in verdict["unmeasured"]],
    }


def _where(m: dict) -> str:
    return f"{m['chapter']}:{m['line']}  fence {m['fence']}  [{m['operator']}]"


def survivor_text(m: dict) -> str:
    original = "\n".join("      - " + line for line in m["original"].splitlines())
    mutated = "\n".join("      + " + line for line in m["mutated"].splitlines())
    entry = (f"      allowlist entry:\n        - fence: {m['fence']}\n"
             f"          mutated: {json.dumps(_norm(m['mutated']))}\n"
             f"          reason: \"{TEMPLATE}\"")
    return f"  {_where(m)}\n{original}\n{mutated}\n{entry}"


def report(data: dict, verdict: dict) -> None:
    print("\n| chapter | fences | mutants run | killed | justified | survived | errors "
          "| timed out | not executed | not reached | killed of run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in data["chapters"]:
        score = f"{100 * c['score']:.0f}%" if c["score"] is not None else "-"
        print(f"| {c['chapter']} | {c['fences']} | {c['total']} | {c['killed']} | {c['justified']} "
              f"| {c['survived']} | {c['errors']} | {c.get('timeout', 0)} | {c['not_executed']} "
              f"| {c['not_reached']} | {score} |")
    changed = lambda m: f"  {_where(m)}  {_norm(m['mutated'])}"  # noqa: E731
    for items, header, line in [
        (verdict["survivors"], "{n} mutant(s) survived: the fence passes with the expectation "
         "changed. Strengthen the fence, or justify the mutant in mutate-allowlist.yml if it "
         "cannot change the outcome:", survivor_text),
        (verdict["stale"], "{n} stale allowlist entr(y/ies) match no surviving mutant (the fence "
         "changed, or the mutant is now killed): remove them", lambda e: f"  {json.dumps(e)}"),
        (verdict["errors"], "{n} error(s):", lambda e: f"  {e}"),
        (data["not_reached"], "note: {n} mutant(s) changed a statement that did not run here (a "
         "branch for another build or release); counted apart, never killed:", changed),
        (verdict["timeouts"], "{n} mutant(s) timed out: counted as run, not as killed (a forked "
         "process can hang on a library's threads whatever the fence expects). Make the fence "
         "fail instead of hanging, or justify the timeout in mutate-allowlist.yml with "
         "`kind: timeout`:", changed),
        (verdict["unmeasured"], "{n} fence(s) are not measured: give them an expectation the "
         "operators change, or justify them in mutate-allowlist.yml with `kind: unmeasured` and "
         "what else proves they can fail:", lambda u: f"  {u['chapter']}:{u['line']} {u['fence']}: {u['why']}"),
    ]:
        if items:
            print("\n" + header.format(n=len(items)))
            for item in items:
                print(line(item))
    if data["fences_without_id"]:
        print(f"\nnote: {len(data['fences_without_id'])} fence(s) have no fence-id; they are named "
              "<chapter>-cell-<index> here, which is not stable for the allowlist")
    if data.get("in_process"):
        print(f"\nnote: {len(data['in_process'])} fence(s) ran their mutants in the chapter's own "
              "process, one at a time, on a copy of its data: the chapter had imported a library "
              "whose threads do not survive a fork (JAX); a forked child hangs on its first call "
              "into it")
    mutants = sum(c["total"] + c["not_executed"] + c["not_reached"] for c in data["chapters"])
    reused = (f" ({data['reused']} fences' outcomes reused from the last run: their code, the "
              "cells before them, torch, the packages and the tool are unchanged; --fresh runs "
              "them)" if data.get("reused") else "")
    print(f"\nmutate: {mutants} mutants of {sum(c['fences'] for c in data['chapters'])} fences"
          f"{reused} in {data['seconds']} s on {data['jobs']} job(s)"
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

    def fail(message: str) -> int:
        print(f"mutate: {message}", file=sys.stderr)
        return 2

    whole_book = not args.chapters and not args.fence
    paths = args.chapters or [p for p in toc_files(ROOT) if p.exists()
                              and not header_problems(p.read_text(encoding="utf-8"))]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        return fail(f"no such chapter: {', '.join(missing)}")
    paths = [p.resolve() for p in paths]
    try:
        allowlist = load_allowlist(args.allowlist)
    except ValueError as exc:
        return fail(str(exc))
    wanted = set(args.fence) if args.fence else None
    if wanted:
        unknown = sorted(wanted - {c.fence for p in paths for c in read_chapter(p)[1]})
        if unknown:
            return fail(f"no fence {', '.join(unknown)} in "
                        f"{', '.join(str(p) for p in args.chapters) or 'the book'}")
    if args.list:
        for path in paths:
            name, cells = read_chapter(path)
            for cell in cells:
                if cell.fence and (wanted is None or cell.fence in wanted):
                    for m in fence_mutants(cell.source, name, cell.fence, cell.line):
                        print(f"{m.chapter}:{m.line} {m.fence} [{m.operator}] #{m.number}\n"
                              f"    - {m.original}\n    + {m.mutated}")
        return 0
    start = time.perf_counter()
    print(f"mutate: {len(paths)} chapter(s) on {args.jobs} job(s)", flush=True)
    environment = environment_key(deciding())
    # the record read is the one this run writes: mutate-results.json, or --json's file
    target = args.json or (RESULTS if whole_book else None)
    try:
        previous = {} if args.fresh else stored(target or RESULTS)
    except ValueError as exc:  # fencecheck.record.BadFile: named, with how to regenerate it
        return fail(str(exc))
    records = run_book(paths, args.jobs, args.timeout, wanted, environment, previous)
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
