"""The lint (fencecheck/lint.py) catches each pattern it claims to, and passes a good chapter."""
from __future__ import annotations

from pathlib import Path

import pytest

from fencecheck import chapter, lint
from fencecheck.chapter import HEADER


GOOD_FENCE = """```{code-cell} ipython3
:tags: [fence]
:fence-id: %s
# Proves: zeros are zero.
import torch
assert torch.zeros(2).sum().item() == 0.0
```
"""


def read(text: str):
    """The one reader (fencecheck.chapter.parse), with this book's MyST extensions."""
    from pathlib import Path

    return chapter.parse(text, Path(__file__).resolve().parents[1] / "book" / "x.md")


def problems(body: str) -> list[str]:
    text = HEADER + body
    return chapter.lint_problems(text, read(text))


def fence(source: str, ident: str = "a-fence", proves: bool = True) -> str:
    head = "# Proves: something.\n" if proves else ""
    return f"```{{code-cell}} ipython3\n:tags: [fence]\n:fence-id: {ident}\n{head}{source}\n```\n"


def test_a_good_chapter_passes():
    assert problems("# Title\n\n" + GOOD_FENCE % "zeros") == []


def test_a_fence_without_an_id_is_refused():
    body = "```{code-cell} ipython3\n:tags: [fence]\n# Proves: x\nassert len('a') == 1\n```\n"
    assert any("without a `:fence-id:`" in p for p in problems(body))


@pytest.mark.parametrize("ident", ["Upper", "two words", "trailing-", "under_score"])
def test_a_malformed_id_is_refused(ident):
    assert any("is not lower-case words" in p for p in problems(fence("assert f()", f"'{ident}'")))


def test_an_id_without_the_fence_tag_is_refused():
    body = "```{code-cell} ipython3\n:fence-id: stray\nx = 1\n```\n"
    assert any("fence-id but no 'fence' tag" in p for p in problems(body))


def test_a_fence_without_proves_is_refused():
    assert any("no '# Proves:' line" in p for p in problems(fence("assert f()", proves=False)))


def test_a_proves_sentence_cut_by_a_blank_comment_line_is_refused():
    """The fold and the errors page show the '# Proves:' text up to a blank `#` line."""
    cut = "# Proves: the check refuses two mistakes, naming the\n#\n# machine each gets wrong.\nassert f()"
    assert any("without a full stop" in p and "naming the" in p for p in problems(fence(cut, proves=False)))
    whole = "# Proves: the check refuses two mistakes.\n#\n# Each named.\nassert f()"
    assert problems(fence(whole, proves=False)) == []
    assert problems(fence("# Proves: x\nassert f()", proves=False)) == []   # ended by code: whole


def test_a_fence_without_a_check_is_refused():
    assert any("cannot fail" in p for p in problems(fence("print(1)")))


@pytest.mark.parametrize("source", [
    "assert x == x", "assert t.dtype is t.dtype", "assert a.b <= a.b", "assert True",
    "assert 1", "assert (x, 'message')", "assert [0]",
])
def test_tautologies_are_refused(source):
    found = problems(fence(source))
    assert any("cannot fail" in p for p in found), found


@pytest.mark.parametrize("source", [
    "assert x == y", "assert f() == f()", "assert x is not x", "assert []", "assert x",
])
def test_asserts_that_can_fail_are_allowed(source):
    assert problems(fence(source)) == []


def test_a_long_code_line_is_refused():
    found = problems(fence("assert f()  # " + "x" * 90))
    assert any("over 88" in p for p in found)


def test_a_cited_claim_needs_source_and_version():
    ok = "```{cited}\n:source: https://example.org/x\n:version: burn 0.22.0\n\nText.\n```\n"
    assert problems(ok) == []
    no_url = "```{cited}\n:source: the report\n:version: 1\n\nText.\n```\n"
    assert any("without a `:source:` URL" in p for p in problems(no_url))
    backtick = "```{cited} The `cast` call\n:source: https://example.org/x\n:version: 1\n\nT.\n```\n"
    assert any("title with a backtick" in p for p in problems(backtick))
    no_version = ":::{cited}\n:source: https://example.org/x\n\nText.\n:::\n"
    assert any("without a `:version:`" in p for p in problems(no_version))


