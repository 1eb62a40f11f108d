"""The site's checks, as functions the tests in this folder call (docs/site-checks.md):
each returns the problems it finds, in a reader's words (none: the page is fine), and
each is shown to fail on pages planted with its defect (test_planted.py)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from fencecheck import chapter  # noqa: E402
from fencecheck.lint import MAX_VISIBLE_LINES  # noqa: E402 - the 15-line limit's one home

SHOTS = ROOT / "_build" / "screenshots"
#: Each lesson of the new form has at least this many quick checks (fences.quiz).
QUIZ_GOAL = 8
#: Every quiz container once jupyterquiz has run: its questions, rendered or not, and the keys
#: the build computed (the right answer is that, not what the widget thinks is right).
QUIZ_JS = """() => [...document.querySelectorAll('div.tf-quiz')].map(d => ({
  name: d.dataset.quiz, expected: parseInt(d.dataset.questions), keys: JSON.parse(d.dataset.keys || '[]'),
  rendered: d.querySelectorAll('.Quiz').length, pending: d.querySelectorAll('.tf-quiz-pending').length}))"""


def short(name: str) -> str:
    """A page's name without its folder, as the tests' ids show it (``views``)."""
    return name.removeprefix("book/")


def is_lesson(pagename: str, root: Path = ROOT) -> bool:
    """Whether a page's source is a lesson (``fencecheck.chapter.is_lesson``)."""
    source = root / f"{pagename}.md"
    return source.exists() and chapter.is_lesson(source.read_text(encoding="utf-8"))


VIEWS = [("desktop", 1400, "light"), ("desktop", 1400, "dark"),
         ("phone", 390, "light"), ("phone", 390, "dark")]
#: A search for the topic must list the chapter first.
SEARCHES = {"stride": "views", "promotion": "promotion", "bfloat16": "dtypes",
            "accelerator": "devices", "from_numpy": "creation", "questions elsewhere": "elsewhere"}

# Measured in the page: facts a reader would see, as one JSON object.
LAYOUT_JS = r"""() => {
  const pres = [...document.querySelectorAll('div.cell_input pre')];
  const wrapping = pres.filter(p => !['pre', 'nowrap'].includes(getComputedStyle(p).whiteSpace));
  const glued = [...document.querySelectorAll('span.pasted-text, span.pasted-inline')];
  return {
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    wrapping: wrapping.length,
    bold: glued.filter(g => parseInt(getComputedStyle(g).fontWeight) >= 600).length,
    executed: document.querySelectorAll('p.tf-executed').length,
    clipped: [...document.querySelectorAll('.tf-scroll')].filter(d =>
        d.offsetParent !== null && !d.closest('details:not([open])') &&
        d.scrollWidth > d.clientWidth + 1).length,
    dumps: [...document.querySelectorAll('table.tf-changes td[data-label^="old"]')].filter(td =>
        /\{'|\['|\('|': /.test(td.innerText)).length,
    cells: document.querySelectorAll('div.cell').length,
  };
}"""


# The reader's measures of a lesson page (issue: the lesson on top, the proof one click
# away): how far to the end of the exercises, and what is shown without a click.
GOALS = {"screens": 20, "visible_cell": MAX_VISIBLE_LINES, "long_outputs": 0, "observed": 0}
SCREEN = (1400, 900)
MEASURE_JS = """() => {
  const shown = el => el.offsetParent !== null && !el.closest('details:not([open])');
  // A table's lines are its body rows (a wrapped cell is still one row); text, its lines.
  const lines = el => el.querySelector('table') ? el.querySelectorAll('tbody tr').length
                      : el.innerText.replace(/\\n$/, '').split('\\n').length;
  const cells = [...document.querySelectorAll('div.cell_input pre')].filter(shown);
  const outs = [...document.querySelectorAll('div.cell_output')].filter(shown);
  const ex = document.querySelector('section#exercises');
  const end = ex || document.querySelector('article') || document.body;
  const bottom = end.getBoundingClientRect().bottom + window.scrollY;
  const text = [...document.querySelectorAll('div.cell_output')].map(o => o.innerText).join('\\n');
  return {
    screens: Math.round(bottom / window.innerHeight * 10) / 10,
    to: ex ? 'the end of the exercises' : 'the end of the page',
    visible_cell: Math.max(0, ...cells.map(lines)),
    long_outputs: outs.filter(o => lines(o) > MAX_VISIBLE_LINES).length,
    observed: (text.match(/\\[observed\\]/g) || []).length,
  };
}""".replace("MAX_VISIBLE_LINES", str(MAX_VISIBLE_LINES))


