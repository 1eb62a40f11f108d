"""`make mutate` itself: its operators, where it mutates, its verdict, and a real run.

The operator tests are pure AST work (tools/mutants.py) and need no torch.
The run tests execute tools/mutate.py on two small corpus chapters:
tests/corpus/mutate_strong.md, whose every mutant must be killed, and
tests/corpus/mutate_weak.md, whose deliberately weak fence must be reported
with its survivors and whose GPU-gated fence must be counted as not
executed. (tests/test_corpus.py lays out only the chapters it names, so it
never runs these two.)
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import mutants as ops  # noqa: E402 - tools/ is not a package
import mutate  # noqa: E402

CORPUS = Path(__file__).parent / "corpus"
STRONG, WEAK = CORPUS / "mutate_strong.md", CORPUS / "mutate_weak.md"
JAX = CORPUS / "mutate_jax.md"
FAULTS = CORPUS / "mutate_faults.md"


def changes(source: str) -> set[tuple[str, str]]:
    """(operator, mutated line) of every mutant of ``source``."""
    return {(m.operator, m.mutated.strip()) for m in ops.fence_mutants(source)}


# --- each operator produces its mutant ----------------------------------------

@pytest.mark.parametrize("source, operator, mutated", [
    ("assert t.sum() == 15", "number", "assert t.sum() == 16"),
    ("assert t.numel() == 1", "number", "assert t.numel() == 0"),
    ("assert t.numel() > 0", "number", "assert t.numel() > 1"),
    ("assert t.item() == 0.5", "number", "assert t.item() == -0.5"),
    ("assert t.item() == -1.5", "number", "assert t.item() == 1.5"),
    ("assert t.item() == 0.0", "number", "assert t.item() == 1.0"),
    ("assert t.stride() == (3, 1)", "shape", "assert t.stride() == (4, 1)"),
    ("assert t.shape == torch.Size([2, 3])", "shape", "assert t.shape == torch.Size([2, 4])"),
    ("assert t.dtype == torch.float32", "dtype", "assert t.dtype == torch.float64"),
    ("assert t.dtype == torch.int64", "dtype", "assert t.dtype == torch.int32"),
    ("assert a.dtype == np.float32", "dtype", "assert a.dtype == np.float64"),
    ("assert t.dtype == torch.float32", "compare", "assert t.dtype != torch.float32"),
    ("assert err < 1e-6", "compare", "assert err <= 1e-6"),
    ("assert n <= 3", "compare", "assert n < 3"),
    ("assert n >= 3", "compare", "assert n > 3"),
    ("assert t._base is None", "compare", "assert t._base is not None"),
    ("assert 'x' not in s", "compare", "assert 'x' in s"),
    ("assert t.is_contiguous() is True", "bool", "assert t.is_contiguous() is False"),
    ("assert torch.equal(m, torch.tensor([True, False]))", "bool",
     "assert torch.equal(m, torch.tensor([False, False]))"),
    ('with fences.raises(RuntimeError, "size"):\n    t.view(6)', "raises-body", "pass"),
    ('with fences.raises(RuntimeError, "size"):\n    t.view(6)', "raises-class",
     'with fences.raises(ValueError, "size"):'),
    ('with fences.raises(RuntimeError, "size"):\n    t.view(6)', "raises-class",
     'with fences.raises(TypeError, "size"):'),
    ('with fences.warns(UserWarning, "w"):\n    f()', "warns-class",
     'with fences.warns(DeprecationWarning, "w"):'),
    ('with fences.warns(UserWarning, "w"):\n    f()', "warns-body", "pass"),
    ("fences.grade.prove(check, solution=torch.zeros(2, 3, dtype=torch.int8), wrong=w)",
     "dtype", "fences.grade.prove(check, solution=torch.zeros(2, 3, dtype=torch.uint8), wrong=w)"),
    ("fences.grade.compare(answer, torch.zeros(2))", "shape",
     "fences.grade.compare(answer, torch.zeros(3))"),
], ids=lambda v: v if len(v) < 12 else None)
def test_each_operator_produces_its_mutant(source, operator, mutated):
    assert (operator, mutated) in changes(source), changes(source)


def test_a_table_row_is_dropped_or_its_expected_cells_changed():
    source = (
        "rows = [\n"
        '    ("uint8 + int8", torch.uint8, torch.int8, torch.int16),\n'
        '    ("bool + int8", torch.bool, torch.int8, torch.int8),\n'
        "]\n"
        "for name, a, b, want in rows:\n"
        "    assert torch.promote_types(a, b) == want, name\n")
    found = ops.fence_mutants(source)
    dropped = [m for m in found if m.operator == "table-row"]
    assert [m.original for m in dropped] == [
        '("uint8 + int8", torch.uint8, torch.int8, torch.int16)',
        '("bool + int8", torch.bool, torch.int8, torch.int8)']
    assert all(m.mutated == "<row deleted>" for m in dropped)
    assert [m.line for m in dropped] == [2, 3]
    # the dropped row's whole line goes, and the rest still parses
    assert '("uint8 + int8"' not in dropped[0].source and "torch.bool" in dropped[0].source
    assert ("dtype", '("uint8 + int8", torch.uint8, torch.int8, torch.int32),') in changes(source)


def test_a_dict_table_keeps_its_keys_and_changes_its_values():
    source = ('cases = {"a": (RuntimeError, 1), "b": (TypeError, 2)}\n'
              "for name, (kind, n) in cases.items():\n"
              "    with fences.raises(kind, name):\n"
              "        f(n)\n")
    found = changes(source)
    assert ("raises-class", 'cases = {"a": (ValueError, 1), "b": (TypeError, 2)}') in found
    assert ("number", 'cases = {"a": (RuntimeError, 2), "b": (TypeError, 2)}') in found
    dropped = [m.original for m in ops.fence_mutants(source) if m.operator == "table-row"]
    assert dropped == ['"a": (RuntimeError, 1)', '"b": (TypeError, 2)']
    assert not any('{"b"' in text or '"c"' in text for _, text in found)  # keys kept


def test_a_list_of_calls_is_a_domain_not_a_table():
    source = ('calls = [("x.t()", lambda: x.t()), ("x.view(6)", lambda: x.view(6))]\n'
              "for name, call in calls:\n"
              "    assert call().numel() == 6, name\n")
    assert {op for op, _ in changes(source)} == {"compare", "number"}


def test_setup_and_assert_messages_are_not_mutated():
    source = ("x = torch.zeros(3, dtype=torch.float32)\n"
              "y = x.view(1, 3)\n"
              "assert y.shape[0] == 1, 'message 7'\n")
    found = ops.fence_mutants(source)
    assert found and all(m.line == 3 for m in found)
    assert all("message 7" in m.mutated for m in found)
    assert all("y.shape[0]" in m.mutated for m in found)  # the index is not an expectation


def test_the_literal_side_is_the_expectation():
    found = changes("assert x ** -2 == 0.25")
    assert ("number", "assert x ** -2 == -0.25") in found
    assert not any("x ** -1" in text for _, text in found)
    # with no literal side, a model written in the fence is changed
    assert ("number", "assert s.nbytes() == 4 * s.element_size()") in changes(
        "assert s.nbytes() == 3 * s.element_size()")


def test_a_name_is_an_expectation_only_when_used_only_as_one():
    expected = "want = (3, 1)\nassert t.stride() == want\n"
    assert ("shape", "want = (4, 1)") in changes(expected)
    setup = "n = 3\nt = torch.zeros(n)\nassert t.numel() == n\n"
    assert not any(text.startswith("n =") for _, text in changes(setup))


def test_prove_mutates_the_solution_not_the_wrong_answers():
    source = ("fences.grade.prove(check, solution=torch.zeros(2),\n"
              "                   wrong=[(torch.zeros(3), 'shape')])\n")
    found = ops.fence_mutants(source)
    assert found and all(m.line == 1 for m in found)


def test_long_literals_are_sampled():
    source = f"assert t.tolist() == {list(range(100))}\n"
    values = [m for m in ops.fence_mutants(source) if m.operator == "number"]
    assert 1 < len(values) <= ops.SAMPLE + 1   # 1 -> 0 as well as 1 -> 2 where a 1 is sampled


def test_every_mutant_parses_and_differs_from_the_fence():
    source = STRONG.read_text().split("```{code-cell} ipython3\n:tags: [fence]\n")[2]
    source = source.split("```", 1)[0].split("\n", 1)[1]
    found = ops.fence_mutants(source)
    assert len(found) > 5
    for m in found:
        compile(m.source, "mutant", "exec")
        assert m.source != source


def test_mutants_name_their_line_in_the_chapter():
    name, cells = mutate.read_chapter(STRONG)
    assert name == "tests/corpus/mutate_strong.md"
    lines = STRONG.read_text().splitlines()
    fences = [c for c in cells if c.fence]
    assert [c.fence for c in fences] == ["strong-view", "strong-table"]
    for cell in fences:
        for m in ops.fence_mutants(cell.source, name, cell.fence, cell.line):
            assert m.original.splitlines()[0].strip() in lines[m.line - 1], m


def test_a_fence_without_an_id_gets_a_stand_in(tmp_path):
    chapter = tmp_path / "old.md"
    chapter.write_text(STRONG.read_text().replace(":fence-id: strong-view\n", ""))
    _, cells = mutate.read_chapter(chapter, tmp_path)
    assert [(c.fence, c.has_id) for c in cells if c.fence] == [
        ("old-cell-1", False), ("strong-table", True)]


# --- the verdict: allowlist, stale entries, scores ----------------------------

def record(*outcomes):
    mutants = [{"chapter": "book/a.md", "fence": "f", "number": i + 1, "operator": "compare",
                "line": 10 + i, "original": f"assert x == {i}", "mutated": f"assert x != {i}",
                "outcome": o, "detail": ""} for i, o in enumerate(outcomes)]
    return {"chapter": "book/a.md", "fences": [{"fence": "f", "line": 9, "has_id": True}],
            "mutants": mutants, "errors": []}


def test_a_justified_survivor_passes_and_an_unmatched_entry_is_stale():
    rec = record("killed", "survived", "survived", "not-executed", "not-reached")
    allow = [{"fence": "f", "mutated": "assert  x != 1", "reason": "equivalent"},
             {"fence": "f", "mutated": "assert x != 9", "reason": "gone"},
             {"fence": "other", "operator": "compare", "reason": "fence not run"}]
    verdict = mutate.judge([rec], allow)
    assert [m["line"] for m in verdict["survivors"]] == [12]
    assert verdict["stale"] == [allow[1]]  # entries of fences that did not run are not stale
    # ... unless the whole book ran: then that fence no longer exists
    again = record("killed", "survived", "survived", "not-executed", "not-reached")
    assert mutate.judge([again], allow, whole_book=True)["stale"] == [allow[1], allow[2]]
    c = mutate.tally(rec)
    assert (c["total"], c["killed"], c["justified"], c["survived"], c["not_executed"],
            c["not_reached"]) == (3, 1, 1, 1, 1, 1)


def test_an_operator_entry_justifies_every_survivor_of_that_operator():
    verdict = mutate.judge([record("survived", "survived")],
                           [{"fence": "f", "operator": "compare", "reason": "r"}])
    assert verdict["survivors"] == [] and verdict["stale"] == []


@pytest.mark.parametrize("text, message", [
    ("- {fence: f, mutated: x}", "needs `fence` and a `reason`"),
    ("- {fence: f, reason: r}", "needs `mutated`"),
    ("- {fence: f, reason: r, mutant: x}", "unknown key"),
    ("fence: f", "expected a YAML list"),
    ("- fence: f\n  reason: a: b", "not valid YAML"),
])
def test_a_malformed_allowlist_is_refused(tmp_path, text, message):
    path = tmp_path / "allow.yml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        mutate.load_allowlist(path)


def test_the_committed_allowlist_is_well_formed():
    mutate.load_allowlist(mutate.ALLOWLIST)


# --- a real run on the corpus --------------------------------------------------

JUSTIFYING = (
    "- fence: weak-numel\n"
    "  operator: number\n"
    "  reason: x has 6 elements, so any floor from 0 to 6 passes\n"
    "- fence: weak-numel\n"
    "  mutated: assert x.numel() > 1\n"
    "  reason: x has 6 elements and 6 > 1 as well\n"
    "- fence: weak-numel\n"
    "  mutated: assert x.numel() == 7\n"
    "  reason: matches nothing, so it is stale\n")


FAULTS_JUSTIFIED = (
    "- fence: faults-retry\n"
    "  operator: compare\n"
    "  kind: timeout\n"
    "  reason: the retry loop waits for ever on a false expectation\n"
    "- fence: faults-retry\n"
    "  mutated: assert x.numel() == 7\n"
    "  kind: timeout\n"
    "  reason: as above, the same loop waits for ever on it\n"
    "- fence: faults-n*\n"
    "  kind: unmeasured\n"
    "  reason: proved elsewhere, by the fences that follow it\n"
    "- fence: faults-unreached\n"
    "  kind: unmeasured\n"
    "  reason: a branch for a large tensor, never reached here\n")


def run_tool(tmp_path: Path, *args) -> tuple[int, str, dict]:
    out = tmp_path / "mutation.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "mutate.py"), *map(str, args),
                           "--json", str(out), "--jobs", "2"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr, json.loads(out.read_text())


@pytest.fixture(scope="module")
def runs(proven, tmp_path_factory):
    return proven("mutate-runs", lambda: mutate_runs(tmp_path_factory))


def mutate_runs(tmp_path_factory):
    """Runs of tools/mutate.py: the corpus with no allowlist, the weak fence with one
    that justifies it (and holds a stale entry), a chapter whose fence fails unmutated,
    a chapter that uses JAX, and a chapter run three times into one record
    (again unchanged, then with its second fence edited).

    A tooling proof, read back under an unchanged key (tests/conftest.py: ``proven``).
    """
    tmp = tmp_path_factory.mktemp("mutate")
    (tmp / "empty.yml").write_text("[]\n")
    (tmp / "allow.yml").write_text(JUSTIFYING)
    broken = tmp / "broken.md"
    broken.write_text(STRONG.read_text().replace("assert x.sum().item() == 15",
                                                 "assert x.sum().item() == 14"))
    out = {}
    for name, args in {
        "corpus": (STRONG, WEAK, "--allowlist", tmp / "empty.yml"),
        "justified": (WEAK, "--fence", "weak-numel", "--allowlist", tmp / "allow.yml"),
        "broken": (broken, "--fence", "strong-view", "--allowlist", tmp / "empty.yml"),
    }.items():
        (tmp / name).mkdir()
        out[name] = run_tool(tmp / name, *args)
    (tmp / "faults.yml").write_text(FAULTS_JUSTIFIED)
    for name, allow in (("faults", "empty.yml"), ("faults-justified", "faults.yml")):
        (tmp / name).mkdir()
        out[name] = run_tool(tmp / name, FAULTS, "--allowlist", tmp / allow, "--timeout", "3")
    (tmp / "jax").mkdir()
    out["jax"] = run_tool(tmp / "jax", JAX, "--allowlist", tmp / "empty.yml", "--timeout", "30")
    again = tmp / "again"
    again.mkdir()
    chapter = again / "strong.md"
    chapter.write_text(STRONG.read_text())
    for name in ("first", "unchanged"):
        out[name] = run_tool(again, chapter, "--allowlist", tmp / "empty.yml")
    chapter.write_text(STRONG.read_text().replace("assert len(rows) == 3",
                                                  "assert len(rows) == 3  # edited"))
    out["edited"] = run_tool(again, chapter, "--allowlist", tmp / "empty.yml")
    return out


def test_every_mutant_of_a_strong_fence_is_killed(runs):
    code, out, data = runs["corpus"]
    strong = next(c for c in data["chapters"] if c["chapter"].endswith("mutate_strong.md"))
    assert strong["total"] > 20 and strong["killed"] == strong["total"], out
    assert set(data["operators"]) >= {"number", "shape", "dtype", "compare", "bool",
                                      "raises-body", "raises-class", "table-row"}


def test_the_survivors_of_a_weak_fence_fail_the_run_and_are_named(runs):
    code, out, data = runs["corpus"]
    assert code == 1, out
    survivors = {(m["fence"], m["line"], m["mutated"]) for m in data["survivors"]}
    assert survivors == {("weak-numel", 30, "assert x.numel() > 1"),
                         ("weak-numel", 30, "assert x.numel() >= 2"),
                         ("weak-numel", 30, "assert x.numel() >= 0")}, out
    assert "tests/corpus/mutate_weak.md:30  fence weak-numel  [compare]" in out
    assert "- assert x.numel() >= 1" in out and "+ assert x.numel() > 1" in out


def test_a_fence_that_did_not_run_is_counted_apart(runs):
    _, out, data = runs["corpus"]
    weak = next(c for c in data["chapters"] if c["chapter"].endswith("mutate_weak.md"))
    if data["cuda_available"]:
        pytest.skip("this machine has a GPU: the gated fence and the GPU branch run")
    # weak-gated: both mutants; weak-branch: the mutant in the GPU branch
    assert weak["not_executed"] == 2 and weak["not_reached"] == 1, weak
    assert weak["total"] == 5 and weak["killed"] == 2, weak
    assert [(m["fence"], m["line"]) for m in data["not_reached"]] == [("weak-branch", 48)]


def test_justified_survivors_pass_the_run(runs):
    code, out, data = runs["justified"]
    assert code == 0, out
    assert len(data["justified"]) == 3 and data["survivors"] == []
    assert "1 stale allowlist entr" in out and "assert x.numel() == 7" in out


def test_a_fence_that_fails_unmutated_is_an_error(runs):
    code, out, data = runs["broken"]
    assert code == 1, out
    assert any("strong-view" in e and "fails" in e for e in data["errors"]), data["errors"]
    assert data["chapters"][0]["killed"] == 0  # no mutant of a failing fence counts as killed


def test_a_chapter_using_jax_runs_its_mutants_in_its_own_process(runs):
    code, out, data = runs["jax"]
    assert code == 0, out
    assert data["in_process"] == ["tests/corpus/mutate_jax.md jax-in-place"], out
    (chapter,) = data["chapters"]
    # each mutant ran on a copy of x and y (y still a view of the copy of x): had one
    # added 1 to the real x, the fence would fail; none hung (a fork would have)
    assert chapter["total"] >= 5 and chapter["killed"] == chapter["total"], out
    assert data["errors"] == [] and data["timeouts"] == [], out


def test_an_unchanged_fence_reuses_its_outcomes_and_an_edited_one_runs(runs):
    _, first_out, first = runs["first"]
    code, out, unchanged = runs["unchanged"]
    assert code == 0 and first["reused"] == 0, first_out
    assert unchanged["reused"] == 2 and "2 fences' outcomes reused" in out, out
    assert unchanged["chapters"] == first["chapters"] and \
        unchanged["operators"] == first["operators"]
    ran = {f["fence"]: f.get("reused", False) for f in runs["edited"][2]["fences"]}
    assert ran == {"strong-view": True, "strong-table": False}, runs["edited"][1]
    assert runs["edited"][2]["chapters"] == first["chapters"]


def test_the_reuse_key_names_what_decides_an_outcome():
    env = mutate.environment_key(mutate.deciding())
    assert mutate.environment_key(mutate.deciding()[:-1]) != env
    a = mutate.fence_keys(env, ["x = 1", "assert x == 1"])
    b = mutate.fence_keys(env, ["x = 2", "assert x == 1"])
    assert a[1] != b[1]  # a cell before the fence changed: its state may differ
    assert mutate.fence_keys(env, ["x = 1"]) == a[:1]
    assert set(mutate.chapter_packages()) >= {"numpy", "hypothesis", "ml_dtypes"}


# --- the Verified-on page -------------------------------------------------------

def test_the_page_renders_scores_and_justified_survivors(tmp_path):
    from fencecheck import mutation, record

    assert "Not measured yet" in mutation.section_html(tmp_path)
    data = {"build": "torch 2.13.0 (CPU-only build)", "date": "2026-12-01",
            "chapters": [{"chapter": "book/views.md", "fences": 4, "total": 10, "killed": 9,
                          "justified": 1, "survived": 0, "not_executed": 2,
                          "not_reached": 1}],
            "justified": [{"chapter": "book/views.md", "fence": "views-x", "line": 7,
                           "operator": "compare", "original": "assert n >= 50",
                           "mutated": "assert n > 50", "reason": "n is in the hundreds"}],
            "survivors": []}
    (tmp_path / mutation.RESULTS_NAME).write_text(json.dumps(data))
    page = mutation.section_html(tmp_path)
    assert "<td>views</td>" in page and "9 / 10 (90%)" in page and "<td>3</td>" in page
    assert "assert n &gt; 50" in page and "n is in the hundreds" in page
    # results/ holds one file per release; the scores live beside the allowlist
    assert mutate.RESULTS == ROOT / mutation.RESULTS_NAME
    assert all(run.get("release") for run in record.load(ROOT / "results"))


def test_release_kind_survivors_are_shown_apart(tmp_path):
    from fencecheck import mutation

    data = {"build": "torch", "date": "2026-12-01", "chapters": [], "survivors": [],
            "justified": [
                {"chapter": "book/a.md", "fence": "a-x", "line": 1, "operator": "raises-class",
                 "original": "RuntimeError", "mutated": "ValueError", "kind": "release",
                 "reason": "fails on 2.8.0"},
                {"chapter": "book/a.md", "fence": "a-y", "line": 2, "operator": "compare",
                 "original": "n >= 50", "mutated": "n > 50", "reason": "n is 130"}]}
    (tmp_path / mutation.RESULTS_NAME).write_text(json.dumps(data))
    page = mutation.section_html(tmp_path)
    assert "1 changes that cannot change the outcome on any release" in page
    assert "1 changes that survive on this release only" in page
    assert page.index("n is 130") < page.index("fails on 2.8.0")


def test_an_unknown_allowlist_kind_is_refused(tmp_path):
    bad = tmp_path / "allow.yml"
    bad.write_text("- fence: f\n  operator: compare\n  kind: maybe\n  reason: r\n")
    with pytest.raises(ValueError, match="kind 'maybe'"):
        mutate.load_allowlist(bad)


# --- what must fail the run: timeouts, unmeasured fences, unknown names -----------

def test_a_mutant_that_hangs_is_a_timeout_never_a_kill(runs):
    code, out, data = runs["faults"]
    assert code == 1, out
    (chapter,) = data["chapters"]
    assert chapter["killed"] == 0 and chapter["timeout"] == 2, out
    assert {m["mutated"].strip() for m in data["timeouts"]} == {
        "assert x.numel() != 6", "assert x.numel() == 7"}, out
    assert "2 mutant(s) timed out" in out and "kind: timeout" in out


def test_a_fence_with_nothing_to_mutate_or_unreached_asserts_fails_the_run(runs):
    code, out, data = runs["faults"]
    assert code == 1, out
    assert [u.split(":")[0] + " " + u.split()[1].rstrip(":") for u in data["unmeasured_open"]] \
        == ["tests/corpus/mutate_faults.md faults-nothing",
            "tests/corpus/mutate_faults.md faults-unreached"], data["unmeasured_open"]
    assert "nothing the operators change" in out and "asserts were not reached" in out


def test_justified_timeouts_and_unmeasured_fences_pass_the_run(runs):
    code, out, data = runs["faults-justified"]
    assert code == 0, out
    assert data["unmeasured_open"] == [] and data["stale"] == [], out
    assert all(m["reason"] for m in data["timeouts"]) and data["chapters"][0]["killed"] == 0


@pytest.mark.parametrize("args, message", [
    (["--fence", "no-such-id"], "no fence no-such-id"),
    ([str(STRONG), "--fence", "weak-numel"], "no fence weak-numel"),
    (["tests/corpus/no_such_chapter.md"], "no such chapter"),
])
def test_an_unknown_fence_or_chapter_is_an_error(tmp_path, args, message):
    (tmp_path / "empty.yml").write_text("[]\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "mutate.py"), *args,
                           "--json", str(tmp_path / "out.json"),
                           "--allowlist", str(tmp_path / "empty.yml")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_an_unmeasured_entry_names_a_fence_not_a_mutant(tmp_path):
    bad = tmp_path / "allow.yml"
    bad.write_text("- fence: f\n  operator: compare\n  kind: unmeasured\n  reason: r\n")
    with pytest.raises(ValueError, match="names a fence"):
        mutate.load_allowlist(bad)
    good = tmp_path / "good.yml"
    good.write_text("- fence: '*-ex-*'\n  kind: unmeasured\n  reason: each exercise is proved by its grade\n")
    assert mutate.load_allowlist(good)[0]["kind"] == "unmeasured"


def test_the_reuse_key_follows_the_runtime_not_the_verifier(verifier_edited, runtime_edited):
    """An edit of the verifier re-mutates nothing; an edit of the runtime re-runs every mutant."""

    before = mutate.environment_key([])
    verifier_edited()
    assert mutate.environment_key([]) == before
    runtime_edited()
    assert mutate.environment_key([]) != before


