"""The book standard as far as a machine can check it (book/standard.md), run through
``fencecheck.chapter`` by both ``make test`` and ``make book``: each ``*_problems`` function returns one
line per problem. Also here: what of a fence the page shows, folds and counts."""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import re
import unicodedata
from fractions import Fraction
from itertools import takewhile

MAX_COLUMNS = 88
_RAISE = "assert the raise with `with fences.raises(...)` instead"
FORBIDDEN_TAGS = {
    "raises-exception": f"the raises-exception tag passes a cell whether or not it raises; {_RAISE}",
    "nbval-raises-exception": f"nbval passes such a cell whether or not it raises; {_RAISE}",
    "nbval-skip": "a skipped fence cannot fail; gate it with `fences.needs(...)` instead",
}
#: The fold rule's one home: a fence tagged ``proof`` is folded, code and output, behind its
#: ``# Proves:`` text on the site, in the downloaded notebook and so in the PDF.
PROOF_TAG = "proof"
#: Tags that keep a cell's code off the page until a click (or off it entirely).
FOLDING_TAGS = {PROOF_TAG, "hide-input", "hide-cell", "remove-input", "remove-cell"}
#: No code cell shows more lines than this without a click (the limit's one home).
MAX_VISIBLE_LINES = 15
#: A fence is a claim on the page: it may be folded, never removed from it.
REMOVING_TAGS = {"remove-cell", "remove-input"}
#: The reading time: prose words at READ_WPM a minute, each visible code line CODE_LINE_S seconds.
READ_WPM, CODE_LINE_S = 200, 6
#: A proof's caption, the ``# Proves:`` text shown on the fold: one line at 1400 px.
MAX_CAPTION = 110
#: The calls that show something on the page (a teaching part must make one).
SHOWING = {"show", "raises", "warns", "table", "print", "display"}

FENCE_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PROVES = re.compile(r"^\s*#\s*Proves:", re.M)
CITED = re.compile(r"^(:{3,}|`{3,})\{cited\}(.*)$")
EXERCISE = re.compile(r"^(:{3,}|`{3,})\{exercise\}")
_CODE_CELL = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")
_SOLUTION = re.compile(r"^(:{3,}|`{3,})\{(solution(?:-start)?)\}\s*(\S*)", re.M)
_SOLUTION_END = re.compile(r"^(:{3,}|`{3,})\{solution-end\}", re.M)
#: A ``# Proves:`` text followed by a blank ``#`` line: where a sentence without a full stop is cut.
CUT_CAPTION = re.compile(r"^\s*#\s*Proves:.*\n(?:\s*#\s?(?![A-Z][\w ]{0,30}:)\S.*\n)*\s*#\s*$", re.M)
#: ``# Records: name: what it is``: the plain words for a value a fence observes. A comment, so
#: rewording it keeps the fence's code hash (``fencecheck.record.code_hash``).
RECORDS = re.compile(r"^\s*#\s*Records:\s*([\w.\-]+):\s+(.+?)\s*$")
#: ``# Fix:`` in a fence that proves an error: what a reader who meets it does.
FIX = re.compile(r"^\s*#\s*Fix:\s*(.+?)\s*$")


def proof_output_shown(lesson: bool, has_table: bool) -> bool:
    """The fold rule's one exception: off a lesson, a proof that prints a table keeps it shown."""
    return has_table and not lesson


def reading_minutes(words: int, code_lines: int) -> float:
    return words / READ_WPM + code_lines * CODE_LINE_S / 60


def visible_code(cell) -> str:
    """What of a code cell the page shows unclicked: a fence's teaching part, an unfolded cell whole."""
    tags = set(cell.metadata.get("tags", []))
    if tags & FOLDING_TAGS:
        return ""
    return (lesson_parts(cell.source)[0] if "fence" in tags else "") or cell.source


def fence_id(cell) -> str | None:
    value = cell.metadata.get("fence-id")
    return str(value) if value is not None else None


def is_fence(cell) -> bool:
    return cell.cell_type == "code" and "fence" in cell.metadata.get("tags", [])