# The lesson form's measures (standard 3), for a lesson that declares it
# (``tensor-fences: {form: 3}``): what a reader sees happen, and how long it takes.
#: Reading time: prose words at READ_WPM a minute plus each visible code line at
#: CODE_LINE_S seconds, over the teaching part (from the top to the exercises).
from fencecheck.lint import CODE_LINE_S, READ_WPM, reading_minutes  # noqa: E402 - one home

FORM3_GOALS = {"showing": 0.9, "minutes": 30, "teaching_screens": 12}
FORM3_JS = """() => {
  const article = document.querySelector('article') || document.querySelector('main');
  const ex = document.querySelector('section#exercises');
  const top = el => el.getBoundingClientRect().top + window.scrollY;
  const end = ex ? top(ex) : Infinity;
  const before = el => top(el) < end;
  const fences = [...document.querySelectorAll('div.cell.tag_fence:not(.tag_proof)')].filter(before);
  const out = c => [...c.querySelectorAll('div.cell_output')].map(o => o.innerText.trim()).join('\\n');
  const showing = fences.filter(c => out(c).length > 0 ||
                                     c.querySelector('div.cell_output .Quiz, div.cell_output [id^=Quiz]'));
  // a raise in the teaching part shows its message; the check part is quiet by design
  const raising = fences.filter(c => /fences\\.(raises|warns)\\(/.test(
      [...c.querySelectorAll('div.cell_input pre')].map(p => p.innerText).join('\\n')));
  const silent = raising.filter(c => !/\\b\\w*(Error|Warning|Exception)\\b[^\\n]*:/.test(out(c)))
                        .map(c => (c.id || '').replace('fence-', '') || '?');
  const copy = article.cloneNode(true);
  copy.querySelectorAll('div.cell, details, section#exercises, .tf-page-record, script, style')
      .forEach(n => n.remove());
  // the copy is not laid out: drop what follows the exercises by document order instead
  const words = (ex ? (() => { const r = document.createRange();
      r.setStartBefore(article.firstChild); r.setEndBefore(ex);
      const f = r.cloneContents();
      f.querySelectorAll('div.cell, details, .tf-page-record, script, style').forEach(n => n.remove());
      return f.textContent; })() : copy.textContent).split(/\\s+/).filter(w => /\\w/.test(w)).length;
  const shown = el => el.offsetParent !== null && !el.closest('details:not([open])');
  const code = [...document.querySelectorAll('div.cell_input pre')].filter(shown).filter(before)
      .reduce((n, p) => n + p.innerText.replace(/\\n$/, '').split('\\n').length, 0);
  return {fences: fences.length, showing: showing.length, silent, words, code_lines: code,
          teaching_screens: Math.round((ex ? top(ex) : top(article) + article.offsetHeight)
                                       / window.innerHeight * 10) / 10};
}"""


def form3_facts(facts: dict) -> dict:
    """The lesson form's figures from the page's raw counts: the share of lesson fences
    that show an output and the estimated reading time in minutes."""
    share = facts["showing"] / facts["fences"] if facts["fences"] else 1.0
    minutes = reading_minutes(facts["words"], facts["code_lines"])
    return {**facts, "share": round(share, 3), "minutes": round(minutes, 1)}


