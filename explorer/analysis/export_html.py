"""A session as one self-contained HTML page: its tokens, each step's candidates, and interactive
heatmaps of its attention (a layer and a head to choose, hover for the weight, zoom), readable
offline in any browser with nothing else installed.

The heatmaps are the explorer's own figures (``viz.attention_heatmap``: the same axes, colours,
grey future cells and hovers); the page holds every layer's and head's weights as exported by
``export.attention_exports`` and swaps them in when a choice changes. plotly.js is inlined
(~4.8 MB), so the file opens without a network.
"""

from __future__ import annotations

import html
import json

import numpy as np
import plotly.offline

from explorer.analysis.export import MAX_CELLS, AttentionExport, attention_exports
from explorer.session import GenerationSession
from explorer.tokens import visible
from explorer.viz import attention_heatmap
from explorer.viz.figure_json import typed_array
from explorer.viz.heatmap import hidden_keys, window_note
from explorer.viz.labels import TOKEN_COLORS

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1100px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta, .detail { color: #555; }
.strip { line-height: 2; font-family: ui-monospace, monospace; }
.strip span { padding: 2px 3px; margin: 1px; border-radius: 3px; white-space: pre; }
table { border-collapse: collapse; font-size: 0.9rem; } td, th { border-bottom: 1px solid #ddd; padding: 3px 8px; }
td.candidates { font-family: ui-monospace, monospace; }
label { margin-right: 1rem; }
"""

SCRIPT = """
const exported = JSON.parse(document.getElementById('attention-data').textContent);
for (const [kind, d] of Object.entries(exported)) {
  const plot = document.getElementById('heatmap-' + kind);
  const layer = document.getElementById(kind + '-layer'), head = document.getElementById(kind + '-head');
  const draw = () => {
    const l = Number(layer.value), c = Number(head.value);
    d.figure.data[0].z = d.z[l][c];
    d.figure.layout.title.text = d.titles[l][c];
    Plotly.react(plot, d.figure.data, d.figure.layout, {displaylogo: false, responsive: true});
  };
  layer.addEventListener('change', draw);
  head.addEventListener('change', draw);
  draw();
}
"""


def choice_label(choice: str) -> str:
    return "average of all heads" if choice == "mean" else f"head {choice}"


def heatmap_data(export: AttentionExport) -> dict:
    """The first figure, and every layer's and head's weights and title for the page to swap in."""
    first, n_keys = export.first_query, export.weights.shape[3]

    def z(matrix: np.ndarray, layer: int) -> dict:
        """A layer's weights, its masked cells (the future; a sliding layer's far past) left empty."""
        if not export.causal:
            return typed_array(matrix)
        return typed_array(np.where(hidden_keys(*matrix.shape, first, export.window(layer)), np.nan, matrix))

    figure = attention_heatmap(
        export.weights[0, 0], export.query_tokens[first:], export.key_tokens, causal=export.causal,
        title="", query_offset=first, window=export.window(0),
    )  # fmt: skip
    return {
        "figure": figure,
        "z": [[z(matrix, i) for matrix in layer] for i, layer in enumerate(export.weights)],
        "titles": [
            [
                f"{export.title}, layer {i}, {choice_label(c)}{window_note(export.window(i), n_keys)}"
                for c in export.choices
            ]
            for i in range(len(export.weights))
        ],
    }


def controls(export: AttentionExport) -> str:
    layers = "".join(f'<option value="{i}">{i}</option>' for i in range(len(export.weights)))
    heads = "".join(f'<option value="{i}">{choice_label(c)}</option>' for i, c in enumerate(export.choices))
    return (
        f'<label>Layer <select id="{export.kind}-layer">{layers}</select></label>'
        f'<label>Head <select id="{export.kind}-head">{heads}</select></label>'
    )


def attention_section(export: AttentionExport) -> str:
    mask = " Grey cells are the future, which a query may not read." if export.causal else ""
    return (
        f"<section><h2>{html.escape(export.title)}</h2>"
        f'<p class="detail">Holds {html.escape(export.detail)}. Queries top to bottom, keys left to right.{mask} '
        "Hover for the weight, drag to zoom, double-click for all.</p>"
        f'{controls(export)}<div id="heatmap-{export.kind}" class="heatmap"></div></section>'
    )


def token_strip(session: GenerationSession) -> str:
    spans = [
        f'<span class="token {kind}" style="background:{TOKEN_COLORS[kind]}" title="position {i}, id {token_id}, '
        f'{kind}">{html.escape(visible(text))}</span>'
        for i, (token_id, text, kind) in enumerate(
            zip(session.token_ids, session.token_texts(), session.token_kinds(), strict=True)
        )
    ]
    return f'<div class="strip" id="tokens">{"".join(spans)}</div>'


def steps_table(session: GenerationSession) -> str:
    if not session.steps:
        return "<p>No token generated yet.</p>"
    rows = []
    for step in session.steps:
        chosen = html.escape(visible(step.token_text)) + (" (forced)" if step.forced else "")
        top = ", ".join(f"{html.escape(visible(t.text))} {t.probability:.1%}" for t in step.top_k[:5])
        cache = "on" if step.use_cache else "off"
        rows.append(
            f"<tr><td>{step.position}</td><td>{chosen}</td><td class='candidates'>{top}</td>"
            f"<td>{step.elapsed_ms:.1f} ms, cache {cache}</td></tr>"
        )
    head = "<tr><th>position</th><th>token</th><th>top candidates</th><th>step</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def script_json(value) -> str:
    """JSON safe inside a <script> element (a token may hold "</script>")."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def export_html(model_name: str, session: GenerationSession, max_cells: int = MAX_CELLS) -> str:
    exports = attention_exports(session, max_cells)
    translator = session.is_encoder_decoder
    what = "Source sentence" if translator else "Prompt"
    n, generated = len(session.token_ids), len(session.generated_ids)
    title = f"Decoder Explorer: {model_name}"
    source = ""
    if translator:
        pieces = "".join(f"<span>{html.escape(visible(t))}</span>" for t in session.source_texts())
        source = f'<h2>Source tokens</h2><div class="strip">{pieces}</div>'
    body = (
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="meta">{"Translator" if translator else "Decoder-only model"} · {n} tokens ({generated} generated)'
        f" · exported from Decoder Explorer</p>"
        f"<h2>{what}</h2><p>{html.escape(session.text)}</p>{source}"
        f"<h2>Tokens</h2>{token_strip(session)}"
        + "".join(attention_section(e) for e in exports)
        + f"<h2>Steps</h2>{steps_table(session)}"
    )
    data = {e.kind: heatmap_data(e) for e in exports}
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style><script>{plotly.offline.get_plotlyjs()}</script></head><body>{body}"
        f'<script type="application/json" id="attention-data">{script_json(data)}</script>'
        f"<script>{SCRIPT}</script></body></html>"
    )
