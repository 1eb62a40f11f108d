"""Mutation operators: where a fence's expectations are, and each one-change copy of it (docs/mutate.md).

Each mutant is the fence's own text with one span replaced, kept only if it parses to the
original AST with the same change made there (``apply``), so the report shows the fence's real lines.
"""
from __future__ import annotations

import ast
import bisect
import copy
import os
import re
from dataclasses import asdict, dataclass, field

#: Positions mutated in one long literal (a sequence, a table's rows).
SAMPLE = 6


@dataclass(frozen=True)
class Edit:
    """One change to a fence's source: the text between two offsets replaced. ``change``
    makes the same change on a copy of the AST: callable(copied_node, copied_tree)."""

    operator: str
    node: ast.AST
    start: int
    end: int
    text: str
    change: object
    alternative: str | None = None   # another text to try, e.g. parenthesised
    lines: tuple | None = None       # (start, end) of whole lines to delete instead, tried first
    row: tuple | None = None         # a dropped row's span: the report shows it


@dataclass
class Mutant:
    """A fence with one expectation changed, and where to find it."""

    chapter: str        # book/views.md
    fence: str          # the fence id
    number: int         # 1.. within the fence
    operator: str
    line: int           # line in the .md file of the first changed source line
    original: str       # the original source line(s) that changed
    mutated: str        # the same line(s) in the mutant ("<row deleted>" for a dropped row)
    source: str = field(repr=False, default="")
    statement: tuple = (0, 0)   # first and last line, in the fence, of the statement changed
    outcome: str = ""   # killed | survived | not-executed | not-reached | timeout | error
    detail: str = ""    # how it was killed (the exception's first line) or why it errored

    def record(self) -> dict:
        out = asdict(self)
        out.pop("source")
        return out


