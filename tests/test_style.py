"""The tooling passes its linter (ruff, configured in pyproject.toml), so make test fails
on an unused import or an undefined name in fences/, fencecheck/, tools/ or tests/."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_the_tooling_passes_ruff():
    done = ruff("check", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_fails_an_undefined_name(tmp_path):
    """The must-fail twin: the same configuration refuses a planted fault."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    done = ruff("check", "--output-format", "concise", "--config", str(ROOT / "pyproject.toml"),
                str(bad))
    assert done.returncode == 1 and "F821" in done.stdout and "F401" in done.stdout
