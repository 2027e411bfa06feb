"""The page: every component, where it sits, and nothing that happens when it is used.

``build_page`` is called inside a ``gr.Blocks`` and returns a ``Page``, a dataclass holding each
component under a name. Callbacks (``explorer.ui.events``, ``explorer.ui.lifecycle``) return
their updates keyed by these names; ``explorer.ui.app`` wires the names to the components.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass

import gradio as gr

from explorer.analysis.compare import BRANCHES
from explorer.lessons import LESSONS
from explorer.sampling import SEED_RANGE, TEMPERATURE_RANGE, TOP_K_RANGE, TOP_P_RANGE
from explorer.ui import model_store, texts, views
from explorer.ui.experiment_views import METHOD_CHOICES
from explorer.ui.heatmap import attention_heatmap_view
from explorer.ui.views import MEAN
from explorer.viz import colours

BROWSER_KEY = "decoder-explorer-session"
LESSONS_KEY = "decoder-explorer-lessons"  # which lesson steps this browser has answered

TEXT_ENV = "DECODER_EXPLORER_TEXT"  # the text a page opens with (python -m explorer --text)

DECODER_EXAMPLES = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The cat sat on the mat. The dog sat on the",
    "What is the boiling point of water?",
]
TRANSLATOR_EXAMPLES = [
    "Wednesday, March 3, 2021",
    "twenty-one",  # German says the units first: see cross-attention, layer 2
    "three hundred and forty-two",
    "at 3:45pm",
    "$12.50",
    "1,234,567",
    "342 kilometers",
]

CSS = """
#intro h2 { display: inline; margin: 0 14px 0 0; }  /* the title and the one line after it share a line */
#intro p { display: inline; margin: 0; }
#kv-cache label span { white-space: nowrap; }
/* Presenter mode (Display): the theme's text sizes, larger, for the back row of a classroom. */
body.presenter { --text-xxs: 13px; --text-xs: 15px; --text-sm: 17px; --text-md: 21px; --text-lg: 24px;
  --text-xl: 30px; --text-xxl: 36px; --block-label-text-size: 17px; --block-title-text-size: 19px;
  --body-text-size: 21px; --input-text-size: 21px; --button-large-text-size: 22px; --button-medium-text-size: 20px;
  --section-header-text-size: 20px; }
body.presenter #token-strip .token, body.presenter #candidates table { font-size: 21px; }
body.presenter .attention-tools { font-size: 15px; }
body.presenter .attention-name { font-size: 18px; }
#token-strip .textfield { line-height: 2.1; max-height: 10.5em; overflow-y: auto; }  /* 5 lines, then it scrolls */
#candidates table { font-family: ui-monospace, monospace; }
.explain { font-size: 0.92em; color: var(--body-text-color-subdued); }
.attribution-strip { line-height: 2.1; margin: 4px 0 10px; }
.attribution-strip .token { padding: 2px 3px; margin: 0 1px; border-radius: 3px; white-space: pre;
  font-family: ui-monospace, monospace; }