def proves(source: str) -> str:
    """A fence's ``# Proves:`` text and the comment lines continuing it (up to a blank one or a label)."""
    lines = source.splitlines()
    for n, line in enumerate(lines):
        if PROVES.match(line):
            more = (c.lstrip()[1:].strip() if c.lstrip().startswith("#") else "" for c in lines[n + 1:])
            more = takewhile(lambda text: text and not re.match(r"^[A-Z][\w ]{0,30}:", text), more)
            return " ".join(w for w in [line.split("Proves:", 1)[1].strip(), *more] if w)
    return ""


def _indented(first: str, rest: list[str]) -> str:
    """``first`` and the words of the comment lines indented under it (``#   more``)."""
    more = takewhile(bool, (re.match(r"^\s*#\s{3,}(\S.*?)\s*$", line) for line in rest))
    return " ".join([first, *(c.group(1) for c in more)])


def described(source: str) -> dict[str, str]:
    """The ``# Records:`` descriptions of a fence: value name -> plain words."""
    lines = source.splitlines()
    return {m.group(1): _indented(m.group(2), lines[n + 1:]) for n, m in enumerate(map(RECORDS.match, lines)) if m}


def fix(source: str) -> str:
    lines = source.splitlines()
    return next((_indented(m.group(1), lines[n + 1:]) for n, m in enumerate(map(FIX.match, lines)) if m), "")


def _strip_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


@functools.lru_cache(maxsize=1024)
def _nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of ``source`` parsed (IPython magics aside), the module first; () when it does not parse."""
    try:
        return tuple(ast.walk(ast.parse(_strip_magics(source))))
    except SyntaxError:
        return ()


def _calls(source: str, names: set[str]) -> list[ast.Call]:
    """The calls of a function or method named one of ``names``."""
    return [n for n in _nodes(source)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) in names]


def _calls_any(source: str, names: set[str]) -> bool:
    return bool(_calls(source, names))


def _asserts(source: str) -> int:
    return sum(isinstance(n, ast.Assert) for n in _nodes(source))


def names_value(source: str, name: str) -> bool:
    """Does an ``observe`` call in ``source`` name ``name`` (or an f-string with letters that matches it)?"""
    for node in _calls(source, {"observe"}):
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and first.value == name:
            return True
        if isinstance(first, ast.JoinedStr):
            parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in first.values]
            fixed = "".join(v.value for v in first.values if isinstance(v, ast.Constant))
            if re.search(r"[A-Za-z]", fixed) and re.fullmatch("".join(parts), name):
                return True
    return False


def lesson_parts(source: str) -> tuple[str, str]:
    """A lesson fence's (teaching part, check part): the lines before its ``# Proves:`` line, shown,
    and those from it on, folded behind "✓ N checks"; ("", source) when nothing comes before it."""
    lines = source.splitlines()
    n = next((n for n, line in enumerate(lines) if PROVES.match(line)), None)
    teaching = "\n".join(lines[:n]).rstrip() if n is not None else ""
    return (teaching, "\n".join(lines[n:]).strip("\n")) if teaching.strip() else ("", source)


def check_count(source: str) -> int:
    """What "✓ N checks" counts: ``assert`` statements and raises/warns/prove/quiz calls."""
    return _asserts(source) + len(_calls(source, {"raises", "warns", "prove", "quiz"}))


def has_check(source: str) -> bool:
    """An ``assert`` or a raises/warns/prove call in the code (not in a comment or a string)."""
    return bool(_asserts(source) or _calls(source, {"raises", "warns", "prove"}))


def checks_caption(count: int, quiz: bool = False) -> tuple[str, str]:
    """The check fold's (summary while folded, while open); a quick check's fold holds its answer."""
    if quiz:
        return "The answer and how it is checked (answer first)", "Hide the answer"
    noun = "check" if count == 1 else "checks"
    return f"✓ {count} {noun}", f"✓ {count} {noun}: hide them"


def fold_caption(source: str) -> tuple[str, str]:
    """The proof fold's (summary while folded, while open)."""
    claim = proves(source).rstrip(".") or "the claim above"
    return f"Proof: {claim}. Show the code", f"Proof: {claim}. Hide the code"


