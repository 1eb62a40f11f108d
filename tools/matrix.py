"""The release matrix: every chapter's fences, once per supported torch.

    python tools/matrix.py [RELEASE ...]     (make matrix [RELEASES="2.8.0 newest"])
    python tools/matrix.py --report-only     the change report for results/ as it is
    python tools/matrix.py nightly           the newest nightly, reported beside the record
    python tools/matrix.py --list            the releases, as JSON (the CI workflow's matrix)
    python tools/matrix.py --check [RELEASE ...]   the arguments and results/ only, nothing run

Each release runs in its session of ``noxfile.py`` with this checkout on PYTHONPATH; docs/matrix.md
says what it writes, what the report (``_build/matrix-report.md``) compares and what fails the run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fencecheck import record  # noqa: E402
from fencecheck import releases as listed  # noqa: E402

RESULTS = ROOT / "results"
REPORT = ROOT / "_build" / "matrix-report.md"


@dataclass(frozen=True)
class Release:
    """A torch to verify on: the name the results file takes and the pip requirement."""

    name: str
    requirement: str
    why: str = ""


RELEASES = [Release(name, req, why) for name, req, why, _ in listed.RELEASES]
NEWEST = "newest"
#: The newest nightly (CPU build), run only when named: reported beside the matrix, never
#: part of the record (its results go to _build/, not results/) and never failing the run.
NIGHTLY = Release("nightly", "torch", "the newest nightly build, reported only")
NIGHTLY_RESULTS = ROOT / "_build" / "nightly.json"
PYPI_JSON = "https://pypi.org/pypi/torch/json"
LISTED_REPRO = 40  # re-recorded records listed by name in the report


def newest_on_pypi(url: str = PYPI_JSON) -> str:
    """The newest torch release on PyPI (its "latest" version, never a pre-release)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.load(answer)["info"]["version"]


def resolve(names: list[str], newest=newest_on_pypi, problems: list[str] | None = None) -> list[Release]:
    """The releases to run: the named ones (all when none), "newest" resolved now, no duplicates.
    When PyPI cannot be asked, "newest" is left out and why goes to ``problems`` (else raised)."""
    known = {r.name: r for r in RELEASES}
    out: list[Release] = []
    for name in names or [*known, NEWEST]:
        if name == NEWEST:
            try:
                version = newest()
            except (OSError, ValueError, KeyError) as exc:
                if problems is None:
                    raise
                problems.append(f"newest: could not read the newest torch from {PYPI_JSON}: {exc}")
                continue
            rel = known.get(version) or Release(version, f"torch=={version}", "the newest release on PyPI")
        elif name == NIGHTLY.name or name in known:
            rel = known.get(name, NIGHTLY)
        else:
            raise SystemExit(f"unknown release {name!r}; known: {[*known, NEWEST, NIGHTLY.name]}")
        if rel not in out:
            out.append(rel)
    return out


def check(names: list[str]) -> list[str]:
    """What is wrong with the arguments or results/, before anything is installed or run."""
    known = [r.name for r in RELEASES] + [NEWEST, NIGHTLY.name]
    problems = [f"unknown release {n!r}; known: {', '.join(known)}" for n in names if n not in known]
    try:
        record.load(RESULTS)
    except record.BadFile as exc:
        problems.append(str(exc))
    return problems


def committed_results(root: Path = ROOT) -> list[dict] | None:
    """The results files in git HEAD, or None where there is no git history to read."""
    listing = record.git(root, "ls-tree", "--name-only", "HEAD", "results/")
    if listing is None:
        return None
    runs = []
    for name in (n for n in listing.split() if n.endswith(".json")):
        shown = record.git(root, "show", f"HEAD:{name}")
        if shown is not None:
            try:
                runs.append({**json.loads(shown), "file": Path(name).name})
            except ValueError as exc:
                raise record.BadFile(f"HEAD:{name}: not valid JSON ({exc})") from None
    found = record.problems(runs, book=root)
    if found:  # the committed record is itself invalid: nothing can be compared with it
        raise record.BadFile("the committed results (git HEAD) are invalid:\n" + "\n".join(found))
    return sorted(runs, key=record.run_key)


