"""The test plugin: every MyST chapter under ``book/`` runs as an nbval notebook.

- Each code cell is one test item: a fence is named ``fence <id>`` (its
  ``fence-id``), any other cell by its index and source line.
- Before the first cell the plugin reseeds the random generators and
  snapshots the global settings; after the last it fails the chapter if any
  was left changed (``fences.state``).
- A cell that prints ``fences.SKIP_MARKER`` (through ``fences.needs``) is
  reported as skipped, with its reason.
- A chapter without its jupytext header, a forbidden tag, or a ``_toc.yml``
  entry that does not exist is an error naming the file.
- Each chapter's kernel first runs ``fencecheck.executed.NETWORK_GUARD`` (in the snapshot cell): a fence
  that opens an Internet connection or resolves a host name fails with a RuntimeError
  naming the guard (pytest-socket cannot do this: the fences run in the kernel, another
  process).
- A run that leaves a new file in the checkout (one git does not ignore, or outside git
  any file) fails, naming it (``Leftovers``).
- Execute once, read many: a chapter that ran to the end is stored, outputs
  and what it recorded, in the execution cache the site build reads
  (``fencecheck.cachekey``: keyed on torch, Python, what a chapter can import
  and the runtime; within it, on the chapter's code). The next run finds it
  there and reads each cell's outcome from it instead of executing;
  ``--fences-fresh`` (``make test FRESH=1``) executes anyway. Each execution
  is logged (``cachekey.log_execution``).
- ``--fences-results PATH`` writes the run's record (``fencecheck.record``):
  its provenance, one entry per fence keyed by fence id in
  table-of-contents order, and, apart, every other item that failed.

Enable it from a ``conftest.py``: ``pytest_plugins = ["fencecheck.pytest_plugin"]``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from fences import RECORD_ENV, SKIP_MARKER, parse_observed, parse_raised

from . import cachekey
from . import chapter as chapters
from .executed import CHECK, SNAPSHOT, WARM_UP, WARM_UP_TIMEOUT, Stored
from . import lint
from . import record as records
from .releases import REFERENCE
from .upstream.nbval import DEFAULT_CELL_TIMEOUT, IPyNbCell, IPyNbFile, keep_history



def pytest_addoption(parser):
    group = parser.getgroup("fences", "Tensor Fences chapters")
    group.addoption(
        "--fences-results",
        metavar="PATH",
        help="write the run's record: provenance, one entry per fence (by fence id), "
        "and the other items that failed",
    )
    group.addoption(
        "--fences-release",
        metavar="NAME",
        help="the release name the results file gives (default: torch.__version__)",
    )
    group.addoption(
        "--fences-fresh",
        action="store_true",
        help="execute every chapter, even one whose run the execution cache holds",
    )
    parser.addini("fences_book", "folder of MyST chapters to collect", default="book")


def pytest_sessionstart(session):
    # find_spec, not import: importing torch here would cost every xdist worker a second.
    if importlib.util.find_spec("torch") is None:
        raise pytest.UsageError(
            f"torch is not installed for {sys.executable}. "
            f"`make test` creates .venv and installs the reference torch (torch=={REFERENCE})."
        )
    root = Path(session.config.rootpath)
    if (root / "_toc.yml").exists():
        problems = []
        try:
            listed = chapters.toc_files(root)
        except chapters.ChapterError as exc:  # _toc.yml is not valid YAML: its line
            raise pytest.UsageError(str(exc)) from None
        book = root / session.config.getini("fences_book")
        for path in sorted(book.glob("*.md")):
            if path not in listed:
                problems.append(
                    f"{path.relative_to(root)} is not listed in _toc.yml: the site would not "
                    "build it (add one `- file:` line)"
                )
        for path in listed:
            rel = path.relative_to(root)
            if not path.exists():
                problems.append(f"_toc.yml lists {rel}, which does not exist")
                continue
            for p in chapters.header_problems(path.read_text(encoding="utf-8")):
                problems.append(f"{rel} (listed in _toc.yml): {p}")
        problems += chapters.book_problems(root)
        if problems:
            raise pytest.UsageError("\n".join(problems))


def pytest_configure(config):
    config.pluginmanager.register(Recorder(config), "fences-recorder")
    config.pluginmanager.register(Leftovers(config), "fences-leftovers")
    # The kernels this suite starts inherit it: fences.observe / raises print for the record.
    os.environ[RECORD_ENV] = "1"
    if config.option.nbval_cell_timeout == DEFAULT_CELL_TIMEOUT:
        # One place for the cell timeout: the site build's, in _config.yml.
        timeout = chapters.cell_timeout(Path(config.rootpath))
        if timeout is not None:
            config.option.nbval_cell_timeout = timeout



def pytest_collect_file(file_path: Path, parent):
    book = Path(parent.config.rootpath) / parent.config.getini("fences_book")
    if book not in file_path.parents:
        return None
    if file_path.suffix == ".md":
        return Chapter.from_parent(parent, path=file_path)
    if file_path.suffix == ".ipynb":
        return StrayNotebook.from_parent(parent, path=file_path)
    return None


class StrayNotebook(pytest.File):
    """A ``.ipynb`` inside book/: refused, with what to do.

    It would be run by nbval's collector without the book's guards, and the
    site build would fail on two documents with one name.
    """

    def collect(self):
        rel = self.path.relative_to(self.config.rootpath).as_posix()
        raise self.CollectError(
            f"{rel}: a notebook inside {self.config.getini('fences_book')}/ is not part of "
            "the book (chapters are the .md files). Move it out, e.g. "
            f"`jupytext --to ipynb {rel[:-6]}.md -o notebooks/{Path(rel).stem}.ipynb`, "
            "or delete it.")




class KernelDied(RuntimeError):
    """The chapter's kernel process ended while a cell ran (a crash, ``os._exit``)."""


