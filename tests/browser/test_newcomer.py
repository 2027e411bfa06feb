"""The bugs a newcomer hit (issue 18), each as a person meets it in Chromium.

Every test here failed on the code before its fix.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from explorer.present.views import BAR_WIDTH
from explorer.ui.app import DECODER_EXAMPLES, TRANSLATOR_EXAMPLES
from tests.browser.conftest import wait_ready
from tests.browser.helpers import (
    choose_model,
    generate_runs_ended,
    idle,
    plot,
    shot,
    status,
    tick_labels_fit,
    tokens,
    type_prompt,
    wait_generate_ended,
    wait_plot_title,
    wait_token_count,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRANSLATOR = "en-de-numbers"


def selected_tab(page) -> str:
    return page.eval_on_selector("#views [role=tab][aria-selected=true]", "e => e.textContent.trim()")


def model_change_calls(page) -> list[dict]:
    """Record the page's calls of the model-change event from now on."""
    names = page.evaluate("() => window.gradio_config.dependencies.map(d => d.api_name)")
    calls: list[dict] = []

    def record(request):
        if "queue/join" in request.url and names[json.loads(request.post_data)["fn_index"]] == "on_model_change":
            calls.append(json.loads(request.post_data))

    page.on("request", record)
    return calls


def test_a_model_switch_stops_generate(page):
    """Bug 1: Generate on SmolLM2, then the translator: its session must not run on by itself."""
    limit = page.locator("#max-new input[type=number]")
    limit.fill("256")
    limit.press("Enter")
    n = len(tokens(page))
    runs_ended = generate_runs_ended()
    page.click("#generate")
    # At least three tokens (not exactly three: at ~35 ms a step a busy page can pass that count
    # between two of the wait's looks).
    page.wait_for_function("n => document.querySelectorAll('#token-strip .token').length >= n", arg=n + 3)
    choose_model(page, TRANSLATOR)
    page.wait_for_selector("#source-strip .token")
    wait_generate_ended(runs_ended)  # the SmolLM2 run is over on the server: nothing can step on
    idle(page)
    shown = tokens(page)
    assert tokens(page) == shown == ["<pad>"]
    assert "0 tokens translated" in status(page)  # a translator counts its translation


def test_a_model_switch_brings_the_other_kinds_example_once(page):
    """Bug 2: the box takes the new kind's first example, one call builds one session, and a
    translator opens on its cross-attention; a text the user typed stays."""
    calls = model_change_calls(page)
    choose_model(page, TRANSLATOR)
    page.wait_for_selector("#source-strip .token")
    idle(page)
    assert page.locator("#prompt textarea").input_value() == TRANSLATOR_EXAMPLES[0]
    source = page.eval_on_selector_all("#source-strip .token .text", "els => els.map(e => e.textContent)")
    assert "".join(source).replace("·", " ").removesuffix("</s>").strip() == TRANSLATOR_EXAMPLES[0].lower()
    assert selected_tab(page) == "Cross-attention"
    wait_plot_title(page, "cross-attention", "Cross-attention, layer 0")
    # A click elsewhere blurs the dropdown (where a second event would be sent) and queues a step
    # after anything the switch sent: once the step is drawn, every call the switch made is in.
    page.click("#step")
    wait_token_count(page, 2)
    assert len(calls) == 1
    shot(page, "newcomer-switch-to-translator")

    choose_model(page, "smollm2")
    page.wait_for_function("t => document.querySelector('#prompt textarea').value === t", arg=DECODER_EXAMPLES[0])
    idle(page)
    assert "".join(tokens(page)).replace("·", " ") == DECODER_EXAMPLES[0]
    assert selected_tab(page) == "Self-attention"

    type_prompt(page, "seven hundred and two")  # the user's own text: a switch keeps it
    choose_model(page, TRANSLATOR)
    page.wait_for_selector("#source-strip .token")
    idle(page)
    assert page.locator("#prompt textarea").input_value() == "seven hundred and two"
    assert len(calls) == 3


def test_a_model_switch_and_back_keeps_the_session(page):
    """A stranger generated on SmolLM2, looked at the translator and came back: every generated
    token was gone without a word. Now the session comes back as it was, and the status says so."""
    n = len(tokens(page))
    for count in (n + 1, n + 2):
        page.click("#step")
        wait_token_count(page, count)
    shown = tokens(page)
    choose_model(page, TRANSLATOR)
    page.wait_for_selector("#source-strip .token")
    idle(page)
    choose_model(page, "smollm2")
    page.wait_for_function("() => /back as you left it/.test(document.querySelector('#status').textContent)")
    wait_token_count(page, n + 2)
    assert tokens(page) == shown
    assert "(2 generated tokens)" in status(page)
    assert page.locator("#prompt textarea").input_value() == DECODER_EXAMPLES[0]


