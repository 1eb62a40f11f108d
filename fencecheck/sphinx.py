"""Sphinx extension for the book's site.

It refuses what the tests refuse, runs the chapters the execution cache lacks
(``_run_lacking``), marks each fence with its record (badges, the ``{record}`` directive),
folds proofs and lesson checks, offers each page's executed notebook with a setup cell
and the project's wheel, and quotes the book's numbers (``{book}``). Sphinx sees neither
results/, nor the numbers, nor the wheel: the ``*_outdated`` handlers read again the
pages these change. Enabled in ``_config.yml`` under ``sphinx: extra_extensions``.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.errors import SphinxError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

from . import chapter as chapters
from . import jupyter, lint, mutation, search
from . import record as records
from . import verified
from .upstream import myst_nb, theme
from .upstream import sphinx as upstream_sphinx

logger = logging.getLogger(__name__)


def _check_source(app, docname: str, source: list[str]) -> None:
    """A page without its jupytext header, or failing the lint, is a warning (``-W`` fails)."""
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".md":
        return
    text = source[0]
    for problem in chapters.header_problems(text) or chapters.lint_problems(text, chapters.parse(text, path)):
        logger.warning(problem, location=docname, type="fences", subtype="chapter")


def _offer_notebook(app, pagename, templatename, context, doctree) -> None:
    """Offer the executed notebook as an .ipynb download, for Jupyter, setup cells first.

    myst-nb writes jupyter_execute/<page>.ipynb from the notebook it read, so a page served
    from the cache has no outputs (myst-nb 1.x): they are merged back from the cache."""
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    executes = app.env.mystnb_config.execution_mode != "off"  # off: nothing executed to merge
    if executes and any(c.cell_type == "code" and c.execution_count is None for c in nb.cells):
        from .upstream.jupyter_cache import get_cache

        try:
            _, nb = get_cache(app.env.mystnb_config.execution_cache_path).merge_match_into_notebook(nb)
        except KeyError:
            logger.warning(f"no executed notebook in the cache for {pagename}",
                           location=pagename, type="fences", subtype="download")
    for problem in run_problems(nb) if executes else []:
        logger.warning(f"the executed notebook did not run top to bottom: {problem}",
                       location=pagename, type="fences", subtype="notebook")
    base = app.config.html_baseurl
    jupyter.for_jupyter(nb, getattr(app.config, "extlinks", None) or {},
                        base.rstrip("/") + "/" if base else "../../",
                        {**(app.config.myst_substitutions or {}), **_numbers(app)})
    nb.cells[0:0] = setup_cells(nb)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    context["ipynb_source"] = f"{pagename}.ipynb"   # the theme's menu offers it (upstream.theme)


def _offer_wheel(app, pagename, templatename, context, doctree) -> None:
    """Beside a chapter's ".ipynb" in its download menu: the wheel its first cell installs."""
    if context.get("ipynb_source"):
        url = f"{context['pathto']('_sources', 1)}/{WHEEL_DIR.split('/', 1)[1]}/{wheel_name()}"
        theme.offer_wheel(context, url, wheel_name())


#: The wheel of this project, shipped beside the downloadable notebooks.
WHEEL_DIR = "_sources/book"
#: The pages a chapter's line under its title links to.
VERIFIED, CHANGES, GLOSSARY = "book/verified", "book/changes", "book/glossary"

SETUP_NOTE = """**Run the next cell first** if you downloaded this notebook. It installs what
this chapter imports and your Python lacks ({needs}, the versions the site ran), and the
book's helpers (the `fences` package) from `{wheel}`, which the site offers beside this
notebook (the page's download menu): save it in the same folder. It never replaces a
package you have: where your version differs from the site's it says so, and names the
fences whose recorded result may depend on it. It does not install torch: the site ran
torch {torch}; yours is printed."""

