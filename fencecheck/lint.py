"""The book standard, as far as a machine can check it (see book/standard.md).

Run by both the test plugin and the Sphinx extension (through
``fencecheck.chapter``), so ``make test`` and ``make book`` refuse the same
chapters. Each function returns one line per problem; an empty list means
the chapter passes.

What is checked, per chapter:

- a forbidden tag (``raises-exception``, ``nbval-skip``...);
- a fence (a code cell tagged ``fence``) without a ``fence-id``, with an id
  that is not lower-case words joined by ``-``, or an id without the tag;
- a fence with no ``# Proves:`` line, or one whose sentence a blank ``#`` line cuts
  before its full stop (the fold shows the part before it);
- a code cell over ``MAX_VISIBLE_LINES`` lines that is not folded; a
  ``proof`` tag on a cell that is not a fence; a fence tagged
  ``remove-cell`` or ``remove-input`` (it would vanish from the page);
- a fence with no ``assert``, ``raises(``, ``warns(`` or ``prove(``: it
  cannot fail;
- an ``assert`` that cannot fail: ``assert X == X`` (or ``is``, ``<=``,
  ``>=`` with the same expression on both sides), ``assert True``, or an
  assert of a non-empty literal;
- a ``{cited}`` block without a ``:source:`` URL or a ``:version:``;
- a code cell inside a colon-fenced directive (``:::{note}``): the build's
  reader makes it text in the box, shown and never run;
- a code line longer than ``MAX_COLUMNS`` (it would wrap or scroll);
- a code cell naming ``fencecheck``: a chapter imports the runtime only;
- an exercise (``{exercise}`` with a ``:label:``) whose solution has no
  fence calling ``fences.grade.prove``.

And across the book: every fence id is unique.

Everywhere in a chapter's prose: no ``**`` exponent outside code (``2**63`` renders
as bold Markdown; write ``2⁶³`` or a code span).

In a lesson in the form of standard 3 (front matter ``tensor-fences: {form: 3}``,
``lesson_problems``): every lesson fence has a teaching part with no ``assert`` that
shows something; a proof's ``# Proves:`` caption is one line of at most
``MAX_CAPTION`` characters; no visible cell uses a name defined only in a folded or
removed cell (a reader typing the visible cells in order would get a NameError).
"""
from __future__ import annotations

import ast
import re

MAX_COLUMNS = 88

FORBIDDEN_TAGS = {
    "raises-exception": "the raises-exception tag passes a cell whether or not it raises; "
    "assert the raise with `with fences.raises(...)` instead",
    "nbval-raises-exception": "nbval passes such a cell whether or not it raises; "
    "assert the raise with `with fences.raises(...)` instead",
    "nbval-skip": "a skipped fence cannot fail; gate it with `fences.needs(...)` instead",
}

#: The fold rule, in one place: a fence tagged ``proof`` is folded, code and output,
#: behind its ``# Proves:`` text, on the site (``fencecheck.sphinx``), in the downloaded
#: notebook (``metadata.jupyter.source_hidden``) and so in the PDF printed from the site.
PROOF_TAG = "proof"


def proof_output_shown(lesson: bool, has_table: bool) -> bool:
    """The fold rule's one exception: on a page that is not a lesson, a proof that prints a
    table (``fences.table``) keeps the table shown, only its code folded: a reference
    page's tables are what its reader comes for (and what its prose points at)."""
    return has_table and not lesson


#: Tags that keep a cell's code off the page until a click (or off it entirely).
FOLDING_TAGS = {PROOF_TAG, "hide-input", "hide-cell", "remove-input", "remove-cell"}
#: No code cell shows more lines than this without a click: the one home of the limit
#: (tools/check_site.py measures the built pages against it; tests/test_one_home.py).
MAX_VISIBLE_LINES = 15
#: A fence is a claim on the page: it may be folded, never removed from it.
REMOVING_TAGS = {"remove-cell", "remove-input"}

#: The reading-time estimate, in one place (the landing page and check-site use it):
#: prose words at READ_WPM a minute plus each visible code line at CODE_LINE_S seconds.
READ_WPM, CODE_LINE_S = 200, 6


def reading_minutes(words: int, code_lines: int) -> float:
    return words / READ_WPM + code_lines * CODE_LINE_S / 60


def visible_code(cell) -> str:
    """What of a code cell the page shows without a click: a lesson fence's teaching part,
    an unfolded cell whole, nothing of a proof or a folded cell."""
    tags = set(cell.metadata.get("tags", []))
    if tags & FOLDING_TAGS:
        return ""
    if "fence" in tags:
        teaching, _ = lesson_parts(cell.source)
        return teaching or cell.source
    return cell.source


