"""Quick checks: a question the reader answers on the page, graded in the browser.

``fences.quiz(name, question, answer, choices=None, explain="")`` renders one question
with jupyterquiz (HTML + JavaScript in the cell's output: the site runs it as the page
loads, a notebook when the cell runs), records its key as
``fences.observe(f"quiz.{name}", answer)`` and returns ``answer``:

- ``choices`` given: a multiple choice. Exactly one choice must equal ``answer``
  (``True`` and ``1`` are not the same choice); each is shown as its ``str`` when it
  is a string, else its ``repr`` (``torch.float32``, ``(1, 12, 4)``).
- no ``choices``: a typed value. A number (int or float, not bool) is a jupyterquiz
  ``numeric`` question; anything else (a dtype, a shape, a tuple, a bool, a word) a
  jupyterquiz ``string`` question (this version has one), graded on the text the
  reader types: the ``repr``, and for a shape or stride the usual spellings
  (``(2, 3)``, ``2, 3``, ``[2, 3]``, ``torch.Size([2, 3])``, with or without spaces);
  for a dtype also its name without ``torch.`` (``float32``).

``explain`` (text, or a mapping choice -> reason) is the feedback: the right answer
shows "Right. <explain>", a wrong one "Not <choice>. <its own reason, if the mapping
gives one> Try again." (the explanation would give the answer away), so a
wrong and a right answer always read differently.

``quiz_question`` builds one question without showing it, ``quiz_show`` shows several in
one output (one copy of the JavaScript: the stride drill's 60 questions a fold). Nothing
here imports jupyterquiz, IPython or torch until a question is shown.
"""
from __future__ import annotations

import hashlib
import html
import json
import numbers
import re

#: jupyterquiz's colours, changed where axe-core finds too little contrast (WCAG AA):
#: each question sits on a light panel of its own (``_STYLE``), so the input label is
#: dark whatever the page's mode; the typed text is light on a dark field; green dark
#: enough for white text.
COLORS = {
    "--jq-numeric-input-label": "#1b1b1b",
    "--jq-numeric-input-bg": "#1e1e2a",
    "--jq-correct-color": "#1a7f37",
    "--jq-incorrect-color": "#c80202",
}

#: Classes the page and the checks look for: the container of one or more questions,
#: and the text shown until the JavaScript has run (in an untrusted notebook: until the
#: reader runs the cell).
CONTAINER = "tf-quiz"
PENDING = "tf-quiz-pending"

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _same(a, b) -> bool:
    """``a == b`` as a key: a bool is not the number 1, a tensor is refused."""
    if hasattr(a, "dim") or hasattr(b, "dim"):
        raise TypeError("quiz: compare Python values, not tensors (use .tolist(), .item())")
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that do not compare are different
        return False


def shown(value) -> str:
    """How a value is written on the page: a string as itself, anything else its repr."""
    return value if isinstance(value, str) else repr(value)


def _inline(text: str) -> str:
    """Question or feedback text for jupyterquiz (which sets it as HTML and turns ``$``
    into maths): HTML escaped, ``code`` spans as <code>, no ``$`` left for MathJax."""
    parts = re.split(r"`([^`]+)`", text)
    out = []
    for i, part in enumerate(parts):
        esc = html.escape(part, quote=False).replace("$", "&#36;")
        out.append(f"<code>{esc}</code>" if i % 2 else esc)
    return "".join(out)


def _code(value) -> str:
    return f"<code>{html.escape(shown(value), quote=False).replace('$', '&#36;')}</code>"


def spellings(answer) -> list[str]:
    """The typed texts accepted for ``answer`` (a string question): its repr; a tuple of
    ints (a shape, a stride) as a tuple's repr, ``(2, 3)``, which the page also makes of
    what the reader types as ``2,3``, ``[2, 3]`` or ``torch.Size([2, 3])`` (``_AFTER``);
    a dtype also without ``torch.`` (``float32``)."""
    if isinstance(answer, tuple) and all(isinstance(v, int) and not isinstance(v, bool)
                                         for v in answer):
        return [repr(tuple(answer))]
    text = shown(answer)
    if text.startswith("torch.") and type(answer).__name__ == "dtype":
        return [text, text[len("torch."):]]
    return [text]


