"""The downloaded notebook reads as Jupyter Markdown (fencecheck.jupyter), and the wheel
the site ships beside it installs into a fresh environment and imports."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from fencecheck import jupyter

EXT = {"torch": ("https://docs.pytorch.org/docs/2.13/generated/%s.html", "%s")}
MYST = """(a-target)=
## Sums

The sum is {glue:text}`total:.1f`, see {torch}`torch.sum` and the {term}`dtype`,
and [the views chapter](views.md#strides). {ref}`Reference <creation-reference>`.

```{cited} A claim
:source: https://example.org/doc
:version: 1.0

CUDA is asynchronous.
```

:::{note}
A note.
:::

```{exercise} Make zeros
:label: ex-zeros

Make a tensor.
```
"""


def glue_output(name: str, value: str):
    return new_output("display_data", data={"application/papermill.record/text/plain": value},
                      metadata={"scrapbook": {"name": name,
                                              "mime_prefix": "application/papermill.record/"}})


def notebook():
    compute = new_code_cell("fences.glue('total', 2.0)", outputs=[glue_output("total", "2.0")])
    proof = new_code_cell("# Proves: all.\nassert f()", metadata={"tags": ["fence", "proof"]})
    lesson = new_code_cell("assert 1 + 1 == 2", metadata={"tags": ["fence"]})
    solution = new_code_cell("fences.grade.prove(check, solution=1, wrong=[])",
                             metadata={"tags": ["fence"]})
    return new_notebook(cells=[
        compute, new_markdown_cell(MYST), lesson, proof,
        new_markdown_cell("````{solution-start} ex-zeros\n:class: dropdown\n````"), solution,
        new_markdown_cell("````{solution-end}\n````\n\n## Next"), new_code_cell("x = 1")])


def test_myst_becomes_jupyter_markdown():
    nb = jupyter.for_jupyter(notebook(), EXT, "https://site.example/")
    text = nb.cells[1].source
    assert "The sum is 2.0, see [`torch.sum`](https://docs.pytorch.org/docs/2.13/generated/" \
           "torch.sum.html) and the [dtype](https://site.example/book/glossary.html)" in text
    assert "[the views chapter](https://site.example/book/views.html#strides)" in text
    assert "> **Cited, not verified here: A claim**" in text
    assert "> Source: <https://example.org/doc> (1.0)" in text
    assert "> **Note**\n>\n> A note." in text
    assert "### Exercise: Make zeros\n\nMake a tensor." in text
    assert "(a-target)=" not in text and "Reference" in text
    assert jupyter.myst_left(nb) == []
    assert nb.cells[0].outputs == []  # the glue output is in the text, not under the cell


def test_raw_myst_is_reported():
    """The must-fail twin: the same notebook, not converted, is refused."""
    left = "\n".join(jupyter.myst_left(notebook()))
    for piece in ("{glue:text}`", "{torch}`", "```{", ":::{", "(a-target)=", "views.md#"):
        assert piece in left, piece


def test_proofs_and_solutions_are_collapsed_and_the_lesson_is_open():
    nb = jupyter.for_jupyter(notebook(), EXT)
    hidden = [c.metadata.get("jupyter", {}) for c in nb.cells if c.cell_type == "code"]
    assert hidden == [{}, {}, {"source_hidden": True, "outputs_hidden": True},
                      {"source_hidden": True, "outputs_hidden": True}, {}]
    assert jupyter.open_solutions(nb) == []
    assert "**Solution**" in nb.cells[4].source
    opened = nbformat.from_dict(nb)
    opened.cells[5].metadata["jupyter"] = {}
    assert jupyter.open_solutions(opened) == ["code cell 5 of a solution is open"]


def test_a_proofs_table_stays_shown_off_a_lesson_and_folded_in_one():
    """Off a lesson (a reference page) a proof that prints a table keeps the table shown,
    its code folded; in a lesson, and for a proof printing no table, both fold."""
    def folds(lesson: bool) -> list[dict]:
        table = new_output("display_data", data={"text/markdown": "| a |\n|---|\n| 1 |",
                                                 "text/plain": "table"})
        nb = new_notebook(cells=[
            new_code_cell("# Proves: a.\nfences.table(t)", metadata={"tags": ["fence", "proof"]},
                          outputs=[table]),
            new_code_cell("# Proves: b.\nprint(1)", metadata={"tags": ["fence", "proof"]},
                          outputs=[new_output("stream", name="stdout", text="1\n")])])
        if lesson:
            nb.metadata["tensor-fences"] = {"form": 3}
        return [c.metadata["jupyter"] for c in jupyter.for_jupyter(nb, EXT).cells]

    both = {"source_hidden": True, "outputs_hidden": True}
    assert folds(lesson=False) == [{"source_hidden": True}, both]
    assert folds(lesson=True) == [both, both]


def test_a_missing_glued_value_is_reported():
    nb = notebook()
    nb.cells[0].outputs = []
    jupyter.for_jupyter(nb, EXT)
    assert any("[missing value: " in p for p in jupyter.myst_left(nb))


@pytest.mark.proof
def test_the_wheel_installs_and_imports_in_a_fresh_venv(tmp_path):
    """The wheel the site ships holds the runtime, every module of ``fences`` and nothing
    of the verifier, and names its content in its version; installed into a fresh venv,
    every module imports, and the verifier is nowhere to be found."""
    from fencecheck import cachekey, sphinx

    done = subprocess.run([sys.executable, "-c", "from fencecheck import sphinx; from types import "
                           "SimpleNamespace as S; import pathlib; sphinx._ship_wheel(S(outdir="
                           f"'{tmp_path}', builder=S(format='html')), None)"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / sphinx.WHEEL_DIR).glob("*.whl")
    assert wheel.name == sphinx.wheel_name() and "+g" in wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    runtime = {f"fences/{p.relative_to(cachekey.RUNTIME).as_posix()}"
               for p in cachekey.RUNTIME.rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == runtime and "fences/state.py" in runtime
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib'))"], capture_output=True, text=True).stdout.strip()
    import sysconfig
    # What a chapter would import besides (torch, hypothesis, ...) from this environment,
    # after the fresh one's own folder: `fences` itself can only come from the wheel. The
    # probe checks that importing every module loads nothing the verifier alone needs.
    (Path(site) / "parent.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                   check=True)
    probe = ("import pkgutil, importlib, fences; mods = [m.name for m in pkgutil.walk_packages("
             "fences.__path__, 'fences.')]; [importlib.import_module(m) for m in mods]; "
             "print(fences.__file__, len(mods)); import importlib.util as u; "
             "assert u.find_spec('fencecheck') is None, 'the verifier came along'; import sys; "
             "extra = {'sphinx', 'nbformat', 'yaml', 'nbval', 'myst_parser', 'jupyter_cache', "
             "'docutils', 'pytest', 'fencecheck'} & {m.split('.')[0] for m in sys.modules}; "
             "assert not extra, f'the runtime loads {extra}'")
    out = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert str(venv) in out.stdout  # the wheel's copy, not this checkout's


def test_the_landing_page_counts_what_the_lint_counts(tmp_path):
    """book_numbers counts exercises and cited blocks with the lint's own patterns, in
    either fence (backticks or colons), and fences less the GPU ones."""
    from fencecheck.chapter import HEADER
    from fencecheck.sphinx import book_numbers

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/creation\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "creation.md").write_text(HEADER + """
# A chapter

```{code-cell} ipython3
:tags: [fence]
:fence-id: a-fence
# Proves: one.
assert 1 + 1 == 2
```

```{code-cell} ipython3
:tags: [fence]
:fence-id: a-gpu-fence
# Proves: two.
fences.needs("cuda")
assert 2 + 2 == 4
```

:::{exercise}
:label: ex-one
One.
:::

```{exercise}
:label: ex-two
Two.
```

:::{cited} a source
:source: https://example.org
:version: 1
Said.
:::
""")
    numbers = book_numbers(tmp_path)
    assert (numbers["index_exercises"], numbers["index_cited"]) == ("2", "1")
    assert (numbers["index_fences"], numbers["index_gpu"]) == ("1", "1")


def test_the_wheels_version_names_every_file_it_holds(runtime_edited):
    """An edit of any module of the runtime (what the wheel holds: state.py, not only what
    a chapter imports) is a new wheel version, so pip never reuses a stale copy."""
    from fencecheck import sphinx

    before = sphinx.wheel_version()
    runtime_edited()
    assert sphinx.wheel_version() != before


def test_a_downloaded_notebook_installs_what_its_chapter_imports():
    """chapter_needs: each imported distribution at its installed version; not torch, not the
    runtime, not the standard library; another chapter's imports give other needs."""
    from importlib import metadata

    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from fencecheck.sphinx import chapter_needs

    nb = new_notebook(cells=[new_code_cell("import os, torch, fences\nimport numpy as np\n"
                                           "from hypothesis import given"),
                             new_markdown_cell("import matplotlib")])
    assert chapter_needs(nb) == {"hypothesis": metadata.version("hypothesis"),
                                 "numpy": metadata.version("numpy")}
    other = new_notebook(cells=[new_code_cell("import ml_dtypes")])
    assert chapter_needs(other) == {"ml_dtypes": metadata.version("ml_dtypes")}


def test_a_lesson_fence_becomes_a_teaching_cell_and_a_collapsed_check_cell():
    """In the notebook a lesson fence is two cells that, run in order, do what it did."""
    out = new_output("stream", name="stdout", text="(4, 1)\n")
    fence = new_code_cell("x = f()\nfences.show(x)\n# Proves: x.\nassert x == 1",
                          metadata={"tags": ["fence"], "fence-id": "f"}, outputs=[out])
    old = new_code_cell("# Proves: x.\nassert 1", metadata={"tags": ["fence"]})
    nb = jupyter.for_jupyter(new_notebook(cells=[fence, old]), EXT)
    teach, checks, legacy = nb.cells
    assert teach.source == "x = f()\nfences.show(x)" and teach.outputs == [out]
    assert checks.source == "# Proves: x.\nassert x == 1" and checks.outputs == []
    assert checks.metadata["jupyter"] == {"source_hidden": True}
    assert checks.metadata["tags"] == [jupyter.CHECKS_TAG]
    assert len({c.id for c in nb.cells}) == 3   # else nbformat renames one at random, warning
    assert legacy.source == "# Proves: x.\nassert 1" and "jupyter" not in legacy.metadata


def run_setup(tmp_path, needs: dict, installed: dict) -> tuple[list, str]:
    """Run the downloaded notebook's setup code with pip and the installed versions faked:
    (what it asked pip to install, what it printed)."""
    import contextlib
    import io
    import types

    from fencecheck import sphinx

    code = sphinx.SETUP_CODE.format(needs=needs, wheel=str(tmp_path / "h.whl"), version="9",
                                    torch="2.13.0")
    (tmp_path / "h.whl").write_text("")
    calls = []
    fake_md = types.SimpleNamespace(PackageNotFoundError=LookupError,
                                    version=lambda n: installed[n] if n in installed
                                    else (_ for _ in ()).throw(LookupError(n)))
    fake_sub = types.SimpleNamespace(check_call=lambda cmd: calls.append(cmd[5:]))
    code = code.replace("import importlib, importlib.metadata as md, pathlib, subprocess, sys",
                        "import importlib, pathlib, sys")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, {"md": fake_md, "subprocess": fake_sub})  # noqa: S102
    return calls, printed.getvalue()


