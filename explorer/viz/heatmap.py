"""Attention heatmaps: queries top to bottom, keys left to right.

Causal self-attention has a triangle of future cells that no query may see. They are left
empty over a grey background, so that a masked cell never looks like a weight that happens
to be zero (white).
Axis labels are "position token", so a repeated token keeps its own row and column, and a
hover shows query, key and weight without any per-cell text in the payload.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .labels import position_labels

ATTENTION_COLORS = [[0.0, "#ffffff"], [0.15, "#c6dbef"], [0.5, "#4292c6"], [1.0, "#08306b"]]
MASK_COLOR = "#bdbdbd"
HIGHLIGHT_COLOR = "#e6550d"
HOVER = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"


def causal_future(n_queries: int, n_keys: int, query_offset: int = 0) -> np.ndarray:
    """(queries, keys) True where the key comes after the query."""
    rows = np.arange(n_queries)[:, None] + query_offset
    return np.arange(n_keys)[None, :] > rows


def attention_heatmap(
    weights: np.ndarray,  # (queries, keys)
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    causal: bool,
    title: str,
    selected_query: int | None = None,  # a row index to outline
    query_offset: int = 0,  # the absolute position of the first query row
    key_title: str = "keys (what is read)",
    query_title: str = "queries (who reads)",
) -> go.Figure:
    n_q, n_k = weights.shape
    if len(query_tokens) != n_q or len(key_tokens) != n_k:
        raise ValueError(
            f"attention of shape {weights.shape} does not fit "
            f"{len(query_tokens)} query and {len(key_tokens)} key tokens"
        )
    y = position_labels(query_tokens, query_offset)
    x = position_labels(key_tokens)
    masked = causal_future(n_q, n_k, query_offset) if causal else np.zeros((n_q, n_k), dtype=bool)
    # Masked cells are left empty (NaN) and the plot background behind them is grey; float32
    # keeps the payload at about 5 characters a cell.
    z = np.where(masked, np.nan, weights).astype(np.float32)
    fig = go.Figure(
        go.Heatmap(
            z=z, x=x, y=y, zmin=0.0, zmax=1.0, colorscale=ATTENTION_COLORS, name="attention",
            hovertemplate=HOVER, hoverongaps=False, colorbar={"title": {"text": "weight"}, "thickness": 12},
        )
    )  # fmt: skip
    if selected_query is not None and 0 <= selected_query < n_q:
        fig.add_shape(
            type="rect", xref="x", yref="y", x0=-0.5, x1=n_k - 0.5, y0=selected_query - 0.5,
            y1=selected_query + 0.5, line={"color": HIGHLIGHT_COLOR, "width": 3}, name="selected query",
        )  # fmt: skip
    _style(fig, title, key_title, query_title, n_q)
    fig.update_layout(plot_bgcolor=MASK_COLOR if masked.any() else "white")
    return fig


def layer_profile_heatmap(
    weights: np.ndarray,  # (layers, keys): one query's attention in every layer
    key_tokens: list[str],
    *,
    title: str,
) -> go.Figure:
    n_layers, _ = weights.shape
    fig = go.Figure(
        go.Heatmap(
            z=weights.astype(np.float32), x=position_labels(key_tokens),
            y=[f"layer {i}" for i in range(n_layers)], zmin=0.0, zmax=1.0, colorscale=ATTENTION_COLORS,
            hovertemplate="%{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
            colorbar={"title": {"text": "weight"}, "thickness": 12},
        )
    )  # fmt: skip
    _style(fig, title, "keys (what is read)", "layer", n_layers)
    return fig


def _style(fig: go.Figure, title: str, x_title: str, y_title: str, n_rows: int) -> None:
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False, title=y_title, automargin=True)
    fig.update_xaxes(type="category", tickangle=-60, showgrid=False, title=x_title, automargin=True)
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        height=max(380, min(900, 180 + 24 * n_rows)),  # rows tall enough for every label
        plot_bgcolor="white",
    )
