"""Sphinx extension for the book's site.

- The site refuses what the test suite refuses: every page must be a
  jupytext MyST notebook (or myst-nb would render it without executing
  anything) and must not carry a tag that lets a cell pass without
  raising. Each problem is a warning naming the file, so
  ``jupyter-book build -W`` fails on it.
- The execution cache is keyed on torch, the runtime (``fences``) and the installed
  packages (``fencecheck.cachekey``), so no build serves a stale page. With
  ``fences_run_lacking`` on (the book's ``_config.yml``), the chapters whose run the
  cache lacks run first, through the test plugin, which stores each run
  (``_run_lacking``): the site renders what the tests ran; a failing chapter stops the
  build. In this process, which imports what the check needs anyway.
- Every executed page says, under its title, which torch executed it, when.
- ``{cited}``: a claim the book cites rather than proves, labelled as such.
- Every page offers its executed notebook as an ``.ipynb`` download, after
  checking that the build's run went top to bottom (``run_problems``). The
  download starts with a cell that installs what it needs, from this
  project's wheel, which the site ships beside the notebooks.
- Scripts that Jupyter Book 1.x includes twice are included once.
- The record (``fencecheck.record``, from results/*.json): a badge on every
  fence saying what the release matrix found for it, linking to its row on
  the Verified-on page (``_add_badges``), and the ``{record}`` directive that
  writes that page's parts. Sphinx sees neither results/ nor what a page's
  badges say, so ``_record_outdated`` reads again each page that renders the
  record (the ``{record}`` directive's pages) when the record changed, and each
  chapter whose badges changed (a digest of what they say, kept per page): a
  page shows no old record, and an unchanged page is not read again. The
  fence grid is kept out of the search index (``unsearched_html``).
- ``{book}`name```: what the landing page quotes about the book (``book_numbers``),
  outside Sphinx's configuration, so a new number reads again the pages that
  quote it, not the whole book (``_numbers_outdated``).
- The wheel the downloads install is built once per content (``wheel_version``)
  and kept outside the output folder, so a fresh output folder gets a copy.
- The site search: English whose index and query stem words alike
  (``fencecheck.search``), and each message on the errors page an index entry,
  so the whole message pasted into the search box finds it.

Enabled in ``_config.yml`` under ``sphinx: extra_extensions``.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
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
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".md":
        return
    text = source[0]
    problems = chapters.header_problems(text)
    if not problems:
        problems = chapters.lint_problems(text, chapters.parse(text, path))
    for problem in problems:
        logger.warning(f"{problem}", location=docname, type="fences", subtype="chapter")


def _offer_notebook(app, pagename, templatename, context, doctree) -> None:
    """Offer the executed notebook as an .ipynb download.

    sphinx-book-theme adds the ".ipynb" entry of its download menu when
    ``ipynb_source`` is in the page context, but sets it itself only when a
    launch button is configured. This runs just before its header buttons.

    myst-nb writes jupyter_execute/<page>.ipynb from the notebook it read,
    not from the one it merged with the execution cache, so a page served
    from the cache is written without outputs (myst-nb 1.x). The outputs are
    merged back here from the same cache, so the download is the executed
    notebook either way.
    """
    executed = myst_nb.executed_notebook(app.outdir, pagename)
    if not executed.exists():
        return
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    executes = app.env.mystnb_config.execution_mode != "off"  # off: nothing executed to merge
    if executes and any(c.cell_type == "code" and c.execution_count is None for c in nb.cells):
        from .upstream.jupyter_cache import get_cache

        cache = get_cache(myst_nb.cache_path_of(app))
        try:
            _, nb = cache.merge_match_into_notebook(nb)
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
    nb.cells[0:0] = setup_cells(nb, app)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    theme.offer_download(context, f"{pagename}.ipynb")


def _offer_wheel(app, pagename, templatename, context, doctree) -> None:
    """Beside a chapter's ".ipynb" in its download menu: the wheel its first cell installs."""
    if context.get("ipynb_source"):
        url = f"{context['pathto']('_sources', 1)}/{WHEEL_DIR.split('/', 1)[1]}/{wheel_name()}"
        theme.offer_wheel(context, url, wheel_name())


