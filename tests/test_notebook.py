"""explorer.notebook: the app's figures in a notebook, the tables, the files, and the example
notebook executed end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from PIL import Image

from explorer import notebook
from explorer.session import InputError
from explorer.viz.figure_json import decode_array
from tests.builders import stepped

ROOT = Path(__file__).resolve().parents[1]
TOUR = ROOT / "examples" / "tour.ipynb"


@pytest.fixture(scope="module")
def translated(checkpoints):
    return stepped(checkpoints["marian"], "twenty one and two", steps=6)


def app_views():
    """What the page draws for each view, listed here apart from notebook.VIEWS (issue 28)."""
    from explorer.present import circuits, insights, views
    from explorer.viz import head_grid

    def why(state):  # the page's Why this cell: the query's winning cell (head 2 of the page's choice)
        cell = circuits.explained(state.session, state.layer, int(state.head), state.query_position(), None)
        return circuits.cell_figure(cell)

    def carried(state):
        return circuits.heatmap_figure(state.session, state.layer, int(state.head), state.query_position(), "carried")

    return {
        "self-attention": views.self_attention_figure, "cross-attention": views.cross_attention_figure,
        "encoder-attention": views.encoder_attention_figure, "every-layer": views.every_layer_figure,
        "logit-lens": insights.lens_figure, "head-roles": insights.roles_image, "kv-cache": views.timing_figure,
        "heads": lambda state: head_grid(state.session.self_attention(state.layer), causal=True),
        "why-this-cell": why, "carried": carried,
    }  # fmt: skip


@pytest.mark.parametrize("view", [name for name in notebook.VIEWS if name != "kv-lab"])
def test_every_view_is_what_the_page_draws(translated, view):
    """The notebook's figure (or image) equals the app's own view of the same session and choice."""
    from explorer.present.views import ExplorerState

    assert set(notebook.VIEWS) == {*app_views(), "kv-lab"}  # kv-lab: its own test below
    shown = notebook.show(translated, view, layer=1, head=2)
    state = ExplorerState("tiny", session=translated, layer=1, head="2")
    page = app_views()[view](state)
    if isinstance(shown, Image.Image):
        assert np.array_equal(np.asarray(shown), np.asarray(page))
    else:
        assert shown.to_dict() == go.Figure(page).to_dict()
        assert shown.layout.title.text  # a figure of something, named


def test_the_kv_lab_figure_is_the_labs_two_figures(translated):
    """notebook.show(session, "kv-lab") for a session under a policy: the lab's grid and divergence,
    as the page's lab draws them for that policy; a full-cache session is told what to do."""
    from explorer import InputError
    from explorer import cache_policies as cp
    from explorer.analysis.cache_lab import run_policy
    from explorer.viz import cache_lab

    with pytest.raises(InputError, match="cache_policy="):
        notebook.show(translated, "kv-lab")
    session = translated.with_cache_policy(cp.sinks(1, 3))
    figure = notebook.show(session, "kv-lab")
    run = run_policy(translated, cp.sinks(1, 3))  # the page's lab run on the full-cache session's text
    grid = cache_lab.held_grid_figure(run, session.token_texts(), session.config.n_kv_heads)
    divergence = cache_lab.divergence_figure(run)
    heatmap, *lines = figure.data
    assert [list(row) for row in heatmap.z] == grid["data"][0]["z"] and (np.asarray(grid["data"][0]["z"]) == 2).any()
    assert list(lines[0].y) == pytest.approx(divergence["data"][0]["y"]) and max(lines[0].y) > 0
    assert figure.layout.annotations[0].text == grid["layout"]["title"]["text"]


def test_the_kv_cache_figure_is_the_sessions_timings(translated):
    figure = notebook.show(translated, "kv-cache")
    (line,) = [t for t in figure.data if t.name == "cache on"]
    assert list(line.x) == [t.position for t in translated.timings]
    assert list(line.y) == pytest.approx([t.elapsed_ms for t in translated.timings])