SETUP_CODE = """# Installs only what is missing; replaces nothing you have.
import importlib, importlib.metadata as md, pathlib, subprocess, sys
NEEDS = {needs!r}  # distribution: (the site's version, fences that use it)
WHEEL = {wheel!r}  # the book's helpers, saved beside this notebook


def installed(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


todo = [f"{{n}}=={{v}}" for n, (v, _) in NEEDS.items() if installed(n) is None]
for n, (v, used) in NEEDS.items():
    if installed(n) not in (None, v):
        print(f"{{n}} {{installed(n)}} here, {{v}} on the site: kept; its fences may differ:",
              ", ".join(used) or "none named")
if installed("tensor-fences") is None:
    if not pathlib.Path(WHEEL).exists():
        raise FileNotFoundError(f"save {{WHEEL}} (offered beside this notebook) here")
    todo.append(WHEEL)
elif installed("tensor-fences") != {version!r}:
    print("tensor-fences", installed("tensor-fences"), "here, the site's is {version}: kept")
if todo:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *todo])
    importlib.invalidate_caches()
print("torch", installed("torch"), "(the site ran {torch})")"""


@functools.cache
def _owners() -> dict[str, list[str]]:
    """Module -> the distributions that provide it: read once (a scan of over a second)."""
    from importlib import metadata

    return metadata.packages_distributions()


def _imports(nb) -> tuple[list, list[tuple[str, str]]]:
    """(cell, its nodes: ``lint._nodes``, cached) for each code cell of ``nb`` that parses,
    and (name bound, its top-level module) for each of their imports."""
    import ast

    parsed, bound = [], []
    for cell in nb.cells:
        found = lint._nodes(cell.source) if cell.cell_type == "code" else ()
        if not found:
            continue
        parsed.append((cell, found))
        for node in found:
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
                for alias in node.names:
                    module = getattr(node, "module", None) or alias.name
                    bound.append(((alias.asname or alias.name).split(".")[0], module.split(".")[0]))
    return parsed, bound


def chapter_needs(nb) -> dict[str, str]:
    """What the chapter's code imports, as distribution -> installed version (not torch,
    not this project, not the standard library)."""
    import sys
    from importlib import metadata

    parsed, bound = _imports(nb)
    modules = {module for _, module in bound}
    if any(re.search(r"\bfences\.quiz", cell.source) for cell, _ in parsed):
        modules.add("jupyterquiz")   # the runtime imports it when it shows a quiz
    return {dist: metadata.version(dist)
            for module in sorted(modules - set(sys.stdlib_module_names) - {"torch", "fences"})
            for dist in _owners().get(module, [])}


#: Distributions a fence uses through the helpers rather than by name.
THROUGH_HELPERS = {"hypothesis": ("forall", "strategies", "st", "fst")}


def fences_using(nb) -> dict[str, list[str]]:
    """Distribution -> the ids of the chapter's fences whose code uses it: a name it
    was imported as (``np`` for numpy), or the helper that runs it (``fences.forall``)."""
    import ast

    parsed, bound = _imports(nb)
    alias = dict(bound)
    found: dict[str, list[str]] = {}
    for cell, tree in parsed:
        ident = lint.fence_id(cell) if lint.is_fence(cell) else None
        if not ident:
            continue
        names = {n.id for n in tree if isinstance(n, ast.Name)} | {n.attr for n in tree if isinstance(n, ast.Attribute)}
        dists = {d for name in names if name in alias for d in _owners().get(alias[name], [])}
        dists |= {d for d, helpers in THROUGH_HELPERS.items() if names & set(helpers)}
        for dist in dists:
            found.setdefault(dist, []).append(ident)
    return found


def wheel_version() -> str:
    """This project's version with the digest of what the wheel holds, so pip never reuses
    a stale copy."""
    import tomllib

    from . import cachekey

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    digest = hashlib.sha256(cachekey.digest().encode())
    digest.update(pyproject.read_bytes())
    return f"{tomllib.loads(pyproject.read_text())['project']['version']}+g{digest.hexdigest()[:12]}"


def wheel_name() -> str:
    return f"tensor_fences-{wheel_version()}-py3-none-any.whl"


def setup_cells(nb) -> list:
    """The first cells of a downloaded notebook: say what to do, then install what it needs."""
    from nbformat.v4 import new_code_cell, new_markdown_cell

    from fences import installed_torch_version

    needs = chapter_needs(nb)
    users = fences_using(nb)
    torch = getattr(installed_torch_version(), "__version__", "unknown")
    listed = ", ".join(f"{n} {v}" for n, v in needs.items()) or "nothing else"
    note = SETUP_NOTE.format(needs=listed, wheel=wheel_name(), torch=torch)
    code = SETUP_CODE.format(needs={n: (v, users.get(n, [])) for n, v in needs.items()},
                             wheel=wheel_name(), version=wheel_version(), torch=torch)
    return [new_markdown_cell(note),
            new_code_cell(code, metadata={"tags": ["setup-for-download"],
                                          "jupyter": {"source_hidden": True}})]


