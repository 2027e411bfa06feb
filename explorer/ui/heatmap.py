"""The attention heatmaps (self, cross, encoder) as a component of our own: gr.HTML that draws
in the page.

Its value is the figure the views build in Plotly's form (``explorer.viz.attention_heatmap``,
with the overview of ``explorer.viz.window``), and ``heatmap.js`` draws it: canvases of one pixel
per cell under one SVG of labels and outlines. A Step adds one row to these views, and Plotly
lays out a whole figure anew on every update (its axes, ticks and colour bar: 35-80 ms a Step,
bench/bench_ui.py); this draws the same cells, labels, outlines and hover text in 3-8 ms. Drag
to zoom, double-click for all, and a download button (PNG or SVG, as the page's setting says)
take the place of Plotly's bar.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

SCRIPT = (Path(__file__).with_name("heatmap.js")).read_text()

TEMPLATE = """
<div class="attention-tools">
  <span class="attention-hint">hover for a cell's weight · QUERY_HINTdrag to zoom · double-click for all</span>
  <button class="attention-download" type="button" title="Download the figure as shown"></button>
</div>
<div class="attention-frame">
  <div class="attention-figure"></div>
  <div class="attention-tip" role="status" hidden></div>
</div>
"""

QUERY_HINT = "click a row to make it the query · "

CSS = """
.attention-tools { display: flex; justify-content: flex-end; align-items: center; gap: 10px;
                   font-size: 12px; color: var(--body-text-color-subdued); min-height: 26px; }
.attention-download { border: 1px solid var(--border-color-primary); border-radius: 4px; padding: 1px 8px;
                      background: var(--background-fill-primary); cursor: pointer; }
.attention-frame { position: relative; }
@media (max-width: 640px) { .attention-hint { display: none; } }  /* beside the label badge, no room */
.attention-figure { position: relative; width: 100%; min-height: 380px; user-select: none; cursor: crosshair; }
.attention-figure svg { position: absolute; left: 0; top: 0; }
.attention-cells { position: absolute; image-rendering: pixelated; }
.attention-tip { position: absolute; pointer-events: none; z-index: 10; white-space: nowrap; font-size: 12px;
                 background: #fff; color: #222; border: 1px solid #08306b; border-radius: 3px; padding: 3px 6px; }
"""


def attention_heatmap_view(label: str, elem_id: str, selects_query: bool) -> gr.HTML:
    """An empty heatmap (not yet rendered: the layout places it). With ``selects_query``, a click
    on a row (or on the overview) fires the component's ``select`` event with that query's
    position as ``index``, as a click on the token strip does."""
    template = TEMPLATE.replace("QUERY_HINT", QUERY_HINT if selects_query else "")
    return gr.HTML(
        value=None, label=label, show_label=True, container=True, elem_id=elem_id, render=False,
        html_template=template, css_template=CSS, js_on_load=SCRIPT, apply_default_css=False,
        selects_query=selects_query,
    )  # fmt: skip
