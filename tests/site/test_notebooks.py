"""A reader with only a downloaded notebook can run it (docs/site-checks.md).

Each chapter's ``.ipynb`` and the wheel beside it are downloaded from the served site, read as Jupyter shows them,
and run top to bottom in a fresh venv holding only torch (``TORCH``) and a notebook runner (its first cell installs
the rest). Then each is opened in JupyterLab (run by uv from an environment of its own) in Chromium: proofs and
solutions collapsed, no MyST or glue left (a screenshot each); a lesson is trusted first, as its reader would, and
its quick checks (at least 8) must render and grade a wrong and the right answer apart. Planted notebooks prove
the JupyterLab test can fail (no build needed: ``pytest tests/site -k planted_notebook``).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
import site_checks as sc
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from pdf import toc_pages  # the pages the PDF prints

from fencecheck import cachekey, jupyter
from fencecheck.releases import REFERENCE
from fencecheck.sphinx import WHEEL_DIR

TORCH = os.environ.get("TORCH", f"torch=={REFERENCE}")
TORCH_INDEX = os.environ.get("TORCH_INDEX", "")  # as in the Makefile
RUNNER = ["nbclient>=0.10", "ipykernel>=6"]
#: JupyterLab runs from an environment of its own: in the test's, its dependencies would slow every process
#: that imports nbformat or jsonschema (benchmarks/README.md).
JUPYTERLAB = "jupyterlab>=4,<5"
PAGES = toc_pages()

#: The notebook in view: JupyterLab keeps other panels in the page, hidden.
OPEN = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"
#: In JupyterLab, what a reader sees of a notebook: collapsed cells, and text left raw.
LAB_JS = """() => ({
  collapsed: document.querySelectorAll('%(open)s .jp-InputPlaceholder').length,
  markdown: [...document.querySelectorAll('%(open)s .jp-MarkdownOutput')]
              .map(m => m.innerText).join('\\n'),
})""" % {"open": OPEN}
#: True once at least ``n`` Markdown cells of the notebook in view show rendered HTML.
RENDERED_JS = """(n) => [...document.querySelectorAll('%(open)s .jp-MarkdownCell .jp-RenderedMarkdown')]
  .filter(m => m.innerHTML.trim()).length >= n""" % {"open": OPEN}
#: True once at least ``n`` quick checks rendered, every container done.
QUIZZES_JS = """(n) => { const d = [...document.querySelectorAll('%(open)s div.tf-quiz')];
  return d.reduce((a, x) => a + x.querySelectorAll('.Quiz').length, 0) >= n
    && d.every(x => x.dataset.rendered === '1'); }""" % {"open": OPEN}

#: A notebook left in MyST: many Markdown cells, the raw glue in the last, so that a check that reads before every
#: cell has rendered misses it.
PLANTED_MYST = nbformat.writes(new_notebook(cells=[
    new_markdown_cell(f"## Part {n}\n\nSome text, then a list:\n\n- one\n- two\n") for n in range(40)] + [
    new_markdown_cell("The value is {glue:text}`x`.")]))


@pytest.fixture(scope="session")
def downloads(site, pytestconfig, tmp_path_factory) -> Path:
    """A folder holding, for each chapter, a folder with its notebook and the wheel, downloaded from the site."""
    wheels = sorted((Path(pytestconfig.getoption("site")) / WHEEL_DIR).glob("*.whl"))
    if not wheels:
        pytest.fail(f"check-site: no wheel in {pytestconfig.getoption('site')}/{WHEEL_DIR}; run `make book`")
    folder = tmp_path_factory.mktemp("notebooks")
    for name in PAGES:
        work = folder / name.replace("/", "_")
        work.mkdir()
        urllib.request.urlretrieve(f"{site}/_sources/{name}.ipynb", work / f"{Path(name).stem}.ipynb")
        urllib.request.urlretrieve(f"{site}/{WHEEL_DIR}/{wheels[-1].name}", work / wheels[-1].name)
    return folder


def downloaded(downloads: Path, name: str) -> Path:
    return downloads / name.replace("/", "_") / f"{Path(name).stem}.ipynb"


def reading_problems(path: Path) -> list[str]:
    """What a reader opening the notebook in Jupyter would find wrong."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    problems = jupyter.myst_left(nb) + jupyter.open_solutions(nb)
    if "git+" in text or "tensor-fences/tensor-fences" in text:
        problems.append("installs from or points at a repository that _config.yml does not set")
    return problems


