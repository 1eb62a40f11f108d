"""The test plugin: every MyST chapter under ``book/`` runs as an nbval notebook, one test item per code cell.

Around a chapter's cells: the network guard and a snapshot of torch's global settings, and a check that none was
left changed. A run that ran to the end is stored in the execution cache and read back by the next run instead of
executing (``--fences-fresh`` executes anyway). ``--fences-results PATH`` writes the run's record
(``fencecheck.record``). A run that leaves a new file in the checkout fails. Enable it from a ``conftest.py``:
``pytest_plugins = ["fencecheck.pytest_plugin"]``.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty

import pytest
from nbformat.v4 import new_code_cell

from fences import RECORD_ENV, SKIP_MARKER, parse_observed, parse_raised

from . import cachekey, preflight
from . import chapter as chapters
from . import lint
from . import record as records
from .executed import CHECK, SNAPSHOT, WARM_UP, WARM_UP_TIMEOUT, Stored
from .releases import REFERENCE
from .upstream.nbval import DEFAULT_CELL_TIMEOUT, IPyNbCell, IPyNbFile, keep_history


def pytest_addoption(parser):
    group = parser.getgroup("fences", "Tensor Fences chapters")
    group.addoption("--fences-results", metavar="PATH", help="write the run's record: provenance, one entry "
                    "per fence (by fence id), and the other items that failed")
    group.addoption("--fences-release", metavar="NAME",
                    help="the release name the results file gives (default: torch.__version__)")
    group.addoption("--fences-fresh", action="store_true",
                    help="execute every chapter, even one whose run the execution cache holds")
    parser.addini("fences_book", "folder of MyST chapters to collect", default="book")


def pytest_sessionstart(session):
    # find_spec, not import: importing torch here would cost every xdist worker a second.
    if importlib.util.find_spec("torch") is None:
        raise pytest.UsageError(
            f"torch is not installed for {sys.executable}. "
            f"`make test` creates .venv and installs the reference torch (torch=={REFERENCE}).")
    root = Path(session.config.rootpath)
    if not (root / "_toc.yml").exists():
        return
    problems = preflight.problems(root, session.config.getini("fences_book"))
    with contextlib.suppress(chapters.ChapterError):   # an invalid _toc.yml: named just above
        problems += chapters.book_problems(root)
    if problems:
        raise pytest.UsageError("\n".join(problems))


def pytest_configure(config):
    config.pluginmanager.register(Recorder(config), "fences-recorder")
    # The kernels this suite starts inherit it: fences.observe / raises print for the record.
    os.environ[RECORD_ENV] = "1"
    # One place for the cell timeout: the site build's, in _config.yml.
    given = config.option.nbval_cell_timeout != DEFAULT_CELL_TIMEOUT
    timeout = None if given else chapters.cell_timeout(config.rootpath)
    if timeout is not None:
        config.option.nbval_cell_timeout = timeout


def pytest_collect_file(file_path: Path, parent):
    book = Path(parent.config.rootpath) / parent.config.getini("fences_book")
    kind = {".md": Chapter, ".ipynb": StrayNotebook}.get(file_path.suffix)
    return kind.from_parent(parent, path=file_path) if kind and book in file_path.parents else None


class StrayNotebook(pytest.File):
    """A ``.ipynb`` inside book/: nbval would run it unguarded, and the site would have two documents of one name."""

    def collect(self):
        rel = self.path.relative_to(self.config.rootpath).as_posix()
        raise self.CollectError(
            f"{rel}: a notebook inside {self.config.getini('fences_book')}/ is not part of the book (chapters are "
            f"the .md files). Move it out, e.g. `jupytext --to ipynb {rel[:-6]}.md -o notebooks/{Path(rel).stem}.ipynb`"
            ", or delete it.")


class KernelDied(RuntimeError):
    """The chapter's kernel process ended while a cell ran (a crash, ``os._exit``)."""


#: Seconds between two looks at whether the kernel process lives while a cell runs.
KERNEL_CHECK = 1.0


