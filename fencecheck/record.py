"""The record: what the release matrix found for each fence, read and compared.

A results file (``results/<release>.json``, written by ``pytest
--fences-results``) holds one run of the whole book on one torch:

- provenance: ``release``, ``torch`` (version with its local label),
  ``torch_git`` (the commit torch was built from), ``build`` ("CPU-only",
  "CUDA 12.8", ...), ``cuda``, ``gpu`` (the device name, or None),
  ``numpy``, ``python``, ``platform``, ``commit`` (the last git commit
  that changed ``BOOK_PATHS``, so committing results does not change it)
  and ``dirty`` (``BOOK_PATHS`` differed from that commit),
  ``date``, ``exitstatus``;
- ``fences``: one record per fence, keyed by its ``id`` (the cell's
  ``fence-id``), in table-of-contents order: ``chapter``, ``cell`` (its
  index among the chapter's code cells), ``code`` (``code_hash`` of its
  source), ``outcome``, ``reason``, ``details``, ``proves``, ``observed``
  (name -> value, from ``fences.observe``) and ``labels`` (name -> what the
  value means, when the fence gave one);
- ``errors``: every other item that failed (a setup cell, the state guard,
  a chapter that could not be read). These fail the run but are not fences;
- ``chapters``: chapter -> ``chapter_digest`` of the code it ran.

A results file is *stale* where it does not describe the book as it is now:
a chapter whose code (any code cell, fence or not) changed since the run,
that the run did not have, or that the book no longer has, and, in a file
written before fences had ids, everything (``stale_reasons``). Each chapter
runs in a fresh kernel, so its results depend on its own code alone: the
records of a chapter that did not change stay current, those of a chapter
that changed are reported and never shown as current (``split``).

From the current files this module derives what the site and the change
report show: a badge per fence (``badge``), the behaviours that differ
between releases or builds (``changes``), the fences no release ran
(``never_run``), and the Markdown report of what a matrix run changed
(``change_report``).
"""
from __future__ import annotations

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
GPU_SKIP = re.compile("|".join(f"needs {re.escape(missing)}" for _, missing in DEVICES.values())
                      + "|GPU", re.I)
SHOWN = 40  # characters of a value shown in a badge
#: What a run's outcome depends on in the repository: its commit is the book's commit.
BOOK_PATHS = ("book", "fences", "fencecheck", "_toc.yml", "conftest.py", "pyproject.toml")
LISTED = 15  # fences new to the record listed by name in the change report (the rest counted)


# --- writing -------------------------------------------------------------------------

def code_hash(source: str) -> str:
    """A fence's code, ignoring comments, blank lines and trailing spaces: a reworded
    ``# Proves:`` line keeps the hash, any change to what runs changes it."""
    lines = [line.rstrip() for line in source.splitlines()]
    kept = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()[:12]


def chapter_digest(sources: list[str]) -> str:
    """The code a chapter runs: ``code_hash`` of each code cell, in order."""
    return hashlib.sha256(" ".join(code_hash(src) for src in sources).encode()).hexdigest()[:12]


def build_kind(cuda: str | None, hip: str | None = None) -> str:
    """"CPU-only", "CUDA 12.8" or "ROCm 6.4": the build of a torch."""
    if cuda:
        return f"CUDA {cuda}"
    if hip:
        return f"ROCm {hip}"
    return "CPU-only"


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def provenance(root: Path) -> dict:
    """Which torch, build, NumPy, Python and platform run here, and which commit of the book."""
    import numpy
    import torch

    gpu = torch.cuda.get_device_name(0) if available("cuda") else None
    # The last commit that changed what runs, not HEAD: committing results must not
    # change the provenance of the next run (a shallow clone may not see it: HEAD then).
    commit = _git(root, "log", "-1", "--format=%H", "--", *BOOK_PATHS) or _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--", *BOOK_PATHS)
    return {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "build": build_kind(torch.version.cuda, getattr(torch.version, "hip", None)),
        "cuda": torch.version.cuda,
        "gpu": gpu,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
    }


def toc_order(root: Path) -> dict[str, int]:
    """chapter path (relative to ``root``) -> its position in ``_toc.yml``."""
    from .chapter import toc_files

    if not (root / "_toc.yml").exists():
        return {}
    return {p.relative_to(root).as_posix(): n for n, p in enumerate(toc_files(root))}