def test_the_setup_cell_installs_only_what_is_missing_and_replaces_nothing(tmp_path):
    needs = {"numpy": ("2.4.6", ["a-np-fence"]), "ml_dtypes": ("0.6.0", [])}
    calls, said = run_setup(tmp_path, needs, {"numpy": "2.1.0", "torch": "2.13.0",
                                              "tensor-fences": "8"})
    assert calls == [["ml_dtypes==0.6.0"]]            # missing: installed; numpy kept
    assert "numpy 2.1.0 here, 2.4.6 on the site: kept; its fences may differ: a-np-fence" in said
    assert "tensor-fences 8 here, the site's is 9: kept" in said
    calls, said = run_setup(tmp_path, needs, {"numpy": "2.4.6", "ml_dtypes": "0.6.0",
                                              "torch": "2.13.0"})
    assert calls == [[str(tmp_path / "h.whl")]] and "kept" not in said


def test_fences_using_names_the_fences_of_each_distribution():
    from fencecheck.sphinx import fences_using

    nb = new_notebook(cells=[
        new_code_cell("import numpy as np\nimport ml_dtypes"),
        new_code_cell("# Proves: a.\nassert np.int8(1) == 1", metadata={"tags": ["fence"], "fence-id": "a"}),
        new_code_cell("# Proves: b.\n@fences.forall(x)\ndef f(x):\n    assert x",
                      metadata={"tags": ["fence"], "fence-id": "b"}),
        new_code_cell("# Proves: c.\nassert 1 == int('1')", metadata={"tags": ["fence"], "fence-id": "c"})])
    assert fences_using(nb) == {"numpy": ["a"], "hypothesis": ["b"]}


