"""Every answer of the web API (explorer/ui/api.py) is bounded, and what would exceed its bound is
refused before any work with a sentence that says what to ask for instead (docs/web-api.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer.errors import InputError
from explorer.ui import api

TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 3)


@pytest.fixture
def tiny(checkpoints, monkeypatch) -> str:
    """The tiny GPT-2's name as an API caller gives it (a folder the operator allows)."""
    monkeypatch.setenv("DECODER_EXPLORER_MODEL_DIRS", str(checkpoints["gpt2"].parent))
    return checkpoints["gpt2"].name


def test_attention_over_too_many_weights_is_refused_before_any_pass(tiny, monkeypatch):
    monkeypatch.setattr(api, "MAX_ATTENTION_WEIGHTS", 1_000)

    def no_pass(*args, **kwargs):
        raise AssertionError("the refusal must come before the model runs the text")

    monkeypatch.setattr(api, "session_for", no_pass)
    with pytest.raises(InputError, match=r"Ask for at most \d+ rows at a time \(query_from=0, query_to=\d+\)"):
        api.attention(tiny, TEXT, [], 0, "mean", "self")
    with pytest.raises(InputError, match="query_to"):  # a range past the text
        api.attention(tiny, TEXT, [], 0, "mean", "self", 0, 10_000)


def test_attention_answers_the_rows_asked_for_and_stays_within_its_bound(tiny, checkpoints, monkeypatch):
    monkeypatch.setattr(api, "MAX_ATTENTION_WEIGHTS", 1_000)
    local = explorer.GenerationSession(explorer.load_model(str(checkpoints["gpt2"]), progress=False), TEXT)
    n = len(local.token_ids)
    rows = api.MAX_ATTENTION_WEIGHTS // n
    answer = api.attention(tiny, TEXT, [], 1, "2", "self", 5, 5 + rows)
    weights = np.array(answer["weights"])
    assert weights.shape == (rows, n) and (answer["query_from"], answer["query_to"]) == (5, 5 + rows)
    np.testing.assert_allclose(weights, local.self_attention(1)[2][5 : 5 + rows], atol=1e-5)
    assert len(json.dumps(answer)) <= api.MAX_ANSWER_BYTES


def test_the_documented_limits_are_the_codes():
    page = (Path(__file__).parents[1] / "docs" / "web-api.md").read_text(encoding="utf-8")
    assert f"{api.MAX_ATTENTION_WEIGHTS:,}" in page and f"{api.MAX_ANSWER_BYTES:,}" in page
