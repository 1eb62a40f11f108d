"""One home for each fact (issue #52, item 6): a second copy of a fact fails the suite.

Each fact lives in one place, which every other place imports or reads:

- the reference torch: ``fencecheck.releases.REFERENCE`` (the Makefile reads it with
  ``$(shell ...)``; the matrix's CPU entry, tests/site/test_notebooks.py and the plugin's
  message are built from it);
- the cell timeout: ``execute.timeout`` in _config.yml, read by
  ``fencecheck.chapter.cell_timeout`` (the suite, the site build, tools/mutate.py,
  tools/gate_lifted.py, benchmarks/bench.py);
- what a lesson is: ``fencecheck.chapter.is_lesson`` / ``lessons`` (front matter
  ``tensor-fences: {form: 3}``);
- the 15-line limit: ``fencecheck.lint.MAX_VISIBLE_LINES`` (the lint, tests/site/site_checks.py);
- GPU detection: ``fences.DEVICES`` with ``fences.available`` and ``fences.GATE``
  (``fences.needs``, fencecheck.record, tools/gate_lifted.py, tools/mutate.py).

``copies`` scans the tracked files for each fact's value or pattern outside its home; a
file that may quote it is named in the fact's ``allowed`` (why) or ``quotes`` (prose
quoting the current value, which must still hold it: a changed value makes a stale quote
fail here too). Not scanned: book/ (the chapters state what each release did and cite
the documentation they quote, a record, not a setting) except the quotes named below,
and results/ (recorded runs). The planted-copy tests below prove each check can fail.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

import fences
from fencecheck import chapter, lint, releases

ROOT = Path(__file__).resolve().parents[1]
#: This file: its patterns and planted copies hold every value.
SELF = "tests/test_one_home.py"


def tracked(root: Path) -> dict[str, str]:
    """Every tracked text file under ``root`` (git ls-files), path -> text."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    files = {}
    for name in filter(None, names):
        try:
            files[name] = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue   # a binary file, or one deleted in the work tree
    return files


@dataclass
class Fact:
    name: str
    home: str                          # the one file that holds the value
    pattern: re.Pattern                # what a copy of it looks like
    scope: re.Pattern                  # which paths are scanned
    allowed: dict[str, str] = field(default_factory=dict)   # path -> why it may hold it
    quotes: dict[str, str] = field(default_factory=dict)    # path -> text it must contain


def copies(fact: Fact, files: dict[str, str]) -> list[str]:
    """``path:line: text`` of each copy of the fact outside its home and its allowlist."""
    found = []
    for path, text in sorted(files.items()):
        if path in (fact.home, SELF) or path in fact.allowed or path in fact.quotes:
            continue
        if not fact.scope.search(path):
            continue
        for m in fact.pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{path}:{line}: {text.splitlines()[line - 1].strip()}")
    return found


def stale(fact: Fact, files: dict[str, str]) -> list[str]:
    """Each quote that no longer holds the current value (or whose file is gone)."""
    return [f"{path} should quote {want!r} ({fact.name})"
            for path, want in fact.quotes.items() if want not in files.get(path, "")]


#: Tracked paths outside the book's chapters and the recorded runs.
NOT_BOOK = re.compile(r"^(?!book/|results/)")
PYTHON = re.compile(r"^(?!book/|results/).*\.py$")
N = r"(?<![\w.\-\[])"   # a number starts here (not inside 2.15, x15, [-15:])


