"""The KV cache changes speed, never output: cache on against cache off, for every family."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.model import Record

N_STEPS = 50
PROMPTS = {"gpt2": "The quick brown fox", "llama": "Attention is all", "marian": "twenty-one on March 3"}


def run(loaded, text, use_cache, n_steps=N_STEPS):
    session = explorer.GenerationSession(loaded, text, use_cache=use_cache)
    logits = [session.next_logits()]
    traces = []
    for _ in range(n_steps):
        traces.append(session.step().trace)
        logits.append(session.next_logits())
    return session, torch.stack(logits), traces


def full_forward_attention(session):
    """Attention of one parallel pass over the whole sequence: (layers, heads, T, T), and cross."""
    ids = torch.tensor([session.token_ids])
    with torch.no_grad():
        if session.is_encoder_decoder:
            out = session.model(ids, session.memory, record=Record.of("attention"))
        else:
            out = session.model(ids, record=Record.of("attention"))
    n = session.config.n_layers
    self_attn = [out.trace.self_attention(i)[0].numpy() for i in range(n)]
    cross = [out.trace.cross_attention(i)[0].numpy() for i in range(n)] if session.is_encoder_decoder else []
    return out, self_attn, cross


def check_cache_parity(loaded, text):
    cached, logits_on, traces_on = run(loaded, text, use_cache=True)
    uncached, logits_off, _ = run(loaded, text, use_cache=False)

    assert cached.generated_ids == uncached.generated_ids
    assert len(cached.generated_ids) == N_STEPS
    assert (logits_on - logits_off).abs().max() <= 1e-4
    assert cached.cache_bytes > 0 and uncached.cache_bytes == 0

    out, full_self, full_cross = full_forward_attention(cached)
    # The logits of the parallel pass at every position equal the step-by-step ones.
    steps = logits_on.shape[0]
    assert (out.logits[0, -steps:] - logits_on).abs().max() <= 1e-4
    for layer in range(loaded.config.n_layers):
        # One cached step's own row, in float32, equals the parallel pass's row.
        row = traces_on[-1].self_attention(layer)[0, :, -1]  # (heads, T): the last token's row
        assert np.abs(row.numpy() - full_self[layer][:, -1]).max() <= 1e-5
        # The stitched history (stored as float16) equals the parallel pass at that precision.
        for session in (cached, uncached):
            stitched = session.self_attention(layer)
            assert stitched.shape == full_self[layer].shape
            assert np.abs(stitched - full_self[layer]).max() <= 2e-3
        if full_cross:
            stitched = cached.cross_attention(layer)
            assert stitched.shape == full_cross[layer].shape
            assert np.abs(stitched - full_cross[layer]).max() <= 2e-3


@pytest.mark.parametrize("family", ["gpt2", "llama", "marian"])
def test_cache_on_equals_cache_off_tiny(checkpoints, family):
    check_cache_parity(explorer.load_model(str(checkpoints[family])), PROMPTS[family])


@pytest.mark.slow
def test_cache_on_equals_cache_off_smollm2(smollm2):
    check_cache_parity(smollm2, "Once upon a time, in a small village,")


def test_cache_size_grows_by_one_position_per_step(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]))
    c = loaded.config
    session = explorer.GenerationSession(loaded, "Attention is all")
    for _ in range(3):
        result = session.step()
        expected = 2 * c.n_layers * c.n_kv_heads * c.head_dim * len(session.token_ids) * 4
        assert result.cache_bytes == expected


def test_translator_cross_attention_cache_is_computed_once(checkpoints):
    loaded = explorer.load_model(str(checkpoints["marian"]))
    session = explorer.GenerationSession(loaded, "twenty-one")
    first = session.cache.cross_attn[0].keys
    session.step()
    session.step()
    assert session.cache.cross_attn[0].keys is first
    c = loaded.config
    assert session.cache.cross_attn_bytes == 2 * c.n_layers * c.n_kv_heads * c.head_dim * len(session.source_ids) * 4


def test_compare_cache_modes_checks_tokens(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    session = explorer.GenerationSession(loaded, "The quick brown fox")
    for _ in range(5):
        session.step()
    session.undo()
    session.force(int(session.top_candidates()[3].token_id))
    comparison = session.compare_cache_modes()
    assert comparison.tokens_identical
    assert comparison.tokens_cached == session.generated_ids
    assert len(comparison.ms_cached) == len(comparison.ms_uncached) == 5
    assert comparison.max_logit_difference <= 1e-4


@pytest.mark.parametrize("family", ["gpt2", "llama", "marian"])
def test_sampling_gives_the_same_tokens_with_the_cache_on_and_off(checkpoints, family):
    """The README's claim for sampling, not only greedy: the seed is combined with the position,
    so both runs draw the same token at every step (and the draws are not all the greedy ones)."""
    loaded = explorer.load_model(str(checkpoints[family]))
    runs = {}
    for use_cache in (True, False):
        session = explorer.GenerationSession(
            loaded, PROMPTS[family], use_cache=use_cache, temperature=1.5, top_k=50, top_p=0.95, seed=7
        )
        for _ in range(30):
            if session.finished:
                break
            session.step()
        runs[use_cache] = session.generated_ids
    greedy = explorer.GenerationSession(loaded, PROMPTS[family])
    for _ in range(len(runs[True])):
        if greedy.finished:
            break
        greedy.step()
    assert runs[True] == runs[False]
    assert runs[True] != greedy.generated_ids  # it really sampled