class Source:
    """A fence's text, with conversions from AST positions (UTF-8 byte columns) to offsets."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, byte_col: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode()[:byte_col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


#: Each dtype and its neighbour: the mutant a fence must tell apart.
DTYPE_NEIGHBOUR = {
    "float32": "float64", "float": "float64", "float64": "float32", "double": "float32", "float16": "bfloat16",
    "half": "bfloat16", "bfloat16": "float16", "int64": "int32", "long": "int32", "int32": "int64", "int": "int64",
    "int16": "int32", "short": "int32", "int8": "uint8", "uint8": "int8", "uint16": "uint32", "uint32": "uint64",
    "uint64": "uint32", "bool": "uint8", "complex64": "complex128", "cfloat": "complex128",
    "complex128": "complex64", "cdouble": "complex64", "complex32": "complex64", "chalf": "complex64",
    "float8_e4m3fn": "float8_e5m2", "float8_e5m2": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e5m2fnuz",
    "float8_e5m2fnuz": "float8_e4m3fnuz",
}
#: Names whose attributes are constants, not state: ``torch.float32``, ``math.inf``.
MODULES = {"torch", "np", "numpy", "math", "ml_dtypes", "jnp", "jax", "fractions", "xp"}
#: Builtins that build a value from literals: ``float("nan")``, ``range(3)``.
BUILDERS = {"float", "int", "complex", "tuple", "list", "set", "frozenset", "range",
            "Fraction", "Decimal", "slice", "bytes", "str"}
#: Each exception (or warning) class and siblings that do not catch it.
SIBLINGS = {
    "RuntimeError": ("ValueError", "TypeError"), "ValueError": ("TypeError", "RuntimeError"),
    "TypeError": ("ValueError", "RuntimeError"), "IndexError": ("ValueError", "KeyError"),
    "KeyError": ("IndexError", "ValueError"), "AttributeError": ("TypeError", "ValueError"),
    "NotImplementedError": ("TypeError", "ValueError"), "OverflowError": ("ValueError", "TypeError"),
    "ZeroDivisionError": ("ValueError", "TypeError"), "AssertionError": ("ValueError", "RuntimeError"),
    "LookupError": ("ValueError", "TypeError"), "ArithmeticError": ("ValueError", "TypeError"),
    "UserWarning": ("DeprecationWarning", "FutureWarning"), "DeprecationWarning": ("UserWarning", "FutureWarning"),
    "FutureWarning": ("DeprecationWarning", "UserWarning"), "RuntimeWarning": ("UserWarning", "DeprecationWarning"),
}
#: Calls whose arguments are what a fence expects (by the last part of the dotted name).
EXPECTING_CALLS = {"compare", "prove", "assert_close", "assert_allclose", "assert_equal",
                   "assert_array_equal", "assert_array_almost_equal"}
#: Calls that compare inside an assert: ``assert torch.equal(t, torch.tensor([1, 2]))``.
COMPARING_CALLS = EXPECTING_CALLS | {"equal", "allclose", "isclose", "array_equal",
                                     "isinstance", "issubclass"}
#: Each compare operator: its mutant, its text, and the pattern that finds it in the source.
OPS = {ast.Eq: (ast.NotEq, "==", "=="), ast.NotEq: (ast.Eq, "!=", "!="),
       ast.Lt: (ast.LtE, "<", r"<(?!=)"), ast.LtE: (ast.Lt, "<=", "<="),
       ast.Gt: (ast.GtE, ">", r">(?!=)"), ast.GtE: (ast.Gt, ">=", ">="),
       ast.Is: (ast.IsNot, "is", r"\bis\b(?!\s+not\b)"), ast.IsNot: (ast.Is, "is not", r"\bis\s+not\b"),
       ast.In: (ast.NotIn, "in", r"(?<!not )\bin\b"), ast.NotIn: (ast.In, "not in", r"\bnot\s+in\b")}


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def last_name(call: ast.Call) -> str:
    return dotted(call.func).rsplit(".", 1)[-1]


def literalish(node: ast.AST) -> bool:
    """Is ``node`` built from literals only (a value a fence writes out, not computes)?"""
    if isinstance(node, ast.Dict) and None in node.keys:
        return False
    if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp)):
        return all(literalish(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
    if isinstance(node, ast.Attribute):
        return dotted(node).split(".")[0] in MODULES
    return isinstance(node, ast.Constant) or _builds(node)


def changeable(node: ast.AST) -> bool:
    """Does ``node`` hold a number, bool, dtype or exception class that ``Finder.values`` changes?"""
    if isinstance(node, ast.Constant):
        return type(node.value) in (bool, int, float, complex)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp)):
        return any(changeable(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
    if isinstance(node, ast.Attribute):
        return dotted(node).split(".")[0] in MODULES and node.attr in DTYPE_NEIGHBOUR
    if isinstance(node, ast.Name):
        return node.id in SIBLINGS
    return _builds(node) and any(changeable(a) for a in node.args + [k.value for k in node.keywords])


def _builds(node: ast.AST) -> bool:
    """A call of a module's function or a builtin builder on literals: ``torch.tensor([1])``, ``range(3)``."""
    name = dotted(node.func) if isinstance(node, ast.Call) else ""
    return bool(name) and (name.split(".")[0] in MODULES or name in BUILDERS) and all(
        literalish(a) for a in node.args + [k.value for k in node.keywords])


def sample(items: list, n: int = SAMPLE) -> list:
    """At most ``n`` of ``items``, spread evenly, first and last included."""
    if len(items) <= n:
        return list(items)
    return [items[i] for i in sorted({round(i * (len(items) - 1) / (n - 1)) for i in range(n)})]


def _replace_with(new):
    """A change that puts ``new`` where the node is in its parent."""
    def change(node, tree):
        for parent in ast.walk(tree):
            for name, value in ast.iter_fields(parent):
                if value is node:
                    return setattr(parent, name, copy.deepcopy(new))
                for k, item in enumerate(value if isinstance(value, list) else []):
                    if item is node:
                        value[k] = copy.deepcopy(new)
                        return None
    return change


def _drop(index):
    def change(node, tree):
        if isinstance(node, ast.Dict):
            del node.keys[index], node.values[index]
        else:
            del node.elts[index]
    return change