def _cannot_fail(test: ast.expr) -> bool:
    """``True``, a non-empty literal, or ``X == X`` (is, <=, >=) without a call (``f() == f()`` can fail)."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return bool(getattr(test, "elts", None) or getattr(test, "keys", None))
    return (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.Is, ast.LtE, ast.GtE))
            and ast.dump(test.left) == ast.dump(test.comparators[0])
            and not any(isinstance(n, ast.Call) for n in ast.walk(test.left)))


def tautologies(source: str) -> list[str]:
    return [ast.unparse(n.test) for n in _nodes(source) if isinstance(n, ast.Assert) and _cannot_fail(n.test)]


def _where(lines: list[int], index: int, cell=None) -> str:
    """How a message names code cell ``index``: its ``.md`` line, and its fence id if it has one."""
    where = f"line {lines[index]}" if index < len(lines) else f"code cell {index}"
    ident = fence_id(cell) if cell is not None else None
    return f"{where} (fence {ident})" if ident else where


def cell_problems(nb, text: str) -> list[str]:
    """Problems of the chapter's code cells (``text``: the chapter's, to place a syntax error)."""
    problems = []
    starts = cell_lines(nb)
    bases = cell_lines(nb, text)
    for index, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        source = cell.source
        tags = cell.metadata.get("tags", [])
        ident = fence_id(cell)
        shown = len(visible_code(cell).rstrip().splitlines())
        found = [f"tag {tag!r}: {FORBIDDEN_TAGS[tag]}" for tag in tags if tag in FORBIDDEN_TAGS]
        found += [f"line {n} is {len(line)} columns, over {MAX_COLUMNS}: it would wrap or scroll on the page"
                  for n, line in enumerate(source.splitlines(), 1) if len(line) > MAX_COLUMNS]
        if ident is not None and "fence" not in tags:
            found.append("has a fence-id but no 'fence' tag")
        if shown > MAX_VISIBLE_LINES and not FOLDING_TAGS & set(tags):
            found.append(f"{shown} lines shown on the page, over {MAX_VISIBLE_LINES}: shorten it, or fold it "
                         "(a fence: tag 'proof'; another cell: 'hide-input')")
        if PROOF_TAG in tags and "fence" not in tags:
            found.append(f"tagged {PROOF_TAG!r} but not 'fence': only a fence is a proof (fold another cell "
                         "with 'hide-input')")
        if re.search(r"\bfencecheck\b", source):
            found.append("imports fencecheck, the verifier: a chapter imports the runtime (fences) only; the "
                         "cache key and the shipped wheel hold nothing else")
        found += [f"'# Records: {name}:' describes a value the cell never names (fences.observe(\"...\", value))"
                  for name in described(source) if not names_value(source, name)]
        if "fence" in tags:
            found += _fence_problems(source, tags, ident, bases[index] if index < len(bases) else None)
        problems += [f"{_where(starts, index, cell)}: {p}" for p in found]
    return problems


def _fence_problems(source: str, tags: list[str], ident: str | None, base: int | None) -> list[str]:
    """The rules of a fence: on the page, with an id, a whole ``# Proves:`` sentence and a check that can fail."""
    found = [f"a fence tagged {tag!r} would vanish from the page; fold it with {PROOF_TAG!r} instead"
             for tag in sorted(REMOVING_TAGS & set(tags))]
    if ident is None:
        found.append("tagged 'fence' without a `:fence-id:` (a short id, unique in the book, that keys its results)")
    elif id_problem(ident):
        found.append(id_problem(ident))
    caption = proves(source)
    if not PROVES.search(source):
        found.append("tagged 'fence' but has no '# Proves:' line saying what it proves")
    elif CUT_CAPTION.search(source) and not re.search(r"[.!?]\)?$", caption):
        found.append("the '# Proves:' sentence stops at a blank `#` line without a full stop: the fold and the "
                     f"errors page show it cut ({caption[-40:]!r}); finish the sentence before it")
    broken = syntax_problem(source, base)
    if broken or not has_check(source):
        found.append(broken or "tagged 'fence' but has no assert, raises(), warns() or prove() call, so it cannot fail")
    return found + [f"`assert {text}` cannot fail" for text in tautologies(source)]


