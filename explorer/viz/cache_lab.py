"""The KV-cache lab's figures: what each layer holds, the divergence per step, the budget curve."""

from __future__ import annotations

from explorer.analysis.cache_lab import EVICTED, HELD, QUANTIZED, SINK, PolicyRun

from .figure_json import Figure

EVICTED_COLOR, HELD_COLOR, SINK_COLOR, QUANTIZED_COLOR = "#e0e0e0", "#2171b5", "#d94801", "#756bb1"
# The grid's values: 0..1 the share of a layer's key/value heads holding a position (grey to blue),
# 2 a sink, 3 quantized; z / 3 on the colour scale.
GRID_COLORS = [
    [0.0, EVICTED_COLOR], [1 / 3, HELD_COLOR], [0.5, HELD_COLOR], [0.5, SINK_COLOR], [0.75, SINK_COLOR],
    [0.75, QUANTIZED_COLOR], [1.0, QUANTIZED_COLOR],
]  # fmt: skip
POLICY_COLORS = {"window": "#d94801", "sinks": "#238b45", "sinks_cache": "#74c476", "heavy_hitters": "#6a51a3",
                 "key_norm": "#8c6d31", "int8": "#2171b5", "int4": "#6baed6"}  # fmt: skip
TOOLBAR_PX = 44  # Plotly's mode bar (top right) lies over this band; the page's label sits above the chart
# The title under the mode bar (over it, the title's end was hidden on a phone), the legend between
# the title and the plot: below the plot, it sat over the x axis's title (issue 40).
TITLE_AT_TOP = {"x": 0.01, "xanchor": "left", "font": {"size": 13}, "yref": "container", "y": 1, "yanchor": "top",
                "pad": {"t": TOOLBAR_PX}}  # fmt: skip
# (Shown also while a trace is empty: the top token never changed.)
LEGEND_ABOVE = {"legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
                "showlegend": True}  # fmt: skip
# The budget curve's seven names, one a row under the x axis's title: above the plot, in a chart
# column 330-420 px wide, Plotly put them one a row there too and they lay over the title.
LEGEND_BELOW_PX = 150  # seven rows of the legend
LEGEND_BELOW = {"legend": {"orientation": "v", "x": 0, "xanchor": "left", "yref": "container", "y": 0,
                           "yanchor": "bottom"}, "showlegend": True}  # fmt: skip
KIND_NAMES = {"sinks_cache": "sinks, positions in the cache", "heavy_hitters": "heavy hitters", "key_norm": "key norm"}


def cell_words(value: float, kv_heads: int, policy_label: str) -> str:
    if value == SINK:
        return "a sink: kept for good"
    if value == QUANTIZED:
        return f"held as integers ({policy_label})"
    if value == EVICTED:
        return f"evicted by {policy_label}"
    if value == HELD:
        return "held" if kv_heads == 1 else f"held by all {kv_heads} key/value heads"
    return f"held by {round(value * kv_heads)} of {kv_heads} key/value heads"


def held_grid_figure(run: PolicyRun, token_texts: list[str], kv_heads: int) -> Figure:
    """Layers (rows) x positions (columns): what each layer's cache holds after the last step."""
    grid = run.grid
    label = run.policy.label()
    words = [[f"layer {layer}, position {p} {token_texts[p]!r}: {cell_words(v, kv_heads, label)}"
              for p, v in enumerate(row)] for layer, row in enumerate(grid)]  # fmt: skip
    trace = {
        "type": "heatmap", "z": grid.tolist(), "zmin": 0, "zmax": 3, "colorscale": GRID_COLORS, "showscale": False,
        "customdata": words, "hovertemplate": "%{customdata}<extra></extra>", "xgap": 0, "ygap": 1,
    }  # fmt: skip
    layout = {
        "title": {"text": f"Held after the last token: {label}<br><sub>blue held · grey evicted · orange sinks · "
                          "purple integers</sub>", **TITLE_AT_TOP},
        "xaxis": {"title": {"text": "position"}, "automargin": True},
        "yaxis": {"title": {"text": "layer"}, "autorange": "reversed", "automargin": True},
        "height": max(285, 125 + 9 * grid.shape[0]), "margin": {"l": 60, "r": 10, "t": 115, "b": 45},
    }  # fmt: skip
    return {"data": [trace], "layout": layout}


