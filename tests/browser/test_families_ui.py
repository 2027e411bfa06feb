"""The families the explorer reads (issue 14), in the browser: each tiny checkpoint the tests
build loads from "Another model", steps, and its architecture view says what the family adds."""

from __future__ import annotations

import pytest

from tests.browser.helpers import ARTIFACTS, idle, tokens, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# family: what its architecture view must say (explorer/analysis/cost.py)
SAYS = {
    "qwen2": "qwen2 family",
    "qwen3": "each query and key RMS-normalised",
    "mistral": "mistral family",
    "phi3": "phi3 family",
    "opt": "opt family",
    "gpt_neox": "side by side",
}


@pytest.mark.parametrize("family", list(SAYS))
def test_a_family_loads_steps_and_shows_what_it_adds(page, checkpoints, family):
    box = page.locator("#custom-model textarea, #custom-model input").first
    box.fill(str(checkpoints[family]))
    box.press("Enter")
    page.wait_for_function(
        "name => document.querySelector('#status').innerText.includes(name)", arg=checkpoints[family].name
    )
    idle(page)
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    page.get_by_role("tab", name="Architecture and cost", exact=True).click()
    page.wait_for_function("t => document.querySelector('#architecture').innerText.includes(t)", arg=SAYS[family])
    if family == "gpt_neox":
        page.screenshot(path=str(ARTIFACTS / "family-gpt-neox.png"))
