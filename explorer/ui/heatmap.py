"""The attention heatmaps (self, cross, encoder) as a component of our own: gr.HTML that draws
in the page.

Its value is the figure the views build in Plotly's form (``explorer.viz.attention_heatmap``,
with the overview of ``explorer.viz.window``), and ``static/heatmap.js`` draws it: canvases of one pixel
per cell under one SVG of labels and outlines. A Step adds one row to these views, and Plotly
lays out a whole figure anew on every update (its axes, ticks and colour bar: 35-80 ms a Step,
bench/bench_ui.py); this draws the same cells, labels, outlines and hover text in 3-8 ms. Drag
to zoom, double-click for all, and a download button (PNG or SVG, as the page's setting says)
take the place of Plotly's bar.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

STATIC = Path(__file__).parent / "static"
# The pure parts first (colours, ticks, titles, hover text: tested in node, tests/js/), then the drawing.
SCRIPT = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("heatmap_parts.js", "heatmap.js"))

TEMPLATE = """
<div class="attention-tools">
  <span class="attention-name">LABEL</span>
  <span class="attention-hint">hover: a cell's weight · QUERY_HINTdrag: zoom · double-click: all</span>
  <button class="attention-download" type="button" title="Download the figure as shown"></button>
</div>
<div class="attention-frame">
  <div class="attention-figure" data-selects-query="SELECTS_QUERY"></div>
  <div class="attention-tip" role="status" hidden></div>
</div>
<details class="attention-table">
  <summary>The selected row as a table</summary><div class="attention-rows"></div>
</details>
"""

QUERY_HINT = "click a row: the query · "

CSS = """
.attention-tools { display: flex; justify-content: flex-end; align-items: center; gap: 10px;
                   font-size: 12px; color: var(--body-text-color-subdued); min-height: 26px; }
.attention-name { margin-right: auto; white-space: nowrap; font-weight: 600; font-size: 13px;
                  color: var(--body-text-color); }
.attention-download { border: 1px solid var(--border-color-primary); border-radius: 4px; padding: 1px 8px;
                      background: var(--background-fill-primary); cursor: pointer; }
.attention-frame { position: relative; }
@media (max-width: 640px) { .attention-hint { display: none; } }  /* beside the label badge, no room */
.attention-figure { position: relative; width: 100%; min-height: 260px; user-select: none; cursor: crosshair; }
.attention-figure svg { position: absolute; left: 0; top: 0; }
.attention-cells { position: absolute; image-rendering: pixelated; }
.attention-table summary { font-size: 12px; color: var(--body-text-color-subdued); cursor: pointer; }
.attention-rows { max-height: 260px; overflow-y: auto; }
.attention-rows table { font-size: 13px; border-collapse: collapse; }
.attention-rows caption { text-align: left; padding: 4px 0; }
.attention-rows th, .attention-rows td { padding: 1px 10px; border-bottom: 1px solid var(--border-color-primary); }
.attention-rows td.weight { text-align: right; font-family: ui-monospace, monospace; }
.attention-tip { position: absolute; pointer-events: none; z-index: 10; white-space: nowrap; font-size: 12px;
                 background: #fff; color: #222; border: 1px solid #08306b; border-radius: 3px; padding: 3px 6px; }
"""


def attention_heatmap_view(label: str, elem_id: str, selects_query: bool) -> gr.HTML:
    """An empty heatmap (not yet rendered: the layout places it). With ``selects_query``, a click
    on a row (or on the overview) fires the component's ``select`` event with that query's
    position as ``index``, as a click on the token strip does."""
    # Its name on the tools' line, not in a label badge above it: one line less between the
    # tabs and the cells (the projector layout needs every line of a 720-pixel screen).
    # Said in the template, not only as a prop: a component in a tab not yet opened can be mounted
    # with an update's props in place of its own (Gradio 6), and a click would then pick nothing.
    template = TEMPLATE.replace("QUERY_HINT", QUERY_HINT if selects_query else "").replace("LABEL", label)
    template = template.replace("SELECTS_QUERY", "yes" if selects_query else "no")
    return gr.HTML(
        value=None, label=label, show_label=False, container=True, elem_id=elem_id, render=False,
        html_template=template, css_template=CSS, js_on_load=SCRIPT, apply_default_css=False,
        selects_query=selects_query,
    )  # fmt: skip