def divergence_figure(run: PolicyRun) -> Figure:
    """KL from the full cache's next-token distribution at each step; a red mark where the top token differs."""
    departed = [p for p, same in zip(run.positions, run.same_top, strict=True) if not same]
    kl_at = dict(zip(run.positions, run.kl, strict=True))
    traces = [
        {"type": "scatter", "mode": "lines+markers", "name": "KL(full ‖ policy)", "x": run.positions, "y": run.kl,
         "line": {"color": HELD_COLOR}, "hovertemplate": "position %{x}: KL %{y:.2e} nats<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "top token differs", "x": departed,
         "y": [kl_at[p] for p in departed], "marker": {"color": "#cb181d", "size": 10, "symbol": "x"},
         "hovertemplate": "position %{x}: the policy's top token is not the full cache's<extra></extra>"},
    ]  # fmt: skip
    first = run.first_departure
    where = "never departs" if first is None else f"first departs after position {first}"
    layout = {
        "title": {"text": f"{run.policy.label()} against the full cache<br><sub>holds {1 - run.saving:.0%} of "
                          f"its bytes · greedy text {where}</sub>", **TITLE_AT_TOP},
        "xaxis": {"title": {"text": "position the step read last"}, "automargin": True},
        "yaxis": {"title": {"text": "KL, nats"}, "rangemode": "tozero", "automargin": True},
        "height": 385, "margin": {"l": 60, "r": 10, "t": 145, "b": 50}, **LEGEND_ABOVE,
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def budget_curve_figure(rows: list, n_tokens: int, start: int) -> Figure:
    """Perplexity against the full cache's, by budget, one line per eviction policy; the
    quantized caches (no budget: every position) as flat dashed lines."""
    full = next(r for r in rows if r.policy == "full").perplexity
    traces = []
    budgets = sorted({r.budget for r in rows if r.budget is not None})
    for kind in dict.fromkeys(r.policy for r in rows if r.policy != "full"):
        mine = [r for r in rows if r.policy == kind]
        flat = mine[0].budget is None  # a quantized cache: every position, at any budget
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": KIND_NAMES.get(kind, kind),
            "x": [budgets[0], budgets[-1]] if flat else [r.budget for r in mine],
            "y": [r.perplexity / full for r in mine] * (2 if flat else 1),
            "line": {"color": POLICY_COLORS.get(kind), "dash": "dash" if flat else None},
            "customdata": [r.label for r in mine] * (2 if flat else 1),
            "hovertemplate": "%{customdata}: %{y:.2f} x the full cache's perplexity<extra></extra>",
        })  # fmt: skip
    layout = {
        "title": {"text": f"Perplexity by budget, against the full cache's ({full:.2f})<br><sub>{n_tokens:,} tokens, "
                          f"positions from {start} scored · dashed: quantized, every position</sub>",
                  **TITLE_AT_TOP},
        "xaxis": {"title": {"text": "budget: keys a query reads"}, "type": "log", "tickvals": budgets,
                  "automargin": True},
        "yaxis": {"title": {"text": "perplexity / full cache's"}, "type": "log", "automargin": True},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                    "line": {"color": "#555", "width": 1, "dash": "dot"}}],
        "height": 345 + LEGEND_BELOW_PX, "margin": {"l": 60, "r": 10, "t": 85, "b": 50 + LEGEND_BELOW_PX},
        **LEGEND_BELOW,
    }  # fmt: skip
    return {"data": traces, "layout": layout}
