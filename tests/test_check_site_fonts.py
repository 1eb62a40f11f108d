"""The site check's self-test of the reader's measures does not depend on this machine's
fonts (issue #52, item 8): its planted lessons are measured again with other font sets
forced on them by CSS (``check_site.FONT_SETS``: a large serif and a small narrow face,
CJK fallbacks named for a machine that has them), and every verdict must hold: the
lessons within the goals pass, the ones past them fail for each measure. Nothing is
installed; the faces are this machine's, at other sizes and line heights, which moves
every figure the measures take (the test checks that it does). Without Chromium it skips.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import check_site as cs  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    if not Path(cs.CHROMIUM).exists() and cs.CHROMIUM != "bundled":
        pytest.skip(f"no Chromium at {cs.CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        chromium = cs.launch(pw)
        yield chromium
        chromium.close()


@pytest.mark.parametrize("fonts", ["", *cs.FONT_SETS])
def test_the_measures_self_test_holds_under_other_fonts(browser, fonts):
    assert cs.measures_self_test(browser, cs.FONT_SETS.get(fonts, "")) == []


def test_the_font_sets_move_the_figures(browser):
    """The override is not a no-op: the planted form-3 lesson's screens and the long
    lesson's screens differ under each font set from this machine's default."""
    def figures(css: str) -> tuple:
        style = f"<style>{css}</style></head>" if css else "</head>"
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "f.html").write_text(cs.BAD_FORM3.replace("</head>", style, 1))
            Path(tmp, "l.html").write_text(cs.BAD_LESSON.replace("</head>", style, 1))
            server, url = cs.serve(Path(tmp))
            try:
                return (cs.measure_form3(browser, url, "f")["teaching_screens"],
                        cs.measure(browser, url, "l")["screens"])
            finally:
                server.shutdown()

    default = figures("")
    for name, css in cs.FONT_SETS.items():
        moved = figures(css)
        assert moved[0] != default[0] and moved[1] != default[1], (name, default, moved)


def test_an_exact_figure_in_the_self_test_fails_under_other_fonts(browser, monkeypatch):
    """The must-fail twin: a self-test expecting this machine's exact figure (the planted
    form-3 lesson's "N screens ... to the exercises", which the self-test must never
    assert) passes with these fonts and fails under another font set: so the test above
    would catch an exact figure put back."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "f.html").write_text(cs.BAD_FORM3)
        server, url = cs.serve(Path(tmp))
        try:
            here = cs.measure_form3(browser, url, "f")["teaching_screens"]
        finally:
            server.shutdown()
    exact = f"{here} screens at 1400×900 to the exercises"
    monkeypatch.setattr(cs, "MEASURED_FORM3", [*cs.MEASURED_FORM3, exact])
    assert cs.measures_self_test(browser) == []
    failed = cs.measures_self_test(browser, cs.FONT_SETS["serif, large"])
    assert len(failed) == 1 and repr(exact) in failed[0], failed
