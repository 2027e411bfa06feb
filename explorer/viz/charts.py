"""The per-step timing chart."""

from __future__ import annotations

import math

from .figure_json import Figure

CACHED_COLOR = "#2171b5"
UNCACHED_COLOR = "#d94801"


def timing_chart(series: dict[str, tuple[list[int], list[float]]]) -> Figure:
    """Milliseconds per step against position, one line per series ("cache on", "cache off")."""
    traces = [_line(name, positions, ms) for name, (positions, ms) in series.items()]
    every = [p for positions, _ in series.values() for p in positions]
    span = max(every) - min(every) if every else 0
    layout = {
        "title": {"text": "Milliseconds per step", "x": 0.01, "font": {"size": 14}},
        # Positions are whole numbers: ticks at whole steps, about ten of them.
        "xaxis": {"title": {"text": "position of the new token"}, "automargin": True, "tick0": 0,
                  "dtick": max(1, math.ceil(span / 10))},
        "yaxis": {"title": {"text": "ms"}, "rangemode": "tozero", "automargin": True},
        # Room for the tick labels ("200") and the titles; the legend above the plot, clear of the x title.
        "height": 320, "margin": {"l": 60, "r": 10, "t": 60, "b": 50},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def _line(name: str, positions: list[int], ms: list[float | None]) -> dict:
    """A line with markers; a None leaves a gap (plotly does not connect across it)."""
    return {
        "type": "scatter", "x": list(positions), "y": [None if v is None else float(v) for v in ms],
        "mode": "lines+markers",
        "name": name, "line": {"color": CACHED_COLOR if "on" in name else UNCACHED_COLOR},
        "hovertemplate": "position %{x}: %{y:.1f} ms<extra>" + name + "</extra>",
    }  # fmt: skip
