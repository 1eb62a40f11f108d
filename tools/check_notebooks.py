"""A reader with only a downloaded notebook can run it: checked in a fresh environment.

    python tools/check_notebooks.py [_build/html]        (run by make check-site)

For every chapter, downloads its ``.ipynb`` and the wheel offered beside it
from the served site into an empty folder, creates a fresh virtual
environment holding only torch (``TORCH``, from the local wheel cache is
fine: a reader has torch already) and a Jupyter runner (nbclient, ipykernel),
and executes the notebook top to bottom there. The notebook's own first cell
must install everything else. Before running it, reads it as Jupyter would
show it: no MyST syntax left in a Markdown cell, no solution open, and no
link to a repository (``fencecheck.jupyter``). Last, opens each in JupyterLab in
Chromium and checks what shows: the proofs and solutions collapsed, no MyST
or glue placeholder in the rendered Markdown (a screenshot per notebook in
``_build/screenshots/``). A lesson of the new form (``tensor-fences: {form: 3}``) is
trusted first, as its reader would ("Trust Notebook", or running it), so JupyterLab runs
the quick checks' saved JavaScript (jupyterquiz's own mechanism): at least 8 must render
and each is answered wrong then right, which must be graded apart (check_site's
``answer_question``). Planted notebooks (8 working quick checks; 7, one without its
script) check that this part can fail. Fails on any error, naming the chapter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from check_site import is_lesson, report, serve, toc_pages  # noqa: E402

from fencecheck import cachekey  # noqa: E402
from fencecheck.releases import REFERENCE  # noqa: E402
from fencecheck.sphinx import WHEEL_DIR  # noqa: E402

TORCH = os.environ.get("TORCH", f"torch=={REFERENCE}")
TORCH_INDEX = os.environ.get("TORCH_INDEX", "")  # as in the Makefile
RUNNER = ["nbclient>=0.10", "ipykernel>=6"]


def fresh_env(folder: Path) -> Path:
    """A new venv with torch and a notebook runner only; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    index = ["--extra-index-url", TORCH_INDEX] if TORCH_INDEX else []
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *index, TORCH, *RUNNER],
                   check=True)
    return python


def download(url: str, target: Path) -> Path:
    with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
        target.write_bytes(response.read())
    return target


def reading_problems(path: Path) -> list[str]:
    """What a reader opening the notebook in Jupyter would find wrong."""
    import nbformat

    from fencecheck import jupyter

    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    problems = jupyter.myst_left(nb) + jupyter.open_solutions(nb)
    if "git+" in text or "tensor-fences/tensor-fences" in text:
        problems.append("installs from or points at a repository that _config.yml does not set")
    return problems


#: The notebook in view: JupyterLab keeps other panels in the page, hidden.
OPEN = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"

#: In JupyterLab, what a reader sees of a notebook: collapsed cells, and text left raw.
LAB_JS = """() => ({
  cells: document.querySelectorAll('%(open)s .jp-Cell').length,
  collapsed: document.querySelectorAll('%(open)s .jp-InputPlaceholder').length,
  markdown: [...document.querySelectorAll('%(open)s .jp-MarkdownOutput')]
              .map(m => m.innerText).join('\\n'),
})""" % {"open": OPEN}

#: True once at least ``n`` Markdown cells of the notebook in view show rendered HTML.
RENDERED_JS = """(n) => [...document.querySelectorAll('%(open)s .jp-MarkdownCell .jp-RenderedMarkdown')]
  .filter(m => m.innerHTML.trim()).length >= n""" % {"open": OPEN}


#: A notebook left in MyST, for the self-test: many Markdown cells, the raw glue in the
#: last, so that a check that reads before every cell has rendered misses it.
PLANTED = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "markdown", "id": f"c{n}", "metadata": {},
     "source": f"## Part {n}\n\nSome text, then a list:\n\n- one\n- two\n"} for n in range(40)] + [
    {"cell_type": "markdown", "id": "last", "metadata": {}, "source": "The value is {glue:text}`x`."}]})


def quiz_outputs(nb: dict) -> int:
    """How many quick-check questions a notebook's saved outputs hold (fences.quiz)."""
    import re

    total = 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            html = "".join((out.get("data") or {}).get("text/html", ""))
            total += sum(int(n) for n in re.findall(r'class="tf-quiz"[^>]*data-questions="(\d+)"', html))
    return total


