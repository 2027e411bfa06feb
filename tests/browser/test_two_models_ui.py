"""End to end in Chromium: the same text read by two models (issue 44, item 3). Choose the second
model, read the census, open a head of each model from it (the second one's switches the page to
it with the same text), unload the second model; on a phone, a translator as the second model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.browser.helpers import CHART_PARTS, idle, overlaps, plot, shot, status, tokens, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECOND = "gemma-3-270m"


def open_two_models(page) -> None:
    page.click("button[role=tab]:has-text('Two models')")
    page.wait_for_selector("#two-models-info")


def choose_second(page, name: str) -> None:
    page.click("#two-models-second input")
    page.click(f"[role=option][aria-label*='{name}']")


def read_both(page, name: str) -> str:
    choose_second(page, name)
    page.click("#two-models-read")
    page.wait_for_function(
        "n => document.querySelector('#two-models-info').innerText.includes(n)", arg=name, timeout=180_000
    )
    idle(page)
    return page.inner_text("#two-models-info")


def table_rows(page, side: str, n: int = 5) -> list[list[str]]:
    """The first ``n`` rows of a model's table of heads (the previous-token heads)."""
    table = f"#two-models-heads-{side}"
    page.wait_for_selector(f"{table} [data-testid=cell-{n - 1}-3]")
    return [[page.inner_text(f"{table} [data-testid=cell-{r}-{c}]").strip() for c in range(4)] for r in range(n)]


def layer_head(row: list[str]) -> tuple[int, int]:
    """ "L16.H0" -> (16, 0)."""
    layer, head = row[2].removeprefix("L").split(".H")
    return int(layer), int(head)


def click_row(page, side: str, row: int) -> None:
    page.locator(f"#two-models-heads-{side} [data-testid=cell-{row}-2]").click()


def inner_scroll_areas(page, side: str) -> list:
    """The parts of a model's table that scroll inside themselves (a learner misses rows hidden there)."""
    return page.evaluate(
        """sel => [document.querySelector(sel), ...document.querySelectorAll(sel + ' *')]
            .filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowY))
            .filter(e => e.scrollHeight > e.clientHeight + 1)
            .map(e => [e.className, e.scrollHeight, e.clientHeight])""",
        f"#two-models-heads-{side}",
    )


def wait_heatmap_in_view(page) -> None:
    """The self-attention heatmap a click opened, whole inside the window (it fits at these sizes)."""
    page.wait_for_function(
        """() => { const r = document.querySelector('#self-attention').getBoundingClientRect();
                   return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }"""
    )


def head_choice(page) -> tuple[int, str]:
    layer = int(page.input_value("#layer input[type=number]"))
    return layer, page.input_value("#head input")


def strongest_previous_token_head(name: str, text: str) -> tuple[int, int]:
    """Recomputed here from one full pass of the model with its attention recorded."""
    import explorer
    from explorer.model import Record

    loaded = explorer.load_model(name, progress=False)
    ids = loaded.tokenizer(text)["input_ids"]
    out = loaded.model(torch.tensor([ids]), record=Record.of("attention"))
    n = len(ids)
    scores = np.array(
        [
            out.trace[f"decoder.{i}.self_attn.probs"][0][:, range(2, n), range(1, n - 1)].mean(-1).numpy()
            for i in range(loaded.config.n_layers)
        ]
    )  # (layers, heads)
    return tuple(int(v) for v in np.unravel_index(scores.argmax(), scores.shape))