def text_problems(text: str) -> list[str]:
    """Problems in the Markdown: cited blocks, code cells a block swallows, exercises never proven."""
    problems = []
    lines = text.splitlines()
    for n, m in enumerate(map(CITED.match, lines), 1):
        if not m:
            continue
        options = _options(lines, n)
        if "`" in m.group(2):
            problems.append(f"line {n}: {{cited}} title with a backtick: MyST renders the whole block as raw text")
        if not re.match(r"https?://\S+", options.get("source", "")):
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
            problems.append(f"line {n}: a code cell inside the plain code block opened on line {fence[1]} (a stray "
                            "fence?): make book shows it as text, make test runs it")
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
            problems.append(f"line {n}: a code cell inside the {colons}{{{name}}} block of line {start}: it would "
                            "be shown as text in the box and never run; close the block before the cell")
    exercises = [(n, _options(lines, n).get("label")) for n, line in enumerate(lines, 1) if EXERCISE.match(line)]
    problems += [f"line {n}: {{exercise}} without a :label:" for n, label in exercises if not label]
    proven = _proven_solutions(lines)
    return problems + [f"line {n}: exercise {label!r} has no solution with a fence calling fences.grade.prove (its "
                       "check is never shown to pass and fail)"
                       for label, n in {label: n for n, label in exercises if label}.items() if label not in proven]


def _options(lines: list[str], n: int) -> dict[str, str]:
    """The ``:key: value`` lines right after the directive on line ``n`` (1-based)."""
    found = takewhile(bool, (re.match(r"^:([\w-]+):\s*(.*)$", line) for line in lines[n:]))
    return {m.group(1): m.group(2).strip() for m in found}


def _proven_solutions(lines: list[str]) -> set[str]:
    """Labels whose solution (a directive, or solution-start ... solution-end) calls prove(."""
    proven, current = set(), None
    for line in lines:
        m = _SOLUTION.match(line)
        if m and m.group(3):
            current = m.group(3)
        elif _SOLUTION_END.match(line):
            current = None
        elif current and re.search(r"\bprove\(", line):
            proven.add(current)
    return proven


def _scan(lines: list[str], start: int = 0) -> tuple[list[tuple[int, int, str]], list[str]]:
    """The lines outside code blocks as (index, code cells before it, line), and each code cell's code."""
    prose, cells, fence, body = [], [], None, None
    for n in range(start, len(lines)):
        line = lines[n]
        m = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if fence is None and m:
            fence = m.group(1)
            body = [] if m.group(2).startswith("{code-cell}") else None
        elif fence is None:
            prose.append((n, len(cells), line))
        elif line.strip() == fence:
            if body is not None:
                cells.append("\n".join(body))
            fence = None
        elif body is not None:
            body.append(line)
    return prose, cells


def exponent_problems(text: str) -> list[str]:
    """``**`` between digits in prose (outside code blocks, code cells and code spans)."""
    return [f"line {n + 1}: `**` as an exponent in prose renders as bold: write 2⁶³ or a code span"
            for n, _, line in _scan(text.splitlines())[0] if re.search(r"\d\*\*\d", re.sub(r"(`+).+?\1", "", line))]


def lesson_problems(nb, lines: list[int] | None = None) -> list[str]:
    """The lesson form of standard 3: every lesson fence has a teaching part that shows something and
    asserts nothing; a proof's caption is one short line; no visible cell uses a name defined only in a
    folded or removed cell (a reader typing the visible cells would get a NameError)."""
    problems = []
    seen_visible: set[str] = set()
    hidden: dict[str, str] = {}  # a name bound only out of sight -> where
    in_solution = False
    code_index = -1
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            in_solution = (in_solution or bool(_SOLUTION.search(cell.source))) and not _SOLUTION_END.search(cell.source)
            continue
        if cell.cell_type != "code":
            continue
        code_index += 1
        where = _where(lines or [], code_index, cell)
        tags = set(cell.metadata.get("tags", []))
        visible, folded = ("", cell.source) if in_solution or tags & FOLDING_TAGS else (cell.source, "")
        fence = "fence" in tags and not in_solution   # a solution is collapsed: not the lesson's
        caption = proves(cell.source) if fence else ""
        if fence and PROOF_TAG in tags and len(caption) > MAX_CAPTION:
            problems.append(f"{where}: the proof's caption is {len(caption)} characters, over {MAX_CAPTION}: "
                            "one plain line on the fold; put the detail in comments inside")
        elif fence and PROOF_TAG not in tags:
            visible, folded = lesson_parts(cell.source)
            problem = _teaching_problem(visible, folded, cell.source)
            if problem:
                problems.append(f"{where}: {problem}")
        if visible:
            bound, used = _names(visible)
            problems += [f"{where}: uses `{name}`, defined only in {hidden[name]} (folded or removed): a reader "
                         "typing the visible cells gets a NameError; define it in a visible cell"
                         for name in sorted(used - seen_visible - bound - set(dir(builtins))) if name in hidden]
            seen_visible |= bound
        for name in _names(folded)[0] - seen_visible:
            hidden.setdefault(name, where)
    return problems


