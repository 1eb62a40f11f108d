"""The record: the release matrix's results files (``results/<release>.json``, one run of the
book on one torch each; fields: ``fencecheck.schema``), read, validated, split into current and
stale parts, and turned into badges, changes, the change report and the reproduce check.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import json
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fences import DEVICES, GATE, available

OUTCOMES = ("passed", "failed", "skipped")
#: A skip reason that means "this needs a GPU" (``fences.needs("cuda")``).
GPU_SKIP = re.compile("|".join(f"needs {re.escape(missing)}" for _, missing in DEVICES.values()) + "|GPU", re.I)
#: What a run's outcome depends on in the repository: its commit is the book's commit.
BOOK_PATHS = ("book", "fences", "fencecheck", "_toc.yml", "conftest.py", "pyproject.toml")
LISTED = 15  # fences new to the record listed by name in the change report (the rest counted)


# --- writing -------------------------------------------------------------------------

def code_hash(source: str) -> str:
    """A fence's code without comments, blank lines and trailing spaces (a reworded comment keeps it)."""
    kept = [line.rstrip() for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()[:12]


def chapter_digest(sources: list[str]) -> str:
    """The code a chapter runs: ``code_hash`` of each code cell, in order."""
    return hashlib.sha256(" ".join(code_hash(src) for src in sources).encode()).hexdigest()[:12]


def build_kind(cuda: str | None, hip: str | None = None) -> str:
    return f"CUDA {cuda}" if cuda else f"ROCm {hip}" if hip else "CPU-only"


def git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def provenance(root: Path) -> dict:
    import numpy
    import torch

    # The last commit that changed what runs, not HEAD: committing results keeps it (shallow clone: HEAD).
    commit = git(root, "log", "-1", "--format=%H", "--", *BOOK_PATHS) or git(root, "rev-parse", "HEAD")
    status = git(root, "status", "--porcelain", "--", *BOOK_PATHS)
    return {"torch": torch.__version__, "torch_git": getattr(torch.version, "git_version", None),
            "build": build_kind(torch.version.cuda, getattr(torch.version, "hip", None)),
            "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0) if available("cuda") else None,
            "numpy": numpy.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "commit": commit, "dirty": bool(status) if status is not None else None}


def toc_order(root: Path) -> dict[str, int]:
    from .chapter import toc_files

    if not (root / "_toc.yml").exists():
        return {}
    return {p.relative_to(root).as_posix(): n for n, p in enumerate(toc_files(root))}


def ordered(records: list[dict], toc: dict[str, int]) -> list[dict]:
    """Records in table-of-contents order, then cell order; chapters not in it last, by name."""
    return sorted(records, key=lambda r: (toc.get(r["chapter"], len(toc)), r["chapter"],
                                          r["cell"] if isinstance(r.get("cell"), int) else -1))


# --- reading -------------------------------------------------------------------------

def version_key(version: str) -> tuple:
    """(major, minor, patch) of "2.10.0+cpu" or "2.15.0.dev20261130"; unknown sorts last."""
    numbers = re.findall(r"\d+", (version or "").split("+")[0])[:3]
    return tuple(int(n) for n in numbers) if numbers else (999,)


def label(run: dict) -> str:
    return run.get("release") or run.get("torch") or "?"


def run_key(run: dict) -> tuple:
    """Releases in version order; at one version, the CPU-only build first."""
    return version_key(run.get("torch") or label(run)), not is_cpu(run), label(run)


def is_cpu(run: dict) -> bool:
    return (run.get("build") or "").startswith("CPU")


class BadFile(ValueError):
    """A results or mutation file that does not parse: names the file and how to regenerate it."""


def read_json(path: Path, regenerate: str, fields: tuple[str, ...] = ()) -> dict:
    """The JSON object in ``path``, else a ``BadFile`` naming it and how to ``regenerate`` it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:   # UnicodeDecodeError included
        raise BadFile(f"{path}: not valid JSON ({exc}); {regenerate}") from None
    if not isinstance(data, dict):
        raise BadFile(f"{path}: not a JSON object; {regenerate}")
    missing = [f for f in fields if f not in data]
    if missing:
        raise BadFile(f"{path}: no {', '.join(missing)}; {regenerate}")
    return data


def load(folder: Path, known: list[str] | None = None, book: Path | None = None) -> list[dict]:
    """Every results file in ``folder``, in release order, each with its ``file`` name; a ``BadFile``
    naming file, fence and field for any ``problems``. ``book`` (default: ``folder``'s parent; none
    without a ``_toc.yml``) says which fences are gated on a device."""
    runs = [{**read_json(path, regenerate(path), ("release", "fences")), "file": path.name}
            for path in sorted(Path(folder).glob("*.json"))]
    found = problems(runs, known, Path(folder).parent if book is None else book)
    if found:
        raise BadFile("\n".join(found))
    for run in runs:   # read-only from here: ``by_id`` indexes a tuple once
        run["fences"] = tuple(run["fences"])
    return sorted(runs, key=run_key)


def regenerate(path: Path) -> str:
    path = Path(path)
    return (f"regenerate it with `make matrix RELEASES={path.stem}` "
            "(or restore it with `git checkout -- " + path.as_posix() + "`)")


def schema_problems(run: dict) -> list[str]:
    """Where ``run`` does not fit ``fencecheck.schema.RESULTS``: "results/<file>: fence 'x' (record 3), field y: …"."""
    import jsonschema

    from .schema import RESULTS

    data = {k: v for k, v in run.items() if k != "file"}
    errors = jsonschema.Draft202012Validator(RESULTS).iter_errors(data)
    out = []
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        path, where = list(error.absolute_path), []
        if len(path) >= 2 and path[0] in ("fences", "errors") and isinstance(path[1], int):
            item = data[path[0]][path[1]]
            fid = item.get("id") if isinstance(item, dict) and path[0] == "fences" else None
            what = "fence" if path[0] == "fences" else "error"
            where.append(f"{what} {fid!r} (record {path[1]})" if fid else f"{what} record {path[1]}")
            path = path[2:]
        if error.validator in ("required", "additionalProperties"):   # the field is in the message
            path.append((re.findall(r"'([^']+)'", error.message) or ["?"])[0])
        if path:
            where.append("field " + ".".join(str(p) for p in path))
        what = {"required": "missing", "additionalProperties": "not allowed (no such field in a results file)"}
        out.append(f"results/{run.get('file', label(run))}: {', '.join(where) or 'the file'}: "
                   f"{what.get(error.validator, error.message)}")
    return out


def _chapters(root: Path, quiet: bool = False):
    """(path, notebook) of each chapter in ``_toc.yml`` that exists and has its header (the suite and
    the build report the others); ``quiet``: one that does not parse is left out too."""
    from .chapter import header_problems, parse, toc_files

    for path in toc_files(root) if (root / "_toc.yml").exists() else []:
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            nb = parse(text, path) if text and not header_problems(text) else None
        except Exception:
            if not quiet:
                raise
            continue
        if nb is not None:
            yield path, nb


def _gated_in_book(book: Path) -> dict[str, str]:
    """fence id -> code_hash, for each fence of the book whose code calls ``fences.needs``."""
    from . import lint

    return {lint.fence_id(cell): code_hash(cell.source) for _, nb in _chapters(book, quiet=True)
            for cell in nb.cells if cell.cell_type == "code" and lint.is_fence(cell) and GATE.search(cell.source)}


def problems(runs: list[dict], known: list[str] | None = None, book: Path | None = None) -> list[str]:
    """Every way ``runs`` break the schema or are inconsistent (docs/matrix.md lists them), each
    naming file, fence and field. A fence is gated on a device where a file records a GPU skip at
    its code, or its code in ``book`` calls ``fences.needs``."""
    from . import releases

    known = releases.names() if known is None else known
    newest = max((version_key(k) for k in known), default=())
    gated = set(_gated_in_book(Path(book)).items()) if book is not None else set()   # (fence id, code)
    for rec in (rec for run in runs if isinstance(run.get("fences"), list) for rec in run["fences"]):
        if isinstance(rec, dict) and isinstance(rec.get("id"), str) and rec.get("outcome") == "skipped" \
                and GPU_SKIP.search(str(rec.get("reason", ""))):   # before the schema check: any shape
            gated.add((rec["id"], rec.get("code")))
    out = []
    for run in runs:
        name, found = run.get("file", label(run)), schema_problems(run)
        out += found
        if found:
            continue
        rel = run["release"]
        if name.endswith(".json") and name[:-5] != rel:
            out.append(f"results/{name}: field release: {rel!r}, but the file is named for "
                       f"{name[:-5]!r}; {regenerate(Path('results') / name)}")
        if rel not in known and not (releases.NEWER_ALLOWED and version_key(rel) > newest):
            out.append(f"results/{name}: field release: {rel!r} is not a release the matrix runs "
                       f"(fencecheck/releases.py lists {', '.join(known)}, and the newest on "
                       "PyPI); add it there or delete the file")
        seen = set()
        for rec in run["fences"]:
            fid, outcome = rec["id"], rec["outcome"]
            at = f"results/{name}: fence {fid!r}"
            if fid in seen:
                out.append(f"{at}, field id: recorded twice")
            seen.add(fid)
            if outcome != "passed" and rec["observed"]:
                out.append(f"{at}, field observed: {', '.join(sorted(rec['observed']))} recorded, but the "
                           f"fence {outcome} (a value is observed only by a fence that ran to the end)")
            if outcome == "passed" and not run.get("gpu") and (fid, rec["code"]) in gated:
                out.append(f"{at}, field outcome: 'passed', but the fence is gated on a device (fences.needs) "
                           "and this run's provenance has no GPU (field gpu is null): it cannot have run")
    return out


@dataclass(frozen=True)
class Fence:
    """A fence as the book has it now."""

    id: str
    chapter: str  # path relative to the book's root, e.g. "book/views.md"
    cell: int     # index among the chapter's code cells
    code: str     # code_hash of its source
    section: str  # the title of the section it is in
    proves: str
    labels: dict = field(default_factory=dict, hash=False, compare=False)  # its # Records: words
    calls: tuple = field(default=(), hash=False, compare=False)  # its raises/warns blocks' code
    fix: str = field(default="", hash=False, compare=False)      # its # Fix: comment


def read_book(root: Path) -> tuple[list[Fence], dict[str, str]]:
    """Every fence of the book as it is now, in reading order, and each chapter's ``chapter_digest``."""
    from . import lint

    fences, digests = [], {}
    for path, nb in _chapters(root):
        chapter = path.relative_to(root).as_posix()
        digests[chapter] = chapter_digest([c.source for c in nb.cells if c.cell_type == "code"])
        section, index = "", -1
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                heads = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", cell.source, re.M)
                section = plain(heads[-1]) if heads else section
            elif cell.cell_type == "code":
                index += 1
                src = cell.source
                if lint.is_fence(cell) and lint.fence_id(cell):
                    fences.append(Fence(lint.fence_id(cell), chapter, index, code_hash(src), section, claim(src),
                                        lint.described(src), raising_calls(src), lint.fix(src)))
    return fences, digests


def raising_calls(source: str) -> tuple[str, ...]:
    """The code inside each ``with fences.raises(...)`` / ``warns(...)`` block, each distinct block once."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found = []
    for node in ast.walk(tree):
        funcs = [i.context_expr.func for i in node.items if isinstance(i.context_expr, ast.Call)] \
            if isinstance(node, ast.With) else []
        if any(getattr(f, "attr", getattr(f, "id", "")) in ("raises", "warns") for f in funcs):
            found.append("\n".join(ast.get_source_segment(source, b) or "" for b in node.body))
    return tuple(dict.fromkeys(b for b in found if b))


@dataclass(frozen=True)
class Raised:
    """One message a fence proves, as the reference run gave it, and each release's words."""

    fence: Fence
    kind: str
    message: str
    elsewhere: dict  # "release (build)" -> (class, message) where that run gave other words


#: What torch appends to a warning raised in C++: where, not what (the line moves between releases).
TRIGGERED = re.compile(r"\s*\(Triggered internally at [^()]*\)\s*$")


def _paired(ours: list[dict], theirs: list[dict]) -> dict[int, dict]:
    """Which of another run's messages answers each of ours (index -> item): aligned as a
    diff aligns lines, so a message one release raises and another does not shifts no
    pair; changed messages are paired only where as many changed on both sides."""
    a, b = [[(i["class"], TRIGGERED.sub("", i["message"])) for i in side] for side in (ours, theirs)]
    pairs = {}
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            pairs.update({i: theirs[j] for i, j in zip(range(i1, i2), range(j1, j2))})
    return pairs


def errors(runs: list[dict], current: list[Fence], reference: str) -> list[Raised]:
    """Every message the book's fences prove, in reading order, in the ``reference`` run's words (else
    the newest run's that has them), with each other run's where they differ, labelled with its build."""
    by_label = {label(r): by_id(r) for r in runs}
    builds = {label(r): r.get("build") for r in runs}
    order = list(dict.fromkeys(label(r) for r in sorted(runs, key=run_key)))
    base = [reference] + [k for k in reversed(order) if k != reference]
    out = []
    for f in current:
        home = next((k for k in base if by_label.get(k, {}).get(f.id, {}).get("raised")), None)
        if home is None:
            continue
        ref = by_label[home][f.id]["raised"]
        paired = {k: _paired(ref, by_label[k].get(f.id, {}).get("raised") or []) for k in order if k != home}
        for n, item in enumerate(ref):
            other = {(f"{k} ({builds[k]} build)" if builds[k] else k): (theirs["class"], theirs["message"])
                     for k, pairs in paired.items() if (theirs := pairs.get(n))}
            out.append(Raised(f, item["class"], item["message"], other))
    return out


def plain(title: str) -> str:
    """A MyST heading as text: roles, backticks and emphasis marks dropped."""
    title = re.sub(r"\{[\w:-]+\}`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", title)
    return re.sub(r"[`*]", "", title).strip()


def claim(source: str) -> str:
    """What a fence proves (``lint.proves``), else its first comment line."""
    from . import lint

    comments = [line.strip().lstrip("#").strip() for line in source.splitlines() if line.strip().startswith("#")]
    return lint.proves(source) or (comments[0] if comments else "")


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def stale_chapters(run: dict, digests: dict[str, str]) -> list[str]:
    """The book's chapters whose records in ``run`` do not describe them now."""
    ran = run.get("chapters")
    if ran is None:  # written before chapters were digested: nothing in it can be matched
        return list(digests)
    return [c for c, d in digests.items() if ran.get(c) != d]


def stale_reasons(run: dict, current: list[Fence], digests: dict[str, str]) -> list[str]:
    """Why (part of) ``run`` is not a record of the book as it is now; empty when it all is."""
    if run.get("error") and not run.get("fences"):
        return []  # an install failure: nothing ran, nothing to compare
    if run.get("chapters") is None:
        return [f"written before fences had ids and chapters a digest; the book has {len(current)} fences"]
    by_chapter: dict[str, dict[str, dict]] = {}
    for r in run.get("fences", []):
        by_chapter.setdefault(r["chapter"], {})[r["id"]] = r
    reasons = []
    for chapter in stale_chapters(run, digests):
        if chapter not in run["chapters"]:
            reasons.append(f"{chapter} was not run")
            continue
        now, old = {f.id: f for f in current if f.chapter == chapter}, by_chapter.get(chapter, {})
        parts = [f"{what}: {_ids(ids)}" for what, ids in (
            ("new fences", [i for i in now if i not in old]),
            ("fences gone", [i for i in old if i not in now]),
            ("fences whose code changed", [i for i in now if i in old and old[i].get("code") != now[i].code]))
            if ids]
        reasons.append(f"{chapter} changed since this run ({'; '.join(parts) or 'cells that are not fences'})")
    gone = [c for c in run["chapters"] if c not in digests]
    return reasons + ([f"chapters no longer in the book: {_ids(gone)}"] if gone else [])


def split(runs: list[dict], current: list[Fence], digests: dict[str, str]
          ) -> tuple[list[dict], list[tuple[dict, list[str]]]]:
    """(each run's current part: the records of chapters unchanged since it ran, [(run, why stale)]).
    A run with nothing current has no part, unless it is an install failure (which stays visible)."""
    fresh, stale = [], []
    for run in runs:
        why = stale_reasons(run, current, digests)
        if why:
            stale.append((run, why))
        if run.get("error") and not run.get("fences"):
            fresh.append(run)
        elif run.get("chapters") is not None:
            gone = set(stale_chapters(run, digests)) | {c for c in run["chapters"] if c not in digests}
            part = {**run, "fences": tuple(r for r in run.get("fences", []) if r["chapter"] not in gone),
                    "errors": [e for e in run.get("errors", []) if e.get("chapter") not in gone],
                    "stale_chapters": sorted(c for c in gone if c in digests)}
            if part["fences"] or part["errors"] or not part["stale_chapters"]:
                fresh.append(part)
    return fresh, stale


#: ``by_id``'s indexes: id of a fence list -> (that list, the ids of its records, the index).
_INDEXES: dict[int, tuple[list, tuple[int, ...], dict[str, dict]]] = {}


def by_id(run: dict) -> dict[str, dict]:
    """Fence id -> its record in ``run`` (read-only: shared). The site asks it tens of thousands of times
    a build: a tuple (``load``'s runs) is indexed once; a list again when it holds other records."""
    fences = run.get("fences")
    if not fences:
        return {}
    kept = _INDEXES.get(id(fences))
    ids = () if type(fences) is tuple else tuple(map(id, fences))
    if kept is not None and kept[0] is fences and kept[1] == ids:
        return kept[2]
    if len(_INDEXES) >= 256:   # a long-lived process (the test suite) reads many runs
        _INDEXES.clear()
    index = {r["id"]: r for r in fences if r.get("id")}
    _INDEXES[id(fences)] = (fences, ids, index)
    return index


def counts(run: dict) -> dict[str, int]:
    out = dict.fromkeys(OUTCOMES, 0)
    for rec in run.get("fences", []):
        out[rec["outcome"]] = out.get(rec["outcome"], 0) + 1
    return {**out, "errors": len(run.get("errors", []))}


def ok(run: dict) -> bool:
    """Green: the suite exited 0, no fence failed, nothing outside a fence failed, it installed."""
    c = counts(run)
    return run.get("exitstatus") == 0 and not c["failed"] and not c["errors"] and not run.get("error")


# --- what differs ----------------------------------------------------------------------

@dataclass
class Change:
    """A recorded value that is not the same on every release. ``kind``: "release" (``old`` until
    ``since``, then ``new``), "build" (``by_build``, some release recorded in both builds), "one-build"
    (no release in both: build and release cannot be told apart; ``only``) or "varies" (``segments``)."""

    fence: str
    name: str
    label: str
    kind: str
    old: str = ""
    new: str = ""
    since: str = ""
    by_build: dict[str, str] = field(default_factory=dict)
    segments: list[tuple[str, str]] = field(default_factory=list)
    only: list[str] = field(default_factory=list)  # "one-build": the labels of the lone build
    no_gpu: bool = False  # the CUDA builds' runs had no GPU: a build's value, not a GPU's

    def text(self) -> str:
        """The change in a few words: "changed in 2.11.0: X → Y"."""
        def build(b: str, many: bool = False) -> str:
            return f"{b} build{'s' if many else ''}" + (" with no GPU" if b == "CUDA" and self.no_gpu else "")

        if self.kind == "one-build":
            lone = "CPU-only" if "CPU-only" in self.by_build and self.only else next(iter(self.by_build))
            others = [f"{build(b, True)}: {words(v)}" for b, v in self.by_build.items() if b != lone]
            return (f"seen only on the {build(lone)} {', '.join(self.only)}: "
                    f"{words(self.by_build[lone])}; " + "; ".join(others))
        if self.kind == "release":
            return f"changed in {self.release()}: {words(self.old)} → {words(self.new)}"
        if self.kind == "build":
            return (" vs ".join(build(b) for b in self.by_build) + ": "
                    + " vs ".join(words(v) for v in self.by_build.values()))
        return "varies: " + ", ".join(f"{words(v)} from {r}" for r, v in self.segments)

    def release(self) -> str:
        """The release that changed it: "2.10.0", not "+cpu" (which would read as if the build did)."""
        base, plus, local = self.since.partition("+")
        return f"{base} (first recorded on its {local} build)" if plus else base


def words(value: str) -> str:
    """A recorded value as a reader reads it: a dict as "key: value; ...", a list as "a, b"."""
    bad = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)
    try:
        data = ast.literal_eval(value)
    except bad:
        try:   # nan and inf are not literals: read them as words
            data = ast.literal_eval(re.sub(r"(?<![\w'\"])(-?(?:nan|inf))(?![\w'\"])", r"'\1'", value))
        except bad:
            return value
    if isinstance(data, dict) and data:
        return "; ".join(f"{k}: {v if isinstance(v, str) else words(repr(v))}" for k, v in data.items())
    if isinstance(data, (list, tuple)) and data:
        return ", ".join(str(v) for v in data)
    return value


