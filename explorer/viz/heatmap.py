"""Attention heatmaps: queries top to bottom, keys left to right.

Causal self-attention has a triangle of future cells that no query may see (and, in a layer
with a sliding window, a band of cells too far back). They are left empty over a grey
background, so that a masked cell never looks like a weight that happens to be zero (white).
Axis labels are "position token", so a repeated token keeps its own row and column, and a
hover shows query, key and weight without any per-cell text in the payload.
"""

from __future__ import annotations

import html
import math

import numpy as np

from .colours import DEFAULT_SCALE, SCALES
from .figure_json import Figure, typed_array
from .labels import position_labels

ATTENTION_COLORS = SCALES[DEFAULT_SCALE].stops  # explorer.viz.colours.recoloured swaps it for another
MASK_COLOR = SCALES[DEFAULT_SCALE].mask
HIGHLIGHT_COLOR = "#e6550d"
HOVER = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"
COLORBAR = {"title": {"text": "weight"}, "thickness": 12}
TICK_ANGLE = 60  # degrees: x labels slant up to the left
SIN_TICK_ANGLE = math.sin(math.radians(TICK_ANGLE))
CHAR_PX = 7  # a tick label character at Plotly's default 12 px font, a little wide to be safe
AXIS_TITLE_PX = 34  # an axis title and its gap to the tick labels
# More would overlap at the heatmap's size (the slanted key labels need more room than the query
# labels); every cell keeps its text in the hover.
MAX_QUERY_LABELS = 48
MAX_KEY_LABELS = 32


def hidden_keys(n_queries: int, n_keys: int, query_offset: int = 0, window: int | None = None) -> np.ndarray:
    """(queries, keys) True where a causal query may not look: a key after it, or, with a
    sliding ``window``, a key ``window`` or more positions before it."""
    rows = np.arange(n_queries)[:, None] + query_offset
    keys = np.arange(n_keys)[None, :]
    hidden = keys > rows
    if window is not None:
        hidden |= keys <= rows - window
    return hidden


EVICTED_LEGEND_PX = 36  # room above the plot for the two lines that tell hatched from dotted cells


def window_note(window: int | None, n_positions: int) -> str:
    """What a heatmap's title adds when a sliding window hides some of the past, else nothing."""
    if window is None or n_positions <= window:
        return ""
    return f", sliding window of {window}: hatched = later, or {window} or more back"


def attention_heatmap(
    weights: np.ndarray,  # (queries, keys)
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    causal: bool,
    title: str,
    selected_query: int | None = None,  # a row index to outline
    query_offset: int = 0,  # the absolute position of the first query row
    window: int | None = None,  # a sliding layer's window (ModelConfig.window_of), causal only
    key_title: str = "keys (what is read)",
    query_title: str = "queries (who reads)",
    evicted: np.ndarray | None = None,  # (queries, keys) True where a cache policy had evicted the key
    evicted_by: str = "",  # the policy, for the hover ("sinks 4 + window 64")
    value_name: str = "weight",  # what a cell's number is: its hover, colour bar and row table say so
) -> Figure:
    n_q, n_k = weights.shape
    if len(query_tokens) != n_q or len(key_tokens) != n_k:
        raise ValueError(
            f"attention of shape {weights.shape} does not fit "
            f"{len(query_tokens)} query and {len(key_tokens)} key tokens"
        )
    masked = hidden_keys(n_q, n_k, query_offset, window) if causal else np.zeros((n_q, n_k), dtype=bool)
    if evicted is not None:
        masked |= evicted
    # Masked cells are left empty (NaN, a gap) and the plot background behind them is grey.
    z = np.where(masked, np.nan, weights)
    trace = {
        "type": "heatmap", "name": "attention", "z": typed_array(z),
        "x": position_labels(key_tokens), "y": position_labels(query_tokens, query_offset),
        "zmin": 0.0, "zmax": 1.0, "colorscale": ATTENTION_COLORS, "hovertemplate": HOVER, "hoverongaps": False,
        "colorbar": COLORBAR,
    }  # fmt: skip
    layout = _layout(title, key_title, query_title, trace["x"], trace["y"])
    if value_name != "weight":
        trace["hovertemplate"] = HOVER.replace("weight", value_name)
        trace["colorbar"] = {**COLORBAR, "title": {"text": value_name}}
        layout["meta"] = {"value_name": value_name}  # heatmap.js: the row table's column
    layout["plot_bgcolor"] = MASK_COLOR if masked.any() else "white"
    if causal and window is not None:
        layout["meta"] = {**layout.get("meta", {}), "window": window}  # heatmap.js: why a masked cell is masked
    if evicted is not None and evicted.any():
        layout["meta"] = {**layout.get("meta", {}), "evicted_by": evicted_by}  # heatmap.js dots these cells
        layout["margin"] = {**layout["margin"], "t": layout["margin"]["t"] + EVICTED_LEGEND_PX}
    if selected_query is not None and 0 <= selected_query < n_q:
        layout["shapes"] = [{
            "type": "rect", "xref": "x", "yref": "y", "x0": -0.5, "x1": n_k - 0.5, "y0": selected_query - 0.5,
            "y1": selected_query + 0.5, "line": {"color": HIGHLIGHT_COLOR, "width": 3}, "name": "selected query",
        }]  # fmt: skip
    return {"data": [trace], "layout": layout}