def ordered(records: list[dict], toc: dict[str, int], key: str = "cell") -> list[dict]:
    """Records in table-of-contents order: chapter order, then cell order.

    A chapter not in the table of contents comes after those that are, by name.
    """
    return sorted(records, key=lambda r: (toc.get(r["chapter"], len(toc)), r["chapter"],
                                          r.get(key, -1) if isinstance(r.get(key), int) else -1))


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
    """The JSON object in ``path``; a ``BadFile`` naming it and ``regenerate`` (how to write
    it again) when it is not valid JSON, not an object, or lacks one of ``fields``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadFile(f"{path}: not valid JSON ({exc}); {regenerate}") from None
    missing = [f for f in fields if not isinstance(data, dict) or f not in data]
    if not isinstance(data, dict) or missing:
        what = "not a JSON object" if not isinstance(data, dict) else f"no {', '.join(missing)}"
        raise BadFile(f"{path}: {what}; {regenerate}")
    return data


def load(folder: Path, known: list[str] | None = None, book: Path | None = None) -> list[dict]:
    """Every results file in ``folder``, in release order (each remembers its ``file``).

    A file that does not parse, does not fit the schema (``fencecheck.schema``) or is
    inconsistent (``problems``) is a ``BadFile`` error naming the file, the fence and the
    field: nothing is skipped silently. ``known``: the releases the matrix runs
    (``fencecheck.releases``); ``book``: the book whose fences say which are gated on a
    device (default: ``folder``'s parent when it has a ``_toc.yml``).
    """
    runs = []
    for path in sorted(Path(folder).glob("*.json")):
        run = read_json(path, regenerate(path), ("release", "fences"))
        run["file"] = path.name
        runs.append(run)
    if book is None and (Path(folder).parent / "_toc.yml").exists():
        book = Path(folder).parent
    found = problems(runs, known, book)
    if found:
        raise BadFile("\n".join(found))
    for run in runs:   # read-only from here: ``by_id`` indexes a tuple once
        run["fences"] = tuple(run["fences"])
    return sorted(runs, key=run_key)


def regenerate(path: Path) -> str:
    path = Path(path)
    return (f"regenerate it with `make matrix RELEASES={path.stem}` "
            "(or restore it with `git checkout -- " + path.as_posix() + "`)")


def _where(run: dict, error) -> str:
    """"fence views-address, field outcome" for a schema error at ``error.absolute_path``."""
    path = list(error.absolute_path)
    parts = []
    if len(path) >= 2 and path[0] in ("fences", "errors") and isinstance(path[1], int):
        items = run.get(path[0]) or []
        item = items[path[1]] if path[1] < len(items) else None
        fid = item.get("id") if isinstance(item, dict) and path[0] == "fences" else None
        what = "fence" if path[0] == "fences" else "error"
        parts.append(f"{what} {fid!r} (record {path[1]})" if fid else f"{what} record {path[1]}")
        rest = path[2:]
    else:
        rest = path
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        rest = [*rest, *(missing[:1] or ["?"])]
    elif error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)'", error.message)
        rest = [*rest, *(extra[:1] or ["?"])]
    if rest:
        parts.append("field " + ".".join(str(p) for p in rest))
    return ", ".join(parts) or "the file"


def schema_problems(run: dict) -> list[str]:
    """What in ``run`` (one results file as read) does not fit ``fencecheck.schema.RESULTS``."""
    import jsonschema

    from .schema import RESULTS

    name = run.get("file", label(run))
    data = {k: v for k, v in run.items() if k != "file"}
    validator = jsonschema.Draft202012Validator(RESULTS)
    out = []
    for error in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        what = ("missing" if error.validator == "required" else
                "not allowed (no such field in a results file)"
                if error.validator == "additionalProperties" else error.message)
        out.append(f"results/{name}: {_where(data, error)}: {what}")
    return out


def _gated_in_book(book: Path) -> dict[str, str]:
    """fence id -> code_hash, for each fence of the book whose code calls ``fences.needs``."""
    from . import lint
    from .chapter import header_problems, parse, toc_files

    out = {}
    for path in toc_files(book) if (book / "_toc.yml").exists() else []:
        try:
            text = path.read_text(encoding="utf-8")
            if header_problems(text):
                continue
            nb = parse(text, path)
        except Exception:  # noqa: BLE001 - the test suite and the build report a bad chapter
            continue
        for cell in nb.cells:
            if cell.cell_type == "code" and lint.is_fence(cell) and NEEDS.search(cell.source):
                out[lint.fence_id(cell)] = code_hash(cell.source)
    return out


#: A fence gated on a device: its code calls ``fences.needs`` (``fences.GATE``).
NEEDS = GATE


def problems(runs: list[dict], known: list[str] | None = None, book: Path | None = None) -> list[str]:
    """Every way ``runs`` (the results files, as read) are invalid or inconsistent, each
    naming the file, the fence and the field. Beyond the schema, refused:

    - a file for a release the matrix does not run (``fencecheck.releases``; one newer
      than every listed release is the "newest" run's), or named unlike its ``release``;
    - a fence gated on a device (a GPU skip reason recorded for it at the same code in
      any file, or its code in ``book`` calls ``fences.needs``) recorded as passed on a
      run whose provenance names no GPU (``gpu`` is null);
    - an observed value on a fence that did not pass (skipped or failed: it did not run
      to the end, so nothing it observed is a result);
    - one fence id twice in a file.
    """
    from . import releases

    known = releases.names() if known is None else known
    newest = max((version_key(k) for k in known), default=())
    out = []
    gated: dict[str, set] = {}
    for run in runs:
        for rec in run.get("fences") or []:
            if isinstance(rec, dict) and rec.get("outcome") == "skipped" \
                    and GPU_SKIP.search(str(rec.get("reason", ""))):
                gated.setdefault(rec.get("id"), set()).add(rec.get("code"))
    if book is not None:
        for fid, code in _gated_in_book(Path(book)).items():
            gated.setdefault(fid, set()).add(code)
    for run in runs:
        found = schema_problems(run)
        name = run.get("file", label(run))
        if found:
            out += found
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
            fid = rec["id"]
            if fid in seen:
                out.append(f"results/{name}: fence {fid!r}, field id: recorded twice")
            seen.add(fid)
            if rec["outcome"] != "passed" and rec["observed"]:
                out.append(f"results/{name}: fence {fid!r}, field observed: "
                           f"{', '.join(sorted(rec['observed']))} recorded, but the fence "
                           f"{rec['outcome']} (a value is observed only by a fence that ran "
                           "to the end)")
            if rec["outcome"] == "passed" and not run.get("gpu") and rec["code"] in gated.get(fid, ()):
                out.append(f"results/{name}: fence {fid!r}, field outcome: 'passed', but the fence "
                           "is gated on a device (fences.needs) and this run's provenance has no "
                           "GPU (field gpu is null): it cannot have run")
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
    #: its ``# Records:`` lines (``lint.described``): value name -> plain words
    labels: dict = field(default_factory=dict, hash=False, compare=False)
    #: the code inside its ``with fences.raises(...)``/``warns`` blocks, each once
    calls: tuple = field(default=(), hash=False, compare=False)
    #: its ``# Fix:`` comment: what a reader who meets the error does
    fix: str = field(default="", hash=False, compare=False)


def read_book(root: Path) -> tuple[list[Fence], dict[str, str]]:
    """The book as it is now: every fence in reading order, and each chapter's ``chapter_digest``.

    Chapters are those ``_toc.yml`` lists; one that does not exist or cannot
    be read contributes nothing here (the test suite and the build report it).
    """
    from . import lint
    from .chapter import header_problems, parse, toc_files

    fences, digests = [], {}
    for path in toc_files(root) if (root / "_toc.yml").exists() else []:
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        if header_problems(text):
            continue
        nb = parse(text, path)
        chapter = path.relative_to(root).as_posix()
        digests[chapter] = chapter_digest([c.source for c in nb.cells if c.cell_type == "code"])
        section, code_index = "", -1
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                heads = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", cell.source, re.M)
                if heads:
                    section = plain(heads[-1])
                continue
            if cell.cell_type != "code":
                continue
            code_index += 1
            if lint.is_fence(cell) and lint.fence_id(cell):
                fences.append(Fence(lint.fence_id(cell), chapter, code_index,
                                    code_hash(cell.source), section, claim(cell.source),
                                    lint.described(cell.source), raising_calls(cell.source),
                                    lint.fix(cell.source)))
    return fences, digests


def raising_calls(source: str) -> tuple[str, ...]:
    """The code inside each ``with fences.raises(...)`` / ``warns(...)`` block of a fence,
    each distinct block once, in order."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        if not any(isinstance(i.context_expr, ast.Call) and getattr(
                i.context_expr.func, "attr", getattr(i.context_expr.func, "id", "")) in ("raises", "warns")
                for i in node.items):
            continue
        body = "\n".join(ast.get_source_segment(source, b) or "" for b in node.body)
        if body and body not in found:
            found.append(body)
    return tuple(found)


