"""Quick checks on a built site: a small book (a lesson of the new form with 8 quick
checks, one with 7, the stride drill) is built and executed by ``jupyter-book``. Here only
the build is checked; make check-site builds it again and answers it in Chromium by the site
checks' own measures (tests/site/test_quiz_book.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fencecheck.chapter import HEADER

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "site"))

FORM3 = HEADER[:-4] + "tensor-fences: {form: 3}\n---\n"
IMPORTS = "```{code-cell} ipython3\nimport torch\n\nimport fences\n```\n"

#: (fence id, the question's code, the fences.quiz call's arguments, the witness)
CHECKS = [
    ("permute", "y = torch.zeros(2, 3, 4).permute(2, 0, 1)",
     '"What is `y.stride()`?", y.stride(),\n    choices=[(1, 12, 4), (12, 4, 1), (4, 12, 1)],\n'
     '    explain="permute reorders the strides"', "(1, 12, 4)"),
    ("shape", "y = torch.zeros(2, 3).t()", '"What is `y.shape`?", tuple(y.shape)', "(3, 2)"),
    ("numel", "y = torch.zeros(2, 3)[:, ::2]", '"What is `y.numel()`?", y.numel()', "4"),
    ("dtype", "y = torch.zeros(2) + 1", '"What is `y.dtype`?", y.dtype', "torch.float32"),
    ("contig", "y = torch.zeros(4, 1).t()", '"Is `y` contiguous?", y.is_contiguous(),\n'
     "    choices=[True, False]", "True"),
    ("view", "y = torch.zeros(2, 3).t()",
     '"Does `y.view(6)` work?",\n    "works" if y.is_contiguous() else "raises RuntimeError",\n'
     '    choices=["works", "raises RuntimeError"]', '"raises RuntimeError"'),
    ("expand", "y = torch.zeros(3, 1).expand(3, 4)", '"What is `y.stride()`?", y.stride()', "(1, 0)"),
    ("offset", "y = torch.arange(12).view(3, 4)[1:, 2:]",
     '"What is `y.storage_offset()`?", y.storage_offset()', "6"),
]


def lesson(title: str, checks) -> str:
    cells = [f"```{{code-cell}} ipython3\n:tags: [fence]\n:fence-id: {title}-{fid}\n{code}\n"
             f"# Proves: quick check {fid}.\nkey = fences.quiz(\n    \"{title}-{fid}\",\n    {args})\n"
             f"assert key == {witness}\n```\n" for fid, code, args, witness in checks]
    return FORM3 + f"# {title.capitalize()} lesson\n\n{IMPORTS}\nSome prose.\n\n" + "\n".join(cells)


def lay_out(root: Path) -> None:
    (root / "book").mkdir()
    (root / "book" / "index.md").write_text(HEADER + "# Home\n\nA test book.\n")
    (root / "book" / "views.md").write_text(HEADER + "# Views\n\nA stand-in.\n")
    (root / "book" / "good.md").write_text(lesson("good", CHECKS))
    (root / "book" / "few.md").write_text(lesson("few", CHECKS[:7]))
    shutil.copy(ROOT / "book" / "stride-drill.md", root / "book" / "stride-drill.md")
    shutil.copytree(ROOT / "_static", root / "_static")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n  - file: book/good\n"
                                   "  - file: book/few\n  - file: book/views\n  - file: book/stride-drill\n")
    config = (ROOT / "_config.yml").read_text().replace("execute_notebooks: cache", "execute_notebooks: force")
    (root / "_config.yml").write_text(config)


def build(root: Path) -> subprocess.CompletedProcess:
    """The small book laid out in ``root`` and built there (``_build/html``), as make book runs it."""
    lay_out(root)
    jb = Path(sys.executable).with_name("jupyter-book")
    import fences

    env = {k: v for k, v in os.environ.items() if k != fences.RECORD_ENV}   # as make book runs
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return subprocess.run([str(jb), "build", str(root), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture(scope="module")
def site(proven, tmp_path_factory):
    """What the tests read of the small book's build: a tooling proof, over stride-drill.md too
    (tests/conftest.py: ``proven``)."""
    def run():
        from site_checks import is_lesson

        root = tmp_path_factory.mktemp("quizbook")
        proc = build(root)
        html = root / "_build" / "html" / "book"
        pages = {name: (html / f"{name}.html").read_text() for name in ("good", "stride-drill")
                 if (html / f"{name}.html").exists()}
        lessons = {page: is_lesson(page, root) for page in ("book/good", "book/index")}
        return proc.returncode, proc.stdout[-3000:] + proc.stderr[-3000:], pages, lessons

    return proven("quiz-book-build", run, also=(ROOT / "book" / "stride-drill.md",))


def test_the_book_with_quick_checks_builds_without_a_warning(site):
    code, out, pages, _ = site
    assert code == 0, out
    assert pages["good"].count('class="tf-quiz"') == 8
    assert "[observed]" not in pages["good"]   # the key is recorded, not shown
    assert pages["stride-drill"].count('class="tf-quiz"') == 10


def test_a_lesson_is_what_the_front_matter_declares(site):
    _, _, _, lessons = site
    assert lessons == {"book/good": True, "book/index": False}
