"""A fence gated on a device must need it (issue 53, item 4): tools/gate_lifted.py runs
each gated fence with ``fences.needs`` returning True and no device; it must fail."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "gate_lifted.py"


def lift(*chapters: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, str(TOOL), *map(str, chapters)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_cpu_claim_behind_the_gate_is_refused():
    code, out = lift(ROOT / "tests" / "corpus" / "gate_cpu_claim.md")
    assert code == 1, out
    assert ("fence corpus-gate-cpu-claim: this fence passes without the device: move its "
            "CPU part out of the gate") in out, out
    assert "fence corpus-gate-needs-it: fails with the gate lifted" in out, out
    assert "2 gated fences, 1 pass without the device" in out, out


def test_every_gated_fence_of_the_book_needs_its_device(proven):
    """The book's gated fences (devices, devices-reference): none passes with the gate lifted.
    A tooling proof over those two chapters (tests/conftest.py: ``proven``)."""
    chapters = (ROOT / "book" / "devices.md", ROOT / "book" / "devices-reference.md")
    code, out = proven("gate-lifted-book", lambda: lift(*chapters), also=chapters)
    assert code == 0, out
