"""What a callback sends back to the page: updates keyed by ``Page`` field names.

Only the open tab's figures are built (the others are built when their tab is opened), and
every change of the view is also sent to the browser's kept copy of the session.
"""

from __future__ import annotations

import dataclasses

import gradio as gr
from gradio.components.plot import PlotData

from explorer.analysis import snapshot
from explorer.session import InputError
from explorer.ui import experiment_views, insights, model_store, views
from explorer.ui.layout import SESSION_BUTTONS
from explorer.ui.views import MEAN, ExplorerState
from explorer.viz.colours import recoloured
from explorer.viz.figure_json import figure_json

Updates = dict[str, object]

# Everything a change of the view may redraw, and everything a step may change.
FIGURES = (
    "self_plot", "heads", "cross_plot", "encoder_plot", "layers_plot", "timing_plot", "lens_plot", "roles_image",
    "roles_info", "role_head_plot", "ablation_info", "ablation_plot", "patching_info", "patching_plot",
    "patching_heads_plot", "patching_decoder_plot", "attribution_target", "attribution_info", "attribution_strip",
    "attribution_plot", "alignment_plot", "compare_info", "compare_tokens", "compare_plot", "compare_attention_plot",
    "parallel_info", "sandbox_info", "sandbox_plot", "architecture_info", "cost_info", "bias_plot", "kept",
)  # fmt: skip
# The Patching tab's views come from its own two texts, never the session's: a Step cannot change
# them, and every output of a Step costs the page (Gradio's postprocess and the page's read-back,
# bench/bench_ui.py), so they are drawn only by their tab's own events and by opening it.
NOT_STEPPED = ("patching_info", "patching_plot", "patching_heads_plot", "patching_decoder_plot")
STEP_VIEWS = ("state", "status", "strip", "candidates", "cache_info", *(f for f in FIGURES if f not in NOT_STEPPED))
# What only a new session changes, and what only a new model changes. Layout blocks (a tab, a
# column) are model views only: with a block among its outputs, every change of an event's
# progress makes Gradio's page read the value of every component inside the block (~20 ms a Step
# for the cross-attention tab, bench/bench_ui.py), and a Step never changes the model.
SESSION_VIEWS = ("layer", "head", "source", "source_note")
MODEL_VIEWS = (
    "model_info", "text", "chat", "decoder_examples", "translator_examples", "cross_tab", "model", "patch_clean",
    "patch_corrupted", "patch_answer", "patch_other", "alignment_plot", "patching_decoder_plot", "bias_plot",
    *SESSION_BUTTONS,
)  # fmt: skip


def with_download(figure: dict, st: ExplorerState, name: str) -> dict:
    """The figure in this tab's colour scale, with its config: what its download button saves
    (Plotly's camera button, in the bar shown on hover, and the heatmap component's own button
    read the same setting)."""
    download = {"format": st.image_format, "filename": f"decoder-explorer-{name}"}
    return {**recoloured(figure, st.colour_scale), "config": {"displaylogo": False, "toImageButtonOptions": download}}


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
        stepped = {name: view for name, view in tab_figures(st).items() if name not in NOT_STEPPED}
        out |= {"candidates": views.candidate_rows(st.session), **stepped}
    if full:
        out |= session_views(st)
    return out


def current_snapshot(st: ExplorerState) -> snapshot.Snapshot:
    return snapshot.snapshot_of(
        model_store.public_name(st.model_name), st.session, layer=st.layer, head=st.head, query=st.query, tab=st.tab
    )


def kept_value(st: ExplorerState) -> dict:
    """What the browser keeps of this tab: the session and the view, as a saved link has them."""
    return dataclasses.asdict(current_snapshot(st))


def tab_views(st: ExplorerState) -> Updates:
    """The figures of the open tab, and the view the browser keeps."""
    return {**tab_figures(st), "kept": kept_value(st)}


def tab_figures(st: ExplorerState) -> Updates:
    """The figures of the open tab; the others are built when their tab is opened."""
    if st.tab == "cross" and not st.session.is_encoder_decoder:
        st.tab = "self"  # the translator's tab is hidden for this model
    return FIGURES_OF_TAB[st.tab](st)


def shown_plot(st: ExplorerState, figure: dict | None, name: str) -> PlotData | None:
    """A figure dict straight to gr.Plot's payload (given a go.Figure, Gradio would validate it first)."""
    if figure is None:
        return None
    return PlotData(type="plotly", plot=figure_json(with_download(figure, st, name)))


def shown_heatmap(st: ExplorerState, figure: dict | None, name: str) -> dict | None:
    """A figure dict as the attention heatmap component's value (explorer/ui/heatmap.py draws it)."""
    return None if figure is None else with_download(figure, st, name)


def self_tab(st: ExplorerState) -> Updates:
    return {"self_plot": self_heatmap(st), "heads": views.heads_image(st)}


def self_heatmap(st: ExplorerState) -> dict:
    """The self-attention heatmap's value (drawn by the page's own component, explorer/ui/heatmap.py)."""
    return shown_heatmap(st, views.self_attention_figure(st), "self-attention")


def cross_tab(st: ExplorerState) -> Updates:
    return {
        "cross_plot": shown_heatmap(st, views.cross_attention_figure(st), "cross-attention"),
        "encoder_plot": shown_heatmap(st, views.encoder_attention_figure(st), "encoder-attention"),
    }


