"""Steps of many sessions in one batch (explorer/batching.py): every session gets exactly the
step it would have had alone, on four families (one with sliding windows), at different lengths, with the cache on and
off, and with sessions that cannot step in the same batch."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import explorer
from explorer.batching import BatchStats, StepBatcher, batched_step, step_together
from explorer.errors import InputError
from explorer.model import ContextWindowError
from explorer.session import SessionFinished
from explorer.tokens import continuation_texts, continuation_texts_of_rows

TEXTS = {
    "gpt2": ["The quick brown fox jumps over the lazy dog.", "def add(a, b):", "Attention"],
    "llama": ["Transformers generate text one token at a time.", "The", "Attention is all you need"],
    "gemma3_text": ["A window of six slides along the text", "def add(a, b):", "Attention is all you need"],
    "marian": ["twenty-one", "three hundred and forty-two", "Wednesday, March 3, 2021"],
}


@pytest.fixture(scope="module", params=list(TEXTS))
def family(request, checkpoints):
    return request.param, explorer.load_model(str(checkpoints[request.param]), progress=False)


def sessions_of(loaded, texts, **settings):
    return [explorer.GenerationSession(loaded, text, **settings) for text in texts]


def assert_same(batched, alone):
    assert batched.token_ids == alone.token_ids
    assert float((batched.next_logits() - alone.next_logits()).abs().max()) <= 1e-5
    for layer in range(batched.config.n_layers):
        np.testing.assert_allclose(batched.self_attention(layer), alone.self_attention(layer), atol=1e-5)
        if batched.is_encoder_decoder:
            np.testing.assert_allclose(batched.cross_attention(layer), alone.cross_attention(layer), atol=1e-5)
    if batched.newest_residuals is not None:
        assert float((batched.newest_residuals - alone.newest_residuals).abs().max()) <= 1e-4


def test_a_batch_of_different_lengths_equals_each_alone(family):
    name, loaded = family
    together, alone = sessions_of(loaded, TEXTS[name]), sessions_of(loaded, TEXTS[name])
    assert len({len(s.token_ids) for s in together}) > 1 or loaded.is_encoder_decoder
    for _ in range(6):
        active = [s for s in together if not s.finished]
        if len(active) < 2:
            break
        results = batched_step(active)
        assert [r.token_id for r in results] == [s.token_ids[-1] for s in active]
        for session in alone:
            if not session.finished and len(session.token_ids) < max(len(t.token_ids) for t in together):
                session.step()
    for batched, single in zip(together, alone, strict=True):
        assert_same(batched, single)
    # A session goes on alone after batched steps (the page's undo, a branch), and back into a batch.
    for _ in range(3):
        active = [s for s in together if not s.finished]
        for session in active:
            session.step()
        for session in alone:
            if not session.finished:
                session.step()
    for _ in range(2):
        step_together(together)
        for session in alone:
            if not session.finished:
                session.step()
    for batched, single in zip(together, alone, strict=True):
        assert_same(batched, single)


def test_sampling_stays_each_sessions_own(family):
    name, loaded = family
    settings = [dict(temperature=1.2, seed=s) for s in (1, 2, 3)]
    together = [explorer.GenerationSession(loaded, TEXTS[name][0], **kw) for kw in settings]
    alone = [explorer.GenerationSession(loaded, TEXTS[name][0], **kw) for kw in settings]
    for _ in range(4):
        results = step_together(together)
        for session, result in zip(alone, results, strict=True):
            if isinstance(result, Exception):
                with pytest.raises(type(result)):
                    session.step()
            else:
                session.step()
    for batched, single in zip(together, alone, strict=True):
        assert_same(batched, single)


def test_greedy_and_sampling_sessions_in_one_batch_each_choose_as_alone(family):
    """The batch takes the greedy rows' tokens from one argmax and leaves the sampling rows to
    draw with their own seeds: a mixed batch, in any order, gives each row its own tokens."""
    name, loaded = family
    settings = [dict(temperature=1.3, seed=7), {}, dict(temperature=0.8, top_k=5, seed=3), {}]
    texts = [TEXTS[name][i % len(TEXTS[name])] for i in range(len(settings))]
    together = [explorer.GenerationSession(loaded, t, **kw) for t, kw in zip(texts, settings, strict=True)]
    alone = [explorer.GenerationSession(loaded, t, **kw) for t, kw in zip(texts, settings, strict=True)]
    for _ in range(3):
        results = step_together(together)
        for session, result in zip(alone, results, strict=True):
            if isinstance(result, Exception):
                with pytest.raises(type(result)):
                    session.step()
            else:
                assert result.token_text == session.step().token_text
    for batched, single in zip(together, alone, strict=True):
        assert_same(batched, single)


def test_the_texts_of_many_rows_candidates_are_each_rows_own(family):
    """A batch decodes every row's candidates' texts at once: each row gets the texts it gets
    alone (a character split over tokens included), and a text's pieces add up to the text."""
    name, loaded = family
    tokenizer = loaded.tokenizer
    ids = tokenizer("café 🙂 " + TEXTS[name][0])["input_ids"]
    contexts = [ids[:i] for i in range(len(ids))]
    candidates = [[ids[i], *ids[:3]] for i in range(len(ids))]
    rows = continuation_texts_of_rows(tokenizer, contexts, candidates)
    assert rows == [continuation_texts(tokenizer, c, k) for c, k in zip(contexts, candidates, strict=True)]
    plain = tokenizer(TEXTS[name][0], add_special_tokens=False)["input_ids"]
    pieces = continuation_texts_of_rows(tokenizer, [plain[:i] for i in range(len(plain))], [[t] for t in plain])
    assert "".join(row[0] for row in pieces).strip() == tokenizer.decode(plain).strip()


