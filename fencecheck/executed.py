"""A chapter's run, executed once and read many times: the harness's kernel-side code, the
run kept in the execution cache (``Stored``), and which chapters lack one (``missing``).
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import nbformat

from fences import OBSERVE_MARKER, RAISED_MARKER, RECORD_ENV

from . import cachekey
from . import chapter as chapters

#: The first thing each chapter's kernel runs: Internet sockets refuse to connect or send, and
#: a host name is not resolved, with a RuntimeError (an OSError might be caught as "offline").
#: It patches the kernel's ``socket``, which pytest-socket in the pytest process cannot. Unix
#: sockets, pipes and the kernel's ZeroMQ channels are untouched. Not a sandbox.
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
    "fences.state.snapshot()"
)
CHECK = "fences.state.check()"
#: Run in each fresh kernel before the chapter's first cell, allowed ``WARM_UP_TIMEOUT`` s.
WARM_UP = "import fences.state"
WARM_UP_TIMEOUT = 600
#: The harness's kernel-side code (and "2": its cells are kept in IPython's history): a stored
#: run is read back only when made by the same.
HARNESS = hashlib.sha256("\n".join(("2", SNAPSHOT, CHECK, WARM_UP, RECORD_ENV)).encode()).hexdigest()[:16]
MARKERS = (OBSERVE_MARKER, RAISED_MARKER)


class Stored:
    """A chapter's run kept in the execution cache: the notebook the site renders, with the
    lines the run recorded (``[observed]``, ``[raised]``) taken out of the outputs and kept
    per code cell in the record's ``data``. A run of another harness is not read back."""

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
        ours = (found[1].get("tensor_fences") or {}) if found else {}
        if ours.get("harness") != HARNESS:
            return None
        return cls(found[0], ours.get("recorded", {}))

    @staticmethod
    def split(outputs) -> tuple[list, str]:
        """(the outputs as a reader's run shows them, the recorded lines): marker lines out of
        the streams, consecutive streams of one name joined, as nbclient keeps them."""
        shown, recorded = [], []
        for out in map(nbformat.from_dict, map(dict, outputs)):
            if out.get("output_type") == "stream":
                lines = out["text"].splitlines(keepends=True)
                recorded += [line for line in lines if line.startswith(MARKERS)]
                out["text"] = "".join(line for line in lines if not line.startswith(MARKERS))
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
        for n, cell in enumerate(c for c in executed.cells if c.cell_type == "code"):
            cell.outputs, lines = cls.split(ran[n])
            # Counted 1..N as a reader's run counts them (the harness's cells between are not).
            cell.execution_count = n + 1
            for out in cell.outputs:
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = n + 1
            if lines:
                recorded[str(n)] = lines
        jupyter_cache.store(jupyter_cache.get_cache(cache), executed, uri, seconds,
                            {"tensor_fences": {"harness": HARNESS, "recorded": recorded}})


def missing(root: Path) -> list[Path]:
    """The chapters of ``root``'s table of contents whose run the execution cache lacks (one
    the build refuses, with no header, is left to the build to name)."""
    cache = cachekey.cache_path(cachekey.cache_base(root))
    lacking = []
    for path in chapters.toc_files(root):
        text = path.read_text(encoding="utf-8") if path.exists() else None
        if text is not None and not chapters.header_problems(text) and \
                Stored.find(cache, chapters.parse(text, path)) is None:
            lacking.append(path)
    return lacking
