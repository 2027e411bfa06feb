"""End to end in Chromium: the logit lens, head roles, the causal proof and its sandbox,
architecture and cost, figure downloads, saved sessions and links (issue 5)."""

from __future__ import annotations

import re

import pytest

from explorer.viz.labels import TOKEN_COLORS
from tests.browser.conftest import wait_ready
from tests.browser.helpers import (
    CHART_PARTS,
    DESKTOP,
    PHONE,
    choose_layer,
    cut_titles,
    idle,
    opened,
    overlaps,
    plot,
    shot,
    show_modebar,
    status,
    tokens,
    type_prompt,
    wait_plot_title,
    wait_token_count,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "The capital of France is Paris. The capital of Germany is"
N_LAYERS, N_HEADS = 30, 9  # SmolLM2-135M


def start(page, steps: int = 3) -> int:
    """Type the prompt, step ``steps`` times; return the token count."""
    type_prompt(page, PROMPT)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    idle(page)
    n = len(tokens(page))
    for _ in range(steps - 1):
        page.click("#step")
        n += 1
        wait_token_count(page, n)
        idle(page)
    return n


def open_tab(page, name: str) -> None:
    page.click(f"button[role=tab]:has-text('{name}')")


def expected_argmax(prompt: str, steps: int, layer: int, head: int) -> list[int]:
    """Each query's strongest key in one head, from a session run in this process (greedy, so
    the same tokens as the page's)."""
    import explorer

    session = explorer.GenerationSession(explorer.load_model("smollm2-135m-instruct", progress=False), prompt)
    for _ in range(steps):
        session.step()
    return session.self_attention(layer)[head].argmax(axis=1).tolist()


def lens_cells(page) -> dict:
    return page.evaluate(
        """() => { const g = document.querySelector('#logit-lens .js-plotly-plot');
            if (!g || !g.data) return null;
            return {y: Array.from(g.data[0].y), text: g.data[0].text.map(r => Array.from(r)),
                    title: g.layout.title.text}; }"""
    )


def test_logit_lens_top_row_is_the_next_token(page):
    n = start(page)
    open_tab(page, "Logit lens")
    wait_plot_title(page, "logit-lens", f"After {n - 1}")
    lens = lens_cells(page)
    assert lens["y"] == ["embeddings"] + [f"layer {i}" for i in range(N_LAYERS)]
    predicted = lens["text"][-1][0]  # the last layer's most probable token
    shot(page, "insights-logit-lens")
    page.click("#step")  # greedy: the model takes exactly that token
    wait_token_count(page, n + 1)
    wait_plot_title(page, "logit-lens", f"After {n}")
    idle(page)
    assert tokens(page)[-1] == predicted.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    # An earlier token as the query: the lens says what each layer expected after it, ✓ marking what followed.
    page.locator("#token-strip .token").nth(n - 2).click()
    wait_plot_title(page, "logit-lens", f"After {n - 2}")
    assert lens_cells(page)["text"][-1][0].endswith("✓")


@pytest.mark.parametrize("screen", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_the_logit_lens_axis_title_keeps_off_the_chart_title(browser, app_url, screen):
    """Fresh eyes at 390x844: the lens's axis title ("rank") was drawn over the chart's title
    ("After 7 '⏎': each layer's top tokens next"). The title sits under the page's label and the
    mode bar, the axis title under the title; at 1280x720 too."""
    context, page = opened(browser, app_url, screen)
    n = len(tokens(page))
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    open_tab(page, "Logit lens")
    wait_plot_title(page, "logit-lens", f"After {n} ")
    show_modebar(page, "logit-lens", screen)
    shot(page, f"insights-logit-lens-{screen['viewport']['width']}")
    assert overlaps(page, "logit-lens", [*CHART_PARTS[:3], ".g-xtitle"]) == []
    assert cut_titles(page, "logit-lens") == []
    context.close()


def test_head_roles_overview_opens_a_head(page):
    start(page, steps=4)
    open_tab(page, "Head roles")
    page.wait_for_function("() => document.querySelector('#roles-info').innerText.includes('Of 270 heads')")
    info = page.inner_text("#roles-info")
    assert re.search(r"first token\** \d+", info), info  # SmolLM2 has many attention-sink heads
    from explorer.viz.roles import GAP, LEFT, SQUARE, TOP

    image = page.locator("#head-roles img")
    image.wait_for()
    page.wait_for_function("() => document.querySelector('#head-roles img').naturalWidth > 0")  # loaded: its size known
    scale = image.bounding_box()["width"] / image.evaluate("img => img.naturalWidth")
    layer, head = 5, 4
    image.click(position={"x": (LEFT + head * (SQUARE + GAP) + SQUARE / 2) * scale,
                          "y": (TOP + layer * (SQUARE + GAP) + SQUARE / 2) * scale})  # fmt: skip
    # Issue 40, item 19: the click takes the user to the head's self-attention (it left them on Head roles).
    wait_plot_title(page, "self-attention", f"layer {layer}, head {head}")
    assert page.inner_text("#views button[role=tab][aria-selected=true]") == "Self-attention"
    assert page.locator("#head input").input_value() == f"head {head}"
    open_tab(page, "Head roles")
    wait_plot_title(page, "role-head", f"layer {layer}, head {head}")
    # The plotted data is that head's: each row's strongest key as the session API computes it.
    assert plot(page, "role-head")["traces"][0]["argmax"] == expected_argmax(PROMPT, 4, layer, head)
    page.wait_for_function(
        "() => document.querySelector('#roles-info').innerText.includes('Selected: layer 5, head 4')"
    )
    assert page.locator("#head input").input_value() == f"head {head}"
    assert page.locator("#layer input[type=number]").input_value() == str(layer)
    shot(page, "insights-head-roles")


def test_causal_proof_and_the_mask_free_sandbox(page):
    n = start(page)
    open_tab(page, "Causal proof")
    # Once the tab has shown (its views, computed before the check, would overwrite the check's result).
    page.wait_for_function("() => document.querySelector('#parallel-info').innerText.includes('Press')")
    idle(page)
    page.click("#parallel-check")
    page.wait_for_function("() => document.querySelector('#parallel-info').innerText.includes('Over all')")
    info = page.inner_text("#parallel-info")
    assert "✓" in info and f"Over all {n} positions" in info
    logit_diff = float(re.search(r"largest logit difference ([\d.e+-]+)", info).group(1))
    assert logit_diff <= 2e-4  # SmolLM2's logits reach ~40: see the README's Tests section

    page.click("#sandbox")
    page.wait_for_function("() => document.querySelector('#sandbox-info').innerText.includes('changed at')")
    wait_plot_title(page, "sandbox-attention", "Without the mask")
    sandbox = plot(page, "sandbox-attention")["traces"][0]
    assert (sandbox["rows"], sandbox["cols"]) == (n, n) and sandbox["nan"] == 0  # nothing masked
    upper = page.evaluate(
        """() => { const g = document.querySelector('#sandbox-attention .js-plotly-plot'); const z = g.data[0].z;
            const bin = atob(z.bdata); const b = new Uint8Array(bin.length);
            for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
            const f = new Float32Array(b.buffer); const n = Number(String(z.shape).split(',')[0]); let s = 0;
            for (let r = 0; r < n; r++) for (let c = r + 1; c < n; c++) s += f[r * n + c]; return s; }"""
    )
    assert upper > 0.5  # weight above the diagonal: the future leaks
    shot(page, "insights-sandbox")

    # The session is untouched: its own heatmap is still masked, and stepping goes on.
    open_tab(page, "Self-attention")
    wait_plot_title(page, "self-attention", "Causal self-attention")
    assert plot(page, "self-attention")["traces"][0]["nan"] == n * (n - 1) // 2
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    open_tab(page, "Causal proof")  # the old result no longer covers the tokens on screen, and says so
    page.wait_for_function(f"() => document.querySelector('#parallel-info').innerText.includes('{n + 1} tokens')")


def test_architecture_and_the_cost_of_a_step(page):
    n = start(page)
    open_tab(page, "Architecture and cost")
    page.wait_for_function("() => document.querySelector('#architecture').innerText.includes('RMSNorm')")
    table = page.inner_text("#architecture")
    assert "rotary" in table and "3 (each shared by 3 query heads" in table and "pre-norm" in table
    cost = page.inner_text("#step-cost")
    assert "cache on" in cost and f"× {n} positions × 4 bytes" in cost and "✓" in cost
    shot(page, "insights-architecture")
    # Issue 40, item 18: the attention code is a link to this server's copy of the file, as text.
    link = page.locator("#views a:has-text('explorer/model/attention.py')").first
    source = page.request.get(link.evaluate("a => a.href"))
    assert source.ok and source.headers["content-type"].startswith("text/plain") and "def " in source.text()
    page.click("#kv-cache input[type=checkbox]")
    idle(page)
    page.click("#step")
    wait_token_count(page, n + 1)
    page.wait_for_function("() => document.querySelector('#step-cost').innerText.includes('cache off')")
    assert f"all {n + 1} positions again" in page.inner_text("#step-cost")


def test_figures_download_as_png_and_svg(page, tmp_path):
    """Plotly's figures (the timing chart) from its camera button, the heatmap from its own button."""
    start(page, steps=1)
    for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<svg")):
        if fmt == "svg":
            page.click("#share")  # the accordion
            page.click("#image-format label:has-text('svg')")
            idle(page)
            page.wait_for_function(
                "() => document.querySelector('#self-attention .attention-download').textContent.includes('SVG')"
            )
        with page.expect_download() as download:
            page.click("#self-attention .attention-download")
        path = tmp_path / download.value.suggested_filename
        download.value.save_as(path)
        assert path.name == f"decoder-explorer-self-attention.{fmt}" and path.read_bytes()[:4] == magic[:4]
        if fmt == "svg":  # the cells are in it (as images, one pixel per cell), and the labels
            text = path.read_text()
            assert text.count("<image") == 1 and "Causal self-attention" in text and "queries (who reads)" in text
    open_tab(page, "KV cache")
    wait_plot_title(page, "timing", "Milliseconds per step")
    page.locator("#timing .js-plotly-plot").hover()
    with page.expect_download() as download:
        page.locator("#timing .modebar-btn[data-title^='Download plot']").click()
    assert download.value.suggested_filename.endswith(".svg")


def test_save_a_session_and_open_it_elsewhere(page, browser, app_url, tmp_path):
    n = start(page)
    cell = page.locator("#candidates [data-testid=cell-2-1]")  # a branch: the third candidate
    candidate = cell.inner_text().strip()
    cell.click()
    page.wait_for_function(
        """t => { const s = document.querySelectorAll('#token-strip .token .text');
                  return s[s.length - 1].textContent === t; }""",
        arg=candidate,
    )
    idle(page)
    page.click("#step")
    wait_token_count(page, n + 1)
    idle(page)
    saved_tokens = tokens(page)
    page.click("#share")
    page.click("#save-session")
    link = page.locator("#saved-file a").first
    link.wait_for()
    with page.expect_download() as download:
        link.click()
    path = tmp_path / "session.npz"
    download.value.save_as(path)

    other = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    other.set_default_timeout(120_000)
    other.goto(app_url)
    wait_ready(other)
    other.click("#share")
    other.locator("#open-session input[type=file]").set_input_files(str(path))
    other.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=n + 1)
    idle(other)
    assert tokens(other) == saved_tokens
    kinds = other.eval_on_selector_all("#token-strip .token", "els => els.map(e => e.style.backgroundColor)")
    forced = ", ".join(str(int(TOKEN_COLORS["forced"][i : i + 2], 16)) for i in (1, 3, 5))
    assert sum(forced in k for k in kinds) == 1  # the forced token is still marked as forced
    assert other.locator("#prompt textarea").input_value() == PROMPT
    other.wait_for_selector("text=The attention was recomputed")
    shot(other, "insights-restored-session")

    # A file that is not a session: a clear message, and the session on screen stays.
    bad = tmp_path / "notes.npz"
    bad.write_bytes(b"not a zip")
    other.locator("#open-session input[type=file]").set_input_files(str(bad))
    other.wait_for_selector("text=not a session saved by Decoder Explorer")
    assert tokens(other) == saved_tokens
    other.context.close()


def test_a_link_reopens_model_input_settings_and_step(page, browser):
    n = start(page, steps=2)
    choose_layer(page, 4)
    wait_plot_title(page, "self-attention", "layer 4")
    open_tab(page, "Logit lens")
    wait_plot_title(page, "logit-lens", "After")
    page.click("#share")
    page.click("#make-link")
    page.wait_for_function("() => document.querySelector('#share-link textarea').value.startsWith('http')")
    url = page.locator("#share-link textarea").input_value()
    assert "model=smollm2-135m-instruct" in url and "layer=4" in url and "tab=lens" in url

    other = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    other.set_default_timeout(120_000)
    other.goto(url)
    other.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=n)
    wait_plot_title(other, "logit-lens", f"After {n - 1}")  # the lens tab is open again
    idle(other)
    assert tokens(other) == tokens(page)
    assert other.locator("#layer input[type=number]").input_value() == "4"
    assert "2 generated" in status(other)

    # A damaged link: a message, and instead the session this browser kept (the link's, opened
    # above, with its lens tab), as a reload would bring it back.
    other.goto(url.split("?")[0] + "?model=smollm2-135m-instruct&text=hi&tokens=1,x")
    other.wait_for_selector("text=This link cannot be opened")
    other.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=n)
    wait_plot_title(other, "logit-lens", f"After {n - 1}")
    other.context.close()