#: A proof's caption, the ``# Proves:`` text shown on the fold: one line at 1400 px.
MAX_CAPTION = 110
#: The calls that show something on the page (a teaching part must make one).
SHOWING = {"show", "raises", "warns", "table", "print", "display"}

FENCE_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PROVES = re.compile(r"^\s*#\s*Proves:", re.M)
CITED = re.compile(r"^(:{3,}|`{3,})\{cited\}(.*)$")
_CODE_CELL = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")
EXERCISE = re.compile(r"^(:{3,}|`{3,})\{exercise\}")
_LABEL = re.compile(r"^:label:\s*(\S+)")
_SOLUTION = re.compile(r"^(:{3,}|`{3,})\{solution(?:-start)?\}\s*(\S+)")
_SOLUTION_END = re.compile(r"^(:{3,}|`{3,})\{solution-end\}")
#: A chapter's code naming the verifier (an import, or a module path in a string).
VERIFIER_IMPORT = re.compile(r"\bfencecheck\b")


def fence_id(cell) -> str | None:
    """The id of a fence cell (its ``fence-id`` metadata), or None."""
    value = cell.metadata.get("fence-id")
    return str(value) if value is not None else None


def is_fence(cell) -> bool:
    return cell.cell_type == "code" and "fence" in cell.metadata.get("tags", [])


#: A ``# Proves:`` text (its first line and the comment lines continuing it) followed by a
#: blank ``#`` line: where a sentence is cut if the text has no full stop.
CUT_CAPTION = re.compile(r"^\s*#\s*Proves:.*\n(?:\s*#\s?(?![A-Z][\w ]{0,30}:)\S.*\n)*\s*#\s*$", re.M)


def proves(source: str) -> str:
    """The text of a fence's ``# Proves:`` comment with the comment lines that continue
    it (up to a blank comment, code, or another label such as ``Does not prove:``)."""
    lines = source.splitlines()
    for n, line in enumerate(lines):
        m = re.match(r"^\s*#\s*Proves:\s*(.*)$", line)
        if not m:
            continue
        words = [m.group(1).strip()]
        for more in lines[n + 1:]:
            c = re.match(r"^\s*#\s?(.*)$", more)
            text = c.group(1).strip() if c else ""
            if not text or re.match(r"^[A-Z][\w ]{0,30}:", text):
                break
            words.append(text)
        return " ".join(w for w in words if w)
    return ""


#: ``# Records: name: what it is`` in a fence: the plain words for a value it observes
#: (``fences.observe(name, ...)``), shown wherever that value differs between releases.
#: A comment, like ``# Proves:``: rewording it keeps the fence's code hash, so the
#: record stays current (``fencecheck.record.code_hash``).
#: A long description goes on in comment lines indented under it (``#   more words``).
RECORDS = re.compile(r"^\s*#\s*Records:\s*([\w.\-]+):\s+(.+?)\s*$")


def described(source: str) -> dict[str, str]:
    """The ``# Records:`` descriptions of a fence: value name -> plain words."""
    found: dict[str, str] = {}
    lines = source.splitlines()
    for n, line in enumerate(lines):
        m = RECORDS.match(line)
        if not m:
            continue
        words = [m.group(2)]
        for more in lines[n + 1:]:
            c = re.match(r"^\s*#\s{3,}(\S.*?)\s*$", more)
            if not c:
                break
            words.append(c.group(1))
        found[m.group(1)] = " ".join(words)
    return found


#: ``# Fix:`` in a fence that proves an error: what a reader who meets it does (the
#: errors page shows it beside the message). Continues on comment lines indented under it.
FIX = re.compile(r"^\s*#\s*Fix:\s*(.+?)\s*$")


def fix(source: str) -> str:
    """The fence's ``# Fix:`` words, or ""."""
    lines = source.splitlines()
    for n, line in enumerate(lines):
        m = FIX.match(line)
        if m:
            words = [m.group(1)]
            for more in lines[n + 1:]:
                c = re.match(r"^\s*#\s{3,}(\S.*?)\s*$", more)
                if not c:
                    break
                words.append(c.group(1))
            return " ".join(words)
    return ""


