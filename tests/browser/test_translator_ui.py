"""End to end in Chromium with the embedded translator: cross-attention on screen."""

from __future__ import annotations

import re

import pytest

from explorer.tokens import visible
from tests.browser.helpers import (
    choose_layer,
    choose_model,
    idle,
    plot,
    shot,
    tokens,
    type_prompt,
    wait_plot_title,
    wait_token_count,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SOURCE = "Wednesday, March 3, 2021"


def expected_translation() -> list[str]:
    """The tokens the model itself writes (in this process, through the session API)."""
    import explorer

    session = explorer.GenerationSession(explorer.load_model("en-de-numbers"), SOURCE)
    while not session.finished:
        session.step()
    return session.token_texts()


def test_translate_and_see_cross_attention(page):
    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    assert page.locator("#prompt label").inner_text().startswith("Source sentence")
    type_prompt(page, SOURCE)
    page.click("#step")
    wait_token_count(page, 2)  # the start token and the first German piece
    idle(page)
    source = page.eval_on_selector_all("#source-strip .token .text", "els => els.map(e => e.textContent)")
    for n in range(3, 6):
        page.click("#step")
        wait_token_count(page, n)
        idle(page)
    strip = tokens(page)
    page.click("#undo")
    wait_token_count(page, 4)
    idle(page)

    page.click("button[role=tab]:has-text('Cross-attention')")
    wait_plot_title(page, "cross-attention", "Cross-attention, layer 0")
    cross = plot(page, "cross-attention")
    weights = cross["traces"][0]
    assert (weights["rows"], weights["cols"]) == (4, len(source))  # target tokens × source tokens
    assert weights["nan"] == 0  # nothing is masked in cross-attention
    encoder = plot(page, "encoder-attention")["traces"][0]
    assert (encoder["rows"], encoder["cols"]) == (len(source), len(source))
    shot(page, "translator-cross-attention")

    page.click("#generate")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('ended the text')")
    idle(page)
    final = tokens(page)
    assert final[:3] == strip[:3] and final[-1] == "</s>"
    assert final == [visible(t) for t in expected_translation()]
    assert "".join(final[1:-1]).replace("·", " ").strip() == "Mittwoch, 3. März 2021"
    shot(page, "translator-generated")


def test_cross_attention_shows_the_units_read_before_the_tens(page):
    """The translator's lesson, on screen: "twenty-one" -> "ein" "und" "zwanzig". In the last
    layer's head average, the row that writes "ein" (the row of the token before it) peaks on
    "one", and the row that writes "zwanzig" peaks on "twenty"."""
    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    page.get_by_role("button", name="twenty-one", exact=True).click()  # an example sentence
    page.wait_for_function("() => document.querySelector('#prompt textarea').value === 'twenty-one'")
    assert page.locator("#prompt label").inner_text().startswith("Source sentence")  # not reset to "Prompt"
    type_prompt(page, "Twenty-One")
    page.click("#generate")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('ended the text')")
    idle(page)
    strip = tokens(page)
    assert strip[-4:] == ["ein", "und", "zwanzig", "</s>"]
    source = page.eval_on_selector_all("#source-strip .token .text", "els => els.map(e => e.textContent)")
    assert [s.replace("·", "") for s in source] == ["twenty", "-", "one", "</s>"]  # capitals folded

    page.click("button[role=tab]:has-text('Cross-attention')")
    choose_layer(page, 2)
    wait_plot_title(page, "cross-attention", "Cross-attention, layer 2")
    idle(page)
    peaks = plot(page, "cross-attention")["traces"][0]["argmax"]  # one per target row
    read_to_write = {strip[row + 1]: source[peaks[row]].replace("·", "") for row in range(len(strip) - 1)}
    assert read_to_write["ein"] == "one"
    assert read_to_write["zwanzig"] == "twenty"
    shot(page, "translator-units-before-tens")


def test_unavailable_model_keeps_the_previous_one(page):
    before = tokens(page)
    choose_model(page, "gpt2")
    page.wait_for_selector("text=needs the network")
    assert tokens(page) == before


def test_translator_logit_lens_and_causal_proof(page):
    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    type_prompt(page, SOURCE)
    page.click("#step")
    wait_token_count(page, 2)
    for n in (3, 4):
        page.click("#step")
        wait_token_count(page, n)
    idle(page)
    page.click("button[role=tab]:has-text('Logit lens')")
    wait_plot_title(page, "logit-lens", "After 3")
    rows = page.evaluate("() => Array.from(document.querySelector('#logit-lens .js-plotly-plot').data[0].y)")
    assert rows == ["embeddings", "layer 0", "layer 1", "layer 2"]
    page.click("button[role=tab]:has-text('Causal proof')")
    # As a person would, once the tab has shown: a check clicked while the tab's own views are on
    # their way can be overwritten by them (they were computed before the check).
    page.wait_for_function("() => document.querySelector('#parallel-info').innerText.includes('Press')")
    idle(page)
    page.click("#parallel-check")
    page.wait_for_function("() => document.querySelector('#parallel-info').innerText.includes('Over all 4 positions')")
    assert "✓" in page.inner_text("#parallel-info")
    page.click("button[role=tab]:has-text('Head roles')")
    page.wait_for_selector("text=Head roles need at least 5 tokens")  # said in place, not an error
    for n in (5, 6):
        page.click("#step")
        wait_token_count(page, n)
    page.wait_for_function("() => document.querySelector('#roles-info').innerText.includes('Of 12 heads')")
    shot(page, "translator-head-roles")


def generate_translation(page, text: str) -> str:
    """Type a source, Generate to the end token, and read the German off the token strip."""
    type_prompt(page, text)
    page.click("#generate")
    # The new source on screen (letters and digits only: the tokenizer folds case), then its end.
    page.wait_for_function(
        """t => { const shown = Array.from(document.querySelectorAll('#source-strip .token .text'))
                .map(e => e.textContent).join('').replace('</s>', '').toLowerCase().replace(/[^a-z0-9]/g, '');
            return shown === t && document.querySelector('#status').innerText.includes('ended the text'); }""",
        arg=re.sub(r"[^a-z0-9]", "", text.lower()),
    )
    idle(page)
    return "".join(tokens(page)[1:-1]).replace("·", " ").strip()


def test_examples_and_typed_forms_translate_and_other_text_gets_a_note(page):
    """What a person types first comes out right; a sentence of other words is translated, and
    a note beside it says that the model never saw those words."""
    from explorer.ui.app import TRANSLATOR_EXAMPLES

    choose_model(page, "en-de-numbers")
    page.wait_for_selector("#source-strip .token")
    expected = {
        "Wednesday, March 3, 2021": "Mittwoch, 3. März 2021", "twenty-one": "einundzwanzig",
        "three hundred and forty-two": "dreihundertzweiundvierzig", "at 3:45pm": "um 15:45", "$12.50": "12,50 $",
        "1,234,567": "1.234.567", "342 kilometers": "342 Kilometer", "twenty-four": "vierundzwanzig", "first": "erste",
        "7 am": "7 Uhr", "5 km": "5 km", "10%": "10 %",
    }  # fmt: skip
    assert set(TRANSLATOR_EXAMPLES) <= set(expected)
    translated = {text: generate_translation(page, text) for text in expected}
    assert translated == expected
    assert not page.locator("#source-note").is_visible()

    german = generate_translation(page, "I like cats")
    note = page.locator("#source-note")
    assert note.is_visible() and german
    assert "never saw “i”, “like”, “cats”" in note.inner_text()
    shot(page, "translator-out-of-domain-note")
    generate_translation(page, "twenty-one")  # back to what it knows: the note goes
    assert not page.locator("#source-note").is_visible()