def _fold_proofs(app, doctree) -> None:
    """On the page: each proof folded behind its ``# Proves:`` text (its table shown off a
    lesson, ``lint.proof_output_shown``); each lesson fence's checks folded after its
    teaching part and output, behind "✓ N checks" (``lint.lesson_parts``)."""
    path = Path(app.env.doc2path(app.env.docname))
    try:
        lesson = path.exists() and chapters.is_lesson(path.read_text(encoding="utf-8"))
    except chapters.ChapterError:   # front matter that does not parse: _check_source says so
        lesson = False
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") != "cell_code":
            continue
        tags = (cell.get("cell_metadata") or {}).get("tags", [])
        source = next(cell.findall(nodes.literal_block), None)
        if lint.PROOF_TAG in tags:
            table = any(out.get("nb_element") == "cell_code_output" and next(out.findall(nodes.table), None)
                        for out in cell.children)
            myst_nb.fold_cell(cell, *lint.fold_caption(source.astext() if source else ""),
                              mode="input" if lint.proof_output_shown(lesson, bool(table)) else "all")
        elif "fence" in tags and source is not None:
            _fold_checks(cell, source)


def _code(source, text: str):
    """A copy of the literal block ``source`` holding ``text``."""
    block = source.deepcopy()
    block.children = [nodes.Text(text)]
    block.rawsource = text
    return block


def _fold_checks(cell, source) -> None:
    """Split a lesson fence's code on the page: the teaching part stays in the cell with
    its output; the check part goes to a cell of its own after it, its code folded."""
    teaching, checks = lint.lesson_parts(source.astext())
    if not teaching:
        return
    source.parent.replace(source, _code(source, teaching))
    code = nodes.container(nb_element="cell_code_source", classes=["cell_input"])
    code += _code(source, checks)
    after = nodes.container(nb_element="cell_code", classes=["cell", "tf-checks"])
    after += code
    myst_nb.fold_cell(after, *lint.checks_caption(lint.check_count(checks),
                                                  quiz=lint._calls_any(checks, {"quiz"})), mode="input")
    cell.parent.insert(cell.parent.index(cell) + 1, after)


def wheel_cache(app) -> Path:
    """Where built wheels are kept between builds: ``fences_wheel_cache``, else
    ``.wheels`` beside the output folder (as myst-nb's ``.jupyter_cache``)."""
    return Path(getattr(getattr(app, "config", None), "fences_wheel_cache", "")
                or Path(app.outdir).parent / ".wheels")


def _ship_wheel(app, exception) -> None:
    """Put this project's wheel beside the notebooks (the only wheel there), copied from
    ``wheel_cache``, where it is built when no build made it before."""
    if exception is not None or app.builder.format != "html":
        return
    import shutil

    name = wheel_name()
    target = Path(app.outdir) / WHEEL_DIR
    kept = wheel_cache(app) / name
    if not kept.exists() and not _build_wheel(kept.parent, name):
        return
    if not (target / name).exists():
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kept, target / f".{name}.part")
        (target / f".{name}.part").replace(target / name)
    for old in target.glob("*.whl"):
        if old.name != name:
            old.unlink()