def trust(folder: Path, path: Path) -> None:
    """Sign ``path`` as its reader would trust it (JupyterLab: "Trust Notebook"), in the
    lab's own data folder: JupyterLab then runs its saved JavaScript, the quick checks."""
    import nbformat
    from nbformat.sign import NotebookNotary

    nb = nbformat.read(path, as_version=4)
    (folder / ".lab-data").mkdir(exist_ok=True)
    NotebookNotary(data_dir=str(folder / ".lab-data")).sign(nb)


def lab_quiz_problems(page, expected: int) -> list[str]:
    """In the notebook open in ``page``: the quick checks render (jupyterquiz's own
    script, from the saved outputs) and each grades a wrong answer and the right one
    differently (``check_site.answer_question``). At least ``check_site.QUIZ_GOAL``."""
    from check_site import QUIZ_GOAL, QUIZ_JS, answer_question

    problems = [] if expected >= QUIZ_GOAL else [f"{expected} quick checks in the notebook's "
                                                 f"outputs (goal: at least {QUIZ_GOAL})"]
    try:
        page.wait_for_function("(n) => { const d = [...document.querySelectorAll('%s div.tf-quiz')];"
                               " return d.reduce((a, x) => a + x.querySelectorAll('.Quiz').length, 0) >= n"
                               " && d.every(x => x.dataset.rendered === '1'); }" % OPEN,
                               arg=expected, timeout=60000)
    except Exception:  # noqa: BLE001 - what did render is reported below
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
    """Two notebooks whose outputs hold quick checks as the site's build saves them:
    eight that work, and seven of which the last has lost its JavaScript output."""
    import fences

    def notebook(questions, broken=()):
        cells = []
        for n, q in enumerate(questions):
            markup, script = fences.quiz_parts(f"planted-{n}", [q])
            outputs = [{"output_type": "display_data", "metadata": {},
                        "data": {"text/html": markup, "text/plain": "<HTML>"}}]
            if n not in broken:
                outputs.append({"output_type": "display_data", "metadata": {},
                                "data": {"application/javascript": script, "text/plain": "<JS>"}})
            cells.append({"cell_type": "code", "id": f"q{n}", "metadata": {}, "execution_count": n + 1,
                          "source": f"# quick check {n}", "outputs": outputs})
        return json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": cells, "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}})

    ask = fences.quiz_question
    qs = [ask(f"Q{n}: what is `x.stride()`?", (n, 1), choices=[(n, 1), (1, n)]) for n in range(2, 6)]
    qs += [ask("What is `x.shape`?", (2, 3)), ask("What dtype?", "float32"), ask("How many?", 12),
           ask("Contiguous?", True, choices=[True, False])]
    return {"planted-quiz-good": notebook(qs), "planted-quiz-bad": notebook(qs[:7], broken={6})}


def quiz_self_test(good: list[str], bad: list[str]) -> list[str]:
    failures = [f"the good planted notebook was failed: {good}"] if good else []
    for expected in ("7 quick checks", "6 of 7 quick checks rendered"):
        if not any(expected in p for p in bad):
            failures.append(f"the bad planted notebook was not failed for {expected!r}: {bad}")
    return failures