def _build(run: dict) -> str:
    return "CPU-only" if is_cpu(run) else "CUDA"


def classify(fence: str, name: str, text: str, points: list[tuple[dict, str]]) -> Change | None:
    """How one recorded value varies over ``points`` ([(run, value)], in release order)."""
    if len({v for _, v in points}) <= 1:
        return None
    kinds: dict[str, set] = {}
    bases: dict[str, set] = {}
    segments: list[tuple[str, str]] = []
    for run, value in points:
        kinds.setdefault(_build(run), set()).add(value)
        bases.setdefault(_build(run), set()).add(label(run).partition("+")[0])
        if not segments or segments[-1][1] != value:
            segments.append((label(run), value))
    if len(kinds) > 1 and all(len(v) == 1 for v in kinds.values()):
        by_build = {k: next(iter(kinds[k])) for k in sorted(kinds)}  # CPU-only before CUDA
        no_gpu = not any(r.get("gpu") for r, _ in points if not is_cpu(r))
        if set.intersection(*bases.values()):
            return Change(fence, name, text, "build", by_build=by_build, no_gpu=no_gpu)
        lone = min(bases, key=lambda k: len(bases[k]))
        return Change(fence, name, text, "one-build", by_build={lone: by_build[lone], **by_build},
                      only=[label(r) for r, _ in points if _build(r) == lone], no_gpu=no_gpu)
    if len(segments) == 2:
        return Change(fence, name, text, "release", old=segments[0][1], new=segments[1][1], since=segments[1][0])
    return Change(fence, name, text, "varies", segments=segments)