def form3_problems(facts: dict) -> list[str]:
    """Each lesson-form measure past its goal, in a reader's words."""
    f = form3_facts(facts)
    problems = []
    if f["share"] < FORM3_GOALS["showing"]:
        problems.append(f"{f['showing']} of {f['fences']} lesson fences show an output: "
                        f"{f['share']:.0%}, under the goal of {FORM3_GOALS['showing']:.0%}")
    if f["silent"]:
        problems.append(f"raise/warn fence(s) that show no message: {', '.join(f['silent'])}")
    if f["minutes"] > FORM3_GOALS["minutes"]:
        problems.append(f"about {f['minutes']} minutes to read ({f['words']} prose words at "
                        f"{READ_WPM} a minute, {f['code_lines']} code lines at {CODE_LINE_S} s), "
                        f"over the goal of {FORM3_GOALS['minutes']}")
    if f["teaching_screens"] > FORM3_GOALS["teaching_screens"]:
        problems.append(f"{f['teaching_screens']} screens at 1400×900 to the exercises, over the "
                        f"goal of {FORM3_GOALS['teaching_screens']}")
    return problems


def measure_form3(browser, url: str, pagename: str) -> dict:
    return form3_facts(measure(browser, url, pagename, FORM3_JS))


def measure_problems(facts: dict) -> list[str]:
    """Each measure above its goal, in a reader's words."""
    words = {"screens": f"{facts['screens']} screens at 1400×900 to {facts.get('to')}",
             "visible_cell": f"a code cell shows {facts['visible_cell']} lines without a click",
             "long_outputs": f"{facts['long_outputs']} visible output(s) over {MAX_VISIBLE_LINES} lines",
             "observed": f"{facts['observed']} [observed] line(s) in the page's outputs"}
    return [f"{words[k]} (goal: at most {goal})" for k, goal in GOALS.items() if facts[k] > goal]


def measure(browser, url: str, pagename: str, script: str = MEASURE_JS) -> dict:
    """What ``script`` measures on the page at 1400×900, light mode."""
    page = browser.new_page(viewport={"width": SCREEN[0], "height": SCREEN[1]},
                            color_scheme="light")
    page.goto(f"{url}/{pagename}.html", wait_until="load")
    page.wait_for_timeout(300)
    facts = page.evaluate(script)
    page.close()
    return facts


def check_page(page, url: str, pagename: str, view: str = "", scheme: str = "") -> list[str]:
    """Problems found on one page (empty when it is fine)."""
    problems: list[str] = []
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: console.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: console.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(f"{url}/{pagename}.html", wait_until="load")
    page.wait_for_timeout(300)

    h1 = page.locator("main h1").first.inner_text().strip().rstrip("#").strip()
    h1 = re.sub(r"^\d+(\.\d+)*\.?\s+", "", h1)
    title = re.sub(r"^\d+(\.\d+)*\.?\s+", "", page.title())  # a numbered chapter: "1. Title"
    if not h1 or not title.startswith(h1) or "Tensor Fences" not in title:
        problems.append(f"title {title!r} does not name the page {h1!r}")
    for selector, what in [("div.output.traceback", "traceback output"),
                           ("div.output.error", "error output"),
                           ("div.output.stderr", "stderr output")]:
        n = page.locator(selector).count()
        if n:
            problems.append(f"{n} {what} block(s): {page.locator(selector).first.inner_text()[:200]!r}")
    body = page.locator("main").inner_text()
    if "Traceback (most recent call last)" in body:
        problems.append("a Python traceback is printed in the page")
    if "{glue" in body:
        problems.append("an unrendered {glue} role is in the page")
    glued = page.locator("span.pasted-text, span.pasted-inline")
    empty = [i for i in range(glued.count()) if not glued.nth(i).inner_text().strip()]
    if empty:
        problems.append(f"{len(empty)} glued value(s) rendered empty")
    if page.locator('a[href$=".ipynb"]').count() == 0:
        problems.append("no .ipynb download link")
    fences = page.locator("div.cell.tag_fence").count()
    if fences and not page.locator("p.tf-page-record").count():
        problems.append(f"{fences} fences and no line saying what the record holds for them")
    quiet = page.locator("a.tf-badge-holds").count()
    if quiet:
        problems.append(f"{quiet} badge(s) that carry no news ('holds on ...')")
    theme = page.evaluate("document.documentElement.dataset.theme")
    if scheme and theme != scheme:
        problems.append(f"asked for {scheme} mode, the page is in {theme!r} mode")
    problems += layout_problems(page.evaluate(LAYOUT_JS))
    problems += accessibility_problems(page)
    problems += [f"console: {c}" for c in console]
    SHOTS.mkdir(parents=True, exist_ok=True)
    if not pagename.startswith(("good", "bad")):
        name = pagename.replace("/", "_") + (f"-{view}" if view else "")
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)
    return problems


