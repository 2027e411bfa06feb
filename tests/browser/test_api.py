"""The app's named web API (explorer/ui/api.py) as a gradio_client user calls it: what the API page
lists, and answers that equal a session run here on the same model."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.ui.api import ENDPOINTS
from tests.browser.conftest import APP_LOG

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TRANSLATOR = "en-de-numbers"


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False, download_files=False)


@pytest.fixture(scope="module")
def translator():
    return explorer.load_model(TRANSLATOR, progress=False)


def test_the_api_page_lists_the_named_endpoints_only(client):
    info = client.view_api(return_format="dict", print_info=False)
    assert set(info["named_endpoints"]) == {f"/{e.__name__}" for e in ENDPOINTS}
    assert not info["unnamed_endpoints"]
    step = {p["parameter_name"] for p in info["named_endpoints"]["/step"]["parameters"]}
    assert {"model", "text", "tokens", "temperature", "seed"} <= step


def test_models_and_load_model_describe_what_is_there(client, translator):
    names = {m["name"]: m for m in client.predict(api_name="/models")}
    assert names["smollm2-135m-instruct"]["available"] and names[TRANSLATOR]["kind"] == "translator"
    described = client.predict(TRANSLATOR, api_name="/load_model")
    c = translator.config
    assert (described["layers"], described["heads"], described["vocab_size"]) == (c.n_layers, c.n_heads, c.vocab_size)


def test_steps_carry_their_tokens_and_equal_a_session_here(client, translator):
    local = explorer.GenerationSession(translator, "twenty-one")
    tokens: list[int] = []
    for _ in range(4):
        answer = client.predict(TRANSLATOR, "twenty-one", tokens, api_name="/step")
        expected = local.step()
        assert answer["token_id"] == expected.token_id and answer["position"] == expected.position
        assert [c["id"] for c in answer["top_k"]] == [t.token_id for t in expected.top_k]
        assert answer["top_k"][0]["probability"] == pytest.approx(expected.top_k[0].probability, abs=1e-5)
        tokens = answer["tokens"]
    assert tokens == local.generated_ids and answer["text"] == local.generated_text()
    decoder = client.predict("smollm2-135m-instruct", "The capital of France is", api_name="/step")
    assert decoder["token_text"] == " Paris" and decoder["tokens"] == [decoder["token_id"]]


def test_attention_of_a_layer_and_head_equals_the_sessions(client, translator):
    local = explorer.GenerationSession(translator, "twenty-one")
    for _ in range(3):
        local.step()
    tokens = local.generated_ids
    self_attention = client.predict(TRANSLATOR, "twenty-one", tokens, 2, "1", "self", api_name="/attention")
    weights = np.array(self_attention["weights"])
    n = len(local.token_ids)
    assert weights.shape == (n, n) and self_attention["query_tokens"] == local.token_texts()
    np.testing.assert_allclose(weights, local.self_attention(2)[1], atol=1e-5)
    assert np.all(np.triu(weights, k=1) == 0)  # the future gets nothing
    cross = client.predict(TRANSLATOR, "twenty-one", tokens, 2, "mean", "cross", api_name="/attention")
    np.testing.assert_allclose(np.array(cross["weights"]), local.cross_attention(2).mean(axis=0), atol=1e-5)
    assert cross["key_tokens"] == local.source_texts()


def test_generate_and_translate(client):
    assert client.predict("twenty-one", api_name="/translate") == "einundzwanzig"
    generated = client.predict(TRANSLATOR, "the 3rd of May", 30, api_name="/generate")
    assert generated["finished"] and generated["text"] == "der 3. Mai"
    short = client.predict("smollm2-135m-instruct", "The capital of France is", 3, api_name="/generate")
    assert len(short["tokens"]) == 3 and not short["finished"]


@pytest.mark.parametrize(
    ("endpoint", "args", "says"),
    [
        ("/load_model", ("no-such-model",), "not offered here"),
        ("/step", (TRANSLATOR, "   "), "empty"),
        ("/step", (TRANSLATOR, "one", [999_999]), "outside this model's vocabulary"),
        ("/attention", (TRANSLATOR, "one", [], 7), "layer 7 does not exist"),
        ("/attention", ("smollm2-135m-instruct", "one", [], 0, "mean", "cross"), "only for translators"),
        ("/attention", (TRANSLATOR, "one", [], 0, "mean", "sideways"), "not one of self, cross, encoder"),
        ("/translate", ("one", "smollm2-135m-instruct"), "not a translator"),
    ],
)
def test_bad_calls_say_what_to_do(client, endpoint, args, says):
    """And the log says it in one line: a refusal is not a bug (the fixture fails on any traceback)."""
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as error:
        client.predict(*args, api_name=endpoint)
    assert says in str(error.value)
    refusals = [line for line in APP_LOG.read_text().splitlines() if f"refused a call of {endpoint}:" in line]
    assert refusals and says in refusals[-1]


@pytest.mark.parametrize(
    ("args", "says"),
    [(("smollm2-135m-instruct", "hi", [], 5.0), "temperature"),
     (("smollm2-135m-instruct", "hi", [1.5]), "generated"),
     (("smollm2-135m-instruct", "hi", [], 0.0, 0, 1.0, 2**40), "seed"),
     (("smollm2-135m-instruct", "hi", [], 0.0, -3), "top_k")],
)  # fmt: skip
def test_steps_with_values_no_control_offers_are_refused_by_name(client, args, says):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=says):
        client.predict(*args, api_name="/step")
    assert client.predict("smollm2-135m-instruct", "The capital of France is", api_name="/step")["token_text"]
