"""HTML for the "Verified on" page and the errors page, from the record (``fencecheck.record``).

Each function returns one part, placed by ``fencecheck.sphinx``'s ``{record}`` directive; a ``url``
maps a chapter path ("book/views.md") to its page's address relative to the page.
"""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Callable

from . import record
from .record import Fence

SYMBOL = {"passed": ("tf-pass", "✓", "passed"), "failed": ("tf-fail", "✗", "FAILED"),
          "skipped": ("tf-skip", "–", "skipped"), None: ("tf-missing", "○", "not in this run")}

Url = Callable[[str], str]


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def _table(head: list[str], rows: list[list[str]], css: str = "tf-table") -> str:
    """A table whose cells carry their column's name (``data-label``): the CSS stacks a row into a card
    under 600 px."""
    body = []
    for cells in rows:
        pairs = zip(head, (cell if isinstance(cell, tuple) else ("", cell) for cell in cells))
        tds = "".join(f'<td data-label="{esc(name)}"{attrs}>{text}</td>' for name, (attrs, text) in pairs)
        body.append(f"<tr>{tds}</tr>")
    th = "".join(f"<th>{h}</th>" for h in head)
    return f'<table class="{css} tf-stack"><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def fence_link(f: Fence, url: Url, text: str | None = None) -> str:
    """A link to the fence on its chapter's page, named by its section (or ``text``)."""
    stem = Path(f.chapter).stem
    where = text or (f"{stem}: {f.section}" if f.section else stem)
    return f'<a href="{esc(url(f.chapter))}#fence-{esc(f.id)}">{esc(where)}</a>'


def provenance_html(runs: list[dict], stale: list[tuple[dict, list[str]]]) -> str:
    """One paragraph: which releases, which book commit, when; and a warning per stale file."""
    if not runs and not stale:
        return ('<p class="tf-note">No results yet: run <code>make matrix</code>; every fence says '
                '"checked on this build only" until then.</p>')
    parts = []
    if runs:
        commits = sorted({(r.get("commit") or "unknown")[:12] + (" (with uncommitted changes)" if r.get("dirty")
                                                                 else "") for r in runs})
        dates = sorted({r.get("date", "?") for r in runs})
        when = f"{dates[0]} to {dates[-1]}" if len(dates) > 1 else dates[0]
        parts.append(f"<p>Current results for <b>{len(runs)}</b> releases "
                     f"({esc(', '.join(record.label(r) for r in runs))}), run on book commit "
                     f"{esc(', '.join(commits))}, dated {esc(when)}.</p>")
    groups: dict[tuple, list[dict]] = {}
    for run, why in stale:  # files stale for the same reasons share one note
        groups.setdefault(tuple(why), []).append(run)
    for why, group in groups.items():
        files = ", ".join(f"results/{run.get('file', record.label(run) + '.json')}" for run in group)
        commits = sorted({(run.get("commit") or "unknown")[:12] for run in group})
        one = len(group) == 1
        parts.append(
            f'<div class="tf-stale"><b>Stale: {esc(files)}</b> (book commit {esc(", ".join(commits))}) '
            f"{'does' if one else 'do'} not describe the book as it is now: {esc('; '.join(why))}. "
            f"What {'it holds' if one else 'they hold'} of those chapters is not shown; "
            f"<code>make matrix</code> regenerates {'it' if one else 'them'}.</div>")
    return "".join(parts)


def summary_html(runs: list[dict], current: list[Fence]) -> str:
    """Per release: build, fences passed / failed / skipped, errors outside fences, status."""
    if not runs:
        return ""
    errors = any(record.counts(r)["errors"] for r in runs)
    ids = {f.id for f in current}
    rows = []
    for run in runs:
        c = record.counts(run)
        missing, changed = len(ids - set(record.by_id(run))), len(run.get("stale_chapters", []))
        gaps = (f" ({changed} chapters changed since: their {missing} fences not counted)" if changed
                else f" ({missing} fences not run)" if missing else "")
        css, status = ("tf-pass", "green") if record.ok(run) else ("tf-fail", "RED")
        title = run.get("error") or (f"{c['errors']} failures outside fences" if c["errors"] else "")
        gpu = f" · GPU: {esc(run['gpu'])}" if run.get("gpu") else " · no GPU"
        rows.append([f"<b>{esc(record.label(run))}</b>", f"{esc(run.get('build', ''))}{gpu}",
                     str(c["passed"]), str(c["failed"]), str(c["skipped"]), *([str(c["errors"])] if errors else []),
                     (f' class="{css}" title="{esc(title)}"', status + gaps)])
    head = ["release", "build", "passed", "failed", "skipped", *(["errors outside fences"] if errors else []), "status"]
    return (f"<p>The book has <b>{len(current)}</b> fences; each row counts fences only "
            "(setup cells and illustrations are not fences).</p>" + _table(head, rows, "tf-table tf-summary"))