def names_value(source: str, name: str) -> bool:
    """Does ``source`` observe the value ``name``: the first argument of a call to
    ``observe`` is that string, or an f-string whose fixed parts match it
    (``f"dtypes.{name}_edges"`` names dtypes.float8_e4m3fn_edges; an f-string with no
    fixed part names nothing)?"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and getattr(
                node.func, "attr", getattr(node.func, "id", None)) == "observe"):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and first.value == name:
            return True
        if isinstance(first, ast.JoinedStr):
            parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+"
                     for v in first.values]
            fixed = "".join(v.value for v in first.values if isinstance(v, ast.Constant))
            if re.search(r"[A-Za-z]", fixed) and re.fullmatch("".join(parts), name):
                return True
    return False


def lesson_parts(source: str) -> tuple[str, str]:
    """A lesson fence's (teaching part, check part): the lines a reader types, up to the
    ``# Proves:`` line, and the lines from it on (asserts, glue, observe, witnesses).

    The page shows the teaching part and its output and folds the check part behind
    "✓ N checks" (``fencecheck.sphinx``); the notebook makes it a collapsed cell after
    the teaching cell (``fencecheck.jupyter``). A fence whose ``# Proves:`` line comes
    first has no teaching part: ("", source)."""
    lines = source.splitlines()
    for n, line in enumerate(lines):
        if PROVES.match(line):
            teaching = "\n".join(lines[:n]).rstrip()
            return (teaching, "\n".join(lines[n:]).strip("\n")) if teaching.strip() \
                else ("", source)
    return "", source


def check_count(source: str) -> int:
    """The checks in ``source``: its ``assert`` statements and ``raises``/``warns``/
    ``prove``/``quiz`` calls (what "✓ N checks" counts)."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return 0
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Assert) or (
        isinstance(node, ast.Call) and _called(node) in ("raises", "warns", "prove", "quiz")))


def _called(node) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def checks_caption(count: int, quiz: bool = False) -> tuple[str, str]:
    """The check fold's two summaries: (shown while folded, shown while open). A quick
    check's fold holds its answer, and says so."""
    if quiz:
        return "The answer and how it is checked (answer first)", "Hide the answer"
    noun = "check" if count == 1 else "checks"
    return f"✓ {count} {noun}", f"✓ {count} {noun}: hide them"


def fold_caption(source: str) -> tuple[str, str]:
    """The fold's two summaries: (shown while folded, shown while open)."""
    claim = proves(source).rstrip(".") or "the claim above"
    return f"Proof: {claim}. Show the code", f"Proof: {claim}. Hide the code"


def tautologies(source: str) -> list[str]:
    """Asserts in ``source`` that cannot fail, each as its source text."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        test = node.test
        text = ast.unparse(test)
        if isinstance(test, ast.Constant) and test.value:
            found.append(text)
        elif isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and (
                getattr(test, "elts", None) or getattr(test, "keys", None)):
            found.append(text)  # a non-empty literal is always true
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                test.ops[0], (ast.Eq, ast.Is, ast.LtE, ast.GtE)):
            if ast.dump(test.left) == ast.dump(test.comparators[0]) and not _calls(test.left):
                found.append(text)
    return found


def has_check(source: str) -> bool:
    """An ``assert`` statement or a call of ``raises``/``warns``/``prove`` in the code
    itself: the word in a comment or a string does not count."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call) and _called(node) in ("raises", "warns", "prove"):
            return True
    return False


def _calls(node) -> bool:
    # `assert f() == f()` can fail (a function may return different values): allowed
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


def _strip_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def cell_problems(nb, text: str | None = None) -> list[str]:
    """Problems of the chapter's code cells, one line each, naming the cell by its line in
    the ``.md`` file (its directive's; "code cell N" only without a source map).
    ``text``: the chapter's text, for the exact line of a syntax error."""
    problems = []
    code_index = -1
    starts = cell_lines(nb)
    bases = cell_lines(nb, text) if text is not None else []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code_index += 1
        where = (f"line {starts[code_index]}" if code_index < len(starts)
                 else f"code cell {code_index}")
        tags = cell.metadata.get("tags", [])
        ident = fence_id(cell)
        if ident:
            where += f" (fence {ident})"
        for tag in tags:
            if tag in FORBIDDEN_TAGS:
                problems.append(f"{where}: tag {tag!r}: {FORBIDDEN_TAGS[tag]}")
        for n, line in enumerate(cell.source.splitlines(), 1):
            if len(line) > MAX_COLUMNS:
                problems.append(f"{where}: line {n} is {len(line)} columns, over "
                                f"{MAX_COLUMNS}: it would wrap or scroll on the page")
        if ident is not None and "fence" not in tags:
            problems.append(f"{where}: has a fence-id but no 'fence' tag")
        # what the page shows unfolded: a lesson fence's teaching part, else the cell
        lines = len(visible_code(cell).rstrip().splitlines())
        if lines > MAX_VISIBLE_LINES and not FOLDING_TAGS & set(tags):
            problems.append(
                f"{where}: {lines} lines shown on the page, over {MAX_VISIBLE_LINES}: "
                "shorten it, or fold it (a fence: tag 'proof'; another cell: 'hide-input')")
        if PROOF_TAG in tags and "fence" not in tags:
            problems.append(f"{where}: tagged {PROOF_TAG!r} but not 'fence': only a fence "
                            "is a proof (fold another cell with 'hide-input')")
        if VERIFIER_IMPORT.search(cell.source):
            problems.append(f"{where}: imports fencecheck, the verifier: a chapter imports the "
                            "runtime (fences) only; the cache key and the shipped wheel hold "
                            "nothing else")
        for name in described(cell.source):
            if not names_value(cell.source, name):
                problems.append(f"{where}: '# Records: {name}:' describes a value the cell "
                                "never names (fences.observe(\"...\", value))")
        if "fence" not in tags:
            continue
        for tag in sorted(REMOVING_TAGS & set(tags)):
            problems.append(f"{where}: a fence tagged {tag!r} would vanish from the page; "
                            f"fold it with {PROOF_TAG!r} instead")
        if ident is None:
            problems.append(f"{where}: tagged 'fence' without a `:fence-id:` "
                            "(a short id, unique in the book, that keys its results)")
        elif id_problem(ident):
            problems.append(f"{where}: {id_problem(ident)}")
        caption = proves(cell.source)
        if not PROVES.search(cell.source):
            problems.append(f"{where}: tagged 'fence' but has no '# Proves:' line "
                            "saying what it proves")
        elif CUT_CAPTION.search(cell.source) and not re.search(r"[.!?]\)?$", caption):
            problems.append(f"{where}: the '# Proves:' sentence stops at a blank `#` line "
                            "without a full stop: the fold and the errors page show it cut "
                            f"({caption[-40:]!r}); finish the sentence before it")
        broken = syntax_problem(cell.source, bases[code_index] if code_index < len(bases) else
                                (starts[code_index] + 1 if code_index < len(starts) else None))
        if broken:
            problems.append(f"{where}: {broken}")
        elif not has_check(cell.source):
            problems.append(f"{where}: tagged 'fence' but has no assert, raises(), warns() "
                            "or prove() call, so it cannot fail")
        for text in tautologies(cell.source):
            problems.append(f"{where}: `assert {text}` cannot fail")
    return problems


