"""Why this token: which input tokens made the model give a token its score (integrated gradients,
gradient × input, or occlusion), with a translator's cross-attention beside it."""

from __future__ import annotations

import gradio as gr

from explorer.present import experiment_views
from explorer.present.experiment_views import METHOD_CHOICES
from explorer.present.views import ExplorerState
from explorer.ui.heavy import heavy_event
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs.parts import beside_explanation
from explorer.ui.wiring import Wiring

ATTRIBUTION = """**Why this token: attribution.** Which input tokens made the model give a token its score
(its logit, before the softmax)? Click a token in the strip, choose it or another candidate of
that step, and press **Explain it**. **Integrated gradients** moves every input token from a
baseline (the padding token; the first token and special tokens stay) to what it is, adds up how
the score changed on the way, and checks that the parts add up to the whole change
(*completeness*). **Input × gradient** is the one-step shortcut: how the score would move if a
token's vector shrank a little. Blue raises the score, orange lowers it. **Attention rollout**
(grey) only follows where attention flows, layer by layer: attention says where the model looked,
not what it needed. For the translator the inputs are the source words, shown beside where
cross-attention read them."""

# The method is not among the figures: a choice made while the tab opened would be overwritten.
FIGURES = ("attribution_target", "attribution_info", "attribution_strip", "attribution_plot", "alignment_plot")
MODEL_VIEWS = ("alignment_plot",)


def layout(page: Page) -> None:
    with beside_explanation(ATTRIBUTION):
        page.add(
            attribution_target=gr.Dropdown(
                label="Explain (the selected token, or another candidate of its step)", choices=[],
                elem_id="attribution-target",
            ),
            attribution_method=gr.Radio(
                METHOD_CHOICES, value="integrated-gradients", label="Method (colours the strip)",
                elem_id="attribution-method",
            ),
            attribute_button=gr.Button("Explain it", variant="primary", elem_id="attribute"),
        )  # fmt: skip
    page.add(
        attribution_info=gr.Markdown(elem_id="attribution-info"),
        attribution_strip=gr.HTML(elem_id="attribution-strip"),
        attribution_plot=gr.Plot(label="Attribution per token", elem_id="attribution-chart"),
        alignment_plot=gr.Plot(label="Cross-attention at this step", elem_id="alignment", visible=False),
    )


def figures(st: ExplorerState) -> Updates:
    """What is explained and why."""
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


def model_views(loaded) -> Updates:
    return {"alignment_plot": gr.Plot(visible=loaded.is_encoder_decoder)}


def wire(wiring: Wiring) -> None:
    page = wiring.page
    chosen = [page.state, page.attribution_target, page.attribution_method]
    page.attribute_button.click(wiring.on(on_attribute), chosen, page.pick(*FIGURES))


@tab_event
@heavy_event("An attribution")
def on_attribute(st, target, method, progress=gr.Progress()) -> Updates:
    st = require(st)
    progress(0, desc="Explaining")
    shown = experiment_views.explain(st, target, method, progress=lambda share, what: progress(share, desc=what))
    st.keep("attribution", shown)
    return figures(st)