IN_VIEW = """s => { const el = document.querySelector(s); if (!el) return false;
    const r = el.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }"""


def test_the_link_comes_first_in_save_and_share_and_empty_file_boxes_are_hidden(page):
    """A stranger looked for the link below three large empty file areas."""
    page.click("#share")
    page.wait_for_selector("#make-link", state="visible")
    assert page.locator("#make-link").bounding_box()["y"] < page.locator("#save-session").bounding_box()["y"]
    assert not page.locator("#saved-file").is_visible() and not page.locator("#exported-file").is_visible()
    page.click("#make-link")  # its box comes into sight with the link (it opened below a 720-pixel edge)
    page.wait_for_function("() => document.querySelector('#share-link textarea')?.value.includes('?model=')")
    page.wait_for_function(IN_VIEW, arg="#share-link textarea")
    page.click("#save-session")
    page.wait_for_selector("#saved-file .file-preview", state="visible")  # made: shown
    assert not page.locator("#exported-file").is_visible()


def test_the_buttons_wait_for_the_first_model(browser, app_url):
    """Bug 4: while the page's model loads, Step says so and cannot be clicked; then it steps."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(120_000)
    held = []
    with urllib.request.urlopen(f"{app_url.rstrip('/')}/config", timeout=30) as answer:
        dependencies = json.loads(answer.read())["dependencies"]
    load = next(d.get("id", i) for i, d in enumerate(dependencies) if d.get("api_name") == "on_load")

    def hold_the_page_load(route):
        sent = json.loads(route.request.post_data or "{}")
        if held or sent.get("fn_index") != load:
            route.continue_()
        else:  # the page-load event: held in flight, as a slow load would be, until the test lets it go
            held.append(route)

    page.route("**/queue/join**", hold_the_page_load)
    page.goto(app_url)
    page.wait_for_selector("#step")
    for _ in range(1200):  # until the page has sent its load (Playwright runs the route handler meanwhile)
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the page never sent its load event"
    assert page.is_disabled("#step") and page.is_disabled("#generate")
    assert "Loading the model" in status(page)
    # Fresh eyes: each output drew its own "Loading … 0.0%" bar and timer, and Stop was active.
    bars = page.evaluate("() => [...document.querySelectorAll('.progress-text')].filter(e => e.offsetParent).length")
    assert bars <= 1, bars
    assert page.is_disabled("#stop")
    shot(page, "first-load")
    page.click("#step", force=True)  # a click on the disabled button does nothing
    held[0].continue_()
    wait_ready(page)
    page.wait_for_function("() => !document.querySelector('#step').disabled")
    assert not page.is_disabled("#stop")  # on with the session, as Step is
    assert page.locator("text=No model is loaded").count() == 0
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    context.close()


def test_quick_clicks_all_count(page):
    """Bug 5: six quick Step clicks make six steps, then two Undo clicks undo two."""
    n = len(tokens(page))
    for _ in range(6):
        page.click("#step")
    wait_token_count(page, n + 6)
    idle(page)  # nothing queued or running: a seventh step would be a pending event
    assert len(tokens(page)) == n + 6 and "6 generated" in status(page)
    page.click("#undo")
    page.click("#undo")
    wait_token_count(page, n + 4)


def test_a_zero_width_joiner_is_shown_by_name(page):
    """Bug 8: every chip of "🐱‍👤" shows something; the joiner shows as ⟨ZWJ⟩."""
    type_prompt(page, "🐱\u200d👤")
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    chips = tokens(page)
    assert all(chip.strip() for chip in chips), chips
    assert "⟨ZWJ⟩" in "".join(chips)


def test_the_timing_chart_shows_its_labels(page):
    """Bug 7: the y tick labels ("100", "200") are whole, and the legend clears the x title."""
    n = len(tokens(page))
    for i in range(1, 5):  # two steps with the cache on, two with it off: two lines, and a legend
        if i == 3:
            page.click("#kv-cache input[type=checkbox]")
        page.click("#step")
        wait_token_count(page, n + i)
    page.click("button[role=tab]:has-text('KV cache')")
    wait_plot_title(page, "timing", "Milliseconds per step")
    idle(page)
    assert tick_labels_fit(page, "timing", axes="y")
    legend = page.locator("#timing .legend").bounding_box()
    x_title = page.locator("#timing .xtitle").bounding_box()
    assert legend["y"] + legend["height"] <= x_title["y"] or legend["y"] >= x_title["y"] + x_title["height"]
    shot(page, "newcomer-timing")


def test_the_phone_layout_fits(browser, app_url):
    """Bug 7 at 390 px: candidate bars fit their column, the Head dropdown's text is clear of its
    arrow, and the Layer slider shows its maximum."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(app_url)
    wait_ready(page)
    type_prompt(page, "Paris is the capital of")
    page.locator("#step").tap()
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    # The rows on screen are Gradio 6's divs (its <td>s only size the columns, out of sight); the
    # top bar is made the longest the server sends (BAR_WIDTH blocks, a probability of 100%).
    bars = "#candidates .virtual-row > :last-child .text"
    page.eval_on_selector(bars, "(cell, n) => { cell.textContent = '█'.repeat(n); }", BAR_WIDTH)
    cut = page.evaluate(
        """s => Array.from(document.querySelectorAll(`#candidates th, ${s}`))
            .filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent)""",
        bars,
    )
    assert page.locator(bars).count() >= 5 and cut == []
    head = page.evaluate(  # where the chosen head's text ends, against where the arrow begins
        """() => { const input = document.querySelector('#head input');
            const style = getComputedStyle(input);
            const context = document.createElement('canvas').getContext('2d');
            context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
            const end = input.getBoundingClientRect().left + parseFloat(style.paddingLeft)
                + context.measureText(input.value).width;
            const arrow = document.querySelector('#head .icon-wrap').getBoundingClientRect().left;
            return {text: input.value, clear: end <= arrow}; }"""
    )
    assert head == {"text": "average of all heads", "clear": True}
    maximum = page.locator("#layer [data-testid=max-value]")
    assert maximum.is_visible() and maximum.inner_text() == "29"
    shot(page, "newcomer-phone")
    context.close()