def text_problems(text: str) -> list[str]:
    """Problems in the chapter's Markdown: cited blocks, exercises without a proven solution."""
    problems = []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        m = CITED.match(line)
        if not m:
            continue
        options = _options(lines, n)
        if "`" in m.group(2):
            problems.append(f"line {n}: {{cited}} title with a backtick: MyST renders the "
                            "whole block as raw text")
        source = options.get("source", "")
        if not re.match(r"https?://\S+", source):
            problems.append(f"line {n}: {{cited}} without a `:source:` URL a reader can open")
        if not options.get("version"):
            problems.append(f"line {n}: {{cited}} without a `:version:` (the release cited)")
    fence = None  # the open backtick block: (its fence, its line, plain or a directive)
    for n, line in enumerate(lines, 1):
        m = re.match(r"^(`{3,}|~{3,})(\{[\w-]+\})?", line)
        if fence is None and m:
            fence = (m.group(1), n, m.group(2) is None)
        elif fence is not None and line.strip() == fence[0]:
            fence = None
        elif fence is not None and fence[2] and _CODE_CELL.match(line):
            problems.append(f"line {n}: a code cell inside the plain code block opened on line "
                            f"{fence[1]} (a stray fence?): make book shows it as text, make test "
                            "runs it")
            fence = None
    opened: list[tuple[str, str, int]] = []  # colon-fenced directives still open
    for n, line in enumerate(lines, 1):
        m = re.match(r"^(:{3,})\{([\w-]+)\}", line)
        if m:
            opened.append((m.group(1), m.group(2), n))
        elif opened and line.strip() == opened[-1][0]:
            opened.pop()
        elif opened and _CODE_CELL.match(line):
            colons, name, start = opened[-1]
            problems.append(
                f"line {n}: a code cell inside the {colons}{{{name}}} block of line {start}: "
                "it would be shown as text in the box and never run; close the block "
                "before the cell")
    labels = {}
    for n, line in enumerate(lines, 1):
        if EXERCISE.match(line):
            label = _options(lines, n).get("label")
            if not label:
                problems.append(f"line {n}: {{exercise}} without a :label:")
            else:
                labels[label] = n
    proven = _proven_solutions(lines)
    for label, n in labels.items():
        if label not in proven:
            problems.append(
                f"line {n}: exercise {label!r} has no solution with a fence calling "
                "fences.grade.prove (its check is never shown to pass and fail)")
    return problems


def _options(lines: list[str], n: int) -> dict[str, str]:
    """The ``:key: value`` lines right after the directive on line ``n`` (1-based)."""
    out = {}
    for line in lines[n:]:
        m = re.match(r"^:([\w-]+):\s*(.*)$", line)
        if not m:
            break
        out[m.group(1)] = m.group(2).strip()
    return out


