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
