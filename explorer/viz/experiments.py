"""Figures of attribution (why this token) and of two runs compared."""

from __future__ import annotations

import html

import numpy as np

from explorer.tokens import visible

from .figure_json import Figure, typed_array
from .heatmap import label_margins
from .labels import position_labels

# Diverging without red against green (readable with the common colour-vision deficiencies):
# blue for what raises the token's logit, orange for what lowers it.
RAISES, LOWERS = "#2166ac", "#d95f02"
DIVERGING = [[0.0, "#d95f02"], [0.5, "#f7f7f7"], [1.0, "#2166ac"]]
ROLLOUT_COLOR = "#737373"
A_COLOR, B_COLOR, KL_COLOR = "#2171b5", "#d94801", "#636363"


def _title(text: str) -> dict:
    return {"text": text, "x": 0.01, "font": {"size": 14}}


def _signed_bars(labels: list[str], scores: np.ndarray, name: str, axis: str = "") -> dict:
    return {
        "type": "bar", "x": labels, "y": [float(s) for s in scores], "name": name,
        "marker": {"color": [RAISES if s >= 0 else LOWERS for s in scores]}, "xaxis": f"x{axis}", "yaxis": f"y{axis}",
        "hovertemplate": "%{x}: %{y:.3f}<extra>" + name + "</extra>",
    }  # fmt: skip


def attribution_chart(
    tokens: list[str], scores: np.ndarray, method: str, rollout: np.ndarray | None, *, title: str
) -> Figure:
    """The gradient method's score per token (blue raises the logit, orange lowers it) above,
    and attention rollout below it, labelled as what it is."""
    labels = position_labels(tokens)
    traces = [_signed_bars(labels, scores, method)]
    layout = {
        "title": _title(title), "showlegend": False, "height": 380 if rollout is None else 560,
        "xaxis": {"type": "category", "tickangle": -60, "automargin": True},
        "yaxis": {"title": {"text": method}, "automargin": True, "zeroline": True},
        "margin": {"l": 70, "r": 10, "t": 60, "b": 60},
    }  # fmt: skip
    if rollout is not None:
        traces.append({
            "type": "bar", "x": labels, "y": [float(r) for r in rollout], "name": "attention rollout",
            "marker": {"color": ROLLOUT_COLOR}, "xaxis": "x2", "yaxis": "y2",
            "hovertemplate": "%{x}: %{y:.3f}<extra>attention rollout</extra>",
        })  # fmt: skip
        layout["yaxis"]["domain"] = [0.58, 1.0]
        layout["xaxis"]["showticklabels"] = False
        layout["xaxis2"] = {"type": "category", "tickangle": -60, "automargin": True, "matches": "x"}
        layout["yaxis2"] = {"domain": [0.0, 0.42], "title": {"text": "rollout share"}, "automargin": True}
        layout["annotations"] = [{
            "text": "Attention rollout — attention-based: how attention mixes positions, not what the output needs",
            "xref": "paper", "yref": "paper", "x": 0, "y": 0.44, "showarrow": False, "xanchor": "left",
            "font": {"size": 12, "color": ROLLOUT_COLOR},
        }]  # fmt: skip
    return {"data": traces, "layout": layout}


def source_bars(tokens: list[str], scores: np.ndarray, method: str, *, title: str) -> Figure:
    """A translator's source tokens, each with its score."""
    layout = {
        "title": _title(title), "showlegend": False, "height": 340,
        "xaxis": {"type": "category", "tickangle": -60, "automargin": True},
        "yaxis": {"title": {"text": method}, "automargin": True, "zeroline": True},
        "margin": {"l": 70, "r": 10, "t": 60, "b": 60},
    }  # fmt: skip
    return {"data": [_signed_bars(position_labels(tokens), scores, method)], "layout": layout}


def alignment_heatmap(rows: np.ndarray, source: list[str], *, title: str, top: list[int] | None = None) -> Figure:
    """(layers, S) where a translator's step read the source in each decoder layer (attention-based);
    ``top`` marks the source token the attribution ranks first."""
    columns, names = position_labels(source), [f"layer {i}" for i in range(rows.shape[0])]
    trace = {
        "type": "heatmap", "z": typed_array(rows), "x": columns, "y": names, "zmin": 0.0, "zmax": 1.0,
        "colorscale": "Cividis", "colorbar": {"title": {"text": "weight"}, "thickness": 12},
        "hovertemplate": "%{y}, %{x}: %{z:.3f}<extra>cross-attention</extra>",
    }  # fmt: skip
    shapes = [
        {"type": "rect", "xref": "x", "yref": "paper", "x0": i - 0.5, "x1": i + 0.5, "y0": 0, "y1": 1,
         "line": {"color": RAISES, "width": 3}}
        for i in top or []
    ]  # fmt: skip
    layout = {
        "title": _title(title), "shapes": shapes,
        "xaxis": {"type": "category", "tickangle": -60, "title": {"text": "source token"}, "automargin": False},
        "yaxis": {"type": "category", "autorange": "reversed", "automargin": False},
        "margin": label_margins(columns, names), "height": max(260, 140 + 28 * rows.shape[0]),
    }  # fmt: skip
    return {"data": [trace], "layout": layout}