def _proven_solutions(lines: list[str]) -> set[str]:
    """Labels whose solution (a directive, or solution-start ... solution-end) calls prove(."""
    proven, current = set(), None
    for line in lines:
        m = _SOLUTION.match(line)
        if m:
            current = m.group(2)
            continue
        if _SOLUTION_END.match(line):
            current = None
            continue
        if current and re.search(r"\bprove\(", line):
            proven.add(current)
    return proven


_EXPONENT = re.compile(r"\d\*\*\d")


def exponent_problems(text: str) -> list[str]:
    """``**`` between digits in prose (outside code blocks, code cells and code spans)."""
    problems, fence = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        prose = re.sub(r"(`+).+?\1", "", line)
        if _EXPONENT.search(prose):
            problems.append(f"line {n}: `**` as an exponent in prose renders as bold: write "
                            "2⁶³ or a code span")
    return problems


def lesson_problems(nb, lines: list[int] | None = None) -> list[str]:
    """The lesson form of standard 3 (see the module docstring), one line a problem."""
    import builtins

    problems = []
    seen_visible: set[str] = set()
    hidden: dict[str, str] = {}  # a name bound only out of sight -> where
    in_solution = False
    code_index = -1
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if re.search(r"^(`{3,}|:{3,})\{solution(-start)?\}", cell.source, re.M):
                in_solution = True
            if re.search(r"^(`{3,}|:{3,})\{solution-end\}", cell.source, re.M):
                in_solution = False
            continue
        if cell.cell_type != "code":
            continue
        code_index += 1
        line = lines[code_index] if lines and code_index < len(lines) else None
        where = f"line {line}" if line else f"code cell {code_index}"
        tags = set(cell.metadata.get("tags", []))
        ident = fence_id(cell)
        if ident:
            where += f" (fence {ident})"
        if in_solution:
            visible, folded = "", cell.source   # a solution is collapsed: not the lesson's
        elif "fence" in tags and PROOF_TAG in tags:
            caption = proves(cell.source)
            if len(caption) > MAX_CAPTION:
                problems.append(f"{where}: the proof's caption is {len(caption)} characters, "
                                f"over {MAX_CAPTION}: one plain line on the fold; put the "
                                "detail in comments inside")
            visible, folded = "", cell.source
        elif "fence" in tags:
            visible, folded = lesson_parts(cell.source)
            if not visible:
                problems.append(f"{where}: a lesson fence with no teaching part: put the lines "
                                "a reader types before the `# Proves:` line")
            elif _asserts(visible):
                problems.append(f"{where}: an assert before the `# Proves:` line: the teaching "
                                "part shows, the check part (from `# Proves:` on) asserts")
            elif _bare_show(visible):
                problems.append(f"{where}: `fences.show()` with nothing to show: give it the "
                                "values the sentence reads off")
            elif not (_calls_any(visible, SHOWING) or _calls_any(folded, {"quiz"})):
                problems.append(f"{where}: the teaching part shows nothing: end it with "
                                "fences.show(...), a raises block or a table")
            elif _ends_in_expression(cell.source):
                problems.append(f"{where}: the check part ends in an expression, whose value "
                                "would print under the teaching part's output: assign it "
                                "(`_ = ...`) or end the line with `;`")
        elif tags & FOLDING_TAGS:
            visible, folded = "", cell.source
        else:
            visible, folded = cell.source, ""
        if visible:
            bound, used = _names(visible)
            for name in sorted(used - seen_visible - bound - set(dir(builtins))):
                if name in hidden:
                    problems.append(f"{where}: uses `{name}`, defined only in {hidden[name]} "
                                    "(folded or removed): a reader typing the visible cells "
                                    "gets a NameError; define it in a visible cell")
            seen_visible |= bound
        for name in _names(folded)[0] - seen_visible:
            hidden.setdefault(name, where)
    return problems


def _ends_in_expression(source: str) -> bool:
    """Does the cell end in an expression statement IPython would display (one whose
    line does not end with ``;``)?"""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return False
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    last = source.rstrip().splitlines()[-1] if source.strip() else ""
    return not last.split("#", 1)[0].rstrip().endswith(";")


def _asserts(source: str) -> bool:
    try:
        return any(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(_strip_magics(source))))
    except SyntaxError:
        return False


def _calls_any(source: str, names: set[str]) -> bool:
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and _called(n) in names for n in ast.walk(tree))


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names bound, names read) at any depth of ``source``; empty when it does not parse."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return set(), set()
    bound, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            bound.add(node.optional_vars.id)
    return bound, used


def book_problems(notebooks: dict) -> list[str]:
    """Problems across chapters (``{name: notebook}``): a fence id used twice."""
    seen: dict[str, str] = {}
    problems = []
    for name, nb in notebooks.items():
        lines = nb.metadata.get("source_map") or []
        for i, cell in enumerate(nb.cells):
            ident = fence_id(cell) if is_fence(cell) else None
            if ident is None:
                continue
            here = f"{name} line {lines[i]}" if i < len(lines) else name
            if ident in seen:
                problems.append(f"fence-id {ident!r} is used in {seen[ident]} and in {here}: "
                                "ids must be unique in the book")
            else:
                seen[ident] = here
    return problems


