"""Print the built site to one PDF, in reading order, and check it.

    python tools/pdf.py [_build/html]        (make pdf)

Opens every page of ``_toc.yml`` in headless Chromium (the one the site
check uses), prints it with the site's print style, and joins the pages into
``_build/html/tensor-fences.pdf``; only then does the landing page show its
link (``show_link``). Solutions move to the end of their chapter. Then reads
the PDF back and fails if a chapter title is missing, a code line shown
on a page is not whole in the PDF's text (clipped at the margin), raw MyST shows
(``{glue``, ``{code-cell}``, ``:::``, a backtick fence), a glued value is
empty on the page it was printed from, or a page with figures lost them.
"""
from __future__ import annotations

import io
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from check_site import built_site, launch, serve, toc_pages  # noqa: E402


OUT_NAME = "tensor-fences.pdf"
RAW_MYST = re.compile(r"\{glue|\{code-cell\}|^:::|^```\{|\{term\}`|\{torch\}`", re.M)


def print_pages(url: str, pages: list[str]) -> list[tuple[str, bytes, dict]]:
    """Each page as PDF bytes, with what the HTML held: title, figures, empty glue."""
    from playwright.sync_api import sync_playwright

    printed = []
    with sync_playwright() as pw:
        browser = launch(pw)
        for name in pages:
            page = browser.new_page()
            page.goto(f"{url}/{name}.html", wait_until="load")
            page.evaluate(PREPARE_JS)
            page.emulate_media(media="print")
            facts = page.evaluate("""() => ({
              title: (document.querySelector('main h1') || {}).innerText || '',
              figures: document.querySelectorAll('main img').length,
              code: [...document.querySelectorAll('main div.cell_input pre')]
                      .filter(p => !p.closest('details:not([open])'))
                      .flatMap(p => p.innerText.split('\\n'))
                      .map(l => l.trim()).filter(l => l.length > 0),
              empty: [...document.querySelectorAll('span.pasted-text, span.pasted-inline')]
                       .filter(g => !g.innerText.trim()).length,
            })""")
            facts["title"] = facts["title"].strip().rstrip("#").strip()
            printed.append((name, page.pdf(format="A4", print_background=True,
                                           margin={"top": "15mm", "bottom": "15mm",
                                                   "left": "12mm", "right": "12mm"}), facts))
            page.close()
        browser.close()
    return printed


#: Before printing: the solutions of a chapter go to its end, under one heading, so the
#: exercises print without their answers beside them.
PREPARE_JS = """() => {
  // Each code line its own block with a hanging indent: a line the page wraps at the
  // margin continues indented under its start, so it does not read as a new statement.
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


def whole_lines(code: list[str], flat: str) -> list[str]:
    """The code lines shown on a page that the PDF's text does not hold whole (spaces
    folded: a wrapped line is split by a line break and a continuation mark)."""
    squeezed = re.sub(r"\s+|↪", "", flat)
    return [line for line in code if re.sub(r"\s+", "", line) not in squeezed]


def problems_of(printed) -> list[str]:
    """What the joined PDF gets wrong, page by page."""
    from pypdf import PdfReader

    problems = []
    for name, data, facts in printed:
        reader = PdfReader(io.BytesIO(data))
        # NFKC: the PDF's text has ligatures ("ﬁ") where the page has two letters.
        text = unicodedata.normalize(
            "NFKC", "\n".join(p.extract_text() or "" for p in reader.pages))
        flat = " ".join(text.split())
        if facts["title"] and " ".join(facts["title"].split()) not in flat:
            problems.append(f"{name}: its title {facts['title']!r} is not in the PDF")
        raw = RAW_MYST.search(text)
        if raw:
            problems.append(f"{name}: raw MyST in the PDF: {raw.group(0)!r}")
        clipped = whole_lines(facts.get("code", []), flat)
        if clipped:
            problems.append(f"{name}: {len(clipped)} code line(s) not whole in the PDF, "
                            f"first: {clipped[0][:80]!r}")
        if facts["empty"]:
            problems.append(f"{name}: {facts['empty']} glued value(s) empty")
        images = sum(len(p.images) for p in reader.pages)
        if facts["figures"] and images == 0:
            problems.append(f"{name}: {facts['figures']} figure(s) on the page, none in the PDF")
    return problems


def join(printed, target: Path) -> int:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for name, data, facts in printed:
        writer.append(io.BytesIO(data), outline_item=facts["title"] or name)
    with target.open("wb") as out:
        writer.write(out)
    return len(writer.pages)


def show_link(folder: Path) -> None:
    """The landing page links the PDF only once it exists: un-hide its paragraph."""
    index = folder / "book" / "index.html"
    html = index.read_text(encoding="utf-8")
    index.write_text(html.replace('<p id="tf-pdf" hidden>', '<p id="tf-pdf">'), encoding="utf-8")


def main(argv: list[str]) -> int:
    folder = built_site(argv, "pdf")
    if folder is None:
        return 1
    pages = toc_pages()
    server, url = serve(folder)
    try:
        printed = print_pages(url, pages)
    finally:
        server.shutdown()
    target = folder / OUT_NAME
    count = join(printed, target)
    problems = problems_of(printed)
    if not problems:
        show_link(folder)
    for p in problems:
        print(f"FAIL {p}")
    print(f"pdf: {target} ({count} pages, {target.stat().st_size // 1024} KiB), "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