def _teaching_problem(visible: str, folded: str, source: str) -> str | None:
    """What is wrong with a lesson fence's split into a teaching part and a check part, if anything."""
    if not visible:
        return "a lesson fence with no teaching part: put the lines a reader types before the `# Proves:` line"
    if _asserts(visible):
        return ("an assert before the `# Proves:` line: the teaching part shows, the check part (from "
                "`# Proves:` on) asserts")
    if any(not c.args and not c.keywords for c in _calls(visible, {"show"})):
        return "`fences.show()` with nothing to show: give it the values the sentence reads off"
    if not (_calls(visible, SHOWING) or _calls(folded, {"quiz"})):
        return "the teaching part shows nothing: end it with fences.show(...), a raises block or a table"
    body = _nodes(source)[0].body if _nodes(source) else []
    last = source.rstrip().splitlines()[-1].split("#", 1)[0].rstrip() if body else ""
    if body and isinstance(body[-1], ast.Expr) and not last.endswith(";"):   # IPython would display its value
        return ("the check part ends in an expression, whose value would print under the teaching part's output: "
                "assign it (`_ = ...`) or end the line with `;`")
    return None


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names bound, names read) at any depth of ``source``; empty when it does not parse."""
    bound, used = set(), set()
    for node in _nodes(source):
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
            here = f"{name} line {lines[i]}" if i < len(lines) else name
            if ident in seen:
                problems.append(f"fence-id {ident!r} is used in {seen[ident]} and in {here}: ids must be unique "
                                "in the book")
            elif ident is not None:
                seen[ident] = here
    return problems


def id_problem(ident: str) -> str | None:
    """Why ``ident`` is not a fence id (naming a non-ASCII character by code point), or None."""
    if FENCE_ID.match(ident):
        return None
    odd = [f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}) at position {i}"
           for i, c in enumerate(ident) if not c.isascii()]
    if odd:
        return (f"fence-id {ident!r} has characters that are not ASCII: {', '.join(odd)}; an id is lower-case "
                "ASCII letters, digits and '-'")
    return f"fence-id {ident!r} is not lower-case words joined by '-' (ASCII letters and digits)"


def solution_problems(text: str) -> list[str]:
    """A solution without ``:class: dropdown``: shown open on the page, under its question."""
    lines = text.splitlines()
    return [f"line {n}: {{{m.group(2)}}} {m.group(3)} without `:class: dropdown`: the solution would be shown "
            "open on the page, under its question" for n, m in enumerate(map(_SOLUTION.match, lines), 1)
            if m and "dropdown" not in _options(lines, n).get("class", "").split()]


def syntax_problem(source: str, base: int | None = None) -> str | None:
    """A code cell's SyntaxError (magics aside), at ``.md`` line base + k when ``base`` is known; or None."""
    try:
        ast.parse(_strip_magics(source))
    except SyntaxError as exc:
        where = f"line {base + (exc.lineno or 1)}" if base else f"line {exc.lineno or 1} of the cell"
        return f"SyntaxError: {exc.msg} (at {where})" + (f": {exc.text.strip()}" if (exc.text or "").strip() else "")
    return None


def cell_lines(nb, text: str | None = None) -> list[int]:
    """The ``.md`` line of each code cell's directive, in order ([] without a source map); with the
    chapter's ``text``, the line before its first source line (past the options)."""
    source_map = nb.metadata.get("source_map") or []
    starts = [source_map[i] for i, c in enumerate(nb.cells) if c.cell_type == "code"] if source_map else []
    if text is None:
        return starts
    lines = text.splitlines()
    out = []
    for n in starts:   # the directive's line (1-based) is the index of the line after it
        if n < len(lines) and lines[n].strip() == "---":   # options as a YAML block
            n = next((k for k in range(n + 1, len(lines)) if lines[k].strip() == "---"), len(lines)) + 1
        while n < len(lines) and re.match(r"^:[\w-]+:", lines[n]):
            n += 1
        out.append(n)
    return out


