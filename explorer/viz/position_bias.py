"""T5's relative position bias as a chart: what each head adds to a score, by distance.

The encoder's bias reads both ways (keys before and after the query); the decoder's only back.
Beyond ``max_distance`` every distance shares one bucket, so the lines go flat: T5 cannot tell
40 tokens back from 400.
"""

from __future__ import annotations

import numpy as np

from .figure_json import Figure

HEAD_COLORS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"]
TITLE = "Relative position bias: what each head adds to a score, by how far the key is from the query"


def position_bias_chart(
    stacks: dict[str, tuple[np.ndarray, np.ndarray]],  # name -> (distances (n,), biases (heads, n))
    selected_head: int | None,
    max_distance: int,
) -> Figure:
    """One panel per stack, one line per head; the selected head drawn bold, the others faint."""
    traces = []
    for panel, (name, (distances, biases)) in enumerate(stacks.items(), start=1):
        for head, values in enumerate(biases):
            traces.append(_line(name, head, distances, values, panel, selected_head))
    return {"data": traces, "layout": _layout({name: d for name, (d, _) in stacks.items()}, max_distance)}


def _axis(panel: int) -> str:
    """Plotly's axis suffix: "" for the first panel, then "2", "3", ..."""
    return "" if panel == 1 else str(panel)


def _line(name: str, head: int, distances: np.ndarray, values: np.ndarray, panel: int, selected: int | None) -> dict:
    chosen = selected is None or head == selected
    return {
        "type": "scatter", "mode": "lines", "x": distances.tolist(), "y": values.astype(float).tolist(),
        "name": f"head {head}", "legendgroup": f"head {head}", "showlegend": panel == 1,
        "xaxis": f"x{_axis(panel)}", "yaxis": f"y{_axis(panel)}", "opacity": 1.0 if chosen else 0.3,
        "line": {"color": HEAD_COLORS[head % len(HEAD_COLORS)], "width": 3 if selected == head else 1.5},
        "hovertemplate": f"{name}, head {head}<br>key − query = %{{x}}<br>bias %{{y:.3f}}<extra></extra>",
    }  # fmt: skip


def _layout(distances: dict[str, np.ndarray], max_distance: int) -> dict:
    width = 1 / len(distances)
    layout = {
        "title": {"text": TITLE, "x": 0.01, "font": {"size": 14}}, "height": 380,
        "margin": {"l": 60, "r": 10, "t": 60, "b": 50}, "legend": {"orientation": "h", "y": -0.3}, "shapes": [],
    }  # fmt: skip
    for panel, (name, shown) in enumerate(distances.items(), start=1):
        ax = _axis(panel)
        left = (panel - 1) * width + (0.06 if panel > 1 else 0)
        layout[f"xaxis{ax}"] = {"domain": [left, panel * width - 0.02], "title": {"text": f"{name}: key − query"}}
        layout[f"yaxis{ax}"] = {"anchor": f"x{ax}", "title": {"text": "bias" if panel == 1 else ""}}
        edges = [e for e in (-max_distance, max_distance) if shown.min() <= e <= shown.max()]
        for edge in edges:  # past here, one bucket: the lines go flat
            layout["shapes"].append({
                "type": "line", "xref": f"x{ax}", "yref": f"y{ax} domain", "x0": edge, "x1": edge, "y0": 0, "y1": 1,
                "line": {"dash": "dot", "color": "#888", "width": 1},
            })  # fmt: skip
    return layout