def layout_problems(facts: dict) -> list[str]:
    """What the page's measured layout gets wrong for a reader."""
    problems = []
    if facts["overflow"] > 1:
        problems.append(f"the page scrolls sideways by {facts['overflow']} px")
    if facts["wrapping"]:
        problems.append(f"{facts['wrapping']} input code block(s) wrap lines "
                        "(a wrapped line reads as another statement)")
    if facts["bold"]:
        problems.append(f"{facts['bold']} glued value(s) rendered bold")
    if facts.get("clipped"):
        problems.append(f"{facts['clipped']} table(s) clipped on the right (they scroll "
                        "inside their box)")
    if facts.get("dumps"):
        problems.append(f"{facts['dumps']} cell(s) of What changed show a raw dict, list or "
                        "tuple instead of words")
    if facts["cells"] and not facts["executed"]:
        problems.append("no 'Executed with torch ...' line on an executed page")
    return problems


def accessibility_problems(page) -> list[str]:
    """Serious and critical axe-core violations (WCAG 2 A and AA), one line per rule."""
    from axe_playwright_python.sync_playwright import Axe

    # Media preloaded, not the CSSOM: it feeds only a rule outside WCAG 2 A/AA (css-orientation-
    # lock), and the bundled axe 4.12 fetches an @import'ed stylesheet from the wrong folder.
    found = Axe().run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa"]},
                                     "preload": {"assets": ["media"]}})
    result = [v for v in found.response["violations"] if v["impact"] in ("serious", "critical")]
    return [f"accessibility ({v['impact']}) {v['id']}: {len(v['nodes'])} element(s), e.g. "
            f"{[' '.join(n['target']) for n in v['nodes'][:2]]}: "
            f"{(v['nodes'][0].get('failureSummary') or '').splitlines()[-1][:160]}" for v in result]


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


#: The stride drill: at least DRILL_CHAINS chains of three questions (shape, stride,
#: contiguous), every widget rendered, DRILL_SAMPLE chains answered.
DRILL = "book/stride-drill"
DRILL_CHAINS, DRILL_PER_CHAIN, DRILL_SAMPLE = 200, 3, 20


