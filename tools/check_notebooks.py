"""A reader with only a downloaded notebook can run it: ``python tools/check_notebooks.py [_build/html]`` (make
check-site).

Each chapter's ``.ipynb`` and the wheel beside it are downloaded from the served site, read as Jupyter shows them,
and run top to bottom in a fresh venv holding only torch (``TORCH``) and a notebook runner (its first cell installs
the rest). Then each is opened in JupyterLab in Chromium: proofs and solutions collapsed, no MyST or glue left (a
screenshot each); a lesson is trusted first, as its reader would, and its quick checks (at least 8) must render and
grade a wrong and the right answer apart. Planted notebooks prove this part can fail.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from check_site import (  # noqa: E402
    QUIZ_GOAL, QUIZ_JS, SHOTS, answer_question, is_lesson, launch, report, serve, toc_pages)

from fencecheck import cachekey, jupyter  # noqa: E402
from fencecheck.releases import REFERENCE  # noqa: E402
from fencecheck.sphinx import WHEEL_DIR  # noqa: E402

TORCH = os.environ.get("TORCH", f"torch=={REFERENCE}")
TORCH_INDEX = os.environ.get("TORCH_INDEX", "")  # as in the Makefile
RUNNER = ["nbclient>=0.10", "ipykernel>=6"]

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

#: A notebook left in MyST, for the self-test: many Markdown cells, the raw glue in the last, so that a check that
#: reads before every cell has rendered misses it.
PLANTED = nbformat.writes(new_notebook(cells=[
    new_markdown_cell(f"## Part {n}\n\nSome text, then a list:\n\n- one\n- two\n") for n in range(40)] + [
    new_markdown_cell("The value is {glue:text}`x`.")]))


def fresh_env(folder: Path) -> Path:
    """A new venv with torch and a notebook runner only; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    index = ["--extra-index-url", TORCH_INDEX] if TORCH_INDEX else []
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *index, TORCH, *RUNNER], check=True)
    return python


def download(url: str, target: Path) -> Path:
    with urllib.request.urlopen(url) as response:
        target.write_bytes(response.read())
    return target


def reading_problems(path: Path) -> list[str]:
    """What a reader opening the notebook in Jupyter would find wrong."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    problems = jupyter.myst_left(nb) + jupyter.open_solutions(nb)
    if "git+" in text or "tensor-fences/tensor-fences" in text:
        problems.append("installs from or points at a repository that _config.yml does not set")
    return problems


def quiz_outputs(nb: dict) -> int:
    """How many quick-check questions a notebook's saved outputs hold (fences.quiz)."""
    pattern = re.compile(r'class="tf-quiz"[^>]*data-questions="(\d+)"')
    return sum(int(n) for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", [])
               for n in pattern.findall("".join((out.get("data") or {}).get("text/html", ""))))


def lab_quiz_problems(page, expected: int) -> list[str]:
    """In the notebook open in ``page``: at least ``QUIZ_GOAL`` quick checks render (their saved JavaScript runs)
    and each grades a wrong and the right answer apart."""
    problems = [] if expected >= QUIZ_GOAL else [f"{expected} quick checks in the notebook's outputs "
                                                 f"(goal: at least {QUIZ_GOAL})"]
    try:
        page.wait_for_function(QUIZZES_JS, arg=expected, timeout=60000)
    except Exception:  # what did render is reported below
        pass
    boxes = page.evaluate(QUIZ_JS)
    rendered = sum(b["rendered"] for b in boxes)
    if rendered < expected:
        problems.append(f"{rendered} of {expected} quick checks rendered in JupyterLab "
                        "(a collapsed output, or its JavaScript did not run)")
    page.set_default_timeout(5000)
    for c, box in enumerate(boxes):
        for i, key in enumerate(box["keys"][:box["rendered"]]):
            problems += answer_question(page, c, i, key)
    return problems


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