def quiz_question(question: str, answer, choices=None, explain="") -> dict:
    """One question in jupyterquiz's format (a dict), checked: with ``choices``, exactly
    one of them equals ``answer``. Its ``key`` (ignored by jupyterquiz) is the right
    answer as the reader would click or type it; ``quiz_show`` puts the keys on the
    container (``data-keys``), where ``make check-site`` reads them."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("quiz: the question is a non-empty string")
    reasons = dict(explain) if isinstance(explain, dict) else {}
    # A mapping's None entry is the text for a wrong answer it does not list (a typed one).
    general = reasons.pop(None, "") if isinstance(explain, dict) else str(explain or "")
    hint = general if isinstance(explain, dict) else ""   # for a wrong typed answer

    def feedback(value, right: bool) -> str:
        # The explanation is the answer's: shown once the reader has it right. A wrong
        # choice shows only its own reason, if the author gave one, and "try again".
        why = general if right or isinstance(explain, dict) else ""
        for key, reason in reasons.items():
            if _same(key, value):
                why = reason
        if right:
            return "Right. " + _inline(why) if why else "Right."
        return f"Not {_code(value)}. " + (_inline(why) + " " if why else "") + "Try again."

    text = _inline(question)
    if choices is not None:
        choices = list(choices)
        hits = [c for c in choices if _same(c, answer)]
        if len(hits) != 1:
            raise AssertionError(
                f"quiz: {len(hits)} of the choices {[shown(c) for c in choices]} equal the key "
                f"{shown(answer)} (exactly one must)")
        labels = [shown(c) for c in choices]
        if len(set(labels)) != len(labels):
            raise AssertionError(f"quiz: two choices read the same: {labels}")
        return {"question": text, "type": "multiple_choice", "key": shown(answer), "answers": [
            {"answer": _code(c), "correct": _same(c, answer), "feedback": feedback(c, _same(c, answer))}
            for c in choices]}
    if isinstance(answer, numbers.Real) and not isinstance(answer, bool) \
            and answer == answer and abs(answer) != float("inf"):
        entry = {"type": "value", "value": answer, "correct": True, "feedback": feedback(answer, True)}
        spec = {"question": text, "type": "numeric", "key": repr(answer),
                "answers": [entry, {"type": "default", "feedback": "Not that. " + (
                    _inline(hint) + " " if hint else "") + "Try again."}]}
        if isinstance(answer, float) and not float(answer).is_integer():
            spec["precision"] = 4
        return spec
    accepted = spellings(answer)
    return {"question": text, "type": "string", "key": accepted[0], "input_width": max(8, len(accepted[0]) + 2),
            "answers": [{"answer": a, "correct": True, "match_case": False,
                         "feedback": feedback(answer, True)} for a in accepted]
            + [{"type": "default", "feedback": "Not that. " + (
                _inline(hint) if hint else "Try again, written as Python prints it.")}]}


def _div_id(name: str) -> str:
    """A JavaScript identifier unique to ``name`` (jupyterquiz names a variable after it)."""
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return "tfq_" + re.sub(r"\W", "_", name) + "_" + digest


#: Run after jupyterquiz's script: label each typed-answer field (jupyterquiz's label is
#: not tied to its input: axe's "label" rule), then drop the text shown until now.
_AFTER = """
(function () {
  function fix() {
    var root = document.getElementById("%(id)s");
    if (!root || !root.querySelector('.Quiz')) { setTimeout(fix, 100); return; }
    root.querySelectorAll('input.Input-text').forEach(function (inp) {
      var lab = inp.parentElement.querySelector('label.InpLabel');
      var q = inp.closest('.Quiz').querySelector('[id^="quizQn"]');
      inp.setAttribute('aria-label', (lab ? lab.textContent + ' ' : '') + (q ? q.textContent : ''));
      if (lab && inp.id) { lab.htmlFor = inp.id; }
    });
    // A typed tuple is read as Python would print it: "2,3", "[2, 3]", "torch.Size([2, 3])"
    // become "(2, 3)" when Enter is pressed (before jupyterquiz's keypress grades it).
    root.querySelectorAll('.StringQn').forEach(function (qn) {
      var inp = qn.parentElement.querySelector('input.Input-text');
      if (!inp) { return; }
      inp.addEventListener('keydown', function (e) {
        if (e.key !== 'Enter' || !inp.value.trim()) { return; }
        var v = inp.value.trim().replace(/^torch\\.Size\\(\\s*(.*)\\)$/, '$1').trim();
        v = v.replace(/^[\\[(]\\s*(.*?)\\s*[\\])]$/, '$1');
        if (/^(-?\\d+\\s*(,\\s*-?\\d+\\s*)*,?)?$/.test(v)) {
          var n = v.match(/-?\\d+/g) || [];
          inp.value = '(' + n.join(', ') + (n.length === 1 ? ',' : '') + ')';
        }
      });
    });
    root.querySelectorAll('.%(pending)s').forEach(function (p) { p.remove(); });
    root.dataset.rendered = "1";
  }
  fix();
})();
"""

#: Scoped to the container: feedback readable in light and dark mode, hidden while empty;
#: a graded answer takes its colour at once (jupyterquiz fades it in, and text on the
#: colour half-way has too little contrast).
_STYLE = """<style>
#%(id)s .Quiz { background: #f3eff7; color: #1b1b1b; padding-bottom: 6px; }
#%(id)s .Answer { margin: 10px; }
#%(id)s .Feedback { background: #fafafa; border-radius: 6px; padding: 2px 6px; margin: 4px 0;
  font-size: 14pt; }
