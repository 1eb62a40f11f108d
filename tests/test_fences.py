"""Unit tests of the runtime (the fences package), the cache key, the chapter reader and the
build's notebook check (the chapters themselves are tested via book/)."""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import fences
from fences import state
from fencecheck import cachekey, chapter, lint
from fencecheck.chapter import HEADER



# --- raises / warns -------------------------------------------------------

def test_raises_passes_and_shows_the_message(capsys, monkeypatch):
    monkeypatch.delenv(fences.RECORD_ENV, raising=False)   # the page: no [raised] line
    with fences.raises(ValueError, "bad val") as caught:
        raise ValueError("bad value here\nsecond line")
    assert isinstance(caught.value, ValueError)
    assert capsys.readouterr().out == "ValueError: bad value here second line\n"


def test_raises_fails_when_nothing_is_raised():
    with pytest.raises(AssertionError, match="expected ValueError matching 'xyz', nothing was raised"):
        with fences.raises(ValueError, "xyz"):
            pass


def test_raises_fails_when_the_message_does_not_match():
    with pytest.raises(AssertionError, match="does not match"):
        with fences.raises(ValueError, "expected text"):
            raise ValueError("other text")


def test_raises_lets_another_exception_type_through():
    with pytest.raises(KeyError):
        with fences.raises(ValueError, "key"):
            raise KeyError("key")


def test_raises_accepts_a_tuple_of_types():
    with pytest.raises(AssertionError, match="expected TypeError or ValueError"):
        with fences.raises((TypeError, ValueError), "xyz"):
            pass


@pytest.mark.parametrize("pattern", ["", ".*", "x?", "(?:)", ".", r"\w+", "[a-z]{2}"])
def test_a_pattern_that_matches_any_message_is_refused(pattern):
    for check in (fences.raises(ValueError, pattern), fences.warns(UserWarning, pattern)):
        with pytest.raises(ValueError, match="matches any message"):
            with check:
                raise ValueError("anything")


def test_raises_and_warns_show_the_message_and_observe_stays_quiet(monkeypatch, capsys):
    """raises / warns show the message on the page as at the prompt (class, one line,
    shortened in the middle); observe prints only for the record (RECORD_ENV set)."""
    monkeypatch.delenv(fences.RECORD_ENV, raising=False)
    with fences.raises(ValueError, "bad"):
        raise ValueError("bad value")
    with fences.warns(UserWarning, "careful"):
        warnings.warn("careful now", UserWarning)
    assert fences.observe("a.b", 3, label="three") == 3
    assert capsys.readouterr().out == "ValueError: bad value\nUserWarning: careful now\n"
    with fences.raises(ValueError, "start"):
        raise ValueError("start " + "x" * 400 + " end")
    shown = capsys.readouterr().out.strip()
    assert shown.startswith("ValueError: start x") and shown.endswith("x end")
    assert " ... " in shown and len(shown) < 200
    with fences.raises(RuntimeError, "Attempting"):   # cut between words
        raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                           "torch.cuda.is_available() is False. If you are running on a CPU-only "
                           "machine, please use torch.load with map_location=torch.device('cpu') "
                           "to map your storages to the CPU.")
    shown = capsys.readouterr().out.strip()
    assert shown == ("RuntimeError: Attempting to deserialize object on a CUDA device but "
                     "torch.cuda.is_available() ... torch.load with map_location=torch.device('cpu') to map "
                     "your storages to the CPU."), shown
    monkeypatch.setenv(fences.RECORD_ENV, "1")
    fences.observe("a.b", 3, label="three")
    assert capsys.readouterr().out == "[observed] three (a.b) = 3\n"


def test_show_labels_values_and_indents_a_tensor(capsys):
    import torch

    fences.show(torch.zeros(2, 2), shape=(2, 2), contiguous=True)
    assert capsys.readouterr().out == (
        "tensor([[0., 0.],\n        [0., 0.]])\n"
        "shape:      (2, 2)\ncontiguous: True\n")
    fences.show(t=torch.ones(2, 1))
    assert capsys.readouterr().out == "t:\n  tensor([[1.],\n          [1.]])\n"