EXERCISE = """```{exercise} Task
:label: ex-one
:nonumber:

Do it.
```

````{solution-start} ex-one
:class: dropdown
````

%s

````{solution-end}
````
"""


def test_an_exercise_needs_a_proven_solution():
    unproven = EXERCISE % "```{code-cell} ipython3\nanswer = 1\n```"
    assert any("exercise 'ex-one' has no solution" in p for p in problems(unproven))
    proven = EXERCISE % fence("fences.grade.prove(check, solution=1, wrong=[(2, 'x')])",
                              "ex-one")
    assert problems(proven) == []


def test_fence_ids_must_be_unique_in_the_book():
    a = read(HEADER + GOOD_FENCE % "same")
    b = read(HEADER + GOOD_FENCE % "same")
    N = HEADER.count("\n") + 1   # the fence's directive line, in the .md file
    assert lint.book_problems({"a.md": a, "b.md": b}) == [
        f"fence-id 'same' is used in a.md line {N} and in b.md line {N}: ids must be unique in the book"]


def test_book_problems_reads_the_toc(tmp_path: Path):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/a\nchapters:\n"
                                       "  - file: book/b\n")
    (tmp_path / "book").mkdir()
    for name in "ab":
        (tmp_path / "book" / f"{name}.md").write_text(HEADER + GOOD_FENCE % "dup")
    assert len(chapter.book_problems(tmp_path)) == 1


def test_the_books_chapters_pass_the_lint():
    root = Path(__file__).parent.parent
    for path in chapter.toc_files(root):
        chapter.read(path)  # raises ChapterError naming every problem
    assert chapter.book_problems(root) == []


# --- the three layers: folds, visible length, no vanishing fences -------------------------

def cell(source: str, tags: str, ident: str | None = None) -> str:
    head = f":tags: [{tags}]\n" + (f":fence-id: {ident}\n" if ident else "")
    return f"```{{code-cell}} ipython3\n{head}{source}\n```\n"


@pytest.mark.parametrize("source", [
    "# Proves: x.\nprint(1)  # assert nothing here",
    "# Proves: x.\ns = 'assert this'\nprint(s)",
    "# Proves: x.\n# with fences.raises(ValueError, 'x'):\nprint(2)",
])
def test_a_check_in_a_comment_or_string_does_not_count(source):
    assert any("cannot fail" in p for p in problems(cell(source, "fence", "a-fence")))


def test_a_long_visible_cell_is_refused_and_a_folded_one_passes():
    limit = lint.MAX_VISIBLE_LINES   # the limit's one home
    over = f"over {limit}"
    long = "# Proves: x.\n" + "\n".join(f"assert {n} == {n} + 0" for n in range(limit + 1))
    assert any(over in p for p in problems(cell(long, "fence", "a-fence")))
    assert not any(over in p for p in problems(cell(long, "fence, proof", "a-fence")))
    setup = "\n".join(f"x{n} = {n}" for n in range(limit + 1))
    assert any(over in p for p in problems(cell(setup, "check")))
    assert not any(over in p for p in problems(cell(setup, "check, hide-input")))
    assert not any(over in p for p in problems(cell("\n".join(setup.splitlines()[:limit]), "check")))


@pytest.mark.parametrize("tag", ["remove-cell", "remove-input"])
def test_a_fence_may_not_be_removed_from_the_page(tag):
    found = problems(cell("# Proves: x.\nassert len('a') == 1", f"fence, {tag}", "a-fence"))
    assert any("would vanish from the page" in p for p in found)


def test_only_a_fence_is_a_proof():
    assert any("only a fence is a proof" in p for p in problems(cell("x = 1", "proof")))


def test_the_fold_caption_is_the_proves_text():
    source = "# Proves: every dtype\n# holds it.\n# Does not prove: CUDA.\nassert f()"
    assert lint.proves(source) == "every dtype holds it."
    assert lint.fold_caption(source) == ("Proof: every dtype holds it. Show the code",
                                         "Proof: every dtype holds it. Hide the code")


def test_a_code_cell_inside_a_colon_fenced_block_is_refused():
    """The build's reader keeps it as text inside the box, shown and never run: refused by
    the lint that make test and make book both use."""
    inside = ":::{note}\nA note.\n\n" + GOOD_FENCE % "inside" + ":::\n"
    assert any("inside the :::{note} block of line" in p for p in problems(inside))
    after = ":::{note}\nA note.\n:::\n\n" + GOOD_FENCE % "after"
    assert problems(after) == []


