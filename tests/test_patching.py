"""Activation patching (explorer/analysis/patching.py) on tiny checkpoints: the batched sweep
equals patching one cell at a time, and it restores exactly what it should."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.patching import patching_sweep
from explorer.experiments import tap_values
from explorer.model import patch_values
from explorer.model.trace import residual_stream_names
from explorer.session import InputError

# Two texts every tiny tokenizer splits into the same number of tokens, differing in one of them.
CLEAN, CORRUPTED = "b a c", "a a c"


@pytest.fixture(scope="module", params=["gpt2", "llama", "marian"])
def pair(request, checkpoints):
    loaded = explorer.load_model(str(checkpoints[request.param]))
    clean, corrupted = explorer.GenerationSession(loaded, CLEAN), explorer.GenerationSession(loaded, CORRUPTED)
    probabilities = clean.next_token_probabilities()
    answer, other = probabilities.topk(2).indices.tolist()
    return clean, corrupted, answer, other


def positions_of(session) -> list[int]:
    """The ids whose positions are patched: a translator's source, a decoder's text."""
    return session.source_ids if session.is_encoder_decoder else session.token_ids


def differing(clean, corrupted) -> list[int]:
    pairs = list(zip(positions_of(clean), positions_of(corrupted), strict=True))
    return [p for p, (a, b) in enumerate(pairs) if a != b]


def test_the_first_layer_restores_exactly_where_the_texts_differ(pair):
    """Entering layer 0 the residual is the embeddings: patching the position where the texts
    differ makes the input the clean one (1), patching a position where they agree changes nothing (0)."""
    clean, corrupted, answer, other = pair
    result = patching_sweep(clean, corrupted, answer, other)
    changed = differing(clean, corrupted)
    assert changed
    np.testing.assert_allclose(result.residual[0, changed], 1.0, atol=1e-4)
    same = [p for p in range(result.residual.shape[1]) if p not in changed]
    np.testing.assert_allclose(result.residual[0, same], 0.0, atol=1e-4)
    assert result.stack == ("encoder" if clean.is_encoder_decoder else "decoder")


def logit_difference(session, ids: list[int], answer: int, other: int, interventions=()) -> float:
    """LD of the last position for ``ids`` (a translator: as its source, decoding the session's target)."""
    model = session.model
    with torch.inference_mode():
        if session.is_encoder_decoder:
            memory, _ = model.encode(session.ids_tensor(ids), interventions=interventions)
            logits = model(session.ids_tensor(session.token_ids), memory).logits[0, -1]
        else:
            logits = model(session.ids_tensor(ids), interventions=interventions).logits[0, -1]
    return float(logits[answer] - logits[other])


def test_the_batched_sweep_equals_patching_one_cell_at_a_time(pair):
    clean, corrupted, answer, other = pair
    result = patching_sweep(clean, corrupted, answer, other)
    stack = result.stack
    n_layers = clean.config.n_encoder_layers if stack == "encoder" else clean.config.n_layers
    names = residual_stream_names(n_layers, stack)[:-1]
    clean_values = functools.partial(tap_values, clean)  # a whole-sequence pass of the clean run, one tap at a time
    base = logit_difference(corrupted, positions_of(corrupted), answer, other)
    target = logit_difference(clean, positions_of(clean), answer, other)
    for layer in range(n_layers):
        values = clean_values(names[layer])
        for position in range(len(positions_of(corrupted))):
            patch = [patch_values(names[layer], [position], values)]
            one = logit_difference(corrupted, positions_of(corrupted), answer, other, patch)
            assert result.residual[layer, position] == pytest.approx((one - base) / (target - base), abs=1e-4)
    for head in range(clean.config.n_heads):  # one head's output at every position, last layer
        tap = f"{stack}.{n_layers - 1}.self_attn.z"
        values = clean_values(tap)  # (1, heads, T, hd): the clean run's at this head, the corrupted run's elsewhere
        this_head = torch.arange(values.shape[1])[None, :, None, None] == head
        mixed = torch.where(this_head, values, tap_values(corrupted, tap))
        patch = [patch_values(tap, range(len(positions_of(corrupted))), mixed)]
        one = logit_difference(corrupted, positions_of(corrupted), answer, other, patch)
        assert result.heads[n_layers - 1, head] == pytest.approx((one - base) / (target - base), abs=1e-4)
    assert (result.clean_difference, result.corrupted_difference) == (
        pytest.approx(target, abs=1e-5), pytest.approx(base, abs=1e-5)
    )  # fmt: skip


def test_a_pair_that_cannot_be_compared_is_refused(pair):
    clean, _, answer, other = pair
    with pytest.raises(InputError, match="no difference to restore"):
        patching_sweep(clean, clean, answer, other)
    longer = explorer.GenerationSession(clean.loaded, CLEAN + " c c")
    with pytest.raises(InputError, match="same number of tokens"):
        patching_sweep(clean, longer, answer, other)


def test_a_translators_decoder_positions_are_patched_too(pair):
    """The target so far is the same in both runs: its residual differs only by what
    cross-attention read from the two sources. Each cell equals patching it alone."""
    clean, corrupted, answer, other = pair
    if not clean.is_encoder_decoder:
        pytest.skip("a decoder-only model's positions are its text: the sweep above")
    result = patching_sweep(clean, corrupted, answer, other)
    n_layers, n_positions = clean.config.n_layers, len(clean.token_ids)
    assert result.decoder_residual.shape == (n_layers, n_positions)
    assert result.decoder_positions == corrupted.token_texts()
    np.testing.assert_allclose(result.decoder_residual[0], 0.0, atol=1e-5)  # the same target embeddings
    names = residual_stream_names(n_layers, "decoder")[:-1]
    base, target = result.corrupted_difference, result.clean_difference
    with torch.inference_mode():
        memory, _ = corrupted.model.encode(corrupted.ids_tensor(corrupted.source_ids))
        for layer in range(1, n_layers):
            values = tap_values(clean, names[layer])  # the clean run's decoder residual
            for position in range(n_positions):
                patch = [patch_values(names[layer], [position], values)]
                logits = corrupted.model(corrupted.ids_tensor(corrupted.token_ids), memory, interventions=patch).logits
                one = float(logits[0, -1, answer] - logits[0, -1, other])
                assert result.decoder_residual[layer, position] == pytest.approx(
                    (one - base) / (target - base), abs=1e-4
                )
