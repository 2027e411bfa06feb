"""The per-step timing chart."""

from __future__ import annotations

import plotly.graph_objects as go

CACHED_COLOR = "#2171b5"
UNCACHED_COLOR = "#d94801"


def timing_chart(series: dict[str, tuple[list[int], list[float]]]) -> go.Figure:
    """Milliseconds per step against position, one line per series ("cache on", "cache off")."""
    fig = go.Figure()
    for name, (positions, ms) in series.items():
        color = CACHED_COLOR if "on" in name else UNCACHED_COLOR
        fig.add_trace(go.Scatter(x=positions, y=ms, mode="lines+markers", name=name, line={"color": color},
                                 hovertemplate="position %{x}: %{y:.1f} ms<extra>" + name + "</extra>"))  # fmt: skip
    fig.update_layout(
        title={"text": "Milliseconds per step", "x": 0.01, "font": {"size": 14}},
        xaxis_title="position of the new token", yaxis_title="ms", height=300,
        margin={"l": 10, "r": 10, "t": 40, "b": 10}, legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    fig.update_yaxes(rangemode="tozero")
    return fig