def watch_for_death(kernel) -> None:
    """Make nbval's waits on ``kernel`` raise ``KernelDied`` as soon as its process is gone, not after the cell
    timeout: each wait is cut into ``KERNEL_CHECK`` slices."""
    original = kernel.get_message

    def get_message(stream, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = KERNEL_CHECK if deadline is None else deadline - time.monotonic()
            try:
                return original(stream, timeout=max(0.0, min(KERNEL_CHECK, left)))
            except Empty:
                if not kernel.is_alive():
                    process = getattr(getattr(kernel.km, "provisioner", None), "process", None)
                    code = getattr(process, "returncode", None)
                    raise KernelDied("the kernel died" + ("" if code is None else f" (exit code {code})")) from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    kernel.get_message = get_message


class Chapter(IPyNbFile):
    """One chapter, read as the build reads it and run in a fresh kernel of its own, or read back (``Stored``)."""

    unclean = False  # set when torch's global state cannot be trusted after this chapter
    cell_failed = ""  # the first of its cells that failed
    outputs = None   # a lesson's: the numbers each code cell showed (ProseNumbers)
    died = ""        # the item whose cell the kernel died in
    stored = None    # the run read back from the execution cache, or None

    def setup(self):
        self.ran: dict[int, list] = {}   # cell number -> the outputs it gave, this run
        root = Path(self.config.rootpath)
        self.cache = cachekey.cache_path(cachekey.cache_base(root))
        if not self.config.getoption("--fences-fresh"):
            self.stored = Stored.find(self.cache, self.nb)
        if self.stored is not None:
            return
        self.started = time.monotonic()
        super().setup()
        watch_for_death(self.kernel)
        keep_history(self.kernel)   # the chapter's cells as a notebook runs them
        cachekey.log_execution(root, self.path.relative_to(root).as_posix(), "pytest")
        # The cold torch import gets the start-up allowance, not a cell's timeout.
        _run_quietly(self.kernel, WARM_UP)

    def store(self) -> None:
        """Store the run in the execution cache when every code cell ran and none failed."""
        code = [c for c in self.nb.cells if c.cell_type == "code"]
        if self.cell_failed or self.unclean or self.died or sorted(self.ran) != list(range(len(code))):
            return
        Stored.save(self.cache, self.nb, self.ran, str(self.path), time.monotonic() - self.started)

    def collect(self):
        try:
            self.nb, lines = chapters.read(self.path)
        except chapters.ChapterError as exc:
            rel = self.path.relative_to(self.config.rootpath).as_posix()
            raise self.CollectError(str(exc).replace(str(self.path), rel)) from None
        code = [c for c in self.nb.cells if c.cell_type == "code"]
        self.digest = records.chapter_digest([c.source for c in code])
        yield Cell.from_parent(self, name="setup: snapshot torch global state", cell_num=-1,
                               cell=new_code_cell(SNAPSHOT), line=0, guard=True)
        for index, (cell, line) in enumerate(zip(code, lines)):
            ident = lint.fence_id(cell) if lint.is_fence(cell) else None
            yield Cell.from_parent(self, name=f"fence {ident}" if ident else f"Cell {index} (line {line})",
                                   cell_num=index, cell=cell, line=line, ident=ident)
        yield Cell.from_parent(self, name="teardown: torch global state restored", cell_num=len(code),
                               cell=new_code_cell(CHECK), line=0, guard=True)
        self.text = self.path.read_text(encoding="utf-8")
        if chapters.is_lesson(self.text):   # a lesson: its sentences' numbers are witnessed
            self.outputs = [set() for _ in code]
            yield ProseNumbers.from_parent(self, name="prose numbers witnessed")

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value)


def _run_quietly(kernel, code: str) -> None:
    """Run the harness's own ``code`` in ``kernel``, out of the history, allowed ``WARM_UP_TIMEOUT`` s."""
    kernel.keeps_history = False
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=WARM_UP_TIMEOUT)
    kernel.await_idle(msg_id, WARM_UP_TIMEOUT)


