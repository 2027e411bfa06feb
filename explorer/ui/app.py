"""The Gradio Blocks: layout, and thin callbacks that ask the session and render the views.

Each callback returns a dict of only the components it changed. Per-user state lives in a
``gr.State`` holding an ``ExplorerState``; models are shared (see model_store).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import gradio as gr
from gradio.components.plot import PlotData

from explorer.analysis import proof, snapshot
from explorer.loading import ModelLoadError
from explorer.model import ContextWindowError
from explorer.session import GenerationSession, InputError
from explorer.ui import insights, model_store, texts, views
from explorer.ui.views import MEAN, ExplorerState
from explorer.viz import head_at, role_at
from explorer.viz.figure_json import figure_json

NO_MODEL = "No model is loaded yet: choose one from the Model list."
BROWSER_KEY = "decoder-explorer-session"
SECRET_ENV = "DECODER_EXPLORER_BROWSER_SECRET"


def browser_secret() -> str:
    """The key the kept session is encrypted with in the browser. It must outlive a restart
    (else a woken Space could not read what browsers kept); what it protects is only the user's
    own text and tokens, in the user's own browser. An operator may set their own."""
    return os.environ.get(SECRET_ENV) or "decoder-explorer: a session kept in your own browser"


# The project's own errors become warnings; anything else is a bug and fails loudly (log, tests).
USER_ERRORS = (InputError, ModelLoadError, ContextWindowError)
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


def example_picker(examples: list[str], label: str, text: gr.Textbox) -> None:
    """Clickable examples that set only the text box's value.

    (gr.Examples also sends the box's first settings back with the value, which turned the
    translator's "Source sentence" label back into "Prompt".)
    """
    picker = gr.Dataset(components=["textbox"], samples=[[example] for example in examples], label=label)
    picker.click(lambda sample: sample[0], inputs=picker, outputs=text, queue=False, show_progress="hidden")


CSS = """
#token-strip .textfield { line-height: 2.1; max-height: 10.5em; overflow-y: auto; }  /* 5 lines, then it scrolls */
#candidates table { font-family: ui-monospace, monospace; }
.explain { font-size: 0.92em; color: var(--body-text-color-subdued); }
@media (max-width: 640px) {
  .gradio-container { padding: 4px !important; }
  /* Gradio hides a slider's end labels on a phone: the Layer slider keeps its maximum in sight. */
  #layer .min_value, #layer .max_value { display: inline !important; }
  /* The probability bars fit their column (20 block characters, drawn narrower). */
  #candidates td:last-child { font-size: 0.6em; letter-spacing: -0.05em; white-space: nowrap; }
  #candidates th { font-size: 0.85em; }
}
"""


# The token strip scrolls inside its box (CSS above) and follows the newest token: when tokens
# are added, its box scrolls to the end (a click on a token, which adds none, leaves it alone).
FOLLOW_NEWEST_TOKEN = """
() => {
  const follow = () => {
    const strip = document.querySelector('#token-strip');
    if (!strip) return setTimeout(follow, 200);
    let count = 0;
    new MutationObserver(() => {
      const box = strip.querySelector('.textfield');
      const n = strip.querySelectorAll('.token').length;
      if (box && n > count) box.scrollTop = box.scrollHeight;
      count = n;
    }).observe(strip, {childList: true, subtree: true});
  };
  follow();
}
"""

# Generate streams faster than a browser draws: a step takes ~0.1 s here, redrawing the figures
# ~0.25 s. Were every step's figures sent, the page would fall ever further behind (30 s after
# 250 steps) and a click on Stop would wait behind that backlog. So the token strip and status
# follow every step, and the figures and candidates at most this often, and after the last step.
FIGURES_EVERY_S = 0.5

# Each open browser tab's state, by Gradio's session hash, so that closing the tab can free its
# session at once (Gradio itself keeps a closed tab's state for an hour). Weak: Gradio owns them.
open_states: weakref.WeakValueDictionary[str, ExplorerState] = weakref.WeakValueDictionary()
log = logging.getLogger("decoder_explorer")
# "Save session" writes here (Gradio serves a copy from its cache); a tab's file goes when it closes.
SAVED_SESSIONS = Path(tempfile.gettempdir()) / f"decoder-explorer-{os.getpid()}"


def saved_session_folder(request: gr.Request) -> Path:
    """This tab's folder for its saved session. The session hash comes from the browser, so it
    is hashed rather than used as a path (it could hold "../")."""
    return SAVED_SESSIONS / hashlib.sha256(request.session_hash.encode("utf-8", "replace")).hexdigest()[:32]


def release_closed_tab(request: gr.Request) -> None:
    st = open_states.pop(request.session_hash, None)
    shutil.rmtree(saved_session_folder(request), ignore_errors=True)
    if st is not None:
        with st.lock:  # after the step that may be running
            if st.session is not None:
                st.release()
                log.info("released the session of a closed browser tab")


