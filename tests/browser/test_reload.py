"""A reload, or a server restart between two page loads, loses nothing (issue 11): the browser
keeps the session (model, text, settings, tokens with the forced ones marked, the view) and the
page replays it through the model."""

from __future__ import annotations

import pytest

from explorer.viz.labels import TOKEN_COLORS
from tests.browser.conftest import ARTIFACTS, free_port, running_app, wait_ready
from tests.browser.helpers import (
    choose_head,
    choose_layer,
    idle,
    shot,
    status,
    tokens,
    type_prompt,
    wait_plot_title,
    wait_token_count,
)
from tests.browser.test_lessons_ui import wait_step

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "The cat sat on the mat. The dog sat on the"
FORCED_COLOUR = ", ".join(str(int(TOKEN_COLORS["forced"][i : i + 2], 16)) for i in (1, 3, 5))  # a chosen token


def make_a_session(page) -> int:
    """Three steps, a forced third candidate, one more step, layer 4 and head 2; returns the count."""
    type_prompt(page, PROMPT)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    n = len(tokens(page))
    for i in (1, 2):
        page.click("#step")
        wait_token_count(page, n + i)
    idle(page)
    page.locator("#candidates [data-testid=cell-2-1]").click()  # replaces the last token: a branch
    page.wait_for_function("() => document.querySelector('#token-strip').innerText.length > 0")
    idle(page)
    page.click("#step")
    wait_token_count(page, n + 3)
    choose_layer(page, 4)
    wait_plot_title(page, "self-attention", "layer 4")
    choose_head(page, 2)
    wait_plot_title(page, "self-attention", "head 2")
    idle(page)
    return n + 3


def forced_marks(page) -> list[bool]:
    colours = page.eval_on_selector_all("#token-strip .token", "els => els.map(e => e.style.backgroundColor)")
    return [FORCED_COLOUR in c for c in colours]


def same_session(page, expected_tokens, expected_forced) -> None:
    page.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                           arg=len(expected_tokens))  # fmt: skip
    wait_plot_title(page, "self-attention", "layer 4, head 2")
    idle(page)
    assert tokens(page) == expected_tokens
    assert forced_marks(page) == expected_forced and sum(expected_forced) == 1
    assert page.locator("#prompt textarea").input_value() == PROMPT
    assert page.locator("#layer input[type=number]").input_value() == "4"
    assert page.locator("#head input").input_value() == "head 2"
    assert "4 generated" in status(page)


def test_a_reload_brings_the_same_session_back(page):
    make_a_session(page)
    before, forced = tokens(page), forced_marks(page)
    held = page.evaluate("() => localStorage.getItem('decoder-explorer-session')")
    assert len(held) > 100 and "cat" not in held and "tokens" not in held  # kept encrypted, not in clear
    page.reload()
    wait_ready(page)
    same_session(page, before, forced)
    page.click("#step")  # and it is live: it steps on
    wait_token_count(page, len(before) + 1)
    shot(page, "reload-restored")


def test_a_server_restart_between_two_page_loads_loses_nothing(browser):
    port = free_port()
    log = ARTIFACTS / "app-restart.log"
    log.unlink(missing_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(120_000)
    with running_app(log, port=port) as (url, _):
        page.goto(url)
        wait_ready(page)
        make_a_session(page)
        before, forced = tokens(page), forced_marks(page)
    page.goto("about:blank")
    with running_app(log, port=port) as (url, _):  # the Space woke up: a new process, the same address
        page.goto(url)
        wait_ready(page)
        same_session(page, before, forced)
        # The server kept no copy: a browser without one (a new profile) starts a new session.
        other = browser.new_context(viewport={"width": 1280, "height": 800})
        fresh = other.new_page()
        fresh.goto(url)
        wait_ready(fresh)
        idle(fresh)
        assert "0 generated" in status(fresh) and fresh.locator("#prompt textarea").input_value() != PROMPT
        other.close()
    context.close()


def own_work(tab, url: str, text: str) -> list[str]:
    """``text`` typed and stepped once in ``tab`` (opened at ``url``); returns the tokens."""
    tab.set_default_timeout(120_000)
    tab.goto(url)
    wait_ready(tab)
    type_prompt(tab, text)
    tab.click("#step")
    tab.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(tab)
    return tokens(tab)


def shows_work(tab, text: str, expected_tokens: list[str]) -> None:
    tab.wait_for_function("t => document.querySelector('#prompt textarea').value === t", arg=text)
    tab.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n",
                          arg=len(expected_tokens))  # fmt: skip
    idle(tab)
    assert tokens(tab) == expected_tokens


def test_each_tab_keeps_its_own_session_and_a_new_tab_gets_the_last_changed(browser, app_url):
    """Issue 40, item 16: two tabs of one browser each get their own session back at a reload
    (it was the tab that changed last: the first tab's work was one reload from gone); a new tab
    opens with the session that changed last."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    first, second = context.new_page(), context.new_page()
    texts = {"first": "The first tab's own words", "second": "Words the second tab typed"}
    first_tokens = own_work(first, app_url, texts["first"])
    second_tokens = own_work(second, app_url, texts["second"])
    first.reload()
    wait_ready(first)
    shows_work(first, texts["first"], first_tokens)
    second.reload()
    wait_ready(second)
    shows_work(second, texts["second"], second_tokens)
    third = context.new_page()
    third.set_default_timeout(120_000)
    third.goto(app_url)
    wait_ready(third)
    shows_work(third, texts["second"], second_tokens)
    context.close()


def test_a_lesson_link_opened_over_own_work_keeps_it(browser, app_url):
    """Issue 40, item 16: a lesson link opened in a tab with the user's own work offers "Back to
    your text", and the browser's Back brings that work back too."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    mine = "My own sentence about the river"
    work = own_work(tab, app_url, mine)
    tab.goto(app_url.rstrip("/") + "/?lesson=1&step=2")
    wait_step(tab, 1, 1)
    tab.wait_for_selector("#lesson-back", state="visible")
    assert tab.locator("#prompt textarea").input_value() != mine
    shot(tab, "lesson-link-over-own-work")
    tab.go_back()
    wait_ready(tab)
    shows_work(tab, mine, work)
    tab.go_forward()
    wait_step(tab, 1, 1)
    tab.click("#lesson-back")
    shows_work(tab, mine, work)
    context.close()


def test_foreign_storage_gives_a_new_session(page):
    """What the browser holds under the explorer's key is not what the explorer wrote (another
    app, an old version, an edit by hand): a new session on the default model, and no error."""
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    page.evaluate("""() => {  // what this tab holds (its own copy) and what a new tab would read
        localStorage.setItem('decoder-explorer-session', 'not what the explorer wrote');
        sessionStorage.setItem('decoder-explorer-session', 'not what the explorer wrote'); }""")
    page.reload()
    wait_ready(page)
    idle(page)
    assert "0 generated" in status(page)