#: The wheel of this project, shipped beside the downloadable notebooks.
WHEEL_DIR = "_sources/book"

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
    """Module -> the distributions that provide it, in this environment. Read once per
    process: a scan of every installed distribution's files (over a second), and the
    environment does not change during a build."""
    from importlib import metadata

    return metadata.packages_distributions()


def _parsed_code(nb) -> list:
    """(cell, its syntax tree) for each code cell of ``nb`` that parses."""
    import ast

    out = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            try:
                out.append((cell, ast.parse(lint._strip_magics(cell.source))))
            except SyntaxError:
                continue
    return out


def chapter_needs(nb) -> dict[str, str]:
    """What the chapter's code imports, as distribution -> installed version (not torch,
    not this project, not the standard library)."""
    import ast
    import sys
    from importlib import metadata

    modules = set()
    for cell, tree in _parsed_code(nb):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
        if re.search(r"\bfences\.quiz", cell.source):   # the runtime imports it when it shows a quiz
            modules.add("jupyterquiz")
    owners = _owners()
    needs = {}
    for module in sorted(modules - set(sys.stdlib_module_names) - {"torch", "fences"}):
        for dist in owners.get(module, []):
            needs[dist] = metadata.version(dist)
    return needs


#: Distributions a fence uses through the helpers rather than by name.
THROUGH_HELPERS = {"hypothesis": ("forall", "strategies", "st", "fst")}


