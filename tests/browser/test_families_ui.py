"""The families the explorer reads (issue 14), in the browser: each tiny checkpoint the tests
build loads from "Another model", steps, and its architecture view says what the family adds."""

from __future__ import annotations

import numpy as np
import pytest

from tests.browser.helpers import ARTIFACTS, choose_layer, idle, tokens, wait_plot_title, wait_token_count
from tests.browser.test_heatmap import CELLS, MASK_RGB, cell_centre

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# family: what its architecture view must say (explorer/analysis/cost.py)
SAYS = {
    "qwen2": "qwen2 family",
    "qwen3": "each query and key RMS-normalised",
    "mistral": "mistral family",
    "phi3": "phi3 family",
    "opt": "opt family",
    "gpt_neox": "side by side",
    "gemma3_text": "2 local layers (0, 2) read the last 6 positions",
    "bart": "then normed, in each stack",
    "mbart": "pre-norm",
}


def load_and_step(page, folder) -> int:
    """Load ``folder`` from "Another model", step once; the number of tokens after the step."""
    box = page.locator("#custom-model textarea, #custom-model input").first
    box.fill(str(folder))
    box.press("Enter")
    page.wait_for_function("name => document.querySelector('#status').innerText.includes(name)", arg=folder.name)
    idle(page)
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    return n + 1


@pytest.mark.parametrize("family", list(SAYS))
def test_a_family_loads_steps_and_shows_what_it_adds(page, checkpoints, family):
    load_and_step(page, checkpoints[family])
    page.get_by_role("tab", name="Architecture and cost", exact=True).click()
    page.wait_for_function("t => document.querySelector('#architecture').innerText.includes(t)", arg=SAYS[family])
    if family == "gpt_neox":
        page.screenshot(path=str(ARTIFACTS / "family-gpt-neox.png"))


def masked_cells(page, n: int) -> np.ndarray:
    """(n, n) True where the heatmap's canvas shows the mask's grey."""
    cells = page.evaluate(CELLS)
    assert (cells["rows"], cells["cols"]) == (n, n)
    return (np.array(cells["rgb"]).reshape(n, n, 3) == MASK_RGB).all(axis=-1)


def test_a_sliding_window_is_drawn_in_the_mask(page, checkpoints):
    """Gemma 3's tiny checkpoint: layer 0 reads a window of 6, layer 1 everything before. The
    heatmap greys the cells outside the window like the future, says why on hover, and the
    every-layer view marks each layer local or global."""
    n = load_and_step(page, checkpoints["gemma3_text"])
    assert n > 8
    rows, cols = np.indices((n, n))
    future, too_far = cols > rows, cols <= rows - 6
    choose_layer(page, 0)
    wait_plot_title(page, "self-attention", "sliding window of 6")
    idle(page)
    assert (masked_cells(page, n) == (future | too_far)).all()
    page.locator("#self-attention canvas.attention-cells").scroll_into_view_if_needed()
    page.mouse.move(*cell_centre(page.evaluate(CELLS), n - 1, 0))
    tip = page.locator("#self-attention .attention-tip")
    tip.wait_for(state="visible")
    assert "outside the sliding window of 6" in tip.inner_text()
    page.screenshot(path=str(ARTIFACTS / "family-gemma3-window.png"))
    choose_layer(page, 1)
    wait_plot_title(page, "self-attention", "layer 1")
    idle(page)
    assert (masked_cells(page, n) == future).all()
    page.get_by_role("tab", name="Every layer", exact=True).click()
    page.wait_for_function(
        "() => { const g = document.querySelector('#every-layer .js-plotly-plot');"
        " return g && g.data && g.data[0].y.join('|') === 'layer 0 (local, 6)|layer 1 (global)|"
        "layer 2 (local, 6)|layer 3 (global)'; }"
    )


def test_a_gguf_file_loads_from_another_model_and_steps(page, gguf_file):
    """A .gguf file in the allowed folder: converted once, then stepped like any model."""
    load_and_step(page, gguf_file)
    page.get_by_role("tab", name="Architecture and cost", exact=True).click()
    page.wait_for_function("() => document.querySelector('#architecture').innerText.includes('gemma3_text family')")
    page.wait_for_function("() => document.querySelector('#architecture').innerText.includes('5 local layers')")


def test_t5_shows_its_relative_position_bias(page, checkpoints):
    """A T5 translator: no position vectors; the architecture tab charts each head's learned bias
    by distance, for the encoder (both ways) and the decoder (back only)."""
    load_and_step(page, checkpoints["t5"])
    page.get_by_role("tab", name="Architecture and cost", exact=True).click()
    page.wait_for_function("() => document.querySelector('#architecture').innerText.includes('t5 family')")
    chart = page.locator("#position-bias .js-plotly-plot")
    chart.wait_for()
    traces = page.evaluate("() => document.querySelector('#position-bias .js-plotly-plot').data.length")
    assert traces == 2 * 4  # two stacks, four heads
    chart.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "family-t5-bias.png"))
