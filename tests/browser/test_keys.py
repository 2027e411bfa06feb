"""Keys for a demo (issue 15): s steps, u undoes, the arrows move the query; not while typing."""

from __future__ import annotations

import pytest

from tests.browser.helpers import idle, query_index, tokens, type_prompt, wait_query_at, wait_token_count

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "The cat sat on the mat. The dog"


def test_keys_step_undo_and_move_the_query_but_not_while_typing(page):
    type_prompt(page, PROMPT)
    page.evaluate("() => document.activeElement.blur()")  # done typing
    page.keyboard.press("s")  # the changed prompt starts a new session and steps
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    n = len(tokens(page))
    page.keyboard.press("s")
    wait_token_count(page, n + 1)
    idle(page)
    page.keyboard.press("u")
    wait_token_count(page, n)
    idle(page)

    page.keyboard.press("ArrowLeft")  # from the newest token to the one before it
    wait_query_at(page, n - 2)
    idle(page)
    page.keyboard.press("ArrowLeft")
    wait_query_at(page, n - 3)
    idle(page)
    outline = page.evaluate("() => document.querySelector('#self-attention .attention-figure').layout.shapes[0]")
    assert outline["y0"] == n - 3 - 0.5  # the heatmap outlines that row
    page.keyboard.press("ArrowRight")
    wait_query_at(page, n - 2)
    idle(page)

    box = page.locator("#prompt textarea")  # typing: the keys are letters of the text
    box.click()
    box.press("End")
    page.keyboard.press("s")
    page.keyboard.press("u")
    assert box.input_value() == PROMPT + "su"
    page.evaluate("() => document.activeElement.blur()")  # out of the box: the keys act again...
    page.keyboard.press("Control+u")  # ...but not with Ctrl, Alt or Cmd (the browser's own shortcuts)
    page.keyboard.press("Alt+ArrowLeft")
    # The page counts every shortcut key it leaves alone: waited for, instead of a pause.
    page.wait_for_function("() => Number(document.body.dataset.shortcutsLeftAlone) === 4")
    idle(page)
    assert len(tokens(page)) == n and query_index(page) == n - 2  # nothing stepped, undone or moved
