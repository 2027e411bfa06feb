"""Why this cell: a head's score of a query on a key split over what the residual stream holds at
each side (the QK circuit), and the heatmap coloured by weight × what is carried (the OV circuit)."""

from __future__ import annotations

import dataclasses

import gradio as gr

from explorer.present import circuits
from explorer.present.views import ExplorerState
from explorer.ui.heatmap import attention_heatmap_view
from explorer.ui.page import Page
from explorer.ui.shown import Updates, shown_heatmap, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs.parts import beside_explanation
from explorer.ui.wiring import Wiring

WHY_THIS_CELL = """**Why does this head look there?** A score is the query's vector times the key's,
and each is made of what the residual stream holds at its position: the token's **embed**ding,
every earlier head's output (**L*n*.H*m***: layer *n*, head *m*), every earlier feed-forward (**L*n*.mlp**),
the **bias**es. With each norm's scale held at its value the score splits exactly into one number
per pair (query component × key component); the bars add each side up. Click a token in the strip
(or a row of the heatmap): the cell is that query and the key it reads most (or type a key). **Weight × what is
carried** colours each cell by the size of what the key sends, α·v·W_O, not the weight alone."""

FIGURES = ("circuits_plot", "circuits_info", "circuits_bars", "circuits_key")


def layout(page: Page) -> None:
    with beside_explanation(WHY_THIS_CELL):
        page.add(
            circuits_colour=gr.Radio(
                [("Weight", "weight"), ("Weight × what is carried", "carried")], value="weight",
                label="Colour the heatmap by", elem_id="circuits-colour",
            ),
            circuits_key=gr.Number(
                label="Key position (the row's winner until you type another)", value=None, precision=0,
                elem_id="circuits-key",
            ),
        )  # fmt: skip
    heatmap = attention_heatmap_view("Why this cell", "circuits-heatmap", selects_query=True)
    heatmap.render()
    page.add(
        circuits_plot=heatmap,
        circuits_info=gr.Markdown(elem_id="circuits-info"),
        # No label badge: it covered the figure's own title on a phone.
        circuits_bars=gr.Plot(
            label="The largest components, and their pairs", show_label=False, elem_id="circuits-bars"
        ),
    )


def figures(st: ExplorerState) -> Updates:
    session, choice = st.session, st.circuits
    head, query = circuits.chosen_head(st.head), st.query_position()
    cell = circuits.explained(session, st.layer, head, query, choice.key_for(query))
    note = " (the page shows the heads' average: this is head 0; choose a head above)" if st.head == "mean" else ""
    if choice.colour == "carried":
        note += " The cell explained is the one the bars name (the key box), whatever the colouring shows."
    return {
        "circuits_plot": shown_heatmap(
            st, circuits.heatmap_figure(session, st.layer, head, query, choice.colour, cell.key), "circuits"
        ),
        "circuits_info": cell.summary() + note,
        "circuits_bars": shown_plot(st, circuits.cell_figure(cell), "why-this-cell"),
        "circuits_key": cell.key,  # the key explained: the one typed, or the row's winner
    }


def wire(wiring: Wiring) -> None:
    page = wiring.page
    wiring.picks_query(page.circuits_plot)  # a row of the heatmap is the query; its winner the key
    shown = page.pick(*FIGURES)
    page.circuits_colour.change(wiring.on(on_colour), [page.state, page.circuits_colour], shown)
    page.circuits_key.submit(wiring.on(on_key), [page.state, page.circuits_key], shown)


@tab_event
def on_colour(st, colour: str) -> Updates:
    st = require(st)
    st.circuits = dataclasses.replace(st.circuits, colour="carried" if colour == "carried" else "weight")
    return figures(st)


@tab_event
def on_key(st, key) -> Updates:
    st = require(st)
    st.circuits = dataclasses.replace(st.circuits, key=None if key is None else int(key), query=st.query_position())
    return figures(st)
