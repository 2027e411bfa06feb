"""Why a cell: a score's largest query- and key-side components as bars, and their pair matrix."""

from __future__ import annotations

import numpy as np

from .figure_json import Figure

RAISES, LOWERS = "#2171b5", "#d94801"  # as the attribution's colours: blue raises the score, orange lowers it
REST = "#969696"  # the components not shown, summed: grey, whichever way they push

Rest = tuple[str, float] | None  # ("the other 52, summed", their sum), below a side's largest components
TOOLBAR_PX = 44  # Plotly's mode bar (top right) lies over this band: the title starts under it


def _bars(items: list[tuple[str, float]], rest: Rest, axis: str, title: str) -> dict:
    colours = [RAISES if v >= 0 else LOWERS for _, v in items] + ([REST] if rest else [])
    items = items + ([rest] if rest else [])
    names, values = [n for n, _ in items][::-1], [float(v) for _, v in items][::-1]  # the largest on top
    return {
        "type": "bar", "orientation": "h", "x": values, "y": names, "xaxis": f"x{axis}", "yaxis": f"y{axis}",
        "marker": {"color": colours[::-1]}, "name": title, "showlegend": False,
        "hovertemplate": "%{y}: %{x:+.3f}<extra>" + title + "</extra>",
    }  # fmt: skip


def bars_range(sides: list[list[tuple[str, float]]], rests: tuple[Rest, Rest]) -> list[float]:
    """The x range that holds every bar of both sides and zero, with a little room at the ends."""
    values = [v for side in sides for _, v in side] + [rest[1] for rest in rests if rest]
    low, high = min([0.0, *values]), max([0.0, *values])
    pad = 0.05 * ((high - low) or 1.0)
    return [low - pad if low < 0 else 0.0, high + pad if high > 0 else 0.0]


def why_figure(
    query_top: list[tuple[str, float]],  # (component, its share of the score), largest |share| first
    key_top: list[tuple[str, float]],
    pairs: np.ndarray,  # (len(query_top), len(key_top)): those components' pairs
    title: str,
    rests: tuple[Rest, Rest] = (None, None),  # each side's other components, summed (a bar, not in the matrix)
) -> Figure:
    """Query-side bars, key-side bars, and the pair matrix of those components (query rows, key columns)."""
    limit = float(np.abs(pairs).max()) if pairs.size else 1.0
    shared = bars_range([query_top, key_top], rests)
    matrix = {
        "type": "heatmap", "z": pairs.tolist(), "x": [n for n, _ in key_top], "y": [n for n, _ in query_top],
        "xaxis": "x3", "yaxis": "y3", "zmin": -limit, "zmax": limit, "zmid": 0,
        "colorscale": [[0, LOWERS], [0.5, "#ffffff"], [1, RAISES]],
        "colorbar": {"len": 0.3, "y": 0.15, "thickness": 12},
        "hovertemplate": "query %{y} × key %{x}: %{z:+.3f}<extra></extra>",
    }  # fmt: skip
    # One above the other (query side, key side, their pairs): side by side, a phone's width put one
    # chart's names over the other's bars.
    layout = {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}, "yref": "container", "y": 1,
                  "yanchor": "top", "pad": {"t": TOOLBAR_PX}},
        "height": 940, "margin": {"l": 90, "r": 20, "t": 100, "b": 90},
        # One scale for both sides' bars, so that lengths compare (each its own: +1.07 drawn as
        # long as +3.85); a gap under each side for its axis title (it touched the next chart).
        "xaxis1": {"domain": [0.0, 1.0], "anchor": "y1", "title": {"text": "query side"}, "zeroline": True,
                   "range": shared},
        "yaxis1": {"domain": [0.78, 1.0], "anchor": "x1", "automargin": True},
        "xaxis2": {"domain": [0.0, 1.0], "anchor": "y2", "title": {"text": "key side"}, "zeroline": True,
                   "range": shared},
        "yaxis2": {"domain": [0.43, 0.65], "anchor": "x2", "automargin": True},
        "xaxis3": {"domain": [0.0, 0.9], "anchor": "y3", "title": {"text": "key component"}, "automargin": True},
        "yaxis3": {"domain": [0.0, 0.3], "anchor": "x3", "title": {"text": "query component"}, "automargin": True,
                   "autorange": "reversed"},
    }  # fmt: skip
    bars = [_bars(query_top, rests[0], "1", "query side"), _bars(key_top, rests[1], "2", "key side")]
    return {"data": [*bars, matrix], "layout": layout}
