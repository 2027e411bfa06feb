"""Decoder Explorer in a notebook (Jupyter, VS Code): the app's figures for a session, its tables,
the files people share, and the whole app in a cell.

    import explorer
    from explorer import notebook

    loaded = explorer.load_model("smollm2-135m-instruct")
    session = explorer.GenerationSession(loaded, "The capital of France is")
    session.step()
    notebook.show(session, "self-attention", layer=3, head=2)  # the app's heatmap, inline
    notebook.table(session, "top-k")                           # a pandas DataFrame
    notebook.save_html(session, "capital.html")                # interactive, self-contained

The figures are built by the same functions as the app's (explorer/present/views.py and insights.py),
so a notebook shows exactly what the page shows. Nothing here needs Gradio but ``open_app``.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.analysis import export
from explorer.analysis.cache_lab import run_policy
from explorer.analysis.export_html import export_html
from explorer.errors import InputError
from explorer.present import circuits, insights, views
from explorer.present.views import MEAN, ExplorerState, checked_query, checked_view
from explorer.session import GenerationSession
from explorer.viz import cache_lab as lab_figures

__all__ = ["TABLES", "VIEWS", "open_app", "records", "save_html", "save_json", "show", "table"]


def kv_lab_figure(state: ExplorerState) -> dict:
    """The KV-cache lab for a session under a cache policy: what each layer holds (above) and the
    divergence from the full cache at each step (below), as the app's lab draws them."""
    session = state.session
    if not session.cache_plan.under_policy:
        raise InputError(
            "the kv-lab view shows a session under a cache policy: "
            "GenerationSession(loaded, text, cache_policy=explorer.cache_policies.sinks(4, 64))"
        )
    run = run_policy(session, session.cache_policy)
    grid = lab_figures.held_grid_figure(run, session.token_texts(), session.config.n_kv_heads)
    divergence = lab_figures.divergence_figure(run)
    titles = [grid["layout"]["title"]["text"], divergence["layout"]["title"]["text"]]
    figure = make_subplots(rows=2, cols=1, vertical_spacing=0.18, subplot_titles=titles)
    for trace in grid["data"]:
        figure.add_trace(go.Heatmap({**trace, "colorscale": lab_figures.GRID_COLORS}), row=1, col=1)
    for trace in divergence["data"]:
        figure.add_trace(go.Scatter(trace), row=2, col=1)
    figure.update_yaxes(autorange="reversed", title_text="layer", row=1, col=1)
    figure.update_yaxes(title_text="KL, nats", row=2, col=1)
    figure.update_xaxes(title_text="position", row=1, col=1)
    figure.update_xaxes(title_text="position the step read last", row=2, col=1)
    figure.update_layout(height=720, showlegend=True)
    return figure.to_dict()


# Each view: a function from the view's state to a plotly figure dict or a PIL image.
def why_this_cell_figure(state: ExplorerState) -> dict:
    """Why the query reads the key it reads most (the page's Why this cell): the largest
    query- and key-side components of the score and their pairs (``explorer.why_attends``)."""
    head = circuits.chosen_head(state.head)
    return circuits.cell_figure(circuits.explained(state.session, state.layer, head, state.query_position(), None))


def carried_figure(state: ExplorerState) -> dict:
    """The head's heatmap coloured by weight × what is carried, ‖α v W_O‖ (``explorer.what_it_carries``)."""
    head = circuits.chosen_head(state.head)
    return circuits.heatmap_figure(state.session, state.layer, head, state.query_position(), "carried")


VIEWS: dict[str, Callable] = {
    "self-attention": views.self_attention_figure,
    "heads": views.heads_grid_image,
    "cross-attention": views.cross_attention_figure,
    "encoder-attention": views.encoder_attention_figure,
    "every-layer": views.every_layer_figure,
    "logit-lens": insights.lens_figure,
    "head-roles": insights.roles_image,
    "kv-cache": views.timing_figure,
    "kv-lab": kv_lab_figure,
    "why-this-cell": why_this_cell_figure,
    "carried": carried_figure,
}


def show(session: GenerationSession, view: str = "self-attention", *, layer: int = 0, head: int | str = MEAN,
         query: int | None = None):  # fmt: skip
    """The app's figure of ``view`` for this session: a plotly Figure (an image for "heads" and
    "head-roles"), which a notebook draws inline.

    ``layer`` and ``head`` (an index, or "mean" for the average of the heads) choose the attention;
    ``query`` the token the every-layer and logit-lens views read (default: the newest)."""
    if view not in VIEWS:
        raise InputError(f"there is no view {view!r}; choose one of {', '.join(VIEWS)}")
    state = ExplorerState(model_name=session.loaded.name, session=session)
    state.layer, state.head = checked_view(session, layer, head)
    if query is not None:
        state.query = checked_query(session, query)
    figure = VIEWS[view](state)
    return go.Figure(figure) if isinstance(figure, dict) else figure


TABLES: dict[str, Callable[[GenerationSession], list[dict]]] = {
    "tokens": export.token_rows,
    "steps": lambda session: export.step_rows(session, with_top_k=False),
    "top-k": export.top_k_rows,
    "timings": lambda session: [
        {"position": t.position, "elapsed_ms": t.elapsed_ms, "use_cache": t.use_cache} for t in session.timings
    ],
}


def records(session: GenerationSession, what: str = "tokens") -> list[dict]:
    """A table of the session as a list of rows (dicts): "tokens", "steps", "top-k" or "timings"."""
    if what not in TABLES:
        raise InputError(f"there is no table {what!r}; choose one of {', '.join(TABLES)}")
    return TABLES[what](session)


def table(session: GenerationSession, what: str = "tokens"):
    """``records(session, what)`` as a pandas DataFrame (pandas is needed for this one only)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("notebook.table needs pandas (pip install pandas); records() gives the same rows") from None
    return pd.DataFrame(records(session, what))


def save_html(session: GenerationSession, path: str | Path, max_cells: int = export.MAX_CELLS) -> Path:
    """The session as one self-contained HTML page with interactive heatmaps (opens offline)."""
    path = Path(path)
    path.write_text(export_html(session.loaded.name, session, max_cells), encoding="utf-8")
    return path


def save_json(session: GenerationSession, path: str | Path, max_cells: int = export.MAX_CELLS) -> Path:
    """Tokens, every step's candidates and timing, and attention, as JSON (export.session_record)."""
    path = Path(path)
    path.write_text(export.to_json(session.loaded.name, session, max_cells), encoding="utf-8")
    return path


def open_app(model: str | None = None, text: str | None = None, *, height: int = 900, port: int | None = None):
    """The whole explorer inside the notebook cell (served from this kernel); ``.close()`` on what
    it returns stops it. ``model`` and ``text`` are what the page opens with."""
    from explorer import cli  # the command that starts the page (and imports Gradio)

    if model and (problem := cli.unknown_model(model)):
        raise InputError(problem)
    return cli.start_inline(Namespace(model=model, text=text, allow_dir=[]), height=height, port=port)