def fence_changes(fence: str, runs: list[dict], described: dict | None = None) -> list[Change]:
    """Every recorded value of one fence that differs between ``runs``, worded by ``described`` (its
    ``# Records:`` lines now), else by the ``label=`` the runs recorded."""
    points = [(run, by_id(run)[fence]) for run in runs if fence in by_id(run)]
    labels: dict[str, str] = {}
    for _, rec in points:
        labels.update(rec.get("labels", {}))
    labels.update(described or {})
    out = []
    for name in dict.fromkeys(name for _, rec in points for name in rec.get("observed", {})):
        series = [(run, str(rec["observed"][name])) for run, rec in points if name in rec.get("observed", {})]
        change = classify(fence, name, labels.get(name, ""), series)
        if change:
            out.append(change)
    return out


def changes(runs: list[dict], current: list[Fence]) -> list[Change]:
    """Every recorded value that differs between ``runs``, fences in reading order."""
    return [c for f in current for c in fence_changes(f.id, runs, f.labels)]


def never_run(runs: list[dict], current: list[Fence]) -> list[tuple[Fence, str]]:
    """Fences that no run executed (absent everywhere or skipped everywhere), with why."""
    out = []
    for f in current:
        recs = [by_id(run)[f.id] for run in runs if f.id in by_id(run)]
        if all(r["outcome"] == "skipped" for r in recs):
            reasons = sorted({re.sub(r"\s*\(torch [^)]*\)$", "", r["reason"]) for r in recs if r.get("reason")})
            out.append((f, reasons[0] if reasons else "in no results file"))
    return out


