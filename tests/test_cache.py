"""The KV cache changes speed, never output: cache on against cache off, for every family."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.cache_modes import compare_cache_modes
from explorer.model import Record

N_STEPS = 50
FAMILIES = ["gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "opt", "gpt_neox", "gemma3_text",
            "marian", "bart", "mbart", "t5", "flan_t5"]  # fmt: skip
PROMPTS = {
    "gpt2": "The quick brown fox", "llama": "Attention is all", "qwen2": "Biases on q, k and v", "mistral": "A wind",
    "phi3": "Fused qkv", "qwen3": "Normalised queries", "opt": "Offset positions",
    "gpt_neox": "Side by side", "gemma3_text": "A window of six slides along",
    "marian": "twenty-one on March 3", "bart": "three hundred and forty-two", "mbart": "Wednesday, March 3, 2021",
    "t5": "twenty-one einundzwanzig three hundred", "flan_t5": "at 7:30 PM um 19:30",
}  # fmt: skip


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
    cached, logits_on, _ = run(loaded, text, use_cache=True)
    uncached, logits_off, _ = run(loaded, text, use_cache=False)

    assert cached.generated_ids == uncached.generated_ids
    assert len(cached.generated_ids) == N_STEPS
    assert (logits_on - logits_off).abs().max() <= 1e-4
    assert cached.cache_bytes > 0 and uncached.cache_bytes == 0

    out, full_self, full_cross = full_forward_attention(cached)
    # The logits of the parallel pass at every position equal the step-by-step ones.
    steps = logits_on.shape[0]
    assert (out.logits[0, -steps:] - logits_on).abs().max() <= 1e-4
    T = len(cached.token_ids)
    for layer in range(loaded.config.n_layers):
        # The last cached step's own row, from the query and keys it kept, equals the parallel pass's.
        row = cached.self_attention(layer, T - 1, T)[:, 0]  # (heads, T): the last token's row
        assert np.abs(row - full_self[layer][:, -1]).max() <= 1e-5
        # Attention on demand, from the queries and keys the steps kept, equals the parallel pass.
        for session in (cached, uncached):
            stitched = session.self_attention(layer)
            assert stitched.shape == full_self[layer].shape
            assert np.abs(stitched - full_self[layer]).max() <= 1e-5
            if full_cross:
                stitched = session.cross_attention(layer)
                assert stitched.shape == full_cross[layer].shape
                assert np.abs(stitched - full_cross[layer]).max() <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
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
    comparison = compare_cache_modes(session)
    assert comparison.tokens_identical
    assert comparison.tokens_cached == session.generated_ids
    assert len(comparison.ms_cached) == len(comparison.ms_uncached) == 5
    assert comparison.max_logit_difference <= 1e-4


@pytest.mark.parametrize("family", FAMILIES)
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


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_on_demand_equals_the_full_pass_after_undo_force_and_cache_switches(checkpoints, family):
    """The attention a view computes from the kept queries and keys is the full pass's, however
    the session got there: undo, a forced candidate, steps with the cache off and on again."""
    loaded = explorer.load_model(str(checkpoints[family]))
    session = explorer.GenerationSession(loaded, PROMPTS[family])
    for _ in range(4):
        session.step()
    session.undo()
    session.undo()
    session.force(session.top_candidates()[2].token_id)
    session.set_use_cache(False)
    session.step()
    session.step()
    session.set_use_cache(True)
    session.step()
    session.undo()
    _, full_self, full_cross = full_forward_attention(session)
    T = len(session.token_ids)
    for layer in range(loaded.config.n_layers):
        assert np.abs(session.self_attention(layer) - full_self[layer]).max() <= 1e-5
        assert np.abs(session.self_attention(layer, 2, 5) - full_self[layer][:, 2:5]).max() <= 1e-5  # some rows
        if full_cross:
            assert np.abs(session.cross_attention(layer) - full_cross[layer]).max() <= 1e-5
    for position in (0, T // 2, T - 1):
        rows = session.query_attention(position)  # (layers, heads, position + 1)
        expected = np.stack([full_self[i][:, position, : position + 1] for i in range(loaded.config.n_layers)])
        assert np.abs(rows - expected).max() <= 1e-5


def test_steps_run_the_fused_kernel_and_never_materialise_probabilities(checkpoints, monkeypatch):
    """Attention on demand: the session's passes (the prefill, cached and uncached steps) keep
    queries and keys and take PyTorch's fused kernel; the probabilities exist only when asked."""
    from explorer.model import attention, attention_kernels

    fused, explicit = [], []
    original = attention_kernels.F.scaled_dot_product_attention
    monkeypatch.setattr(
        attention_kernels.F, "scaled_dot_product_attention", lambda *a, **k: fused.append(1) or original(*a, **k)
    )
    original_eager = attention.attention
    monkeypatch.setattr(attention, "attention", lambda *a, **k: explicit.append(1) or original_eager(*a, **k))
    loaded = explorer.load_model(str(checkpoints["llama"]))
    session = explorer.GenerationSession(loaded, PROMPTS["llama"])
    session.step()
    session.set_use_cache(False)
    session.step()
    assert fused and not explicit
    assert session.self_attention(0).shape[1:] == (len(session.token_ids),) * 2  # computed now, on demand


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_viewed_between_operations_stays_the_full_pass(checkpoints, family):
    """A view keeps its layer's rows and, after a step, computes only the new row: viewed after
    every operation (and switching layers), it is still the full pass's; and an array handed out
    before an undo or a force never changes under its holder."""
    loaded = explorer.load_model(str(checkpoints[family]))
    session = explorer.GenerationSession(loaded, PROMPTS[family])
    last_layer = loaded.config.n_layers - 1
    operations = [
        session.step, session.step, session.undo, lambda: session.force(session.top_candidates()[1].token_id),
        lambda: session.set_use_cache(False), session.step, lambda: session.set_use_cache(True), session.step,
        session.undo, session.undo,
    ]  # fmt: skip
    handed_out = []
    for i, operation in enumerate(operations):
        operation()
        _, full_self, full_cross = full_forward_attention(session)
        layer = last_layer if i % 3 == 2 else 0  # now and then another layer, then back
        shown = session.self_attention(layer)
        assert np.abs(shown - full_self[layer]).max() <= 1e-5, i
        handed_out.append((shown, shown.copy()))
        if full_cross:
            assert np.abs(session.cross_attention(layer) - full_cross[layer]).max() <= 1e-5, i
    for shown, copy in handed_out:
        assert np.array_equal(shown, copy)


def test_the_compare_line_states_what_the_cache_cost_and_held():
    """docs/using.md: Compare states the cache size in MB (it did not: a stranger found only the
    noisy single steps); each run's median step, and their ratio."""
    from explorer.analysis.cache_modes import CacheComparison
    from explorer.present.views import costs

    comparison = CacheComparison(
        positions=[5, 6, 7], ms_cached=[10.0, 30.0, 12.0], ms_uncached=[40.0, 50.0, 200.0],
        tokens_cached=[1, 2, 3], tokens_uncached=[1, 2, 3], max_logit_difference=0.0, cache_bytes=690_000,
        token_ids=[0, 1, 2, 3],
    )  # fmt: skip
    said = costs(comparison)
    assert "12 ms with the cache (0.69 MB of keys and values held)" in said
    assert "50 ms without it (4.2x)" in said
