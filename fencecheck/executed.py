"""A chapter's run, executed once and read many times: the harness's kernel-side code,
the run kept in the execution cache (``Stored``), and which chapters lack one
(``missing``: the site build runs those first, ``fencecheck.sphinx._run_lacking``).

The test plugin (``fencecheck.pytest_plugin``) executes a chapter in a fresh kernel and
stores the run in the execution cache the site build reads (``fencecheck.cachekey``:
keyed on torch, Python, what a chapter can import and the runtime; within it, on the
chapter's code cells). The site renders it; the next test run reads each cell's outcome
back instead of executing; ``make book`` executes (through the plugin) only the
chapters ``missing`` names.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import nbformat

from fences import OBSERVE_MARKER, RAISED_MARKER, RECORD_ENV

from . import cachekey

#: The network guard, the first thing each chapter's kernel runs: a fence cannot reach
#: outside. pytest-socket (or any guard in this process) cannot do it: it patches the
#: ``socket`` module of the pytest process, and the fences run in another process, the
#: chapter's ipykernel, which this cell patches instead. Internet sockets (AF_INET,
#: AF_INET6) refuse to connect or send and a host name is not resolved, with a
#: RuntimeError (not an OSError, which code under test may catch as "offline"); Unix
#: sockets and pipes (multiprocessing, a DataLoader's workers) and the kernel's own ZeroMQ
#: channels (not Python sockets) are untouched. Not a sandbox: code that undoes the patch
#: gets through; a fence does not.
NETWORK_GUARD = r"""
def _fences_guard_network():
    import socket

    why = ("the network is refused while the book's fences run (fencecheck.executed"
           ".NETWORK_GUARD): a fence must not reach outside; compute the value or record it")

    def refuse(*args, **kwargs):
        raise RuntimeError(why)

    def guarded(name):
        original = getattr(socket.socket, name)

        def call(self, *args, **kwargs):
            if self.family in (socket.AF_INET, socket.AF_INET6):
                raise RuntimeError(f"socket.{name}: {why}")
            return original(self, *args, **kwargs)
        return call

    for name in ("connect", "connect_ex", "sendto", "sendmsg"):
        if hasattr(socket.socket, name):
            setattr(socket.socket, name, guarded(name))
    socket.getaddrinfo = socket.gethostbyname = socket.gethostbyname_ex = refuse
    socket.create_connection = refuse


_fences_guard_network()
del _fences_guard_network
""".strip()
#: The first cell of every chapter: the network guard, then a snapshot of the global
#: settings (fences.state), checked after the last cell (``CHECK``).
SNAPSHOT = (
    NETWORK_GUARD + "\n"
    "import fences.state\n"
    "fences.state.close_figures()\n"
    "fences.state.snapshot()"
)
CHECK = "fences.state.check()"

#: Run in each fresh kernel before the chapter's first cell, allowed ``WARM_UP_TIMEOUT`` s.
WARM_UP = "import fences.state"
WARM_UP_TIMEOUT = 600

#: The harness's kernel-side code: a stored run is read back only when it is the same
#: (the runtime it loads, ``fences/``, is part of the cache key).
#: (and how it runs a chapter's cells: the version, 2 since they are kept in IPython's history)
HARNESS = hashlib.sha256("\n".join(("2", SNAPSHOT, CHECK, WARM_UP, RECORD_ENV)).encode()).hexdigest()[:16]


class Stored:
    """A chapter's run kept in the execution cache: the notebook the site build renders
    and the next test run reads back instead of executing (execute once, read many).

    What the run recorded (the ``[observed]`` and ``[raised]`` lines the runtime prints
    under the test plugin) is taken out of the cells' outputs, so the page shows what a
    reader's run shows, and kept in the cache record's ``data``, per code cell. Only a
    run of this harness is read back (``HARNESS``: its kernel-side code); a notebook
    cached by another executor (myst-nb on a cache miss) is executed again.
    """

    MARKERS = (OBSERVE_MARKER, RAISED_MARKER)

    def __init__(self, nb, recorded: dict[str, str]):
        self.cells = [c for c in nb.cells if c.cell_type == "code"]
        self.recorded = recorded

    def cell(self, n: int) -> tuple[list, str]:
        """Code cell ``n``'s outputs as shown, and the lines it recorded."""
        return list(self.cells[n].get("outputs", [])), self.recorded.get(str(n), "")

    @classmethod
    def find(cls, cache, nb) -> "Stored | None":
        from .upstream import jupyter_cache

        found = jupyter_cache.stored(jupyter_cache.get_cache(cache), nb)
        if found is None:
            return None
        executed, data = found
        ours = data.get("tensor_fences") or {}
        if ours.get("harness") != HARNESS:
            return None
        return cls(executed, ours.get("recorded", {}))

    @classmethod
    def split(cls, outputs) -> tuple[list, str]:
        """(the outputs as a reader's run shows them, the recorded lines): marker lines out
        of the streams, consecutive streams of one name joined, as nbclient keeps them."""
        shown, recorded = [], []
        for out in outputs:
            out = nbformat.from_dict(dict(out))
            if out.get("output_type") == "stream":
                lines = out["text"].splitlines(keepends=True)
                recorded += [line for line in lines if line.startswith(cls.MARKERS)]
                out["text"] = "".join(line for line in lines if not line.startswith(cls.MARKERS))
                if not out["text"]:
                    continue
                if shown and shown[-1].get("output_type") == "stream" and shown[-1]["name"] == out["name"]:
                    shown[-1]["text"] += out["text"]
                    continue
            shown.append(out)
        return shown, "".join(recorded)

    @classmethod
    def save(cls, cache, nb, ran: dict[int, list], uri: str, seconds: float) -> None:
        from .upstream import jupyter_cache

        executed = copy.deepcopy(nb)
        recorded = {}
        code = [c for c in executed.cells if c.cell_type == "code"]
        for n, cell in enumerate(code):
            cell.outputs, lines = cls.split(ran[n])
            # Each code cell ran once, in order (the harness's own cells between them are
            # not the chapter's): counted 1..N, as a reader's run counts them.
            cell.execution_count = n + 1
            for out in cell.outputs:
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = n + 1
            if lines:
                recorded[str(n)] = lines
        jupyter_cache.store(jupyter_cache.get_cache(cache), executed, uri, seconds,
                            {"tensor_fences": {"harness": HARNESS, "recorded": recorded}})


def missing(root: Path) -> list[Path]:
    """The chapters of ``root``'s table of contents whose run the execution cache lacks
    (a chapter the build refuses, with no header, is left to the build to name)."""
    from . import chapter as chapters

    cache = cachekey.cache_path(cachekey.cache_base(root))
    lacking = []
    for path in chapters.toc_files(root):
        text = path.read_text(encoding="utf-8") if path.exists() else None
        if text is None or chapters.header_problems(text):
            continue
        if Stored.find(cache, chapters.parse(text, path)) is None:
            lacking.append(path)
    return lacking