def with_outlined_cell(figure: Figure, row: int, column: int, name: str = "explained cell") -> Figure:
    """The heatmap ``figure`` with one cell outlined as well (thicker than its row's outline: a box
    on the outlined row), e.g. the cell "Why this cell" explains."""
    cell = {
        "type": "rect", "xref": "x", "yref": "y", "x0": column - 0.5, "x1": column + 0.5, "y0": row - 0.5,
        "y1": row + 0.5, "line": {"color": HIGHLIGHT_COLOR, "width": 5}, "name": name,
    }  # fmt: skip
    layout = figure["layout"]
    return {**figure, "layout": {**layout, "shapes": [*layout.get("shapes", []), cell]}}


def layer_profile_heatmap(
    weights: np.ndarray,  # (layers, keys): one query's attention in every layer
    key_tokens: list[str],
    *,
    title: str,
    layer_names: list[str] | None = None,  # "layer i" unless given (views.layer_names marks local/global)
) -> Figure:
    n_layers, _ = weights.shape
    trace = {
        "type": "heatmap", "z": typed_array(weights), "x": position_labels(key_tokens),
        "y": layer_names or [f"layer {i}" for i in range(n_layers)], "zmin": 0.0, "zmax": 1.0,
        "colorscale": ATTENTION_COLORS, "hovertemplate": "%{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
        "colorbar": COLORBAR,
    }  # fmt: skip
    return {"data": [trace], "layout": _layout(title, "keys (what is read)", "layer", trace["x"], trace["y"])}


def tick_labels(labels: list[str], most: int) -> dict:
    """Every label while at most ``most`` fit, else every k-th."""
    step = -(-len(labels) // most)  # ceil
    return {"tickmode": "array", "tickvals": labels[::step], "ticktext": labels[::step]}


def label_margins(x_labels: list[str], y_labels: list[str]) -> dict:
    """Margins wide enough for the tick labels, reckoned from their length.

    Plotly's ``automargin`` would measure every label in the browser and lay the figure out again
    (over half of a redraw at a few hundred tokens): the labels' longest text is known here.
    """
    left = AXIS_TITLE_PX + CHAR_PX * _longest(y_labels)
    bottom = AXIS_TITLE_PX + round(CHAR_PX * _longest(x_labels) * SIN_TICK_ANGLE)
    return {"l": left, "r": 10, "t": 40, "b": bottom}


def _longest(labels: list[str]) -> int:
    """Characters of the longest label as shown (the labels are escaped for Plotly's HTML)."""
    return max((len(html.unescape(label)) for label in labels), default=1)


def _layout(title: str, x_title: str, y_title: str, x_labels: list[str], y_labels: list[str]) -> dict:
    x_ticks, y_ticks = tick_labels(x_labels, MAX_KEY_LABELS), tick_labels(y_labels, MAX_QUERY_LABELS)
    return {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "xaxis": {"type": "category", "tickangle": -TICK_ANGLE, "showgrid": False, "title": {"text": x_title},
                  "automargin": False, **x_ticks},
        "yaxis": {"type": "category", "autorange": "reversed", "showgrid": False, "title": {"text": y_title},
                  "automargin": False, **y_ticks},
        "margin": label_margins(x_ticks["ticktext"], y_ticks["ticktext"]),
        "height": max(380, min(900, 180 + 24 * len(y_labels))),  # rows tall enough for their labels
        "plot_bgcolor": "white",
    }  # fmt: skip