@dataclass(frozen=True)
class Raised:
    """One message a fence proves, as the reference run gave it, and each release's words."""

    fence: Fence
    kind: str
    message: str
    #: "release (build)" -> (class, message) where that run gave other words
    elsewhere: dict


#: What torch appends to a warning raised in C++: where, not what (the line moves between releases).
TRIGGERED = re.compile(r"\s*\(Triggered internally at [^()]*\)\s*$")


def _words(item: dict) -> tuple[str, str]:
    return item["class"], TRIGGERED.sub("", item["message"])


def _paired(ours: list[dict], theirs: list[dict]) -> dict[int, dict]:
    """Which of another run's messages answers each of ours (index -> item): aligned as a
    diff aligns lines, so a message one release raises and another does not shifts no
    pair; changed messages are paired only where as many changed on both sides."""
    import difflib

    pairs = {}
    a, b = [_words(i) for i in ours], [_words(i) for i in theirs]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            pairs.update({i: theirs[j] for i, j in zip(range(i1, i2), range(j1, j2))})
    return pairs


def errors(runs: list[dict], current: list[Fence], reference: str) -> list[Raised]:
    """Every error and warning message the book's fences prove, in reading order: the
    reference run's words (``reference``, a run label), and where another current run's
    fence gave other words, that run's, labelled with its build. A fence the reference
    run did not record contributes what the newest run that did recorded."""
    by_label = {label(r): by_id(r) for r in runs}
    builds = {label(r): r.get("build") for r in runs}
    order = sorted(by_label, key=lambda k: run_key(next(r for r in runs if label(r) == k)))
    base = [reference] + [k for k in reversed(order) if k != reference]
    out = []
    for f in current:
        home = next((k for k in base if by_label.get(k, {}).get(f.id, {}).get("raised")), None)
        if home is None:
            continue
        ref = by_label[home][f.id]["raised"]
        paired = {k: _paired(ref, by_label[k].get(f.id, {}).get("raised") or [])
                  for k in order if k != home}
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
    """What a fence proves (``lint.proves``); the first comment line when it has no
    ``# Proves:`` line."""
    from . import lint

    found = lint.proves(source)
    comments = [line.strip().lstrip("#").strip() for line in source.splitlines()
                if line.strip().startswith("#")]
    return found or (comments[0] if comments else "")


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
        return [f"written before fences had ids and chapters a digest; the book has "
                f"{len(current)} fences"]
    then: dict[str, dict[str, dict]] = {}
    for r in run.get("fences", []):
        then.setdefault(r["chapter"], {})[r["id"]] = r
    reasons = []
    for chapter in stale_chapters(run, digests):
        if chapter not in run["chapters"]:
            reasons.append(f"{chapter} was not run")
            continue
        now = {f.id: f for f in current if f.chapter == chapter}
        old = then.get(chapter, {})
        parts = []
        for what, ids in (("new fences", [i for i in now if i not in old]),
                          ("fences gone", [i for i in old if i not in now]),
                          ("fences whose code changed",
                           [i for i in now if i in old and old[i].get("code") != now[i].code])):
            if ids:
                parts.append(f"{what}: {_ids(ids)}")
        reasons.append(f"{chapter} changed since this run ({'; '.join(parts) or 'cells that are not fences'})")
    gone = [c for c in run["chapters"] if c not in digests]
    if gone:
        reasons.append(f"chapters no longer in the book: {_ids(gone)}")
    return reasons