class Finder:
    """Collects the edits of one fence: the expected positions, then the operators there."""

    def __init__(self, source: str):
        self.src = Source(source)
        self.tree = ast.parse(source)
        self.edits: list[Edit] = []
        self.seen: set[tuple] = set()
        self.expected_names: dict[str, set] = {}   # name -> its loads seen in expected positions
        self.assigned: dict[str, list[ast.AST]] = {}   # name -> values assigned in the fence
        self.loads: dict[str, int] = {}

    def add(self, operator, node, text, change, start=None, end=None, alternative=None):
        s, e = self.src.span(node)
        start, end = (s if start is None else start), (e if end is None else end)
        if (start, end, text) not in self.seen:
            self.seen.add((start, end, text))
            self.edits.append(Edit(operator, node, start, end, text, change, alternative))

    def constant(self, node: ast.AST, in_shape: bool) -> None:
        """A number or bool literal; ``node`` may be ``-literal`` (a UnaryOp)."""
        negative = isinstance(node, ast.UnaryOp)
        v = -node.operand.value if negative else node.value
        text = ast.get_source_segment(self.src.text, node.operand if negative else node) or repr(v)
        if isinstance(v, bool):
            news = [("bool", repr(not v))]
        elif isinstance(v, int):
            news = [("shape" if in_shape else "number", repr(n)) for n in [v + 1] + ([0] if v == 1 else [])]
        else:  # x -> -x, written as the fence wrote x; 0 -> 1; 1 -> 0 too
            news = [("number", t) for t in ([text if negative else f"-{text}"] if v != 0 else [repr(type(v)(1))])
                    + ([repr(type(v)(0))] if v == 1 else [])]
        for operator, new in news:   # parenthesised if it must be
            self.add(operator, node, new, _replace_with(ast.parse(new, mode="eval").body), alternative=f"({new})")

    def attribute(self, node: ast.Attribute) -> None:
        if dotted(node).split(".")[0] in MODULES and node.attr in DTYPE_NEIGHBOUR:
            new, text = DTYPE_NEIGHBOUR[node.attr], self.src.text[slice(*self.src.span(node))]
            self.add("dtype", node, text[: len(text) - len(node.attr)] + new, lambda n, tree: setattr(n, "attr", new))

    def exception(self, node: ast.AST, operator: str) -> None:
        if isinstance(node, ast.Tuple):
            for elt in node.elts:
                self.exception(elt, operator)
        elif isinstance(node, ast.Name) and node.id in SIBLINGS:
            for new in SIBLINGS[node.id]:
                self.add(operator, node, new, lambda n, tree, new=new: setattr(n, "id", new))

    def compare_ops(self, node: ast.Compare) -> None:
        operands = [node.left] + node.comparators
        for i, op in enumerate(node.ops):
            new, _, pattern = OPS[type(op)]

            def change(n, tree, i=i, new=new):
                n.ops[i] = new()
            # the operator's text lies between the two operands; splice only it
            start, end = self.src.span(operands[i])[1], self.src.span(operands[i + 1])[0]
            m = re.search(pattern, self.src.text[start:end])
            if m:
                self.add("compare", node, OPS[new][1], change, start=start + m.start(),
                         end=start + m.end())
            else:  # apply() falls back to the whole comparison, unparsed
                self.add("compare", node, ast.unparse(node), change)

    def drop_row(self, container: ast.AST, index: int) -> None:
        """Delete element ``index`` of a list/tuple (or item of a dict): a table's row."""
        firsts, lasts = (container.keys, container.values) if isinstance(container, ast.Dict) \
            else (container.elts, container.elts)
        row = (self.src.span(firsts[index])[0], self.src.span(lasts[index])[1])
        if index + 1 < len(firsts):          # the row and the separator after it
            start, end = row[0], self.src.span(firsts[index + 1])[0]
        elif index > 0:                      # the last row and the separator before it
            start, end = self.src.span(lasts[index - 1])[1], row[1]
        else:
            start, end = row
        # a row alone on its own lines: deleting those lines keeps the layout
        l0, l1 = self.src.line_of(row[0]), self.src.line_of(row[1])
        before = self.src.text[self.src.starts[l0 - 1]:row[0]]
        after = self.src.text[row[1]:self.src.starts[l1]]
        lines = None
        if not before.strip() and re.fullmatch(r"\s*,?\s*(#.*)?\n?", after):
            lines = (self.src.starts[l0 - 1], self.src.starts[l1])
        self.edits.append(Edit("table-row", container, start, end, "", _drop(index),
                               lines=lines, row=row))

    def values(self, node: ast.AST, in_shape: bool = False) -> None:
        """Every value operator inside an expected expression."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float, complex)):
                self.constant(node, in_shape)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
                node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex):
            self.constant(node, in_shape)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Name):
            if node.id in SIBLINGS:
                self.exception(node, "raises-class")
            else:
                self.expected_names.setdefault(node.id, set()).add(id(node))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            # a tuple of ints is a shape or strides; so is a list given to torch.Size(...)
            shape = in_shape or isinstance(node, ast.Tuple) and bool(node.elts) and all(
                isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
            for elt in sample(node.elts):
                self.values(elt, in_shape=shape)
        elif isinstance(node, ast.Dict):
            for i in sample(list(range(len(node.keys)))):
                if node.keys[i] is not None:
                    self.values(node.keys[i])
                self.values(node.values[i])
        elif isinstance(node, ast.UnaryOp):
            self.values(node.operand)
        elif isinstance(node, ast.BinOp):
            self.values(node.left)
            self.values(node.right)
        elif isinstance(node, ast.Call) and literalish(node):
            shape = last_name(node) in ("Size", "empty", "zeros", "ones", "full", "randn", "rand")
            for arg in node.args:
                self.values(arg, in_shape=shape)
            for kw in node.keywords:
                self.values(kw.value)

    def expected_table(self, node: ast.AST) -> None:
        """An expected value, and each sampled row dropped when it is a table."""
        self.values(node)
        if _is_table(node):
            for i in sample(list(range(_rows(node)))):
                self.drop_row(node, i)

    def asserted(self, test: ast.AST) -> None:
        """The comparisons an assert's test makes, and their literal sides."""
        if isinstance(test, ast.Compare):
            self.compare_ops(test)
            operands = [test.left] + test.comparators
            # the literal side is the expectation; with none, a model like `3 * itemsize`
            for operand in [o for o in operands if literalish(o)] or operands:
                self.expected_table(operand)
        elif isinstance(test, ast.BoolOp):
            for v in test.values:
                self.asserted(v)
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self.asserted(test.operand)
        elif isinstance(test, ast.Call):
            name = last_name(test)
            if name in ("all", "any", "bool") and len(test.args) == 1:
                arg = test.args[0]
                comprehension = isinstance(arg, (ast.GeneratorExp, ast.ListComp))
                self.asserted(arg.elt if comprehension else arg)
                for gen in arg.generators if comprehension else []:
                    self.table_iter(gen.iter)
            elif name in ("all", "any", "item") and isinstance(test.func, ast.Attribute):
                self.asserted(test.func.value)
            elif name in COMPARING_CALLS:
                self.call_arguments(test)

    def call_arguments(self, call: ast.Call) -> None:
        """The expected arguments of a comparing call: ``prove``'s solution (a changed wrong
        answer stays wrong), ``compare``'s expected value, every positional argument else."""
        name = last_name(call)
        if name in ("prove", "compare"):
            keyword = "solution" if name == "prove" else "expected"
            args = call.args[1:2] + [k.value for k in call.keywords if k.arg == keyword]
        else:
            args = call.args + [k.value for k in call.keywords
                                if k.arg in ("expected", "desired", "actual")]
        for arg in args:
            self.values(arg)

    def table_iter(self, node: ast.AST) -> None:
        """The iterable of a loop that asserts: a literal table, or a name bound to one."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("items", "values", "keys") and not node.args:
            node = node.func.value
        elif isinstance(node, ast.Call) and dotted(node.func) == "enumerate" and node.args:
            node = node.args[0]
        for value in self.assigned.get(node.id, []) if isinstance(node, ast.Name) else [node]:
            if _is_table(value):
                for i in sample(list(range(_rows(value)))):
                    self.drop_row(value, i)
                    if isinstance(value, ast.Dict):
                        self.values(value.values[i])
                    else:
                        for cell in value.elts[i].elts[1:]:
                            self.values(cell)

    def raise_check(self, node: ast.With) -> None:
        for item in node.items:
            call = item.context_expr
            if isinstance(call, ast.Call) and last_name(call) in ("raises", "warns") and call.args:
                kind = last_name(call)
                self.exception(call.args[0], f"{kind}-class")
                self.add(f"{kind}-body", node, "pass", lambda n, tree: setattr(n, "body", [ast.Pass()]),
                         start=self.src.span(node.body[0])[0], end=self.src.span(node.body[-1])[1])

    def find(self) -> list[Edit]:
        """Every edit of the fence: asserts, comparing calls, raise checks, tables, names."""
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                self.assigned.setdefault(n.targets[0].id, []).append(n.value)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads[n.id] = self.loads.get(n.id, 0) + 1
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Assert):
                self.asserted(n.test)
            elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and \
                    last_name(n.value) in EXPECTING_CALLS:
                self.call_arguments(n.value)
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                self.raise_check(n)
            elif isinstance(n, (ast.For, ast.AsyncFor)) and _checks(n.body):
                self.table_iter(n.iter)
        # a name assigned in this fence and loaded only where expected values are
        for name, seen in list(self.expected_names.items()):
            if name in self.assigned and self.loads.get(name, 0) == len(seen):
                for value in self.assigned[name]:
                    self.expected_table(value)
        return self.edits


def _is_table(node: ast.AST) -> bool:
    """A literal table of expectations: two or more rows (tuples or lists of two or more
    cells) or dict entries, whose expected cells (all but a row's first; a dict's values)
    hold a value the operators change. A list of lambdas to call is a domain, not a table."""
    if isinstance(node, ast.Dict):
        return len(node.keys) >= 2 and all(k is not None for k in node.keys) and any(
            changeable(v) for v in node.values)
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts) >= 2 and all(
            isinstance(e, (ast.Tuple, ast.List)) and len(e.elts) >= 2 for e in node.elts
        ) and any(changeable(cell) for e in node.elts for cell in e.elts[1:])
    return False


def _rows(node: ast.AST) -> int:
    return len(node.keys) if isinstance(node, ast.Dict) else len(node.elts)


def _checks(body: list[ast.stmt]) -> bool:
    """Does a loop body check something (assert, raise check, comparing call)?"""
    return any(isinstance(n, ast.Assert) or isinstance(n, ast.Call) and last_name(n) in
               EXPECTING_CALLS | {"raises", "warns"} for stmt in body for n in ast.walk(stmt))


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=False)


def apply(source: str, edit: Edit, tree: ast.AST) -> str | None:
    """The fence's source with ``edit`` spliced in, or None when no text parses to the
    original tree with the same change made at the AST level."""
    copied = copy.deepcopy(tree)
    index = next(i for i, n in enumerate(ast.walk(tree)) if n is edit.node)
    edit.change(list(ast.walk(copied))[index], copied)
    want = _dump(copied)
    texts = [(*edit.lines, "")] if edit.lines else []
    texts.append((edit.start, edit.end, edit.text))
    if edit.alternative is not None:
        texts.append((edit.start, edit.end, edit.alternative))
    texts.append((*Source(source).span(edit.node), ast.unparse(list(ast.walk(copied))[index])))
    for start, end, text in texts:
        mutated = source[:start] + text + source[end:]
        try:
            if _dump(ast.parse(mutated)) == want:
                return mutated
        except SyntaxError:
            continue
    return None


def statement(tree: ast.AST, src: Source, offset: int) -> tuple[int, int]:
    """First and last line of the innermost statement holding ``offset``: a statement that
    runs shows one of its lines in a trace (a constant tuple over three lines may not)."""
    best = (1, len(src.lines))
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            start, end = src.span(node)
            if start <= offset < max(end, start + 1) and \
                    node.end_lineno - node.lineno <= best[1] - best[0]:
                best = (node.lineno, node.end_lineno)
    return best


def changed_lines(source: str, mutated: str) -> tuple[int, str, str]:
    """(first changed line, original lines, mutated lines): the lines that differ."""
    a, b = source.splitlines(), mutated.splitlines()
    # commonprefix compares lists item by item: the lines both share at the start, then at the end
    head = len(os.path.commonprefix([a, b]))
    tail = len(os.path.commonprefix([a[head:][::-1], b[head:][::-1]]))
    return head + 1, "\n".join(a[head:len(a) - tail]), "\n".join(b[head:len(b) - tail])


def fence_mutants(source: str, chapter: str = "", fence: str = "", first_line: int = 1
                  ) -> list[Mutant]:
    """Every mutant of one fence's source, in source order; ``first_line`` is the .md line
    of the source's first line, so each mutant names its line in the chapter file."""
    try:
        finder = Finder(source)
    except SyntaxError:
        return []
    src = Source(source)
    out, seen = [], set()
    for edit in sorted(finder.find(), key=lambda e: (e.start, e.end, e.operator)):
        mutated = apply(source, edit, finder.tree)
        if mutated is None or mutated in seen or mutated == source:
            continue
        seen.add(mutated)
        line, original, new = changed_lines(source, mutated)
        if edit.row:
            line, original, new = src.line_of(edit.row[0]), source[slice(*edit.row)], "<row deleted>"
        out.append(Mutant(chapter, fence, len(out) + 1, edit.operator, first_line + line - 1,
                          original, new, mutated, statement(finder.tree, src, edit.start)))
    return out
