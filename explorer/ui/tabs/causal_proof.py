"""Causal proof: one parallel pass against the sequence again one token at a time (the same
numbers, because of the mask), and a sandbox pass with the mask removed."""

from __future__ import annotations

import gradio as gr

from explorer.analysis import proof
from explorer.present import insights
from explorer.present.views import ExplorerState
from explorer.ui.heavy import heavy_event
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.wiring import Wiring

CAUSAL_PROOF = """**The causal proof, live.** Training feeds a whole text in one pass; generation feeds one
token at a time. They give the same numbers only because of the causal mask: position *i*
cannot read anything after *i*, so later tokens cannot change it. **Run the parallel check**
reruns the tokens on screen both ways and compares. The **sandbox** removes the mask for one
separate pass: the attention above the diagonal fills in and earlier predictions change."""

FIGURES = ("parallel_info", "sandbox_info", "sandbox_plot")


def layout(page: Page) -> None:
    gr.Markdown(CAUSAL_PROOF, elem_classes="explain")
    with gr.Row():
        page.add(
            parallel_button=gr.Button("Run the parallel check", elem_id="parallel-check"),
            sandbox_button=gr.Button("Remove the mask for one pass (sandbox)", elem_id="sandbox"),
        )
    page.add(
        parallel_info=gr.Markdown(elem_id="parallel-info"),
        sandbox_info=gr.Markdown(elem_id="sandbox-info"),
        sandbox_plot=gr.Plot(label="Attention without the mask", elem_id="sandbox-attention"),
    )


def figures(st: ExplorerState) -> Updates:
    return {"parallel_info": insights.parallel_summary(st), **sandbox(st)}


def sandbox(st: ExplorerState) -> Updates:
    return {
        "sandbox_info": insights.sandbox_summary(st),
        "sandbox_plot": shown_plot(st, insights.sandbox_figure(st), "sandbox"),
    }


def wire(wiring: Wiring) -> None:
    page, on = wiring.page, wiring.on
    page.parallel_button.click(on(on_parallel_check), [page.state], [page.parallel_info])
    page.sandbox_button.click(on(on_sandbox), [page.state], page.pick("sandbox_info", "sandbox_plot"))


@tab_event
@heavy_event("The parallel check")
def on_parallel_check(st, progress=gr.Progress()) -> Updates:
    st = require(st)
    progress(0, desc="One parallel pass, and the sequence again one token at a time")
    st.keep("parallel", proof.parallel_check(st.session, progress))
    return {"parallel_info": insights.parallel_summary(st)}


@tab_event
def on_sandbox(st) -> Updates:
    st = require(st)
    st.keep("sandbox", proof.unmasked_pass(st.session, st.layer))
    return sandbox(st)