def quiz_check(browser, url: str, pagename: str, drill: bool = False) -> tuple[dict, list[str]]:
    """Count a page's quick checks (or drill chains) and answer them in Chromium: every
    question of a lesson; for the drill, every widget present and DRILL_SAMPLE chains
    answered. Returns (facts, problems)."""
    page = browser.new_page(viewport={"width": SCREEN[0], "height": SCREEN[1]}, color_scheme="light")
    page.set_default_timeout(10000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(f"{url}/{pagename}.html", wait_until="load")
    try:
        page.wait_for_function("() => [...document.querySelectorAll('div.tf-quiz')]"
                               ".every(d => d.dataset.rendered === '1')", timeout=10000)
    except Exception:  # noqa: BLE001 - reported below, container by container
        pass
    boxes = page.evaluate(QUIZ_JS)
    expected = sum(b["expected"] for b in boxes)
    rendered = sum(b["rendered"] for b in boxes)
    problems = [f"quick check {b['name']}: {b['rendered']} of its {b['expected']} question(s) rendered"
                + (" (its text before JavaScript is still shown)" if b["pending"] else "")
                for b in boxes if b["rendered"] != b["expected"] or b["pending"]]
    problems += [f"quick check {b['name']}: {len(b['keys'])} keys for {b['expected']} questions"
                 for b in boxes if len(b["keys"]) != b["expected"]]
    questions = [(c, i, k) for c, b in enumerate(boxes) for i, k in enumerate(b["keys"])]
    facts = {"questions": expected, "rendered": rendered, "answered": 0}
    if drill:
        chains = expected // DRILL_PER_CHAIN
        facts["chains"] = chains
        if chains < DRILL_CHAINS:
            problems.append(f"{chains} chains on the drill (goal: at least {DRILL_CHAINS})")
        step = max(1, chains // DRILL_SAMPLE)
        picked = set(range(0, chains, step)[:max(DRILL_SAMPLE, 1)])
        questions = [q for n, q in enumerate(questions) if n // DRILL_PER_CHAIN in picked]
        facts["sampled"] = len(picked & set(range(chains)))
    elif expected < QUIZ_GOAL:
        problems.append(f"{expected} quick checks (goal: at least {QUIZ_GOAL})")
    for c, i, key in questions:
        problems += answer_question(page, c, i, key)
        facts["answered"] += 1
    if questions:
        problems += [f"after answering: {p}" for p in accessibility_problems(page)]
    problems += [f"console: {e}" for e in errors]
    page.close()
    return facts, problems


def quiz_line(name: str, facts: dict) -> str:
    if "chains" in facts:
        return (f"     drill {name}: {facts['chains']} chains ({facts['rendered']} of {facts['questions']} "
                f"questions rendered), {facts['sampled']} chains answered in Chromium")
    return (f"     quick checks {name}: {facts['questions']} ({facts['rendered']} rendered, "
            f"{facts['answered']} answered wrong then right in Chromium)")


def quiz_page(title: str, boxes: list[tuple[str, list[dict]]]) -> str:
    """A page holding quiz containers as the site shows them (fences.quiz_parts)."""
    import fences

    body = ""
    for name, questions in boxes:
        markup, script = fences.quiz_parts(name, questions)
        body += f'<div class="cell_output">{markup}<script type="application/javascript">{script}</script></div>\n'
    return HEAD.format(title=title) + f"<body><main><h1>{title}</h1>{body}</main></body></html>"


def planted_quizzes() -> dict[str, tuple[str, list[str]]]:
    """Pages for the quiz measures' self-test: name -> (HTML, what it must be failed for;
    none for a page that must pass)."""
    import fences

    ask = fences.quiz_question
    good = [ask(f"Q{n}: what is `x.stride()`?", (n, 1), choices=[(n, 1), (1, n)], explain="rows")
            for n in range(2, 6)]
    good += [ask("What is `x.shape`?", (2, 3)), ask("What dtype?", "float32"),
             ask("How many?", 12, explain="3 * 4"), ask("Contiguous?", True, choices=[True, False])]
    swapped = ask("Swapped key?", 1, choices=[1, 2])            # the widget grades 2 as right
    for a in swapped["answers"]:
        a["correct"] = not a["correct"]
    same = ask("Same feedback?", 1, choices=[1, 2])             # every answer reads "Not that."
    for a in same["answers"]:
        a.update(correct=False, feedback="Not that.")
    typed = ask("Typed, key missing?", (4, 1))
    typed["answers"] = [a for a in typed["answers"] if a.get("type") == "default"] + [
        {"answer": "(1, 4)", "correct": True, "feedback": "Right."}]
    unread = ask("No choice reads the key?", 1, choices=[1, 2])
    unread["key"] = "3"
    broken = ask("Never rendered?", 1, choices=[1, 2])
    bad_page = quiz_page("Bad quiz", [("bad-swapped", [swapped]), ("bad-same", [same]),
                                      ("bad-typed", [typed]), ("bad-unread", [unread])])
    bad_page = bad_page.replace("</main>", quiz_page("x", [("bad-broken", [broken])])
                                .split("<h1>x</h1>")[1].split("</main>")[0]
                                .replace("show_questions(questions", "show_questions(nothing") + "</main>")
    chain = [ask("Chain: shape?", (2, 3)), ask("Chain: stride?", (3, 1)),
             ask("Chain: contiguous?", True, choices=[True, False])]
    return {
        "quiz-good": (quiz_page("Good quiz", [(f"good-{n}", [q]) for n, q in enumerate(good)]), []),
        "quiz-bad": (bad_page, ["5 quick checks (goal", "bad-swapped #1: the right answer",
                                "bad-swapped #1: a wrong answer is graded right",
                                "bad-same #1: a wrong and the right answer give the same",
                                "bad-typed #1: the right answer", "bad-unread #1: no choice reads",
                                "bad-broken: 0 of its 1 question(s) rendered"]),
        "drill-good": (quiz_page("Good drill", [(f"drill-{k}", chain * 20) for k in range(10)]), []),
        "drill-bad": (quiz_page("Bad drill", [("drill-short", chain * 199)]), ["199 chains on the drill"]),
    }



def search_results(page, url: str, query: str) -> list[str] | None:
    """The links the site's own search lists for ``query``, in order; None when it lists
    nothing within 15 s."""
    from urllib.parse import quote

    page.goto(f"{url}/search.html?q={quote(query)}", wait_until="load")
    try:
        page.wait_for_selector("#search-results ul li a, ul.search li a", timeout=15000)
    except Exception:  # noqa: BLE001 - any timeout is the failure we report
        return None
    links = page.locator("#search-results ul li a, ul.search li a")
    return [links.nth(i).get_attribute("href") or "" for i in range(links.count())]


def check_search(page, url: str, query: str, chapter: str) -> list[str]:
    """A search for a chapter's topic lists that chapter first."""
    hrefs = search_results(page, url, query)
    if hrefs is None:
        return [f"search for {query!r} returned no results"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"search-{query}.png"))
    if not hrefs or f"{chapter}.html" not in hrefs[0]:
        return [f"search for {query!r} does not list the {chapter} chapter first (got {hrefs[:4]})"]
    return []


ERRORS = "book/errors"
#: How far down the site search's results the explaining page may be.
ERROR_RANK = 3


def error_messages(page, url: str) -> list[tuple[str, str]]:
    """(message as printed, the page that explains it) for each entry of the errors page."""
    page.goto(f"{url}/{ERRORS}.html", wait_until="load")
    return page.evaluate("""() => [...document.querySelectorAll('div.tf-error')].map(d => [
        d.querySelector('p.tf-error-message').innerText.trim(),
        (d.querySelector('a[href*="#fence-"]') || {}).getAttribute('href') || ''])""")


#: The share of the errors page's messages whose explanation the site search must list in
#: its first ERROR_RANK results: every one. Each message is an index entry of the errors
#: page (a query inside an entry ranks first), and the index and the query stem every
#: word alike (fencecheck.search), so the full-text search finds a message too.
ERROR_GOAL = 1.0


def explaining_pages(found: list[tuple[str, str]]) -> dict[str, set[str]]:
    """Each message on the errors page -> every page that proves it (a message can be
    explained in a lesson and on a reference page), and the errors page itself."""
    pages: dict[str, set[str]] = {}
    for message, href in found:
        pages.setdefault(message, {"errors.html"}).add(href.split("#")[0].split("/")[-1])
    return pages


def check_error_search(page, url: str, message: str, explained) -> list[str]:
    """The full message pasted into the site's search lists a page that explains it (or
    the errors page) among the first ``ERROR_RANK`` results."""
    targets = {explained} if isinstance(explained, str) else set(explained)
    targets = {t.split("#")[0].split("/")[-1] or "errors.html" for t in targets} | {"errors.html"}
    hrefs = search_results(page, url, message)
    if hrefs is None:
        return [f"search for the message {message[:90]!r} found nothing"]
    pages = [h.split("?")[0].split("#")[0].split("/")[-1] for h in hrefs[:ERROR_RANK]]
    if not targets & set(pages):
        return [f"search for the message {message[:90]!r} lists {pages}, none of "
                f"{sorted(targets)}, in its first {ERROR_RANK}"]
    return []


VERIFIED = "book/verified"


def check_badge_link(browser, url: str, chapters: list[str]) -> list[str]:
    """A fence badge's link opens the collapsed grid of the Verified-on page at the fence's row."""
    problems: list[str] = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 390, "height": 844})
    for name in chapters:
        page.goto(f"{url}/{name}.html", wait_until="load")
        badge = page.locator("a.tf-badge").first
        if not badge.count():
            continue
        href = badge.get_attribute("href") or ""
        ident = href.partition("#")[2]
        badge.click()
        page.wait_for_load_state("load")
        page.wait_for_timeout(300)
        row = page.locator(f'[id="{ident}"]')
        if not row.count() or not row.first.is_visible():
            problems.append(f"the badge of {ident} ({name}) does not open its row on the Verified-on page")
        page.screenshot(path=str(SHOTS / "verified-from-badge.png"))
        break
    page.close()
    return problems


