"""A long sequence's attention: a window of query rows at full resolution, and an overview.

Past a few hundred tokens a full T x T heatmap has more cells than the screen has pixels and
labels nobody can read. The heatmap then shows a window of query rows (the newest, or those
around the selected token) against every key, and beside it an overview of the whole matrix
in which each cell is the largest weight of its block (said in its title), with the window
outlined.
"""

from __future__ import annotations

import numpy as np

from .figure_json import Figure, typed_array
from .heatmap import ATTENTION_COLORS, HIGHLIGHT_COLOR, hidden_keys

WINDOW_FROM = 256  # sequences longer than this show a window of rows
WINDOW_ROWS = 96
OVERVIEW_CELLS = 128  # the overview's side, in blocks


def query_window(n_queries: int, selected: int) -> tuple[int, int]:
    """(first, last): every row of a short sequence, else WINDOW_ROWS rows holding ``selected``
    (the newest rows when the newest token is selected)."""
    if n_queries <= WINDOW_FROM:
        return 0, n_queries
    last = min(n_queries, max(selected + WINDOW_ROWS // 2, WINDOW_ROWS))
    return last - WINDOW_ROWS, last


def block_max(
    weights: np.ndarray, causal: bool, cells: int = OVERVIEW_CELLS, window: int | None = None
) -> tuple[np.ndarray, int]:
    """(blocks, block size): each block's largest weight; a block wholly masked is NaN."""
    n_q, n_k = weights.shape
    size = -(-max(n_q, n_k) // cells)  # ceil: square blocks
    rows, cols = -(-n_q // size), -(-n_k // size)
    padded = np.full((rows * size, cols * size), np.nan, dtype=np.float32)
    padded[:n_q, :n_k] = np.where(hidden_keys(n_q, n_k, window=window), np.nan, weights) if causal else weights
    blocks = padded.reshape(rows, size, cols, size)
    with np.errstate(all="ignore"):  # an all-NaN block stays NaN
        pooled = np.fmax.reduce(np.fmax.reduce(blocks, axis=3), axis=1)
    return pooled, size


def with_overview(
    figure: Figure, weights: np.ndarray, first: int, last: int, *, causal: bool, window: int | None = None
) -> Figure:
    """Add, to the right of a window heatmap, the overview of all of ``weights`` (queries, keys)
    with the window's rows outlined. The window keeps the left three quarters."""
    pooled, size = block_max(weights, causal, window=window)
    overview = {
        "type": "heatmap", "name": "overview", "z": typed_array(pooled), "xaxis": "x2", "yaxis": "y2",
        "x0": (size - 1) / 2, "dx": size, "y0": (size - 1) / 2, "dy": size, "zmin": 0.0, "zmax": 1.0,
        "colorscale": ATTENTION_COLORS, "showscale": False, "hoverongaps": False,
        "hovertemplate": f"queries %{{y:.0f}} ± {size // 2}<br>keys %{{x:.0f}} ± {size // 2}<br>"
                         "largest weight %{z:.4f}<extra></extra>",
    }  # fmt: skip
    layout = figure["layout"]
    layout["xaxis"]["domain"] = [0.0, 0.72]
    n_q, n_k = weights.shape
    layout["xaxis2"] = {"domain": [0.78, 1.0], "anchor": "y2", "range": [-0.5, n_k - 0.5], "showgrid": False,
                        "title": {"text": f"overview of all {n_q} rows:<br>a cell is the largest of {size}x{size}",
                                  "font": {"size": 11}},
                        "tickfont": {"size": 9}}  # fmt: skip
    layout["yaxis2"] = {"domain": [0.35, 1.0], "anchor": "x2", "range": [n_q - 0.5, -0.5], "showgrid": False,
                        "tickfont": {"size": 9}}  # fmt: skip
    window = {"type": "rect", "xref": "x2", "yref": "y2", "x0": -0.5, "x1": n_k - 0.5, "y0": first - 0.5,
              "y1": last - 0.5, "line": {"color": HIGHLIGHT_COLOR, "width": 2}, "name": "the window"}  # fmt: skip
    layout["shapes"] = [*layout.get("shapes", []), window]
    figure["data"].append(overview)
    return figure