# --- prose numbers are witnessed (issue 53, item 2) -------------------------------------

#: A number in a lesson sentence must appear in a code cell within this many code cells of it.
NUMBER_REACH = 3
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
#: A number in prose: 65,519 / 65519 / 0.5 / 1e-3 / 2⁶³ / 10⁻³ (with its sign: −1, -1).
_PROSE_NUMBER = re.compile(r"(?<![\w.,])(?:[−-](?=\d))?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?"
                           r"(?:[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?(?![\w]|\.\d)")
#: A number in code: 65519 / 65_519 / 0.5 / 1e-3 / 2**63 / 0x10.
_CODE_NUMBER = re.compile(r"(?<![\w.])(?:0x[0-9a-fA-F]+|\d[\d_]*(?:\.\d*)?(?:e[+-]?\d+)?)(?:\s*\*\*\s*-?\d+)?(?![\w])")
#: Not results: a release (2.10.0, torch 2.8), a section or step reference, a year, a width.
_NOT_RESULT = re.compile(
    r"\b\d+\.\d+(?:\.\d+)?\s*(?:–|-)\s*\d+\.\d+(?:\.\d+)?|\b\d+\.\d+\.\d+\b"   # 2.8–2.15, 2.10.0
    r"|(?:torch|PyTorch|NumPy|Python|release|releases|version|versions|standard|JAX|CUDA|Jupyter Book|MyST)"
    r"\s+(?:\d+(?:\.\d+)*)(?:\s*(?:–|-|to|and|or|,)\s*\d+(?:\.\d+)*)*"
    r"|(?:§|[Ss]ections?|[Cc]hapters?|[Ss]teps?|[Ee]xercises?|[Pp]arts?|[Ll]ines?|[Ff]igures?|[Tt]ables?|[Ii]ssues?"
    r"|PR|NEP|#)\s*\d+(?:\.\d+)*(?:(?:,\s*|\s+and\s+|\s*[–-]\s*)\d+)*|\bx86-64\b|\b\d+-bit\b|\b(?:19|20)\d\d\b")
_ALWAYS_OK = {0, 1, 2}


