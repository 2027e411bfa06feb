"""Compare runs: run A is the session on screen; run B starts again with one thing changed
(heads switched off, another text, other sampling), and the two are aligned step by step."""

from __future__ import annotations

import gradio as gr

from explorer.analysis import compare
from explorer.analysis.compare import BRANCHES
from explorer.present import experiment_views
from explorer.present.views import ExplorerState
from explorer.sampling import SEED_RANGE
from explorer.ui.heavy import heavy_event
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs.parts import beside_explanation
from explorer.ui.wiring import Wiring

COMPARE = """**Compare two runs.** Run A is the session on screen. Run B starts again from the same text
with one thing changed (the heads switched off in *Switch heads off*, another text, other
sampling settings, the KV cache off, or the full cache when run A steps under a cache policy)
and generates as many tokens. Step by step: the two
runs' tokens, the probability each run gave the other's token, and the KL divergence between
their predictions (0: the same). Below, run A's attention minus run B's for the layer and head
chosen above (blue: A reads that key more). With the cache off, everything should agree."""

FIGURES = ("compare_info", "compare_tokens", "compare_plot", "compare_attention_plot")


def layout(page: Page) -> None:
    with beside_explanation(COMPARE):
        page.add(
            compare_kind=gr.Radio(
                [(label, kind) for kind, label in BRANCHES.items()], value="switched-off", label="Run B is run A",
                elem_id="compare-kind",
            ),
            compare_text=gr.Textbox(label="Run B's text (for “another text”)", elem_id="compare-text"),
        )  # fmt: skip
        with gr.Row():
            page.add(
                compare_temperature=gr.Slider(
                    0.0, 2.0, value=1.0, step=0.05, label="Run B's temperature (for “other sampling”)",
                    elem_id="compare-temperature",
                ),
                compare_seed=gr.Number(
                    value=1, precision=0, minimum=SEED_RANGE[0], maximum=SEED_RANGE[1], label="Run B's seed",
                    elem_id="compare-seed",
                ),
            )  # fmt: skip
        page.add(compare_runs_button=gr.Button("Compare", variant="primary", elem_id="compare-runs"))
    page.add(
        compare_info=gr.Markdown(elem_id="compare-info"),
        compare_tokens=gr.HTML(elem_id="compare-tokens"),
        compare_plot=gr.Plot(label="Step by step", elem_id="compare-chart"),
        compare_attention_plot=gr.Plot(label="Attention difference", elem_id="compare-attention"),
    )


def figures(st: ExplorerState) -> Updates:
    chart, difference = experiment_views.comparison_figures(st)
    return {
        "compare_info": experiment_views.comparison_summary(st),
        "compare_tokens": experiment_views.comparison_tokens(st),
        "compare_plot": shown_plot(st, chart, "compared"),
        "compare_attention_plot": shown_plot(st, difference, "attention-a-minus-b"),
    }


def wire(wiring: Wiring) -> None:
    page = wiring.page
    run_b = page.pick("compare_kind", "compare_text", "compare_temperature", "compare_seed")
    page.compare_runs_button.click(wiring.on(on_compare_runs), [page.state, *run_b], page.pick(*FIGURES))


@tab_event
@heavy_event("A comparison of two runs")
def on_compare_runs(st, kind, text, temperature, seed, progress=gr.Progress()) -> Updates:
    st = require(st)
    session = st.session
    progress(0, desc="Running run B")
    sampling = session.sampling
    b = compare.branch_of(
        session, kind, interventions=st.switched_off.interventions(), text=text, temperature=float(temperature),
        top_k=sampling.top_k, top_p=sampling.top_p, seed=int(seed or 0),
    )  # fmt: skip
    progress(0.8, desc="Comparing")
    st.keep("compare", compare.compare(session, b, label=BRANCHES[kind]))
    return figures(st)