def current_part(run: dict, digests: dict[str, str]) -> dict:
    """``run`` with only the records of chapters that did not change since it ran."""
    stale = set(stale_chapters(run, digests)) | {c for c in run.get("chapters") or {} if c not in digests}
    part = dict(run)
    part["fences"] = tuple(r for r in run.get("fences", []) if r["chapter"] not in stale)
    part["errors"] = [e for e in run.get("errors", []) if e.get("chapter") not in stale]
    part["stale_chapters"] = sorted(c for c in stale if c in digests)
    return part


def split(runs: list[dict], current: list[Fence], digests: dict[str, str]
          ) -> tuple[list[dict], list[tuple[dict, list[str]]]]:
    """(the current part of each run, [(run, why part of it is stale)]).

    A run none of whose fences is in an unchanged chapter contributes no
    current part, unless it is an install failure (which stays visible).
    """
    fresh, stale = [], []
    for run in runs:
        why = stale_reasons(run, current, digests)
        if why:
            stale.append((run, why))
        part = current_part(run, digests) if run.get("chapters") is not None else None
        if run.get("error") and not run.get("fences"):
            fresh.append(run)
        elif part is not None and (part["fences"] or part["errors"] or not part["stale_chapters"]):
            fresh.append(part)  # a run whose every fence is in changed chapters shows nothing
    return fresh, stale


#: ``by_id``'s indexes: id of a run's fence list -> (that list, the ids of its records,
#: the index). Kept while the list is alive and holds the same records.
_INDEXES: dict[int, tuple[list, tuple[int, ...], dict[str, dict]]] = {}


def by_id(run: dict) -> dict[str, dict]:
    """Fence id -> its record in ``run`` (read-only: the index is shared).

    Built once per fence list, not once per call (the site asks it for every fence of
    every run, tens of thousands of times a build). A tuple (``load``'s runs) cannot
    change, so its index is simply kept; a list is indexed again when it is replaced,
    grown, shrunk or reordered, or holds another record. (The index holds the list and
    its records, so none of their ids can be reused by another object.)
    """
    fences = run.get("fences")
    if not fences:
        return {}
    kept = _INDEXES.get(id(fences))
    if kept is not None and kept[0] is fences and type(fences) is tuple:
        return kept[2]
    ids = tuple(map(id, fences))
    if kept is not None and kept[0] is fences and kept[1] == ids:
        return kept[2]
    index = {r["id"]: r for r in fences if r.get("id")}
    if len(_INDEXES) >= 256:   # a long-lived process (the test suite) reads many runs
        _INDEXES.clear()
    _INDEXES[id(fences)] = (fences, ids, index)
    return index


def counts(run: dict) -> dict[str, int]:
    """Fences passed / failed / skipped, and errors outside fences, in one run."""
    out = {o: 0 for o in OUTCOMES}
    for rec in run.get("fences", []):
        out[rec["outcome"]] = out.get(rec["outcome"], 0) + 1
    out["errors"] = len(run.get("errors", []))
    return out


def ok(run: dict) -> bool:
    """Green: the suite exited 0, no fence failed, nothing outside a fence failed, it installed."""
    c = counts(run)
    return run.get("exitstatus") == 0 and not c["failed"] and not c["errors"] and not run.get("error")


# --- what differs ----------------------------------------------------------------------

