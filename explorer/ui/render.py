"""What a callback sends back to the page: updates keyed by the page's component names.

Only the open tab's figures are built (the others are built when their tab is opened; each tab's
module draws its own, ``explorer/ui/tabs/``), and every change of the view is also sent to the
browser's kept copy of the session.
"""

from __future__ import annotations

import functools

import gradio as gr

from explorer.present import views
from explorer.present.tabs import TABS, shown_tab, tab_named
from explorer.present.views import MEAN, ExplorerState
from explorer.ui import model_card
from explorer.ui.shown import Updates, kept_value
from explorer.ui.tabs import code

# Off until the first session (Stop too: active while the model loaded, it could stop nothing).
SESSION_BUTTONS = ("step_button", "generate_button", "undo_button", "reset_button", "stop_button")
# What only a new session changes besides the step views.
SESSION_VIEWS = ("layer", "head", "source", "source_note", "prompt_note")
# The settings every event that starts a session reads, in this order (the page's inputs).
SETTINGS = ("text", "chat", "use_cache", "temperature", "top_k", "top_p", "seed")


@functools.cache
def figure_names() -> tuple[str, ...]:
    """Everything a change of the view may redraw: every tab's figures, and the browser's kept copy."""
    return (*(name for tab in TABS for name in code(tab).FIGURES), "kept")


@functools.cache
def step_views() -> tuple[str, ...]:
    """Everything a step may change. A tab whose figures a step cannot change (``STEPPED = False``)
    is left out: every output of a Step costs the page (bench/bench_ui.py)."""
    stepped = (name for tab in TABS if getattr(code(tab), "STEPPED", True) for name in code(tab).FIGURES)
    return ("state", "status", "strip", "candidates", "cache_info", *stepped, "kept")


@functools.cache
def stepped_names() -> frozenset[str]:
    """``step_views`` as a set, made once: render filters every step's figures by it."""
    return frozenset(step_views())


@functools.cache
def model_view_names() -> tuple[str, ...]:
    """What only a new model changes. Layout blocks (a tab, a column) are model views only: with a
    block among its outputs, every change of an event's progress makes Gradio's page read the value
    of every component inside the block (~20 ms a Step for the cross-attention tab,
    bench/bench_ui.py), and a Step never changes the model."""
    own = [name for tab in TABS for name in getattr(code(tab), "MODEL_VIEWS", ())]
    translator_tabs = [tab.component for tab in TABS if tab.translator_only]
    common = ("model_info", "text", "chat", "decoder_examples", "translator_examples", "model")
    return (*common, *translator_tabs, *own, *SESSION_BUTTONS)


def render(st: ExplorerState, *, full: bool = False, with_figures: bool = True) -> Updates:
    """What a step changes: the text views, and the figures of the open tab only (``full`` adds
    what only a new session changes; ``with_figures=False`` leaves out the figures and
    candidates, which are slow to draw)."""
    out = {
        "state": st,
        "status": views.status_line(st),
        "strip": views.token_strip(st),
        "cache_info": views.cache_summary(st),
        "kept": kept_value(st),
    }
    if with_figures:
        stepped = stepped_names()
        rows, label = views.candidate_rows(st.session), views.candidates_label(st.session)
        out |= {"candidates": gr.update(value=rows, label=label)}  # an update, no component built a Step
        out |= {name: view for name, view in tab_figures(st).items() if name in stepped}
    if full:
        out |= session_views(st)
    return out


def tab_views(st: ExplorerState) -> Updates:
    """The figures of the open tab, and the view the browser keeps."""
    return {**tab_figures(st), "kept": kept_value(st)}


def tab_figures(st: ExplorerState) -> Updates:
    """The figures of the open tab; the others are built when their tab is opened."""
    st.tab = shown_tab(st.tab, st.session.is_encoder_decoder)  # a tab this model does not show: the first
    return code(tab_named(st.tab)).figures(st)


def session_views(st: ExplorerState) -> Updates:
    """What a new session changes besides the step views: the layer and head choices, the source."""
    session = st.session
    c = session.config
    translator = session.is_encoder_decoder
    note = views.source_note(session)
    return {
        "layer": gr.Slider(minimum=0, maximum=c.n_layers - 1, value=st.layer, step=1),
        "head": gr.Dropdown(
            choices=[("average of all heads", MEAN)] + [(f"head {h}", str(h)) for h in range(c.n_heads)],
            value=st.head,
        ),
        "source": gr.HighlightedText(value=views.source_strip(session) if translator else None, visible=translator),
        "source_note": gr.Markdown(value=note or "", visible=note is not None),
        "prompt_note": "",  # the box's text is the session's again: no refusal to keep saying
    }


def text_label(loaded) -> str:
    return "Source sentence" if loaded.is_encoder_decoder else "Prompt"


def model_info(loaded) -> str:
    """The model's description, why it offers no chat template where it has none, and its card
    (licence, architecture) one click away."""
    info = loaded.description
    if not loaded.is_encoder_decoder and not loaded.has_chat_template:
        info += " It has no chat template: it continues your text as written."
    card = model_card.link(loaded.name)
    return f"{info} [Model card and licence]({card})" if card else info


def chat_box(loaded, value: bool | None = None) -> gr.Checkbox:
    """ "Use the chat template", offered only by a decoder whose tokenizer has one (``value``:
    ticked or not; None leaves it as it is)."""
    shown = {"visible": loaded.has_chat_template and not loaded.is_encoder_decoder}
    return gr.Checkbox(**shown) if value is None else gr.Checkbox(value=value, **shown)


def model_views(loaded) -> Updates:
    """What a model changes; the buttons, off while the page's first model loads, come on."""
    translator = loaded.is_encoder_decoder
    out = {
        **buttons_on(),
        "model_info": model_info(loaded),
        "text": gr.Textbox(label=text_label(loaded)),
        "chat": chat_box(loaded),
        "strip": gr.HighlightedText(color_map=views.strip_colors(translator)),
        "decoder_examples": gr.Column(visible=not translator),
        "translator_examples": gr.Column(visible=translator),
    }
    out |= {tab.component: gr.Tab(visible=translator) for tab in TABS if tab.translator_only}
    for tab in TABS:
        if hasattr(code(tab), "model_views"):
            out |= code(tab).model_views(loaded)
    return out


def buttons_on() -> Updates:
    return {button: gr.Button(interactive=True) for button in SESSION_BUTTONS}
