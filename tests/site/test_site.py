"""The built site as a reader meets it, page by page and view by view (docs/site-checks.md):
``pytest tests/site -k views`` checks one chapter."""
from __future__ import annotations

import re

import pytest
import site_checks as sc
from pdf import toc_pages  # the pages the PDF prints
from site_checks import is_lesson

PAGES = toc_pages()
LESSONS = [n for n in PAGES if is_lesson(n)]


@pytest.mark.parametrize("view", sc.VIEWS, ids=lambda v: f"{v[0]}-{v[2]}")
@pytest.mark.parametrize("name", PAGES, ids=sc.short)
def test_page(new_context, site, name, view):
    device, width, mode = view
    page = new_context(viewport={"width": width, "height": 900}, color_scheme=mode).new_page()
    problems = sc.check_page(page, site, name, f"{device}-{mode}", mode)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", PAGES, ids=sc.short)
def test_readers_measures(browser, site, name, figures):
    facts = sc.measure(browser, site, name)
    lesson = is_lesson(name)
    figures.append(f"measures {name}: {facts['screens']} screens to {facts['to']}, "
                   f"longest visible cell {facts['visible_cell']} lines, "
                   f"{facts['long_outputs']} visible outputs over {sc.MAX_VISIBLE_LINES} lines, "
                   f"{facts['observed']} [observed] lines")
    # A lesson meets every goal; another page (a reference page's tables
    # are its content) only shows no [observed] line.
    problems = sc.measure_problems(facts) if lesson else sc.measure_problems(
        {**facts, "screens": 0, "visible_cell": 0, "long_outputs": 0})
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", LESSONS, ids=sc.short)
def test_lesson_form_measures(browser, site, name, figures):
    f3 = sc.measure_form3(browser, site, name)
    figures.append(f"lesson form {name}: {f3['showing']} of {f3['fences']} lesson "
                   f"fences show output ({f3['share']:.0%}), {len(f3['silent'])} raise/warn "
                   f"fences without their message, about {f3['minutes']} minutes to read "
                   f"({f3['words']} prose words, {f3['code_lines']} visible code lines), "
                   f"{f3['teaching_screens']} screens to the exercises; visible cells "
                   f"using a folded name: refused by the lint")
    problems = sc.form3_problems(f3)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", [n for n in PAGES if n == sc.DRILL or is_lesson(n)], ids=sc.short)
def test_quick_checks_answered(browser, site, name, figures):
    """Every quick check of a lesson, and a sample of the drill's chains, answered in Chromium."""
    facts, problems = sc.quiz_check(browser, site, name, drill=name == sc.DRILL)
    figures.append(sc.quiz_line(name, facts).strip())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("query, chapter", sc.SEARCHES.items())
def test_search_lists_the_chapter_first(page, site, query, chapter):
    problems = sc.check_search(page, site, query, chapter)
    assert not problems, "\n".join(problems)


def test_search_check_fails_a_chapter_that_is_not_listed_first(page, site):
    assert sc.check_search(page, site, "stride", "promotion"), \
        "self-test: the search check passed a chapter that 'stride' does not list first"


def test_badge_opens_its_row_on_the_verified_page(browser, site):
    problems = sc.check_badge_link(browser, site, [n for n in PAGES if n != sc.VERIFIED])
    assert not problems, "\n".join(problems)


# The errors page: each message pasted into the site's search finds its explanation.
@pytest.fixture(scope="module")
def errors(browser, site):
    """A page to search with, and each message on the errors page -> the pages explaining it."""
    if sc.ERRORS not in PAGES:
        pytest.skip(f"{sc.ERRORS} is not in the toc")
    page = browser.new_page()
    yield page, sc.explaining_pages(sc.error_messages(page, site))
    page.close()


def test_errors_search_fails_a_message_on_no_page(errors, site):
    assert sc.check_error_search(errors[0], site, "zqxvj wombat flux capacitor", sc.ERRORS), \
        "self-test: a message on no page passed the search check"


def test_errors_search_finds_a_message_with_other_numbers(errors, site):
    """A reader's message has their own numbers: the book's with others is found."""
    page, messages = errors
    numbered = next((m for m in messages if re.search(r"\d", m) and ";" not in m), "")
    other = re.sub(r"\d+", lambda d: str(int(d.group()) + 7), numbered)
    assert not (numbered and sc.check_error_search(page, site, other, sc.ERRORS)), \
        f"a message with other numbers is not found: {other[:90]!r}"


def test_errors_search_finds_a_message_with_words_of_its_own(errors, site):
    """... and the name of the function that raised it, or a word of their own (a device
    name), which the book never uses: the search leaves it out."""
    page, messages = errors
    longest = max(messages, key=len, default="")
    tail = f"{longest} (when checking argument in method wrapper___zqxvj)"
    assert not (longest and sc.check_error_search(page, site, tail, sc.ERRORS)), \
        f"a message with an unknown word after it is not found: {tail[:90]!r}"


def test_errors_search_finds_a_message_with_one_word_changed(errors, site):
    page, messages = errors
    words = max(messages, key=len, default="").split(" ")
    swapped = " ".join(words[:2] + ["zqxvj"] + words[3:])
    assert not (len(words) > 8 and sc.check_error_search(page, site, swapped, sc.ERRORS)), \
        f"a message with one word changed is not found: {swapped[:90]!r}"


def test_errors_search_finds_each_explanation(errors, site, figures):
    page, messages = errors
    assert messages, "the errors page lists no message"
    misses = []
    for message, explained in messages.items():
        misses += sc.check_error_search(page, site, message, explained)
    share = 1 - len(misses) / len(messages)
    figures.append(f"errors search: {len(messages) - len(misses)} of {len(messages)} "
                   f"messages ({share:.0%}) find a page that explains them in the first "
                   f"{sc.ERROR_RANK}" + "".join(f"\n  {miss}" for miss in misses))
    assert share >= sc.ERROR_GOAL, (f"{share:.0%} of the messages are found, under the goal "
                                    f"of {sc.ERROR_GOAL:.0%}")
