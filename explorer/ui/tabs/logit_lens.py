"""Logit lens: the selected token's residual stream after each layer, read through the model's
own final norm and output head."""

from __future__ import annotations

import gradio as gr

from explorer.present import insights
from explorer.present.views import ExplorerState
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tabs.parts import figure_beside_text

LOGIT_LENS = """**The logit lens: why this token?** Every layer adds to one running vector per token
(the residual stream). Here that vector, after each layer, is put through the model's own
final norm and output head, as if the model stopped there. The top row is the real
prediction; going down shows the layers where it formed. Click a token in the strip to ask
what the model expected after it (✓ marks what did follow)."""

FIGURES = ("lens_plot",)


def layout(page: Page) -> None:
    plot = gr.Plot(label="Logit lens", elem_id="logit-lens", render=False)
    page.add(lens_plot=figure_beside_text(plot, LOGIT_LENS))


def figures(st: ExplorerState) -> Updates:
    return {"lens_plot": shown_plot(st, insights.lens_figure(st), "logit-lens")}