# --- the badge beside each fence -------------------------------------------------------

@dataclass(frozen=True)
class Badge:
    """What a fence's badge says: ``kind`` picks its colour, ``text`` is shown, ``title`` on hover."""

    kind: str  # holds, changed, fails, gpu, skipped, none
    text: str
    title: str = ""


#: Badges that carry news; a fence that holds everywhere it ran gets none.
NEWS = ("changed", "fails", "gpu", "skipped", "none")


def span(releases: list[str]) -> str:
    return releases[0] if len(releases) == 1 else f"{releases[0]} – {releases[-1]}"


def badge(fence: str, runs: list[dict], described: dict | None = None) -> Badge:
    recs = [(label(run), by_id(run)[fence], run) for run in runs if fence in by_id(run)]
    if not recs:
        return Badge("none", "checked on this build only",
                     "no current results file holds this fence: run `make matrix`")
    failed = [(rel, rec) for rel, rec, _ in recs if rec["outcome"] == "failed"]
    if failed:
        names = [rel for rel, _ in failed]
        return Badge("fails", f"fails on {', '.join(names[:3])}" + (" …" if len(names) > 3 else ""),
                     failed[0][1].get("reason", ""))
    passed = [rel for rel, rec, _ in recs if rec["outcome"] == "passed"]
    skipped = [(rel, rec.get("reason", "")) for rel, rec, _ in recs if rec["outcome"] == "skipped"]
    if not passed:
        gpu = GPU_SKIP.search(skipped[0][1])
        return Badge("gpu" if gpu else "skipped", "not yet run on a GPU" if gpu else "not run on any release",
                     skipped[0][1])
    found = fence_changes(fence, [run for _, _, run in recs], described)
    if found:   # the changes page's words: the behaviour (its # Records: line), then the change
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        return Badge("changed", (f"{found[0].label}: " if found[0].label else "") + found[0].text() + more,
                     "; ".join(f"{c.label or c.name}: {c.text()}" for c in found))
    title = f"passed on {', '.join(passed)}"
    if not skipped:
        return Badge("holds", f"holds on {span(passed)}", title)
    title += "; skipped on " + ", ".join(f"{rel} ({why})" for rel, why in skipped)
    if all(GPU_SKIP.search(why) for _, why in skipped):
        return Badge("gpu", f"CPU part holds on {span(passed)}; GPU part not yet run", title)
    return Badge("skipped", f"holds on {span(passed)}; skipped on {len(skipped)}", title)