def test_each_batched_step_records_the_candidates_it_would_have_recorded_alone(family):
    """The candidates a batch finds for all its rows at once (one softmax and top-k) are each
    row's own, in order, with their texts: rows with different numbers of candidates included."""
    name, loaded = family
    counts = [10, 3, 10]
    together = [explorer.GenerationSession(loaded, text, n_top=n) for text, n in zip(TEXTS[name], counts, strict=True)]
    alone = [explorer.GenerationSession(loaded, text, n_top=n) for text, n in zip(TEXTS[name], counts, strict=True)]
    batched = batched_step(together)
    for session, result in zip(alone, batched, strict=True):
        assert result.top_k == session.step().top_k
        assert len(result.top_k) == session.n_top


def test_the_cache_off_and_sessions_that_cannot_step_do_not_disturb_the_batch(family):
    name, loaded = family
    finished = explorer.GenerationSession(loaded, TEXTS[name][0])
    finished.force(loaded.config.eos_token_id)  # its text has ended
    full = explorer.GenerationSession(
        loaded, TEXTS[name][1], max_positions=len(loaded.tokenizer(TEXTS[name][1])["input_ids"]) + 1
    )
    while len(full.token_ids) < full.max_positions:
        full.step()
    uncached = explorer.GenerationSession(loaded, TEXTS[name][2], use_cache=False)
    fine = sessions_of(loaded, TEXTS[name][:2])
    mixed = [fine[0], finished, full, uncached, fine[1]]
    results = step_together(mixed)
    assert isinstance(results[1], SessionFinished) and isinstance(results[2], ContextWindowError)
    assert isinstance(results[1], InputError)  # the page shows it as a message
    alone = [*sessions_of(loaded, TEXTS[name][:2]), explorer.GenerationSession(loaded, TEXTS[name][2])]
    for session in alone:
        session.step()
    assert_same(fine[0], alone[0])
    assert_same(fine[1], alone[1])
    assert_same(uncached, alone[2])  # the cache off steps alone, with the same result as the cache on


def test_a_failed_pass_leaves_every_session_as_it_was(family):
    name, loaded = family
    sessions = sessions_of(loaded, TEXTS[name][:2])
    before = [list(s.token_ids) for s in sessions]
    lengths = [s.cache.length for s in sessions]
    sessions[0].record = explorer.model.Record.of("attention")  # a batch cannot give probabilities
    with pytest.raises(ValueError, match="runs alone"):
        batched_step(sessions)
    assert [s.token_ids for s in sessions] == before
    assert [s.cache.length for s in sessions] == lengths


def test_the_batcher_serves_many_threads(family):
    name, loaded = family
    texts = TEXTS[name] * 3
    together, alone = sessions_of(loaded, texts), sessions_of(loaded, texts)
    batcher = StepBatcher()
    errors = []

    def user(session):
        for _ in range(4):
            try:
                batcher.step(session)
            except SessionFinished:
                return
            except Exception as error:
                errors.append(error)

    threads = [threading.Thread(target=user, args=(s,)) for s in together]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert max(batcher.stats.batches) > 1 and batcher.stats.fell_back == 0  # users who wait at once share a pass
    for batched, single in zip(together, alone, strict=True):
        while len(single.token_ids) < len(batched.token_ids):
            single.step()
        assert_same(batched, single)


