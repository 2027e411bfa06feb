"""Export from the page: the session as a web page that opens offline with heatmaps of the
session's size, and as JSON with the tokens on screen (issue 16)."""

from __future__ import annotations

import json

import pytest

from tests.browser.helpers import idle, shot, tokens, type_prompt, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

N_LAYERS, N_HEADS = 30, 9  # SmolLM2-135M


def export(page, button: str, path):
    page.click(button)
    link = page.locator(f'#exported-file a[download$="{path.suffix}"]')  # the file of this kind
    link.wait_for()
    with page.expect_download() as download:
        link.click()
    download.value.save_as(path)
    return path


def test_the_session_exports_as_a_page_and_as_json(page, browser, tmp_path):
    type_prompt(page, "The capital of France is")
    page.click("#step")  # a new session, and its first token
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    n = len(tokens(page))
    for _ in range(2):
        page.click("#step")
        n += 1
        wait_token_count(page, n)
        idle(page)
    on_screen = tokens(page)
    page.click("#share")
    saved = export(page, "#export-json", tmp_path / "session.json")
    record = json.loads(saved.read_text())
    assert len(record["tokens"]) == len(on_screen) and len(record["steps"]) == 3
    assert record["model"] == "smollm2-135m-instruct"
    assert len(record["attention"]["self"]["weights"]) == N_LAYERS

    web_page = export(page, "#export-html", tmp_path / "session.html")
    self_attention = record["attention"]["self"]["weights"]
    check_the_page_offline(browser, web_page, len(on_screen), self_attention)


def check_the_page_offline(browser, path, n_tokens: int, weights) -> None:
    """Open the exported page with the network off: its heatmap has the session's size, and
    choosing a layer and head shows that head's weights."""
    context = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(path.as_uri())
    size = """() => { const g = document.getElementById('heatmap-self');
                      return g && g._fullData ? [g._fullData[0].z.length, g._fullData[0].z[0].length] : null; }"""
    page.wait_for_function(size)
    assert page.evaluate(size) == [n_tokens, n_tokens]
    assert page.locator("#tokens .token").count() == n_tokens
    page.select_option("#self-layer", "4")
    page.select_option("#self-head", "3")  # head 2 (the first choice is the average)
    page.wait_for_function(
        "() => document.getElementById('heatmap-self').layout.title.text.endsWith('layer 4, head 2')"
    )
    last_row = page.evaluate("() => Array.from(document.getElementById('heatmap-self')._fullData[0].z.at(-1))")
    assert last_row == pytest.approx(weights[4][3][-1], abs=1e-4)
    shot(page, "exported-page")
    context.close()
