"""Print the built site to one PDF in reading order, and check it: ``python tools/pdf.py [_build/html]`` (make pdf).

Solutions move to the end of their chapter. It fails if a chapter title is missing, a code line shown on a page is
not whole in the PDF (clipped at the margin), raw MyST shows, a glued value is empty, or a page lost its figures;
only a PDF that passes is linked from the landing page.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import io
import os
import re
import sys
import threading
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fencecheck import chapter  # noqa: E402

#: Debian's chromium by default; CHROMIUM=bundled uses the browser `playwright install` downloads.
#: The site's checks (tests/site/conftest.py) launch it the same way.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: Playwright's ``chromium.launch`` arguments.
LAUNCH = {"executable_path": None if CHROMIUM == "bundled" else CHROMIUM,
          "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync"]}
OUT_NAME = "tensor-fences.pdf"
RAW_MYST = re.compile(r"\{glue|\{code-cell\}|^:::|^```\{|\{term\}`|\{torch\}`", re.M)

#: Before printing: each code line its own block with a hanging indent (a line wrapped at the
#: margin does not read as a new statement), and the solutions under one heading at the end.
PREPARE_JS = """() => {
  document.querySelectorAll('main div.highlight pre').forEach(pre => {
    pre.innerHTML = pre.innerHTML.split('\\n').map(l => `<span class="tf-line">${l}</span>`).join('');
  });
  const sols = [...document.querySelectorAll('main .solution, main details.solution')];
  const article = document.querySelector('main article') || document.querySelector('main');
  if (!sols.length || !article) return;
  const end = document.createElement('section');
  end.innerHTML = '<h2>Solutions</h2>';
  sols.forEach(s => { if (s.tagName === 'DETAILS') s.open = true; end.appendChild(s); });
  article.appendChild(end);
}"""

#: What the page held: its title, figures, the code lines shown, and empty glued values.
FACTS_JS = """() => ({
  title: (document.querySelector('main h1') || {}).innerText || '',
  figures: document.querySelectorAll('main img').length,
  code: [...document.querySelectorAll('main div.cell_input pre')]
          .filter(p => !p.closest('details:not([open])'))
          .flatMap(p => p.innerText.split('\\n'))
          .map(l => l.trim()).filter(l => l.length > 0),
  empty: [...document.querySelectorAll('span.pasted-text, span.pasted-inline')]
           .filter(g => !g.innerText.trim()).length,
})"""


def toc_pages() -> list[str]:
    """Every page ``_toc.yml`` lists, as a page name (``book/views``): the PDF's order, and the pages the site's
    checks open (tests/site)."""
    return [p.relative_to(ROOT).with_suffix("").as_posix() for p in chapter.toc_files(ROOT)]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def served(folder: Path):
    """``folder`` served on 127.0.0.1 in a thread, while the block runs; yields its URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def print_pages(url: str, pages: list[str]) -> list[tuple[str, bytes, dict]]:
    """Each page as (name, PDF bytes, what its HTML held)."""
    from playwright.sync_api import sync_playwright

    printed = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**LAUNCH)
        for name in pages:
            page = browser.new_page()
            page.goto(f"{url}/{name}.html", wait_until="load")
            page.evaluate(PREPARE_JS)
            page.emulate_media(media="print")
            facts = page.evaluate(FACTS_JS)
            facts["title"] = facts["title"].strip().rstrip("#").strip()
            margin = {"top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"}
            printed.append((name, page.pdf(format="A4", print_background=True, margin=margin), facts))
            page.close()
        browser.close()
    return printed


def problems_of(printed) -> list[str]:
    """What the PDF gets wrong, page by page."""
    from pypdf import PdfReader

    problems = []
    for name, data, facts in printed:
        reader = PdfReader(io.BytesIO(data))
        # NFKC: the PDF's text has ligatures ("ﬁ") where the page has two letters.
        text = unicodedata.normalize("NFKC", "\n".join(p.extract_text() or "" for p in reader.pages))
        flat = " ".join(text.split())
        if facts["title"] and " ".join(facts["title"].split()) not in flat:
            problems.append(f"{name}: its title {facts['title']!r} is not in the PDF")
        raw = RAW_MYST.search(text)
        if raw:
            problems.append(f"{name}: raw MyST in the PDF: {raw.group(0)!r}")
        # Spaces folded: a wrapped line is split by a line break and a continuation mark.
        squeezed = re.sub(r"\s+|↪", "", flat)
        clipped = [line for line in facts["code"] if re.sub(r"\s+", "", line) not in squeezed]
        if clipped:
            problems.append(f"{name}: {len(clipped)} code line(s) not whole in the PDF, "
                            f"first: {clipped[0][:80]!r}")
        if facts["empty"]:
            problems.append(f"{name}: {facts['empty']} glued value(s) empty")
        if facts["figures"] and not sum(len(p.images) for p in reader.pages):
            problems.append(f"{name}: {facts['figures']} figure(s) on the page, none in the PDF")
    return problems


def main(argv: list[str]) -> int:
    from pypdf import PdfWriter

    folder = Path(argv[0]) if argv else ROOT / "_build" / "html"
    if not (folder / "index.html").exists():
        print(f"pdf: {folder}/index.html is missing; run `make book` first", file=sys.stderr)
        return 1
    with served(folder) as url:
        printed = print_pages(url, toc_pages())
    target = folder / OUT_NAME
    writer = PdfWriter()
    for name, data, facts in printed:
        writer.append(io.BytesIO(data), outline_item=facts["title"] or name)
    with target.open("wb") as out:
        writer.write(out)
    problems = problems_of(printed)
    if not problems:   # the landing page links the PDF only once it passes: un-hide its paragraph
        index = folder / "book" / "index.html"
        index.write_text(index.read_text(encoding="utf-8").replace('<p id="tf-pdf" hidden>', '<p id="tf-pdf">'),
                         encoding="utf-8")
    for p in problems:
        print(f"FAIL {p}")
    print(f"pdf: {target} ({len(writer.pages)} pages, {target.stat().st_size // 1024} KiB), "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