def test_what_a_batch_grows_stays_writable_by_a_step_alone(family):
    """A batched step that grows a session's buffers, then that session's step alone (an Undo or
    a forced token run alone): the buffers must not be frozen by the batch's inference mode."""
    name, loaded = family
    session, other = sessions_of(loaded, TEXTS[name][:2])
    token = next(t for t in range(5, loaded.config.vocab_size) if t != loaded.config.eos_token_id)
    capacity = session.attention.self_inputs.kept.capacity  # the blocks it holds in the record store
    while len(session.token_ids) < capacity:  # fill the kept rows to their capacity
        session.force(token)
    batched_step([session, other])  # this step grows them
    session.force(token)
    session.undo()
    reference = explorer.GenerationSession(loaded, TEXTS[name][0])
    reference.replay(session.generated_ids)
    assert_same(session, reference)


def test_a_batched_pass_that_fails_is_logged_counted_and_each_session_steps_alone(family, monkeypatch, caplog):
    """Not swallowed (issue 27): the failure reaches the log with its traceback, the stats count a
    fall-back and no batch, and every session still gets the step it would have had alone."""
    from explorer import batching

    name, loaded = family
    together, alone = sessions_of(loaded, TEXTS[name][:2]), sessions_of(loaded, TEXTS[name][:2])

    def broken(group):
        raise RuntimeError("a bug in the batched pass")

    monkeypatch.setattr(batching, "batched_step", broken)
    stats = batching.BatchStats()
    with caplog.at_level("ERROR", logger="decoder_explorer"):
        results = step_together(together, stats)
    assert stats.fell_back == 1 and stats.batches == []
    failure = next(r for r in caplog.records if "batched step of 2 sessions failed" in r.getMessage())
    assert failure.exc_info and "a bug in the batched pass" in str(failure.exc_info[1])
    for result, single in zip(results, alone, strict=True):
        assert result.token_id == single.step().token_id


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_step_alone_whose_pass_fails_leaves_the_session_as_it_was(family, monkeypatch, use_cache):
    """The step object rolls back a failed pass alone as a batched one does: the token it began,
    and the cache entries the layers before the failure wrote. The next step is the step a
    session that never failed takes."""
    name, loaded = family
    session, reference = sessions_of(loaded, TEXTS[name][:1] * 2, use_cache=use_cache)
    before, cached = list(session.token_ids), session.cache_bytes and session.cache.length
    last_layer = loaded.model.decoder.layers[-1]

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the last layer")

    monkeypatch.setattr(last_layer, "forward", broken)
    with pytest.raises(RuntimeError, match="a bug in the last layer"):
        session.step()
    monkeypatch.undo()
    assert session.token_ids == before
    assert (session.cache_bytes and session.cache.length) == cached
    assert len(session.steps) == len(session.timings) == 0
    session.step()
    reference.step()
    assert_same(session, reference)