HEAD = ('<html lang="en"><head><meta name="viewport" content="width=device-width">'
        '<title>{title} &#8212; Tensor Fences</title><link rel="icon" href="data:,"></head>')
GOOD = HEAD.format(title="Good page") + """<body><main>
<h1>Good page</h1><p class="tf-executed">Executed with torch</p>
<p>value <span class="pasted-text">42</span></p>
<div class="cell"><div class="cell_input"><pre tabindex="0">x = 1</pre></div></div>
<a href="good.ipynb">.ipynb</a></main></body></html>"""
BAD = HEAD.format(title="Bad page") + """<body><main>
<h1>Bad page</h1><p>value <span class="pasted-text"></span>
<span class="pasted-text" style="font-weight:700">7</span></p>
<div class="cell"><div class="cell_input"><pre style="white-space:pre-wrap">x = 1</pre></div></div>
<div style="width:3000px">wide</div>
<div class="cell tag_fence"><p class="tf-badge-line"><a class="tf-badge tf-badge-holds"
href="#">holds on 2.8.0</a></p><div class="cell_input"><pre>assert 1 == 2</pre></div></div>
<p style="color:#bbb;background:#fff">faint text</p>
<div class="tf-scroll" style="overflow-x:auto;max-width:200px"><table class="tf-changes"><tr>
<td data-label="old → new"
style="white-space:nowrap">{'float16': 1.0, 'bfloat16': 1.0} and more words in a row</td></tr></table></div>
<div class="output traceback"><pre>Traceback (most recent call last): AssertionError</pre></div>
<script>console.error("boom")</script></main></body></html>"""
#: Each defect planted in BAD, and the words the checker must fail it with.
PLANTED = ["traceback output", "Traceback (most recent", "rendered empty", "no .ipynb download",
           "console: boom", "rendered bold", "wrap lines", "scrolls sideways",
           "no 'Executed with torch", "color-contrast", "1 fences and no line saying",
           "badge(s) that carry no news", "clipped on the right", "show a raw dict"]