def test_a_code_cell_swallowed_by_a_stray_fence_is_refused():
    body = GOOD_FENCE % "before" + "```\n\nText.\n\n" + GOOD_FENCE % "after"
    assert any("inside the plain code block" in p for p in problems(body))
    assert problems(GOOD_FENCE % "one" + "\nText.\n\n" + GOOD_FENCE % "two") == []


def test_records_describes_only_a_value_the_fence_names():
    named = fence('x = fences.observe("a.value", 1)\n# Records: a.value: the value of a\nassert x == 1\n')
    assert not [p for p in problems(named) if "Records" in p]
    unnamed = fence('x = fences.observe("a.value", 1)\n# Records: a.valu: the value of a\nassert x == 1\n')
    assert any("'# Records: a.valu:' describes a value the cell never names" in p
               for p in problems(unnamed))
    in_a_loop = fence('for n in ("a", "b"):\n    fences.observe(f"v.{n}_edges", 1)\n'
                      '# Records: v.a_edges: the edges of a\nassert True or n\n')
    assert not [p for p in problems(in_a_loop) if "Records" in p]


def test_a_chapter_may_not_import_the_verifier():
    """A chapter imports the runtime only: the cache key and the shipped wheel hold nothing else."""
    for source in ("import fencecheck.lint", "from fencecheck import lint",
                   "importlib.import_module('fencecheck.lint')"):
        assert any("imports fencecheck" in p for p in problems(fence(f"{source}\nassert f()")))
    assert not any("fencecheck" in p for p in problems(fence("import fences\nassert f()")))


# --- the lesson form of standard 3 (lint.lesson_problems, lint.exponent_problems) ---

FORM3 = HEADER[:-4] + "tensor-fences: {form: 3}\n---\n"


def lesson(body: str) -> list[str]:
    text = FORM3 + body
    return chapter.lint_problems(text, read(text))


def code(source: str, tags: str = "", ident: str | None = None) -> str:
    meta = (f":tags: [{tags}]\n" if tags else "") + (f":fence-id: {ident}\n" if ident else "")
    return f"```{{code-cell}} ipython3\n{meta}{source}\n```\n\n"


IMPORTS = code("import torch\nimport fences")
SHOWN = code("x = torch.zeros(2)\nfences.show(x)\n# Proves: zeros.\nassert x.sum() == 0",
             "fence", "shown")


def test_a_form3_lesson_passes_and_its_parts_split_at_proves():
    assert lesson("# T\n\n" + IMPORTS + SHOWN) == []
    teaching, checks = lint.lesson_parts("x = 1\nfences.show(x)\n# Proves: one.\nassert x")
    assert teaching == "x = 1\nfences.show(x)" and checks == "# Proves: one.\nassert x"
    assert lint.lesson_parts("# Proves: one.\nassert x") == ("", "# Proves: one.\nassert x")
    assert lint.check_count("assert a\nwith fences.raises(E, 'abc'):\n    f()\nassert b") == 3
    assert lint.checks_caption(1)[0] == "✓ 1 check"


@pytest.mark.parametrize("source, why", [
    ("# Proves: zeros.\nassert torch.zeros(1).sum() == 0", "no teaching part"),
    ("x = torch.zeros(2)\nassert x.sum() == 0\nfences.show(x)\n# Proves: zeros.\nassert x.sum() == 0",
     "an assert before the `# Proves:` line"),
    ("x = torch.zeros(2)\n# Proves: zeros.\nassert x.sum() == 0", "the teaching part shows nothing"),
])
def test_a_form3_lesson_fence_must_teach_and_show(source, why):
    found = lesson("# T\n\n" + IMPORTS + code(source, "fence", "f"))
    assert any(why in p for p in found), found
    # the same fence in a chapter without form 3 is not held to the form
    assert not any(why in p for p in problems("# T\n\n" + IMPORTS + code(source, "fence", "f")))


