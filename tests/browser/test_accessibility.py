"""A page everyone can use (issue 15): axe-core (the npm package, put into the page) finds no
serious or critical violation on any tab, with the decoder and with the translator, in either
colour scale; every figure has a text alternative."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from explorer.present.tabs import TABS
from explorer.viz.labels import TOKEN_COLORS
from tests.browser.helpers import ARTIFACTS, idle, tokens, type_prompt, wait_plot_title, wait_token_count
from tests.browser.test_translator_ui import choose_model

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = Path(__file__).resolve().parents[2] / ".cache/npm/node_modules/axe-core/axe.min.js"
DECODER_TABS = [tab.title for tab in TABS if not tab.translator_only]
RUN_AXE = """async () => {
    const found = await axe.run(document, {resultTypes: ['violations']});
    return found.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => `${v.id} (${v.impact}): ${v.help}; `
            + v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' :: ' + n.failureSummary).join(' | '));
}"""


STILL = """() => document.getAnimations()
    .every(a => a.playState !== 'running' || a.effect?.getTiming().iterations === Infinity)"""


def serious_violations(page) -> list[str]:
    """axe's serious and critical findings, once the page is still (a component fading back in
    after an event is half transparent for a moment: axe would measure its passing colours)."""
    idle(page)
    page.wait_for_function(STILL)
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        if not AXE.exists():
            pytest.fail(f"{AXE} is missing: bash scripts/install.sh --dev installs axe-core")
        page.add_script_tag(path=str(AXE))
    return page.evaluate(RUN_AXE)


def report(found: dict, name: str) -> None:
    """What axe found, in full (an assertion's message is cut short)."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(found, indent=1))


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()
    idle(page)


def test_no_serious_violation_on_any_tab_of_the_decoder(page):
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    for accordion in ("Sampling", "Save and share", "Display"):
        page.get_by_text(accordion, exact=True).click()
    page.click("#self-attention .attention-table summary")
    found = {}
    for tab in DECODER_TABS:
        open_tab(page, tab)
        if tab == "Causal proof":
            page.click("#parallel-check")
            page.wait_for_function("() => document.querySelector('#parallel-info').innerText.includes('Over all')")
        if tab == "Compare runs":
            page.get_by_label("with the KV cache off").check()
            page.click("#compare-runs")
            page.wait_for_selector("#compare-tokens table")
        idle(page)
        found[tab] = serious_violations(page)
    # The other colour scale (its radio's selected colour is the theme's too).
    page.get_by_label("cividis (for colour-blind viewers)").check()
    open_tab(page, "Self-attention")
    found["Self-attention, cividis"] = serious_violations(page)
    report(found, "axe-decoder.json")
    assert {tab: v for tab, v in found.items() if v} == {}


def test_no_serious_violation_with_the_translator(page):
    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    type_prompt(page, "twenty-one")
    page.click("#step")
    wait_token_count(page, 2)
    idle(page)
    open_tab(page, "Cross-attention")
    wait_plot_title(page, "cross-attention", "Cross-attention")
    assert serious_violations(page) == []
    # The source is the translator's input: drawn as a prompt is, not in an orange near the query's.
    source, query = page.evaluate(
        """() => [document.querySelector('#source-strip .token'),
                  [...document.querySelectorAll('#token-strip .token')].pop()]
            .map(e => getComputedStyle(e).backgroundColor)"""
    )
    prompt = [str(int(TOKEN_COLORS["prompt"][i : i + 2], 16)) for i in (1, 3, 5)]  # "#dbe9f6" -> 219, 233, 246
    assert re.findall(r"\d+", source)[:3] == prompt and source != query, (source, query)


def test_figures_have_text_alternatives(page):
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    label = page.get_attribute("#self-attention .attention-figure svg", "aria-label")
    assert label.startswith("Causal self-attention") and "reads most:" in label
    page.wait_for_function("() => document.querySelector('#all-heads button')?.getAttribute('aria-label')")
    open_tab(page, "Every layer")
    page.wait_for_function("() => document.querySelector('#every-layer .js-plotly-plot')?.getAttribute('aria-label')")
    label = page.get_attribute("#every-layer .js-plotly-plot", "aria-label")
    assert label.startswith("What") and "Strongest cell: layer" in label, label


def test_no_serious_violation_in_a_lesson(page, app_url):
    page.goto(f"{app_url}/?lesson=4&step=3")  # the Switch heads off tab, with heads put in it
    page.wait_for_function("() => document.querySelector('#lesson-text')?.innerText.includes('step 3 of 3')")
    idle(page)
    page.locator("#lesson-answer label").first.click()
    page.click("#lesson-check")
    page.wait_for_function("() => document.querySelector('#lesson-feedback').innerText.trim().length > 0")
    found = serious_violations(page)
    report({"lesson 4, step 3": found}, "axe-lesson.json")
    assert found == []
