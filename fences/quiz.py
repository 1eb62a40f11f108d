"""Quick checks (``fences.quiz``): a question the reader answers on the page, rendered with
jupyterquiz and graded in the browser; its key is checked and recorded. See docs/quiz.md.
Nothing here imports jupyterquiz, IPython or torch until a question is shown."""
from __future__ import annotations

import hashlib
import html
import json
import numbers
import re

#: jupyterquiz's colours, changed where axe-core finds too little contrast (WCAG AA): the
#: input label dark on each question's light panel (``_STYLE``), the typed text light on a
#: dark field, green dark enough for white text.
COLORS = {
    "--jq-multiple-choice-bg": "#392061", "--jq-mc-button-bg": "#fafafa", "--jq-mc-button-border": "#e0e0e0e0",
    "--jq-mc-button-inset-shadow": "#555555", "--jq-many-choice-bg": "#8a3400", "--jq-numeric-bg": "#392061",
    "--jq-numeric-input-shadow": "#999999", "--jq-string-bg": "#4c1a57", "--jq-text-color": "#fafafa",
    "--jq-link-color": "#9abafa", "--jq-numeric-input-label": "#1b1b1b", "--jq-numeric-input-bg": "#1e1e2a",
    "--jq-correct-color": "#1a7f37", "--jq-incorrect-color": "#c80202"}


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


def _escape(text: str) -> str:
    """HTML escaped, with no ``$`` left (jupyterquiz sets text as HTML, and ``$`` as maths)."""
    return html.escape(text, quote=False).replace("$", "&#36;")


def _inline(text: str) -> str:
    """Question or feedback text for jupyterquiz: escaped, ``code`` spans as <code>."""
    parts = re.split(r"`([^`]+)`", text)
    return "".join(f"<code>{_escape(part)}</code>" if i % 2 else _escape(part) for i, part in enumerate(parts))


def _code(value) -> str:
    return f"<code>{_escape(shown(value))}</code>"


def spellings(answer) -> list[str]:
    """The typed texts accepted for ``answer``: its repr; a tuple of ints as a tuple's repr
    (the page turns "2,3", "[2, 3]", "torch.Size([2, 3])" into it); a dtype also without ``torch.``."""
    if isinstance(answer, tuple) and all(isinstance(v, int) and not isinstance(v, bool)
                                         for v in answer):
        return [repr(tuple(answer))]
    text = shown(answer)
    if text.startswith("torch.") and type(answer).__name__ == "dtype":
        return [text, text[len("torch."):]]
    return [text]


def quiz_question(question: str, answer, choices=None, explain="") -> dict:
    """One question in jupyterquiz's format, checked (with ``choices``, exactly one equals
    ``answer``). Its ``key``, the answer as the reader gives it, goes to ``data-keys``."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("quiz: the question is a non-empty string")
    mapping = isinstance(explain, dict)
    # A mapping's None entry is the text for a wrong answer it does not list (a typed one).
    reasons = dict(explain) if mapping else {None: str(explain or "")}
    general = reasons.pop(None, "")
    hint = general if mapping else ""   # for a wrong typed answer

    def feedback(value, right: bool) -> str:
        # A text explanation gives the answer away: a wrong choice shows only its own reason.
        why = general if right or mapping else ""
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


#: Run after jupyterquiz's script: label each typed-answer field (axe's "label" rule), read a
#: typed tuple as Python prints it, then drop the text shown until now.
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
    root.querySelectorAll('.tf-quiz-pending').forEach(function (p) { p.remove(); });
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
    """Show ``questions`` (from ``quiz_question``) in one output under ``name`` (one script)."""
    from IPython.display import HTML, Javascript, display

    markup, script = quiz_parts(name, questions, shuffle)
    display(HTML(markup))
    display(Javascript(script))


def quiz_parts(name: str, questions: list[dict], shuffle: bool = True) -> tuple[str, str]:
    """(HTML, JavaScript) of ``questions`` shown under ``name``, as ``quiz_show`` displays them."""
    from jupyterquiz.dynamic.loader import load_questions_script
    from jupyterquiz.dynamic.renderer import build_script, build_styles, render_div

    # jupyterquiz names a JavaScript variable after the id: one unique to ``name``
    div_id = "tfq_" + re.sub(r"\W", "_", name) + "_" + hashlib.sha1(name.encode()).hexdigest()[:8]
    prefix, static, url = load_questions_script(questions, div_id)
    first = re.sub(r"<[^>]+>", "", questions[0]["question"]) if questions else ""
    more = f" (and {len(questions) - 1} more)" if len(questions) > 1 else ""
    # Shown until the JavaScript has run (in an untrusted notebook: until the cell runs).
    pending = (f'<p class="tf-quiz-pending">Quick check: {html.escape(html.unescape(first))}{more} '
               "The answers appear when the page runs JavaScript (in a notebook: run the cells to here)."
               "</p>")
    div = render_div(div_id, False, shuffle, False, 1_000_000, 600, 10, "left")
    div = div.replace("<div ", f'<div class="tf-quiz" data-quiz="{html.escape(name)}" '
                      f'data-questions="{len(questions)}" '
                      f'data-keys="{html.escape(json.dumps([q.get("key") for q in questions]))}" ', 1)
    return (div + pending + "</div>" + build_styles(div_id, COLORS) + _STYLE % {"id": div_id},
            build_script(prefix, static, url, div_id, True) + _AFTER % {"id": div_id})


def quiz(name: str, question: str, answer, choices=None, explain=""):
    """Ask ``question`` on the page, graded against ``answer`` (multiple choice with ``choices``,
    else typed); record the key as ``fences.observe(f"quiz.{name}", answer)``; return ``answer``."""
    from . import _OBSERVED_NAME, OBSERVE_MARKER, observe, parse_observed

    if not _OBSERVED_NAME.match(name):
        raise ValueError(f"quiz: name {name!r} must be letters, digits, '_', '.' or '-'")
    spec = quiz_question(question, answer, choices, explain)
    # The record's words for the key: the question, plain, where it reads back unchanged.
    label = "the answer to the quick check: " + " ".join(question.replace("`", "").split())[:100]
    values, labels = parse_observed(f"{OBSERVE_MARKER} {label} (quiz.{name}) = x")
    if labels.get(f"quiz.{name}") != label or values.get(f"quiz.{name}") != "x":
        label = f"the answer to the quick check {name}"
    observe(f"quiz.{name}", answer, label=label)
    quiz_show(name, [spec])
    return answer
