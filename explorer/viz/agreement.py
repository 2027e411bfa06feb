"""Two models along one text: the probability each gives the text's own next characters, at the
character boundaries both tokenizations share (``explorer.analysis.two_models``)."""

from __future__ import annotations

from .figure_json import Figure

COLORS = ("#0072b2", "#d55e00")  # Okabe and Ito's blue and vermillion: told apart with colour-vision deficiencies


def agreement_chart(
    labels: list[str], p_a: list[float], p_b: list[float], agree: list[bool], names: tuple[str, str]
) -> Figure:
    """Bars per shared boundary: each model's probability of the next characters (``labels``,
    already made visible); a cross above a boundary where their top tokens differ."""
    x = list(range(len(labels)))
    bars = [
        {
            "type": "bar", "x": x, "y": [float(v) for v in p], "name": name, "marker": {"color": color},
            "customdata": labels,
            "hovertemplate": "next: %{customdata}<br>probability %{y:.3f}<extra>" + name + "</extra>",
        }
        for p, name, color in zip((p_a, p_b), names, COLORS, strict=True)
    ]  # fmt: skip
    differ = [i for i, same in enumerate(agree) if not same]
    crosses = {
        "type": "scatter", "x": differ, "y": [1.06] * len(differ), "mode": "markers", "name": "top tokens differ",
        "marker": {"symbol": "x", "size": 9, "color": "#444"}, "hoverinfo": "skip",
    }  # fmt: skip
    layout = {
        "title": {"text": "The probability each model gives the text's next characters", "x": 0.01,
                  "font": {"size": 14}},
        "barmode": "group", "height": 340, "margin": {"l": 50, "r": 10, "t": 70, "b": 80},
        "xaxis": {"tickvals": x, "ticktext": labels, "tickangle": -45, "automargin": True},
        "yaxis": {"title": {"text": "probability"}, "range": [0, 1.12]},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    }  # fmt: skip
    return {"data": [*bars, crosses], "layout": layout}