#: Seconds between two looks at whether the kernel process is still there while a cell
#: runs: a kernel that dies is reported within this, not after the cell timeout.
KERNEL_CHECK = 1.0


def watch_for_death(kernel) -> None:
    """Make nbval's waits on ``kernel`` (``get_message``: every reply and output it waits
    for) raise ``KernelDied`` as soon as the kernel process is gone, instead of waiting out
    the cell timeout. The wait is cut into ``KERNEL_CHECK`` slices; between two, the
    kernel manager is asked whether its process lives. Messages already sent are read
    first; the overall timeout is kept."""
    import time
    from queue import Empty

    original = kernel.get_message

    def get_message(stream, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = KERNEL_CHECK if deadline is None else deadline - time.monotonic()
            try:
                return original(stream, timeout=max(0.0, min(KERNEL_CHECK, left)))
            except Empty:
                if not kernel.is_alive():
                    raise KernelDied(f"the kernel died{_exit_status(kernel)}") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    kernel.get_message = get_message


def _exit_status(kernel) -> str:
    """`` (exit code N)`` of the dead kernel's process, when the manager knows it."""
    process = getattr(getattr(getattr(kernel, "km", None), "provisioner", None), "process", None)
    code = getattr(process, "returncode", None) if process is not None else None
    return f" (exit code {code})" if code is not None else ""


class Chapter(IPyNbFile):
    """One MyST chapter, read as the build reads it (``fencecheck.chapter.parse``) and run in a
    fresh kernel of its own, or read back from the execution cache (``Stored``).

    The global-state guard reports what a chapter leaves changed: a reader runs the
    next cells in the same kernel. A kernel that dies fails the cell that was running,
    at once, naming it.
    """

    unclean = False  # set when torch's global state cannot be trusted after this chapter
    cell_failed = ""  # the first of its cells that failed
    outputs = None   # a lesson's: the numbers each code cell showed (ProseNumbers)
    died = ""        # the item whose cell the kernel died in
    stored = None    # the run read back from the execution cache (Stored), or None
    kernel = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Outputs are never compared: a fence proves its claim with assert. (Set here,
        # not with --nbval-lax, which would also turn on nbval's own .ipynb collector.)
        self.compare_outputs = False
        self.ran: dict[int, list] = {}   # cell number -> the outputs it gave, this run

    def setup(self):
        root = Path(self.config.rootpath)
        self.cache = cachekey.cache_path(cachekey.cache_base(root))
        if not self.config.getoption("--fences-fresh"):
            self.stored = Stored.find(self.cache, self.nb)
        if self.stored is not None:
            return   # nothing to execute: every cell's outcome is read from the stored run
        self.started = time.monotonic()
        super().setup()
        watch_for_death(self.kernel)
        keep_history(self.kernel)   # the chapter's cells as a notebook runs them
        cachekey.log_execution(root, self.path.relative_to(root).as_posix(), "pytest")
        # A fresh kernel imports torch (through fences.state) before the first cell, with
        # the start-up allowance, not the cell timeout: a cold import on a loaded machine
        # takes tens of seconds, which no cell of the chapter should be charged with.
        msg_id = self.kernel.execute_cell_input(WARM_UP, allow_stdin=False)
        self.kernel.await_reply(msg_id, timeout=WARM_UP_TIMEOUT)
        self.kernel.await_idle(msg_id, WARM_UP_TIMEOUT)

    def store(self) -> None:
        """Store the run in the execution cache, when every code cell ran and none failed:
        the site build renders it and the next run reads it back (``Stored``)."""
        code = [c for c in self.nb.cells if c.cell_type == "code"]
        if self.cell_failed or self.unclean or self.died or sorted(self.ran) != list(range(len(code))):
            return
        Stored.save(self.cache, self.nb, self.ran, str(self.path),
                    time.monotonic() - self.started)

    def collect(self):
        try:
            self.nb, lines = chapters.read(self.path)
        except chapters.ChapterError as exc:
            rel = self.path.relative_to(self.config.rootpath).as_posix()
            raise self.CollectError(str(exc).replace(str(self.path), rel)) from None
        yield Cell.from_parent(
            self, name="setup: snapshot torch global state", cell_num=-1,
            cell=new_code_cell(SNAPSHOT), options=_options(), line=0, guard=True,
        )
        code = [c for c in self.nb.cells if c.cell_type == "code"]
        self.digest = records.chapter_digest([c.source for c in code])
        for index, (cell, line) in enumerate(zip(code, lines)):
            ident = lint.fence_id(cell) if lint.is_fence(cell) else None
            yield Cell.from_parent(
                self, name=f"fence {ident}" if ident else f"Cell {index} (line {line})",
                cell_num=index, cell=cell, options=_options(), line=line, ident=ident,
            )
        yield Cell.from_parent(
            self, name="teardown: torch global state restored", cell_num=len(code),
            cell=new_code_cell(CHECK), options=_options(), line=0, guard=True,
        )
        text = self.path.read_text(encoding="utf-8")
        if chapters.is_lesson(text):   # a lesson: its sentences' numbers are witnessed
            self.outputs = [set() for _ in code]
            yield ProseNumbers.from_parent(self, name="prose numbers witnessed", text=text)

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value)


def _options():
    # Outputs are never compared: a fence proves its claim with assert.
    return defaultdict(bool, check=False)


class Cell(IPyNbCell):
    """One code cell of a chapter: a fence (``ident`` set), any other cell, or a state guard."""

    def __init__(self, name, parent, cell_num, cell, options, line, guard=False, ident=None):
        super().__init__(name, parent, cell_num, cell, options)
        self.line = line
        self.ident = ident  # the fence-id, or None for a cell that is not a fence
        self.guard = guard  # the snapshot before a chapter or the state check after it

    def runtest(self):
        self.user_properties.append(("cell", self.cell_num))
        self.user_properties.append(("chapter_digest", self.parent.digest))
        if self.ident:
            self.user_properties.append(("fence_id", self.ident))
            self.user_properties.append(("proves", records.claim(self.cell.source)))
            self.user_properties.append(("code", records.code_hash(self.cell.source)))
        stored = self.parent.stored
        if stored is not None:
            self.test_outputs, recorded = stored.cell(self.cell_num) if not self.guard else ([], "")
        else:
            self.execute()
            recorded = ""
            if not self.guard:
                self.parent.ran[self.cell_num] = list(self.test_outputs or [])
            elif self.cell_num >= 0:    # the state check after the last cell passed
                self.parent.store()
        if not self.guard and self.parent.outputs is not None:
            self.parent.outputs[self.cell_num] = lint.numbers_in(_shown(self.test_outputs))
        text = "".join(
            out.get("text", "") for out in self.test_outputs or []
            if out.get("output_type") == "stream"
        ) + recorded
        observed, labels = parse_observed(text)
        if observed:
            self.user_properties.append(("observed", observed))
        if labels:
            self.user_properties.append(("labels", labels))
        raised = parse_raised(text)
        if raised:
            self.user_properties.append(("raised", raised))
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
            self._note_state()

    def _note_state(self):
        """Tell the kernel's state guard this cell ran (``fences.state.note``), so a setting
        left changed at the end is reported with the cell that changed it (.md line, id)."""
        rel = self.parent.path.relative_to(self.config.rootpath).as_posix()
        label = f"{rel}:{self.line}" + (f", fence {self.ident}" if self.ident else "")
        kernel = self.parent.kernel
        kernel.keeps_history = False
        msg_id = kernel.execute_cell_input(
            f'__import__("fences.state").state.note({label!r})', allow_stdin=False)
        kernel.await_reply(msg_id, timeout=WARM_UP_TIMEOUT)
        kernel.await_idle(msg_id, WARM_UP_TIMEOUT)

    def repr_failure(self, excinfo):
        where = f"{self.parent.path.relative_to(self.config.rootpath)}, {self.name}"
        if self.ident and self.line:   # a fence's name is its id: say where it is too
            where += f" (line {self.line})"
        return f"{where}\n{super().repr_failure(excinfo)}"

    def reportinfo(self):
        return self.path, max(self.line - 1, 0), f"{self.parent.path.name}::{self.name}"


def _shown(outputs) -> str:
    """The text a cell showed: its streams and each output's text, Markdown or HTML."""
    parts = []
    for out in outputs or []:
        parts.append(out.get("text", ""))
        data = out.get("data") or {}
        for kind in ("text/plain", "text/markdown", "text/html", "text/latex"):
            value = data.get(kind, "")
            parts.append("".join(value) if isinstance(value, list) else str(value))
    return "\n".join(parts)


class ProseNumbers(pytest.Item):
    """After a lesson's cells: each number in its sentences is witnessed by the code or the
    shown output of a code cell nearby (``fencecheck.lint.number_problems``)."""

    def __init__(self, *, text, **kwargs):
        super().__init__(**kwargs)
        self.text = text

    def runtest(self):
        if self.parent.cell_failed:
            pytest.skip(f"not checked: {self.parent.cell_failed} failed, its output is not known")
        problems = lint.number_problems(self.text, self.parent.outputs)
        if problems:
            raise AssertionError("\n".join(problems))

    def repr_failure(self, excinfo, style=None):
        rel = self.parent.path.relative_to(self.config.rootpath).as_posix()
        return "\n".join(f"{rel}: {line}" for line in str(excinfo.value).splitlines())

    def reportinfo(self):
        return self.path, 0, f"{self.parent.path.name}::{self.name}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Recorder:
    """The run's record for --fences-results: fences by id, every other failure apart.

    Only a cell with a ``fence-id`` is a fence. A setup cell, an
    illustration or a guard item that fails still fails the run and is
    written under ``errors``, but is not counted as a fence. Under
    pytest-xdist the workers' reports reach the controller's hooks too, so
    only the controller writes the file.
    """

    def __init__(self, config):
        self.config = config
        self.fences: list[dict] = []
        self.errors: list[dict] = []
        self.chapters: dict[str, str] = {}  # chapter -> the digest of the code it ran

    def pytest_runtest_logreport(self, report):
        chapter, _, item = report.nodeid.partition("::")
        if not chapter.endswith(".md"):
            return
        if not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
            return
        props = dict(report.user_properties)
        if props.get("chapter_digest"):
            self.chapters[chapter] = props["chapter_digest"]
        reason, details = "", ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
        elif report.failed and report.longrepr:
            details = _ANSI.sub("", str(report.longrepr)).strip()
            reason = details.splitlines()[-1][:300]
        if props.get("fence_id"):
            self.fences.append({
                "id": props["fence_id"], "chapter": chapter, "cell": props.get("cell"),
                "code": props.get("code"), "outcome": report.outcome, "reason": reason,
                "details": details[-2000:], "proves": props.get("proves", ""),
                # only a fence that ran to the end observed a result (the schema's rule)
                "observed": props.get("observed", {}) if report.outcome == "passed" else {},
                "labels": props.get("labels", {}) if report.outcome == "passed" else {},
                **({"raised": props["raised"]} if props.get("raised") else {}),
            })
        elif report.failed:
            self.errors.append({"chapter": chapter, "item": item, "cell": props.get("cell"),
                                "reason": reason, "details": details[-2000:]})

    def pytest_collectreport(self, report):
        """A chapter that cannot be collected (no header, forbidden tag, lint) is an error."""
        if report.failed and report.nodeid.endswith(".md"):
            details = _ANSI.sub("", str(report.longrepr)).strip()
            self.errors.append({"chapter": report.nodeid, "item": "collect", "cell": None,
                                "reason": details.splitlines()[-1][:300] if details else "",
                                "details": details[-2000:]})

    def pytest_sessionfinish(self, session, exitstatus):
        path = self.config.getoption("--fences-results")
        if not path or hasattr(self.config, "workerinput"):
            return
        import torch

        root = Path(self.config.rootpath)
        toc = records.toc_order(root)
        out = {
            "release": self.config.getoption("--fences-release") or torch.__version__,
            **records.provenance(root),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "exitstatus": int(session.exitstatus),   # Leftovers may have failed the run
            "fences": records.ordered(self.fences, toc),
            "errors": records.ordered(self.errors, toc),
            "chapters": dict(sorted(self.chapters.items(),
                                    key=lambda kv: (toc.get(kv[0], len(toc)), kv[0]))),
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


def _checkout_files(root: Path) -> set[str] | None:
    """The files in the checkout that git does not ignore and does not track (paths
    relative to ``root``); outside a git work tree, every file under ``root`` but those
    in hidden folders, ``__pycache__`` and ``_build``. None when it cannot be read."""
    import subprocess

    try:
        proc = subprocess.run(["git", "-C", str(root), "ls-files", "--others", "--exclude-standard",
                               "-z", "--", "."], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    if proc is not None and proc.returncode == 0:
        return {p for p in proc.stdout.split("\0") if p}
    if proc is not None and "not a git repository" not in proc.stderr:
        return None
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "_build")]
        for name in files:
            found.add(Path(folder, name).relative_to(root).as_posix())
    return found


class Leftovers:
    """A run that leaves a new file in the checkout fails, naming it.

    The files git would show as untracked (outside a git work tree: every file) are
    listed when the session starts and again when it ends; a new one fails the run
    (exit status 1, and an entry in the results file's ``errors``). The results file
    the run itself writes (``--fences-results``) is not counted. A fence that needs a
    file writes it to a temporary folder (``tempfile``) and removes it.
    """

    def __init__(self, config):
        self.config = config
        self.before: set[str] | None = None
        self.new: list[str] = []

    def _root(self) -> Path:
        return Path(self.config.rootpath)

    def pytest_sessionstart(self, session):
        if not hasattr(self.config, "workerinput"):
            self.before = _checkout_files(self._root())

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.before is None or hasattr(self.config, "workerinput"):
            return
        after = _checkout_files(self._root()) or set()
        own = self.config.getoption("--fences-results")
        mine = set()
        if own:
            try:
                mine.add(Path(own).resolve().relative_to(self._root().resolve()).as_posix())
            except ValueError:
                pass
        self.new = sorted(after - self.before - mine)
        if self.new:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            recorder = self.config.pluginmanager.get_plugin("fences-recorder")
            if recorder is not None:
                recorder.errors.append({
                    "chapter": "(the run)", "item": "new files", "cell": None,
                    "reason": f"the run left new files in the checkout: {', '.join(self.new[:10])}",
                    "details": "\n".join(self.new)})

    def pytest_terminal_summary(self, terminalreporter):
        if self.new:
            terminalreporter.write_sep("=", "the run left new files in the checkout", red=True)
            for name in self.new:
                terminalreporter.write_line(f"FAILED: new file {name} (a fence must not write "
                                            "into the checkout: use tempfile, and remove it)")