@pytest.mark.parametrize("name", PAGES, ids=sc.short)
def test_notebook_reads_as_jupyter_markdown(downloads, name):
    problems = reading_problems(downloaded(downloads, name))
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="session")
def fresh_python(tmp_path_factory, figures) -> Path:
    """The python of a new venv with torch and a notebook runner only."""
    start = time.monotonic()
    folder = tmp_path_factory.mktemp("fresh-env")
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    index = ["--extra-index-url", TORCH_INDEX] if TORCH_INDEX else []
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *index, TORCH, *RUNNER], check=True)
    figures.append(f"notebooks: a fresh environment with {TORCH} in {time.monotonic() - start:.0f} s")
    return python


@pytest.mark.parametrize("name", PAGES, ids=sc.short)
def test_notebook_runs_in_a_fresh_environment(downloads, fresh_python, figures, name):
    notebook = downloaded(downloads, name)
    start = time.monotonic()
    cachekey.log_execution(sc.ROOT, f"{name}.md", "downloaded notebook")
    run = subprocess.run([str(fresh_python.parent / "jupyter-execute"), "--timeout=600", str(notebook)],
                         cwd=notebook.parent, capture_output=True, text=True)
    figures.append(f"notebook {name}: ran in {time.monotonic() - start:.0f} s")
    tail = (run.stdout + run.stderr).splitlines()[-15:] or [f"exit status {run.returncode}"]
    assert run.returncode == 0, "\n".join(tail)


def planted_quiz_notebooks() -> dict[str, str]:
    """Two notebooks whose outputs hold quick checks as the build saves them: eight that work, and seven of which
    the last has lost its JavaScript output."""
    import fences

    def notebook(questions, broken=()):
        cells = []
        for n, q in enumerate(questions):
            markup, script = fences.quiz_parts(f"planted-{n}", [q])
            outputs = [new_output("display_data", {"text/html": markup, "text/plain": "<HTML>"})]
            if n not in broken:
                outputs.append(new_output("display_data", {"application/javascript": script, "text/plain": "<JS>"}))
            cells.append(new_code_cell(f"# quick check {n}", execution_count=n + 1, outputs=outputs))
        kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
        return nbformat.writes(new_notebook(cells=cells, metadata={"kernelspec": kernel}))

    ask = fences.quiz_question
    qs = [ask(f"Q{n}: what is `x.stride()`?", (n, 1), choices=[(n, 1), (1, n)]) for n in range(2, 6)]
    qs += [ask("What is `x.shape`?", (2, 3)), ask("What dtype?", "float32"), ask("How many?", 12),
           ask("Contiguous?", True, choices=[True, False])]
    return {"planted-quiz-good": notebook(qs), "planted-quiz-bad": notebook(qs[:7], broken={6})}


def trust(folder: Path, name: str) -> None:
    """"Trust Notebook", as its reader would: JupyterLab then runs the saved JavaScript."""
    from nbformat.sign import NotebookNotary

    NotebookNotary(data_dir=str(folder / ".lab-data")).sign(nbformat.read(folder / f"{name}.ipynb", as_version=4))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a folder that holds the planted notebooks, the planted quick checks trusted: the folder
    and the server's URL and token. Stopped after this module's tests, with the kernels it started."""
    folder = tmp_path_factory.mktemp("lab")
    (folder / ".lab-data").mkdir()
    (folder / "planted-myst.ipynb").write_text(PLANTED_MYST)
    for name, text in planted_quiz_notebooks().items():
        (folder / f"{name}.ipynb").write_text(text)
        trust(folder, name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = secrets.token_hex(16)
    # For this run only: every cell rendered (JupyterLab 4 renders only those in view), no news.
    settings = folder / ".lab-settings"
    for plugin, value in (("notebook-extension/tracker", {"windowingMode": "none"}),
                          ("apputils-extension/notification", {"fetchNews": "false"})):
        target = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))
    server = subprocess.Popen(
        [sys.executable, "-m", "uv", "tool", "run", "--from", JUPYTERLAB, "jupyter-lab",
         "--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--allow-root",
         f"--ServerApp.root_dir={folder}", "--LabApp.news_url=", "--ServerApp.open_browser=False",
         f"--LabApp.workspaces_dir={folder / '.lab-workspaces'}"],   # none left in the home folder
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_DATA_DIR": str(folder / ".lab-data")})
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(240):  # the server answers within seconds (uv's first install: a minute); give up after two
            try:
                urllib.request.urlopen(f"{base}/api?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield folder, base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:   # a server slow to stop is stopped
            server.kill()
            server.wait()


def quiz_outputs(nb: dict) -> int:
    """How many quick-check questions a notebook's saved outputs hold (fences.quiz)."""
    pattern = re.compile(r'class="tf-quiz"[^>]*data-questions="(\d+)"')
    return sum(int(n) for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", [])
               for n in pattern.findall("".join((out.get("data") or {}).get("text/html", ""))))


