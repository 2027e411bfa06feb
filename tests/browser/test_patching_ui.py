"""Activation patching in the browser (issue 13): the default pairs, the sweep's heatmaps of
layers x positions and layers x heads, and what the first layer must show."""

from __future__ import annotations

import numpy as np
import pytest

from tests.browser.helpers import plot, shot
from tests.browser.test_translator_ui import choose_model

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def open_patching(page) -> None:
    page.click("button[role=tab]:has-text('Patching')")
    page.wait_for_function("() => document.querySelector('#patching-info')?.innerText.includes('Press')")


def run_sweep(page) -> None:
    page.click("#run-patching")
    page.wait_for_function(
        "() => document.querySelector('#patching-info')?.innerText.includes('Logit difference')", timeout=300_000
    )


def restored(page, elem_id: str) -> np.ndarray:
    """The heatmap's values (layers, columns), as plotly holds them once it has drawn them."""
    page.wait_for_function("id => document.querySelector(`#${id} .js-plotly-plot`)?._fullData", arg=elem_id)
    rows = page.evaluate(
        """id => { const g = document.querySelector(`#${id} .js-plotly-plot`);
                   return g._fullData[0].z.map(r => Array.from(r)); }""",
        elem_id,
    )
    return np.array(rows, dtype=float)


def test_names_swapped_on_the_decoder(page):
    open_patching(page)
    clean = page.locator("#patch-clean textarea").input_value()
    corrupted = page.locator("#patch-corrupted textarea").input_value()
    assert clean.replace("John gave", "X gave") == corrupted.replace("Mary gave", "X gave")
    run_sweep(page)
    info = page.inner_text("#patching-info")
    assert "' Mary' − ' John'" in info
    residual = restored(page, "patching-residual")
    import explorer

    tokens = explorer.GenerationSession(explorer.load_model("smollm2-135m-instruct", progress=False), corrupted)
    assert residual.shape == (30, len(tokens.token_ids))
    swapped = tokens.token_texts().index(" Mary", 5)  # the second name, the one the texts differ in
    # Entering layer 0 the residual is the embeddings: the swapped name restores all, the rest nothing.
    assert residual[0, swapped] == pytest.approx(1.0, abs=1e-3)
    assert np.abs(np.delete(residual[0], swapped)).max() < 1e-3
    assert restored(page, "patching-heads").shape == (30, 9)
    assert plot(page, "patching-residual")["title"].startswith("Share restored")
    shot(page, "patching-decoder")


def test_two_numbers_on_the_translator(page):
    choose_model(page, "en-de-numbers")
    # The switch ends by showing the translator's Cross-attention tab: open Patching after that.
    page.wait_for_function(
        "() => document.querySelector('button[role=tab][aria-selected=true]')?.innerText.trim() === 'Cross-attention'"
    )
    open_patching(page)
    page.wait_for_function("() => document.querySelector('#patch-clean textarea').value === 'twenty-one'")
    run_sweep(page)
    info = page.inner_text("#patching-info")
    assert "'ein' − 'zwei'" in info and "source token" in info, info
    residual = restored(page, "patching-residual")
    assert residual.shape == (3, 4)  # 3 encoder layers x the source's 4 tokens
    assert residual[0, 2] == pytest.approx(1.0, abs=1e-3)  # "one" against "two"
    assert np.abs(np.delete(residual[0], 2)).max() < 1e-3
    shot(page, "patching-translator")
