"""What the browser checks share with the other tools that open the built site.

The site's checks themselves are pytest tests in tests/site/ (``make check-site`` runs
them; docs/site-checks.md); tools/check_notebooks.py and tools/pdf.py use this module's
browser, server and quick-check helpers too.
"""
from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fencecheck.chapter import toc_files  # noqa: E402

#: Debian's chromium by default; CHROMIUM=bundled uses the browser `playwright install`
#: downloads (a hosted CI runner, where Debian's package is not available).
CHROMIUM = __import__("os").environ.get("CHROMIUM", "/usr/bin/chromium")


def launch(pw):
    path = None if CHROMIUM == "bundled" else CHROMIUM
    return pw.chromium.launch(executable_path=path, args=FLAGS)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "_build" / "screenshots"


def report(label: str, problems: list[str]) -> bool:
    """Print one "ok"/"FAIL" line for a check, then its problems; True when it failed."""
    print(f"{'ok  ' if not problems else 'FAIL'} {label}", flush=True)
    for p in problems:
        print(f"     - {p}")
    return bool(problems)


def built_site(argv: list[str], tool: str) -> Path | None:
    """The built site to check (``argv[0]`` or ``_build/html``); None, after saying to
    run ``make book``, when it has no index page."""
    folder = Path(argv[0]) if argv else ROOT / "_build" / "html"
    if not (folder / "index.html").exists():
        print(f"{tool}: {folder}/index.html is missing; run `make book` first", file=sys.stderr)
        return None
    return folder


def toc_pages() -> list[str]:
    """Every page ``_toc.yml`` lists, as a page name (``book/views``)."""
    return [p.relative_to(ROOT).with_suffix("").as_posix() for p in toc_files(ROOT)]


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


# Quick checks (fences.quiz, rendered by jupyterquiz): each lesson of the new form has at
# least QUIZ_GOAL, and each is answered in Chromium as a reader would (a click, or text
# typed then Enter): a wrong answer and the right one must read differently, the right one
# graded right and the wrong one wrong. The right answer is the key the build computed
# (the container's data-keys), not what the widget thinks is right.
QUIZ_GOAL = 8

#: Every quiz container once jupyterquiz has run: its questions, rendered or not.
QUIZ_JS = """() => [...document.querySelectorAll('div.tf-quiz')].map(d => ({
  name: d.dataset.quiz, expected: parseInt(d.dataset.questions), keys: JSON.parse(d.dataset.keys || '[]'),
  rendered: d.querySelectorAll('.Quiz').length, pending: d.querySelectorAll('.tf-quiz-pending').length}))"""


def is_lesson(pagename: str, root: Path = ROOT) -> bool:
    """Whether a page is a lesson: ``fencecheck.chapter.is_lesson`` of its source (its
    front matter declares ``tensor-fences: {form: 3}``), the one definition."""
    from fencecheck import chapter

    source = root / f"{pagename}.md"
    return source.exists() and chapter.is_lesson(source.read_text(encoding="utf-8"))


def _feedback(wrapper) -> tuple[str, str]:
    fb = wrapper.locator(".Feedback").first
    if not fb.count():
        return "", ""
    return (fb.get_attribute("class") or "", fb.inner_text().strip())


def answer_question(page, container: int, index: int, key: str) -> list[str]:
    """Answer question ``index`` of quiz container ``container`` wrong, then right; a
    click or a key press that cannot happen (hidden, covered) is a problem, not a crash."""
    try:
        return _answer_question(page, container, index, key)
    except Exception as exc:  # noqa: BLE001 - Playwright's timeouts and errors alike
        name = page.locator("div.tf-quiz").nth(container).get_attribute("data-quiz", timeout=2000)
        return [f"quick check {name} #{index + 1}: could not answer it "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"]


def _answer_question(page, container: int, index: int, key: str) -> list[str]:
    box = page.locator("div.tf-quiz").nth(container)
    name = box.get_attribute("data-quiz")
    wrapper = box.locator(f'.Quiz[data-qnum="{index}"]').first
    where = f"quick check {name} #{index + 1}"
    if not wrapper.count():
        return [f"{where}: not rendered"]
    wrapper.evaluate("w => { for (let d = w.closest('details'); d; d = d.parentElement.closest('details'))"
                     " d.open = true; }")
    seen = []
    buttons = wrapper.locator("label.MCButton")
    if buttons.count():
        texts = [t.strip() for t in buttons.all_inner_texts()]
        if key not in texts:
            return [f"{where}: no choice reads the key {key!r} (choices: {texts})"]
        wrong = next(i for i, t in enumerate(texts) if t != key)
        for i in (wrong, texts.index(key)):
            buttons.nth(i).click()
            seen.append(_feedback(wrapper))
    else:
        field = wrapper.locator("input.Input-text").first
        if not field.count():
            return [f"{where}: neither choices nor a field to type in"]
        numeric = wrapper.locator(".NumericQn").count() > 0
        for text in ((key + "1") if numeric else ("not " + key), key):
            field.fill(text)
            field.press("Enter")
            seen.append(_feedback(wrapper))
    (wrong_class, wrong_text), (right_class, right_text) = seen
    problems = []
    if not right_text or (wrong_class, wrong_text) == (right_class, right_text):
        problems.append(f"{where}: a wrong and the right answer give the same feedback {right_text!r}")
    if "correct" not in right_class.split():
        problems.append(f"{where}: the right answer {key!r} is graded wrong ({right_text!r})")
    if "incorrect" not in wrong_class.split():
        problems.append(f"{where}: a wrong answer is graded right ({wrong_text!r})")
    return problems
