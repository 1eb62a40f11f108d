"""One CI definition: .ci/run and the workflow run the Makefile's targets, and the
releases are listed once (tools/matrix.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import matrix  # noqa: E402


def commands(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def make_recipe(target: str) -> list[str]:
    """The recipe lines of ``target`` in the Makefile."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert m, f"no {target} target in the Makefile"
    return [line.strip() for line in m.group(1).splitlines()]


def workflow_runs() -> dict[str, list[str]]:
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "verify.yml").read_text())
    return {name: [step["run"] for step in job["steps"] if "run" in step]
            for name, job in flow["jobs"].items()}


def test_ci_run_is_make_ci():
    lines = commands((ROOT / ".ci" / "run").read_text())
    assert lines[-1] == "make ci", lines
    assert all(not line.startswith(("make ", "python", ".venv")) for line in lines[:-1]), lines


def test_make_ci_is_the_book_steps_then_the_matrix():
    assert make_recipe("ci-book") == [f"$(MAKE) {t}" for t in
                                      ("test", "mutate", "book", "check-site", "pdf")]
    recipe = make_recipe("ci")
    assert recipe[1:3] == ["$(MAKE) ci-book", "$(MAKE) matrix"], recipe
    # then the count of each chapter's executions on the reference torch, at most two
    assert "fencecheck.cachekey --executions" in recipe[3] and recipe[3].endswith(" 2"), recipe


def test_the_workflow_runs_the_same_targets():
    runs = workflow_runs()
    assert any(r.startswith("make ci-book") for r in runs["book"]), runs["book"]
    assert any(r.startswith('make matrix RELEASES="${{ matrix.release }}"') for r in runs["matrix"])
    assert any(r.startswith("make matrix RELEASES=nightly") for r in runs["nightly"])
    assert any(r.startswith("make matrix-report") for r in runs["report"])
    # Nothing else runs the suite, the build or a tool of its own.
    for job, lines in runs.items():
        for line in lines:
            assert not re.search(r"pytest|jupyter-book|tools/(?!matrix\.py --list)", line), (job, line)


def test_the_release_list_lives_in_tools_matrix_only():
    text = (ROOT / ".github" / "workflows" / "verify.yml").read_text()
    for release in matrix.RELEASES:
        assert release.name not in text, release.name
    assert "fromJSON(needs.releases.outputs.list)" in text
    listed = subprocess.run([sys.executable, str(ROOT / "tools" / "matrix.py"), "--list"],
                            capture_output=True, text=True, check=True).stdout
    assert json.loads(listed) == [r.name for r in matrix.RELEASES] + [matrix.NEWEST]


def test_no_job_or_step_hides_its_failure():
    """Only the report's download of the nightly artifact may be missing (no nightly result)."""
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "verify.yml").read_text())
    for name, job in flow["jobs"].items():
        assert "continue-on-error" not in job, name
        for step in job["steps"]:
            if "continue-on-error" in step:
                assert name == "report" and step.get("with", {}).get("name") == "nightly", (name, step)


def test_nightly_is_named_only_and_reported_apart(tmp_path):
    assert matrix.resolve(["nightly"]) == [matrix.NIGHTLY]
    assert matrix.NIGHTLY not in matrix.resolve([], newest=lambda: "2.15.0")
    assert matrix.check(["nightly"]) == []
    path = tmp_path / "nightly.json"
    path.write_text(json.dumps({"torch": "2.16.0.dev20261201+cpu", "exitstatus": 1, "fences": [
        {"id": "a", "outcome": "passed"}, {"id": "b", "outcome": "failed"}]}))
    section = matrix.nightly_section(path)
    assert "2.16.0.dev20261201+cpu: 1 failed, 1 passed; exit status 1. Failed: b." in section
    assert "could not be read" in matrix.nightly_section(tmp_path / "missing.json")
    path.write_text(json.dumps({"torch": None, "exitstatus": 1, "error": "install failed: boom",
                                "fences": []}))
    assert "install failed: boom" in matrix.nightly_section(path)


def test_a_failing_nightly_is_reported_not_failing_the_run_nor_in_the_record(monkeypatch, tmp_path):
    ran = []

    def run_release(release):
        ran.append(release)
        return 1

    monkeypatch.setattr(matrix, "run_release", run_release)
    monkeypatch.setattr(matrix, "report", lambda before, names, base: f"report of {names}")
    monkeypatch.setattr(matrix, "REPORT", tmp_path / "_build" / "matrix-report.md")
    monkeypatch.setattr(matrix, "ROOT", tmp_path)
    assert matrix.main(["nightly"]) == 0
    assert ran == [matrix.NIGHTLY]
    assert matrix.NIGHTLY_RESULTS.parent.name == "_build"     # not results/: not the record