def reproduced(before: list[dict] | None, names: list[str], folder: Path = RESULTS) -> tuple[str, list[str]]:
    """(the report's section, the failures): does each fresh run of ``names`` reproduce its committed
    file (``before``, git HEAD)? A release with no committed file is new: nothing to reproduce."""
    try:
        runs = {record.label(r): r for r in record.load(folder)}
    except record.BadFile as exc:
        return f"## The record does not reproduce\n\n{exc}\n", [str(exc)]
    old = {record.label(r): r for r in before or []}
    failures, rerecorded, notes, new = [], [], [], []
    for name in names:
        if name == NIGHTLY.name or name not in runs:
            continue
        if name not in old:
            new.append(f"results/{runs[name].get('file')}")
            continue
        found = record.reproduce(old[name], runs[name])
        failures += found.failures
        rerecorded += found.rerecorded
        notes += found.notes
    more = [f"and {len(rerecorded) - LISTED_REPRO} more"] if len(rerecorded) > LISTED_REPRO else []
    lines = []
    for title, items in ((f"Records that did not reproduce ({len(failures)}): committed → this run", failures),
                         (f"Re-recorded: chapters changed since the committed file ({len(rerecorded)})",
                          rerecorded[:LISTED_REPRO] + more),
                         ("New results files (nothing committed to reproduce)", new),
                         ("Per-run fields that differ (not compared)", notes)):
        if items:
            lines += [f"## {title}", "", *(f"- {item}" for item in items), ""]
    if not failures and old:
        lines += ["Every record of an unchanged chapter reproduced its committed file.", ""]
    return "\n".join(lines), failures


def pytest_command(python: Path | str, out: Path, name: str) -> list[str]:
    """The suite's command for one release (tests/test_ci.py parses it with the plugin)."""
    return [str(python), "-m", "pytest", "book", "-q", "-p", "no:cacheprovider", "-n", "auto", "--dist", "loadscope",
            "--fences-results", str(out), "--fences-release", name]