def page_summary(fences: list[str], runs: list[dict]) -> str:
    """"All 12 fences on this page hold on 2.8.0 – 2.15.0", or how many carry which news."""
    if not fences:
        return ""
    kinds = [badge(f, runs).kind for f in fences]
    releases = [label(run) for run in runs]
    said = {"changed": ("differs", "differ", "by release or build"),
            "fails": ("fails", "fail", "somewhere"),
            "gpu": ("has", "have", "a GPU part not yet run"),
            "skipped": ("was", "were", "skipped somewhere"),
            "none": ("is", "are", "checked on this build only, not yet on every release")}
    news = [f"{k} {said[kind][k != 1]} {said[kind][2]}" for kind in NEWS if (k := kinds.count(kind))]
    n = len(fences)
    head = (f"All {n} fences on this page hold on {span(releases)}" if releases and not news
            else f"{kinds.count('holds')} of the {n} fences on this page hold on {span(releases)}"
            if releases else f"The {n} fences on this page")
    return head + (f"; {', '.join(news)} (each is marked)." if news else ".")


# --- what a matrix run changed ------------------------------------------------------------

def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def change_report(before: list[dict], after: list[dict], record: list[dict],
                  current: list[Fence], digests: dict[str, str],
                  base: str = "the committed results") -> str:
    """Markdown for a pull request: what ``after`` (this run) changed against ``before``; ``record``
    (every results file after the run) gives the fences never run anywhere and the stale files."""
    old = {label(r): r for r in before}
    where = {f.id: f for f in current}

    def place(fid: str) -> str:
        return f"`{fid}` ({where[fid].chapter})" if fid in where else f"`{fid}`"

    commits = {(r.get("commit") or "?")[:12] + (" (uncommitted changes)" if r.get("dirty") else "") for r in after}
    lines = ["# Release matrix: what changed", "", f"Against {base}. Book commit {', '.join(sorted(commits)) or '?'}.",
             "", "| release | torch | build | passed | failed | skipped | errors | against before |",
             "|---|---|---|---|---|---|---|---|"]
    new_fail, fixed, outcome, values = [], [], [], []
    for run in after:
        rel, c, prev = label(run), counts(run), old.get(label(run))
        lines.append(f"| {rel}{'' if ok(run) else ' ❌'} | {run.get('torch') or '—'} | "
                     f"{run.get('build', '—')} | {c['passed']} | {c['failed']} | {c['skipped']} | "
                     f"{c['errors']} | {_delta(prev, run) if prev else 'new release'} |")
        earlier = by_id(prev or {})
        for fid, rec in by_id(run).items():
            was, now = earlier.get(fid), rec["outcome"]
            if now == "failed" and (was is None or was["outcome"] != "failed"):
                new_fail.append(f"- {place(fid)} on {rel}: {_md(rec.get('reason', ''))}")
            if was is None:
                continue
            if was["outcome"] == "failed" and now != "failed":
                fixed.append(f"- {place(fid)} on {rel}: now {now}")
            elif was["outcome"] != now != "failed":
                outcome.append(f"- {place(fid)} on {rel}: {was['outcome']} → {now}")
            for name, value in rec.get("observed", {}).items():
                if name in was.get("observed", {}) and str(was["observed"][name]) != str(value):
                    said = (where[fid].labels if fid in where else {}).get(name) or rec.get("labels", {}).get(name)
                    values.append(f"| {rel} | {place(fid)} | {_md(said or name)} | {_md(was['observed'][name])} | "
                                  f"{_md(value)} |")
    lines.append("")
    known = {fid for run in before for fid in by_id(run)}
    added = [f"- {place(fid)}" for fid in dict.fromkeys(fid for run in after for fid in by_id(run)) if fid not in known]
    fresh, stale = split(record, current, digests)
    seen = {(c.fence, c.name, c.text()) for c in changes(split(before, current, digests)[0], current)}
    sections = [
        ("Releases that failed to install", [f"- {label(r)}: {_md(r['error'])}" for r in after if r.get("error")]),
        ("New failures", new_fail),
        ("Errors outside fences (setup cells, the state guard)",
         [f"- {e.get('chapter')} {e.get('item')} on {label(run)}: {_md(e.get('reason', ''))}"
          for run in after for e in run.get("errors", [])]),
        ("Values that changed", values,
         ["| release | fence | value | before | now |", "|---|---|---|---|---|", *values]),
        ("Behaviours that now differ between releases or builds",
         [f"- {_md(c.label or c.name)}: {_md(c.text())} ({place(c.fence)})"
          for c in changes(fresh, current) if (c.fence, c.name, c.text()) not in seen]),
        ("Fixed (failed before)", fixed),
        ("Other outcomes that changed", outcome),
        ("Fences new to the record (in no earlier results file)", added,
         added[:LISTED] + [f"- and {len(added) - LISTED} more"] if len(added) > LISTED else added),
        ("Fences never run anywhere",
         [f"- `{f.id}` ({f.chapter}): {_md(why)}" for f, why in never_run(fresh, current)]),
        ("Stale results files (what they hold of these chapters is not shown as current)",
         [f"- {r.get('file', label(r))}: " + "; ".join(why) for r, why in stale]),
    ]
    for title, rows, *shown in sections:   # shown: what a long or tabled section prints of its rows
        if rows:
            lines += [f"## {title} ({len(rows)})", "", *(shown[0] if shown else rows), ""]
    if not any(rows for _, rows, *_ in sections):
        lines.append("Nothing changed: no new failure, no changed value, every fence ran somewhere.")
    return "\n".join(lines).rstrip() + "\n"


