"""A long input stays usable (issue 11): the token strip scrolls in a bounded box and follows
the newest token; past a few hundred tokens the heatmap shows a window of rows with an overview."""

from __future__ import annotations

import re

import pytest

from explorer.viz.window import WINDOW_ROWS
from tests.browser.helpers import QUERY_RGB, idle, plot, shot, status, tick_labels_fit, type_prompt, wait_plot_title

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG_TEXT = "Count with me: " + " ".join(f"{i} apples," for i in range(1, 126))  # about 700 tokens


def strip_box(page) -> dict:
    return page.eval_on_selector(
        "#token-strip .textfield",
        "b => ({top: b.scrollTop, height: b.clientHeight, content: b.scrollHeight})",
    )


def test_a_700_token_text_scrolls_the_strip_and_windows_the_heatmap(page):
    type_prompt(page, LONG_TEXT)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    n = int(re.search(r"(\d+) tokens", status(page)).group(1))
    assert 600 <= n <= 900, n

    box = strip_box(page)
    assert box["height"] < 300 and box["content"] > 3 * box["height"]  # bounded, and it scrolls
    assert box["top"] + box["height"] >= box["content"] - 2  # at the newest token

    wait_plot_title(page, "self-attention", f"queries {n - WINDOW_ROWS}-{n - 1} of {n}")
    shown = plot(page, "self-attention")
    window, overview = shown["traces"]
    assert (window["rows"], window["cols"]) == (WINDOW_ROWS, n)  # the newest rows, every key
    assert overview["name"] == "overview" and 0 < overview["rows"] <= 128
    assert tick_labels_fit(page, "self-attention")  # the axis labels stay readable
    shot(page, "long-window")

    page.locator("#token-strip .token").nth(10).click()  # an early token: the window moves to it
    wait_plot_title(page, "self-attention", f"queries 0-{WINDOW_ROWS - 1} of {n}")
    idle(page)
    assert plot(page, "self-attention")["traces"][0]["rows"] == WINDOW_ROWS

    # A click in the overview, two thirds down: the window moves to the queries there.
    overview = page.locator("#self-attention canvas.attention-cells").nth(1)
    overview.scroll_into_view_if_needed()
    box = overview.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 2 / 3)
    page.wait_for_function(
        """() => { const t = document.querySelector('#self-attention .attention-figure').layout.title.text;
            const first = Number((t.match(/queries (\\d+)-/) || [])[1]); return first > 0 && first < 500; }"""
    )
    idle(page)
    page.wait_for_function(  # the strip scrolled to the token picked there
        """c => { const box = document.querySelector('#token-strip .textfield').getBoundingClientRect();
            const query = Array.from(document.querySelectorAll('#token-strip .token'))
                .find(t => t.style.backgroundColor.includes(c));
            const at = query && query.getBoundingClientRect();
            return at && at.top >= box.top && at.bottom <= box.bottom; }""",
        arg=QUERY_RGB,
    )
    shot(page, "long-window-moved")

    page.click("#step")  # a new token: the strip follows it again
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('2 generated')")
    idle(page)
    page.wait_for_function(  # the strip scrolls to its newest token (its observer runs after the redraw)
        "() => { const b = document.querySelector('#token-strip .textfield');"
        " return b.scrollTop + b.clientHeight >= b.scrollHeight - 2; }"
    )