def own_python(release: Release) -> Path | None:
    """This interpreter, when its torch is exactly the release's (the reference build in .venv): the
    suite then runs with ``make test``'s packages and reads the chapters' stored runs."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        here = version("torch")
    except PackageNotFoundError:
        return None
    return Path(sys.executable) if release.requirement == f"torch=={here}" else None


def nox_command(release: Release) -> list[str]:
    """nox, for the release's session of noxfile.py (a release newer than the list: newest's)."""
    session = release.name if release in RELEASES or release == NIGHTLY else NEWEST
    return [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", f"torch({session})"]


def run_release(release: Release) -> int:
    """Run the chapter suite on one release; write results/<name>.json (the nightly:
    _build/nightly.json, outside the record). Returns the exit code."""
    out = NIGHTLY_RESULTS if release == NIGHTLY else RESULTS / f"{release.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    python, nox = own_python(release), nox_command(release)
    try:
        if not python:  # nox makes (or checks) the environment, then runs the suite in it
            subprocess.run([*nox, "--install-only"], cwd=ROOT, check=True)
    except subprocess.CalledProcessError as exc:
        failed = {"release": release.name, "torch": None, "build": "install failed",
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "exitstatus": 1,
                  "error": f"install failed: {exc}", "fences": [], "errors": []}
        out.write_text(json.dumps(failed, indent=1) + "\n")
        print(f"[matrix] {release.name}: INSTALL FAILED ({exc})", flush=True)
        return 1
    cmd = pytest_command(python or "python", out, release.name)
    print(f"[matrix] {release.name}: {' '.join(cmd[2:])}", flush=True)
    code = subprocess.run(cmd if python else [*nox, "--no-install", "--", *cmd], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode
    print(f"[matrix] {release.name}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return code if out.exists() else (code or 1)


def report(before: list[dict] | None, names: list[str], base: str) -> str:
    everything = record.load(RESULTS)
    current, digests = record.read_book(ROOT)
    text = record.change_report(before or [], [r for r in everything if record.label(r) in names], everything,
                                current, digests, base)
    return text + ("\n" + nightly_section() if NIGHTLY.name in names else "")


def nightly_section(path: Path = NIGHTLY_RESULTS) -> str:
    head = "## Nightly (reported only, not part of the record)\n\n"
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return head + f"No result: {path.name} could not be read ({exc}).\n"
    outcomes = Counter(fence.get("outcome", "?") for fence in run.get("fences", []))
    counts = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) or "no fence ran"
    failed = [f["id"] for f in run.get("fences", []) if f.get("outcome") == "failed"]
    return head + (f"torch {run.get('torch')}: {counts}; exit status {run.get('exitstatus')}."
                   + (f" Failed: {', '.join(failed)}." if failed else "")
                   + (f" {run['error']}." if run.get("error") else "") + "\n")


def environments(prune: bool) -> None:
    """``prune`` (after the whole matrix): remove the environments of sessions noxfile.py no longer
    has, and what only they used in uv's cache; then print the disk both use."""
    import noxfile

    if prune:
        for marker in sorted(noxfile.ENVS.glob(f"*/{noxfile.MARKER}")):
            if marker.read_text() not in noxfile.SESSIONS:
                print(f"[matrix] removing {marker.parent} (no longer in the matrix)", flush=True)
                shutil.rmtree(marker.parent)
        subprocess.run([sys.executable, "-m", "uv", "cache", "prune", "--quiet"], check=False,
                       env={**os.environ, "UV_CACHE_DIR": str(noxfile.UV_CACHE)})
    there = [str(p) for p in (noxfile.ENVS, noxfile.UV_CACHE) if p.exists()]
    if there:
        subprocess.run(["du", "-sch", *there], check=False)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help=f"releases to run (default: all and {NEWEST})")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: report results/ as it is against the committed results")
    parser.add_argument("--list", action="store_true",
                        help="print the releases the matrix runs, as JSON (the CI workflow's matrix)")
    parser.add_argument("--check", action="store_true", help="check the arguments and results/ and exit; "
                        "change nothing (make matrix runs this before it installs anything)")
    args = parser.parse_args(argv)
    if args.list:
        print(json.dumps([r.name for r in RELEASES] + [NEWEST]))
        return 0
    problems = check(args.releases)
    if problems or args.check:
        for problem in problems:
            print(f"[matrix] {problem}", file=sys.stderr)
        return 2 if problems else 0
    try:
        before = committed_results()
    except record.BadFile as exc:
        print(f"[matrix] {exc}", file=sys.stderr)
        return 2
    base = "the committed results (git HEAD)"
    if before is None:
        before = record.load(RESULTS)
        base = "the results on disk before this run (no git history)"
    codes: dict[str, int] = {}
    if args.report_only:
        names = args.releases or [record.label(r) for r in record.load(RESULTS)] + \
            ([NIGHTLY.name] if NIGHTLY_RESULTS.exists() else [])
    else:
        releases = resolve(args.releases, problems=problems)
        RESULTS.mkdir(exist_ok=True)
        codes = {rel.name: run_release(rel) for rel in releases}
        nightly = codes.pop(NIGHTLY.name, None)
        environments(prune=not args.releases and not problems)
        names = list(codes) + ([NIGHTLY.name] if nightly is not None else [])
    text = report(before, names, base)
    section, unreproduced = reproduced(before, names)   # the nightly is never reproduced
    text += "\n" + section
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text, encoding="utf-8")
    print(text)
    print(f"[matrix] report written to {REPORT.relative_to(ROOT)}")
    if args.report_only:
        return 0
    problems += [f"not reproduced: {failure}" for failure in unreproduced]
    print("[matrix] " + ", ".join(f"{n}: {'ok' if c == 0 else 'FAILED'}" for n, c in codes.items()))
    for problem in problems:
        print(f"[matrix] FAILED {problem}")
    return 0 if all(c == 0 for c in codes.values()) and not problems else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
