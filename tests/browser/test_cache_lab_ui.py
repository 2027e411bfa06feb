"""The KV-cache lab in Chromium (issue 29): a policy run on SmolLM2's text and on the translator's,
its grid and divergence drawn from what the model computed, the budget curve, a refused budget."""

from __future__ import annotations

import pytest

from explorer.ui.layout import BROWSER_KEY
from tests.browser.helpers import (
    CHART_PARTS,
    DESKTOP,
    PHONE,
    choose_model,
    cut_titles,
    idle,
    opened,
    overlaps,
    shot,
    show_modebar,
    tokens,
    wait_token_count,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def open_lab(page) -> None:
    page.click("button[role=tab]:has-text('KV cache')")
    page.wait_for_selector("#lab-run")


def set_number(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input")
    box.fill(value)
    box.press("Enter")


def lab_plot(page, elem_id: str) -> dict:
    """The traces of a lab figure as the page holds them (its arrays are plain lists)."""
    return page.evaluate(
        """id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
            return {title: g.layout.title.text, data: g.data.map(d => ({name: d.name, x: Array.from(d.x || []),
                    y: Array.from(d.y || []), z: d.z ? d.z.map(r => Array.from(r)) : null}))}; }""",
        elem_id,
    )


def wait_plot_title(page, elem_id: str, words: str) -> dict:
    page.wait_for_function(
        """([id, words]) => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
            return g && g.layout && g.layout.title && g.layout.title.text.includes(words); }""",
        arg=[elem_id, words],
        timeout=180_000,
    )
    return lab_plot(page, elem_id)


def run_sinks_after_six_steps(page, steps: int = 6) -> int:
    """``steps`` Steps, then the lab runs 2 sinks + a window of 6 (a budget of 8) on them; the
    number of tokens before the Steps."""
    n = len(tokens(page))
    for i in range(1, steps + 1):
        page.click("#step")
        wait_token_count(page, n + i)
    idle(page)
    open_lab(page)
    set_number(page, "lab-budget", "8")
    set_number(page, "lab-sinks", "2")
    page.click("#lab-run")
    return n


def test_a_policy_run_on_smollm2_draws_what_each_layer_holds(page):
    open_lab(page)  # before any Step: refused, and the reason stays beside the buttons
    page.click("#lab-run")
    page.wait_for_selector("#lab-note:has-text('Not run. Step or Generate first')")
    page.click("#step")  # "Step first" holds no more: the note goes with the Step
    page.wait_for_selector("#lab-note", state="hidden")
    n = run_sinks_after_six_steps(page)
    grid = wait_plot_title(page, "lab-grid", "sinks 2 + window 6")
    z = grid["data"][0]["z"]
    assert len(z) == 30 and len(z[0]) == n + 6  # SmolLM2's 30 layers x every position
    assert all(row[:2] == [2, 2] for row in z)  # the sinks
    assert all(sum(1 for v in row[2:] if v == 1) == 6 for row in z)  # the window: the last 6 positions
    divergence = wait_plot_title(page, "lab-divergence", "against the full cache")
    assert len(divergence["data"][0]["x"]) == 8  # the prompt's next token, then each of the 7 steps (1 + 6)
    assert "saved" in page.inner_text("#lab-summary")
    assert page.locator("#lab-note").is_hidden()  # the run cleared the refusal's note
    shot(page, "cache-lab-smollm2")

    set_number(page, "lab-budget", "0")  # refused with a message; the figures stay
    page.click("#lab-run")
    page.wait_for_selector("[data-testid=toast-body]:has-text('The budget must be from 2 to 1,024')")
    assert "The budget must be from 2 to 1,024" in page.inner_text("#lab-note")  # and beside the buttons
    assert lab_plot(page, "lab-grid")["data"][0]["z"] == z

    page.click("#step")  # a step makes the run stale: its figures go, and its summary with them
    wait_token_count(page, n + 7)
    page.wait_for_function("() => !document.querySelector('#lab-grid .js-plotly-plot')")
    page.wait_for_selector("#lab-summary", state="hidden")  # (it stayed, a summary of figures gone)


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_budget_curve_shows_the_sinks_against_the_window(browser, app_url, screen):
    """The curve (computed once per model: the second size reads the first's) and, at 1280x720 as
    on a phone, its legend clear of its title: above the plot its seven names, one a row in a
    column that narrow, lay over the title and the mode bar."""
    context, page = opened(browser, app_url, screen)
    open_lab(page)
    page.click("#lab-curve-button")
    curve = wait_plot_title(page, "lab-curve", "Perplexity by budget")
    lines = {trace["name"]: trace for trace in curve["data"]}
    assert {"window", "sinks", "heavy hitters", "key norm", "int8", "int4"} <= set(lines)
    assert lines["window"]["x"] == [16, 32, 64]
    # StreamingLLM's finding, as the model computes it: at every budget the sinks beat the window alone.
    assert all(s < w for s, w in zip(lines["sinks"]["y"], lines["window"]["y"], strict=True))
    assert "four sinks + a window" in page.inner_text("#lab-info")
    show_modebar(page, "lab-curve", screen)
    shot(page, f"cache-lab-budget-curve-{screen['viewport']['width']}")
    assert overlaps(page, "lab-curve", [*CHART_PARTS, ".g-xtitle"]) == []
    assert cut_titles(page, "lab-curve") == []
    context.close()


def test_the_lab_on_the_translator_evicts_the_target_side(page):
    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    idle(page)
    for i in range(1, 5):
        page.click("#step")
        wait_token_count(page, 1 + i)
    idle(page)
    open_lab(page)
    set_number(page, "lab-budget", "3")
    set_number(page, "lab-sinks", "1")
    page.click("#lab-run")
    grid = wait_plot_title(page, "lab-grid", "sinks 1 + window 2")
    assert len(grid["data"][0]["z"][0]) == 5  # the decoder's tokens: the source's keys are never evicted
    shot(page, "cache-lab-translator")


def test_stepping_under_a_policy_hatches_the_evicted_keys_and_a_reload_keeps_it(page):
    from tests.browser.conftest import wait_ready
    from tests.browser.helpers import plot, status

    n = len(tokens(page))
    for i in range(1, 6):
        page.click("#step")
        wait_token_count(page, n + i)
    idle(page)
    open_lab(page)
    set_number(page, "lab-budget", "8")
    set_number(page, "lab-sinks", "2")
    page.click("#lab-apply")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('cache: sinks 2 + window 6')")
    idle(page)
    assert len(tokens(page)) == n + 5  # the same tokens, read again under the policy
    page.click("button[role=tab]:has-text('Self-attention')")
    page.wait_for_function(
        "() => { const g = document.querySelector('#self-attention .attention-figure');"
        " return g && g.layout && g.layout.meta && g.layout.meta.evicted_by === 'sinks 2 + window 6'; }"
    )
    t = n + 5
    future = t * (t - 1) // 2
    evicted = sum(i - 7 for i in range(8, t))  # query i no longer reads keys 2 .. i - 7
    assert plot(page, "self-attention")["traces"][0]["nan"] == future + evicted
    shot(page, "cache-lab-hatched-heatmap")
    # Side by side with the full cache (Compare runs): run B chooses its own tokens on the full cache.
    page.click("button[role=tab]:has-text('Compare runs')")
    page.wait_for_selector("#compare-info")
    page.click("#compare-kind label:has-text('with the full cache')")
    page.click("#compare-runs")
    page.wait_for_function("() => document.querySelector('#compare-info').innerText.includes('full cache')")
    page.wait_for_selector("#compare-chart .js-plotly-plot")
    assert len(plot(page, "compare-chart")["traces"][0]["y"]) == 5  # the five generated steps
    # The tab a reload reopens (wait_ready reads its figure): wait until the browser has kept it,
    # or a reload can come back on Compare runs, where no self-attention figure is drawn.
    kept_before = page.evaluate("k => localStorage.getItem(k)", BROWSER_KEY)
    page.click("button[role=tab]:has-text('Self-attention')")
    page.wait_for_function("([k, v]) => localStorage.getItem(k) !== v", arg=[BROWSER_KEY, kept_before])
    idle(page)
    page.reload()
    wait_ready(page)
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('cache: sinks 2 + window 6')")
    assert "cache: sinks 2 + window 6" in status(page)
    open_lab(page)
    page.click("#lab-full")
    page.wait_for_function("() => !document.querySelector('#status').innerText.includes('cache:')")


def boxes_overlap(page, selector: str, first: str, second: str) -> bool:
    """Whether the boxes of ``first`` and ``second`` inside ``selector`` (both must be drawn) cross."""
    return page.evaluate(
        """([root, a, b]) => {
            const [p, q] = [a, b].map(s => document.querySelector(root + ' ' + s).getBoundingClientRect());
            return p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom; }""",
        [selector, first, second],
    )


def test_the_lab_tells_evicted_keys_from_the_mask_and_its_legend_from_its_axis(page):
    """Issue 40, item 17: the divergence chart's legend is clear of its axis title; evicted keys
    are drawn unlike the causal mask's later tokens, and the heatmap says which is which; the
    button that puts the session under a policy is named for what it does (it does not step)."""
    n = run_sinks_after_six_steps(page)
    wait_plot_title(page, "lab-divergence", "against the full cache")
    page.wait_for_selector("#lab-divergence .legend")
    shot(page, "cache-lab-divergence-legend")
    assert not boxes_overlap(page, "#lab-divergence", ".legend", ".g-xtitle")
    assert not boxes_overlap(page, "#lab-divergence", ".legend", ".g-gtitle")

    button = page.inner_text("#lab-apply")
    assert "Step" not in button and "session" in button
    page.click("#lab-apply")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('cache: sinks 2 + window 6')")
    idle(page)
    assert len(tokens(page)) == n + 6  # switched, not stepped
    page.click("button[role=tab]:has-text('Self-attention')")
    page.wait_for_function(
        "() => { const g = document.querySelector('#self-attention .attention-figure');"
        " return g && g.layout && g.layout.meta && g.layout.meta.evicted_by === 'sinks 2 + window 6'; }"
    )
    page.wait_for_selector("#self-attention svg path.evicted", state="attached")
    fills = page.evaluate(
        """() => Object.fromEntries(['masked', 'evicted'].map(kind => {
            const path = document.querySelector('#self-attention svg path.' + kind);
            const id = path.getAttribute('fill').slice(5, -1);
            return [kind, document.getElementById(id).innerHTML]; }))"""
    )
    assert fills["masked"] != fills["evicted"]
    legend = page.text_content("#self-attention .mask-legend")
    assert "hatched: a later token" in legend and "dotted: evicted from the cache by sinks 2 + window 6" in legend
    assert not boxes_overlap(page, "#self-attention", ".mask-legend", ".attention-cells")
    shot(page, "cache-lab-evicted-dotted")


def test_the_lab_on_a_gemma3_keeps_each_sliding_layer_within_its_window(page, checkpoints):
    """Issue 44, item 2: the tiny Gemma 3 (local layers 0 and 2 read the last 6 positions) under
    sinks 2 + window 6: its global layers hold the sinks and the last 6, its sliding layers only the
    last 6 (their window has passed the sinks); the session then steps under the policy."""
    from tests.browser.helpers import status
    from tests.browser.test_families_ui import load_and_step

    load_and_step(page, checkpoints["gemma3_text"])
    n = run_sinks_after_six_steps(page, steps=3)
    z = wait_plot_title(page, "lab-grid", "sinks 2 + window 6")["data"][0]["z"]
    t = n + 3
    assert len(z) == 4 and len(z[0]) == t > 8
    for layer in (1, 3):  # global: the sinks, then the last 6
        assert z[layer][:2] == [2, 2] and z[layer][t - 6 :] == [1] * 6 and set(z[layer][2 : t - 6]) == {0}
    for layer in (0, 2):  # sliding: the last 6 only
        assert z[layer][t - 6 :] == [1] * 6 and set(z[layer][: t - 6]) == {0}
    assert "saved" in page.inner_text("#lab-summary")
    shot(page, "cache-lab-gemma3")
    page.click("#lab-apply")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('cache: sinks 2 + window 6')")
    idle(page)
    page.click("#step")
    wait_token_count(page, t + 1)
    assert "cache: sinks 2 + window 6" in status(page)


@pytest.mark.parametrize("screen", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_the_lab_charts_keep_their_labels_toolbars_and_titles_apart(browser, app_url, screen):
    """Fresh eyes at 390x844: the section labels ("What each layer holds", "Divergence from the
    full cache") lay over Plotly's toolbar and over the chart's own title ("sinks 4 + window 60
    against the full cache" half hidden). Each has a row of its own, the toolbar a band under it,
    the title under that; at 1280x720 too."""
    context, page = opened(browser, app_url, screen)
    run_sinks_after_six_steps(page)
    width = screen["viewport"]["width"]
    for elem_id, words, parts in (("lab-grid", "Held after", CHART_PARTS[:3]),
                                  ("lab-divergence", "against the full cache", CHART_PARTS)):  # fmt: skip
        wait_plot_title(page, elem_id, words)
        show_modebar(page, elem_id, screen)
        shot(page, f"cache-lab-{elem_id}-{width}")
        assert overlaps(page, elem_id, parts) == [], (elem_id, width)
        assert cut_titles(page, elem_id) == [], (elem_id, width)
    context.close()


@pytest.mark.parametrize("screen", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_every_policy_name_fits_its_box(browser, app_url, screen):
    """Fresh eyes at 390x844: the Policy dropdown cut its text under its arrow ("sinks + windo⌄");
    at 1280x720 "H2O: heavy + recent" and the longer names were cut too. Every name in the list
    ends clear of the arrow (measured in the box's own font)."""
    from explorer.ui.tabs.kv_cache import POLICIES

    context, page = opened(browser, app_url, screen)
    open_lab(page)
    cut = page.evaluate(  # each name's end in the box, against where the arrow begins
        """names => { const input = document.querySelector('#lab-policy input');
            const style = getComputedStyle(input);
            const context = document.createElement('canvas').getContext('2d');
            context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
            const start = input.getBoundingClientRect().left + parseFloat(style.paddingLeft);
            const arrow = document.querySelector('#lab-policy .icon-wrap').getBoundingClientRect().left;
            return names.filter(name => start + context.measureText(name).width > arrow); }""",
        [name for name, _ in POLICIES],
    )
    assert cut == [], (screen["viewport"], cut)
    page.locator("#lab-policy").scroll_into_view_if_needed()
    shot(page, f"cache-lab-policy-{screen['viewport']['width']}")
    context.close()
