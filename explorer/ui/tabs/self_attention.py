"""Self-attention: one layer's masked self-attention as a heatmap (one head, or their average), and
every head of that layer as thumbnails."""

from __future__ import annotations

import gradio as gr

from explorer.present import views
from explorer.present.views import ExplorerState
from explorer.ui.heatmap import attention_heatmap_view
from explorer.ui.images import heads_image
from explorer.ui.page import Page
from explorer.ui.shown import Updates, kept_value, shown_heatmap
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs.parts import figure_beside_text
from explorer.ui.wiring import Wiring
from explorer.viz import head_at

SELF_ATTENTION = """**Masked self-attention.** Row *i* is the token at position *i* asking "which
earlier tokens matter to me?"; each row's weights sum to 1. The hatched triangle is the
**causal mask**: before the softmax, the scores of later tokens are set to −∞, so they get
exactly zero weight. That is why generating one token at a time gives the same result as
training on the whole text at once. Click a token in the strip to outline its row."""

ALL_HEADS = """**Every head of this layer.** Heads in the same layer read different things:
some look at the previous token, some at the first token, some at matching words. Click a
head to open it above."""

FIGURES = ("self_plot", "heads")


def layout(page: Page) -> None:
    heatmap = attention_heatmap_view("Self-attention heatmap", "self-attention", selects_query=True)
    page.add(self_plot=figure_beside_text(heatmap, SELF_ATTENTION))
    gr.Markdown(ALL_HEADS, elem_classes="explain")
    # No label badge: it would cover the first head's name (the text above says what this is).
    page.add(
        heads=gr.Image(
            label="All heads of this layer (click one to open it)", show_label=False, type="pil", format="png",
            interactive=False, elem_id="all-heads", buttons=[],
        )
    )  # fmt: skip


def figures(st: ExplorerState) -> Updates:
    return {"self_plot": heatmap(st), "heads": heads_image(st)}


def heatmap(st: ExplorerState) -> dict:
    """The self-attention heatmap's value (drawn by the page's own component, explorer/ui/heatmap.py)."""
    return shown_heatmap(st, views.self_attention_figure(st), "self-attention")


def wire(wiring: Wiring) -> None:
    page = wiring.page
    wiring.picks_query(page.self_plot)  # a row of the heatmap is a query
    shown = page.pick("head", "self_plot", "kept")
    page.heads.select(wiring.on(on_head_thumbnail), [page.state], shown, **wiring.quick)


@tab_event
def on_head_thumbnail(st, event: gr.SelectData):
    st = require(st)
    picked = head_at(*event.index[:2], st.session.config.n_heads)
    if picked is None:
        return gr.skip()  # a click between two heads
    st.layer, st.head = views.checked_view(st.session, st.layer, str(picked))
    return {"head": gr.Dropdown(value=st.head), "self_plot": heatmap(st), "kept": kept_value(st)}
