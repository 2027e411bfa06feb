"""Activation patching as heatmaps: how much of the clean answer each patched piece restores."""

from __future__ import annotations

import numpy as np

from .figure_json import Figure, typed_array
from .heatmap import label_margins

# Blue where patching restores the clean answer, red where it pushes further away, white for nothing.
RESTORED_COLORS = [[0.0, "#b2182b"], [0.5, "#f7f7f7"], [1.0, "#2166ac"]]


def patching_heatmap(restored: np.ndarray, columns: list[str], *, title: str, column_title: str) -> Figure:
    """(layers, columns) shares restored -> a heatmap, layer 0 on top, 0 white, 1 blue, -1 red."""
    n_layers = restored.shape[0]
    rows = [f"layer {i}" for i in range(n_layers)]
    trace = {
        "type": "heatmap", "z": typed_array(restored), "x": columns, "y": rows, "zmin": -1.0, "zmax": 1.0,
        "zmid": 0.0, "colorscale": RESTORED_COLORS, "colorbar": {"title": {"text": "restored"}, "thickness": 12},
        "hovertemplate": "%{y}, %{x}: %{z:.2f} of the difference restored<extra></extra>",
    }  # fmt: skip
    layout = {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "xaxis": {"type": "category", "tickangle": -60, "title": {"text": column_title}, "automargin": False},
        "yaxis": {"type": "category", "autorange": "reversed", "automargin": False},
        "margin": label_margins(columns, rows), "height": max(360, min(900, 140 + 18 * n_layers)),
    }  # fmt: skip
    return {"data": [trace], "layout": layout}