def roles_tab(st: ExplorerState) -> Updates:
    try:
        return {
            "roles_image": insights.roles_image(st), "roles_info": insights.roles_summary(st),
            "role_head_plot": shown_plot(st, insights.role_head_figure(st), "head"),
        }  # fmt: skip
    except InputError as error:  # too few tokens yet: say so in place
        return {"roles_image": None, "roles_info": str(error), "role_head_plot": None}


def ablation_tab(st: ExplorerState) -> Updates:
    """The result of switching off. (The box of what to switch off is not among a tab's views: a
    choice typed while the tab opened would be overwritten; the callbacks that change it set it.)"""
    return {
        "ablation_info": insights.ablation_summary(st),
        "ablation_plot": shown_plot(st, insights.ablation_figure(st), "switched-off"),
    }


def patching_tab(st: ExplorerState) -> Updates:
    residual, heads, decoder = insights.patching_figures(st)
    return {
        "patching_info": insights.patching_summary(st), "patching_plot": shown_plot(st, residual, "patching"),
        "patching_heads_plot": shown_plot(st, heads, "patching-heads"),
        "patching_decoder_plot": shown_plot(st, decoder, "patching-decoder"),
    }  # fmt: skip


def attribution_tab(st: ExplorerState) -> Updates:
    """What is explained and why. (The method is not among the views: a choice made while the tab
    opened would be overwritten.)"""
    choices = experiment_views.target_choices(st)
    shown = experiment_views.explained(st)
    chosen = f"{shown.position}:{shown.result.token_id}" if shown and shown.result else None
    values = [value for _, value in choices]
    chart, alignment = experiment_views.attribution_figures(st)
    return {
        "attribution_target": gr.Dropdown(choices=choices, value=chosen if chosen in values else (values or [None])[0]),
        "attribution_info": experiment_views.attribution_summary(st),
        "attribution_strip": experiment_views.attribution_strip(st),
        "attribution_plot": shown_plot(st, chart, "attribution"),
        "alignment_plot": shown_plot(st, alignment, "alignment"),
    }  # fmt: skip


def compare_tab(st: ExplorerState) -> Updates:
    chart, difference = experiment_views.comparison_figures(st)
    return {
        "compare_info": experiment_views.comparison_summary(st),
        "compare_tokens": experiment_views.comparison_tokens(st),
        "compare_plot": shown_plot(st, chart, "compared"),
        "compare_attention_plot": shown_plot(st, difference, "attention-a-minus-b"),
    }


def proof_tab(st: ExplorerState) -> Updates:
    return {
        "parallel_info": insights.parallel_summary(st), "sandbox_info": insights.sandbox_summary(st),
        "sandbox_plot": shown_plot(st, insights.sandbox_figure(st), "sandbox"),
    }  # fmt: skip


FIGURES_OF_TAB = {
    "self": self_tab,
    "cross": cross_tab,
    "layers": lambda st: {"layers_plot": shown_plot(st, views.every_layer_figure(st), "every-layer")},
    "cache": lambda st: {"timing_plot": shown_plot(st, views.timing_figure(st), "timing")},
    "lens": lambda st: {"lens_plot": shown_plot(st, insights.lens_figure(st), "logit-lens")},
    "roles": roles_tab,
    "ablation": ablation_tab,
    "patching": patching_tab,
    "attribution": attribution_tab,
    "compare": compare_tab,
    "proof": proof_tab,
    "architecture": lambda st: {
        "architecture_info": insights.architecture_table(st), "cost_info": insights.cost_table(st),
        "bias_plot": shown_plot(st, insights.position_bias_figure(st), "position-bias"),
    },
}  # fmt: skip


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
    }


def text_label(loaded) -> str:
    return "Source sentence" if loaded.is_encoder_decoder else "Prompt"


def model_views(loaded) -> Updates:
    """What a model changes; the buttons, off while the page's first model loads, come on."""
    translator = loaded.is_encoder_decoder
    return {
        **buttons_on(),
        "model_info": loaded.description,
        "text": gr.Textbox(label=text_label(loaded)),
        "chat": gr.Checkbox(visible=loaded.has_chat_template and not translator),
        "strip": gr.HighlightedText(color_map=views.strip_colors(translator)),
        "decoder_examples": gr.Column(visible=not translator),
        "translator_examples": gr.Column(visible=translator),
        "cross_tab": gr.Tab(visible=translator),
        "alignment_plot": gr.Plot(visible=translator),
        "patching_decoder_plot": gr.Plot(visible=translator),
        "bias_plot": gr.Plot(visible=loaded.config.positions == "relative"),
        **patching_pair(translator),
    }


# The pairs the Patching tab starts with: two names swapped; two numbers.
PATCHING_PAIRS = {
    False: ("When Mary and John went to the store, John gave a drink to",
            "When Mary and John went to the store, Mary gave a drink to", " Mary", " John"),
    True: ("twenty-one", "twenty-two", "", ""),
}  # fmt: skip


def patching_pair(translator: bool) -> Updates:
    clean, corrupted, answer, other = PATCHING_PAIRS[translator]
    return {"patch_clean": clean, "patch_corrupted": corrupted, "patch_answer": answer, "patch_other": other}


def buttons_on() -> Updates:
    return {button: gr.Button(interactive=True) for button in SESSION_BUTTONS}