# --- issue 53: messages that name the place; ids and solutions that cannot mislead ----------

def id_problem(ident: str) -> str | None:
    """Why ``ident`` is not a fence id, naming any character that is not ASCII by its code
    point (a Cyrillic ``е`` prints like a Latin ``e``), or None when it is one."""
    if FENCE_ID.match(ident):
        return None
    import unicodedata

    odd = [f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}) at position {i}"
           for i, c in enumerate(ident) if not c.isascii()]
    if odd:
        return (f"fence-id {ident!r} has characters that are not ASCII: {', '.join(odd)}; an id "
                "is lower-case ASCII letters, digits and '-'")
    return f"fence-id {ident!r} is not lower-case words joined by '-' (ASCII letters and digits)"


def solution_problems(text: str) -> list[str]:
    """A sphinx-exercise solution left open on the page: ``{solution}`` or
    ``{solution-start}`` without ``:class: dropdown`` (the reader sees the answer under
    the question before trying it)."""
    lines = text.splitlines()
    problems = []
    for n, line in enumerate(lines, 1):
        m = re.match(r"^(:{3,}|`{3,})\{(solution(?:-start)?)\}\s*(\S*)", line)
        if not m:
            continue
        classes = _options(lines, n).get("class", "").split()
        if "dropdown" not in classes:
            problems.append(f"line {n}: {{{m.group(2)}}} {m.group(3)} without `:class: dropdown`: "
                            "the solution would be shown open on the page, under its question")
    return problems


def syntax_problem(source: str, base: int | None = None) -> str | None:
    """Python's SyntaxError for a code cell (magics aside), at its line in the ``.md`` file
    when ``base`` is known (``cell_lines``: source line k is ``.md`` line base + k);
    None when it parses."""
    import ast

    try:
        ast.parse(_strip_magics(source))
    except SyntaxError as exc:
        at = exc.lineno or 1
        where = f"line {base + at}" if base else f"line {at} of the cell"
        return (f"SyntaxError: {exc.msg} (at {where})"
                + (f": {exc.text.strip()}" if exc.text and exc.text.strip() else ""))
    return None


def cell_lines(nb, text: str | None = None) -> list[int]:
    """1-based ``.md`` line of each code cell's first source line (after the directive
    and its ``:key:`` option lines), in order; [] when the notebook has no source map."""
    starts = [nb.metadata.get("source_map", [])[i] for i, c in enumerate(nb.cells)
              if c.cell_type == "code"] if nb.metadata.get("source_map") else []
    if text is None:
        return starts
    lines = text.splitlines()
    out = []
    for start in starts:
        n = start  # the directive's line (1-based); options follow it
        if n < len(lines) and lines[n].strip() == "---":   # options as a YAML block
            n += 1
            while n < len(lines) and lines[n].strip() != "---":
                n += 1
            n += 1
        while n < len(lines) and re.match(r"^:[\w-]+:", lines[n]):
            n += 1
        out.append(n)   # the last line before the source: source line k is at n + k
    return out


def place_problems(text: str, nb) -> list[str]:
    """The checks of this section that read the chapter's text: solutions left open."""
    return solution_problems(text)


# --- prose numbers are witnessed (issue 53, item 2) -------------------------------------

#: A number in a lesson sentence must appear in the code of a code cell within this many
#: code cells before or after it (or be glued, or allowlisted).
NUMBER_REACH = 3
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
#: A number in prose: 65,519 / 65519 / 0.5 / 1e-3 / 2⁶³ / 10⁻³ (with its sign: −1, -1).
_PROSE_NUMBER = re.compile(
    r"(?<![\w.,])(?:[−-](?=\d))?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?"
    r"(?:[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?(?![\w]|\.\d)")
#: A number in code: 65519 / 65_519 / 0.5 / 1e-3 / 2**63 / 0x10.
_CODE_NUMBER = re.compile(r"(?<![\w.])(?:0x[0-9a-fA-F]+|\d[\d_]*(?:\.\d*)?(?:e[+-]?\d+)?)"
                          r"(?:\s*\*\*\s*-?\d+)?(?![\w])")
