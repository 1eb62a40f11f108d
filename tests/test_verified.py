"""The "Verified on" page's parts (fencecheck.verified): true counts, behaviours in words, the grid."""
from __future__ import annotations

from fencecheck import record, verified
from test_record import fence, rec, run


def url(chapter: str) -> str:
    return chapter.removeprefix("book/").removesuffix(".md") + ".html"


CURRENT = [fence("a"), fence("b", cell=1), fence("gpu", chapter="book/c.md")]
GPU = "needs a CUDA GPU; torch.cuda.is_available() is False"


def runs():
    return [
        run("2.8.0", [rec("a", observed={"acc": "1", "n": "5"}, labels={"acc": "the answer"}),
                      rec("b"), rec("gpu", "skipped", reason=GPU)]),
        run("2.13.0+cpu", [rec("a", observed={"acc": "2", "n": "6"}, labels={"acc": "the answer"}),
                           rec("b", "failed", reason="AssertionError: boom"),
                           rec("gpu", "skipped", reason=GPU)], build="CPU-only"),
        run("2.15.0", [rec("a", observed={"acc": "2", "n": "5"}, labels={"acc": "the answer"}),
                       rec("b"), rec("gpu", "skipped", reason=GPU)]),
    ]


def test_summary_counts_fences_and_marks_a_red_release():
    html = verified.summary_html(runs(), CURRENT)
    assert "The book has <b>3</b> fences" in html
    rows = html.split("<tr>")[2:]
    assert '<td data-label="passed">2</td><td data-label="failed">0</td><td data-label="skipped">1</td>' in rows[0]
    assert ">green</td>" in rows[0] and ">RED</td>" in rows[1]
    assert "CPU-only · no GPU" in rows[1]
    assert "errors outside fences" not in html  # a column only where there are some


def test_summary_says_which_chapters_are_not_counted():
    current, digests = CURRENT, {"book/a.md": "da", "book/c.md": "dc"}
    partly = run("2.9.1", [rec("a"), rec("b"), rec("gpu", chapter="book/c.md")],
                 chapters={"book/a.md": "da", "book/c.md": "old"})
    (part,), _ = record.split([partly], current, digests)
    html = verified.summary_html([part], current)
    assert "green (1 chapters changed since: their 1 fences not counted)" in html


def test_summary_shows_errors_outside_fences_only_when_there_are_some():
    broken = [run("2.8.0", [rec("a")], errors=[{"chapter": "book/a.md", "item": "Cell 2", "reason": "x"}])]
    html = verified.summary_html(broken, CURRENT)
    assert "<th>errors outside fences</th>" in html and '<td data-label="errors outside fences">1</td>' in html


def test_changes_are_behaviours_in_words_with_the_release_and_the_section():
    changes = record.changes(runs(), CURRENT)
    html = verified.changes_html(changes, CURRENT, url)
    assert '<td data-label="behaviour">the answer</td>' in html
    assert '<td data-label="old → new">1 → 2</td>' in html
    assert '<td data-label="first release with the new value">2.13.0 (first recorded on its ' \
        'cpu build)</td>' in html
    assert '<td data-label="differs by">release</td>' in html
    assert '<a href="a.html#fence-a">a: Section of a</a>' in html
    assert "<code>n</code>" not in html  # no description: not a behaviour row


def test_values_without_a_description_are_collapsed_apart():
    html = verified.other_values_html(record.changes(runs(), CURRENT), CURRENT, url)
    assert html.startswith('<details class="tf-details"><summary>1 more recorded values differ')
    assert "<code>n</code>" in html
    assert "seen only on the CPU-only build 2.13.0+cpu: 6; CUDA builds with no GPU: 5" in html


def test_upgrades_come_first_newest_first_then_build_differences():
    changes = [record.Change("a", "x", "built", "build", by_build={"CPU-only": "1", "CUDA": "2"}),
               record.Change("a", "y", "older", "release", old="1", new="2", since="2.9.1"),
               record.Change("a", "z", "newer", "release", old="1", new="2", since="2.13.0+cpu")]
    assert [c.label for c in sorted(changes, key=verified.bite_first)] == \
        ["newer", "older", "built"]


def test_never_run_fences_are_called_out():
    html = verified.never_run_html(record.never_run(runs(), CURRENT), url)
    assert "<b>1 fences never ran on any release</b>" in html
    assert f'<li>{GPU}: <a href="c.html#fence-gpu">gpu</a></li>' in html


def test_grid_is_collapsed_per_chapter_with_an_anchor_per_fence():
    html = verified.grid_html(runs(), CURRENT, url)
    assert html.count('<details class="tf-details tf-grid-chapter">') == 2
    assert "<summary>a (2 fences, 1 failing)</summary>" in html
    assert '<tr id="fence-b">' in html
    row = html.split('<tr id="fence-b">')[1].split("</tr>")[0]
    assert '<td class="tf-pass" title="2.8.0: passed">✓</td>' in row
    assert '<td class="tf-fail" title="2.13.0+cpu: FAILED: AssertionError: boom">✗</td>' in row
    assert '<span class="tf-badge tf-badge-fails">fails on 2.13.0+cpu</span>' in row


def test_provenance_reports_stale_files_and_an_empty_record():
    why = ["book/a.md changed since this run (fences whose code changed: a)"]
    stale = [(run("2.9.1", [rec("a", code="old")]), why)]
    html = verified.provenance_html(runs(), stale)
    assert "Current results for <b>3</b> releases (2.8.0, 2.13.0+cpu, 2.15.0)" in html
    assert "<b>Stale: results/2.9.1.json</b>" in html and "fences whose code changed: a" in html
    assert "No results yet" in verified.provenance_html([], [])
    same = ["written before fences had ids"]
    two = verified.provenance_html([], [(dict(run("2.8.0", []), file="2.8.0.json"), same),
                                        (dict(run("2.9.1", []), file="2.9.1.json"), same)])
    assert two.count('class="tf-stale"') == 1 and "results/2.8.0.json, results/2.9.1.json" in two