def test_raises_refuses_a_standard_subclass_it_does_not_name():
    with pytest.raises(AssertionError, match="NotImplementedError was raised, a subclass of "
                                             "RuntimeError: name NotImplementedError itself"):
        with fences.raises(RuntimeError, "xyz"):
            raise NotImplementedError("xyz")
    with fences.raises((RuntimeError, NotImplementedError), "xyz"):
        raise NotImplementedError("xyz")


def test_raises_accepts_a_library_subclass():
    import torch

    with fences.raises(RuntimeError, "xyz"):
        raise torch.OutOfMemoryError("xyz")


def test_raises_shortens_a_long_message(capsys, monkeypatch):
    monkeypatch.delenv(fences.RECORD_ENV, raising=False)
    with fences.raises(ValueError, "aaa"):
        raise ValueError("a" * 1000)
    assert len(capsys.readouterr().out.strip()) < 300


def test_warns_passes_and_fails():
    with fences.warns(UserWarning, "careful"):
        warnings.warn("be careful", UserWarning)
    with pytest.raises(AssertionError, match="nothing was warned"):
        with fences.warns(UserWarning, "careful"):
            pass


# --- shares_memory --------------------------------------------------------

def test_shares_memory_for_views_and_copies():
    base = torch.arange(6)
    assert fences.shares_memory(base, base[2:])
    assert fences.shares_memory(base, base.view(2, 3).t())
    assert not fences.shares_memory(base, base.clone())


def test_shares_memory_across_the_numpy_bridge():
    arr = np.arange(4.0)
    assert fences.shares_memory(torch.from_numpy(arr), arr)
    assert fences.shares_memory(arr, torch.from_numpy(arr[1:]))
    assert not fences.shares_memory(torch.tensor(arr), arr)


def test_empty_tensors_share_nothing():
    # Both report data_ptr 0; neither touches a byte.
    assert torch.empty(0).data_ptr() == torch.empty(0).data_ptr() == 0
    assert not fences.shares_memory(torch.empty(0), torch.empty(0))
    e = torch.empty(0)
    assert not fences.shares_memory(e, e[:])
    assert not fences.shares_memory(torch.empty(0), np.empty(0))
    x = torch.arange(4.0)
    assert fences.shares_memory(x, x[2:])


def test_meta_tensors_share_nothing():
    m = torch.empty(3, device="meta")
    assert not fences.shares_memory(m, m)


# --- glue, needs, table, torch_build -------------------------------------

def test_glue_returns_its_value():
    assert fences.glue("unit_test_value", 42) == 42


def test_needs_prints_the_skip_marker_when_the_device_is_missing(capsys):
    ok = fences.needs("cuda")
    out = capsys.readouterr().out
    assert ok == torch.cuda.is_available()
    assert (fences.SKIP_MARKER in out) == (not ok)


def test_needs_refuses_an_unknown_device():
    with pytest.raises(ValueError, match="unknown device"):
        fences.needs("tpu")


def test_table_escapes_pipes_and_returns_nothing(capsys):
    assert fences.table([(1, "a|b")], ["n", "s"]) is None


def test_torch_build_names_the_version():
    assert torch.__version__ in fences.torch_build()


# --- state ----------------------------------------------------------------

def test_state_detects_and_names_a_leak():
    state.snapshot()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(AssertionError, match=r"default dtype .*was torch.float32, now torch.float64"):
            state.check()
    finally:
        torch.set_default_dtype(previous)
    state.check()


def test_state_names_the_cell_that_changed_it_and_no_next_chapter():
    state.snapshot()
    previous = torch.get_default_dtype()
    state.note("book/x.md:10")
    torch.set_default_dtype(torch.float64)
    try:
        state.note("book/x.md:20, fence x-dtype")
        state.note("book/x.md:30")           # leaves it as it was: not the culprit
        with pytest.raises(AssertionError) as info:
            state.check()
    finally:
        torch.set_default_dtype(previous)
    message = str(info.value)
    assert "changed by: book/x.md:20, fence x-dtype" in message, message
    assert "a reader who runs the next cells in the same kernel" in message, message
    assert "next chapter" not in message, message
    state.note("book/x.md:40")               # restored: forgotten
    state.check()


