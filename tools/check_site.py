"""Open every page of the built site in headless Chromium and check it as a reader would.

    python tools/check_site.py [_build/html]        (make check-site)

Serves the folder on 127.0.0.1, then for each chapter page asserts: the
title names the page, no error/traceback/stderr output, every glued value
rendered, no console error, the .ipynb download offered. Then searches for
"stride" and expects the views chapter among the results. Every fence
must carry its record badge. Every page is opened 390 px wide, in light
and dark mode: none may scroll sideways; and a badge's link must open the
collapsed grid of the Verified-on page at the fence's row. Saves one screenshot per
page under _build/screenshots/. Exits 1 on any failure.

First it checks itself: a good page must pass, and a page with a
traceback, an empty glued value, a console error and no download must
fail for each of them.
"""
from __future__ import annotations

import functools
import http.server
import re
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fences.chapter import toc_files  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "_build" / "screenshots"


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def check_page(page, url: str, pagename: str) -> list[str]:
    """Problems found on one page (empty when it is fine)."""
    problems: list[str] = []
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: console.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: console.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(f"{url}/{pagename}.html", wait_until="load")
    page.wait_for_timeout(300)

    h1 = page.locator("main h1").first.inner_text().strip().rstrip("#").strip()
    title = re.sub(r"^\d+(\.\d+)*\. ", "", page.title())  # a numbered chapter: "1. Title"
    if not h1 or not title.startswith(h1) or "Tensor Fences" not in title:
        problems.append(f"title {title!r} does not name the page {h1!r}")
    for selector, what in [("div.output.traceback", "traceback output"),
                           ("div.output.error", "error output"),
                           ("div.output.stderr", "stderr output")]:
        n = page.locator(selector).count()
        if n:
            problems.append(f"{n} {what} block(s): {page.locator(selector).first.inner_text()[:200]!r}")
    body = page.locator("main").inner_text()
    if "Traceback (most recent call last)" in body:
        problems.append("a Python traceback is printed in the page")
    if "{glue" in body:
        problems.append("an unrendered {glue} role is in the page")
    glued = page.locator("span.pasted-text, span.pasted-inline")
    empty = [i for i in range(glued.count()) if not glued.nth(i).inner_text().strip()]
    if empty:
        problems.append(f"{len(empty)} glued value(s) rendered empty")
    if page.locator('a[href$=".ipynb"]').count() == 0:
        problems.append("no .ipynb download link")
    fences = page.locator("div.cell.tag_fence").count()
    badged = page.locator("div.cell.tag_fence > p.tf-badge-line > a.tf-badge").count()
    if badged != fences:
        problems.append(f"{fences - badged} of {fences} fences have no record badge")
    problems += [f"console: {c}" for c in console]
    SHOTS.mkdir(parents=True, exist_ok=True)
    if not pagename.startswith(("good", "bad")):
        page.screenshot(path=str(SHOTS / f"{pagename.replace('/', '_')}.png"), full_page=False)
    return problems


def check_search(page, url: str) -> list[str]:
    page.goto(f"{url}/search.html?q=stride", wait_until="load")
    try:
        page.wait_for_selector("#search-results ul li a, ul.search li a", timeout=15000)
    except Exception:  # noqa: BLE001 - any timeout is the failure we report
        return ["search for 'stride' returned no results"]
    links = page.locator("#search-results ul li a, ul.search li a")
    hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "search-stride.png"))
    if not any("views" in h for h in hrefs):
        return [f"search for 'stride' did not return the views chapter (got {hrefs})"]
    return []


VERIFIED = "book/verified"


