"""Switch heads off in the browser (issue 13): the chart is the model's own numbers, the heads are
crossed out wherever heads are drawn, Head roles' "test it" opens the result, Clear clears it."""

from __future__ import annotations

import io
import urllib.request

import numpy as np
import pytest

from tests.browser.helpers import choose_head, choose_layer, idle, plot, shot, type_prompt, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# A random word list, repeated: SmolLM2 copies the second half with its induction heads (17.3, 17.4, 18.6).
PROMPT = "red apple tall window quiet river seven lamps; red apple tall window quiet"
STEPS = 4
INDUCTION = "17.3, 17.4, 18.6"


def start(page) -> None:
    type_prompt(page, PROMPT)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    n = len(page.query_selector_all("#token-strip .token"))
    for _ in range(STEPS - 1):
        page.click("#step")
        n += 1
        wait_token_count(page, n)
        idle(page)


def open_tab(page, name: str) -> None:
    page.click(f"button[role=tab]:has-text('{name}')")


def run_here(text: str):
    """The same session and ablation computed in this process."""
    import explorer
    from explorer.analysis import ablation

    session = explorer.GenerationSession(explorer.load_model("smollm2-135m-instruct", progress=False), PROMPT)
    for _ in range(STEPS):
        session.step()
    return session, ablation.ablate(session, ablation.parse(text, session))


def bars(chart: dict, name: str) -> list[float]:
    return next(trace["y"] for trace in chart["traces"] if trace["name"] == name)


def image_pixels(page, elem_id: str) -> np.ndarray:
    from PIL import Image

    page.wait_for_function(f"() => document.querySelector('#{elem_id} img')?.naturalWidth > 0")
    url = page.locator(f"#{elem_id} img").get_attribute("src")
    return np.asarray(Image.open(io.BytesIO(urllib.request.urlopen(url).read())).convert("RGB"))


def test_switching_the_induction_heads_off(page):
    start(page)
    open_tab(page, "Switch heads off")
    page.wait_for_function("() => document.querySelector('#ablation-info')?.innerText.includes('Nothing is switched')")
    page.fill("#switched-off textarea", INDUCTION)
    page.click("#run-ablation")
    page.wait_for_function("() => document.querySelector('#ablation-info').innerText.includes('mean probability')")
    info = page.inner_text("#ablation-info")
    assert "layer 17 head 3, layer 17 head 4, layer 18 head 6 switched off (zero)" in info

    session, expected = run_here(INDUCTION)
    chart = plot(page, "ablation-chart")
    before, after = bars(chart, "as the model is"), bars(chart, "switched off")
    assert len(before) == len(session.token_ids) - 1
    np.testing.assert_allclose(before, expected.before, atol=1e-3)
    np.testing.assert_allclose(after, expected.after, atol=1e-3)
    copied = slice(len(session.token_ids) - 10, None)  # the second copy: copying fails without the heads
    assert np.mean(after[copied]) < np.mean(before[copied]) - 0.1
    shot(page, "switch-off-induction")

    # Crossed out where heads are drawn: layer 17's grid marks heads 3 and 4, not head 0.
    open_tab(page, "Self-attention")
    choose_layer(page, 17)
    page.wait_for_function("() => document.querySelector('#self-attention .attention-figure')?.layout?.title?.text"
                           "?.includes('layer 17')")  # fmt: skip
    from explorer.viz.thumbnails import CELL, GAP, GRID_COLUMNS, LABEL, OFF_RGB

    grid = image_pixels(page, "all-heads")

    def diagonal(head: int) -> tuple:
        x, y = (head % GRID_COLUMNS) * (CELL + GAP), (head // GRID_COLUMNS) * (CELL + GAP + LABEL) + LABEL
        return tuple(grid[y + CELL // 3, x + CELL // 3])

    assert diagonal(3) == OFF_RGB and diagonal(4) == OFF_RGB and diagonal(0) != OFF_RGB


def test_head_roles_test_it_and_clear(page):
    start(page)
    choose_layer(page, 18)
    choose_head(page, 6)
    open_tab(page, "Head roles")
    page.wait_for_function("() => document.querySelector('#roles-info').innerText.includes('Of 270 heads')")
    page.click("#test-head")
    page.wait_for_function("() => document.querySelector('#ablation-info')?.innerText.includes('layer 18 head 6')")
    assert page.locator("button[role=tab][aria-selected=true]").inner_text().strip() == "Switch heads off"
    assert page.locator("#switched-off textarea").input_value() == "18.6"
    _, expected = run_here("18.6")
    after = bars(plot(page, "ablation-chart"), "switched off")
    np.testing.assert_allclose(after, expected.after, atol=1e-3)

    page.fill("#switched-off textarea", "18.99")  # a head that does not exist: said, nothing changes
    page.click("#run-ablation")
    page.wait_for_selector("text=head 99 does not exist")
    page.click("#clear-ablation")
    page.wait_for_function("() => document.querySelector('#ablation-info').innerText.includes('Nothing is switched')")
    assert page.locator("#switched-off textarea").input_value() == ""
    shot(page, "switch-off-cleared")