def test_a_visible_cell_may_not_use_a_name_from_a_folded_cell():
    proof = code("# Proves: y is a view.\ny = torch.zeros(3)\nassert y.sum() == 0", "fence, proof", "p")
    hidden = code("z = 2", "remove-cell")
    uses = code("fences.show(y.shape, z)\n# Proves: y.\nassert y.shape == (3,)", "fence", "u")
    found = lesson("# T\n\n" + IMPORTS + proof + hidden + uses)
    assert any("uses `y`, defined only in line" in p and "(fence p)" in p for p in found), found
    assert any("uses `z`, defined only in" in p for p in found), found
    # defined again in a visible cell first: fine
    fixed = lesson("# T\n\n" + IMPORTS + proof + hidden + code("y = torch.zeros(3)\nz = 2") + uses)
    assert fixed == [], fixed


def test_a_long_proof_caption_is_refused_in_form3():
    long = "# Proves: " + "word " * 30 + "\nassert torch.zeros(1).sum() == 0"
    found = lesson("# T\n\n" + IMPORTS + code(long, "fence, proof", "long"))
    assert any("the proof's caption is" in p for p in found), found


def test_an_exponent_in_prose_is_refused_and_in_code_allowed():
    assert any("`**` as an exponent" in p for p in problems("# T\n\nAn int past 2**63 here.\n"))
    assert problems("# T\n\nAn int past `2**63`, or 2⁶³.\n\n```python\nx = 2**63\n```\n") == []
    assert problems("# T\n\n" + code("x = 2**63\nprint(x)")) == []


def test_only_the_teaching_part_counts_against_the_visible_line_limit():
    """A lesson fence's check part is folded on the page: a long one is fine; a long
    teaching part is not."""
    checks = "\n".join(f"assert x + {n} > {n - 1}" for n in range(20))
    assert not any("lines shown" in p for p in problems(
        "# T\n\n" + code(f"x = 1\nprint(x)\n# Proves: x.\n{checks}", "fence", "long-checks")))
    teach = "\n".join(f"x{n} = {n}" for n in range(20))
    assert any("21 lines shown" in p for p in problems(
        "# T\n\n" + code(f"{teach}\nprint(x1)\n# Proves: x.\nassert x1 == 1", "fence", "long-teach")))


def test_a_check_part_may_not_end_in_a_displayed_expression():
    ends = "x = 1\nprint(x)\n# Proves: x.\nassert x == 1\nfences.observe('a.b', x)"
    found = lesson("# T\n\n" + IMPORTS + code(ends, "fence", "ends"))
    assert any("ends in an expression" in p for p in found), found
    quiet = lesson("# T\n\n" + IMPORTS + code(ends + ";", "fence", "ends"))
    assert not any("ends in an expression" in p for p in quiet), quiet


def test_the_check_part_prints_no_raise_message_on_the_page(monkeypatch):
    """raises shows torch's message in the teaching part, and nothing from the check part
    (folded on the page): the cell's own source, from IPython's linecache, says which."""
    from IPython.core.interactiveshell import InteractiveShell
    import contextlib
    import io

    import fences

    monkeypatch.delenv(fences.RECORD_ENV, raising=False)
    shell = InteractiveShell.instance()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        shell.run_cell("import fences\nwith fences.raises(ValueError, 'shown'):\n"
                       "    raise ValueError('shown here')\n# Proves: x\n"
                       "with fences.raises(ValueError, 'hidden'):\n    raise ValueError('hidden there')\n")
    assert "ValueError: shown here" in out.getvalue() and "hidden there" not in out.getvalue()

# --- prose numbers are witnessed (issue 53, item 2) ----------------------------------

def _lesson(body: str, front: str = "") -> str:
    return ("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
            "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n"
            f"tensor-fences: {{form: 3{front}}}\n---\n\n" + body)


CELL = "```{code-cell} ipython3\n%s\n```\n"


def test_the_issue_plant_65519_ones_is_refused():
    from fencecheck import lint

    text = _lesson(CELL % "ones = torch.ones(60000, dtype=torch.float16)\nfences.show(ones.sum())"
                   + "\nSo 65,519 ones sum to 60000.0.\n")
    [problem] = lint.number_problems(text, outputs=[{lint._number_value("60000.")}])
    assert problem.startswith("line 18: the number 65,519 is in no code cell"), problem


