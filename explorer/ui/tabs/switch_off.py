"""Switch heads off: rerun the tokens with chosen heads, attention or feed-forward sublayers
zeroed or mean-ablated, and see each token's probability change."""

from __future__ import annotations

import gradio as gr

from explorer.analysis import ablation
from explorer.errors import InputError
from explorer.present import insights, views
from explorer.present.tabs import tab_of_module
from explorer.present.views import ExplorerState
from explorer.ui.heavy import heavy_event
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs.parts import beside_explanation
from explorer.ui.wiring import Wiring

SWITCH_OFF = """**Test a claim: switch heads off.** Attention shows where a head looks, not whether the
model needs it. Choose a layer and a head above and add it (or a whole layer's attention or
feed-forward), or type them: `17.3` is layer 17's head 3, `5.attention` and `5.mlp` are layer 5's
attention and feed-forward. **Run** reruns the tokens on screen with those switched off: **zero**
removes a head's output; **mean** replaces it at each position by its average over the text so
far, so the head still adds its usual amount but nothing about this token. The chart shows the
probability the model gave each token on screen, as it is and switched off; the dashed line is
the first generated token the changed model would not have chosen. Switched-off heads are
crossed out in red wherever heads are drawn. Your session is not changed."""

# The box of what to switch off is not among the tab's figures: a choice typed while the tab
# opened would be overwritten; the callbacks that change it set it.
FIGURES = ("ablation_info", "ablation_plot")
TAB_ID = tab_of_module(__name__).id  # where Head roles' "Test it" opens its result


def layout(page: Page) -> None:
    with beside_explanation(SWITCH_OFF):
        page.add(
            switched_off=gr.Textbox(
                label="Switched off (layer.head, layer.attention, layer.mlp)", placeholder="e.g. 17.3, 18.6",
                elem_id="switched-off",
            )
        )  # fmt: skip
        with gr.Row():
            page.add(
                add_head_button=gr.Button("Add the selected head", elem_id="add-head", size="sm"),
                add_attention_button=gr.Button("Add this layer's attention", elem_id="add-attention", size="sm"),
                add_mlp_button=gr.Button("Add this layer's feed-forward", elem_id="add-mlp", size="sm"),
            )
        page.add(ablation_method=gr.Radio(["zero", "mean"], value="zero", label="Switch off by", elem_id="method"))
        with gr.Row():
            page.add(
                run_ablation_button=gr.Button("Run with these switched off", variant="primary", elem_id="run-ablation"),
                clear_ablation_button=gr.Button("Clear", elem_id="clear-ablation"),
            )
    page.add(
        ablation_info=gr.Markdown(elem_id="ablation-info"),
        ablation_plot=gr.Plot(label="Each token's probability, switched off", elem_id="ablation-chart"),
    )


def figures(st: ExplorerState) -> Updates:
    return {
        "ablation_info": insights.ablation_summary(st),
        "ablation_plot": shown_plot(st, insights.ablation_figure(st), "switched-off"),
    }


def wire(wiring: Wiring) -> None:
    page, on = wiring.page, wiring.on
    choice = [page.state, page.switched_off, page.ablation_method]
    shown = page.pick("switched_off", *FIGURES)
    page.add_head_button.click(on(on_add_head), choice, shown)
    page.add_attention_button.click(on(sublayer_adder("attention")), choice, shown)
    page.add_mlp_button.click(on(sublayer_adder("mlp")), choice, shown)
    for run in (page.run_ablation_button.click, page.switched_off.submit):
        run(on(on_run_ablation), choice, shown)
    page.clear_ablation_button.click(on(on_clear_ablation), [page.state, page.ablation_method], shown)


def chosen_head(st: ExplorerState) -> tuple[int, int]:
    if st.head == views.MEAN:
        raise InputError("Choose one head above (not the average of the heads) to switch it off.")
    return st.layer, int(st.head)


def switched_off_views(st: ExplorerState) -> Updates:
    return {"switched_off": st.switched_off.text(), **figures(st)}


@tab_event
def on_add_head(st, text, method) -> Updates:
    st = require(st)
    st.switched_off = ablation.parse(text, st.session, method).with_head(*chosen_head(st))  # and what was typed
    return switched_off_views(st)


def sublayer_adder(sublayer: str):
    """The callback that adds the selected layer's attention or feed-forward."""

    @tab_event
    def on_add_sublayer(st, text, method) -> Updates:
        st = require(st)
        st.switched_off = ablation.parse(text, st.session, method).with_sublayer(st.layer, sublayer)
        return switched_off_views(st)

    return on_add_sublayer


@tab_event
@heavy_event("An ablation run")
def on_run_ablation(st, text, method, progress=gr.Progress()) -> Updates:
    st = require(st)
    st.switched_off = ablation.parse(text, st.session, method)
    progress(0, desc=f"Rerunning the tokens with {st.switched_off.describe()} switched off")
    st.keep("ablation", ablation.ablate(st.session, st.switched_off))
    return switched_off_views(st)


@tab_event
def on_clear_ablation(st, method) -> Updates:
    st = require(st)
    st.switched_off = ablation.SwitchedOff(method=method if method in ablation.ABLATIONS else "zero")
    return switched_off_views(st)
