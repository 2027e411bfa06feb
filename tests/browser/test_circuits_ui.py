"""End to end in Chromium: "Why this cell" (issue 43): a query picked explains the cell of that
query and the key it reads most (or a key typed), as bars and a pair matrix equal to explorer.why_attends,
and the heatmap's second colouring, weight × what is carried."""

from __future__ import annotations

import numpy as np
import pytest

from tests.browser.helpers import (
    DESKTOP,
    PHONE,
    choose_head,
    choose_layer,
    cut_titles,
    idle,
    opened,
    overlaps,
    plot,
    shot,
    show_modebar,
    tokens,
    type_prompt,
    wait_plot_title,
    wait_query_at,
    wait_token_count,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "One two three four. One two three four. One two"
LAYER, HEAD, QUERY = 4, 2, 9


def reference(steps: int):
    import explorer
    from explorer.analysis.circuits import carried_norms

    session = explorer.GenerationSession(explorer.load_model("smollm2-135m-instruct", progress=False), PROMPT)
    for _ in range(steps):
        session.step()
    key = int(session.self_attention(LAYER)[HEAD, QUERY].argmax())
    return explorer.why_attends(session, LAYER, HEAD, QUERY, key), carried_norms(session, LAYER, HEAD)


def test_a_query_picked_explains_its_winning_cell_as_bars(page):
    type_prompt(page, PROMPT)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    choose_layer(page, LAYER)
    choose_head(page, HEAD)
    idle(page)
    page.click("button[role=tab]:has-text('Why this cell')")
    wait_plot_title(page, "circuits-heatmap", f"Layer {LAYER}, head {HEAD}")
    # The query: a click on its row of this tab's heatmap (the tab is mounted when first opened,
    # with an update's props: the template says that a row picks the query, heatmap.py).
    canvas = page.locator("#circuits-heatmap canvas.attention-cells")
    canvas.scroll_into_view_if_needed()
    box, rows = (
        canvas.bounding_box(),
        page.evaluate("() => document.querySelector('#circuits-heatmap canvas.attention-cells').height"),
    )
    page.mouse.click(box["x"] + box["width"] * 0.1, box["y"] + (QUERY + 0.5) * box["height"] / rows)
    wait_query_at(page, QUERY)
    cell, carried = reference(1)
    wait_plot_title(page, "circuits-bars", f"Why query {QUERY} reads key {cell.key} ")
    idle(page)
    bars = page.evaluate(
        """() => { const g = document.querySelector('#circuits-bars .js-plotly-plot');
            return g.data.map(d => ({x: Array.from(d.x), y: Array.from(d.y)})); }"""
    )
    query_bars, key_bars = bars[0], bars[1]
    expected_keys = dict(cell.largest(cell.key_components))
    others = len(cell.key_components) - len(expected_keys)  # summed in one bar below them
    expected_keys[f"the other {others}, summed"] = sum(
        v for k, v in cell.key_components.items() if k not in expected_keys
    )
    assert set(key_bars["y"]) == set(expected_keys)  # the largest key-side components by name, then the rest
    for name, value in zip(key_bars["y"], key_bars["x"], strict=True):
        assert value == pytest.approx(expected_keys[name], abs=1e-3 * max(1.0, abs(cell.score)))
    assert set(query_bars["y"]) - set(dict(cell.largest(cell.query_components))) == {
        f"the other {len(cell.query_components) - 8}, summed"
    }
    assert page.input_value("#circuits-key input") == str(cell.key)  # the key box names the key explained
    # Fresh eyes: each side had its own scale (+1.07 as long as +3.85), the query side's axis title
    # sat against the key side's chart, and the explanation named a head in neither (L3.H5).
    drawn = page.evaluate(
        """() => { const g = document.querySelector('#circuits-bars .js-plotly-plot'), L = g._fullLayout;
            const title = g.querySelector('.g-xtitle').getBoundingClientRect();
            return {ranges: [L.xaxis.range, L.xaxis2.range],
                    gap: g.getBoundingClientRect().top + L.yaxis2._offset - title.bottom}; }"""
    )
    assert drawn["ranges"][0] == drawn["ranges"][1], drawn
    assert drawn["gap"] >= 12, drawn  # px between the query side's axis title and the key side's bars
    explanation = page.locator(".prose.explain:visible", has_text="Why does this head look there?").inner_text()
    assert "L3.H5" not in explanation
    outlines = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#circuits-heatmap svg rect.outline')]
            .map(r => [r.dataset.name, r.getBBox()]).map(([n, b]) => [n, [b.x, b.y, b.width, b.height]]))"""
    )
    row, box = outlines["selected query"], outlines["explained cell"]  # the query's row, and the cell on it
    width = row[2] / page.evaluate("() => document.querySelector('#circuits-heatmap canvas.attention-cells').width")
    assert box[1] == pytest.approx(row[1]) and box[3] == pytest.approx(row[3])  # on the row...
    assert box[0] == pytest.approx(row[0] + cell.key * width) and box[2] == pytest.approx(width)  # ...at its key
    info = page.inner_text("#circuits-info")
    assert f"Layer {LAYER} head {HEAD} scores" in info and "on the key side" in info, info
    shot(page, "circuits-why-this-cell")

    page.fill("#circuits-key input", "1")  # another key of the same query
    page.press("#circuits-key input", "Enter")
    wait_plot_title(page, "circuits-bars", f"Why query {QUERY} reads key 1 ")

    page.click("#circuits-colour label:has-text('what is carried')")
    wait_plot_title(page, "circuits-heatmap", "what is carried")
    idle(page)
    # The colour bar names what the cells hold now: not an attention weight (fresh eyes).
    page.wait_for_function("() => document.querySelector('#circuits-heatmap svg').textContent.includes('‖αvW_O‖')")
    shown = plot(page, "circuits-heatmap")["traces"][0]["argmax"]
    scaled = carried / np.maximum(carried.max(-1, keepdims=True), 1e-12)
    assert shown == scaled.argmax(-1).tolist()  # each row's largest ‖α v W_O‖, as the API computes it
    shot(page, "circuits-weight-times-carried")


@pytest.mark.parametrize("screen", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_the_bars_title_fits_and_keeps_clear_of_the_mode_bar(browser, app_url, screen):
    """Fresh eyes at 390x844: the bar chart's title was cut at the right edge ("Why query 8 reads key
    0 (score +4.61): the largest c") and Plotly's mode bar lay over it. The title wraps, the summed
    rest on a line of its own (layer 29 has more components than the bars show), under the mode bar."""
    context, page = opened(browser, app_url, screen)
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    choose_layer(page, 29)
    idle(page)
    page.click("button[role=tab]:has-text('Why this cell')")
    wait_plot_title(page, "circuits-bars", "the others summed")
    show_modebar(page, "circuits-bars", screen)
    shot(page, f"circuits-bars-{screen['viewport']['width']}")
    assert overlaps(page, "circuits-bars", [".modebar", ".gtitle"]) == []
    assert cut_titles(page, "circuits-bars") == []
    context.close()