def colored_strip(tokens: list[str], scores: np.ndarray, *, label: str, first: int = 0) -> str:
    """The tokens as HTML, each coloured by its score (blue raises, orange lowers; the strongest
    is the deepest), its score in the tooltip and, for screen readers, in its label."""
    scale = float(np.abs(scores).max()) or 1.0
    spans = []
    for i, (token, score) in enumerate(zip(tokens, scores, strict=True)):
        strength = min(1.0, abs(float(score)) / scale)
        rgb = (33, 102, 172) if score >= 0 else (217, 95, 2)
        text = html.escape(visible(token))
        spans.append(
            f'<span class="token" title="{first + i}: {score:+.3f}" aria-label="{text} {score:+.3f}" '
            f'data-score="{float(score):.6g}" style="background: rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, '
            f'{0.08 + 0.8 * strength:.2f}); color: {"#fff" if strength > 0.6 else "#111"}">{text}</span>'
        )
    return f'<div class="attribution-strip" aria-label="{html.escape(label)}">{"".join(spans)}</div>'


# ---------------------------------------------------------------- two runs compared
def comparison_chart(steps: int, p_a_of_b: np.ndarray, p_b_of_a: np.ndarray, kl: np.ndarray, *, title: str) -> Figure:
    """Per step: the probability each run gave the other's token (lines) and the KL divergence (bars)."""
    x = [f"step {k + 1}" for k in range(steps)]
    traces = [  # the bars first, so that the lines are drawn over them
        {"type": "bar", "x": x, "y": [float(v) for v in kl], "name": "KL(A ‖ B), nats", "yaxis": "y2",
         "marker": {"color": KL_COLOR}, "opacity": 0.35},
        {"type": "scatter", "mode": "lines+markers", "x": x, "y": [float(v) for v in p_a_of_b],
         "name": "A's probability of B's token", "line": {"color": A_COLOR}},
        {"type": "scatter", "mode": "lines+markers", "x": x, "y": [float(v) for v in p_b_of_a],
         "name": "B's probability of A's token", "line": {"color": B_COLOR, "dash": "dash"},
         "marker": {"symbol": "square"}},
    ]  # fmt: skip
    layout = {
        "title": _title(title), "height": 380, "margin": {"l": 60, "r": 60, "t": 60, "b": 60},
        "xaxis": {"type": "category", "tickangle": -60, "automargin": True},
        "yaxis": {"title": {"text": "probability"}, "range": [0, 1.02], "overlaying": "y2"},
        "yaxis2": {"title": {"text": "KL (nats)"}, "side": "right", "rangemode": "tozero"},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def difference_heatmap(difference: np.ndarray, tokens: list[str], *, title: str) -> Figure:
    """(n, n) A's attention minus B's (queries down, keys across); the future stays blank."""
    n = difference.shape[0]
    shown = difference.astype(np.float64).copy()
    shown[np.triu_indices(n, k=1)] = np.nan  # a causal model reads no later key
    labels = position_labels(tokens[:n])
    # Colours span at least ±0.05: differences of rounding (1e-7) stay white, not full blue.
    bound = max(float(np.nanmax(np.abs(shown))), 0.05)
    trace = {
        "type": "heatmap", "z": typed_array(shown), "x": labels, "y": labels, "zmin": -bound, "zmax": bound,
        "zmid": 0.0, "colorscale": DIVERGING, "colorbar": {"title": {"text": "A − B"}, "thickness": 12},
        "hovertemplate": "query %{y}, key %{x}: %{z:+.3f}<extra>A − B</extra>",
    }  # fmt: skip
    layout = {
        "title": _title(title), "plot_bgcolor": "#d9d9d9",
        "xaxis": {"type": "category", "tickangle": -60, "title": {"text": "key (read)"}, "automargin": False},
        "yaxis": {"type": "category", "autorange": "reversed", "title": {"text": "query"}, "automargin": False},
        "margin": label_margins(labels, labels), "height": max(360, min(820, 160 + 16 * n)),
    }  # fmt: skip
    return {"data": [trace], "layout": layout}


def aligned_tokens(tokens_a: list[str], tokens_b: list[str], same: list[bool]) -> str:
    """The two runs' generated tokens step by step, as an HTML table; where they differ is marked
    (bold, a border and the word "differs" for screen readers), not by colour alone."""
    head = "".join(f"<th scope='col'>{k + 1}</th>" for k in range(len(same)))
    rows = []
    for name, tokens in (("A", tokens_a), ("B", tokens_b)):
        cells = "".join(
            f"<td class='{'same' if s else 'differs'}'>{html.escape(visible(t))}"
            f"{'' if s else '<span class=sr-only> (differs)</span>'}</td>"
            for t, s in zip(tokens, same, strict=False)
        )
        rows.append(f"<tr><th scope='row'>{name}</th>{cells}</tr>")
    return (
        "<div class='aligned-runs'><table><caption>The two runs' generated tokens, step by step "
        "(bold and framed: they differ)</caption>"
        f"<thead><tr><th scope='col'>step</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
