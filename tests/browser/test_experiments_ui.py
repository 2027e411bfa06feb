"""Why this token (attribution) and Compare runs, in the browser (issue 13, sections 4 and 5):
what the page shows is what the analysis computes for the tokens on screen."""

from __future__ import annotations

import re

import numpy as np
import pytest

import explorer
from explorer.analysis import attribution
from tests.browser.helpers import idle, plot, shot, tokens, type_prompt, wait_token_count
from tests.browser.test_translator_ui import choose_model

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def open_tab(page, name: str, ready: str) -> None:
    page.click(f"button[role=tab]:has-text('{name}')")
    page.wait_for_function("id => document.querySelector(id)?.innerText.length > 0", arg=ready)


def pick_target(page, option: int) -> str:
    """Choose the ``option``-th entry of "Explain"; returns its label."""
    page.click("#attribution-target input")
    choice = page.locator("[role=option]").nth(option)
    label = choice.get_attribute("aria-label")
    choice.click()
    return label


def explain(page, method: str | None = None) -> str:
    if method:
        page.click(f"#attribution-method label:has-text('{method}')")
    before = page.inner_text("#attribution-info")
    page.click("#attribute")
    page.wait_for_function(
        "b => { const t = document.querySelector('#attribution-info')?.innerText; return t && t !== b; }",
        arg=before,
        timeout=300_000,
    )
    idle(page)
    return page.inner_text("#attribution-info")


def strip_scores(page) -> list[tuple[str, float]]:
    return page.eval_on_selector_all(
        "#attribution-strip .attribution-strip:first-of-type .token",
        "els => els.map(e => [e.textContent, Number(e.dataset.score)])",
    )


def test_why_this_token_on_smollm2(page):
    start = len(tokens(page))
    for n in (1, 2):
        page.click("#step")
        wait_token_count(page, start + n)
    idle(page)
    shown = tokens(page)
    open_tab(page, "Why this token", "#attribution-info")
    label = page.locator("#attribution-target input").input_value()
    assert "chosen" in label and f"position {len(shown) - 1}" in label, label
    info = explain(page)
    # Completeness is reported, and holds within 1%.
    error = float(re.search(r"completeness holds within ([\d.]+)%", info).group(1))
    assert error < 1.0, info
    total = float(re.search(r"The scores add up to (-?[\d.]+)", info).group(1))
    scores = strip_scores(page)
    assert len(scores) == len(shown) - 1  # the tokens up to the step that chose the newest one
    assert sum(s for _, s in scores) == pytest.approx(total, abs=2e-3)
    # The same numbers as the analysis computes for these tokens.
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    session = explorer.GenerationSession(loaded, page.locator("#prompt textarea").input_value())
    for _ in range(2):
        session.step()
    position, token = attribution.chosen_at(session, len(session.token_ids) - 1)
    expected = attribution.attribute(session, position, token)
    np.testing.assert_allclose([s for _, s in scores], expected.scores, atol=2e-3)
    page.wait_for_selector("#attribution-chart .js-plotly-plot")
    chart = plot(page, "attribution-chart")
    assert chart["title"].startswith("Integrated gradients")
    assert [t["name"] for t in chart["traces"]] == ["Integrated gradients", "attention rollout"]
    shot(page, "attribution-decoder")

    # Another candidate of the newest step: its own logit is explained.
    other = pick_target(page, 1)
    info = explain(page, "Input × gradient")
    word = re.match(r"'(.*)' instead", other).group(1)
    assert info.startswith(f"Input × gradient for '{word}'"), (other, info)
    assert page.locator("#attribution-strip .strip-legend").inner_text().startswith("Coloured by Input × gradient")

    info = explain(page, "Attention rollout")
    assert "attention-based" in info
    rollout = strip_scores(page)
    assert sum(s for _, s in rollout) == pytest.approx(1.0, abs=1e-3)


def test_translator_attribution_beside_cross_attention(page):
    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    type_prompt(page, "twenty-one")
    for n in (2, 3):  # the start token, then German pieces
        page.click("#step")
        wait_token_count(page, n)
    idle(page)
    assert "ein" in tokens(page)[-1], tokens(page)
    open_tab(page, "Why this token", "#attribution-info")
    info = explain(page)
    assert "completeness holds within" in info and "`" not in info, info
    source = page.eval_on_selector_all("#source-strip .token .text", "els => els.map(e => e.textContent)")
    assert len(strip_scores(page)) == len(source)
    page.wait_for_selector("#alignment .js-plotly-plot")
    alignment = plot(page, "alignment")
    assert alignment["traces"][0]["rows"] == 3  # the translator's three decoder layers
    assert alignment["traces"][0]["cols"] == len(source)
    assert alignment["shapes"] == 1  # the top-attributed source token, framed
    # The strip shows what the analysis computes for the step that wrote "ein".
    session = explorer.GenerationSession(explorer.load_model("en-de-numbers", progress=False), "twenty-one")
    for _ in range(2):
        session.step()
    position, token = attribution.chosen_at(session, 2)
    expected = attribution.attribute(session, position, token)
    np.testing.assert_allclose([s for _, s in strip_scores(page)], expected.source_scores, atol=2e-3)
    shot(page, "attribution-translator")


def test_compare_runs(page):
    start, n_generated = len(tokens(page)), 2
    for n in range(1, n_generated + 1):
        page.click("#step")
        wait_token_count(page, start + n)
    idle(page)
    open_tab(page, "Compare runs", "#compare-info")
    page.click("#compare-kind label:has-text('cache off')")
    page.click("#compare-runs")
    page.wait_for_selector("#compare-tokens table")
    idle(page)
    info = page.inner_text("#compare-info")
    assert f"the same {n_generated} tokens" in info and "are the same at every step" in info, info
    cells = page.eval_on_selector_all("#compare-tokens td", "els => els.map(e => e.className)")
    assert cells == ["same"] * (2 * n_generated)
    page.wait_for_selector("#compare-attention .js-plotly-plot")
    assert plot(page, "compare-attention")["title"].startswith("Attention of run A minus run B")

    page.click("#compare-kind label:has-text('another text')")
    page.locator("#compare-text textarea").fill("def fibonacci(n):")
    page.click("#compare-runs")
    page.wait_for_function("() => document.querySelector('#compare-info').innerText.includes('another text')")
    idle(page)
    info = page.inner_text("#compare-info")
    assert "part at step 1" in info, info
    page.wait_for_selector("#compare-chart .js-plotly-plot")
    chart = plot(page, "compare-chart")
    names = ["KL(A ‖ B), nats", "A's probability of B's token", "B's probability of A's token"]
    assert [t["name"] for t in chart["traces"]] == names
    assert len(chart["traces"][0]["y"]) == n_generated
    shot(page, "compare-runs")

    # Heads switched off: the Switch heads off tab's choice is run B.
    page.click("button[role=tab]:has-text('Switch heads off')")
    page.locator("#switched-off textarea").fill("17.3, 18.6")
    page.locator("#switched-off textarea").press("Enter")
    page.wait_for_function("() => document.querySelector('#ablation-info').innerText.includes('layer 17 head 3')")
    open_tab(page, "Compare runs", "#compare-info")
    page.click("#compare-kind label:has-text('switched off')")
    page.click("#compare-runs")
    page.wait_for_function("() => document.querySelector('#compare-info').innerText.includes('switched off')")
    assert "Over 2 steps" in page.inner_text("#compare-info")
