"""Gemma 3 270M in the browser (issue 44, item 1): chosen from the list, it loads, steps, every
view draws on it without an error, its sliding layers are named, and its card and licence are one
click from the page."""

from __future__ import annotations

import pytest

from explorer.present.tabs import TABS
from tests.browser.helpers import ARTIFACTS, choose_model, idle, shot, tokens, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ERROR_TOAST = ".toast-body.error, .toast-wrap .error"


def test_gemma3_loads_steps_and_every_view_draws(page):
    choose_model(page, "gemma-3-270m")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('gemma-3-270m')")
    idle(page)
    for _ in range(2):
        n = len(tokens(page))
        page.click("#step")
        wait_token_count(page, n + 1)
        idle(page)
    for tab in (t for t in TABS if not t.translator_only):
        page.get_by_role("tab", name=tab.title, exact=True).click()
        idle(page)
        assert not page.locator(ERROR_TOAST).count(), f"an error on the {tab.title} tab"
        if tab.id in ("self", "layers", "architecture"):
            shot(page, f"gemma3-{tab.id}")
    architecture = page.inner_text("#architecture")
    assert "15 local layers" in architecture and "512" in architecture


def test_gemma3s_card_and_licence_are_one_click_away(page):
    choose_model(page, "gemma-3-270m")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('gemma-3-270m')")
    idle(page)
    link = page.locator("#model-info a", has_text="Model card and licence")
    with page.context.expect_page() as opened:
        link.click()
    card = opened.value
    card.wait_for_load_state()
    assert "Gemma Terms of Use" in card.inner_text("body")
    assert "4 / 1" in card.inner_text("body")  # query heads / key-value heads, from the loaded config
    card.click("text=The licence text")
    card.wait_for_load_state()
    assert "Gemma Terms of Use" in card.inner_text("body")
    card.screenshot(path=str(ARTIFACTS / "gemma3-licence.png"))
