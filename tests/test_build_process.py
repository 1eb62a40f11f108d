"""`make book`'s processes and what they leave: the Makefile's recipe.

What is checked: the parse cache outside the clone is pruned; the site is
published only from a build that succeeded (a failed build leaves the last good
site, never a mix); Ctrl-C or SIGTERM stops the build and every process it started.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fencecheck.chapter import prune_parsed

ROOT = Path(__file__).resolve().parents[1]


def test_the_parse_cache_outside_the_clone_is_pruned(tmp_path):
    now = time.time()
    ages = {"new": 0, "week": 7, "old": 30}
    for name, days in ages.items():
        path = tmp_path / f"{name}.ipynb"
        path.write_text("{}")
        os.utime(path, (now - days * 86400, now - days * 86400))
    for n in range(5):   # more recent entries than kept
        path = tmp_path / f"recent{n}.ipynb"
        path.write_text("{}")
        os.utime(path, (now - n * 60, now - n * 60))
    stray = tmp_path / "x.123.tmp"      # left by a killed writer
    stray.write_text("{")
    os.utime(stray, (now - 7200, now - 7200))
    removed = prune_parsed(tmp_path, keep=4, days=14, now=now)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["new.ipynb", "recent0.ipynb", "recent1.ipynb", "recent2.ipynb"], left
    assert removed == 5   # recent3, recent4, the stray file, week (past keep), old (past 14 days)
    assert prune_parsed(tmp_path / "absent") == 0


# --- make book's recipe, with stand-ins for python and jupyter-book -----------------------
#
# The stand-ins are shell scripts in a BIN of their own; the venv's stamp and the inputs are
# out of the way (STAMP= INPUTS=) and the site goes to temporary folders, so the recipe
# itself runs, quickly, and nothing of the real book is built.

FAKE_PYTHON = """#!/bin/bash
exit 0   # the preflight
"""
FAKE_JUPYTER_BOOK = """#!/bin/bash
# jupyter-book build . --path-output OUT: write the pages named in $PAGES (saying $TEXT)
# into OUT/_build/html, then exit $RC; or, with HANG=j, start a process of its own (a
# kernel) and wait for it
if [ "${HANG:-}" = j ]; then
    sleep 1000 &
    printf j >&"$READY_FD"
    wait
fi
while [ $# -gt 0 ]; do [ "$1" = --path-output ] && out=$2; shift; done
mkdir -p "$out/_build/html" "$out/_build/.doctrees"
for page in $PAGES; do echo "${TEXT:-built}" > "$out/_build/html/$page"; done
exit "${RC:-0}"
"""


def fake_bin(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, text in (("python", FAKE_PYTHON), ("jupyter-book", FAKE_JUPYTER_BOOK)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def make_book(tmp_path, env: dict, **kwargs):
    """``make -B book``: remade whatever the site's date (its inputs are out of the way)."""
    import subprocess

    html = tmp_path / "html"
    args = ["make", "-B", "-C", str(ROOT), "book", "STAMP=", "INPUTS=", f"BIN={fake_bin(tmp_path)}",
            f"HTML={html}", f"PRIVATE={tmp_path / 'private'}"]
    full = {**os.environ, "READY_FD": "2", **env}
    return subprocess.Popen(args, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_as_in_a_terminal, **kwargs), html


def _as_in_a_terminal() -> None:
    """make starts with SIGINT's default action, as in a terminal. A shell ignores SIGINT
    in what it starts in the background (POSIX), the ignoring is inherited, and a signal
    ignored on entry cannot be trapped: pytest run as `cmd &` would make Ctrl-C a no-op."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_site_is_published_only_from_a_build_that_succeeded(tmp_path):
    html = tmp_path / "html"
    proc, _ = make_book(tmp_path, {"PAGES": "index.html views.html", "TEXT": "one"})
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert sorted(p.name for p in html.iterdir()) == ["index.html", "views.html"]
    # a failed build (a chapter that fails its fences among the causes) leaves the last good site whole
    for env in ({"RC": "1"},):
        proc, _ = make_book(tmp_path, {"PAGES": "index.html views.html", "TEXT": "two", **env})
        assert proc.wait(timeout=120) != 0
        assert {p.name: p.read_text() for p in html.iterdir()} == {
            "index.html": "one\n", "views.html": "one\n"}, env
        assert not (tmp_path / "private" / "_build" / ".doctrees").exists()   # read afresh next
    proc, _ = make_book(tmp_path, {"PAGES": "index.html", "TEXT": "three"})
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert (html / "index.html").read_text() == "three\n"


@pytest.mark.parametrize("how", ["SIGTERM to make", "Ctrl-C"])
def test_stopping_make_book_stops_every_process_it_started(tmp_path, how, step="j"):
    """Every process the build starts inherits the write end of a pipe; reading its read
    end ends (EOF) only once all of them have exited: no polling, no process table."""
    import select
    import signal

    ready_r, ready_w = os.pipe()
    alive_r, alive_w = os.pipe()
    proc, html = make_book(tmp_path, {"HANG": step, "READY_FD": str(ready_w)},
                           pass_fds=(ready_w, alive_w), start_new_session=True)
    os.close(ready_w), os.close(alive_w)
    # the build's own child is running (a chapter's pytest and its kernels are such children)
    assert select.select([ready_r], [], [], 120)[0], "the stand-in did not start"
    assert os.read(ready_r, 1) == step.encode()
    if how == "Ctrl-C":       # the terminal signals the foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    assert select.select([alive_r], [], [], 60)[0], "a process the build started still runs"
    assert os.read(alive_r, 1) == b""       # EOF: every holder of the pipe has exited
    assert not (html / "index.html").exists()
    os.close(ready_r), os.close(alive_r)