@dataclass
class Change:
    """A recorded value that is not the same on every release.

    ``kind``: "release" (one value up to a release, another from it on:
    ``old``, ``new``, ``since``), "build" (one value per build kind, and some
    release recorded in both builds: ``by_build``), "one-build" (one value per
    build kind, but no release recorded in both, so the record cannot tell the
    build from the release: ``by_build``, ``only``), or "varies" (anything else:
    ``segments``). Values are kept as recorded; ``words`` reads one for a reader.
    """

    fence: str
    name: str
    label: str
    kind: str
    old: str = ""
    new: str = ""
    since: str = ""
    by_build: dict[str, str] = field(default_factory=dict)
    segments: list[tuple[str, str]] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # release -> value
    only: list[str] = field(default_factory=list)  # "one-build": the labels of the lone build
    #: the CUDA builds' runs had no GPU: a build's value, not a GPU's (a reader would think so)
    no_gpu: bool = False

    def text(self, limit: int | None = None) -> str:
        """The change in a few words: "changed in 2.11.0: X → Y"."""
        def short(v: str) -> str:
            v = words(v)
            return v if limit is None or len(v) <= limit else v[: limit - 1] + "…"

        def build(b: str, many: bool = False) -> str:
            s = "builds" if many else "build"
            return f"{b} {s} with no GPU" if b == "CUDA" and self.no_gpu else f"{b} {s}"

        if self.kind == "one-build":
            lone = next(b for b, _ in self.by_build.items() if b == "CPU-only") \
                if "CPU-only" in self.by_build and len(self.only) else next(iter(self.by_build))
            others = [f"{build(b, True)}: {short(v)}" for b, v in self.by_build.items() if b != lone]
            return (f"seen only on the {build(lone)} {', '.join(self.only)}: "
                    f"{short(self.by_build[lone])}; " + "; ".join(others))
        if self.kind == "release":
            return f"changed in {self.release()}: {short(self.old)} → {short(self.new)}"
        if self.kind == "build":
            builds, values = zip(*self.by_build.items())
            return (" vs ".join(build(b) for b in builds) + ": "
                    + " vs ".join(short(v) for v in values))
        return "varies: " + ", ".join(f"{short(v)} from {r}" for r, v in self.segments)


    def release(self) -> str:
        """The release that changed it: "2.10.0", not the build's local label ("+cpu"),
        which would read as if the build changed it (a build difference is kind "build")."""
        base, plus, local = self.since.partition("+")
        return f"{base} (first recorded on its {local} build)" if plus else base


def words(value: str) -> str:
    """A recorded value as a reader reads it: a dict as "key: value; ...", a list or a
    tuple as its items joined by ", ", anything else as recorded."""
    import ast

    bad = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)
    try:
        data = ast.literal_eval(value)
    except bad:
        try:   # nan and inf are not literals: read them as words
            data = ast.literal_eval(re.sub(r"(?<![\w'\"])(-?(?:nan|inf))(?![\w'\"])", r"'\1'", value))
        except bad:
            return value
    if isinstance(data, dict) and data:
        return "; ".join(f"{k}: {words(repr(v)) if not isinstance(v, str) else v}"
                         for k, v in data.items())
    if isinstance(data, (list, tuple)) and data and not isinstance(data, str):
        return ", ".join(str(v) for v in data)
    return value


def classify(fence: str, name: str, text: str, points: list[tuple[dict, str]]) -> Change | None:
    """How one recorded value varies over ``points`` ([(run, value)], in release order)."""
    values = {label(r): v for r, v in points}
    if len(set(values.values())) <= 1:
        return None
    kinds: dict[str, set] = {}
    for run, value in points:
        kinds.setdefault("CPU-only" if is_cpu(run) else "CUDA", set()).add(value)
    segments: list[tuple[str, str]] = []
    for run, value in points:
        if not segments or segments[-1][1] != value:
            segments.append((label(run), value))
    if len(kinds) > 1 and all(len(v) == 1 for v in kinds.values()):
        by_build = {k: next(iter(kinds[k])) for k in sorted(kinds)}  # CPU-only before CUDA
        bases: dict[str, set] = {}
        for run, _ in points:
            bases.setdefault("CPU-only" if is_cpu(run) else "CUDA", set()).add(label(run).partition("+")[0])
        no_gpu = not any(r.get("gpu") for r, _ in points if not is_cpu(r))
        if set.intersection(*bases.values()):
            return Change(fence, name, text, "build", by_build=by_build, values=values, no_gpu=no_gpu)
        lone = min(bases, key=lambda k: len(bases[k]))
        only = [label(r) for r, _ in points if ("CPU-only" if is_cpu(r) else "CUDA") == lone]
        return Change(fence, name, text, "one-build", by_build={lone: by_build[lone],
                      **{k: v for k, v in by_build.items() if k != lone}}, values=values, only=only,
                      no_gpu=no_gpu)
    if len(segments) == 2:
        return Change(fence, name, text, "release", old=segments[0][1], new=segments[1][1],
                      since=segments[1][0], values=values)
    return Change(fence, name, text, "varies", segments=segments, values=values)