def lab_problems(folder: Path, names: list[str], quizzed: frozenset = frozenset()) -> dict[str, list[str]]:
    """Open each notebook of ``folder`` in JupyterLab in Chromium, as a reader would: every proof and solution
    collapsed, no glue or MyST left in the rendered Markdown; a screenshot each. Those in ``quizzed`` are trusted
    first and their quick checks answered."""
    from nbformat.sign import NotebookNotary
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

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
    (folder / ".lab-data").mkdir(exist_ok=True)
    for name in quizzed:   # "Trust Notebook": JupyterLab then runs the saved JavaScript
        NotebookNotary(data_dir=str(folder / ".lab-data")).sign(nbformat.read(folder / f"{name}.ipynb", as_version=4))
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--allow-root",
         f"--ServerApp.root_dir={folder}", "--LabApp.news_url=", "--ServerApp.open_browser=False",
         f"--LabApp.workspaces_dir={folder / '.lab-workspaces'}"],   # none left in the home folder
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_DATA_DIR": str(folder / ".lab-data")})
    found: dict[str, list[str]] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):  # the server answers within seconds; give up after a minute
            try:
                urllib.request.urlopen(f"{base}/api?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = launch(pw)
            for n, name in enumerate(names):
                nb = json.loads((folder / f"{name}.ipynb").read_text())
                markdown = sum(c["cell_type"] == "markdown" and bool("".join(c["source"]).strip())
                               for c in nb["cells"])
                hidden = sum(bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in nb["cells"])
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                # A workspace of its own, reset: only this notebook open, none restored.
                page.goto(f"{base}/lab/workspaces/check-{n}/tree/{name}.ipynb?reset&token={token}",
                          wait_until="load")
                try:   # ready when every Markdown cell is rendered: a slow machine only takes longer
                    page.wait_for_function(RENDERED_JS, arg=markdown, timeout=120000)
                except PlaywrightTimeout:
                    facts, problems = None, [f"not all {markdown} Markdown cells rendered in 120 s"]
                else:
                    facts = page.evaluate(LAB_JS)
                    problems = lab_quiz_problems(page, quiz_outputs(nb)) if name in quizzed else []
                page.screenshot(path=str(SHOTS / f"lab-{name}.png"))
                page.close()
                if facts and facts["collapsed"] < hidden:
                    problems.append(f"{facts['collapsed']} cells shown collapsed, {hidden} should be")
                shown = facts["markdown"] if facts else ""
                left = jupyter.LEFT.findall(shown) + (["{glue"] if "{glue" in shown else [])
                if left:
                    problems.append(f"raw MyST in the rendered Markdown: {left[:3]}")
                found[name] = problems
            browser.close()
    finally:
        lab.terminate()
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:   # a server slow to stop is stopped
            lab.kill()
            lab.wait()
    return found


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else ROOT / "_build" / "html"
    wheels = sorted((site / WHEEL_DIR).glob("*.whl"))
    if not wheels:
        print(f"check-notebooks: no wheel in {site / WHEEL_DIR}; run `make book`", file=sys.stderr)
        return 1
    pages = toc_pages()
    stems = [n.replace("/", "_") for n in pages]
    server, url = serve(site)
    failures = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            lab = Path(tmp) / "lab"
            lab.mkdir()
            start = time.monotonic()
            python = fresh_env(Path(tmp) / "env")
            print(f"check-notebooks: fresh environment with {TORCH} in {time.monotonic() - start:.0f} s",
                  flush=True)
            for name, stem in zip(pages, stems):
                work = Path(tmp) / stem
                work.mkdir()
                nb = download(f"{url}/_sources/{name}.ipynb", work / f"{Path(name).stem}.ipynb")
                failures += report(f"{name}: reads as Jupyter Markdown", reading_problems(nb))
                (lab / f"{stem}.ipynb").write_bytes(nb.read_bytes())
                download(f"{url}/{WHEEL_DIR}/{wheels[-1].name}", work / wheels[-1].name)
                start = time.monotonic()
                cachekey.log_execution(ROOT, f"{name}.md", "downloaded notebook")
                run = subprocess.run([str(python.parent / "jupyter-execute"), "--timeout=600", str(nb)],
                                     cwd=work, capture_output=True, text=True)
                tail = [] if run.returncode == 0 else ((run.stdout + run.stderr).splitlines()[-15:]
                                                       or [f"exit status {run.returncode}"])
                failures += report(f"{name} ({time.monotonic() - start:.0f} s)", tail)
            # The self-test: a notebook left in MyST must be failed; one with 8 working quick
            # checks passed, one with 7 of which one never renders failed.
            (lab / "planted-myst.ipynb").write_text(PLANTED)
            for stem, text in planted_quiz_notebooks().items():
                (lab / f"{stem}.ipynb").write_text(text)
            planted = ["planted-quiz-good", "planted-quiz-bad"]
            quizzed = frozenset(s for n, s in zip(pages, stems) if is_lesson(n)) | set(planted)
            seen = lab_problems(lab, stems + ["planted-myst"] + planted, quizzed)
            failures += report("self-test: JupyterLab shows raw MyST in a planted notebook",
                               [] if seen.pop("planted-myst") else ["the planted notebook was not failed"])
            good, bad = seen.pop("planted-quiz-good"), seen.pop("planted-quiz-bad")
            self_test = [f"the good planted notebook was failed: {good}"] if good else []
            self_test += [f"the bad planted notebook was not failed for {expected!r}: {bad}"
                          for expected in ("7 quick checks", "6 of 7 quick checks rendered")
                          if not any(expected in p for p in bad)]
            failures += report("self-test: JupyterLab grades 8 planted quick checks and fails a "
                               "notebook with 7, one not rendering", self_test)
            for stem, problems in seen.items():
                failures += report(f"{stem}: in JupyterLab (screenshot lab-{stem}.png)", problems)
    finally:
        server.shutdown()
    print(f"check-notebooks: {len(pages) - failures} ran, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