class Cell(IPyNbCell):
    """A chapter's code cell (a fence when ``ident`` is set), or a state guard: the snapshot or the check after."""

    def __init__(self, name, parent, cell_num, cell, line, guard=False, ident=None):
        # Outputs are never compared: a fence proves its claim with assert.
        super().__init__(name, parent, cell_num, cell, defaultdict(bool, check=False))
        self.line = line
        self.ident = ident
        self.guard = guard

    def runtest(self):
        self.user_properties += [("cell", self.cell_num), ("chapter_digest", self.parent.digest)]
        if self.ident:
            self.user_properties += [("fence_id", self.ident), ("proves", records.claim(self.cell.source)),
                                     ("code", records.code_hash(self.cell.source))]
        stored = self.parent.stored
        recorded = ""
        if stored is not None:
            self.test_outputs, recorded = stored.cell(self.cell_num) if not self.guard else ([], "")
        else:
            self.execute()
            if not self.guard:
                self.parent.ran[self.cell_num] = list(self.test_outputs or [])
            elif self.cell_num >= 0:    # the state check after the last cell passed
                self.parent.store()
        if not self.guard and self.parent.outputs is not None:
            self.parent.outputs[self.cell_num] = lint.numbers_in(_shown(self.test_outputs))
        text = "".join(o.get("text", "") for o in self.test_outputs or [] if o.get("output_type") == "stream")
        text += recorded
        observed, labels = parse_observed(text)
        raised = parse_raised(text)
        for name, value in (("observed", observed), ("labels", labels), ("raised", raised)):
            if value:
                self.user_properties.append((name, value))
        if SKIP_MARKER in text:
            pytest.skip(text.split(SKIP_MARKER, 1)[1].strip().splitlines()[0])

    def execute(self):
        """Run the cell in the chapter's kernel (nbval), noting where a failure happened."""
        if self.parent.died:
            raise KernelDied(f"not run: the kernel died in {self.parent.died}")
        self.parent.kernel.keeps_history = not self.guard
        try:
            super().runtest()
        except KernelDied as exc:
            self.parent.died = self.name
            raise KernelDied(f"{exc} while running this cell ({self.name}); the chapter's "
                             "later cells are not run") from None
        except BaseException:
            if self.guard:
                self.parent.unclean = True  # torch's global state cannot be trusted now
            else:
                self.parent.cell_failed = self.parent.cell_failed or self.name
            raise
        if not self.guard:
            # The state guard reports a setting left changed with the cell that changed it.
            rel = self.parent.path.relative_to(self.config.rootpath).as_posix()
            label = f"{rel}:{self.line}" + (f", fence {self.ident}" if self.ident else "")
            _run_quietly(self.parent.kernel, f'__import__("fences.state").state.note({label!r})')

    def repr_failure(self, excinfo):
        where = f"{self.parent.path.relative_to(self.config.rootpath)}, {self.name}"
        if self.ident and self.line:   # a fence's name is its id: say where it is too
            where += f" (line {self.line})"
        return f"{where}\n{super().repr_failure(excinfo)}"

    def reportinfo(self):
        return self.path, max(self.line - 1, 0), f"{self.parent.path.name}::{self.name}"


def _shown(outputs) -> str:
    """The text a cell showed: its streams and each output's text, Markdown or HTML."""
    kinds = ("text/plain", "text/markdown", "text/html", "text/latex")
    return "\n".join(part for out in outputs or [] for part in
                     [out.get("text", ""), *("".join((out.get("data") or {}).get(k, "")) for k in kinds)])


class ProseNumbers(pytest.Item):
    """After a lesson's cells: each number in its sentences is witnessed by a code cell nearby (``lint``)."""

    def runtest(self):
        if self.parent.cell_failed:
            pytest.skip(f"not checked: {self.parent.cell_failed} failed, its output is not known")
        problems = lint.number_problems(self.parent.text, self.parent.outputs)
        if problems:
            raise AssertionError("\n".join(problems))

    def repr_failure(self, excinfo, style=None):
        rel = self.parent.path.relative_to(self.config.rootpath).as_posix()
        return "\n".join(f"{rel}: {line}" for line in str(excinfo.value).splitlines())

    def reportinfo(self):
        return self.path, 0, f"{self.parent.path.name}::{self.name}"