def test_state_covers_grad_mode_and_threads():
    before = state.read()
    with torch.no_grad():
        inside = state.read()
    assert any("grad mode" in line for line in state.leaks(before, inside))
    assert state.leaks(before, state.read()) == []
    assert any("threads" in name for name in before)


# --- chapter checks -------------------------------------------------------

def test_header_problems():
    assert chapter.header_problems(HEADER + "# ok\n") == []
    assert len(chapter.header_problems("# no header\n")) == 2
    assert "format_name: myst" in chapter.header_problems("---\nkernelspec: {name: python3, display_name: P}\n---\n")[0]


def test_code_cell_lines(tmp_path: Path):
    text = HEADER + "# t\n```{code-cell} ipython3\nx = 1\n```\n\n```{code-cell}\ny = 2\n```\n"
    first = HEADER.count("\n") + 2
    assert lint.cell_lines(chapter.parse(text, tmp_path / "t.md")) == [first, first + 4]


def test_read_refuses_forbidden_tags(tmp_path: Path):
    path = tmp_path / "c.md"
    path.write_text(HEADER + "```{code-cell} ipython3\n:tags: [raises-exception]\n1/0\n```\n")
    with pytest.raises(chapter.ChapterError, match="raises-exception"):
        chapter.read(path)


def test_a_fence_that_cannot_fail_is_refused(tmp_path: Path):
    path = tmp_path / "c.md"
    cell = "```{code-cell} ipython3\n:tags: [fence]\n:fence-id: one\n# Proves: x\n%s\n```\n"
    path.write_text(HEADER + cell % "print(1)")
    with pytest.raises(chapter.ChapterError, match="cannot fail"):
        chapter.read(path)
    path.write_text(HEADER + cell % "assert len([1]) == 1")
    chapter.read(path)


def test_read_returns_cells_and_lines(tmp_path: Path):
    path = tmp_path / "c.md"
    path.write_text(HEADER + "# t\n\n```{code-cell} ipython3\nx = 1\n```\n")
    nb, lines = chapter.read(path)
    assert [c.source for c in nb.cells if c.cell_type == "code"] == ["x = 1"]
    assert lines == [HEADER.count("\n") + 3]


def test_toc_files_resolves_nested_entries(tmp_path: Path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/index\nparts:\n  - chapters:\n"
        "    - file: book/a\n    - file: book/b.md\n"
    )
    assert chapter.toc_files(tmp_path) == [
        tmp_path / "book/index.md", tmp_path / "book/a.md", tmp_path / "book/b.md"
    ]


# --- cachekey -------------------------------------------------------------

def test_cachekey_names_torch_and_fences():
    key = cachekey.key()
    assert f"torch={torch.__version__}" in key and "fences=" in key


def test_cachekey_changes_with_fences_code(tmp_path: Path, monkeypatch):
    before = cachekey.key()
    package = tmp_path / "fences"
    shutil.copytree(cachekey.RUNTIME, package)
    monkeypatch.setattr(cachekey, "RUNTIME", package)
    assert cachekey.key() == before
    (package / "__init__.py").write_text((package / "__init__.py").read_text() + "\n# edited\n")
    assert cachekey.key() != before


# --- the build's notebook check (fencecheck.sphinx.run_problems) ---------------

def test_run_problems_accepts_a_clean_run_and_names_each_fault():
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from fencecheck.sphinx import run_problems

    nb = new_notebook(cells=[new_code_cell("1", execution_count=1),
                             new_code_cell("2", execution_count=2)])
    assert run_problems(nb) == []
    nb.cells[1].execution_count = None
    assert run_problems(nb) == ["execution counts are [1, None], not 1..2"]
    nb.cells[1].execution_count = 2
    nb.cells[0].outputs = [new_output("error", ename="AssertionError", evalue="", traceback=[])]
    assert run_problems(nb) == ["code cell 0 has an error output: AssertionError"]
    assert nbformat.validate(nb) is None


# --- state: every setting a chapter could leave behind --------------------

