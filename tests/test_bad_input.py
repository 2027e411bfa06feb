"""Bad input, tried systematically (hypothesis): a clear message, and the session as it was.

Text from every corner of Unicode (control characters, lone surrogates, right-to-left and
emoji, many scripts, 100,000 characters) either starts a session that steps, or is refused
with an ``InputError`` whose message says what to do. Operations that cannot be done (a step
when the window is full, a layer or a position that does not exist, a token outside the
vocabulary, an undo past the prompt) are refused the same way and change nothing.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import explorer
from explorer.session import InputError

RTL = "مرحبا بالعالم، שלום עולם"
SCRIPTS = "Ελληνικά Русский 日本語 한국어 हिन्दी ไทย ქართული Ꭰꮳ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"
EMOJI = "👩‍👩‍👧‍👦 🏳️‍🌈 🇩🇪 ✊🏽"
FAMOUS = [
    "", " ", "\n\t\r", "\x00", "\x00\x01\x02", "\u200b\u200c\u200d", "\u202eevil\u202c", "\ud800", "a\udfffb",
    RTL, SCRIPTS, EMOJI, "x" * 100_000, "the " * 25_000, "\ufeff", "\U0010ffff",
]  # fmt: skip
TEXTS = st.one_of(
    st.sampled_from(FAMOUS),
    st.text(max_size=60),  # any code point, lone surrogates included
    st.text(st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp", "Mn"]), max_size=30),
    st.text(st.sampled_from(RTL + SCRIPTS + EMOJI + " \n"), min_size=1, max_size=40),
    st.text(min_size=1, max_size=20).map(lambda s: s * 6000),  # huge
)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
PRIVATE = re.compile(r"(/home/|/root/|/tmp/|/work/|/usr/|site-packages|\\\\Users\\\\)")


def assert_clear(error: Exception) -> None:
    """A message a person can act on, that shows nothing of the server's file system."""
    message = str(error)
    assert len(message) > 15, message
    assert not PRIVATE.search(message), message


@pytest.fixture(scope="module")
def models(checkpoints, smollm2):
    """A byte-level BPE model, a SentencePiece translator, and the real SmolLM2 tokenizer."""
    return [explorer.load_model(str(checkpoints["gpt2"])), explorer.load_model(str(checkpoints["marian"])), smollm2]


@SETTINGS
@given(text=TEXTS)
def test_any_text_starts_a_session_or_says_why(models, text):
    for loaded in models:
        try:
            session = explorer.GenerationSession(loaded, text, max_positions=256)
        except InputError as error:
            assert_clear(error)
            continue
        prompt = list(session.token_ids)
        session.step()
        assert session.token_ids[: len(prompt)] == prompt and len(session.token_ids) == len(prompt) + 1
        texts = session.token_texts()
        assert len(texts) == len(session.token_ids) and all(isinstance(t, str) for t in texts)
        texts_joined = "".join(texts + session.source_texts())
        texts_joined.encode("utf-8")  # what the page shows can be sent: no lone surrogates left


OPERATIONS = st.sampled_from(["step", "undo", "force", "bad token", "bad layer", "bad position", "negative"])


def fingerprint(session) -> tuple:
    return (
        list(session.token_ids),
        len(session.steps),
        session.self_history.rows,
        session.cache.length if session.cache is not None else None,
        session.next_logits().sum().item(),
    )


@SETTINGS
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=25))
def test_refused_operations_change_nothing(models, operations):
    gpt2 = models[0]
    session = explorer.GenerationSession(gpt2, "Hello", max_positions=12)  # a small window
    n_layers = session.config.n_layers
    for operation in operations:
        before = fingerprint(session)
        try:
            if operation == "step":
                session.step()
            elif operation == "undo":
                session.undo()
            elif operation == "force":
                session.force(5)
            elif operation == "bad token":
                session.force(session.config.vocab_size + 3)
            elif operation == "bad layer":
                session.self_attention(n_layers)
            elif operation == "bad position":
                session.query_attention(len(session.token_ids))
            elif operation == "negative":
                session.self_attention(-1)
        except (InputError, explorer.ContextWindowError) as error:
            assert_clear(error)
            assert fingerprint(session) == before, operation
    assert len(session.token_ids) <= 12


def test_a_full_window_says_what_to_do(models):
    session = explorer.GenerationSession(models[0], "Hello", max_positions=8)
    while len(session.token_ids) < 8:
        session.step()
    before = fingerprint(session)
    with pytest.raises(explorer.ContextWindowError, match="Undo some tokens or Reset"):
        session.step()
    assert fingerprint(session) == before
    session.undo()
    session.step()  # and it goes on after an undo
