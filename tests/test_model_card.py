"""The model card and licence one click from the page (issue 44, item 1): ``GET
/model-card/<name>`` and ``/model-card/<name>/licence``, offline, for registered names only."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from explorer.loading.registry import GEMMA3_MODEL, REGISTRY, TRANSLATOR_MODEL
from explorer.present import model_store
from explorer.ui import model_card, render


def client() -> TestClient:
    app = FastAPI()
    model_card.add_routes(app)
    return TestClient(app)


def test_gemmas_card_names_its_terms_and_serves_the_shipped_copy_with_no_script_run():
    card = client().get("/" + model_card.link(GEMMA3_MODEL))
    assert card.status_code == 200 and "Gemma Terms of Use" in card.text
    assert f'href="{GEMMA3_MODEL}/licence"' in card.text  # relative to the card's own address
    licence = client().get(f"/model-card/{GEMMA3_MODEL}/licence")
    assert licence.status_code == 200 and "Gemma Terms of Use" in licence.text
    assert "Gemma Terms of Use" in REGISTRY[GEMMA3_MODEL].licence_file().read_text(encoding="utf-8")
    assert "<script" not in licence.text and "<style>body{" in licence.text  # the terms alone, on our page
    assert "Definitions" in licence.text  # the terms' own first section
    assert "default-src 'none'" in licence.headers["content-security-policy"]  # its scripts do not run


def test_a_loaded_models_card_shows_its_architecture_and_the_page_links_to_it():
    loaded = model_store.get_model(TRANSLATOR_MODEL, progress=False)
    card = client().get(f"/model-card/{TRANSLATOR_MODEL}")
    assert "query heads / key-value heads" in card.text and f"{loaded.config.n_heads} / " in card.text
    assert f"]({model_card.link(TRANSLATOR_MODEL)})" in render.model_info(loaded)


def test_only_registered_names_have_a_card_and_their_text_is_escaped():
    assert client().get("/model-card/../../etc/passwd").status_code == 404
    assert client().get("/model-card/gpt2/licence").text == REGISTRY["gpt2"].licence  # no shipped file
    hub_id = "HuggingFaceTB/SmolLM2-135M-Instruct"  # a name with a slash
    assert client().get(f"/model-card/{hub_id}").status_code == 200
    assert "<script" not in client().get("/model-card/<script>alert(1)</script>").text
