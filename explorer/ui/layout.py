"""The page's frame: every component outside the views' tabs, where it sits, and nothing that
happens when it is used. The tabs come from the registry (``explorer/ui/tabs/``), each laid out by
its own module; the page's CSS and JavaScript are files in ``explorer/ui/static/``.

``build_page`` is called inside a ``gr.Blocks`` and returns a ``Page``, each component under the
name it was added with. Callbacks (``explorer.ui.events``, ``explorer.ui.lifecycle``, the tabs')
return their updates keyed by these names; ``explorer.ui.app`` wires the names to the components.
"""

from __future__ import annotations

import json
import os

import gradio as gr

from explorer.present import views
from explorer.present.tabs import TABS
from explorer.present.views import MEAN
from explorer.sampling import SEED_RANGE, TEMPERATURE_RANGE, TOP_K_RANGE, TOP_P_RANGE
from explorer.ui import texts
from explorer.ui.features import FEATURES
from explorer.ui.page import Page
from explorer.ui.static_files import static
from explorer.ui.tabs import code
from explorer.ui.texts import DECODER_EXAMPLES, TRANSLATOR_EXAMPLES
from explorer.viz import colours

BROWSER_KEY = "decoder-explorer-session"

TEXT_ENV = "DECODER_EXPLORER_TEXT"  # the text a page opens with (python -m explorer --text)


# Images that take clicks are buttons in Gradio, named by nothing (an image without alt text):
# what a screen reader says for each.
BUTTON_NAMES = {
    "all-heads": "Every head of this layer: click one to open it",
    "head-roles": "Every head of the model by role: click one to open it",
}
CSS = static("page.css") + "".join(static(name) for feature in FEATURES for name in feature.styles)
# What the page runs once it has loaded (gr.Blocks.launch's js): the frame (names for a screen
# reader, the server it is on), the token strip's selection and the keys, and each feature's own
# script, each a function of the frame's helpers.
FRAME_PARTS = (static("token_strip.js"), static("keys.js"))
PARTS = (*(script for feature in FEATURES for script in feature.scripts), *FRAME_PARTS)
PAGE_SCRIPT = (
    static("page.js")
    .replace("__PARTS__", "\n".join(f"({part.strip()})(page);" for part in PARTS))
    .replace("__BUTTON_NAMES__", json.dumps(BUTTON_NAMES))
)
# In the page's <head>, before Gradio reads the kept session: each tab's own copy first.
TAB_SESSION_HEAD = static("tab_session.js").replace("__KEY__", BROWSER_KEY)
PRESENTER_SCRIPT = static("presenter.js")  # presenter mode on or off (a class on the body)


def theme() -> gr.themes.Base:
    """Gradio's Soft theme with text dark enough to read (WCAG AA, 4.5:1; checked with axe-core in
    tests/browser/test_accessibility.py): its labels, buttons and quiet text were 2.4-3.6:1."""
    return gr.themes.Soft().set(
        block_label_text_color="*primary_700", block_title_text_color="*primary_700",
        body_text_color_subdued="*neutral_600", link_text_color="*primary_700",
        button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
        button_primary_text_color="white", checkbox_label_background_fill_selected="*primary_600",
        checkbox_label_background_fill_selected_dark="*primary_600",
    )  # fmt: skip


# The settings a new session is made from, in the order the session callbacks take them.


def example_picker(examples: list[str], label: str, text: gr.Textbox) -> None:
    """Clickable examples that set only the text box's value.

    (gr.Examples also sends the box's first settings back with the value, which turned the
    translator's "Source sentence" label back into "Prompt".)
    """
    picker = gr.Dataset(components=["textbox"], samples=[[example] for example in examples], label=label)
    picker.click(lambda sample: sample[0], inputs=picker, outputs=text, queue=False, show_progress="hidden")


def build_page(browser_secret: str) -> Page:
    """Lay out the page (inside a gr.Blocks); returns its components.

    Made for a projector: the model, the text and the buttons on one row; under it the tokens and
    the candidates on the left and the views on the right, so that after a Step the button, the
    strip, the candidates and the heatmap are all in sight at 1280x720 (tests/browser/test_projector.py).
    The settings follow the candidates, below the fold. On a phone everything stacks in that order.
    """
    page = Page()
    page.features, page.browser_secret = FEATURES, browser_secret
    page.add(
        state=gr.State(None),
        # This tab's session as the browser keeps it (localStorage), so that a reload or a server
        # restart (a Space sleeps and wakes) brings it back: the tokens are replayed through the model.
        kept=gr.BrowserState(None, storage_key=BROWSER_KEY, secret=browser_secret),
    )
    page.lay_out("hidden")  # what the features keep in the browser, and what their scripts read and press
    # Its link to a panel folded further down opens that panel (the panel's own script): a student
    # on a phone finds it from the top.
    gr.Markdown(texts.INTRO, elem_id="intro")
    with gr.Row(equal_height=False, elem_id="top-row"):
        with gr.Column(scale=3, min_width=240):  # room for the longest model name and its kind
            page.lay_out("top")
        with gr.Column(scale=3, min_width=300):
            page.add(
                # At most 5 lines tall, scrolling inside: a long text must not push the views down.
                text=gr.Textbox(
                    label="Prompt", value=os.environ.get(TEXT_ENV) or DECODER_EXAMPLES[0], lines=2, max_lines=5,
                    elem_id="prompt",
                ),
                # A refused text (too long, no tokens) is said here until the box changes (tab.TextRefused).
                prompt_note=gr.Markdown("", elem_id="prompt-note"),
            )  # fmt: skip
        with gr.Column(scale=3, min_width=280):
            page.add(**buttons())
    with gr.Row(equal_height=False, elem_id="workbench"):
        with gr.Column(scale=2, min_width=300):
            page.lay_out("workbench")  # the panels above the tokens
            page.add(**session_panel())
            with gr.Column(elem_id="explorer-settings"):  # folded away on a student's page (page.css)
                page.add(**settings(page, page.text))
        with gr.Column(scale=3, min_width=300):
            page.add(**view_choice())
            view_tabs(page)
    return page