def never_run_html(never: list[tuple[Fence, str]], url: Url) -> str:
    """The fences no release executed, grouped by why."""
    if not never:
        return "<p>Every fence ran on at least one release.</p>"
    groups: dict[str, list[Fence]] = {}
    for f, why in never:
        groups.setdefault(why, []).append(f)
    return (f'<p class="tf-note"><b>{len(never)} fences never ran on any release</b>; '
            "they are not verified anywhere:</p><ul>"
            + "".join(f"<li>{esc(why)}: {', '.join(fence_link(f, url, f.id) for f in fs)}</li>"
                      for why, fs in groups.items()) + "</ul>")


def bite_first(c: record.Change) -> tuple:
    """What a user meets first: a change on upgrading (newest first), then one that came and went,
    then a difference between builds."""
    if c.kind == "release":
        return (0, tuple(-int(n) for n in c.since.partition("+")[0].split(".")))
    return (1 if c.kind == "varies" else 2, ())


def changes_html(changes: list[record.Change], current: list[Fence], url: Url) -> str:
    """One row per behaviour (a labelled value that differs), in words."""
    where = {f.id: f for f in current}
    rows = []
    for c in sorted((c for c in changes if c.label), key=bite_first):
        if c.kind == "release":
            what, since, by = f"{esc(record.words(c.old))} → {esc(record.words(c.new))}", esc(c.release()), "release"
        elif c.kind == "build":
            what = "; ".join(f"{esc(b)} build: {esc(record.words(v))}" for b, v in c.by_build.items())
            since, by = "—", "build: " + " vs ".join(f"{esc(b)} build" for b in c.by_build)
        elif c.kind == "one-build":
            what, since, by = esc(c.text()), "—", "release or build: no release was recorded in both builds"
        else:
            what = "; ".join(f"{esc(record.words(v))} from {esc(r)}" for r, v in c.segments)
            since, by = esc(c.segments[1][0]), "release and build"
        rows.append([esc(c.label), what, since, by, fence_link(where[c.fence], url)])
    if not rows:
        return "<p>No described behaviour differs between the releases on record.</p>"
    return _table(["behaviour", "old → new", "first release with the new value", "differs by", "explained in"],
                  rows, "tf-table tf-changes")


def other_values_html(changes: list[record.Change], current: list[Fence], url: Url) -> str:
    """Recorded values without a description that differ: collapsed, for the authors."""
    where = {f.id: f for f in current}
    bare = [c for c in changes if not c.label]
    if not bare:
        return ""
    items = "".join(f"<li><code>{esc(c.name)}</code> ({fence_link(where[c.fence], url, c.fence)}): "
                    f"{esc(c.text())}</li>" for c in bare)
    return (f"<details class=\"tf-details\"><summary>{len(bare)} more recorded values differ but have no "
            "description (internal values; an author gives one with "
            f"<code>fences.observe(name, value, label=...)</code>)</summary><ul>{items}</ul></details>")


def grid_html(runs: list[dict], current: list[Fence], url: Url) -> str:
    """Every fence × every release, one collapsed table per chapter; rows anchored ``fence-<id>``."""
    by_chapter: dict[str, list[Fence]] = {}
    for f in current:
        by_chapter.setdefault(f.chapter, []).append(f)
    records = [record.by_id(r) for r in runs]
    head = "".join(f"<th>{esc(record.label(r))}</th>" for r in runs)
    out = []
    for chapter, fs in by_chapter.items():
        rows, bad = [], 0
        for f in fs:
            cells = []
            for run, recs in zip(runs, records):
                rec = recs.get(f.id)
                css, mark, word = SYMBOL[rec["outcome"] if rec else None]
                bad += bool(rec and rec["outcome"] == "failed")
                tip = f"{record.label(run)}: {word}" + (f": {rec['reason']}" if rec and rec.get("reason") else "")
                cells.append(f'<td class="{css}" title="{esc(tip)}">{mark}</td>')
            b = record.badge(f.id, runs, f.labels)
            rows.append(f'<tr id="fence-{esc(f.id)}"><th scope="row">{fence_link(f, url, f.id)}'
                        f"<br><small>{esc(f.proves)}</small>"
                        f'<br><span class="tf-badge tf-badge-{b.kind}">{esc(b.text)}</span></th>{"".join(cells)}</tr>')
        out.append(f'<details class="tf-details tf-grid-chapter"><summary>{esc(Path(chapter).stem)} '
                   f"({len(fs)} fences{f', {bad} failing' if bad else ''})</summary>"
                   f'<div class="tf-scroll"><table class="tf-table tf-grid"><thead><tr><th>fence</th>{head}</tr>'
                   f"</thead><tbody>{''.join(rows)}</tbody></table></div></details>")
    return ("<p class=\"tf-legend\">✓ passed, ✗ failed, – skipped (hover for why), "
            "○ not in that release's results</p>" + "".join(out))