def plot(figure: dict | None, image_format: str = "png", name: str = "figure") -> PlotData | None:
    """A figure dict straight to gr.Plot's payload (given a go.Figure, Gradio would validate it first).

    The figure's config sets what its camera button (in the bar shown on hover) downloads.
    """
    if figure is None:
        return None
    download = {"format": image_format, "filename": f"decoder-explorer-{name}"}
    config = {"displaylogo": False, "toImageButtonOptions": download}
    return PlotData(type="plotly", plot=figure_json({**figure, "config": config}))


def tab_event(handler: Callable) -> Callable:
    """Run one event of a tab: alone (the tab's lock), and with a user's mistake shown as a
    warning that changes nothing on the page."""

    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        st = next((a for a in args if isinstance(a, ExplorerState)), None)
        with st.lock if st is not None else contextlib.nullcontext():
            try:
                return handler(*args, **kwargs)
            except USER_ERRORS as error:
                gr.Warning(str(error))
                return gr.skip()

    return wrapper


def build_demo() -> gr.Blocks:
    # Gradio keeps every file it serves (a step's all-heads image, a saved session) in its cache:
    # files older than an hour are deleted, checked every half hour, so the disk does not fill.
    with gr.Blocks(title="Decoder Explorer", delete_cache=(1800, 3600)) as demo:
        state = gr.State(None)
        # This tab's session as the browser keeps it (localStorage), so that a reload or a server
        # restart (a Space sleeps and wakes) brings it back: the tokens are replayed through the model.
        kept = gr.BrowserState(None, storage_key=BROWSER_KEY, secret=browser_secret())
        gr.Markdown(texts.INTRO)
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=300):
                model = gr.Dropdown(
                    choices=model_store.dropdown_choices(), value=model_store.default_model_name(),
                    label="Model", elem_id="model",
                )  # fmt: skip
                custom_model = gr.Textbox(
                    label="Another model (local folder or Hub id)", visible=model_store.custom_models_allowed(),
                    elem_id="custom-model", placeholder="owner/name or a folder the operator allows",
                )  # fmt: skip
                model_info = gr.Markdown(elem_classes="explain", elem_id="model-info")
                text = gr.Textbox(
                    label="Prompt", value=DECODER_EXAMPLES[0], lines=3, max_lines=12, elem_id="prompt"
                )  # fmt: skip
                with gr.Column(visible=True) as decoder_examples:
                    example_picker(DECODER_EXAMPLES, "Examples", text)
                with gr.Column(visible=False) as translator_examples:
                    example_picker(TRANSLATOR_EXAMPLES, "Example sentences", text)
                chat = gr.Checkbox(label="Use the chat template", value=False, elem_id="chat")
                with gr.Row():
                    # Off until the page's first model has loaded (a click then would find no session).
                    step_button = gr.Button("Step", variant="primary", elem_id="step", min_width=70, interactive=False)
                    generate_button = gr.Button("Generate", elem_id="generate", min_width=70, interactive=False)
                    stop_button = gr.Button("Stop", variant="stop", elem_id="stop", min_width=70)
                with gr.Row():
                    undo_button = gr.Button("Undo", elem_id="undo", min_width=70, interactive=False)
                    reset_button = gr.Button("Reset", elem_id="reset", min_width=70, interactive=False)
                max_new = gr.Slider(
                    1, 256, value=40, step=1, label="Generate at most this many tokens", elem_id="max-new"
                )
                use_cache = gr.Checkbox(label="KV cache", value=True, elem_id="kv-cache")
                with gr.Accordion("Sampling", open=False):
                    temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)")
                    top_k = gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)")
                    top_p = gr.Slider(0.05, 1, value=1, step=0.05, label="Top-p")
                    seed = gr.Number(value=0, precision=0, label="Seed")
                with gr.Accordion("Save and share", open=False, elem_id="share"):
                    gr.Markdown(texts.SAVE_AND_SHARE, elem_classes="explain")
                    image_format = gr.Radio(
                        ["png", "svg"], value="png", label="Figures download as", elem_id="image-format"
                    )  # fmt: skip
                    save_button = gr.Button("Save session", elem_id="save-session")
                    saved_file = gr.File(label="Saved session", interactive=False, elem_id="saved-file")
                    open_file = gr.File(
                        label="Open a saved session", file_types=[".npz"], type="filepath", elem_id="open-session"
                    )  # fmt: skip
                    link_button = gr.Button("Make a link to this step", elem_id="make-link")
                    link_box = gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="share-link")
            with gr.Column(scale=3, min_width=300):
                status = gr.Markdown(texts.LOADING, elem_id="status")
                source = gr.HighlightedText(
                    label="Source sentence tokens", color_map={"source": "#fee6ce"}, show_legend=False,
                    show_inline_category=False, visible=False, elem_id="source-strip",
                )  # fmt: skip
                source_note = gr.Markdown(visible=False, elem_id="source-note")
                strip = gr.HighlightedText(
                    label="Tokens (click one to inspect it as the query)", color_map=views.strip_colors(False),
                    show_legend=True, show_inline_category=False, elem_id="token-strip",
                )  # fmt: skip
                gr.Markdown(texts.CANDIDATES, elem_classes="explain")
                candidates = gr.Dataframe(
                    headers=["", "candidate", "probability", ""], datatype="str", interactive=False,
                    elem_id="candidates", label="Next-token candidates", max_height=420,
                    column_widths=["9%", "29%", "32%", "30%"],  # room for the longest bar (20 blocks)
                )  # fmt: skip
        with gr.Row():
            # Side by side where there is room, one above the other on a phone (each needs ~260 px).
            layer = gr.Slider(0, 1, value=0, step=1, label="Layer", elem_id="layer", min_width=260)
            head = gr.Dropdown(
                choices=[("average of all heads", MEAN)], value=MEAN, label="Head", elem_id="head", min_width=260
            )  # fmt: skip
        with gr.Tabs(elem_id="views") as tabs:
            with gr.Tab("Self-attention", id="self", elem_id="tab-self") as self_tab:
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=300):
                        self_plot = gr.Plot(label="Self-attention heatmap", elem_id="self-attention")
                    with gr.Column(scale=1, min_width=240):
                        gr.Markdown(texts.SELF_ATTENTION, elem_classes="explain")
                gr.Markdown(texts.ALL_HEADS, elem_classes="explain")
                # No label badge: it would cover the first head's name (the text above says what this is).
                heads = gr.Image(
                    label="All heads of this layer (click one to open it)", show_label=False, type="pil",
                    format="png", interactive=False, elem_id="all-heads", buttons=[],
                )  # fmt: skip
            with gr.Tab("Cross-attention", id="cross", visible=False, elem_id="tab-cross") as cross_tab:
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=300):
                        cross_plot = gr.Plot(label="Cross-attention heatmap", elem_id="cross-attention")
                    with gr.Column(scale=1, min_width=240):
                        gr.Markdown(texts.CROSS_ATTENTION, elem_classes="explain")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=300):
                        encoder_plot = gr.Plot(label="Encoder self-attention", elem_id="encoder-attention")
                    with gr.Column(scale=1, min_width=240):
                        gr.Markdown(texts.ENCODER_ATTENTION, elem_classes="explain")
            with gr.Tab("Every layer", id="layers", elem_id="tab-layers") as layers_tab:
                gr.Markdown(texts.EVERY_LAYER, elem_classes="explain")
                layers_plot = gr.Plot(label="The selected token in every layer", elem_id="every-layer")
            with gr.Tab("KV cache", id="cache", elem_id="tab-cache") as cache_tab, gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=300):
                    timing_plot = gr.Plot(label="Milliseconds per step", elem_id="timing")
                    compare_button = gr.Button("Compare cache on and off", elem_id="compare")
                    cache_info = gr.Markdown(elem_id="cache-info")
                with gr.Column(scale=2, min_width=240):
                    gr.Markdown(texts.KV_CACHE, elem_classes="explain")
            with gr.Tab("Logit lens", id="lens", elem_id="tab-lens") as lens_tab, gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=300):
                    lens_plot = gr.Plot(label="Logit lens", elem_id="logit-lens")
                with gr.Column(scale=1, min_width=240):
                    gr.Markdown(texts.LOGIT_LENS, elem_classes="explain")
            with gr.Tab("Head roles", id="roles", elem_id="tab-roles") as roles_tab:
                with gr.Row(equal_height=False):
                    with gr.Column(scale=2, min_width=280):
                        # No label badge: it would cover the first layers and the head numbers.
                        roles_image = gr.Image(
                            label="Every head, by role (click one to open it)", show_label=False, type="pil",
                            format="png", interactive=False, elem_id="head-roles", buttons=[],
                        )  # fmt: skip
                    with gr.Column(scale=2, min_width=280):
                        gr.Markdown(texts.HEAD_ROLES, elem_classes="explain")
                        roles_info = gr.Markdown(elem_id="roles-info")
                role_head_plot = gr.Plot(label="The selected head", elem_id="role-head")
            with gr.Tab("Causal proof", id="proof", elem_id="tab-proof") as proof_tab:
                gr.Markdown(texts.CAUSAL_PROOF, elem_classes="explain")
                with gr.Row():
                    parallel_button = gr.Button("Run the parallel check", elem_id="parallel-check")
                    sandbox_button = gr.Button("Remove the mask for one pass (sandbox)", elem_id="sandbox")
                parallel_info = gr.Markdown(elem_id="parallel-info")
                sandbox_info = gr.Markdown(elem_id="sandbox-info")
                sandbox_plot = gr.Plot(label="Attention without the mask", elem_id="sandbox-attention")
            with gr.Tab("Architecture and cost", id="architecture", elem_id="tab-architecture") as architecture_tab:
                with gr.Row(equal_height=False):
                    with gr.Column(min_width=300):
                        architecture_info = gr.Markdown(elem_id="architecture")
                    with gr.Column(min_width=300):
                        cost_info = gr.Markdown(elem_id="step-cost")
                gr.Markdown(texts.ARCHITECTURE, elem_classes="explain")

        session_buttons = (step_button, generate_button, undo_button, reset_button)

        # ------------------------------------------------------------ rendering
        figures = {
            self_plot, heads, cross_plot, encoder_plot, layers_plot, timing_plot, lens_plot, roles_image, roles_info,
            role_head_plot, parallel_info, sandbox_info, sandbox_plot, architecture_info, cost_info,
        }  # fmt: skip
        figures.add(kept)  # every change of the view is kept in the browser too
        step_views = {status, strip, candidates, cache_info, *figures}

        def render(st: ExplorerState, *, full: bool = False, with_figures: bool = True) -> dict:
            """What a step changes: the text views, and the figures of the open tab only
            (``full`` adds what only a new session changes; ``with_figures=False`` leaves out the
            figures and candidates, which are slow to draw)."""
            session = st.session
            out = {
                state: st,
                status: views.status_line(st),
                strip: views.token_strip(st),
                cache_info: views.cache_summary(st),
                kept: kept_value(st),
            }
            if with_figures:
                out.update({candidates: views.candidate_rows(session), **tab_figures(st)})  # kept is already in out
            if full:
                out.update(session_views(st))
            return out

        def kept_value(st: ExplorerState) -> dict:
            """What the browser keeps of this tab: the session and the view, as a saved link has them."""
            return dataclasses.asdict(current_snapshot(st))

        def tab_views(st: ExplorerState) -> dict:
            """The figures of the open tab, and the view the browser keeps."""
            return {**tab_figures(st), kept: kept_value(st)}

        def tab_figures(st: ExplorerState) -> dict:
            """The figures of the open tab; the others are built when their tab is opened."""

            def fig(figure, name):
                return plot(figure, st.image_format, name)

            if st.tab == "cross" and not st.session.is_encoder_decoder:
                st.tab = "self"  # the translator's tab is hidden for this model

            if st.tab == "self":
                return {self_plot: fig(views.self_attention_figure(st), "self-attention"), heads: views.heads_image(st)}
            if st.tab == "cross" and st.session.is_encoder_decoder:
                return {
                    cross_plot: fig(views.cross_attention_figure(st), "cross-attention"),
                    encoder_plot: fig(views.encoder_attention_figure(st), "encoder-attention"),
                }
            if st.tab == "layers":
                return {layers_plot: fig(views.every_layer_figure(st), "every-layer")}
            if st.tab == "cache":
                return {timing_plot: fig(views.timing_figure(st), "timing")}
            if st.tab == "lens":
                return {lens_plot: fig(insights.lens_figure(st), "logit-lens")}
            if st.tab == "roles":
                try:
                    return {
                        roles_image: insights.roles_image(st), roles_info: insights.roles_summary(st),
                        role_head_plot: fig(insights.role_head_figure(st), "head"),
                    }  # fmt: skip
                except InputError as error:  # too few tokens yet: say so in place
                    return {roles_image: None, roles_info: str(error), role_head_plot: None}
            if st.tab == "proof":
                return {
                    parallel_info: insights.parallel_summary(st), sandbox_info: insights.sandbox_summary(st),
                    sandbox_plot: fig(insights.sandbox_figure(st), "sandbox"),
                }  # fmt: skip
            return {architecture_info: insights.architecture_table(st), cost_info: insights.cost_table(st)}

        def session_views(st: ExplorerState) -> dict:
            session = st.session
            c = session.config
            translator = session.is_encoder_decoder
            note = views.source_note(session)
            out = {
                layer: gr.Slider(minimum=0, maximum=c.n_layers - 1, value=st.layer, step=1),
                head: gr.Dropdown(
                    choices=[("average of all heads", MEAN)] + [(f"head {h}", str(h)) for h in range(c.n_heads)],
                    value=st.head,
                ),
                source: gr.HighlightedText(
                    value=views.source_strip(session) if translator else None, visible=translator
                ),
                source_note: gr.Markdown(value=note or "", visible=note is not None),
                cross_tab: gr.Tab(visible=translator),
            }
            return out

        def text_label(loaded) -> str:
            return "Source sentence" if loaded.is_encoder_decoder else "Prompt"

        def model_views(loaded) -> dict:
            """What a model changes; the buttons, off while the page's first model loads, come on."""
            translator = loaded.is_encoder_decoder
            return {
                **{button: gr.Button(interactive=True) for button in session_buttons},
                model_info: loaded.description,
                text: gr.Textbox(label=text_label(loaded)),
                chat: gr.Checkbox(visible=loaded.has_chat_template and not translator),
                strip: gr.HighlightedText(color_map=views.strip_colors(translator)),
                decoder_examples: gr.Column(visible=not translator),
                translator_examples: gr.Column(visible=translator),
            }

        # ------------------------------------------------------------ sessions
        def new_session(
            st, text_value, chat_value, cache_value, temp, k, p, seed_value, model_name=None
        ) -> ExplorerState:
            """Start a session in ``st`` (the tab's one state object); on an error ``st`` is unchanged."""
            model_name = model_name or st.model_name
            loaded = model_store.get_model(model_name)
            session = GenerationSession(
                loaded, text_value, use_cache=cache_value, chat=chat_value and loaded.has_chat_template,
                temperature=float(temp), top_k=int(k), top_p=float(p), seed=int(seed_value or 0),
            )  # fmt: skip
            st.start(model_name, session)
            return st

        def tab_state(request: gr.Request, st: ExplorerState | None, model_name: str) -> ExplorerState:
            """This tab's state object, made on its first event and remembered for its unload."""
            if st is None:
                st = ExplorerState(model_name)
                open_states[request.session_hash] = st
            return st

        def require(st: ExplorerState | None) -> ExplorerState:
            if st is None or st.session is None:
                raise InputError(NO_MODEL)
            return st

        def current(st, text_value, chat_value, cache_value, temp, k, p, seed_value) -> tuple[ExplorerState, bool]:
            """The user's session, started anew when the text or the chat setting changed."""
            if st is None:
                raise InputError(NO_MODEL)
            session = st.session
            if (
                session is None
                or session.text != text_value
                or session.chat != bool(chat_value and session.loaded.has_chat_template)
            ):
                return new_session(st, text_value, chat_value, cache_value, temp, k, p, seed_value), True
            return st, False

        settings = [text, chat, use_cache, temperature, top_k, top_p, seed]

        @tab_event
        def on_load(request: gr.Request, model_name, *inputs, progress=gr.Progress(track_tqdm=True)):
            """A link's session, else the one this browser kept (a reload), else the default model."""
            *values, kept_session = inputs  # the kept session comes last: API callers may leave it out
            try:
                linked = snapshot.from_query(request.query_params)
                if linked is not None:
                    progress(0, desc=f"Opening the linked session on {linked.model}")
                    return apply_snapshot(request, None, linked)[0]
            except USER_ERRORS as error:
                gr.Warning(f"This link cannot be opened: {error} The default model is shown instead.")
            if kept_session is not None:
                try:
                    restored_snapshot = snapshot.checked_snapshot(kept_session)
                    progress(0, desc=f"Bringing back your session on {restored_snapshot.model}")
                    return apply_snapshot(request, None, restored_snapshot)[0]
                except USER_ERRORS as error:
                    gr.Warning(f"The session this browser kept cannot be restored: {error} A new one is shown.")
            progress(0, desc=f"Loading {model_name}")
            try:
                loaded = model_store.get_model(model_name)
            except ModelLoadError as error:  # the buttons come on: a Step then says to choose a model
                gr.Warning(f"{error} Choose another model from the list.")
                return {button: gr.Button(interactive=True) for button in session_buttons}
            st = new_session(tab_state(request, None, model_name), *values)
            st.placed_text = values[0]  # the example the page opened with
            return {**model_views(loaded), **render(st, full=True)}

        @tab_event
        def on_model_change(request: gr.Request, model_name, st, *values, progress=gr.Progress(track_tqdm=True)):
            if st is not None and st.session is not None and st.model_name == model_name:
                return gr.skip()  # this model's session is already on screen (a repeated event)
            previous = st.model_name if st is not None else None
            try:
                progress(0, desc=f"Loading {model_name}")
                loaded = model_store.get_model(model_name)
            except ModelLoadError as error:
                gr.Warning(f"{error} The previous model stays loaded.")
                return {model: gr.Dropdown(value=previous)} if previous else gr.skip()
            st = tab_state(request, st, model_name)
            text_value = text_for(loaded, st, values[0])
            st = new_session(st, text_value, *values[1:], model_name=model_name)
            st.tab = "cross" if loaded.is_encoder_decoder else ("self" if st.tab == "cross" else st.tab)
            return {
                **model_views(loaded), text: gr.Textbox(value=text_value, label=text_label(loaded)),
                tabs: gr.Tabs(selected=st.tab), **render(st, full=True),
            }  # fmt: skip

        def text_for(loaded, st: ExplorerState, text_value: str) -> str:
            """The text for a newly chosen model: the user's own text stays; an example, or the text
            the explorer put in the box, becomes the first example of the new model's kind."""
            own = text_value not in (*DECODER_EXAMPLES, *TRANSLATOR_EXAMPLES, st.placed_text)
            if own or st.session is None or st.session.is_encoder_decoder == loaded.is_encoder_decoder:
                return text_value
            st.placed_text = TRANSLATOR_EXAMPLES[0] if loaded.is_encoder_decoder else DECODER_EXAMPLES[0]
            return st.placed_text

        @tab_event
        def on_custom_model(request: gr.Request, name, st, *values):
            resolved = model_store.resolve_custom(name)
            return on_model_change.__wrapped__(request, resolved, st, *values)

        @tab_event
        def on_step(st, *values):
            st, fresh = current(st, *values)
            st.session.step()
            st.query, st.stopped_at = None, None
            return render(st, full=fresh)

        def on_generate(st, limit, *values):
            figures_sent_at = float("-inf")
            figures_behind = False  # the screen's figures show an earlier step than the session
            try:
                with st.lock if st is not None else contextlib.nullcontext():
                    st, fresh = current(st, *values)
                st.stop_requested, st.generating, st.stopped_at = False, True, None
                running = st.session  # a model switch, Reset or opened file replaces it: then stop
                for i in range(int(limit)):
                    with st.lock:  # one step at a time, between other events of this tab
                        if st.session is not running or running.finished or st.stop_requested:
                            break
                        st.session.step()
                        st.query = None
                        due = time.perf_counter() - figures_sent_at >= FIGURES_EVERY_S or st.session.finished
                        views_now = render(st, full=fresh and i == 0, with_figures=due)
                    if due:
                        figures_sent_at = time.perf_counter()
                    figures_behind = not due
                    yield views_now
            except USER_ERRORS as error:  # e.g. an empty prompt, or a context window filled during the run
                gr.Warning(str(error))
                if not figures_behind:
                    yield gr.skip()  # a generator must yield something; the page stays as it was
            finally:  # also when Gradio cancels the run (Stop, a model switch)
                if st is not None:
                    st.generating = False
            if figures_behind and st.session is not None:  # catch the figures up with the last step
                with st.lock:
                    views_now = render(st)
                yield views_now

        def on_stop(st):
            """End a running Generate after its current step, and draw that step in full.

            Outside the queue, so that it is not queued behind the Generate it ends. Gradio's
            cancel (wired below) may end the Generate before it sends its last step's figures
            (it sends them at most every FIGURES_EVERY_S), so Stop sends them itself. The flag
            is on the tab's one state object, which the running Generate holds too (a tab with
            no state yet has no Generate to stop)."""
            if st is None:
                return gr.skip()
            st.stop_requested = True
            with st.lock:  # after the step that is running
                if st.session is None:
                    return gr.skip()
                if st.generating:  # the status line says that Stop ended it, and where
                    st.stopped_at = len(st.session.token_ids)
                return render(st)

        @tab_event
        def on_undo(st):
            st = require(st)
            st.session.undo()
            st.query, st.stopped_at = None, None
            return render(st)

        @tab_event
        def on_reset(st, *values):
            if st is None:
                raise InputError(NO_MODEL)
            st = new_session(st, *values)
            return render(st, full=True)

        @tab_event
        def on_candidate(st, event: gr.SelectData):
            st = require(st)
            top, _, replaces_last = views.candidates(st.session)
            row = event.index[0] if isinstance(event.index, list | tuple) else event.index
            if row >= len(top):
                return gr.skip()
            token = top[row].token_id
            if replaces_last:
                st.session.undo()
            st.session.force(token)
            st.query, st.stopped_at = None, None
            return render(st)

        @tab_event
        def on_token_click(st, event: gr.SelectData):
            st = require(st)
            st.query = views.checked_query(st.session, event.index)
            return {strip: views.token_strip(st), **tab_views(st)}

        @tab_event
        def on_layer_or_head(st, layer_value, head_value):
            st = require(st)
            st.layer, st.head = views.checked_view(st.session, layer_value, head_value)
            return tab_views(st)

        @tab_event
        def on_head_thumbnail(st, event: gr.SelectData):
            st = require(st)
            picked = head_at(*event.index[:2], st.session.config.n_heads)
            if picked is None:
                return gr.skip()  # a click between two heads
            st.layer, st.head = views.checked_view(st.session, st.layer, str(picked))
            figure = plot(views.self_attention_figure(st))
            return {head: gr.Dropdown(value=st.head), self_plot: figure, kept: kept_value(st)}

        @tab_event
        def on_role_click(st, event: gr.SelectData):
            st = require(st)
            picked = role_at(*event.index[:2], st.session.config.n_layers, st.session.config.n_heads)
            if picked is None:
                return gr.skip()  # a click on a label or between squares
            st.layer, st.head = views.checked_view(st.session, picked[0], str(picked[1]))
            return {layer: gr.Slider(value=st.layer), head: gr.Dropdown(value=st.head), **tab_views(st)}

        @tab_event
        def on_parallel_check(st, progress=gr.Progress()):
            st = require(st)
            progress(0, desc="One parallel pass, and the sequence again one token at a time")
            st.keep("parallel", proof.parallel_check(st.session, progress))
            return {parallel_info: insights.parallel_summary(st)}

        @tab_event
        def on_sandbox(st):
            st = require(st)
            st.keep("sandbox", proof.unmasked_pass(st.session, st.layer))
            return {
                sandbox_info: insights.sandbox_summary(st),
                sandbox_plot: plot(insights.sandbox_figure(st), st.image_format, "sandbox"),
            }

        @tab_event
        def on_image_format(st, value):
            if st is None or st.session is None or value not in ("png", "svg"):
                return gr.skip()
            st.image_format = value
            return tab_views(st)

        def current_snapshot(st: ExplorerState) -> snapshot.Snapshot:
            st = require(st)
            return snapshot.snapshot_of(
                model_store.public_name(st.model_name), st.session, layer=st.layer, head=st.head, query=st.query,
                tab=st.tab,
            )  # fmt: skip

        @tab_event
        def on_save(request: gr.Request, st):
            data = snapshot.save_bytes(current_snapshot(st), st.session)
            folder = saved_session_folder(request)  # one file per tab, replaced by its next save
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            path = folder / f"session-{len(st.session.token_ids)}-tokens.npz"
            path.write_bytes(data)
            return {saved_file: str(path)}

        @tab_event
        def on_make_link(st):
            return {link_box: snapshot.query_string(current_snapshot(st))}

        def apply_snapshot(request: gr.Request, st, snap: snapshot.Snapshot, arrays=None) -> tuple[dict, float]:
            """Rebuild a session from a saved file or a link, and everything on screen with it.

            Everything is checked before the tab's state changes. With a file's ``arrays``,
            returns the largest difference of the recomputed attention from the saved one."""
            name = model_store.resolve_custom(snap.model)
            loaded = model_store.get_model(name)
            session = snapshot.restore(loaded, snap)
            layer_index, head_choice = views.checked_view(session, snap.layer, snap.head)
            difference = snapshot.attention_difference(session, arrays) if arrays is not None else 0.0
            st = tab_state(request, st, name)
            st.start(name, session)
            st.layer, st.head = layer_index, head_choice
            st.query = snap.query if snap.query is not None and 0 <= snap.query < len(session.token_ids) else None
            st.tab = snap.tab if snap.tab != "cross" or session.is_encoder_decoder else "self"
            out = {
                **model_views(loaded), text: gr.Textbox(value=snap.text, label=text_label(loaded)), chat: snap.chat,
                use_cache: snap.use_cache, temperature: snap.temperature, top_k: snap.top_k, top_p: snap.top_p,
                seed: snap.seed, tabs: gr.Tabs(selected=st.tab), **render(st, full=True),
            }  # fmt: skip
            if name in model_store.REGISTRY:
                out[model] = gr.Dropdown(value=name)
            return out, difference

        @tab_event
        def on_open_file(request: gr.Request, path, st, progress=gr.Progress(track_tqdm=True)):
            """Restore a saved session; the upload box is emptied either way, ready for another file."""
            if not path:
                return gr.skip()  # the file was removed from the box
            try:
                with open(path, "rb") as f:  # Gradio's own copy of the upload
                    snap, arrays = snapshot.read_bytes(f.read())
                progress(0, desc=f"Replaying {len(snap.generated)} tokens on {snap.model}")
                out, difference = apply_snapshot(request, st, snap, arrays)
            except USER_ERRORS as error:
                gr.Warning(f"This file cannot be opened: {error} The session on screen stays.")
                return {open_file: None}
            n = len(snap.generated)
            gr.Info(
                f"Restored the text and {n} generated tokens on {snap.model}. The attention was recomputed; "
                f"it differs from the file's by at most {difference:.1e}."
            )
            return {**out, open_file: None}

        @tab_event
        def on_cache_toggle(st, value):
            if st is None or st.session is None:
                return gr.skip()  # the next session reads the checkbox
            st.session.set_use_cache(bool(value))
            return {cache_info: views.cache_summary(st), status: views.status_line(st), kept: kept_value(st)}

        @tab_event
        def on_sampling(st, temp, k, p, seed_value):
            if st is None or st.session is None:
                return gr.skip()  # the next session reads these settings
            from explorer.sampling import SamplingSettings

            st.session.sampling = SamplingSettings(float(temp), int(k), float(p), int(seed_value or 0))
            return {kept: kept_value(st)}

        @tab_event
        def on_compare(st, progress=gr.Progress()):
            st = require(st)
            progress(0, desc="Rerunning with the cache on and off")
            st.comparison = st.session.compare_cache_modes()
            return {timing_plot: plot(views.timing_figure(st)), cache_info: views.cache_summary(st)}

        def opener(name: str):
            @tab_event
            def on_tab(st):
                if st is None or st.session is None:
                    return gr.skip()  # the page is still loading its first model
                st.tab = name
                return tab_views(st)

            return on_tab

        # ------------------------------------------------------------ wiring
        model_outputs = {model_info, text, chat, decoder_examples, translator_examples, model, *session_buttons}
        session_outputs = {layer, head, source, source_note, cross_tab}
        everything = {state, *step_views, *model_outputs, *session_outputs}
        restored = {*everything, *settings, tabs}
        demo.load(on_load, [model, *settings, kept], restored)
        demo.unload(release_closed_tab)
        # A step's progress shows on the status line only: a spinner over every figure would
        # flash on each ~100 ms step (and redraw each component twice).
        quick = {"show_progress": "minimal", "show_progress_on": [status]}
        # A step changes the step views, and the session views when the text changed (a new session).
        stepped = {state, *step_views, *session_outputs}
        # Every click counts: quick clicks queue in order (Gradio's default drops those made while one runs).
        step_button.click(on_step, [state, *settings], stepped, trigger_mode="multiple", **quick)
        generate_event = generate_button.click(on_generate, [state, max_new, *settings], stepped, **quick)
        # A model switch ends a running Generate (the Generate also checks that its session is current).
        switched = {*everything, tabs}
        model.select(on_model_change, [model, state, *settings], switched, cancels=[generate_event])
        custom_model.submit(on_custom_model, [custom_model, state, *settings], switched, cancels=[generate_event])
        stop_button.click(on_stop, [state], {state, *step_views}, queue=False, cancels=[generate_event])
        undo_button.click(on_undo, [state], {state, *step_views}, trigger_mode="multiple", **quick)
        reset_button.click(on_reset, [state, *settings], everything)
        candidates.select(on_candidate, [state], {state, *step_views}, **quick)
        strip.select(on_token_click, [state], {strip, *figures}, **quick)
        layer.release(on_layer_or_head, [state, layer, head], figures, **quick)
        head.input(on_layer_or_head, [state, layer, head], figures, **quick)
        heads.select(on_head_thumbnail, [state], {head, self_plot, kept}, **quick)
        use_cache.input(on_cache_toggle, [state, use_cache], {cache_info, status, kept})
        for control in (temperature, top_k, top_p, seed):
            control.change(on_sampling, [state, temperature, top_k, top_p, seed], {kept})
        compare_button.click(on_compare, [state], {timing_plot, cache_info})
        all_tabs = (
            (self_tab, "self"), (cross_tab, "cross"), (layers_tab, "layers"), (cache_tab, "cache"), (lens_tab, "lens"),
            (roles_tab, "roles"), (proof_tab, "proof"), (architecture_tab, "architecture"),
        )  # fmt: skip
        for tab, name in all_tabs:
            tab.select(opener(name), [state], figures, **quick)
        roles_image.select(on_role_click, [state], {layer, head, *figures}, **quick)
        parallel_button.click(on_parallel_check, [state], {parallel_info})
        sandbox_button.click(on_sandbox, [state], {sandbox_info, sandbox_plot})
        image_format.input(on_image_format, [state, image_format], figures, **quick)
        save_button.click(on_save, [state], {saved_file})
        open_file.upload(on_open_file, [open_file, state], {*restored, open_file})
        link_button.click(on_make_link, [state], {link_box}).then(
            None, [link_box], [link_box], js="(q) => q ? location.origin + location.pathname + q : q"
        )
    return demo


CONCURRENCY_ENV = "DECODER_EXPLORER_CONCURRENCY"
QUEUE_SIZE = 256  # waiting events beyond this are refused with "queue full" rather than piling up


def concurrency() -> int:
    """How many events run at once: one per core by default.

    A step is a burst of matrix products that already uses every core (torch's threads), so
    running more steps at once than there are cores only makes each slower; the rest wait in
    Gradio's queue, in order, and every user's own events run one after another.
    """
    return max(1, int(os.environ.get(CONCURRENCY_ENV) or os.cpu_count() or 1))


def launch(**kwargs) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not every request Gradio makes to itself
    demo = build_demo()
    demo.queue(default_concurrency_limit=concurrency(), max_size=QUEUE_SIZE)
    # An upload larger than a saved session can be is refused by Gradio before it is read.
    demo.launch(
        css=CSS, js=FOLLOW_NEWEST_TOKEN, theme=gr.themes.Soft(), max_file_size=snapshot.MAX_FILE_BYTES, **kwargs
    )