def _details(longrepr) -> str:
    """A failure's report as text, without terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(longrepr or "")).strip()


def _checkout_files(root: Path) -> set[str] | None:
    """The files in the checkout that git neither ignores nor tracks; outside a git work tree (or without git),
    every file but those in hidden folders, ``__pycache__`` and ``_build``. None when git cannot read a work tree
    (a dubious-ownership refusal): the check is skipped rather than every tracked file called new."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z", "--", "."],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    if proc is not None and proc.returncode == 0:
        return {p for p in proc.stdout.split("\0") if p}
    if proc is not None and "not a git repository" not in proc.stderr:
        return None
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "_build")]
        found |= {Path(folder, name).relative_to(root).as_posix() for name in files}
    return found


class Recorder:
    """The run's record for --fences-results (fences by id, every other failure apart), and the check that the run
    left no new file in the checkout. Under pytest-xdist only the controller writes and checks."""

    def __init__(self, config):
        self.config = config
        self.root = Path(config.rootpath)
        self.fences: list[dict] = []
        self.errors: list[dict] = []
        self.chapters: dict[str, str] = {}  # chapter -> the digest of the code it ran
        self.before: set[str] | None = None
        self.new: list[str] = []

    def pytest_runtest_logreport(self, report):
        chapter, _, item = report.nodeid.partition("::")
        if not chapter.endswith(".md") or not (report.when == "call" or report.when == "setup" and not report.passed):
            return
        props = dict(report.user_properties)
        if props.get("chapter_digest"):
            self.chapters[chapter] = props["chapter_digest"]
        details = _details(report.longrepr) if report.failed else ""
        reason = details.splitlines()[-1][:300] if details else ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
        if props.get("fence_id"):
            passed = report.passed   # only a fence that ran to the end observed a result
            self.fences.append({
                "id": props["fence_id"], "chapter": chapter, "cell": props.get("cell"), "code": props.get("code"),
                "outcome": report.outcome, "reason": reason, "details": details[-2000:],
                "proves": props.get("proves", ""), "observed": props.get("observed", {}) if passed else {},
                "labels": props.get("labels", {}) if passed else {},
                **({"raised": props["raised"]} if props.get("raised") else {}),
            })
        elif report.failed:
            self.errors.append({"chapter": chapter, "item": item, "cell": props.get("cell"),
                                "reason": reason, "details": details[-2000:]})

    def pytest_collectreport(self, report):
        """A chapter that cannot be collected (no header, forbidden tag, lint) is an error."""
        if report.failed and report.nodeid.endswith(".md"):
            details = _details(report.longrepr)
            self.errors.append({"chapter": report.nodeid, "item": "collect", "cell": None,
                                "reason": details.splitlines()[-1][:300] if details else "",
                                "details": details[-2000:]})

    def pytest_sessionstart(self, session):
        if not hasattr(self.config, "workerinput"):
            self.before = _checkout_files(self.root)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if hasattr(self.config, "workerinput"):   # a worker: the controller records the run
            return
        path = self.config.getoption("--fences-results")
        after = _checkout_files(self.root)
        if self.before is not None and after is not None:   # None: git could not read the tree
            if path:   # the results file this run writes is not a leftover
                after.discard(os.path.relpath(Path(path).resolve(), self.root.resolve()))
            self.new = sorted(after - self.before)
        if self.new:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            self.errors.append({"chapter": "(the run)", "item": "new files", "cell": None,
                                "reason": f"the run left new files in the checkout: {', '.join(self.new[:10])}",
                                "details": "\n".join(self.new)})
        if not path:
            return
        import torch

        toc = records.toc_order(self.root)
        out = {
            "release": self.config.getoption("--fences-release") or torch.__version__,
            **records.provenance(self.root),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "exitstatus": int(session.exitstatus),
            "fences": records.ordered(self.fences, toc),
            "errors": records.ordered(self.errors, toc),
            "chapters": dict(sorted(self.chapters.items(), key=lambda kv: (toc.get(kv[0], len(toc)), kv[0]))),
        }
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter):
        if self.new:
            terminalreporter.write_sep("=", "the run left new files in the checkout", red=True)
            for name in self.new:
                terminalreporter.write_line(f"FAILED: new file {name} (a fence must not write "
                                            "into the checkout: use tempfile, and remove it)")