def check_record(browser, url: str, chapters: list[str]) -> list[str]:
    """Every page at 390 px, light and dark: no sideways scroll; a badge's link opens the fence's row."""
    problems: list[str] = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page = browser.new_page(viewport={"width": 390, "height": 844}, color_scheme=scheme)
        for name in (VERIFIED, *chapters):
            page.goto(f"{url}/{name}.html", wait_until="load")
            page.wait_for_timeout(300)
            theme = page.evaluate("document.documentElement.dataset.theme")
            if theme != scheme:
                problems.append(f"{name} at 390 px: asked for {scheme} mode, the page is in {theme!r}")
            wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if wide > 1:
                problems.append(f"{name} at 390 px ({scheme}): the page scrolls sideways by {wide} px")
            page.screenshot(path=str(SHOTS / f"{name.replace('/', '_')}-390-{scheme}.png"), full_page=True)
        page.close()
    page = browser.new_page(viewport={"width": 390, "height": 844})
    for name in chapters:
        page.goto(f"{url}/{name}.html", wait_until="load")
        badge = page.locator("a.tf-badge").first
        if not badge.count():
            continue
        href = badge.get_attribute("href") or ""
        ident = href.partition("#")[2]
        badge.click()
        page.wait_for_load_state("load")
        page.wait_for_timeout(300)
        row = page.locator(f'[id="{ident}"]')
        if not row.count() or not row.first.is_visible():
            problems.append(f"the badge of {ident} ({name}) does not open its row on the Verified-on page")
        page.screenshot(path=str(SHOTS / "verified-from-badge.png"))
        break
    page.close()
    return problems


GOOD = """<html><head><title>Good page &#8212; Tensor Fences</title><link rel="icon" href="data:,"></head><body><main>
<h1>Good page</h1><p>value <span class="pasted-text">42</span></p>
<a href="good.ipynb">.ipynb</a></main></body></html>"""
BAD = """<html><head><title>Bad page &#8212; Tensor Fences</title><link rel="icon" href="data:,"></head><body><main>
<h1>Bad page</h1><p>value <span class="pasted-text"></span></p>
<div class="output traceback"><pre>Traceback (most recent call last): AssertionError</pre></div>
<script>console.error("boom")</script></main></body></html>"""


def self_test(browser) -> list[str]:
    """The checker must pass a good page and fail a page with each defect it looks for."""
    import tempfile

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("good", GOOD), ("bad", BAD)):
            Path(tmp, f"{name}.html").write_text(text)
        Path(tmp, "good.ipynb").write_text("{}")
        server, url = serve(Path(tmp))
        try:
            for name, expected in (("good", []), ("bad", ["traceback output", "Traceback (most recent",
                                                          "rendered empty", "no .ipynb download",
                                                          "console: boom"])):
                page = browser.new_page()
                problems = check_page(page, url, name)
                page.close()
                text = "\n".join(problems)
                if not expected and problems:
                    failures.append(f"self-test: a good page was failed: {problems}")
                for e in expected:
                    if e not in text:
                        failures.append(f"self-test: the bad page was not failed for {e!r}: {problems}")
        finally:
            server.shutdown()
    return failures


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    folder = Path(argv[0]) if argv else ROOT / "_build" / "html"
    if not (folder / "index.html").exists():
        print(f"check-site: {folder}/index.html is missing; run `make book` first", file=sys.stderr)
        return 1
    pages = [p.relative_to(ROOT).with_suffix("").as_posix() for p in toc_files(ROOT)]
    server, url = serve(folder)
    failures = 0
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            broken = self_test(browser)
            print("ok   self-test: the checker fails a page with each defect" if not broken else
                  "FAIL self-test\n     - " + "\n     - ".join(broken))
            failures += bool(broken)
            for name in pages:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                problems = check_page(page, url, name)
                page.close()
                failures += bool(problems)
                print(f"{'ok  ' if not problems else 'FAIL'} {name}")
                for p in problems:
                    print(f"     - {p}")
            page = browser.new_page()
            problems = check_search(page, url)
            failures += bool(problems)
            print(f"{'ok  ' if not problems else 'FAIL'} search 'stride'")
            for p in problems:
                print(f"     - {p}")
            problems = check_record(browser, url, [n for n in pages if n != VERIFIED])
            failures += bool(problems)
            print(f"{'ok  ' if not problems else 'FAIL'} the record at 390 px, light and dark")
            for p in problems:
                print(f"     - {p}")
            browser.close()
    finally:
        server.shutdown()
    print(f"check-site: {len(pages) + 3 - failures} passed, {failures} failed; screenshots in {SHOTS}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
