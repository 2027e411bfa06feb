"""What must hold of any attention the explorer shows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.model import Record
from explorer.model.attention import causal_mask


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "gpt_neox", "gemma3_text", "marian", "t5"])
def test_rows_sum_to_one_and_the_future_is_exactly_zero(checkpoints, family):
    """And, in a sliding layer (Gemma 3's 0 and 2), what lies before the window."""
    loaded = explorer.load_model(str(checkpoints[family]))
    session = explorer.GenerationSession(loaded, "The quick brown fox jumps")
    for _ in range(6):
        session.step()
    for layer in range(loaded.config.n_layers):
        attn = session.self_attention(layer)  # (heads, T, T)
        T = len(session.token_ids)
        assert attn.shape == (loaded.config.n_heads, T, T)
        assert np.allclose(attn.sum(-1), 1.0, atol=1e-5)
        hidden = ~causal_mask(T, T, window=loaded.config.window_of(layer)).numpy()
        assert (attn[:, hidden] == 0).all()
        assert (attn[:, ~hidden] > 0).all()
    if loaded.is_encoder_decoder:
        for layer in range(loaded.config.n_layers):
            cross = session.cross_attention(layer)  # (heads, T, S): nothing masked
            assert np.allclose(cross.sum(-1), 1.0, atol=5e-3)
            assert (cross > 0).all()
        for layer in range(loaded.config.n_encoder_layers):
            enc = session.encoder_attention(layer)  # (heads, S, S): nothing masked
            assert enc.shape[1] == enc.shape[2] == len(session.source_ids)
            assert (enc > 0).all()


def test_model_level_probabilities_are_exact(checkpoints):
    loaded = explorer.load_model(str(checkpoints["llama"]))
    ids = torch.tensor([loaded.tokenizer("Attention is all you need")["input_ids"]])
    with torch.no_grad():
        trace = loaded.model(ids, record=Record.of("attention")).trace
    probs = trace.self_attention(0)[0]
    T = ids.shape[1]
    assert torch.allclose(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-6)
    assert (probs[:, ~causal_mask(T, T)] == 0).all()


def test_causal_mask_with_cached_prefix():
    mask = causal_mask(2, 5)  # the last two of five positions
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
    windowed = causal_mask(2, 5, window=2)  # each reads itself and the one before
    assert windowed.tolist() == [[False, False, True, True, False], [False, False, False, True, True]]


def test_removing_the_mask_lets_the_future_in(checkpoints):
    loaded = explorer.load_model(str(checkpoints["gpt2"]))
    ids = torch.tensor([loaded.tokenizer("The quick brown fox")["input_ids"]])
    with torch.no_grad():
        masked = loaded.model(ids, record=Record.of("attention"))
        open_ = loaded.model(ids, record=Record.of("attention"), causal=False)
    assert (open_.trace.self_attention(0)[0, :, 0, 1:] > 0).all()
    assert not torch.allclose(masked.logits[0, 0], open_.logits[0, 0])