#: Not results: a release (2.10.0, torch 2.8), a section or step reference, a year, a width.
_NOT_RESULT = re.compile(
    r"\b\d+\.\d+(?:\.\d+)?\s*(?:–|-)\s*\d+\.\d+(?:\.\d+)?"          # 2.8–2.15
    r"|\b\d+\.\d+\.\d+\b"                                         # 2.10.0
    r"|(?:torch|PyTorch|NumPy|Python|release|releases|version|versions|standard|JAX|CUDA"
    r"|Jupyter Book|MyST)\s+(?:\d+(?:\.\d+)*)(?:\s*(?:–|-|to|and|or|,)\s*\d+(?:\.\d+)*)*"
    r"|(?:§|[Ss]ections?|[Cc]hapters?|[Ss]teps?|[Ee]xercises?|[Pp]arts?|[Ll]ines?|[Ff]igures?"
    r"|[Tt]ables?|[Ii]ssues?|PR|NEP|#)\s*\d+(?:\.\d+)*(?:(?:,\s*|\s+and\s+|\s*[–-]\s*)\d+)*"
    r"|\bx86-64\b|\b\d+-bit\b"
    r"|\b(?:19|20)\d\d\b")
_ALWAYS_OK = {0, 1, 2}


def _number_value(token: str):
    """The value of a prose or code number token as a Fraction (``a**b`` evaluated), or None."""
    from fractions import Fraction

    t = token.replace("−", "-").replace(",", "").replace("_", "").replace(" ", "")
    sup = re.search(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+$", t)
    if sup:
        t = t[:sup.start()] + "**" + sup.group(0).translate(_SUPERSCRIPT)
    try:
        if "**" in t:
            base, _, exp = t.partition("**")
            b, e = Fraction(base), int(exp)
            if abs(e) > 4096 or (b == 0 and e < 0):
                return None
            return b ** e
        if t.lower().startswith(("0x", "-0x")):
            return Fraction(int(t, 16))
        return Fraction(t)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def _prose_of(line: str) -> str:
    """A prose line less what is not a sentence's own number: code spans and roles
    (``{glue:text}`name``` is witnessed by its fence), math, link targets, HTML."""
    line = re.sub(r"(`+).+?\1", " ", line)                 # code spans, roles' targets
    line = re.sub(r"\{[\w:-]+\}", " ", line)               # role names
    line = re.sub(r"\$\$.+?\$\$|\$[^$\s][^$]*?\$", " ", line)   # inline math
    line = re.sub(r"\]\([^)]*\)", "]", line)               # link targets
    line = re.sub(r"<[^>]+>", " ", line)                   # HTML tags
    return _NOT_RESULT.sub(" ", line)


def _allowed_numbers(text: str) -> tuple[set, list[str]]:
    """The chapter's ``tensor-fences: {numbers-ok: {"65519": "why"}}`` and what is wrong with it."""
    from .chapter import front_matter

    meta = front_matter(text).get("tensor-fences")
    entries = meta.get("numbers-ok") if isinstance(meta, dict) else None
    if not entries:
        return set(), []
    if not isinstance(entries, dict):
        return set(), ["front matter: tensor-fences numbers-ok must map each number to its "
                       "reason, e.g. {\"32\": \"the bits of float32, a dtype's name\"}"]
    allowed, problems = set(), []
    for number, reason in entries.items():
        value = _number_value(str(number))
        if value is None:
            problems.append(f"front matter: numbers-ok {number!r} is not a number")
            continue
        words = re.findall(r"[A-Za-z]{2,}", str(reason or ""))
        placeholder = re.search(r"\b(?:todo|fixme|tbd|xxx+|placeholder|reason|because)\b",
                                str(reason or ""), re.I)
        if len(words) < 3 or (placeholder and len(words) < 4):
            problems.append(f"front matter: numbers-ok {number!r}: the reason {reason!r} says "
                            "nothing; say why this number is not a result a fence computes")
            continue
        allowed.add(value)
    return allowed, problems


def prose_numbers(text: str) -> tuple[list[str], list[tuple[int, str, object, int, int]]]:
    """The front matter's problems, and each number in a lesson sentence that no code cell
    nearby witnesses: ``(line, number, value, first, end)``, where code cells ``first`` to
    ``end - 1`` (in order, from 0) are those within ``NUMBER_REACH`` of the sentence. The
    plugin looks for the rest in those cells' outputs (``number_problems``)."""
    allowed, problems = _allowed_numbers(text)
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":   # the front matter
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                start = i + 1
                break
    cells: list[set] = []                 # the values in each code cell's code
    prose: list[tuple[int, int, str]] = []  # (line, code cells before it, prose)
    fence, body, in_math = None, None, False
    for n in range(start, len(lines)):
        line = lines[n]
        m = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if fence is None and m:
            fence = m.group(1)
            body = [] if m.group(2).startswith("{code-cell}") else None
            continue
        if fence is not None:
            if line.strip() == fence:
                if body is not None:
                    cells.append(numbers_in("\n".join(body)))
                fence, body = None, None
            elif body is not None:
                body.append(line)
            continue
        stripped = line.strip()
        if stripped.startswith("$$"):
            in_math = not (in_math or stripped.count("$$") >= 2 and len(stripped) > 2)
            continue
        if in_math or not stripped or (stripped.startswith(("#", "%", ":", "<!--", "+++", "|"))
                                       and not stripped.startswith("| ")):
            continue
        prose.append((n + 1, len(cells), _prose_of(line)))
    pending = []
    for n, before, sentence in prose:
        first, end = max(0, before - NUMBER_REACH), min(len(cells), before + NUMBER_REACH)
        near = set().union(*cells[first:end]) if end > first else set()
        for m in _PROSE_NUMBER.finditer(sentence):
            value = _number_value(m.group(0))
            if value is None or abs(value) in _ALWAYS_OK or value in allowed:
                continue
            if value in near or -value in near:
                continue
            pending.append((n, m.group(0), value, first, end))
    return problems, pending


def numbers_in(code_or_output: str) -> set:
    """Every number's value in code or in a shown output (65_519, 2**63, 1.0010e+00, 65504.)."""
    return {v for v in (_number_value(t.group(0)) for t in _CODE_NUMBER.finditer(code_or_output))
            if v is not None}


def number_problems(text: str, outputs: list[set] | None = None) -> list[str]:
    """A number in a lesson sentence that no fence nearby witnesses, one line a number.

    Witnessed: the same value (65,519 = 65519 = 65_519; 2⁶³ = ``2**63``) appears in the
    code, or (``outputs``: the values each code cell showed, from the run) in the shown
    output, of a code cell at most ``NUMBER_REACH`` code cells before or after the
    sentence, or the sentence glues it (``{glue:text}``). Not checked: code spans, code
    blocks, math, link targets, HTML, headings, directive options, comments, and numbers
    that are not results (0, 1, 2, years, releases, section/step/line references, the
    digits of dtype names, and the chapter's own ``numbers-ok`` with a reason each)."""
    problems, pending = prose_numbers(text)
    for n, token, value, first, end in pending:
        if outputs is not None:
            near = set().union(*outputs[first:end]) if end > first else set()
            if value in near or -value in near:
                continue
        problems.append(f"line {n}: the number {token} is in no code cell's code or output "
                        f"within {NUMBER_REACH} cells of it: glue it from the fence that "
                        "computes it, show it, or (not a result) list it in the front matter's "
                        "tensor-fences numbers-ok with its reason")
    return problems


def _bare_show(source: str) -> bool:
    """``fences.show()`` with no argument in ``source``."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and _called(n) == "show" and not n.args and not n.keywords
               for n in ast.walk(tree))


#: The keys a chapter's ``tensor-fences`` front matter may have, and the forms there are.
META_KEYS = {"form", "numbers-ok"}
FORMS = {3}


def meta_problems(meta) -> list[str]:
    """What is wrong with a chapter's ``tensor-fences`` front matter (None: absent)."""
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return [f"front matter: tensor-fences is {meta!r}, not a mapping such as {{form: 3}}"]
    problems = [f"front matter: tensor-fences has the key {key!r}, which no tool reads (the keys "
                f"are {', '.join(sorted(META_KEYS))}): a misspelt form leaves the lesson's rules off"
                for key in meta if key not in META_KEYS]
    if "form" in meta and (type(meta["form"]) is not int or meta["form"] not in FORMS):
        problems.append(f"front matter: tensor-fences form is {meta['form']!r}; the forms are "
                        f"{', '.join(map(str, sorted(FORMS)))} (a number)")
    return problems


def quiz_problems(nb, lines: list[int] | None = None) -> list[str]:
    """A quick check whose key is a literal (not computed by torch from the question's code),
    and a quick-check name used twice in the chapter (the page would show one of them)."""
    problems, seen = [], {}
    code = [c for c in nb.cells if c.cell_type == "code"]
    for index, cell in enumerate(code):
        where = f"line {lines[index]}" if lines and index < len(lines) else f"code cell {index}"
        try:
            tree = ast.parse(_strip_magics(cell.source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _called(node) == "quiz"):
                continue
            args = list(node.args) + [None] * 3
            answer = args[2] or next((k.value for k in node.keywords if k.arg == "answer"), None)
            name = args[0] or next((k.value for k in node.keywords if k.arg == "name"), None)
            if answer is not None:
                try:
                    ast.literal_eval(answer)
                    problems.append(f"{where}: the quick check's answer is the literal "
                                    f"{ast.unparse(answer)}: compute it with torch from the "
                                    "question's code, and assert it equals the literal after")
                except ValueError:
                    pass
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if name.value in seen:
                    problems.append(f"{where}: the quick check {name.value!r} is also at "
                                    f"{seen[name.value]}: names are unique in a chapter")
                seen.setdefault(name.value, where)
    return problems