def _build_wheel(folder: Path, name: str) -> bool:
    """Build the wheel ``name`` into ``folder`` (the only one kept there); False, and a
    warning, when pip could not."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from . import cachekey

    root = Path(__file__).resolve().parent.parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=folder) as out:
        # A copy whose pyproject names the version: setuptools reads no other override.
        shutil.copytree(cachekey.RUNTIME, Path(tmp) / "fences",
                        ignore=shutil.ignore_patterns("__pycache__"))
        text = (root / "pyproject.toml").read_text()
        (Path(tmp) / "pyproject.toml").write_text(
            re.sub(r'(?m)^version = ".*"$', f'version = "{wheel_version()}"', text, count=1))
        shutil.copy(root / "README.md", Path(tmp) / "README.md")
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                               "--no-build-isolation", "-w", out, tmp],
                              capture_output=True, text=True)
        built = Path(out) / name
        if done.returncode == 0 and built.exists():
            for old in folder.glob("*.whl"):
                old.unlink()
            built.replace(folder / name)   # whole or not at all: a stopped build leaves none
            return True
    logger.warning("could not build the wheel for downloaded notebooks: "
                   f"{done.stderr[-500:] if done.returncode else f'pip made no {name}'}",
                   type="fences", subtype="wheel")
    return False


def run_problems(nb) -> list[str]:
    """Why an executed notebook is not a clean top-to-bottom run (counts 1..N, no error
    output, valid), empty when it is. tests/site/test_notebooks.py runs it afresh."""
    import nbformat

    problems = []
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        problems.append(f"invalid notebook: {exc.message}")
    cells = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in cells]
    if counts != list(range(1, len(cells) + 1)):
        problems.append(f"execution counts are {counts}, not 1..{len(cells)}")
    for n, cell in enumerate(cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"code cell {n} has an error output: {out.get('ename')}")
    return problems


class Cited(SphinxDirective):
    """``{cited}`` with ``:source:`` and ``:version:``: an admonition "Cited, not verified
    here" naming its source and release (``fencecheck.lint`` refuses one lacking either)."""

    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = {"source": directives.uri, "version": directives.unchanged_required,
                   "class": directives.class_option}

    def run(self):
        title = "Cited, not verified here" + (f": {self.arguments[0]}" if self.arguments else "")
        node = nodes.admonition(classes=["tf-cited"] + self.options.get("class", []))
        node += nodes.title(text=title)
        self.state.nested_parse(self.content, self.content_offset, node)
        source = self.options.get("source", "")
        node += nodes.paragraph("", "", nodes.Text("Source: "), nodes.reference(refuri=source, text=source),
                                nodes.Text(f" ({self.options.get('version', 'no version given')})"))
        return [node]


def _under_title(doctree, para) -> None:
    """Put ``para`` right after the page's first title, if it has one."""
    section = next(doctree.findall(nodes.section), None)
    if section is not None:
        title = section.next_node(nodes.title)
        title.parent.insert(title.parent.index(title) + 1, para)


def _executed_with(app, doctree, docname) -> None:
    """"Executed with torch X on DATE" under the title of every executed page: the torch of
    this build (the cache is keyed on it), the date of myst-nb's record of the run."""
    import datetime

    from fences import installed_torch_version, torch_build

    data = myst_nb.exec_data(app.env, docname)
    cells = [n for n in doctree.findall(nodes.container) if "cell" in n.get("classes", [])]
    if not data or not data.get("succeeded") or not cells:
        return
    when = datetime.datetime.fromtimestamp(data["mtime"], datetime.timezone.utc)
    _under_title(doctree, nodes.paragraph(
        "", f"Executed with {torch_build(installed_torch_version())} on {when:%Y-%m-%d}. "
            "Every fence on this page passed in that run.", classes=["tf-executed"]))


def reference_run(runs: list[dict]) -> str:
    """The run whose words the errors page quotes: the one of the torch building this site
    (the reference torch, in `make book`), else the newest run."""
    from fences import installed_torch_version

    here = getattr(installed_torch_version(), "__version__", None)
    run = next((r for r in runs if r.get("torch") == here), runs[-1] if runs else None)
    return records.label(run) if run else ""


def chapter_titles(root: Path) -> dict[str, str]:
    """Chapter path -> its first heading, for every page in _toc.yml."""
    titles = {}
    for path in chapters.toc_files(root):
        if path.exists():
            m = re.search(r"^#\s+(.+?)\s*$", path.read_text(encoding="utf-8"), re.M)
            titles[path.relative_to(root).as_posix()] = records.plain(m.group(1)) if m else path.stem
    return titles


