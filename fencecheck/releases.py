"""The torch releases the matrix verifies on: the one list, as plain data (imports nothing).

``tools/matrix.py`` and ``noxfile.py`` run each entry, (name, pip requirement, why, find_links);
``fencecheck.record`` refuses a results file for a release not listed (or newer than all: *newest*'s).
"""
from __future__ import annotations

#: The reference torch, its one home (tests/test_one_home.py): `make test` and `make book`
#: install ``torch==REFERENCE``; the matrix runs its CPU build (the entry below).
REFERENCE = "2.13.0"

RELEASES: tuple[tuple[str, str, str, str], ...] = (
    ("2.8.0", "torch==2.8.0", "the release the oldest source material was written against", ""),
    ("2.9.1", "torch==2.9.1", "", ""),
    ("2.10.0", "torch==2.10.0", "", ""),
    ("2.11.0", "torch==2.11.0", "", ""),
    ("2.12.1", "torch==2.12.1", "", ""),
    # The local version label pins the CPU build; it is not on PyPI but on PyTorch's own
    # page (a machine with the wheel at hand says where with PIP_FIND_LINKS instead).
    (f"{REFERENCE}+cpu", f"torch=={REFERENCE}+cpu", "the reference build: CPU wheel, the one `make test` uses",
     "https://download.pytorch.org/whl/cpu/torch/"),
    ("2.14.1", "torch==2.14.1", "", ""),
    ("2.15.0", "torch==2.15.0", "", ""),
)
#: A results file for a release newer than every listed one is the "newest" run's.
NEWER_ALLOWED = True


def names() -> list[str]:
    return [r[0] for r in RELEASES]
