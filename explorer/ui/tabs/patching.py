"""Patching: two texts of as many tokens; the clean run's activations put into the corrupted run,
one place at a time, show where the answer is carried. Its views come from its own two texts,
never the session's."""

from __future__ import annotations

import gradio as gr

from explorer.analysis import patching
from explorer.present import insights
from explorer.present.views import ExplorerState
from explorer.ui.heavy import heavy_event
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs.parts import beside_explanation
from explorer.ui.wiring import Wiring

PATCHING = """**Find where the answer is carried: activation patching.** Two texts with the same number
of tokens that the model answers differently (swap a name, change a number) and two candidate
answers (blank: what each text would get next). The explorer runs the corrupted text again with
one piece of the clean run put in: the residual stream entering a layer at one position, or one
head's output. The colour is the share of the difference between the two answers that the piece
restores: **1** (blue) brings the clean answer back, **0** changes nothing, below 0 (red) pushes
the other way. For the translator the positions are the source sentence's, in the encoder, and
then (the third map) the target's, in the decoder: the same tokens in both runs, different only
by what cross-attention read."""

FIGURES = ("patching_info", "patching_plot", "patching_heads_plot", "patching_decoder_plot")
# A Step cannot change these, and every output of a Step costs the page (Gradio's postprocess and
# the page's read-back, bench/bench_ui.py): they are drawn by this tab's own events and on opening it.
STEPPED = False
MODEL_VIEWS = ("patching_decoder_plot", "patch_clean", "patch_corrupted", "patch_answer", "patch_other")
# The pairs the tab starts with: two names swapped; two numbers.
PAIRS = {
    False: ("When Mary and John went to the store, John gave a drink to",
            "When Mary and John went to the store, Mary gave a drink to", " Mary", " John"),
    True: ("twenty-one", "twenty-two", "", ""),
}  # fmt: skip


def layout(page: Page) -> None:
    with beside_explanation(PATCHING):
        page.add(
            patch_clean=gr.Textbox(label="Clean text", elem_id="patch-clean"),
            patch_corrupted=gr.Textbox(label="Corrupted text (as many tokens)", elem_id="patch-corrupted"),
        )
        with gr.Row():
            page.add(
                patch_answer=gr.Textbox(
                    label="Clean answer (one token)", placeholder="blank: the clean text's next token",
                    elem_id="patch-answer",
                ),
                patch_other=gr.Textbox(
                    label="Other answer (one token)", placeholder="blank: the corrupted text's next token",
                    elem_id="patch-other",
                ),
            )  # fmt: skip
        page.add(patch_button=gr.Button("Run the patching sweep", variant="primary", elem_id="run-patching"))
    page.add(
        patching_info=gr.Markdown(elem_id="patching-info"),
        patching_plot=gr.Plot(label="Patching the residual stream", elem_id="patching-residual"),
        patching_heads_plot=gr.Plot(label="Patching each head's output", elem_id="patching-heads"),
        patching_decoder_plot=gr.Plot(
            label="Patching the decoder's residual stream", elem_id="patching-decoder", visible=False
        ),
    )


def figures(st: ExplorerState) -> Updates:
    residual, heads, decoder = insights.patching_figures(st)
    return {
        "patching_info": insights.patching_summary(st), "patching_plot": shown_plot(st, residual, "patching"),
        "patching_heads_plot": shown_plot(st, heads, "patching-heads"),
        "patching_decoder_plot": shown_plot(st, decoder, "patching-decoder"),
    }  # fmt: skip


def model_views(loaded) -> Updates:
    translator = loaded.is_encoder_decoder
    clean, corrupted, answer, other = PAIRS[translator]
    return {
        "patching_decoder_plot": gr.Plot(visible=translator),
        "patch_clean": clean, "patch_corrupted": corrupted, "patch_answer": answer, "patch_other": other,
    }  # fmt: skip


def wire(wiring: Wiring) -> None:
    page = wiring.page
    pair = [page.state, *page.pick("patch_clean", "patch_corrupted", "patch_answer", "patch_other")]
    page.patch_button.click(wiring.on(on_patching), pair, page.pick(*FIGURES))


@tab_event
@heavy_event("A patching sweep")
def on_patching(st, clean, corrupted, answer, other, progress=gr.Progress()) -> Updates:
    st = require(st)
    progress(0, desc="Running the two texts")
    pair = patching.prepared_pair(st.session.loaded, clean, corrupted, answer, other)
    st.patching = patching.patching_sweep(*pair, progress=lambda share, what: progress(share, desc=what))
    return figures(st)