def test_the_nightly_environment_takes_the_newest_nightly_at_each_install():
    """nox reuses an environment; the nightly's install upgrades torch from the nightly
    index each time (a pinned release's is only checked), then adds the suite's packages."""
    import noxfile

    torch_call, suite_call = noxfile.install_args("nightly", environ={})
    assert torch_call[-1] == "torch" and "--upgrade-package" in torch_call
    assert torch_call[torch_call.index("--index-url") + 1] == noxfile.NIGHTLY_INDEX
    assert suite_call == noxfile.SUITE
    assert not any("--upgrade-package" in call for call in noxfile.install_args("2.8.0", environ={}))


def test_nox_has_a_session_for_each_listed_release(tmp_path):
    """noxfile.py's sessions, as nox lists them, are fencecheck/releases.py's list, then
    newest and nightly: a release added there alone (here, in a copy) is a session; the
    matrix runs each release in its session (a release newer than the list in newest's)."""
    import shutil

    from fencecheck import releases

    def sessions(root: Path) -> list[str]:
        out = subprocess.run([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-l", "--json"],
                             capture_output=True, text=True, check=True).stdout
        return [s["session"] for s in json.loads(out)]

    expected = [f"torch({n})" for n in [*releases.names(), "newest", "nightly"]]
    assert sessions(ROOT) == expected
    for release in [*matrix.RELEASES, matrix.NIGHTLY, matrix.Release("2.99.0", "torch==2.99.0")]:
        assert matrix.nox_command(release)[-1] in expected, release
    assert matrix.nox_command(matrix.Release("2.99.0", "torch==2.99.0"))[-1] == "torch(newest)"
    (tmp_path / "fencecheck").mkdir()
    (tmp_path / "fencecheck" / "__init__.py").write_text("")
    shutil.copy(ROOT / "noxfile.py", tmp_path)
    (tmp_path / "fencecheck" / "releases.py").write_text(
        (ROOT / "fencecheck" / "releases.py").read_text() + '\nRELEASES += (("2.99.0", "torch==2.99.0", "", ""),)\n')
    assert sessions(tmp_path) == [*expected[:-2], "torch(2.99.0)", *expected[-2:]]


def test_the_site_depends_on_every_module_of_both_packages():
    """make book rebuilds after an edit of any module of the runtime or the verifier."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "--eval",
                          "print-inputs: ; @echo $(INPUTS)", "print-inputs"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    modules = {p.relative_to(ROOT).as_posix() for package in ("fences", "fencecheck")
               for p in (ROOT / package).rglob("*.py")}
    assert "fencecheck/upstream/nbval.py" in modules and not modules - set(out), modules - set(out)


def test_pytest_collects_every_chapter_of_the_book():
    """The repository's conftest.py registers the plugin: without it book/ collects nothing."""
    from fencecheck.chapter import toc_files

    out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-n", "0", "book"],
                         cwd=ROOT, capture_output=True, text=True)
    collected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    assert collected == {p.relative_to(ROOT).as_posix() for p in toc_files(ROOT)}, out.stdout[-2000:]


def test_the_matrix_command_parses(tmp_path):
    """Every option the matrix passes to pytest is one the plugin still defines: a removed
    option failed every release of the matrix, and only there (a CI run of 18 minutes)."""
    cmd = matrix.pytest_command(sys.executable, tmp_path / "r.json", "2.13.0+cpu")
    cmd = [c for c in cmd if c not in ("-n", "auto", "--dist", "loadscope")] + ["--co", "-p", "no:xdist"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-1500:]
    # and it can fail: an option the plugin does not define is refused
    bad = subprocess.run([*cmd, "--fences-no-such-option"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode != 0 and "unrecognized arguments" in bad.stderr, bad.stderr[-500:]


def test_the_matrix_runs_the_reference_release_in_this_environment():
    """The release whose torch this interpreter has runs here (so it reads make test's
    stored runs); any other gets an environment of its own."""
    from importlib.metadata import version

    here = version("torch")
    assert matrix.own_python(matrix.Release(here, f"torch=={here}")) == Path(sys.executable)
    assert matrix.own_python(matrix.Release("2.8.0", "torch==2.8.0" if here != "2.8.0" else "torch==2.9.1")) is None
    assert matrix.own_python(matrix.NIGHTLY) is None