def test_a_refused_prompt_is_said_until_the_box_changes_and_a_long_one_scrolls_in_its_box(page):
    """Issue 40, item 19: a prompt too long for the model is refused under the box (not only in a
    warning that fades), saying that the box differs from what is shown, until its text changes;
    a long text scrolls inside a box of at most five lines, and the heatmap stays in sight."""
    n = len(tokens(page))
    heatmap_top = page.locator("#self-attention .attention-figure").bounding_box()["y"]
    type_prompt(page, "word " * 1800)  # more tokens than the explorer takes
    box = page.locator("#prompt textarea")
    page.wait_for_function("() => document.querySelector('#prompt textarea').scrollHeight > 300")
    assert box.bounding_box()["height"] < 150
    assert page.locator("#self-attention .attention-figure").bounding_box()["y"] < heatmap_top + 60
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#prompt-note').innerText.includes('tokens long')")
    note = page.inner_text("#prompt-note")
    assert "The text in the box is not the one shown below" in note and "previous text" in note
    idle(page)
    assert len(tokens(page)) == n  # the old session stays on screen, as the note says
    page.wait_for_selector("[data-testid=toast-body]", state="detached")  # the warning has gone ...
    assert "tokens long" in page.inner_text("#prompt-note")  # ... the note has not
    shot(page, "prompt-refused-note")
    type_prompt(page, "A short text again")
    box.press("End")  # an input event, as typing sends
    box.type(".")
    page.wait_for_function("() => !document.querySelector('#prompt-note').innerText.trim()")


def test_the_model_name_fits_at_640_pixels(browser, app_url):
    """Issue 40, item 19: at 640 px wide the model's name and kind were cut off in their box."""
    context = browser.new_context(viewport={"width": 640, "height": 900})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(app_url)
    wait_ready(page)
    fits = page.evaluate(
        "() => { const i = document.querySelector('#model input'); return [i.scrollWidth, i.clientWidth]; }"
    )
    shot(page, "model-name-640")
    assert fits[0] <= fits[1], fits
    context.close()
