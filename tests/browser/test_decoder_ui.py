"""End to end in Chromium with the embedded SmolLM2: what a person does, what the page shows."""

from __future__ import annotations

import pytest

from tests.browser.helpers import (  # fmt: skip
    choose_head,
    choose_layer,
    generate_runs_ended,
    idle,
    plot,
    shot,
    status,
    tick_labels_fit,
    tokens,
    type_prompt,
    wait_generate_ended,
    wait_plot_rows,
    wait_plot_title,
    wait_query_at,
    wait_strip_starts_with,
    wait_token_count,
)  # fmt: skip

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "The cat sat on the mat. The dog sat on the"


def step(page, expected_count: int) -> None:
    page.click("#step")
    wait_token_count(page, expected_count)
    wait_plot_rows(page, "self-attention", expected_count)
    idle(page)


def check_heatmap(page, n: int) -> None:
    """Rows and columns equal the token count; the future triangle is masked, nothing else."""
    data = plot(page, "self-attention")
    weights = data["traces"][0]
    assert len(data["traces"]) == 1 and (weights["rows"], weights["cols"]) == (n, n)
    assert weights["nan"] == n * (n - 1) // 2  # the future triangle holds no weights...
    assert data["background"] == "#bdbdbd"  # ...and shows the grey background: masked, not zero
    assert data["shapes"] == 1  # the selected query's row
    assert tick_labels_fit(page, "self-attention")  # margins reckoned from the labels hold them


def test_step_undo_inspect_cache_force_generate(page):
    type_prompt(page, PROMPT)
    page.click("#step")  # a changed prompt starts a new session, then steps
    wait_strip_starts_with(page, PROMPT)
    idle(page)
    n_prompt = len(tokens(page)) - 1
    assert "".join(tokens(page)[:n_prompt]).replace("·", " ") == PROMPT
    for i in range(2, 6):
        step(page, n_prompt + i)
    strip = tokens(page)
    assert len(strip) == n_prompt + 5
    check_heatmap(page, n_prompt + 5)
    shot(page, "decoder-after-5-steps")

    page.click("#undo")
    wait_token_count(page, n_prompt + 4)
    assert tokens(page) == strip[:-1]
    check_heatmap(page, n_prompt + 4)

    # Layer and head: the heatmap says which it shows.
    choose_layer(page, 3)
    wait_plot_title(page, "self-attention", "layer 3")
    choose_head(page, 2)
    wait_plot_title(page, "self-attention", "layer 3, head 2")
    check_heatmap(page, n_prompt + 4)

    # All heads of the layer in one image: clicking head 7 (row 2, column 3) opens it.
    from explorer.viz.thumbnails import CELL, GAP, LABEL

    image = page.locator("#all-heads img")
    natural = image.evaluate("img => img.naturalWidth")
    box = image.bounding_box()
    scale = box["width"] / natural
    image.click(position={"x": (2 * (CELL + GAP) + CELL / 2) * scale, "y": (CELL + GAP + LABEL + CELL / 2) * scale})
    wait_plot_title(page, "self-attention", "layer 3, head 7")
    assert page.locator("#head input").input_value() == "head 7"
    from tests.browser.test_insights_ui import expected_argmax

    assert plot(page, "self-attention")["traces"][0]["argmax"] == expected_argmax(PROMPT, 4, 3, 7)  # its data
    shot(page, "decoder-all-heads")

    # Click a token: it becomes the outlined query and "Every layer" follows it.
    page.locator("#token-strip .token").nth(3).click()
    wait_query_at(page, 3)
    page.click("button[role=tab]:has-text('Every layer')")
    wait_plot_title(page, "every-layer", "What 3")
    layers = plot(page, "every-layer")["traces"][0]
    assert layers["rows"] == 30 and layers["cols"] == 4  # 30 layers, the 4 tokens query 3 can read
    page.click("button[role=tab]:has-text('Self-attention')")

    # The cache off: the next step recomputes everything and the status says so.
    page.click("#kv-cache input[type=checkbox]")
    idle(page)
    step(page, n_prompt + 5)
    assert "cache off" in status(page)
    page.click("#kv-cache input[type=checkbox]")
    idle(page)
    step(page, n_prompt + 6)
    assert "cache on" in status(page)
    page.click("button[role=tab]:has-text('KV cache')")
    wait_plot_title(page, "timing", "Milliseconds per step")  # built when its tab opens
    timing = plot(page, "timing")
    measured = {t["name"]: sum(v is not None for v in t["y"]) for t in timing["traces"]}
    assert measured == {"cache on": 5, "cache off": 1}
    assert [t["x"] for t in timing["traces"]] == [6, 6]  # each line has a gap where the other mode stepped
    page.click("#compare")
    page.wait_for_function("() => document.querySelector('#cache-info').innerText.includes('Checked')")
    assert "same 6 tokens" in page.inner_text("#cache-info")
    timing = plot(page, "timing")
    assert [t["x"] for t in timing["traces"]] == [6, 6]
    shot(page, "decoder-kv-cache")
    page.click("button[role=tab]:has-text('Self-attention')")

    # Force the third candidate: it replaces the last token.
    before = tokens(page)
    cell = page.locator("#candidates [data-testid=cell-2-1]")
    candidate = cell.inner_text().strip()
    cell.click()
    page.wait_for_function(
        """t => { const s = document.querySelectorAll('#token-strip .token .text');
                  return s[s.length - 1].textContent === t; }""",
        arg=candidate,
    )
    after = tokens(page)
    assert after[:-1] == before[:-1] and after[-1] == candidate != before[-1]
    assert "forced" in page.inner_text("#token-strip")
    shot(page, "decoder-forced")