def _number_value(token: str) -> Fraction | None:
    """The value of a prose or code number token (``a**b`` evaluated), or None."""
    t = token.replace("−", "-").replace(",", "").replace("_", "").replace(" ", "")
    sup = re.search(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+$", t)
    if sup:
        t = t[:sup.start()] + "**" + sup.group(0).translate(_SUPERSCRIPT)
    try:
        if "**" in t:
            base, _, exp = t.partition("**")
            b, e = Fraction(base), int(exp)
            return None if abs(e) > 4096 or (b == 0 and e < 0) else b ** e
        return Fraction(int(t, 16)) if t.lower().startswith(("0x", "-0x")) else Fraction(t)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def _prose_of(line: str) -> str:
    """A prose line less code spans and roles (glued values), math, link targets, HTML and non-results."""
    for pattern, by in ((r"(`+).+?\1", " "), (r"\{[\w:-]+\}", " "), (r"\$\$.+?\$\$|\$[^$\s][^$]*?\$", " "),
                        (r"\]\([^)]*\)", "]"), (r"<[^>]+>", " ")):
        line = re.sub(pattern, by, line)
    return _NOT_RESULT.sub(" ", line)


def allowed_numbers(text: str) -> tuple[set, list[str]]:
    """The chapter's ``tensor-fences: {numbers-ok: {"65519": "why"}}`` and what is wrong with it."""
    from .chapter import front_matter

    meta = front_matter(text).get("tensor-fences")
    entries = meta.get("numbers-ok") if isinstance(meta, dict) else None
    if not entries:
        return set(), []
    if not isinstance(entries, dict):
        return set(), ["front matter: tensor-fences numbers-ok must map each number to its reason, e.g. "
                       "{\"32\": \"the bits of float32, a dtype's name\"}"]
    allowed, problems = set(), []
    for number, reason in entries.items():
        value = _number_value(str(number))
        words = re.findall(r"[A-Za-z]{2,}", str(reason or ""))
        placeholder = re.search(r"\b(?:todo|fixme|tbd|xxx+|placeholder|reason|because)\b", str(reason or ""), re.I)
        if value is None:
            problems.append(f"front matter: numbers-ok {number!r} is not a number")
        elif len(words) < 3 or (placeholder and len(words) < 4):
            problems.append(f"front matter: numbers-ok {number!r}: the reason {reason!r} says nothing; say why "
                            "this number is not a result a fence computes")
        else:
            allowed.add(value)
    return allowed, problems


def numbers_in(code_or_output: str) -> set:
    """Every number's value in code or in a shown output (65_519, 2**63, 1.0010e+00, 65504.)."""
    return {v for v in map(_number_value, _CODE_NUMBER.findall(code_or_output)) if v is not None}


def number_problems(text: str, outputs: list[set] | None = None) -> list[str]:
    """The front matter's ``numbers-ok`` problems, and each number in a lesson sentence that the code or
    (``outputs``: the values each code cell showed) the output of no code cell within ``NUMBER_REACH``
    witnesses (65,519 = 65519 = 65_519; 2⁶³ = ``2**63``). Glued values, code, math, headings, directive
    options, comments and numbers that are not results (``_ALWAYS_OK``, ``_NOT_RESULT``) are not checked."""
    allowed, problems = allowed_numbers(text)
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":   # after the front matter
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
    prose, code = _scan(lines, start)
    cells = [numbers_in(c) for c in code]
    in_math = False
    for n, before, line in prose:
        stripped = line.strip()
        if stripped.startswith("$$"):
            in_math = not (in_math or stripped.count("$$") >= 2 and len(stripped) > 2)
            continue
        if in_math or not stripped or (stripped.startswith(("#", "%", ":", "<!--", "+++", "|"))
                                       and not stripped.startswith("| ")):
            continue
        first, end = max(0, before - NUMBER_REACH), min(len(cells), before + NUMBER_REACH)
        near = set().union(*cells[first:end], *(outputs or [])[first:end])
        for m in _PROSE_NUMBER.finditer(_prose_of(line)):
            value = _number_value(m.group(0))
            if not (value is None or abs(value) in _ALWAYS_OK or value in allowed or value in near or -value in near):
                problems.append(f"line {n + 1}: the number {m.group(0)} is in no code cell's code or output within "
                                f"{NUMBER_REACH} cells of it: glue it from the fence that computes it, show it, or "
                                "(not a result) list it in the front matter's tensor-fences numbers-ok with its "
                                "reason")
    return problems


#: The keys a chapter's ``tensor-fences`` front matter may have, and the forms there are.
META_KEYS = {"form", "numbers-ok"}
FORMS = {3}


def meta_problems(meta) -> list[str]:
    """What is wrong with a chapter's ``tensor-fences`` front matter (None: absent)."""
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return [f"front matter: tensor-fences is {meta!r}, not a mapping such as {{form: 3}}"]
    problems = [f"front matter: tensor-fences has the key {key!r}, which no tool reads (the keys are "
                f"{', '.join(sorted(META_KEYS))}): a misspelt form leaves the lesson's rules off"
                for key in meta if key not in META_KEYS]
    if "form" in meta and (type(meta["form"]) is not int or meta["form"] not in FORMS):
        problems.append(f"front matter: tensor-fences form is {meta['form']!r}; the forms are "
                        f"{', '.join(map(str, sorted(FORMS)))} (a number)")
    return problems


def quiz_problems(nb, lines: list[int] | None = None) -> list[str]:
    """A quick check whose key is a literal rather than computed, and a quick-check name used twice."""
    problems, seen = [], {}
    for index, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        where = _where(lines or [], index)
        for node in _calls(cell.source, {"quiz"}):
            args = list(node.args) + [None] * 3
            answer = args[2] or next((k.value for k in node.keywords if k.arg == "answer"), None)
            name = args[0] or next((k.value for k in node.keywords if k.arg == "name"), None)
            if answer is not None:
                with contextlib.suppress(ValueError):   # not a literal: computed, as it should be
                    ast.literal_eval(answer)
                    problems.append(f"{where}: the quick check's answer is the literal {ast.unparse(answer)}: "
                                    "compute it with torch from the question's code, and assert it equals the "
                                    "literal after")
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if name.value in seen:
                    problems.append(f"{where}: the quick check {name.value!r} is also at {seen[name.value]}: "
                                    "names are unique in a chapter")
                seen.setdefault(name.value, where)
    return problems
