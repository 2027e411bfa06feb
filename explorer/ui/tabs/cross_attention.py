"""Cross-attention (translators only): how each target step reads the source sentence, and the
encoder's own self-attention over the source."""

from __future__ import annotations

from explorer.present import views
from explorer.present.views import ExplorerState
from explorer.ui.heatmap import attention_heatmap_view
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_heatmap
from explorer.ui.tabs.parts import figure_beside_text
from explorer.ui.wiring import Wiring

CROSS_ATTENTION = """**Cross-attention** is how the decoder reads the source sentence. Queries
come from the target tokens written so far, keys and values from the encoder's output. Nothing
is masked: the whole source is known before the first target token is written. A row is the
step that writes the *next* token. Good translators show a rough diagonal, bending where the
word order differs: try "twenty-one", which German says units first ("ein" "und" "zwanzig"),
and see in layer 2 the row that writes "ein" read "one" and the row that writes "zwanzig" read
"twenty"; or a date, whose day moves before the month."""

ENCODER_ATTENTION = """**Encoder self-attention** runs once per source sentence and is not masked:
every source token may read every other, before and after it."""

FIGURES = ("cross_plot", "encoder_plot")


def layout(page: Page) -> None:
    cross = attention_heatmap_view("Cross-attention heatmap", "cross-attention", selects_query=True)
    page.add(cross_plot=figure_beside_text(cross, CROSS_ATTENTION))
    encoder = attention_heatmap_view("Encoder self-attention", "encoder-attention", selects_query=False)
    page.add(encoder_plot=figure_beside_text(encoder, ENCODER_ATTENTION))


def figures(st: ExplorerState) -> Updates:
    return {
        "cross_plot": shown_heatmap(st, views.cross_attention_figure(st), "cross-attention"),
        "encoder_plot": shown_heatmap(st, views.encoder_attention_figure(st), "encoder-attention"),
    }


def wire(wiring: Wiring) -> None:
    wiring.picks_query(wiring.page.cross_plot)  # a row of the heatmap is a target step