def lab_problems(folder: Path, names: list[str], quizzed: frozenset = frozenset()) -> dict[str, list[str]]:
    """Open each notebook of ``folder`` in JupyterLab in Chromium, as a reader would:
    every proof and solution collapsed, no glue placeholder or MyST left in the rendered
    Markdown. One screenshot per notebook in _build/screenshots/lab-<name>.png. The
    notebooks named in ``quizzed`` (lessons of the new form) are trusted first and their
    quick checks answered (``lab_quiz_problems``)."""
    import secrets
    import socket

    from check_site import SHOTS, launch
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    from fencecheck import jupyter

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = secrets.token_hex(16)
    # Settings for this run only: every cell rendered (JupyterLab 4 renders only the cells
    # in view by default), and no news prompt over the screenshot.
    settings = folder / ".lab-settings"
    for plugin, value in (("notebook-extension/tracker", {"windowingMode": "none"}),
                          ("apputils-extension/notification", {"fetchNews": "false"})):
        target = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))
    for name in quizzed:
        trust(folder, folder / f"{name}.ipynb")
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--allow-root",
         f"--ServerApp.root_dir={folder}", "--LabApp.news_url=", "--ServerApp.open_browser=False",
         f"--LabApp.workspaces_dir={folder / '.lab-workspaces'}"],   # none left in the home folder
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**__import__("os").environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
             "JUPYTER_DATA_DIR": str(folder / ".lab-data")})   # the trust database of trust()
    found: dict[str, list[str]] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):  # the server answers within seconds; give up after a minute
            try:
                urllib.request.urlopen(f"{base}/api?token={token}", timeout=2)  # noqa: S310
                break
            except OSError:
                time.sleep(0.5)
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = launch(pw)
            for n, name in enumerate(names):
                path = folder / f"{name}.ipynb"
                nb = json.loads(path.read_text())
                markdown = sum(c["cell_type"] == "markdown" and bool("".join(c["source"]).strip())
                               for c in nb["cells"])
                hidden = sum(bool(c["metadata"].get("jupyter", {}).get("source_hidden"))
                             for c in nb["cells"])
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                # A workspace of its own, reset: only this notebook open, none restored.
                page.goto(f"{base}/lab/workspaces/check-{n}/tree/{name}.ipynb?reset&token={token}",
                          wait_until="load")
                # Ready when every Markdown cell of the file is rendered (a condition, not a
                # fixed wait: a slow machine only takes longer).
                try:
                    page.wait_for_function(RENDERED_JS, arg=markdown, timeout=120000)
                except PlaywrightTimeout:
                    page.screenshot(path=str(SHOTS / f"lab-{name}.png"))
                    page.close()
                    found[name] = [f"not all {markdown} Markdown cells rendered in 120 s"]
                    continue
                facts = page.evaluate(LAB_JS)
                problems = lab_quiz_problems(page, quiz_outputs(nb)) if name in quizzed else []
                page.screenshot(path=str(SHOTS / f"lab-{name}.png"))
                page.close()
                if facts["collapsed"] < hidden:
                    problems.append(f"{facts['collapsed']} cells shown collapsed, {hidden} should be")
                left = jupyter.LEFT.findall(facts["markdown"]) + \
                    (["{glue"] if "{glue" in facts["markdown"] else [])
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
    server, url = serve(site)
    failures = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            python = fresh_env(Path(tmp) / "env")
            print(f"check-notebooks: fresh environment with {TORCH} "
                  f"in {time.monotonic() - start:.0f} s", flush=True)
            for name in pages:
                work = Path(tmp) / name.replace("/", "_")
                work.mkdir()
                nb = download(f"{url}/_sources/{name}.ipynb", work / f"{Path(name).stem}.ipynb")
                failures += report(f"{name}: reads as Jupyter Markdown", reading_problems(nb))
                download(f"{url}/{WHEEL_DIR}/{wheels[-1].name}", work / wheels[-1].name)
                start = time.monotonic()
                cachekey.log_execution(ROOT, f"{name}.md", "downloaded notebook")
                run = subprocess.run([str(python.parent / "jupyter-execute"), "--timeout=600",
                                      str(nb)], cwd=work, capture_output=True, text=True)
                ok = run.returncode == 0
                tail = [] if ok else ((run.stdout + run.stderr).splitlines()[-15:]
                                      or [f"exit status {run.returncode}"])
                failures += report(f"{name} ({time.monotonic() - start:.0f} s)", tail)
            lab = Path(tmp) / "lab"
            lab.mkdir()
            for name in pages:
                stem = name.replace("/", "_")
                (lab / f"{stem}.ipynb").write_bytes((Path(tmp) / stem / f"{Path(name).stem}.ipynb")
                                                    .read_bytes())
            # The self-test: a notebook left in MyST must be failed; a notebook with 8
            # working quick checks passed, one with 7 of which one never renders failed.
            (lab / "planted-myst.ipynb").write_text(PLANTED)
            for stem, text in planted_quiz_notebooks().items():
                (lab / f"{stem}.ipynb").write_text(text)
            stems = [n.replace("/", "_") for n in pages]
            quizzed = frozenset(n.replace("/", "_") for n in pages if is_lesson(n))
            seen = lab_problems(lab, stems + ["planted-myst", "planted-quiz-good", "planted-quiz-bad"],
                                quizzed | {"planted-quiz-good", "planted-quiz-bad"})
            planted = seen.pop("planted-myst")
            failures += report("self-test: JupyterLab shows raw MyST in a planted notebook",
                               [] if planted else ["the planted notebook was not failed"])
            good, bad = seen.pop("planted-quiz-good"), seen.pop("planted-quiz-bad")
            failures += report("self-test: JupyterLab grades 8 planted quick checks and fails a "
                               "notebook with 7, one not rendering", quiz_self_test(good, bad))
            for stem, problems in seen.items():
                failures += report(f"{stem}: in JupyterLab (screenshot lab-{stem}.png)", problems)
    finally:
        server.shutdown()
    print(f"check-notebooks: {len(pages) - failures} ran, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