def test_numbers_witnessed_by_code_output_glue_or_allowlist_pass():
    from fencecheck import lint

    text = _lesson(CELL % "x = torch.ones(65_519)\nbig = 2**63" + "\n"
                   "65,519 ones and 2⁶³ are in the code; 4.5 is shown; {glue:text}`x-n` is glued;"
                   " torch 2.13.0 and 2.8–2.15, section 3.4, float16, 1999, 0, 1 and 2 are no"
                   " results; `123` is code; 77 is allowlisted.\n",
                   front=', numbers-ok: {"77": "the number of a page in another book"}')
    assert lint.number_problems(text, outputs=[{lint._number_value("4.5")}]) == []
    assert [p.split(":")[1] for p in lint.number_problems(text, outputs=[set()])] == [
        " the number 4.5 is in no code cell's code or output within 3 cells of it"]


def test_a_number_far_from_its_witness_is_refused():
    from fencecheck import lint

    cells = "".join(CELL % f"a{i} = {i + 100}" for i in range(8))
    text = _lesson("It is 100.\n\n" + cells + "\nAnd 100 again.\n")
    problems = lint.number_problems(text, outputs=[set()] * 8)
    assert len(problems) == 1 and "the number 100 " in problems[0], problems   # the second


def test_an_allowlisted_number_needs_a_reason():
    from fencecheck import lint

    text = _lesson("Nothing.\n", front=', numbers-ok: {"77": "TODO"}')
    [problem] = lint.number_problems(text)
    assert "numbers-ok '77': the reason 'TODO' says nothing" in problem, problem


# --- the reviewer's plants (issue 53, item 6), each refused with its place ------------

def _read_problem(tmp_path, text):
    from fencecheck import chapter

    path = tmp_path / "lesson.md"
    path.write_text(text)
    with pytest.raises(chapter.ChapterError) as info:
        chapter.read(path)
    return str(info.value)


QUIZ = ("```{code-cell} ipython3\n:tags: [fence]\n:fence-id: %s\ny = torch.zeros(2, 3)\n"
        "# Proves: quick check: the stride of a 2×3 tensor.\n"
        "key = fences.quiz(%r, \"What is `y.stride()`?\", %s, choices=[(3, 1), (1, 3)])\n"
        "assert key == (3, 1)\n```\n\n")


@pytest.mark.parametrize("front, message", [
    ("tensor-fences: {from: 3}", "tensor-fences has the key 'from', which no tool reads"),
    ("tensor-fences: {form: 4}", "tensor-fences form is 4; the forms are 3"),
    ("tensor-fences: {form: \"3\"}", "tensor-fences form is '3'; the forms are 3 (a number)"),
])
def test_a_misspelt_lesson_form_is_refused(tmp_path, front, message):
    text = _lesson("Nothing.\n").replace("tensor-fences: {form: 3}", front)
    assert message in _read_problem(tmp_path, text)


def test_a_quick_check_with_a_literal_key_or_a_name_twice_is_refused(tmp_path):
    body = ("```{code-cell} ipython3\nimport torch\n\nimport fences\n```\n\n"
            + QUIZ % ("q-one", "q", "(3, 1)") + QUIZ % ("q-two", "q", "y.stride()"))
    problem = _read_problem(tmp_path, _lesson(body))
    assert "line 19: the quick check's answer is the literal (3, 1): compute it with torch" in problem
    assert "line 28: the quick check 'q' is also at line 19" in problem, problem


def test_show_with_nothing_a_fence_id_twice_and_tags_not_a_list_are_refused(tmp_path):
    cell = ("```{code-cell} ipython3\n:tags: [fence]\n:fence-id: %s\nx = torch.ones(2)\n"
            "fences.show(%s)\n# Proves: two ones.\nassert x.sum().item() == 2.0\n```\n\n")
    head = "```{code-cell} ipython3\nimport torch\n\nimport fences\n```\n\n"
    problem = _read_problem(tmp_path, _lesson(head + cell % ("a-b", "")))
    assert "(fence a-b): `fences.show()` with nothing to show" in problem, problem
    problem = _read_problem(tmp_path, _lesson(head + cell % ("a-b", "x") + cell % ("a-b", "x")))
    assert "fence-id 'a-b' is used in lesson.md line 19 and in lesson.md line 28" in problem, problem
    text = _lesson(head + (cell % ("a-b", "x")).replace(":tags: [fence]", ":tags: fence"))
    assert "line 20: `:tags: fence`: a cell's tags are a list in brackets" in _read_problem(tmp_path, text)
