"""`make book`'s processes and what they leave: tools/preexecute.py and the Makefile.

What is checked: the parse cache outside the clone is pruned; the site is
exactly the last build (a failed build leaves none that looks built, and a
chapter taken out of the book loses its page); Ctrl-C or SIGTERM stops the
build and every process it started.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import preexecute  # noqa: E402 - tools/ is not a package


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
    removed = preexecute.prune_parsed(tmp_path, keep=4, days=14, now=now)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["new.ipynb", "recent0.ipynb", "recent1.ipynb", "recent2.ipynb"], left
    assert removed == 5   # recent3, recent4, the stray file, week (past keep), old (past 14 days)
    assert preexecute.prune_parsed(tmp_path / "absent") == 0


# --- make book's recipe, with stand-ins for preexecute and jupyter-book ------------------
#
# The stand-ins are shell scripts in a BIN of their own; the venv's stamp and the inputs are
# out of the way (STAMP= INPUTS=) and the site goes to a temporary HTML folder, so the
# recipe itself runs, quickly, and nothing of the real book is built.

FAKE_PYTHON = """#!/bin/bash
# tools/preexecute.py: with HANG=p, a pool worker of its own, waited for (as the real one does)
if [ "${HANG:-}" = p ]; then
    sleep 1000 &
    printf p >&"$READY_FD"
    wait
fi
# with $DONE: take a moment, then leave a mark that the cache is full
if [ -n "${DONE:-}" ]; then sleep 1; touch "$DONE"; fi
"""
FAKE_JUPYTER_BOOK = """#!/bin/bash
# jupyter-book build: write the pages named in $PAGES, then exit $RC; or, with HANG=j,
# start a process of its own (a kernel) and wait for it
if [ "${HANG:-}" = j ]; then
    sleep 1000 &
    printf j >&"$READY_FD"
    wait
fi
if [ -n "${DONE:-}" ] && [ ! -e "$DONE" ]; then echo "built before preexecute ended" >&2; exit 9; fi
mkdir -p "$SITE_DIR"
for page in $PAGES; do echo "built" > "$SITE_DIR/$page"; done
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
            f"HTML={html}"]
    full = {**os.environ, "SITE_DIR": str(html), "READY_FD": "2", **env}
    return subprocess.Popen(args, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_as_in_a_terminal, **kwargs), html


def _as_in_a_terminal() -> None:
    """make starts with SIGINT's default action, as in a terminal. A shell ignores SIGINT
    in what it starts in the background (POSIX), the ignoring is inherited, and a signal
    ignored on entry cannot be trapped: pytest run as `cmd &` would make Ctrl-C a no-op."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_site_is_exactly_the_last_build(tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    (html / "removed-chapter.html").write_text("Every fence on this page passed")
    proc, _ = make_book(tmp_path, {"PAGES": "index.html views.html", "RC": "0"})
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert sorted(p.name for p in html.iterdir()) == ["index.html", "views.html"]
    # a failed build leaves no site that looks built: neither its pages nor the last ones
    proc, _ = make_book(tmp_path, {"PAGES": "index.html views.html", "RC": "1"})
    assert proc.wait(timeout=120) != 0
    assert not html.exists()


def test_the_build_starts_after_preexecute_has_ended(tmp_path):
    """The build reads the cache only once preexecute has filled it: one after the other."""
    proc, html = make_book(tmp_path, {"PAGES": "index.html", "RC": "0", "DONE": str(tmp_path / "done")})
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert (html / "index.html").exists()


@pytest.mark.parametrize("step", ["p", "j"], ids=["during preexecute", "during the build"])
@pytest.mark.parametrize("how", ["SIGTERM to make", "Ctrl-C"])
def test_stopping_make_book_stops_every_process_it_started(tmp_path, how, step):
    """Every process the build starts inherits the write end of a pipe; reading its read
    end ends (EOF) only once all of them have exited: no polling, no process table."""
    import select
    import signal

    ready_r, ready_w = os.pipe()
    alive_r, alive_w = os.pipe()
    proc, html = make_book(tmp_path, {"HANG": step, "READY_FD": str(ready_w)},
                           pass_fds=(ready_w, alive_w), start_new_session=True)
    os.close(ready_w), os.close(alive_w)
    # the step's own child is running (preexecute's worker, or jupyter-book's kernel)
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
