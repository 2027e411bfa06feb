"""Architecture and cost: what this model is made of, what a step costs (FLOPs, bytes, the cache),
and, for T5, each head's learned position bias."""

from __future__ import annotations

import gradio as gr

from explorer.present import insights
from explorer.present.views import ExplorerState
from explorer.ui import source
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot

ARCHITECTURE = """**Where the arithmetic goes.** A multiply-add counts as two FLOPs. With the KV cache a
step computes one new row, so its cost grows slowly with the length (only the attention
scores grow); without it every row is computed again. The KV cache stores a key and a value
vector per layer, key/value head and position; grouped-query attention shares them among
query heads, which is how small models keep the cache small. A T5 model has no position
vectors at all: each head adds a learned amount to a score for each distance between query and
key, the same beyond a maximum distance (with a T5 model, a chart on this tab shows it).
The attention formula itself, as code: the first function of
[`explorer/model/attention.py`]({link}) (this server's own copy, as text), one line per step
(scores, bias, mask, softmax, the weighted values).""".format(link=source.link("attention.py"))

FIGURES = ("architecture_info", "cost_info", "bias_plot")
MODEL_VIEWS = ("bias_plot",)


def routes(app) -> None:
    """``GET /source/explorer/model/<file>.py``: the model's source the tab's text links to
    (added to the app through the tab's feature, ``explorer.ui.features``)."""
    source.add_routes(app)


def layout(page: Page) -> None:
    # Side by side where the views' column is wide (1920 px), one above the other at 1280.
    with gr.Row(equal_height=False):
        with gr.Column(min_width=420):
            page.add(architecture_info=gr.Markdown(elem_id="architecture"))
        with gr.Column(min_width=420):
            page.add(cost_info=gr.Markdown(elem_id="step-cost"))
    page.add(
        bias_plot=gr.Plot(
            label="Relative position bias (T5): the selected head bold; its heatmap is in Self-attention",
            elem_id="position-bias", visible=False,
        )
    )  # fmt: skip
    gr.Markdown(ARCHITECTURE, elem_classes="explain")


def figures(st: ExplorerState) -> Updates:
    return {
        "architecture_info": insights.architecture_table(st), "cost_info": insights.cost_table(st),
        "bias_plot": shown_plot(st, insights.position_bias_figure(st), "position-bias"),
    }  # fmt: skip


def model_views(loaded) -> Updates:
    return {"bias_plot": gr.Plot(visible=loaded.config.positions == "relative")}