def view_tabs(page: Page) -> None:
    """The views, one tab each, in the registry's order; each tab's module lays out its inside.
    Tabs that do not fit the width wrap onto another row (a "…" menu would hide them)."""
    with gr.Tabs(elem_id="views", overflow_behavior="wrap") as tabs:
        page.add(tabs=tabs)
        for tab in TABS:
            with gr.Tab(tab.title, id=tab.id, visible=not tab.translator_only, elem_id=f"tab-{tab.id}") as block:
                page.add(**{tab.component: block})
                code(tab).layout(page)


def settings(page: Page, text: gr.Textbox) -> dict:
    """Below the candidates: the examples, the generation settings, the panels placed there (each
    an accordion), the display, another model (where the operator allows it) and the model's description."""
    made = {}
    with gr.Column(visible=True) as made["decoder_examples"]:
        example_picker(DECODER_EXAMPLES, "Examples", text)
    with gr.Column(visible=False) as made["translator_examples"]:
        example_picker(TRANSLATOR_EXAMPLES, "Example sentences", text)
    made["chat"] = gr.Checkbox(label="Use the chat template", value=False, elem_id="chat")
    made["max_new"] = gr.Slider(1, 256, value=40, step=1, label="Generate at most this many tokens", elem_id="max-new")
    with gr.Accordion("Sampling", open=False):
        made["temperature"] = gr.Slider(*TEMPERATURE_RANGE, value=0, step=0.05, label="Temperature (0 = greedy)")
        made["top_k"] = gr.Slider(*TOP_K_RANGE, value=0, step=1, label="Top-k (0 = off)")
        made["top_p"] = gr.Slider(*TOP_P_RANGE, value=1, step=0.05, label="Top-p")
        made["seed"] = gr.Number(value=0, precision=0, minimum=SEED_RANGE[0], maximum=SEED_RANGE[1], label="Seed")
    page.lay_out("settings")  # the panels among the settings, each its own accordion
    with gr.Accordion("Display", open=False, elem_id="display"):
        made |= display()
    page.lay_out("settings-end")
    made["model_info"] = gr.Markdown(elem_classes="explain", elem_id="model-info")
    return made


def buttons() -> dict:
    # Step, Generate, Undo, Reset are off until the page's first model has loaded (a click then
    # would find no session).
    with gr.Row():
        made = {
            "step_button": gr.Button("Step", variant="primary", elem_id="step", min_width=70, interactive=False),
            "generate_button": gr.Button("Generate", elem_id="generate", min_width=70, interactive=False),
            "stop_button": gr.Button("Stop", variant="stop", elem_id="stop", min_width=70, interactive=False),
        }
    with gr.Row():
        made["undo_button"] = gr.Button("Undo", elem_id="undo", min_width=70, interactive=False)
        made["reset_button"] = gr.Button("Reset", elem_id="reset", min_width=70, interactive=False)
        made["use_cache"] = gr.Checkbox(label="KV cache", value=True, elem_id="kv-cache", min_width=110)
    return made


def display() -> dict:
    return {
        "presenter": gr.Checkbox(
            label="Presenter mode: larger text and figures for the back row", value=False, elem_id="presenter"
        ),
        "colour_scale": gr.Radio(
            colours.CHOICES, value=colours.DEFAULT_SCALE, label="Attention colours", elem_id="colour-scale"
        ),
    }


def session_panel() -> dict:
    """The right column: the status line, the tokens, the next-token candidates."""
    made = {
        "status": gr.Markdown(texts.LOADING, elem_id="status"),
        "source": gr.HighlightedText(
            label="Source sentence tokens", color_map={"source": views.SOURCE_COLOR}, show_legend=False,
            show_inline_category=False, visible=False, elem_id="source-strip",
        ),
        "source_note": gr.Markdown(visible=False, elem_id="source-note"),
        "strip": gr.HighlightedText(
            label="Tokens (click one to inspect it as the query)", color_map=views.strip_colors(False),
            show_legend=True, show_inline_category=False, elem_id="token-strip",
        ),
    }  # fmt: skip
    made["candidates"] = gr.Dataframe(
        headers=["", "candidate", "probability", ""], datatype="str", interactive=False, elem_id="candidates",
        label=views.NEXT_CANDIDATES, max_height=228,  # it scrolls: the heatmap beside it stays in sight
        column_widths=["9%", "29%", "32%", "30%"],  # room for the longest bar (20 blocks)
    )  # fmt: skip
    gr.Markdown(texts.CANDIDATES, elem_classes="explain", elem_id="candidates-explain")
    # While a question asks which token comes next: what the page's script covers, and why
    # (explorer.ui.answer_cover; static/answer_cover.js). Read by the script only.
    made["answer_cover"] = gr.Textbox(
        label="What is hidden (read by the page's script)", elem_id="answer-cover", elem_classes="machine-only"
    )
    return made


def view_choice() -> dict:
    # Side by side where there is room, one above the other on a phone (each needs ~260 px).
    with gr.Row():
        return {
            "layer": gr.Slider(0, 1, value=0, step=1, label="Layer", elem_id="layer", min_width=260),
            "head": gr.Dropdown(
                choices=[("average of all heads", MEAN)], value=MEAN, label="Head", elem_id="head", min_width=260
            ),
        }
