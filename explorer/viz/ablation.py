"""The ablation chart: each token's probability with the model as it is and with parts switched off."""

from __future__ import annotations

from .figure_json import Figure
from .labels import position_labels

BEFORE_COLOR = "#2171b5"
AFTER_COLOR = "#d94801"
DEPARTS_COLOR = "#636363"


def ablation_chart(
    tokens: list[str],  # every token on screen; position 0 is never predicted
    before: list[float],  # (T - 1,) the probability of tokens[1:] as the session ran
    after: list[float],  # (T - 1,) the same with the choice switched off
    *,
    title: str,
    first_generated: int,  # the first generated position (the prompt before it is shaded)
    departs_at: int | None,
) -> Figure:
    labels = position_labels(tokens)[1:]
    traces = [
        _bars("as the model is", labels, before, BEFORE_COLOR),
        _bars("switched off", labels, after, AFTER_COLOR),
    ]
    shapes = []
    if first_generated > 1:  # the prompt's tokens were given, not chosen: shade them
        shapes.append({
            "type": "rect", "xref": "x", "yref": "paper", "x0": -0.5, "x1": first_generated - 1.5, "y0": 0, "y1": 1,
            "fillcolor": "#f0f0f0", "line": {"width": 0}, "layer": "below",
        })  # fmt: skip
    if departs_at is not None:
        x = departs_at - 1
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": DEPARTS_COLOR, "dash": "dash", "width": 2}})  # fmt: skip
    layout = {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "barmode": "group", "bargap": 0.25, "shapes": shapes,
        "xaxis": {"type": "category", "title": {"text": "token (its position) — the grey band is the prompt"},
                  "tickangle": -60, "automargin": True},
        "yaxis": {"title": {"text": "probability the model gave it"}, "range": [0, 1], "automargin": True},
        "height": 380, "margin": {"l": 60, "r": 10, "t": 60, "b": 60},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def _bars(name: str, labels: list[str], values: list[float], color: str) -> dict:
    return {
        "type": "bar", "x": labels, "y": [float(v) for v in values], "name": name, "marker": {"color": color},
        "hovertemplate": "%{x}: %{y:.3f}<extra>" + name + "</extra>",
    }  # fmt: skip
