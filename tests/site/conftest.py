"""The browser checks of the built site (``make check-site``: ``pytest tests/site``), on
pytest-playwright's Chromium: Debian's /usr/bin/chromium, or Playwright's own with
CHROMIUM=bundled. ``--site`` names the built site (default _build/html); the planted
pages and notebooks (``-k planted``) need no build. Not collected by ``make test``."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import site_checks as sc
from pdf import LAUNCH, served  # the browser and the local server that make pdf uses

#: The figures the checks measured, printed after the run (the reader's measures).
FIGURES: list[str] = []


def pytest_addoption(parser):
    parser.addoption("--site", default=str(sc.ROOT / "_build" / "html"),
                     help="the built site to check (default: _build/html)")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, **LAUNCH}


@pytest.fixture(scope="session")
def site(pytestconfig):
    """The built site's address, served on 127.0.0.1."""
    folder = Path(pytestconfig.getoption("site"))
    if not (folder / "index.html").exists():
        pytest.fail(f"check-site: {folder}/index.html is missing; run `make book` first")
    with served(folder) as url:
        yield url


@pytest.fixture(scope="session")
def planted():
    """The address of a folder of planted pages: each check's defect, and pages without."""
    with tempfile.TemporaryDirectory() as tmp:
        pages = {"good": sc.GOOD, "bad": sc.BAD, **{k: v for k, (v, _) in sc.planted_quizzes().items()}}
        for fonts, css in {"": "", **sc.FONT_SETS}.items():
            style = f"<style>{css}</style></head>" if css else "</head>"
            for name, text in sc.MEASURE_PAGES.items():
                pages[sc.planted_name(name, fonts)] = text.replace("</head>", style, 1)
        for name, text in pages.items():
            Path(tmp, f"{name}.html").write_text(text)
        Path(tmp, "good.ipynb").write_text("{}")
        with served(Path(tmp)) as url:
            yield url


@pytest.fixture(scope="session")
def figures():
    return FIGURES


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("the reader's measures")
        for line in FIGURES:
            terminalreporter.write_line(line)