def facts(root: Path = ROOT) -> list[Fact]:
    ref = releases.REFERENCE
    minor = ".".join(ref.split(".")[:2])
    timeout = chapter.cell_timeout(root)
    seconds = f"{timeout:g}"
    lessons = [p.stem for p in chapter.lessons(root)]
    names = "|".join(map(re.escape, lessons))
    listed = rf"""["'](?:book/)?(?:{names})(?:\.md)?["']"""
    limit = lint.MAX_VISIBLE_LINES
    over = rf"{N}{limit}(?![\w.])"
    return [
        Fact("the reference torch", "fencecheck/releases.py",
             re.compile(rf"(?<![\d.]){re.escape(ref)}(?![\d])|docs/{re.escape(minor)}/"),
             # tests/ use release names as data (a results file, a skip reason): its pin
             # is the next fact.
             re.compile(r"^(?!book/|results/|tests/)"),
             allowed={"benchmarks/README.md": "a record of measured runs, each naming its torch",
                      "mutate-allowlist.yml": "reasons stating what each release does",
                      "mutate-results.json": "a recorded run: the torch it ran on"},
             quotes={"README.md": f"torch=={ref}",            # the install line a reader types
                     "_config.yml": f"docs/{minor}/"}),       # YAML cannot import: the docs' links
        Fact("the reference torch's pin", "fencecheck/releases.py",
             re.compile(rf"torch\s*==\s*{re.escape(ref)}(?![\d])"), NOT_BOOK,
             quotes={"README.md": f"torch=={ref}"}),
        Fact("the cell timeout", "_config.yml",
             re.compile(rf"(?i)timeout[^\n]{{0,40}}{N}{re.escape(seconds)}(?:\.0)?(?![\w.])"
                        rf"|{N}{re.escape(seconds)}(?:\.0)?\s*s?\s+(?:cell\s+)?timeout"),
             # tests/ give the processes they start timeouts of their own (the corpus' 20 s)
             re.compile(r"^(?!book/|results/|tests/)"),
             allowed={"benchmarks/README.md": "a record of a past run, with the timeout it had"}),
        Fact("what a lesson is", "fencecheck/chapter.py",
             re.compile(rf"{listed}\s*,\s*{listed}\s*,\s*{listed}"          # a list of lessons
                        r"""|-reference["']\s+in\b"""                       # "has a reference page"
                        r"|(?:\b|_)form\([^\n]*\)\s*[!=]=\s*\d"),         # form(...) == 3
             PYTHON),
        Fact("the visible-lines limit", "fencecheck/lint.py",
             re.compile(rf"(?i){over}\s+lines?\b|\b(?:lines?\b|visible)[^\n]{{0,40}}?{over}"
                        rf"|\b(?:over|more than|at most)\s+{over}"), NOT_BOOK,
             quotes={"docs/chapters.md": f"more than {limit} lines",
                     "docs/site-checks.md": f"at most {limit}",
                     "book/standard.md": f"more than {limit}"}),
        Fact("GPU detection", "fences/__init__.py",
             re.compile(r"\b(?:cuda|mps)\.is_available\b(?!\(\) is False)"   # a probe (not its skip reason)
                        r"|cuda\|mps|mps\|cuda"                             # a list of device kinds
                        r"""|["']needs\(["']"""),                           # 'needs("cuda"' in source
             PYTHON,
             allowed={"fencecheck/sphinx.py": "book_numbers counts GPU fences with 'needs(\"cuda\"' "
                                              "(owned elsewhere: to read fences.GATE)",
                      "tests/test_fences.py": "checks fences.needs against torch's own probe"}),
    ]


FACTS = {f.name: f for f in facts()}


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return tracked(ROOT)


@pytest.mark.parametrize("name", FACTS)
def test_each_fact_has_one_home(files, name):
    fact = FACTS[name]
    assert fact.home in files, f"{name}: its home {fact.home} is not tracked"
    assert copies(fact, files) == [], (
        f"{name}: a second copy; import or read it from {fact.home} (or name the file, "
        f"with why, in this test's allowlist)")
    assert stale(fact, files) == []


def test_every_allowlisted_file_still_exists(files):
    """An allowlist entry for a file that is gone is dead weight, and would hide a new one."""
    gone = [f"{fact.name}: {path}" for fact in FACTS.values()
            for path in [*fact.allowed, *fact.quotes] if path not in files]
    assert gone == []


# --- the checks can fail: planted copies ---------------------------------------------

PLANTS = {
    "the reference torch": ("tools/new.py", f'TORCH = "torch=={releases.REFERENCE}"\n'),
    "the reference torch's pin": ("tests/test_new.py", f'PIN = "torch=={releases.REFERENCE}"\n'),
    "the cell timeout": ("tools/new.py", "TIMEOUT = 120.0  # seconds a cell may run\n"),
    "what a lesson is": ("tools/new.py", 'LESSONS = ["creation", "dtypes", "promotion"]\n'),
    "the visible-lines limit": ("tools/new.py", 'GOALS = {"visible_cell": 15}\n'),
    "GPU detection": ("tools/new.py", "import torch\nok = torch.cuda.is_available()\n"),
}


def test_every_fact_has_a_planted_copy():
    assert set(PLANTS) == set(FACTS)


@pytest.mark.parametrize("name", FACTS)
def test_a_planted_copy_fails(files, name):
    path, text = PLANTS[name]
    if name == "the cell timeout":   # the plant must hold the value _config.yml holds now
        text = text.replace("120", f"{chapter.cell_timeout(ROOT):g}")
    planted = {**files, path: text}
    found = copies(FACTS[name], planted)
    assert found and all(f.startswith(f"{path}:") for f in found), found