def test_the_self_attention_figure_is_the_sessions_attention(translated):
    figure = notebook.show(translated, "self-attention", layer=1, head=3)
    z = decode_array(figure.data[0].z)
    expected = translated.self_attention(1)[3]
    below = ~np.triu(np.ones_like(expected, dtype=bool), k=1)
    np.testing.assert_allclose(z[below], expected[below], atol=1e-6)
    assert "layer 1, head 3" in figure.layout.title.text
    cross = notebook.show(translated, "cross-attention", layer=0)  # the average of the heads
    np.testing.assert_allclose(decode_array(cross.data[0].z), translated.cross_attention(0).mean(axis=0), atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [({"view": "attention"}, "self-attention, heads"), ({"layer": 5}, "layer 5"), ({"head": 9}, "head '9'"),
     ({"query": 99}, "token 99")],
)  # fmt: skip
def test_a_wrong_choice_says_what_there_is(translated, kwargs, says):
    with pytest.raises(InputError) as error:
        notebook.show(translated, **kwargs)
    assert says in str(error.value)


def test_the_tables_are_the_sessions(translated):
    tokens = notebook.table(translated, "tokens")
    assert tokens["id"].tolist() == translated.token_ids and tokens["kind"].iloc[0] == "start"
    top = notebook.records(translated, "top-k")
    chosen = [row["id"] for row in top if row["chosen"]]
    assert chosen == [s.token_id for s in translated.steps if s.token_id in {c.token_id for c in s.top_k}]
    steps = notebook.table(translated, "steps")
    assert steps["token_id"].tolist() == translated.generated_ids and "top_k" not in steps
    assert len(notebook.records(translated, "timings")) == len(translated.timings)
    with pytest.raises(InputError, match="tokens, steps, top-k, timings"):
        notebook.records(translated, "logits")


def test_the_session_saves_as_a_page_and_as_json(translated, tmp_path):
    page = notebook.save_html(translated, tmp_path / "s.html")
    assert page.read_text().startswith("<!doctype html>")
    record = json.loads(notebook.save_json(translated, tmp_path / "s.json").read_text())
    assert [t["id"] for t in record["tokens"]] == translated.token_ids


def test_the_figures_need_no_gradio():
    """A notebook user without the app's server pieces: every view is drawn, gradio never imported."""
    code = (
        "import sys, explorer; from explorer import notebook\n"
        "s = explorer.GenerationSession(explorer.load_model('en-de-numbers'), 'Wednesday, March 3, 2021')\n"
        "for _ in range(6): s.step()\n"
        "lab = s.with_cache_policy(explorer.cache_policies.sinks(1, 3))\n"  # kv-lab: a session under a policy
        "for view in notebook.VIEWS: notebook.show(lab if view == 'kv-lab' else s, view, layer=1)\n"
        "notebook.table(s, 'top-k')\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'gradio'], 'gradio was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_the_example_notebook_runs(tmp_path):
    """examples/tour.ipynb, every cell, in a fresh kernel (offline): a cell that fails fails this."""
    import nbformat
    from nbclient import NotebookClient

    tour = nbformat.read(TOUR, as_version=4)
    assert all(not cell.get("outputs") for cell in tour.cells if cell.cell_type == "code"), "commit it without outputs"
    NotebookClient(tour, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for cell in tour.cells for o in cell.get("outputs", [])]
    assert sum("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs) >= 5  # drawn inline
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    written = [Path(line.split("wrote ", 1)[1]) for line in printed.splitlines() if line.startswith("wrote ")]
    assert {path.name for path in written} == {"capital.html", "twenty-one.json"}
    assert all(path.is_file() and path.stat().st_size > 1000 for path in written)


def test_the_whole_app_opens_from_a_notebook(monkeypatch):
    """open_app serves the page from this process and returns; close() stops it."""
    import urllib.request

    from explorer.present import model_store
    from explorer.ui.layout import TEXT_ENV
    from tests.browser.conftest import free_port

    for name in (model_store.MODEL_ENV, TEXT_ENV):
        monkeypatch.delenv(name, raising=False)  # open_app sets them; conftest's environment_put_back restores them
    with pytest.raises(InputError, match="not one of smollm2-135m-instruct"):
        notebook.open_app("no-such-model")
    port = free_port()
    app = notebook.open_app("en-de-numbers", "twenty-one", port=port)
    try:
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=30).read().decode()
        assert "Decoder Explorer" in page
        assert model_store.default_model_name() == "en-de-numbers" and os.environ[TEXT_ENV] == "twenty-one"
    finally:
        app.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=5)
