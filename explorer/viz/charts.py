"""The per-step timing chart."""

from __future__ import annotations

from .figure_json import Figure

CACHED_COLOR = "#2171b5"
UNCACHED_COLOR = "#d94801"


def timing_chart(series: dict[str, tuple[list[int], list[float]]]) -> Figure:
    """Milliseconds per step against position, one line per series ("cache on", "cache off")."""
    traces = [_line(name, positions, ms) for name, (positions, ms) in series.items()]
    layout = {
        "title": {"text": "Milliseconds per step", "x": 0.01, "font": {"size": 14}},
        "xaxis": {"title": {"text": "position of the new token"}},
        "yaxis": {"title": {"text": "ms"}, "rangemode": "tozero"},
        "height": 300, "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "legend": {"orientation": "h", "y": -0.25},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def _line(name: str, positions: list[int], ms: list[float]) -> dict:
    return {
        "type": "scatter", "x": list(positions), "y": [float(v) for v in ms], "mode": "lines+markers",
        "name": name, "line": {"color": CACHED_COLOR if "on" in name else UNCACHED_COLOR},
        "hovertemplate": "position %{x}: %{y:.1f} ms<extra>" + name + "</extra>",
    }  # fmt: skip
