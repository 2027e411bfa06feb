"""A session exported as JSON and as a web page: everything it holds is the session's own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.analysis import export
from explorer.analysis.export_html import export_html, script_json
from explorer.viz.figure_json import decode_array
from tests.builders import stepped


@pytest.fixture(scope="module", params=["gpt2", "llama", "marian"])
def session(request, checkpoints):
    session = stepped(checkpoints[request.param], "twenty one and more", steps=4)
    session.force(7)
    return session


def test_the_record_holds_the_sessions_tokens_steps_and_candidates(session):
    record = json.loads(export.to_json("tiny", session))
    assert record["format"] == export.FORMAT and record["version"] == export.VERSION
    assert [t["id"] for t in record["tokens"]] == session.token_ids
    assert [t["text"] for t in record["tokens"]] == session.token_texts()
    assert [t["kind"] for t in record["tokens"]][-1] == "forced"
    assert [s["token_id"] for s in record["steps"]] == session.generated_ids
    assert [s["forced"] for s in record["steps"]] == [False] * 4 + [True]
    first = session.steps[0].top_k
    assert [c["id"] for c in record["steps"][0]["top_k"]] == [t.token_id for t in first]
    assert record["steps"][0]["top_k"][0]["probability"] == pytest.approx(first[0].probability, abs=1e-6)
    assert [c["id"] for c in record["next_top_k"]] == [t.token_id for t in session.top_candidates()]
    assert record["kind"] == ("translator" if session.is_encoder_decoder else "decoder-only")


def test_the_records_attention_is_the_sessions(session):
    attention = json.loads(export.to_json("tiny", session))["attention"]
    self_attention = attention["self"]
    assert self_attention["choices"] == ["mean"] + [str(h) for h in range(session.config.n_heads)]
    layer = session.config.n_layers - 1
    expected = session.self_attention(layer)  # (heads, T, T)
    rows = self_attention["weights"][layer][2]  # head 1
    assert [len(row) for row in rows] == list(range(1, len(session.token_ids) + 1))  # causal: keys 0..q
    for q, row in enumerate(rows):
        np.testing.assert_allclose(row, expected[1, q, : q + 1], atol=1e-5)
    np.testing.assert_allclose(self_attention["weights"][layer][0][-1], expected.mean(axis=0)[-1], atol=1e-5)
    if session.is_encoder_decoder:
        np.testing.assert_allclose(attention["cross"]["weights"][0][1], session.cross_attention(0)[0], atol=1e-5)
        np.testing.assert_allclose(attention["encoder"]["weights"][0][1], session.encoder_attention(0)[0], atol=1e-5)
        assert attention["encoder"]["key_tokens"] == session.source_texts()
    else:
        assert set(attention) == {"self"}


def test_a_long_session_keeps_what_fits_and_says_so(checkpoints):
    session = stepped(checkpoints["gpt2"], "one two three four five six", steps=6)
    n, layers, heads = len(session.token_ids), session.config.n_layers, session.config.n_heads
    everything = layers * (heads + 1) * n * n
    exports = {e.kind: e for e in export.attention_exports(session, max_cells=everything)}
    assert exports["self"].choices[1:] and exports["self"].first_query == 0
    average = export.attention_exports(session, max_cells=everything - 1)[0]
    assert average.choices == ["mean"] and average.first_query == 0 and "average" in average.detail
    last_rows = export.attention_exports(session, max_cells=layers * n * 3)[0]
    assert last_rows.first_query == n - 3 and f"queries {n - 3} to {n - 1}" in last_rows.detail
    np.testing.assert_allclose(last_rows.weights[1, 0], session.self_attention(1).mean(axis=0)[n - 3 :], atol=1e-6)
    rows = last_rows.as_json()["weights"][1][0]
    assert [len(r) for r in rows] == [n - 2, n - 1, n]  # still only the keys each query may read


def test_the_page_holds_every_layer_and_head_and_the_text(session):
    page = export_html("tiny <model>", session)
    assert page.startswith("<!doctype html>") and "tiny &lt;model&gt;" in page
    data = json.loads(page.split('id="attention-data">')[1].split("</script>")[0].replace("<\\/", "</"))
    self_attention = data["self"]
    assert len(self_attention["z"]) == session.config.n_layers
    z = decode_array(self_attention["z"][1][3])  # layer 1, head 2
    expected = session.self_attention(1)[2]
    future = np.triu(np.ones_like(expected, dtype=bool), k=1)
    assert np.isnan(z[future]).all()  # the masked future is a gap over the grey background
    np.testing.assert_allclose(z[~future], expected[~future], atol=1e-6)
    assert self_attention["titles"][1][3].endswith("layer 1, head 2")
    assert ("cross" in data) == session.is_encoder_decoder
    assert "Plotly" in page  # plotly.js inlined: the page needs no network


def test_no_text_can_close_the_pages_script():
    value = {"token": "a</script><script>alert(1)</script>", "title": "</SCRIPT"}
    written = script_json(value)
    assert "</" not in written and json.loads(written) == value  # "<\\/" is JSON's own escape of "</"


def test_the_page_greys_a_sliding_layers_far_past_as_the_app_does(checkpoints):
    """Gemma 3's tiny checkpoint: layer 0 reads a window of 6, layer 1 everything before."""
    session = stepped(checkpoints["gemma3_text"], "A window of six slides along the text", steps=2)
    page = export_html("tiny gemma", session)
    data = json.loads(page.split('id="attention-data">')[1].split("</script>")[0].replace("<\\/", "</"))["self"]
    n = len(session.token_ids)
    rows, cols = np.indices((n, n))
    future, too_far = cols > rows, cols <= rows - 6
    assert too_far.any()
    assert (np.isnan(decode_array(data["z"][0][0])) == (future | too_far)).all()
    assert (np.isnan(decode_array(data["z"][1][0])) == future).all()
    assert data["titles"][0][0].endswith("sliding window of 6: hatched = later, or 6 or more back")
    assert data["titles"][1][0].endswith("layer 1, average of all heads")