def test_the_model_names_fit_their_box(browser, app_url):
    """Fresh eyes at 390 px: the chosen model's name ran into the dropdown's arrow ("…(decoder,
    embe…"). Every model that can load is named clear of the arrow, on a phone and at 1280 px."""
    from explorer.present.model_store import dropdown_choices, list_models

    can_load = {entry.name for entry in list_models() if entry.available}
    labels = [label for label, name in dropdown_choices() if name in can_load]
    for viewport, mobile in (({"width": 390, "height": 844}, True), ({"width": 1280, "height": 720}, False)):
        context = browser.new_context(viewport=viewport, is_mobile=mobile, has_touch=mobile)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(app_url)
        wait_ready(page)
        cut = page.evaluate(  # each label's end in the model's box, with its font, against the arrow
            """labels => { const input = document.querySelector('#model input');
                const style = getComputedStyle(input);
                const context = document.createElement('canvas').getContext('2d');
                context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
                const start = input.getBoundingClientRect().left + parseFloat(style.paddingLeft);
                const arrow = document.querySelector('#model .icon-wrap').getBoundingClientRect().left;
                return labels.filter(label => start + context.measureText(label).width > arrow); }""",
            labels,
        )
        assert len(labels) >= 3 and cut == [], (viewport, cut)
        shot(page, f"model-name-{viewport['width']}")
        context.close()


def test_an_alignment_head_opens_on_cross_attention(page):
    """Bug 3: a head tagged A (measured on cross-attention) opens on cross-attention, as plotted data."""
    import explorer
    from explorer.analysis.roles import head_roles
    from explorer.viz.roles import GAP, LEFT, SQUARE, TOP

    source = TRANSLATOR_EXAMPLES[0]
    session = explorer.GenerationSession(explorer.load_model(TRANSLATOR), source)
    for _ in range(4):
        session.step()
    result = head_roles(session)
    layer, head = next((i, h) for i, row in enumerate(result.tags) for h, tag in enumerate(row) if tag == "alignment")
    expected = session.cross_attention(layer)[head].argmax(axis=1).tolist()  # (T,) the source each row reads

    choose_model(page, TRANSLATOR)
    page.wait_for_selector("#source-strip .token")
    idle(page)
    for n in range(2, 6):
        page.click("#step")
        wait_token_count(page, n)
    idle(page)
    page.click("button[role=tab]:has-text('Head roles')")
    page.wait_for_selector("#head-roles img")
    idle(page)
    image = page.locator("#head-roles img")
    scale = image.bounding_box()["width"] / image.evaluate("img => img.naturalWidth")
    image.click(position={"x": (LEFT + head * (SQUARE + GAP) + SQUARE / 2) * scale,
                          "y": (TOP + layer * (SQUARE + GAP) + SQUARE / 2) * scale})  # fmt: skip
    # The click opens the head where its role was measured: its cross-attention, on that tab.
    page.wait_for_selector("button[role=tab][aria-selected=true]:has-text('Cross-attention')")
    wait_plot_title(page, "cross-attention", f"layer {layer}, head {head}")
    shown = plot(page, "cross-attention")["traces"][0]
    assert (shown["rows"], shown["cols"]) == (5, len(session.source_ids))
    assert shown["argmax"] == expected
    shot(page, "newcomer-alignment-head")
