"""Every layer: what the selected token reads in each layer of the stack (heads averaged)."""

from __future__ import annotations

import gradio as gr

from explorer.present import views
from explorer.present.views import ExplorerState
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot

EVERY_LAYER = """**One token through the whole stack.** Each row is a layer, each column a token
it can read; the colour is the head-averaged weight. Early layers often read nearby tokens,
later ones reach further back."""

FIGURES = ("layers_plot",)


def layout(page: Page) -> None:
    gr.Markdown(EVERY_LAYER, elem_classes="explain")
    page.add(layers_plot=gr.Plot(label="The selected token in every layer", elem_id="every-layer"))


def figures(st: ExplorerState) -> Updates:
    return {"layers_plot": shown_plot(st, views.every_layer_figure(st), "every-layer")}