def test_generate_to_the_end_with_the_chat_template(page):
    type_prompt(page, "What is 2+2? Answer in one short sentence.")
    page.click("#chat input[type=checkbox]")
    page.click("#generate")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('ended the text')")
    idle(page)
    strip = tokens(page)
    assert strip[0] == "<|im_start|>" and strip[-1] == "<|im_end|>"
    check_heatmap(page, len(strip))
    assert page.locator("text=No model is loaded").count() == 0  # no spurious warning on the way
    shot(page, "decoder-generated")


def test_phone_viewport_has_no_horizontal_scroll(browser, app_url):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(app_url)
    from tests.browser.conftest import wait_ready

    wait_ready(page)
    n = len(tokens(page))
    page.locator("#step").tap()
    wait_token_count(page, n + 1)
    idle(page)
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    shot(page, "phone")
    # The tabs that do not fit one row wrap onto the next (none hides in a menu); the wide views still fit.
    for _ in range(3):  # head roles need a few tokens
        n += 1
        page.locator("#step").tap()
        wait_token_count(page, n + 1)
        idle(page)
    for tab, ready in (("Head roles", "#head-roles img"), ("Architecture and cost", "#architecture table")):
        button = page.locator(f"button[role=tab]:has-text('{tab}')")
        assert button.is_visible(), tab
        button.tap()
        page.wait_for_selector(ready)
        idle(page)
        assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0, tab
    shot(page, "phone-head-roles")
    context.close()


def test_two_tabs_keep_their_own_sessions(browser, app_url):
    from tests.browser.conftest import wait_ready

    pages = []
    for prompt in ("Roses are red,", "def square(x):"):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(app_url)
        wait_ready(page)
        type_prompt(page, prompt)
        pages.append((page, prompt))
    for page, prompt in pages:
        page.click("#step")
        wait_strip_starts_with(page, prompt)
    for _ in range(2):
        for page, _ in pages:
            n = len(tokens(page))
            page.click("#step")
            wait_token_count(page, n + 1)
    for page, prompt in pages:
        idle(page)
        text = "".join(tokens(page)).replace("·", " ")
        assert text.startswith(prompt)
        other = next(p for _, p in pages if p != prompt)
        assert other not in text
        page.context.close()


def test_bad_input_warns_and_keeps_the_session(page):
    before = tokens(page)
    type_prompt(page, "   ")
    page.click("#step")
    page.wait_for_selector("text=The prompt is empty")
    assert tokens(page) == before


def generate_and_stop(page, n_prompt: int, limit: int = 256):
    """Generate, then Stop once the strip has grown: (tokens shown before Stop, runs ended before
    it), or None when the run ended by itself before Stop reached it (on a fast CPU a busy
    browser can fall that far behind the server: then there was nothing left to stop)."""
    type_prompt(page, "Once upon a time, in a small village,")
    limit_box = page.locator("#max-new input[type=number]")
    limit_box.fill(str(limit))
    limit_box.press("Enter")
    page.click("#generate")
    wait_strip_starts_with(page, "Once upon a time, in a small village,")
    page.wait_for_function(  # streamed: the strip grows step by step
        "n => document.querySelectorAll('#token-strip .token').length >= n", arg=n_prompt + 25
    )
    shown, runs_ended = len(tokens(page)), generate_runs_ended()
    page.click("#stop")
    # Stop says that it ended the run (not the end token, not the limit), and where.
    page.wait_for_function(
        "n => { const s = document.querySelector('#status').innerText;"
        " return s.includes('Stop ended Generate') || s.includes('the model ended the text')"
        " || document.querySelectorAll('#token-strip .token').length >= n; }",
        arg=n_prompt + limit,
    )
    return (shown, runs_ended) if "Stop ended Generate" in status(page) else None


def test_generate_streams_and_stops(page):
    n_prompt = 10  # SmolLM2 tokens of the prompt
    for _ in range(3):
        stopped_run = generate_and_stop(page, n_prompt)
        if stopped_run is not None:
            break
        idle(page)
        page.click("#reset")  # the prompt alone again, for another try
        page.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=n_prompt)
    assert stopped_run is not None, f"Stop never ended a Generate run (three tries): {status(page)}"
    shown, runs_ended = stopped_run
    wait_generate_ended(runs_ended)  # the run is over on the server: nothing can step on
    idle(page)
    stopped = len(tokens(page))
    assert f"{stopped} tokens" in status(page) and "ended the text" not in status(page)
    assert shown <= stopped < n_prompt + 256
    # Generate sends figures less often than tokens (a browser draws slower than the model
    # steps); after Stop they show the last token.
    wait_plot_rows(page, "self-attention", stopped)
