"""The logit lens as a layers x rank grid: the token each layer ranks k-th, coloured by probability."""

from __future__ import annotations

import numpy as np

from .figure_json import Figure, typed_array
from .heatmap import COLORBAR
from .labels import short

LENS_COLORS = [[0.0, "#ffffff"], [0.3, "#c7e9c0"], [1.0, "#238b45"]]
FOLLOWED = " ✓"  # marks the token that does come next in the text
# Top down: the page's label (top left) and Plotly's mode bar (top right) over this band, the title
# under them, then the axis title ("rank") and the ranks. With the title in the middle of the top
# margin, "rank" was drawn over its end on a phone.
TOP_BAR_PX = 52


def logit_lens_heatmap(
    labels: list[str],  # one per row, the embeddings first
    texts: list[list[str]],  # [row][rank] token text
    probabilities: np.ndarray,  # (rows, k)
    *,
    title: str,
    followed: list[list[bool]] | None = None,  # [row][rank]: is this the token that came next?
) -> Figure:
    n_rows, k = probabilities.shape
    if len(labels) != n_rows or len(texts) != n_rows or any(len(t) != k for t in texts):
        raise ValueError(f"{probabilities.shape} probabilities do not fit {len(labels)} labels and the texts")
    cell_text = [
        [short(t) + (FOLLOWED if followed and followed[r][i] else "") for i, t in enumerate(row)]
        for r, row in enumerate(texts)
    ]
    ranks = [f"#{i + 1}" for i in range(k)]
    trace = {
        "type": "heatmap", "name": "logit lens", "z": typed_array(probabilities), "x": ranks, "y": labels,
        "text": cell_text, "texttemplate": "%{text}", "textfont": {"size": 11},
        "zmin": 0.0, "zmax": 1.0, "colorscale": LENS_COLORS, "colorbar": {**COLORBAR, "title": {"text": "p"}},
        "hovertemplate": "%{y}, rank %{x}<br>%{text}<br>probability %{z:.3f}<extra></extra>",
    }  # fmt: skip
    layout = {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}, "yref": "container", "y": 1,
                  "yanchor": "top", "pad": {"t": TOP_BAR_PX}},
        "xaxis": {"type": "category", "side": "top", "title": {"text": "rank", "standoff": 6}, "automargin": True},
        "yaxis": {"type": "category", "title": {"text": "read after"}, "automargin": True},  # embeddings at the bottom
        "margin": {"l": 10, "r": 10, "t": 124, "b": 10},
        "height": max(374, min(954, 174 + 22 * n_rows)),
        "plot_bgcolor": "white",
    }  # fmt: skip
    return {"data": [trace], "layout": layout}
