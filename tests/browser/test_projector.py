"""A layout for the projector (issue 15): after a Step, the Step button, the token strip, the
candidates and the selected heatmap are all on the first screen at the sizes a classroom
projector runs at, with no scrolling; and the presenter mode makes them larger."""

from __future__ import annotations

import pytest

from tests.browser.conftest import wait_ready
from tests.browser.helpers import ARTIFACTS, idle, tokens, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROJECTORS = [(1280, 720), (1366, 768), (1920, 1080)]
IN_SIGHT = {
    "Step": "#step",
    "token strip": "#token-strip",
    "candidates": "#candidates",
    "heatmap": "#self-attention .attention-figure",
}


def stepped_page(browser, app_url, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(app_url)
    wait_ready(page)
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    return context, page


def outside_the_screen(page, width: int, height: int) -> dict:
    """The named parts whose box is not wholly on the first screen (none scrolled)."""
    outside = {}
    for name, selector in IN_SIGHT.items():
        box = page.locator(selector).first.bounding_box()
        inside = box is not None and box["x"] >= 0 and box["y"] >= 0
        if not inside or box["x"] + box["width"] > width + 0.5 or box["y"] + box["height"] > height + 0.5:
            outside[name] = box
    return outside


@pytest.mark.parametrize(("width", "height"), PROJECTORS, ids=[f"{w}x{h}" for w, h in PROJECTORS])
def test_step_strip_candidates_and_heatmap_are_in_sight_after_a_step(browser, app_url, width, height):
    context, page = stepped_page(browser, app_url, width, height)
    try:
        assert page.evaluate("window.scrollY") == 0
        assert outside_the_screen(page, width, height) == {}
        # The heatmap shrank to fit (at 1280x720) but still shows every row of the text.
        drawn = page.evaluate("() => document.querySelector('#self-attention .attention-figure').data[0].y.length")
        assert drawn == len(tokens(page))
        page.screenshot(path=str(ARTIFACTS / f"projector-{width}x{height}.png"))
    finally:
        context.close()


def test_presenter_mode_enlarges_the_text_and_the_heatmap_labels(browser, app_url):
    context, page = stepped_page(browser, app_url, 1920, 1080)
    try:
        font = "() => parseFloat(getComputedStyle(document.querySelector('#token-strip .token')).fontSize)"
        svg = "document.querySelector('#self-attention .attention-figure svg')"
        label = f"() => parseFloat({svg}.getAttribute('font-size'))"
        before, label_before = page.evaluate(font), page.evaluate(label)
        page.click("#display")  # the accordion
        page.locator("#presenter input").check()
        page.wait_for_function(f"() => ({font})() > {before} * 1.2")
        page.wait_for_function(f"() => ({label})() > {label_before}")
        page.screenshot(path=str(ARTIFACTS / "presenter-1920x1080.png"))
        page.locator("#presenter input").uncheck()
        page.wait_for_function(f"() => ({font})() === {before}")
    finally:
        context.close()