#: A message that differs from another only in its numbers (sizes, indices) is the same
#: message to a reader: one entry, the other numbers listed in it.
_NUMBERS = re.compile(r"\d+")
#: A "Raised by" line that shows no call a reader makes (a table's dispatch, ``eval``,
#: a helper called with no arguments or only ``**kwargs``) is left out.
_INDIRECT = re.compile(r"^(?:\w+\[[^\]]*\]|eval|exec)\(.*\)$|^\w+\((?:\*\*\w+)?\)$", re.S)


def _one_line(kind: str, message: str) -> str:
    return " ".join(f"{kind}: {message}".split())


def error_entries(raised: list[record.Raised]) -> list[tuple[str, list[record.Raised]]]:
    """The errors page's entries: each message (its numbers aside) once, with every fence that proves
    it, and its id ``message-<first fence>-<n>`` (the n-th message of that fence)."""
    groups: dict[tuple[str, str], tuple[str, list[record.Raised]]] = {}
    seen: dict[str, int] = {}
    for r in raised:
        seen[r.fence.id] = seen.get(r.fence.id, 0) + 1
        key = (r.kind, _NUMBERS.sub("N", _one_line("", r.message)))
        groups.setdefault(key, (f"message-{r.fence.id}-{seen[r.fence.id]}", []))[1].append(r)
    return list(groups.values())


def error_anchors(raised: list[record.Raised]) -> list[tuple[str, list[str]]]:
    """For each entry on the errors page, its id and the site search's index entries for it:
    each message as printed on one line (as a pasted message is), with each other release's
    words. A ``;`` would split an index entry, so it is written as a comma."""
    return [(anchor, list(dict.fromkeys(_one_line(k, m).replace(";", ",") for r in group
                                        for k, m in [(r.kind, r.message), *r.elsewhere.values()])))
            for anchor, group in error_entries(raised)]


def _code(text: str) -> str:
    """Escaped, with the `backticks` of a fence's comment as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))


def errors_sections(raised: list[record.Raised], url: Url, reference: str,
                    titles: dict[str, str]) -> list[tuple[str, str]]:
    """The errors page's body, a (title, HTML) section per chapter (``titles``: path -> title):
    each message once, in full as the ``reference`` run gave it, with the same message's other
    numbers, the calls that raise it, each fence that proves it (its claim and fix), and each
    release or build that gave other words."""
    out: list[tuple[str, list[str]]] = []
    for anchor, group in error_entries(raised):
        first = group[0]
        title = titles.get(first.fence.chapter, Path(first.fence.chapter).stem)
        if not out or out[-1][0] != title:
            out.append((title, []))
        shown = _one_line(first.kind, first.message)
        alike = [w for w in dict.fromkeys(_one_line(r.kind, r.message) for r in group) if w != shown]
        calls = [c for c in dict.fromkeys(c for r in group for c in r.fence.calls) if not _INDIRECT.match(c.strip())]
        places = "".join(f"<li>{fence_link(f, url)}: {esc(f.proves)}"
                         + (f"<br>The fix: {_code(f.fix)}" if f.fix else "")
                         + "</li>" for f in dict.fromkeys(r.fence for r in group))
        other = {k: v for r in group for k, v in r.elsewhere.items()}
        out[-1][1].append(
            f'<div class="tf-error" id="{esc(anchor)}">'
            f'<p class="tf-error-message"><code>{esc(first.kind)}: {esc(first.message)}</code></p>'
            + ("<p>The same with other numbers:</p><ul>" + "".join(f"<li><code>{esc(w)}</code></li>" for w in alike)
               + "</ul>" if alike else "")
            + ("<p>Raised by:</p>" + "".join(f"<pre>{esc(c)}</pre>" for c in calls) if calls else "")
            + f"<p>Proved, and explained, in (torch {esc(reference)}):</p><ul>{places}</ul>"
            + ("<p>Other releases or builds gave other words:</p><ul>" + "".join(
                f"<li>{esc(k)}: <code>{esc(kind)}: {esc(msg)}</code></li>" for k, (kind, msg) in other.items())
               + "</ul>" if other else "")
            + "</div>")
    return [(title, "\n".join(parts)) for title, parts in out]