def _leak(change, undo) -> list[str]:
    """What the guard says after ``change()`` (undone afterwards, whatever happens)."""
    state.snapshot()
    try:
        change()
        with pytest.raises(AssertionError) as caught:
            state.check()
        return str(caught.value).splitlines()
    finally:
        undo()
        state.check()  # restored: nothing left


@pytest.mark.parametrize("change, undo, named, fix", [
    (lambda: torch.set_float32_matmul_precision("medium"),
     lambda: torch.set_float32_matmul_precision("highest"),
     "float32 matmul precision (torch.get_float32_matmul_precision): was highest, now medium",
     "finally: torch.set_float32_matmul_precision(old)"),
    (lambda: torch.set_printoptions(precision=2), lambda: torch.set_printoptions(profile="default"),
     "torch print options (torch.set_printoptions): precision was 4, now 2",
     'torch.set_printoptions(profile="default")'),
    (lambda: np.set_printoptions(precision=3), lambda: np.set_printoptions(precision=8),
     "NumPy print options (numpy.get_printoptions): precision was 8, now 3", "np.printoptions"),
    (lambda: warnings.simplefilter("error", UserWarning), lambda: warnings.filters.pop(0),
     "warning filters (warnings.filters): added ('error', None, <class 'UserWarning'>, None, 0)",
     "warnings.catch_warnings()"),
    (lambda: os.environ.__setitem__("TF_TEST_LEAK", "1"), lambda: os.environ.pop("TF_TEST_LEAK"),
     "environment variables (os.environ): TF_TEST_LEAK added ('1')", "os.environ.pop(NAME)"),
    (lambda: torch.use_deterministic_algorithms(True), lambda: torch.use_deterministic_algorithms(False),
     "deterministic algorithms (torch.are_deterministic_algorithms_enabled): was False, now True",
     "torch.use_deterministic_algorithms(old)"),
    (lambda: torch.set_default_device("meta"), lambda: torch.set_default_device(None),
     "default device (torch.get_default_device): was cpu, now meta", "torch.set_default_device(old)"),
    (lambda: torch.set_default_dtype(torch.float64), lambda: torch.set_default_dtype(torch.float32),
     "default dtype (torch.get_default_dtype): was torch.float32, now torch.float64",
     "torch.set_default_dtype(old)"),
    (lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
     lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", False),
     "cuda.matmul.allow_tf32 was False, now True", "torch.backends.cuda.matmul.allow_tf32"),
    (lambda: setattr(torch.backends.cudnn, "benchmark", True),
     lambda: setattr(torch.backends.cudnn, "benchmark", False),
     "cuDNN benchmark (torch.backends.cudnn.benchmark): was False, now True", "cudnn.flags"),
    (lambda: torch.set_warn_always(True), lambda: torch.set_warn_always(False),
     "warn-always (torch.is_warn_always_enabled): was False, now True", "torch.set_warn_always(old)"),
], ids=["matmul-precision", "torch-print", "numpy-print", "warning-filters", "environment",
        "deterministic", "default-device", "default-dtype", "tf32", "cudnn-benchmark", "warn-always"])
def test_state_guard_names_each_setting_and_how_to_restore_it(change, undo, named, fix):
    message = "\n".join(_leak(change, undo))
    assert named in message, message
    assert "fix:" in message and fix in message, message


def test_state_ignores_what_importing_jax_sets():
    """jax sets two environment variables when imported; a chapter that imports it is no leak."""
    before = state.read()
    saved = {k: os.environ.get(k) for k in state.SET_BY_IMPORTS}
    try:
        for name in state.SET_BY_IMPORTS:
            os.environ[name] = "1"
        assert state.leaks(before, state.read()) == []
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)


def test_snapshot_reseeds_every_global_generator_from_the_os():
    """A chapter may seed freely: the next one starts from fresh random state, as a new process."""
    import random

    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    seeded = (torch.rand(1), np.random.rand(), random.random())
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    state.snapshot()
    assert torch.initial_seed() != 0
    after = (torch.rand(1), np.random.rand(), random.random())
    assert not torch.equal(after[0], seeded[0]) and after[1:] != seeded[1:]
    state.check()  # reseeding is not a leak