def _delta(prev: dict, run: dict) -> str:
    a, b = counts(prev), counts(run)
    return ", ".join(f"{o} {b[o] - a[o]:+d}" for o in (*OUTCOMES, "errors") if b[o] != a[o]) or "same counts"


# --- does a fresh run reproduce the committed record? -----------------------------------

#: Fields that belong to the run, not to what it found (when, from which checkout, on which host,
#: with which helper packages): never compared, a difference is a note.
PER_RUN = ("date", "commit", "dirty", "platform", "python", "numpy", "file")
#: Provenance that is part of the record (the site shows the build and the GPU): compared.
RECORDED = ("release", "torch", "torch_git", "build", "cuda", "gpu", "error")
#: A fence's fields from its source's comments, not from running it: a difference is re-recorded words.
WORDS = ("proves",)


@dataclass
class Reproduction:
    """How a fresh run of one release compares with its committed results file (each item names it)."""

    failures: list[str] = field(default_factory=list)     # records that did not reproduce
    rerecorded: list[str] = field(default_factory=list)   # records of changed chapters
    notes: list[str] = field(default_factory=list)        # per-run fields that differ


def _normal(value):
    """A failure's text without what differs on every run: addresses, timings."""
    if isinstance(value, (list, dict)):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if not isinstance(value, str):
        return value
    value = re.sub(r"0x[0-9a-fA-F]+", "0x…", value)
    return re.sub(r"\b\d+(?:\.\d+)?\s?(?:s|ms|seconds)\b", "N s", value)