#: A lesson planted with each measure over its goal, and one within every goal.
LONG = "\n".join(f"x{n} = {n}" for n in range(MAX_VISIBLE_LINES + 5))
BAD_LESSON = HEAD.format(title="Long lesson") + f"""<body><main><article>
<h1>Long lesson</h1><div style="height:{26 * SCREEN[1]}px">prose</div>
<div class="cell"><div class="cell_input"><pre>{LONG}</pre></div>
<div class="cell_output"><pre>{LONG}</pre></div></div>
<details><summary>Proof</summary><div class="cell_input"><pre>{LONG}{LONG}</pre></div></details>
<div class="cell_output"><pre>[observed] x = 1</pre></div><section id="exercises"><h2>Exercises</h2></section>
</article></main></body></html>"""
GOOD_LESSON = HEAD.format(title="Short lesson") + f"""<body><main><article>
<h1>Short lesson</h1><div class="cell"><div class="cell_input"><pre>x = 1</pre></div></div>
<details><summary>Proof</summary><div class="cell_input"><pre>{LONG}</pre></div></details>
<section id="exercises"><h2>Exercises</h2></section>
<div style="height:{40 * SCREEN[1]}px">the reference, after the exercises</div>
</article></main></body></html>"""
#: What the long lesson must be failed for: each measure over its goal, whatever the
#: exact figure a machine's fonts give.
MEASURED = ["screens at 1400×900 to the end of the exercises", f"shows {MAX_VISIBLE_LINES + 5} lines",
            "1 visible output(s)", "1 [observed] line"]