def book_numbers(root: Path) -> dict[str, str]:
    """What the landing page quotes about the book, read from every page in _toc.yml:
    fences, cited statements, GPU fences, exercises, and each lesson's reading time
    (``lint.reading_minutes``, plus five an exercise); and the wheel's link."""
    totals = dict.fromkeys(("fences", "cited", "gpu", "exercises"), 0)
    numbers = {}
    for path in chapters.toc_files(root):
        if not path.exists() or chapters.header_problems(text := path.read_text("utf-8")):
            continue
        try:
            lesson = chapters.is_lesson(text)
        except chapters.ChapterError:   # the page's own read names the mistake, with its file
            continue
        nb = chapters.parse(text, path)
        fence_cells = [c for c in nb.cells if lint.is_fence(c)]
        lines = text.splitlines()
        exercises = sum(bool(lint.EXERCISE.match(line)) for line in lines)
        gpu = sum('needs("cuda"' in c.source or 'needs("mps"' in c.source for c in fence_cells)
        totals["fences"] += len(fence_cells) - gpu  # what ran here; the GPU ones are apart
        totals["cited"] += sum(bool(lint.CITED.match(line)) for line in lines)
        totals["gpu"] += gpu
        totals["exercises"] += exercises
        if lesson:
            prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
            code = sum(len(lint.visible_code(c).strip().splitlines())
                       for c in nb.cells if c.cell_type == "code")
            numbers[f"minutes_{path.stem}"] = str(round(lint.reading_minutes(len(prose.split()), code))
                                                  + 5 * exercises)
    numbers.update({f"index_{k}": str(v) for k, v in totals.items()})
    name = wheel_name()
    numbers["wheel_link"] = f'<a href="../{WHEEL_DIR}/{name}">{name}</a>'
    return numbers