def fences_using(nb) -> dict[str, list[str]]:
    """Distribution -> the ids of the chapter's fences whose code uses it: a name it
    was imported as (``np`` for numpy), or the helper that runs it (``fences.forall``)."""
    import ast

    owners = _owners()
    alias: dict[str, str] = {}  # a name bound by an import -> its top-level module
    trees = _parsed_code(nb)
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                alias.update({(a.asname or a.name).split(".")[0]: a.name.split(".")[0]
                              for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                alias.update({a.asname or a.name: node.module.split(".")[0] for a in node.names})
    found: dict[str, list[str]] = {}
    for cell, tree in trees:
        ident = lint.fence_id(cell) if lint.is_fence(cell) else None
        if not ident:
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        dists = {d for name in names if name in alias for d in owners.get(alias[name], [])}
        dists |= {d for d, helpers in THROUGH_HELPERS.items() if names & set(helpers)}
        for dist in dists:
            found.setdefault(dist, []).append(ident)
    return found


def wheel_version() -> str:
    """This project's version with the digest of what the wheel holds: a new build of
    other content is a new version, so pip never reuses a stale copy."""
    import tomllib

    from . import cachekey

    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(cachekey.digest().encode())
    digest.update((root / "pyproject.toml").read_bytes())
    base = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    return f"{base}+g{digest.hexdigest()[:12]}"


def wheel_name() -> str:
    return f"tensor_fences-{wheel_version()}-py3-none-any.whl"


def setup_cells(nb, app=None) -> list:
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
    """On the page: each proof folded, code and output, behind its ``# Proves:`` text
    (the fold rule, ``lint.PROOF_TAG``; the notebook's is in ``fencecheck.jupyter``);
    each lesson fence shows its teaching part and output, its check part folded after
    them behind "✓ N checks" (``lint.lesson_parts``). Off a lesson, a proof's table stays
    shown (``lint.proof_output_shown``)."""
    path = Path(app.env.doc2path(app.env.docname))
    try:
        lesson = path.exists() and chapters.is_lesson(path.read_text(encoding="utf-8"))
    except chapters.ChapterError:   # front matter that does not parse: _check_source says so
        lesson = False
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") != "cell_code":
            continue
        tags = (cell.get("cell_metadata") or {}).get("tags", [])
        source = next((n for n in cell.findall(nodes.literal_block)), None)
        if lint.PROOF_TAG in tags:
            table = any(out.get("nb_element") == "cell_code_output" and next(out.findall(nodes.table), None)
                        for out in cell.children)
            myst_nb.fold_cell(cell, *lint.fold_caption(source.astext() if source else ""),
                              mode="input" if lint.proof_output_shown(lesson, bool(table)) else "all")
        elif "fence" in tags and source is not None:
            _fold_checks(cell, source)


def _fold_checks(cell, source) -> None:
    """Split a lesson fence's code on the page: the teaching part stays in the cell with
    its output; the check part goes to a cell of its own after it, its code folded."""
    teaching, checks = lint.lesson_parts(source.astext())
    if not teaching:
        return
    shown = source.deepcopy()
    shown.children = [nodes.Text(teaching)]
    shown.rawsource = teaching
    source.parent.replace(source, shown)
    folded = source.deepcopy()
    folded.children = [nodes.Text(checks)]
    folded.rawsource = checks
    code = nodes.container(nb_element="cell_code_source", classes=["cell_input"])
    code += folded
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
    """Put this project's wheel beside the notebooks, its version naming its content
    (``wheel_version``). Built only when no build made that wheel before: it is kept in
    ``wheel_cache`` (a fresh output folder gets a copy); the folder holds no other."""
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
    """Why an executed notebook is not a clean top-to-bottom run (empty when it is).

    The run the build renders (the test plugin's, from the execution cache) executed
    every code cell once, in order (execution counts 1..N), with no error output.
    That the downloaded notebook runs as a plain notebook, in a fresh environment, is
    checked by executing it (tools/check_notebooks.py).
    """
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


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Include each script once (see ``fencecheck.upstream.theme.dedupe_scripts``)."""
    theme.dedupe_scripts(context)


class Cited(SphinxDirective):
    """A cited claim: ``{cited}`` with ``:source:`` (a URL) and ``:version:``.

    Rendered as an admonition titled "Cited, not verified here", naming the
    source and the release it describes, so a reader can tell it from a
    fenced claim. ``fencecheck.lint`` refuses one without source or version.
    """

    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = {"source": directives.uri, "version": directives.unchanged_required,
                   "class": directives.class_option}

    def run(self):
        title = "Cited, not verified here"
        if self.arguments:
            title += f": {self.arguments[0]}"
        node = nodes.admonition(classes=["tf-cited"] + self.options.get("class", []))
        node += nodes.title(text=title)
        self.state.nested_parse(self.content, self.content_offset, node)
        source = self.options.get("source", "")
        para = nodes.paragraph()
        para += nodes.Text("Source: ")
        para += nodes.reference(refuri=source, text=source)
        para += nodes.Text(f" ({self.options.get('version', 'no version given')})")
        node += para
        return [node]


def _executed_with(app, doctree, docname) -> None:
    """Put "Executed with torch X on DATE" under the title of every executed page.

    One mechanism for every page: the torch is the one installed for this
    build (a cached page was executed under the same torch: the cache is
    keyed on it), the date is myst-nb's record of the run.
    """
    import datetime

    from fences import installed_torch_version, torch_build

    data = myst_nb.exec_data(app.env, docname)
    sections = list(doctree.findall(nodes.section))
    cells = [n for n in doctree.findall(nodes.container) if "cell" in n.get("classes", [])]
    if not data or not data.get("succeeded") or not sections or not cells:
        return
    when = datetime.datetime.fromtimestamp(data["mtime"], datetime.timezone.utc)
    para = nodes.paragraph(classes=["tf-executed"])
    para += nodes.Text(f"Executed with {torch_build(installed_torch_version())} on "
                       f"{when:%Y-%m-%d}. Every fence on this page passed in that run.")
    title = sections[0].next_node(nodes.title)
    title.parent.insert(title.parent.index(title) + 1, para)


def reference_run(runs: list[dict]) -> str:
    """The run whose words the errors page quotes: the one of the torch building this site
    (the reference torch, in `make book`), else the newest run."""
    from fences import installed_torch_version

    here = getattr(installed_torch_version(), "__version__", None)
    labels = [records.label(r) for r in runs]
    return next((records.label(r) for r in runs if r.get("torch") == here), labels[-1] if labels else "")


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
    """A handler whose ``ChapterError`` (a ``_toc.yml`` or front matter that is not valid
    YAML, with its file and line) stops the build with that message, not a traceback."""
    import functools

    @functools.wraps(handler)
    def run(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except chapters.ChapterError as exc:
            from sphinx.errors import SphinxError

            raise SphinxError(str(exc)) from None

    return run


@_named
def _numbers(app) -> dict[str, str]:
    """``book_numbers`` of this build, computed once (the book does not change during it)."""
    if getattr(app, "_tf_numbers", None) is None:
        app._tf_numbers = book_numbers(Path(app.srcdir))
    return app._tf_numbers


class BookRole(SphinxRole):
    """``{book}`index_fences```: one of ``book_numbers``, as text (``wheel_link``: the
    link to the wheel). Each page remembers what it quoted (``env.tf_quoted``), and is
    read again when one of those numbers changes (``_numbers_outdated``): the numbers
    are not Sphinx configuration, whose change would read the whole book again."""

    def run(self):
        numbers = _numbers(self.env.app)
        if self.text not in numbers:
            msg = self.inliner.reporter.error(
                f"book: no number {self.text!r}; one of {', '.join(numbers)}", line=self.lineno)
            return [self.inliner.problematic(self.rawtext, self.rawtext, msg)], [msg]
        value = numbers[self.text]
        _env_dict(self.env, "tf_quoted").setdefault(self.env.docname, {})[self.text] = value
        if self.text == "wheel_link":
            return [nodes.raw("", value, format="html")], []
        return [nodes.Text(value)], []


def _wheel_outdated(app, env, added, changed, removed):
    """Every page when the wheel's name changed: each one's download menu and its
    notebook's first cell name it (a new runtime is a new cache, which Sphinx sees as a
    new configuration anyway; a new pyproject.toml is not)."""
    name = wheel_name()
    if getattr(env, "tf_wheel", None) == name:
        return []
    env.tf_wheel = name
    return sorted(env.found_docs)


def _numbers_outdated(app, env, added, changed, removed):
    """The pages that quote a number of the book (``{book}``), where one they quoted changed."""
    numbers = _numbers(app)
    return sorted(doc for doc, quoted in getattr(env, "tf_quoted", {}).items()
                  if any(numbers.get(k) != v for k, v in quoted.items()))


def _repository_buttons(app, config) -> None:
    """One setting, ``repository.url`` in _config.yml: set, the site shows the repository
    button and the launch buttons (Colab, Binder); unset, nothing points at a repository."""
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
    """Execute once, read many: run the chapters the execution cache lacks under the test
    plugin (``python -m pytest``, one worker a chapter, up to ``FENCES_WORKERS``, as
    ``make test`` runs them), before myst-nb reads the cache; a chapter that fails stops
    the build, named in pytest's output above (SystemExit: jupyter-book adds a traceback of
    its own to any exception, which would bury pytest's report)."""
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
    """The record as this build sees it: current and stale runs, the book's fences."""

    def __init__(self, srcdir: Path, results: Path):
        self.current, self.digests = records.read_book(srcdir)
        runs = records.load(results) if results.exists() else []
        self.runs, self.stale = records.split(runs, self.current, self.digests)
        self.labels = {f.id: f.labels for f in self.current}   # each fence's # Records: words
        digest = hashlib.sha256()
        for path in sorted(results.glob("*.json")) if results.exists() else []:
            digest.update(path.name.encode() + path.read_bytes())
        scores = Path(srcdir) / mutation.RESULTS_NAME   # the page's make mutate section
        if scores.exists():
            digest.update(scores.read_bytes())
        for f in self.current:   # the words too: a comment, so not in f.code
            digest.update(f"{f.id} {f.chapter} {f.code} {f.section} {sorted(f.labels.items())}".encode())
        digest.update(repr(sorted(self.digests.items())).encode())
        self.key = digest.hexdigest()


@_named
def _record(app) -> Record:
    if getattr(app, "_tf_record", None) is None:
        try:
            app._tf_record = Record(Path(app.srcdir), Path(app.srcdir) / app.config.fences_results)
        except records.BadFile as exc:  # an invalid results file: named, no traceback
            from sphinx.errors import SphinxError

            raise SphinxError(f"the record (results/) is invalid:\n{exc}") from None
    return app._tf_record


def _env_dict(env, name: str) -> dict:
    """``env.<name>``, a dict per page that the environment keeps between builds."""
    if not isinstance(getattr(env, name, None), dict):
        setattr(env, name, {})
    return getattr(env, name)


#: What the extension keeps per page in the environment: the record key a page's
#: ``{record}`` parts were written from, the digest of its badges, the numbers it quoted.
PER_PAGE = ("tf_record_pages", "tf_marks", "tf_quoted")


def _purge_page(app, env, docname) -> None:
    for name in PER_PAGE:
        _env_dict(env, name).pop(docname, None)


def _merge_pages(app, env, docnames, other) -> None:
    """A parallel read's per-page entries, into the main environment."""
    for name in PER_PAGE:
        theirs = getattr(other, name, None) or {}
        _env_dict(env, name).update({d: theirs[d] for d in docnames if d in theirs})


def record_page_key(app) -> str:
    """What a page of ``{record}`` parts is written from: the record (``Record.key``), the
    chapters' titles and the reference run (the errors page names both)."""
    if getattr(app, "_tf_record_page_key", None) is None:
        rec = _record(app)
        digest = hashlib.sha256(rec.key.encode())
        digest.update(repr(sorted(chapter_titles(Path(app.srcdir)).items())).encode())
        digest.update(reference_run(rec.runs).encode())
        app._tf_record_page_key = digest.hexdigest()
    return app._tf_record_page_key


def page_marks(rec: Record, ids: list[str]) -> tuple[list[tuple[str, records.Badge]], str]:
    """What the record puts on a chapter page with the fences ``ids``: (fence, its badge)
    for each fence, and the line under the title. ``_add_badges`` writes exactly this, and
    ``_record_outdated`` compares its digest."""
    marks = [(i, records.badge(i, rec.runs, rec.labels.get(i))) for i in ids]
    return marks, records.page_summary(ids, rec.runs) if ids else ""


def marks_digest(rec: Record, ids: list[str]) -> str:
    return hashlib.sha256(repr((list(ids), page_marks(rec, ids))).encode()).hexdigest()


def page_fences(doctree) -> list[str]:
    """The ids of the fences on a page, in order (the cells' ``fence-id``)."""
    return [str(ident) for cell in doctree.findall(nodes.container)
            if cell.get("nb_element") == "cell_code"
            and (ident := (cell.get("cell_metadata") or {}).get("fence-id"))]


def _note_marks(app, doctree) -> None:
    """Keep, for the page just read, its fences and the digest of their badges."""
    ids = page_fences(doctree)
    _env_dict(app.env, "tf_marks")[app.env.docname] = \
        (ids, marks_digest(_record(app), ids) if ids else "")


def _record_outdated(app, env, added, changed, removed):
    """The pages whose record is not the one they show: each page of ``{record}`` parts
    when the record changed (``record_page_key``), and each chapter whose badges would
    say something else (``marks_digest`` of its fences).

    Neither Sphinx nor jupyter-cache sees results/*.json, and a chapter's edit can
    change another page's record (a stale run). Reading a page again costs no
    execution (the outputs come from the execution cache); an unchanged page is not.
    """
    rereads = set(added) | set(changed) | set(removed)
    key = record_page_key(app)
    out = {doc for doc, was in _env_dict(env, "tf_record_pages").items() if was != key}
    rec = _record(app)
    if getattr(env, "tf_marks_key", None) != rec.key:   # badges are a function of the record
        for doc, (ids, digest) in _env_dict(env, "tf_marks").items():
            if ids and doc not in rereads and doc not in out and marks_digest(rec, ids) != digest:
                out.add(doc)
        env.tf_marks_key = rec.key   # every page's digest is of this record, or it is read again
    return sorted((out & env.found_docs) - rereads)


class unsearched_html(nodes.comment):  # noqa: N801 - docutils dispatches on the class name
    """Raw HTML that Sphinx's search does not index.

    Sphinx (7.4) indexes the text of raw HTML nodes but skips comment nodes
    (``isinstance(node, nodes.comment)`` in ``sphinx.search``); translators
    dispatch on the class name, so this node is written as the HTML it holds.
    Used for the fence grid: hundreds of ids and marks that would flood a search.
    """


def _visit_unsearched_html(self, node):
    self.body.append(node["html"])
    raise nodes.SkipNode


def _skip(self, node):
    raise nodes.SkipNode


class RecordDirective(SphinxDirective):
    """``{record} part``: one part of the Verified-on page, from the record.

    Parts: provenance, summary, never-run, changes, other-values, grid, errors (the
    errors page: every message a fence proves), and mutation (``make mutate``'s scores, from ``mutate-results.json``: a
    directive, not a code cell, so a new file re-renders the page without
    re-executing it, like the rest of the record).
    """

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
        rec = _record(self.env.app)
        here = self.env.docname
        _env_dict(self.env, "tf_record_pages")[here] = record_page_key(self.env.app)

        def url(chapter: str) -> str:
            target = str(Path(chapter).with_suffix("").as_posix())
            return self.env.app.builder.get_relative_uri(here, target)

        if part == "provenance":
            text = verified.provenance_html(rec.runs, rec.stale)
        elif part == "summary":
            text = verified.summary_html(rec.runs, rec.current)
        elif part == "never-run":
            text = verified.never_run_html(records.never_run(rec.runs, rec.current), url) \
                if rec.runs else ""
        elif part == "changes":
            text = verified.changes_html(records.changes(rec.runs, rec.current), rec.current, url)
        elif part == "other-values":
            text = verified.other_values_html(records.changes(rec.runs, rec.current), rec.current, url)
        elif part == "mutation":
            text = mutation.section_html(Path(self.env.app.srcdir))
        elif part == "errors":
            return self.errors(rec, url)
        else:
            node = unsearched_html()
            node["html"] = verified.grid_html(rec.runs, rec.current, url)
            return [node]
        return [nodes.raw("", text, format="html")]


def _add_badges(app, doctree, docname) -> None:
    """A badge on each fence whose record carries news (it differs by release or build,
    fails somewhere, has a part not yet run, or is not in the record), linking to its row
    on the Verified-on page; and one line under the title for the page's fences.

    Every fence's cell gets the id ``fence-<id>``, which the Verified-on page links to.
    """
    cells = [cell for cell in doctree.findall(nodes.container)
             if cell.get("nb_element") == "cell_code"
             and (cell.get("cell_metadata") or {}).get("fence-id")]
    ids = [str(cell["cell_metadata"]["fence-id"]) for cell in cells]
    if not ids:
        return
    marks, summary = page_marks(_record(app), ids)
    href = app.builder.get_relative_uri(docname, app.config.fences_verified_page)
    for cell, (ident, badge) in zip(cells, marks):
        cell["ids"].append(f"fence-{ident}")
        if badge.kind not in records.NEWS:
            continue
        link = nodes.reference("", badge.text, refuri=f"{href}#fence-{ident}", reftitle=badge.title,
                               classes=["tf-badge", f"tf-badge-{badge.kind}"])
        cell.insert(0, nodes.paragraph("", "", link, classes=["tf-badge-line"]))
    sections = list(doctree.findall(nodes.section))
    if not sections:
        return
    para = nodes.paragraph(classes=["tf-page-record"])
    glossary = app.config.fences_glossary_page
    before, word, after = summary.partition(" fences ")
    if word and glossary in app.env.found_docs:   # the page's first word of the book's own: defined
        term = app.builder.get_relative_uri(docname, glossary) + "#term-fence"
        para += [nodes.Text(before + " "), nodes.reference("", "fences", refuri=term),
                 nodes.Text(" " + after + " ")]
    else:
        para += nodes.Text(summary + " ")
    changes = app.builder.get_relative_uri(docname, app.config.fences_changes_page)
    para += nodes.reference("", "What changed between releases", refuri=changes)
    title = sections[0].next_node(nodes.title)
    title.parent.insert(title.parent.index(title) + 1, para)


def _sweep(app, exception) -> None:
    """After a build: remove the pages (and their sources and notebooks) of documents no
    longer in the book. An incremental build writes only the pages it has; a chapter taken
    out of the book would keep its old page, passing for one that is built."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    keep = set(app.env.found_docs) | {"genindex", "search", "index", "py-modindex"}
    for page in out.rglob("*.html"):
        rel = page.relative_to(out)
        if rel.parts[0].startswith("_") or rel.with_suffix("").as_posix() in keep:
            continue
        doc = rel.with_suffix("").as_posix()
        for stale in [page, *(out / "_sources").glob(f"{doc}.*"),
                      *(out.parent / "jupyter_execute").glob(f"{doc}.*")]:
            stale.unlink(missing_ok=True)


def _search_scorer(app, config) -> None:
    """The site search finds a pasted message (fencecheck/upstream/search.js), unless the
    book's configuration names its own scorer."""
    if not config.html_search_scorer:
        config.html_search_scorer = str(Path(__file__).with_name("upstream") / "search.js")


def _static_outdated(app, env, added, changed, removed) -> list[str]:
    """Sphinx (7.4) copies the static files (``html_static_path``, and
    ``language_data.js``, which holds the search's stemmer and scorer) only when it
    writes a page: an edit of one of them alone left the old copy. When their digest
    changed, the landing page is read again, so Sphinx writes, and copies them."""
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
    return [app.config.root_doc] if app.config.root_doc in env.found_docs else []


def setup(app):
    app.add_config_value("fences_results", "results", "env")
    app.add_config_value("fences_verified_page", "book/verified", "env")
    app.add_config_value("fences_changes_page", "book/changes", "env")
    app.add_config_value("fences_glossary_page", "book/glossary", "env")
    app.add_config_value("fences_wheel_cache", "", "")
    app.add_config_value("fences_run_lacking", False, "")
    app.add_node(unsearched_html, html=(_visit_unsearched_html, None),
                 latex=(_skip, None), text=(_skip, None), man=(_skip, None), texinfo=(_skip, None))
    app.add_directive("record", RecordDirective)
    app.add_role("book", BookRole())
    app.connect("env-get-outdated", _record_outdated)
    app.connect("env-purge-doc", _purge_page)
    app.connect("env-merge-info", _merge_pages)
    app.connect("doctree-read", _note_marks)
    app.connect("doctree-resolved", _add_badges)
    app.connect("doctree-read", _fold_proofs)
    app.add_directive("cited", Cited)
    app.connect("config-inited", _key_the_cache)
    app.connect("config-inited", _repository_buttons)
    app.connect("config-inited", _search_scorer)
    app.connect("env-get-outdated", _static_outdated)
    app.connect("html-collect-pages", upstream_sphinx.keep_index_entries)
    app.connect("env-get-outdated", upstream_sphinx.entries_outdated)
    app.connect("env-get-outdated", _numbers_outdated)
    app.connect("env-get-outdated", _wheel_outdated)
    app.connect("doctree-resolved", _executed_with)
    app.connect("build-finished", _ship_wheel)
    app.connect("build-finished", _sweep)
    app.connect("builder-inited", _check_book)
    app.connect("builder-inited", _run_lacking)
    app.connect("html-page-context", _dedupe_scripts)
    app.connect("source-read", _check_source)
    app.connect("html-page-context", _offer_notebook, priority=500)
    app.connect("html-page-context", _offer_wheel, priority=900)  # after the theme's menu
    # The search index's stems live in the saved environment: a new stemming rule
    # (fencecheck.search) is a new env_version, so no page keeps the old stems; what the
    # environment keeps per page (PER_PAGE) is new in 2; how a read page is folded
    # (_fold_proofs: a reference page's tables shown) is new in 3. Each is a new version.
    app.add_search_language(search.BookEnglish)
    return {"version": "3", "env_version": 10 * 3 + search.ENV_VERSION,
            "parallel_read_safe": True, "parallel_write_safe": True}