#%(id)s .Feedback:empty { display: none; }
#%(id)s .Feedback.correct { color: #1a7f37; }
#%(id)s .Feedback.incorrect { color: #b00000; }
#%(id)s .correctButton { animation: none; background-color: var(--jq-correct-color); }
#%(id)s .incorrectButton { animation: none; background-color: var(--jq-incorrect-color); }
#%(id)s .Feedback code, #%(id)s .MCButton code { background: inherit; color: inherit; }
</style>"""


def quiz_show(name: str, questions: list[dict], shuffle: bool = True) -> None:
    """Show ``questions`` (from ``quiz_question``) in one output, under ``name``: an HTML
    output (the container, its styles) and a JavaScript one (jupyterquiz's script)."""
    from IPython.display import HTML, Javascript, display

    markup, script = quiz_parts(name, questions, shuffle)
    display(HTML(markup))
    display(Javascript(script))


def quiz_parts(name: str, questions: list[dict], shuffle: bool = True) -> tuple[str, str]:
    """(HTML, JavaScript) of ``questions`` shown under ``name``, as ``quiz_show`` displays
    them (a page built without a kernel, the checker's planted pages, use them as they are)."""
    from jupyterquiz.dynamic.loader import load_questions_script
    from jupyterquiz.dynamic.renderer import build_script, build_styles, render_div

    div_id = _div_id(name)
    colors = {
        "--jq-multiple-choice-bg": "#392061", "--jq-mc-button-bg": "#fafafa",
        "--jq-mc-button-border": "#e0e0e0e0", "--jq-mc-button-inset-shadow": "#555555",
        "--jq-many-choice-bg": "#8a3400", "--jq-numeric-bg": "#392061",
        "--jq-numeric-input-shadow": "#999999", "--jq-string-bg": "#4c1a57",
        "--jq-text-color": "#fafafa", "--jq-link-color": "#9abafa", **COLORS}
    prefix, static, url = load_questions_script(questions, div_id)
    first = re.sub(r"<[^>]+>", "", questions[0]["question"]) if questions else ""
    more = f" (and {len(questions) - 1} more)" if len(questions) > 1 else ""
    pending = (f'<p class="{PENDING}">Quick check: {html.escape(html.unescape(first))}{more} '
               "The answers appear when the page runs JavaScript (in a notebook: run the cells to here)."
               "</p>")
    div = render_div(div_id, False, shuffle, False, 1_000_000, 600, 10, "left")
    div = div.replace("<div ", f'<div class="{CONTAINER}" data-quiz="{html.escape(name)}" '
                      f'data-questions="{len(questions)}" '
                      f'data-keys="{html.escape(json.dumps([q.get("key") for q in questions]))}" ', 1)
    return (div + pending + "</div>" + build_styles(div_id, colors) + _STYLE % {"id": div_id},
            build_script(prefix, static, url, div_id, True) + _AFTER % {"id": div_id, "pending": PENDING})


def quiz(name: str, question: str, answer, choices=None, explain=""):
    """Ask ``question`` on the page, graded against ``answer``; record the key; return it.

    ``answer`` is computed by torch from the question's code; the fence then asserts it
    equals an independent witness. With ``choices``, a multiple choice (exactly one
    choice equals ``answer``, or this raises AssertionError); without, a typed value
    (jupyterquiz "numeric" for a number, "string" otherwise). ``explain``: the feedback
    (text, or a mapping choice -> reason). The key is recorded as
    ``fences.observe(f"quiz.{name}", answer)`` (printed only under the test plugin)::

        key = fences.quiz("views-permute", "What is `y.stride()`?", y.stride(),
                          choices=[(1, 12, 4), (12, 4, 1), (4, 12, 1)],
                          explain="permute reorders the strides.")
        assert key == (1, 12, 4)
    """
    from . import observe

    if not _NAME.match(name):
        raise ValueError(f"quiz: name {name!r} must be letters, digits, '_', '.' or '-'")
    spec = quiz_question(question, answer, choices, explain)
    observe(f"quiz.{name}", answer, label=_label(name, question))
    quiz_show(name, [spec])
    return answer


def _label(name: str, question: str) -> str:
    """The record's words for a key: the question, plain, when it reads back unchanged."""
    from . import OBSERVE_MARKER, parse_observed

    plain = " ".join(question.replace("`", "").split())[:100]
    label = f"the answer to the quick check: {plain}"
    values, labels = parse_observed(f"{OBSERVE_MARKER} {label} (quiz.{name}) = x")
    return label if labels.get(f"quiz.{name}") == label and values.get(f"quiz.{name}") == "x" \
        else f"the answer to the quick check {name}"