def _named(handler):
    """A handler whose ``ChapterError`` (invalid YAML, with its file and line) or invalid
    results file stops the build with its message, not a traceback."""
    @functools.wraps(handler)
    def run(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except chapters.ChapterError as exc:
            raise SphinxError(str(exc)) from None
        except records.BadFile as exc:
            raise SphinxError(f"the record (results/) is invalid:\n{exc}") from None

    return run


@_named
def _numbers(app) -> dict[str, str]:
    if getattr(app, "_tf_numbers", None) is None:
        app._tf_numbers = book_numbers(Path(app.srcdir))
    return app._tf_numbers


class BookRole(SphinxRole):
    """``{book}`index_fences```: one of ``book_numbers`` (``wheel_link``: a link). Each page
    keeps what it quoted (``tf_quoted``) for ``_outdated``."""

    def run(self):
        numbers = _numbers(self.env.app)
        if self.text not in numbers:
            msg = self.inliner.reporter.error(
                f"book: no number {self.text!r}; one of {', '.join(numbers)}", line=self.lineno)
            return [self.inliner.problematic(self.rawtext, self.rawtext, msg)], [msg]
        value = numbers[self.text]
        self.env.metadata[self.env.docname].setdefault("tf_quoted", {})[self.text] = value
        if self.text == "wheel_link":
            return [nodes.raw("", value, format="html")], []
        return [nodes.Text(value)], []


def _configure(app, config) -> None:
    """``repository.url`` set in _config.yml: the repository and launch buttons (Colab,
    Binder) shown; unset: nothing points at a repository. The site search finds a pasted
    message (upstream/search.js), unless the book names its own scorer."""
    if not config.html_search_scorer:
        config.html_search_scorer = str(Path(__file__).with_name("upstream") / "search.js")
    options = config.html_theme_options
    url = options.get("repository_url") or ""
    options["use_repository_button"] = bool(url)
    launch = options.setdefault("launch_buttons", {})
    if url:
        launch.setdefault("colab_url", "https://colab.research.google.com")
        launch.setdefault("binderhub_url", "https://mybinder.org")
    else:
        launch.update(colab_url="", binderhub_url="")


def _key_the_cache(app, config) -> None:
    """Point myst-nb's execution cache at a folder named by ``fencecheck.cachekey.key()``."""
    from . import cachekey

    base = config.nb_execution_cache_path or str(cachekey.cache_base(Path(app.srcdir)))
    config.nb_execution_cache_path = str(cachekey.cache_path(Path(base)))


def _run_lacking(app) -> None:
    """Run the chapters the execution cache lacks under the test plugin, which stores each
    run, before myst-nb reads the cache (one worker a chapter, ``FENCES_WORKERS``). A failure
    stops the build by SystemExit: jupyter-book's traceback would bury pytest's report."""
    import os
    import subprocess
    import sys

    from . import executed

    if not app.config.fences_run_lacking or app.config.nb_execution_mode != "cache":
        return   # off, or myst-nb executes every page itself ("force") or none ("off")
    root = Path(app.srcdir)
    lacking = [p.relative_to(root).as_posix() for p in executed.missing(root)]
    if not lacking:
        return
    logger.info("fences: running the chapters the execution cache lacks: " + " ".join(lacking))
    workers = os.environ.get("FENCES_WORKERS", "-n auto --dist loadscope").split() if len(lacking) > 1 else []
    ran = subprocess.run([sys.executable, "-m", "pytest", *workers, "-q", "-p", "no:cacheprovider",
                          *lacking], cwd=root)
    if ran.returncode:
        raise SystemExit(f"make book: a chapter failed its fences (pytest's report above; "
                         f"the site is as it was): {' '.join(lacking)}")


@_named
def _check_book(app) -> None:
    """Across chapters: every fence id unique (the lint's book-wide check)."""
    for problem in chapters.book_problems(Path(app.srcdir)):
        logger.warning(problem, type="fences", subtype="chapter")


class Record:
    """The record as this build sees it: current and stale runs, the book's fences, and
    ``key``, the digest of all the record pages show."""

    def __init__(self, srcdir: Path, results: Path):
        self.current, self.digests = records.read_book(srcdir)
        runs = records.load(results) if results.exists() else []
        self.runs, self.stale = records.split(runs, self.current, self.digests)
        self.labels = {f.id: f.labels for f in self.current}   # each fence's # Records: words
        digest = hashlib.sha256()
        for path in sorted(results.glob("*.json")):
            digest.update(path.name.encode() + path.read_bytes())
        scores = Path(srcdir) / mutation.RESULTS_NAME   # the page's make mutate section
        if scores.exists():
            digest.update(scores.read_bytes())
        for f in self.current:   # the words too: a comment, so not in f.code
            digest.update(f"{f.id} {f.chapter} {f.code} {f.section} {sorted(f.labels.items())}".encode())
        digest.update(repr(sorted(self.digests.items())).encode())
        self.key = digest.hexdigest()
        self.srcdir = Path(srcdir)

    @functools.cached_property
    def page_key(self) -> str:
        """What a page of ``{record}`` parts is written from: ``key``, the chapters' titles
        and the reference run (the errors page names both)."""
        digest = hashlib.sha256(self.key.encode())
        digest.update(repr(sorted(chapter_titles(self.srcdir).items())).encode())
        digest.update(reference_run(self.runs).encode())
        return digest.hexdigest()


@_named
def _record(app) -> Record:
    if getattr(app, "_tf_record", None) is None:
        app._tf_record = Record(Path(app.srcdir), Path(app.srcdir) / app.config.fences_results)
    return app._tf_record


#: What a page keeps between builds for ``_outdated`` is in ``env.metadata[page]``, which
#: Sphinx empties when it reads the page again and merges from a parallel read (myst-parser
#: keeps its slugs there too): ``tf_record_page``, the ``Record.page_key`` its ``{record}``
#: parts were written from; ``tf_marks``, its fences and their badges' digest; ``tf_quoted``.


def page_marks(rec: Record, ids: list[str]) -> tuple[list[tuple[str, records.Badge]], str]:
    """What the record puts on a chapter page with the fences ``ids``: (fence, its badge)
    for each, and the line under the title (``_add_badges`` writes exactly this)."""
    marks = [(i, records.badge(i, rec.runs, rec.labels.get(i))) for i in ids]
    return marks, records.page_summary(ids, rec.runs) if ids else ""


def marks_digest(rec: Record, ids: list[str]) -> str:
    return hashlib.sha256(repr((list(ids), page_marks(rec, ids))).encode()).hexdigest()


def _fence_cells(doctree) -> list[tuple[nodes.container, str]]:
    """(cell, its ``fence-id``) for each fence on a page, in order."""
    return [(cell, str(ident)) for cell in doctree.findall(nodes.container)
            if cell.get("nb_element") == "cell_code"
            and (ident := (cell.get("cell_metadata") or {}).get("fence-id"))]


def _note_marks(app, doctree) -> None:
    """Keep, for the page just read, its fences and the digest of their badges."""
    ids = [ident for _, ident in _fence_cells(doctree)]
    app.env.metadata[app.env.docname]["tf_marks"] = (ids, marks_digest(_record(app), ids))


def _outdated(app, env, added, changed, removed) -> list[str]:
    """The pages showing what changed unseen by Sphinx: every page when the wheel's name did
    (its download menu and notebook name it); each page whose ``{book}`` numbers, ``{record}``
    parts (``Record.page_key``) or badges (``marks_digest``) did. A page read again costs
    no execution: its outputs come from the cache."""
    numbers, rec = _numbers(app), _record(app)
    key = rec.page_key
    marks_changed = getattr(env, "tf_marks_key", None) != rec.key   # badges are a function of the record
    env.tf_marks_key = rec.key   # every page's digest is of this record, or it is read again
    others = sorted(env.found_docs - added - changed)   # those Sphinx reads anyway aside
    if getattr(env, "tf_wheel", None) != (wheel := wheel_name()):
        env.tf_wheel = wheel
        return others
    out = []
    for doc in others:
        kept = env.metadata.get(doc, {})
        ids, digest = kept.get("tf_marks", ([], None))
        if any(numbers.get(k) != v for k, v in kept.get("tf_quoted", {}).items()) \
                or kept.get("tf_record_page", key) != key \
                or marks_changed and digest is not None and marks_digest(rec, ids) != digest:
            out.append(doc)
    return out


class unsearched_html(nodes.comment):  # noqa: N801 - docutils dispatches on the class name
    """Raw HTML that Sphinx's search does not index (7.4 skips ``nodes.comment``): the
    fence grid, hundreds of ids and marks that would flood a search."""


def _visit_unsearched_html(self, node):
    self.body.append(node["html"])
    raise nodes.SkipNode


def _skip(self, node):
    raise nodes.SkipNode


class RecordDirective(SphinxDirective):
    """``{record} part``: one part of the Verified-on page, from the record (``mutation``:
    ``make mutate``'s scores; ``errors``: the errors page, every message a fence proves)."""

    required_arguments = 1
    PARTS = ("provenance", "summary", "never-run", "changes", "other-values", "grid",
             "mutation", "errors")

    #: Pages whose fences show how to write a fence, not what torch does: their messages
    #: are proved, and explained, where the book teaches them.
    NOT_ON_ERRORS_PAGE = ("book/standard.md",)

    def errors(self, rec, url) -> list:
        """The errors page's entries, a section per chapter (in the page's contents), each
        message an index entry at its entry: a pasted message is found."""
        ref = reference_run(rec.runs)
        raised = records.errors(rec.runs, [f for f in rec.current if f.chapter not in self.NOT_ON_ERRORS_PAGE], ref)
        if not raised:
            return [nodes.raw("", '<p class="tf-note">No messages recorded yet: run <code>make matrix</code> '
                                  "(the record holds each fence's messages).</p>", format="html")]
        out = [addnodes.index(entries=[("single", words, anchor, "main", None)
                                       for anchor, found in verified.error_anchors(raised) for words in found])]
        for title, html in verified.errors_sections(raised, url, ref, chapter_titles(Path(self.env.app.srcdir))):
            section = nodes.section(ids=[f"errors-{nodes.make_id(title)}"])
            section += nodes.title(title, title)
            section += nodes.raw("", html, format="html")
            out.append(section)
        return out

    def run(self):
        part = self.arguments[0]
        if part not in self.PARTS:
            raise self.error(f"record: unknown part {part!r}; one of {', '.join(self.PARTS)}")
        app, here = self.env.app, self.env.docname
        rec = _record(app)
        self.env.metadata[here]["tf_record_page"] = rec.page_key

        def url(chapter: str) -> str:
            return app.builder.get_relative_uri(here, Path(chapter).with_suffix("").as_posix())

        if part == "errors":
            return self.errors(rec, url)
        if part == "grid":
            node = unsearched_html()
            node["html"] = verified.grid_html(rec.runs, rec.current, url)
            return [node]
        changes = records.changes(rec.runs, rec.current) if part in ("changes", "other-values") else None
        html = {"provenance": lambda: verified.provenance_html(rec.runs, rec.stale),
                "summary": lambda: verified.summary_html(rec.runs, rec.current),
                "never-run": lambda: verified.never_run_html(
                    records.never_run(rec.runs, rec.current), url) if rec.runs else "",
                "changes": lambda: verified.changes_html(changes, rec.current, url),
                "other-values": lambda: verified.other_values_html(changes, rec.current, url),
                "mutation": lambda: mutation.section_html(Path(app.srcdir))}[part]()
        return [nodes.raw("", html, format="html")]


def _add_badges(app, doctree, docname) -> None:
    """On each fence's cell the id ``fence-<id>`` (the Verified-on page links to it) and, when
    its record carries news, a badge linking to its row there; and the page's line under its
    title, whose "fences" links to the glossary."""
    cells = _fence_cells(doctree)
    if not cells:
        return
    marks, summary = page_marks(_record(app), [ident for _, ident in cells])
    href = app.builder.get_relative_uri(docname, VERIFIED)
    for (cell, _), (ident, badge) in zip(cells, marks):
        cell["ids"].append(f"fence-{ident}")
        if badge.kind in records.NEWS:
            link = nodes.reference("", badge.text, refuri=f"{href}#fence-{ident}", reftitle=badge.title,
                                   classes=["tf-badge", f"tf-badge-{badge.kind}"])
            cell.insert(0, nodes.paragraph("", "", link, classes=["tf-badge-line"]))
    para = nodes.paragraph(classes=["tf-page-record"])
    before, word, after = summary.partition(" fences ")
    if word and GLOSSARY in app.env.found_docs:   # the page's first word of the book's own: defined
        term = app.builder.get_relative_uri(docname, GLOSSARY) + "#term-fence"
        para += [nodes.Text(before + " "), nodes.reference("", "fences", refuri=term),
                 nodes.Text(" " + after + " ")]
    else:
        para += nodes.Text(summary + " ")
    changes = app.builder.get_relative_uri(docname, CHANGES)
    para += nodes.reference("", "What changed between releases", refuri=changes)
    _under_title(doctree, para)


def _sweep(app, exception) -> None:
    """After an HTML build: remove the pages, sources and notebooks of documents no longer
    in the book, which would pass for built pages."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    keep = set(app.env.found_docs) | {"genindex", "search", "index", "py-modindex"}
    for page in out.rglob("*.html"):
        rel = page.relative_to(out)
        doc = rel.with_suffix("").as_posix()
        if rel.parts[0].startswith("_") or doc in keep:
            continue
        for stale in [page, *(out / "_sources").glob(f"{doc}.*"),
                      *(out.parent / "jupyter_execute").glob(f"{doc}.*")]:
            stale.unlink(missing_ok=True)


def _static_outdated(app, env, added, changed, removed) -> list[str]:
    """The landing page, when the static files' digest changed: Sphinx (7.4) copies them
    (and ``language_data.js``, the search's stemmer and scorer) only when it writes a page."""
    files = [Path(app.config.html_search_scorer)] if app.config.html_search_scorer else []
    for entry in app.config.html_static_path:
        folder = Path(app.confdir) / entry
        files += sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else [folder]
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path).encode() + b"\0" + (path.read_bytes() if path.exists() else b""))
    if getattr(env, "tf_static_digest", None) == digest.hexdigest():
        return []
    env.tf_static_digest = digest.hexdigest()
    return [app.config.root_doc] if app.config.root_doc in env.found_docs - added - changed else []


