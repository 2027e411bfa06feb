"""KV cache: the milliseconds of every step, cache on or off, and the cache's size; Compare reruns
the generation both ways and checks that the tokens are the same."""

from __future__ import annotations

import gradio as gr

from explorer.analysis.cache_modes import compare_cache_modes
from explorer.ui import views
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.views import ExplorerState
from explorer.ui.wiring import Wiring

KV_CACHE = """**Why the KV cache changes speed and not output.** A token's keys and values
depend only on it and the tokens before it (the mask sees to that), so they never change
once computed. With the cache on, a step computes them for the one new token and reuses the
rest: the work per step grows linearly with the length. With the cache off, every step
recomputes the whole sequence, so the time per step grows with the length too, and the total
quadratically. The memory cost is 2 (keys and values) × layers × key/value heads × head size ×
positions × 4 bytes. **Compare** reruns this generation both ways and checks the tokens."""

FIGURES = ("timing_plot",)


def layout(page: Page) -> None:
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            page.add(
                timing_plot=gr.Plot(label="Milliseconds per step", elem_id="timing"),
                compare_button=gr.Button("Compare cache on and off", elem_id="compare"),
                cache_info=gr.Markdown(elem_id="cache-info"),
            )
        with gr.Column(scale=2, min_width=240):
            gr.Markdown(KV_CACHE, elem_classes="explain")


def figures(st: ExplorerState) -> Updates:
    return {"timing_plot": shown_plot(st, views.timing_figure(st), "timing")}


def wire(wiring: Wiring) -> None:
    page = wiring.page
    page.compare_button.click(wiring.on(on_compare), [page.state], page.pick("timing_plot", "cache_info"))


@tab_event
def on_compare(st, progress=gr.Progress()) -> Updates:
    st = require(st)
    progress(0, desc="Rerunning with the cache on and off")
    st.comparison = compare_cache_modes(st.session)
    return {**figures(st), "cache_info": views.cache_summary(st)}