def fence_changes(fence: str, runs: list[dict], described: dict | None = None) -> list[Change]:
    """Every recorded value of one fence that differs between ``runs``. A value's words:
    ``described`` (the fence's ``# Records:`` lines as the book has them now), else the
    ``label=`` the runs recorded."""
    points = [(run, by_id(run)[fence]) for run in runs if fence in by_id(run)]
    names: list[str] = []
    labels: dict[str, str] = {}
    for _, rec in points:
        for name in rec.get("observed", {}):
            if name not in names:
                names.append(name)
        labels.update(rec.get("labels", {}))
    labels.update(described or {})
    out = []
    for name in names:
        series = [(run, str(rec["observed"][name])) for run, rec in points
                  if name in rec.get("observed", {})]
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
        if any(r["outcome"] != "skipped" for r in recs):
            continue
        reasons = sorted({re.sub(r"\s*\(torch [^)]*\)$", "", r.get("reason", ""))
                          for r in recs if r.get("reason")})
        out.append((f, reasons[0] if reasons else "in no results file"))
    return out


# --- the badge beside each fence -------------------------------------------------------

@dataclass(frozen=True)
class Badge:
    """What a fence's badge says: ``kind`` picks its colour, ``text`` is shown, ``title`` on hover."""

    kind: str  # holds, changed, fails, gpu, skipped, none
    text: str
    title: str = ""


def span(releases: list[str]) -> str:
    return releases[0] if len(releases) == 1 else f"{releases[0]} – {releases[-1]}"


def badge(fence: str, runs: list[dict], described: dict | None = None) -> Badge:
    """The badge of one fence over the current runs (in release order)."""
    recs = [(label(run), by_id(run)[fence], run) for run in runs if fence in by_id(run)]
    if not recs:
        return Badge("none", "checked on this build only",
                     "no current results file holds this fence: run `make matrix`")
    failed = [rel for rel, rec, _ in recs if rec["outcome"] == "failed"]
    if failed:
        reason = next(rec.get("reason", "") for rel, rec, _ in recs if rec["outcome"] == "failed")
        return Badge("fails", f"fails on {', '.join(failed[:3])}" + (" …" if len(failed) > 3 else ""),
                     reason)
    passed = [rel for rel, rec, _ in recs if rec["outcome"] == "passed"]
    skipped = [(rel, rec) for rel, rec, _ in recs if rec["outcome"] == "skipped"]
    if not passed:
        reason = skipped[0][1].get("reason", "")
        if GPU_SKIP.search(reason):
            return Badge("gpu", "not yet run on a GPU", reason)
        return Badge("skipped", "not run on any release", reason)
    found = fence_changes(fence, [run for _, _, run in recs], described)
    if found:
        first = found[0]
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        # the changes page's words: the behaviour (its # Records: line), then the change
        return Badge("changed", (f"{first.label}: " if first.label else "") + first.text() + more,
                     "; ".join(f"{c.label or c.name}: {c.text()}" for c in found))
    text = f"holds on {span(passed)}"
    title = f"passed on {', '.join(passed)}"
    if skipped:
        gpu = all(GPU_SKIP.search(rec.get("reason", "")) for _, rec in skipped)
        title += "; skipped on " + ", ".join(f"{rel} ({rec.get('reason', '')})" for rel, rec in skipped)
        if gpu:
            return Badge("gpu", f"CPU part holds on {span(passed)}; GPU part not yet run", title)
        return Badge("skipped", f"{text}; skipped on {len(skipped)}", title)
    return Badge("holds", text, title)


#: Badges that carry news; a fence that holds everywhere it ran gets none.
NEWS = ("changed", "fails", "gpu", "skipped", "none")


def page_summary(fences: list[str], runs: list[dict]) -> str:
    """One line for the top of a page: "All 12 fences on this page hold on 2.8.0 – 2.15.0"
    and, where some do not, how many carry which news (their badges say what)."""
    if not fences:
        return ""
    badges = [badge(f, runs) for f in fences]
    releases = [label(run) for run in runs]
    quiet = sum(b.kind == "holds" for b in badges)
    words = {"changed": ("differs", "differ", "by release or build"),
             "fails": ("fails", "fail", "somewhere"),
             "gpu": ("has", "have", "a GPU part not yet run"),
             "skipped": ("was", "were", "skipped somewhere"),
             "none": ("is", "are", "checked on this build only, not yet on every release")}
    news = []
    for kind in NEWS:
        k = sum(b.kind == kind for b in badges)
        if k:
            one, many, rest = words[kind]
            news.append(f"{k} {one if k == 1 else many} {rest}")
    n = len(fences)
    head = (f"All {n} fences on this page hold on {span(releases)}" if releases and not news
            else f"{quiet} of the {n} fences on this page hold on {span(releases)}"
            if releases else f"The {n} fences on this page")
    return head + (f"; {', '.join(news)} (each is marked)." if news else ".")


# --- what a matrix run changed ------------------------------------------------------------