def setup(app):
    app.add_config_value("fences_results", "results", "env")
    app.add_config_value("fences_wheel_cache", "", "")
    app.add_config_value("fences_run_lacking", False, "")
    app.add_node(unsearched_html, html=(_visit_unsearched_html, None),
                 latex=(_skip, None), text=(_skip, None), man=(_skip, None), texinfo=(_skip, None))
    app.add_directive("record", RecordDirective)
    app.add_directive("cited", Cited)
    app.add_role("book", BookRole())
    for event, handler in [
            ("config-inited", _key_the_cache), ("config-inited", _configure), ("builder-inited", _check_book),
            ("builder-inited", _run_lacking), ("source-read", _check_source),
            ("env-get-outdated", _outdated), ("env-get-outdated", _static_outdated),
            ("env-get-outdated", upstream_sphinx.entries_outdated),
            ("doctree-read", _note_marks), ("doctree-read", _fold_proofs),
            ("doctree-resolved", _add_badges), ("doctree-resolved", _executed_with),
            ("html-collect-pages", upstream_sphinx.keep_index_entries),
            ("html-page-context", lambda app, page, template, context, doctree: theme.dedupe_scripts(context)),
            ("build-finished", _ship_wheel), ("build-finished", _sweep)]:
        app.connect(event, handler)
    app.connect("html-page-context", _offer_notebook, priority=500)
    app.connect("html-page-context", _offer_wheel, priority=900)  # after the theme's menu
    # A new stemming rule (search.ENV_VERSION) or a change of what a page's read keeps is a
    # new env_version: no page keeps the old (4: what _outdated reads is in env.metadata).
    app.add_search_language(search.BookEnglish)
    return {"version": "4", "env_version": 10 * 4 + search.ENV_VERSION,
            "parallel_read_safe": True, "parallel_write_safe": True}