def test_two_models_census_opens_heads_and_unloads(page):
    text = page.input_value("#prompt textarea")
    page.click("#step")  # a token generated: the census still reads the text, and the switch says it leaves it
    wait_token_count(page, len(tokens(page)) + 1)
    idle(page)
    strip = tokens(page)
    open_two_models(page)
    info = read_both(page, SECOND)
    assert "smollm2-135m-instruct" in info and "KV cache per token" in info and "Along the text" in info, info
    assert f"Read by both: “{text}”" in info and "The box" not in info, info
    assert inner_scroll_areas(page, "a") == [] and inner_scroll_areas(page, "b") == []
    assert table_rows(page, "a", 15)[-1][:2] == ["induction", "5"]
    label_b = page.inner_text("#two-models-heads-b .label")
    assert "the token generated here is left behind" in label_b, label_b
    assert "15 of 18 layers slide over 512" in info, info
    rows_a, rows_b = table_rows(page, "a"), table_rows(page, "b")
    assert [r[:2] for r in rows_b] == [["previous", str(rank)] for rank in range(1, 6)]
    expected = strongest_previous_token_head(SECOND, text)
    assert layer_head(rows_b[0]) == expected
    page.wait_for_selector("#two-models-chart .js-plotly-plot")
    chart = plot(page, "two-models-chart")
    assert [t["name"] for t in chart["traces"]][:2] == ["smollm2-135m-instruct", SECOND]
    shot(page, "two-models")

    # A head of the page's own model: its self-attention, on this page.
    click_row(page, "a", 0)
    page.wait_for_selector("button[role=tab][aria-selected=true]:has-text('Self-attention')")
    idle(page)
    layer, head = layer_head(rows_a[0])
    assert head_choice(page) == (layer, f"head {head}")
    assert tokens(page) == strip
    wait_heatmap_in_view(page)  # the window went to what the click opened

    # A head of the second model: the page switches to it, with the same text.
    open_two_models(page)
    click_row(page, "b", 0)
    page.wait_for_function("n => document.querySelector('#model input').value.includes(n)", arg=SECOND)
    page.wait_for_selector("button[role=tab][aria-selected=true]:has-text('Self-attention')")
    idle(page)
    assert page.input_value("#prompt textarea") == text
    layer, head = layer_head(rows_b[0])
    assert head_choice(page) == (layer, f"head {head}")
    assert "gemma" in status(page).lower() or tokens(page) != strip
    page.wait_for_selector(
        "[data-testid=toast-body]:has-text('The token generated with smollm2-135m-instruct is left')"
    )
    wait_heatmap_in_view(page)
    shot(page, "two-models-opened-on-gemma")

    # Back on SmolLM2 (its head opens it again), then the second model unloaded.
    open_two_models(page)
    click_row(page, "a", 0)
    page.wait_for_function("() => document.querySelector('#model input').value.includes('smollm2')")
    idle(page)
    open_two_models(page)
    assert page.input_value("#two-models-second input").startswith(SECOND)
    page.click("#two-models-unload")
    said = "document.querySelector('#two-models-info').innerText"  # stays loaded: another tab's session uses it
    page.wait_for_function(f"() => {said}.includes('is unloaded') || {said}.includes('stays loaded')")


def test_a_translator_beside_on_a_phone(browser, app_url):
    """On a phone: with the box emptied, the tab says which text it read and keeps the box empty; every
    row of the tables in sight, the agreement chart's parts clear of each other, a head opened in view;
    then a translator."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(120_000)
    from tests.browser.conftest import wait_ready

    page.goto(app_url)
    wait_ready(page)
    text = page.input_value("#prompt textarea")
    page.locator("#prompt textarea").fill("")
    open_two_models(page)
    info = read_both(page, SECOND)
    assert f"Read by both: “{text}”" in info and "The box is empty" in info, info
    assert page.input_value("#prompt textarea") == ""
    assert inner_scroll_areas(page, "a") == [] and inner_scroll_areas(page, "b") == []
    page.wait_for_selector("#two-models-chart .js-plotly-plot .gtitle")
    page.tap("#two-models-chart .nsewdrag")  # a tap shows Plotly's mode bar
    assert overlaps(page, "two-models-chart", CHART_PARTS) == []
    shot(page, "two-models-phone-chart")
    click_row(page, "a", 0)  # a head opened: its heatmap in the phone's window too
    page.wait_for_selector("button[role=tab][aria-selected=true]:has-text('Self-attention')")
    wait_heatmap_in_view(page)
    open_two_models(page)
    info = read_both(page, "en-de-numbers")
    assert "is a translator" in info, info
    assert table_rows(page, "b")[0][0] == "previous"
    width = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert width <= 0, f"the page scrolls sideways by {width} px"
    shot(page, "two-models-phone")
    context.close()


def test_read_with_both_is_primary_once_a_second_model_is_chosen(page):
    """Fresh eyes: Read with both was drawn primary with no second model chosen, inviting a press
    that could only be refused. It is secondary until one is chosen, then primary."""
    open_two_models(page)
    button = page.locator("#two-models-read")
    assert "secondary" in button.get_attribute("class")
    shot(page, "two-models-none-chosen")
    choose_second(page, SECOND)
    page.wait_for_function("() => document.querySelector('#two-models-read').classList.contains('primary')")
    shot(page, "two-models-chosen")
    # While both read (the second model loads first: seconds), one progress bar, on the tab's
    # sentence, not a "Loading … 0.0%" bar and timer on each of its outputs.
    held = []
    page.route("**/queue/join**", lambda route: held.append(route))  # the read, held in flight as a slow load would be
    page.click("#two-models-read")
    for _ in range(600):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "Read with both sent nothing"
    page.wait_for_timeout(300)  # (the page draws its progress as it sends)
    bars = page.evaluate("() => [...document.querySelectorAll('.progress-text')].filter(e => e.offsetParent).length")
    assert bars <= 1, bars
    # ...and that bar in sight: it was below the screen's edge, and nothing moved for seconds.
    box, height = page.locator("#two-models-info").bounding_box(), page.viewport_size["height"]
    assert box["y"] >= 0 and box["y"] + min(box["height"], 40) <= height, (box, height)
    held[0].continue_()
    page.unroute("**/queue/join**")
    page.wait_for_function("n => document.querySelector('#two-models-info').innerText.includes(n)", arg=SECOND,
                           timeout=180_000)  # fmt: skip