@pytest.mark.parametrize("path, old, new, name", [
    # The copies the issue found, put back where they were.
    ("Makefile", "TORCH  ?= torch==$(or $(REFERENCE)", f"TORCH  ?= torch=={releases.REFERENCE} $(or $(REFERENCE)",
     "the reference torch's pin"),
    ("tools/mutate.py", "TIMEOUT = cell_timeout(ROOT)", "TIMEOUT = 120.0", "the cell timeout"),
    ("tests/site/test_site.py", "lesson = is_lesson(name)", 'lesson = f"{name}-reference" in pages',
     "what a lesson is"),
    ("tests/site/site_checks.py", "lines(o) > MAX_VISIBLE_LINES", "lines(o) > 15", "the visible-lines limit"),
    ("fencecheck/record.py", 'if available("cuda")', "if torch.cuda.is_available()", "GPU detection"),
])
def test_the_old_copies_put_back_fail(files, path, old, new, name):
    assert old in files[path], f"{path} no longer has {old!r}: update this test"
    found = copies(FACTS[name], {**files, path: files[path].replace(old, new)})
    assert any(f.startswith(f"{path}:") for f in found), found


def test_a_stale_quote_fails(files):
    """A quote that no longer holds the value (the value changed, the prose did not)."""
    fact = FACTS["the reference torch"]
    edited = {**files, "README.md": files["README.md"].replace(f"torch=={releases.REFERENCE}", "torch==9.9.9")}
    assert stale(fact, edited) == [f"README.md should quote 'torch=={releases.REFERENCE}' ({fact.name})"]


def test_the_checker_reads_a_planted_tree(tmp_path):
    """End to end on a git tree of its own: a planted copy is found, the home is not."""
    (tmp_path / "fencecheck").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "fencecheck" / "releases.py").write_text(f'REFERENCE = "{releases.REFERENCE}"\n')
    (tmp_path / "tools" / "copy.py").write_text(f'PIN = "torch=={releases.REFERENCE}"\n')
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    found = copies(FACTS["the reference torch's pin"], tracked(tmp_path))
    assert found == [f'tools/copy.py:1: PIN = "torch=={releases.REFERENCE}"']


# --- the places that cannot import the home agree with it ----------------------------

def test_the_makefile_reads_the_reference_torch():
    """The Makefile's default TORCH is the pin of releases.REFERENCE, as make expands it."""
    out = subprocess.run(["make", "-s", "-p", "-n", "help"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert re.search(rf"^REFERENCE := {re.escape(releases.REFERENCE)}$", out, re.M), out[-2000:]
    assert re.search(rf"^WANTED := torch=={re.escape(releases.REFERENCE)} ", out, re.M)


def test_the_reference_is_in_the_matrix():
    assert f"{releases.REFERENCE}+cpu" in releases.names()


def test_the_course_is_the_lessons():
    """_toc.yml's "The course" lists exactly the lessons, in order, and the landing page
    has a reading time for each (fencecheck.sphinx reads the lessons from chapter.lessons)."""
    from fencecheck import sphinx

    lessons = [p.relative_to(ROOT).with_suffix("").as_posix() for p in chapter.lessons(ROOT)]
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    course = next(p for p in toc["parts"] if p["caption"] == "The course")
    assert [c["file"] for c in course["chapters"]] == lessons
    minutes = {k for k in sphinx.book_numbers(ROOT) if k.startswith("minutes_")}
    assert minutes == {"minutes_" + name.split("/")[-1] for name in lessons}


def test_gpu_detection_is_the_devices_table():
    """fences.needs asks the probe fences.DEVICES names, and GATE finds each kind's gate."""
    assert set(fences.DEVICES) == {"cuda", "mps"}
    for device in fences.DEVICES:
        assert fences.GATE.search(f'if needs("{device}"):')
        assert fences.available(device) == bool(fences.probe(device)())
    assert fences.GATE.search("if fences.needs(kind):") and not fences.GATE.search("needs_cuda = 1")


def test_every_lesson_has_its_row_on_the_landing_page_and_a_search():
    """docs/chapters.md's steps for a new lesson that no build refuses: the course table's row
    with its reading time, and a search that must list it first (tests/site)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("site_checks", ROOT / "tests" / "site" / "site_checks.py")
    site_checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site_checks)
    index = (ROOT / "book" / "index.md").read_text()
    for lesson in chapter.lessons(ROOT):
        assert f"{{book}}`minutes_{lesson.stem}`" in index, f"book/index.md has no row for {lesson.stem}"
        assert lesson.stem in site_checks.SEARCHES.values(), f"SEARCHES has no search for {lesson.stem}"
