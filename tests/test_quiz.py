"""Quick checks (fences.quiz): a question rendered with jupyterquiz, its key checked and
recorded. The browser side (graded on the page, in JupyterLab) is tested by make check-site (tests/site/)."""
from __future__ import annotations

import json
import re
import sys

import pytest
import torch

import fences


@pytest.fixture
def shown(monkeypatch):
    """What fences.quiz displays: a list of IPython display objects."""
    out = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: out.extend(objs))
    return out


def questions_in(script: str) -> list[dict]:
    """The questions jupyterquiz's script embeds (``var questions<id>=[...];``)."""
    m = re.search(r"var questions\w+=(\[.*?\]);\n", script, re.S)
    return json.loads(m.group(1))


def test_a_multiple_choice_renders_with_one_right_answer(shown):
    y = torch.zeros(2, 3, 4).permute(2, 0, 1)
    key = fences.quiz("t-permute", "What is `y.stride()`?", y.stride(),
                      choices=[(1, 12, 4), (12, 4, 1), (4, 12, 1)], explain="permute reorders.")
    assert key == (1, 12, 4)
    html, js = shown
    assert 'class="tf-quiz"' in html.data and 'data-quiz="t-permute"' in html.data
    assert "Quick check: What is y.stride()?" in html.data  # the text before the JS runs
    assert "show_questions" in js.data and "aria-label" in js.data
    [q] = questions_in(js.data)
    assert q["type"] == "multiple_choice" and q["question"] == "What is <code>y.stride()</code>?"
    assert [a["correct"] for a in q["answers"]] == [True, False, False]
    assert [a["answer"] for a in q["answers"]] == ["<code>(1, 12, 4)</code>", "<code>(12, 4, 1)</code>",
                                                  "<code>(4, 12, 1)</code>"]
    right, wrong = q["answers"][0]["feedback"], q["answers"][1]["feedback"]
    assert right == "Right. permute reorders." and wrong == "Not <code>(12, 4, 1)</code>. Try again."  # no spoiler


def test_a_wrong_key_is_refused(shown):
    with pytest.raises(AssertionError, match="0 of the choices"):
        fences.quiz("t-wrong", "What?", (4, 1), choices=[(1, 4), (2, 2)])
    with pytest.raises(AssertionError, match="2 of the choices"):
        fences.quiz("t-twice", "What?", (4, 1), choices=[(4, 1), torch.Size([4, 1])])
    with pytest.raises(AssertionError, match="0 of the choices"):  # True is not the number 1
        fences.quiz("t-bool", "What?", True, choices=[1, 0])
    with pytest.raises(TypeError, match="not tensors"):
        fences.quiz("t-tensor", "What?", torch.tensor(1), choices=[torch.tensor(1)])
    with pytest.raises(ValueError, match="name"):
        fences.quiz("t wrong", "What?", 1)
    assert shown == []  # nothing rendered for a refused key


def test_typed_values_numeric_and_string(shown):
    fences.quiz("t-num", "How many elements?", 12)
    fences.quiz("t-shape", "What is `x.shape`?", torch.Size([4]))
    fences.quiz("t-dtype", "What dtype?", torch.float32, explain="the default dtype")
    num, shape, dtype = (questions_in(js.data)[0] for js in shown[1::2])
    assert num["type"] == "numeric" and num["answers"][0]["value"] == 12
    assert shape["type"] == "string"
    assert [a["answer"] for a in shape["answers"] if "answer" in a] == ["(4,)"]  # the page reads "4" as (4,)
    assert {a["answer"] for a in dtype["answers"] if a.get("correct")} == {"torch.float32", "float32"}
    assert dtype["answers"][-1] == {"type": "default", "feedback": "Not that. Try again, written as Python prints it."}


def test_the_key_is_recorded_under_the_record_env(shown, monkeypatch, capsys):
    monkeypatch.delenv(fences.RECORD_ENV, raising=False)
    fences.quiz("t-quiet", "What is `x.stride()`?", (4, 1), choices=[(4, 1), (1, 4)])
    assert "[observed]" not in capsys.readouterr().out  # on a page, nothing printed
    monkeypatch.setenv(fences.RECORD_ENV, "1")
    fences.quiz("t-rec", "What is `x.stride()`?", (4, 1), choices=[(4, 1), (1, 4)])
    out = capsys.readouterr().out
    values, labels = fences.parse_observed(out)
    assert values == {"quiz.t-rec": "(4, 1)"}
    assert labels["quiz.t-rec"] == "the answer to the quick check: What is x.stride()?"


def test_question_text_is_escaped_for_html_and_mathjax(shown):
    q = fences.quiz_question("Is `a < b` worth $5?", "yes", choices=["yes", "no"])
    assert q["question"] == "Is <code>a &lt; b</code> worth &#36;5?"
    assert q["answers"][0]["answer"] == "<code>yes</code>"


def test_several_questions_share_one_output(shown):
    qs = [fences.quiz_question(f"Q{i}?", i, choices=[i, i + 1]) for i in range(3)]
    fences.quiz_show("t-group", qs)
    html, js = shown
    assert 'data-questions="3"' in html.data and len(questions_in(js.data)) == 3
    assert js.data.count("function show_questions") == 1


def test_the_runtime_imports_no_quiz_library_until_a_quiz_is_shown():
    import subprocess

    probe = ("import sys, fences; heavy = {'torch', 'IPython', 'jupyterquiz', 'numpy'} & "
             "{m.split('.')[0] for m in sys.modules}; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_explain_per_answer_and_for_any_wrong_typed_one():
    q = fences.quiz_question("Stride?", (4, 1), explain={(4, 1): "after: (4, 1)", None: "before: (1, 4)"})
    assert q["answers"][0]["feedback"] == "Right. after: (4, 1)"
    assert q["answers"][-1] == {"type": "default", "feedback": "Not that. before: (1, 4)"}
    mc = fences.quiz_question("Which?", "view", choices=["view", "copy"],
                              explain={"view": "shares storage", "copy": "new storage"})
    assert [a["feedback"] for a in mc["answers"]] == ["Right. shares storage",
                                                      "Not <code>copy</code>. new storage Try again."]
