"""How a figure or a session goes to the page: the pieces every tab's drawing shares.

Callbacks return updates keyed by component names (``Updates``); ``explorer.ui.wiring.on`` turns
them into what Gradio wants.
"""

from __future__ import annotations

import dataclasses

from explorer.analysis import snapshot
from explorer.present import model_store
from explorer.present.views import ExplorerState
from explorer.ui import gradio_private
from explorer.viz.colours import recoloured
from explorer.viz.figure_json import figure_json

Updates = dict[str, object]


def with_download(figure: dict, st: ExplorerState, name: str) -> dict:
    """The figure in this tab's colour scale, with its config: what its download button saves
    (Plotly's camera button, in the bar shown on hover, and the heatmap component's own button
    read the same setting)."""
    download = {"format": st.image_format, "filename": f"decoder-explorer-{name}"}
    return {**recoloured(figure, st.colour_scale), "config": {"displaylogo": False, "toImageButtonOptions": download}}


def shown_plot(st: ExplorerState, figure: dict | None, name: str) -> gradio_private.PlotData | None:
    """A figure dict straight to gr.Plot's payload (given a go.Figure, Gradio would validate it first)."""
    if figure is None:
        return None
    return gradio_private.plot_data(figure_json(with_download(figure, st, name)))


def shown_heatmap(st: ExplorerState, figure: dict | None, name: str) -> dict | None:
    """A figure dict as the attention heatmap component's value (explorer/ui/heatmap.py draws it)."""
    return None if figure is None else with_download(figure, st, name)


def current_snapshot(st: ExplorerState) -> snapshot.Snapshot:
    return snapshot.snapshot_of(
        model_store.public_name(st.model_name), st.session, layer=st.layer, head=st.head, query=st.query, tab=st.tab
    )


def kept_value(st: ExplorerState) -> dict:
    """What the browser keeps of this tab: the session and the view, as a saved link has them."""
    return dataclasses.asdict(current_snapshot(st))
