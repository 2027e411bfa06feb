"""The self-attention heatmap, drawn by the page's own component (explorer/ui/static/heatmap.js), shows
the model's weights: its pixels, its hover text and its zoom are read back and checked against a
session run in this process (greedy, so the same tokens as the page's)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.browser.helpers import (
    choose_head,
    choose_layer,
    idle,
    shot,
    tokens,
    type_prompt,
    wait_plot_title,
    wait_query_at,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "One two three four. One two three four. One two"
LAYER, HEAD = 4, 2
MASK_RGB = [189, 189, 189]  # explorer/viz/heatmap.py's MASK_COLOR

# The main canvas: its size in cells, every pixel's RGB, and where it is on the page.
CELLS = """() => { const c = document.querySelector('#self-attention canvas.attention-cells');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const rgb = [];
    for (let i = 0; i < d.length; i += 4) rgb.push([d[i], d[i + 1], d[i + 2]]);
    const r = c.getBoundingClientRect();
    return {cols: c.width, rows: c.height, rgb, box: {x: r.left, y: r.top, w: r.width, h: r.height}}; }"""


def reference_weights(steps: int) -> np.ndarray:
    """(T, T): head HEAD of layer LAYER, from the same greedy run in this process."""
    import explorer

    session = explorer.GenerationSession(explorer.load_model("smollm2-135m-instruct", progress=False), PROMPT)
    for _ in range(steps):
        session.step()
    return session.self_attention(LAYER)[HEAD]


def open_the_head(page) -> int:
    type_prompt(page, PROMPT)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    choose_layer(page, LAYER)
    wait_plot_title(page, "self-attention", f"layer {LAYER}")
    choose_head(page, HEAD)
    wait_plot_title(page, "self-attention", f"layer {LAYER}, head {HEAD}")
    idle(page)
    return len(tokens(page))


def cell_centre(cells: dict, row: int, col: int) -> tuple[float, float]:
    box = cells["box"]
    return box["x"] + (col + 0.5) * box["w"] / cells["cols"], box["y"] + (row + 0.5) * box["h"] / cells["rows"]


def test_the_pixels_are_the_weights(page):
    n = open_the_head(page)
    weights = reference_weights(steps=1)
    assert weights.shape == (n, n)
    cells = page.evaluate(CELLS)
    assert (cells["rows"], cells["cols"]) == (n, n)  # one pixel per cell
    rgb = np.array(cells["rgb"]).reshape(n, n, 3)
    future = np.triu(np.ones((n, n), bool), k=1)
    assert (rgb[future] == MASK_RGB).all()  # every future cell is the mask's grey...
    assert not (rgb[~future] == MASK_RGB).all(axis=-1).any()  # ...and no other cell is
    darkness = 765 - rgb.sum(axis=-1)  # the scale runs from white to dark blue
    for row in range(n):
        strongest = int(weights[row, : row + 1].argmax())
        assert darkness[row, strongest] == darkness[row, : row + 1].max(), row  # darkest where the weight peaks
    label = page.get_attribute("#self-attention .attention-figure svg", "aria-label")  # for a screen reader
    assert label.startswith(f"Causal self-attention, layer {LAYER}, head {HEAD}"), label
    strongest = int(weights[n - 1].argmax())  # the newest token is the query
    assert f"Row {n - 1} " in label and f"reads most: {strongest} " in label, label
    page.click("#self-attention .attention-table summary")  # the row as a table
    cells = "#self-attention .attention-rows td.weight"
    page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length === n", arg=[cells, n])
    table = page.eval_on_selector_all(cells, "els => els.map(e => +e.textContent)")
    assert np.allclose(table, weights[n - 1], atol=5e-5)
    shot(page, "heatmap-head")


def test_hover_says_the_cells_weight_and_a_drag_zooms(page):
    n = open_the_head(page)
    weights = reference_weights(steps=1)
    page.locator("#self-attention canvas.attention-cells").scroll_into_view_if_needed()
    cells = page.evaluate(CELLS)  # where the cells are on screen now
    row, col = n - 1, 3
    page.mouse.move(*cell_centre(cells, row, col))
    tip = page.locator("#self-attention .attention-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert f"query {row} " in text and f"key {col} " in text and f"weight {weights[row, col]:.4f}" in text, text

    page.mouse.move(*cell_centre(cells, 2, 1))  # drag from cell (2, 1) to cell (9, 6)
    page.mouse.down()
    page.mouse.move(*cell_centre(cells, 9, 6), steps=5)
    page.mouse.up()
    zoomed = page.evaluate(CELLS)
    assert (zoomed["rows"], zoomed["cols"]) == (8, 6)  # rows 2-9, keys 1-6, each cell larger
    page.mouse.move(*cell_centre(zoomed, 0, 0))  # the zoomed view's first cell is cell (2, 1)
    assert f"weight {weights[2, 1]:.4f}" in tip.inner_text()
    shot(page, "heatmap-zoomed")
    page.mouse.dblclick(*cell_centre(zoomed, 3, 3))
    page.wait_for_function("n => document.querySelector('#self-attention canvas.attention-cells').width === n", arg=n)


def test_a_click_on_a_row_makes_it_the_query(page):
    n = open_the_head(page)
    page.locator("#self-attention canvas.attention-cells").scroll_into_view_if_needed()
    cells = page.evaluate(CELLS)
    page.mouse.click(*cell_centre(cells, 5, 2))
    wait_query_at(page, 5)  # the strip marks token 5 as the query...
    idle(page)
    outline = page.evaluate("() => document.querySelector('#self-attention .attention-figure').layout.shapes[0]")
    assert (outline["y0"], outline["y1"]) == (4.5, 5.5)  # ...and the heatmap outlines row 5
    assert page.evaluate(CELLS)["rows"] == n  # a plain click does not zoom
