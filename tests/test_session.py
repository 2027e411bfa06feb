"""The session API: stepping, undo, forcing, sampling, finishing."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import explorer


@pytest.fixture(scope="module")
def gpt2(checkpoints):
    return explorer.load_model(str(checkpoints["gpt2"]))


def test_step_result_fields(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    prompt = list(session.token_ids)
    result = session.step()
    assert session.token_ids == [*prompt, result.token_id]
    assert result.position == len(prompt)
    assert result.elapsed_ms > 0 and result.cache_bytes > 0 and result.use_cache
    assert result.token_text == session.token_texts()[-1]
    ids = [t.token_id for t in result.top_k]
    assert result.token_id == ids[0]  # greedy takes the most probable token
    probs = [t.probability for t in result.top_k]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0 + 1e-6
    # The step ran the fused kernel: it kept the queries and keys attention is computed from, not probabilities.
    assert "decoder.0.self_attn.q" in result.trace and "decoder.0.self_attn.probs" not in result.trace


def test_undo_never_removes_the_prompt(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    prompt = list(session.token_ids)
    first = session.step().token_id
    before = session.next_logits()
    session.step()
    session.undo()
    assert session.token_ids == [*prompt, first]
    assert (session.next_logits() - before).abs().max() <= 1e-5
    assert session.self_attention(0).shape[1] == len(prompt) + 1
    session.undo()
    with pytest.raises(explorer.InputError, match="Nothing to undo"):
        session.undo()
    assert session.token_ids == prompt


def test_the_candidates_kept_for_the_page_follow_every_step_and_undo(gpt2):
    """The top candidates are kept until the next position's logits come (the page asks, the next
    step records them): after a step, an undo or a Reset's pass they are the new distribution's."""
    session = explorer.GenerationSession(gpt2, "The quick brown fox")

    def fresh(k):
        values, ids = session.next_token_probabilities().topk(k)
        return ids.tolist(), values.tolist()

    def shown(k=None):
        top = session.top_candidates(k)
        return [t.token_id for t in top], [t.probability for t in top]

    first = shown()
    assert shown() == first == fresh(session.n_top)
    assert shown(3) == fresh(3)  # another count is not the kept one cut short
    session.step()
    assert shown() == fresh(session.n_top) != first
    session.undo()  # the last token is run again: the same candidates, from new logits
    assert shown() == fresh(session.n_top) and shown()[0] == first[0]
    session.set_use_cache(False)
    assert shown() == fresh(session.n_top) and shown()[0] == first[0]


def test_force_a_candidate_then_undo(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    candidate = session.top_candidates()[2]
    result = session.force(candidate.token_id)
    assert result.forced and session.token_ids[-1] == candidate.token_id
    assert result.top_k[2].token_id == candidate.token_id
    session.undo()
    assert session.step().token_id == result.top_k[0].token_id  # greedy again after the branch
    with pytest.raises(explorer.InputError, match="outside the vocabulary"):
        session.force(10**9)


def test_sampling_is_seeded_per_position(gpt2):
    def sample(seed):
        s = explorer.GenerationSession(gpt2, "The quick brown fox", temperature=1.5, top_k=50, top_p=0.95, seed=seed)
        return [s.step().token_id for _ in range(12)]

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)
    s = explorer.GenerationSession(gpt2, "The quick brown fox", temperature=1.0, seed=3)
    first = s.step().token_id
    s.undo()
    assert s.step().token_id == first  # the same position draws the same random number


def test_finished_session_refuses_to_step(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    session = explorer.GenerationSession(loaded, "The quick brown fox")
    session.force(loaded.config.eos_token_id)
    assert session.finished
    with pytest.raises(explorer.SessionFinished, match="end token"):
        session.step()
    session.undo()
    assert not session.finished


def test_translator_session(checkpoints):
    loaded = explorer.load_model(str(checkpoints["marian"]))
    session = explorer.GenerationSession(loaded, "twenty-one")
    assert session.token_ids == [loaded.config.decoder_start_token_id]
    assert session.source_ids[-1] == loaded.config.eos_token_id
    for _ in range(4):
        session.step()
    T, S = len(session.token_ids), len(session.source_ids)
    assert session.cross_attention(1).shape == (loaded.config.n_heads, T, S)
    assert session.encoder_attention(0).shape == (loaded.config.n_heads, S, S)
    with pytest.raises(explorer.InputError, match="layer 7 does not exist"):
        session.cross_attention(7)


def test_decoder_only_has_no_cross_attention(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    with pytest.raises(explorer.InputError, match="only for translators"):
        session.cross_attention(0)


def test_switching_the_cache_keeps_the_tokens(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    reference = explorer.GenerationSession(gpt2, "The quick brown fox")
    for use_cache in (False, True, False, True):
        session.set_use_cache(use_cache)
        assert session.step().use_cache is use_cache
        reference.step()
    assert session.token_ids == reference.token_ids
    assert [t.use_cache for t in session.timings] == [False, True, False, True]


@pytest.mark.slow
def test_chat_template(smollm2):
    session = explorer.GenerationSession(smollm2, "What is 2+2?", chat=True)
    texts = session.token_texts()
    assert texts[0] == "<|im_start|>" and "".join(texts).endswith("assistant\n")
    assert "What" in "".join(texts)


@pytest.mark.slow
def test_token_texts_are_readable(smollm2):
    session = explorer.GenerationSession(smollm2, "naïve café 🍕\n  done")
    texts = session.token_texts()
    assert not any("Ġ" in t or "Ċ" in t for t in texts)
    # The emoji spans three byte pieces: the two partial ones show their bytes, the last the emoji.
    emoji = texts.index("🍕")
    assert texts[emoji - 2 : emoji] == ["<20 f0 9f>", "<8d>"]
    whole = [t for t in texts if not t.startswith("<")]
    assert "".join(whole) == "naïve café🍕\n  done"


def test_query_attention_is_one_row_of_every_layer(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox jumps")
    session.step()
    for position in (2, len(session.token_ids) - 1):
        rows = session.query_attention(position)  # (layers, heads, position + 1)
        assert rows.shape == (gpt2.config.n_layers, gpt2.config.n_heads, position + 1)
        for layer in range(gpt2.config.n_layers):
            # one row computed alone, against the whole matrix: the same numbers up to float rounding
            assert np.allclose(rows[layer], session.self_attention(layer)[:, position, : position + 1], atol=1e-6)


def test_replace_last_is_undo_then_force(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    session.step()
    other = session.steps[-1].top_k[3].token_id
    session.replace_last(other)
    twin = explorer.GenerationSession(gpt2, "The quick brown fox")
    twin.force(other)
    assert session.token_ids == twin.token_ids and session.steps[-1].forced
    assert (session.next_logits() - twin.next_logits()).abs().max() <= 1e-5
    empty = explorer.GenerationSession(gpt2, "The quick brown fox")
    with pytest.raises(explorer.InputError, match="no generated token to replace"):
        empty.replace_last(other)


def test_set_sampling_changes_only_what_comes_next(gpt2):
    session = explorer.GenerationSession(gpt2, "The quick brown fox")
    greedy = session.step().token_id
    session.set_sampling(1.5, 50, 0.9, 7)
    assert session.token_ids[-1] == greedy
    assert (session.sampling.temperature, session.sampling.top_k, session.sampling.top_p) == (1.5, 50, 0.9)
    sampled = [session.step().token_id for _ in range(4)]
    twin = explorer.GenerationSession(gpt2, "The quick brown fox", temperature=1.5, top_k=50, top_p=0.9, seed=7)
    twin.force(greedy)
    assert [twin.step().token_id for _ in range(4)] == sampled  # the seed fixes the draws by position


def test_replay_marks_forced_tokens_and_refuses_before_running(gpt2):
    original = explorer.GenerationSession(gpt2, "The quick brown fox")
    original.step()
    original.force(original.top_candidates()[1].token_id)
    original.step()
    replayed = explorer.GenerationSession(gpt2, "The quick brown fox")
    replayed.replay(original.generated_ids, forced={1})
    assert replayed.token_ids == original.token_ids
    assert [s.forced for s in replayed.steps] == [False, True, False]
    fresh = explorer.GenerationSession(gpt2, "The quick brown fox")
    with pytest.raises(explorer.InputError, match="token 1 is id 99999"):
        fresh.replay([5, 99999])
    assert fresh.generated_ids == []  # nothing ran: the bad id was found first
    with pytest.raises(explorer.InputError, match="at most 128 positions"):
        fresh.replay([5] * 200)


@pytest.mark.parametrize("family", ["gpt2", "gemma3_text", "t5", "marian"])
def test_a_session_is_freed_as_soon_as_it_is_dropped(checkpoints, family):
    """No reference cycles: a dropped session's tensors go at once, not at Python's rare full
    garbage collection (a class's server grew by ~2 GB of old sessions waiting for it: issue 12)."""
    loaded = explorer.load_model(str(checkpoints[family]), progress=False)
    gc.disable()
    try:
        session = explorer.GenerationSession(loaded, "one two three four")
        session.step()
        session.self_attention(0)  # keeps the rows of a layer a view asked for
        if session.is_encoder_decoder:
            session.cross_attention(0)
        session.undo()
        session.step()
        dropped = weakref.ref(session)
        del session
        assert dropped() is None
    finally:
        gc.enable()


def test_the_attention_rows_a_view_computed_grow_by_a_quarter_not_double():
    """The rows of the layer on screen are square, (heads, rows, rows): doubling the rows when the
    first step came after a ~190-token prompt held four times their bytes (160 MB over a class of
    30 SmolLM2 sessions)."""
    from explorer.model.cache import grown_capacity
    from explorer.session.attention_store import AttentionRows

    rows = AttentionRows(heads=2, keys_fixed=None, limit=4096)
    rows.extend(np.ones((2, 190, 190), dtype=np.float32))  # the prompt's rows
    rows.extend(np.ones((2, 1, 191), dtype=np.float32))  # a step's
    assert rows.buffer.shape[1] == rows.buffer.shape[2] <= grown_capacity(191)  # 380 when doubled
    expected = np.zeros((2, 191, 191), dtype=np.float32)
    expected[:, :190, :190] = expected[:, 190] = 1.0
    assert np.array_equal(rows.view(0, 191, 191), expected)
