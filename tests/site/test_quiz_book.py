"""Quick checks answered in Chromium on the small book of tests/test_quiz_site.py (make test
checks its build only): a lesson with 8 quick checks passes, one with 7 fails, the stride
drill's chains are answered, and the whole page's checks pass in light and dark mode."""
from __future__ import annotations

import sys

import pytest
import site_checks as sc
from pdf import served

sys.path.insert(0, str(sc.ROOT / "tests"))
from test_quiz_site import build  # noqa: E402


@pytest.fixture(scope="module")
def quiz_book(tmp_path_factory):
    """The small book's build, and its site's address, served on 127.0.0.1."""
    root = tmp_path_factory.mktemp("quizbook")
    proc = build(root)
    with served(root / "_build" / "html") as url:
        yield proc, url


def test_quick_checks_are_answered_in_chromium(browser, quiz_book):
    proc, url = quiz_book
    assert proc.returncode == 0
    facts, problems = sc.quiz_check(browser, url, "book/good")
    assert (facts["questions"], facts["answered"], problems) == (8, 8, [])
    facts, problems = sc.quiz_check(browser, url, "book/few")
    assert problems == ["7 quick checks (goal: at least 8)"], problems
    facts, problems = sc.quiz_check(browser, url, "book/stride-drill", drill=True)
    assert facts["chains"] == 200 and facts["sampled"] >= 20 and problems == [], (facts, problems)
    for mode in ("light", "dark"):     # the whole page's checks, axe-core included
        page = browser.new_page(viewport={"width": 390, "height": 900}, color_scheme=mode)
        assert sc.check_page(page, url, "book/good", "", mode) == []
        page.close()
    # A shape typed as "3,2" is read as Python prints it, (3, 2).
    page = browser.new_page()
    page.goto(f"{url}/book/good.html")
    page.wait_for_function("() => document.querySelectorAll('div.tf-quiz[data-rendered=\"1\"]').length == 8")
    field = page.locator("div.tf-quiz").nth(1).locator("input.Input-text")
    field.fill("3,2")
    field.press("Enter")
    assert field.input_value() == "(3, 2)"
    assert "correct" in page.locator("div.tf-quiz").nth(1).locator(".Feedback").get_attribute("class").split()
    page.close()