def test_when_a_pass_fails_each_waiting_thread_raises_its_own_error(monkeypatch):
    """The batcher's worker hands every thread of a failed pass its own copy of the error, the
    pass's error as its cause: one object raised in many threads would gather all their tracebacks."""
    import explorer.batching as batching

    failed = InputError("the pass failed")
    gate = threading.Barrier(9)

    def fails(sessions, stats=None):
        raise failed

    monkeypatch.setattr(batching, "step_together", fails)
    batcher, raised, lock = StepBatcher(), [], threading.Lock()

    def user(session):
        gate.wait()
        try:
            batcher.step(session)
        except InputError as error:
            with lock:
                raised.append(error)

    threads = [threading.Thread(target=user, args=(object(),)) for _ in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(raised) == 9
    assert len({id(error) for error in raised}) == 9, "threads were handed one exception object"
    assert all(error.__cause__ is failed and str(error) == "the pass failed" for error in raised)


def policies_for(config):
    """One policy of each kind that fits the model (rotary models also turn keys to their rank, but
    those with sliding layers, whose windows count the text's positions: sinks keep theirs)."""
    from explorer import cache_policies as cp

    policies = [cp.window(5), cp.heavy_hitters(3, 2), cp.key_norm(6), cp.snapkv(4, observe=2), cp.quantized(4, 4, 2)]
    if any(config.windows()):  # Gemma 3's window of 6: each policy here evicts within it too
        return [*policies, cp.sinks(2, 5), cp.quantized(8, 4, 2, under=cp.heavy_hitters(3, 2))]
    return policies + ([cp.sinks(2, 5, cache_positions=True)] if config.positions == "rope" else [])


def test_sessions_under_cache_policies_step_in_the_batch_as_alone(family):
    """A cache policy is no reason to step alone: the batch shares the products, the policy rows
    attend apart over what their policy kept, and every session gets the step it had alone."""
    name, loaded = family
    if loaded.is_encoder_decoder:
        pytest.skip("a translator's policies are checked in test_cache_policies")
    policies = policies_for(loaded.config)
    text = TEXTS[name][0]

    def make():
        plain = explorer.GenerationSession(loaded, TEXTS[name][1])
        return [plain, *(explorer.GenerationSession(loaded, text, cache_policy=p) for p in policies)]

    together, alone = make(), make()
    stats = BatchStats()
    for _ in range(5):
        results = step_together(together, stats)
        assert not any(isinstance(r, Exception) for r in results), results
        for session in alone:
            session.step()
    assert stats.batches == [len(together)] * 5 and stats.fell_back == 0
    for batched, single in zip(together, alone, strict=True):
        assert batched.token_ids == single.token_ids
        assert float((batched.next_logits() - single.next_logits()).abs().max()) <= 1e-5
        assert batched.cache.nbytes == single.cache.nbytes
        if "qk" in batched.record:
            for layer in range(loaded.config.n_layers):
                np.testing.assert_allclose(batched.self_attention(layer), single.self_attention(layer), atol=1e-5)
                a, b = batched.evicted(layer), single.evicted(layer)
                assert (a is None) == (b is None) and (a is None or (a == b).all())


def test_a_window_in_the_store_gives_back_its_evicted_blocks_and_batches_as_alone(checkpoints):
    """A window (with sinks or not) keeps its positions in the model's store: a block all of whose
    positions left the window goes back (a hole in its table), and its rows in a batch read only
    what the window holds, as alone (against the policy's own slots: ``PolicyCache``)."""
    from explorer import cache_policies as cp
    from explorer.model.paged import HOLE
    from explorer.model.window_cache import WindowedKVCache

    loaded = explorer.load_model(str(checkpoints["llama"]), progress=False)
    text = " ".join(["the cat sat on the mat and looked at the dog"] * 4)
    policies = [cp.window(6), cp.sinks(3, 5)]

    def make():
        return [explorer.GenerationSession(loaded, TEXTS["llama"][1])] + [
            explorer.GenerationSession(loaded, text, cache_policy=p) for p in policies
        ]

    together, alone = make(), make()
    assert all(isinstance(s.cache, WindowedKVCache) for s in together[1:])
    for _ in range(20):
        step_together(together)
        for session in alone:
            session.step()
    for batched, single in zip(together, alone, strict=True):
        assert batched.token_ids == single.token_ids
        assert float((batched.next_logits() - single.next_logits()).abs().max()) <= 1e-5
    for session, policy in zip(together[1:], policies, strict=True):
        n = len(session.token_ids)
        assert n > 16 * 3 and session.cache.sequence.blocks[1] == HOLE  # evicted blocks went back
        sinks = getattr(policy, "sinks", 0)
        assert session.cache.held_positions(0)[0].tolist() == [*range(sinks), *range(n - policy.budget + sinks, n)]
        assert (
            float((policy_cache_logits(loaded, session.token_ids, policy) - session.next_logits()).abs().max()) <= 1e-4
        )


def policy_cache_logits(loaded, ids, policy):
    """(vocab,) the next token's logits with the policy's own slots (``PolicyCache``): one pass
    while it has room, then a token a pass, as generation runs it."""
    from explorer.model.policy_cache import PolicyCache

    cache = PolicyCache(loaded.config.n_layers, policy, rotary=loaded.model.decoder.rotary)
    tokens = torch.tensor([ids])
    bounds = [(0, policy.budget)] + [(i, i + 1) for i in range(policy.budget, len(ids))]
    with torch.inference_mode():
        for a, b in bounds:
            logits = loaded.model(tokens[:, a:b], cache=cache).logits[0, -1]
    return logits