def test_the_wheel_is_offered_beside_the_notebook_in_the_download_menu():
    from fencecheck.upstream import theme

    theme.check()
    context = {"header_buttons": [{"label": "download-buttons", "buttons": [
        {"label": "download-notebook-button"}, {"label": "download-source-button"}]}]}
    assert theme.offer_wheel(context, "../_sources/book/h.whl", "h.whl")
    labels = [b["label"] for b in context["header_buttons"][0]["buttons"]]
    assert labels == ["download-notebook-button", "download-wheel-button", "download-source-button"]
    assert not theme.offer_wheel({"header_buttons": []}, "u", "h.whl")


def test_the_landing_pages_numbers_are_written_out_in_the_download():
    """``{book}`name``` (the landing page's numbers) becomes the number the site shows."""
    from fencecheck import jupyter

    text = jupyter.markdown("the {book}`index_fences` fences, {{ old }}", {}, {}, "../../",
                            {"index_fences": "455", "old": "x"})
    assert text == "the 455 fences, x" and not jupyter.LEFT.search(text)


def test_the_wheel_is_built_once_and_kept_for_a_fresh_output_folder(tmp_path, monkeypatch):
    """A build whose output folder lacks the wheel copies the one kept in the wheel cache
    (no pip run); one that finds neither builds it; a stale wheel in the output goes."""
    from types import SimpleNamespace as S

    from fencecheck import sphinx

    built = []

    def build(folder, name):
        built.append(name)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("the wheel")
        return True

    monkeypatch.setattr(sphinx, "_build_wheel", build)
    app = S(outdir=str(tmp_path / "html"), builder=S(format="html"),
            config=S(fences_wheel_cache=str(tmp_path / "kept")))
    shipped = tmp_path / "html" / sphinx.WHEEL_DIR / sphinx.wheel_name()
    sphinx._ship_wheel(app, None)
    assert built == [sphinx.wheel_name()] and shipped.read_text() == "the wheel"
    import shutil

    shutil.rmtree(tmp_path / "html")              # a fresh output folder
    (shipped.parent).mkdir(parents=True)
    (shipped.parent / "tensor_fences-0.0.1+gold-py3-none-any.whl").write_text("old")
    sphinx._ship_wheel(app, None)
    assert len(built) == 1, "built again though the kept wheel was there"
    assert [p.name for p in shipped.parent.glob("*.whl")] == [shipped.name]
    assert shipped.read_text() == "the wheel"
    assert sphinx.wheel_cache(S(outdir="/x/_build/html", config=S(fences_wheel_cache=""))) \
        == Path("/x/_build/.wheels")