def lab_quiz_problems(page, expected: int) -> list[str]:
    """In the notebook open in ``page``: at least ``QUIZ_GOAL`` quick checks render (their saved JavaScript runs)
    and each grades a wrong and the right answer apart."""
    problems = [] if expected >= sc.QUIZ_GOAL else [f"{expected} quick checks in the notebook's outputs "
                                                    f"(goal: at least {sc.QUIZ_GOAL})"]
    try:
        page.wait_for_function(QUIZZES_JS, arg=expected, timeout=60000)
    except Exception:  # what did render is reported below
        pass
    boxes = page.evaluate(sc.QUIZ_JS)
    rendered = sum(b["rendered"] for b in boxes)
    if rendered < expected:
        problems.append(f"{rendered} of {expected} quick checks rendered in JupyterLab "
                        "(a collapsed output, or its JavaScript did not run)")
    page.set_default_timeout(5000)
    for c, box in enumerate(boxes):
        for i, key in enumerate(box["keys"][:box["rendered"]]):
            problems += sc.answer_question(page, c, i, key)
    return problems


def lab_problems(browser, lab, name: str, quizzed: bool) -> list[str]:
    """Open notebook ``name`` of the lab's folder in JupyterLab in Chromium, as a reader would: every proof and
    solution collapsed, no glue or MyST left in the rendered Markdown; a screenshot (``lab-<name>.png``). A
    ``quizzed`` one has its quick checks answered."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    folder, base, token = lab
    nb = json.loads((folder / f"{name}.ipynb").read_text())
    markdown = sum(c["cell_type"] == "markdown" and bool("".join(c["source"]).strip()) for c in nb["cells"])
    hidden = sum(bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in nb["cells"])
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    # A workspace of its own, reset: only this notebook open, none restored.
    page.goto(f"{base}/lab/workspaces/check-{name}/tree/{name}.ipynb?reset&token={token}", wait_until="load")
    try:   # ready when every Markdown cell is rendered: a slow machine only takes longer
        page.wait_for_function(RENDERED_JS, arg=markdown, timeout=120000)
    except PlaywrightTimeout:
        facts, problems = None, [f"not all {markdown} Markdown cells rendered in 120 s"]
    else:
        facts = page.evaluate(LAB_JS)
        problems = lab_quiz_problems(page, quiz_outputs(nb)) if quizzed else []
    sc.SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(sc.SHOTS / f"lab-{name}.png"))
    page.close()
    if facts and facts["collapsed"] < hidden:
        problems.append(f"{facts['collapsed']} cells shown collapsed, {hidden} should be")
    shown = facts["markdown"] if facts else ""
    left = jupyter.LEFT.findall(shown) + (["{glue"] if "{glue" in shown else [])
    if left:
        problems.append(f"raw MyST in the rendered Markdown: {left[:3]}")
    return problems


@pytest.mark.parametrize("name", PAGES, ids=sc.short)
def test_notebook_in_jupyterlab(browser, downloads, lab, name):
    stem = name.replace("/", "_")
    (lab[0] / f"{stem}.ipynb").write_bytes(downloaded(downloads, name).read_bytes())
    if sc.is_lesson(name):
        trust(lab[0], stem)
    problems = lab_problems(browser, lab, stem, quizzed=sc.is_lesson(name))
    assert not problems, "\n".join(problems)


def test_planted_notebook_in_myst_fails_in_jupyterlab(browser, lab):
    assert lab_problems(browser, lab, "planted-myst", quizzed=False), "the planted notebook was not failed"


def test_planted_notebook_with_8_quick_checks_passes_in_jupyterlab(browser, lab):
    assert lab_problems(browser, lab, "planted-quiz-good", quizzed=True) == []


def test_planted_notebook_with_7_quick_checks_one_not_rendering_fails_in_jupyterlab(browser, lab):
    problems = lab_problems(browser, lab, "planted-quiz-bad", quizzed=True)
    for expected in ("7 quick checks", "6 of 7 quick checks rendered"):
        assert any(expected in p for p in problems), problems