def _short(value) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


def reproduce(old: dict, new: dict) -> Reproduction:
    """Compare ``new`` (a fresh run) with ``old`` (its committed file): in unchanged chapters every
    record and error must match (through ``_normal``; ``WORDS`` are rewordings), as must ``RECORDED``
    and, when no chapter changed, the exit status; changed chapters' records are re-recorded."""
    name = f"results/{new.get('file') or label(new) + '.json'}"
    out = Reproduction()
    then, now = old.get("chapters") or {}, new.get("chapters") or {}
    changed = {c for c in {*then, *now} if then.get(c) != now.get(c)}
    out.failures += [f"{name}: field {key}: {_short(old.get(key))} → {_short(new.get(key))}"
                     for key in RECORDED if old.get(key) != new.get(key)]
    out.notes += [f"{name}: {key} {_short(old.get(key))} → {_short(new.get(key))} (per run)"
                  for key in PER_RUN if key not in ("file", "date", "commit", "dirty") and old.get(key) != new.get(key)]
    if not changed and old.get("exitstatus") != new.get("exitstatus"):
        out.failures.append(f"{name}: field exitstatus: {old.get('exitstatus')} → {new.get('exitstatus')}")
    before = {r.get("id"): r for r in old.get("fences") or []}
    after = {r.get("id"): r for r in new.get("fences") or []}
    for fid in dict.fromkeys([*before, *after]):
        a, b = before.get(fid), after.get(fid)
        chapters = {r.get("chapter") for r in (a, b) if r}
        if chapters & changed:
            if a != b:
                out.rerecorded.append(f"{name}: fence {fid!r} ({', '.join(sorted(chapters))} changed)")
        elif a is None or b is None:
            out.failures.append(f"{name}: fence {fid!r}: " + ("not in the committed file, but the run has it"
                                if a is None else "in the committed file, but the run did not produce it")
                                + " and its chapter did not change")
        else:
            for key in dict.fromkeys([*a, *b]):
                va, vb = a.get(key), b.get(key)
                if key in WORDS:
                    out.rerecorded += [f"{name}: fence {fid!r}: {key} reworded"] if va != vb else []
                    continue
                both = isinstance(va, dict) and isinstance(vb, dict)
                pairs = [(f"{key}.{k}", va.get(k), vb.get(k)) for k in dict.fromkeys([*va, *vb])] if both \
                    else [(key, va, vb)]
                out.failures += [f"{name}: fence {fid!r}: {what}: {_short(x)} → {_short(y)}"
                                 for what, x, y in pairs if _normal(x) != _normal(y)]
    errs = [{(e.get("chapter"), e.get("item")): e for e in run.get("errors") or [] if e.get("chapter") not in changed}
            for run in (old, new)]
    for k in dict.fromkeys([*errs[0], *errs[1]]):
        ra, rb = (_normal((side.get(k) or {}).get("reason")) for side in errs)
        if k not in errs[0] or k not in errs[1] or ra != rb:
            out.failures.append(f"{name}: error {k[0]} {k[1]}: {_short(ra)} → {_short(rb)}")
    return out
