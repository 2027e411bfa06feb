"""Two models along one text: the probability each gives the text's own next characters, at the
character boundaries both tokenizations share (``explorer.analysis.two_models``)."""

from __future__ import annotations

from .figure_json import Figure

TOP_BAR_PX = 52  # the page's label (top left) and Plotly's mode bar (top right) lie over this band
# Tools that do nothing useful on bars: without them the mode bar is short enough to stay clear of the
# page's label on a phone (its full width reached under it, hiding the download button).
UNUSED_TOOLS = ["select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d"]
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
    # Top down, nothing on top of anything at any width: the page's label and Plotly's tool bar, the
    # title below them in two short lines (a phone's chart is ~330 px wide: one line ran under the bar and
    # off the edge), the legend left-aligned above the bars (on a phone it wraps to two lines).
    layout = {
        "title": {"text": "The probability each model gives<br>the text's next characters", "x": 0.01,
                  "xanchor": "left", "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": TOP_BAR_PX},
                  "font": {"size": 14}},
        "barmode": "group", "height": 420, "margin": {"l": 50, "r": 10, "t": 150, "b": 80},
        "xaxis": {"tickvals": x, "ticktext": labels, "tickangle": -45, "automargin": True},
        "yaxis": {"title": {"text": "probability"}, "range": [0, 1.12]},
        "modebar": {"remove": UNUSED_TOOLS},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
    }  # fmt: skip
    return {"data": [*bars, crosses], "layout": layout}