def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def change_report(before: list[dict], after: list[dict], record: list[dict],
                  current: list[Fence], digests: dict[str, str],
                  base: str = "the committed results") -> str:
    """Markdown for a pull request: what ``after`` (this run) changed against ``before``.

    Per release: new failures, fixes, values and outcomes that changed. Across
    releases: behaviours that differ now and did not in ``before`` (a new
    release that changed a recorded value shows here).

    ``record``: every results file after the run (those not rerun included),
    for the fences never run anywhere and the stale files.
    """
    old = {label(r): r for r in before}
    described = {f.id: f.labels for f in current}
    where = {f.id: f for f in current}
    lines = ["# Release matrix: what changed", "",
             f"Against {base}. Book commit {_commit(after)}.", ""]
    lines += ["| release | torch | build | passed | failed | skipped | errors | against before |",
              "|---|---|---|---|---|---|---|---|"]
    for run in after:
        c = counts(run)
        prev = old.get(label(run))
        delta = _delta(prev, run) if prev else "new release"
        status = "" if ok(run) else " ❌"
        lines.append(f"| {label(run)}{status} | {run.get('torch') or '—'} | {run.get('build', '—')} | "
                     f"{c['passed']} | {c['failed']} | {c['skipped']} | {c['errors']} | {delta} |")
    lines.append("")

    new_fail, fixed, outcome, values = [], [], [], []
    known = {fid for run in before for fid in by_id(run)}
    added = [fid for fid in dict.fromkeys(fid for run in after for fid in by_id(run)) if fid not in known]
    for run in after:
        rel, now, prev = label(run), by_id(run), by_id(old.get(label(run), {}))
        for fid, rec in now.items():
            was = prev.get(fid)
            if rec["outcome"] == "failed" and (was is None or was["outcome"] != "failed"):
                new_fail.append((rel, fid, rec))
            elif was is None:
                continue
            elif was["outcome"] == "failed" and rec["outcome"] != "failed":
                fixed.append((rel, fid, rec["outcome"]))
            elif was["outcome"] != rec["outcome"]:
                outcome.append((rel, fid, was["outcome"], rec["outcome"]))
            if was is not None:
                for name, value in rec.get("observed", {}).items():
                    if name in was.get("observed", {}) and str(was["observed"][name]) != str(value):
                        words = described.get(fid, {}).get(name) or rec.get("labels", {}).get(name, "")
                        values.append((rel, fid, name, words,
                                       was["observed"][name], value))
    errors = [(label(run), e) for run in after for e in run.get("errors", [])]
    installs = [(label(run), run["error"]) for run in after if run.get("error")]

    shown = []

    def section(title: str, rows: list, render, limit: int | None = None) -> None:
        if rows:
            shown.append(title)
            lines.extend([f"## {title} ({len(rows)})", "", *(render(row) for row in rows[:limit])])
            if limit is not None and len(rows) > limit:
                lines.append(f"- and {len(rows) - limit} more")
            lines.append("")

    def place(fid: str) -> str:
        f = where.get(fid)
        return f"`{fid}` ({f.chapter})" if f else f"`{fid}`"

    section("Releases that failed to install", installs, lambda r: f"- {r[0]}: {_md(r[1])}")
    section("New failures", new_fail, lambda r: f"- {place(r[1])} on {r[0]}: {_md(r[2].get('reason', ''))}")
    section("Errors outside fences (setup cells, the state guard)", errors,
            lambda r: f"- {r[1].get('chapter')} {r[1].get('item')} on {r[0]}: {_md(r[1].get('reason', ''))}")
    if values:
        shown.append("values")
        lines += [f"## Values that changed ({len(values)})", "",
                  "| release | fence | value | before | now |", "|---|---|---|---|---|"]
        lines += [f"| {r} | {place(f)} | {_md(lab or n)} | {_md(a)} | {_md(b)} |"
                  for r, f, n, lab, a, b in values]
        lines.append("")
    fresh, stale = split(record, current, digests)
    was_fresh, _ = split(before, current, digests)
    seen = {(c.fence, c.name, c.text()) for c in changes(was_fresh, current)}
    differ = [c for c in changes(fresh, current) if (c.fence, c.name, c.text()) not in seen]
    section("Behaviours that now differ between releases or builds", differ,
            lambda c: f"- {_md(c.label or c.name)}: {_md(c.text())} ({place(c.fence)})")
    section("Fixed (failed before)", fixed, lambda r: f"- {place(r[1])} on {r[0]}: now {r[2]}")
    section("Other outcomes that changed", outcome,
            lambda r: f"- {place(r[1])} on {r[0]}: {r[2]} → {r[3]}")
    section("Fences new to the record (in no earlier results file)", added, lambda fid: f"- {place(fid)}",
            limit=LISTED)
    section("Fences never run anywhere", never_run(fresh, current),
            lambda r: f"- `{r[0].id}` ({r[0].chapter}): {_md(r[1])}")
    section("Stale results files (what they hold of these chapters is not shown as current)", stale,
            lambda r: f"- {r[0].get('file', label(r[0]))}: " + "; ".join(r[1]))
    if not shown:
        lines.append("Nothing changed: no new failure, no changed value, every fence ran somewhere.")
    return "\n".join(lines).rstrip() + "\n"


def _commit(runs: list[dict]) -> str:
    commits = sorted({(r.get("commit") or "?")[:12] + (" (uncommitted changes)" if r.get("dirty") else "")
                      for r in runs})
    return ", ".join(commits) or "?"


