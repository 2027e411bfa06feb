"""Cache policies on the real Gemma 3 270M (issue 44): transformers as the oracle within 1e-3.

The budget (16) is shorter than the text, and the text than Gemma's window of 512: the policy evicts
on the three global layers (5, 11, 17) and, its budget being within their window, on the fifteen
sliding ones alike, whose window passes nothing here. (A window narrower than the budget, and one
wider that passes what the policy kept, are checked on the tiny Gemma 3 and Mistral of
tests/test_cache_policies.py, with the same reference.) The reference hands each of transformers'
layers a mask of what it holds, a sliding layer's cut by its window.
"""

from __future__ import annotations

import pytest

import explorer
from explorer import cache_policies as cp
from tests.test_cache_policies import SlidingReference, not_the_end

TEXT = (
    "When in the Course of human events, it becomes necessary for one people to dissolve the political bands "
    "which have connected them with another"
)


@pytest.mark.parametrize("policy", [cp.heavy_hitters(8, 8)], ids=lambda p: p.name)
def test_a_policy_on_gemma3_gives_transformers_logits_on_global_and_sliding_layers(gemma3, hf_gemma3, policy):
    c = gemma3.config
    session = explorer.GenerationSession(gemma3, TEXT, cache_policy=policy)
    reference = SlidingReference(hf_gemma3, policy, c.windows(), c.n_kv_heads)
    try:
        for position, token in enumerate(session.token_ids):
            logits = reference.step(token, position)
        n_prompt = len(session.token_ids)
        assert policy.budget + 8 < n_prompt < c.sliding_window  # it evicted while reading the prompt
        for _ in range(6):
            assert (session.next_logits() - logits).abs().max() <= 1e-3
            token = not_the_end(session)
            logits = reference.step(token, len(session.token_ids) - 1)
        for layer in range(c.n_layers):
            held = [sorted(row) for row in session.cache.held_positions(layer).tolist()]
            assert held == [sorted(p) for p in reference.held[layer]]
            assert all(len(row) == policy.budget for row in held), layer
    finally:
        reference.remove_hooks()  # the model is shared with the parity tests
