"""Switching the model and back keeps what the user did (a stranger's fresh eyes: Generate 33
tokens on SmolLM2, look at the translator, come back: the 33 were gone without a word)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from explorer.ui import lifecycle

REQUEST = SimpleNamespace(session_hash="test-model-switch")
SETTINGS = (False, True, 0.0, 0, 1.0, 0)  # chat, cache, temperature, top-k, top-p, seed


@pytest.fixture
def two(checkpoints):
    return str(checkpoints["llama"]), str(checkpoints["gpt2"])


def switch(st, name: str, text: str):
    out = lifecycle.on_model_change.__wrapped__(REQUEST, name, st, text, *SETTINGS)
    return out["state"] if st is None else st, out


def test_coming_back_to_a_model_shows_its_session_as_it_was_left(two):
    first, second = two
    st, _ = switch(None, first, "one two three")
    st.session.step()
    st.session.step()
    st.layer, st.head = 1, "1"
    tokens = list(st.session.token_ids)

    switch(st, second, "one two three")  # the same text on the other model: a session of its own
    assert st.model_name == second and len(st.session.token_ids) < len(tokens)
    st.session.step()

    _, out = switch(st, first, "one two three")
    assert st.model_name == first
    assert list(st.session.token_ids) == tokens  # both tokens back, read again through the model
    assert (st.layer, st.head) == (1, "1")  # and the view
    assert "session is back as you left it (2 generated tokens)" in out["status"]

    _, out = switch(st, second, "one two three")  # the other way too: its one token
    assert len(st.session.generated_ids) == 1
    assert "(1 generated token)" in out["status"]


def test_a_text_typed_since_starts_anew(two):
    first, second = two
    st, _ = switch(None, first, "one two three")
    st.session.step()
    switch(st, second, "one two three")
    _, out = switch(st, first, "four five six")  # typed in the box before coming back
    assert st.session.text == "four five six" and not st.session.generated_ids
    assert "back as you left it" not in out["status"]


def test_a_session_without_tokens_of_its_own_is_not_brought_back(two):
    first, second = two
    st, _ = switch(None, first, "one two three")
    switch(st, second, "one two three")
    _, out = switch(st, first, "one two three")
    assert not st.session.generated_ids and "back as you left it" not in out["status"]
