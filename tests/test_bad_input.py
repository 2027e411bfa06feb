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
from explorer.session import MAX_TEXT_CHARS, InputError

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
# Huge texts are slow to generate and large: the two health checks about that, and only those, are off.
SETTINGS = settings(
    max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)  # fmt: skip
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


def refusal_reasons(text: str) -> tuple[str, ...]:
    """Why a text may be refused: the only reasons there are. Anything else must start a session."""
    if not text.strip():
        return ("is empty",)
    if len(text) > MAX_TEXT_CHARS:
        return ("characters",)
    if not any(c.isprintable() and not c.isspace() for c in text):  # control characters alone
        return ("produced no tokens", "tokens long")  # a tokenizer may drop them all
    return ("tokens long",)  # more tokens than the window: checked after tokenizing


@SETTINGS
@given(text=TEXTS)
def test_any_text_starts_a_session_or_says_why(models, text):
    for loaded in models:
        try:
            session = explorer.GenerationSession(loaded, text, max_positions=256)
        except InputError as error:
            assert_clear(error)
            assert any(reason in str(error) for reason in refusal_reasons(text)), (text[:40], str(error))
            continue
        prompt = list(session.token_ids)
        session.step()
        assert session.token_ids[: len(prompt)] == prompt and len(session.token_ids) == len(prompt) + 1
        texts = session.token_texts()
        assert len(texts) == len(session.token_ids) and all(isinstance(t, str) for t in texts)
        texts_joined = "".join(texts + session.source_texts())
        texts_joined.encode("utf-8")  # what the page shows can be sent: no lone surrogates left


@pytest.mark.parametrize("text", [RTL, SCRIPTS, EMOJI, "\u202eevil\u202c", "\u200b\u200c\u200d", "\ud800"])
def test_right_to_left_emoji_and_odd_characters_start_a_session(models, text):
    """They start a session on every model; the tiny test models' 128-position window may be too
    short for a long one in byte pieces, and then the message says so and that is true."""
    for loaded in models:
        if len(loaded.tokenizer(text.encode("utf-8", "replace").decode())["input_ids"]) >= loaded.config.max_positions:
            with pytest.raises(InputError, match="tokens long"):
                explorer.GenerationSession(loaded, text)
            assert loaded.name != "smollm2-135m-instruct"
            continue
        session = explorer.GenerationSession(loaded, text)
        session.step()
        assert len(session.generated_ids) == 1


def test_the_character_limit_is_checked_at_its_boundary_and_before_tokenizing(models, monkeypatch):
    """100,000 characters are taken (then refused for their tokens); one more is refused before
    the tokenizer sees the text."""
    gpt2 = models[0]
    with pytest.raises(InputError, match="tokens long"):
        explorer.GenerationSession(gpt2, "a " * (MAX_TEXT_CHARS // 2))
    seen = []
    tokenizer = gpt2.tokenizer
    monkeypatch.setattr(type(tokenizer), "__call__", lambda self, *a, **k: seen.append(a) or {"input_ids": []})
    with pytest.raises(InputError, match="100,001 characters"):
        explorer.GenerationSession(gpt2, "a" * (MAX_TEXT_CHARS + 1))
    assert seen == []


OPERATIONS = st.sampled_from(["step", "undo", "force", "bad token", "bad layer", "bad position", "negative"])


def fingerprint(session) -> tuple:
    return (
        list(session.token_ids),
        len(session.steps),
        session.attention.self_inputs.rows,
        session.cache.length if session.cache is not None else None,
        session.next_logits().sum().item(),
    )


ALWAYS_REFUSED = {
    "bad token": lambda s: s.force(s.config.vocab_size + 3),
    "bad layer": lambda s: s.self_attention(s.config.n_layers),
    "negative": lambda s: s.self_attention(-1),
    "bad position": lambda s: s.query_attention(len(s.token_ids)),
}


@SETTINGS
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=25))
def test_refused_operations_change_nothing(models, operations):
    """Impossible operations are always refused; steps and undos only when the window is full or
    only the prompt is left. A refusal changes nothing."""
    gpt2 = models[0]
    session = explorer.GenerationSession(gpt2, "Hello", max_positions=12)  # a small window
    for operation in operations:
        before = fingerprint(session)
        full = len(session.token_ids) >= 12 or session.finished
        if operation in ALWAYS_REFUSED:
            with pytest.raises(InputError) as error:
                ALWAYS_REFUSED[operation](session)
        elif (operation in ("step", "force") and full) or (operation == "undo" and not session.generated_ids):
            with pytest.raises((InputError, explorer.ContextWindowError)) as error:
                {"step": session.step, "force": lambda: session.force(5), "undo": session.undo}[operation]()
        else:
            {"step": session.step, "force": lambda: session.force(5), "undo": session.undo}[operation]()
            continue
        assert_clear(error.value)
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