def _delta(prev: dict, run: dict) -> str:
    a, b = counts(prev), counts(run)
    parts = [f"{o} {b[o] - a[o]:+d}" for o in (*OUTCOMES, "errors") if b[o] != a[o]]
    return ", ".join(parts) or "same counts"


# --- does a fresh run reproduce the committed record? -----------------------------------

#: Fields of a results file that belong to the run, not to what it found: never compared.
#: ``date``, ``commit`` and ``dirty`` say when and from which checkout it ran;
#: ``platform`` (the host's kernel), ``python`` and ``numpy`` (the helper packages the
#: release's environment happened to install) describe the machine, not the torch the
#: file is a record of. A difference in them is listed as a note, never a failure.
PER_RUN = ("date", "commit", "dirty", "platform", "python", "numpy", "file")
#: Provenance that is part of the record (the site shows the build and the GPU): compared.
RECORDED = ("release", "torch", "torch_git", "build", "cuda", "gpu", "error")
#: A fence's fields taken from its source's comments, not from running it (a reworded
#: ``# Proves:`` line keeps the chapter's digest): a difference is re-recorded words.
WORDS = ("proves",)


@dataclass
class Reproduction:
    """How a fresh run of one release compares with its committed results file."""

    file: str
    failures: list[str] = field(default_factory=list)     # records that did not reproduce
    rerecorded: list[str] = field(default_factory=list)   # records of changed chapters
    notes: list[str] = field(default_factory=list)        # per-run fields that differ


def _normal(value):
    """A failure's text without what differs on every run: addresses, timings."""
    if not isinstance(value, str):
        if not isinstance(value, (list, dict)):
            return value
        value = json.dumps(value, sort_keys=True, ensure_ascii=False)
    value = re.sub(r"0x[0-9a-fA-F]+", "0x…", value)
    return re.sub(r"\b\d+(?:\.\d+)?\s?(?:s|ms|seconds)\b", "N s", value)


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 120 else text[:119] + "…"


def reproduce(old: dict, new: dict) -> Reproduction:
    """Compare ``new`` (a fresh run) with ``old`` (the committed file of the same release).

    Every record of a fence whose chapter did not change (same ``chapters`` digest in
    both) must be identical field by field (failure text normalised by ``_normal``;
    ``WORDS`` excepted); so must the recorded provenance (``RECORDED``), the errors
    outside fences of unchanged chapters and, when no chapter changed, the exit
    status. The records of a changed chapter are *re-recorded*: listed, expected to
    differ. ``PER_RUN`` fields are never compared (a difference is a note).
    """
    name = f"results/{new.get('file') or label(new) + '.json'}"
    out = Reproduction(name)
    then, now = old.get("chapters") or {}, new.get("chapters") or {}
    changed = {c for c in set(then) | set(now) if then.get(c) != now.get(c)}
    for key in RECORDED:
        if old.get(key) != new.get(key):
            out.failures.append(f"{name}: field {key}: {_short(old.get(key))} → {_short(new.get(key))}")
    for key in PER_RUN:
        if key not in ("file", "date", "commit", "dirty") and old.get(key) != new.get(key):
            out.notes.append(f"{name}: {key} {_short(old.get(key))} → {_short(new.get(key))} (per run)")
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
            continue
        if a is None:
            out.failures.append(f"{name}: fence {fid!r}: not in the committed file, but the run has it "
                                "and its chapter did not change")
            continue
        if b is None:
            out.failures.append(f"{name}: fence {fid!r}: in the committed file, but the run did not "
                                "produce it and its chapter did not change")
            continue
        for key in dict.fromkeys([*a, *b]):
            if key in WORDS:
                if a.get(key) != b.get(key):
                    out.rerecorded.append(f"{name}: fence {fid!r}: {key} reworded")
                continue
            va, vb = a.get(key), b.get(key)
            if isinstance(va, dict) and isinstance(vb, dict):
                for sub in dict.fromkeys([*va, *vb]):
                    if _normal(va.get(sub)) != _normal(vb.get(sub)):
                        out.failures.append(f"{name}: fence {fid!r}: {key}.{sub}: "
                                            f"{_short(va.get(sub))} → {_short(vb.get(sub))}")
            elif _normal(va) != _normal(vb):
                out.failures.append(f"{name}: fence {fid!r}: {key}: {_short(va)} → {_short(vb)}")
    key = lambda e: (e.get("chapter"), e.get("item"))  # noqa: E731
    errs_a = {key(e): e for e in old.get("errors") or [] if e.get("chapter") not in changed}
    errs_b = {key(e): e for e in new.get("errors") or [] if e.get("chapter") not in changed}
    for k in dict.fromkeys([*errs_a, *errs_b]):
        ra = _normal((errs_a.get(k) or {}).get("reason"))
        rb = _normal((errs_b.get(k) or {}).get("reason"))
        if k not in errs_a or k not in errs_b or ra != rb:
            out.failures.append(f"{name}: error {k[0]} {k[1]}: {_short(ra)} → {_short(rb)}")
    return out
