"""What the tools that open the built site share: the browser, a local server, the pages, and
answering a quick check. The site's checks themselves are tests/site/ (docs/site-checks.md)."""
from __future__ import annotations

import functools
import http.server
import os
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fencecheck import chapter  # noqa: E402

#: Debian's chromium by default; CHROMIUM=bundled uses the browser `playwright install` downloads.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "_build" / "screenshots"
#: Each lesson of the new form has at least this many quick checks (fences.quiz).
QUIZ_GOAL = 8
#: Every quiz container once jupyterquiz has run: its questions, rendered or not, and the keys
#: the build computed (the right answer is that, not what the widget thinks is right).
QUIZ_JS = """() => [...document.querySelectorAll('div.tf-quiz')].map(d => ({
  name: d.dataset.quiz, expected: parseInt(d.dataset.questions), keys: JSON.parse(d.dataset.keys || '[]'),
  rendered: d.querySelectorAll('.Quiz').length, pending: d.querySelectorAll('.tf-quiz-pending').length}))"""


def launch(pw):
    return pw.chromium.launch(executable_path=None if CHROMIUM == "bundled" else CHROMIUM, args=FLAGS)


def report(label: str, problems: list[str]) -> bool:
    """Print one "ok"/"FAIL" line for a check, then its problems; True when it failed."""
    print(f"{'ok  ' if not problems else 'FAIL'} {label}", flush=True)
    for p in problems:
        print(f"     - {p}")
    return bool(problems)


def toc_pages() -> list[str]:
    """Every page ``_toc.yml`` lists, as a page name (``book/views``)."""
    return [p.relative_to(ROOT).with_suffix("").as_posix() for p in chapter.toc_files(ROOT)]


def is_lesson(pagename: str, root: Path = ROOT) -> bool:
    """Whether a page's source is a lesson (``fencecheck.chapter.is_lesson``)."""
    source = root / f"{pagename}.md"
    return source.exists() and chapter.is_lesson(source.read_text(encoding="utf-8"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``folder`` on 127.0.0.1 in a thread; the server and its URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def answer_question(page, container: int, index: int, key: str) -> list[str]:
    """Answer question ``index`` of quiz container ``container`` wrong (a click, or text typed
    then Enter), then right (``key``): the two must be graded apart, wrong and right. A click
    or key press that cannot happen (hidden, covered) is a problem, not a crash."""
    box = page.locator("div.tf-quiz").nth(container)
    try:
        where = f"quick check {box.get_attribute('data-quiz')} #{index + 1}"
        wrapper = box.locator(f'.Quiz[data-qnum="{index}"]').first
        if not wrapper.count():
            return [f"{where}: not rendered"]
        wrapper.evaluate("w => { for (let d = w.closest('details'); d; d = d.parentElement.closest('details'))"
                         " d.open = true; }")
        buttons = wrapper.locator("label.MCButton")
        field = wrapper.locator("input.Input-text").first
        seen = []
        if buttons.count():
            texts = [t.strip() for t in buttons.all_inner_texts()]
            if key not in texts:
                return [f"{where}: no choice reads the key {key!r} (choices: {texts})"]
            for i in (next(i for i, t in enumerate(texts) if t != key), texts.index(key)):
                buttons.nth(i).click()
                seen.append(_feedback(wrapper))
        elif field.count():
            numeric = wrapper.locator(".NumericQn").count() > 0
            for text in ((key + "1") if numeric else ("not " + key), key):
                field.fill(text)
                field.press("Enter")
                seen.append(_feedback(wrapper))
        else:
            return [f"{where}: neither choices nor a field to type in"]
    except Exception as exc:  # Playwright's timeouts and errors alike
        name = box.get_attribute("data-quiz", timeout=2000)
        return [f"quick check {name} #{index + 1}: could not answer it "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"]
    (wrong_class, wrong_text), (right_class, right_text) = seen
    problems = []
    if not right_text or (wrong_class, wrong_text) == (right_class, right_text):
        problems.append(f"{where}: a wrong and the right answer give the same feedback {right_text!r}")
    if "correct" not in right_class.split():
        problems.append(f"{where}: the right answer {key!r} is graded wrong ({right_text!r})")
    if "incorrect" not in wrong_class.split():
        problems.append(f"{where}: a wrong answer is graded right ({wrong_text!r})")
    return problems


def _feedback(wrapper) -> tuple[str, str]:
    """The feedback's class and text under a question, empty when it shows none."""
    fb = wrapper.locator(".Feedback").first
    return (fb.get_attribute("class") or "", fb.inner_text().strip()) if fb.count() else ("", "")