.aligned-runs { overflow-x: auto; }
.aligned-runs table { font-family: ui-monospace, monospace; border-collapse: collapse; }
.aligned-runs caption { text-align: left; white-space: nowrap; font-family: var(--font); padding-bottom: 4px; }
.aligned-runs th, .aligned-runs td { padding: 2px 6px; border: 1px solid #ddd; white-space: pre; }
.aligned-runs td.differs { font-weight: bold; border: 2px solid #d95f02; }
/* A clicked candidate is a choice, not a cell to edit: no row/column handles, no edit outline. */
#candidates .selection-button { display: none !important; }
#candidates .cell-selected:not(:focus-visible) .text { box-shadow: none !important; }
#model input { font-size: 14px; }  /* the model's name and kind fit the box at 1280 px */
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
@media (max-width: 640px) {
  .gradio-container { padding: 4px !important; }
  /* Gradio hides a slider's end labels on a phone: the Layer slider keeps its maximum in sight. */
  #layer .min_value, #layer .max_value { display: inline !important; }
  /* The probability bars fit their column (20 block characters, drawn narrower). */
  #candidates td:last-child { font-size: 0.6em; letter-spacing: -0.05em; white-space: nowrap; }
  #candidates th { font-size: 0.85em; }
}
"""


def _rgb(hex_colour: str) -> str:
    """'#fdae6b' as a browser writes it in a style, 'rgb(253, 174, 107)' or 'rgba(...)': '253, 174, 107'."""
    return "{}, {}, {}".format(*(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)))


# The token strip scrolls inside its box (CSS above): to the newest token when one is added,
# and to the query when another is picked (from a heatmap, it may be out of the box's view).
FOLLOW_TOKENS = """
(tokens, queryIndex) => {
  const follow = () => {
    const strip = document.querySelector('#token-strip');
    if (!strip) return setTimeout(follow, 200);
    let count = 0;
    new MutationObserver(() => {
      const box = strip.querySelector('.textfield');
      const all = tokens();
      if (box && all.length > count) box.scrollTop = box.scrollHeight;
      else if (box) {
        const query = all[queryIndex(all)];
        const at = query && query.getBoundingClientRect(), shown = box.getBoundingClientRect();
        if (at && (at.top < shown.top || at.bottom > shown.bottom)) {
          box.scrollTop += at.top - shown.top - box.clientHeight / 2;
        }
      }
      count = all.length;
    }).observe(strip, {childList: true, subtree: true, attributes: true, attributeFilter: ['style']});
  };
  follow();
}
"""

# Keys for a demo in front of a class: s steps, u undoes, the left and right arrows move the
# query one token. Not while typing (a text box has the focus) or with a modifier held (the
# browser's own shortcuts), and not while the button is off (a model still loading).
SHORTCUTS = """
(tokens, queryIndex) => {
  const typing = e => e.target.closest('input, textarea, select, [contenteditable=""], [contenteditable="true"]');
  const press = id => { const b = document.getElementById(id); if (b && !b.disabled) b.click(); };
  const moveQuery = by => {
    const all = tokens();
    if (!all.length) return;
    let at = queryIndex(all);
    if (at < 0) at = all.length - 1;  // no token picked: the newest is the query
    const next = Math.min(all.length - 1, Math.max(0, at + by));
    if (next !== at) all[next].click();
  };
  document.addEventListener('keydown', e => {
    const act = {s: () => press('step'), u: () => press('undo'), ArrowLeft: () => moveQuery(-1),
                 ArrowRight: () => moveQuery(1)}[e.key];
    if (!act) return;
    if (typing(e) || e.ctrlKey || e.metaKey || e.altKey || e.repeat) {
      // Left to the text box or the browser; counted, so that a test can see it was decided.
      document.body.dataset.shortcutsLeftAlone = Number(document.body.dataset.shortcutsLeftAlone || 0) + 1;
      return;
    }
    e.preventDefault();
    act();
  });
}
"""

# After Check: the feedback scrolled into sight (only as far as needed), once it has been drawn.
SHOW_FEEDBACK = """
() => { requestAnimationFrame(() => document.getElementById('lesson-feedback')
          ?.scrollIntoView({block: 'nearest', behavior: 'instant'})); return []; }
"""
# Presenter mode on or off: the body's class (CSS above); a resize event redraws the heatmaps
# (explorer/ui/heatmap.js enlarges their text while the class is set).
PRESENTER_SCRIPT = """
(on) => { document.body.classList.toggle('presenter', on); window.dispatchEvent(new Event('resize')); return []; }
"""


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


# Images that take clicks are buttons in Gradio, named by nothing (an image without alt text):
# what a screen reader says for each.
BUTTON_NAMES = {
    "all-heads": "Every head of this layer: click one to open it",
    "head-roles": "Every head of the model by role: click one to open it",
}

# Names for a screen reader that Gradio's components leave out or get wrong, set again whenever
# the page changes (a rAF after the last change): Plotly's figures get their title and a
# heatmap's strongest cell (the attention heatmaps describe themselves, explorer/ui/heatmap.js);
# images that take clicks and the file drop zone get a name that matches what they show.
LABEL_FIGURES = """
() => {
  const kinds = {f8: Float64Array, f4: Float32Array};
  const grid = z => {  // {values, cols}: z as the server sends it (a typed array in base64) or as rows
    if (!z) return null;
    if (!z.bdata) return {values: Array.from(z).flatMap(r => Array.from(r)), cols: z[0] ? z[0].length : 0};
    if (!kinds[z.dtype]) return null;
    const text = atob(z.bdata), bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return {values: new kinds[z.dtype](bytes.buffer), cols: +String(z.shape).split(',')[1]};
  };
  const strongest = trace => {
    const g = grid(trace.z);
    if (!g || !g.cols) return '';
    let best = null;
    g.values.forEach((v, i) => {
      if (v !== null && !Number.isNaN(v) && (!best || v > best.v)) best = {v, r: Math.floor(i / g.cols), c: i % g.cols};
    });
    if (!best) return '';
    const x = trace.x ? trace.x[best.c] : best.c, y = trace.y ? trace.y[best.r] : best.r;
    return ` Strongest cell: ${y}, ${x} (${(+best.v).toFixed(2)}).`;
  };
  const names = BUTTON_NAMES;
  const label = () => {
    for (const [id, name] of Object.entries(names)) {
      const button = document.querySelector(`#${id} button:not([aria-label])`);
      if (button) button.setAttribute('aria-label', name);
    }
    // An empty gr.Plot is a div named "empty value" with no role (not allowed a name): an image.
    for (const empty of document.querySelectorAll('.empty[aria-label]:not([role])')) empty.setAttribute('role', 'img');
    // The drop zone is named "Click to upload or drop files" but shows other words: its own.
    for (const zone of document.querySelectorAll('button.upload-container')) {
      const shown = zone.textContent.replace(/\\s+/g, ' ').trim();
      if (shown && zone.getAttribute('aria-label') !== shown) zone.setAttribute('aria-label', shown);
    }
    for (const g of document.querySelectorAll('.js-plotly-plot')) {
      if (!g.data || g._labelled === g.data) continue;
      const title = (g.layout && g.layout.title && (g.layout.title.text || g.layout.title)) || 'A chart';
      const heat = g.data.find(t => t.type === 'heatmap');
      g.setAttribute('role', 'figure');
      g.setAttribute('aria-label', String(title).replace(/<br>/g, ' ') + (heat ? strongest(heat) : ''));
      g._labelled = g.data;
    }
  };
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; label(); });
  }).observe(document.body, {childList: true, subtree: true});
  label();
}
"""

LABEL_FIGURES = LABEL_FIGURES.replace("BUTTON_NAMES", json.dumps(BUTTON_NAMES))

# What the page runs once it has loaded (gr.Blocks.launch's js): the strip's tokens, and which
# one is the query (the strip gives it the query's colour; -1 when none is picked), for both.
PAGE_SCRIPT = f"""
() => {{
  const tokens = () => Array.from(document.querySelectorAll('#token-strip .token'));
  const queryIndex = all => all.findIndex(t => t.style.backgroundColor.includes('{_rgb(views.STRIP_COLORS["query"])}'));
  ({FOLLOW_TOKENS.strip()})(tokens, queryIndex);
  ({SHORTCUTS.strip()})(tokens, queryIndex);
  ({LABEL_FIGURES.strip()})();
}}
"""


@dataclass
class Page:
    """Every component of the page that a callback reads or changes, by name."""

    state: gr.State
    kept: gr.BrowserState
    # lessons
    lessons_done: gr.BrowserState
    lessons_panel: gr.Accordion
    lesson: gr.Dropdown
    lesson_text: gr.Markdown
    lesson_answer: gr.Radio
    lesson_check: gr.Button
    lesson_next: gr.Button
    lesson_back: gr.Button
    lesson_feedback: gr.Markdown
    # the model and the text
    model: gr.Dropdown
    custom_model: gr.Textbox
    model_info: gr.Markdown
    text: gr.Textbox
    decoder_examples: gr.Column
    translator_examples: gr.Column
    chat: gr.Checkbox
    # generation
    step_button: gr.Button
    generate_button: gr.Button
    stop_button: gr.Button
    undo_button: gr.Button
    reset_button: gr.Button
    max_new: gr.Slider
    use_cache: gr.Checkbox
    temperature: gr.Slider
    top_k: gr.Slider
    top_p: gr.Slider
    seed: gr.Number
    # save and share
    image_format: gr.Radio
    presenter: gr.Checkbox
    colour_scale: gr.Radio
    save_button: gr.Button
    saved_file: gr.File
    export_html_button: gr.Button
    export_json_button: gr.Button
    exported_file: gr.File
    open_file: gr.File
    link_button: gr.Button
    link_box: gr.Textbox
    # the session
    status: gr.Markdown
    source: gr.HighlightedText
    source_note: gr.Markdown
    strip: gr.HighlightedText
    candidates: gr.Dataframe
    layer: gr.Slider
    head: gr.Dropdown
    # the tabs and their figures
    tabs: gr.Tabs
    self_tab: gr.Tab
    self_plot: gr.HTML
    heads: gr.Image
    cross_tab: gr.Tab
    cross_plot: gr.HTML
    encoder_plot: gr.HTML
    layers_tab: gr.Tab
    layers_plot: gr.Plot
    cache_tab: gr.Tab
    timing_plot: gr.Plot
    compare_button: gr.Button
    cache_info: gr.Markdown
    lens_tab: gr.Tab
    lens_plot: gr.Plot
    roles_tab: gr.Tab
    roles_image: gr.Image
    roles_info: gr.Markdown
    role_head_plot: gr.Plot
    test_head_button: gr.Button
    # switching heads off
    ablation_tab: gr.Tab
    switched_off: gr.Textbox
    ablation_method: gr.Radio
    add_head_button: gr.Button
    add_attention_button: gr.Button
    add_mlp_button: gr.Button
    run_ablation_button: gr.Button
    clear_ablation_button: gr.Button
    ablation_info: gr.Markdown
    ablation_plot: gr.Plot
    # activation patching
    patching_tab: gr.Tab
    patch_clean: gr.Textbox
    patch_corrupted: gr.Textbox
    patch_answer: gr.Textbox
    patch_other: gr.Textbox
    patch_button: gr.Button
    patching_info: gr.Markdown
    patching_plot: gr.Plot
    patching_heads_plot: gr.Plot
    patching_decoder_plot: gr.Plot
    # attribution: why this token
    attribution_tab: gr.Tab
    attribution_target: gr.Dropdown
    attribution_method: gr.Radio
    attribute_button: gr.Button
    attribution_info: gr.Markdown
    attribution_strip: gr.HTML
    attribution_plot: gr.Plot
    alignment_plot: gr.Plot
    # two runs compared
    compare_tab: gr.Tab
    compare_kind: gr.Radio
    compare_text: gr.Textbox
    compare_temperature: gr.Slider
    compare_seed: gr.Number
    compare_runs_button: gr.Button
    compare_info: gr.Markdown
    compare_tokens: gr.HTML
    compare_plot: gr.Plot
    compare_attention_plot: gr.Plot
    proof_tab: gr.Tab
    parallel_button: gr.Button
    sandbox_button: gr.Button
    parallel_info: gr.Markdown
    sandbox_info: gr.Markdown
    sandbox_plot: gr.Plot
    architecture_tab: gr.Tab
    architecture_info: gr.Markdown
    cost_info: gr.Markdown
    bias_plot: gr.Plot

    def pick(self, *names: str) -> list:
        """The components with these names, in order (an event's inputs or outputs)."""
        return [getattr(self, name) for name in names]


# The settings a new session is made from, in the order the session callbacks take them.
SETTINGS = ("text", "chat", "use_cache", "temperature", "top_k", "top_p", "seed")
SESSION_BUTTONS = ("step_button", "generate_button", "undo_button", "reset_button")
# The tabs, by the name ExplorerState.tab gives them.
TABS = {
    "self": "self_tab", "cross": "cross_tab", "layers": "layers_tab", "cache": "cache_tab", "lens": "lens_tab",
    "roles": "roles_tab", "ablation": "ablation_tab", "patching": "patching_tab", "attribution": "attribution_tab",
    "compare": "compare_tab", "proof": "proof_tab", "architecture": "architecture_tab",
}  # fmt: skip


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
    made: dict = {
        "state": gr.State(None),
        # This tab's session as the browser keeps it (localStorage), so that a reload or a server
        # restart (a Space sleeps and wakes) brings it back: the tokens are replayed through the model.
        "kept": gr.BrowserState(None, storage_key=BROWSER_KEY, secret=browser_secret),
        "lessons_done": gr.BrowserState({}, storage_key=LESSONS_KEY, secret=browser_secret),
    }
    gr.Markdown(texts.INTRO, elem_id="intro")
    with gr.Row(equal_height=False, elem_id="top-row"):
        with gr.Column(scale=3, min_width=240):  # room for the longest model name and its kind
            made |= model_choice()
        with gr.Column(scale=3, min_width=300):
            made["text"] = gr.Textbox(
                label="Prompt", value=os.environ.get(TEXT_ENV) or DECODER_EXAMPLES[0], lines=2, max_lines=12,
                elem_id="prompt",
            )  # fmt: skip
        with gr.Column(scale=3, min_width=280):
            made |= buttons()
    with gr.Row(equal_height=False, elem_id="workbench"):
        with gr.Column(scale=2, min_width=300):
            made |= lessons_panel()
            made |= session_panel()
            made |= settings(made["text"])
        with gr.Column(scale=3, min_width=300):
            made |= view_choice()
            # Tabs that do not fit the width wrap onto another row (a "…" menu would hide them).
            with gr.Tabs(elem_id="views", overflow_behavior="wrap") as tabs:
                made["tabs"] = tabs
                made |= attention_tabs()
                made |= model_tabs()
    return Page(**made)


def lessons_panel() -> dict:
    """Guided lessons (explorer.lessons): closed until a lesson is chosen or linked to."""
    made = {}
    with gr.Accordion("Lessons", open=False, elem_id="lessons") as made["lessons_panel"]:
        made["lesson"] = gr.Dropdown(
            choices=[(f"{lesson.number}. {lesson.title}", lesson.number) for lesson in LESSONS], value=None,
            label="Lesson", elem_id="lesson",
        )  # fmt: skip
        made["lesson_text"] = gr.Markdown(texts.LESSONS, elem_id="lesson-text")
        made["lesson_answer"] = gr.Radio([], label="Your answer", elem_id="lesson-answer")
        with gr.Row():
            made["lesson_check"] = gr.Button("Check", variant="primary", elem_id="lesson-check", size="sm")
            made["lesson_next"] = gr.Button("Next step", elem_id="lesson-next", size="sm")
            made["lesson_back"] = gr.Button("Back to your text", elem_id="lesson-back", size="sm", visible=False)
        made["lesson_feedback"] = gr.Markdown(elem_id="lesson-feedback")
    return made


def model_choice() -> dict:
    return {
        "model": gr.Dropdown(
            choices=model_store.dropdown_choices(),
            value=model_store.default_model_name(),
            label="Model",
            elem_id="model",
        )
    }


def settings(text: gr.Textbox) -> dict:
    """Below the candidates: the examples, the generation settings, save and share, the display,
    another model (where the operator allows it) and the model's description."""
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
    with gr.Accordion("Save and share", open=False, elem_id="share"):
        made |= save_and_share()
    with gr.Accordion("Display", open=False, elem_id="display"):
        made |= display()
    made["custom_model"] = gr.Textbox(
        label="Another model (local folder or Hub id)", visible=model_store.custom_models_allowed(),
        elem_id="custom-model", placeholder="owner/name or a folder the operator allows",
    )  # fmt: skip
    made["model_info"] = gr.Markdown(elem_classes="explain", elem_id="model-info")
    return made


def buttons() -> dict:
    # Step, Generate, Undo, Reset are off until the page's first model has loaded (a click then
    # would find no session).
    with gr.Row():
        made = {
            "step_button": gr.Button("Step", variant="primary", elem_id="step", min_width=70, interactive=False),
            "generate_button": gr.Button("Generate", elem_id="generate", min_width=70, interactive=False),
            "stop_button": gr.Button("Stop", variant="stop", elem_id="stop", min_width=70),
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


def save_and_share() -> dict:
    gr.Markdown(texts.SAVE_AND_SHARE, elem_classes="explain")
    return {
        "image_format": gr.Radio(["png", "svg"], value="png", label="Figures download as", elem_id="image-format"),
        "save_button": gr.Button("Save session", elem_id="save-session"),
        "saved_file": gr.File(label="Saved session", interactive=False, elem_id="saved-file"),
        "open_file": gr.File(
            label="Open a saved session", file_types=[".npz"], type="filepath", elem_id="open-session"
        ),
        "link_button": gr.Button("Make a link to this step", elem_id="make-link"),
        "link_box": gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="share-link"),
        "export_html_button": gr.Button("Export as a web page", elem_id="export-html"),
        "export_json_button": gr.Button("Export as JSON", elem_id="export-json"),
        "exported_file": gr.File(label="Exported session", interactive=False, elem_id="exported-file"),
    }


def session_panel() -> dict:
    """The right column: the status line, the tokens, the next-token candidates."""
    made = {
        "status": gr.Markdown(texts.LOADING, elem_id="status"),
        "source": gr.HighlightedText(
            label="Source sentence tokens", color_map={"source": "#fee6ce"}, show_legend=False,
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
        label="Next-token candidates", max_height=228,  # it scrolls: the heatmap beside it stays in sight
        column_widths=["9%", "29%", "32%", "30%"],  # room for the longest bar (20 blocks)
    )  # fmt: skip
    gr.Markdown(texts.CANDIDATES, elem_classes="explain")
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


def figure_beside_text(plot: gr.Component, explanation: str) -> gr.Component:
    """A figure with its explanation under it (the views' column has room for the figure only)."""
    plot.render()
    gr.Markdown(explanation, elem_classes="explain")
    return plot


def attention_tabs() -> dict:
    """Self-attention (with every head of the layer), cross-attention, every layer."""
    made = {}
    with gr.Tab("Self-attention", id="self", elem_id="tab-self") as made["self_tab"]:
        made["self_plot"] = figure_beside_text(
            attention_heatmap_view("Self-attention heatmap", "self-attention", selects_query=True), texts.SELF_ATTENTION
        )
        gr.Markdown(texts.ALL_HEADS, elem_classes="explain")
        # No label badge: it would cover the first head's name (the text above says what this is).
        made["heads"] = gr.Image(
            label="All heads of this layer (click one to open it)", show_label=False, type="pil", format="png",
            interactive=False, elem_id="all-heads", buttons=[],
        )  # fmt: skip
    with gr.Tab("Cross-attention", id="cross", visible=False, elem_id="tab-cross") as made["cross_tab"]:
        cross = attention_heatmap_view("Cross-attention heatmap", "cross-attention", selects_query=True)
        made["cross_plot"] = figure_beside_text(cross, texts.CROSS_ATTENTION)
        encoder = attention_heatmap_view("Encoder self-attention", "encoder-attention", selects_query=False)
        made["encoder_plot"] = figure_beside_text(encoder, texts.ENCODER_ATTENTION)
    with gr.Tab("Every layer", id="layers", elem_id="tab-layers") as made["layers_tab"]:
        gr.Markdown(texts.EVERY_LAYER, elem_classes="explain")
        made["layers_plot"] = gr.Plot(label="The selected token in every layer", elem_id="every-layer")
    return made


def model_tabs() -> dict:
    """The KV cache, the logit lens, head roles, the causal proof, the architecture."""
    made = {}
    with gr.Tab("KV cache", id="cache", elem_id="tab-cache") as made["cache_tab"], gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            made["timing_plot"] = gr.Plot(label="Milliseconds per step", elem_id="timing")
            made["compare_button"] = gr.Button("Compare cache on and off", elem_id="compare")
            made["cache_info"] = gr.Markdown(elem_id="cache-info")
        with gr.Column(scale=2, min_width=240):
            gr.Markdown(texts.KV_CACHE, elem_classes="explain")
    with gr.Tab("Logit lens", id="lens", elem_id="tab-lens") as made["lens_tab"]:
        made["lens_plot"] = figure_beside_text(
            gr.Plot(label="Logit lens", elem_id="logit-lens", render=False), texts.LOGIT_LENS
        )
    with gr.Tab("Head roles", id="roles", elem_id="tab-roles") as made["roles_tab"]:
        made |= head_roles()
    with gr.Tab("Switch heads off", id="ablation", elem_id="tab-ablation") as made["ablation_tab"]:
        made |= switch_off()
    with gr.Tab("Patching", id="patching", elem_id="tab-patching") as made["patching_tab"]:
        made |= patching()
    with gr.Tab("Why this token", id="attribution", elem_id="tab-attribution") as made["attribution_tab"]:
        made |= why_this_token()
    with gr.Tab("Compare runs", id="compare", elem_id="tab-compare") as made["compare_tab"]:
        made |= compare_runs()
    with gr.Tab("Causal proof", id="proof", elem_id="tab-proof") as made["proof_tab"]:
        gr.Markdown(texts.CAUSAL_PROOF, elem_classes="explain")
        with gr.Row():
            made["parallel_button"] = gr.Button("Run the parallel check", elem_id="parallel-check")
            made["sandbox_button"] = gr.Button("Remove the mask for one pass (sandbox)", elem_id="sandbox")
        made["parallel_info"] = gr.Markdown(elem_id="parallel-info")
        made["sandbox_info"] = gr.Markdown(elem_id="sandbox-info")
        made["sandbox_plot"] = gr.Plot(label="Attention without the mask", elem_id="sandbox-attention")
    with gr.Tab("Architecture and cost", id="architecture", elem_id="tab-architecture") as made["architecture_tab"]:
        # Side by side where the views' column is wide (1920 px), one above the other at 1280.
        with gr.Row(equal_height=False):
            with gr.Column(min_width=420):
                made["architecture_info"] = gr.Markdown(elem_id="architecture")
            with gr.Column(min_width=420):
                made["cost_info"] = gr.Markdown(elem_id="step-cost")
        made["bias_plot"] = gr.Plot(
            label="Relative position bias (T5): the selected head bold; its heatmap is in Self-attention",
            elem_id="position-bias", visible=False,
        )  # fmt: skip
        gr.Markdown(texts.ARCHITECTURE, elem_classes="explain")
    return made


def head_roles() -> dict:
    made = {}
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            # No label badge: it would cover the first layers and the head numbers.
            made["roles_image"] = gr.Image(
                label="Every head, by role (click one to open it)", show_label=False, type="pil", format="png",
                interactive=False, elem_id="head-roles", buttons=[],
            )  # fmt: skip
        with gr.Column(scale=2, min_width=280):
            gr.Markdown(texts.HEAD_ROLES, elem_classes="explain")
            made["roles_info"] = gr.Markdown(elem_id="roles-info")
    made["test_head_button"] = gr.Button("Test it: switch the selected head off", elem_id="test-head")
    made["role_head_plot"] = gr.Plot(label="The selected head", elem_id="role-head")
    return made


@contextlib.contextmanager
def beside_explanation(text: str):
    """A tab's controls (the ``with`` block) on the left, its explanation on the right."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            yield
        with gr.Column(scale=2, min_width=240):
            gr.Markdown(text, elem_classes="explain")


def patching() -> dict:
    made = {}
    with beside_explanation(texts.PATCHING):
        made["patch_clean"] = gr.Textbox(label="Clean text", elem_id="patch-clean")
        made["patch_corrupted"] = gr.Textbox(label="Corrupted text (as many tokens)", elem_id="patch-corrupted")
        with gr.Row():
            made["patch_answer"] = gr.Textbox(
                label="Clean answer (one token)", placeholder="blank: the clean text's next token",
                elem_id="patch-answer",
            )  # fmt: skip
            made["patch_other"] = gr.Textbox(
                label="Other answer (one token)", placeholder="blank: the corrupted text's next token",
                elem_id="patch-other",
            )  # fmt: skip
        made["patch_button"] = gr.Button("Run the patching sweep", variant="primary", elem_id="run-patching")
    made["patching_info"] = gr.Markdown(elem_id="patching-info")
    made["patching_plot"] = gr.Plot(label="Patching the residual stream", elem_id="patching-residual")
    made["patching_heads_plot"] = gr.Plot(label="Patching each head's output", elem_id="patching-heads")
    made["patching_decoder_plot"] = gr.Plot(
        label="Patching the decoder's residual stream", elem_id="patching-decoder", visible=False
    )
    return made


def why_this_token() -> dict:
    made = {}
    with beside_explanation(texts.ATTRIBUTION):
        made["attribution_target"] = gr.Dropdown(
            label="Explain (the selected token, or another candidate of its step)", choices=[],
            elem_id="attribution-target",
        )  # fmt: skip
        made["attribution_method"] = gr.Radio(
            METHOD_CHOICES, value="integrated-gradients", label="Method (colours the strip)",
            elem_id="attribution-method",
        )  # fmt: skip
        made["attribute_button"] = gr.Button("Explain it", variant="primary", elem_id="attribute")
    made["attribution_info"] = gr.Markdown(elem_id="attribution-info")
    made["attribution_strip"] = gr.HTML(elem_id="attribution-strip")
    made["attribution_plot"] = gr.Plot(label="Attribution per token", elem_id="attribution-chart")
    made["alignment_plot"] = gr.Plot(label="Cross-attention at this step", elem_id="alignment", visible=False)
    return made


def compare_runs() -> dict:
    made = {}
    with beside_explanation(texts.COMPARE):
        made["compare_kind"] = gr.Radio(
            [(label, kind) for kind, label in BRANCHES.items()], value="switched-off", label="Run B is run A",
            elem_id="compare-kind",
        )  # fmt: skip
        made["compare_text"] = gr.Textbox(label="Run B's text (for “another text”)", elem_id="compare-text")
        with gr.Row():
            made["compare_temperature"] = gr.Slider(
                0.0, 2.0, value=1.0, step=0.05, label="Run B's temperature (for “other sampling”)",
                elem_id="compare-temperature",
            )  # fmt: skip
            made["compare_seed"] = gr.Number(
                value=1,
                precision=0,
                minimum=SEED_RANGE[0],
                maximum=SEED_RANGE[1],
                label="Run B's seed",
                elem_id="compare-seed",
            )
        made["compare_runs_button"] = gr.Button("Compare", variant="primary", elem_id="compare-runs")
    made["compare_info"] = gr.Markdown(elem_id="compare-info")
    made["compare_tokens"] = gr.HTML(elem_id="compare-tokens")
    made["compare_plot"] = gr.Plot(label="Step by step", elem_id="compare-chart")
    made["compare_attention_plot"] = gr.Plot(label="Attention difference", elem_id="compare-attention")
    return made


def switch_off() -> dict:
    made = {}
    with beside_explanation(texts.SWITCH_OFF):
        made["switched_off"] = gr.Textbox(
            label="Switched off (layer.head, layer.attention, layer.mlp)", placeholder="e.g. 17.3, 18.6",
            elem_id="switched-off",
        )  # fmt: skip
        with gr.Row():
            made["add_head_button"] = gr.Button("Add the selected head", elem_id="add-head", size="sm")
            made["add_attention_button"] = gr.Button("Add this layer's attention", elem_id="add-attention", size="sm")
            made["add_mlp_button"] = gr.Button("Add this layer's feed-forward", elem_id="add-mlp", size="sm")
        made["ablation_method"] = gr.Radio(["zero", "mean"], value="zero", label="Switch off by", elem_id="method")
        with gr.Row():
            made["run_ablation_button"] = gr.Button(
                "Run with these switched off", variant="primary", elem_id="run-ablation"
            )
            made["clear_ablation_button"] = gr.Button("Clear", elem_id="clear-ablation")
    made["ablation_info"] = gr.Markdown(elem_id="ablation-info")
    made["ablation_plot"] = gr.Plot(label="Each token's probability, switched off", elem_id="ablation-chart")
    return made