#: A form-3 lesson: two fences, one silent, one raise claim without its message, too
#: long to read and to scroll; and one within every goal.
PROSE = " ".join(["word"] * 7000)
BAD_FORM3 = HEAD.format(title="Form 3 lesson") + f"""<body><main><article>
<h1>Form 3 lesson</h1><p>{PROSE}</p><div style="height:{14 * SCREEN[1]}px"></div>
<div class="cell tag_fence" id="fence-silent"><div class="cell_input"><pre>x = 1</pre></div></div>
<div class="cell tag_fence" id="fence-mute"><div class="cell_input"><pre>with fences.raises(E, "m"):
    f()</pre></div><div class="cell_output"><pre>done</pre></div></div>
<section id="exercises"><h2>Exercises</h2></section></article></main></body></html>"""
GOOD_FORM3 = HEAD.format(title="Form 3 lesson") + """<body><main><article>
<h1>Form 3 lesson</h1><p>A few words.</p>
<div class="cell tag_fence" id="fence-loud"><div class="cell_input"><pre>with fences.raises(E, "m"):
    f()</pre></div><div class="cell_output"><pre>RuntimeError: m here</pre></div></div>
<div class="cell tf-checks"><details><summary>✓ 1 check</summary><pre>assert x</pre></details></div>
<section id="exercises"><h2>Exercises</h2></section>
<div style="height:30000px">after the exercises</div></article></main></body></html>"""
MEASURED_FORM3 = ["1 of 2 lesson fences show an output", "show no message: mute",
                  "minutes to read", "screens at 1400×900 to the exercises"]


#: Other font sets than this machine's (test_planted.py): the measures'
#: self-test must give the same verdicts under each, as on a machine with other fonts.
FONT_SETS = {
    "serif, large": "* { font-family: 'DejaVu Serif', 'Noto Serif CJK JP', serif !important;"
                    " font-size: 22px !important; line-height: 1.9 !important }",
    "narrow, small": "* { font-family: 'Liberation Sans Narrow', 'Noto Sans CJK JP', sans-serif"
                     " !important; font-size: 11px !important; line-height: 1.1 !important }",
}

#: The planted lessons the reader's measures are tried on, under each font set.
MEASURE_PAGES = {"lesson-good": GOOD_LESSON, "lesson-bad": BAD_LESSON,
                 "form3-good": GOOD_FORM3, "form3-bad": BAD_FORM3}


def planted_name(name: str, fonts: str = "") -> str:
    """The planted page ``name`` with font set ``fonts`` forced on it (none: this machine's)."""
    return name + "-" + re.sub(r"\W+", "-", fonts) if fonts else name
